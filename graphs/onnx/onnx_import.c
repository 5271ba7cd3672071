/* onnx_import.c: read an ONNX model and build its training step.
 *
 * Steps: unpack the protobuf (protobuf-c, code generated from onnx.proto);
 * register initializers, graph inputs and value_info by name; check that
 * every node input is produced (by a graph input, an initializer or a node)
 * and that no value is produced twice; order the nodes topologically
 * (Kahn), refusing a cycle; classify weights (a float initializer or graph
 * input read at an op's weight slot, onnx_rule.param_slots); then run each
 * node's rule in order, add the loss (softmax cross-entropy over the first
 * output's last dim, or the output itself when it is a scalar) and let the
 * zoo builder add the backward and optimizer ops.
 *
 * External data: the file named by each initializer's `location` must exist
 * under the model's folder (no absolute path, no '..') and be long enough
 * for offset + length; its bytes are not read.
 * Cost: O(file size) to unpack plus O(nodes + values) hashing and sorting.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "onnx_internal.h"

int gopt_onnx_available(void) { return 1; }

gopt_status onnx_fail(onnx_ctx *x, gopt_status st, const char *fmt, ...) {
    if (x->b.st != GOPT_OK) return x->b.st;
    char msg[GOPT_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return zoo_fail(&x->b, st, "%s: %s", x->origin, msg);
}

gopt_status onnx_node_fail(const onnx_node *c, const char *fmt, ...) {
    char msg[GOPT_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return onnx_fail(c->x, GOPT_EINVAL, "node '%s' (%s): %s", c->name, c->op, msg);
}

/* ---- element types ------------------------------------------------------------------ */
static const struct {
    int size;
    const char *name;
    int is_float;
} ELEM[] = {
    [ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT] = {4, "float32", 1},
    [ONNX__TENSOR_PROTO__DATA_TYPE__UINT8] = {1, "uint8", 0},
    [ONNX__TENSOR_PROTO__DATA_TYPE__INT8] = {1, "int8", 0},
    [ONNX__TENSOR_PROTO__DATA_TYPE__UINT16] = {2, "uint16", 0},
    [ONNX__TENSOR_PROTO__DATA_TYPE__INT16] = {2, "int16", 0},
    [ONNX__TENSOR_PROTO__DATA_TYPE__INT32] = {4, "int32", 0},
    [ONNX__TENSOR_PROTO__DATA_TYPE__INT64] = {8, "int64", 0},
    [ONNX__TENSOR_PROTO__DATA_TYPE__STRING] = {8, "string", 0},
    [ONNX__TENSOR_PROTO__DATA_TYPE__BOOL] = {1, "bool", 0},
    [ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16] = {2, "float16", 1},
    [ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE] = {8, "float64", 1},
    [ONNX__TENSOR_PROTO__DATA_TYPE__UINT32] = {4, "uint32", 0},
    [ONNX__TENSOR_PROTO__DATA_TYPE__UINT64] = {8, "uint64", 0},
    [ONNX__TENSOR_PROTO__DATA_TYPE__COMPLEX64] = {8, "complex64", 0},
    [ONNX__TENSOR_PROTO__DATA_TYPE__COMPLEX128] = {16, "complex128", 0},
    [ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16] = {2, "bfloat16", 1},
};
#define NELEM ((int)(sizeof ELEM / sizeof ELEM[0]))

/* Unknown or newer types (float8, int4) count 1 byte an element. */
int onnx_elem_size(int e) { return e > 0 && e < NELEM ? ELEM[e].size : (e >= NELEM && e < 64 ? 1 : 4); }
const char *onnx_elem_name(int e) { return e > 0 && e < NELEM ? ELEM[e].name : (e == 0 ? "float32" : "other"); }
int onnx_elem_is_float(int e) { return e == 0 || (e > 0 && e < NELEM && ELEM[e].is_float); }

/* ---- values ------------------------------------------------------------------------- */
static uint32_t hash_str(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

/* Find or add the value named `name` (non-empty). NULL on out of memory. */
onnx_value *onnx_value_get(onnx_ctx *x, const char *name) {
    uint32_t mask = x->hcap - 1;
    for (uint32_t i = hash_str(name) & mask;; i = (i + 1) & mask) {
        int32_t k = x->hash[i];
        if (k < 0) {
            if (x->nv >= x->vcap) {
                onnx_fail(x, GOPT_EINTERNAL, "value table full at '%s'", name);
                return NULL;
            }
            onnx_value *v = &x->v[x->nv];
            memset(v, 0, sizeof *v);
            v->name = name;
            v->t = -1;
            v->layer = -1;
            v->ncv = -1;
            x->hash[i] = x->nv++;
            return v;
        }
        if (strcmp(x->v[k].name, name) == 0) return &x->v[k];
    }
}

int64_t onnx_numel(const onnx_value *v) {
    int64_t n = 1;
    for (int i = 0; i < v->rank; i++) n *= v->d[i];
    return n;
}

gopt_status onnx_value_set_shape(onnx_ctx *x, const onnx_node *c, onnx_value *v, int elem, int rank,
                                 const int64_t *d) {
    const char *what = c ? c->name : "graph";
    if (rank < 0 || rank > ZOO_MAX_RANK)
        return onnx_fail(x, GOPT_EINVAL, "value '%s' (from %s) has rank %d; at most %d is supported", v->name, what,
                         rank, ZOO_MAX_RANK);
    int64_t n = 1;
    for (int i = 0; i < rank; i++) {
        if (d[i] < 0 || d[i] > ONNX_MAX_NUMEL)
            return onnx_fail(x, GOPT_EINVAL, "value '%s' (from %s): dim %d = %lld is out of range", v->name, what, i,
                             (long long)d[i]);
        n = d[i] == 0 ? 0 : n;
        if (n && d[i] > ONNX_MAX_NUMEL / n)
            return onnx_fail(x, GOPT_EINVAL, "value '%s' (from %s) has more than 2^46 elements", v->name, what);
        n *= d[i];
    }
    v->rank = rank;
    for (int i = 0; i < rank; i++) v->d[i] = d[i];
    v->elem = elem;
    v->has_shape = 1;
    return GOPT_OK;
}

gopt_status onnx_value_set_ints(onnx_ctx *x, onnx_value *v, const int64_t *vals, int n) {
    free(v->cv);
    v->cv = NULL;
    v->ncv = -1;
    if (n < 0 || n > ONNX_MAX_CONST) return GOPT_OK;
    v->cv = malloc(sizeof *v->cv * (size_t)(n ? n : 1));
    if (!v->cv) return onnx_fail(x, GOPT_ENOMEM, "out of memory");
    if (n) memcpy(v->cv, vals, sizeof *vals * (size_t)n);
    v->ncv = n;
    return GOPT_OK;
}

/* tools/export_torch.py's layer_key: up to the first numeric component
 * (layer1.0.conv1.weight -> layer1.0), LSTM weights by their _lN suffix, else
 * the first component. */
static void layer_key(const char *name, char *out, size_t cap) {
    const char *p = name, *last = strrchr(name, '.');
    while (last && p < last) {
        const char *dot = strchr(p, '.');
        int digits = dot > p;
        for (const char *q = p; q < dot; q++) digits &= *q >= '0' && *q <= '9';
        if (digits) {
            snprintf(out, cap, "%.*s", (int)(dot - name), name);
            return;
        }
        p = dot + 1;
    }
    const char *leaf = last ? last + 1 : name, *l = strstr(leaf, "_l");
    while (l) {
        const char *q = l + 2, *e = q;
        while (*e >= '0' && *e <= '9') e++;
        if (e > q && (*e == '\0' || strcmp(e, "_reverse") == 0)) {
            snprintf(out, cap, "%.*sl%.*s", (int)(leaf - name), name, (int)(e - q), q);
            return;
        }
        l = strstr(l + 1, "_l");
    }
    if (last) snprintf(out, cap, "%.*s", (int)(strchr(name, '.') - name), name);
    else snprintf(out, cap, "%s", name);
}

int32_t onnx_layer_of_name(onnx_ctx *x, const char *name) {
    char key[256];
    layer_key(name, key, sizeof key);
    for (int32_t i = 0; i < x->nblocks; i++)
        if (strcmp(x->blocks[i], key) == 0) return i;
    char **nb = realloc(x->blocks, sizeof *nb * (size_t)(x->nblocks + 1));
    if (!nb) return onnx_fail(x, GOPT_ENOMEM, "out of memory"), -1;
    x->blocks = nb;
    if (!(nb[x->nblocks] = strdup(key))) return onnx_fail(x, GOPT_ENOMEM, "out of memory"), -1;
    return x->nblocks++;
}

int32_t onnx_tensor(onnx_ctx *x, onnx_value *v) {
    if (v->t >= 0 || x->b.st != GOPT_OK) return v->t;
    zoo_builder *b = &x->b;
    int32_t saved = b->layer;
    char name[ONNX_MAX_NAME + 1];
    size_t nl = strnlen(v->name, ONNX_MAX_NAME);
    memcpy(name, v->name, nl);
    name[nl] = '\0';
    b->esize = (uint8_t)onnx_elem_size(v->elem);
    b->dtype = onnx_elem_name(v->elem);
    if (v->param) {
        b->layer = v->layer = onnx_layer_of_name(x, v->name);
        v->t = zoo_param(b, name, v->rank, v->d);
    } else {
        b->layer = v->layer = -1;
        int64_t d[1][ZOO_MAX_RANK];
        memcpy(d[0], v->d, sizeof d[0]);
        uint8_t es = b->esize;
        zoo_fwd_spec s = {.name = name, .kind = ZK_NONE, .op = v->data_in ? "Placeholder" : "Const",
                          .cls = GOPT_OP_CLASS_INPUT, .nout = 1, .ranks = &v->rank,
                          .dims = (const int64_t(*)[ZOO_MAX_RANK])d, .esize = &es, .dtype = b->dtype};
        v->t = zoo_fwd(b, &s);
    }
    b->esize = 0;
    b->dtype = NULL;
    b->layer = saved;
    return v->t;
}

/* ---- reading the file ---------------------------------------------------------------- */
static const char *str_or_empty(const char *s) { return s ? s : ""; }

static int64_t read_le(const uint8_t *p, int size) {
    uint64_t u = 0;
    for (int i = size - 1; i >= 0; i--) u = (u << 8) | p[i];
    if (size < 8 && (u >> (8 * size - 1)) & 1) u |= ~UINT64_C(0) << (8 * size); /* sign-extend */
    return (int64_t)u;
}

/* Known integer values of a small int32/int64 tensor held inline. */
static gopt_status tensor_ints(onnx_ctx *x, onnx_value *v, const Onnx__TensorProto *tp) {
    int e = v->elem;
    if (e != ONNX__TENSOR_PROTO__DATA_TYPE__INT64 && e != ONNX__TENSOR_PROTO__DATA_TYPE__INT32) return GOPT_OK;
    int64_t n = onnx_numel(v), vals[ONNX_MAX_CONST];
    if (n > ONNX_MAX_CONST) return GOPT_OK;
    if (e == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 && tp->n_int64_data == (size_t)n) {
        for (int64_t i = 0; i < n; i++) vals[i] = tp->int64_data[i];
    } else if (e == ONNX__TENSOR_PROTO__DATA_TYPE__INT32 && tp->n_int32_data == (size_t)n) {
        for (int64_t i = 0; i < n; i++) vals[i] = tp->int32_data[i];
    } else if (tp->has_raw_data && tp->raw_data.len == (size_t)n * (size_t)onnx_elem_size(e)) {
        for (int64_t i = 0; i < n; i++)
            vals[i] = read_le(tp->raw_data.data + i * onnx_elem_size(e), onnx_elem_size(e));
    } else {
        return GOPT_OK;
    }
    return onnx_value_set_ints(x, v, vals, (int)n);
}

gopt_status onnx_tensor_value(onnx_ctx *x, const onnx_node *c, onnx_value *v, const Onnx__TensorProto *tp) {
    if (tp->n_dims > ZOO_MAX_RANK)
        return onnx_fail(x, GOPT_EINVAL, "tensor '%s' has %zu dims; at most %d are supported", v->name, tp->n_dims,
                         ZOO_MAX_RANK);
    gopt_status st = onnx_value_set_shape(x, c, v, tp->has_data_type ? tp->data_type : 1, (int)tp->n_dims, tp->dims);
    if (st == GOPT_OK && tp->data_location != ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) st = tensor_ints(x, v, tp);
    if (st == GOPT_OK && onnx_numel(v) == 1 && tp->data_location != ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        float f;
        if (v->elem == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT && tp->n_float_data == 1) v->fv = tp->float_data[0], v->has_fv = 1;
        else if (v->elem == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE && tp->n_double_data == 1) v->fv = tp->double_data[0], v->has_fv = 1;
        else if (v->elem == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT && tp->has_raw_data && tp->raw_data.len == 4) {
            memcpy(&f, tp->raw_data.data, 4); /* little-endian hosts only, as ONNX's raw_data */
            v->fv = f, v->has_fv = 1;
        } else if (v->elem == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE && tp->has_raw_data && tp->raw_data.len == 8) {
            memcpy(&v->fv, tp->raw_data.data, 8);
            v->has_fv = 1;
        }
    }
    return st;
}

static gopt_status check_external(onnx_ctx *x, const char *base_dir, onnx_value *v, const Onnx__TensorProto *tp) {
    const char *loc = NULL;
    long long off = 0, len = -1;
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = tp->external_data[i];
        const char *k = str_or_empty(e->key), *val = str_or_empty(e->value);
        char *end;
        if (strcmp(k, "location") == 0) loc = val;
        else if (strcmp(k, "offset") == 0 || strcmp(k, "length") == 0) {
            long long n = strtoll(val, &end, 10);
            if (!*val || *end || n < 0)
                return onnx_fail(x, GOPT_EFORMAT, "initializer '%s': external data %s = '%s' is not a byte count",
                                 v->name, k, val);
            if (k[0] == 'o') off = n;
            else len = n;
        }
    }
    if (!loc || !*loc)
        return onnx_fail(x, GOPT_EFORMAT, "initializer '%s': external data without a location", v->name);
    if (loc[0] == '/' || strstr(loc, ".."))
        return onnx_fail(x, GOPT_EFORMAT,
                         "initializer '%s': external data location '%s' must be a path inside the model's folder",
                         v->name, loc);
    if (!base_dir)
        return onnx_fail(x, GOPT_EFORMAT, "initializer '%s': external data '%s', but the model was given as bytes",
                         v->name, loc);
    size_t n = strlen(base_dir) + strlen(loc) + 2;
    char *path = malloc(n);
    if (!path) return onnx_fail(x, GOPT_ENOMEM, "out of memory");
    snprintf(path, n, "%s/%s", base_dir, loc);
    struct stat sb;
    gopt_status st = GOPT_OK;
    double need = len >= 0 ? (double)len : (double)onnx_numel(v) * onnx_elem_size(v->elem);
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
        st = onnx_fail(x, GOPT_EIO, "initializer '%s': external data file '%s' is missing (looked for %s)", v->name,
                       loc, path);
    else if ((double)off + need > (double)sb.st_size)
        st = onnx_fail(x, GOPT_EFORMAT,
                       "initializer '%s': external data file '%s' has %lld bytes, the tensor needs bytes %lld..%.0f",
                       v->name, loc, (long long)sb.st_size, off, (double)off + need);
    free(path);
    return st;
}

/* Shape of a graph input from its type; symbolic dims are -1. */
static gopt_status input_shape(onnx_ctx *x, onnx_value *v, const Onnx__ValueInfoProto *vi, int *symbolic) {
    const Onnx__TypeProto *tp = vi->type;
    const Onnx__TypeProto__Tensor *tt = tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ? tp->tensor_type
                                                                                                     : NULL;
    if (!tt || !tt->shape)
        return onnx_fail(x, GOPT_EINVAL, "graph input '%s' is not a tensor with a shape", v->name);
    if (tt->shape->n_dim > ZOO_MAX_RANK)
        return onnx_fail(x, GOPT_EINVAL, "graph input '%s' has rank %zu; at most %d is supported", v->name,
                         tt->shape->n_dim, ZOO_MAX_RANK);
    int64_t d[ZOO_MAX_RANK];
    *symbolic = 0;
    for (size_t i = 0; i < tt->shape->n_dim; i++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[i];
        if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) d[i] = dim->dim_value;
        else d[i] = 1, *symbolic |= 1 << i;
    }
    return onnx_value_set_shape(x, NULL, v, tt->has_elem_type ? tt->elem_type : 1, (int)tt->shape->n_dim, d);
}

static gopt_status setup_tables(onnx_ctx *x) {
    const Onnx__GraphProto *g = x->g;
    size_t n = g->n_initializer + g->n_input + g->n_output + g->n_value_info + 16;
    for (size_t i = 0; i < g->n_node; i++) n += g->node[i]->n_input + g->node[i]->n_output;
    if (n > (size_t)1 << 26) return onnx_fail(x, GOPT_EINVAL, "graph has too many values (%zu)", n);
    x->vcap = (int32_t)n;
    for (x->hcap = 64; x->hcap < 2 * n; x->hcap *= 2) {
    }
    x->v = calloc(n, sizeof *x->v);
    x->hash = malloc(sizeof *x->hash * x->hcap);
    if (!x->v || !x->hash) return onnx_fail(x, GOPT_ENOMEM, "out of memory (%zu values)", n);
    memset(x->hash, 0xff, sizeof *x->hash * x->hcap);
    return GOPT_OK;
}

/* ---- topological order ----------------------------------------------------------------- */
static gopt_status topo_order(onnx_ctx *x, int32_t *order, int32_t *prod) {
    const Onnx__GraphProto *g = x->g;
    size_t nn = g->n_node;
    gopt_status st = GOPT_OK;
    int32_t *indeg = calloc(nn + 1, sizeof *indeg), *head = NULL;
    size_t nedge = 0;
    for (size_t i = 0; i < nn; i++) nedge += g->node[i]->n_input;
    head = malloc(sizeof *head * (size_t)(x->nv + 1));
    int32_t (*cons)[2] = malloc(sizeof *cons * (nedge + 1)); /* (consumer node, next) per use */
    if (!indeg || !head || !cons) {
        st = onnx_fail(x, GOPT_ENOMEM, "out of memory sorting %zu nodes", nn);
        goto out;
    }
    for (int32_t i = 0; i < x->nv; i++) head[i] = -1;
    size_t k = 0;
    for (size_t i = 0; i < nn; i++) {
        const Onnx__NodeProto *nd = g->node[i];
        for (size_t j = 0; j < nd->n_input; j++) {
            const char *in = str_or_empty(nd->input[j]);
            if (!*in) continue;
            onnx_value *v = onnx_value_get(x, in);
            if (!v) goto fail;
            int32_t vi = (int32_t)(v - x->v);
            v->used = 1;
            if (prod[vi] < 0) {
                if (!v->defined) {
                    st = onnx_fail(x, GOPT_EFORMAT,
                                   "node '%s' (%s): input '%s' is not produced by any node, graph input or initializer",
                                   str_or_empty(nd->name), str_or_empty(nd->op_type), in);
                    goto out;
                }
                continue;
            }
            indeg[i]++;
            cons[k][0] = (int32_t)i;
            cons[k][1] = head[vi];
            head[vi] = (int32_t)k++;
        }
    }
    /* Kahn with a FIFO in file order: a file already in order keeps it. */
    int32_t qh = 0, qt = 0;
    for (size_t i = 0; i < nn; i++)
        if (!indeg[i]) order[qt++] = (int32_t)i;
    while (qh < qt) {
        const Onnx__NodeProto *nd = g->node[order[qh++]];
        for (size_t j = 0; j < nd->n_output; j++) {
            const char *o = str_or_empty(nd->output[j]);
            if (!*o) continue;
            onnx_value *v = onnx_value_get(x, o);
            if (!v) goto fail;
            for (int32_t e = head[v - x->v]; e >= 0; e = cons[e][1])
                if (--indeg[cons[e][0]] == 0) order[qt++] = cons[e][0];
            head[v - x->v] = -1; /* a node listing one output twice is refused earlier */
        }
    }
    if ((size_t)qt < nn) {
        size_t i = 0;
        while (i < nn && indeg[i] == 0) i++;
        st = onnx_fail(x, GOPT_EFORMAT, "the graph has a cycle through node '%s' (%s)", str_or_empty(g->node[i]->name),
                       str_or_empty(g->node[i]->op_type));
    }
    goto out;
fail:
    st = x->b.st;
out:
    free(indeg);
    free(head);
    free(cons);
    return st;
}

/* ---- the import ------------------------------------------------------------------------ */
static gopt_status register_graph(onnx_ctx *x, const char *base_dir, int32_t **prod_out) {
    const Onnx__GraphProto *g = x->g;
    gopt_status st;
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *tp = g->initializer[i];
        const char *name = str_or_empty(tp->name);
        if (!*name) return onnx_fail(x, GOPT_EFORMAT, "initializer %zu has no name", i);
        onnx_value *v = onnx_value_get(x, name);
        if (!v) return x->b.st;
        if (v->defined) return onnx_fail(x, GOPT_EFORMAT, "initializer '%s' is given twice", name);
        v->defined = v->init = 1;
        if ((st = onnx_tensor_value(x, NULL, v, tp)) != GOPT_OK) return st;
        if (tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL &&
            (st = check_external(x, base_dir, v, tp)) != GOPT_OK)
            return st;
    }
    for (size_t i = 0; i < g->n_input; i++) {
        const char *name = str_or_empty(g->input[i]->name);
        if (!*name) return onnx_fail(x, GOPT_EFORMAT, "graph input %zu has no name", i);
        onnx_value *v = onnx_value_get(x, name);
        if (!v) return x->b.st;
        if (v->init) continue; /* an initializer listed as an input too (keep_initializers_as_inputs) */
        if (v->defined) return onnx_fail(x, GOPT_EFORMAT, "graph input '%s' is given twice", name);
        int sym = 0;
        if ((st = input_shape(x, v, g->input[i], &sym)) != GOPT_OK) return st;
        v->defined = v->data_in = 1;
        v->ncv = sym; /* scratch until classification: bit i = dim i is symbolic */
    }
    for (size_t i = 0; i < g->n_value_info + g->n_output; i++) {
        const Onnx__ValueInfoProto *vi = i < g->n_value_info ? g->value_info[i] : g->output[i - g->n_value_info];
        const char *name = str_or_empty(vi->name);
        if (!*name) continue;
        onnx_value *v = onnx_value_get(x, name);
        if (!v) return x->b.st;
        if (!v->vi) v->vi = vi->type;
        if (i >= g->n_value_info) v->used = 1;
    }
    int32_t *prod = malloc(sizeof *prod * (size_t)(x->vcap + 1));
    if (!prod) return onnx_fail(x, GOPT_ENOMEM, "out of memory");
    *prod_out = prod;
    for (int32_t i = 0; i < x->vcap; i++) prod[i] = -1;
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *nd = g->node[i];
        if (!nd->op_type || !*nd->op_type) return onnx_fail(x, GOPT_EFORMAT, "node %zu has no op type", i);
        if (nd->n_input > ONNX_MAX_IO || nd->n_output > ONNX_MAX_IO)
            return onnx_fail(x, GOPT_EINVAL, "node '%s' (%s) has %zu inputs and %zu outputs; at most %d each",
                             str_or_empty(nd->name), nd->op_type, nd->n_input, nd->n_output, ONNX_MAX_IO);
        for (size_t j = 0; j < nd->n_output; j++) {
            const char *o = str_or_empty(nd->output[j]);
            if (!*o) continue;
            onnx_value *v = onnx_value_get(x, o);
            if (!v) return x->b.st;
            if (v->defined || prod[v - x->v] >= 0)
                return onnx_fail(x, GOPT_EFORMAT, "node '%s' (%s): value '%s' is produced twice",
                                 str_or_empty(nd->name), nd->op_type, o);
            prod[v - x->v] = (int32_t)i;
        }
    }
    return GOPT_OK;
}

/* Ops through which a weight still is a weight: torch exports an LSTM's or
 * an attention's weights sliced, transposed and concatenated by ops. */
static int weight_move(const char *op) {
    static const char *const M[] = {"Transpose", "Slice", "Split", "Reshape", "Squeeze", "Unsqueeze", "Cast",
                                    "Identity", "Concat", "Flatten", "Expand", "Tile", "Gather"};
    for (size_t i = 0; i < sizeof M / sizeof M[0]; i++)
        if (strcmp(op, M[i]) == 0) return 1;
    return 0;
}

/* Weights: float initializers and graph inputs read at a weight slot
 * (onnx_rule.param_slots), directly or through weight_move ops: marks
 * propagate from the last node to the first. */
static void classify(onnx_ctx *x, const int32_t *order) {
    const Onnx__GraphProto *g = x->g;
    uint8_t *want = calloc((size_t)x->nv + 1, 1);
    if (!want) {
        onnx_fail(x, GOPT_ENOMEM, "out of memory");
        return;
    }
    for (size_t k = g->n_node; k-- > 0;) {
        const Onnx__NodeProto *nd = g->node[order[k]];
        int deflt = !nd->domain || !*nd->domain || strcmp(nd->domain, "ai.onnx") == 0;
        const onnx_rule *r = deflt ? onnx_rule_find(nd->op_type) : NULL;
        uint32_t slots = r ? r->param_slots : (x->opts->unknown_as_other ? ~0u : 0);
        if (deflt && weight_move(nd->op_type)) {
            int out_wanted = 0;
            for (size_t j = 0; j < nd->n_output; j++) {
                onnx_value *v = nd->output[j] && *nd->output[j] ? onnx_value_get(x, nd->output[j]) : NULL;
                out_wanted |= v && want[v - x->v];
            }
            if (out_wanted) slots |= strcmp(nd->op_type, "Concat") == 0 ? ~0u : 1u;
        }
        for (size_t j = 0; j < nd->n_input && j < 32; j++) {
            const char *in = str_or_empty(nd->input[j]);
            if (!*in || !(slots >> j & 1)) continue;
            onnx_value *v = onnx_value_get(x, in);
            if (v) want[v - x->v] = 1;
        }
    }
    for (int32_t i = 0; i < x->nv; i++)
        if (want[i] && (x->v[i].init || x->v[i].data_in) && onnx_elem_is_float(x->v[i].elem)) x->v[i].param = 1;
    free(want);
}

static gopt_status setup_inputs(onnx_ctx *x) {
    const Onnx__GraphProto *g = x->g;
    x->use_value_info = 1;
    for (size_t i = 0; i < g->n_input; i++) {
        onnx_value *v = onnx_value_get(x, str_or_empty(g->input[i]->name));
        if (!v || v->init) continue;
        int sym = v->ncv;
        v->ncv = -1;
        if (v->param) {
            v->data_in = 0;
            if (sym)
                return onnx_fail(x, GOPT_EINVAL, "graph input '%s' is a weight with a symbolic dim", v->name);
            continue;
        }
        if (sym & ~1)
            return onnx_fail(x, GOPT_EINVAL,
                             "graph input '%s': a dim other than the first (batch) is symbolic; export with fixed sizes",
                             v->name);
        if (x->opts->batch > 0 && v->rank > 0) {
            if (v->d[0] != x->opts->batch || sym) x->use_value_info = 0;
            v->d[0] = x->opts->batch;
        } else if (sym) {
            return onnx_fail(x, GOPT_EINVAL, "graph input '%s': the batch dim is symbolic; give --batch N", v->name);
        }
    }
    return GOPT_OK;
}

static gopt_status run_node(onnx_ctx *x, const Onnx__NodeProto *nd, size_t index) {
    onnx_value *io[2 * ONNX_MAX_IO];
    char gen[ONNX_MAX_NAME + 1];
    onnx_node c = {.x = x, .n = nd, .op = nd->op_type, .nin = (int)nd->n_input, .nout = (int)nd->n_output,
                   .in = io, .out = io + ONNX_MAX_IO};
    c.name = str_or_empty(nd->name);
    if (c.name[0] == '/' && c.name[1]) c.name++; /* torch's "/layer1/Conv": scopes without a leading '/' */
    if (!*c.name) {
        snprintf(gen, sizeof gen, "%.60s_%zu", nd->op_type, index);
        c.name = gen;
    } else if (strlen(c.name) > ONNX_MAX_NAME) {
        memcpy(gen, c.name, ONNX_MAX_NAME);
        gen[ONNX_MAX_NAME] = '\0';
        c.name = gen;
    }
    int32_t layer = -1;
    for (int j = 0; j < c.nin; j++) {
        const char *in = str_or_empty(nd->input[j]);
        c.in[j] = *in ? onnx_value_get(x, in) : NULL;
        if (c.in[j]) {
            if (c.in[j]->param && c.in[j]->layer < 0) c.in[j]->layer = onnx_layer_of_name(x, c.in[j]->name);
            if (c.in[j]->layer > layer) layer = c.in[j]->layer;
        }
    }
    for (int j = 0; j < c.nout; j++) {
        const char *o = str_or_empty(nd->output[j]);
        c.out[j] = *o ? onnx_value_get(x, o) : NULL;
    }
    if (x->b.st != GOPT_OK) return x->b.st;
    int deflt = !nd->domain || !*nd->domain || strcmp(nd->domain, "ai.onnx") == 0;
    const onnx_rule *r = deflt ? onnx_rule_find(nd->op_type) : NULL;
    x->b.layer = layer;
    gopt_status st;
    if (r) st = r->run(&c);
    else if (x->opts->unknown_as_other) st = onnx_run_other(&c);
    else
        st = onnx_fail(x, GOPT_EINVAL,
                       "node '%s': op type '%s%s%s' is outside the import's rules (docs/zoo.md lists them; "
                       "--unknown-as other imports it as class other)",
                       c.name, deflt ? "" : nd->domain, deflt ? "" : ".", nd->op_type);
    if (st != GOPT_OK) return st;
    for (int j = 0; j < c.nout; j++)
        if (c.out[j]) {
            if (!c.out[j]->defined || !c.out[j]->has_shape)
                return onnx_node_fail(&c, "output '%s' was not produced", c.out[j]->name);
            if (c.out[j]->layer < 0) c.out[j]->layer = layer;
        }
    return GOPT_OK;
}

static gopt_status add_loss(onnx_ctx *x) {
    const Onnx__GraphProto *g = x->g;
    if (g->n_output == 0) return onnx_fail(x, GOPT_EFORMAT, "the graph has no output");
    const char *name = str_or_empty(g->output[0]->name);
    onnx_value *v = *name ? onnx_value_get(x, name) : NULL;
    if (!v || !v->defined) return onnx_fail(x, GOPT_EFORMAT, "graph output '%s' is not produced", name);
    int32_t logits = onnx_tensor(x, v);
    if (logits < 0) return x->b.st;
    zoo_builder *b = &x->b;
    if (!x->b.t[logits].needs_grad)
        return onnx_fail(x, GOPT_EINVAL, "graph output '%s' does not depend on any weight: nothing to train", name);
    b->layer = v->layer;
    if (onnx_numel(v) == 1) {
        b->loss = logits; /* the model computes its own loss */
        return GOPT_OK;
    }
    int rank = v->rank > 0 ? v->rank - 1 : 0;
    int64_t d[1][ZOO_MAX_RANK] = {{0}};
    for (int i = 0; i < rank; i++) d[0][i] = v->d[i];
    uint8_t es = 8;
    zoo_fwd_spec s = {.name = "labels", .kind = ZK_NONE, .op = "Placeholder", .cls = GOPT_OP_CLASS_INPUT, .nout = 1,
                      .ranks = &rank, .dims = (const int64_t(*)[ZOO_MAX_RANK])d, .esize = &es, .dtype = "int64"};
    int32_t saved = b->layer;
    b->layer = -1;
    int32_t labels = zoo_fwd(b, &s);
    b->layer = saved;
    zoo_xent(b, logits, labels);
    return b->st;
}

static void graph_name(const char *origin, char *out, size_t cap) {
    const char *base = strrchr(origin, '/');
    base = base ? base + 1 : origin;
    size_t n = strlen(base);
    if (n > 5 && strcmp(base + n - 5, ".onnx") == 0) n -= 5;
    snprintf(out, cap, "%.*s", (int)(n < cap - 1 ? n : cap - 1), base);
    if (!out[0]) snprintf(out, cap, "onnx_model");
}

gopt_status gopt_onnx_import_mem(const uint8_t *data, size_t len, const char *origin, const char *base_dir,
                                 const gopt_onnx_opts *opts, gopt_graph **out, gopt_error *err) {
    *out = NULL;
    static const gopt_onnx_opts DEFAULTS = {0};
    gopt_onnx_opts o = opts ? *opts : DEFAULTS;
    if (o.optimizer == GOPT_OPTIM_DEFAULT) o.optimizer = GOPT_OPTIM_ADAM;
    if (o.forward_only) o.optimizer = GOPT_OPTIM_SGD; /* param_bytes = the weights alone */
    if (o.forward_only && o.clip_grad_norm)
        return gopt_error_set(err, GOPT_EINVAL, "%s: a forward-only import has no gradients to clip", origin);
    if (o.batch < 0 || o.optimizer < GOPT_OPTIM_SGD || o.optimizer > GOPT_OPTIM_ADAMW)
        return gopt_error_set(err, GOPT_EINVAL, "%s: bad import options (batch %d, optimizer %d)", origin, o.batch,
                              (int)o.optimizer);
    onnx_ctx x;
    memset(&x, 0, sizeof x);
    x.err = err;
    x.origin = origin;
    x.opts = &o;
    char name[128];
    graph_name(origin, name, sizeof name);
    gopt_status st = zoo_begin(&x.b, name, "onnx", o.optimizer, err);
    if (st != GOPT_OK) return st;
    x.b.clip = o.clip_grad_norm != 0;
    int32_t *prod = NULL, *order = NULL;
    if (len == 0) {
        onnx_fail(&x, GOPT_EFORMAT, "empty file: not an ONNX model");
        goto out;
    }
    x.model = onnx__model_proto__unpack(NULL, len, data);
    if (!x.model) {
        onnx_fail(&x, GOPT_EFORMAT, "not an ONNX model: the protobuf does not parse (%zu bytes; truncated or not "
                                    "protobuf)", len);
        goto out;
    }
    if (!(x.g = x.model->graph) || x.g->n_node == 0) {
        onnx_fail(&x, GOPT_EFORMAT, "not an ONNX model: no graph, or a graph without nodes (%zu bytes)", len);
        goto out;
    }
    x.opset = 1;
    for (size_t i = 0; i < x.model->n_opset_import; i++) {
        const char *dom = str_or_empty(x.model->opset_import[i]->domain);
        if (!*dom || strcmp(dom, "ai.onnx") == 0) x.opset = x.model->opset_import[i]->version;
    }
    if (setup_tables(&x) != GOPT_OK || register_graph(&x, base_dir, &prod) != GOPT_OK) goto out;
    order = malloc(sizeof *order * (x.g->n_node + 1));
    if (!order) {
        onnx_fail(&x, GOPT_ENOMEM, "out of memory");
        goto out;
    }
    if (topo_order(&x, order, prod) != GOPT_OK) goto out;
    classify(&x, order);
    if (setup_inputs(&x) != GOPT_OK) goto out;
    for (size_t i = 0; i < x.g->n_input && x.b.st == GOPT_OK; i++) { /* data inputs first, in file order */
        onnx_value *v = onnx_value_get(&x, str_or_empty(x.g->input[i]->name));
        if (v && v->data_in) onnx_tensor(&x, v);
    }
    for (size_t i = 0; i < x.g->n_node && x.b.st == GOPT_OK; i++) run_node(&x, x.g->node[order[i]], (size_t)order[i]);
    if (x.b.st == GOPT_OK && !o.forward_only) add_loss(&x);
out:
    st = x.b.st;
    if (st == GOPT_OK && o.forward_only) {
        gopt_graph *g = x.b.g;
        x.b.g = NULL;
        zoo_abort(&x.b);
        st = gopt_graph_finalize(g, err);
        if (st == GOPT_OK) *out = g;
        else gopt_graph_free(g);
    } else if (st == GOPT_OK) {
        st = zoo_finish(&x.b, out);
    } else {
        zoo_abort(&x.b);
    }
    for (int32_t i = 0; i < x.nv; i++) free(x.v[i].cv);
    for (int32_t i = 0; i < x.nblocks; i++) free(x.blocks[i]);
    free(x.blocks);
    free(x.v);
    free(x.hash);
    free(prod);
    free(order);
    if (x.model) onnx__model_proto__free_unpacked(x.model, NULL);
    return st;
}

gopt_status gopt_onnx_import(const char *path, const gopt_onnx_opts *opts, gopt_graph **out, gopt_error *err) {
    *out = NULL;
    char *data = NULL;
    size_t len = 0;
    gopt_status st = gopt_file_read_all(path, &data, &len, err);
    if (st != GOPT_OK) return st;
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, (size_t)(slash - path) + (slash == path)) : strdup(".");
    if (!dir) st = gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", path);
    else st = gopt_onnx_import_mem((const uint8_t *)data, len, path, dir, opts, out, err);
    free(dir);
    free(data);
    return st;
}
