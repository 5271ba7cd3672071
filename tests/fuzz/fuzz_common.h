/* fuzz_common.h: what the libFuzzer harnesses of tests/fuzz share.
 *
 * Each harness (fuzz_<kind>.c) defines LLVMFuzzerTestOneInput: it hands the
 * bytes to a gopt loader, treats a returned error as the right answer, and
 * when the input is accepted checks what a user would then see: summaries
 * finite, what the writers emit reads back, a simulation ends with a finite
 * step time and honest memory figures. A broken check calls abort() (a
 * finding, like a crash or a sanitizer report). The same sources build
 * without libFuzzer into replay programs (replay_main.c) that ctest runs over
 * the seed corpus, regression inputs included.
 *
 * Loaders that only take a path get a file in one per-process temporary
 * folder, removed at exit. Cost: per input, the loader plus at most two
 * simulations of the accepted graph. */
#ifndef GOPT_FUZZ_COMMON_H
#define GOPT_FUZZ_COMMON_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gopt_cost.h"
#include "gopt_decisions.h"
#include "gopt_graph.h"
#include "gopt_profile.h"
#include "gopt_sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* A contract broken on an accepted input: report it and abort. */
#define FUZZ_REQUIRE(cond, ...)                                                                                   \
    do {                                                                                                          \
        if (!(cond)) {                                                                                            \
            fprintf(stderr, "fuzz finding: %s: ", #cond);                                                         \
            fprintf(stderr, __VA_ARGS__);                                                                         \
            fputc('\n', stderr);                                                                                  \
            abort();                                                                                              \
        }                                                                                                         \
    } while (0)

#define FUZZ_HELPER static __attribute__((unused))

static char fuzz_dir[256];

FUZZ_HELPER void fuzz_cleanup(void) {
    if (!fuzz_dir[0]) return;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fuzz_dir);
    if (system(cmd) != 0) fprintf(stderr, "fuzz: could not remove %s\n", fuzz_dir);
}

/* dir/name inside this process's temporary folder (created on first use). */
FUZZ_HELPER const char *fuzz_path(const char *name) {
    static char path[8][320];
    static int next;
    if (!fuzz_dir[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(fuzz_dir, sizeof fuzz_dir, "%s/gopt-fuzz-XXXXXX", t && t[0] ? t : "/tmp");
        if (!mkdtemp(fuzz_dir)) {
            perror("fuzz: mkdtemp");
            abort();
        }
        atexit(fuzz_cleanup);
    }
    char *p = path[next++ & 7];
    snprintf(p, 320, "%s/%s", fuzz_dir, name);
    return p;
}

FUZZ_HELPER void fuzz_write(const char *path, const uint8_t *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        perror(path);
        abort();
    }
}

/* A two-device cluster at the slowest rates a profile may declare (1 FLOP/s, 1 byte/s,
 * 1 s launches and latencies) and little memory: the largest times and the most OOM. */
static const char FUZZ_SLOW_PROFILE[] =
    "{\"format\":\"gopt-profile\",\"version\":1,\"name\":\"slow\",\"provenance\":{\"source\":\"datasheet\","
    "\"reference\":\"fuzzing\"},\"devices\":[{\"name\":\"d\",\"count\":2,\"kind\":\"gpu\",\"model\":\"m\","
    "\"memory_bytes\":1e6,\"peak_flops\":{\"fp32\":1},\"memory_bandwidth\":1,\"launch_overhead\":1}],"
    "\"topology\":{\"kind\":\"uniform\",\"bandwidth\":1,\"latency\":1}}";

FUZZ_HELPER gopt_costmodel *fuzz_slow_cluster(void) {
    static gopt_profile *p;
    static gopt_costmodel *cm;
    if (cm) return cm;
    gopt_error err = {0};
    FUZZ_REQUIRE(!gopt_profile_parse(FUZZ_SLOW_PROFILE, strlen(FUZZ_SLOW_PROFILE), "slow", &p, &err), "%s", err.msg);
    FUZZ_REQUIRE(!gopt_cost_create(p, 2, &cm, &err), "%s", err.msg);
    return cm;
}

/* Simulate valid decisions d of g on cm: it must succeed with finite, sane figures. */
FUZZ_HELPER void fuzz_check_sim(const gopt_graph *g, const gopt_costmodel *cm, const gopt_decisions *d) {
    gopt_error err = {0};
    gopt_sim *sim = NULL;
    gopt_sim_scratch *s = NULL;
    gopt_sim_result r;
    FUZZ_REQUIRE(!gopt_sim_create(g, cm, &sim, &err), "%s", err.msg);
    FUZZ_REQUIRE(!gopt_sim_scratch_create(sim, &s, &err), "%s", err.msg);
    gopt_status st = gopt_sim_run(sim, d, &r, s, &err);
    FUZZ_REQUIRE(st == GOPT_OK, "valid decisions refused by the simulator: %s", err.msg);
    FUZZ_REQUIRE(isfinite(r.step_time_s) && r.step_time_s >= 0, "step time %g", r.step_time_s);
    const gopt_frozen *f = gopt_graph_frozen(g);
    for (int dd = 0; dd < r.ndev; dd++) {
        double params = 0;
        for (int32_t v = 0; v < f->n; v++)
            if (d->device[v] == dd) params += ceil(f->param_bytes[v]);
        FUZZ_REQUIRE(r.peak_memory_bytes[dd] >= 0 && (double)r.peak_memory_bytes[dd] >= params,
                     "device %d: peak %lld below its parameters %.17g", dd, (long long)r.peak_memory_bytes[dd], params);
        FUZZ_REQUIRE(!((double)r.peak_memory_bytes[dd] > r.capacity_bytes[dd]) || r.oom,
                     "device %d: peak %lld above capacity %g without oom", dd, (long long)r.peak_memory_bytes[dd],
                     r.capacity_bytes[dd]);
    }
    gopt_sim_scratch_free(s);
    gopt_sim_free(sim);
}

/* What a user does next with an accepted graph: summaries, rewrite, simulation. */
FUZZ_HELPER void fuzz_check_graph(const gopt_graph *g) {
    gopt_graph_stats s;
    gopt_graph_get_stats(g, &s);
    FUZZ_REQUIRE(isfinite(s.flops) && isfinite(s.param_bytes) && isfinite(s.out_bytes) && isfinite(s.edge_bytes),
                 "graph summary not finite");
    FUZZ_REQUIRE(s.nodes > 0, "a graph without nodes was accepted");
    /* the writer emits text any XML parser takes, and it reads back to the same graph */
    gopt_buf b;
    gopt_buf_init(&b);
    gopt_error err = {0};
    FUZZ_REQUIRE(!gopt_graph_write_graphml(g, &b, &err), "%s", err.msg);
    FUZZ_REQUIRE(gopt_graph_text_check(b.data, b.len) < 0, "the writer emitted text XML forbids");
    gopt_buf_append(&b, "", 1);
    gopt_graph *g2 = NULL;
    gopt_status st = gopt_graph_parse_graphml(b.data, b.len - 1, "rewritten", &g2, &err);
    FUZZ_REQUIRE(st == GOPT_OK, "the rewritten graph is refused: %s", err.msg);
    FUZZ_REQUIRE(gopt_graph_num_nodes(g2) == s.nodes && gopt_graph_num_edges(g2) == s.edges, "rewrite changed the graph");
    gopt_graph_free(g2);
    gopt_buf_destroy(&b);
    if (s.nodes > 20000) return; /* simulation cost: big inputs are rare and slow */
    /* default decisions, then every other node on the second device */
    gopt_costmodel *cm = fuzz_slow_cluster();
    const gopt_frozen *f = gopt_graph_frozen(g);
    gopt_decisions d;
    FUZZ_REQUIRE(!gopt_decisions_init(&d, f->n, &err), "%s", err.msg);
    gopt_decisions_set_default(&d, f);
    fuzz_check_sim(g, cm, &d);
    for (int32_t v = 0; v < f->n; v++) d.device[v] = v & 1;
    if (!gopt_decisions_validate(&d, g, 2, NULL)) fuzz_check_sim(g, cm, &d); /* colocation may forbid it */
    gopt_decisions_destroy(&d);
}

#endif
