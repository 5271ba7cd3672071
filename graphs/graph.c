/* graph.c: building, finalizing and summarizing a computation graph.
 *
 * Columns grow by doubling; strings live in an append-only pool; names are
 * indexed by an open-addressing hash map. finalize() is O(N + E): counting
 * sort into CSR, Kahn's topological order through igraph, colocation
 * numbering by a second hash map. On a cycle it walks the unsorted remainder
 * to report one concrete cycle by name. */
#include "graph_internal.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const CLASS_NAMES[GOPT_OP_CLASS_COUNT] = {
    "input", "param", "gemm", "conv", "elementwise", "reduction", "data_movement", "other"};
static const char *const PHASE_NAMES[GOPT_PHASE_COUNT] = {"", "fwd", "bwd", "opt"};

const char *gopt_op_class_name(gopt_op_class c) {
    return (c >= 0 && c < GOPT_OP_CLASS_COUNT) ? CLASS_NAMES[c] : NULL;
}
int gopt_op_class_parse(const char *s) {
    for (int i = 0; i < GOPT_OP_CLASS_COUNT; i++)
        if (strcmp(s, CLASS_NAMES[i]) == 0) return i;
    return -1;
}
const char *gopt_phase_name(gopt_phase p) { return (p >= 0 && p < GOPT_PHASE_COUNT) ? PHASE_NAMES[p] : NULL; }
int gopt_phase_parse(const char *s) {
    for (int i = 0; i < GOPT_PHASE_COUNT; i++)
        if (strcmp(s, PHASE_NAMES[i]) == 0) return i;
    return -1;
}

static uint32_t fnv1a(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

/* ---- text --------------------------------------------------------------- */
static int xml_char_ok(uint32_t cp) {
    return cp == 0x9 || cp == 0xA || cp == 0xD || (cp >= 0x20 && cp <= 0xD7FF) || (cp >= 0xE000 && cp <= 0xFFFD) ||
           (cp >= 0x10000 && cp <= 0x10FFFF);
}

long gopt_graph_text_check(const char *s, size_t len) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        uint32_t cp;
        int k = gopt_utf8_decode(u + i, len - i, &cp);
        if (!k || !xml_char_ok(cp)) return (long)i;
        i += (size_t)k;
    }
    return -1;
}

/* A string the graph is about to store: refused when XML could not carry it. */
static gopt_status check_text(const char *what, const char *s, gopt_error *err) {
    if (!s) return GOPT_OK;
    long bad = gopt_graph_text_check(s, strlen(s));
    if (bad < 0) return GOPT_OK;
    return gopt_error_set(err, GOPT_EINVAL,
                          "%s: byte %ld (0x%02x) is invalid UTF-8 or a character XML forbids (control character, "
                          "U+FFFE, U+FFFF)",
                          what, bad, (unsigned)(unsigned char)s[bad]);
}

/* ---- string pool -------------------------------------------------------- */
const char *graph_pool_strdup(gopt_graph *g, const char *s, gopt_error *err) {
    if (!s) s = "";
    size_t len = strlen(s) + 1;
    pool_chunk *c = g->pool;
    if (!c || c->cap - c->used < len) {
        size_t cap = len > (1u << 16) ? len : (1u << 16);
        pool_chunk *nc = malloc(sizeof *nc + cap);
        if (!nc) {
            gopt_error_set(err, GOPT_ENOMEM, "out of memory storing strings");
            return NULL;
        }
        nc->next = c;
        nc->used = 0;
        nc->cap = cap;
        g->pool = c = nc;
    }
    char *p = c->data + c->used;
    memcpy(p, s, len);
    c->used += len;
    return p;
}

/* ---- string map --------------------------------------------------------- */
static int strmap_grow(strmap *m) {
    size_t cap = m->cap ? m->cap * 2 : 1024;
    const char **keys = calloc(cap, sizeof *keys);
    int32_t *vals = malloc(cap * sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return 0;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i]) continue;
        size_t j = fnv1a(m->keys[i]) & (cap - 1);
        while (keys[j]) j = (j + 1) & (cap - 1);
        keys[j] = m->keys[i];
        vals[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    return 1;
}

int32_t strmap_get(const strmap *m, const char *key) {
    if (!m->cap) return -1;
    size_t j = fnv1a(key) & (m->cap - 1);
    while (m->keys[j]) {
        if (strcmp(m->keys[j], key) == 0) return m->vals[j];
        j = (j + 1) & (m->cap - 1);
    }
    return -1;
}

/* Insert key -> val unless present; returns the existing value, -1 if
 * inserted, -2 on allocation failure. key must outlive the map. */
int32_t strmap_put(strmap *m, const char *key, int32_t val) {
    if ((m->count + 1) * 2 > m->cap && !strmap_grow(m)) return -2;
    size_t j = fnv1a(key) & (m->cap - 1);
    while (m->keys[j]) {
        if (strcmp(m->keys[j], key) == 0) return m->vals[j];
        j = (j + 1) & (m->cap - 1);
    }
    m->keys[j] = key;
    m->vals[j] = val;
    m->count++;
    return -1;
}

void strmap_destroy(strmap *m) {
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

/* ---- create / free ------------------------------------------------------ */
gopt_status graph_set_name(gopt_graph *g, const char *name, const char *family, gopt_error *err) {
    gopt_status st;
    if ((st = check_text("graph name", name, err)) || (st = check_text("graph family", family, err))) return st;
    const char *n = graph_pool_strdup(g, name, err);
    const char *f = n ? graph_pool_strdup(g, family, err) : NULL;
    if (!n || !f) return GOPT_ENOMEM;
    g->name = n;
    g->family = f;
    return GOPT_OK;
}

gopt_status gopt_graph_create(gopt_graph **out, const char *name, const char *family, gopt_error *err) {
    *out = NULL;
    gopt_graph *g = calloc(1, sizeof *g);
    if (!g) return gopt_error_set(err, GOPT_ENOMEM, "out of memory creating a graph");
    gopt_status st = graph_set_name(g, name, family, err);
    if (st != GOPT_OK) {
        gopt_graph_free(g);
        return st;
    }
    *out = g;
    return GOPT_OK;
}

void gopt_graph_free(gopt_graph *g) {
    if (!g) return;
    free(g->node_name);
    free(g->node_op);
    free(g->node_shape);
    free(g->node_dtype);
    free(g->node_coloc_str);
    free(g->op_class);
    free(g->phase);
    free(g->layer);
    free(g->flops);
    free(g->out_bytes);
    free(g->param_bytes);
    free(g->op_hash);
    free(g->edge_src);
    free(g->edge_dst);
    free(g->edge_bytes);
    strmap_destroy(&g->names);
    for (int k = 0; k < g->n_extras; k++) free(g->extras[k].vals);
    free(g->extras);
    if (g->finalized) igraph_destroy(&g->ig);
    free(g->topo);
    free(g->rank);
    free(g->in_ptr);
    free(g->in_src);
    free(g->in_eid);
    free(g->out_ptr);
    free(g->out_dst);
    free(g->out_eid);
    free(g->coloc);
    for (pool_chunk *c = g->pool; c;) {
        pool_chunk *next = c->next;
        free(c);
        c = next;
    }
    free(g);
}

/* ---- extras ------------------------------------------------------------- */
static int grow_ptrs(const char ***vals, size_t *cap, size_t need) {
    if (need <= *cap) return 1;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    const char **p = realloc(*vals, c * sizeof *p);
    if (!p) return 0;
    memset(p + *cap, 0, (c - *cap) * sizeof *p);
    *vals = p;
    *cap = c;
    return 1;
}

int graph_add_extra(gopt_graph *g, extra_for kind, const char *name, const char *type, gopt_error *err) {
    if (check_text("attribute name", name, err) || check_text("attribute type", type, err)) return -1;
    extra_attr *e = realloc(g->extras, (size_t)(g->n_extras + 1) * sizeof *e);
    if (!e) {
        gopt_error_set(err, GOPT_ENOMEM, "out of memory");
        return -1;
    }
    g->extras = e;
    extra_attr *x = &e[g->n_extras];
    memset(x, 0, sizeof *x);
    x->kind = kind;
    x->name = graph_pool_strdup(g, name, err);
    x->type = graph_pool_strdup(g, type ? type : "string", err);
    if (!x->name || !x->type) return -1;
    return g->n_extras++;
}

gopt_status graph_set_extra(gopt_graph *g, int k, int32_t idx, const char *value, gopt_error *err) {
    extra_attr *x = &g->extras[k];
    gopt_status st = check_text(x->name, value, err);
    if (st) return st;
    if (!grow_ptrs(&x->vals, &x->cap, (size_t)idx + 1))
        return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    const char *v = graph_pool_strdup(g, value, err);
    if (!v) return GOPT_ENOMEM;
    x->vals[idx] = v;
    return GOPT_OK;
}

int gopt_graph_num_extra(const gopt_graph *g) { return g->n_extras; }

/* ---- nodes and edges ------------------------------------------------------ */
#define GROW(ptr, cap)                                                                                          \
    do {                                                                                                        \
        void *p_ = realloc((ptr), (size_t)(cap) * sizeof *(ptr));                                               \
        if (!p_) return gopt_error_set(err, GOPT_ENOMEM, "out of memory growing the graph");                   \
        (ptr) = p_;                                                                                             \
    } while (0)

static gopt_status grow_nodes(gopt_graph *g, gopt_error *err) {
    int32_t cap = g->ncap ? g->ncap * 2 : 256;
    GROW(g->node_name, cap);
    GROW(g->node_op, cap);
    GROW(g->node_shape, cap);
    GROW(g->node_dtype, cap);
    GROW(g->node_coloc_str, cap);
    GROW(g->op_class, cap);
    GROW(g->phase, cap);
    GROW(g->layer, cap);
    GROW(g->flops, cap);
    GROW(g->out_bytes, cap);
    GROW(g->param_bytes, cap);
    GROW(g->op_hash, cap);
    g->ncap = cap;
    return GOPT_OK;
}

static gopt_status grow_edges(gopt_graph *g, gopt_error *err) {
    int32_t cap = g->mcap ? g->mcap * 2 : 512;
    GROW(g->edge_src, cap);
    GROW(g->edge_dst, cap);
    GROW(g->edge_bytes, cap);
    g->mcap = cap;
    return GOPT_OK;
}

static gopt_status check_amount(const char *node, const char *attr, double v, double max, gopt_error *err) {
    if (isnan(v)) return gopt_error_set(err, GOPT_EINVAL, "node '%s': attribute %s is NaN", node, attr);
    if (isinf(v)) return gopt_error_set(err, GOPT_EINVAL, "node '%s': attribute %s = %g is not finite", node, attr, v);
    if (v < 0) return gopt_error_set(err, GOPT_EINVAL, "node '%s': attribute %s = %.17g is negative", node, attr, v);
    if (v > max)
        return gopt_error_set(err, GOPT_EINVAL, "node '%s': attribute %s = %.17g is above the bound %.17g", node, attr,
                              v, max);
    return GOPT_OK;
}

gopt_status gopt_graph_add_node(gopt_graph *g, const gopt_node_attrs *a, int32_t *id, gopt_error *err) {
    if (g->finalized) return gopt_error_set(err, GOPT_EINVAL, "graph '%s' is finalized; cannot add nodes", g->name);
    if (!a->name || !a->name[0]) return gopt_error_set(err, GOPT_EINVAL, "node %d: attribute name is empty", g->n);
    if (a->cls < 0 || a->cls >= GOPT_OP_CLASS_COUNT)
        return gopt_error_set(err, GOPT_EINVAL, "node '%s': class %d is not a valid op class", a->name, (int)a->cls);
    if (a->phase < 0 || a->phase >= GOPT_PHASE_COUNT)
        return gopt_error_set(err, GOPT_EINVAL, "node '%s': phase %d is not valid", a->name, (int)a->phase);
    gopt_status st;
    if ((st = check_text("node name", a->name, err)) != GOPT_OK) return st;
    char what[200];
    snprintf(what, sizeof what, "node '%.150s': attribute op", a->name);
    if ((st = check_text(what, a->op, err)) != GOPT_OK) return st;
    snprintf(what, sizeof what, "node '%.150s': attribute shape", a->name);
    if ((st = check_text(what, a->shape, err)) != GOPT_OK) return st;
    snprintf(what, sizeof what, "node '%.150s': attribute dtype", a->name);
    if ((st = check_text(what, a->dtype, err)) != GOPT_OK) return st;
    snprintf(what, sizeof what, "node '%.150s': attribute colocate", a->name);
    if ((st = check_text(what, a->colocate, err)) != GOPT_OK) return st;
    if ((st = check_amount(a->name, "flops", a->flops, GOPT_GRAPH_MAX_FLOPS, err)) != GOPT_OK) return st;
    if ((st = check_amount(a->name, "out_bytes", a->out_bytes, GOPT_GRAPH_MAX_BYTES, err)) != GOPT_OK) return st;
    if ((st = check_amount(a->name, "param_bytes", a->param_bytes, GOPT_GRAPH_MAX_BYTES, err)) != GOPT_OK) return st;
    if (a->layer < -1) return gopt_error_set(err, GOPT_EINVAL, "node '%s': layer = %d is below -1", a->name, a->layer);
    if (g->n == INT32_MAX - 1) return gopt_error_set(err, GOPT_EINVAL, "graph '%s': too many nodes", g->name);
    if (g->n == g->ncap && (st = grow_nodes(g, err)) != GOPT_OK) return st;
    int32_t v = g->n;
    const char *name = graph_pool_strdup(g, a->name, err);
    if (!name) return GOPT_ENOMEM;
    int32_t prev = strmap_put(&g->names, name, v);
    if (prev == -2) return gopt_error_set(err, GOPT_ENOMEM, "out of memory indexing names");
    if (prev >= 0)
        return gopt_error_set(err, GOPT_EINVAL, "node '%s': duplicate name (also node %d)", a->name, (int)prev);
    g->node_name[v] = name;
    if (!(g->node_op[v] = graph_pool_strdup(g, a->op, err)) ||
        !(g->node_shape[v] = graph_pool_strdup(g, a->shape, err)) ||
        !(g->node_dtype[v] = graph_pool_strdup(g, a->dtype, err)) ||
        !(g->node_coloc_str[v] = graph_pool_strdup(g, a->colocate, err)))
        return GOPT_ENOMEM;
    g->op_class[v] = (uint8_t)a->cls;
    g->phase[v] = (uint8_t)a->phase;
    g->layer[v] = a->layer;
    g->flops[v] = a->flops;
    g->out_bytes[v] = a->out_bytes;
    g->param_bytes[v] = a->param_bytes;
    g->op_hash[v] = fnv1a(g->node_op[v]);
    g->n++;
    if (id) *id = v;
    return GOPT_OK;
}

gopt_status gopt_graph_add_edge(gopt_graph *g, int32_t src, int32_t dst, double bytes, gopt_error *err) {
    if (g->finalized) return gopt_error_set(err, GOPT_EINVAL, "graph '%s' is finalized; cannot add edges", g->name);
    if (src < 0 || src >= g->n || dst < 0 || dst >= g->n)
        return gopt_error_set(err, GOPT_EINVAL, "edge %d -> %d: node id out of range (graph has %d nodes)", src, dst,
                              g->n);
    if (!(bytes >= 0 && bytes <= GOPT_GRAPH_MAX_BYTES))
        return gopt_error_set(err, GOPT_EINVAL, "edge '%s' -> '%s': attribute bytes = %.17g is %s", g->node_name[src],
                              g->node_name[dst], bytes,
                              isnan(bytes)   ? "NaN"
                              : bytes < 0    ? "negative"
                              : isinf(bytes) ? "not finite"
                                             : "above the bound 1125899906842624 (2^50)");
    if (g->m == INT32_MAX - 1) return gopt_error_set(err, GOPT_EINVAL, "graph '%s': too many edges", g->name);
    gopt_status st;
    if (g->m == g->mcap && (st = grow_edges(g, err)) != GOPT_OK) return st;
    g->edge_src[g->m] = src;
    g->edge_dst[g->m] = dst;
    g->edge_bytes[g->m] = bytes;
    g->m++;
    return GOPT_OK;
}

/* ---- finalize ----------------------------------------------------------- */
static gopt_status build_csr(int32_t n, int32_t m, const int32_t *key, const int32_t *other, int32_t **ptr_out,
                             int32_t **idx_out, int32_t **eid_out, gopt_error *err) {
    int32_t *ptr = calloc((size_t)n + 1, sizeof *ptr);
    int32_t *idx = malloc(((size_t)m + 1) * sizeof *idx);
    int32_t *eid = malloc(((size_t)m + 1) * sizeof *eid);
    if (!ptr || !idx || !eid) {
        free(ptr);
        free(idx);
        free(eid);
        return gopt_error_set(err, GOPT_ENOMEM, "out of memory building adjacency");
    }
    for (int32_t e = 0; e < m; e++) ptr[key[e] + 1]++;
    for (int32_t v = 0; v < n; v++) ptr[v + 1] += ptr[v];
    /* stable fill: edges keep their id order within a node */
    int32_t *fill = malloc(((size_t)n + 1) * sizeof *fill);
    if (!fill) {
        free(ptr);
        free(idx);
        free(eid);
        return gopt_error_set(err, GOPT_ENOMEM, "out of memory building adjacency");
    }
    memcpy(fill, ptr, (size_t)n * sizeof *fill);
    for (int32_t e = 0; e < m; e++) {
        int32_t s = fill[key[e]]++;
        idx[s] = other[e];
        eid[s] = e;
    }
    free(fill);
    *ptr_out = ptr;
    *idx_out = idx;
    *eid_out = eid;
    return GOPT_OK;
}

/* Nodes left out of Kahn's order each have a predecessor also left out.
 * Walking "first such predecessor" from any of them must revisit a node v;
 * the same walk from v returns to v, so v and its first left-out
 * predecessor u lie on one cycle, joined by the edge u -> v. */
static gopt_status report_cycle(const gopt_graph *g, const int32_t *in_ptr, const int32_t *in_src,
                                const uint8_t *sorted, gopt_error *err) {
    int32_t n = g->n, v = -1;
    for (int32_t x = 0; x < n && v < 0; x++)
        if (!sorted[x]) v = x;
    uint8_t *seen = calloc((size_t)n, 1);
    if (!seen) return gopt_error_set(err, GOPT_EINVAL, "graph '%s' has a cycle", g->name);
    int32_t u = -1;
    for (;;) {
        u = -1;
        for (int32_t s = in_ptr[v]; s < in_ptr[v + 1]; s++)
            if (!sorted[in_src[s]]) {
                u = in_src[s];
                break;
            }
        assert(u >= 0 && "a node outside Kahn's order has a predecessor outside it");
        if (seen[v]) break;
        seen[v] = 1;
        v = u;
    }
    free(seen);
    if (u == v)
        return gopt_error_set(err, GOPT_EINVAL, "graph '%s' has a cycle: node '%s' feeds itself", g->name,
                              g->node_name[v]);
    return gopt_error_set(err, GOPT_EINVAL, "graph '%s' has a cycle through nodes '%s' and '%s' (edge '%s' -> '%s')",
                          g->name, g->node_name[u], g->node_name[v], g->node_name[u], g->node_name[v]);
}

static gopt_status build_igraph(gopt_graph *g, gopt_error *err) {
    igraph_vector_int_t edges;
    if (igraph_vector_int_init(&edges, 2 * (igraph_integer_t)g->m) != IGRAPH_SUCCESS)
        return gopt_error_set(err, GOPT_ENOMEM, "out of memory building the igraph view");
    for (int32_t e = 0; e < g->m; e++) {
        VECTOR(edges)[2 * e] = g->edge_src[e];
        VECTOR(edges)[2 * e + 1] = g->edge_dst[e];
    }
    igraph_error_handler_t *old = igraph_set_error_handler(igraph_error_handler_ignore);
    igraph_error_t rc = igraph_create(&g->ig, &edges, g->n, IGRAPH_DIRECTED);
    igraph_set_error_handler(old);
    igraph_vector_int_destroy(&edges);
    if (rc != IGRAPH_SUCCESS) return gopt_error_set(err, GOPT_ENOMEM, "igraph_create failed (%d)", (int)rc);
    return GOPT_OK;
}

gopt_status gopt_graph_finalize(gopt_graph *g, gopt_error *err) {
    if (g->finalized) return gopt_error_set(err, GOPT_EINVAL, "graph '%s' is already finalized", g->name);
    int32_t n = g->n, m = g->m;
    gopt_status st;
    /* each amount is bounded; their sum bounds every device's memory in the simulator */
    double total = 0;
    for (int32_t v = 0; v < n; v++) total += g->out_bytes[v] + g->param_bytes[v];
    for (int32_t e = 0; e < m; e++) total += g->edge_bytes[e];
    if (total > GOPT_GRAPH_MAX_TOTAL_BYTES)
        return gopt_error_set(err, GOPT_EINVAL,
                              "graph '%s': out_bytes + param_bytes + edge bytes = %.17g in all is above the bound "
                              "1152921504606846976 (2^60)",
                              g->name, total);
    int32_t *in_ptr = NULL, *in_src = NULL, *in_eid = NULL, *out_ptr = NULL, *out_dst = NULL, *out_eid = NULL;
    int32_t *topo = NULL, *rank = NULL, *indeg = NULL, *coloc = NULL;
    uint8_t *sorted = NULL;
    strmap cm = {0};
    if ((st = build_csr(n, m, g->edge_dst, g->edge_src, &in_ptr, &in_src, &in_eid, err)) != GOPT_OK) goto fail;
    if ((st = build_csr(n, m, g->edge_src, g->edge_dst, &out_ptr, &out_dst, &out_eid, err)) != GOPT_OK) goto fail;
    topo = malloc(((size_t)n + 1) * sizeof *topo);
    rank = malloc(((size_t)n + 1) * sizeof *rank);
    indeg = malloc(((size_t)n + 1) * sizeof *indeg);
    coloc = malloc(((size_t)n + 1) * sizeof *coloc);
    sorted = calloc((size_t)n + 1, 1);
    if (!topo || !rank || !indeg || !coloc || !sorted) {
        st = gopt_error_set(err, GOPT_ENOMEM, "out of memory finalizing graph '%s'", g->name);
        goto fail;
    }
    /* Kahn with a FIFO queue seeded in id order: deterministic, O(N + E). */
    int32_t head = 0, tail = 0;
    for (int32_t v = 0; v < n; v++) {
        indeg[v] = in_ptr[v + 1] - in_ptr[v];
        if (indeg[v] == 0) topo[tail++] = v;
    }
    while (head < tail) {
        int32_t v = topo[head++];
        sorted[v] = 1;
        for (int32_t s = out_ptr[v]; s < out_ptr[v + 1]; s++)
            if (--indeg[out_dst[s]] == 0) topo[tail++] = out_dst[s];
    }
    if (tail < n) {
        st = report_cycle(g, in_ptr, in_src, sorted, err);
        goto fail;
    }
    for (int32_t i = 0; i < n; i++) rank[topo[i]] = i;
    /* colocation groups, numbered by first appearance in id order */
    int32_t ngroups = 0;
    for (int32_t v = 0; v < n; v++) {
        const char *c = g->node_coloc_str[v];
        if (!c[0]) {
            coloc[v] = -1;
            continue;
        }
        int32_t prev = strmap_put(&cm, c, ngroups);
        if (prev == -2) {
            st = gopt_error_set(err, GOPT_ENOMEM, "out of memory numbering colocation groups");
            goto fail;
        }
        coloc[v] = prev >= 0 ? prev : ngroups++;
    }
    strmap_destroy(&cm);
    if ((st = build_igraph(g, err)) != GOPT_OK) goto fail;
    free(indeg);
    free(sorted);
    g->in_ptr = in_ptr;
    g->in_src = in_src;
    g->in_eid = in_eid;
    g->out_ptr = out_ptr;
    g->out_dst = out_dst;
    g->out_eid = out_eid;
    g->topo = topo;
    g->rank = rank;
    g->coloc = coloc;
    g->finalized = 1;
    gopt_frozen *f = &g->fz;
    f->n = n;
    f->m = m;
    f->topo = topo;
    f->rank = rank;
    f->in_ptr = in_ptr;
    f->in_src = in_src;
    f->in_eid = in_eid;
    f->out_ptr = out_ptr;
    f->out_dst = out_dst;
    f->out_eid = out_eid;
    f->edge_src = g->edge_src;
    f->edge_dst = g->edge_dst;
    f->edge_bytes = g->edge_bytes;
    f->op_class = g->op_class;
    f->phase = g->phase;
    f->layer = g->layer;
    f->flops = g->flops;
    f->out_bytes = g->out_bytes;
    f->param_bytes = g->param_bytes;
    f->coloc = coloc;
    f->op_hash = g->op_hash;
    f->n_coloc = ngroups;
    return GOPT_OK;
fail:
    strmap_destroy(&cm);
    free(in_ptr);
    free(in_src);
    free(in_eid);
    free(out_ptr);
    free(out_dst);
    free(out_eid);
    free(topo);
    free(rank);
    free(indeg);
    free(coloc);
    free(sorted);
    return st;
}

/* ---- reading ------------------------------------------------------------ */
int32_t gopt_graph_num_nodes(const gopt_graph *g) { return g->n; }
int32_t gopt_graph_num_edges(const gopt_graph *g) { return g->m; }
const char *gopt_graph_name(const gopt_graph *g) { return g->name; }
const char *gopt_graph_family(const gopt_graph *g) { return g->family; }
int32_t gopt_graph_find(const gopt_graph *g, const char *name) { return strmap_get(&g->names, name); }
const char *gopt_graph_node_name(const gopt_graph *g, int32_t v) { return g->node_name[v]; }
const gopt_frozen *gopt_graph_frozen(const gopt_graph *g) { return g->finalized ? &g->fz : NULL; }
const igraph_t *gopt_graph_igraph(const gopt_graph *g) { return g->finalized ? &g->ig : NULL; }

void gopt_graph_node(const gopt_graph *g, int32_t v, gopt_node_attrs *a) {
    a->name = g->node_name[v];
    a->op = g->node_op[v];
    a->cls = (gopt_op_class)g->op_class[v];
    a->flops = g->flops[v];
    a->out_bytes = g->out_bytes[v];
    a->param_bytes = g->param_bytes[v];
    a->shape = g->node_shape[v];
    a->dtype = g->node_dtype[v];
    a->phase = (gopt_phase)g->phase[v];
    a->layer = g->layer[v];
    a->colocate = g->node_coloc_str[v];
}

void gopt_graph_get_stats(const gopt_graph *g, gopt_graph_stats *s) {
    memset(s, 0, sizeof *s);
    s->nodes = g->n;
    s->edges = g->m;
    for (int32_t v = 0; v < g->n; v++) {
        s->flops += g->flops[v];
        s->param_bytes += g->param_bytes[v];
        s->out_bytes += g->out_bytes[v];
        s->class_count[g->op_class[v]]++;
    }
    for (int32_t e = 0; e < g->m; e++) s->edge_bytes += g->edge_bytes[e];
    if (!g->finalized) return;
    const gopt_frozen *f = &g->fz;
    int32_t *depth = malloc(((size_t)g->n + 1) * sizeof *depth);
    if (!depth) return; /* depth stays 0: stats are best effort under OOM */
    for (int32_t i = 0; i < g->n; i++) {
        int32_t v = f->topo[i], d = 0;
        for (int32_t k = f->in_ptr[v]; k < f->in_ptr[v + 1]; k++)
            if (depth[f->in_src[k]] > d) d = depth[f->in_src[k]];
        depth[v] = d + 1;
        if (depth[v] > s->depth) s->depth = depth[v];
        if (f->in_ptr[v] == f->in_ptr[v + 1]) s->sources++;
        if (f->out_ptr[v] == f->out_ptr[v + 1]) s->sinks++;
    }
    free(depth);
    s->colocation_groups = f->n_coloc;
}
