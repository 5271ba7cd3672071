/* netdev_nocuda.c: the "cuda" device of netdev.h in builds without the CUDA
 * toolkit: it says so (netdev_cuda.cu is the real one). */
#include "netdev.h"

static gopt_status nocuda_open(policy_dev *d, gopt_error *err) {
    (void)d;
    return gopt_error_set(err, GOPT_EUNSUP, "policy: this build has no CUDA (the toolkit was not found at configure time)");
}

const policy_dev_ops policy_dev_cuda = {.name = "cuda", .open = nocuda_open};
