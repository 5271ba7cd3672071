/* test_baselines.c: the classical optimizers.
 *
 * Known answers by hand: two independent chains on two devices (each chain
 * on its own device: the step is one chain's time), a graph too big for one
 * device (split, never over capacity; refused when nothing can hold it),
 * critical-path priorities, fusion rules (TVM chains and reductions last,
 * XLA gains), the quick estimate on a hand-computed timeline and its price of a fused
 * group against the cost model's and the simulator's. Validity of
 * every method and combination on generated training-step graphs (and zoo
 * graphs when the zoo is built in), determinism under a seed, the registry
 * (combinations, refusals listing valid names, extension by a new method),
 * and the evaluator callback seam.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bl_internal.h" /* bl_fuse: the exact legality search and its order */
#include "gopt_baselines.h"
#include "gopt_zoo.h"

/* ---- fixtures -------------------------------------------------------------- */
static gopt_profile *make_profile(int ndev, double mem) { return test_profile_uniform(ndev, mem, 1e12, "test_baselines"); }

typedef struct {
    gopt_profile *prof;
    gopt_costmodel *cm;
    gopt_cost_table table;
    gopt_bl_problem pb;
    gopt_bl_registry reg;
} fixture;

static void fx_init(fixture *x, gopt_graph *g, int ndev, double mem) {
    memset(x, 0, sizeof *x);
    x->prof = make_profile(ndev, mem);
    assert_int_equal(gopt_cost_create(x->prof, ndev, &x->cm, NULL), GOPT_OK);
    gopt_error err = {0};
    assert_int_equal(gopt_cost_table_build(x->cm, g, &x->table, &err), GOPT_OK);
    x->pb.graph = g;
    x->pb.cm = x->cm;
    x->pb.cost = &x->table;
    x->pb.ndev = ndev;
    x->pb.opt.seed = 1;
    x->pb.opt.max_evals = 300;
    x->pb.opt.budget_s = 60;
    gopt_bl_registry_init(&x->reg);
}

static void fx_destroy(fixture *x) {
    gopt_cost_table_destroy(&x->table);
    gopt_cost_free(x->cm);
    gopt_profile_free(x->prof);
}

static int32_t add(gopt_graph *g, const char *name, gopt_op_class cls, double flops, double out, double param,
                   gopt_phase ph, int layer, const char *coloc) {
    gopt_node_attrs a = {0};
    a.name = name;
    a.op = gopt_op_class_name(cls);
    a.cls = cls;
    a.flops = flops;
    a.out_bytes = out;
    a.param_bytes = param;
    a.phase = ph;
    a.layer = layer;
    a.colocate = coloc;
    int32_t id = -1;
    gopt_error err = {0};
    gopt_status st = gopt_graph_add_node(g, &a, &id, &err);
    if (st) fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(st, GOPT_OK);
    return id;
}

static void edge(gopt_graph *g, int32_t a, int32_t b, double bytes) {
    assert_int_equal(gopt_graph_add_edge(g, a, b, bytes, NULL), GOPT_OK);
}

/* Two independent chains of k ops (1 GFLOP each: 1 ms), 100 MB between
 * consecutive ops (0.1 s when it crosses devices). */
static gopt_graph *two_chains(int k) {
    gopt_graph *g = NULL;
    assert_int_equal(gopt_graph_create(&g, "two_chains", "test", NULL), GOPT_OK);
    for (int c = 0; c < 2; c++) {
        int32_t prev = -1;
        for (int i = 0; i < k; i++) {
            char nm[32];
            snprintf(nm, sizeof nm, "c%d_%d", c, i);
            int32_t v = add(g, nm, GOPT_OP_CLASS_OTHER, 1e9, 1e8, 0, GOPT_PHASE_NONE, -1, NULL);
            if (prev >= 0) edge(g, prev, v, 1e8);
            prev = v;
        }
    }
    assert_int_equal(gopt_graph_finalize(g, NULL), GOPT_OK);
    return g;
}

/* A training step of an L-layer MLP: input; per layer a parameter W (param
 * bytes pbytes, colocated with its update), matmul, bias add, relu; a loss
 * reduction; the backward pass (relu grad, matmul grads) and updates. */
static gopt_graph *mlp_step(int L, double pbytes, const char *family) {
    gopt_graph *g = NULL;
    assert_int_equal(gopt_graph_create(&g, "mlp", family, NULL), GOPT_OK);
    double act = 4.0 * 64 * 1024;
    int32_t x = add(g, "input", GOPT_OP_CLASS_INPUT, 0, act, 0, GOPT_PHASE_FWD, 0, NULL);
    int32_t *W = calloc((size_t)L, sizeof *W), *in = calloc((size_t)L, sizeof *in), *relu = calloc((size_t)L, sizeof *relu);
    char nm[64], co[32];
    int32_t h = x;
    for (int l = 0; l < L; l++) {
        snprintf(co, sizeof co, "w%d", l);
        snprintf(nm, sizeof nm, "W%d", l);
        W[l] = add(g, nm, GOPT_OP_CLASS_PARAM, 0, pbytes, pbytes, GOPT_PHASE_FWD, l, co);
        in[l] = h;
        snprintf(nm, sizeof nm, "matmul%d", l);
        int32_t mm = add(g, nm, GOPT_OP_CLASS_GEMM, 2e9, act, 0, GOPT_PHASE_FWD, l, NULL);
        edge(g, h, mm, act);
        edge(g, W[l], mm, pbytes);
        snprintf(nm, sizeof nm, "bias%d", l);
        int32_t b = add(g, nm, GOPT_OP_CLASS_ELEMENTWISE, 1e5, act, 0, GOPT_PHASE_FWD, l, NULL);
        edge(g, mm, b, act);
        snprintf(nm, sizeof nm, "relu%d", l);
        relu[l] = add(g, nm, GOPT_OP_CLASS_ELEMENTWISE, 1e5, act, 0, GOPT_PHASE_FWD, l, NULL);
        edge(g, b, relu[l], act);
        h = relu[l];
    }
    int32_t loss = add(g, "loss", GOPT_OP_CLASS_REDUCTION, 1e5, 4, 0, GOPT_PHASE_FWD, L - 1, NULL);
    edge(g, h, loss, act);
    int32_t grad = add(g, "loss_grad", GOPT_OP_CLASS_ELEMENTWISE, 1e5, act, 0, GOPT_PHASE_BWD, L - 1, NULL);
    edge(g, loss, grad, 4);
    edge(g, h, grad, act);
    for (int l = L - 1; l >= 0; l--) {
        snprintf(nm, sizeof nm, "relu_grad%d", l);
        int32_t rg = add(g, nm, GOPT_OP_CLASS_ELEMENTWISE, 1e5, act, 0, GOPT_PHASE_BWD, l, NULL);
        edge(g, grad, rg, act);
        edge(g, relu[l], rg, act);
        snprintf(nm, sizeof nm, "matmul_grad_w%d", l);
        int32_t gw = add(g, nm, GOPT_OP_CLASS_GEMM, 2e9, pbytes, 0, GOPT_PHASE_BWD, l, NULL);
        edge(g, rg, gw, act);
        edge(g, in[l], gw, act);
        snprintf(nm, sizeof nm, "update%d", l);
        snprintf(co, sizeof co, "w%d", l);
        int32_t up = add(g, nm, GOPT_OP_CLASS_ELEMENTWISE, 1e6, pbytes, 0, GOPT_PHASE_OPT, l, co);
        edge(g, gw, up, pbytes);
        edge(g, W[l], up, pbytes);
        if (l > 0) {
            snprintf(nm, sizeof nm, "matmul_grad_x%d", l);
            int32_t gx = add(g, nm, GOPT_OP_CLASS_GEMM, 2e9, act, 0, GOPT_PHASE_BWD, l, NULL);
            edge(g, rg, gx, act);
            edge(g, W[l], gx, pbytes);
            grad = gx;
        }
    }
    free(W);
    free(in);
    free(relu);
    gopt_error err = {0};
    gopt_status st = gopt_graph_finalize(g, &err);
    if (st) fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(st, GOPT_OK);
    return g;
}

static double run_method(fixture *x, const char *spec, gopt_decisions *d, gopt_status want) {
    gopt_bl_combo c;
    gopt_error err = {0};
    assert_int_equal(gopt_bl_combo_parse(&x->reg, spec, &c, &err), GOPT_OK);
    gopt_status st = gopt_bl_combo_decide(&x->reg, &c, &x->pb, d, &err);
    if (st != want) fprintf(stderr, "%s: %s (%s)\n", spec, gopt_status_name(st), err.msg);
    assert_int_equal(st, want);
    if (st) return -1;
    assert_int_equal(gopt_decisions_validate(d, x->pb.graph, x->pb.ndev, &err), GOPT_OK);
    assert_int_equal(gopt_bl_memory_check(&x->pb, d, &err), GOPT_OK);
    int oom = 1;
    double t = gopt_bl_estimate(&x->pb, d, &oom);
    assert_true(isfinite(t) && t > 0);
    assert_int_equal(oom, 0);
    return t;
}

static const char *PLACERS[] = {"single", "expert", "metis", "heft", "mtopo", "metf", "msct", NULL};

/* ---- registry ---------------------------------------------------------------- */
static gopt_status dummy_place(const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err) {
    (void)err;
    for (int32_t v = 0; v < d->n; v++) d->device[v] = p->ndev - 1;
    return GOPT_OK;
}

static void test_registry(void **state) {
    (void)state;
    gopt_bl_registry r;
    gopt_bl_registry_init(&r);
    gopt_bl_combo c;
    gopt_error err = {0};
    assert_int_equal(gopt_bl_combo_parse(&r, "heft+cp+xla", &c, &err), GOPT_OK);
    assert_string_equal(c.part[GOPT_BL_PLACEMENT]->name, "heft");
    assert_string_equal(c.part[GOPT_BL_SCHEDULE]->name, "cp");
    assert_string_equal(c.part[GOPT_BL_FUSION]->name, "xla");
    assert_null(c.part[GOPT_BL_JOINT]);
    assert_int_equal(gopt_bl_combo_parse(&r, "tvm", &c, &err), GOPT_OK);
    assert_null(c.part[GOPT_BL_PLACEMENT]);
    assert_int_equal(gopt_bl_combo_parse(&r, "heft+bogus", &c, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "'bogus'"));
    assert_non_null(strstr(err.msg, "msct"));
    assert_non_null(strstr(err.msg, "placement:"));
    assert_int_equal(gopt_bl_combo_parse(&r, "heft+metis", &c, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "two placement methods"));
    assert_int_equal(gopt_bl_combo_parse(&r, "", &c, &err), GOPT_EINVAL);
    assert_int_equal(gopt_bl_combo_parse(&r, "heft+", &c, &err), GOPT_EINVAL);
    assert_int_equal(gopt_bl_combo_parse(&r, "+cp", &c, &err), GOPT_EINVAL);
    assert_int_equal(c.seeded, 0);
    /* "@sS": the combination's own seed */
    assert_int_equal(gopt_bl_combo_parse(&r, "metis+cp+xla@s3", &c, &err), GOPT_OK);
    assert_string_equal(c.part[GOPT_BL_PLACEMENT]->name, "metis");
    assert_string_equal(c.part[GOPT_BL_FUSION]->name, "xla");
    assert_int_equal(c.seeded, 1);
    assert_int_equal(c.seed, 3);
    assert_int_equal(gopt_bl_combo_parse(&r, "sa@s0", &c, &err), GOPT_OK);
    assert_int_equal(c.seeded, 1);
    assert_int_equal(c.seed, 0);
    static const char *const BAD_SEED[] = {"metis@s", "metis@3", "metis@sx", "metis@s3+cp", "metis@s-1",
                                           "metis@s 3", "metis@s3@s4", "metis@s99999999999999999999"};
    for (size_t i = 0; i < sizeof BAD_SEED / sizeof *BAD_SEED; i++) {
        assert_int_equal(gopt_bl_combo_parse(&r, BAD_SEED[i], &c, &err), GOPT_EINVAL);
        assert_non_null(strstr(err.msg, BAD_SEED[i]));
        assert_non_null(strstr(err.msg, "is not a seed suffix '@sS'"));
    }
    assert_int_equal(gopt_bl_combo_parse(&r, "bogus@s2", &c, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "unknown name 'bogus'"));
    for (int i = 0; PLACERS[i]; i++) {
        const gopt_bl_method *m = gopt_bl_registry_find(&r, PLACERS[i]);
        assert_non_null(m);
        assert_int_equal(m->kind, GOPT_BL_PLACEMENT);
        assert_true(strlen(m->doc) > 10);
    }
    /* extension without editing the module: a new placement method */
    gopt_bl_method mine = {"last-device", GOPT_BL_PLACEMENT, dummy_place, "all on the last device"};
    assert_int_equal(gopt_bl_registry_add(&r, &mine, &err), GOPT_OK);
    assert_int_equal(gopt_bl_registry_add(&r, &mine, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "already"));
    gopt_bl_method bad = {"Bad Name", GOPT_BL_PLACEMENT, dummy_place, "x"};
    assert_int_equal(gopt_bl_registry_add(&r, &bad, &err), GOPT_EINVAL);
    gopt_bl_method badkind = {"k", (gopt_bl_kind)7, dummy_place, "x"};
    assert_int_equal(gopt_bl_registry_add(&r, &badkind, &err), GOPT_EINVAL);
    gopt_bl_method nofn = {"nofn", GOPT_BL_FUSION, NULL, "x"};
    assert_int_equal(gopt_bl_registry_add(&r, &nofn, &err), GOPT_EINVAL);
    gopt_graph *g = two_chains(3);
    fixture x;
    fx_init(&x, g, 2, 1e12);
    x.reg = r;
    gopt_decisions d;
    run_method(&x, "last-device+cp", &d, GOPT_OK);
    for (int32_t v = 0; v < d.n; v++) assert_int_equal(d.device[v], 1);
    gopt_decisions_destroy(&d);
    gopt_buf b;
    gopt_buf_init(&b);
    gopt_bl_registry_describe(&r, &b);
    assert_non_null(strstr(b.data, "last-device"));
    assert_non_null(strstr(b.data, "joint: sa"));
    gopt_buf_destroy(&b);
    fx_destroy(&x);
    gopt_graph_free(g);
}

/* ---- known answers ------------------------------------------------------------- */
static void test_two_chains(void **state) {
    (void)state;
    gopt_graph *g = two_chains(5);
    fixture x;
    fx_init(&x, g, 2, 1e12);
    /* one chain: the first op 1 ms compute; the others read 100 MB and write 100 MB: 2 ms memory-bound */
    double chain = 0;
    for (int k = 0; k < 5; k++) chain += x.table.time[(size_t)k * 2];
    assert_true(fabs(chain - (1e-3 + 4 * 2e-3 + 5e-6)) < 1e-12);
    const char *best[] = {"heft", "metf", "msct", "metis", "heft+cp", "sa", "metf+cp+xla", NULL};
    x.pb.opt.max_evals = 2000;
    for (int i = 0; best[i]; i++) {
        gopt_decisions d;
        double t = run_method(&x, best[i], &d, GOPT_OK);
        if (fabs(t - chain) > 1e-9) fprintf(stderr, "%s: %.9g, want %.9g\n", best[i], t, chain);
        assert_true(fabs(t - chain) < 1e-9);
        /* each chain whole on one device, the two on different devices */
        for (int c = 0; c < 2; c++)
            for (int k = 1; k < 5; k++) assert_int_equal(d.device[c * 5 + k], d.device[c * 5]);
        assert_int_not_equal(d.device[0], d.device[5]);
        gopt_decisions_destroy(&d);
    }
    gopt_decisions d;
    double t = run_method(&x, "single", &d, GOPT_OK);
    assert_true(fabs(t - 2 * chain) < 1e-9);
    gopt_decisions_destroy(&d);
    fx_destroy(&x);
    gopt_graph_free(g);
}

static gopt_status all_on_zero(const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err) {
    (void)p;
    (void)err;
    for (int32_t v = 0; v < d->n; v++) d->device[v] = 0;
    return GOPT_OK;
}

static void test_too_big_for_one_device(void **state) {
    (void)state;
    /* 6 layers of 300 MB parameters (1.8 GB) on 1 GB devices */
    gopt_graph *g = mlp_step(6, 3e8, "mlp");
    fixture x;
    fx_init(&x, g, 4, 1e9);
    for (int i = 0; PLACERS[i]; i++) {
        gopt_decisions d;
        run_method(&x, PLACERS[i], &d, GOPT_OK);
        int used_devices = 0;
        double *use = calloc(4, sizeof *use);
        gopt_bl_memory_use(&x.pb, &d, use);
        for (int k = 0; k < 4; k++) {
            assert_true(use[k] <= 1e9);
            used_devices += use[k] > 0;
        }
        assert_true(used_devices >= 2);
        free(use);
        gopt_decisions_destroy(&d);
    }
    gopt_decisions d;
    run_method(&x, "heft+cp+tvm", &d, GOPT_OK);
    gopt_decisions_destroy(&d);
    x.pb.opt.max_evals = 100;
    run_method(&x, "metis+sa", &d, GOPT_OK);
    gopt_decisions_destroy(&d);
    /* a joint method (the GO policy's kind) answers to the evaluator, not to our model: its OOM
     * placement comes back valid, and the estimate reports the OOM */
    gopt_bl_method j = {"all0", GOPT_BL_JOINT, all_on_zero, "everything on device 0"};
    assert_int_equal(gopt_bl_registry_add(&x.reg, &j, NULL), GOPT_OK);
    gopt_bl_combo cj;
    assert_int_equal(gopt_bl_combo_parse(&x.reg, "heft+all0", &cj, NULL), GOPT_OK);
    assert_int_equal(gopt_bl_combo_decide(&x.reg, &cj, &x.pb, &d, NULL), GOPT_OK);
    int oom = 0;
    assert_true(gopt_bl_estimate(&x.pb, &d, &oom) > 0);
    assert_int_equal(oom, 1); /* device 0 */
    gopt_decisions_destroy(&d);
    fx_destroy(&x);
    /* one device cannot hold it: every method says so */
    fx_init(&x, g, 1, 1e9);
    for (int i = 0; PLACERS[i]; i++) {
        gopt_bl_combo c;
        gopt_error err = {0};
        assert_int_equal(gopt_bl_combo_parse(&x.reg, PLACERS[i], &c, &err), GOPT_OK);
        assert_int_equal(gopt_bl_combo_decide(&x.reg, &c, &x.pb, &d, &err), GOPT_EUNSUP);
        assert_non_null(strstr(err.msg, "no valid placement"));
        gopt_decisions_destroy(&d);
    }
    fx_destroy(&x);
    gopt_graph_free(g);
    /* one colocation group larger than any device */
    g = mlp_step(2, 1.2e9, "mlp");
    fx_init(&x, g, 4, 1e9);
    for (int i = 0; PLACERS[i]; i++) {
        gopt_bl_combo c;
        gopt_error err = {0};
        assert_int_equal(gopt_bl_combo_parse(&x.reg, PLACERS[i], &c, &err), GOPT_OK);
        assert_int_equal(gopt_bl_combo_decide(&x.reg, &c, &x.pb, &d, &err), GOPT_EUNSUP);
        assert_non_null(strstr(err.msg, "W0"));
        gopt_decisions_destroy(&d);
    }
    fx_destroy(&x);
    gopt_graph_free(g);
}

static void test_estimate_timeline(void **state) {
    (void)state;
    /* a -> b, 1e8 bytes; on two devices the step is t(a) + xfer + t(b) */
    gopt_graph *g = NULL;
    assert_int_equal(gopt_graph_create(&g, "pair", "test", NULL), GOPT_OK);
    int32_t a = add(g, "a", GOPT_OP_CLASS_OTHER, 1e9, 1e8, 0, GOPT_PHASE_NONE, -1, NULL);
    int32_t b = add(g, "b", GOPT_OP_CLASS_OTHER, 2e9, 1e3, 0, GOPT_PHASE_NONE, -1, NULL);
    edge(g, a, b, 1e8);
    assert_int_equal(gopt_graph_finalize(g, NULL), GOPT_OK);
    fixture x;
    fx_init(&x, g, 2, 1e12);
    gopt_decisions d;
    assert_int_equal(gopt_decisions_init(&d, 2, NULL), GOPT_OK);
    gopt_decisions_set_default(&d, gopt_graph_frozen(g));
    int oom = 1;
    double ta = x.table.time[0], tb = x.table.time[2];
    assert_true(fabs(gopt_bl_estimate(&x.pb, &d, &oom) - (ta + tb)) < 1e-12);
    assert_int_equal(oom, 0);
    d.device[1] = 1;
    double xf = gopt_cost_transfer_time(x.cm, 0, 1, 1e8);
    assert_true(xf > 0.09);
    assert_true(fabs(gopt_bl_estimate(&x.pb, &d, &oom) - (ta + xf + tb)) < 1e-12);
    /* fused on one device: both keep their kernels (class other), no memory pass: two launches,
     * compute summed, no traffic of the group's own (docs/costmodel.md, "Fused groups") */
    d.device[1] = 0;
    d.group[0] = d.group[1] = 1;
    double want = 2e-6 + x.table.compute[0] + x.table.compute[2];
    assert_true(fabs(gopt_bl_estimate(&x.pb, &d, &oom) - want) < 1e-12);
    gopt_decisions_destroy(&d);
    fx_destroy(&x);
    gopt_graph_free(g);
}

/* The baselines price a fused group as the cost model and the simulator do: one formula
 * (gopt_cost_group_price). in -> mm (gemm) -> bias -> relu -> sum (reduction) -> out, all but in
 * and out fused on one device: the memory pass moves what bias, relu and sum read from outside
 * (nothing: mm's output is the GEMM's epilogue) and what leaves (sum's output), hand-counted. */
static void test_estimate_group_is_cost_model(void **state) {
    (void)state;
    gopt_graph *g = NULL;
    assert_int_equal(gopt_graph_create(&g, "group", "test", NULL), GOPT_OK);
    double B = 4e6;
    int32_t in = add(g, "in", GOPT_OP_CLASS_INPUT, 0, B, 0, GOPT_PHASE_FWD, -1, NULL);
    int32_t mm = add(g, "mm", GOPT_OP_CLASS_GEMM, 1e9, B, 0, GOPT_PHASE_FWD, -1, NULL);
    int32_t bias = add(g, "bias", GOPT_OP_CLASS_ELEMENTWISE, 1e6, B, 0, GOPT_PHASE_FWD, -1, NULL);
    int32_t relu = add(g, "relu", GOPT_OP_CLASS_ELEMENTWISE, 1e6, B, 0, GOPT_PHASE_FWD, -1, NULL);
    int32_t sum = add(g, "sum", GOPT_OP_CLASS_REDUCTION, 1e6, 4e3, 0, GOPT_PHASE_FWD, -1, NULL);
    int32_t out = add(g, "out", GOPT_OP_CLASS_ELEMENTWISE, 1e3, 4e3, 0, GOPT_PHASE_FWD, -1, NULL);
    edge(g, in, mm, B);
    edge(g, mm, bias, B);
    edge(g, bias, relu, B);
    edge(g, relu, sum, B);
    edge(g, sum, out, 4e3);
    assert_int_equal(gopt_graph_finalize(g, NULL), GOPT_OK);
    fixture x;
    fx_init(&x, g, 1, 1e12);
    gopt_decisions d;
    assert_int_equal(gopt_decisions_init(&d, gopt_graph_num_nodes(g), NULL), GOPT_OK);
    gopt_decisions_set_default(&d, gopt_graph_frozen(g));
    d.group[mm] = d.group[bias] = d.group[relu] = d.group[sum] = mm;
    int32_t members[] = {mm, bias, relu, sum};
    double group = gopt_cost_group_time(&x.table, 0, members, 4, 4e3);
    /* the rule: the GEMM keeps its kernel and launch, the pass one launch and its bytes */
    double rule = x.table.compute[mm] + x.table.compute[bias] + x.table.compute[relu] + x.table.compute[sum] +
                  2 * x.table.launch[0] + 4e3 / x.table.mem_bw[0];
    assert_true(fabs(group - rule) <= 1e-12 * rule);
    const int32_t *owner = d.group;
    assert_true(fabs(gopt_cost_group_pass_bytes(&x.table, gopt_graph_frozen(g), members, 4, owner, mm) - 4e3) < 1e-9);
    int oom = 1;
    double want = group + x.table.time[out];
    double est = gopt_bl_estimate(&x.pb, &d, &oom);
    assert_true(fabs(est - want) <= 1e-12 * want);
    assert_int_equal(oom, 0);
    /* the simulator's step for the same decisions is the same figure */
    gopt_sim *sim = NULL;
    gopt_sim_scratch *scr = NULL;
    gopt_sim_result r;
    assert_int_equal(gopt_sim_create(g, x.cm, &sim, NULL), GOPT_OK);
    assert_int_equal(gopt_sim_scratch_create(sim, &scr, NULL), GOPT_OK);
    assert_int_equal(gopt_sim_run(sim, &d, &r, scr, NULL), GOPT_OK);
    assert_true(fabs(r.step_time_s - est) <= 1e-9 * est);
    /* and the fusion pass (XLA) judges merges by the same price: its groups' estimate is the
     * simulator's step too */
    gopt_decisions_destroy(&d);
    run_method(&x, "xla", &d, GOPT_OK);
    assert_true(d.group[bias] >= 0 && d.group[bias] == d.group[relu]);
    est = gopt_bl_estimate(&x.pb, &d, &oom);
    assert_int_equal(gopt_sim_run(sim, &d, &r, scr, NULL), GOPT_OK);
    assert_true(fabs(r.step_time_s - est) <= 1e-9 * est);
    gopt_sim_scratch_free(scr);
    gopt_sim_free(sim);
    gopt_decisions_destroy(&d);
    fx_destroy(&x);
    gopt_graph_free(g);
}

static void test_critical_path(void **state) {
    (void)state;
    /* s -> short (1 op), s -> long chain of 3: cp runs the long branch first */
    gopt_graph *g = NULL;
    assert_int_equal(gopt_graph_create(&g, "fork", "test", NULL), GOPT_OK);
    int32_t s = add(g, "s", GOPT_OP_CLASS_OTHER, 1e6, 1e3, 0, GOPT_PHASE_NONE, -1, NULL);
    int32_t sh = add(g, "short", GOPT_OP_CLASS_OTHER, 1e9, 1e3, 0, GOPT_PHASE_NONE, -1, NULL);
    int32_t l1 = add(g, "long1", GOPT_OP_CLASS_OTHER, 1e9, 1e3, 0, GOPT_PHASE_NONE, -1, NULL);
    int32_t l2 = add(g, "long2", GOPT_OP_CLASS_OTHER, 1e9, 1e3, 0, GOPT_PHASE_NONE, -1, NULL);
    int32_t l3 = add(g, "long3", GOPT_OP_CLASS_OTHER, 1e9, 1e3, 0, GOPT_PHASE_NONE, -1, NULL);
    edge(g, s, sh, 1e3);
    edge(g, s, l1, 1e3);
    edge(g, l1, l2, 1e3);
    edge(g, l2, l3, 1e3);
    assert_int_equal(gopt_graph_finalize(g, NULL), GOPT_OK);
    fixture x;
    fx_init(&x, g, 2, 1e12);
    gopt_decisions d;
    run_method(&x, "single+cp", &d, GOPT_OK);
    assert_true(d.priority[s] > d.priority[l1]);
    assert_true(d.priority[l1] > d.priority[sh]);
    assert_true(d.priority[l1] > d.priority[l2] && d.priority[l2] > d.priority[l3]);
    gopt_decisions_destroy(&d);
    run_method(&x, "single+fifo", &d, GOPT_OK);
    const gopt_frozen *f = gopt_graph_frozen(g);
    for (int32_t v = 0; v < f->n; v++) assert_int_equal(d.priority[v], f->n - f->rank[v]);
    gopt_decisions_destroy(&d);
    fx_destroy(&x);
    gopt_graph_free(g);
}

static void test_fusion_rules(void **state) {
    (void)state;
    /* gemm -> bias -> relu -> sum -> scale; relu also feeds out2 */
    gopt_graph *g = NULL;
    assert_int_equal(gopt_graph_create(&g, "fuse", "test", NULL), GOPT_OK);
    double B = 4e6;
    int32_t in = add(g, "in", GOPT_OP_CLASS_INPUT, 0, B, 0, GOPT_PHASE_FWD, -1, NULL);
    int32_t mm = add(g, "mm", GOPT_OP_CLASS_GEMM, 1e9, B, 0, GOPT_PHASE_FWD, -1, NULL);
    int32_t bias = add(g, "bias", GOPT_OP_CLASS_ELEMENTWISE, 1e6, B, 0, GOPT_PHASE_FWD, -1, NULL);
    int32_t relu = add(g, "relu", GOPT_OP_CLASS_ELEMENTWISE, 1e6, B, 0, GOPT_PHASE_FWD, -1, NULL);
    int32_t sum = add(g, "sum", GOPT_OP_CLASS_REDUCTION, 1e6, 4, 0, GOPT_PHASE_FWD, -1, NULL);
    int32_t scale = add(g, "scale", GOPT_OP_CLASS_ELEMENTWISE, 1, 4, 0, GOPT_PHASE_FWD, -1, NULL);
    int32_t out2 = add(g, "out2", GOPT_OP_CLASS_ELEMENTWISE, 1e6, B, 0, GOPT_PHASE_FWD, -1, NULL);
    edge(g, in, mm, B);
    edge(g, mm, bias, B);
    edge(g, bias, relu, B);
    edge(g, relu, sum, B);
    edge(g, sum, scale, 4);
    edge(g, relu, out2, B);
    assert_int_equal(gopt_graph_finalize(g, NULL), GOPT_OK);
    fixture x;
    fx_init(&x, g, 1, 1e12);
    gopt_decisions d;
    double t_none = run_method(&x, "single+fifo+none", &d, GOPT_OK);
    for (int32_t v = 0; v < d.n; v++) assert_int_equal(d.group[v], -1);
    gopt_decisions_destroy(&d);
    double t_tvm = run_method(&x, "tvm", &d, GOPT_OK);
    /* the chain mm -> bias -> relu fuses (epilogues into the GEMM); relu has two consumers: chain ends */
    assert_true(d.group[mm] >= 0 && d.group[mm] == d.group[bias] && d.group[bias] == d.group[relu]);
    assert_true(d.group[sum] < 0 || d.group[sum] != d.group[relu]);
    /* reductions last: scale does not join the group ending in sum */
    assert_true(d.group[scale] < 0 || d.group[scale] != d.group[sum]);
    assert_int_equal(d.group[in], -1);
    assert_true(t_tvm < t_none);
    gopt_decisions_destroy(&d);
    double t_xla = run_method(&x, "xla", &d, GOPT_OK);
    assert_true(d.group[bias] >= 0 && d.group[bias] == d.group[relu]);
    assert_int_equal(d.group[in], -1);
    assert_true(t_xla < t_none);
    gopt_decisions_destroy(&d);
    fx_destroy(&x);
    gopt_graph_free(g);
}

/* xlamo: a producer whose result also leaves the group (a convolution feeding its batch norm and
 * the norm's backward) joins its consumer's group when no path comes back; xla leaves it out. With
 * a path back through another kernel (conv -> k -> norm, k a GEMM that cannot join), neither joins
 * it. */
static void test_fusion_multi_output(void **state) {
    (void)state;
    for (int back = 0; back < 2; back++) {
        gopt_graph *g = NULL;
        assert_int_equal(gopt_graph_create(&g, "mo", "test", NULL), GOPT_OK);
        double B = 4e6;
        int32_t in = add(g, "in", GOPT_OP_CLASS_INPUT, 0, B, 0, GOPT_PHASE_FWD, -1, NULL);
        int32_t w = add(g, "w", GOPT_OP_CLASS_PARAM, 0, 512, 512, GOPT_PHASE_NONE, -1, NULL);
        int32_t conv = add(g, "conv", GOPT_OP_CLASS_CONV, 1e9, B, 0, GOPT_PHASE_FWD, -1, NULL);
        int32_t norm = add(g, "norm", GOPT_OP_CLASS_ELEMENTWISE, 1e6, B, 0, GOPT_PHASE_FWD, -1, NULL);
        int32_t act = add(g, "act", GOPT_OP_CLASS_ELEMENTWISE, 1e6, B, 0, GOPT_PHASE_FWD, -1, NULL);
        int32_t nb = add(g, "norm_backward", GOPT_OP_CLASS_GEMM, 1e9, B, 0, GOPT_PHASE_BWD, -1, NULL);
        edge(g, in, conv, B);
        edge(g, conv, norm, B);
        edge(g, w, norm, 512);
        edge(g, norm, act, B);
        edge(g, conv, nb, B);
        if (back) edge(g, nb, norm, B); /* conv -> nb -> norm: conv cannot join norm's group */
        else edge(g, w, nb, 512);
        assert_int_equal(gopt_graph_finalize(g, NULL), GOPT_OK);
        fixture x;
        fx_init(&x, g, 1, 1e12);
        gopt_decisions d;
        double t_xla = run_method(&x, "xla", &d, GOPT_OK);
        assert_true(d.group[norm] >= 0 && d.group[norm] == d.group[act]); /* the epilogue chain */
        assert_true(d.group[conv] != d.group[norm]);
        gopt_decisions_destroy(&d);
        double t_mo = run_method(&x, "xlamo", &d, GOPT_OK);
        if (!back) {
            assert_true(d.group[conv] >= 0 && d.group[conv] == d.group[norm] && d.group[norm] == d.group[act]);
            assert_true(t_mo < t_xla); /* the norm reads the convolution's result in its epilogue */
        } else {
            assert_true(d.group[conv] != d.group[norm]);
        }
        gopt_decisions_destroy(&d);
        fx_destroy(&x);
        gopt_graph_free(g);
    }
}


/* The exact legality of xlamo (bl_fuse_exact): on random DAGs, merging the groups at the ends of a
 * random edge is allowed iff the contracted graph stays acyclic (checked by brute force: Kahn's
 * algorithm over the groups), and after every merge s.ord is a topological order of the groups.
 * Graphs of 60 nodes keep every search under BL_FUSE_SEARCH, so no refusal is conservative. */
static int contracted_acyclic(const gopt_frozen *f, const int32_t *gid_of, int32_t n) {
    int32_t *indeg = calloc((size_t)n, sizeof *indeg), *q = malloc((size_t)n * sizeof *q);
    int32_t groups = 0, qh = 0, qt = 0;
    for (int32_t v = 0; v < n; v++) {
        groups += gid_of[v] == v;
        for (int32_t e = f->out_ptr[v]; e < f->out_ptr[v + 1]; e++)
            if (gid_of[f->out_dst[e]] != gid_of[v]) indeg[gid_of[f->out_dst[e]]]++;
    }
    for (int32_t v = 0; v < n; v++)
        if (gid_of[v] == v && indeg[v] == 0) q[qt++] = v;
    while (qh < qt) {
        int32_t g = q[qh++];
        for (int32_t v = 0; v < n; v++)
            if (gid_of[v] == g)
                for (int32_t e = f->out_ptr[v]; e < f->out_ptr[v + 1]; e++) {
                    int32_t h = gid_of[f->out_dst[e]];
                    if (h != g && --indeg[h] == 0) q[qt++] = h;
                }
    }
    free(indeg);
    free(q);
    return qt == groups;
}

static void test_fusion_exact_order(void **state) {
    (void)state;
    gopt_rng rng;
    gopt_rng_seed(&rng, 7);
    int legal = 0, illegal = 0;
    for (int trial = 0; trial < 40; trial++) {
        gopt_graph *g = NULL;
        assert_int_equal(gopt_graph_create(&g, "dag", "test", NULL), GOPT_OK);
        const int32_t n = 60;
        for (int32_t i = 0; i < n; i++) {
            char nm[16];
            snprintf(nm, sizeof nm, "v%d", i);
            add(g, nm, GOPT_OP_CLASS_ELEMENTWISE, 1e6, 1e4, 0, GOPT_PHASE_FWD, -1, NULL);
        }
        for (int32_t j = 1; j < n; j++) /* each node 1-3 inputs from the last 12 */
            for (int k = 0, m = 1 + (int)gopt_rng_below(&rng, 3); k < m; k++) {
                int32_t i = j - 1 - (int32_t)gopt_rng_below(&rng, (uint32_t)(j < 12 ? j : 12));
                gopt_graph_add_edge(g, i, j, 1e4, NULL); /* a repeated edge is refused: fine */
            }
        assert_int_equal(gopt_graph_finalize(g, NULL), GOPT_OK);
        fixture x;
        fx_init(&x, g, 1, 1e12);
        gopt_decisions d;
        assert_int_equal(gopt_decisions_init(&d, n, NULL), GOPT_OK);
        for (int32_t v = 0; v < n; v++) {
            d.device[v] = 0;
            d.group[v] = -1;
        }
        bl_fuse s;
        assert_int_equal(bl_fuse_init(&s, &x.pb, &d, NULL), GOPT_OK);
        assert_int_equal(bl_fuse_exact(&s, NULL), GOPT_OK);
        const gopt_frozen *f = s.f;
        int32_t *gid = malloc((size_t)n * sizeof *gid), *trial_gid = malloc((size_t)n * sizeof *trial_gid);
        for (int step = 0; step < 80; step++) {
            int32_t u = (int32_t)gopt_rng_below(&rng, (uint32_t)n);
            if (f->out_ptr[u] == f->out_ptr[u + 1]) continue;
            int32_t v = f->out_dst[f->out_ptr[u] + (int32_t)gopt_rng_below(&rng, (uint32_t)(f->out_ptr[u + 1] - f->out_ptr[u]))];
            int32_t gu = bl_fuse_gid(&s, u), gv = bl_fuse_gid(&s, v);
            if (gu == gv) continue;
            for (int32_t w = 0; w < n; w++) {
                gid[w] = bl_fuse_gid(&s, w);
                trial_gid[w] = gid[w] == gv ? gu : gid[w];
            }
            const int expect = contracted_acyclic(f, trial_gid, n);
            assert_int_equal(bl_fuse_can_merge(&s, d.device, gu, gv), expect);
            legal += expect;
            illegal += !expect;
            if (!expect) continue;
            int32_t m = bl_fuse_merge(&s, gu, gv);
            for (int32_t w = 0; w < n; w++) /* the order: every edge between groups goes forward */
                for (int32_t e = f->out_ptr[w]; e < f->out_ptr[w + 1]; e++) {
                    int32_t a = bl_fuse_gid(&s, w), b = bl_fuse_gid(&s, f->out_dst[e]);
                    if (a != b) assert_true(s.ord[a] < s.ord[b]);
                }
            assert_int_equal(bl_fuse_gid(&s, u), m);
        }
        free(gid);
        free(trial_gid);
        bl_fuse_destroy(&s);
        gopt_decisions_destroy(&d);
        fx_destroy(&x);
        gopt_graph_free(g);
    }
    assert_true(legal > 200 && illegal > 200); /* both answers exercised */
}

/* ---- validity and determinism ------------------------------------------------------ */
static void check_all_methods(gopt_graph *g, int ndev, double mem) {
    fixture x;
    fx_init(&x, g, ndev, mem);
    x.pb.opt.max_evals = 60;
    static const char *SCHED[] = {"fifo", "cp"}, *FUSE[] = {"none", "xla", "xlamo", "tvm"};
    for (int i = 0; PLACERS[i]; i++)
        for (int s = 0; s < 2; s++)
            for (int u = 0; u < 4; u++) {
                char spec[64];
                snprintf(spec, sizeof spec, "%s+%s+%s", PLACERS[i], SCHED[s], FUSE[u]);
                gopt_decisions d;
                run_method(&x, spec, &d, GOPT_OK);
                gopt_decisions_destroy(&d);
            }
    gopt_decisions d;
    run_method(&x, "sa", &d, GOPT_OK);
    gopt_decisions_destroy(&d);
    run_method(&x, "heft+cp+xla+sa", &d, GOPT_OK);
    gopt_decisions_destroy(&d);
    fx_destroy(&x);
}

static void test_validity_generated(void **state) {
    (void)state;
    const char *fams[] = {"mlp", "gnmt", "resnet"};
    for (int i = 0; i < 3; i++) {
        gopt_graph *g = mlp_step(8 + 4 * i, 1e7, fams[i]);
        check_all_methods(g, 4, 1e12);
        check_all_methods(g, 8, 1e12);
        check_all_methods(g, 1, 1e12);
        check_all_methods(g, 3, 6e6 * (8 + 4 * i)); /* tight memory (about 2/3 of the need on one device) */
        gopt_graph_free(g);
    }
}

/* expert on an 8-layer MLP step of `family` over 4 devices: the layers split in
 * order, layer l's matmul on device l / 2. */
static void expect_layer_split(const char *family) {
    gopt_graph *g = mlp_step(8, 1e7, family);
    fixture x;
    fx_init(&x, g, 4, 1e12);
    gopt_decisions d;
    run_method(&x, "expert", &d, GOPT_OK);
    for (int l = 0; l < 8; l++) {
        char nm[32];
        snprintf(nm, sizeof nm, "matmul%d", l);
        assert_int_equal(d.device[gopt_graph_find(g, nm)], l / 2);
    }
    gopt_decisions_destroy(&d);
    fx_destroy(&x);
    gopt_graph_free(g);
}

static void test_expert_rules(void **state) {
    (void)state;
    expect_layer_split("gnmt");
    gopt_graph *g = mlp_step(8, 1e7, "resnet"); /* fits one device: kept there */
    fixture x;
    gopt_decisions d;
    fx_init(&x, g, 4, 1e12);
    run_method(&x, "expert", &d, GOPT_OK);
    for (int32_t v = 0; v < d.n; v++) assert_int_equal(d.device[v], 0);
    gopt_decisions_destroy(&d);
    fx_destroy(&x);
    fx_init(&x, g, 4, 2.5e7 * 1.0 + 4 * 64 * 1024 * 30); /* does not: the fewest devices that hold it */
    run_method(&x, "expert", &d, GOPT_OK);
    int maxdev = 0;
    for (int32_t v = 0; v < d.n; v++)
        if (d.device[v] > maxdev) maxdev = d.device[v];
    assert_true(maxdev >= 1);
    gopt_decisions_destroy(&d);
    fx_destroy(&x);
    gopt_graph_free(g);
}

/* A recommender (synthetic kind tables): expert shards it table-wise. Every
 * table sits with its lookup, the ops that produce its gradient and its
 * update; the tables are spread over the devices; and the step is faster
 * than on one device. A graph whose weights feed GEMMs (family "mlp") keeps
 * the layer split. */
static void test_expert_tables(void **state) {
    (void)state;
    gopt_rng rng;
    gopt_rng_seed(&rng, 3);
    gopt_synth_opts so = {GOPT_SYNTH_TABLES, 200, 100, 400, 0};
    gopt_graph *g = NULL;
    gopt_error err = {0};
    assert_int_equal(gopt_zoo_synthetic(&rng, &so, "tables", &g, &err), GOPT_OK);
    const gopt_frozen *f = gopt_graph_frozen(g);
    fixture x;
    fx_init(&x, g, 4, 1e12);
    gopt_decisions d;
    double t_expert = run_method(&x, "expert", &d, GOPT_OK);
    int tables = 0, used[4] = {0};
    for (int32_t v = 0; v < f->n; v++) {
        const char *nm = gopt_graph_node_name(g, v);
        const char *slash = strstr(nm, "/table");
        if (!slash || slash[6] || f->op_class[v] != GOPT_OP_CLASS_PARAM) continue; /* embedding_K/table */
        tables++;
        used[d.device[v]] = 1;
        char want[96];
        snprintf(want, sizeof want, "%.*s/GatherV2", (int)(slash - nm), nm);
        int32_t look = gopt_graph_find(g, want);
        assert_true(look >= 0);
        assert_int_equal(d.device[look], d.device[v]);
        for (int32_t w = 0; w < f->n; w++) /* the update (colocated) and its gradient's producers */
            if (f->coloc[v] >= 0 && f->coloc[w] == f->coloc[v]) {
                assert_int_equal(d.device[w], d.device[v]);
                for (int32_t e = f->in_ptr[w]; e < f->in_ptr[w + 1]; e++)
                    if (f->phase[f->in_src[e]] == GOPT_PHASE_BWD) assert_int_equal(d.device[f->in_src[e]], d.device[v]);
            }
    }
    assert_true(tables >= 2);
    assert_true(used[0] + used[1] + used[2] + used[3] >= 2);
    for (int32_t v = 0; v < f->n; v++) { /* the dense model stays on device 0 */
        const char *nm = gopt_graph_node_name(g, v);
        if (!strncmp(nm, "bottom_mlp/", 11) || !strncmp(nm, "top_mlp/", 8) || !strncmp(nm, "interaction/", 12))
            assert_int_equal(d.device[v], 0);
    }
    gopt_decisions_destroy(&d);
    double t_single = run_method(&x, "single", &d, GOPT_OK);
    assert_true(t_expert < t_single);
    gopt_decisions_destroy(&d);
    fx_destroy(&x);
    gopt_graph_free(g);
    expect_layer_split("mlp"); /* weights read by GEMMs: no tables, the layer split */
}

static void test_determinism(void **state) {
    (void)state;
    gopt_graph *g = mlp_step(10, 1e7, "mlp");
    fixture x;
    fx_init(&x, g, 4, 1e12);
    x.pb.opt.max_evals = 150;
    const char *specs[] = {"single", "expert", "metis", "heft+cp+xla", "mtopo", "metf+tvm", "msct+cp", "sa",
                           "metis+cp+xla+sa", NULL};
    for (int i = 0; specs[i]; i++) {
        gopt_decisions a, b;
        x.pb.opt.seed = 7;
        run_method(&x, specs[i], &a, GOPT_OK);
        run_method(&x, specs[i], &b, GOPT_OK);
        assert_memory_equal(a.device, b.device, (size_t)a.n * sizeof *a.device);
        assert_memory_equal(a.priority, b.priority, (size_t)a.n * sizeof *a.priority);
        assert_memory_equal(a.group, b.group, (size_t)a.n * sizeof *a.group);
        gopt_decisions_destroy(&a);
        gopt_decisions_destroy(&b);
    }
    fx_destroy(&x);
    gopt_graph_free(g);
}

/* ---- the evaluator seam --------------------------------------------------------------- */
typedef struct {
    long calls;
    const gopt_bl_problem *pb;
    double last_used[8];
} counter;

static double counting_eval(void *ctx, const gopt_decisions *d, int *oom) {
    counter *c = ctx;
    c->calls++;
    gopt_bl_problem q = *c->pb;
    q.evaluate = NULL;
    return gopt_bl_estimate(&q, d, oom);
}

/* An evaluator whose device 0 is smaller than the model thinks: OOM there
 * when it holds more than 6 of the 10 nodes. */
static double small_dev0_eval(void *ctx, const gopt_decisions *d, int *oom) {
    counter *c = ctx;
    c->calls++;
    gopt_bl_problem q = *c->pb;
    q.evaluate = NULL;
    double t = gopt_bl_estimate(&q, d, oom);
    int on0 = 0;
    for (int32_t v = 0; v < d->n; v++) on0 += d->device[v] == 0;
    if (on0 > 6) *oom = 1;
    return t;
}

/* gopt_bl_combo_decide_memo: the decisions of gopt_bl_combo_decide, the placement run once per
 * placer and seed; a refusal kept with its message; a shared stream never memoized; the step it
 * reports, when it reports one, the evaluator's for those decisions (counted in memo_steps) */
static int memo_steps;
static void combo_pair(fixture *x, const gopt_bl_problem *p, const char *spec, gopt_bl_place_memo *memo,
                       gopt_status want) {
    gopt_bl_combo c;
    gopt_error e1 = {0}, e2 = {0};
    gopt_decisions a, b;
    assert_int_equal(gopt_bl_combo_parse(&x->reg, spec, &c, &e1), GOPT_OK);
    double step = 0;
    gopt_status s1 = gopt_bl_combo_decide_memo(&x->reg, &c, p, memo, &a, &step, &e1);
    gopt_status s2 = gopt_bl_combo_decide(&x->reg, &c, p, &b, &e2);
    assert_int_equal(s1, want);
    assert_int_equal(s2, want);
    if (want) assert_string_equal(e1.msg, e2.msg);
    else {
        size_t s = sizeof(int32_t) * (size_t)a.n;
        assert_memory_equal(a.device, b.device, s);
        assert_memory_equal(a.priority, b.priority, s);
        assert_memory_equal(a.group, b.group, s);
        int oom = 0;
        double t = gopt_bl_evaluate(p, &b, &oom);
        if (!isnan(step)) {
            assert_true(p->evaluate != NULL);
            assert_false(oom);
            assert_true(step == t);
            memo_steps++;
        }
    }
    gopt_decisions_destroy(&a);
    gopt_decisions_destroy(&b);
}

static void test_combo_memo(void **state) {
    (void)state;
    gopt_graph *g = two_chains(6);
    fixture x;
    fx_init(&x, g, 2, 1e12);
    const char *placers[] = {"heft", "metf", "metis", "msct", "expert"};
    const char *rest[] = {"+cp+xla", "+fifo+xla", "+cp+tvm", "+cp+xlamo", "+fifo+xlamo"};
    gopt_bl_place_memo memo;
    memset(&memo, 0, sizeof memo);
    for (int i = 0; i < 5; i++)
        for (int k = 0; k < 5; k++) {
            char spec[64];
            snprintf(spec, sizeof spec, "%s%s", placers[i], rest[k]);
            combo_pair(&x, &x.pb, spec, &memo, GOPT_OK);
            assert_true(memo.valid && memo.st == GOPT_OK && memo.seed == 1);
            assert_string_equal(memo.place->name, placers[i]); /* another placer replaces it */
            /* the fusion part kept, for the fifo twin on the same placement (same groups checked above) */
            assert_non_null(memo.fuse);
            assert_string_equal(memo.fuse->name, strrchr(rest[k], '+') + 1);
        }
    /* a draw at another seed is not the memo's: METIS at seed 1 kept, then @s3 and @s4 each theirs */
    combo_pair(&x, &x.pb, "metis+cp+xla", &memo, GOPT_OK);
    combo_pair(&x, &x.pb, "metis+cp+xla@s3", &memo, GOPT_OK);
    assert_true(memo.seed == 3);
    combo_pair(&x, &x.pb, "metis+fifo+xla@s3", &memo, GOPT_OK);
    combo_pair(&x, &x.pb, "metis+fifo+xlamo@s4", &memo, GOPT_OK);
    assert_true(memo.seed == 4);
    gopt_bl_place_memo_free(&memo);
    assert_false(memo.valid);
    /* a caller's stream is shared: never memoized */
    gopt_rng rng;
    gopt_rng_seed(&rng, 9);
    gopt_bl_problem pr = x.pb;
    pr.rng = &rng;
    combo_pair(&x, &pr, "heft+cp+xla", &memo, GOPT_OK);
    assert_false(memo.valid);
    /* with an evaluator each answer comes with its step, the evaluator's (checked in combo_pair);
     * without one, none (the estimate is the caller's to make) */
    counter cn = {0, &x.pb, {0}};
    gopt_bl_problem pe = x.pb;
    pe.evaluate = counting_eval;
    pe.eval_ctx = &cn;
    memo_steps = 0;
    for (int k = 0; k < 5; k++) {
        char spec[64];
        snprintf(spec, sizeof spec, "heft%s", rest[k]);
        combo_pair(&x, &pe, spec, &memo, GOPT_OK);
    }
    assert_int_equal(memo_steps, 5);
    assert_true(cn.calls >= 5 + 5); /* one check in each run, one in combo_pair */
    gopt_bl_place_memo_free(&memo);
    memo_steps = 0;
    combo_pair(&x, &x.pb, "heft+cp+xla", &memo, GOPT_OK);
    assert_int_equal(memo_steps, 0);
    gopt_bl_place_memo_free(&memo);
    fx_destroy(&x);
    /* a placement that fits nowhere: its refusal kept, the same message each time */
    fx_init(&x, g, 2, 1e6);
    for (int k = 0; k < 3; k++) combo_pair(&x, &x.pb, k == 1 ? "single+fifo+xla" : "single+cp+xla", &memo, GOPT_EUNSUP);
    assert_true(memo.valid && memo.st == GOPT_EUNSUP && memo.err.msg[0]);
    gopt_bl_place_memo_free(&memo);
    fx_destroy(&x);
    gopt_graph_free(g);
}

/* gopt_bl_parallel: every item once, each on a problem that judges as p does and has no random
 * stream; forks refused for an evaluator that is not the simulator's (then one thread, in order) */
typedef struct {
    gopt_decisions d[7];
    double s[7];
    int runs[7];
    const gopt_bl_problem *on[7];
} par_items;

static void par_item(void *ctx, const gopt_bl_problem *q, int i) {
    par_items *w = ctx;
    int oom = 0;
    w->runs[i]++;
    w->on[i] = q;
    w->s[i] = gopt_bl_evaluate(q, &w->d[i], &oom);
}

static void test_parallel_items(void **state) {
    (void)state;
    gopt_graph *g = two_chains(5);
    fixture x;
    fx_init(&x, g, 2, 1e12);
    gopt_error err = {0};
    gopt_sim *sim = NULL;
    gopt_sim_scratch *scr = NULL;
    assert_int_equal(gopt_sim_create(g, x.cm, &sim, &err), GOPT_OK);
    assert_int_equal(gopt_sim_scratch_create(sim, &scr, &err), GOPT_OK);
    gopt_bl_sim_ctx sc;
    gopt_bl_problem p;
    gopt_bl_problem_on_sim(&p, &sc, sim, scr, x.cm, &x.pb.opt);
    par_items w;
    memset(&w, 0, sizeof w);
    const char *methods[] = {"single", "heft", "metf", "metis", "mtopo", "expert", "msct"};
    for (int i = 0; i < 7; i++) run_method(&x, methods[i], &w.d[i], GOPT_OK);
    double want[7];
    for (int i = 0; i < 7; i++) {
        int oom = 0;
        want[i] = gopt_bl_evaluate(&p, &w.d[i], &oom);
        assert_true(want[i] > 0);
    }
    /* a fork: its own scratch, the same steps */
    gopt_bl_problem q;
    gopt_bl_sim_ctx qc;
    assert_int_equal(gopt_bl_problem_fork(&p, &q, &qc, &err), GOPT_OK);
    assert_ptr_equal(q.eval_ctx, &qc);
    assert_ptr_equal(qc.sim, sim);
    assert_true(qc.scratch != NULL && qc.scratch != scr);
    gopt_bl_problem_fork_free(&qc);
    assert_null(qc.scratch);
    for (int threads = 1; threads <= 9; threads += 2) {
        memset(w.runs, 0, sizeof w.runs);
        assert_int_equal(gopt_bl_parallel(&p, 7, threads, par_item, &w, &err), GOPT_OK);
        for (int i = 0; i < 7; i++) {
            assert_int_equal(w.runs[i], 1);
            assert_true(w.s[i] == want[i]);
            assert_true(w.on[i] != &p); /* a copy or a fork */
        }
    }
    /* forks made once, run twice: the same steps each time, no scratch made per run */
    gopt_bl_forks fk;
    assert_int_equal(gopt_bl_forks_init(&p, 3, &fk, &err), GOPT_OK);
    assert_int_equal(fk.T, 3);
    for (int run = 0; run < 2; run++) {
        memset(w.runs, 0, sizeof w.runs);
        gopt_bl_forks_run(&fk, 7, par_item, &w);
        for (int i = 0; i < 7; i++) assert_true(w.runs[i] == 1 && w.s[i] == want[i] && w.on[i] != &p);
    }
    gopt_bl_forks_free(&fk);
    assert_int_equal(fk.T, 0);
    /* not forked: another evaluator; every item in order, on one copy of p */
    counter c = {0, &x.pb, {0}};
    gopt_bl_problem pc = x.pb;
    pc.evaluate = counting_eval;
    pc.eval_ctx = &c;
    assert_int_equal(gopt_bl_problem_fork(&pc, &q, &qc, &err), GOPT_EUNSUP);
    assert_non_null(strstr(err.msg, "one thread"));
    memset(w.runs, 0, sizeof w.runs);
    assert_int_equal(gopt_bl_parallel(&pc, 7, 3, par_item, &w, &err), GOPT_OK);
    assert_int_equal(c.calls, 7);
    for (int i = 0; i < 7; i++) assert_true(w.runs[i] == 1 && w.on[i] == w.on[0] && w.on[i] != &pc);
    /* a random stream stays the caller's: a fork has none */
    gopt_rng rng;
    gopt_rng_seed(&rng, 3);
    gopt_bl_problem pr = p;
    pr.rng = &rng;
    assert_int_equal(gopt_bl_problem_fork(&pr, &q, &qc, &err), GOPT_OK);
    assert_null(q.rng);
    gopt_bl_problem_fork_free(&qc);
    assert_int_equal(gopt_bl_parallel(&pr, 7, 3, par_item, &w, &err), GOPT_OK);
    for (int i = 0; i < 7; i++) assert_true(w.on[i] != &pr && w.s[i] == want[i]);
    /* the estimate (no evaluator) forks without a scratch */
    gopt_bl_problem pe = x.pb;
    assert_int_equal(gopt_bl_problem_fork(&pe, &q, &qc, &err), GOPT_OK);
    assert_null(qc.scratch);
    assert_int_equal(gopt_bl_parallel(&pe, 0, 2, par_item, &w, &err), GOPT_OK); /* no items: nothing */
    for (int i = 0; i < 7; i++) gopt_decisions_destroy(&w.d[i]);
    gopt_sim_scratch_free(scr);
    gopt_sim_free(sim);
    fx_destroy(&x);
    gopt_graph_free(g);
}

static void test_oom_feedback(void **state) {
    (void)state;
    gopt_graph *g = two_chains(5);
    fixture x;
    fx_init(&x, g, 2, 1e12);
    counter c = {0, &x.pb, {0}};
    x.pb.evaluate = small_dev0_eval;
    x.pb.eval_ctx = &c;
    gopt_decisions d;
    run_method(&x, "single", &d, GOPT_OK);
    int on0 = 0;
    for (int32_t v = 0; v < d.n; v++) on0 += d.device[v] == 0;
    assert_true(on0 <= 6 && on0 > 0);
    assert_true(c.calls >= 2);
    gopt_decisions_destroy(&d);
    fx_destroy(&x);
    gopt_graph_free(g);
}

/* An evaluator that sees twice the memory our model counts, and says so
 * through last_peak. */
static double double_mem_eval(void *ctx, const gopt_decisions *d, int *oom) {
    counter *c = ctx;
    c->calls++;
    gopt_bl_problem q = *c->pb;
    q.evaluate = NULL;
    double t = gopt_bl_estimate(&q, d, oom);
    double used[8];
    gopt_bl_memory_use(&q, d, used);
    *oom = 0;
    for (int k = 0; k < q.ndev; k++)
        if (2 * used[k] > gopt_cost_device_memory(q.cm, k)) *oom = 1 + k;
    return t;
}

static int double_mem_peak(void *ctx, double *peak) {
    counter *c = ctx; /* twice what the model counted for the last call's decisions */
    for (int k = 0; k < c->pb->ndev; k++) peak[k] = 2 * c->last_used[k];
    return 1;
}

static double double_mem_eval_keep(void *ctx, const gopt_decisions *d, int *oom) {
    counter *c = ctx;
    gopt_bl_problem q = *c->pb;
    q.evaluate = NULL;
    gopt_bl_memory_use(&q, d, c->last_used);
    return double_mem_eval(ctx, d, oom);
}

/* x's evaluator: twice the model's memory, with peaks (c counts its calls) */
static void use_double_mem_eval(fixture *x, counter *c) {
    *c = (counter){0, &x->pb, {0}};
    x->pb.evaluate = double_mem_eval_keep;
    x->pb.eval_ctx = c;
    x->pb.last_peak = double_mem_peak;
}

static void test_oom_feedback_peak(void **state) {
    (void)state;
    gopt_graph *g = two_chains(5); /* 10 nodes of 100 MB each under the model */
    fixture x;
    fx_init(&x, g, 2, 1.5e9);
    counter c;
    use_double_mem_eval(&x, &c);
    const char *methods[] = {"single", "heft", "metf", "mtopo", NULL};
    for (int i = 0; methods[i]; i++) {
        gopt_decisions d;
        run_method(&x, methods[i], &d, GOPT_OK);
        double used[2];
        gopt_bl_problem q = x.pb;
        gopt_bl_memory_use(&q, &d, used);
        if (!(2 * used[0] <= 1.5e9 && 2 * used[1] <= 1.5e9))
            fprintf(stderr, "%s: %.3g %.3g\n", methods[i], used[0], used[1]);
        assert_true(2 * used[0] <= 1.5e9 && 2 * used[1] <= 1.5e9); /* fits as the evaluator sees it */
        gopt_decisions_destroy(&d);
    }
    fx_destroy(&x);
    gopt_graph_free(g);
}

/* A joint method (the GO policy's kind) decides everything itself: it gets the
 * caller's memory budget, not the capacities that the repair of the default
 * placement before it tightened (single overflows here as the evaluator sees
 * it, so that repair runs). */
static double joint_cap_seen[2];

static gopt_status cap_joint(const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err) {
    (void)d;
    (void)err;
    for (int k = 0; k < 2; k++) joint_cap_seen[k] = gopt_bl_device_capacity(p, k);
    return GOPT_OK;
}

static void test_joint_gets_caller_budget(void **state) {
    (void)state;
    gopt_graph *g = two_chains(5);
    fixture x;
    fx_init(&x, g, 2, 1.5e9);
    counter c;
    use_double_mem_eval(&x, &c);
    gopt_bl_method j = {"capjoint", GOPT_BL_JOINT, cap_joint, "records the capacities it sees"};
    assert_int_equal(gopt_bl_registry_add(&x.reg, &j, NULL), GOPT_OK);
    for (int frac = 0; frac < 2; frac++) {
        x.pb.opt.mem_fraction = frac ? 0.9 : 0; /* 0: all of it */
        c.calls = 0;
        gopt_decisions d;
        run_method(&x, "capjoint", &d, GOPT_OK);
        assert_true(c.calls >= 2); /* the default placement was repaired */
        for (int k = 0; k < 2; k++) assert_true(joint_cap_seen[k] == (frac ? 0.9 : 1.0) * 1.5e9);
        gopt_decisions_destroy(&d);
    }
    fx_destroy(&x);
    gopt_graph_free(g);
}

static void test_evaluator_callback(void **state) {
    (void)state;
    gopt_graph *g = two_chains(4);
    fixture x;
    fx_init(&x, g, 2, 1e12);
    counter c = {0, &x.pb, {0}};
    x.pb.evaluate = counting_eval;
    x.pb.eval_ctx = &c;
    x.pb.opt.max_evals = 50;
    gopt_decisions d;
    run_method(&x, "sa", &d, GOPT_OK);
    assert_int_equal(c.calls, 52); /* the placement OOM check, the start, then max_evals */
    gopt_decisions_destroy(&d);
    /* the method asked for more devices than the cost model has */
    x.pb.ndev = 3;
    gopt_bl_combo cb;
    gopt_error err = {0};
    assert_int_equal(gopt_bl_combo_parse(&x.reg, "heft", &cb, &err), GOPT_OK);
    assert_int_equal(gopt_bl_combo_decide(&x.reg, &cb, &x.pb, &d, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "3 devices"));
    fx_destroy(&x);
    gopt_graph_free(g);
}

/* Every placer on a tight memory budget: synthetic graphs of every kind on 4
 * devices whose usable memory goes from a fifth to all of what the graph
 * needs (gopt_bl_node_memory summed); each answer either fits every device
 * or is a refusal (GOPT_EUNSUP), never an internal error. (An ETF placer once
 * lost a node that stopped fitting its device and was pushed again onto a
 * device it had already scanned: "ETF: nodes left but none ready".) */
static void test_tight_memory(void **state) {
    (void)state;
    gopt_rng rng;
    gopt_rng_seed(&rng, 5);
    gopt_error err = {0};
    int fits = 0, refused = 0;
    for (int kind = 0; kind < GOPT_SYNTH_KIND_COUNT; kind++) {
        gopt_synth_opts so = {(gopt_synth_kind)kind, 300, 200, 600, 0};
        gopt_graph *g = NULL;
        assert_int_equal(gopt_zoo_synthetic(&rng, &so, "synth", &g, &err), GOPT_OK);
        fixture x;
        fx_init(&x, g, 4, 1e12);
        double need = 0;
        for (int32_t v = 0; v < gopt_graph_num_nodes(g); v++) need += gopt_bl_node_memory(&x.pb, v);
        for (int j = 0; PLACERS[j]; j++) {
            gopt_bl_combo c;
            assert_int_equal(gopt_bl_combo_parse(&x.reg, PLACERS[j], &c, &err), GOPT_OK);
            for (double share = 0.2; share <= 1.0; share += 0.01) {
                x.pb.opt.mem_fraction = share * need / 1e12;
                gopt_decisions d;
                gopt_status st = gopt_bl_combo_decide(&x.reg, &c, &x.pb, &d, &err);
                if (st != GOPT_OK && st != GOPT_EUNSUP)
                    fprintf(stderr, "%s %s, %.2f of the need per device: %s\n",
                            gopt_synth_kind_name((gopt_synth_kind)kind), PLACERS[j], share, err.msg);
                assert_true(st == GOPT_OK || st == GOPT_EUNSUP);
                if (st == GOPT_OK) {
                    double use[4];
                    gopt_bl_memory_use(&x.pb, &d, use);
                    for (int k = 0; k < 4; k++) assert_true(use[k] <= x.pb.opt.mem_fraction * 1e12 * (1 + 1e-9));
                    fits++;
                } else {
                    refused++;
                }
                gopt_decisions_destroy(&d);
            }
        }
        fx_destroy(&x);
        gopt_graph_free(g);
    }
    assert_true(fits > 0 && refused > 0); /* the grid spans both */
}

/* Every zoo family (small settings) on the shipped 8-GPU V100 profile, judged
 * by the simulator: every method valid, and no OOM where single fits. */
static void test_validity_zoo(void **state) {
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/profiles/v100-dgx1-x8.json", GOPT_SOURCE_DIR);
    gopt_profile *prof = NULL;
    gopt_error err = {0};
    assert_int_equal(gopt_profile_load(path, &prof, &err), GOPT_OK);
    gopt_costmodel *cm = NULL;
    assert_int_equal(gopt_cost_create(prof, 0, &cm, &err), GOPT_OK);
    gopt_bl_registry reg;
    gopt_bl_registry_init(&reg);
    const char *methods[] = {"single", "expert", "metis", "heft", "mtopo", "metf", "msct",
                             "heft+cp+xla", "metis+fifo+tvm", "msct+cp+tvm", "sa", NULL};
    for (int i = 0; i < gopt_zoo_family_count(); i++) {
        gopt_zoo_spec spec = {0};
        spec.family = gopt_zoo_family_name(i);
        spec.layers = strcmp(spec.family, "resnet") == 0 ? 18 : strcmp(spec.family, "inception_v3") == 0 ? 0 : 2;
        spec.batch = 8;
        spec.seq = strcmp(spec.family, "wavenet") == 0 ? 2000 : 0;
        gopt_graph *g = NULL;
        gopt_status st = gopt_zoo_generate(&spec, &g, &err);
        if (st) fprintf(stderr, "%s: %s\n", spec.family, err.msg);
        assert_int_equal(st, GOPT_OK);
        gopt_sim *sim = NULL;
        assert_int_equal(gopt_sim_create(g, cm, &sim, &err), GOPT_OK);
        for (int j = 0; methods[j]; j++) {
            gopt_bl_options opt = {0};
            opt.seed = 3;
            opt.max_evals = 20;
            opt.budget_s = 60;
            gopt_decisions d;
            gopt_bl_outcome res;
            st = gopt_bl_optimize(&reg, methods[j], sim, cm, &opt, &d, &res, &err);
            if (st) fprintf(stderr, "%s %s: %s\n", spec.family, methods[j], err.msg);
            assert_int_equal(st, GOPT_OK);
            assert_int_equal(gopt_decisions_validate(&d, g, 8, &err), GOPT_OK);
            assert_true(res.sim.step_time_s > 0);
            if (res.sim.oom) fprintf(stderr, "note: %s %s: simulated OOM\n", spec.family, methods[j]);
            gopt_decisions_destroy(&d);
        }
        gopt_sim_free(sim);
        gopt_graph_free(g);
    }
    /* synthetic training-step graphs of every kind */
    gopt_rng rng;
    gopt_rng_seed(&rng, 11);
    for (int kind = 0; kind < GOPT_SYNTH_KIND_COUNT; kind++) {
        gopt_synth_opts so = {(gopt_synth_kind)kind, 400, 200, 1000, 0};
        gopt_graph *g = NULL;
        assert_int_equal(gopt_zoo_synthetic(&rng, &so, "synth", &g, &err), GOPT_OK);
        gopt_sim *sim = NULL;
        assert_int_equal(gopt_sim_create(g, cm, &sim, &err), GOPT_OK);
        for (int j = 0; methods[j]; j++) {
            gopt_bl_options opt = {0};
            opt.seed = 3;
            opt.max_evals = 20;
            opt.budget_s = 60;
            gopt_decisions d;
            gopt_bl_outcome res;
            gopt_status st = gopt_bl_optimize(&reg, methods[j], sim, cm, &opt, &d, &res, &err);
            if (st) fprintf(stderr, "synthetic %s %s: %s\n", gopt_synth_kind_name((gopt_synth_kind)kind), methods[j], err.msg);
            assert_int_equal(st, GOPT_OK);
            assert_int_equal(gopt_decisions_validate(&d, g, 8, &err), GOPT_OK);
            gopt_decisions_destroy(&d);
        }
        gopt_sim_free(sim);
        gopt_graph_free(g);
    }
    gopt_cost_free(cm);
    gopt_profile_free(prof);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry),
        cmocka_unit_test(test_two_chains),
        cmocka_unit_test(test_too_big_for_one_device),
        cmocka_unit_test(test_estimate_timeline),
        cmocka_unit_test(test_estimate_group_is_cost_model),
        cmocka_unit_test(test_critical_path),
        cmocka_unit_test(test_fusion_rules),
        cmocka_unit_test(test_fusion_multi_output),
        cmocka_unit_test(test_fusion_exact_order),
        cmocka_unit_test(test_validity_generated),
        cmocka_unit_test(test_expert_rules),
        cmocka_unit_test(test_expert_tables),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_evaluator_callback),
        cmocka_unit_test(test_oom_feedback),
        cmocka_unit_test(test_oom_feedback_peak),
        cmocka_unit_test(test_joint_gets_caller_budget),
        cmocka_unit_test(test_validity_zoo),
        cmocka_unit_test(test_tight_memory),
        cmocka_unit_test(test_parallel_items),
        cmocka_unit_test(test_combo_memo),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
