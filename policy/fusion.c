/* fusion.c: the fusion pass that turns per-node fusion levels into fused
 * groups, node by node in topological order. The decoder (decode.c, with
 * cfg.fuse_cond) and gopt_policy_fusion_groups share it, so the groups the
 * decoder conditions on are the groups the decisions get.
 *
 * Node v with level l > 0 may join the groups of its predecessors (but
 * parameters and graph inputs: resident data, never fused; an op without
 * inputs that runs a kernel, such as an allocation, may be) whose level is
 * l and that are on v's device.
 *
 * merge = 0 (the first-fit pass: checkpoints before version 5 were trained
 * with it; gopt_go_decide also judges later checkpoints' levels under it): v
 * joins the first such group G (in in-edge order) that keeps one GEMM or
 * convolution per group and where every other predecessor of v with inputs
 * is in G or comes before G's first member in topological order; otherwise
 * it roots a new group. Groups only grow forward from one root.
 *
 * merge = 1: v joins every such group that keeps the graph of groups acyclic,
 * greedily in in-edge order, merging them into one group (XLA's groups have
 * several sources: a -> c <- b fused as one kernel), up to
 * POLICY_FUSE_MAX_MEMBERS members and at most one GEMM or convolution (XLA's
 * and TVM's kernels, and the baselines' xla and tvm passes, hold one).
 * Legality is exact, up to a search budget:
 * merging U (v and the groups chosen so far) with group C creates a cycle iff
 * a member of U+C reaches another through nodes outside it, in the graph
 * where every fused group is contracted to one node. A forward search from
 * the members' successors over the decided nodes (v has none yet, and
 * undecided nodes cannot lead back), each fused group reached expanded to
 * all its members, looks for a member. Ranks alone cannot prune it: a
 * contracted group can lead from a late member back to an early one. A
 * search that would visit more than POLICY_FUSE_SEARCH nodes refuses the
 * merge (conservative and deterministic); legal_union reaches the same
 * verdict breadth first, mostly without that search. The contraction of the groups
 * stays acyclic (gopt_decisions_validate). Before searching, a sufficient
 * condition is checked: when no edge enters the union from outside it, the
 * union is legal (no_entries); merges the search would refuse only for its
 * budget are then taken (since 2026-11-24).
 *
 * Cost per decided node: O(indegree^2) with merge = 0; with merge = 1
 * O(indegree * (members * outdegree + POLICY_FUSE_SEARCH * outdegree)) at most;
 * in practice the members' decided successors are few.
 */
#include <stdlib.h>
#include <string.h>

#include "policy_net.h"

/* No path enters a node without inputs: the legality checks pass over it. */
static int no_inputs(const gopt_frozen *fz, int32_t q) { return fz->in_ptr[q + 1] == fz->in_ptr[q]; }

/* Resident data, never fused: graph inputs and parameters without inputs (as the baselines'
 * passes and the cost model read them). An op without inputs that runs a kernel (an allocation
 * such as `empty`, a fill) is not resident: its consumer may fuse it (since 2026-12-07; before,
 * every node without inputs was resident, so GO left StochasticDepth's `empty` masks out of the
 * groups that XLA-style fusion puts them in, a kernel launch each). */
static int resident(const gopt_frozen *fz, int32_t q) {
    return no_inputs(fz, q) && gopt_op_class_is_data(fz->op_class[q]);
}

/* GEMMs and convolutions among group g's members (kept per group by policy_fuse_commit) */
static int group_heavy(const policy_fuse_state *s, int32_t g) { return s->heavy[g]; }

void policy_fuse_init(policy_fuse_state *s, const gopt_frozen *fz, int merge, int32_t *buf, policy_fuse_scratch *w) {
    const size_t n = (size_t)fz->n;
    s->fz = fz;
    s->merge = merge;
    s->within = NULL;
    s->gid = buf;
    s->next = buf + n;
    s->tail = buf + 2 * n;
    s->size = buf + 3 * n;
    s->heavy = buf + 4 * n;
    s->w = w;
}

gopt_status policy_fuse_scratch_init(policy_fuse_scratch *w, int32_t n, gopt_error *err) {
    memset(w, 0, sizeof *w);
    w->mark = gopt_calloc((size_t)(n > 0 ? n : 1), sizeof *w->mark, err);
    w->stack = gopt_malloc(sizeof *w->stack * (size_t)(n > 0 ? n : 1), err);
    if (!w->mark || !w->stack) {
        policy_fuse_scratch_free(w);
        return GOPT_ENOMEM;
    }
    w->n = n;
    return GOPT_OK;
}

void policy_fuse_scratch_free(policy_fuse_scratch *w) {
    free(w->mark);
    free(w->stack);
    memset(w, 0, sizeof *w);
}

/* A fresh stamp; all marks are cleared when the counter would wrap. */
static uint32_t tick(policy_fuse_scratch *w) {
    if (w->clock >= UINT32_MAX - 2) {
        memset(w->mark, 0, sizeof *w->mark * (size_t)(w->n > 0 ? w->n : 1));
        w->clock = 0;
    }
    return ++w->clock;
}

/* Mark every member of group g with stamp c. */
static void mark_group(const policy_fuse_state *s, int32_t g, uint32_t c) {
    for (int32_t m = g; m >= 0; m = s->next[m]) s->w->mark[m] = c;
}

/* merge = 0: may v join group g alone? */
static int fits_forward(const policy_fuse_state *s, int32_t v, int32_t g) {
    const gopt_frozen *fz = s->fz;
    const int32_t rr = fz->rank[g];
    for (int32_t e = fz->in_ptr[v]; e < fz->in_ptr[v + 1]; e++) {
        int32_t u = fz->in_src[e];
        if (s->gid[u] != g && !no_inputs(fz, u) && fz->rank[u] >= rr) return 0;
    }
    return 1;
}

/* Both searches start from the members' decided successors outside U: marked cv and put on the
 * scratch stack, in the members' order. Returns how many. */
static int32_t seed(const policy_fuse_state *s, const int32_t *members_of, int nm, int32_t rv, uint32_t cu,
                    uint32_t cv) {
    const gopt_frozen *fz = s->fz;
    policy_fuse_scratch *w = s->w;
    int32_t sp = 0;
    for (int k = 0; k < nm; k++)
        for (int32_t m = members_of[k]; m >= 0; m = s->next[m])
            for (int32_t e = fz->out_ptr[m]; e < fz->out_ptr[m + 1]; e++) {
                const int32_t x = fz->out_dst[e];
                if (w->mark[x] == cu || w->mark[x] == cv || fz->rank[x] >= rv) continue;
                w->mark[x] = cv;
                w->stack[sp++] = x;
            }
    return sp;
}

/* merge = 1: every member of U (marked cu: v and the groups chosen so far, and the candidate
 * group, marked by the caller) as one group: is the contraction still acyclic? The rule: a
 * depth-first search from the members' decided successors (ranked before v: later nodes are not
 * decided and cannot lead back), every fused group reached expanded to all its members, looks for
 * a member; it refuses once it has counted more than POLICY_FUSE_SEARCH expansions (a group popped
 * twice counts twice). legal_union below gives the same verdict, mostly without running it. */
static int legal_union_dfs(const policy_fuse_state *s, const int32_t *members_of, int nm, int32_t rv, uint32_t cu) {
    const gopt_frozen *fz = s->fz;
    policy_fuse_scratch *w = s->w;
    const uint32_t cv = tick(w); /* visited */
    int32_t sp = seed(s, members_of, nm, rv, cu, cv), visits = 0;
    while (sp > 0) {
        const int32_t y = w->stack[--sp];
        const int32_t g = s->gid[y];
        for (int32_t z = s->size[g] > 1 ? g : y; z >= 0; z = s->size[g] > 1 ? s->next[z] : -1) {
            if (++visits > POLICY_FUSE_SEARCH) return 0;
            w->mark[z] = cv; /* a contracted group is one node: its members are reached together */
            for (int32_t e = fz->out_ptr[z]; e < fz->out_ptr[z + 1]; e++) {
                const int32_t x = fz->out_dst[e];
                if (w->mark[x] == cu) return 0;
                if (w->mark[x] == cv || fz->rank[x] >= rv) continue;
                w->mark[x] = cv;
                w->stack[sp++] = x;
            }
        }
    }
    return 1;
}

/* The verdict of legal_union_dfs, found breadth-first. Where a path leads back into U the
 * depth-first search often wanders through thousands of decided nodes before it finds it (on a
 * BiLSTM's backward pass most of its searches ran out of budget, nearly all of them with a path
 * there to find); breadth first finds the short ones early. The closure the searches explore
 * (every node reached, every group reached whole) does not depend on the order, so:
 * - a path found: illegal (the depth-first search finds one too, or runs out of budget);
 * - more than POLICY_FUSE_SEARCH nodes in the closure: illegal (the depth-first search counts
 *   each of them at least once, unless it finds a path first);
 * - the closure explored, no path: legal when even the depth-first search's worst count (a
 *   group of k members popped once per member: k * k) stays within the budget; otherwise (rare)
 *   the depth-first search itself decides. */
static int legal_union(const policy_fuse_state *s, const int32_t *members_of, int nm, int32_t rv, uint32_t cu) {
    const gopt_frozen *fz = s->fz;
    policy_fuse_scratch *w = s->w;
    const uint32_t cv = tick(w); /* queued */
    const uint32_t ce = tick(w); /* expanded */
    int32_t head = 0, tail = seed(s, members_of, nm, rv, cu, cv), closure = 0;
    int64_t worst = 0; /* the depth-first search's count, at most */
    while (head < tail) {
        const int32_t y = w->stack[head++];
        if (w->mark[y] == ce) continue; /* expanded with its group */
        const int32_t g = s->gid[y];
        const int32_t k = s->size[g];
        worst += k > 1 ? (int64_t)k * k : 1;
        for (int32_t z = k > 1 ? g : y; z >= 0; z = k > 1 ? s->next[z] : -1) {
            if (++closure > POLICY_FUSE_SEARCH) return 0;
            w->mark[z] = ce;
            for (int32_t e = fz->out_ptr[z]; e < fz->out_ptr[z + 1]; e++) {
                const int32_t x = fz->out_dst[e];
                if (w->mark[x] == cu) return 0;
                if (w->mark[x] == cv || w->mark[x] == ce || fz->rank[x] >= rv) continue;
                w->mark[x] = cv;
                w->stack[tail++] = x;
            }
        }
    }
    return worst <= POLICY_FUSE_SEARCH ? 1 : legal_union_dfs(s, members_of, nm, rv, cu);
}

/* merge = 1: a sufficient condition for legal_union that needs no search: no edge enters the
 * union (marked cu) from a node outside it (resident data aside), so no path can come back into
 * it. With v alone in U (first) only v's inputs count: the candidate group cannot reach its own
 * inputs (that path would already be a cycle of the contraction) and v has no decided
 * successor. The search would find the union legal too, unless it ran out of budget first. */
static int inputs_inside(const policy_fuse_state *s, int32_t m, uint32_t cu) {
    const gopt_frozen *fz = s->fz;
    for (int32_t e = fz->in_ptr[m]; e < fz->in_ptr[m + 1]; e++) {
        const int32_t q = fz->in_src[e];
        if (s->w->mark[q] != cu && !no_inputs(fz, q)) return 0;
    }
    return 1;
}

static int no_entries(const policy_fuse_state *s, const int32_t *members_of, int nm, int32_t v, uint32_t cu,
                      int first) {
    if (!inputs_inside(s, v, cu)) return 0;
    if (first) return 1;
    for (int k = 0; k < nm; k++)
        for (int32_t m = members_of[k]; m >= 0; m = s->next[m])
            if (!inputs_inside(s, m, cu)) return 0;
    return 1;
}

/* The candidate groups of v at level l, in in-edge order, each once. */
static int candidates(const policy_fuse_state *s, const int32_t *place, const int32_t *fuse, int32_t v, int32_t l,
                      int32_t *out, int cap) {
    const gopt_frozen *fz = s->fz;
    int nc = 0;
    for (int32_t e = fz->in_ptr[v]; e < fz->in_ptr[v + 1] && nc < cap; e++) {
        const int32_t q = fz->in_src[e];
        if (resident(fz, q)) continue;
        const int32_t g = s->gid[q];
        if (place[g] != place[v]) continue;
        if (s->within ? fuse[g] <= 0 || s->within[v] < 0 || s->within[q] != s->within[v] : fuse[g] != l) continue;
        int dup = 0;
        for (int k = 0; k < nc && !dup; k++) dup = out[k] == g;
        if (!dup) out[nc++] = g;
    }
    return nc;
}

/* Choose the groups v joins at level l (at most cap of them, the first only when one): with
 * merge = 0 the first that fits; with merge = 1 each candidate that keeps the union legal.
 * known: the first of them when already found (policy_fuse_join at this level: -1 = none, so v
 * roots), or POLICY_FUSE_UNKNOWN. The candidates before it failed with v alone, as they would
 * again, so the search starts with it chosen. Returns how many were chosen (0: v roots a new
 * group). Marks are left as they are. */
static int choose(const policy_fuse_state *s, const int32_t *place, const int32_t *fuse, int32_t v, int32_t l,
                  int32_t *chosen, int cap, int32_t known) {
    if (known == -1) return 0;
    if (known >= 0 && (!s->merge || cap == 1)) {
        chosen[0] = known;
        return 1;
    }
    int32_t cand[POLICY_FUSE_MAX_CAND];
    const int nc = candidates(s, place, fuse, v, l, cand, POLICY_FUSE_MAX_CAND);
    if (!s->merge) {
        const int hv = gopt_op_class_is_heavy(s->fz->op_class[v]);
        for (int k = 0; k < nc; k++)
            if (hv + group_heavy(s, cand[k]) <= 1 && fits_forward(s, v, cand[k])) {
                chosen[0] = cand[k];
                return 1;
            }
        return 0;
    }
    const gopt_frozen *fz = s->fz;
    const uint32_t cu = tick(s->w);
    s->w->mark[v] = cu;
    int32_t members_of[POLICY_FUSE_MAX_CAND]; /* the groups of U and the candidate (v: no successor decided) */
    int nch = 0, k = 0;
    int32_t size = 1;
    int hv = gopt_op_class_is_heavy(fz->op_class[v]);
    while (known >= 0 && k < nc && cand[k] != known) k++; /* known is a candidate of this level */
    if (known >= 0 && k < nc) {
        mark_group(s, known, cu);
        members_of[nch] = chosen[nch] = known;
        nch++;
        size += s->size[known];
        hv += group_heavy(s, known);
        k++;
    } else {
        k = 0;
    }
    for (; k < nc && nch < cap; k++) {
        const int32_t c = cand[k];
        if (size + s->size[c] > POLICY_FUSE_MAX_MEMBERS) continue;
        const int hc = group_heavy(s, c);
        if (hv + hc > 1) continue; /* one GEMM or convolution per kernel */
        mark_group(s, c, cu);
        members_of[nch] = c;
        if (no_entries(s, members_of, nch + 1, v, cu, nch == 0) ||
            legal_union(s, members_of, nch + 1, fz->rank[v], cu)) {
            chosen[nch++] = c;
            size += s->size[c];
            hv += hc;
        } else {
            mark_group(s, c, 0);
        }
    }
    return nch;
}

int32_t policy_fuse_join(const policy_fuse_state *s, const int32_t *place, const int32_t *fuse, int32_t v,
                         int32_t level) {
    int32_t g;
    return choose(s, place, fuse, v, level, &g, 1, POLICY_FUSE_UNKNOWN) > 0 ? g : -1;
}

void policy_fuse_commit(policy_fuse_state *s, const int32_t *place, const int32_t *fuse, int32_t v, int32_t first) {
    int32_t chosen[POLICY_FUSE_MAX_CAND];
    const gopt_frozen *fz = s->fz;
    const int nch = fuse[v] > 0 ? choose(s, place, fuse, v, fuse[v], chosen, POLICY_FUSE_MAX_CAND, first) : 0;
    s->next[v] = -1;
    if (nch == 0) { /* v roots a group of its own; its id is v */
        s->gid[v] = v;
        s->tail[v] = v;
        s->size[v] = 1;
        s->heavy[v] = gopt_op_class_is_heavy(fz->op_class[v]);
        return;
    }
    /* the union keeps the id of its earliest group (its first member in topological order) */
    int32_t g0 = chosen[0];
    for (int k = 1; k < nch; k++)
        if (fz->rank[chosen[k]] < fz->rank[g0]) g0 = chosen[k];
    for (int k = 0; k < nch; k++) {
        const int32_t c = chosen[k];
        if (c == g0) continue;
        for (int32_t m = c; m >= 0; m = s->next[m]) s->gid[m] = g0;
        s->next[s->tail[g0]] = c;
        s->tail[g0] = s->tail[c];
        s->size[g0] += s->size[c];
        s->heavy[g0] += s->heavy[c];
    }
    s->gid[v] = g0;
    s->next[s->tail[g0]] = v;
    s->tail[g0] = v;
    s->size[g0]++;
    s->heavy[g0] += gopt_op_class_is_heavy(fz->op_class[v]);
}

static gopt_status fusion_groups(const gopt_frozen *fz, const int32_t *place, const int32_t *fuse, int merge,
                                 const int32_t *within, int32_t *group, int32_t *n_groups, gopt_error *err) {
    if (!fz || !place || !fuse || !group) return gopt_error_set(err, GOPT_EINVAL, "fusion groups: a NULL argument");
    const int32_t n = fz->n;
    for (int32_t v = 0; v < n; v++)
        if (fuse[v] < 0)
            return gopt_error_set(err, GOPT_EINVAL, "fusion groups: node %d: fusion level %d is negative", (int)v,
                                  (int)fuse[v]);
    int32_t *buf = gopt_malloc(sizeof(int32_t) * POLICY_FUSE_ARRAYS * (size_t)(n > 0 ? n : 1), err);
    if (!buf) return GOPT_ENOMEM;
    policy_fuse_scratch w;
    gopt_status st = policy_fuse_scratch_init(&w, n, err);
    if (st) {
        free(buf);
        return st;
    }
    policy_fuse_state s;
    policy_fuse_init(&s, fz, within ? 1 : merge, buf, &w);
    s.within = within;
    for (int32_t i = 0; i < n; i++) policy_fuse_commit(&s, place, fuse, fz->topo[i], POLICY_FUSE_UNKNOWN);
    /* number the groups 0.. by their first member in topological order */
    int32_t G = 0;
    for (int32_t i = 0; i < n; i++) {
        const int32_t v = fz->topo[i];
        if (s.gid[v] == v) s.tail[v] = G++; /* tail is free now: the new id of group v */
    }
    for (int32_t v = 0; v < n; v++) group[v] = s.tail[s.gid[v]];
    free(buf);
    policy_fuse_scratch_free(&w);
    if (n_groups) *n_groups = G;
    return GOPT_OK;
}

gopt_status gopt_policy_fusion_groups(const gopt_frozen *fz, const int32_t *place, const int32_t *fuse, int merge,
                                      int32_t *group, int32_t *n_groups, gopt_error *err) {
    return fusion_groups(fz, place, fuse, merge, NULL, group, n_groups, err);
}

gopt_status gopt_policy_fusion_groups_within(const gopt_frozen *fz, const int32_t *place, const int32_t *fuse,
                                             const int32_t *within, int32_t *group, int32_t *n_groups,
                                             gopt_error *err) {
    if (!within) return gopt_error_set(err, GOPT_EINVAL, "fusion groups within: a NULL argument");
    return fusion_groups(fz, place, fuse, 1, within, group, n_groups, err);
}
