/* plan.c: the static part of a step under one set of decisions (rt_internal.h).
 *
 * Contracts fusion groups into tasks exactly as the simulator does (sim/sim.c: a group's
 * representative is its member first in topological order, its priority the largest of its
 * members', its tie rank the representative's; an unfused node's output always leaves its task;
 * a fused member's output leaves it when something outside reads it or nothing does), counts each
 * task's distinct external input tensors, and lists, for each external output, its local consumer
 * tasks and one copy per other consuming device (bytes: the largest edge to that device) with the
 * consumer tasks there, each task once per tensor.
 *
 * Invariants: tasks are numbered in topological order of their representatives; copies are
 * numbered by producer id, each node's in increasing receiving device. Cost: O(N + E) time and memory; the decisions are
 * validated first (gopt_decisions_validate), so every error names the node and the value.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

void rt_plan_destroy(rt_plan *p) {
    void *arrs[] = {p->task, p->ext, p->osize, p->psize, p->hold0, p->lc_ptr, p->lc, p->xo_ptr,
                    p->rep, p->dev, p->prio, p->key, p->pending0, p->alloc, p->mem_ptr, p->mem,
                    p->in_ptr, p->in_node, p->in_xf, p->xf_node, p->xf_src, p->xf_dst, p->xf_bytes, p->xc_ptr,
                    p->xc};
    for (size_t i = 0; i < sizeof arrs / sizeof arrs[0]; i++) free(arrs[i]);
    memset(p, 0, sizeof *p);
}

gopt_status rt_plan_build(const gopt_graph *g, const gopt_decisions *d, int ndev, rt_plan *p, gopt_error *err) {
    memset(p, 0, sizeof *p);
    const gopt_frozen *f = gopt_graph_frozen(g);
    if (!f) return gopt_error_set(err, GOPT_EINVAL, "runtime: graph '%s' is not finalized", gopt_graph_name(g));
    if (ndev < 1 || ndev > GOPT_SIM_MAX_DEVICES)
        return gopt_error_set(err, GOPT_EUNSUP, "runtime: %d devices (1 to %d are handled)", ndev,
                              GOPT_SIM_MAX_DEVICES);
    if (d->n != f->n)
        return gopt_error_set(err, GOPT_EINVAL, "runtime: decisions for %d nodes, graph '%s' has %d", d->n,
                              gopt_graph_name(g), f->n);
    gopt_status st = gopt_decisions_validate(d, g, ndev, err);
    if (st) return st;
    int32_t n = f->n, m = f->m;
    size_t n1 = (size_t)n + 1, m1 = (size_t)m + 1;
    p->n = n;
    p->ndev = ndev;
    int32_t *grep = gopt_malloc(n1 * sizeof(int32_t), err), *stamp = gopt_malloc(n1 * sizeof(int32_t), err);
    int32_t *pair_t = gopt_malloc(m1 * sizeof(int32_t), err), *pair_d = gopt_malloc(m1 * sizeof(int32_t), err);
#define A(field, count) ok &= (p->field = gopt_calloc((count), sizeof *p->field, err)) != NULL
    int ok = grep && stamp && pair_t && pair_d;
    A(task, n1);
    A(ext, n1);
    A(osize, n1);
    A(psize, n1);
    A(hold0, n1);
    A(lc_ptr, n1);
    A(lc, m1);
    A(xo_ptr, n1);
    A(rep, n1);
    A(dev, n1);
    A(prio, n1);
    A(key, n1);
    A(pending0, n1);
    A(alloc, n1);
    A(mem_ptr, n1);
    A(mem, n1);
    A(in_ptr, n1);
    A(in_node, m1);
    A(in_xf, m1);
    A(xf_node, m1);
    A(xf_src, m1);
    A(xf_dst, m1);
    A(xf_bytes, m1);
    A(xc_ptr, m1);
    A(xc, m1);
#undef A
    if (!ok) {
        st = GOPT_ENOMEM;
        goto out;
    }
    for (int32_t v = 0; v < n; v++) {
        grep[v] = -1;
        stamp[v] = -1;
        p->osize[v] = f->op_class[v] == GOPT_OP_CLASS_PARAM ? 0 : (int64_t)ceil(f->out_bytes[v]);
        p->psize[v] = (int64_t)ceil(f->param_bytes[v]);
    }
    for (int32_t i = 0; i < n; i++) { /* topological order: the first member seen is the representative */
        int32_t v = f->topo[i], gv = d->group[v];
        if (gv >= 0 && grep[gv] < 0) grep[gv] = v;
    }
    /* tasks in topological order of their representatives; members in topological order */
    int32_t nt = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t v = f->topo[i], r = d->group[v] >= 0 ? grep[d->group[v]] : v;
        if (r == v) {
            p->rep[nt] = v;
            p->dev[nt] = d->device[v];
            p->prio[nt] = INT32_MIN;
            p->task[v] = nt++;
        } else {
            p->task[v] = p->task[r];
        }
        p->mem_ptr[p->task[v] + 1]++;
    }
    p->ntasks = nt;
    for (int32_t t = 0; t < nt; t++) p->mem_ptr[t + 1] += p->mem_ptr[t];
    {
        int32_t *fill = stamp; /* reused as a cursor, reset below */
        for (int32_t t = 0; t < nt; t++) fill[t] = p->mem_ptr[t];
        for (int32_t i = 0; i < n; i++) {
            int32_t v = f->topo[i], t = p->task[v];
            p->mem[fill[t]++] = v;
            if (d->priority[v] > p->prio[t]) p->prio[t] = d->priority[v];
        }
        for (int32_t v = 0; v < n; v++) stamp[v] = -1;
    }
    for (int32_t t = 0; t < nt; t++) {
        uint32_t up = (uint32_t)p->prio[t] ^ 0x80000000u;
        p->key[t] = ((uint64_t)(~up) << 32) | (uint32_t)f->rank[p->rep[t]];
    }
    /* external outputs, allocations, external inputs */
    int32_t nin = 0;
    for (int32_t t = 0; t < nt; t++) {
        p->in_ptr[t] = nin;
        for (int32_t j = p->mem_ptr[t]; j < p->mem_ptr[t + 1]; j++) {
            int32_t v = p->mem[j];
            int ext = f->out_ptr[v] == f->out_ptr[v + 1];
            for (int32_t e = f->out_ptr[v]; e < f->out_ptr[v + 1] && !ext; e++)
                if (p->task[f->out_dst[e]] != t) ext = 1;
            p->ext[v] = (uint8_t)ext;
            if (ext) p->alloc[t] += p->osize[v];
            for (int32_t e = f->in_ptr[v]; e < f->in_ptr[v + 1]; e++) {
                int32_t u = f->in_src[e];
                if (p->task[u] == t || stamp[u] == t) continue;
                stamp[u] = t;
                p->in_node[nin] = u;
                p->in_xf[nin++] = -1;
            }
        }
        p->pending0[t] = nin - p->in_ptr[t];
    }
    p->in_ptr[nt] = nin;
    for (int32_t v = 0; v < n; v++) stamp[v] = -1; /* now: the last tensor that counted a task */
    /* consumers: local tasks and one copy per other device, each task once per tensor */
    int32_t nlc = 0, nxf = 0, nxc = 0;
    for (int32_t v = 0; v < n; v++) {
        p->lc_ptr[v] = nlc;
        p->xo_ptr[v] = nxf;
        if (!p->ext[v]) continue;
        int32_t t = p->task[v], dv = p->dev[t], np = 0;
        double dbytes[GOPT_SIM_MAX_DEVICES];
        int32_t dcnt[GOPT_SIM_MAX_DEVICES];
        uint64_t dm = 0;
        for (int32_t e = f->out_ptr[v]; e < f->out_ptr[v + 1]; e++) {
            int32_t c2 = p->task[f->out_dst[e]], D = p->dev[c2];
            if (c2 == t) continue;
            double b = f->edge_bytes[f->out_eid[e]];
            if (D != dv) {
                if (!(dm >> D & 1)) {
                    dm |= 1ull << D;
                    dbytes[D] = b;
                    dcnt[D] = 0;
                } else if (b > dbytes[D]) {
                    dbytes[D] = b;
                }
            }
            if (stamp[c2] == v) continue;
            stamp[c2] = v;
            if (D == dv) {
                p->lc[nlc++] = c2;
            } else {
                dcnt[D]++;
                pair_t[np] = c2;
                pair_d[np++] = D;
            }
        }
        int32_t pos[GOPT_SIM_MAX_DEVICES];
        for (uint64_t mm = dm; mm; mm &= mm - 1) {
            int32_t D = __builtin_ctzll(mm);
            p->xf_node[nxf] = v;
            p->xf_src[nxf] = dv;
            p->xf_dst[nxf] = D;
            p->xf_bytes[nxf] = dbytes[D];
            p->xc_ptr[nxf] = nxc;
            pos[D] = nxc;
            nxc += dcnt[D];
            nxf++;
        }
        for (int32_t k = 0; k < np; k++) p->xc[pos[pair_d[k]]++] = pair_t[k];
        p->hold0[v] = (nlc - p->lc_ptr[v]) + (nxf - p->xo_ptr[v]);
    }
    p->nxf = nxf;
    p->xc_ptr[nxf] = nxc;
    p->lc_ptr[n] = nlc;
    p->xo_ptr[n] = nxf;
    /* which copy each remote input reads */
    for (int32_t t = 0; t < nt; t++)
        for (int32_t k = p->in_ptr[t]; k < p->in_ptr[t + 1]; k++) {
            int32_t u = p->in_node[k];
            if (p->dev[p->task[u]] == p->dev[t]) continue;
            for (int32_t x = p->xo_ptr[u]; x < p->xo_ptr[u + 1]; x++)
                if (p->xf_dst[x] == p->dev[t]) p->in_xf[k] = x;
        }
    st = GOPT_OK;
out:
    free(grep);
    free(stamp);
    free(pair_t);
    free(pair_d);
    if (st) rt_plan_destroy(p);
    return st;
}
