/* zoo_grad.c: reverse-mode differentiation of the zoo tape, gradient
 * accumulation and optimizer updates.
 *
 * zoo_backward seeds d(loss) with a Fill node, walks the tape from the last
 * op to the first and, for every op with an incoming gradient, emits that
 * op's gradient ops through the rule table below. A gradient rule reads the
 * incoming gradient and the forward tensors the real gradient kernel reads
 * (e.g. MatMul's weight gradient reads the forward input), so the graph has
 * the same long forward->backward edges as a TensorFlow training step. Each
 * contribution to a tensor's gradient is kept on a list; when the tensor's
 * producer is reached (all its consumers come later on the tape, so all
 * contributions are in) the list is summed by one AddN. Finally each
 * parameter gets one update op (SGD 2, momentum 4, Adam 10, RMSProp 7, AdamW 11 FLOPs
 * per weight; a sparse gradient's rows only), colocated with it, after the gradients are
 * clipped to one global norm when asked (updates()). The rules serve the zoo's families and the
 * ONNX import (graphs/onnx) alike.
 * Cost: O(ops + contributions).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zoo_internal.h"

static void contrib(zoo_builder *b, int32_t t, int32_t g) {
    if (b->st != GOPT_OK || t < 0 || g < 0 || !b->t[t].needs_grad) return;
    if (b->ncontrib >= b->ccap) {
        int32_t nc = b->ccap ? b->ccap * 2 : 1024;
        void *p = realloc(b->contrib, (size_t)nc * sizeof *b->contrib);
        if (!p) {
            zoo_fail(b, GOPT_ENOMEM, "out of memory differentiating graph '%s'", gopt_graph_name(b->g));
            return;
        }
        b->contrib = p;
        b->ccap = nc;
    }
    b->contrib[b->ncontrib][0] = g;
    b->contrib[b->ncontrib][1] = b->t[t].grad_head;
    b->t[t].grad_head = b->ncontrib++;
}

static int32_t node_layer(const zoo_builder *b, int32_t node) {
    gopt_node_attrs a;
    gopt_graph_node(b->g, node, &a);
    return a.layer;
}

/* Emit one backward node reading `ins`, producing tensors shaped like `likes`. */
static int32_t bwd_node(zoo_builder *b, const char *fwd_name, const char *op, gopt_op_class cls, double flops,
                        const int32_t *ins, int nin, const int32_t *likes, int nout, int32_t layer) {
    if (b->st != GOPT_OK) return -1;
    char name[352], shape[256];
    snprintf(name, sizeof name, "gradients/%s_grad/%s", fwd_name, op);
    zoo_shape_str(b, likes, nout, shape, sizeof shape);
    double bytes = 0;
    for (int j = 0; j < nout; j++) bytes += zoo_bytes(b, likes[j]);
    int32_t node = zoo_emit(b, name, op, cls, flops, bytes, shape, GOPT_PHASE_BWD, layer, NULL);
    if (node < 0) return -1;
    for (int i = 0; i < nin; i++) zoo_edge(b, ins[i], node);
    int32_t first = -1;
    for (int j = 0; j < nout; j++) {
        zoo_tensor like = b->t[likes[j]]; /* copy: zoo_tensor_new may move b->t */
        int32_t t = zoo_tensor_new(b, node, like.rank, like.d);
        if (t >= 0) b->t[t].esize = like.esize;
        if (j == 0) first = t;
    }
    return b->st == GOPT_OK ? first : -1;
}

/* The summed gradient of tensor t (AddN when it has several), or -1. */
static int32_t grad_sum(zoo_builder *b, int32_t t) {
    int32_t head = b->t[t].grad_head;
    if (head < 0 || b->st != GOPT_OK) return -1;
    if (b->contrib[head][1] < 0) return b->contrib[head][0];
    int n = 0;
    for (int32_t c = head; c >= 0; c = b->contrib[c][1]) n++;
    int32_t *ins = malloc((size_t)n * sizeof *ins);
    if (!ins) return zoo_fail(b, GOPT_ENOMEM, "out of memory accumulating gradients"), -1;
    int i = n;
    for (int32_t c = head; c >= 0; c = b->contrib[c][1]) ins[--i] = b->contrib[c][0]; /* first contribution first */
    int32_t prod = b->t[t].node;
    char fwd[320];
    snprintf(fwd, sizeof fwd, "%s", gopt_graph_node_name(b->g, prod));
    int32_t g = bwd_node(b, fwd, "AddN", GOPT_OP_CLASS_ELEMENTWISE, (double)(n - 1) * (double)zoo_numel(b, t), ins, n,
                         &t, 1, node_layer(b, prod));
    free(ins);
    b->t[t].grad_head = -1;
    contrib(b, t, g);
    return g;
}

/* ---- gradient rules -------------------------------------------------------------- */
typedef struct {
    zoo_builder *b;
    const zoo_op *o;
    const char *name;  /* forward node name */
    const int32_t *in; /* forward inputs */
    const int32_t *dy; /* incoming gradients, one per output (-1 none) */
    double flops;      /* forward FLOPs */
} grad_ctx;

static int needs(const grad_ctx *c, int i) { return c->b->t[c->in[i]].needs_grad; }

/* Gradient for input i: one node reading ins, shaped like the input. */
static void give(const grad_ctx *c, int i, const char *op, gopt_op_class cls, double flops, const int32_t *ins, int nin) {
    if (!needs(c, i)) return;
    int32_t g = bwd_node(c->b, c->name, op, cls, flops, ins, nin, &c->in[i], 1, c->o->layer);
    contrib(c->b, c->in[i], g);
}

/* Input i of a broadcasting op: the gradient itself when shapes agree,
 * else a Sum over the broadcast dims. */
static void pass_or_sum(const grad_ctx *c, int i, const char *sum_op) {
    if (!needs(c, i)) return;
    zoo_builder *b = c->b;
    if (zoo_numel(b, c->in[i]) == zoo_numel(b, c->dy[0])) contrib(b, c->in[i], c->dy[0]);
    else give(c, i, sum_op, GOPT_OP_CLASS_REDUCTION, (double)zoo_numel(b, c->dy[0]), c->dy, 1);
}

/* MatMul and Conv may carry a fused bias as input 2 (ONNX Gemm and Conv):
 * its gradient is the BiasAddGrad of the separate BiasAdd op. */
static void grad_matmul(const grad_ctx *c) {
    const char *op = c->b->t[c->in[1]].rank > 2 ? "BatchMatMulV2" : "MatMul";
    int32_t da[2] = {c->dy[0], c->in[1]}, dw[2] = {c->in[0], c->dy[0]};
    give(c, 0, op, GOPT_OP_CLASS_GEMM, c->flops, da, 2);
    give(c, 1, op, GOPT_OP_CLASS_GEMM, c->flops, dw, 2);
    if (c->o->nin > 2) pass_or_sum(c, 2, "BiasAddGrad");
}

/* A transposed conv's input gradient is the plain conv of the incoming
 * gradient with the same filter. */
static void grad_conv(const grad_ctx *c) {
    int dw = c->o->attr[3] & ZOO_CONV_DEPTHWISE, tr = c->o->attr[3] & ZOO_CONV_TRANSPOSED;
    int32_t dx[2] = {c->dy[0], c->in[1]}, df[2] = {c->in[0], c->dy[0]};
    give(c, 0, tr ? "Conv2D" : dw ? "DepthwiseConv2dNativeBackpropInput" : "Conv2DBackpropInput", GOPT_OP_CLASS_CONV,
         c->flops, dx, 2);
    give(c, 1, dw ? "DepthwiseConv2dNativeBackpropFilter" : "Conv2DBackpropFilter", GOPT_OP_CLASS_CONV, c->flops, df, 2);
    if (c->o->nin > 2) pass_or_sum(c, 2, "BiasAddGrad");
}

static void grad_bias(const grad_ctx *c) {
    pass_or_sum(c, 0, "Sum");
    pass_or_sum(c, 1, "BiasAddGrad");
}

static void grad_add(const grad_ctx *c) {
    for (int i = 0; i < c->o->nin; i++) pass_or_sum(c, i, "Sum");
}

static void grad_mul(const grad_ctx *c) {
    double f = (double)zoo_numel(c->b, c->dy[0]);
    int32_t d0[2] = {c->dy[0], c->in[1]}, d1[2] = {c->dy[0], c->in[0]};
    give(c, 0, "Mul", GOPT_OP_CLASS_ELEMENTWISE, f, d0, 2);
    give(c, 1, "Mul", GOPT_OP_CLASS_ELEMENTWISE, f, d1, 2);
}

/* One gradient op per function: its TensorFlow name, FLOPs per element, and
 * what it reads besides the incoming gradient (the op's output or input). */
enum { READS_DY = 0, READS_OUT, READS_IN };
static void grad_unary(const grad_ctx *c) {
    static const struct {
        const char *op;
        double flops;
        int reads;
    } R[ZU_COUNT] = {
        [ZU_RELU] = {"ReluGrad", 1, READS_OUT},        [ZU_TANH] = {"TanhGrad", 3, READS_OUT},
        [ZU_SIGMOID] = {"SigmoidGrad", 3, READS_OUT},  [ZU_SCALE] = {"Mul", 1, READS_DY},
        [ZU_SQRT] = {"SqrtGrad", 2, READS_OUT},        [ZU_EXP] = {"Mul", 1, READS_OUT},
        [ZU_LOG] = {"RealDiv", 1, READS_IN},           [ZU_ERF] = {"ErfGrad", 5, READS_IN},
        [ZU_GELU] = {"GeluGrad", 8, READS_IN},         [ZU_LEAKY_RELU] = {"LeakyReluGrad", 1, READS_IN},
        [ZU_ELU] = {"EluGrad", 2, READS_OUT},          [ZU_SOFTPLUS] = {"SoftplusGrad", 4, READS_IN},
        [ZU_RECIPROCAL] = {"ReciprocalGrad", 2, READS_OUT}, [ZU_ABS] = {"AbsGrad", 2, READS_IN},
        [ZU_NEG] = {"Neg", 1, READS_DY},               [ZU_CLIP] = {"ClipByValueGrad", 2, READS_IN},
        [ZU_HARD_SIGMOID] = {"HardSigmoidGrad", 2, READS_IN}, [ZU_HARD_SWISH] = {"HardSwishGrad", 4, READS_IN},
        [ZU_SIN] = {"SinGrad", 2, READS_IN},           [ZU_COS] = {"CosGrad", 2, READS_IN},
        [ZU_POW] = {"PowGrad", 3, READS_IN},
    };
    int u = c->o->attr[0];
    int32_t ins[2] = {c->dy[0], R[u].reads == READS_IN ? c->in[0] : c->o->out0};
    give(c, 0, R[u].op, GOPT_OP_CLASS_ELEMENTWISE, R[u].flops * (double)zoo_numel(c->b, c->dy[0]), ins,
         R[u].reads == READS_DY ? 1 : 2);
}

static void grad_softmax(const grad_ctx *c) {
    int32_t ins[2] = {c->dy[0], c->o->out0};
    give(c, 0, "SoftmaxGrad", GOPT_OP_CLASS_REDUCTION, 4.0 * (double)zoo_numel(c->b, c->dy[0]), ins, 2);
}

static void grad_norm(const grad_ctx *c) {
    zoo_builder *b = c->b;
    int n = c->o->nin < 3 ? c->o->nin : 3; /* x, gamma, beta (beta optional) */
    int32_t ins[3] = {c->dy[0], c->in[0], c->in[1]};
    int32_t g = bwd_node(b, c->name, c->o->attr[0] ? "LayerNormGrad" : "FusedBatchNormGradV3",
                         GOPT_OP_CLASS_REDUCTION, 12.0 * (double)zoo_numel(b, c->dy[0]), ins, n, c->in, n, c->o->layer);
    if (g < 0) return;
    for (int i = 0; i < n; i++) contrib(b, c->in[i], g + i);
}

static void grad_pool(const grad_ctx *c) {
    if (c->o->attr[2]) {
        int32_t ins[3] = {c->in[0], c->o->out0, c->dy[0]};
        give(c, 0, "MaxPoolGrad", GOPT_OP_CLASS_REDUCTION, c->flops, ins, 3);
    } else {
        give(c, 0, "AvgPoolGrad", GOPT_OP_CLASS_REDUCTION, c->flops, c->dy, 1);
    }
}

static void grad_mean(const grad_ctx *c) {
    give(c, 0, "Tile", GOPT_OP_CLASS_DATA_MOVEMENT, 0, c->dy, 1);
}

static void grad_concat(const grad_ctx *c) {
    for (int i = 0; i < c->o->nin; i++) give(c, i, "Slice", GOPT_OP_CLASS_DATA_MOVEMENT, 0, c->dy, 1);
}

static void grad_split(const grad_ctx *c) {
    int32_t ins[ZOO_MAX_OUTS];
    int n = 0;
    for (int j = 0; j < c->o->nout; j++)
        if (c->dy[j] >= 0) ins[n++] = c->dy[j];
    give(c, 0, "ConcatV2", GOPT_OP_CLASS_DATA_MOVEMENT, 0, ins, n);
}

static void grad_move(const grad_ctx *c) {
    gopt_node_attrs a;
    gopt_graph_node(c->b->g, c->o->node, &a);
    give(c, 0, a.op, GOPT_OP_CLASS_DATA_MOVEMENT, 0, c->dy, 1);
}

static void grad_slice(const grad_ctx *c) { give(c, 0, "StridedSliceGrad", GOPT_OP_CLASS_DATA_MOVEMENT, 0, c->dy, 1); }

/* Dense: UnsortedSegmentSum into a table-sized gradient. Sparse
 * (attr[0]): the IndexedSlices of the gathered rows, shaped like dy; the
 * update (below) sees a gradient smaller than its parameter and applies a
 * sparse update to those rows. */
static void grad_gather(const grad_ctx *c) {
    int32_t ins[2] = {c->dy[0], c->in[1]};
    if (!c->o->attr[0]) {
        give(c, 0, "UnsortedSegmentSum", GOPT_OP_CLASS_REDUCTION, (double)zoo_numel(c->b, c->dy[0]), ins, 2);
        return;
    }
    if (!needs(c, 0)) return;
    int32_t g = bwd_node(c->b, c->name, "IndexedSlices", GOPT_OP_CLASS_DATA_MOVEMENT, 0, ins, 2, c->dy, 1, c->o->layer);
    contrib(c->b, c->in[0], g);
}

static void grad_xent(const grad_ctx *c) {
    if (c->dy[0] < 0) return;
    int32_t ins[2] = {c->dy[0], c->o->out0 + 1}; /* d(loss) and the saved softmax - onehot */
    give(c, 0, "Mul", GOPT_OP_CLASS_ELEMENTWISE, (double)zoo_numel(c->b, c->in[0]), ins, 2);
}

static void grad_addn(const grad_ctx *c) {
    for (int i = 0; i < c->o->nin; i++) contrib(c->b, c->in[i], c->dy[0]);
}

static void grad_other(const grad_ctx *c) {
    gopt_node_attrs a;
    gopt_graph_node(c->b->g, c->o->node, &a);
    char op[160];
    snprintf(op, sizeof op, "%sGrad", a.op);
    for (int i = 0; i < c->o->nin; i++) {
        int32_t ins[2] = {c->dy[0], c->in[i]};
        give(c, i, op, GOPT_OP_CLASS_OTHER, c->flops, ins, 2);
    }
}

static void (*const GRAD_RULE[ZK_COUNT])(const grad_ctx *) = {
    [ZK_MATMUL] = grad_matmul, [ZK_CONV] = grad_conv,       [ZK_BIAS] = grad_bias,     [ZK_ADD] = grad_add,
    [ZK_MUL] = grad_mul,       [ZK_UNARY] = grad_unary,     [ZK_SOFTMAX] = grad_softmax, [ZK_NORM] = grad_norm,
    [ZK_POOL] = grad_pool,     [ZK_MEAN] = grad_mean,       [ZK_CONCAT] = grad_concat, [ZK_SPLIT] = grad_split,
    [ZK_MOVE] = grad_move,     [ZK_SLICE] = grad_slice,     [ZK_GATHER] = grad_gather, [ZK_XENT] = grad_xent,
    [ZK_ADDN] = grad_addn,     [ZK_OTHER] = grad_other,
};

/* ---- optimizer ---------------------------------------------------------------- */
/* Whether gradient tensor g is sparse: the gathered rows, as grad_gather's IndexedSlices. */
static int grad_sparse(zoo_builder *b, int32_t g) {
    gopt_node_attrs ga;
    gopt_graph_node(b->g, b->t[g].node, &ga);
    return strcmp(ga.op, "IndexedSlices") == 0;
}

/* Parameter p's update, reading its gradient g (sparse: the rows g holds). */
static void update(zoo_builder *b, const zoo_param_rec *p, int32_t g, int sparse) {
    static const struct {
        const char *op, *sparse;
        double flops;
    } U[] = {{"ApplyGradientDescent", "ScatterSub", 2}, {"ApplyGradientDescent", "ScatterSub", 2},
             {"ApplyMomentum", "SparseApplyMomentum", 4}, {"ApplyAdam", "SparseApplyAdam", 10},
             {"ApplyRMSProp", "SparseApplyRMSProp", 7}, {"ApplyAdamW", "SparseApplyAdamW", 11}};
    int64_t touched = sparse ? zoo_numel(b, g) : zoo_numel(b, p->tensor);
    const char *pname = gopt_graph_node_name(b->g, b->t[p->tensor].node);
    char name[352];
    snprintf(name, sizeof name, "update/%s", pname);
    int32_t node = zoo_emit(b, name, sparse ? U[b->optim].sparse : U[b->optim].op, GOPT_OP_CLASS_ELEMENTWISE,
                            U[b->optim].flops * (double)touched, 0, "", GOPT_PHASE_OPT, p->layer, pname);
    zoo_edge(b, p->tensor, node);
    zoo_edge(b, g, node);
}

/* One optimizer-phase node named name/<parameter p's name>, reading ins, producing a tensor
 * shaped like `like` (-1: a scalar). */
static int32_t clip_node(zoo_builder *b, const char *name, const char *op, double flops, const int32_t *ins, int nin,
                         int32_t like, int32_t layer, const zoo_param_rec *p) {
    char full[352], shape[256] = "1";
    if (p) snprintf(full, sizeof full, "%s/%s", name, gopt_graph_node_name(b->g, b->t[p->tensor].node));
    else snprintf(full, sizeof full, "%s", name);
    zoo_tensor lt = like >= 0 ? b->t[like] : (zoo_tensor){.rank = 0}; /* copy: zoo_tensor_new may move b->t */
    if (like >= 0) zoo_shape_str(b, &like, 1, shape, sizeof shape);
    int32_t t = zoo_tensor_new(b, -1, lt.rank, lt.d);
    if (t < 0) return -1;
    if (like >= 0) b->t[t].esize = lt.esize;
    int32_t node = zoo_emit(b, full, op, GOPT_OP_CLASS_ELEMENTWISE, flops, zoo_bytes(b, t), shape, GOPT_PHASE_OPT, layer,
                            NULL);
    if (node < 0) return -1;
    b->t[t].node = node;
    for (int i = 0; i < nin; i++) zoo_edge(b, ins[i], node);
    return b->st == GOPT_OK ? t : -1;
}

/* The updates, the gradients first clipped to one global norm when b->clip (as
 * torch.nn.utils.clip_grad_norm_ and tf.clip_by_global_norm: each gradient's squared norm
 * (2 FLOPs per element), their sum and square root (GlobalNorm), each gradient scaled by
 * min(1, max_norm / norm) (Mul, 1 FLOP per element): every update waits for the whole backward). */
static void updates(zoo_builder *b) {
    if (!b->clip) {
        for (int32_t i = 0; i < b->nparams && b->st == GOPT_OK; i++) {
            int32_t g = grad_sum(b, b->params[i].tensor);
            if (g >= 0) update(b, &b->params[i], g, grad_sparse(b, g)); /* no path reaches it: nothing to update */
        }
        return;
    }
    int32_t *gs = malloc(sizeof(int32_t) * 2 * (size_t)(b->nparams > 0 ? b->nparams : 1)), *sq = gs + b->nparams;
    if (!gs) {
        zoo_fail(b, GOPT_ENOMEM, "out of memory clipping gradients");
        return;
    }
    int nsq = 0;
    for (int32_t i = 0; i < b->nparams && b->st == GOPT_OK; i++) {
        const zoo_param_rec *p = &b->params[i];
        if ((gs[i] = grad_sum(b, p->tensor)) < 0) continue;
        sq[nsq++] = clip_node(b, "clip_by_global_norm/SquaredNorm", "SquaredNorm", 2.0 * (double)zoo_numel(b, gs[i]),
                              &gs[i], 1, -1, p->layer, p);
    }
    int32_t norm = nsq ? clip_node(b, "clip_by_global_norm/GlobalNorm", "GlobalNorm", (double)nsq + 1, sq, nsq, -1, -1,
                                   NULL)
                       : -1;
    for (int32_t i = 0; i < b->nparams && b->st == GOPT_OK; i++) {
        const zoo_param_rec *p = &b->params[i];
        if (gs[i] < 0) continue;
        const int sparse = grad_sparse(b, gs[i]);
        const int32_t ins[2] = {gs[i], norm};
        int32_t scaled = clip_node(b, "clip_by_global_norm/Mul", "Mul", (double)zoo_numel(b, gs[i]), ins, 2, gs[i],
                                   p->layer, p);
        if (scaled >= 0) update(b, p, scaled, sparse);
    }
    free(gs);
}

gopt_status zoo_backward(zoo_builder *b) {
    if (b->st != GOPT_OK) return b->st;
    int32_t loss = b->loss;
    int32_t seed = bwd_node(b, gopt_graph_node_name(b->g, b->t[loss].node), "Fill", GOPT_OP_CLASS_ELEMENTWISE, 0,
                            &loss, 1, &loss, 1, node_layer(b, b->t[loss].node));
    b->t[loss].needs_grad = 1;
    contrib(b, loss, seed);
    char fwd_name[320];
    for (int32_t k = b->nops - 1; k >= 0 && b->st == GOPT_OK; k--) {
        const zoo_op *o = &b->ops[k];
        int32_t dy[ZOO_MAX_OUTS];
        int any = 0;
        for (int j = 0; j < o->nout; j++) any |= (dy[j] = grad_sum(b, o->out0 + j)) >= 0;
        if (!any) continue;
        if (dy[0] < 0 && o->kind != ZK_SPLIT) {
            /* a gradient reaches a later output only: the rules differentiate output 0, the
             * others (an imported norm's running statistics) carry none; an op outside the
             * rules takes the first output's gradient there is */
            if (o->kind != ZK_OTHER) continue;
            for (int j = 1; j < o->nout && dy[0] < 0; j++) dy[0] = dy[j];
        }
        snprintf(fwd_name, sizeof fwd_name, "%s", gopt_graph_node_name(b->g, o->node));
        grad_ctx c = {b, o, fwd_name, &b->args[o->in0], dy, 0};
        gopt_node_attrs a;
        gopt_graph_node(b->g, o->node, &a);
        c.flops = a.flops;
        GRAD_RULE[o->kind](&c);
    }
    updates(b);
    return b->st;
}
