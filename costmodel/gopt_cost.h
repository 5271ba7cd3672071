/* gopt_cost.h: the cost model: time of an op, a fused group and a transfer.
 *
 * Built from a profile (gopt_profile.h), restricted to its first ndev
 * devices. For each device the cost of an op comes from the profile's
 * measured tables when one applies (interpolated in log space; docs/costmodel.md)
 * and otherwise from a roofline estimate max(flops/peak, bytes/bandwidth);
 * the device's launch overhead is added once per kernel.
 *
 *   input, param          zero time: they are resident data, not kernels
 *   gemm                  GEMM table at (m, n, k) from the node's shape
 *                         attribute (m = product of the first output's
 *                         leading dims, n = its last dim, k = flops/(2mn));
 *                         roofline when no shape or no table
 *   conv                  CONV table at the node's flops; without one, the
 *                         GEMM table at the implicit GEMM's (m, n, k) from
 *                         the shape (as for gemm); else roofline
 *   elementwise, data_movement  ELEMENTWISE table at bytes read + written
 *   reduction             REDUCTION table at bytes read
 *   other                 roofline
 *
 * A fused group (docs/costmodel.md, "Fused groups"): its memory-bound members
 * (elementwise, reduction, data movement) are one pass: their `compute` part
 * is their arithmetic alone (flops/peak), and the pass pays the bytes they read
 * from outside the group and write out of it once, at mem_bw, and one launch.
 * Its compute-bound members (gemm, conv, other) stay kernels of their own, as
 * a library call is (gopt_cost_keeps_kernel): each keeps its whole time (its
 * table time already reads its operands and writes its result) and its own
 * launch. So a group of several GEMMs costs what they cost apart, less only
 * the memory traffic of the elementwise work fused into them.
 *
 * Efficiency (optional, docs/profiles.md): a profile fitted against a framework's runs multiplies
 * each op's time beyond its launch (and its compute part) by its kind's factor, and adds the
 * framework's per-op overhead to the time and compute part of every op but backward ones.
 * Without it nothing changes.
 *
 * A gopt_costmodel is immutable after creation and may be shared read-only
 * between threads. Building a cost table is O(n + m) table lookups; each
 * lookup is O(points) for GEMM (nearest neighbours) and O(log points) for
 * one-dimensional tables.
 */
#ifndef GOPT_COST_H
#define GOPT_COST_H

#include <stdint.h>

#include "gopt_common.h"
#include "gopt_graph.h"
#include "gopt_profile.h"

typedef struct gopt_costmodel gopt_costmodel;

/* ndev: use the profile's first ndev devices (0 = all); error if more than it
 * has. The profile must outlive the cost model. */
gopt_status gopt_cost_create(const gopt_profile *p, int ndev, gopt_costmodel **out, gopt_error *err);
void gopt_cost_free(gopt_costmodel *cm);
int gopt_cost_num_devices(const gopt_costmodel *cm);
const gopt_profile *gopt_cost_profile(const gopt_costmodel *cm);
double gopt_cost_device_memory(const gopt_costmodel *cm, int d); /* bytes */
double gopt_cost_launch_overhead(const gopt_costmodel *cm, int d); /* seconds */

/* One op, described without a graph. */
typedef struct {
    gopt_op_class cls;
    double flops;   /* >= 0 */
    double bytes;   /* bytes read + written (inputs + outputs) */
    double out_bytes; /* of them, the outputs' (efficiency.fresh_output; 0: not known) */
    double m, n, k; /* GEMM dims when known, else 0 */
    gopt_dtype dtype;
    int depthwise;  /* conv only: its weight has one input channel (gopt_cost_op_kind) */
    int wgrad;      /* conv only: its weight's gradient alone, a plain GEMM (gopt_cost_node_gemm_dims) */
    int norm;       /* reduction only: a normalization layer's (gopt_cost_is_norm_op) */
    gopt_phase phase; /* a backward op pays no op_overhead (the autograd engine runs it) */
} gopt_cost_op;

/* The op's kind for the profile's efficiency factors (docs/profiles.md, "Efficiency"). */
gopt_op_kind gopt_cost_op_kind(const gopt_cost_op *op);
/* Is an op of this name a normalization layer's (batch, layer, group, instance or RMS norm,
 * forward or backward: "native_batch_norm_backward", "FusedBatchNormV3", "LayerNorm", ...)?
 * Case and underscores are ignored. */
int gopt_cost_is_norm_op(const char *op);

/* Time of one op alone on device d (launch overhead included); *compute
 * (may be NULL) receives the part that adds up inside a fused group. */
double gopt_cost_op_time(const gopt_costmodel *cm, int d, const gopt_cost_op *op, double *compute);
/* The framework's dispatch seconds for op (efficiency.op_overhead; 0 for a backward op, which the
 * autograd engine runs, and for data): part of gopt_cost_op_time on a "serial" profile, on the host's own
 * timeline (gopt_cost_table.dispatch, the simulator) on an "overlapped" one. */
double gopt_cost_op_dispatch(const gopt_costmodel *cm, const gopt_cost_op *op);

/* The measured-table prediction on device d at coordinates x (3 values for
 * GEMM: m, n, k; 1 otherwise), in seconds, launch overhead not included; -1
 * when the device has no such table. COPY tables are per link: use
 * gopt_cost_transfer_time. */
double gopt_cost_table_lookup(const gopt_costmodel *cm, int d, gopt_table_kind kind, const double *x);

/* The GEMM dimensions of a node from its first output shape ("AxBxC;...") and its FLOPs: m = the
 * product of the leading dims, n = the last dim, k = flops / (2 m n), at least 1. The cost model
 * reads a gemm node this way and the runtime runs a gemm (and a convolution, as an implicit GEMM)
 * of these sizes. Returns 0 (and zeros) when the shape is absent or malformed. */
int gopt_cost_gemm_dims(const char *shape, double flops, double *m, double *n, double *k);

/* The GEMM dimensions of node v as the cost model and the runtime read them: a convolution (1-, 2-
 * or 3-d) with an output and a weight of as many dims (a parameter input, or its second output: a
 * backward convolution's weight gradient) is an implicit GEMM with n = the output's channels (the
 * second dim when the weight is O x I x kernel, as PyTorch's; the last when it is kernel x I x O,
 * as TensorFlow's), m = the
 * output's other elements, k = flops / (2 m n); a convolution whose output is its weight's shape
 * (the weight's gradient alone: PyTorch's first-layer backward, TensorFlow's *BackpropFilter
 * ops, whose output is taken as the weight) is the plain GEMM m = the output
 * channels, n = the rest of the weight, k = flops / (2 m n), the pixels summed over; any other
 * node as gopt_cost_gemm_dims reads its shape. Returns 1, or 2 for a weight gradient (a plain
 * GEMM, no convolution window), 0 (and zeros) when the shape is absent or malformed. */
int gopt_cost_node_gemm_dims(const gopt_graph *g, int32_t v, double *m, double *n, double *k);

/* Per-graph preparation, done once and reused for every simulation of that graph: */
typedef struct {
    int n, ndev;
    double *time;    /* (n, ndev) seconds of node v alone on device d, launch overhead included */
    double *compute; /* (n, ndev) the compute part (what adds up inside a fused group) */
    double *launch;  /* (ndev) launch overhead per kernel */
    double *mem_bw;  /* (ndev) bytes/s for a fused group's external traffic */
    double *memory;  /* (n, ndev) the part of time that is memory traffic (memory-bound ops; 0 for
                      * the others): what slows down when devices share a memory bus */
    uint8_t *heavy;  /* (n) gopt_cost_keeps_kernel of the node's class */
    uint8_t *kind;   /* (n) gopt_op_kind of the node */
    double *dispatch; /* (n) seconds the host spends dispatching the node, overlapping the device
                       * (a profile whose efficiency.dispatch is "overlapped"); NULL otherwise, when
                       * the framework's per-op overhead is part of time and compute */
} gopt_cost_table;

/* Fill *t for a finalized graph (t is overwritten; destroy it afterwards). */
gopt_status gopt_cost_table_build(const gopt_costmodel *cm, const gopt_graph *g, gopt_cost_table *t,
                                  gopt_error *err);
void gopt_cost_table_destroy(gopt_cost_table *t);

/* Whether an op of class cls stays a kernel of its own inside a fused group (gemm, conv, other:
 * library calls) rather than joining the group's memory pass. */
int gopt_cost_keeps_kernel(gopt_op_class cls);

/* Bytes node v reads through its in-edge slot `slot` (f->in_ptr[v] <= slot < f->in_ptr[v + 1]):
 * the edge's bytes, except that a data-movement op reads at most its own output's bytes from one
 * input: a slice, a narrow or one part of a split reads its part, while the edge carries the
 * producer's whole tensor (what crosses devices if the edge is cut; docs/graph-format.md). The
 * one rule of what an op reads, for the cost table, the fused groups, the simulator and the
 * runtime. */
double gopt_cost_read_bytes(const gopt_frozen *f, int32_t v, int32_t slot);

/* Fused group time on device d: the members' compute parts, one launch per member that keeps
 * its kernel plus one for the memory pass (when the group has memory-bound members, or nothing
 * else), and external_bytes / mem_bw. external_bytes: what the memory pass moves, the bytes the
 * memory-bound members read from outside the group plus their outputs read outside it (or by
 * nobody); a caller that counts every member's external bytes prices the group higher. */
double gopt_cost_group_time(const gopt_cost_table *t, int d, const int32_t *members, int k, double external_bytes);

/* What a fused group's memory pass moves (the external_bytes above): the bytes its memory-bound
 * members read from outside the group, plus the outputs of memory-bound members read outside it
 * (or by nobody). A node u is in the group when owner[u] == tag. A gemm/conv member reads and
 * writes its own operands in its table time, so an edge from it into a memory-bound member is
 * its epilogue: free. f: the frozen graph t was built for. O(edges of the members). */
double gopt_cost_group_pass_bytes(const gopt_cost_table *t, const gopt_frozen *f, const int32_t *members, int k,
                                  const int32_t *owner, int32_t tag);

/* gopt_cost_group_time at the pass bytes above; a group of one member is that node's own time
 * (t->time): one piece of code for every caller that prices a group of given members. */
double gopt_cost_group_price(const gopt_cost_table *t, const gopt_frozen *f, int d, const int32_t *members, int k,
                             const int32_t *owner, int32_t tag);

/* Time to move `bytes` from device src to device dst: the link's copy table
 * when measured, else latency + bytes / bandwidth. 0 when src == dst. */
double gopt_cost_transfer_time(const gopt_costmodel *cm, int src, int dst, double bytes);

/* Whether the src -> dst link is modelled as latency + bytes / bandwidth
 * (no measured copy table); then *latency (seconds) and *bandwidth
 * (bytes/s) receive the parameters gopt_cost_transfer_time uses, so a hot
 * loop can inline the formula. 0 for a table-driven link or src == dst. */
int gopt_cost_link_linear(const gopt_costmodel *cm, int src, int dst, double *latency, double *bandwidth);

#endif /* GOPT_COST_H */
