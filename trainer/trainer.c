/* trainer.c: the trainer object: options, graphs each on its own cost model
 * (reference from the baselines, its decisions relabelled canonically within
 * the cluster's device symmetries), the cache of built graphs (simulator,
 * scratch, features, decoder inputs: tr_hot_get), the graph schedule,
 * decisions from sampled actions, batch simulation (or the evaluator set by
 * gopt_trainer_set_evaluator, one sample at a time) and greedy evaluation.
 * The PPO and imitation updates are in ppo.c, checkpoints in state.c.
 *
 * Invariants: a relabelled imitation target simulates no slower than the
 * reference decisions it replaces (it is simulated and kept only then); a
 * graph's cache entry is a pure function of the graph and its cost model, so
 * evicting and rebuilding it changes no result; at most hot_cap entries exist.
 *
 * Cost: adding a graph runs every reference baseline once (their cost plus
 * one simulation each), then the symmetry search (O(n ndev^2) to compare
 * devices, at most TR_MAX_SYM permutations) and one more simulation; a step
 * is dominated by the network (ppo.c); building a cache entry is O(n ndev + m)
 * (about 1.5 us a node).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trainer_internal.h"

void gopt_trainer_options_default(gopt_trainer_options *o) {
    memset(o, 0, sizeof *o);
    o->samples = 16;
    o->epochs = 4;
    o->clip_eps = 0.2f;
    o->entropy_coef = 0.01f;
    o->invalid_reward = -4.0f;
    gopt_adam_config_default(&o->adam);
    o->adam.lr = 1e-3f;
    o->sim_threads = 2;
    o->tasks = GOPT_TASKS_ALL;
    o->imitate_steps = 0;
    o->imitate_every = 0;
    o->imitate_best = 0;
    o->reference_evals = 0;
    o->reference_anneal_max_nodes = 0;
    o->imitate_lr = 3e-3f;
    o->place_temperature = 1.0f;
    o->train_heads = 0;
    o->greedy_styles = GOPT_GO_STYLES_OWN;
    o->graphs_per_step = 1;
    o->switch_every = 1;
    o->seed = 1;
    o->reference = "single,expert,metis,heft,mtopo,metf,msct,heft+cp+xla";
    o->canonical_targets = 1;
    o->splice = 0;
    o->style_probation = 0;
    o->splice_place = 0.0f;
    o->splice_batch = 0;
    o->sample_variant = 0;
}

int gopt_trainer_finetune_splice(const gopt_trainer_options *o) {
    return o->imitate_best ? GOPT_TRAINER_FINETUNE_SPLICE : 0;
}

float gopt_trainer_finetune_splice_place(const gopt_trainer_options *o) {
    return o->splice > 0 ? GOPT_TRAINER_FINETUNE_SPLICE_PLACE : 0.0f;
}

gopt_status gopt_trainer_options_check(const gopt_trainer_options *o, gopt_error *err) {
    if (o->samples < 2 || o->samples > GOPT_TRAINER_MAX_SAMPLES)
        return gopt_error_set(err, GOPT_EINVAL, "trainer: samples = %d is outside 2..%d", o->samples, GOPT_TRAINER_MAX_SAMPLES);
    if (o->epochs < 1 || o->epochs > 100)
        return gopt_error_set(err, GOPT_EINVAL, "trainer: epochs = %d is outside 1..100", o->epochs);
    if (!(o->clip_eps > 0.0f && o->clip_eps < 1.0f))
        return gopt_error_set(err, GOPT_EINVAL, "trainer: clip = %g is outside (0, 1)", (double)o->clip_eps);
    if (!(o->entropy_coef >= 0.0f && o->entropy_coef <= 10.0f))
        return gopt_error_set(err, GOPT_EINVAL, "trainer: entropy = %g is outside [0, 10]", (double)o->entropy_coef);
    if (!isfinite(o->invalid_reward) || o->invalid_reward > 0.0f)
        return gopt_error_set(err, GOPT_EINVAL, "trainer: invalid reward = %g must be finite and <= 0",
                              (double)o->invalid_reward);
    if (!(o->adam.lr > 0.0f && o->adam.lr < 1.0f) || !(o->imitate_lr > 0.0f && o->imitate_lr < 1.0f))
        return gopt_error_set(err, GOPT_EINVAL, "trainer: learning rate %g / imitation %g is outside (0, 1)",
                              (double)o->adam.lr, (double)o->imitate_lr);
    if (o->splice < 0 || o->splice > GOPT_TRAINER_MAX_SPLICE)
        return gopt_error_set(err, GOPT_EINVAL, "trainer: splice = %d is outside 0..%d", o->splice,
                              GOPT_TRAINER_MAX_SPLICE);
    if (o->splice_batch < 0 || o->splice_batch > o->samples)
        return gopt_error_set(err, GOPT_EINVAL, "trainer: splice batch = %d is outside 1..%d (the samples; 0: as many)",
                              o->splice_batch, o->samples);
    if (o->style_probation < 0 || o->style_probation > GOPT_TRAINER_MAX_PROBATION)
        return gopt_error_set(err, GOPT_EINVAL, "trainer: style probation = %d is outside 0..%d", o->style_probation,
                              GOPT_TRAINER_MAX_PROBATION);
    if (o->style_probation > 0 && !o->imitate_best)
        return gopt_error_set(err, GOPT_EINVAL, "trainer: a style probation of %d steps needs self-imitation "
                              "(imitate best)", o->style_probation);
    if (o->sample_variant != 0 && o->sample_variant != 1)
        return gopt_error_set(err, GOPT_EINVAL, "trainer: sample variant = %d is not 0 (own) or 1 (incumbent)",
                              o->sample_variant);
    if (!(o->splice_place >= 0.0f && o->splice_place <= 1.0f))
        return gopt_error_set(err, GOPT_EINVAL, "trainer: splice place = %g is outside 0..1", (double)o->splice_place);
    if (o->splice > 0 && o->graphs_per_step != 1)
        return gopt_error_set(err, GOPT_EINVAL, "trainer: splice needs one graph per step (graphs per step = %d)",
                              o->graphs_per_step);
    if (o->sim_threads < 1 || o->sim_threads > TR_MAX_THREADS)
        return gopt_error_set(err, GOPT_EINVAL, "trainer: threads = %d is outside 1..%d", o->sim_threads,
                              TR_MAX_THREADS);
    if (!o->tasks || (o->tasks & ~GOPT_TASKS_ALL))
        return gopt_error_set(err, GOPT_EINVAL, "trainer: tasks = %u is not a non-empty subset of place,sched,fuse",
                              o->tasks);
    if (o->imitate_steps < 0)
        return gopt_error_set(err, GOPT_EINVAL, "trainer: imitate steps = %d is negative", o->imitate_steps);
    if (o->reference_evals < 0)
        return gopt_error_set(err, GOPT_EINVAL, "trainer: reference evaluations = %ld is not 0 (defaults) or > 0",
                              o->reference_evals);
    if (o->reference_anneal_max_nodes < 0)
        return gopt_error_set(err, GOPT_EINVAL, "trainer: reference annealing node cap = %d is not 0 (all) or > 0",
                              o->reference_anneal_max_nodes);
    if (o->imitate_every < 0 || o->imitate_every == 1)
        return gopt_error_set(err, GOPT_EINVAL, "trainer: imitate every = %d is not 0 (off) or >= 2", o->imitate_every);
    if (o->imitate_best != 0 && o->imitate_best != 1)
        return gopt_error_set(err, GOPT_EINVAL, "trainer: imitate best = %d is not 0 or 1", o->imitate_best);
    if (o->imitate_best && !o->imitate_every)
        return gopt_error_set(err, GOPT_EINVAL, "trainer: imitating the best solution needs imitate every >= 2");
    if (!(o->place_temperature >= 0.05f && o->place_temperature <= 100.0f))
        return gopt_error_set(err, GOPT_EINVAL, "trainer: placement temperature %g is outside 0.05..100",
                              (double)o->place_temperature);
    if (o->train_heads != 0 && o->train_heads != 1)
        return gopt_error_set(err, GOPT_EINVAL, "trainer: train heads = %d is not 0 or 1", o->train_heads);
    if (o->graphs_per_step < 1 || o->graphs_per_step > 256)
        return gopt_error_set(err, GOPT_EINVAL, "trainer: graphs per step = %d is outside 1..256",
                              o->graphs_per_step);
    if (o->switch_every < 1)
        return gopt_error_set(err, GOPT_EINVAL, "trainer: switch every = %d must be >= 1", o->switch_every);
    if (o->canonical_targets != 0 && o->canonical_targets != 1)
        return gopt_error_set(err, GOPT_EINVAL, "trainer: canonical targets = %d is not 0 or 1", o->canonical_targets);
    if (!o->reference || !o->reference[0] || strlen(o->reference) >= sizeof ((gopt_trainer *)0)->reference)
        return gopt_error_set(err, GOPT_EINVAL, "trainer: reference method list is empty or too long");
    return GOPT_OK;
}

gopt_status gopt_trainer_parse_tasks(const char *s, unsigned *tasks, gopt_error *err) {
    unsigned bits = 0;
    const char *p = s;
    while (p && *p) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        int found = -1;
        for (int t = 0; t < GOPT_TASK_COUNT; t++)
            if (strlen(gopt_task_name((gopt_task)t)) == len && strncmp(p, gopt_task_name((gopt_task)t), len) == 0)
                found = t;
        if (found < 0)
            return gopt_error_set(err, GOPT_EINVAL, "tasks '%s': unknown task '%.*s' (valid: place, sched, fuse)", s,
                                  (int)len, p);
        bits |= GOPT_TASK_BIT(found);
        p = e ? e + 1 : NULL;
    }
    if (!bits) return gopt_error_set(err, GOPT_EINVAL, "tasks '%s': empty (valid: place, sched, fuse)", s ? s : "");
    *tasks = bits;
    return GOPT_OK;
}

void gopt_trainer_tasks_str(unsigned tasks, char *buf, size_t len) {
    buf[0] = 0;
    size_t used = 0;
    for (int t = 0; t < GOPT_TASK_COUNT; t++)
        if (tasks & GOPT_TASK_BIT(t)) {
            int w = snprintf(buf + used, len - used, "%s%s", used ? "," : "", gopt_task_name((gopt_task)t));
            if (w < 0 || (size_t)w >= len - used) return;
            used += (size_t)w;
        }
}

gopt_status gopt_trainer_create(gopt_trainer **out, gopt_policy *policy, const gopt_costmodel *cm,
                                const gopt_trainer_options *o, gopt_error *err) {
    *out = NULL;
    gopt_status st = gopt_trainer_options_check(o, err);
    if (st) return st;
    const gopt_policy_config *pc = gopt_policy_get_config(policy);
    int ndev = cm ? gopt_cost_num_devices(cm) : 0;
    if (ndev > pc->max_devices)
        return gopt_error_set(err, GOPT_EINVAL, "trainer: %d devices but the policy places on at most %d", ndev,
                              pc->max_devices);
    if (pc->max_devices > TR_MAX_WIDTH || pc->sched_levels > TR_MAX_WIDTH || pc->fusion_levels > TR_MAX_WIDTH)
        return gopt_error_set(err, GOPT_EINVAL, "trainer: action spaces wider than %d are not supported",
                              TR_MAX_WIDTH);
    if ((o->tasks & GOPT_TASK_BIT(GOPT_TASK_FUSE)) && pc->fusion_levels < 2)
        return gopt_error_set(err, GOPT_EINVAL, "trainer: learning fusion needs fusion_levels >= 2 (policy has %d)",
                              pc->fusion_levels);
    if ((st = gopt_policy_set_threads(policy, o->sim_threads, err))) return st;
    if ((st = gopt_policy_set_task_temperature(policy, GOPT_TASK_PLACE, o->place_temperature, err))) return st;
    if ((st = gopt_policy_set_train_heads(policy, o->train_heads, err))) return st;
    gopt_trainer *t = gopt_calloc(1, sizeof *t, err);
    if (!t) return GOPT_ENOMEM;
    t->pol = policy;
    t->cm = cm;
    t->o = *o;
    strcpy(t->reference, o->reference);
    t->o.reference = t->reference;
    t->hot_cap = o->graphs_per_step + 1 > 2 ? o->graphs_per_step + 1 : 2;
    gopt_rng_seed(&t->rng, o->seed);
    t->sel = gopt_calloc((size_t)o->graphs_per_step, sizeof *t->sel, err);
    t->adv = gopt_calloc((size_t)o->graphs_per_step * o->samples, sizeof *t->adv, err);
    t->dec = gopt_calloc((size_t)o->samples, sizeof *t->dec, err);
    t->res = gopt_calloc((size_t)o->samples, sizeof *t->res, err);
    t->sym = gopt_malloc(sizeof(int32_t) * TR_MAX_SYM * GOPT_POLICY_MAX_DEVICES, err);
    if (!t->sel || !t->adv || !t->dec || !t->res || !t->sym || (st = tr_dist_create(t, err))) {
        gopt_trainer_free(t);
        return st ? st : GOPT_ENOMEM;
    }
    *out = t;
    return GOPT_OK;
}

/* Free entry H (its graph then has none). */
static void hot_release(gopt_trainer *t, tr_hot *H) {
    for (int i = 0; i < TR_MAX_THREADS; i++) gopt_sim_scratch_free(H->scratch[i]);
    gopt_sim_free(H->sim);
    free(H->feat);
    free(H->dec_in);
    if (H->graph >= 0) t->graphs[H->graph].hot = -1;
    memset(H, 0, sizeof *H);
    H->graph = -1;
}

/* Build graph i's entry into H (free): simulator, scratch, features, decoder inputs. */
static gopt_status hot_build(gopt_trainer *t, int i, tr_hot *H, gopt_error *err) {
    tr_graph *G = &t->graphs[i];
    const gopt_frozen *fz = G->fz;
    const int32_t n = fz->n;
    gopt_status st;
    H->graph = i;
    G->hot = (int32_t)(H - t->hot);
    if ((st = gopt_sim_create(G->g, G->cm, &H->sim, err))) return st;
    for (int k = 0; k < t->o.sim_threads; k++)
        if ((st = gopt_sim_scratch_create(H->sim, &H->scratch[k], err))) return st;
    H->feat = gopt_malloc(sizeof(float) * (size_t)n * GOPT_POLICY_NFEAT, err);
    H->dec_in = gopt_malloc(sizeof(double) * (2 * (size_t)n + (size_t)G->ndev), err);
    float *pred = gopt_malloc(sizeof(float) * (size_t)(n ? n : 1), err);
    if (!H->feat || !H->dec_in || !pred) {
        free(pred);
        return GOPT_ENOMEM;
    }
    const gopt_cost_table *ct = gopt_sim_cost_table(H->sim);
    for (int32_t v = 0; v < n; v++) pred[v] = (float)ct->time[(size_t)v * ct->ndev];
    st = gopt_policy_features(fz, G->ndev, pred, H->feat, err);
    free(pred);
    if (st) return st;
    gopt_bl_problem bp = {0};
    bp.graph = G->g;
    bp.cm = G->cm;
    bp.cost = ct;
    bp.ndev = G->ndev;
    gopt_go_decoder_inputs(&bp, H->dec_in, H->dec_in + n, H->dec_in + 2 * (size_t)n);
    return GOPT_OK;
}

gopt_status tr_hot_get(gopt_trainer *t, int i, tr_hot **out, gopt_error *err) {
    tr_graph *G = &t->graphs[i];
    *out = NULL;
    if (G->hot < 0) {
        int slot = -1;
        for (int k = 0; k < t->nhot && slot < 0; k++)
            if (t->hot[k].graph < 0) slot = k;
        if (slot < 0 && (t->hot_cap == 0 || t->nhot < t->hot_cap)) {
            tr_hot *nh = realloc(t->hot, sizeof *nh * (size_t)(t->nhot + 1));
            if (!nh) return gopt_error_set(err, GOPT_ENOMEM, "trainer: out of memory for the graph cache");
            t->hot = nh;
            memset(&t->hot[t->nhot], 0, sizeof *nh);
            t->hot[t->nhot].graph = -1;
            slot = t->nhot++;
        }
        if (slot < 0) { /* full: evict the least recently used */
            slot = 0;
            for (int k = 1; k < t->nhot; k++)
                if (t->hot[k].used < t->hot[slot].used) slot = k;
            hot_release(t, &t->hot[slot]);
        }
        gopt_status st = hot_build(t, i, &t->hot[slot], err);
        if (st) {
            hot_release(t, &t->hot[slot]);
            gopt_error_prefix(err, "graph '%s'", gopt_graph_name(G->g));
            return st;
        }
    }
    tr_hot *H = &t->hot[G->hot];
    H->used = ++t->hot_clock;
    *out = H;
    return GOPT_OK;
}

gopt_status tr_problem(gopt_trainer *t, int i, gopt_bl_problem *bp, gopt_error *err) {
    tr_hot *H = NULL;
    gopt_status st = tr_hot_get(t, i, &H, err);
    if (st) return st;
    memset(bp, 0, sizeof *bp);
    bp->graph = t->graphs[i].g;
    bp->cm = t->graphs[i].cm;
    bp->cost = gopt_sim_cost_table(H->sim);
    bp->ndev = t->graphs[i].ndev;
    bp->opt.seed = t->o.seed;
    return GOPT_OK;
}

void gopt_trainer_set_cache(gopt_trainer *t, int graphs) {
    for (int k = 0; k < t->nhot; k++) hot_release(t, &t->hot[k]);
    free(t->hot);
    t->hot = NULL;
    t->nhot = 0;
    t->hot_cap = graphs <= 0 ? 0 : graphs < 2 ? 2 : graphs;
}

static void graph_destroy(gopt_trainer *t, tr_graph *G) {
    if (G->hot >= 0) hot_release(t, &t->hot[G->hot]);
    gopt_graph_free(G->g);
    free(G->unit_first);
    free(G->hint_dev);
    free(G->hint_feat);
    free(G->hint_group);
    if (G->hint_table) gopt_go_hint_table_free(G->hint_table);
    free(G->hint_table);
    gopt_decisions_destroy(&G->ref_dec);
    gopt_decisions_destroy(&G->best_dec);
    gopt_decisions_destroy(&G->alt_dec);
    gopt_decisions_destroy(&G->sp_dec);
    gopt_decisions_destroy(&G->own_dec);
    free(G->own_act);
    free(G->sp_act);
    free(G->best_act);
    free(G->tgt_act);
    memset(G, 0, sizeof *G);
}

void gopt_trainer_free(gopt_trainer *t) {
    if (!t) return;
    for (int i = 0; i < t->ng; i++) graph_destroy(t, &t->graphs[i]);
    free(t->graphs);
    free(t->hot);
    free(t->profs);
    free(t->perm);
    free(t->sel);
    free(t->act);
    free(t->old_logp);
    free(t->adv);
    free(t->logp);
    free(t->ent);
    free(t->w_k);
    free(t->rw);
    free(t->rent);
    free(t->group);
    for (int w = 0; w < TR_RENDER_THREADS; w++) tr_cp_cache_free(&t->cpc[w]);
    for (int w = 1; w < TR_RENDER_THREADS; w++) free(t->wgroup[w]);
    free(t->sym);
    if (t->dec)
        for (int k = 0; k < t->o.samples; k++) gopt_decisions_destroy(&t->dec[k]);
    free(t->dec);
    free(t->res);
    tr_dist_free(t);
    free(t);
}

gopt_status tr_reserve(gopt_trainer *t, int32_t n, gopt_error *err) {
    if (n <= t->cap_n) return GOPT_OK;
    size_t B = (size_t)t->o.graphs_per_step, K = (size_t)t->o.samples, N = (size_t)n;
    void *p[8];
    p[0] = realloc(t->act, sizeof(int32_t) * B * K * 3 * N);
    if (p[0]) t->act = p[0];
    p[1] = realloc(t->old_logp, sizeof(float) * B * K * 3 * N);
    if (p[1]) t->old_logp = p[1];
    p[2] = realloc(t->logp, sizeof(float) * 3 * N);
    if (p[2]) t->logp = p[2];
    p[3] = realloc(t->ent, sizeof(float) * 3 * N);
    if (p[3]) t->ent = p[3];
    p[4] = realloc(t->w_k, sizeof(float) * K * 3 * N);
    if (p[4]) t->w_k = p[4];
    p[5] = realloc(t->rw, sizeof(float) * 3 * N);
    if (p[5]) t->rw = p[5];
    p[6] = realloc(t->rent, sizeof(float) * 3 * N);
    if (p[6]) t->rent = p[6];
    p[7] = realloc(t->group, sizeof(int32_t) * N);
    if (p[7]) t->group = p[7];
    t->wgroup[0] = t->group;
    for (int w = 1; w < TR_RENDER_THREADS; w++) { /* sized again on use */
        free(t->wgroup[w]);
        t->wgroup[w] = NULL;
    }
    for (int i = 0; i < 8; i++)
        if (!p[i]) return gopt_error_set(err, GOPT_ENOMEM, "trainer: out of memory for %d-node scratch", (int)n);
    t->cap_n = n;
    return GOPT_OK;
}

gopt_policy_actions tr_actions(gopt_trainer *t, int b, int k) {
    size_t N = (size_t)t->cap_n;
    int32_t *base = t->act + ((size_t)b * t->o.samples + (size_t)k) * 3 * N;
    gopt_policy_actions a = {base, base + N, base + 2 * N};
    return a;
}

gopt_status tr_decisions_for(gopt_trainer *t, int32_t n, gopt_error *err) {
    if (t->dec_n == n) return GOPT_OK;
    for (int k = 0; k < t->o.samples; k++) {
        gopt_decisions_destroy(&t->dec[k]);
        gopt_status st = gopt_decisions_init(&t->dec[k], n, err);
        if (st) {
            t->dec_n = -1;
            return st;
        }
    }
    t->dec_n = n;
    return GOPT_OK;
}

gopt_status gopt_trainer_canonical_devices(const gopt_frozen *fz, int32_t ndev, const int32_t *device,
                                           const int32_t *perms, int nperm, int32_t *out, int32_t *perm_out,
                                           gopt_error *err) {
    if (ndev < 1 || ndev > GOPT_POLICY_MAX_DEVICES)
        return gopt_error_set(err, GOPT_EINVAL, "canonical devices: ndev = %d is outside 1..%d", (int)ndev,
                              GOPT_POLICY_MAX_DEVICES);
    if (perms && nperm < 1) return gopt_error_set(err, GOPT_EINVAL, "canonical devices: no permutation allowed");
    /* devices in order of first use along the topological order */
    int32_t first[GOPT_POLICY_MAX_DEVICES], map[GOPT_POLICY_MAX_DEVICES];
    int32_t used = 0;
    uint32_t seen = 0;
    for (int32_t i = 0; i < fz->n; i++) {
        int32_t v = fz->topo[i], dv = device[v];
        if (dv < 0 || dv >= ndev)
            return gopt_error_set(err, GOPT_EINVAL, "canonical devices: node %d: device %d is outside 0..%d", (int)v,
                                  (int)dv, (int)ndev - 1);
        if (!((seen >> dv) & 1u)) {
            seen |= 1u << dv;
            first[used++] = dv;
        }
    }
    if (!perms) { /* every permutation allowed: number devices by first use */
        int32_t next = 0;
        for (int32_t k = 0; k < ndev; k++) map[k] = -1;
        for (int32_t k = 0; k < used; k++) map[first[k]] = next++;
        for (int32_t k = 0; k < ndev; k++)
            if (map[k] < 0) map[k] = next++;
    } else { /* the allowed permutation that makes (p[first[0]], p[first[1]], ...) smallest */
        int best = 0;
        for (int p = 1; p < nperm; p++) {
            const int32_t *P = perms + (size_t)p * ndev, *B = perms + (size_t)best * ndev;
            for (int32_t k = 0; k < used; k++)
                if (P[first[k]] != B[first[k]]) {
                    if (P[first[k]] < B[first[k]]) best = p;
                    break;
                }
        }
        memcpy(map, perms + (size_t)best * ndev, sizeof(int32_t) * (size_t)ndev);
    }
    for (int32_t v = 0; v < fz->n; v++) out[v] = map[device[v]];
    if (perm_out) memcpy(perm_out, map, sizeof(int32_t) * (size_t)ndev);
    return GOPT_OK;
}

/* Backtracking over device permutations: device k is mapped to an unused j
 * that is equivalent to it (eq) and whose links to the devices already
 * mapped cost the same (lk: (ndev, ndev, 3) transfer times). */
typedef struct {
    int ndev, max, found;
    const uint8_t *eq;
    const double *lk;
    int32_t cur[GOPT_POLICY_MAX_DEVICES];
    uint32_t taken;
    int32_t *perms;
} sym_search;

static void sym_extend(sym_search *s, int k) {
    if (s->found >= s->max) return;
    if (k == s->ndev) {
        memcpy(s->perms + (size_t)s->found * s->ndev, s->cur, sizeof(int32_t) * (size_t)s->ndev);
        s->found++;
        return;
    }
    const int D = s->ndev;
    for (int j = 0; j < D && s->found < s->max; j++) {
        if (((s->taken >> j) & 1u) || !s->eq[k * D + j]) continue;
        int ok = 1;
        for (int i = 0; i < k && ok; i++)
            for (int z = 0; z < 3 && ok; z++)
                ok = s->lk[((size_t)i * D + k) * 3 + z] == s->lk[((size_t)s->cur[i] * D + j) * 3 + z] &&
                     s->lk[((size_t)k * D + i) * 3 + z] == s->lk[((size_t)j * D + s->cur[i]) * 3 + z];
        if (!ok) continue;
        s->cur[k] = j;
        s->taken |= 1u << j;
        sym_extend(s, k + 1);
        s->taken &= ~(1u << j);
    }
}

int gopt_trainer_device_symmetries(const gopt_costmodel *cm, const gopt_cost_table *ct, int32_t *perms, int max) {
    const int D = ct->ndev;
    if (D < 1 || D > GOPT_POLICY_MAX_DEVICES || max < 1) return 0;
    uint8_t eq[GOPT_POLICY_MAX_DEVICES * GOPT_POLICY_MAX_DEVICES];
    double lk[GOPT_POLICY_MAX_DEVICES * GOPT_POLICY_MAX_DEVICES * 3];
    static const double sizes[3] = {1024.0, 1048576.0, 67108864.0};
    for (int a = 0; a < D; a++)
        for (int b = 0; b < D; b++) {
            int same = ct->launch[a] == ct->launch[b] && ct->mem_bw[a] == ct->mem_bw[b];
            for (int v = 0; v < ct->n && same; v++)
                same = ct->time[(size_t)v * D + a] == ct->time[(size_t)v * D + b] &&
                       ct->compute[(size_t)v * D + a] == ct->compute[(size_t)v * D + b];
            eq[a * D + b] = (uint8_t)same;
            for (int z = 0; z < 3; z++) lk[((size_t)a * D + b) * 3 + z] = gopt_cost_transfer_time(cm, a, b, sizes[z]);
        }
    sym_search s = {D, max, 0, eq, lk, {0}, 0, perms};
    sym_extend(&s, 0);
    return s.found;
}

/* Relabel decisions dec of graph G canonically (devices in order of first use, over G's device
 * symmetries) and keep the relabelled ones when they simulate no slower than `limit` (the links
 * may not be symmetric). *how: 0 already canonical (or no symmetry), 1 relabelled, -1 relabelled
 * was slower (kept as they were); *rstep: the relabelled step, 0 when not simulated. */
static gopt_status relabel_canonical(gopt_trainer *t, tr_graph *G, tr_hot *H, gopt_decisions *dec, double limit,
                                     int *how, double *rstep, gopt_error *err) {
    const int32_t n = G->fz->n;
    gopt_decisions d = {0};
    int32_t perm[GOPT_POLICY_MAX_DEVICES];
    *how = 0;
    *rstep = 0;
    gopt_status st = gopt_decisions_init(&d, n, err);
    if (st) return st;
    gopt_decisions_copy(&d, dec);
    int np = gopt_trainer_device_symmetries(G->cm, gopt_sim_cost_table(H->sim), t->sym, TR_MAX_SYM);
    if (np < 1) goto out; /* not even the identity: nothing to relabel */
    if ((st = gopt_trainer_canonical_devices(G->fz, G->ndev, dec->device, t->sym, np, d.device, perm, err))) goto out;
    int same = 1;
    for (int32_t k = 0; k < G->ndev; k++) same &= perm[k] == k;
    if (same) goto out; /* already canonical */
    gopt_sim_result res;
    gopt_error e2 = {0};
    int ok = gopt_sim_run(H->sim, &d, &res, H->scratch[0], &e2) == GOPT_OK && !res.oom;
    *rstep = ok ? res.step_time_s : INFINITY;
    if (ok && res.step_time_s <= limit) {
        gopt_decisions_copy(dec, &d);
        *how = 1;
    } else {
        *how = -1;
    }
out:
    gopt_decisions_destroy(&d);
    return st;
}

/* Relabel G's imitation target canonically; keep it when it simulates no
 * slower than the reference decisions. */
static gopt_status relabel_target(gopt_trainer *t, tr_graph *G, tr_hot *H, gopt_error *err) {
    return relabel_canonical(t, G, H, &G->ref_dec, G->ref, &G->relabel, &G->relabel_step, err);
}

int gopt_trainer_target_relabel(const gopt_trainer *t, int i, double *relabelled_s) {
    if (relabelled_s) *relabelled_s = t->graphs[i].relabel_step;
    return t->graphs[i].relabel;
}

/* Whether the combination m ("a+b+c") has annealing (sa) as its joint part. */
static int method_anneals(const gopt_bl_registry *reg, const char *m) {
    gopt_bl_combo c;
    if (gopt_bl_combo_parse(reg, m, &c, NULL)) return 0; /* refused by gopt_bl_optimize below, with its message */
    return c.part[GOPT_BL_JOINT] && strcmp(c.part[GOPT_BL_JOINT]->name, "sa") == 0;
}

/* Reference: the best valid result among the reference baselines. */
static gopt_status compute_reference(gopt_trainer *t, int i, gopt_error *err) {
    tr_graph *G = &t->graphs[i];
    tr_hot *H = NULL;
    gopt_status hs = tr_hot_get(t, i, &H, err);
    if (hs) return hs;
    gopt_bl_registry reg;
    gopt_bl_registry_init(&reg);
    char list[sizeof t->reference];
    strcpy(list, t->reference);
    gopt_bl_options opt = {0};
    opt.seed = t->o.seed;
    if (t->o.reference_evals > 0) { /* annealing bounded by evaluations, not by the clock */
        opt.max_evals = t->o.reference_evals;
        opt.budget_s = 3600;
    }
    G->ref = INFINITY;
    char *save = NULL;
    const int32_t nodes = gopt_graph_num_nodes(G->g);
    for (char *m = strtok_r(list, ",", &save); m; m = strtok_r(NULL, ",", &save)) {
        if (t->o.reference_anneal_max_nodes > 0 && nodes > t->o.reference_anneal_max_nodes && method_anneals(&reg, m))
            continue; /* too large to anneal: the other references decide */
        gopt_decisions d = {0};
        gopt_bl_outcome res;
        gopt_error e2 = {0};
        gopt_status st = gopt_bl_optimize(&reg, m, H->sim, G->cm, &opt, &d, &res, &e2);
        if (G->nbase < TR_MAX_BASE) {
            snprintf(G->base_name[G->nbase], sizeof G->base_name[0], "%s", m);
            G->base_step[G->nbase++] = st ? INFINITY : res.sim.oom ? -res.sim.step_time_s : res.sim.step_time_s;
        }
        if (st == GOPT_EUNSUP || (st == GOPT_OK && res.sim.oom)) {
            gopt_decisions_destroy(&d);
            continue; /* the method finds nothing that fits: not a reference */
        }
        if (st) {
            gopt_decisions_destroy(&d);
            *err = e2;
            gopt_error_prefix(err, "graph '%s': reference method %s", gopt_graph_name(G->g), m);
            return st;
        }
        if (res.sim.step_time_s < G->ref) {
            G->ref = res.sim.step_time_s;
            snprintf(G->ref_method, sizeof G->ref_method, "%s", m);
            gopt_decisions_destroy(&G->ref_dec);
            G->ref_dec = d;
            G->has_ref_dec = 1;
        } else {
            gopt_decisions_destroy(&d);
        }
    }
    if (!isfinite(G->ref) || !(G->ref > 0))
        return gopt_error_set(err, GOPT_EUNSUP, "graph '%s': no reference method (%s) found a valid solution",
                              gopt_graph_name(G->g), t->reference);
    return t->o.canonical_targets ? relabel_target(t, G, H, err) : GOPT_OK;
}

/* The index of cm in t->profs (registered with its profile's name and hash on first use). */
static gopt_status prof_of(gopt_trainer *t, const gopt_costmodel *cm, int *idx, gopt_error *err) {
    for (int k = 0; k < t->nprof; k++)
        if (t->profs[k].cm == cm) {
            *idx = k;
            return GOPT_OK;
        }
    if (t->nprof == t->capprof) {
        int cap = t->capprof ? 2 * t->capprof : 4;
        tr_prof *np = realloc(t->profs, sizeof *np * (size_t)cap);
        if (!np) return gopt_error_set(err, GOPT_ENOMEM, "trainer: out of memory adding a cost model");
        t->profs = np;
        t->capprof = cap;
    }
    tr_prof *P = &t->profs[t->nprof];
    memset(P, 0, sizeof *P);
    P->cm = cm;
    const gopt_profile *pr = gopt_cost_profile(cm);
    snprintf(P->name, sizeof P->name, "%s", pr && gopt_profile_name(pr) ? gopt_profile_name(pr) : "");
    if (pr) {
        gopt_buf b;
        gopt_buf_init(&b);
        gopt_status st = gopt_profile_write_json(pr, &b, err);
        if (!st && b.failed) st = gopt_error_set(err, GOPT_ENOMEM, "trainer: out of memory hashing a profile");
        if (!st) P->hash = tr_fnv64(TR_FNV_INIT, b.data, b.len);
        gopt_buf_destroy(&b);
        if (st) return st;
    }
    *idx = t->nprof++;
    return GOPT_OK;
}

gopt_status gopt_trainer_add_graph(gopt_trainer *t, gopt_graph *g, double ref_step_s, gopt_error *err) {
    return gopt_trainer_add_graph_on(t, g, NULL, ref_step_s, err);
}

gopt_status gopt_trainer_add_graph_on(gopt_trainer *t, gopt_graph *g, const gopt_costmodel *cm, double ref_step_s,
                                      gopt_error *err) {
    gopt_status st = GOPT_OK;
    if (!cm) cm = t->cm;
    if (!cm) {
        st = gopt_error_set(err, GOPT_EINVAL, "trainer: graph '%s': no cost model (the trainer has no default)",
                            gopt_graph_name(g));
        gopt_graph_free(g);
        return st;
    }
    int ndev = gopt_cost_num_devices(cm), maxd = gopt_policy_get_config(t->pol)->max_devices;
    if (ndev < 1 || ndev > maxd) {
        st = gopt_error_set(err, GOPT_EINVAL, "trainer: graph '%s': %d devices but the policy places on 1..%d",
                            gopt_graph_name(g), ndev, maxd);
        gopt_graph_free(g);
        return st;
    }
    int prof = 0;
    if ((st = prof_of(t, cm, &prof, err))) {
        gopt_graph_free(g);
        return st;
    }
    if (t->ng == t->capg) {
        int cap = t->capg ? 2 * t->capg : 8;
        tr_graph *ng = realloc(t->graphs, sizeof *ng * (size_t)cap);
        int32_t *np = realloc(t->perm, sizeof *np * (size_t)cap);
        if (ng) t->graphs = ng;
        if (np) t->perm = np;
        if (!ng || !np) {
            gopt_graph_free(g);
            return gopt_error_set(err, GOPT_ENOMEM, "trainer: out of memory adding a graph");
        }
        t->capg = cap;
    }
    tr_graph *G = &t->graphs[t->ng];
    memset(G, 0, sizeof *G);
    G->g = g;
    G->fz = gopt_graph_frozen(g);
    G->cm = cm;
    G->ndev = ndev;
    G->prof = prof;
    G->hot = -1;
    G->best = INFINITY;
    G->alt = INFINITY;
    G->sp_s = INFINITY;
    G->own_s = INFINITY;
    if (!G->fz) {
        st = gopt_error_set(err, GOPT_EINVAL, "trainer: graph '%s' is not finalized", gopt_graph_name(g));
        goto fail;
    }
    const gopt_frozen *fz = G->fz;
    int32_t n = fz->n;
    G->unit_first = gopt_malloc(sizeof(int32_t) * (size_t)(n ? n : 1), err);
    int32_t *first = gopt_malloc(sizeof(int32_t) * (size_t)(fz->n_coloc ? fz->n_coloc : 1), err);
    if (!G->unit_first || !first) {
        free(first);
        st = GOPT_ENOMEM;
        goto fail;
    }
    for (int32_t c = 0; c < fz->n_coloc; c++) first[c] = -1;
    int32_t units = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t v = fz->topo[i], c = fz->coloc[v];
        if (c >= 0 && first[c] < 0) first[c] = v;
        G->unit_first[v] = c >= 0 ? first[c] : v;
        if (G->unit_first[v] == v) units++;
    }
    free(first);
    G->rows = 0;
    if (t->o.tasks & GOPT_TASK_BIT(GOPT_TASK_PLACE)) G->rows += units;
    if (t->o.tasks & GOPT_TASK_BIT(GOPT_TASK_SCHED)) G->rows += n;
    if (t->o.tasks & GOPT_TASK_BIT(GOPT_TASK_FUSE)) G->rows += n;
    /* its simulator and features now: a graph they refuse is refused here */
    tr_hot *H = NULL;
    if ((st = tr_hot_get(t, t->ng, &H, err))) goto fail;
    if (ref_step_s > 0) {
        G->ref = ref_step_s;
        strcpy(G->ref_method, "given");
    } else if (gopt_dist_size(t->dp->dist) > 1) {
        G->ref_pending = 1; /* one rank computes it: gopt_trainer_share_references */
    } else if ((st = compute_reference(t, t->ng, err))) {
        goto fail;
    }
    if ((st = tr_reserve(t, n, err))) goto fail;
    if ((st = gopt_policy_reserve(t->pol, n, fz->m, 1, err))) goto fail;
    t->perm[t->ng] = t->ng;
    t->ng++;
    return GOPT_OK;
fail:
    graph_destroy(t, G);
    return st;
}

gopt_status tr_compute_reference(gopt_trainer *t, int i, gopt_error *err) { return compute_reference(t, i, err); }

const gopt_costmodel *gopt_trainer_graph_costmodel(const gopt_trainer *t, int i) { return t->graphs[i].cm; }

int gopt_trainer_num_graphs(const gopt_trainer *t) { return t->ng; }
const gopt_graph *gopt_trainer_graph(const gopt_trainer *t, int i) { return t->graphs[i].g; }
double gopt_trainer_reference(const gopt_trainer *t, int i, const char **method) {
    if (method) *method = t->graphs[i].ref_method;
    return t->graphs[i].ref;
}
double gopt_trainer_best(const gopt_trainer *t, int i, const gopt_decisions **d) {
    const tr_graph *G = &t->graphs[i];
    if (G->sp_s < G->best && G->sp_s <= G->alt) { /* an answer of the splice search (splice.c) */
        if (d) *d = G->has_sp_dec ? &G->sp_dec : NULL;
        return G->sp_s;
    }
    if (G->alt < G->best) { /* an answer of the hint pass (tr_note_alt) */
        if (d) *d = G->has_alt ? &G->alt_dec : NULL;
        return G->alt;
    }
    if (d) *d = G->has_best ? &G->best_dec : NULL;
    return G->best;
}
int64_t gopt_trainer_steps_done(const gopt_trainer *t) { return t->step; }
int gopt_trainer_style_probation(const gopt_trainer *t, int i, double *style_s, double *own_s) {
    const tr_graph *G = &t->graphs[i];
    const int on = G->probation != 0 && G->best_style;
    if (on && style_s) *style_s = G->best;
    if (on && own_s) *own_s = G->own_s;
    return on;
}
int gopt_trainer_baselines(const gopt_trainer *t, int i, const char **names, double *steps, int max) {
    const tr_graph *G = &t->graphs[i];
    int k = G->nbase < max ? G->nbase : max;
    for (int j = 0; j < k; j++) {
        names[j] = G->base_name[j];
        steps[j] = G->base_step[j];
    }
    return k;
}
unsigned gopt_trainer_options_tasks(const gopt_trainer *t) { return t->o.tasks; }

void tr_schedule_next(gopt_trainer *t) {
    int B = t->o.graphs_per_step < t->ng ? t->o.graphs_per_step : t->ng;
    for (int b = 0; b < B; b++) {
        if (t->cursor == 0) /* a new pass: reshuffle (Fisher-Yates) */
            for (int32_t i = t->ng - 1; i > 0; i--) {
                int32_t j = (int32_t)gopt_rng_below(&t->rng, (uint64_t)i + 1), tmp = t->perm[i];
                t->perm[i] = t->perm[j];
                t->perm[j] = tmp;
            }
        t->sel[b] = t->perm[t->cursor];
        t->cursor = (t->cursor + 1) % t->ng;
    }
    t->nsel = B;
}

void tr_cp_cache_free(tr_cp_cache *c) {
    free(c->dev);
    free(c->prio);
    memset(c, 0, sizeof *c);
}

/* d's priorities 1..n in critical-path order on its placement, from the cache when it holds them */
static gopt_status cp_priorities(const gopt_frozen *fz, const gopt_bl_problem *ties, tr_cp_cache *c,
                                 gopt_decisions *d, gopt_error *err) {
    const size_t bytes = sizeof(int32_t) * (size_t)fz->n;
    if (c && c->fz == fz && c->cm == ties->cm && c->ndev == ties->ndev && !memcmp(c->dev, d->device, bytes)) {
        memcpy(d->priority, c->prio, bytes);
        return GOPT_OK;
    }
    gopt_status st = gopt_bl_schedule_cp(ties, d, err);
    if (st || !c) return st;
    c->fz = NULL;
    if (fz->n > c->cap) {
        int32_t *dev = realloc(c->dev, bytes ? bytes : 1), *prio = dev ? realloc(c->prio, bytes ? bytes : 1) : NULL;
        if (dev) c->dev = dev;
        if (prio) c->prio = prio;
        if (!dev || !prio) return GOPT_OK; /* no room to remember: the answer stands */
        c->cap = fz->n;
    }
    memcpy(c->dev, d->device, bytes);
    memcpy(c->prio, d->priority, bytes);
    c->fz = fz;
    c->cm = ties->cm;
    c->ndev = ties->ndev;
    return GOPT_OK;
}

gopt_status gopt_trainer_actions_to_decisions_within(const gopt_frozen *fz, unsigned tasks, int fuse_merge,
                                                     const int32_t *within, const gopt_bl_problem *ties,
                                                     const gopt_policy_actions *a, gopt_decisions *d, int32_t *group,
                                                     gopt_error *err) {
    return tr_actions_to_decisions(fz, tasks, fuse_merge, within, ties, NULL, a, d, group, err);
}

gopt_status tr_actions_to_decisions(const gopt_frozen *fz, unsigned tasks, int fuse_merge, const int32_t *within,
                                    const gopt_bl_problem *ties, tr_cp_cache *cache, const gopt_policy_actions *a,
                                    gopt_decisions *d, int32_t *group, gopt_error *err) {
    int32_t n = fz->n;
    if (d->n != n) return gopt_error_set(err, GOPT_EINVAL, "decisions for %d nodes, graph has %d", d->n, n);
    if (ties && (gopt_graph_frozen(ties->graph) != fz || !ties->cost || ties->cost->n != n))
        return gopt_error_set(err, GOPT_EINVAL, "decisions from actions: the tie-breaking problem is for another graph");
    const int sched = (tasks & GOPT_TASK_BIT(GOPT_TASK_SCHED)) != 0;
    for (int32_t v = 0; v < n; v++) {
        d->device[v] = (tasks & GOPT_TASK_BIT(GOPT_TASK_PLACE)) ? a->place[v] : 0;
        d->priority[v] = n - fz->rank[v];
        d->group[v] = -1;
    }
    gopt_status st = GOPT_OK;
    /* within a level: the critical path's order (priorities 1..n) or the topological one */
    if (sched && ties && (st = cp_priorities(fz, ties, cache, d, err))) return st;
    if (sched)
        for (int32_t v = 0; v < n; v++) d->priority[v] += a->sched[v] * (n + 1);
    if (!(tasks & GOPT_TASK_BIT(GOPT_TASK_FUSE))) return GOPT_OK;
    int32_t ngroups = 0;
    st = within ? gopt_policy_fusion_groups_within(fz, d->device, a->fuse, within, group, &ngroups, err)
                : gopt_policy_fusion_groups(fz, d->device, a->fuse, fuse_merge, group, &ngroups, err);
    if (st) return st;
    /* singletons are not fused: count members in d->group temporarily */
    for (int32_t v = 0; v < n; v++) d->group[v] = 0;
    for (int32_t v = 0; v < n; v++) d->group[group[v]]++;
    for (int32_t v = 0; v < n; v++) {
        int32_t gid = group[v];
        group[v] = d->group[gid] >= 2 ? gid : -1;
    }
    memcpy(d->group, group, sizeof(int32_t) * (size_t)n);
    return GOPT_OK;
}

gopt_status gopt_trainer_actions_to_decisions(const gopt_frozen *fz, unsigned tasks, int fuse_merge,
                                              const gopt_bl_problem *ties, const gopt_policy_actions *a,
                                              gopt_decisions *d, int32_t *group, gopt_error *err) {
    return gopt_trainer_actions_to_decisions_within(fz, tasks, fuse_merge, NULL, ties, a, d, group, err);
}


void tr_actions_pack(int32_t *buf, const gopt_policy_actions *a, int32_t n) {
    memcpy(buf, a->place, sizeof(int32_t) * (size_t)n);
    memcpy(buf + n, a->sched, sizeof(int32_t) * (size_t)n);
    memcpy(buf + 2 * (size_t)n, a->fuse, sizeof(int32_t) * (size_t)n);
}

int64_t tr_actions_out_of_range(const gopt_trainer *t, const tr_graph *G, const int32_t *v, int32_t *hi) {
    const gopt_policy_config *c = gopt_policy_get_config(t->pol);
    const int32_t n = G->fz->n, lim[3] = {G->ndev, c->sched_levels, c->fusion_levels};
    for (size_t k = 0; k < 3 * (size_t)n; k++)
        if (v[k] < 0 || v[k] >= lim[k / (size_t)n]) {
            *hi = lim[k / (size_t)n];
            return (int64_t)k;
        }
    return -1;
}

gopt_status tr_note_best_actions(const gopt_trainer *t, tr_graph *G, const gopt_policy_actions *a, gopt_error *err) {
    if (!t->o.imitate_best) return GOPT_OK;
    const size_t n = (size_t)G->fz->n;
    if (!G->best_act && !(G->best_act = gopt_malloc(sizeof(int32_t) * 3 * (n ? n : 1), err))) {
        G->has_best_act = 0;
        return GOPT_ENOMEM;
    }
    tr_actions_pack(G->best_act, a, (int32_t)n);
    G->has_best_act = 1;
    return GOPT_OK;
}

/* The policy's own greedy answer under G's hints (note_mode 1), kept for the style probation. */
static gopt_status note_own(tr_graph *G, const gopt_decisions *d, const gopt_policy_actions *a, int var, double step,
                            gopt_error *err) {
    if (!(step < G->own_s) || !a) return GOPT_OK;
    const int32_t n = G->fz->n;
    gopt_status st = tr_decisions_fit(&G->own_dec, n, err);
    if (st) return st;
    if (!G->own_act && !(G->own_act = gopt_malloc(sizeof(int32_t) * 3 * (size_t)(n ? n : 1), err))) return GOPT_ENOMEM;
    tr_actions_pack(G->own_act, a, n);
    gopt_decisions_copy(&G->own_dec, d);
    G->own_s = step;
    G->own_var = var;
    return GOPT_OK;
}

gopt_status tr_note_best(const gopt_trainer *t, tr_graph *G, const gopt_decisions *d, const gopt_policy_actions *a,
                         int var, double step, gopt_error *err) {
    gopt_status st = G->note_mode == 1 ? note_own(G, d, a, var, step, err) : GOPT_OK;
    if (st || !(step < G->best)) return st;
    if ((st = tr_decisions_fit(&G->best_dec, d->n, err))) return st;
    if (a && (st = tr_note_best_actions(t, G, a, err))) return st;
    gopt_decisions_copy(&G->best_dec, d);
    G->best = step;
    G->best_var = var;
    G->has_best = 1;
    G->best_style = G->note_mode == 2;
    return GOPT_OK;
}

static gopt_status variant_on(gopt_trainer *t, tr_graph *G, const gopt_policy_actions *a, int v, const int32_t *within,
                              const gopt_bl_problem *bp, int w, gopt_decisions *d, gopt_error *err) {
    const int own = tr_fuse_merge(t) != 0, pi = v / 2;
    return tr_actions_to_decisions(G->fz, t->o.tasks, pi ? !own : own, pi == 2 ? within : NULL, v % 2 ? NULL : bp,
                                   &t->cpc[w], a, d, t->wgroup[w], err);
}

gopt_status tr_variant_decisions(gopt_trainer *t, tr_graph *G, const gopt_policy_actions *a, int v,
                                 const int32_t *within, const gopt_bl_problem *bp, gopt_decisions *d, gopt_error *err) {
    return variant_on(t, G, a, v, within, bp, 0, d, err);
}

typedef struct {
    gopt_trainer *t;
    tr_graph *G;
    const gopt_policy_actions *as;
    int k, v, T;
    const int32_t *within;
    const gopt_bl_problem *bp;
    gopt_decisions *dec;
    gopt_status st[TR_RENDER_THREADS];
    int first[TR_RENDER_THREADS]; /* the item that failed */
    gopt_error err[TR_RENDER_THREADS];
} render_job;

static void render_part(void *ctx, int w) {
    render_job *J = ctx;
    for (int i = w; i < J->k; i += J->T)
        if ((J->st[w] = variant_on(J->t, J->G, &J->as[i], J->v, J->within, J->bp, w, &J->dec[i], &J->err[w]))) {
            J->first[w] = i;
            return;
        }
}

gopt_status tr_variants_render(gopt_trainer *t, tr_graph *G, const gopt_policy_actions *as, int k, int v,
                               const int32_t *within, const gopt_bl_problem *bp, gopt_decisions *dec, gopt_error *err) {
    int T = t->o.sim_threads < TR_RENDER_THREADS ? t->o.sim_threads : TR_RENDER_THREADS;
    if (T > k) T = k;
    if (T < 1 || (int64_t)k * G->fz->n < TR_RENDER_MIN_NODES) T = 1; /* too little to pay for the threads */
    for (int w = 1; w < T; w++) /* the workers' group scratch beside t->group */
        if (!t->wgroup[w] && !(t->wgroup[w] = gopt_malloc(sizeof(int32_t) * (size_t)(t->cap_n > 0 ? t->cap_n : 1), err)))
            return GOPT_ENOMEM;
    render_job J = {.t = t, .G = G, .as = as, .k = k, .v = v, .T = T, .within = within, .bp = bp, .dec = dec};
    gopt_parallel_parts(T, T, render_part, &J);
    int bad = -1; /* the earliest item that failed, as a loop in order would report it */
    for (int w = 0; w < T; w++)
        if (J.st[w] && (bad < 0 || J.first[w] < J.first[bad])) bad = w;
    if (bad < 0) return GOPT_OK;
    if (err) *err = J.err[bad];
    return J.st[bad];
}

/* Packed actions act into d as variant var (0..3) of tr_judge_variants makes them. */
static gopt_status render_variant(gopt_trainer *t, tr_graph *G, int32_t *act, int var, gopt_decisions *d,
                                  gopt_error *err) {
    const gopt_policy_actions a = tr_actions_packed(act, G->fz->n);
    gopt_bl_problem bp;
    gopt_status st = tr_problem(t, (int)(G - t->graphs), &bp, err);
    if (st || (st = tr_decisions_fit(d, G->fz->n, err))) return st;
    return tr_variant_decisions(t, G, &a, var, NULL, &bp, d, err);
}

gopt_status tr_restore_decisions(gopt_trainer *t, tr_graph *G, gopt_error *err) {
    gopt_status st = GOPT_OK;
    if (G->has_best_act && isfinite(G->best) && !G->has_best) {
        if ((st = render_variant(t, G, G->best_act, G->best_var, &G->best_dec, err))) return st;
        G->has_best = 1;
    }
    if (G->sp_act && isfinite(G->sp_s) && !G->has_sp_dec) {
        if ((st = render_variant(t, G, G->sp_act, G->sp_var, &G->sp_dec, err))) return st;
        G->has_sp_dec = 1;
    }
    if (G->probation && G->own_act && (st = render_variant(t, G, G->own_act, G->own_var, &G->own_dec, err))) return st;
    return st;
}

/* d's schedule and fusion replaced by the best of {cp, fifo} x xla on its placement, as the
 * references' combinations make them (gopt_trainer_set_target, GOPT_TARGET_PLACE). */
static gopt_status classical_on_placement(gopt_trainer *t, tr_graph *G, const gopt_bl_problem *bp, gopt_decisions *d,
                                          gopt_error *err) {
    gopt_decisions c = {0};
    gopt_status st = gopt_decisions_init(&c, G->fz->n, err);
    double best = INFINITY;
    for (int k = 0; k < 2 && !st; k++) {
        gopt_decisions_copy(&c, d);
        if ((st = (k ? gopt_bl_schedule_fifo : gopt_bl_schedule_cp)(bp, &c, err)) ||
            (st = gopt_bl_fuse_xla(bp, &c, err)))
            break;
        gopt_decisions_copy(&t->dec[0], &c);
        int ok = 1;
        if ((st = tr_simulate(t, G, 1, &ok, err))) break;
        double s = ok && !t->res[0].oom ? t->res[0].step_time_s : INFINITY;
        if (k == 0 || s < best) {
            best = s;
            gopt_decisions_copy(d, &c);
        }
    }
    gopt_decisions_destroy(&c);
    return st;
}

gopt_status gopt_trainer_set_target(gopt_trainer *t, int i, const int32_t *packed, int keep, int *used, double *step_s,
                                    gopt_error *err) {
    *used = 0;
    *step_s = INFINITY;
    if (i < 0 || i >= t->ng) return gopt_error_set(err, GOPT_EINVAL, "trainer: graph %d of %d", i, t->ng);
    if (keep != GOPT_TARGET_ALL && keep != GOPT_TARGET_PLACE)
        return gopt_error_set(err, GOPT_EINVAL, "trainer: target keep = %d is not all or place", keep);
    tr_graph *G = &t->graphs[i];
    if (G->ref_pending || !G->has_ref_dec)
        return gopt_error_set(err, GOPT_EINVAL, "trainer: graph '%s' has no reference to improve on",
                              gopt_graph_name(G->g));
    const int32_t n = G->fz->n;
    int32_t hi;
    const int64_t bad = tr_actions_out_of_range(t, G, packed, &hi);
    if (bad >= 0)
        return gopt_error_set(err, GOPT_EINVAL, "trainer: graph '%s': target action %lld = %d is not in 0..%d",
                              gopt_graph_name(G->g), (long long)bad, packed[bad], hi - 1);
    gopt_status st = tr_decisions_for(t, n, err);
    if (st) return st;
    int32_t *v = malloc(sizeof(int32_t) * 3 * (size_t)(n ? n : 1));
    if (!v) return gopt_error_set(err, GOPT_ENOMEM, "trainer: out of memory");
    memcpy(v, packed, sizeof(int32_t) * 3 * (size_t)n);
    gopt_policy_actions a = tr_actions_packed(v, n);
    gopt_bl_problem bp;
    gopt_decisions d = {0};
    tr_hot *H = NULL;
    int ok = 1, how;
    double rstep;
    /* the actions' decisions, then their imitation target as a reference's is made (priority ranks
     * cut into equal levels, groups coloured): a sampled solution's levels are partly noise that
     * no policy could predict, and imitating them as they are spoils the schedule and fusion
     * heads; the target taken is the one imitation will see, so it is what is judged */
    if ((st = tr_problem(t, i, &bp, err)) || (st = gopt_decisions_init(&d, n, err)) ||
        (st = gopt_trainer_actions_to_decisions(G->fz, t->o.tasks, tr_fuse_merge(t), &bp, &a, &d, t->group, err)))
        goto out;
    if (keep == GOPT_TARGET_PLACE && (st = classical_on_placement(t, G, &bp, &d, err))) goto out;
    /* devices numbered as the references' targets are (canonical_targets): a sampled solution's
     * labels are one of its symmetric copies, and imitating another copy than the references'
     * teaches the first decisions labels the rest of the decoder does not follow */
    if (t->o.canonical_targets &&
        ((st = tr_hot_get(t, i, &H, err)) || (st = relabel_canonical(t, G, H, &d, INFINITY, &how, &rstep, err))))
        goto out;
    if ((st = tr_imitation_targets(t, G, &d, &a, err)) ||
        (st = gopt_trainer_actions_to_decisions(G->fz, t->o.tasks, tr_fuse_merge(t), &bp, &a, &t->dec[0], t->group,
                                                err)) ||
        (st = tr_simulate(t, G, 1, &ok, err)))
        goto out;
    if (ok && !t->res[0].oom) *step_s = t->res[0].step_time_s;
    if (!(*step_s < G->ref)) goto out; /* no better than the reference's decisions: they stay the target */
    free(G->tgt_act);
    G->tgt_act = v;
    v = NULL;
    G->has_tgt_act = 1;
    G->tgt_step = *step_s;
    G->tgt_tasks = keep == GOPT_TARGET_PLACE ? GOPT_TASK_BIT(GOPT_TASK_PLACE) : GOPT_TASKS_ALL;
    G->target_rel = *step_s / G->ref;
    *used = 1;
out:
    gopt_decisions_destroy(&d);
    free(v);
    return st;
}

void gopt_trainer_set_evaluator(gopt_trainer *t, gopt_bl_evaluate_fn fn, void *ctx) {
    t->eval = fn;
    t->eval_ctx = fn ? ctx : NULL;
}

/* One evaluation by the evaluator into res (step and OOM only); 0 when it failed. */
static int tr_evaluate(gopt_trainer *t, const gopt_decisions *d, gopt_sim_result *res) {
    int oom = 0;
    double s = t->eval(t->eval_ctx, d, &oom);
    memset(res, 0, sizeof *res);
    res->step_time_s = s;
    res->oom = oom != 0;
    res->oom_device = oom > 0 ? oom - 1 : -1;
    return s >= 0 && isfinite(s);
}

gopt_status tr_simulate(gopt_trainer *t, tr_graph *G, int k, int *ok, gopt_error *err) {
    gopt_error e2 = {0};
    for (int i = 0; i < k; i++) ok[i] = 1;
    if (t->eval) { /* one at a time: a measuring evaluator owns the machine while it runs */
        for (int i = 0; i < k; i++) ok[i] = tr_evaluate(t, &t->dec[i], &t->res[i]);
        return GOPT_OK;
    }
    tr_hot *H = NULL;
    gopt_status st = tr_hot_get(t, (int)(G - t->graphs), &H, err);
    if (st) return st;
    int th = t->o.sim_threads < k ? t->o.sim_threads : k;
    if (gopt_sim_run_batch(H->sim, t->dec, k, t->res, H->scratch, th, &e2) == GOPT_OK) return GOPT_OK;
    /* some sample was rejected (e.g. a fusion deadlock): find which, one by one */
    for (int i = 0; i < k; i++)
        if (gopt_sim_run(H->sim, &t->dec[i], &t->res[i], H->scratch[0], &e2)) ok[i] = 0;
    return GOPT_OK;
}

gopt_status tr_decisions_fit(gopt_decisions *d, int32_t n, gopt_error *err) {
    if (d->n == n && d->device) return GOPT_OK;
    gopt_decisions_destroy(d);
    return gopt_decisions_init(d, n, err);
}

gopt_status tr_note_alt(tr_graph *G, const gopt_decisions *d, double step, gopt_error *err) {
    if (!(step < G->alt)) return GOPT_OK;
    gopt_status st = tr_decisions_fit(&G->alt_dec, d->n, err);
    if (st) return st;
    gopt_decisions_copy(&G->alt_dec, d);
    G->alt = step;
    G->has_alt = 1;
    return GOPT_OK;
}

gopt_status tr_judge_variants(gopt_trainer *t, tr_graph *G, int k, int first, const int32_t *within, double *best_s,
                              gopt_decisions *best_d, gopt_sim_result *best_res, gopt_error *err) {
    const unsigned tasks = t->o.tasks;
    const int sched = (tasks & GOPT_TASK_BIT(GOPT_TASK_SCHED)) != 0, fuse = (tasks & GOPT_TASK_BIT(GOPT_TASK_FUSE)) != 0;
    gopt_bl_problem bp;
    gopt_status st = tr_problem(t, (int)(G - t->graphs), &bp, err);
    if (st || (st = tr_decisions_for(t, G->fz->n, err))) return st;
    for (int v = first; v < 6; v++) { /* v / 2: 1 the other fusion pass, 2 within's; v % 2: the topological tie order */
        const int pi = v / 2, topo = v % 2;
        if ((pi && !fuse) || (pi == 2 && !within) || (topo && !sched)) continue;
        gopt_policy_actions as[GOPT_TRAINER_MAX_SAMPLES];
        for (int i = 0; i < k; i++) as[i] = tr_actions(t, 0, i);
        if ((st = tr_variants_render(t, G, as, k, v, within, &bp, t->dec, err))) return st;
        int ok[GOPT_TRAINER_MAX_SAMPLES];
        if ((st = tr_simulate(t, G, k, ok, err))) return st;
        for (int i = 0; i < k; i++) {
            const double step = t->res[i].step_time_s;
            if (!ok[i] || t->res[i].oom || !(step > 0) || !isfinite(step)) continue;
            if (step < *best_s) {
                *best_s = step;
                if (best_d) gopt_decisions_copy(best_d, &t->dec[i]);
                if (best_res) *best_res = t->res[i];
            }
            gopt_policy_actions a = tr_actions(t, 0, i);
            /* the hint pass's groups: an answer, not an incumbent the policy's own passes can search around */
            if ((st = pi == 2 ? tr_note_alt(G, &t->dec[i], step, err) : tr_note_best(t, G, &t->dec[i], &a, v, step, err)))
                return st;
        }
    }
    return GOPT_OK;
}

/* gopt_trainer_greedy's styles: the greedy decisions under each style of G's hints (the best hint
 * placer's other combinations, gopt_go_hint_styles), judged like the greedy ones; the graph's own
 * hints are set again after. */
static gopt_status greedy_styles(gopt_trainer *t, int i, tr_graph *G, double *best, gopt_decisions *d,
                                 gopt_sim_result *res, gopt_error *err) {
    int sty[GOPT_GO_MAX_STYLES];
    const int ns = gopt_go_hint_styles(G->hint_table, t->o.greedy_styles == GOPT_GO_STYLES_ALL, sty, GOPT_GO_MAX_STYLES);
    if (!ns) return GOPT_OK;
    const int32_t n = G->fz->n;
    const int nh = gopt_policy_get_config(t->pol)->hints;
    int32_t *hdev = gopt_malloc(sizeof(int32_t) * (size_t)nh * (size_t)n, err);
    int32_t *hgroup = gopt_malloc(sizeof(int32_t) * (size_t)n, err);
    float *hfeat = gopt_malloc(sizeof(float) * (size_t)n * GOPT_POLICY_NHINT, err);
    float q[GOPT_POLICY_MAX_HINTS] = {0};
    gopt_status st = !hdev || !hgroup || !hfeat ? GOPT_ENOMEM : GOPT_OK;
    gopt_bl_problem bp;
    tr_hot *H = NULL;
    if (st || (st = tr_problem(t, i, &bp, err)) || (st = tr_hot_get(t, i, &H, err)) ||
        (st = tr_decisions_for(t, n, err)))
        goto out;
    for (int s = 0; s < ns; s++) {
        int have = 0;
        gopt_policy_actions a = tr_actions(t, 0, 0);
        if ((st = gopt_go_hints_pick(&bp, G->hint_table, sty[s], hdev, hfeat, hgroup, q, &have, err)) ||
            (st = gopt_policy_set_hints(t->pol, n, G->ndev, nh, have ? hdev : NULL, have ? hfeat : NULL,
                                        have ? hgroup : NULL, q, err)) ||
            (st = gopt_policy_forward(t->pol, G->fz, H->feat, G->ndev, NULL, err)) ||
            (st = gopt_policy_greedy(t->pol, &a, err)) ||
            (st = tr_judge_variants(t, G, 1, 0, have ? hgroup : NULL, best, d, res, err)))
            goto out;
    }
out:
    free(hdev);
    free(hgroup);
    free(hfeat);
    { /* the graph's own hints again, whatever happened */
        gopt_error e2 = {0};
        gopt_status s2 = gopt_policy_set_hints(t->pol, n, G->ndev, nh, G->hint_dev, G->hint_feat, G->hint_group,
                                               G->hint_q, &e2);
        if (!st && s2) {
            if (err) *err = e2;
            st = s2;
        }
    }
    return st;
}

/* gopt_trainer_greedy's answers; own: keep the policy's own under G's hints (note_own) */
static gopt_status greedy_judged(gopt_trainer *t, int i, tr_graph *G, int own, gopt_decisions *d,
                                 gopt_sim_result *res, gopt_error *err) {
    G->note_mode = own ? 1 : 0;
    gopt_status st = tr_forward(t, G, err);
    if (st) return st;
    gopt_policy_actions a = tr_actions(t, 0, 0);
    if ((st = gopt_policy_greedy(t->pol, &a, err))) return st;
    gopt_bl_problem bp;
    if ((st = tr_problem(t, i, &bp, err))) return st;
    if ((st = gopt_trainer_actions_to_decisions(G->fz, t->o.tasks, tr_fuse_merge(t), &bp, &a, d, t->group, err))) return st;
    tr_hot *H = NULL;
    if (t->eval) {
        if (!tr_evaluate(t, d, res))
            return gopt_error_set(err, GOPT_EINVAL, "trainer: the evaluator failed on the greedy decisions of graph '%s'",
                                  gopt_graph_name(G->g));
    } else {
        if ((st = tr_hot_get(t, i, &H, err)) || (st = gopt_sim_run(H->sim, d, res, H->scratch[0], err))) return st;
    }
    if (!res->oom && (st = tr_note_best(t, G, d, &a, 0, res->step_time_s, err))) return st;
    /* the same levels with the other tie order and fusion passes (gopt_go_decide's defaults judge
     * all six): the fastest is the answer; a variant the evaluator rejects is dropped */
    double best = res->oom ? INFINITY : res->step_time_s;
    if ((st = tr_judge_variants(t, G, 1, 1, G->hint_group, &best, d, res, err))) return st;
    /* the greedy decisions under the hints' other styles too (gopt_go_decide's default) */
    G->note_mode = 2;
    return G->hint_table ? greedy_styles(t, i, G, &best, d, res, err) : GOPT_OK;
}

gopt_status gopt_trainer_greedy(gopt_trainer *t, int i, gopt_decisions *d, gopt_sim_result *res, gopt_error *err) {
    if (i < 0 || i >= t->ng) return gopt_error_set(err, GOPT_EINVAL, "trainer: graph index %d out of range", i);
    tr_graph *G = &t->graphs[i];
    /* before the first step, the zero-shot answers: the policy's own under G's hints is kept and a
     * style's answer as the incumbent goes on probation (o.style_probation, tr_probation_step) */
    const int zero_shot = t->step == 0 && t->o.style_probation > 0 && t->o.imitate_best;
    if (zero_shot) G->own_s = INFINITY;
    gopt_status st = greedy_judged(t, i, G, zero_shot, d, res, err);
    G->note_mode = 0;
    if (!st && zero_shot && G->best_style && G->best < G->own_s) G->probation = 1;
    return st;
}

gopt_status tr_probation_step(gopt_trainer *t, int i, gopt_trainer_stats *stats, gopt_error *err) {
    tr_graph *G = &t->graphs[i];
    const double held = G->best < G->sp_s ? G->best : G->sp_s;
    if (G->probation && !G->best_style) G->probation = 0; /* a sample of the policy's own is the incumbent */
    if (!G->probation) return GOPT_OK;
    if (G->probation == 1) {
        G->probation = 2;
        G->prob_ref = held;
        G->prob_steps = 0;
    }
    if (++G->prob_steps < t->o.style_probation) return GOPT_OK;
    G->probation = 0;
    if (held < G->prob_ref || !isfinite(G->own_s) || !G->own_act) return GOPT_OK; /* it led somewhere */
    /* nothing found from the style's answer: it becomes an answer apart */
    gopt_status st = tr_note_alt(G, &G->best_dec, G->best, err);
    if (st) return st;
    memcpy(G->best_act, G->own_act, sizeof(int32_t) * 3 * (size_t)G->fz->n);
    gopt_decisions_copy(&G->best_dec, &G->own_dec);
    G->best = G->own_s;
    G->best_var = G->own_var;
    G->best_style = 0;
    /* the splice search's parent too: with nothing faster found, its best is the style's answer
     * (now the answer apart above), and it follows the own answer from the next step on
     * (adopt_incumbent), as self-imitation does */
    G->sp_s = INFINITY;
    G->has_sp_dec = 0;
    if (!stats->probation_ended++) stats->own_step_s = G->own_s;
    return GOPT_OK;
}

gopt_status gopt_trainer_step(gopt_trainer *t, gopt_trainer_stats *st, gopt_error *err) {
    memset(st, 0, sizeof *st);
    if (t->ng == 0) return gopt_error_set(err, GOPT_EINVAL, "trainer: no graphs to train on");
    double t0 = gopt_now_seconds();
    if (t->step % t->o.switch_every == 0 || t->nsel == 0) tr_schedule_next(t);
    st->step = t->step;
    st->graphs = t->nsel;
    st->graph = t->sel[0];
    const int64_t after = (int64_t)t->step - t->o.imitate_steps; /* PPO steps' index */
    const int imitate = after < 0 || (t->o.imitate_every > 0 && after % t->o.imitate_every == t->o.imitate_every - 1);
    gopt_status s = imitate ? tr_imitate_step(t, st, err) : tr_ppo_step(t, st, err);
    if (!s && !imitate && t->o.splice > 0 && (s = tr_splice_step(t, err)) == GOPT_OK)
        st->best_so_far_rel = gopt_trainer_best(t, t->sel[0], NULL) / t->graphs[t->sel[0]].ref;
    for (int b = 0; !s && !imitate && t->o.style_probation > 0 && b < t->nsel; b++)
        s = tr_probation_step(t, t->sel[b], st, err);
    if (s) return s;
    t->step++;
    st->seconds = gopt_now_seconds() - t0;
    return GOPT_OK;
}
