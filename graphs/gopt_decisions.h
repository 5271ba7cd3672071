/* gopt_decisions.h: what every optimizer decides and every evaluator reads.
 *
 * For each node: a device (0..ndev-1), a scheduling priority (higher runs
 * first among a device's ready ops; ties by topological order) and a fusion
 * group (nodes sharing a group id >= 0 run as one kernel; -1 = not fused).
 *
 * Validation checks that every device exists, that colocation groups share a
 * device, and that every fusion group is legal: all members on one device,
 * weakly connected through edges among its members, and contracting every
 * group to one node leaves the graph acyclic. Cost O(N + E).
 *
 * File format (docs/decisions.md): text, one line per node by name:
 *   gopt-decisions 1
 *   graph <name>
 *   devices <ndev>
 *   node<TAB>device<TAB>priority<TAB>group
 *   conv1<TAB>0<TAB>812<TAB>-1
 * Lines starting with '#' are comments; names escape '\\', tab and newline. */
#ifndef GOPT_DECISIONS_H
#define GOPT_DECISIONS_H

#include "gopt_graph.h"

typedef struct {
    int32_t n;
    int32_t *device;   /* (n) device index */
    int32_t *priority; /* (n) higher runs first */
    int32_t *group;    /* (n) fusion group id in [0, n), or -1 */
} gopt_decisions;

/* Allocate for n nodes (all zero, groups -1). */
gopt_status gopt_decisions_init(gopt_decisions *d, int32_t n, gopt_error *err);
void gopt_decisions_destroy(gopt_decisions *d);
/* Everything on device 0, topological priorities (earlier first), no fusion. */
void gopt_decisions_set_default(gopt_decisions *d, const gopt_frozen *f);
/* Copy src into dst (same n). */
void gopt_decisions_copy(gopt_decisions *dst, const gopt_decisions *src);

/* Check d against graph g (finalized) and a cluster of ndev devices. The
 * message names the node (or group) and the value. */
gopt_status gopt_decisions_validate(const gopt_decisions *d, const gopt_graph *g, int ndev, gopt_error *err);

/* Read a decisions file for graph g; rejects a header naming another graph
 * or another device count than ndev, a missing header line, a line without
 * exactly four non-empty tab-separated fields, unknown, duplicate and missing
 * nodes and everything validate rejects (docs/decisions.md). d is
 * initialised by the call. */
gopt_status gopt_decisions_load(const char *path, const gopt_graph *g, int ndev, gopt_decisions *d, gopt_error *err);
/* Write atomically. */
gopt_status gopt_decisions_save(const char *path, const gopt_graph *g, int ndev, const gopt_decisions *d,
                                gopt_error *err);

#endif
