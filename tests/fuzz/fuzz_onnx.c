/* fuzz_onnx.c: libFuzzer harness for the ONNX import (graphs/gopt_onnx.h).
 *
 * The input is the bytes of an ONNX model, imported from memory (no folder:
 * a model with external data is refused) with options drawn from its length:
 * plain training step, --unknown-as other, --forward-only, --batch 3. Any
 * error status is fine; a crash, a leak, a sanitizer report or a graph that
 * is returned together with an error is a finding. Seed corpus:
 * tests/fuzz/corpus/onnx/ (the test models of tests/data/onnx and the bad
 * files). Build: tests/fuzz/CMakeLists.txt, with
 * clang -fsanitize=fuzzer,address,undefined.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "gopt_onnx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gopt_onnx_opts o = {0};
    switch (size % 4) {
    case 1: o.unknown_as_other = 1; break;
    case 2: o.forward_only = 1; break;
    case 3: o.batch = 3; break;
    default: break;
    }
    gopt_graph *g = NULL;
    gopt_error err = {0};
    gopt_status st = gopt_onnx_import_mem(data, size, "fuzz.onnx", NULL, &o, &g, &err);
    if (st != GOPT_OK && g) abort(); /* an error must not hand back a graph */
    if (st == GOPT_OK && !g) abort();
    gopt_graph_free(g);
    return 0;
}
