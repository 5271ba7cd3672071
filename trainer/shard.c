/* shard.c: data-parallel steps. How a step's graphs (slots) and samples are
 * dealt to the ranks (tr_shard_of, see trainer_internal.h), the gathers of
 * per-sample results and per-slot statistics, the per-slot gradients summed
 * in slot order, the best decisions shared by every rank, and the graphs'
 * references computed on rank i mod N and shared (gopt_trainer_share_references).
 *
 * Invariant (bit-identity): whatever the number of ranks, every rank ends a
 * step with the same parameters as one process: the sampling streams are the
 * same on every rank (one per slot, split from the trainer RNG when B > 1;
 * the trainer RNG itself when B = 1), each slot's gradient is computed whole
 * by one rank, and the gradient applied is g_0 + g_1 + ... + g_(B-1) added in
 * that order in float (a gather in rank order, then the sum), never an
 * MPI_Allreduce whose order depends on N. One process runs the same code with
 * a gather that is a copy.
 *
 * Cost per update: every rank receives B * P floats (P parameters), in
 * chunks of at most GATHER_FLOATS floats for all slots together; one process
 * keeps a running sum instead (P floats).
 */
#include <stdlib.h>
#include <string.h>

#include "trainer_internal.h"

#define GATHER_FLOATS ((size_t)1 << 24) /* 64 MiB of gradient chunks per gather */

void tr_shard_of(int B, int K, int N, int r, tr_shard *sh) {
    if (B >= N) {
        sh->s0 = (int)((long long)r * B / N);
        sh->s1 = (int)((long long)(r + 1) * B / N);
        sh->lo = sh->s0 * K;
        sh->hi = sh->s1 * K;
        sh->l0 = sh->s0;
        sh->l1 = sh->s1;
        return;
    }
    int b = (int)((long long)r * B / N);
    /* the group of slot b: ranks first..last-1 with floor(r*B/N) == b */
    int first = (int)(((long long)b * N + B - 1) / B), last = (int)(((long long)(b + 1) * N + B - 1) / B);
    int g = last - first, i = r - first;
    sh->s0 = b;
    sh->s1 = b + 1;
    sh->lo = b * K + (int)((long long)i * K / g);
    sh->hi = b * K + (int)((long long)(i + 1) * K / g);
    sh->l0 = i == 0 ? b : 0;
    sh->l1 = i == 0 ? b + 1 : 0;
}

gopt_status tr_dist_create(gopt_trainer *t, gopt_error *err) {
    struct tr_dist *dp = gopt_calloc(1, sizeof *dp, err);
    if (!dp) return GOPT_ENOMEM;
    t->dp = dp;
    size_t B = (size_t)t->o.graphs_per_step;
    dp->rng = gopt_calloc(B, sizeof *dp->rng, err);
    dp->best = gopt_calloc(B, sizeof *dp->best, err);
    dp->P = gopt_policy_num_params(t->pol);
    dp->gacc = gopt_malloc(sizeof(float) * (dp->P ? dp->P : 1), err);
    if (!dp->rng || !dp->best || !dp->gacc) return GOPT_ENOMEM;
    return GOPT_OK;
}

void tr_dist_free(gopt_trainer *t) {
    struct tr_dist *dp = t->dp;
    if (!dp) return;
    if (dp->best)
        for (int b = 0; b < t->o.graphs_per_step; b++) gopt_decisions_destroy(&dp->best[b]);
    free(dp->best);
    free(dp->rng);
    free(dp->gloc);
    free(dp->gall);
    free(dp->gacc);
    free(dp->counts);
    free(dp);
    t->dp = NULL;
}

void gopt_trainer_set_dist(gopt_trainer *t, gopt_dist *d) { t->dp->dist = d; }

gopt_status tr_dist_begin(gopt_trainer *t, int B, int split_rng, gopt_error *err) {
    struct tr_dist *dp = t->dp;
    for (int i = 0; i < t->ng; i++)
        if (t->graphs[i].ref_pending)
            return gopt_error_set(err, GOPT_EINVAL, "trainer: graph '%s' has no reference yet (call "
                                  "gopt_trainer_share_references after adding the graphs)", gopt_graph_name(t->graphs[i].g));
    int N = gopt_dist_size(dp->dist);
    tr_shard_of(B, t->o.samples, N, gopt_dist_rank(dp->dist), &dp->sh);
    if (!dp->counts && !(dp->counts = gopt_calloc((size_t)N, sizeof *dp->counts, err))) return GOPT_ENOMEM;
    if (split_rng && B > 1)
        for (int b = 0; b < B; b++) gopt_rng_split(&t->rng, &dp->rng[b]);
    return GOPT_OK;
}

gopt_rng *tr_slot_rng(gopt_trainer *t, int b) { return t->nsel > 1 ? &t->dp->rng[b] : &t->rng; }

gopt_status tr_gather_samples(gopt_trainer *t, const double *mine, double *all, gopt_error *err) {
    struct tr_dist *dp = t->dp;
    int N = gopt_dist_size(dp->dist);
    tr_shard s;
    for (int r = 0; r < N; r++) {
        tr_shard_of(t->nsel, t->o.samples, N, r, &s);
        dp->counts[r] = sizeof(double) * (size_t)(s.hi - s.lo);
    }
    return gopt_dist_allgatherv(dp->dist, mine, sizeof(double) * (size_t)(dp->sh.hi - dp->sh.lo), all, dp->counts,
                                err);
}

gopt_status tr_gather_slots(gopt_trainer *t, int S, const double *mine, double *all, gopt_error *err) {
    struct tr_dist *dp = t->dp;
    int N = gopt_dist_size(dp->dist);
    tr_shard s;
    for (int r = 0; r < N; r++) {
        tr_shard_of(t->nsel, t->o.samples, N, r, &s);
        dp->counts[r] = sizeof(double) * (size_t)S * (size_t)(s.l1 - s.l0);
    }
    return gopt_dist_allgatherv(dp->dist, mine, sizeof(double) * (size_t)S * (size_t)(dp->sh.l1 - dp->sh.l0), all,
                                dp->counts, err);
}

/* Copy the policy's gradient into dst (P floats) or back (to_policy). */
static void grad_copy(gopt_policy *pol, float *buf, int to_policy) {
    int nt = gopt_policy_num_tensors(pol);
    size_t off = 0;
    for (int i = 0; i < nt; i++) {
        const char *name;
        float *param, *grad;
        size_t count;
        gopt_policy_tensor(pol, i, &name, &param, &grad, &count);
        if (to_policy) memcpy(grad, buf + off, sizeof(float) * count);
        else memcpy(buf + off, grad, sizeof(float) * count);
        off += count;
    }
}

gopt_status tr_grad_stash(gopt_trainer *t, int b, gopt_error *err) {
    struct tr_dist *dp = t->dp;
    const size_t P = dp->P;
    const int one = gopt_dist_size(dp->dist) == 1;
    const size_t j = (size_t)(b - dp->sh.l0);
    if (one && j == 0) { /* one process: a running sum in slot order, starting from slot 0's own gradient */
        grad_copy(t->pol, dp->gacc, 0);
        return GOPT_OK;
    }
    size_t need = one ? P : P * (size_t)(dp->sh.l1 - dp->sh.l0);
    if (need > dp->cap_g) {
        float *g = realloc(dp->gloc, sizeof(float) * need);
        if (!g) return gopt_error_set(err, GOPT_ENOMEM, "trainer: out of memory for %zu gradient values", need);
        dp->gloc = g;
        dp->cap_g = need;
    }
    if (!one) {
        grad_copy(t->pol, dp->gloc + j * P, 0);
        return GOPT_OK;
    }
    grad_copy(t->pol, dp->gloc, 0);
    for (size_t i = 0; i < P; i++) dp->gacc[i] += dp->gloc[i];
    return GOPT_OK;
}

gopt_status tr_grad_reduce(gopt_trainer *t, gopt_error *err) {
    struct tr_dist *dp = t->dp;
    const size_t P = dp->P, B = (size_t)t->nsel;
    const int N = gopt_dist_size(dp->dist);
    if (N > 1 && P > 0) {
        size_t chunk = B * P <= GATHER_FLOATS ? P : GATHER_FLOATS / B > 1024 ? GATHER_FLOATS / B : 1024;
        if (chunk > P) chunk = P;
        const size_t mine = (size_t)(dp->sh.l1 - dp->sh.l0);
        if (B * chunk + mine * chunk > dp->cap_all) {
            float *g = realloc(dp->gall, sizeof(float) * (B + mine) * chunk);
            if (!g) return gopt_error_set(err, GOPT_ENOMEM, "trainer: out of memory gathering gradients");
            dp->gall = g;
            dp->cap_all = (B + mine) * chunk;
        }
        float *send = dp->gall + B * chunk;
        tr_shard s;
        for (size_t off = 0; off < P; off += chunk) {
            size_t c = P - off < chunk ? P - off : chunk;
            for (size_t j = 0; j < mine; j++) memcpy(send + j * c, dp->gloc + j * P + off, sizeof(float) * c);
            for (int r = 0; r < N; r++) {
                tr_shard_of((int)B, t->o.samples, N, r, &s);
                dp->counts[r] = sizeof(float) * c * (size_t)(s.l1 - s.l0);
            }
            gopt_status st = gopt_dist_allgatherv(dp->dist, send, sizeof(float) * c * mine, dp->gall, dp->counts, err);
            if (st) return st;
            float *acc = dp->gacc + off;
            memcpy(acc, dp->gall, sizeof(float) * c);
            for (size_t b = 1; b < B; b++) {
                const float *g = dp->gall + b * c;
                for (size_t i = 0; i < c; i++) acc[i] += g[i];
            }
        }
    }
    grad_copy(t->pol, dp->gacc, 1);
    return GOPT_OK;
}

gopt_status tr_keep_slot_best(gopt_trainer *t, int b, const gopt_decisions *d, gopt_error *err) {
    gopt_status st = tr_decisions_fit(&t->dp->best[b], d->n, err);
    if (!st) gopt_decisions_copy(&t->dp->best[b], d);
    return st;
}

/* The rank that simulates global sample g. */
static int sample_owner(const gopt_trainer *t, int g) {
    int N = gopt_dist_size(t->dp->dist);
    tr_shard s;
    for (int r = 0; r < N; r++) {
        tr_shard_of(t->nsel, t->o.samples, N, r, &s);
        if (g >= s.lo && g < s.hi) return r;
    }
    return 0;
}

gopt_status tr_share_bests(gopt_trainer *t, const int *improved, gopt_error *err) {
    struct tr_dist *dp = t->dp;
    const int B = t->nsel, K = t->o.samples, N = gopt_dist_size(dp->dist), me = gopt_dist_rank(dp->dist);
    size_t total = 0, mine = 0;
    for (int r = 0; r < N; r++) dp->counts[r] = 0;
    const size_t per = t->o.imitate_best ? 6 : 3; /* the decisions, and the actions behind them */
    for (int b = 0; b < B; b++)
        if (improved[b] >= 0) {
            size_t bytes = per * sizeof(int32_t) * (size_t)t->graphs[t->sel[b]].fz->n;
            dp->counts[sample_owner(t, b * K + improved[b])] += bytes;
            total += bytes;
        }
    if (!total) return GOPT_OK;
    mine = dp->counts[me];
    int32_t *buf = malloc(total + mine + 1);
    if (!buf) return gopt_error_set(err, GOPT_ENOMEM, "trainer: out of memory sharing the best decisions");
    int32_t *send = (int32_t *)((char *)buf + total), *p = send;
    for (int b = 0; b < B; b++) {
        if (improved[b] < 0 || sample_owner(t, b * K + improved[b]) != me) continue;
        const gopt_decisions *d = &dp->best[b];
        memcpy(p, d->device, sizeof(int32_t) * (size_t)d->n);
        memcpy(p + d->n, d->priority, sizeof(int32_t) * (size_t)d->n);
        memcpy(p + 2 * d->n, d->group, sizeof(int32_t) * (size_t)d->n);
        if (per == 6) { /* the owner sampled the slot: its actions are still in t->act */
            gopt_policy_actions a = tr_actions(t, b, improved[b]);
            tr_actions_pack(p + 3 * d->n, &a, d->n);
        }
        p += per * d->n;
    }
    gopt_status st = gopt_dist_allgatherv(dp->dist, send, mine, buf, dp->counts, err);
    p = buf;
    for (int b = 0; b < B && !st; b++) { /* ranks' blocks come in slot order */
        if (improved[b] < 0) continue;
        tr_graph *G = &t->graphs[t->sel[b]];
        const int32_t n = G->fz->n;
        if ((st = tr_decisions_fit(&G->best_dec, n, err))) break;
        memcpy(G->best_dec.device, p, sizeof(int32_t) * (size_t)n);
        memcpy(G->best_dec.priority, p + n, sizeof(int32_t) * (size_t)n);
        memcpy(G->best_dec.group, p + 2 * n, sizeof(int32_t) * (size_t)n);
        G->has_best = 1;
        G->best_var = G->samp_var; /* the variant the step's samples were made with (ppo.c, rollout) */
        if (per == 6) {
            gopt_policy_actions a = tr_actions_packed(p + 3 * n, n);
            if ((st = tr_note_best_actions(t, G, &a, err))) break;
        }
        p += per * n;
    }
    free(buf);
    return st;
}

/* What a graph's reference computation produced, as it travels between ranks
 * (followed by the imitation target: device, priority, group, n each). */
typedef struct {
    double ref, relabel_step;
    double base_step[TR_MAX_BASE];
    int32_t nbase, has_ref_dec, relabel, n;
    char ref_method[64];
    char base_name[TR_MAX_BASE][32];
} ref_rec;

static size_t ref_bytes(const tr_graph *G) { /* a multiple of 8: the next record's doubles stay aligned */
    return (sizeof(ref_rec) + 3 * sizeof(int32_t) * (size_t)G->fz->n + 7) & ~(size_t)7;
}

gopt_status gopt_trainer_share_references(gopt_trainer *t, gopt_error *err) {
    struct tr_dist *dp = t->dp;
    const int N = gopt_dist_size(dp->dist), me = gopt_dist_rank(dp->dist);
    gopt_status st = GOPT_OK;
    int failed = 0, any = 0;
    for (int i = me; i < t->ng && !failed; i += N)
        if (t->graphs[i].ref_pending) {
            failed = (st = tr_compute_reference(t, i, err)) != GOPT_OK;
            t->graphs[i].ref_pending = failed;
        }
    if (gopt_dist_any(dp->dist, failed, &any, failed ? NULL : err)) return failed ? st : GOPT_EIO;
    if (any)
        return failed ? st : gopt_error_set(err, GOPT_EINVAL, "trainer: another rank failed computing a reference");
    if (N == 1) return GOPT_OK;
    if (!dp->counts && !(dp->counts = gopt_calloc((size_t)N, sizeof *dp->counts, err))) return GOPT_ENOMEM;
    /* in rounds of N graphs (one per rank): graph j*N + r comes from rank r */
    for (int j0 = 0; j0 < t->ng && !st; j0 += N) {
        size_t total = 0;
        for (int r = 0; r < N; r++) {
            dp->counts[r] = j0 + r < t->ng ? ref_bytes(&t->graphs[j0 + r]) : 0;
            total += dp->counts[r];
        }
        char *buf = calloc(1, total + dp->counts[me] + 1);
        if (!buf) return gopt_error_set(err, GOPT_ENOMEM, "trainer: out of memory sharing references");
        char *send = buf + total;
        if (j0 + me < t->ng) {
            const tr_graph *G = &t->graphs[j0 + me];
            ref_rec *rec = (ref_rec *)send;
            rec->ref = G->ref;
            rec->relabel_step = G->relabel_step;
            memcpy(rec->base_step, G->base_step, sizeof rec->base_step);
            rec->nbase = G->nbase;
            rec->has_ref_dec = G->has_ref_dec;
            rec->relabel = G->relabel;
            rec->n = G->fz->n;
            memcpy(rec->ref_method, G->ref_method, sizeof rec->ref_method);
            memcpy(rec->base_name, G->base_name, sizeof rec->base_name);
            int32_t *d = (int32_t *)(rec + 1);
            if (G->has_ref_dec) {
                memcpy(d, G->ref_dec.device, sizeof(int32_t) * (size_t)rec->n);
                memcpy(d + rec->n, G->ref_dec.priority, sizeof(int32_t) * (size_t)rec->n);
                memcpy(d + 2 * rec->n, G->ref_dec.group, sizeof(int32_t) * (size_t)rec->n);
            }
        }
        st = gopt_dist_allgatherv(dp->dist, send, dp->counts[me], buf, dp->counts, err);
        size_t off = 0;
        for (int r = 0; r < N && j0 + r < t->ng && !st; off += dp->counts[r], r++) {
            tr_graph *G = &t->graphs[j0 + r];
            const ref_rec *rec = (const ref_rec *)(buf + off);
            if (r == me) continue;
            G->ref = rec->ref;
            G->relabel_step = rec->relabel_step;
            memcpy(G->base_step, rec->base_step, sizeof rec->base_step);
            G->nbase = rec->nbase;
            G->relabel = rec->relabel;
            memcpy(G->ref_method, rec->ref_method, sizeof rec->ref_method);
            memcpy(G->base_name, rec->base_name, sizeof rec->base_name);
            if (rec->has_ref_dec) {
                const int32_t *d = (const int32_t *)(rec + 1);
                if ((st = tr_decisions_fit(&G->ref_dec, rec->n, err))) break;
                memcpy(G->ref_dec.device, d, sizeof(int32_t) * (size_t)rec->n);
                memcpy(G->ref_dec.priority, d + rec->n, sizeof(int32_t) * (size_t)rec->n);
                memcpy(G->ref_dec.group, d + 2 * rec->n, sizeof(int32_t) * (size_t)rec->n);
                G->has_ref_dec = 1;
            }
            G->ref_pending = 0;
        }
        free(buf);
    }
    return st;
}

uint64_t gopt_trainer_fingerprint(const gopt_trainer *t) {
    uint64_t h = TR_FNV_INIT;
    int nt = gopt_policy_num_tensors(t->pol);
    for (int i = 0; i < nt; i++) {
        const char *name;
        float *param, *grad;
        size_t count;
        gopt_policy_tensor(t->pol, i, &name, &param, &grad, &count);
        h = tr_fnv64(h, param, sizeof(float) * count);
    }
    h = tr_fnv64(h, &t->step, sizeof t->step);
    h = tr_fnv64(h, t->rng.s, sizeof t->rng.s);
    for (int i = 0; i < t->ng; i++) {
        const tr_graph *G = &t->graphs[i];
        h = tr_fnv64(h, &G->ref, sizeof(double));
        h = tr_fnv64(h, &G->best, sizeof(double));
        h = tr_fnv64(h, &t->profs[G->prof].hash, sizeof(uint64_t)); /* each graph's cluster */
        h = tr_fnv64(h, &G->ndev, sizeof G->ndev);
        if (G->has_tgt_act) h = tr_fnv64(h, G->tgt_act, sizeof(int32_t) * 3 * (size_t)G->fz->n);
    }
    return h;
}
