/* zoo_synth.c: random training-step graphs for pre-training.
 *
 * Seven structure kinds, each a random forward description over the same zoo
 * layers as the model families (so backward, accumulation and optimizer ops
 * come out exactly as for real models):
 *   layered  random layered DAG of dense ops (MatMul, activations, Add/Mul,
 *            concat+projection, LayerNorm, Softmax) with skips between layers;
 *   cells    a random NASNet-space genotype (normal + reduction cell) stacked
 *            into a network, as architecture search produces;
 *   chain    a chain of blocks: residual, multi-branch (Inception-like),
 *            plain and downsampling convolutions, long skip additions;
 *   grid     an unrolled recurrent grid (layers x steps) of LSTM, GRU or
 *            vanilla RNN cells.
 *   transformer  token embeddings + blocks of multi-head self-attention (causal
 *            mask, or none), FFN or mixture-of-experts FFN (top-k dispatch,
 *            per-expert batched FFNs, combine), optional Conformer conv
 *            module (depthwise 1-D conv), pre- or post-norm residuals, or an
 *            encoder-decoder with cross-attention;
 *   recsys   embedding tables (multi-hot, sum-pooled, sparse or dense
 *            gradients), bottom and top MLPs, dot or concat interaction;
 *   unet     stacked U-Nets: conv+BN down with max pooling, optional
 *            bottleneck self-attention, transposed convs (or nearest-neighbour
 *            resize + conv) up, skip concats.
 *   tables   a recommender whose step is its embedding tables: a few to a few
 *            dozen features with heavy-tailed table sizes (log-uniform, 100
 *            to 1e7 rows, as Criteo's are), dense gradients in 80% of the
 *            graphs (PyTorch's default), DLRM's dot interaction.
 * GOPT_SYNTH_ANY draws among the first four only (what it drew before the
 * later kinds existed), GOPT_SYNTH_ALL among the first seven (tables is drawn
 * only when asked for).
 * Sizes (batch, widths, image sides, channels) are drawn log-uniformly so
 * tensor and FLOP sizes span several orders of magnitude. The forward pass
 * grows until it reaches a node budget derived from the target size (a
 * training step has about 2.5 nodes per forward node).
 * Invariant: every random choice comes from the rng argument, in a fixed
 * order, so one seed gives one graph bit for bit.
 * Cost: O(nodes).
 */
#include <math.h>
#include <stdlib.h>

#include "zoo_internal.h"

static const char *const KIND_NAMES[GOPT_SYNTH_KIND_COUNT] = {"layered", "cells",  "chain", "grid",
                                                               "transformer", "recsys", "unet", "tables"};
/* forward share of all nodes, per kind (measured; docs/zoo.md) */
static const double FWD_SHARE[GOPT_SYNTH_KIND_COUNT] = {0.45, 0.42, 0.44, 0.41, 0.47, 0.50, 0.45, 0.50};

const char *gopt_synth_kind_name(gopt_synth_kind k) {
    return k >= 0 && k < GOPT_SYNTH_KIND_COUNT ? KIND_NAMES[k] : NULL;
}

typedef struct {
    zoo_builder *b;
    gopt_rng *rng;
    int32_t budget; /* forward nodes */
} synth;

static int over(const synth *s) { return zoo_failed(s->b) || gopt_graph_num_nodes(s->b->g) >= s->budget; }
static int below(synth *s, int n) { return (int)gopt_rng_below(s->rng, (uint64_t)n); }
static int chance(synth *s, double p) { return gopt_rng_uniform(s->rng) < p; }

/* Log-uniform integer in [lo, hi], rounded to a multiple of 8 above 16. */
static int64_t draw(synth *s, double lo, double hi) {
    double v = exp(log(lo) + gopt_rng_uniform(s->rng) * (log(hi) - log(lo)));
    int64_t n = (int64_t)(v + 0.5);
    if (n > 16) n = (n + 4) / 8 * 8;
    return n < (int64_t)lo ? (int64_t)lo : n;
}

static void classify(synth *s, int32_t x, int64_t batch) {
    zoo_builder *b = s->b;
    b->layer++;
    zoo_push(b, "head");
    int32_t labels = ZOO_INPUT(b, "labels", batch);
    zoo_softmax_loss(b, x, draw(s, 2, 1000), labels);
    zoo_pop(b);
}

/* ---- layered DAG of dense ops -------------------------------------------------------- */
static void synth_layered(synth *s) {
    zoo_builder *b = s->b;
    int64_t B = draw(s, 1, 512), D = draw(s, 32, 4096);
    int width = 2 + below(s, 7);
    int32_t prev[8], older[8], cur[8], last[16];
    int np = 1, no = 0;
    b->layer = 0;
    zoo_push(b, "input");
    prev[0] = zoo_unary(b, zoo_dense(b, ZOO_INPUT(b, "x", B, draw(s, 16, 4096)), D, 1), ZU_RELU);
    zoo_pop(b);
    while (!over(s)) {
        b->layer++;
        zoo_push(b, "layer_%d", b->layer);
        if (chance(s, 0.1)) { /* change width: fold the older tensors in, project the live ones */
            for (int i = 0; i < no; i++) {
                int j = below(s, np);
                prev[j] = zoo_add(b, prev[j], older[i]);
            }
            D = draw(s, 32, 4096);
            for (int i = 0; i < np; i++) {
                zoo_push(b, "project_%d", i);
                prev[i] = zoo_dense(b, prev[i], D, 0);
                zoo_pop(b);
            }
            no = 0;
        }
        int used_older[8] = {0};
        for (int j = 0; j < width; j++) {
            zoo_push(b, "op_%d", j);
            double r = gopt_rng_uniform(s->rng);
            int kx = below(s, np + no), ky = below(s, np + no);
            int32_t x = kx < np ? prev[kx] : older[kx - np], y = ky < np ? prev[ky] : older[ky - np];
            if (kx >= np) used_older[kx - np] = 1;
            if (ky >= np && r >= 0.55 && r < 0.90) used_older[ky - np] = 1; /* ops reading y */
            if (r < 0.35) cur[j] = zoo_dense(b, x, D, chance(s, 0.7));
            else if (r < 0.55) cur[j] = zoo_unary(b, x, (zoo_unary_kind)below(s, 3));
            else if (r < 0.70) cur[j] = zoo_add(b, x, y);
            else if (r < 0.80) cur[j] = zoo_mul(b, x, y);
            else if (r < 0.90) {
                int32_t xy[2] = {x, y};
                cur[j] = zoo_dense(b, zoo_concat(b, xy, 2, 1), D, 1);
            } else if (r < 0.95) cur[j] = zoo_layer_norm(b, x);
            else cur[j] = zoo_softmax(b, x);
            zoo_pop(b);
        }
        /* tensors that leave the pool unread join a new tensor: no dead ends */
        for (int i = 0; i < no; i++)
            if (!used_older[i]) {
                int j = below(s, width);
                cur[j] = zoo_add(b, cur[j], older[i]);
            }
        zoo_pop(b);
        for (int i = 0; i < np; i++) older[i] = prev[i];
        no = np;
        for (int j = 0; j < width; j++) prev[j] = cur[j];
        np = width;
    }
    /* the loss reads the last two layers (the one before may hold tensors nothing read) */
    int nl = 0;
    for (int i = 0; i < np; i++) last[nl++] = prev[i];
    for (int i = 0; i < no; i++) last[nl++] = older[i];
    classify(s, zoo_addn(b, last, nl), B);
}

/* ---- stacked NAS cells ---------------------------------------------------------------- */
static void random_genotype(synth *s, zoo_cell_op *ops, int *concat, zoo_cell_genotype *g, int reduction) {
    int used[2 + ZOO_CELL_MAX_STEPS] = {0};
    g->nsteps = 2 + below(s, 4);
    for (int i = 0; i < 2 * g->nsteps; i++) {
        ops[i].input = (uint8_t)(i < 2 ? i : below(s, 2 + i / 2)); /* step 0 reads both inputs */
        ops[i].op = (uint8_t)below(s, ZOO_CELL_OP_COUNT);
        used[ops[i].input] = 1;
    }
    g->nconcat = 0;
    for (int k = 2; k < 2 + g->nsteps; k++)
        if (!used[k]) concat[g->nconcat++] = k;
    if (!reduction && chance(s, 0.3)) concat[g->nconcat++] = 1;
    g->ops = ops;
    g->concat = concat;
}

static void synth_cells(synth *s) {
    zoo_builder *b = s->b;
    zoo_cell_op nops[2 * ZOO_CELL_MAX_STEPS], rops[2 * ZOO_CELL_MAX_STEPS];
    int ncat[2 + ZOO_CELL_MAX_STEPS], rcat[2 + ZOO_CELL_MAX_STEPS];
    zoo_cell_genotype normal, reduce;
    random_genotype(s, nops, ncat, &normal, 0);
    random_genotype(s, rops, rcat, &reduce, 1);
    int64_t B = draw(s, 1, 128), side = draw(s, 16, 256), f = draw(s, 8, 64);
    int per_stack = 1 + below(s, 6);
    b->layer = 0;
    zoo_push(b, "stem");
    int32_t x = zoo_conv_bn(b, ZOO_INPUT(b, "images", B, side, side, 3), 3, 3, f, side >= 64 ? 2 : 1, 0, 0);
    zoo_pop(b);
    int32_t prev = x, cur = x;
    for (int c = 0; !over(s); c++) {
        int red = c > 0 && c % (per_stack + 1) == per_stack && zoo_dim(b, cur, 1) >= 4;
        if (red) f *= 2;
        b->layer++;
        zoo_push(b, "cell_%d", c);
        int32_t next = zoo_nas_cell(b, prev, cur, f, red, red ? &reduce : &normal);
        zoo_pop(b);
        prev = cur;
        cur = next;
    }
    classify(s, zoo_global_pool(b, zoo_unary(b, cur, ZU_RELU)), B);
}

/* ---- chain of blocks with skips and branches -------------------------------------------- */
static int32_t rand_conv(synth *s, int32_t x, int64_t c, int relu) {
    static const int K[][2] = {{1, 1}, {3, 3}, {5, 5}, {1, 7}, {7, 1}, {1, 3}, {3, 1}};
    int k = below(s, 7);
    return zoo_conv_bn(s->b, x, K[k][0], K[k][1], c, 1, 0, relu);
}

static void synth_chain(synth *s) {
    zoo_builder *b = s->b;
    int64_t B = draw(s, 1, 128), side = draw(s, 16, 256), c = draw(s, 16, 256);
    int32_t hist[16];
    int nh = 0;
    b->layer = 0;
    zoo_push(b, "stem");
    int32_t x = zoo_conv_bn(b, ZOO_INPUT(b, "images", B, side, side, 3), 3, 3, c, side >= 64 ? 2 : 1, 0, 1);
    zoo_pop(b);
    for (int k = 0; !over(s); k++) {
        b->layer++;
        zoo_push(b, "block_%d", k);
        double r = gopt_rng_uniform(s->rng);
        if (r < 0.4) { /* residual */
            int32_t y = x;
            int n = 1 + below(s, 3);
            for (int i = 0; i < n; i++) {
                zoo_push(b, "conv_%d", i);
                y = rand_conv(s, y, c, i + 1 < n);
                zoo_pop(b);
            }
            x = zoo_unary(b, zoo_add(b, y, x), ZU_RELU);
        } else if (r < 0.65) { /* branches, concatenated, projected back */
            int nb = 2 + below(s, 3);
            int32_t br[4];
            for (int j = 0; j < nb; j++) {
                zoo_push(b, "branch_%d", j);
                if (j == nb - 1 && chance(s, 0.5)) br[j] = zoo_pool(b, x, 3, 1, chance(s, 0.5) ? ZOO_MAX : 0);
                else {
                    int n = 1 + below(s, 3);
                    br[j] = x;
                    for (int i = 0; i < n; i++) {
                        zoo_push(b, "conv_%d", i);
                        br[j] = rand_conv(s, br[j], draw(s, 8, (double)c), 1);
                        zoo_pop(b);
                    }
                }
                zoo_pop(b);
            }
            zoo_push(b, "project");
            x = zoo_conv_bn(b, zoo_concat(b, br, nb, -1), 1, 1, c, 1, 0, 1);
            zoo_pop(b);
        } else if (r < 0.8 || zoo_dim(b, x, 1) < 4 || c > 1024) {
            x = rand_conv(s, x, c, 1);
        } else if (r < 0.9) { /* downsample */
            c *= 2;
            x = zoo_conv_bn(b, x, 3, 3, c, 2, 0, 1);
            nh = 0;
        } else if (nh > 1) { /* long skip from an earlier block of the same shape */
            x = zoo_add(b, x, hist[below(s, nh - 1)]);
        }
        zoo_pop(b);
        if (nh < 16) hist[nh++] = x;
    }
    classify(s, zoo_global_pool(b, x), B);
}

/* ---- unrolled recurrent grid -------------------------------------------------------------- */
typedef struct {
    zoo_lstm lstm;
    int32_t w, bias, wc, bc; /* GRU gates and candidate; vanilla uses w, bias */
} synth_rnn;

static int32_t rnn_step(zoo_builder *b, int kind, const synth_rnn *r, int32_t x, int32_t *h, int32_t *c) {
    if (kind == 0) {
        zoo_lstm_step(b, &r->lstm, x, h, c);
        return *h;
    }
    int64_t batch = zoo_dim(b, x, 0), hid = zoo_dim(b, r->bias, 0) / (kind == 1 ? 2 : 1);
    if (*h < 0) *h = zoo_const(b, "zero_h", 2, ZOO_DIMS(batch, hid));
    int32_t xh[2] = {x, *h};
    int32_t pre = zoo_bias(b, zoo_matmul(b, zoo_concat(b, xh, 2, 1), r->w, 0, 0), r->bias);
    if (kind == 2) return *h = zoo_unary(b, pre, ZU_TANH);
    int32_t zr[2]; /* GRU: h' = h + z * (cand - h) */
    zoo_split(b, zoo_unary(b, pre, ZU_SIGMOID), 2, 1, zr);
    int32_t xrh[2] = {x, zoo_mul(b, zr[1], *h)};
    int32_t cand = zoo_unary(b, zoo_bias(b, zoo_matmul(b, zoo_concat(b, xrh, 2, 1), r->wc, 0, 0), r->bc), ZU_TANH);
    return *h = zoo_add(b, *h, zoo_mul(b, zr[0], zoo_add(b, cand, *h)));
}

static void synth_grid(synth *s) {
    zoo_builder *b = s->b;
    int kind = below(s, 3), L = 1 + below(s, 4);
    int64_t B = draw(s, 1, 256), H = draw(s, 32, 2048), X = draw(s, 16, 1024);
    synth_rnn r[4];
    int32_t h[4], c[4], *outs = NULL;
    int nout = 0, cap = 0;
    for (int l = 0; l < L; l++) {
        b->layer = l + 1;
        zoo_push(b, "rnn/layer_%d", l);
        int64_t in = l ? H : X;
        if (kind == 0) zoo_lstm_init(b, &r[l].lstm, in, H);
        else {
            r[l].w = ZOO_PARAM(b, "gates/kernel", in + H, kind == 1 ? 2 * H : H);
            r[l].bias = ZOO_PARAM(b, "gates/bias", kind == 1 ? 2 * H : H);
            if (kind == 1) {
                r[l].wc = ZOO_PARAM(b, "candidate/kernel", in + H, H);
                r[l].bc = ZOO_PARAM(b, "candidate/bias", H);
            }
        }
        zoo_pop(b);
        h[l] = c[l] = -1;
    }
    for (int t = 0; !over(s); t++) {
        b->layer = 0;
        zoo_push(b, "t%d", t);
        int32_t x = ZOO_INPUT(b, "x", B, X);
        for (int l = 0; l < L; l++) {
            b->layer = l + 1;
            zoo_push(b, "layer_%d", l);
            x = rnn_step(b, kind, &r[l], x, &h[l], &c[l]);
            zoo_pop(b);
        }
        zoo_pop(b);
        if (nout == cap) {
            cap = cap ? 2 * cap : 64;
            int32_t *p = realloc(outs, (size_t)cap * sizeof *p);
            if (!p) {
                zoo_fail(b, GOPT_ENOMEM, "out of memory");
                break;
            }
            outs = p;
        }
        outs[nout++] = x;
    }
    b->layer = L;
    if (!zoo_failed(b)) classify(s, zoo_concat_many(b, outs, nout, 0), B * nout);
    free(outs);
}

/* ---- shared by the new kinds: multi-head attention, FFN, MoE ------------------------------ */
/* A forward op with no gradient (masks, routing decisions): one output. */
static int32_t nograd(zoo_builder *b, const char *op, gopt_op_class cls, double flops, const int32_t *ins, int nin,
                      int rank, const int64_t *dims) {
    int64_t d[1][ZOO_MAX_RANK] = {{0}};
    for (int i = 0; i < rank; i++) d[0][i] = dims[i];
    zoo_fwd_spec sp = {.kind = ZK_NONE, .op = op, .cls = cls, .flops = flops, .ins = ins, .nin = nin, .nout = 1,
                       .ranks = &rank, .dims = (const int64_t(*)[ZOO_MAX_RANK])d};
    return zoo_fwd(b, &sp);
}

/* (B, T, D) -> (B, NH, T, D / NH) and back. */
static int32_t split_heads(zoo_builder *b, int32_t x, int64_t nh) {
    int64_t B = zoo_dim(b, x, 0), T = zoo_dim(b, x, 1), D = zoo_dim(b, x, 2);
    x = zoo_move(b, x, "Reshape", 4, ZOO_DIMS(B, T, nh, D / nh), 0);
    return zoo_move(b, x, "Transpose", 4, ZOO_DIMS(B, nh, T, D / nh), 0);
}
static int32_t merge_heads(zoo_builder *b, int32_t x) {
    int64_t B = zoo_dim(b, x, 0), nh = zoo_dim(b, x, 1), T = zoo_dim(b, x, 2), dh = zoo_dim(b, x, 3);
    x = zoo_move(b, x, "Transpose", 4, ZOO_DIMS(B, T, nh, dh), 0);
    return zoo_move(b, x, "Reshape", 3, ZOO_DIMS(B, T, nh * dh), 0);
}

/* Multi-head attention of queries xq (B, Tq, D) over xkv (B, Tk, D):
 * projections (one fused QKV MatMul for self-attention), scaled Q K^T per
 * head (BatchMatMul), + mask (broadcast), softmax over the keys, times V,
 * heads merged, output projection. mask: a (Tq, Tk) constant or -1. */
static int32_t mha(synth *s, int32_t xq, int32_t xkv, int64_t nh, int32_t mask) {
    zoo_builder *b = s->b;
    int64_t D = zoo_dim(b, xq, 2);
    int32_t q, k, v;
    zoo_push(b, "attention");
    if (xkv < 0) {
        zoo_push(b, "qkv");
        int32_t p[3];
        zoo_split(b, zoo_dense(b, xq, 3 * D, chance(s, 0.5)), 3, -1, p);
        zoo_pop(b);
        q = p[0], k = p[1], v = p[2];
    } else {
        zoo_push(b, "query");
        q = zoo_dense(b, xq, D, 1);
        zoo_pop(b);
        zoo_push(b, "key_value");
        int32_t p[2];
        zoo_split(b, zoo_dense(b, xkv, 2 * D, 1), 2, -1, p);
        zoo_pop(b);
        k = p[0], v = p[1];
    }
    q = split_heads(b, q, nh), k = split_heads(b, k, nh), v = split_heads(b, v, nh);
    int32_t score = zoo_unary(b, zoo_matmul(b, q, k, 0, 1), ZU_SCALE);
    if (mask >= 0) score = zoo_add(b, score, mask);
    int32_t ctx = merge_heads(b, zoo_matmul(b, zoo_softmax(b, score), v, 0, 0));
    zoo_push(b, "output");
    ctx = zoo_dense(b, ctx, D, 1);
    zoo_pop(b);
    zoo_pop(b);
    return ctx;
}

static int32_t ffn(synth *s, int32_t x, int64_t inner) {
    zoo_builder *b = s->b;
    int64_t D = zoo_dim(b, x, -1);
    zoo_push(b, "layer_1");
    int32_t h = zoo_unary(b, zoo_dense(b, x, inner, 1), chance(s, 0.5) ? ZU_RELU : ZU_TANH);
    zoo_pop(b);
    zoo_push(b, "layer_2");
    h = zoo_dense(b, h, D, 1);
    zoo_pop(b);
    return h;
}

/* Mixture of experts (GShard's dense dispatch, static shapes): a softmax gate
 * over E experts, top-k routing into a (S, E, C) dispatch mask with expert
 * capacity C, tokens gathered per expert by one MatMul, per-expert FFNs as
 * batched MatMuls over (E, C, D), combined back with the gate weights. */
static int32_t moe(synth *s, int32_t x, int64_t inner) {
    zoo_builder *b = s->b;
    int64_t B = zoo_dim(b, x, 0), T = zoo_dim(b, x, 1), D = zoo_dim(b, x, 2), S = B * T;
    int64_t E = 1LL << (2 + below(s, 4)), k = 1 + below(s, 2);
    int64_t C = (int64_t)ceil(1.25 * (double)(k * S) / (double)E);
    zoo_push(b, "moe");
    int32_t tokens = zoo_move(b, x, "Reshape", 2, ZOO_DIMS(S, D), 0);
    zoo_push(b, "gate");
    int32_t probs = zoo_softmax(b, zoo_dense(b, tokens, E, 0));
    zoo_pop(b);
    int32_t topk = nograd(b, "TopKV2", GOPT_OP_CLASS_REDUCTION, (double)(S * E), &probs, 1, 2, ZOO_DIMS(S, k));
    int32_t mask = nograd(b, "OneHot", GOPT_OP_CLASS_DATA_MOVEMENT, 0, &topk, 1, 3, ZOO_DIMS(S, E, C));
    int32_t dispatch = zoo_move(b, mask, "Reshape", 2, ZOO_DIMS(S, E * C), 0);
    int32_t xin = zoo_move(b, zoo_matmul(b, dispatch, tokens, 1, 0), "Reshape", 3, ZOO_DIMS(E, C, D), 0);
    zoo_push(b, "experts");
    int32_t w1 = ZOO_PARAM(b, "layer_1/kernel", E, D, inner), b1 = ZOO_PARAM(b, "layer_1/bias", E, 1, inner);
    int32_t w2 = ZOO_PARAM(b, "layer_2/kernel", E, inner, D), b2 = ZOO_PARAM(b, "layer_2/bias", E, 1, D);
    int32_t h = zoo_unary(b, zoo_add(b, zoo_matmul(b, xin, w1, 0, 0), b1), ZU_RELU);
    h = zoo_add(b, zoo_matmul(b, h, w2, 0, 0), b2);
    zoo_pop(b);
    int32_t gates = zoo_move(b, probs, "Reshape", 3, ZOO_DIMS(S, E, 1), 0);
    int32_t combine = zoo_move(b, zoo_mul(b, mask, gates), "Reshape", 2, ZOO_DIMS(S, E * C), 0);
    int32_t y = zoo_matmul(b, combine, zoo_move(b, h, "Reshape", 2, ZOO_DIMS(E * C, D), 0), 0, 0);
    zoo_pop(b);
    return zoo_move(b, y, "Reshape", 3, ZOO_DIMS(B, T, D), 0);
}

/* Conformer's convolution module: pointwise conv, GLU, depthwise 1-D conv
 * (NHWC with H = 1), batch norm, swish, pointwise conv. */
static int32_t conv_module(synth *s, int32_t x) {
    zoo_builder *b = s->b;
    int64_t B = zoo_dim(b, x, 0), T = zoo_dim(b, x, 1), D = zoo_dim(b, x, 2);
    static const int K[] = {3, 7, 15, 31};
    int kw = K[below(s, 4)];
    zoo_push(b, "conv_module");
    int32_t h = zoo_move(b, x, "Reshape", 4, ZOO_DIMS(B, 1, T, D), 0);
    zoo_push(b, "pointwise_1");
    int32_t glu[2];
    zoo_split(b, zoo_conv_bias(b, h, 1, 1, 2 * D, 1), 2, -1, glu);
    zoo_pop(b);
    h = zoo_mul(b, glu[0], zoo_unary(b, glu[1], ZU_SIGMOID));
    zoo_push(b, "depthwise");
    h = zoo_conv(b, h, ZOO_PARAM(b, "weights", 1, kw, D, 1), 1, ZOO_DEPTHWISE);
    h = zoo_norm(b, h, ZOO_PARAM(b, "BatchNorm/gamma", D), ZOO_PARAM(b, "BatchNorm/beta", D), 0);
    h = zoo_mul(b, h, zoo_unary(b, h, ZU_SIGMOID));
    zoo_pop(b);
    zoo_push(b, "pointwise_2");
    h = zoo_conv_bias(b, h, 1, 1, D, 1);
    zoo_pop(b);
    zoo_pop(b);
    return zoo_move(b, h, "Reshape", 3, ZOO_DIMS(B, T, D), 0);
}

/* One block: x + sublayer(x) with layer norm before (pre-norm) or after. */
typedef struct {
    int pre_norm;
    int64_t heads, inner;
} block_cfg;

static int32_t residual(synth *s, const block_cfg *c, int32_t x, int which, int32_t mem, int32_t mask) {
    static const char *const NAME[] = {"self_attention", "cross_attention", "ffn", "moe", "conv"};
    zoo_builder *b = s->b;
    zoo_push(b, "%s", NAME[which]);
    int32_t h = c->pre_norm ? zoo_layer_norm(b, x) : x;
    if (which == 0) h = mha(s, h, -1, c->heads, mask);
    else if (which == 1) h = mha(s, h, mem, c->heads, -1);
    else if (which == 2) h = ffn(s, h, c->inner);
    else if (which == 3) h = moe(s, h, c->inner);
    else h = conv_module(s, h);
    h = zoo_add(b, x, h);
    if (!c->pre_norm) h = zoo_layer_norm(b, h);
    zoo_pop(b);
    return h;
}

/* ---- transformer: embeddings, attention blocks, MoE, encoder-decoder -------------------- */
static void synth_transformer(synth *s) {
    zoo_builder *b = s->b;
    int64_t B = draw(s, 1, 64), T = draw(s, 16, 1024), V = draw(s, 1000, 64000);
    if (B * T > 16384) B = 16384 / T; /* at most 16k tokens a step */
    block_cfg c = {.pre_norm = chance(s, 0.7), .heads = 1LL << below(s, 5)};
    int64_t D = c.heads * draw(s, 16, 128);
    c.inner = D * (2 + below(s, 3));
    int mode = below(s, 3); /* 0 decoder-only (causal), 1 encoder-only, 2 encoder-decoder */
    int moe_every = chance(s, 0.3) ? 1 + below(s, 2) : 0, conv = mode == 1 && chance(s, 0.4);
    int sparse = chance(s, 0.5);
    b->layer = 0;
    zoo_push(b, "embeddings");
    int32_t table = ZOO_PARAM(b, "word_embeddings", V, D), posw = ZOO_PARAM(b, "position_embeddings", T, D);
    int32_t ids = ZOO_INPUT(b, "input_ids", B, T);
    int32_t x = zoo_add(b, zoo_gather(b, table, ids, sparse), posw);
    zoo_pop(b);
    int32_t causal = mode != 1 ? zoo_const(b, "causal_mask", 2, ZOO_DIMS(T, T)) : -1;
    int32_t enc = -1, dec_x = -1;
    int32_t start = gopt_graph_num_nodes(b->g);
    if (mode == 2) {
        zoo_push(b, "decoder/embeddings"); /* the target side: its own table, shifted ids */
        int32_t tt = ZOO_PARAM(b, "word_embeddings", V, D), tids = ZOO_INPUT(b, "target_ids", B, T);
        dec_x = zoo_add(b, zoo_gather(b, tt, tids, sparse), ZOO_PARAM(b, "position_embeddings", T, D));
        zoo_pop(b);
    }
    int enc_done = mode != 2;
    for (int l = 0, nenc = 0; !over(s); l++) {
        b->layer = l + 1;
        int dec = mode == 2 && enc_done;
        zoo_push(b, "%s/layer_%d", dec ? "decoder" : mode == 2 ? "encoder" : "blocks", dec ? l - nenc : l);
        nenc += !dec;
        int32_t h = dec ? dec_x : x;
        h = residual(s, &c, h, 0, -1, dec || mode == 0 ? causal : -1);
        if (dec) h = residual(s, &c, h, 1, enc, -1);
        if (conv) h = residual(s, &c, h, 4, -1, -1);
        h = residual(s, &c, h, moe_every && l % moe_every == moe_every - 1 ? 3 : 2, -1, -1);
        zoo_pop(b);
        if (dec) dec_x = h;
        else x = h;
        /* encoder-decoder: the encoder takes about 40% of the budget */
        if (!enc_done && gopt_graph_num_nodes(b->g) - start >= 0.4 * (s->budget - start)) {
            enc_done = 1;
            enc = c.pre_norm ? zoo_layer_norm(b, x) : x;
        }
    }
    if (mode == 2 && !enc_done) { /* the budget ran out inside the encoder: one decoder layer still */
        enc = x;
        zoo_push(b, "decoder/layer_0");
        dec_x = residual(s, &c, residual(s, &c, dec_x, 0, -1, causal), 1, enc, -1);
        zoo_pop(b);
    }
    b->layer++;
    int32_t y = mode == 2 ? dec_x : x;
    zoo_push(b, "head");
    if (c.pre_norm) y = zoo_layer_norm(b, y);
    int32_t labels = ZOO_INPUT(b, "labels", B * T);
    zoo_softmax_loss(b, zoo_move(b, y, "Reshape", 2, ZOO_DIMS(B * T, D), 0), V, labels);
    zoo_pop(b);
}

/* ---- recsys: embedding tables, MLPs, feature interaction --------------------------------- */
static int32_t mlp(synth *s, int32_t x, int n, int64_t width, int64_t last) {
    for (int i = 0; i < n; i++) {
        zoo_push(s->b, "dense_%d", i);
        x = zoo_unary(s->b, zoo_dense(s->b, x, i + 1 < n ? width : last, 1), ZU_RELU);
        zoo_pop(s->b);
    }
    return x;
}

/* A recommender: bottom MLP, one embedding table per sparse feature (rows
 * log-uniform in [100, rows_hi]; the tables' gradients sparse with
 * probability p_sparse), interaction, top MLP. The draws of the recsys kind
 * come first and in its order. */
static void recommender(synth *s, int64_t B, int64_t D, int64_t W, double p_sparse, double rows_hi, int dot_always);

static void synth_recsys(synth *s) {
    int64_t B = draw(s, 32, 8192), D = draw(s, 8, 128), W = draw(s, 64, 1024);
    /* many features come with small tables: about 4e7 rows in all (a table has about 4
     * forward nodes; up to 1e6 rows each) */
    recommender(s, B, D, W, 0.7, fmin(1e6, fmax(1e3, 4e7 / fmax(1.0, 0.7 * s->budget / 4))), 0);
}

/* A few very large tables dominate the step (Criteo's sizes are heavy-tailed:
 * a handful of 1e6-1e7-row tables among many small ones). */
static void synth_tables(synth *s) {
    int64_t B = draw(s, 256, 8192), D = draw(s, 16, 128), W = draw(s, 64, 1024);
    recommender(s, B, D, W, 0.2, 1e7, 1);
}

static void recommender(synth *s, int64_t B, int64_t D, int64_t W, double p_sparse, double rows_hi, int dot_always) {
    zoo_builder *b = s->b;
    int sparse = chance(s, p_sparse), cap = 4096;
    int32_t *feats = malloc((size_t)cap * sizeof *feats);
    if (!feats) {
        zoo_fail(b, GOPT_ENOMEM, "out of memory");
        return;
    }
    b->layer = 0;
    zoo_push(b, "bottom_mlp");
    int32_t dense = mlp(s, ZOO_INPUT(b, "dense_features", B, draw(s, 4, 512)), 1 + below(s, 4), W, D);
    zoo_pop(b);
    feats[0] = dense;
    int nf = 1;
    /* sparse features until about 70% of the budget; the interaction and top MLP take the rest */
    int32_t start = gopt_graph_num_nodes(b->g);
    while (nf < cap && !zoo_failed(b) && gopt_graph_num_nodes(b->g) - start < 0.7 * (s->budget - start)) {
        b->layer = 1 + (nf - 1) / 8; /* tables in groups of 8: each group's lookups, pooling and update together */
        zoo_push(b, "embedding_%d", nf - 1);
        int64_t rows = draw(s, 100, rows_hi), hot = chance(s, 0.5) ? 1 : draw(s, 2, 64);
        int32_t table = ZOO_PARAM(b, "table", rows, D), ids = ZOO_INPUT(b, "ids", B, hot);
        int32_t e = zoo_gather(b, table, ids, sparse);
        int32_t in1 = e;
        e = zoo_fwd(b, &(zoo_fwd_spec){.kind = ZK_MEAN, .op = "Sum", .cls = GOPT_OP_CLASS_REDUCTION,
                                       .flops = (double)(B * hot * D), .ins = &in1, .nin = 1, .nout = 1,
                                       .ranks = (const int[]){2}, .dims = (const int64_t[][ZOO_MAX_RANK]){{B, D}}});
        zoo_pop(b);
        feats[nf++] = e;
    }
    b->layer = 2 + (nf - 1) / 8;
    zoo_push(b, "interaction");
    int32_t z;
    if (nf <= 64 && (dot_always || chance(s, 0.7))) { /* DLRM's dot interaction: all pairwise dot products */
        for (int i = 0; i < nf; i++) feats[i] = zoo_move(b, feats[i], "Reshape", 3, ZOO_DIMS(B, 1, D), 0);
        int32_t stack = zoo_concat(b, feats, nf, 1);
        int32_t dots = zoo_matmul(b, stack, stack, 0, 1);
        int32_t flat = zoo_move(b, dots, "Reshape", 2, ZOO_DIMS(B, (int64_t)nf * nf), 0);
        int32_t cat[2] = {dense, flat};
        z = zoo_concat(b, cat, 2, 1);
    } else { /* wide & deep: concatenate every feature */
        z = zoo_concat_many(b, feats, nf, 1);
    }
    zoo_pop(b);
    b->layer++;
    zoo_push(b, "top_mlp");
    z = mlp(s, z, 1 + below(s, 4), W, W);
    zoo_pop(b);
    free(feats);
    b->layer++;
    zoo_push(b, "head");
    int32_t labels = ZOO_INPUT(b, "clicks", B);
    zoo_softmax_loss(b, z, 2, labels);
    zoo_pop(b);
}

/* ---- unet: conv encoder-decoder with transposed convs and skips ----------------------------- */
static int32_t conv_pair(synth *s, int32_t x, int64_t c, int reps) {
    for (int r = 0; r < reps; r++) {
        zoo_push(s->b, "conv_%d", r);
        x = zoo_conv_bn(s->b, x, 3, 3, c, 1, 0, 1);
        zoo_pop(s->b);
    }
    return x;
}

/* One U-Net: `depth` levels down (convs, then 2x2 max pooling), a bottleneck
 * (optionally with self-attention over the pixels, as diffusion U-Nets have),
 * and up (2x2 stride-2 transposed conv, concat with the skip, convs). */
/* 2x nearest-neighbour upsampling (a resize; its gradient is the ONNX import's
 * Resize rule: the pooling rule with a 1x1 window, AvgPoolGrad) and a 3x3 conv to c. */
static int32_t resize_conv(synth *s, int32_t x, int64_t c) {
    zoo_builder *b = s->b;
    int64_t B = zoo_dim(b, x, 0), H = zoo_dim(b, x, 1), W = zoo_dim(b, x, 2), C = zoo_dim(b, x, 3);
    int rank = 4;
    int32_t attr[4] = {1, 1, 0, 0};
    zoo_fwd_spec sp = {.kind = ZK_POOL, .op = "ResizeNearestNeighbor", .cls = GOPT_OP_CLASS_DATA_MOVEMENT, .ins = &x,
                       .nin = 1, .nout = 1, .ranks = &rank,
                       .dims = (const int64_t[][ZOO_MAX_RANK]){{B, 2 * H, 2 * W, C}}, .attr = attr};
    return zoo_conv_bias(b, zoo_fwd(b, &sp), 3, 3, c, 1);
}

static int32_t unet(synth *s, int32_t x, int depth, int64_t c0, int reps, int attn, int resize) {
    zoo_builder *b = s->b;
    int32_t skips[8];
    int64_t c = c0;
    for (int d = 0; d < depth; d++) {
        b->layer++;
        zoo_push(b, "down_%d", d);
        skips[d] = x = conv_pair(s, x, c, reps);
        x = zoo_pool(b, x, 2, 2, ZOO_MAX);
        zoo_pop(b);
        c *= 2;
    }
    b->layer++;
    zoo_push(b, "bottleneck");
    x = conv_pair(s, x, c, reps);
    if (attn) {
        int64_t B = zoo_dim(b, x, 0), H = zoo_dim(b, x, 1), W = zoo_dim(b, x, 2);
        int32_t seq = zoo_move(b, x, "Reshape", 3, ZOO_DIMS(B, H * W, c), 0);
        seq = zoo_add(b, seq, mha(s, zoo_layer_norm(b, seq), -1, c >= 256 ? 8 : 4, -1));
        x = zoo_move(b, seq, "Reshape", 4, ZOO_DIMS(B, H, W, c), 0);
    }
    zoo_pop(b);
    for (int d = depth - 1; d >= 0; d--) {
        c /= 2;
        b->layer++;
        zoo_push(b, "up_%d", d);
        if (resize) {
            zoo_push(b, "upsample");
            x = resize_conv(s, x, c);
            zoo_pop(b);
        } else {
            x = zoo_conv_transpose(b, x, ZOO_PARAM(b, "upconv/weights", 2, 2, c, zoo_dim(b, x, -1)), 2);
        }
        int32_t cat[2] = {skips[d], x};
        x = conv_pair(s, zoo_concat(b, cat, 2, -1), c, reps);
        zoo_pop(b);
    }
    return x;
}

static void synth_unet(synth *s) {
    zoo_builder *b = s->b;
    int depth = 2 + below(s, 4), reps = 1 + below(s, 3), attn = chance(s, 0.4);
    int64_t B = draw(s, 1, 16), c = draw(s, 8, 64), K = draw(s, 2, 64), unit = (int64_t)1 << depth;
    int64_t side = draw(s, 32, 512) / unit * unit; /* a multiple of 2^depth, at least twice it */
    if (side < 2 * unit) side = 2 * unit;
    attn = attn && (side >> depth) <= 32; /* attention over at most 1,024 pixels */
    int resize = chance(s, 0.3);            /* up by resize + conv, else by transposed convs */
    b->layer = 0;
    zoo_push(b, "stem");
    int32_t x = zoo_conv_bn(b, ZOO_INPUT(b, "images", B, side, side, 3), 3, 3, c, 1, 0, 1);
    zoo_pop(b);
    /* stacked U-Nets (hourglasses) with residual links while a whole one fits the budget,
     * then full-resolution residual conv blocks up to it */
    int32_t one = 0;
    for (int m = 0; !over(s); m++) {
        int32_t before = gopt_graph_num_nodes(b->g);
        if (m > 0 && before + one > s->budget) break;
        zoo_push(b, "unet_%d", m);
        int32_t y = unet(s, x, depth, c, reps, attn, resize);
        zoo_pop(b);
        x = m ? zoo_add(b, x, y) : y;
        one = gopt_graph_num_nodes(b->g) - before;
    }
    for (int k = 0; !over(s); k++) {
        b->layer++;
        zoo_push(b, "refine_%d", k);
        x = zoo_unary(b, zoo_add(b, x, conv_pair(s, x, c, 1)), ZU_RELU);
        zoo_pop(b);
    }
    b->layer++;
    zoo_push(b, "head");
    int32_t labels = ZOO_INPUT(b, "labels", B * side * side);
    int32_t logits = zoo_conv_bias(b, x, 1, 1, K, 1);
    zoo_xent(b, zoo_move(b, logits, "Reshape", 2, ZOO_DIMS(B * side * side, K), 0), labels);
    zoo_pop(b);
}

gopt_status gopt_zoo_synthetic(gopt_rng *rng, const gopt_synth_opts *opts, const char *name, gopt_graph **out,
                               gopt_error *err) {
    *out = NULL;
    int lo = opts && opts->min_nodes ? opts->min_nodes : 200, hi = opts && opts->max_nodes ? opts->max_nodes : 20000;
    if (lo < 50 || hi < lo || hi > GOPT_ZOO_MAX_NODES)
        return gopt_error_set(err, GOPT_EINVAL, "synthetic: node range [%d, %d] is not valid", lo, hi);
    gopt_synth_kind kind = opts ? opts->kind : GOPT_SYNTH_ANY;
    if (kind < GOPT_SYNTH_ALL || kind >= GOPT_SYNTH_KIND_COUNT)
        return gopt_error_set(err, GOPT_EINVAL, "synthetic: kind %d is not valid", (int)kind);
    /* ANY draws among the first four kinds only, exactly as before the others existed
     * (a recipe's corpus stays the same files); ALL draws among every kind */
    if (kind == GOPT_SYNTH_ANY) kind = (gopt_synth_kind)gopt_rng_below(rng, GOPT_SYNTH_ANY_KIND_COUNT);
    else if (kind == GOPT_SYNTH_ALL) kind = (gopt_synth_kind)gopt_rng_below(rng, GOPT_SYNTH_ALL_KIND_COUNT);
    /* tables: DLRM-sized steps (Criteo's 26 tables make about 350 nodes) */
    double median = kind == GOPT_SYNTH_TABLES ? 400.0 : 2000.0, spread = kind == GOPT_SYNTH_TABLES ? 0.6 : 0.8;
    double target = opts && opts->target_nodes ? opts->target_nodes : median * exp(spread * gopt_rng_normal(rng));
    if (target < lo) target = lo;
    if (target > hi) target = hi;
    gopt_optimizer optim = (gopt_optimizer)(GOPT_OPTIM_SGD + gopt_rng_below(rng, 3));
    static void (*const BUILD[GOPT_SYNTH_KIND_COUNT])(synth *) = {
        synth_layered, synth_cells, synth_chain, synth_grid, synth_transformer, synth_recsys, synth_unet, synth_tables};
    /* Build; when the size misses the target by more than 15%, rebuild from the
     * same RNG state with a rescaled budget (same structure, shorter or longer). */
    gopt_rng start = *rng;
    double budget = target * FWD_SHARE[kind];
    for (int attempt = 0;; attempt++) {
        *rng = start;
        zoo_builder b;
        gopt_status st = zoo_begin(&b, name, KIND_NAMES[kind], optim, err);
        if (st != GOPT_OK) return st;
        b.clip = opts && opts->clip_grad_norm;
        synth s = {&b, rng, (int32_t)budget};
        BUILD[kind](&s);
        gopt_graph *g = NULL;
        if ((st = zoo_finish(&b, &g)) != GOPT_OK) return st;
        int32_t n = gopt_graph_num_nodes(g);
        int in_range = n >= lo && n <= hi;
        if ((in_range && fabs(n - target) <= 0.15 * target) || (in_range && attempt >= 2)) {
            *out = g;
            return GOPT_OK;
        }
        gopt_graph_free(g);
        if (attempt >= 8)
            return gopt_error_set(err, GOPT_EINTERNAL, "synthetic %s graph '%s': %d nodes, outside [%d, %d]",
                                  KIND_NAMES[kind], name, n, lo, hi);
        budget *= target / (n > 0 ? n : 1) * (n < target ? 1.1 : 0.9); /* overshoot: granular sizes */
    }
}
