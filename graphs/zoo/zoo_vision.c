/* zoo_vision.c: the image families: ResNet (v1.5, torchvision layout),
 * Inception-v3 (TF-slim layout, no auxiliary head) and AmoebaNet-A (the
 * evolved NASNet-space cells of Real et al. 2019), as forward descriptions
 * over the zoo layers. Images are NHWC fp32; every convolution is followed
 * by batch norm (gamma and beta are parameters; moving statistics are not
 * trained and are left out).
 * Layer numbering: 0 = stem, then one per residual block / Inception module /
 * AmoebaNet cell, last = the classifier head.
 * Cost: O(blocks) nodes.
 */
#include <stdlib.h>

#include "zoo_internal.h"

enum { CLASSES = 1000 };

/* name: conv + BN + ReLU */
static int32_t cbr(zoo_builder *b, const char *name, int32_t x, int kh, int kw, int64_t k, int stride, int flags) {
    zoo_push(b, "%s", name);
    int32_t y = zoo_conv_bn(b, x, kh, kw, k, stride, flags, 1);
    zoo_pop(b);
    return y;
}

static void classifier(zoo_builder *b, int32_t x, int64_t batch) {
    zoo_push(b, "logits");
    int32_t labels = ZOO_INPUT(b, "labels", batch);
    zoo_softmax_loss(b, zoo_global_pool(b, x), CLASSES, labels);
    zoo_pop(b);
}

/* ---- ResNet ------------------------------------------------------------------------ */
static const struct {
    int depth, blocks[4], bottleneck;
} RESNETS[] = {{18, {2, 2, 2, 2}, 0}, {34, {3, 4, 6, 3}, 0}, {50, {3, 4, 6, 3}, 1}, {101, {3, 4, 23, 3}, 1},
               {152, {3, 8, 36, 3}, 1}};

int zoo_resnet_depth_ok(int depth) {
    for (size_t i = 0; i < sizeof RESNETS / sizeof RESNETS[0]; i++)
        if (RESNETS[i].depth == depth) return 1;
    return 0;
}

gopt_status zoo_resnet(zoo_builder *b, const gopt_zoo_spec *s) {
    size_t cfg = 0;
    while (RESNETS[cfg].depth != s->layers) cfg++; /* validated by gopt_zoo_resolve */
    int64_t B = s->batch;
    b->layer = 0;
    int32_t x = ZOO_INPUT(b, "images", B, s->seq, s->seq, 3);
    x = cbr(b, "conv1", x, 7, 7, 64, 2, 0);
    x = zoo_pool(b, x, 3, 2, ZOO_MAX);
    int block = 0;
    for (int st = 0; st < 4; st++) {
        int64_t w = 64 << st, out = RESNETS[cfg].bottleneck ? 4 * w : w;
        for (int j = 0; j < RESNETS[cfg].blocks[st] && !zoo_failed(b); j++) {
            b->layer = ++block;
            int stride = (st > 0 && j == 0) ? 2 : 1;
            zoo_push(b, "block%d/unit%d", st + 1, j + 1);
            int32_t y;
            if (RESNETS[cfg].bottleneck) {
                y = cbr(b, "conv1", x, 1, 1, w, 1, 0);
                y = cbr(b, "conv2", y, 3, 3, w, stride, 0);
                zoo_push(b, "conv3");
                y = zoo_conv_bn(b, y, 1, 1, out, 1, 0, 0);
            } else {
                y = cbr(b, "conv1", x, 3, 3, w, stride, 0);
                zoo_push(b, "conv2");
                y = zoo_conv_bn(b, y, 3, 3, out, 1, 0, 0);
            }
            zoo_pop(b);
            int32_t shortcut = x;
            if (j == 0 && (stride != 1 || zoo_dim(b, x, -1) != out)) {
                zoo_push(b, "shortcut");
                shortcut = zoo_conv_bn(b, x, 1, 1, out, stride, 0, 0);
                zoo_pop(b);
            }
            x = zoo_unary(b, zoo_add(b, y, shortcut), ZU_RELU);
            zoo_pop(b);
        }
    }
    b->layer = block + 1;
    classifier(b, x, B);
    return b->st;
}

/* ---- Inception-v3 -------------------------------------------------------------------- */
/* 35x35 module: 1x1 | 1x1-5x5 | 1x1-3x3-3x3 | avgpool-1x1 */
static int32_t mixed_5(zoo_builder *b, int32_t x, int64_t pool_proj) {
    int32_t br[4];
    br[0] = cbr(b, "Branch_0/Conv2d_0a_1x1", x, 1, 1, 64, 1, 0);
    br[1] = cbr(b, "Branch_1/Conv2d_0b_5x5", cbr(b, "Branch_1/Conv2d_0a_1x1", x, 1, 1, 48, 1, 0), 5, 5, 64, 1, 0);
    br[2] = cbr(b, "Branch_2/Conv2d_0a_1x1", x, 1, 1, 64, 1, 0);
    br[2] = cbr(b, "Branch_2/Conv2d_0b_3x3", br[2], 3, 3, 96, 1, 0);
    br[2] = cbr(b, "Branch_2/Conv2d_0c_3x3", br[2], 3, 3, 96, 1, 0);
    br[3] = cbr(b, "Branch_3/Conv2d_0b_1x1", zoo_pool(b, x, 3, 1, 0), 1, 1, pool_proj, 1, 0);
    return zoo_concat(b, br, 4, -1);
}

/* 17x17 module with factorized 7x7 convolutions of width c7 */
static int32_t mixed_6(zoo_builder *b, int32_t x, int64_t c7) {
    int32_t br[4];
    br[0] = cbr(b, "Branch_0/Conv2d_0a_1x1", x, 1, 1, 192, 1, 0);
    br[1] = cbr(b, "Branch_1/Conv2d_0a_1x1", x, 1, 1, c7, 1, 0);
    br[1] = cbr(b, "Branch_1/Conv2d_0b_1x7", br[1], 1, 7, c7, 1, 0);
    br[1] = cbr(b, "Branch_1/Conv2d_0c_7x1", br[1], 7, 1, 192, 1, 0);
    br[2] = cbr(b, "Branch_2/Conv2d_0a_1x1", x, 1, 1, c7, 1, 0);
    br[2] = cbr(b, "Branch_2/Conv2d_0b_7x1", br[2], 7, 1, c7, 1, 0);
    br[2] = cbr(b, "Branch_2/Conv2d_0c_1x7", br[2], 1, 7, c7, 1, 0);
    br[2] = cbr(b, "Branch_2/Conv2d_0d_7x1", br[2], 7, 1, c7, 1, 0);
    br[2] = cbr(b, "Branch_2/Conv2d_0e_1x7", br[2], 1, 7, 192, 1, 0);
    br[3] = cbr(b, "Branch_3/Conv2d_0b_1x1", zoo_pool(b, x, 3, 1, 0), 1, 1, 192, 1, 0);
    return zoo_concat(b, br, 4, -1);
}

/* 8x8 module with expanded filter bank outputs */
static int32_t mixed_7(zoo_builder *b, int32_t x) {
    int32_t br[6];
    br[0] = cbr(b, "Branch_0/Conv2d_0a_1x1", x, 1, 1, 320, 1, 0);
    int32_t t = cbr(b, "Branch_1/Conv2d_0a_1x1", x, 1, 1, 384, 1, 0);
    br[1] = cbr(b, "Branch_1/Conv2d_0b_1x3", t, 1, 3, 384, 1, 0);
    br[2] = cbr(b, "Branch_1/Conv2d_0c_3x1", t, 3, 1, 384, 1, 0);
    t = cbr(b, "Branch_2/Conv2d_0b_3x3", cbr(b, "Branch_2/Conv2d_0a_1x1", x, 1, 1, 448, 1, 0), 3, 3, 384, 1, 0);
    br[3] = cbr(b, "Branch_2/Conv2d_0c_1x3", t, 1, 3, 384, 1, 0);
    br[4] = cbr(b, "Branch_2/Conv2d_0d_3x1", t, 3, 1, 384, 1, 0);
    br[5] = cbr(b, "Branch_3/Conv2d_0b_1x1", zoo_pool(b, x, 3, 1, 0), 1, 1, 192, 1, 0);
    return zoo_concat(b, br, 6, -1);
}

gopt_status zoo_inception_v3(zoo_builder *b, const gopt_zoo_spec *s) {
    int64_t B = s->batch;
    b->layer = 0;
    zoo_push(b, "InceptionV3");
    int32_t x = ZOO_INPUT(b, "images", B, s->seq, s->seq, 3);
    x = cbr(b, "Conv2d_1a_3x3", x, 3, 3, 32, 2, ZOO_VALID);
    x = cbr(b, "Conv2d_2a_3x3", x, 3, 3, 32, 1, ZOO_VALID);
    x = cbr(b, "Conv2d_2b_3x3", x, 3, 3, 64, 1, 0);
    x = zoo_pool(b, x, 3, 2, ZOO_MAX | ZOO_VALID);
    x = cbr(b, "Conv2d_3b_1x1", x, 1, 1, 80, 1, ZOO_VALID);
    x = cbr(b, "Conv2d_4a_3x3", x, 3, 3, 192, 1, ZOO_VALID);
    x = zoo_pool(b, x, 3, 2, ZOO_MAX | ZOO_VALID);
    static const int64_t PROJ[3] = {32, 64, 64}, C7[4] = {128, 160, 160, 192};
    int layer = 0;
    for (int i = 0; i < 3; i++) {
        b->layer = ++layer;
        zoo_push(b, "Mixed_5%c", 'b' + i);
        x = mixed_5(b, x, PROJ[i]);
        zoo_pop(b);
    }
    b->layer = ++layer;
    zoo_push(b, "Mixed_6a");
    {
        int32_t br[3];
        br[0] = cbr(b, "Branch_0/Conv2d_1a_1x1", x, 3, 3, 384, 2, ZOO_VALID);
        br[1] = cbr(b, "Branch_1/Conv2d_0a_1x1", x, 1, 1, 64, 1, 0);
        br[1] = cbr(b, "Branch_1/Conv2d_0b_3x3", br[1], 3, 3, 96, 1, 0);
        br[1] = cbr(b, "Branch_1/Conv2d_1a_1x1", br[1], 3, 3, 96, 2, ZOO_VALID);
        br[2] = zoo_pool(b, x, 3, 2, ZOO_MAX | ZOO_VALID);
        x = zoo_concat(b, br, 3, -1);
    }
    zoo_pop(b);
    for (int i = 0; i < 4; i++) {
        b->layer = ++layer;
        zoo_push(b, "Mixed_6%c", 'b' + i);
        x = mixed_6(b, x, C7[i]);
        zoo_pop(b);
    }
    b->layer = ++layer;
    zoo_push(b, "Mixed_7a");
    {
        int32_t br[3];
        br[0] = cbr(b, "Branch_0/Conv2d_1a_3x3", cbr(b, "Branch_0/Conv2d_0a_1x1", x, 1, 1, 192, 1, 0), 3, 3, 320, 2,
                    ZOO_VALID);
        br[1] = cbr(b, "Branch_1/Conv2d_0a_1x1", x, 1, 1, 192, 1, 0);
        br[1] = cbr(b, "Branch_1/Conv2d_0b_1x7", br[1], 1, 7, 192, 1, 0);
        br[1] = cbr(b, "Branch_1/Conv2d_0c_7x1", br[1], 7, 1, 192, 1, 0);
        br[1] = cbr(b, "Branch_1/Conv2d_1a_3x3", br[1], 3, 3, 192, 2, ZOO_VALID);
        br[2] = zoo_pool(b, x, 3, 2, ZOO_MAX | ZOO_VALID);
        x = zoo_concat(b, br, 3, -1);
    }
    zoo_pop(b);
    for (int i = 0; i < 2; i++) {
        b->layer = ++layer;
        zoo_push(b, "Mixed_7%c", 'b' + i);
        x = mixed_7(b, x);
        zoo_pop(b);
    }
    b->layer = ++layer;
    classifier(b, x, B);
    zoo_pop(b);
    return b->st;
}

/* ---- NAS cells (AmoebaNet-A here, random genotypes in zoo_synth.c) ------------------- */
/* The AmoebaNet-A genotype: pairs of ops, each pair summed into a new state. */
static const zoo_cell_op AM_NORMAL_OPS[10] = {
    {0, ZOO_CELL_AVG3}, {0, ZOO_CELL_MAX3}, {1, ZOO_CELL_SEP3}, {1, ZOO_CELL_IDENTITY}, {0, ZOO_CELL_IDENTITY},
    {1, ZOO_CELL_AVG3}, {0, ZOO_CELL_SEP3}, {2, ZOO_CELL_SEP5}, {5, ZOO_CELL_AVG3},     {0, ZOO_CELL_SEP3}};
static const int AM_NORMAL_CONCAT[] = {1, 3, 4, 6};
static const zoo_cell_op AM_REDUCE_OPS[10] = {
    {1, ZOO_CELL_SEP3}, {0, ZOO_CELL_AVG3}, {0, ZOO_CELL_MAX3}, {2, ZOO_CELL_SEP7},   {1, ZOO_CELL_MAX3},
    {0, ZOO_CELL_MAX3}, {4, ZOO_CELL_SEP3}, {0, ZOO_CELL_CONV17}, {1, ZOO_CELL_AVG3}, {0, ZOO_CELL_SEP7}};
static const int AM_REDUCE_CONCAT[] = {2, 3, 4, 5, 6};
static const zoo_cell_genotype AM_NORMAL = {5, AM_NORMAL_OPS, AM_NORMAL_CONCAT, 4};
static const zoo_cell_genotype AM_REDUCE = {5, AM_REDUCE_OPS, AM_REDUCE_CONCAT, 5};

static int32_t cell_apply(zoo_builder *b, int32_t x, zoo_cell_opk op, int64_t f, int stride) {
    switch (op) {
    case ZOO_CELL_SEP3: return zoo_sep_conv(b, x, 3, f, stride, 2);
    case ZOO_CELL_SEP5: return zoo_sep_conv(b, x, 5, f, stride, 2);
    case ZOO_CELL_SEP7: return zoo_sep_conv(b, x, 7, f, stride, 2);
    case ZOO_CELL_AVG3: return zoo_pool(b, x, 3, stride, 0);
    case ZOO_CELL_MAX3: return zoo_pool(b, x, 3, stride, ZOO_MAX);
    case ZOO_CELL_IDENTITY:
        if (stride == 1) return x;
        zoo_push(b, "reduce_identity");
        x = zoo_conv_bn(b, zoo_unary(b, x, ZU_RELU), 1, 1, f, stride, 0, 0);
        zoo_pop(b);
        return x;
    case ZOO_CELL_CONV17:
        zoo_push(b, "conv_1x7_7x1");
        x = zoo_conv_bn(b, zoo_unary(b, x, ZU_RELU), 1, 7, f, stride, 0, 1);
        x = zoo_conv_bn(b, x, 7, 1, f, 1, 0, 0);
        zoo_pop(b);
        return x;
    case ZOO_CELL_CONV3:
    case ZOO_CELL_CONV1:
        zoo_push(b, "conv_%dx%d", op == ZOO_CELL_CONV3 ? 3 : 1, op == ZOO_CELL_CONV3 ? 3 : 1);
        x = zoo_conv_bn(b, zoo_unary(b, x, ZU_RELU), op == ZOO_CELL_CONV3 ? 3 : 1, op == ZOO_CELL_CONV3 ? 3 : 1, f,
                        stride, 0, 0);
        zoo_pop(b);
        return x;
    case ZOO_CELL_OP_COUNT: break;
    }
    return zoo_fail(b, GOPT_EINTERNAL, "%s: cell op %d", b->scope, (int)op), -1;
}

/* relu -> 1x1 conv -> BN, or NASNet's factorized reduction (two strided
 * 1x1 paths, concatenated) when s0 has twice s1's resolution. */
static int32_t cell_prep(zoo_builder *b, const char *name, int32_t x, int64_t f, int halve) {
    zoo_push(b, "%s", name);
    x = zoo_unary(b, x, ZU_RELU);
    if (!halve) {
        x = zoo_conv_bn(b, x, 1, 1, f, 1, 0, 0);
    } else {
        int32_t path[2];
        for (int p = 0; p < 2; p++) {
            zoo_push(b, "path%d", p + 1);
            int32_t w = ZOO_PARAM(b, "weights", 1, 1, zoo_dim(b, x, -1), p ? f - f / 2 : f / 2);
            path[p] = zoo_conv(b, zoo_pool(b, x, 1, 2, ZOO_VALID), w, 1, 0);
            zoo_pop(b);
        }
        int32_t y = zoo_concat(b, path, 2, -1);
        x = zoo_norm(b, y, ZOO_PARAM(b, "bn/gamma", f), ZOO_PARAM(b, "bn/beta", f), 0);
    }
    zoo_pop(b);
    return x;
}

int32_t zoo_nas_cell(zoo_builder *b, int32_t s0, int32_t s1, int64_t f, int reduction, const zoo_cell_genotype *g) {
    if (zoo_failed(b)) return -1;
    int32_t st[2 + ZOO_CELL_MAX_STEPS], parts[2 + ZOO_CELL_MAX_STEPS];
    st[0] = cell_prep(b, "prev_1x1", s0, f, zoo_dim(b, s0, 1) > zoo_dim(b, s1, 1));
    st[1] = cell_prep(b, "beginning_1x1", s1, f, 0);
    for (int i = 0; i < g->nsteps; i++) {
        int32_t y[2];
        for (int k = 0; k < 2; k++) {
            const zoo_cell_op *o = &g->ops[2 * i + k];
            zoo_push(b, "comb_iter_%d/%s", i, k ? "right" : "left");
            y[k] = cell_apply(b, st[o->input], (zoo_cell_opk)o->op, f, reduction && o->input < 2 ? 2 : 1);
            zoo_pop(b);
        }
        zoo_push(b, "comb_iter_%d", i);
        st[2 + i] = zoo_add(b, y[0], y[1]);
        zoo_pop(b);
    }
    for (int i = 0; i < g->nconcat; i++) parts[i] = st[g->concat[i]];
    return zoo_concat(b, parts, g->nconcat, -1);
}

gopt_status zoo_amoebanet(zoo_builder *b, const gopt_zoo_spec *s) {
    enum { FILTERS = 190 };
    int64_t B = s->batch, F = FILTERS;
    b->layer = 0;
    int32_t x = ZOO_INPUT(b, "images", B, s->seq, s->seq, 3);
    zoo_push(b, "conv0");
    x = zoo_conv_bn(b, x, 3, 3, 32, 2, ZOO_VALID, 0);
    zoo_pop(b);
    int cell = 0;
    int32_t prev = x, cur;
    b->layer = ++cell;
    zoo_push(b, "cell_stem_0");
    cur = zoo_nas_cell(b, x, x, F / 4, 1, &AM_REDUCE);
    zoo_pop(b);
    b->layer = ++cell;
    zoo_push(b, "cell_stem_1");
    int32_t next = zoo_nas_cell(b, prev, cur, F / 2, 1, &AM_REDUCE);
    zoo_pop(b);
    prev = cur;
    cur = next;
    for (int stack = 0; stack < 3 && !zoo_failed(b); stack++) {
        int64_t f = F << stack;
        for (int i = -1; i < s->layers; i++) {
            if (i < 0 && stack == 0) continue; /* reduction cells sit between stacks */
            b->layer = ++cell;
            zoo_push(b, i < 0 ? "reduction_cell_%d" : "cell_%d", i < 0 ? stack - 1 : stack * s->layers + i);
            next = zoo_nas_cell(b, prev, cur, f, i < 0, i < 0 ? &AM_REDUCE : &AM_NORMAL);
            zoo_pop(b);
            prev = cur;
            cur = next;
        }
    }
    b->layer = ++cell;
    classifier(b, zoo_unary(b, cur, ZU_RELU), B);
    return b->st;
}
