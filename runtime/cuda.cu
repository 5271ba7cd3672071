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
 * convolution as im2col + cublasSgemm (cuDNN is not used: the node carries no kernel shape);
 * memory-bound ops a grid-stride kernel summing the inputs into the output (one pass); a node
 * without a shape a stand-in sgemm of its FLOPs. Times come from CUDA events, relative to an
 * event recorded on each GPU at the step's start. Memory-over-time is not logged on GPUs (the
 * trace has kernels and copies, and the peak). */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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

__global__ void k_mem(mem_args a) {
    long long span = a.nout;
    for (int i = 0; i < a.nin; i++)
        if (a.len[i] > span) span = a.len[i];
    float red = 0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < span; i += (long long)gridDim.x * blockDim.x) {
        float acc = 0;
        for (int j = 0; j < a.nin; j++) {
            long long n = a.len[j], lim = n > a.nout ? n : a.nout;
            if (n > 0 && i < lim) acc += a.in[j][i < n ? i : i % n]; /* the modulo only past the end */
        }
        if (i < a.nout) a.out[i] = a.add ? a.out[i] + acc : acc;
        else red += acc;
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

static int node_inputs(const rt_cuda *c, int32_t v, int32_t t, rt_span *ins) {
    const gopt_frozen *f = c->f;
    int nin = 0;
    for (int32_t e = f->in_ptr[v]; e < f->in_ptr[v + 1]; e++) {
        int32_t u = f->in_src[e];
        if (c->p->task[u] == t) continue;
        int seen = 0;
        for (int32_t e2 = f->in_ptr[v]; e2 < e && !seen; e2++) seen = f->in_src[e2] == u;
        if (!seen) ins[nin++] = tensor_on(c, u, t);
    }
    return nin;
}

static void mem_launch(cudaStream_t s, const rt_span *ins, int nin, rt_span out) {
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
        long long span = a.nout;
        for (int j = 0; j < a.nin; j++)
            if (a.len[j] > span) span = a.len[j];
        k_mem<<<grid_for(span), 256, 0, s>>>(a);
    }
}

static void sgemm(cublasHandle_t h, int64_t m, int64_t n, int64_t k, const float *A, const float *B, float *C) {
    const float one = 1, zero = 0; /* row-major C = A B is column-major C^T = B^T A^T */
    if (m > 0 && n > 0 && k > 0)
        cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)m, (int)k, &one, B, (int)n, A, (int)k, &zero, C, (int)n);
}

static void run_node(rt_cuda *c, int32_t v, int32_t t, int d, int fused_mem_part) {
    const rt_plan *p = c->p;
    int nin = node_inputs(c, v, t, c->ins);
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
        rt_span src = {NULL, 0};
        for (int i = 0; i < nin; i++)
            if (c->ins[i].floats > src.floats) src = c->ins[i];
        int64_t taps = (k % 9 == 0 && k >= 9) ? 9 : 1, rows = rt_conv_block_rows(m, k);
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
        mem_launch(c->comp[d], c->ins, nin, out);
        break;
    }
    case K_MEM:
        if (!fused_mem_part) mem_launch(c->comp[d], c->ins, nin, out);
        break;
    default:
        break;
    }
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
        for (int32_t j = p->mem_ptr[t]; j < p->mem_ptr[t + 1]; j++) run_node(c, p->mem[j], t, d, fused);
        if (fused) { /* the memory-bound members: one pass per external output over their inputs */
            int nin = 0;
            for (int32_t j = p->mem_ptr[t]; j < p->mem_ptr[t + 1]; j++)
                if (c->kind[p->mem[j]] == K_MEM) nin += node_inputs(c, p->mem[j], t, c->ins + nin);
            int wrote = 0;
            for (int32_t j = p->mem_ptr[t]; j < p->mem_ptr[t + 1]; j++) {
                int32_t v = p->mem[j];
                if (c->kind[v] == K_MEM && p->ext[v] && c->obuf[v]) {
                    mem_launch(s, c->ins, nin, rt_span{c->obuf[v], p->osize[v] / 4});
                    wrote = 1;
                }
            }
            if (!wrote && nin) mem_launch(s, c->ins, nin, rt_span{NULL, 0});
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
    for (int d = 0; d < c->nd; d++) {
        cudaSetDevice(d);
        cudaDeviceSynchronize();
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
    free(c);
}

extern "C" gopt_status rt_cuda_create(const gopt_graph *g, const rt_plan *p, const int32_t *order, int graph_mode,
                                      rt_cuda **outp, gopt_error *err) {
    *outp = NULL;
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
    int64_t ws[GOPT_SIM_MAX_DEVICES] = {0};
    if (!c->order || !c->lstream || !c->pbuf || !c->kind || !c->dims || !c->obuf || !c->xbuf || !c->hold ||
        !c->xhold || !c->tev || !c->xev || !c->ins) {
        st = gopt_error_set(err, GOPT_ENOMEM, "runtime cuda: out of memory");
        goto out;
    }
    memcpy(c->order, order, (size_t)p->ntasks * sizeof(int32_t));
    for (int32_t v = 0; v < p->n; v++) {
        gopt_node_attrs at;
        gopt_graph_node(g, v, &at);
        double m = 0, nn = 0, k = 0;
        int d = p->dev[p->task[v]];
        switch ((gopt_op_class)f->op_class[v]) {
        case GOPT_OP_CLASS_INPUT:
        case GOPT_OP_CLASS_PARAM:
            c->kind[v] = K_NONE;
            break;
        case GOPT_OP_CLASS_GEMM:
        case GOPT_OP_CLASS_CONV:
            if (f->flops[v] > 0 && gopt_cost_gemm_dims(at.shape, f->flops[v], &m, &nn, &k) && m * nn * k < 1e13) {
                c->kind[v] = f->op_class[v] == GOPT_OP_CLASS_GEMM ? K_GEMM : K_CONV;
                c->dims[v][0] = (int64_t)m;
                c->dims[v][1] = (int64_t)nn;
                c->dims[v][2] = (int64_t)llround(k);
                /* the worst case: no operand served by an input */
                int64_t need = c->dims[v][0] * c->dims[v][2] + c->dims[v][2] * c->dims[v][1] +
                               c->dims[v][0] * c->dims[v][1] +
                               rt_conv_block_rows(c->dims[v][0], c->dims[v][2]) * c->dims[v][2];
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
    *outp = c;
    return GOPT_OK;
out:
    rt_cuda_free(c);
    return st;
}
