/* zoo_internal.h: the shared layer under every zoo generator (graphs/zoo only).
 *
 * A zoo_builder records forward ops on a tape while it adds their nodes to a
 * gopt_graph; zoo_backward then walks the tape in reverse and emits each
 * op's gradient ops (one rule per op kind, zoo_grad.c), accumulates
 * gradients of tensors with several consumers (AddN), and adds one optimizer
 * update per parameter. Families only describe the forward pass.
 *
 * Tensors are fp32 (4 bytes an element unless a tensor says otherwise: the
 * ONNX import makes int64 ids and fp16 weights) with up to ZOO_MAX_RANK dims;
 * a tensor is identified by an int32 handle (-1 = none). Errors are sticky: after the first failure every call
 * is a no-op returning -1, and zoo_finish reports the first error. Layouts:
 * images NHWC, conv filters (kh, kw, C, K), sequences (B, T, D) or (B, D)
 * per step.
 */
#ifndef GOPT_ZOO_INTERNAL_H
#define GOPT_ZOO_INTERNAL_H

#include "gopt_zoo.h"

#define ZOO_MAX_RANK 8
#define ZOO_DTYPE_BYTES 4.0
#define ZOO_MAX_OUTS 64 /* outputs of one op (a Split) */

typedef struct {
    int32_t node;          /* producer node */
    int8_t rank;
    uint8_t needs_grad;    /* derived from a parameter through differentiable ops */
    int64_t d[ZOO_MAX_RANK];
    int32_t grad_head;     /* list of gradient contributions (index into contrib), -1 */
    int32_t param;         /* index into params when this is a parameter, else -1 */
    uint8_t esize;         /* bytes per element; 0 = ZOO_DTYPE_BYTES */
} zoo_tensor;

/* Op kinds: each has a gradient rule in zoo_grad.c. */
typedef enum {
    ZK_NONE = 0, /* inputs, parameters, ops without a gradient */
    ZK_MATMUL,   /* attr: transpose a, transpose b; optional input 2: a bias */
    ZK_CONV,     /* attr: kh, kw, stride, depthwise; optional input 2: a bias */
    ZK_BIAS,
    ZK_ADD,      /* any number of inputs, each may broadcast to the output */
    ZK_MUL,
    ZK_UNARY,    /* attr[0]: zoo_unary */
    ZK_SOFTMAX,
    ZK_NORM,     /* batch or layer norm: in x, gamma (, beta); later inputs get no gradient */
    ZK_POOL,     /* attr: k, stride, max */
    ZK_MEAN,     /* reduce to a smaller tensor (global pooling, mean) */
    ZK_CONCAT,
    ZK_SPLIT,
    ZK_MOVE,     /* reshape, transpose, slice-free moves: grad is the same move */
    ZK_SLICE,    /* grad is StridedSliceGrad */
    ZK_GATHER,   /* embedding lookup: in table, ids */
    ZK_XENT,     /* softmax cross-entropy: in logits, labels; out loss, backprop */
    ZK_ADDN,
    ZK_OTHER,    /* an imported op outside the rules: each input gets an <op>Grad with the forward FLOPs */
    ZK_COUNT
} zoo_kind;

/* Differentiable elementwise functions of one input. The first four are the
 * zoo's; the rest come with imported models (ONNX): each has one gradient
 * op in zoo_grad.c reading the incoming gradient and the op's output or input. */
typedef enum {
    ZU_RELU = 0, ZU_TANH, ZU_SIGMOID, ZU_SCALE,
    ZU_SQRT, ZU_EXP, ZU_LOG, ZU_ERF, ZU_GELU, ZU_LEAKY_RELU, ZU_ELU, ZU_SOFTPLUS, ZU_RECIPROCAL,
    ZU_ABS, ZU_NEG, ZU_CLIP, ZU_HARD_SIGMOID, ZU_HARD_SWISH, ZU_SIN, ZU_COS, ZU_POW,
    ZU_COUNT
} zoo_unary_kind;

typedef struct {
    uint8_t kind, nin, nout;
    int32_t in0;  /* first input in builder->args */
    int32_t out0; /* outputs are tensors out0 .. out0+nout-1 */
    int32_t node;
    int32_t layer;
    int32_t attr[4];
} zoo_op;

typedef struct {
    int32_t tensor; /* the parameter tensor */
    int32_t layer;
} zoo_param_rec;

typedef struct {
    gopt_graph *g;
    gopt_error *err;
    gopt_status st;
    gopt_optimizer optim;
    int clip;         /* zoo_backward: clip the gradients to one global norm before the updates */
    int32_t layer;    /* layer stamped on new forward nodes */
    int64_t max_nodes;
    char scope[192];
    size_t scope_len;
    size_t scope_stack[32]; /* scope_len before each push */
    int scope_depth;
    zoo_tensor *t;
    int32_t nt, tcap;
    zoo_op *ops;
    int32_t nops, opcap;
    int32_t *args;
    int32_t nargs, argcap;
    int32_t (*contrib)[2]; /* (grad tensor, next) */
    int32_t ncontrib, ccap;
    zoo_param_rec *params;
    int32_t nparams, pcap;
    int32_t loss; /* the scalar loss tensor, set by zoo_xent */
    const char *dtype; /* dtype stamped on new nodes; NULL = "float32" */
    uint8_t esize;     /* bytes per element of new tensors; 0 = ZOO_DTYPE_BYTES */
} zoo_builder;

/* ---- life cycle ------------------------------------------------------------ */
gopt_status zoo_begin(zoo_builder *b, const char *name, const char *family, gopt_optimizer optim, gopt_error *err);
/* Emit backward and optimizer ops, finalize, hand the graph to *out. Frees
 * the builder's scratch in every case. */
gopt_status zoo_finish(zoo_builder *b, gopt_graph **out);
void zoo_abort(zoo_builder *b);
int zoo_failed(const zoo_builder *b);
gopt_status zoo_fail(zoo_builder *b, gopt_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Name scopes: zoo_push("enc/l%d", i) ... zoo_pop(). */
void zoo_push(zoo_builder *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void zoo_pop(zoo_builder *b);

/* ---- tensors ----------------------------------------------------------------- */
static inline int64_t zoo_numel(const zoo_builder *b, int32_t t) {
    int64_t n = 1;
    for (int i = 0; i < b->t[t].rank; i++) n *= b->t[t].d[i];
    return n;
}
static inline double zoo_bytes(const zoo_builder *b, int32_t t) {
    return (double)zoo_numel(b, t) * (b->t[t].esize ? (double)b->t[t].esize : ZOO_DTYPE_BYTES);
}
static inline int64_t zoo_dim(const zoo_builder *b, int32_t t, int i) {
    return i < 0 ? b->t[t].d[b->t[t].rank + i] : b->t[t].d[i];
}

/* ---- primitive forward ops (zoo_build.c) --------------------------------------- */
/* The general forward op under every primitive below: one node named `name`
 * (NULL: scope/op) reading ins, producing nout tensors, recorded on the tape
 * with gradient rule `kind` (ZK_NONE: no gradient flows through it). An
 * importer calls it directly with its own FLOPs and shapes. */
typedef struct {
    const char *name;
    zoo_kind kind;
    const char *op;
    gopt_op_class cls;
    double flops;
    const int32_t *ins;
    int nin;                                /* <= 255 */
    int nout;                               /* 1 .. ZOO_MAX_OUTS */
    const int *ranks;                       /* (nout) */
    const int64_t (*dims)[ZOO_MAX_RANK];    /* (nout) */
    const uint8_t *esize;                   /* (nout) bytes per element; NULL: ZOO_DTYPE_BYTES */
    const char *dtype;                      /* node dtype; NULL: float32 */
    const int32_t *attr;                    /* 4 rule attributes, or NULL */
} zoo_fwd_spec;
/* Returns the first output tensor (outputs are consecutive), or -1. */
int32_t zoo_fwd(zoo_builder *b, const zoo_fwd_spec *s);
int32_t zoo_input(zoo_builder *b, const char *name, int rank, const int64_t *dims);
int32_t zoo_param(zoo_builder *b, const char *name, int rank, const int64_t *dims);
/* (..., m, k) x (k, n) or batched (..., k, n); ta/tb transpose the last two dims. */
int32_t zoo_matmul(zoo_builder *b, int32_t a, int32_t w, int ta, int tb);
/* Flags of zoo_conv and zoo_pool. */
enum { ZOO_DEPTHWISE = 1, ZOO_VALID = 2, ZOO_MAX = 4 };
/* NHWC conv with filter w (kh, kw, C, K); 'same' padding unless ZOO_VALID;
 * ZOO_DEPTHWISE: filter (kh, kw, C, 1), C outputs. Dilation changes neither
 * shapes nor FLOPs, so it is not a parameter. */
int32_t zoo_conv(zoo_builder *b, int32_t x, int32_t w, int stride, int flags);
/* The ZK_CONV rule's attr[3] bits: depthwise (1), transposed (2). */
enum { ZOO_CONV_DEPTHWISE = 1, ZOO_CONV_TRANSPOSED = 2 };
/* Transposed NHWC conv (TensorFlow's conv2d_transpose, op Conv2DBackpropInput):
 * filter w (kh, kw, K, C), 'same' padding: (N, H, W, C) -> (N, H s, W s, K). */
int32_t zoo_conv_transpose(zoo_builder *b, int32_t x, int32_t w, int stride);
int32_t zoo_bias(zoo_builder *b, int32_t x, int32_t bias);
int32_t zoo_add(zoo_builder *b, int32_t x, int32_t y);
int32_t zoo_mul(zoo_builder *b, int32_t x, int32_t y);
int32_t zoo_unary(zoo_builder *b, int32_t x, zoo_unary_kind u);
int32_t zoo_softmax(zoo_builder *b, int32_t x);
/* Batch norm over all but the last dim (layer = 0) or layer norm over the last (layer = 1). */
int32_t zoo_norm(zoo_builder *b, int32_t x, int32_t gamma, int32_t beta, int layer_norm);
/* k x k pooling; flags ZOO_MAX (else average), ZOO_VALID. */
int32_t zoo_pool(zoo_builder *b, int32_t x, int k, int stride, int flags);
/* Mean over the middle dims of NHWC (global average pooling) -> (N, C). */
int32_t zoo_global_pool(zoo_builder *b, int32_t x);
int32_t zoo_concat(zoo_builder *b, const int32_t *xs, int n, int axis);
/* Split x along axis into n equal parts; outs[0..n-1] receive them. */
void zoo_split(zoo_builder *b, int32_t x, int n, int axis, int32_t *outs);
/* Reshape/transpose/identity: any data movement whose gradient is the same
 * kind of move. stop_grad: StopGradient (no gradient flows). */
int32_t zoo_move(zoo_builder *b, int32_t x, const char *op, int rank, const int64_t *dims, int stop_grad);
/* StridedSlice to a smaller shape (a time step, a window); gradient StridedSliceGrad. */
int32_t zoo_slice(zoo_builder *b, int32_t x, int rank, const int64_t *dims);
/* A constant with no inputs (zero state, masks, position tables): no gradient. */
int32_t zoo_const(zoo_builder *b, const char *name, int rank, const int64_t *dims);
/* Rows of table (V, D) at ids (any shape) -> (ids..., D). sparse_grad: the
 * table's gradient is the gathered rows (IndexedSlices) and its update a
 * sparse one touching those rows only; the table must then be read by this
 * gather alone. Else a dense UnsortedSegmentSum the table's size. */
int32_t zoo_gather(zoo_builder *b, int32_t table, int32_t ids, int sparse_grad);
/* Sparse softmax cross-entropy + mean: the loss. Sets b->loss. */
int32_t zoo_xent(zoo_builder *b, int32_t logits, int32_t labels);
int32_t zoo_addn(zoo_builder *b, const int32_t *xs, int n);

/* ---- composite layers shared by families and synthetic graphs (zoo_layers.c) --- */
int32_t zoo_dense(zoo_builder *b, int32_t x, int64_t units, int bias);
/* conv -> batch norm (-> relu); kh x kw filter, k outputs, flags as zoo_conv. */
int32_t zoo_conv_bn(zoo_builder *b, int32_t x, int kh, int kw, int64_t k, int stride, int flags, int relu);
/* relu -> depthwise kxk -> pointwise 1x1 -> bn, `reps` times (NASNet/AmoebaNet separable op). */
int32_t zoo_sep_conv(zoo_builder *b, int32_t x, int k, int64_t c, int stride, int reps);
int32_t zoo_layer_norm(zoo_builder *b, int32_t x);
/* One LSTM step: x (B, X), h, c (B, H); weights shared across steps (w: (X+H, 4H), bias 4H). */
typedef struct {
    int32_t w, bias;
    int64_t hidden;
} zoo_lstm;
void zoo_lstm_init(zoo_builder *b, zoo_lstm *l, int64_t in, int64_t hidden);
void zoo_lstm_step(zoo_builder *b, const zoo_lstm *l, int32_t x, int32_t *h, int32_t *c);
/* Concat / AddN of any number of tensors (grouped by 128). */
int32_t zoo_concat_many(zoo_builder *b, const int32_t *xs, int n, int axis);
int32_t zoo_addn_many(zoo_builder *b, const int32_t *xs, int n);
int32_t zoo_conv_bias(zoo_builder *b, int32_t x, int kh, int kw, int64_t k, int stride);
/* NAS cells (NASNet search space): two inputs (s0 may have twice s1's
 * resolution), nsteps pairs of ops each summed into a new state, output the
 * concat of the listed states. Reduction cells apply stride 2 to ops reading
 * the inputs; their concat must list states >= 2 only. */
typedef enum {
    ZOO_CELL_SEP3 = 0, ZOO_CELL_SEP5, ZOO_CELL_SEP7, ZOO_CELL_AVG3, ZOO_CELL_MAX3, ZOO_CELL_IDENTITY,
    ZOO_CELL_CONV17, ZOO_CELL_CONV3, ZOO_CELL_CONV1, ZOO_CELL_OP_COUNT
} zoo_cell_opk;
#define ZOO_CELL_MAX_STEPS 8
typedef struct {
    uint8_t input; /* state read: 0, 1 the cell inputs, 2.. earlier sums */
    uint8_t op;    /* zoo_cell_opk */
} zoo_cell_op;
typedef struct {
    int nsteps;
    const zoo_cell_op *ops; /* (2 nsteps) */
    const int *concat;
    int nconcat;
} zoo_cell_genotype;
int32_t zoo_nas_cell(zoo_builder *b, int32_t s0, int32_t s1, int64_t f, int reduction, const zoo_cell_genotype *g);
/* Embedding lookup of ids (B) or (B, T) in a (V, D) table. */
int32_t zoo_embed(zoo_builder *b, int32_t table, int32_t ids);
/* logits = x W (+b); loss = mean xent(logits, labels). */
int32_t zoo_softmax_loss(zoo_builder *b, int32_t x, int64_t vocab, int32_t labels);

/* Helpers for shapes written inline: zoo_shape(2, (int64_t[]){B, D}). */
#define ZOO_DIMS(...) ((const int64_t[]){__VA_ARGS__})
#define ZOO_RANK(...) ((int)(sizeof(ZOO_DIMS(__VA_ARGS__)) / sizeof(int64_t)))
#define ZOO_INPUT(b, name, ...) zoo_input(b, name, ZOO_RANK(__VA_ARGS__), ZOO_DIMS(__VA_ARGS__))
#define ZOO_PARAM(b, name, ...) zoo_param(b, name, ZOO_RANK(__VA_ARGS__), ZOO_DIMS(__VA_ARGS__))

/* ---- backward (zoo_grad.c) --------------------------------------------------- */
gopt_status zoo_backward(zoo_builder *b);

/* ---- internals shared by zoo_build.c and zoo_grad.c ------------------------------- */
/* Add a node with the builder's conventions; returns its id or -1. */
int32_t zoo_emit(zoo_builder *b, const char *name, const char *op, gopt_op_class cls, double flops, double out_bytes,
                 const char *shape, gopt_phase phase, int32_t layer, const char *coloc);
/* Edge from tensor t's producer to node dst, carrying t's bytes. */
void zoo_edge(zoo_builder *b, int32_t t, int32_t dst);
/* A new tensor produced by node (shape copied from dims). */
int32_t zoo_tensor_new(zoo_builder *b, int32_t node, int rank, const int64_t *dims);
void zoo_shape_str(const zoo_builder *b, const int32_t *ts, int n, char *out, size_t cap);
int32_t zoo_arg_push(zoo_builder *b, int32_t v);

/* Families (each file registers one or more). */
typedef gopt_status (*zoo_family_fn)(zoo_builder *b, const gopt_zoo_spec *s);
gopt_status zoo_rnnlm(zoo_builder *b, const gopt_zoo_spec *s);
gopt_status zoo_gnmt(zoo_builder *b, const gopt_zoo_spec *s);
gopt_status zoo_transformer_xl(zoo_builder *b, const gopt_zoo_spec *s);
gopt_status zoo_wavenet(zoo_builder *b, const gopt_zoo_spec *s);
gopt_status zoo_inception_v3(zoo_builder *b, const gopt_zoo_spec *s);
gopt_status zoo_resnet(zoo_builder *b, const gopt_zoo_spec *s);
gopt_status zoo_amoebanet(zoo_builder *b, const gopt_zoo_spec *s);

#endif /* GOPT_ZOO_INTERNAL_H */
