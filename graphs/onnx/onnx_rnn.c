/* onnx_rnn.c: ONNX LSTM and GRU, unrolled over time into the zoo's
 * primitive ops, as TensorFlow's static_rnn graphs and the zoo's recurrent
 * families are: per direction and time step a slice of the input, the two
 * matmuls (input and recurrent weights, shared across steps so their
 * gradients are summed by one AddN), the biases, the gate split and
 * nonlinearities and the cell update. Y, Y_h and Y_c are concatenations of
 * the steps' states.
 *
 * LSTM gates are ONNX's i, o, f, c with the default activations (sigmoid,
 * tanh, tanh); GRU is computed with the reset gate applied after the
 * recurrent matmul (linear_before_reset = 1), which has the same FLOPs as the
 * default form. Peepholes, custom activations and clip are refused.
 * sequence_lens is ignored: every sequence runs the full length.
 * Cost: O(directions x steps) nodes, about 20 per step.
 */
#include <stdlib.h>
#include <string.h>

#include "onnx_internal.h"

/* Per-direction 2-D views of a (D, rows, cols) weight: Squeeze, or Split + Squeeze. */
static void per_dir(zoo_builder *b, int32_t w, int dirs, int rank, const int64_t *d, int32_t *out) {
    if (dirs == 1) {
        out[0] = zoo_move(b, w, "Squeeze", rank, d, 0);
        return;
    }
    int32_t parts[2];
    zoo_split(b, w, 2, 0, parts);
    for (int k = 0; k < 2; k++) out[k] = zoo_move(b, parts[k], "Squeeze", rank, d, 0);
}

static int32_t stack_states(zoo_builder *b, const int32_t *hs, int n, int axis, int rank, const int64_t *one) {
    int32_t *e = malloc(sizeof *e * (size_t)n);
    if (!e) return zoo_fail(b, GOPT_ENOMEM, "out of memory unrolling %d steps", n), -1;
    for (int t = 0; t < n; t++) e[t] = zoo_move(b, hs[t], "ExpandDims", rank, one, 0);
    int32_t y = zoo_concat_many(b, e, n, axis);
    free(e);
    return y;
}

static gopt_status set_result(onnx_node *c, int j, int32_t t) {
    if (j >= c->nout || !c->out[j]) return GOPT_OK;
    zoo_builder *b = &c->x->b;
    if (t < 0) return b->st != GOPT_OK ? b->st : onnx_node_fail(c, "output %d was not built", j);
    gopt_status st = onnx_value_set_shape(c->x, c, c->out[j], c->in[0]->elem, b->t[t].rank, b->t[t].d);
    c->out[j]->t = t;
    c->out[j]->defined = 1;
    return st;
}

static gopt_status rnn(onnx_node *c, int lstm) {
    onnx_ctx *x = c->x;
    zoo_builder *b = &x->b;
    int G = lstm ? 4 : 3;
    for (int i = 0; i < 3; i++)
        if (i >= c->nin || !c->in[i]) return onnx_node_fail(c, "input %d is missing", i);
    if (c->nin > 7 && c->in[7]) return onnx_node_fail(c, "peephole weights (input P) are not supported");
    if (onnx_attr(c, "activations") || onnx_attr(c, "clip"))
        return onnx_node_fail(c, "custom activations and clip are not supported");
    const onnx_value *X = c->in[0], *W = c->in[1], *R = c->in[2];
    char dirbuf[16];
    const char *dir = onnx_attr_str(c, "direction", "forward", dirbuf, sizeof dirbuf);
    int dirs = !strcmp(dir, "bidirectional") ? 2 : 1, reverse = !strcmp(dir, "reverse");
    int layout = onnx_attr_int(c, "layout", 0) != 0;
    if (X->rank != 3 || W->rank != 3 || R->rank != 3) return onnx_node_fail(c, "X, W and R must have rank 3");
    int64_t T = X->d[layout ? 1 : 0], B = X->d[layout ? 0 : 1], I = X->d[2], H = R->d[2];
    if (W->d[0] != dirs || R->d[0] != dirs || W->d[1] != G * H || R->d[1] != G * H || W->d[2] != I)
        return onnx_node_fail(c, "weights W %lldx%lldx%lld and R %lldx%lldx%lld do not fit input size %lld, hidden %lld",
                              (long long)W->d[0], (long long)W->d[1], (long long)W->d[2], (long long)R->d[0],
                              (long long)R->d[1], (long long)R->d[2], (long long)I, (long long)H);
    const onnx_value *Bv = c->nin > 3 ? c->in[3] : NULL;
    if (Bv && (Bv->rank != 2 || Bv->d[0] != dirs || Bv->d[1] != 2 * G * H))
        return onnx_node_fail(c, "bias B must be %dx%lld", dirs, (long long)(2 * G * H));
    if (T < 1 || T > 100000) return onnx_node_fail(c, "%lld time steps (1 to 100000 are unrolled)", (long long)T);
    const onnx_value *H0 = c->nin > 5 ? c->in[5] : NULL, *C0 = c->nin > 6 && lstm ? c->in[6] : NULL;
    int32_t xt = onnx_tensor(x, c->in[0]), wt = onnx_tensor(x, c->in[1]), rt = onnx_tensor(x, c->in[2]);
    int32_t bt = Bv ? onnx_tensor(x, c->in[3]) : -1;
    int32_t h0 = H0 ? onnx_tensor(x, c->in[5]) : -1, c0 = C0 ? onnx_tensor(x, c->in[6]) : -1;
    if (b->st != GOPT_OK) return b->st;
    int32_t *xs = calloc((size_t)T, sizeof *xs), *hs = calloc((size_t)(T * dirs), sizeof *hs);
    if (!xs || !hs) {
        free(xs);
        free(hs);
        return onnx_fail(x, GOPT_ENOMEM, "out of memory unrolling %lld steps", (long long)T);
    }
    zoo_push(b, "%.120s", c->name);
    int32_t wd[2], rd[2], bd[2] = {-1, -1}, hlast[2], clast[2];
    per_dir(b, wt, dirs, 2, ZOO_DIMS(G * H, I), wd);
    per_dir(b, rt, dirs, 2, ZOO_DIMS(G * H, H), rd);
    if (bt >= 0) per_dir(b, bt, dirs, 1, ZOO_DIMS(2 * G * H), bd);
    zoo_push(b, "unstack");
    for (int64_t t = 0; t < T; t++) xs[t] = zoo_slice(b, xt, 2, ZOO_DIMS(B, I));
    zoo_pop(b);
    for (int k = 0; k < dirs && !zoo_failed(b); k++) {
        zoo_push(b, k ? "bw" : "fw");
        int32_t wb[2] = {-1, -1};
        if (bd[k] >= 0) zoo_split(b, bd[k], 2, 0, wb);
        int32_t h = h0 >= 0 ? zoo_slice(b, h0, 2, ZOO_DIMS(B, H)) : zoo_const(b, "zero_h", 2, ZOO_DIMS(B, H));
        int32_t cs = -1;
        if (lstm) cs = c0 >= 0 ? zoo_slice(b, c0, 2, ZOO_DIMS(B, H)) : zoo_const(b, "zero_c", 2, ZOO_DIMS(B, H));
        for (int64_t s = 0; s < T && !zoo_failed(b); s++) {
            int64_t t = (reverse || k == 1) ? T - 1 - s : s;
            zoo_push(b, "t%lld", (long long)t);
            int32_t gx = zoo_matmul(b, xs[t], wd[k], 0, 1), gh = zoo_matmul(b, h, rd[k], 0, 1);
            if (wb[0] >= 0) {
                gx = zoo_bias(b, gx, wb[0]);
                gh = zoo_bias(b, gh, wb[1]);
            }
            if (lstm) { /* gates i, o, f, c */
                int32_t g[4];
                zoo_split(b, zoo_add(b, gx, gh), 4, 1, g);
                int32_t i = zoo_unary(b, g[0], ZU_SIGMOID), o = zoo_unary(b, g[1], ZU_SIGMOID);
                int32_t f = zoo_unary(b, g[2], ZU_SIGMOID), cc = zoo_unary(b, g[3], ZU_TANH);
                cs = zoo_add(b, zoo_mul(b, cs, f), zoo_mul(b, i, cc));
                h = zoo_mul(b, zoo_unary(b, cs, ZU_TANH), o);
            } else { /* gates z, r, h */
                int32_t a[3], r3[3];
                zoo_split(b, gx, 3, 1, a);
                zoo_split(b, gh, 3, 1, r3);
                int32_t z = zoo_unary(b, zoo_add(b, a[0], r3[0]), ZU_SIGMOID);
                int32_t r = zoo_unary(b, zoo_add(b, a[1], r3[1]), ZU_SIGMOID);
                int32_t hh = zoo_unary(b, zoo_add(b, a[2], zoo_mul(b, r, r3[2])), ZU_TANH);
                /* h' = (1 - z) hh + z h = hh + z (h - hh); -hh is a Mul by -1 */
                h = zoo_add(b, hh, zoo_mul(b, z, zoo_add(b, h, zoo_unary(b, hh, ZU_SCALE))));
            }
            hs[k * T + t] = h;
            zoo_pop(b);
        }
        hlast[k] = h;
        clast[k] = cs;
        zoo_pop(b);
    }
    int32_t y = -1, yh = -1, yc = -1;
    if (c->nout > 0 && c->out[0] && !zoo_failed(b)) {
        int32_t per[2];
        for (int k = 0; k < dirs; k++)
            per[k] = layout ? stack_states(b, hs + k * T, (int)T, 1, 4, ZOO_DIMS(B, 1, 1, H))
                            : stack_states(b, hs + k * T, (int)T, 0, 4, ZOO_DIMS(1, 1, B, H));
        y = dirs == 1 ? per[0] : zoo_concat(b, per, 2, layout ? 2 : 1);
    }
    const int64_t *one = layout ? ZOO_DIMS(B, 1, H) : ZOO_DIMS(1, B, H);
    if (c->nout > 1 && c->out[1] && !zoo_failed(b)) yh = stack_states(b, hlast, dirs, layout ? 1 : 0, 3, one);
    if (lstm && c->nout > 2 && c->out[2] && !zoo_failed(b)) yc = stack_states(b, clast, dirs, layout ? 1 : 0, 3, one);
    zoo_pop(b);
    free(xs);
    free(hs);
    gopt_status st = b->st;
    if (st == GOPT_OK) st = set_result(c, 0, y);
    if (st == GOPT_OK) st = set_result(c, 1, yh);
    if (st == GOPT_OK && lstm) st = set_result(c, 2, yc);
    return st;
}

gopt_status onnx_run_lstm(onnx_node *c) { return rnn(c, 1); }
gopt_status onnx_run_gru(onnx_node *c) { return rnn(c, 0); }
