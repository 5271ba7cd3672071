/* error.c: status names, exit codes, the error record and checked allocation. */
#include "gopt_common.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

gopt_status gopt_error_set(gopt_error *err, gopt_status code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

void gopt_error_prefix(gopt_error *err, const char *fmt, ...) {
    if (!err) return;
    char old[GOPT_ERROR_MSG_MAX];
    memcpy(old, err->msg, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n + 2 >= sizeof err->msg) return;
    /* messages longer than the record are cut: they stay readable */
    size_t room = sizeof err->msg - (size_t)n - 3, len = strlen(old);
    if (len > room) len = room;
    memcpy(err->msg + n, ": ", 2);
    memcpy(err->msg + n + 2, old, len);
    err->msg[n + 2 + len] = '\0';
}

void gopt_error_clear(gopt_error *err) {
    if (err) {
        err->code = GOPT_OK;
        err->msg[0] = '\0';
    }
}

const char *gopt_status_name(gopt_status s) {
    switch (s) {
    case GOPT_OK: return "ok";
    case GOPT_EINVAL: return "invalid input";
    case GOPT_EFORMAT: return "malformed file";
    case GOPT_EIO: return "I/O error";
    case GOPT_ENOMEM: return "out of memory";
    case GOPT_EUNSUP: return "unsupported";
    case GOPT_EINTERNAL: return "internal error";
    }
    return "unknown status";
}

int gopt_status_exit_code(gopt_status s) {
    switch (s) {
    case GOPT_OK: return 0;
    case GOPT_EINVAL:
    case GOPT_EFORMAT:
    case GOPT_EIO:
    case GOPT_EUNSUP: return 2;
    default: return 1;
    }
}

void *gopt_malloc(size_t n, gopt_error *err) {
    void *p = malloc(n ? n : 1);
    if (!p) gopt_error_set(err, GOPT_ENOMEM, "out of memory allocating %zu bytes", n);
    return p;
}

void *gopt_calloc(size_t count, size_t size, gopt_error *err) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) gopt_error_set(err, GOPT_ENOMEM, "out of memory allocating %zu x %zu bytes", count, size);
    return p;
}
