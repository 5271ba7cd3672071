/* netdev_emul.c: the "emulated" device of netdev.h: the device path's
 * kernels run by a loop over their indices on the CPU, its GEMMs by the CPU
 * BLAS in cuBLAS's column-major convention, its memory in host allocations.
 * For tests: it checks the kernels and the orchestration where no GPU is. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "netdev.h"

static gopt_status emul_open(policy_dev *d, gopt_error *err) {
    (void)d;
    (void)err;
    return GOPT_OK;
}
static void emul_close(policy_dev *d) { (void)d; }
static void *emul_alloc(policy_dev *d, size_t bytes) {
    (void)d;
    void *ptr = NULL;
    return posix_memalign(&ptr, 256, bytes ? bytes : 256) ? NULL : ptr;
}
static void emul_release(policy_dev *d, void *ptr) {
    (void)d;
    free(ptr);
}
static void emul_copy(policy_dev *d, void *dst, const void *src, size_t bytes) {
    (void)d;
    if (bytes) memcpy(dst, src, bytes);
}
static void emul_zero(policy_dev *d, void *dst, size_t bytes) {
    (void)d;
    if (bytes) memset(dst, 0, bytes);
}
static void emul_launch(policy_dev *d, const gk_call *c, long count) {
    (void)d;
    for (long i = 0; i < count; i++) gk_run(c, i);
}
static void emul_gemm(policy_dev *d, int ta, int tb, int m, int n, int k, float alpha, const float *A, int lda,
                      const float *B, int ldb, float beta, float *C, int ldc) {
    (void)d;
    cblas_sgemm(CblasColMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, A, lda,
                B, ldb, beta, C, ldc);
}
static gopt_status emul_sync(policy_dev *d, gopt_error *err) {
    (void)d;
    (void)err;
    return GOPT_OK;
}

const policy_dev_ops policy_dev_emulated = {"emulated", emul_open, emul_close, emul_alloc, emul_release, emul_copy,
                                            emul_copy,  emul_copy, emul_zero,  emul_launch, emul_gemm,   emul_sync};
