/* test_onnx.c: the ONNX import (graphs/gopt_onnx.h) on the small models in
 * tests/data/onnx (written by tools/make_test_onnx.py): models exported by
 * torch.onnx.export import with the forward FLOPs and parameter bytes that
 * tools/export_torch.py reports for the same PyTorch models (figures in
 * NAME.expected.json); weights from graph inputs and from external data
 * files; every bad file refused with its status and a message naming the
 * file; ops outside the rules refused or imported as `other`; every prefix
 * and 300 seeded mutations of a model end in a clean error or a valid graph.
 */
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gopt_onnx.h"

#define DATA GOPT_SOURCE_DIR "/tests/data/onnx/"
#define assert_near(a, b, tol) assert_true(fabs((double)(a) - (double)(b)) <= (double)(tol))

typedef struct {
    double flops[GOPT_PHASE_COUNT], param_bytes, weight_bytes;
    int32_t nodes, params, updates, other;
} tally;

static gopt_graph *import(const char *name, gopt_onnx_opts o) {
    gopt_graph *g = NULL;
    gopt_error err = {0};
    if (gopt_onnx_import(name, &o, &g, &err) != GOPT_OK) fail_msg("%s: %s", name, err.msg);
    assert_non_null(gopt_graph_frozen(g));
    return g;
}

/* Structure every imported training step has: params colocated with their
 * one update op, every non-input node in a phase, backward ops present. */
static tally check(const gopt_graph *g, double state) {
    tally t;
    memset(&t, 0, sizeof t);
    const gopt_frozen *f = gopt_graph_frozen(g);
    t.nodes = f->n;
    for (int32_t v = 0; v < f->n; v++) {
        gopt_node_attrs a;
        gopt_graph_node(g, v, &a);
        assert_true(a.phase != GOPT_PHASE_NONE);
        t.flops[a.phase] += a.flops;
        t.other += a.cls == GOPT_OP_CLASS_OTHER;
        if (a.cls == GOPT_OP_CLASS_PARAM) {
            t.params++;
            t.param_bytes += a.param_bytes;
            t.weight_bytes += a.out_bytes;
            assert_true(fabs(a.param_bytes - state * a.out_bytes) <= 1e-9 * a.param_bytes);
            assert_string_equal(a.colocate, a.name);
            assert_true(a.layer >= 0);
        }
        if (a.phase == GOPT_PHASE_OPT) {
            t.updates++;
            int32_t p = gopt_graph_find(g, a.colocate);
            assert_true(p >= 0);
            assert_int_equal(f->coloc[v], f->coloc[p]);
        }
    }
    return t;
}

static json_t *expected(const char *model) {
    char path[512];
    snprintf(path, sizeof path, DATA "%s.expected.json", model);
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    if (!j) fail_msg("%s: %s", path, je.text);
    return j;
}

static double num(json_t *j, const char *key) {
    json_t *v = json_object_get(j, key);
    assert_non_null(v);
    return json_number_value(v);
}

/* Import MODEL.onnx with the exporter's optimizer; forward FLOPs and
 * parameter bytes within `tol` of tools/export_torch.py's. */
static tally agree(const char *model, const char *file, double tol) {
    json_t *e = expected(model);
    const char *opt = json_string_value(json_object_get(e, "optimizer"));
    gopt_onnx_opts o = {.optimizer = !strcmp(opt, "sgd")        ? GOPT_OPTIM_SGD
                                     : !strcmp(opt, "momentum") ? GOPT_OPTIM_MOMENTUM
                                                                : GOPT_OPTIM_ADAM};
    char path[512];
    snprintf(path, sizeof path, DATA "%s", file);
    gopt_graph *g = import(path, o);
    double state = o.optimizer == GOPT_OPTIM_SGD ? 1 : o.optimizer == GOPT_OPTIM_MOMENTUM ? 2 : 3;
    tally t = check(g, state);
    double ef = num(e, "fwd_flops"), ep = num(e, "param_bytes");
    printf("%s: forward FLOPs %.0f (exporter %.0f, %+.3f%%), param_bytes %.0f (exporter %.0f)\n", file,
           t.flops[GOPT_PHASE_FWD], ef, 100 * (t.flops[GOPT_PHASE_FWD] / ef - 1), t.param_bytes, ep);
    assert_true(fabs(t.flops[GOPT_PHASE_FWD] / ef - 1) <= tol);
    assert_true(fabs(t.param_bytes / ep - 1) <= tol);
    assert_true(t.flops[GOPT_PHASE_BWD] > t.flops[GOPT_PHASE_FWD]); /* backward is about twice forward */
    assert_int_equal(t.updates, t.params);
    json_decref(e);
    gopt_graph_free(g);
    return t;
}

/* ---- models exported from PyTorch ------------------------------------------------------------- */
static void test_cnn_matches_exporter(void **s) {
    (void)s;
    tally t = agree("cnn", "cnn.onnx", 0.01);
    assert_int_equal(t.params, 9); /* conv1 w, b; bn1 2; conv2 w (no bias); bn2 2; head w, b */
}

static void test_transformer_matches_exporter(void **s) {
    (void)s;
    agree("transformer", "transformer.onnx", 0.01);
}

/* The exporter counts torch's in-place sigmoid_ and tanh_ (LSTM cells) at 4
 * FLOPs an element, as Sigmoid and Tanh: forward FLOPs and parameter bytes
 * agree exactly (before that fix the import was 1.85% above). */
static void test_lstm_unrolled(void **s) {
    (void)s;
    tally t = agree("lstm", "lstm.onnx", 1e-9);
    assert_true(t.nodes > 500); /* 2 layers x 6 steps unrolled */
}

static double node_flops(const gopt_graph *g, const char *name) {
    int32_t v = gopt_graph_find(g, name);
    if (v < 0) fail_msg("no node '%s'", name);
    gopt_node_attrs a;
    gopt_graph_node(g, v, &a);
    return a.flops;
}

/* GRU (unrolled, bidirectional), ConvTranspose, Einsum and torch's Expand
 * shape arithmetic: parameter bytes equal torch's parameters, FLOPs by hand. */
static void test_gru_deconv_einsum(void **s) {
    (void)s;
    json_t *e = expected("gru");
    gopt_graph *g = import(DATA "gru.onnx", (gopt_onnx_opts){.optimizer = GOPT_OPTIM_SGD});
    tally t = check(g, 1);
    assert_near(t.param_bytes, num(e, "param_bytes"), 0);
    assert_true(t.nodes > 400); /* 2 directions x 4 steps x ~25 ops, and their gradients */
    assert_int_equal(t.updates, t.params);
    json_decref(e);
    gopt_graph_free(g);
    e = expected("deconv");
    g = import(DATA "deconv.onnx", (gopt_onnx_opts){0});
    t = check(g, 3);
    assert_near(t.param_bytes, num(e, "param_bytes"), 0);
    assert_near(node_flops(g, "up/ConvTranspose"), 2.0 * (2 * 3 * 8 * 8) * 4 * 4 * 4, 0); /* 2 x input x K x kernel */
    assert_near(node_flops(g, "Einsum"), 2.0 * 2 * 4 * 10, 0);
    assert_int_equal(gopt_graph_find(g, "Shape"), -1); /* the Expand target was computed at import */
    const gopt_frozen *f = gopt_graph_frozen(g);
    for (int32_t v = 0; v < f->n; v++) { /* a zero-rate Dropout is the identity */
        gopt_node_attrs a;
        gopt_graph_node(g, v, &a);
        assert_string_not_equal(a.op, "Dropout");
    }
    json_decref(e);
    gopt_graph_free(g);
}

static void test_weights_from_graph_inputs(void **s) {
    (void)s;
    tally t = agree("cnn", "cnn_noweights.onnx", 0.01);
    assert_int_equal(t.params, 9);
}

static void test_batch_scales_flops(void **s) {
    (void)s;
    gopt_graph *g2 = import(DATA "cnn.onnx", (gopt_onnx_opts){0});
    gopt_graph *g8 = import(DATA "cnn.onnx", (gopt_onnx_opts){.batch = 8});
    tally a = check(g2, 3), b = check(g8, 3);
    assert_near(b.flops[GOPT_PHASE_FWD], 4 * a.flops[GOPT_PHASE_FWD], 1e-6 * b.flops[GOPT_PHASE_FWD]);
    assert_near(b.param_bytes, a.param_bytes, 0);
    gopt_graph_free(g2);
    gopt_graph_free(g8);
}

static void test_optimizers_and_forward_only(void **s) {
    (void)s;
    gopt_graph *g = import(DATA "cnn.onnx", (gopt_onnx_opts){.optimizer = GOPT_OPTIM_RMSPROP});
    tally r = check(g, 2);
    int32_t u = gopt_graph_find(g, "update/conv1.weight");
    assert_true(u >= 0);
    gopt_node_attrs a;
    gopt_graph_node(g, u, &a);
    assert_string_equal(a.op, "ApplyRMSProp");
    gopt_graph_free(g);
    /* AdamW, the gradients clipped to one global norm first */
    g = import(DATA "cnn.onnx", (gopt_onnx_opts){.optimizer = GOPT_OPTIM_ADAMW, .clip_grad_norm = 1});
    gopt_graph_node(g, gopt_graph_find(g, "update/conv1.weight"), &a);
    assert_string_equal(a.op, "ApplyAdamW");
    int32_t gn = gopt_graph_find(g, "clip_by_global_norm/GlobalNorm");
    assert_true(gn >= 0);
    assert_int_equal(gopt_graph_num_nodes(g), r.nodes + 2 * r.updates + 1);
    double pb = 0;
    for (int32_t v = 0; v < gopt_graph_num_nodes(g); v++) {
        gopt_graph_node(g, v, &a);
        pb += a.param_bytes;
    }
    assert_near(pb, 3 * r.weight_bytes, 0);
    gopt_graph_free(g);
    gopt_error err = {0};
    gopt_onnx_opts fc = {.forward_only = 1, .clip_grad_norm = 1};
    assert_int_equal(gopt_onnx_import(DATA "cnn.onnx", &fc, &g, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "no gradients to clip"));
    g = import(DATA "cnn.onnx", (gopt_onnx_opts){.forward_only = 1});
    tally f = check(g, 1);
    assert_int_equal(f.updates, 0);
    assert_near(f.flops[GOPT_PHASE_BWD], 0, 0);
    assert_near(f.param_bytes, r.weight_bytes, 0);
    assert_true(f.nodes < r.nodes / 2);
    gopt_graph_free(g);
}

/* ---- hand-written models: external data, unknown ops, bad files ---------------------------------- */
static void test_external_data(void **s) {
    (void)s;
    gopt_graph *g = import(DATA "ext_mlp.onnx", (gopt_onnx_opts){0});
    tally t = check(g, 3);
    assert_int_equal(t.params, 3);
    assert_near(t.weight_bytes, 4.0 * (8 * 16 + 16 + 16 * 5), 0);
    /* forward: 2*4*8*16 + 4*16 (bias) + 4*16 (relu) + 2*4*16*5 + 6*4*5 (loss) */
    assert_near(t.flops[GOPT_PHASE_FWD], 1024 + 64 + 64 + 640 + 120, 0);
    gopt_graph_free(g);
    /* the same bytes without a folder to look in are refused */
    FILE *fp = fopen(DATA "ext_mlp.onnx", "rb");
    assert_non_null(fp);
    uint8_t buf[4096];
    size_t n = fread(buf, 1, sizeof buf, fp);
    fclose(fp);
    gopt_error err = {0};
    assert_int_equal(gopt_onnx_import_mem(buf, n, "mem.onnx", NULL, NULL, &g, &err), GOPT_EFORMAT);
    assert_null(g);
    assert_non_null(strstr(err.msg, "mem.onnx"));
}

static void expect_refused(const char *file, gopt_onnx_opts o, gopt_status want, const char *phrase) {
    char path[512];
    snprintf(path, sizeof path, DATA "%s", file);
    gopt_graph *g = (gopt_graph *)1;
    gopt_error err = {0};
    gopt_status st = gopt_onnx_import(path, &o, &g, &err);
    if (st != want || !strstr(err.msg, file) || !strstr(err.msg, phrase))
        fail_msg("%s: status %d (want %d), message '%s' (want '%s' and the file name)", file, st, want, err.msg, phrase);
    assert_null(g);
    assert_int_equal(gopt_status_exit_code(st), 2);
}

static void test_bad_files(void **s) {
    (void)s;
    gopt_onnx_opts o = {0};
    expect_refused("bad_truncated.onnx", o, GOPT_EFORMAT, "does not parse");
    expect_refused("bad_not_protobuf.onnx", o, GOPT_EFORMAT, "not an ONNX model");
    expect_refused("bad_cycle.onnx", o, GOPT_EFORMAT, "cycle through node");
    expect_refused("bad_missing_input.onnx", o, GOPT_EFORMAT, "input 'ghost' is not produced");
    expect_refused("bad_ext_missing.onnx", o, GOPT_EIO, "external data file 'no_such_file.weights' is missing");
    expect_refused("bad_unknown_op.onnx", o, GOPT_EINVAL, "node 'act': op type 'CustomAct' is outside");
    expect_refused("cnn_noweights.onnx", (gopt_onnx_opts){.batch = -1}, GOPT_EINVAL, "bad import options");
    expect_refused("bad_wide_concat.onnx", o, GOPT_EINVAL, "node 'wide_concat' (Concat): 300 inputs; at most 255");
    gopt_graph *g = (gopt_graph *)1;
    gopt_error err = {0};
    assert_int_equal(gopt_onnx_import(DATA "no_such_model.onnx", NULL, &g, &err), GOPT_EIO);
    assert_null(g);
    assert_int_equal(gopt_onnx_import_mem((const uint8_t *)"", 0, "empty.onnx", NULL, NULL, &g, &err), GOPT_EFORMAT);
    assert_non_null(strstr(err.msg, "empty.onnx"));
}

static void test_unknown_as_other(void **s) {
    (void)s;
    gopt_graph *g = import(DATA "bad_unknown_op.onnx", (gopt_onnx_opts){.unknown_as_other = 1});
    tally t = check(g, 3);
    assert_int_equal(t.other, 2); /* the op and its gradient */
    int32_t v = gopt_graph_find(g, "act");
    assert_true(v >= 0);
    gopt_node_attrs a;
    gopt_graph_node(g, v, &a);
    assert_int_equal(a.cls, GOPT_OP_CLASS_OTHER);
    assert_near(a.flops, 4 * 16, 0); /* one per output element; shape of its input */
    assert_true(gopt_graph_find(g, "gradients/act_grad/CustomActGrad") >= 0);
    gopt_graph_free(g);
}

/* A shape the rules cannot infer (Reshape by a runtime shape input) comes
 * from value_info; without it, or when --batch makes value_info stale, the
 * model is refused naming the value. */
static void test_value_info(void **s) {
    (void)s;
    gopt_graph *g = import(DATA "value_info.onnx", (gopt_onnx_opts){0});
    int32_t v = gopt_graph_find(g, "fc2");
    assert_true(v >= 0);
    gopt_node_attrs a;
    gopt_graph_node(g, v, &a);
    assert_string_equal(a.shape, "8x5");
    assert_near(a.flops, 2.0 * 8 * 8 * 5, 0);
    gopt_graph_free(g);
    expect_refused("bad_no_shape.onnx", (gopt_onnx_opts){0}, GOPT_EINVAL,
                   "node 'reshape' (Reshape): cannot infer the shape of output 'h1'");
    expect_refused("value_info.onnx", (gopt_onnx_opts){.batch = 2}, GOPT_EINVAL, "cannot infer the shape of output 'h1'");
}

/* Node names are cut to 200 characters and made unique (_1, _2, ...). */
static void test_long_duplicate_names(void **s) {
    (void)s;
    gopt_graph *g = import(DATA "long_names.onnx", (gopt_onnx_opts){.forward_only = 1});
    char name[256];
    memset(name, 'n', 200);
    snprintf(name + 200, sizeof name - 200, "_3");
    assert_true(gopt_graph_find(g, name) >= 0);
    assert_int_equal(gopt_graph_num_nodes(g), 8); /* x, w1, b1, w2 and the four ops */
    gopt_graph_free(g);
}

/* Every prefix of a model and seeded byte mutations: a clean error or a graph. */
static void test_prefixes_and_mutations(void **s) {
    (void)s;
    FILE *fp = fopen(DATA "cnn_noweights.onnx", "rb");
    assert_non_null(fp);
    uint8_t buf[8192], mut[8192];
    size_t n = fread(buf, 1, sizeof buf, fp);
    fclose(fp);
    assert_true(n > 100 && n < sizeof buf);
    int ok = 0, refused = 0;
    for (size_t k = 0; k <= n; k += 7) {
        gopt_graph *g = NULL;
        gopt_error err = {0};
        gopt_status st = gopt_onnx_import_mem(buf, k, "prefix.onnx", NULL, NULL, &g, &err);
        if (st == GOPT_OK) ok++, gopt_graph_free(g);
        else refused++, assert_null(g), assert_non_null(strstr(err.msg, "prefix.onnx"));
        assert_true(st != GOPT_EINTERNAL && st != GOPT_ENOMEM);
    }
    assert_true(refused > 0);
    gopt_rng rng;
    gopt_rng_seed(&rng, 17);
    for (int i = 0; i < 300; i++) {
        memcpy(mut, buf, n);
        int flips = 1 + (int)gopt_rng_below(&rng, 4);
        for (int k = 0; k < flips; k++) mut[gopt_rng_below(&rng, n)] = (uint8_t)gopt_rng_below(&rng, 256);
        gopt_graph *g = NULL;
        gopt_error err = {0};
        gopt_onnx_opts o = {.batch = 1 + (int)gopt_rng_below(&rng, 4), .unknown_as_other = i & 1};
        gopt_status st = gopt_onnx_import_mem(mut, n, "mutant.onnx", NULL, &o, &g, &err);
        if (st == GOPT_OK) ok++, gopt_graph_free(g);
        else refused++, assert_null(g);
        if (st == GOPT_EINTERNAL || st == GOPT_ENOMEM) fail_msg("mutation %d: %s", i, err.msg);
    }
    assert_true(ok > 0);
}

int main(void) {
    if (!gopt_onnx_available()) {
        printf("test_onnx: this build has no ONNX import (protoc-c missing); nothing to test\n");
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cnn_matches_exporter),
        cmocka_unit_test(test_transformer_matches_exporter),
        cmocka_unit_test(test_lstm_unrolled),
        cmocka_unit_test(test_gru_deconv_einsum),
        cmocka_unit_test(test_weights_from_graph_inputs),
        cmocka_unit_test(test_batch_scales_flops),
        cmocka_unit_test(test_optimizers_and_forward_only),
        cmocka_unit_test(test_external_data),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_unknown_as_other),
        cmocka_unit_test(test_value_info),
        cmocka_unit_test(test_long_duplicate_names),
        cmocka_unit_test(test_prefixes_and_mutations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
