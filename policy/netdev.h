/* netdev.h: the policy network's forward and backward on a device (internal
 * to policy/).
 *
 * gopt_policy_set_device(p, "cuda") moves the network (the trunk: input
 * layer, GraphSAGE, the attention layers, the heads) to a GPU: cuBLAS for
 * the dense layers and kernels of our own (netdev_kernels.h) for the
 * aggregation, the segment attention, the norms and the column sums. The
 * decoder, the losses' row gradients and Adam stay on the CPU: after the
 * forward the heads' logits and the scorer's node input come back to the
 * host (n x (ndev + P + F + Hc) floats), before the backward their gradients
 * go to the device, after it the parameter gradients come back (nparams
 * floats) and are added to the host's. Parameters go up before every
 * forward (the optimizer changes them between calls).
 *
 * "emulated" is the same path with the kernels run by a loop on the CPU and
 * the GEMMs by the CPU BLAS in cuBLAS's column-major convention: it tests
 * the device path's kernels and orchestration on machines without a GPU.
 *
 * A backend is a table of operations (policy_dev_ops); device pointers are
 * opaque to netdev.c, which only hands them to the backend.
 */
#ifndef GOPT_NETDEV_H
#define GOPT_NETDEV_H

#include "netdev_kernels.h"
#include "policy_net.h"

typedef struct policy_dev policy_dev;

typedef struct {
    const char *name;
    /* set up the backend (d->impl); GOPT_EUNSUP with a message where it cannot run here */
    gopt_status (*open)(policy_dev *d, gopt_error *err);
    void (*close)(policy_dev *d);
    void *(*alloc)(policy_dev *d, size_t bytes); /* NULL when out of memory */
    void (*release)(policy_dev *d, void *ptr);
    void (*h2d)(policy_dev *d, void *dst, const void *src, size_t bytes);
    void (*d2h)(policy_dev *d, void *dst, const void *src, size_t bytes);
    void (*d2d)(policy_dev *d, void *dst, const void *src, size_t bytes);
    void (*zero)(policy_dev *d, void *dst, size_t bytes);
    void (*launch)(policy_dev *d, const gk_call *c, long count); /* gk_run for indices [0, count) */
    /* C (m, n) = alpha op(A) op(B) + beta C, column-major (cuBLAS's sgemm) */
    void (*gemm)(policy_dev *d, int ta, int tb, int m, int n, int k, float alpha, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc);
    /* wait for the queued work; the first error since the last sync, named */
    gopt_status (*sync)(policy_dev *d, gopt_error *err);
} policy_dev_ops;

/* the backend's own state (set by its open, NULL before) */
void *policy_dev_impl(policy_dev *d);
void policy_dev_set_impl(policy_dev *d, void *impl);

extern const policy_dev_ops policy_dev_emulated;
extern const policy_dev_ops policy_dev_cuda; /* open fails with GOPT_EUNSUP in builds without CUDA */

/* Open the named device ("cuda" or "emulated") for p; replaces any device p had. */
gopt_status policy_dev_attach(gopt_policy *p, const policy_dev_ops *ops, gopt_error *err);
void policy_dev_detach(gopt_policy *p);
/* The forward of p's current graph (p->A.x0 and the CSR lists filled by gopt_policy_forward):
 * leaves the heads' logits and the scorer's node input in p->A on the host. */
gopt_status policy_dev_forward(gopt_policy *p, gopt_error *err);
/* The backward from p->B.dlogits and p->B.dvh (host): adds the parameter gradients to p->grads. */
gopt_status policy_dev_backward(gopt_policy *p, gopt_error *err);

#endif /* GOPT_NETDEV_H */
