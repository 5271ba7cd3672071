/* cmd_sim.c: `gopt sim GRAPH --profile P [--devices N] [--decisions FILE]
 * [--trace OUT.json] [--json]`: simulate one training step of GRAPH on the
 * first N devices of profile P under a decisions file (default: everything on
 * device 0, topological priorities, no fusion) and report the step time,
 * per-device busy time and peak memory, transfers and out-of-memory.
 * docs/simulator.md. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_json.h"
#include "gopt_sim.h"

static void sim_usage(FILE *f) {
    fprintf(f, "Usage: gopt sim GRAPH --profile P [--devices N] [--decisions FILE] [--trace OUT.json] [--json]\n\n"
               "Simulate one training step of GRAPH on the first N devices of profile P (default: all).\n"
               "  --decisions FILE  per-node device, priority and fusion group (docs/decisions.md); without it\n"
               "                    everything runs on device 0 in topological order, unfused\n"
               "  --trace OUT.json  write a Chrome trace-event file (open it in Perfetto or chrome://tracing):\n"
               "                    one track per device and per link, and a memory counter per device\n"
               "  --json            one JSON object: step_time_s, oom, oom_device, oom_excess_bytes,\n"
               "                    peak_memory_bytes, peak_time_s, capacity_bytes, busy_s, sent_bytes (one per\n"
               "                    device), ...\n\n"
               "Out of memory is a result, not an error: the exit code is 0 and oom is true.\n"
               "Semantics (readiness, priorities, link queues, memory): docs/simulator.md.\n");
}

int cmd_sim(int argc, char **argv) {
    const char *file = NULL, *prof = NULL, *dfile = NULL, *trace = NULL;
    long ndev = 0;
    int json = 0;
    if (cli_wants_help(argc, argv)) {
        sim_usage(stdout);
        return 0;
    }
    cli_args a;
    cli_init(&a, argc, argv, "sim");
    while (a.i < a.argc) {
        if (cli_opt_str(&a, "--profile", &prof) || cli_opt_str(&a, "--decisions", &dfile) ||
            cli_opt_str(&a, "--trace", &trace) || cli_opt_long(&a, "--devices", &ndev, 1, GOPT_SIM_MAX_DEVICES)) {
            if (a.bad) return 2;
        } else if (cli_flag(&a, "--json")) json = 1;
        else if (cli_positional(&a, &file)) return 2;
    }
    if (!file) return cli_usage_error(a.verb, "missing GRAPH");
    if (!prof) return cli_usage_error(a.verb, "missing --profile P");
    gopt_error err = {0};
    gopt_graph *g = NULL;
    gopt_profile *p = NULL;
    gopt_costmodel *cm = NULL;
    gopt_sim *sim = NULL;
    gopt_sim_scratch *s = NULL;
    gopt_decisions d = {0};
    int rc = 0;
    if ((rc = cli_open_graph_cluster(a.verb, file, prof, ndev, &g, &p, &cm))) goto out;
    if (gopt_sim_create(g, cm, &sim, &err) ||
        gopt_sim_scratch_create(sim, &s, &err)) {
        rc = cli_report(&err);
        goto out;
    }
    int nd = gopt_sim_num_devices(sim);
    if (dfile) {
        if (gopt_decisions_load(dfile, g, nd, &d, &err)) {
            rc = cli_report(&err);
            goto out;
        }
    } else {
        if (gopt_decisions_init(&d, gopt_graph_num_nodes(g), &err)) {
            rc = cli_report(&err);
            goto out;
        }
        gopt_decisions_set_default(&d, gopt_graph_frozen(g));
    }
    gopt_sim_result r;
    if ((trace && gopt_sim_scratch_record_memory(s, 1, &err)) || gopt_sim_run(sim, &d, &r, s, &err) ||
        (trace && gopt_sim_trace_write(sim, &d, s, trace, &err))) {
        rc = cli_report(&err);
        goto out;
    }
    if (json) {
        json_t *o = json_object();
        json_object_set_new(o, "graph", json_string(gopt_graph_name(g)));
        json_object_set_new(o, "profile", json_string(gopt_profile_name(p)));
        json_object_set_new(o, "devices", json_integer(nd));
        json_object_set_new(o, "decisions", dfile ? cli_json_text(dfile) : json_string("default"));
        cli_json_sim_result(o, &r);
        if (trace) json_object_set_new(o, "trace", cli_json_text(trace));
        cli_json_print(o);
        goto out;
    }
    printf("graph %s (%d nodes) on %d device%s of profile %s, decisions: %s\n", gopt_graph_name(g),
           gopt_graph_num_nodes(g), nd, nd == 1 ? "" : "s", gopt_profile_name(p), dfile ? dfile : "default");
    printf("step time   %.6f ms\n", r.step_time_s * 1e3);
    printf("kernels     %d\ntransfers   %d (%.0f bytes)\n", r.tasks, r.transfers, r.transferred_bytes);
    printf("%-8s %14s %8s %16s %14s %16s %16s\n", "device", "busy (ms)", "util", "peak (bytes)", "peak at (ms)",
           "capacity", "sent (bytes)");
    for (int i = 0; i < nd; i++)
        printf("%-8d %14.6f %7.1f%% %16lld %14.6f %16.0f %16.0f\n", i, r.busy_s[i] * 1e3,
               r.step_time_s > 0 ? 100.0 * r.busy_s[i] / r.step_time_s : 0.0, (long long)r.peak_memory_bytes[i],
               r.peak_time_s[i] * 1e3, r.capacity_bytes[i], r.sent_bytes[i]);
    if (r.oom)
        printf("OUT OF MEMORY: device %d exceeds its capacity by %.0f bytes (its peak is first reached at %.6f ms)\n",
               r.oom_device, r.oom_excess_bytes, r.peak_time_s[r.oom_device] * 1e3);
    else
        printf("memory      fits on every device\n");
    if (trace) printf("trace       %s\n", trace);
out:
    gopt_decisions_destroy(&d);
    gopt_sim_scratch_free(s);
    gopt_sim_free(sim);
    gopt_cost_free(cm);
    gopt_profile_free(p);
    gopt_graph_free(g);
    return rc;
}
