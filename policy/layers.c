/* layers.c: the layers of the policy network as forward/backward pairs.
 *
 * Every backward accumulates into the gradients it is given (llm.c style)
 * and reads only what its forward cached. All matrix products go through
 * gopt_gemm (one wrapper around cblas_sgemm). Row statistics are summed in
 * double so that gradients checked by finite differences stay exact enough.
 * Costs: linear O(n i o); layer norm O(n d); aggregation O((n + m) d);
 * segment attention O(n * 2 seg * d) plus the softmax exps O(n * 2 seg * nh).
 */
#include <assert.h>
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "policy_internal.h"

void gopt_gemm(const gopt_gemm_args *g) {
    if (g->m <= 0 || g->n <= 0) return;
    assert(g->k > 0 && "gopt_gemm: inner size must be positive");
    assert(g->ldc >= g->n && "gopt_gemm: ldc smaller than n");
    cblas_sgemm(CblasRowMajor, g->trans_a ? CblasTrans : CblasNoTrans, g->trans_b ? CblasTrans : CblasNoTrans, g->m,
                g->n, g->k, g->alpha, g->a, g->lda, g->b, g->ldb, g->beta, g->c, g->ldc);
}

#define fast_expf gopt_expf_inline

float gopt_fast_expf(float x) { return fast_expf(x); }

/* ---- linear ------------------------------------------------------------------ */
GOPT_SIMD_CLONES
void gopt_linear_forward(float *out, const float *in, const float *w, const float *b, const float *res, int n,
                         int in_dim, int out_dim) {
    for (int i = 0; i < n; i++) {
        float *o = out + (size_t)i * out_dim;
        const float *r = res ? res + (size_t)i * out_dim : NULL;
        if (r && b)
            for (int j = 0; j < out_dim; j++) o[j] = r[j] + b[j];
        else if (r || b)
            memcpy(o, r ? r : b, sizeof(float) * (size_t)out_dim);
        else
            memset(o, 0, sizeof(float) * (size_t)out_dim);
    }
    GOPT_GEMM(.m = n, .n = out_dim, .k = in_dim, .alpha = 1.0f, .beta = 1.0f, .a = in, .lda = in_dim, .b = w,
              .ldb = out_dim, .c = out, .ldc = out_dim);
}

static void linear_backward(float *din, float beta, float *dw, float *db, const float *dout, const float *in,
                            const float *w, int n, int in_dim, int out_dim) {
    if (din)
        GOPT_GEMM(.trans_b = 1, .m = n, .n = in_dim, .k = out_dim, .alpha = 1.0f, .beta = beta, .a = dout,
                  .lda = out_dim, .b = w, .ldb = out_dim, .c = din, .ldc = in_dim);
    if (dw)
        GOPT_GEMM(.trans_a = 1, .m = in_dim, .n = out_dim, .k = n, .alpha = 1.0f, .beta = 1.0f, .a = in,
                  .lda = in_dim, .b = dout, .ldb = out_dim, .c = dw, .ldc = out_dim);
    if (db)
        for (int i = 0; i < n; i++) {
            const float *r = dout + (size_t)i * out_dim;
            for (int j = 0; j < out_dim; j++) db[j] += r[j];
        }
}

void gopt_linear_backward(float *din, float *dw, float *db, const float *dout, const float *in, const float *w,
                          int n, int in_dim, int out_dim) {
    linear_backward(din, 1.0f, dw, db, dout, in, w, n, in_dim, out_dim);
}

void gopt_linear_backward_set(float *din, float *dw, float *db, const float *dout, const float *in, const float *w,
                              int n, int in_dim, int out_dim) {
    linear_backward(din, 0.0f, dw, db, dout, in, w, n, in_dim, out_dim);
}

/* ---- relu ---------------------------------------------------------------------- */
GOPT_SIMD_CLONES
void gopt_relu_forward(float *x, size_t count) {
    for (size_t i = 0; i < count; i++) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

GOPT_SIMD_CLONES
void gopt_relu_backward(float *dx, const float *out, size_t count) {
    for (size_t i = 0; i < count; i++) dx[i] = out[i] > 0.0f ? dx[i] : 0.0f;
}

/* ---- layer norm ---------------------------------------------------------------- */
#define LN_EPS 1e-5

/* Sums in eight fixed partial sums: vectorizable and deterministic (the
 * order depends only on d). */
static inline float sum8(const float *x, int d) {
    float acc[8] = {0};
    int j = 0;
    for (; j + 8 <= d; j += 8)
        for (int u = 0; u < 8; u++) acc[u] += x[j + u];
    float t = 0.0f;
    for (; j < d; j++) t += x[j];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + t;
}

static inline float sqdev8(const float *x, int d, float c) {
    float acc[8] = {0};
    int j = 0;
    for (; j + 8 <= d; j += 8)
        for (int u = 0; u < 8; u++) acc[u] += (x[j + u] - c) * (x[j + u] - c);
    float t = 0.0f;
    for (; j < d; j++) t += (x[j] - c) * (x[j] - c);
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + t;
}

static inline float dot8(const float *x, const float *y, int d) {
    float acc[8] = {0};
    int j = 0;
    for (; j + 8 <= d; j += 8)
        for (int u = 0; u < 8; u++) acc[u] += x[j + u] * y[j + u];
    float t = 0.0f;
    for (; j < d; j++) t += x[j] * y[j];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + t;
}

#define LN_MAX_D 1024

GOPT_SIMD_CLONES
void gopt_layernorm_forward(float *out, float *mean, float *rstd, const float *in, const float *w, const float *b,
                            const float *ms, const float *mb, int n, int d) {
    float sc[LN_MAX_D], sh[LN_MAX_D];
    assert(d <= LN_MAX_D);
    for (int j = 0; j < d; j++) {
        sc[j] = w[j] + (ms ? ms[j] : 0.0f);
        sh[j] = b[j] + (mb ? mb[j] : 0.0f);
    }
    for (int i = 0; i < n; i++) {
        const float *x = in + (size_t)i * d;
        float *o = out + (size_t)i * d;
        float mf = sum8(x, d) / (float)d;
        float rs = 1.0f / sqrtf(sqdev8(x, d, mf) / (float)d + (float)LN_EPS);
        for (int j = 0; j < d; j++) o[j] = (x[j] - mf) * rs * sc[j] + sh[j];
        mean[i] = mf;
        rstd[i] = rs;
    }
}

GOPT_SIMD_CLONES
void gopt_layernorm_backward(float *din, float *dw, float *db, float *dms, float *dmb, const float *dout,
                             const float *in, const float *w, const float *ms, const float *mean, const float *rstd,
                             int n, int d) {
    float sc[LN_MAX_D], gw[LN_MAX_D], gb[LN_MAX_D], nrm[LN_MAX_D], dn[LN_MAX_D];
    assert(d <= LN_MAX_D);
    for (int j = 0; j < d; j++) {
        sc[j] = w[j] + (ms ? ms[j] : 0.0f);
        gw[j] = gb[j] = 0.0f;
    }
    for (int i = 0; i < n; i++) {
        const float *x = in + (size_t)i * d, *dy = dout + (size_t)i * d;
        const float m = mean[i], rs = rstd[i];
        for (int j = 0; j < d; j++) {
            nrm[j] = (x[j] - m) * rs;
            dn[j] = dy[j] * sc[j];
            gw[j] += dy[j] * nrm[j];
            gb[j] += dy[j];
        }
        if (!din) continue;
        const float mdn = sum8(dn, d) / (float)d, mdnn = dot8(dn, nrm, d) / (float)d;
        float *dx = din + (size_t)i * d;
        for (int j = 0; j < d; j++) dx[j] += rs * (dn[j] - mdn - nrm[j] * mdnn);
    }
    for (int j = 0; j < d; j++) {
        dw[j] += gw[j];
        db[j] += gb[j];
        if (dms) dms[j] += gw[j];
        if (dmb) dmb[j] += gb[j];
    }
}

/* ---- feature modulation ------------------------------------------------------------ */
void gopt_film_forward(float *ms, float *mb, const float *g, const float *wg, const float *wb, int d) {
    for (int j = 0; j < d; j++) ms[j] = mb[j] = 0.0f;
    for (int i = 0; i < d; i++)
        for (int j = 0; j < d; j++) {
            ms[j] += g[i] * wg[(size_t)i * d + j];
            mb[j] += g[i] * wb[(size_t)i * d + j];
        }
}

void gopt_film_backward(float *dg, float *dwg, float *dwb, const float *dms, const float *dmb, const float *g,
                        const float *wg, const float *wb, int d) {
    for (int i = 0; i < d; i++) {
        double acc = 0.0;
        for (int j = 0; j < d; j++) {
            dwg[(size_t)i * d + j] += g[i] * dms[j];
            dwb[(size_t)i * d + j] += g[i] * dmb[j];
            acc += (double)wg[(size_t)i * d + j] * dms[j] + (double)wb[(size_t)i * d + j] * dmb[j];
        }
        if (dg) dg[i] += (float)acc;
    }
}

/* ---- mean pooling -------------------------------------------------------------------- */
void gopt_meanpool_forward(float *g, const float *h, int n, int d) {
    double acc[1024];
    assert(d <= 1024);
    for (int j = 0; j < d; j++) acc[j] = 0.0;
    for (int i = 0; i < n; i++) {
        const float *r = h + (size_t)i * d;
        for (int j = 0; j < d; j++) acc[j] += r[j];
    }
    for (int j = 0; j < d; j++) g[j] = (float)(acc[j] / n);
}

GOPT_SIMD_CLONES
void gopt_meanpool_backward(float *dh, const float *dg, int n, int d) {
    float inv = 1.0f / (float)n;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < d; j++) dh[(size_t)i * d + j] += dg[j] * inv;
}

/* ---- GraphSAGE aggregation ------------------------------------------------------------- */
static void aggregate_one(float *mean, float *mx, const float *h, const int32_t *idx, int cnt, int d) {
    if (cnt == 0) {
        for (int j = 0; j < d; j++) mean[j] = mx[j] = 0.0f;
        return;
    }
    const float *h0 = h + (size_t)idx[0] * d;
    for (int j = 0; j < d; j++) mean[j] = mx[j] = h0[j];
    for (int k = 1; k < cnt; k++) {
        const float *hk = h + (size_t)idx[k] * d;
        for (int j = 0; j < d; j++) {
            mean[j] += hk[j];
            mx[j] = hk[j] > mx[j] ? hk[j] : mx[j];
        }
    }
    float inv = 1.0f / (float)cnt;
    for (int j = 0; j < d; j++) mean[j] *= inv;
}

GOPT_SIMD_CLONES
void gopt_sage_aggregate_rows(float *cat, const float *h, const int32_t *pred_ptr, const int32_t *pred_idx,
                              const int32_t *succ_ptr, const int32_t *succ_idx, int r0, int m, int d) {
    for (int i = 0; i < m; i++) {
        float *c = cat + (size_t)i * 5 * d;
        memcpy(c, h + (size_t)(r0 + i) * d, sizeof(float) * (size_t)d);
        aggregate_one(c + d, c + 2 * d, h, pred_idx + pred_ptr[i], pred_ptr[i + 1] - pred_ptr[i], d);
        aggregate_one(c + 3 * d, c + 4 * d, h, succ_idx + succ_ptr[i], succ_ptr[i + 1] - succ_ptr[i], d);
    }
}

void gopt_sage_aggregate_forward(float *cat, const float *h, const int32_t *pred_ptr, const int32_t *pred_idx,
                                 const int32_t *succ_ptr, const int32_t *succ_idx, int n, int d) {
    gopt_sage_aggregate_rows(cat, h, pred_ptr, pred_idx, succ_ptr, succ_idx, 0, n, d);
}

/* The max's gradient goes to the first neighbour holding the maximum (found
 * again here instead of storing an argmax in the forward); branch-free so
 * that it vectorizes: open[j] is 1 until feature j's winner is found. */
static void aggregate_one_backward(float *dh, const float *dmean, const float *dmx, const float *mx, const float *h,
                                   const int32_t *idx, int cnt, int d) {
    if (cnt == 0) return;
    float inv = 1.0f / (float)cnt;
    float open[1024], dm[1024];
    assert(d <= 1024);
    for (int j = 0; j < d; j++) {
        open[j] = 1.0f;
        dm[j] = dmean[j] * inv;
    }
    for (int k = 0; k < cnt; k++) {
        const float *hk = h + (size_t)idx[k] * d;
        float *dk = dh + (size_t)idx[k] * d;
        for (int j = 0; j < d; j++) {
            float hit = hk[j] == mx[j] ? open[j] : 0.0f;
            dk[j] += dm[j] + hit * dmx[j];
            open[j] -= hit;
        }
    }
}

GOPT_SIMD_CLONES
void gopt_sage_aggregate_backward_rows(float *dh, const float *dcat, const float *cat, const float *h,
                                       const int32_t *pred_ptr, const int32_t *pred_idx, const int32_t *succ_ptr,
                                       const int32_t *succ_idx, int r0, int m, int d) {
    for (int i = 0; i < m; i++) {
        const float *c = dcat + (size_t)i * 5 * d, *ci = cat + (size_t)i * 5 * d;
        float *di = dh + (size_t)(r0 + i) * d;
        for (int j = 0; j < d; j++) di[j] += c[j];
        aggregate_one_backward(dh, c + d, c + 2 * d, ci + 2 * d, h, pred_idx + pred_ptr[i],
                               pred_ptr[i + 1] - pred_ptr[i], d);
        aggregate_one_backward(dh, c + 3 * d, c + 4 * d, ci + 4 * d, h, succ_idx + succ_ptr[i],
                               succ_ptr[i + 1] - succ_ptr[i], d);
    }
}

void gopt_sage_aggregate_backward(float *dh, const float *dcat, const float *cat, const float *h,
                                  const int32_t *pred_ptr, const int32_t *pred_idx, const int32_t *succ_ptr,
                                  const int32_t *succ_idx, int n, int d) {
    gopt_sage_aggregate_backward_rows(dh, dcat, cat, h, pred_ptr, pred_idx, succ_ptr, succ_idx, 0, n, d);
}

/* ---- segment-recurrent attention ------------------------------------------------------- */
/* Register tiles of the forward's two products: 4 query rows x 8 columns
 * (two 4-float vectors per row, GCC/Clang vector extensions) accumulated
 * over the inner dimension, so each loaded key or value vector serves 4
 * rows. Edge tiles take a scalar loop. Every output is one sum in index
 * order of the inner dimension, whichever path computes it. */
typedef float v8f __attribute__((vector_size(32))); /* two SSE registers, or one AVX register */
#define V8_LOAD(v, x) memcpy(&(v), (x), sizeof(v8f))
#define V8_STORE(x, v) memcpy((x), &(v), sizeof(v8f))

/* s (sq, nk) = Q (sq, dh; row stride ldq) . keys, with Kt (dh, nk) the keys transposed */
static inline __attribute__((always_inline))
void attn_scores(float *s, const float *Q, int ldq, const float *Kt, int sq, int nk, int dh) {
    for (int i0 = 0; i0 < sq; i0 += 4) {
        const int ni = sq - i0 < 4 ? sq - i0 : 4;
        for (int j0 = 0; j0 < nk; j0 += 8) {
            const int nj = nk - j0 < 8 ? nk - j0 : 8;
            if (ni == 4 && nj == 8) {
                v8f a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
                const float *q0 = Q + (size_t)i0 * ldq, *q1 = q0 + ldq, *q2 = q1 + ldq, *q3 = q2 + ldq;
                for (int c = 0; c < dh; c++) {
                    v8f k;
                    V8_LOAD(k, Kt + (size_t)c * nk + j0);
                    a0 += q0[c] * k, a1 += q1[c] * k, a2 += q2[c] * k, a3 += q3[c] * k;
                }
                float *o = s + (size_t)i0 * nk + j0;
                V8_STORE(o, a0), V8_STORE(o + nk, a1), V8_STORE(o + 2 * nk, a2), V8_STORE(o + 3 * nk, a3);
                continue;
            }
            for (int ii = 0; ii < ni; ii++)
                for (int jj = 0; jj < nj; jj++) {
                    float acc = 0.0f;
                    for (int c = 0; c < dh; c++) acc += Q[(size_t)(i0 + ii) * ldq + c] * Kt[(size_t)c * nk + j0 + jj];
                    s[(size_t)(i0 + ii) * nk + j0 + jj] = acc;
                }
        }
    }
}

/* C (sq, dh; row stride ldc) = P (sq, nk; row stride ldp) V, value row j from Vm (j < nmem)
 * or Vs (row j - nmem), row stride ldv each; acc = 1: C += instead. */
static inline __attribute__((always_inline))
void attn_values(float *C, int ldc, const float *P, int ldp, const float *Vm, const float *Vs, int ldv, int nmem,
                 int sq, int nk, int dh, int acc) {
    for (int i0 = 0; i0 < sq; i0 += 4) {
        const int ni = sq - i0 < 4 ? sq - i0 : 4;
        for (int c0 = 0; c0 < dh; c0 += 8) {
            const int nc = dh - c0 < 8 ? dh - c0 : 8;
            if (ni == 4 && nc == 8) {
                v8f a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
                const float *p0 = P + (size_t)i0 * ldp, *p1 = p0 + ldp, *p2 = p1 + ldp, *p3 = p2 + ldp;
                for (int j = 0; j < nk; j++) {
                    v8f v;
                    V8_LOAD(v, (j < nmem ? Vm + (size_t)j * ldv : Vs + (size_t)(j - nmem) * ldv) + c0);
                    a0 += p0[j] * v, a1 += p1[j] * v, a2 += p2[j] * v, a3 += p3[j] * v;
                }
                float *o = C + (size_t)i0 * ldc + c0;
                if (acc) {
                    v8f c;
                    V8_LOAD(c, o), a0 += c, V8_LOAD(c, o + ldc), a1 += c;
                    V8_LOAD(c, o + 2 * ldc), a2 += c, V8_LOAD(c, o + 3 * ldc), a3 += c;
                }
                V8_STORE(o, a0), V8_STORE(o + ldc, a1), V8_STORE(o + 2 * ldc, a2), V8_STORE(o + 3 * ldc, a3);
                continue;
            }
            for (int ii = 0; ii < ni; ii++)
                for (int cc = 0; cc < nc; cc++) {
                    float sum = 0.0f;
                    const int a = acc;
                    for (int j = 0; j < nk; j++) {
                        const float *v = j < nmem ? Vm + (size_t)j * ldv : Vs + (size_t)(j - nmem) * ldv;
                        sum += P[(size_t)(i0 + ii) * ldp + j] * v[c0 + cc];
                    }
                    float *o = C + (size_t)(i0 + ii) * ldc + c0 + cc;
                    *o = a ? *o + sum : sum;
                }
        }
    }
}

/* C (m, nc; row stride ldc) += A^T B: A (k, m) read as A[i lda + j], B (k, nc; row stride ldb). */
static inline __attribute__((always_inline))
void attn_atb(float *C, int ldc, const float *A, int lda, const float *B, int ldb, int m, int k, int nc) {
    for (int j0 = 0; j0 < m; j0 += 4) {
        const int nj = m - j0 < 4 ? m - j0 : 4;
        for (int c0 = 0; c0 < nc; c0 += 8) {
            const int ncc = nc - c0 < 8 ? nc - c0 : 8;
            if (nj == 4 && ncc == 8) {
                v8f a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
                for (int i = 0; i < k; i++) {
                    v8f b;
                    V8_LOAD(b, B + (size_t)i * ldb + c0);
                    const float *ai = A + (size_t)i * lda + j0;
                    a0 += ai[0] * b, a1 += ai[1] * b, a2 += ai[2] * b, a3 += ai[3] * b;
                }
                float *o = C + (size_t)j0 * ldc + c0;
                v8f c;
                V8_LOAD(c, o), a0 += c, V8_LOAD(c, o + ldc), a1 += c;
                V8_LOAD(c, o + 2 * ldc), a2 += c, V8_LOAD(c, o + 3 * ldc), a3 += c;
                V8_STORE(o, a0), V8_STORE(o + ldc, a1), V8_STORE(o + 2 * ldc, a2), V8_STORE(o + 3 * ldc, a3);
                continue;
            }
            for (int jj = 0; jj < nj; jj++)
                for (int cc = 0; cc < ncc; cc++) {
                    float sum = 0.0f;
                    for (int i = 0; i < k; i++) sum += A[(size_t)i * lda + j0 + jj] * B[(size_t)i * ldb + c0 + cc];
                    C[(size_t)(j0 + jj) * ldc + c0 + cc] += sum;
                }
        }
    }
}

/* xt (dh, nk) = the nk rows (dh wide) transposed: the first nmem from Xm, the rest from Xs. */
static inline __attribute__((always_inline))
void attn_transpose(float *xt, const float *Xm, const float *Xs, int ld, int nmem, int nk, int dh) {
    for (int c = 0; c < dh; c++) {
        float *xc = xt + (size_t)c * nk;
        for (int j = 0; j < nmem; j++) xc[j] = Xm[(size_t)j * ld + c];
        for (int j = nmem; j < nk; j++) xc[j] = Xs[(size_t)(j - nmem) * ld + c];
    }
}

GOPT_SIMD_CLONES
void gopt_segattn_forward_rows(float *ctx, float *att, const float *qkv, const float *qkv_mem, const float *relpos,
                               int n, int d, int nh, int seg, float *scratch, int r0, int r1) {
    const int dh = d / nh, ld = 3 * d, s2 = 2 * seg, nrel = 3 * seg - 1;
    const float scale = 1.0f / sqrtf((float)dh);
    float *rrev_all = scratch + (size_t)seg * s2;
    float *kt = rrev_all + (size_t)nh * 3 * seg; /* (dh, nk): the keys of one head, transposed */
    for (int hh = 0; hh < nh; hh++)
        for (int t = 0; t < nrel; t++) rrev_all[(size_t)hh * nrel + t] = relpos[(size_t)hh * nrel + nrel - 1 - t];
    for (int s0 = r0; s0 < r1 && s0 < n; s0 += seg) {
        int sq = n - s0 < seg ? n - s0 : seg;
        int k0 = s0 == 0 ? 0 : s0 - seg;
        int nmem = s0 - k0, nk = nmem + sq;
        for (int hh = 0; hh < nh; hh++) {
            const float *Q = qkv + (size_t)s0 * ld + hh * dh;
            const float *Km = qkv_mem + (size_t)k0 * ld + d + hh * dh, *Ks = qkv + (size_t)s0 * ld + d + hh * dh;
            const float *Vm = qkv_mem + (size_t)k0 * ld + 2 * d + hh * dh, *Vs = qkv + (size_t)s0 * ld + 2 * d + hh * dh;
            float *P = att + ((size_t)s0 * nh + hh) * s2;
            attn_transpose(kt, Km, Ks, ld, nmem, nk, dh); /* memory keys (from qkv_mem), then the segment's own */
            attn_scores(scratch, Q, ld, kt, sq, nk, dh);
            const float *rrev = rrev_all + (size_t)hh * nrel;
            for (int i = 0; i < sq; i++) {
                float *row = scratch + (size_t)i * nk;
                /* key j (row k0 + j) against query row s0 + i: offset s0 + i - k0 - j,
                 * read forwards from the reversed table */
                const float *rpi = rrev + (nrel - 1) - ((s0 + i - k0) + seg - 1);
                float mx8[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
                int j = 0;
                for (; j + 8 <= nk; j += 8)
                    for (int u = 0; u < 8; u++) {
                        float x = row[j + u] * scale + rpi[j + u];
                        row[j + u] = x;
                        mx8[u] = x > mx8[u] ? x : mx8[u];
                    }
                float mx = -INFINITY;
                for (; j < nk; j++) {
                    row[j] = row[j] * scale + rpi[j];
                    mx = row[j] > mx ? row[j] : mx;
                }
                for (int u = 0; u < 8; u++) mx = mx8[u] > mx ? mx8[u] : mx;
                for (j = 0; j < nk; j++) row[j] = fast_expf(row[j] - mx);
                float sum = sum8(row, nk);
                float inv = 1.0f / sum;
                float *p = P + (size_t)i * nh * s2;
                for (j = 0; j < nk; j++) p[j] = row[j] * inv;
                for (j = nk; j < s2; j++) p[j] = 0.0f;
            }
            attn_values(ctx + (size_t)s0 * d + hh * dh, d, P, nh * s2, Vm, Vs, ld, nmem, sq, nk, dh, 0);
        }
    }
}

void gopt_segattn_forward(float *ctx, float *att, const float *qkv, const float *qkv_mem, const float *relpos, int n,
                          int d, int nh, int seg, float *scratch) {
    gopt_segattn_forward_rows(ctx, att, qkv, qkv_mem, relpos, n, d, nh, seg, scratch, 0, n);
}

GOPT_SIMD_CLONES
void gopt_segattn_backward_rows(float *dqkv_self, float *dqkv_mem, float *drelpos, const float *dctx, const float *qkv,
                                const float *qkv_mem, const float *att, int n, int d, int nh, int seg, float *scratch,
                                int r0, int r1) {
    const int dh = d / nh, ld = 3 * d, s2 = 2 * seg, nrel = 3 * seg - 1;
    const float scale = 1.0f / sqrtf((float)dh);
    float *vt = scratch + (size_t)seg * s2 + (size_t)nh * 3 * seg; /* (dh, nk): values transposed */
    for (int s0 = r0; s0 < r1 && s0 < n; s0 += seg) {
        int sq = n - s0 < seg ? n - s0 : seg;
        int k0 = s0 == 0 ? 0 : s0 - seg;
        int nmem = s0 - k0, nk = nmem + sq;
        for (int hh = 0; hh < nh; hh++) {
            const float *P = att + ((size_t)s0 * nh + hh) * s2;
            const int ldp = nh * s2;
            const float *dc = dctx + (size_t)s0 * d + hh * dh;
            const float *Q = qkv + (size_t)s0 * ld + hh * dh;
            const float *Km = qkv_mem + (size_t)k0 * ld + d + hh * dh, *Ks = qkv + (size_t)s0 * ld + d + hh * dh;
            const float *Vm = qkv_mem + (size_t)k0 * ld + 2 * d + hh * dh, *Vs = qkv + (size_t)s0 * ld + 2 * d + hh * dh;
            /* dP = dctx V^T */
            attn_transpose(vt, Vm, Vs, ld, nmem, nk, dh);
            attn_scores(scratch, dc, d, vt, sq, nk, dh);
            /* dV = P^T dctx, memory rows and own rows apart */
            attn_atb(dqkv_mem + (size_t)k0 * ld + 2 * d + hh * dh, ld, P, ldp, dc, d, nmem, sq, dh);
            attn_atb(dqkv_self + (size_t)s0 * ld + 2 * d + hh * dh, ld, P + nmem, ldp, dc, d, sq, sq, dh);
            /* softmax backward; relative-position bias gradient; fold the scale */
            float *drp = drelpos + (size_t)hh * nrel;
            for (int i = 0; i < sq; i++) {
                float *row = scratch + (size_t)i * nk;
                const float *p = P + (size_t)i * ldp;
                double dot = 0.0;
                for (int j = 0; j < nk; j++) dot += (double)p[j] * row[j];
                float dotf = (float)dot;
                float *drpi = drp + (s0 + i - k0) + seg - 1;
                for (int j = 0; j < nk; j++) {
                    float ds = p[j] * (row[j] - dotf);
                    drpi[-j] += ds;
                    row[j] = ds * scale;
                }
            }
            /* dQ = dS K ; dK = dS^T Q */
            attn_values(dqkv_self + (size_t)s0 * ld + hh * dh, ld, scratch, nk, Km, Ks, ld, nmem, sq, nk, dh, 1);
            attn_atb(dqkv_mem + (size_t)k0 * ld + d + hh * dh, ld, scratch, nk, Q, ld, nmem, sq, dh);
            attn_atb(dqkv_self + (size_t)s0 * ld + d + hh * dh, ld, scratch + nmem, nk, Q, ld, sq, sq, dh);
        }
    }
}

void gopt_segattn_backward(float *dqkv_self, float *dqkv_mem, float *drelpos, const float *dctx, const float *qkv,
                           const float *qkv_mem, const float *att, int n, int d, int nh, int seg, float *scratch) {
    gopt_segattn_backward_rows(dqkv_self, dqkv_mem, drelpos, dctx, qkv, qkv_mem, att, n, d, nh, seg, scratch, 0, n);
}

/* ---- masked log-softmax ------------------------------------------------------------------
 * The exps in float (fast_expf, relative error < 3e-7; one vectorized loop
 * over the row, masked entries computed and dropped), their sum, the
 * normaliser and the entropy in double. A NaN logit gives a NaN
 * log-probability (z - lse) and entropy, as with libm's exp. */
GOPT_SIMD_CLONES
double gopt_logsoftmax_row(float *logp, double *prob, const float *z, int width, uint32_t mask) {
    float mx = -INFINITY, e[32];
    assert(width <= 32);
    for (int j = 0; j < width; j++)
        if ((mask >> j) & 1u && z[j] > mx) mx = z[j];
    for (int j = 0; j < width; j++) e[j] = fast_expf(z[j] - mx);
    double s = 0.0;
    for (int j = 0; j < width; j++)
        if ((mask >> j) & 1u) s += e[j];
    const double lse = mx + log(s), inv = 1.0 / s;
    double ent = 0.0;
    for (int j = 0; j < width; j++) {
        if ((mask >> j) & 1u) {
            double lp = (double)z[j] - lse, pj = e[j] * inv;
            logp[j] = (float)lp;
            ent -= pj * lp;
            if (prob) prob[j] = pj;
        } else {
            logp[j] = -INFINITY;
            if (prob) prob[j] = 0.0;
        }
    }
    return ent;
}
