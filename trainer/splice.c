/* splice.c: the splice search, a local search around the best answer that runs beside PPO
 * (o.splice children per PPO step; gopt finetune's default 64).
 *
 * After each PPO step on graph G: the search's parent P is the best answer it knows (its own
 * best, or PPO's incumbent G->best_act when that is faster). Each child is P with a window of
 * the step's samples spliced in: one of the K samples (drawn uniformly) and a contiguous run of
 * nodes in topological order, SPLICE_WMIN..SPLICE_WMAX of the graph (log-uniform, at least one
 * node), whose priority levels and fusion levels the child takes from that sample; placement stays
 * P's, so the memory masks the decoder applied to P hold for every child. A share o.splice_place
 * of the children move placement instead: every colocation group with a node in the window goes
 * to one other device, drawn from the policy's (unconditioned) placement logits of the window's
 * first node with its current device left out; their priorities and fusion levels stay P's, and
 * the simulator drops one that runs out of memory (the samples' placements are greedy's almost
 * everywhere, so without these moves the search never tries another device). The children are
 * turned into decisions the way their parent was (G->sp_var: the fusion pass and tie order of
 * tr_judge_variants' variant it took from PPO's incumbent, G->best_var; until 2026-12-03 always
 * the checkpoint's own pass with critical-path ties, the samples' way, so a parent judged under
 * another variant had children that differed from it everywhere) and simulated in batches of
 * o.splice_batch (by default, and at most, K: the sample slots; a child whose window changes
 * nothing is the parent and is skipped);
 * after each batch the fastest that fits and beats the search's best
 * becomes its best (G->sp_s, sp_act, sp_dec), which gopt_trainer_best counts, and the next batch's
 * parent. Like the hint pass's answers
 * (G->alt) they are kept apart from PPO's incumbent: rewards, self-imitation and G->best see only
 * the policy's own samples, so PPO runs as it would without the search, less the time the children
 * take (a child costs a fusion pass and a simulation, no decoding).
 *
 * Every move is the policy's: a child's levels are what the policy sampled for those nodes (on an
 * earlier prefix), and a placement move's device is drawn from the policy's own placement scores,
 * set into the best answer it has found; no baseline's answer enters. The
 * children's randomness is a stream seeded by (seed, step), so a resumed run draws what the
 * uninterrupted one would. One graph per step (gopt_trainer_options_check): under data-parallel
 * fine-tuning every rank then draws all K samples (it simulates its share) and holds the same
 * incumbent (tr_share_bests), so every rank runs the same children and N ranks end where one
 * process does.
 *
 * Measured (2026-12-02, gopt finetune 60 s on 4 V100s, six validation models): docs/results.md,
 * "The splice search".
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trainer_internal.h"

#define SPLICE_WMIN 0.002 /* a window's share of the graph's nodes, at least */
#define SPLICE_WMAX 0.03  /* and at most */

/* The search's parent is PPO's incumbent when that is faster than the search's own best. */
static gopt_status adopt_incumbent(tr_graph *G, gopt_error *err) {
    const size_t n = (size_t)G->fz->n;
    if (!G->has_best_act || !(G->best < G->sp_s)) return GOPT_OK;
    if (!G->sp_act && !(G->sp_act = gopt_malloc(sizeof(int32_t) * 3 * (n ? n : 1), err))) return GOPT_ENOMEM;
    memcpy(G->sp_act, G->best_act, sizeof(int32_t) * 3 * n);
    G->sp_s = G->best;
    G->sp_var = G->best_var; /* its children are made as it was */
    G->has_sp_dec = 0; /* G->best_dec has them; the search's own answers get their own */
    return GOPT_OK;
}

gopt_status tr_splice_step(gopt_trainer *t, gopt_error *err) {
    const int M = t->o.splice;
    if (M <= 0) return GOPT_OK;
    if (t->nsel != 1) return gopt_error_set(err, GOPT_EINVAL, "trainer: splice needs one graph per step");
    tr_graph *G = &t->graphs[t->sel[0]];
    gopt_status st = adopt_incumbent(G, err);
    if (st || !isfinite(G->sp_s)) return st; /* no parent yet (self-imitation off: PPO keeps no actions) */
    const int K = t->o.samples, Bo = t->o.splice_batch > 0 ? t->o.splice_batch : K;
    const int B = M < Bo ? M : Bo; /* a batch: o.splice_batch children, at most the sample slots */
    const int32_t n = G->fz->n;
    if (n < 1) return GOPT_OK;
    const size_t N3 = 3 * (size_t)n;
    int32_t *kids = gopt_malloc(sizeof(int32_t) * N3 * (size_t)B, err);
    if (!kids) return GOPT_ENOMEM;
    gopt_rng r;
    gopt_rng_seed(&r, (t->o.seed ^ 0x73706c6963650000ull) * 0x9E3779B97F4A7C15ull + (uint64_t)t->step);
    gopt_bl_problem bp;
    if ((st = tr_decisions_for(t, n, err)) || (st = tr_problem(t, t->sel[0], &bp, err))) goto out;
    /* placement moves (o.splice_place): the window's units on another device, drawn from the
     * policy's unconditioned placement logits of the window's first node (its current device out) */
    const double pf = t->o.splice_place;
    const int W = gopt_policy_get_config(t->pol)->max_devices;
    float *lg = NULL;
    unsigned char *mark = NULL;
    if (pf > 0 && G->ndev > 1) {
        lg = gopt_malloc(sizeof(float) * (size_t)n * (size_t)W, err);
        mark = gopt_calloc((size_t)n, 1, err);
        if (!lg || !mark) {
            st = GOPT_ENOMEM;
            goto out2;
        }
        if ((st = gopt_policy_logits(t->pol, GOPT_TASK_PLACE, lg, err))) goto out2;
    }
    gopt_policy_actions as[GOPT_TRAINER_MAX_SAMPLES];
    for (int m0 = 0; m0 < M; m0 += B) { /* batch by batch, each from the best so far */
        int nk = 0;
        for (int m = m0; m < M && m < m0 + B; m++) {
            const gopt_policy_actions S = tr_actions(t, 0, (int)gopt_rng_below(&r, (uint64_t)K));
            int32_t *c = kids + N3 * (size_t)nk;
            memcpy(c, G->sp_act, sizeof(int32_t) * N3);
            const double f = SPLICE_WMIN * pow(SPLICE_WMAX / SPLICE_WMIN, gopt_rng_uniform(&r));
            const int32_t w = (int32_t)(f * n) + 1, r0 = (int32_t)gopt_rng_below(&r, (uint64_t)n);
            int changed = 0;
            if (lg && gopt_rng_uniform(&r) < pf) { /* a placement move */
                const int32_t v0 = G->fz->topo[r0], cur = c[v0];
                double z = 0, p[16], mx = -INFINITY;
                for (int d = 0; d < G->ndev; d++)
                    if (d != cur && lg[(size_t)v0 * W + d] > mx) mx = lg[(size_t)v0 * W + d];
                for (int d = 0; d < G->ndev; d++) z += p[d] = d == cur ? 0 : exp((double)lg[(size_t)v0 * W + d] - mx);
                double u = gopt_rng_uniform(&r) * z;
                int to = -1;
                for (int d = 0; d < G->ndev; d++) {
                    if (d == cur) continue;
                    to = d;
                    if ((u -= p[d]) < 0) break;
                }
                for (int32_t i = r0; i < r0 + w && i < n; i++) mark[G->unit_first[G->fz->topo[i]]] = 1;
                for (int32_t v = 0; v < n; v++)
                    if (mark[G->unit_first[v]]) {
                        changed |= c[v] != to;
                        c[v] = to;
                    }
                for (int32_t i = r0; i < r0 + w && i < n; i++) mark[G->unit_first[G->fz->topo[i]]] = 0;
            } else {
                for (int32_t i = r0; i < r0 + w && i < n; i++) {
                    const int32_t v = G->fz->topo[i];
                    changed |= c[n + v] != S.sched[v] || c[2 * (size_t)n + v] != S.fuse[v];
                    c[n + v] = S.sched[v];
                    c[2 * (size_t)n + v] = S.fuse[v];
                }
            }
            if (!changed) continue; /* the parent itself: nothing to simulate */
            as[nk++] = (gopt_policy_actions){c, c + n, c + 2 * (size_t)n};
        }
        if (!nk) continue;
        if ((st = tr_variants_render(t, G, as, nk, G->sp_var, NULL, &bp, t->dec, err))) goto out2;
        int ok[GOPT_TRAINER_MAX_SAMPLES];
        if ((st = tr_simulate(t, G, nk, ok, err))) goto out2;
        int best = -1;
        for (int k = 0; k < nk; k++) {
            const double s = t->res[k].step_time_s;
            if (ok[k] && !t->res[k].oom && s > 0 && isfinite(s) && s < (best < 0 ? G->sp_s : t->res[best].step_time_s))
                best = k;
        }
        if (best >= 0) {
            if ((st = tr_decisions_fit(&G->sp_dec, n, err))) goto out2;
            gopt_decisions_copy(&G->sp_dec, &t->dec[best]);
            memcpy(G->sp_act, kids + N3 * (size_t)best, sizeof(int32_t) * N3);
            G->sp_s = t->res[best].step_time_s;
            G->has_sp_dec = 1;
        }
    }
out2:
    free(lg);
    free(mark);
out:
    free(kids);
    return st;
}
