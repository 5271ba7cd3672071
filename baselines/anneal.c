/* anneal.c: simulated annealing over placement, priorities and fusion.
 *
 * Starts from the decisions the combination built before it (default:
 * single + fifo + none) and runs until opt.max_evals evaluations or
 * opt.budget_s seconds (default 10 s), whichever comes first. Each step
 * draws one move from the RNG:
 *   50%  move a unit (colocation group), or half the time a block of
 *        units of log-uniform size grown breadth-first around it on its
 *        device, to another device that has room in the memory model;
 *        fusion groups touching them are dissolved;
 *   25%  swap the priorities of two nodes;
 *   25%  pick an edge: dissolve its fusion group, or merge the two groups
 *        when legal (the rule of fusion.c).
 * Energy = evaluated step time (x10 when the evaluator reports OOM). The
 * temperature falls geometrically from 0.5% to 0.01% of the first energy
 * over the evaluations (or, without max_evals, over the budget: such runs
 * depend on machine speed; set max_evals for bit-reproducible ones). The
 * best state seen is returned. O(steps * (N + evaluation)).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bl_internal.h"

#define SA_FUSE_MAX 64

/* Dissolve every fusion group touching the units in queue[0..len). kill is
 * all zero on entry and on return. O(N) when a group is touched. */
static void dissolve_groups(const bl_units *u, const int32_t *queue, int32_t len, gopt_decisions *d, uint8_t *kill) {
    int any = 0;
    for (int32_t q = 0; q < len; q++)
        for (int32_t i = u->ptr[queue[q]]; i < u->ptr[queue[q] + 1]; i++) {
            int32_t g = d->group[u->mem[i]];
            if (g >= 0) {
                kill[g] = 1;
                any = 1;
            }
        }
    if (!any) return;
    for (int32_t v = 0; v < d->n; v++)
        if (d->group[v] >= 0 && kill[d->group[v]]) d->group[v] = -1;
    memset(kill, 0, (size_t)d->n);
}

/* Grow a block of units around k0 on its device, breadth first over edges,
 * up to `want` units, into queue; returns its size. inq is all zero on
 * entry and on return. */
static int32_t grow_block(const gopt_frozen *f, const bl_units *u, const int32_t *device, int32_t k0, int32_t want,
                          int32_t *queue, uint8_t *inq) {
    int32_t dev = device[u->mem[u->ptr[k0]]], len = 0, head = 0;
    queue[len++] = k0;
    inq[k0] = 1;
    while (head < len && len < want) {
        int32_t k = queue[head++];
        for (int32_t i = u->ptr[k]; i < u->ptr[k + 1] && len < want; i++) {
            int32_t v = u->mem[i];
            for (int dir = 0; dir < 2; dir++) {
                const int32_t *ptr = dir ? f->in_ptr : f->out_ptr, *adj = dir ? f->in_src : f->out_dst;
                for (int32_t e = ptr[v]; e < ptr[v + 1] && len < want; e++) {
                    int32_t w = adj[e], kw = u->unit[w];
                    if (inq[kw] || device[w] != dev) continue;
                    inq[kw] = 1;
                    queue[len++] = kw;
                }
            }
        }
    }
    for (int32_t i = 0; i < len; i++) inq[queue[i]] = 0;
    return len;
}

gopt_status gopt_bl_anneal(const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err) {
    const gopt_frozen *f = gopt_graph_frozen(p->graph);
    int32_t n = f->n;
    int nd = p->ndev;
    gopt_rng local, *rng = p->rng;
    if (!rng) {
        gopt_rng_seed(&local, p->opt.seed);
        rng = &local;
    }
    double budget = p->opt.budget_s > 0 ? p->opt.budget_s : 10.0;
    long max_evals = p->opt.max_evals;
    bl_units u;
    gopt_status st = bl_units_build(p, &u, err);
    if (st) return st;
    gopt_decisions cur = {0}, cand = {0}, best = {0};
    double *used = NULL;
    uint8_t *kill = NULL, *inq = NULL;
    int32_t *queue = NULL;
    if ((st = gopt_decisions_init(&cur, n, err)) || (st = gopt_decisions_init(&cand, n, err)) ||
        (st = gopt_decisions_init(&best, n, err)))
        goto out;
    used = gopt_calloc((size_t)nd, sizeof *used, err);
    kill = gopt_calloc((size_t)n + 1, 1, err);
    inq = gopt_calloc((size_t)u.nunits + 1, 1, err);
    queue = gopt_malloc(((size_t)u.nunits + 1) * sizeof *queue, err);
    if (!used || !kill || !inq || !queue) {
        st = GOPT_ENOMEM;
        goto out;
    }
    {
        bl_fuse fs; /* normalise group ids so a group id is one of its members */
        if ((st = bl_fuse_init(&fs, p, d, err))) goto out;
        bl_fuse_destroy(&fs);
    }
    gopt_decisions_copy(&cur, d);
    gopt_decisions_copy(&best, d);
    int oom = 0;
    double t0 = gopt_bl_evaluate(p, &cur, &oom);
    if (!isfinite(t0) || t0 < 0) {
        st = gopt_error_set(err, GOPT_EINTERNAL, "sa: the evaluator failed on the starting decisions");
        goto out;
    }
    double e_cur = oom ? 10 * t0 : t0, e_best = e_cur;
    double temp0 = 0.005 * e_cur, temp_end = 1e-4 * e_cur;
    double start = gopt_now_seconds();
    long evals = 0, idle = 0;
    while (n > 0) {
        double progress;
        if (max_evals > 0) {
            if (evals >= max_evals) break;
            progress = (double)evals / (double)max_evals;
        } else {
            progress = (gopt_now_seconds() - start) / budget;
        }
        if (gopt_now_seconds() - start >= budget) break;
        if (idle > 10000) break; /* no move changes anything (a tiny graph) */
        double temp = temp0 * pow(temp_end / temp0, progress);
        gopt_decisions_copy(&cand, &cur);
        double r = gopt_rng_uniform(rng);
        int changed = 0;
        if (r < 0.5 && nd > 1) {
            /* half the time one unit, else a block of log-uniform size grown around it */
            int32_t k = (int32_t)gopt_rng_below(rng, (uint64_t)u.nunits), want = 1;
            if (gopt_rng_uniform(rng) < 0.5 && u.nunits > 2)
                want = 1 + (int32_t)exp(gopt_rng_uniform(rng) * log(0.5 * u.nunits));
            int32_t len = grow_block(f, &u, cand.device, k, want, queue, inq);
            int32_t from = cand.device[u.mem[u.ptr[k]]];
            int32_t to = (int32_t)gopt_rng_below(rng, (uint64_t)(nd - 1));
            if (to >= from) to++;
            for (int32_t i = 0; i < len; i++) bl_units_set(&u, queue[i], to, cand.device);
            dissolve_groups(&u, queue, len, &cand, kill);
            /* the memory model, received copies included: over capacity is no move */
            gopt_bl_memory_use(p, &cand, used);
            changed = 1;
            for (int dv = 0; dv < nd; dv++)
                if (used[dv] > gopt_bl_device_capacity(p, dv) * (1 + 1e-12)) changed = 0;
        } else if (r < 0.75 || f->m == 0) {
            int32_t a = (int32_t)gopt_rng_below(rng, (uint64_t)n), b = (int32_t)gopt_rng_below(rng, (uint64_t)n);
            if (cand.priority[a] != cand.priority[b]) {
                int32_t t = cand.priority[a];
                cand.priority[a] = cand.priority[b];
                cand.priority[b] = t;
                changed = 1;
            }
        } else {
            int32_t e = (int32_t)gopt_rng_below(rng, (uint64_t)f->m);
            int32_t a = f->edge_src[e], b = f->edge_dst[e];
            int ca = f->op_class[a], cb = f->op_class[b];
            if (ca != GOPT_OP_CLASS_INPUT && ca != GOPT_OP_CLASS_PARAM && cb != GOPT_OP_CLASS_INPUT &&
                cb != GOPT_OP_CLASS_PARAM) {
                bl_fuse fs;
                if ((st = bl_fuse_init(&fs, p, &cand, err))) goto out;
                int32_t ga = bl_fuse_gid(&fs, a), gb = bl_fuse_gid(&fs, b);
                if (ga == gb) {
                    bl_fuse_dissolve(&fs, ga);
                    changed = 1;
                } else if (fs.size[ga] + fs.size[gb] <= SA_FUSE_MAX && bl_fuse_can_merge(&fs, cand.device, ga, gb)) {
                    bl_fuse_merge(&fs, gb, ga);
                    changed = 1;
                }
                bl_fuse_destroy(&fs);
            }
        }
        if (!changed) {
            idle++;
            continue;
        }
        idle = 0;
        double t = gopt_bl_evaluate(p, &cand, &oom);
        evals++;
        if (!isfinite(t) || t < 0) continue;
        double e_new = oom ? 10 * t : t;
        if (e_new <= e_cur || gopt_rng_uniform(rng) < exp(-(e_new - e_cur) / temp)) {
            gopt_decisions tmp = cur;
            cur = cand;
            cand = tmp;
            e_cur = e_new;
            if (e_cur < e_best) {
                e_best = e_cur;
                gopt_decisions_copy(&best, &cur);
            }
        }
    }
    gopt_decisions_copy(d, &best);
out:
    gopt_decisions_destroy(&cur);
    gopt_decisions_destroy(&cand);
    gopt_decisions_destroy(&best);
    free(used);
    free(kill);
    free(inq);
    free(queue);
    bl_units_destroy(&u);
    return st;
}
