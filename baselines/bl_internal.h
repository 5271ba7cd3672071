/* bl_internal.h: what the baseline methods share (not a public header).
 *
 * Units: a colocation group, or a node outside any group; placers move
 * units, never single members. The contiguous order: units sorted by a
 * layer key (the node's layer, or for nodes without one the largest key of
 * their predecessors) then by topological rank; "contiguous layer ranges"
 * are ranges of this order. Memory fix-up and the least-bad split work on
 * units. The fusion state keeps groups as member lists and allows a merge
 * only when it cannot create a cycle (see fusion.c).
 */
#ifndef GOPT_BL_INTERNAL_H
#define GOPT_BL_INTERNAL_H

#include "gopt_baselines.h"

typedef struct {
    int32_t n, nunits;
    int32_t *unit;   /* (n) unit of each node */
    int32_t *ptr;    /* (nunits+1) CSR into mem */
    int32_t *mem;    /* (n) members of each unit, in topological order */
    double *bytes;   /* (nunits) memory of the unit */
    double *work;    /* (nunits) compute time of the unit on device 0 */
} bl_units;

gopt_status bl_units_build(const gopt_bl_problem *p, bl_units *u, gopt_error *err);
void bl_units_destroy(bl_units *u);
/* Units in contiguous (layer, rank) order into order (nunits); ukey (may be
 * NULL) receives each unit's layer key. */
gopt_status bl_units_order(const gopt_bl_problem *p, const bl_units *u, int32_t *order, int32_t *ukey,
                           gopt_error *err);
/* Assign every member of unit k to device dev. */
void bl_units_set(const bl_units *u, int32_t k, int32_t dev, int32_t *device);

/* Split the units in `order` into k contiguous ranges balanced by
 * weight[unit] (compute or memory), ranges on devices 0..k-1. With key
 * (per unit, may be NULL) a range ends only where the key changes (whole
 * layers), unless the next unit (with copies of its inputs from earlier
 * ranges) does not fit in fill x its device's capacity. */
gopt_status bl_split_contiguous(const gopt_bl_problem *p, const bl_units *u, const int32_t *order, const int32_t *key,
                                const double *weight, int k, double fill, int32_t *device, gopt_error *err);
/* Split (fill = 1) then fix memory; when the fix-up fails, split again
 * filling each device to 85%, 70%, 55%, 40% of its capacity, leaving room
 * the fix-up can use. */
gopt_status bl_split_and_fix(const gopt_bl_problem *p, const bl_units *u, const int32_t *order, const int32_t *key,
                             const double *weight, int k, int32_t *device, gopt_error *err);
/* Move units off devices over capacity (latest in contiguous order first,
 * to the device with the most room). GOPT_EUNSUP when impossible. */
gopt_status bl_fix_memory(const gopt_bl_problem *p, const bl_units *u, int32_t *device, gopt_error *err);
/* Total memory against total capacity and the largest unit against the
 * largest device: GOPT_EUNSUP with a message when no placement can exist. */
gopt_status bl_memory_feasible(const gopt_bl_problem *p, const bl_units *u, gopt_error *err);
/* The least-bad split: for k = 2..ndev, contiguous ranges balanced by
 * memory, fixed up; the one the evaluator likes best. */
gopt_status bl_least_bad_split(const gopt_bl_problem *p, const bl_units *u, int32_t *device, gopt_error *err);

/* Transfer time of `bytes` from device a to b (0 when a == b). */
double bl_xfer(const gopt_bl_problem *p, int a, int b, double bytes);
/* Mean transfer time of `bytes` over ordered pairs of distinct devices. */
double bl_xfer_mean(const gopt_bl_problem *p, double bytes);
/* Whether node v is a source of zero time (input, parameter): placed with
 * its first consumer by the list placers. */
int bl_is_deferred(const gopt_bl_problem *p, int32_t v);

/* ---- memory tracker (memory.c) ------------------------------------------ */
typedef struct {
    const gopt_bl_problem *p;
    const gopt_frozen *f;
    int nd;
    int32_t *device; /* the placement being built (-1: not yet placed); shared, not owned */
    int32_t *cnt;    /* (n, nd) consumers of producer q on device k */
    double *copy;    /* (n) bytes of a received copy of q's output; 0 when transient */
    double *used;    /* (nd) bytes held under the model */
    double *cap;     /* (nd) capacity under the model */
} bl_mem;

/* Track placement `device` (entries may be -1). */
gopt_status bl_mem_init(bl_mem *m, const gopt_bl_problem *p, int32_t *device, gopt_error *err);
void bl_mem_destroy(bl_mem *m);
/* Whether v's output, when read on another device, stays there (long-lived). */
int bl_mem_long_lived(const gopt_frozen *f, int32_t v);
/* Place or move node v onto dev, updating every device's total. */
void bl_mem_place(bl_mem *m, int32_t v, int dev);
/* Bytes of copies v would add on dev for inputs placed elsewhere. */
double bl_mem_extra(bl_mem *m, int32_t v, int dev);
void bl_mem_add_consumer(bl_mem *m, int32_t q, int dev);

/* ---- binary heap of (key, id), smallest key first, ties by id ------------ */
typedef struct {
    double key;
    int32_t id;
} bl_heap_item;
typedef struct {
    bl_heap_item *a;
    int32_t len, cap;
} bl_heap;
int bl_heap_push(bl_heap *h, double key, int32_t id); /* 0 on allocation failure */
bl_heap_item bl_heap_pop(bl_heap *h);
void bl_heap_destroy(bl_heap *h);

/* ---- fusion state -------------------------------------------------------- */
typedef struct {
    const gopt_bl_problem *p;
    const gopt_frozen *f;
    int32_t *group;   /* the decisions' group array (ids = a member's node id) */
    int32_t *head;    /* (n) first member of group g, or -1 */
    int32_t *next;    /* (n) next member in the group's list, -1 */
    int32_t *size;    /* (n) members of group g */
    uint8_t *closed;  /* (n) nothing may join group g (tvm: ends in a reduction) */
    int32_t *stamp;   /* (n) scratch marks */
    int32_t clock;
    int32_t *tmp;     /* (n) scratch member list */
    int exact;        /* bl_fuse_can_merge: when the sufficient conditions fail, search (xlamo) */
    int32_t *ord;     /* (n) exact: position of group g in a topological order of the contracted graph */
    int64_t *lst;     /* (2n + 4) exact: scratch (ord << 32 | group) keys, the merge's reordering */
} bl_fuse;

/* Take d->group as it is (renumbered so each id is a member's node id). */
gopt_status bl_fuse_init(bl_fuse *s, const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err);
void bl_fuse_destroy(bl_fuse *s);
/* Exact legality (xlamo): keeps a topological order of the contracted graph through every merge,
 * so that a legality search only walks the groups ordered between the two. */
gopt_status bl_fuse_exact(bl_fuse *s, gopt_error *err);
/* Group of v (a singleton's group is v itself). */
static inline int32_t bl_fuse_gid(const bl_fuse *s, int32_t v) { return s->group[v] >= 0 ? s->group[v] : v; }
/* Whether merging the groups of u and v (joined by an edge) is safe: both
 * on one device (dev), neither closed, and every edge leaving one of them
 * goes into the other, or every edge entering the other comes from the one;
 * with s->exact set, also when neither holds but no path leaves the union and
 * comes back (a search of the groups ordered between the two, at most
 * BL_FUSE_SEARCH expansions; past it: no). */
int bl_fuse_can_merge(bl_fuse *s, const int32_t *device, int32_t gu, int32_t gv);
/* (gu is the producer side: a closed gu takes nothing after it.) */
/* Merge; returns the new group id. */
int32_t bl_fuse_merge(bl_fuse *s, int32_t gu, int32_t gv);
/* Dissolve group g back into singletons. */
void bl_fuse_dissolve(bl_fuse *s, int32_t g);
/* Time of group g (or of the union of ga and gb when gb >= 0) on dev. */
double bl_fuse_time(bl_fuse *s, int32_t ga, int32_t gb, int dev);

#endif
