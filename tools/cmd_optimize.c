/* cmd_optimize.c: `gopt optimize GRAPH --method M --profile P [--devices N]
 * [-o DECISIONS] [--json] [--seed S] [--budget SECONDS] [--evals N]
 * [--mem-fraction F]` and `gopt optimize --list`: run one classical method
 * (or a combination "placement+schedule+fusion[+joint]") on GRAPH over the
 * first N devices of profile P, write the decisions and print the simulated
 * step. docs/baselines.md. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_json.h"
#include "cli_go.h"
#include "gopt_baselines.h"

static void optimize_usage(FILE *f) {
    fprintf(f,
            "Usage: gopt optimize GRAPH --method M --profile P [--devices N] [-o DECISIONS] [--json]\n"
            "                     [--seed S] [--budget SECONDS] [--evals N] [--mem-fraction F]\n"
            "       gopt optimize --list\n\n"
            "Decide placement, priorities and fusion for GRAPH with a classical method and simulate the step.\n"
            "  --method M        a method or a combination joined by '+', at most one per kind\n"
            "                    (placement+schedule+fusion[+joint], e.g. heft+cp+xla); missing kinds default\n"
            "                    to single, fifo and none; a trailing @sS runs it at seed S instead of --seed\n"
            "                    (metis+cp+xla@s3: METIS's draw at seed 3, as bench_transfer names it).\n"
            "                    --list prints them all.\n"
            "  --profile P       device profile (JSON); --devices N uses its first N devices (default all)\n"
            "  -o DECISIONS      write the decisions file (docs/decisions.md), atomically\n"
            "  --seed S          seed of the methods that draw (metis, sa); default 1\n"
            "  --budget SECONDS  time budget of sa (default 10)\n"
            "  --evals N         evaluation cap of sa: with it, a seed reproduces the run bit for bit\n"
            "  --mem-fraction F  usable fraction of each device's memory (default 1)\n"
            "  --json            one JSON object: method, step_time_s, oom, optimize_time_s, devices,\n"
            "                    devices_used, fused_groups, peak_memory_bytes\n\n"
            "When the method finds no placement that fits the devices' memory it says so (exit 2).\n");
}

static void list_methods(const gopt_bl_registry *r) {
    for (int k = 0; k < GOPT_BL_KIND_COUNT; k++) {
        printf("%s:\n", gopt_bl_kind_name((gopt_bl_kind)k));
        for (int i = 0; i < r->count; i++)
            if (r->methods[i].kind == (gopt_bl_kind)k) printf("  %-8s %s\n", r->methods[i].name, r->methods[i].doc);
    }
}

int cmd_optimize(int argc, char **argv) {
    const char *file = NULL, *prof = NULL, *method = NULL, *outp = NULL;
    long ndev = 0, seed = 1, evals = 0;
    double budget = 0, memfrac = 0;
    int json = 0, list = 0;
    if (cli_wants_help(argc, argv)) {
        optimize_usage(stdout);
        cli_go_usage(stdout);
        return 0;
    }
    gopt_bl_registry reg;
    gopt_bl_registry_init(&reg);
    if (cli_go_register(&reg, NULL)) return 1;
    cli_args a;
    cli_init(&a, argc, argv, "optimize");
    while (a.i < a.argc) {
        if (cli_opt_str(&a, "--profile", &prof) || cli_opt_str(&a, "--method", &method) ||
            cli_opt_str(&a, "-o", &outp) || cli_opt_str(&a, "--output", &outp) ||
            cli_opt_long(&a, "--devices", &ndev, 1, GOPT_SIM_MAX_DEVICES) ||
            cli_opt_long(&a, "--seed", &seed, 0, 0x7fffffffL) || cli_opt_long(&a, "--evals", &evals, 1, 1000000000L) ||
            cli_opt_double(&a, "--budget", &budget, 1e-3, 1e6) ||
            cli_opt_double(&a, "--mem-fraction", &memfrac, 1e-6, 1.0) || cli_go_option(&a)) {
            if (a.bad) return 2;
        } else if (cli_flag(&a, "--json")) json = 1;
        else if (cli_flag(&a, "--list")) list = 1;
        else if (cli_positional(&a, &file)) return 2;
    }
    if (list) {
        list_methods(&reg);
        return 0;
    }
    if (!file) return cli_usage_error(a.verb, "missing GRAPH");
    if (!method) return cli_usage_error(a.verb, "missing --method M (gopt optimize --list shows them)");
    if (!prof) return cli_usage_error(a.verb, "missing --profile P");
    gopt_error err = {0};
    gopt_bl_combo combo;
    if (gopt_bl_combo_parse(&reg, method, &combo, &err)) return cli_usage_error(a.verb, "%s", err.msg);
    gopt_graph *g = NULL;
    gopt_profile *p = NULL;
    gopt_costmodel *cm = NULL;
    gopt_sim *sim = NULL;
    gopt_decisions d = {0};
    int rc = 0;
    if ((rc = cli_open_graph_cluster(a.verb, file, prof, ndev, &g, &p, &cm))) goto out;
    if (gopt_sim_create(g, cm, &sim, &err)) {
        rc = cli_report(&err);
        goto out;
    }
    gopt_bl_options opt = {0};
    opt.seed = (uint64_t)seed;
    opt.budget_s = budget;
    opt.max_evals = evals;
    opt.mem_fraction = memfrac;
    gopt_bl_outcome res;
    if (gopt_bl_optimize(&reg, method, sim, cm, &opt, &d, &res, &err)) {
        gopt_error_prefix(&err, "%s: method %s", file, method);
        rc = cli_report(&err);
        goto out;
    }
    int nd = gopt_sim_num_devices(sim);
    if (outp && gopt_decisions_save(outp, g, nd, &d, &err)) {
        rc = cli_report(&err);
        goto out;
    }
    int used = 0, groups = 0;
    {
        int *seen = calloc((size_t)nd, sizeof *seen);
        int32_t n = gopt_graph_num_nodes(g);
        uint8_t *gseen = calloc((size_t)n + 1, 1);
        if (!seen || !gseen) {
            free(seen);
            free(gseen);
            gopt_error_set(&err, GOPT_ENOMEM, "out of memory");
            rc = cli_report(&err);
            goto out;
        }
        for (int32_t v = 0; v < n; v++) {
            seen[d.device[v]] = 1;
            if (d.group[v] >= 0 && !gseen[d.group[v]]) {
                gseen[d.group[v]] = 1;
                groups++;
            }
        }
        for (int k = 0; k < nd; k++) used += seen[k];
        free(seen);
        free(gseen);
    }
    if (json) {
        json_t *o = json_object(), *peak = json_array();
        json_object_set_new(o, "graph", json_string(gopt_graph_name(g)));
        json_object_set_new(o, "file", cli_json_text(file));
        json_object_set_new(o, "profile", json_string(gopt_profile_name(p)));
        json_object_set_new(o, "method", json_string(method));
        json_object_set_new(o, "nodes", json_integer(gopt_graph_num_nodes(g)));
        json_object_set_new(o, "devices", json_integer(nd));
        json_object_set_new(o, "devices_used", json_integer(used));
        json_object_set_new(o, "fused_groups", json_integer(groups));
        json_object_set_new(o, "step_time_s", json_real(res.sim.step_time_s));
        json_object_set_new(o, "oom", json_boolean(res.sim.oom));
        json_object_set_new(o, "optimize_time_s", json_real(res.optimize_time_s));
        for (int k = 0; k < nd; k++) json_array_append_new(peak, json_integer(res.sim.peak_memory_bytes[k]));
        json_object_set_new(o, "peak_memory_bytes", peak);
        if (outp) json_object_set_new(o, "decisions", cli_json_text(outp));
        char *s = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
        json_decref(o);
        if (!s) {
            gopt_error_set(&err, GOPT_ENOMEM, "out of memory writing JSON");
            rc = cli_report(&err);
            goto out;
        }
        printf("%s\n", s);
        free(s);
    } else {
        printf("graph %s (%d nodes) on %d devices of %s\n", gopt_graph_name(g), gopt_graph_num_nodes(g), nd,
               gopt_profile_name(p));
        printf("method %s: simulated step %.6g ms%s; optimized in %.3f s\n", method, res.sim.step_time_s * 1e3,
               res.sim.oom ? ", OUT OF MEMORY" : "", res.optimize_time_s);
        printf("devices used %d of %d, fused groups %d%s%s\n", used, nd, groups, outp ? ", decisions -> " : "",
               outp ? outp : "");
    }
out:
    gopt_decisions_destroy(&d);
    gopt_sim_free(sim);
    gopt_cost_free(cm);
    gopt_profile_free(p);
    gopt_graph_free(g);
    return rc;
}
