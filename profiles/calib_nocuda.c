/* calib_nocuda.c: the CUDA calibrator's entry points in a build without the
 * CUDA toolkit (GOPT_WITH_CUDA undefined): they say so and return
 * GOPT_EUNSUP. With the toolkit, calib_cuda.cu defines them instead. */
#include "gopt_profile.h"

#ifndef GOPT_WITH_CUDA
int gopt_calibrate_cuda_built(void) { return 0; }

gopt_status gopt_calibrate_cuda(const gopt_calib_options *o, gopt_profile **out, gopt_error *err) {
    (void)o;
    *out = NULL;
    return gopt_error_set(err, GOPT_EUNSUP,
                          "calibrate --backend cuda: this gopt was built without the CUDA toolkit (no GPU code)");
}
#else
typedef int gopt_calib_nocuda_unused; /* ISO C forbids an empty translation unit */
#endif
