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
 *  - a recommender, by its structure (any family but the above): when
 *    embedding tables (parameters that the forward reads only through
 *    lookups: data-movement ops with a second input, the ids) hold at
 *    least half of the parameter
 *    bytes and there are two of them or more, the tables are sharded
 *    table-wise, as TorchRec's planner does: each table with its lookups,
 *    the ops that produce its gradient and its update on one device, the
 *    tables largest first onto the device holding the fewest bytes, the rest
 *    of the model on device 0 (expert_tables); when the memory fix-up
 *    cannot make that fit, the rule below;
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

/* Whether parameter v is an embedding table: it holds bytes, and every
 * consumer of it outside the optimizer phase (at least one) is a lookup: a
 * data-movement op with a second input (the ids). A weight read through a
 * transpose (one input) or by a GEMM is not a table. */
static int is_table(const gopt_frozen *f, int32_t v) {
    if (f->op_class[v] != GOPT_OP_CLASS_PARAM || !(f->param_bytes[v] > 0)) return 0;
    int lookups = 0;
    for (int32_t e = f->out_ptr[v]; e < f->out_ptr[v + 1]; e++) {
        int32_t w = f->out_dst[e];
        if (f->phase[w] == GOPT_PHASE_OPT) continue;
        if (f->op_class[w] != GOPT_OP_CLASS_DATA_MOVEMENT || f->in_ptr[w + 1] - f->in_ptr[w] < 2) return 0;
        lookups++;
    }
    return lookups > 0;
}

typedef struct {
    double bytes;
    int32_t id;
} tab_item;

static int tab_cmp(const void *a, const void *b) { /* largest first, ties by id */
    const tab_item *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* The table-wise rule (see the header comment). *applied is 0 when the graph
 * is not a recommender (device untouched), else 1 and device is the sharding,
 * fixed up for memory. */
static gopt_status expert_tables(const gopt_bl_problem *p, const bl_units *u, int32_t *device, int *applied,
                                 gopt_error *err) {
    const gopt_frozen *f = gopt_graph_frozen(p->graph);
    int32_t n = f->n, nt = 0;
    double all = 0, tab = 0;
    *applied = 0;
    for (int32_t v = 0; v < n; v++) {
        all += f->param_bytes[v];
        if (is_table(f, v)) {
            tab += f->param_bytes[v];
            nt++;
        }
    }
    if (p->ndev < 2 || nt < 2 || !(tab >= 0.5 * all)) return GOPT_OK;
    int32_t *cl = gopt_malloc(((size_t)u->nunits + 1) * sizeof *cl, err);
    tab_item *it = gopt_calloc((size_t)nt, sizeof *it, err);
    double *load = gopt_calloc((size_t)p->ndev, sizeof *load, err);
    int32_t *dev_of = gopt_malloc((size_t)nt * sizeof *dev_of, err);
    gopt_status st = GOPT_OK;
    if (!cl || !it || !load || !dev_of) {
        st = GOPT_ENOMEM;
        goto out;
    }
    for (int32_t k = 0; k < u->nunits; k++) cl[k] = -1;
    /* clusters: the table's unit (the table and its update), its lookups, the producers of its gradient */
    int32_t c = 0;
    for (int32_t v = 0; v < n; v++) {
        if (!is_table(f, v)) continue;
        int32_t t = u->unit[v];
        if (cl[t] < 0) cl[t] = c;
        for (int32_t e = f->out_ptr[v]; e < f->out_ptr[v + 1]; e++) {
            int32_t w = f->out_dst[e];
            if (f->phase[w] != GOPT_PHASE_OPT && cl[u->unit[w]] < 0) cl[u->unit[w]] = c;
        }
        for (int32_t i = u->ptr[t]; i < u->ptr[t + 1]; i++) {
            int32_t m = u->mem[i];
            for (int32_t e = f->in_ptr[m]; e < f->in_ptr[m + 1]; e++) {
                int32_t q = f->in_src[e];
                if (f->phase[q] == GOPT_PHASE_BWD && cl[u->unit[q]] < 0) cl[u->unit[q]] = c;
            }
        }
        it[c].id = c;
        c++;
    }
    for (int32_t k = 0; k < u->nunits; k++) {
        if (cl[k] >= 0)
            it[cl[k]].bytes += u->bytes[k];
        else
            load[0] += u->bytes[k]; /* the rest of the model stays on device 0 */
    }
    qsort(it, (size_t)nt, sizeof *it, tab_cmp);
    for (int32_t j = 0; j < nt; j++) {
        int best = 0;
        for (int dv = 1; dv < p->ndev; dv++)
            if (load[dv] < load[best]) best = dv;
        load[best] += it[j].bytes;
        dev_of[it[j].id] = best;
    }
    for (int32_t v = 0; v < n; v++) device[v] = 0;
    for (int32_t k = 0; k < u->nunits; k++)
        if (cl[k] >= 0) bl_units_set(u, k, dev_of[cl[k]], device);
    *applied = 1;
    st = bl_fix_memory(p, u, device, err);
out:
    free(cl);
    free(it);
    free(load);
    free(dev_of);
    return st;
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
    if (!family_is(fam, SPLIT) && !family_is(fam, KEEP)) {
        int applied = 0;
        st = expert_tables(p, &u, d->device, &applied, err);
        if (st == GOPT_EUNSUP) st = GOPT_OK, applied = 0; /* the shards do not fit: the layer split may */
        if (st || applied) goto out;
    }
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
