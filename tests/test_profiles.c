/* test_profiles.c: profile loading, validation (every bad-input rule with the
 * field named in the message), the shipped datasheet profiles, JSON round
 * trip, the CPU calibrator (short budget) and the CUDA calibrator's refusal
 * without a GPU, and the `gopt profile` command. */
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
#include <time.h>
#include <unistd.h>

#include "gopt_profile.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static gopt_profile *load_shipped(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/profiles/%s", GOPT_SOURCE_DIR, name);
    gopt_profile *p = NULL;
    gopt_error err = {0};
    gopt_status st = gopt_profile_load(path, &p, &err);
    if (st) fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(st, GOPT_OK);
    assert_non_null(p);
    return p;
}

static void test_shipped_profiles(void **state) {
    (void)state;
    struct {
        const char *file, *topo;
        double mem, fp32, bw;
        int ndev;
    } want[] = {
        {"p100-pcie-x8.json", "pcie_tree", 16 * GIB, 9.3e12, 732e9, 8},
        {"v100-dgx1-x8.json", "nvlink_cube_mesh", 16 * GIB, 15.7e12, 900e9, 8},
        {"a100-nvswitch-x8.json", "nvswitch", 40 * GIB, 19.5e12, 1555e9, 8},
        {"h100-nvswitch-x8.json", "nvswitch", 80 * GIB, 67e12, 3.35e12, 8},
        {"v100-dgx2-x16.json", "nvswitch", 32 * GIB, 15.7e12, 900e9, 16},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        gopt_profile *p = load_shipped(want[i].file);
        const int nd = want[i].ndev;
        assert_int_equal(gopt_profile_num_devices(p), nd);
        assert_string_equal(gopt_profile_source(p), "datasheet");
        assert_true(strlen(gopt_profile_reference(p)) > 20);
        assert_string_equal(gopt_profile_topology(p), want[i].topo);
        for (int d = 0; d < nd; d++) {
            assert_int_equal(gopt_profile_device_kind(p, d), GOPT_DEVICE_GPU);
            assert_true(gopt_profile_device_memory(p, d) == want[i].mem);
            assert_true(gopt_profile_device_peak(p, d, GOPT_DTYPE_FP32) == want[i].fp32);
            assert_true(gopt_profile_device_bandwidth(p, d) == want[i].bw);
            assert_true(gopt_profile_device_launch_overhead(p, d) > 0);
            for (int e = 0; e < nd; e++)
                if (e != d) {
                    assert_true(gopt_profile_link_bandwidth(p, d, e) > 1e9);
                    assert_true(gopt_profile_link_latency(p, d, e) > 0);
                    /* symmetric clusters */
                    assert_true(gopt_profile_link_bandwidth(p, d, e) == gopt_profile_link_bandwidth(p, e, d));
                }
        }
        assert_string_equal(gopt_profile_device_name(p, 7), "gpu7");
        assert_int_equal(gopt_profile_find_device(p, "gpu3"), 3);
        assert_int_equal(gopt_profile_find_device(p, "gpu8"), nd > 8 ? 8 : -1);
        assert_int_equal(gopt_profile_find_device(p, "gpu16"), -1);
        gopt_profile_free(p);
    }
    /* Topology details. */
    gopt_profile *v = load_shipped("v100-dgx1-x8.json");
    assert_true(gopt_profile_link_bandwidth(v, 0, 3) == 50e9); /* two NVLinks */
    assert_true(gopt_profile_link_bandwidth(v, 0, 1) == 25e9); /* one */
    assert_true(gopt_profile_link_bandwidth(v, 0, 5) == 15.75e9); /* none: PCIe + host */
    int links = 0;
    for (int e = 1; e < 8; e++) links += gopt_profile_link_bandwidth(v, 0, e) >= 25e9;
    assert_int_equal(links, 4);
    gopt_profile_free(v);
    gopt_profile *pc = load_shipped("p100-pcie-x8.json");
    assert_true(gopt_profile_link_bandwidth(pc, 0, 3) > gopt_profile_link_bandwidth(pc, 0, 4));
    assert_true(gopt_profile_device_peak(pc, 0, GOPT_DTYPE_FP16) == 18.7e12);
    assert_true(gopt_profile_device_peak(pc, 0, GOPT_DTYPE_BF16) == 0); /* not given */
    gopt_profile_free(pc);
    gopt_profile *x = load_shipped("v100-dgx2-x16.json"); /* every pair through the switch at 150 GB/s */
    assert_true(gopt_profile_link_bandwidth(x, 0, 15) == 150e9 && gopt_profile_link_bandwidth(x, 9, 3) == 150e9);
    gopt_profile_free(x);
}

static const char *GOOD =
    "{\"format\":\"gopt-profile\",\"version\":1,\"name\":\"t\",\n"
    "\"provenance\":{\"source\":\"measured\",\"machine\":\"m\",\"date\":\"d\",\"command\":\"c\"},\n"
    "\"devices\":[{\"name\":\"a\",\"kind\":\"cpu\",\"model\":\"x\",\"memory_bytes\":1e9,\n"
    "  \"peak_flops\":{\"fp32\":1e11},\"memory_bandwidth\":1e10,\"launch_overhead\":1e-6,\"tables\":\"s\"},\n"
    " {\"name\":\"b\",\"kind\":\"gpu\",\"model\":\"y\",\"memory_bytes\":2e9,\n"
    "  \"peak_flops\":{\"fp32\":2e11,\"fp16\":4e11},\"memory_bandwidth\":2e10,\"launch_overhead\":0}],\n"
    "\"links\":[{\"src\":\"a\",\"dst\":\"b\",\"bandwidth\":5e9,\"latency\":1e-5,\"tables\":\"s\"}],\n"
    "\"tables\":{\"s\":{\"gemm\":[[8,8,8,1e-6],[16,16,16,2e-6]],\"elementwise\":[[100,1e-7],[1000,2e-7]],\n"
    "  \"copy\":[[10,1e-5],[1e6,1e-4]]}}}\n";

static gopt_status parse(const char *text, gopt_profile **p, gopt_error *err) {
    return gopt_profile_parse(text, strlen(text), "t.json", p, err);
}

static void test_parse_good_and_roundtrip(void **state) {
    (void)state;
    gopt_profile *p = NULL, *q = NULL;
    gopt_error err = {0};
    assert_int_equal(parse(GOOD, &p, &err), GOPT_OK);
    assert_int_equal(gopt_profile_num_devices(p), 2);
    assert_string_equal(gopt_profile_topology(p), "explicit");
    assert_int_equal(gopt_profile_device_kind(p, 1), GOPT_DEVICE_GPU);
    assert_true(gopt_profile_link_bandwidth(p, 1, 0) == 5e9); /* bidirectional by default */
    gopt_profile_table t;
    assert_int_equal(gopt_profile_device_table(p, 0, GOPT_TABLE_GEMM, &t), 1);
    assert_int_equal(t.n, 2);
    assert_int_equal(t.dim, 3);
    assert_true(t.points[7] == 2e-6);
    assert_int_equal(gopt_profile_device_table(p, 1, GOPT_TABLE_GEMM, &t), 0);
    assert_int_equal(gopt_profile_device_table(p, 0, GOPT_TABLE_CONV, &t), 0);
    assert_int_equal(gopt_profile_link_table(p, 1, 0, &t), 1);
    assert_int_equal(t.n, 2);
    gopt_buf b;
    gopt_buf_init(&b);
    assert_int_equal(gopt_profile_write_json(p, &b, &err), GOPT_OK);
    assert_int_equal(gopt_profile_parse(b.data, b.len, "roundtrip", &q, &err), GOPT_OK);
    gopt_buf_destroy(&b);
    assert_int_equal(gopt_profile_num_devices(q), 2);
    for (int d = 0; d < 2; d++) {
        assert_string_equal(gopt_profile_device_name(p, d), gopt_profile_device_name(q, d));
        assert_true(gopt_profile_device_memory(p, d) == gopt_profile_device_memory(q, d));
        for (int k = 0; k < GOPT_DTYPE_COUNT; k++)
            assert_true(gopt_profile_device_peak(p, d, (gopt_dtype)k) == gopt_profile_device_peak(q, d, (gopt_dtype)k));
        assert_true(gopt_profile_device_launch_overhead(p, d) == gopt_profile_device_launch_overhead(q, d));
    }
    assert_true(gopt_profile_link_latency(q, 0, 1) == 1e-5);
    assert_int_equal(gopt_profile_link_table(q, 0, 1, &t), 1);
    assert_string_equal(gopt_profile_command(q), "c");
    gopt_profile_free(p);
    gopt_profile_free(q);
}

/* Replace the first occurrence of `from` in base by `to`, parse, expect a
 * failure whose message contains `needle`. */
static void expect_bad_in(const char *base, const char *from, const char *to, gopt_status code, const char *needle) {
    const char *at = strstr(base, from);
    assert_non_null(at);
    char text[4096];
    snprintf(text, sizeof text, "%.*s%s%s", (int)(at - base), base, to, at + strlen(from));
    gopt_profile *p = (gopt_profile *)0x1;
    gopt_error err = {0};
    gopt_status st = parse(text, &p, &err);
    if (st == GOPT_OK || !strstr(err.msg, needle))
        fprintf(stderr, "replacing '%s' by '%s': status %d, message: %s\n", from, to, st, err.msg);
    assert_int_equal(st, code);
    assert_null(p);
    assert_non_null(strstr(err.msg, needle));
    assert_non_null(strstr(err.msg, "t.json"));
}

static void expect_bad(const char *from, const char *to, gopt_status code, const char *needle) {
    expect_bad_in(GOOD, from, to, code, needle);
}

/* GOOD with per-op-kind efficiency factors (docs/profiles.md, "Efficiency"). */
static const char *EFF_BLOCK =
    "\"efficiency\":{\"framework\":\"PyTorch 1.13\",\"models\":[\"resnet18 batch 2\"],\"date\":\"2026-11-23\","
    "\"command\":\"tools/torch_fit.py\",\"op_overhead\":5e-6,\"factors\":{\"gemm\":0.5,\"depthwise_conv\":8,"
    "\"data_movement\":0.05}},\n";

static void good_with_efficiency(char *text, size_t size) {
    const char *at = strstr(GOOD, "\"tables\":{\"s\"");
    assert_non_null(at);
    snprintf(text, size, "%.*s%s%s", (int)(at - GOOD), GOOD, EFF_BLOCK, at);
}

/* efficiency.fresh_output: the framework's extra seconds for an output written into fresh
 * memory, piecewise linear in bytes, proportional outside the rows; bad rows named. */
static void test_fresh_output(void **state) {
    (void)state;
    char text[4096], t2[4096];
    good_with_efficiency(text, sizeof text);
    gopt_profile *p = NULL, *q = NULL;
    gopt_error err = {0};
    assert_int_equal(parse(text, &p, &err), GOPT_OK);
    assert_true(gopt_profile_fresh_output_time(p, 1e8) == 0); /* no rows: nothing */
    gopt_profile_free(p);
    const char *at = strstr(text, "\"factors\":");
    assert_non_null(at);
    snprintf(t2, sizeof t2, "%.*s\"fresh_output\":[[1000,1e-6],[2000,4e-6],[4000,4e-6]],%s", (int)(at - text), text, at);
    assert_int_equal(parse(t2, &p, &err), GOPT_OK);
    assert_true(gopt_profile_fresh_output_time(p, 0) == 0);
    assert_true(gopt_profile_fresh_output_time(p, -5) == 0);
    assert_true(fabs(gopt_profile_fresh_output_time(p, 500) - 0.5e-6) < 1e-18);  /* below: proportional */
    assert_true(fabs(gopt_profile_fresh_output_time(p, 1000) - 1e-6) < 1e-18);
    assert_true(fabs(gopt_profile_fresh_output_time(p, 1500) - 2.5e-6) < 1e-18); /* between: linear */
    assert_true(fabs(gopt_profile_fresh_output_time(p, 3000) - 4e-6) < 1e-18);
    assert_true(fabs(gopt_profile_fresh_output_time(p, 8000) - 8e-6) < 1e-18);   /* beyond: the last rate */
    gopt_buf b; /* written back and read back equal */
    gopt_buf_init(&b);
    assert_int_equal(gopt_profile_write_json(p, &b, &err), GOPT_OK);
    assert_int_equal(gopt_profile_parse(b.data, b.len, "roundtrip", &q, &err), GOPT_OK);
    gopt_buf_destroy(&b);
    for (double x = 100; x < 1e5; x *= 1.7)
        assert_true(gopt_profile_fresh_output_time(p, x) == gopt_profile_fresh_output_time(q, x));
    gopt_profile_free(p);
    gopt_profile_free(q);
    const char *rows = "[[1000,1e-6],[2000,4e-6],[4000,4e-6]]";
    expect_bad_in(t2, rows, "[]", GOPT_EINVAL, "efficiency.fresh_output must be an array of 1 to 64 rows");
    expect_bad_in(t2, rows, "{\"a\":1}", GOPT_EINVAL, "efficiency.fresh_output must be an array");
    expect_bad_in(t2, rows, "[[1000,1e-6],[2000]]", GOPT_EFORMAT, "efficiency.fresh_output[1] is not a row [bytes, seconds]");
    expect_bad_in(t2, rows, "[[1000,1e-6],[\"x\",2e-6]]", GOPT_EFORMAT, "efficiency.fresh_output[1] is not a row");
    expect_bad_in(t2, rows, "[[1000,1e-6],[1000,2e-6]]", GOPT_EINVAL,
                  "efficiency.fresh_output[1]: bytes 1000 must exceed the previous row's 1000");
    expect_bad_in(t2, rows, "[[0.5,1e-6]]", GOPT_EINVAL, "efficiency.fresh_output[0]: bytes 0.5 must be in [1,");
    expect_bad_in(t2, rows, "[[1000,-1e-6]]", GOPT_EINVAL, "efficiency.fresh_output[0]: seconds -9.99");
    expect_bad_in(t2, rows, "[[1000,1e7]]", GOPT_EINVAL, "efficiency.fresh_output[0]: seconds 10000000 must be in [0,");
}

static void test_efficiency(void **state) {
    (void)state;
    gopt_profile *p = NULL, *q = NULL;
    gopt_error err = {0};
    /* absent: factors 1, no overhead */
    assert_int_equal(parse(GOOD, &p, &err), GOPT_OK);
    assert_int_equal(gopt_profile_has_efficiency(p), 0);
    for (int k = 0; k < GOPT_OP_KIND_COUNT; k++) assert_true(gopt_profile_efficiency(p, (gopt_op_kind)k) == 1.0);
    assert_true(gopt_profile_op_overhead(p) == 0);
    gopt_profile_free(p);
    char text[4096];
    good_with_efficiency(text, sizeof text);
    assert_int_equal(parse(text, &p, &err), GOPT_OK);
    assert_int_equal(gopt_profile_has_efficiency(p), 1);
    assert_true(gopt_profile_efficiency(p, GOPT_OP_KIND_GEMM) == 0.5);
    assert_true(gopt_profile_efficiency(p, GOPT_OP_KIND_DEPTHWISE_CONV) == 8);
    assert_true(gopt_profile_efficiency(p, GOPT_OP_KIND_CONV) == 1); /* not given */
    /* the finer kinds not given: the kinds they split (reduction 1 here, elementwise 1) */
    assert_true(gopt_profile_efficiency(p, GOPT_OP_KIND_NORMALIZATION) ==
                gopt_profile_efficiency(p, GOPT_OP_KIND_REDUCTION));
    assert_true(gopt_profile_efficiency(p, GOPT_OP_KIND_OPTIMIZER) ==
                gopt_profile_efficiency(p, GOPT_OP_KIND_ELEMENTWISE));
    {
        char t2[4096], *at = strstr(text, "\"data_movement\":0.05");
        assert_non_null(at);
        snprintf(t2, sizeof t2, "%.*s\"normalization\":2.5,%s", (int)(at - text), text, at);
        gopt_profile *r = NULL;
        assert_int_equal(parse(t2, &r, &err), GOPT_OK);
        assert_true(gopt_profile_efficiency(r, GOPT_OP_KIND_NORMALIZATION) == 2.5);
        assert_true(gopt_profile_efficiency(r, GOPT_OP_KIND_REDUCTION) == 1);
        gopt_profile_free(r);
    }
    assert_string_equal(gopt_op_kind_name(GOPT_OP_KIND_NORMALIZATION), "normalization");
    assert_string_equal(gopt_op_kind_name(GOPT_OP_KIND_OPTIMIZER), "optimizer");
    assert_true(gopt_profile_op_overhead(p) == 5e-6);
    assert_string_equal(gopt_op_kind_name(GOPT_OP_KIND_DATA_MOVEMENT), "data_movement");
    assert_null(gopt_op_kind_name(GOPT_OP_KIND_COUNT));
    /* written back with its provenance, read back equal */
    gopt_buf b;
    gopt_buf_init(&b);
    assert_int_equal(gopt_profile_write_json(p, &b, &err), GOPT_OK);
    assert_non_null(strstr(b.data, "\"models\""));
    assert_non_null(strstr(b.data, "tools/torch_fit.py"));
    assert_int_equal(gopt_profile_parse(b.data, b.len, "roundtrip", &q, &err), GOPT_OK);
    gopt_buf_destroy(&b);
    for (int k = 0; k < GOPT_OP_KIND_COUNT; k++)
        assert_true(gopt_profile_efficiency(p, (gopt_op_kind)k) == gopt_profile_efficiency(q, (gopt_op_kind)k));
    assert_true(gopt_profile_op_overhead(q) == 5e-6);
    gopt_profile_free(p);
    gopt_profile_free(q);
    /* bounds and form: file, element and value named */
    expect_bad_in(text, "\"gemm\":0.5", "\"gemm\":0", GOPT_EINVAL,
                  "efficiency.factors: field 'gemm' = 0 must be in [0.001, 1000]");
    expect_bad_in(text, "\"gemm\":0.5", "\"gemm\":1e4", GOPT_EINVAL,
                  "efficiency.factors: field 'gemm' = 10000 must be in [0.001, 1000]");
    expect_bad_in(text, "\"gemm\":0.5", "\"gemm\":\"fast\"", GOPT_EFORMAT, "field 'gemm' = \"fast\" is not a number");
    expect_bad_in(text, "\"gemm\":0.5", "\"optimizer\":0", GOPT_EINVAL,
                  "efficiency.factors: field 'optimizer' = 0 must be in [0.001, 1000]");
    expect_bad_in(text, "\"gemm\":0.5", "\"matmul\":0.5", GOPT_EINVAL, "efficiency.factors: unknown op kind 'matmul'");
    expect_bad_in(text, "\"op_overhead\":5e-6", "\"op_overhead\":2", GOPT_EINVAL,
                  "efficiency: field 'op_overhead' = 2 must be in [0, 1]");
    expect_bad_in(text, "\"op_overhead\":5e-6", "\"op_overhead\":-1e-6", GOPT_EINVAL, "'op_overhead' = -9.99");
    expect_bad_in(text, "[\"resnet18 batch 2\"]", "[]", GOPT_EINVAL, "field 'models' must be a non-empty array");
    expect_bad_in(text, "[\"resnet18 batch 2\"]", "[\"\"]", GOPT_EINVAL, "efficiency.models[0] is not a non-empty string");
    expect_bad_in(text, "\"models\":[\"resnet18 batch 2\"],", "", GOPT_EFORMAT, "efficiency: field 'models' is missing");
    expect_bad_in(text, "\"date\":\"2026-11-23\"", "\"date\":\"\"", GOPT_EINVAL, "efficiency: field 'date' is empty");
    expect_bad_in(text, "\"command\":\"tools/torch_fit.py\",", "", GOPT_EFORMAT, "efficiency: field 'command' is missing");
    expect_bad_in(text, "\"framework\":", "\"frame\":", GOPT_EFORMAT, "efficiency: unknown field 'frame'");
    expect_bad_in(text, "{\"gemm\":0.5,\"depthwise_conv\":8,\"data_movement\":0.05}", "{}", GOPT_EINVAL,
                  "field 'factors' must be a non-empty object");
    expect_bad_in(text, "\"factors\":{", "\"factors\":{},\"x\":{", GOPT_EFORMAT, "efficiency: unknown field 'x'");
    /* the shipped PyTorch-fitted profile is the measured one plus its efficiency, nothing else */
    p = load_shipped("cpu-epyc-2core-measured.json");
    q = load_shipped("cpu-epyc-2core-pytorch.json");
    assert_int_equal(gopt_profile_has_efficiency(p), 0);
    assert_int_equal(gopt_profile_has_efficiency(q), 1);
    assert_true(gopt_profile_op_overhead(q) > 0);
    assert_true(gopt_profile_efficiency(q, GOPT_OP_KIND_DEPTHWISE_CONV) != 1);
    assert_int_equal(gopt_profile_num_devices(p), gopt_profile_num_devices(q));
    for (int d = 0; d < gopt_profile_num_devices(p); d++) {
        assert_true(gopt_profile_device_launch_overhead(p, d) == gopt_profile_device_launch_overhead(q, d));
        assert_true(gopt_profile_device_bandwidth(p, d) == gopt_profile_device_bandwidth(q, d));
        gopt_profile_table a, c;
        for (int k = 0; k < GOPT_TABLE_KIND_COUNT; k++) {
            assert_int_equal(gopt_profile_device_table(p, d, (gopt_table_kind)k, &a), gopt_profile_device_table(q, d, (gopt_table_kind)k, &c));
            assert_int_equal(a.n, c.n);
        }
    }
    gopt_profile_free(p);
    gopt_profile_free(q);
}

static void test_bad_inputs(void **state) {
    (void)state;
    /* missing fields */
    expect_bad("\"memory_bytes\":1e9,", "", GOPT_EFORMAT, "'memory_bytes' is missing");
    expect_bad("\"launch_overhead\":0", "\"notes\":\"\"", GOPT_EFORMAT, "'launch_overhead' is missing");
    expect_bad("\"peak_flops\":{\"fp32\":1e11},", "", GOPT_EFORMAT, "'peak_flops' is missing");
    expect_bad("\"fp32\":2e11,", "", GOPT_EFORMAT, "'fp32' is missing");
    expect_bad("\"machine\":\"m\",", "", GOPT_EFORMAT, "'machine' is missing");
    expect_bad("\"format\":\"gopt-profile\",", "", GOPT_EFORMAT, "'format' is missing");
    /* negative, zero, NaN, not a number */
    expect_bad("\"memory_bandwidth\":1e10", "\"memory_bandwidth\":-1e10", GOPT_EINVAL, "'memory_bandwidth' = -10000000000 must be in [1, 1e+16]");
    expect_bad("\"memory_bytes\":2e9", "\"memory_bytes\":0", GOPT_EINVAL, "'memory_bytes' = 0 must be in [1, 1.15292e+18]");
    expect_bad("\"launch_overhead\":1e-6", "\"launch_overhead\":-1e-6", GOPT_EINVAL, "'launch_overhead'");
    expect_bad("\"latency\":1e-5", "\"latency\":NaN", GOPT_EFORMAT, "\"latency\":NaN");
    expect_bad("\"latency\":1e-5", "\"latency\":\"NaN\"", GOPT_EFORMAT, "'latency' = \"NaN\" is not a number");
    expect_bad("\"fp32\":1e11", "\"fp32\":-5", GOPT_EINVAL, "'fp32' = -5");
    expect_bad("[16,16,16,2e-6]", "[16,16,-16,2e-6]", GOPT_EINVAL, "tables.s.gemm[1][2] = -16 must be a number in [1, 2.14748e+09]");
    expect_bad("[1000,2e-7]", "[1000,0]", GOPT_EINVAL, "tables.s.elementwise[1][1] = 0 must be a number in [1e-12, 1e+06]");
    expect_bad("[1000,2e-7]", "[1000]", GOPT_EFORMAT, "tables.s.elementwise[1]: expected a row of 2");
    expect_bad("\"gemm\":", "\"conv_gemm\":[[64,64,9,1e-6],[64,64,2e-6]],\"gemm\":", GOPT_EFORMAT,
               "tables.s.conv_gemm[1]: expected a row of 4 numbers (m, n, k, seconds)");
    /* links */
    expect_bad("\"dst\":\"b\"", "\"dst\":\"zz\"", GOPT_EINVAL, "field 'dst' = 'zz' is not a device");
    expect_bad("\"src\":\"a\"", "\"src\":\"q\"", GOPT_EINVAL, "field 'src' = 'q' is not a device");
    expect_bad("\"tables\":\"s\"}],", "\"tables\":\"s\",\"bidirectional\":false}],", GOPT_EINVAL,
               "no valid link from 'b' to 'a'");
    expect_bad("\"links\":[{\"src\":\"a\",\"dst\":\"b\",\"bandwidth\":5e9,\"latency\":1e-5,\"tables\":\"s\"}],", "",
               GOPT_EFORMAT, "'topology' and 'links' are both missing");
    /* tables */
    expect_bad("\"elementwise\":[[100,1e-7],[1000,2e-7]]", "\"elementwise\":[]", GOPT_EINVAL,
               "tables.s.elementwise: empty table");
    expect_bad("\"tables\":{\"s\":{", "\"tables\":{\"e\":{},\"s\":{", GOPT_EINVAL, "tables.e: empty table set");
    expect_bad("\"tables\":\"s\"},", "\"tables\":\"nope\"},", GOPT_EINVAL, "field 'tables' = 'nope'");
    expect_bad("\"gemm\":", "\"gemmm\":", GOPT_EFORMAT, "unknown field 'gemmm'");
    /* devices */
    expect_bad("\"kind\":\"cpu\"", "\"kind\":\"tpu\"", GOPT_EINVAL, "field 'kind' = 'tpu'");
    expect_bad("\"name\":\"b\"", "\"name\":\"a\"", GOPT_EINVAL, "device name 'a' is used twice");
    expect_bad("\"memory_bytes\":1e9,", "\"memory_bytes\":1e9,\"count\":1.5,", GOPT_EINVAL, "'count' = 1.5");
    expect_bad("\"fp32\":1e11", "\"fp32\":1e11,\"fp7\":1", GOPT_EINVAL, "unknown dtype 'fp7'");
    /* bounds: extreme but finite values, device counts (checked before the devices^2 links) */
    expect_bad("\"fp32\":1e11", "\"fp32\":1e-300", GOPT_EINVAL, "devices[0].peak_flops: field 'fp32' = 1e-300 must be in [1, 1e+18]");
    /* numbers a double cannot hold: refused naming the element (gopt_json_check_numbers), never read as 0 */
    expect_bad("\"fp32\":1e11", "\"fp32\":5e-324", GOPT_EFORMAT,
               "t.json: line 4: devices[0].peak_flops.fp32: the number 5e-324 is below the smallest normal double");
    expect_bad("\"launch_overhead\":1e-6", "\"launch_overhead\":1e-400", GOPT_EFORMAT,
               "devices[0].launch_overhead: the number 1e-400 is below the smallest double and would read as 0");
    expect_bad("\"latency\":1e-5", "\"latency\":2.5e-310", GOPT_EFORMAT, "links[0].latency: the number 2.5e-310");
    expect_bad("[16,16,16,2e-6]", "[16,16,16,2e-999]", GOPT_EFORMAT, "tables.s.gemm[1][3]: the number 2e-999");
    expect_bad("\"memory_bytes\":2e9", "\"memory_bytes\":2e999", GOPT_EFORMAT,
               "devices[1].memory_bytes: the number 2e999 is beyond the largest double");
    expect_bad("\"fp32\":1e11", "\"fp32\":1e19", GOPT_EINVAL, "'fp32' = 1e+19 must be in [1, 1e+18]");
    expect_bad("\"launch_overhead\":1e-6", "\"launch_overhead\":1e308", GOPT_EINVAL, "'launch_overhead' = 1e+308 must be in [0, 1]");
    expect_bad("\"memory_bandwidth\":1e10", "\"memory_bandwidth\":1e-300", GOPT_EINVAL, "devices[0]: field 'memory_bandwidth' = 1e-300");
    expect_bad("\"memory_bytes\":2e9", "\"memory_bytes\":1e19", GOPT_EINVAL, "'memory_bytes' = 1e+19 must be in");
    expect_bad("\"latency\":1e-5", "\"latency\":2", GOPT_EINVAL, "links[0]: field 'latency' = 2 must be in [0, 1]");
    expect_bad("\"bandwidth\":5e9", "\"bandwidth\":1e17", GOPT_EINVAL, "links[0]: field 'bandwidth' = 1e+17");
    expect_bad("[1000,2e-7]", "[1e300,2e-7]", GOPT_EINVAL, "tables.s.elementwise[1][0] = 1.0000000000000001e+300");
    expect_bad("[1000,2e-7]", "[1000,1e7]", GOPT_EINVAL, "tables.s.elementwise[1][1] = 10000000");
    expect_bad("\"memory_bytes\":1e9,", "\"memory_bytes\":1e9,\"count\":65,", GOPT_EINVAL, "devices[0]: field 'count' = 65 must be in [1, 64]");
    expect_bad("\"memory_bytes\":1e9,", "\"memory_bytes\":1e9,\"count\":40000,", GOPT_EINVAL, "'count' = 40000");
    expect_bad("\"memory_bytes\":2e9,", "\"memory_bytes\":2e9,\"count\":64,", GOPT_EINVAL, "devices[1]: 65 devices so far: a profile has at most 64");
    {
        gopt_profile *p = NULL;
        gopt_error err = {0};
        assert_int_equal(parse("{\"format\":\"gopt-profile\",\"version\":1,\"name\":\"e\",\"provenance\":{"
                               "\"source\":\"datasheet\",\"reference\":\"r\"},\"devices\":[]}",
                               &p, &err),
                         GOPT_EINVAL);
        assert_non_null(strstr(err.msg, "'devices' must be a non-empty array"));
        assert_int_equal(parse("{\"format\":\"gopt-profile\",\"version\":1,\"name\":\"e\",\"provenance\":{"
                               "\"source\":\"datasheet\"},\"devices\":[]}",
                               &p, &err),
                         GOPT_EINVAL);
    }
    expect_bad("\"source\":\"measured\"", "\"source\":\"guess\"", GOPT_EINVAL, "'source' = 'guess'");
    expect_bad("\"version\":1", "\"version\":2", GOPT_EUNSUP, "'version' = 2");
    /* topology */
    expect_bad("\"links\":[", "\"topology\":{\"kind\":\"ring\",\"bandwidth\":1,\"latency\":0},\"links\":[", GOPT_EINVAL,
               "field 'kind' = 'ring' is unknown");
    expect_bad("\"links\":[", "\"topology\":{\"kind\":\"nvlink_cube_mesh\",\"link_bandwidth\":1,\"latency\":0,"
                              "\"fallback_bandwidth\":1,\"fallback_latency\":0},\"links\":[",
               GOPT_EINVAL, "needs exactly 8 devices");
    expect_bad("\"links\":[", "\"topology\":{\"kind\":\"uniform\",\"latency\":0},\"links\":[", GOPT_EFORMAT,
               "'bandwidth' is missing");
    /* a shared memory bus: only on shared_memory, within the bandwidth bounds */
    expect_bad("\"links\":[", "\"topology\":{\"kind\":\"uniform\",\"bandwidth\":1,\"latency\":0,\"memory_bandwidth\":5e9},\"links\":[",
               GOPT_EINVAL, "'memory_bandwidth' belongs to kind 'shared_memory', not 'uniform'");
    expect_bad("\"links\":[", "\"topology\":{\"kind\":\"shared_memory\",\"bandwidth\":1,\"latency\":0,\"memory_bandwidth\":0},\"links\":[",
               GOPT_EINVAL, "field 'memory_bandwidth' = 0 must be in");
}

static void test_topology_overrides(void **state) {
    (void)state;
    /* A uniform topology, one pair overridden in one direction. */
    const char *from = "\"links\":[{\"src\":\"a\",\"dst\":\"b\",\"bandwidth\":5e9,\"latency\":1e-5,\"tables\":\"s\"}]";
    const char *to = "\"topology\":{\"kind\":\"uniform\",\"bandwidth\":1e9,\"latency\":2e-6},"
                     "\"links\":[{\"src\":\"a\",\"dst\":\"b\",\"bandwidth\":7e9,\"latency\":1e-6,\"bidirectional\":false}]";
    const char *at = strstr(GOOD, from);
    char text[4096];
    snprintf(text, sizeof text, "%.*s%s%s", (int)(at - GOOD), GOOD, to, at + strlen(from));
    gopt_profile *p = NULL;
    gopt_error err = {0};
    assert_int_equal(parse(text, &p, &err), GOPT_OK);
    assert_string_equal(gopt_profile_topology(p), "uniform");
    assert_true(gopt_profile_link_bandwidth(p, 0, 1) == 7e9);
    assert_true(gopt_profile_link_bandwidth(p, 1, 0) == 1e9);
    assert_true(gopt_profile_link_latency(p, 1, 0) == 2e-6);
    gopt_profile_table t;
    assert_int_equal(gopt_profile_link_table(p, 0, 1, &t), 0);
    assert_true(gopt_profile_shared_bandwidth(p) == 0); /* no bus given */
    gopt_profile_free(p);
    /* shared_memory with a bus: read, and written back */
    const char *bus = "\"topology\":{\"kind\":\"shared_memory\",\"bandwidth\":1e9,\"latency\":2e-6,\"memory_bandwidth\":3e10},"
                      "\"links\":[{\"src\":\"a\",\"dst\":\"b\",\"bandwidth\":7e9,\"latency\":1e-6}]";
    snprintf(text, sizeof text, "%.*s%s%s", (int)(at - GOOD), GOOD, bus, at + strlen(from));
    assert_int_equal(parse(text, &p, &err), GOPT_OK);
    assert_true(gopt_profile_shared_bandwidth(p) == 3e10);
    gopt_buf js;
    gopt_buf_init(&js);
    assert_int_equal(gopt_profile_write_json(p, &js, &err), GOPT_OK);
    gopt_profile *q = NULL;
    assert_int_equal(gopt_profile_parse(js.data, js.len, "t.json", &q, &err), GOPT_OK);
    assert_true(gopt_profile_shared_bandwidth(q) == 3e10);
    gopt_buf_destroy(&js);
    gopt_profile_free(q);
    gopt_profile_free(p);
}

static void test_load_errors(void **state) {
    (void)state;
    gopt_profile *p = NULL;
    gopt_error err = {0};
    assert_int_equal(gopt_profile_load("/nonexistent/dir/p.json", &p, &err), GOPT_EIO);
    assert_null(p);
    assert_non_null(strstr(err.msg, "p.json"));
    assert_int_equal(parse("[1,2]", &p, &err), GOPT_EFORMAT);
    assert_int_equal(parse("{\"format\":", &p, &err), GOPT_EFORMAT);
    assert_int_equal(gopt_dtype_parse("float16"), GOPT_DTYPE_FP16);
    assert_int_equal(gopt_dtype_parse("bogus"), -1);
    assert_string_equal(gopt_table_kind_name(GOPT_TABLE_REDUCTION), "reduction");
    assert_null(gopt_table_kind_name(GOPT_TABLE_KIND_COUNT));
}

static void test_calibrate_cpu_short(void **state) {
    (void)state;
    gopt_calib_options o = {0};
    o.ndev = 1;
    o.budget_s = 3;
    o.seed = 5;
    o.command = "test_profiles";
    /* a workload's shapes: two measured as given; one over the FLOPs limit, one with an operand
     * over 256 MB and one with a zero dim skipped */
    const double shapes[] = {1, 300, 200, 7, 13, 5000, 4096, 4096, 4096, 1, 100000, 1000, 0, 64, 64};
    int32_t skipped = -1;
    o.gemm_shapes = shapes;
    o.n_gemm_shapes = 5;
    o.n_gemm_shapes_skipped = &skipped;
    gopt_profile *p = NULL;
    gopt_error err = {0};
    double t = gopt_now_seconds();
    gopt_status st = gopt_calibrate_cpu(&o, &p, &err);
    double el = gopt_now_seconds() - t;
    if (st) fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(st, GOPT_OK);
    assert_true(el < 15); /* the budget is soft, not ignored */
    assert_string_equal(gopt_profile_source(p), "measured");
    assert_string_equal(gopt_profile_command(p), "test_profiles");
    assert_int_equal(gopt_profile_num_devices(p), 1);
    assert_int_equal(gopt_profile_device_kind(p, 0), GOPT_DEVICE_CPU);
    assert_true(gopt_profile_device_peak(p, 0, GOPT_DTYPE_FP32) > 1e8);
    assert_true(gopt_profile_device_bandwidth(p, 0) > 1e8);
    gopt_profile_table tb;
    for (int k = 0; k < GOPT_TABLE_COPY; k++)
        if (k != GOPT_TABLE_CONV && k != GOPT_TABLE_CONV_GEMM) {
            assert_int_equal(gopt_profile_device_table(p, 0, (gopt_table_kind)k, &tb), 1);
            assert_true(tb.n >= 4);
        }
    /* The launch overhead is a kernel as an executor times it, one call between two readings of
     * the kernel clock (the thread's CPU time on a one-core device, else the wall clock): at
     * least the cost of those readings (a call timed inside a batch, the old figure, was a few
     * ns, below one reading of either clock here). */
    int thread_clock = sysconf(_SC_NPROCESSORS_ONLN) <= 1;
    double clk = INFINITY;
    for (int i = 0; i < 200; i++) {
        double d;
        if (thread_clock) {
            struct timespec t0, t1;
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
            d = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        } else {
            double t0 = gopt_now_seconds();
            d = gopt_now_seconds() - t0;
        }
        if (d > 0 && d < clk) clk = d;
    }
    if (clk < INFINITY) assert_true(gopt_profile_device_launch_overhead(p, 0) >= 0.5 * clk);
    /* Bigger GEMMs take longer: the table is real, not constant. */
    assert_int_equal(gopt_profile_device_table(p, 0, GOPT_TABLE_GEMM, &tb), 1);
    double small = INFINITY, big = 0;
    for (int i = 0; i < tb.n; i++) {
        double fl = tb.points[4 * i] * tb.points[4 * i + 1] * tb.points[4 * i + 2], s = tb.points[4 * i + 3];
        if (fl < 1e5 && s < small) small = s;
        if (fl > 1e8 && s > big) big = s;
    }
    if (big > 0 && small < INFINITY) assert_true(big > 10 * small);
    assert_int_equal(skipped, 3);
    int found = 0;
    for (int i = 0; i < tb.n; i++)
        for (int w = 0; w < 2; w++)
            if (!memcmp(tb.points + 4 * i, shapes + 3 * w, 3 * sizeof(double))) {
                assert_true(tb.points[4 * i + 3] > 0);
                found |= 1 << w;
            }
    assert_int_equal(found, 3);
    assert_non_null(strstr(gopt_profile_description(p), "workload"));
    char path[] = "/tmp/gopt_test_profileXXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(gopt_profile_save(p, path, &err), GOPT_OK);
    gopt_profile *q = NULL;
    assert_int_equal(gopt_profile_load(path, &q, &err), GOPT_OK);
    assert_true(gopt_profile_device_bandwidth(q, 0) == gopt_profile_device_bandwidth(p, 0) ||
                fabs(gopt_profile_device_bandwidth(q, 0) / gopt_profile_device_bandwidth(p, 0) - 1) < 1e-9);
    unlink(path);
    gopt_profile_free(q);
    gopt_profile_free(p);
    /* more devices than cores */
    o.ndev = 1 << 20;
    assert_int_equal(gopt_calibrate_cpu(&o, &p, &err), GOPT_EINVAL);
    assert_null(p);
}

static void test_calibrate_cuda(void **state) {
    (void)state;
    gopt_calib_options o = {0};
    o.budget_s = 30;
    gopt_profile *p = NULL;
    gopt_error err = {0};
    gopt_status st = gopt_calibrate_cuda(&o, &p, &err);
    if (st == GOPT_EUNSUP) {
        assert_null(p);
        assert_true(strstr(err.msg, "GPU") || strstr(err.msg, "CUDA"));
        fprintf(stdout, "calibrate_cuda: %s\n", err.msg);
        skip();
    }
    assert_int_equal(st, GOPT_OK);
    assert_true(gopt_profile_num_devices(p) >= 1);
    assert_int_equal(gopt_profile_device_kind(p, 0), GOPT_DEVICE_GPU);
    gopt_profile_table tb, tc, tg;
    assert_int_equal(gopt_profile_device_table(p, 0, GOPT_TABLE_GEMM, &tb), 1);
    /* with cuDNN, each convolution is in both tables: by FLOPs and by its implicit GEMM */
    int conv = gopt_profile_device_table(p, 0, GOPT_TABLE_CONV, &tc);
    assert_int_equal(gopt_profile_device_table(p, 0, GOPT_TABLE_CONV_GEMM, &tg), conv);
    if (conv) {
        assert_int_equal(tc.n, tg.n);
        assert_int_equal(tg.dim, 3);
        for (int32_t r = 0; r < tc.n; r++) {
            const double *c = tc.points + 2 * r, *g = tg.points + 4 * r;
            assert_true(fabs(2 * g[0] * g[1] * g[2] - c[0]) <= 1e-9 * c[0] && g[3] == c[1]);
        }
    }
    gopt_profile_free(p);
}


static void test_cli(void **state) {
    (void)state;
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s profile --help > /dev/null", GOPT_BINARY);
    assert_int_equal(test_run(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s profile show %s/profiles/v100-dgx1-x8.json | grep -q 'nvlink_cube_mesh'", GOPT_BINARY,
             GOPT_SOURCE_DIR);
    assert_int_equal(test_run(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s profile show --json %s/profiles/h100-nvswitch-x8.json | grep -q '\"gpu7\"'",
             GOPT_BINARY, GOPT_SOURCE_DIR);
    assert_int_equal(test_run(cmd), 0);
    /* the CPU profile's memory bus, in text and JSON */
    snprintf(cmd, sizeof cmd, "%s profile show %s/profiles/cpu-epyc-2core-measured.json | grep -q '^memory bus .* GB/s, all devices at once'",
             GOPT_BINARY, GOPT_SOURCE_DIR);
    assert_int_equal(test_run(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s profile show --json %s/profiles/cpu-epyc-2core-measured.json | grep -q '\"shared_memory_bandwidth\"'",
             GOPT_BINARY, GOPT_SOURCE_DIR);
    assert_int_equal(test_run(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s profile show /nonexistent.json 2>/dev/null", GOPT_BINARY);
    assert_int_equal(test_run(cmd), 2);
    /* efficiency factors: shown; one out of its bounds is exit 2 naming file, element and value */
    snprintf(cmd, sizeof cmd, "%s profile show %s/tests/fuzz/corpus/profile/efficiency.json | grep -q '^efficiency  gemm 0.7 '",
             GOPT_BINARY, GOPT_SOURCE_DIR);
    assert_int_equal(test_run(cmd), 0);
    snprintf(cmd, sizeof cmd,
             "%s profile show %s/tests/fuzz/corpus/profile/efficiency-factor-1e300.json 2>&1 >/dev/null | grep -q "
             "\"efficiency-factor-1e300.json: efficiency.factors: field 'depthwise_conv' = 1.0000000000000001e+300 must be in\"",
             GOPT_BINARY, GOPT_SOURCE_DIR);
    assert_int_equal(test_run(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s profile show %s/tests/fuzz/corpus/profile/efficiency-factor-1e300.json 2>/dev/null",
             GOPT_BINARY, GOPT_SOURCE_DIR);
    assert_int_equal(test_run(cmd), 2);
    snprintf(cmd, sizeof cmd, "%s profile calibrate --backend tpu -o x.json 2>/dev/null", GOPT_BINARY);
    assert_int_equal(test_run(cmd), 2);
    snprintf(cmd, sizeof cmd, "%s profile calibrate --backend cpu 2>/dev/null", GOPT_BINARY);
    assert_int_equal(test_run(cmd), 2);
    /* an unwritable output is refused before measuring */
    snprintf(cmd, sizeof cmd, "%s profile calibrate --backend cpu -o /nonexistent-dir/x.json 2>/dev/null", GOPT_BINARY);
    double t0 = gopt_now_seconds();
    assert_int_equal(test_run(cmd), 2);
    assert_true(gopt_now_seconds() - t0 < 5);
    /* CUDA: exit 3 and a clear message where there is no GPU (or no CUDA build);
     * nothing is written. A usage error stays 2, not "cannot run here". */
    snprintf(cmd, sizeof cmd, "%s profile calibrate --backend cuda --budget -1 -o /tmp/never.json 2>/dev/null",
             GOPT_BINARY);
    assert_int_equal(test_run(cmd), 2);
    char out[] = "/tmp/gopt_test_cudaXXXXXX";
    assert_non_null(mkdtemp(out));
    snprintf(cmd, sizeof cmd, "%s profile calibrate --backend cuda -o %s/gpu.json --budget 20 2>%s/err.txt",
             GOPT_BINARY, out, out);
    int rc = test_run(cmd);
    char path[1200];
    snprintf(path, sizeof path, "%s/gpu.json", out);
    if (rc == 3) {
        assert_int_equal(access(path, F_OK), -1);
        snprintf(cmd, sizeof cmd, "grep -Eq 'no CUDA GPU|without the CUDA toolkit' %s/err.txt", out);
        assert_int_equal(test_run(cmd), 0);
    } else {
        assert_int_equal(rc, 0);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/err.txt", out);
    unlink(path);
    rmdir(out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shipped_profiles),     cmocka_unit_test(test_parse_good_and_roundtrip),
        cmocka_unit_test(test_bad_inputs),           cmocka_unit_test(test_topology_overrides),
        cmocka_unit_test(test_load_errors),          cmocka_unit_test(test_calibrate_cpu_short),
        cmocka_unit_test(test_calibrate_cuda),       cmocka_unit_test(test_cli),
        cmocka_unit_test(test_efficiency), cmocka_unit_test(test_fresh_output),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
