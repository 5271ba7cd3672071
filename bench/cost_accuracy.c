/* cost_accuracy.c: how well the cost model predicts measured op times it
 * has not seen.
 *
 * Calibrates this CPU (or reads a measured profile with --profile FILE),
 * holds out a random fifth of the measured points of every table (GEMM,
 * convolution by FLOPs and by implicit-GEMM shape, elementwise, reduction,
 * copy), rebuilds the cost model from the other
 * four fifths, and prints the median and 90th-percentile relative error
 * |predicted - measured| / measured on the held-out points, per table and
 * overall. Reference measured in the same run: the roofline estimate
 * max(flops/peak, bytes/bandwidth) of the same points, with the same
 * profile's peak and bandwidth. Targets: median < 10%, p90 < 25%.
 *
 * Usage: bench_cost_accuracy [--profile FILE] [--budget S] [--seed N] [--devices N] [--worst K]
 * (--worst K also lists every held-out point off by more than 1/K... no: the
 * K worst points of each table, for diagnosis.)
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gopt_cost.h"

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double quantile(double *v, int n, double q) {
    if (n <= 0) return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp);
    double pos = q * (n - 1);
    int i = (int)floor(pos);
    if (i >= n - 1) return v[n - 1];
    return v[i] + (pos - i) * (v[i + 1] - v[i]);
}

static void progress(void *ctx, double f, const char *what) {
    int *last = ctx;
    int pct = (int)(f * 100);
    if (pct / 10 != *last / 10) fprintf(stderr, "calibrating: %3d%% %s\n", pct, what);
    *last = pct;
}

int main(int argc, char **argv) {
    const char *file = NULL;
    double budget = 60;
    long seed = 42, ndev = 0, worst = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--profile") == 0 && i + 1 < argc) file = argv[++i];
        else if (strcmp(argv[i], "--budget") == 0 && i + 1 < argc) budget = atof(argv[++i]);
        else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) seed = atol(argv[++i]);
        else if (strcmp(argv[i], "--devices") == 0 && i + 1 < argc) ndev = atol(argv[++i]);
        else if (strcmp(argv[i], "--worst") == 0 && i + 1 < argc) worst = atol(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--profile FILE] [--budget S] [--seed N] [--devices N] [--worst K]\n", argv[0]);
            return 2;
        }
    }
    gopt_error err = {0};
    gopt_profile *full = NULL, *train = NULL;
    gopt_costmodel *cm = NULL;
    int rc = 1;
    double t0 = gopt_now_seconds();
    if (file) {
        if (gopt_profile_load(file, &full, &err)) goto fail;
        if (strcmp(gopt_profile_source(full), "measured") != 0) {
            fprintf(stderr, "%s: a datasheet profile has no measured points to hold out\n", file);
            rc = 2;
            goto out;
        }
    } else {
        int last = -10;
        gopt_calib_options o = {.ndev = (int)ndev, .budget_s = budget, .seed = (uint64_t)seed,
                                .command = "bench_cost_accuracy", .progress = progress, .progress_ctx = &last};
        if (gopt_calibrate_cpu(&o, &full, &err)) goto fail;
    }
    double tcal = gopt_now_seconds() - t0;
    /* Split every table of every table set: a random fifth is held out. */
    gopt_buf b;
    gopt_buf_init(&b);
    if (gopt_profile_write_json(full, &b, &err)) {
        gopt_buf_destroy(&b);
        goto fail;
    }
    json_error_t je;
    json_t *root = json_loadb(b.data, b.len, 0, &je);
    gopt_buf_destroy(&b);
    if (!root) {
        fprintf(stderr, "re-reading the profile failed: %s\n", je.text);
        goto out;
    }
    gopt_rng rng;
    gopt_rng_seed(&rng, (uint64_t)seed ^ 0x5eedULL);
    json_t *held = json_object(); /* kind -> array of rows */
    json_t *sets = json_object_get(root, "tables");
    const char *sname;
    json_t *set;
    json_object_foreach(sets, sname, set) {
        const char *kname;
        json_t *tab;
        json_object_foreach(set, kname, tab) {
            json_t *keep = json_array(), *out = json_object_get(held, kname);
            if (!out) {
                out = json_array();
                json_object_set_new(held, kname, out);
            }
            for (size_t i = 0; i < json_array_size(tab); i++) {
                json_t *row = json_array_get(tab, i);
                json_array_append(gopt_rng_uniform(&rng) < 0.2 ? out : keep, row);
            }
            json_object_set_new(set, kname, keep);
        }
    }
    char *txt = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    gopt_status st = txt ? gopt_profile_parse(txt, strlen(txt), "training four fifths", &train, &err) : GOPT_ENOMEM;
    free(txt);
    if (st || gopt_cost_create(train, 0, &cm, &err)) {
        json_decref(held);
        goto fail;
    }
    double peak = gopt_profile_device_peak(train, 0, GOPT_DTYPE_FP32), bw = gopt_profile_device_bandwidth(train, 0);
    int nd = gopt_cost_num_devices(cm);
    printf("cost model accuracy on held-out measured points (profile '%s', %s)\n", gopt_profile_name(full),
           gopt_profile_machine(full));
    printf("calibration %.1f s; seed %ld; held out a random fifth of every table\n\n", tcal, seed);
    printf("  %-12s %6s %12s %12s %16s %16s\n", "table", "points", "median err", "p90 err", "roofline median",
           "roofline p90");
    double *all = malloc(100000 * sizeof(double)), *allr = malloc(100000 * sizeof(double));
    int nall = 0;
    const char *kname;
    json_t *rows;
    json_object_foreach(held, kname, rows) {
        int n = (int)json_array_size(rows), k = 0;
        if (n == 0) continue;
        double *e = malloc((size_t)n * sizeof(double)), *er = malloc((size_t)n * sizeof(double));
        for (int i = 0; i < n; i++) {
            json_t *row = json_array_get(rows, (size_t)i);
            int w = (int)json_array_size(row);
            double x[3] = {0}, meas = json_number_value(json_array_get(row, (size_t)w - 1)), pred = -1, roof = 0;
            for (int c = 0; c < w - 1 && c < 3; c++) x[c] = json_number_value(json_array_get(row, (size_t)c));
            if (strcmp(kname, "gemm") == 0) {
                pred = gopt_cost_table_lookup(cm, 0, GOPT_TABLE_GEMM, x);
                double fl = 2 * x[0] * x[1] * x[2], by = 4 * (x[0] * x[2] + x[2] * x[1] + x[0] * x[1]);
                roof = fmax(fl / peak, by / bw);
            } else if (strcmp(kname, "conv") == 0) {
                pred = gopt_cost_table_lookup(cm, 0, GOPT_TABLE_CONV, x);
                roof = x[0] / peak;
            } else if (strcmp(kname, "conv_gemm") == 0) { /* the same convolutions, by implicit-GEMM shape */
                pred = gopt_cost_table_lookup(cm, 0, GOPT_TABLE_CONV_GEMM, x);
                roof = 2 * x[0] * x[1] * x[2] / peak;
            } else if (strcmp(kname, "elementwise") == 0) {
                pred = gopt_cost_table_lookup(cm, 0, GOPT_TABLE_ELEMENTWISE, x);
                roof = x[0] / bw;
            } else if (strcmp(kname, "reduction") == 0) {
                pred = gopt_cost_table_lookup(cm, 0, GOPT_TABLE_REDUCTION, x);
                roof = x[0] / bw;
            } else if (strcmp(kname, "copy") == 0 && nd > 1) {
                pred = gopt_cost_transfer_time(cm, 0, 1, x[0]);
                roof = gopt_profile_link_latency(train, 0, 1) + x[0] / gopt_profile_link_bandwidth(train, 0, 1);
            }
            if (pred <= 0) continue;
            e[k] = fabs(pred - meas) / meas;
            if (worst > 0 && e[k] > 0.25)
                fprintf(stderr, "  off by %5.1f%%: %s at (%g, %g, %g) measured %.4g s predicted %.4g s\n", 100 * e[k],
                        kname, x[0], x[1], x[2], meas, pred);
            er[k] = fabs(roof - meas) / meas;
            if (nall < 100000) {
                all[nall] = e[k];
                allr[nall++] = er[k];
            }
            k++;
        }
        if (k > 0) {
            double m = quantile(e, k, 0.5), p = quantile(e, k, 0.9);
            double mr = quantile(er, k, 0.5), pr = quantile(er, k, 0.9);
            printf("  %-12s %6d %11.1f%% %11.1f%% %15.1f%% %15.1f%%\n", kname, k, 100 * m, 100 * p, 100 * mr, 100 * pr);
        }
        free(e);
        free(er);
    }
    json_decref(held);
    double m = quantile(all, nall, 0.5), p = quantile(all, nall, 0.9);
    double mr = quantile(allr, nall, 0.5), pr = quantile(allr, nall, 0.9);
    printf("  %-12s %6d %11.1f%% %11.1f%% %15.1f%% %15.1f%%\n", "all", nall, 100 * m, 100 * p, 100 * mr, 100 * pr);
    printf("\nmedian relative error %.1f%% (target < 10%%), p90 %.1f%% (target < 25%%): %s\n", 100 * m, 100 * p,
           m < 0.10 && p < 0.25 ? "MEETS the target" : "BELOW target");
    printf("ratio of median error to the roofline reference's: %.3f\n", mr > 0 ? m / mr : NAN);
    free(all);
    free(allr);
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "error: %s\n", err.msg);
out:
    gopt_cost_free(cm);
    gopt_profile_free(train);
    gopt_profile_free(full);
    return rc;
}
