/* run.c: a method against the simulator: the evaluator adapter and
 * gopt_bl_optimize, which the commands and the benchmark share. The
 * algorithms themselves see the simulator only through the evaluate
 * callback. Cost: the method's, plus one simulation.
 */
#include <string.h>

#include "bl_internal.h"

double gopt_bl_sim_evaluate(void *ctx, const gopt_decisions *d, int *oom) {
    gopt_bl_sim_ctx *c = ctx;
    gopt_sim_result r;
    *oom = 0;
    c->have_last = 0;
    if (gopt_sim_run(c->sim, d, &r, c->scratch, NULL)) return -1;
    c->last = r;
    c->have_last = 1;
    *oom = r.oom ? (r.oom_device >= 0 ? 1 + r.oom_device : -1) : 0;
    return r.step_time_s;
}

int gopt_bl_sim_last_peak(void *ctx, double *peak) {
    gopt_bl_sim_ctx *c = ctx;
    if (!c->have_last) return 0;
    for (int k = 0; k < c->last.ndev; k++) peak[k] = (double)c->last.peak_memory_bytes[k];
    return 1;
}

gopt_status gopt_bl_problem_fork(const gopt_bl_problem *p, gopt_bl_problem *q, gopt_bl_sim_ctx *ctx,
                                 gopt_error *err) {
    memset(ctx, 0, sizeof *ctx);
    *q = *p;
    q->rng = NULL;
    if (!p->evaluate) return GOPT_OK; /* gopt_bl_estimate: no state */
    if (p->evaluate != gopt_bl_sim_evaluate)
        return gopt_error_set(err, GOPT_EUNSUP, "this evaluator runs on one thread");
    const gopt_bl_sim_ctx *c = p->eval_ctx;
    ctx->sim = c->sim;
    gopt_status st = gopt_sim_scratch_create(c->sim, &ctx->scratch, err);
    if (st) return st;
    q->eval_ctx = ctx;
    return GOPT_OK;
}

void gopt_bl_problem_fork_free(gopt_bl_sim_ctx *ctx) {
    gopt_sim_scratch_free(ctx->scratch);
    ctx->scratch = NULL;
}

gopt_status gopt_bl_forks_init(const gopt_bl_problem *p, int threads, gopt_bl_forks *f, gopt_error *err) {
    memset(f, 0, sizeof *f);
    int T = threads < GOPT_BL_MAX_FORKS ? threads : GOPT_BL_MAX_FORKS;
    gopt_status st = GOPT_OK;
    for (int k = 0; T > 1 && k < T; k++, f->T++) {
        gopt_error e = {0};
        if ((st = gopt_bl_problem_fork(p, &f->q[k], &f->c[k], &e))) break;
    }
    if (T > 1 && f->T == T) return GOPT_OK;
    gopt_bl_forks_free(f);
    if (st == GOPT_ENOMEM) return gopt_error_set(err, st, "no memory for a simulator scratch per thread");
    /* one thread, or p cannot be forked: every item in order, on p less its stream */
    f->T = 1;
    f->q[0] = *p;
    f->q[0].rng = NULL;
    return GOPT_OK;
}

void gopt_bl_forks_free(gopt_bl_forks *f) {
    for (int k = 0; k < f->T; k++) gopt_bl_problem_fork_free(&f->c[k]);
    memset(f, 0, sizeof *f);
}

typedef struct {
    const gopt_bl_problem *q; /* one per thread */
    int n;
    int next; /* the next item not taken (atomic): items take uneven times, threads take the next free */
    gopt_bl_item_fn fn;
    void *ctx;
} bl_par;

static void bl_par_part(void *arg, int t) {
    bl_par *w = arg;
    for (int i; (i = __atomic_fetch_add(&w->next, 1, __ATOMIC_RELAXED)) < w->n;) w->fn(w->ctx, &w->q[t], i);
}

void gopt_bl_forks_run(const gopt_bl_forks *f, int n, gopt_bl_item_fn fn, void *ctx) {
    bl_par w = {f->q, n, 0, fn, ctx};
    const int T = f->T < n ? f->T : n;
    if (T > 1) gopt_parallel_parts(T, T, bl_par_part, &w);
    else bl_par_part(&w, 0);
}

gopt_status gopt_bl_parallel(const gopt_bl_problem *p, int n, int threads, gopt_bl_item_fn fn, void *ctx,
                             gopt_error *err) {
    gopt_bl_forks f;
    gopt_status st = gopt_bl_forks_init(p, threads < n ? threads : n, &f, err);
    if (st) return st;
    gopt_bl_forks_run(&f, n, fn, ctx);
    gopt_bl_forks_free(&f);
    return GOPT_OK;
}

void gopt_bl_problem_on_sim(gopt_bl_problem *p, gopt_bl_sim_ctx *ctx, const gopt_sim *sim,
                            gopt_sim_scratch *scratch, const gopt_costmodel *cm, const gopt_bl_options *opt) {
    memset(ctx, 0, sizeof *ctx);
    ctx->sim = sim;
    ctx->scratch = scratch;
    memset(p, 0, sizeof *p);
    p->graph = gopt_sim_graph(sim);
    p->cm = cm;
    p->cost = gopt_sim_cost_table(sim);
    p->ndev = gopt_sim_num_devices(sim);
    p->opt = *opt;
    p->evaluate = gopt_bl_sim_evaluate;
    p->eval_ctx = ctx;
    p->last_peak = gopt_bl_sim_last_peak;
}

gopt_status gopt_bl_optimize(const gopt_bl_registry *r, const char *spec, const gopt_sim *sim,
                             const gopt_costmodel *cm, const gopt_bl_options *opt, gopt_decisions *d,
                             gopt_bl_outcome *out, gopt_error *err) {
    memset(d, 0, sizeof *d);
    memset(out, 0, sizeof *out);
    gopt_bl_combo c;
    gopt_status st = gopt_bl_combo_parse(r, spec, &c, err);
    if (st) return st;
    gopt_sim_scratch *scratch = NULL;
    if ((st = gopt_sim_scratch_create(sim, &scratch, err))) return st;
    gopt_bl_sim_ctx ctx;
    gopt_bl_problem p;
    gopt_bl_problem_on_sim(&p, &ctx, sim, scratch, cm, opt);
    double t0 = gopt_now_seconds();
    st = gopt_bl_combo_decide(r, &c, &p, d, err);
    out->optimize_time_s = gopt_now_seconds() - t0;
    if (!st) st = gopt_sim_run(sim, d, &out->sim, scratch, err);
    gopt_sim_scratch_free(scratch);
    return st;
}
