/* onnx_internal.h: the ONNX import's state, shared by its files (graphs/onnx only).
 *
 * onnx_import.c reads the protobuf, checks the graph (every input produced,
 * no cycle, external data present), classifies initializers and graph inputs
 * into parameters, constants and data, then walks the nodes in topological
 * order calling each op's rule (onnx_ops.c, onnx_shape.c, onnx_rnn.c). A rule infers its
 * outputs' shapes (or takes them from value_info), computes FLOPs by
 * tools/export_torch.py's conventions, and adds its node through the zoo
 * builder (zoo_fwd) with the zoo gradient rule that fits, so zoo_backward
 * differentiates imported models exactly as it does the families.
 *
 * Values are the ONNX graph's named tensors. Small integer tensors whose
 * values are known at import time (shapes, axes, split sizes: initializers,
 * Constant, Shape and arithmetic on them) carry those values and cost
 * nothing: no node, no edge. Every other value is a builder tensor, made on
 * first use for initializers and constants.
 */
#ifndef GOPT_ONNX_INTERNAL_H
#define GOPT_ONNX_INTERNAL_H

#include <string.h>

#include "../zoo/zoo_internal.h"
#include "gopt_onnx.h"
#include "onnx.pb-c.h"

#define ONNX_MAX_CONST 64                 /* integer values kept per value */
#define ONNX_MAX_NUMEL (INT64_C(1) << 46) /* elements of one tensor: larger is refused */
#define ONNX_MAX_WINDOW (INT64_C(1) << 24) /* kernel, stride, dilation, pad, group: larger is refused */
#define ONNX_MAX_NAME 200                   /* longer node and value names are cut (names stay unique) */

typedef struct {
    const char *name;
    uint8_t defined;   /* produced: graph input, initializer or an earlier node */
    uint8_t has_shape; /* rank and d are known */
    uint8_t param;     /* a trainable weight (initializer or graph input) */
    uint8_t init;      /* an initializer */
    uint8_t data_in;   /* a graph input that is data (not a weight) */
    uint8_t used;      /* read by a node or a graph output */
    int elem;          /* ONNX TensorProto.DataType, 0 unknown */
    int rank;
    int64_t d[ZOO_MAX_RANK];
    int32_t t;         /* builder tensor, or -1 */
    int32_t layer;
    int ncv;           /* number of known integer values, -1 unknown */
    int64_t *cv;
    uint8_t has_fv;    /* a float scalar constant whose value is known (Dropout's ratio) */
    double fv;
    const Onnx__TypeProto *vi; /* shape from value_info / graph outputs, or NULL */
} onnx_value;

typedef struct {
    zoo_builder b;
    gopt_error *err;
    const char *origin; /* file name for messages */
    const gopt_onnx_opts *opts;
    int use_value_info; /* 0 when --batch changed the data inputs' batch */
    Onnx__ModelProto *model;
    const Onnx__GraphProto *g;
    onnx_value *v;
    int32_t nv, vcap;
    int32_t *hash; /* open addressing over v by name, -1 empty */
    uint32_t hcap;
    int64_t opset; /* default domain's opset version */
    /* layer blocks of parameter names, numbered in order of first use */
    char **blocks;
    int32_t nblocks;
} onnx_ctx;

/* One node being imported. */
#define ONNX_MAX_IO 512
typedef struct {
    onnx_ctx *x;
    const Onnx__NodeProto *n;
    const char *name; /* node name, or op_index when the node has none */
    const char *op;
    int nin, nout;
    onnx_value **in;  /* (nin) NULL for an absent optional input */
    onnx_value **out; /* (nout) NULL for an unused optional output */
} onnx_node;

/* ---- values (onnx_import.c) ---- */
onnx_value *onnx_value_get(onnx_ctx *x, const char *name);
int64_t onnx_numel(const onnx_value *v);
int onnx_elem_size(int elem);
const char *onnx_elem_name(int elem);
int onnx_elem_is_float(int elem);
/* Set v's shape (checks rank and size); returns 0 or an error status set in x. */
gopt_status onnx_value_set_shape(onnx_ctx *x, const onnx_node *c, onnx_value *v, int elem, int rank, const int64_t *d);
/* Set known integer values (n <= ONNX_MAX_CONST, else values stay unknown). */
gopt_status onnx_value_set_ints(onnx_ctx *x, onnx_value *v, const int64_t *vals, int n);
/* Shape (and small integer values) of a TensorProto: initializers, Constant. */
gopt_status onnx_tensor_value(onnx_ctx *x, const onnx_node *c, onnx_value *v, const Onnx__TensorProto *tp);
/* The builder tensor of v, made now (a Const node) for initializers and constants. */
int32_t onnx_tensor(onnx_ctx *x, onnx_value *v);
/* Layer block of a parameter name (tools/export_torch.py's layer_key). */
int32_t onnx_layer_of_name(onnx_ctx *x, const char *name);

/* ---- errors ---- */
gopt_status onnx_fail(onnx_ctx *x, gopt_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
gopt_status onnx_node_fail(const onnx_node *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- attributes (onnx_ops.c) ---- */
const Onnx__AttributeProto *onnx_attr(const onnx_node *c, const char *name);
int64_t onnx_attr_int(const onnx_node *c, const char *name, int64_t dflt);
/* Copies up to max ints; returns how many the attribute has (-1 when absent). */
int onnx_attr_ints(const onnx_node *c, const char *name, int64_t *out, int max);
/* A string attribute copied NUL-terminated into buf (cut to cap - 1 bytes), or dflt. */
const char *onnx_attr_str(const onnx_node *c, const char *name, const char *dflt, char *buf, size_t cap);
/* Integers from attribute `name` (older opsets) or from constant input
 * `input` (newer); *n = -1 when neither is given. Refuses more than max or an
 * input whose values are not known at import time. */
gopt_status onnx_ints_arg(const onnx_node *c, const char *name, int input, int64_t *out, int max, int *n);

/* ---- op rules (onnx_ops.c, onnx_rnn.c) ---- */
typedef struct {
    const char *op;
    gopt_status (*run)(onnx_node *c);
    uint32_t param_slots; /* input slots that hold weights */
} onnx_rule;
/* The rule of an op type, NULL when none. */
const onnx_rule *onnx_rule_find(const char *op);
/* The fallback of --unknown-as other. */
gopt_status onnx_run_other(onnx_node *c);
/* Outputs' shapes are set by the rule where it can; this takes value_info
 * where present (and allowed), and fails naming the output still unknown. */
gopt_status onnx_outputs_ready(onnx_node *c);
/* Add the node: data inputs `slots` (input indices), outputs all of c->out
 * present; kind/cls/flops/attr as zoo_fwd. Updates every output value's tensor. */
gopt_status onnx_emit(onnx_node *c, zoo_kind kind, gopt_op_class cls, double flops, const int *slots, int nslots,
                      const int32_t *attr);
gopt_status onnx_run_lstm(onnx_node *c);
gopt_status onnx_run_gru(onnx_node *c);

/* Data movement, constants and shape arithmetic (onnx_shape.c). */
gopt_status onnx_run_reshape(onnx_node *c);
gopt_status onnx_run_flatten(onnx_node *c);
gopt_status onnx_run_transpose(onnx_node *c);
gopt_status onnx_run_squeeze(onnx_node *c);
gopt_status onnx_run_unsqueeze(onnx_node *c);
gopt_status onnx_run_cast(onnx_node *c);
gopt_status onnx_run_concat(onnx_node *c);
gopt_status onnx_run_split(onnx_node *c);
gopt_status onnx_run_slice(onnx_node *c);
gopt_status onnx_run_gather(onnx_node *c);
gopt_status onnx_run_expand(onnx_node *c);
gopt_status onnx_run_pad(onnx_node *c);
gopt_status onnx_run_resize(onnx_node *c);
gopt_status onnx_run_shape(onnx_node *c);
gopt_status onnx_run_size(onnx_node *c);
gopt_status onnx_run_constant(onnx_node *c);
gopt_status onnx_run_constant_of_shape(onnx_node *c);
gopt_status onnx_run_range(onnx_node *c);
gopt_status onnx_run_trilu(onnx_node *c);

enum { ONNX_I64 = ONNX__TENSOR_PROTO__DATA_TYPE__INT64, ONNX_BOOL = ONNX__TENSOR_PROTO__DATA_TYPE__BOOL };

/* ---- small helpers of the rules (onnx_ops.c, onnx_shape.c) ---- */
static inline onnx_value *IN(const onnx_node *c, int i) { return i < c->nin ? c->in[i] : NULL; }

static inline gopt_status need(const onnx_node *c, int i) {
    if (!IN(c, i)) return onnx_node_fail(c, "input %d is missing", i);
    if (!c->in[i]->has_shape) return onnx_node_fail(c, "input '%s' has no known shape", c->in[i]->name);
    return GOPT_OK;
}

static inline gopt_status set_out(onnx_node *c, int j, int elem, int rank, const int64_t *d) {
    if (j >= c->nout || !c->out[j]) return GOPT_OK;
    return onnx_value_set_shape(c->x, c, c->out[j], elem, rank, d);
}

static inline gopt_status like(onnx_node *c, int j, const onnx_value *v) { return set_out(c, j, v->elem, v->rank, v->d); }

/* Axis a of a rank-r tensor as 0..r (r itself for Flatten and Unsqueeze's
 * output), or -1 when a is outside [-r, r]. */
static inline int norm_axis(int64_t a, int rank) { return a < -rank || a > rank ? -1 : (int)(a < 0 ? a + rank : a); }

/* Values of a constant input (axes, shapes); n = -1 when absent or unknown. */
static inline const int64_t *ints_of(const onnx_node *c, int i, int *n) {
    onnx_value *v = IN(c, i);
    *n = v ? v->ncv : -1;
    return v && v->ncv >= 0 ? v->cv : NULL;
}

static inline double out_elems(const onnx_node *c) {
    double n = 0;
    for (int j = 0; j < c->nout; j++)
        if (c->out[j]) n += (double)onnx_numel(c->out[j]);
    return n;
}

/* Emit with every present input as data, in order. */
static inline gopt_status emit_all(onnx_node *c, zoo_kind kind, gopt_op_class cls, double flops, const int32_t *attr) {
    int slots[ONNX_MAX_IO];
    for (int i = 0; i < c->nin; i++) slots[i] = i;
    return onnx_emit(c, kind, cls, flops, slots, c->nin, attr);
}

static inline gopt_status emit1(onnx_node *c, zoo_kind kind, gopt_op_class cls, double flops, const int32_t *attr) {
    const int s0[1] = {0};
    return onnx_emit(c, kind, cls, flops, s0, 1, attr);
}

/* Output 0 gets constant integer values: no node. */
static inline gopt_status const_out(onnx_node *c, int rank, const int64_t *d, const int64_t *vals, int n) {
    gopt_status st = set_out(c, 0, ONNX_I64, rank, d);
    if (st == GOPT_OK && c->nout > 0 && c->out[0]) {
        st = onnx_value_set_ints(c->x, c->out[0], vals, n);
        c->out[0]->defined = 1;
    }
    return st;
}

static inline int all_known(const onnx_node *c, int upto) {
    for (int i = 0; i < upto && i < c->nin; i++)
        if (c->in[i] && c->in[i]->ncv < 0) return 0;
    return c->nin > 0;
}

#endif /* GOPT_ONNX_INTERNAL_H */
