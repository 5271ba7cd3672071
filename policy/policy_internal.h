/* policy_internal.h: the layers of the policy network (llm.c-style
 * forward/backward pairs) and the GEMM wrapper. Internal to policy/; the
 * module's test includes it to gradient-check each layer on its own.
 *
 * Conventions: row-major float tensors, shapes in comments; every backward
 * ACCUMULATES into its input gradients and weight gradients (callers zero
 * them); a NULL gradient pointer means "not needed".
 */
#ifndef GOPT_POLICY_INTERNAL_H
#define GOPT_POLICY_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- SIMD clones -------------------------------------------------------------
 * The builds target x86-64-v2 (SSE4.2). The hot elementwise loops and the
 * attention's small products are also compiled for AVX2, picked at load time
 * on CPUs that have it (ifunc). Without FMA, so that every float operation
 * is the same IEEE operation in both clones: results are bit-identical
 * whichever clone runs; AVX2 only does 8 lanes where SSE does 4. GCC only:
 * clang 14 (the fuzzing build) emits no ifunc for a clone that its own
 * translation unit does not call, so other units fail to link. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(GOPT_NO_SIMD_CLONES)
#define GOPT_SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define GOPT_SIMD_CLONES
#endif

/* ---- GEMM: C = alpha * op(A) @ op(B) + beta * C, C (m, n), k the inner size. */
typedef struct {
    int trans_a, trans_b; /* 0: as stored; 1: transposed */
    int m, n, k;
    float alpha, beta;
    const float *a;
    int lda;
    const float *b;
    int ldb;
    float *c;
    int ldc;
} gopt_gemm_args;
void gopt_gemm(const gopt_gemm_args *g);
/* Named arguments: GOPT_GEMM(.m = .., .n = .., .k = .., .a = .., ...). */
#define GOPT_GEMM(...) gopt_gemm(&(gopt_gemm_args){__VA_ARGS__})

/* exp(x) by range reduction and a degree-6 polynomial; vectorizable,
 * deterministic, relative error < 3e-7 over [-87, 88]. Cephes expf: x = n ln2
 * + r, |r| <= ln2/2, exp(r) by a polynomial, 2^n by building the exponent
 * bits; round-to-nearest by the 1.5 * 2^23 trick and branch-free clamps, so
 * that loops over it vectorize (inline here for that: decode.c's tanh and
 * layers.c's softmax). gopt_fast_expf is the same function, out of line. */
static inline float gopt_expf_inline(float x) {
    x = x >= -87.0f ? x : -87.0f; /* NaN too: 2^n below is then built from n in [-126, 127] for any input */
    x = x > 88.0f ? 88.0f : x;
    float fn = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - fn * 0.693359375f;
    r = r - fn * -2.12194440e-4f;
    float p = 1.9875691500E-4f;
    p = p * r + 1.3981999507E-3f;
    p = p * r + 8.3334519073E-3f;
    p = p * r + 4.1665795894E-2f;
    p = p * r + 1.6666665459E-1f;
    p = p * r + 5.0000001201E-1f;
    p = p * r * r + r + 1.0f;
    uint32_t bits = (uint32_t)((int32_t)fn + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}
float gopt_fast_expf(float x);

/* ---- linear: out (n, o) = in (n, i) @ w (i, o) + b (o) [+ res (n, o)] ------
 * b and res may be NULL; res (a residual) must not alias out. The backward
 * of the residual is the caller's (d res = d out). */
void gopt_linear_forward(float *out, const float *in, const float *w, const float *b, const float *res, int n,
                         int in_dim, int out_dim);
void gopt_linear_backward(float *din, float *dw, float *db, const float *dout, const float *in, const float *w,
                          int n, int in_dim, int out_dim);
/* The same with din overwritten instead of accumulated (no zeroing pass before it). */
void gopt_linear_backward_set(float *din, float *dw, float *db, const float *dout, const float *in, const float *w,
                              int n, int in_dim, int out_dim);

/* ---- relu, in place on the forward; backward reads the output ------------- */
void gopt_relu_forward(float *x, size_t count);
void gopt_relu_backward(float *dx, const float *out, size_t count); /* dx *= (out > 0), in place */

/* ---- modulated layer norm -----------------------------------------------------
 * out (n, d) = norm(in) * (w + ms) + (b + mb), mean, rstd (n) cached.
 * ms, mb (d) are the feature-modulation scale and shift (NULL: none). */
void gopt_layernorm_forward(float *out, float *mean, float *rstd, const float *in, const float *w, const float *b,
                            const float *ms, const float *mb, int n, int d);
void gopt_layernorm_backward(float *din, float *dw, float *db, float *dms, float *dmb, const float *dout,
                             const float *in, const float *w, const float *ms, const float *mean, const float *rstd,
                             int n, int d);

/* ---- feature modulation: ms (d) = g (d) @ wg (d, d), mb = g @ wb ---------- */
void gopt_film_forward(float *ms, float *mb, const float *g, const float *wg, const float *wb, int d);
void gopt_film_backward(float *dg, float *dwg, float *dwb, const float *dms, const float *dmb, const float *g,
                        const float *wg, const float *wb, int d);

/* ---- mean pooling over rows: g (d) = mean_i h (n, d) ------------------------ */
void gopt_meanpool_forward(float *g, const float *h, int n, int d);
void gopt_meanpool_backward(float *dh, const float *dg, int n, int d);

/* ---- GraphSAGE aggregation ---------------------------------------------------
 * cat (n, 5d) = [h | mean over preds | max over preds | mean over succs |
 * max over succs] (0 for a node without neighbours). Neighbour lists are
 * CSR over the same row numbering. The backward finds each max's first
 * winner again from cat and h (no argmax is stored). Cost O((n + m) d). */
void gopt_sage_aggregate_forward(float *cat, const float *h, const int32_t *pred_ptr, const int32_t *pred_idx,
                                 const int32_t *succ_ptr, const int32_t *succ_idx, int n, int d);
/* The same for rows [r0, r0 + m): cat (m, 5d) gets their rows; pred_ptr and succ_ptr point at
 * row r0's entry (m + 1 of them), the index arrays and h are whole. */
void gopt_sage_aggregate_rows(float *cat, const float *h, const int32_t *pred_ptr, const int32_t *pred_idx,
                              const int32_t *succ_ptr, const int32_t *succ_idx, int r0, int m, int d);
void gopt_sage_aggregate_backward(float *dh, const float *dcat, const float *cat, const float *h,
                                  const int32_t *pred_ptr, const int32_t *pred_idx, const int32_t *succ_ptr,
                                  const int32_t *succ_idx, int n, int d);
/* The same from rows [r0, r0 + m) only: dcat and cat hold their rows, pred_ptr and succ_ptr point
 * at row r0's entry (m + 1 of them); dh, h and the index arrays are whole. */
void gopt_sage_aggregate_backward_rows(float *dh, const float *dcat, const float *cat, const float *h,
                                       const int32_t *pred_ptr, const int32_t *pred_idx, const int32_t *succ_ptr,
                                       const int32_t *succ_idx, int r0, int m, int d);

/* ---- segment-recurrent multi-head attention core --------------------------------
 * qkv (n, 3d): queries, keys, values of n rows in sequence order. Rows are
 * cut into segments of `seg`; a query in segment s attends to every row of
 * segment s and of segment s-1 (the memory), whose keys and values are read
 * from qkv_mem (n, 3d) (pass qkv itself in the normal case; a separate array
 * holds frozen memory states). Scores are q.k / sqrt(d/nh) +
 * relpos[head][i - j + seg - 1] (relpos (nh, 3 seg - 1), i, j row indices).
 * ctx (n, d) gets the heads' outputs side by side; att (n, nh, 2 seg) keeps
 * the probabilities (memory keys first). scratch: GOPT_SEGATTN_SCRATCH floats.
 * The forward's products are direct register-tiled loops (a segment's
 * products are 32 x 64 x 32: too small for a BLAS call to pay off).
 * Backward: gradients of self keys/values and queries go to dqkv_self, those
 * of memory keys/values to dqkv_mem (so the caller can stop the gradient at
 * the cached states but still train the projections). */
#define GOPT_SEGATTN_SCRATCH(seg, nh, d) \
    ((size_t)(seg) * 2 * (seg) + (size_t)(nh) * 3 * (seg) + (size_t)(d) / (size_t)(nh) * 2 * (seg))
void gopt_segattn_forward(float *ctx, float *att, const float *qkv, const float *qkv_mem, const float *relpos, int n,
                          int d, int nh, int seg, float *scratch);
/* The forward of the segments that start in rows [r0, r1) (r0 a multiple of seg): their
 * queries' rows of ctx and att; reads keys and values from row r0 - seg on. */
void gopt_segattn_forward_rows(float *ctx, float *att, const float *qkv, const float *qkv_mem, const float *relpos,
                               int n, int d, int nh, int seg, float *scratch, int r0, int r1);
void gopt_segattn_backward(float *dqkv_self, float *dqkv_mem, float *drelpos, const float *dctx, const float *qkv,
                           const float *qkv_mem, const float *att, int n, int d, int nh, int seg, float *scratch);

/* The backward of the segments that start in rows [r0, r1) (r0 a multiple of seg): gradients
 * of their queries, keys and values, and of the previous segment's keys and values (rows from
 * r0 - seg on) in dqkv_mem. */
void gopt_segattn_backward_rows(float *dqkv_self, float *dqkv_mem, float *drelpos, const float *dctx, const float *qkv,
                                const float *qkv_mem, const float *att, int n, int d, int nh, int seg, float *scratch,
                                int r0, int r1);

/* Test hook: with on = 1, snapshot every attention layer's normalised input
 * of the last forward and make later forwards compute the memory keys and
 * values from that snapshot (with the current weights): the function whose
 * exact gradient the stop-gradient backward is. on = 0 restores normal
 * forwards. Needs a forward first. */
struct gopt_policy;
int gopt_policy_debug_freeze_memory(struct gopt_policy *p, int on);
/* Test hook: the forward's chunk of rows, in segments (0: the default, 32). The result is the
 * same function for every chunk size, equal within float rounding (sgemm's rounding depends on
 * the row count). */
void gopt_policy_debug_chunk(struct gopt_policy *p, int segments);

/* ---- masked log-softmax of one row ------------------------------------------
 * logp[j] = log softmax over allowed j (bit j of mask), -inf elsewhere;
 * prob[j] (NULL: not wanted) its probability (0 where masked), from the one
 * exp per allowed entry that the normaliser needs. width <= 32. Returns the
 * entropy of the row. */
double gopt_logsoftmax_row(float *logp, double *prob, const float *z, int width, uint32_t mask);

#endif /* GOPT_POLICY_INTERNAL_H */
