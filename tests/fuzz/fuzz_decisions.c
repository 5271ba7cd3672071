/* fuzz_decisions.c: libFuzzer harness for the decisions reader
 * (gopt_decisions_load of D.tsv against a fixed six-node graph and two
 * devices). Accepted decisions have been validated, so the simulator must
 * run them to a finite step time. With FUZZ_WRITE_SEEDS=DIR set,
 * initialization writes a valid file for that graph into DIR (how
 * corpus/decisions/ was seeded) and the graph itself
 * (tests/fuzz/decisions-graph.graphml, which tests/cli/fuzz_regressions.sh
 * uses). Corpus: corpus/decisions/. */
#include "fuzz_common.h"

static gopt_graph *G;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    gopt_error err = {0};
    FUZZ_REQUIRE(!gopt_graph_create(&G, "fuzz graph", "fuzz", &err), "%s", err.msg);
    /* names the file format must escape: a tab, a backslash, a leading '#' */
    const char *names[] = {"x", "w", "mm\t1", "#relu", "back\\slash", "update/w"};
    const gopt_op_class cls[] = {GOPT_OP_CLASS_INPUT, GOPT_OP_CLASS_PARAM, GOPT_OP_CLASS_GEMM,
                                 GOPT_OP_CLASS_ELEMENTWISE, GOPT_OP_CLASS_REDUCTION, GOPT_OP_CLASS_ELEMENTWISE};
    for (int i = 0; i < 6; i++) {
        gopt_node_attrs a = {names[i], "Op", cls[i], 1000.0 * i, 4096, i == 1 ? 65536 : 0, "", "", GOPT_PHASE_NONE, -1,
                             i == 1 || i == 5 ? "w" : ""};
        FUZZ_REQUIRE(!gopt_graph_add_node(G, &a, NULL, &err), "%s", err.msg);
    }
    const int32_t edges[][2] = {{0, 2}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {1, 5}};
    for (int i = 0; i < 6; i++) FUZZ_REQUIRE(!gopt_graph_add_edge(G, edges[i][0], edges[i][1], 4096, &err), "%s", err.msg);
    FUZZ_REQUIRE(!gopt_graph_finalize(G, &err), "%s", err.msg);
    const char *seeds = getenv("FUZZ_WRITE_SEEDS");
    if (seeds && seeds[0]) {
        gopt_decisions d;
        FUZZ_REQUIRE(!gopt_decisions_init(&d, 6, &err), "%s", err.msg);
        gopt_decisions_set_default(&d, gopt_graph_frozen(G));
        d.device[0] = d.device[2] = d.device[3] = 1;
        d.group[2] = d.group[3] = 4;
        char path[512];
        snprintf(path, sizeof path, "%s/valid.tsv", seeds);
        FUZZ_REQUIRE(!gopt_decisions_save(path, G, 2, &d, &err), "%s", err.msg);
        snprintf(path, sizeof path, "%s/decisions-graph.graphml", seeds); /* the graph, for the CLI test */
        FUZZ_REQUIRE(!gopt_graph_save(G, path, &err), "%s", err.msg);
        gopt_decisions_destroy(&d);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_path("D.tsv");
    fuzz_write(path, data, size);
    gopt_decisions d;
    gopt_error err = {0};
    gopt_status st = gopt_decisions_load(path, G, 2, &d, &err);
    if (st != GOPT_OK) {
        FUZZ_REQUIRE(!d.device, "refused decisions were returned");
        FUZZ_REQUIRE(gopt_status_exit_code(st) == 2 || st == GOPT_ENOMEM, "status %d: %s", st, err.msg);
        FUZZ_REQUIRE(strstr(err.msg, "D.tsv"), "the message does not name the file: %s", err.msg);
        return 0;
    }
    fuzz_check_sim(G, fuzz_slow_cluster(), &d);
    /* what is saved reads back the same */
    const char *again = fuzz_path("again.tsv");
    FUZZ_REQUIRE(!gopt_decisions_save(again, G, 2, &d, &err), "%s", err.msg);
    gopt_decisions e;
    st = gopt_decisions_load(again, G, 2, &e, &err);
    FUZZ_REQUIRE(st == GOPT_OK, "saved decisions are refused: %s", err.msg);
    FUZZ_REQUIRE(!memcmp(d.device, e.device, 6 * sizeof *d.device) && !memcmp(d.priority, e.priority, 6 * sizeof *d.priority) &&
                     !memcmp(d.group, e.group, 6 * sizeof *d.group),
                 "decisions changed in a save and load");
    gopt_decisions_destroy(&e);
    gopt_decisions_destroy(&d);
    return 0;
}
