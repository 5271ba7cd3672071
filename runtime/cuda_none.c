/* cuda_none.c: the CUDA backend's entry points in a build without the CUDA toolkit: every call
 * says so (GOPT_EUNSUP), which `gopt run --backend cuda` turns into exit code 3. */
#include "rt_internal.h"

#ifndef GOPT_WITH_CUDA
gopt_status rt_cuda_create(const gopt_graph *g, const rt_plan *p, const int32_t *order, int graph_mode,
                           gopt_rt_cuda_conv conv, rt_cuda **out, gopt_error *err) {
    (void)g;
    (void)p;
    (void)order;
    (void)graph_mode;
    (void)conv;
    *out = NULL;
    return gopt_error_set(err, GOPT_EUNSUP, "runtime: this build has no CUDA (the toolkit was not found at build time)");
}

void rt_cuda_free(rt_cuda *c) { (void)c; }

gopt_status rt_cuda_step(rt_cuda *c, rt_timeline *tl, gopt_error *err) {
    (void)c;
    (void)tl;
    return gopt_error_set(err, GOPT_EUNSUP, "runtime: this build has no CUDA");
}

void rt_cuda_conv_counts(const rt_cuda *c, int *cudnn, int *im2col) {
    (void)c;
    *cudnn = *im2col = 0;
}
#endif
