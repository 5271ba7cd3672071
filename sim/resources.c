/* resources.c: how devices and links behave, as sim_resource_ops tables.
 *
 * Device: a binary min-heap of ready tasks keyed by (~priority, topological
 * rank) packed in one uint64, so the highest priority runs first and ties go
 * to the task earliest in topological order. Starting a task allocates its
 * external outputs; finishing it releases its inputs, hands each external
 * output to its local consumers and queues one transfer per other consuming
 * device.
 *
 * Link (FIFO): a binary min-heap keyed by (time queued, producer's rank):
 * first in first out, ties at one instant by topological rank. One transfer
 * at a time, each taking gopt_cost_transfer_time (latency + bytes/bandwidth
 * or the link's measured copy table). Starting a transfer allocates the copy
 * on the receiving device; finishing it releases the sender's hold and makes
 * the copy available to the consumers on the receiver.
 *
 * Cost: O(log R) per queue operation, O(in + out degree) per task finish,
 * O(out degree) per transfer arrival.
 */
#include <math.h>

#include "sim_internal.h"

/* ---- device ready heap ------------------------------------------------------ */
static void dev_push(gopt_sim_scratch *s, int32_t dv, int32_t c) {
    uint64_t *h = s->rq + s->rq_off[dv];
    uint64_t k = s->key[c];
    int32_t i = s->rq_len[dv]++;
    while (i > 0) {
        int32_t p = (i - 1) >> 1;
        if (h[p] <= k) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = k;
}

static int32_t dev_next(gopt_sim_scratch *s, int32_t dv) {
    int32_t len = s->rq_len[dv];
    if (len == 0) return -1;
    uint64_t *h = s->rq + s->rq_off[dv];
    uint64_t top = h[0], last = h[--len];
    s->rq_len[dv] = len;
    int32_t i = 0;
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= len) break;
        if (c + 1 < len && h[c + 1] < h[c]) c++;
        if (h[c] >= last) break;
        h[i] = h[c];
        i = c;
    }
    if (len > 0) h[i] = last;
    return s->sim->f->topo[(uint32_t)top];
}

static double dev_start(gopt_sim_scratch *s, int32_t dv, int32_t c) {
    sim_mem_add(s, dv, s->alloc[c]);
    s->start[c] = s->now;
    s->busy_s[dv] += s->dur[c];
    return s->dur[c];
}

/* One holder of tensor u's copy on device dv is done with it. */
static inline void release(gopt_sim_scratch *s, int32_t u, int32_t dv) {
    int32_t nd = s->ndev;
    size_t i = (size_t)u * (size_t)nd + (size_t)dv;
    if (--s->hold[i] == 0)
        s->mem[dv] -= s->d->device[u] == dv ? s->sim->osize[u] : s->xf[s->copy_rec[i]].size;
}

static void link_push(gopt_sim_scratch *s, int32_t l, int32_t x);

static void dev_finish(gopt_sim_scratch *s, int32_t dv, int32_t c) {
    const gopt_frozen *f = s->sim->f;
    const int32_t *dev = s->d->device, *task_of = s->task_of;
    int32_t nd = s->ndev;
    int32_t tag = -2 - c;
    for (int32_t k = s->mem_ptr[c]; k < s->mem_ptr[c + 1]; k++) {
        int32_t v = s->mem_list[k];
        for (int32_t e = f->in_ptr[v]; e < f->in_ptr[v + 1]; e++) {
            int32_t u = f->in_src[e];
            if (task_of[u] == c || s->stamp_u[u] == tag) continue;
            s->stamp_u[u] = tag;
            release(s, u, dv);
        }
    }
    for (int32_t k = s->mem_ptr[c]; k < s->mem_ptr[c + 1]; k++) {
        int32_t v = s->mem_list[k];
        if (!s->ext[v]) continue;
        int32_t nlocal = 0, nx = 0;
        for (int32_t e = f->out_ptr[v]; e < f->out_ptr[v + 1]; e++) {
            int32_t w = f->out_dst[e], c2 = task_of[w];
            if (c2 == c) continue;
            int32_t D = dev[w];
            if (D == dv) {
                if (s->stamp_c[c2] == v) continue;
                s->stamp_c[c2] = v;
                nlocal++;
                if (--s->pending[c2] == 0) {
                    dev_push(s, dv, c2);
                    sim_mark_dirty(s, dv);
                }
            } else {
                double b = f->edge_bytes[f->out_eid[e]];
                if (s->dstamp[D] != v) {
                    s->dstamp[D] = v;
                    s->dbytes[D] = b;
                    s->dlist[nx++] = D;
                } else if (b > s->dbytes[D]) {
                    s->dbytes[D] = b;
                }
            }
        }
        for (int32_t j = 0; j < nx; j++) {
            int32_t D = s->dlist[j];
            int32_t x = s->nxf++;
            sim_xfer *r = &s->xf[x];
            r->node = v;
            r->src = dv;
            r->dst = D;
            r->bytes = s->dbytes[D];
            r->size = (int64_t)ceil(r->bytes);
            r->start = r->end = -1;
            int32_t l = dv * nd + D;
            link_push(s, l, x);
            sim_mark_dirty(s, nd + l);
        }
        size_t hi = (size_t)v * (size_t)nd + (size_t)dv;
        s->hold[hi] = nlocal + nx;
        if (nlocal + nx == 0) s->mem[dv] -= s->sim->osize[v];
    }
    s->tasks_done++;
}

const sim_resource_ops sim_device_ops = {"device", dev_push, dev_next, dev_start, dev_finish};

/* ---- link FIFO ----------------------------------------------------------------- */
static inline int slot_less(const sim_link_slot *a, const sim_link_slot *b) {
    return a->enq < b->enq || (a->enq == b->enq && a->rank < b->rank);
}

static void link_push(gopt_sim_scratch *s, int32_t l, int32_t x) {
    sim_link_slot *h = s->lq + s->lq_off[l];
    sim_link_slot it = {s->now, s->sim->f->rank[s->xf[x].node], x};
    int32_t i = s->lq_len[l]++;
    while (i > 0) {
        int32_t p = (i - 1) >> 1;
        if (!slot_less(&it, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = it;
}

static void link_push_op(gopt_sim_scratch *s, int32_t r, int32_t x) { link_push(s, r - s->ndev, x); }

static int32_t link_next(gopt_sim_scratch *s, int32_t r) {
    int32_t l = r - s->ndev;
    int32_t len = s->lq_len[l];
    if (len == 0) return -1;
    sim_link_slot *h = s->lq + s->lq_off[l];
    int32_t top = h[0].rec;
    sim_link_slot last = h[--len];
    s->lq_len[l] = len;
    int32_t i = 0;
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= len) break;
        if (c + 1 < len && slot_less(&h[c + 1], &h[c])) c++;
        if (!slot_less(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    if (len > 0) h[i] = last;
    return top;
}

static double link_start(gopt_sim_scratch *s, int32_t r, int32_t x) {
    sim_xfer *t = &s->xf[x];
    double dt = gopt_cost_transfer_time(s->sim->cm, t->src, t->dst, t->bytes);
    sim_mem_add(s, t->dst, t->size);
    t->start = s->now;
    t->end = s->now + dt;
    s->sent[t->src] += t->bytes;
    s->total_bytes += t->bytes;
    return dt;
}

static void link_finish(gopt_sim_scratch *s, int32_t r, int32_t x) {
    const gopt_frozen *f = s->sim->f;
    const sim_xfer *t = &s->xf[x];
    int32_t u = t->node, D = t->dst, nd = s->ndev;
    const int32_t *dev = s->d->device;
    release(s, u, t->src);
    int32_t nc = 0;
    for (int32_t e = f->out_ptr[u]; e < f->out_ptr[u + 1]; e++) {
        int32_t w = f->out_dst[e];
        if (dev[w] != D) continue;
        int32_t c2 = s->task_of[w];
        if (s->stamp_c[c2] == u) continue;
        s->stamp_c[c2] = u;
        nc++;
        if (--s->pending[c2] == 0) {
            dev_push(s, D, c2);
            sim_mark_dirty(s, D);
        }
    }
    size_t i = (size_t)u * (size_t)nd + (size_t)D;
    s->copy_rec[i] = x;
    s->hold[i] = nc;
}

const sim_resource_ops sim_link_fifo_ops = {"link-fifo", link_push_op, link_next, link_start, link_finish};
