/* gopt_profile.h: device and cluster profiles.
 *
 * A profile describes one cluster: its devices (kind, model, memory
 * capacity, peak FLOP/s per dtype, memory bandwidth, kernel launch
 * overhead), the links between every ordered pair of devices (bandwidth,
 * latency, optionally a measured copy-time table), measured cost tables per
 * op class (GEMM time as a function of m,n,k; convolution time as a function
 * of FLOPs; elementwise and reduction time as a function of bytes), and its
 * provenance (datasheet, or measured: machine, date, command).
 *
 * The file format is JSON (docs/profiles.md). A profile is loaded,
 * validated and then immutable: every accessor is O(1) and the handle may be
 * shared read-only between threads. Device ids are 0..n-1 in file order
 * (a device entry with "count": k expands to k devices).
 *
 * Invariants after a successful load: 1 to GOPT_PROFILE_MAX_DEVICES devices;
 * every number within the bounds below;
 * a link (bandwidth > 0, latency >= 0) for every ordered pair of distinct
 * devices; every table non-empty with positive coordinates and times.
 */
#ifndef GOPT_PROFILE_H
#define GOPT_PROFILE_H

#include <stdint.h>

#include "gopt_common.h"

/* Bounds on what a profile may declare (docs/profiles.md, "Bounds"),
 * inclusive: far outside any real machine, tight enough that every time the
 * cost model and the simulator derive from a bounded graph stays finite. */
#define GOPT_PROFILE_MAX_DEVICES 64            /* devices in all (the simulator's limit) */
#define GOPT_PROFILE_MIN_RATE 1.0              /* FLOP/s and bytes/s: peaks, bandwidths */
#define GOPT_PROFILE_MAX_FLOPS_RATE 1e18       /* FLOP/s per device and dtype */
#define GOPT_PROFILE_MAX_BANDWIDTH 1e16        /* bytes/s, memory and links */
#define GOPT_PROFILE_MAX_MEMORY 1152921504606846976.0 /* 2^60 bytes per device; at least 1 */
#define GOPT_PROFILE_MAX_DELAY 1.0             /* seconds: launch overhead, link latency (at least 0) */
#define GOPT_PROFILE_MIN_TABLE_TIME 1e-12      /* seconds in a measured table row */
#define GOPT_PROFILE_MAX_TABLE_TIME 1e6
#define GOPT_PROFILE_MAX_TABLE_DIM 2147483647.0 /* GEMM m, n, k (at least 1) */
#define GOPT_PROFILE_MAX_TABLE_FLOPS 1e21       /* conv table flops (at least 1) */
#define GOPT_PROFILE_MAX_TABLE_BYTES 1125899906842624.0 /* 2^50: elementwise, reduction, copy bytes (at least 1) */
#define GOPT_PROFILE_MIN_EFFICIENCY 1e-3        /* efficiency factors: op time multipliers */
#define GOPT_PROFILE_MAX_EFFICIENCY 1e3
#define GOPT_PROFILE_MAX_FRESH_ROWS 64          /* efficiency.fresh_output rows */

typedef struct gopt_profile gopt_profile; /* a cluster: devices, links, cost tables, provenance */

typedef enum { GOPT_DEVICE_CPU = 0, GOPT_DEVICE_GPU, GOPT_DEVICE_KIND_COUNT } gopt_device_kind;

/* Number formats with a peak FLOP/s entry ("fp32", "fp16", ...). */
typedef enum {
    GOPT_DTYPE_FP32 = 0,
    GOPT_DTYPE_FP16,
    GOPT_DTYPE_BF16,
    GOPT_DTYPE_TF32,
    GOPT_DTYPE_FP64,
    GOPT_DTYPE_INT8,
    GOPT_DTYPE_COUNT
} gopt_dtype;

/* Measured cost tables. Each row holds the table's coordinates then the
 * measured time in seconds:
 *   GEMM        (m, n, k, seconds)      C(m,n) = A(m,k) B(k,n), fp32
 *   CONV        (flops, seconds)        one forward convolution
 *   ELEMENTWISE (bytes, seconds)        bytes read + written
 *   REDUCTION   (bytes, seconds)        bytes read
 *   CONV_GEMM   (m, n, k, seconds)      one forward convolution by its implicit GEMM: m output
 *                                       pixels (N H W), n filters, k = input channels x taps
 *   COPY        (bytes, seconds)        one copy over a link (link tables only) */
typedef enum {
    GOPT_TABLE_GEMM = 0,
    GOPT_TABLE_CONV,
    GOPT_TABLE_ELEMENTWISE,
    GOPT_TABLE_REDUCTION,
    GOPT_TABLE_CONV_GEMM,
    GOPT_TABLE_COPY,
    GOPT_TABLE_KIND_COUNT
} gopt_table_kind;

/* Op kinds of the efficiency factors (docs/profiles.md, "Efficiency"): the op classes, with
 * convolutions whose weight has one input channel (depthwise) apart, the normalization layers'
 * reductions (batch, layer, group, instance and RMS norms, forward and backward) apart from other
 * reductions, and the optimizer's elementwise updates apart from other elementwise ops. A profile
 * whose factors leave out normalization or optimizer uses reduction's or elementwise's. */
typedef enum {
    GOPT_OP_KIND_GEMM = 0,
    GOPT_OP_KIND_CONV,
    GOPT_OP_KIND_DEPTHWISE_CONV,
    GOPT_OP_KIND_ELEMENTWISE,
    GOPT_OP_KIND_REDUCTION,
    GOPT_OP_KIND_DATA_MOVEMENT,
    GOPT_OP_KIND_OTHER,
    GOPT_OP_KIND_NORMALIZATION,
    GOPT_OP_KIND_OPTIMIZER,
    GOPT_OP_KIND_COUNT
} gopt_op_kind;

/* "gemm", "conv", "depthwise_conv", "elementwise", "reduction", "data_movement", "other",
 * "normalization", "optimizer"; NULL when out of range. */
const char *gopt_op_kind_name(gopt_op_kind k);

typedef struct {
    int32_t n;            /* rows, > 0 */
    int32_t dim;          /* coordinates per row (3 for GEMM, else 1) */
    const double *points; /* (n, dim + 1) owned by the profile */
} gopt_profile_table;

/* "gemm", "conv", "elementwise", "reduction", "copy"; NULL when out of range. */
const char *gopt_table_kind_name(gopt_table_kind k);
/* "fp32", ...; NULL when out of range. */
const char *gopt_dtype_name(gopt_dtype t);
/* Parse a dtype name: "fp32", "float32", "f32", "float" -> FP32, etc.
 * Returns -1 when unknown. */
int gopt_dtype_parse(const char *s);
const char *gopt_device_kind_name(gopt_device_kind k); /* "cpu", "gpu" */

/* ---- loading ------------------------------------------------------------- */
/* Load and validate a profile (plain or gzip JSON). Every bad value is
 * rejected with a message naming the file, the field and the value; on error
 * *out is NULL. */
gopt_status gopt_profile_load(const char *path, gopt_profile **out, gopt_error *err);
/* Same, from JSON text in memory; `origin` names it in messages. */
gopt_status gopt_profile_parse(const char *text, size_t len, const char *origin, gopt_profile **out,
                               gopt_error *err);
void gopt_profile_free(gopt_profile *p);

/* Serialize (the loader reads it back to an equal profile): to `b`, or
 * atomically to `path`. Links are written explicitly, one per ordered pair. */
gopt_status gopt_profile_write_json(const gopt_profile *p, gopt_buf *b, gopt_error *err);
gopt_status gopt_profile_save(const gopt_profile *p, const char *path, gopt_error *err);

/* ---- cluster ------------------------------------------------------------- */
const char *gopt_profile_name(const gopt_profile *p);
const char *gopt_profile_description(const gopt_profile *p); /* "" when none */
/* Provenance: "datasheet" or "measured"; machine, date, command may be ""
 * for datasheet profiles; reference is a citation or "" for measured ones. */
const char *gopt_profile_source(const gopt_profile *p);
const char *gopt_profile_machine(const gopt_profile *p);
const char *gopt_profile_date(const gopt_profile *p);
const char *gopt_profile_command(const gopt_profile *p);
const char *gopt_profile_reference(const gopt_profile *p);
/* The named topology the links were built from ("pcie_tree",
 * "nvlink_cube_mesh", "nvswitch", "uniform", "shared_memory") or "explicit". */
const char *gopt_profile_topology(const gopt_profile *p);

int gopt_profile_num_devices(const gopt_profile *p);

/* ---- devices (0 <= d < num_devices) ---------------------------------------- */
const char *gopt_profile_device_name(const gopt_profile *p, int d);
gopt_device_kind gopt_profile_device_kind(const gopt_profile *p, int d);
const char *gopt_profile_device_model(const gopt_profile *p, int d);
double gopt_profile_device_memory(const gopt_profile *p, int d);          /* bytes */
/* Peak FLOP/s for a dtype; 0 when the profile gives none for it. fp32 is
 * always present. */
double gopt_profile_device_peak(const gopt_profile *p, int d, gopt_dtype t);
double gopt_profile_device_bandwidth(const gopt_profile *p, int d);       /* memory bytes/s */
/* A shared_memory topology's `memory_bandwidth`: bytes/s of all devices' memory traffic at once
 * (they share one memory bus; each device alone gets its own memory_bandwidth); 0 when not given. */
double gopt_profile_shared_bandwidth(const gopt_profile *p);
double gopt_profile_device_launch_overhead(const gopt_profile *p, int d); /* seconds per kernel */
/* A measured table of the device, or 0 (and *out zeroed) when it has none. */
int gopt_profile_device_table(const gopt_profile *p, int d, gopt_table_kind kind, gopt_profile_table *out);
/* Device id of a name, or -1. */
int gopt_profile_find_device(const gopt_profile *p, const char *name);

/* ---- efficiency (optional; docs/profiles.md, "Efficiency") --------------------------- */
/* Whether the profile has per-op-kind efficiency factors fitted from framework runs. */
int gopt_profile_has_efficiency(const gopt_profile *p);
/* The factor that multiplies the time of an op of kind k beyond its launch; 1 when absent. */
double gopt_profile_efficiency(const gopt_profile *p, gopt_op_kind k);
/* The framework's own seconds per op (dispatch, autograd), added to every kernel's launch
 * overhead; 0 when absent. */
double gopt_profile_op_overhead(const gopt_profile *p);
/* 1 when the op overhead is paid by a host that dispatches while the device runs (efficiency
 * "dispatch": "overlapped": an eager framework on a GPU, whose kernels are asynchronous): each
 * device's ops are dispatched one after another on a host timeline of their own and an op
 * starts no earlier than its dispatch, instead of adding the overhead to the op's time
 * ("serial", the default: one CPU thread dispatches and runs). */
int gopt_profile_dispatch_overlapped(const gopt_profile *p);
/* The framework's extra seconds for an op that writes `bytes` bytes of output into freshly
 * allocated memory (efficiency.fresh_output: first-touch page faults of the allocator's fresh
 * pages; docs/profiles.md): piecewise linear between the rows, proportional to bytes below the
 * first and beyond the last row's rate. 0 without rows or for bytes <= 0. */
double gopt_profile_fresh_output_time(const gopt_profile *p, double bytes);

/* ---- links (src != dst) ----------------------------------------------------- */
double gopt_profile_link_bandwidth(const gopt_profile *p, int src, int dst); /* bytes/s */
double gopt_profile_link_latency(const gopt_profile *p, int src, int dst);   /* seconds */
/* The measured copy-time table of a link (kind COPY), or 0 when none. */
int gopt_profile_link_table(const gopt_profile *p, int src, int dst, gopt_profile_table *out);

/* ---- calibration ------------------------------------------------------------ */
/* Progress callback: fraction done in [0,1] and what is being measured. */
typedef void (*gopt_progress_fn)(void *ctx, double fraction, const char *what);

typedef struct {
    int ndev;               /* CPU: devices (core groups) to describe; 0 = one per online core */
    double budget_s;        /* soft time budget for the whole calibration; 0 = default (60 s) */
    uint64_t seed;          /* shapes and sizes are drawn from this seed */
    const char *command;    /* the command line recorded as provenance (may be NULL) */
    const char *name;       /* profile name (may be NULL: a default) */
    gopt_progress_fn progress; /* may be NULL */
    void *progress_ctx;
    /* CPU: GEMM shapes (m, n, k triples) measured besides the random ones, first, so
     * that a short budget cuts random points before them: a workload's own layers (gopt profile
     * calibrate --shapes-from). Shapes with a dim below 1, an operand over 256 MB or over 2e10
     * FLOPs are skipped (the cost model scales such GEMMs from the table). May be NULL. */
    const double *gemm_shapes;
    int32_t n_gemm_shapes;
    int32_t *n_gemm_shapes_skipped; /* out, may be NULL: how many of them were skipped */
} gopt_calib_options;

/* Measure this machine's CPU: OpenBLAS sgemm over random shapes, memory
 * bandwidth, elementwise and reduction kernels over sizes, the latency of
 * handing work between threads. Devices are core groups. */
gopt_status gopt_calibrate_cpu(const gopt_calib_options *o, gopt_profile **out, gopt_error *err);
/* Measure each visible CUDA GPU (cuBLAS GEMM, cuDNN convolution,
 * elementwise/reduction kernels, launch overhead, host-device and
 * device-device copies). GOPT_EUNSUP when built without CUDA or when no GPU
 * is present (the message says which). */
gopt_status gopt_calibrate_cuda(const gopt_calib_options *o, gopt_profile **out, gopt_error *err);
/* Whether this build contains the CUDA calibrator. */
int gopt_calibrate_cuda_built(void);

#endif /* GOPT_PROFILE_H */
