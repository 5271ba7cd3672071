/* calib_cpu.c: CPU calibration (in progress). */
#include "profile_internal.h"

gopt_status gopt_calibrate_cpu(const gopt_calib_options *o, gopt_profile **out, gopt_error *err) {
    (void)o;
    *out = NULL;
    return gopt_error_set(err, GOPT_EUNSUP, "calibrate --backend cpu: not implemented yet");
}
