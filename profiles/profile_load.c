/* profile_load.c: read and validate a profile JSON file (docs/profiles.md).
 *
 * Order: parse with jansson (a syntax error is reported with its line,
 * column and the offending source line, which names the field), read the
 * table sets, then the devices (expanding "count"), then build the links: a
 * named topology fills every pair, explicit "links" entries override or add
 * pairs, and finally gopt_profile_check verifies that every ordered pair has
 * a link. Every message names the origin, the field and the bad value.
 * Unknown fields are rejected too (a typo must not silently become a
 * default), and every number must lie within the bounds of gopt_profile.h;
 * the device count is checked before the devices^2 link matrices are
 * allocated. Cost: O(devices^2 + table rows).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "profile_internal.h"

#define NAME_MAX_LEN 128

typedef struct {
    const char *origin;
    gopt_error *err;
} ctx;

static gopt_status unknown_keys(ctx *c, json_t *o, const char *where, const char *const *allowed) {
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) {
        int ok = 0;
        for (const char *const *a = allowed; *a; a++)
            if (strcmp(key, *a) == 0) ok = 1;
        if (!ok) return gopt_error_set(c->err, GOPT_EFORMAT, "%s: %s: unknown field '%s'", c->origin, where, key);
    }
    (void)v;
    return GOPT_OK;
}

/* A number field within [lo, hi] (docs/profiles.md, "Bounds"). required:
 * missing is an error. */
static gopt_status get_num(ctx *c, json_t *o, const char *where, const char *key, int required, double lo, double hi,
                           double *out, int *present) {
    json_t *v = json_object_get(o, key);
    if (present) *present = v != NULL;
    if (!v) {
        if (required)
            return gopt_error_set(c->err, GOPT_EFORMAT, "%s: %s: field '%s' is missing", c->origin, where, key);
        return GOPT_OK;
    }
    if (!json_is_number(v)) {
        char *txt = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        gopt_status st = gopt_error_set(c->err, GOPT_EFORMAT, "%s: %s: field '%s' = %s is not a number", c->origin,
                                        where, key, txt ? txt : "?");
        free(txt);
        return st;
    }
    double x = json_number_value(v);
    if (!(x >= lo && x <= hi))
        return gopt_error_set(c->err, GOPT_EINVAL, "%s: %s: field '%s' = %.17g must be in [%g, %g]", c->origin, where,
                              key, x, lo, hi);
    *out = x;
    return GOPT_OK;
}

#define RATE_BW GOPT_PROFILE_MIN_RATE, GOPT_PROFILE_MAX_BANDWIDTH
#define DELAY 0.0, GOPT_PROFILE_MAX_DELAY

static gopt_status get_str(ctx *c, json_t *o, const char *where, const char *key, int required, const char **out) {
    json_t *v = json_object_get(o, key);
    *out = NULL;
    if (!v) {
        if (required)
            return gopt_error_set(c->err, GOPT_EFORMAT, "%s: %s: field '%s' is missing", c->origin, where, key);
        return GOPT_OK;
    }
    if (!json_is_string(v))
        return gopt_error_set(c->err, GOPT_EFORMAT, "%s: %s: field '%s' is not a string", c->origin, where, key);
    *out = json_string_value(v);
    return GOPT_OK;
}

static gopt_status read_table(ctx *c, json_t *a, const char *set, gopt_table_kind k, gopt_tableset *ts) {
    const char *kn = gopt_table_kind_name(k);
    int w = gopt_table_kind_dim(k) + 1;
    if (!json_is_array(a))
        return gopt_error_set(c->err, GOPT_EFORMAT, "%s: tables.%s.%s: not an array of rows", c->origin, set, kn);
    size_t n = json_array_size(a);
    if (n == 0) return gopt_error_set(c->err, GOPT_EINVAL, "%s: tables.%s.%s: empty table", c->origin, set, kn);
    if (n > 10000000)
        return gopt_error_set(c->err, GOPT_EINVAL, "%s: tables.%s.%s: %zu rows is too many", c->origin, set, kn, n);
    ts->pts[k] = gopt_malloc(n * (size_t)w * sizeof(double), c->err);
    if (!ts->pts[k]) return GOPT_ENOMEM;
    ts->n[k] = (int32_t)n;
    for (size_t r = 0; r < n; r++) {
        json_t *row = json_array_get(a, r);
        if (!json_is_array(row) || json_array_size(row) != (size_t)w)
            return gopt_error_set(c->err, GOPT_EFORMAT, "%s: tables.%s.%s[%zu]: expected a row of %d numbers (%s)",
                                  c->origin, set, kn, r, w,
                                  gopt_table_kind_dim(k) == 3 ? "m, n, k, seconds"
                                  : k == GOPT_TABLE_CONV ? "flops, seconds"
                                                         : "bytes, seconds");
        for (int j = 0; j < w; j++) {
            json_t *v = json_array_get(row, (size_t)j);
            double x = json_is_number(v) ? json_number_value(v) : NAN, lo, hi;
            gopt_table_bounds(k, j, &lo, &hi);
            if (!json_is_number(v) || !(x >= lo && x <= hi))
                return gopt_error_set(c->err, json_is_number(v) ? GOPT_EINVAL : GOPT_EFORMAT,
                                      "%s: tables.%s.%s[%zu][%d] = %.17g must be a number in [%g, %g]", c->origin, set,
                                      kn, r, j, x, lo, hi);
            ts->pts[k][r * (size_t)w + (size_t)j] = x;
        }
    }
    return GOPT_OK;
}

static int find_set(const gopt_profile *p, const char *name) {
    for (int s = 0; s < p->nsets; s++)
        if (strcmp(p->sets[s].name, name) == 0) return s;
    return -1;
}

/* DGX-1 (V100) hybrid cube-mesh: NVLink bricks between GPU pairs (0 = none,
 * the pair goes through PCIe and the host). From the DGX-1V topology as
 * printed by nvidia-smi topo -m. */
static const int CUBE_MESH[8][8] = {
    {0, 1, 1, 2, 2, 0, 0, 0}, {1, 0, 2, 1, 0, 2, 0, 0}, {1, 2, 0, 2, 0, 0, 1, 0}, {2, 1, 2, 0, 0, 0, 0, 1},
    {2, 0, 0, 0, 0, 1, 1, 2}, {0, 2, 0, 0, 1, 0, 2, 1}, {0, 0, 1, 0, 1, 2, 0, 2}, {0, 0, 0, 1, 2, 1, 2, 0}};

static gopt_status read_topology(ctx *c, json_t *t, gopt_profile *p) {
    static const char *const allowed[] = {"kind", "bandwidth", "latency", "devices_per_switch", "cross_bandwidth",
                                          "cross_latency", "link_bandwidth", "fallback_bandwidth", "fallback_latency",
                                          "memory_bandwidth", "note", NULL};
    const char *w = "topology";
    if (!json_is_object(t)) return gopt_error_set(c->err, GOPT_EFORMAT, "%s: field 'topology' is not an object", c->origin);
    gopt_status st = unknown_keys(c, t, w, allowed);
    const char *kind = NULL;
    if (!st) st = get_str(c, t, w, "kind", 1, &kind);
    if (st) return st;
    p->topology = gopt_profile_strdup(kind, c->err);
    if (!p->topology) return GOPT_ENOMEM;
    p->topology_json = json_incref(t);
    int n = p->ndev;
    double bw = 0, lat = 0;
    if (strcmp(kind, "uniform") == 0 || strcmp(kind, "nvswitch") == 0 || strcmp(kind, "shared_memory") == 0) {
        if ((st = get_num(c, t, w, "bandwidth", 1, RATE_BW, &bw, NULL)) || (st = get_num(c, t, w, "latency", 1, DELAY, &lat, NULL)))
            return st;
        int has_bus = 0;
        if ((st = get_num(c, t, w, "memory_bandwidth", 0, RATE_BW, &p->bus_bw, &has_bus))) return st;
        if (has_bus && strcmp(kind, "shared_memory") != 0)
            return gopt_error_set(c->err, GOPT_EINVAL,
                                  "%s: topology: field 'memory_bandwidth' belongs to kind 'shared_memory', not '%s'",
                                  c->origin, kind);
        for (int i = 0; i < n * n; i++) {
            p->link_bw[i] = bw;
            p->link_lat[i] = lat;
        }
    } else if (strcmp(kind, "pcie_tree") == 0) {
        double per = 0, xbw = 0, xlat = 0;
        if ((st = get_num(c, t, w, "bandwidth", 1, RATE_BW, &bw, NULL)) || (st = get_num(c, t, w, "latency", 1, DELAY, &lat, NULL)) ||
            (st = get_num(c, t, w, "devices_per_switch", 1, 1, GOPT_PROFILE_MAX_DEVICES, &per, NULL)) ||
            (st = get_num(c, t, w, "cross_bandwidth", 1, RATE_BW, &xbw, NULL)) ||
            (st = get_num(c, t, w, "cross_latency", 1, DELAY, &xlat, NULL)))
            return st;
        if (per != floor(per))
            return gopt_error_set(c->err, GOPT_EINVAL, "%s: topology: field 'devices_per_switch' = %g is not an integer",
                                  c->origin, per);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                int same = (int)(i / per) == (int)(j / per);
                p->link_bw[i * n + j] = same ? bw : xbw;
                p->link_lat[i * n + j] = same ? lat : xlat;
            }
    } else if (strcmp(kind, "nvlink_cube_mesh") == 0) {
        double fbw = 0, flat = 0;
        if ((st = get_num(c, t, w, "link_bandwidth", 1, GOPT_PROFILE_MIN_RATE, GOPT_PROFILE_MAX_BANDWIDTH / 2, &bw, NULL)) ||
            (st = get_num(c, t, w, "latency", 1, DELAY, &lat, NULL)) ||
            (st = get_num(c, t, w, "fallback_bandwidth", 1, RATE_BW, &fbw, NULL)) ||
            (st = get_num(c, t, w, "fallback_latency", 1, DELAY, &flat, NULL)))
            return st;
        if (n != 8)
            return gopt_error_set(c->err, GOPT_EINVAL,
                                  "%s: topology: kind 'nvlink_cube_mesh' needs exactly 8 devices, the profile has %d",
                                  c->origin, n);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                int bricks = CUBE_MESH[i][j];
                p->link_bw[i * n + j] = bricks ? bricks * bw : fbw;
                p->link_lat[i * n + j] = bricks ? lat : flat;
            }
    } else {
        return gopt_error_set(c->err, GOPT_EINVAL,
                              "%s: topology: field 'kind' = '%s' is unknown (uniform, shared_memory, pcie_tree, "
                              "nvlink_cube_mesh, nvswitch)",
                              c->origin, kind);
    }
    return GOPT_OK;
}

static gopt_status read_links(ctx *c, json_t *links, gopt_profile *p) {
    static const char *const allowed[] = {"src", "dst", "bandwidth", "latency", "bidirectional", "tables", NULL};
    if (!json_is_array(links)) return gopt_error_set(c->err, GOPT_EFORMAT, "%s: field 'links' is not an array", c->origin);
    for (size_t i = 0; i < json_array_size(links); i++) {
        json_t *l = json_array_get(links, i);
        char w[64];
        snprintf(w, sizeof w, "links[%zu]", i);
        if (!json_is_object(l)) return gopt_error_set(c->err, GOPT_EFORMAT, "%s: %s is not an object", c->origin, w);
        const char *src, *dst, *tab;
        double bw = 0, lat = 0;
        gopt_status st = unknown_keys(c, l, w, allowed);
        if (!st) st = get_str(c, l, w, "src", 1, &src);
        if (!st) st = get_str(c, l, w, "dst", 1, &dst);
        if (!st) st = get_num(c, l, w, "bandwidth", 1, RATE_BW, &bw, NULL);
        if (!st) st = get_num(c, l, w, "latency", 1, DELAY, &lat, NULL);
        if (!st) st = get_str(c, l, w, "tables", 0, &tab);
        if (st) return st;
        int s = gopt_profile_find_device(p, src), t = gopt_profile_find_device(p, dst);
        if (s < 0) return gopt_error_set(c->err, GOPT_EINVAL, "%s: %s: field 'src' = '%s' is not a device", c->origin, w, src);
        if (t < 0) return gopt_error_set(c->err, GOPT_EINVAL, "%s: %s: field 'dst' = '%s' is not a device", c->origin, w, dst);
        if (s == t)
            return gopt_error_set(c->err, GOPT_EINVAL, "%s: %s: link from '%s' to itself", c->origin, w, src);
        int set = -1;
        if (tab) {
            set = find_set(p, tab);
            if (set < 0)
                return gopt_error_set(c->err, GOPT_EINVAL, "%s: %s: field 'tables' = '%s' is not a table set", c->origin,
                                      w, tab);
            if (!p->sets[set].pts[GOPT_TABLE_COPY])
                return gopt_error_set(c->err, GOPT_EINVAL, "%s: %s: table set '%s' has no 'copy' table", c->origin, w, tab);
        }
        json_t *bd = json_object_get(l, "bidirectional");
        if (bd && !json_is_boolean(bd))
            return gopt_error_set(c->err, GOPT_EFORMAT, "%s: %s: field 'bidirectional' is not true/false", c->origin, w);
        int both = bd ? json_is_true(bd) : 1;
        for (int pass = 0; pass < (both ? 2 : 1); pass++) {
            size_t k = pass ? (size_t)t * p->ndev + s : (size_t)s * p->ndev + t;
            p->link_bw[k] = bw;
            p->link_lat[k] = lat;
            p->link_set[k] = set;
        }
    }
    return GOPT_OK;
}

static gopt_status read_device(ctx *c, json_t *jd, const char *w, gopt_profile *p, int first, int count) {
    const char *name, *kind, *model, *tab;
    gopt_device proto = {0};
    gopt_status st;
    if ((st = get_str(c, jd, w, "name", 1, &name)) || (st = get_str(c, jd, w, "kind", 1, &kind)) ||
        (st = get_str(c, jd, w, "model", 1, &model)) || (st = get_str(c, jd, w, "tables", 0, &tab)) ||
        (st = get_num(c, jd, w, "memory_bytes", 1, 1, GOPT_PROFILE_MAX_MEMORY, &proto.memory, NULL)) ||
        (st = get_num(c, jd, w, "memory_bandwidth", 1, RATE_BW, &proto.bandwidth, NULL)) ||
        (st = get_num(c, jd, w, "launch_overhead", 1, DELAY, &proto.launch, NULL)))
        return st;
    if (!name[0] || strlen(name) > NAME_MAX_LEN)
        return gopt_error_set(c->err, GOPT_EINVAL, "%s: %s: field 'name' = '%s' must have 1 to %d characters", c->origin,
                              w, name, NAME_MAX_LEN);
    if (strcmp(kind, "cpu") == 0) proto.kind = GOPT_DEVICE_CPU;
    else if (strcmp(kind, "gpu") == 0) proto.kind = GOPT_DEVICE_GPU;
    else return gopt_error_set(c->err, GOPT_EINVAL, "%s: %s: field 'kind' = '%s' is not cpu or gpu", c->origin, w, kind);
    json_t *pk = json_object_get(jd, "peak_flops");
    if (!pk) return gopt_error_set(c->err, GOPT_EFORMAT, "%s: %s: field 'peak_flops' is missing", c->origin, w);
    if (!json_is_object(pk))
        return gopt_error_set(c->err, GOPT_EFORMAT, "%s: %s: field 'peak_flops' is not an object of dtype: FLOP/s",
                              c->origin, w);
    const char *key;
    json_t *v;
    char pw[96];
    snprintf(pw, sizeof pw, "%s.peak_flops", w);
    json_object_foreach(pk, key, v) {
        int t = gopt_dtype_parse(key);
        if (t < 0) return gopt_error_set(c->err, GOPT_EINVAL, "%s: %s: unknown dtype '%s'", c->origin, pw, key);
        if ((st = get_num(c, pk, pw, key, 1, GOPT_PROFILE_MIN_RATE, GOPT_PROFILE_MAX_FLOPS_RATE, &proto.peak[t], NULL))) return st;
    }
    if (proto.peak[GOPT_DTYPE_FP32] <= 0)
        return gopt_error_set(c->err, GOPT_EFORMAT, "%s: %s: field 'fp32' is missing", c->origin, pw);
    proto.tableset = -1;
    if (tab) {
        proto.tableset = find_set(p, tab);
        if (proto.tableset < 0)
            return gopt_error_set(c->err, GOPT_EINVAL, "%s: %s: field 'tables' = '%s' is not a table set", c->origin, w,
                                  tab);
    }
    for (int i = 0; i < count; i++) {
        gopt_device *d = &p->dev[first + i];
        *d = proto;
        char nm[NAME_MAX_LEN + 16];
        if (count > 1 || json_object_get(jd, "count")) snprintf(nm, sizeof nm, "%s%d", name, i);
        else snprintf(nm, sizeof nm, "%s", name);
        if (gopt_profile_find_device(p, nm) >= 0)
            return gopt_error_set(c->err, GOPT_EINVAL, "%s: %s: device name '%s' is used twice", c->origin, w, nm);
        d->name = gopt_profile_strdup(nm, c->err);
        d->model = gopt_profile_strdup(model, c->err);
        if (!d->name || !d->model) return GOPT_ENOMEM;
    }
    return GOPT_OK;
}

/* A non-empty string field (efficiency provenance). */
static gopt_status get_text(ctx *c, json_t *o, const char *where, const char *key) {
    const char *s = NULL;
    gopt_status st = get_str(c, o, where, key, 1, &s);
    if (!st && !s[0]) st = gopt_error_set(c->err, GOPT_EINVAL, "%s: %s: field '%s' is empty", c->origin, where, key);
    return st;
}

/* "efficiency.fresh_output": rows [bytes, seconds], bytes strictly increasing. */
static gopt_status read_fresh_output(ctx *c, json_t *r, gopt_profile *p) {
    const char *w = "efficiency.fresh_output";
    size_t n = json_is_array(r) ? json_array_size(r) : 0;
    if (n == 0 || n > GOPT_PROFILE_MAX_FRESH_ROWS)
        return gopt_error_set(c->err, GOPT_EINVAL, "%s: %s must be an array of 1 to %d rows [bytes, seconds]",
                              c->origin, w, GOPT_PROFILE_MAX_FRESH_ROWS);
    for (size_t i = 0; i < n; i++) {
        json_t *row = json_array_get(r, i);
        json_t *x = json_array_get(row, 0), *y = json_array_get(row, 1);
        if (!json_is_array(row) || json_array_size(row) != 2 || !json_is_number(x) || !json_is_number(y))
            return gopt_error_set(c->err, GOPT_EFORMAT, "%s: %s[%zu] is not a row [bytes, seconds]", c->origin, w, i);
        double b = json_number_value(x), t = json_number_value(y);
        if (!(b >= 1 && b <= GOPT_PROFILE_MAX_TABLE_BYTES))
            return gopt_error_set(c->err, GOPT_EINVAL, "%s: %s[%zu]: bytes %.17g must be in [1, %g]", c->origin, w, i, b,
                                  GOPT_PROFILE_MAX_TABLE_BYTES);
        if (i > 0 && !(b > p->fresh_b[i - 1]))
            return gopt_error_set(c->err, GOPT_EINVAL, "%s: %s[%zu]: bytes %.17g must exceed the previous row's %.17g",
                                  c->origin, w, i, b, p->fresh_b[i - 1]);
        if (!(t >= 0 && t <= GOPT_PROFILE_MAX_TABLE_TIME))
            return gopt_error_set(c->err, GOPT_EINVAL, "%s: %s[%zu]: seconds %.17g must be in [0, %g]", c->origin, w, i,
                                  t, GOPT_PROFILE_MAX_TABLE_TIME);
        p->fresh_b[i] = b;
        p->fresh_s[i] = t;
    }
    p->nfresh = (int)n;
    return GOPT_OK;
}

/* "efficiency": per-op-kind factors fitted from framework runs, with their provenance. */
static gopt_status read_efficiency(ctx *c, json_t *e, gopt_profile *p) {
    static const char *const allowed[] = {"framework", "models", "date", "command", "op_overhead", "factors", "notes",
                                          "fresh_output", "dispatch", NULL};
    const char *w = "efficiency";
    if (!json_is_object(e)) return gopt_error_set(c->err, GOPT_EFORMAT, "%s: field 'efficiency' is not an object", c->origin);
    gopt_status st = unknown_keys(c, e, w, allowed);
    if (!st) st = get_text(c, e, w, "framework");
    if (!st) st = get_text(c, e, w, "date");
    if (!st) st = get_text(c, e, w, "command");
    if (!st) st = get_num(c, e, w, "op_overhead", 0, DELAY, &p->op_overhead, NULL);
    if (!st && json_object_get(e, "fresh_output")) st = read_fresh_output(c, json_object_get(e, "fresh_output"), p);
    if (st) return st;
    json_t *dsp = json_object_get(e, "dispatch");
    if (dsp) {
        const char *dv = json_is_string(dsp) ? json_string_value(dsp) : NULL;
        if (!dv || (strcmp(dv, "serial") && strcmp(dv, "overlapped")))
            return gopt_error_set(c->err, GOPT_EINVAL, "%s: efficiency.dispatch must be \"serial\" or \"overlapped\"",
                                  c->origin);
        p->dispatch_overlapped = !strcmp(dv, "overlapped");
    }
    json_t *m = json_object_get(e, "models");
    if (!m) return gopt_error_set(c->err, GOPT_EFORMAT, "%s: efficiency: field 'models' is missing", c->origin);
    if (!json_is_array(m) || json_array_size(m) == 0)
        return gopt_error_set(c->err, GOPT_EINVAL, "%s: efficiency: field 'models' must be a non-empty array of names",
                              c->origin);
    for (size_t i = 0; i < json_array_size(m); i++) {
        json_t *x = json_array_get(m, i);
        if (!json_is_string(x) || !json_string_value(x)[0])
            return gopt_error_set(c->err, GOPT_EINVAL, "%s: efficiency.models[%zu] is not a non-empty string", c->origin, i);
    }
    json_t *f = json_object_get(e, "factors");
    if (!f) return gopt_error_set(c->err, GOPT_EFORMAT, "%s: efficiency: field 'factors' is missing", c->origin);
    if (!json_is_object(f) || json_object_size(f) == 0)
        return gopt_error_set(c->err, GOPT_EINVAL, "%s: efficiency: field 'factors' must be a non-empty object of kind: factor",
                              c->origin);
    const char *key;
    json_t *v;
    int given[GOPT_OP_KIND_COUNT] = {0};
    json_object_foreach(f, key, v) {
        int k = 0;
        while (k < GOPT_OP_KIND_COUNT && strcmp(key, gopt_op_kind_name((gopt_op_kind)k)) != 0) k++;
        if (k == GOPT_OP_KIND_COUNT)
            return gopt_error_set(c->err, GOPT_EINVAL,
                                  "%s: efficiency.factors: unknown op kind '%s' (gemm, conv, depthwise_conv, "
                                  "elementwise, reduction, data_movement, other, normalization, optimizer)",
                                  c->origin, key);
        if ((st = get_num(c, f, "efficiency.factors", key, 1, GOPT_PROFILE_MIN_EFFICIENCY, GOPT_PROFILE_MAX_EFFICIENCY,
                          &p->eff[k], NULL)))
            return st;
        given[k] = 1;
    }
    (void)v;
    /* the finer kinds default to the kinds they split (profiles fitted before they existed) */
    if (!given[GOPT_OP_KIND_NORMALIZATION]) p->eff[GOPT_OP_KIND_NORMALIZATION] = p->eff[GOPT_OP_KIND_REDUCTION];
    if (!given[GOPT_OP_KIND_OPTIMIZER]) p->eff[GOPT_OP_KIND_OPTIMIZER] = p->eff[GOPT_OP_KIND_ELEMENTWISE];
    p->efficiency_json = json_incref(e);
    return GOPT_OK;
}

static gopt_status build(ctx *c, json_t *root, gopt_profile **out) {
    static const char *const allowed[] = {"format", "version", "name", "description", "provenance", "devices",
                                          "topology", "links", "tables", "efficiency", NULL};
    static const char *const prov_allowed[] = {"source", "machine", "date", "command", "reference", "notes", NULL};
    static const char *const set_allowed[] = {"gemm", "conv", "elementwise", "reduction", "conv_gemm", "copy", NULL};
    static const char *const dev_allowed[] = {"name", "count", "kind", "model", "memory_bytes", "peak_flops",
                                              "memory_bandwidth", "launch_overhead", "tables", "notes", NULL};
    gopt_profile *p = NULL;
    gopt_status st;
    const char *fmt, *name, *desc, *src, *s;
    if (!json_is_object(root)) return gopt_error_set(c->err, GOPT_EFORMAT, "%s: not a JSON object", c->origin);
    if ((st = unknown_keys(c, root, "profile", allowed)) || (st = get_str(c, root, "profile", "format", 1, &fmt)))
        return st;
    if (strcmp(fmt, "gopt-profile") != 0)
        return gopt_error_set(c->err, GOPT_EFORMAT, "%s: field 'format' = '%s' is not 'gopt-profile'", c->origin, fmt);
    double ver = 0;
    if ((st = get_num(c, root, "profile", "version", 1, 0, 1e9, &ver, NULL))) return st;
    if (ver != 1)
        return gopt_error_set(c->err, GOPT_EUNSUP, "%s: field 'version' = %g is not supported (1)", c->origin, ver);
    if ((st = get_str(c, root, "profile", "name", 1, &name)) ||
        (st = get_str(c, root, "profile", "description", 0, &desc)))
        return st;
    json_t *prov = json_object_get(root, "provenance");
    if (!prov) return gopt_error_set(c->err, GOPT_EFORMAT, "%s: field 'provenance' is missing", c->origin);
    if (!json_is_object(prov)) return gopt_error_set(c->err, GOPT_EFORMAT, "%s: field 'provenance' is not an object", c->origin);
    if ((st = unknown_keys(c, prov, "provenance", prov_allowed)) || (st = get_str(c, prov, "provenance", "source", 1, &src)))
        return st;
    int measured = strcmp(src, "measured") == 0;
    if (!measured && strcmp(src, "datasheet") != 0)
        return gopt_error_set(c->err, GOPT_EINVAL, "%s: provenance: field 'source' = '%s' is not datasheet or measured",
                              c->origin, src);
    json_t *devs = json_object_get(root, "devices");
    if (!devs) return gopt_error_set(c->err, GOPT_EFORMAT, "%s: field 'devices' is missing", c->origin);
    if (!json_is_array(devs) || json_array_size(devs) == 0)
        return gopt_error_set(c->err, GOPT_EINVAL, "%s: field 'devices' must be a non-empty array", c->origin);
    int ndev = 0;
    for (size_t i = 0; i < json_array_size(devs); i++) {
        json_t *jd = json_array_get(devs, i);
        char w[48];
        snprintf(w, sizeof w, "devices[%zu]", i);
        if (!json_is_object(jd)) return gopt_error_set(c->err, GOPT_EFORMAT, "%s: %s is not an object", c->origin, w);
        if ((st = unknown_keys(c, jd, w, dev_allowed))) return st;
        double cnt = 1;
        int has = 0;
        if ((st = get_num(c, jd, w, "count", 0, 1, GOPT_PROFILE_MAX_DEVICES, &cnt, &has))) return st;
        if (cnt != floor(cnt))
            return gopt_error_set(c->err, GOPT_EINVAL, "%s: %s: field 'count' = %g must be an integer 1..%d", c->origin,
                                  w, cnt, GOPT_PROFILE_MAX_DEVICES);
        ndev += (int)cnt;
        /* before anything is allocated: the link matrices take devices^2 */
        if (ndev > GOPT_PROFILE_MAX_DEVICES)
            return gopt_error_set(c->err, GOPT_EINVAL, "%s: %s: %d devices so far: a profile has at most %d", c->origin, w,
                                  ndev, GOPT_PROFILE_MAX_DEVICES);
    }
    json_t *sets = json_object_get(root, "tables");
    if (sets && !json_is_object(sets))
        return gopt_error_set(c->err, GOPT_EFORMAT, "%s: field 'tables' is not an object of table sets", c->origin);
    int nsets = sets ? (int)json_object_size(sets) : 0;
    if ((st = gopt_profile_alloc(ndev, nsets, &p, c->err))) return st;
    p->name = gopt_profile_strdup(name, c->err);
    p->description = gopt_profile_strdup(desc, c->err);
    p->source = gopt_profile_strdup(src, c->err);
    if (!p->name || !p->description || !p->source) goto nomem;
    const char *pf[] = {"machine", "date", "command", "reference"};
    char **pd[] = {&p->machine, &p->date, &p->command, &p->reference};
    for (int i = 0; i < 4; i++) {
        if ((st = get_str(c, prov, "provenance", pf[i], measured && i < 3, &s))) goto fail;
        if (!(*pd[i] = gopt_profile_strdup(s, c->err))) goto nomem;
    }
    if (!measured && !p->reference[0]) {
        st = gopt_error_set(c->err, GOPT_EFORMAT, "%s: provenance: field 'reference' is missing (datasheet profiles cite their source)",
                            c->origin);
        goto fail;
    }
    if (sets) {
        const char *key;
        json_t *v;
        int si = 0;
        json_object_foreach(sets, key, v) {
            char w[160];
            snprintf(w, sizeof w, "tables.%s", key);
            gopt_tableset *ts = &p->sets[si++];
            if (!(ts->name = gopt_profile_strdup(key, c->err))) goto nomem;
            if (!json_is_object(v)) {
                st = gopt_error_set(c->err, GOPT_EFORMAT, "%s: %s is not an object", c->origin, w);
                goto fail;
            }
            if ((st = unknown_keys(c, v, w, set_allowed))) goto fail;
            if (json_object_size(v) == 0) {
                st = gopt_error_set(c->err, GOPT_EINVAL, "%s: %s: empty table set", c->origin, w);
                goto fail;
            }
            for (int k = 0; k < GOPT_TABLE_KIND_COUNT; k++) {
                json_t *a = json_object_get(v, gopt_table_kind_name((gopt_table_kind)k));
                if (a && (st = read_table(c, a, key, (gopt_table_kind)k, ts))) goto fail;
            }
        }
    }
    int first = 0;
    for (size_t i = 0; i < json_array_size(devs); i++) {
        json_t *jd = json_array_get(devs, i);
        char w[48];
        snprintf(w, sizeof w, "devices[%zu]", i);
        double cnt = 1;
        get_num(c, jd, w, "count", 0, 1, GOPT_PROFILE_MAX_DEVICES, &cnt, NULL);
        if ((st = read_device(c, jd, w, p, first, (int)cnt))) goto fail;
        first += (int)cnt;
    }
    json_t *topo = json_object_get(root, "topology");
    json_t *links = json_object_get(root, "links");
    if (ndev > 1 && !topo && !links) {
        st = gopt_error_set(c->err, GOPT_EFORMAT, "%s: fields 'topology' and 'links' are both missing (%d devices)",
                            c->origin, ndev);
        goto fail;
    }
    if (topo && (st = read_topology(c, topo, p))) goto fail;
    if (links && (st = read_links(c, links, p))) goto fail;
    json_t *eff = json_object_get(root, "efficiency");
    if (eff && (st = read_efficiency(c, eff, p))) goto fail;
    if ((st = gopt_profile_check(p, c->origin, c->err))) goto fail;
    *out = p;
    return GOPT_OK;
nomem:
    st = GOPT_ENOMEM;
fail:
    gopt_profile_free(p);
    return st;
}

gopt_status gopt_profile_parse(const char *text, size_t len, const char *origin, gopt_profile **out, gopt_error *err) {
    *out = NULL;
    gopt_status nst = gopt_json_check_numbers(text, len, origin, err);
    if (nst) return nst;
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        /* Quote the source line: it names the field whose value is bad. */
        const char *l = text;
        for (int i = 1; i < je.line && l; i++) {
            l = memchr(l, '\n', len - (size_t)(l - text));
            if (l) l++;
        }
        int ln = 0;
        if (l)
            while (l + ln < text + len && l[ln] != '\n' && ln < 160) ln++;
        while (l && ln > 0 && (*l == ' ' || *l == '\t')) {
            l++;
            ln--;
        }
        return gopt_error_set(err, GOPT_EFORMAT, "%s:%d:%d: %s (in: %.*s)", origin, je.line, je.column, je.text,
                              l ? ln : 0, l ? l : "");
    }
    ctx c = {origin, err};
    gopt_status st = build(&c, root, out);
    json_decref(root);
    return st;
}

gopt_status gopt_profile_load(const char *path, gopt_profile **out, gopt_error *err) {
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    gopt_status st = gopt_file_read_all(path, &text, &len, err);
    if (st) return st;
    st = gopt_profile_parse(text, len, path, out, err);
    free(text);
    return st;
}
