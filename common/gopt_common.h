/* gopt_common.h: what every gopt module shares.
 *
 * Status codes and the error record (a message naming file, element and
 * value), the seeded RNG (every random choice in gopt comes from one of
 * these, passed in by the caller: no global RNG), monotonic timing, a growable
 * byte buffer, and file I/O that reads plain or gzip files transparently and
 * writes atomically (temp file, fsync, rename).
 *
 * Library code never exits: it returns a status and fills a gopt_error. Only
 * main() turns a status into an exit code (gopt_status_exit_code).
 */
#ifndef GOPT_COMMON_H
#define GOPT_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum {
    GOPT_OK = 0,
    GOPT_EINVAL,   /* bad argument or bad value in an input (user error) */
    GOPT_EFORMAT,  /* malformed input file (user error) */
    GOPT_EIO,      /* a file could not be opened, read or written */
    GOPT_ENOMEM,   /* allocation failed */
    GOPT_EUNSUP,   /* valid request this build or machine cannot serve */
    GOPT_EINTERNAL /* a bug or an unexpected library failure */
} gopt_status;

#define GOPT_ERROR_MSG_MAX 1024

/* An error record. Functions take a `gopt_error *err` that may be NULL. */
typedef struct {
    gopt_status code;
    char msg[GOPT_ERROR_MSG_MAX];
} gopt_error;

/* Record an error (printf-style message) and return `code`. err may be NULL. */
gopt_status gopt_error_set(gopt_error *err, gopt_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prefix an existing message with "prefix: " (e.g. the file name). */
void gopt_error_prefix(gopt_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void gopt_error_clear(gopt_error *err);
const char *gopt_status_name(gopt_status s);
/* 0 ok, 2 bad input or usage, 1 internal error (the command-line contract). */
int gopt_status_exit_code(gopt_status s);

/* Checked allocation helpers: return NULL and set err on failure. */
void *gopt_malloc(size_t n, gopt_error *err);
void *gopt_calloc(size_t count, size_t size, gopt_error *err);

/* ---- RNG: xoshiro256** seeded through splitmix64 ------------------------- */
typedef struct {
    uint64_t s[4];
} gopt_rng;

void gopt_rng_seed(gopt_rng *rng, uint64_t seed);
uint64_t gopt_rng_u64(gopt_rng *rng);
/* Uniform in [0, 1). */
double gopt_rng_uniform(gopt_rng *rng);
/* Uniform integer in [0, n), n > 0, without modulo bias. */
uint64_t gopt_rng_below(gopt_rng *rng, uint64_t n);
/* Standard normal (Box-Muller, both values not cached: stateless beyond s). */
double gopt_rng_normal(gopt_rng *rng);
/* A child stream, independent of the parent's future draws (for per-task RNGs). */
void gopt_rng_split(gopt_rng *parent, gopt_rng *child);

/* ---- threads ------------------------------------------------------------- */
/* Run fn(ctx, j) for every part j = 0..nparts-1 on min(nthreads, nparts) threads, the
 * caller's among them: thread t runs parts t, t + T, t + 2T, ... in that order (a thread that
 * cannot be started leaves its parts to the caller). Returns when all have run. The parts
 * must not write what another part reads or writes; what they compute must not depend on
 * which thread runs them, so the results do not depend on nthreads. */
void gopt_parallel_parts(int nparts, int nthreads, void (*fn)(void *ctx, int part), void *ctx);

/* ---- sorting ------------------------------------------------------------ */
typedef struct {
    uint64_t key;
    int32_t val;
} gopt_sort_pair;

/* Sort a[0..n) by key, ascending and stable (equal keys keep their order), with tmp (n pairs)
 * as scratch: a radix sort, O(n), the same result as any stable comparison sort. */
void gopt_sort_pairs(gopt_sort_pair *a, gopt_sort_pair *tmp, size_t n);
/* A key that orders doubles decreasingly (-0 and +0 one key; not for NaN). */
uint64_t gopt_sort_key_desc(double x);

/* ---- time -------------------------------------------------------------- */
double gopt_now_seconds(void); /* monotonic clock */

/* ---- text ---------------------------------------------------------------- */
/* Decode the UTF-8 sequence at s (len > 0 bytes available): its length 1-4, with the code point
 * in *cp, when it is a valid shortest-form encoding of a Unicode scalar value (no surrogate,
 * nothing above U+10FFFF); 0 when s does not start one. */
int gopt_utf8_decode(const unsigned char *s, size_t len, uint32_t *cp);

/* ---- JSON ----------------------------------------------------------------- */
/* Refuse (GOPT_EFORMAT) a JSON text holding a real number a double cannot
 * hold: beyond 1.8e308, or nonzero and below the smallest normal double
 * (2.2e-308; jansson would read 1e-400 as 0 silently). The message names
 * origin, the line, the element's path (devices[0].peak_flops.fp32) and the
 * number. Every reader of a user's JSON calls it before json_loadb. Text that
 * is not JSON passes (the parser reports it). */
gopt_status gopt_json_check_numbers(const char *text, size_t len, const char *origin, gopt_error *err);

/* ---- growable buffer ---------------------------------------------------- */
typedef struct {
    char *data;
    size_t len, cap;
    int failed; /* set when an append could not allocate; later appends are no-ops */
} gopt_buf;

void gopt_buf_init(gopt_buf *b);
void gopt_buf_destroy(gopt_buf *b);
void gopt_buf_append(gopt_buf *b, const void *data, size_t n);
void gopt_buf_puts(gopt_buf *b, const char *s);
void gopt_buf_printf(gopt_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- files --------------------------------------------------------------- */
/* Whether `path` ends in ".gz". */
int gopt_path_is_gz(const char *path);

/* Read a whole file into a NUL-terminated heap buffer (*out, caller frees),
 * gunzipping it when it starts with the gzip magic. A truncated or corrupt
 * gzip stream is an error (GOPT_EFORMAT) naming the file. */
gopt_status gopt_file_read_all(const char *path, char **out, size_t *len, gopt_error *err);

/* Write `len` bytes atomically to `path`: a temp file beside it, fsync,
 * rename. When gzip_level > 0 the bytes are gzip-compressed first. Nothing
 * is left behind on failure and an existing file is untouched. */
gopt_status gopt_file_write_atomic(const char *path, const void *data, size_t len, int gzip_level,
                                   gopt_error *err);

#endif /* GOPT_COMMON_H */
