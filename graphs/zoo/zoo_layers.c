/* zoo_layers.c: composite layers (dense, conv+BN+ReLU, separable conv,
 * layer norm, LSTM step, embedding, softmax loss) built from the primitive
 * ops, shared by the model families and the synthetic generator so that a
 * family is a short description. Each layer creates its parameters under
 * the caller's current name scope.
 */
#include "zoo_internal.h"

int32_t zoo_dense(zoo_builder *b, int32_t x, int64_t units, int bias) {
    if (zoo_failed(b)) return -1;
    int32_t w = ZOO_PARAM(b, "kernel", zoo_dim(b, x, -1), units);
    int32_t y = zoo_matmul(b, x, w, 0, 0);
    if (bias) y = zoo_bias(b, y, ZOO_PARAM(b, "bias", units));
    return y;
}

int32_t zoo_conv_bn(zoo_builder *b, int32_t x, int kh, int kw, int64_t k, int stride, int flags, int relu) {
    if (zoo_failed(b)) return -1;
    int32_t w = ZOO_PARAM(b, "weights", kh, kw, zoo_dim(b, x, -1), k);
    int32_t y = zoo_conv(b, x, w, stride, flags);
    int32_t gamma = ZOO_PARAM(b, "BatchNorm/gamma", k), beta = ZOO_PARAM(b, "BatchNorm/beta", k);
    y = zoo_norm(b, y, gamma, beta, 0);
    return relu ? zoo_unary(b, y, ZU_RELU) : y;
}

int32_t zoo_sep_conv(zoo_builder *b, int32_t x, int k, int64_t c, int stride, int reps) {
    for (int r = 0; r < reps && !zoo_failed(b); r++) {
        zoo_push(b, "separable_%dx%d_%d", k, k, r + 1);
        x = zoo_unary(b, x, ZU_RELU);
        int32_t dw = ZOO_PARAM(b, "depthwise_weights", k, k, zoo_dim(b, x, -1), 1);
        x = zoo_conv(b, x, dw, r == 0 ? stride : 1, ZOO_DEPTHWISE);
        int32_t pw = ZOO_PARAM(b, "pointwise_weights", 1, 1, zoo_dim(b, x, -1), c);
        x = zoo_conv(b, x, pw, 1, 0);
        x = zoo_norm(b, x, ZOO_PARAM(b, "bn/gamma", c), ZOO_PARAM(b, "bn/beta", c), 0);
        zoo_pop(b);
    }
    return x;
}

int32_t zoo_layer_norm(zoo_builder *b, int32_t x) {
    if (zoo_failed(b)) return -1;
    int64_t d = zoo_dim(b, x, -1);
    zoo_push(b, "LayerNorm");
    int32_t y = zoo_norm(b, x, ZOO_PARAM(b, "gamma", d), ZOO_PARAM(b, "beta", d), 1);
    zoo_pop(b);
    return y;
}

void zoo_lstm_init(zoo_builder *b, zoo_lstm *l, int64_t in, int64_t hidden) {
    l->hidden = hidden;
    l->w = ZOO_PARAM(b, "lstm_cell/kernel", in + hidden, 4 * hidden);
    l->bias = ZOO_PARAM(b, "lstm_cell/bias", 4 * hidden);
}

/* TensorFlow's LSTMCell: gates = [x, h] W + b; i, j, f, o = split(gates);
 * c' = c * sigmoid(f) + sigmoid(i) * tanh(j); h' = tanh(c') * sigmoid(o). */
void zoo_lstm_step(zoo_builder *b, const zoo_lstm *l, int32_t x, int32_t *h, int32_t *c) {
    if (zoo_failed(b)) return;
    int64_t batch = zoo_dim(b, x, 0);
    if (*h < 0) *h = zoo_const(b, "zero_h", 2, ZOO_DIMS(batch, l->hidden));
    if (*c < 0) *c = zoo_const(b, "zero_c", 2, ZOO_DIMS(batch, l->hidden));
    int32_t xh[2] = {x, *h}, g[4];
    int32_t gates = zoo_bias(b, zoo_matmul(b, zoo_concat(b, xh, 2, 1), l->w, 0, 0), l->bias);
    zoo_split(b, gates, 4, 1, g);
    int32_t i = zoo_unary(b, g[0], ZU_SIGMOID), j = zoo_unary(b, g[1], ZU_TANH);
    int32_t f = zoo_unary(b, g[2], ZU_SIGMOID), o = zoo_unary(b, g[3], ZU_SIGMOID);
    *c = zoo_add(b, zoo_mul(b, *c, f), zoo_mul(b, i, j));
    *h = zoo_mul(b, zoo_unary(b, *c, ZU_TANH), o);
}

int32_t zoo_embed(zoo_builder *b, int32_t table, int32_t ids) { return zoo_gather(b, table, ids, 0); }

int32_t zoo_softmax_loss(zoo_builder *b, int32_t x, int64_t vocab, int32_t labels) {
    zoo_push(b, "softmax");
    int32_t logits = zoo_dense(b, x, vocab, 1);
    int32_t loss = zoo_xent(b, logits, labels);
    zoo_pop(b);
    return loss;
}

/* Concatenate many tensors (ConcatV2 takes at most 255 inputs here): groups
 * of up to 128, then the groups. */
int32_t zoo_concat_many(zoo_builder *b, const int32_t *xs, int n, int axis) {
    if (n <= 128) return zoo_concat(b, xs, n, axis);
    int32_t parts[256];
    int np = 0;
    for (int i = 0; i < n && np < 256; i += 128) parts[np++] = zoo_concat(b, xs + i, n - i < 128 ? n - i : 128, axis);
    return zoo_concat_many(b, parts, np, axis);
}

/* AddN of many tensors, grouped the same way. */
int32_t zoo_addn_many(zoo_builder *b, const int32_t *xs, int n) {
    if (n <= 128) return zoo_addn(b, xs, n);
    int32_t parts[256];
    int np = 0;
    for (int i = 0; i < n && np < 256; i += 128) parts[np++] = zoo_addn(b, xs + i, n - i < 128 ? n - i : 128);
    return zoo_addn_many(b, parts, np);
}

/* conv + bias (WaveNet and the synthetic generator). */
int32_t zoo_conv_bias(zoo_builder *b, int32_t x, int kh, int kw, int64_t k, int stride) {
    if (zoo_failed(b)) return -1;
    int32_t w = ZOO_PARAM(b, "weights", kh, kw, zoo_dim(b, x, -1), k);
    return zoo_bias(b, zoo_conv(b, x, w, stride, 0), ZOO_PARAM(b, "biases", k));
}
