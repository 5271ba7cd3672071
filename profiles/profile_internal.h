/* profile_internal.h: the in-memory layout of a gopt_profile (profiles/ only).
 *
 * Everything is owned by the profile and freed by gopt_profile_free. Link
 * arrays are dense (ndev x ndev, row = src); the diagonal is unused.
 * Table sets are shared by name: devices and links refer to one by index.
 */
#ifndef GOPT_PROFILE_INTERNAL_H
#define GOPT_PROFILE_INTERNAL_H

#include <jansson.h>

#include "gopt_profile.h"

typedef struct {
    char *name;
    double *pts[GOPT_TABLE_KIND_COUNT]; /* (n[k], dim+1) or NULL */
    int32_t n[GOPT_TABLE_KIND_COUNT];
} gopt_tableset;

typedef struct {
    char *name, *model;
    gopt_device_kind kind;
    double memory, bandwidth, launch;
    double peak[GOPT_DTYPE_COUNT]; /* 0 = not given */
    int tableset;                  /* -1 none */
} gopt_device;

struct gopt_profile {
    char *name, *description;
    char *source, *machine, *date, *command, *reference;
    char *topology;
    json_t *topology_json; /* the topology object as read, kept for writing back (may be NULL) */
    int ndev;
    gopt_device *dev;
    int nsets;
    gopt_tableset *sets;
    double *link_bw, *link_lat; /* (ndev, ndev) */
    double bus_bw;              /* shared_memory topology: the devices' memory traffic at once, bytes/s (0: not given) */
    int32_t *link_set;          /* (ndev, ndev) tableset with a COPY table, or -1 */
    json_t *efficiency_json;    /* the efficiency object as read, kept for writing back (NULL: none) */
    double eff[GOPT_OP_KIND_COUNT]; /* factors, 1 where not given */
    double op_overhead;         /* seconds per op, 0 when not given */
    int dispatch_overlapped;    /* efficiency.dispatch = "overlapped" (1) or "serial" (0, the default) */
    int nfresh;                 /* efficiency.fresh_output rows (0: none) */
    double fresh_b[GOPT_PROFILE_MAX_FRESH_ROWS], fresh_s[GOPT_PROFILE_MAX_FRESH_ROWS]; /* bytes, seconds */
};

/* Coordinates per row of a table kind (3 for GEMM, else 1). */
int gopt_table_kind_dim(gopt_table_kind k);
/* The bounds [lo, hi] of column j of a table of kind k (coordinates, then
 * seconds in the last column). */
void gopt_table_bounds(gopt_table_kind k, int j, double *lo, double *hi);
/* Allocate an empty profile with ndev devices and nsets table sets; links
 * zeroed, link_set -1, tablesets -1. Strings are NULL (accessors give "").
 * More than GOPT_PROFILE_MAX_DEVICES devices is GOPT_EINVAL. */
gopt_status gopt_profile_alloc(int ndev, int nsets, gopt_profile **out, gopt_error *err);
/* strdup that sets err on failure; NULL in gives "" copied. */
char *gopt_profile_strdup(const char *s, gopt_error *err);
/* Check the invariants listed in gopt_profile.h; `origin` names the profile. */
gopt_status gopt_profile_check(const gopt_profile *p, const char *origin, gopt_error *err);

#endif
