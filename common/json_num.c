/* json_num.c: refuse JSON numbers a double cannot hold, before jansson reads
 * them. jansson turns a number below a double's range (1e-400) into 0 without
 * a word, and keeps subnormals (1e-310); each reader of a user's JSON file
 * (profiles, a checkpoint's .state, training logs) calls
 * gopt_json_check_numbers on the raw text first, so such a number is an error
 * naming the file, the element (its path, e.g. devices[0].peak_flops.fp32),
 * the line and the text of the number.
 * Invariants: reads at most len bytes; never fails on text that is not JSON
 * (jansson reports that afterwards): the scan only follows strings, brackets,
 * commas and colons to name the element. Integers (no '.', 'e' or 'E') are
 * left to jansson, which refuses those past 64 bits.
 * Cost: O(len); allocates only for a number over 127 characters.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gopt_common.h"

#define JSON_NUM_MAX_DEPTH 64
#define JSON_NUM_PATH 256

typedef struct {
    char array;     /* 1 array, 0 object */
    char want_key;  /* object: the next string is a key */
    long index;     /* array: the element's index */
    size_t base;    /* path length when the container opened */
} frame;

typedef struct {
    char path[JSON_NUM_PATH];
    size_t len;
    frame f[JSON_NUM_MAX_DEPTH];
    int depth; /* may pass JSON_NUM_MAX_DEPTH: deeper frames are not tracked */
} scan;

static void path_set(scan *s, size_t base, const char *fmt, const char *key, size_t klen, long index) {
    s->len = base < sizeof s->path ? base : sizeof s->path - 1;
    int w = key ? snprintf(s->path + s->len, sizeof s->path - s->len, "%s%.*s", s->len ? "." : "", (int)klen, key)
                : snprintf(s->path + s->len, sizeof s->path - s->len, fmt, index);
    if (w > 0) s->len += (size_t)w < sizeof s->path - s->len ? (size_t)w : sizeof s->path - 1 - s->len;
    s->path[s->len] = '\0';
}

static frame *top(scan *s) { return s->depth > 0 && s->depth <= JSON_NUM_MAX_DEPTH ? &s->f[s->depth - 1] : NULL; }

gopt_status gopt_json_check_numbers(const char *text, size_t len, const char *origin, gopt_error *err) {
    scan s = {.len = 0, .depth = 0};
    s.path[0] = '\0';
    int line = 1;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        frame *t = top(&s);
        if (c == '\n') line++;
        else if (c == '"') {
            size_t start = ++i;
            while (i < len && text[i] != '"') i += text[i] == '\\' ? 2 : 1;
            if (i > len) i = len;
            if (t && !t->array && t->want_key) {
                size_t klen = i - start < 64 ? i - start : 64;
                path_set(&s, t->base, NULL, text + start, klen, 0);
                t->want_key = 0;
            }
        } else if (c == '{' || c == '[') {
            if (++s.depth <= JSON_NUM_MAX_DEPTH) {
                frame *n = &s.f[s.depth - 1];
                *n = (frame){.array = c == '[', .want_key = c == '{', .index = 0, .base = s.len};
                if (n->array) path_set(&s, n->base, "[%ld]", NULL, 0, 0);
            }
        } else if (c == '}' || c == ']') {
            if (t) path_set(&s, t->base, "", NULL, 0, 0);
            if (s.depth > 0) s.depth--;
        } else if (c == ',' && t) {
            if (t->array) path_set(&s, t->base, "[%ld]", NULL, 0, ++t->index);
            else {
                t->want_key = 1;
                path_set(&s, t->base, "", NULL, 0, 0);
            }
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            size_t start = i;
            int real = 0, nonzero = 0, in_exp = 0;
            while (i < len && (strchr("+-.eE", text[i]) || (text[i] >= '0' && text[i] <= '9')) && text[i]) {
                if (text[i] == 'e' || text[i] == 'E') real = in_exp = 1;
                else if (text[i] == '.') real = 1;
                else if (!in_exp && text[i] >= '1' && text[i] <= '9') nonzero = 1;
                i++;
            }
            size_t n = i - start;
            i--; /* the loop's i++ moves past the number */
            if (!real) continue;
            char small[128], *buf = n < sizeof small ? small : malloc(n + 1);
            if (!buf) return gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", origin);
            memcpy(buf, text + start, n);
            buf[n] = '\0';
            double v = strtod(buf, NULL);
            const char *why = NULL;
            if (isinf(v)) why = "is beyond the largest double (1.8e308)";
            else if (nonzero && fabs(v) < DBL_MIN)
                why = v == 0 ? "is below the smallest double and would read as 0"
                             : "is below the smallest normal double (2.2e-308)";
            gopt_status st = GOPT_OK;
            if (why)
                st = gopt_error_set(err, GOPT_EFORMAT, "%s: line %d: %s: the number %.40s%s %s", origin, line,
                                    s.len ? s.path : "(the top-level value)", buf, n > 40 ? "..." : "", why);
            if (buf != small) free(buf);
            if (st) return st;
        }
    }
    return GOPT_OK;
}
