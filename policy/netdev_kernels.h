/* netdev_kernels.h: the bodies of the policy network's device kernels, one
 * output element (or row) per index, written once in the subset of C that
 * nvcc (CUDA C++) and gcc (C) both compile. netdev_cuda.cu launches them as
 * one CUDA thread per index; netdev_emul.c runs the same bodies in a loop on
 * the CPU, so that the device path's kernels and its orchestration
 * (netdev.c) are tested on machines without a GPU.
 *
 * Every kernel is in gather form: each index writes only its own outputs and
 * reads what it needs (no atomics, no shared memory, no synchronisation
 * inside a kernel). Results therefore do not depend on the order the
 * indices run in: a GPU run is reproducible bit for bit, and the loop that
 * emulates it computes the same floats (up to the compilers' contractions).
 * Column sums over rows (bias and norm gradients) are GEMMs with a vector of
 * ones, done by the caller.
 */
#ifndef GOPT_NETDEV_KERNELS_H
#define GOPT_NETDEV_KERNELS_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define GK_FN __host__ __device__ static inline
#else
#define GK_FN static inline
#endif

enum {
    GK_LINEAR_INIT, /* out (n, o) = res + b, or res, or b, or 0; index: element */
    GK_RELU_FWD,    /* x = max(x, 0); index: element */
    GK_RELU_BWD,    /* dx = out > 0 ? dx : 0 */
    GK_ADD,         /* x += y */
    GK_SUM,         /* z = x + y */
    GK_SCALE_ADD,   /* y (n, d) += x (d) * s, x broadcast over rows; index: element */
    GK_LN_FWD,      /* modulated layer norm; index: row */
    GK_LN_BWD,      /* its input gradient (din may be NULL) and t = dy * normalised input; index: row */
    GK_SAGE_FWD,    /* cat (n, 5d); index: element of (n, d) */
    GK_SAGE_BWD,    /* dh (n, d) += gather of dcat; index: element of (n, d) */
    GK_ATT_FWD,     /* segment attention: att row and ctx of (query row, head); index: row * nh + head */
    GK_ATT_BWD_Q,   /* ds (softmax gradient, unscaled) and dq of (query row, head) */
    GK_ATT_BWD_KV,  /* dk, dv of (key row, head): own segment's and next segment's queries */
    GK_ATT_BWD_REL, /* relpos gradient, per (segment, head, offset) partial sums */
    GK_COUNT
};

typedef struct {
    int id;
    union {
        struct {
            float *out;
            const float *b, *res;
            int o;
        } lin;
        struct {
            float *x;
            const float *y;
        } ew; /* relu (x; y = out for the backward), add (y += x: x = y's source), sum */
        struct {
            float *z;
            const float *x, *y;
        } sum;
        struct {
            float *y;
            const float *x;
            float s;
            int d;
        } bc;
        struct {
            float *out, *mean, *rstd;
            const float *in, *w, *b, *ms, *mb;
            int d;
        } lnf;
        struct {
            float *din, *t;
            const float *dout, *in, *w, *ms, *mean, *rstd;
            int d;
        } lnb;
        struct {
            float *cat, *dh;
            const float *h, *dcat;
            const int32_t *pred_ptr, *pred_idx, *succ_ptr, *succ_idx;
            int d;
        } sage;
        struct {
            float *ctx, *att, *ds, *dq, *dkv, *dkv_mem, *drel;
            const float *qkv, *qkv_mem, *relpos, *dctx, *p;
            int n, d, nh, seg;
        } att;
    } u;
} gk_call;

/* exp(x): the CPU path's polynomial (policy_internal.h's gopt_expf_inline) */
GK_FN float gk_expf(float x) {
    x = x >= -87.0f ? x : -87.0f;
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
    union {
        uint32_t u;
        float f;
    } s;
    s.u = (uint32_t)((int32_t)fn + 127) << 23;
    return p * s.f;
}

GK_FN void gk_linear_init(const gk_call *c, long i) {
    const int j = (int)(i % c->u.lin.o);
    float v = c->u.lin.res ? c->u.lin.res[i] : 0.0f;
    if (c->u.lin.b) v = c->u.lin.res ? v + c->u.lin.b[j] : c->u.lin.b[j];
    c->u.lin.out[i] = v;
}

GK_FN void gk_ln_fwd(const gk_call *c, long r) {
    const int d = c->u.lnf.d;
    const float *x = c->u.lnf.in + r * d;
    float *o = c->u.lnf.out + r * d;
    float s = 0.0f;
    for (int j = 0; j < d; j++) s += x[j];
    const float mf = s / (float)d;
    float q = 0.0f;
    for (int j = 0; j < d; j++) q += (x[j] - mf) * (x[j] - mf);
    const float rs = 1.0f / sqrtf(q / (float)d + 1e-5f);
    for (int j = 0; j < d; j++) {
        const float sc = c->u.lnf.w[j] + (c->u.lnf.ms ? c->u.lnf.ms[j] : 0.0f);
        const float sh = c->u.lnf.b[j] + (c->u.lnf.mb ? c->u.lnf.mb[j] : 0.0f);
        o[j] = (x[j] - mf) * rs * sc + sh;
    }
    c->u.lnf.mean[r] = mf;
    c->u.lnf.rstd[r] = rs;
}

GK_FN void gk_ln_bwd(const gk_call *c, long r) {
    const int d = c->u.lnb.d;
    const float *x = c->u.lnb.in + r * d, *dy = c->u.lnb.dout + r * d;
    float *t = c->u.lnb.t + r * d;
    const float m = c->u.lnb.mean[r], rs = c->u.lnb.rstd[r];
    float sdn = 0.0f, sdnn = 0.0f;
    for (int j = 0; j < d; j++) {
        const float nrm = (x[j] - m) * rs;
        const float dn = dy[j] * (c->u.lnb.w[j] + (c->u.lnb.ms ? c->u.lnb.ms[j] : 0.0f));
        t[j] = dy[j] * nrm;
        sdn += dn;
        sdnn += dn * nrm;
    }
    if (!c->u.lnb.din) return;
    const float mdn = sdn / (float)d, mdnn = sdnn / (float)d;
    float *dx = c->u.lnb.din + r * d;
    for (int j = 0; j < d; j++) {
        const float nrm = (x[j] - m) * rs;
        const float dn = dy[j] * (c->u.lnb.w[j] + (c->u.lnb.ms ? c->u.lnb.ms[j] : 0.0f));
        dx[j] += rs * (dn - mdn - nrm * mdnn);
    }
}

/* cat[r] = [h | mean, max over preds | mean, max over succs], column j of each */
GK_FN void gk_sage_fwd(const gk_call *c, long i) {
    const int d = c->u.sage.d;
    const long r = i / d;
    const int j = (int)(i % d);
    const float *h = c->u.sage.h;
    float *cat = c->u.sage.cat + r * 5 * d;
    cat[j] = h[i];
    for (int side = 0; side < 2; side++) {
        const int32_t *ptr = side ? c->u.sage.succ_ptr : c->u.sage.pred_ptr;
        const int32_t *idx = side ? c->u.sage.succ_idx : c->u.sage.pred_idx;
        const int32_t e0 = ptr[r], e1 = ptr[r + 1];
        float mean = 0.0f, mx = 0.0f;
        if (e1 > e0) {
            mean = mx = h[(long)idx[e0] * d + j];
            for (int32_t e = e0 + 1; e < e1; e++) {
                const float v = h[(long)idx[e] * d + j];
                mean += v;
                mx = v > mx ? v : mx;
            }
            mean *= 1.0f / (float)(e1 - e0);
        }
        cat[(1 + 2 * side) * d + j] = mean;
        cat[(2 + 2 * side) * d + j] = mx;
    }
}

/* dh[u, j] gets: its own cat column; from every v that u feeds (u in pred(v)) the mean's share
 * and, when u is the first of pred(v) holding the max, the max's gradient; the same from every v
 * that feeds u (u in succ(v)). A v listed k times as a neighbour gives k mean shares and one max
 * gradient (the CPU path's first-winner rule). */
GK_FN void gk_sage_bwd(const gk_call *c, long i) {
    const int d = c->u.sage.d;
    const long u = i / d;
    const int j = (int)(i % d);
    const float *h = c->u.sage.h, *dcat = c->u.sage.dcat, *cat = c->u.sage.cat;
    float acc = dcat[u * 5 * d + j];
    for (int side = 0; side < 2; side++) {
        /* side 0: v in succ(u), u is in pred(v) (cat parts 1, 2); side 1: v in pred(u) (parts 3, 4) */
        const int32_t *uptr = side ? c->u.sage.pred_ptr : c->u.sage.succ_ptr;
        const int32_t *uidx = side ? c->u.sage.pred_idx : c->u.sage.succ_idx;
        const int32_t *vptr = side ? c->u.sage.succ_ptr : c->u.sage.pred_ptr;
        const int32_t *vidx = side ? c->u.sage.succ_idx : c->u.sage.pred_idx;
        const int part = 1 + 2 * side;
        for (int32_t e = uptr[u]; e < uptr[u + 1]; e++) {
            const long v = uidx[e];
            const int32_t cnt = vptr[v + 1] - vptr[v];
            acc += dcat[v * 5 * d + part * d + j] * (1.0f / (float)cnt);
            const float mx = cat[v * 5 * d + (part + 1) * d + j];
            int32_t win = -1;
            for (int32_t k = vptr[v]; k < vptr[v + 1]; k++)
                if (h[(long)vidx[k] * d + j] == mx) {
                    win = vidx[k];
                    break;
                }
            if (win != (int32_t)u) continue;
            int first = 1; /* v's first listing among u's neighbours takes the max's gradient */
            for (int32_t e2 = uptr[u]; e2 < e && first; e2++) first = uidx[e2] != (int32_t)v;
            if (first) acc += dcat[v * 5 * d + (part + 1) * d + j];
        }
    }
    c->u.sage.dh[i] += acc;
}

/* Segment geometry of row r: its segment's first row s0, the first key row k0 (the previous
 * segment's first, or s0 for segment 0), the query count sq. */
GK_FN void gk_seg(int n, int seg, long r, long *s0, long *k0, int *sq) {
    *s0 = r - r % seg;
    *k0 = *s0 == 0 ? 0 : *s0 - seg;
    *sq = n - *s0 < seg ? (int)(n - *s0) : seg;
}

/* the key/value row of key j (memory keys first) of a query whose segment starts at s0 */
GK_FN const float *gk_key(const gk_call *c, long s0, long k0, int j, int part, int h) {
    const int d = c->u.att.d, dh = d / c->u.att.nh;
    const long nmem = s0 - k0;
    const float *base = j < nmem ? c->u.att.qkv_mem + (k0 + j) * 3 * d : c->u.att.qkv + (s0 + (j - nmem)) * 3 * d;
    return base + part * d + h * dh;
}

GK_FN void gk_att_fwd(const gk_call *c, long i) {
    const int d = c->u.att.d, nh = c->u.att.nh, seg = c->u.att.seg, dh = d / nh, s2 = 2 * seg, nrel = 3 * seg - 1;
    const long r = i / nh;
    const int h = (int)(i % nh);
    long s0, k0;
    int sq;
    gk_seg(c->u.att.n, seg, r, &s0, &k0, &sq);
    const int nk = (int)(s0 - k0) + sq;
    const float scale = 1.0f / sqrtf((float)dh);
    const float *q = c->u.att.qkv + r * 3 * d + h * dh;
    const float *rel = c->u.att.relpos + (long)h * nrel;
    float *p = c->u.att.att + (r * nh + h) * s2;
    float mx = -INFINITY;
    for (int j = 0; j < nk; j++) {
        const float *k = gk_key(c, s0, k0, j, 1, h);
        float acc = 0.0f;
        for (int e = 0; e < dh; e++) acc += q[e] * k[e];
        const float x = acc * scale + rel[(r - k0 - j) + seg - 1];
        p[j] = x;
        mx = x > mx ? x : mx;
    }
    float sum = 0.0f;
    for (int j = 0; j < nk; j++) {
        p[j] = gk_expf(p[j] - mx);
        sum += p[j];
    }
    const float inv = 1.0f / sum;
    for (int j = 0; j < nk; j++) p[j] *= inv;
    for (int j = nk; j < s2; j++) p[j] = 0.0f;
    float *o = c->u.att.ctx + r * d + h * dh;
    for (int e = 0; e < dh; e++) o[e] = 0.0f;
    for (int j = 0; j < nk; j++) {
        const float *v = gk_key(c, s0, k0, j, 2, h);
        for (int e = 0; e < dh; e++) o[e] += p[j] * v[e];
    }
}

/* ds[j] = p[j] (dctx . v_j - sum_k p[k] dctx . v_k), unscaled (the relpos gradient);
 * dq = scale sum_j ds[j] k_j, written to the query part of dq's row */
GK_FN void gk_att_bwd_q(const gk_call *c, long i) {
    const int d = c->u.att.d, nh = c->u.att.nh, seg = c->u.att.seg, dh = d / nh, s2 = 2 * seg;
    const long r = i / nh;
    const int h = (int)(i % nh);
    long s0, k0;
    int sq;
    gk_seg(c->u.att.n, seg, r, &s0, &k0, &sq);
    const int nk = (int)(s0 - k0) + sq;
    const float scale = 1.0f / sqrtf((float)dh);
    const float *p = c->u.att.p + (r * nh + h) * s2, *dc = c->u.att.dctx + r * d + h * dh;
    float *ds = c->u.att.ds + (r * nh + h) * s2;
    double dot = 0.0;
    for (int j = 0; j < nk; j++) {
        const float *v = gk_key(c, s0, k0, j, 2, h);
        float acc = 0.0f;
        for (int e = 0; e < dh; e++) acc += dc[e] * v[e];
        ds[j] = acc;
        dot += (double)p[j] * acc;
    }
    const float dotf = (float)dot;
    for (int j = 0; j < nk; j++) ds[j] = p[j] * (ds[j] - dotf);
    for (int j = nk; j < s2; j++) ds[j] = 0.0f;
    float *dq = c->u.att.dq + r * 3 * d + h * dh;
    for (int e = 0; e < dh; e++) {
        float acc = 0.0f;
        for (int j = 0; j < nk; j++) acc += ds[j] * gk_key(c, s0, k0, j, 1, h)[e];
        dq[e] = acc * scale;
    }
}

/* Key row r, head h: dk = scale sum_i ds[i][j] q_i, dv = sum_i p[i][j] dctx_i over the queries i
 * of r's own segment (key index nmem + r - s0: into dkv's row r, the self part) and of the next
 * segment (key index r - s0, as memory: into dkv_mem's row r). */
GK_FN void gk_att_bwd_kv(const gk_call *c, long i) {
    const int n = c->u.att.n, d = c->u.att.d, nh = c->u.att.nh, seg = c->u.att.seg, dh = d / nh, s2 = 2 * seg;
    const long r = i / nh;
    const int h = (int)(i % nh);
    const float scale = 1.0f / sqrtf((float)dh);
    long s0, k0;
    int sq;
    gk_seg(n, seg, r, &s0, &k0, &sq);
    for (int mem = 0; mem < 2; mem++) {
        const long q0 = mem ? s0 + seg : s0; /* the queries' segment */
        float *dk = (mem ? c->u.att.dkv_mem : c->u.att.dkv) + r * 3 * d + d + h * dh;
        float *dv = dk + d;
        for (int e = 0; e < dh; e++) dk[e] = dv[e] = 0.0f;
        if (q0 >= n) continue;
        const int nq = n - q0 < seg ? (int)(n - q0) : seg;
        const int j = mem ? (int)(r - s0) : (int)(s0 - k0) + (int)(r - s0);
        for (int a = 0; a < nq; a++) {
            const long qi = q0 + a;
            const float dsv = c->u.att.ds[(qi * nh + h) * s2 + j] * scale, pv = c->u.att.p[(qi * nh + h) * s2 + j];
            const float *q = c->u.att.qkv + qi * 3 * d + h * dh, *dc = c->u.att.dctx + qi * d + h * dh;
            for (int e = 0; e < dh; e++) {
                dk[e] += dsv * q[e];
                dv[e] += pv * dc[e];
            }
        }
    }
}

/* drel[(segment, h, t)] = sum over the segment's (query, key) pairs at offset t of ds */
GK_FN void gk_att_bwd_rel(const gk_call *c, long i) {
    const int n = c->u.att.n, nh = c->u.att.nh, seg = c->u.att.seg, s2 = 2 * seg, nrel = 3 * seg - 1;
    const long sidx = i / ((long)nh * nrel);
    const int h = (int)(i / nrel % nh), t = (int)(i % nrel);
    long s0, k0;
    int sq;
    gk_seg(n, seg, sidx * seg, &s0, &k0, &sq);
    const int nk = (int)(s0 - k0) + sq;
    float acc = 0.0f;
    for (int a = 0; a < sq; a++) {
        const long j = (s0 + a - k0) + seg - 1 - t;
        if (j >= 0 && j < nk) acc += c->u.att.ds[((s0 + a) * nh + h) * s2 + j];
    }
    c->u.att.drel[i] = acc;
}

GK_FN void gk_run(const gk_call *c, long i) {
    switch (c->id) {
    case GK_LINEAR_INIT: gk_linear_init(c, i); break;
    case GK_RELU_FWD: c->u.ew.x[i] = c->u.ew.x[i] > 0.0f ? c->u.ew.x[i] : 0.0f; break;
    case GK_RELU_BWD: c->u.ew.x[i] = c->u.ew.y[i] > 0.0f ? c->u.ew.x[i] : 0.0f; break;
    case GK_ADD: c->u.ew.x[i] += c->u.ew.y[i]; break;
    case GK_SUM: c->u.sum.z[i] = c->u.sum.x[i] + c->u.sum.y[i]; break;
    case GK_SCALE_ADD: c->u.bc.y[i] += c->u.bc.x[i % c->u.bc.d] * c->u.bc.s; break;
    case GK_LN_FWD: gk_ln_fwd(c, i); break;
    case GK_LN_BWD: gk_ln_bwd(c, i); break;
    case GK_SAGE_FWD: gk_sage_fwd(c, i); break;
    case GK_SAGE_BWD: gk_sage_bwd(c, i); break;
    case GK_ATT_FWD: gk_att_fwd(c, i); break;
    case GK_ATT_BWD_Q: gk_att_bwd_q(c, i); break;
    case GK_ATT_BWD_KV: gk_att_bwd_kv(c, i); break;
    case GK_ATT_BWD_REL: gk_att_bwd_rel(c, i); break;
    default: break;
    }
}

#endif /* GOPT_NETDEV_KERNELS_H */
