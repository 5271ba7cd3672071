/* schedule.c: priorities. fifo: topological order (earlier first), what a
 * dataflow runtime does by default. cp: critical path, the upward rank on
 * the placement already chosen:
 *   rank(v) = t(v, dev v) + max over successors s of (xfer(dev v -> dev s, bytes) + rank(s)),
 * and priority = position in decreasing rank (ties by topological rank), so
 * the op with the longest remaining path runs first. Both O(N + E) (a radix sort).
 */
#include <stdlib.h>

#include "bl_internal.h"

gopt_status gopt_bl_schedule_fifo(const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err) {
    const gopt_frozen *f = gopt_graph_frozen(p->graph);
    for (int32_t v = 0; v < f->n; v++) d->priority[v] = f->n - f->rank[v];
    return GOPT_OK;
}

gopt_status gopt_bl_schedule_cp(const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err) {
    const gopt_frozen *f = gopt_graph_frozen(p->graph);
    int32_t n = f->n;
    int ndt = p->cost->ndev;
    gopt_sort_pair *it = gopt_malloc((2 * (size_t)n + 1) * sizeof *it, err);
    double *rank = gopt_malloc(((size_t)n + 1) * sizeof *rank, err);
    if (!it || !rank) {
        free(it);
        free(rank);
        return GOPT_ENOMEM;
    }
    for (int32_t i = n - 1; i >= 0; i--) {
        int32_t v = f->topo[i];
        double best = 0;
        for (int32_t e = f->out_ptr[v]; e < f->out_ptr[v + 1]; e++) {
            int32_t s = f->out_dst[e];
            double r = bl_xfer(p, d->device[v], d->device[s], f->edge_bytes[f->out_eid[e]]) + rank[s];
            if (r > best) best = r;
        }
        rank[v] = p->cost->time[(size_t)v * ndt + d->device[v]] + best;
    }
    /* decreasing rank, ties in topological order: a stable sort of the nodes listed in that order */
    for (int32_t i = 0; i < n; i++) it[i] = (gopt_sort_pair){gopt_sort_key_desc(rank[f->topo[i]]), f->topo[i]};
    gopt_sort_pairs(it, it + n, (size_t)n);
    for (int32_t i = 0; i < n; i++) d->priority[it[i].val] = n - i;
    free(it);
    free(rank);
    return GOPT_OK;
}
