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
enum { I64 = ONNX__TENSOR_PROTO__DATA_TYPE__INT64, BOOL = ONNX__TENSOR_PROTO__DATA_TYPE__BOOL };

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

const char *onnx_attr_str(const onnx_node *c, const char *name, const char *dflt) {
    const Onnx__AttributeProto *a = onnx_attr(c, name);
    return a && a->has_s ? (const char *)a->s.data : dflt; /* protobuf-c NUL-terminates bytes */
}

/* ---- helpers ------------------------------------------------------------------------------ */
static onnx_value *IN(const onnx_node *c, int i) { return i < c->nin ? c->in[i] : NULL; }

static gopt_status need(const onnx_node *c, int i) {
    if (!IN(c, i)) return onnx_node_fail(c, "input %d is missing", i);
    if (!c->in[i]->has_shape) return onnx_node_fail(c, "input '%s' has no known shape", c->in[i]->name);
    return GOPT_OK;
}

static gopt_status set_out(onnx_node *c, int j, int elem, int rank, const int64_t *d) {
    if (j >= c->nout || !c->out[j]) return GOPT_OK;
    return onnx_value_set_shape(c->x, c, c->out[j], elem, rank, d);
}

static gopt_status like(onnx_node *c, int j, const onnx_value *v) { return set_out(c, j, v->elem, v->rank, v->d); }

static int norm_axis(int64_t a, int rank) { return (int)(a < 0 ? a + rank : a); }

/* Values of a constant input (axes, shapes); n = -1 when absent or unknown. */
static const int64_t *ints_of(const onnx_node *c, int i, int *n) {
    onnx_value *v = IN(c, i);
    *n = v ? v->ncv : -1;
    return v && v->ncv >= 0 ? v->cv : NULL;
}

static double out_elems(const onnx_node *c) {
    double n = 0;
    for (int j = 0; j < c->nout; j++)
        if (c->out[j]) n += (double)onnx_numel(c->out[j]);
    return n;
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

/* Emit with every present input as data, in order. */
static gopt_status emit_all(onnx_node *c, zoo_kind kind, gopt_op_class cls, double flops, const int32_t *attr) {
    int slots[ONNX_MAX_IO];
    for (int i = 0; i < c->nin; i++) slots[i] = i;
    return onnx_emit(c, kind, cls, flops, slots, c->nin, attr);
}

static gopt_status emit1(onnx_node *c, zoo_kind kind, gopt_op_class cls, double flops, const int32_t *attr) {
    static const int s0[1] = {0};
    return onnx_emit(c, kind, cls, flops, s0, 1, attr);
}

/* Output 0 gets constant integer values: no node. */
static gopt_status const_out(onnx_node *c, int rank, const int64_t *d, const int64_t *vals, int n) {
    gopt_status st = set_out(c, 0, I64, rank, d);
    if (st == GOPT_OK && c->nout > 0 && c->out[0]) {
        st = onnx_value_set_ints(c->x, c->out[0], vals, n);
        c->out[0]->defined = 1;
    }
    return st;
}

static int all_known(const onnx_node *c, int upto) {
    for (int i = 0; i < upto && i < c->nin; i++)
        if (c->in[i] && c->in[i]->ncv < 0) return 0;
    return c->nin > 0;
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
    if (!strcmp(c->op, "Not") || !strcmp(c->op, "IsNaN") || !strcmp(c->op, "IsInf")) elem = BOOL;
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

static gopt_status run_dropout(onnx_node *c) {
    int n;
    const int64_t *train = ints_of(c, 2, &n);
    int training = (n == 1 && train[0]) || (c->nout > 1 && c->out[1]);
    if (!training) return alias(c);
    gopt_status st = need(c, 0);
    if (st == GOPT_OK) st = like(c, 0, c->in[0]);
    if (st == GOPT_OK) st = set_out(c, 1, BOOL, c->in[0]->rank, c->in[0]->d);
    if (st == GOPT_OK) st = onnx_outputs_ready(c);
    int32_t attr[4] = {ZU_SCALE, 0, 0, 0};
    return st != GOPT_OK ? st : emit1(c, ZK_UNARY, GOPT_OP_CLASS_ELEMENTWISE, out_elems(c), attr);
}

static int64_t arith(const char *op, int64_t a, int64_t b) {
    switch (op[0]) {
    case 'A': return a + b;
    case 'S': return a - b;
    case 'M': return a * b;
    default: return b ? a / b : 0;
    }
}

static gopt_status run_binary(onnx_node *c) {
    int rank;
    int64_t d[ZOO_MAX_RANK];
    int n = c->nin, is_where = !strcmp(c->op, "Where");
    gopt_status st = broadcast(c, n, &rank, d);
    if (st != GOPT_OK) return st;
    if (n == 0 || !c->in[0]) return onnx_node_fail(c, "input 0 is missing");
    int cmp = !strcmp(c->op, "Equal") || !strcmp(c->op, "Less") || !strcmp(c->op, "Greater") ||
              !strcmp(c->op, "LessOrEqual") || !strcmp(c->op, "GreaterOrEqual") || !strcmp(c->op, "And") ||
              !strcmp(c->op, "Or") || !strcmp(c->op, "Xor");
    int elem = cmp ? BOOL : c->in[is_where ? 1 : 0]->elem;
    int arithm = n == 2 && (!strcmp(c->op, "Add") || !strcmp(c->op, "Sub") || !strcmp(c->op, "Mul") ||
                            !strcmp(c->op, "Div"));
    if (arithm && all_known(c, 2)) {
        int64_t nel = 1, vals[ONNX_MAX_CONST];
        for (int i = 0; i < rank; i++) nel *= d[i];
        if (nel <= ONNX_MAX_CONST && c->in[0]->ncv >= 1 && c->in[1]->ncv >= 1) {
            for (int64_t k = 0; k < nel; k++)
                vals[k] = arith(c->op, c->in[0]->cv[c->in[0]->ncv == 1 ? 0 : k % c->in[0]->ncv],
                                c->in[1]->cv[c->in[1]->ncv == 1 ? 0 : k % c->in[1]->ncv]);
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
    const char *eq = onnx_attr_str(c, "equation", NULL);
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
    const char *ap = onnx_attr_str(c, "auto_pad", "NOTSET");
    for (int i = 0; i < w->n; i++) {
        w->k[i] = kernel[i];
        if (ns != w->n) w->s[i] = 1;
        if (nd != w->n) w->dil[i] = 1;
        w->pb[i] = np == 2 * w->n ? pads[i] : 0;
        w->pe[i] = np == 2 * w->n ? pads[i + w->n] : 0;
        if (w->k[i] < 1 || w->s[i] < 1 || w->dil[i] < 1 || w->pb[i] < 0 || w->pe[i] < 0 || w->k[i] > ONNX_MAX_NUMEL ||
            w->dil[i] > ONNX_MAX_NUMEL || w->s[i] > ONNX_MAX_NUMEL || w->pb[i] > ONNX_MAX_NUMEL || w->pe[i] > ONNX_MAX_NUMEL)
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
    if (w->rank != x->rank || x->rank < 3 || g < 1 || x->d[1] % g)
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
        d[1] = w->d[1] * g;
        int64_t op[ZOO_MAX_RANK], os[ZOO_MAX_RANK];
        int nop = onnx_attr_ints(c, "output_padding", op, ZOO_MAX_RANK), nos = onnx_attr_ints(c, "output_shape", os, ZOO_MAX_RANK);
        for (int i = 0; i < win.n; i++) {
            d[2 + i] = nos == win.n ? os[i]
                                    : win.s[i] * (x->d[2 + i] - 1) + (nop == win.n ? op[i] : 0) +
                                          (win.k[i] - 1) * win.dil[i] + 1 - win.pb[i] - win.pe[i];
            if (d[2 + i] < 1) return onnx_node_fail(c, "output spatial dim %d would be %lld", i, (long long)d[2 + i]);
        }
    }
    if ((st = set_out(c, 0, x->elem, x->rank, d)) != GOPT_OK || (st = onnx_outputs_ready(c)) != GOPT_OK) return st;
    double flops = transposed ? 2.0 * (double)onnx_numel(x) * (double)w->d[1] * per
                              : 2.0 * out_elems(c) * (double)w->d[1] * per;
    int depthwise = g > 1 && g == x->d[1];
    int32_t attr[4] = {(int32_t)win.k[0], win.n > 1 ? (int32_t)win.k[1] : 1, (int32_t)win.s[0], depthwise};
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
    if ((st = set_out(c, 0, x->elem, x->rank, d)) != GOPT_OK || (st = set_out(c, 1, I64, x->rank, d)) != GOPT_OK ||
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
    int n = onnx_attr_ints(c, "axes", axes, ZOO_MAX_RANK);
    if (n < 0 && IN(c, 1)) {
        const int64_t *v = ints_of(c, 1, &n);
        if (!v) return onnx_node_fail(c, "axes input '%s' is not a constant", c->in[1]->name);
        if (n > ZOO_MAX_RANK) return onnx_node_fail(c, "%d axes", n);
        memcpy(axes, v, sizeof *v * (size_t)n);
    }
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
    if ((st = set_out(c, 0, arg ? I64 : x->elem, rank, d)) != GOPT_OK || (st = onnx_outputs_ready(c)) != GOPT_OK)
        return st;
    double in = (double)onnx_numel(x), out = out_elems(c);
    return emit1(c, arg ? ZK_NONE : ZK_MEAN, GOPT_OP_CLASS_REDUCTION, in > out ? in : out, NULL);
}

/* ---- data movement ---------------------------------------------------------------------------- */
static gopt_status move(onnx_node *c, int rank, const int64_t *d) {
    gopt_status st = set_out(c, 0, c->in[0]->elem, rank, d);
    if (st != GOPT_OK) return st;
    if (c->in[0]->ncv >= 0 && c->out[0]) { /* known integers keep their values through a reshape */
        c->out[0]->defined = 1;
        return onnx_value_set_ints(c->x, c->out[0], c->in[0]->cv, c->in[0]->ncv);
    }
    if ((st = onnx_outputs_ready(c)) != GOPT_OK) return st;
    return emit1(c, onnx_elem_is_float(c->in[0]->elem) ? ZK_MOVE : ZK_NONE, GOPT_OP_CLASS_DATA_MOVEMENT, 0, NULL);
}

static gopt_status run_reshape(onnx_node *c) {
    gopt_status st = need(c, 0);
    if (st != GOPT_OK) return st;
    int n;
    const int64_t *s = ints_of(c, 1, &n);
    int64_t d[ZOO_MAX_RANK];
    if (!s || n > ZOO_MAX_RANK) {
        if ((st = onnx_outputs_ready(c)) != GOPT_OK) return st; /* value_info may still say */
        return move(c, c->out[0] ? c->out[0]->rank : 0, c->out[0] ? c->out[0]->d : d);
    }
    int64_t known = 1, total = onnx_numel(c->in[0]);
    int infer = -1, allowzero = onnx_attr_int(c, "allowzero", 0) != 0;
    for (int i = 0; i < n; i++) {
        d[i] = s[i] == 0 && !allowzero ? (i < c->in[0]->rank ? c->in[0]->d[i] : 1) : s[i];
        if (d[i] == -1 && infer < 0) infer = i;
        else if (d[i] < 0) return onnx_node_fail(c, "shape value %lld is invalid", (long long)s[i]);
        else known *= d[i] ? d[i] : 1;
    }
    if (infer >= 0) d[infer] = known ? total / known : 0;
    return move(c, n, d);
}

static gopt_status run_flatten(onnx_node *c) {
    gopt_status st = need(c, 0);
    if (st != GOPT_OK) return st;
    int ax = norm_axis(onnx_attr_int(c, "axis", 1), c->in[0]->rank);
    if (ax < 0 || ax > c->in[0]->rank) return onnx_node_fail(c, "axis out of range");
    int64_t d[2] = {1, 1};
    for (int i = 0; i < c->in[0]->rank; i++) d[i >= ax] *= c->in[0]->d[i];
    return move(c, 2, d);
}

static gopt_status run_transpose(onnx_node *c) {
    gopt_status st = need(c, 0);
    if (st != GOPT_OK) return st;
    const onnx_value *x = c->in[0];
    int64_t perm[ZOO_MAX_RANK], d[ZOO_MAX_RANK];
    int np = onnx_attr_ints(c, "perm", perm, ZOO_MAX_RANK);
    for (int i = 0; i < x->rank; i++) {
        int64_t p = np == x->rank ? perm[i] : x->rank - 1 - i;
        if (p < 0 || p >= x->rank) return onnx_node_fail(c, "perm value %lld is out of range", (long long)p);
        d[i] = x->d[p];
    }
    return move(c, x->rank, d);
}

static gopt_status squeeze_axes(onnx_node *c, int64_t *axes, int *n) {
    *n = onnx_attr_ints(c, "axes", axes, ZOO_MAX_RANK);
    if (*n < 0 && IN(c, 1)) {
        const int64_t *v = ints_of(c, 1, n);
        if (!v) return onnx_node_fail(c, "axes input '%s' is not a constant", c->in[1]->name);
        if (*n > ZOO_MAX_RANK) return onnx_node_fail(c, "%d axes", *n);
        memcpy(axes, v, sizeof *v * (size_t)*n);
    }
    return GOPT_OK;
}

static gopt_status run_squeeze(onnx_node *c) {
    gopt_status st = need(c, 0);
    int64_t axes[ZOO_MAX_RANK], d[ZOO_MAX_RANK];
    int n;
    if (st != GOPT_OK || (st = squeeze_axes(c, axes, &n)) != GOPT_OK) return st;
    const onnx_value *x = c->in[0];
    int drop[ZOO_MAX_RANK] = {0}, rank = 0;
    for (int i = 0; i < n; i++) {
        int a = norm_axis(axes[i], x->rank);
        if (a < 0 || a >= x->rank) return onnx_node_fail(c, "axis %lld is out of range", (long long)axes[i]);
        drop[a] = 1;
    }
    for (int i = 0; i < x->rank; i++)
        if (!(n > 0 ? drop[i] : x->d[i] == 1)) d[rank++] = x->d[i];
    return move(c, rank, d);
}

static gopt_status run_unsqueeze(onnx_node *c) {
    gopt_status st = need(c, 0);
    int64_t axes[ZOO_MAX_RANK], d[ZOO_MAX_RANK];
    int n;
    if (st != GOPT_OK || (st = squeeze_axes(c, axes, &n)) != GOPT_OK) return st;
    const onnx_value *x = c->in[0];
    int rank = x->rank + (n > 0 ? n : 0), add[ZOO_MAX_RANK] = {0};
    if (rank > ZOO_MAX_RANK) return onnx_node_fail(c, "output rank %d is too large", rank);
    for (int i = 0; i < n; i++) {
        int a = norm_axis(axes[i], rank);
        if (a < 0 || a >= rank) return onnx_node_fail(c, "axis %lld is out of range", (long long)axes[i]);
        add[a] = 1;
    }
    for (int i = 0, k = 0; i < rank; i++) d[i] = add[i] ? 1 : (k < x->rank ? x->d[k++] : 1);
    return move(c, rank, d);
}

static gopt_status run_cast(onnx_node *c) {
    gopt_status st = need(c, 0);
    if (st != GOPT_OK) return st;
    int to = (int)onnx_attr_int(c, "to", c->in[0]->elem);
    if ((st = set_out(c, 0, to, c->in[0]->rank, c->in[0]->d)) != GOPT_OK) return st;
    if (c->in[0]->ncv >= 0 && c->out[0]) {
        c->out[0]->defined = 1;
        return onnx_value_set_ints(c->x, c->out[0], c->in[0]->cv, c->in[0]->ncv);
    }
    if ((st = onnx_outputs_ready(c)) != GOPT_OK) return st;
    int diff = onnx_elem_is_float(to) && onnx_elem_is_float(c->in[0]->elem);
    return emit1(c, diff ? ZK_MOVE : ZK_NONE, GOPT_OP_CLASS_DATA_MOVEMENT, 0, NULL);
}

static gopt_status run_concat(onnx_node *c) {
    gopt_status st = need(c, 0);
    if (st != GOPT_OK) return st;
    const onnx_value *x = c->in[0];
    int ax = norm_axis(onnx_attr_int(c, "axis", 0), x->rank);
    if (ax < 0 || ax >= x->rank) return onnx_node_fail(c, "axis is out of range for rank %d", x->rank);
    int64_t d[ZOO_MAX_RANK], vals[ONNX_MAX_CONST];
    memcpy(d, x->d, sizeof d);
    d[ax] = 0;
    int nv = 0, known = 1;
    for (int i = 0; i < c->nin; i++) {
        if ((st = need(c, i)) != GOPT_OK) return st;
        const onnx_value *v = c->in[i];
        if (v->rank != x->rank) return onnx_node_fail(c, "input '%s' has rank %d, not %d", v->name, v->rank, x->rank);
        d[ax] += v->d[ax];
        if (v->ncv < 0 || nv + v->ncv > ONNX_MAX_CONST || x->rank != 1) known = 0;
        else memcpy(vals + nv, v->cv, sizeof *vals * (size_t)v->ncv), nv += v->ncv;
    }
    if (known) return const_out(c, 1, d, vals, nv);
    if ((st = set_out(c, 0, x->elem, x->rank, d)) != GOPT_OK || (st = onnx_outputs_ready(c)) != GOPT_OK) return st;
    return emit_all(c, onnx_elem_is_float(x->elem) ? ZK_CONCAT : ZK_NONE, GOPT_OP_CLASS_DATA_MOVEMENT, 0, NULL);
}

static gopt_status run_split(onnx_node *c) {
    gopt_status st = need(c, 0);
    if (st != GOPT_OK) return st;
    const onnx_value *x = c->in[0];
    int ax = norm_axis(onnx_attr_int(c, "axis", 0), x->rank);
    if (ax < 0 || ax >= x->rank) return onnx_node_fail(c, "axis is out of range for rank %d", x->rank);
    if (c->nout > ZOO_MAX_OUTS) return onnx_node_fail(c, "%d outputs; at most %d", c->nout, ZOO_MAX_OUTS);
    int64_t sizes[ZOO_MAX_OUTS];
    int n = onnx_attr_ints(c, "split", sizes, ZOO_MAX_OUTS);
    if (n < 0 && IN(c, 1)) {
        const int64_t *v = ints_of(c, 1, &n);
        if (!v) return onnx_node_fail(c, "split input '%s' is not a constant", c->in[1]->name);
        if (n > ZOO_MAX_OUTS) return onnx_node_fail(c, "%d split sizes", n);
        memcpy(sizes, v, sizeof *v * (size_t)n);
    }
    if (n < 0) { /* equal parts, the last one smaller */
        n = c->nout;
        int64_t part = (x->d[ax] + n - 1) / (n ? n : 1);
        for (int j = 0; j < n; j++) sizes[j] = j < n - 1 ? part : x->d[ax] - part * (n - 1);
    }
    if (n != c->nout) return onnx_node_fail(c, "%d split sizes for %d outputs", n, c->nout);
    int64_t sum = 0;
    for (int j = 0; j < n; j++) {
        if (sizes[j] < 0) return onnx_node_fail(c, "split size %lld", (long long)sizes[j]);
        int64_t d[ZOO_MAX_RANK];
        memcpy(d, x->d, sizeof d);
        d[ax] = sizes[j];
        sum += sizes[j];
        if ((st = set_out(c, j, x->elem, x->rank, d)) != GOPT_OK) return st;
    }
    if (sum != x->d[ax])
        return onnx_node_fail(c, "split sizes add to %lld, the axis has %lld", (long long)sum, (long long)x->d[ax]);
    if ((st = onnx_outputs_ready(c)) != GOPT_OK) return st;
    return emit1(c, onnx_elem_is_float(x->elem) ? ZK_SPLIT : ZK_NONE, GOPT_OP_CLASS_DATA_MOVEMENT, 0, NULL);
}

/* Slice (opset >= 10: starts, ends, axes, steps are inputs; before: attributes). */
static gopt_status run_slice(onnx_node *c) {
    gopt_status st = need(c, 0);
    if (st != GOPT_OK) return st;
    const onnx_value *x = c->in[0];
    int64_t st_[ZOO_MAX_RANK], en[ZOO_MAX_RANK], ax[ZOO_MAX_RANK], sp[ZOO_MAX_RANK];
    int n = onnx_attr_ints(c, "starts", st_, ZOO_MAX_RANK), ne = onnx_attr_ints(c, "ends", en, ZOO_MAX_RANK);
    int na = onnx_attr_ints(c, "axes", ax, ZOO_MAX_RANK), ns = -1;
    if (n < 0) {
        int k;
        const int64_t *v;
        if (!(v = ints_of(c, 1, &n)) || n > ZOO_MAX_RANK) goto unknown;
        memcpy(st_, v, sizeof *v * (size_t)n);
        if (!(v = ints_of(c, 2, &ne)) || ne != n) goto unknown;
        memcpy(en, v, sizeof *v * (size_t)n);
        na = -1;
        if (IN(c, 3)) {
            if (!(v = ints_of(c, 3, &k)) || k != n) goto unknown;
            memcpy(ax, v, sizeof *v * (size_t)n), na = n;
        }
        if (IN(c, 4)) {
            if (!(v = ints_of(c, 4, &k)) || k != n) goto unknown;
            memcpy(sp, v, sizeof *v * (size_t)n), ns = n;
        }
    }
    if (n < 0 || ne != n || (na >= 0 && na != n)) return onnx_node_fail(c, "starts, ends and axes differ in length");
    int64_t d[ZOO_MAX_RANK], first[ZOO_MAX_RANK] = {0}, step[ZOO_MAX_RANK];
    memcpy(d, x->d, sizeof d);
    for (int i = 0; i < x->rank; i++) step[i] = 1;
    for (int i = 0; i < n; i++) {
        int a = norm_axis(na >= 0 ? ax[i] : i, x->rank);
        int64_t dim = x->d[a], s = ns >= 0 ? sp[i] : 1, b = st_[i], e = en[i];
        if (a < 0 || a >= x->rank || s == 0) return onnx_node_fail(c, "bad axis or step in slice %d", i);
        if (b < 0) b += dim;
        if (e < 0) e += dim;
        if (s > 0) {
            b = b < 0 ? 0 : (b > dim ? dim : b);
            e = e < 0 ? 0 : (e > dim ? dim : e);
            d[a] = e > b ? (e - b + s - 1) / s : 0;
        } else {
            b = b < 0 ? -1 : (b > dim - 1 ? dim - 1 : b);
            e = e < -1 ? -1 : (e > dim - 1 ? dim - 1 : e);
            d[a] = b > e ? (b - e + (-s) - 1) / (-s) : 0;
        }
        first[a] = b;
        step[a] = s;
    }
    if (x->ncv >= 0 && x->rank == 1 && c->out[0]) {
        int64_t vals[ONNX_MAX_CONST];
        for (int64_t k = 0; k < d[0]; k++) vals[k] = x->cv[first[0] + k * step[0]];
        return const_out(c, 1, d, vals, (int)d[0]);
    }
    if ((st = set_out(c, 0, x->elem, x->rank, d)) != GOPT_OK) return st;
unknown:
    if ((st = onnx_outputs_ready(c)) != GOPT_OK) return st;
    return emit1(c, onnx_elem_is_float(x->elem) ? ZK_SLICE : ZK_NONE, GOPT_OP_CLASS_DATA_MOVEMENT, 0, NULL);
}

static gopt_status run_gather(onnx_node *c) {
    gopt_status st;
    if ((st = need(c, 0)) != GOPT_OK || (st = need(c, 1)) != GOPT_OK) return st;
    const onnx_value *x = c->in[0], *ix = c->in[1];
    int ax = norm_axis(onnx_attr_int(c, "axis", 0), x->rank);
    if (ax < 0 || ax >= x->rank) return onnx_node_fail(c, "axis is out of range for rank %d", x->rank);
    int rank = x->rank - 1 + ix->rank;
    if (rank > ZOO_MAX_RANK) return onnx_node_fail(c, "output rank %d is too large", rank);
    int64_t d[ZOO_MAX_RANK];
    int k = 0;
    for (int i = 0; i < ax; i++) d[k++] = x->d[i];
    for (int i = 0; i < ix->rank; i++) d[k++] = ix->d[i];
    for (int i = ax + 1; i < x->rank; i++) d[k++] = x->d[i];
    if (x->ncv >= 0 && ix->ncv >= 0 && x->rank == 1) { /* shape arithmetic */
        int64_t vals[ONNX_MAX_CONST];
        for (int i = 0; i < ix->ncv; i++) {
            int64_t j = ix->cv[i] < 0 ? ix->cv[i] + x->ncv : ix->cv[i];
            if (j < 0 || j >= x->ncv) return onnx_node_fail(c, "index %lld is out of range", (long long)ix->cv[i]);
            vals[i] = x->cv[j];
        }
        return const_out(c, rank, d, vals, ix->ncv);
    }
    if ((st = set_out(c, 0, x->elem, rank, d)) != GOPT_OK || (st = onnx_outputs_ready(c)) != GOPT_OK) return st;
    if (!onnx_elem_is_float(x->elem)) return emit_all(c, ZK_NONE, GOPT_OP_CLASS_DATA_MOVEMENT, 0, NULL);
    if (ix->ncv >= 0 && !ix->param) /* fixed indices: a slice of x */
        return emit1(c, ZK_SLICE, GOPT_OP_CLASS_DATA_MOVEMENT, 0, NULL);
    return emit_all(c, ZK_GATHER, GOPT_OP_CLASS_DATA_MOVEMENT, 0, NULL);
}

/* Expand and Tile: a broadcast whose gradient is a Sum (the Add rule with one input). */
static gopt_status run_expand(onnx_node *c) {
    gopt_status st = need(c, 0);
    if (st != GOPT_OK) return st;
    const onnx_value *x = c->in[0];
    int n, rank;
    const int64_t *s = ints_of(c, 1, &n);
    int64_t d[ZOO_MAX_RANK];
    if (s && n <= ZOO_MAX_RANK) {
        if (!strcmp(c->op, "Tile")) {
            if (n != x->rank) return onnx_node_fail(c, "%d repeats for rank %d", n, x->rank);
            for (int i = 0; i < n; i++) {
                if (s[i] < 0 || (s[i] && x->d[i] > ONNX_MAX_NUMEL / s[i])) return onnx_node_fail(c, "bad repeats");
                d[i] = x->d[i] * s[i];
            }
            rank = n;
        } else {
            rank = n > x->rank ? n : x->rank;
            for (int i = 0; i < rank; i++) {
                int ia = i - (rank - x->rank), is = i - (rank - n);
                int64_t a = ia >= 0 ? x->d[ia] : 1, b = is >= 0 ? s[is] : 1;
                if (a != b && a != 1 && b != 1) return onnx_node_fail(c, "shape does not broadcast at dim %d", i);
                d[i] = a == 1 ? b : a;
            }
        }
        if ((st = set_out(c, 0, x->elem, rank, d)) != GOPT_OK) return st;
    }
    if ((st = onnx_outputs_ready(c)) != GOPT_OK) return st;
    return emit1(c, onnx_elem_is_float(x->elem) ? ZK_ADD : ZK_NONE, GOPT_OP_CLASS_DATA_MOVEMENT, 0, NULL);
}

/* Pad: the gradient slices the padding off (the Concat rule with one input). */
static gopt_status run_pad(onnx_node *c) {
    gopt_status st = need(c, 0);
    if (st != GOPT_OK) return st;
    const onnx_value *x = c->in[0];
    int64_t pads[2 * ZOO_MAX_RANK], d[ZOO_MAX_RANK];
    int n = onnx_attr_ints(c, "pads", pads, 2 * ZOO_MAX_RANK);
    if (n < 0) {
        const int64_t *v = ints_of(c, 1, &n);
        if (v && n <= 2 * ZOO_MAX_RANK) memcpy(pads, v, sizeof *v * (size_t)n);
        else n = -1;
    }
    if (n == 2 * x->rank && !IN(c, 3)) {
        for (int i = 0; i < x->rank; i++) {
            d[i] = x->d[i] + pads[i] + pads[i + x->rank];
            if (d[i] < 0 || pads[i] > ONNX_MAX_NUMEL || pads[i + x->rank] > ONNX_MAX_NUMEL)
                return onnx_node_fail(c, "pads make dim %d negative", i);
        }
        if ((st = set_out(c, 0, x->elem, x->rank, d)) != GOPT_OK) return st;
    }
    if ((st = onnx_outputs_ready(c)) != GOPT_OK) return st;
    return emit1(c, onnx_elem_is_float(x->elem) ? ZK_CONCAT : ZK_NONE, GOPT_OP_CLASS_DATA_MOVEMENT, 0, NULL);
}

/* Resize/Upsample: output from sizes or scales; gradient an average-pool gradient. */
static gopt_status run_resize(onnx_node *c) {
    gopt_status st = need(c, 0);
    if (st != GOPT_OK) return st;
    const onnx_value *x = c->in[0];
    int n;
    const int64_t *sz = ints_of(c, 3, &n);
    if (sz && n == x->rank && (st = set_out(c, 0, x->elem, n, sz)) != GOPT_OK) return st;
    if ((st = onnx_outputs_ready(c)) != GOPT_OK) return st; /* scales are floats: value_info says */
    int32_t attr[4] = {1, 1, 0, 0};
    return emit1(c, ZK_POOL, GOPT_OP_CLASS_DATA_MOVEMENT, 0, attr);
}

/* ---- constants and shapes: no node ---------------------------------------------------------------- */
static gopt_status run_shape(onnx_node *c) {
    gopt_status st = need(c, 0);
    if (st != GOPT_OK) return st;
    int r = c->in[0]->rank;
    int64_t s = onnx_attr_int(c, "start", 0), e = onnx_attr_int(c, "end", r);
    s = s < 0 ? s + r : s;
    e = e < 0 ? e + r : e;
    s = s < 0 ? 0 : (s > r ? r : s);
    e = e < s ? s : (e > r ? r : e);
    int64_t n = e - s;
    return const_out(c, 1, &n, c->in[0]->d + s, (int)n);
}

static gopt_status run_size(onnx_node *c) {
    gopt_status st = need(c, 0);
    int64_t n = onnx_numel(c->in[0]);
    return st != GOPT_OK ? st : const_out(c, 0, NULL, &n, 1);
}

static gopt_status run_constant(onnx_node *c) {
    if (!c->nout || !c->out[0]) return GOPT_OK;
    onnx_value *o = c->out[0];
    const Onnx__AttributeProto *a = onnx_attr(c, "value");
    gopt_status st;
    if (a && a->t) {
        st = onnx_tensor_value(c->x, c, o, a->t);
    } else if ((a = onnx_attr(c, "value_int")) || (a = onnx_attr(c, "value_ints"))) {
        int64_t n = a->n_ints ? (int64_t)a->n_ints : 1;
        st = a->n_ints ? onnx_value_set_shape(c->x, c, o, I64, 1, &n) : onnx_value_set_shape(c->x, c, o, I64, 0, NULL);
        if (st == GOPT_OK) st = onnx_value_set_ints(c->x, o, a->n_ints ? a->ints : &a->i, (int)(n < 1000 ? n : 1000));
    } else if ((a = onnx_attr(c, "value_float")) || (a = onnx_attr(c, "value_floats"))) {
        int64_t n = (int64_t)a->n_floats;
        st = a->n_floats ? onnx_value_set_shape(c->x, c, o, 1, 1, &n) : onnx_value_set_shape(c->x, c, o, 1, 0, NULL);
    } else {
        return onnx_node_fail(c, "a Constant without a value this import reads (value, value_int(s), value_float(s))");
    }
    o->defined = 1;
    return st;
}

static gopt_status run_constant_of_shape(onnx_node *c) {
    int n;
    const int64_t *s = ints_of(c, 0, &n);
    const Onnx__AttributeProto *a = onnx_attr(c, "value");
    int elem = a && a->t && a->t->has_data_type ? a->t->data_type : 1;
    gopt_status st;
    if (s && n <= ZOO_MAX_RANK) {
        if ((st = set_out(c, 0, elem, n, s)) != GOPT_OK) return st;
        int64_t nel = c->out[0] ? onnx_numel(c->out[0]) : 0;
        if (!onnx_elem_is_float(elem) && nel <= ONNX_MAX_CONST && c->out[0]) { /* e.g. ones for a shape */
            int64_t vals[ONNX_MAX_CONST], fill = 0;
            if (a && a->t) {
                onnx_value tmp = {.name = "value", .ncv = -1};
                if (onnx_tensor_value(c->x, c, &tmp, a->t) != GOPT_OK) return c->x->b.st;
                if (tmp.ncv >= 1) fill = tmp.cv[0];
                free(tmp.cv);
            }
            for (int64_t i = 0; i < nel; i++) vals[i] = fill;
            c->out[0]->defined = 1;
            return onnx_value_set_ints(c->x, c->out[0], vals, (int)nel);
        }
    }
    if ((st = onnx_outputs_ready(c)) != GOPT_OK) return st;
    return onnx_emit(c, ZK_NONE, GOPT_OP_CLASS_DATA_MOVEMENT, 0, NULL, 0, NULL);
}

static gopt_status run_range(onnx_node *c) {
    int n0, n1, n2;
    const int64_t *a = ints_of(c, 0, &n0), *b = ints_of(c, 1, &n1), *d = ints_of(c, 2, &n2);
    if (a && b && d && n0 == 1 && n1 == 1 && n2 == 1 && d[0] != 0) {
        int64_t n = (b[0] - a[0] + d[0] - (d[0] > 0 ? 1 : -1)) / d[0];
        if (n < 0) n = 0;
        if (n > ONNX_MAX_NUMEL) return onnx_node_fail(c, "range of %lld elements", (long long)n);
        int64_t vals[ONNX_MAX_CONST];
        for (int64_t i = 0; i < n && i < ONNX_MAX_CONST; i++) vals[i] = a[0] + i * d[0];
        gopt_status st = set_out(c, 0, I64, 1, &n);
        if (st != GOPT_OK || !c->out[0]) return st;
        c->out[0]->defined = 1;
        if (n <= ONNX_MAX_CONST) return onnx_value_set_ints(c->x, c->out[0], vals, (int)n);
    }
    gopt_status st = onnx_outputs_ready(c);
    return st != GOPT_OK ? st : onnx_emit(c, ZK_NONE, GOPT_OP_CLASS_DATA_MOVEMENT, 0, NULL, 0, NULL);
}

static gopt_status run_trilu(onnx_node *c) {
    gopt_status st = need(c, 0);
    if (st == GOPT_OK) st = like(c, 0, c->in[0]);
    if (st == GOPT_OK) st = onnx_outputs_ready(c);
    return st != GOPT_OK ? st : emit1(c, ZK_MOVE, GOPT_OP_CLASS_DATA_MOVEMENT, 0, NULL);
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
    {"Cast", run_cast, 0},
    {"Reshape", run_reshape, 0},
    {"Flatten", run_flatten, 0},
    {"Transpose", run_transpose, 0},
    {"Squeeze", run_squeeze, 0},
    {"Unsqueeze", run_unsqueeze, 0},
    {"Concat", run_concat, 0},
    {"Split", run_split, 0},
    {"Slice", run_slice, 0},
    {"Gather", run_gather, BIT(0)},
    {"Expand", run_expand, 0},
    {"Tile", run_expand, 0},
    {"Pad", run_pad, 0},
    {"Resize", run_resize, 0},
    {"Upsample", run_resize, 0},
    {"Trilu", run_trilu, 0},
    {"Shape", run_shape, 0},
    {"Size", run_size, 0},
    {"Constant", run_constant, 0},
    {"ConstantOfShape", run_constant_of_shape, 0},
    {"Range", run_range, 0},
    {"LSTM", onnx_run_lstm, BIT(1) | BIT(2) | BIT(3)},
    {"GRU", onnx_run_gru, BIT(1) | BIT(2) | BIT(3)},
};
#undef U

const onnx_rule *onnx_rule_find(const char *op) {
    for (size_t i = 0; i < sizeof RULES / sizeof RULES[0]; i++)
        if (strcmp(RULES[i].op, op) == 0) return &RULES[i];
    return NULL;
}
