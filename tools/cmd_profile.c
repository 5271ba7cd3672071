/* cmd_profile.c: `gopt profile show|calibrate`: inspect a device profile, or
 * measure this machine (CPU, or CUDA GPUs) and write one (docs/profiles.md).
 * Calibration shows a progress bar when stderr is a terminal; the output file
 * is written atomically, only after the whole calibration succeeded. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_json.h"
#include "gopt_cost.h"
#include "gopt_graph.h"
#include "gopt_profile.h"

static void profile_usage(FILE *f) {
    fprintf(f,
            "Usage: gopt profile SUBCOMMAND ...\n\n"
            "  show FILE [--json]               devices, links, tables and provenance of a profile\n"
            "  calibrate --backend cpu|cuda -o FILE [--devices N] [--budget SECONDS] [--seed S] [--name NAME]\n"
            "            [--shapes-from GRAPH]...  measure this machine and write a profile\n\n"
            "calibrate --backend cpu: OpenBLAS sgemm over random shapes, memory bandwidth, elementwise and\n"
            "reduction kernels over sizes, thread hand-off latency; devices are core groups (--devices N,\n"
            "default one per online core). About a minute (--budget, default 60 s).\n"
            "  --shapes-from GRAPH (cpu; repeatable) also measure the GEMM shapes of GRAPH's matmuls and\n"
            "                  convolutions (as the runtime runs them: m, n, k), before the random ones: a\n"
            "                  workload's own layers are then priced from their own measurement\n"
            "calibrate --backend cuda: cuBLAS GEMM, cuDNN convolution, elementwise/reduction kernels, launch\n"
            "overhead, host-device and peer copies on every visible GPU. Exit code 3 with a message when\n"
            "this build has no CUDA or no GPU is present.\n"
            "Shipped profiles (datasheet figures): profiles/*.json. Format: docs/profiles.md.\n");
}

static void human(double v, const char *unit, char *out, size_t n) {
    const char *pre[] = {"", "K", "M", "G", "T", "P"};
    int i = 0;
    while (fabs(v) >= 1000 && i < 5) {
        v /= 1000;
        i++;
    }
    snprintf(out, n, "%.4g %s%s", v, pre[i], unit);
}

static void human_bytes(double v, char *out, size_t n) {
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (v >= 1024 && i < 4) {
        v /= 1024;
        i++;
    }
    snprintf(out, n, "%.4g %s", v, unit[i]);
}

static void human_time(double s, char *out, size_t n) {
    if (s >= 1) snprintf(out, n, "%.3g s", s);
    else if (s >= 1e-3) snprintf(out, n, "%.3g ms", s * 1e3);
    else if (s >= 1e-6) snprintf(out, n, "%.3g us", s * 1e6);
    else snprintf(out, n, "%.3g ns", s * 1e9);
}

static int profile_show(int argc, char **argv) {
    const char *file = NULL;
    int json = 0;
    cli_args a;
    cli_init(&a, argc, argv, "profile show");
    while (a.i < a.argc) {
        if (cli_flag(&a, "--json")) json = 1;
        else if (cli_positional(&a, &file)) return 2;
    }
    if (!file) return cli_usage_error(a.verb, "missing FILE");
    gopt_profile *p = NULL;
    gopt_error err = {0};
    if (gopt_profile_load(file, &p, &err) != GOPT_OK) return cli_report(&err);
    int n = gopt_profile_num_devices(p);
    if (json) {
        json_t *o = json_object(), *devs = json_array();
        json_object_set_new(o, "file", cli_json_text(file));
        json_object_set_new(o, "name", json_string(gopt_profile_name(p)));
        json_object_set_new(o, "source", json_string(gopt_profile_source(p)));
        json_object_set_new(o, "topology", json_string(gopt_profile_topology(p)));
        if (gopt_profile_shared_bandwidth(p) > 0)
            json_object_set_new(o, "shared_memory_bandwidth", json_real(gopt_profile_shared_bandwidth(p)));
        if (gopt_profile_has_efficiency(p)) {
            json_t *ef = json_object();
            for (int k = 0; k < GOPT_OP_KIND_COUNT; k++)
                json_object_set_new(ef, gopt_op_kind_name((gopt_op_kind)k), json_real(gopt_profile_efficiency(p, (gopt_op_kind)k)));
            json_object_set_new(o, "efficiency", ef);
            json_object_set_new(o, "op_overhead", json_real(gopt_profile_op_overhead(p)));
            json_object_set_new(o, "dispatch", json_string(gopt_profile_dispatch_overlapped(p) ? "overlapped" : "serial"));
            if (gopt_profile_fresh_output_time(p, 64.0 * 1048576) > 0) { /* a few points of the curve */
                json_t *fo = json_object();
                json_object_set_new(fo, "1MiB", json_real(gopt_profile_fresh_output_time(p, 1048576.0)));
                json_object_set_new(fo, "16MiB", json_real(gopt_profile_fresh_output_time(p, 16.0 * 1048576)));
                json_object_set_new(fo, "64MiB", json_real(gopt_profile_fresh_output_time(p, 64.0 * 1048576)));
                json_object_set_new(o, "fresh_output_s", fo);
            }
        }
        for (int d = 0; d < n; d++) {
            json_t *jd = json_object();
            json_object_set_new(jd, "name", json_string(gopt_profile_device_name(p, d)));
            json_object_set_new(jd, "kind", json_string(gopt_device_kind_name(gopt_profile_device_kind(p, d))));
            json_object_set_new(jd, "model", json_string(gopt_profile_device_model(p, d)));
            json_object_set_new(jd, "memory_bytes", json_real(gopt_profile_device_memory(p, d)));
            json_object_set_new(jd, "peak_fp32", json_real(gopt_profile_device_peak(p, d, GOPT_DTYPE_FP32)));
            json_object_set_new(jd, "memory_bandwidth", json_real(gopt_profile_device_bandwidth(p, d)));
            json_object_set_new(jd, "launch_overhead", json_real(gopt_profile_device_launch_overhead(p, d)));
            json_t *tabs = json_object();
            for (int k = 0; k < GOPT_TABLE_COPY; k++) {
                gopt_profile_table t;
                if (gopt_profile_device_table(p, d, (gopt_table_kind)k, &t))
                    json_object_set_new(tabs, gopt_table_kind_name((gopt_table_kind)k), json_integer(t.n));
            }
            json_object_set_new(jd, "table_rows", tabs);
            json_array_append_new(devs, jd);
        }
        json_object_set_new(o, "devices", devs);
        char *txt = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
        if (txt) puts(txt);
        free(txt);
        json_decref(o);
        gopt_profile_free(p);
        return 0;
    }
    printf("profile     %s\n", gopt_profile_name(p));
    if (gopt_profile_description(p)[0]) printf("about       %s\n", gopt_profile_description(p));
    printf("source      %s\n", gopt_profile_source(p));
    if (gopt_profile_reference(p)[0]) printf("reference   %s\n", gopt_profile_reference(p));
    if (gopt_profile_machine(p)[0]) printf("machine     %s\n", gopt_profile_machine(p));
    if (gopt_profile_date(p)[0]) printf("date        %s\n", gopt_profile_date(p));
    if (gopt_profile_command(p)[0]) printf("command     %s\n", gopt_profile_command(p));
    printf("topology    %s\n", gopt_profile_topology(p));
    if (gopt_profile_shared_bandwidth(p) > 0) {
        char bus[32];
        human(gopt_profile_shared_bandwidth(p), "B/s", bus, sizeof bus);
        printf("memory bus  %s, all devices at once\n", bus);
    }
    if (gopt_profile_has_efficiency(p)) { /* fitted against a framework: docs/profiles.md, "Efficiency" */
        printf("efficiency ");
        for (int k = 0; k < GOPT_OP_KIND_COUNT; k++)
            printf(" %s %.3g", gopt_op_kind_name((gopt_op_kind)k), gopt_profile_efficiency(p, (gopt_op_kind)k));
        printf("; op overhead %.3g us, %s\n", 1e6 * gopt_profile_op_overhead(p),
               gopt_profile_dispatch_overlapped(p) ? "dispatched while the device runs" : "added to each op");
        if (gopt_profile_fresh_output_time(p, 64.0 * 1048576) > 0)
            printf("fresh output 1 MiB %.3g us, 16 MiB %.3g ms, 64 MiB %.3g ms\n",
                   1e6 * gopt_profile_fresh_output_time(p, 1048576.0),
                   1e3 * gopt_profile_fresh_output_time(p, 16.0 * 1048576),
                   1e3 * gopt_profile_fresh_output_time(p, 64.0 * 1048576));
    }
    printf("devices     %d\n\n", n);
    printf("  %-3s %-10s %-4s %-24s %12s %14s %14s %10s  %s\n", "id", "name", "kind", "model", "memory", "peak fp32",
           "mem bandwidth", "launch", "tables (rows)");
    for (int d = 0; d < n; d++) {
        char mem[32], pk[32], bw[32], la[32];
        human_bytes(gopt_profile_device_memory(p, d), mem, sizeof mem);
        human(gopt_profile_device_peak(p, d, GOPT_DTYPE_FP32), "FLOP/s", pk, sizeof pk);
        human(gopt_profile_device_bandwidth(p, d), "B/s", bw, sizeof bw);
        human_time(gopt_profile_device_launch_overhead(p, d), la, sizeof la);
        printf("  %-3d %-10s %-4s %-24.24s %12s %14s %14s %10s  ", d, gopt_profile_device_name(p, d),
               gopt_device_kind_name(gopt_profile_device_kind(p, d)), gopt_profile_device_model(p, d), mem, pk, bw, la);
        int any = 0;
        for (int k = 0; k < GOPT_TABLE_COPY; k++) {
            gopt_profile_table t;
            if (gopt_profile_device_table(p, d, (gopt_table_kind)k, &t)) {
                printf("%s%s %d", any ? ", " : "", gopt_table_kind_name((gopt_table_kind)k), (int)t.n);
                any = 1;
            }
        }
        printf("%s\n", any ? "" : "none (roofline)");
    }
    if (n > 1) {
        printf("\nlink bandwidth (src row -> dst column):\n  %-10s", "");
        for (int t = 0; t < n && t < 16; t++) printf(" %10s", gopt_profile_device_name(p, t));
        printf("\n");
        for (int s = 0; s < n && s < 16; s++) {
            printf("  %-10s", gopt_profile_device_name(p, s));
            for (int t = 0; t < n && t < 16; t++) {
                char bw[32];
                if (s == t) snprintf(bw, sizeof bw, "-");
                else human(gopt_profile_link_bandwidth(p, s, t), "B/s", bw, sizeof bw);
                printf(" %10s", bw);
            }
            printf("\n");
        }
        if (n > 16) printf("  (first 16 devices shown)\n");
        char la[32];
        human_time(gopt_profile_link_latency(p, 0, 1), la, sizeof la);
        gopt_profile_table t;
        printf("link latency %s (%s -> %s)%s\n", la, gopt_profile_device_name(p, 0), gopt_profile_device_name(p, 1),
               gopt_profile_link_table(p, 0, 1, &t) ? ", measured copy table" : "");
    }
    gopt_profile_free(p);
    return 0;
}

/* ---- calibrate ------------------------------------------------------------------ */
typedef struct {
    int tty;
    double start;
    int last_pct;
} progress_state;

static void progress_bar(void *ctx, double frac, const char *what) {
    progress_state *s = ctx;
    if (frac < 0) frac = 0;
    if (frac > 1) frac = 1;
    int pct = (int)(frac * 100 + 0.5);
    double el = gopt_now_seconds() - s->start;
    if (s->tty) {
        int w = 30, fill = (int)(frac * w + 0.5);
        fprintf(stderr, "\r[");
        for (int i = 0; i < w; i++) fputc(i < fill ? '#' : '.', stderr);
        fprintf(stderr, "] %3d%% %5.1fs %-32.32s", pct, el, what);
        if (frac >= 1) fputc('\n', stderr);
        fflush(stderr);
    } else if (pct / 25 != s->last_pct / 25) {
        /* Not a terminal: a line at every quarter, no carriage returns. */
        fprintf(stderr, "calibrate: %3d%% %5.1fs %s\n", pct, el, what);
    }
    s->last_pct = pct;
}

static int cmp_shape(const void *x, const void *y) {
    const double *a = x, *b = y;
    for (int i = 0; i < 3; i++)
        if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
    return 0;
}

/* The distinct fp32 GEMM shapes (m, n, k) of the graphs' matmuls and convolutions, as the runtime
 * runs them (k rounded: gopt_cost_node_gemm_dims); *nshapes of them in *shapes (malloc'd, may be
 * NULL when none). Exit code 2 on a graph that does not load. */
static int workload_shapes(const char *const *paths, int npaths, double **shapes, int32_t *nshapes) {
    double *v = NULL;
    size_t n = 0, cap = 0;
    for (int i = 0; i < npaths; i++) {
        gopt_graph *g = NULL;
        gopt_error err = {0};
        if (gopt_graph_load(paths[i], &g, &err) != GOPT_OK) {
            free(v);
            return cli_report(&err);
        }
        for (int32_t u = 0; u < gopt_graph_num_nodes(g); u++) {
            gopt_node_attrs a;
            gopt_graph_node(g, u, &a);
            int dt = gopt_dtype_parse(a.dtype);
            double m, nn, k;
            if ((a.cls != GOPT_OP_CLASS_GEMM && a.cls != GOPT_OP_CLASS_CONV) || a.flops <= 0 ||
                (dt >= 0 && dt != GOPT_DTYPE_FP32) || !gopt_cost_node_gemm_dims(g, u, &m, &nn, &k))
                continue;
            if (n == cap) {
                cap = cap ? 2 * cap : 256;
                double *w = realloc(v, cap * 3 * sizeof *w);
                if (!w) {
                    free(v);
                    gopt_graph_free(g);
                    fprintf(stderr, "gopt: error: out of memory\n");
                    return 1;
                }
                v = w;
            }
            v[3 * n] = floor(m);
            v[3 * n + 1] = floor(nn);
            v[3 * n + 2] = (double)llround(k) > 1 ? (double)llround(k) : 1;
            n++;
        }
        gopt_graph_free(g);
    }
    if (n) qsort(v, n, 3 * sizeof *v, cmp_shape);
    size_t d = 0;
    for (size_t i = 0; i < n; i++)
        if (d == 0 || cmp_shape(v + 3 * i, v + 3 * (d - 1)) != 0) memmove(v + 3 * d++, v + 3 * i, 3 * sizeof *v);
    *shapes = v;
    *nshapes = (int32_t)d;
    return 0;
}

static int profile_calibrate(int argc, char **argv) {
    const char *backend = NULL, *out = NULL, *name = NULL, *from[64];
    int nfrom = 0;
    long ndev = 0, seed = 1;
    double budget = 0;
    cli_args a;
    cli_init(&a, argc, argv, "profile calibrate");
    while (a.i < a.argc) {
        if (cli_opt_str(&a, "--backend", &backend) || cli_opt_str(&a, "-o", &out) || cli_opt_str(&a, "--name", &name) ||
            cli_opt_long(&a, "--devices", &ndev, 1, 1024) || cli_opt_long(&a, "--seed", &seed, 0, 0x7fffffffL) ||
            cli_opt_double(&a, "--budget", &budget, 5, 3600)) {
            if (a.bad) return 2;
        } else if (strcmp(a.argv[a.i], "--shapes-from") == 0) {
            if (a.i + 1 >= a.argc) return cli_usage_error(a.verb, "--shapes-from needs a graph file");
            if (nfrom == (int)(sizeof from / sizeof from[0]))
                return cli_usage_error(a.verb, "--shapes-from given more than %d times", nfrom);
            from[nfrom++] = a.argv[a.i + 1];
            a.i += 2;
        } else if (a.argv[a.i][0] == '-') {
            return cli_usage_error(a.verb, "unknown option '%s'", a.argv[a.i]);
        } else {
            return cli_usage_error(a.verb, "unexpected argument '%s'", a.argv[a.i]);
        }
    }
    if (!backend) return cli_usage_error(a.verb, "missing --backend cpu|cuda");
    int cuda = strcmp(backend, "cuda") == 0;
    if (!cuda && strcmp(backend, "cpu") != 0)
        return cli_usage_error(a.verb, "--backend '%s' is not cpu or cuda", backend);
    if (!out) return cli_usage_error(a.verb, "missing -o FILE");
    if (nfrom && cuda)
        return cli_usage_error(a.verb, "--shapes-from is for --backend cpu (the CUDA calibrator measures its own shapes)");
    {
        /* Fail now, not after a minute of measuring, when OUT cannot be written. */
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", out);
        char *slash = strrchr(dir, '/');
        if (slash) *(slash == dir ? slash + 1 : slash) = 0;
        else snprintf(dir, sizeof dir, ".");
        if (access(dir, W_OK) != 0)
            return cli_usage_error(a.verb, "-o %s: directory '%s' is not writable or does not exist", out, dir);
    }
    /* The command as provenance, without any path before the verb. */
    gopt_buf cmd;
    gopt_buf_init(&cmd);
    gopt_buf_puts(&cmd, "gopt profile calibrate");
    for (int i = 0; i < argc; i++) gopt_buf_printf(&cmd, " %s", argv[i]);
    double *shapes = NULL;
    int32_t nshapes = 0, skipped = 0;
    if (nfrom) {
        int rc = workload_shapes(from, nfrom, &shapes, &nshapes);
        if (rc) {
            gopt_buf_destroy(&cmd);
            return rc;
        }
        fprintf(stderr, "calibrate: %d distinct GEMM shapes from %d graph(s)\n", (int)nshapes, nfrom);
    }
    progress_state ps = {cli_stderr_is_tty(), gopt_now_seconds(), -1};
    gopt_calib_options o = {0};
    o.gemm_shapes = shapes;
    o.n_gemm_shapes = nshapes;
    o.n_gemm_shapes_skipped = &skipped;
    o.ndev = (int)ndev;
    o.budget_s = budget;
    o.seed = (uint64_t)seed;
    o.command = cmd.failed ? "gopt profile calibrate" : cmd.data;
    o.name = name;
    o.progress = progress_bar;
    o.progress_ctx = &ps;
    gopt_profile *p = NULL;
    gopt_error err = {0};
    gopt_status st = cuda ? gopt_calibrate_cuda(&o, &p, &err) : gopt_calibrate_cpu(&o, &p, &err);
    int rc = 0;
    if (st == GOPT_OK) st = gopt_profile_save(p, out, &err);
    if (st != GOPT_OK) {
        if (ps.tty) fputc('\n', stderr);
        rc = cli_report(&err);
        /* no GPU or no CUDA in this build: a distinct code, so that a script (and ctest) can tell
         * "cannot run here" from a usage or input error (2) */
        if (st == GOPT_EUNSUP && cuda) rc = GOPT_EXIT_NO_DEVICE;
    } else {
        if (skipped)
            fprintf(stderr, "calibrate: %d of the graphs' shapes skipped (an operand over 256 MB, or over 2e10 FLOPs)\n",
                    (int)skipped);
        fprintf(stderr, "calibrate: wrote %s (%d devices) in %.1f s\n", out, gopt_profile_num_devices(p),
                gopt_now_seconds() - ps.start);
    }
    free(shapes);
    gopt_profile_free(p);
    gopt_buf_destroy(&cmd);
    return rc;
}

static const cli_subverb PROFILE_SUBVERBS[] = {
    {"show", profile_show},
    {"calibrate", profile_calibrate},
};

int cmd_profile(int argc, char **argv) {
    return cli_dispatch("profile", PROFILE_SUBVERBS, sizeof PROFILE_SUBVERBS / sizeof PROFILE_SUBVERBS[0], profile_usage, argc, argv);
}
