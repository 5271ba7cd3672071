/* zoo_synth.c: random training-step graphs for pre-training.
 *
 * Four structure kinds, each a random forward description over the same zoo
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

static const char *const KIND_NAMES[GOPT_SYNTH_KIND_COUNT] = {"layered", "cells", "chain", "grid"};
/* forward share of all nodes, per kind (measured; docs/zoo.md) */
static const double FWD_SHARE[GOPT_SYNTH_KIND_COUNT] = {0.45, 0.42, 0.44, 0.41};

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

gopt_status gopt_zoo_synthetic(gopt_rng *rng, const gopt_synth_opts *opts, const char *name, gopt_graph **out,
                               gopt_error *err) {
    *out = NULL;
    int lo = opts && opts->min_nodes ? opts->min_nodes : 200, hi = opts && opts->max_nodes ? opts->max_nodes : 20000;
    if (lo < 50 || hi < lo || hi > GOPT_ZOO_MAX_NODES)
        return gopt_error_set(err, GOPT_EINVAL, "synthetic: node range [%d, %d] is not valid", lo, hi);
    gopt_synth_kind kind = opts ? opts->kind : GOPT_SYNTH_ANY;
    if (kind < GOPT_SYNTH_ANY || kind >= GOPT_SYNTH_KIND_COUNT)
        return gopt_error_set(err, GOPT_EINVAL, "synthetic: kind %d is not valid", (int)kind);
    if (kind == GOPT_SYNTH_ANY) kind = (gopt_synth_kind)gopt_rng_below(rng, GOPT_SYNTH_KIND_COUNT);
    double target = opts && opts->target_nodes ? opts->target_nodes : 2000.0 * exp(0.8 * gopt_rng_normal(rng));
    if (target < lo) target = lo;
    if (target > hi) target = hi;
    gopt_optimizer optim = (gopt_optimizer)(GOPT_OPTIM_SGD + gopt_rng_below(rng, 3));
    static void (*const BUILD[GOPT_SYNTH_KIND_COUNT])(synth *) = {synth_layered, synth_cells, synth_chain, synth_grid};
    /* Build; when the size misses the target by more than 15%, rebuild from the
     * same RNG state with a rescaled budget (same structure, shorter or longer). */
    gopt_rng start = *rng;
    double budget = target * FWD_SHARE[kind];
    for (int attempt = 0;; attempt++) {
        *rng = start;
        zoo_builder b;
        gopt_status st = zoo_begin(&b, name, KIND_NAMES[kind], optim, err);
        if (st != GOPT_OK) return st;
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
