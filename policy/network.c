/* network.c: the GO policy network: parameter layout and initialisation,
 * activation sizing, the forward pass and the backward pass.
 *
 *   x0 (N, NFEAT) --linear--> h0 (N, D)
 *   GraphSAGE x sage_layers: h = LN(h + relu([h|mean/max preds|mean/max succs] W + b))
 *   g = mean over nodes of h                                  (graph vector)
 *   attention x (attn_layers + 3), pre-norm, Transformer-XL segments:
 *       x1 = LN(h) * (w + g Ws) + (b + g Wb)                  (feature modulation)
 *       h  = h + proj(segattn(x1 Wqkv + bqkv))
 *       h  = h + fc2(relu(fc1(LN(h))))
 *   the last three layers are the task layers (place, sched, fuse), stacked;
 *   head t: logits_t = LN(h_t) W_t + b_t
 *
 * Invariants: rows are in topological-rank order; the backward calls the
 * layers' backwards in exactly the reverse order of the forward. Memory
 * keys/values of a segment get their projection gradients but no gradient
 * into the previous segment's states (stop-gradient, as in Transformer-XL).
 * Cost: see gopt_policy.h; flops of the last pass are counted exactly.
 */
#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "netdev.h"
#include "policy_net.h"

const char *gopt_task_name(gopt_task t) {
    static const char *names[] = {"place", "sched", "fuse"};
    return (int)t >= 0 && t < GOPT_TASK_COUNT ? names[t] : "?";
}

void gopt_policy_config_default(gopt_policy_config *c) {
    c->hidden = 64;
    c->sage_layers = 2;
    c->attn_layers = 1;
    c->heads = 2;
    c->segment = 32;
    c->ffn_mult = 2;
    c->max_devices = GOPT_POLICY_MAX_DEVICES;
    c->sched_levels = 8;
    c->fusion_levels = 4;
    c->memory_grad = 0;
    c->cond_hidden = 8;
    c->hints = 0;
    c->hint_quality = 0;
    c->fuse_cond = 0;
    c->sched_cond = 0;
    c->fuse_merge = 1;
    c->fuse_hint = 0;
    c->fuse_hint_level = 0;
    c->place_succ = 0;
}

static gopt_status check_range(const char *field, int32_t v, int32_t lo, int32_t hi, gopt_error *err) {
    if (v < lo || v > hi)
        return gopt_error_set(err, GOPT_EINVAL, "policy config: %s = %d is outside %d..%d", field, (int)v, (int)lo,
                              (int)hi);
    return GOPT_OK;
}

gopt_status gopt_policy_config_check(const gopt_policy_config *c, gopt_error *err) {
    gopt_status st;
    if ((st = check_range("hidden", c->hidden, 2, 1024, err))) return st;
    if ((st = check_range("sage_layers", c->sage_layers, 0, POLICY_MAX_SAGE, err))) return st;
    if ((st = check_range("attn_layers", c->attn_layers, 0, POLICY_MAX_ATTN, err))) return st;
    if ((st = check_range("heads", c->heads, 1, c->hidden, err))) return st;
    if (c->hidden % c->heads)
        return gopt_error_set(err, GOPT_EINVAL, "policy config: heads = %d does not divide hidden = %d", (int)c->heads,
                              (int)c->hidden);
    if ((st = check_range("segment", c->segment, 1, 4096, err))) return st;
    if ((st = check_range("ffn_mult", c->ffn_mult, 1, 16, err))) return st;
    if ((st = check_range("max_devices", c->max_devices, 1, GOPT_POLICY_MAX_DEVICES, err))) return st;
    if ((st = check_range("sched_levels", c->sched_levels, 1, 32, err))) return st;
    if ((st = check_range("fusion_levels", c->fusion_levels, 1, 32, err))) return st;
    if ((st = check_range("memory_grad", c->memory_grad, 0, 1, err))) return st;
    if ((st = check_range("cond_hidden", c->cond_hidden, 0, POLICY_MAX_COND, err))) return st;
    if ((st = check_range("hints", c->hints, 0, GOPT_POLICY_MAX_HINTS, err))) return st;
    if (c->hints && c->cond_hidden < 1)
        return gopt_error_set(err, GOPT_EINVAL, "policy config: hints = %d needs the conditioned decoder (cond_hidden > 0)",
                              (int)c->hints);
    if ((st = check_range("hint_quality", c->hint_quality, 0, 1, err))) return st;
    if (c->hint_quality && !c->hints)
        return gopt_error_set(err, GOPT_EINVAL, "policy config: hint_quality = 1 needs hints > 0");
    if ((st = check_range("fuse_cond", c->fuse_cond, 0, 1, err))) return st;
    if (c->fuse_cond && c->cond_hidden < 1)
        return gopt_error_set(err, GOPT_EINVAL,
                              "policy config: fuse_cond = 1 needs the conditioned decoder (cond_hidden > 0)");
    if ((st = check_range("sched_cond", c->sched_cond, 0, 1, err))) return st;
    if ((st = check_range("fuse_merge", c->fuse_merge, 0, 1, err))) return st;
    if ((st = check_range("fuse_hint", c->fuse_hint, 0, 1, err))) return st;
    if (c->fuse_hint && (!c->fuse_cond || !c->hints))
        return gopt_error_set(err, GOPT_EINVAL, "policy config: fuse_hint = 1 needs fuse_cond = 1 and hints > 0");
    if ((st = check_range("fuse_hint_level", c->fuse_hint_level, 0, 1, err))) return st;
    if (c->fuse_hint_level && (!c->fuse_cond || !c->hints))
        return gopt_error_set(err, GOPT_EINVAL,
                              "policy config: fuse_hint_level = 1 needs fuse_cond = 1 and hints > 0");
    if ((st = check_range("place_succ", c->place_succ, 0, 1, err))) return st;
    if (c->place_succ && c->cond_hidden < 1)
        return gopt_error_set(err, GOPT_EINVAL,
                              "policy config: place_succ = 1 needs the conditioned decoder (cond_hidden > 0)");
    if (c->sched_cond && !c->hints)
        return gopt_error_set(err, GOPT_EINVAL, "policy config: sched_cond = 1 needs hints > 0");
    return GOPT_OK;
}

/* ---- parameter layout ------------------------------------------------------------ */
typedef struct {
    gopt_policy *p;
    size_t off;
} layout_ctx;

static void take(layout_ctx *lc, float **slot_p, float **slot_g, size_t count, int decay, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static void take(layout_ctx *lc, float **slot_p, float **slot_g, size_t count, int decay, const char *fmt, ...) {
    gopt_policy *p = lc->p;
    if (p->params) {
        *slot_p = p->params + lc->off;
        *slot_g = p->grads + lc->off;
    } else {
        assert(p->nt < POLICY_MAX_TENSORS && "policy layout: too many tensors");
        policy_tensor *t = &p->tab[p->nt++];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(t->name, sizeof t->name, fmt, ap);
        va_end(ap);
        t->off = lc->off;
        t->count = count;
        t->decay = decay;
    }
    lc->off += count;
}

/* Walk the layout: without params, record the table; with them, bind P and G. */
static size_t layout(gopt_policy *p) {
    const gopt_policy_config *c = &p->cfg;
    const size_t D = (size_t)c->hidden, Fh = D * (size_t)c->ffn_mult;
    layout_ctx lc = {p, 0};
    policy_params *P = &p->P, *G = &p->G;
#define T(field, count, decay, ...) take(&lc, &P->field, &G->field, (count), (decay), __VA_ARGS__)
    T(in_w, (size_t)GOPT_POLICY_NFEAT * D, 1, "in.w");
    T(in_b, D, 0, "in.b");
    for (int l = 0; l < c->sage_layers; l++) {
        T(sage[l].w, 5 * D * D, 1, "sage%d.w", l);
        T(sage[l].b, D, 0, "sage%d.b", l);
        T(sage[l].ln_w, D, 0, "sage%d.ln.w", l);
        T(sage[l].ln_b, D, 0, "sage%d.ln.b", l);
    }
    for (int k = 0; k < p->n_attn; k++) {
        char nm[16];
        if (k < c->attn_layers)
            snprintf(nm, sizeof nm, "attn%d", k);
        else
            snprintf(nm, sizeof nm, "task_%s", gopt_task_name((gopt_task)(k - c->attn_layers)));
        T(attn[k].ln1_w, D, 0, "%s.ln1.w", nm);
        T(attn[k].ln1_b, D, 0, "%s.ln1.b", nm);
        T(attn[k].film_s, D * D, 1, "%s.film.scale", nm);
        T(attn[k].film_b, D * D, 1, "%s.film.shift", nm);
        T(attn[k].qkv_w, D * 3 * D, 1, "%s.qkv.w", nm);
        T(attn[k].qkv_b, 3 * D, 0, "%s.qkv.b", nm);
        T(attn[k].relpos, (size_t)c->heads * (3 * (size_t)c->segment - 1), 0, "%s.relpos", nm);
        T(attn[k].proj_w, D * D, 1, "%s.proj.w", nm);
        T(attn[k].proj_b, D, 0, "%s.proj.b", nm);
        T(attn[k].ln2_w, D, 0, "%s.ln2.w", nm);
        T(attn[k].ln2_b, D, 0, "%s.ln2.b", nm);
        T(attn[k].fc1_w, D * Fh, 1, "%s.fc1.w", nm);
        T(attn[k].fc1_b, Fh, 0, "%s.fc1.b", nm);
        T(attn[k].fc2_w, Fh * D, 1, "%s.fc2.w", nm);
        T(attn[k].fc2_b, D, 0, "%s.fc2.b", nm);
    }
    for (int t = 0; t < GOPT_TASK_COUNT; t++) {
        const char *tn = gopt_task_name((gopt_task)t);
        T(head[t].ln_w, D, 0, "head_%s.ln.w", tn);
        T(head[t].ln_b, D, 0, "head_%s.ln.b", tn);
        T(head[t].w, D * (size_t)p->width[t], 1, "head_%s.w", tn);
        T(head[t].b, (size_t)p->width[t], 0, "head_%s.b", tn);
    }
    if (c->cond_hidden > 0) {
        const size_t Hc = (size_t)c->cond_hidden;
        T(cond_u, (size_t)POLICY_CFG_NPHI(c) * Hc, 1, "cond.u");
        T(cond_v, D * Hc, 1, "cond.v");
        T(cond_b, Hc, 0, "cond.b");
        T(cond_w, Hc, 1, "cond.w");
        T(cond_sched, (size_t)POLICY_CFG_NPSI(c) * (size_t)p->width[GOPT_TASK_SCHED], 1, "cond.sched");
        T(cond_fuse, (size_t)POLICY_CFG_NPSI(c) * (size_t)p->width[GOPT_TASK_FUSE], 1, "cond.fuse");
        if (c->fuse_cond) T(cond_fgrp, (size_t)POLICY_CFG_NFGRP(c) * (size_t)POLICY_CFG_NPSI(c), 1, "cond.fgrp");
        if (c->sched_cond) T(cond_shint, (size_t)POLICY_CFG_NPSI(c), 1, "cond.shint");
    }
#undef T
    return lc.off;
}

static void fill_normal(float *x, size_t n, double sd, gopt_rng *rng) {
    for (size_t i = 0; i < n; i++) x[i] = (float)(sd * gopt_rng_normal(rng));
}
static void fill_const(float *x, size_t n, float v) {
    for (size_t i = 0; i < n; i++) x[i] = v;
}

/* Weights N(0, 1/fan_in) (residual branch outputs scaled down by the depth),
 * norms 1, biases and position biases 0, modulation small so that it starts
 * near identity but is trainable. */
static void init_params(gopt_policy *p, uint64_t seed) {
    const gopt_policy_config *c = &p->cfg;
    const int D = c->hidden, Fh = D * c->ffn_mult;
    policy_params *P = &p->P;
    gopt_rng rng;
    gopt_rng_seed(&rng, seed);
    memset(p->params, 0, sizeof(float) * p->nparams);
    double depth = sqrt(2.0 * (c->sage_layers + p->n_attn) + 1.0);
    fill_normal(P->in_w, (size_t)GOPT_POLICY_NFEAT * D, 1.0 / sqrt(16.0), &rng);
    for (int l = 0; l < c->sage_layers; l++) {
        fill_normal(P->sage[l].w, 5 * (size_t)D * D, 1.0 / sqrt(5.0 * D), &rng);
        fill_const(P->sage[l].ln_w, D, 1.0f);
    }
    for (int k = 0; k < p->n_attn; k++) {
        attn_params *a = &P->attn[k];
        fill_const(a->ln1_w, D, 1.0f);
        fill_const(a->ln2_w, D, 1.0f);
        fill_normal(a->film_s, (size_t)D * D, 0.1 / sqrt(D), &rng);
        fill_normal(a->film_b, (size_t)D * D, 0.1 / sqrt(D), &rng);
        fill_normal(a->qkv_w, (size_t)D * 3 * D, 1.0 / sqrt(D), &rng);
        fill_normal(a->proj_w, (size_t)D * D, 1.0 / sqrt(D) / depth, &rng);
        fill_normal(a->fc1_w, (size_t)D * Fh, 1.0 / sqrt(D), &rng);
        fill_normal(a->fc2_w, (size_t)Fh * D, 1.0 / sqrt(Fh) / depth, &rng);
    }
    for (int t = 0; t < GOPT_TASK_COUNT; t++) {
        fill_const(P->head[t].ln_w, D, 1.0f);
        fill_normal(P->head[t].w, (size_t)D * p->width[t], 0.1 / sqrt(D), &rng);
    }
    /* the conditioned decoder last, so the draws above do not depend on it; its
     * output weight is small but non-zero (a zero one would stop every other
     * scorer gradient at the first step) */
    if (c->cond_hidden > 0) {
        const int Hc = c->cond_hidden;
        fill_normal(P->cond_u, (size_t)POLICY_CFG_NPHI(c) * Hc, 1.0 / sqrt((double)POLICY_CFG_NPHI(c)), &rng);
        fill_normal(P->cond_v, (size_t)D * Hc, 0.3 / sqrt(D), &rng);
        fill_normal(P->cond_w, (size_t)Hc, 0.3 / sqrt(Hc), &rng);
    }
}

/* What the layout walk reads: the config, head widths, attention blocks. */
static void skeleton(gopt_policy *p, const gopt_policy_config *cfg) {
    p->cfg = *cfg;
    p->width[GOPT_TASK_PLACE] = cfg->max_devices;
    p->width[GOPT_TASK_SCHED] = cfg->sched_levels;
    p->width[GOPT_TASK_FUSE] = cfg->fusion_levels;
    p->n_attn = cfg->attn_layers + GOPT_TASK_COUNT;
}

size_t policy_config_num_params(const gopt_policy_config *cfg, gopt_error *err) {
    gopt_policy *p = gopt_calloc(1, sizeof *p, err); /* the layout walk records its table here, nothing more */
    if (!p) return 0;
    skeleton(p, cfg);
    size_t n = layout(p);
    free(p);
    return n;
}

gopt_status gopt_policy_create(gopt_policy **out, const gopt_policy_config *cfg, uint64_t seed, gopt_error *err) {
    *out = NULL;
    gopt_status st = gopt_policy_config_check(cfg, err);
    if (st) return st;
    gopt_policy *p = gopt_calloc(1, sizeof *p, err);
    if (!p) return GOPT_ENOMEM;
    skeleton(p, cfg);
    p->hint_best = -1; /* no hints set */
    p->threads = 1;
    p->nparams = layout(p); /* records the table */
    size_t bytes = sizeof(float) * p->nparams;
    p->params = gopt_malloc(bytes, err);
    p->grads = gopt_calloc(p->nparams, sizeof(float), err);
    p->m = gopt_calloc(p->nparams, sizeof(float), err);
    p->v = gopt_calloc(p->nparams, sizeof(float), err);
    if (!p->params || !p->grads || !p->m || !p->v) {
        gopt_policy_free(p);
        return GOPT_ENOMEM;
    }
    layout(p); /* binds P and G */
    init_params(p, seed);
    *out = p;
    return GOPT_OK;
}

void gopt_policy_free(gopt_policy *p) {
    if (!p) return;
    free(p->params);
    free(p->grads);
    free(p->m);
    free(p->v);
    free(p->act_block);
    free(p->bwd_block);
    free(p->kept);
    free(p->part_grad);
    free(p->fj);
    free(p->fj_act);
    policy_dev_detach(p);
    gopt_policy_debug_freeze_memory(p, 0);
    free(p);
}

int gopt_policy_debug_freeze_memory(gopt_policy *p, int on) {
    for (int k = 0; k < POLICY_MAX_ATTN_ALL; k++) {
        free(p->frozen_x1[k]);
        free(p->frozen_qkv[k]);
        p->frozen_x1[k] = p->frozen_qkv[k] = NULL;
    }
    if (!on) return 0;
    if (!p->forwarded) return -1;
    const size_t nd = (size_t)p->n * p->cfg.hidden;
    for (int k = 0; k < p->n_attn; k++) {
        p->frozen_x1[k] = malloc(sizeof(float) * nd);
        p->frozen_qkv[k] = malloc(sizeof(float) * nd * 3);
        if (!p->frozen_x1[k] || !p->frozen_qkv[k]) return gopt_policy_debug_freeze_memory(p, 0), -1;
        memcpy(p->frozen_x1[k], p->A.attn[k].x1, sizeof(float) * nd);
        memcpy(p->frozen_qkv[k], p->A.attn[k].qkv, sizeof(float) * nd * 3);
    }
    p->frozen_n = p->n;
    return 0;
}

gopt_status gopt_policy_set_threads(gopt_policy *p, int threads, gopt_error *err) {
    if (threads < 1 || threads > GOPT_POLICY_MAX_THREADS)
        return gopt_error_set(err, GOPT_EINVAL, "policy: threads = %d is outside 1..%d", threads,
                              GOPT_POLICY_MAX_THREADS);
    p->threads = threads;
    return GOPT_OK;
}

int gopt_policy_threads(const gopt_policy *p) { return p->threads; }

void gopt_policy_debug_chunk(gopt_policy *p, int segments) { p->fwd_chunk = segments > 0 ? segments : 0; }

const gopt_policy_config *gopt_policy_get_config(const gopt_policy *p) { return &p->cfg; }
size_t gopt_policy_num_params(const gopt_policy *p) { return p->nparams; }
int gopt_policy_num_tensors(const gopt_policy *p) { return p->nt; }
void gopt_policy_tensor(gopt_policy *p, int i, const char **name, float **param, float **grad, size_t *count) {
    assert(i >= 0 && i < p->nt);
    if (name) *name = p->tab[i].name;
    if (param) *param = p->params + p->tab[i].off;
    if (grad) *grad = p->grads + p->tab[i].off;
    if (count) *count = p->tab[i].count;
}
void gopt_policy_zero_grad(gopt_policy *p) { memset(p->grads, 0, sizeof(float) * p->nparams); }
size_t gopt_policy_memory_bytes(const gopt_policy *p) {
    return 4 * sizeof(float) * p->nparams + p->act_bytes + p->bwd_bytes;
}
double gopt_policy_forward_flops(const gopt_policy *p) { return p->fwd_flops; }
double gopt_policy_backward_flops(const gopt_policy *p) { return p->bwd_flops; }

/* ---- activations ---------------------------------------------------------------- */
/* A carver over one block: first pass counts, second pass assigns. Every
 * piece is 64-byte aligned. */
typedef struct {
    char *base;
    size_t off;
} carver;

static void *carve(carver *cv, size_t bytes) {
    size_t at = (cv->off + 63) & ~(size_t)63;
    cv->off = at + bytes;
    return cv->base ? cv->base + at : NULL;
}
#define CARVE_F(cv, count) ((float *)carve((cv), sizeof(float) * (size_t)(count)))
#define CARVE_I(cv, count) ((int32_t *)carve((cv), sizeof(int32_t) * (size_t)(count)))

static void carve_acts(gopt_policy *p, carver *cv, size_t N, size_t M) {
    const gopt_policy_config *c = &p->cfg;
    const size_t D = (size_t)c->hidden, Fh = D * (size_t)c->ffn_mult, S = (size_t)c->segment, H = (size_t)c->heads;
    policy_acts *A = &p->A;
    A->pred_ptr = CARVE_I(cv, N + 1);
    A->pred_idx = CARVE_I(cv, M);
    A->succ_ptr = CARVE_I(cv, N + 1);
    A->succ_idx = CARVE_I(cv, M);
    A->x0 = CARVE_F(cv, N * GOPT_POLICY_NFEAT);
    A->h0 = CARVE_F(cv, N * D);
    A->g = CARVE_F(cv, D);
    for (int l = 0; l < c->sage_layers; l++) {
        sage_acts *s = &A->sage[l];
        s->cat = CARVE_F(cv, N * 5 * D);
        s->a = CARVE_F(cv, N * D);
        s->r = CARVE_F(cv, N * D);
        s->mean = CARVE_F(cv, N);
        s->rstd = CARVE_F(cv, N);
        s->out = CARVE_F(cv, N * D);
    }
    for (int k = 0; k < p->n_attn; k++) {
        attn_acts *a = &A->attn[k];
        a->ms = CARVE_F(cv, D);
        a->mb = CARVE_F(cv, D);
        a->x1 = CARVE_F(cv, N * D);
        a->mean1 = CARVE_F(cv, N);
        a->rstd1 = CARVE_F(cv, N);
        a->qkv = CARVE_F(cv, N * 3 * D);
        a->att = CARVE_F(cv, N * H * 2 * S);
        a->ctx = CARVE_F(cv, N * D);
        a->h2 = CARVE_F(cv, N * D);
        a->x2 = CARVE_F(cv, N * D);
        a->mean2 = CARVE_F(cv, N);
        a->rstd2 = CARVE_F(cv, N);
        a->f1 = CARVE_F(cv, N * Fh);
        a->out = CARVE_F(cv, N * D);
    }
    for (int t = 0; t < GOPT_TASK_COUNT; t++) {
        head_acts *h = &A->head[t];
        h->x = CARVE_F(cv, N * D);
        h->mean = CARVE_F(cv, N);
        h->rstd = CARVE_F(cv, N);
        h->logits = CARVE_F(cv, N * p->width[t]);
    }
    A->unit_of = CARVE_I(cv, N);
    A->unit_rep = CARVE_I(cv, N);
    A->unit_size = CARVE_I(cv, N);
    A->unit_mask = (uint32_t *)carve(cv, sizeof(uint32_t) * N);
    A->coloc_unit = CARVE_I(cv, N);
    A->unit_ptr = CARVE_I(cv, N + 1);
    A->unit_idx = CARVE_I(cv, N);
    A->pooled = CARVE_F(cv, N * p->width[GOPT_TASK_PLACE]);
    A->vh = CARVE_F(cv, N * (size_t)c->cond_hidden);
    A->vh_unit = CARVE_F(cv, N * (size_t)c->cond_hidden);
    A->dev_rank = CARVE_I(cv, N);
    p->seg_scratch_fwd = CARVE_F(cv, ATTN_PARTS * GOPT_SEGATTN_SCRATCH(S, H, D));
}

static void carve_bwd(gopt_policy *p, carver *cv, size_t N) {
    const gopt_policy_config *c = &p->cfg;
    const size_t D = (size_t)c->hidden, Fh = D * (size_t)c->ffn_mult, S = (size_t)c->segment, H = (size_t)c->heads;
    policy_bwd *B = &p->B;
    B->da = CARVE_F(cv, N * D);
    B->db = CARVE_F(cv, N * D);
    B->dtmp = CARVE_F(cv, N * D);
    B->dh2 = CARVE_F(cv, N * D);
    B->dqkv_self = CARVE_F(cv, N * 3 * D);
    B->dqkv_mem = CARVE_F(cv, N * 3 * D);
    B->dff = CARVE_F(cv, N * Fh);
    B->dcat = CARVE_F(cv, N * 5 * D);
    for (int t = 0; t < GOPT_TASK_COUNT; t++) B->dlogits[t] = CARVE_F(cv, N * p->width[t]);
    B->dpooled = CARVE_F(cv, N * p->width[GOPT_TASK_PLACE]);
    B->dvh = CARVE_F(cv, N * (size_t)c->cond_hidden);
    B->dvh_unit = CARVE_F(cv, N * (size_t)c->cond_hidden);
    B->dg = CARVE_F(cv, D);
    B->dms = CARVE_F(cv, D);
    B->dmb = CARVE_F(cv, D);
    B->seg_scratch = CARVE_F(cv, ATTN_PARTS * GOPT_SEGATTN_SCRATCH(S, H, D));
    B->drelpos_parts = CARVE_F(cv, (ATTN_PARTS - 1) * H * (3 * S - 1));
}

gopt_status gopt_policy_reserve(gopt_policy *p, int32_t n_nodes, int32_t n_edges, int with_backward,
                                gopt_error *err) {
    if (n_nodes < 1 || n_edges < 0)
        return gopt_error_set(err, GOPT_EINVAL, "policy reserve: %d nodes / %d edges", (int)n_nodes, (int)n_edges);
    int grow = n_nodes > p->cap_n || n_edges > p->cap_m || !p->act_block;
    if (grow) {
        int32_t cn = n_nodes > p->cap_n ? n_nodes : p->cap_n, cm = n_edges > p->cap_m ? n_edges : p->cap_m;
        carver cv = {NULL, 0};
        carve_acts(p, &cv, (size_t)cn, (size_t)cm);
        void *blk = NULL;
        if (posix_memalign(&blk, 64, cv.off ? cv.off : 64))
            return gopt_error_set(err, GOPT_ENOMEM, "policy: cannot allocate %zu bytes of activations for %d nodes",
                                  cv.off, (int)cn);
        free(p->act_block);
        p->act_block = blk;
        p->act_bytes = cv.off;
        cv.base = blk;
        cv.off = 0;
        carve_acts(p, &cv, (size_t)cn, (size_t)cm);
        p->cap_n = cn;
        p->cap_m = cm;
        p->forwarded = 0;
        if (p->has_bwd) {
            free(p->bwd_block);
            p->bwd_block = NULL;
            p->bwd_bytes = 0;
            p->has_bwd = 0;
        }
    }
    if (with_backward && !p->has_bwd) {
        carver cv = {NULL, 0};
        carve_bwd(p, &cv, (size_t)p->cap_n);
        void *blk = NULL;
        if (posix_memalign(&blk, 64, cv.off))
            return gopt_error_set(err, GOPT_ENOMEM, "policy: cannot allocate %zu bytes of backward scratch", cv.off);
        p->bwd_block = blk;
        p->bwd_bytes = cv.off;
        cv.base = blk;
        cv.off = 0;
        carve_bwd(p, &cv, (size_t)p->cap_n);
        p->has_bwd = 1;
    }
    return GOPT_OK;
}

/* ---- forward -------------------------------------------------------------------- */
#define FWD_CHUNK 32 /* segments per chunk of the forward's row-local work */

/* ---- the segment attention on several threads ----
 * The segments of rows [r0, r0 + m) (r0 a multiple of the segment) are cut into ATTN_PARTS parts
 * of whole segments, each with its own scratch, run on p->threads threads (gopt_parallel_parts).
 * Forward: a segment writes only its own rows of ctx and att. Backward: a segment writes its own
 * rows of dqkv_self and the segment before's rows of dqkv_mem, again disjoint; only the
 * relative-position gradient is a sum over segments: part 0 adds to it directly, part j > 0
 * into its own block, added in part order afterwards. The cut does not depend on the thread
 * count, so neither do the results. */
typedef struct {
    gopt_policy *p;
    int k, n, r0, m, bwd;
    const float *qkv_mem;
} attn_job;

static void attn_part(void *ctx, int j) {
    const attn_job *J = ctx;
    gopt_policy *p = J->p;
    const gopt_policy_config *c = &p->cfg;
    const int S = c->segment, D = c->hidden, nseg = (J->m + S - 1) / S;
    const int lo = J->r0 + nseg * j / ATTN_PARTS * S, hi = J->r0 + nseg * (j + 1) / ATTN_PARTS * S;
    if (lo >= hi) return;
    const size_t scr = GOPT_SEGATTN_SCRATCH(S, c->heads, D) * (size_t)j;
    attn_acts *a = &p->A.attn[J->k];
    if (!J->bwd) {
        gopt_segattn_forward_rows(a->ctx, a->att, a->qkv, J->qkv_mem, p->P.attn[J->k].relpos, J->n, D, c->heads, S,
                                  p->seg_scratch_fwd + scr, lo, hi);
        return;
    }
    policy_bwd *B = &p->B;
    float *drel = j == 0 ? p->G.attn[J->k].relpos : B->drelpos_parts + (size_t)(j - 1) * c->heads * (3 * S - 1);
    gopt_segattn_backward_rows(B->dqkv_self, B->dqkv_mem, drel, B->dtmp, a->qkv, J->qkv_mem, a->att, J->n, D,
                               c->heads, S, B->seg_scratch + scr, lo, hi);
}

static void attn_parallel(gopt_policy *p, int k, const float *qkv_mem, int n, int r0, int m, int bwd) {
    const gopt_policy_config *c = &p->cfg;
    const size_t nrel = (size_t)c->heads * (3 * c->segment - 1);
    if (bwd) memset(p->B.drelpos_parts, 0, sizeof(float) * (ATTN_PARTS - 1) * nrel);
    attn_job J = {p, k, n, r0, m, bwd, qkv_mem};
    gopt_parallel_parts(ATTN_PARTS, p->threads, attn_part, &J);
    if (bwd) {
        float *g = p->G.attn[k].relpos;
        for (int j = 1; j < ATTN_PARTS; j++) {
            const float *x = p->B.drelpos_parts + (size_t)(j - 1) * nrel;
            for (size_t i = 0; i < nrel; i++) g[i] += x[i];
        }
    }
}

/* Rows [r0, r0 + m) of attention layer k (r0 a multiple of the segment): hin is the layer's
 * input (all rows). The attention reads keys and values from row r0 - segment on, which the
 * chunk before computed. */
static void attn_layer_rows(gopt_policy *p, int k, const float *hin, int n, int r0, int m) {
    const gopt_policy_config *c = &p->cfg;
    const int D = c->hidden, Fh = D * c->ffn_mult;
    const attn_params *w = &p->P.attn[k];
    attn_acts *a = &p->A.attn[k];
    const size_t o = (size_t)r0;
    gopt_layernorm_forward(a->x1 + o * D, a->mean1 + o, a->rstd1 + o, hin + o * D, w->ln1_w, w->ln1_b, a->ms, a->mb, m,
                           D);
    gopt_linear_forward(a->qkv + o * 3 * D, a->x1 + o * D, w->qkv_w, w->qkv_b, NULL, m, D, 3 * D);
    const float *qkv_mem = a->qkv;
    if (p->frozen_x1[k]) { /* test hook: memory from the snapshot, current weights */
        gopt_linear_forward(p->frozen_qkv[k] + o * 3 * D, p->frozen_x1[k] + o * D, w->qkv_w, w->qkv_b, NULL, m, D,
                            3 * D);
        qkv_mem = p->frozen_qkv[k];
    }
    attn_parallel(p, k, qkv_mem, n, r0, m, 0);
    gopt_linear_forward(a->h2 + o * D, a->ctx + o * D, w->proj_w, w->proj_b, hin + o * D, m, D, D);
    gopt_layernorm_forward(a->x2 + o * D, a->mean2 + o, a->rstd2 + o, a->h2 + o * D, w->ln2_w, w->ln2_b, NULL, NULL,
                           m, D);
    gopt_linear_forward(a->f1 + o * Fh, a->x2 + o * D, w->fc1_w, w->fc1_b, NULL, m, D, Fh);
    gopt_relu_forward(a->f1 + o * Fh, (size_t)m * Fh);
    gopt_linear_forward(a->out + o * D, a->f1 + o * Fh, w->fc2_w, w->fc2_b, a->h2 + o * D, m, Fh, D);
}

/* Rows [r0, r0 + m) of task head t (its layer's output h, all rows). */
static void head_rows(gopt_policy *p, int t, const float *h, int r0, int m) {
    const int D = p->cfg.hidden, W = p->width[t], Hc = p->cfg.cond_hidden;
    head_acts *ha = &p->A.head[t];
    const head_params *hp = &p->P.head[t];
    const size_t o = (size_t)r0;
    gopt_layernorm_forward(ha->x + o * D, ha->mean + o, ha->rstd + o, h + o * D, hp->ln_w, hp->ln_b, NULL, NULL, m, D);
    gopt_linear_forward(ha->logits + o * W, ha->x + o * D, hp->w, hp->b, NULL, m, D, W);
    if (t == GOPT_TASK_PLACE && Hc > 0) /* the scorer's node input */
        gopt_linear_forward(p->A.vh + o * Hc, ha->x + o * D, p->P.cond_v, NULL, NULL, m, D, Hc);
}

/* Flops of one attention layer over n rows: projections + scores and values over (self + memory) keys. */
static double attn_layer_flops(const gopt_policy_config *c, int n) {
    const int D = c->hidden, Fh = D * c->ffn_mult;
    double keys = 0.0;
    for (int s0 = 0; s0 < n; s0 += c->segment) {
        int sq = n - s0 < c->segment ? n - s0 : c->segment;
        keys += (double)sq * (sq + (s0 ? c->segment : 0));
    }
    return 2.0 * n * ((double)D * 3 * D + (double)D * D + 2.0 * D * Fh) + 4.0 * keys * D;
}

/* The network's forward on the CPU over p's current graph (A->x0 and the CSR lists filled). */
static void network_forward_cpu(gopt_policy *p) {
    const gopt_policy_config *c = &p->cfg;
    const int n = p->n, D = c->hidden;
    policy_acts *A = &p->A;
    gopt_linear_forward(A->h0, A->x0, p->P.in_w, p->P.in_b, NULL, n, GOPT_POLICY_NFEAT, D);
    const float *h = A->h0;
    /* Everything after the input layer runs in chunks of whole segments, so that a chunk's rows
     * go through the row-local steps while in cache: a GraphSAGE layer's chunk reads its input's
     * neighbour rows (any row: the layers run one after the other); the attention layers and
     * heads run chunk by chunk through all of them (a chunk of layer k reads the previous
     * segment's keys and values of layer k, from the chunk before). */
    const int ch = (p->fwd_chunk > 0 ? p->fwd_chunk : FWD_CHUNK) * c->segment;
    for (int l = 0; l < c->sage_layers; l++) {
        sage_acts *s = &A->sage[l];
        const sage_params *w = &p->P.sage[l];
        for (int r0 = 0; r0 < n; r0 += ch) {
            const int m = n - r0 < ch ? n - r0 : ch;
            const size_t o = (size_t)r0 * D;
            gopt_sage_aggregate_rows(s->cat + o * 5, h, A->pred_ptr + r0, A->pred_idx, A->succ_ptr + r0, A->succ_idx,
                                     r0, m, D);
            gopt_linear_forward(s->a + o, s->cat + o * 5, w->w, w->b, NULL, m, 5 * D, D);
            gopt_relu_forward(s->a + o, (size_t)m * D);
            for (size_t i = 0; i < (size_t)m * D; i++) s->r[o + i] = h[o + i] + s->a[o + i];
            gopt_layernorm_forward(s->out + o, s->mean + r0, s->rstd + r0, s->r + o, w->ln_w, w->ln_b, NULL, NULL, m,
                                   D);
        }
        h = s->out;
    }
    gopt_meanpool_forward(A->g, h, n, D);
    for (int k = 0; k < p->n_attn; k++) {
        const attn_params *w = &p->P.attn[k];
        gopt_film_forward(A->attn[k].ms, A->attn[k].mb, A->g, w->film_s, w->film_b, D);
    }
    for (int r0 = 0; r0 < n; r0 += ch) {
        const int m = n - r0 < ch ? n - r0 : ch;
        const float *hk = h;
        for (int k = 0; k < p->n_attn; k++) {
            attn_layer_rows(p, k, hk, n, r0, m);
            hk = A->attn[k].out;
            if (k >= c->attn_layers) head_rows(p, k - c->attn_layers, hk, r0, m);
        }
    }
}

gopt_status gopt_policy_forward(gopt_policy *p, const gopt_frozen *fz, const float *feat, int32_t ndev,
                                const uint16_t *dev_mask, gopt_error *err) {
    const gopt_policy_config *c = &p->cfg;
    p->forwarded = 0;
    if (!fz || fz->n < 1) return gopt_error_set(err, GOPT_EINVAL, "policy forward: empty graph");
    if (ndev < 1 || ndev > c->max_devices)
        return gopt_error_set(err, GOPT_EINVAL, "policy forward: ndev = %d is outside 1..%d (max_devices)", (int)ndev,
                              (int)c->max_devices);
    if (p->frozen_x1[0] && fz->n != p->frozen_n)
        return gopt_error_set(err, GOPT_EINVAL, "policy forward: memory frozen for %d nodes, graph has %d",
                              (int)p->frozen_n, (int)fz->n);
    if ((p->in_time || p->in_mem) && p->in_n != fz->n)
        return gopt_error_set(err, GOPT_EINVAL,
                              "policy forward: decoder inputs were set for %d nodes, graph has %d "
                              "(gopt_policy_set_decoder_inputs)",
                              (int)p->in_n, (int)fz->n);
    if (p->in_cap && p->in_ndev != ndev)
        return gopt_error_set(err, GOPT_EINVAL,
                              "policy forward: device capacities were set for %d devices, asked for %d "
                              "(gopt_policy_set_decoder_inputs)",
                              (int)p->in_ndev, (int)ndev);
    if ((p->hint_dev || p->hint_feat) && (p->hint_n != fz->n || p->hint_ndev != ndev))
        return gopt_error_set(err, GOPT_EINVAL,
                              "policy forward: hints were set for %d nodes on %d devices, graph has %d nodes on %d "
                              "(gopt_policy_set_hints)",
                              (int)p->hint_n, (int)p->hint_ndev, (int)fz->n, (int)ndev);
    gopt_status st = gopt_policy_reserve(p, fz->n, fz->m, 0, err);
    if (st) return st;
    const int n = fz->n, D = c->hidden;
    policy_acts *A = &p->A;
    p->fz = fz;
    p->n = n;
    p->ndev = ndev;

    /* neighbour lists and features in rank order */
    A->pred_ptr[0] = A->succ_ptr[0] = 0;
    for (int i = 0; i < n; i++) {
        int v = fz->topo[i];
        int np = A->pred_ptr[i], ns = A->succ_ptr[i];
        for (int e = fz->in_ptr[v]; e < fz->in_ptr[v + 1]; e++) A->pred_idx[np++] = fz->rank[fz->in_src[e]];
        for (int e = fz->out_ptr[v]; e < fz->out_ptr[v + 1]; e++) A->succ_idx[ns++] = fz->rank[fz->out_dst[e]];
        A->pred_ptr[i + 1] = np;
        A->succ_ptr[i + 1] = ns;
        memcpy(A->x0 + (size_t)i * GOPT_POLICY_NFEAT, feat + (size_t)v * GOPT_POLICY_NFEAT,
               sizeof(float) * GOPT_POLICY_NFEAT);
    }
    for (size_t i = 0; i < (size_t)n * GOPT_POLICY_NFEAT; i++)
        if (!isfinite(A->x0[i])) {
            int r = (int)(i / GOPT_POLICY_NFEAT);
            return gopt_error_set(err, GOPT_EINVAL, "policy forward: feature %d of node %d is not finite",
                                  (int)(i % GOPT_POLICY_NFEAT), (int)fz->topo[r]);
        }

    double flops = 2.0 * n * GOPT_POLICY_NFEAT * D + (double)c->sage_layers * 2.0 * n * 5 * D * D;
    for (int k = 0; k < p->n_attn; k++) {
        flops += attn_layer_flops(c, n);
        if (k >= c->attn_layers) {
            int t = k - c->attn_layers;
            flops += 2.0 * n * D * p->width[t];
            if (t == GOPT_TASK_PLACE && c->cond_hidden > 0) flops += 2.0 * n * D * c->cond_hidden;
        }
    }
    if (p->dev) {
        if (p->frozen_x1[0])
            return gopt_error_set(err, GOPT_EINVAL, "policy forward: frozen memory states (a test hook) are CPU-only");
        if ((st = policy_dev_forward(p, err))) return st;
    } else
        network_forward_cpu(p);
    p->fwd_flops = flops;
    /* backward: two GEMMs per forward GEMM, minus the input layer's dx */
    p->bwd_flops = 2.0 * flops - 2.0 * n * GOPT_POLICY_NFEAT * D;
    st = policy_decode_prepare(p, dev_mask, err);
    if (st) return st;
    p->forwarded = 1;
    return GOPT_OK;
}

gopt_status gopt_policy_logits(const gopt_policy *p, gopt_task t, float *out, gopt_error *err) {
    if (!p->forwarded) return gopt_error_set(err, GOPT_EINVAL, "policy logits: no forward pass to read");
    if ((int)t < 0 || t >= GOPT_TASK_COUNT) return gopt_error_set(err, GOPT_EINVAL, "policy logits: task %d", (int)t);
    int w = p->width[t];
    for (int i = 0; i < p->n; i++)
        memcpy(out + (size_t)p->fz->topo[i] * w, p->A.head[t].logits + (size_t)i * w, sizeof(float) * (size_t)w);
    return GOPT_OK;
}

/* ---- backward ------------------------------------------------------------------- */
/* Attention layer k's backward (task layer: its head's first), in chunks of whole segments from
 * the last: dout: gradient of the layer's output (the head's part is added to it); din:
 * receives (overwritten). A chunk's attention sends gradient into the previous segment's keys
 * and values (the chunk before, done next), so dqkv_mem rows are zeroed by the first chunk
 * that touches them. The layer-norm modulation's gradient goes to the graph vector once, at
 * the end. */
static void attn_layer_backward(gopt_policy *p, int k, const float *hin, float *dout, float *din, int n) {
    const gopt_policy_config *c = &p->cfg;
    const int D = c->hidden, Fh = D * c->ffn_mult, S = c->segment, D3 = 3 * D;
    const attn_params *w = &p->P.attn[k];
    attn_params *g = &p->G.attn[k];
    attn_acts *a = &p->A.attn[k];
    policy_bwd *B = &p->B;
    const int ch = (p->fwd_chunk > 0 ? p->fwd_chunk : FWD_CHUNK) * S, nch = (n + ch - 1) / ch;
    const float *qkv_mem = p->frozen_x1[k] ? p->frozen_qkv[k] : a->qkv;
    memset(B->dms, 0, sizeof(float) * D);
    memset(B->dmb, 0, sizeof(float) * D);
    for (int ci = nch - 1; ci >= 0; ci--) {
        const int r0 = ci * ch, m = n - r0 < ch ? n - r0 : ch;
        const size_t o = (size_t)r0, md = (size_t)m * D;
        if (k >= c->attn_layers) { /* the head reads this layer's output */
            const int t = k - c->attn_layers, W = p->width[t], Hc = c->cond_hidden;
            head_acts *ha = &p->A.head[t];
            gopt_linear_backward_set(B->dtmp + o * D, p->G.head[t].w, p->G.head[t].b, B->dlogits[t] + o * W,
                                     ha->x + o * D, p->P.head[t].w, m, D, W);
            if (t == GOPT_TASK_PLACE && Hc > 0)
                gopt_linear_backward(B->dtmp + o * D, p->G.cond_v, NULL, B->dvh + o * Hc, ha->x + o * D, p->P.cond_v,
                                     m, D, Hc);
            gopt_layernorm_backward(dout + o * D, p->G.head[t].ln_w, p->G.head[t].ln_b, NULL, NULL, B->dtmp + o * D,
                                    a->out + o * D, p->P.head[t].ln_w, NULL, ha->mean + o, ha->rstd + o, m, D);
        }
        /* out = h2 + fc2(relu(fc1(ln2(h2)))) */
        memcpy(B->dh2 + o * D, dout + o * D, sizeof(float) * md);
        gopt_linear_backward_set(B->dff + o * Fh, g->fc2_w, g->fc2_b, dout + o * D, a->f1 + o * Fh, w->fc2_w, m, Fh,
                                 D);
        gopt_relu_backward(B->dff + o * Fh, a->f1 + o * Fh, (size_t)m * Fh);
        gopt_linear_backward_set(B->dtmp + o * D, g->fc1_w, g->fc1_b, B->dff + o * Fh, a->x2 + o * D, w->fc1_w, m, D,
                                 Fh);
        gopt_layernorm_backward(B->dh2 + o * D, g->ln2_w, g->ln2_b, NULL, NULL, B->dtmp + o * D, a->h2 + o * D,
                                w->ln2_w, NULL, a->mean2 + o, a->rstd2 + o, m, D);
        /* h2 = hin + proj(segattn(qkv(ln1(hin)))) */
        memcpy(din + o * D, B->dh2 + o * D, sizeof(float) * md);
        gopt_linear_backward_set(B->dtmp + o * D, g->proj_w, g->proj_b, B->dh2 + o * D, a->ctx + o * D, w->proj_w, m,
                                 D, D);
        /* zero what this chunk is the first to touch: its own rows' self part; the memory part of
         * the segment before it and of its rows but the last segment's (the chunk after wrote
         * that one), all of its rows when it is the last chunk */
        const int z0 = r0 - S > 0 ? r0 - S : 0, z1 = ci == nch - 1 ? r0 + m : r0 + m - S;
        memset(B->dqkv_self + o * D3, 0, sizeof(float) * (size_t)m * D3);
        memset(B->dqkv_mem + (size_t)z0 * D3, 0, sizeof(float) * (size_t)(z1 - z0) * D3);
        attn_parallel(p, k, qkv_mem, n, r0, m, 1);
        float *dqs = B->dqkv_self + o * D3, *dqm = B->dqkv_mem + o * D3;
        if (p->frozen_x1[k]) {
            gopt_linear_backward(NULL, g->qkv_w, g->qkv_b, dqm, p->frozen_x1[k] + o * D, w->qkv_w, m, D, D3);
            gopt_linear_backward_set(B->dtmp + o * D, g->qkv_w, g->qkv_b, dqs, a->x1 + o * D, w->qkv_w, m, D, D3);
        } else {
            /* the projections see both uses of a row; the row's state gets the
             * memory part only when memory_grad is on (else stop-gradient) */
            for (size_t i = 0; i < (size_t)m * D3; i++) dqm[i] += dqs[i];
            gopt_linear_backward(NULL, g->qkv_w, g->qkv_b, dqm, a->x1 + o * D, w->qkv_w, m, D, D3);
            gopt_linear_backward_set(B->dtmp + o * D, NULL, NULL, c->memory_grad ? dqm : dqs, a->x1 + o * D, w->qkv_w,
                                     m, D, D3);
        }
        gopt_layernorm_backward(din + o * D, g->ln1_w, g->ln1_b, B->dms, B->dmb, B->dtmp + o * D, hin + o * D, w->ln1_w,
                                a->ms, a->mean1 + o, a->rstd1 + o, m, D);
    }
    gopt_film_backward(B->dg, g->film_s, g->film_b, B->dms, B->dmb, p->A.g, w->film_s, w->film_b, D);
}

gopt_status policy_network_backward(gopt_policy *p, gopt_error *err) {
    if (p->dev) return policy_dev_backward(p, err);
    const gopt_policy_config *c = &p->cfg;
    const int n = p->n, D = c->hidden;
    const size_t nd = (size_t)n * D;
    policy_acts *A = &p->A;
    policy_bwd *B = &p->B;
    float *dcur = B->da, *dnext = B->db;
    memset(dcur, 0, sizeof(float) * nd);
    memset(B->dg, 0, sizeof(float) * D);
    const float *h_sage = c->sage_layers ? A->sage[c->sage_layers - 1].out : A->h0;
    for (int k = p->n_attn - 1; k >= 0; k--) {
        const float *hin = k ? A->attn[k - 1].out : h_sage;
        attn_layer_backward(p, k, hin, dcur, dnext, n);
        float *t = dcur;
        dcur = dnext;
        dnext = t;
    }
    gopt_meanpool_backward(dcur, B->dg, n, D);
    for (int l = c->sage_layers - 1; l >= 0; l--) {
        sage_acts *s = &A->sage[l];
        const sage_params *w = &p->P.sage[l];
        sage_params *g = &p->G.sage[l];
        /* out = LN(hin + relu(cat W + b)) */
        memset(B->dtmp, 0, sizeof(float) * nd);
        gopt_layernorm_backward(B->dtmp, g->ln_w, g->ln_b, NULL, NULL, dcur, s->r, w->ln_w, NULL, s->mean, s->rstd, n,
                                D);
        memcpy(dnext, B->dtmp, sizeof(float) * nd);
        gopt_relu_backward(B->dtmp, s->a, nd);
        gopt_linear_backward_set(B->dcat, g->w, g->b, B->dtmp, s->cat, w->w, n, 5 * D, D);
        gopt_sage_aggregate_backward(dnext, B->dcat, s->cat, l ? A->sage[l - 1].out : A->h0, A->pred_ptr,
                                     A->pred_idx, A->succ_ptr, A->succ_idx, n, D);
        float *t = dcur;
        dcur = dnext;
        dnext = t;
    }
    gopt_linear_backward(NULL, p->G.in_w, p->G.in_b, dcur, A->x0, p->P.in_w, n, GOPT_POLICY_NFEAT, D);
    return GOPT_OK;
}
