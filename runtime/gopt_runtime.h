/* gopt_runtime.h: the real-hardware evaluator: run one training step of a decided graph on this
 * machine's CPUs (or CUDA GPUs) and measure it.
 *
 * The second implementation of the evaluator seam beside the simulator (sim/gopt_sim.h), with
 * the same result (gopt_sim_result: step time, per-device busy time, peak memory, OOM) and the
 * same task rules, so the two can be set side by side:
 *   - a task is one unfused node or one fusion group, named by its member first in topological
 *     order; its priority is the largest of its members', ties by that member's topological rank;
 *   - a task is ready when every tensor it reads from outside is present on its device; each
 *     device runs one task at a time, its ready task of highest priority first;
 *   - a finished task's external output is copied once to each other device that consumes it
 *     (bytes: the largest edge to that device), one copy at a time per link, first in first out;
 *   - memory per device: parameters resident all step; an output allocated when its task
 *     starts, freed when its task, its local consumers and its outgoing copies are done; a
 *     received copy allocated when its copy starts, freed when its consumers there are done;
 *     tensors internal to a fused group take none.
 *
 * CPU backend: device d is a worker thread pinned to core d (modulo the cores this process may
 * use) with its own memory arena (a caching allocator: buffers are kept for reuse across
 * repetitions, as frameworks do, and counted in use only between the model's allocation and free
 * points, so the peak is the bytes actually held then); every used link is a thread doing real
 * memcpy between the arenas. Kernels are real and sized from the node (docs/runtime.md): gemm is
 * cblas_sgemm of the node's (m, n, k), conv is im2col + sgemm, elementwise, reduction and data
 * movement are memory-bound kernels over the node's input and output bytes, a node without a
 * shape gets a stand-in sized from its FLOPs and bytes; a fused group runs as one kernel that
 * writes none of its intermediates to memory. OpenBLAS runs one thread per device thread.
 * With more devices than cores, threads share cores and the timings say little.
 *
 * CUDA backend (built when the toolkit is found): one GPU per device, a compute stream per GPU
 * and a copy stream per used link, convolutions by cuDNN where the build has it (or im2col +
 * cublasSgemm, gopt_rt_cuda_conv); GOPT_EUNSUP when this build or machine has no GPU.
 *
 * Cost: a run is `warmup + reps` real steps; setup allocates the parameters, one workspace per
 * device and (once) every buffer size the step uses. Not thread-safe: one run at a time per
 * gopt_runtime.
 */
#ifndef GOPT_RUNTIME_H
#define GOPT_RUNTIME_H

#include <stdint.h>

#include "gopt_common.h"
#include "gopt_cost.h"
#include "gopt_decisions.h"
#include "gopt_graph.h"
#include "gopt_sim.h"

typedef enum { GOPT_RT_CPU = 0, GOPT_RT_CUDA, GOPT_RT_BACKEND_COUNT } gopt_rt_backend;

const char *gopt_rt_backend_name(gopt_rt_backend b); /* "cpu", "cuda"; NULL out of range */
int gopt_rt_backend_parse(const char *s);              /* -1 when unknown */

/* What a step's times are made of. WALL: the clock on the wall, the truth on a quiet machine.
 * CPU: each kernel's and copy's own thread CPU time, composed along the run's real order and
 * dependencies (each device runs its kernels in the order it really ran them, each link its
 * copies; a kernel starts when its device is free and its inputs have arrived): the step the
 * hardware gave, without the time the threads spent descheduled. It is robust on a machine
 * shared with other jobs; memory stalls and bandwidth contention still count. CPU_MIN: the same
 * composition (along the median CPU-clock step's order) with each kernel's and copy's least CPU
 * time over the timed steps: the uncontended step, measured the way the CPU calibrator measures
 * its kernels (other jobs only add time, so the fastest repetition is the machine's own). */
typedef enum { GOPT_RT_CLOCK_WALL = 0, GOPT_RT_CLOCK_CPU, GOPT_RT_CLOCK_CPU_MIN, GOPT_RT_CLOCK_COUNT } gopt_rt_clock;
const char *gopt_rt_clock_name(gopt_rt_clock c); /* "wall", "cpu", "cpu-min" */
int gopt_rt_clock_parse(const char *s);           /* -1 when unknown */

/* What the CUDA backend runs a convolution node as (docs/runtime.md). A node carries its output
 * shape and FLOPs, read as an implicit GEMM (m, n, k) (gopt_cost_node_gemm_dims), not its kernel size:
 * CUDNN runs cudnnConvolutionForward on a 2-d convolution of those FLOPs (m output pixels, n
 * filters, k = channels x taps; the runtime derives it), with the algorithm cuDNN's heuristics
 * rank first, as the CUDA calibrator measures convolutions; IM2COL gathers the implicit GEMM's
 * rows (a kernel) and multiplies them with cublasSgemm, block by block. DEFAULT is CUDNN where
 * this build has cuDNN, else IM2COL. */
typedef enum {
    GOPT_RT_CUDA_CONV_DEFAULT = 0,
    GOPT_RT_CUDA_CONV_CUDNN,
    GOPT_RT_CUDA_CONV_IM2COL,
    GOPT_RT_CUDA_CONV_COUNT
} gopt_rt_cuda_conv;
const char *gopt_rt_cuda_conv_name(gopt_rt_cuda_conv c); /* "default", "cudnn", "im2col"; NULL out of range */
int gopt_rt_cuda_conv_parse(const char *s);               /* "cudnn" or "im2col"; -1 otherwise */
int gopt_rt_cudnn_built(void);                            /* 1 when this build has cuDNN */
/* DEFAULT as this build reads it (CUDNN or IM2COL); other values unchanged. */
gopt_rt_cuda_conv gopt_rt_cuda_conv_resolve(gopt_rt_cuda_conv c);

typedef struct {
    gopt_rt_backend backend;
    int warmup;          /* untimed steps first (they also fill the arenas' caches); < 0: 1 */
    int reps;            /* timed steps, >= 1; 0: 5 */
    int no_pin;          /* CPU: leave the device threads unpinned */
    double host_fraction; /* CPU: refuse a step needing more than this fraction of the machine's
                             memory (parameters + peak activations + workspaces); 0: 0.5 */
    gopt_rt_clock clock;  /* CPU backend; the CUDA backend always uses GPU events */
    int cuda_graph;       /* CUDA, one GPU: capture the step's issue once as a CUDA graph and replay
                             it for every step, so that the GPU's own step is measured, without the
                             host's per-kernel issue time (the steps a compiler's executable or a
                             captured framework step gives); GOPT_EUNSUP on more than one GPU */
    gopt_rt_cuda_conv cuda_conv; /* CUDA: the convolution's kernel (0: cuDNN where built); another
                                    value than DEFAULT on the CPU backend is GOPT_EINVAL, CUDNN in
                                    a build without cuDNN GOPT_EUNSUP */
} gopt_rt_options;

/* What a run measured. */
typedef struct {
    gopt_sim_result res;   /* of the median repetition (its step is step_median_s) */
    int reps;
    double step_median_s;  /* cpu-min clock: the step composed of each kernel's fastest repetition */
    double step_min_s, step_max_s; /* over the timed repetitions (cpu-min: their cpu-clock steps) */
    double spread;         /* (max - min) / median over the timed repetitions */
    double steps_s[64];    /* the first min(reps, 64) timed steps, in order */
    double setup_s;        /* wall time of the setup (allocation, first touch) */
    int conv_cudnn, conv_im2col; /* CUDA: convolution nodes run by cuDNN and as im2col + sgemm
                                    (under cuDNN, those whose shape it does not take) */
} gopt_rt_report;

typedef struct gopt_runtime gopt_runtime;

/* Prepare a runtime for finalized graph g on the devices of cost model cm (their number, their
 * memory capacities; the simulator the runtime keeps for its host-memory check and the CUDA
 * issue order uses cm too). g and cm must outlive the runtime. */
gopt_status gopt_rt_create(const gopt_graph *g, const gopt_costmodel *cm, gopt_runtime **out, gopt_error *err);
void gopt_rt_free(gopt_runtime *rt);
int gopt_rt_num_devices(const gopt_runtime *rt);

/* Run decisions d (validated here: GOPT_EINVAL naming the node for a device out of range, a bad
 * fusion group, a colocation split) warmup + reps times and fill *rep. GOPT_EUNSUP when the
 * backend is not available (no GPU, a build without CUDA) or the step does not fit in host
 * memory; a device over its capacity is an OOM result, as in the simulator. */
gopt_status gopt_rt_run(gopt_runtime *rt, const gopt_decisions *d, const gopt_rt_options *o, gopt_rt_report *rep,
                        gopt_error *err);

/* ---- the median repetition's timeline (after a successful run) ------------------------------ */
/* Start and end (seconds from the step's start) of the kernel that ran node v (a fused node
 * shares its group's); -1 for a node that did not run. */
double gopt_rt_node_start(const gopt_runtime *rt, int32_t v);
double gopt_rt_node_end(const gopt_runtime *rt, int32_t v);
/* When the node's kernel became ready (its last input arrived on its device; 0 when it waits for
 * nothing), and the device that ran it (the worker thread or GPU), -1 when it did not run. */
double gopt_rt_node_ready(const gopt_runtime *rt, int32_t v);
int gopt_rt_node_device(const gopt_runtime *rt, int32_t v);
int32_t gopt_rt_num_transfers(const gopt_runtime *rt);
void gopt_rt_transfer_get(const gopt_runtime *rt, int32_t i, gopt_sim_transfer *out);
/* Trace-event JSON in the simulator's format (gopt_trace_timeline_json), atomically to path. */
gopt_status gopt_rt_trace_write(const gopt_runtime *rt, const gopt_decisions *d, const char *path, gopt_error *err);

/* The evaluator seam: a gopt_bl_evaluate_fn over the runtime (ctx: gopt_rt_eval_ctx); the step is
 * the median of opt.reps measured steps; -1 on failure (the message in err). */
typedef struct {
    gopt_runtime *rt;
    gopt_rt_options opt;
    gopt_rt_report last;
    gopt_error err;
} gopt_rt_eval_ctx;
double gopt_rt_evaluate(void *ctx, const gopt_decisions *d, int *oom);

/* ---- fidelity: the simulator against the runtime (validate.c) ----------------------------- */
typedef struct {
    double sim_s;  /* the simulator's step (the cost model rt was created with) */
    double real_s; /* the measured median step */
    double error;  /* (sim - real) / real */
    double spread; /* of the measured steps */
    int oom;       /* either evaluator reported out of memory */
} gopt_rt_fidelity_row;

/* Simulate and run each of the k decision sets ds (options o) into rows. Stops at the first
 * failure (its status; the rows before it are filled). */
gopt_status gopt_rt_fidelity(gopt_runtime *rt, const gopt_decisions *ds, int k, const gopt_rt_options *o,
                             gopt_rt_fidelity_row *rows, gopt_error *err);
/* Spearman's rank correlation of x and y (n pairs; ties get their average rank); NaN when n < 2
 * or either side is constant. */
double gopt_rt_spearman(const double *x, const double *y, int n);
/* The q-quantile (0..1) of n values, linear between order statistics; NaN when n == 0. */
double gopt_rt_quantile(const double *v, int n, double q);

#endif /* GOPT_RUNTIME_H */
