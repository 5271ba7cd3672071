/* test_util.h: fixtures shared by the cmocka test programs (header only: each
 * test program is one .c file, tests/CMakeLists.txt builds test_*.c).
 *
 * - test_tmpdir_make / test_tmpdir_remove: a private directory under /tmp
 *   for a program's files, made in setup and removed in teardown;
 * - test_run: run a shell command, return its exit code (-1 if killed);
 * - test_read_file / test_assert_same_files: a file's bytes (the test fails if it cannot be
 *   read), and two files holding the same bytes;
 * - test_random_graph: a random training-step-like DAG (the policy tests');
 * - test_profile_uniform: a cluster of identical, uniformly linked devices
 *   (device 0: peak 1e12 FLOP/s; the others `peak_rest`), parsed through the
 *   real profile loader so that a bad fixture fails loudly.
 * Include after <cmocka.h>. */
#ifndef GOPT_TEST_UTIL_H
#define GOPT_TEST_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "gopt_graph.h"
#include "gopt_profile.h"

/* Make /tmp/gopt_test_NAME_XXXXXX into dir (size >= 256); 0 on success. */
static inline int test_tmpdir_make(char *dir, size_t size, const char *name) {
    snprintf(dir, size, "/tmp/gopt_test_%s_XXXXXX", name);
    return mkdtemp(dir) ? 0 : -1;
}

static inline int test_tmpdir_remove(const char *dir) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static inline int test_run(const char *cmd) {
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* The bytes of the file at path (free them), their count in *len; fails the test if unreadable. */
static inline char *test_read_file(const char *path, size_t *len) {
    char *b = NULL;
    gopt_error err = {0};
    if (gopt_file_read_all(path, &b, len, &err) != GOPT_OK) fail_msg("%s", err.msg);
    return b;
}

/* The files at a and b hold the same bytes. */
static inline void test_assert_same_files(const char *a, const char *b) {
    size_t la, lb;
    char *x = test_read_file(a, &la), *y = test_read_file(b, &lb);
    assert_int_equal(la, lb);
    assert_memory_equal(x, y, la);
    free(x);
    free(y);
}

/* ndev devices of `mem` bytes each: device 0 peak 1e12 FLOP/s, devices 1.. peak_rest; memory
 * bandwidth 1e11 B/s, launch 1e-6 s; uniform links of 1e9 B/s and 1e-5 s latency. `who` names the
 * test program in the provenance. */
static inline gopt_profile *test_profile_uniform(int ndev, double mem, double peak_rest, const char *who) {
    char txt[2048], rest[512] = "";
    if (ndev >= 2)
        snprintf(rest, sizeof rest,
                 ",{\"name\":\"e\",\"count\":%d,\"kind\":\"gpu\",\"model\":\"m\",\"memory_bytes\":%.17g,"
                 "\"peak_flops\":{\"fp32\":%.17g},\"memory_bandwidth\":1e11,\"launch_overhead\":1e-6}",
                 ndev - 1, mem, peak_rest);
    snprintf(txt, sizeof txt,
             "{\"format\":\"gopt-profile\",\"version\":1,\"name\":\"test\",\"provenance\":{\"source\":\"measured\","
             "\"machine\":\"test\",\"date\":\"today\",\"command\":\"%s\"},"
             "\"devices\":[{\"name\":\"d\",\"count\":1,\"kind\":\"gpu\",\"model\":\"m\",\"memory_bytes\":%.17g,"
             "\"peak_flops\":{\"fp32\":1e12},\"memory_bandwidth\":1e11,\"launch_overhead\":1e-6}%s],"
             "\"topology\":{\"kind\":\"uniform\",\"bandwidth\":1e9,\"latency\":1e-5}}",
             who, mem, rest);
    gopt_profile *p = NULL;
    gopt_error err = {0};
    gopt_status st = gopt_profile_parse(txt, strlen(txt), "test", &p, &err);
    if (st) fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(st, GOPT_OK);
    return p;
}

/* A random training-step-like DAG of n nodes from `seed`: mixed ops and classes (every 7th kind a
 * parameter), log-uniform FLOPs and bytes, phases in thirds, 1-3 in-edges from the 6 nodes before
 * (duplicates kept), colocation groups when coloc_every > 0. */
static inline gopt_graph *test_random_graph(int n, uint64_t seed, int coloc_every) {
    gopt_rng rng;
    gopt_rng_seed(&rng, seed);
    gopt_graph *g = NULL;
    gopt_error err;
    assert_int_equal(gopt_graph_create(&g, "t", "test", &err), GOPT_OK);
    static const char *ops[] = {"MatMul", "Relu", "Add", "Conv2D", "Sum", "Reshape", "Const"};
    for (int i = 0; i < n; i++) {
        char name[32], col[32];
        snprintf(name, sizeof name, "n%d", i);
        gopt_node_attrs a = {0};
        a.name = name;
        int k = (int)gopt_rng_below(&rng, 7);
        a.op = ops[k];
        a.cls = (gopt_op_class)(k == 6 ? GOPT_OP_CLASS_PARAM : (int)gopt_rng_below(&rng, GOPT_OP_CLASS_COUNT));
        a.flops = gopt_rng_uniform(&rng) < 0.3 ? 0.0 : exp(gopt_rng_uniform(&rng) * 25.0);
        a.out_bytes = exp(gopt_rng_uniform(&rng) * 20.0);
        a.param_bytes = k == 6 ? exp(gopt_rng_uniform(&rng) * 18.0) : 0.0;
        a.phase = (gopt_phase)(1 + i * 3 / n);
        a.layer = i % 5 == 0 ? -1 : i / 4;
        col[0] = 0;
        if (coloc_every > 0 && i % coloc_every == 1) snprintf(col, sizeof col, "grp%d", i % (3 * coloc_every));
        a.colocate = col;
        assert_int_equal(gopt_graph_add_node(g, &a, NULL, &err), GOPT_OK);
    }
    for (int i = 1; i < n; i++) {
        int deg = 1 + (int)gopt_rng_below(&rng, 3);
        for (int e = 0; e < deg; e++) {
            int lo = i > 6 ? i - 6 : 0;
            int s = lo + (int)gopt_rng_below(&rng, (uint64_t)(i - lo));
            (void)gopt_graph_add_edge(g, s, i, 1000.0 * (1 + s), &err); /* duplicates are fine */
        }
    }
    assert_int_equal(gopt_graph_finalize(g, &err), GOPT_OK);
    return g;
}

#endif
