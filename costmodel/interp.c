/* interp.c: interpolation in measured cost tables, in log space.
 *
 * One-dimensional tables (time vs bytes or FLOPs): rows are sorted by x,
 * rows with equal x are merged (geometric mean of their times), a running
 * median of three removes single outliers, and log t is interpolated against log x with GSL's Steffen spline (monotone
 * between points, no overshoot; linear for two points). Below the smallest
 * measured x the time is that of the smallest (a latency floor); above the
 * largest it grows linearly with x (bandwidth-bound).
 *
 * GEMM tables (time vs m, n, k; scattered points, not a grid): locally
 * weighted linear regression (LOESS, tricube weights over the K nearest
 * points in log(m, n, k)) of log t on log m, log n, log k, evaluated at the
 * query. A query outside the measured box is projected onto it and the time
 * is scaled by the ratio of the dims above the box (compute grows linearly
 * with each dim) and floored below it. Cost: O(points) per GEMM lookup, O(log
 * points) per one-dimensional lookup. Tables are read-only once built.
 */
#include <gsl/gsl_errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cost_internal.h"

typedef struct {
    double x, y;
} xy;

static int cmp_xy(const void *a, const void *b) {
    double u = ((const xy *)a)->x, v = ((const xy *)b)->x;
    return (u > v) - (u < v);
}

gopt_status gopt_interp1_init(gopt_interp1 *t, const double *rows, int32_t n, gopt_error *err) {
    memset(t, 0, sizeof *t);
    xy *v = gopt_malloc((size_t)n * sizeof *v, err);
    if (!v) return GOPT_ENOMEM;
    for (int32_t i = 0; i < n; i++) {
        v[i].x = log(rows[2 * i]);
        v[i].y = log(rows[2 * i + 1]);
    }
    qsort(v, (size_t)n, sizeof *v, cmp_xy);
    int32_t m = 0;
    for (int32_t i = 0; i < n;) {
        int32_t j = i;
        double s = 0;
        while (j < n && v[j].x == v[i].x) s += v[j++].y;
        v[m].x = v[i].x;
        v[m].y = s / (double)(j - i);
        m++;
        i = j;
    }
    t->n = m;
    t->lx = gopt_malloc((size_t)m * sizeof(double), err);
    t->ly = gopt_malloc((size_t)m * sizeof(double), err);
    if (!t->lx || !t->ly) {
        free(v);
        gopt_interp1_destroy(t);
        return GOPT_ENOMEM;
    }
    for (int32_t i = 0; i < m; i++) {
        t->lx[i] = v[i].x;
        t->ly[i] = v[i].y;
    }
    free(v);
    /* A running median of three (in log space) drops single outliers, the
     * usual noise of a shared machine, and keeps real steps (cache levels). */
    if (m >= 5) {
        double prev = t->ly[0];
        for (int32_t i = 1; i + 1 < m; i++) {
            double a = prev, b = t->ly[i], c = t->ly[i + 1];
            double med = a > b ? (b > c ? b : (a > c ? c : a)) : (a > c ? a : (b > c ? c : b));
            prev = t->ly[i];
            t->ly[i] = med;
        }
    }
    if (m >= 2) {
        t->spline = gsl_interp_alloc(m >= 3 ? gsl_interp_steffen : gsl_interp_linear, (size_t)m);
        if (!t->spline || gsl_interp_init(t->spline, t->lx, t->ly, (size_t)m) != GSL_SUCCESS) {
            gopt_interp1_destroy(t);
            return gopt_error_set(err, GOPT_EINTERNAL, "interpolation of a %d-point table failed", (int)m);
        }
    }
    return GOPT_OK;
}

void gopt_interp1_destroy(gopt_interp1 *t) {
    if (t->spline) gsl_interp_free(t->spline);
    free(t->lx);
    free(t->ly);
    memset(t, 0, sizeof *t);
}

double gopt_interp1_eval(const gopt_interp1 *t, double x) {
    if (t->n <= 0) return -1;
    double lx = log(x > 0 ? x : 1e-300);
    if (lx <= t->lx[0]) return exp(t->ly[0]);
    if (lx >= t->lx[t->n - 1]) return exp(t->ly[t->n - 1] + (lx - t->lx[t->n - 1]));
    double y = 0;
    if (gsl_interp_eval_e(t->spline, t->lx, t->ly, lx, NULL, &y) != GSL_SUCCESS) return exp(t->ly[0]);
    return exp(y);
}

/* ---- GEMM: LOESS in log(m, n, k) -------------------------------------------------- */
gopt_status gopt_interp3_init(gopt_interp3 *t, const double *rows, int32_t n, gopt_error *err) {
    memset(t, 0, sizeof *t);
    t->n = n;
    t->lx = gopt_malloc((size_t)n * 3 * sizeof(double), err);
    t->ly = gopt_malloc((size_t)n * sizeof(double), err);
    if (!t->lx || !t->ly) {
        gopt_interp3_destroy(t);
        return GOPT_ENOMEM;
    }
    for (int c = 0; c < 3; c++) {
        t->lo[c] = INFINITY;
        t->hi[c] = -INFINITY;
    }
    for (int32_t i = 0; i < n; i++) {
        for (int c = 0; c < 3; c++) {
            double l = log(rows[4 * i + c]);
            t->lx[3 * i + c] = l;
            if (l < t->lo[c]) t->lo[c] = l;
            if (l > t->hi[c]) t->hi[c] = l;
        }
        t->ly[i] = log(rows[4 * i + 3]);
    }
    return GOPT_OK;
}

void gopt_interp3_destroy(gopt_interp3 *t) {
    free(t->lx);
    free(t->ly);
    memset(t, 0, sizeof *t);
}

#define LOESS_K 16

/* Insert (d, i) into the sorted list of the K nearest. */
static void knn_insert(double *bd, int32_t *bi, int *cnt, int k, double d, int32_t i) {
    if (*cnt == k && d >= bd[k - 1]) return;
    int j = *cnt < k ? (*cnt)++ : k - 1;
    while (j > 0 && bd[j - 1] > d) {
        bd[j] = bd[j - 1];
        bi[j] = bi[j - 1];
        j--;
    }
    bd[j] = d;
    bi[j] = i;
}

/* Solve the 4x4 symmetric positive definite system a x = r (Cholesky, by
 * hand: no allocation, no global GSL error handler). 0 when not SPD. */
static int solve_spd4(const double *a, const double *r, double *x) {
    double l[16] = {0}, z[4];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j <= i; j++) {
            double s = a[4 * i + j];
            for (int k = 0; k < j; k++) s -= l[4 * i + k] * l[4 * j + k];
            if (i == j) {
                if (!(s > 1e-300)) return 0;
                l[4 * i + i] = sqrt(s);
            } else {
                l[4 * i + j] = s / l[4 * j + j];
            }
        }
    for (int i = 0; i < 4; i++) {
        double s = r[i];
        for (int k = 0; k < i; k++) s -= l[4 * i + k] * z[k];
        z[i] = s / l[4 * i + i];
    }
    for (int i = 3; i >= 0; i--) {
        double s = z[i];
        for (int k = i + 1; k < 4; k++) s -= l[4 * k + i] * x[k];
        x[i] = s / l[4 * i + i];
    }
    return 1;
}

double gopt_interp3_eval(const gopt_interp3 *t, const double *x) {
    if (t->n <= 0) return -1;
    double q[3], extra = 0;
    for (int c = 0; c < 3; c++) {
        double l = log(x[c] > 0 ? x[c] : 1e-300);
        if (l > t->hi[c]) {
            extra += l - t->hi[c];
            l = t->hi[c];
        } else if (l < t->lo[c]) {
            l = t->lo[c];
        }
        q[c] = l;
    }
    double bd[LOESS_K];
    int32_t bi[LOESS_K];
    int cnt = 0, k = t->n < LOESS_K ? (int)t->n : LOESS_K;
    for (int32_t i = 0; i < t->n; i++) {
        const double *p = t->lx + 3 * i;
        double d = (p[0] - q[0]) * (p[0] - q[0]) + (p[1] - q[1]) * (p[1] - q[1]) + (p[2] - q[2]) * (p[2] - q[2]);
        knn_insert(bd, bi, &cnt, k, d, i);
    }
    double ymin = INFINITY, ymax = -INFINITY;
    for (int j = 0; j < cnt; j++) {
        if (t->ly[bi[j]] < ymin) ymin = t->ly[bi[j]];
        if (t->ly[bi[j]] > ymax) ymax = t->ly[bi[j]];
    }
    if (bd[0] < 1e-18) return exp(t->ly[bi[0]] + extra); /* measured exactly here */
    /* Tricube weights over the neighbourhood radius. */
    double dmax = sqrt(bd[cnt - 1]) * 1.2, w[LOESS_K], sw = 0, swy = 0;
    for (int j = 0; j < cnt; j++) {
        double r = sqrt(bd[j]) / dmax, u = 1 - r * r * r;
        w[j] = u * u * u + 1e-6;
        sw += w[j];
        swy += w[j] * t->ly[bi[j]];
    }
    double y = swy / sw; /* weighted mean: the fallback */
    if (cnt >= 8) {
        /* Normal equations of the weighted fit y ~ b0 + b . (p - q), with a
         * small ridge on the slopes towards 1 (time proportional to each dim). */
        double a[16] = {0}, r[4] = {0};
        const double ridge = 0.05 * sw;
        for (int j = 0; j < cnt; j++) {
            const double *p = t->lx + 3 * bi[j];
            double f[4] = {1, p[0] - q[0], p[1] - q[1], p[2] - q[2]};
            for (int u = 0; u < 4; u++) {
                r[u] += w[j] * f[u] * t->ly[bi[j]];
                for (int v = 0; v < 4; v++) a[4 * u + v] += w[j] * f[u] * f[v];
            }
        }
        for (int u = 1; u < 4; u++) {
            a[5 * u] += ridge;
            r[u] += ridge * 1.0;
        }
        double sol[4];
        if (solve_spd4(a, r, sol) && isfinite(sol[0])) y = sol[0];
        /* Never stray far outside what the neighbours measured. */
        const double slack = log(2.0);
        if (y < ymin - slack) y = ymin - slack;
        if (y > ymax + slack) y = ymax + slack;
    }
    return exp(y + extra);
}
