/* bench/graph_load: load + freeze an 80,000-node, 160,000-edge graph from
 * .graphml.gz, against merely gunzipping the same file in the same run.
 * Target (foundation issue): load+freeze within 1.0 s on one core.
 *
 * The graph is a layered random DAG with training-step-like attributes
 * (names like "layer_12/op_345/grad", shapes, dtypes, phases, colocation of
 * params), generated from a fixed seed so every run times the same file.
 * Usage: bench_graph_load [--nodes N] [--edges M] [--reps R] [--keep FILE] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"
#include "gopt_graph.h"

static gopt_graph *make_graph(int32_t n, int32_t m, uint64_t seed) {
    gopt_error err = {0};
    gopt_graph *g = bench_layered_dag(n, m, seed, "bench_80k", &err);
    if (!g) fprintf(stderr, "bench_graph_load: %s\n", err.msg);
    return g;
}

int main(int argc, char **argv) {
    int32_t n = 80000, m = 160000;
    int reps = 5;
    const char *keep = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--nodes") && i + 1 < argc) n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--edges") && i + 1 < argc) m = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--keep") && i + 1 < argc) keep = argv[++i];
        else {
            fprintf(stderr, "usage: bench_graph_load [--nodes N] [--edges M] [--reps R] [--keep FILE.graphml.gz]\n");
            return 2;
        }
    }
    if (n < 2 || m < 1 || reps < 1) {
        fprintf(stderr, "bench_graph_load: --nodes >= 2, --edges >= 1, --reps >= 1\n");
        return 2;
    }
    char path[256];
    if (keep) snprintf(path, sizeof path, "%s", keep);
    else snprintf(path, sizeof path, "/tmp/gopt_bench_graph_load_%ld.graphml.gz", (long)getpid());
    gopt_graph *g = make_graph(n, m, 12345);
    if (!g) return 1;
    gopt_error err = {0};
    if (gopt_graph_save(g, path, &err) != GOPT_OK) {
        fprintf(stderr, "bench_graph_load: %s\n", err.msg);
        return 1;
    }
    gopt_graph_free(g);
    double best_gz = 1e30, best_load = 1e30;
    size_t raw_len = 0;
    for (int r = 0; r < reps; r++) {
        char *text;
        double t0 = gopt_now_seconds();
        if (gopt_file_read_all(path, &text, &raw_len, &err) != GOPT_OK) {
            fprintf(stderr, "bench_graph_load: %s\n", err.msg);
            return 1;
        }
        double t1 = gopt_now_seconds();
        free(text);
        gopt_graph *h;
        double t2 = gopt_now_seconds();
        if (gopt_graph_load(path, &h, &err) != GOPT_OK) {
            fprintf(stderr, "bench_graph_load: %s\n", err.msg);
            return 1;
        }
        double t3 = gopt_now_seconds();
        if (gopt_graph_num_nodes(h) != n || gopt_graph_num_edges(h) != m || !gopt_graph_frozen(h)) {
            fprintf(stderr, "bench_graph_load: loaded graph does not match\n");
            return 1;
        }
        gopt_graph_free(h);
        if (t1 - t0 < best_gz) best_gz = t1 - t0;
        if (t3 - t2 < best_load) best_load = t3 - t2;
    }
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    long gz_len = ftell(f);
    fclose(f);
    if (!keep) unlink(path);
    printf("graph_load: %d nodes, %d edges; file %.1f MB gzip, %.1f MB GraphML; best of %d\n", n, m, gz_len / 1e6,
           raw_len / 1e6, reps);
    printf("  gunzip only        %8.3f s\n", best_gz);
    printf("  load + freeze      %8.3f s   (ratio to gunzip %.2fx; %.0f nodes/s)\n", best_load, best_load / best_gz,
           n / best_load);
    printf("  target load+freeze <= 1.000 s: %s\n", best_load <= 1.0 ? "MET" : "MISSED");
    return 0;
}
