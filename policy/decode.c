/* decode.c: from the heads' logits to decisions, log-probabilities and
 * entropies, and the gradient of their weighted sum with respect to the
 * logits.
 *
 * Placement is decided per unit: a colocation group is one unit (its
 * members' placement logits are averaged, its device mask is the AND of
 * theirs), every other node is its own unit. So a sample can never split a
 * group. The unit's log-probability and entropy are carried by its first
 * member in topological order. Devices >= ndev are masked. Scheduling and
 * fusion are per node over all P / F levels.
 * Sampling visits nodes in topological order and draws one uniform per
 * decision (placement only at a unit's first member): one RNG state gives
 * one answer. Cost O(n * (ndev + P + F)).
 */
#include <math.h>
#include <string.h>

#include "policy_net.h"

static uint32_t full_mask(int w) { return w >= 32 ? 0xffffffffu : (1u << w) - 1u; }

gopt_status policy_decode_prepare(gopt_policy *p, const uint16_t *dev_mask, gopt_error *err) {
    const gopt_frozen *fz = p->fz;
    policy_acts *A = &p->A;
    const int n = p->n, W = p->width[GOPT_TASK_PLACE];
    const uint32_t full = full_mask(p->ndev);
    for (int i = 0; i < fz->n_coloc && i < n; i++) A->coloc_unit[i] = -1;
    int U = 0;
    for (int i = 0; i < n; i++) {
        int v = fz->topo[i];
        int cg = fz->coloc ? fz->coloc[v] : -1;
        int u;
        if (cg >= 0 && A->coloc_unit[cg] >= 0) {
            u = A->coloc_unit[cg];
        } else {
            u = U++;
            A->unit_rep[u] = i;
            A->unit_size[u] = 0;
            A->unit_mask[u] = full;
            if (cg >= 0) A->coloc_unit[cg] = u;
        }
        A->unit_of[i] = u;
        A->unit_size[u]++;
        A->unit_mask[u] &= dev_mask ? (uint32_t)dev_mask[v] & full : full;
        if (!A->unit_mask[u]) {
            if (cg >= 0)
                return gopt_error_set(err, GOPT_EINVAL,
                                      "policy: node %d: no device among %d is allowed for its colocation group %d "
                                      "(AND of the members' device masks is empty)",
                                      v, (int)p->ndev, cg);
            return gopt_error_set(err, GOPT_EINVAL, "policy: node %d: device mask 0x%x allows none of the %d devices",
                                  v, dev_mask ? (unsigned)dev_mask[v] : 0u, (int)p->ndev);
        }
    }
    p->n_units = U;
    /* pooled placement logits per unit */
    memset(A->pooled, 0, sizeof(float) * (size_t)U * W);
    const float *lg = A->head[GOPT_TASK_PLACE].logits;
    for (int i = 0; i < n; i++) {
        float *d = A->pooled + (size_t)A->unit_of[i] * W;
        for (int j = 0; j < W; j++) d[j] += lg[(size_t)i * W + j];
    }
    for (int u = 0; u < U; u++) {
        float inv = 1.0f / (float)A->unit_size[u];
        float *d = A->pooled + (size_t)u * W;
        for (int j = 0; j < W; j++) d[j] *= inv;
        head_acts *h = &A->head[GOPT_TASK_PLACE];
        h->ent[u] = (float)gopt_logsoftmax_row(h->logp + (size_t)u * W, d, W, A->unit_mask[u]);
    }
    for (int t = GOPT_TASK_SCHED; t < GOPT_TASK_COUNT; t++) {
        head_acts *h = &A->head[t];
        const int w = p->width[t];
        for (int i = 0; i < n; i++)
            h->ent[i] = (float)gopt_logsoftmax_row(h->logp + (size_t)i * w, h->logits + (size_t)i * w, w, full_mask(w));
    }
    return GOPT_OK;
}

/* The row of task t for rank i (placement: the unit's row) and its mask. */
static const float *task_row(const gopt_policy *p, int t, int i, uint32_t *mask, float *ent) {
    const head_acts *h = &p->A.head[t];
    int w = p->width[t];
    int r = i;
    if (t == GOPT_TASK_PLACE) {
        r = p->A.unit_of[i];
        *mask = p->A.unit_mask[r];
    } else {
        *mask = full_mask(w);
    }
    *ent = h->ent[r];
    return h->logp + (size_t)r * w;
}

static int32_t *action_array(const gopt_policy_actions *a, int t) {
    return t == GOPT_TASK_PLACE ? a->place : (t == GOPT_TASK_SCHED ? a->sched : a->fuse);
}

static int is_unit_first(const gopt_policy *p, int i, int t) {
    return t != GOPT_TASK_PLACE || p->A.unit_rep[p->A.unit_of[i]] == i;
}

static gopt_status need_forward(const gopt_policy *p, const gopt_policy_actions *a, const char *what,
                                gopt_error *err) {
    if (!p->forwarded) return gopt_error_set(err, GOPT_EINVAL, "policy %s: no forward pass to read", what);
    if (!a || !a->place || !a->sched || !a->fuse)
        return gopt_error_set(err, GOPT_EINVAL, "policy %s: an action array is NULL", what);
    return GOPT_OK;
}

static gopt_status decide(gopt_policy *p, gopt_rng *rng, gopt_policy_actions *out, gopt_error *err) {
    gopt_status st = need_forward(p, out, rng ? "sample" : "greedy", err);
    if (st) return st;
    const gopt_frozen *fz = p->fz;
    for (int i = 0; i < p->n; i++) {
        int v = fz->topo[i];
        for (int t = 0; t < GOPT_TASK_COUNT; t++) {
            int32_t *act = action_array(out, t);
            if (!is_unit_first(p, i, t)) {
                act[v] = act[fz->topo[p->A.unit_rep[p->A.unit_of[i]]]];
                continue;
            }
            uint32_t mask;
            float ent;
            const float *lp = task_row(p, t, i, &mask, &ent);
            int w = p->width[t], choice = -1;
            if (rng) {
                double r = gopt_rng_uniform(rng), cum = 0.0;
                for (int j = 0; j < w; j++) {
                    if (!((mask >> j) & 1u)) continue;
                    choice = j; /* the last allowed one absorbs rounding */
                    cum += exp((double)lp[j]);
                    if (r < cum) break;
                }
            } else {
                float best = -INFINITY;
                for (int j = 0; j < w; j++)
                    if (((mask >> j) & 1u) && (choice < 0 || lp[j] > best)) {
                        best = lp[j];
                        choice = j;
                    }
            }
            act[v] = choice;
        }
    }
    return GOPT_OK;
}

gopt_status gopt_policy_sample(gopt_policy *p, gopt_rng *rng, gopt_policy_actions *out, gopt_error *err) {
    if (!rng) return gopt_error_set(err, GOPT_EINVAL, "policy sample: no RNG");
    return decide(p, rng, out, err);
}

gopt_status gopt_policy_greedy(gopt_policy *p, gopt_policy_actions *out, gopt_error *err) {
    return decide(p, NULL, out, err);
}

gopt_status policy_check_actions(const gopt_policy *p, const gopt_policy_actions *a, gopt_error *err) {
    const gopt_frozen *fz = p->fz;
    for (int i = 0; i < p->n; i++) {
        int v = fz->topo[i];
        for (int t = 0; t < GOPT_TASK_COUNT; t++) {
            int32_t x = action_array(a, t)[v];
            uint32_t mask;
            float ent;
            task_row(p, t, i, &mask, &ent);
            int w = t == GOPT_TASK_PLACE ? p->ndev : p->width[t];
            if (x < 0 || x >= w)
                return gopt_error_set(err, GOPT_EINVAL, "policy: node %d: %s action %d is outside 0..%d", v,
                                      gopt_task_name((gopt_task)t), (int)x, w - 1);
            if (!((mask >> x) & 1u))
                return gopt_error_set(err, GOPT_EINVAL, "policy: node %d: device %d is masked for it", v, (int)x);
            if (!is_unit_first(p, i, t)) {
                int rv = fz->topo[p->A.unit_rep[p->A.unit_of[i]]];
                if (a->place[rv] != x)
                    return gopt_error_set(err, GOPT_EINVAL,
                                          "policy: node %d: device %d splits its colocation group (node %d is on %d)",
                                          v, (int)x, rv, (int)a->place[rv]);
            }
        }
    }
    return GOPT_OK;
}

gopt_status gopt_policy_logprob(gopt_policy *p, const gopt_policy_actions *a, float *logp, float *ent,
                                double *total_logp, double *total_ent, gopt_error *err) {
    gopt_status st = need_forward(p, a, "logprob", err);
    if (st) return st;
    if ((st = policy_check_actions(p, a, err))) return st;
    const int n = p->n;
    double tl[GOPT_TASK_COUNT] = {0}, te[GOPT_TASK_COUNT] = {0};
    for (int i = 0; i < n; i++) {
        int v = p->fz->topo[i];
        for (int t = 0; t < GOPT_TASK_COUNT; t++) {
            float lpv = 0.0f, ev = 0.0f;
            if (is_unit_first(p, i, t)) {
                uint32_t mask;
                const float *row = task_row(p, t, i, &mask, &ev);
                lpv = row[action_array(a, t)[v]];
            }
            if (logp) logp[(size_t)t * n + v] = lpv;
            if (ent) ent[(size_t)t * n + v] = ev;
            tl[t] += lpv;
            te[t] += ev;
        }
    }
    for (int t = 0; t <= GOPT_TASK_COUNT; t++) {
        double sl = 0.0, se = 0.0;
        if (t < GOPT_TASK_COUNT) {
            sl = tl[t];
            se = te[t];
        } else {
            for (int k = 0; k < GOPT_TASK_COUNT; k++) {
                sl += tl[k];
                se += te[k];
            }
        }
        if (total_logp) total_logp[t] = sl;
        if (total_ent) total_ent[t] = se;
    }
    return GOPT_OK;
}

/* dz_j += wl * (1[j = a] - p_j) + we * (-p_j (log p_j + H)) over allowed j. */
static void row_grad(float *dz, const float *lp, int w, uint32_t mask, int a, float wl, float we, float ent) {
    for (int j = 0; j < w; j++) {
        if (!((mask >> j) & 1u)) continue;
        double pj = exp((double)lp[j]);
        double g = wl * ((j == a ? 1.0 : 0.0) - pj) - we * pj * ((double)lp[j] + ent);
        dz[j] += (float)g;
    }
}

/* Accumulate the logit gradients of k action sets (weights (k, 3n) in
 * w_logp, entropy weights w_ent for the whole batch) into B->dlogits. */
static gopt_status decode_backward_k(gopt_policy *p, int k, const gopt_policy_actions *a, const float *w_logp,
                                     const float *w_ent, gopt_error *err) {
    gopt_status st;
    for (int s = 0; s < k; s++)
        if ((st = policy_check_actions(p, &a[s], err))) return st;
    const int n = p->n, W = p->width[GOPT_TASK_PLACE];
    policy_bwd *B = &p->B;
    for (int t = 0; t < GOPT_TASK_COUNT; t++) memset(B->dlogits[t], 0, sizeof(float) * (size_t)n * p->width[t]);
    memset(B->dpooled, 0, sizeof(float) * (size_t)p->n_units * W);
    for (int i = 0; i < n; i++) {
        int v = p->fz->topo[i];
        for (int t = 0; t < GOPT_TASK_COUNT; t++) {
            if (!is_unit_first(p, i, t)) continue;
            uint32_t mask;
            float ent;
            const float *lp = task_row(p, t, i, &mask, &ent);
            float *dz = t == GOPT_TASK_PLACE ? B->dpooled + (size_t)p->A.unit_of[i] * W
                                             : B->dlogits[t] + (size_t)i * p->width[t];
            for (int s = 0; s < k; s++) {
                float wl = w_logp ? w_logp[(size_t)s * 3 * n + (size_t)t * n + v] : 0.0f;
                float we = (s == 0 && w_ent) ? w_ent[(size_t)t * n + v] : 0.0f;
                if (wl == 0.0f && we == 0.0f) continue;
                row_grad(dz, lp, p->width[t], mask, action_array(&a[s], t)[v], wl, we, ent);
            }
        }
    }
    /* pooled = mean of the members' logits */
    for (int i = 0; i < n; i++) {
        int u = p->A.unit_of[i];
        float inv = 1.0f / (float)p->A.unit_size[u];
        for (int j = 0; j < W; j++) B->dlogits[GOPT_TASK_PLACE][(size_t)i * W + j] = B->dpooled[(size_t)u * W + j] * inv;
    }
    return GOPT_OK;
}

gopt_status policy_decode_backward(gopt_policy *p, const gopt_policy_actions *a, const float *w_logp,
                                   const float *w_ent, gopt_error *err) {
    return decode_backward_k(p, 1, a, w_logp, w_ent, err);
}

gopt_status gopt_policy_backward_batch(gopt_policy *p, int k, const gopt_policy_actions *a, const float *w_logp,
                                       const float *w_ent, gopt_error *err) {
    if (k < 1 || !a) return gopt_error_set(err, GOPT_EINVAL, "policy backward batch: k = %d", k);
    gopt_status st = need_forward(p, &a[0], "backward", err);
    if (st) return st;
    if ((st = gopt_policy_reserve(p, p->n, p->fz->m, 1, err))) return st;
    if ((st = decode_backward_k(p, k, a, w_logp, w_ent, err))) return st;
    policy_network_backward(p);
    return GOPT_OK;
}

gopt_status gopt_policy_backward(gopt_policy *p, const gopt_policy_actions *a, const float *w_logp,
                                 const float *w_ent, gopt_error *err) {
    gopt_status st = need_forward(p, a, "backward", err);
    if (st) return st;
    if ((st = gopt_policy_reserve(p, p->n, p->fz->m, 1, err))) return st;
    if ((st = policy_decode_backward(p, a, w_logp, w_ent, err))) return st;
    policy_network_backward(p);
    return GOPT_OK;
}
