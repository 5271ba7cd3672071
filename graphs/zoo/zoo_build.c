/* zoo_build.c: the zoo builder: tensors, name scopes, and the primitive
 * forward ops, each of which adds one node (edges carry the bytes of the
 * tensor read) and records itself on the tape for zoo_backward.
 *
 * Invariants: tensor handles index b->t; an op's outputs are consecutive
 * tensors; a tensor needs a gradient iff one of its op's inputs does (and
 * the op is differentiable). FLOP conventions (docs/zoo.md): matmul 2mkn,
 * conv 2 x MACs, elementwise 1 per output element (sigmoid/tanh 4), softmax 5,
 * norm 8, pooling k*k per output element, data movement 0.
 * Cost: O(1) amortized per op plus the name copy.
 */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zoo_internal.h"

#define GROW(arr, n, cap)                                                                                      \
    do {                                                                                                       \
        if ((n) >= (cap)) {                                                                                    \
            int32_t nc_ = (cap) ? (cap) * 2 : 256;                                                             \
            void *p_ = realloc((arr), (size_t)nc_ * sizeof *(arr));                                            \
            if (!p_) return zoo_fail(b, GOPT_ENOMEM, "out of memory building graph '%s'", gopt_graph_name(b->g)), -1; \
            (arr) = p_;                                                                                        \
            (cap) = nc_;                                                                                       \
        }                                                                                                      \
    } while (0)

gopt_status zoo_fail(zoo_builder *b, gopt_status st, const char *fmt, ...) {
    if (b->st != GOPT_OK) return b->st;
    b->st = st;
    if (b->err) {
        b->err->code = st;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(b->err->msg, sizeof b->err->msg, fmt, ap);
        va_end(ap);
    }
    return st;
}

int zoo_failed(const zoo_builder *b) { return b->st != GOPT_OK; }

gopt_status zoo_begin(zoo_builder *b, const char *name, const char *family, gopt_optimizer optim, gopt_error *err) {
    memset(b, 0, sizeof *b);
    b->err = err;
    b->optim = optim;
    b->loss = -1;
    b->max_nodes = GOPT_ZOO_MAX_NODES;
    b->st = gopt_graph_create(&b->g, name, family, err);
    return b->st;
}

static void zoo_scratch_free(zoo_builder *b) {
    free(b->t);
    free(b->ops);
    free(b->args);
    free(b->contrib);
    free(b->params);
    b->t = NULL;
    b->ops = NULL;
    b->args = NULL;
    b->contrib = NULL;
    b->params = NULL;
}

void zoo_abort(zoo_builder *b) {
    zoo_scratch_free(b);
    gopt_graph_free(b->g);
    b->g = NULL;
}

gopt_status zoo_finish(zoo_builder *b, gopt_graph **out) {
    *out = NULL;
    if (b->st == GOPT_OK && b->loss < 0)
        zoo_fail(b, GOPT_EINTERNAL, "graph '%s' has no loss", gopt_graph_name(b->g));
    if (b->st == GOPT_OK) zoo_backward(b);
    if (b->st == GOPT_OK) b->st = gopt_graph_finalize(b->g, b->err);
    gopt_status st = b->st;
    if (st == GOPT_OK) {
        *out = b->g;
        b->g = NULL;
    }
    zoo_abort(b);
    return st;
}

void zoo_push(zoo_builder *b, const char *fmt, ...) {
    size_t n = b->scope_len;
    if (b->scope_depth >= (int)(sizeof b->scope_stack / sizeof b->scope_stack[0])) {
        zoo_fail(b, GOPT_EINTERNAL, "name scopes nested too deep: '%s'", b->scope);
        return;
    }
    b->scope_stack[b->scope_depth++] = n;
    if (n && n + 1 < sizeof b->scope) b->scope[n++] = '/';
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(b->scope + n, sizeof b->scope - n, fmt, ap);
    va_end(ap);
    if (w < 0 || (size_t)w >= sizeof b->scope - n) {
        zoo_fail(b, GOPT_EINTERNAL, "name scope too long: '%s'", b->scope);
        b->scope[b->scope_len] = '\0';
        return;
    }
    b->scope_len = n + (size_t)w;
}

void zoo_pop(zoo_builder *b) {
    if (b->scope_depth == 0) return;
    b->scope_len = b->scope_stack[--b->scope_depth];
    b->scope[b->scope_len] = '\0';
}

int32_t zoo_arg_push(zoo_builder *b, int32_t v) {
    GROW(b->args, b->nargs, b->argcap);
    b->args[b->nargs] = v;
    return b->nargs++;
}

int32_t zoo_tensor_new(zoo_builder *b, int32_t node, int rank, const int64_t *dims) {
    assert(rank >= 0 && rank <= ZOO_MAX_RANK);
    GROW(b->t, b->nt, b->tcap);
    zoo_tensor *t = &b->t[b->nt];
    memset(t, 0, sizeof *t);
    t->node = node;
    t->rank = (int8_t)rank;
    for (int i = 0; i < rank; i++) t->d[i] = dims[i];
    t->grad_head = -1;
    t->param = -1;
    t->esize = b->esize;
    return b->nt++;
}

void zoo_shape_str(const zoo_builder *b, const int32_t *ts, int n, char *out, size_t cap) {
    size_t k = 0;
    out[0] = '\0';
    for (int j = 0; j < n && k + 24 < cap; j++) {
        if (j) out[k++] = ';';
        const zoo_tensor *t = &b->t[ts[j]];
        if (t->rank == 0) k += (size_t)snprintf(out + k, cap - k, "1");
        for (int i = 0; i < t->rank && k + 24 < cap; i++)
            k += (size_t)snprintf(out + k, cap - k, i ? "x%lld" : "%lld", (long long)t->d[i]);
    }
}

/* Add a node, making its name unique with a _k suffix (as TensorFlow does). */
static int32_t emit_attrs(zoo_builder *b, gopt_node_attrs *a) {
    if (b->st != GOPT_OK) return -1;
    if (gopt_graph_num_nodes(b->g) >= b->max_nodes) {
        zoo_fail(b, GOPT_EINVAL, "graph '%s' would exceed %lld nodes", gopt_graph_name(b->g), (long long)b->max_nodes);
        return -1;
    }
    char uniq[352];
    const char *name = a->name;
    for (int k = 1; gopt_graph_find(b->g, a->name) >= 0; k++) {
        snprintf(uniq, sizeof uniq, "%s_%d", name, k);
        a->name = uniq;
    }
    a->dtype = b->dtype ? b->dtype : "float32";
    int32_t id = -1;
    b->st = gopt_graph_add_node(b->g, a, &id, b->err);
    return b->st == GOPT_OK ? id : -1;
}

int32_t zoo_emit(zoo_builder *b, const char *name, const char *op, gopt_op_class cls, double flops, double out_bytes,
                 const char *shape, gopt_phase phase, int32_t layer, const char *coloc) {
    gopt_node_attrs a = {.name = name,
                         .op = op,
                         .cls = cls,
                         .flops = flops,
                         .out_bytes = out_bytes,
                         .shape = shape,
                         .phase = phase,
                         .layer = layer,
                         .colocate = coloc};
    return emit_attrs(b, &a);
}

void zoo_edge(zoo_builder *b, int32_t t, int32_t dst) {
    if (b->st != GOPT_OK || t < 0 || dst < 0) return;
    b->st = gopt_graph_add_edge(b->g, b->t[t].node, dst, zoo_bytes(b, t), b->err);
}

int32_t zoo_fwd(zoo_builder *b, const zoo_fwd_spec *s) {
    if (b->st != GOPT_OK) return -1;
    const int32_t *ins = s->ins;
    int nin = s->nin, nout = s->nout;
    if (nin < 0 || nin > 255 || nout < 1 || nout > ZOO_MAX_OUTS)
        return zoo_fail(b, GOPT_EINTERNAL, "op %s: %d inputs, %d outputs", s->op, nin, nout), -1;
    for (int i = 0; i < nin; i++)
        if (ins[i] < 0 || ins[i] >= b->nt) return zoo_fail(b, GOPT_EINTERNAL, "op %s: bad input %d", s->op, ins[i]), -1;
    char scoped[320];
    const char *name = s->name;
    if (!name) {
        snprintf(scoped, sizeof scoped, "%s%s%s", b->scope, b->scope_len ? "/" : "", s->op);
        name = scoped;
    }
    int32_t out0 = b->nt;
    /* shapes first so the shape string and the bytes come from the tensors */
    for (int j = 0; j < nout; j++) {
        int32_t t = zoo_tensor_new(b, -1, s->ranks[j], s->dims[j]);
        if (t >= 0 && s->esize) b->t[t].esize = s->esize[j];
    }
    if (b->st != GOPT_OK) return -1;
    double bytes = 0;
    for (int j = 0; j < nout; j++) bytes += zoo_bytes(b, out0 + j);
    int32_t outs[ZOO_MAX_OUTS];
    for (int j = 0; j < nout; j++) outs[j] = out0 + j;
    char shape[256];
    zoo_shape_str(b, outs, nout, shape, sizeof shape);
    b->dtype = s->dtype;
    int32_t node = zoo_emit(b, name, s->op, s->cls, s->flops, bytes, shape, GOPT_PHASE_FWD, b->layer, NULL);
    b->dtype = NULL;
    if (node < 0) return -1;
    int needs = 0;
    for (int i = 0; i < nin; i++) {
        zoo_edge(b, ins[i], node);
        needs |= b->t[ins[i]].needs_grad;
    }
    for (int j = 0; j < nout; j++) {
        b->t[out0 + j].node = node;
        b->t[out0 + j].needs_grad = (uint8_t)(needs && s->kind != ZK_NONE);
    }
    if (s->kind == ZK_NONE) return out0;
    GROW(b->ops, b->nops, b->opcap);
    zoo_op *o = &b->ops[b->nops];
    memset(o, 0, sizeof *o);
    o->kind = (uint8_t)s->kind;
    o->nin = (uint8_t)nin;
    o->nout = (uint8_t)nout;
    o->in0 = b->nargs;
    for (int i = 0; i < nin; i++) zoo_arg_push(b, ins[i]);
    o->out0 = out0;
    o->node = node;
    o->layer = b->layer;
    if (s->attr)
        for (int i = 0; i < 4; i++) o->attr[i] = s->attr[i];
    b->nops++;
    return b->st == GOPT_OK ? out0 : -1;
}

/* A forward node named scope/op (the families' ops, all fp32). */
static int32_t fwd(zoo_builder *b, zoo_kind kind, const char *op, gopt_op_class cls, double flops, const int32_t *ins,
                   int nin, int nout, const int *ranks, int64_t (*dims)[ZOO_MAX_RANK], const int32_t *attr) {
    zoo_fwd_spec s = {.kind = kind, .op = op, .cls = cls, .flops = flops, .ins = ins, .nin = nin, .nout = nout,
                      .ranks = ranks, .dims = (const int64_t(*)[ZOO_MAX_RANK])dims, .attr = attr};
    return zoo_fwd(b, &s);
}

/* One output with the shape of tensor `like`. */
static int32_t fwd_like(zoo_builder *b, zoo_kind kind, const char *op, gopt_op_class cls, double flops,
                        const int32_t *ins, int nin, int32_t like, const int32_t *attr) {
    if (b->st != GOPT_OK) return -1;
    int rank = b->t[like].rank;
    int64_t d[1][ZOO_MAX_RANK];
    memcpy(d[0], b->t[like].d, sizeof d[0]);
    return fwd(b, kind, op, cls, flops, ins, nin, 1, &rank, d, attr);
}

static int32_t fwd_shape(zoo_builder *b, zoo_kind kind, const char *op, gopt_op_class cls, double flops,
                         const int32_t *ins, int nin, int rank, const int64_t *dims, const int32_t *attr) {
    int64_t d[1][ZOO_MAX_RANK] = {{0}};
    for (int i = 0; i < rank; i++) d[0][i] = dims[i];
    return fwd(b, kind, op, cls, flops, ins, nin, 1, &rank, d, attr);
}

int32_t zoo_input(zoo_builder *b, const char *name, int rank, const int64_t *dims) {
    zoo_push(b, "%s", name);
    int32_t t = fwd_shape(b, ZK_NONE, "Placeholder", GOPT_OP_CLASS_INPUT, 0, NULL, 0, rank, dims, NULL);
    zoo_pop(b);
    return t;
}

int32_t zoo_param(zoo_builder *b, const char *name, int rank, const int64_t *dims) {
    if (b->st != GOPT_OK) return -1;
    /* weights + optimizer state, indexed by gopt_optimizer (DEFAULT is resolved before building) */
    static const double STATE[] = {1, 1, 2, 3, 2, 3};
    char full[320];
    snprintf(full, sizeof full, "%s%s%s", b->scope, b->scope_len ? "/" : "", name);
    int32_t t = zoo_tensor_new(b, -1, rank, dims);
    if (t < 0) return -1;
    char shape[128];
    zoo_shape_str(b, &t, 1, shape, sizeof shape);
    double bytes = zoo_bytes(b, t);
    gopt_node_attrs a = {.name = full,
                         .op = "VariableV2",
                         .cls = GOPT_OP_CLASS_PARAM,
                         .out_bytes = bytes,
                         .param_bytes = bytes * STATE[b->optim],
                         .shape = shape,
                         .phase = GOPT_PHASE_FWD,
                         .layer = b->layer};
    a.colocate = full; /* the param's own name, made unique here so that colocate matches it */
    char uniq[352];
    int32_t node;
    if (gopt_graph_find(b->g, full) >= 0) {
        for (int k = 1;; k++) {
            snprintf(uniq, sizeof uniq, "%s_%d", full, k);
            if (gopt_graph_find(b->g, uniq) < 0) break;
        }
        a.name = a.colocate = uniq;
    }
    node = emit_attrs(b, &a);
    if (node < 0) return -1;
    GROW(b->params, b->nparams, b->pcap);
    b->params[b->nparams].tensor = t;
    b->params[b->nparams].layer = b->layer;
    b->t[t].node = node;
    b->t[t].needs_grad = 1;
    b->t[t].param = b->nparams++;
    return t;
}

int32_t zoo_matmul(zoo_builder *b, int32_t a, int32_t w, int ta, int tb) {
    if (b->st != GOPT_OK) return -1;
    const zoo_tensor *A = &b->t[a], *W = &b->t[w];
    int64_t m = ta ? A->d[A->rank - 1] : A->d[A->rank - 2];
    int64_t k = ta ? A->d[A->rank - 2] : A->d[A->rank - 1];
    int64_t k2 = tb ? W->d[W->rank - 1] : W->d[W->rank - 2];
    int64_t n = tb ? W->d[W->rank - 2] : W->d[W->rank - 1];
    if (k != k2 || A->rank < 2 || W->rank < 2)
        return zoo_fail(b, GOPT_EINTERNAL, "%s: matmul shapes do not match (k %lld vs %lld)", b->scope, (long long)k,
                        (long long)k2), -1;
    int64_t d[ZOO_MAX_RANK];
    int rank = A->rank;
    double batch = 1;
    for (int i = 0; i < rank - 2; i++) batch *= (double)(d[i] = A->d[i]);
    d[rank - 2] = m;
    d[rank - 1] = n;
    int32_t ins[2] = {a, w}, attr[4] = {ta, tb, 0, 0};
    const char *op = (W->rank > 2) ? "BatchMatMulV2" : "MatMul";
    return fwd_shape(b, ZK_MATMUL, op, GOPT_OP_CLASS_GEMM, 2.0 * batch * (double)m * (double)k * (double)n, ins, 2,
                     rank, d, attr);
}

static int64_t out_size(int64_t in, int k, int stride, int flags) {
    return (flags & ZOO_VALID) ? (in - k) / stride + 1 : (in + stride - 1) / stride;
}

int32_t zoo_conv(zoo_builder *b, int32_t x, int32_t w, int stride, int flags) {
    if (b->st != GOPT_OK) return -1;
    const zoo_tensor *X = &b->t[x], *W = &b->t[w];
    int depthwise = (flags & ZOO_DEPTHWISE) != 0;
    int kh = (int)W->d[0], kw = (int)W->d[1];
    if (W->d[2] != X->d[3] || stride < 1 || (depthwise && W->d[3] != 1))
        return zoo_fail(b, GOPT_EINTERNAL, "%s: conv input has %lld channels, filter %lld", b->scope,
                        (long long)X->d[3], (long long)W->d[2]), -1;
    int64_t k = depthwise ? X->d[3] : W->d[3];
    int64_t ho = out_size(X->d[1], kh, stride, flags), wo = out_size(X->d[2], kw, stride, flags);
    if (ho < 1 || wo < 1)
        return zoo_fail(b, GOPT_EINVAL, "%s: input %lldx%lld is too small for a %dx%d filter", b->scope,
                        (long long)X->d[1], (long long)X->d[2], kh, kw), -1;
    double macs_per_out = (double)kh * kw * (depthwise ? 1.0 : (double)X->d[3]);
    double flops = 2.0 * (double)X->d[0] * (double)ho * (double)wo * (double)k * macs_per_out;
    int32_t ins[2] = {x, w}, attr[4] = {kh, kw, stride, depthwise};
    return fwd_shape(b, ZK_CONV, depthwise ? "DepthwiseConv2dNative" : "Conv2D", GOPT_OP_CLASS_CONV, flops, ins, 2, 4,
                     ZOO_DIMS(X->d[0], ho, wo, k), attr);
}

int32_t zoo_conv_transpose(zoo_builder *b, int32_t x, int32_t w, int stride) {
    if (b->st != GOPT_OK) return -1;
    const zoo_tensor *X = &b->t[x], *W = &b->t[w];
    if (W->d[3] != X->d[3] || stride < 1)
        return zoo_fail(b, GOPT_EINTERNAL, "%s: transposed conv input has %lld channels, filter %lld", b->scope,
                        (long long)X->d[3], (long long)W->d[3]), -1;
    int kh = (int)W->d[0], kw = (int)W->d[1];
    double flops = 2.0 * (double)zoo_numel(b, x) * (double)kh * kw * (double)W->d[2];
    int32_t ins[2] = {x, w}, attr[4] = {kh, kw, stride, ZOO_CONV_TRANSPOSED};
    return fwd_shape(b, ZK_CONV, "Conv2DBackpropInput", GOPT_OP_CLASS_CONV, flops, ins, 2, 4,
                     ZOO_DIMS(X->d[0], X->d[1] * stride, X->d[2] * stride, W->d[2]), attr);
}

int32_t zoo_bias(zoo_builder *b, int32_t x, int32_t bias) {
    if (b->st != GOPT_OK) return -1;
    int32_t ins[2] = {x, bias};
    return fwd_like(b, ZK_BIAS, "BiasAdd", GOPT_OP_CLASS_ELEMENTWISE, (double)zoo_numel(b, x), ins, 2, x, NULL);
}

static int32_t binary(zoo_builder *b, zoo_kind kind, const char *op, int32_t x, int32_t y) {
    if (b->st != GOPT_OK) return -1;
    int32_t big = zoo_numel(b, x) >= zoo_numel(b, y) ? x : y;
    int32_t ins[2] = {x, y};
    return fwd_like(b, kind, op, GOPT_OP_CLASS_ELEMENTWISE, (double)zoo_numel(b, big), ins, 2, big, NULL);
}
int32_t zoo_add(zoo_builder *b, int32_t x, int32_t y) { return binary(b, ZK_ADD, "Add", x, y); }
int32_t zoo_mul(zoo_builder *b, int32_t x, int32_t y) { return binary(b, ZK_MUL, "Mul", x, y); }

static const struct {
    const char *op;
    double flops;
} UNARY[ZU_COUNT] = {{"Relu", 1}, {"Tanh", 4}, {"Sigmoid", 4}, {"Mul", 1}};

int32_t zoo_unary(zoo_builder *b, int32_t x, zoo_unary_kind u) {
    if (b->st != GOPT_OK) return -1;
    int32_t attr[4] = {(int32_t)u, 0, 0, 0};
    return fwd_like(b, ZK_UNARY, UNARY[u].op, GOPT_OP_CLASS_ELEMENTWISE, UNARY[u].flops * (double)zoo_numel(b, x), &x,
                    1, x, attr);
}

int32_t zoo_softmax(zoo_builder *b, int32_t x) {
    if (b->st != GOPT_OK) return -1;
    return fwd_like(b, ZK_SOFTMAX, "Softmax", GOPT_OP_CLASS_REDUCTION, 5.0 * (double)zoo_numel(b, x), &x, 1, x, NULL);
}

int32_t zoo_norm(zoo_builder *b, int32_t x, int32_t gamma, int32_t beta, int layer_norm) {
    if (b->st != GOPT_OK) return -1;
    int32_t ins[3] = {x, gamma, beta}, attr[4] = {layer_norm, 0, 0, 0};
    return fwd_like(b, ZK_NORM, layer_norm ? "LayerNorm" : "FusedBatchNormV3", GOPT_OP_CLASS_REDUCTION,
                    8.0 * (double)zoo_numel(b, x), ins, 3, x, attr);
}

int32_t zoo_pool(zoo_builder *b, int32_t x, int k, int stride, int flags) {
    if (b->st != GOPT_OK) return -1;
    const zoo_tensor *X = &b->t[x];
    int64_t ho = out_size(X->d[1], k, stride, flags), wo = out_size(X->d[2], k, stride, flags);
    if (ho < 1 || wo < 1)
        return zoo_fail(b, GOPT_EINVAL, "%s: input %lldx%lld is too small for %dx%d pooling", b->scope,
                        (long long)X->d[1], (long long)X->d[2], k, k), -1;
    double flops = (double)k * k * (double)X->d[0] * (double)ho * (double)wo * (double)X->d[3];
    int is_max = (flags & ZOO_MAX) != 0;
    int32_t attr[4] = {k, stride, is_max, 0};
    return fwd_shape(b, ZK_POOL, is_max ? "MaxPool" : "AvgPool", GOPT_OP_CLASS_REDUCTION, flops, &x, 1, 4,
                     ZOO_DIMS(X->d[0], ho, wo, X->d[3]), attr);
}

int32_t zoo_global_pool(zoo_builder *b, int32_t x) {
    if (b->st != GOPT_OK) return -1;
    const zoo_tensor *X = &b->t[x];
    return fwd_shape(b, ZK_MEAN, "Mean", GOPT_OP_CLASS_REDUCTION, (double)zoo_numel(b, x), &x, 1, 2,
                     ZOO_DIMS(X->d[0], X->d[3]), NULL);
}

int32_t zoo_concat(zoo_builder *b, const int32_t *xs, int n, int axis) {
    if (b->st != GOPT_OK) return -1;
    if (n == 1) return xs[0];
    if (n > 255) return zoo_fail(b, GOPT_EINTERNAL, "%s: concat of %d tensors", b->scope, n), -1;
    const zoo_tensor *X = &b->t[xs[0]];
    int64_t d[ZOO_MAX_RANK];
    memcpy(d, X->d, sizeof d);
    int ax = axis < 0 ? X->rank + axis : axis;
    d[ax] = 0;
    for (int i = 0; i < n; i++) d[ax] += b->t[xs[i]].d[ax];
    int32_t attr[4] = {ax, 0, 0, 0};
    return fwd_shape(b, ZK_CONCAT, "ConcatV2", GOPT_OP_CLASS_DATA_MOVEMENT, 0, xs, n, X->rank, d, attr);
}

void zoo_split(zoo_builder *b, int32_t x, int n, int axis, int32_t *outs) {
    for (int i = 0; i < n; i++) outs[i] = -1;
    if (b->st != GOPT_OK) return;
    const zoo_tensor *X = &b->t[x];
    int ax = axis < 0 ? X->rank + axis : axis;
    int ranks[8] = {0};
    int64_t d[8][ZOO_MAX_RANK];
    assert(n <= 8);
    for (int i = 0; i < n; i++) {
        ranks[i] = X->rank;
        memcpy(d[i], X->d, sizeof d[i]);
        d[i][ax] /= n;
    }
    int32_t attr[4] = {ax, 0, 0, 0};
    int32_t o = fwd(b, ZK_SPLIT, "Split", GOPT_OP_CLASS_DATA_MOVEMENT, 0, &x, 1, n, ranks, d, attr);
    for (int i = 0; o >= 0 && i < n; i++) outs[i] = o + i;
}

int32_t zoo_move(zoo_builder *b, int32_t x, const char *op, int rank, const int64_t *dims, int stop_grad) {
    if (b->st != GOPT_OK) return -1;
    int64_t d[ZOO_MAX_RANK];
    if (!dims) {
        rank = b->t[x].rank;
        memcpy(d, b->t[x].d, sizeof d);
        dims = d;
    }
    return fwd_shape(b, stop_grad ? ZK_NONE : ZK_MOVE, op, GOPT_OP_CLASS_DATA_MOVEMENT, 0, &x, 1, rank, dims, NULL);
}

int32_t zoo_slice(zoo_builder *b, int32_t x, int rank, const int64_t *dims) {
    return fwd_shape(b, ZK_SLICE, "StridedSlice", GOPT_OP_CLASS_DATA_MOVEMENT, 0, &x, 1, rank, dims, NULL);
}

int32_t zoo_const(zoo_builder *b, const char *name, int rank, const int64_t *dims) {
    zoo_push(b, "%s", name);
    int32_t t = fwd_shape(b, ZK_NONE, "Const", GOPT_OP_CLASS_INPUT, 0, NULL, 0, rank, dims, NULL);
    zoo_pop(b);
    return t;
}

int32_t zoo_gather(zoo_builder *b, int32_t table, int32_t ids, int sparse_grad) {
    if (b->st != GOPT_OK) return -1;
    const zoo_tensor *I = &b->t[ids];
    int64_t d[ZOO_MAX_RANK];
    memcpy(d, I->d, sizeof d);
    d[I->rank] = b->t[table].d[1];
    int32_t ins[2] = {table, ids}, attr[4] = {sparse_grad != 0, 0, 0, 0};
    return fwd_shape(b, ZK_GATHER, "GatherV2", GOPT_OP_CLASS_DATA_MOVEMENT, 0, ins, 2, I->rank + 1, d, attr);
}

int32_t zoo_xent(zoo_builder *b, int32_t logits, int32_t labels) {
    if (b->st != GOPT_OK) return -1;
    int ranks[2] = {0, b->t[logits].rank};
    int64_t d[2][ZOO_MAX_RANK] = {{0}};
    memcpy(d[1], b->t[logits].d, sizeof d[1]);
    int32_t ins[2] = {logits, labels};
    /* outputs: the mean loss and the saved backprop (softmax - onehot) */
    int32_t o = fwd(b, ZK_XENT, "SparseSoftmaxCrossEntropyWithLogits", GOPT_OP_CLASS_REDUCTION,
                    6.0 * (double)zoo_numel(b, logits), ins, 2, 2, ranks, d, NULL);
    b->loss = o;
    return o;
}

int32_t zoo_addn(zoo_builder *b, const int32_t *xs, int n) {
    if (b->st != GOPT_OK) return -1;
    if (n == 1) return xs[0];
    return fwd_like(b, ZK_ADDN, "AddN", GOPT_OP_CLASS_ELEMENTWISE, (double)(n - 1) * (double)zoo_numel(b, xs[0]), xs,
                    n, xs[0], NULL);
}
