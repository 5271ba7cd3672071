/* zoo_seq.c: the sequence model families: RNN language model, GNMT,
 * Transformer-XL and WaveNet, each a forward-pass description on top of the
 * zoo layers (zoo_backward adds gradients and updates).
 *
 * Recurrent models are unrolled over the sequence as TensorFlow's static_rnn
 * graphs were: one LSTM cell's ops per (layer, step), weights shared across
 * steps (so their gradients are summed by one AddN per weight).
 * Transformer-XL is unrolled over the segments of the step's tokens, each
 * segment attending to the previous one's hidden states through a
 * StopGradient memory (segment-level recurrence).
 * Layer numbering: 0 = inputs and embeddings, 1..L the model's layers (GNMT:
 * encoder 1..L, decoder L+1..2L), last = the softmax head.
 * Sizes not on the command line are constants here, listed in docs/zoo.md.
 * Cost: O(layers x steps) nodes.
 */
#include <stdlib.h>
#include <string.h>

#include "zoo_internal.h"

enum { RNNLM_HIDDEN = 2048, RNNLM_VOCAB = 10000 };
enum { GNMT_HIDDEN = 1024, GNMT_VOCAB = 32000 };
enum { TXL_D = 512, TXL_HEADS = 8, TXL_INNER = 2048, TXL_SEGMENT = 64, TXL_VOCAB = 32000 };
enum { WAVENET_RES = 64, WAVENET_SKIP = 256, WAVENET_QUANT = 256, WAVENET_CYCLE = 10 };

static int32_t *ints(zoo_builder *b, int64_t n) {
    int32_t *p = calloc((size_t)(n > 0 ? n : 1), sizeof *p);
    if (!p) zoo_fail(b, GOPT_ENOMEM, "out of memory (%lld steps)", (long long)n);
    return p;
}

/* (B, T, D) -> T tensors (B, D), one StridedSlice each (tf.unstack). */
static void unstack_steps(zoo_builder *b, int32_t x, int64_t steps, int32_t *out) {
    zoo_push(b, "unstack");
    for (int64_t t = 0; t < steps; t++) out[t] = zoo_slice(b, x, 2, ZOO_DIMS(zoo_dim(b, x, 0), zoo_dim(b, x, 2)));
    zoo_pop(b);
}

/* One unidirectional LSTM layer over `steps` inputs; outputs replace xs. */
static void lstm_layer(zoo_builder *b, int32_t *xs, int64_t steps, int64_t hidden, int reverse, const int32_t *resid) {
    zoo_lstm l;
    zoo_lstm_init(b, &l, zoo_dim(b, xs[0], 1), hidden);
    int32_t h = -1, c = -1;
    for (int64_t k = 0; k < steps && !zoo_failed(b); k++) {
        int64_t t = reverse ? steps - 1 - k : k;
        zoo_push(b, "t%lld", (long long)t);
        zoo_lstm_step(b, &l, xs[t], &h, &c);
        xs[t] = resid ? zoo_add(b, h, resid[t]) : h;
        zoo_pop(b);
    }
}

gopt_status zoo_rnnlm(zoo_builder *b, const gopt_zoo_spec *s) {
    int64_t B = s->batch, T = s->seq, H = RNNLM_HIDDEN, V = RNNLM_VOCAB;
    int32_t *xs = ints(b, T);
    if (!xs) return b->st;
    b->layer = 0;
    int32_t ids = ZOO_INPUT(b, "input_ids", B, T), labels = ZOO_INPUT(b, "labels", T * B);
    int32_t table = ZOO_PARAM(b, "embedding", V, H);
    unstack_steps(b, zoo_embed(b, table, ids), T, xs);
    for (int l = 0; l < s->layers; l++) {
        b->layer = l + 1;
        zoo_push(b, "rnn/layer_%d", l);
        lstm_layer(b, xs, T, H, 0, NULL);
        zoo_pop(b);
    }
    b->layer = s->layers + 1;
    zoo_softmax_loss(b, zoo_concat_many(b, xs, (int)T, 0), V, labels);
    free(xs);
    return b->st;
}

/* Normalized-Bahdanau-style additive attention of query h (B, H) over keys
 * (B, T, H) and memory (B, T, H); returns the context (B, H). */
static int32_t attention(zoo_builder *b, int32_t h, int32_t keys, int32_t memory, int32_t wq, int32_t v) {
    int64_t B = zoo_dim(b, keys, 0), T = zoo_dim(b, keys, 1), H = zoo_dim(b, keys, 2);
    zoo_push(b, "attention");
    int32_t q = zoo_move(b, zoo_matmul(b, h, wq, 0, 0), "ExpandDims", 3, ZOO_DIMS(B, 1, H), 0);
    int32_t e = zoo_matmul(b, zoo_unary(b, zoo_add(b, keys, q), ZU_TANH), v, 0, 0);
    int32_t a = zoo_softmax(b, zoo_move(b, e, "Squeeze", 2, ZOO_DIMS(B, T), 0));
    int32_t ctx = zoo_matmul(b, zoo_move(b, a, "ExpandDims", 3, ZOO_DIMS(B, 1, T), 0), memory, 0, 0);
    ctx = zoo_move(b, ctx, "Squeeze", 2, ZOO_DIMS(B, H), 0);
    zoo_pop(b);
    return ctx;
}

/* GNMT (Wu et al. 2016): bidirectional bottom encoder layer, residual
 * connections from the third layer on, attention from the bottom decoder
 * layer fed to every decoder layer. */
gopt_status zoo_gnmt(zoo_builder *b, const gopt_zoo_spec *s) {
    int64_t B = s->batch, T = s->seq, H = GNMT_HIDDEN, V = GNMT_VOCAB;
    int L = s->layers;
    int32_t *xs = ints(b, T), *bw = ints(b, T), *prev = ints(b, T), *ys = ints(b, T);
    int32_t *hs = calloc((size_t)L, sizeof *hs), *cs = calloc((size_t)L, sizeof *cs);
    zoo_lstm *dec = calloc((size_t)L, sizeof *dec);
    if (!xs || !bw || !prev || !ys || !hs || !cs || !dec) {
        zoo_fail(b, GOPT_ENOMEM, "out of memory (gnmt, %lld steps)", (long long)T);
        goto out;
    }
    b->layer = 0;
    int32_t src = ZOO_INPUT(b, "source_ids", B, T), tgt = ZOO_INPUT(b, "target_ids", B, T);
    int32_t labels = ZOO_INPUT(b, "labels", T * B);
    int32_t enc_table = ZOO_PARAM(b, "embeddings/encoder", V, H), dec_table = ZOO_PARAM(b, "embeddings/decoder", V, H);
    unstack_steps(b, zoo_embed(b, enc_table, src), T, xs);
    /* encoder layer 1: bidirectional, outputs concatenated (B, 2H) */
    b->layer = 1;
    memcpy(bw, xs, (size_t)T * sizeof *xs);
    zoo_push(b, "encoder/bidirectional/fw");
    lstm_layer(b, xs, T, H, 0, NULL);
    zoo_pop(b);
    zoo_push(b, "encoder/bidirectional/bw");
    lstm_layer(b, bw, T, H, 1, NULL);
    zoo_pop(b);
    zoo_push(b, "encoder/bidirectional");
    for (int64_t t = 0; t < T; t++) {
        int32_t pair[2] = {xs[t], bw[t]};
        xs[t] = zoo_concat(b, pair, 2, 1);
    }
    zoo_pop(b);
    for (int l = 1; l < L && !zoo_failed(b); l++) {
        b->layer = l + 1;
        zoo_push(b, "encoder/layer_%d", l);
        memcpy(prev, xs, (size_t)T * sizeof *xs);
        lstm_layer(b, xs, T, H, 0, l >= 2 ? prev : NULL);
        zoo_pop(b);
    }
    /* memory (B, T, H) and its projection (the attention keys) */
    b->layer = L;
    zoo_push(b, "encoder/memory");
    int32_t memory = zoo_move(b, zoo_concat_many(b, xs, (int)T, 1), "Reshape", 3, ZOO_DIMS(B, T, H), 0);
    int32_t keys = zoo_matmul(b, memory, ZOO_PARAM(b, "memory_layer/kernel", H, H), 0, 0);
    zoo_pop(b);
    /* decoder */
    b->layer = L + 1;
    zoo_push(b, "decoder");
    int32_t wq = ZOO_PARAM(b, "attention/query_layer/kernel", H, H);
    int32_t av = ZOO_PARAM(b, "attention/v", H, 1);
    for (int l = 0; l < L; l++) {
        b->layer = L + 1 + l;
        zoo_push(b, "layer_%d", l);
        zoo_lstm_init(b, &dec[l], 2 * H, H);
        zoo_pop(b);
        hs[l] = cs[l] = -1;
    }
    unstack_steps(b, zoo_embed(b, dec_table, tgt), T, ys);
    int32_t ctx = zoo_const(b, "zero_context", 2, ZOO_DIMS(B, H));
    for (int64_t t = 0; t < T && !zoo_failed(b); t++) {
        zoo_push(b, "t%lld", (long long)t);
        int32_t x = ys[t], below = -1;
        for (int l = 0; l < L; l++) {
            b->layer = L + 1 + l;
            zoo_push(b, "layer_%d", l);
            int32_t in[2] = {l == 0 ? x : below, ctx};
            int32_t feed = zoo_concat(b, in, 2, 1);
            zoo_lstm_step(b, &dec[l], feed, &hs[l], &cs[l]);
            int32_t out = l >= 2 ? zoo_add(b, hs[l], below) : hs[l];
            if (l == 0) {
                b->layer = L + 1;
                ctx = attention(b, hs[0], keys, memory, wq, av);
            }
            below = out;
            zoo_pop(b);
        }
        ys[t] = below;
        zoo_pop(b);
    }
    zoo_pop(b);
    b->layer = 2 * L + 1;
    zoo_softmax_loss(b, zoo_concat_many(b, ys, (int)T, 0), V, labels);
out:
    free(xs);
    free(bw);
    free(prev);
    free(ys);
    free(hs);
    free(cs);
    free(dec);
    return b->st;
}

/* ---- Transformer-XL ---------------------------------------------------------------- */
typedef struct {
    int32_t wqkv, wr, rw_bias, rr_bias, wo, ln1[2], ff1, ff1b, ff2, ff2b, ln2[2];
} txl_layer;

static void txl_params(zoo_builder *b, txl_layer *p) {
    int64_t D = TXL_D, NH = TXL_HEADS, DH = TXL_D / TXL_HEADS;
    p->wqkv = ZOO_PARAM(b, "rel_attn/qkv/kernel", D, 3 * D);
    p->wr = ZOO_PARAM(b, "rel_attn/r/kernel", D, D);
    p->rw_bias = ZOO_PARAM(b, "rel_attn/r_w_bias", NH, 1, DH);
    p->rr_bias = ZOO_PARAM(b, "rel_attn/r_r_bias", NH, 1, DH);
    p->wo = ZOO_PARAM(b, "rel_attn/o/kernel", D, D);
    p->ln1[0] = ZOO_PARAM(b, "rel_attn/LayerNorm/gamma", D);
    p->ln1[1] = ZOO_PARAM(b, "rel_attn/LayerNorm/beta", D);
    p->ff1 = ZOO_PARAM(b, "ff/layer_1/kernel", D, TXL_INNER);
    p->ff1b = ZOO_PARAM(b, "ff/layer_1/bias", TXL_INNER);
    p->ff2 = ZOO_PARAM(b, "ff/layer_2/kernel", TXL_INNER, D);
    p->ff2b = ZOO_PARAM(b, "ff/layer_2/bias", D);
    p->ln2[0] = ZOO_PARAM(b, "ff/LayerNorm/gamma", D);
    p->ln2[1] = ZOO_PARAM(b, "ff/LayerNorm/beta", D);
}

/* (B, T, D) -> (B, NH, T, DH) */
static int32_t heads(zoo_builder *b, int32_t x) {
    int64_t B = zoo_dim(b, x, 0), T = zoo_dim(b, x, 1), NH = TXL_HEADS, DH = TXL_D / TXL_HEADS;
    x = zoo_move(b, x, "Reshape", 4, ZOO_DIMS(B, T, NH, DH), 0);
    return zoo_move(b, x, "Transpose", 4, ZOO_DIMS(B, NH, T, DH), 0);
}

/* One layer on one segment: relative multi-head attention over [memory, h]
 * (Dai et al. 2019, eq. for A^rel: terms (a)+(c) with r_w_bias, (b)+(d) with
 * r_r_bias and the relative shift), then the position-wise feed-forward. */
static int32_t txl_block(zoo_builder *b, const txl_layer *p, int32_t h, int32_t mem, int32_t pos, int32_t mask) {
    int64_t B = zoo_dim(b, h, 0), S = zoo_dim(b, h, 1), M = zoo_dim(b, mem, 1), D = TXL_D;
    int64_t NH = TXL_HEADS, DH = D / NH, K = M + S;
    int32_t cat_in[2] = {mem, h}, qkv[3];
    int32_t cat = zoo_concat(b, cat_in, 2, 1);
    zoo_split(b, zoo_matmul(b, cat, p->wqkv, 0, 0), 3, -1, qkv);
    int32_t q = heads(b, zoo_slice(b, qkv[0], 3, ZOO_DIMS(B, S, D)));
    int32_t k = heads(b, qkv[1]), v = heads(b, qkv[2]);
    int32_t r = zoo_matmul(b, pos, p->wr, 0, 0);
    r = zoo_move(b, zoo_move(b, r, "Reshape", 3, ZOO_DIMS(K, NH, DH), 0), "Transpose", 3, ZOO_DIMS(NH, K, DH), 0);
    int32_t ac = zoo_matmul(b, zoo_add(b, q, p->rw_bias), k, 0, 1);
    int32_t bd = zoo_matmul(b, zoo_add(b, q, p->rr_bias), r, 0, 1);
    bd = zoo_move(b, bd, "Pad", 4, ZOO_DIMS(B, NH, S, K + 1), 0); /* rel_shift: pad, reshape, slice */
    bd = zoo_move(b, bd, "Reshape", 4, ZOO_DIMS(B, NH, K + 1, S), 0);
    bd = zoo_slice(b, bd, 4, ZOO_DIMS(B, NH, S, K));
    int32_t score = zoo_add(b, zoo_unary(b, zoo_add(b, ac, bd), ZU_SCALE), mask);
    int32_t av = zoo_matmul(b, zoo_softmax(b, score), v, 0, 0);
    av = zoo_move(b, zoo_move(b, av, "Transpose", 4, ZOO_DIMS(B, S, NH, DH), 0), "Reshape", 3, ZOO_DIMS(B, S, D), 0);
    int32_t a = zoo_norm(b, zoo_add(b, zoo_matmul(b, av, p->wo, 0, 0), h), p->ln1[0], p->ln1[1], 1);
    int32_t f = zoo_unary(b, zoo_bias(b, zoo_matmul(b, a, p->ff1, 0, 0), p->ff1b), ZU_RELU);
    f = zoo_bias(b, zoo_matmul(b, f, p->ff2, 0, 0), p->ff2b);
    return zoo_norm(b, zoo_add(b, f, a), p->ln2[0], p->ln2[1], 1);
}

gopt_status zoo_transformer_xl(zoo_builder *b, const gopt_zoo_spec *s) {
    int64_t B = s->batch, S = s->seq < TXL_SEGMENT ? s->seq : TXL_SEGMENT, M = S, D = TXL_D, V = TXL_VOCAB;
    int64_t nseg = s->seq / S;
    int L = s->layers;
    txl_layer *p = calloc((size_t)L, sizeof *p);
    int32_t *mem = calloc((size_t)L, sizeof *mem), *losses = ints(b, nseg);
    if (!p || !mem || !losses) {
        zoo_fail(b, GOPT_ENOMEM, "out of memory (transformer_xl, %d layers)", L);
        goto out;
    }
    b->layer = 0;
    int32_t table = ZOO_PARAM(b, "embedding", V, D);
    int32_t pos = zoo_const(b, "pos_emb", 2, ZOO_DIMS(M + S, D));
    int32_t mask = zoo_const(b, "attn_mask", 2, ZOO_DIMS(S, M + S));
    for (int l = 0; l < L; l++) {
        b->layer = l + 1;
        zoo_push(b, "layer_%d", l);
        txl_params(b, &p[l]);
        mem[l] = zoo_input(b, "mems", 3, ZOO_DIMS(B, M, D));
        zoo_pop(b);
    }
    b->layer = L + 1;
    zoo_push(b, "softmax");
    int32_t wout = ZOO_PARAM(b, "kernel", D, V), bout = ZOO_PARAM(b, "bias", V);
    zoo_pop(b);
    for (int64_t g = 0; g < nseg && !zoo_failed(b); g++) {
        zoo_push(b, "segment_%lld", (long long)g);
        b->layer = 0;
        int32_t ids = ZOO_INPUT(b, "input_ids", B, S), labels = ZOO_INPUT(b, "labels", B * S);
        int32_t h = zoo_unary(b, zoo_embed(b, table, ids), ZU_SCALE);
        for (int l = 0; l < L; l++) {
            b->layer = l + 1;
            zoo_push(b, "layer_%d", l);
            int32_t out = txl_block(b, &p[l], h, mem[l], pos, mask);
            mem[l] = zoo_move(b, h, "StopGradient", 0, NULL, 1); /* the next segment's memory */
            h = out;
            zoo_pop(b);
        }
        b->layer = L + 1;
        zoo_push(b, "softmax");
        int32_t logits = zoo_bias(b, zoo_matmul(b, zoo_move(b, h, "Reshape", 2, ZOO_DIMS(B * S, D), 0), wout, 0, 0), bout);
        losses[g] = zoo_xent(b, logits, labels);
        zoo_pop(b);
        zoo_pop(b);
    }
    b->layer = L + 1;
    if (nseg > 1) b->loss = zoo_addn_many(b, losses, (int)nseg);
out:
    free(p);
    free(mem);
    free(losses);
    return b->st;
}

/* ---- WaveNet ------------------------------------------------------------------------ */
/* Gated dilated causal convolutions in cycles of 10 (dilation 1..512),
 * residual and skip 1x1 convolutions, then relu-1x1-relu-1x1 to a 256-way
 * softmax over mu-law samples. Audio is NHWC with H = 1. */
gopt_status zoo_wavenet(zoo_builder *b, const gopt_zoo_spec *s) {
    int64_t B = s->batch, T = s->seq, R = WAVENET_RES;
    int L = s->layers;
    int32_t *skips = ints(b, L);
    if (!skips) return b->st;
    b->layer = 0;
    int32_t x = ZOO_INPUT(b, "audio_onehot", B, 1, T, WAVENET_QUANT), labels = ZOO_INPUT(b, "labels", B * T);
    zoo_push(b, "causal_layer");
    int32_t h = zoo_conv_bias(b, x, 1, 2, R, 1);
    zoo_pop(b);
    for (int l = 0; l < L && !zoo_failed(b); l++) {
        b->layer = l + 1;
        zoo_push(b, "dilated_stack/layer_%d_dilation_%d", l, 1 << (l % WAVENET_CYCLE));
        int32_t fg[2];
        zoo_push(b, "filter_gate");
        zoo_split(b, zoo_conv_bias(b, h, 1, 2, 2 * R, 1), 2, -1, fg);
        zoo_pop(b);
        int32_t a = zoo_mul(b, zoo_unary(b, fg[0], ZU_TANH), zoo_unary(b, fg[1], ZU_SIGMOID));
        zoo_push(b, "skip");
        skips[l] = zoo_conv_bias(b, a, 1, 1, WAVENET_SKIP, 1);
        zoo_pop(b);
        if (l + 1 < L) { /* the last layer's residual output would feed nothing */
            zoo_push(b, "dense");
            h = zoo_add(b, h, zoo_conv_bias(b, a, 1, 1, R, 1));
            zoo_pop(b);
        }
        zoo_pop(b);
    }
    b->layer = L + 1;
    zoo_push(b, "postprocessing");
    int32_t y = zoo_unary(b, zoo_addn_many(b, skips, L), ZU_RELU);
    zoo_push(b, "postprocess1");
    y = zoo_unary(b, zoo_conv_bias(b, y, 1, 1, WAVENET_SKIP, 1), ZU_RELU);
    zoo_pop(b);
    zoo_push(b, "postprocess2");
    y = zoo_conv_bias(b, y, 1, 1, WAVENET_QUANT, 1);
    zoo_pop(b);
    zoo_xent(b, zoo_move(b, y, "Reshape", 2, ZOO_DIMS(B * T, WAVENET_QUANT), 0), labels);
    zoo_pop(b);
    free(skips);
    return b->st;
}
