/* test_graphs.c: the graph core: builder, frozen view, GraphML(.gz) I/O and
 * every bad-input case of the foundation issue. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gopt_graph.h"

static char tmpdir[256];

static int setup(void **state) {
    (void)state;
    return test_tmpdir_make(tmpdir, sizeof tmpdir, "graphs");
}
static int teardown(void **state) {
    (void)state;
    return test_tmpdir_remove(tmpdir);
}

#define KEY_DEFS                                                                                                   \
    "<?xml version=\"1.0\"?>\n<graphml xmlns=\"http://graphml.graphdrawing.org/xmlns\">\n"                        \
    "<key id=\"gn\" for=\"graph\" attr.name=\"name\" attr.type=\"string\"/>\n"                                    \
    "<key id=\"name\" for=\"node\" attr.name=\"name\" attr.type=\"string\"/>\n"                                   \
    "<key id=\"op\" for=\"node\" attr.name=\"op\" attr.type=\"string\"/>\n"                                       \
    "<key id=\"class\" for=\"node\" attr.name=\"class\" attr.type=\"string\"/>\n"                                 \
    "<key id=\"flops\" for=\"node\" attr.name=\"flops\" attr.type=\"double\"/>\n"                                 \
    "<key id=\"ob\" for=\"node\" attr.name=\"out_bytes\" attr.type=\"double\"/>\n"                                \
    "<key id=\"pb\" for=\"node\" attr.name=\"param_bytes\" attr.type=\"double\"><default>0</default></key>\n"     \
    "<key id=\"col\" for=\"node\" attr.name=\"colocate\" attr.type=\"string\"/>\n"                                \
    "<key id=\"b\" for=\"edge\" attr.name=\"bytes\" attr.type=\"double\"/>\n"
#define GRAPH_OPEN "<graph edgedefault=\"directed\"><data key=\"gn\">t</data>\n"
#define KEYS KEY_DEFS GRAPH_OPEN

#define NODE(id, name, cls, flops)                                                                                 \
    "<node id=\"" id "\"><data key=\"name\">" name "</data><data key=\"op\">Op</data><data key=\"class\">" cls       \
    "</data><data key=\"flops\">" flops "</data><data key=\"ob\">8</data></node>\n"
#define EDGE(s, t, bytes) "<edge source=\"" s "\" target=\"" t "\"><data key=\"b\">" bytes "</data></edge>\n"
#define TAIL "</graph>\n</graphml>\n"

/* Write text to a temp file and load it; returns the status. */
static gopt_status load_text(const char *text, const char *fname, gopt_graph **g, gopt_error *err) {
    char path[400];
    snprintf(path, sizeof path, "%s/%s", tmpdir, fname);
    gopt_error werr;
    assert_int_equal(gopt_file_write_atomic(path, text, strlen(text), 0, &werr), GOPT_OK);
    return gopt_graph_load(path, g, err);
}

/* Expect a load to fail with exit code 2 and a message containing every needle. */
static void expect_reject(const char *text, const char *n1, const char *n2) {
    gopt_graph *g = (gopt_graph *)0x1;
    gopt_error err = {0};
    gopt_status st = load_text(text, "bad.graphml", &g, &err);
    if (st == GOPT_OK || !strstr(err.msg, "bad.graphml") || (n1 && !strstr(err.msg, n1)) || (n2 && !strstr(err.msg, n2)))
        print_error("status %d, message: %s\n", st, err.msg);
    assert_int_not_equal(st, GOPT_OK);
    assert_int_equal(gopt_status_exit_code(st), 2);
    assert_null(g);
    assert_non_null(strstr(err.msg, "bad.graphml"));
    if (n1) assert_non_null(strstr(err.msg, n1));
    if (n2) assert_non_null(strstr(err.msg, n2));
}

static gopt_node_attrs node(const char *name, gopt_op_class c, double flops) {
    gopt_node_attrs a = {.name = name, .op = "Op", .cls = c, .flops = flops, .out_bytes = 4, .layer = -1};
    return a;
}

static void test_builder_and_frozen(void **state) {
    (void)state;
    gopt_graph *g;
    gopt_error err = {0};
    assert_int_equal(gopt_graph_create(&g, "diamond", "test", &err), GOPT_OK);
    /* insert out of topological order on purpose: d first */
    int32_t d, a, b, c;
    gopt_node_attrs na = node("d", GOPT_OP_CLASS_ELEMENTWISE, 1);
    assert_int_equal(gopt_graph_add_node(g, &na, &d, &err), GOPT_OK);
    na = node("a", GOPT_OP_CLASS_INPUT, 0);
    na.colocate = "grp";
    assert_int_equal(gopt_graph_add_node(g, &na, &a, &err), GOPT_OK);
    na = node("b", GOPT_OP_CLASS_GEMM, 100);
    assert_int_equal(gopt_graph_add_node(g, &na, &b, &err), GOPT_OK);
    na = node("c", GOPT_OP_CLASS_CONV, 50);
    na.colocate = "grp";
    assert_int_equal(gopt_graph_add_node(g, &na, &c, &err), GOPT_OK);
    assert_int_equal(gopt_graph_add_edge(g, a, b, 10, &err), GOPT_OK);
    assert_int_equal(gopt_graph_add_edge(g, a, c, 20, &err), GOPT_OK);
    assert_int_equal(gopt_graph_add_edge(g, b, d, 30, &err), GOPT_OK);
    assert_int_equal(gopt_graph_add_edge(g, c, d, 40, &err), GOPT_OK);
    assert_null(gopt_graph_frozen(g));
    assert_int_equal(gopt_graph_finalize(g, &err), GOPT_OK);
    const gopt_frozen *f = gopt_graph_frozen(g);
    assert_non_null(f);
    assert_int_equal(f->n, 4);
    assert_int_equal(f->m, 4);
    /* topological: every edge goes forward in rank */
    for (int e = 0; e < f->m; e++) assert_true(f->rank[f->edge_src[e]] < f->rank[f->edge_dst[e]]);
    for (int i = 0; i < f->n; i++) assert_int_equal(f->rank[f->topo[i]], i);
    /* CSR matches the edge list */
    assert_int_equal(f->in_ptr[d + 1] - f->in_ptr[d], 2);
    assert_int_equal(f->out_ptr[a + 1] - f->out_ptr[a], 2);
    for (int v = 0; v < f->n; v++)
        for (int s = f->in_ptr[v]; s < f->in_ptr[v + 1]; s++) {
            assert_int_equal(f->edge_dst[f->in_eid[s]], v);
            assert_int_equal(f->edge_src[f->in_eid[s]], f->in_src[s]);
        }
    assert_int_equal(f->n_coloc, 1);
    assert_int_equal(f->coloc[a], 0);
    assert_int_equal(f->coloc[c], 0);
    assert_int_equal(f->coloc[b], -1);
    assert_int_equal(gopt_graph_find(g, "c"), c);
    assert_int_equal(gopt_graph_find(g, "zz"), -1);
    assert_non_null(gopt_graph_igraph(g));
    assert_int_equal(igraph_vcount(gopt_graph_igraph(g)), 4);
    gopt_graph_stats s;
    gopt_graph_get_stats(g, &s);
    assert_int_equal(s.depth, 3);
    assert_true(s.flops == 151);
    assert_true(s.edge_bytes == 100);
    assert_int_equal(s.sources, 1);
    assert_int_equal(s.sinks, 1);
    /* a finalized graph refuses changes */
    na = node("e", GOPT_OP_CLASS_OTHER, 0);
    assert_int_equal(gopt_graph_add_node(g, &na, NULL, &err), GOPT_EINVAL);
    gopt_graph_free(g);
}

static void test_builder_rejects_bad_values(void **state) {
    (void)state;
    gopt_graph *g;
    gopt_error err = {0};
    assert_int_equal(gopt_graph_create(&g, "t", "", &err), GOPT_OK);
    gopt_node_attrs na = node("x", GOPT_OP_CLASS_GEMM, -5);
    assert_int_equal(gopt_graph_add_node(g, &na, NULL, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "flops = -5 is negative"));
    na = node("x", GOPT_OP_CLASS_GEMM, NAN);
    assert_int_equal(gopt_graph_add_node(g, &na, NULL, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "NaN"));
    na = node("", GOPT_OP_CLASS_GEMM, 1);
    assert_int_equal(gopt_graph_add_node(g, &na, NULL, &err), GOPT_EINVAL);
    na = node("x", GOPT_OP_CLASS_GEMM, 1);
    assert_int_equal(gopt_graph_add_node(g, &na, NULL, &err), GOPT_OK);
    assert_int_equal(gopt_graph_add_node(g, &na, NULL, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "duplicate name"));
    assert_int_equal(gopt_graph_add_edge(g, 0, 5, 1, &err), GOPT_EINVAL);
    assert_int_equal(gopt_graph_add_edge(g, 0, 0, -1, &err), GOPT_EINVAL);
    assert_int_equal(gopt_graph_num_nodes(g), 1);
    gopt_graph_free(g);
}

static void test_load_example_and_roundtrip(void **state) {
    (void)state;
    gopt_graph *g, *g2, *g3;
    gopt_error err = {0};
    assert_int_equal(gopt_graph_load(GOPT_SOURCE_DIR "/graphs/examples/mlp_train.graphml", &g, &err), GOPT_OK);
    assert_int_equal(gopt_graph_num_nodes(g), 14);
    assert_int_equal(gopt_graph_num_edges(g), 19);
    assert_string_equal(gopt_graph_name(g), "mlp_train");
    gopt_node_attrs a;
    gopt_graph_node(g, gopt_graph_find(g, "w1"), &a);
    assert_true(a.param_bytes == 2408448);
    assert_string_equal(a.dtype, "float32"); /* from the key's <default> */
    assert_string_equal(a.colocate, "w1");
    assert_int_equal(a.cls, GOPT_OP_CLASS_PARAM);
    char p1[400], p2[400];
    snprintf(p1, sizeof p1, "%s/rt.graphml.gz", tmpdir);
    snprintf(p2, sizeof p2, "%s/rt.graphml", tmpdir);
    assert_int_equal(gopt_graph_save(g, p1, &err), GOPT_OK);
    assert_int_equal(gopt_graph_load(p1, &g2, &err), GOPT_OK);
    assert_int_equal(gopt_graph_save(g2, p2, &err), GOPT_OK);
    assert_int_equal(gopt_graph_load(p2, &g3, &err), GOPT_OK);
    const gopt_frozen *f1 = gopt_graph_frozen(g), *f3 = gopt_graph_frozen(g3);
    assert_int_equal(f1->n, f3->n);
    assert_int_equal(f1->m, f3->m);
    for (int v = 0; v < f1->n; v++) {
        gopt_node_attrs x, y;
        gopt_graph_node(g, v, &x);
        gopt_graph_node(g3, v, &y);
        assert_string_equal(x.name, y.name);
        assert_string_equal(x.op, y.op);
        assert_string_equal(x.shape, y.shape);
        assert_string_equal(x.dtype, y.dtype);
        assert_string_equal(x.colocate, y.colocate);
        assert_true(x.flops == y.flops && x.out_bytes == y.out_bytes && x.param_bytes == y.param_bytes);
        assert_true(x.cls == y.cls && x.phase == y.phase && x.layer == y.layer);
    }
    for (int e = 0; e < f1->m; e++) {
        assert_int_equal(f1->edge_src[e], f3->edge_src[e]);
        assert_int_equal(f1->edge_dst[e], f3->edge_dst[e]);
        assert_true(f1->edge_bytes[e] == f3->edge_bytes[e]);
    }
    gopt_graph_free(g);
    gopt_graph_free(g2);
    gopt_graph_free(g3);
}

static void test_exact_numbers_entities_and_extras(void **state) {
    (void)state;
    const char *text = KEY_DEFS
        "<!-- a comment --><key id=\"k\" for=\"node\" attr.name=\"note\" attr.type=\"string\"/>" GRAPH_OPEN
        "<node id=\"a\"><data key=\"name\">a&amp;b &lt;1&gt; &#65;&#x42;</data><data key=\"op\">Op</data>"
        "<data key=\"class\">gemm</data><data key=\"flops\"> 0.1 </data><data key=\"ob\">1e15</data>"
        "<data key=\"k\"><![CDATA[keep <me>]]></data></node>\n" NODE("b", "b", "other", "3") EDGE("a", "b", "0.30000000000000004")
        TAIL;
    gopt_graph *g, *g2;
    gopt_error err = {0};
    if (load_text(text, "ok.graphml", &g, &err) != GOPT_OK) print_error("%s\n", err.msg);
    assert_non_null(g);
    assert_int_equal(gopt_graph_find(g, "a&b <1> AB"), 0);
    assert_int_equal(gopt_graph_num_extra(g), 1);
    char p[400];
    snprintf(p, sizeof p, "%s/extras.graphml", tmpdir);
    assert_int_equal(gopt_graph_save(g, p, &err), GOPT_OK);
    assert_int_equal(gopt_graph_load(p, &g2, &err), GOPT_OK);
    const gopt_frozen *f = gopt_graph_frozen(g2);
    assert_true(f->flops[0] == 0.1);
    assert_true(f->out_bytes[0] == 1e15);
    assert_true(f->edge_bytes[0] == 0.30000000000000004);
    assert_int_equal(gopt_graph_num_extra(g2), 1);
    char *txt;
    size_t len;
    assert_int_equal(gopt_file_read_all(p, &txt, &len, &err), GOPT_OK);
    assert_non_null(strstr(txt, "keep &lt;me&gt;"));
    assert_non_null(strstr(txt, "attr.name=\"note\""));
    free(txt);
    gopt_graph_free(g);
    gopt_graph_free(g2);
}

static void test_reject_not_graphml(void **state) {
    (void)state;
    expect_reject("", "empty", NULL);
    expect_reject("hello world", "outside", NULL);
    expect_reject("<?xml version=\"1.0\"?><html><body/></html>", "not a GraphML file", "<html>");
    expect_reject("<graphml><key id=\"a\"", "unterminated", NULL);
    expect_reject(KEYS "<node id=\"a\"><data key=\"name\"><![CDATA[abc</data></node>" TAIL, "unterminated CDATA", NULL);
    expect_reject(KEYS "<desc><![CDATA[abc</desc>" TAIL, "unterminated CDATA", NULL);
}

static void test_reject_truncated_and_corrupt_gzip(void **state) {
    (void)state;
    char full[400], cut[400];
    gopt_graph *g = NULL;
    gopt_error err = {0};
    assert_int_equal(gopt_graph_load(GOPT_SOURCE_DIR "/graphs/examples/mlp_train.graphml", &g, &err), GOPT_OK);
    snprintf(full, sizeof full, "%s/full.graphml.gz", tmpdir);
    assert_int_equal(gopt_graph_save(g, full, &err), GOPT_OK);
    gopt_graph_free(g);
    char *raw;
    size_t len;
    FILE *fp = fopen(full, "rb");
    raw = malloc(1 << 20);
    len = fread(raw, 1, 1 << 20, fp);
    fclose(fp);
    snprintf(cut, sizeof cut, "%s/cut.graphml.gz", tmpdir);
    assert_int_equal(gopt_file_write_atomic(cut, raw, len * 2 / 3, 0, &err), GOPT_OK);
    g = (gopt_graph *)0x1;
    assert_int_equal(gopt_graph_load(cut, &g, &err), GOPT_EFORMAT);
    assert_null(g);
    assert_non_null(strstr(err.msg, "cut.graphml.gz"));
    assert_non_null(strstr(err.msg, "truncated"));
    for (size_t i = len / 2; i < len / 2 + 8; i++) raw[i] ^= 0x33;
    assert_int_equal(gopt_file_write_atomic(cut, raw, len, 0, &err), GOPT_OK);
    assert_int_equal(gopt_graph_load(cut, &g, &err), GOPT_EFORMAT);
    assert_non_null(strstr(err.msg, "cut.graphml.gz"));
    free(raw);
    /* an XML document truncated in the middle */
    expect_reject(KEYS NODE("a", "a", "gemm", "1") "<node id=\"b\"><data key=\"name\">b</da", "line", NULL);
    expect_reject(KEYS NODE("a", "a", "gemm", "1"), "not closed", NULL);
}

static void test_reject_cycle_names_two_nodes(void **state) {
    (void)state;
    /* zeta feeds the cycle alpha -> beta -> gamma -> alpha but is not on it */
    const char *text = KEYS NODE("a", "alpha", "gemm", "1") NODE("b", "beta", "gemm", "1") NODE("c", "gamma", "gemm", "1")
        NODE("z", "zeta", "input", "0") EDGE("z", "a", "1") EDGE("a", "b", "1") EDGE("b", "c", "1") EDGE("c", "a", "1") TAIL;
    expect_reject(text, "cycle", NULL);
    gopt_graph *g;
    gopt_error err = {0};
    assert_int_equal(load_text(text, "bad.graphml", &g, &err), GOPT_EINVAL);
    int named = !!strstr(err.msg, "'alpha'") + !!strstr(err.msg, "'beta'") + !!strstr(err.msg, "'gamma'");
    assert_int_equal(named, 2);
    assert_null(strstr(err.msg, "zeta"));
    expect_reject(KEYS NODE("a", "alpha", "gemm", "1") EDGE("a", "a", "1") TAIL, "cycle", "'alpha' feeds itself");
}

static void test_reject_bad_attributes(void **state) {
    (void)state;
    /* missing */
    expect_reject(KEYS "<node id=\"a\"><data key=\"name\">a</data><data key=\"op\">Op</data><data key=\"class\">gemm</data>"
                       "<data key=\"ob\">8</data></node>" TAIL,
                  "node 'a'", "missing attribute flops");
    expect_reject(KEYS "<node id=\"n7\"><data key=\"op\">Op</data></node>" TAIL, "node id 'n7'", "missing attribute name");
    /* negative, NaN, infinite, not a number */
    expect_reject(KEYS NODE("a", "conv3/bn", "gemm", "-1") TAIL, "node 'conv3/bn'", "flops = -1 is negative");
    expect_reject(KEYS NODE("a", "a", "gemm", "nan") TAIL, "node 'a'", "flops = 'nan' is not a decimal number");
    expect_reject(KEYS NODE("a", "a", "gemm", "inf") TAIL, "node 'a'", "flops = 'inf' is not a decimal number");
    expect_reject(KEYS NODE("a", "a", "gemm", "12abc") TAIL, "flops = '12abc'", "not a decimal number");
    /* hex floats, underflow to 0 (or to a subnormal), overflow to infinity */
    expect_reject(KEYS NODE("a", "a", "gemm", "0x1p4") TAIL, "flops = '0x1p4'", "not a decimal number");
    expect_reject(KEYS NODE("a", "a", "gemm", "1e-400") TAIL, "flops = '1e-400'", "would read as 0");
    expect_reject(KEYS NODE("a", "a", "gemm", "1e-310") TAIL, "flops = '1e-310'", "not a decimal number");
    expect_reject(KEYS NODE("a", "a", "gemm", "1e400") TAIL, "flops = '1e400'", "not a decimal number");
    expect_reject(KEYS NODE("a", "a", "gemm", ".") TAIL, "flops = '.'", "not a decimal number");
    /* bounds: per value, and the byte total */
    expect_reject(KEYS NODE("a", "a", "gemm", "2e21") TAIL, "node 'a'", "flops = 2e+21 is above the bound");
    expect_reject(KEYS "<node id=\"a\"><data key=\"name\">a</data><data key=\"op\">Op</data><data key=\"class\">gemm</data>"
                       "<data key=\"flops\">1</data><data key=\"ob\">1e19</data></node>" TAIL,
                  "node 'a'", "out_bytes = 1e+19 is above the bound");
    expect_reject(KEYS NODE("a", "a", "gemm", "1") NODE("b", "b", "gemm", "1") EDGE("a", "b", "1e308") TAIL,
                  "edge 'a' -> 'b'", "above the bound 1125899906842624 (2^50)");
    {
        /* 1025 edges of 2^50 bytes: each within its bound, 2^60 + 2^50 in all */
        size_t cap = 200000, len = 0;
        char *t = malloc(cap);
        len += (size_t)snprintf(t + len, cap - len, "%s", KEYS NODE("a", "a", "gemm", "1") NODE("b", "b", "gemm", "1"));
        for (int i = 0; i < 1025; i++)
            len += (size_t)snprintf(t + len, cap - len, "%s", EDGE("a", "b", "1125899906842624"));
        snprintf(t + len, cap - len, "%s", TAIL);
        expect_reject(t, "graph 't'", "edge bytes = 1.1540474045136896e+18 in all is above the bound");
        free(t);
    }
    /* characters XML forbids, invalid UTF-8 (raw or by reference), a graph without nodes */
    expect_reject(KEYS NODE("a", "a\x01" "b", "gemm", "1") TAIL, "line 13", "byte 0x01 is invalid UTF-8 or a character XML forbids");
    expect_reject(KEYS NODE("a", "a\xef\xbf\xbe", "gemm", "1") TAIL, "line 13", "byte 0xef");
    expect_reject(KEYS NODE("a", "a\xc3(", "gemm", "1") TAIL, "line 13", "byte 0xc3");
    expect_reject(KEYS NODE("a", "a\xc0\x80", "gemm", "1") TAIL, "line 13", "byte 0xc0");
    expect_reject(KEYS NODE("a", "a&#1;", "gemm", "1") TAIL, "line 13", "bad character reference '&#1;'");
    expect_reject(KEYS NODE("a", "a&#xFFFE;", "gemm", "1") TAIL, "line 13", "bad character reference");
    expect_reject(KEYS NODE("a", "a&#xD800;", "gemm", "1") TAIL, "line 13", "bad character reference");
    expect_reject(KEYS TAIL, "has no <node>", NULL);
    /* unknown class */
    expect_reject(KEYS NODE("a", "a", "matmul", "1") TAIL, "class = 'matmul'", "node 'a'");
    /* duplicate name, duplicate id */
    expect_reject(KEYS NODE("a", "same", "gemm", "1") NODE("b", "same", "gemm", "1") TAIL, "duplicate name", "'same'");
    expect_reject(KEYS NODE("a", "x", "gemm", "1") NODE("a", "y", "gemm", "1") TAIL, "duplicate node id", "'a'");
    /* edges: missing node, negative bytes, missing bytes */
    expect_reject(KEYS NODE("a", "a", "gemm", "1") EDGE("a", "ghost", "4") TAIL, "'ghost'", "does not exist");
    expect_reject(KEYS NODE("a", "a", "gemm", "1") NODE("b", "b", "gemm", "1") EDGE("a", "b", "-4") TAIL,
                  "edge 'a' -> 'b'", "negative");
    expect_reject(KEYS NODE("a", "a", "gemm", "1") NODE("b", "b", "gemm", "1") "<edge source=\"a\" target=\"b\"/>" TAIL,
                  "edge 'a' -> 'b'", "missing attribute bytes");
    /* undeclared key, undirected graph, a phase that is not one */
    expect_reject(KEYS "<node id=\"a\"><data key=\"nope\">1</data></node>" TAIL, "nope", "undeclared");
    expect_reject("<graphml><graph edgedefault=\"undirected\"></graph></graphml>", "directed", NULL);
}

/* The builder refuses what the reader refuses, so no graph in memory can make the writer emit
 * text an XML parser rejects; the bounds are inclusive. */
static void test_builder_text_and_bounds(void **state) {
    (void)state;
    gopt_graph *g = NULL;
    gopt_error err = {0};
    assert_int_equal(gopt_graph_create(&g, "bad\xff", "test", &err), GOPT_EINVAL);
    assert_null(g);
    assert_non_null(strstr(err.msg, "graph name: byte 3 (0xff)"));
    assert_int_equal(gopt_graph_create(&g, "ok \xe2\x82\xac \xf0\x9f\x99\x82", "test", &err), GOPT_OK);
    gopt_node_attrs na = node("a\x1f", GOPT_OP_CLASS_GEMM, 1);
    assert_int_equal(gopt_graph_add_node(g, &na, NULL, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "node name: byte 1 (0x1f)"));
    na = node("a", GOPT_OP_CLASS_GEMM, 1);
    na.shape = "4x\xed\xa0\x80"; /* a UTF-16 surrogate, encoded */
    assert_int_equal(gopt_graph_add_node(g, &na, NULL, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "node 'a': attribute shape: byte 2"));
    na = node("a", GOPT_OP_CLASS_GEMM, GOPT_GRAPH_MAX_FLOPS);
    na.out_bytes = na.param_bytes = GOPT_GRAPH_MAX_BYTES;
    assert_int_equal(gopt_graph_add_node(g, &na, NULL, &err), GOPT_OK);
    na = node("b", GOPT_OP_CLASS_GEMM, nextafter(GOPT_GRAPH_MAX_FLOPS, INFINITY));
    assert_int_equal(gopt_graph_add_node(g, &na, NULL, &err), GOPT_EINVAL);
    na = node("b", GOPT_OP_CLASS_GEMM, 0);
    assert_int_equal(gopt_graph_add_node(g, &na, NULL, &err), GOPT_OK);
    assert_int_equal(gopt_graph_add_edge(g, 0, 1, GOPT_GRAPH_MAX_BYTES * 2, &err), GOPT_EINVAL);
    assert_int_equal(gopt_graph_add_edge(g, 0, 1, GOPT_GRAPH_MAX_BYTES, &err), GOPT_OK);
    assert_int_equal(gopt_graph_finalize(g, &err), GOPT_OK);
    gopt_buf b;
    gopt_buf_init(&b);
    assert_int_equal(gopt_graph_write_graphml(g, &b, &err), GOPT_OK);
    assert_int_equal(gopt_graph_text_check(b.data, b.len), -1);
    gopt_buf_destroy(&b);
    gopt_graph_free(g);
}

static void test_parse_is_repeatable(void **state) {
    (void)state;
    /* the in-memory entry point, twice on the same text: same result */
    const char *text = KEYS NODE("a", "a", "input", "0") NODE("b", "b", "gemm", "7") EDGE("a", "b", "2") TAIL;
    for (int rep = 0; rep < 2; rep++) {
        char *copy = strdup(text);
        gopt_graph *g;
        gopt_error err = {0};
        assert_int_equal(gopt_graph_parse_graphml(copy, strlen(copy), "mem", &g, &err), GOPT_OK);
        assert_int_equal(gopt_graph_num_edges(g), 1);
        assert_true(gopt_graph_frozen(g)->flops[1] == 7);
        gopt_graph_free(g);
        free(copy);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builder_and_frozen),
        cmocka_unit_test(test_builder_rejects_bad_values),
        cmocka_unit_test(test_load_example_and_roundtrip),
        cmocka_unit_test(test_exact_numbers_entities_and_extras),
        cmocka_unit_test(test_reject_not_graphml),
        cmocka_unit_test(test_reject_truncated_and_corrupt_gzip),
        cmocka_unit_test(test_reject_cycle_names_two_nodes),
        cmocka_unit_test(test_reject_bad_attributes),
        cmocka_unit_test(test_builder_text_and_bounds),
        cmocka_unit_test(test_parse_is_repeatable),
    };
    return cmocka_run_group_tests_name("graphs", tests, setup, teardown);
}
