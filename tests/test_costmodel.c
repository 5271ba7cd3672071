/* test_costmodel.c: the cost model against hand-computed values: roofline
 * times, zero-time inputs and params, fused group time, transfer times on
 * the shipped topologies, interpolation in synthetic tables with known laws
 * (exact at measured points, close between them, the documented behaviour
 * outside them), shapes taken from the node's shape attribute, efficiency
 * factors and depthwise convolutions, and the `gopt cost` command. */
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
#include <sys/wait.h>

#include "gopt_cost.h"
#include "gopt_decisions.h"
#include "gopt_sim.h"

static gopt_profile *load_shipped(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/profiles/%s", GOPT_SOURCE_DIR, name);
    gopt_profile *p = NULL;
    gopt_error err = {0};
    assert_int_equal(gopt_profile_load(path, &p, &err), GOPT_OK);
    return p;
}

static int close_rel(double a, double b, double tol) { return fabs(a - b) <= tol * fabs(b); }

static void test_create_devices(void **state) {
    (void)state;
    gopt_profile *p = load_shipped("h100-nvswitch-x8.json");
    gopt_costmodel *cm = NULL;
    gopt_error err = {0};
    assert_int_equal(gopt_cost_create(p, 0, &cm, &err), GOPT_OK);
    assert_int_equal(gopt_cost_num_devices(cm), 8);
    assert_true(gopt_cost_device_memory(cm, 3) == 80.0 * 1024 * 1024 * 1024);
    gopt_cost_free(cm);
    assert_int_equal(gopt_cost_create(p, 4, &cm, &err), GOPT_OK);
    assert_int_equal(gopt_cost_num_devices(cm), 4);
    gopt_cost_free(cm);
    cm = (gopt_costmodel *)0x1;
    assert_int_equal(gopt_cost_create(p, 9, &cm, &err), GOPT_EINVAL);
    assert_null(cm);
    assert_non_null(strstr(err.msg, "9 devices"));
    assert_int_equal(gopt_cost_create(p, -1, &cm, &err), GOPT_EINVAL);
    gopt_profile_free(p);
}

static void test_roofline_ops(void **state) {
    (void)state;
    gopt_profile *p = load_shipped("h100-nvswitch-x8.json");
    gopt_costmodel *cm = NULL;
    assert_int_equal(gopt_cost_create(p, 2, &cm, NULL), GOPT_OK);
    double launch = 5e-6, peak = 67e12, bw = 3.35e12, c = -1;
    gopt_cost_op op = {.cls = GOPT_OP_CLASS_INPUT, .flops = 1e9, .bytes = 1e9};
    assert_true(gopt_cost_op_time(cm, 0, &op, &c) == 0 && c == 0);
    op.cls = GOPT_OP_CLASS_PARAM;
    assert_true(gopt_cost_op_time(cm, 1, &op, &c) == 0 && c == 0);
    /* compute-bound GEMM (no table): flops/peak + launch */
    op = (gopt_cost_op){.cls = GOPT_OP_CLASS_GEMM, .flops = 2e12, .bytes = 1e6, .m = 1e4, .n = 1e4, .k = 1e4};
    assert_true(close_rel(gopt_cost_op_time(cm, 0, &op, &c), launch + 2e12 / peak, 1e-12));
    assert_true(close_rel(c, 2e12 / peak, 1e-12));
    /* fp16 uses the fp16 peak */
    op.dtype = GOPT_DTYPE_FP16;
    assert_true(close_rel(gopt_cost_op_time(cm, 0, &op, &c), launch + 2e12 / 989.4e12, 1e-12));
    /* int8 given; fp64 given; a dtype without a peak falls back to fp32: none here, all six given */
    op.dtype = GOPT_DTYPE_FP32;
    /* memory-bound elementwise: bytes/bw + launch; compute is the arithmetic only */
    op = (gopt_cost_op){.cls = GOPT_OP_CLASS_ELEMENTWISE, .flops = 1e6, .bytes = 3e9};
    assert_true(close_rel(gopt_cost_op_time(cm, 0, &op, &c), launch + 3e9 / bw, 1e-12));
    assert_true(close_rel(c, 1e6 / peak, 1e-12));
    op.cls = GOPT_OP_CLASS_OTHER;
    assert_true(close_rel(gopt_cost_op_time(cm, 0, &op, &c), launch + 3e9 / bw, 1e-12));
    assert_true(close_rel(c, 3e9 / bw, 1e-12)); /* other ops keep their whole time as compute */
    gopt_cost_free(cm);
    gopt_profile_free(p);
}

static void test_transfers(void **state) {
    (void)state;
    gopt_profile *p = load_shipped("h100-nvswitch-x8.json");
    gopt_costmodel *cm = NULL;
    assert_int_equal(gopt_cost_create(p, 0, &cm, NULL), GOPT_OK);
    assert_true(gopt_cost_transfer_time(cm, 2, 2, 1e9) == 0);
    assert_true(close_rel(gopt_cost_transfer_time(cm, 0, 7, 450e6), 3e-6 + 1e-3, 1e-12));
    gopt_cost_free(cm);
    gopt_profile_free(p);
    p = load_shipped("v100-dgx1-x8.json");
    assert_int_equal(gopt_cost_create(p, 0, &cm, NULL), GOPT_OK);
    double two = gopt_cost_transfer_time(cm, 0, 3, 1e8), one = gopt_cost_transfer_time(cm, 0, 1, 1e8),
           none = gopt_cost_transfer_time(cm, 0, 6, 1e8);
    assert_true(two < one && one < none);
    assert_true(close_rel(two, 5e-6 + 1e8 / 50e9, 1e-12));
    assert_true(close_rel(none, 15e-6 + 1e8 / 15.75e9, 1e-12));
    gopt_cost_free(cm);
    gopt_profile_free(p);
}

/* A profile with synthetic tables following known laws. */
static char *synthetic_profile(void) {
    gopt_buf b;
    gopt_buf_init(&b);
    gopt_buf_puts(&b, "{\"format\":\"gopt-profile\",\"version\":1,\"name\":\"synthetic\",\"provenance\":{\"source\":"
                      "\"measured\",\"machine\":\"test\",\"date\":\"today\",\"command\":\"test_costmodel\"},"
                      "\"devices\":[{\"name\":\"c\",\"count\":2,\"kind\":\"cpu\",\"model\":\"m\",\"memory_bytes\":1e9,"
                      "\"peak_flops\":{\"fp32\":1e11},\"memory_bandwidth\":1e10,\"launch_overhead\":1e-7,"
                      "\"tables\":\"t\"}],\"links\":[{\"src\":\"c0\",\"dst\":\"c1\",\"bandwidth\":1e9,\"latency\":1e-5,"
                      "\"tables\":\"t\"}],\"tables\":{\"t\":{\"elementwise\":[");
    /* elementwise: t = 1e-6 + bytes / 2e10 at bytes = 1e3 * 2^i */
    for (int i = 0; i < 20; i++) gopt_buf_printf(&b, "%s[%.17g,%.17g]", i ? "," : "", 1e3 * pow(2, i), 1e-6 + 1e3 * pow(2, i) / 2e10);
    gopt_buf_puts(&b, "],\"reduction\":[[1000,1e-6]],\"copy\":[");
    for (int i = 0; i < 10; i++) gopt_buf_printf(&b, "%s[%.17g,%.17g]", i ? "," : "", pow(10, i), 2e-5 + pow(10, i) / 5e9);
    gopt_buf_puts(&b, "],\"conv\":[[1e6,1e-5],[1e9,1e-2]],\"gemm\":[");
    /* gemm: t = 2mnk / 5e10 + 1e-6 over a scatter of shapes */
    gopt_rng r;
    gopt_rng_seed(&r, 3);
    for (int i = 0; i < 300; i++) {
        double m = floor(exp(log(8) + gopt_rng_uniform(&r) * log(256))), n = floor(exp(log(8) + gopt_rng_uniform(&r) * log(256))),
               k = floor(exp(log(8) + gopt_rng_uniform(&r) * log(256)));
        gopt_buf_printf(&b, "%s[%g,%g,%g,%.17g]", i ? "," : "", m, n, k, 2 * m * n * k / 5e10 + 1e-6);
    }
    /* conv_gemm: convolutions by their implicit GEMM, t = 2mnk / 2e11 + 1e-6, at the gemm's shapes */
    gopt_buf_puts(&b, "],\"conv_gemm\":[");
    gopt_rng_seed(&r, 3);
    for (int i = 0; i < 300; i++) {
        double m = floor(exp(log(8) + gopt_rng_uniform(&r) * log(256))), n = floor(exp(log(8) + gopt_rng_uniform(&r) * log(256))),
               k = floor(exp(log(8) + gopt_rng_uniform(&r) * log(256)));
        gopt_buf_printf(&b, "%s[%g,%g,%g,%.17g]", i ? "," : "", m, n, k, 2 * m * n * k / 2e11 + 1e-6);
    }
    gopt_buf_puts(&b, "]}}}");
    assert_false(b.failed);
    return b.data;
}

static void test_table_interpolation(void **state) {
    (void)state;
    char *txt = synthetic_profile();
    gopt_profile *p = NULL;
    gopt_costmodel *cm = NULL;
    gopt_error err = {0};
    gopt_status st = gopt_profile_parse(txt, strlen(txt), "synthetic", &p, &err);
    if (st) fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(st, GOPT_OK);
    free(txt);
    assert_int_equal(gopt_cost_create(p, 0, &cm, &err), GOPT_OK);
    /* exact at a measured point, close between points */
    double x = 1e3 * 8;
    assert_true(close_rel(gopt_cost_table_lookup(cm, 0, GOPT_TABLE_ELEMENTWISE, &x), 1e-6 + x / 2e10, 1e-9));
    for (double q = 1500; q < 4e8; q *= 1.37) {
        double v = gopt_cost_table_lookup(cm, 1, GOPT_TABLE_ELEMENTWISE, &q);
        assert_true(close_rel(v, 1e-6 + q / 2e10, 0.05));
    }
    /* below the table: the smallest time (a floor); above: linear in bytes */
    x = 10;
    assert_true(close_rel(gopt_cost_table_lookup(cm, 0, GOPT_TABLE_ELEMENTWISE, &x), 1e-6 + 1e3 / 2e10, 1e-9));
    double top = 1e3 * pow(2, 19);
    x = 4 * top;
    assert_true(close_rel(gopt_cost_table_lookup(cm, 0, GOPT_TABLE_ELEMENTWISE, &x), 4 * (1e-6 + top / 2e10), 1e-9));
    /* a one-row table */
    x = 5000;
    assert_true(close_rel(gopt_cost_table_lookup(cm, 0, GOPT_TABLE_REDUCTION, &x), 5e-6, 1e-9));
    x = 10;
    assert_true(close_rel(gopt_cost_table_lookup(cm, 0, GOPT_TABLE_REDUCTION, &x), 1e-6, 1e-9));
    /* no table of this kind on this device: -1 */
    gopt_profile_free(NULL);
    /* GEMM: scattered points, local regression in log space */
    gopt_rng r;
    gopt_rng_seed(&r, 99);
    int bad = 0;
    for (int i = 0; i < 200; i++) {
        double q[3];
        for (int c = 0; c < 3; c++) q[c] = floor(exp(log(12) + gopt_rng_uniform(&r) * log(150)));
        double want = 2 * q[0] * q[1] * q[2] / 5e10 + 1e-6, got = gopt_cost_table_lookup(cm, 0, GOPT_TABLE_GEMM, q);
        if (!close_rel(got, want, 0.10)) bad++;
    }
    assert_true(bad <= 10);
    /* above the measured box: scaled by the dims beyond it */
    double big[3] = {4096, 128, 128}, edge[3] = {256, 128, 128};
    double tb = gopt_cost_table_lookup(cm, 0, GOPT_TABLE_GEMM, big), te = gopt_cost_table_lookup(cm, 0, GOPT_TABLE_GEMM, edge);
    assert_true(tb > 8 * te && tb < 32 * te);
    /* op time through the table: launch + table */
    gopt_cost_op op = {.cls = GOPT_OP_CLASS_GEMM, .flops = 2 * 64.0 * 64 * 64, .bytes = 3 * 4 * 64.0 * 64, .m = 64, .n = 64, .k = 64};
    double c = 0, q[3] = {64, 64, 64};
    double t = gopt_cost_op_time(cm, 0, &op, &c);
    assert_true(close_rel(t, 1e-7 + gopt_cost_table_lookup(cm, 0, GOPT_TABLE_GEMM, q), 1e-12));
    assert_true(close_rel(c, t - 1e-7, 1e-9));
    /* conv through its table, by flops, when its GEMM shape is unknown */
    op = (gopt_cost_op){.cls = GOPT_OP_CLASS_CONV, .flops = 1e9, .bytes = 1};
    assert_true(close_rel(gopt_cost_op_time(cm, 0, &op, NULL), 1e-7 + 1e-2, 1e-9));
    /* with its shape, through the conv_gemm table: the shape's law, not the FLOPs table's */
    op = (gopt_cost_op){.cls = GOPT_OP_CLASS_CONV, .flops = 2 * 64.0 * 64 * 64, .bytes = 1, .m = 64, .n = 64, .k = 64};
    double tc = gopt_cost_op_time(cm, 0, &op, NULL);
    assert_true(close_rel(tc, 1e-7 + gopt_cost_table_lookup(cm, 0, GOPT_TABLE_CONV_GEMM, q), 1e-12));
    assert_true(close_rel(tc, 1e-7 + 1e-6 + 2 * 64.0 * 64 * 64 / 2e11, 0.1));
    /* copies through the link's table (both directions share it) */
    assert_true(close_rel(gopt_cost_transfer_time(cm, 0, 1, 1e6), 2e-5 + 1e6 / 5e9, 1e-9));
    assert_true(close_rel(gopt_cost_transfer_time(cm, 1, 0, 3e6), 2e-5 + 3e6 / 5e9, 0.05));
    gopt_cost_free(cm);
    gopt_profile_free(p);
}

/* A graph built in code: in -> mm (gemm, shape 4x32x256) -> relu -> sum. */
static gopt_graph *small_graph(void) {
    gopt_graph *g = NULL;
    assert_int_equal(gopt_graph_create(&g, "small", "test", NULL), GOPT_OK);
    gopt_node_attrs a = {0};
    a.name = "x";
    a.op = "Placeholder";
    a.cls = GOPT_OP_CLASS_INPUT;
    a.out_bytes = 4 * 128 * 512;
    a.shape = "128x512";
    a.layer = -1;
    assert_int_equal(gopt_graph_add_node(g, &a, NULL, NULL), GOPT_OK);
    a.name = "w";
    a.op = "VariableV2";
    a.cls = GOPT_OP_CLASS_PARAM;
    a.out_bytes = a.param_bytes = 4 * 512 * 256;
    a.shape = "512x256";
    assert_int_equal(gopt_graph_add_node(g, &a, NULL, NULL), GOPT_OK);
    a.name = "mm";
    a.op = "BatchMatMul";
    a.cls = GOPT_OP_CLASS_GEMM;
    a.param_bytes = 0;
    a.flops = 2.0 * 128 * 256 * 512;
    a.out_bytes = 4 * 128 * 256;
    a.shape = "4x32x256";
    assert_int_equal(gopt_graph_add_node(g, &a, NULL, NULL), GOPT_OK);
    a.name = "relu";
    a.op = "Relu";
    a.cls = GOPT_OP_CLASS_ELEMENTWISE;
    a.flops = 128 * 256;
    a.shape = "4x32x256";
    a.dtype = "float32";
    assert_int_equal(gopt_graph_add_node(g, &a, NULL, NULL), GOPT_OK);
    a.name = "sum";
    a.op = "Sum";
    a.cls = GOPT_OP_CLASS_REDUCTION;
    a.out_bytes = 4;
    a.shape = "1";
    assert_int_equal(gopt_graph_add_node(g, &a, NULL, NULL), GOPT_OK);
    assert_int_equal(gopt_graph_add_edge(g, 0, 2, 4 * 128 * 512, NULL), GOPT_OK);
    assert_int_equal(gopt_graph_add_edge(g, 1, 2, 4 * 512 * 256, NULL), GOPT_OK);
    assert_int_equal(gopt_graph_add_edge(g, 2, 3, 4 * 128 * 256, NULL), GOPT_OK);
    assert_int_equal(gopt_graph_add_edge(g, 3, 4, 4 * 128 * 256, NULL), GOPT_OK);
    assert_int_equal(gopt_graph_finalize(g, NULL), GOPT_OK);
    return g;
}

/* The synthetic profile and its cost model over all its devices (free both). */
static gopt_costmodel *synthetic_costmodel(gopt_profile **p) {
    char *txt = synthetic_profile();
    gopt_costmodel *cm = NULL;
    assert_int_equal(gopt_profile_parse(txt, strlen(txt), "synthetic", p, NULL), GOPT_OK);
    free(txt);
    assert_int_equal(gopt_cost_create(*p, 0, &cm, NULL), GOPT_OK);
    return cm;
}

static void test_table_build_and_groups(void **state) {
    (void)state;
    gopt_profile *p = NULL;
    gopt_costmodel *cm = synthetic_costmodel(&p);
    gopt_graph *g = small_graph();
    gopt_cost_table t;
    gopt_error err = {0};
    assert_int_equal(gopt_cost_table_build(cm, g, &t, &err), GOPT_OK);
    assert_int_equal(t.n, 5);
    assert_int_equal(t.ndev, 2);
    assert_true(t.time[0] == 0 && t.time[1 * 2 + 1] == 0 && t.compute[0] == 0);
    assert_true(t.launch[1] == 1e-7 && t.mem_bw[0] == 1e10);
    /* mm: m = 4*32 = 128 from the shape, n = 256, k = flops/(2mn) = 512 */
    double q[3] = {128, 256, 512};
    assert_true(close_rel(t.time[2 * 2 + 0], 1e-7 + gopt_cost_table_lookup(cm, 0, GOPT_TABLE_GEMM, q), 1e-12));
    /* relu: elementwise table at bytes in + out */
    double bytes = 2 * 4 * 128 * 256;
    assert_true(close_rel(t.time[3 * 2 + 1], 1e-7 + gopt_cost_table_lookup(cm, 1, GOPT_TABLE_ELEMENTWISE, &bytes), 1e-12));
    assert_true(close_rel(t.compute[3 * 2 + 1], 128 * 256 / 1e11, 1e-12));
    /* fused group relu+sum on device 1: one launch + computes + external bytes / bw */
    int32_t mem[2] = {3, 4};
    double ext = 4 * 128 * 256 + 4;
    double want = 1e-7 + t.compute[3 * 2 + 1] + t.compute[4 * 2 + 1] + ext / 1e10;
    assert_true(close_rel(gopt_cost_group_time(&t, 1, mem, 2, ext), want, 1e-12));
    /* fusing saves: the group is cheaper than the two ops alone */
    assert_true(gopt_cost_group_time(&t, 1, mem, 2, ext) < t.time[3 * 2 + 1] + t.time[4 * 2 + 1]);
    /* mm + relu + sum: the GEMM keeps its kernel (its whole time and its own launch), the two
     * memory-bound members are one pass with one launch over their external bytes (here the
     * sum's output alone: relu reads mm's output inside the group) */
    assert_true(t.heavy[2] && !t.heavy[3] && !t.heavy[4]);
    assert_true(t.memory[2 * 2 + 1] == 0 && close_rel(t.memory[3 * 2 + 1], t.time[3 * 2 + 1] - 1e-7 - t.compute[3 * 2 + 1], 1e-12));
    int32_t mem3[3] = {2, 3, 4};
    double want3 = 2e-7 + t.compute[2 * 2 + 1] + t.compute[3 * 2 + 1] + t.compute[4 * 2 + 1] + 4.0 / 1e10;
    assert_true(close_rel(gopt_cost_group_time(&t, 1, mem3, 3, 4.0), want3, 1e-12));
    assert_true(gopt_cost_group_time(&t, 1, mem3, 3, 4.0) >= t.time[2 * 2 + 1]); /* never below the GEMM alone */
    /* two GEMMs fused cost what they cost apart: no launch or traffic saved */
    int32_t mm2[2] = {2, 2};
    assert_true(close_rel(gopt_cost_group_time(&t, 1, mm2, 2, 0), 2 * t.time[2 * 2 + 1], 1e-12));
    assert_int_equal(gopt_cost_keeps_kernel(GOPT_OP_CLASS_CONV), 1);
    assert_int_equal(gopt_cost_keeps_kernel(GOPT_OP_CLASS_REDUCTION), 0);
    gopt_cost_table_destroy(&t);
    assert_null(t.time);
    gopt_cost_table_destroy(&t); /* twice is harmless */
    gopt_graph_free(g);
    /* unfinalized graph */
    gopt_graph *u = NULL;
    assert_int_equal(gopt_graph_create(&u, "u", "", NULL), GOPT_OK);
    assert_int_equal(gopt_cost_table_build(cm, u, &t, &err), GOPT_EINVAL);
    gopt_graph_free(u);
    gopt_cost_free(cm);
    gopt_profile_free(p);
}

/* A slice reads its part: x -> relu -> {slice0, slice1} -> add, the edges into the slices carry
 * relu's whole 4 MB (what crosses devices if cut) while each slice writes 1 MB. The cost table,
 * the fused group's pass and the simulator all count 1 MB read per slice. */
static void test_slice_reads_its_part(void **state) {
    (void)state;
    gopt_profile *p = NULL;
    gopt_costmodel *cm = synthetic_costmodel(&p);
    gopt_graph *g = NULL;
    assert_int_equal(gopt_graph_create(&g, "slices", "test", NULL), GOPT_OK);
    const double MB = 1 << 20;
    const gopt_node_attrs nodes[] = {
        {"x", "Placeholder", GOPT_OP_CLASS_INPUT, 0, 4 * MB, 0, "", "float32", GOPT_PHASE_FWD, -1, ""},
        {"relu", "relu", GOPT_OP_CLASS_ELEMENTWISE, MB, 4 * MB, 0, "", "float32", GOPT_PHASE_FWD, 0, ""},
        {"slice0", "slice", GOPT_OP_CLASS_DATA_MOVEMENT, 0, MB, 0, "", "float32", GOPT_PHASE_FWD, 0, ""},
        {"slice1", "slice", GOPT_OP_CLASS_DATA_MOVEMENT, 0, MB, 0, "", "float32", GOPT_PHASE_FWD, 0, ""},
        {"add", "add", GOPT_OP_CLASS_ELEMENTWISE, MB / 4, MB, 0, "", "float32", GOPT_PHASE_FWD, 0, ""},
    };
    for (size_t i = 0; i < sizeof nodes / sizeof *nodes; i++) assert_int_equal(gopt_graph_add_node(g, &nodes[i], NULL, NULL), GOPT_OK);
    const int32_t edges[][2] = {{0, 1}, {1, 2}, {1, 3}, {2, 4}, {3, 4}};
    const double eb[] = {4 * MB, 4 * MB, 4 * MB, MB, MB};
    for (size_t i = 0; i < sizeof edges / sizeof *edges; i++)
        assert_int_equal(gopt_graph_add_edge(g, edges[i][0], edges[i][1], eb[i], NULL), GOPT_OK);
    assert_int_equal(gopt_graph_finalize(g, NULL), GOPT_OK);
    const gopt_frozen *f = gopt_graph_frozen(g);
    /* node ids are insertion order here: x 0, relu 1, slice0 2, slice1 3, add 4 */
    assert_true(gopt_cost_read_bytes(f, 1, f->in_ptr[1]) == 4 * MB); /* an elementwise op reads its edge */
    assert_true(gopt_cost_read_bytes(f, 2, f->in_ptr[2]) == MB);     /* a slice its part */
    assert_true(gopt_cost_read_bytes(f, 4, f->in_ptr[4]) == MB);
    gopt_cost_table t;
    assert_int_equal(gopt_cost_table_build(cm, g, &t, NULL), GOPT_OK);
    double bytes = 2 * MB; /* read 1 MB, write 1 MB */
    assert_true(close_rel(t.time[2 * 2 + 0], 1e-7 + gopt_cost_table_lookup(cm, 0, GOPT_TABLE_ELEMENTWISE, &bytes), 1e-12));
    /* {slice0, slice1, add} fused: 1 MB + 1 MB read from relu, add's 1 MB written */
    int32_t mem[3] = {2, 3, 4}, owner[5] = {0, 0, 7, 7, 7};
    assert_true(gopt_cost_group_pass_bytes(&t, f, mem, 3, owner, 7) == 3 * MB);
    /* the simulator prices the group the same: everything on device 0, the group after relu */
    gopt_decisions d;
    assert_int_equal(gopt_decisions_init(&d, 5, NULL), GOPT_OK);
    gopt_decisions_set_default(&d, f);
    for (int v = 2; v < 5; v++) d.group[v] = 2;
    gopt_sim *sim = NULL;
    gopt_sim_scratch *s = NULL;
    assert_int_equal(gopt_sim_create(g, cm, &sim, NULL), GOPT_OK);
    assert_int_equal(gopt_sim_scratch_create(sim, &s, NULL), GOPT_OK);
    gopt_sim_result r;
    assert_int_equal(gopt_sim_run(sim, &d, &r, s, NULL), GOPT_OK);
    double want = t.time[1 * 2 + 0] + gopt_cost_group_time(&t, 0, mem, 3, 3 * MB);
    assert_true(close_rel(r.step_time_s, want, 1e-12));
    gopt_sim_scratch_free(s);
    gopt_sim_free(sim);
    gopt_decisions_destroy(&d);
    gopt_cost_table_destroy(&t);
    gopt_graph_free(g);
    gopt_cost_free(cm);
    gopt_profile_free(p);
}

/* x -> dw (depthwise: weight 64x1x3x3) and x -> full (weight 64x32x3x3), x -> relu (backward). */
static gopt_graph *conv_graph(void) {
    gopt_graph *g = NULL;
    assert_int_equal(gopt_graph_create(&g, "convs", "test", NULL), GOPT_OK);
    const gopt_node_attrs nodes[] = {
        {"x", "Placeholder", GOPT_OP_CLASS_INPUT, 0, 4 * 2 * 16 * 16 * 64, 0, "2x64x16x16", "float32", GOPT_PHASE_FWD, -1, ""},
        {"wdw", "Parameter", GOPT_OP_CLASS_PARAM, 0, 4 * 64 * 9, 4 * 64 * 9, "64x1x3x3", "float32", GOPT_PHASE_FWD, 0, ""},
        {"wfull", "Parameter", GOPT_OP_CLASS_PARAM, 0, 4 * 64 * 32 * 9, 4 * 64 * 32 * 9, "64x32x3x3", "float32", GOPT_PHASE_FWD, 0, ""},
        {"dw", "convolution", GOPT_OP_CLASS_CONV, 2.0 * 2 * 16 * 16 * 64 * 9, 4 * 2 * 16 * 16 * 64, 0, "2x64x16x16", "float32", GOPT_PHASE_FWD, 0, ""},
        {"full", "convolution", GOPT_OP_CLASS_CONV, 2.0 * 2 * 16 * 16 * 64 * 288, 4 * 2 * 16 * 16 * 64, 0, "2x64x16x16", "float32", GOPT_PHASE_FWD, 0, ""},
        {"relu", "relu", GOPT_OP_CLASS_ELEMENTWISE, 2 * 16 * 16 * 64, 4 * 2 * 16 * 16 * 64, 0, "2x64x16x16", "float32", GOPT_PHASE_BWD, 0, ""},
    };
    for (size_t i = 0; i < sizeof nodes / sizeof *nodes; i++) assert_int_equal(gopt_graph_add_node(g, &nodes[i], NULL, NULL), GOPT_OK);
    const int32_t edges[][2] = {{0, 3}, {1, 3}, {0, 4}, {2, 4}, {0, 5}};
    for (size_t i = 0; i < sizeof edges / sizeof *edges; i++)
        assert_int_equal(gopt_graph_add_edge(g, edges[i][0], edges[i][1], 4 * 2 * 16 * 16 * 64, NULL), GOPT_OK);
    assert_int_equal(gopt_graph_finalize(g, NULL), GOPT_OK);
    return g;
}

/* A convolution's implicit GEMM takes n from its output channels, wherever the layout puts
 * them: NCHW with an OIHW weight (PyTorch), NHWC with an HWIO weight (TensorFlow), a backward
 * convolution's weight gradient as its second output; without a 4-d weight, the shape's last dim. */
static void test_conv_gemm_dims(void **state) {
    (void)state;
    gopt_graph *g = NULL;
    assert_int_equal(gopt_graph_create(&g, "dims", "test", NULL), GOPT_OK);
    const double F = 2.0 * 32 * 7 * 7 * 2048 * 512; /* a 1x1 convolution, 512 -> 2048 channels, 7x7 */
    const gopt_node_attrs nodes[] = {
        {"x", "Placeholder", GOPT_OP_CLASS_INPUT, 0, 4 * 32 * 512 * 49, 0, "32x512x7x7", "float32", GOPT_PHASE_FWD, -1, ""},
        {"w", "Parameter", GOPT_OP_CLASS_PARAM, 0, 4 * 2048 * 512, 4 * 2048 * 512, "2048x512x1x1", "float32", GOPT_PHASE_FWD, 0, ""},
        {"nchw", "convolution", GOPT_OP_CLASS_CONV, F, 4 * 32 * 2048 * 49, 0, "32x2048x7x7", "float32", GOPT_PHASE_FWD, 0, ""},
        {"whwio", "VariableV2", GOPT_OP_CLASS_PARAM, 0, 4 * 2048 * 512, 4 * 2048 * 512, "1x1x512x2048", "float32", GOPT_PHASE_FWD, 0, ""},
        {"nhwc", "Conv2D", GOPT_OP_CLASS_CONV, F, 4 * 32 * 2048 * 49, 0, "32x7x7x2048", "float32", GOPT_PHASE_FWD, 0, ""},
        {"bwd", "convolution_backward", GOPT_OP_CLASS_CONV, 2 * F, 4 * 32 * 512 * 49, 0, "32x512x7x7;2048x512x1x1", "float32", GOPT_PHASE_BWD, 0, ""},
        {"bare", "convolution", GOPT_OP_CLASS_CONV, F, 4 * 32 * 2048 * 49, 0, "32x2048x7x7", "float32", GOPT_PHASE_FWD, 0, ""},
        {"mm", "mm", GOPT_OP_CLASS_GEMM, 2.0 * 64 * 128 * 256, 4 * 64 * 128, 0, "64x128", "float32", GOPT_PHASE_FWD, 0, ""},
        {"wgrad", "convolution_backward", GOPT_OP_CLASS_CONV, F, 4 * 2048 * 512, 0, "2048x512x1x1", "float32", GOPT_PHASE_BWD, 0, ""},
        {"tfwgrad", "Conv2DBackpropFilter", GOPT_OP_CLASS_CONV, F, 4 * 2048 * 512, 0, "1x1x512x2048", "float32", GOPT_PHASE_BWD, 0, ""},
        {"w1d", "Parameter", GOPT_OP_CLASS_PARAM, 0, 4 * 64 * 64 * 2, 4 * 64 * 64 * 2, "64x64x2", "float32", GOPT_PHASE_FWD, 0, ""},
        {"conv1d", "convolution", GOPT_OP_CLASS_CONV, 2.0 * 4 * 4096 * 64 * 128, 4 * 4 * 64 * 4096, 0, "4x64x4096", "float32", GOPT_PHASE_FWD, 0, ""},
    };
    for (size_t i = 0; i < sizeof nodes / sizeof *nodes; i++) assert_int_equal(gopt_graph_add_node(g, &nodes[i], NULL, NULL), GOPT_OK);
    const int32_t edges[][2] = {{0, 2}, {1, 2}, {0, 4}, {3, 4}, {2, 5}, {1, 5}, {0, 6}, {0, 7}, {2, 8}, {1, 8}, {0, 9}, {4, 9}, {0, 11}, {10, 11}};
    for (size_t i = 0; i < sizeof edges / sizeof *edges; i++) assert_int_equal(gopt_graph_add_edge(g, edges[i][0], edges[i][1], 4, NULL), GOPT_OK);
    assert_int_equal(gopt_graph_finalize(g, NULL), GOPT_OK);
    const struct { int32_t v; double m, n, k; int ret; } want[] = {
        {2, 32 * 49, 2048, 512, 1},    /* NCHW, OIHW weight */
        {4, 32 * 49, 2048, 512, 1},    /* NHWC, HWIO weight */
        {5, 32 * 49, 512, 4096, 1},    /* the grad input's channels; twice the FLOPs */
        {6, 32 * 2048 * 7, 7, 512, 1}, /* no weight: the last dim, as gopt_cost_gemm_dims reads it */
        {7, 64, 128, 256, 1},          /* a GEMM */
        {8, 2048, 512, 32 * 49, 2},    /* the weight's gradient alone: a plain GEMM over the pixels */
        {9, 2048, 512, 32 * 49, 2},    /* TensorFlow's: no weight input, the output is the weight */
        {11, 4 * 4096, 64, 128, 1},    /* a 1-d convolution, NCL with an OIK weight */
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        double m, n, k;
        assert_int_equal(gopt_cost_node_gemm_dims(g, want[i].v, &m, &n, &k), want[i].ret);
        assert_true(m == want[i].m && n == want[i].n && fabs(k - want[i].k) < 1e-9);
    }
    double m, n, k;
    assert_int_equal(gopt_cost_node_gemm_dims(g, 99, &m, &n, &k), 0); /* out of range */
    assert_true(m == 0 && n == 0 && k == 0);
    gopt_graph_free(g);
}

/* The synthetic profile (*bare) and the same with an efficiency object whose fields after the
 * provenance are `fields` (*with). */
static void parse_with_efficiency(const char *fields, gopt_profile **bare, gopt_profile **with) {
    char *txt = synthetic_profile();
    const char *at = strstr(txt, ",\"tables\":{\"t\"");
    assert_non_null(at);
    gopt_buf b;
    gopt_buf_init(&b);
    gopt_buf_printf(&b, "%.*s,\"efficiency\":{\"framework\":\"f\",\"models\":[\"m\"],\"date\":\"d\",\"command\":\"c\",%s}%s",
                    (int)(at - txt), txt, fields, at);
    assert_false(b.failed);
    gopt_error err = {0};
    assert_int_equal(gopt_profile_parse(txt, strlen(txt), "synthetic", bare, &err), GOPT_OK);
    assert_int_equal(gopt_profile_parse(b.data, b.len, "synthetic+eff", with, &err), GOPT_OK);
    free(txt);
    gopt_buf_destroy(&b);
}

/* Efficiency factors (docs/profiles.md): absent, nothing moves; present, each op's time beyond
 * its launch (and its compute part) scales by its kind's factor, and every op but backward ones
 * pays the framework's per-op overhead; convolutions with a one-input-channel weight are
 * depthwise_conv. */
static void test_efficiency_factors(void **state) {
    (void)state;
    gopt_profile *p0 = NULL, *p1 = NULL;
    gopt_error err = {0};
    parse_with_efficiency("\"op_overhead\":1e-6,\"factors\":{\"conv\":0.5,\"depthwise_conv\":8,\"elementwise\":3}", &p0,
                          &p1);
    gopt_costmodel *c0 = NULL, *c1 = NULL;
    assert_int_equal(gopt_cost_create(p0, 1, &c0, NULL), GOPT_OK);
    assert_int_equal(gopt_cost_create(p1, 1, &c1, NULL), GOPT_OK);
    gopt_graph *g = conv_graph();
    gopt_cost_table t0, t1;
    assert_int_equal(gopt_cost_table_build(c0, g, &t0, &err), GOPT_OK);
    assert_int_equal(gopt_cost_table_build(c1, g, &t1, &err), GOPT_OK);
    assert_int_equal(t0.kind[3], GOPT_OP_KIND_DEPTHWISE_CONV);
    assert_int_equal(t0.kind[4], GOPT_OP_KIND_CONV);
    assert_int_equal(t0.kind[5], GOPT_OP_KIND_ELEMENTWISE);
    double L = 1e-7;
    assert_true(t0.launch[0] == L && gopt_cost_launch_overhead(c0, 0) == L);
    assert_true(t1.launch[0] == L && gopt_cost_launch_overhead(c1, 0) == L);
    const double f[] = {0, 0, 0, 8, 0.5, 3}, over[] = {0, 0, 0, 1e-6, 1e-6, 0}; /* relu: backward */
    for (int v = 3; v <= 5; v++) {
        assert_true(t0.time[v] > L);
        assert_true(close_rel(t1.time[v], L + over[v] + (t0.time[v] - L) * f[v], 1e-12));
        assert_true(close_rel(t1.compute[v], t0.compute[v] * f[v] + over[v], 1e-12));
    }
    for (int v = 0; v < 3; v++) assert_true(t0.time[v] == 0 && t1.time[v] == 0); /* data, not kernels */
    /* a one-op call without a graph: the flag picks the kind */
    gopt_cost_op op = {.cls = GOPT_OP_CLASS_CONV, .flops = 1e8, .bytes = 1e6, .dtype = GOPT_DTYPE_FP32};
    assert_int_equal(gopt_cost_op_kind(&op), GOPT_OP_KIND_CONV);
    double a = gopt_cost_op_time(c1, 0, &op, NULL);
    op.depthwise = 1;
    assert_int_equal(gopt_cost_op_kind(&op), GOPT_OP_KIND_DEPTHWISE_CONV);
    assert_true(close_rel(gopt_cost_op_time(c1, 0, &op, NULL) - L - 1e-6, 16 * (a - L - 1e-6), 1e-12));
    /* the finer kinds: a normalization layer's reduction, the optimizer's elementwise update; the
     * profile gives neither, so they take reduction's (1) and elementwise's (3) factors */
    gopt_cost_op red = {.cls = GOPT_OP_CLASS_REDUCTION, .bytes = 1e7, .dtype = GOPT_DTYPE_FP32, .phase = GOPT_PHASE_FWD};
    assert_int_equal(gopt_cost_op_kind(&red), GOPT_OP_KIND_REDUCTION);
    const double tr = gopt_cost_op_time(c1, 0, &red, NULL);
    red.norm = 1;
    assert_int_equal(gopt_cost_op_kind(&red), GOPT_OP_KIND_NORMALIZATION);
    assert_true(gopt_cost_op_time(c1, 0, &red, NULL) == tr);
    gopt_cost_op ew = {.cls = GOPT_OP_CLASS_ELEMENTWISE, .bytes = 1e7, .dtype = GOPT_DTYPE_FP32, .phase = GOPT_PHASE_FWD};
    const double te = gopt_cost_op_time(c1, 0, &ew, NULL);
    ew.phase = GOPT_PHASE_OPT;
    assert_int_equal(gopt_cost_op_kind(&ew), GOPT_OP_KIND_OPTIMIZER);
    assert_true(gopt_cost_op_time(c1, 0, &ew, NULL) == te);
    ew.cls = GOPT_OP_CLASS_REDUCTION; /* an optimizer-phase reduction stays a reduction */
    assert_int_equal(gopt_cost_op_kind(&ew), GOPT_OP_KIND_REDUCTION);
    static const char *const norms[] = {"native_batch_norm", "native_layer_norm_backward", "FusedBatchNormV3",
                                        "LayerNorm", "group_norm", "InstanceNormalization", "RMSNorm"};
    static const char *const others[] = {"norm", "linalg_vector_norm", "Sum", "softmax", "", "batch"};
    for (size_t i = 0; i < sizeof norms / sizeof *norms; i++) assert_true(gopt_cost_is_norm_op(norms[i]));
    for (size_t i = 0; i < sizeof others / sizeof *others; i++) assert_false(gopt_cost_is_norm_op(others[i]));
    assert_false(gopt_cost_is_norm_op(NULL));
    char longname[200]; /* no length limit: the name's end counts too */
    memset(longname, 'x', 150);
    strcpy(longname + 150, "_Batch_Norm_Backward");
    assert_true(gopt_cost_is_norm_op(longname));
    assert_false(gopt_cost_is_norm_op("_batc"));
    gopt_cost_table_destroy(&t0);
    gopt_cost_table_destroy(&t1);
    gopt_graph_free(g);
    gopt_cost_free(c0);
    gopt_cost_free(c1);
    gopt_profile_free(p0);
    gopt_profile_free(p1);
}

/* efficiency.dispatch "overlapped" (an eager framework on a GPU): the per-op overhead leaves the
 * ops' times and goes to the table's dispatch column (forward ops; backward ones pay none); the
 * simulator puts it on a host timeline per device that runs ahead of the device: a task starts
 * no earlier than its dispatch, and the wait is not busy time. */
static void test_overlapped_dispatch(void **state) {
    (void)state;
    gopt_profile *p0 = NULL, *p1 = NULL, *p2 = NULL, *ps = NULL;
    gopt_error err = {0};
    const double h = 1e-3; /* far above every kernel here: the host is the step */
    parse_with_efficiency("\"op_overhead\":1e-3,\"dispatch\":\"overlapped\",\"factors\":{\"conv\":0.5}", &p0, &p1);
    gopt_profile_free(p0);
    parse_with_efficiency("\"op_overhead\":1e-3,\"dispatch\":\"serial\",\"factors\":{\"conv\":0.5}", &p0, &ps);
    gopt_profile_free(p0);
    parse_with_efficiency("\"op_overhead\":1e-12,\"dispatch\":\"overlapped\",\"factors\":{\"conv\":0.5}", &p0, &p2);
    assert_true(gopt_profile_dispatch_overlapped(p1) && !gopt_profile_dispatch_overlapped(ps) &&
                !gopt_profile_dispatch_overlapped(p0));
    gopt_costmodel *c0 = NULL, *c1 = NULL, *c2 = NULL, *cs = NULL;
    assert_int_equal(gopt_cost_create(p0, 1, &c0, NULL), GOPT_OK);
    assert_int_equal(gopt_cost_create(p1, 1, &c1, NULL), GOPT_OK);
    assert_int_equal(gopt_cost_create(p2, 1, &c2, NULL), GOPT_OK);
    assert_int_equal(gopt_cost_create(ps, 1, &cs, NULL), GOPT_OK);
    gopt_graph *g = conv_graph(); /* dw and full: forward convolutions; relu: a backward op */
    gopt_cost_table ts, t1;
    assert_int_equal(gopt_cost_table_build(cs, g, &ts, &err), GOPT_OK);
    assert_int_equal(gopt_cost_table_build(c1, g, &t1, &err), GOPT_OK);
    assert_null(ts.dispatch);
    assert_non_null(t1.dispatch);
    const double over[] = {0, 0, 0, h, h, 0};
    double kernels = 0;
    for (int v = 3; v <= 5; v++) {
        assert_true(close_rel(t1.time[v] + over[v], ts.time[v], 1e-12)); /* serial: time includes it */
        assert_true(close_rel(t1.compute[v] + over[v], ts.compute[v], 1e-12));
        assert_true(t1.dispatch[v] == over[v]);
        kernels += t1.time[v];
    }
    /* the simulator: one device, the default decisions */
    gopt_decisions d;
    assert_int_equal(gopt_decisions_init(&d, gopt_graph_num_nodes(g), &err), GOPT_OK);
    gopt_decisions_set_default(&d, gopt_graph_frozen(g));
    gopt_sim_result r[4];
    gopt_costmodel *cms[4] = {c0, c1, c2, cs};
    for (int i = 0; i < 4; i++) {
        gopt_sim *sim = NULL;
        gopt_sim_scratch *sc = NULL;
        assert_int_equal(gopt_sim_create(g, cms[i], &sim, &err), GOPT_OK);
        assert_int_equal(gopt_sim_scratch_create(sim, &sc, &err), GOPT_OK);
        assert_int_equal(gopt_sim_run(sim, &d, &r[i], sc, &err), GOPT_OK);
        gopt_sim_scratch_free(sc);
        gopt_sim_free(sim);
    }
    /* serial: every dispatch adds up; overlapped: the two forward dispatches come one after the
     * other and each kernel starts after its own, so the step is at least 2h and at most 2h plus
     * the kernels, and the device is busy for the kernels alone */
    assert_true(close_rel(r[3].step_time_s, 2 * h + kernels, 1e-9));
    assert_true(r[1].step_time_s >= 2 * h && r[1].step_time_s <= 2 * h + kernels + 1e-12);
    assert_true(r[1].step_time_s < r[3].step_time_s);
    assert_true(close_rel(r[1].busy_s[0], kernels, 1e-9));
    /* a dispatch far below the kernels changes nothing measurable: the kernels back to back */
    assert_true(close_rel(r[2].step_time_s, kernels, 1e-6));
    assert_true(r[0].step_time_s > kernels); /* the bare profile: no factors */
    /* a dispatch that is neither */
    gopt_profile *bad = NULL;
    char *txt = synthetic_profile();
    const char *at = strstr(txt, ",\"tables\":{\"t\"");
    gopt_buf b;
    gopt_buf_init(&b);
    gopt_buf_printf(&b, "%.*s,\"efficiency\":{\"framework\":\"f\",\"models\":[\"m\"],\"date\":\"d\",\"command\":\"c\","
                    "\"factors\":{\"conv\":1},\"dispatch\":\"sometimes\"}%s", (int)(at - txt), txt, at);
    assert_int_equal(gopt_profile_parse(b.data, b.len, "bad", &bad, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "efficiency.dispatch"));
    assert_null(bad);
    gopt_buf_destroy(&b);
    free(txt);
    gopt_decisions_destroy(&d);
    gopt_cost_table_destroy(&ts);
    gopt_cost_table_destroy(&t1);
    gopt_graph_free(g);
    gopt_cost_free(c0);
    gopt_cost_free(c1);
    gopt_cost_free(c2);
    gopt_cost_free(cs);
    gopt_profile_free(p0);
    gopt_profile_free(p1);
    gopt_profile_free(p2);
    gopt_profile_free(ps);
}

/* efficiency.fresh_output: every kernel run alone (not data movement, not data) pays the
 * framework's fresh-output seconds for its output bytes on top of its scaled time; its compute
 * part inside a fused group does not. */
static void test_fresh_output(void **state) {
    (void)state;
    gopt_profile *p0 = NULL, *p1 = NULL;
    gopt_error err = {0};
    parse_with_efficiency("\"factors\":{\"conv\":0.5},\"fresh_output\":[[65536,1e-6],[1048576,1e-4]]", &p0, &p1);
    gopt_costmodel *c0 = NULL, *c1 = NULL;
    assert_int_equal(gopt_cost_create(p0, 1, &c0, NULL), GOPT_OK);
    assert_int_equal(gopt_cost_create(p1, 1, &c1, NULL), GOPT_OK);
    gopt_graph *g = conv_graph();
    const gopt_frozen *f = gopt_graph_frozen(g);
    gopt_cost_table t0, t1;
    assert_int_equal(gopt_cost_table_build(c0, g, &t0, &err), GOPT_OK);
    assert_int_equal(gopt_cost_table_build(c1, g, &t1, &err), GOPT_OK);
    const double L = t0.launch[0], fac[] = {0, 0, 0, 1, 0.5, 1}; /* dw: depthwise_conv, not given */
    for (int v = 3; v <= 5; v++) {
        const double fresh = gopt_profile_fresh_output_time(p1, f->out_bytes[v]);
        assert_true(fresh > 0);
        assert_true(fabs(t1.time[v] - (L + (t0.time[v] - L) * fac[v] + fresh)) <= 1e-12 * t1.time[v]);
        assert_true(fabs(t1.compute[v] - t0.compute[v] * fac[v]) <= 1e-12 * t1.compute[v]);
    }
    for (int v = 0; v < 3; v++) assert_true(t1.time[v] == 0); /* data, not kernels */
    gopt_cost_op dm = {.cls = GOPT_OP_CLASS_DATA_MOVEMENT, .bytes = 2e6, .out_bytes = 1e6, .dtype = GOPT_DTYPE_FP32};
    assert_true(gopt_cost_op_time(c1, 0, &dm, NULL) == gopt_cost_op_time(c0, 0, &dm, NULL)); /* views: no output */
    gopt_cost_op ew = {.cls = GOPT_OP_CLASS_ELEMENTWISE, .bytes = 3e6, .out_bytes = 1e6, .dtype = GOPT_DTYPE_FP32};
    const double with = gopt_cost_op_time(c1, 0, &ew, NULL);
    ew.out_bytes = 0; /* not known: nothing added */
    assert_true(gopt_cost_op_time(c1, 0, &ew, NULL) == gopt_cost_op_time(c0, 0, &ew, NULL));
    assert_true(fabs(with - gopt_cost_op_time(c0, 0, &ew, NULL) - gopt_profile_fresh_output_time(p1, 1e6)) < 1e-15);
    gopt_cost_table_destroy(&t0);
    gopt_cost_table_destroy(&t1);
    gopt_graph_free(g);
    gopt_cost_free(c0);
    gopt_cost_free(c1);
    gopt_profile_free(p0);
    gopt_profile_free(p1);
}

static void test_example_graph_on_shipped(void **state) {
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/graphs/examples/mlp_train.graphml", GOPT_SOURCE_DIR);
    gopt_graph *g = NULL;
    assert_int_equal(gopt_graph_load(path, &g, NULL), GOPT_OK);
    const char *names[] = {"p100-pcie-x8.json", "v100-dgx1-x8.json", "a100-nvswitch-x8.json", "h100-nvswitch-x8.json"};
    double prev = INFINITY;
    for (int i = 0; i < 4; i++) {
        gopt_profile *p = load_shipped(names[i]);
        gopt_costmodel *cm = NULL;
        assert_int_equal(gopt_cost_create(p, 2, &cm, NULL), GOPT_OK);
        gopt_cost_table t;
        assert_int_equal(gopt_cost_table_build(cm, g, &t, NULL), GOPT_OK);
        double sum = 0, gemm_compute = 0;
        const gopt_frozen *f = gopt_graph_frozen(g);
        for (int v = 0; v < t.n; v++) {
            assert_true(t.time[v * 2] >= 0 && t.time[v * 2] == t.time[v * 2 + 1]);
            if (f->op_class[v] > GOPT_OP_CLASS_PARAM) assert_true(t.time[v * 2] >= t.launch[0]);
            sum += t.time[v * 2];
            if (f->op_class[v] == GOPT_OP_CLASS_GEMM) gemm_compute += t.compute[v * 2];
        }
        /* newer GPUs compute the GEMMs faster (launch overheads are equal) */
        assert_true(gemm_compute < prev);
        prev = gemm_compute;
        assert_true(sum > 0);
        gopt_cost_table_destroy(&t);
        gopt_cost_free(cm);
        gopt_profile_free(p);
    }
    gopt_graph_free(g);
}


static void test_cli_cost(void **state) {
    (void)state;
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s cost --help > /dev/null", GOPT_BINARY);
    assert_int_equal(test_run(cmd), 0);
    snprintf(cmd, sizeof cmd,
             "%s cost %s/graphs/examples/mlp_train.graphml --profile %s/profiles/v100-dgx1-x8.json --top 3 | grep -q "
             "'serial time'",
             GOPT_BINARY, GOPT_SOURCE_DIR, GOPT_SOURCE_DIR);
    assert_int_equal(test_run(cmd), 0);
    snprintf(cmd, sizeof cmd,
             "%s cost %s/graphs/examples/mlp_train.graphml --profile %s/profiles/v100-dgx1-x8.json --json | grep -q "
             "'\"time_by_class\"'",
             GOPT_BINARY, GOPT_SOURCE_DIR, GOPT_SOURCE_DIR);
    assert_int_equal(test_run(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s cost %s/graphs/examples/mlp_train.graphml 2>/dev/null", GOPT_BINARY, GOPT_SOURCE_DIR);
    assert_int_equal(test_run(cmd), 2);
    snprintf(cmd, sizeof cmd,
             "%s cost %s/graphs/examples/mlp_train.graphml --profile %s/profiles/v100-dgx1-x8.json --devices 9 2>/dev/null",
             GOPT_BINARY, GOPT_SOURCE_DIR, GOPT_SOURCE_DIR);
    assert_int_equal(test_run(cmd), 2);
    snprintf(cmd, sizeof cmd,
             "%s cost %s/graphs/examples/mlp_train.graphml --profile %s/profiles/v100-dgx1-x8.json --device 8 2>/dev/null",
             GOPT_BINARY, GOPT_SOURCE_DIR, GOPT_SOURCE_DIR);
    assert_int_equal(test_run(cmd), 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_devices),         cmocka_unit_test(test_roofline_ops),
        cmocka_unit_test(test_transfers),              cmocka_unit_test(test_table_interpolation),
        cmocka_unit_test(test_table_build_and_groups), cmocka_unit_test(test_slice_reads_its_part), cmocka_unit_test(test_example_graph_on_shipped),
        cmocka_unit_test(test_cli_cost),               cmocka_unit_test(test_efficiency_factors), cmocka_unit_test(test_fresh_output),
        cmocka_unit_test(test_overlapped_dispatch),        cmocka_unit_test(test_conv_gemm_dims),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
