/* runtime.c: the runtime's entry points (gopt_runtime.h): plan the decisions, check the step fits
 * in this machine's memory, run warm-up and timed steps on the chosen backend, and keep the
 * median step's timeline for the node times, the transfers and the trace.
 *
 * The host-memory check runs the simulator under the same decisions: its peaks are what the
 * step's arenas will hold (the same model), plus the workspaces; a step above the limit is
 * refused (GOPT_EUNSUP) rather than swapping the machine. Cost: the setup (plan O(N + E), first
 * touch of every buffer), then warmup + reps steps.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt_internal.h"

void openblas_set_num_threads(int num_threads); /* declared by OpenBLAS's cblas.h on some versions only */

struct gopt_runtime {
    const gopt_graph *g;
    const gopt_costmodel *cm;
    int nd;
    gopt_sim *sim;
    gopt_sim_scratch *scr;
    rt_plan plan;
    int have_plan;
    rt_timeline *tl; /* (ntl) one per timed repetition, then one for the warm-ups */
    int ntl, med;    /* the median repetition's index, -1 before a successful run */
};

const char *gopt_rt_backend_name(gopt_rt_backend b) {
    static const char *names[] = {"cpu", "cuda"};
    return b >= 0 && b < GOPT_RT_BACKEND_COUNT ? names[b] : NULL;
}

int gopt_rt_backend_parse(const char *s) {
    for (int b = 0; b < GOPT_RT_BACKEND_COUNT; b++)
        if (s && strcmp(s, gopt_rt_backend_name((gopt_rt_backend)b)) == 0) return b;
    return -1;
}

const char *gopt_rt_clock_name(gopt_rt_clock c) {
    static const char *names[] = {"wall", "cpu", "cpu-min"};
    return c >= 0 && c < GOPT_RT_CLOCK_COUNT ? names[c] : NULL;
}

int gopt_rt_clock_parse(const char *s) {
    for (int c = 0; c < GOPT_RT_CLOCK_COUNT; c++)
        if (s && strcmp(s, gopt_rt_clock_name((gopt_rt_clock)c)) == 0) return c;
    return -1;
}

const char *gopt_rt_cuda_conv_name(gopt_rt_cuda_conv c) {
    static const char *names[] = {"default", "cudnn", "im2col"};
    return c >= 0 && c < GOPT_RT_CUDA_CONV_COUNT ? names[c] : NULL;
}

int gopt_rt_cuda_conv_parse(const char *s) {
    for (int c = GOPT_RT_CUDA_CONV_CUDNN; c < GOPT_RT_CUDA_CONV_COUNT; c++)
        if (s && strcmp(s, gopt_rt_cuda_conv_name((gopt_rt_cuda_conv)c)) == 0) return c;
    return -1;
}

int gopt_rt_cudnn_built(void) {
#ifdef GOPT_WITH_CUDNN
    return 1;
#else
    return 0;
#endif
}

gopt_rt_cuda_conv gopt_rt_cuda_conv_resolve(gopt_rt_cuda_conv c) {
    if (c != GOPT_RT_CUDA_CONV_DEFAULT) return c;
    return gopt_rt_cudnn_built() ? GOPT_RT_CUDA_CONV_CUDNN : GOPT_RT_CUDA_CONV_IM2COL;
}

typedef struct {
    double start, end;
    int32_t id; /* task t: t; copy x: -1 - x */
} rt_event;

static int cmp_event(const void *a, const void *b) {
    const rt_event *x = a, *y = b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return (x->id < y->id) - (x->id > y->id); /* tasks (>= 0) after copies at one instant */
}

static int cmp_memory(const void *a, const void *b) {
    const gopt_trace_memory *x = a, *y = b;
    return (x->t > y->t) - (x->t < y->t);
}

/* The CPU clock (gopt_rt_clock): recompose the step from each kernel's and copy's thread CPU
 * time in the run's real order (real start order is a topological order of the run: everything
 * started after what it waited for), then move the memory log to the recomposed times. */
static gopt_status replay_cpu_clock(const rt_plan *p, rt_timeline *tl, gopt_error *err) {
    int32_t ne = p->ntasks + p->nxf;
    rt_event *ev = gopt_malloc(((size_t)ne + 1) * sizeof *ev, err);
    if (!ev) return GOPT_ENOMEM;
    for (int32_t t = 0; t < p->ntasks; t++) ev[t] = (rt_event){tl->tstart[t], tl->tend[t], t};
    for (int32_t x = 0; x < p->nxf; x++) ev[p->ntasks + x] = (rt_event){tl->xstart[x], tl->xend[x], -1 - x};
    qsort(ev, (size_t)ne, sizeof *ev, cmp_event);
    double dev_free[GOPT_SIM_MAX_DEVICES] = {0}, *link_free = gopt_calloc((size_t)p->ndev * (size_t)p->ndev, sizeof(double), err);
    if (!link_free) {
        free(ev);
        return GOPT_ENOMEM;
    }
    double step = 0;
    for (int d = 0; d < p->ndev; d++) tl->busy_s[d] = 0;
    for (int32_t i = 0; i < ne; i++) {
        int32_t id = ev[i].id;
        double s;
        if (id >= 0) {
            int32_t t = id, d = p->dev[t];
            double r = 0;
            for (int32_t k = p->in_ptr[t]; k < p->in_ptr[t + 1]; k++) {
                int32_t x = p->in_xf[k];
                double ready = x >= 0 ? tl->xend[x] : tl->tend[p->task[p->in_node[k]]];
                if (ready > r) r = ready;
            }
            tl->tready[t] = r;
            s = dev_free[d] > r ? dev_free[d] : r;
            tl->tstart[t] = s;
            tl->tend[t] = dev_free[d] = s + tl->tcpu[t];
            tl->busy_s[d] += tl->tcpu[t];
            if (tl->tend[t] > step) step = tl->tend[t];
        } else {
            int32_t x = -1 - id, l = p->xf_src[x] * p->ndev + p->xf_dst[x];
            double ready = tl->tend[p->task[p->xf_node[x]]];
            s = link_free[l] > ready ? link_free[l] : ready;
            tl->xstart[x] = s;
            tl->xend[x] = link_free[l] = s + tl->xcpu[x];
            if (tl->xend[x] > step) step = tl->xend[x];
        }
    }
    tl->step_s = step;
    int64_t peak[GOPT_SIM_MAX_DEVICES];
    for (int d = 0; d < p->ndev; d++) peak[d] = -1;
    for (int64_t i = 0; i < tl->nmemlog; i++) {
        gopt_trace_memory *m = &tl->memlog[i];
        int32_t e = m->spare;
        m->t = e == 0 ? 0 : e > 0 ? ((e & 1) ? tl->tstart[(e - 1) / 2] : tl->tend[(e - 2) / 2])
                                  : ((-e & 1) ? tl->xstart[(-e - 1) / 2] : tl->xend[(-e - 2) / 2]);
        if (m->bytes > peak[m->device]) { /* the first entry at the peak, in the run's order */
            peak[m->device] = m->bytes;
            tl->peak_t[m->device] = m->t;
        }
    }
    qsort(tl->memlog, (size_t)tl->nmemlog, sizeof *tl->memlog, cmp_memory);
    free(ev);
    free(link_free);
    return GOPT_OK;
}

gopt_status gopt_rt_create(const gopt_graph *g, const gopt_costmodel *cm, gopt_runtime **out, gopt_error *err) {
    *out = NULL;
    gopt_runtime *rt = gopt_calloc(1, sizeof *rt, err);
    if (!rt) return GOPT_ENOMEM;
    rt->g = g;
    rt->cm = cm;
    rt->nd = gopt_cost_num_devices(cm);
    rt->med = -1;
    gopt_status st = gopt_sim_create(g, cm, &rt->sim, err);
    if (!st) st = gopt_sim_scratch_create(rt->sim, &rt->scr, err);
    if (st) {
        gopt_rt_free(rt);
        return st;
    }
    *out = rt;
    return GOPT_OK;
}

static void free_timelines(gopt_runtime *rt) {
    for (int i = 0; i < rt->ntl; i++) {
        free(rt->tl[i].tstart);
        free(rt->tl[i].tend);
        free(rt->tl[i].xstart);
        free(rt->tl[i].xend);
        free(rt->tl[i].tcpu);
        free(rt->tl[i].tready);
        free(rt->tl[i].ran_on);
        free(rt->tl[i].xcpu);
        free(rt->tl[i].memlog);
    }
    free(rt->tl);
    rt->tl = NULL;
    rt->ntl = 0;
    rt->med = -1;
}

void gopt_rt_free(gopt_runtime *rt) {
    if (!rt) return;
    free_timelines(rt);
    if (rt->have_plan) rt_plan_destroy(&rt->plan);
    gopt_sim_scratch_free(rt->scr);
    gopt_sim_free(rt->sim);
    free(rt);
}

int gopt_rt_num_devices(const gopt_runtime *rt) { return rt->nd; }

gopt_status rt_sim_run(gopt_runtime *rt, const gopt_decisions *d, gopt_sim_result *res, gopt_error *err) {
    return gopt_sim_run(rt->sim, d, res, rt->scr, err);
}

static gopt_status alloc_timelines(gopt_runtime *rt, int count, gopt_error *err) {
    const rt_plan *p = &rt->plan;
    rt->tl = gopt_calloc((size_t)count, sizeof *rt->tl, err);
    if (!rt->tl) return GOPT_ENOMEM;
    rt->ntl = count;
    size_t t1 = (size_t)p->ntasks + 1, x1 = (size_t)p->nxf + 1;
    size_t mcap = 2 * (size_t)p->ntasks + 2 * (size_t)p->nxf + (size_t)p->ndev;
    for (int i = 0; i < count; i++) {
        rt_timeline *tl = &rt->tl[i];
        tl->tstart = gopt_malloc(t1 * sizeof(double), err);
        tl->tend = gopt_malloc(t1 * sizeof(double), err);
        tl->xstart = gopt_malloc(x1 * sizeof(double), err);
        tl->xend = gopt_malloc(x1 * sizeof(double), err);
        tl->tcpu = gopt_calloc(t1, sizeof(double), err);
        tl->tready = gopt_calloc(t1, sizeof(double), err);
        tl->ran_on = gopt_calloc(t1, sizeof(int32_t), err);
        tl->xcpu = gopt_calloc(x1, sizeof(double), err);
        tl->memlog = gopt_malloc(mcap * sizeof *tl->memlog, err);
        if (!tl->tstart || !tl->tend || !tl->xstart || !tl->xend || !tl->tcpu || !tl->tready || !tl->ran_on || !tl->xcpu || !tl->memlog) return GOPT_ENOMEM;
    }
    return GOPT_OK;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The simulator's order of the tasks: by simulated start (a topological order; on each device the
 * order its priorities give under the simulated timing). */
static gopt_status sim_order(gopt_runtime *rt, const gopt_decisions *d, int32_t *order, gopt_error *err) {
    gopt_sim_result r;
    gopt_status st = gopt_sim_run(rt->sim, d, &r, rt->scr, err);
    if (st) return st;
    const rt_plan *p = &rt->plan;
    double *key = gopt_malloc(((size_t)p->ntasks + 1) * 2 * sizeof(double), err);
    if (!key) return GOPT_ENOMEM;
    for (int32_t t = 0; t < p->ntasks; t++) {
        key[2 * t] = gopt_sim_node_start(rt->scr, p->rep[t]);
        key[2 * t + 1] = t;
    }
    qsort(key, (size_t)p->ntasks, 2 * sizeof(double), cmp_double);
    for (int32_t i = 0; i < p->ntasks; i++) order[i] = (int32_t)key[2 * i + 1];
    free(key);
    return GOPT_OK;
}

static double host_memory_bytes(void) {
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (double)pages * (double)size : 0;
}

gopt_status gopt_rt_run(gopt_runtime *rt, const gopt_decisions *d, const gopt_rt_options *o, gopt_rt_report *rep,
                        gopt_error *err) {
    gopt_rt_options opt = o ? *o : (gopt_rt_options){0};
    if (opt.cuda_graph && opt.backend != GOPT_RT_CUDA)
        return gopt_error_set(err, GOPT_EINVAL, "runtime: a step captured as a CUDA graph needs the cuda backend");
    if (opt.cuda_conv < 0 || opt.cuda_conv >= GOPT_RT_CUDA_CONV_COUNT)
        return gopt_error_set(err, GOPT_EINVAL, "runtime: unknown CUDA convolution kernel %d", (int)opt.cuda_conv);
    if (opt.cuda_conv != GOPT_RT_CUDA_CONV_DEFAULT && opt.backend != GOPT_RT_CUDA)
        return gopt_error_set(err, GOPT_EINVAL, "runtime: a CUDA convolution kernel (%s) needs the cuda backend",
                              gopt_rt_cuda_conv_name(opt.cuda_conv));
    if (opt.cuda_conv == GOPT_RT_CUDA_CONV_CUDNN && !gopt_rt_cudnn_built())
        return gopt_error_set(err, GOPT_EUNSUP,
                              "runtime: convolutions by cuDNN asked for, but this build has no cuDNN (CMake did not "
                              "find it; --cuda-conv im2col runs them without it)");
    if (opt.warmup < 0) opt.warmup = 1;
    if (opt.reps == 0) opt.reps = 5;
    if (opt.reps < 0 || opt.reps > 100000)
        return gopt_error_set(err, GOPT_EINVAL, "runtime: %d repetitions (1 to 100000)", opt.reps);
    if (opt.host_fraction <= 0) opt.host_fraction = 0.5;
    if (opt.clock < 0 || opt.clock >= GOPT_RT_CLOCK_COUNT)
        return gopt_error_set(err, GOPT_EINVAL, "runtime: unknown clock %d", (int)opt.clock);
    if (opt.backend < 0 || opt.backend >= GOPT_RT_BACKEND_COUNT)
        return gopt_error_set(err, GOPT_EINVAL, "runtime: unknown backend %d", (int)opt.backend);
    free_timelines(rt);
    if (rt->have_plan) rt_plan_destroy(&rt->plan);
    rt->have_plan = 0;
    gopt_status st = rt_plan_build(rt->g, d, rt->nd, &rt->plan, err);
    if (st) return st;
    rt->have_plan = 1;
    const rt_plan *p = &rt->plan;
    rt_cpu *cpu = NULL;
    rt_cuda *cuda = NULL;
    int32_t *order = NULL;
    memset(rep, 0, sizeof *rep);
    double t_setup = gopt_now_seconds();
    if (opt.backend == GOPT_RT_CUDA) {
        order = gopt_malloc(((size_t)p->ntasks + 1) * sizeof(int32_t), err);
        if (!order) return GOPT_ENOMEM;
        if ((st = sim_order(rt, d, order, err)) ||
            (st = rt_cuda_create(rt->g, p, order, opt.cuda_graph, opt.cuda_conv, &cuda, err)))
            goto out;
        rt_cuda_conv_counts(cuda, &rep->conv_cudnn, &rep->conv_im2col);
    } else {
        /* what the arenas will hold at their peaks, from the same memory model */
        gopt_sim_result sr;
        if ((st = gopt_sim_run(rt->sim, d, &sr, rt->scr, err))) goto out;
        double need = 0, have = host_memory_bytes() * opt.host_fraction;
        for (int i = 0; i < rt->nd; i++) need += (double)sr.peak_memory_bytes[i];
        if (have > 0 && need > have) {
            st = gopt_error_set(err, GOPT_EUNSUP,
                                "runtime: graph '%s' needs %.3g GB of buffers at its peak under these decisions; "
                                "this machine allows %.3g GB (%.0f%% of its memory)",
                                gopt_graph_name(rt->g), need / 1e9, have / 1e9, 100 * opt.host_fraction);
            goto out;
        }
        openblas_set_num_threads(1);
        if ((st = rt_cpu_create(rt->g, p, !opt.no_pin, &cpu, err))) goto out;
        if (have > 0 && need + rt_cpu_workspace_bytes(cpu) > have) {
            st = gopt_error_set(err, GOPT_EUNSUP,
                                "runtime: graph '%s' needs %.3g GB (buffers %.3g GB + workspaces %.3g GB); this "
                                "machine allows %.3g GB",
                                gopt_graph_name(rt->g), (need + rt_cpu_workspace_bytes(cpu)) / 1e9, need / 1e9,
                                rt_cpu_workspace_bytes(cpu) / 1e9, have / 1e9);
            goto out;
        }
    }
    if ((st = alloc_timelines(rt, opt.reps + 1, err))) goto out;
    rep->setup_s = gopt_now_seconds() - t_setup;
    for (int r = 0; r < opt.warmup + opt.reps; r++) {
        rt_timeline *tl = &rt->tl[r < opt.warmup ? opt.reps : r - opt.warmup];
        st = cuda ? rt_cuda_step(cuda, tl, err) : rt_cpu_step(cpu, tl, err);
        if (!st && cpu && opt.clock != GOPT_RT_CLOCK_WALL) st = replay_cpu_clock(p, tl, err);
        if (st) goto out;
    }
    /* the median repetition (the lower one of an even count) */
    double *steps = gopt_malloc((size_t)opt.reps * 2 * sizeof(double), err);
    if (!steps) {
        st = GOPT_ENOMEM;
        goto out;
    }
    for (int r = 0; r < opt.reps; r++) {
        steps[2 * r] = rt->tl[r].step_s;
        steps[2 * r + 1] = r;
        if (r < 64) rep->steps_s[r] = rt->tl[r].step_s;
    }
    qsort(steps, (size_t)opt.reps, 2 * sizeof(double), cmp_double);
    rt->med = (int)steps[2 * ((opt.reps - 1) / 2) + 1];
    rep->reps = opt.reps;
    rep->step_min_s = steps[0];
    rep->step_max_s = steps[2 * (opt.reps - 1)];
    free(steps);
    if (cpu && opt.clock == GOPT_RT_CLOCK_CPU_MIN) {
        /* each kernel's and copy's fastest repetition, along the median step's order */
        rt_timeline *m = &rt->tl[rt->med];
        for (int r = 0; r < opt.reps; r++) {
            for (int32_t t = 0; t < p->ntasks; t++)
                if (rt->tl[r].tcpu[t] < m->tcpu[t]) m->tcpu[t] = rt->tl[r].tcpu[t];
            for (int32_t x = 0; x < p->nxf; x++)
                if (rt->tl[r].xcpu[x] < m->xcpu[x]) m->xcpu[x] = rt->tl[r].xcpu[x];
        }
        if ((st = replay_cpu_clock(p, m, err))) goto out;
    }
    const rt_timeline *tl = &rt->tl[rt->med];
    rep->step_median_s = tl->step_s;
    rep->spread = tl->step_s > 0 ? (rep->step_max_s - rep->step_min_s) / tl->step_s : 0;
    gopt_sim_result *res = &rep->res;
    res->ndev = rt->nd;
    res->step_time_s = tl->step_s;
    res->tasks = p->ntasks;
    res->transfers = p->nxf;
    res->oom_device = -1;
    for (int32_t x = 0; x < p->nxf; x++) {
        res->sent_bytes[p->xf_src[x]] += p->xf_bytes[x];
        res->transferred_bytes += p->xf_bytes[x];
    }
    for (int i = 0; i < rt->nd; i++) {
        res->busy_s[i] = tl->busy_s[i];
        res->peak_memory_bytes[i] = tl->peak[i];
        res->peak_time_s[i] = tl->peak_t[i];
        res->capacity_bytes[i] = gopt_cost_device_memory(rt->cm, i);
        double excess = (double)tl->peak[i] - res->capacity_bytes[i];
        if (excess > 0 && excess > res->oom_excess_bytes) {
            res->oom = 1;
            res->oom_device = i;
            res->oom_excess_bytes = excess;
        }
    }
out:
    rt_cpu_free(cpu);
    rt_cuda_free(cuda);
    free(order);
    if (st) free_timelines(rt);
    return st;
}

double gopt_rt_node_start(const gopt_runtime *rt, int32_t v) {
    if (rt->med < 0 || v < 0 || v >= rt->plan.n) return -1;
    return rt->tl[rt->med].tstart[rt->plan.task[v]];
}

double gopt_rt_node_end(const gopt_runtime *rt, int32_t v) {
    if (rt->med < 0 || v < 0 || v >= rt->plan.n) return -1;
    return rt->tl[rt->med].tend[rt->plan.task[v]];
}

double gopt_rt_node_ready(const gopt_runtime *rt, int32_t v) {
    if (rt->med < 0 || v < 0 || v >= rt->plan.n) return -1;
    return rt->tl[rt->med].tready[rt->plan.task[v]];
}

int gopt_rt_node_device(const gopt_runtime *rt, int32_t v) {
    if (rt->med < 0 || v < 0 || v >= rt->plan.n) return -1;
    return rt->tl[rt->med].ran_on[rt->plan.task[v]];
}

int32_t gopt_rt_num_transfers(const gopt_runtime *rt) { return rt->med < 0 ? 0 : rt->plan.nxf; }

void gopt_rt_transfer_get(const gopt_runtime *rt, int32_t i, gopt_sim_transfer *out) {
    const rt_plan *p = &rt->plan;
    const rt_timeline *tl = &rt->tl[rt->med];
    *out = (gopt_sim_transfer){p->xf_node[i], p->xf_src[i], p->xf_dst[i], p->xf_bytes[i], tl->xstart[i], tl->xend[i]};
}

gopt_status gopt_rt_trace_write(const gopt_runtime *rt, const gopt_decisions *d, const char *path, gopt_error *err) {
    if (rt->med < 0) return gopt_error_set(err, GOPT_EINVAL, "runtime trace: no finished run");
    const rt_plan *p = &rt->plan;
    if (d->n != p->n) return gopt_error_set(err, GOPT_EINVAL, "runtime trace: decisions of another graph");
    const rt_timeline *tl = &rt->tl[rt->med];
    gopt_trace_kernel *ks = gopt_malloc(((size_t)p->ntasks + 1) * sizeof *ks, err);
    gopt_sim_transfer *xs = gopt_malloc(((size_t)p->nxf + 1) * sizeof *xs, err);
    gopt_status st = GOPT_ENOMEM;
    if (ks && xs) {
        for (int32_t t = 0; t < p->ntasks; t++)
            ks[t] = (gopt_trace_kernel){p->rep[t], p->mem_ptr[t + 1] - p->mem_ptr[t], p->dev[t], p->prio[t],
                                        p->alloc[t], tl->tstart[t], tl->tend[t]};
        for (int32_t x = 0; x < p->nxf; x++) gopt_rt_transfer_get(rt, x, &xs[x]);
        char title[300];
        snprintf(title, sizeof title, "gopt run: %s on %d devices (measured)", gopt_graph_name(rt->g), rt->nd);
        gopt_trace_timeline t = {title, rt->nd, p->ntasks, ks, p->nxf, xs, tl->nmemlog, tl->memlog};
        st = gopt_trace_timeline_write(rt->g, &t, path, err);
    }
    free(ks);
    free(xs);
    return st;
}

double gopt_rt_evaluate(void *ctx, const gopt_decisions *d, int *oom) {
    gopt_rt_eval_ctx *c = ctx;
    gopt_error_clear(&c->err);
    if (gopt_rt_run(c->rt, d, &c->opt, &c->last, &c->err)) {
        if (oom) *oom = 0;
        return -1;
    }
    if (oom) *oom = c->last.res.oom ? 1 + c->last.res.oom_device : 0;
    return c->last.res.step_time_s;
}
