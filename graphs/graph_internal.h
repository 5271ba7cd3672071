/* graph_internal.h: the gopt_graph struct, shared by graph.c and graphml.c
 * only. No other directory includes this. */
#ifndef GOPT_GRAPH_INTERNAL_H
#define GOPT_GRAPH_INTERNAL_H

#include "gopt_graph.h"

/* Append-only string pool: chunks never move, so returned pointers stay valid. */
typedef struct pool_chunk {
    struct pool_chunk *next;
    size_t used, cap;
    char data[];
} pool_chunk;

/* Open-addressing map from string to int32 (node names). */
typedef struct {
    const char **keys;
    int32_t *vals;
    size_t cap; /* power of two */
    size_t count;
} strmap;

typedef enum { EXTRA_FOR_GRAPH, EXTRA_FOR_NODE, EXTRA_FOR_EDGE } extra_for;

typedef struct {
    extra_for kind;
    const char *name; /* attr.name */
    const char *type; /* attr.type */
    const char **vals; /* graph: (1), node: (n cap), edge: (m cap); NULL absent */
    size_t cap;
} extra_attr;

struct gopt_graph {
    const char *name, *family;
    int32_t n, m, ncap, mcap;
    /* node columns (n) */
    const char **node_name, **node_op, **node_shape, **node_dtype, **node_coloc_str;
    uint8_t *op_class, *phase;
    int32_t *layer;
    double *flops, *out_bytes, *param_bytes;
    uint32_t *op_hash;
    /* edge columns (m) */
    int32_t *edge_src, *edge_dst;
    double *edge_bytes;
    strmap names;
    pool_chunk *pool;
    extra_attr *extras;
    int n_extras;
    /* built by finalize */
    int finalized;
    igraph_t ig;
    gopt_frozen fz;
    int32_t *topo, *rank, *in_ptr, *in_src, *in_eid, *out_ptr, *out_dst, *out_eid, *coloc;
};

/* Lookup: value or -1. Put: inserts unless present; returns the existing
 * value, -1 when inserted, -2 when out of memory. Keys must outlive the map. */
int32_t strmap_get(const strmap *m, const char *key);
int32_t strmap_put(strmap *m, const char *key, int32_t val);
void strmap_destroy(strmap *m);

const char *graph_pool_strdup(gopt_graph *g, const char *s, gopt_error *err);
/* Add an extra (non-schema) attribute column; returns its index or -1. */
int graph_add_extra(gopt_graph *g, extra_for kind, const char *name, const char *type, gopt_error *err);
/* Set an extra value for element idx (0 for the graph). */
gopt_status graph_set_extra(gopt_graph *g, int k, int32_t idx, const char *value, gopt_error *err);
gopt_status graph_set_name(gopt_graph *g, const char *name, const char *family, gopt_error *err);

#endif
