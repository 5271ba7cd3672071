/* hint.c: the decoder's hints (policy cfg.hints = H, docs/policy.md
 * "Hints"): classical solutions read as features, never as answers.
 *
 * Row h of the placement hints is the h-th placer of gopt_go_hint_placers
 * run through the optimizer registry on the problem, its device labels made
 * canonical under the cluster's symmetries (gopt_trainer_device_symmetries +
 * gopt_trainer_canonical_devices), the labelling the trainer gives its
 * imitation targets, so that a hint and a target that place alike read
 * alike; a placer that finds nothing that fits gives a row of -1 (no hint).
 * The per-node features come from GOPT_GO_HINT_METHOD (HEFT + critical-path
 * priorities + XLA-style fusion): the priority rank in [0, 1] (1 = highest
 * priority; ties share the rank of the first of them), 1 when the node joins
 * a predecessor's fused group, 1 when it roots a fused group of two or more.
 * With quality (policy cfg.hint_quality), each placer runs in the combinations
 * placer + gopt_go_hint_combos (critical-path or topological priorities with
 * XLA-style fusion, critical-path with TVM-style rule-based chains: on some
 * settings TVM's smaller groups are the best classical fusion, and a policy
 * that only saw XLA's groups as hints fused too much there; and, since
 * 2026-11-28, either order with XLA-style multi-output fusion, xlamo, the
 * best classical fusion on most CNNs), each judged by
 * the problem's evaluator; hint h is the
 * placer's fastest that fits, its quality T_best / T_h (1 for the best hint,
 * 0 when none fits); the per-node schedule and fusion features then come from
 * the best hint's combination.
 * The table of every combination (gopt_go_hint_table, go's styles) also holds
 * GOPT_GO_METIS_DRAWS more draws of METIS, the one placer that draws, at the
 * seeds after the problem's: which partition METIS's seed lands on moves the
 * best METIS combination by up to 20% on some graphs (the BiLSTM tagger on 4
 * V100s: 13.5-16.7 ms over seeds 1-4), and a policy conditioned on a better
 * draw decodes a better answer. They enter only as styles (a style's
 * placement stands in METIS's hint row); the graph's own hints, which the
 * checkpoint was trained on, stay those of the problem's seed.
 * Cost: one run of each method (list placers O(n ndev), METIS, the schedule's
 * O(n log n) sort) plus one symmetry search (up to 8! permutations); with
 * quality, one evaluation (simulation) per hint; the table, per combination and
 * METIS draw.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer_internal.h"

typedef struct {
    int32_t prio;
    int32_t v;
} hint_key;

static int cmp_key(const void *a, const void *b) {
    const hint_key *x = a, *y = b;
    if (x->prio != y->prio) return x->prio < y->prio ? -1 : 1;
    return x->v < y->v ? -1 : x->v > y->v;
}

const char *const gopt_go_hint_combos[] = {"+cp+xla", "+fifo+xla", "+cp+tvm", "+cp+xlamo", "+fifo+xlamo", NULL};

const char *const gopt_go_hint_placers[GOPT_POLICY_MAX_HINTS] = {"heft",   "metf",  "metis", "expert",
                                                                   "msct",   "mtopo", "single", NULL};

/* Canonical labels of placement dev_in into dev_out (perms: np symmetries, rows of ndev). */
static gopt_status canonical(const gopt_frozen *fz, int ndev, const int32_t *perms, int np, const int32_t *dev_in,
                             int32_t *dev_out, gopt_error *err) {
    if (np >= 1) return gopt_trainer_canonical_devices(fz, ndev, dev_in, perms, np, dev_out, NULL, err);
    memcpy(dev_out, dev_in, sizeof(int32_t) * (size_t)fz->n);
    return GOPT_OK;
}

gopt_status gopt_go_hints_from(const gopt_frozen *fz, const gopt_costmodel *cm, const gopt_cost_table *ct, int ndev,
                               int nh, const gopt_decisions *const *hd, const gopt_decisions *sd, int32_t *dev,
                               float *feat, int32_t *group, gopt_error *err) {
    const int32_t n = fz->n;
    gopt_status st = GOPT_OK;
    int32_t *perms = gopt_malloc(sizeof(int32_t) * (size_t)TR_MAX_SYM * (size_t)ndev, err);
    hint_key *key = gopt_malloc(sizeof(hint_key) * (size_t)(n ? n : 1), err);
    int32_t *first = gopt_malloc(sizeof(int32_t) * (size_t)(n ? n : 1), err);
    int32_t *size = gopt_calloc((size_t)(n ? n : 1), sizeof(int32_t), err);
    if (!perms || !key || !first || !size) {
        st = GOPT_ENOMEM;
        goto out;
    }
    int np = gopt_trainer_device_symmetries(cm, ct, perms, TR_MAX_SYM);
    for (int h = 0; h < nh; h++) {
        int32_t *row = dev + (size_t)h * n;
        if (!hd[h]) {
            for (int32_t v = 0; v < n; v++) row[v] = -1;
        } else if ((st = canonical(fz, ndev, perms, np, hd[h]->device, row, err))) {
            goto out;
        }
    }
    for (size_t i = 0; i < (size_t)n * GOPT_POLICY_NHINT; i++) feat[i] = 0.0f;
    for (int32_t v = 0; group && v < n; v++) group[v] = -1;
    if (!sd) goto out;
    /* priority rank: the share of nodes strictly below in priority */
    for (int32_t v = 0; v < n; v++) key[v] = (hint_key){sd->priority[v], v};
    qsort(key, (size_t)n, sizeof *key, cmp_key);
    for (int32_t i = 0, lo = 0; i < n; i++) {
        if (i > 0 && key[i].prio != key[i - 1].prio) lo = i;
        feat[(size_t)key[i].v * GOPT_POLICY_NHINT] = n > 1 ? (float)lo / (float)(n - 1) : 1.0f;
    }
    /* fusion: the first member of each group in topological order is its root */
    for (int32_t v = 0; v < n; v++) first[v] = -1;
    for (int32_t v = 0; v < n; v++)
        if (sd->group[v] >= 0 && sd->group[v] < n) size[sd->group[v]]++;
    for (int32_t i = 0; i < n; i++) {
        int32_t v = fz->topo[i], g = sd->group[v];
        float *f = feat + (size_t)v * GOPT_POLICY_NHINT;
        if (g < 0 || g >= n || size[g] < 2) continue;
        if (first[g] < 0) {
            first[g] = v;
            f[2] = 1.0f;
        } else {
            f[1] = 1.0f;
        }
        if (group) group[v] = first[g];
    }
out:
    free(perms);
    free(key);
    free(first);
    free(size);
    return st;
}

/* Run method spec on p into d (initialised here); *found = 0 when it finds nothing that fits;
 * *step (step may be NULL): its step time when the run judged d already (gopt_bl_combo_decide_memo),
 * else NAN. */
static gopt_status run_method(const gopt_bl_registry *reg, const char *spec, const gopt_bl_problem *p,
                              gopt_bl_place_memo *memo, gopt_decisions *d, int *found, double *step,
                              gopt_error *err) {
    gopt_bl_combo c;
    *found = 0;
    if (step) *step = NAN;
    gopt_status st = gopt_bl_combo_parse(reg, spec, &c, err);
    if (!st) st = gopt_bl_combo_decide_memo(reg, &c, p, memo, d, step, err);
    if (st == GOPT_EUNSUP) { /* nothing fits: no hint from this method */
        if (err) memset(err, 0, sizeof *err);
        return GOPT_OK;
    }
    *found = st == GOPT_OK;
    return st;
}

void gopt_go_hint_table_free(gopt_go_hint_table *t) {
    for (int i = 0; t->d && i < t->nrows * t->nc; i++) gopt_decisions_destroy(&t->d[i]);
    free(t->d);
    free(t->step);
    free(t->found);
    memset(t, 0, sizeof *t);
}

/* The hint row that table row r stands in: its own below nh, METIS's for an extra draw. */
static int hint_row(const gopt_go_hint_table *t, int r) { return r < t->nh ? r : t->draw_row; }

typedef struct {
    gopt_go_hint_table *t;
    gopt_bl_registry reg;
    gopt_status *st; /* (nrows * nc) */
    gopt_error *err; /* (nrows * nc) */
} table_job;

/* Row r of the table: its placer with each combination, run and judged on q one after another,
 * the placer's first answer kept for the next (gopt_bl_combo_decide_memo: the same decisions). */
static void table_row(void *arg, const gopt_bl_problem *q, int r) {
    table_job *j = arg;
    gopt_go_hint_table *t = j->t;
    gopt_bl_place_memo memo;
    memset(&memo, 0, sizeof memo);
    for (int c = 0; c < t->nc; c++) {
        const int i = r * t->nc + c;
        char spec[96];
        int found = 0;
        double s = NAN;
        snprintf(spec, sizeof spec, "%s%s", gopt_go_hint_placers[hint_row(t, r)], gopt_go_hint_combos[c]);
        if (r >= t->nh) /* an extra draw: METIS at the next seeds ("@sS", its own stream) */
            snprintf(spec + strlen(spec), sizeof spec - strlen(spec), "@s%llu",
                     (unsigned long long)(q->opt.seed + 1 + (uint64_t)(r - t->nh)));
        if ((j->st[i] = run_method(&j->reg, spec, q, &memo, &t->d[i], &found, &s, &j->err[i]))) break;
        int oom = 0; /* simulated once: the run's own out-of-memory check judged its answer already */
        if (!found) s = INFINITY;
        else if (isnan(s)) s = gopt_bl_evaluate(q, &t->d[i], &oom);
        if (oom || !(s > 0) || !isfinite(s)) s = INFINITY;
        t->found[i] = (unsigned char)found;
        t->step[i] = s;
        if (!found) gopt_decisions_destroy(&t->d[i]);
    }
    gopt_bl_place_memo_free(&memo);
}

gopt_status gopt_go_hint_table_build(const gopt_bl_problem *p, int nh, int draws, int threads, gopt_go_hint_table *t,
                                     gopt_error *err) {
    memset(t, 0, sizeof *t);
    if (nh < 1 || nh > GOPT_POLICY_MAX_HINTS || !gopt_go_hint_placers[nh - 1])
        return gopt_error_set(err, GOPT_EINVAL, "hints: %d placements asked for, there are 1..7", nh);
    if (draws < 0 || draws > GOPT_GO_METIS_DRAWS)
        return gopt_error_set(err, GOPT_EINVAL, "hints: %d more METIS draws asked for, there are 0..%d", draws,
                              GOPT_GO_METIS_DRAWS);
    int nc = 0;
    while (gopt_go_hint_combos[nc]) nc++;
    table_job j = {t, {0}, NULL, NULL};
    gopt_bl_registry_init(&j.reg);
    t->nh = nh;
    t->nc = nc;
    t->draw_row = -1;
    for (int h = 0; h < nh; h++)
        if (!strcmp(gopt_go_hint_placers[h], "metis")) t->draw_row = h;
    t->nrows = nh + (t->draw_row >= 0 ? draws : 0);
    const int ne = t->nrows * nc;
    t->d = gopt_calloc((size_t)ne, sizeof *t->d, err);
    t->step = gopt_malloc(sizeof(double) * (size_t)ne, err);
    t->found = gopt_calloc((size_t)ne, 1, err);
    j.st = gopt_calloc((size_t)ne, sizeof *j.st, err);
    j.err = gopt_calloc((size_t)ne, sizeof *j.err, err);
    gopt_status st = GOPT_ENOMEM;
    if (t->d && t->step && t->found && j.st && j.err) {
        /* every row is independent of the others (a seeded method draws from its own stream): on
         * several threads the table is the same */
        st = gopt_bl_parallel(p, t->nrows, threads, table_row, &j, err);
        for (int i = 0; !st && i < ne; i++) /* the first failure in table order, as on one thread */
            if ((st = j.st[i]) && err) *err = j.err[i];
    }
    free(j.st);
    free(j.err);
    if (st) gopt_go_hint_table_free(t);
    return st;
}

/* Placer h's hint in table t: its fastest combination that fits, else the first it found; -1: none. */
static int placer_pick(const gopt_go_hint_table *t, int h) {
    int k = -1;
    for (int c = 0; c < t->nc; c++) {
        const int i = h * t->nc + c;
        if (t->found[i] && (k < 0 || t->step[i] < t->step[k])) k = i;
    }
    return k;
}

/* The best hint's entry in t: the placers' picks' fastest that fits, the first placer on ties; -1: none fits. */
static int best_entry(const gopt_go_hint_table *t) {
    int best = -1;
    for (int h = 0; h < t->nh; h++) {
        const int k = placer_pick(t, h);
        if (k >= 0 && t->step[k] < INFINITY && (best < 0 || t->step[k] < t->step[best])) best = k;
    }
    return best;
}

/* The entries other than best that fit, of row `row` (row >= 0) or of every other hint row than
 * best's (row < 0: rows below nh, not the extra draws'), the cap fastest into idx, fastest first
 * (ties by index); returns how many. */
static int fastest_entries(const gopt_go_hint_table *t, int best, int row, int *idx, int cap) {
    int m = 0;
    for (int i = 0; i < t->nrows * t->nc; i++) { /* insertion into the cap fastest */
        if (i == best || !t->found[i] || !(t->step[i] < INFINITY)) continue;
        if (row >= 0 ? i / t->nc != row : i / t->nc == best / t->nc || i / t->nc >= t->nh) continue;
        int j = m;
        if (m < cap) {
            m++;
        } else if (cap > 0 && t->step[i] < t->step[idx[cap - 1]]) {
            j = cap - 1;
        } else {
            continue;
        }
        idx[j] = i;
        for (; j > 0 && t->step[idx[j]] < t->step[idx[j - 1]]; j--) {
            const int x = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = x;
        }
    }
    return m;
}

int gopt_go_hint_styles(const gopt_go_hint_table *t, int all, int *idx, int cap) {
    const int best = best_entry(t);
    if (best < 0 || cap <= 0) return 0;
    const int m = fastest_entries(t, best, best / t->nc, idx, cap);
    if (!all) return m;
    const int wide = cap - m < GOPT_GO_WIDE_STYLES ? cap - m : GOPT_GO_WIDE_STYLES;
    int k = m + fastest_entries(t, best, -1, idx + m, wide);
    for (int r = t->nh; r < t->nrows && k < cap; r++) k += fastest_entries(t, best, r, idx + k, 1); /* each draw's */
    return k;
}

gopt_status gopt_go_hints_pick(const gopt_bl_problem *p, const gopt_go_hint_table *t, int pick, int32_t *dev,
                               float *feat, int32_t *group, float *quality, int *have, gopt_error *err) {
    const gopt_frozen *fz = gopt_graph_frozen(p->graph);
    const gopt_decisions *hp[GOPT_POLICY_MAX_HINTS];
    double step[GOPT_POLICY_MAX_HINTS];
    *have = 0;
    if (pick >= t->nrows * t->nc || (pick >= 0 && !(t->step[pick] < INFINITY)))
        return gopt_error_set(err, GOPT_EINVAL, "hints: combination %d of %d is not one that fits", pick,
                              t->nrows * t->nc);
    const int prow = pick < 0 ? -1 : hint_row(t, pick / t->nc); /* the hint row the pick stands in */
    int any = 0;
    for (int h = 0; h < t->nh; h++) {
        int k = prow == h ? pick : placer_pick(t, h);
        hp[h] = k >= 0 ? &t->d[k] : NULL;
        step[h] = k >= 0 ? t->step[k] : INFINITY;
        any |= hp[h] != NULL;
    }
    /* the best hint's placer; with a pick, the conditioning: that combination reads as the best */
    const int be = pick >= 0 ? -1 : best_entry(t), best = pick >= 0 ? prow : be >= 0 ? be / t->nc : -1;
    for (int h = 0; h < t->nh; h++) {
        double q = best >= 0 && step[h] < INFINITY ? step[best] / step[h] : 0.0;
        if (pick >= 0 && h != best && q > 0.99999) q = 0.99999; /* only the conditioned hint reads 1 */
        quality[h] = (float)q;
    }
    if (best >= 0) quality[best] = 1.0f; /* exactly 1 (the policy's "best hint") */
    const gopt_decisions *sched = best >= 0 ? hp[best] : NULL;
    gopt_status st = GOPT_OK;
    if (any && !(st = gopt_go_hints_from(fz, p->cm, p->cost, p->ndev, t->nh, hp, sched, dev, feat, group, err)))
        *have = 1;
    return st;
}

gopt_status gopt_go_hints(const gopt_bl_problem *p, int nh, int threads, int32_t *dev, float *feat, int32_t *group,
                          float *quality, int *have, gopt_error *err) {
    const gopt_frozen *fz = gopt_graph_frozen(p->graph);
    *have = 0;
    if (nh < 1 || nh > GOPT_POLICY_MAX_HINTS || !gopt_go_hint_placers[nh - 1])
        return gopt_error_set(err, GOPT_EINVAL, "hints: %d placements asked for, there are 1..7", nh);
    gopt_status st;
    if (quality) { /* each placer's best whole combination, judged by p's evaluator */
        gopt_go_hint_table t;
        if ((st = gopt_go_hint_table_build(p, nh, 0, threads, &t, err))) return st; /* the own hints: no draws */
        st = gopt_go_hints_pick(p, &t, -1, dev, feat, group, quality, have, err);
        gopt_go_hint_table_free(&t);
        return st;
    }
    gopt_bl_registry reg;
    gopt_bl_registry_init(&reg);
    gopt_decisions hd[GOPT_POLICY_MAX_HINTS], sd = {0};
    const gopt_decisions *hp[GOPT_POLICY_MAX_HINTS];
    memset(hd, 0, sizeof hd);
    int found = 0, any = 0;
    for (int h = 0; h < nh; h++) {
        hp[h] = NULL;
        if ((st = run_method(&reg, gopt_go_hint_placers[h], p, NULL, &hd[h], &found, NULL, err))) goto out;
        hp[h] = found ? &hd[h] : NULL;
        any |= found;
    }
    /* the schedule and fusion: GOPT_GO_HINT_METHOD */
    if ((st = run_method(&reg, GOPT_GO_HINT_METHOD, p, NULL, &sd, &found, NULL, err))) goto out;
    any |= found;
    if (any && !(st = gopt_go_hints_from(fz, p->cm, p->cost, p->ndev, nh, hp, found ? &sd : NULL, dev, feat, group,
                                         err)))
        *have = 1;
out:
    for (int h = 0; h < nh; h++) gopt_decisions_destroy(&hd[h]);
    gopt_decisions_destroy(&sd);
    return st;
}

size_t gopt_go_hint_references(int nh, char *buf, size_t cap) {
    size_t len = 0;
    if (cap) buf[0] = 0;
    for (int c = 0; gopt_go_hint_combos[c]; c++)
        for (int h = 0; h < nh && h < GOPT_POLICY_MAX_HINTS && gopt_go_hint_placers[h]; h++) {
            const int w = snprintf(buf + (len < cap ? len : cap), len < cap ? cap - len : 0, "%s%s%s", len ? "," : "",
                                   gopt_go_hint_placers[h], gopt_go_hint_combos[c]);
            len += (size_t)w;
        }
    if (len >= cap) {
        if (cap) buf[0] = 0;
        return 0;
    }
    return len;
}

/* Whether the comma-separated list refs names combination want (parts in any order). */
static int refs_name(const gopt_bl_registry *reg, const char *refs, const gopt_bl_combo *want) {
    for (const char *p = refs; p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char spec[128];
        gopt_bl_combo c;
        if (len < sizeof spec) {
            memcpy(spec, p, len);
            spec[len] = 0;
            if (gopt_bl_combo_parse(reg, spec, &c, NULL) == GOPT_OK && !memcmp(&c, want, sizeof c)) return 1;
        }
        p = e ? e + 1 : NULL;
    }
    return 0;
}

int gopt_go_hint_refs_missing(const char *refs, int nh, char *first, size_t cap) {
    gopt_bl_registry reg;
    gopt_bl_registry_init(&reg);
    int missing = 0;
    if (first && cap) first[0] = 0;
    for (int h = 0; h < nh && h < GOPT_POLICY_MAX_HINTS && gopt_go_hint_placers[h]; h++)
        for (int c = 0; gopt_go_hint_combos[c]; c++) {
            char spec[64];
            gopt_bl_combo want;
            snprintf(spec, sizeof spec, "%s%s", gopt_go_hint_placers[h], gopt_go_hint_combos[c]);
            if (gopt_bl_combo_parse(&reg, spec, &want, NULL) || refs_name(&reg, refs, &want)) continue;
            if (!missing++ && first && cap) snprintf(first, cap, "%s", spec);
        }
    return missing;
}

gopt_status tr_build_hints(gopt_trainer *t, tr_graph *G, tr_hot *H, gopt_error *err) {
    const int32_t n = G->fz->n;
    const int nh = gopt_policy_get_config(t->pol)->hints;
    G->hint_dev = gopt_malloc(sizeof(int32_t) * (size_t)nh * (size_t)n, err);
    G->hint_feat = gopt_malloc(sizeof(float) * (size_t)n * GOPT_POLICY_NHINT, err);
    G->hint_group = gopt_malloc(sizeof(int32_t) * (size_t)n, err);
    if (!G->hint_dev || !G->hint_feat || !G->hint_group) return GOPT_ENOMEM; /* freed with the graph */
    gopt_bl_sim_ctx ctx;
    gopt_bl_problem bp;
    gopt_bl_options opt = {0};
    opt.seed = t->o.seed;
    gopt_bl_problem_on_sim(&bp, &ctx, H->sim, H->scratch[0], G->cm, &opt);
    int have = 0;
    const int hq = gopt_policy_get_config(t->pol)->hint_quality;
    gopt_status st;
    if (hq && t->o.greedy_styles != GOPT_GO_STYLES_OWN) { /* keep every combination: gopt_trainer_greedy's styles */
        G->hint_table = gopt_calloc(1, sizeof *G->hint_table, err);
        if (!G->hint_table) return GOPT_ENOMEM;
        /* METIS's extra draws only where they are styles (gopt_go_hint_styles with all) */
        st = gopt_go_hint_table_build(&bp, nh, t->o.greedy_styles == GOPT_GO_STYLES_ALL ? GOPT_GO_METIS_DRAWS : 0,
                                      t->o.sim_threads, G->hint_table, err);
        if (!st) st = gopt_go_hints_pick(&bp, G->hint_table, -1, G->hint_dev, G->hint_feat, G->hint_group, G->hint_q,
                                         &have, err);
    } else {
        st = gopt_go_hints(&bp, nh, t->o.sim_threads, G->hint_dev, G->hint_feat, G->hint_group, hq ? G->hint_q : NULL, &have, err);
    }
    if (st) {
        gopt_error_prefix(err, "graph '%s': hints", gopt_graph_name(G->g));
        return st;
    }
    G->hint_state = have ? 1 : -1;
    if (!have) {
        free(G->hint_dev);
        free(G->hint_feat);
        free(G->hint_group);
        G->hint_group = NULL;
        G->hint_dev = NULL;
        G->hint_feat = NULL;
    }
    return GOPT_OK;
}
