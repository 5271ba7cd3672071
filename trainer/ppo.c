/* ppo.c: one PPO step and one imitation (warm start) step.
 *
 * PPO treats each node decision as an action sharing its sample's advantage:
 * per decision (task t, node v) of sample k the ratio is
 * r = exp(logp_new - logp_old) and the loss is
 *   L = -1/(K M) sum_k sum_{t,v} min(r A_k, clip(r, 1-eps, 1+eps) A_k)
 *       - beta/M sum_{t,v} entropy_{t,v}
 * with M the number of learned decisions of the graph (a colocation group's
 * placement counts once). dL/dlogp_new = -A_k r / (K M) where the unclipped
 * term is the minimum, else 0: these are the per-node weights handed to
 * gopt_policy_backward_batch, which replays the conditioned decoder once per
 * sample (teacher-forced: the entropy term is sample 0's, the rows' logits
 * depend on the sample's earlier decisions) and then runs ONE network
 * backward for all K (it is linear in the logit gradients). The forward
 * sets the decoder's inputs first (tr_forward: node times, the baselines'
 * memory model), so samples are memory-masked as at inference.
 *
 * A non-finite loss or gradient norm skips the epoch's update (gradients
 * zeroed, Adam untouched) and is counted in stats->skipped.
 *
 * Data-parallel (shard.c): a rank rolls out the slots (graphs of the step)
 * it works on and simulates its share of their samples; gathers give every
 * rank every sample's result and every slot's statistics, which every rank
 * turns into rewards, advantages, stats and bests in slot order; each slot's
 * leader computes the slot's gradient alone, and tr_grad_reduce adds the
 * slots' gradients in slot order. One process runs the same code.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trainer_internal.h"

gopt_status tr_forward(gopt_trainer *t, tr_graph *G, gopt_error *err) {
    const int32_t n = G->fz->n;
    tr_hot *H = NULL;
    gopt_status s = tr_hot_get(t, (int)(G - t->graphs), &H, err);
    if (s) return s;
    if (gopt_policy_get_config(t->pol)->hints && !G->hint_state && (s = tr_build_hints(t, G, H, err))) return s;
    if ((s = gopt_policy_set_hints(t->pol, n, G->ndev, gopt_policy_get_config(t->pol)->hints, G->hint_dev,
                                   G->hint_feat, G->hint_group, G->hint_q, err)))
        return s;
    s = gopt_policy_set_decoder_inputs(t->pol, n, G->ndev, H->dec_in, H->dec_in + n, H->dec_in + 2 * (size_t)n, err);
    if (s) return s;
    return gopt_policy_forward(t->pol, G->fz, H->feat, G->ndev, NULL, err);
}

static int task_on(const gopt_trainer *t, int task) { return (t->o.tasks & GOPT_TASK_BIT(task)) != 0; }

static int row_learned(const gopt_trainer *t, const tr_graph *G, int task, int32_t v) {
    return task_on(t, task) && (task != GOPT_TASK_PLACE || G->unit_first[v] == v);
}

static int32_t *act_of(gopt_policy_actions *a, int task) {
    return task == GOPT_TASK_PLACE ? a->place : task == GOPT_TASK_SCHED ? a->sched : a->fuse;
}

/* Sum of the entropies in t->ent over the learned rows of G. */
static double learned_entropy(const gopt_trainer *t, const tr_graph *G) {
    const int32_t n = G->fz->n;
    double es = 0;
    for (int task = 0; task < GOPT_TASK_COUNT; task++)
        for (int32_t v = 0; v < n; v++)
            if (row_learned(t, G, task, v)) es += t->ent[(size_t)task * n + v];
    return es;
}

/* Entropy weights -beta/M on every learned row of slot b's graph (t->rent). */
static void entropy_weights(gopt_trainer *t, tr_graph *G) {
    const int32_t n = G->fz->n;
    const float we = -(float)(t->o.entropy_coef / (G->rows ? G->rows : 1));
    memset(t->rent, 0, sizeof(float) * 3 * (size_t)n);
    for (int task = 0; task < GOPT_TASK_COUNT; task++)
        for (int32_t v = 0; v < n; v++)
            if (row_learned(t, G, task, v)) t->rent[(size_t)task * n + v] = we;
}

/* --backward rounds (the reference path): one policy backward per sample,
 * K network backwards. (Before the conditioned decoder this merged the
 * samples' weights per distinct action; with logits that depend on the
 * earlier decisions and on memory masks, a merged action set is not one the
 * decoder made, so each sample is replayed on its own.) Entropy weights
 * ride on sample 0. */
static gopt_status per_sample_backward(gopt_trainer *t, int b, const float *went, int *calls, gopt_error *err) {
    const size_t T3 = 3 * (size_t)t->graphs[t->sel[b]].fz->n;
    for (int k = 0; k < t->o.samples; k++) {
        gopt_policy_actions a = tr_actions(t, b, k);
        gopt_status st = gopt_policy_backward(t->pol, &a, t->w_k + (size_t)k * T3, k == 0 ? went : NULL, err);
        if (st) return st;
    }
    *calls += t->o.samples;
    return GOPT_OK;
}

/* Sample K solutions of graph G into slot b's action storage, drawing from
 * rng; keep their log-probabilities (and *ent, the mean entropy per learned
 * decision, when ent is set). Simulate samples k0..k1-1 into vals (step
 * time, or -1 when OOM or rejected); *best: the index among them of the
 * best valid one (in t->dec[best - k0]'s place: t->dec[best]), -1 when
 * none. keep: the first epoch will reuse this forward; the sampling pass
 * then also keeps each sample's gradient of its learned rows'
 * log-probabilities (and the entropy term's) for kept_backward. */
static gopt_status sample_simulate(gopt_trainer *t, tr_graph *G, int b, gopt_rng *rng, int keep, int var, int k0,
                                   int k1, double *vals, double *ent, int *best, gopt_error *err) {
    const int32_t n = G->fz->n;
    const int K = t->o.samples;
    const size_t N = (size_t)t->cap_n;
    *best = -1;
    gopt_status s = tr_forward(t, G, err);
    if (s) return s;
    if ((s = tr_decisions_for(t, n, err))) return s;
    gopt_policy_actions as[GOPT_TRAINER_MAX_SAMPLES];
    for (int k = 0; k < K; k++) as[k] = tr_actions(t, b, k);
    if (keep) { /* unit weights on the learned rows (t->rw), the entropy weights (t->rent) */
        entropy_weights(t, G);
        for (int task = 0; task < GOPT_TASK_COUNT; task++)
            for (int32_t v = 0; v < n; v++) t->rw[(size_t)task * n + v] = row_learned(t, G, task, v) ? 1.0f : 0.0f;
    }
    /* the K samples in one batched pass: the same draws from the stream as K samples in turn */
    if ((s = gopt_policy_sample_batch(t->pol, K, rng, as, t->old_logp + (size_t)b * K * 3 * N, 3 * N,
                                      ent ? t->ent : NULL, keep ? t->rw : NULL, keep ? t->rent : NULL, err)))
        return s;
    gopt_bl_problem bp;
    if ((s = tr_problem(t, (int)(G - t->graphs), &bp, err))) return s;
    if (k1 > k0 && (s = tr_variants_render(t, G, as + k0, k1 - k0, var, NULL, &bp, t->dec, err))) return s;
    if (ent) *ent = learned_entropy(t, G) / (G->rows ? G->rows : 1);
    int ok[GOPT_TRAINER_MAX_SAMPLES];
    if (k1 > k0 && (s = tr_simulate(t, G, k1 - k0, ok, err))) return s;
    for (int i = 0; i < k1 - k0; i++) {
        double step = t->res[i].step_time_s;
        int valid = ok[i] && !t->res[i].oom && step > 0 && isfinite(step);
        vals[i] = valid ? step : -1.0;
        if (valid && (*best < 0 || step < vals[*best])) *best = i;
    }
    return GOPT_OK;
}

/* Slot b's rollout: K samples from the slot's stream; the slot's leader
 * keeps their log-probabilities and *ent; this rank simulates k0..k1-1
 * (sample_simulate) and keeps the best one's decisions. */
static gopt_status rollout(gopt_trainer *t, int b, int lead, int keep, int k0, int k1, double *vals, double *ent,
                           gopt_error *err) {
    int best;
    tr_graph *G = &t->graphs[t->sel[b]];
    gopt_status s = sample_simulate(t, G, b, tr_slot_rng(t, b), keep, G->samp_var, k0, k1, vals, lead ? ent : NULL,
                                    &best, err);
    if (s) return s;
    return best >= 0 ? tr_keep_slot_best(t, b, &t->dec[best], err) : GOPT_OK;
}

gopt_status gopt_trainer_sample_best(gopt_trainer *t, int i, gopt_rng *rng, double *best_s, gopt_error *err) {
    if (i < 0 || i >= t->ng) return gopt_error_set(err, GOPT_EINVAL, "trainer: graph index %d out of range", i);
    if (!rng) return gopt_error_set(err, GOPT_EINVAL, "trainer: sampling needs an RNG");
    tr_graph *G = &t->graphs[i];
    double vals[GOPT_TRAINER_MAX_SAMPLES];
    int best;
    *best_s = INFINITY;
    /* the pre-trained policy's own samples: at placement temperature 1, whatever training's */
    (void)gopt_policy_set_task_temperature(t->pol, GOPT_TASK_PLACE, 1.0f, NULL);
    gopt_status s = sample_simulate(t, G, 0, rng, 0, 0, 0, t->o.samples, vals, NULL, &best, err);
    (void)gopt_policy_set_task_temperature(t->pol, GOPT_TASK_PLACE, t->o.place_temperature, NULL);
    if (s) return s;
    if (best >= 0) {
        *best_s = vals[best];
        gopt_policy_actions a = tr_actions(t, 0, best);
        if ((s = tr_note_best(t, G, &t->dec[best], &a, 0, vals[best], err))) return s;
    }
    /* the same samples with the other tie order and fusion passes (gopt_go_decide's defaults judge
     * all six) */
    return tr_judge_variants(t, G, t->o.samples, 1, G->hint_group, best_s, NULL, NULL, err);
}

/* Every slot's rewards, advantages (normalised over its K samples),
 * statistics and bests, in slot order, from every sample's result (vals,
 * B*K) and every slot's entropy (ents, B): the same on every rank. */
static gopt_status finish_rollouts(gopt_trainer *t, const double *vals, const double *ents, gopt_trainer_stats *st,
                                   gopt_error *err) {
    const int K = t->o.samples;
    int improved[256]; /* graphs_per_step <= 256 */
    for (int b = 0; b < t->nsel; b++) {
        tr_graph *G = &t->graphs[t->sel[b]];
        double rew[GOPT_TRAINER_MAX_SAMPLES], mean = 0, var = 0, sum_step = 0, best = INFINITY;
        int valid = 0, kb = -1;
        for (int k = 0; k < K; k++) {
            double step = vals[(size_t)b * K + k];
            if (step < 0) {
                rew[k] = t->o.invalid_reward;
                st->invalid++;
            } else {
                rew[k] = -sqrt(step / G->ref);
                sum_step += step;
                valid++;
                if (step < best) {
                    best = step;
                    kb = k;
                }
            }
            mean += rew[k];
        }
        mean /= K;
        for (int k = 0; k < K; k++) var += (rew[k] - mean) * (rew[k] - mean);
        double sd = sqrt(var / K);
        for (int k = 0; k < K; k++) t->adv[(size_t)b * K + k] = sd > 1e-9 ? (float)((rew[k] - mean) / sd) : 0.0f;
        st->reward_mean += mean;
        if (valid) {
            st->mean_step_s += sum_step / valid;
            st->mean_rel += sum_step / valid / G->ref;
            st->best_rel += best / G->ref;
            if (best < st->best_step_s || st->best_step_s == 0) st->best_step_s = best;
        } else {
            st->best_rel += INFINITY;
            st->mean_rel += INFINITY;
        }
        improved[b] = -1;
        if (kb >= 0 && best < G->best) { /* what tr_note_best does sample by sample */
            G->best = best;
            G->best_style = 0; /* a sample of the policy's own */
            improved[b] = kb;
        }
        st->best_so_far_rel += G->best / G->ref;
        st->entropy += ents[b];
    }
    return tr_share_bests(t, improved, err);
}

/* Per-decision weights of every sample for the current forward of slot b;
 * adds the graph's loss to *loss. */
static gopt_status ppo_weights(gopt_trainer *t, int b, double *loss, gopt_error *err) {
    tr_graph *G = &t->graphs[t->sel[b]];
    const int32_t n = G->fz->n;
    const int K = t->o.samples;
    const size_t N = (size_t)t->cap_n, T3 = 3 * (size_t)n;
    const double inv = 1.0 / ((double)K * (G->rows ? G->rows : 1));
    const float eps = t->o.clip_eps;
    double L = 0;
    for (int k = 0; k < K; k++) {
        gopt_policy_actions a = tr_actions(t, b, k);
        gopt_status s = gopt_policy_logprob(t->pol, &a, t->logp, k == 0 ? t->ent : NULL, NULL, NULL, err);
        if (s) return s;
        const float *olp = t->old_logp + ((size_t)b * K + (size_t)k) * 3 * N;
        const float A = t->adv[(size_t)b * K + k];
        float *w = t->w_k + (size_t)k * T3;
        memset(w, 0, sizeof(float) * T3);
        if (A == 0.0f) continue;
        for (int task = 0; task < GOPT_TASK_COUNT; task++)
            for (int32_t v = 0; v < n; v++) {
                if (!row_learned(t, G, task, v)) continue;
                size_t i = (size_t)task * n + v;
                double r = exp((double)t->logp[i] - (double)olp[i]);
                double rc = r < 1.0 - eps ? 1.0 - eps : r > 1.0 + eps ? 1.0 + eps : r;
                double u = r * A, c = rc * A;
                L -= (u < c ? u : c) * inv;
                int active = A > 0 ? r <= 1.0 + eps : r >= 1.0 - eps;
                if (active) w[i] = (float)(-A * r * inv);
            }
    }
    /* entropy bonus: weights -beta/M on every learned row */
    entropy_weights(t, G);
    L -= t->o.entropy_coef * learned_entropy(t, G) / (G->rows ? G->rows : 1);
    *loss += L;
    return GOPT_OK;
}

/* The batched path's PPO weights, computed inside the policy's backward
 * replay from each decision's current log-probability (the same formulas as
 * ppo_weights; one replay per sample instead of a logprob replay and a
 * backward replay). The replay's parts run on several threads, so the loss
 * is summed per sample (L[k]) and over the samples in order afterwards. */
typedef struct {
    gopt_trainer *t;
    tr_graph *G;
    int b;
    double inv, L[GOPT_TRAINER_MAX_SAMPLES];
} ppo_fused;

static float ppo_weight(void *ctx, int k, int task, int32_t v, float logp) {
    ppo_fused *c = ctx;
    gopt_trainer *t = c->t;
    if (!row_learned(t, c->G, task, v)) return 0.0f;
    const int K = t->o.samples;
    const float A = t->adv[(size_t)c->b * K + k];
    if (A == 0.0f) return 0.0f;
    const size_t i = (size_t)task * c->G->fz->n + v;
    const float olp = t->old_logp[((size_t)c->b * K + (size_t)k) * 3 * (size_t)t->cap_n + i];
    const float eps = t->o.clip_eps;
    double r = exp((double)logp - (double)olp);
    double rc = r < 1.0 - eps ? 1.0 - eps : r > 1.0 + eps ? 1.0 + eps : r;
    double u = r * A, cl = rc * A;
    c->L[k] -= (u < cl ? u : cl) * c->inv;
    int active = A > 0 ? r <= 1.0 + eps : r >= 1.0 - eps;
    return active ? (float)(-A * r * c->inv) : 0.0f;
}

static gopt_status fused_backward(gopt_trainer *t, int b, double *loss, int *calls, gopt_error *err) {
    tr_graph *G = &t->graphs[t->sel[b]];
    gopt_policy_actions as[GOPT_TRAINER_MAX_SAMPLES];
    for (int k = 0; k < t->o.samples; k++) as[k] = tr_actions(t, b, k);
    ppo_fused c = {t, G, b, 1.0 / ((double)t->o.samples * (G->rows ? G->rows : 1)), {0.0}};
    entropy_weights(t, G);
    gopt_status s = gopt_policy_backward_batch_fn(t->pol, t->o.samples, as, ppo_weight, &c, t->rent, t->ent, err);
    if (s) return s;
    *calls += 1;
    double L = 0.0;
    for (int k = 0; k < t->o.samples; k++) L += c.L[k];
    *loss += L - t->o.entropy_coef * learned_entropy(t, G) / (G->rows ? G->rows : 1);
    return GOPT_OK;
}

/* The first epoch when it reuses the rollout's forward (the parameters have
 * not moved): every ratio is exactly 1 (the replay would recompute the
 * sampled log-probabilities bit for bit), so every learned row of sample k
 * has weight -A_k / (K M) and its loss term -A_k / (K M); the gradient is
 * the rollout pass's kept per-sample gradients scaled by those weights, with
 * no replay (gopt_policy_backward_kept). The same loss and, within float
 * rounding, the same gradient as fused_backward. */
static gopt_status kept_backward(gopt_trainer *t, int b, double *loss, int *calls, gopt_error *err) {
    tr_graph *G = &t->graphs[t->sel[b]];
    const int32_t n = G->fz->n;
    const int K = t->o.samples;
    const double inv = 1.0 / ((double)K * (G->rows ? G->rows : 1));
    int32_t rows = 0;
    for (int task = 0; task < GOPT_TASK_COUNT; task++)
        for (int32_t v = 0; v < n; v++) rows += row_learned(t, G, task, v);
    float coef[GOPT_TRAINER_MAX_SAMPLES];
    double L = 0;
    for (int k = 0; k < K; k++) {
        const double A = t->adv[(size_t)b * K + k];
        coef[k] = (float)(-A * inv);
        L -= A * inv * rows;
    }
    gopt_status s = gopt_policy_backward_kept(t->pol, K, coef, err);
    if (s) return s;
    *calls += 1;
    *loss += L - t->o.entropy_coef * learned_entropy(t, G) / (G->rows ? G->rows : 1);
    return GOPT_OK;
}

/* Apply the accumulated gradient unless the loss or the gradient is not
 * finite (then zero it and count a skip). */
static gopt_status apply_update(gopt_trainer *t, double loss, float lr, gopt_trainer_stats *st, gopt_error *err) {
    gopt_adam_config ac = t->o.adam;
    ac.lr = lr;
    float gn = 0;
    if (!isfinite(loss)) {
        st->skipped++;
        st->grad_norm = NAN;
        gopt_policy_zero_grad(t->pol);
        return GOPT_OK;
    }
    gopt_error e2 = {0};
    gopt_status s = gopt_policy_adam_step(t->pol, &ac, &gn, &e2);
    if (s == GOPT_EINVAL && !isfinite(gn)) { /* non-finite gradient: refused, parameters untouched */
        st->skipped++;
        st->grad_norm = gn;
        gopt_policy_zero_grad(t->pol);
        return GOPT_OK;
    }
    if (s) {
        *err = e2;
        return s;
    }
    st->grad_norm = gn;
    return GOPT_OK;
}

gopt_status tr_ppo_step(gopt_trainer *t, gopt_trainer_stats *st, gopt_error *err) {
    gopt_status s;
    const int B = t->nsel, K = t->o.samples;
    if ((s = tr_dist_begin(t, B, 1, err))) return s;
    const tr_shard sh = t->dp->sh;
    const int nled = sh.l1 - sh.l0, nsim = sh.hi - sh.lo;
    /* this rank's sample values and entropies, everyone's, and the epochs' per-slot (loss, calls) */
    double *vloc = malloc(sizeof(double) * ((size_t)nsim + 3 * (size_t)nled + (size_t)B * K + 3 * (size_t)B + 1));
    if (!vloc) return gopt_error_set(err, GOPT_ENOMEM, "trainer: out of memory");
    double *eloc = vloc + nsim, *rloc = eloc + nled, *vall = rloc + 2 * nled, *eall = vall + (size_t)B * K,
           *rall = eall + B;
    st->best_step_s = 0;
    /* one slot per step (B = 1): its leader's first epoch reuses the rollout's
     * forward and the gradients the rollout kept. Not with B > 1, even where
     * a rank leads one slot: one process would replay there, and N ranks
     * must end bit for bit where one process does. */
    const int kept = B == 1 && nled == 1 && !t->o.backward_rounds ? 0 : -1;
    /* o.sample_variant: every slot's samples made as its incumbent was (on every rank:
     * tr_share_bests records the variant with a sample that beat it) */
    for (int b = 0; b < B; b++) {
        tr_graph *G = &t->graphs[t->sel[b]];
        G->samp_var = t->o.sample_variant ? G->best_var : 0;
    }
    for (int b = sh.s0; b < sh.s1; b++) {
        int lo = b * K > sh.lo ? b * K : sh.lo, hi = (b + 1) * K < sh.hi ? (b + 1) * K : sh.hi;
        int lead = b >= sh.l0 && b < sh.l1;
        if ((s = rollout(t, b, lead, b == kept, lo - b * K, hi - b * K, vloc + (lo - sh.lo),
                         lead ? &eloc[b - sh.l0] : NULL, err)))
            goto out;
    }
    if ((s = tr_gather_samples(t, vloc, vall, err)) || (s = tr_gather_slots(t, 1, eloc, eall, err)) ||
        (s = finish_rollouts(t, vall, eall, st, err)))
        goto out;
    st->entropy /= B;
    st->reward_mean /= B;
    st->mean_step_s /= B;
    st->mean_rel /= B;
    st->best_rel /= B;
    st->best_so_far_rel /= B;
    if (st->best_step_s == 0) st->best_step_s = INFINITY;
    for (int e = 0; e < t->o.epochs; e++) {
        for (int b = sh.l0; b < sh.l1; b++) {
            tr_graph *G = &t->graphs[t->sel[b]];
            double L = 0;
            int calls = 0;
            gopt_policy_zero_grad(t->pol);
            /* a rank leading one slot reuses its rollout's forward in the first epoch */
            if (e > 0 || nled > 1)
                if ((s = tr_forward(t, G, err))) goto out;
            if (t->o.backward_rounds) { /* the reference path: logprob replays, weights, K backwards */
                if ((s = ppo_weights(t, b, &L, err))) goto out;
                if (isfinite(L) && (s = per_sample_backward(t, b, t->rent, &calls, err))) goto out;
            } else if (e == 0 && b == kept) { /* the rollout's kept gradients, no replay */
                if ((s = kept_backward(t, b, &L, &calls, err))) goto out;
            } else if ((s = fused_backward(t, b, &L, &calls, err))) { /* weights inside the batched backward */
                goto out;
            }
            if ((s = tr_grad_stash(t, b, err))) goto out;
            rloc[2 * (b - sh.l0)] = L;
            rloc[2 * (b - sh.l0) + 1] = calls;
        }
        if ((s = tr_gather_slots(t, 2, rloc, rall, err)) || (s = tr_grad_reduce(t, err))) goto out;
        double loss = 0;
        for (int b = 0; b < B; b++) {
            loss += rall[2 * b];
            st->backward_calls += (int)rall[2 * b + 1];
        }
        st->loss = loss;
        if ((s = apply_update(t, loss, t->o.adam.lr, st, err))) goto out;
    }
out:
    free(vloc);
    return s;
}

gopt_status tr_imitation_targets(gopt_trainer *t, const tr_graph *G, const gopt_decisions *d, gopt_policy_actions *a,
                                 gopt_error *err) {
    const gopt_frozen *fz = G->fz;
    const int32_t n = fz->n;
    const int P = gopt_policy_get_config(t->pol)->sched_levels;
    /* order nodes by (priority, earlier topological rank last) and cut the
     * order into P equal slices: level = floor(P * position / n) */
    uint64_t *key = malloc(sizeof(uint64_t) * (size_t)(n > 0 ? n : 1));
    if (key)
        for (int32_t v = 0; v < n; v++) key[v] = ((uint64_t)((uint32_t)d->priority[v] ^ 0x80000000u) << 32) | (uint32_t)(n - 1 - fz->rank[v]);
    int32_t *order = malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
    if (key && order) {
        for (int32_t v = 0; v < n; v++) order[v] = v;
        /* shell sort: in place, deterministic */
        for (int32_t gap = n / 2; gap > 0; gap /= 2)
            for (int32_t i = gap; i < n; i++) {
                int32_t x = order[i];
                int32_t j = i;
                while (j >= gap && key[order[j - gap]] > key[x]) {
                    order[j] = order[j - gap];
                    j -= gap;
                }
                order[j] = x;
            }
        for (int32_t i = 0; i < n; i++) {
            int lvl = (int)((int64_t)i * P / (n ? n : 1));
            a->sched[order[i]] = lvl < P ? lvl : P - 1;
        }
    } else {
        for (int32_t v = 0; v < n; v++) a->sched[v] = 0;
    }
    free(key);
    free(order);
    for (int32_t v = 0; v < n; v++) a->place[v] = d->device[v];
    return gopt_trainer_group_levels(fz, d->group, d->device, gopt_policy_get_config(t->pol)->fusion_levels, a->fuse,
                                     err);
}

gopt_status gopt_trainer_group_levels(const gopt_frozen *fz, const int32_t *group, const int32_t *device, int levels,
                                      int32_t *level, gopt_error *err) {
    const int32_t n = fz->n;
    if (levels < 2 || levels > 32)
        return gopt_error_set(err, GOPT_EINVAL, "group levels: fusion levels must be 2..32 (got %d)", levels);
    int32_t *color = malloc(sizeof(int32_t) * 3 * (size_t)(n > 0 ? n : 1));
    if (!color) return gopt_error_set(err, GOPT_ENOMEM, "group levels: out of memory");
    int32_t *headm = color + n, *nextm = color + 2 * (size_t)n; /* members of each group id, topological order */
    for (int32_t v = 0; v < n; v++) {
        color[v] = 0;
        headm[v] = -1;
    }
    for (int32_t i = n - 1; i >= 0; i--) {
        const int32_t v = fz->topo[i], g = group[v];
        if (g < 0) continue;
        if (g >= n) {
            free(color);
            return gopt_error_set(err, GOPT_EINVAL, "group levels: node %d has group id %d (ids are 0..%d)", v, g,
                                  n - 1);
        }
        nextm[v] = headm[g];
        headm[g] = v;
    }
    for (int32_t i = 0; i < n; i++) {
        const int32_t v = fz->topo[i], g = group[v];
        if (g < 0) {
            level[v] = 0;
            continue;
        }
        if (!color[g]) {
            int hits[32] = {0}; /* edges from the group's members to groups of each level, same device */
            for (int32_t m = headm[g]; m >= 0; m = nextm[m]) {
                for (int32_t e = fz->in_ptr[m]; e < fz->in_ptr[m + 1]; e++) {
                    const int32_t u = fz->in_src[e], gu = group[u];
                    if (gu >= 0 && gu != g && color[gu] && device[u] == device[m]) hits[color[gu]]++;
                }
                for (int32_t e = fz->out_ptr[m]; e < fz->out_ptr[m + 1]; e++) {
                    const int32_t w = fz->out_dst[e], gw = group[w];
                    if (gw >= 0 && gw != g && color[gw] && device[w] == device[m]) hits[color[gw]]++;
                }
            }
            int c = 1;
            for (int k = 2; k < levels; k++)
                if (hits[k] < hits[c]) c = k;
            color[g] = c;
        }
        level[v] = color[g];
    }
    free(color);
    return GOPT_OK;
}

#define IMIT_REC 8 /* per slot: used, target_rel, accuracy (3), loss / M, entropy / M, backward calls */

gopt_status tr_imitate_step(gopt_trainer *t, gopt_trainer_stats *st, gopt_error *err) {
    gopt_status s;
    st->imitation = 1;
    const int B = t->nsel;
    if ((s = tr_dist_begin(t, B, 0, err))) return s;
    const tr_shard sh = t->dp->sh;
    const int nled = sh.l1 - sh.l0;
    double *rloc = calloc((size_t)(nled + B) * IMIT_REC + 1, sizeof(double)), *rall = rloc + (size_t)nled * IMIT_REC;
    if (!rloc) return gopt_error_set(err, GOPT_ENOMEM, "trainer: out of memory");
    for (int b = sh.l0; b < sh.l1; b++) {
        tr_graph *G = &t->graphs[t->sel[b]];
        double *rec = rloc + (size_t)(b - sh.l0) * IMIT_REC;
        gopt_policy_zero_grad(t->pol);
        if (!G->has_ref_dec) {
            if ((s = tr_grad_stash(t, b, err))) goto out;
            continue;
        }
        const int32_t n = G->fz->n;
        const size_t T3 = 3 * (size_t)n;
        if ((s = tr_forward(t, G, err))) goto out;
        /* the target: the actions behind the best found (self-imitation, after the warm start), or
         * the reference's decisions turned into actions in the slot's storage */
        const int self = t->o.imitate_best && G->has_best_act && t->step >= t->o.imitate_steps;
        const int onpol = !self && G->has_tgt_act; /* an improved target (gopt_trainer_set_target) */
        gopt_policy_actions a = self    ? tr_actions_packed(G->best_act, n)
                                : onpol ? tr_actions_packed(G->tgt_act, n)
                                        : tr_actions(t, b, 0);
        if (!self && !onpol && (s = tr_imitation_targets(t, G, &G->ref_dec, &a, err))) goto out;
        if (G->target_rel == 0 && !self) { /* once per graph: what the targets themselves achieve */
            if ((s = tr_decisions_for(t, n, err))) goto out;
            gopt_bl_problem bp;
            if ((s = tr_problem(t, (int)(G - t->graphs), &bp, err))) goto out;
            if ((s = gopt_trainer_actions_to_decisions(G->fz, t->o.tasks, tr_fuse_merge(t), &bp, &a, &t->dec[0],
                                                       t->group, err)))
                goto out;
            int ok = 1;
            if ((s = tr_simulate(t, G, 1, &ok, err))) goto out;
            G->target_rel = ok && !t->res[0].oom ? t->res[0].step_time_s / G->ref : INFINITY;
        }
        rec[0] = 1;
        rec[1] = self ? G->best / G->ref : G->target_rel;
        /* an improved target is imitated on the policy's own greedy decisions (they condition the
         * decoder, the target's actions are scored): teacher forcing on a target that departs from
         * every hint teaches the decoder to follow its predecessors, and greedy decoding derails */
        gopt_policy_actions gr = tr_actions(t, b, 1 < t->o.samples ? 1 : 0);
        { /* greedy accuracy against the targets, per task */
            if ((s = gopt_policy_greedy(t->pol, &gr, err))) goto out;
            for (int task = 0; task < GOPT_TASK_COUNT; task++) {
                int32_t hit = 0, rows = 0;
                for (int32_t v = 0; v < n; v++)
                    if (row_learned(t, G, task, v)) {
                        rows++;
                        hit += act_of(&gr, task)[v] == act_of(&a, task)[v];
                    }
                rec[2 + task] = rows ? (double)hit / rows : 0;
            }
        }
        if (!onpol && (s = gopt_policy_logprob(t->pol, &a, t->logp, t->ent, NULL, NULL, err))) goto out;
        /* an improved target kept for its placement only (GOPT_TARGET_PLACE) trains the placement
         * rows alone; its schedule and fusion actions only condition the decoder */
        const unsigned imit = onpol ? G->tgt_tasks : GOPT_TASKS_ALL;
        int32_t rows = 0;
        for (int task = 0; task < GOPT_TASK_COUNT; task++)
            for (int32_t v = 0; v < n && (imit & GOPT_TASK_BIT(task)); v++) rows += row_learned(t, G, task, v);
        const float w = -1.0f / (float)(rows ? rows : 1);
        memset(t->rw, 0, sizeof(float) * T3);
        double L = 0, es = 0;
        for (int task = 0; task < GOPT_TASK_COUNT; task++)
            for (int32_t v = 0; v < n; v++)
                if ((imit & GOPT_TASK_BIT(task)) && row_learned(t, G, task, v)) t->rw[(size_t)task * n + v] = w;
        if (onpol) { /* the labels' log-probabilities come with the gradient */
            if ((s = gopt_policy_backward_labels(t->pol, &gr, &a, t->rw, t->logp, err))) goto out;
            rec[7] = 1;
        }
        for (size_t i = 0; i < T3; i++)
            if (t->rw[i] != 0.0f) {
                L -= t->logp[i];
                es += onpol ? 0.0 : t->ent[i];
            }
        rec[5] = L / (rows ? rows : 1);
        rec[6] = es / (rows ? rows : 1);
        if (!onpol && isfinite(rec[5])) {
            if ((s = gopt_policy_backward(t->pol, &a, t->rw, NULL, err))) goto out;
            rec[7] = 1;
        }
        if ((s = tr_grad_stash(t, b, err))) goto out;
    }
    if ((s = tr_gather_slots(t, IMIT_REC, rloc, rall, err))) goto out;
    double loss = 0, ent = 0;
    int used = 0;
    for (int b = 0; b < B; b++) { /* in slot order, as one process would add them */
        const double *rec = rall + (size_t)b * IMIT_REC;
        if (!rec[0]) continue;
        const tr_graph *G = &t->graphs[t->sel[b]];
        st->target_rel += rec[1];
        for (int task = 0; task < GOPT_TASK_COUNT; task++) st->imitate_acc[task] += rec[2 + task];
        loss += rec[5];
        ent += rec[6];
        st->backward_calls += (int)rec[7];
        st->best_so_far_rel += G->best / G->ref;
        used++;
    }
    if (!used) goto out;
    if ((s = tr_grad_reduce(t, err))) goto out;
    st->loss = loss;
    st->entropy = ent / used;
    st->best_so_far_rel /= used;
    st->target_rel /= used;
    for (int task = 0; task < GOPT_TASK_COUNT; task++) st->imitate_acc[task] /= used;
    st->best_step_s = INFINITY;
    s = apply_update(t, loss, t->o.imitate_lr, st, err);
out:
    free(rloc);
    return s;
}
