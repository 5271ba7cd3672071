/* synth_gen.c: throughput of `gopt graph gen synthetic` and of the largest
 * family graphs.
 *
 * Usage: bench_synth_gen [COUNT [SEED]]   (default 200 graphs, seed 1)
 * Generates COUNT synthetic graphs exactly as the command does (child RNG
 * stream per graph, gzip GraphML written atomically into a fresh temporary
 * directory, removed afterwards) and prints graphs/s, the median node count,
 * the time for 1,000 graphs (measured when COUNT >= 1000, else extrapolated
 * linearly, and said so) and its ratio to the 60 s target. The reference
 * measured in the same run is generation alone (no serialization, gzip or
 * write), so the split between building and writing is visible. Then it
 * times gnmt and transformer_xl with 8 layers, the largest family settings.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gopt_zoo.h"

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int count = argc > 1 ? atoi(argv[1]) : 200;
    uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10) : 1;
    if (count < 1) {
        fprintf(stderr, "usage: bench_synth_gen [COUNT [SEED]]\n");
        return 2;
    }
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/gopt_synth_XXXXXX", tmp);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    int *nodes = calloc((size_t)count, sizeof *nodes);
    if (!nodes) return 1;
    gopt_error err = {0};
    int rc = 0;
    /* pass 1: generate only (the reference) */
    gopt_rng master, child;
    gopt_rng_seed(&master, seed);
    double t0 = gopt_now_seconds();
    for (int i = 0; i < count && !rc; i++) {
        gopt_rng_split(&master, &child);
        gopt_graph *g = NULL;
        if (gopt_zoo_synthetic(&child, &(gopt_synth_opts){.kind = GOPT_SYNTH_ANY}, "g", &g, &err) != GOPT_OK) rc = 1;
        gopt_graph_free(g);
    }
    double t_gen = gopt_now_seconds() - t0;
    /* pass 2: what `gopt graph gen synthetic` does */
    gopt_rng_seed(&master, seed);
    long long total = 0;
    t0 = gopt_now_seconds();
    for (int i = 0; i < count && !rc; i++) {
        gopt_rng_split(&master, &child);
        char name[32];
        snprintf(name, sizeof name, "synth_%05d", i);
        snprintf(path, sizeof path, "%s/%s.graphml.gz", dir, name);
        gopt_graph *g = NULL;
        if (gopt_zoo_synthetic(&child, &(gopt_synth_opts){.kind = GOPT_SYNTH_ANY}, name, &g, &err) != GOPT_OK ||
            gopt_zoo_save(g, path, 1, &err) != GOPT_OK)
            rc = 1;
        else
            total += nodes[i] = gopt_graph_num_nodes(g);
        gopt_graph_free(g);
    }
    double t_all = gopt_now_seconds() - t0;
    for (int i = 0; i < count; i++) {
        snprintf(path, sizeof path, "%s/synth_%05d.graphml.gz", dir, i);
        unlink(path);
    }
    rmdir(dir);
    if (rc) {
        fprintf(stderr, "bench_synth_gen: %s\n", err.msg);
        return 1;
    }
    qsort(nodes, (size_t)count, sizeof *nodes, cmp_int);
    double per1000 = t_all / count * 1000;
    printf("synthetic: %d graphs (seed %llu), nodes min %d median %d max %d, total %lld\n", count,
           (unsigned long long)seed, nodes[0], nodes[count / 2], nodes[count - 1], total);
    printf("  generate+write: %.2f s, %.1f graphs/s, %.0f nodes/s\n", t_all, count / t_all, total / t_all);
    printf("  generate only (reference): %.2f s, %.1f graphs/s; writing (GraphML+gzip+fsync) is %.0f%% of the time\n",
           t_gen, count / t_gen, 100 * (t_all - t_gen) / t_all);
    printf("  1000 graphs: %.1f s (%s), target 60 s: ratio %.2f\n", per1000,
           count >= 1000 ? "measured" : "extrapolated linearly", per1000 / 60);
    const char *big[] = {"gnmt", "transformer_xl"};
    for (int i = 0; i < 2; i++) {
        gopt_zoo_spec s = {.family = big[i], .layers = 8};
        gopt_graph *g = NULL;
        t0 = gopt_now_seconds();
        if (gopt_zoo_generate(&s, &g, &err) != GOPT_OK) {
            fprintf(stderr, "bench_synth_gen: %s\n", err.msg);
            return 1;
        }
        double dt = gopt_now_seconds() - t0;
        printf("%s 8 layers: %d nodes generated in %.3f s (%.0f nodes/s)\n", big[i], gopt_graph_num_nodes(g), dt,
               gopt_graph_num_nodes(g) / dt);
        gopt_graph_free(g);
    }
    free(nodes);
    return 0;
}
