/* registry.c: the method table, combinations, the evaluation wrapper and
 * small shared helpers (gopt_baselines.h).
 *
 * A combination runs its parts in kind order (placement, schedule, fusion,
 * joint) on one decisions array and is validated at the end; the memory
 * model is checked too, so no combination hands back a placement that
 * overflows a device. Registry lookups are linear (a few dozen entries).
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bl_internal.h"

static const char *KIND_NAMES[GOPT_BL_KIND_COUNT] = {"placement", "schedule", "fusion", "joint"};

const char *gopt_bl_kind_name(gopt_bl_kind k) {
    return (int)k >= 0 && k < GOPT_BL_KIND_COUNT ? KIND_NAMES[k] : NULL;
}

static const gopt_bl_method BUILTIN[] = {
    {"single", GOPT_BL_PLACEMENT, gopt_bl_place_single,
     "everything on device 0; when it does not fit, the least-bad contiguous split"},
    {"expert", GOPT_BL_PLACEMENT, gopt_bl_place_expert,
     "per-family hand rules: RNN/Transformer layers split in order, CNNs on one device when they fit"},
    {"metis", GOPT_BL_PLACEMENT, gopt_bl_place_metis,
     "METIS k-way partition: vertex weights = op time, edge weights = tensor bytes"},
    {"heft", GOPT_BL_PLACEMENT, gopt_bl_place_heft,
     "HEFT: upward ranks, insertion-based earliest finish time, memory-aware"},
    {"mtopo", GOPT_BL_PLACEMENT, gopt_bl_place_mtopo,
     "Baechi m-TOPO: topological order, equal compute per device, memory-capped"},
    {"metf", GOPT_BL_PLACEMENT, gopt_bl_place_metf, "Baechi m-ETF: earliest task first with memory constraints"},
    {"msct", GOPT_BL_PLACEMENT, gopt_bl_place_msct,
     "Baechi m-SCT: ETF keeping favourite children with their parents, memory-aware"},
    {"fifo", GOPT_BL_SCHEDULE, gopt_bl_schedule_fifo, "topological order priorities (earlier first)"},
    {"cp", GOPT_BL_SCHEDULE, gopt_bl_schedule_cp, "critical path: upward rank on the chosen placement"},
    {"none", GOPT_BL_FUSION, gopt_bl_fuse_none, "no fusion"},
    {"xla", GOPT_BL_FUSION, gopt_bl_fuse_xla,
     "XLA-like greedy producer-into-consumer fusion when the cost model says it saves time"},
    {"xlamo", GOPT_BL_FUSION, gopt_bl_fuse_xlamo,
     "xla with multi-output producers: one whose result also leaves the group joins when no path comes back"},
    {"tvm", GOPT_BL_FUSION, gopt_bl_fuse_tvm,
     "TVM-like rules: elementwise/injective chains into their producer, reductions last"},
    {"sa", GOPT_BL_JOINT, gopt_bl_anneal,
     "simulated annealing over placement, priorities and fusion, driven by the evaluator"},
};

void gopt_bl_registry_init(gopt_bl_registry *r) {
    memset(r, 0, sizeof *r);
    for (size_t i = 0; i < sizeof BUILTIN / sizeof BUILTIN[0]; i++) r->methods[r->count++] = BUILTIN[i];
}

gopt_status gopt_bl_registry_add(gopt_bl_registry *r, const gopt_bl_method *m, gopt_error *err) {
    if (!m->name || !*m->name) return gopt_error_set(err, GOPT_EINVAL, "method name is empty");
    for (const char *c = m->name; *c; c++)
        if (!(islower((unsigned char)*c) || isdigit((unsigned char)*c) || *c == '_' || *c == '-'))
            return gopt_error_set(err, GOPT_EINVAL, "method name '%s': character '%c' is not [a-z0-9_-]", m->name, *c);
    if ((int)m->kind < 0 || m->kind >= GOPT_BL_KIND_COUNT)
        return gopt_error_set(err, GOPT_EINVAL, "method '%s': kind %d is not a kind", m->name, (int)m->kind);
    if (!m->decide) return gopt_error_set(err, GOPT_EINVAL, "method '%s': no decide function", m->name);
    if (gopt_bl_registry_find(r, m->name))
        return gopt_error_set(err, GOPT_EINVAL, "method '%s' is already registered", m->name);
    if (r->count >= GOPT_BL_MAX_METHODS)
        return gopt_error_set(err, GOPT_EINVAL, "method '%s': the registry is full (%d methods)", m->name,
                              GOPT_BL_MAX_METHODS);
    r->methods[r->count++] = *m;
    return GOPT_OK;
}

const gopt_bl_method *gopt_bl_registry_find(const gopt_bl_registry *r, const char *name) {
    for (int i = 0; i < r->count; i++)
        if (strcmp(r->methods[i].name, name) == 0) return &r->methods[i];
    return NULL;
}

void gopt_bl_registry_describe(const gopt_bl_registry *r, gopt_buf *b) {
    for (int k = 0; k < GOPT_BL_KIND_COUNT; k++) {
        int any = 0;
        for (int i = 0; i < r->count; i++) {
            if (r->methods[i].kind != (gopt_bl_kind)k) continue;
            gopt_buf_printf(b, "%s%s", any ? " " : (k ? "; " : ""), any ? "" : KIND_NAMES[k]);
            gopt_buf_printf(b, "%s%s", any ? "" : ": ", r->methods[i].name);
            any = 1;
        }
    }
}

static gopt_status refuse(const gopt_bl_registry *r, gopt_error *err, const char *fmt, const char *a, const char *b2) {
    gopt_buf b;
    gopt_buf_init(&b);
    gopt_buf_printf(&b, fmt, a, b2);
    gopt_buf_puts(&b, " (valid methods, at most one per kind, joined by '+': ");
    gopt_bl_registry_describe(r, &b);
    gopt_buf_puts(&b, ")");
    gopt_status st = gopt_error_set(err, GOPT_EINVAL, "%s", b.data ? b.data : "bad method");
    gopt_buf_destroy(&b);
    return st;
}

gopt_status gopt_bl_combo_parse(const gopt_bl_registry *r, const char *spec, gopt_bl_combo *c, gopt_error *err) {
    memset(c, 0, sizeof *c);
    if (!spec || !*spec) return refuse(r, err, "empty method%s%s", "", "");
    const char *s = spec, *at = strchr(spec, '@'), *end = at ? at : spec + strlen(spec);
    if (at) { /* "@sS": the combination's own seed */
        char *e = NULL;
        const int digits = at[1] == 's' && at[2] >= '0' && at[2] <= '9';
        errno = 0;
        const unsigned long long v = digits ? strtoull(at + 2, &e, 10) : 0;
        if (!digits || *e || errno)
            return gopt_error_set(err, GOPT_EINVAL,
                                  "method '%s': '%s' is not a seed suffix '@sS' (S a non-negative decimal integer)",
                                  spec, at);
        c->seeded = 1;
        c->seed = (uint64_t)v;
    }
    while (1) {
        const char *e = memchr(s, '+', (size_t)(end - s));
        size_t len = e ? (size_t)(e - s) : (size_t)(end - s);
        char name[64];
        if (len == 0 || len >= sizeof name) return refuse(r, err, "method '%s': empty or overlong part%s", spec, "");
        memcpy(name, s, len);
        name[len] = 0;
        const gopt_bl_method *m = gopt_bl_registry_find(r, name);
        if (!m) return refuse(r, err, "method '%s': unknown name '%s'", spec, name);
        if (c->part[m->kind]) {
            gopt_error_set(err, GOPT_EINVAL, "method '%s': two %s methods ('%s' and '%s')", spec, KIND_NAMES[m->kind],
                           c->part[m->kind]->name, m->name);
            return GOPT_EINVAL;
        }
        c->part[m->kind] = m;
        if (!e) break;
        s = e + 1;
    }
    return GOPT_OK;
}

void gopt_bl_place_memo_free(gopt_bl_place_memo *m) {
    gopt_decisions_destroy(&m->d);
    gopt_decisions_destroy(&m->fd);
    free(m->fgroup);
    memset(m, 0, sizeof *m);
}

/* The fusion part m on d: from memo when it ran m on the same problem, devices and groups. */
static gopt_status fuse_memo(const gopt_bl_method *m, const gopt_bl_problem *q, const gopt_bl_problem *p,
                             gopt_bl_place_memo *memo, gopt_decisions *d, gopt_error *err) {
    if (!memo) return m->decide(q, d, err);
    const size_t bytes = sizeof(int32_t) * (size_t)d->n;
    if (memo->fuse == m && memo->fuse_p == p && memo->fd.n == d->n && !memcmp(memo->fd.device, d->device, bytes) &&
        !memcmp(memo->fd.group, d->group, bytes)) {
        memcpy(d->group, memo->fgroup, bytes);
        return GOPT_OK;
    }
    memo->fuse = NULL;
    if (memo->fd.n != d->n) {
        gopt_decisions_destroy(&memo->fd);
        free(memo->fgroup);
        memo->fgroup = NULL;
        if (gopt_decisions_init(&memo->fd, d->n, NULL) || !(memo->fgroup = malloc(bytes ? bytes : 1))) {
            gopt_decisions_destroy(&memo->fd);
            return m->decide(q, d, err); /* no room to remember: run it */
        }
    }
    gopt_decisions_copy(&memo->fd, d);
    gopt_status st = m->decide(q, d, err);
    if (st) return st;
    memcpy(memo->fgroup, d->group, bytes);
    memo->fuse = m;
    memo->fuse_p = p;
    return GOPT_OK;
}

/* The placement part m at the first attempt on q (whose stream is the combination's own, `own`):
 * from memo when it holds m's answer at q's seed, else run and, with a memo, kept there. */
static gopt_status place_first(const gopt_bl_method *m, const gopt_bl_problem *q, int own, gopt_bl_place_memo *memo,
                               gopt_decisions *d, gopt_error *err) {
    if (!memo || !own) return m->decide(q, d, err);
    if (memo->valid && memo->place == m && memo->seed == q->opt.seed) {
        if (memo->st) {
            if (err) *err = memo->err;
            return memo->st;
        }
        gopt_decisions_copy(d, &memo->d);
        *q->rng = memo->rng;
        return GOPT_OK;
    }
    gopt_status st = m->decide(q, d, err);
    if (st == GOPT_ENOMEM) return st; /* not an answer: nothing kept */
    if (memo->d.n != d->n) {
        gopt_decisions_destroy(&memo->d);
        memo->valid = 0;
        gopt_status s2 = gopt_decisions_init(&memo->d, d->n, NULL);
        if (s2) return st; /* no memo, the answer stands */
    }
    memo->valid = 1;
    memo->place = m;
    memo->seed = q->opt.seed;
    memo->st = st;
    memset(&memo->err, 0, sizeof memo->err);
    if (st && err) memo->err = *err;
    if (!st) gopt_decisions_copy(&memo->d, d);
    memo->rng = *q->rng;
    return st;
}

gopt_status gopt_bl_combo_decide(const gopt_bl_registry *r, const gopt_bl_combo *c, const gopt_bl_problem *p,
                                 gopt_decisions *d, gopt_error *err) {
    return gopt_bl_combo_decide_memo(r, c, p, NULL, d, NULL, err);
}

gopt_status gopt_bl_combo_decide_memo(const gopt_bl_registry *r, const gopt_bl_combo *c, const gopt_bl_problem *p,
                                      gopt_bl_place_memo *memo, gopt_decisions *d, double *step, gopt_error *err) {
    memset(d, 0, sizeof *d);
    if (step) *step = NAN;
    double judged = NAN; /* the evaluator's step of d as it stands, when the last check judged it */
    const gopt_frozen *f = gopt_graph_frozen(p->graph);
    if (!f) return gopt_error_set(err, GOPT_EINVAL, "graph '%s' is not finalized", gopt_graph_name(p->graph));
    if (p->ndev < 1 || p->ndev > gopt_cost_num_devices(p->cm) || p->cost->ndev < p->ndev || p->cost->n != f->n)
        return gopt_error_set(err, GOPT_EINVAL, "%d devices asked for; the cost model has %d", p->ndev,
                              gopt_cost_num_devices(p->cm));
    gopt_status st = gopt_decisions_init(d, f->n, err);
    if (st) return st;
    int nparts = 0;
    for (int k = 0; k < GOPT_BL_KIND_COUNT; k++) nparts += c->part[k] != NULL;
    gopt_decisions prev = {0};
    static const char *DEFAULTS[GOPT_BL_KIND_COUNT] = {"single", "fifo", "none", NULL};
    gopt_bl_problem q = *p;
    gopt_rng local;
    if (c->seeded) { /* "@sS": its own seed and stream, whatever the problem's */
        q.opt.seed = c->seed;
        q.rng = NULL;
    }
    if (!q.rng) {
        gopt_rng_seed(&local, q.opt.seed);
        q.rng = &local;
    }
    double frac = q.opt.mem_fraction > 0 ? q.opt.mem_fraction : 1.0;
    int have_prev = 0;
    for (int attempt = 0;; attempt++) {
        gopt_decisions_set_default(d, f);
        for (int k = 0; k < GOPT_BL_JOINT; k++) {
            const gopt_bl_method *m = c->part[k];
            if (!m) m = gopt_bl_registry_find(r, DEFAULTS[k]);
            if (!m) continue;
            st = attempt == 0 && k == GOPT_BL_PLACEMENT ? place_first(m, &q, q.rng == &local, memo, d, err)
                 : k == GOPT_BL_FUSION                  ? fuse_memo(m, &q, p, memo, d, err)
                                                        : m->decide(&q, d, err);
            if (st) {
                if (nparts > 1) gopt_error_prefix(err, "%s", m->name); /* one part: the caller names the method */
                break;
            }
        }
        if (st == GOPT_EUNSUP && have_prev) { /* tighter did not fit: keep the last that did */
            gopt_decisions_copy(d, &prev);
            gopt_error_clear(err);
            st = GOPT_OK;
            break;
        }
        if (st) goto out;
        /* our memory model leaves out tensor lifetimes: when the evaluator reports OOM, correct the
         * model's capacity of each device that overflows by the ratio of the model's count to the
         * evaluator's peak (x0.95), or without peaks cap the device that overflows at 75% of what the
         * model says it holds (all at 75% when the evaluator cannot tell which); place again */
        if (!p->evaluate || attempt == 6) break;
        int oom = 0;
        double t = p->evaluate(p->eval_ctx, d, &oom);
        if (!oom) judged = t;
        if (!oom || !isfinite(t) || t < 0) break;
        if (!have_prev && (st = gopt_decisions_init(&prev, f->n, err))) goto out;
        gopt_decisions_copy(&prev, d);
        have_prev = 1;
        double used[GOPT_SIM_MAX_DEVICES], peak[GOPT_SIM_MAX_DEVICES];
        int fixed = 0;
        if (p->ndev <= GOPT_SIM_MAX_DEVICES) {
            gopt_bl_memory_use(&q, d, used);
            if (p->last_peak && p->last_peak(p->eval_ctx, peak))
                for (int k = 0; k < p->ndev; k++) {
                    double phys = gopt_cost_device_memory(p->cm, k);
                    if (peak[k] <= phys || used[k] <= 0) continue;
                    /* the evaluator sees peak where the model counts used: scale the model's cap */
                    double cap = 0.95 * frac * phys * used[k] / peak[k], old = gopt_bl_device_capacity(&q, k);
                    q.opt.dev_cap[k] = cap < old ? cap : 0.95 * old;
                    fixed = 1;
                }
            if (!fixed && oom > 0 && oom <= p->ndev) {
                q.opt.dev_cap[oom - 1] = 0.75 * (used[oom - 1] > 0 ? used[oom - 1] : gopt_bl_device_capacity(&q, oom - 1));
                fixed = 1;
            }
        }
        if (!fixed) {
            frac *= 0.75;
            q.opt.mem_fraction = frac;
        }
    }
    /* the placement parts answer to the memory model; a joint method (sa keeps the model, the GO
     * policy does not know it) answers to the evaluator */
    if ((st = gopt_bl_memory_check(p, d, err))) goto out;
    /* the joint method gets the caller's memory budget: the capacities tightened above correct the
     * model for the placement parts' own answer, not for what the joint method will decide */
    q.opt.mem_fraction = p->opt.mem_fraction;
    memcpy(q.opt.dev_cap, p->opt.dev_cap, sizeof q.opt.dev_cap);
    if (c->part[GOPT_BL_JOINT] && (st = c->part[GOPT_BL_JOINT]->decide(&q, d, err))) {
        if (nparts > 1) gopt_error_prefix(err, "%s", c->part[GOPT_BL_JOINT]->name);
        goto out;
    }
    if ((st = gopt_decisions_validate(d, p->graph, p->ndev, err))) {
        gopt_error_prefix(err, "internal: a method produced invalid decisions");
        st = GOPT_EINTERNAL;
    }
    if (!st && step && !c->part[GOPT_BL_JOINT]) *step = judged; /* a joint part changed d after the check */
out:
    gopt_decisions_destroy(&prev);
    return st;
}

double gopt_bl_evaluate(const gopt_bl_problem *p, const gopt_decisions *d, int *oom) {
    *oom = 0;
    if (p->evaluate) return p->evaluate(p->eval_ctx, d, oom);
    return gopt_bl_estimate(p, d, oom);
}

/* ---- small shared helpers ------------------------------------------------- */
double bl_xfer(const gopt_bl_problem *p, int a, int b, double bytes) {
    return a == b ? 0.0 : gopt_cost_transfer_time(p->cm, a, b, bytes);
}

double bl_xfer_mean(const gopt_bl_problem *p, double bytes) {
    if (p->ndev < 2) return 0.0;
    double s = 0;
    for (int a = 0; a < p->ndev; a++)
        for (int b = 0; b < p->ndev; b++)
            if (a != b) s += gopt_cost_transfer_time(p->cm, a, b, bytes);
    return s / (p->ndev * (p->ndev - 1));
}

int bl_is_deferred(const gopt_bl_problem *p, int32_t v) {
    const gopt_frozen *f = gopt_graph_frozen(p->graph);
    return f->in_ptr[v + 1] == f->in_ptr[v] && gopt_op_class_is_data(f->op_class[v]);
}

/* ---- heap ------------------------------------------------------------------ */
static int heap_less(const bl_heap_item *a, const bl_heap_item *b) {
    return a->key < b->key || (a->key == b->key && a->id < b->id);
}

int bl_heap_push(bl_heap *h, double key, int32_t id) {
    if (h->len == h->cap) {
        int32_t cap = h->cap ? 2 * h->cap : 64;
        bl_heap_item *a = realloc(h->a, (size_t)cap * sizeof *a);
        if (!a) return 0;
        h->a = a;
        h->cap = cap;
    }
    int32_t i = h->len++;
    bl_heap_item it = {key, id};
    while (i > 0) {
        int32_t up = (i - 1) / 2;
        if (!heap_less(&it, &h->a[up])) break;
        h->a[i] = h->a[up];
        i = up;
    }
    h->a[i] = it;
    return 1;
}

bl_heap_item bl_heap_pop(bl_heap *h) {
    bl_heap_item top = h->a[0], last = h->a[--h->len];
    int32_t i = 0;
    while (1) {
        int32_t c = 2 * i + 1;
        if (c >= h->len) break;
        if (c + 1 < h->len && heap_less(&h->a[c + 1], &h->a[c])) c++;
        if (!heap_less(&h->a[c], &last)) break;
        h->a[i] = h->a[c];
        i = c;
    }
    if (h->len) h->a[i] = last;
    return top;
}

void bl_heap_destroy(bl_heap *h) {
    free(h->a);
    memset(h, 0, sizeof *h);
}

gopt_status gopt_bl_optimize_each(const gopt_bl_registry *r, const char *const *methods, int nm, const gopt_sim *sim,
                                  const gopt_costmodel *cm, const gopt_bl_options *opt, gopt_decisions *ds,
                                  const char **names, int *n, gopt_bl_skip_fn skip, void *ctx, gopt_error *err) {
    *n = 0;
    for (int j = 0; j < nm; j++) {
        gopt_bl_outcome oc;
        gopt_error e = {0};
        gopt_status st = gopt_bl_optimize(r, methods[j], sim, cm, opt, &ds[*n], &oc, &e);
        if (st == GOPT_OK) {
            names[(*n)++] = methods[j];
            continue;
        }
        gopt_decisions_destroy(&ds[*n]);
        if (st != GOPT_EUNSUP) {
            if (err) *err = e;
            return st;
        }
        if (skip) skip(ctx, methods[j], e.msg);
    }
    return GOPT_OK;
}
