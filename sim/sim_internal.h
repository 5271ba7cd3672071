/* sim_internal.h: the simulator's state, shared by the files of sim/ only.
 *
 * Resources are numbered 0..ndev-1 (devices) and ndev + src*ndev + dst
 * (links). Each kind of resource has four operations in event_loop.inc
 * (included by resources.c): push an item into its queue, take the next item
 * to run, start it (returns its duration), finish it; the event loop (also
 * there, so that they inline) calls the device's or the link's by the
 * resource number.
 *
 * Layout: the per-node state of a run is split by what reads it. Arrays read
 * through a neighbour's edges (nt, tp, th) stay small (8-16 bytes); what only
 * the node's own start and end read is one 64-byte line per node (nc), which
 * also holds the node's adjacency offsets, so ending a task reads its edge
 * slots and its neighbours' state and little else. Both are prefetched ahead
 * of use (resources.c). Transfer records are 24 bytes, what the run reads;
 * their start and end times are in an array of their own, written once.
 *
 * Items: a device runs tasks, named by their representative node (the
 * member first in topological order); a link runs transfer records.
 */
#ifndef GOPT_SIM_INTERNAL_H
#define GOPT_SIM_INTERNAL_H

#include "gopt_sim.h"

/* An out-edge slot as the hot loop reads it: the consumer, the bytes it reads, and the
 * edge's slot among the consumer's in-edges. */
typedef struct {
    double bytes;
    int32_t dst;
    int32_t islot;
} sim_oslot;

struct gopt_sim {
    const gopt_graph *g;
    const gopt_frozen *f;
    const gopt_costmodel *cm;
    gopt_cost_table table;
    int ndev;
    int64_t *osize;        /* (n) bytes an output occupies on its own device: ceil(out_bytes), 0 for params */
    int64_t *psize;        /* (n) ceil(param_bytes) */
    int32_t *nin;          /* (n) distinct producers of each node (multi-edges count once) */
    sim_oslot *oslot;       /* (m) consumer and edge bytes by out-edge slot (CSR order: read sequentially) */
    double *in_slot_bytes;  /* (m) bytes read by in-edge slot (gopt_cost_read_bytes) */
    double capacity[GOPT_SIM_MAX_DEVICES];
    /* links without a measured copy table: latency + bytes / bandwidth, with the parameters the
     * cost model gives (gopt_cost_link_linear), inlined in the hot loop */
    uint8_t link_plain[GOPT_SIM_MAX_DEVICES * GOPT_SIM_MAX_DEVICES];
    double link_lat[GOPT_SIM_MAX_DEVICES * GOPT_SIM_MAX_DEVICES];
    double link_bw[GOPT_SIM_MAX_DEVICES * GOPT_SIM_MAX_DEVICES];
    /* shared memory bus (gopt_profile_shared_bandwidth): each device's memory bandwidth alone
     * over the bus's, at most 1; shared_bus: the profile has a bus and more than one device */
    int shared_bus;
    double bus_share[GOPT_SIM_MAX_DEVICES];
};

__extension__ typedef unsigned __int128 sim_u128;

/* An event of an instant with several (equal times): the bits of its time, its sequence number
 * and its resource; such events are taken out together and handled in sequence order. The item
 * the resource runs is in scratch->item. */
typedef struct {
    uint64_t t;
    uint32_t seq;
    int32_t r;
} sim_event;

typedef struct {
    uint64_t key; /* instant it was queued (a counter of distinct event times) << 32 | producer's rank */
    int32_t rec;
    int32_t spare;
} sim_link_slot;

/* A transfer record (24 bytes: what the run reads; its start and end are in scratch->xtime).
 * The copy takes ceil(bytes) on the receiver. */
typedef struct {
    int32_t node;
    int32_t hold;       /* consumer tasks on dst still to finish (after arrival) */
    int32_t cons_first; /* those tasks: cons[cons_first .. + the count at creation) */
    int16_t src, dst;
    double bytes;
} sim_xfer;

/* Per-node state of a run, split by how hot it is so that the arrays read on
 * every edge stay small (8 bytes per node each). (task) fields are meaningful
 * on a task's representative, (tensor) ones on a node whose output leaves its
 * task. */
typedef struct {
    int32_t task, dev, islot;
} sim_pair;

/* xref values besides a transfer record index */
#define SIM_XREF_SKIP (-1)  /* the producer was already counted through another in-edge */
#define SIM_XREF_LOCAL (-2) /* the producer is on the consumer's device */

/* A ready task: key (~priority << 32 | rank; smallest first) and the task. */
typedef struct {
    uint64_t key;
    int32_t c, spare;
} sim_rq_item;

typedef struct {
    int32_t task; /* representative node of the node's task */
    int16_t dev;
    uint8_t ext;  /* (tensor) the output leaves the task: allocated, maybe sent */
    uint8_t nxf;  /* (tensor) transfer records */
} sim_nt;
typedef struct {
    int32_t pending; /* (task) external input tensors not yet present on its device */
    int32_t stamp_c; /* (task) the last tensor that counted this task (deduplication) */
    uint64_t key;    /* (task) ready key: ~priority << 32 | rank; smallest runs first (read when
                      * pending reaches 0: same cache line) */
} sim_tp;
typedef struct {
    int32_t hold;    /* (tensor) holders of the copy on its own device */
    int32_t stamp_u; /* (tensor) the last task that counted this tensor */
    int64_t osize;   /* constant: sim->osize, freed when hold reaches 0 (beside it: no branch) */
} sim_th;
/* One cache line per node (the array is 64-byte aligned): what starting and
 * finishing its task read. The first five fields are constant (written when
 * the scratch is made); the others are (task) fields of a run. */
typedef struct {
    int32_t in_first, in_count;   /* constant: in-edge slots of the node (CSR) */
    int32_t out_first, out_count; /* constant: out-edge slots */
    int32_t rank;                 /* constant: topological rank */
    int32_t mem_first; /* (task) members at mem_list[mem_first..] when fused, -1 when alone */
    int32_t mem_count; /* (task) members */
    int32_t xf_first;  /* (tensor) its first transfer record; the others follow, by receiving device */
    double dur;    /* (task) kernel time */
    double start;  /* (task) start time, -1 when it did not run */
    int64_t osize; /* constant: sim->osize */
    uint32_t xf_mask; /* (tensor) receiving devices (when ndev <= 32): record = xf_first + popcount below */
    float mem_s;      /* (task) the part of dur that is memory traffic (seconds; gopt_cost_table.memory) */
} sim_nc;

/* One change of a device's memory: the bytes in use after it. */
typedef struct {
    double t;
    int32_t dev, spare;
    int64_t bytes;
} sim_memrec;

struct gopt_sim_scratch {
    const gopt_sim *sim;
    const gopt_decisions *d; /* the run in progress or the last one */
    int32_t n, m, ndev, nres;
    sim_nt *nt;        /* (n) hot: read on every edge */
    sim_tp *tp;        /* (n) */
    sim_th *th;        /* (n) */
    sim_nc *nc;        /* (n) cold: once per task */
    int32_t *grp_rep;  /* (n) representative of fusion group g, -1 (kept -1 between runs) */
    int32_t *mem_list; /* (n) members of fused tasks, each task's in topological order */
    int32_t *plist;    /* (2n) prepare(): the fused nodes, the nodes without inputs */
    /* device ready heaps: pool of n (key, task) items carved by device */
    sim_rq_item *rq;
    int32_t *rq_off, *rq_len; /* (ndev) */
    /* link queues: pool of n*(ndev-1) slots carved by link (a link from s carries at most one
     * transfer per node on s); link l's queue is lq[lq_head[l] .. lq_tail[l]), sorted by key */
    sim_link_slot *lq;
    int32_t *lq_head, *lq_tail; /* (ndev*ndev) */
    sim_xfer *xf;             /* (m) transfer records of the run */
    double *xtime;            /* (2m) start and end of each record, -1 until it starts */
    int32_t nxf;
    int32_t *cons;            /* (m) consumer tasks of each transfer, by record */
    int32_t ncons;
    sim_pair *cpair;          /* (m) one finishing tensor's remote consumer tasks, in edge order */
    int32_t *xref;            /* (m) by in-edge slot, written when the producer ends: what an unfused
                               * consumer releases when it ends (a record, SIM_XREF_LOCAL or _SKIP) */
    /* event selection (resources.c): each resource's next event time by slot (+inf when idle),
     * then the minimum of each block of 8 slots, level by level, up to one block of 8; every
     * level is padded with +inf to a multiple of 8 and 64-byte aligned */
    double *evt;
    int32_t ev_off[8]; /* start of each level in evt */
    int32_t ev_len;    /* doubles in evt */
    int32_t ev_nlev;   /* levels (1 when ndev^2 <= 8, 2 up to 64 slots: 8 devices) */
    uint32_t *evseq;   /* (ndev^2) by slot: the sequence number of its event */
    int32_t *slot_res; /* (ndev^2) by slot: its resource (-1: the slot of no resource) */
    int32_t *item; /* (nres) the item each busy resource runs */
    uint32_t seq;
    double nb_t;       /* the earliest event added while one instant is handled (+inf: none) */
    int32_t nb_k, nb_multi; /* its slot; another added one has the same time */
    sim_event *tie; /* (nres) the events of one instant, sorted by sequence */
    uint8_t *busy, *dirty; /* (nres) */
    int32_t *dirty_list;   /* (nres) */
    int32_t ndirty;
    /* small per-run arrays */
    int32_t dstamp[GOPT_SIM_MAX_DEVICES];
    double dbytes[GOPT_SIM_MAX_DEVICES];
    int32_t dcnt[GOPT_SIM_MAX_DEVICES], dpos[GOPT_SIM_MAX_DEVICES];
    int64_t mem[GOPT_SIM_MAX_DEVICES];
    int64_t peak[GOPT_SIM_MAX_DEVICES];
    double peak_t[GOPT_SIM_MAX_DEVICES]; /* when peak[d] was first reached */
    double busy_s[GOPT_SIM_MAX_DEVICES];
    double hclock[GOPT_SIM_MAX_DEVICES]; /* overlapped dispatch: when the host has dispatched the device's
                                          * last started task (gopt_cost_table.dispatch) */
    double sent[GOPT_SIM_MAX_DEVICES];
    /* shared bus: the task each device runs, its start and end, and the fraction of the bus its
     * memory traffic draws on average over it (bus_share x memory part / duration) */
    double dstart[GOPT_SIM_MAX_DEVICES], dend[GOPT_SIM_MAX_DEVICES], ddraw[GOPT_SIM_MAX_DEVICES];
    double total_bytes;
    double now;
    uint32_t instant; /* distinct event times so far: orders link queues like time does */
    int32_t ntasks, tasks_done;
    /* memory recording (gopt_sim_scratch_record_memory): NULL when off */
    sim_memrec *memlog;
    int64_t nmemlog, memlog_cap;
};

/* resources.c: the device ready queue and the event loop (devices run tasks, links transfers) */
void sim_dev_push(gopt_sim_scratch *s, int32_t dv, int32_t c);
void sim_event_loop(gopt_sim_scratch *s);

/* r may be able to start something: offer it its next item after this instant's events
 * (in the order of the marks: it orders same-instant events, hence transfer records). */
static inline void sim_mark_dirty(gopt_sim_scratch *s, int32_t r) {
    if (!s->dirty[r]) {
        s->dirty[r] = 1;
        s->dirty_list[s->ndirty++] = r;
    }
}

/* Log device d's bytes in use when recording is on: after each allocation (sim_mem_add) and
 * once after each kernel end and transfer end (their frees; a free subtracts 0 while a holder
 * remains). The cap is an upper bound on the entries of a run (sim.c). */
static inline void sim_mem_log(gopt_sim_scratch *s, int d) {
    if (__builtin_expect(s->memlog != NULL, 0) && s->nmemlog < s->memlog_cap)
        s->memlog[s->nmemlog++] = (sim_memrec){s->now, d, 0, s->mem[d]};
}

static inline void sim_mem_add(gopt_sim_scratch *s, int d, int64_t b) {
    int64_t m = s->mem[d] += b;
    if (m > s->peak[d]) {
        s->peak[d] = m;
        s->peak_t[d] = s->now;
    }
    sim_mem_log(s, d);
}

#endif
