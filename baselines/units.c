/* units.c: placement units (colocation groups), the contiguous order, the
 * balanced contiguous split, memory fix-up and the least-bad split.
 *
 * Invariant: every placer writes devices unit by unit, so colocation holds
 * by construction. Costs: units O(N); order O(N log N); split O(N); fix-up
 * O(U log U + U * ndev); least-bad split ndev-1 evaluations.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bl_internal.h"

gopt_status bl_units_build(const gopt_bl_problem *p, bl_units *u, gopt_error *err) {
    const gopt_frozen *f = gopt_graph_frozen(p->graph);
    memset(u, 0, sizeof *u);
    int32_t n = f->n;
    u->n = n;
    u->unit = gopt_malloc(((size_t)n + 1) * sizeof *u->unit, err);
    u->ptr = gopt_calloc((size_t)n + 2, sizeof *u->ptr, err);
    u->mem = gopt_malloc(((size_t)n + 1) * sizeof *u->mem, err);
    u->bytes = gopt_calloc((size_t)n + 1, sizeof *u->bytes, err);
    u->work = gopt_calloc((size_t)n + 1, sizeof *u->work, err);
    if (!u->unit || !u->ptr || !u->mem || !u->bytes || !u->work) {
        bl_units_destroy(u);
        return GOPT_ENOMEM;
    }
    /* colocation groups first (ids 0..n_coloc-1), then lone nodes */
    int32_t next = f->n_coloc;
    for (int32_t v = 0; v < n; v++) u->unit[v] = f->coloc[v] >= 0 ? f->coloc[v] : next++;
    u->nunits = next;
    for (int32_t v = 0; v < n; v++) u->ptr[u->unit[v] + 1]++;
    for (int32_t k = 0; k < u->nunits; k++) u->ptr[k + 1] += u->ptr[k];
    int32_t *fill = gopt_malloc(((size_t)u->nunits + 1) * sizeof *fill, err);
    if (!fill) {
        bl_units_destroy(u);
        return GOPT_ENOMEM;
    }
    memcpy(fill, u->ptr, (size_t)u->nunits * sizeof *fill);
    for (int32_t i = 0; i < n; i++) { /* topological order of members */
        int32_t v = f->topo[i], k = u->unit[v];
        u->mem[fill[k]++] = v;
        u->bytes[k] += gopt_bl_node_memory(p, v);
        u->work[k] += p->cost->time[(size_t)v * p->cost->ndev];
    }
    free(fill);
    return GOPT_OK;
}

void bl_units_destroy(bl_units *u) {
    free(u->unit);
    free(u->ptr);
    free(u->mem);
    free(u->bytes);
    free(u->work);
    memset(u, 0, sizeof *u);
}

void bl_units_set(const bl_units *u, int32_t k, int32_t dev, int32_t *device) {
    for (int32_t i = u->ptr[k]; i < u->ptr[k + 1]; i++) device[u->mem[i]] = dev;
}

typedef struct {
    int32_t key, rank, unit;
} order_item;

static int order_cmp(const void *a, const void *b) {
    const order_item *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
    return 0;
}

gopt_status bl_units_order(const gopt_bl_problem *p, const bl_units *u, int32_t *order, int32_t *ukey,
                           gopt_error *err) {
    const gopt_frozen *f = gopt_graph_frozen(p->graph);
    int32_t *key = gopt_malloc(((size_t)f->n + 1) * sizeof *key, err);
    order_item *it = gopt_malloc(((size_t)u->nunits + 1) * sizeof *it, err);
    if (!key || !it) {
        free(key);
        free(it);
        return GOPT_ENOMEM;
    }
    for (int32_t i = 0; i < f->n; i++) {
        int32_t v = f->topo[i];
        int32_t k = f->layer[v];
        if (k < 0) {
            k = 0;
            for (int32_t e = f->in_ptr[v]; e < f->in_ptr[v + 1]; e++)
                if (key[f->in_src[e]] > k) k = key[f->in_src[e]];
        }
        key[v] = k;
    }
    for (int32_t k = 0; k < u->nunits; k++) {
        it[k].unit = k;
        it[k].key = INT32_MAX;
        it[k].rank = INT32_MAX;
        for (int32_t i = u->ptr[k]; i < u->ptr[k + 1]; i++) {
            int32_t v = u->mem[i];
            if (key[v] < it[k].key) it[k].key = key[v];
            if (f->rank[v] < it[k].rank) it[k].rank = f->rank[v];
        }
    }
    qsort(it, (size_t)u->nunits, sizeof *it, order_cmp);
    for (int32_t k = 0; k < u->nunits; k++) {
        order[k] = it[k].unit;
        if (ukey) ukey[it[k].unit] = it[k].key;
    }
    free(key);
    free(it);
    return GOPT_OK;
}

gopt_status bl_split_contiguous(const gopt_bl_problem *p, const bl_units *u, const int32_t *order, const int32_t *key,
                                const double *weight, int k, double fill, int32_t *device, gopt_error *err) {
    for (int32_t v = 0; v < u->n; v++) device[v] = -1;
    bl_mem m;
    gopt_status st = bl_mem_init(&m, p, device, err);
    if (st) return st;
    double total = 0;
    for (int32_t i = 0; i < u->nunits; i++) total += weight[order[i]];
    int dev = 0;
    double cum = 0, block = 0;
    int32_t count = 0; /* units on the current device */
    for (int32_t i = 0; i < u->nunits; i++) {
        int32_t un = order[i];
        int starts = !key || i == 0 || key[un] != key[order[i - 1]];
        if (starts) { /* weight of the block starting here */
            block = 0;
            for (int32_t j = i; j < u->nunits && (j == i || (key && key[order[j]] == key[un])); j++)
                block += weight[order[j]];
        }
        /* move on at a block start whose midpoint passes this range's boundary, or when the
         * unit (with the copies of its inputs) does not fit */
        while (dev < k - 1 && count > 0) {
            int next = starts && cum + 0.5 * block > total * (dev + 1) / k;
            if (!next) {
                double need = u->bytes[un];
                for (int32_t j = u->ptr[un]; j < u->ptr[un + 1]; j++) need += bl_mem_extra(&m, u->mem[j], dev);
                next = m.used[dev] + need > fill * m.cap[dev];
            }
            if (!next) break;
            dev++;
            count = 0;
        }
        for (int32_t j = u->ptr[un]; j < u->ptr[un + 1]; j++) bl_mem_place(&m, u->mem[j], dev);
        count++;
        cum += weight[un];
    }
    bl_mem_destroy(&m);
    return GOPT_OK;
}

gopt_status bl_memory_feasible(const gopt_bl_problem *p, const bl_units *u, gopt_error *err) {
    double total = 0, cap = 0, maxcap = 0, maxunit = 0;
    int32_t worst = -1;
    for (int32_t k = 0; k < u->nunits; k++) {
        total += u->bytes[k];
        if (u->bytes[k] > maxunit) {
            maxunit = u->bytes[k];
            worst = k;
        }
    }
    for (int d = 0; d < p->ndev; d++) {
        double c = gopt_bl_device_capacity(p, d);
        cap += c;
        if (c > maxcap) maxcap = c;
    }
    if (total > cap)
        return gopt_error_set(err, GOPT_EUNSUP,
                              "no valid placement of graph '%s': it needs %.4g bytes, %d devices hold %.4g in all",
                              gopt_graph_name(p->graph), total, p->ndev, cap);
    if (worst >= 0 && maxunit > maxcap)
        return gopt_error_set(err, GOPT_EUNSUP,
                              "no valid placement of graph '%s': node '%s' (with its colocation group) needs %.4g "
                              "bytes, the largest device holds %.4g",
                              gopt_graph_name(p->graph), gopt_graph_node_name(p->graph, u->mem[u->ptr[worst]]),
                              maxunit, maxcap);
    return GOPT_OK;
}

static void move_unit(bl_mem *m, const bl_units *u, int32_t k, int to) {
    for (int32_t i = u->ptr[k]; i < u->ptr[k + 1]; i++) bl_mem_place(m, u->mem[i], to);
}

gopt_status bl_fix_memory(const gopt_bl_problem *p, const bl_units *u, int32_t *device, gopt_error *err) {
    gopt_status st = bl_memory_feasible(p, u, err);
    if (st) return st;
    int nd = p->ndev;
    bl_mem m;
    int32_t *order = gopt_malloc(((size_t)u->nunits + 1) * sizeof *order, err);
    if (!order) return GOPT_ENOMEM;
    if ((st = bl_mem_init(&m, p, device, err))) {
        free(order);
        return st;
    }
    if ((st = bl_units_order(p, u, order, NULL, err))) goto out;
    int over = -1;
    for (int round = 0; round < 3; round++) {
        for (int d = 0; d < nd; d++) {
            /* latest units in contiguous order leave first: ranges stay nearly contiguous */
            for (int32_t i = u->nunits - 1; i >= 0 && m.used[d] > m.cap[d]; i--) {
                int32_t k = order[i];
                if (device[u->mem[u->ptr[k]]] != d) continue;
                double before = m.used[d];
                /* targets: first where the unit's copied inputs live (moving there frees copies), then most room */
                double gain[64] = {0};
                for (int32_t j = u->ptr[k]; j < u->ptr[k + 1]; j++) {
                    int32_t v = u->mem[j];
                    for (int32_t e = m.f->in_ptr[v]; e < m.f->in_ptr[v + 1]; e++) {
                        int32_t q = m.f->in_src[e];
                        if (m.copy[q] > 0 && device[q] != d && device[q] >= 0 && device[q] < 64) gain[device[q]] += m.copy[q];
                    }
                }
                uint64_t tried = 0;
                for (int attempt = 0; attempt < nd - 1; attempt++) {
                    int best = -1;
                    double bg = -1, room = -1e300;
                    for (int t = 0; t < nd && t < 64; t++) {
                        double r = m.cap[t] - m.used[t] - u->bytes[k];
                        if (t == d || (tried >> t & 1) || r < 0) continue;
                        if (gain[t] > bg || (gain[t] == bg && r > room)) {
                            bg = gain[t];
                            room = r;
                            best = t;
                        }
                    }
                    if (best < 0) break;
                    tried |= (uint64_t)1 << best;
                    move_unit(&m, u, k, best);
                    if (m.used[best] <= m.cap[best] && m.used[d] <= before) break;
                    move_unit(&m, u, k, d); /* its copies did not fit, or it freed nothing: back */
                }
            }
        }
        over = -1;
        for (int d = 0; d < nd && over < 0; d++)
            if (m.used[d] > m.cap[d]) over = d;
        if (over < 0) break;
    }
    if (over >= 0)
        st = gopt_error_set(err, GOPT_EUNSUP,
                            "no valid placement of graph '%s' found: device %d keeps %.4g bytes over its %.4g after "
                            "moving what fits elsewhere",
                            gopt_graph_name(p->graph), over, m.used[over], m.cap[over]);
out:
    bl_mem_destroy(&m);
    free(order);
    return st;
}

gopt_status bl_split_and_fix(const gopt_bl_problem *p, const bl_units *u, const int32_t *order, const int32_t *key,
                             const double *weight, int k, int32_t *device, gopt_error *err) {
    static const double FILL[] = {1.0, 0.85, 0.7, 0.55, 0.4};
    gopt_status st = GOPT_OK;
    for (size_t i = 0; i < sizeof FILL / sizeof FILL[0]; i++) {
        if ((st = bl_split_contiguous(p, u, order, key, weight, k, FILL[i], device, err))) return st;
        if ((st = bl_fix_memory(p, u, device, err)) != GOPT_EUNSUP) return st;
    }
    return st;
}

gopt_status bl_least_bad_split(const gopt_bl_problem *p, const bl_units *u, int32_t *device, gopt_error *err) {
    gopt_status st = bl_memory_feasible(p, u, err);
    if (st) return st;
    gopt_decisions trial = {0};
    int32_t *order = gopt_malloc(((size_t)u->nunits + 1) * sizeof *order, err);
    if (!order) return GOPT_ENOMEM;
    if ((st = gopt_decisions_init(&trial, u->n, err))) goto out;
    gopt_decisions_set_default(&trial, gopt_graph_frozen(p->graph));
    if ((st = bl_units_order(p, u, order, NULL, err))) goto out;
    double best = INFINITY;
    int found = 0;
    for (int k = 2; k <= p->ndev; k++) {
        gopt_error e2 = {0};
        if (bl_split_and_fix(p, u, order, NULL, u->bytes, k, trial.device, &e2)) continue;
        int oom = 0;
        double t = gopt_bl_evaluate(p, &trial, &oom);
        if (!isfinite(t) || t < 0) continue;
        if (oom) t += 1e9; /* the evaluator's memory model may be stricter than ours: least bad still */
        if (!found || t < best) {
            best = t;
            found = 1;
            memcpy(device, trial.device, (size_t)u->n * sizeof *device);
        }
    }
    if (!found)
        st = gopt_error_set(err, GOPT_EUNSUP, "no valid placement of graph '%s' on %d devices: no contiguous split fits",
                            gopt_graph_name(p->graph), p->ndev);
out:
    gopt_decisions_destroy(&trial);
    free(order);
    return st;
}
