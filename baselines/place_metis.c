/* place_metis.c: balanced k-way partition with libmetis 5.1.
 *
 * Colocation groups are contracted first (one METIS vertex per unit). The
 * graph is made undirected; parallel edges between two units are merged
 * (bytes summed). Vertex weight: the unit's op time on device 0, scaled so
 * the total is about 10^6 (at least 1 per vertex: METIS wants positive
 * weights for balance). Edge weight: tensor bytes scaled so the heaviest is
 * 10^4 and the total at most 5 10^8 (METIS sums in 32 bits), at least 1. METIS_PartGraphKway with the run's seed; part i goes to
 * device i; memory violations are fixed up after (bl_fix_memory).
 * Cost: O(E log E) to build, METIS's O(E) multilevel partitioning.
 */
#include <math.h>
#include <metis.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bl_internal.h"

/* METIS seeds one random stream for the whole process (GKlib's) at each call: two calls at once
 * on two threads would draw from each other's stream, so they take turns. */
static pthread_mutex_t metis_lock = PTHREAD_MUTEX_INITIALIZER;

typedef struct {
    int32_t nb;
    double bytes;
} adj_item;

static int adj_cmp(const void *a, const void *b) {
    const adj_item *x = a, *y = b;
    return x->nb < y->nb ? -1 : x->nb > y->nb;
}

gopt_status gopt_bl_place_metis(const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err) {
    const gopt_frozen *f = gopt_graph_frozen(p->graph);
    bl_units u;
    gopt_status st = bl_units_build(p, &u, err);
    if (st) return st;
    idx_t *xadj = NULL, *adjncy = NULL, *vwgt = NULL, *adjwgt = NULL, *part = NULL;
    adj_item *adj = NULL;
    int32_t *fill = NULL;
    if ((st = bl_memory_feasible(p, &u, err))) goto out;
    int32_t nu = u.nunits;
    if (p->ndev < 2 || nu <= p->ndev) { /* nothing to partition: units spread round-robin, then fixed */
        for (int32_t k = 0; k < nu; k++) bl_units_set(&u, k, p->ndev < 2 ? 0 : k % p->ndev, d->device);
        st = bl_fix_memory(p, &u, d->device, err);
        goto out;
    }
    xadj = gopt_calloc((size_t)nu + 1, sizeof *xadj, err);
    fill = gopt_calloc((size_t)nu + 1, sizeof *fill, err);
    adj = gopt_malloc(2 * ((size_t)f->m + 1) * sizeof *adj, err);
    vwgt = gopt_malloc(((size_t)nu + 1) * sizeof *vwgt, err);
    part = gopt_malloc(((size_t)nu + 1) * sizeof *part, err);
    if (!xadj || !fill || !adj || !vwgt || !part) {
        st = GOPT_ENOMEM;
        goto out;
    }
    /* both directions of every edge between distinct units, bucketed by unit */
    int32_t *cnt = fill;
    for (int32_t e = 0; e < f->m; e++) {
        int32_t a = u.unit[f->edge_src[e]], b = u.unit[f->edge_dst[e]];
        if (a == b) continue;
        cnt[a + 1]++;
        cnt[b + 1]++;
    }
    for (int32_t k = 0; k < nu; k++) cnt[k + 1] += cnt[k];
    for (int32_t e = 0; e < f->m; e++) {
        int32_t a = u.unit[f->edge_src[e]], b = u.unit[f->edge_dst[e]];
        if (a == b) continue;
        adj[cnt[a]].nb = b;
        adj[cnt[a]++].bytes = f->edge_bytes[e];
        adj[cnt[b]].nb = a;
        adj[cnt[b]++].bytes = f->edge_bytes[e];
    }
    /* cnt[k] now ends bucket k; bucket k starts at cnt[k-1] (0 for k = 0) */
    int32_t out_n = 0, start = 0;
    double maxb = 0;
    for (int32_t k = 0; k < nu; k++) {
        int32_t end = cnt[k];
        qsort(adj + start, (size_t)(end - start), sizeof *adj, adj_cmp);
        xadj[k] = out_n;
        for (int32_t i = start; i < end; i++) {
            if (out_n > xadj[k] && adj[out_n - 1].nb == adj[i].nb) adj[out_n - 1].bytes += adj[i].bytes;
            else adj[out_n++] = adj[i];
        }
        start = end;
    }
    xadj[nu] = out_n;
    double sumb = 0;
    for (int32_t i = 0; i < out_n; i++) {
        if (adj[i].bytes > maxb) maxb = adj[i].bytes;
        sumb += adj[i].bytes;
    }
    /* heaviest edge 10^4, and the total within 5 10^8 so METIS's 32-bit sums cannot overflow */
    double scale = maxb > 0 ? 1e4 / maxb : 0;
    if (sumb * scale > 5e8) scale = 5e8 / sumb;
    adjncy = gopt_malloc(((size_t)out_n + 1) * sizeof *adjncy, err);
    adjwgt = gopt_malloc(((size_t)out_n + 1) * sizeof *adjwgt, err);
    if (!adjncy || !adjwgt) {
        st = GOPT_ENOMEM;
        goto out;
    }
    for (int32_t i = 0; i < out_n; i++) {
        adjncy[i] = adj[i].nb;
        double w = adj[i].bytes * scale;
        adjwgt[i] = w < 1 ? 1 : (idx_t)llround(w);
    }
    double total = 0;
    for (int32_t k = 0; k < nu; k++) total += u.work[k];
    for (int32_t k = 0; k < nu; k++) {
        double w = total > 0 ? u.work[k] / total * 1e6 : 1;
        vwgt[k] = w < 1 ? 1 : (idx_t)llround(w);
    }
    idx_t opts[METIS_NOPTIONS];
    METIS_SetDefaultOptions(opts);
    opts[METIS_OPTION_SEED] = (idx_t)(p->opt.seed & 0x7fffffff);
    opts[METIS_OPTION_NUMBERING] = 0;
    idx_t nv = nu, ncon = 1, nparts = p->ndev, objval = 0;
    pthread_mutex_lock(&metis_lock);
    int rc = METIS_PartGraphKway(&nv, &ncon, xadj, adjncy, vwgt, NULL, adjwgt, &nparts, NULL, NULL, opts, &objval, part);
    pthread_mutex_unlock(&metis_lock);
    if (rc != METIS_OK) {
        st = gopt_error_set(err, GOPT_EINTERNAL, "METIS_PartGraphKway failed on graph '%s' (code %d)",
                            gopt_graph_name(p->graph), rc);
        goto out;
    }
    for (int32_t k = 0; k < nu; k++) bl_units_set(&u, k, (int32_t)part[k], d->device);
    st = bl_fix_memory(p, &u, d->device, err);
out:
    free(xadj);
    free(adjncy);
    free(vwgt);
    free(adjwgt);
    free(part);
    free(adj);
    free(fill);
    bl_units_destroy(&u);
    return st;
}
