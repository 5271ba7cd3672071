/* profile.c: the gopt_profile object: allocation, accessors, invariants and
 * writing JSON back (loader in profile_load.c).
 *
 * Accessors are O(1) and assert their device index (a bad index is a caller
 * bug). The writer emits every link explicitly so that a written profile
 * reads back equal whatever topology it was built from; the topology name
 * is kept for information.
 */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "profile_internal.h"

static const char *TABLE_NAMES[GOPT_TABLE_KIND_COUNT] = {"gemm", "conv", "elementwise", "reduction", "conv_gemm",
                                                              "copy"};
static const char *DTYPE_NAMES[GOPT_DTYPE_COUNT] = {"fp32", "fp16", "bf16", "tf32", "fp64", "int8"};
static const char *KIND_NAMES[GOPT_OP_KIND_COUNT] = {"gemm",          "conv",     "depthwise_conv",
                                                     "elementwise",   "reduction", "data_movement",
                                                     "other",         "normalization", "optimizer"};

const char *gopt_op_kind_name(gopt_op_kind k) { return (k >= 0 && k < GOPT_OP_KIND_COUNT) ? KIND_NAMES[k] : NULL; }

const char *gopt_table_kind_name(gopt_table_kind k) {
    return (k >= 0 && k < GOPT_TABLE_KIND_COUNT) ? TABLE_NAMES[k] : NULL;
}
int gopt_table_kind_dim(gopt_table_kind k) { return k == GOPT_TABLE_GEMM || k == GOPT_TABLE_CONV_GEMM ? 3 : 1; }
const char *gopt_dtype_name(gopt_dtype t) { return (t >= 0 && t < GOPT_DTYPE_COUNT) ? DTYPE_NAMES[t] : NULL; }
const char *gopt_device_kind_name(gopt_device_kind k) {
    return k == GOPT_DEVICE_CPU ? "cpu" : k == GOPT_DEVICE_GPU ? "gpu" : NULL;
}

int gopt_dtype_parse(const char *s) {
    static const struct {
        const char *name;
        gopt_dtype t;
    } alias[] = {{"fp32", GOPT_DTYPE_FP32},    {"float32", GOPT_DTYPE_FP32}, {"f32", GOPT_DTYPE_FP32},
                 {"float", GOPT_DTYPE_FP32},   {"fp16", GOPT_DTYPE_FP16},    {"float16", GOPT_DTYPE_FP16},
                 {"f16", GOPT_DTYPE_FP16},     {"half", GOPT_DTYPE_FP16},    {"bf16", GOPT_DTYPE_BF16},
                 {"bfloat16", GOPT_DTYPE_BF16}, {"tf32", GOPT_DTYPE_TF32},   {"fp64", GOPT_DTYPE_FP64},
                 {"float64", GOPT_DTYPE_FP64}, {"f64", GOPT_DTYPE_FP64},     {"double", GOPT_DTYPE_FP64},
                 {"int8", GOPT_DTYPE_INT8},    {"i8", GOPT_DTYPE_INT8}};
    if (!s) return -1;
    for (size_t i = 0; i < sizeof alias / sizeof alias[0]; i++)
        if (strcmp(s, alias[i].name) == 0) return (int)alias[i].t;
    return -1;
}

char *gopt_profile_strdup(const char *s, gopt_error *err) {
    if (!s) s = "";
    size_t n = strlen(s) + 1;
    char *c = gopt_malloc(n, err);
    if (c) memcpy(c, s, n);
    return c;
}

void gopt_table_bounds(gopt_table_kind k, int j, double *lo, double *hi) {
    *lo = 1;
    if (j == gopt_table_kind_dim(k)) {
        *lo = GOPT_PROFILE_MIN_TABLE_TIME;
        *hi = GOPT_PROFILE_MAX_TABLE_TIME;
    } else if (gopt_table_kind_dim(k) == 3) {
        *hi = GOPT_PROFILE_MAX_TABLE_DIM;
    } else if (k == GOPT_TABLE_CONV) {
        *hi = GOPT_PROFILE_MAX_TABLE_FLOPS;
    } else {
        *hi = GOPT_PROFILE_MAX_TABLE_BYTES;
    }
}

gopt_status gopt_profile_alloc(int ndev, int nsets, gopt_profile **out, gopt_error *err) {
    *out = NULL;
    if (ndev > GOPT_PROFILE_MAX_DEVICES)
        return gopt_error_set(err, GOPT_EINVAL, "profile: %d devices: a profile has at most %d", ndev,
                              GOPT_PROFILE_MAX_DEVICES);
    gopt_profile *p = gopt_calloc(1, sizeof *p, err);
    if (!p) return GOPT_ENOMEM;
    p->ndev = ndev;
    p->nsets = nsets;
    size_t nn = (size_t)ndev * (size_t)ndev;
    p->dev = gopt_calloc(ndev > 0 ? (size_t)ndev : 1, sizeof *p->dev, err);
    p->sets = gopt_calloc(nsets > 0 ? (size_t)nsets : 1, sizeof *p->sets, err);
    p->link_bw = gopt_calloc(nn ? nn : 1, sizeof(double), err);
    p->link_lat = gopt_calloc(nn ? nn : 1, sizeof(double), err);
    p->link_set = gopt_malloc((nn ? nn : 1) * sizeof(int32_t), err);
    if (!p->dev || !p->sets || !p->link_bw || !p->link_lat || !p->link_set) {
        gopt_profile_free(p);
        return GOPT_ENOMEM;
    }
    for (size_t i = 0; i < nn; i++) p->link_set[i] = -1;
    for (int d = 0; d < ndev; d++) p->dev[d].tableset = -1;
    for (int k = 0; k < GOPT_OP_KIND_COUNT; k++) p->eff[k] = 1;
    *out = p;
    return GOPT_OK;
}

void gopt_profile_free(gopt_profile *p) {
    if (!p) return;
    free(p->name);
    free(p->description);
    free(p->source);
    free(p->machine);
    free(p->date);
    free(p->command);
    free(p->reference);
    free(p->topology);
    if (p->topology_json) json_decref(p->topology_json);
    if (p->efficiency_json) json_decref(p->efficiency_json);
    if (p->dev)
        for (int d = 0; d < p->ndev; d++) {
            free(p->dev[d].name);
            free(p->dev[d].model);
        }
    free(p->dev);
    if (p->sets)
        for (int s = 0; s < p->nsets; s++) {
            free(p->sets[s].name);
            for (int k = 0; k < GOPT_TABLE_KIND_COUNT; k++) free(p->sets[s].pts[k]);
        }
    free(p->sets);
    free(p->link_bw);
    free(p->link_lat);
    free(p->link_set);
    free(p);
}

/* ---- accessors ---------------------------------------------------------------- */
#define STR(s) ((s) ? (s) : "")
const char *gopt_profile_name(const gopt_profile *p) { return STR(p->name); }
const char *gopt_profile_description(const gopt_profile *p) { return STR(p->description); }
const char *gopt_profile_source(const gopt_profile *p) { return STR(p->source); }
const char *gopt_profile_machine(const gopt_profile *p) { return STR(p->machine); }
const char *gopt_profile_date(const gopt_profile *p) { return STR(p->date); }
const char *gopt_profile_command(const gopt_profile *p) { return STR(p->command); }
const char *gopt_profile_reference(const gopt_profile *p) { return STR(p->reference); }
const char *gopt_profile_topology(const gopt_profile *p) { return p->topology ? p->topology : "explicit"; }
int gopt_profile_num_devices(const gopt_profile *p) { return p->ndev; }

#define DEV(p, d) (assert((d) >= 0 && (d) < (p)->ndev && "device index out of range"), &(p)->dev[(d)])
const char *gopt_profile_device_name(const gopt_profile *p, int d) { return STR(DEV(p, d)->name); }
gopt_device_kind gopt_profile_device_kind(const gopt_profile *p, int d) { return DEV(p, d)->kind; }
const char *gopt_profile_device_model(const gopt_profile *p, int d) { return STR(DEV(p, d)->model); }
double gopt_profile_device_memory(const gopt_profile *p, int d) { return DEV(p, d)->memory; }
double gopt_profile_device_peak(const gopt_profile *p, int d, gopt_dtype t) {
    return (t >= 0 && t < GOPT_DTYPE_COUNT) ? DEV(p, d)->peak[t] : 0.0;
}
double gopt_profile_device_bandwidth(const gopt_profile *p, int d) { return DEV(p, d)->bandwidth; }
double gopt_profile_shared_bandwidth(const gopt_profile *p) { return p->bus_bw; }
double gopt_profile_device_launch_overhead(const gopt_profile *p, int d) { return DEV(p, d)->launch; }
int gopt_profile_has_efficiency(const gopt_profile *p) { return p->efficiency_json != NULL; }
double gopt_profile_efficiency(const gopt_profile *p, gopt_op_kind k) {
    return (k >= 0 && k < GOPT_OP_KIND_COUNT) ? p->eff[k] : 1.0;
}
double gopt_profile_op_overhead(const gopt_profile *p) { return p->op_overhead; }
int gopt_profile_dispatch_overlapped(const gopt_profile *p) { return p->dispatch_overlapped; }
double gopt_profile_fresh_output_time(const gopt_profile *p, double bytes) {
    const int n = p->nfresh;
    if (n == 0 || !(bytes > 0)) return 0;
    const double *b = p->fresh_b, *s = p->fresh_s;
    if (bytes <= b[0]) return s[0] * bytes / b[0];
    if (bytes >= b[n - 1]) return s[n - 1] * bytes / b[n - 1];
    int i = 1;
    while (b[i] < bytes) i++; /* b[i - 1] < bytes <= b[i] */
    return s[i - 1] + (s[i] - s[i - 1]) * (bytes - b[i - 1]) / (b[i] - b[i - 1]);
}

static int fill_table(const gopt_profile *p, int set, gopt_table_kind kind, gopt_profile_table *out) {
    memset(out, 0, sizeof *out);
    if (set < 0 || kind < 0 || kind >= GOPT_TABLE_KIND_COUNT) return 0;
    const gopt_tableset *s = &p->sets[set];
    if (!s->pts[kind] || s->n[kind] <= 0) return 0;
    out->n = s->n[kind];
    out->dim = gopt_table_kind_dim(kind);
    out->points = s->pts[kind];
    return 1;
}

int gopt_profile_device_table(const gopt_profile *p, int d, gopt_table_kind kind, gopt_profile_table *out) {
    return fill_table(p, DEV(p, d)->tableset, kind, out);
}

int gopt_profile_find_device(const gopt_profile *p, const char *name) {
    for (int d = 0; d < p->ndev; d++)
        if (p->dev[d].name && strcmp(p->dev[d].name, name) == 0) return d;
    return -1;
}

#define LINK(p, s, t)                                                                                        \
    (assert((s) >= 0 && (s) < (p)->ndev && (t) >= 0 && (t) < (p)->ndev && "link index out of range"),       \
     (size_t)(s) * (size_t)(p)->ndev + (size_t)(t))
double gopt_profile_link_bandwidth(const gopt_profile *p, int src, int dst) { return p->link_bw[LINK(p, src, dst)]; }
double gopt_profile_link_latency(const gopt_profile *p, int src, int dst) { return p->link_lat[LINK(p, src, dst)]; }
int gopt_profile_link_table(const gopt_profile *p, int src, int dst, gopt_profile_table *out) {
    return fill_table(p, p->link_set[LINK(p, src, dst)], GOPT_TABLE_COPY, out);
}

/* ---- invariants ------------------------------------------------------------------ */
static int within(double x, double lo, double hi) { return x >= lo && x <= hi; }

gopt_status gopt_profile_check(const gopt_profile *p, const char *origin, gopt_error *err) {
    if (p->ndev < 1) return gopt_error_set(err, GOPT_EINVAL, "%s: field 'devices': no device", origin);
    if (p->ndev > GOPT_PROFILE_MAX_DEVICES)
        return gopt_error_set(err, GOPT_EINVAL, "%s: field 'devices': %d devices, at most %d", origin, p->ndev,
                              GOPT_PROFILE_MAX_DEVICES);
    for (int d = 0; d < p->ndev; d++) {
        const gopt_device *v = &p->dev[d];
        const char *nm = STR(v->name);
        if (!within(v->memory, 1, GOPT_PROFILE_MAX_MEMORY))
            return gopt_error_set(err, GOPT_EINVAL, "%s: device '%s': memory_bytes = %.17g must be in [1, %g]", origin,
                                  nm, v->memory, GOPT_PROFILE_MAX_MEMORY);
        if (!within(v->bandwidth, GOPT_PROFILE_MIN_RATE, GOPT_PROFILE_MAX_BANDWIDTH))
            return gopt_error_set(err, GOPT_EINVAL, "%s: device '%s': memory_bandwidth = %.17g must be in [%g, %g]",
                                  origin, nm, v->bandwidth, GOPT_PROFILE_MIN_RATE, GOPT_PROFILE_MAX_BANDWIDTH);
        for (int t = 0; t < GOPT_DTYPE_COUNT; t++)
            if ((t == GOPT_DTYPE_FP32 || v->peak[t] != 0) &&
                !within(v->peak[t], GOPT_PROFILE_MIN_RATE, GOPT_PROFILE_MAX_FLOPS_RATE))
                return gopt_error_set(err, GOPT_EINVAL, "%s: device '%s': peak_flops.%s = %.17g must be in [%g, %g]",
                                      origin, nm, DTYPE_NAMES[t], v->peak[t], GOPT_PROFILE_MIN_RATE,
                                      GOPT_PROFILE_MAX_FLOPS_RATE);
        if (p->bus_bw != 0 && !within(p->bus_bw, GOPT_PROFILE_MIN_RATE, GOPT_PROFILE_MAX_BANDWIDTH))
            return gopt_error_set(err, GOPT_EINVAL, "%s: topology: memory_bandwidth = %.17g must be in [%g, %g]", origin,
                                  p->bus_bw, GOPT_PROFILE_MIN_RATE, GOPT_PROFILE_MAX_BANDWIDTH);
        if (!within(v->launch, 0, GOPT_PROFILE_MAX_DELAY))
            return gopt_error_set(err, GOPT_EINVAL, "%s: device '%s': launch_overhead = %.17g must be in [0, %g]", origin,
                                  nm, v->launch, GOPT_PROFILE_MAX_DELAY);
        for (int e = 0; e < p->ndev; e++) {
            if (e == d) continue;
            size_t i = (size_t)d * (size_t)p->ndev + (size_t)e;
            if (!within(p->link_bw[i], GOPT_PROFILE_MIN_RATE, GOPT_PROFILE_MAX_BANDWIDTH) ||
                !within(p->link_lat[i], 0, GOPT_PROFILE_MAX_DELAY))
                return gopt_error_set(err, GOPT_EINVAL,
                                      "%s: field 'links': no valid link from '%s' to '%s' (bandwidth %.17g must be in "
                                      "[%g, %g], latency %.17g in [0, %g])",
                                      origin, nm, STR(p->dev[e].name), p->link_bw[i], GOPT_PROFILE_MIN_RATE,
                                      GOPT_PROFILE_MAX_BANDWIDTH, p->link_lat[i], GOPT_PROFILE_MAX_DELAY);
        }
    }
    for (int k = 0; k < GOPT_OP_KIND_COUNT; k++)
        if (!within(p->eff[k], GOPT_PROFILE_MIN_EFFICIENCY, GOPT_PROFILE_MAX_EFFICIENCY))
            return gopt_error_set(err, GOPT_EINVAL, "%s: efficiency.factors.%s = %.17g must be in [%g, %g]", origin,
                                  KIND_NAMES[k], p->eff[k], GOPT_PROFILE_MIN_EFFICIENCY, GOPT_PROFILE_MAX_EFFICIENCY);
    if (!within(p->op_overhead, 0, GOPT_PROFILE_MAX_DELAY))
        return gopt_error_set(err, GOPT_EINVAL, "%s: efficiency.op_overhead = %.17g must be in [0, %g]", origin,
                              p->op_overhead, GOPT_PROFILE_MAX_DELAY);
    for (int s = 0; s < p->nsets; s++)
        for (int k = 0; k < GOPT_TABLE_KIND_COUNT; k++) {
            if (!p->sets[s].pts[k]) continue;
            int w = gopt_table_kind_dim((gopt_table_kind)k) + 1;
            if (p->sets[s].n[k] <= 0)
                return gopt_error_set(err, GOPT_EINVAL, "%s: tables.%s.%s: empty table", origin, STR(p->sets[s].name),
                                      TABLE_NAMES[k]);
            for (int32_t r = 0; r < p->sets[s].n[k]; r++)
                for (int c = 0; c < w; c++) {
                    double x = p->sets[s].pts[k][(size_t)r * w + c], lo, hi;
                    gopt_table_bounds((gopt_table_kind)k, c, &lo, &hi);
                    if (!within(x, lo, hi))
                        return gopt_error_set(err, GOPT_EINVAL, "%s: tables.%s.%s[%d][%d] = %.17g must be in [%g, %g]",
                                              origin, STR(p->sets[s].name), TABLE_NAMES[k], (int)r, c, x, lo, hi);
                }
        }
    return GOPT_OK;
}

/* ---- writing ---------------------------------------------------------------------- */
gopt_status gopt_profile_write_json(const gopt_profile *p, gopt_buf *b, gopt_error *err) {
    json_t *o = json_object();
    if (!o) return gopt_error_set(err, GOPT_ENOMEM, "out of memory writing a profile");
    json_object_set_new(o, "format", json_string("gopt-profile"));
    json_object_set_new(o, "version", json_integer(1));
    json_object_set_new(o, "name", json_string(gopt_profile_name(p)));
    json_object_set_new(o, "description", json_string(gopt_profile_description(p)));
    json_t *prov = json_object();
    json_object_set_new(prov, "source", json_string(gopt_profile_source(p)));
    json_object_set_new(prov, "machine", json_string(gopt_profile_machine(p)));
    json_object_set_new(prov, "date", json_string(gopt_profile_date(p)));
    json_object_set_new(prov, "command", json_string(gopt_profile_command(p)));
    json_object_set_new(prov, "reference", json_string(gopt_profile_reference(p)));
    json_object_set_new(o, "provenance", prov);
    json_t *devs = json_array();
    for (int d = 0; d < p->ndev; d++) {
        const gopt_device *v = &p->dev[d];
        json_t *jd = json_object(), *pk = json_object();
        json_object_set_new(jd, "name", json_string(STR(v->name)));
        json_object_set_new(jd, "kind", json_string(gopt_device_kind_name(v->kind)));
        json_object_set_new(jd, "model", json_string(STR(v->model)));
        json_object_set_new(jd, "memory_bytes", json_real(v->memory));
        for (int t = 0; t < GOPT_DTYPE_COUNT; t++)
            if (v->peak[t] > 0) json_object_set_new(pk, DTYPE_NAMES[t], json_real(v->peak[t]));
        json_object_set_new(jd, "peak_flops", pk);
        json_object_set_new(jd, "memory_bandwidth", json_real(v->bandwidth));
        json_object_set_new(jd, "launch_overhead", json_real(v->launch));
        if (v->tableset >= 0) json_object_set_new(jd, "tables", json_string(STR(p->sets[v->tableset].name)));
        json_array_append_new(devs, jd);
    }
    json_object_set_new(o, "devices", devs);
    if (p->topology_json) json_object_set(o, "topology", p->topology_json);
    if (p->efficiency_json) json_object_set(o, "efficiency", p->efficiency_json);
    /* Links and table rows one per line: readable and diff-friendly. */
    char *head = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    json_decref(o);
    if (!head) return gopt_error_set(err, GOPT_ENOMEM, "out of memory writing profile '%s'", gopt_profile_name(p));
    size_t hl = strlen(head);
    while (hl > 0 && head[hl - 1] != '}') hl--;
    gopt_buf_append(b, head, hl > 0 ? hl - 1 : 0);
    free(head);
    while (b->len > 0 && (b->data[b->len - 1] == '\n' || b->data[b->len - 1] == ' ')) b->len--;
    gopt_buf_puts(b, ",\n  \"links\": [");
    int first = 1;
    for (int s = 0; s < p->ndev; s++)
        for (int t = 0; t < p->ndev; t++) {
            if (s == t) continue;
            size_t i = (size_t)s * (size_t)p->ndev + (size_t)t;
            json_t *l = json_object();
            json_object_set_new(l, "src", json_string(STR(p->dev[s].name)));
            json_object_set_new(l, "dst", json_string(STR(p->dev[t].name)));
            json_object_set_new(l, "bidirectional", json_false());
            json_object_set_new(l, "bandwidth", json_real(p->link_bw[i]));
            json_object_set_new(l, "latency", json_real(p->link_lat[i]));
            if (p->link_set[i] >= 0) json_object_set_new(l, "tables", json_string(STR(p->sets[p->link_set[i]].name)));
            char *lt = json_dumps(l, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
            json_decref(l);
            if (!lt) return gopt_error_set(err, GOPT_ENOMEM, "out of memory writing profile '%s'", gopt_profile_name(p));
            gopt_buf_printf(b, "%s\n    %s", first ? "" : ",", lt);
            free(lt);
            first = 0;
        }
    gopt_buf_puts(b, first ? "],\n  \"tables\": {" : "\n  ],\n  \"tables\": {");
    for (int s = 0; s < p->nsets; s++) {
        json_t *nm = json_string(STR(p->sets[s].name));
        char *ns = nm ? json_dumps(nm, JSON_ENCODE_ANY) : NULL;
        json_decref(nm);
        if (!ns) return gopt_error_set(err, GOPT_ENOMEM, "out of memory writing profile '%s'", gopt_profile_name(p));
        gopt_buf_printf(b, "%s\n    %s: {", s ? "," : "", ns);
        free(ns);
        int fk = 1;
        for (int k = 0; k < GOPT_TABLE_KIND_COUNT; k++) {
            if (!p->sets[s].pts[k]) continue;
            int w = gopt_table_kind_dim((gopt_table_kind)k) + 1;
            gopt_buf_printf(b, "%s\n      \"%s\": [", fk ? "" : ",", TABLE_NAMES[k]);
            fk = 0;
            for (int32_t r = 0; r < p->sets[s].n[k]; r++) {
                gopt_buf_puts(b, r ? ",\n        [" : "\n        [");
                for (int c = 0; c < w; c++)
                    gopt_buf_printf(b, "%s%.10g", c ? ", " : "", p->sets[s].pts[k][(size_t)r * w + c]);
                gopt_buf_puts(b, "]");
            }
            gopt_buf_puts(b, "\n      ]");
        }
        gopt_buf_puts(b, "\n    }");
    }
    gopt_buf_puts(b, p->nsets ? "\n  }\n}\n" : "}\n}\n");
    if (b->failed) return gopt_error_set(err, GOPT_ENOMEM, "out of memory writing profile '%s'", gopt_profile_name(p));
    return GOPT_OK;
}

gopt_status gopt_profile_save(const gopt_profile *p, const char *path, gopt_error *err) {
    gopt_buf b;
    gopt_buf_init(&b);
    gopt_status st = gopt_profile_write_json(p, &b, err);
    if (st == GOPT_OK) st = gopt_file_write_atomic(path, b.data, b.len, gopt_path_is_gz(path) ? 6 : 0, err);
    gopt_buf_destroy(&b);
    return st;
}
