/* gopt_graph.h: the computation graph of one training step.
 *
 * A gopt_graph is built node by node (or loaded from GraphML), then
 * finalized: finalize checks it is a DAG (naming two nodes of a cycle when
 * not), numbers colocation groups, builds the igraph_t used for graph
 * algorithms and the frozen array view (gopt_frozen) that hot loops read.
 * Node ids are 0..n-1 in insertion (file) order; topological order is a
 * separate permutation. Strings are owned by the graph.
 *
 * File format: GraphML, plain or gzip (docs/graph-format.md). Every bad value
 * is rejected with a message naming the file, the line, the element and the
 * value; a failed load frees everything and returns no graph.
 */
#ifndef GOPT_GRAPH_H
#define GOPT_GRAPH_H

#include <igraph.h>
#include <stdint.h>

#include "gopt_common.h"

typedef enum {
    GOPT_OP_CLASS_INPUT = 0,
    GOPT_OP_CLASS_PARAM,
    GOPT_OP_CLASS_GEMM,
    GOPT_OP_CLASS_CONV,
    GOPT_OP_CLASS_ELEMENTWISE,
    GOPT_OP_CLASS_REDUCTION,
    GOPT_OP_CLASS_DATA_MOVEMENT,
    GOPT_OP_CLASS_OTHER,
    GOPT_OP_CLASS_COUNT
} gopt_op_class;

typedef enum { GOPT_PHASE_NONE = 0, GOPT_PHASE_FWD, GOPT_PHASE_BWD, GOPT_PHASE_OPT, GOPT_PHASE_COUNT } gopt_phase;

/* "gemm", ... ; NULL for an out-of-range value. */
const char *gopt_op_class_name(gopt_op_class c);
/* Parse a class name; returns -1 when unknown. */
int gopt_op_class_parse(const char *s);
/* A GEMM or a convolution: a fused kernel holds at most one (the fusion rule of XLA and TVM, of
 * the xla and tvm baselines and of the policy's fusion pass). */
static inline int gopt_op_class_is_heavy(int c) { return c == GOPT_OP_CLASS_GEMM || c == GOPT_OP_CLASS_CONV; }
/* A graph input or a parameter: resident data, not a kernel (no time in the cost model, never
 * fused by the baselines' passes or the policy's). */
static inline int gopt_op_class_is_data(int c) { return c == GOPT_OP_CLASS_INPUT || c == GOPT_OP_CLASS_PARAM; }
const char *gopt_phase_name(gopt_phase p); /* "" for NONE */
int gopt_phase_parse(const char *s);       /* -1 when unknown; "" is NONE */

/* Bounds on the amounts a graph may hold (docs/graph-format.md, "Bounds"):
 * far above any real op, low enough that every sum the simulator and the
 * summaries form stays finite and its byte counts fit in int64. */
#define GOPT_GRAPH_MAX_FLOPS 1e21                  /* per node: a zettaFLOP */
#define GOPT_GRAPH_MAX_BYTES 1125899906842624.0    /* 2^50 = 1 PiB per node attribute or edge */
#define GOPT_GRAPH_MAX_TOTAL_BYTES 1152921504606846976.0 /* 2^60 = 1 EiB: out + param + edge bytes summed */

/* Whether s is valid UTF-8 made only of characters XML 1.0 allows (no
 * control character but tab, newline and carriage return; no U+FFFE,
 * U+FFFF or surrogate). Returns -1 when it is, else the byte offset of the
 * first bad character. Every string a graph holds passes this test, so the
 * GraphML writer always emits well-formed XML. */
long gopt_graph_text_check(const char *s, size_t len);

/* Attributes of one node, as given to gopt_graph_add_node (strings copied). */
typedef struct {
    const char *name;     /* unique, non-empty */
    const char *op;       /* framework op name, e.g. "MatMul" */
    gopt_op_class cls;
    double flops;         /* >= 0 */
    double out_bytes;     /* >= 0: bytes of all outputs */
    double param_bytes;   /* >= 0: resident on the node's device all step */
    const char *shape;    /* outputs split by ';', dims by 'x'; may be NULL/"" */
    const char *dtype;    /* may be NULL/"" */
    gopt_phase phase;
    int32_t layer;        /* -1 unknown */
    const char *colocate; /* nodes sharing a non-empty value share a device */
} gopt_node_attrs;

/* The flat view read by simulators and networks. All arrays are owned by the
 * graph and valid until it is freed. */
typedef struct {
    int32_t n, m;
    const int32_t *topo;     /* (n) node ids in topological order */
    const int32_t *rank;     /* (n) rank[v]: position of v in topo */
    const int32_t *in_ptr;   /* (n+1) CSR of predecessors */
    const int32_t *in_src;   /* (m) predecessor of each in-edge slot */
    const int32_t *in_eid;   /* (m) edge id of each in-edge slot */
    const int32_t *out_ptr;  /* (n+1) CSR of successors */
    const int32_t *out_dst;  /* (m) successor of each out-edge slot */
    const int32_t *out_eid;  /* (m) edge id of each out-edge slot */
    const int32_t *edge_src; /* (m) */
    const int32_t *edge_dst; /* (m) */
    const double *edge_bytes; /* (m) */
    const uint8_t *op_class;  /* (n) gopt_op_class */
    const uint8_t *phase;     /* (n) gopt_phase */
    const int32_t *layer;     /* (n) -1 unknown */
    const double *flops;      /* (n) */
    const double *out_bytes;  /* (n) */
    const double *param_bytes; /* (n) */
    const int32_t *coloc;     /* (n) colocation group 0..n_coloc-1, or -1 */
    const uint32_t *op_hash;  /* (n) FNV-1a hash of the op name */
    int32_t n_coloc;
} gopt_frozen;

typedef struct gopt_graph gopt_graph;

/* ---- building ----------------------------------------------------------- */
gopt_status gopt_graph_create(gopt_graph **out, const char *name, const char *family, gopt_error *err);
void gopt_graph_free(gopt_graph *g);
/* Add a node; checks the values (finite, in [0, GOPT_GRAPH_MAX_FLOPS] or
 * [0, GOPT_GRAPH_MAX_BYTES], non-empty unique name, strings that XML allows,
 * valid class and phase). *id (may be NULL) receives the new node id. */
gopt_status gopt_graph_add_node(gopt_graph *g, const gopt_node_attrs *a, int32_t *id, gopt_error *err);
/* Add a directed edge src -> dst carrying `bytes` (in [0, GOPT_GRAPH_MAX_BYTES]). */
gopt_status gopt_graph_add_edge(gopt_graph *g, int32_t src, int32_t dst, double bytes, gopt_error *err);
/* Check acyclicity and the byte total (out + param + edge bytes at most
 * GOPT_GRAPH_MAX_TOTAL_BYTES), build the igraph and the frozen view. Must be
 * called once, after the last add; a graph that fails is left unfinalized. */
gopt_status gopt_graph_finalize(gopt_graph *g, gopt_error *err);

/* ---- reading ------------------------------------------------------------ */
int32_t gopt_graph_num_nodes(const gopt_graph *g);
int32_t gopt_graph_num_edges(const gopt_graph *g);
const char *gopt_graph_name(const gopt_graph *g);
const char *gopt_graph_family(const gopt_graph *g);
/* Node id of a name, or -1. O(1) expected. */
int32_t gopt_graph_find(const gopt_graph *g, const char *name);
/* Fill *a with node v's attributes (strings point into the graph). */
void gopt_graph_node(const gopt_graph *g, int32_t v, gopt_node_attrs *a);
const char *gopt_graph_node_name(const gopt_graph *g, int32_t v);
/* NULL before finalize. */
const gopt_frozen *gopt_graph_frozen(const gopt_graph *g);
/* The igraph view (vertex ids = node ids, edge ids = edge ids); NULL before finalize. */
const igraph_t *gopt_graph_igraph(const gopt_graph *g);

/* Summary statistics of a finalized graph. */
typedef struct {
    int32_t nodes, edges;
    double flops, param_bytes, out_bytes, edge_bytes;
    int32_t class_count[GOPT_OP_CLASS_COUNT];
    int32_t depth; /* nodes on the longest path */
    int32_t sources, sinks, colocation_groups;
} gopt_graph_stats;
void gopt_graph_get_stats(const gopt_graph *g, gopt_graph_stats *s);

/* ---- files -------------------------------------------------------------- */
/* Load GraphML (gzip detected by content). On error *out is NULL. */
gopt_status gopt_graph_load(const char *path, gopt_graph **out, gopt_error *err);
/* Parse GraphML text held in memory; `origin` names it in messages. The
 * buffer is modified (entities decoded in place). */
gopt_status gopt_graph_parse_graphml(char *text, size_t len, const char *origin, gopt_graph **out,
                                     gopt_error *err);
/* Save as GraphML, gzip-compressed when path ends in ".gz"; atomic. */
gopt_status gopt_graph_save(const gopt_graph *g, const char *path, gopt_error *err);
/* Serialize to GraphML text in `b`. */
gopt_status gopt_graph_write_graphml(const gopt_graph *g, gopt_buf *b, gopt_error *err);

/* Extra attributes (keys beyond the schema) kept from a loaded file so that
 * a convert loses nothing: for which element ("graph", "node", "edge"),
 * name, GraphML type, and per element the value (NULL when absent). */
int gopt_graph_num_extra(const gopt_graph *g);

#endif /* GOPT_GRAPH_H */
