/* bench_util.h: what several benchmarks share (header only: each bench is one
 * .c file, bench/CMakeLists.txt builds *.c).
 *
 * bench_layered_dag: an exact-size layered random DAG with training-step-like
 * attributes (names like "layer_12/MatMul_345/grad", shapes, dtypes, phases,
 * colocation of parameters with their neighbours), n nodes and m edges from
 * lower to higher ids within 64, from a fixed seed: bench_graph_load times
 * loading it, bench_sim simulating it. (The zoo's synthetic generator only
 * lands within 15% of a requested size, and the benches need exact sizes.)
 * Cost O(n + m).
 * bench_median (sorts v in place), bench_minimum: of n repeated timings.
 * bench_policy_device: the policy network's device from the environment. */
#ifndef GOPT_BENCH_UTIL_H
#define GOPT_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#include "gopt_graph.h"
#include "gopt_policy.h"

/* The threads of the benches' policy network on the CPU: the environment's GOPT_BENCH_THREADS
 * (default 2, the trainer's default; results do not depend on it). */
static inline int bench_policy_threads(void) {
    const char *t = getenv("GOPT_BENCH_THREADS");
    int n = t && *t ? atoi(t) : 2;
    return n >= 1 && n <= GOPT_POLICY_MAX_THREADS ? n : 2;
}

/* The device of the benches' policy network: the environment's GOPT_BENCH_DEVICE (cpu, cuda;
 * default cpu), e.g. GOPT_BENCH_DEVICE=cuda build/bench/bench_policy; and its CPU threads
 * (bench_policy_threads). Exit 3 where it cannot run. */
static inline void bench_policy_device(gopt_policy *p) {
    const char *dev = getenv("GOPT_BENCH_DEVICE");
    gopt_error err;
    if (gopt_policy_set_threads(p, bench_policy_threads(), &err) != GOPT_OK) {
        fprintf(stderr, "bench: %s\n", err.msg);
        exit(2);
    }
    if (!dev || !*dev) return;
    gopt_status st = gopt_policy_set_device(p, dev, &err);
    if (st != GOPT_OK) {
        fprintf(stderr, "bench: GOPT_BENCH_DEVICE=%s: %s\n", dev, err.msg);
        exit(st == GOPT_EUNSUP ? 3 : 2);
    }
}

static int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static inline double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static inline double bench_minimum(const double *v, int n) {
    double m = v[0];
    for (int i = 1; i < n; i++)
        if (v[i] < m) m = v[i];
    return m;
}

static inline gopt_graph *bench_layered_dag(int32_t n, int32_t m, uint64_t seed, const char *name,
                                            gopt_error *err) {
    static const char *const OPS[GOPT_OP_CLASS_COUNT] = {"Placeholder", "VariableV2", "MatMul", "Conv2D",
                                                         "Add",         "Sum",        "Transpose", "NoOp"};
    gopt_rng rng;
    gopt_rng_seed(&rng, seed);
    gopt_graph *g;
    if (gopt_graph_create(&g, name, "synthetic", err) != GOPT_OK) return NULL;
    char nm[96], shape[64], coloc[32];
    for (int32_t v = 0; v < n; v++) {
        int c = (int)gopt_rng_below(&rng, GOPT_OP_CLASS_COUNT);
        int layer = (int)((int64_t)v * 48 / n);
        gopt_node_attrs a = {0};
        snprintf(nm, sizeof nm, "layer_%d/%s_%d%s", layer, OPS[c], v, v % 3 == 2 ? "/grad" : "");
        snprintf(shape, sizeof shape, "%dx%d", 32 << gopt_rng_below(&rng, 4), 64 << gopt_rng_below(&rng, 6));
        a.name = nm;
        a.op = OPS[c];
        a.cls = (gopt_op_class)c;
        a.flops = c >= 2 ? (double)(gopt_rng_below(&rng, 1u << 30) + 1) : 0;
        a.out_bytes = (double)(4 * (gopt_rng_below(&rng, 1u << 20) + 1));
        a.param_bytes = c == GOPT_OP_CLASS_PARAM ? 3 * a.out_bytes : 0;
        a.shape = shape;
        a.dtype = "float32";
        a.phase = (gopt_phase)(1 + v % 3);
        a.layer = layer;
        snprintf(coloc, sizeof coloc, "var_%d", v / 7);
        a.colocate = c == GOPT_OP_CLASS_PARAM ? coloc : "";
        if (gopt_graph_add_node(g, &a, NULL, err) != GOPT_OK) goto fail;
    }
    /* edges go from lower to higher ids, mostly local (a DAG by construction) */
    for (int32_t e = 0; e < m; e++) {
        int32_t dst = 1 + (int32_t)gopt_rng_below(&rng, (uint64_t)n - 1);
        int32_t span = dst < 64 ? dst : 64;
        int32_t src = dst - 1 - (int32_t)gopt_rng_below(&rng, (uint64_t)span);
        if (gopt_graph_add_edge(g, src, dst, (double)(4 * (gopt_rng_below(&rng, 1u << 20) + 1)), err) != GOPT_OK)
            goto fail;
    }
    if (gopt_graph_finalize(g, err) != GOPT_OK) goto fail;
    return g;
fail:
    gopt_graph_free(g);
    return NULL;
}

#endif
