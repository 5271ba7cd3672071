/* buf.c: growable byte buffer (amortised doubling) and the monotonic clock. */
#include "gopt_common.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double gopt_now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void gopt_buf_init(gopt_buf *b) { memset(b, 0, sizeof *b); }

void gopt_buf_destroy(gopt_buf *b) {
    free(b->data);
    memset(b, 0, sizeof *b);
}

static int buf_reserve(gopt_buf *b, size_t extra) {
    if (b->failed) return 0;
    if (b->len + extra + 1 <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) {
        b->failed = 1;
        return 0;
    }
    b->data = p;
    b->cap = cap;
    return 1;
}

void gopt_buf_append(gopt_buf *b, const void *data, size_t n) {
    if (!buf_reserve(b, n)) return;
    memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void gopt_buf_puts(gopt_buf *b, const char *s) { gopt_buf_append(b, s, strlen(s)); }

void gopt_buf_printf(gopt_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof small) {
        gopt_buf_append(b, small, (size_t)n);
        return;
    }
    if (!buf_reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}
