/* place_simple.c: single, expert and m-TOPO placements.
 *
 * single: everything on device 0; when the graph does not fit there, the
 * least-bad split (bl_least_bad_split): contiguous layer ranges balanced by
 * memory over k = 2..ndev devices, the one the evaluator likes best.
 *
 * expert: what a practitioner does by hand, keyed on the graph's family:
 *  - rnnlm, gnmt, transformer_xl: the layers are split across all devices
 *    in order (contiguous layer ranges balanced by compute; with fewer
 *    layers than devices, one range per layer, unless the model needs more
 *    devices to fit with a 20% margin: then that many ranges of units);
 *  - inception_v3, resnet, amoebanet, wavenet: one device when the model
 *    fits; else contiguous ranges balanced by compute over the fewest
 *    devices that hold it;
 *  - any other family: like the first rule when the graph has at least two
 *    layers, else like single.
 * Memory violations left by a rule are fixed up (bl_fix_memory).
 *
 * m-TOPO (Baechi): nodes in topological order, each device filled up to an
 * equal share of the total compute, moving on early when the next unit
 * does not fit; memory violations fixed up. All O(N log N).
 */
#include <stdlib.h>
#include <string.h>

#include "bl_internal.h"

static double total_bytes(const bl_units *u) {
    double t = 0;
    for (int32_t k = 0; k < u->nunits; k++) t += u->bytes[k];
    return t;
}

gopt_status gopt_bl_place_single(const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err) {
    bl_units u;
    gopt_status st = bl_units_build(p, &u, err);
    if (st) return st;
    if (total_bytes(&u) <= gopt_bl_device_capacity(p, 0)) {
        for (int32_t v = 0; v < d->n; v++) d->device[v] = 0;
    } else if (p->ndev < 2) {
        st = gopt_error_set(err, GOPT_EUNSUP, "no valid placement of graph '%s': it needs %.4g bytes, the device holds %.4g",
                            gopt_graph_name(p->graph), total_bytes(&u), gopt_bl_device_capacity(p, 0));
    } else {
        st = bl_least_bad_split(p, &u, d->device, err);
    }
    bl_units_destroy(&u);
    return st;
}

static int family_is(const char *fam, const char *const *list) {
    for (; *list; list++)
        if (strcmp(fam, *list) == 0) return 1;
    return 0;
}

static int32_t distinct_layers(const gopt_frozen *f) {
    int32_t maxl = -1;
    for (int32_t v = 0; v < f->n; v++)
        if (f->layer[v] > maxl) maxl = f->layer[v];
    if (maxl < 0) return 0;
    uint8_t *seen = calloc((size_t)maxl + 1, 1);
    if (!seen) return maxl + 1;
    int32_t c = 0;
    for (int32_t v = 0; v < f->n; v++)
        if (f->layer[v] >= 0 && !seen[f->layer[v]]) {
            seen[f->layer[v]] = 1;
            c++;
        }
    free(seen);
    return c;
}

gopt_status gopt_bl_place_expert(const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err) {
    static const char *const SPLIT[] = {"rnnlm", "gnmt", "transformer_xl", NULL};
    static const char *const KEEP[] = {"inception_v3", "resnet", "amoebanet", "wavenet", NULL};
    const gopt_frozen *f = gopt_graph_frozen(p->graph);
    const char *fam = gopt_graph_family(p->graph);
    if (!fam) fam = "";
    int32_t layers = distinct_layers(f);
    int keep = family_is(fam, KEEP) || (!family_is(fam, SPLIT) && layers < 2);
    bl_units u;
    int32_t *order = NULL, *key = NULL;
    gopt_status st = bl_units_build(p, &u, err);
    if (st) return st;
    if ((st = bl_memory_feasible(p, &u, err))) goto out;
    order = gopt_malloc(((size_t)u.nunits + 1) * sizeof *order, err);
    key = gopt_malloc(((size_t)u.nunits + 1) * sizeof *key, err);
    if (!order || !key) {
        st = GOPT_ENOMEM;
        goto out;
    }
    if ((st = bl_units_order(p, &u, order, key, err))) goto out;
    if (keep) { /* one device when it fits, else the fewest that hold it */
        for (int k = 1; k <= p->ndev; k++) {
            gopt_error e2 = {0};
            if (bl_split_and_fix(p, &u, order, key, u.work, k, d->device, &e2) == GOPT_OK) {
                int over = 0;
                for (int32_t v = 0; v < d->n; v++) over |= d->device[v] >= k;
                if (!over || k == p->ndev) goto out;
            }
        }
        st = bl_fix_memory(p, &u, d->device, err);
        goto out;
    }
    int k = p->ndev;
    if (layers >= 1 && layers < k) k = layers;
    /* more devices than layers when the layers do not fit (with a 20% margin): then ranges of units */
    double need = total_bytes(&u), cap = gopt_bl_device_capacity(p, 0);
    while (k < p->ndev && need > 0.8 * cap * k) k++;
    st = bl_split_and_fix(p, &u, order, k > layers ? NULL : key, u.work, k, d->device, err);
out:
    free(order);
    free(key);
    bl_units_destroy(&u);
    return st;
}

typedef struct {
    int32_t rank, unit;
} tp_item;

static int tp_cmp(const void *a, const void *b) {
    const tp_item *x = a, *y = b;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

gopt_status gopt_bl_place_mtopo(const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err) {
    const gopt_frozen *f = gopt_graph_frozen(p->graph);
    bl_units u;
    int32_t *order = NULL;
    tp_item *it = NULL;
    gopt_status st = bl_units_build(p, &u, err);
    if (st) return st;
    if ((st = bl_memory_feasible(p, &u, err))) goto out;
    order = gopt_malloc(((size_t)u.nunits + 1) * sizeof *order, err);
    it = gopt_malloc(((size_t)u.nunits + 1) * sizeof *it, err);
    if (!order || !it) {
        st = GOPT_ENOMEM;
        goto out;
    }
    for (int32_t k = 0; k < u.nunits; k++) {
        it[k].unit = k;
        it[k].rank = f->rank[u.mem[u.ptr[k]]]; /* members are in topological order */
    }
    qsort(it, (size_t)u.nunits, sizeof *it, tp_cmp);
    for (int32_t k = 0; k < u.nunits; k++) order[k] = it[k].unit;
    st = bl_split_and_fix(p, &u, order, NULL, u.work, p->ndev, d->device, err);
out:
    free(order);
    free(it);
    bl_units_destroy(&u);
    return st;
}
