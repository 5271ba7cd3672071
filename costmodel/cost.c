/* cost.c: the cost model: op, fused group and transfer times (gopt_cost.h).
 *
 * Creation compiles every measured table the chosen devices and their links
 * use into interpolation structures (cost_internal.h), once per distinct
 * table (devices sharing a table set share the compiled table). After that
 * the model is read-only. Cost of creation: O(ndev^2 + table rows log rows).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cost_internal.h"

typedef struct {
    const double *key; /* the profile's points: identity of the table */
    gopt_table_kind kind;
    int dim; /* coordinates: 3 (t3) or 1 (t1) */
    gopt_interp1 t1;
    gopt_interp3 t3;
} compiled;

struct gopt_costmodel {
    const gopt_profile *p;
    int ndev;
    int ncomp, capcomp;
    compiled *comp;
    int32_t *dev_tab;  /* (ndev, GOPT_TABLE_KIND_COUNT) index into comp or -1 */
    int32_t *link_tab; /* (ndev, ndev) index into comp or -1 */
};

static gopt_status compile(gopt_costmodel *cm, const gopt_profile_table *pt, gopt_table_kind kind, int32_t *idx,
                           gopt_error *err) {
    for (int i = 0; i < cm->ncomp; i++)
        if (cm->comp[i].key == pt->points && cm->comp[i].kind == kind) {
            *idx = i;
            return GOPT_OK;
        }
    if (cm->ncomp == cm->capcomp) {
        int cap = cm->capcomp ? 2 * cm->capcomp : 8;
        compiled *c = realloc(cm->comp, (size_t)cap * sizeof *c);
        if (!c) return gopt_error_set(err, GOPT_ENOMEM, "out of memory compiling cost tables");
        cm->comp = c;
        cm->capcomp = cap;
    }
    compiled *c = &cm->comp[cm->ncomp];
    memset(c, 0, sizeof *c);
    c->key = pt->points;
    c->kind = kind;
    c->dim = pt->dim;
    gopt_status st = c->dim == 3 ? gopt_interp3_init(&c->t3, pt->points, pt->n, err)
                                 : gopt_interp1_init(&c->t1, pt->points, pt->n, err);
    if (st) return st;
    *idx = cm->ncomp++;
    return GOPT_OK;
}

gopt_status gopt_cost_create(const gopt_profile *p, int ndev, gopt_costmodel **out, gopt_error *err) {
    *out = NULL;
    int have = gopt_profile_num_devices(p);
    if (ndev < 0 || ndev > have)
        return gopt_error_set(err, GOPT_EINVAL, "profile '%s': %d devices asked for, it has %d", gopt_profile_name(p),
                              ndev, have);
    if (ndev == 0) ndev = have;
    gopt_costmodel *cm = gopt_calloc(1, sizeof *cm, err);
    if (!cm) return GOPT_ENOMEM;
    cm->p = p;
    cm->ndev = ndev;
    cm->dev_tab = gopt_malloc((size_t)ndev * GOPT_TABLE_KIND_COUNT * sizeof(int32_t), err);
    cm->link_tab = gopt_malloc((size_t)ndev * (size_t)ndev * sizeof(int32_t), err);
    gopt_status st = GOPT_ENOMEM;
    if (!cm->dev_tab || !cm->link_tab) goto fail;
    for (int d = 0; d < ndev; d++)
        for (int k = 0; k < GOPT_TABLE_KIND_COUNT; k++) {
            gopt_profile_table pt;
            int32_t *slot = &cm->dev_tab[d * GOPT_TABLE_KIND_COUNT + k];
            *slot = -1;
            if (k != GOPT_TABLE_COPY && gopt_profile_device_table(p, d, (gopt_table_kind)k, &pt) &&
                (st = compile(cm, &pt, (gopt_table_kind)k, slot, err)))
                goto fail;
        }
    for (int s = 0; s < ndev; s++)
        for (int t = 0; t < ndev; t++) {
            gopt_profile_table pt;
            int32_t *slot = &cm->link_tab[s * ndev + t];
            *slot = -1;
            if (s != t && gopt_profile_link_table(p, s, t, &pt) && (st = compile(cm, &pt, GOPT_TABLE_COPY, slot, err)))
                goto fail;
        }
    *out = cm;
    return GOPT_OK;
fail:
    gopt_cost_free(cm);
    return st;
}

void gopt_cost_free(gopt_costmodel *cm) {
    if (!cm) return;
    for (int i = 0; i < cm->ncomp; i++) {
        gopt_interp1_destroy(&cm->comp[i].t1);
        gopt_interp3_destroy(&cm->comp[i].t3);
    }
    free(cm->comp);
    free(cm->dev_tab);
    free(cm->link_tab);
    free(cm);
}

int gopt_cost_num_devices(const gopt_costmodel *cm) { return cm->ndev; }
const gopt_profile *gopt_cost_profile(const gopt_costmodel *cm) { return cm->p; }
double gopt_cost_device_memory(const gopt_costmodel *cm, int d) { return gopt_profile_device_memory(cm->p, d); }
double gopt_cost_launch_overhead(const gopt_costmodel *cm, int d) {
    return gopt_profile_device_launch_overhead(cm->p, d);
}

gopt_op_kind gopt_cost_op_kind(const gopt_cost_op *op) {
    switch (op->cls) {
    case GOPT_OP_CLASS_GEMM: return GOPT_OP_KIND_GEMM;
    case GOPT_OP_CLASS_CONV: return op->depthwise ? GOPT_OP_KIND_DEPTHWISE_CONV : GOPT_OP_KIND_CONV;
    case GOPT_OP_CLASS_ELEMENTWISE: return op->phase == GOPT_PHASE_OPT ? GOPT_OP_KIND_OPTIMIZER : GOPT_OP_KIND_ELEMENTWISE;
    case GOPT_OP_CLASS_REDUCTION: return op->norm ? GOPT_OP_KIND_NORMALIZATION : GOPT_OP_KIND_REDUCTION;
    case GOPT_OP_CLASS_DATA_MOVEMENT: return GOPT_OP_KIND_DATA_MOVEMENT;
    default: return GOPT_OP_KIND_OTHER;
    }
}

double gopt_cost_table_lookup(const gopt_costmodel *cm, int d, gopt_table_kind kind, const double *x) {
    if (d < 0 || d >= cm->ndev || kind < 0 || kind >= GOPT_TABLE_COPY) return -1;
    int32_t i = cm->dev_tab[d * GOPT_TABLE_KIND_COUNT + kind];
    if (i < 0) return -1;
    return cm->comp[i].dim == 3 ? gopt_interp3_eval(&cm->comp[i].t3, x) : gopt_interp1_eval(&cm->comp[i].t1, x[0]);
}

static double peak_for(const gopt_costmodel *cm, int d, gopt_dtype t) {
    double pk = gopt_profile_device_peak(cm->p, d, t);
    return pk > 0 ? pk : gopt_profile_device_peak(cm->p, d, GOPT_DTYPE_FP32);
}

double gopt_cost_op_time(const gopt_costmodel *cm, int d, const gopt_cost_op *op, double *compute) {
    double c = 0, t = 0;
    double launch = gopt_cost_launch_overhead(cm, d);
    double peak = peak_for(cm, d, op->dtype), bw = gopt_profile_device_bandwidth(cm->p, d);
    double arith = op->flops / peak, mem = op->bytes / bw, roof = arith > mem ? arith : mem;
    int fp32 = op->dtype == GOPT_DTYPE_FP32;
    switch (op->cls) {
    case GOPT_OP_CLASS_INPUT:
    case GOPT_OP_CLASS_PARAM:
        /* Resident data, not kernels: no launch, no time. */
        if (compute) *compute = 0;
        return 0;
    case GOPT_OP_CLASS_GEMM: {
        double x[3] = {op->m, op->n, op->k}, v = -1;
        if (fp32 && op->m > 0 && op->n > 0 && op->k > 0) v = gopt_cost_table_lookup(cm, d, GOPT_TABLE_GEMM, x);
        c = v > 0 ? v : roof;
        t = launch + c;
        break;
    }
    case GOPT_OP_CLASS_CONV: {
        /* by its implicit GEMM's shape where the profile measured convolutions so (the same FLOPs
         * run 6-160 TFLOP/s on one GPU by shape), else by FLOPs */
        double x[3] = {op->m, op->n, op->k}, v = -1;
        int mnk = fp32 && op->m > 0 && op->n > 0 && op->k > 0;
        if (mnk) v = gopt_cost_table_lookup(cm, d, op->wgrad ? GOPT_TABLE_GEMM : GOPT_TABLE_CONV_GEMM, x);
        if (v <= 0 && fp32 && op->flops > 0) v = gopt_cost_table_lookup(cm, d, GOPT_TABLE_CONV, &op->flops);
        if (v <= 0 && mnk) {
            /* no convolution table (CPU profiles): the implicit GEMM a convolution is (im2col +
             * sgemm), at its measured GEMM speed; peak FLOPs would be 2-3x optimistic */
            v = gopt_cost_table_lookup(cm, d, GOPT_TABLE_GEMM, x);
        }
        c = v > 0 ? v : roof;
        t = launch + c;
        break;
    }
    case GOPT_OP_CLASS_ELEMENTWISE:
    case GOPT_OP_CLASS_DATA_MOVEMENT:
    case GOPT_OP_CLASS_REDUCTION: {
        gopt_table_kind k = op->cls == GOPT_OP_CLASS_REDUCTION ? GOPT_TABLE_REDUCTION : GOPT_TABLE_ELEMENTWISE;
        double v = op->bytes > 0 ? gopt_cost_table_lookup(cm, d, k, &op->bytes) : -1;
        /* Fused, only the arithmetic stays: the memory traffic is the group's. */
        c = arith;
        t = launch + (v > 0 ? (v > arith ? v : arith) : roof);
        break;
    }
    default:
        c = roof;
        t = launch + c;
        break;
    }
    /* fitted against a framework (1 and 0 without): the op's own time, not its launch, scales;
     * an op the framework dispatches from Python (not a backward op, which its autograd engine
     * runs) pays its per-op overhead, fused or not; a kernel run alone writes its output into
     * fresh memory (not a data-movement op: most are views), a fused one into the group's */
    double e = gopt_profile_efficiency(cm->p, gopt_cost_op_kind(op));
    double over = gopt_profile_dispatch_overlapped(cm->p) ? 0 : gopt_cost_op_dispatch(cm, op);
    double fresh = op->cls == GOPT_OP_CLASS_DATA_MOVEMENT ? 0 : gopt_profile_fresh_output_time(cm->p, op->out_bytes);
    if (compute) *compute = c * e + over;
    return launch + over + (t - launch) * e + fresh;
}

double gopt_cost_op_dispatch(const gopt_costmodel *cm, const gopt_cost_op *op) {
    if (gopt_op_class_is_data(op->cls)) return 0; /* data, not kernels */
    return op->phase == GOPT_PHASE_BWD ? 0 : gopt_profile_op_overhead(cm->p);
}

double gopt_cost_transfer_time(const gopt_costmodel *cm, int src, int dst, double bytes) {
    if (src == dst) return 0;
    int32_t i = cm->link_tab[src * cm->ndev + dst];
    if (i >= 0) return gopt_interp1_eval(&cm->comp[i].t1, bytes > 1 ? bytes : 1);
    double lat = 0, bw = 1;
    gopt_cost_link_linear(cm, src, dst, &lat, &bw);
    return lat + bytes / bw;
}

int gopt_cost_link_linear(const gopt_costmodel *cm, int src, int dst, double *latency, double *bandwidth) {
    if (src == dst || cm->link_tab[src * cm->ndev + dst] >= 0) return 0;
    *latency = gopt_profile_link_latency(cm->p, src, dst);
    *bandwidth = gopt_profile_link_bandwidth(cm->p, src, dst);
    return 1;
}

/* ---- per-graph tables -------------------------------------------------------------- */
/* The next dim of the first shape of a "AxBxC;..." string at *s into *v, *s past it and its 'x':
 * 1; 0 at that shape's end (';' or the string's); -1 when malformed (not a number >= 1, or not
 * followed by 'x', ';' or the end). */
static int next_dim(const char **s, double *v) {
    if (!**s || **s == ';') return 0;
    char *end;
    *v = strtod(*s, &end);
    if (end == *s || !(*v >= 1) || !isfinite(*v)) return -1;
    *s = end;
    if (**s == 'x') ++*s;
    else if (**s && **s != ';') return -1;
    return 1;
}

/* m, n from the first output shape ("AxBxC;..."): m = product of the leading
 * dims, n = the last. 0 when absent or malformed. */
static int parse_mn(const char *shape, double *m, double *n) {
    *m = *n = 0;
    if (!shape || !*shape) return 0;
    double prod = 1, last = -1, v;
    const char *s = shape;
    int r;
    while ((r = next_dim(&s, &v)) > 0) {
        if (last > 0) prod *= last;
        last = v;
    }
    if (r < 0 || last <= 0) return 0;
    *m = prod;
    *n = last;
    return 1;
}

int gopt_cost_gemm_dims(const char *shape, double flops, double *m, double *n, double *k) {
    *k = 0;
    if (!parse_mn(shape, m, n)) return 0;
    *k = flops / (2 * *m * *n);
    if (*k < 1) *k = 1;
    return 1;
}

/* The dims of the first shape in `shape` ("AxBxC;..."), at most 5: their number, 0 when malformed. */
static int shape_dims(const char *shape, double dim[5]) {
    int nd = 0, r;
    double v;
    const char *s = shape;
    if (!s) return 0;
    while ((r = next_dim(&s, &v)) > 0) {
        if (nd == 5) return 0;
        dim[nd++] = v;
    }
    return r < 0 ? 0 : nd;
}

/* The weight a convolution of nd-dim output reads: an nd-dim parameter among its inputs (a forward
 * convolution), else the node's second output when it has nd dims (a backward convolution's
 * weight gradient). */
static int conv_weight(const gopt_graph *g, const gopt_frozen *f, int32_t v, const char *shape, int nd, double w[5]) {
    for (int32_t e = f->in_ptr[v]; e < f->in_ptr[v + 1]; e++) {
        int32_t u = f->in_src[e];
        if (f->op_class[u] != GOPT_OP_CLASS_PARAM) continue;
        gopt_node_attrs a;
        gopt_graph_node(g, u, &a);
        if (shape_dims(a.shape, w) == nd) return 1;
    }
    const char *second = shape ? strchr(shape, ';') : NULL;
    return second && shape_dims(second + 1, w) == nd;
}

int gopt_cost_node_gemm_dims(const gopt_graph *g, int32_t v, double *m, double *n, double *k) {
    *m = *n = *k = 0;
    const gopt_frozen *f = gopt_graph_frozen(g);
    if (!f || v < 0 || v >= f->n) return 0;
    gopt_node_attrs a;
    gopt_graph_node(g, v, &a);
    double flops = f->flops[v], w[5], y[5];
    int nd = f->op_class[v] == GOPT_OP_CLASS_CONV ? shape_dims(a.shape, y) : 0;
    if (nd < 3) return gopt_cost_gemm_dims(a.shape, flops, m, n, k);
    if (!conv_weight(g, f, v, a.shape, nd, w)) {
        /* TensorFlow's filter gradients (Conv2DBackpropFilter, ...): the output is the weight */
        if (!a.op || !strstr(a.op, "BackpropFilter")) return gopt_cost_gemm_dims(a.shape, flops, m, n, k);
        memcpy(w, y, (size_t)nd * sizeof *w);
    }
    /* Channels-first weights (PyTorch's O x I x kernel) go with channels-first activations (N x C x
     * spatial), channels-last ones (TensorFlow's kernel x I x O) with channels-last activations.
     * The kernel is the smaller part of the weight. */
    double all = 1, ker_first = 1;
    for (int i = 0; i < nd; i++) all *= y[i];
    for (int i = 2; i < nd; i++) ker_first *= w[i];
    int first = ker_first < w[0] * w[1], wgrad = memcmp(w, y, (size_t)nd * sizeof *w) == 0;
    if (wgrad) { /* the weight's gradient alone: a GEMM of m = O by n = the rest, k over the pixels */
        *m = first ? w[0] : w[nd - 1];
        *n = all / *m;
    } else {
        *n = y[first ? 1 : nd - 1];
        *m = all / *n;
    }
    *k = flops / (2 * *m * *n);
    if (*k < 1) *k = 1;
    return wgrad ? 2 : 1;
}

/* Does `pat` (lower case, no underscores) occur in s at its start, ignoring case and '_' in s? */
static int match_loose(const char *s, const char *pat) {
    for (; *pat; s++) {
        if (!*s) return 0;
        if (*s == '_') continue;
        char c = *s >= 'A' && *s <= 'Z' ? (char)(*s - 'A' + 'a') : *s;
        if (c != *pat++) return 0;
    }
    return 1;
}

int gopt_cost_is_norm_op(const char *op) {
    static const char *const NORMS[] = {"batchnorm", "layernorm", "groupnorm", "instancenorm", "rmsnorm"};
    for (const char *s = op; s && *s; s++)
        for (size_t i = 0; i < sizeof NORMS / sizeof *NORMS; i++)
            if (*s != '_' && match_loose(s, NORMS[i])) return 1;
    return 0;
}

/* A depthwise convolution's weight: 4 dims "OxIxHxW" with one input channel (I = 1) and O > 1. */
static int depthwise_weight(const char *shape) {
    double dim[5];
    return shape_dims(shape, dim) == 4 && dim[1] == 1 && dim[0] > 1;
}

/* A convolution reading a parameter shaped as a depthwise weight (graphs/real's exports: the
 * weight is a param node feeding the convolution and its backward). */
static int is_depthwise(const gopt_graph *g, const gopt_frozen *f, int32_t v) {
    for (int32_t e = f->in_ptr[v]; e < f->in_ptr[v + 1]; e++) {
        int32_t u = f->in_src[e];
        if (f->op_class[u] != GOPT_OP_CLASS_PARAM) continue;
        gopt_node_attrs a;
        gopt_graph_node(g, u, &a);
        if (depthwise_weight(a.shape)) return 1;
    }
    return 0;
}

gopt_status gopt_cost_table_build(const gopt_costmodel *cm, const gopt_graph *g, gopt_cost_table *t, gopt_error *err) {
    memset(t, 0, sizeof *t);
    const gopt_frozen *f = gopt_graph_frozen(g);
    if (!f) return gopt_error_set(err, GOPT_EINVAL, "graph '%s' is not finalized", gopt_graph_name(g));
    int n = f->n, nd = cm->ndev;
    t->n = n;
    t->ndev = nd;
    size_t cells = (size_t)n * (size_t)nd;
    t->time = gopt_malloc((cells ? cells : 1) * sizeof(double), err);
    t->compute = gopt_malloc((cells ? cells : 1) * sizeof(double), err);
    t->launch = gopt_malloc((size_t)nd * sizeof(double), err);
    t->mem_bw = gopt_malloc((size_t)nd * sizeof(double), err);
    t->memory = gopt_malloc((cells ? cells : 1) * sizeof(double), err);
    t->heavy = gopt_malloc(n > 0 ? (size_t)n : 1, err);
    t->kind = gopt_malloc(n > 0 ? (size_t)n : 1, err);
    int overlapped = gopt_profile_dispatch_overlapped(cm->p) && gopt_profile_op_overhead(cm->p) > 0;
    if (overlapped) t->dispatch = gopt_malloc(n > 0 ? (size_t)n * sizeof(double) : sizeof(double), err);
    if (!t->time || !t->compute || !t->launch || !t->mem_bw || !t->memory || !t->heavy || !t->kind ||
        (overlapped && !t->dispatch)) {
        gopt_cost_table_destroy(t);
        return GOPT_ENOMEM;
    }
    for (int d = 0; d < nd; d++) {
        t->launch[d] = gopt_profile_device_launch_overhead(cm->p, d);
        t->mem_bw[d] = gopt_profile_device_bandwidth(cm->p, d);
    }
    for (int v = 0; v < n; v++) {
        gopt_node_attrs a;
        gopt_graph_node(g, v, &a);
        gopt_cost_op op = {0};
        op.cls = (gopt_op_class)f->op_class[v];
        op.flops = f->flops[v];
        op.bytes = op.out_bytes = f->out_bytes[v];
        for (int32_t e = f->in_ptr[v]; e < f->in_ptr[v + 1]; e++) op.bytes += gopt_cost_read_bytes(f, v, e);
        int dt = gopt_dtype_parse(a.dtype);
        op.dtype = dt < 0 ? GOPT_DTYPE_FP32 : (gopt_dtype)dt;
        op.phase = (gopt_phase)f->phase[v];
        if (op.cls == GOPT_OP_CLASS_GEMM || op.cls == GOPT_OP_CLASS_CONV)
            op.wgrad = gopt_cost_node_gemm_dims(g, v, &op.m, &op.n, &op.k) == 2;
        if (op.cls == GOPT_OP_CLASS_CONV) op.depthwise = is_depthwise(g, f, v);
        if (op.cls == GOPT_OP_CLASS_REDUCTION) op.norm = gopt_cost_is_norm_op(a.op);
        t->heavy[v] = (uint8_t)gopt_cost_keeps_kernel(op.cls);
        t->kind[v] = (uint8_t)gopt_cost_op_kind(&op);
        if (t->dispatch) t->dispatch[v] = gopt_cost_op_dispatch(cm, &op);
        for (int d = 0; d < nd; d++) {
            size_t i = (size_t)v * nd + d;
            t->time[i] = gopt_cost_op_time(cm, d, &op, &t->compute[i]);
            /* a memory-bound op's time beyond its launch and arithmetic is memory traffic */
            double m = t->heavy[v] || t->time[i] == 0 ? 0 : t->time[i] - t->launch[d] - t->compute[i];
            t->memory[i] = m > 0 ? m : 0;
        }
    }
    return GOPT_OK;
}

void gopt_cost_table_destroy(gopt_cost_table *t) {
    if (!t) return;
    free(t->time);
    free(t->compute);
    free(t->dispatch);
    free(t->launch);
    free(t->mem_bw);
    free(t->memory);
    free(t->heavy);
    free(t->kind);
    memset(t, 0, sizeof *t);
}

double gopt_cost_read_bytes(const gopt_frozen *f, int32_t v, int32_t slot) {
    double b = f->edge_bytes[f->in_eid[slot]];
    return f->op_class[v] == GOPT_OP_CLASS_DATA_MOVEMENT && f->out_bytes[v] < b ? f->out_bytes[v] : b;
}

int gopt_cost_keeps_kernel(gopt_op_class cls) {
    return cls == GOPT_OP_CLASS_GEMM || cls == GOPT_OP_CLASS_CONV || cls == GOPT_OP_CLASS_OTHER;
}

double gopt_cost_group_time(const gopt_cost_table *t, int d, const int32_t *members, int k, double external_bytes) {
    double s = 0;
    int kernels = 0, pass = 0;
    for (int i = 0; i < k; i++) {
        int32_t v = members[i];
        s += t->compute[(size_t)v * t->ndev + d];
        if (t->heavy[v]) kernels++;
        else if (t->time[(size_t)v * t->ndev + d] > 0) pass = 1;
    }
    if (kernels + pass == 0) pass = 1;
    return s + (kernels + pass) * t->launch[d] + external_bytes / t->mem_bw[d];
}

double gopt_cost_group_pass_bytes(const gopt_cost_table *t, const gopt_frozen *f, const int32_t *members, int k,
                                  const int32_t *owner, int32_t tag) {
    double ext = 0;
    for (int i = 0; i < k; i++) {
        int32_t v = members[i];
        if (t->heavy[v]) continue;
        for (int32_t e = f->in_ptr[v]; e < f->in_ptr[v + 1]; e++)
            if (owner[f->in_src[e]] != tag) ext += gopt_cost_read_bytes(f, v, e);
        int leaves = f->out_ptr[v] == f->out_ptr[v + 1];
        for (int32_t e = f->out_ptr[v]; e < f->out_ptr[v + 1] && !leaves; e++)
            if (owner[f->out_dst[e]] != tag) leaves = 1;
        if (leaves) ext += f->out_bytes[v];
    }
    return ext;
}

double gopt_cost_group_price(const gopt_cost_table *t, const gopt_frozen *f, int d, const int32_t *members, int k,
                             const int32_t *owner, int32_t tag) {
    if (k == 1) return t->time[(size_t)members[0] * t->ndev + d];
    return gopt_cost_group_time(t, d, members, k, gopt_cost_group_pass_bytes(t, f, members, k, owner, tag));
}
