/* fusion.c: fusion groups. none; xla (greedy producer-into-consumer fusion
 * judged by the cost model); xlamo (the same with multi-output producers:
 * exact legality); tvm (rule-based chains); and the fusion state the
 * annealer shares.
 *
 * Legality without a reachability search: merging group A into group B
 * (an edge A -> B exists) cannot create a cycle when every edge leaving A
 * enters B, or every edge entering B leaves A. Proof: a new cycle would be a
 * path from the merged group back to it through outside nodes; one starting
 * in B and ending in A or B was already a cycle (with the edge A -> B), so
 * it starts in A and leaves A for a node outside B (excluded by the first
 * rule), or it ends in B coming from a node outside A (excluded by the
 * second). Members of a group share a device; input and parameter nodes are
 * never fused (they are resident data, not kernels). Groups hold at most
 * BL_FUSE_MAX members. Every result passes gopt_decisions_validate.
 * Costs: xla O(passes * E * s) with s the group size cap; tvm O(E * s).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bl_internal.h"

#define BL_FUSE_MAX 64
#define BL_FUSE_SEARCH 4096 /* xlamo: members one legality search may expand */

gopt_status bl_fuse_init(bl_fuse *s, const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err) {
    memset(s, 0, sizeof *s);
    const gopt_frozen *f = gopt_graph_frozen(p->graph);
    int32_t n = f->n;
    s->p = p;
    s->f = f;
    s->group = d->group;
    s->head = gopt_malloc(((size_t)n + 1) * sizeof *s->head, err);
    s->next = gopt_malloc(((size_t)n + 1) * sizeof *s->next, err);
    s->size = gopt_malloc(((size_t)n + 1) * sizeof *s->size, err);
    s->closed = gopt_calloc((size_t)n + 1, 1, err);
    s->stamp = gopt_calloc((size_t)n + 1, sizeof *s->stamp, err);
    s->tmp = gopt_malloc(((size_t)n + 1) * sizeof *s->tmp, err);
    if (!s->head || !s->next || !s->size || !s->closed || !s->stamp || !s->tmp) {
        bl_fuse_destroy(s);
        return GOPT_ENOMEM;
    }
    /* renumber: a group is named by its first member; tmp maps old id -> new */
    for (int32_t v = 0; v < n; v++) s->tmp[v] = -1;
    for (int32_t v = 0; v < n; v++) {
        int32_t g = s->group[v];
        if (g >= 0) {
            if (s->tmp[g] < 0) s->tmp[g] = v;
            s->group[v] = s->tmp[g];
        }
        s->head[v] = -1;
        s->next[v] = -1;
        s->size[v] = 0;
    }
    for (int32_t v = n - 1; v >= 0; v--) {
        int32_t g = bl_fuse_gid(s, v);
        s->next[v] = s->head[g];
        s->head[g] = v;
        s->size[g]++;
    }
    return GOPT_OK;
}

void bl_fuse_destroy(bl_fuse *s) {
    free(s->head);
    free(s->next);
    free(s->size);
    free(s->closed);
    free(s->stamp);
    free(s->tmp);
    free(s->ord);
    free(s->lst);
    memset(s, 0, sizeof *s);
}

static void mark(bl_fuse *s, int32_t g) {
    for (int32_t v = s->head[g]; v >= 0; v = s->next[v]) s->stamp[v] = s->clock;
}

/* ---- exact legality (xlamo) ----------------------------------------------------------------
 * The contracted graph (every group one vertex) stays acyclic, so it has a topological order;
 * s->ord keeps one through every merge. With lo -> hi an edge between two groups, ord[lo] <
 * ord[hi], and a path that leaves lo + hi and comes back must run lo -> x1 -> ... -> xk -> hi
 * through groups ordered strictly between the two: a path from hi never comes back to an earlier
 * group, and one ending in lo would be a cycle already. So the legality search walks that window
 * only. After the merge the order is repaired as in Pearce and Kelly's dynamic topological sort:
 * F, the window's groups reachable from lo, and B, those reaching hi, are disjoint (the merge is
 * legal); their positions and the pair's, sorted, go to B first, then the union, then F, each set
 * in its old relative order. Every edge keeps its direction: an edge into F from the window or
 * out of B into it would put its other end in F or B. */

static int64_t key_of(const bl_fuse *s, int32_t g) { return (int64_t)s->ord[g] << 32 | (uint32_t)g; }

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Groups of the window between lo and hi reached from `from` (lo forward along out-edges, or hi
 * backward along in-edges), appended to out as keys. Returns 1 when the other end of the pair is
 * not reached (beside the direct edges between the two), 0 when it is, -1 past cap member
 * expansions. */
static int window_search(bl_fuse *s, int32_t lo, int32_t hi, int fwd, int32_t cap, int64_t *out, int32_t *nout) {
    const gopt_frozen *f = s->f;
    const int32_t from = fwd ? lo : hi, target = fwd ? hi : lo;
    const int32_t seen = ++s->clock;
    int32_t sp = 0, visits = 0, n = 0;
    s->tmp[sp++] = from;
    s->stamp[from] = seen;
    while (sp > 0) {
        const int32_t g = s->tmp[--sp];
        for (int32_t v = s->head[g]; v >= 0; v = s->next[v]) {
            if (++visits > cap) return -1;
            const int32_t e0 = fwd ? f->out_ptr[v] : f->in_ptr[v], e1 = fwd ? f->out_ptr[v + 1] : f->in_ptr[v + 1];
            for (int32_t e = e0; e < e1; e++) {
                const int32_t h = bl_fuse_gid(s, fwd ? f->out_dst[e] : f->in_src[e]);
                if (h == target) {
                    if (g == from) continue; /* the pair's own edge */
                    return 0;
                }
                if (s->stamp[h] == seen || (fwd ? s->ord[h] >= s->ord[hi] : s->ord[h] <= s->ord[lo])) continue;
                s->stamp[h] = seen;
                s->tmp[sp++] = h;
                out[n++] = key_of(s, h);
            }
        }
    }
    *nout = n;
    return 1;
}

/* Positions for a legal merge of ga and gb: the union's position, the window's groups moved. */
static int32_t order_merge(bl_fuse *s, int32_t ga, int32_t gb) {
    const int32_t lo = s->ord[ga] < s->ord[gb] ? ga : gb, hi = lo == ga ? gb : ga;
    int32_t nf = 0, nb = 0;
    int64_t *F = s->lst;
    window_search(s, lo, hi, 1, INT32_MAX, F, &nf);
    if (nf == 0) return s->ord[hi]; /* nothing after lo in the window: the union takes hi's place */
    int64_t *B = F + nf;
    window_search(s, lo, hi, 0, INT32_MAX, B, &nb);
    if (nb == 0) return s->ord[lo];
    int64_t *slot = B + nb;
    const int32_t m = nf + nb + 2;
    for (int32_t i = 0; i < nf + nb; i++) slot[i] = F[i] >> 32;
    slot[nf + nb] = s->ord[lo];
    slot[nf + nb + 1] = s->ord[hi];
    qsort(F, (size_t)nf, sizeof *F, cmp_i64);
    qsort(B, (size_t)nb, sizeof *B, cmp_i64);
    qsort(slot, (size_t)m, sizeof *slot, cmp_i64);
    for (int32_t i = 0; i < nb; i++) s->ord[(int32_t)(uint32_t)B[i]] = (int32_t)slot[i];
    for (int32_t i = 0; i < nf; i++) s->ord[(int32_t)(uint32_t)F[i]] = (int32_t)slot[nb + 2 + i];
    return (int32_t)slot[nb];
}

/* s->ord from scratch: Kahn's algorithm over the contracted graph. */
static void order_all(bl_fuse *s) {
    const gopt_frozen *f = s->f;
    int64_t *indeg = s->lst;
    int32_t qh = 0, qt = 0, pos = 0;
    for (int32_t v = 0; v < f->n; v++) indeg[v] = 0;
    for (int32_t v = 0; v < f->n; v++)
        for (int32_t e = f->out_ptr[v]; e < f->out_ptr[v + 1]; e++) {
            int32_t h = bl_fuse_gid(s, f->out_dst[e]);
            if (h != bl_fuse_gid(s, v)) indeg[h]++;
        }
    for (int32_t v = 0; v < f->n; v++)
        if (bl_fuse_gid(s, v) == v && indeg[v] == 0) s->tmp[qt++] = v;
    while (qh < qt) {
        const int32_t g = s->tmp[qh++];
        s->ord[g] = pos++;
        for (int32_t v = s->head[g]; v >= 0; v = s->next[v])
            for (int32_t e = f->out_ptr[v]; e < f->out_ptr[v + 1]; e++) {
                int32_t h = bl_fuse_gid(s, f->out_dst[e]);
                if (h != g && --indeg[h] == 0) s->tmp[qt++] = h;
            }
    }
    for (int32_t v = 0; v < f->n; v++) /* groups on a cycle (not legal decisions): placed last */
        if (bl_fuse_gid(s, v) == v && indeg[v] > 0) s->ord[v] = pos++;
}

gopt_status bl_fuse_exact(bl_fuse *s, gopt_error *err) {
    const int32_t n = s->f->n;
    s->ord = gopt_malloc(((size_t)n + 1) * sizeof *s->ord, err);
    s->lst = gopt_malloc((2 * (size_t)n + 4) * sizeof *s->lst, err);
    if (!s->ord || !s->lst) return GOPT_ENOMEM;
    s->exact = 1;
    order_all(s);
    return GOPT_OK;
}

static int union_acyclic(bl_fuse *s, int32_t ga, int32_t gb) {
    const int32_t lo = s->ord[ga] < s->ord[gb] ? ga : gb, hi = lo == ga ? gb : ga;
    int32_t n = 0;
    return window_search(s, lo, hi, 1, BL_FUSE_SEARCH, s->lst, &n) == 1;
}

int bl_fuse_can_merge(bl_fuse *s, const int32_t *device, int32_t ga, int32_t gb) {
    if (ga == gb || s->closed[ga]) return 0;
    if (device[s->head[ga]] != device[s->head[gb]]) return 0;
    const gopt_frozen *f = s->f;
    s->clock++;
    mark(s, gb);
    int ok = 1; /* every edge leaving ga enters gb */
    for (int32_t v = s->head[ga]; v >= 0 && ok; v = s->next[v])
        for (int32_t e = f->out_ptr[v]; e < f->out_ptr[v + 1]; e++) {
            int32_t w = f->out_dst[e];
            if (bl_fuse_gid(s, w) != ga && s->stamp[w] != s->clock) {
                ok = 0;
                break;
            }
        }
    if (ok) return 1;
    s->clock++;
    mark(s, ga);
    ok = 1; /* every edge entering gb leaves ga */
    for (int32_t v = s->head[gb]; v >= 0 && ok; v = s->next[v])
        for (int32_t e = f->in_ptr[v]; e < f->in_ptr[v + 1]; e++) {
            int32_t w = f->in_src[e];
            if (bl_fuse_gid(s, w) != gb && s->stamp[w] != s->clock) {
                ok = 0;
                break;
            }
        }
    return ok || (s->exact && union_acyclic(s, ga, gb));
}

int32_t bl_fuse_merge(bl_fuse *s, int32_t ga, int32_t gb) {
    if (s->exact) s->ord[ga] = order_merge(s, ga, gb);
    int32_t last = -1;
    for (int32_t v = s->head[ga]; v >= 0; v = s->next[v]) {
        s->group[v] = ga;
        last = v;
    }
    for (int32_t v = s->head[gb]; v >= 0; v = s->next[v]) s->group[v] = ga;
    s->next[last] = s->head[gb];
    s->size[ga] += s->size[gb];
    s->closed[ga] |= s->closed[gb];
    s->head[gb] = -1;
    s->size[gb] = 0;
    s->closed[gb] = 0;
    return ga;
}

void bl_fuse_dissolve(bl_fuse *s, int32_t g) {
    int32_t v = s->head[g];
    while (v >= 0) {
        int32_t nx = s->next[v];
        s->group[v] = -1;
        s->head[v] = v;
        s->next[v] = -1;
        s->size[v] = 1;
        s->closed[v] = 0;
        v = nx;
    }
    if (s->exact) order_all(s);
}

double bl_fuse_time(bl_fuse *s, int32_t ga, int32_t gb, int dev) {
    int32_t k = 0;
    s->clock++;
    for (int32_t v = s->head[ga]; v >= 0; v = s->next[v]) s->tmp[k++] = v;
    if (gb >= 0)
        for (int32_t v = s->head[gb]; v >= 0; v = s->next[v]) s->tmp[k++] = v;
    for (int32_t i = 0; i < k; i++) s->stamp[s->tmp[i]] = s->clock;
    return gopt_cost_group_price(s->p->cost, s->f, dev, s->tmp, k, s->stamp, s->clock);
}

static int fusible(const gopt_frozen *f, int32_t v) { return !gopt_op_class_is_data(f->op_class[v]); }

static int group_heavy(const bl_fuse *s, int32_t g) {
    int h = 0;
    for (int32_t v = s->head[g]; v >= 0; v = s->next[v]) h += gopt_op_class_is_heavy(s->f->op_class[v]);
    return h;
}

gopt_status gopt_bl_fuse_none(const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err) {
    for (int32_t v = 0; v < d->n; v++) d->group[v] = -1;
    return GOPT_OK;
}

static gopt_status fuse_xla(const gopt_bl_problem *p, gopt_decisions *d, int exact, gopt_error *err) {
    bl_fuse s;
    gopt_status st = bl_fuse_init(&s, p, d, err);
    if (st) return st;
    const gopt_frozen *f = s.f;
    /* per group id: its time alone (NAN until priced; a group's members, their order and its device
     * do not change until it merges) and its GEMMs and convolutions */
    double *alone = gopt_malloc(((size_t)f->n + 1) * sizeof *alone, err);
    int32_t *heavy = gopt_malloc(((size_t)f->n + 1) * sizeof *heavy, err);
    if (!alone || !heavy || (exact && (st = bl_fuse_exact(&s, err)))) {
        free(alone);
        free(heavy);
        bl_fuse_destroy(&s);
        return st ? st : GOPT_ENOMEM;
    }
    for (int32_t g = 0; g < f->n; g++) {
        alone[g] = NAN;
        heavy[g] = s.size[g] ? group_heavy(&s, g) : 0;
    }
    for (int pass = 0; pass < 3; pass++) {
        int changed = 0;
        for (int32_t i = f->n - 1; i >= 0; i--) { /* consumers first, as XLA walks from the root */
            int32_t v = f->topo[i];
            if (!fusible(f, v)) continue;
            for (int32_t e = f->in_ptr[v]; e < f->in_ptr[v + 1]; e++) {
                int32_t u = f->in_src[e];
                if (!fusible(f, u)) continue;
                int32_t gu = bl_fuse_gid(&s, u), gv = bl_fuse_gid(&s, v);
                if (gu == gv || s.size[gu] + s.size[gv] > BL_FUSE_MAX) continue;
                if (heavy[gu] + heavy[gv] > 1) continue;
                if (!bl_fuse_can_merge(&s, d->device, gu, gv)) continue;
                int dev = d->device[v];
                if (isnan(alone[gu])) alone[gu] = bl_fuse_time(&s, gu, -1, dev);
                if (isnan(alone[gv])) alone[gv] = bl_fuse_time(&s, gv, -1, dev);
                double gain = alone[gu] + alone[gv] - bl_fuse_time(&s, gu, gv, dev);
                if (gain <= 0) continue;
                bl_fuse_merge(&s, gv, gu);
                alone[gv] = NAN;
                heavy[gv] += heavy[gu];
                changed = 1;
            }
        }
        if (!changed) break;
    }
    free(alone);
    free(heavy);
    bl_fuse_destroy(&s);
    return GOPT_OK;
}

gopt_status gopt_bl_fuse_xla(const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err) {
    return fuse_xla(p, d, 0, err);
}

/* xlamo: the same pass with multi-output producers: a producer whose result also leaves the group
 * (a forward convolution feeding its batch norm and that norm's backward) joins when no path
 * comes back, as XLA's multi-output fusion does. Fuses more than xla, which is not always faster:
 * a group waits for all its inputs (docs/baselines.md). */
gopt_status gopt_bl_fuse_xlamo(const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err) {
    return fuse_xla(p, d, 1, err);
}

gopt_status gopt_bl_fuse_tvm(const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err) {
    bl_fuse s;
    gopt_status st = bl_fuse_init(&s, p, d, err);
    if (st) return st;
    const gopt_frozen *f = s.f;
    for (int32_t v = 0; v < f->n; v++) /* reductions last: nothing fuses after one */
        if (f->op_class[v] == GOPT_OP_CLASS_REDUCTION) s.closed[bl_fuse_gid(&s, v)] = 1;
    for (int32_t i = 0; i < f->n; i++) {
        int32_t v = f->topo[i];
        int c = f->op_class[v];
        if (c != GOPT_OP_CLASS_ELEMENTWISE && c != GOPT_OP_CLASS_DATA_MOVEMENT && c != GOPT_OP_CLASS_REDUCTION)
            continue;
        int32_t best = -1;
        double best_bytes = -1;
        for (int32_t e = f->in_ptr[v]; e < f->in_ptr[v + 1]; e++) {
            int32_t u = f->in_src[e];
            if (!fusible(f, u) || f->op_class[u] == GOPT_OP_CLASS_OTHER) continue;
            if (f->out_ptr[u + 1] - f->out_ptr[u] != 1) continue; /* chains only: u feeds v alone */
            int32_t gu = bl_fuse_gid(&s, u), gv = bl_fuse_gid(&s, v);
            if (gu == gv || s.size[gu] + s.size[gv] > BL_FUSE_MAX) continue;
            /* a GEMM/conv group takes elementwise epilogues only */
            if (group_heavy(&s, gu) && c != GOPT_OP_CLASS_ELEMENTWISE) continue;
            if (!bl_fuse_can_merge(&s, d->device, gu, gv)) continue;
            double b = f->edge_bytes[f->in_eid[e]];
            if (b > best_bytes) {
                best_bytes = b;
                best = gu;
            }
        }
        if (best < 0) continue;
        bl_fuse_merge(&s, best, bl_fuse_gid(&s, v)); /* a reduction closes the group */
    }
    bl_fuse_destroy(&s);
    return GOPT_OK;
}
