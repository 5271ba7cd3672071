/* onnx_ops.c: the per-op rules of the ONNX import: output shapes, FLOPs,
 * class and the zoo gradient rule of each supported op type.
 *
 * FLOPs follow tools/export_torch.py so that one model gives the same totals
 * through either path: matmul 2mkn (+ mn with a Gemm bias), convolution 2 x
 * MACs (bias not counted; transposed: 2 x input elements x filter size per
 * input channel), batch/layer norm 8 per element, softmax 5, sigmoid and
 * tanh 4, other elementwise ops 1 per output element (every output counted:
 * Dropout's mask too), reductions and pooling max(input, output elements),
 * data movement 0. Ops whose inputs are all known integers (shape
 * arithmetic: Shape, Gather, Concat, Unsqueeze... on constants) are
 * evaluated here and cost nothing. Cost: O(rank) per op, Einsum O(terms).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_internal.h"

#define BIT(i) (1u << (i))

/* ---- attributes ------------------------------------------------------------------------ */
const Onnx__AttributeProto *onnx_attr(const onnx_node *c, const char *name) {
    for (size_t i = 0; i < c->n->n_attribute; i++)
        if (c->n->attribute[i]->name && strcmp(c->n->attribute[i]->name, name) == 0) return c->n->attribute[i];
    return NULL;
}

int64_t onnx_attr_int(const onnx_node *c, const char *name, int64_t dflt) {
    const Onnx__AttributeProto *a = onnx_attr(c, name);
    return a && a->has_i ? a->i : dflt;
}

int onnx_attr_ints(const onnx_node *c, const char *name, int64_t *out, int max) {
    const Onnx__AttributeProto *a = onnx_attr(c, name);
    if (!a) return -1;
    for (size_t i = 0; i < a->n_ints && (int)i < max; i++) out[i] = a->ints[i];
    return a->n_ints > (size_t)max ? max + 1 : (int)a->n_ints;
}

const char *onnx_attr_str(const onnx_node *c, const char *name, const char *dflt, char *buf, size_t cap) {
    const Onnx__AttributeProto *a = onnx_attr(c, name);
    if (!a || !a->has_s) return dflt;
    size_t n = a->s.len < cap - 1 ? a->s.len : cap - 1; /* protobuf bytes are not NUL-terminated */
    if (n) memcpy(buf, a->s.data, n);
    buf[n] = '\0';
    return buf;
}

gopt_status onnx_outputs_ready(onnx_node *c) {
    for (int j = 0; j < c->nout; j++) {
        onnx_value *v = c->out[j];
        if (!v) continue;
        const Onnx__TypeProto *tp = v->vi;
        if (c->x->use_value_info && tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && tp->tensor_type &&
            tp->tensor_type->shape && tp->tensor_type->shape->n_dim <= ZOO_MAX_RANK) {
            const Onnx__TensorShapeProto *sp = tp->tensor_type->shape;
            int64_t d[ZOO_MAX_RANK];
            int ok = 1;
            for (size_t i = 0; i < sp->n_dim; i++) {
                ok &= sp->dim[i]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
                d[i] = sp->dim[i]->dim_value;
            }
            int elem = tp->tensor_type->has_elem_type ? tp->tensor_type->elem_type : v->elem;
            if (ok && onnx_value_set_shape(c->x, c, v, elem, (int)sp->n_dim, d) != GOPT_OK) return c->x->b.st;
        }
        if (!v->has_shape)
            return onnx_node_fail(c, "cannot infer the shape of output '%s' and the model has no value_info for it",
                                  v->name);
        v->defined = 1;
    }
    return GOPT_OK;
}

gopt_status onnx_emit(onnx_node *c, zoo_kind kind, gopt_op_class cls, double flops, const int *slots, int nslots,
                      const int32_t *attr) {
    onnx_ctx *x = c->x;
    int32_t ins[ONNX_MAX_IO];
    int n = 0;
    if (nslots > 255) return onnx_node_fail(c, "%d inputs; at most 255 are supported", nslots);
    for (int i = 0; i < nslots; i++) {
        onnx_value *v = IN(c, slots[i]);
        if (!v) continue;
        if ((ins[n++] = onnx_tensor(x, v)) < 0) return x->b.st;
    }
    int nout = 0;
    for (int j = 0; j < c->nout; j++)
        if (c->out[j]) nout = j + 1;
    if (nout == 0) return GOPT_OK; /* nothing reads it */
    if (nout > ZOO_MAX_OUTS) return onnx_node_fail(c, "%d outputs; at most %d are supported", nout, ZOO_MAX_OUTS);
    int ranks[ZOO_MAX_OUTS];
    int64_t dims[ZOO_MAX_OUTS][ZOO_MAX_RANK];
    uint8_t es[ZOO_MAX_OUTS];
    const char *dtype = NULL;
    for (int j = 0; j < nout; j++) {
        const onnx_value *v = c->out[j];
        ranks[j] = v ? v->rank : 0;
        if (v) memcpy(dims[j], v->d, sizeof dims[j]);
        es[j] = (uint8_t)(v ? onnx_elem_size(v->elem) : 4);
        if (v && !dtype) dtype = onnx_elem_name(v->elem);
    }
    zoo_fwd_spec s = {.name = c->name, .kind = kind, .op = c->op, .cls = cls, .flops = flops, .ins = ins, .nin = n,
                      .nout = nout, .ranks = ranks, .dims = (const int64_t(*)[ZOO_MAX_RANK])dims, .esize = es,
                      .dtype = dtype, .attr = attr};
    int32_t t0 = zoo_fwd(&x->b, &s);
    if (t0 < 0) return x->b.st;
    for (int j = 0; j < nout; j++)
        if (c->out[j]) {
            c->out[j]->t = t0 + j;
            c->out[j]->defined = 1;
        }
    return GOPT_OK;
}

/* numpy broadcasting of inputs [0, n) */
static gopt_status broadcast(onnx_node *c, int n, int *rank, int64_t *d) {
    *rank = 0;
    for (int i = 0; i < n; i++) {
        onnx_value *v = IN(c, i);
        if (!v) continue;
        if (!v->has_shape) return need(c, i);
        int r = v->rank > *rank ? v->rank : *rank;
        int64_t nd[ZOO_MAX_RANK];
        for (int k = 0; k < r; k++) {
            int ka = k - (r - *rank), kb = k - (r - v->rank);
            int64_t a = ka >= 0 ? d[ka] : 1, b = kb >= 0 ? v->d[kb] : 1;
            if (a != b && a != 1 && b != 1)
                return onnx_node_fail(c, "shapes do not broadcast: dim %d is %lld and %lld ('%s')", k, (long long)a,
                                      (long long)b, v->name);
            nd[k] = a == 1 ? b : a;
        }
        *rank = r;
        memcpy(d, nd, sizeof nd);
    }
    return GOPT_OK;
}

gopt_status onnx_ints_arg(const onnx_node *c, const char *name, int input, int64_t *out, int max, int *n) {
    *n = onnx_attr_ints(c, name, out, max);
    if (*n >= 0 || !IN(c, input)) return *n > max ? onnx_node_fail(c, "%d %s; at most %d", *n, name, max) : GOPT_OK;
    const int64_t *v = ints_of(c, input, n);
    if (!v) return onnx_node_fail(c, "%s input '%s' is not a constant", name, c->in[input]->name);
    if (*n > max) return onnx_node_fail(c, "%d %s; at most %d", *n, name, max);
    memcpy(out, v, sizeof *v * (size_t)*n);
    return GOPT_OK;
}

/* ---- elementwise ---------------------------------------------------------------------------- */
static const struct {
    const char *op;
    int unary; /* zoo_unary_kind, or -1: no gradient */
    double flops;
} UNARY_OPS[] = {
    {"Relu", ZU_RELU, 1},          {"Sigmoid", ZU_SIGMOID, 4},      {"Tanh", ZU_TANH, 4},
    {"Sqrt", ZU_SQRT, 1},          {"Exp", ZU_EXP, 1},              {"Log", ZU_LOG, 1},
    {"Erf", ZU_ERF, 1},            {"Gelu", ZU_GELU, 1},            {"LeakyRelu", ZU_LEAKY_RELU, 1},
    {"Elu", ZU_ELU, 1},            {"Selu", ZU_ELU, 1},             {"Celu", ZU_ELU, 1},
    {"Softplus", ZU_SOFTPLUS, 1},  {"Softsign", ZU_SOFTPLUS, 1},    {"Mish", ZU_SOFTPLUS, 1},
    {"Reciprocal", ZU_RECIPROCAL, 1}, {"Abs", ZU_ABS, 1},           {"Neg", ZU_NEG, 1},
    {"Clip", ZU_CLIP, 1},          {"HardSigmoid", ZU_HARD_SIGMOID, 1}, {"HardSwish", ZU_HARD_SWISH, 1},
    {"Sin", ZU_SIN, 1},            {"Cos", ZU_COS, 1},              {"ThresholdedRelu", ZU_RELU, 1},
    {"Floor", -1, 1},              {"Ceil", -1, 1},                 {"Round", -1, 1},
    {"Sign", -1, 1},               {"Not", -1, 1},                  {"IsNaN", -1, 1},
    {"IsInf", -1, 1},
};

static gopt_status run_unary(onnx_node *c) {
    gopt_status st = need(c, 0);
    if (st != GOPT_OK) return st;
    int k = 0;
    while (strcmp(UNARY_OPS[k].op, c->op) != 0) k++;
    int elem = c->in[0]->elem;
    if (!strcmp(c->op, "Not") || !strcmp(c->op, "IsNaN") || !strcmp(c->op, "IsInf")) elem = ONNX_BOOL;
    if ((st = set_out(c, 0, elem, c->in[0]->rank, c->in[0]->d)) != GOPT_OK || (st = onnx_outputs_ready(c)) != GOPT_OK)
        return st;
    int32_t attr[4] = {UNARY_OPS[k].unary, 0, 0, 0};
    return emit1(c, UNARY_OPS[k].unary < 0 ? ZK_NONE : ZK_UNARY, GOPT_OP_CLASS_ELEMENTWISE,
                 UNARY_OPS[k].flops * out_elems(c), attr);
}

/* An output that is its input (Identity, Dropout at inference): no node.
 * A weight or constant read through it is made a tensor first, so that it
 * stays one node. */
static gopt_status alias(onnx_node *c) {
    gopt_status st = need(c, 0);
    if (st != GOPT_OK || !c->nout || !c->out[0]) return st;
    onnx_value *o = c->out[0], *i = c->in[0];
    if ((st = like(c, 0, i)) != GOPT_OK) return st;
    o->layer = i->layer;
    o->defined = 1;
    if (i->ncv >= 0 && !i->param) return onnx_value_set_ints(c->x, o, i->cv, i->ncv);
    o->t = onnx_tensor(c->x, i);
    return c->x->b.st;
}

static gopt_status run_identity(onnx_node *c) { return alias(c); }

/* Dropout in training mode (the training_mode input, or a mask output) with
 * a rate not known to be 0 or a mask that is read; else the identity (no
 * node, as torch traces it). */
static gopt_status run_dropout(onnx_node *c) {
    int n;
    const int64_t *train = ints_of(c, 2, &n);
    int training = (n == 1 && train[0]) || (c->nout > 1 && c->out[1]);
    const Onnx__AttributeProto *ra = onnx_attr(c, "ratio"); /* before opset 12 */
    int zero = (IN(c, 1) && c->in[1]->has_fv && c->in[1]->fv == 0) || (ra && ra->has_f && ra->f == 0);
    if (!training || (zero && !(c->nout > 1 && c->out[1] && c->out[1]->used))) {
        gopt_status st = alias(c);
        if (st == GOPT_OK && c->nout > 1 && c->out[1]) { /* the mask nothing reads */
            st = set_out(c, 1, ONNX_BOOL, c->in[0]->rank, c->in[0]->d);
            c->out[1]->defined = 1;
        }
        return st;
    }
    gopt_status st = need(c, 0);
    if (st == GOPT_OK) st = like(c, 0, c->in[0]);
    if (st == GOPT_OK) st = set_out(c, 1, ONNX_BOOL, c->in[0]->rank, c->in[0]->d);
    if (st == GOPT_OK) st = onnx_outputs_ready(c);
    int32_t attr[4] = {ZU_SCALE, 0, 0, 0};
    return st != GOPT_OK ? st : emit1(c, ZK_UNARY, GOPT_OP_CLASS_ELEMENTWISE, out_elems(c), attr);
}

/* Integer shape arithmetic, wrapping instead of overflowing (garbage in,
 * garbage out: the shapes it feeds are checked where they are used). */
static int64_t arith(const char *op, int64_t a, int64_t b) {
    uint64_t x = (uint64_t)a, y = (uint64_t)b;
    switch (op[0]) {
    case 'A': return (int64_t)(x + y);
    case 'S': return (int64_t)(x - y);
    case 'M': return (int64_t)(x * y);
    default: return b == 0 ? 0 : b == -1 ? (int64_t)(0 - x) : a / b;
    }
}

static gopt_status run_binary(onnx_node *c) {
    int rank;
    int64_t d[ZOO_MAX_RANK];
    int n = c->nin, is_where = !strcmp(c->op, "Where");
    gopt_status st = broadcast(c, n, &rank, d);
    if (st != GOPT_OK) return st;
    if (n == 0) return onnx_node_fail(c, "input 0 is missing");
    for (int i = 0; i < n; i++) /* no binary op, nor Where, has an optional input */
        if (!c->in[i]) return onnx_node_fail(c, "input %d is missing", i);
    int cmp = !strcmp(c->op, "Equal") || !strcmp(c->op, "Less") || !strcmp(c->op, "Greater") ||
              !strcmp(c->op, "LessOrEqual") || !strcmp(c->op, "GreaterOrEqual") || !strcmp(c->op, "And") ||
              !strcmp(c->op, "Or") || !strcmp(c->op, "Xor");
    int elem = cmp ? ONNX_BOOL : c->in[is_where ? 1 : 0]->elem;
    /* shape arithmetic on known integers: torch computes Expand and Reshape
     * targets with Add/Mul/Equal/Where on Shape's output */
    int evaluable = (n == 2 && (!strcmp(c->op, "Add") || !strcmp(c->op, "Sub") || !strcmp(c->op, "Mul") ||
                                !strcmp(c->op, "Div") || !strcmp(c->op, "Equal") || !strcmp(c->op, "Less") ||
                                !strcmp(c->op, "Greater"))) ||
                    (n == 3 && is_where);
    int64_t nel = 1;
    for (int i = 0; i < rank && nel <= ONNX_MAX_CONST; i++) nel *= d[i];
    if (evaluable && all_known(c, n) && nel <= ONNX_MAX_CONST) {
        int64_t vals[ONNX_MAX_CONST], a[3] = {0};
        for (int i = 0; i < n; i++)
            if (c->in[i]->ncv < 1) evaluable = 0;
        for (int64_t k = 0; evaluable && k < nel; k++) {
            for (int i = 0; i < n; i++) a[i] = c->in[i]->cv[k % c->in[i]->ncv];
            vals[k] = is_where       ? (a[0] ? a[1] : a[2])
                      : cmp          ? (c->op[0] == 'E' ? a[0] == a[1] : c->op[0] == 'L' ? a[0] < a[1] : a[0] > a[1])
                                     : arith(c->op, a[0], a[1]);
        }
        if (evaluable) {
            st = const_out(c, rank, d, vals, (int)nel);
            if (st == GOPT_OK && c->out[0]) c->out[0]->elem = elem;
            return st;
        }
    }
    if ((st = set_out(c, 0, elem, rank, d)) != GOPT_OK || (st = onnx_outputs_ready(c)) != GOPT_OK) return st;
    double f = out_elems(c);
    if (cmp || !strcmp(c->op, "Mod") || !strcmp(c->op, "BitShift"))
        return emit_all(c, ZK_NONE, GOPT_OP_CLASS_ELEMENTWISE, f, NULL);
    if (is_where) { /* condition last: the Add rule passes gradients to inputs 0 and 1 (x, y) */
        static const int s[3] = {1, 2, 0};
        return onnx_emit(c, ZK_ADD, GOPT_OP_CLASS_ELEMENTWISE, f, s, 3, NULL);
    }
    int mul = !strcmp(c->op, "Mul") || !strcmp(c->op, "Div") || !strcmp(c->op, "Pow") || !strcmp(c->op, "PRelu");
    return emit_all(c, mul && n == 2 ? ZK_MUL : ZK_ADD, GOPT_OP_CLASS_ELEMENTWISE, f, NULL);
}

/* ---- linear algebra ----------------------------------------------------------------------------- */
static gopt_status run_matmul(onnx_node *c) {
    gopt_status st;
    if ((st = need(c, 0)) != GOPT_OK || (st = need(c, 1)) != GOPT_OK) return st;
    const onnx_value *a = c->in[0], *b = c->in[1];
    if (a->rank < 1 || b->rank < 1) return onnx_node_fail(c, "inputs must have rank >= 1");
    int64_t m = a->rank >= 2 ? a->d[a->rank - 2] : 1, k = a->d[a->rank - 1];
    int64_t k2 = b->rank >= 2 ? b->d[b->rank - 2] : b->d[0], n = b->rank >= 2 ? b->d[b->rank - 1] : 1;
    if (k != k2) return onnx_node_fail(c, "inner dims differ: %lld and %lld", (long long)k, (long long)k2);
    int ra = a->rank - 2 > 0 ? a->rank - 2 : 0, rb = b->rank - 2 > 0 ? b->rank - 2 : 0;
    int r = ra > rb ? ra : rb, rank = 0;
    int64_t d[ZOO_MAX_RANK];
    for (int i = 0; i < r; i++) {
        int ia = i - (r - ra), ib = i - (r - rb);
        int64_t x = ia >= 0 ? a->d[ia] : 1, y = ib >= 0 ? b->d[ib] : 1;
        if (x != y && x != 1 && y != 1)
            return onnx_node_fail(c, "batch dims do not broadcast: %lld and %lld", (long long)x, (long long)y);
        d[rank++] = x == 1 ? y : x;
    }
    if (a->rank >= 2) d[rank++] = m;
    if (b->rank >= 2) d[rank++] = n;
    if (rank > ZOO_MAX_RANK) return onnx_node_fail(c, "output rank %d is too large", rank);
    if ((st = set_out(c, 0, a->elem, rank, d)) != GOPT_OK || (st = onnx_outputs_ready(c)) != GOPT_OK) return st;
    int32_t attr[4] = {0};
    return onnx_emit(c, ZK_MATMUL, GOPT_OP_CLASS_GEMM, 2.0 * out_elems(c) * (double)k, (const int[]){0, 1}, 2, attr);
}

static gopt_status run_gemm(onnx_node *c) {
    gopt_status st;
    if ((st = need(c, 0)) != GOPT_OK || (st = need(c, 1)) != GOPT_OK) return st;
    const onnx_value *a = c->in[0], *b = c->in[1];
    if (a->rank != 2 || b->rank != 2) return onnx_node_fail(c, "Gemm needs rank-2 inputs");
    int ta = onnx_attr_int(c, "transA", 0) != 0, tb = onnx_attr_int(c, "transB", 0) != 0;
    int64_t m = a->d[ta], k = a->d[!ta], k2 = b->d[tb], n = b->d[!tb];
    if (k != k2) return onnx_node_fail(c, "inner dims differ: %lld and %lld", (long long)k, (long long)k2);
    if ((st = set_out(c, 0, a->elem, 2, (int64_t[]){m, n})) != GOPT_OK || (st = onnx_outputs_ready(c)) != GOPT_OK)
        return st;
    double mn = (double)onnx_numel(c->out[0] ? c->out[0] : a);
    int32_t attr[4] = {ta, tb, 0, 0};
    return onnx_emit(c, ZK_MATMUL, GOPT_OP_CLASS_GEMM, 2.0 * mn * (double)k + (IN(c, 2) ? mn : 0),
                     (const int[]){0, 1, 2}, 3, attr);
}

/* Einsum: FLOPs 2 x the product of every index's size (two operands), the
 * product (one operand); output dims from the output term. */
static gopt_status run_einsum(onnx_node *c) {
    char eqbuf[256];
    const char *eq = onnx_attr_str(c, "equation", NULL, eqbuf, sizeof eqbuf);
    if (!eq) return onnx_node_fail(c, "no equation");
    int64_t size[128];
    for (int i = 0; i < 128; i++) size[i] = -1;
    const char *p = eq;
    int term = 0, ell_rank = 0;
    int64_t ell[ZOO_MAX_RANK];
    for (; *p && !(p[0] == '-' && p[1] == '>'); term++) {
        gopt_status st = need(c, term);
        if (st != GOPT_OK) return st;
        const onnx_value *v = c->in[term];
        int letters = 0;
        for (const char *q = p; *q && *q != ',' && *q != '-'; q++) letters += (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z');
        int dim = 0;
        for (; *p && *p != ',' && *p != '-'; p++) {
            if (*p == '.') {
                if (strncmp(p, "...", 3) != 0) return onnx_node_fail(c, "bad equation '%s'", eq);
                int er = v->rank - letters;
                if (er < 0) return onnx_node_fail(c, "equation '%s' does not match input %d", eq, term);
                for (int i = 0; i < er; i++) ell[i] = v->d[dim + i];
                ell_rank = er;
                dim += er;
                p += 2;
            } else if (*p != ' ') {
                unsigned ch = (unsigned char)*p;
                if (ch >= 128 || dim >= v->rank) return onnx_node_fail(c, "equation '%s' does not match input %d", eq, term);
                if (size[ch] >= 0 && size[ch] != v->d[dim] && size[ch] != 1 && v->d[dim] != 1)
                    return onnx_node_fail(c, "index '%c' has sizes %lld and %lld", *p, (long long)size[ch],
                                          (long long)v->d[dim]);
                if (size[ch] < 0 || size[ch] == 1) size[ch] = v->d[dim];
                dim++;
            }
        }
        if (*p == ',') p++;
    }
    if (term != c->nin) return onnx_node_fail(c, "equation '%s' has %d terms for %d inputs", eq, term, c->nin);
    int rank = 0;
    int64_t d[ZOO_MAX_RANK];
    if (*p == '-') {
        for (p += 2; *p; p++) {
            if (*p == '.') {
                for (int i = 0; i < ell_rank && rank < ZOO_MAX_RANK; i++) d[rank++] = ell[i];
                p += 2;
            } else if (*p != ' ') {
                unsigned ch = (unsigned char)*p;
                if (ch >= 128 || size[ch] < 0 || rank >= ZOO_MAX_RANK)
                    return onnx_node_fail(c, "bad output term in '%s'", eq);
                d[rank++] = size[ch];
            }
        }
    } else { /* implicit: the ellipsis, then letters seen once, sorted */
        for (int i = 0; i < ell_rank; i++) d[rank++] = ell[i];
        for (int ch = 'A'; ch <= 'z'; ch++) {
            int count = 0;
            for (const char *q = eq; *q; q++) count += *q == ch;
            if (count == 1 && size[ch] >= 0 && rank < ZOO_MAX_RANK) d[rank++] = size[ch];
        }
    }
    double all = 1;
    for (int i = 0; i < 128; i++)
        if (size[i] >= 0) all *= (double)size[i];
    for (int i = 0; i < ell_rank; i++) all *= (double)ell[i];
    gopt_status st = set_out(c, 0, c->in[0]->elem, rank, d);
    if (st == GOPT_OK) st = onnx_outputs_ready(c);
    if (st != GOPT_OK) return st;
    int32_t attr[4] = {0};
    if (c->nin == 2) return emit_all(c, ZK_MATMUL, GOPT_OP_CLASS_GEMM, 2.0 * all, attr);
    return emit_all(c, ZK_OTHER, c->nin == 1 ? GOPT_OP_CLASS_REDUCTION : GOPT_OP_CLASS_GEMM,
                    c->nin == 1 ? all : 2.0 * all, NULL);
}

/* ---- convolution and pooling --------------------------------------------------------------------- */
typedef struct {
    int n;                    /* spatial dims */
    int64_t k[ZOO_MAX_RANK], s[ZOO_MAX_RANK], dil[ZOO_MAX_RANK], pb[ZOO_MAX_RANK], pe[ZOO_MAX_RANK];
} window;

static gopt_status read_window(onnx_node *c, const onnx_value *x, const int64_t *kernel, window *w) {
    w->n = x->rank - 2;
    if (w->n < 1) return onnx_node_fail(c, "input '%s' has rank %d; needs (N, C, spatial...)", x->name, x->rank);
    int64_t pads[2 * ZOO_MAX_RANK];
    int ns = onnx_attr_ints(c, "strides", w->s, ZOO_MAX_RANK), nd = onnx_attr_ints(c, "dilations", w->dil, ZOO_MAX_RANK);
    int np = onnx_attr_ints(c, "pads", pads, 2 * ZOO_MAX_RANK);
    char apbuf[16];
    const char *ap = onnx_attr_str(c, "auto_pad", "NOTSET", apbuf, sizeof apbuf);
    for (int i = 0; i < w->n; i++) {
        w->k[i] = kernel[i];
        if (ns != w->n) w->s[i] = 1;
        if (nd != w->n) w->dil[i] = 1;
        w->pb[i] = np == 2 * w->n ? pads[i] : 0;
        w->pe[i] = np == 2 * w->n ? pads[i + w->n] : 0;
        if (w->k[i] < 1 || w->s[i] < 1 || w->dil[i] < 1 || w->pb[i] < 0 || w->pe[i] < 0 || w->k[i] > ONNX_MAX_WINDOW ||
            w->dil[i] > ONNX_MAX_WINDOW || w->s[i] > ONNX_MAX_WINDOW || w->pb[i] > ONNX_MAX_WINDOW ||
            w->pe[i] > ONNX_MAX_WINDOW)
            return onnx_node_fail(c, "bad kernel/stride/dilation/pad in spatial dim %d", i);
        if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
            int64_t in = x->d[2 + i], out = (in + w->s[i] - 1) / w->s[i];
            int64_t total = (out - 1) * w->s[i] + (w->k[i] - 1) * w->dil[i] + 1 - in;
            if (total < 0) total = 0;
            w->pb[i] = !strcmp(ap, "SAME_UPPER") ? total / 2 : total - total / 2;
            w->pe[i] = total - w->pb[i];
        } else if (!strcmp(ap, "VALID")) {
            w->pb[i] = w->pe[i] = 0;
        }
    }
    return GOPT_OK;
}

static gopt_status window_out(onnx_node *c, const onnx_value *x, const window *w, int ceil_mode, int64_t *d) {
    for (int i = 0; i < w->n; i++) {
        int64_t span = x->d[2 + i] + w->pb[i] + w->pe[i] - (w->k[i] - 1) * w->dil[i] - 1;
        if (span < 0)
            return onnx_node_fail(c, "input '%s' spatial dim %d (%lld) is smaller than the window", x->name, i,
                                  (long long)x->d[2 + i]);
        d[2 + i] = (ceil_mode ? (span + w->s[i] - 1) / w->s[i] : span / w->s[i]) + 1;
    }
    return GOPT_OK;
}

static gopt_status run_conv(onnx_node *c) {
    gopt_status st;
    if ((st = need(c, 0)) != GOPT_OK || (st = need(c, 1)) != GOPT_OK) return st;
    const onnx_value *x = c->in[0], *w = c->in[1];
    int transposed = !strcmp(c->op, "ConvTranspose");
    int64_t g = onnx_attr_int(c, "group", 1);
    if (w->rank != x->rank || x->rank < 3 || g < 1 || g > ONNX_MAX_WINDOW || x->d[1] % g)
        return onnx_node_fail(c, "input rank %d, filter rank %d, group %lld do not fit", x->rank, w->rank, (long long)g);
    window win;
    if ((st = read_window(c, x, w->d + 2, &win)) != GOPT_OK) return st;
    int64_t d[ZOO_MAX_RANK];
    d[0] = x->d[0];
    double per = 1;
    for (int i = 2; i < w->rank; i++) per *= (double)w->d[i];
    if (!transposed) {
        if (w->d[1] * g != x->d[1])
            return onnx_node_fail(c, "input has %lld channels, filter expects %lld x group %lld", (long long)x->d[1],
                                  (long long)w->d[1], (long long)g);
        d[1] = w->d[0];
        if ((st = window_out(c, x, &win, 0, d)) != GOPT_OK) return st;
    } else {
        if (w->d[0] != x->d[1])
            return onnx_node_fail(c, "input has %lld channels, filter %lld", (long long)x->d[1], (long long)w->d[0]);
        if (w->d[1] > ONNX_MAX_NUMEL / g) return onnx_node_fail(c, "%lld x group %lld output channels", (long long)w->d[1], (long long)g);
        d[1] = w->d[1] * g;
        int64_t op[ZOO_MAX_RANK], os[ZOO_MAX_RANK];
        int nop = onnx_attr_ints(c, "output_padding", op, ZOO_MAX_RANK), nos = onnx_attr_ints(c, "output_shape", os, ZOO_MAX_RANK);
        for (int i = 0; i < win.n; i++) { /* in doubles: strides times sizes may pass 2^63 */
            double o = nos == win.n ? (double)os[i]
                                    : (double)win.s[i] * (double)(x->d[2 + i] - 1) + (nop == win.n ? (double)op[i] : 0) +
                                          (double)((win.k[i] - 1) * win.dil[i]) + 1 - (double)(win.pb[i] + win.pe[i]);
            if (!(o >= 1 && o <= (double)ONNX_MAX_NUMEL))
                return onnx_node_fail(c, "output spatial dim %d would be %.0f", i, o);
            d[2 + i] = (int64_t)o;
        }
    }
    if ((st = set_out(c, 0, x->elem, x->rank, d)) != GOPT_OK || (st = onnx_outputs_ready(c)) != GOPT_OK) return st;
    double flops = transposed ? 2.0 * (double)onnx_numel(x) * (double)w->d[1] * per
                              : 2.0 * out_elems(c) * (double)w->d[1] * per;
    int depthwise = g > 1 && g == x->d[1];
    int32_t attr[4] = {(int32_t)win.k[0], win.n > 1 ? (int32_t)win.k[1] : 1, (int32_t)win.s[0],
                       (depthwise ? ZOO_CONV_DEPTHWISE : 0) | (transposed ? ZOO_CONV_TRANSPOSED : 0)};
    return onnx_emit(c, ZK_CONV, GOPT_OP_CLASS_CONV, flops, (const int[]){0, 1, 2}, 3, attr);
}

static gopt_status run_pool(onnx_node *c) {
    gopt_status st = need(c, 0);
    if (st != GOPT_OK) return st;
    const onnx_value *x = c->in[0];
    int64_t kernel[ZOO_MAX_RANK], d[ZOO_MAX_RANK];
    int nk = onnx_attr_ints(c, "kernel_shape", kernel, ZOO_MAX_RANK);
    if (nk != x->rank - 2) return onnx_node_fail(c, "kernel_shape has %d dims for input rank %d", nk, x->rank);
    window w;
    if ((st = read_window(c, x, kernel, &w)) != GOPT_OK) return st;
    d[0] = x->d[0];
    d[1] = x->d[1];
    if ((st = window_out(c, x, &w, (int)onnx_attr_int(c, "ceil_mode", 0), d)) != GOPT_OK) return st;
    if ((st = set_out(c, 0, x->elem, x->rank, d)) != GOPT_OK || (st = set_out(c, 1, ONNX_I64, x->rank, d)) != GOPT_OK ||
        (st = onnx_outputs_ready(c)) != GOPT_OK)
        return st;
    double in = (double)onnx_numel(x), out = out_elems(c);
    int32_t attr[4] = {(int32_t)w.k[0], (int32_t)w.s[0], !strcmp(c->op, "MaxPool"), 0};
    return emit1(c, ZK_POOL, GOPT_OP_CLASS_REDUCTION, in > out ? in : out, attr);
}

static gopt_status run_global_pool(onnx_node *c) {
    gopt_status st = need(c, 0);
    if (st != GOPT_OK) return st;
    const onnx_value *x = c->in[0];
    int64_t d[ZOO_MAX_RANK];
    for (int i = 0; i < x->rank; i++) d[i] = i < 2 ? x->d[i] : 1;
    if ((st = set_out(c, 0, x->elem, x->rank, d)) != GOPT_OK || (st = onnx_outputs_ready(c)) != GOPT_OK) return st;
    return emit1(c, ZK_MEAN, GOPT_OP_CLASS_REDUCTION, (double)onnx_numel(x), NULL);
}

/* ---- normalization and softmax ------------------------------------------------------------------ */
static gopt_status run_norm(onnx_node *c) {
    gopt_status st = need(c, 0);
    if (st != GOPT_OK) return st;
    const onnx_value *x = c->in[0];
    int layer = strcmp(c->op, "BatchNormalization") != 0;
    if ((st = like(c, 0, x)) != GOPT_OK) return st;
    if (!layer) { /* training mode: running mean and variance, (C) */
        int64_t ch = x->rank > 1 ? x->d[1] : 1;
        if ((st = set_out(c, 1, x->elem, 1, &ch)) != GOPT_OK || (st = set_out(c, 2, x->elem, 1, &ch)) != GOPT_OK)
            return st;
    } else if (!strcmp(c->op, "LayerNormalization")) { /* mean and inverse std: 1 over the normalized dims */
        int ax = norm_axis(onnx_attr_int(c, "axis", -1), x->rank);
        int64_t d[ZOO_MAX_RANK];
        for (int i = 0; i < x->rank; i++) d[i] = i < ax ? x->d[i] : 1;
        if ((st = set_out(c, 1, x->elem, x->rank, d)) != GOPT_OK || (st = set_out(c, 2, x->elem, x->rank, d)) != GOPT_OK)
            return st;
    }
    if ((st = onnx_outputs_ready(c)) != GOPT_OK) return st;
    int32_t attr[4] = {layer, 0, 0, 0};
    return emit_all(c, ZK_NORM, GOPT_OP_CLASS_REDUCTION, 8.0 * (double)onnx_numel(x), attr);
}

static gopt_status run_softmax(onnx_node *c) {
    gopt_status st = need(c, 0);
    if (st == GOPT_OK) st = like(c, 0, c->in[0]);
    if (st == GOPT_OK) st = onnx_outputs_ready(c);
    return st != GOPT_OK ? st : emit1(c, ZK_SOFTMAX, GOPT_OP_CLASS_REDUCTION, 5.0 * out_elems(c), NULL);
}

/* Reduce over axes (attribute before opset 18, 13 for ReduceSum; input 1 after). */
static gopt_status run_reduce(onnx_node *c) {
    gopt_status st = need(c, 0);
    if (st != GOPT_OK) return st;
    const onnx_value *x = c->in[0];
    int64_t axes[ZOO_MAX_RANK];
    int n;
    if ((st = onnx_ints_arg(c, "axes", 1, axes, ZOO_MAX_RANK, &n)) != GOPT_OK) return st;
    int keep = onnx_attr_int(c, "keepdims", 1) != 0, arg = !strncmp(c->op, "Arg", 3);
    if (arg) {
        axes[0] = onnx_attr_int(c, "axis", 0);
        n = 1;
    }
    int red[ZOO_MAX_RANK] = {0};
    if (n <= 0 && !onnx_attr_int(c, "noop_with_empty_axes", 0))
        for (int i = 0; i < x->rank; i++) red[i] = 1;
    for (int i = 0; i < n; i++) {
        int a = norm_axis(axes[i], x->rank);
        if (a < 0 || a >= x->rank) return onnx_node_fail(c, "axis %lld is out of range", (long long)axes[i]);
        red[a] = 1;
    }
    int64_t d[ZOO_MAX_RANK];
    int rank = 0;
    for (int i = 0; i < x->rank; i++)
        if (!red[i]) d[rank++] = x->d[i];
        else if (keep) d[rank++] = 1;
    if ((st = set_out(c, 0, arg ? ONNX_I64 : x->elem, rank, d)) != GOPT_OK || (st = onnx_outputs_ready(c)) != GOPT_OK)
        return st;
    double in = (double)onnx_numel(x), out = out_elems(c);
    return emit1(c, arg ? ZK_NONE : ZK_MEAN, GOPT_OP_CLASS_REDUCTION, in > out ? in : out, NULL);
}

/* --unknown-as other: shapes from value_info, else the first input's; one
 * FLOP per output element; a gradient op per input (ZK_OTHER). */
gopt_status onnx_run_other(onnx_node *c) {
    const onnx_value *first = NULL;
    for (int i = 0; i < c->nin && !first; i++)
        if (c->in[i] && c->in[i]->has_shape) first = c->in[i];
    for (int j = 0; j < c->nout; j++)
        if (c->out[j] && first) {
            gopt_status st = like(c, j, first);
            if (st != GOPT_OK) return st;
        }
    gopt_status st = onnx_outputs_ready(c);
    return st != GOPT_OK ? st : emit_all(c, ZK_OTHER, GOPT_OP_CLASS_OTHER, out_elems(c), NULL);
}

/* ---- the table ----------------------------------------------------------------------------------- */
#define U(op) {op, run_unary, 0}
static const onnx_rule RULES[] = {
    {"Conv", run_conv, BIT(1) | BIT(2)},
    {"ConvTranspose", run_conv, BIT(1) | BIT(2)},
    {"Gemm", run_gemm, BIT(1) | BIT(2)},
    {"MatMul", run_matmul, BIT(1)},
    {"Einsum", run_einsum, BIT(1)},
    {"BatchNormalization", run_norm, BIT(1) | BIT(2)},
    {"LayerNormalization", run_norm, BIT(1) | BIT(2)},
    {"InstanceNormalization", run_norm, BIT(1) | BIT(2)},
    {"GroupNormalization", run_norm, BIT(1) | BIT(2)},
    {"Softmax", run_softmax, 0},
    {"LogSoftmax", run_softmax, 0},
    {"MaxPool", run_pool, 0},
    {"AveragePool", run_pool, 0},
    {"LpPool", run_pool, 0},
    {"GlobalAveragePool", run_global_pool, 0},
    {"GlobalMaxPool", run_global_pool, 0},
    {"ReduceMean", run_reduce, 0},
    {"ReduceSum", run_reduce, 0},
    {"ReduceMax", run_reduce, 0},
    {"ReduceMin", run_reduce, 0},
    {"ReduceProd", run_reduce, 0},
    {"ReduceL1", run_reduce, 0},
    {"ReduceL2", run_reduce, 0},
    {"ReduceSumSquare", run_reduce, 0},
    {"ReduceLogSumExp", run_reduce, 0},
    {"ArgMax", run_reduce, 0},
    {"ArgMin", run_reduce, 0},
    {"Add", run_binary, BIT(0) | BIT(1)},
    {"Sub", run_binary, BIT(0) | BIT(1)},
    {"Mul", run_binary, BIT(0) | BIT(1)},
    {"Div", run_binary, 0},
    {"Pow", run_binary, 0},
    {"PRelu", run_binary, BIT(1)},
    {"Max", run_binary, 0},
    {"Min", run_binary, 0},
    {"Sum", run_binary, 0},
    {"Mean", run_binary, 0},
    {"Where", run_binary, 0},
    {"Equal", run_binary, 0},
    {"Less", run_binary, 0},
    {"Greater", run_binary, 0},
    {"LessOrEqual", run_binary, 0},
    {"GreaterOrEqual", run_binary, 0},
    {"And", run_binary, 0},
    {"Or", run_binary, 0},
    {"Xor", run_binary, 0},
    {"Mod", run_binary, 0},
    U("Relu"), U("Sigmoid"), U("Tanh"), U("Sqrt"), U("Exp"), U("Log"), U("Erf"), U("Gelu"), U("LeakyRelu"), U("Elu"),
    U("Selu"), U("Celu"), U("Softplus"), U("Softsign"), U("Mish"), U("Reciprocal"), U("Abs"), U("Neg"),
    {"Clip", run_unary, 0},
    U("HardSigmoid"), U("HardSwish"), U("Sin"), U("Cos"), U("ThresholdedRelu"), U("Floor"), U("Ceil"), U("Round"),
    U("Sign"), U("Not"), U("IsNaN"), U("IsInf"),
    {"Identity", run_identity, 0},
    {"Dropout", run_dropout, 0},
    {"Cast", onnx_run_cast, 0},
    {"Reshape", onnx_run_reshape, 0},
    {"Flatten", onnx_run_flatten, 0},
    {"Transpose", onnx_run_transpose, 0},
    {"Squeeze", onnx_run_squeeze, 0},
    {"Unsqueeze", onnx_run_unsqueeze, 0},
    {"Concat", onnx_run_concat, 0},
    {"Split", onnx_run_split, 0},
    {"Slice", onnx_run_slice, 0},
    {"Gather", onnx_run_gather, BIT(0)},
    {"Expand", onnx_run_expand, 0},
    {"Tile", onnx_run_expand, 0},
    {"Pad", onnx_run_pad, 0},
    {"Resize", onnx_run_resize, 0},
    {"Upsample", onnx_run_resize, 0},
    {"Trilu", onnx_run_trilu, 0},
    {"Shape", onnx_run_shape, 0},
    {"Size", onnx_run_size, 0},
    {"Constant", onnx_run_constant, 0},
    {"ConstantOfShape", onnx_run_constant_of_shape, 0},
    {"Range", onnx_run_range, 0},
    {"LSTM", onnx_run_lstm, BIT(1) | BIT(2) | BIT(3)},
    {"GRU", onnx_run_gru, BIT(1) | BIT(2) | BIT(3)},
};
#undef U

const onnx_rule *onnx_rule_find(const char *op) {
    for (size_t i = 0; i < sizeof RULES / sizeof RULES[0]; i++)
        if (strcmp(RULES[i].op, op) == 0) return &RULES[i];
    return NULL;
}
