/* calib_cuda.cu: measure every visible CUDA GPU into a profile (gopt profile
 * calibrate --backend cuda). Built only when CMake finds the CUDA toolkit.
 *
 * Per GPU, each phase with a share of the time budget:
 *   launch overhead   back-to-back launches of an empty kernel (host clock)
 *   memory bandwidth  a large device-to-device copy kernel
 *   elementwise       c = a + b over sizes (bytes read + written)
 *   reduction         sum(a) over sizes (bytes read)
 *   GEMM              cublasSgemm over random (m, n, k), log-uniform; the
 *                     fastest rate is the fp32 peak; one large fp16 GEMM
 *                     (tensor cores, cublasGemmEx) gives the fp16 peak
 *   convolution       cuDNN forward convolution (the algorithm its heuristics
 *                     rank first; gopt_cudnn.h, shared with the CUDA runtime)
 *                     over random shapes, table by FLOPs
 * then copies: every ordered GPU pair (peer-to-peer where the pair supports
 * it, else staged by the driver), and host-to-device / device-to-host with
 * pinned memory (kept as table sets "gpuN-h2d", "gpuN-d2h").
 * Kernel tables hold per-kernel times of back-to-back launches (CUDA
 * events around a batch) minus the empty-kernel time, so that the cost
 * model's launch + table does not count the launch twice; each point is the
 * median over interleaved rounds (as on the CPU). With no GPU (or no
 * driver) it returns GOPT_EUNSUP naming the CUDA error; nothing is written.
 */
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#ifdef GOPT_WITH_CUDNN
#include "gopt_cudnn.h"
#endif
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern "C" {
#include "profile_internal.h"
}

#define ROUNDS 5
#define MIN_BATCH_S 5e-4
#define MAX_ELEM_BYTES (768.0 * 1024 * 1024)
#define GEMM_POINTS 400
#define CONV_POINTS 300

namespace {

struct gpu_calib {
    const gopt_calib_options *o;
    double budget, t0, done, share, phase_t0;
    const char *what;
    gopt_rng rng;
    gopt_error *err;
};

void progress(gpu_calib *k, double within) {
    if (!k->o->progress) return;
    double el = (gopt_now_seconds() - k->phase_t0) / (k->share * k->budget);
    if (el > within) within = el;
    if (within > 1) within = 1;
    k->o->progress(k->o->progress_ctx, k->done + k->share * within, k->what);
}
void phase(gpu_calib *k, const char *what, double share) {
    k->what = what;
    k->share = share;
    k->phase_t0 = gopt_now_seconds();
    progress(k, 0);
}
void phase_done(gpu_calib *k) {
    progress(k, 1);
    k->done += k->share;
}

#define CU(call)                                                                                                      \
    do {                                                                                                              \
        cudaError_t e_ = (call);                                                                                      \
        if (e_ != cudaSuccess) {                                                                                      \
            st = gopt_error_set(k->err, GOPT_EINTERNAL, "calibrate cuda: %s failed: %s", #call, cudaGetErrorString(e_)); \
            goto out;                                                                                                 \
        }                                                                                                             \
    } while (0)

__global__ void k_empty() {}
__global__ void k_add(const float *__restrict__ a, const float *__restrict__ b, float *__restrict__ c, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        c[i] = a[i] + b[i];
}
__global__ void k_copy(const float *__restrict__ a, float *__restrict__ c, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) c[i] = a[i];
}
__global__ void k_sum(const float *__restrict__ a, float *out, size_t n) {
    __shared__ float s[256];
    float v = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) v += a[i];
    s[threadIdx.x] = v;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(out, s[0]);
}

int grid_for(size_t n, int sms) {
    size_t g = (n + 255) / 256;
    size_t cap = (size_t)sms * 8;
    return (int)(g < 1 ? 1 : g > cap ? cap : g);
}

int cmp_double(const void *x, const void *y) {
    double u = *(const double *)x, v = *(const double *)y;
    return (u > v) - (u < v);
}

/* What one timed batch runs: item coordinates, reps. Returns seconds per
 * call from CUDA events, or a negative value on a CUDA error. */
struct bench_ctx {
    float *a, *b, *c, *acc;
    size_t cap; /* floats per buffer */
    int sms;
    cublasHandle_t blas;
#ifdef GOPT_WITH_CUDNN
    cudnnHandle_t dnn;
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    void *ws;
    size_t ws_cap;
#endif
    cudaEvent_t e0, e1;
};

typedef int (*run_fn)(bench_ctx *b, const double *item, long reps); /* 0 ok */

double timed(bench_ctx *b, run_fn fn, const double *item, long reps) {
    if (cudaEventRecord(b->e0) != cudaSuccess) return -1;
    if (fn(b, item, reps)) return -1;
    if (cudaEventRecord(b->e1) != cudaSuccess || cudaEventSynchronize(b->e1) != cudaSuccess) return -1;
    float ms = 0;
    if (cudaEventElapsedTime(&ms, b->e0, b->e1) != cudaSuccess) return -1;
    return ms * 1e-3 / (double)reps;
}

int run_add(bench_ctx *b, const double *item, long reps) {
    size_t n = (size_t)item[0];
    for (long r = 0; r < reps; r++) k_add<<<grid_for(n, b->sms), 256>>>(b->a, b->b, b->c, n);
    return cudaGetLastError() != cudaSuccess;
}
int run_sum(bench_ctx *b, const double *item, long reps) {
    size_t n = (size_t)item[0];
    for (long r = 0; r < reps; r++) k_sum<<<grid_for(n, b->sms), 256>>>(b->a, b->acc, n);
    return cudaGetLastError() != cudaSuccess;
}
int run_sgemm(bench_ctx *b, const double *item, long reps) {
    int m = (int)item[0], n = (int)item[1], kk = (int)item[2];
    const float one = 1, zero = 0;
    /* column-major C(m,n) = A(m,k) B(k,n) */
    for (long r = 0; r < reps; r++)
        if (cublasSgemm(b->blas, CUBLAS_OP_N, CUBLAS_OP_N, m, n, kk, &one, b->a, m, b->b, kk, &zero, b->c, m) !=
            CUBLAS_STATUS_SUCCESS)
            return 1;
    return 0;
}
int run_hgemm(bench_ctx *b, const double *item, long reps) {
    int m = (int)item[0], n = (int)item[1], kk = (int)item[2];
    const float one = 1, zero = 0;
    for (long r = 0; r < reps; r++)
        if (cublasGemmEx(b->blas, CUBLAS_OP_N, CUBLAS_OP_N, m, n, kk, &one, b->a, CUDA_R_16F, m, b->b, CUDA_R_16F, kk,
                         &zero, b->c, CUDA_R_16F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
            return 1;
    return 0;
}

#ifdef GOPT_WITH_CUDNN
/* item: N, C, H, W, K, R (square filter, stride 1, same padding: gopt_cudnn.h, the runtime's
 * convolution), then the algorithm and its math type (conv_algo). */
int run_conv(bench_ctx *b, const double *item, long reps) {
    int N = (int)item[0], C = (int)item[1], H = (int)item[2], W = (int)item[3], K = (int)item[4], R = (int)item[5];
    cudnnConvolutionFwdAlgo_t algo = (cudnnConvolutionFwdAlgo_t)(int)item[6];
    if (gopt_cudnn_conv_describe(N, C, H, W, K, R, (cudnnMathType_t)(int)item[7], b->x, b->w, b->conv, b->y))
        return 1;
    const float one = 1, zero = 0;
    for (long r = 0; r < reps; r++)
        if (cudnnConvolutionForward(b->dnn, &one, b->x, b->a, b->w, b->b, b->conv, algo, b->ws, b->ws_cap, &zero, b->y,
                                    b->c) != CUDNN_STATUS_SUCCESS)
            return 1;
    return 0;
}
/* The algorithm cuDNN's heuristics propose first that fits the workspace into item[6] and its
 * math type into item[7]; -1 when none. */
int conv_algo(bench_ctx *b, double *item) {
    int N = (int)item[0], C = (int)item[1], H = (int)item[2], W = (int)item[3], K = (int)item[4], R = (int)item[5];
    cudnnMathType_t math = CUDNN_DEFAULT_MATH;
    if (gopt_cudnn_conv_describe(N, C, H, W, K, R, math, b->x, b->w, b->conv, b->y)) return -1;
    int algo = gopt_cudnn_conv_algo(b->dnn, b->x, b->w, b->conv, b->y, b->ws_cap, NULL, &math);
    item[6] = algo;
    item[7] = (double)math;
    return algo;
}
#endif

/* Interleaved rounds over items (n, w); out: median seconds per call. May
 * cut n when the first pass alone uses a third of the phase. */
gopt_status measure(gpu_calib *k, bench_ctx *b, run_fn fn, double *items, int *n_io, int w, double *out) {
    int n = *n_io;
    long *reps = (long *)calloc((size_t)n, sizeof(long));
    double *v = (double *)calloc((size_t)n * ROUNDS, sizeof(double));
    gopt_status st = GOPT_OK;
    if (!reps || !v) {
        st = gopt_error_set(k->err, GOPT_ENOMEM, "calibrate cuda: out of memory");
        goto done;
    }
    {
        int m = 0;
        for (int i = 0; i < n; i++) {
            double one = timed(b, fn, items + (size_t)i * w, 1);
            one = timed(b, fn, items + (size_t)i * w, 1);
            if (one < 0) {
                st = gopt_error_set(k->err, GOPT_EINTERNAL, "calibrate cuda: %s: a kernel failed (%s)", k->what,
                                    cudaGetErrorString(cudaGetLastError()));
                goto done;
            }
            reps[i] = one > 0 ? (long)(MIN_BATCH_S / one) + 1 : 100;
            if (reps[i] > 20000) reps[i] = 20000;
            m++;
            progress(k, 0.3 * m / n);
            if (m >= 8 && gopt_now_seconds() - k->phase_t0 > k->share * k->budget / 3) break;
        }
        n = *n_io = m;
        for (int r = 0; r < ROUNDS; r++) {
            for (int j = 0; j < n; j++) {
                int i = (int)((j * 7919L + r * 104729L) % n); /* a different order every round */
                double t = timed(b, fn, items + (size_t)i * w, reps[i]);
                if (t < 0) {
                    st = gopt_error_set(k->err, GOPT_EINTERNAL, "calibrate cuda: %s: a kernel failed", k->what);
                    goto done;
                }
                v[(size_t)i * ROUNDS + r] = t;
            }
            progress(k, 0.3 + 0.7 * (r + 1) / ROUNDS);
        }
        for (int i = 0; i < n; i++) {
            qsort(v + (size_t)i * ROUNDS, ROUNDS, sizeof(double), cmp_double);
            out[i] = v[(size_t)i * ROUNDS + ROUNDS / 2];
        }
    }
done:
    free(reps);
    free(v);
    return st;
}

double log_uniform(gopt_rng *r, double lo, double hi) { return exp(log(lo) + gopt_rng_uniform(r) * (log(hi) - log(lo))); }

/* rows (n, 2) of (bytes, seconds) for a copy of each size. */
gopt_status measure_copies(gpu_calib *k, int src, int dst, void *from, void *to, cudaMemcpyKind kind, int npts,
                           double maxb, double **rows, cudaEvent_t e0, cudaEvent_t e1) {
    gopt_status st = GOPT_OK;
    double *r = (double *)malloc((size_t)npts * 2 * sizeof(double));
    double v[ROUNDS];
    if (!r) return gopt_error_set(k->err, GOPT_ENOMEM, "calibrate cuda: out of memory");
    for (int i = 0; i < npts; i++) {
        double bytes = floor(exp(log(256.0) + (i + 0.5) / npts * (log(maxb) - log(256.0))));
        for (int rr = 0; rr < ROUNDS; rr++) {
            float ms = 0;
            cudaError_t e = cudaEventRecord(e0);
            if (e == cudaSuccess)
                e = src >= 0 && dst >= 0 ? cudaMemcpyPeerAsync(to, dst, from, src, (size_t)bytes)
                                         : cudaMemcpyAsync(to, from, (size_t)bytes, kind);
            if (e == cudaSuccess) e = cudaEventRecord(e1);
            if (e == cudaSuccess) e = cudaEventSynchronize(e1);
            if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, e0, e1);
            if (e != cudaSuccess) {
                free(r);
                return gopt_error_set(k->err, GOPT_EINTERNAL, "calibrate cuda: copy of %.0f bytes failed: %s", bytes,
                                      cudaGetErrorString(e));
            }
            v[rr] = ms * 1e-3 > 1e-7 ? ms * 1e-3 : 1e-7;
        }
        qsort(v, ROUNDS, sizeof(double), cmp_double);
        r[2 * i] = bytes;
        r[2 * i + 1] = v[ROUNDS / 2];
    }
    *rows = r;
    return st;
}

} // namespace

extern "C" int gopt_calibrate_cuda_built(void) { return 1; }

extern "C" gopt_status gopt_calibrate_cuda(const gopt_calib_options *o, gopt_profile **out, gopt_error *err) {
    *out = NULL;
    int ngpu = 0;
    cudaError_t ce = cudaGetDeviceCount(&ngpu);
    if (ce != cudaSuccess || ngpu < 1)
        return gopt_error_set(err, GOPT_EUNSUP, "calibrate --backend cuda: no CUDA GPU is present (%s)",
                              ce != cudaSuccess ? cudaGetErrorString(ce) : "0 devices");
    if (o->ndev > 0 && o->ndev < ngpu) ngpu = o->ndev;
    gpu_calib kc = {};
    gpu_calib *k = &kc;
    k->o = o;
    k->budget = o->budget_s > 0 ? o->budget_s : 60.0;
    k->t0 = gopt_now_seconds();
    k->err = err;
    gopt_rng_seed(&k->rng, o->seed);
    gopt_status st = GOPT_OK;
    int npairs = ngpu * (ngpu - 1);
    /* sets: per GPU kernels, h2d, d2h; per ordered pair a copy set */
    int nsets = 3 * ngpu + npairs;
    gopt_profile *p = NULL;
    if ((st = gopt_profile_alloc(ngpu, nsets, &p, err))) return st;
    double per_gpu = 0.85 / ngpu;
    bench_ctx bc = {};
    bench_ctx *b = &bc;
    char model[256] = "";
    for (int d = 0; d < ngpu; d++) {
        cudaDeviceProp prop;
        CU(cudaSetDevice(d));
        CU(cudaGetDeviceProperties(&prop, d));
        snprintf(model, sizeof model, "%s", prop.name);
        b->sms = prop.multiProcessorCount;
        size_t freeb = 0, total = 0;
        CU(cudaMemGetInfo(&freeb, &total));
        b->cap = (size_t)(MAX_ELEM_BYTES / 3 / sizeof(float));
        if (3 * b->cap * sizeof(float) > freeb / 2) b->cap = freeb / 2 / 3 / sizeof(float);
        CU(cudaMalloc(&b->a, b->cap * sizeof(float)));
        CU(cudaMalloc(&b->b, b->cap * sizeof(float)));
        CU(cudaMalloc(&b->c, b->cap * sizeof(float)));
        CU(cudaMalloc(&b->acc, sizeof(float)));
        CU(cudaMemset(b->a, 0, b->cap * sizeof(float)));
        CU(cudaMemset(b->b, 0, b->cap * sizeof(float)));
        CU(cudaEventCreate(&b->e0));
        CU(cudaEventCreate(&b->e1));
        if (cublasCreate(&b->blas) != CUBLAS_STATUS_SUCCESS) {
            st = gopt_error_set(err, GOPT_EINTERNAL, "calibrate cuda: cublasCreate failed on GPU %d", d);
            goto out;
        }
        gopt_device *dv = &p->dev[d];
        char nm[32];
        snprintf(nm, sizeof nm, "gpu%d", d);
        dv->name = gopt_profile_strdup(nm, err);
        dv->model = gopt_profile_strdup(prop.name, err);
        if (!dv->name || !dv->model) {
            st = GOPT_ENOMEM;
            goto out;
        }
        dv->kind = GOPT_DEVICE_GPU;
        dv->memory = (double)total;
        dv->tableset = 3 * d;
        gopt_tableset *ts = &p->sets[3 * d];
        ts->name = gopt_profile_strdup(nm, err);
        char hn[48];
        snprintf(hn, sizeof hn, "%s-h2d", nm);
        p->sets[3 * d + 1].name = gopt_profile_strdup(hn, err);
        snprintf(hn, sizeof hn, "%s-d2h", nm);
        p->sets[3 * d + 2].name = gopt_profile_strdup(hn, err);

        /* launch overhead: back-to-back empty kernels, host clock */
        phase(k, "launch overhead", per_gpu * 0.02);
        {
            for (int i = 0; i < 100; i++) k_empty<<<1, 1>>>();
            CU(cudaDeviceSynchronize());
            double t = gopt_now_seconds();
            for (int i = 0; i < 5000; i++) k_empty<<<1, 1>>>();
            CU(cudaDeviceSynchronize());
            dv->launch = (gopt_now_seconds() - t) / 5000;
        }
        phase_done(k);

        phase(k, "memory bandwidth", per_gpu * 0.03);
        {
            size_t n = b->cap;
            k_copy<<<grid_for(n, b->sms), 256>>>(b->a, b->c, n);
            CU(cudaEventRecord(b->e0));
            for (int i = 0; i < 10; i++) k_copy<<<grid_for(n, b->sms), 256>>>(b->a, b->c, n);
            CU(cudaEventRecord(b->e1));
            CU(cudaEventSynchronize(b->e1));
            float ms = 0;
            CU(cudaEventElapsedTime(&ms, b->e0, b->e1));
            dv->bandwidth = 2.0 * n * sizeof(float) * 10 / (ms * 1e-3);
        }
        phase_done(k);

        /* elementwise and reduction tables */
        for (int pass = 0; pass < 2; pass++) {
            int np = 40, m = np;
            double *it = (double *)malloc(np * sizeof(double)), *tt = (double *)malloc(np * sizeof(double));
            double per = pass == 0 ? 12.0 : 4.0;
            if (!it || !tt) {
                free(it);
                free(tt);
                st = gopt_error_set(err, GOPT_ENOMEM, "calibrate cuda: out of memory");
                goto out;
            }
            for (int i = 0; i < np; i++) {
                double bytes = exp(log(1024.0) + (i + gopt_rng_uniform(&k->rng)) / np * (log(MAX_ELEM_BYTES) - log(1024.0)));
                double n = floor(bytes / per);
                it[i] = n < 1 ? 1 : n > (double)b->cap ? (double)b->cap : n;
            }
            phase(k, pass == 0 ? "elementwise kernels" : "reduction kernels", per_gpu * 0.12);
            st = measure(k, b, pass == 0 ? run_add : run_sum, it, &m, 1, tt);
            gopt_table_kind kind = pass == 0 ? GOPT_TABLE_ELEMENTWISE : GOPT_TABLE_REDUCTION;
            if (!st) {
                ts->pts[kind] = (double *)malloc((size_t)m * 2 * sizeof(double));
                if (!ts->pts[kind]) st = gopt_error_set(err, GOPT_ENOMEM, "calibrate cuda: out of memory");
            }
            if (!st) {
                ts->n[kind] = m;
                for (int i = 0; i < m; i++) {
                    ts->pts[kind][2 * i] = it[i] * per;
                    double x = tt[i] - dv->launch;
                    ts->pts[kind][2 * i + 1] = x > 0.1 * tt[i] ? x : 0.1 * tt[i];
                }
            }
            free(it);
            free(tt);
            if (st) goto out;
            phase_done(k);
        }

        /* GEMM table and peaks */
        {
            int m = 0;
            double *it = (double *)malloc(GEMM_POINTS * 3 * sizeof(double)), *tt = (double *)malloc(GEMM_POINTS * sizeof(double));
            if (!it || !tt) {
                free(it);
                free(tt);
                st = gopt_error_set(err, GOPT_ENOMEM, "calibrate cuda: out of memory");
                goto out;
            }
            while (m < GEMM_POINTS) {
                double a = floor(log_uniform(&k->rng, 16, 16384)), c = floor(log_uniform(&k->rng, 16, 16384)),
                       e = floor(log_uniform(&k->rng, 16, 16384));
                if (2 * a * c * e > 2e11 || a * e > (double)b->cap || e * c > (double)b->cap || a * c > (double)b->cap)
                    continue;
                it[3 * m] = a;
                it[3 * m + 1] = c;
                it[3 * m + 2] = e;
                m++;
            }
            phase(k, "cuBLAS sgemm shapes", per_gpu * 0.40);
            st = measure(k, b, run_sgemm, it, &m, 3, tt);
            if (!st) {
                ts->pts[GOPT_TABLE_GEMM] = (double *)malloc((size_t)m * 4 * sizeof(double));
                if (!ts->pts[GOPT_TABLE_GEMM]) st = gopt_error_set(err, GOPT_ENOMEM, "calibrate cuda: out of memory");
            }
            if (!st) {
                ts->n[GOPT_TABLE_GEMM] = m;
                for (int i = 0; i < m; i++) {
                    double *r = ts->pts[GOPT_TABLE_GEMM] + 4 * i;
                    r[0] = it[3 * i];
                    r[1] = it[3 * i + 1];
                    r[2] = it[3 * i + 2];
                    double x = tt[i] - dv->launch;
                    r[3] = x > 0.1 * tt[i] ? x : 0.1 * tt[i];
                    double rate = 2 * r[0] * r[1] * r[2] / tt[i];
                    if (rate > dv->peak[GOPT_DTYPE_FP32]) dv->peak[GOPT_DTYPE_FP32] = rate;
                }
            }
            free(it);
            free(tt);
            if (st) goto out;
            /* fp16 peak: one large tensor-core GEMM */
            double h[3] = {4096, 4096, 4096};
            while (h[0] * h[2] > 2.0 * b->cap) {
                h[0] /= 2;
                h[1] /= 2;
                h[2] /= 2;
            }
            if (timed(b, run_hgemm, h, 1) > 0) {
                double t = timed(b, run_hgemm, h, 10);
                if (t > 0) dv->peak[GOPT_DTYPE_FP16] = 2 * h[0] * h[1] * h[2] / t;
            }
            cudaGetLastError();
            phase_done(k);
        }

#ifdef GOPT_WITH_CUDNN
        /* convolution tables: by FLOPs, and by the implicit GEMM's m, n, k */
        phase(k, "cuDNN convolutions", per_gpu * 0.25);
        if (cudnnCreate(&b->dnn) == CUDNN_STATUS_SUCCESS && !cudnnCreateTensorDescriptor(&b->x) &&
            !cudnnCreateTensorDescriptor(&b->y) && !cudnnCreateFilterDescriptor(&b->w) &&
            !cudnnCreateConvolutionDescriptor(&b->conv)) {
            b->ws_cap = GOPT_CUDNN_WS_CAP;
            if (cudaMalloc(&b->ws, b->ws_cap) != cudaSuccess) {
                b->ws = NULL;
                b->ws_cap = 0;
            }
            const int W8 = 8;
            double *it = (double *)malloc(CONV_POINTS * W8 * sizeof(double)), *tt = (double *)malloc(CONV_POINTS * sizeof(double));
            int m = 0, tries = 0;
            static const int RS[] = {1, 3, 5};
            while (it && tt && m < CONV_POINTS && tries++ < 20 * CONV_POINTS) {
                double *r = it + (size_t)m * W8;
                r[0] = floor(log_uniform(&k->rng, 1, 64));
                r[1] = floor(log_uniform(&k->rng, 3, 512));
                r[2] = r[3] = floor(log_uniform(&k->rng, 7, 128));
                r[4] = floor(log_uniform(&k->rng, 8, 512));
                r[5] = RS[gopt_rng_below(&k->rng, 3)];
                double in = r[0] * r[1] * r[2] * r[3], wt = r[4] * r[1] * r[5] * r[5], outn = r[0] * r[4] * r[2] * r[3];
                double fl = 2 * outn * r[1] * r[5] * r[5];
                if (in > (double)b->cap || wt > (double)b->cap || outn > (double)b->cap || fl > 2e11) continue;
                if (conv_algo(b, r) < 0) continue;
                m++;
            }
            if (it && tt && m >= 8 && !(st = measure(k, b, run_conv, it, &m, W8, tt))) {
                double *fl = (double *)malloc((size_t)m * 2 * sizeof(double));
                double *g3 = (double *)malloc((size_t)m * 4 * sizeof(double));
                if (fl && g3) {
                    ts->pts[GOPT_TABLE_CONV] = fl;
                    ts->pts[GOPT_TABLE_CONV_GEMM] = g3;
                    ts->n[GOPT_TABLE_CONV] = ts->n[GOPT_TABLE_CONV_GEMM] = m;
                    fl = g3 = NULL;
                    for (int i = 0; i < m; i++) {
                        double *r = it + (size_t)i * W8, *f2 = ts->pts[GOPT_TABLE_CONV] + 2 * i;
                        double *g = ts->pts[GOPT_TABLE_CONV_GEMM] + 4 * i;
                        double x = tt[i] - dv->launch;
                        g[0] = r[0] * r[2] * r[3]; /* output pixels */
                        g[1] = r[4];               /* filters */
                        g[2] = r[1] * r[5] * r[5]; /* channels x taps */
                        f2[0] = 2 * g[0] * g[1] * g[2];
                        f2[1] = g[3] = x > 0.1 * tt[i] ? x : 0.1 * tt[i];
                    }
                }
                free(fl);
                free(g3);
            }
            free(it);
            free(tt);
            cudnnDestroyTensorDescriptor(b->x);
            cudnnDestroyTensorDescriptor(b->y);
            cudnnDestroyFilterDescriptor(b->w);
            cudnnDestroyConvolutionDescriptor(b->conv);
            cudnnDestroy(b->dnn);
            cudaFree(b->ws);
            b->ws = NULL;
            if (st) goto out;
        }
        phase_done(k);
#endif

        /* host <-> device copies with pinned memory */
        phase(k, "host-device copies", per_gpu * 0.06);
        {
            void *host = NULL;
            double maxb = (double)b->cap * sizeof(float);
            if (maxb > 256.0 * (1 << 20)) maxb = 256.0 * (1 << 20);
            CU(cudaMallocHost(&host, (size_t)maxb));
            st = measure_copies(k, -1, -1, host, b->a, cudaMemcpyHostToDevice, 16, maxb, &p->sets[3 * d + 1].pts[GOPT_TABLE_COPY],
                                b->e0, b->e1);
            if (!st)
                st = measure_copies(k, -1, -1, b->a, host, cudaMemcpyDeviceToHost, 16, maxb,
                                    &p->sets[3 * d + 2].pts[GOPT_TABLE_COPY], b->e0, b->e1);
            cudaFreeHost(host);
            if (st) goto out;
            p->sets[3 * d + 1].n[GOPT_TABLE_COPY] = 16;
            p->sets[3 * d + 2].n[GOPT_TABLE_COPY] = 16;
        }
        phase_done(k);

        cublasDestroy(b->blas);
        b->blas = NULL;
        cudaEventDestroy(b->e0);
        cudaEventDestroy(b->e1);
        cudaFree(b->a);
        cudaFree(b->b);
        cudaFree(b->c);
        cudaFree(b->acc);
        b->a = b->b = b->c = b->acc = NULL;
    }

    /* GPU pairs: peer copies where supported */
    phase(k, "GPU-GPU copies", 1.0 - k->done);
    {
        int s_i = 3 * ngpu;
        for (int s = 0; s < ngpu; s++)
            for (int t = 0; t < ngpu; t++) {
                if (s == t) continue;
                int can = 0;
                cudaDeviceCanAccessPeer(&can, s, t);
                CU(cudaSetDevice(s));
                if (can) {
                    cudaError_t e = cudaDeviceEnablePeerAccess(t, 0);
                    if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) can = 0;
                    cudaGetLastError();
                }
                double maxb = 128.0 * (1 << 20);
                void *from = NULL, *to = NULL;
                cudaEvent_t e0, e1;
                CU(cudaMalloc(&from, (size_t)maxb));
                CU(cudaEventCreate(&e0));
                CU(cudaEventCreate(&e1));
                CU(cudaSetDevice(t));
                CU(cudaMalloc(&to, (size_t)maxb));
                CU(cudaSetDevice(s));
                gopt_tableset *ts = &p->sets[s_i];
                char nm[64];
                snprintf(nm, sizeof nm, "gpu%d-gpu%d%s", s, t, can ? "-p2p" : "");
                ts->name = gopt_profile_strdup(nm, err);
                st = measure_copies(k, s, t, from, to, cudaMemcpyDefault, 14, maxb, &ts->pts[GOPT_TABLE_COPY], e0, e1);
                cudaFree(from);
                cudaSetDevice(t);
                cudaFree(to);
                cudaSetDevice(s);
                cudaEventDestroy(e0);
                cudaEventDestroy(e1);
                if (st) goto out;
                ts->n[GOPT_TABLE_COPY] = 14;
                double *r = ts->pts[GOPT_TABLE_COPY];
                size_t li = (size_t)s * ngpu + t;
                p->link_lat[li] = r[1];
                p->link_bw[li] = (r[2 * 13] - r[0]) / (r[2 * 13 + 1] - r[1] > 1e-9 ? r[2 * 13 + 1] - r[1] : 1e-9);
                p->link_set[li] = s_i;
                s_i++;
                progress(k, (double)s_i / (3 * ngpu + npairs));
            }
    }
    phase_done(k);
    {
        char machine[512], date[64], desc[512];
        long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
        int drv = 0, rt = 0;
        cudaDriverGetVersion(&drv);
        cudaRuntimeGetVersion(&rt);
        snprintf(machine, sizeof machine, "%d x %s, host %.1f GiB RAM, CUDA driver %d runtime %d", ngpu, model,
                 pages > 0 ? (double)pages * psz / (1 << 30) : 0.0, drv, rt);
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
        snprintf(desc, sizeof desc,
                 "%d GPU(s) %s; MEASURED by the CUDA calibrator (cuBLAS sgemm, cuDNN convolution, elementwise and "
                 "reduction kernels, launch overhead, host-device and GPU-GPU copies) in %.0f s",
                 ngpu, model, gopt_now_seconds() - k->t0);
        p->name = gopt_profile_strdup(o->name ? o->name : "cuda-measured", err);
        p->description = gopt_profile_strdup(desc, err);
        p->source = gopt_profile_strdup("measured", err);
        p->machine = gopt_profile_strdup(machine, err);
        p->date = gopt_profile_strdup(date, err);
        p->command = gopt_profile_strdup(o->command ? o->command : "gopt profile calibrate --backend cuda", err);
        p->reference = gopt_profile_strdup("", err);
        if (!p->name || !p->description || !p->source || !p->machine || !p->date || !p->command || !p->reference) {
            st = GOPT_ENOMEM;
            goto out;
        }
        for (int s = 0; s < p->nsets; s++)
            if (!p->sets[s].name) {
                st = GOPT_ENOMEM;
                goto out;
            }
    }
    if ((st = gopt_profile_check(p, "calibrated CUDA profile", err))) goto out;
    *out = p;
    p = NULL;
out:
    if (b->blas) cublasDestroy(b->blas);
    cudaFree(b->a);
    cudaFree(b->b);
    cudaFree(b->c);
    cudaFree(b->acc);
    gopt_profile_free(p);
    return st;
}
