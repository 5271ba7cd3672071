/* gopt_baselines.h: the classical optimizers, behind the optimizer seam.
 *
 * Every method is a function decide(problem, decisions) registered in a
 * table (gopt_bl_registry) with its name, its kind (placement, schedule,
 * fusion, or joint: deciding everything) and a one-line doc. A combination
 * "heft+cp+xla" names at most one method per kind; it runs placement, then
 * schedule, then fusion, then a joint method (which refines what the others
 * built). Missing parts default to single, fifo and none. A method only
 * writes its own field of the decisions (device, priority or group) and may
 * read the fields written before it.
 *
 * The registry is a value owned by the caller (no global state): the
 * built-ins are filled by gopt_bl_registry_init and more methods (the GO
 * policy) are added with gopt_bl_registry_add without editing this module.
 *
 * Memory model (docs/baselines.md): a node needs its parameter bytes (all
 * step) plus, for forward-phase and phase-less non-parameter nodes, its
 * output bytes times act_factor (activations live until the backward pass).
 * Backward and optimizer outputs are transient and not counted. A device
 * holds mem_fraction of its capacity. Every placer keeps each device within
 * it and places colocation groups as units; when none can, it returns
 * GOPT_EUNSUP with a message saying what does not fit.
 *
 * Evaluator: an optional callback (the simulator, wired in by the command);
 * without one, gopt_bl_estimate, a quick list-scheduling replay on the cost
 * model, stands in.
 */
#ifndef GOPT_BASELINES_H
#define GOPT_BASELINES_H

#include <stdint.h>

#include "gopt_common.h"
#include "gopt_cost.h"
#include "gopt_decisions.h"
#include "gopt_graph.h"
#include "gopt_sim.h"

typedef enum {
    GOPT_BL_PLACEMENT = 0,
    GOPT_BL_SCHEDULE,
    GOPT_BL_FUSION,
    GOPT_BL_JOINT,
    GOPT_BL_KIND_COUNT
} gopt_bl_kind;

const char *gopt_bl_kind_name(gopt_bl_kind k); /* "placement", ...; NULL out of range */

/* Step time in seconds of decisions d. *oom: 0 when every device fits; when
 * one runs out of memory, 1 + the index of the device that overflows most,
 * or -1 when the evaluator cannot tell which (any nonzero value is OOM).
 * A negative or non-finite return is an evaluation failure. */
typedef double (*gopt_bl_evaluate_fn)(void *ctx, const gopt_decisions *d, int *oom);

typedef struct {
    uint64_t seed;       /* for methods that draw (metis, sa) */
    double budget_s;     /* sa: wall-clock budget; 0 = 10 s */
    long max_evals;      /* sa: evaluations cap; 0 = none. Set it (with a
                            generous budget) for bit-reproducible runs. */
    double mem_fraction; /* usable fraction of device memory; 0 = 1.0 */
    double act_factor;   /* activation estimate multiplier; 0 = 1.0 */
    double dev_cap[GOPT_SIM_MAX_DEVICES]; /* per-device cap in bytes under the memory
                            model when > 0 (set by the OOM feedback of
                            gopt_bl_combo_decide); 0 = none */
} gopt_bl_options;

typedef struct {
    const gopt_graph *graph;      /* finalized */
    const gopt_costmodel *cm;     /* transfer times, device memory */
    const gopt_cost_table *cost;  /* built for graph with cm */
    int ndev;                     /* devices used: 1..gopt_cost_num_devices(cm) */
    gopt_bl_options opt;
    gopt_rng *rng;                /* may be NULL: one seeded from opt.seed is used */
    gopt_bl_evaluate_fn evaluate; /* may be NULL: gopt_bl_estimate */
    void *eval_ctx;
    /* Optional (may be NULL): the peak bytes per device (ndev values into
     * peak) of the last evaluate call; returns 0 when it cannot tell. */
    int (*last_peak)(void *eval_ctx, double *peak);
} gopt_bl_problem;

/* Fill the field(s) of d the method's kind owns. d is initialised for the
 * graph; fields of earlier kinds are set. GOPT_EUNSUP when no valid
 * solution exists (message says why). */
typedef gopt_status (*gopt_bl_decide_fn)(const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err);

typedef struct {
    const char *name; /* [a-z0-9_-]+, unique */
    gopt_bl_kind kind;
    gopt_bl_decide_fn decide;
    const char *doc; /* one line */
} gopt_bl_method;

#define GOPT_BL_MAX_METHODS 48

typedef struct {
    int count;
    gopt_bl_method methods[GOPT_BL_MAX_METHODS];
} gopt_bl_registry;

/* The built-in methods. */
void gopt_bl_registry_init(gopt_bl_registry *r);
/* Add a method (strings must outlive the registry). GOPT_EINVAL for a
 * duplicate or malformed name, a full table, a bad kind. */
gopt_status gopt_bl_registry_add(gopt_bl_registry *r, const gopt_bl_method *m, gopt_error *err);
const gopt_bl_method *gopt_bl_registry_find(const gopt_bl_registry *r, const char *name);
/* "placement: single expert ...; schedule: ...": the valid names, by kind. */
void gopt_bl_registry_describe(const gopt_bl_registry *r, gopt_buf *b);

/* A parsed combination. */
typedef struct {
    const gopt_bl_method *part[GOPT_BL_KIND_COUNT]; /* NULL: the kind's default */
    int seeded;                                     /* 1: run at seed, not the problem's (a spec's "@sS") */
    uint64_t seed;
} gopt_bl_combo;

/* Parse "a+b+c", optionally ending in "@sS" (S a non-negative decimal integer): each name
 * known, at most one per kind. "@sS" runs the whole combination at seed S instead of the
 * problem's (opt.seed, and a random stream of its own seeded from S): "metis+cp+xla@s3" is
 * METIS's partition at seed 3, the draw bench_transfer's table and GO's styles name so. The
 * message of a refusal lists the valid names. */
gopt_status gopt_bl_combo_parse(const gopt_bl_registry *r, const char *spec, gopt_bl_combo *c, gopt_error *err);
/* Run the combination: d is initialised here (caller destroys it, also on
 * error). The result is validated (gopt_decisions_validate); what the
 * placement, schedule and fusion parts built is checked against the memory
 * model (a joint method answers to the evaluator instead). When p->evaluate
 * reports OOM for the placement, the placement parts run again with the
 * model's capacity of each overflowing device scaled by (what the model
 * says it holds / the evaluator's peak) x 0.95 when last_peak is given, else
 * the overflowing device capped at 75% of what the model says it holds (all
 * devices at 75% when the evaluator cannot tell which); 6 rounds at most. */
gopt_status gopt_bl_combo_decide(const gopt_bl_registry *r, const gopt_bl_combo *c, const gopt_bl_problem *p,
                                 gopt_decisions *d, gopt_error *err);

/* The same with a memo of the first attempt's placement, for several combinations with the same
 * placement part run one after another on the same problem (GO's hint table runs each placer with
 * five schedule+fusion combinations): the first run keeps the placement part's answer (the
 * decisions after it, or its refusal, and the combination's random stream after it); a later run
 * with that placement part at that seed takes it instead of placing again. Only the first attempt
 * (the problem's memory budget) and only a combination with its own stream (p->rng NULL, or a
 * seeded one) use it; the decisions are those of gopt_bl_combo_decide. memo starts zeroed and is
 * released with gopt_bl_place_memo_free; one thread at a time. It keeps the last fusion part's
 * answer too, for the same fusion method on the same placement. step, when not NULL, receives the
 * evaluator's step time of the decisions returned when the run already judged exactly them (the
 * out-of-memory check of its last attempt found them fitting, and no joint part followed), else
 * NAN: a caller that simulates every answer (the hint table) need not simulate it again. */
typedef struct {
    int valid;
    const gopt_bl_method *place;
    uint64_t seed;
    gopt_status st;   /* the placement part's status; its message in err */
    gopt_error err;
    gopt_decisions d; /* the decisions after the placement part */
    gopt_rng rng;     /* the combination's stream after it */
    /* the last fusion part run: its method, problem, and the devices and groups it read (fd.device,
     * fd.group) and wrote (fgroup). A fusion pass reads neither priorities nor the stream, so a
     * later combination with the same placement (the row's cp and fifo twins) takes its groups. */
    const gopt_bl_method *fuse;
    const gopt_bl_problem *fuse_p;
    gopt_decisions fd;
    int32_t *fgroup;
} gopt_bl_place_memo;
gopt_status gopt_bl_combo_decide_memo(const gopt_bl_registry *r, const gopt_bl_combo *c, const gopt_bl_problem *p,
                                      gopt_bl_place_memo *memo, gopt_decisions *d, double *step,
                                      gopt_error *err);
void gopt_bl_place_memo_free(gopt_bl_place_memo *m);

/* ---- memory model ------------------------------------------------------ */
double gopt_bl_node_memory(const gopt_bl_problem *p, int32_t v);
double gopt_bl_device_capacity(const gopt_bl_problem *p, int dev);
/* Bytes per device of decisions d into used (ndev). */
void gopt_bl_memory_use(const gopt_bl_problem *p, const gopt_decisions *d, double *used);
/* GOPT_EUNSUP naming the first device over capacity. */
gopt_status gopt_bl_memory_check(const gopt_bl_problem *p, const gopt_decisions *d, gopt_error *err);

/* ---- evaluation ---------------------------------------------------------- */
/* The baselines' quick estimate: an event-driven replay where each device
 * runs its ready kernels (fused groups as one) highest priority first and a
 * cross-device edge delays its consumer by the transfer time (no link
 * contention); *oom from the memory model. O((N + E) log N). Returns -1 when
 * out of memory for scratch. */
double gopt_bl_estimate(const gopt_bl_problem *p, const gopt_decisions *d, int *oom);
/* p->evaluate when set, else gopt_bl_estimate. */
double gopt_bl_evaluate(const gopt_bl_problem *p, const gopt_decisions *d, int *oom);

/* ---- the built-in methods (also reachable through the registry) -------- */
gopt_status gopt_bl_place_single(const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err);
gopt_status gopt_bl_place_expert(const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err);
gopt_status gopt_bl_place_metis(const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err);
gopt_status gopt_bl_place_heft(const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err);
gopt_status gopt_bl_place_mtopo(const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err);
gopt_status gopt_bl_place_metf(const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err);
gopt_status gopt_bl_place_msct(const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err);
gopt_status gopt_bl_schedule_fifo(const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err);
gopt_status gopt_bl_schedule_cp(const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err);
gopt_status gopt_bl_fuse_none(const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err);
gopt_status gopt_bl_fuse_xla(const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err);
gopt_status gopt_bl_fuse_xlamo(const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err);
gopt_status gopt_bl_fuse_tvm(const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err);
gopt_status gopt_bl_anneal(const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err);

/* ---- running a method against the simulator (run.c) -------------------------- */
/* The evaluator over the simulator: ctx is a gopt_bl_sim_ctx. A failed run
 * returns -1. */
typedef struct {
    const gopt_sim *sim;
    gopt_sim_scratch *scratch;
    gopt_sim_result last; /* of the last successful run */
    int have_last;
} gopt_bl_sim_ctx;
double gopt_bl_sim_evaluate(void *ctx, const gopt_decisions *d, int *oom);
/* last_peak for gopt_bl_sim_ctx: the last run's peak_memory_bytes. */
int gopt_bl_sim_last_peak(void *ctx, double *peak);
/* The problem of sim's graph on its devices, judged by the simulator: fills *ctx (sim,
 * scratch: borrowed, both must outlive p) and *p (cost model cm, options opt). */
void gopt_bl_problem_on_sim(gopt_bl_problem *p, gopt_bl_sim_ctx *ctx, const gopt_sim *sim,
                            gopt_sim_scratch *scratch, const gopt_costmodel *cm, const gopt_bl_options *opt);

/* Problems judged on several threads at once. gopt_bl_problem_fork: a problem like p whose
 * evaluator may run on another thread beside p's (the simulator's evaluator gets its own scratch
 * in *ctx; the estimate needs none) and without p's random stream (rng NULL: a method that draws
 * seeds its own from opt.seed); release with gopt_bl_problem_fork_free. GOPT_EUNSUP when p's
 * evaluator is another (one that measures owns the machine). */
gopt_status gopt_bl_problem_fork(const gopt_bl_problem *p, gopt_bl_problem *q, gopt_bl_sim_ctx *ctx,
                                 gopt_error *err);
void gopt_bl_problem_fork_free(gopt_bl_sim_ctx *ctx);
/* fn(ctx, q, i) for every item i = 0..n-1 on up to `threads` threads, each thread on its own fork
 * q of p (each takes the next item no thread has taken); on one thread, or when p cannot be forked,
 * every item runs in order on a copy of p without its random stream. So an item never draws from
 * a stream another item moved, a fork judges as p does, and what the items compute does not
 * depend on `threads` when fn writes only what item i owns. GOPT_ENOMEM when a fork's scratch
 * cannot be had. gopt_bl_parallel makes the forks for one call; a caller with many calls makes
 * them once (gopt_bl_forks_init: the same fallback to one copy of p), runs each call with
 * gopt_bl_forks_run and releases them with gopt_bl_forks_free. */
typedef void (*gopt_bl_item_fn)(void *ctx, const gopt_bl_problem *q, int i);
gopt_status gopt_bl_parallel(const gopt_bl_problem *p, int n, int threads, gopt_bl_item_fn fn, void *ctx,
                             gopt_error *err);
#define GOPT_BL_MAX_FORKS 16
typedef struct {
    int T; /* threads: forks q[0..T-1], or T = 1 and q[0] a copy of p */
    gopt_bl_problem q[GOPT_BL_MAX_FORKS];
    gopt_bl_sim_ctx c[GOPT_BL_MAX_FORKS];
} gopt_bl_forks;
gopt_status gopt_bl_forks_init(const gopt_bl_problem *p, int threads, gopt_bl_forks *f, gopt_error *err);
void gopt_bl_forks_run(const gopt_bl_forks *f, int n, gopt_bl_item_fn fn, void *ctx);
void gopt_bl_forks_free(gopt_bl_forks *f);

typedef struct {
    double optimize_time_s; /* wall time of the method itself */
    gopt_sim_result sim;    /* the simulated step under the decisions */
} gopt_bl_outcome;

/* Parse `spec`, run it on sim's graph and devices with the simulator as the
 * evaluator, then simulate the result. d is initialised here (caller
 * destroys it). GOPT_EUNSUP when the method finds no valid solution. */
gopt_status gopt_bl_optimize(const gopt_bl_registry *r, const char *spec, const gopt_sim *sim,
                             const gopt_costmodel *cm, const gopt_bl_options *opt, gopt_decisions *d,
                             gopt_bl_outcome *out, gopt_error *err);
/* Run each of the nm methods (specs) on sim's graph: ds[*n] and names[*n] receive, in order,
 * the methods that produced decisions (the caller destroys ds[0..*n-1]). A method without a
 * valid solution (GOPT_EUNSUP) is skipped, and skip(ctx, method, reason) is told when given;
 * any other failure stops the loop and is returned, the decisions made before it kept. */
typedef void (*gopt_bl_skip_fn)(void *ctx, const char *method, const char *reason);
gopt_status gopt_bl_optimize_each(const gopt_bl_registry *r, const char *const *methods, int nm, const gopt_sim *sim,
                                  const gopt_costmodel *cm, const gopt_bl_options *opt, gopt_decisions *ds,
                                  const char **names, int *n, gopt_bl_skip_fn skip, void *ctx, gopt_error *err);

#endif /* GOPT_BASELINES_H */
