/* fuzz_graphml_gz.c: libFuzzer harness for loading a GraphML file from disk
 * (gopt_graph_load: the gzip layer, then the reader). The bytes are written
 * to G.graphml.gz as they are; the seeds are gzip files, so mutations hit
 * the gzip header, the deflate stream and its trailer. Corpus:
 * corpus/graphml_gz/. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_path("G.graphml.gz");
    fuzz_write(path, data, size);
    gopt_graph *g = NULL;
    gopt_error err = {0};
    gopt_status st = gopt_graph_load(path, &g, &err);
    if (st == GOPT_OK) {
        fuzz_check_graph(g);
        gopt_graph_free(g);
    } else {
        FUZZ_REQUIRE(!g, "a refused graph was returned");
        FUZZ_REQUIRE(gopt_status_exit_code(st) == 2 || st == GOPT_ENOMEM, "status %d: %s", st, err.msg);
        FUZZ_REQUIRE(strstr(err.msg, "G.graphml.gz"), "the message does not name the file: %s", err.msg);
    }
    return 0;
}
