/* resources.c: how devices and links behave, and the event loop that drives them.
 *
 * Device: a binary min-heap of ready tasks keyed by (~priority, topological
 * rank) packed in one uint64, so the highest priority runs first and ties go
 * to the task earliest in topological order. Starting a task allocates its
 * external outputs; finishing it releases its inputs, hands each external
 * output to its local consumers and queues one transfer per other consuming
 * device. Each transfer record lists its consumer tasks (built in that same
 * pass over the out-edges), and each remote consumer edge learns (xref) which
 * record its consumer will release, so neither an arrival nor an unfused
 * consumer's end walks the producer's edges again.
 *
 * Link (FIFO): an array sorted by (time queued, producer's rank), packed in
 * one uint64 as (instant counter << 32 | rank): first in first out, ties at
 * one instant by topological rank. A new item is appended and moved back
 * only past the items queued at the same instant; the head is taken by
 * advancing an index. One transfer
 * at a time, each taking gopt_cost_transfer_time (latency + bytes/bandwidth
 * or the link's measured copy table). Starting a transfer allocates the copy
 * on the receiving device; finishing it releases the sender's hold and makes
 * the copy available to the consumers on the receiver.
 *
 * Events: a binary heap of 16-byte events (time bits, sequence, resource), at
 * most one per resource, ordered by time alone (one 64-bit comparison); the
 * events of an instant with several are taken out together and handled in
 * sequence order, so the order is (time, sequence) as if both were compared.
 * Both the event heap and the ready heaps end in sentinel items (a key after
 * every real one), so choosing a child needs no bound check. When an instant
 * has a single event (the usual case with real-valued times), the finished
 * resource is offered its next item first (its next event replaces the root),
 * then the resources its end touched, in order, without the dirty list. Frees
 * subtract size & -(count == 0) instead of branching. After each instant the
 * data the next event will read through its edges is prefetched (records when
 * tasks became ready or reached the top of their queue, edge slots when they
 * started): on graphs that do not fit in cache the run is bound by these
 * misses and by mispredicted branches as much as by instructions.
 *
 * Cost: O(log R) per ready-queue operation, O(1) per link-queue operation
 * (plus the same-instant items moved), O(in + out degree) per task finish,
 * O(consumers on the receiver) per transfer arrival.
 */
#include <math.h>
#include <string.h>

#include "sim_internal.h"

/* ---- device ready heap ------------------------------------------------------ */
/* Put `it` in the hole at i and move it up past larger keys. */
static inline void rq_sift_up(sim_rq_item *h, int32_t i, sim_rq_item it) {
    while (i > 0) {
        int32_t p = (i - 1) >> 1;
        if (h[p].key <= it.key) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = it;
}

/* Each device's heap is followed by a sentinel item (key UINT64_MAX, after every real key):
 * a node's second child always exists, so choosing a child needs no bound check. */
void sim_dev_push(gopt_sim_scratch *s, int32_t dv, int32_t c) {
    sim_rq_item *h = s->rq + s->rq_off[dv];
    sim_rq_item it = {s->tp[c].key, c, 0};
    __builtin_prefetch(&s->nc[c]);
    int32_t len = s->rq_len[dv]++;
    rq_sift_up(h, len, it);
    h[len + 1] = (sim_rq_item){UINT64_MAX, -1, 0};
}

/* Bottom-up removal: walk the hole down along the smaller children without
 * comparing against the moved element (a data-independent choice the CPU
 * does with conditional moves), then sift that element up, rarely far. The
 * record of the new top, the device's likely next task, is prefetched: it
 * has not been touched since prepare(), and the device needs it only when
 * the task now starting ends. */
static int32_t dev_next(gopt_sim_scratch *s, int32_t dv) {
    int32_t len = s->rq_len[dv];
    if (len == 0) return -1;
    sim_rq_item *h = s->rq + s->rq_off[dv];
    int32_t top = h[0].c;
    sim_rq_item last = h[--len];
    h[len] = (sim_rq_item){UINT64_MAX, -1, 0};
    s->rq_len[dv] = len;
    int32_t i = 0, c;
    while ((c = 2 * i + 1) < len) {
        c += h[c + 1].key < h[c].key; /* h[len] is the sentinel */
        h[i] = h[c];
        i = c;
    }
    rq_sift_up(h, i, last);
    if (len > 0) __builtin_prefetch(&s->nc[h[0].c]);
    return top;
}

static double dev_start(gopt_sim_scratch *s, int32_t dv, int32_t c) {
    const sim_nc *x = &s->nc[c];
    int64_t alloc = x->osize;
    if (x->mem_first >= 0) {
        alloc = 0;
        const int32_t *ml = s->mem_list + x->mem_first;
        for (int32_t j = 0; j < x->mem_count; j++)
            if (s->nt[ml[j]].ext) alloc += s->nc[ml[j]].osize;
    }
    sim_mem_add(s, dv, alloc);
    /* the task's edge slots are read when it ends */
    __builtin_prefetch(s->sim->f->in_src + x->in_first);
    __builtin_prefetch(s->xref + x->in_first);
    __builtin_prefetch(s->sim->oslot + x->out_first);
    s->nc[c].start = s->now;
    s->busy_s[dv] += x->dur;
    return x->dur;
}

/* One holder of tensor u's copy on device dv is done with it. */
static inline void release(gopt_sim_scratch *s, int32_t u, int32_t udev, int32_t dv) {
    if (udev == dv) {
        sim_th *h = &s->th[u];
        s->mem[dv] -= h->osize & -(int64_t)(--h->hold == 0);
        return;
    }
    const sim_nc *h = &s->nc[u];
    sim_xfer *t;
    if (s->ndev <= 32) { /* u's records are contiguous, in increasing receiving device */
        t = &s->xf[h->xf_first + __builtin_popcount(h->xf_mask & ((1u << dv) - 1u))];
    } else {
        t = &s->xf[h->xf_first];
        while (t->dst != dv) t++;
    }
    s->mem[dv] -= (int64_t)ceil(t->bytes) & -(int64_t)(--t->hold == 0);
}

static void link_push(gopt_sim_scratch *s, int32_t l, int32_t x);

static void dev_finish(gopt_sim_scratch *s, int32_t dv, int32_t c) {
    const int32_t *in_src = s->sim->f->in_src;
    const sim_oslot *oslot = s->sim->oslot;
    const sim_nc *nc = s->nc;
    sim_nt *nt = s->nt;
    sim_tp *tp = s->tp;
    sim_th *th = s->th;
    int32_t nd = s->ndev;
    int32_t tag = -2 - c; /* distinct from the stamps prepare() wrote */
    const sim_nc *x = &s->nc[c];
    int32_t k = x->mem_count;
    const int32_t *ml = x->mem_first >= 0 ? s->mem_list + x->mem_first : &c;
    if (x->mem_first < 0) {
        /* unfused: what each in-edge releases was written by its producer (xref) */
        const int32_t *ins = in_src + x->in_first, *xr = s->xref + x->in_first;
        for (int32_t i = 0, ni = x->in_count; i < ni; i++) {
            int32_t r = xr[i];
            if (r >= 0) {
                sim_xfer *t = &s->xf[r];
                s->mem[dv] -= (int64_t)ceil(t->bytes) & -(int64_t)(--t->hold == 0); /* no branch */
            } else if (r == SIM_XREF_LOCAL) {
                sim_th *h = &th[ins[i]];
                s->mem[dv] -= h->osize & -(int64_t)(--h->hold == 0);
            }
        }
    } else {
        for (int32_t j = 0; j < k; j++) {
            int32_t v = ml[j];
            const int32_t *ins = in_src + nc[v].in_first;
            for (int32_t i = 0, ni = nc[v].in_count; i < ni; i++) {
                int32_t u = ins[i];
                sim_nt y = nt[u];
                if (y.task == c || th[u].stamp_u == tag) continue;
                th[u].stamp_u = tag;
                release(s, u, y.dev, dv);
            }
        }
    }
    for (int32_t j = 0; j < k; j++) {
        int32_t v = ml[j];
        if (!nt[v].ext) continue;
        int32_t nlocal = 0, nx = 0, np = 0;
        uint64_t dm = 0; /* receiving devices */
        const sim_oslot *os = oslot + nc[v].out_first;
        for (int32_t i = 0, no = nc[v].out_count; i < no; i++) {
            sim_nt w = nt[os[i].dst];
            int32_t c2 = w.task;
            if (c2 == c) continue;
            int32_t D = w.dev;
            if (D == dv) {
                sim_tp *t2 = &tp[c2];
                if (t2->stamp_c == v) {
                    s->xref[os[i].islot] = SIM_XREF_SKIP;
                    continue;
                }
                t2->stamp_c = v;
                s->xref[os[i].islot] = SIM_XREF_LOCAL;
                nlocal++;
                if (--t2->pending == 0) sim_dev_push(s, dv, c2); /* dv is offered next by the caller */
            } else {
                double b = os[i].bytes;
                if (s->dstamp[D] != v) {
                    s->dstamp[D] = v;
                    s->dbytes[D] = b;
                    s->dcnt[D] = 0;
                    dm |= 1ull << D;
                    nx++;
                } else if (b > s->dbytes[D]) {
                    s->dbytes[D] = b;
                }
                /* the consumer tasks on D, each once: the arrival walks this list */
                sim_tp *t2 = &tp[c2];
                if (t2->stamp_c == v) {
                    s->xref[os[i].islot] = SIM_XREF_SKIP;
                    continue;
                }
                t2->stamp_c = v;
                s->dcnt[D]++;
                s->cpair[np++] = (sim_pair){c2, D, os[i].islot};
            }
        }
        if (nx) {
            /* one record per receiving device, by increasing device */
            s->nc[v].xf_first = s->nxf;
            s->nc[v].xf_mask = (uint32_t)dm; /* used when ndev <= 32 */
            nt[v].nxf = (uint8_t)(nx < 255 ? nx : 255);
            int32_t first = s->ncons, xf_first = s->nxf;
            uint64_t dm0 = dm;
            for (int32_t i = 0; i < np; i++) /* the record each remote consumer edge will release */
                s->xref[s->cpair[i].islot] = xf_first + __builtin_popcountll(dm0 & ((1ull << s->cpair[i].dev) - 1u));
            do {
                int32_t D = __builtin_ctzll(dm);
                dm &= dm - 1;
                int32_t r = s->nxf++;
                sim_xfer *t = &s->xf[r];
                t->node = v;
                t->src = (int16_t)dv;
                t->dst = (int16_t)D;
                t->hold = s->dcnt[D];
                t->cons_first = s->ncons;
                s->dpos[D] = s->ncons;
                s->ncons += s->dcnt[D];
                t->bytes = s->dbytes[D];
                s->xtime[2 * (size_t)r] = s->xtime[2 * (size_t)r + 1] = -1;
                int32_t l = dv * nd + D;
                link_push(s, l, r);
                sim_mark_dirty(s, nd + l);
            } while (dm);
            if (nx == 1)
                for (int32_t i = 0; i < np; i++) s->cons[first + i] = s->cpair[i].task;
            else
                for (int32_t i = 0; i < np; i++) s->cons[s->dpos[s->cpair[i].dev]++] = s->cpair[i].task;
        }
        th[v].hold = nlocal + nx;
        if (nlocal + nx == 0) s->mem[dv] -= s->nc[v].osize;
    }
    s->tasks_done++;
}


/* ---- link FIFO ----------------------------------------------------------------- */
static void link_push(gopt_sim_scratch *s, int32_t l, int32_t x) {
    sim_link_slot *q = s->lq;
    sim_link_slot it = {((uint64_t)s->instant << 32) | (uint32_t)s->nc[s->xf[x].node].rank, x, 0};
    int32_t i = s->lq_tail[l]++, head = s->lq_head[l];
    /* the queue is sorted; only items queued at this same instant can follow the new one */
    while (i > head && q[i - 1].key > it.key) {
        q[i] = q[i - 1];
        i--;
    }
    q[i] = it;
}

static int32_t link_next(gopt_sim_scratch *s, int32_t r) {
    int32_t l = r - s->ndev;
    int32_t h = s->lq_head[l];
    if (h == s->lq_tail[l]) return -1;
    s->lq_head[l] = h + 1;
    return s->lq[h].rec;
}

static double link_start(gopt_sim_scratch *s, int32_t r, int32_t x) {
    sim_xfer *t = &s->xf[x];
    const gopt_sim *sim = s->sim;
    int32_t l = r - s->ndev;
    double dt = sim->link_plain[l] ? sim->link_lat[l] + t->bytes / sim->link_bw[l]
                                   : gopt_cost_transfer_time(sim->cm, t->src, t->dst, t->bytes);
    sim_mem_add(s, t->dst, (int64_t)ceil(t->bytes));
    s->xtime[2 * (size_t)x] = s->now;
    s->xtime[2 * (size_t)x + 1] = s->now + dt;
    s->sent[t->src] += t->bytes;
    s->total_bytes += t->bytes;
    return dt;
}

/* Returns the receiving device when a consumer became ready there (to be offered), else -1. */
static int32_t link_finish(gopt_sim_scratch *s, int32_t x) {
    const sim_xfer *t = &s->xf[x];
    int32_t u = t->node, D = t->dst, ready = -1;
    sim_tp *tp = s->tp;
    sim_th *h = &s->th[u];
    s->mem[t->src] -= h->osize & -(int64_t)(--h->hold == 0); /* the sender's copy */
    const int32_t *cl = s->cons + t->cons_first;
    for (int32_t i = 0; i < t->hold; i++) {
        int32_t c2 = cl[i];
        if (--tp[c2].pending == 0) {
            sim_dev_push(s, D, c2);
            ready = D;
        }
    }
    return ready;
}


/* ---- event heap and loop ------------------------------------------------------------- */
/* Put e in the hole at i and move it up past later events. */
static inline void ev_sift_up(sim_event *h, int32_t i, sim_event e) {
    while (i > 0) {
        int32_t p = (i - 1) >> 1;
        if (!(e.t < h[p].t)) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = e;
}

/* The heap is followed by two sentinel events (time bits UINT64_MAX, a NaN's, after every real
 * time): a node's second child always exists, and so do the root's children. */
static const sim_event SIM_EV_SENTINEL = {UINT64_MAX, 0, -1};

static inline void ev_push(gopt_sim_scratch *s, sim_event e) {
    int32_t len = s->nev++;
    ev_sift_up(s->ev, len, e);
    s->ev[len + 2] = SIM_EV_SENTINEL;
}

/* Replace the root by e: walk the hole down along the smaller children, then sift e up. */
static inline void ev_replace_top(gopt_sim_scratch *s, sim_event e) {
    sim_event *h = s->ev;
    int32_t i = 0, c, len = s->nev;
    while ((c = 2 * i + 1) < len) {
        c += h[c + 1].t < h[c].t; /* h[len] is a sentinel */
        h[i] = h[c];
        i = c;
    }
    ev_sift_up(h, i, e);
}

/* Bottom-up removal (see dev_next): the last event replaces the root. */
static inline sim_event ev_pop(gopt_sim_scratch *s) {
    sim_event top = s->ev[0], last = s->ev[--s->nev];
    s->ev[s->nev] = SIM_EV_SENTINEL;
    if (s->nev) ev_replace_top(s, last);
    return top;
}

/* Offer idle resource r its next item (allocations happen here only). When root, r's finished
 * event is still the heap's root: its next event replaces it (one sift instead of a removal and
 * an insertion), or it is removed. New events come after the root (a later time, or the same
 * time: times only are compared and a sift moves nothing past an equal time), so the heap
 * stays valid meanwhile. */
static inline __attribute__((always_inline)) void offer_event(gopt_sim_scratch *s, int32_t r, int32_t it,
                                                               double dt, int root) {
    s->busy[r] = 1;
    s->item[r] = it;
    double t = s->now + dt;
    uint64_t tb;
    memcpy(&tb, &t, sizeof tb);
    sim_event e = {tb, s->seq++, r};
    if (root) ev_replace_top(s, e);
    else ev_push(s, e);
}

static inline __attribute__((always_inline)) void offer_dev(gopt_sim_scratch *s, int32_t dv, int root) {
    int32_t it = dev_next(s, dv);
    if (it >= 0) offer_event(s, dv, it, dev_start(s, dv, it), root);
    else if (root) ev_pop(s);
}

static inline __attribute__((always_inline)) void offer_link(gopt_sim_scratch *s, int32_t r, int root) {
    int32_t it = link_next(s, r);
    if (it >= 0) offer_event(s, r, it, link_start(s, r, it), root);
    else if (root) ev_pop(s);
}

static void offer(gopt_sim_scratch *s, int32_t r, int root) {
    if (r < s->ndev) offer_dev(s, r, root);
    else offer_link(s, r, root);
}

/* Offer every marked resource that is idle its next item, in the order of the marks (which
 * orders same-instant events by sequence, hence transfer records). */
static inline void dispatch(gopt_sim_scratch *s) {
    for (int32_t i = 0; i < s->ndirty; i++) {
        int32_t r = s->dirty_list[i];
        s->dirty[r] = 0;
        if (!s->busy[r]) offer(s, r, 0);
    }
    s->ndirty = 0;
}

/* Prefetch what the next event (the heap's root) will read through its edge slots: the
 * state of an ending task's neighbours, or the consumers of an arriving copy. Its slots were
 * prefetched when it started; this overlaps the next level of misses with this event. */
static inline void prefetch_next(const gopt_sim_scratch *s) {
    if (s->nev == 0) return;
    int32_t r = s->ev[0].r, it = s->item[r];
    if (r < s->ndev) {
        const sim_nc *x = &s->nc[it];
        if (x->mem_first >= 0) return;
        const sim_oslot *os = s->sim->oslot + x->out_first;
        for (int32_t i = 0, no = x->out_count < 16 ? x->out_count : 16; i < no; i++) __builtin_prefetch(&s->nt[os[i].dst]);
        const int32_t *ins = s->sim->f->in_src + x->in_first, *xr = s->xref + x->in_first;
        for (int32_t i = 0, ni = x->in_count < 16 ? x->in_count : 16; i < ni; i++) {
            if (xr[i] >= 0) __builtin_prefetch(&s->xf[xr[i]]);
            else if (xr[i] == SIM_XREF_LOCAL) __builtin_prefetch(&s->th[ins[i]]);
        }
    } else {
        const sim_xfer *t = &s->xf[it];
        __builtin_prefetch(&s->th[t->node]);
        const int32_t *cl = s->cons + t->cons_first;
        for (int32_t i = 0, nc = t->hold < 16 ? t->hold : 16; i < nc; i++) __builtin_prefetch(&s->tp[cl[i]]);
    }
}

/* Run until no event is left: at each instant, handle every event of that instant (releases,
 * readiness, queued transfers: effects that commute), then dispatch. */
void sim_event_loop(gopt_sim_scratch *s) {
    int32_t nd = s->ndev;
    dispatch(s);
    while (s->nev > 0) {
        sim_event *h = s->ev;
        uint64_t tb = h[0].t;
        double t;
        memcpy(&t, &tb, sizeof t);
        if (t != s->now) s->instant++;
        s->now = t;
        /* the usual case: the root is the only event of this instant (another one would be a
         * child of the root: times only are compared). The resources to offer are the finished
         * one first, then those its end marked, in order (what dispatch() would do, without the
         * marks where they are not needed) */
        if (h[1].t != tb && h[2].t != tb) { /* sentinels where the heap is smaller */
            int32_t r = h[0].r;
            s->busy[r] = 0;
            if (r < nd) {
                dev_finish(s, r, s->item[r]); /* marks the links it queued on */
                offer_dev(s, r, 1);
                for (int32_t i = 0; i < s->ndirty; i++) {
                    int32_t l = s->dirty_list[i];
                    s->dirty[l] = 0;
                    if (!s->busy[l]) offer_link(s, l, 0);
                }
                s->ndirty = 0;
            } else {
                int32_t D = link_finish(s, s->item[r]);
                offer_link(s, r, 1);
                if (D >= 0 && !s->busy[D]) offer_dev(s, D, 0);
            }
            prefetch_next(s);
            continue;
        }
        /* take the instant's events out, then handle them in sequence order (a handled event
         * adds none: new events come from dispatch) */
        int32_t k = 0;
        while (s->nev > 0 && s->ev[0].t == tb) {
            sim_event e = ev_pop(s);
            int32_t j = k++;
            while (j > 0 && s->tie[j - 1].seq > e.seq) {
                s->tie[j] = s->tie[j - 1];
                j--;
            }
            s->tie[j] = e;
        }
        for (int32_t j = 0; j < k; j++) {
            int32_t r = s->tie[j].r;
            s->busy[r] = 0;
            sim_mark_dirty(s, r);
            if (r < nd) {
                dev_finish(s, r, s->item[r]);
            } else {
                int32_t D = link_finish(s, s->item[r]);
                if (D >= 0) sim_mark_dirty(s, D);
            }
        }
        dispatch(s);
        prefetch_next(s);
    }
}
