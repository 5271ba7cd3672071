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
#include <pthread.h>
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
    for (int t = 0; t < GOPT_TASK_COUNT; t++) p->task_inv_t[t] = 1.0f;
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
    free(p->chunk_done);
    free(p->chunk_grad);
    free(p->wgrad);
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

gopt_status gopt_policy_set_task_temperature(gopt_policy *p, int task, float temperature, gopt_error *err) {
    if (task < 0 || task >= GOPT_TASK_COUNT)
        return gopt_error_set(err, GOPT_EINVAL, "policy: task %d is not one of the %d tasks", task, GOPT_TASK_COUNT);
    if (!(temperature >= 0.05f && temperature <= 100.0f))
        return gopt_error_set(err, GOPT_EINVAL, "policy: task temperature %g is outside 0.05..100", (double)temperature);
    p->task_inv_t[task] = 1.0f / temperature;
    return GOPT_OK;
}

float gopt_policy_task_temperature(const gopt_policy *p, int task) {
    return task >= 0 && task < GOPT_TASK_COUNT ? 1.0f / p->task_inv_t[task] : 1.0f;
}

gopt_status gopt_policy_set_train_heads(gopt_policy *p, int on, gopt_error *err) {
    if (on != 0 && on != 1) return gopt_error_set(err, GOPT_EINVAL, "policy: train-heads flag %d is not 0 or 1", on);
    p->heads_only = on;
    p->trunk_ok = 0;
    return GOPT_OK;
}

int gopt_policy_train_heads(const gopt_policy *p) { return p->heads_only; }

/* Offset of the first parameter that trains with gopt_policy_set_train_heads (head_*, then cond.*
 * close the layout). */
size_t policy_heads_offset(const gopt_policy *p) { return (size_t)(p->P.head[0].ln_w - p->params); }

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
    if (c->sage_layers) B->dagg_parts = CARVE_F(cv, (AGG_PARTS - 1) * N * D);
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
        p->trunk_ok = 0;
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
#define FWD_CHUNK 32 /* segments per chunk of the network's row-local work */

/* OpenBLAS runs on one thread inside the network: the policy's threads run its chunks, whose
 * products are small, and two pools on the same cores contend (OpenBLAS's idle threads spin on
 * sched_yield). It also makes the results independent of OpenBLAS's thread count, which they
 * are not otherwise (measured: OPENBLAS_NUM_THREADS=2 changes gradients in the last bits).
 * Declared here: cblas.h declares these on some versions only. */
int openblas_get_num_threads(void);
void openblas_set_num_threads(int num_threads);

static int blas_single_begin(void) {
    int t = openblas_get_num_threads();
    if (t > 1) openblas_set_num_threads(1);
    return t;
}

static void blas_single_end(int saved) {
    if (saved > 1) openblas_set_num_threads(saved);
}

gopt_status policy_grow(void **buf, size_t *cap, size_t need, size_t elem, const char *what, gopt_error *err) {
    if (need <= *cap) return GOPT_OK;
    void *q = realloc(*buf, elem * need);
    if (!q) return gopt_error_set(err, GOPT_ENOMEM, "policy: out of memory for %s (%zu bytes)", what, elem * need);
    *buf = q;
    *cap = need;
    return GOPT_OK;
}

/* ---- the network's chunks on the policy's threads ----
 * After the input layer, the forward and the backward work in chunks of FWD_CHUNK whole segments
 * (1,024 rows), so that a chunk's rows stay in cache from one step to the next. Chunks are
 * taken in order by up to min(threads, ATTN_PARTS) workers; a chunk's work is the same whichever
 * worker does it, so results do not depend on the thread count.
 *  - A GraphSAGE layer's chunks are independent (they read the layer before, all of it).
 *  - The attention layers and heads run chunk by chunk through all layers. A chunk of layer k
 *    reads the previous segment's keys and values of layer k: it marks its own projections done
 *    and waits for the chunk before's (a wavefront; the smallest chunk in progress never waits).
 *  - The backward of an attention layer runs from the last chunk: a chunk's attention sends
 *    gradient into the chunk before's last segment, so a chunk waits for the chunk after's
 *    attention before it reads its own key/value gradients.
 *  - Sums over rows are never shared between chunks: each chunk's small gradients (layer norms,
 *    modulation, relative positions) go to its own block, added in chunk order afterwards; the
 *    weight gradients of the products are products over all rows afterwards, in WGRAD_PARTS row
 *    parts (wgrad_run). */
typedef struct chunk_job chunk_job;
struct chunk_job {
    gopt_policy *p;
    void (*run)(chunk_job *J, int c, int slot);
    int n, ch, nch, reverse; /* rows, rows per chunk, chunks; reverse: take the last first */
    int next;                /* chunks taken */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int *done; /* flags, indexed by the job */
    /* the layer's arguments */
    int l, k;
    const float *hin;
    float *dout, *din;
};

static void chunk_worker(void *ctx, int slot) {
    chunk_job *J = ctx;
    for (;;) {
        pthread_mutex_lock(&J->mu);
        int i = J->next++;
        pthread_mutex_unlock(&J->mu);
        if (i >= J->nch) return;
        J->run(J, J->reverse ? J->nch - 1 - i : i, slot);
    }
}

static void chunk_mark(chunk_job *J, int flag) {
    pthread_mutex_lock(&J->mu);
    J->done[flag] = 1;
    pthread_cond_broadcast(&J->cv);
    pthread_mutex_unlock(&J->mu);
}

static void chunk_wait(chunk_job *J, int flag) {
    pthread_mutex_lock(&J->mu);
    while (!J->done[flag]) pthread_cond_wait(&J->cv, &J->mu);
    pthread_mutex_unlock(&J->mu);
}

static int chunk_rows(const gopt_policy *p) { return (p->fwd_chunk > 0 ? p->fwd_chunk : FWD_CHUNK) * p->cfg.segment; }

static int chunk_count(const gopt_policy *p) { return (p->n + chunk_rows(p) - 1) / chunk_rows(p); }

/* Rows of chunk c of J (the last may be short); it starts at row c * J->ch. */
static int chunk_len(const chunk_job *J, int c) { return J->n - c * J->ch < J->ch ? J->n - c * J->ch : J->ch; }

/* dst += x, n floats (the blocks' sums in a fixed order). */
static void vec_add(float *dst, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] += x[i];
}

/* Run J over its chunks; flags: how many done flags it uses (zeroed). */
static gopt_status chunks_run(chunk_job *J, int flags, gopt_error *err) {
    gopt_policy *p = J->p;
    gopt_status st;
    if (flags > 0) {
        if ((st = policy_grow((void **)&p->chunk_done, &p->chunk_done_cap, (size_t)flags, sizeof(int),
                              "the network's chunk flags", err)))
            return st;
        memset(p->chunk_done, 0, sizeof(int) * (size_t)flags);
    }
    J->done = p->chunk_done;
    J->next = 0;
    pthread_mutex_init(&J->mu, NULL);
    pthread_cond_init(&J->cv, NULL);
    int T = p->threads < ATTN_PARTS ? p->threads : ATTN_PARTS;
    if (T > J->nch) T = J->nch;
    gopt_parallel_parts(T, T, chunk_worker, J);
    pthread_cond_destroy(&J->cv);
    pthread_mutex_destroy(&J->mu);
    return GOPT_OK;
}

static void chunk_job_init(chunk_job *J, gopt_policy *p, void (*run)(chunk_job *, int, int), int reverse) {
    memset(J, 0, sizeof *J);
    J->p = p;
    J->run = run;
    J->n = p->n;
    J->ch = chunk_rows(p);
    J->nch = chunk_count(p);
    J->reverse = reverse;
}

/* ---- the segment attention of one chunk ----
 * The chunk's segments are cut into ATTN_PARTS parts of whole segments. A part of the forward
 * writes its own rows of ctx and att; a part of the backward writes its own rows of dqkv_self and
 * the segment before's rows of dqkv_mem (disjoint) and its relative-position gradient to its own
 * block. The parts run one after the other in the chunk's worker (scratch `slot`), or on the
 * policy's threads (slot -1: part j uses scratch j) when the graph is a single chunk. Either way
 * the same sums. */
typedef struct {
    gopt_policy *p;
    int k, n, r0, m, bwd, slot;
    const float *qkv_mem;
    float *drel; /* backward: ATTN_PARTS blocks of H (3S - 1) */
} attn_job;

static void attn_part(void *ctx, int j) {
    const attn_job *J = ctx;
    gopt_policy *p = J->p;
    const gopt_policy_config *c = &p->cfg;
    const int S = c->segment, D = c->hidden, nseg = (J->m + S - 1) / S;
    const int lo = J->r0 + nseg * j / ATTN_PARTS * S, hi = J->r0 + nseg * (j + 1) / ATTN_PARTS * S;
    if (lo >= hi) return;
    const size_t scr = GOPT_SEGATTN_SCRATCH(S, c->heads, D) * (size_t)(J->slot < 0 ? j : J->slot);
    attn_acts *a = &p->A.attn[J->k];
    if (!J->bwd) {
        gopt_segattn_forward_rows(a->ctx, a->att, a->qkv, J->qkv_mem, p->P.attn[J->k].relpos, J->n, D, c->heads, S,
                                  p->seg_scratch_fwd + scr, lo, hi);
        return;
    }
    policy_bwd *B = &p->B;
    gopt_segattn_backward_rows(B->dqkv_self, B->dqkv_mem, J->drel + (size_t)j * c->heads * (3 * S - 1), B->dtmp,
                               a->qkv, J->qkv_mem, a->att, J->n, D, c->heads, S, B->seg_scratch + scr, lo, hi);
}

static void attn_chunk(gopt_policy *p, int k, const float *qkv_mem, int nch, int r0, int m, int slot, float *drel) {
    attn_job J = {p, k, p->n, r0, m, drel != NULL, nch == 1 ? -1 : slot, qkv_mem, drel};
    if (nch == 1)
        gopt_parallel_parts(ATTN_PARTS, p->threads, attn_part, &J);
    else
        for (int j = 0; j < ATTN_PARTS; j++) attn_part(&J, j);
}

/* Rows [r0, r0 + m) of attention layer k (r0 a multiple of the segment): hin is the layer's
 * input (all rows). The attention reads keys and values from row r0 - segment on, which the
 * chunk before computed (its flag k * nch + c - 1). */
static void attn_layer_rows(chunk_job *J, int k, const float *hin, int ci, int slot) {
    gopt_policy *p = J->p;
    const gopt_policy_config *c = &p->cfg;
    const int D = c->hidden, Fh = D * c->ffn_mult, r0 = ci * J->ch, m = chunk_len(J, ci);
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
    chunk_mark(J, k * J->nch + ci);
    if (ci > 0) chunk_wait(J, k * J->nch + ci - 1);
    attn_chunk(p, k, qkv_mem, J->nch, r0, m, slot, NULL);
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

/* Chunk c of GraphSAGE layer J->l (input J->hin, all rows). */
static void sage_fwd_chunk(chunk_job *J, int c, int slot) {
    (void)slot;
    gopt_policy *p = J->p;
    const int D = p->cfg.hidden, r0 = c * J->ch, m = chunk_len(J, c);
    policy_acts *A = &p->A;
    sage_acts *s = &A->sage[J->l];
    const sage_params *w = &p->P.sage[J->l];
    const float *h = J->hin;
    const size_t o = (size_t)r0 * D;
    gopt_sage_aggregate_rows(s->cat + o * 5, h, A->pred_ptr + r0, A->pred_idx, A->succ_ptr + r0, A->succ_idx, r0, m,
                             D);
    gopt_linear_forward(s->a + o, s->cat + o * 5, w->w, w->b, NULL, m, 5 * D, D);
    gopt_relu_forward(s->a + o, (size_t)m * D);
    for (size_t i = 0; i < (size_t)m * D; i++) s->r[o + i] = h[o + i] + s->a[o + i];
    gopt_layernorm_forward(s->out + o, s->mean + r0, s->rstd + r0, s->r + o, w->ln_w, w->ln_b, NULL, NULL, m, D);
}

/* Chunk c through every attention layer and head. */
static void attn_fwd_chunk(chunk_job *J, int c, int slot) {
    gopt_policy *p = J->p;
    const int r0 = c * J->ch, m = chunk_len(J, c);
    const float *hk = J->hin;
    for (int k = 0; k < p->n_attn; k++) {
        attn_layer_rows(J, k, hk, c, slot);
        hk = p->A.attn[k].out;
        if (k >= p->cfg.attn_layers) head_rows(p, k - p->cfg.attn_layers, hk, r0, m);
    }
}

/* The heads alone over the trunk's outputs of the last forward (gopt_policy_set_train_heads), in
 * the full forward's row chunks (attn_fwd_chunk): a GEMM's rows can round differently with another
 * row count, and a reused trunk must give the logits a full forward gives (a resumed run, whose
 * first forward is a full one, continues the uninterrupted run bit for bit) */
static void heads_forward_cpu(gopt_policy *p) {
    const int blas = blas_single_begin();
    chunk_job J;
    chunk_job_init(&J, p, NULL, 0);
    for (int t = 0; t < GOPT_TASK_COUNT; t++)
        for (int c = 0; c < J.nch; c++)
            head_rows(p, t, p->A.attn[p->cfg.attn_layers + t].out, c * J.ch, chunk_len(&J, c));
    blas_single_end(blas);
}

/* The network's forward on the CPU over p's current graph (A->x0 and the CSR lists filled). */
static gopt_status network_forward_cpu(gopt_policy *p, gopt_error *err) {
    const gopt_policy_config *c = &p->cfg;
    const int n = p->n, D = c->hidden;
    policy_acts *A = &p->A;
    const int blas = blas_single_begin();
    gopt_status st = GOPT_OK;
    gopt_linear_forward(A->h0, A->x0, p->P.in_w, p->P.in_b, NULL, n, GOPT_POLICY_NFEAT, D);
    const float *h = A->h0;
    chunk_job J;
    for (int l = 0; l < c->sage_layers; l++) {
        chunk_job_init(&J, p, sage_fwd_chunk, 0);
        J.l = l;
        J.hin = h;
        if ((st = chunks_run(&J, 0, err))) goto out;
        h = A->sage[l].out;
    }
    gopt_meanpool_forward(A->g, h, n, D);
    for (int k = 0; k < p->n_attn; k++) {
        const attn_params *w = &p->P.attn[k];
        gopt_film_forward(A->attn[k].ms, A->attn[k].mb, A->g, w->film_s, w->film_b, D);
    }
    chunk_job_init(&J, p, attn_fwd_chunk, 0);
    J.hin = h;
    st = chunks_run(&J, p->n_attn * J.nch, err);
out:
    blas_single_end(blas);
    return st;
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
    /* train-heads: the trunk's outputs stand if the graph and its features are the last forward's */
    int reuse = p->heads_only && p->trunk_ok && !p->dev && !p->frozen_x1[0] && fz == p->trunk_fz && n == p->n &&
                fz->m == p->trunk_m;
    p->trunk_ok = 0;
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
        float *xr = A->x0 + (size_t)i * GOPT_POLICY_NFEAT;
        const float *fr = feat + (size_t)v * GOPT_POLICY_NFEAT;
        if (reuse && memcmp(xr, fr, sizeof(float) * GOPT_POLICY_NFEAT) != 0) reuse = 0;
        memcpy(xr, fr, sizeof(float) * GOPT_POLICY_NFEAT);
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
    } else if (reuse) {
        heads_forward_cpu(p);
        flops = 0.0;
        for (int t = 0; t < GOPT_TASK_COUNT; t++) flops += 2.0 * n * D * p->width[t];
        if (c->cond_hidden > 0) flops += 2.0 * n * D * c->cond_hidden;
    } else if ((st = network_forward_cpu(p, err)))
        return st;
    if (!p->dev && !p->frozen_x1[0] && p->heads_only) {
        p->trunk_ok = 1;
        p->trunk_fz = fz;
        p->trunk_m = fz->m;
    }
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
/* The weight gradients of a layer's products, after its chunks: dw += in^T dout and db += the
 * column sums of dout over all n rows, in WGRAD_PARTS fixed row parts on the policy's threads,
 * each part into its own block, the blocks added in part order. */
typedef struct {
    float *dw, *db;
    const float *dout, *in;
    int in_dim, out_dim;
} wgrad_job;

typedef struct {
    gopt_policy *p;
    const wgrad_job *jobs;
    int njobs, n;
    size_t per_part;
} wgrad_ctx;

static void wgrad_part(void *ctx, int j) {
    const wgrad_ctx *W = ctx;
    const int lo = (int)((int64_t)W->n * j / WGRAD_PARTS), hi = (int)((int64_t)W->n * (j + 1) / WGRAD_PARTS);
    float *buf = W->p->wgrad + W->per_part * (size_t)j;
    for (int q = 0; q < W->njobs; q++) {
        const wgrad_job *jb = &W->jobs[q];
        const size_t nw = (size_t)jb->in_dim * jb->out_dim, nb = jb->db ? (size_t)jb->out_dim : 0;
        memset(buf, 0, sizeof(float) * (nw + nb));
        if (hi > lo)
            gopt_linear_backward(NULL, buf, jb->db ? buf + nw : NULL, jb->dout + (size_t)lo * jb->out_dim,
                                 jb->in + (size_t)lo * jb->in_dim, NULL, hi - lo, jb->in_dim, jb->out_dim);
        buf += nw + nb;
    }
}

static gopt_status wgrad_run(gopt_policy *p, const wgrad_job *jobs, int njobs, gopt_error *err) {
    wgrad_ctx W = {p, jobs, njobs, p->n, 0};
    for (int q = 0; q < njobs; q++)
        W.per_part += (size_t)jobs[q].in_dim * jobs[q].out_dim + (jobs[q].db ? (size_t)jobs[q].out_dim : 0);
    gopt_status st = policy_grow((void **)&p->wgrad, &p->wgrad_cap, W.per_part * WGRAD_PARTS, sizeof(float),
                                 "the backward's weight gradients", err);
    if (st) return st;
    gopt_parallel_parts(WGRAD_PARTS, p->threads, wgrad_part, &W);
    for (int j = 0; j < WGRAD_PARTS; j++) {
        const float *buf = p->wgrad + W.per_part * (size_t)j;
        for (int q = 0; q < njobs; q++) {
            const size_t nw = (size_t)jobs[q].in_dim * jobs[q].out_dim;
            vec_add(jobs[q].dw, buf, nw);
            buf += nw;
            if (!jobs[q].db) continue;
            vec_add(jobs[q].db, buf, (size_t)jobs[q].out_dim);
            buf += jobs[q].out_dim;
        }
    }
    return GOPT_OK;
}

/* A chunk's block of small gradients: ATTN_PARTS relative-position blocks, then
 * CHUNK_SMALL vectors of D (layer norms' weights and biases, the modulation's). */
enum { CG_LN1_W, CG_LN1_B, CG_LN2_W, CG_LN2_B, CG_HLN_W, CG_HLN_B, CG_MS, CG_MB, CHUNK_SMALL };

static size_t chunk_block(const gopt_policy *p) {
    return (size_t)ATTN_PARTS * p->cfg.heads * (3 * p->cfg.segment - 1) + (size_t)CHUNK_SMALL * p->cfg.hidden;
}

static float *chunk_small(gopt_policy *p, int c, int which) {
    return p->chunk_grad + chunk_block(p) * (size_t)c + (size_t)ATTN_PARTS * p->cfg.heads * (3 * p->cfg.segment - 1) +
           (size_t)which * p->cfg.hidden;
}

/* dst += the chunks' vector `which` (CHUNK_SMALL index; -1: the relative-position blocks, of
 * count floats each), in chunk order. */
static void chunk_reduce(gopt_policy *p, int nch, int which, float *dst, size_t count) {
    const size_t blk = chunk_block(p);
    for (int c = 0; c < nch; c++) {
        if (which >= 0)
            vec_add(dst, chunk_small(p, c, which), count);
        else
            for (int j = 0; j < ATTN_PARTS; j++) vec_add(dst, p->chunk_grad + blk * (size_t)c + (size_t)j * count, count);
    }
}

/* Chunk c of attention layer J->k's backward (task layer: its head's first): J->dout the
 * gradient of the layer's output (the head's part is added to it); J->din receives its input's
 * (overwritten). Data gradients only: the weight gradients come after the chunks (wgrad_run). */
static void attn_bwd_chunk(chunk_job *J, int c, int slot) {
    gopt_policy *p = J->p;
    const gopt_policy_config *cf = &p->cfg;
    const int k = J->k, D = cf->hidden, Fh = D * cf->ffn_mult, S = cf->segment, D3 = 3 * D;
    const int r0 = c * J->ch, m = chunk_len(J, c);
    const attn_params *w = &p->P.attn[k];
    attn_acts *a = &p->A.attn[k];
    policy_bwd *B = &p->B;
    float *dout = J->dout, *din = J->din;
    const size_t o = (size_t)r0, md = (size_t)m * D;
    float *blk = p->chunk_grad + chunk_block(p) * (size_t)c;
    memset(blk, 0, sizeof(float) * chunk_block(p));
    if (k >= cf->attn_layers) { /* the head reads this layer's output */
        const int t = k - cf->attn_layers, W = p->width[t], Hc = cf->cond_hidden;
        head_acts *ha = &p->A.head[t];
        gopt_linear_backward_set(B->dtmp + o * D, NULL, NULL, B->dlogits[t] + o * W, ha->x + o * D, p->P.head[t].w, m,
                                 D, W);
        if (t == GOPT_TASK_PLACE && Hc > 0)
            gopt_linear_backward(B->dtmp + o * D, NULL, NULL, B->dvh + o * Hc, ha->x + o * D, p->P.cond_v, m, D, Hc);
        gopt_layernorm_backward(dout + o * D, chunk_small(p, c, CG_HLN_W), chunk_small(p, c, CG_HLN_B), NULL, NULL,
                                B->dtmp + o * D, a->out + o * D, p->P.head[t].ln_w, NULL, ha->mean + o, ha->rstd + o,
                                m, D);
    }
    /* out = h2 + fc2(relu(fc1(ln2(h2)))) */
    memcpy(B->dh2 + o * D, dout + o * D, sizeof(float) * md);
    gopt_linear_backward_set(B->dff + o * Fh, NULL, NULL, dout + o * D, a->f1 + o * Fh, w->fc2_w, m, Fh, D);
    gopt_relu_backward(B->dff + o * Fh, a->f1 + o * Fh, (size_t)m * Fh);
    gopt_linear_backward_set(B->dtmp + o * D, NULL, NULL, B->dff + o * Fh, a->x2 + o * D, w->fc1_w, m, D, Fh);
    gopt_layernorm_backward(B->dh2 + o * D, chunk_small(p, c, CG_LN2_W), chunk_small(p, c, CG_LN2_B), NULL, NULL,
                            B->dtmp + o * D, a->h2 + o * D, w->ln2_w, NULL, a->mean2 + o, a->rstd2 + o, m, D);
    /* h2 = hin + proj(segattn(qkv(ln1(hin)))) */
    memcpy(din + o * D, B->dh2 + o * D, sizeof(float) * md);
    gopt_linear_backward_set(B->dtmp + o * D, NULL, NULL, B->dh2 + o * D, a->ctx + o * D, w->proj_w, m, D, D);
    /* zero what only this chunk's attention writes: its own rows' self part; the memory part of
     * the segment before it and of its rows but the last segment's (the chunk after writes that
     * one), all of its rows when it is the last chunk */
    const int z0 = r0 - S > 0 ? r0 - S : 0, z1 = c == J->nch - 1 ? r0 + m : r0 + m - S;
    memset(B->dqkv_self + o * D3, 0, sizeof(float) * (size_t)m * D3);
    memset(B->dqkv_mem + (size_t)z0 * D3, 0, sizeof(float) * (size_t)(z1 - z0) * D3);
    const float *qkv_mem = p->frozen_x1[k] ? p->frozen_qkv[k] : a->qkv;
    attn_chunk(p, k, qkv_mem, J->nch, r0, m, slot, blk);
    chunk_mark(J, c);
    if (c < J->nch - 1) chunk_wait(J, c + 1); /* its attention wrote our last segment's memory part */
    float *dqs = B->dqkv_self + o * D3, *dqm = B->dqkv_mem + o * D3;
    if (p->frozen_x1[k])
        gopt_linear_backward_set(B->dtmp + o * D, NULL, NULL, dqs, a->x1 + o * D, w->qkv_w, m, D, D3);
    else {
        /* the projections see both uses of a row; the row's state gets the memory part only
         * when memory_grad is on (else stop-gradient) */
        for (size_t i = 0; i < (size_t)m * D3; i++) dqm[i] += dqs[i];
        gopt_linear_backward_set(B->dtmp + o * D, NULL, NULL, cf->memory_grad ? dqm : dqs, a->x1 + o * D, w->qkv_w, m,
                                 D, D3);
    }
    gopt_layernorm_backward(din + o * D, chunk_small(p, c, CG_LN1_W), chunk_small(p, c, CG_LN1_B),
                            chunk_small(p, c, CG_MS), chunk_small(p, c, CG_MB), B->dtmp + o * D, J->hin + o * D,
                            w->ln1_w, a->ms, a->mean1 + o, a->rstd1 + o, m, D);
}

/* Attention layer k's backward: its chunks, then its weight gradients and the chunks' small
 * gradients in chunk order; the modulation's gradient goes to the graph vector once, at the end. */
static gopt_status attn_layer_backward(gopt_policy *p, int k, const float *hin, float *dout, float *din,
                                       gopt_error *err) {
    const gopt_policy_config *c = &p->cfg;
    const int D = c->hidden, Fh = D * c->ffn_mult, D3 = 3 * D;
    const attn_params *w = &p->P.attn[k];
    attn_params *g = &p->G.attn[k];
    attn_acts *a = &p->A.attn[k];
    policy_bwd *B = &p->B;
    chunk_job J;
    chunk_job_init(&J, p, attn_bwd_chunk, 1);
    J.k = k;
    J.hin = hin;
    J.dout = dout;
    J.din = din;
    gopt_status st = chunks_run(&J, J.nch, err);
    if (st) return st;
    wgrad_job jobs[8];
    int nj = 0;
    if (k >= c->attn_layers) {
        const int t = k - c->attn_layers;
        jobs[nj++] = (wgrad_job){p->G.head[t].w, p->G.head[t].b, B->dlogits[t], p->A.head[t].x, D, p->width[t]};
        if (t == GOPT_TASK_PLACE && c->cond_hidden > 0)
            jobs[nj++] = (wgrad_job){p->G.cond_v, NULL, B->dvh, p->A.head[t].x, D, c->cond_hidden};
    }
    jobs[nj++] = (wgrad_job){g->fc2_w, g->fc2_b, dout, a->f1, Fh, D};
    jobs[nj++] = (wgrad_job){g->fc1_w, g->fc1_b, B->dff, a->x2, D, Fh};
    jobs[nj++] = (wgrad_job){g->proj_w, g->proj_b, B->dh2, a->ctx, D, D};
    if (p->frozen_x1[k]) {
        jobs[nj++] = (wgrad_job){g->qkv_w, g->qkv_b, B->dqkv_mem, p->frozen_x1[k], D, D3};
        jobs[nj++] = (wgrad_job){g->qkv_w, g->qkv_b, B->dqkv_self, a->x1, D, D3};
    } else
        jobs[nj++] = (wgrad_job){g->qkv_w, g->qkv_b, B->dqkv_mem, a->x1, D, D3};
    if ((st = wgrad_run(p, jobs, nj, err))) return st;
    const int nch = J.nch;
    chunk_reduce(p, nch, -1, g->relpos, (size_t)c->heads * (3 * c->segment - 1));
    if (k >= c->attn_layers) {
        const int t = k - c->attn_layers;
        chunk_reduce(p, nch, CG_HLN_W, p->G.head[t].ln_w, (size_t)D);
        chunk_reduce(p, nch, CG_HLN_B, p->G.head[t].ln_b, (size_t)D);
    }
    chunk_reduce(p, nch, CG_LN2_W, g->ln2_w, (size_t)D);
    chunk_reduce(p, nch, CG_LN2_B, g->ln2_b, (size_t)D);
    chunk_reduce(p, nch, CG_LN1_W, g->ln1_w, (size_t)D);
    chunk_reduce(p, nch, CG_LN1_B, g->ln1_b, (size_t)D);
    memset(B->dms, 0, sizeof(float) * D);
    memset(B->dmb, 0, sizeof(float) * D);
    chunk_reduce(p, nch, CG_MS, B->dms, (size_t)D);
    chunk_reduce(p, nch, CG_MB, B->dmb, (size_t)D);
    gopt_film_backward(B->dg, g->film_s, g->film_b, B->dms, B->dmb, p->A.g, w->film_s, w->film_b, D);
    return GOPT_OK;
}

/* Chunk c of GraphSAGE layer J->l's backward: out = LN(hin + relu(cat W + b)); J->dout the
 * gradient of out, J->din receives hin's residual part (the aggregation's comes after). */
static void sage_bwd_chunk(chunk_job *J, int c, int slot) {
    (void)slot;
    gopt_policy *p = J->p;
    const int D = p->cfg.hidden, r0 = c * J->ch, m = chunk_len(J, c);
    sage_acts *s = &p->A.sage[J->l];
    const sage_params *w = &p->P.sage[J->l];
    policy_bwd *B = &p->B;
    const size_t o = (size_t)r0 * D, md = (size_t)m * D;
    memset(p->chunk_grad + chunk_block(p) * (size_t)c, 0, sizeof(float) * chunk_block(p));
    memset(B->dtmp + o, 0, sizeof(float) * md);
    gopt_layernorm_backward(B->dtmp + o, chunk_small(p, c, CG_LN1_W), chunk_small(p, c, CG_LN1_B), NULL, NULL,
                            J->dout + o, s->r + o, w->ln_w, NULL, s->mean + r0, s->rstd + r0, m, D);
    memcpy(J->din + o, B->dtmp + o, sizeof(float) * md);
    gopt_relu_backward(B->dtmp + o, s->a + o, md);
    gopt_linear_backward_set(B->dcat + o * 5, NULL, NULL, B->dtmp + o, s->cat + o * 5, w->w, m, 5 * D, D);
}

/* The aggregation's backward into dh (which holds the residual part) in AGG_PARTS fixed parts of
 * source rows on the policy's threads: part 0 adds to dh, part j > 0 into its own (n, D) block,
 * added to dh in part order afterwards. */
typedef struct {
    gopt_policy *p;
    float *dh;
    const float *cat, *h;
} aggregate_job;

static void aggregate_part(void *ctx, int j) {
    const aggregate_job *J = ctx;
    gopt_policy *p = J->p;
    const int n = p->n, D = p->cfg.hidden;
    const int lo = (int)((int64_t)n * j / AGG_PARTS), hi = (int)((int64_t)n * (j + 1) / AGG_PARTS);
    const policy_acts *A = &p->A;
    float *dst = J->dh;
    if (j > 0) {
        dst = p->B.dagg_parts + (size_t)(j - 1) * n * D;
        memset(dst, 0, sizeof(float) * (size_t)n * D);
    }
    gopt_sage_aggregate_backward_rows(dst, p->B.dcat + (size_t)lo * 5 * D, J->cat + (size_t)lo * 5 * D, J->h,
                                      A->pred_ptr + lo, A->pred_idx, A->succ_ptr + lo, A->succ_idx, lo, hi - lo, D);
}

static void aggregate_backward(gopt_policy *p, float *dh, const float *cat, const float *h) {
    aggregate_job J = {p, dh, cat, h};
    gopt_parallel_parts(AGG_PARTS, p->threads, aggregate_part, &J);
    const size_t nd = (size_t)p->n * p->cfg.hidden;
    for (int j = 1; j < AGG_PARTS; j++) vec_add(dh, p->B.dagg_parts + (size_t)(j - 1) * nd, nd);
}

/* The backward of the heads alone (gopt_policy_set_train_heads): their products' and layer
 * norms' weight gradients and cond.v's, nothing into the trunk. */
static gopt_status heads_backward(gopt_policy *p, gopt_error *err) {
    const gopt_policy_config *c = &p->cfg;
    const int n = p->n, D = c->hidden, Hc = c->cond_hidden;
    policy_bwd *B = &p->B;
    const int blas = blas_single_begin();
    gopt_status st = GOPT_OK;
    for (int t = 0; t < GOPT_TASK_COUNT && !st; t++) {
        const head_acts *ha = &p->A.head[t];
        const int W = p->width[t], scorer = t == GOPT_TASK_PLACE && Hc > 0;
        gopt_linear_backward_set(B->dtmp, NULL, NULL, B->dlogits[t], ha->x, p->P.head[t].w, n, D, W);
        if (scorer) gopt_linear_backward(B->dtmp, NULL, NULL, B->dvh, ha->x, p->P.cond_v, n, D, Hc);
        gopt_layernorm_backward(NULL, p->G.head[t].ln_w, p->G.head[t].ln_b, NULL, NULL, B->dtmp,
                                p->A.attn[c->attn_layers + t].out, p->P.head[t].ln_w, NULL, ha->mean, ha->rstd, n, D);
        const wgrad_job jobs[2] = {{p->G.head[t].w, p->G.head[t].b, B->dlogits[t], ha->x, D, W},
                                   {p->G.cond_v, NULL, B->dvh, ha->x, D, Hc}};
        st = wgrad_run(p, jobs, scorer ? 2 : 1, err);
    }
    blas_single_end(blas);
    return st;
}

gopt_status policy_network_backward(gopt_policy *p, gopt_error *err) {
    if (p->dev) return policy_dev_backward(p, err);
    if (p->heads_only) return heads_backward(p, err);
    const gopt_policy_config *c = &p->cfg;
    const int n = p->n, D = c->hidden;
    const size_t nd = (size_t)n * D;
    policy_acts *A = &p->A;
    policy_bwd *B = &p->B;
    const int nch = chunk_count(p);
    gopt_status st = policy_grow((void **)&p->chunk_grad, &p->chunk_grad_cap, chunk_block(p) * (size_t)nch,
                                 sizeof(float), "the network's chunk gradients", err);
    if (st) return st;
    const int blas = blas_single_begin();
    float *dcur = B->da, *dnext = B->db;
    memset(dcur, 0, sizeof(float) * nd);
    memset(B->dg, 0, sizeof(float) * D);
    const float *h_sage = c->sage_layers ? A->sage[c->sage_layers - 1].out : A->h0;
    for (int k = p->n_attn - 1; k >= 0; k--) {
        const float *hin = k ? A->attn[k - 1].out : h_sage;
        if ((st = attn_layer_backward(p, k, hin, dcur, dnext, err))) goto out;
        float *t = dcur;
        dcur = dnext;
        dnext = t;
    }
    gopt_meanpool_backward(dcur, B->dg, n, D);
    for (int l = c->sage_layers - 1; l >= 0; l--) {
        sage_acts *s = &A->sage[l];
        sage_params *g = &p->G.sage[l];
        chunk_job J;
        chunk_job_init(&J, p, sage_bwd_chunk, 0);
        J.l = l;
        J.dout = dcur;
        J.din = dnext;
        if ((st = chunks_run(&J, 0, err))) goto out;
        const wgrad_job job = {g->w, g->b, B->dtmp, s->cat, 5 * D, D};
        if ((st = wgrad_run(p, &job, 1, err))) goto out;
        chunk_reduce(p, J.nch, CG_LN1_W, g->ln_w, (size_t)D);
        chunk_reduce(p, J.nch, CG_LN1_B, g->ln_b, (size_t)D);
        aggregate_backward(p, dnext, s->cat, l ? A->sage[l - 1].out : A->h0);
        float *t = dcur;
        dcur = dnext;
        dnext = t;
    }
    const wgrad_job job = {p->G.in_w, p->G.in_b, dcur, A->x0, GOPT_POLICY_NFEAT, D};
    st = wgrad_run(p, &job, 1, err);
out:
    blas_single_end(blas);
    return st;
}
