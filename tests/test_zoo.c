/* test_zoo.c: the graph zoo: every family builds a valid training step whose
 * FLOPs and parameter bytes match closed-form values computed here from the
 * architectures (not from the generator's code), synthetic graphs are
 * reproducible and inside their size range, bad specs are refused, and the
 * shipped PyTorch exports load with their documented counts.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gopt_zoo.h"

/* ---- helpers ------------------------------------------------------------------ */
typedef struct {
    double flops[GOPT_PHASE_COUNT][GOPT_OP_CLASS_COUNT];
    double param_bytes, weight_bytes;
    int32_t nodes, updates, params;
} tally;

static gopt_graph *gen(const char *family, int layers, int batch, int seq, gopt_optimizer optim) {
    gopt_zoo_spec s = {.family = family, .layers = layers, .batch = batch, .seq = seq, .optimizer = optim};
    gopt_graph *g = NULL;
    gopt_error err = {0};
    gopt_status st = gopt_zoo_generate(&s, &g, &err);
    if (st != GOPT_OK) fail_msg("%s: %s", family, err.msg);
    assert_non_null(gopt_graph_frozen(g));
    return g;
}

/* Structural checks every generated graph must pass; returns the tally. */
static tally check_graph(const gopt_graph *g, double state_mult) {
    tally t;
    memset(&t, 0, sizeof t);
    const gopt_frozen *f = gopt_graph_frozen(g);
    t.nodes = f->n;
    for (int32_t v = 0; v < f->n; v++) {
        gopt_node_attrs a;
        gopt_graph_node(g, v, &a);
        assert_true(a.phase != GOPT_PHASE_NONE);
        assert_true(a.layer >= 0);
        t.flops[a.phase][a.cls] += a.flops;
        if (a.cls == GOPT_OP_CLASS_PARAM) {
            t.params++;
            t.param_bytes += a.param_bytes;
            t.weight_bytes += a.out_bytes;
            assert_true(fabs(a.param_bytes - state_mult * a.out_bytes) < 1e-6 * a.param_bytes + 1e-9);
            assert_string_equal(a.colocate, a.name);
            /* exactly one update op, in its colocation group, reading it */
            int updates = 0;
            for (int32_t k = f->out_ptr[v]; k < f->out_ptr[v + 1]; k++) {
                int32_t w = f->out_dst[k];
                if (f->phase[w] == GOPT_PHASE_OPT) {
                    updates++;
                    assert_int_equal(f->coloc[w], f->coloc[v]);
                }
            }
            assert_int_equal(updates, 1);
        } else {
            assert_true(a.param_bytes == 0);
        }
        if (a.phase == GOPT_PHASE_OPT) {
            t.updates++;
            assert_true(a.colocate[0] != '\0');
            assert_true(gopt_graph_find(g, a.colocate) >= 0);
        }
    }
    assert_int_equal(t.updates, t.params);
    for (int32_t e = 0; e < f->m; e++) {
        assert_true(f->edge_bytes[e] > 0);
        assert_true(f->edge_bytes[e] <= f->out_bytes[f->edge_src[e]] * (1 + 1e-12));
    }
    return t;
}

static double fwd_dense(const tally *t) {
    return t->flops[GOPT_PHASE_FWD][GOPT_OP_CLASS_GEMM] + t->flops[GOPT_PHASE_FWD][GOPT_OP_CLASS_CONV];
}
static double bwd_dense(const tally *t) {
    return t->flops[GOPT_PHASE_BWD][GOPT_OP_CLASS_GEMM] + t->flops[GOPT_PHASE_BWD][GOPT_OP_CLASS_CONV];
}

static void assert_close(double got, double want, double rel, const char *what) {
    if (fabs(got - want) > rel * fabs(want)) fail_msg("%s: got %.10g, want %.10g (rel tol %g)", what, got, want, rel);
}

/* ---- ResNet-50: closed form from the architecture table ------------------------------ */
static void test_resnet50(void **state) {
    (void)state;
    const int B = 2;
    gopt_graph *g = gen("resnet", 50, B, 224, GOPT_OPTIM_MOMENTUM);
    tally t = check_graph(g, 2);
    /* multiply-adds per image: conv1, 16 bottlenecks (stride on the 3x3, v1.5), fc */
    double macs = 112.0 * 112 * 64 * 7 * 7 * 3, conv1 = macs;
    const int blocks[4] = {3, 4, 6, 3};
    double in = 64, params = 7 * 7 * 3 * 64 + 2 * 64;
    for (int s = 0; s < 4; s++) {
        double w = 64 << s, side = 56 >> s;
        for (int j = 0; j < blocks[s]; j++) {
            double in_side = (s > 0 && j == 0) ? 2 * side : side;
            macs += in_side * in_side * in * w + side * side * 9 * w * w + side * side * w * 4 * w;
            params += in * w + 9 * w * w + w * 4 * w + 2 * (w + w + 4 * w);
            if (j == 0) {
                macs += side * side * in * 4 * w;
                params += in * 4 * w + 2 * 4 * w;
            }
            in = 4 * w;
        }
    }
    macs += 2048.0 * 1000;
    params += 2048.0 * 1000 + 1000;
    assert_close(params, 25557032, 0, "resnet50 parameter count (torchvision)");
    assert_close(2 * macs, 8.18e9, 0.01, "resnet50 GFLOP per image (about 8.2)");
    assert_close(fwd_dense(&t), B * 2 * macs, 1e-12, "resnet50 forward conv+gemm flops");
    /* backward: input and weight gradients of every conv/matmul, except the input gradient of conv1 */
    assert_close(bwd_dense(&t), B * (4 * macs - 2 * conv1), 1e-12, "resnet50 backward conv+gemm flops");
    assert_close(t.param_bytes, params * 4 * 2, 0, "resnet50 param_bytes (momentum: 2x)");
    gopt_graph_free(g);
}

/* ---- Inception-v3: the published count ------------------------------------------------ */
static void test_inception_v3(void **state) {
    (void)state;
    gopt_graph *g = gen("inception_v3", 0, 1, 299, GOPT_OPTIM_ADAM);
    tally t = check_graph(g, 3);
    /* torchvision's inception_v3 without the auxiliary head: 23,834,568 weights, 5.71 G multiply-adds */
    assert_close(t.weight_bytes, 23834568.0 * 4, 0, "inception_v3 weights");
    assert_close(fwd_dense(&t), 2 * 5.71e9, 0.02, "inception_v3 forward flops per image");
    gopt_graph_free(g);
}

/* ---- LSTM families: gemm FLOPs in closed form -------------------------------------------- */
static double lstm_macs(double b, double in, double h) { return b * (in + h) * 4 * h; }

static void test_rnnlm(void **state) {
    (void)state;
    const double B = 8, T = 5, H = 2048, V = 10000;
    for (int L = 2; L <= 4; L += 2) {
        gopt_graph *g = gen("rnnlm", L, (int)B, (int)T, GOPT_OPTIM_DEFAULT);
        tally t = check_graph(g, 1); /* SGD */
        double macs = L * T * lstm_macs(B, H, H) + T * B * H * V;
        assert_close(fwd_dense(&t), 2 * macs, 1e-12, "rnnlm forward gemm flops");
        assert_close(bwd_dense(&t), 4 * macs, 1e-12, "rnnlm backward gemm flops");
        double params = V * H + L * (2 * H * 4 * H + 4 * H) + H * V + V;
        assert_close(t.param_bytes, 4 * params, 0, "rnnlm param_bytes");
        gopt_graph_free(g);
    }
}

static void test_gnmt(void **state) {
    (void)state;
    const double B = 4, T = 6, H = 1024, V = 32000;
    const int L = 4;
    gopt_graph *g = gen("gnmt", L, (int)B, (int)T, GOPT_OPTIM_DEFAULT);
    tally t = check_graph(g, 3); /* Adam */
    double enc = T * (2 * lstm_macs(B, H, H) + lstm_macs(B, 2 * H, H) + (L - 2) * lstm_macs(B, H, H));
    double mem = B * T * H * H;
    double dec = T * L * lstm_macs(B, 2 * H, H);
    double att = T * (B * H * H + B * T * H + B * T * H); /* query, score.v, context */
    double out = T * B * H * V;
    assert_close(fwd_dense(&t), 2 * (enc + mem + dec + att + out), 1e-12, "gnmt forward gemm flops");
    double params = 2 * V * H + 2 * (2 * H * 4 * H + 4 * H) + (3 * H * 4 * H + 4 * H) +
                    (L - 2) * (2 * H * 4 * H + 4 * H) + H * H + H * H + H + L * (3 * H * 4 * H + 4 * H) + H * V + V;
    assert_close(t.weight_bytes, 4 * params, 0, "gnmt weights");
    gopt_graph_free(g);
}

static void test_transformer_xl(void **state) {
    (void)state;
    const double B = 2, S = 64, M = 64, D = 512, NH = 8, DH = 64, DI = 2048, V = 32000;
    const int L = 2, nseg = 3;
    gopt_graph *g = gen("transformer_xl", L, (int)B, (int)(S * nseg), GOPT_OPTIM_DEFAULT);
    tally t = check_graph(g, 3);
    double K = M + S;
    double layer = B * K * D * 3 * D + K * D * D + 3 * B * NH * S * DH * K + B * S * D * D + 2 * B * S * D * DI;
    double macs = nseg * (L * layer + B * S * D * V);
    assert_close(fwd_dense(&t), 2 * macs, 1e-12, "transformer_xl forward gemm flops");
    double params = V * D + L * (3 * D * D + D * D + 2 * NH * DH + D * D + 2 * D + D * DI + DI + DI * D + D + 2 * D) +
                    D * V + V;
    assert_close(t.weight_bytes, 4 * params, 0, "transformer_xl weights");
    gopt_graph_free(g);
}

static void test_wavenet(void **state) {
    (void)state;
    const double B = 2, T = 1000, R = 64, S = 256, Q = 256;
    const int L = 20;
    gopt_graph *g = gen("wavenet", L, (int)B, (int)T, GOPT_OPTIM_DEFAULT);
    tally t = check_graph(g, 3);
    /* the last layer has no residual 1x1 (its output would feed nothing) */
    double macs = B * T * 2 * Q * R + L * B * T * (2 * R * 2 * R + R * R + R * S) - B * T * R * R + B * T * (S * S + S * Q);
    assert_close(fwd_dense(&t), 2 * macs, 1e-12, "wavenet forward conv flops");
    /* no input gradient for the first (causal) conv: the one-hot audio is data */
    assert_close(bwd_dense(&t), 4 * macs - 2 * B * T * 2 * Q * R, 1e-12, "wavenet backward conv flops");
    gopt_graph_free(g);
}

static void test_amoebanet(void **state) {
    (void)state;
    gopt_graph *g = gen("amoebanet", 2, 1, 224, GOPT_OPTIM_DEFAULT);
    tally t = check_graph(g, 2);
    /* stem conv: 3x3/2 valid on 224 -> 111, 32 filters; it has no input gradient */
    double stem = 2.0 * 111 * 111 * 32 * 27;
    assert_close(bwd_dense(&t), 2 * fwd_dense(&t) - stem, 1e-12, "amoebanet backward = 2 x forward - stem");
    gopt_graph_free(g);
}

/* ---- sizes of the paper's settings -------------------------------------------------------- */
static void test_paper_sizes(void **state) {
    (void)state;
    static const struct {
        const char *family;
        int layers, lo, hi;
    } SIZES[] = {{"rnnlm", 2, 1000, 3000},  {"gnmt", 8, 40000, 80000},     {"transformer_xl", 8, 40000, 80000},
                 {"inception_v3", 0, 1000, 3000}, {"wavenet", 0, 1000, 3000}, {"amoebanet", 0, 3000, 8000}};
    for (size_t i = 0; i < sizeof SIZES / sizeof SIZES[0]; i++) {
        double t0 = gopt_now_seconds();
        gopt_graph *g = gen(SIZES[i].family, SIZES[i].layers, 0, 0, GOPT_OPTIM_DEFAULT);
        double dt = gopt_now_seconds() - t0;
        int32_t n = gopt_graph_num_nodes(g);
        if (n < SIZES[i].lo || n > SIZES[i].hi)
            fail_msg("%s layers %d: %d nodes, outside [%d, %d]", SIZES[i].family, SIZES[i].layers, n, SIZES[i].lo,
                     SIZES[i].hi);
        assert_true(dt < 20); /* ~0.3 s in a release build; generous for sanitizers */
        gopt_graph_free(g);
    }
}

/* ---- bad specs ------------------------------------------------------------------------------- */
static void expect_einval(gopt_zoo_spec s, const char *needle) {
    gopt_graph *g = (gopt_graph *)&s; /* must be reset to NULL */
    gopt_error err = {0};
    assert_int_equal(gopt_zoo_generate(&s, &g, &err), GOPT_EINVAL);
    assert_null(g);
    if (!strstr(err.msg, needle)) fail_msg("message '%s' lacks '%s'", err.msg, needle);
}

static void test_bad_specs(void **state) {
    (void)state;
    expect_einval((gopt_zoo_spec){.family = "vgg"}, "unknown family 'vgg'");
    expect_einval((gopt_zoo_spec){.family = NULL}, "unknown family");
    expect_einval((gopt_zoo_spec){.family = "gnmt", .batch = -3}, "batch = -3");
    expect_einval((gopt_zoo_spec){.family = "rnnlm", .layers = -1}, "layers = -1");
    expect_einval((gopt_zoo_spec){.family = "resnet", .layers = 51}, "not a ResNet depth");
    expect_einval((gopt_zoo_spec){.family = "inception_v3", .layers = 3}, "fixed depth");
    expect_einval((gopt_zoo_spec){.family = "inception_v3", .seq = 20}, "seq = 20");
    expect_einval((gopt_zoo_spec){.family = "gnmt", .layers = 4096, .seq = 100000}, "over the limit");
    expect_einval((gopt_zoo_spec){.family = "wavenet", .optimizer = (gopt_optimizer)9}, "optimizer 9");
}


/* ---- AdamW and gradient clipping ---------------------------------------------------------- */
/* Nodes of graph g whose op is `op` in phase ph (GOPT_PHASE_NONE: any). */
static int count_op(const gopt_graph *g, const char *op, gopt_phase ph) {
    int n = 0;
    for (int32_t v = 0; v < gopt_graph_num_nodes(g); v++) {
        gopt_node_attrs a;
        gopt_graph_node(g, v, &a);
        n += strcmp(a.op, op) == 0 && (ph == GOPT_PHASE_NONE || a.phase == ph);
    }
    return n;
}

static void test_adamw_and_clipping(void **state) {
    (void)state;
    gopt_graph *adam = gen("gnmt", 2, 4, 5, GOPT_OPTIM_ADAM), *adamw = gen("gnmt", 2, 4, 5, GOPT_OPTIM_ADAMW);
    const gopt_frozen *fa = gopt_graph_frozen(adam), *fw = gopt_graph_frozen(adamw);
    assert_int_equal(fa->n, fw->n);
    gopt_node_attrs a, w;
    int updates = 0, sparse = 0;
    double pa = 0, pw = 0;
    for (int32_t v = 0; v < fa->n; v++) { /* the same graph, each update AdamW's with 11 FLOPs for Adam's 10 */
        gopt_graph_node(adam, v, &a);
        gopt_graph_node(adamw, v, &w);
        assert_string_equal(a.name, w.name);
        pa += a.param_bytes;
        pw += w.param_bytes;
        if (a.phase != GOPT_PHASE_OPT) continue;
        updates++;
        sparse += strcmp(a.op, "SparseApplyAdam") == 0;
        assert_string_equal(w.op, strcmp(a.op, "ApplyAdam") == 0 ? "ApplyAdamW" : "SparseApplyAdamW");
        assert_close(w.flops, a.flops * 1.1, 1e-12, "AdamW's update FLOPs");
    }
    assert_true(updates > 0);
    assert_close(pw, pa, 0, "param_bytes: weights + two moments");
    gopt_graph_free(adamw);

    gopt_zoo_spec s = {.family = "gnmt", .layers = 2, .batch = 4, .seq = 5, .optimizer = GOPT_OPTIM_ADAM,
                       .clip_grad_norm = 1};
    gopt_graph *c = NULL;
    gopt_error err = {0};
    assert_int_equal(gopt_zoo_generate(&s, &c, &err), GOPT_OK);
    const gopt_frozen *fc = gopt_graph_frozen(c);
    assert_int_equal(fc->n, fa->n + 2 * updates + 1); /* a squared norm and a scale per gradient, one global norm */
    assert_int_equal(count_op(c, "SquaredNorm", GOPT_PHASE_OPT), updates);
    assert_int_equal(count_op(c, "Mul", GOPT_PHASE_NONE) - count_op(adam, "Mul", GOPT_PHASE_NONE), updates);
    const int32_t gn = gopt_graph_find(c, "clip_by_global_norm/GlobalNorm");
    assert_true(gn >= 0);
    assert_int_equal(fc->in_ptr[gn + 1] - fc->in_ptr[gn], updates); /* every gradient's norm */
    double flops_a[GOPT_PHASE_COUNT] = {0}, flops_c[GOPT_PHASE_COUNT] = {0};
    for (int32_t v = 0; v < fa->n; v++) {
        gopt_graph_node(adam, v, &a);
        flops_a[a.phase] += a.flops;
    }
    int seen = 0, csparse = 0;
    for (int32_t v = 0; v < fc->n; v++) {
        gopt_graph_node(c, v, &a);
        flops_c[a.phase] += a.flops;
        if (strncmp(a.name, "clip_by_global_norm/", 20) == 0) assert_int_equal(a.phase, GOPT_PHASE_OPT);
        if (strncmp(a.name, "update/", 7) != 0) continue;
        seen++;
        csparse += strcmp(a.op, "SparseApplyAdam") == 0;
        /* its gradient is the scaled one, which reads the global norm: every update waits for it */
        int scaled = 0;
        for (int32_t e = fc->in_ptr[v]; e < fc->in_ptr[v + 1]; e++) {
            const int32_t m = fc->in_src[e];
            if (strncmp(gopt_graph_node_name(c, m), "clip_by_global_norm/Mul/", 24) != 0) continue;
            for (int32_t e2 = fc->in_ptr[m]; e2 < fc->in_ptr[m + 1]; e2++) scaled += fc->in_src[e2] == gn;
        }
        assert_int_equal(scaled, 1);
    }
    assert_int_equal(seen, updates);
    assert_int_equal(csparse, sparse);
    assert_close(flops_c[GOPT_PHASE_FWD], flops_a[GOPT_PHASE_FWD], 0, "forward FLOPs");
    assert_close(flops_c[GOPT_PHASE_BWD], flops_a[GOPT_PHASE_BWD], 0, "backward FLOPs");
    assert_true(flops_c[GOPT_PHASE_OPT] > flops_a[GOPT_PHASE_OPT]);
    gopt_graph_free(c);
    gopt_graph_free(adam);
    /* the names the command line reads */
    for (int k = GOPT_OPTIM_SGD; k <= GOPT_OPTIM_ADAMW; k++)
        assert_int_equal(gopt_optimizer_parse(gopt_optimizer_name((gopt_optimizer)k)), k);
    assert_string_equal(gopt_optimizer_name(GOPT_OPTIM_ADAMW), "adamw");
    assert_null(gopt_optimizer_name((gopt_optimizer)9));
    assert_int_equal(gopt_optimizer_parse("default"), -1);
    assert_int_equal(gopt_optimizer_parse("lamb"), -1);
    assert_int_equal(gopt_optimizer_parse(NULL), -1);
    /* RMSProp is the ONNX import's alone */
    expect_einval((gopt_zoo_spec){.family = "gnmt", .optimizer = GOPT_OPTIM_RMSPROP}, "optimizer 4");

    /* a synthetic recommender (sparse gradients of its tables), clipped: each sparse update reads
     * its scaled rows (a Mul of the gathered rows and the global norm) and stays sparse, costed
     * per row element */
    gopt_rng rng;
    gopt_rng_seed(&rng, 11);
    gopt_synth_opts so = {.kind = GOPT_SYNTH_RECSYS, .target_nodes = 600, .clip_grad_norm = 1};
    gopt_graph *sg = NULL;
    assert_int_equal(gopt_zoo_synthetic(&rng, &so, "r", &sg, &err), GOPT_OK);
    const gopt_frozen *f1 = gopt_graph_frozen(sg);
    const int32_t sgn = gopt_graph_find(sg, "clip_by_global_norm/GlobalNorm");
    assert_true(sgn >= 0);
    int nsparse = 0;
    for (int32_t v = 0; v < f1->n; v++) {
        gopt_node_attrs u, m;
        gopt_graph_node(sg, v, &u);
        if (strncmp(u.op, "SparseApply", 11) != 0 && strcmp(u.op, "ScatterSub") != 0) continue;
        nsparse++;
        int rows = 0;
        for (int32_t e = f1->in_ptr[v]; e < f1->in_ptr[v + 1]; e++) {
            const int32_t x = f1->in_src[e];
            gopt_graph_node(sg, x, &m);
            if (strcmp(m.op, "Mul") != 0) continue;
            for (int32_t e2 = f1->in_ptr[x]; e2 < f1->in_ptr[x + 1]; e2++) {
                gopt_node_attrs r;
                gopt_graph_node(sg, f1->in_src[e2], &r);
                rows += strcmp(r.op, "IndexedSlices") == 0;
            }
            const double per = u.flops / m.flops; /* the Mul's FLOPs: one per row element */
            assert_true(per == 2 || per == 4 || per == 10);
        }
        assert_int_equal(rows, 1);
    }
    assert_true(nsparse > 0);
    gopt_graph_free(sg);
}

/* ---- synthetic ----------------------------------------------------------------------------- */
static char *graphml_text(const gopt_graph *g, size_t *len) {
    gopt_buf b;
    gopt_buf_init(&b);
    assert_int_equal(gopt_graph_write_graphml(g, &b, NULL), GOPT_OK);
    *len = b.len;
    return b.data;
}

static gopt_graph *synth(uint64_t seed, gopt_synth_kind kind, int target) {
    gopt_rng rng;
    gopt_rng_seed(&rng, seed);
    gopt_synth_opts o = {.kind = kind, .target_nodes = target};
    gopt_graph *g = NULL;
    gopt_error err = {0};
    if (gopt_zoo_synthetic(&rng, &o, "s", &g, &err) != GOPT_OK) fail_msg("synthetic: %s", err.msg);
    return g;
}

static void test_synthetic_reproducible(void **state) {
    (void)state;
    size_t la, lb, lc;
    gopt_graph *a = synth(42, GOPT_SYNTH_ANY, 0), *b = synth(42, GOPT_SYNTH_ANY, 0), *c = synth(43, GOPT_SYNTH_ANY, 0);
    char *ta = graphml_text(a, &la), *tb = graphml_text(b, &lb), *tc = graphml_text(c, &lc);
    assert_int_equal(la, lb);
    assert_memory_equal(ta, tb, la);
    assert_true(la != lc || memcmp(ta, tc, la) != 0);
    free(ta);
    free(tb);
    free(tc);
    gopt_graph_free(a);
    gopt_graph_free(b);
    gopt_graph_free(c);
    /* families are deterministic too */
    a = gen("gnmt", 2, 2, 3, GOPT_OPTIM_DEFAULT);
    b = gen("gnmt", 2, 2, 3, GOPT_OPTIM_DEFAULT);
    ta = graphml_text(a, &la);
    tb = graphml_text(b, &lb);
    assert_int_equal(la, lb);
    assert_memory_equal(ta, tb, la);
    free(ta);
    free(tb);
    gopt_graph_free(a);
    gopt_graph_free(b);
}

static void test_synthetic_kinds(void **state) {
    (void)state;
    for (int k = 0; k < GOPT_SYNTH_KIND_COUNT; k++) {
        for (uint64_t seed = 1; seed <= 3; seed++) {
            gopt_graph *g = synth(seed, (gopt_synth_kind)k, 1500);
            assert_string_equal(gopt_graph_family(g), gopt_synth_kind_name((gopt_synth_kind)k));
            gopt_graph_stats s;
            gopt_graph_get_stats(g, &s);
            if (s.nodes < 1500 * 0.85 || s.nodes > 1500 * 1.15) fail_msg("kind %d seed %d: %d nodes", k, (int)seed, s.nodes);
            assert_true(s.flops > 0);
            assert_true(s.class_count[GOPT_OP_CLASS_OTHER] == 0);
            assert_true(s.class_count[GOPT_OP_CLASS_PARAM] > 0);
            /* every synthetic step has an optimizer: one update per parameter, colocated */
            const gopt_frozen *f = gopt_graph_frozen(g);
            int opt = 0;
            for (int32_t v = 0; v < f->n; v++) opt += f->phase[v] == GOPT_PHASE_OPT;
            assert_int_equal(opt, s.class_count[GOPT_OP_CLASS_PARAM]);
            assert_int_equal(s.colocation_groups, s.class_count[GOPT_OP_CLASS_PARAM]);
            gopt_graph_free(g);
        }
    }
}

/* n graphs drawn with selector sel (ANY or ALL), at most 6,000 nodes each:
 * every one valid and free of dead ends; counts each kind drawn. */
static void synth_draws(gopt_synth_kind sel, uint64_t seed, int n, int *kinds, double *flops_ratio) {
    gopt_rng rng;
    gopt_rng_seed(&rng, seed);
    double lo_flops = INFINITY, hi_flops = 0;
    for (int i = 0; i < n; i++) {
        gopt_rng child;
        gopt_rng_split(&rng, &child);
        gopt_graph *g = NULL;
        gopt_error err = {0};
        gopt_synth_opts o = {.kind = sel, .max_nodes = 6000}; /* keep the test fast */
        if (gopt_zoo_synthetic(&child, &o, "r", &g, &err) != GOPT_OK) fail_msg("%s", err.msg);
        gopt_graph_stats s;
        gopt_graph_get_stats(g, &s);
        assert_in_range(s.nodes, 200, 6000);
        const gopt_frozen *f = gopt_graph_frozen(g);
        int opt = 0; /* no dead ends: every parameter is reached by a gradient and updated */
        for (int32_t v = 0; v < f->n; v++) opt += f->phase[v] == GOPT_PHASE_OPT;
        assert_int_equal(opt, s.class_count[GOPT_OP_CLASS_PARAM]);
        lo_flops = fmin(lo_flops, s.flops);
        hi_flops = fmax(hi_flops, s.flops);
        for (int k = 0; k < GOPT_SYNTH_KIND_COUNT; k++)
            kinds[k] += strcmp(gopt_graph_family(g), gopt_synth_kind_name((gopt_synth_kind)k)) == 0;
        gopt_graph_free(g);
    }
    *flops_ratio = hi_flops / lo_flops;
}

static void test_synthetic_range(void **state) {
    (void)state;
    int kinds[GOPT_SYNTH_KIND_COUNT] = {0};
    double ratio;
    synth_draws(GOPT_SYNTH_ANY, 7, 24, kinds, &ratio);
    assert_true(ratio > 1e3); /* sizes span orders of magnitude */
    /* ANY draws the first four kinds only (the shipped checkpoint's corpus) */
    for (int k = 0; k < GOPT_SYNTH_KIND_COUNT; k++) assert_true(k < GOPT_SYNTH_ANY_KIND_COUNT ? kinds[k] > 0 : kinds[k] == 0);
    int all[GOPT_SYNTH_KIND_COUNT] = {0};
    synth_draws(GOPT_SYNTH_ALL, 7, 28, all, &ratio);
    assert_true(ratio > 1e3);
    /* ALL draws the seven kinds it drew before tables existed, never tables */
    for (int k = 0; k < GOPT_SYNTH_KIND_COUNT; k++) assert_true(k < GOPT_SYNTH_ALL_KIND_COUNT ? all[k] > 0 : all[k] == 0);
    gopt_error err = {0};
    gopt_graph *g = NULL;
    gopt_rng rng;
    gopt_rng_seed(&rng, 7);
    gopt_synth_opts bad = {.kind = GOPT_SYNTH_ANY, .min_nodes = 500, .max_nodes = 100};
    assert_int_equal(gopt_zoo_synthetic(&rng, &bad, "x", &g, &err), GOPT_EINVAL);
    assert_null(g);
    bad = (gopt_synth_opts){.kind = (gopt_synth_kind)-3};
    assert_int_equal(gopt_zoo_synthetic(&rng, &bad, "x", &g, &err), GOPT_EINVAL);
    bad.kind = GOPT_SYNTH_KIND_COUNT;
    assert_int_equal(gopt_zoo_synthetic(&rng, &bad, "x", &g, &err), GOPT_EINVAL);
    assert_null(g);
}

/* What `gopt graph gen synthetic --seed 1` (kind any) drew before the transformer,
 * recsys and unet kinds existed: adding kinds must not change it. */
static void test_synthetic_any_unchanged(void **state) {
    (void)state;
    static const struct {
        const char *family;
        int32_t nodes, edges;
        double gflops;
    } WANT[] = {
        {"chain", 2301, 3742, 7092.6258}, {"chain", 2036, 3317, 103.0497}, {"cells", 699, 1142, 16.9974},
        {"chain", 4688, 7633, 444.2846},  {"cells", 567, 938, 131.2461},   {"grid", 1356, 2596, 5.7810},
        {"cells", 1833, 2971, 0.3377},    {"layered", 2442, 4082, 23.5753},
    };
    gopt_rng master, child;
    gopt_rng_seed(&master, 1);
    for (size_t i = 0; i < sizeof WANT / sizeof WANT[0]; i++) {
        gopt_rng_split(&master, &child);
        gopt_graph *g = NULL;
        gopt_error err = {0};
        if (gopt_zoo_synthetic(&child, &(gopt_synth_opts){.kind = GOPT_SYNTH_ANY}, "g", &g, &err) != GOPT_OK)
            fail_msg("%s", err.msg);
        gopt_graph_stats s;
        gopt_graph_get_stats(g, &s);
        assert_string_equal(gopt_graph_family(g), WANT[i].family);
        assert_int_equal(s.nodes, WANT[i].nodes);
        assert_int_equal(s.edges, WANT[i].edges);
        assert_float_equal(s.flops / 1e9, WANT[i].gflops, 5e-4);
        gopt_graph_free(g);
    }
}

/* The tables kind: DLRM-sized steps (a few hundred nodes by default) whose
 * parameters are a few very large tables, mostly with dense gradients. */
static void test_synthetic_tables(void **state) {
    (void)state;
    gopt_rng master, child;
    gopt_rng_seed(&master, 11);
    int dominated = 0, dense = 0, n = 12;
    for (int i = 0; i < n; i++) {
        gopt_rng_split(&master, &child);
        gopt_graph *g = NULL;
        gopt_error err = {0};
        if (gopt_zoo_synthetic(&child, &(gopt_synth_opts){.kind = GOPT_SYNTH_TABLES}, "t", &g, &err) != GOPT_OK)
            fail_msg("%s", err.msg);
        assert_string_equal(gopt_graph_family(g), "tables");
        const gopt_frozen *f = gopt_graph_frozen(g);
        assert_in_range(f->n, 200, 3000);
        /* the largest table against all parameters; a dense gradient is table-sized */
        double total = 0, largest = 0, table = 0; /* param_bytes include the optimizer's state */
        for (int32_t v = 0; v < f->n; v++) {
            total += f->param_bytes[v];
            if (f->param_bytes[v] > largest) {
                largest = f->param_bytes[v];
                table = f->out_bytes[v];
            }
        }
        dominated += largest >= 0.2 * total && table >= 1e8;
        int has_dense = 0;
        for (int32_t v = 0; v < f->n; v++)
            has_dense |= f->phase[v] == GOPT_PHASE_BWD && f->out_bytes[v] == table;
        dense += has_dense;
        gopt_graph_free(g);
    }
    if (dominated < n / 2) fail_msg("%d of %d graphs dominated by one large table", dominated, n);
    if (dense < n / 2 || dense == n) fail_msg("%d of %d graphs with a dense table gradient", dense, n);
}

/* The transformer, recsys and unet kinds carry the structures they imitate. */
static void test_synthetic_new_kinds(void **state) {
    (void)state;
    int moe = 0, cross = 0, sparse = 0, dense_emb = 0, conv1d = 0, up_tconv = 0, up_resize = 0;
    for (uint64_t seed = 1; seed <= 8; seed++) {
        gopt_graph *t = synth(seed, GOPT_SYNTH_TRANSFORMER, 1200);
        assert_true(count_op(t, "BatchMatMulV2", GOPT_PHASE_FWD) >= 2); /* Q K^T and the weights times V */
        assert_true(count_op(t, "Softmax", GOPT_PHASE_FWD) >= 1);
        assert_true(count_op(t, "SoftmaxGrad", GOPT_PHASE_BWD) >= 1);
        assert_true(count_op(t, "GatherV2", GOPT_PHASE_FWD) >= 1); /* token embeddings */
        assert_true(count_op(t, "Transpose", GOPT_PHASE_FWD) >= 2); /* heads split and merged */
        assert_true(count_op(t, "LayerNorm", GOPT_PHASE_FWD) >= 2);
        moe += count_op(t, "TopKV2", GOPT_PHASE_FWD) > 0;
        cross += gopt_graph_find(t, "decoder/layer_0/cross_attention/attention/query/kernel") >= 0;
        conv1d += count_op(t, "DepthwiseConv2dNative", GOPT_PHASE_FWD) > 0;
        gopt_graph_free(t);
        gopt_graph *r = synth(seed, GOPT_SYNTH_RECSYS, 1200);
        assert_true(count_op(r, "GatherV2", GOPT_PHASE_FWD) >= 8);
        int slices = count_op(r, "IndexedSlices", GOPT_PHASE_BWD);
        sparse += slices > 0;
        dense_emb += count_op(r, "UnsortedSegmentSum", GOPT_PHASE_BWD) > 0;
        /* a sparse gradient's update touches the gathered rows only */
        for (int32_t v = 0; slices && v < gopt_graph_num_nodes(r); v++) {
            gopt_node_attrs a, u;
            gopt_graph_node(r, v, &a);
            if (strcmp(a.op, "IndexedSlices")) continue;
            const gopt_frozen *f = gopt_graph_frozen(r);
            int found = 0;
            for (int32_t e = f->out_ptr[v]; e < f->out_ptr[v + 1]; e++) {
                gopt_graph_node(r, f->out_dst[e], &u);
                if (u.phase != GOPT_PHASE_OPT) continue;
                found = 1;
                assert_true(strncmp(u.op, "Sparse", 6) == 0 || strcmp(u.op, "ScatterSub") == 0);
                double per = u.flops / (a.out_bytes / 4);
                assert_true(per == 2 || per == 4 || per == 10);
            }
            assert_true(found);
        }
        gopt_graph_free(r);
        gopt_graph *u = synth(seed, GOPT_SYNTH_UNET, 1200);
        int tconv = count_op(u, "Conv2DBackpropInput", GOPT_PHASE_FWD), resize = count_op(u, "ResizeNearestNeighbor", GOPT_PHASE_FWD);
        assert_true((tconv >= 2) != (resize >= 2)); /* up by transposed convs or by resize + conv */
        if (tconv) assert_true(count_op(u, "Conv2D", GOPT_PHASE_BWD) >= 2); /* a transposed conv's input gradient */
        else assert_int_equal(count_op(u, "AvgPoolGrad", GOPT_PHASE_BWD), resize);
        up_tconv += tconv > 0;
        up_resize += resize > 0;
        assert_true(count_op(u, "MaxPool", GOPT_PHASE_FWD) >= 2);
        assert_true(count_op(u, "ConcatV2", GOPT_PHASE_FWD) >= 2); /* skips */
        gopt_graph_free(u);
    }
    /* deterministic per seed: the same seed, the same bytes; and ALL too */
    for (int k = GOPT_SYNTH_ALL; k < GOPT_SYNTH_KIND_COUNT; k++) {
        if (k == GOPT_SYNTH_ANY) continue;
        size_t la, lb;
        gopt_graph *a = synth(77, (gopt_synth_kind)k, 800), *b = synth(77, (gopt_synth_kind)k, 800);
        char *ta = graphml_text(a, &la), *tb = graphml_text(b, &lb);
        assert_int_equal(la, lb);
        assert_memory_equal(ta, tb, la);
        free(ta);
        free(tb);
        gopt_graph_free(a);
        gopt_graph_free(b);
    }
    /* over 8 seeds each option shows up */
    assert_true(moe > 0 && moe < 8);
    assert_true(cross > 0 && cross < 8);
    assert_true(conv1d > 0);
    assert_true(sparse > 0 && dense_emb > 0);
    assert_true(up_tconv > 0 && up_resize > 0);
}

/* ---- shipped PyTorch exports ----------------------------------------------------------------- */
static void test_real_graphs(void **state) {
    (void)state;
    /* node counts documented in graphs/real/README.md */
    static const struct {
        const char *file;
        int nodes, edges;
        double param_bytes;
    } REAL[] = {{"resnet50", 1333, 2061, 204456256},       {"inception_v3", 2422, 3742, 190676544},
                {"transformer", 4560, 5960, 677238528},    {"lstm_lm", 2742, 4773, 79121600},
                {"seq2seq", 5715, 9319, 105382656}};
    for (size_t i = 0; i < sizeof REAL / sizeof REAL[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/graphs/real/%s.graphml.gz", GOPT_SOURCE_DIR, REAL[i].file);
        gopt_graph *g = NULL;
        gopt_error err = {0};
        if (gopt_graph_load(path, &g, &err) != GOPT_OK) fail_msg("%s", err.msg);
        gopt_graph_stats s;
        gopt_graph_get_stats(g, &s);
        assert_int_equal(s.nodes, REAL[i].nodes);
        assert_int_equal(s.edges, REAL[i].edges);
        assert_true(s.param_bytes == REAL[i].param_bytes);
        assert_true(s.class_count[GOPT_OP_CLASS_OTHER] < 0.03 * s.nodes);
        const gopt_frozen *f = gopt_graph_frozen(g);
        int phases[GOPT_PHASE_COUNT] = {0};
        for (int32_t v = 0; v < f->n; v++) phases[f->phase[v]]++;
        assert_true(phases[GOPT_PHASE_FWD] > 0 && phases[GOPT_PHASE_BWD] > 0 && phases[GOPT_PHASE_OPT] > 0);
        assert_int_equal(phases[GOPT_PHASE_NONE], 0);
        /* every optimizer op shares its parameter's colocation group */
        for (int32_t v = 0; v < f->n; v++) {
            if (f->phase[v] != GOPT_PHASE_OPT) continue;
            gopt_node_attrs a;
            gopt_graph_node(g, v, &a);
            int32_t p = gopt_graph_find(g, a.colocate);
            assert_true(p >= 0);
            assert_int_equal(f->op_class[p], GOPT_OP_CLASS_PARAM);
            assert_int_equal(f->coloc[p], f->coloc[v]);
        }
        assert_true(s.flops > 0 && s.param_bytes > 0);
        gopt_graph_free(g);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resnet50),        cmocka_unit_test(test_inception_v3),
        cmocka_unit_test(test_rnnlm),           cmocka_unit_test(test_gnmt),
        cmocka_unit_test(test_transformer_xl),  cmocka_unit_test(test_wavenet),
        cmocka_unit_test(test_amoebanet),       cmocka_unit_test(test_paper_sizes),
        cmocka_unit_test(test_bad_specs),       cmocka_unit_test(test_adamw_and_clipping),
        cmocka_unit_test(test_synthetic_reproducible),
        cmocka_unit_test(test_synthetic_kinds), cmocka_unit_test(test_synthetic_range),
        cmocka_unit_test(test_synthetic_any_unchanged), cmocka_unit_test(test_synthetic_new_kinds),
        cmocka_unit_test(test_synthetic_tables),
        cmocka_unit_test(test_real_graphs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
