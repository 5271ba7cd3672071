/* cuda.cu: the CUDA backend: device d is GPU d, with one compute stream and a cuBLAS handle;
 * every used link (src -> dst) has a copy stream on the receiving GPU. Built only when CMake
 * finds the toolkit; without a GPU every entry point returns GOPT_EUNSUP naming the CUDA error.
 *
 * A GPU runs what it is given in stream order, so the schedule is fixed when the work is issued:
 * the tasks are issued in the order the simulator started them (a topological order, and on each
 * device the order the decisions' priorities give under the simulated timing), each device's
 * kernels on its compute stream, each copy (cudaMemcpyPeerAsync, which the driver stages through
 * the host where the pair has no peer access) on its link's stream after an event of its
 * producer, each consumer after an event of its copies. Buffers come from each GPU's stream-
 * ordered pool at the simulator's points (cudaMallocAsync when the task or copy is issued,
 * cudaFreeAsync after the last holder), and the peak is the pool's high-water mark plus the
 * parameters: measured, with the pool's rounding. Kernels: cublasSgemm of the node's (m, n, k);
 * a convolution, whose node carries its implicit GEMM (m, n, k) but no kernel size, as
 * cudnnConvolutionForward on a 2-d convolution of the same FLOPs (rt_conv_shape_of: m output
 * pixels, n filters, k = channels x taps), with the algorithm cuDNN's heuristics rank first under
 * a 256 MiB workspace (profiles/gopt_cudnn.h, the calibrator's convolution), or, with
 * GOPT_RT_CUDA_CONV_IM2COL (and for a shape cuDNN does not take), as im2col + cublasSgemm;
 * memory-bound ops one pass summing the inputs into the output (16-byte loads and the
 * calibrator's grid where every input is the output's length, else each input read once over
 * its own length); a node without a shape a stand-in sgemm of its FLOPs.
 * Outside the memory model, as a library's workspace is (cudaMalloc at setup, not the pool, so
 * the measured peak stays the simulator's accounting): the per-GPU scratch `ws` (operands the
 * node's tensors are too small for, the im2col block, and cuDNN's input where the node's largest
 * input is smaller than the derived convolution reads), and cuDNN's workspace (the largest any
 * chosen algorithm needs). Descriptors and algorithms are chosen once per distinct shape at setup
 * and each is run once there (so that no library loads or allocates inside a step, or inside the
 * capture of --cuda-graph); a shape cuDNN refuses falls back to im2col. The cuDNN path was
 * compiled but not yet run on a GPU (2026-11-27). Times come from CUDA events, relative to an
 * event recorded on each GPU at the step's start. Memory-over-time is not logged on GPUs (the
 * trace has kernels and copies, and the peak). */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef GOPT_WITH_CUDNN
#include "gopt_cudnn.h"
#endif

extern "C" {
#include "rt_internal.h"
}

namespace {

enum { K_NONE = 0, K_GEMM, K_CONV, K_MEM, K_STANDIN };

struct mem_args {
    const float *in[4];
    long long len[4];
    int nin;
    int add; /* accumulate into out (a later launch of the same op) */
    float *out;
    long long nout;
};

/* The general pass: out[i] = (add ? out[i] : 0) + the inputs at i, each input read once over its
 * own length (an input shorter than the output adds into its start, as on the CPU), input floats
 * past the output's end summed into a reduction. */
__global__ void k_mem(mem_args a) {
    long long span = a.nout;
#pragma unroll
    for (int j = 0; j < 4; j++) /* constant indices: `a` stays in parameter space, not copied to the stack */
        if (j < a.nin && a.len[j] > span) span = a.len[j];
    long long i0 = blockIdx.x * (long long)blockDim.x + threadIdx.x, stride = (long long)gridDim.x * blockDim.x;
    float red = 0;
    for (long long i = i0; i < span; i += stride) {
        float acc = 0;
#pragma unroll
        for (int j = 0; j < 4; j++)
            if (j < a.nin && i < a.len[j]) acc += a.in[j][i];
        if (i < a.nout) a.out[i] = a.add ? a.out[i] + acc : acc;
        else red += acc;
    }
    if (red == 12345.678f && a.nout > 0) a.out[0] = red; /* keeps the reduction live */
}

/* The common case (the calibrator's `c = a + b`, 16 bytes a load): NIN inputs each exactly the
 * output's length, a multiple of 4 floats, every pointer 16-byte aligned. */
template <int NIN>
__global__ void k_mem4(mem_args a) {
    float4 *out = (float4 *)a.out;
    long long n4 = a.nout / 4, stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 acc = a.add ? out[i] : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
        for (int j = 0; j < NIN; j++) {
            float4 x = __ldg((const float4 *)a.in[j] + i);
            acc.x += x.x;
            acc.y += x.y;
            acc.z += x.z;
            acc.w += x.w;
        }
        out[i] = acc;
    }
}

/* The other aligned cases (inputs of other lengths than the output's: a bias, a normalization's
 * statistics, a tuple output read whole): 16 bytes a load, each input read over its own length
 * once (not cyclically: a broadcast's re-reads come from cache), floats past the output's end
 * summed into a reduction; the last 0-3 floats of each array by the first thread. */
__global__ void k_mem4g(mem_args a) {
    long long span = a.nout;
#pragma unroll
    for (int j = 0; j < 4; j++)
        if (j < a.nin && a.len[j] > span) span = a.len[j];
    long long n4 = span / 4, o4 = a.nout / 4, stride = (long long)gridDim.x * blockDim.x;
    long long i0 = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    float red = 0;
    for (long long i = i0; i < n4; i += stride) {
        float4 acc = a.add && i < o4 ? ((float4 *)a.out)[i] : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
        for (int j = 0; j < 4; j++)
            if (j < a.nin && i < a.len[j] / 4) {
                float4 x = __ldg((const float4 *)a.in[j] + i);
                acc.x += x.x;
                acc.y += x.y;
                acc.z += x.z;
                acc.w += x.w;
            }
        if (i < o4) ((float4 *)a.out)[i] = acc;
        else red += acc.x + acc.y + acc.z + acc.w;
    }
    if (i0 == 0) { /* the tails */
#pragma unroll
        for (int j = 0; j < 4; j++)
            if (j < a.nin)
                for (long long t = a.len[j] / 4 * 4; t < a.len[j]; t++) red += a.in[j][t];
        for (long long t = o4 * 4; t < a.nout; t++) a.out[t] = a.add ? a.out[t] + red : red;
    }
    if (red == 12345.678f && a.nout > 0) a.out[0] = red; /* keeps the reduction live */
}

__global__ void k_im2col(const float *src, long long len, float *col, long long r0, long long rows, long long k,
                         long long taps) {
    long long run = k / taps, total = rows * k;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
        long long r = i / k, c = i % k, t = c / run, j = c % run;
        long long off = ((r0 + r) * run + t * 3 * run + j) % (len > 0 ? len : 1);
        col[i] = len > 0 ? src[off] : 0.f;
    }
}

__global__ void k_fill(float *p, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        p[i] = 1e-3f * (float)(i & 7);
}

int grid_for(long long n) {
    long long b = (n + 255) / 256;
    return (int)(b < 1 ? 1 : b > 4096 ? 4096 : b);
}

/* The calibrator's grid (profiles/calib_cuda.cu): a thread per item, at most 8 blocks of 256 per
 * multiprocessor (2,048 threads: a full one), each looping over the rest. */
int grid_sms(long long n, int sms) {
    long long b = (n + 255) / 256, cap = 8LL * (sms > 0 ? sms : 16);
    return (int)(b < 1 ? 1 : b > cap ? cap : b);
}

#ifdef GOPT_WITH_CUDNN
/* One distinct convolution on one GPU: its descriptors and algorithm, chosen at setup. */
struct conv_plan {
    int dev;
    rt_conv_shape s;
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    cudnnConvolutionFwdAlgo_t algo;
    size_t ws_bytes;
    int ok; /* an algorithm fits, and it ran once at setup */
};
#endif

} // namespace

struct rt_cuda {
    const gopt_graph *g;
    const gopt_frozen *f;
    const rt_plan *p;
    int nd;
    int32_t *order;
    cudaStream_t comp[GOPT_SIM_MAX_DEVICES];
    cudaStream_t *lstream; /* (nd*nd), on the receiving GPU; NULL when unused */
    cublasHandle_t blas[GOPT_SIM_MAX_DEVICES];
    cudaMemPool_t pool[GOPT_SIM_MAX_DEVICES];
    cudaEvent_t t0[GOPT_SIM_MAX_DEVICES];
    float *ws[GOPT_SIM_MAX_DEVICES];
    int64_t pbytes[GOPT_SIM_MAX_DEVICES];
    float **pbuf;
    uint8_t *kind;
    int64_t (*dims)[3];
    float **obuf, **xbuf;
    int32_t *hold, *xhold;
    cudaEvent_t *tev, *xev; /* (2 ntasks), (2 nxf): start and end */
    rt_span *ins;
    int32_t max_in;
    int graph_mode;        /* capture the issue once (cudaGraph), replay it every step */
    cudaGraphExec_t exec;  /* the captured step, once captured */
    void *blas_ws;         /* graph mode: cuBLAS's workspace, so that no GEMM allocates while captured */
    int sms[GOPT_SIM_MAX_DEVICES]; /* multiprocessors per GPU (the memory kernel's grid) */
    int32_t *conv_of;      /* (n) a convolution node's conv_plan, -1: im2col + sgemm */
    int conv_cudnn, conv_im2col; /* convolution nodes each way */
#ifdef GOPT_WITH_CUDNN
    cudnnHandle_t dnn[GOPT_SIM_MAX_DEVICES]; /* on the GPU's compute stream; NULL without convolutions */
    void *dnn_ws[GOPT_SIM_MAX_DEVICES];       /* cuDNN's workspace: cudaMalloc, outside the pool */
    size_t dnn_ws_bytes[GOPT_SIM_MAX_DEVICES];
    conv_plan *convs;
    int nconv;
#endif
};

#define CU(call)                                                                                                   \
    do {                                                                                                           \
        cudaError_t e_ = (call);                                                                                   \
        if (e_ != cudaSuccess) {                                                                                   \
            st = gopt_error_set(err, GOPT_EINTERNAL, "runtime cuda: %s failed: %s", #call, cudaGetErrorString(e_)); \
            goto out;                                                                                              \
        }                                                                                                          \
    } while (0)

static rt_span tensor_on(const rt_cuda *c, int32_t u, int32_t t) {
    const rt_plan *p = c->p;
    if (p->dev[p->task[u]] == p->dev[t]) {
        if (c->f->op_class[u] == GOPT_OP_CLASS_PARAM) return rt_span{c->pbuf[u], p->psize[u] / 4};
        return rt_span{c->obuf[u], c->obuf[u] ? p->osize[u] / 4 : 0};
    }
    for (int32_t k = p->in_ptr[t]; k < p->in_ptr[t + 1]; k++)
        if (p->in_node[k] == u) {
            int32_t x = p->in_xf[k];
            return rt_span{c->xbuf[x], c->xbuf[x] ? (int64_t)ceil(p->xf_bytes[x]) / 4 : 0};
        }
    return rt_span{NULL, 0};
}

/* The external inputs of node v (in task t) into ins (each producer once); their number. With
 * `clip`, each is cut to the bytes its edges into v carry, as the CPU backend's (what the cost
 * model says v reads: an optimizer update reads the parameter's edge, not a whole tuple output). */
static int node_inputs(const rt_cuda *c, int32_t v, int32_t t, rt_span *ins, int clip) {
    const gopt_frozen *f = c->f;
    int nin = 0;
    for (int32_t e = f->in_ptr[v]; e < f->in_ptr[v + 1]; e++) {
        int32_t u = f->in_src[e];
        if (c->p->task[u] == t) continue;
        int seen = 0;
        for (int32_t e2 = f->in_ptr[v]; e2 < e && !seen; e2++) seen = f->in_src[e2] == u;
        if (seen) continue;
        rt_span s = tensor_on(c, u, t);
        if (clip) {
            int64_t fl = rt_edge_floats(f, v, e);
            if (fl < s.floats) s.floats = fl;
        }
        ins[nin++] = s;
    }
    return nin;
}

static int aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

/* One pass (a launch per four inputs, the later ones adding into the output) on a GPU of `sms`
 * multiprocessors. */
static void mem_launch(cudaStream_t s, const rt_span *ins, int nin, rt_span out, int sms) {
    for (int i = 0, first = 1; i < nin || first; i += 4, first = 0) {
        mem_args a = {};
        for (int j = 0; j < 4 && i + j < nin; j++) {
            a.in[j] = ins[i + j].p;
            a.len[j] = ins[i + j].floats;
            a.nin++;
        }
        a.add = i > 0;
        a.out = out.p;
        a.nout = out.p ? out.floats : 0;
        int vec = a.nin > 0 && a.nout > 0 && a.nout % 4 == 0 && aligned16(a.out);
        for (int j = 0; j < a.nin && vec; j++) vec = a.len[j] == a.nout && aligned16(a.in[j]);
        if (vec) {
            int grid = grid_sms(a.nout / 4, sms);
            switch (a.nin) {
            case 1: k_mem4<1><<<grid, 256, 0, s>>>(a); break;
            case 2: k_mem4<2><<<grid, 256, 0, s>>>(a); break;
            case 3: k_mem4<3><<<grid, 256, 0, s>>>(a); break;
            default: k_mem4<4><<<grid, 256, 0, s>>>(a); break;
            }
            continue;
        }
        long long span = a.nout;
        int aligned = a.nout == 0 || aligned16(a.out);
        for (int j = 0; j < a.nin; j++) {
            if (a.len[j] > span) span = a.len[j];
            aligned = aligned && (a.len[j] == 0 || aligned16(a.in[j]));
        }
        if (aligned && span >= 4) {
            k_mem4g<<<grid_sms(span / 4, sms), 256, 0, s>>>(a);
            continue;
        }
        k_mem<<<grid_for(span), 256, 0, s>>>(a);
    }
}

static void sgemm(cublasHandle_t h, int64_t m, int64_t n, int64_t k, const float *A, const float *B, float *C) {
    const float one = 1, zero = 0; /* row-major C = A B is column-major C^T = B^T A^T */
    if (m > 0 && n > 0 && k > 0)
        cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)m, (int)k, &one, B, (int)n, A, (int)k, &zero, C, (int)n);
}

/* Issue node v's kernels (of task t, on GPU d) on the GPU's compute stream. */
static gopt_status run_node(rt_cuda *c, int32_t v, int32_t t, int d, int fused_mem_part, gopt_error *err) {
    (void)err; /* only cuDNN's calls report */
    const rt_plan *p = c->p;
    int nin = node_inputs(c, v, t, c->ins, c->kind[v] == K_MEM || c->kind[v] == K_STANDIN);
    rt_span out = {p->ext[v] ? c->obuf[v] : NULL, p->ext[v] && c->obuf[v] ? p->osize[v] / 4 : 0};
    const float *A, *B;
    float *C, *col;
    int64_t m = c->dims[v][0], n = c->dims[v][1], k = c->dims[v][2];
    switch (c->kind[v]) {
    case K_GEMM:
        rt_gemm_operands(c->dims[v], 0, c->ins, nin, out, c->ws[d], &A, &B, &C, &col);
        sgemm(c->blas[d], m, n, k, A, B, C);
        break;
    case K_CONV: {
        rt_gemm_operands(c->dims[v], 1, c->ins, nin, out, c->ws[d], &A, &B, &C, &col);
        int ia, ib;
        rt_gemm_inputs(c->dims[v], c->ins, nin, &ia, &ib);
        const rt_span src = ia >= 0 ? c->ins[ia] : rt_span{NULL, 0};
#ifdef GOPT_WITH_CUDNN
        if (c->conv_of[v] >= 0) {
            const conv_plan *cp = &c->convs[c->conv_of[v]];
            /* the input: the im2col source (rt_gemm_inputs) when it holds the n c h w floats
             * read, else the scratch from `col` on (ws: outside the memory model, sized for it at
             * setup) */
            const float *x = src.floats >= cp->s.n * cp->s.c * cp->s.h * cp->s.w ? src.p : col;
            const float one = 1, zero = 0;
            cudnnStatus_t ds = cudnnConvolutionForward(c->dnn[d], &one, cp->x, x, cp->w, B, cp->conv, cp->algo,
                                                       c->dnn_ws[d], c->dnn_ws_bytes[d], &zero, cp->y, C);
            if (ds != CUDNN_STATUS_SUCCESS)
                return gopt_error_set(err, GOPT_EINTERNAL,
                                      "runtime cuda: node '%s': cudnnConvolutionForward failed: %s",
                                      gopt_graph_node_name(c->g, v), cudnnGetErrorString(ds));
            break;
        }
#endif
        int64_t taps = rt_conv_taps(k), rows = rt_conv_block_rows(m, k);
        for (int64_t r0 = 0; r0 < m; r0 += rows) {
            int64_t rr = m - r0 < rows ? m - r0 : rows;
            k_im2col<<<grid_for(rr * k), 256, 0, c->comp[d]>>>(src.p, src.floats, col, r0, rr, k, taps);
            sgemm(c->blas[d], rr, n, k, col, B, C + r0 * n);
        }
        break;
    }
    case K_STANDIN: {
        double fl = c->f->flops[v];
        while (fl >= 2) {
            double side = cbrt(fl / 2);
            int64_t s = side > 512 ? 512 : (int64_t)side;
            if (s < 1) s = 1;
            sgemm(c->blas[d], s, s, s, c->ws[d], c->ws[d] + 512 * 512, c->ws[d] + 2 * 512 * 512);
            fl -= 2.0 * (double)s * (double)s * (double)s;
        }
        mem_launch(c->comp[d], c->ins, nin, out, c->sms[d]);
        break;
    }
    case K_MEM:
        if (!fused_mem_part) mem_launch(c->comp[d], c->ins, nin, out, c->sms[d]);
        break;
    default:
        break;
    }
    return GOPT_OK;
}

/* An event of the step's timeline: in graph mode an event-record node of the captured graph
 * (cudaEventRecordExternal), so that every replay records it and it can be timed. */
static cudaError_t record(const rt_cuda *c, cudaEvent_t e, cudaStream_t s) {
    return c->graph_mode ? cudaEventRecordWithFlags(e, s, cudaEventRecordExternal) : cudaEventRecord(e, s);
}

/* Free node u's output on its own GPU after every holder (its copies included). */
static void free_output(rt_cuda *c, int32_t u) {
    const rt_plan *p = c->p;
    int d = p->dev[p->task[u]];
    if (!c->obuf[u]) return;
    cudaSetDevice(d);
    for (int32_t x = p->xo_ptr[u]; x < p->xo_ptr[u + 1]; x++) cudaStreamWaitEvent(c->comp[d], c->xev[2 * x + 1], 0);
    cudaFreeAsync(c->obuf[u], c->comp[d]);
    c->obuf[u] = NULL;
}

/* Issue one step's work on the streams (captured into a graph in graph mode). */
static gopt_status issue_step(rt_cuda *c, gopt_error *err) {
    const rt_plan *p = c->p;
    gopt_status st = GOPT_OK;
    int nd = c->nd;
    for (int d = 0; d < nd; d++) {
        CU(cudaSetDevice(d));
        CU(record(c, c->t0[d], c->comp[d]));
    }
    for (int32_t v = 0; v < p->n; v++) c->obuf[v] = NULL;
    for (int32_t x = 0; x < p->nxf; x++) {
        c->xbuf[x] = NULL;
        c->xhold[x] = p->xc_ptr[x + 1] - p->xc_ptr[x];
    }
    for (int32_t i = 0; i < p->ntasks; i++) {
        int32_t t = c->order[i], d = p->dev[t];
        CU(cudaSetDevice(d));
        cudaStream_t s = c->comp[d];
        for (int32_t k = p->in_ptr[t]; k < p->in_ptr[t + 1]; k++)
            if (p->in_xf[k] >= 0) CU(cudaStreamWaitEvent(s, c->xev[2 * p->in_xf[k] + 1], 0));
        for (int32_t j = p->mem_ptr[t]; j < p->mem_ptr[t + 1]; j++) {
            int32_t v = p->mem[j];
            if (p->ext[v] && p->osize[v] > 0) CU(cudaMallocAsync((void **)&c->obuf[v], (size_t)p->osize[v], s));
        }
        CU(record(c, c->tev[2 * t], s));
        int fused = p->mem_ptr[t + 1] - p->mem_ptr[t] > 1;
        for (int32_t j = p->mem_ptr[t]; j < p->mem_ptr[t + 1]; j++)
            if ((st = run_node(c, p->mem[j], t, d, fused, err))) goto out;
        if (fused) { /* the memory-bound members: one pass per external output over their inputs */
            int nin = 0;
            for (int32_t j = p->mem_ptr[t]; j < p->mem_ptr[t + 1]; j++)
                if (c->kind[p->mem[j]] == K_MEM) nin += node_inputs(c, p->mem[j], t, c->ins + nin, 1);
            int wrote = 0;
            for (int32_t j = p->mem_ptr[t]; j < p->mem_ptr[t + 1]; j++) {
                int32_t v = p->mem[j];
                if (c->kind[v] == K_MEM && p->ext[v] && c->obuf[v]) {
                    mem_launch(s, c->ins, nin, rt_span{c->obuf[v], p->osize[v] / 4}, c->sms[d]);
                    wrote = 1;
                }
            }
            if (!wrote && nin) mem_launch(s, c->ins, nin, rt_span{NULL, 0}, c->sms[d]);
        }
        CU(cudaGetLastError());
        CU(record(c, c->tev[2 * t + 1], s));
        /* release the inputs */
        for (int32_t k = p->in_ptr[t]; k < p->in_ptr[t + 1]; k++) {
            int32_t x = p->in_xf[k], u = p->in_node[k];
            if (x >= 0) {
                if (--c->xhold[x] == 0 && c->xbuf[x]) {
                    CU(cudaFreeAsync(c->xbuf[x], s));
                    c->xbuf[x] = NULL;
                }
            } else if (--c->hold[u] == 0) {
                free_output(c, u);
            }
        }
        /* outputs: copies on their links, holders counted */
        for (int32_t j = p->mem_ptr[t]; j < p->mem_ptr[t + 1]; j++) {
            int32_t v = p->mem[j];
            if (!p->ext[v]) continue;
            c->hold[v] = p->hold0[v];
            for (int32_t x = p->xo_ptr[v]; x < p->xo_ptr[v + 1]; x++) {
                int dst = p->xf_dst[x];
                cudaStream_t ls = c->lstream[d * nd + dst];
                size_t bytes = (size_t)ceil(p->xf_bytes[x]);
                CU(cudaSetDevice(dst));
                CU(cudaStreamWaitEvent(ls, c->tev[2 * t + 1], 0));
                if (bytes) CU(cudaMallocAsync((void **)&c->xbuf[x], bytes, ls));
                CU(record(c, c->xev[2 * x], ls));
                rt_span from = tensor_on(c, v, t);
                size_t have = (size_t)from.floats * 4;
                if (bytes && from.p)
                    CU(cudaMemcpyPeerAsync(c->xbuf[x], dst, from.p, d, bytes < have ? bytes : have, ls));
                CU(record(c, c->xev[2 * x + 1], ls));
            }
            for (int32_t x = p->xo_ptr[v]; x < p->xo_ptr[v + 1]; x++) c->hold[v]--; /* issued: they are ordered */
            if (c->hold[v] <= 0 && p->lc_ptr[v + 1] == p->lc_ptr[v]) free_output(c, v);
        }
    }
    /* what is still held at the step's end goes back to its pool (after the step's last event, so
     * the timing is unchanged; a captured graph must free what it allocates to be replayed) */
    for (int32_t v = 0; v < p->n; v++)
        if (c->obuf[v]) free_output(c, v);
    for (int32_t x = 0; x < p->nxf; x++)
        if (c->xbuf[x]) {
            CU(cudaSetDevice(p->xf_dst[x]));
            CU(cudaFreeAsync(c->xbuf[x], c->lstream[p->xf_src[x] * nd + p->xf_dst[x]]));
            c->xbuf[x] = NULL;
        }
out:
    return st;
}

/* Graph mode, the first step: capture issue_step on the (one) GPU's compute stream and
 * instantiate it. A failure ends the capture and is reported; nothing is left captured. */
static gopt_status capture_step(rt_cuda *c, gopt_error *err) {
    gopt_status st = GOPT_OK;
    cudaGraph_t graph = NULL;
    cudaStream_t s = c->comp[0];
    CU(cudaSetDevice(0));
    if (!c->blas_ws) {
        const size_t wsb = (size_t)64 << 20;
        CU(cudaMalloc(&c->blas_ws, wsb));
        if (cublasSetWorkspace(c->blas[0], c->blas_ws, wsb) != CUBLAS_STATUS_SUCCESS) {
            st = gopt_error_set(err, GOPT_EINTERNAL, "runtime cuda: cublasSetWorkspace failed");
            goto out;
        }
    }
    CU(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    {
        gopt_status ist = issue_step(c, err);
        cudaError_t ce = cudaStreamEndCapture(s, &graph);
        if (ist) {
            st = ist;
            goto out;
        }
        if (ce != cudaSuccess) {
            st = gopt_error_set(err, GOPT_EINTERNAL, "runtime cuda: capturing the step as a CUDA graph failed: %s",
                                cudaGetErrorString(ce));
            goto out;
        }
    }
    CU(cudaGraphInstantiate(&c->exec, graph, 0));
out:
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError(); /* a failed capture leaves its error: reported above */
    return st;
}

extern "C" gopt_status rt_cuda_step(rt_cuda *c, rt_timeline *tl, gopt_error *err) {
    const rt_plan *p = c->p;
    gopt_status st = GOPT_OK;
    int nd = c->nd;
    for (int d = 0; d < nd; d++) {
        CU(cudaSetDevice(d));
        CU(cudaDeviceSynchronize());
        unsigned long long zero = 0;
        CU(cudaMemPoolSetAttribute(c->pool[d], cudaMemPoolAttrUsedMemHigh, &zero));
        if (c->graph_mode) CU(cudaDeviceSetGraphMemAttribute(d, cudaGraphMemAttrUsedMemHigh, &zero));
    }
    if (c->graph_mode) {
        if (!c->exec && (st = capture_step(c, err))) goto out;
        CU(cudaSetDevice(0));
        CU(cudaGraphLaunch(c->exec, c->comp[0]));
    } else if ((st = issue_step(c, err))) {
        goto out;
    }
    for (int d = 0; d < nd; d++) {
        CU(cudaSetDevice(d));
        CU(cudaDeviceSynchronize());
    }
    {
        double step = 0;
        for (int32_t t = 0; t < p->ntasks; t++) {
            int d = p->dev[t];
            float a = 0, b = 0;
            CU(cudaEventElapsedTime(&a, c->t0[d], c->tev[2 * t]));
            CU(cudaEventElapsedTime(&b, c->t0[d], c->tev[2 * t + 1]));
            tl->tstart[t] = a * 1e-3;
            tl->tend[t] = b * 1e-3;
            tl->tcpu[t] = tl->tend[t] - tl->tstart[t];
            tl->ran_on[t] = d;
            if (tl->tend[t] > step) step = tl->tend[t];
        }
        for (int32_t x = 0; x < p->nxf; x++) {
            int d = p->xf_dst[x];
            float a = 0, b = 0;
            CU(cudaEventElapsedTime(&a, c->t0[d], c->xev[2 * x]));
            CU(cudaEventElapsedTime(&b, c->t0[d], c->xev[2 * x + 1]));
            tl->xstart[x] = a * 1e-3;
            tl->xend[x] = b * 1e-3;
            tl->xcpu[x] = tl->xend[x] - tl->xstart[x];
            if (tl->xend[x] > step) step = tl->xend[x];
        }
        for (int32_t t = 0; t < p->ntasks; t++) {
            double r = 0;
            for (int32_t k = p->in_ptr[t]; k < p->in_ptr[t + 1]; k++) {
                int32_t x = p->in_xf[k];
                double a = x >= 0 ? tl->xend[x] : tl->tend[p->task[p->in_node[k]]];
                if (a > r) r = a;
            }
            tl->tready[t] = r;
        }
        tl->step_s = step;
        tl->nmemlog = 0;
        for (int d = 0; d < nd; d++) {
            tl->busy_s[d] = 0;
            unsigned long long high = 0;
            if (c->graph_mode) /* a captured step's buffers come from the device's graph memory */
                CU(cudaDeviceGetGraphMemAttribute(d, cudaGraphMemAttrUsedMemHigh, &high));
            else
                CU(cudaMemPoolGetAttribute(c->pool[d], cudaMemPoolAttrUsedMemHigh, &high));
            tl->peak[d] = c->pbytes[d] + (int64_t)high;
            tl->peak_t[d] = 0;
            tl->memlog[tl->nmemlog++] = gopt_trace_memory{0, d, 0, c->pbytes[d]};
        }
        for (int32_t t = 0; t < p->ntasks; t++) tl->busy_s[p->dev[t]] += tl->tend[t] - tl->tstart[t];
    }
out:
    return st;
}

extern "C" void rt_cuda_free(rt_cuda *c) {
    if (!c) return;
    const rt_plan *p = c->p;
    if (c->exec) {
        cudaSetDevice(0);
        cudaDeviceSynchronize();
        cudaGraphExecDestroy(c->exec);
        cudaDeviceGraphMemTrim(0);
    }
#ifdef GOPT_WITH_CUDNN
    for (int i = 0; i < c->nconv; i++) {
        conv_plan *cp = &c->convs[i];
        if (cp->x) cudnnDestroyTensorDescriptor(cp->x);
        if (cp->y) cudnnDestroyTensorDescriptor(cp->y);
        if (cp->w) cudnnDestroyFilterDescriptor(cp->w);
        if (cp->conv) cudnnDestroyConvolutionDescriptor(cp->conv);
    }
    free(c->convs);
#endif
    for (int d = 0; d < c->nd; d++) {
        cudaSetDevice(d);
        cudaDeviceSynchronize();
#ifdef GOPT_WITH_CUDNN
        if (c->dnn[d]) cudnnDestroy(c->dnn[d]);
        cudaFree(c->dnn_ws[d]);
#endif
        if (c->blas[d]) cublasDestroy(c->blas[d]);
        if (c->comp[d]) cudaStreamDestroy(c->comp[d]);
        if (c->t0[d]) cudaEventDestroy(c->t0[d]);
        cudaFree(c->ws[d]);
    }
    if (c->blas_ws) {
        cudaSetDevice(0);
        cudaFree(c->blas_ws);
    }
    if (c->lstream)
        for (int l = 0; l < c->nd * c->nd; l++)
            if (c->lstream[l]) {
                cudaSetDevice(l % c->nd);
                cudaStreamDestroy(c->lstream[l]);
            }
    if (c->tev)
        for (int32_t t = 0; t < p->ntasks; t++) {
            cudaSetDevice(p->dev[t]);
            cudaEventDestroy(c->tev[2 * t]);
            cudaEventDestroy(c->tev[2 * t + 1]);
        }
    if (c->xev)
        for (int32_t x = 0; x < p->nxf; x++) {
            cudaSetDevice(p->xf_dst[x]);
            cudaEventDestroy(c->xev[2 * x]);
            cudaEventDestroy(c->xev[2 * x + 1]);
        }
    if (c->pbuf)
        for (int32_t v = 0; v < p->n; v++)
            if (c->pbuf[v]) {
                cudaSetDevice(p->dev[p->task[v]]);
                cudaFree(c->pbuf[v]);
            }
    free(c->order);
    free(c->lstream);
    free(c->pbuf);
    free(c->kind);
    free(c->dims);
    free(c->obuf);
    free(c->xbuf);
    free(c->hold);
    free(c->xhold);
    free(c->tev);
    free(c->xev);
    free(c->ins);
    free(c->conv_of);
    free(c);
}

extern "C" void rt_cuda_conv_counts(const rt_cuda *c, int *cudnn, int *im2col) {
    *cudnn = c ? c->conv_cudnn : 0;
    *im2col = c ? c->conv_im2col : 0;
}

#ifdef GOPT_WITH_CUDNN
/* The convolutions cuDNN runs. Per distinct shape on a GPU: descriptors and the algorithm its
 * heuristics rank first under GOPT_CUDNN_WS_CAP (gopt_cudnn.h, as the calibrator chooses); then each
 * GPU's workspace, the largest any of its algorithms needs (cudaMalloc, outside the pool); then
 * one run of each on the scratch `ws` (cuDNN loads its kernels and sets itself up here, not inside
 * a step or a captured one; a shape it refuses falls back to im2col). The nodes marked -2 get
 * their plan's index, or -1. `cap`: how many convolution nodes there are. */
static gopt_status plan_convs(rt_cuda *c, int cap, gopt_error *err) {
    const rt_plan *p = c->p;
    gopt_status st = GOPT_OK;
    c->convs = (conv_plan *)calloc((size_t)cap + 1, sizeof(conv_plan));
    if (!c->convs) return gopt_error_set(err, GOPT_ENOMEM, "runtime cuda: out of memory");
    for (int32_t v = 0; v < p->n; v++) {
        if (c->conv_of[v] != -2) continue;
        int d = p->dev[p->task[v]], i = 0;
        rt_conv_shape s;
        rt_conv_shape_of(c->dims[v][0], c->dims[v][1], c->dims[v][2], &s);
        while (i < c->nconv && !(c->convs[i].dev == d && memcmp(&c->convs[i].s, &s, sizeof s) == 0)) i++;
        c->conv_of[v] = i;
        if (i < c->nconv) continue;
        conv_plan *cp = &c->convs[c->nconv++];
        cp->dev = d;
        cp->s = s;
        if (cudnnCreateTensorDescriptor(&cp->x) || cudnnCreateTensorDescriptor(&cp->y) ||
            cudnnCreateFilterDescriptor(&cp->w) || cudnnCreateConvolutionDescriptor(&cp->conv))
            return gopt_error_set(err, GOPT_EINTERNAL, "runtime cuda: creating cuDNN descriptors failed");
        CU(cudaSetDevice(d));
        cudnnMathType_t math = CUDNN_DEFAULT_MATH;
        int algo = -1;
        if (gopt_cudnn_conv_describe((int)s.n, (int)s.c, (int)s.h, (int)s.w, (int)s.k, (int)s.r, math, cp->x, cp->w,
                                     cp->conv, cp->y) == CUDNN_STATUS_SUCCESS)
            algo = gopt_cudnn_conv_algo(c->dnn[d], cp->x, cp->w, cp->conv, cp->y, GOPT_CUDNN_WS_CAP,
                                        &cp->ws_bytes, &math);
        if (algo >= 0 && cudnnSetConvolutionMathType(cp->conv, math) == CUDNN_STATUS_SUCCESS) {
            cp->algo = (cudnnConvolutionFwdAlgo_t)algo;
            cp->ok = 1;
            if (cp->ws_bytes > c->dnn_ws_bytes[d]) c->dnn_ws_bytes[d] = cp->ws_bytes;
        }
    }
    for (int d = 0; d < c->nd; d++)
        if (c->dnn_ws_bytes[d] > 0) {
            CU(cudaSetDevice(d));
            CU(cudaMalloc(&c->dnn_ws[d], c->dnn_ws_bytes[d]));
        }
    for (int i = 0; i < c->nconv; i++) {
        conv_plan *cp = &c->convs[i];
        if (!cp->ok) continue;
        int d = cp->dev;
        int64_t dims[3] = {cp->s.n * cp->s.h * cp->s.w, cp->s.k, cp->s.c * cp->s.r * cp->s.r};
        const float *A, *B, one = 1, zero = 0;
        float *C, *col; /* the layout a node none of whose operands comes from its inputs has */
        rt_gemm_operands(dims, 1, NULL, 0, rt_span{NULL, 0}, c->ws[d], &A, &B, &C, &col);
        CU(cudaSetDevice(d));
        cp->ok = cudnnConvolutionForward(c->dnn[d], &one, cp->x, col, cp->w, B, cp->conv, cp->algo, c->dnn_ws[d],
                                         c->dnn_ws_bytes[d], &zero, cp->y, C) == CUDNN_STATUS_SUCCESS;
    }
    for (int d = 0; d < c->nd; d++) {
        CU(cudaSetDevice(d));
        CU(cudaDeviceSynchronize());
    }
    for (int32_t v = 0; v < p->n; v++)
        if (c->conv_of[v] >= 0 && !c->convs[c->conv_of[v]].ok) c->conv_of[v] = -1;
out:
    return st;
}
#endif

extern "C" gopt_status rt_cuda_create(const gopt_graph *g, const rt_plan *p, const int32_t *order, int graph_mode,
                                      gopt_rt_cuda_conv conv, rt_cuda **outp, gopt_error *err) {
    *outp = NULL;
    const int use_dnn = gopt_rt_cuda_conv_resolve(conv) == GOPT_RT_CUDA_CONV_CUDNN;
#ifndef GOPT_WITH_CUDNN
    if (use_dnn)
        return gopt_error_set(err, GOPT_EUNSUP,
                              "runtime --backend cuda: convolutions by cuDNN asked for, but this build has no cuDNN");
#endif
    int ngpu = 0;
    cudaError_t ce = cudaGetDeviceCount(&ngpu);
    if (ce != cudaSuccess || ngpu < 1)
        return gopt_error_set(err, GOPT_EUNSUP, "runtime --backend cuda: no CUDA GPU is present (%s)",
                              ce != cudaSuccess ? cudaGetErrorString(ce) : "0 devices");
    if (ngpu < p->ndev)
        return gopt_error_set(err, GOPT_EUNSUP, "runtime --backend cuda: %d devices asked for, %d GPUs present",
                              p->ndev, ngpu);
    if (graph_mode && p->ndev > 1)
        return gopt_error_set(err, GOPT_EUNSUP,
                              "runtime --backend cuda: a step captured as a CUDA graph runs on one GPU; %d asked for",
                              p->ndev);
    gopt_status st = GOPT_OK;
    rt_cuda *c = (rt_cuda *)calloc(1, sizeof *c);
    if (!c) return gopt_error_set(err, GOPT_ENOMEM, "runtime cuda: out of memory");
    c->graph_mode = graph_mode;
    const gopt_frozen *f = gopt_graph_frozen(g);
    size_t n1 = (size_t)p->n + 1, t1 = (size_t)p->ntasks + 1, x1 = (size_t)p->nxf + 1;
    c->g = g;
    c->f = f;
    c->p = p;
    c->nd = p->ndev;
    c->order = (int32_t *)malloc(t1 * sizeof(int32_t));
    c->lstream = (cudaStream_t *)calloc((size_t)c->nd * c->nd, sizeof(cudaStream_t));
    c->pbuf = (float **)calloc(n1, sizeof(float *));
    c->kind = (uint8_t *)calloc(n1, 1);
    c->dims = (int64_t(*)[3])calloc(n1, sizeof *c->dims);
    c->obuf = (float **)calloc(n1, sizeof(float *));
    c->xbuf = (float **)calloc(x1, sizeof(float *));
    c->hold = (int32_t *)calloc(n1, sizeof(int32_t));
    c->xhold = (int32_t *)calloc(x1, sizeof(int32_t));
    c->tev = (cudaEvent_t *)calloc(2 * t1, sizeof(cudaEvent_t));
    c->xev = (cudaEvent_t *)calloc(2 * x1, sizeof(cudaEvent_t));
    c->ins = (rt_span *)calloc((size_t)f->m + 1, sizeof(rt_span));
    c->conv_of = (int32_t *)malloc(n1 * sizeof(int32_t));
    int64_t ws[GOPT_SIM_MAX_DEVICES] = {0};
    int dnn_dev[GOPT_SIM_MAX_DEVICES] = {0}, nconv = 0; /* a GPU that runs a convolution by cuDNN */
    if (!c->order || !c->lstream || !c->pbuf || !c->kind || !c->dims || !c->obuf || !c->xbuf || !c->hold ||
        !c->xhold || !c->tev || !c->xev || !c->ins || !c->conv_of) {
        st = gopt_error_set(err, GOPT_ENOMEM, "runtime cuda: out of memory");
        goto out;
    }
    memcpy(c->order, order, (size_t)p->ntasks * sizeof(int32_t));
    for (int32_t v = 0; v < p->n; v++) c->conv_of[v] = -1;
    for (int32_t v = 0; v < p->n; v++) {
        double m = 0, nn = 0, k = 0;
        int gd = 0;
        int d = p->dev[p->task[v]];
        switch ((gopt_op_class)f->op_class[v]) {
        case GOPT_OP_CLASS_INPUT:
        case GOPT_OP_CLASS_PARAM:
            c->kind[v] = K_NONE;
            break;
        case GOPT_OP_CLASS_GEMM:
        case GOPT_OP_CLASS_CONV:
            if (f->flops[v] > 0 && (gd = gopt_cost_node_gemm_dims(g, v, &m, &nn, &k)) && m * nn * k < 1e13) {
                /* a convolution's weight gradient alone (gd 2) is a plain GEMM */
                c->kind[v] = f->op_class[v] == GOPT_OP_CLASS_GEMM || gd == 2 ? K_GEMM : K_CONV;
                c->dims[v][0] = (int64_t)m;
                c->dims[v][1] = (int64_t)nn;
                c->dims[v][2] = (int64_t)llround(k);
                /* the worst case: no operand served by an input */
                const float *a_, *b_;
                float *c_, *col_;
                int64_t need = rt_gemm_operands(c->dims[v], c->kind[v] == K_CONV, NULL, 0, rt_span{NULL, 0}, NULL, &a_,
                                                &b_, &c_, &col_);
                const int64_t *dm = c->dims[v];
                rt_conv_shape cs;
                if (c->kind[v] == K_CONV) nconv++;
                if (c->kind[v] == K_CONV && use_dnn && rt_conv_shape_of(dm[0], dm[1], dm[2], &cs)) {
                    c->conv_of[v] = -2; /* cuDNN's, once planned (plan_convs) */
                    dnn_dev[d] = 1;
                    /* cuDNN's input where the node's inputs are smaller than n c h w: the scratch from
                     * `col` on (the im2col block's place, unused then) */
                    int64_t xin = cs.n * cs.c * cs.h * cs.w, colf = rt_conv_block_rows(dm[0], dm[2]) * dm[2];
                    if (xin > colf) need += xin - colf;
                }
                if (need > ws[d]) ws[d] = need;
            } else {
                c->kind[v] = K_STANDIN;
            }
            break;
        case GOPT_OP_CLASS_ELEMENTWISE:
        case GOPT_OP_CLASS_REDUCTION:
        case GOPT_OP_CLASS_DATA_MOVEMENT:
            c->kind[v] = K_MEM;
            break;
        default:
            c->kind[v] = K_STANDIN;
            break;
        }
        if (c->kind[v] == K_STANDIN && ws[d] < RT_FLOPS_WS_FLOATS) ws[d] = RT_FLOPS_WS_FLOATS;
    }
    for (int d = 0; d < c->nd; d++) {
        CU(cudaSetDevice(d));
        CU(cudaStreamCreateWithFlags(&c->comp[d], cudaStreamNonBlocking));
        CU(cudaEventCreate(&c->t0[d]));
        CU(cudaDeviceGetDefaultMemPool(&c->pool[d], d));
        unsigned long long keep = UINT64_MAX; /* keep freed memory in the pool: no OS calls inside a step */
        CU(cudaMemPoolSetAttribute(c->pool[d], cudaMemPoolAttrReleaseThreshold, &keep));
        if (cublasCreate(&c->blas[d]) != CUBLAS_STATUS_SUCCESS) {
            st = gopt_error_set(err, GOPT_EINTERNAL, "runtime cuda: cublasCreate failed on GPU %d", d);
            goto out;
        }
        cublasSetStream(c->blas[d], c->comp[d]);
        CU(cudaDeviceGetAttribute(&c->sms[d], cudaDevAttrMultiProcessorCount, d));
        if (dnn_dev[d]) { /* never without cuDNN: use_dnn is 0 then */
#ifdef GOPT_WITH_CUDNN
            cudnnStatus_t ds = cudnnCreate(&c->dnn[d]);
            if (ds == CUDNN_STATUS_SUCCESS) ds = cudnnSetStream(c->dnn[d], c->comp[d]);
            if (ds != CUDNN_STATUS_SUCCESS) {
                st = gopt_error_set(err, GOPT_EINTERNAL,
                                    "runtime cuda: cuDNN failed to start on GPU %d: %s (--cuda-conv im2col runs "
                                    "without it)",
                                    d, cudnnGetErrorString(ds));
                goto out;
            }
#endif
        }
        /* the scratch: cudaMalloc, not the pool, so that the measured peak is the model's */
        CU(cudaMalloc((void **)&c->ws[d], (size_t)(ws[d] > 0 ? ws[d] : 1) * sizeof(float)));
        k_fill<<<grid_for(ws[d]), 256, 0, c->comp[d]>>>(c->ws[d], ws[d]);
        for (int e = 0; e < c->nd; e++)
            if (e != d) cudaDeviceEnablePeerAccess(e, 0), cudaGetLastError(); /* where the pair allows it */
    }
    for (int32_t x = 0; x < p->nxf; x++) {
        int l = p->xf_src[x] * c->nd + p->xf_dst[x];
        CU(cudaSetDevice(p->xf_dst[x]));
        if (!c->lstream[l]) CU(cudaStreamCreateWithFlags(&c->lstream[l], cudaStreamNonBlocking));
        CU(cudaEventCreate(&c->xev[2 * x]));
        CU(cudaEventCreate(&c->xev[2 * x + 1]));
    }
    for (int32_t t = 0; t < p->ntasks; t++) {
        CU(cudaSetDevice(p->dev[t]));
        CU(cudaEventCreate(&c->tev[2 * t]));
        CU(cudaEventCreate(&c->tev[2 * t + 1]));
    }
    for (int32_t v = 0; v < p->n; v++)
        if (p->psize[v] > 0) {
            int d = p->dev[p->task[v]];
            CU(cudaSetDevice(d));
            CU(cudaMalloc((void **)&c->pbuf[v], (size_t)p->psize[v]));
            k_fill<<<grid_for(p->psize[v] / 4), 256, 0, c->comp[d]>>>(c->pbuf[v], p->psize[v] / 4);
            c->pbytes[d] += p->psize[v];
        }
#ifdef GOPT_WITH_CUDNN
    if (use_dnn && (st = plan_convs(c, nconv, err))) goto out;
#endif
    for (int32_t v = 0; v < p->n; v++)
        if (c->kind[v] == K_CONV) {
            c->conv_cudnn += c->conv_of[v] >= 0;
            c->conv_im2col += c->conv_of[v] < 0;
        }
    *outp = c;
    return GOPT_OK;
out:
    rt_cuda_free(c);
    return st;
}
