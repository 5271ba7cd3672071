/* fidelity.c: how far the simulator is from real runs on this machine's CPUs.
 *
 * Graphs: zoo families at sizes whose single-device step takes 10 ms to 1 s here, and the
 * graphs/real exports whose step falls in that range (the others are listed as skipped, with
 * their simulated step). Methods: at least 5 classical methods per graph (single device, HEFT,
 * METIS, m-SCT with XLA-style fusion, critical-path priorities with TVM-style fusion, m-TOPO).
 * For every graph x method: the method decides against the simulator on the profile, the step is
 * simulated, then run for real by the runtime (warm-up, then the median of R steps). Printed: the
 * table (sim, real, error = (sim - real) / real, the sim/real ratio), the median and p90 of
 * |error|, and per graph Spearman's rank correlation of the methods' simulated and measured
 * orderings. Targets (docs/fidelity.md): median |error| <= 10%, rank correlation >= 0.9.
 *
 * Usage: bench_fidelity [--backend cpu|cuda] [--profile P] [--clock wall|cpu|cpu-min] [--reps R]
 *                       [--devices N] [--quick] [--repeat] [--cuda-graph] [--cuda-conv cudnn|im2col]
 * (default: the CPU backend, the shipped CPU profile, the cpu-min clock, 5 repetitions, all its
 * devices). Run it on a quiet machine, under OPENBLAS_NUM_THREADS=1. Cost: about 30 graph x method
 * pairs, each a method's decision plus 1 + R real steps (10 ms - 1 s each): a few minutes.
 *
 * --repeat: every graph's methods are run a second time after the first pass, and the two
 * passes' measured orderings are correlated too: the rank correlation the hardware gives with
 * itself, the reference the simulator's is read against (methods within a few percent of each
 * other swap places from pass to pass). Twice the time.
 *
 * --backend cuda (--profile required: one calibrated on the same GPUs, gopt profile calibrate
 * --backend cuda; the wall clock, from CUDA events): the same windows over graphs sized for a
 * GPU (the zoo's default sizes, graphs/real's larger exports); with one GPU every method is
 * single-device, so the methods are the schedule x fusion combinations. Exit code 3 without a GPU.
 * --cuda-graph: each step captured once as a CUDA graph and replayed (gopt run --cuda-graph): the
 * GPU's own step, without the host's issue time per kernel. --cuda-conv cudnn|im2col: what the
 * runtime runs convolutions as (gopt run --cuda-conv; default cudnn where the build has cuDNN).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gopt_baselines.h"
#include "gopt_runtime.h"
#include "gopt_zoo.h"

static const char *const METHODS[] = {"single", "heft+cp", "metis+fifo", "msct+cp+xla", "single+cp+tvm", "mtopo"};
#define NMETHODS ((int)(sizeof METHODS / sizeof METHODS[0]))
/* one GPU: everything on it; the methods differ in schedule and fusion */
static const char *const METHODS_1GPU[] = {"single+fifo", "single+cp", "single+fifo+xla",
                                           "single+cp+xla", "single+fifo+tvm", "single+cp+tvm"};
#define NMETHODS_1GPU ((int)(sizeof METHODS_1GPU / sizeof METHODS_1GPU[0]))
#define MAXMETHODS (NMETHODS > NMETHODS_1GPU ? NMETHODS : NMETHODS_1GPU)

typedef struct {
    const char *family; /* a zoo family, or NULL for a file under graphs/real */
    int layers, batch, seq;
    const char *file;
} bench_graph;

static const bench_graph GRAPHS[] = {
    {"resnet", 18, 2, 64, NULL},          {"inception_v3", 0, 1, 75, NULL},  {"rnnlm", 1, 1, 4, NULL},
    {"transformer_xl", 1, 1, 64, NULL},   {"gnmt", 1, 1, 4, NULL},           {"wavenet", 10, 1, 2000, NULL},
    {"amoebanet", 1, 1, 64, NULL},        {NULL, 0, 0, 0, "seq2seq.graphml.gz"},
    {NULL, 0, 0, 0, "lstm_lm.graphml.gz"}, {NULL, 0, 0, 0, "transformer.graphml.gz"},
};
#define NGRAPHS ((int)(sizeof GRAPHS / sizeof GRAPHS[0]))

/* sized for a GPU: 10 ms - 1 s a step on one H100-class device */
static const bench_graph GRAPHS_GPU[] = {
    {"resnet", 50, 32, 224, NULL},        {"inception_v3", 0, 32, 299, NULL}, {"rnnlm", 2, 64, 20, NULL},
    {"transformer_xl", 2, 16, 1024, NULL}, {"gnmt", 2, 64, 40, NULL},          {"wavenet", 10, 4, 16000, NULL},
    {"amoebanet", 2, 16, 331, NULL},       {NULL, 0, 0, 0, "seq2seq.graphml.gz"},
    {NULL, 0, 0, 0, "lstm_lm.graphml.gz"}, {NULL, 0, 0, 0, "transformer.graphml.gz"},
    {NULL, 0, 0, 0, "resnet50.graphml.gz"}, {NULL, 0, 0, 0, "bert_base.graphml.gz"},
    {NULL, 0, 0, 0, "gpt2_small.graphml.gz"}, {NULL, 0, 0, 0, "dlrm.graphml.gz"},
};
#define NGRAPHS_GPU ((int)(sizeof GRAPHS_GPU / sizeof GRAPHS_GPU[0]))
#define MAXGRAPHS (NGRAPHS > NGRAPHS_GPU ? NGRAPHS : NGRAPHS_GPU)

static void skip_method(void *graph_name, const char *method, const char *reason) {
    printf("%-26s %-14s no valid decisions (%s)\n", (const char *)graph_name, method, reason);
}

int main(int argc, char **argv) {
    const char *prof_path = NULL, *clock = NULL, *backend = "cpu", *conv = NULL;
    int reps = 5, ndev = 0, quick = 0, cuda_graph = 0, repeat = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--profile") && i + 1 < argc) prof_path = argv[++i];
        else if (!strcmp(argv[i], "--backend") && i + 1 < argc) backend = argv[++i];
        else if (!strcmp(argv[i], "--clock") && i + 1 < argc) clock = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--devices") && i + 1 < argc) ndev = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--repeat")) repeat = 1;
        else if (!strcmp(argv[i], "--cuda-graph")) cuda_graph = 1;
        else if (!strcmp(argv[i], "--cuda-conv") && i + 1 < argc) conv = argv[++i];
        else {
            fprintf(stderr, "usage: bench_fidelity [--backend cpu|cuda] [--profile P] [--clock wall|cpu|cpu-min] "
                            "[--reps R] [--devices N] [--quick] [--repeat] [--cuda-graph] [--cuda-conv cudnn|im2col]\n");
            return 2;
        }
    }
    const int be = gopt_rt_backend_parse(backend), cuda = be == GOPT_RT_CUDA;
    if (be < 0) {
        fprintf(stderr, "bench_fidelity: --backend '%s': expected cpu or cuda\n", backend);
        return 2;
    }
    if (cuda_graph && !cuda) {
        fprintf(stderr, "bench_fidelity: --cuda-graph needs --backend cuda\n");
        return 2;
    }
    const int cc = conv ? gopt_rt_cuda_conv_parse(conv) : GOPT_RT_CUDA_CONV_DEFAULT;
    if (cc < 0) {
        fprintf(stderr, "bench_fidelity: --cuda-conv '%s': expected cudnn or im2col\n", conv);
        return 2;
    }
    if (conv && !cuda) {
        fprintf(stderr, "bench_fidelity: --cuda-conv needs --backend cuda\n");
        return 2;
    }
    if (cuda && !prof_path) {
        fprintf(stderr, "bench_fidelity: --backend cuda needs --profile (gopt profile calibrate --backend cuda)\n");
        return 2;
    }
    if (!prof_path) prof_path = GOPT_SOURCE_DIR "/profiles/cpu-epyc-2core-measured.json";
    if (!clock) clock = cuda ? "wall" : "cpu-min";
    const char *const *methods = cuda ? METHODS_1GPU : METHODS;
    const int nmethods = cuda ? NMETHODS_1GPU : NMETHODS;
    const bench_graph *graphs = cuda ? GRAPHS_GPU : GRAPHS;
    const int ngraphs = cuda ? NGRAPHS_GPU : NGRAPHS;
    int ck = gopt_rt_clock_parse(clock);
    if (ck < 0 || reps < 1 || ndev < 0) {
        fprintf(stderr, "bench_fidelity: bad --clock, --reps or --devices\n");
        return 2;
    }
    gopt_error err = {0};
    gopt_profile *prof = NULL;
    gopt_costmodel *cm = NULL;
    if (gopt_profile_load(prof_path, &prof, &err) || gopt_cost_create(prof, ndev, &cm, &err)) {
        fprintf(stderr, "bench_fidelity: %s\n", err.msg);
        return 2;
    }
    int nd = gopt_cost_num_devices(cm);
    if (cuda && nd != 1) {
        fprintf(stderr, "bench_fidelity: --backend cuda measures one GPU (--devices 1), not %d devices\n", nd);
        return 2;
    }
    printf("fidelity of the simulator against the runtime (%s%s%s%s): profile %s (%d devices), clock %s, median of %d "
           "steps\n",
           backend, cuda_graph ? ", steps replayed as CUDA graphs" : "", cuda ? ", convolutions: " : "",
           cuda ? gopt_rt_cuda_conv_name(gopt_rt_cuda_conv_resolve((gopt_rt_cuda_conv)cc)) : "",
           gopt_profile_name(prof), nd, clock, reps);
    printf("%-26s %-14s %11s %11s %8s %9s %7s\n", "graph", "method", "sim (ms)", "real (ms)", "error", "sim/real",
           "spread");
    gopt_bl_registry reg;
    gopt_bl_registry_init(&reg);
    gopt_bl_options bo = {.seed = 1};
    gopt_rt_options ro = {.backend = (gopt_rt_backend)be, .warmup = 1, .reps = reps, .clock = (gopt_rt_clock)ck,
                          .cuda_graph = cuda_graph, .cuda_conv = (gopt_rt_cuda_conv)cc};
    double abs_err[MAXGRAPHS * MAXMETHODS], rhos[MAXGRAPHS], self_rhos[MAXGRAPHS];
    int nerr = 0, nrho = 0, rc = 0;
    double t0 = gopt_now_seconds();
    for (int gi = 0; gi < ngraphs && rc == 0; gi++) {
        if (quick && gi >= 2) break;
        const bench_graph *bg = &graphs[gi];
        gopt_graph *g = NULL;
        gopt_sim *sim = NULL;
        gopt_sim_scratch *s = NULL;
        gopt_runtime *rt = NULL;
        gopt_decisions ds[MAXMETHODS];
        const char *names[MAXMETHODS];
        int n = 0;
        memset(ds, 0, sizeof ds);
        gopt_status st;
        if (bg->family) {
            gopt_zoo_spec spec = {bg->family, bg->layers, bg->batch, bg->seq, GOPT_OPTIM_DEFAULT, 0};
            st = gopt_zoo_generate(&spec, &g, &err);
        } else {
            char path[1024];
            snprintf(path, sizeof path, "%s/graphs/real/%s", GOPT_SOURCE_DIR, bg->file);
            st = gopt_graph_load(path, &g, &err);
        }
        if (st || gopt_sim_create(g, cm, &sim, &err) || gopt_sim_scratch_create(sim, &s, &err) ||
            gopt_rt_create(g, cm, &rt, &err)) {
            fprintf(stderr, "bench_fidelity: %s\n", err.msg);
            rc = 1;
            goto next;
        }
        /* in range? the single-device step, simulated */
        gopt_decisions d0;
        gopt_sim_result r0;
        if (gopt_decisions_init(&d0, gopt_graph_num_nodes(g), &err)) {
            rc = 1;
            goto next;
        }
        gopt_decisions_set_default(&d0, gopt_graph_frozen(g));
        st = gopt_sim_run(sim, &d0, &r0, s, &err);
        gopt_decisions_destroy(&d0);
        if (st) {
            fprintf(stderr, "bench_fidelity: %s\n", err.msg);
            rc = 1;
            goto next;
        }
        if (r0.step_time_s < 0.01 || r0.step_time_s > 1.0) {
            printf("%-26s skipped: its single-device step is %.1f ms here (outside 10 ms - 1 s)\n", gopt_graph_name(g),
                   r0.step_time_s * 1e3);
            goto next;
        }
        if ((st = gopt_bl_optimize_each(&reg, methods, nmethods, sim, cm, &bo, ds, names, &n, skip_method,
                                        (void *)gopt_graph_name(g), &err))) {
            fprintf(stderr, "bench_fidelity: %s: %s\n", gopt_graph_name(g), err.msg);
            rc = 1;
            goto next;
        }
        gopt_rt_fidelity_row rows[MAXMETHODS];
        if ((st = gopt_rt_fidelity(rt, ds, n, &ro, rows, &err))) {
            fprintf(stderr, "bench_fidelity: %s: %s\n", gopt_graph_name(g), err.msg);
            rc = st == GOPT_EUNSUP ? 3 : 1;
            goto next;
        }
        double xs[MAXMETHODS], ys[MAXMETHODS];
        for (int j = 0; j < n; j++) {
            xs[j] = rows[j].sim_s;
            ys[j] = rows[j].real_s;
            abs_err[nerr++] = fabs(rows[j].error);
            printf("%-26s %-14s %11.3f %11.3f %+7.1f%% %9.3f %6.1f%%%s\n", gopt_graph_name(g), names[j],
                   rows[j].sim_s * 1e3, rows[j].real_s * 1e3, 100 * rows[j].error, rows[j].sim_s / rows[j].real_s,
                   100 * rows[j].spread, rows[j].oom ? " OOM" : "");
        }
        rhos[nrho] = gopt_rt_spearman(xs, ys, n);
        if (repeat) { /* the second pass: the measurement against itself */
            gopt_rt_fidelity_row again[MAXMETHODS];
            if ((st = gopt_rt_fidelity(rt, ds, n, &ro, again, &err))) {
                fprintf(stderr, "bench_fidelity: %s: %s\n", gopt_graph_name(g), err.msg);
                rc = 1;
                goto next;
            }
            double zs[MAXMETHODS];
            for (int j = 0; j < n; j++) zs[j] = again[j].real_s;
            self_rhos[nrho] = gopt_rt_spearman(ys, zs, n);
            printf("%-26s rank correlation %.3f over %d methods (the second pass against the first: %.3f)\n",
                   gopt_graph_name(g), rhos[nrho], n, self_rhos[nrho]);
        } else {
            printf("%-26s rank correlation %.3f over %d methods\n", gopt_graph_name(g), rhos[nrho], n);
        }
        nrho++;
        fflush(stdout);
    next:
        for (int j = 0; j < n; j++) gopt_decisions_destroy(&ds[j]);
        gopt_rt_free(rt);
        gopt_sim_scratch_free(s);
        gopt_sim_free(sim);
        gopt_graph_free(g);
    }
    if (rc == 0) {
        int ok_rho = 0;
        for (int i = 0; i < nrho; i++) ok_rho += rhos[i] >= 0.9;
        printf("\n|sim - real| / real over %d runs: median %.1f%% (target <= 10%%), p90 %.1f%%\n", nerr,
               100 * gopt_rt_quantile(abs_err, nerr, 0.5), 100 * gopt_rt_quantile(abs_err, nerr, 0.9));
        printf("rank correlation: median %.3f over %d graphs, %d of them >= 0.9 (target >= 0.9)\n",
               gopt_rt_quantile(rhos, nrho, 0.5), nrho, ok_rho);
        if (repeat) {
            int ok_self = 0;
            for (int i = 0; i < nrho; i++) ok_self += self_rhos[i] >= 0.9;
            printf("the measurement against itself (a second pass): median %.3f, %d of %d graphs >= 0.9\n",
                   gopt_rt_quantile(self_rhos, nrho, 0.5), ok_self, nrho);
        }
        printf("wall time %.1f s\n", gopt_now_seconds() - t0);
    }
    gopt_cost_free(cm);
    gopt_profile_free(prof);
    return rc;
}
