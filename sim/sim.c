/* sim.c: preparing a simulator, its scratch, and one run.
 *
 * A run has two parts. prepare(): contract fusion groups into tasks (the
 * representative of a task is its member first in topological order), count
 * each task's distinct external input tensors, its kernel time, the bytes
 * it allocates, its key in the ready queue, and size every queue; O(N + E).
 * Then the event loop: at each instant, every event of that instant is
 * handled (releases, readiness, queued transfers: effects that commute), then
 * every resource touched is offered its next item. Only frees happen while
 * events are handled and only allocations while starting items, so the peak
 * memory does not depend on the order of same-instant events. There is at most
 * one event per resource, each in its own slot of the event selection
 * (ndev^2 slots); the loop is in event_loop.inc, included by resources.c.
 *
 * Invariants: no allocation after gopt_sim_scratch_create; every array of the
 * scratch that a run reads before writing is reset by prepare(). Byte counts
 * are whole bytes in int64: a graph holds at most 2^60 bytes of outputs,
 * parameters and edges in all, each at most 2^50 (gopt_graph.h), so a device's
 * parameters + outputs + received copies stay below 2^60 + 2^33 and every
 * ceil() cast is in range; with the profile bounds every time is finite.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

gopt_status gopt_sim_create(const gopt_graph *g, const gopt_costmodel *cm, gopt_sim **out, gopt_error *err) {
    *out = NULL;
    const gopt_frozen *f = gopt_graph_frozen(g);
    if (!f) return gopt_error_set(err, GOPT_EINVAL, "sim: graph '%s' is not finalized", gopt_graph_name(g));
    int nd = gopt_cost_num_devices(cm);
    if (nd < 1 || nd > GOPT_SIM_MAX_DEVICES)
        return gopt_error_set(err, GOPT_EUNSUP, "sim: %d devices (the simulator handles 1 to %d)", nd,
                              GOPT_SIM_MAX_DEVICES);
    gopt_sim *sim = gopt_calloc(1, sizeof *sim, err);
    if (!sim) return GOPT_ENOMEM;
    sim->g = g;
    sim->f = f;
    sim->cm = cm;
    sim->ndev = nd;
    gopt_status st = gopt_cost_table_build(cm, g, &sim->table, err);
    if (st != GOPT_OK) {
        free(sim);
        return st;
    }
    size_t n = (size_t)f->n;
    /* finite by the bounds of graphs and profiles; an infinite kernel would never end (an event
     * at +inf is "no event") and surface as a deadlock, so name it here instead */
    for (size_t i = 0; i < n * (size_t)nd; i++)
        if (!(sim->table.time[i] >= 0 && sim->table.time[i] < HUGE_VAL)) {
            st = gopt_error_set(err, GOPT_EINVAL, "sim: node '%s': kernel time %g s on device %d is not finite",
                                gopt_graph_node_name(g, (int32_t)(i / (size_t)nd)), sim->table.time[i],
                                (int)(i % (size_t)nd));
            gopt_cost_table_destroy(&sim->table);
            free(sim);
            return st;
        }
    sim->osize = gopt_malloc((n ? n : 1) * sizeof(int64_t), err);
    sim->psize = gopt_malloc((n ? n : 1) * sizeof(int64_t), err);
    size_t m = (size_t)f->m;
    sim->oslot = gopt_calloc(m ? m : 1, sizeof *sim->oslot, err);
    sim->in_slot_bytes = gopt_malloc((m ? m : 1) * sizeof(double), err);
    sim->nin = gopt_malloc((n ? n : 1) * sizeof(int32_t), err);
    if (!sim->osize || !sim->psize || !sim->oslot || !sim->in_slot_bytes || !sim->nin) {
        gopt_sim_free(sim);
        return GOPT_ENOMEM;
    }
    for (size_t v = 0; v < n; v++) {
        sim->osize[v] = f->op_class[v] == GOPT_OP_CLASS_PARAM ? 0 : (int64_t)ceil(f->out_bytes[v]);
        sim->psize[v] = (int64_t)ceil(f->param_bytes[v]);
    }
    /* distinct producers: a multi-edge delivers one tensor */
    int32_t *last = gopt_malloc((n ? n : 1) * sizeof(int32_t), err);
    if (!last) {
        gopt_sim_free(sim);
        return GOPT_ENOMEM;
    }
    for (size_t v = 0; v < n; v++) last[v] = -1;
    for (int32_t v = 0; v < f->n; v++) {
        int32_t c = 0;
        for (int32_t e = f->in_ptr[v]; e < f->in_ptr[v + 1]; e++)
            if (last[f->in_src[e]] != v) {
                last[f->in_src[e]] = v;
                c++;
            }
        sim->nin[v] = c;
    }
    free(last);
    int32_t *islot = gopt_malloc((m ? m : 1) * sizeof(int32_t), err); /* edge id -> in-edge slot */
    if (!islot) {
        gopt_sim_free(sim);
        return GOPT_ENOMEM;
    }
    for (size_t k = 0; k < m; k++) islot[f->in_eid[k]] = (int32_t)k;
    for (size_t k = 0; k < m; k++) {
        sim->oslot[k].bytes = f->edge_bytes[f->out_eid[k]];
        sim->oslot[k].dst = f->out_dst[k];
        sim->oslot[k].islot = islot[f->out_eid[k]];
    }
    for (int32_t v = 0; v < f->n; v++)
        for (int32_t e = f->in_ptr[v]; e < f->in_ptr[v + 1]; e++) sim->in_slot_bytes[e] = gopt_cost_read_bytes(f, v, e);
    free(islot);
    for (int d = 0; d < nd; d++) sim->capacity[d] = gopt_cost_device_memory(cm, d);
    /* a shared memory bus: each device's bandwidth alone as a fraction of the bus's (at most 1:
     * a bus is never slower than one device on it alone) */
    double bus = gopt_profile_shared_bandwidth(gopt_cost_profile(cm));
    sim->shared_bus = bus > 0 && nd > 1;
    for (int d = 0; d < nd; d++) {
        double r = bus > 0 ? sim->table.mem_bw[d] / bus : 0;
        sim->bus_share[d] = r < 1 ? r : 1;
    }
    for (int a = 0; a < nd; a++)
        for (int b = 0; b < nd; b++) {
            int l = a * nd + b;
            sim->link_lat[l] = 0;
            sim->link_bw[l] = 1;
            sim->link_plain[l] = (uint8_t)gopt_cost_link_linear(cm, a, b, &sim->link_lat[l], &sim->link_bw[l]);
        }
    *out = sim;
    return GOPT_OK;
}

void gopt_sim_free(gopt_sim *sim) {
    if (!sim) return;
    gopt_cost_table_destroy(&sim->table);
    free(sim->osize);
    free(sim->psize);
    free(sim->oslot);
    free(sim->in_slot_bytes);
    free(sim->nin);
    free(sim);
}

int gopt_sim_num_devices(const gopt_sim *sim) { return sim->ndev; }
const gopt_graph *gopt_sim_graph(const gopt_sim *sim) { return sim->g; }
const gopt_cost_table *gopt_sim_cost_table(const gopt_sim *sim) { return &sim->table; }

void gopt_sim_scratch_free(gopt_sim_scratch *s) {
    if (!s) return;
    free(s->nt);
    free(s->tp);
    free(s->th);
    free(s->nc);
    free(s->grp_rep);
    free(s->mem_list);
    free(s->plist);
    free(s->rq);
    free(s->rq_off);
    free(s->rq_len);
    free(s->lq);
    free(s->lq_head);
    free(s->lq_tail);
    free(s->xf);
    free(s->xtime);
    free(s->cons);
    free(s->cpair);
    free(s->xref);
    free(s->evt);
    free(s->evseq);
    free(s->slot_res);
    free(s->tie);
    free(s->item);
    free(s->busy);
    free(s->dirty);
    free(s->dirty_list);
    free(s->memlog);
    free(s);
}

gopt_status gopt_sim_scratch_record_memory(gopt_sim_scratch *s, int on, gopt_error *err) {
    free(s->memlog);
    s->memlog = NULL;
    s->nmemlog = s->memlog_cap = 0;
    if (!on) return GOPT_OK;
    /* entries per run: the devices' starting values, then one per kernel start and end (at most
     * N each) and per transfer start and end (at most E each, one transfer per edge at most) */
    int64_t cap = 2 * (int64_t)s->n + 2 * (int64_t)s->m + s->ndev;
    s->memlog = gopt_malloc((size_t)cap * sizeof *s->memlog, err);
    if (!s->memlog) return GOPT_ENOMEM;
    s->memlog_cap = cap;
    return GOPT_OK;
}

int64_t gopt_sim_memory_samples(const gopt_sim_scratch *s) { return s->memlog ? s->nmemlog : 0; }

void gopt_sim_memory_sample(const gopt_sim_scratch *s, int64_t i, double *t, int *device, int64_t *bytes) {
    const sim_memrec *r = &s->memlog[i];
    *t = r->t;
    *device = r->dev;
    *bytes = r->bytes;
}

/* Zeroed memory in whole cache lines of its own: the scratches of a batch's threads write their
 * small arrays (busy flags, dirty lists, per-device sums) on every event, and must not share a
 * line with each other's (false sharing). */
static void *alloc_lines(size_t count, size_t size, gopt_error *err) {
    size_t want = count * size, bytes = want ? (want + 63) & ~(size_t)63 : 64;
    void *p = aligned_alloc(64, bytes);
    if (!p) {
        gopt_error_set(err, GOPT_ENOMEM, "sim: out of memory (%zu bytes)", bytes);
        return NULL;
    }
    return memset(p, 0, bytes);
}

gopt_status gopt_sim_scratch_create(const gopt_sim *sim, gopt_sim_scratch **out, gopt_error *err) {
    *out = NULL;
    gopt_sim_scratch *s = alloc_lines(1, sizeof *s, err);
    if (!s) return GOPT_ENOMEM;
    s->sim = sim;
    s->n = sim->f->n;
    s->m = sim->f->m;
    s->ndev = sim->ndev;
    s->nres = s->ndev + s->ndev * s->ndev;
    size_t n = (size_t)s->n + 1, m = (size_t)s->m + 1, nd = (size_t)s->ndev, nr = (size_t)s->nres;
    int ok = 1;
#define ALLOC(field, count) ok &= (s->field = alloc_lines((count), sizeof *s->field, err)) != NULL
    ALLOC(nt, n);
    ALLOC(tp, n);
    ALLOC(th, n);
    ALLOC(nc, n); /* one node per cache line */
    ALLOC(grp_rep, n);
    ALLOC(mem_list, n);
    ALLOC(plist, 2 * n);
    ALLOC(rq, n + nd); /* each device's heap, then its sentinel */
    ALLOC(rq_off, nd);
    ALLOC(rq_len, nd);
    ALLOC(lq, n * (nd > 1 ? nd - 1 : 1));
    ALLOC(lq_head, nd * nd);
    ALLOC(lq_tail, nd * nd);
    ALLOC(xf, m);
    ALLOC(xtime, 2 * m);
    ALLOC(cons, m);
    ALLOC(cpair, m);
    ALLOC(xref, m);
    ALLOC(evseq, nd * nd);
    ALLOC(slot_res, nd * nd);
    ALLOC(tie, nr);
    ALLOC(item, nr);
    ALLOC(busy, nr);
    ALLOC(dirty, nr);
    ALLOC(dirty_list, nr);
#undef ALLOC
    /* the event selection's levels: ndev^2 slots, then one minimum per block of 8, each level
     * padded to a multiple of 8, until one block of 8 */
    size_t ev_len = 0, lv_len = (nd * nd + 7) & ~(size_t)7;
    for (s->ev_nlev = 0;; lv_len = ((lv_len / 8) + 7) & ~(size_t)7) {
        s->ev_off[s->ev_nlev++] = (int32_t)ev_len;
        ev_len += lv_len;
        if (lv_len == 8) break;
    }
    ok &= (s->evt = alloc_lines(ev_len, sizeof(double), err)) != NULL;
    s->ev_len = (int32_t)ev_len;
    if (!ok) {
        gopt_sim_scratch_free(s);
        return GOPT_ENOMEM;
    }
    for (size_t k = 0; k < nd * nd; k++) s->slot_res[k] = -1;
    for (size_t r = 0; r < nr; r++) {
        size_t k = r < nd ? r * (nd + 1) : r - nd;
        if (r < nd || (r - nd) / nd != (r - nd) % nd) s->slot_res[k] = (int32_t)r;
    }
    const gopt_frozen *f = sim->f;
    for (int32_t v = 0; v < s->n; v++) {
        sim_nc *x = &s->nc[v];
        x->in_first = f->in_ptr[v];
        x->in_count = f->in_ptr[v + 1] - f->in_ptr[v];
        x->out_first = f->out_ptr[v];
        x->out_count = f->out_ptr[v + 1] - f->out_ptr[v];
        x->rank = f->rank[v];
        x->start = -1;
        x->osize = sim->osize[v];
        s->th[v].osize = sim->osize[v];
        s->grp_rep[v] = -1;
        s->nt[v].task = v;
    }
    *out = s;
    return GOPT_OK;
}

/* ---- prepare ---------------------------------------------------------------------- */
static gopt_status bad_node(const gopt_sim *sim, gopt_sim_scratch *s, gopt_error *err, int32_t upto, const char *fmt,
                            int32_t v, int32_t value, int32_t lo, int32_t hi) {
    /* leave grp_rep all -1 for the next run */
    for (int32_t u = 0; u < upto; u++)
        if (s->d->group[u] >= 0 && s->d->group[u] < s->n) s->grp_rep[s->d->group[u]] = -1;
    return gopt_error_set(err, GOPT_EINVAL, fmt, gopt_graph_node_name(sim->g, v), value, lo, hi);
}

static gopt_status prepare(const gopt_sim *sim, const gopt_decisions *d, gopt_sim_scratch *s, gopt_error *err) {
    const gopt_frozen *f = sim->f;
    const gopt_cost_table *tab = &sim->table;
    int32_t n = f->n, nd = sim->ndev;
    const int32_t *dev = d->device, *grp = d->group, *rank = f->rank;
    if (d->n != n)
        return gopt_error_set(err, GOPT_EINVAL, "sim: decisions for %d nodes, graph '%s' has %d", d->n,
                              gopt_graph_name(sim->g), n);
    sim_nt *nt = s->nt;
    sim_tp *tp = s->tp;
    sim_th *th = s->th;
    sim_nc *nc = s->nc;
    int32_t *grp_rep = s->grp_rep;
    /* pass 1, id order, every node as an unfused task: device, inputs to wait for (distinct
     * producers), kernel time, ready key; fusion group representatives (first in topological order) */
    int32_t grouped = 0, dcount[GOPT_SIM_MAX_DEVICES], ncount[GOPT_SIM_MAX_DEVICES];
    int32_t *glist = s->plist, *zlist = s->plist + n, nz = 0, nf = 0; /* fused nodes; nodes without inputs */
    for (int32_t dd = 0; dd < nd; dd++) {
        dcount[dd] = ncount[dd] = 0;
        s->mem[dd] = 0;
        s->dstamp[dd] = -1;
    }
    const double *time = tab->time;
    for (int32_t v = 0; v < n; v++) {
        int32_t dv = dev[v], gv = grp[v];
        if (dv < 0 || dv >= nd) return bad_node(sim, s, err, v, "sim: node '%s': device %d is not in %d..%d", v, dv, 0, nd - 1);
        if (gv < -1 || gv >= n)
            return bad_node(sim, s, err, v, "sim: node '%s': fusion group %d is not in %d..%d", v, gv, -1, n - 1);
        nt[v] = (sim_nt){v, (int16_t)dv, 1, 0};
        uint32_t up = (uint32_t)d->priority[v] ^ 0x80000000u;
        tp[v] = (sim_tp){sim->nin[v], -1, ((uint64_t)(~up) << 32) | (uint32_t)rank[v]};
        th[v].stamp_u = -1;
        s->nc[v].start = -1;
        sim_nc *x = &nc[v];
        x->mem_first = -1;
        x->mem_count = 1;
        x->dur = time[(size_t)v * (size_t)nd + (size_t)dv];
        x->mem_s = (float)tab->memory[(size_t)v * (size_t)nd + (size_t)dv];
        s->mem[dv] += sim->psize[v];
        ncount[dv]++;
        if (sim->nin[v] == 0) zlist[nz++] = v;
        if (gv >= 0) {
            glist[grouped++] = v;
            int32_t r = grp_rep[gv];
            if (r < 0 || rank[v] < rank[r]) grp_rep[gv] = v;
        }
    }
    int32_t ntasks = n;
    for (int32_t dd = 0; dd < nd; dd++) dcount[dd] = ncount[dd]; /* tasks per device */
    /* pass 2 (fused nodes only, from the list pass 1 made, in id order): tasks, member lists
     * (each sorted by rank), then each group's inputs, outputs leaving it, priority (max),
     * kernel time (gopt_cost_group_time); the groups that wait for nothing (flist) */
    if (grouped) {
        for (int32_t gi = 0; gi < grouped; gi++) {
            int32_t v = glist[gi];
            int32_t gv = grp[v];
            int32_t r = grp_rep[gv];
            if (dev[r] != dev[v]) {
                gopt_error_set(err, GOPT_EINVAL,
                               "sim: node '%s': device %d differs from device %d of node '%s' in fusion group %d",
                               gopt_graph_node_name(sim->g, v), dev[v], dev[r], gopt_graph_node_name(sim->g, r), gv);
                for (int32_t u = 0; u < n; u++)
                    if (grp[u] >= 0) grp_rep[grp[u]] = -1;
                return GOPT_EINVAL;
            }
            nt[v].task = r;
            if (v != r) {
                nc[r].mem_count++;
                ntasks--;
                dcount[dev[v]]--;
            }
        }
        int32_t off = 0;
        for (int32_t gi = 0; gi < grouped; gi++) {
            int32_t v = glist[gi];
            if (nt[v].task == v) {
                nc[v].mem_first = off;
                off += nc[v].mem_count;
                nc[v].mem_count = 0;
            }
        }
        for (int32_t gi = 0; gi < grouped; gi++) {
            int32_t v = glist[gi];
            sim_nc *r = &nc[nt[v].task];
            int32_t *ml = s->mem_list + r->mem_first;
            int32_t k = r->mem_count++;
            while (k > 0 && rank[ml[k - 1]] > rank[v]) { /* insertion by rank: groups are small */
                ml[k] = ml[k - 1];
                k--;
            }
            ml[k] = v;
        }
        int32_t *flist = glist; /* written behind the reading index */
        for (int32_t gi = 0; gi < grouped; gi++) {
            int32_t c = glist[gi];
            grp_rep[grp[c]] = -1;
            if (nt[c].task != c || nc[c].mem_count < 2) continue;
            int32_t dc = nt[c].dev, k = nc[c].mem_count;
            const int32_t *ml = s->mem_list + nc[c].mem_first;
            int32_t prio = INT32_MIN, pending = 0;
            double ext_bytes = 0;
            for (int32_t j = 0; j < k; j++) {
                int32_t v = ml[j];
                /* the memory pass moves the memory-bound members' external bytes; a member that
                 * keeps its kernel (gemm, conv) reads and writes its own in its time */
                double pass = tab->heavy[v] ? 0.0 : 1.0;
                if (d->priority[v] > prio) prio = d->priority[v];
                for (int32_t e = f->in_ptr[v]; e < f->in_ptr[v + 1]; e++) {
                    int32_t u = f->in_src[e];
                    if (nt[u].task == c) continue;
                    ext_bytes += pass * sim->in_slot_bytes[e];
                    if (th[u].stamp_u != c) {
                        th[u].stamp_u = c;
                        pending++;
                    }
                }
                int ext = f->out_ptr[v] == f->out_ptr[v + 1];
                for (int32_t e = f->out_ptr[v]; e < f->out_ptr[v + 1] && !ext; e++)
                    if (nt[f->out_dst[e]].task != c) ext = 1;
                nt[v].ext = (uint8_t)ext;
                if (ext) ext_bytes += pass * f->out_bytes[v];
            }
            tp[c].pending = pending;
            nc[c].dur = gopt_cost_group_time(tab, dc, ml, k, ext_bytes);
            nc[c].mem_s = (float)(ext_bytes / tab->mem_bw[dc]);
            uint32_t up = (uint32_t)prio ^ 0x80000000u;
            tp[c].key = ((uint64_t)(~up) << 32) | (uint32_t)rank[c];
            if (pending == 0) flist[nf++] = c;
        }
        /* stamp_u now holds task ids (>= 0) on some producers: harmless, the run's tags are < 0 */
    }
    s->ntasks = ntasks;
    /* carve the queues */
    int32_t off = 0;
    for (int32_t dd = 0; dd < nd; dd++) {
        s->rq_off[dd] = off;
        s->rq_len[dd] = 0;
        s->rq[off] = (sim_rq_item){UINT64_MAX, -1, 0}; /* sentinel */
        off += dcount[dd] + 1;
        s->peak[dd] = s->mem[dd];
        s->peak_t[dd] = 0;
        s->busy_s[dd] = 0;
        s->hclock[dd] = 0;
        s->dstart[dd] = s->dend[dd] = -1;
        s->ddraw[dd] = 0;
        s->sent[dd] = 0;
        s->dstamp[dd] = -1;
    }
    off = 0;
    for (int32_t l = 0; l < nd * nd; l++) {
        s->lq_head[l] = s->lq_tail[l] = off;
        if (l / nd != l % nd) off += ncount[l / nd];
    }
    for (int32_t r = 0; r < s->nres; r++) s->busy[r] = s->dirty[r] = 0;
    s->ndirty = 0;
    for (int32_t i = 0; i < s->ev_len; i++) s->evt[i] = HUGE_VAL; /* no event */
    s->seq = 0;
    s->nxf = 0;
    s->ncons = 0;
    s->total_bytes = 0;
    s->nb_t = HUGE_VAL;
    s->now = 0;
    s->instant = 0;
    s->tasks_done = 0;
    /* the tasks that wait for nothing, in id order: unfused nodes without inputs (zlist, less
     * the fused ones) merged with the groups that wait for nothing (flist) */
    for (int32_t i = 0, j = 0; i < nz || j < nf;) {
        int32_t c;
        if (j == nf || (i < nz && zlist[i] < glist[j])) {
            c = zlist[i++];
            if (nt[c].task != c || tp[c].pending != 0) continue;
        } else {
            c = glist[j++];
            if (i < nz && zlist[i] == c) i++;
        }
        sim_dev_push(s, nt[c].dev, c);
        sim_mark_dirty(s, nt[c].dev);
    }
    return GOPT_OK;
}

gopt_status gopt_sim_run(const gopt_sim *sim, const gopt_decisions *d, gopt_sim_result *res, gopt_sim_scratch *s,
                         gopt_error *err) {
    if (s->sim != sim) return gopt_error_set(err, GOPT_EINVAL, "sim: scratch was created for another simulator");
    s->d = d;
    s->nmemlog = 0;
    gopt_status st = prepare(sim, d, s, err);
    if (st != GOPT_OK) {
        s->ntasks = s->tasks_done = 0;
        s->nxf = 0;
        return st;
    }
    for (int dd = 0; dd < sim->ndev; dd++) sim_mem_log(s, dd); /* the parameters, at time 0 */
    sim_event_loop(s);
    if (s->tasks_done != s->ntasks) {
        const gopt_frozen *f = sim->f;
        int32_t stuck = -1;
        for (int32_t i = 0; i < f->n && stuck < 0; i++) {
            int32_t v = f->topo[i];
            if (s->nt[v].task == v && s->nc[v].start < 0) stuck = v;
        }
        return gopt_error_set(err, GOPT_EINVAL,
                              "sim: deadlock: %d of %d kernels never became ready (first: node '%s'): the decisions "
                              "were not validated and a fusion group's contraction makes a cycle "
                              "(gopt_decisions_validate refuses such decisions)",
                              s->ntasks - s->tasks_done, s->ntasks,
                              stuck >= 0 ? gopt_graph_node_name(sim->g, stuck) : "?");
    }
    memset(res, 0, sizeof *res);
    res->ndev = sim->ndev;
    res->step_time_s = s->now;
    res->tasks = s->ntasks;
    res->transfers = s->nxf;
    res->transferred_bytes = s->total_bytes;
    res->oom_device = -1;
    for (int dd = 0; dd < sim->ndev; dd++) {
        res->busy_s[dd] = s->busy_s[dd];
        res->peak_memory_bytes[dd] = s->peak[dd];
        res->peak_time_s[dd] = s->peak_t[dd];
        res->capacity_bytes[dd] = sim->capacity[dd];
        res->sent_bytes[dd] = s->sent[dd];
        double excess = (double)s->peak[dd] - sim->capacity[dd];
        if (excess > 0 && excess > res->oom_excess_bytes) {
            res->oom = 1;
            res->oom_device = dd;
            res->oom_excess_bytes = excess;
        }
    }
    return GOPT_OK;
}

/* ---- the last run's timeline ---------------------------------------------------------------- */
double gopt_sim_node_start(const gopt_sim_scratch *s, int32_t v) { return s->nc[s->nt[v].task].start; }

double gopt_sim_node_end(const gopt_sim_scratch *s, int32_t v) {
    int32_t c = s->nt[v].task;
    return s->nc[c].start < 0 ? -1 : s->nc[c].start + s->nc[c].dur;
}

int32_t gopt_sim_num_transfers(const gopt_sim_scratch *s) { return s->nxf; }

void gopt_sim_transfer_get(const gopt_sim_scratch *s, int32_t i, gopt_sim_transfer *out) {
    const sim_xfer *x = &s->xf[i];
    out->node = x->node;
    out->src = x->src;
    out->dst = x->dst;
    out->bytes = x->bytes;
    out->start = s->xtime[2 * (size_t)i];
    out->end = s->xtime[2 * (size_t)i + 1];
}
