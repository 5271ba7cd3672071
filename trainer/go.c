/* go.c: zero-shot inference with a trained policy: the `go` method behind
 * the optimizer seam. One forward over the graph; the greedy decisions, or
 * the best of the greedy ones and K samples as judged by the problem's
 * evaluator (the simulator when wired in). Tasks the checkpoint was not
 * trained for get the defaults (device 0, topological priority, no fusion).
 *
 * Memory: the decoder gets the baselines' memory model (per-node charges,
 * per-device capacities) and masks the devices a unit would overflow. That
 * model leaves out tensor lifetimes and received copies, so the evaluator
 * may still report out of memory; then the repair step, part of GO's
 * decoder, decodes again (the trunk's forward is reused) with each
 * overflowing device's capacity scaled by (what the decoder's model counts
 * on it / the evaluator's peak) x 0.95, or, without peaks, capped at 75% of
 * what the model counts (all devices x0.75 when the evaluator cannot tell
 * which): the rule gopt_bl_combo_decide applies to the classical placers.
 * GOPT_GO_REPAIRS rounds at most; the best candidate over every round is
 * returned (one that fits beats any that does not). No classical method's
 * answer is ever substituted. With K samples the repair follows the peaks
 * of each round's best candidate, which may be a sample, so the greedy
 * trajectory alone (K = 0) is run first from the same caps and the better
 * answer kept: the best of K is never worse than greedy.
 * Ties: within one of GO's priority levels a device runs the node with the
 * longer critical path on GO's placement first (cp, as in training) or the
 * earlier one in topological order (topo, fifo's order); by default every
 * candidate is judged under both and the faster kept (o->ties).
 * Fusion pass: GO decides a fusion level per node; the pass that turns levels
 * into groups is the checkpoint's own (merging, cfg.fuse_merge), the
 * first-fit one (gopt_policy_fusion_groups) or, with hints, the merging pass
 * within the groups of the hint the candidate was decoded under
 * (gopt_policy_fusion_groups_within: the levels choose which of the hint's
 * fusions to take); by default every candidate is judged under the three and
 * the fastest kept (o->fusion_pass). The decoder still conditions on the
 * groups of its own pass while it decodes.
 * Hints: a checkpoint whose network has cfg.hints = H reads H classical
 * placements and a classical schedule and fusion as features (hint.c);
 * every decision is still the decoder's. Styles (o->styles, checkpoints with
 * hint quality): the best hint is its placer's fastest of gopt_go_hint_combos;
 * by default GO also decodes greedily with the hints conditioned on each other
 * combination of that placer and on the GOPT_GO_WIDE_STYLES fastest of the other
 * placers' that fit (ALL; BEST: that placer's alone; gopt_go_hint_styles,
 * gopt_go_hints_pick: that combination reads as the best hint, its placement
 * first and its schedule and fusion the features), and those candidates are
 * judged beside the greedy one and the samples: GO's own groups and priorities
 * after the XLA-, xlamo- and TVM-style hints of the fastest placements, not
 * only after the fastest one's. The trunk is the
 * same under every conditioning, so a new forward runs the heads alone
 * (gopt_policy_set_train_heads).
 * Cost: one forward plus (K + 1 + S) decodes and 6 (K + 1 + S) evaluations per
 * round (S <= GOPT_GO_MAX_STYLES styles, each with a heads-only forward; one evaluation per fusion
 * pass and tie order); with K > 0 the greedy trajectory's rounds, with its styles, come first,
 * and the first round with the samples reuses its first round's 1 + S candidates (the same caps,
 * so the same decisions) instead of decoding them again.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gopt_trainer.h"
#include "trainer_internal.h" /* tr_actions_to_decisions: a candidate's variants share its critical path */

const char *gopt_trainer_default_checkpoint(void) {
    const char *e = getenv("GOPT_CHECKPOINT");
    if (e && e[0]) return e;
#ifdef GOPT_DEFAULT_CHECKPOINT
    return GOPT_DEFAULT_CHECKPOINT;
#else
    return "trainer/checkpoints/go-onegemm.ckpt";
#endif
}

void gopt_go_decoder_inputs(const gopt_bl_problem *p, double *node_time, double *node_mem, double *dev_cap) {
    const gopt_frozen *fz = gopt_graph_frozen(p->graph);
    for (int32_t v = 0; v < fz->n; v++) {
        node_time[v] = p->cost->time[(size_t)v * p->cost->ndev];
        node_mem[v] = gopt_bl_node_memory(p, v);
    }
    for (int k = 0; k < p->ndev; k++) dev_cap[k] = gopt_bl_device_capacity(p, k);
}

/* Tighten the decoder's capacities after decisions d ran out of memory
 * (oom: the evaluator's flag); the rule of the file's header. */
static void repair_caps(const gopt_bl_problem *p, const gopt_decisions *d, int oom, const double *node_mem,
                        double *cap) {
    double used[GOPT_POLICY_MAX_DEVICES] = {0}, peak[GOPT_POLICY_MAX_DEVICES];
    for (int32_t v = 0; v < d->n; v++) used[d->device[v]] += node_mem[v];
    int fixed = 0;
    if (p->last_peak && p->last_peak(p->eval_ctx, peak))
        for (int k = 0; k < p->ndev; k++) {
            double phys = gopt_cost_device_memory(p->cm, k);
            if (peak[k] <= phys || used[k] <= 0) continue;
            double c = 0.95 * phys * used[k] / peak[k];
            cap[k] = c < cap[k] ? c : 0.95 * cap[k];
            fixed = 1;
        }
    if (!fixed && oom > 0 && oom <= p->ndev) {
        int k = oom - 1;
        double c = 0.75 * (used[k] > 0 ? used[k] : cap[k]);
        cap[k] = c < cap[k] ? c : 0.75 * cap[k];
        fixed = 1;
    }
    if (!fixed)
        for (int k = 0; k < p->ndev; k++) cap[k] *= 0.75;
}

int gopt_go_ties_parse(const char *s) {
    return !s ? -1 : !strcmp(s, "best") ? GOPT_GO_TIES_BEST : !strcmp(s, "cp") ? GOPT_GO_TIES_CP
                   : !strcmp(s, "topo") ? GOPT_GO_TIES_TOPO : -1;
}

int gopt_go_pass_parse(const char *s) {
    return !s ? -1 : !strcmp(s, "best") ? GOPT_GO_PASS_BEST : !strcmp(s, "merge") ? GOPT_GO_PASS_MERGE
                   : !strcmp(s, "first") ? GOPT_GO_PASS_FIRST : !strcmp(s, "hint") ? GOPT_GO_PASS_HINT
                   : !strcmp(s, "free") ? GOPT_GO_PASS_FREE : -1;
}

int gopt_go_styles_parse(const char *s) {
    return !s ? -1 : !strcmp(s, "all") ? GOPT_GO_STYLES_ALL : !strcmp(s, "best") ? GOPT_GO_STYLES_BEST
                   : !strcmp(s, "own") ? GOPT_GO_STYLES_OWN : -1;
}

/* Is fusion pass pi (0: the checkpoint's own, 1: the other, 2: bounded by the hint's groups;
 * merge: what pass pi merges by) judged under option fpass? */
static int pass_wanted(int fpass, int pi, int merge, int hints) {
    switch (fpass) {
    case GOPT_GO_PASS_BEST: return pi < 2 || hints;
    case GOPT_GO_PASS_FREE: return pi < 2;
    case GOPT_GO_PASS_HINT: return hints ? pi == 2 : pi == 0;
    default: return pi < 2 && merge == (fpass == GOPT_GO_PASS_MERGE);
    }
}

static gopt_status set_hints(gopt_policy *pol, const gopt_bl_problem *p, int nh, int have, const int32_t *hdev,
                             const float *hfeat, const int32_t *hgroup, const float *q, gopt_error *err) {
    const int32_t n = gopt_graph_frozen(p->graph)->n;
    return gopt_policy_set_hints(pol, n, p->ndev, nh, have ? hdev : NULL, have ? hfeat : NULL, have ? hgroup : NULL, q,
                                 err);
}

/* A candidate's variants (three fusion passes x two tie orders), judged on the problem's threads. */
#define GO_VARIANTS 6
typedef struct {
    gopt_decisions d[GO_VARIANTS];
    double s[GO_VARIANTS]; /* -1: not valid */
    int oom[GO_VARIANTS];
} go_variants;

static void judge_variant(void *arg, const gopt_bl_problem *q, int v) {
    go_variants *j = arg;
    j->s[v] = -1;
    j->oom[v] = 0;
    if (!gopt_decisions_validate(&j->d[v], q->graph, q->ndev, NULL)) j->s[v] = gopt_bl_evaluate(q, &j->d[v], &j->oom[v]);
}

gopt_status gopt_go_decide(const gopt_go_options *o, const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err) {
    const char *path = o && o->checkpoint ? o->checkpoint : gopt_trainer_default_checkpoint();
    const gopt_frozen *fz = gopt_graph_frozen(p->graph);
    const int32_t n = fz->n;
    gopt_policy *pol = NULL;
    float *feat = NULL, *pred = NULL;
    double *ntime = NULL, *nmem = NULL, *cap = NULL, *cap0 = NULL;
    int32_t *buf = NULL, *group = NULL, *hdev = NULL, *hgroup = NULL;
    float *hfeat = NULL;
    float q[GOPT_POLICY_MAX_HINTS] = {0};
    gopt_go_hint_table tab = {0};
    int style[GOPT_GO_MAX_STYLES], nstyle = 0, cond = -1; /* cond: the table entry the hints read as the best
                                                              (-1: the true hints) */
    gopt_decisions rbest = {0}, first = {0}; /* first: pass 0's first round's best */
    tr_cp_cache cpc = {0}; /* the priorities of the last placement ranked: a candidate's passes share them */
    go_variants jv;
    memset(&jv, 0, sizeof jv);
    gopt_bl_forks forks; /* the candidates' judging threads, made once */
    memset(&forks, 0, sizeof forks);
    unsigned tasks = GOPT_TASKS_ALL;
    gopt_status st;
    if ((st = gopt_policy_load(&pol, path, err)) || (st = gopt_trainer_checkpoint_tasks(path, &tasks, err))) {
        gopt_error_prefix(err, "checkpoint"); /* the caller names the method */
        goto out;
    }
    if (o && o->device && (st = gopt_policy_set_device(pol, o->device, err))) goto out;
    const int threads = o && o->threads > 0 ? o->threads : GOPT_GO_THREADS;
    if ((st = gopt_policy_set_threads(pol, threads, err))) goto out;
    if (p->ndev > gopt_policy_get_config(pol)->max_devices) {
        st = gopt_error_set(err, GOPT_EINVAL, "checkpoint %s places on at most %d devices, asked for %d", path,
                            gopt_policy_get_config(pol)->max_devices, p->ndev);
        goto out;
    }
    size_t N = (size_t)(n ? n : 1);
    feat = gopt_malloc(sizeof(float) * N * GOPT_POLICY_NFEAT, err);
    pred = gopt_malloc(sizeof(float) * N, err);
    ntime = gopt_malloc(sizeof(double) * N, err);
    nmem = gopt_malloc(sizeof(double) * N, err);
    cap = gopt_malloc(sizeof(double) * (size_t)p->ndev, err);
    cap0 = gopt_malloc(sizeof(double) * (size_t)p->ndev, err);
    buf = gopt_malloc(sizeof(int32_t) * 3 * N, err);
    group = gopt_malloc(sizeof(int32_t) * N, err);
    if (!feat || !pred || !ntime || !nmem || !cap || !cap0 || !buf || !group) {
        st = GOPT_ENOMEM;
        goto out;
    }
    gopt_go_decoder_inputs(p, ntime, nmem, cap);
    memcpy(cap0, cap, sizeof(double) * (size_t)p->ndev);
    for (int32_t v = 0; v < n; v++) pred[v] = (float)ntime[v];
    if ((st = gopt_policy_features(fz, p->ndev, pred, feat, err))) goto out;
    if ((st = gopt_policy_set_decoder_inputs(pol, n, p->ndev, ntime, nmem, cap, err))) goto out;
    const int nh = gopt_policy_get_config(pol)->hints;
    if (nh) { /* the hints: classical solutions read as features */
        int have = 0;
        hdev = gopt_malloc(sizeof(int32_t) * N * (size_t)nh, err);
        hfeat = gopt_malloc(sizeof(float) * N * GOPT_POLICY_NHINT, err);
        hgroup = gopt_malloc(sizeof(int32_t) * N, err);
        if (!hdev || !hfeat || !hgroup) {
            st = GOPT_ENOMEM;
            goto out;
        }
        const int hq = gopt_policy_get_config(pol)->hint_quality;
        const int sty = o ? o->styles : GOPT_GO_STYLES_ALL;
        if (hq && sty != GOPT_GO_STYLES_OWN) { /* the other styles, judged too */
            const int draws = sty == GOPT_GO_STYLES_ALL ? GOPT_GO_METIS_DRAWS : 0; /* styles only with all */
            if ((st = gopt_go_hint_table_build(p, nh, draws, threads, &tab, err))) goto out;
            nstyle = gopt_go_hint_styles(&tab, sty == GOPT_GO_STYLES_ALL, style, GOPT_GO_MAX_STYLES);
            /* the trunk is the same under every conditioning: a new forward runs the heads alone */
            if (nstyle && (st = gopt_policy_set_train_heads(pol, 1, err))) goto out;
            st = gopt_go_hints_pick(p, &tab, -1, hdev, hfeat, hgroup, q, &have, err);
        } else {
            st = gopt_go_hints(p, nh, threads, hdev, hfeat, hgroup, hq ? q : NULL, &have, err);
        }
        if (st || (st = set_hints(pol, p, nh, have, hdev, hfeat, hgroup, q, err))) goto out;
    }
    if ((st = gopt_policy_forward(pol, fz, feat, p->ndev, NULL, err))) goto out;
    for (int v = 0; v < GO_VARIANTS; v++)
        if ((st = gopt_decisions_init(&jv.d[v], n, err))) goto out;
    if ((st = gopt_bl_forks_init(p, threads, &forks, err))) goto out;
    if ((st = gopt_decisions_init(&rbest, n, err))) goto out;
    gopt_policy_actions a = {buf, buf + N, buf + 2 * N};
    gopt_rng rng;
    gopt_rng_seed(&rng, o ? o->seed : 1);
    const int K = o ? o->samples : 0;
    if (K > 0 && (st = gopt_decisions_init(&first, n, err))) goto out;
    const float temp = o && o->temperature > 0.0f ? o->temperature : 1.0f;
    const int ties = o ? o->ties : GOPT_GO_TIES_BEST, fpass = o ? o->fusion_pass : GOPT_GO_PASS_BEST;
    const int own = gopt_policy_get_config(pol)->fuse_merge != 0; /* the checkpoint's own fusion pass */
    double best = INFINITY, first_s = INFINITY;
    int best_oom = 1, have = 0, have_first = 0, first_oom = 1;
    for (int pass = K > 0 ? 0 : 1; pass < 2; pass++) { /* 0: the greedy trajectory alone; 1: with K samples */
        const int Kp = (pass ? K : 0) + nstyle; /* candidates 1..nstyle: greedy under the styles */
        memcpy(cap, cap0, sizeof(double) * (size_t)p->ndev);
        for (int round = 0; round <= GOPT_GO_REPAIRS; round++) {
            /* the caps live in `cap`, which the policy reads at every decode */
            double rb = INFINITY;
            int rb_oom = 1, rb_flag = 0, have_round = 0, k0 = 0;
            if (pass == 1 && round == 0 && have_first) {
                /* under the same caps the greedy candidates 0..nstyle decode and judge as in pass
                 * 0's first round: start from its best, then the samples */
                rb = first_s, rb_oom = first_oom, have_round = 1, k0 = nstyle + 1;
                gopt_decisions_copy(&rbest, &first);
            }
            for (int k = k0; k <= Kp; k++) {
                const int want = k >= 1 && k <= nstyle ? style[k - 1] : -1; /* candidate k's conditioning */
                if (want != cond) {
                    int hv = 0;
                    if ((st = gopt_go_hints_pick(p, &tab, want, hdev, hfeat, hgroup, q, &hv, err)) ||
                        (st = set_hints(pol, p, nh, hv, hdev, hfeat, hgroup, q, err)) ||
                        (st = gopt_policy_forward(pol, fz, feat, p->ndev, NULL, err)))
                        goto out;
                    cond = want;
                }
                st = k == 0 || want >= 0 ? gopt_policy_greedy(pol, &a, err)
                                         : gopt_policy_sample_tempered(pol, &rng, temp, &a, err);
                if (st) goto out;
                /* candidate k under each fusion pass (the checkpoint's own first, the other, the
                 * hint-bounded one) and tie order (cp first), judged on the threads, kept in this order */
                int nv = 0;
                for (int v = 0; v < GO_VARIANTS; v++) {
                    const int pi = v / 2, merge = pi == 1 ? !own : own, topo = v % 2; /* pi 2: merging, bounded */
                    if (ties != GOPT_GO_TIES_BEST && topo != (ties == GOPT_GO_TIES_TOPO)) continue;
                    if (!(tasks & GOPT_TASK_BIT(GOPT_TASK_FUSE)) ? pi > 0 : !pass_wanted(fpass, pi, merge, nh > 0))
                        continue; /* no fusion learned: every pass gives the same decisions */
                    if ((st = tr_actions_to_decisions(fz, tasks, merge, pi == 2 ? hgroup : NULL, topo ? NULL : p, &cpc,
                                                      &a, &jv.d[nv], group, err)))
                        goto out;
                    nv++;
                }
                if (!have && round == 0 && k == 0 && nv) gopt_decisions_copy(d, &jv.d[nv - 1]); /* the answer if nothing is valid */
                gopt_bl_forks_run(&forks, nv, judge_variant, &jv);
                for (int v = 0; v < nv; v++) {
                    const double s = jv.s[v];
                    const int oom = jv.oom[v];
                    if (!(s >= 0) || !isfinite(s)) continue; /* not valid, or the evaluation failed */
                    /* a fitting solution beats any OOM one; then the shorter step */
                    if (!have_round || (rb_oom && !oom) || ((oom != 0) == rb_oom && s < rb)) {
                        rb = s;
                        rb_oom = oom != 0;
                        rb_flag = oom;
                        have_round = 1;
                        gopt_decisions_copy(&rbest, &jv.d[v]);
                    }
                }
            }
            if (!have_round) break;
            if (pass == 0 && round == 0) {
                first_s = rb, first_oom = rb_oom, have_first = 1;
                gopt_decisions_copy(&first, &rbest);
            }
            if (!have || (best_oom && !rb_oom) || (rb_oom == best_oom && rb < best)) {
                best = rb;
                best_oom = rb_oom;
                have = 1;
                gopt_decisions_copy(d, &rbest);
            }
            if (!rb_oom || round == GOPT_GO_REPAIRS) break;
            /* repair: the evaluator's peaks of the round's best (evaluated again: the last one
             * evaluated may be another candidate or tie order) */
            (void)gopt_bl_evaluate(p, &rbest, &rb_flag);
            repair_caps(p, &rbest, rb_flag, nmem, cap);
        }
    }
out:
    tr_cp_cache_free(&cpc);
    gopt_go_hint_table_free(&tab);
    for (int v = 0; v < GO_VARIANTS; v++) gopt_decisions_destroy(&jv.d[v]);
    gopt_bl_forks_free(&forks);
    gopt_decisions_destroy(&rbest);
    gopt_decisions_destroy(&first);
    gopt_policy_free(pol);
    free(feat);
    free(pred);
    free(ntime);
    free(nmem);
    free(cap);
    free(cap0);
    free(buf);
    free(group);
    free(hdev);
    free(hfeat);
    free(hgroup);
    return st;
}
