/* test_decisions.c: decisions validation (devices, colocation, fusion
 * legality) and the decisions file format, with every rejection. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gopt_decisions.h"

static char tmpdir[256];
static gopt_graph *mlp;

static int setup(void **state) {
    (void)state;
    gopt_error err;
    if (test_tmpdir_make(tmpdir, sizeof tmpdir, "decisions")) return -1;
    return gopt_graph_load(GOPT_SOURCE_DIR "/graphs/examples/mlp_train.graphml", &mlp, &err) == GOPT_OK ? 0 : -1;
}
static int teardown(void **state) {
    (void)state;
    gopt_graph_free(mlp);
    return test_tmpdir_remove(tmpdir);
}

static int32_t id(const char *name) {
    int32_t v = gopt_graph_find(mlp, name);
    assert_true(v >= 0);
    return v;
}

static void expect_invalid(const gopt_decisions *d, int ndev, const char *n1, const char *n2) {
    gopt_error err = {0};
    gopt_status st = gopt_decisions_validate(d, mlp, ndev, &err);
    if (st == GOPT_OK || (n1 && !strstr(err.msg, n1)) || (n2 && !strstr(err.msg, n2)))
        print_error("status %d: %s\n", st, err.msg);
    assert_int_equal(st, GOPT_EINVAL);
    if (n1) assert_non_null(strstr(err.msg, n1));
    if (n2) assert_non_null(strstr(err.msg, n2));
}

static void test_default_is_valid_and_topological(void **state) {
    (void)state;
    gopt_decisions d;
    gopt_error err = {0};
    assert_int_equal(gopt_decisions_init(&d, gopt_graph_num_nodes(mlp), &err), GOPT_OK);
    const gopt_frozen *f = gopt_graph_frozen(mlp);
    gopt_decisions_set_default(&d, f);
    assert_int_equal(gopt_decisions_validate(&d, mlp, 1, &err), GOPT_OK);
    for (int e = 0; e < f->m; e++) assert_true(d.priority[f->edge_src[e]] > d.priority[f->edge_dst[e]]);
    gopt_decisions_destroy(&d);
}

static void test_devices_and_colocation(void **state) {
    (void)state;
    gopt_decisions d;
    gopt_error err = {0};
    assert_int_equal(gopt_decisions_init(&d, gopt_graph_num_nodes(mlp), &err), GOPT_OK);
    gopt_decisions_set_default(&d, gopt_graph_frozen(mlp));
    d.device[id("mm2")] = 2;
    expect_invalid(&d, 2, "node 'mm2': device 2 does not exist", "2 devices");
    d.device[id("mm2")] = -1;
    expect_invalid(&d, 2, "node 'mm2'", NULL);
    d.device[id("mm2")] = 1;
    assert_int_equal(gopt_decisions_validate(&d, mlp, 2, &err), GOPT_OK);
    /* w1 and its update are colocated */
    d.device[id("update/w1")] = 1;
    expect_invalid(&d, 2, "breaks colocation group 'w1'", "'w1' is on device 0");
    d.device[id("w1")] = 1;
    assert_int_equal(gopt_decisions_validate(&d, mlp, 2, &err), GOPT_OK);
    gopt_decisions_destroy(&d);
}

static void test_fusion_rules(void **state) {
    (void)state;
    gopt_decisions d;
    gopt_error err = {0};
    assert_int_equal(gopt_decisions_init(&d, gopt_graph_num_nodes(mlp), &err), GOPT_OK);
    gopt_decisions_set_default(&d, gopt_graph_frozen(mlp));
    /* a legal chain: mm1 -> relu1 */
    d.group[id("mm1")] = d.group[id("relu1")] = 3;
    assert_int_equal(gopt_decisions_validate(&d, mlp, 2, &err), GOPT_OK);
    /* across devices */
    d.device[id("relu1")] = 1;
    expect_invalid(&d, 2, "fusion group 3", "device 1");
    d.device[id("relu1")] = 0;
    /* not connected: mm1 and mm2 are not adjacent */
    d.group[id("relu1")] = -1;
    d.group[id("mm2")] = 3;
    expect_invalid(&d, 2, "fusion group 3 is not connected", "'mm2'");
    /* connected but a cycle after contraction: relu1 -> mm2 -> loss -> grad/mm2 -> grad/relu1, and relu1 ->
     * grad/relu1 directly; fusing {relu1, grad/relu1} leaves a path out of the group and back in */
    d.group[id("mm1")] = d.group[id("mm2")] = -1;
    d.group[id("relu1")] = d.group[id("grad/relu1")] = 5;
    expect_invalid(&d, 2, "fusion group 5", "cycle");
    /* out of range group id */
    d.group[id("relu1")] = d.group[id("grad/relu1")] = -1;
    d.group[id("loss")] = 1000;
    expect_invalid(&d, 2, "node 'loss': fusion group 1000 is out of range", NULL);
    gopt_decisions_destroy(&d);
}

static void write_text(const char *path, const char *text) {
    gopt_error err;
    assert_int_equal(gopt_file_write_atomic(path, text, strlen(text), 0, &err), GOPT_OK);
}

static void test_file_roundtrip(void **state) {
    (void)state;
    gopt_decisions d, e;
    gopt_error err = {0};
    int32_t n = gopt_graph_num_nodes(mlp);
    assert_int_equal(gopt_decisions_init(&d, n, &err), GOPT_OK);
    gopt_decisions_set_default(&d, gopt_graph_frozen(mlp));
    d.device[id("w2")] = d.device[id("mm2")] = d.device[id("update/w2")] = 1;
    d.group[id("mm1")] = d.group[id("relu1")] = 7;
    d.priority[id("loss")] = -42;
    char path[400];
    snprintf(path, sizeof path, "%s/d.tsv", tmpdir);
    assert_int_equal(gopt_decisions_save(path, mlp, 2, &d, &err), GOPT_OK);
    assert_int_equal(gopt_decisions_load(path, mlp, 2, &e, &err), GOPT_OK);
    assert_memory_equal(d.device, e.device, (size_t)n * sizeof *d.device);
    assert_memory_equal(d.priority, e.priority, (size_t)n * sizeof *d.priority);
    assert_memory_equal(d.group, e.group, (size_t)n * sizeof *d.group);
    gopt_decisions_destroy(&e);
    /* the same file against a one-device cluster: its header is refused, naming the file */
    assert_int_equal(gopt_decisions_load(path, mlp, 1, &e, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "d.tsv"));
    assert_non_null(strstr(err.msg, "line 3: the decisions are for 2 devices, the cluster has 1"));
    assert_null(e.device);
    gopt_decisions_destroy(&d);
}

static void expect_load_error(const char *text, const char *needle) {
    char path[400];
    snprintf(path, sizeof path, "%s/bad.tsv", tmpdir);
    write_text(path, text);
    gopt_decisions d;
    gopt_error err = {0};
    gopt_status st = gopt_decisions_load(path, mlp, 2, &d, &err);
    if (st == GOPT_OK || !strstr(err.msg, needle) || !strstr(err.msg, "bad.tsv"))
        print_error("status %d: %s\n", st, err.msg);
    assert_int_not_equal(st, GOPT_OK);
    assert_int_equal(gopt_status_exit_code(st), 2);
    assert_non_null(strstr(err.msg, needle));
    assert_non_null(strstr(err.msg, "bad.tsv"));
}

#define HDR "gopt-decisions 1\ngraph mlp_train\ndevices 2\nnode\tdevice\tpriority\tgroup\n"

static void test_file_rejections(void **state) {
    (void)state;
    expect_load_error("hello\n", "expected 'gopt-decisions 1'");
    expect_load_error("gopt-decisions 1\nfoo\n", "line 2: expected 'graph NAME', found 'foo'");
    expect_load_error("gopt-decisions 1\ngraph mlp_train\nnode\tdevice\tpriority\tgroup\n",
                      "line 3: expected 'devices N'");
    expect_load_error("gopt-decisions 1\ngraph mlp_train\ndevices 2\nfoo\n", "column header");
    expect_load_error("gopt-decisions 1\ngraph other\ndevices 2\n", "line 2: the decisions are for graph 'other', not 'mlp_train'");
    expect_load_error("gopt-decisions 1\ngraph mlp_train\ndevices 3\n", "for 3 devices, the cluster has 2");
    expect_load_error("gopt-decisions 1\ngraph mlp_train\ndevices +2\n", "expected 'devices N'");
    expect_load_error("gopt-decisions 1\ngraph mlp_train\n", "the header line 'devices N' is missing");
    expect_load_error(HDR "mm1\t\t0\t1\t-1\n", "expected 4 tab-separated fields, found more");
    expect_load_error(HDR "mm1\t0\t\t1\n", "field 3 (priority) is empty (two tabs in a row?)");
    expect_load_error(HDR "mm1\t 0\t1\t-1\n", "device ' 0' is not an integer");
    expect_load_error(HDR "ghost\t0\t1\t-1\n", "node 'ghost' is not in graph 'mlp_train'");
    expect_load_error(HDR "mm1\t0\t1\t-1\nmm1\t0\t1\t-1\n", "node 'mm1' appears twice");
    expect_load_error(HDR "mm1\tzero\t1\t-1\n", "device 'zero' is not an integer");
    expect_load_error(HDR "mm1\t0\t1\n", "4 tab-separated fields");
    expect_load_error(HDR "mm1\t0\t1\t-1\n", "has no decision (13 of 14 nodes missing)");
    expect_load_error("", "not a decisions file");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_is_valid_and_topological),
        cmocka_unit_test(test_devices_and_colocation),
        cmocka_unit_test(test_fusion_rules),
        cmocka_unit_test(test_file_roundtrip),
        cmocka_unit_test(test_file_rejections),
    };
    return cmocka_run_group_tests_name("decisions", tests, setup, teardown);
}
