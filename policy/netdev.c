/* netdev.c: the network's forward and backward on a device backend
 * (netdev.h): the CPU path of network.c layer by layer, each layer over all
 * rows at once (no chunks: a device has the bandwidth the chunking buys on a
 * CPU), with the same formulas, so results equal the CPU path's within float
 * rounding (tests/test_netdev.c checks logits and every gradient).
 *
 * Row-major tensors as on the host; gemm_rm turns a row-major product into
 * the backend's column-major one (C^T = op(B)^T op(A)^T).
 */
#include <stdlib.h>
#include <string.h>

#include "netdev.h"

typedef struct {
    float *cat, *a, *r, *mean, *rstd, *out;
} dev_sage;
typedef struct {
    float *ms, *mb, *x1, *mean1, *rstd1, *qkv, *att, *ctx, *h2, *x2, *mean2, *rstd2, *f1, *out;
} dev_attn;
typedef struct {
    float *x, *mean, *rstd, *logits;
} dev_head;

struct policy_dev {
    const policy_dev_ops *ops;
    void *impl;
    float *params, *grads; /* nparams each, the host's layout */
    float *ghost;          /* host: the gradients coming back */
    void *block;           /* every other device array, carved */
    int32_t cap_n, cap_m;
    /* activations */
    int32_t *pred_ptr, *pred_idx, *succ_ptr, *succ_idx;
    float *x0, *h0, *g, *vh;
    dev_sage sage[POLICY_MAX_SAGE];
    dev_attn attn[POLICY_MAX_ATTN_ALL];
    dev_head head[GOPT_TASK_COUNT];
    /* backward */
    float *da, *db, *dtmp, *dh2, *dqs, *dqm, *dff, *dcat, *dlogits[GOPT_TASK_COUNT], *dvh, *dg, *dms, *dmb;
    /* scratch: layer-norm products and column sums, attention score gradients, relpos partial
     * sums, ones */
    float *lnt, *lncs, *ds, *rel, *ones;
};

void *policy_dev_impl(policy_dev *d) { return d->impl; }
void policy_dev_set_impl(policy_dev *d, void *impl) { d->impl = impl; }

/* ---- carving one block --------------------------------------------------------------------- */
typedef struct {
    char *base; /* NULL: measuring */
    size_t off;
} dcarver;

static void *dcarve(dcarver *cv, size_t bytes) {
    size_t at = (cv->off + 255) & ~(size_t)255;
    cv->off = at + bytes;
    return cv->base ? cv->base + at : NULL;
}
#define DF(cv, count) ((float *)dcarve(cv, sizeof(float) * (size_t)(count)))
#define DI(cv, count) ((int32_t *)dcarve(cv, sizeof(int32_t) * (size_t)(count)))

static size_t nsegs(const gopt_policy_config *c, size_t N) { return (N + (size_t)c->segment - 1) / (size_t)c->segment; }

static void carve_all(const gopt_policy *p, policy_dev *d, dcarver *cv, size_t N, size_t M) {
    const gopt_policy_config *c = &p->cfg;
    const size_t D = (size_t)c->hidden, Fh = D * (size_t)c->ffn_mult, H = (size_t)c->heads, S = (size_t)c->segment;
    const size_t Hc = (size_t)c->cond_hidden, NS = nsegs(c, N), NR = 3 * S - 1;
    d->pred_ptr = DI(cv, N + 1);
    d->succ_ptr = DI(cv, N + 1);
    d->pred_idx = DI(cv, M ? M : 1);
    d->succ_idx = DI(cv, M ? M : 1);
    d->x0 = DF(cv, N * GOPT_POLICY_NFEAT);
    d->h0 = DF(cv, N * D);
    d->g = DF(cv, D);
    d->vh = DF(cv, N * (Hc ? Hc : 1));
    for (int l = 0; l < c->sage_layers; l++) {
        dev_sage *s = &d->sage[l];
        s->cat = DF(cv, N * 5 * D);
        s->a = DF(cv, N * D);
        s->r = DF(cv, N * D);
        s->out = DF(cv, N * D);
        s->mean = DF(cv, N);
        s->rstd = DF(cv, N);
    }
    for (int k = 0; k < p->n_attn; k++) {
        dev_attn *a = &d->attn[k];
        a->ms = DF(cv, D);
        a->mb = DF(cv, D);
        a->x1 = DF(cv, N * D);
        a->qkv = DF(cv, N * 3 * D);
        a->att = DF(cv, N * H * 2 * S);
        a->ctx = DF(cv, N * D);
        a->h2 = DF(cv, N * D);
        a->x2 = DF(cv, N * D);
        a->f1 = DF(cv, N * Fh);
        a->out = DF(cv, N * D);
        a->mean1 = DF(cv, N);
        a->rstd1 = DF(cv, N);
        a->mean2 = DF(cv, N);
        a->rstd2 = DF(cv, N);
    }
    for (int t = 0; t < GOPT_TASK_COUNT; t++) {
        dev_head *h = &d->head[t];
        h->x = DF(cv, N * D);
        h->logits = DF(cv, N * (size_t)p->width[t]);
        h->mean = DF(cv, N);
        h->rstd = DF(cv, N);
        d->dlogits[t] = DF(cv, N * (size_t)p->width[t]);
    }
    d->da = DF(cv, N * D);
    d->db = DF(cv, N * D);
    d->dtmp = DF(cv, N * D);
    d->dh2 = DF(cv, N * D);
    d->dqs = DF(cv, N * 3 * D);
    d->dqm = DF(cv, N * 3 * D);
    d->dff = DF(cv, N * Fh);
    d->dcat = DF(cv, N * 5 * D);
    d->dvh = DF(cv, N * (Hc ? Hc : 1));
    d->dg = DF(cv, D);
    d->dms = DF(cv, D);
    d->dmb = DF(cv, D);
    d->lnt = DF(cv, N * D);
    d->lncs = DF(cv, 2 * D);
    d->ds = DF(cv, N * H * 2 * S);
    d->rel = DF(cv, NS * H * NR);
    d->ones = DF(cv, N > NS ? N : NS);
}

static gopt_status reserve(gopt_policy *p, policy_dev *d, int32_t n, int32_t m, gopt_error *err) {
    if (d->block && n <= d->cap_n && m <= d->cap_m) return GOPT_OK;
    const int32_t cn = n > d->cap_n ? n : d->cap_n, cm = m > d->cap_m ? m : d->cap_m;
    dcarver cv = {NULL, 0};
    carve_all(p, d, &cv, (size_t)cn, (size_t)cm);
    if (d->block) d->ops->release(d, d->block);
    d->block = d->ops->alloc(d, cv.off);
    if (!d->block) {
        d->cap_n = d->cap_m = 0;
        return gopt_error_set(err, GOPT_ENOMEM, "policy on %s: cannot allocate %zu bytes of device memory for %d nodes",
                              d->ops->name, cv.off, (int)cn);
    }
    cv.base = d->block;
    cv.off = 0;
    carve_all(p, d, &cv, (size_t)cn, (size_t)cm);
    d->cap_n = cn;
    d->cap_m = cm;
    const size_t NS = nsegs(&p->cfg, (size_t)cn), no = (size_t)cn > NS ? (size_t)cn : NS;
    float *ones = malloc(sizeof(float) * no);
    if (!ones) return gopt_error_set(err, GOPT_ENOMEM, "policy on %s: out of host memory", d->ops->name);
    for (size_t i = 0; i < no; i++) ones[i] = 1.0f;
    d->ops->h2d(d, d->ones, ones, sizeof(float) * no);
    free(ones);
    return d->ops->sync(d, err);
}

void policy_dev_detach(gopt_policy *p) {
    policy_dev *d = p->dev;
    if (!d) return;
    if (d->block) d->ops->release(d, d->block);
    if (d->params) d->ops->release(d, d->params);
    if (d->grads) d->ops->release(d, d->grads);
    d->ops->close(d);
    free(d->ghost);
    free(d);
    p->dev = NULL;
}

gopt_status policy_dev_attach(gopt_policy *p, const policy_dev_ops *ops, gopt_error *err) {
    if (p->frozen_x1[0])
        return gopt_error_set(err, GOPT_EINVAL, "policy on %s: frozen memory states (a test hook) are CPU-only",
                              ops->name);
    policy_dev *d = calloc(1, sizeof *d);
    if (!d) return gopt_error_set(err, GOPT_ENOMEM, "policy: out of memory");
    d->ops = ops;
    gopt_status st = ops->open(d, err);
    if (st) {
        free(d);
        return st;
    }
    policy_dev_detach(p);
    p->dev = d;
    p->forwarded = 0; /* the next forward fills the device's activations */
    p->trunk_ok = 0;
    d->ghost = malloc(sizeof(float) * p->nparams);
    d->params = ops->alloc(d, sizeof(float) * p->nparams);
    d->grads = ops->alloc(d, sizeof(float) * p->nparams);
    if (!d->ghost || !d->params || !d->grads) {
        policy_dev_detach(p);
        return gopt_error_set(err, GOPT_ENOMEM, "policy on %s: cannot allocate the parameters", ops->name);
    }
    return GOPT_OK;
}

/* ---- the operations, row-major --------------------------------------------------------------- */
/* C (m, n) = alpha op(A) op(B) + beta C, row-major; lda etc. are row strides */
static void gemm_rm(policy_dev *d, int ta, int tb, int m, int n, int k, float alpha, const float *A, int lda,
                    const float *B, int ldb, float beta, float *C, int ldc) {
    d->ops->gemm(d, tb, ta, n, m, k, alpha, B, ldb, A, lda, beta, C, ldc);
}

static void launch(policy_dev *d, gk_call c, long count) {
    if (count > 0) d->ops->launch(d, &c, count);
}

static void linear_fwd(policy_dev *d, float *out, const float *in, const float *w, const float *b, const float *res,
                       int n, int i, int o) {
    gk_call c = {.id = GK_LINEAR_INIT};
    c.u.lin.out = out;
    c.u.lin.b = b;
    c.u.lin.res = res;
    c.u.lin.o = o;
    launch(d, c, (long)n * o);
    gemm_rm(d, 0, 0, n, o, i, 1.0f, in, i, w, o, 1.0f, out, o);
}

/* din (set when beta = 0, else added), dw += in^T dout, db += column sums of dout */
static void linear_bwd(policy_dev *d, float *din, float beta, float *dw, float *db, const float *dout,
                       const float *in, const float *w, int n, int i, int o) {
    if (din) gemm_rm(d, 0, 1, n, i, o, 1.0f, dout, o, w, o, beta, din, i);
    if (dw) gemm_rm(d, 1, 0, i, o, n, 1.0f, in, i, dout, o, 1.0f, dw, o);
    if (db) gemm_rm(d, 0, 0, 1, o, n, 1.0f, d->ones, n, dout, o, 1.0f, db, o);
}

static void ew(policy_dev *d, int id, float *x, const float *y, size_t count) {
    gk_call c = {.id = id};
    c.u.ew.x = x;
    c.u.ew.y = y;
    launch(d, c, (long)count);
}

static void ln_fwd(policy_dev *d, float *out, float *mean, float *rstd, const float *in, const float *w,
                   const float *b, const float *ms, const float *mb, int n, int D) {
    gk_call c = {.id = GK_LN_FWD};
    c.u.lnf.out = out;
    c.u.lnf.mean = mean;
    c.u.lnf.rstd = rstd;
    c.u.lnf.in = in;
    c.u.lnf.w = w;
    c.u.lnf.b = b;
    c.u.lnf.ms = ms;
    c.u.lnf.mb = mb;
    c.u.lnf.d = D;
    launch(d, c, n);
}

/* din += (may be NULL), dw, db += and dms, dmb += (each may be NULL): the CPU path's layernorm_backward */
static void ln_bwd(policy_dev *d, float *din, float *dw, float *db, float *dms, float *dmb, const float *dout,
                   const float *in, const float *w, const float *ms, const float *mean, const float *rstd, int n,
                   int D) {
    gk_call c = {.id = GK_LN_BWD};
    c.u.lnb.din = din;
    c.u.lnb.t = d->lnt;
    c.u.lnb.dout = dout;
    c.u.lnb.in = in;
    c.u.lnb.w = w;
    c.u.lnb.ms = ms;
    c.u.lnb.mean = mean;
    c.u.lnb.rstd = rstd;
    c.u.lnb.d = D;
    launch(d, c, n);
    /* the column sums of t (dw's) and of dout (db's), each computed once and added to the weight
     * gradient and, for a modulated norm, to the modulation's (the same sums) */
    const float *src[2] = {d->lnt, dout};
    float *to[2][2] = {{dw, dms}, {db, dmb}};
    for (int k = 0; k < 2; k++) {
        float *cs = d->lncs + k * D;
        gemm_rm(d, 0, 0, 1, D, n, 1.0f, d->ones, n, src[k], D, 0.0f, cs, D);
        for (int j = 0; j < 2; j++)
            if (to[k][j]) ew(d, GK_ADD, to[k][j], cs, (size_t)D);
    }
}

static gk_call att_call(const gopt_policy *p, int n) {
    gk_call c = {.id = GK_ATT_FWD};
    c.u.att.n = n;
    c.u.att.d = p->cfg.hidden;
    c.u.att.nh = p->cfg.heads;
    c.u.att.seg = p->cfg.segment;
    return c;
}

/* ---- forward ------------------------------------------------------------------------------- */
/* device pointer of a host parameter tensor (NULL stays NULL) */
#define DP(x) ((x) ? d->params + ((x) - p->params) : NULL)
#define DG(x) ((x) ? d->grads + ((x) - p->grads) : NULL)

gopt_status policy_dev_forward(gopt_policy *p, gopt_error *err) {
    policy_dev *d = p->dev;
    const gopt_policy_config *c = &p->cfg;
    const int n = p->n, D = c->hidden, Fh = D * c->ffn_mult, Hc = c->cond_hidden;
    const int m = p->A.pred_ptr[n];
    gopt_status st = reserve(p, d, n, m, err);
    if (st) return st;
    const policy_acts *A = &p->A;
    d->ops->h2d(d, d->params, p->params, sizeof(float) * p->nparams);
    d->ops->h2d(d, d->x0, A->x0, sizeof(float) * (size_t)n * GOPT_POLICY_NFEAT);
    d->ops->h2d(d, d->pred_ptr, A->pred_ptr, sizeof(int32_t) * (size_t)(n + 1));
    d->ops->h2d(d, d->succ_ptr, A->succ_ptr, sizeof(int32_t) * (size_t)(n + 1));
    d->ops->h2d(d, d->pred_idx, A->pred_idx, sizeof(int32_t) * (size_t)m);
    d->ops->h2d(d, d->succ_idx, A->succ_idx, sizeof(int32_t) * (size_t)A->succ_ptr[n]);

    linear_fwd(d, d->h0, d->x0, DP(p->P.in_w), DP(p->P.in_b), NULL, n, GOPT_POLICY_NFEAT, D);
    const float *h = d->h0;
    for (int l = 0; l < c->sage_layers; l++) {
        dev_sage *s = &d->sage[l];
        const sage_params *w = &p->P.sage[l];
        gk_call sc = {.id = GK_SAGE_FWD};
        sc.u.sage.cat = s->cat;
        sc.u.sage.h = h;
        sc.u.sage.pred_ptr = d->pred_ptr;
        sc.u.sage.pred_idx = d->pred_idx;
        sc.u.sage.succ_ptr = d->succ_ptr;
        sc.u.sage.succ_idx = d->succ_idx;
        sc.u.sage.d = D;
        launch(d, sc, (long)n * D);
        linear_fwd(d, s->a, s->cat, DP(w->w), DP(w->b), NULL, n, 5 * D, D);
        ew(d, GK_RELU_FWD, s->a, NULL, (size_t)n * D);
        gk_call sum = {.id = GK_SUM};
        sum.u.sum.z = s->r;
        sum.u.sum.x = h;
        sum.u.sum.y = s->a;
        launch(d, sum, (long)n * D);
        ln_fwd(d, s->out, s->mean, s->rstd, s->r, DP(w->ln_w), DP(w->ln_b), NULL, NULL, n, D);
        h = s->out;
    }
    /* graph vector: the mean of the rows; the modulations g @ film_s, g @ film_b */
    gemm_rm(d, 0, 0, 1, D, n, 1.0f / (float)n, d->ones, n, h, D, 0.0f, d->g, D);
    for (int k = 0; k < p->n_attn; k++) {
        const attn_params *w = &p->P.attn[k];
        gemm_rm(d, 0, 0, 1, D, D, 1.0f, d->g, D, DP(w->film_s), D, 0.0f, d->attn[k].ms, D);
        gemm_rm(d, 0, 0, 1, D, D, 1.0f, d->g, D, DP(w->film_b), D, 0.0f, d->attn[k].mb, D);
    }
    for (int k = 0; k < p->n_attn; k++) {
        const attn_params *w = &p->P.attn[k];
        dev_attn *a = &d->attn[k];
        ln_fwd(d, a->x1, a->mean1, a->rstd1, h, DP(w->ln1_w), DP(w->ln1_b), a->ms, a->mb, n, D);
        linear_fwd(d, a->qkv, a->x1, DP(w->qkv_w), DP(w->qkv_b), NULL, n, D, 3 * D);
        gk_call ac = att_call(p, n);
        ac.u.att.ctx = a->ctx;
        ac.u.att.att = a->att;
        ac.u.att.qkv = ac.u.att.qkv_mem = a->qkv;
        ac.u.att.relpos = DP(w->relpos);
        launch(d, ac, (long)n * c->heads);
        linear_fwd(d, a->h2, a->ctx, DP(w->proj_w), DP(w->proj_b), h, n, D, D);
        ln_fwd(d, a->x2, a->mean2, a->rstd2, a->h2, DP(w->ln2_w), DP(w->ln2_b), NULL, NULL, n, D);
        linear_fwd(d, a->f1, a->x2, DP(w->fc1_w), DP(w->fc1_b), NULL, n, D, Fh);
        ew(d, GK_RELU_FWD, a->f1, NULL, (size_t)n * Fh);
        linear_fwd(d, a->out, a->f1, DP(w->fc2_w), DP(w->fc2_b), a->h2, n, Fh, D);
        h = a->out;
        if (k >= c->attn_layers) {
            const int t = k - c->attn_layers, W = p->width[t];
            const head_params *hp = &p->P.head[t];
            dev_head *hd = &d->head[t];
            ln_fwd(d, hd->x, hd->mean, hd->rstd, h, DP(hp->ln_w), DP(hp->ln_b), NULL, NULL, n, D);
            linear_fwd(d, hd->logits, hd->x, DP(hp->w), DP(hp->b), NULL, n, D, W);
            d->ops->d2h(d, p->A.head[t].logits, hd->logits, sizeof(float) * (size_t)n * W);
            if (t == GOPT_TASK_PLACE && Hc > 0) {
                gemm_rm(d, 0, 0, n, Hc, D, 1.0f, hd->x, D, DP(p->P.cond_v), Hc, 0.0f, d->vh, Hc);
                d->ops->d2h(d, p->A.vh, d->vh, sizeof(float) * (size_t)n * Hc);
            }
        }
    }
    return d->ops->sync(d, err);
}

/* ---- backward ------------------------------------------------------------------------------ */
static void attn_backward(gopt_policy *p, int k, const float *hin, float *dout, float *din) {
    policy_dev *d = p->dev;
    const gopt_policy_config *c = &p->cfg;
    const int n = p->n, D = c->hidden, Fh = D * c->ffn_mult, D3 = 3 * D, H = c->heads, S = c->segment;
    const attn_params *w = &p->P.attn[k];
    const attn_params *g = &p->G.attn[k];
    dev_attn *a = &d->attn[k];
    const size_t nd = (size_t)n * D;
    d->ops->zero(d, d->dms, sizeof(float) * D);
    d->ops->zero(d, d->dmb, sizeof(float) * D);
    if (k >= c->attn_layers) { /* the head reads this layer's output */
        const int t = k - c->attn_layers, W = p->width[t], Hc = c->cond_hidden;
        const head_params *hp = &p->P.head[t], *hg = &p->G.head[t];
        linear_bwd(d, d->dtmp, 0.0f, DG(hg->w), DG(hg->b), d->dlogits[t], d->head[t].x, DP(hp->w), n, D, W);
        if (t == GOPT_TASK_PLACE && Hc > 0)
            linear_bwd(d, d->dtmp, 1.0f, DG(p->G.cond_v), NULL, d->dvh, d->head[t].x, DP(p->P.cond_v), n, D, Hc);
        ln_bwd(d, dout, DG(hg->ln_w), DG(hg->ln_b), NULL, NULL, d->dtmp, a->out, DP(hp->ln_w), NULL, d->head[t].mean,
               d->head[t].rstd, n, D);
    }
    /* out = h2 + fc2(relu(fc1(ln2(h2)))) */
    d->ops->d2d(d, d->dh2, dout, sizeof(float) * nd);
    linear_bwd(d, d->dff, 0.0f, DG(g->fc2_w), DG(g->fc2_b), dout, a->f1, DP(w->fc2_w), n, Fh, D);
    ew(d, GK_RELU_BWD, d->dff, a->f1, (size_t)n * Fh);
    linear_bwd(d, d->dtmp, 0.0f, DG(g->fc1_w), DG(g->fc1_b), d->dff, a->x2, DP(w->fc1_w), n, D, Fh);
    ln_bwd(d, d->dh2, DG(g->ln2_w), DG(g->ln2_b), NULL, NULL, d->dtmp, a->h2, DP(w->ln2_w), NULL, a->mean2, a->rstd2,
           n, D);
    /* h2 = hin + proj(segattn(qkv(ln1(hin)))) */
    d->ops->d2d(d, din, d->dh2, sizeof(float) * nd);
    linear_bwd(d, d->dtmp, 0.0f, DG(g->proj_w), DG(g->proj_b), d->dh2, a->ctx, DP(w->proj_w), n, D, D);
    gk_call ac = att_call(p, n);
    ac.u.att.qkv = ac.u.att.qkv_mem = a->qkv;
    ac.u.att.p = a->att;
    ac.u.att.dctx = d->dtmp;
    ac.u.att.ds = d->ds;
    ac.u.att.dq = d->dqs;
    ac.u.att.dkv = d->dqs;
    ac.u.att.dkv_mem = d->dqm;
    ac.u.att.drel = d->rel;
    d->ops->zero(d, d->dqm, sizeof(float) * (size_t)n * D3);
    ac.id = GK_ATT_BWD_Q;
    launch(d, ac, (long)n * H);
    ac.id = GK_ATT_BWD_KV;
    launch(d, ac, (long)n * H);
    ac.id = GK_ATT_BWD_REL;
    const int ns = (int)nsegs(c, (size_t)n), nrel = 3 * S - 1;
    launch(d, ac, (long)ns * H * nrel);
    gemm_rm(d, 0, 0, 1, H * nrel, ns, 1.0f, d->ones, ns, d->rel, H * nrel, 1.0f, DG(g->relpos), H * nrel);
    /* the projections see both uses of a row; the row's state gets the memory part only with
     * memory_grad (else stop-gradient) */
    ew(d, GK_ADD, d->dqm, d->dqs, (size_t)n * D3);
    linear_bwd(d, NULL, 0.0f, DG(g->qkv_w), DG(g->qkv_b), d->dqm, a->x1, DP(w->qkv_w), n, D, D3);
    linear_bwd(d, d->dtmp, 0.0f, NULL, NULL, c->memory_grad ? d->dqm : d->dqs, a->x1, DP(w->qkv_w), n, D, D3);
    ln_bwd(d, din, DG(g->ln1_w), DG(g->ln1_b), d->dms, d->dmb, d->dtmp, hin, DP(w->ln1_w), a->ms, a->mean1, a->rstd1,
           n, D);
    /* modulation: dwg += g^T dms, dwb += g^T dmb, dg += dms wg^T + dmb wb^T */
    gemm_rm(d, 1, 0, D, D, 1, 1.0f, d->g, D, d->dms, D, 1.0f, DG(g->film_s), D);
    gemm_rm(d, 1, 0, D, D, 1, 1.0f, d->g, D, d->dmb, D, 1.0f, DG(g->film_b), D);
    gemm_rm(d, 0, 1, 1, D, D, 1.0f, d->dms, D, DP(w->film_s), D, 1.0f, d->dg, D);
    gemm_rm(d, 0, 1, 1, D, D, 1.0f, d->dmb, D, DP(w->film_b), D, 1.0f, d->dg, D);
}

gopt_status policy_dev_backward(gopt_policy *p, gopt_error *err) {
    policy_dev *d = p->dev;
    const gopt_policy_config *c = &p->cfg;
    const int n = p->n, D = c->hidden, Hc = c->cond_hidden;
    const size_t nd = (size_t)n * D;
    for (int t = 0; t < GOPT_TASK_COUNT; t++)
        d->ops->h2d(d, d->dlogits[t], p->B.dlogits[t], sizeof(float) * (size_t)n * p->width[t]);
    if (Hc > 0) d->ops->h2d(d, d->dvh, p->B.dvh, sizeof(float) * (size_t)n * Hc);
    d->ops->zero(d, d->grads, sizeof(float) * p->nparams);
    float *dcur = d->da, *dnext = d->db;
    d->ops->zero(d, dcur, sizeof(float) * nd);
    d->ops->zero(d, d->dg, sizeof(float) * D);
    const float *h_sage = c->sage_layers ? d->sage[c->sage_layers - 1].out : d->h0;
    for (int k = p->n_attn - 1; k >= 0; k--) {
        attn_backward(p, k, k ? d->attn[k - 1].out : h_sage, dcur, dnext);
        float *t = dcur;
        dcur = dnext;
        dnext = t;
    }
    gk_call mb = {.id = GK_SCALE_ADD};
    mb.u.bc.y = dcur;
    mb.u.bc.x = d->dg;
    mb.u.bc.s = 1.0f / (float)n;
    mb.u.bc.d = D;
    launch(d, mb, (long)nd);
    for (int l = c->sage_layers - 1; l >= 0; l--) {
        dev_sage *s = &d->sage[l];
        const sage_params *w = &p->P.sage[l], *g = &p->G.sage[l];
        /* out = LN(hin + relu(cat W + b)) */
        d->ops->zero(d, d->dtmp, sizeof(float) * nd);
        ln_bwd(d, d->dtmp, DG(g->ln_w), DG(g->ln_b), NULL, NULL, dcur, s->r, DP(w->ln_w), NULL, s->mean, s->rstd, n, D);
        d->ops->d2d(d, dnext, d->dtmp, sizeof(float) * nd);
        ew(d, GK_RELU_BWD, d->dtmp, s->a, nd);
        linear_bwd(d, d->dcat, 0.0f, DG(g->w), DG(g->b), d->dtmp, s->cat, DP(w->w), n, 5 * D, D);
        gk_call sc = {.id = GK_SAGE_BWD};
        sc.u.sage.dh = dnext;
        sc.u.sage.dcat = d->dcat;
        sc.u.sage.cat = s->cat;
        sc.u.sage.h = l ? d->sage[l - 1].out : d->h0;
        sc.u.sage.pred_ptr = d->pred_ptr;
        sc.u.sage.pred_idx = d->pred_idx;
        sc.u.sage.succ_ptr = d->succ_ptr;
        sc.u.sage.succ_idx = d->succ_idx;
        sc.u.sage.d = D;
        launch(d, sc, (long)nd);
        float *t = dcur;
        dcur = dnext;
        dnext = t;
    }
    linear_bwd(d, NULL, 0.0f, DG(p->G.in_w), DG(p->G.in_b), dcur, d->x0, DP(p->P.in_w), n, GOPT_POLICY_NFEAT, D);
    d->ops->d2h(d, d->ghost, d->grads, sizeof(float) * p->nparams);
    gopt_status st = d->ops->sync(d, err);
    if (st) return st;
    for (size_t i = 0; i < p->nparams; i++) p->grads[i] += d->ghost[i];
    return GOPT_OK;
}

gopt_status gopt_policy_set_device(gopt_policy *p, const char *device, gopt_error *err) {
    if (!device || strcmp(device, "cpu") == 0) {
        if (p->dev) p->forwarded = 0;
        policy_dev_detach(p);
        return GOPT_OK;
    }
    if (strcmp(device, "cuda") == 0) return policy_dev_attach(p, &policy_dev_cuda, err);
    if (strcmp(device, "emulated") == 0) return policy_dev_attach(p, &policy_dev_emulated, err);
    return gopt_error_set(err, GOPT_EINVAL, "policy: unknown device '%s' (cpu, cuda or emulated)", device);
}

const char *gopt_policy_device(const gopt_policy *p) { return p->dev ? p->dev->ops->name : "cpu"; }
