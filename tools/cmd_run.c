/* cmd_run.c: `gopt run GRAPH --decisions D --backend cpu|cuda --profile P [--devices N]
 * [--reps R] [--warmup W] [--no-pin] [--cuda-graph] [--cuda-conv cudnn|im2col] [--json]
 * [--trace FILE]`: execute one training step of GRAPH
 * for real under decisions D (docs/runtime.md), warm-up then R timed steps, and report the median
 * step, its spread, per-device busy time and measured peak memory, beside the simulator's
 * prediction on profile P. Exit 3 when the backend is not available (CUDA without a GPU). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_json.h"
#include "gopt_runtime.h"

static void run_usage(FILE *f) {
    fprintf(f,
            "Usage: gopt run GRAPH --decisions D --backend cpu|cuda --profile P [--devices N] [--reps R]\n"
            "                [--warmup W] [--clock wall|cpu|cpu-min] [--no-pin] [--cuda-graph]\n"
            "                [--cuda-conv cudnn|im2col] [--json] [--trace OUT.json]\n\n"
            "Execute one training step of GRAPH for real under decisions D and measure it: every node on its\n"
            "device (cpu: a worker thread pinned to a core, with its own memory arena; cuda: a GPU), each\n"
            "device running its ready kernels in the decisions' priority order, fused groups as one kernel,\n"
            "every cross-device edge a real copy. W untimed steps (default 1), then R timed ones (default 5):\n"
            "the median step and the spread (max - min) / median are reported, with the simulator's step on\n"
            "profile P (its devices are the ones used; their capacities decide OOM) for comparison.\n"
            "  --devices N    devices to use (default: the profile's); on cpu keep N <= the cores this\n"
            "                 process may use, or threads share cores and the timing says little\n"
            "  --clock cpu    (cpu backend) compose the step from each kernel's and copy's thread CPU time\n"
            "                 along the run's real order and dependencies: robust on a machine shared\n"
            "                 with other jobs (descheduled time left out); default wall, the real clock\n"
            "  --clock cpu-min  the same with each kernel's and copy's fastest of the R steps: the\n"
            "                 uncontended step, as the CPU calibrator measures kernels\n"
            "  --cuda-graph   (cuda backend, one GPU) capture the step once as a CUDA graph and replay it:\n"
            "                 the GPU's own step, without the host's issue time per kernel (default: each\n"
            "                 step issued kernel by kernel, as an eager framework does)\n"
            "  --cuda-conv K  (cuda backend) what a convolution runs as: cudnn, cudnnConvolutionForward on a\n"
            "                 convolution of the node's FLOPs with the algorithm cuDNN's heuristics rank\n"
            "                 first (as the CUDA calibrator measures them); im2col, a gather kernel and\n"
            "                 cublasSgemm of the node's implicit GEMM. Default cudnn where this build has\n"
            "                 cuDNN, else im2col (cudnn there: exit 3)\n"
            "  --trace FILE   the median step as a Chrome trace-event file, in the simulator's format\n"
            "  --json         one JSON object: step_time_s (median), steps_s, spread, busy_s,\n"
            "                 peak_memory_bytes, ..., sim_step_time_s\n\n"
            "Exit codes: 0 ok (out of memory is a result), 2 bad input, 3 backend not available here.\n"
            "Details and the kernels each op class runs: docs/runtime.md.\n");
}

int cmd_run(int argc, char **argv) {
    const char *file = NULL, *prof = NULL, *dfile = NULL, *trace = NULL, *backend = NULL, *clock = "wall";
    const char *conv = NULL;
    long ndev = 0, reps = 5, warmup = 1;
    int json = 0, no_pin = 0, cuda_graph = 0;
    if (cli_wants_help(argc, argv)) {
        run_usage(stdout);
        return 0;
    }
    cli_args a;
    cli_init(&a, argc, argv, "run");
    while (a.i < a.argc) {
        if (cli_opt_str(&a, "--profile", &prof) || cli_opt_str(&a, "--decisions", &dfile) ||
            cli_opt_str(&a, "--trace", &trace) || cli_opt_str(&a, "--backend", &backend) || cli_opt_str(&a, "--clock", &clock) ||
            cli_opt_str(&a, "--cuda-conv", &conv) ||
            cli_opt_long(&a, "--devices", &ndev, 1, GOPT_SIM_MAX_DEVICES) ||
            cli_opt_long(&a, "--reps", &reps, 1, 100000) || cli_opt_long(&a, "--warmup", &warmup, 0, 100000)) {
            if (a.bad) return 2;
        } else if (cli_flag(&a, "--json")) json = 1;
        else if (cli_flag(&a, "--no-pin")) no_pin = 1;
        else if (cli_flag(&a, "--cuda-graph")) cuda_graph = 1;
        else if (cli_positional(&a, &file)) return 2;
    }
    if (!file) return cli_usage_error(a.verb, "missing GRAPH");
    if (!dfile) return cli_usage_error(a.verb, "missing --decisions D");
    if (!backend) return cli_usage_error(a.verb, "missing --backend cpu|cuda");
    int be = gopt_rt_backend_parse(backend);
    if (be < 0) return cli_usage_error(a.verb, "--backend '%s': expected cpu or cuda", backend);
    int ck = gopt_rt_clock_parse(clock);
    if (ck < 0) return cli_usage_error(a.verb, "--clock '%s': expected wall, cpu or cpu-min", clock);
    if (cuda_graph && be != GOPT_RT_CUDA) return cli_usage_error(a.verb, "--cuda-graph needs --backend cuda");
    int cc = conv ? gopt_rt_cuda_conv_parse(conv) : GOPT_RT_CUDA_CONV_DEFAULT;
    if (cc < 0) return cli_usage_error(a.verb, "--cuda-conv '%s': expected cudnn or im2col", conv);
    if (conv && be != GOPT_RT_CUDA) return cli_usage_error(a.verb, "--cuda-conv needs --backend cuda");
    const char *conv_name = gopt_rt_cuda_conv_name(gopt_rt_cuda_conv_resolve((gopt_rt_cuda_conv)cc));
    if (!prof) return cli_usage_error(a.verb, "missing --profile P (the devices, and the simulator's prediction)");
    gopt_error err = {0};
    gopt_graph *g = NULL;
    gopt_profile *p = NULL;
    gopt_costmodel *cm = NULL;
    gopt_runtime *rt = NULL;
    gopt_sim *sim = NULL;
    gopt_sim_scratch *s = NULL;
    gopt_decisions d = {0};
    int rc = 0;
    if ((rc = cli_open_graph_cluster(a.verb, file, prof, ndev, &g, &p, &cm))) goto out;
    int nd = gopt_cost_num_devices(cm);
    if (gopt_decisions_load(dfile, g, nd, &d, &err) || gopt_rt_create(g, cm, &rt, &err) ||
        gopt_sim_create(g, cm, &sim, &err) || gopt_sim_scratch_create(sim, &s, &err)) {
        rc = cli_report(&err);
        goto out;
    }
    gopt_sim_result sr;
    if (gopt_sim_run(sim, &d, &sr, s, &err)) {
        rc = cli_report(&err);
        goto out;
    }
    gopt_rt_options opt = {.backend = (gopt_rt_backend)be, .warmup = (int)warmup, .reps = (int)reps,
                           .no_pin = no_pin, .clock = (gopt_rt_clock)ck, .cuda_graph = cuda_graph,
                           .cuda_conv = (gopt_rt_cuda_conv)cc};
    gopt_rt_report rep;
    gopt_status st = gopt_rt_run(rt, &d, &opt, &rep, &err);
    if (st == GOPT_OK && trace) st = gopt_rt_trace_write(rt, &d, trace, &err);
    if (st) {
        rc = cli_report(&err);
        if (st == GOPT_EUNSUP && be == GOPT_RT_CUDA) rc = GOPT_EXIT_NO_DEVICE;
        goto out;
    }
    const gopt_sim_result *r = &rep.res;
    if (json) {
        json_t *o = json_object(), *steps = json_array(), *speak = json_array();
        json_object_set_new(o, "graph", json_string(gopt_graph_name(g)));
        json_object_set_new(o, "backend", json_string(backend));
        json_object_set_new(o, "clock", json_string(clock));
        if (be == GOPT_RT_CUDA) {
            json_object_set_new(o, "cuda_conv", json_string(conv_name));
            json_object_set_new(o, "conv_cudnn", json_integer(rep.conv_cudnn));
            json_object_set_new(o, "conv_im2col", json_integer(rep.conv_im2col));
        }
        json_object_set_new(o, "profile", json_string(gopt_profile_name(p)));
        json_object_set_new(o, "devices", json_integer(nd));
        json_object_set_new(o, "decisions", cli_json_text(dfile));
        json_object_set_new(o, "reps", json_integer(rep.reps));
        cli_json_sim_result(o, r);
        for (int i = 0; i < rep.reps && i < 64; i++) json_array_append_new(steps, json_real(rep.steps_s[i]));
        json_object_set_new(o, "steps_s", steps);
        json_object_set_new(o, "step_min_s", json_real(rep.step_min_s));
        json_object_set_new(o, "step_max_s", json_real(rep.step_max_s));
        json_object_set_new(o, "spread", json_real(rep.spread));
        json_object_set_new(o, "setup_s", json_real(rep.setup_s));
        json_object_set_new(o, "sim_step_time_s", json_real(sr.step_time_s));
        json_object_set_new(o, "error_vs_sim", json_real((sr.step_time_s - r->step_time_s) / r->step_time_s));
        for (int i = 0; i < nd; i++) json_array_append_new(speak, json_integer((json_int_t)sr.peak_memory_bytes[i]));
        json_object_set_new(o, "sim_peak_memory_bytes", speak);
        if (trace) json_object_set_new(o, "trace", cli_json_text(trace));
        cli_json_print(o);
        goto out;
    }
    printf("graph %s (%d nodes) on %d %s device%s, decisions: %s\n", gopt_graph_name(g), gopt_graph_num_nodes(g), nd,
           backend, nd == 1 ? "" : "s", dfile);
    printf("step time   %.6f ms measured, %s clock (median of %d; min %.6f, max %.6f, spread %.1f%%)\n",
           r->step_time_s * 1e3, clock, rep.reps, rep.step_min_s * 1e3, rep.step_max_s * 1e3, 100 * rep.spread);
    printf("simulated   %.6f ms on profile %s (%+.1f%% against the measured step)\n", sr.step_time_s * 1e3,
           gopt_profile_name(p), 100 * (sr.step_time_s - r->step_time_s) / r->step_time_s);
    printf("kernels     %d\ntransfers   %d (%.0f bytes)\n", r->tasks, r->transfers, r->transferred_bytes);
    if (be == GOPT_RT_CUDA && rep.conv_cudnn + rep.conv_im2col > 0)
        printf("convolutions %d by cuDNN, %d as im2col + sgemm (--cuda-conv %s)\n", rep.conv_cudnn, rep.conv_im2col,
               conv_name);
    printf("%-8s %14s %8s %16s %16s %16s\n", "device", "busy (ms)", "util", "peak (bytes)", "sim peak", "capacity");
    for (int i = 0; i < nd; i++)
        printf("%-8d %14.6f %7.1f%% %16lld %16lld %16.0f\n", i, r->busy_s[i] * 1e3,
               r->step_time_s > 0 ? 100.0 * r->busy_s[i] / r->step_time_s : 0.0, (long long)r->peak_memory_bytes[i],
               (long long)sr.peak_memory_bytes[i], r->capacity_bytes[i]);
    if (r->oom)
        printf("OUT OF MEMORY: device %d exceeds its capacity by %.0f bytes\n", r->oom_device, r->oom_excess_bytes);
    else
        printf("memory      fits on every device\n");
    if (trace) printf("trace       %s\n", trace);
out:
    gopt_decisions_destroy(&d);
    gopt_sim_scratch_free(s);
    gopt_sim_free(sim);
    gopt_rt_free(rt);
    gopt_cost_free(cm);
    gopt_profile_free(p);
    gopt_graph_free(g);
    return rc;
}
