/* cost_internal.h: interpolation tables of the cost model (costmodel/ only). */
#ifndef GOPT_COST_INTERNAL_H
#define GOPT_COST_INTERNAL_H

#include <gsl/gsl_interp.h>

#include "gopt_cost.h"

/* Time vs one coordinate, interpolated in log-log space. */
typedef struct {
    int32_t n;          /* distinct x values */
    double *lx, *ly;    /* (n) log x ascending, log seconds */
    gsl_interp *spline; /* NULL when n < 2 */
} gopt_interp1;

/* Time vs (m, n, k), scattered points, local regression in log space. */
typedef struct {
    int32_t n;
    double *lx;            /* (n, 3) log m, log n, log k */
    double *ly;            /* (n) log seconds */
    double lo[3], hi[3];   /* bounding box in log space */
} gopt_interp3;

/* rows: (n, 2) x, seconds, all > 0. */
gopt_status gopt_interp1_init(gopt_interp1 *t, const double *rows, int32_t n, gopt_error *err);
void gopt_interp1_destroy(gopt_interp1 *t);
double gopt_interp1_eval(const gopt_interp1 *t, double x); /* -1 when empty */
/* rows: (n, 4) m, n, k, seconds, all > 0. */
gopt_status gopt_interp3_init(gopt_interp3 *t, const double *rows, int32_t n, gopt_error *err);
void gopt_interp3_destroy(gopt_interp3 *t);
double gopt_interp3_eval(const gopt_interp3 *t, const double *mnk); /* -1 when empty */

#endif
