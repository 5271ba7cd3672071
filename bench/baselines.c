/* bench/baselines.c: how long each classical method takes on the largest
 * zoo graphs (about 80k nodes), and the step it finds.
 *
 * Usage: bench_baselines [PROFILE] [--quick]
 *   PROFILE defaults to profiles/h100-nvswitch-x8.json (run from the source
 *   root); --quick uses ~20k-node graphs.
 * For each graph it prints the time of one simulator run (the reference,
 * measured in the same run), then per method its wall time, that time as a
 * ratio to one simulation, and the simulated step of its decisions. The
 * placement-only methods run with fifo and no fusion; cp, xla, xlamo and tvm run
 * after heft; sa is capped at 20 evaluations (its time is budget-bound, the
 * figure shows the cost per evaluation). One thread, seed 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gopt_baselines.h"
#include "gopt_zoo.h"

static double time_sim(const gopt_sim *sim, const gopt_graph *g) {
    gopt_sim_scratch *s = NULL;
    gopt_decisions d;
    gopt_sim_result r;
    if (gopt_sim_scratch_create(sim, &s, NULL) || gopt_decisions_init(&d, gopt_graph_num_nodes(g), NULL)) return -1;
    gopt_decisions_set_default(&d, gopt_graph_frozen(g));
    double best = 1e30;
    for (int i = 0; i < 5; i++) {
        double t0 = gopt_now_seconds();
        gopt_sim_run(sim, &d, &r, s, NULL);
        double t = gopt_now_seconds() - t0;
        if (t < best) best = t;
    }
    gopt_decisions_destroy(&d);
    gopt_sim_scratch_free(s);
    return best;
}

int main(int argc, char **argv) {
    const char *prof_path = "profiles/h100-nvswitch-x8.json";
    int quick = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) quick = 1;
        else prof_path = argv[i];
    }
    gopt_error err = {0};
    gopt_profile *prof = NULL;
    gopt_costmodel *cm = NULL;
    if (gopt_profile_load(prof_path, &prof, &err) || gopt_cost_create(prof, 0, &cm, &err)) {
        fprintf(stderr, "bench_baselines: %s\n", err.msg);
        return 2;
    }
    gopt_zoo_spec specs[] = {
        {.family = "gnmt", .layers = 4, .seq = quick ? 60 : 240},
        {.family = "transformer_xl", .layers = quick ? 3 : 12},
        {.family = "rnnlm", .layers = quick ? 4 : 8, .seq = quick ? 60 : 200},
    };
    const char *methods[] = {"single", "expert", "metis", "heft", "mtopo", "metf", "msct",
                             "heft+cp", "heft+fifo+xla", "heft+fifo+xlamo", "heft+fifo+tvm", "sa", NULL};
    gopt_bl_registry reg;
    gopt_bl_registry_init(&reg);
    printf("bench_baselines: profile %s, %d devices, one thread\n", gopt_profile_name(prof), gopt_cost_num_devices(cm));
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        gopt_graph *g = NULL;
        gopt_sim *sim = NULL;
        if (gopt_zoo_generate(&specs[i], &g, &err) || gopt_sim_create(g, cm, &sim, &err)) {
            fprintf(stderr, "bench_baselines: %s\n", err.msg);
            return 1;
        }
        double ref = time_sim(sim, g);
        printf("\n%s: %d nodes, %d edges; one simulation %.4f s (reference)\n", gopt_graph_name(g),
               gopt_graph_num_nodes(g), gopt_graph_num_edges(g), ref);
        printf("  %-14s %10s %12s %14s\n", "method", "time (s)", "x one sim", "step (ms)");
        for (int j = 0; methods[j]; j++) {
            gopt_bl_options opt = {0};
            opt.seed = 1;
            opt.max_evals = 20;
            opt.budget_s = 600;
            gopt_decisions d;
            gopt_bl_outcome res;
            gopt_status st = gopt_bl_optimize(&reg, methods[j], sim, cm, &opt, &d, &res, &err);
            if (st) printf("  %-14s %10.4f %12.2f %14s  (%s)\n", methods[j], res.optimize_time_s,
                           res.optimize_time_s / ref, "none", err.msg);
            else
                printf("  %-14s %10.4f %12.2f %14.2f%s\n", methods[j], res.optimize_time_s, res.optimize_time_s / ref,
                       res.sim.step_time_s * 1e3, res.sim.oom ? " OOM" : "");
            gopt_decisions_destroy(&d);
        }
        gopt_sim_free(sim);
        gopt_graph_free(g);
    }
    gopt_cost_free(cm);
    gopt_profile_free(prof);
    return 0;
}
