/* estimate.c: the baselines' quick step-time estimate (gopt_bl_estimate).
 *
 * Not the simulator: the stand-in used when no evaluator is given (tests,
 * benchmarks, a build without sim/). Kernels are fusion groups (a lone node
 * is its own kernel), priced by the cost model as the simulator prices them
 * (gopt_cost_group_price: a lone node its table time, a group
 * gopt_cost_group_time at its memory pass's bytes). Each device runs one kernel at a time, the
 * ready one of highest priority first (priority of a group: its members'
 * largest; ties by id). A cross-device edge delays its consumer by the
 * transfer time; links have no contention. O((N + E) log N).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bl_internal.h"

typedef struct {
    const gopt_bl_problem *p;
    const gopt_frozen *f;
    const gopt_decisions *d;
    int32_t *eu, *pending, *prio;
    double *rt, *dur;
    uint8_t *busy;
    bl_heap *ready, *waiting, events;
    int failed;
} est;

static void try_start(est *s, int dev, double now) {
    if (s->busy[dev]) return;
    bl_heap *w = &s->waiting[dev], *r = &s->ready[dev];
    while (w->len && w->a[0].key <= now) {
        bl_heap_item it = bl_heap_pop(w);
        if (!bl_heap_push(r, -(double)s->prio[it.id], it.id)) s->failed = 1;
    }
    if (r->len) {
        bl_heap_item it = bl_heap_pop(r);
        s->busy[dev] = 1;
        if (!bl_heap_push(&s->events, now + s->dur[it.id], it.id)) s->failed = 1;
    } else if (w->len) {
        if (!bl_heap_push(&s->events, w->a[0].key, s->f->n + dev)) s->failed = 1;
    }
}

double gopt_bl_estimate(const gopt_bl_problem *p, const gopt_decisions *d, int *oom) {
    const gopt_frozen *f = gopt_graph_frozen(p->graph);
    int32_t n = f->n;
    int nd = p->ndev;
    est s = {0};
    s.p = p;
    s.f = f;
    s.d = d;
    double result = -1;
    *oom = 0;
    s.eu = malloc(((size_t)n + 1) * sizeof *s.eu);
    s.pending = calloc((size_t)n + 1, sizeof *s.pending);
    s.prio = malloc(((size_t)n + 1) * sizeof *s.prio);
    s.rt = calloc((size_t)n + 1, sizeof *s.rt);
    s.dur = calloc((size_t)n + 1, sizeof *s.dur);
    int32_t *rep = malloc(((size_t)n + 1) * sizeof *rep), *nxt = malloc(((size_t)n + 1) * sizeof *nxt);
    int32_t *members = malloc(((size_t)n + 1) * sizeof *members);
    s.busy = calloc((size_t)nd, 1);
    s.ready = calloc((size_t)nd, sizeof *s.ready);
    s.waiting = calloc((size_t)nd, sizeof *s.waiting);
    double *used = calloc((size_t)nd, sizeof *used);
    if (!s.eu || !s.pending || !s.prio || !s.rt || !s.dur || !s.busy || !s.ready || !s.waiting || !used || !rep || !nxt ||
        !members)
        goto out;
    /* kernel of each node: a group is named by its first member (ids in files may be any value) */
    for (int32_t v = 0; v < n; v++) rep[v] = -1;
    for (int32_t v = 0; v < n; v++) {
        int32_t gid = d->group[v];
        if (gid >= 0 && rep[gid] < 0) rep[gid] = v;
        s.eu[v] = gid >= 0 ? rep[gid] : v;
        s.prio[v] = INT32_MIN;
        nxt[v] = -1;
    }
    for (int32_t v = n - 1; v >= 0; v--) { /* member lists, members in id order */
        int32_t g = s.eu[v];
        if (g != v) {
            nxt[v] = nxt[g];
            nxt[g] = v;
        }
    }
    for (int32_t v = 0; v < n; v++) {
        int32_t g = s.eu[v];
        if (d->priority[v] > s.prio[g]) s.prio[g] = d->priority[v];
        for (int32_t e = f->in_ptr[v]; e < f->in_ptr[v + 1]; e++)
            if (s.eu[f->in_src[e]] != g) s.pending[g]++;
    }
    for (int32_t v = 0; v < n; v++) { /* the cost model prices each kernel: gopt_cost_group_price */
        if (s.eu[v] != v) continue;
        int32_t k = 0;
        for (int32_t u = v; u >= 0; u = nxt[u]) members[k++] = u;
        s.dur[v] = gopt_cost_group_price(p->cost, f, d->device[v], members, k, s.eu, v);
    }
    for (int32_t i = 0; i < n; i++) {
        int32_t v = f->topo[i];
        if (s.eu[v] == v && s.pending[v] == 0)
            if (!bl_heap_push(&s.waiting[d->device[v]], 0.0, v)) goto out;
    }
    for (int k = 0; k < nd; k++) try_start(&s, k, 0.0);
    double makespan = 0;
    while (s.events.len && !s.failed) {
        bl_heap_item ev = bl_heap_pop(&s.events);
        double t = ev.key;
        if (ev.id >= n) {
            try_start(&s, ev.id - n, t);
            continue;
        }
        int32_t g = ev.id;
        int dev = d->device[g];
        s.busy[dev] = 0;
        if (t > makespan) makespan = t;
        for (int32_t v = g; v >= 0; v = nxt[v]) {
            for (int32_t e = f->out_ptr[v]; e < f->out_ptr[v + 1]; e++) {
                int32_t w = f->out_dst[e], h = s.eu[w];
                if (h == g) continue;
                double arr = t + bl_xfer(p, dev, d->device[w], f->edge_bytes[f->out_eid[e]]);
                if (arr > s.rt[h]) s.rt[h] = arr;
                if (--s.pending[h] == 0 && !bl_heap_push(&s.waiting[d->device[h]], s.rt[h], h)) s.failed = 1;
            }
        }
        for (int k = 0; k < nd; k++) try_start(&s, k, t);
    }
    if (s.failed) goto out;
    for (int32_t v = 0; v < n; v++)
        if (s.eu[v] == v && s.pending[v] != 0) goto out; /* not everything ran: a bug or a cycle */
    gopt_bl_memory_use(p, d, used);
    double worst = 0;
    for (int k = 0; k < nd; k++) {
        double over = used[k] - gopt_bl_device_capacity(p, k);
        if (over > worst) {
            worst = over;
            *oom = 1 + k;
        }
    }
    result = makespan;
out:
    if (s.ready)
        for (int k = 0; k < nd; k++) bl_heap_destroy(&s.ready[k]);
    if (s.waiting)
        for (int k = 0; k < nd; k++) bl_heap_destroy(&s.waiting[k]);
    bl_heap_destroy(&s.events);
    free(s.eu);
    free(s.pending);
    free(s.prio);
    free(s.rt);
    free(s.dur);
    free(rep);
    free(nxt);
    free(members);
    free(s.busy);
    free(s.ready);
    free(s.waiting);
    free(used);
    return result;
}
