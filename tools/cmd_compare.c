/* cmd_compare.c: `gopt compare GRAPH... --profile P [--devices N]
 * [--methods LIST] [--json|--csv] [--seed S] [--budget SECONDS] [--evals N]`:
 * the paper's kind of table. One row per graph, one column per method, the
 * simulated step time (OOM marked, "none" where the method finds no valid
 * placement), the best of each row starred, and each method's speed-up over
 * `single`. Every graph is loaded before anything is printed. docs/baselines.md.
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_json.h"
#include "cli_go.h"
#include "gopt_baselines.h"

#define CMP_MAX_METHODS 32
static const char *DEFAULT_METHODS = "single,expert,metis,heft,mtopo,metf,msct,heft+cp+xla,sa,heft+cp+xla+sa";

static void compare_usage(FILE *f) {
    fprintf(f,
            "Usage: gopt compare GRAPH... --profile P [--devices N] [--methods LIST] [--json|--csv]\n"
            "                    [--seed S] [--budget SECONDS] [--evals N]\n\n"
            "Run every method on every graph and simulate each result: one row per graph, one column per\n"
            "method, simulated step time in ms (OOM marked; 'none' = no valid placement found), the best of\n"
            "each row starred, then the speed-up of each method over single.\n"
            "  --methods LIST    comma-separated methods or combinations (gopt optimize --list), each\n"
            "                    at --seed or at its own with a trailing @sS (metis,metis@s2,metis@s3);\n"
            "                    default %s\n"
            "  --budget SECONDS  time budget of sa per graph (default 5); --evals N caps its evaluations\n"
            "  --seed S          seed of metis and sa (default 1)\n"
            "  --json            {profile, devices, methods, rows: [{graph, nodes, results: {method:\n"
            "                    {step_time_s, oom, optimize_time_s, speedup_vs_single, best, error}}}]}\n"
            "  --csv             graph,nodes,method,step_time_s,oom,optimize_time_s,speedup_vs_single,best,status\n",
            DEFAULT_METHODS);
}

typedef struct {
    double step, opt_time;
    int oom, status; /* status: 0 ok, 1 no valid solution, 2 error */
    char msg[256];
} cell;

int cmd_compare(int argc, char **argv) {
    const char *prof = NULL, *mlist = DEFAULT_METHODS;
    long ndev = 0, seed = 1, evals = 0;
    double budget = 5;
    int json = 0, csv = 0, rc = 0;
    if (cli_wants_help(argc, argv)) {
        compare_usage(stdout);
        cli_go_usage(stdout);
        return 0;
    }
    const char **files = calloc((size_t)argc + 1, sizeof *files);
    int nfiles = 0;
    if (!files) return 1;
    cli_args a;
    cli_init(&a, argc, argv, "compare");
    while (a.i < a.argc) {
        if (cli_opt_str(&a, "--profile", &prof) || cli_opt_str(&a, "--methods", &mlist) ||
            cli_opt_long(&a, "--devices", &ndev, 1, GOPT_SIM_MAX_DEVICES) ||
            cli_opt_long(&a, "--seed", &seed, 0, 0x7fffffffL) || cli_opt_long(&a, "--evals", &evals, 1, 1000000000L) ||
            cli_opt_double(&a, "--budget", &budget, 1e-3, 1e6) || cli_go_option(&a)) {
            if (a.bad) {
                free(files);
                return 2;
            }
        } else if (cli_flag(&a, "--json")) json = 1;
        else if (cli_flag(&a, "--csv")) csv = 1;
        else if (a.argv[a.i][0] == '-' && a.argv[a.i][1]) {
            free(files);
            return cli_usage_error(a.verb, "unknown option '%s'", a.argv[a.i]);
        } else files[nfiles++] = a.argv[a.i++];
    }
    gopt_bl_registry reg;
    gopt_bl_registry_init(&reg);
    if (cli_go_register(&reg, NULL)) {
        free(files);
        return 1;
    }
    char mbuf[1024];
    const char *methods[CMP_MAX_METHODS];
    int nm = 0;
    gopt_error err = {0};
    gopt_graph **graphs = NULL;
    gopt_profile *p = NULL;
    cell *cells = NULL;
    if (!nfiles) {
        rc = cli_usage_error(a.verb, "missing GRAPH");
        goto out;
    }
    if (!prof) {
        rc = cli_usage_error(a.verb, "missing --profile P");
        goto out;
    }
    if (json && csv) {
        rc = cli_usage_error(a.verb, "--json and --csv exclude each other");
        goto out;
    }
    if (strlen(mlist) >= sizeof mbuf) {
        rc = cli_usage_error(a.verb, "--methods: list too long");
        goto out;
    }
    strcpy(mbuf, mlist);
    for (char *tok = strtok(mbuf, ","); tok; tok = strtok(NULL, ",")) {
        gopt_bl_combo c;
        if (gopt_bl_combo_parse(&reg, tok, &c, &err)) {
            rc = cli_usage_error(a.verb, "--methods: %s", err.msg);
            goto out;
        }
        if (nm == CMP_MAX_METHODS) {
            rc = cli_usage_error(a.verb, "--methods: more than %d methods", CMP_MAX_METHODS);
            goto out;
        }
        methods[nm++] = tok;
    }
    if (!nm) {
        rc = cli_usage_error(a.verb, "--methods: empty list");
        goto out;
    }
    int single_col = -1;
    for (int j = 0; j < nm; j++)
        if (strcmp(methods[j], "single") == 0) single_col = j;
    graphs = calloc((size_t)nfiles, sizeof *graphs);
    cells = calloc((size_t)nfiles * (size_t)nm, sizeof *cells);
    if (!graphs || !cells) {
        rc = 1;
        goto out;
    }
    gopt_costmodel *cm = NULL;
    if ((rc = cli_open_cluster(a.verb, prof, ndev, &p, &cm))) goto out;
    for (int i = 0; i < nfiles; i++)
        if (gopt_graph_load(files[i], &graphs[i], &err)) {
            rc = cli_report(&err);
            gopt_cost_free(cm);
            goto out;
        }
    int nd = gopt_cost_num_devices(cm);
    gopt_bl_options opt = {0};
    opt.seed = (uint64_t)seed;
    opt.budget_s = budget;
    opt.max_evals = evals;
    for (int i = 0; i < nfiles; i++) {
        gopt_sim *sim = NULL;
        if (gopt_sim_create(graphs[i], cm, &sim, &err)) {
            rc = cli_report(&err);
            gopt_cost_free(cm);
            goto out;
        }
        for (int j = 0; j < nm; j++) {
            cell *c = &cells[i * nm + j];
            gopt_decisions d;
            gopt_bl_outcome res;
            gopt_error e2 = {0};
            gopt_status st = gopt_bl_optimize(&reg, methods[j], sim, cm, &opt, &d, &res, &e2);
            gopt_decisions_destroy(&d);
            c->opt_time = res.optimize_time_s;
            if (st == GOPT_OK) {
                c->step = res.sim.step_time_s;
                c->oom = res.sim.oom;
            } else {
                c->status = st == GOPT_EUNSUP ? 1 : 2;
                snprintf(c->msg, sizeof c->msg, "%.200s", e2.msg);
                if (c->status == 2) {
                    fprintf(stderr, "gopt compare: %s: %s: %s\n", files[i], methods[j], e2.msg);
                    rc = 1;
                }
            }
        }
        gopt_sim_free(sim);
    }
    gopt_cost_free(cm);
    /* best per row: the fastest valid, not-OOM result */
    int *best = calloc((size_t)nfiles, sizeof *best);
    if (!best) {
        rc = 1;
        goto out;
    }
    for (int i = 0; i < nfiles; i++) {
        best[i] = -1;
        for (int j = 0; j < nm; j++) {
            cell *c = &cells[i * nm + j];
            if (c->status || c->oom) continue;
            if (best[i] < 0 || c->step < cells[i * nm + best[i]].step) best[i] = j;
        }
    }
#define SPEEDUP(i, j)                                                                                                  \
    ((single_col >= 0 && !cells[(i) * nm + single_col].status && !cells[(i) * nm + single_col].oom &&                  \
      !cells[(i) * nm + (j)].status && !cells[(i) * nm + (j)].oom && cells[(i) * nm + (j)].step > 0)                   \
         ? cells[(i) * nm + single_col].step / cells[(i) * nm + (j)].step                                              \
         : NAN)
    if (json) {
        json_t *o = json_object(), *ms = json_array(), *rows = json_array();
        json_object_set_new(o, "profile", json_string(gopt_profile_name(p)));
        json_object_set_new(o, "devices", json_integer(nd));
        for (int j = 0; j < nm; j++) json_array_append_new(ms, json_string(methods[j]));
        json_object_set_new(o, "methods", ms);
        for (int i = 0; i < nfiles; i++) {
            json_t *r = json_object(), *res = json_object();
            json_object_set_new(r, "graph", json_string(gopt_graph_name(graphs[i])));
            json_object_set_new(r, "file", cli_json_text(files[i]));
            json_object_set_new(r, "nodes", json_integer(gopt_graph_num_nodes(graphs[i])));
            for (int j = 0; j < nm; j++) {
                cell *c = &cells[i * nm + j];
                json_t *m = json_object();
                double sp = SPEEDUP(i, j);
                json_object_set_new(m, "step_time_s", c->status ? json_null() : json_real(c->step));
                json_object_set_new(m, "oom", json_boolean(c->oom));
                json_object_set_new(m, "optimize_time_s", json_real(c->opt_time));
                json_object_set_new(m, "speedup_vs_single", isnan(sp) ? json_null() : json_real(sp));
                json_object_set_new(m, "best", json_boolean(best[i] == j));
                json_object_set_new(m, "error", c->status ? json_string(c->msg) : json_null());
                json_object_set_new(res, methods[j], m);
            }
            json_object_set_new(r, "results", res);
            json_array_append_new(rows, r);
        }
        json_object_set_new(o, "rows", rows);
        char *s = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
        json_decref(o);
        if (s) printf("%s\n", s);
        free(s);
    } else if (csv) {
        printf("graph,nodes,method,step_time_s,oom,optimize_time_s,speedup_vs_single,best,status\n");
        for (int i = 0; i < nfiles; i++)
            for (int j = 0; j < nm; j++) {
                cell *c = &cells[i * nm + j];
                double sp = SPEEDUP(i, j);
                printf("%s,%d,%s,", gopt_graph_name(graphs[i]), gopt_graph_num_nodes(graphs[i]), methods[j]);
                if (c->status) printf(",");
                else printf("%.9g,", c->step);
                printf("%d,%.6g,", c->oom, c->opt_time);
                if (!isnan(sp)) printf("%.6g", sp);
                printf(",%d,%s\n", best[i] == j, c->status == 0 ? "ok" : c->status == 1 ? "no_valid_solution" : "error");
            }
    } else {
        int w = 12;
        for (int j = 0; j < nm; j++)
            if ((int)strlen(methods[j]) + 1 > w) w = (int)strlen(methods[j]) + 1;
        int gw = 10;
        for (int i = 0; i < nfiles; i++)
            if ((int)strlen(gopt_graph_name(graphs[i])) > gw) gw = (int)strlen(gopt_graph_name(graphs[i]));
        printf("simulated step time (ms) on %d devices of %s; * best of the row, OOM out of memory, none = no "
               "valid placement\n",
               nd, gopt_profile_name(p));
        printf("%-*s %7s", gw, "graph", "nodes");
        for (int j = 0; j < nm; j++) printf(" %*s", w, methods[j]);
        printf("\n");
        for (int i = 0; i < nfiles; i++) {
            printf("%-*s %7d", gw, gopt_graph_name(graphs[i]), gopt_graph_num_nodes(graphs[i]));
            for (int j = 0; j < nm; j++) {
                cell *c = &cells[i * nm + j];
                char s[64];
                if (c->status == 1) snprintf(s, sizeof s, "none");
                else if (c->status) snprintf(s, sizeof s, "error");
                else snprintf(s, sizeof s, "%.4g%s%s", c->step * 1e3, c->oom ? " OOM" : "", best[i] == j ? "*" : "");
                printf(" %*s", w, s);
            }
            printf("\n");
        }
        if (single_col >= 0) {
            printf("\nspeed-up over single (single step / method step)\n");
            printf("%-*s %7s", gw, "graph", "nodes");
            for (int j = 0; j < nm; j++) printf(" %*s", w, methods[j]);
            printf("\n");
            for (int i = 0; i < nfiles; i++) {
                printf("%-*s %7d", gw, gopt_graph_name(graphs[i]), gopt_graph_num_nodes(graphs[i]));
                for (int j = 0; j < nm; j++) {
                    double sp = SPEEDUP(i, j);
                    char s[32];
                    if (isnan(sp)) snprintf(s, sizeof s, "-");
                    else snprintf(s, sizeof s, "%.2fx", sp);
                    printf(" %*s", w, s);
                }
                printf("\n");
            }
        }
        printf("\noptimizer time (s)\n");
        printf("%-*s %7s", gw, "graph", "nodes");
        for (int j = 0; j < nm; j++) printf(" %*s", w, methods[j]);
        printf("\n");
        for (int i = 0; i < nfiles; i++) {
            printf("%-*s %7d", gw, gopt_graph_name(graphs[i]), gopt_graph_num_nodes(graphs[i]));
            for (int j = 0; j < nm; j++) printf(" %*.3f", w, cells[i * nm + j].opt_time);
            printf("\n");
        }
    }
#undef SPEEDUP
    free(best);
out:
    if (graphs)
        for (int i = 0; i < nfiles; i++) gopt_graph_free(graphs[i]);
    free(graphs);
    free(cells);
    gopt_profile_free(p);
    free(files);
    return rc;
}
