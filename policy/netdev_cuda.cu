/* netdev_cuda.cu: the "cuda" device of netdev.h: the kernels of
 * netdev_kernels.h as one CUDA thread per index, cuBLAS for the GEMMs (FP32,
 * no TF32), one stream. The first failing call's error is kept and reported
 * by the next sync, naming the call. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

extern "C" {
#include "netdev.h"
}

typedef struct {
    cudaStream_t stream;
    cublasHandle_t blas;
    int failed;
    char what[160];
} cuda_impl;

static cuda_impl *impl_of(policy_dev *d) { return (cuda_impl *)policy_dev_impl(d); }

static void note(cuda_impl *c, const char *call, const char *msg) {
    if (c->failed) return;
    c->failed = 1;
    snprintf(c->what, sizeof c->what, "%s: %s", call, msg);
}
static void check(cuda_impl *c, cudaError_t e, const char *call) {
    if (e != cudaSuccess) note(c, call, cudaGetErrorString(e));
}
static void check_blas(cuda_impl *c, cublasStatus_t s, const char *call) {
    if (s != CUBLAS_STATUS_SUCCESS) {
        char buf[32];
        snprintf(buf, sizeof buf, "cuBLAS status %d", (int)s);
        note(c, call, buf);
    }
}

__global__ void gk_kernel(gk_call c, long count) {
    const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) gk_run(&c, i);
}

static gopt_status cuda_open(policy_dev *d, gopt_error *err) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count < 1)
        return gopt_error_set(err, GOPT_EUNSUP, "policy: no CUDA device on this machine (%s)",
                              e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    cuda_impl *c = (cuda_impl *)calloc(1, sizeof *c);
    if (!c) return gopt_error_set(err, GOPT_ENOMEM, "policy: out of memory");
    check(c, cudaStreamCreate(&c->stream), "cudaStreamCreate");
    if (!c->failed) check_blas(c, cublasCreate(&c->blas), "cublasCreate");
    if (!c->failed) check_blas(c, cublasSetStream(c->blas, c->stream), "cublasSetStream");
    if (!c->failed) check_blas(c, cublasSetMathMode(c->blas, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode");
    if (c->failed) {
        gopt_status st = gopt_error_set(err, GOPT_EUNSUP, "policy on cuda: %s", c->what);
        free(c);
        return st;
    }
    policy_dev_set_impl(d, c);
    return GOPT_OK;
}

static void cuda_close(policy_dev *d) {
    cuda_impl *c = impl_of(d);
    if (!c) return;
    cudaStreamSynchronize(c->stream);
    cublasDestroy(c->blas);
    cudaStreamDestroy(c->stream);
    free(c);
    policy_dev_set_impl(d, NULL);
}

static void *cuda_alloc(policy_dev *d, size_t bytes) {
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 256) != cudaSuccess) {
        cudaGetLastError(); /* clear it: the caller reports the failure */
        return NULL;
    }
    (void)d;
    return p;
}

static void cuda_release(policy_dev *d, void *ptr) {
    (void)d;
    cudaFree(ptr);
}

static void cuda_h2d(policy_dev *d, void *dst, const void *src, size_t bytes) {
    cuda_impl *c = impl_of(d);
    if (bytes) check(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream), "cudaMemcpyAsync (up)");
}
static void cuda_d2h(policy_dev *d, void *dst, const void *src, size_t bytes) {
    cuda_impl *c = impl_of(d);
    if (bytes) check(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream), "cudaMemcpyAsync (down)");
}
static void cuda_d2d(policy_dev *d, void *dst, const void *src, size_t bytes) {
    cuda_impl *c = impl_of(d);
    if (bytes) check(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->stream), "cudaMemcpyAsync");
}
static void cuda_zero(policy_dev *d, void *dst, size_t bytes) {
    cuda_impl *c = impl_of(d);
    if (bytes) check(c, cudaMemsetAsync(dst, 0, bytes, c->stream), "cudaMemsetAsync");
}
static void cuda_launch(policy_dev *d, const gk_call *k, long count) {
    cuda_impl *c = impl_of(d);
    const int block = 128;
    const long grid = (count + block - 1) / block;
    gk_kernel<<<(unsigned)grid, block, 0, c->stream>>>(*k, count);
    check(c, cudaGetLastError(), "kernel launch");
}
static void cuda_gemm(policy_dev *d, int ta, int tb, int m, int n, int k, float alpha, const float *A, int lda,
                      const float *B, int ldb, float beta, float *C, int ldc) {
    cuda_impl *c = impl_of(d);
    check_blas(c,
               cublasSgemm(c->blas, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha, A,
                           lda, B, ldb, &beta, C, ldc),
               "cublasSgemm");
}
static gopt_status cuda_sync(policy_dev *d, gopt_error *err) {
    cuda_impl *c = impl_of(d);
    check(c, cudaStreamSynchronize(c->stream), "cudaStreamSynchronize");
    if (!c->failed) return GOPT_OK;
    c->failed = 0;
    return gopt_error_set(err, GOPT_EINTERNAL, "policy on cuda: %s", c->what);
}

extern "C" const policy_dev_ops policy_dev_cuda = {"cuda",    cuda_open, cuda_close, cuda_alloc, cuda_release, cuda_h2d,
                                                   cuda_d2h,  cuda_d2d,  cuda_zero,  cuda_launch, cuda_gemm,   cuda_sync};
