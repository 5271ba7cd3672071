/* cmd_validate.c: `gopt validate GRAPH... --methods LIST --profile P --backend cpu|cuda
 * [--devices N] [--reps R] [--warmup W] [--clock wall|cpu|cpu-min] [--cuda-graph]
 * [--cuda-conv cudnn|im2col] [--seed S] [--json]`: the simulator's
 * fidelity on this machine. For each graph and method: the method's decisions (made against the
 * simulator on profile P), the simulated step, the measured step (the runtime) and the error
 * (sim - real) / real; then the median and p90 of |error| over every row and, per graph,
 * Spearman's rank correlation between the methods' simulated and measured orderings.
 * docs/fidelity.md. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_json.h"
#include "gopt_baselines.h"
#include "gopt_runtime.h"

#define VAL_MAX_METHODS 32

static void validate_usage(FILE *f) {
    fprintf(f,
            "Usage: gopt validate GRAPH... --methods LIST --profile P --backend cpu|cuda [--devices N]\n"
            "                     [--reps R] [--warmup W] [--clock wall|cpu|cpu-min] [--cuda-graph]\n"
            "                     [--cuda-conv cudnn|im2col] [--seed S] [--json]\n\n"
            "How far the simulator is from a real run. For each graph and method (a method or combination\n"
            "of gopt optimize --list; comma-separated, at least 2), the method decides against the simulator\n"
            "on profile P, then the step is simulated and run for real (gopt run: W warm-up steps, default 1,\n"
            "and the median of R, default 3). Printed: per graph x method the simulated step, the measured\n"
            "step and the error (sim - real) / real; the median and p90 of |error| over all rows; per graph\n"
            "the Spearman rank correlation of the methods' simulated and measured orderings.\n"
            "Use a profile calibrated on this machine (gopt profile calibrate --backend cpu).\n"
            "  --clock cpu   compose measured steps from thread CPU times (robust on a shared machine;\n"
            "                gopt run --help); cpu-min: from each kernel's fastest of the R steps;\n"
            "                default wall\n"
            "  --cuda-graph  (cuda, one GPU) replay each step captured as a CUDA graph (gopt run --help)\n"
            "  --cuda-conv K (cuda) convolutions by cudnn (the default where this build has cuDNN) or as\n"
            "                im2col + cublasSgemm (gopt run --help)\n"
            "  --json        {profile, backend, clock, rows: [{graph, method, sim_step_s, real_step_s,\n"
            "                error, spread, oom}], graphs: [{graph, spearman}], median_abs_error,\n"
            "                p90_abs_error}\n"
            "Exit codes: 0 ok, 2 bad input, 3 backend not available here. Methods that find no valid\n"
            "decisions for a graph are reported and left out.\n");
}

/* A method without valid decisions on a graph is reported and left out of its ranking. */
static void skip_method(void *graph_name, const char *method, const char *reason) {
    fprintf(stderr, "gopt validate: %s: %s: no valid decisions (%s)\n", (const char *)graph_name, method, reason);
}

int cmd_validate(int argc, char **argv) {
    const char *prof = NULL, *methods_arg = NULL, *backend = NULL, *clock = "wall", *conv = NULL;
    const char *files[256];
    int nfiles = 0, json = 0;
    long ndev = 0, reps = 3, warmup = 1, seed = 1;
    int cuda_graph = 0;
    if (cli_wants_help(argc, argv)) {
        validate_usage(stdout);
        return 0;
    }
    cli_args a;
    cli_init(&a, argc, argv, "validate");
    while (a.i < a.argc) {
        if (cli_opt_str(&a, "--profile", &prof) || cli_opt_str(&a, "--methods", &methods_arg) ||
            cli_opt_str(&a, "--backend", &backend) || cli_opt_str(&a, "--clock", &clock) ||
            cli_opt_str(&a, "--cuda-conv", &conv) || cli_opt_long(&a, "--devices", &ndev, 1, GOPT_SIM_MAX_DEVICES) ||
            cli_opt_long(&a, "--reps", &reps, 1, 1000) || cli_opt_long(&a, "--warmup", &warmup, 0, 1000) ||
            cli_opt_long(&a, "--seed", &seed, 0, 1L << 62)) {
            if (a.bad) return 2;
        } else if (cli_flag(&a, "--json")) {
            json = 1;
        } else if (cli_flag(&a, "--cuda-graph")) {
            cuda_graph = 1;
        } else {
            const char *arg = a.argv[a.i];
            if (arg[0] == '-' && arg[1]) return cli_usage_error(a.verb, "unknown option '%s'", arg);
            if (nfiles == 256) return cli_usage_error(a.verb, "at most 256 graphs");
            files[nfiles++] = arg;
            a.i++;
        }
    }
    if (!nfiles) return cli_usage_error(a.verb, "missing GRAPH");
    if (!prof) return cli_usage_error(a.verb, "missing --profile P");
    if (!methods_arg) return cli_usage_error(a.verb, "missing --methods LIST");
    if (!backend) return cli_usage_error(a.verb, "missing --backend cpu|cuda");
    int be = gopt_rt_backend_parse(backend), ck = gopt_rt_clock_parse(clock);
    if (be < 0) return cli_usage_error(a.verb, "--backend '%s': expected cpu or cuda", backend);
    if (ck < 0) return cli_usage_error(a.verb, "--clock '%s': expected wall, cpu or cpu-min", clock);
    if (cuda_graph && be != GOPT_RT_CUDA) return cli_usage_error(a.verb, "--cuda-graph needs --backend cuda");
    int cc = conv ? gopt_rt_cuda_conv_parse(conv) : GOPT_RT_CUDA_CONV_DEFAULT;
    if (cc < 0) return cli_usage_error(a.verb, "--cuda-conv '%s': expected cudnn or im2col", conv);
    if (conv && be != GOPT_RT_CUDA) return cli_usage_error(a.verb, "--cuda-conv needs --backend cuda");
    /* the methods, each checked against the registry before anything runs */
    gopt_bl_registry reg;
    gopt_bl_registry_init(&reg);
    char mbuf[2048];
    const char *methods[VAL_MAX_METHODS];
    int nm = 0;
    if (strlen(methods_arg) >= sizeof mbuf) return cli_usage_error(a.verb, "--methods: list too long");
    strcpy(mbuf, methods_arg);
    for (char *tok = strtok(mbuf, ","); tok; tok = strtok(NULL, ",")) {
        if (nm == VAL_MAX_METHODS) return cli_usage_error(a.verb, "--methods: at most %d", VAL_MAX_METHODS);
        gopt_bl_combo combo;
        gopt_error e = {0};
        if (gopt_bl_combo_parse(&reg, tok, &combo, &e)) return cli_usage_error(a.verb, "--methods: %s", e.msg);
        methods[nm++] = tok;
    }
    if (nm < 2) return cli_usage_error(a.verb, "--methods: at least 2 methods (a rank correlation needs them)");
    gopt_profile *p = NULL;
    gopt_costmodel *cm = NULL;
    int rc = cli_open_cluster(a.verb, prof, ndev, &p, &cm);
    if (rc) return rc;
    gopt_error err = {0};
    gopt_rt_options ro = {.backend = (gopt_rt_backend)be, .warmup = (int)warmup, .reps = (int)reps,
                          .clock = (gopt_rt_clock)ck, .cuda_graph = cuda_graph, .cuda_conv = (gopt_rt_cuda_conv)cc};
    gopt_bl_options bo = {.seed = (uint64_t)seed};
    int cap = nfiles * nm;
    double *abs_err = calloc((size_t)cap + 1, sizeof(double));
    json_t *jrows = json_array(), *jgraphs = json_array();
    int nerr = 0;
    if (!json)
        printf("%-28s %-22s %12s %12s %9s %7s\n", "graph", "method", "sim (ms)", "real (ms)", "error", "spread");
    for (int gi = 0; gi < nfiles && rc == 0; gi++) {
        gopt_graph *g = NULL;
        gopt_sim *sim = NULL;
        gopt_runtime *rt = NULL;
        gopt_decisions ds[VAL_MAX_METHODS];
        const char *names[VAL_MAX_METHODS];
        int nd = 0;
        memset(ds, 0, sizeof ds);
        if (gopt_graph_load(files[gi], &g, &err) || gopt_sim_create(g, cm, &sim, &err) ||
            gopt_rt_create(g, cm, &rt, &err)) {
            rc = cli_report(&err);
            goto next;
        }
        if (gopt_bl_optimize_each(&reg, methods, nm, sim, cm, &bo, ds, names, &nd, skip_method,
                                  (void *)gopt_graph_name(g), &err)) {
            rc = cli_report(&err);
            goto next;
        }
        gopt_rt_fidelity_row rows[VAL_MAX_METHODS];
        gopt_status st = gopt_rt_fidelity(rt, ds, nd, &ro, rows, &err);
        if (st) {
            rc = cli_report(&err);
            if (st == GOPT_EUNSUP && be == GOPT_RT_CUDA) rc = GOPT_EXIT_NO_DEVICE;
            goto next;
        }
        double xs[VAL_MAX_METHODS], ys[VAL_MAX_METHODS];
        for (int j = 0; j < nd; j++) {
            xs[j] = rows[j].sim_s;
            ys[j] = rows[j].real_s;
            abs_err[nerr++] = fabs(rows[j].error);
            if (json) {
                json_t *r = json_object();
                json_object_set_new(r, "graph", json_string(gopt_graph_name(g)));
                json_object_set_new(r, "method", json_string(names[j]));
                json_object_set_new(r, "sim_step_s", json_real(rows[j].sim_s));
                json_object_set_new(r, "real_step_s", json_real(rows[j].real_s));
                json_object_set_new(r, "error", json_real(rows[j].error));
                json_object_set_new(r, "spread", json_real(rows[j].spread));
                json_object_set_new(r, "oom", json_boolean(rows[j].oom));
                json_array_append_new(jrows, r);
            } else {
                printf("%-28s %-22s %12.3f %12.3f %+8.1f%% %6.1f%%%s\n", gopt_graph_name(g), names[j],
                       rows[j].sim_s * 1e3, rows[j].real_s * 1e3, 100 * rows[j].error, 100 * rows[j].spread,
                       rows[j].oom ? " OOM" : "");
            }
        }
        double rho = gopt_rt_spearman(xs, ys, nd);
        if (json) {
            json_t *o = json_object();
            json_object_set_new(o, "graph", json_string(gopt_graph_name(g)));
            json_object_set_new(o, "spearman", isnan(rho) ? json_null() : json_real(rho));
            json_array_append_new(jgraphs, o);
        } else {
            printf("%-28s %-22s rank correlation (Spearman) %.3f over %d methods\n", gopt_graph_name(g), "", rho, nd);
        }
        fflush(stdout);
    next:
        for (int j = 0; j < nd; j++) gopt_decisions_destroy(&ds[j]);
        gopt_rt_free(rt);
        gopt_sim_free(sim);
        gopt_graph_free(g);
    }
    if (rc == 0) {
        double med = gopt_rt_quantile(abs_err, nerr, 0.5), p90 = gopt_rt_quantile(abs_err, nerr, 0.9);
        if (json) {
            json_t *o = json_object();
            json_object_set_new(o, "profile", json_string(gopt_profile_name(p)));
            json_object_set_new(o, "backend", json_string(backend));
            json_object_set_new(o, "clock", json_string(clock));
            if (be == GOPT_RT_CUDA)
                json_object_set_new(o, "cuda_conv", json_string(gopt_rt_cuda_conv_name(
                                                        gopt_rt_cuda_conv_resolve((gopt_rt_cuda_conv)cc))));
            json_object_set_new(o, "devices", json_integer(gopt_cost_num_devices(cm)));
            json_object_set_new(o, "rows", jrows);
            json_object_set_new(o, "graphs", jgraphs);
            jrows = jgraphs = NULL;
            json_object_set_new(o, "median_abs_error", json_real(med));
            json_object_set_new(o, "p90_abs_error", json_real(p90));
            cli_json_print(o);
        } else {
            printf("|sim - real| / real over %d rows: median %.1f%%, p90 %.1f%%\n", nerr, 100 * med, 100 * p90);
        }
    }
    json_decref(jrows);
    json_decref(jgraphs);
    free(abs_err);
    gopt_cost_free(cm);
    gopt_profile_free(p);
    return rc;
}
