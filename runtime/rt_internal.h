/* rt_internal.h: the runtime's plan and backends, shared by the files of runtime/ only.
 *
 * A plan is the static part of a step under one set of decisions, built once per run in
 * O(N + E) (plan.c): the tasks (nodes and fused groups, as the simulator contracts them), what
 * each task waits for, allocates and releases, and every copy (one per produced tensor and
 * consuming device) with the tasks it feeds. The backends execute it: cpu.c (threads), cuda.cu
 * (streams). Both write a timeline (rt_timeline) that runtime.c keeps per repetition.
 */
#ifndef GOPT_RT_INTERNAL_H
#define GOPT_RT_INTERNAL_H

#include "gopt_runtime.h"

typedef struct {
    int32_t n, ndev, ntasks, nxf;
    /* per node */
    int32_t *task;  /* (n) index of the node's task */
    uint8_t *ext;   /* (n) its output leaves its task: allocated at the task's start, maybe copied */
    int64_t *osize; /* (n) bytes of its output on its own device (0 for a param: it is the parameter) */
    int64_t *psize; /* (n) resident parameter bytes */
    int32_t *hold0; /* (n) holders of an external output: local consumer tasks + copies */
    int32_t *lc_ptr, *lc; /* (n+1) CSR: the local consumer tasks of an external output (each once) */
    int32_t *xo_ptr;      /* (n+1) the copies of a node's output: records xo_ptr[v]..xo_ptr[v+1]-1 */
    /* per task, tasks numbered in topological order of their representatives */
    int32_t *rep;      /* (ntasks) representative node (the member first in topological order) */
    int32_t *dev;      /* (ntasks) */
    int32_t *prio;     /* (ntasks) the largest of its members' priorities */
    uint64_t *key;     /* (ntasks) ~priority << 32 | rank: the smallest runs first */
    int32_t *pending0; /* (ntasks) distinct external input tensors */
    int64_t *alloc;    /* (ntasks) bytes its start allocates */
    int32_t *mem_ptr, *mem; /* (ntasks+1) CSR: members in topological order */
    int32_t *in_ptr;        /* (ntasks+1) CSR: its distinct external input tensors */
    int32_t *in_node;       /* producer node of each */
    int32_t *in_xf;         /* the copy it reads, or -1 for a producer on its device */
    /* per copy */
    int32_t *xf_node, *xf_src, *xf_dst;
    double *xf_bytes;       /* the largest edge from the node to a consumer on dst */
    int32_t *xc_ptr, *xc;   /* (nxf+1) CSR: consumer tasks on dst (each once) */
} rt_plan;

gopt_status rt_plan_build(const gopt_graph *g, const gopt_decisions *d, int ndev, rt_plan *p, gopt_error *err);
void rt_plan_destroy(rt_plan *p);

/* One repetition's timeline: kernel and copy times (seconds from the step's start), per device
 * busy time and memory peaks, and the memory log (every change of a device's bytes in use). */
typedef struct {
    double *tstart, *tend; /* (ntasks) */
    double *tready;        /* (ntasks) when its last input arrived (0: none to wait for) */
    int32_t *ran_on;       /* (ntasks) the device (thread, GPU) that ran it */
    double *xstart, *xend; /* (nxf) */
    double *tcpu, *xcpu;   /* (ntasks), (nxf): the thread CPU time of each kernel and copy */
    double step_s;
    double busy_s[GOPT_SIM_MAX_DEVICES];
    int64_t peak[GOPT_SIM_MAX_DEVICES];
    double peak_t[GOPT_SIM_MAX_DEVICES];
    gopt_trace_memory *memlog; /* capacity 2 ntasks + 2 nxf + ndev; spare = the event that logged
                                  it: 0 the start, 1 + 2t / 2 + 2t task t's start / end,
                                  -1 - 2x / -2 - 2x copy x's start / end */
    int64_t nmemlog;
} rt_timeline;

/* The CPU backend (cpu.c). rt_cpu_create sizes the arenas, allocates the parameters, the
 * workspaces and the kernels' descriptions for plan p; rt_cpu_step runs one step into tl. */
typedef struct rt_cpu rt_cpu;
gopt_status rt_cpu_create(const gopt_graph *g, const rt_plan *p, int pin, rt_cpu **out, gopt_error *err);
void rt_cpu_free(rt_cpu *c);
gopt_status rt_cpu_step(rt_cpu *c, rt_timeline *tl, gopt_error *err);
/* Host bytes the backend holds beyond the model's accounting (workspaces). */
double rt_cpu_workspace_bytes(const rt_cpu *c);

/* The CUDA backend (cuda.cu, or cuda_none.c in a build without the toolkit): runs one step of p
 * issuing the tasks in `order` (task indices, in the order the simulator started them);
 * convolutions as `conv` says (DEFAULT: cuDNN where this build has it). GOPT_EUNSUP without a GPU,
 * without CUDA in this build, or with GOPT_RT_CUDA_CONV_CUDNN in a build without cuDNN. */
typedef struct rt_cuda rt_cuda;
gopt_status rt_cuda_create(const gopt_graph *g, const rt_plan *p, const int32_t *order, int graph_mode,
                           gopt_rt_cuda_conv conv, rt_cuda **out, gopt_error *err);
void rt_cuda_free(rt_cuda *c);
gopt_status rt_cuda_step(rt_cuda *c, rt_timeline *tl, gopt_error *err);
/* Convolution nodes the backend runs by cuDNN and as im2col + sgemm. */
void rt_cuda_conv_counts(const rt_cuda *c, int *cudnn, int *im2col);

/* The simulator the runtime keeps (runtime.c), on decisions d. */
gopt_status rt_sim_run(gopt_runtime *rt, const gopt_decisions *d, gopt_sim_result *res, gopt_error *err);

/* ---- CPU kernels (kernels.c) ------------------------------------------------------------- */
/* A tensor's bytes as a kernel sees them (p may be NULL when floats is 0). */
typedef struct {
    float *p;
    int64_t floats;
} rt_span;

/* C (m x n) = A (m x k) B (k x n), row-major, one OpenBLAS call. */
typedef struct {
    int64_t m, n, k;
    const float *a, *b;
    float *c;
} rt_gemm_args;
void rt_gemm(const rt_gemm_args *g);
/* Which of a node's inputs are the operands of its gemm or convolution of dims (m, n, k): *ib the
 * tightest input that holds k x n floats (the weight, read from its own buffer as a framework
 * does), *ia the largest of the others (a convolution's im2col source); -1 when none. */
void rt_gemm_inputs(const int64_t dims[3], const rt_span *ins, int nin, int *ia, int *ib);
/* Operands of a gemm (or, conv != 0, a convolution) of dims (m, n, k) among a node's inputs
 * (rt_gemm_inputs): A (a convolution's im2col source, whatever its size), B, and the node's output
 * as C, each when large enough, else a region of the workspace ws (col: the im2col block), each
 * region starting at a multiple of 64 floats. Returns the workspace floats this needs; ws may be
 * NULL to ask only that. Pure pointer arithmetic: the CUDA backend uses it on device pointers. */
int64_t rt_gemm_operands(const int64_t dims[3], int conv, const rt_span *ins, int nin, rt_span out, float *ws,
                         const float **A, const float **B, float **C, float **col);
/* The floats node v reads from the producer of its in-edge e: what the edges from that producer
 * into v carry, from e on (the cost model's reading of a memory-bound op's inputs). */
int64_t rt_edge_floats(const gopt_frozen *f, int32_t v, int32_t e);
/* Convolution as an implicit GEMM of (m, n, k): im2col of `src` (k/taps runs of contiguous
 * floats per row, taps = 9 when k is a multiple of 9, else 1) into `col` in blocks of
 * `block_rows` rows, each block times B into its rows of C. col holds block_rows * k floats. */
void rt_conv(int64_t m, int64_t n, int64_t k, rt_span src, const float *b, float *c, float *col, int64_t block_rows);
/* Rows of the im2col block rt_conv uses for k (about 1 MiB of floats, at least one row). */
int64_t rt_conv_block_rows(int64_t m, int64_t k);
/* The filter taps a convolution of implicit GEMM depth k is read with: 9 (3 x 3) when k is a
 * multiple of 9, else 1. */
int64_t rt_conv_taps(int64_t k);
/* A 2-d convolution (NCHW input n x c x h x w, k filters of r x r, stride 1, padding r / 2) whose
 * FLOPs are the implicit GEMM's: output positions n h w = m exactly, k = the GEMM's n output
 * channels, c r r = the GEMM's k (r = 3 when rt_conv_taps gives 9, else 1). The graph gives no
 * batch or image size, so n = 1, w = the largest divisor of m not above its square root and
 * h = m / w: the squarest image of m pixels (a prime m gives a 1-pixel-wide one; the FLOPs are
 * the same). The CUDA backend runs it with cuDNN. Returns 0 (and a
 * zero shape) when a dimension is below 1 or a tensor would reach 2^31 elements (cuDNN's
 * limit for 4-d descriptors). */
typedef struct {
    int64_t n, c, h, w, k, r;
} rt_conv_shape;
int rt_conv_shape_of(int64_t m, int64_t n, int64_t k, rt_conv_shape *s);
/* Memory-bound kernel: reads every input float at least once and writes every output float once
 * (the outputs as one index space; each output float the sum of the inputs at that index, an
 * input shorter than the outputs read once over its own length, the rest of the outputs zero, as
 * the CUDA kernel does; input floats past the outputs' end summed into a reduction). Returns
 * that reduction (so no work is dead). */
float rt_memory_kernel(const rt_span *in, int nin, const rt_span *out, int nout);
/* Copy dst.floats floats into dst from src, reading src cyclically when it is shorter (a zero
 * source writes zeros). */
void rt_copy(rt_span dst, rt_span src);
/* Stand-in compute: about `flops` FLOPs of sgemm on cubes of side <= 512 in ws (3 * 512^2 floats). */
void rt_flops_kernel(double flops, float *ws);
#define RT_FLOPS_WS_FLOATS (3 * 512 * 512)

#endif
