/* decode.c: the conditioned decoder: from the heads' logits and the
 * decisions already made to decisions, log-probabilities, entropies, and
 * the gradient of their weighted sum with respect to the logits and the
 * decoder's own weights.
 *
 * The trunk (network.c) is computed once per forward and does not depend on
 * any action. The decoder then visits the nodes in topological order and
 * keeps a running state of what it decided: the device of every decided
 * node, each device's committed compute (sum of node times) and memory, the
 * devices of the previous segment's nodes and of the previous node.
 *
 * Placement is decided per unit: a colocation group is one unit (its
 * members' unconditioned logits are averaged, its device mask is the AND of
 * theirs), every other node is its own unit; the unit is decided at its
 * first member in topological order, so no sample can split it, and its
 * log-probability and entropy are carried by that member. For unit u and
 * each allowed device d the scorer adds
 *     c(u,d) = w . tanh(U phi(u,d) + mean_{v in u} V x_v + b)
 * to the logit, with phi (POLICY_NPHI) computed from the decisions already
 * made (phi_features below). With memory inputs, the devices whose
 * committed memory plus the unit's charge exceed their capacity are masked
 * whenever at least one allowed device fits the unit. Schedule and fusion
 * logits of node v get psi(v, device of v) @ W_t (psi_features).
 * A predecessor q counts as decided for unit u when q's unit was decided
 * before u (its first member ranks before u's): the rule is a function of
 * the graph, so decoding and the teacher-forced replay (logprob, backward:
 * phi recomputed from the given actions) see the same state and masks, and
 * logprob is exact for the decoder's distribution.
 * Sampling draws one uniform per decision (placement only at a unit's first
 * member) from the caller's gopt_rng: one RNG state gives one answer.
 * Cost per pass: O(n (P + F) + m + units * ndev * Hc * NPHI) per action set;
 * the backward of k action sets replays them together (up to 16 sets per
 * pass over the nodes, each node's k decisions side by side, so the node's
 * shared inputs are read once while they are in cache), then runs ONE
 * network backward. Sampling k sets goes the same way (sample_batch: set s
 * draws from the stream after sets 0..s-1's units + 2n uniforms, so it is
 * bit for bit k samples in turn) and can keep each set's gradient of its
 * weighted log-probabilities in a block of its own (O(units (W + Hc) +
 * n (P + F)) floats per set), which backward_kept scales per set and hands
 * to one network backward without a replay (PPO's first epoch).
 */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "policy_net.h"

static uint32_t full_mask(int w) { return w >= 32 ? 0xffffffffu : (1u << w) - 1u; }

/* tanh from the vectorizable exp; |x| clamped at 9, where tanh is 1 - 3e-8;
 * a NaN (non-finite parameters) passes through, never into the exp */
static inline float fast_tanh(float x) {
    if (x != x) return x;
    x = x > 9.0f ? 9.0f : x < -9.0f ? -9.0f : x;
    float e = gopt_expf_inline(2.0f * x);
    return (e - 1.0f) / (e + 1.0f);
}

gopt_status gopt_policy_set_decoder_inputs(gopt_policy *p, int32_t n, int32_t ndev, const double *node_time,
                                           const double *node_mem, const double *dev_cap, gopt_error *err) {
    p->in_time = p->in_mem = p->in_cap = NULL;
    p->in_n = p->in_ndev = 0;
    if (n < 0 || (n == 0 && (node_time || node_mem)))
        return gopt_error_set(err, GOPT_EINVAL, "policy decoder inputs: %d nodes", (int)n);
    if (dev_cap && (ndev < 1 || ndev > p->cfg.max_devices))
        return gopt_error_set(err, GOPT_EINVAL, "policy decoder inputs: ndev = %d is outside 1..%d", (int)ndev,
                              (int)p->cfg.max_devices);
    for (int32_t v = 0; node_time && v < n; v++)
        if (!(node_time[v] >= 0) || !isfinite(node_time[v]))
            return gopt_error_set(err, GOPT_EINVAL, "policy decoder inputs: time of node %d is %g", (int)v,
                                  node_time[v]);
    for (int32_t v = 0; node_mem && v < n; v++)
        if (!(node_mem[v] >= 0) || !isfinite(node_mem[v]))
            return gopt_error_set(err, GOPT_EINVAL, "policy decoder inputs: memory of node %d is %g bytes", (int)v,
                                  node_mem[v]);
    for (int32_t d = 0; dev_cap && d < ndev; d++)
        if (!(dev_cap[d] > 0) || !isfinite(dev_cap[d]))
            return gopt_error_set(err, GOPT_EINVAL, "policy decoder inputs: capacity of device %d is %g bytes",
                                  (int)d, dev_cap[d]);
    p->in_time = node_time;
    p->in_mem = node_mem;
    p->in_cap = dev_cap;
    p->in_n = n;
    p->in_ndev = dev_cap ? ndev : 0;
    p->forwarded = 0; /* decisions of the last forward would see other inputs */
    return GOPT_OK;
}

gopt_status gopt_policy_set_hints(gopt_policy *p, int32_t n, int32_t ndev, int nh, const int32_t *dev,
                                  const float *feat, const int32_t *group, const float *quality, gopt_error *err) {
    p->hint_dev = NULL;
    p->hint_feat = NULL;
    p->hint_group = NULL;
    p->hint_n = p->hint_ndev = 0;
    p->hint_best = -1;
    memset(p->hint_q, 0, sizeof p->hint_q);
    p->forwarded = 0;
    if (!dev && !feat) return GOPT_OK;
    if (n < 1) return gopt_error_set(err, GOPT_EINVAL, "policy hints: %d nodes", (int)n);
    if (nh != p->cfg.hints)
        return gopt_error_set(err, GOPT_EINVAL, "policy hints: %d hint placements given, the network reads %d", nh,
                              (int)p->cfg.hints);
    for (size_t i = 0; dev && i < (size_t)nh * (size_t)n; i++)
        if (dev[i] < -1 || dev[i] >= ndev)
            return gopt_error_set(err, GOPT_EINVAL, "policy hints: hint %d: device of node %d is %d, outside -1..%d",
                                  (int)(i / (size_t)n), (int)(i % (size_t)n), (int)dev[i], (int)ndev - 1);
    for (size_t i = 0; feat && i < (size_t)n * POLICY_NHINT_PSI; i++)
        if (!(feat[i] >= 0.0f && feat[i] <= 1.0f))
            return gopt_error_set(err, GOPT_EINVAL, "policy hints: feature %d of node %d is %g, outside [0, 1]",
                                  (int)(i % POLICY_NHINT_PSI), (int)(i / POLICY_NHINT_PSI), (double)feat[i]);
    for (int32_t v = 0; group && v < n; v++)
        if (group[v] < -1 || group[v] >= n)
            return gopt_error_set(err, GOPT_EINVAL, "policy hints: fusion group of node %d is %d, outside -1..%d",
                                  (int)v, (int)group[v], (int)n - 1);
    for (int h = 0; quality && h < nh; h++)
        if (!(quality[h] >= 0.0f && quality[h] <= 1.0f))
            return gopt_error_set(err, GOPT_EINVAL, "policy hints: quality of hint %d is %g, outside [0, 1]", h,
                                  (double)quality[h]);
    for (int h = 0; quality && h < nh; h++) {
        p->hint_q[h] = quality[h];
        if (quality[h] == 1.0f && p->hint_best < 0) p->hint_best = h;
    }
    p->hint_dev = dev;
    p->hint_feat = feat;
    p->hint_group = group;
    p->hint_n = n;
    p->hint_ndev = ndev;
    return GOPT_OK;
}

gopt_status policy_decode_prepare(gopt_policy *p, const uint16_t *dev_mask, gopt_error *err) {
    const gopt_frozen *fz = p->fz;
    policy_acts *A = &p->A;
    const int n = p->n, W = p->width[GOPT_TASK_PLACE], Hc = p->cfg.cond_hidden;
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
    p->kept_k = 0; /* kept gradients belong to the forward they were sampled from */
    /* members of each unit (CSR over units, ranks ascending) */
    memset(A->unit_ptr, 0, sizeof(int32_t) * (size_t)(U + 1));
    for (int u = 0; u < U; u++) A->unit_ptr[u + 1] = A->unit_ptr[u] + A->unit_size[u];
    for (int u = 0; u < U; u++) A->dev_rank[u] = A->unit_ptr[u]; /* fill cursor (scratch) */
    for (int i = 0; i < n; i++) A->unit_idx[A->dev_rank[A->unit_of[i]]++] = i;
    /* pooled placement logits and scorer inputs per unit (means over members) */
    memset(A->pooled, 0, sizeof(float) * (size_t)U * W);
    memset(A->vh_unit, 0, sizeof(float) * (size_t)U * Hc);
    const float *lg = A->head[GOPT_TASK_PLACE].logits;
    for (int i = 0; i < n; i++) {
        const int u = A->unit_of[i];
        float *d = A->pooled + (size_t)u * W;
        for (int j = 0; j < W; j++) d[j] += lg[(size_t)i * W + j];
        float *e = A->vh_unit + (size_t)u * Hc;
        for (int k = 0; k < Hc; k++) e[k] += A->vh[(size_t)i * Hc + k];
    }
    for (int u = 0; u < U; u++) {
        float inv = 1.0f / (float)A->unit_size[u];
        for (int j = 0; j < W; j++) A->pooled[(size_t)u * W + j] *= inv;
        for (int k = 0; k < Hc; k++) A->vh_unit[(size_t)u * Hc + k] *= inv;
    }
    double T = 0;
    for (int v = 0; v < n; v++) T += p->in_time ? p->in_time[v] : 1.0;
    p->total_time = T > 0 ? T : 1.0;
    return GOPT_OK;
}

static int32_t *action_array(const gopt_policy_actions *a, int t) {
    return t == GOPT_TASK_PLACE ? a->place : (t == GOPT_TASK_SCHED ? a->sched : a->fuse);
}

static int is_unit_first(const gopt_policy *p, int i) { return p->A.unit_rep[p->A.unit_of[i]] == i; }

static gopt_status need_forward(const gopt_policy *p, const gopt_policy_actions *a, const char *what,
                                gopt_error *err) {
    if (!p->forwarded) return gopt_error_set(err, GOPT_EINVAL, "policy %s: no forward pass to read", what);
    if (!a || !a->place || !a->sched || !a->fuse)
        return gopt_error_set(err, GOPT_EINVAL, "policy %s: an action array is NULL", what);
    return GOPT_OK;
}

/* Static checks of given actions (ranges, static masks, split groups);
 * the memory masks are checked by the replay. */
gopt_status policy_check_actions(const gopt_policy *p, const gopt_policy_actions *a, gopt_error *err) {
    const gopt_frozen *fz = p->fz;
    for (int i = 0; i < p->n; i++) {
        int v = fz->topo[i];
        for (int t = 0; t < GOPT_TASK_COUNT; t++) {
            int32_t x = action_array(a, t)[v];
            int w = t == GOPT_TASK_PLACE ? p->ndev : p->width[t];
            if (x < 0 || x >= w)
                return gopt_error_set(err, GOPT_EINVAL, "policy: node %d: %s action %d is outside 0..%d", v,
                                      gopt_task_name((gopt_task)t), (int)x, w - 1);
        }
        int x = a->place[v];
        if (!((p->A.unit_mask[p->A.unit_of[i]] >> x) & 1u))
            return gopt_error_set(err, GOPT_EINVAL, "policy: node %d: device %d is masked for it", v, x);
        if (!is_unit_first(p, i)) {
            int rv = fz->topo[p->A.unit_rep[p->A.unit_of[i]]];
            if (a->place[rv] != x)
                return gopt_error_set(err, GOPT_EINVAL,
                                      "policy: node %d: device %d splits its colocation group (node %d is on %d)", v,
                                      x, rv, (int)a->place[rv]);
        }
    }
    return GOPT_OK;
}

/* ---- the replay --------------------------------------------------------------------------- */
/* Where a replay adds its gradients: the policy's (B's hand-offs to the
 * network, G's scorer weights) or one set's kept block (sample batch). */
typedef struct {
    float *dpooled;                  /* (units, W) */
    float *dlogits[GOPT_TASK_COUNT]; /* (n, A_t) by rank; the placement one unused (from dpooled) */
    float *dvh_unit;                 /* (units, Hc) */
    float *cond_w, *cond_b, *cond_u, *cond_sched, *cond_fuse;
    float *cond_fgrp, *cond_shint; /* cfg.fuse_cond, cfg.sched_cond (else NULL) */
} grad_dst;

/* The policy's own destination: B's hand-offs to the network, G's scorer weights. */
static grad_dst policy_dst(gopt_policy *p) {
    policy_bwd *B = &p->B;
    return (grad_dst){B->dpooled,       {B->dlogits[0], B->dlogits[1], B->dlogits[2]},
                      B->dvh_unit,      p->G.cond_w,
                      p->G.cond_b,      p->G.cond_u,
                      p->G.cond_sched,  p->G.cond_fuse,
                      p->G.cond_fgrp,   p->G.cond_shint};
}

typedef struct {
    gopt_rng *rng;         /* decide: sample from it; NULL: greedy */
    float inv_t;           /* sampling: 1 / temperature (0 is taken as 1) */
    int decide;            /* 1: choose the actions (write a); 0: read them */
    gopt_policy_actions *a;
    float *logp, *ent;     /* (3n) or NULL: per decision, node-id order */
    double *tl, *te;       /* (3) or NULL: totals per task */
    const float *wl, *we;  /* gradient weights (3n) or NULL; grad = 1 to accumulate */
    gopt_policy_weight_fn wfn; /* or weights from the rows' log-probabilities (wl unused) */
    void *wctx;
    int set;               /* action set index passed to wfn */
    int grad;
    const grad_dst *gd;    /* grad: where to add; NULL: the policy's */
    const grad_dst *gde;   /* or NULL: the entropy term's gradient goes here, apart from gd's */
    int32_t *fj_write;       /* cfg.fuse_cond: (n, F - 1) by rank, or NULL: record the fusion pass's joins */
    const int32_t *fj_read;  /* or the joins recorded for these very actions: no search, no fusion state */
    const gopt_policy_actions *label; /* read, not decided: log-probabilities and gradients of these actions
                                         while a conditions the decoder (NULL: of a itself) */
} replay_opts;

typedef struct {
    double load[GOPT_POLICY_MAX_DEVICES], mem[GOPT_POLICY_MAX_DEVICES];
    int prev_cnt[GOPT_POLICY_MAX_DEVICES], cur_cnt[GOPT_POLICY_MAX_DEVICES];
    int prev_total;
    int prev_dev; /* device of the previous rank, -1 at rank 0 */
    double load_sum;
    int units;                        /* units decided so far */
    int agree[GOPT_POLICY_MAX_HINTS]; /* of them, those on hint h's device */
    policy_fuse_state fg;             /* cfg.fuse_cond: the fusion pass's groups of the decided nodes */
    int32_t *hgl;                     /* cfg.fuse_hint_level: per hint group, the level its first decided
                                         member took (0: none yet) */
} dec_state;

static double edge_weight(const gopt_frozen *fz, int32_t slot) { return fz->edge_bytes[fz->in_eid[slot]] + 1.0; }

/* Over the edges between unit u's members and other units, in one direction
 * (the CSR ptr/nbr/eid: producers or consumers), weighted by bytes + 1: the
 * total weight into *tot, the weight whose other end is decided (its unit's
 * first member ranks before u's) per device into by_dev. Returns the device
 * of the heaviest decided edge (the first of equal weights), -1 when none. */
static int neighbour_bytes(const gopt_policy *p, const int32_t *place, int u, const int32_t *ptr, const int32_t *nbr,
                           const int32_t *eid, double *by_dev, double *tot) {
    const gopt_frozen *fz = p->fz;
    const policy_acts *A = &p->A;
    const int rep = A->unit_rep[u];
    double best = -1;
    int best_dev = -1;
    for (int32_t k = A->unit_ptr[u]; k < A->unit_ptr[u + 1]; k++) {
        int32_t v = fz->topo[A->unit_idx[k]];
        for (int32_t e = ptr[v]; e < ptr[v + 1]; e++) {
            int32_t q = nbr[e], uq = A->unit_of[fz->rank[q]];
            if (uq == u) continue;
            double w = fz->edge_bytes[eid[e]] + 1.0;
            *tot += w;
            if (A->unit_rep[uq] >= rep) continue; /* not decided yet */
            int d = place[q];
            by_dev[d] += w;
            if (w > best) {
                best = w;
                best_dev = d;
            }
        }
    }
    return best_dev;
}

/* phi (ndev, NPHI) of unit u decided at rank i, for every device, in the
 * state s of one action set whose decided devices are in place (node ids):
 *   0 share of the unit's input bytes (from outside the unit) whose producer is decided and on d
 *   1 the decided producer of the unit's largest input is on d
 *   2 committed compute of d / fair share (total time / ndev)
 *   3 the same minus its mean over devices (load imbalance)
 *   4 committed memory of d / its capacity (0 without memory inputs)
 *   5 1 when the unit would overflow d (0 without memory inputs)
 *   6 share of the previous segment's nodes on d
 *   7 the previous node (rank i - 1) is on d
 *   8..8+H-1 (cfg.hints = H) hint placement h puts the unit on d (gopt_policy_set_hints; 0 without)
 *   8+H the agreement of d: sum over the hints that put the unit on d of the share of the units
 *       decided so far that followed that hint (0 at the first unit)
 *   8+H+1 (cfg.hint_quality) the best hint (quality 1) puts the unit on d
 *   8+H+2 (cfg.hint_quality) the highest quality of the hints that put the unit on d (0: none)
 *   last two (cfg.place_succ): share of the unit's output bytes (to outside the unit) whose
 *       consumer's unit is decided and on d; the decided consumer of the unit's largest output
 *       is on d */
static void phi_features(const gopt_policy *p, const dec_state *s, const int32_t *place, int u, double charge,
                         float *phi) {
    const gopt_frozen *fz = p->fz;
    const policy_acts *A = &p->A;
    const int nd = p->ndev;
    const int rep = A->unit_rep[u];
    double inb[GOPT_POLICY_MAX_DEVICES] = {0}, tot = 0, outb[GOPT_POLICY_MAX_DEVICES] = {0}, tot_out = 0;
    const int best_dev = neighbour_bytes(p, place, u, fz->in_ptr, fz->in_src, fz->in_eid, inb, &tot);
    int best_out_dev = -1; /* consumers decided before u: members of units decided at an earlier first member */
    if (p->cfg.place_succ) best_out_dev = neighbour_bytes(p, place, u, fz->out_ptr, fz->out_dst, fz->out_eid, outb, &tot_out);
    const double fair = p->total_time / nd, mean = s->load_sum / nd;
    const int nphi = POLICY_CFG_NPHI(&p->cfg), H = p->cfg.hints;
    int hint[GOPT_POLICY_MAX_HINTS];
    for (int h = 0; h < H; h++) hint[h] = p->hint_dev ? p->hint_dev[(size_t)h * p->n + fz->topo[rep]] : -1;
    for (int d = 0; d < nd; d++) {
        float *f = phi + (size_t)d * nphi;
        f[0] = tot > 0 ? (float)(inb[d] / tot) : 0.0f;
        f[1] = d == best_dev ? 1.0f : 0.0f;
        f[2] = (float)(s->load[d] / fair);
        f[3] = (float)((s->load[d] - mean) / fair);
        f[4] = p->in_cap && p->in_mem ? (float)(s->mem[d] / p->in_cap[d]) : 0.0f;
        f[5] = p->in_cap && p->in_mem && s->mem[d] + charge > p->in_cap[d] ? 1.0f : 0.0f;
        f[6] = s->prev_total ? (float)s->prev_cnt[d] / (float)s->prev_total : 0.0f;
        f[7] = d == s->prev_dev ? 1.0f : 0.0f;
        if (H > 0) {
            float agree = 0.0f, q = 0.0f; /* q: the highest quality of the hints on d */
            for (int h = 0; h < H; h++) {
                f[POLICY_NPHI + h] = d == hint[h] ? 1.0f : 0.0f;
                if (d != hint[h]) continue;
                if (s->units) agree += (float)s->agree[h] / (float)s->units;
                if (p->hint_q[h] > q) q = p->hint_q[h];
            }
            f[POLICY_NPHI + H] = agree;
            if (p->cfg.hint_quality) {
                f[POLICY_NPHI + H + 1] = p->hint_best >= 0 && d == hint[p->hint_best] ? 1.0f : 0.0f;
                f[POLICY_NPHI + H + 2] = q;
            }
        }
        if (p->cfg.place_succ) {
            f[nphi - 2] = tot_out > 0 ? (float)(outb[d] / tot_out) : 0.0f;
            f[nphi - 1] = d == best_out_dev ? 1.0f : 0.0f;
        }
    }
}

/* psi (NPSI) of node v at rank i on its device dv (every producer of v is decided):
 *   0 share of v's input bytes produced on dv
 *   1 the producer of v's largest input is on dv
 *   2 the previous node (rank i - 1) is on dv
 *   3 committed compute of dv minus the mean over devices, / fair share
 *   4 committed memory of dv / its capacity (0 without memory inputs)
 *   5..7 (cfg.hints) the hints' per-node features (gopt_policy_set_hints; 0 without hints) */
static void psi_features(const gopt_policy *p, const dec_state *s, const int32_t *place, int32_t v, int dv,
                         float *psi) {
    const gopt_frozen *fz = p->fz;
    double same = 0, tot = 0, best = -1;
    int best_dev = -1;
    for (int32_t e = fz->in_ptr[v]; e < fz->in_ptr[v + 1]; e++) {
        int d = place[fz->in_src[e]];
        double w = edge_weight(fz, e);
        tot += w;
        if (d == dv) same += w;
        if (w > best) {
            best = w;
            best_dev = d;
        }
    }
    const double fair = p->total_time / p->ndev;
    psi[0] = tot > 0 ? (float)(same / tot) : 0.0f;
    psi[1] = best_dev == dv ? 1.0f : 0.0f;
    psi[2] = s->prev_dev == dv ? 1.0f : 0.0f;
    psi[3] = (float)((s->load[dv] - s->load_sum / p->ndev) / fair);
    psi[4] = p->in_cap && p->in_mem ? (float)(s->mem[dv] / p->in_cap[dv]) : 0.0f;
    if (p->cfg.hints) {
        const float *h = p->hint_feat ? p->hint_feat + (size_t)v * POLICY_NHINT_PSI : NULL;
        for (int m = 0; m < POLICY_NHINT_PSI; m++) psi[POLICY_NPSI + m] = h ? h[m] : 0.0f;
    }
}

/* Choose from a row: one uniform over the row's probabilities pr (from
 * gopt_logsoftmax_row) when sampling; when greedy, the argmax of the logits z
 * (the most probable action; lowest index on ties), which needs no softmax.
 * inv_t > 0 and != 1 (sampling only): draw from softmax(z * inv_t) over the
 * allowed actions instead of pr (a temperature of 1 / inv_t); 0 is taken as 1. */
/* out of line: inlined into replay_block's node loop it slowed greedy decoding by ~20% */
static __attribute__((noinline)) int choose(const double *pr, const float *z, int w, uint32_t mask,
                                            gopt_rng *rng, float inv_t) {
    int choice = -1;
    if (rng) {
        double tp[32];
        if (inv_t > 0.0f && inv_t != 1.0f) {
            float zt[32], lt[32];
            for (int j = 0; j < w; j++) zt[j] = z[j] * inv_t;
            (void)gopt_logsoftmax_row(lt, tp, zt, w, mask);
            pr = tp;
        }
        double r = gopt_rng_uniform(rng), cum = 0.0;
        for (int j = 0; j < w; j++) {
            if (!((mask >> j) & 1u)) continue;
            choice = j; /* the last allowed one absorbs rounding */
            cum += pr[j];
            if (r < cum) break;
        }
    } else {
        float best = -INFINITY;
        for (int j = 0; j < w; j++)
            if (((mask >> j) & 1u) && (choice < 0 || z[j] > best)) {
                best = z[j];
                choice = j;
            }
    }
    return choice;
}

/* x[j] *= s over a row of w (a task's 1 / temperature: its logits before the softmax, and their
 * gradient after it); nothing at s = 1. */
static inline void row_scale(float *x, int w, float s) {
    if (s != 1.0f)
        for (int j = 0; j < w; j++) x[j] *= s;
}

/* dz_j = wl * (1[j = a] - p_j) + we * (-p_j (log p_j + H)) over allowed j (pr: the row's
 * probabilities from gopt_logsoftmax_row). */
static void row_grad(float *dz, const float *lp, const double *pr, int w, uint32_t mask, int a, float wl, float we,
                     float ent) {
    for (int j = 0; j < w; j++) {
        dz[j] = 0.0f;
        if (!((mask >> j) & 1u)) continue;
        double pj = pr[j];
        double g = wl * ((j == a ? 1.0 : 0.0) - pj) - we * pj * ((double)lp[j] + ent);
        dz[j] = (float)g;
    }
}

/* The scorer's hidden rows of one unit for one action set: th[d] = tanh(vb +
 * phi_d U) for every device d (one flat loop over the ndev x Hc values, so
 * the tanh vectorizes; a masked device's row is computed and ignored), and
 * c[d] = w . th[d] added to z[d] for the allowed ones. */
static inline __attribute__((always_inline))
void scorer_rows(const gopt_policy *p, const float *phi, const float *vb, uint32_t mask, float *th, float *z) {
    const int nd = p->ndev, Hc = p->cfg.cond_hidden, nphi = POLICY_CFG_NPHI(&p->cfg);
    for (int d = 0; d < nd; d++) {
        const float *f = phi + (size_t)d * nphi;
        float *h = th + (size_t)d * Hc;
        memcpy(h, vb, sizeof(float) * (size_t)Hc);
        for (int j = 0; j < nphi; j++) { /* most features are 0 (indicators, shares) */
            const float fj = f[j];
            if (fj == 0.0f) continue;
            const float *uj = p->P.cond_u + (size_t)j * Hc;
            for (int k = 0; k < Hc; k++) h[k] += fj * uj[k];
        }
    }
    const int nh = nd * Hc;
    for (int k = 0; k < nh; k++) th[k] = fast_tanh(th[k]);
    for (int d = 0; d < nd; d++) {
        if (!((mask >> d) & 1u)) continue;
        const float *h = th + (size_t)d * Hc;
        float c = 0.0f;
        for (int k = 0; k < Hc; k++) c += p->P.cond_w[k] * h[k];
        z[d] += c;
    }
}

/* The action sets replayed together: at most REPLAY_BLOCK per pass over the nodes. */
#define REPLAY_BLOCK 16

/* One pass over the nodes in topological order for k <= REPLAY_BLOCK action
 * sets together (node by node, each node's k decisions side by side): decide
 * (or read) every action with the conditioned logits; report
 * log-probabilities and entropies; accumulate gradients when o[s].grad.
 * Each set's arithmetic is the same as on its own, in the same order, so its
 * decisions, log-probabilities, entropies and logit gradients do not depend
 * on k; only the decoder's own weight gradients (sums over sets and nodes)
 * are added in another order (node-major), equal within float rounding. */
GOPT_SIMD_CLONES
static gopt_status replay_block(gopt_policy *p, int k, const replay_opts *o, gopt_error *err) {
    const gopt_frozen *fz = p->fz;
    policy_acts *A = &p->A;
    const int n = p->n, nd = p->ndev, W = p->width[GOPT_TASK_PLACE], Hc = p->cfg.cond_hidden, S = p->cfg.segment;
    const float itp = p->task_inv_t[GOPT_TASK_PLACE]; /* the tasks' temperatures: gopt_policy_set_task_temperature */
    const int has_mem = p->in_mem && p->in_cap;
    const grad_dst own = policy_dst(p);
    dec_state st[REPLAY_BLOCK];
    double tl[REPLAY_BLOCK][GOPT_TASK_COUNT], te[REPLAY_BLOCK][GOPT_TASK_COUNT];
    memset(st, 0, sizeof st);
    memset(tl, 0, sizeof tl);
    memset(te, 0, sizeof te);
    for (int b = 0; b < k; b++) {
        st[b].prev_dev = -1;
        if (o[b].logp) memset(o[b].logp, 0, sizeof(float) * 3 * (size_t)n);
        if (o[b].ent) memset(o[b].ent, 0, sizeof(float) * 3 * (size_t)n);
    }
    const int nphi = POLICY_CFG_NPHI(&p->cfg), npsi = POLICY_CFG_NPSI(&p->cfg);
    const int fcond = p->cfg.fuse_cond && Hc > 0, scond = p->cfg.sched_cond && Hc > 0;
    const int nfrow = POLICY_CFG_NFGRP(&p->cfg); /* rows of cond.fgrp */
    const int fother = p->cfg.fuse_hint && p->hint_group;                    /* row 2: another group */
    const int lrow = fcond && p->cfg.fuse_hint_level && p->hint_group ? nfrow - 1 : -1; /* last row */
    const int nfarr = POLICY_FUSE_ARRAYS + (lrow >= 0);
    int32_t *fbuf = NULL;
    policy_fuse_scratch fscr = {0};
    if (fcond) { /* the fusion pass's groups, built as the levels are decided */
        fbuf = gopt_malloc(sizeof(int32_t) * (size_t)nfarr * (size_t)k * (size_t)(n ? n : 1), err);
        if (!fbuf) return GOPT_ENOMEM;
        gopt_status fs = policy_fuse_scratch_init(&fscr, n, err);
        if (fs) {
            free(fbuf);
            return fs;
        }
        for (int b = 0; b < k; b++) {
            int32_t *sb = fbuf + (size_t)nfarr * (size_t)b * (size_t)n;
            policy_fuse_init(&st[b].fg, fz, p->cfg.fuse_merge, sb, &fscr);
            if (lrow >= 0) {
                st[b].hgl = sb + POLICY_FUSE_ARRAYS * (size_t)n;
                memset(st[b].hgl, 0, sizeof(int32_t) * (size_t)n);
            }
        }
    }
    gopt_status rc = GOPT_OK;
    float phi[GOPT_POLICY_MAX_DEVICES * POLICY_MAX_PHI], th[GOPT_POLICY_MAX_DEVICES * POLICY_MAX_COND];
    float z[32], lp[32], dz[32], psi[POLICY_MAX_PSI], vb[POLICY_MAX_COND];
    double pr[32];
    for (int i = 0; i < n; i++) {
        const int32_t v = fz->topo[i];
        const int u = A->unit_of[i];
        if (A->unit_rep[u] == i) { /* ---- placement of the unit ---- */
            double t_u = 0, charge = 0;
            for (int32_t m = A->unit_ptr[u]; m < A->unit_ptr[u + 1]; m++) {
                int32_t vm = fz->topo[A->unit_idx[m]];
                t_u += p->in_time ? p->in_time[vm] : 1.0;
                if (has_mem) charge += p->in_mem[vm];
            }
            const float *base = A->pooled + (size_t)u * W;
            if (Hc > 0) {
                const float *vh = A->vh_unit + (size_t)u * Hc;
                for (int c = 0; c < Hc; c++) vb[c] = vh[c] + p->P.cond_b[c];
            }
            for (int b = 0; b < k; b++) {
                const replay_opts *ob = &o[b];
                dec_state *s = &st[b];
                gopt_policy_actions *a = ob->a;
                const int need_lp = !ob->decide || ob->rng; /* greedy decoding needs no softmax */
                uint32_t mask = A->unit_mask[u];
                if (has_mem) { /* memory-safe by construction: keep the devices that fit, if any */
                    uint32_t fit = 0;
                    for (int d = 0; d < nd; d++)
                        if (((mask >> d) & 1u) && s->mem[d] + charge <= p->in_cap[d] * (1.0 + 1e-9)) fit |= 1u << d;
                    if (fit) mask = fit;
                }
                for (int d = 0; d < W; d++) z[d] = base[d];
                if (Hc > 0) {
                    phi_features(p, s, a->place, u, charge, phi);
                    scorer_rows(p, phi, vb, mask, th, z);
                }
                if (need_lp) row_scale(z, W, itp); /* the task's temperature (greedy's argmax is the same) */
                float ent = need_lp ? (float)gopt_logsoftmax_row(lp, pr, z, W, mask) : 0.0f;
                int x;
                if (ob->decide) {
                    x = choose(pr, z, W, mask, ob->rng, ob->inv_t);
                    if (!need_lp) lp[x] = 0.0f;
                } else {
                    x = a->place[v];
                    if (!((mask >> x) & 1u)) {
                        rc = gopt_error_set(err, GOPT_EINVAL,
                                            "policy: node %d: device %d is masked for it (its unit needs %.4g "
                                            "bytes; device %d holds %.4g of %.4g)",
                                            (int)v, x, charge, x, s->mem[x], has_mem ? p->in_cap[x] : 0.0);
                        goto out;
                    }
                }
                /* the action scored: a's own, or the label's (a label the context masks scores 0, no gradient) */
                const int xl = ob->label ? ob->label->place[v] : x;
                const int lab_ok = !ob->label || ((mask >> xl) & 1u);
                const float lpx = lab_ok ? lp[xl] : 0.0f;
                tl[b][GOPT_TASK_PLACE] += lpx;
                te[b][GOPT_TASK_PLACE] += ent;
                if (ob->logp) ob->logp[v] = lpx;
                if (ob->ent) ob->ent[v] = ent;
                float wl = ob->wfn ? ob->wfn(ob->wctx, ob->set, GOPT_TASK_PLACE, v, lpx) : ob->wl ? ob->wl[v] : 0.0f;
                if (!lab_ok) wl = 0.0f;
                float we = ob->we ? ob->we[v] : 0.0f;
                for (int part = 0; ob->grad && part < 2; part++) { /* part 1: the entropy term apart */
                    const grad_dst *g = part ? ob->gde : ob->gd ? ob->gd : &own;
                    const float pwl = part ? 0.0f : wl, pwe = part || !ob->gde ? we : 0.0f;
                    if (!g || (pwl == 0.0f && pwe == 0.0f)) continue;
                    row_grad(dz, lp, pr, W, mask, xl, pwl, pwe, ent);
                    row_scale(dz, W, itp);
                    float *dp = g->dpooled + (size_t)u * W;
                    for (int d = 0; d < W; d++) dp[d] += dz[d];
                    if (Hc > 0) {
                        float *dvh = g->dvh_unit + (size_t)u * Hc;
                        float dpre[POLICY_MAX_COND];
                        for (int d = 0; d < nd; d++) {
                            if (!((mask >> d) & 1u) || dz[d] == 0.0f) continue;
                            const float *f = phi + (size_t)d * nphi, *h = th + (size_t)d * Hc;
                            for (int c = 0; c < Hc; c++) {
                                g->cond_w[c] += dz[d] * h[c];
                                dpre[c] = dz[d] * p->P.cond_w[c] * (1.0f - h[c] * h[c]);
                                g->cond_b[c] += dpre[c];
                                dvh[c] += dpre[c];
                            }
                            for (int j = 0; j < nphi; j++) {
                                if (f[j] == 0.0f) continue; /* most features are 0: the term adds nothing */
                                for (int c = 0; c < Hc; c++) g->cond_u[j * Hc + c] += dpre[c] * f[j];
                            }
                        }
                    }
                }
                if (ob->decide)
                    for (int32_t m = A->unit_ptr[u]; m < A->unit_ptr[u + 1]; m++)
                        a->place[fz->topo[A->unit_idx[m]]] = x;
                s->load[x] += t_u;
                s->load_sum += t_u;
                s->mem[x] += charge;
                if (p->cfg.hints && p->hint_dev) {
                    const int32_t vr = fz->topo[A->unit_rep[u]];
                    for (int h = 0; h < p->cfg.hints; h++) s->agree[h] += p->hint_dev[(size_t)h * n + vr] == x;
                }
                s->units++;
            }
        }
        /* ---- schedule and fusion of node v on its device ---- */
        for (int b = 0; b < k; b++) {
            const replay_opts *ob = &o[b];
            dec_state *s = &st[b];
            gopt_policy_actions *a = ob->a;
            const int need_lp = !ob->decide || ob->rng;
            const int dv = a->place[v];
            if (Hc > 0) psi_features(p, s, a->place, v, dv, psi);
            /* fuse_cond: for each level, the group it would join (J) or a new root (R); fkind[l]: 0
             * joins (with cfg.fuse_hint and hint groups given: the hint's group of v), 1 roots a new
             * group, 2 (cfg.fuse_hint) joins another group than the hint's */
            int32_t fcand[32];
            int fkind[32];
            float fs[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            int hlv = -1; /* fuse_hint_level: the level v's hint group took, when one of it is decided */
            const int32_t hg = p->hint_group ? p->hint_group[v] : -1;
            if (fcond) {
                const int w = p->width[GOPT_TASK_FUSE];
                const size_t fj = (size_t)i * (size_t)(w - 1); /* row i of the recorded joins: levels 1..w-1 */
                fcand[0] = -1;
                for (int l = 1; l < w; l++) {
                    fcand[l] = ob->fj_read ? ob->fj_read[fj + l - 1] : policy_fuse_join(&s->fg, a->place, a->fuse, v, l);
                    if (ob->fj_write) ob->fj_write[fj + l - 1] = fcand[l];
                    fkind[l] = fcand[l] < 0                                                  ? 1
                               : !fother || (hg >= 0 && p->hint_group[fcand[l]] == hg) ? 0
                                                                                        : 2;
                }
                if (lrow >= 0 && hg >= 0 && s->hgl[hg] > 0 && s->hgl[hg] < w) hlv = s->hgl[hg];
                for (int r = 0; r < nfrow; r++)
                    for (int m = 0; m < npsi; m++) fs[r] += psi[m] * p->P.cond_fgrp[(size_t)r * npsi + m];
            }
            /* sched_cond: the level the hint's priority rank falls in gets psi . u */
            int hlev = -1;
            float sh = 0.0f;
            if (scond && p->hint_feat) {
                const int P = p->width[GOPT_TASK_SCHED];
                hlev = (int)(p->hint_feat[(size_t)v * POLICY_NHINT_PSI] * (float)P);
                hlev = hlev < 0 ? 0 : hlev >= P ? P - 1 : hlev;
                for (int m = 0; m < npsi; m++) sh += psi[m] * p->P.cond_shint[m];
            }
            for (int t = GOPT_TASK_SCHED; t < GOPT_TASK_COUNT; t++) {
                const int w = p->width[t];
                const float *base = A->head[t].logits + (size_t)i * w;
                const float *wc = t == GOPT_TASK_SCHED ? p->P.cond_sched : p->P.cond_fuse;
                const int fg = fcond && t == GOPT_TASK_FUSE, sg = hlev >= 0 && t == GOPT_TASK_SCHED;
                /* z = base + psi W_t, row by row of W_t (vectorizes over the w actions; each z[j]
                 * adds its terms in the same order as a per-action dot product would) */
                for (int j = 0; j < w; j++) z[j] = base[j];
                if (Hc > 0)
                    for (int m = 0; m < npsi; m++) {
                        const float pm = psi[m], *wm = wc + (size_t)m * w;
                        for (int j = 0; j < w; j++) z[j] += pm * wm[j];
                    }
                for (int j = 0; j < w; j++) {
                    if (fg && j > 0) z[j] += fs[fkind[j]];
                    if (fg && j == hlv) z[j] += fs[lrow];
                    if (sg && j == hlev) z[j] += sh;
                }
                const uint32_t mask = full_mask(w);
                const float itt = p->task_inv_t[t];
                if (need_lp) row_scale(z, w, itt);
                float ent = need_lp ? (float)gopt_logsoftmax_row(lp, pr, z, w, mask) : 0.0f;
                int32_t *act = action_array(a, t);
                int x = ob->decide ? choose(pr, z, w, mask, ob->rng, ob->inv_t) : act[v];
                if (!need_lp) lp[x] = 0.0f;
                if (ob->decide) act[v] = x;
                const int xl = ob->label ? action_array(ob->label, t)[v] : x; /* the action scored */
                tl[b][t] += lp[xl];
                te[b][t] += ent;
                if (ob->logp) ob->logp[(size_t)t * n + v] = lp[xl];
                if (ob->ent) ob->ent[(size_t)t * n + v] = ent;
                float wl = ob->wfn  ? ob->wfn(ob->wctx, ob->set, t, v, lp[xl])
                           : ob->wl ? ob->wl[(size_t)t * n + v]
                                    : 0.0f;
                float we = ob->we ? ob->we[(size_t)t * n + v] : 0.0f;
                for (int part = 0; ob->grad && part < 2; part++) { /* as for the placement */
                    const grad_dst *g = part ? ob->gde : ob->gd ? ob->gd : &own;
                    const float pwl = part ? 0.0f : wl, pwe = part || !ob->gde ? we : 0.0f;
                    if (!g || (pwl == 0.0f && pwe == 0.0f)) continue;
                    row_grad(dz, lp, pr, w, mask, xl, pwl, pwe, ent);
                    row_scale(dz, w, itt);
                    float *dl = g->dlogits[t] + (size_t)i * w;
                    for (int j = 0; j < w; j++) dl[j] += dz[j];
                    if (Hc > 0) {
                        float *gc = t == GOPT_TASK_SCHED ? g->cond_sched : g->cond_fuse;
                        for (int m = 0; m < npsi; m++) {
                            if (psi[m] == 0.0f) continue; /* as for cond_u */
                            for (int j = 0; j < w; j++) gc[m * w + j] += psi[m] * dz[j];
                        }
                    }
                    if (sg)
                        for (int m = 0; m < npsi; m++) g->cond_shint[m] += psi[m] * dz[hlev];
                    if (fg) {
                        float gk[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                        for (int j = 1; j < w; j++) gk[fkind[j]] += dz[j];
                        if (hlv >= 0) gk[lrow] += dz[hlv];
                        for (int r = 0; r < nfrow; r++)
                            for (int m = 0; m < npsi; m++) g->cond_fgrp[(size_t)r * npsi + m] += psi[m] * gk[r];
                    }
                }
                if (fg && !ob->fj_read) /* v joins groups or roots one (the recorded joins need no state) */
                    policy_fuse_commit(&s->fg, a->place, a->fuse, v, fcand[x]);
                if (fg && lrow >= 0 && hg >= 0 && s->hgl[hg] == 0 && x > 0) s->hgl[hg] = x;
            }
            /* ---- running state: segments and the previous node ---- */
            s->cur_cnt[dv]++;
            s->prev_dev = dv;
            if ((i + 1) % S == 0) {
                memcpy(s->prev_cnt, s->cur_cnt, sizeof s->prev_cnt);
                memset(s->cur_cnt, 0, sizeof s->cur_cnt);
                s->prev_total = S;
            }
        }
    }
    for (int b = 0; b < k; b++)
        for (int t = 0; t < GOPT_TASK_COUNT; t++) {
            if (o[b].tl) o[b].tl[t] = tl[b][t];
            if (o[b].te) o[b].te[t] = te[b][t];
        }
out:
    free(fbuf);
    policy_fuse_scratch_free(&fscr);
    return rc;
}

static gopt_status replay(gopt_policy *p, const replay_opts *o, gopt_error *err) { return replay_block(p, 1, o, err); }

/* ---- the fusion pass's joins, recorded ---------------------------------------------------
 * With cfg.fuse_cond the decoder asks, at every node and fusion level, which group the node
 * would join (policy_fuse_join: a legality search over the decided nodes). The answers depend
 * on the graph, the placements and the fusion levels only, not on the parameters, so a PPO
 * step's epochs, which replay the very actions the sample batch drew, would search again for
 * the same answers. The sample batch records them per set; a batched backward reads them for
 * each set whose placements and levels equal the recorded ones on the same graph, and
 * searches for the others. */
static uint64_t graph_fingerprint(const gopt_frozen *fz) {
    uint64_t h = 1469598103934665603ull;
#define FJ_MIX(x) (h = (h ^ (uint64_t)(uint32_t)(x)) * 1099511628211ull)
    FJ_MIX(fz->n);
    FJ_MIX(fz->m);
    for (int32_t v = 0; v < fz->n; v++) {
        FJ_MIX(fz->topo[v]);
        FJ_MIX(fz->op_class[v]);
        FJ_MIX(fz->in_ptr[v + 1]);
    }
    for (int32_t e = 0; e < fz->m; e++) FJ_MIX(fz->in_src[e]);
#undef FJ_MIX
    return h;
}

/* Room for k sets' recorded joins; none is valid until fj_done. */
static gopt_status fj_reserve(gopt_policy *p, int k, gopt_error *err) {
    p->fj_k = 0;
    const size_t n = (size_t)p->n, w1 = (size_t)p->width[GOPT_TASK_FUSE] - 1;
    const size_t need = (size_t)k * n * w1, need_act = (size_t)k * 2 * n;
    gopt_status st = policy_grow((void **)&p->fj, &p->fj_cap, need, sizeof(int32_t), "the fusion joins' record", err);
    if (!st)
        st = policy_grow((void **)&p->fj_act, &p->fj_act_cap, need_act, sizeof(int32_t), "the fusion joins' record",
                         err);
    return st;
}

static int32_t *fj_slot(gopt_policy *p, int s) {
    return p->fj + (size_t)s * (size_t)p->n * (size_t)(p->width[GOPT_TASK_FUSE] - 1);
}

/* The sample batch's k sets are recorded: keep their placements and levels. */
static void fj_done(gopt_policy *p, int k, const gopt_policy_actions *a) {
    const size_t n = (size_t)p->n;
    for (int s = 0; s < k; s++) {
        memcpy(p->fj_act + (size_t)s * 2 * n, a[s].place, sizeof(int32_t) * n);
        memcpy(p->fj_act + (size_t)s * 2 * n + n, a[s].fuse, sizeof(int32_t) * n);
    }
    p->fj_graph = graph_fingerprint(p->fz);
    p->fj_k = k;
}

/* The joins recorded for set s if its actions are a's on this graph (fingerprint gh), else NULL. */
static const int32_t *fj_lookup(gopt_policy *p, int s, const gopt_policy_actions *a, uint64_t gh) {
    const size_t n = (size_t)p->n;
    if (s >= p->fj_k || gh != p->fj_graph) return NULL;
    const int32_t *act = p->fj_act + (size_t)s * 2 * n;
    if (memcmp(act, a->place, sizeof(int32_t) * n) || memcmp(act + n, a->fuse, sizeof(int32_t) * n)) return NULL;
    return fj_slot(p, s);
}

/* ---- batched replays on several threads ----------------------------------------------------
 * A batch of k sets (gopt_policy_sample_batch, the batched backwards) is cut into REPLAY_PARTS
 * parts of consecutive sets, each one replay_block pass over the nodes with its own gradient
 * destination; the parts run on up to p->threads threads. The cut does not depend on the
 * thread count, nor does any sum (the parts' gradients are added in part order after all have
 * run), so every result is bit for bit the same on any number of threads. */
#define REPLAY_PARTS 4

typedef struct {
    gopt_policy *p;
    int k;                 /* sets of this part */
    const replay_opts *o;  /* its k options */
    gopt_status st;
    gopt_error err;
} replay_part;

static void replay_part_run(void *ctx, int j) {
    replay_part *r = (replay_part *)ctx + j;
    if (r->k > 0) r->st = replay_block(r->p, r->k, r->o, &r->err);
}

/* Run np parts on p->threads threads (gopt_parallel_parts). The first failing part in part
 * order gives the status and err's message. */
static gopt_status run_parts(gopt_policy *p, replay_part *parts, int np, gopt_error *err) {
    for (int j = 0; j < np; j++) parts[j].st = GOPT_OK;
    gopt_parallel_parts(np, p->threads, replay_part_run, parts);
    for (int j = 0; j < np; j++)
        if (parts[j].st) {
            if (err) *err = parts[j].err;
            return parts[j].st;
        }
    return GOPT_OK;
}

/* The first set of part j of a block of kb sets. */
static int part_start(int kb, int j) { return kb * j / REPLAY_PARTS; }

static gopt_status decide(gopt_policy *p, gopt_rng *rng, float temperature, gopt_policy_actions *out,
                          gopt_error *err) {
    gopt_status st = need_forward(p, out, rng ? "sample" : "greedy", err);
    if (st) return st;
    replay_opts o = {0};
    o.rng = rng;
    o.inv_t = 1.0f / temperature;
    o.decide = 1;
    o.a = out;
    return replay(p, &o, err);
}

gopt_status gopt_policy_sample(gopt_policy *p, gopt_rng *rng, gopt_policy_actions *out, gopt_error *err) {
    if (!rng) return gopt_error_set(err, GOPT_EINVAL, "policy sample: no RNG");
    return decide(p, rng, 1.0f, out, err);
}

gopt_status gopt_policy_sample_tempered(gopt_policy *p, gopt_rng *rng, float temperature, gopt_policy_actions *out,
                                        gopt_error *err) {
    if (!rng) return gopt_error_set(err, GOPT_EINVAL, "policy sample: no RNG");
    if (!(temperature > 0.0f) || !isfinite(temperature))
        return gopt_error_set(err, GOPT_EINVAL, "policy sample: temperature %g (must be > 0 and finite)",
                              (double)temperature);
    return decide(p, rng, temperature, out, err);
}

gopt_status gopt_policy_sample_scored(gopt_policy *p, gopt_rng *rng, gopt_policy_actions *out, float *logp,
                                      float *ent, gopt_error *err) {
    if (!rng) return gopt_error_set(err, GOPT_EINVAL, "policy sample: no RNG");
    gopt_status st = need_forward(p, out, "sample", err);
    if (st) return st;
    replay_opts o = {0};
    o.rng = rng;
    o.decide = 1;
    o.a = out;
    o.logp = logp;
    o.ent = ent;
    return replay(p, &o, err);
}

/* ---- kept gradients (sample batch -> backward_kept) -------------------------------------- */
enum { KEPT_FIELDS = 11 };

/* The fields of a gradient destination and their sizes, in one order. */
static void dst_fields(const gopt_policy *p, const grad_dst *g, float **f, size_t *cnt) {
    const size_t U = (size_t)p->n_units, n = (size_t)p->n, W = (size_t)p->width[GOPT_TASK_PLACE];
    const size_t P = (size_t)p->width[GOPT_TASK_SCHED], F = (size_t)p->width[GOPT_TASK_FUSE];
    const size_t Hc = (size_t)p->cfg.cond_hidden, nphi = (size_t)POLICY_CFG_NPHI(&p->cfg),
                 npsi = (size_t)POLICY_CFG_NPSI(&p->cfg);
    const size_t ps = Hc ? npsi : 0; /* without the scorer (Hc = 0) no cond tensors at all */
    const size_t nfg = p->cfg.fuse_cond ? (size_t)POLICY_CFG_NFGRP(&p->cfg) * ps : 0, nsh = p->cfg.sched_cond ? ps : 0;
    const size_t c[KEPT_FIELDS] = {U * W, n * P, n * F, U * Hc, Hc, Hc, nphi * Hc, ps * P, ps * F, nfg, nsh};
    float *const fs[KEPT_FIELDS] = {g ? g->dpooled : NULL,    g ? g->dlogits[GOPT_TASK_SCHED] : NULL,
                                    g ? g->dlogits[GOPT_TASK_FUSE] : NULL, g ? g->dvh_unit : NULL,
                                    g ? g->cond_w : NULL,     g ? g->cond_b : NULL,
                                    g ? g->cond_u : NULL,     g ? g->cond_sched : NULL,
                                    g ? g->cond_fuse : NULL,  g ? g->cond_fgrp : NULL,
                                    g ? g->cond_shint : NULL};
    for (int j = 0; j < KEPT_FIELDS; j++) {
        if (f) f[j] = fs[j];
        cnt[j] = c[j];
    }
}

/* y += c * x over every field of two destinations (c = 1: the plain sum, bit for bit). */
static void dst_add(const gopt_policy *p, const grad_dst *y, const grad_dst *x, float c) {
    float *fy[KEPT_FIELDS], *fx[KEPT_FIELDS];
    size_t cnt[KEPT_FIELDS];
    dst_fields(p, y, fy, cnt);
    dst_fields(p, x, fx, cnt);
    for (int j = 0; j < KEPT_FIELDS; j++)
        for (size_t i = 0; i < cnt[j]; i++) fy[j][i] += c * fx[j][i];
}

/* Block b of an array of gradient blocks (p->kept, p->part_grad), carved in dst_fields' order. */
static grad_dst carve_block(gopt_policy *p, float *base, int b) {
    size_t cnt[KEPT_FIELDS];
    dst_fields(p, NULL, NULL, cnt);
    float *f[KEPT_FIELDS], *q = base + (size_t)b * p->kept_sz;
    for (int j = 0; j < KEPT_FIELDS; j++) {
        f[j] = q;
        q += cnt[j];
    }
    return (grad_dst){f[0], {NULL, f[1], f[2]}, f[3], f[4], f[5], f[6], f[7], f[8], f[9], f[10]};
}

/* Room for `blocks` gradient blocks in *buf (capacity *cap floats), zeroed; sets p->kept_sz. */
static gopt_status blocks_reserve(gopt_policy *p, float **buf, size_t *cap, int blocks, const char *what,
                                  gopt_error *err) {
    size_t cnt[KEPT_FIELDS], sz = 0;
    dst_fields(p, NULL, NULL, cnt);
    for (int j = 0; j < KEPT_FIELDS; j++) sz += cnt[j];
    const size_t need = sz * (size_t)blocks;
    gopt_status st = policy_grow((void **)buf, cap, need, sizeof(float), what, err);
    if (st) return st;
    p->kept_sz = sz;
    memset(*buf, 0, sizeof(float) * need);
    return GOPT_OK;
}

/* Room for k sets' kept blocks and the entropy term's, zeroed. */
static gopt_status kept_reserve(gopt_policy *p, int k, gopt_error *err) {
    return blocks_reserve(p, &p->kept, &p->kept_cap, k + 1, "the sample batch's kept gradients", err);
}

/* Room for the batched backward's parts 1.. gradient blocks, zeroed. */
static gopt_status part_grad_reserve(gopt_policy *p, int blocks, gopt_error *err) {
    return blocks_reserve(p, &p->part_grad, &p->part_cap, blocks, "the replay parts' gradients", err);
}

gopt_status gopt_policy_sample_batch(gopt_policy *p, int k, gopt_rng *rng, gopt_policy_actions *out, float *logp,
                                     size_t logp_stride, float *ent0, const float *w_keep, const float *w_ent,
                                     gopt_error *err) {
    if (k < 1 || !out) return gopt_error_set(err, GOPT_EINVAL, "policy sample batch: k = %d", k);
    if (!rng) return gopt_error_set(err, GOPT_EINVAL, "policy sample: no RNG");
    gopt_status st;
    for (int s = 0; s < k; s++)
        if ((st = need_forward(p, &out[s], "sample", err))) return st;
    if (logp && logp_stride < 3 * (size_t)p->n)
        return gopt_error_set(err, GOPT_EINVAL, "policy sample batch: log-probability stride %zu is below 3n = %zu",
                              logp_stride, 3 * (size_t)p->n);
    p->kept_k = 0;
    if (w_keep && (st = kept_reserve(p, k, err))) return st;
    const int fcond = p->cfg.fuse_cond && p->cfg.cond_hidden > 0;
    if (fcond && (st = fj_reserve(p, k, err))) return st;
    const grad_dst gent = w_keep ? carve_block(p, p->kept, k) : (grad_dst){0};
    /* set s draws the uniforms that a sequential sample of it would: one per
     * decision (choose), units + 2n per set, so its stream starts after the
     * draws of sets 0..s-1 */
    const uint64_t draws = (uint64_t)p->n_units + 2 * (uint64_t)p->n;
    gopt_rng rs[REPLAY_BLOCK], start[REPLAY_BLOCK + 1];
    grad_dst gd[REPLAY_BLOCK];
    replay_opts o[REPLAY_BLOCK];
    replay_part parts[REPLAY_PARTS];
    for (int b0 = 0; b0 < k; b0 += REPLAY_BLOCK) {
        const int kb = k - b0 < REPLAY_BLOCK ? k - b0 : REPLAY_BLOCK;
        for (int b = 0; b < kb; b++) {
            const int s = b0 + b;
            start[b] = rs[b] = *rng;
            for (uint64_t j = 0; j < draws; j++) (void)gopt_rng_u64(rng);
            if (w_keep) gd[b] = carve_block(p, p->kept, s);
            o[b] = (replay_opts){.rng = &rs[b],
                                 .decide = 1,
                                 .a = &out[s],
                                 .logp = logp ? logp + (size_t)s * logp_stride : NULL,
                                 .ent = s == 0 ? ent0 : NULL,
                                 .wl = w_keep,
                                 .we = s == 0 && w_keep ? w_ent : NULL,
                                 .grad = w_keep != NULL,
                                 .gd = w_keep ? &gd[b] : NULL,
                                 .gde = s == 0 && w_keep ? &gent : NULL,
                                 .fj_write = fcond ? fj_slot(p, s) : NULL};
        }
        start[kb] = *rng;
        /* every set has its own stream and gradient block: the parts share nothing */
        for (int j = 0; j < REPLAY_PARTS; j++)
            parts[j] = (replay_part){.p = p, .k = part_start(kb, j + 1) - part_start(kb, j),
                                     .o = o + part_start(kb, j)};
        if ((st = run_parts(p, parts, REPLAY_PARTS, err))) return st;
        for (int b = 0; b < kb; b++) /* each set drew exactly its share of the stream */
            assert(memcmp(&rs[b], &start[b + 1], sizeof rs[b]) == 0 && "sample batch: draws per set miscounted");
        (void)start; /* read by the assert only */
    }
    if (w_keep) p->kept_k = k;
    if (fcond) fj_done(p, k, out);
    return GOPT_OK;
}

gopt_status gopt_policy_greedy(gopt_policy *p, gopt_policy_actions *out, gopt_error *err) {
    return decide(p, NULL, 1.0f, out, err);
}

gopt_status gopt_policy_logprob(gopt_policy *p, const gopt_policy_actions *a, float *logp, float *ent,
                                double *total_logp, double *total_ent, gopt_error *err) {
    gopt_status st = need_forward(p, a, "logprob", err);
    if (st) return st;
    if ((st = policy_check_actions(p, a, err))) return st;
    double tl[GOPT_TASK_COUNT], te[GOPT_TASK_COUNT];
    replay_opts o = {0};
    o.a = (gopt_policy_actions *)a; /* read only: decide = 0 */
    o.logp = logp;
    o.ent = ent;
    o.tl = tl;
    o.te = te;
    if ((st = replay(p, &o, err))) return st;
    double sl = 0, se = 0;
    for (int t = 0; t < GOPT_TASK_COUNT; t++) {
        if (total_logp) total_logp[t] = tl[t];
        if (total_ent) total_ent[t] = te[t];
        sl += tl[t];
        se += te[t];
    }
    if (total_logp) total_logp[GOPT_TASK_COUNT] = sl;
    if (total_ent) total_ent[GOPT_TASK_COUNT] = se;
    return GOPT_OK;
}

/* The members' shares of their units' gradients: pooled = mean of the
 * members' logits (and scorer inputs). */
static void unpool_grads(gopt_policy *p) {
    const int n = p->n, W = p->width[GOPT_TASK_PLACE], Hc = p->cfg.cond_hidden;
    policy_acts *A = &p->A;
    policy_bwd *B = &p->B;
    for (int i = 0; i < n; i++) {
        int u = A->unit_of[i];
        float inv = 1.0f / (float)A->unit_size[u];
        for (int j = 0; j < W; j++) B->dlogits[GOPT_TASK_PLACE][(size_t)i * W + j] = B->dpooled[(size_t)u * W + j] * inv;
        for (int j = 0; j < Hc; j++) B->dvh[(size_t)i * Hc + j] = B->dvh_unit[(size_t)u * Hc + j] * inv;
    }
}

/* Accumulate the logit (and scorer) gradients of k action sets (weights
 * (k, 3n) in w_logp; entropy weights w_ent ride on set 0's replay). */
/* Zero the decoder's hand-offs to the network (the logit, pooled and scorer-input gradients)
 * before a replay adds to them. */
static void handoffs_zero(gopt_policy *p) {
    const int n = p->n, W = p->width[GOPT_TASK_PLACE], Hc = p->cfg.cond_hidden;
    policy_bwd *B = &p->B;
    for (int t = 0; t < GOPT_TASK_COUNT; t++) memset(B->dlogits[t], 0, sizeof(float) * (size_t)n * p->width[t]);
    memset(B->dpooled, 0, sizeof(float) * (size_t)p->n_units * W);
    memset(B->dvh_unit, 0, sizeof(float) * (size_t)p->n_units * Hc);
}

static gopt_status decode_backward_k(gopt_policy *p, int k, const gopt_policy_actions *a, const float *w_logp,
                                     gopt_policy_weight_fn wfn, void *wctx, const float *w_ent, float *ent0,
                                     gopt_error *err) {
    gopt_status st;
    for (int s = 0; s < k; s++)
        if ((st = policy_check_actions(p, &a[s], err))) return st;
    const int n = p->n, Hc = p->cfg.cond_hidden;
    handoffs_zero(p);
    /* part 0 adds to the policy's gradients, part j > 0 to block j - 1 of p->part_grad, added
     * to the policy's in part order at the end */
    const int np = k > 1 ? REPLAY_PARTS : 1;
    if (np > 1 && (st = part_grad_reserve(p, np - 1, err))) return st;
    grad_dst gd[REPLAY_PARTS];
    for (int j = 1; j < np; j++) gd[j] = carve_block(p, p->part_grad, j - 1);
    replay_opts o[REPLAY_BLOCK];
    replay_part parts[REPLAY_PARTS];
    const int fcond = p->cfg.fuse_cond && Hc > 0 && p->fj_k > 0;
    const uint64_t gh = fcond ? graph_fingerprint(p->fz) : 0;
    for (int b0 = 0; b0 < k; b0 += REPLAY_BLOCK) {
        const int kb = k - b0 < REPLAY_BLOCK ? k - b0 : REPLAY_BLOCK;
        for (int j = 0; j < np; j++) {
            const int lo = np > 1 ? part_start(kb, j) : 0, hi = np > 1 ? part_start(kb, j + 1) : kb;
            parts[j] = (replay_part){.p = p, .k = hi - lo, .o = o + lo};
            for (int b = lo; b < hi; b++) {
                const int s = b0 + b;
                /* replayed even without weights: it checks the memory masks */
                o[b] = (replay_opts){.a = (gopt_policy_actions *)&a[s], /* read only */
                                     .wl = w_logp ? w_logp + (size_t)s * 3 * n : NULL,
                                     .we = s == 0 ? w_ent : NULL,
                                     .wfn = wfn,
                                     .wctx = wctx,
                                     .set = s,
                                     .ent = s == 0 ? ent0 : NULL,
                                     .grad = 1,
                                     .gd = j > 0 ? &gd[j] : NULL,
                                     .fj_read = fcond ? fj_lookup(p, s, &a[s], gh) : NULL};
            }
        }
        if ((st = run_parts(p, parts, np, err))) return st;
    }
    const grad_dst own = policy_dst(p);
    for (int j = 1; j < np; j++) dst_add(p, &own, &gd[j], 1.0f); /* the parts' gradients, in part order */
    unpool_grads(p);
    return GOPT_OK;
}

gopt_status policy_decode_backward(gopt_policy *p, const gopt_policy_actions *a, const float *w_logp,
                                   const float *w_ent, gopt_error *err) {
    return decode_backward_k(p, 1, a, w_logp, NULL, NULL, w_ent, NULL, err);
}

gopt_status gopt_policy_backward_batch(gopt_policy *p, int k, const gopt_policy_actions *a, const float *w_logp,
                                       const float *w_ent, gopt_error *err) {
    if (k < 1 || !a) return gopt_error_set(err, GOPT_EINVAL, "policy backward batch: k = %d", k);
    gopt_status st = need_forward(p, &a[0], "backward", err);
    if (st) return st;
    if ((st = gopt_policy_reserve(p, p->n, p->fz->m, 1, err))) return st;
    if ((st = decode_backward_k(p, k, a, w_logp, NULL, NULL, w_ent, NULL, err))) return st;
    return policy_network_backward(p, err);
}

gopt_status gopt_policy_backward_batch_fn(gopt_policy *p, int k, const gopt_policy_actions *a,
                                          gopt_policy_weight_fn wfn, void *ctx, const float *w_ent, float *ent0,
                                          gopt_error *err) {
    if (k < 1 || !a || !wfn) return gopt_error_set(err, GOPT_EINVAL, "policy backward batch: k = %d", k);
    gopt_status st = need_forward(p, &a[0], "backward", err);
    if (st) return st;
    if ((st = gopt_policy_reserve(p, p->n, p->fz->m, 1, err))) return st;
    if ((st = decode_backward_k(p, k, a, NULL, wfn, ctx, w_ent, ent0, err))) return st;
    return policy_network_backward(p, err);
}

gopt_status gopt_policy_backward_labels(gopt_policy *p, const gopt_policy_actions *ctx,
                                        const gopt_policy_actions *label, const float *w_logp, float *logp,
                                        gopt_error *err) {
    gopt_status st = need_forward(p, ctx, "backward labels", err);
    if (st) return st;
    if ((st = policy_check_actions(p, ctx, err)) || (st = policy_check_actions(p, label, err))) return st;
    if ((st = gopt_policy_reserve(p, p->n, p->fz->m, 1, err))) return st;
    handoffs_zero(p);
    replay_opts o = {0};
    o.a = (gopt_policy_actions *)ctx; /* read only: decide = 0 */
    o.label = label;
    o.logp = logp;
    o.wl = w_logp;
    o.grad = 1;
    if ((st = replay(p, &o, err))) return st;
    unpool_grads(p);
    return policy_network_backward(p, err);
}

gopt_status gopt_policy_backward(gopt_policy *p, const gopt_policy_actions *a, const float *w_logp,
                                 const float *w_ent, gopt_error *err) {
    gopt_status st = need_forward(p, a, "backward", err);
    if (st) return st;
    if ((st = gopt_policy_reserve(p, p->n, p->fz->m, 1, err))) return st;
    if ((st = policy_decode_backward(p, a, w_logp, w_ent, err))) return st;
    return policy_network_backward(p, err);
}

gopt_status gopt_policy_backward_kept(gopt_policy *p, int k, const float *coef, gopt_error *err) {
    if (!p->forwarded) return gopt_error_set(err, GOPT_EINVAL, "policy backward kept: no forward pass to read");
    if (k < 1 || !coef || k != p->kept_k)
        return gopt_error_set(err, GOPT_EINVAL,
                              "policy backward kept: %d sets asked, %d kept by a sample batch of the last forward", k,
                              p->kept_k);
    gopt_status st = gopt_policy_reserve(p, p->n, p->fz->m, 1, err);
    if (st) return st;
    /* the hand-offs: the entropy term's block, then coef[s] times set s's, in set order;
     * the scorer's weights: added to the policy's gradients in the same order */
    const grad_dst own = policy_dst(p), ent = carve_block(p, p->kept, k);
    float *y[KEPT_FIELDS], *x[KEPT_FIELDS];
    size_t cnt[KEPT_FIELDS];
    dst_fields(p, &own, y, cnt);
    dst_fields(p, &ent, x, cnt);
    for (int j = 0; j < KEPT_FIELDS; j++) {
        if (j < 4) { /* the hand-offs start from the entropy term */
            if (cnt[j]) memcpy(y[j], x[j], sizeof(float) * cnt[j]);
            continue;
        }
        for (size_t i = 0; i < cnt[j]; i++) y[j][i] += x[j][i];
    }
    for (int s = 0; s < k; s++) {
        const grad_dst b = carve_block(p, p->kept, s);
        dst_add(p, &own, &b, coef[s]);
    }
    unpool_grads(p);
    return policy_network_backward(p, err);
}
