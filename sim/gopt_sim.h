/* gopt_sim.h: the event-driven multi-device simulator (the evaluator seam).
 *
 * A gopt_sim is prepared once per (graph, cost model): it holds the frozen
 * graph and the per-graph cost table. It is then run many times, each run on
 * one gopt_decisions (device, priority, fusion group per node), with a
 * caller-owned gopt_sim_scratch: a run allocates nothing. A gopt_sim is
 * immutable after creation and may be shared read-only between threads; a
 * scratch belongs to one thread at a time.
 *
 * Semantics (docs/simulator.md has the full rules and their reasons):
 *   - a task is one unfused node or one fusion group (>= 2 members); a group
 *     runs as one kernel costing gopt_cost_group_time (external bytes = bytes
 *     of edges entering its memory-bound members from outside the group +
 *     output bytes of memory-bound members read outside the group or by
 *     nobody; GEMM and convolution members move their own in their time);
 *     its priority is the max of its members', its tie rank the smallest
 *     topological rank of its members;
 *   - on a profile with a shared memory bus (gopt_profile_shared_bandwidth),
 *     a task's memory part is slowed when it starts while tasks that started
 *     earlier on other devices draw on the bus beyond its bandwidth; a
 *     duration is fixed when its task starts;
 *   - a task is ready when every tensor it reads from outside is present on
 *     its device; each device runs one task at a time, the ready task with
 *     the highest priority first, ties by topological rank;
 *   - when a task finishes, each external output tensor is sent once to each
 *     other device that consumes it (bytes: the largest edge to that device);
 *     transfers on one link (ordered device pair) run one at a time, first in
 *     first out (same-instant ties by the producer's topological rank), each
 *     taking gopt_cost_transfer_time;
 *   - memory per device, in whole bytes: parameters resident all step; an
 *     output allocated when its task starts, freed when its task, its local
 *     consumers and its outgoing transfers are done; a received copy allocated
 *     when its transfer starts, freed when its consumers on that device are
 *     done. Tensors internal to a fused group take none. The output of a
 *     param-class node is the resident parameter itself (no second copy on its
 *     own device). A peak above a device's capacity is an out-of-memory result
 *     (not an error): the run completes and reports it.
 *
 * Cost: O((N + E) + T log R) per run, where T = tasks + transfers and R the
 * largest ready queue; no allocation. Deterministic: events are ordered by
 * (time, sequence), and every effect at one instant commutes, so a run's
 * result depends only on its inputs, bit for bit.
 */
#ifndef GOPT_SIM_H
#define GOPT_SIM_H

#include <stdint.h>

#include "gopt_common.h"
#include "gopt_cost.h"
#include "gopt_decisions.h"
#include "gopt_graph.h"

#define GOPT_SIM_MAX_DEVICES 64

typedef struct gopt_sim gopt_sim;                 /* per (graph, cost model), immutable */
typedef struct gopt_sim_scratch gopt_sim_scratch; /* per thread; holds the last run's timeline */

/* What one run produced. */
typedef struct {
    int ndev;
    double step_time_s;                                 /* makespan: the last task or transfer end */
    double busy_s[GOPT_SIM_MAX_DEVICES];                /* sum of kernel times run on each device */
    int64_t peak_memory_bytes[GOPT_SIM_MAX_DEVICES];    /* parameters included */
    double peak_time_s[GOPT_SIM_MAX_DEVICES];           /* when each device first reached its peak */
    double capacity_bytes[GOPT_SIM_MAX_DEVICES];        /* from the cost model */
    double sent_bytes[GOPT_SIM_MAX_DEVICES];            /* bytes sent by each device over its links */
    double transferred_bytes;                           /* sum over all transfers */
    int32_t tasks;                                      /* kernels run (nodes and fused groups) */
    int32_t transfers;
    int oom;                /* some device's peak exceeds its capacity */
    int oom_device;         /* the device with the largest excess (lowest index on ties), or -1 */
    double oom_excess_bytes; /* peak - capacity on that device, 0 when no OOM */
} gopt_sim_result;

/* Prepare a simulator for finalized graph g on cost model cm (its number of
 * devices, at most GOPT_SIM_MAX_DEVICES). Builds the cost table. g and cm must
 * outlive the simulator. */
gopt_status gopt_sim_create(const gopt_graph *g, const gopt_costmodel *cm, gopt_sim **out, gopt_error *err);
void gopt_sim_free(gopt_sim *sim);
int gopt_sim_num_devices(const gopt_sim *sim);
const gopt_graph *gopt_sim_graph(const gopt_sim *sim);
const gopt_cost_table *gopt_sim_cost_table(const gopt_sim *sim);

/* Scratch sized for sim's graph and devices (O(N ndev + E) bytes). */
gopt_status gopt_sim_scratch_create(const gopt_sim *sim, gopt_sim_scratch **out, gopt_error *err);
void gopt_sim_scratch_free(gopt_sim_scratch *s);

/* Simulate one training step under decisions d. d should have passed
 * gopt_decisions_validate; a run still refuses (GOPT_EINVAL, naming the node)
 * a device out of range, a group id out of range or a group spread over
 * devices, and reports a deadlock (a fusion group whose contraction makes a
 * cycle) instead of looping. res is filled on GOPT_OK. */
gopt_status gopt_sim_run(const gopt_sim *sim, const gopt_decisions *d, gopt_sim_result *res, gopt_sim_scratch *s,
                         gopt_error *err);

/* Evaluate k decision sets on nthreads threads (pthreads), thread i using
 * scratch[i] (nthreads scratches, from gopt_sim_scratch_create). Item j's
 * result is exactly what gopt_sim_run gives for ds[j]. On failure the error
 * of the lowest failing index is returned (all other results are filled). */
gopt_status gopt_sim_run_batch(const gopt_sim *sim, const gopt_decisions *ds, int k, gopt_sim_result *res,
                               gopt_sim_scratch *const *scratch, int nthreads, gopt_error *err);

/* ---- the last run's timeline, kept in the scratch ---------------------------- */
/* Start and end of the kernel that ran node v (a fused node shares its group's). */
double gopt_sim_node_start(const gopt_sim_scratch *s, int32_t v);
double gopt_sim_node_end(const gopt_sim_scratch *s, int32_t v);

typedef struct {
    int32_t node; /* producer of the tensor */
    int32_t src, dst;
    double bytes;
    double start, end;
} gopt_sim_transfer;
int32_t gopt_sim_num_transfers(const gopt_sim_scratch *s);
void gopt_sim_transfer_get(const gopt_sim_scratch *s, int32_t i, gopt_sim_transfer *out);

/* Memory over time: with recording on, each run of s logs a device's bytes in use (time, device,
 * bytes) after every kernel start and end and every transfer start and end that touches it,
 * starting with each device's parameters at time 0; the largest value logged for a device is its
 * peak. Off by default (a run then pays one predictable branch per event); on costs 24 bytes per
 * entry, at most 2N + 2E + devices entries per run (N nodes, E edges), allocated here. */
gopt_status gopt_sim_scratch_record_memory(gopt_sim_scratch *s, int on, gopt_error *err);
int64_t gopt_sim_memory_samples(const gopt_sim_scratch *s); /* entries of the last run (0: off) */
void gopt_sim_memory_sample(const gopt_sim_scratch *s, int64_t i, double *t, int *device, int64_t *bytes);

/* ---- traces: one writer for every evaluator's timeline ------------------------ */
/* One kernel of a timeline: a node or a fused group named by its representative (its member
 * first in topological order). */
typedef struct {
    int32_t node;        /* representative */
    int32_t members;     /* 1 unfused, >= 2 a fused group */
    int32_t device;
    int32_t priority;    /* the largest of its members' */
    int64_t alloc_bytes; /* what its start allocated */
    double start, end;   /* seconds from the step's start */
} gopt_trace_kernel;

/* Bytes in use on a device from time t on. */
typedef struct {
    double t;
    int32_t device, spare;
    int64_t bytes;
} gopt_trace_memory;

typedef struct {
    const char *title; /* the process name shown, e.g. "gopt sim: mlp on 2 devices" */
    int ndev;
    int32_t nkernels;
    const gopt_trace_kernel *kernels; /* written in this order */
    int32_t ntransfers;
    const gopt_sim_transfer *transfers;
    int64_t nmemory; /* 0: no memory counters */
    const gopt_trace_memory *memory;
} gopt_trace_timeline;

/* Chrome trace-event JSON of a timeline of graph g (format: sim/trace.c, docs/simulator.md): one
 * track per device and per used link, a memory counter per device when memory samples are given.
 * The simulator's and the runtime's traces both come from here, so they open side by side. */
gopt_status gopt_trace_timeline_json(const gopt_graph *g, const gopt_trace_timeline *tl, gopt_buf *b,
                                     gopt_error *err);
/* The same, written atomically to path (gzip when it ends in .gz). */
gopt_status gopt_trace_timeline_write(const gopt_graph *g, const gopt_trace_timeline *tl, const char *path,
                                      gopt_error *err);

/* Chrome trace-event JSON of the last run of s (one track per device and per
 * used link; times in microseconds; with memory recording on, a memory counter
 * per device), to a buffer or atomically to a file. */
gopt_status gopt_sim_trace_json(const gopt_sim *sim, const gopt_decisions *d, const gopt_sim_scratch *s,
                                gopt_buf *b, gopt_error *err);
gopt_status gopt_sim_trace_write(const gopt_sim *sim, const gopt_decisions *d, const gopt_sim_scratch *s,
                                 const char *path, gopt_error *err);

#endif /* GOPT_SIM_H */
