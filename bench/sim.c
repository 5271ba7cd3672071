/* bench/sim: simulation speed on the 8-layer GNMT and 8-layer Transformer-XL zoo
 * graphs and on an 80,000-node / 160,000-edge layered DAG, on 8 devices, with
 * random valid decisions: placement random per colocation group, random
 * priorities, random legal fusion (producer -> sole-consumer chains whose
 * members landed on one device).
 *
 * Figures per graph (each the median of --reps runs, with the best in brackets; single-thread
 * figures are this thread's CPU time, so that time spent waiting for a core on a shared
 * machine is not counted; the batch figures are wall-clock time):
 *   sim        one gopt_sim_run (the decisions cycle over 8 random sets)
 *   bare pass  one pass over the same frozen graph touching every node and
 *              every edge once (the earliest-finish time of each node from its
 *              predecessors and its cost-table time): the floor a simulator
 *              cannot go below, measured in the same run
 *   ratio      sim / bare pass (target < 10x)
 *   minimal    a minimal event-driven list scheduler written here (the same decisions
 *              without fusion: a ready heap per device by priority, FIFO links, one transfer
 *              per tensor and receiving device, a binary event heap; no memory, no fusion,
 *              no instants, nothing recorded): what any event simulation of these rules
 *              costs, for scale. Its step time is printed beside the simulator's (they differ
 *              by the fusion and the simultaneous-event rules only).
 *   lean       the same rules written for speed rather than generality, a second yardstick:
 *              multi-edges merged once per graph, a consumer's readiness state in 24 bytes,
 *              arrival times computed when a copy is queued (FIFO links), the next event
 *              chosen from 64 per-resource slots under 8 block minima; at most 8 devices,
 *              links by latency + bandwidth; ties at one instant by resource slot (device d:
 *              d*ndev+d, link s->d: s*ndev+d), not by event sequence, so its step time can
 *              differ from the minimal scheduler's in the last digits.
 *   batch      K = 16 decision sets: a sequential loop vs gopt_sim_run_batch on
 *              --threads threads (default 2); speed-up target >= 1.8x on 2 cores;
 *              the batch results are checked equal to the sequential ones.
 * Targets (issue 5): < 20 ms per simulation of an 80,000-node graph on one core.
 *
 * Usage: bench_sim [--reps R] [--threads T] [--profile FILE] [--only gnmt|txl|dag] [--seed S]
 *                  [--placement random|single|blocks] [--graph FILE]
 * (--graph: bench this GraphML file instead of the built-in graphs, e.g. a real graph of graphs/real/.)
 * (--placement: the random placement by default; "single" puts everything on
 * device 0, "blocks" cuts the topological order into ndev ranges; both for comparison.)
 * Without --profile the shipped V100 DGX-1 datasheet profile (profiles/v100-dgx1-x8.json) is used. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "gopt_sim.h"
#include "gopt_zoo.h"

/* CPU time of this thread: on a shared machine, time spent waiting for a core is not ours. */
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double proc_cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double loadavg(void) {
    double l = -1;
    FILE *fp = fopen("/proc/loadavg", "r");
    if (fp) {
        if (fscanf(fp, "%lf", &l) != 1) l = -1;
        fclose(fp);
    }
    return l;
}

/* Random valid decisions: one device per colocation group, random priorities, fusion of
 * producer -> sole-consumer chains on one device (contracting such a chain cannot close a
 * cycle: its only exit is its last member). */
static const char *placement = "random"; /* --placement: random, single (device 0), blocks (topological ranges) */

static int32_t place(gopt_rng *rng, const gopt_frozen *f, int ndev, int32_t v) {
    if (!strcmp(placement, "single")) return 0;
    if (!strcmp(placement, "blocks")) return (int32_t)((int64_t)f->rank[v] * ndev / f->n);
    return (int32_t)gopt_rng_below(rng, (uint64_t)ndev);
}

static void random_decisions(gopt_rng *rng, const gopt_frozen *f, int ndev, gopt_decisions *d, int32_t *coloc_dev) {
    for (int32_t k = 0; k < f->n_coloc; k++) coloc_dev[k] = -1;
    for (int32_t v = 0; v < f->n; v++)
        if (f->coloc[v] >= 0 && coloc_dev[f->coloc[v]] < 0) coloc_dev[f->coloc[v]] = place(rng, f, ndev, v);
    for (int32_t v = 0; v < f->n; v++) {
        d->device[v] = f->coloc[v] >= 0 ? coloc_dev[f->coloc[v]] : place(rng, f, ndev, v);
        d->priority[v] = (int32_t)gopt_rng_below(rng, 1u << 20);
        d->group[v] = -1;
    }
    for (int32_t i = 0; i < f->n; i++) {
        int32_t u = f->topo[i];
        if (f->out_ptr[u + 1] - f->out_ptr[u] != 1 || gopt_rng_below(rng, 4) == 0) continue;
        int32_t v = f->out_dst[f->out_ptr[u]];
        if (d->device[u] != d->device[v]) continue;
        if (d->group[u] < 0) d->group[u] = u;
        if (d->group[v] >= 0) continue; /* v already heads or joins a group through another producer */
        d->group[v] = d->group[u];
    }
}

/* The reference: every node and every edge once, in topological order. */
static double bare_pass(const gopt_frozen *f, const gopt_cost_table *t, const gopt_decisions *d, double *fin) {
    int nd = t->ndev;
    double best = 0;
    for (int32_t i = 0; i < f->n; i++) {
        int32_t v = f->topo[i];
        double st = 0;
        for (int32_t k = f->in_ptr[v]; k < f->in_ptr[v + 1]; k++) {
            double x = fin[f->in_src[k]];
            if (x > st) st = x;
        }
        fin[v] = st + t->time[(size_t)v * nd + d->device[v]];
        if (fin[v] > best) best = fin[v];
    }
    return best;
}

/* ---- the minimal list scheduler (see the header) ---------------------------------------- */
typedef struct {
    double t;
    uint32_t seq;
    int32_t r; /* resource: device d, or ndev + link */
} mini_event;

typedef struct {
    uint64_t key; /* ~priority << 32 | rank: smallest first */
    int32_t v, spare;
} mini_ready;

typedef struct {
    int32_t v, spare;
    double bytes;
} mini_xfer;

typedef struct {
    const gopt_frozen *f;
    const double *time; /* cost table [v * nd + device] */
    int nd;
    int32_t *nin, *pend, *lastp, *dev, *item;
    uint64_t *key;
    double *dur;
    mini_ready *rq;
    int32_t rq_off[GOPT_SIM_MAX_DEVICES], rq_len[GOPT_SIM_MAX_DEVICES];
    mini_xfer *lq; /* per link: [lq_head, lq_tail) in FIFO order */
    int32_t *lq_head, *lq_tail;
    mini_event *heap;
    int32_t nh;
    uint32_t seq;
    uint8_t *busy;
    double *lat, *bw;
    int32_t dstamp[GOPT_SIM_MAX_DEVICES];
    double dbytes[GOPT_SIM_MAX_DEVICES];
    double now;
} mini_sim;

/* A device's ready heap (smallest key first) with a sentinel item after its last: the same
 * heap for both schedulers below. */
static inline void rq_push(mini_ready *h, int32_t *len, mini_ready it) {
    int32_t i = (*len)++;
    while (i > 0 && h[(i - 1) >> 1].key > it.key) {
        h[i] = h[(i - 1) >> 1];
        i = (i - 1) >> 1;
    }
    h[i] = it;
    h[*len] = (mini_ready){UINT64_MAX, -1, 0};
}

/* Removes and returns the top's node (the heap is not empty): the hole walks down along the
 * smaller children (the sentinel stands in for a missing second child), then the last item
 * moves up into it. */
static inline int32_t rq_pop(mini_ready *h, int32_t *len) {
    int32_t top = h[0].v, n = --*len, i = 0, c;
    mini_ready last = h[n];
    h[n] = (mini_ready){UINT64_MAX, -1, 0};
    while ((c = 2 * i + 1) < n) {
        c += h[c + 1].key < h[c].key;
        h[i] = h[c];
        i = c;
    }
    while (i > 0 && h[(i - 1) >> 1].key > last.key) {
        h[i] = h[(i - 1) >> 1];
        i = (i - 1) >> 1;
    }
    h[i] = last;
    return top;
}

/* The ready key of node v: higher priority first, then lower topological rank (smallest key runs
 * first). */
static inline uint64_t ready_key(int32_t priority, int32_t rank) {
    uint32_t up = (uint32_t)priority ^ 0x80000000u;
    return ((uint64_t)(~up) << 32) | (uint32_t)rank;
}

/* Carve the per-device ready heaps (count[k] items and a sentinel each) and the per-link queues
 * (a link from s carries at most one copy per node on s) for one run of either scheduler. */
static void carve_queues(int nd, const int32_t *count, mini_ready *rq, int32_t *rq_off, int32_t *rq_len,
                         int32_t *dstamp, int32_t *lq_head, int32_t *lq_tail) {
    for (int k = 0, off = 0; k < nd; k++) {
        rq_off[k] = off;
        rq_len[k] = 0;
        rq[off] = (mini_ready){UINT64_MAX, -1, 0};
        dstamp[k] = -1;
        off += count[k] + 1;
    }
    for (int l = 0, off = 0; l < nd * nd; l++) {
        lq_head[l] = lq_tail[l] = off;
        if (l / nd != l % nd) off += count[l / nd];
    }
}

static int mini_before(const mini_event *a, const mini_event *b) { return a->t < b->t || (a->t == b->t && a->seq < b->seq); }

static void mini_event_push(mini_sim *s, double t, int32_t r) {
    mini_event e = {t, s->seq++, r};
    int32_t i = s->nh++;
    while (i > 0 && mini_before(&e, &s->heap[(i - 1) / 2])) {
        s->heap[i] = s->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    s->heap[i] = e;
}

static mini_event mini_event_pop(mini_sim *s) {
    mini_event top = s->heap[0], last = s->heap[--s->nh];
    int32_t i = 0, n = s->nh;
    for (int32_t c; (c = 2 * i + 1) < n; i = c) {
        if (c + 1 < n && mini_before(&s->heap[c + 1], &s->heap[c])) c++;
        if (!mini_before(&s->heap[c], &last)) break;
        s->heap[i] = s->heap[c];
    }
    s->heap[i] = last;
    return top;
}

static void mini_offer_device(mini_sim *s, int d) {
    if (s->busy[d] || s->rq_len[d] == 0) return;
    int32_t v = rq_pop(s->rq + s->rq_off[d], &s->rq_len[d]);
    s->busy[d] = 1;
    s->item[d] = v;
    mini_event_push(s, s->now + s->dur[v], d);
}

static void mini_offer_link(mini_sim *s, int32_t l) {
    int32_t r = s->nd + l;
    if (s->busy[r] || s->lq_head[l] == s->lq_tail[l]) return;
    int32_t x = s->lq_head[l]++;
    s->busy[r] = 1;
    s->item[r] = x;
    mini_event_push(s, s->now + s->lat[l] + s->lq[x].bytes / s->bw[l], r);
}

static void mini_ready_push(mini_sim *s, int32_t w) {
    int d = s->dev[w];
    rq_push(s->rq + s->rq_off[d], &s->rq_len[d], (mini_ready){s->key[w], w, 0});
}

/* Producer v's tensor is present for consumer w (once per pair: multi-edges count once). */
static void mini_arrive(mini_sim *s, int32_t v, int32_t w) {
    if (s->lastp[w] == v) return;
    s->lastp[w] = v;
    if (--s->pend[w] == 0) {
        mini_ready_push(s, w);
        mini_offer_device(s, s->dev[w]);
    }
}

static void mini_free(mini_sim *s) {
    free(s->nin);
    free(s->pend);
    free(s->lastp);
    free(s->dev);
    free(s->item);
    free(s->key);
    free(s->dur);
    free(s->rq);
    free(s->lq);
    free(s->lq_head);
    free(s->lq_tail);
    free(s->heap);
    free(s->busy);
    free(s->lat);
    free(s->bw);
}

static int mini_init(mini_sim *s, const gopt_frozen *f, const gopt_costmodel *cm, const gopt_cost_table *t) {
    int nd = gopt_cost_num_devices(cm);
    size_t n = (size_t)f->n + 1, nr = (size_t)(nd + nd * nd);
    memset(s, 0, sizeof *s);
    s->f = f;
    s->time = t->time;
    s->nd = nd;
    s->nin = calloc(n, sizeof *s->nin);
    s->pend = calloc(n, sizeof *s->pend);
    s->lastp = calloc(n, sizeof *s->lastp);
    s->dev = calloc(n, sizeof *s->dev);
    s->item = calloc(nr, sizeof *s->item);
    s->key = calloc(n, sizeof *s->key);
    s->dur = calloc(n, sizeof *s->dur);
    s->rq = calloc(n + (size_t)nd, sizeof *s->rq); /* each device's heap and its sentinel */
    s->lq = calloc(n * (size_t)(nd > 1 ? nd - 1 : 1), sizeof *s->lq);
    s->lq_head = calloc((size_t)nd * nd, sizeof *s->lq_head);
    s->lq_tail = calloc((size_t)nd * nd, sizeof *s->lq_tail);
    s->heap = calloc(nr, sizeof *s->heap);
    s->busy = calloc(nr, 1);
    s->lat = calloc((size_t)nd * nd, sizeof *s->lat);
    s->bw = calloc((size_t)nd * nd, sizeof *s->bw);
    if (!s->nin || !s->pend || !s->lastp || !s->dev || !s->item || !s->key || !s->dur || !s->rq || !s->lq ||
        !s->lq_head || !s->lq_tail || !s->heap || !s->busy || !s->lat || !s->bw)
        return -1;
    for (int32_t v = 0; v < f->n; v++) s->lastp[v] = -1;
    for (int32_t v = 0; v < f->n; v++) /* distinct producers */
        for (int32_t e = f->in_ptr[v]; e < f->in_ptr[v + 1]; e++)
            if (s->lastp[f->in_src[e]] != v) {
                s->lastp[f->in_src[e]] = v;
                s->nin[v]++;
            }
    for (int a = 0; a < nd; a++)
        for (int b = 0; b < nd; b++) {
            s->bw[a * nd + b] = 1;
            if (a != b && !gopt_cost_link_linear(cm, a, b, &s->lat[a * nd + b], &s->bw[a * nd + b])) return -2;
        }
    return 0;
}

/* One run; returns the step time. */
static double mini_run(mini_sim *s, const gopt_decisions *d) {
    const gopt_frozen *f = s->f;
    int nd = s->nd;
    int32_t count[GOPT_SIM_MAX_DEVICES] = {0};
    for (int32_t v = 0; v < f->n; v++) {
        int dv = d->device[v];
        s->dev[v] = dv;
        s->pend[v] = s->nin[v];
        s->lastp[v] = -1;
        s->key[v] = ready_key(d->priority[v], f->rank[v]);
        s->dur[v] = s->time[(size_t)v * nd + dv];
        count[dv]++;
    }
    carve_queues(nd, count, s->rq, s->rq_off, s->rq_len, s->dstamp, s->lq_head, s->lq_tail);
    memset(s->busy, 0, (size_t)(nd + nd * nd));
    s->nh = 0;
    s->seq = 0;
    s->now = 0;
    for (int32_t v = 0; v < f->n; v++)
        if (s->nin[v] == 0) mini_ready_push(s, v);
    for (int k = 0; k < nd; k++) mini_offer_device(s, k);
    while (s->nh) {
        mini_event e = mini_event_pop(s);
        int32_t r = e.r;
        s->now = e.t;
        s->busy[r] = 0;
        if (r < nd) { /* a kernel ends: local consumers, one transfer per receiving device */
            int32_t v = s->item[r];
            uint64_t mask = 0;
            for (int32_t k = f->out_ptr[v]; k < f->out_ptr[v + 1]; k++) {
                int32_t w = f->out_dst[k], D = s->dev[w];
                if (D == r) {
                    mini_arrive(s, v, w);
                    continue;
                }
                double b = f->edge_bytes[f->out_eid[k]];
                if (s->dstamp[D] != v) {
                    s->dstamp[D] = v;
                    s->dbytes[D] = b;
                    mask |= 1ull << D;
                } else if (b > s->dbytes[D]) {
                    s->dbytes[D] = b;
                }
            }
            for (; mask; mask &= mask - 1) {
                int D = __builtin_ctzll(mask);
                int32_t l = r * nd + D;
                s->lq[s->lq_tail[l]++] = (mini_xfer){v, 0, s->dbytes[D]};
                mini_offer_link(s, l);
            }
            mini_offer_device(s, r);
        } else { /* a transfer arrives: its consumers on the receiving device */
            int32_t l = r - nd, D = l % nd, v = s->lq[s->item[r]].v;
            for (int32_t k = f->out_ptr[v]; k < f->out_ptr[v + 1]; k++)
                if (s->dev[f->out_dst[k]] == D) mini_arrive(s, v, f->out_dst[k]);
            mini_offer_link(s, l);
        }
    }
    return s->now;
}

/* ---- the lean scheduler (see the header): the minimal one's rules without its generality --- */
typedef struct {
    uint64_t key; /* as the minimal scheduler's */
    double dur;
    int32_t pend, dev;
} lean_node; /* everything a consumer's readiness and start read, in 24 bytes */

typedef struct {
    double arr; /* arrival time, known when queued: the link is FIFO */
    int32_t v, spare;
} lean_xfer;

enum { LEAN_MAX_DEV = 8 }; /* the event slots below: ndev^2 <= 64 */

typedef struct {
    const double *time;
    const int32_t *rank;
    int nd;
    int32_t n, *optr, *odst, *nin; /* successors without multi-edges (built once per graph) */
    double *obytes;                /* the largest edge of each (producer, consumer) pair */
    lean_node *nodes;
    mini_ready *rq;
    int32_t rq_off[LEAN_MAX_DEV], rq_len[LEAN_MAX_DEV], item[LEAN_MAX_DEV];
    lean_xfer *lq;
    int32_t lq_head[LEAN_MAX_DEV * LEAN_MAX_DEV], lq_tail[LEAN_MAX_DEV * LEAN_MAX_DEV];
    double lfree[LEAN_MAX_DEV * LEAN_MAX_DEV], lat[LEAN_MAX_DEV * LEAN_MAX_DEV], ibw[LEAN_MAX_DEV * LEAN_MAX_DEV];
    /* the next event of each resource by slot (device d: slot d*nd+d, link s->d: s*nd+d; +inf
     * when idle), and the minimum of each block of 8 */
    double ev[64], ev1[8];
    int32_t dstamp[LEAN_MAX_DEV];
    double dbytes[LEAN_MAX_DEV];
} lean_sim;

static inline double lean_min8(const double *x) {
    double a = x[0] < x[1] ? x[0] : x[1], b = x[2] < x[3] ? x[2] : x[3];
    double c = x[4] < x[5] ? x[4] : x[5], d = x[6] < x[7] ? x[6] : x[7];
    a = a < b ? a : b;
    c = c < d ? c : d;
    return a < c ? a : c;
}

static inline uint32_t lean_eq8(const double *x, double m) {
    uint32_t k = 0;
    for (int i = 0; i < 8; i++) k |= (uint32_t)(x[i] == m) << i;
    return k;
}

static inline void lean_set(lean_sim *s, int k, double t) {
    s->ev[k] = t;
    s->ev1[k >> 3] = lean_min8(s->ev + (k & ~7));
}

static void lean_free(lean_sim *s) {
    free(s->optr);
    free(s->odst);
    free(s->obytes);
    free(s->nin);
    free(s->nodes);
    free(s->rq);
    free(s->lq);
}

static int lean_init(lean_sim *s, const gopt_frozen *f, const gopt_costmodel *cm, const gopt_cost_table *t) {
    int nd = gopt_cost_num_devices(cm);
    size_t n = (size_t)f->n + 1;
    memset(s, 0, sizeof *s);
    if (nd > LEAN_MAX_DEV) return -1;
    s->time = t->time;
    s->rank = f->rank;
    s->nd = nd;
    s->n = f->n;
    s->optr = calloc(n, sizeof *s->optr);
    s->odst = calloc((size_t)f->m + 1, sizeof *s->odst);
    s->obytes = calloc((size_t)f->m + 1, sizeof *s->obytes);
    s->nin = calloc(n, sizeof *s->nin);
    s->nodes = calloc(n, sizeof *s->nodes);
    s->rq = calloc(n + (size_t)nd, sizeof *s->rq);
    s->lq = calloc(n * (size_t)nd, sizeof *s->lq);
    int32_t *slot = calloc(n, sizeof *slot); /* consumer w's slot among the current producer's */
    if (!s->optr || !s->odst || !s->obytes || !s->nin || !s->nodes || !s->rq || !s->lq || !slot) {
        free(slot);
        return -1;
    }
    int32_t m = 0;
    for (int32_t v = 0; v < f->n; v++) {
        s->optr[v] = m;
        for (int32_t k = f->out_ptr[v]; k < f->out_ptr[v + 1]; k++) {
            int32_t w = f->out_dst[k];
            double b = f->edge_bytes[f->out_eid[k]];
            int32_t j = slot[w];
            if (j >= s->optr[v] && j < m && s->odst[j] == w) { /* a multi-edge: keep the largest */
                if (b > s->obytes[j]) s->obytes[j] = b;
                continue;
            }
            slot[w] = m;
            s->odst[m] = w;
            s->obytes[m++] = b;
            s->nin[w]++;
        }
    }
    s->optr[f->n] = m;
    free(slot);
    for (int a = 0; a < nd; a++)
        for (int b = 0; b < nd; b++) {
            double bw = 1;
            if (a != b && !gopt_cost_link_linear(cm, a, b, &s->lat[a * nd + b], &bw)) return -2;
            s->ibw[a * nd + b] = 1.0 / bw;
        }
    return 0;
}

/* Device d is idle at `now`: start its best ready task, or leave it idle. */
static inline void lean_offer(lean_sim *s, int d, double now) {
    int k = d * s->nd + d;
    if (s->rq_len[d] == 0) {
        lean_set(s, k, HUGE_VAL);
        return;
    }
    mini_ready *h = s->rq + s->rq_off[d];
    int32_t v = rq_pop(h, &s->rq_len[d]);
    if (s->rq_len[d] > 0) __builtin_prefetch(&s->nodes[h[0].v]);
    __builtin_prefetch(s->odst + s->optr[v]);
    s->item[d] = v;
    lean_set(s, k, now + s->nodes[v].dur);
}

/* One run; returns the step time. */
static double lean_run(lean_sim *s, const gopt_decisions *d) {
    const int nd = s->nd;
    int32_t count[LEAN_MAX_DEV] = {0};
    lean_node *nodes = s->nodes;
    for (int32_t v = 0; v < s->n; v++) {
        int dv = d->device[v];
        nodes[v] = (lean_node){ready_key(d->priority[v], s->rank[v]), s->time[(size_t)v * nd + dv], s->nin[v], dv};
        count[dv]++;
    }
    carve_queues(nd, count, s->rq, s->rq_off, s->rq_len, s->dstamp, s->lq_head, s->lq_tail);
    for (int l = 0; l < nd * nd; l++) s->lfree[l] = 0;
    for (int k = 0; k < 64; k++) s->ev[k] = HUGE_VAL;
    for (int k = 0; k < 8; k++) s->ev1[k] = HUGE_VAL;
    for (int32_t v = 0; v < s->n; v++)
        if (s->nin[v] == 0) rq_push(s->rq + s->rq_off[nodes[v].dev], &s->rq_len[nodes[v].dev], (mini_ready){nodes[v].key, v, 0});
    for (int k = 0; k < nd; k++) lean_offer(s, k, 0);
    const int32_t *optr = s->optr, *odst = s->odst;
    const double *obytes = s->obytes;
    double now = 0;
    for (;;) {
        double m = lean_min8(s->ev1);
        if (m == HUGE_VAL) break;
        now = m;
        int b = __builtin_ctz(lean_eq8(s->ev1, m));
        int k = 8 * b + __builtin_ctz(lean_eq8(s->ev + 8 * b, m)); /* ties: the lowest slot */
        int src = k / nd, dst = k % nd;
        if (src == dst) { /* a kernel ends: local consumers, one transfer per receiving device */
            int32_t v = s->item[src];
            uint32_t mask = 0;
            for (int32_t e = optr[v], ee = optr[v + 1]; e < ee; e++) {
                lean_node *y = &nodes[odst[e]];
                int D = y->dev;
                if (D == src) {
                    if (--y->pend == 0) rq_push(s->rq + s->rq_off[src], &s->rq_len[src], (mini_ready){y->key, odst[e], 0});
                    continue;
                }
                double by = obytes[e];
                if (s->dstamp[D] != v) {
                    s->dstamp[D] = v;
                    s->dbytes[D] = by;
                    mask |= 1u << D;
                } else if (by > s->dbytes[D]) {
                    s->dbytes[D] = by;
                }
            }
            for (; mask; mask &= mask - 1) {
                int D = __builtin_ctz(mask), l = src * nd + D;
                double st = s->lfree[l] > now ? s->lfree[l] : now;
                double arr = st + s->lat[l] + s->dbytes[D] * s->ibw[l];
                s->lfree[l] = arr;
                if (s->lq_head[l] == s->lq_tail[l]) lean_set(s, l, arr);
                s->lq[s->lq_tail[l]++] = (lean_xfer){arr, v, 0};
            }
            lean_offer(s, src, now);
        } else { /* a copy arrives: its consumers on the receiving device (v's edges again) */
            int32_t h = s->lq_head[k]++, v = s->lq[h].v;
            lean_set(s, k, h + 1 < s->lq_tail[k] ? s->lq[h + 1].arr : HUGE_VAL);
            for (int32_t e = optr[v], ee = optr[v + 1]; e < ee; e++) {
                lean_node *y = &nodes[odst[e]];
                if (y->dev != dst || --y->pend) continue;
                rq_push(s->rq + s->rq_off[dst], &s->rq_len[dst], (mini_ready){y->key, odst[e], 0});
                if (s->ev[dst * nd + dst] == HUGE_VAL) lean_offer(s, dst, now);
            }
        }
    }
    return now;
}

static int bench_graph(const char *label, gopt_graph *g, const gopt_costmodel *cm, int reps, int threads, uint64_t seed) {
    gopt_error err = {0};
    const gopt_frozen *f = gopt_graph_frozen(g);
    int nd = gopt_cost_num_devices(cm);
    enum { K = 16 };
    gopt_sim *sim = NULL;
    gopt_sim_scratch *sc[64] = {0};
    gopt_decisions ds[K];
    gopt_sim_result *seq = calloc(K, sizeof *seq), *bat = calloc(K, sizeof *bat);
    double *fin = calloc((size_t)f->n + 1, sizeof *fin);
    double *ts = calloc((size_t)reps, sizeof *ts), *tb = calloc((size_t)reps, sizeof *tb);
    double *tm = calloc((size_t)reps, sizeof *tm), mini_step = 0;
    mini_sim mini;
    lean_sim lean;
    int mini_ok = 0, lean_ok = 0;
    double *tl = calloc((size_t)reps, sizeof *tl), lean_step = 0;
    double *tq = calloc((size_t)reps + 3, sizeof *tq), *tp = calloc((size_t)reps + 3, sizeof *tp);
    double cq = 0, cp = 0;
    int32_t *coloc_dev = calloc((size_t)f->n_coloc + 1, sizeof *coloc_dev);
    int rc = 1, nds = 0;
    memset(&mini, 0, sizeof mini);
    memset(&lean, 0, sizeof lean);
    if (!seq || !bat || !fin || !ts || !tb || !tm || !tl || !tq || !tp || !coloc_dev) goto out;
    double t0 = gopt_now_seconds();
    if (gopt_sim_create(g, cm, &sim, &err)) goto fail;
    double t_create = gopt_now_seconds() - t0;
    for (int i = 0; i < threads; i++)
        if (gopt_sim_scratch_create(sim, &sc[i], &err)) goto fail;
    gopt_rng rng;
    gopt_rng_seed(&rng, seed);
    int fused_nodes = 0;
    for (; nds < K; nds++) {
        if (gopt_decisions_init(&ds[nds], f->n, &err)) goto fail;
        random_decisions(&rng, f, nd, &ds[nds], coloc_dev);
        if (gopt_decisions_validate(&ds[nds], g, nd, &err)) goto fail;
        for (int32_t v = 0; v < f->n; v++) fused_nodes += ds[nds].group[v] >= 0;
    }
    /* the minimal scheduler: links given by latency + bandwidth only (else not run) */
    mini_ok = mini_init(&mini, f, cm, gopt_sim_cost_table(sim)) == 0;
    if (mini_ok) mini_run(&mini, &ds[0]);
    lean_ok = lean_init(&lean, f, cm, gopt_sim_cost_table(sim)) == 0;
    if (lean_ok) lean_run(&lean, &ds[0]);
    gopt_sim_result r;
    /* warm-up */
    if (gopt_sim_run(sim, &ds[0], &r, sc[0], &err)) goto fail;
    double sink = bare_pass(f, gopt_sim_cost_table(sim), &ds[0], fin);
    for (int i = 0; i < reps; i++) {
        const gopt_decisions *d = &ds[i % K];
        double a = cpu_now();
        if (gopt_sim_run(sim, d, &r, sc[0], &err)) goto fail;
        double b = cpu_now();
        sink += bare_pass(f, gopt_sim_cost_table(sim), d, fin);
        double c = cpu_now();
        ts[i] = b - a;
        tb[i] = c - b;
    }
    /* the minimal scheduler in a loop of its own (interleaved with the simulator, its 10 MB of
     * state would evict the simulator's between runs and slow both) */
    for (int i = 0; mini_ok && i < reps; i++) {
        double a = cpu_now();
        mini_step = mini_run(&mini, &ds[i % K]);
        tm[i] = cpu_now() - a;
    }
    for (int i = 0; lean_ok && i < reps; i++) {
        double a = cpu_now();
        lean_step = lean_run(&lean, &ds[i % K]);
        tl[i] = cpu_now() - a;
    }
    /* batch: sequential loop vs threads, alternating, reps/4 rounds (at least 3) */
    int rounds = reps / 4 < 3 ? 3 : reps / 4;
    int same = 1;
    for (int i = 0; i < rounds; i++) {
        double a = gopt_now_seconds(), ca = proc_cpu_now();
        for (int k = 0; k < K; k++)
            if (gopt_sim_run(sim, &ds[k], &seq[k], sc[0], &err)) goto fail;
        double b = gopt_now_seconds(), cb = proc_cpu_now();
        if (gopt_sim_run_batch(sim, ds, K, bat, sc, threads, &err)) goto fail;
        double c = gopt_now_seconds(), cc = proc_cpu_now();
        cq += cb - ca;
        cp += cc - cb;
        tq[i] = b - a;
        tp[i] = c - b;
        for (int k = 0; k < K; k++) same &= memcmp(&seq[k], &bat[k], sizeof seq[k]) == 0;
    }
    double ms = bench_median(ts, reps), mb = bench_median(tb, reps);
    double bs = bench_minimum(ts, reps), bb = bench_minimum(tb, reps);
    double sq = bench_median(tq, rounds), sp = bench_median(tp, rounds);
    printf("%s: %d nodes, %d edges, %d devices; %.1f%% of nodes fused; %d kernels, %d transfers (last run)\n", label,
           f->n, f->m, nd, 100.0 * fused_nodes / ((double)f->n * K), r.tasks, r.transfers);
    printf("  prepare (cost table)  %8.2f ms (once per graph)\n", t_create * 1e3);
    printf("  sim                   %8.3f ms   [best %.3f]   step %.3f ms simulated\n", ms * 1e3, bs * 1e3,
           r.step_time_s * 1e3);
    printf("  bare pass             %8.3f ms   [best %.3f]\n", mb * 1e3, bb * 1e3);
    printf("  ratio sim/bare        %8.2fx  [best/best %.2fx]   target < 10x: %s\n", ms / mb, bs / bb,
           ms / mb < 10 ? "MET" : "MISSED");
    if (mini_ok) {
        double mm = bench_median(tm, reps);
        printf("  minimal scheduler     %8.3f ms   [best %.3f]   %.2fx the bare pass; sim/minimal %.2fx; step %.3f ms "
               "simulated (no fusion)\n",
               mm * 1e3, bench_minimum(tm, reps) * 1e3, mm / mb, ms / mm, mini_step * 1e3);
    } else {
        printf("  minimal scheduler     n/a (a link has a measured copy table)\n");
    }
    if (lean_ok) {
        double ml = bench_median(tl, reps);
        printf("  lean scheduler        %8.3f ms   [best %.3f]   %.2fx the bare pass; sim/lean %.2fx; step %.3f ms "
               "simulated (no fusion)\n",
               ml * 1e3, bench_minimum(tl, reps) * 1e3, ml / mb, ms / ml, lean_step * 1e3);
    } else {
        printf("  lean scheduler        n/a (more than %d devices, or a link has a measured copy table)\n", LEAN_MAX_DEV);
    }
    printf("  per 80k nodes         %8.3f ms   target < 20 ms: %s\n", ms * 80000.0 / f->n * 1e3,
           ms * 80000.0 / f->n < 20e-3 ? "MET" : "MISSED");
    printf("  batch of %d           %8.2f ms sequential, %.2f ms on %d threads: speed-up %.2fx (target >= 1.8x on 2: %s); "
           "results identical: %s\n",
           K, sq * 1e3, sp * 1e3, threads, sq / sp, threads == 2 ? (sq / sp >= 1.8 ? "MET" : "MISSED") : "n/a",
           same ? "yes" : "NO");
    printf("  batch CPU time        %8.2fx the sequential loop's (1.00: threads add no work); load average %.1f on %ld "
           "cores\n",
           cp / cq, loadavg(), sysconf(_SC_NPROCESSORS_ONLN));
    if (sink < 0) printf("(unreachable: %g)\n", sink);
    rc = same ? 0 : 1;
    goto out;
fail:
    fprintf(stderr, "bench_sim: %s: %s\n", label, err.msg);
out:
    for (int i = 0; i < nds; i++) gopt_decisions_destroy(&ds[i]);
    for (int i = 0; i < 64; i++) gopt_sim_scratch_free(sc[i]);
    gopt_sim_free(sim);
    free(seq);
    free(bat);
    free(fin);
    free(ts);
    free(tb);
    free(tm);
    mini_free(&mini);
    lean_free(&lean);
    free(tl);
    free(tq);
    free(tp);
    free(coloc_dev);
    return rc;
}

int main(int argc, char **argv) {
    int reps = 40, threads = 2;
    const char *prof = NULL, *only = NULL, *gfile = NULL;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--profile") && i + 1 < argc) prof = argv[++i];
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--placement") && i + 1 < argc) placement = argv[++i];
        else if (!strcmp(argv[i], "--graph") && i + 1 < argc) gfile = argv[++i];
        else {
            fprintf(stderr, "usage: bench_sim [--reps R] [--threads T] [--profile FILE] [--only gnmt|txl|dag] [--seed S]\n"
                            "                 [--placement random|single|blocks] [--graph FILE]\n");
            return 2;
        }
    }
    if (reps < 1 || threads < 1 || threads > 64) {
        fprintf(stderr, "bench_sim: --reps >= 1, --threads in 1..64\n");
        return 2;
    }
    gopt_error err = {0};
    gopt_profile *p = NULL;
    gopt_costmodel *cm = NULL;
    if (gopt_profile_load(prof ? prof : GOPT_SOURCE_DIR "/profiles/v100-dgx1-x8.json", &p, &err) ||
        gopt_cost_create(p, 8, &cm, &err)) {
        fprintf(stderr, "bench_sim: %s\n", err.msg);
        return 2;
    }
    if (strcmp(placement, "random") && strcmp(placement, "single") && strcmp(placement, "blocks")) {
        fprintf(stderr, "bench_sim: --placement %s: random, single or blocks\n", placement);
        return 2;
    }
    printf("bench_sim: profile %s, %d devices, %s placement, median of %d runs, %d threads for the batch\n",
           gopt_profile_name(p), gopt_cost_num_devices(cm), placement, reps, threads);
    int rc = 0;
    if (gfile) {
        gopt_graph *g = NULL;
        if (gopt_graph_load(gfile, &g, &err)) {
            fprintf(stderr, "bench_sim: %s\n", err.msg);
            rc = 2;
        } else {
            rc = bench_graph(gfile, g, cm, reps, threads, seed);
            gopt_graph_free(g);
        }
        gopt_cost_free(cm);
        gopt_profile_free(p);
        return rc;
    }
    struct {
        const char *key, *label, *family;
    } zoo[] = {{"gnmt", "gnmt-8 (zoo)", "gnmt"}, {"txl", "transformer_xl-8 (zoo)", "transformer_xl"}};
    for (int i = 0; i < 2; i++) {
        if (only && strcmp(only, zoo[i].key)) continue;
        gopt_zoo_spec spec = {0};
        spec.family = zoo[i].family;
        spec.layers = 8;
        gopt_graph *g = NULL;
        if (gopt_zoo_generate(&spec, &g, &err)) {
            fprintf(stderr, "bench_sim: %s\n", err.msg);
            rc = 1;
            continue;
        }
        rc |= bench_graph(zoo[i].label, g, cm, reps, threads, seed);
        gopt_graph_free(g);
    }
    if (!only || !strcmp(only, "dag")) {
        gopt_graph *g = bench_layered_dag(80000, 160000, 12345, "dag_80k", &err);
        if (!g) {
            fprintf(stderr, "bench_sim: %s\n", err.msg);
            rc = 1;
        } else {
            rc |= bench_graph("layered DAG 80k/160k", g, cm, reps, threads, seed);
            gopt_graph_free(g);
        }
    }
    gopt_cost_free(cm);
    gopt_profile_free(p);
    return rc;
}
