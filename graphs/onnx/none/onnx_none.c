/* onnx_none.c: the ONNX import's entry points in a build without protobuf-c
 * (protoc-c or libprotobuf-c missing at configure time): each refuses with
 * GOPT_EUNSUP, so `gopt graph import` can say why (exit 3). */
#include "gopt_onnx.h"

int gopt_onnx_available(void) { return 0; }

static gopt_status unsupported(const char *origin, gopt_graph **out, gopt_error *err) {
    *out = NULL;
    return gopt_error_set(err, GOPT_EUNSUP,
                          "%s: this build has no ONNX import (protoc-c and libprotobuf-c were not found when it was "
                          "configured; tools/install-deps.sh installs them)",
                          origin);
}

gopt_status gopt_onnx_import(const char *path, const gopt_onnx_opts *opts, gopt_graph **out, gopt_error *err) {
    (void)opts;
    return unsupported(path, out, err);
}

gopt_status gopt_onnx_import_mem(const uint8_t *data, size_t len, const char *origin, const char *base_dir,
                                 const gopt_onnx_opts *opts, gopt_graph **out, gopt_error *err) {
    (void)data, (void)len, (void)base_dir, (void)opts;
    return unsupported(origin, out, err);
}
