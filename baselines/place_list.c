/* place_list.c: list-scheduling placers: HEFT, Baechi's m-ETF and m-SCT.
 *
 * All three build a schedule on the cost model (op time per device, transfer
 * time per edge, no link contention) and keep the devices it chose. Shared
 * rules:
 *  - memory (memory.c's model, received copies included): a node may go to
 *    a device only when its unit (colocation group) is already there, or
 *    fits there with what the device already holds, and the copies of its
 *    inputs from other devices fit too;
 *    a unit's whole memory is reserved when its first member is placed, so
 *    later members follow it (Baechi's co-placement);
 *  - sources of zero time (inputs, parameters) are not scheduled on their
 *    own: they go with their first consumer (transfer-free), so a parameter
 *    and its optimizer update land where the parameter is first used;
 *  - a node that fits nowhere ends the run with GOPT_EUNSUP naming it.
 *
 * HEFT (Topcuoglu et al. 2002): upward rank with mean op time over devices
 * and mean transfer time over device pairs; nodes in decreasing rank, each
 * on the device with the earliest finish time, inserted into the earliest
 * idle gap that holds it. O(N log N + E ndev^2) plus the gap scans.
 *
 * m-ETF (Baechi, SoCC 2020): earliest task first: repeatedly the (ready
 * node, device) pair with the earliest start time max(device free, data
 * ready), appended. One heap of ready nodes per device keyed by data-ready
 * time: the best start on a device is max(free, heap top), so each step is
 * O(ndev + log N); stale entries are re-keyed lazily. O((N + E) ndev log N).
 *
 * m-SCT (Baechi, after Hanen & Munier's small-communication-time
 * algorithm): favourite children stay with their parents. SCT picks each
 * node's favourite child from a linear-programming relaxation; we pick them
 * by a greedy matching over edges in decreasing transfer time (each node at
 * most one favourite child and one favourite parent), which zeroes the
 * largest communications the LP would. Then ETF, except that a ready node
 * whose favourite parent is placed goes to that parent's device when it
 * fits there (Baechi's memory rule: otherwise, plain ETF).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bl_internal.h"

typedef struct {
    const gopt_bl_problem *p;
    const gopt_frozen *f;
    bl_units u;
    int32_t *unit_dev; /* (nunits) device or -1 */
    bl_mem mem;        /* memory held by placed nodes, copies included */
    double *reserved;  /* (ndev) bytes of placed units' members not placed yet */
    int32_t *stamp;    /* (nunits) scratch marks */
    int32_t clock;
    double fill;       /* first try to keep each device within fill x capacity */
    uint8_t *full;     /* (n) etf: v was queued only under full capacity */
    double *aft;       /* (n) finish time */
    int32_t *device;   /* the decisions' device array; -1 while unplaced */
} lp_state;

static gopt_status lp_init(lp_state *s, const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err) {
    memset(s, 0, sizeof *s);
    s->p = p;
    s->f = gopt_graph_frozen(p->graph);
    gopt_status st = bl_units_build(p, &s->u, err);
    if (st) return st;
    if ((st = bl_memory_feasible(p, &s->u, err))) return st;
    s->unit_dev = gopt_malloc(((size_t)s->u.nunits + 1) * sizeof *s->unit_dev, err);
    s->reserved = gopt_calloc((size_t)p->ndev, sizeof *s->reserved, err);
    s->aft = gopt_calloc((size_t)s->f->n + 1, sizeof *s->aft, err);
    s->stamp = gopt_calloc((size_t)s->u.nunits + 1, sizeof *s->stamp, err);
    if (!s->unit_dev || !s->reserved || !s->aft || !s->stamp) return GOPT_ENOMEM;
    for (int32_t k = 0; k < s->u.nunits; k++) s->unit_dev[k] = -1;
    s->device = d->device;
    for (int32_t v = 0; v < s->f->n; v++) s->device[v] = -1;
    return bl_mem_init(&s->mem, p, s->device, err);
}

static void lp_destroy(lp_state *s) {
    bl_units_destroy(&s->u);
    free(s->unit_dev);
    free(s->reserved);
    free(s->stamp);
    free(s->aft);
    bl_mem_destroy(&s->mem);
}

static double tv(const lp_state *s, int32_t v, int dev) { return s->p->cost->time[(size_t)v * s->p->cost->ndev + dev]; }

/* Whether v may run on dev: its unit is there already or fits there, and
 * so do the copies of its inputs from other devices. Its unplaced deferred
 * sources come along when they fit too (*along = 1); otherwise they will be
 * placed elsewhere and dev holds copies of them (*along = 0). */
static int lp_fits_mode(lp_state *s, int32_t v, int dev, int full, int *along) {
    double cap = full ? s->mem.cap[dev] : s->fill * s->mem.cap[dev];
    int32_t k = s->u.unit[v];
    if (s->unit_dev[k] >= 0 && s->unit_dev[k] != dev) return 0;
    double base = s->mem.used[dev] + s->reserved[dev] + (s->unit_dev[k] < 0 ? s->u.bytes[k] : 0) +
                  bl_mem_extra(&s->mem, v, dev);
    double all = 0, copies = 0;
    const gopt_frozen *f = s->f;
    s->clock++;
    s->stamp[k] = s->clock;
    for (int32_t e = f->in_ptr[v]; e < f->in_ptr[v + 1]; e++) {
        int32_t q = f->in_src[e], kq = s->u.unit[q];
        if (s->device[q] >= 0 || !bl_is_deferred(s->p, q) || s->unit_dev[kq] >= 0 || s->stamp[kq] == s->clock) continue;
        s->stamp[kq] = s->clock;
        all += s->u.bytes[kq];
        copies += s->mem.copy[q];
    }
    *along = 1;
    if (base + all <= cap) return 1;
    *along = 0;
    return base + copies <= cap;
}

static int lp_fits(lp_state *s, int32_t v, int dev, int full) {
    int along;
    return lp_fits_mode(s, v, dev, full, &along);
}

static double room(const lp_state *s, int dev) { return s->mem.cap[dev] - s->mem.used[dev] - s->reserved[dev]; }

/* Data-ready time of v on dev. */
static double lp_ready(const lp_state *s, int32_t v, int dev) {
    const gopt_frozen *f = s->f;
    double r = 0;
    for (int32_t e = f->in_ptr[v]; e < f->in_ptr[v + 1]; e++) {
        int32_t q = f->in_src[e];
        int dq = s->device[q];
        if (dq < 0) {
            int32_t kq = s->u.unit[q];
            if (s->unit_dev[kq] < 0) continue; /* a deferred source: it will come along */
            dq = s->unit_dev[kq];
        }
        double a = s->aft[q] + bl_xfer(s->p, dq, dev, f->edge_bytes[f->in_eid[e]]);
        if (a > r) r = a;
    }
    return r;
}

static void lp_place_unit(lp_state *s, int32_t k, int dev) {
    if (s->unit_dev[k] >= 0) return;
    s->unit_dev[k] = dev;
    s->reserved[dev] += s->u.bytes[k];
    for (int32_t i = s->u.ptr[k]; i < s->u.ptr[k + 1]; i++) {
        int32_t w = s->u.mem[i];
        if (bl_is_deferred(s->p, w)) { /* sources: placed and done at time 0 */
            s->reserved[dev] -= gopt_bl_node_memory(s->p, w);
            bl_mem_place(&s->mem, w, dev);
        }
    }
}

/* Place non-deferred member v of a placed unit. */
static void lp_place_node(lp_state *s, int32_t v, int dev) {
    s->reserved[dev] -= gopt_bl_node_memory(s->p, v);
    bl_mem_place(&s->mem, v, dev);
}

static void lp_commit(lp_state *s, int32_t v, int dev, double start) {
    const gopt_frozen *f = s->f;
    int along = 1;
    if (!lp_fits_mode(s, v, dev, 0, &along)) lp_fits_mode(s, v, dev, 1, &along);
    lp_place_unit(s, s->u.unit[v], dev);
    for (int32_t e = f->in_ptr[v]; e < f->in_ptr[v + 1]; e++) {
        int32_t q = f->in_src[e], kq = s->u.unit[q];
        if (s->device[q] >= 0 || !bl_is_deferred(s->p, q) || s->unit_dev[kq] >= 0) continue;
        int to = along ? dev : -1;
        if (!along) { /* not with v: the device with most room */
            double most = -1;
            for (int t = 0; t < s->p->ndev; t++) {
                double r = room(s, t) - s->u.bytes[kq];
                if (t != dev && r >= 0 && r > most) {
                    most = r;
                    to = t;
                }
            }
        }
        if (to >= 0) lp_place_unit(s, kq, to); /* else lp_finish places it */
    }
    lp_place_node(s, v, dev);
    s->aft[v] = start + tv(s, v, dev);
}

/* Deferred sources nobody consumed, and any unit still unplaced: the device with most room. */
static gopt_status lp_finish(lp_state *s, gopt_error *err) {
    for (int32_t k = 0; k < s->u.nunits; k++) {
        if (s->unit_dev[k] >= 0) continue;
        int best = -1;
        double most = -1;
        for (int d = 0; d < s->p->ndev; d++) {
            double r = room(s, d) - s->u.bytes[k];
            if (r >= 0 && r > most) {
                most = r;
                best = d;
            }
        }
        if (best < 0)
            return gopt_error_set(err, GOPT_EUNSUP, "no valid placement of graph '%s': node '%s' fits on no device",
                                  gopt_graph_name(s->p->graph), gopt_graph_node_name(s->p->graph, s->u.mem[s->u.ptr[k]]));
        lp_place_unit(s, k, best);
    }
    for (int32_t v = 0; v < s->f->n; v++)
        if (s->device[v] < 0) lp_place_node(s, v, s->unit_dev[s->u.unit[v]]);
    for (int d = 0; d < s->p->ndev; d++)
        if (s->mem.used[d] > s->mem.cap[d] * (1 + 1e-12))
            return gopt_error_set(err, GOPT_EUNSUP,
                                  "no valid placement of graph '%s' found: device %d ends with %.4g bytes over its %.4g",
                                  gopt_graph_name(s->p->graph), d, s->mem.used[d], s->mem.cap[d]);
    return GOPT_OK;
}

static gopt_status no_fit(const lp_state *s, int32_t v, gopt_error *err) {
    return gopt_error_set(err, GOPT_EUNSUP,
                          "no valid placement of graph '%s' found: node '%s' fits on no device (memory)",
                          gopt_graph_name(s->p->graph), gopt_graph_node_name(s->p->graph, v));
}

/* ---- HEFT ------------------------------------------------------------------ */
typedef struct {
    double start, end;
} slot;
typedef struct {
    slot *a;
    int32_t len, cap;
} slots;

typedef struct {
    double rank;
    int32_t topo, v;
} rk_item;

static int rk_cmp(const void *a, const void *b) {
    const rk_item *x = a, *y = b;
    if (x->rank != y->rank) return x->rank > y->rank ? -1 : 1;
    return x->topo < y->topo ? -1 : x->topo > y->topo;
}

/* Earliest start >= ready of a gap of length dur; *pos receives the insertion index. */
static double slot_find(const slots *sl, double ready, double dur, int32_t *pos) {
    int32_t lo = 0, hi = sl->len; /* first slot with end > ready */
    while (lo < hi) {
        int32_t mid = (lo + hi) / 2;
        if (sl->a[mid].end > ready) hi = mid;
        else lo = mid + 1;
    }
    double t = ready;
    for (int32_t i = lo; i < sl->len; i++) {
        if (t + dur <= sl->a[i].start) {
            *pos = i;
            return t;
        }
        if (sl->a[i].end > t) t = sl->a[i].end;
    }
    *pos = sl->len;
    return t;
}

static int slot_insert(slots *sl, int32_t pos, double start, double end) {
    if (sl->len == sl->cap) {
        int32_t cap = sl->cap ? 2 * sl->cap : 256;
        slot *a = realloc(sl->a, (size_t)cap * sizeof *a);
        if (!a) return 0;
        sl->a = a;
        sl->cap = cap;
    }
    memmove(sl->a + pos + 1, sl->a + pos, (size_t)(sl->len - pos) * sizeof *sl->a);
    sl->a[pos].start = start;
    sl->a[pos].end = end;
    sl->len++;
    return 1;
}

static gopt_status heft_run(const gopt_bl_problem *p, gopt_decisions *d, double fill, gopt_error *err) {
    lp_state s;
    gopt_status st = lp_init(&s, p, d, err);
    s.fill = fill;
    const gopt_frozen *f = s.f;
    int32_t n = f->n, nd = p->ndev;
    rk_item *it = NULL;
    double *rank = NULL;
    slots *sl = NULL;
    if (st) goto out;
    it = gopt_malloc(((size_t)n + 1) * sizeof *it, err);
    rank = gopt_malloc(((size_t)n + 1) * sizeof *rank, err);
    sl = gopt_calloc((size_t)nd, sizeof *sl, err);
    if (!it || !rank || !sl) {
        st = GOPT_ENOMEM;
        goto out;
    }
    int32_t cnt = 0;
    for (int32_t i = n - 1; i >= 0; i--) {
        int32_t v = f->topo[i];
        double w = 0, best = 0;
        for (int k = 0; k < nd; k++) w += tv(&s, v, k);
        w /= nd;
        for (int32_t e = f->out_ptr[v]; e < f->out_ptr[v + 1]; e++) {
            double r = bl_xfer_mean(p, f->edge_bytes[f->out_eid[e]]) + rank[f->out_dst[e]];
            if (r > best) best = r;
        }
        rank[v] = w + best;
        if (bl_is_deferred(p, v)) continue;
        it[cnt].rank = rank[v];
        it[cnt].topo = f->rank[v];
        it[cnt].v = v;
        cnt++;
    }
    qsort(it, (size_t)cnt, sizeof *it, rk_cmp);
    for (int32_t i = 0; i < cnt; i++) {
        int32_t v = it[i].v, bestd = -1, bestpos = 0;
        double beststart = 0, bestfin = INFINITY;
        for (int k = 0; k < nd * 2; k++) {
            if (k == nd && bestd >= 0) break; /* under fill x capacity somewhere: done */
            if (!lp_fits(&s, v, k % nd, k >= nd)) continue;
            int32_t pos;
            double dur = tv(&s, v, k % nd);
            double start = slot_find(&sl[k % nd], lp_ready(&s, v, k % nd), dur, &pos);
            if (start + dur < bestfin) {
                bestfin = start + dur;
                beststart = start;
                bestd = k % nd;
                bestpos = pos;
            }
        }
        if (bestd < 0) {
            st = no_fit(&s, v, err);
            goto out;
        }
        if (!slot_insert(&sl[bestd], bestpos, beststart, bestfin)) {
            st = gopt_error_set(err, GOPT_ENOMEM, "out of memory in HEFT");
            goto out;
        }
        lp_commit(&s, v, bestd, beststart);
    }
    st = lp_finish(&s, err);
out:
    if (sl)
        for (int k = 0; k < nd; k++) free(sl[k].a);
    free(sl);
    free(it);
    free(rank);
    lp_destroy(&s);
    return st;
}

/* ---- ETF and SCT ------------------------------------------------------------ */
/* Queue ready node v on the devices it may go to: its favourite parent's
 * device (glue, SCT) when it fits there within fill; else every device where
 * it fits within fill; else every device where it fits at all. Returns the
 * number of queues (0: fits nowhere), -1 when out of memory. */
static int etf_push(lp_state *s, bl_heap *heap, int32_t *live, const int32_t *favp, int32_t v, int glue) {
    int nd = s->p->ndev;
    int32_t fp = favp[v];
    live[v] = 0;
    if (glue && fp >= 0 && s->device[fp] >= 0 && lp_fits(s, v, s->device[fp], 0)) {
        if (!bl_heap_push(&heap[s->device[fp]], lp_ready(s, v, s->device[fp]), v)) return -1;
        s->full[v] = 0;
        return live[v] = 1;
    }
    for (int full = 0; full < 2 && !live[v]; full++)
        for (int k = 0; k < nd; k++)
            if (lp_fits(s, v, k, full)) {
                if (!bl_heap_push(&heap[k], lp_ready(s, v, k), v)) return -1;
                live[v]++;
                s->full[v] = (uint8_t)full;
            }
    return live[v];
}

static gopt_status etf_run(const gopt_bl_problem *p, gopt_decisions *d, int sct, double fill, gopt_error *err) {
    lp_state s;
    gopt_status st = lp_init(&s, p, d, err);
    s.fill = fill;
    const gopt_frozen *f = s.f;
    int32_t n = f->n, nd = p->ndev;
    bl_heap *heap = NULL;
    double *freet = NULL;
    int32_t *indeg = NULL, *live = NULL, *favp = NULL, *favc = NULL;
    rk_item *edges = NULL;
    if (st) goto out;
    heap = gopt_calloc((size_t)nd, sizeof *heap, err);
    freet = gopt_calloc((size_t)nd, sizeof *freet, err);
    indeg = gopt_calloc((size_t)n + 1, sizeof *indeg, err);
    live = gopt_calloc((size_t)n + 1, sizeof *live, err);
    favp = gopt_malloc(((size_t)n + 1) * sizeof *favp, err);
    favc = gopt_malloc(((size_t)n + 1) * sizeof *favc, err);
    s.full = gopt_calloc((size_t)n + 1, 1, err);
    if (!heap || !freet || !indeg || !live || !favp || !favc || !s.full) {
        st = GOPT_ENOMEM;
        goto out;
    }
    for (int32_t v = 0; v < n; v++) favp[v] = favc[v] = -1;
    if (sct && nd > 1) { /* favourite children: greedy matching, heaviest transfers first */
        edges = gopt_malloc(((size_t)f->m + 1) * sizeof *edges, err);
        if (!edges) {
            st = GOPT_ENOMEM;
            goto out;
        }
        int32_t ne = 0;
        for (int32_t e = 0; e < f->m; e++) {
            int32_t a = f->edge_src[e];
            if (bl_is_deferred(p, a) || f->edge_bytes[e] <= 0) continue;
            edges[ne].rank = bl_xfer_mean(p, f->edge_bytes[e]);
            edges[ne].topo = e;
            edges[ne].v = e;
            ne++;
        }
        qsort(edges, (size_t)ne, sizeof *edges, rk_cmp);
        for (int32_t i = 0; i < ne; i++) {
            int32_t a = f->edge_src[edges[i].v], b = f->edge_dst[edges[i].v];
            if (favc[a] < 0 && favp[b] < 0) {
                favc[a] = b;
                favp[b] = a;
            }
        }
    }
    for (int32_t v = 0; v < n; v++)
        for (int32_t e = f->in_ptr[v]; e < f->in_ptr[v + 1]; e++)
            if (!bl_is_deferred(p, f->in_src[e])) indeg[v]++;
    int32_t todo = 0;
#define PUSH_READY(v, glue)                                                                                            \
    do {                                                                                                               \
        int _r = etf_push(&s, heap, live, favp, (v), (glue));                                                          \
        if (_r < 0) goto nomem;                                                                                        \
        if (_r == 0) {                                                                                                 \
            st = no_fit(&s, (v), err);                                                                                 \
            goto out;                                                                                                  \
        }                                                                                                              \
    } while (0)
    for (int32_t i = 0; i < n; i++) {
        int32_t v = f->topo[i];
        if (bl_is_deferred(p, v)) continue;
        todo++;
        if (indeg[v] == 0) PUSH_READY(v, 1);
    }
    while (todo > 0) {
        int bestd = -1;
        double beststart = INFINITY;
        for (int k = 0; k < nd; k++) {
            bl_heap *h = &heap[k];
            while (h->len) { /* drop or re-key stale tops */
                int32_t v = h->a[0].id;
                if (s.device[v] >= 0) {
                    bl_heap_pop(h);
                    continue;
                }
                if (!lp_fits(&s, v, k, s.full[v])) {
                    bl_heap_pop(h);
                    if (--live[v] == 0) PUSH_READY(v, 0); /* wherever it still fits, full capacity included */
                    continue;
                }
                double r = lp_ready(&s, v, k);
                if (r != h->a[0].key) {
                    bl_heap_pop(h);
                    if (!bl_heap_push(h, r, v)) goto nomem;
                    continue;
                }
                break;
            }
            if (!h->len) continue;
            double start = h->a[0].key > freet[k] ? h->a[0].key : freet[k];
            if (start < beststart) {
                beststart = start;
                bestd = k;
            }
        }
        if (bestd < 0) {
            /* a node that stopped fitting is pushed again wherever it still fits (above), also onto a
             * device scanned before it in this pass: scan again when any device has a ready node */
            int any = 0;
            for (int k = 0; k < nd; k++) any |= heap[k].len > 0;
            if (any) continue;
            st = gopt_error_set(err, GOPT_EINTERNAL, "ETF: %d nodes left but none ready", todo);
            goto out;
        }
        int32_t v = bl_heap_pop(&heap[bestd]).id;
        lp_commit(&s, v, bestd, beststart);
        freet[bestd] = s.aft[v];
        todo--;
        for (int32_t e = f->out_ptr[v]; e < f->out_ptr[v + 1]; e++) {
            int32_t w = f->out_dst[e];
            if (--indeg[w] == 0) PUSH_READY(w, 1);
        }
    }
#undef PUSH_READY
    st = lp_finish(&s, err);
    goto out;
nomem:
    st = gopt_error_set(err, GOPT_ENOMEM, "out of memory in ETF");
out:
    if (heap)
        for (int k = 0; k < nd; k++) bl_heap_destroy(&heap[k]);
    free(heap);
    free(freet);
    free(indeg);
    free(live);
    free(favp);
    free(favc);
    free(edges);
    free(s.full);
    lp_destroy(&s);
    return st;
}

/* A greedy placer can paint itself into a corner: early nodes fill the
 * devices and a later one (with the copies of its inputs) fits nowhere. The
 * pure algorithm runs first; on such a failure it runs again keeping each
 * device within 90%, 75%, 60%, 45% of its capacity where it can, so the
 * rest is headroom for the nodes that fit nowhere else. */
static const double FILLS[] = {1.0, 0.9, 0.75, 0.6, 0.45};
#define NFILLS (sizeof FILLS / sizeof FILLS[0])

gopt_status gopt_bl_place_heft(const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err) {
    gopt_status st = GOPT_OK;
    for (size_t i = 0; i < NFILLS; i++)
        if ((st = heft_run(p, d, FILLS[i], err)) != GOPT_EUNSUP) break;
    return st;
}

gopt_status gopt_bl_place_metf(const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err) {
    gopt_status st = GOPT_OK;
    for (size_t i = 0; i < NFILLS; i++)
        if ((st = etf_run(p, d, 0, FILLS[i], err)) != GOPT_EUNSUP) break;
    return st;
}

gopt_status gopt_bl_place_msct(const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err) {
    gopt_status st = GOPT_OK;
    for (size_t i = 0; i < NFILLS; i++)
        if ((st = etf_run(p, d, 1, FILLS[i], err)) != GOPT_EUNSUP) break;
    return st;
}
