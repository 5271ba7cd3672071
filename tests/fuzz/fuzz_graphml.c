/* fuzz_graphml.c: libFuzzer harness for the GraphML reader, plain text
 * (gopt_graph_parse_graphml on a copy of the bytes). Corpus: corpus/graphml/. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    gopt_graph *g = NULL;
    gopt_error err = {0};
    gopt_status st = gopt_graph_parse_graphml(text, size, "fuzz.graphml", &g, &err);
    if (st == GOPT_OK) {
        fuzz_check_graph(g);
        gopt_graph_free(g);
    } else {
        FUZZ_REQUIRE(!g, "a refused graph was returned");
        FUZZ_REQUIRE(gopt_status_exit_code(st) == 2 || st == GOPT_ENOMEM, "status %d: %s", st, err.msg);
        FUZZ_REQUIRE(strstr(err.msg, "fuzz.graphml"), "the message does not name the file: %s", err.msg);
    }
    free(text);
    return 0;
}
