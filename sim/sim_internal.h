/* sim_internal.h: the simulator's state, shared by the files of sim/ only.
 *
 * Resources are numbered 0..ndev-1 (devices) and ndev + src*ndev + dst
 * (links). Each kind of resource plugs into the event loop through a
 * sim_resource_ops table: push an item into its queue, take the next item
 * to run, start it (returns its duration), finish it. The loop itself knows
 * nothing of devices or links.
 *
 * Items: a device runs tasks, named by their representative node (the
 * member first in topological order); a link runs transfer records.
 */
#ifndef GOPT_SIM_INTERNAL_H
#define GOPT_SIM_INTERNAL_H

#include "gopt_sim.h"

struct gopt_sim {
    const gopt_graph *g;
    const gopt_frozen *f;
    const gopt_costmodel *cm;
    gopt_cost_table table;
    int ndev;
    int64_t *osize; /* (n) bytes an output occupies on its own device: ceil(out_bytes), 0 for params */
    int64_t *psize; /* (n) ceil(param_bytes) */
    double capacity[GOPT_SIM_MAX_DEVICES];
};

typedef struct {
    double time;
    uint64_t seq;
    int32_t res, item;
} sim_event;

typedef struct {
    double enq; /* time it was queued */
    int32_t rank; /* producer's topological rank: ties at one instant */
    int32_t rec;
} sim_link_slot;

typedef struct {
    int32_t node, src, dst;
    double bytes;
    int64_t size;
    double start, end;
} sim_xfer;

struct gopt_sim_scratch {
    const gopt_sim *sim;
    const gopt_decisions *d; /* the run in progress or the last one */
    int32_t n, m, ndev, nres;
    /* per node */
    int32_t *task_of;  /* (n) representative node of v's task */
    int32_t *grp_rep;  /* (n) representative of fusion group g, -1 */
    int32_t *mem_ptr;  /* (n+1) CSR of members by representative (empty for non-representatives) */
    int32_t *mem_list; /* (n) members in topological order */
    int32_t *cursor;   /* (n) fill cursor for mem_ptr */
    uint8_t *ext;      /* (n) the node's output leaves its task (allocated, sent) */
    int32_t *stamp_u;  /* (n) per tensor: the last task that counted it */
    int32_t *stamp_c;  /* (n) per task: the last tensor that counted it */
    /* per task (indexed by representative) */
    int32_t *pending; /* (n) external input tensors not yet present */
    double *dur;      /* (n) kernel time */
    int64_t *alloc;   /* (n) bytes allocated at start */
    uint64_t *key;    /* (n) ready key: ~priority << 32 | rank; smallest runs first */
    double *start;    /* (n) start time, -1 when it did not run */
    /* per (node, device) */
    int32_t *hold;     /* (n, ndev) holders of v's copy on a device */
    int32_t *copy_rec; /* (n, ndev) transfer record that brought the copy */
    /* device ready heaps: pool of n keys carved by device */
    uint64_t *rq;
    int32_t *rq_off, *rq_len; /* (ndev) */
    /* link queues: pool of m slots carved by link */
    sim_link_slot *lq;
    int32_t *lq_off, *lq_len; /* (ndev*ndev) */
    sim_xfer *xf;             /* (m) transfer records of the run */
    int32_t nxf;
    /* event heap and dispatch */
    sim_event *ev; /* (nres) at most one running item per resource */
    int32_t nev;
    uint64_t seq;
    uint8_t *busy, *dirty; /* (nres) */
    int32_t *dirty_list;   /* (nres) */
    int32_t ndirty;
    /* small per-run arrays */
    int32_t dstamp[GOPT_SIM_MAX_DEVICES];
    double dbytes[GOPT_SIM_MAX_DEVICES];
    int32_t dlist[GOPT_SIM_MAX_DEVICES];
    int64_t mem[GOPT_SIM_MAX_DEVICES];
    int64_t peak[GOPT_SIM_MAX_DEVICES];
    double busy_s[GOPT_SIM_MAX_DEVICES];
    double sent[GOPT_SIM_MAX_DEVICES];
    double total_bytes;
    double now;
    int32_t ntasks, tasks_done;
};

typedef struct {
    const char *name;
    void (*push)(gopt_sim_scratch *s, int32_t r, int32_t item);
    int32_t (*next)(gopt_sim_scratch *s, int32_t r); /* -1 when its queue is empty */
    double (*start)(gopt_sim_scratch *s, int32_t r, int32_t item); /* allocate, record; returns the duration */
    void (*finish)(gopt_sim_scratch *s, int32_t r, int32_t item);  /* release, make successors ready */
} sim_resource_ops;

extern const sim_resource_ops sim_device_ops; /* priority-ordered list scheduling */
extern const sim_resource_ops sim_link_fifo_ops; /* one transfer at a time, first in first out */

static inline const sim_resource_ops *sim_ops_of(const gopt_sim_scratch *s, int32_t r) {
    return r < s->ndev ? &sim_device_ops : &sim_link_fifo_ops;
}

static inline void sim_mark_dirty(gopt_sim_scratch *s, int32_t r) {
    if (!s->dirty[r]) {
        s->dirty[r] = 1;
        s->dirty_list[s->ndirty++] = r;
    }
}

static inline void sim_mem_add(gopt_sim_scratch *s, int d, int64_t b) {
    int64_t m = s->mem[d] += b;
    if (m > s->peak[d]) s->peak[d] = m;
}

#endif
