/* cmd_cost.c: `gopt cost GRAPH --profile P`: predicted per-op times of a
 * graph on one device of a profile, the most expensive ops first, and the
 * totals (serial time per device, time by op class). docs/costmodel.md. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gopt_cost.h"

static void cost_usage(FILE *f) {
    fprintf(f, "Usage: gopt cost GRAPH --profile P [--top K] [--device D] [--devices N] [--json]\n\n"
               "Predicted time of every op of GRAPH on device D (default 0) of profile P: the K most\n"
               "expensive ops (default 20; 0 = all), then the totals: the serial time (sum of op times) on\n"
               "each of the first N devices (default all) and the time by op class.\n"
               "Times come from the profile's measured tables where they apply, else from the roofline\n"
               "max(flops/peak, bytes/bandwidth), plus the launch overhead (docs/costmodel.md).\n");
}

typedef struct {
    int32_t v;
    double t;
} ranked;

static int by_time_desc(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? 1 : -1;
    return (x->v > y->v) - (x->v < y->v);
}

int cmd_cost(int argc, char **argv) {
    const char *file = NULL, *prof = NULL;
    long top = 20, dev = 0, ndev = 0;
    int json = 0;
    if (argc >= 1 && cli_wants_help(argc, argv)) {
        cost_usage(stdout);
        return 0;
    }
    cli_args a;
    cli_init(&a, argc, argv, "cost");
    while (a.i < a.argc) {
        if (cli_opt_str(&a, "--profile", &prof) || cli_opt_long(&a, "--top", &top, 0, 1L << 30) ||
            cli_opt_long(&a, "--device", &dev, 0, 1L << 20) || cli_opt_long(&a, "--devices", &ndev, 0, 1L << 20)) {
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
    gopt_cost_table t = {0};
    ranked *rk = NULL;
    int rc = 0;
    if ((rc = cli_open_graph_cluster(a.verb, file, prof, ndev, &g, &p, &cm))) goto out;
    if (dev >= gopt_cost_num_devices(cm)) {
        rc = cli_usage_error(a.verb, "--device %ld: the cost model has devices 0..%d", dev, gopt_cost_num_devices(cm) - 1);
        goto out;
    }
    if (gopt_cost_table_build(cm, g, &t, &err)) {
        rc = cli_report(&err);
        goto out;
    }
    int n = t.n, nd = t.ndev, d = (int)dev;
    rk = malloc((size_t)(n ? n : 1) * sizeof *rk);
    if (!rk) {
        rc = cli_report(&(gopt_error){GOPT_ENOMEM, "out of memory"});
        goto out;
    }
    const gopt_frozen *f = gopt_graph_frozen(g);
    double by_class[GOPT_OP_CLASS_COUNT] = {0}, by_kind[GOPT_OP_KIND_COUNT] = {0};
    int kind_ops[GOPT_OP_KIND_COUNT] = {0}, dispatched = 0;
    for (int v = 0; v < n; v++) {
        rk[v].v = v;
        rk[v].t = t.time[(size_t)v * nd + d];
        by_class[f->op_class[v]] += rk[v].t;
        if (rk[v].t > 0) { /* kernels: inputs and parameters are no op of any kind */
            by_kind[t.kind[v]] += rk[v].t;
            kind_ops[t.kind[v]]++;
            dispatched += f->phase[v] != GOPT_PHASE_BWD; /* the ops that pay efficiency.op_overhead */
        }
    }
    qsort(rk, (size_t)n, sizeof *rk, by_time_desc);
    int shown = top == 0 || top > n ? n : (int)top;
    if (json) {
        json_t *o = json_object(), *ops = json_array(), *tot = json_object(), *cls = json_object(), *kd = json_object();
        json_object_set_new(o, "graph", json_string(gopt_graph_name(g)));
        json_object_set_new(o, "profile", json_string(gopt_profile_name(p)));
        json_object_set_new(o, "device", json_string(gopt_profile_device_name(p, d)));
        for (int i = 0; i < shown; i++) {
            int v = rk[i].v;
            json_t *jo = json_object();
            json_object_set_new(jo, "name", json_string(gopt_graph_node_name(g, v)));
            json_object_set_new(jo, "class", json_string(gopt_op_class_name((gopt_op_class)f->op_class[v])));
            json_object_set_new(jo, "kind", json_string(gopt_op_kind_name((gopt_op_kind)t.kind[v])));
            json_object_set_new(jo, "flops", json_real(f->flops[v]));
            json_object_set_new(jo, "time", json_real(rk[i].t));
            json_object_set_new(jo, "compute", json_real(t.compute[(size_t)v * nd + d]));
            json_array_append_new(ops, jo);
        }
        for (int e = 0; e < nd; e++) {
            double s = 0;
            for (int v = 0; v < n; v++) s += t.time[(size_t)v * nd + e];
            json_object_set_new(tot, gopt_profile_device_name(p, e), json_real(s));
        }
        for (int c = 0; c < GOPT_OP_CLASS_COUNT; c++)
            json_object_set_new(cls, gopt_op_class_name((gopt_op_class)c), json_real(by_class[c]));
        json_object_set_new(o, "ops", ops);
        json_object_set_new(o, "serial_time", tot);
        json_object_set_new(o, "time_by_class", cls);
        for (int k = 0; k < GOPT_OP_KIND_COUNT; k++) { /* what tools/torch_fit.py fits efficiency factors to */
            json_t *jk = json_object();
            json_object_set_new(jk, "time", json_real(by_kind[k]));
            json_object_set_new(jk, "ops", json_integer(kind_ops[k]));
            json_object_set_new(kd, gopt_op_kind_name((gopt_op_kind)k), jk);
        }
        json_object_set_new(o, "launch_overhead", json_real(gopt_cost_launch_overhead(cm, d)));
        json_object_set_new(o, "dispatched_ops", json_integer(dispatched));
        json_object_set_new(o, "by_kind", kd);
        char *txt = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
        if (txt) puts(txt);
        free(txt);
        json_decref(o);
        goto out;
    }
    printf("graph %s (%d nodes) on %s of profile %s (%s)\n\n", gopt_graph_name(g), n, gopt_profile_device_name(p, d),
           gopt_profile_name(p), gopt_profile_device_model(p, d));
    printf("  %-32s %-13s %12s %12s %12s %12s\n", "op", "class", "GFLOP", "bytes", "time (us)", "compute (us)");
    for (int i = 0; i < shown; i++) {
        int v = rk[i].v;
        double bytes = f->out_bytes[v];
        for (int32_t e = f->in_ptr[v]; e < f->in_ptr[v + 1]; e++) bytes += gopt_cost_read_bytes(f, v, e);
        printf("  %-32.32s %-13s %12.4g %12.4g %12.4g %12.4g\n", gopt_graph_node_name(g, v),
               gopt_op_class_name((gopt_op_class)f->op_class[v]), f->flops[v] / 1e9, bytes, rk[i].t * 1e6,
               t.compute[(size_t)v * nd + d] * 1e6);
    }
    if (shown < n) printf("  ... %d more ops\n", n - shown);
    printf("\nserial time (all ops on one device):\n");
    for (int e = 0; e < nd; e++) {
        double s = 0;
        for (int v = 0; v < n; v++) s += t.time[(size_t)v * nd + e];
        printf("  %-10s %12.6g ms\n", gopt_profile_device_name(p, e), s * 1e3);
    }
    printf("time by class on %s:\n", gopt_profile_device_name(p, d));
    for (int c = 0; c < GOPT_OP_CLASS_COUNT; c++)
        if (by_class[c] > 0) printf("  %-13s %12.6g ms\n", gopt_op_class_name((gopt_op_class)c), by_class[c] * 1e3);
out:
    free(rk);
    gopt_cost_table_destroy(&t);
    gopt_cost_free(cm);
    gopt_profile_free(p);
    gopt_graph_free(g);
    return rc;
}
