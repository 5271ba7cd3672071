/* memory.c: the baselines' memory model (gopt_baselines.h) and the tracker
 * the placers use to keep it while they move units.
 *
 * A device holds: the parameter bytes of its nodes; act_factor x the output
 * bytes of its forward-phase and phase-less non-parameter nodes (activations
 * live until the backward pass); and one received copy of every long-lived
 * tensor (parameters, forward and phase-less outputs) that a backward,
 * optimizer or phase-less node on it reads from another device (the copy
 * then lives until the backward pass; bytes: the tensor's largest edge).
 * Backward and optimizer outputs, copies of them, and copies read only by
 * forward nodes are transient and not counted.
 *
 * The tracker keeps, per (producer, device), how many of the producer's
 * consumers sit there, so moving a node updates every device's total in
 * O(degree + ndev). Building it is O(N ndev + E).
 */
#include <stdlib.h>
#include <string.h>

#include "bl_internal.h"

double gopt_bl_node_memory(const gopt_bl_problem *p, int32_t v) {
    const gopt_frozen *f = gopt_graph_frozen(p->graph);
    double act = p->opt.act_factor > 0 ? p->opt.act_factor : 1.0;
    double m = f->param_bytes[v];
    int ph = f->phase[v];
    if (f->op_class[v] != GOPT_OP_CLASS_PARAM && (ph == GOPT_PHASE_FWD || ph == GOPT_PHASE_NONE))
        m += act * f->out_bytes[v];
    return m;
}

double gopt_bl_device_capacity(const gopt_bl_problem *p, int dev) {
    double frac = p->opt.mem_fraction > 0 ? p->opt.mem_fraction : 1.0;
    double cap = frac * gopt_cost_device_memory(p->cm, dev);
    if (dev < GOPT_SIM_MAX_DEVICES && p->opt.dev_cap[dev] > 0 && p->opt.dev_cap[dev] < cap) cap = p->opt.dev_cap[dev];
    return cap;
}

/* Whether consumer v keeps a received copy alive into the backward pass. */
static int keeps(const gopt_frozen *f, int32_t v) {
    int ph = f->phase[v];
    return ph != GOPT_PHASE_FWD;
}

int bl_mem_long_lived(const gopt_frozen *f, int32_t v) {
    int ph = f->phase[v];
    return f->op_class[v] == GOPT_OP_CLASS_PARAM || ph == GOPT_PHASE_FWD || ph == GOPT_PHASE_NONE;
}

gopt_status bl_mem_init(bl_mem *m, const gopt_bl_problem *p, int32_t *device, gopt_error *err) {
    memset(m, 0, sizeof *m);
    const gopt_frozen *f = gopt_graph_frozen(p->graph);
    int32_t n = f->n;
    int nd = p->ndev;
    m->p = p;
    m->f = f;
    m->nd = nd;
    m->device = device;
    m->cnt = gopt_calloc((size_t)n * (size_t)nd + 1, sizeof *m->cnt, err);
    m->copy = gopt_calloc((size_t)n + 1, sizeof *m->copy, err);
    m->used = gopt_calloc((size_t)nd, sizeof *m->used, err);
    m->cap = gopt_calloc((size_t)nd, sizeof *m->cap, err);
    if (!m->cnt || !m->copy || !m->used || !m->cap) {
        bl_mem_destroy(m);
        return GOPT_ENOMEM;
    }
    for (int k = 0; k < nd; k++) m->cap[k] = gopt_bl_device_capacity(p, k);
    for (int32_t v = 0; v < n; v++) {
        if (!bl_mem_long_lived(f, v)) continue;
        for (int32_t e = f->out_ptr[v]; e < f->out_ptr[v + 1]; e++)
            if (f->edge_bytes[f->out_eid[e]] > m->copy[v]) m->copy[v] = f->edge_bytes[f->out_eid[e]];
    }
    for (int32_t v = 0; v < n; v++) {
        if (device[v] < 0) continue;
        m->used[device[v]] += gopt_bl_node_memory(p, v);
        if (keeps(f, v))
            for (int32_t e = f->in_ptr[v]; e < f->in_ptr[v + 1]; e++) bl_mem_add_consumer(m, f->in_src[e], device[v]);
    }
    return GOPT_OK;
}

void bl_mem_destroy(bl_mem *m) {
    free(m->cnt);
    free(m->copy);
    free(m->used);
    free(m->cap);
    memset(m, 0, sizeof *m);
}

void bl_mem_add_consumer(bl_mem *m, int32_t q, int dev) {
    int32_t *c = &m->cnt[(size_t)q * m->nd + dev];
    if ((*c)++ == 0 && m->device[q] >= 0 && m->device[q] != dev) m->used[dev] += m->copy[q];
}

static void del_consumer(bl_mem *m, int32_t q, int dev) {
    int32_t *c = &m->cnt[(size_t)q * m->nd + dev];
    if (--(*c) == 0 && m->device[q] >= 0 && m->device[q] != dev) m->used[dev] -= m->copy[q];
}

/* Add (sign +1) or remove (-1) what producer v's copies cost, v on device[v]. */
static void producer_copies(bl_mem *m, int32_t v, double sign) {
    if (m->copy[v] <= 0 || m->device[v] < 0) return;
    for (int k = 0; k < m->nd; k++)
        if (k != m->device[v] && m->cnt[(size_t)v * m->nd + k] > 0) m->used[k] += sign * m->copy[v];
}

double bl_mem_extra(bl_mem *m, int32_t v, int dev) {
    const gopt_frozen *f = m->f;
    double extra = 0;
    if (!keeps(f, v)) return 0;
    for (int32_t e = f->in_ptr[v]; e < f->in_ptr[v + 1]; e++) {
        int32_t q = f->in_src[e];
        if (m->copy[q] <= 0 || m->device[q] < 0 || m->device[q] == dev) continue;
        if (m->cnt[(size_t)q * m->nd + dev] > 0) continue;
        int dup = 0; /* two edges from one producer: one copy */
        for (int32_t e2 = f->in_ptr[v]; e2 < e && !dup; e2++) dup = f->in_src[e2] == q;
        if (!dup) extra += m->copy[q];
    }
    return extra;
}

void bl_mem_place(bl_mem *m, int32_t v, int dev) {
    const gopt_frozen *f = m->f;
    int from = m->device[v];
    if (from == dev) return;
    double mine = gopt_bl_node_memory(m->p, v);
    producer_copies(m, v, -1);
    int k = keeps(f, v);
    if (from >= 0) {
        m->used[from] -= mine;
        if (k)
            for (int32_t e = f->in_ptr[v]; e < f->in_ptr[v + 1]; e++) del_consumer(m, f->in_src[e], from);
    }
    m->device[v] = dev;
    m->used[dev] += mine;
    if (k)
        for (int32_t e = f->in_ptr[v]; e < f->in_ptr[v + 1]; e++) bl_mem_add_consumer(m, f->in_src[e], dev);
    producer_copies(m, v, +1);
}

void gopt_bl_memory_use(const gopt_bl_problem *p, const gopt_decisions *d, double *used) {
    bl_mem m;
    for (int k = 0; k < p->ndev; k++) used[k] = 0;
    if (bl_mem_init(&m, p, d->device, NULL)) { /* out of memory: the per-node part alone */
        for (int32_t v = 0; v < d->n; v++) used[d->device[v]] += gopt_bl_node_memory(p, v);
        return;
    }
    memcpy(used, m.used, (size_t)p->ndev * sizeof *used);
    bl_mem_destroy(&m);
}

gopt_status gopt_bl_memory_check(const gopt_bl_problem *p, const gopt_decisions *d, gopt_error *err) {
    double *used = gopt_malloc((size_t)p->ndev * sizeof *used, err);
    if (!used) return GOPT_ENOMEM;
    gopt_bl_memory_use(p, d, used);
    gopt_status st = GOPT_OK;
    for (int k = 0; k < p->ndev && !st; k++)
        if (used[k] > gopt_bl_device_capacity(p, k) * (1 + 1e-12))
            st = gopt_error_set(err, GOPT_EUNSUP, "device %d needs %.4g bytes but holds %.4g (graph '%s')", k, used[k],
                                gopt_bl_device_capacity(p, k), gopt_graph_name(p->graph));
    free(used);
    return st;
}
