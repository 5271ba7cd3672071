/* validate.c: fidelity of the simulator against the runtime: both evaluators on the same
 * decisions, and the statistics the fidelity tables print (rank correlation, quantiles).
 * Cost: k simulations and k real runs; the statistics O(n log n). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

gopt_status gopt_rt_fidelity(gopt_runtime *rt, const gopt_decisions *ds, int k, const gopt_rt_options *o,
                             gopt_rt_fidelity_row *rows, gopt_error *err) {
    for (int i = 0; i < k; i++) {
        gopt_rt_report rep;
        gopt_status st = gopt_rt_run(rt, &ds[i], o, &rep, err);
        if (st) return st;
        gopt_sim_result sr;
        if ((st = rt_sim_run(rt, &ds[i], &sr, err))) return st;
        rows[i] = (gopt_rt_fidelity_row){sr.step_time_s, rep.res.step_time_s,
                                         (sr.step_time_s - rep.res.step_time_s) / rep.res.step_time_s, rep.spread,
                                         sr.oom || rep.res.oom};
    }
    return GOPT_OK;
}

typedef struct {
    double v;
    int i;
} ranked;

static int cmp_ranked(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    return (x->v > y->v) - (x->v < y->v);
}

/* Average ranks (1..n) of v into r. */
static int ranks(const double *v, int n, double *r) {
    ranked *s = malloc((size_t)n * sizeof *s);
    if (!s) return -1;
    for (int i = 0; i < n; i++) s[i] = (ranked){v[i], i};
    qsort(s, (size_t)n, sizeof *s, cmp_ranked);
    for (int i = 0; i < n;) {
        int j = i;
        while (j + 1 < n && s[j + 1].v == s[i].v) j++;
        for (int t = i; t <= j; t++) r[s[t].i] = 0.5 * (i + j) + 1;
        i = j + 1;
    }
    free(s);
    return 0;
}

double gopt_rt_spearman(const double *x, const double *y, int n) {
    if (n < 2) return NAN;
    double *rx = malloc((size_t)n * 2 * sizeof(double));
    if (!rx) return NAN;
    double *ry = rx + n, out = NAN;
    if (ranks(x, n, rx) == 0 && ranks(y, n, ry) == 0) {
        double mx = 0, my = 0, sxy = 0, sxx = 0, syy = 0;
        for (int i = 0; i < n; i++) {
            mx += rx[i] / n;
            my += ry[i] / n;
        }
        for (int i = 0; i < n; i++) {
            sxy += (rx[i] - mx) * (ry[i] - my);
            sxx += (rx[i] - mx) * (rx[i] - mx);
            syy += (ry[i] - my) * (ry[i] - my);
        }
        if (sxx > 0 && syy > 0) out = sxy / sqrt(sxx * syy);
    }
    free(rx);
    return out;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double gopt_rt_quantile(const double *v, int n, double q) {
    if (n <= 0) return NAN;
    double *s = malloc((size_t)n * sizeof(double));
    if (!s) return NAN;
    memcpy(s, v, (size_t)n * sizeof(double));
    qsort(s, (size_t)n, sizeof(double), cmp_d);
    double pos = (q < 0 ? 0 : q > 1 ? 1 : q) * (n - 1);
    int lo = (int)floor(pos), hi = lo + 1 < n ? lo + 1 : lo;
    double out = s[lo] + (pos - lo) * (s[hi] - s[lo]);
    free(s);
    return out;
}
