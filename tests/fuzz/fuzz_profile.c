/* fuzz_profile.c: libFuzzer harness for the profile reader
 * (gopt_profile_parse on the bytes). An accepted profile must write back to
 * JSON that reads back, and must simulate a small graph whose amounts sit at
 * the graph bounds with a finite step time. Corpus: corpus/profile/. */
#include "fuzz_common.h"

static gopt_graph *extreme_graph(void) {
    static gopt_graph *g;
    if (g) return g;
    gopt_error err = {0};
    FUZZ_REQUIRE(!gopt_graph_create(&g, "extreme", "fuzz", &err), "%s", err.msg);
    const double B = GOPT_GRAPH_MAX_BYTES, F = GOPT_GRAPH_MAX_FLOPS;
    const gopt_node_attrs nodes[] = {
        {"w", "Var", GOPT_OP_CLASS_PARAM, 0, B, B, "", "float32", GOPT_PHASE_FWD, -1, ""},
        {"mm", "MatMul", GOPT_OP_CLASS_GEMM, F, B, 0, "4096x4096", "float32", GOPT_PHASE_FWD, 0, ""},
        {"conv", "Conv", GOPT_OP_CLASS_CONV, F, B, B, "", "float16", GOPT_PHASE_FWD, 0, ""},
        {"relu", "Relu", GOPT_OP_CLASS_ELEMENTWISE, 1, 1, 0, "", "", GOPT_PHASE_FWD, 1, ""},
        {"sum", "Sum", GOPT_OP_CLASS_REDUCTION, F, 4, 0, "", "", GOPT_PHASE_BWD, 1, ""},
        {"cp", "Copy", GOPT_OP_CLASS_DATA_MOVEMENT, 0, B, 0, "", "", GOPT_PHASE_OPT, 2, ""},
    };
    for (size_t i = 0; i < sizeof nodes / sizeof *nodes; i++)
        FUZZ_REQUIRE(!gopt_graph_add_node(g, &nodes[i], NULL, &err), "%s", err.msg);
    const int32_t edges[][2] = {{0, 1}, {1, 2}, {1, 3}, {2, 4}, {3, 4}, {4, 5}, {0, 5}};
    for (size_t i = 0; i < sizeof edges / sizeof *edges; i++)
        FUZZ_REQUIRE(!gopt_graph_add_edge(g, edges[i][0], edges[i][1], i & 1 ? 1 : B, &err), "%s", err.msg);
    FUZZ_REQUIRE(!gopt_graph_finalize(g, &err), "%s", err.msg);
    return g;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gopt_profile *p = NULL;
    gopt_error err = {0};
    gopt_status st = gopt_profile_parse((const char *)data, size, "fuzz.json", &p, &err);
    if (st != GOPT_OK) {
        FUZZ_REQUIRE(!p, "a refused profile was returned");
        FUZZ_REQUIRE(gopt_status_exit_code(st) == 2 || st == GOPT_ENOMEM, "status %d: %s", st, err.msg);
        FUZZ_REQUIRE(strstr(err.msg, "fuzz.json"), "the message does not name the file: %s", err.msg);
        return 0;
    }
    int nd = gopt_profile_num_devices(p);
    FUZZ_REQUIRE(nd >= 1 && nd <= GOPT_PROFILE_MAX_DEVICES, "%d devices", nd);
    gopt_buf b;
    gopt_buf_init(&b);
    FUZZ_REQUIRE(!gopt_profile_write_json(p, &b, &err), "%s", err.msg);
    gopt_profile *q = NULL;
    st = gopt_profile_parse(b.data, b.len, "rewritten.json", &q, &err);
    FUZZ_REQUIRE(st == GOPT_OK, "the rewritten profile is refused: %s", err.msg);
    FUZZ_REQUIRE(gopt_profile_num_devices(q) == nd, "rewrite changed the device count");
    gopt_profile_free(q);
    gopt_buf_destroy(&b);
    gopt_costmodel *cm = NULL;
    FUZZ_REQUIRE(!gopt_cost_create(p, nd, &cm, &err), "%s", err.msg);
    gopt_graph *g = extreme_graph();
    const gopt_frozen *f = gopt_graph_frozen(g);
    gopt_decisions d;
    FUZZ_REQUIRE(!gopt_decisions_init(&d, f->n, &err), "%s", err.msg);
    gopt_decisions_set_default(&d, f);
    fuzz_check_sim(g, cm, &d);
    for (int32_t v = 0; v < f->n; v++) d.device[v] = v % nd;
    fuzz_check_sim(g, cm, &d);
    gopt_decisions_destroy(&d);
    gopt_cost_free(cm);
    gopt_profile_free(p);
    return 0;
}
