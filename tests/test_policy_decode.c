/* test_policy_decode.c: the conditioned decoder's batched teacher-forced
 * replay (policy/decode.c) against the sequential one.
 *
 * gopt_policy_backward_batch(_fn) replays k action sets together, node by
 * node (16 sets per pass over the nodes). Checked on a synthetic training
 * graph with colocation groups and binding memory masks, with k = 20 so that
 * two passes (16 + 4) run:
 * - every decision's log-probability handed to the weight callback equals,
 *   bit for bit, what gopt_policy_logprob gives for that set alone, and set
 *   0's entropies likewise;
 * - the logit gradients that the replay hands to the network backward equal,
 *   bit for bit, the sums of k single backwards' (summed in the same order:
 *   each pass's sets cut into 4 parts of consecutive sets, each part's sets
 *   in set order, then the parts in part order), and the scorer's
 *   node-input gradient within float rounding;
 * - every weight gradient, the decoder's own (cond.*, whose sums over sets
 *   and nodes are added in another order) included, within 1e-5 of its
 *   tensor's scale: float rounding;
 * - one seed on one thread reproduces the batched gradient bit for bit, and
 *   so do 2, 3 and 4 decoder threads (gopt_policy_set_threads), for the
 *   batched backward, the batched sampling and the gradients it keeps;
 * - an action on a memory-excluded device in a set of the second pass is
 *   refused, naming the node;
 * - the batched sampling (gopt_policy_sample_batch) gives, bit for bit, the
 *   samples of k sequential ones on the same stream, and the gradients it
 *   keeps (gopt_policy_backward_kept) those of the batched replay with the
 *   same weights within float rounding.
 * The graph is small so the test stays fast under sanitizers.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gopt_policy.h"
#include "gopt_zoo.h"
#include "policy_net.h"

enum { K = 20, NDEV = 4 };

typedef struct {
    gopt_graph *g;
    const gopt_frozen *fz;
    int n;
    gopt_policy *p;
    float *feat;
    double *time, *mem, *cap;
    int32_t *buf;
    gopt_policy_actions a[K];
    float *w; /* (K, 3n) gradient weights */
    float *we; /* (3n) entropy weights of set 0 */
    int32_t *hdev; /* (2, n) hints */
    float *hfeat;  /* (n, GOPT_POLICY_NHINT) */
    int32_t *hgrp; /* (n) hint fusion groups */
} fixture;

/* cond_hidden < 0: the default scorer width */
static void fixture_make_hc(fixture *f, int cond_hidden) {
    gopt_error err = {0};
    gopt_rng rng;
    gopt_rng_seed(&rng, 11);
    gopt_synth_opts so = {GOPT_SYNTH_LAYERED, 300, 150, 600, 0};
    assert_int_equal(gopt_zoo_synthetic(&rng, &so, "decode", &f->g, &err), GOPT_OK);
    f->fz = gopt_graph_frozen(f->g);
    f->n = f->fz->n;
    assert_true(f->fz->n_coloc > 0); /* colocation units are replayed too */
    const int n = f->n;
    gopt_policy_config c;
    gopt_policy_config_default(&c);
    c.hidden = 16;
    c.segment = 8;
    c.max_devices = 8;
    if (cond_hidden >= 0) c.cond_hidden = cond_hidden;
    if (c.cond_hidden > 0) c.hints = 2, c.hint_quality = 1, c.fuse_cond = 1, c.sched_cond = 1, c.fuse_hint = 1; /* every term */
    assert_int_equal(gopt_policy_create(&f->p, &c, 7, &err), GOPT_OK);
    for (int i = 0; i < gopt_policy_num_tensors(f->p); i++) { /* the zero-initialised terms matter */
        const char *nm;
        float *w;
        size_t cnt;
        gopt_policy_tensor(f->p, i, &nm, &w, NULL, &cnt);
        if (!strcmp(nm, "cond.fgrp") || !strcmp(nm, "cond.shint") || !strcmp(nm, "cond.sched") ||
            !strcmp(nm, "cond.fuse"))
            for (size_t j = 0; j < cnt; j++) w[j] = (float)(gopt_rng_uniform(&rng) - 0.5);
    }
    f->hdev = malloc(sizeof(int32_t) * 2 * (size_t)n);
    f->hfeat = malloc(sizeof(float) * (size_t)n * GOPT_POLICY_NHINT);
    for (int i = 0; i < 2 * n; i++) f->hdev[i] = (int32_t)gopt_rng_below(&rng, NDEV);
    for (int i = 0; i < n * GOPT_POLICY_NHINT; i++) f->hfeat[i] = (float)gopt_rng_uniform(&rng);
    const float q[2] = {1.0f, 0.7f};
    f->hgrp = malloc(sizeof(int32_t) * (size_t)n);
    for (int i = 0; i < n; i++) f->hgrp[i] = i % 5 == 0 ? -1 : i / 4 * 4;
    if (c.hints)
        assert_int_equal(gopt_policy_set_hints(f->p, n, NDEV, 2, f->hdev, f->hfeat, f->hgrp, q, &err), GOPT_OK);
    f->feat = malloc(sizeof(float) * (size_t)n * GOPT_POLICY_NFEAT);
    assert_int_equal(gopt_policy_features(f->fz, NDEV, NULL, f->feat, &err), GOPT_OK);
    /* memory inputs whose masks bind: every device holds 1.05 x its share */
    f->time = malloc(sizeof(double) * (size_t)n);
    f->mem = malloc(sizeof(double) * (size_t)n);
    f->cap = malloc(sizeof(double) * NDEV);
    double tot = 0;
    for (int v = 0; v < n; v++) {
        f->time[v] = 1e-4 * (0.1 + gopt_rng_uniform(&rng));
        f->mem[v] = 1.0 + 99.0 * gopt_rng_uniform(&rng);
        tot += f->mem[v];
    }
    for (int d = 0; d < NDEV; d++) f->cap[d] = 1.05 * tot / NDEV;
    assert_int_equal(gopt_policy_set_decoder_inputs(f->p, n, NDEV, f->time, f->mem, f->cap, &err), GOPT_OK);
    assert_int_equal(gopt_policy_forward(f->p, f->fz, f->feat, NDEV, NULL, &err), GOPT_OK);
    f->buf = malloc(sizeof(int32_t) * 3 * (size_t)n * K);
    for (int k = 0; k < K; k++) {
        int32_t *b = f->buf + (size_t)k * 3 * n;
        f->a[k] = (gopt_policy_actions){b, b + n, b + 2 * (size_t)n};
        assert_int_equal(gopt_policy_sample(f->p, &rng, &f->a[k], &err), GOPT_OK);
    }
    f->w = malloc(sizeof(float) * 3 * (size_t)n * K);
    f->we = malloc(sizeof(float) * 3 * (size_t)n);
    for (size_t i = 0; i < 3 * (size_t)n * K; i++) f->w[i] = (float)(gopt_rng_uniform(&rng) - 0.5);
    for (size_t i = 0; i < 3 * (size_t)n; i++) f->we[i] = (float)(gopt_rng_uniform(&rng) - 0.5);
}

static void fixture_make(fixture *f) { fixture_make_hc(f, -1); }

static void fixture_free(fixture *f) {
    gopt_policy_free(f->p);
    gopt_graph_free(f->g);
    free(f->feat);
    free(f->time);
    free(f->mem);
    free(f->cap);
    free(f->buf);
    free(f->w);
    free(f->we);
    free(f->hdev);
    free(f->hfeat);
    free(f->hgrp);
}

/* The weight callback: weights from the table; records every log-probability it is handed. */
typedef struct {
    const float *w;
    float *seen; /* (K, 3n) */
    int n;
    long calls;
} wfn_ctx;

static float table_weight(void *ctx, int set, int task, int32_t v, float logp) {
    wfn_ctx *c = ctx;
    size_t i = (size_t)set * 3 * c->n + (size_t)task * c->n + (size_t)v;
    c->seen[i] = logp;
    c->calls++;
    return c->w[i];
}

static size_t grad_snapshot(gopt_policy *p, float *out) {
    size_t off = 0;
    for (int i = 0; i < gopt_policy_num_tensors(p); i++) {
        float *grd;
        size_t cnt;
        gopt_policy_tensor(p, i, NULL, NULL, &grd, &cnt);
        if (out) memcpy(out + off, grd, sizeof(float) * cnt);
        off += cnt;
    }
    return off;
}

/* Every weight gradient in got within float rounding of want: 1e-5 of each tensor's scale (sums of
 * thousands of float terms in another order); the decoder's eight tensors (cond.*), when the policy
 * has them, are exercised. */
static void assert_grads_close(gopt_policy *p, const float *got, const float *want, const char *gname,
                               const char *wname) {
    size_t o = 0;
    int cond_seen = 0;
    for (int i = 0; i < gopt_policy_num_tensors(p); i++) {
        const char *name;
        size_t cnt;
        gopt_policy_tensor(p, i, &name, NULL, NULL, &cnt);
        double scale = 0, diff = 0;
        for (size_t j = 0; j < cnt; j++) {
            scale = fmax(scale, fabs((double)want[o + j]));
            diff = fmax(diff, fabs((double)got[o + j] - want[o + j]));
        }
        const int cond = strncmp(name, "cond.", 5) == 0;
        cond_seen += cond;
        const double tol = 1e-5 * scale + 1e-12;
        if (diff > tol) print_error("%s: %s differs from %s by %g (scale %g)\n", name, gname, wname, diff, scale);
        assert_true(diff <= tol);
        if (cond) assert_true(scale > 0);
        o += cnt;
    }
    assert_int_equal(cond_seen, p->cfg.cond_hidden > 0 ? 8 : 0);
}

/* The part of set s in a batched replay of K sets (decode.c: passes of 16 sets, each cut into 4
 * parts of consecutive sets at kb * j / 4). */
static int part_of(int s) {
    const int b0 = s / 16 * 16, kb = K - b0 < 16 ? K - b0 : 16, b = s - b0;
    int j = 0;
    while (j + 1 < 4 && kb * (j + 1) / 4 <= b) j++;
    return j;
}

static void test_batched_replay_equals_sequential(void **state) {
    (void)state;
    fixture f;
    fixture_make(&f);
    gopt_policy *p = f.p;
    const int n = f.n, U = p->n_units, W = p->width[GOPT_TASK_PLACE], Hc = p->cfg.cond_hidden;
    gopt_error err = {0};
    /* sequential: one backward per set; the decoder's hand-offs to the network summed per part in
     * set order, then the parts in part order */
    const size_t nl = (size_t)n * (p->width[GOPT_TASK_SCHED] + p->width[GOPT_TASK_FUSE]);
    float *dl_seq = calloc(nl, sizeof(float)), *dvh_seq = calloc((size_t)U * Hc, sizeof(float));
    float *dp_seq = calloc((size_t)U * W, sizeof(float));
    float *dl_part = calloc(4 * nl, sizeof(float)), *dp_part = calloc(4 * (size_t)U * W, sizeof(float));
    float *lp_seq = malloc(sizeof(float) * 3 * (size_t)n * K), *ent_seq = malloc(sizeof(float) * 3 * (size_t)n);
    gopt_policy_zero_grad(p);
    for (int k = 0; k < K; k++) {
        assert_int_equal(gopt_policy_logprob(p, &f.a[k], lp_seq + (size_t)k * 3 * n, k == 0 ? ent_seq : NULL, NULL,
                                             NULL, &err),
                         GOPT_OK);
        assert_int_equal(gopt_policy_backward(p, &f.a[k], f.w + (size_t)k * 3 * n, k == 0 ? f.we : NULL, &err),
                         GOPT_OK);
        float *dl = dl_part + part_of(k) * nl, *dp = dp_part + part_of(k) * (size_t)U * W;
        size_t off = 0;
        for (int t = GOPT_TASK_SCHED; t < GOPT_TASK_COUNT; t++) {
            const size_t cnt = (size_t)n * p->width[t];
            for (size_t j = 0; j < cnt; j++) dl[off + j] += p->B.dlogits[t][j];
            off += cnt;
        }
        for (size_t j = 0; j < (size_t)U * W; j++) dp[j] += p->B.dpooled[j];
        for (size_t j = 0; j < (size_t)U * Hc; j++) dvh_seq[j] += p->B.dvh_unit[j];
    }
    for (int j = 0; j < 4; j++) {
        for (size_t i = 0; i < nl; i++) dl_seq[i] += dl_part[j * nl + i];
        for (size_t i = 0; i < (size_t)U * W; i++) dp_seq[i] += dp_part[j * (size_t)U * W + i];
    }
    free(dl_part);
    free(dp_part);
    const size_t total = grad_snapshot(p, NULL);
    float *g_seq = malloc(sizeof(float) * total), *g_bat = malloc(sizeof(float) * total);
    grad_snapshot(p, g_seq);

    /* batched: the same sets in one call (16 + 4 per pass) */
    gopt_policy_zero_grad(p);
    float *seen = malloc(sizeof(float) * 3 * (size_t)n * K), *ent0 = malloc(sizeof(float) * 3 * (size_t)n);
    for (size_t i = 0; i < 3 * (size_t)n * K; i++) seen[i] = NAN;
    wfn_ctx wc = {f.w, seen, n, 0};
    assert_int_equal(gopt_policy_backward_batch_fn(p, K, f.a, table_weight, &wc, f.we, ent0, &err), GOPT_OK);
    grad_snapshot(p, g_bat);
    /* log-probabilities: every decision that carries a term, bit for bit */
    long terms = 0;
    for (int k = 0; k < K; k++)
        for (int t = 0; t < GOPT_TASK_COUNT; t++)
            for (int v = 0; v < n; v++) {
                size_t i = (size_t)k * 3 * n + (size_t)t * n + v;
                int carries = t != GOPT_TASK_PLACE || p->A.unit_rep[p->A.unit_of[f.fz->rank[v]]] == f.fz->rank[v];
                if (!carries) continue;
                terms++;
                assert_memory_equal(&seen[i], &lp_seq[i], sizeof(float));
            }
    assert_int_equal(wc.calls, terms);
    assert_memory_equal(ent0, ent_seq, sizeof(float) * 3 * (size_t)n);
    /* the decoder's hand-offs to the network: bit for bit (placement per unit, before the
     * mean over the unit's members) */
    size_t off = 0;
    for (int t = GOPT_TASK_SCHED; t < GOPT_TASK_COUNT; t++) {
        const size_t cnt = (size_t)n * p->width[t];
        assert_memory_equal(p->B.dlogits[t], dl_seq + off, sizeof(float) * cnt);
        off += cnt;
    }
    assert_memory_equal(p->B.dpooled, dp_seq, sizeof(float) * (size_t)U * W);
    /* the scorer's node-input gradient sums several devices' terms per set: equal within rounding */
    double vscale = 0, vdiff = 0;
    for (size_t j = 0; j < (size_t)U * Hc; j++) {
        vscale = fmax(vscale, fabs((double)dvh_seq[j]));
        vdiff = fmax(vdiff, fabs((double)p->B.dvh_unit[j] - dvh_seq[j]));
    }
    assert_true(vscale > 0);
    assert_true(vdiff <= 1e-6 * vscale);
    /* weights: within float rounding */
    assert_grads_close(p, g_bat, g_seq, "batched", "sequential");

    /* one seed, one thread: the batched gradient reproduces bit for bit, and weights given as a
     * table give the callback's gradient */
    float *g_tab = malloc(sizeof(float) * total), *g_again = malloc(sizeof(float) * total);
    gopt_policy_zero_grad(p);
    assert_int_equal(gopt_policy_backward_batch(p, K, f.a, f.w, f.we, &err), GOPT_OK);
    grad_snapshot(p, g_tab);
    gopt_policy_zero_grad(p);
    assert_int_equal(gopt_policy_backward_batch(p, K, f.a, f.w, f.we, &err), GOPT_OK);
    grad_snapshot(p, g_again);
    assert_memory_equal(g_tab, g_again, sizeof(float) * total);
    assert_memory_equal(g_tab, g_bat, sizeof(float) * total);
    /* on 2, 3 and 4 decoder threads: the same gradient bit for bit */
    for (int th = 2; th <= 4; th++) {
        assert_int_equal(gopt_policy_set_threads(p, th, &err), GOPT_OK);
        gopt_policy_zero_grad(p);
        assert_int_equal(gopt_policy_backward_batch(p, K, f.a, f.w, f.we, &err), GOPT_OK);
        grad_snapshot(p, g_again);
        assert_memory_equal(g_tab, g_again, sizeof(float) * total);
    }
    assert_int_equal(gopt_policy_threads(p), 4);
    assert_int_equal(gopt_policy_set_threads(p, 0, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "threads = 0"));
    assert_int_equal(gopt_policy_set_threads(p, GOPT_POLICY_MAX_THREADS + 1, &err), GOPT_EINVAL);
    assert_int_equal(gopt_policy_threads(p), 4);
    free(g_tab);
    free(dl_seq);
    free(dp_seq);
    free(dvh_seq);
    free(lp_seq);
    free(ent_seq);
    free(g_seq);
    free(g_bat);
    free(g_again);
    free(seen);
    free(ent0);
    fixture_free(&f);
}

/* A set of the second pass (index 17) that puts a node on a device its memory excludes. */
static void test_batched_replay_refuses(void **state) {
    (void)state;
    fixture f;
    fixture_make(&f);
    gopt_policy *p = f.p;
    const int n = f.n;
    gopt_error err = {0};
    /* find a unit whose sampled device in set 17 can be moved onto an excluded one: replay the
     * memory rule on set 17's placement (units in order of their first member) */
    gopt_policy_actions *a = &f.a[17];
    double used[NDEV] = {0};
    int bad_node = -1, bad_dev = -1;
    for (int i = 0; i < n && bad_node < 0; i++) {
        const int u = p->A.unit_of[i];
        if (p->A.unit_rep[u] != i) continue;
        double charge = 0;
        for (int m = p->A.unit_ptr[u]; m < p->A.unit_ptr[u + 1]; m++) charge += f.mem[f.fz->topo[p->A.unit_idx[m]]];
        const int v = f.fz->topo[i];
        if (p->A.unit_ptr[u + 1] - p->A.unit_ptr[u] == 1) /* a single node: moving it splits no group */
            for (int d = 0; d < NDEV; d++)
                if (((p->A.unit_mask[u] >> d) & 1u) && used[d] + charge > f.cap[d] * (1.0 + 1e-9) &&
                    used[a->place[v]] + charge <= f.cap[a->place[v]]) {
                    bad_node = v;
                    bad_dev = d;
                    break;
                }
        used[a->place[v]] += charge;
    }
    assert_true(bad_node >= 0); /* the masks bind on this graph */
    a->place[bad_node] = bad_dev;
    gopt_policy_zero_grad(p);
    assert_int_equal(gopt_policy_backward_batch(p, K, f.a, f.w, f.we, &err), GOPT_EINVAL);
    char want[64];
    snprintf(want, sizeof want, "node %d: device %d is masked", bad_node, bad_dev);
    if (!strstr(err.msg, want)) print_error("message: %s (want %s)\n", err.msg, want);
    assert_non_null(strstr(err.msg, want));
    assert_int_equal(gopt_policy_backward_batch(p, 0, f.a, f.w, f.we, &err), GOPT_EINVAL);
    fixture_free(&f);
}

/* gopt_policy_sample_batch: K = 20 sets (16 + 4 per pass) give, bit for bit, the decisions,
 * log-probabilities and set 0's entropies of 20 gopt_policy_sample_scored calls on the same
 * stream, and leave the stream where they leave it; bad arguments are refused. */
static void test_sample_batch_equals_sequential(void **state) {
    (void)state;
    fixture f;
    fixture_make(&f);
    gopt_policy *p = f.p;
    const int n = f.n;
    const size_t T3 = 3 * (size_t)n, stride = T3 + 5; /* a stride above 3n, as the trainer's */
    gopt_error err = {0};
    int32_t *bs = malloc(sizeof(int32_t) * T3 * K), *bb = malloc(sizeof(int32_t) * T3 * K);
    float *ls = calloc(stride * K, sizeof(float)), *lb = calloc(stride * K, sizeof(float));
    float *es = malloc(sizeof(float) * T3), *eb = malloc(sizeof(float) * T3);
    gopt_policy_actions as[K], ab[K];
    for (int k = 0; k < K; k++) {
        as[k] = (gopt_policy_actions){bs + (size_t)k * T3, bs + (size_t)k * T3 + n, bs + (size_t)k * T3 + 2 * n};
        ab[k] = (gopt_policy_actions){bb + (size_t)k * T3, bb + (size_t)k * T3 + n, bb + (size_t)k * T3 + 2 * n};
    }
    gopt_rng r1, r2;
    gopt_rng_seed(&r1, 99);
    gopt_rng_seed(&r2, 99);
    for (int k = 0; k < K; k++)
        assert_int_equal(gopt_policy_sample_scored(p, &r1, &as[k], ls + (size_t)k * stride, k == 0 ? es : NULL, &err),
                         GOPT_OK);
    assert_int_equal(gopt_policy_sample_batch(p, K, &r2, ab, lb, stride, eb, NULL, NULL, &err), GOPT_OK);
    assert_memory_equal(bs, bb, sizeof(int32_t) * T3 * K);
    assert_memory_equal(ls, lb, sizeof(float) * stride * K);
    assert_memory_equal(es, eb, sizeof(float) * T3);
    assert_memory_equal(&r1, &r2, sizeof r1);
    /* on 3 decoder threads: the same samples */
    int32_t *b3 = malloc(sizeof(int32_t) * T3 * K);
    gopt_policy_actions a3[K];
    for (int k = 0; k < K; k++)
        a3[k] = (gopt_policy_actions){b3 + (size_t)k * T3, b3 + (size_t)k * T3 + n, b3 + (size_t)k * T3 + 2 * n};
    gopt_rng r3;
    gopt_rng_seed(&r3, 99);
    assert_int_equal(gopt_policy_set_threads(p, 3, &err), GOPT_OK);
    assert_int_equal(gopt_policy_sample_batch(p, K, &r3, a3, NULL, 0, NULL, NULL, NULL, &err), GOPT_OK);
    assert_int_equal(gopt_policy_set_threads(p, 1, &err), GOPT_OK);
    assert_memory_equal(bs, b3, sizeof(int32_t) * T3 * K);
    assert_memory_equal(&r1, &r3, sizeof r1);
    free(b3);
    /* the samples differ from one another (each set has its own share of the stream) */
    assert_true(memcmp(bb, bb + T3, sizeof(int32_t) * T3) != 0);
    /* no kept gradients without weights */
    float coef[K] = {0};
    assert_int_equal(gopt_policy_backward_kept(p, K, coef, &err), GOPT_EINVAL);
    /* refusals */
    assert_int_equal(gopt_policy_sample_batch(p, 0, &r2, ab, lb, stride, eb, NULL, NULL, &err), GOPT_EINVAL);
    assert_int_equal(gopt_policy_sample_batch(p, K, NULL, ab, lb, stride, eb, NULL, NULL, &err), GOPT_EINVAL);
    assert_int_equal(gopt_policy_sample_batch(p, K, &r2, ab, lb, T3 - 1, eb, NULL, NULL, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "stride"));
    free(bs);
    free(bb);
    free(ls);
    free(lb);
    free(es);
    free(eb);
    fixture_free(&f);
}

/* The fusion pass's joins recorded by a sample batch (cfg.fuse_cond): a batched backward over
 * the same actions reads them (checked: corrupting them changes its gradient) and gives, bit for
 * bit, the gradient of the same backward without them (after another sample batch recorded
 * other actions); a set whose fusion levels changed since is searched again. */
static void test_recorded_fusion_joins(void **state) {
    (void)state;
    fixture f;
    fixture_make(&f);
    gopt_policy *p = f.p;
    assert_true(p->cfg.fuse_cond && p->cfg.cond_hidden > 0);
    const int n = f.n;
    const size_t T3 = 3 * (size_t)n, total = grad_snapshot(p, NULL);
    gopt_error err = {0};
    float *g_rec = malloc(sizeof(float) * total), *g_fresh = malloc(sizeof(float) * total);
    int32_t *ob = malloc(sizeof(int32_t) * T3);
    gopt_policy_actions other = {ob, ob + n, ob + 2 * n};
    gopt_rng r;
    /* recorded, read back */
    gopt_rng_seed(&r, 23);
    assert_int_equal(gopt_policy_sample_batch(p, K, &r, f.a, NULL, 0, NULL, NULL, NULL, &err), GOPT_OK);
    assert_int_equal(p->fj_k, K);
    gopt_policy_zero_grad(p);
    assert_int_equal(gopt_policy_backward_batch(p, K, f.a, f.w, f.we, &err), GOPT_OK);
    grad_snapshot(p, g_rec);
    /* the same backward with nothing recorded for these actions: another batch of one set */
    assert_int_equal(gopt_policy_sample_batch(p, 1, &r, &other, NULL, 0, NULL, NULL, NULL, &err), GOPT_OK);
    assert_int_equal(p->fj_k, 1);
    assert_true(memcmp(ob, f.a[0].place, sizeof(int32_t) * T3) != 0);
    gopt_policy_zero_grad(p);
    assert_int_equal(gopt_policy_backward_batch(p, K, f.a, f.w, f.we, &err), GOPT_OK);
    grad_snapshot(p, g_fresh);
    assert_memory_equal(g_rec, g_fresh, sizeof(float) * total);
    /* the recorded joins are what the backward reads: every recorded answer "roots a new group"
     * changes the gradient (the fusion term sees other groups) */
    gopt_rng_seed(&r, 23);
    assert_int_equal(gopt_policy_sample_batch(p, K, &r, f.a, NULL, 0, NULL, NULL, NULL, &err), GOPT_OK);
    const size_t nj = (size_t)K * n * (p->width[GOPT_TASK_FUSE] - 1);
    int joined = 0;
    for (size_t i = 0; i < nj; i++) joined += p->fj[i] >= 0;
    assert_true(joined > 0); /* some node would join a group at some level */
    for (size_t i = 0; i < nj; i++) p->fj[i] = -1;
    gopt_policy_zero_grad(p);
    assert_int_equal(gopt_policy_backward_batch(p, K, f.a, f.w, f.we, &err), GOPT_OK);
    grad_snapshot(p, g_fresh);
    assert_true(memcmp(g_rec, g_fresh, sizeof(float) * total) != 0);
    /* a set whose levels changed is searched again: set 3 with one level moved, recorded joins
     * (corrupted) for the others, against the same actions with nothing recorded */
    f.a[3].fuse[n / 2] = (f.a[3].fuse[n / 2] + 1) % p->width[GOPT_TASK_FUSE];
    for (int s = 0; s < K; s++)
        if (s != 3) memset(f.w + (size_t)s * T3, 0, sizeof(float) * T3); /* set 3's gradient alone */
    gopt_policy_zero_grad(p);
    assert_int_equal(gopt_policy_backward_batch(p, K, f.a, f.w, NULL, &err), GOPT_OK);
    grad_snapshot(p, g_rec);
    assert_int_equal(gopt_policy_sample_batch(p, 1, &r, &other, NULL, 0, NULL, NULL, NULL, &err), GOPT_OK);
    gopt_policy_zero_grad(p);
    assert_int_equal(gopt_policy_backward_batch(p, K, f.a, f.w, NULL, &err), GOPT_OK);
    grad_snapshot(p, g_fresh);
    assert_memory_equal(g_rec, g_fresh, sizeof(float) * total);
    free(g_rec);
    free(g_fresh);
    free(ob);
    fixture_free(&f);
}

/* gopt_policy_backward_kept: the gradients a sample batch kept (K = 20 sets, weights w on every
 * decision, set 0's entropy weights we), scaled by coef[s], give the gradient of
 * gopt_policy_backward_batch with weights coef[s] * w on the same sets, within float rounding
 * (every tensor, the scorer's included); bit for bit again from the same seed; refused after
 * another forward and for another k. With and without the scorer (cond_hidden = 0). */
static void kept_equals_batch(int cond_hidden) {
    fixture f;
    fixture_make_hc(&f, cond_hidden);
    gopt_policy *p = f.p;
    const int n = f.n;
    const size_t T3 = 3 * (size_t)n;
    gopt_error err = {0};
    gopt_rng rng;
    gopt_rng_seed(&rng, 5);
    float *wk = malloc(sizeof(float) * T3), coef[K];
    for (size_t i = 0; i < T3; i++) wk[i] = gopt_rng_uniform(&rng) < 0.8 ? 1.0f : 0.0f; /* learned rows */
    for (int k = 0; k < K; k++) coef[k] = (float)(gopt_rng_uniform(&rng) - 0.5);
    const size_t total = grad_snapshot(p, NULL);
    float *g_kept = malloc(sizeof(float) * total), *g_again = malloc(sizeof(float) * total),
          *g_bat = malloc(sizeof(float) * total);
    for (int rep = 0; rep < 3; rep++) { /* on 1, 2 and 3 decoder threads */
        assert_int_equal(gopt_policy_set_threads(p, rep + 1, &err), GOPT_OK);
        gopt_rng r;
        gopt_rng_seed(&r, 17);
        assert_int_equal(gopt_policy_sample_batch(p, K, &r, f.a, NULL, 0, NULL, wk, f.we, &err), GOPT_OK);
        gopt_policy_zero_grad(p);
        assert_int_equal(gopt_policy_backward_kept(p, K, coef, &err), GOPT_OK);
        grad_snapshot(p, rep ? g_again : g_kept);
        if (rep) assert_memory_equal(g_kept, g_again, sizeof(float) * total);
    }
    /* the same J through the replay */
    for (int k = 0; k < K; k++)
        for (size_t i = 0; i < T3; i++) f.w[(size_t)k * T3 + i] = coef[k] * wk[i];
    gopt_policy_zero_grad(p);
    assert_int_equal(gopt_policy_backward_batch(p, K, f.a, f.w, f.we, &err), GOPT_OK);
    grad_snapshot(p, g_bat);
    assert_grads_close(p, g_kept, g_bat, "kept", "the replay");
    /* a wrong k, and any forward since the sample batch, are refused */
    gopt_rng r;
    gopt_rng_seed(&r, 17);
    assert_int_equal(gopt_policy_sample_batch(p, K, &r, f.a, NULL, 0, NULL, wk, f.we, &err), GOPT_OK);
    assert_int_equal(gopt_policy_backward_kept(p, K - 1, coef, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "kept"));
    assert_int_equal(gopt_policy_forward(p, f.fz, f.feat, NDEV, NULL, &err), GOPT_OK);
    assert_int_equal(gopt_policy_backward_kept(p, K, coef, &err), GOPT_EINVAL);
    free(wk);
    free(g_kept);
    free(g_again);
    free(g_bat);
    fixture_free(&f);
}

static void test_backward_kept_equals_batch(void **state) {
    (void)state;
    kept_equals_batch(-1); /* the default scorer */
    kept_equals_batch(0);  /* without the scorer: no cond tensors, empty kept fields */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batched_replay_equals_sequential),
        cmocka_unit_test(test_batched_replay_refuses),
        cmocka_unit_test(test_sample_batch_equals_sequential),
        cmocka_unit_test(test_backward_kept_equals_batch),
        cmocka_unit_test(test_recorded_fusion_joins),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
