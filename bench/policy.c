/* bench/policy.c: speed and memory of the GO policy network with the default
 * sizes, against OpenBLAS sgemm on a 1024^3 product measured in the same run.
 *
 * Prints: sgemm 1024^3 GFLOP/s; forward time over an 80,000-node graph,
 * the conditioned decoder's greedy decode and sample on it (memory masks
 * set, every device holding 1.1x its share), forward + greedy (target
 * < 1.0 s) and the decode without the scorer (cond_hidden = 0) as the old
 * path's reference; the decode with the fusion term conditioned on the groups
 * (fuse_cond), with the merging fusion pass against the forward-only one; forward + sample + backward over a 10,000-node graph (< 1.0 s);
 * peak resident memory (getrusage maxrss, < 4 GB); achieved GFLOP/s of both
 * and the ratio to sgemm (target >= 0.5); and a bit-for-bit determinism check
 * (two forward+backward runs from the same seed give identical logits,
 * gradients and samples, plus a checksum to compare across processes).
 *
 * The graphs come from a small synthetic layered-DAG generator below (a
 * training step's shape: forward ops, backward ops mirroring them, optimizer
 * updates colocated with their parameters), so this bench depends on no zoo.
 *
 * Usage: bench_policy [big_nodes [small_nodes [reps [hidden ffn_mult sage_layers
 *        attn_layers segment]]]]   (80000 10000 3, then the default sizes)
 * Threads: the policy's own (GOPT_BENCH_THREADS, default 2: the network's chunks and the
 * decoder's parts; OpenBLAS runs one thread inside them) and OpenBLAS's (OPENBLAS_NUM_THREADS,
 * used when GOPT_BENCH_THREADS=1).
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "gopt_graph.h"
#include "bench_util.h"
#include "gopt_policy.h"

static double maxrss_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024.0; /* Linux: kilobytes */
}

/* CPU seconds of this process (all threads): on a shared, loaded machine
 * this says what the work costs when wall time is inflated by others. */
static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double loguniform(gopt_rng *r, double lo, double hi) {
    return exp(log(lo) + gopt_rng_uniform(r) * (log(hi) - log(lo)));
}

/* A layered DAG of about n nodes and 2n edges: a forward chain of layers of
 * ~`width` ops each (each op reads 1-3 ops of the previous two layers), a
 * backward pass mirroring it, and per parameter an optimizer op colocated
 * with it. Attributes in realistic ranges (flops 1e3..1e10, bytes 1e2..1e8). */
static gopt_graph *synth_graph(int n, uint64_t seed) {
    gopt_rng rng;
    gopt_rng_seed(&rng, seed);
    gopt_graph *g = NULL;
    gopt_error err;
    if (gopt_graph_create(&g, "synthetic", "bench", &err)) goto fail;
    static const char *ops[] = {"MatMul", "Conv2D", "Add", "Relu", "Mul", "Sum", "Reshape", "Transpose", "Softmax"};
    static const gopt_op_class cls[] = {GOPT_OP_CLASS_GEMM,        GOPT_OP_CLASS_CONV,          GOPT_OP_CLASS_ELEMENTWISE,
                                        GOPT_OP_CLASS_ELEMENTWISE, GOPT_OP_CLASS_ELEMENTWISE,   GOPT_OP_CLASS_REDUCTION,
                                        GOPT_OP_CLASS_DATA_MOVEMENT, GOPT_OP_CLASS_DATA_MOVEMENT, GOPT_OP_CLASS_OTHER};
    const int width = 40;
    const int n_fwd = n * 4 / 10, n_param = n / 10;
    const int n_bwd = n - n_fwd - 2 * n_param;
    int32_t *id = malloc(sizeof(int32_t) * (size_t)n);
    if (!id) goto fail;
    char name[48], col[32];
    int k = 0;
    /* parameters, then forward ops, backward ops, optimizer ops */
    for (int i = 0; i < n; i++) {
        gopt_node_attrs a = {0};
        snprintf(name, sizeof name, "op%d", i);
        a.name = name;
        a.layer = -1;
        col[0] = 0;
        a.colocate = col;
        if (i < n_param) {
            a.op = "VariableV2";
            a.cls = GOPT_OP_CLASS_PARAM;
            a.param_bytes = loguniform(&rng, 1e3, 3e7);
            a.out_bytes = a.param_bytes;
            a.phase = GOPT_PHASE_FWD;
            snprintf(col, sizeof col, "var%d", i);
        } else if (i < n_param + n_fwd + n_bwd) {
            int o = (int)gopt_rng_below(&rng, 9);
            a.op = ops[o];
            a.cls = cls[o];
            a.flops = o < 2 ? loguniform(&rng, 1e6, 1e10) : loguniform(&rng, 1e3, 1e7);
            a.out_bytes = loguniform(&rng, 1e2, 1e8);
            int j = i - n_param;
            a.phase = j < n_fwd ? GOPT_PHASE_FWD : GOPT_PHASE_BWD;
            a.layer = (j < n_fwd ? j : n_fwd + n_bwd - 1 - j) / (width * 4);
        } else {
            a.op = "ApplyAdam";
            a.cls = GOPT_OP_CLASS_ELEMENTWISE;
            int v = i - (n_param + n_fwd + n_bwd);
            a.flops = 10.0 * loguniform(&rng, 1e3, 3e7) / 4.0;
            a.out_bytes = 8;
            a.phase = GOPT_PHASE_OPT;
            snprintf(col, sizeof col, "var%d", v);
        }
        if (gopt_graph_add_node(g, &a, &id[k++], &err)) goto fail;
    }
    /* edges: forward/backward ops read 1-3 recent ops (1.9 on average) and
     * sometimes a parameter; optimizer ops read their parameter and a gradient */
    const int first = n_param, last = n_param + n_fwd + n_bwd;
    for (int i = first; i < last; i++) {
        int j = i - first;
        int deg = j == 0 ? 0 : 1 + (int)gopt_rng_below(&rng, 2) + (gopt_rng_uniform(&rng) < 0.375);
        for (int e = 0; e < deg; e++) {
            int span = j < 2 * width ? j : 2 * width;
            int s = i - 1 - (int)gopt_rng_below(&rng, (uint64_t)span);
            if (gopt_graph_add_edge(g, s, i, loguniform(&rng, 1e2, 1e8), &err)) goto fail;
        }
        if (j < n_fwd && gopt_rng_uniform(&rng) < 0.25) {
            int pv = (int)gopt_rng_below(&rng, (uint64_t)n_param);
            if (gopt_graph_add_edge(g, pv, i, 1e4, &err)) goto fail;
        }
        if (j >= n_fwd && gopt_rng_uniform(&rng) < 0.5) { /* backward reads a forward activation */
            int s = first + (int)gopt_rng_below(&rng, (uint64_t)n_fwd);
            if (gopt_graph_add_edge(g, s, i, 1e5, &err)) goto fail;
        }
    }
    for (int v = 0; v < n_param; v++) {
        int o = last + v;
        if (gopt_graph_add_edge(g, v, o, 1e4, &err)) goto fail;
        int s = first + n_fwd + (int)gopt_rng_below(&rng, (uint64_t)n_bwd);
        if (gopt_graph_add_edge(g, s, o, 1e4, &err)) goto fail;
    }
    free(id);
    if (gopt_graph_finalize(g, &err)) goto fail;
    return g;
fail:
    fprintf(stderr, "bench_policy: graph generation failed: %s\n", err.msg);
    exit(1);
}

/* GFLOP/s of sgemm 1024^3, best of 3 after a warm-up; *per_cpu gets the
 * GFLOP per CPU-second of the same calls (robust to a loaded machine). */
static double sgemm_gflops(double *per_cpu) {
    const int n = 1024;
    float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n), *c = malloc(sizeof(float) * n * n);
    for (int i = 0; i < n * n; i++) {
        a[i] = (float)(i % 13) * 0.01f;
        b[i] = (float)(i % 7) * 0.02f;
    }
    double best = 1e30, cbest = 1e30;
    for (int r = 0; r < 4; r++) {
        double cp = cpu_seconds(), t = gopt_now_seconds();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        t = gopt_now_seconds() - t;
        cp = cpu_seconds() - cp;
        if (r && t < best) best = t; /* the first call warms up */
        if (r && cp < cbest) cbest = cp;
    }
    free(a);
    free(b);
    free(c);
    *per_cpu = 2.0 * n * n * n / cbest / 1e9;
    return 2.0 * n * n * n / best / 1e9;
}

typedef struct {
    gopt_graph *g;
    const gopt_frozen *fz;
    float *feat, *pred, *wl, *we;
    double *time, *mem, *cap; /* the conditioned decoder's inputs */
    int32_t *acts;
    gopt_policy_actions a;
    int ndev;
} bench_graph;

static void bench_graph_init(bench_graph *b, int n, uint64_t seed, int ndev) {
    gopt_error err;
    b->g = synth_graph(n, seed);
    b->fz = gopt_graph_frozen(b->g);
    n = b->fz->n;
    b->ndev = ndev;
    b->feat = malloc(sizeof(float) * (size_t)n * GOPT_POLICY_NFEAT);
    b->pred = malloc(sizeof(float) * (size_t)n);
    b->wl = malloc(sizeof(float) * 3 * (size_t)n);
    b->we = malloc(sizeof(float) * 3 * (size_t)n);
    b->acts = malloc(sizeof(int32_t) * 3 * (size_t)n);
    b->a.place = b->acts;
    b->a.sched = b->acts + n;
    b->a.fuse = b->acts + 2 * n;
    b->time = malloc(sizeof(double) * (size_t)n);
    b->mem = malloc(sizeof(double) * (size_t)n);
    b->cap = malloc(sizeof(double) * (size_t)ndev);
    double tot = 0;
    for (int v = 0; v < n; v++) { /* a roofline-ish stand-in for the cost model */
        b->pred[v] = (float)(5e-6 + b->fz->flops[v] / 1e13 + b->fz->out_bytes[v] / 5e11);
        b->time[v] = b->pred[v];
        b->mem[v] = b->fz->param_bytes[v] + b->fz->out_bytes[v];
        tot += b->mem[v];
    }
    for (int k = 0; k < ndev; k++) b->cap[k] = 1.1 * tot / ndev; /* tight: the memory masks bind */
    for (int i = 0; i < 3 * n; i++) {
        b->wl[i] = (i % 3 == 0 ? 1.0f : -0.5f) / n; /* PPO-like advantages */
        b->we[i] = 0.01f / n;
    }
    if (gopt_policy_features(b->fz, ndev, b->pred, b->feat, &err)) {
        fprintf(stderr, "bench_policy: %s\n", err.msg);
        exit(1);
    }
}

static void bench_graph_free(bench_graph *b) {
    free(b->feat);
    free(b->pred);
    free(b->time);
    free(b->mem);
    free(b->cap);
    free(b->wl);
    free(b->we);
    free(b->acts);
    gopt_graph_free(b->g);
}

static void check(gopt_status st, const gopt_error *err) {
    if (st) {
        fprintf(stderr, "bench_policy: %s\n", err->msg);
        exit(1);
    }
}

static uint64_t fnv(const void *data, size_t n, uint64_t h) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

static void set_inputs(gopt_policy *p, bench_graph *b) {
    gopt_error err;
    check(gopt_policy_set_decoder_inputs(p, b->fz->n, b->ndev, b->time, b->mem, b->cap, &err), &err);
}

/* forward + sample + backward from seed; returns a hash of logits, actions, grads */
static uint64_t fwd_bwd_hash(gopt_policy *p, bench_graph *b, uint64_t seed) {
    gopt_error err;
    gopt_rng rng;
    gopt_rng_seed(&rng, seed);
    int n = b->fz->n;
    check(gopt_policy_forward(p, b->fz, b->feat, b->ndev, NULL, &err), &err);
    check(gopt_policy_sample(p, &rng, &b->a, &err), &err);
    gopt_policy_zero_grad(p);
    check(gopt_policy_backward(p, &b->a, b->wl, b->we, &err), &err);
    uint64_t h = 0xcbf29ce484222325ULL;
    float *lg = malloc(sizeof(float) * (size_t)n * GOPT_POLICY_MAX_DEVICES);
    for (int t = 0; t < GOPT_TASK_COUNT; t++) {
        check(gopt_policy_logits(p, (gopt_task)t, lg, &err), &err);
        const gopt_policy_config *c = gopt_policy_get_config(p);
        int w = t == 0 ? c->max_devices : (t == 1 ? c->sched_levels : c->fusion_levels);
        h = fnv(lg, sizeof(float) * (size_t)n * w, h);
    }
    free(lg);
    h = fnv(b->acts, sizeof(int32_t) * 3 * (size_t)n, h);
    float *g;
    gopt_policy_tensor(p, 0, NULL, NULL, &g, NULL);
    return fnv(g, sizeof(float) * gopt_policy_num_params(p), h);
}

int main(int argc, char **argv) {
    int big = argc > 1 ? atoi(argv[1]) : 80000, small = argc > 2 ? atoi(argv[2]) : 10000;
    int reps = argc > 3 ? atoi(argv[3]) : 3;
    if (big < 10 || small < 10 || reps < 1) {
        fprintf(stderr, "usage: bench_policy [big_nodes>=10 [small_nodes>=10 [reps>=1]]]\n");
        return 2;
    }
    const char *thr = getenv("OPENBLAS_NUM_THREADS");
    gopt_error err;
    gopt_policy_config cfg;
    gopt_policy_config_default(&cfg);
    if (argc > 8) {
        cfg.hidden = atoi(argv[4]);
        cfg.ffn_mult = atoi(argv[5]);
        cfg.sage_layers = atoi(argv[6]);
        cfg.attn_layers = atoi(argv[7]);
        cfg.segment = atoi(argv[8]);
    }
    if (gopt_policy_config_check(&cfg, &err)) {
        fprintf(stderr, "bench_policy: %s\n", err.msg);
        return 2;
    }
    printf("policy bench: policy threads %d (GOPT_BENCH_THREADS), OPENBLAS_NUM_THREADS=%s; config D=%d sage=%d "
           "attn=%d+3 heads=%d seg=%d ffn=%dx devices<=%d P=%d F=%d\n",
           bench_policy_threads(), thr ? thr : "(unset)", cfg.hidden, cfg.sage_layers, cfg.attn_layers, cfg.heads,
           cfg.segment, cfg.ffn_mult, cfg.max_devices, cfg.sched_levels, cfg.fusion_levels);
    double ref_cpu;
    double ref = sgemm_gflops(&ref_cpu);
    printf("sgemm 1024^3: %.1f GFLOP/s (reference); %.1f GFLOP per CPU-second\n", ref, ref_cpu);

    gopt_policy *p = NULL;
    check(gopt_policy_create(&p, &cfg, 1, &err), &err);
    bench_policy_device(p);
    printf("network on: %s\n", gopt_policy_device(p));
    printf("parameters: %zu (%.2f MB; x4 with grads and Adam moments)\n", gopt_policy_num_params(p),
           gopt_policy_num_params(p) * 4.0 / 1e6);

    /* ---- forward over the big graph ---- */
    double t0 = gopt_now_seconds();
    bench_graph bg;
    bench_graph_init(&bg, big, 11, 8);
    printf("graph: %d nodes, %d edges (generated + features in %.2f s)\n", bg.fz->n, bg.fz->m,
           gopt_now_seconds() - t0);
    set_inputs(p, &bg);
    double best = 1e30, sum = 0, cpu_best = 1e30;
    for (int r = 0; r <= reps; r++) {
        double c = cpu_seconds(), t = gopt_now_seconds();
        check(gopt_policy_forward(p, bg.fz, bg.feat, bg.ndev, NULL, &err), &err);
        t = gopt_now_seconds() - t;
        c = cpu_seconds() - c;
        if (r == 0) continue; /* the first pass allocates and touches the activations */
        best = t < best ? t : best;
        cpu_best = c < cpu_best ? c : cpu_best;
        sum += t;
    }
    double ff = gopt_policy_forward_flops(p);
    printf("forward %d nodes: best %.3f s, mean %.3f s over %d (target < 1.0 s), cpu %.3f s: %.2f GFLOP, "
           "%.1f GFLOP/s, ratio to sgemm %.2f\n",
           bg.fz->n, best, sum / reps, reps, cpu_best, ff / 1e9, ff / best / 1e9, ff / best / 1e9 / ref);
    printf("  per CPU-second: %.1f GFLOP, ratio to sgemm per CPU-second %.2f\n", ff / cpu_best / 1e9,
           ff / cpu_best / 1e9 / ref_cpu);
    gopt_rng rng;
    gopt_rng_seed(&rng, 5);
    /* the conditioned decoder: greedy and sample, node by node, with memory masks */
    double tg = 1e30, tsm = 1e30, cg = 1e30;
    for (int r = 0; r < reps; r++) {
        double c = cpu_seconds(), t = gopt_now_seconds();
        check(gopt_policy_greedy(p, &bg.a, &err), &err);
        t = gopt_now_seconds() - t;
        c = cpu_seconds() - c;
        tg = t < tg ? t : tg;
        cg = c < cg ? c : cg;
        t = gopt_now_seconds();
        check(gopt_policy_sample(p, &rng, &bg.a, &err), &err);
        t = gopt_now_seconds() - t;
        tsm = t < tsm ? t : tsm;
    }
    printf("decode %d nodes (conditioned, Hc=%d, memory masks): greedy %.3f s (cpu %.3f s), sample %.3f s\n",
           bg.fz->n, cfg.cond_hidden, tg, cg, tsm);
    printf("forward + greedy decode %d nodes: %.3f s (target < 1.0 s: %s); cpu %.3f s\n", bg.fz->n, best + tg,
           best + tg < 1.0 ? "met" : "NOT met", cpu_best + cg);
    printf("peak memory after the %d-node forward: %.0f MB resident (maxrss; target < 4096 MB); policy holds %.0f MB\n",
           bg.fz->n, maxrss_mb(), gopt_policy_memory_bytes(p) / 1048576.0);
    gopt_policy_free(p); /* the old path's policy below needs its own activations */
    p = NULL;
    {
        /* the old path in the same run: the scorer off (cond_hidden = 0, memory masks kept) */
        gopt_policy_config c0 = cfg;
        c0.cond_hidden = 0;
        gopt_policy *q = NULL;
        check(gopt_policy_create(&q, &c0, 1, &err), &err);
        set_inputs(q, &bg);
        check(gopt_policy_forward(q, bg.fz, bg.feat, bg.ndev, NULL, &err), &err);
        double tq = 1e30, cq = 1e30;
        for (int r = 0; r < reps; r++) {
            double c = cpu_seconds(), t = gopt_now_seconds();
            check(gopt_policy_greedy(q, &bg.a, &err), &err);
            t = gopt_now_seconds() - t;
            c = cpu_seconds() - c;
            tq = t < tq ? t : tq;
            cq = c < cq ? c : cq;
        }
        printf("  greedy decode without the scorer (cond_hidden = 0): %.3f s (cpu %.3f s); conditioned / "
               "unconditioned %.2fx wall, %.2fx cpu; decode share of forward + decode %.1f%% (cpu %.1f%%)\n",
               tq, cq, tg / tq, cg / cq, 100.0 * tg / (best + tg), 100.0 * cg / (cpu_best + cg));
        gopt_policy_free(q);
    }
    {
        /* the fusion term conditioned on the groups formed (fuse_cond = 1), which tracks the
         * fusion pass while decoding: the merging pass (fuse_merge = 1) against the forward-only
         * pass (fuse_merge = 0) in the same run; sampled: an untrained policy's levels are
         * near uniform, so most nodes try to join (its greedy levels are all 0) */
        double tf[2] = {1e30, 1e30};
        int32_t ngr[2] = {0, 0};
        int32_t *grp = malloc(sizeof(int32_t) * (size_t)bg.fz->n);
        if (!grp) check(GOPT_ENOMEM, &err);
        for (int merge = 0; merge < 2; merge++) {
            gopt_policy_config c1 = cfg;
            c1.fuse_cond = 1;
            c1.fuse_merge = merge;
            gopt_policy *q = NULL;
            check(gopt_policy_create(&q, &c1, 1, &err), &err);
            set_inputs(q, &bg);
            check(gopt_policy_forward(q, bg.fz, bg.feat, bg.ndev, NULL, &err), &err);
            for (int r = 0; r < reps; r++) {
                gopt_rng rf;
                gopt_rng_seed(&rf, 11);
                double t = gopt_now_seconds();
                check(gopt_policy_sample(q, &rf, &bg.a, &err), &err);
                t = gopt_now_seconds() - t;
                tf[merge] = t < tf[merge] ? t : tf[merge];
            }
            check(gopt_policy_fusion_groups(bg.fz, bg.a.place, bg.a.fuse, merge, grp, &ngr[merge], &err), &err);
            gopt_policy_free(q);
        }
        free(grp);
        printf("  sampled decode with fuse_cond: forward-only pass (fuse_merge = 0) %.3f s, %d groups; merging "
               "pass (fuse_merge = 1) %.3f s, %d groups; merging / forward-only %.2fx\n",
               tf[0], (int)ngr[0], tf[1], (int)ngr[1], tf[1] / tf[0]);
    }
    bench_graph_free(&bg);

    /* ---- forward + backward over the small graph ---- */
    check(gopt_policy_create(&p, &cfg, 1, &err), &err);
    bench_policy_device(p);
    bench_graph sg;
    bench_graph_init(&sg, small, 12, 4);
    set_inputs(p, &sg);
    printf("graph: %d nodes, %d edges\n", sg.fz->n, sg.fz->m);
    best = 1e30;
    sum = 0;
    double tf = 0, tb = 0, cbest = 1e30;
    for (int r = 0; r <= reps; r++) {
        double cp = cpu_seconds(), t = gopt_now_seconds();
        check(gopt_policy_forward(p, sg.fz, sg.feat, sg.ndev, NULL, &err), &err);
        double t1 = gopt_now_seconds();
        check(gopt_policy_sample(p, &rng, &sg.a, &err), &err);
        gopt_policy_zero_grad(p);
        check(gopt_policy_backward(p, &sg.a, sg.wl, sg.we, &err), &err);
        double t2 = gopt_now_seconds();
        cp = cpu_seconds() - cp;
        if (r == 0) continue;
        cbest = cp < cbest ? cp : cbest;
        if (t2 - t < best) {
            best = t2 - t;
            tf = t1 - t;
            tb = t2 - t1;
        }
        sum += t2 - t;
    }
    double fb = gopt_policy_forward_flops(p) + gopt_policy_backward_flops(p);
    printf("forward+backward %d nodes: best %.3f s (forward %.3f, sample+backward %.3f), mean %.3f s "
           "(target < 1.0 s): %.2f GFLOP, %.1f GFLOP/s, ratio to sgemm %.2f\n",
           sg.fz->n, best, tf, tb, sum / reps, fb / 1e9, fb / best / 1e9, fb / best / 1e9 / ref);
    printf("  cpu %.3f s; per CPU-second: %.1f GFLOP, ratio to sgemm per CPU-second %.2f\n", cbest,
           fb / cbest / 1e9, fb / cbest / 1e9 / ref_cpu);
    printf("policy holds %.0f MB for %d nodes with backward scratch (%.1f KB per node)\n",
           gopt_policy_memory_bytes(p) / 1048576.0, sg.fz->n, gopt_policy_memory_bytes(p) / 1024.0 / sg.fz->n);
    gopt_adam_config ac;
    gopt_adam_config_default(&ac);
    double ta = gopt_now_seconds();
    check(gopt_policy_adam_step(p, &ac, NULL, &err), &err);
    printf("adam step: %.4f s\n", gopt_now_seconds() - ta);

    /* ---- determinism ---- */
    uint64_t h1 = fwd_bwd_hash(p, &sg, 77), h2 = fwd_bwd_hash(p, &sg, 77);
    printf("determinism (same seed twice, logits + samples + gradients): %s, checksum %016llx%s\n",
           h1 == h2 ? "identical" : "DIFFERENT", (unsigned long long)h1,
           " (the same on any thread count: compare across runs)");
    printf("peak memory overall: %.0f MB resident\n", maxrss_mb());
    bench_graph_free(&sg);
    gopt_policy_free(p);
    return h1 == h2 ? 0 : 1;
}
