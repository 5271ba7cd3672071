/* onnx_shape.c: the ONNX import's rules for data movement, constants and
 * shape arithmetic: Reshape, Flatten, Transpose, (Un)Squeeze, Cast, Concat,
 * Split, Slice, Gather, Expand, Tile, Pad, Resize, Trilu (0 FLOPs, class
 * data_movement; gradient: the same move, a slice, a sum or a concat), and
 * Shape, Size, Constant, ConstantOfShape, Range, which make no node: their
 * values are known at import time. A move of known integers (a shape being
 * computed) stays a known value too. Cost: O(rank) per op.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_internal.h"

/* ---- data movement ---------------------------------------------------------------------------- */
static gopt_status move(onnx_node *c, int rank, const int64_t *d) {
    gopt_status st = set_out(c, 0, c->in[0]->elem, rank, d);
    if (st != GOPT_OK) return st;
    if (c->in[0]->ncv >= 0 && c->out[0] && onnx_numel(c->out[0]) == c->in[0]->ncv) { /* known integers keep their values */
        c->out[0]->defined = 1;
        return onnx_value_set_ints(c->x, c->out[0], c->in[0]->cv, c->in[0]->ncv);
    }
    if ((st = onnx_outputs_ready(c)) != GOPT_OK) return st;
    return emit1(c, onnx_elem_is_float(c->in[0]->elem) ? ZK_MOVE : ZK_NONE, GOPT_OP_CLASS_DATA_MOVEMENT, 0, NULL);
}

gopt_status onnx_run_reshape(onnx_node *c) {
    gopt_status st = need(c, 0);
    if (st != GOPT_OK) return st;
    int n;
    const int64_t *s = ints_of(c, 1, &n);
    int64_t d[ZOO_MAX_RANK];
    if (!s || n > ZOO_MAX_RANK) {
        if ((st = onnx_outputs_ready(c)) != GOPT_OK) return st; /* value_info may still say */
        return move(c, c->out[0] ? c->out[0]->rank : 0, c->out[0] ? c->out[0]->d : d);
    }
    int64_t known = 1, total = onnx_numel(c->in[0]);
    int infer = -1, allowzero = onnx_attr_int(c, "allowzero", 0) != 0;
    for (int i = 0; i < n; i++) {
        d[i] = s[i] == 0 && !allowzero ? (i < c->in[0]->rank ? c->in[0]->d[i] : 1) : s[i];
        if (d[i] == -1 && infer < 0) infer = i;
        else if (d[i] < 0 || d[i] > ONNX_MAX_NUMEL || (d[i] && known > ONNX_MAX_NUMEL / d[i]))
            return onnx_node_fail(c, "shape value %lld is invalid", (long long)s[i]);
        else known *= d[i] ? d[i] : 1;
    }
    if (infer >= 0) d[infer] = known ? total / known : 0;
    return move(c, n, d);
}

gopt_status onnx_run_flatten(onnx_node *c) {
    gopt_status st = need(c, 0);
    if (st != GOPT_OK) return st;
    int ax = norm_axis(onnx_attr_int(c, "axis", 1), c->in[0]->rank);
    if (ax < 0 || ax > c->in[0]->rank) return onnx_node_fail(c, "axis out of range");
    int64_t d[2] = {1, 1};
    for (int i = 0; i < c->in[0]->rank; i++) d[i >= ax] *= c->in[0]->d[i];
    return move(c, 2, d);
}

gopt_status onnx_run_transpose(onnx_node *c) {
    gopt_status st = need(c, 0);
    if (st != GOPT_OK) return st;
    const onnx_value *x = c->in[0];
    int64_t perm[ZOO_MAX_RANK], d[ZOO_MAX_RANK];
    int np = onnx_attr_ints(c, "perm", perm, ZOO_MAX_RANK);
    for (int i = 0; i < x->rank; i++) {
        int64_t p = np == x->rank ? perm[i] : x->rank - 1 - i;
        if (p < 0 || p >= x->rank) return onnx_node_fail(c, "perm value %lld is out of range", (long long)p);
        d[i] = x->d[p];
    }
    return move(c, x->rank, d);
}

gopt_status onnx_run_squeeze(onnx_node *c) {
    gopt_status st = need(c, 0);
    int64_t axes[ZOO_MAX_RANK], d[ZOO_MAX_RANK];
    int n;
    if (st != GOPT_OK || (st = onnx_ints_arg(c, "axes", 1, axes, ZOO_MAX_RANK, &n)) != GOPT_OK) return st;
    const onnx_value *x = c->in[0];
    int drop[ZOO_MAX_RANK] = {0}, rank = 0;
    for (int i = 0; i < n; i++) {
        int a = norm_axis(axes[i], x->rank);
        if (a < 0 || a >= x->rank) return onnx_node_fail(c, "axis %lld is out of range", (long long)axes[i]);
        drop[a] = 1;
    }
    for (int i = 0; i < x->rank; i++)
        if (!(n > 0 ? drop[i] : x->d[i] == 1)) d[rank++] = x->d[i];
    return move(c, rank, d);
}

gopt_status onnx_run_unsqueeze(onnx_node *c) {
    gopt_status st = need(c, 0);
    int64_t axes[ZOO_MAX_RANK], d[ZOO_MAX_RANK];
    int n;
    if (st != GOPT_OK || (st = onnx_ints_arg(c, "axes", 1, axes, ZOO_MAX_RANK, &n)) != GOPT_OK) return st;
    const onnx_value *x = c->in[0];
    int rank = x->rank + (n > 0 ? n : 0), add[ZOO_MAX_RANK] = {0};
    if (rank > ZOO_MAX_RANK) return onnx_node_fail(c, "output rank %d is too large", rank);
    for (int i = 0; i < n; i++) {
        int a = norm_axis(axes[i], rank);
        if (a < 0 || a >= rank) return onnx_node_fail(c, "axis %lld is out of range", (long long)axes[i]);
        add[a] = 1;
    }
    for (int i = 0, k = 0; i < rank; i++) d[i] = add[i] ? 1 : (k < x->rank ? x->d[k++] : 1);
    return move(c, rank, d);
}

gopt_status onnx_run_cast(onnx_node *c) {
    gopt_status st = need(c, 0);
    if (st != GOPT_OK) return st;
    int to = (int)onnx_attr_int(c, "to", c->in[0]->elem);
    if ((st = set_out(c, 0, to, c->in[0]->rank, c->in[0]->d)) != GOPT_OK) return st;
    if (c->in[0]->ncv >= 0 && c->out[0]) {
        c->out[0]->defined = 1;
        return onnx_value_set_ints(c->x, c->out[0], c->in[0]->cv, c->in[0]->ncv);
    }
    if ((st = onnx_outputs_ready(c)) != GOPT_OK) return st;
    int diff = onnx_elem_is_float(to) && onnx_elem_is_float(c->in[0]->elem);
    return emit1(c, diff ? ZK_MOVE : ZK_NONE, GOPT_OP_CLASS_DATA_MOVEMENT, 0, NULL);
}

gopt_status onnx_run_concat(onnx_node *c) {
    gopt_status st = need(c, 0);
    if (st != GOPT_OK) return st;
    const onnx_value *x = c->in[0];
    int ax = norm_axis(onnx_attr_int(c, "axis", 0), x->rank);
    if (ax < 0 || ax >= x->rank) return onnx_node_fail(c, "axis is out of range for rank %d", x->rank);
    int64_t d[ZOO_MAX_RANK], vals[ONNX_MAX_CONST];
    memcpy(d, x->d, sizeof d);
    d[ax] = 0;
    int nv = 0, known = 1;
    for (int i = 0; i < c->nin; i++) {
        if ((st = need(c, i)) != GOPT_OK) return st;
        const onnx_value *v = c->in[i];
        if (v->rank != x->rank) return onnx_node_fail(c, "input '%s' has rank %d, not %d", v->name, v->rank, x->rank);
        d[ax] += v->d[ax];
        if (v->ncv < 0 || nv + v->ncv > ONNX_MAX_CONST || x->rank != 1) known = 0;
        else memcpy(vals + nv, v->cv, sizeof *vals * (size_t)v->ncv), nv += v->ncv;
    }
    if (known) return const_out(c, 1, d, vals, nv);
    if ((st = set_out(c, 0, x->elem, x->rank, d)) != GOPT_OK || (st = onnx_outputs_ready(c)) != GOPT_OK) return st;
    return emit_all(c, onnx_elem_is_float(x->elem) ? ZK_CONCAT : ZK_NONE, GOPT_OP_CLASS_DATA_MOVEMENT, 0, NULL);
}

gopt_status onnx_run_split(onnx_node *c) {
    gopt_status st = need(c, 0);
    if (st != GOPT_OK) return st;
    const onnx_value *x = c->in[0];
    int ax = norm_axis(onnx_attr_int(c, "axis", 0), x->rank);
    if (ax < 0 || ax >= x->rank) return onnx_node_fail(c, "axis is out of range for rank %d", x->rank);
    if (c->nout > ZOO_MAX_OUTS) return onnx_node_fail(c, "%d outputs; at most %d", c->nout, ZOO_MAX_OUTS);
    int64_t sizes[ZOO_MAX_OUTS];
    int n;
    if ((st = onnx_ints_arg(c, "split", 1, sizes, ZOO_MAX_OUTS, &n)) != GOPT_OK) return st;
    if (n < 0) { /* equal parts, the last one smaller */
        n = c->nout;
        int64_t part = (x->d[ax] + n - 1) / (n ? n : 1);
        for (int j = 0; j < n; j++) sizes[j] = j < n - 1 ? part : x->d[ax] - part * (n - 1);
    }
    if (n != c->nout) return onnx_node_fail(c, "%d split sizes for %d outputs", n, c->nout);
    int64_t sum = 0;
    for (int j = 0; j < n; j++) {
        if (sizes[j] < 0) return onnx_node_fail(c, "split size %lld", (long long)sizes[j]);
        int64_t d[ZOO_MAX_RANK];
        memcpy(d, x->d, sizeof d);
        d[ax] = sizes[j];
        sum += sizes[j];
        if ((st = set_out(c, j, x->elem, x->rank, d)) != GOPT_OK) return st;
    }
    if (sum != x->d[ax])
        return onnx_node_fail(c, "split sizes add to %lld, the axis has %lld", (long long)sum, (long long)x->d[ax]);
    if ((st = onnx_outputs_ready(c)) != GOPT_OK) return st;
    return emit1(c, onnx_elem_is_float(x->elem) ? ZK_SPLIT : ZK_NONE, GOPT_OP_CLASS_DATA_MOVEMENT, 0, NULL);
}

/* Slice (opset >= 10: starts, ends, axes, steps are inputs; before: attributes). */
gopt_status onnx_run_slice(onnx_node *c) {
    gopt_status st = need(c, 0);
    if (st != GOPT_OK) return st;
    const onnx_value *x = c->in[0];
    int64_t st_[ZOO_MAX_RANK], en[ZOO_MAX_RANK], ax[ZOO_MAX_RANK], sp[ZOO_MAX_RANK];
    int n = onnx_attr_ints(c, "starts", st_, ZOO_MAX_RANK), ne = onnx_attr_ints(c, "ends", en, ZOO_MAX_RANK);
    int na = onnx_attr_ints(c, "axes", ax, ZOO_MAX_RANK), ns = -1;
    if (n < 0) {
        int k;
        const int64_t *v;
        if (!(v = ints_of(c, 1, &n)) || n > ZOO_MAX_RANK) goto unknown;
        memcpy(st_, v, sizeof *v * (size_t)n);
        if (!(v = ints_of(c, 2, &ne)) || ne != n) goto unknown;
        memcpy(en, v, sizeof *v * (size_t)n);
        na = -1;
        if (IN(c, 3)) {
            if (!(v = ints_of(c, 3, &k)) || k != n) goto unknown;
            memcpy(ax, v, sizeof *v * (size_t)n), na = n;
        }
        if (IN(c, 4)) {
            if (!(v = ints_of(c, 4, &k)) || k != n) goto unknown;
            memcpy(sp, v, sizeof *v * (size_t)n), ns = n;
        }
    }
    if (n < 0 || ne != n || (na >= 0 && na != n)) return onnx_node_fail(c, "starts, ends and axes differ in length");
    int64_t d[ZOO_MAX_RANK], first[ZOO_MAX_RANK] = {0}, step[ZOO_MAX_RANK];
    memcpy(d, x->d, sizeof d);
    for (int i = 0; i < x->rank; i++) step[i] = 1;
    for (int i = 0; i < n; i++) {
        int a = norm_axis(na >= 0 ? ax[i] : i, x->rank);
        if (a < 0 || a >= x->rank) return onnx_node_fail(c, "bad axis in slice %d", i);
        int64_t dim = x->d[a], s = ns >= 0 ? sp[i] : 1, b = st_[i], e = en[i];
        if (s == 0) return onnx_node_fail(c, "step 0 in slice %d", i);
        /* beyond +-2^47 every start, end and step means the same (clamped): no overflow below */
        int64_t lim = INT64_C(1) << 47;
        s = s > lim ? lim : (s < -lim ? -lim : s);
        b = b > lim ? lim : (b < -lim ? -lim : b);
        e = e > lim ? lim : (e < -lim ? -lim : e);
        if (b < 0) b += dim;
        if (e < 0) e += dim;
        if (s > 0) {
            b = b < 0 ? 0 : (b > dim ? dim : b);
            e = e < 0 ? 0 : (e > dim ? dim : e);
            d[a] = e > b ? (e - b + s - 1) / s : 0;
        } else {
            b = b < 0 ? -1 : (b > dim - 1 ? dim - 1 : b);
            e = e < -1 ? -1 : (e > dim - 1 ? dim - 1 : e);
            d[a] = b > e ? (b - e + (-s) - 1) / (-s) : 0;
        }
        first[a] = b;
        step[a] = s;
    }
    if (x->ncv >= 0 && x->rank == 1 && x->ncv == x->d[0] && c->out[0]) {
        int64_t vals[ONNX_MAX_CONST];
        for (int64_t k = 0; k < d[0]; k++) vals[k] = x->cv[first[0] + k * step[0]];
        return const_out(c, 1, d, vals, (int)d[0]);
    }
    if ((st = set_out(c, 0, x->elem, x->rank, d)) != GOPT_OK) return st;
unknown:
    if ((st = onnx_outputs_ready(c)) != GOPT_OK) return st;
    return emit1(c, onnx_elem_is_float(x->elem) ? ZK_SLICE : ZK_NONE, GOPT_OP_CLASS_DATA_MOVEMENT, 0, NULL);
}

gopt_status onnx_run_gather(onnx_node *c) {
    gopt_status st;
    if ((st = need(c, 0)) != GOPT_OK || (st = need(c, 1)) != GOPT_OK) return st;
    const onnx_value *x = c->in[0], *ix = c->in[1];
    int ax = norm_axis(onnx_attr_int(c, "axis", 0), x->rank);
    if (ax < 0 || ax >= x->rank) return onnx_node_fail(c, "axis is out of range for rank %d", x->rank);
    int rank = x->rank - 1 + ix->rank;
    if (rank > ZOO_MAX_RANK) return onnx_node_fail(c, "output rank %d is too large", rank);
    int64_t d[ZOO_MAX_RANK];
    int k = 0;
    for (int i = 0; i < ax; i++) d[k++] = x->d[i];
    for (int i = 0; i < ix->rank; i++) d[k++] = ix->d[i];
    for (int i = ax + 1; i < x->rank; i++) d[k++] = x->d[i];
    if (x->ncv >= 0 && ix->ncv >= 0 && x->rank == 1) { /* shape arithmetic */
        int64_t vals[ONNX_MAX_CONST];
        for (int i = 0; i < ix->ncv; i++) {
            int64_t j = ix->cv[i] < 0 ? ix->cv[i] + x->ncv : ix->cv[i];
            if (j < 0 || j >= x->ncv) return onnx_node_fail(c, "index %lld is out of range", (long long)ix->cv[i]);
            vals[i] = x->cv[j];
        }
        return const_out(c, rank, d, vals, ix->ncv);
    }
    if ((st = set_out(c, 0, x->elem, rank, d)) != GOPT_OK || (st = onnx_outputs_ready(c)) != GOPT_OK) return st;
    if (!onnx_elem_is_float(x->elem)) return emit_all(c, ZK_NONE, GOPT_OP_CLASS_DATA_MOVEMENT, 0, NULL);
    if (ix->ncv >= 0 && !ix->param) /* fixed indices: a slice of x */
        return emit1(c, ZK_SLICE, GOPT_OP_CLASS_DATA_MOVEMENT, 0, NULL);
    return emit_all(c, ZK_GATHER, GOPT_OP_CLASS_DATA_MOVEMENT, 0, NULL);
}

/* Expand and Tile: a broadcast whose gradient is a Sum (the Add rule with one input). */
gopt_status onnx_run_expand(onnx_node *c) {
    gopt_status st = need(c, 0);
    if (st != GOPT_OK) return st;
    const onnx_value *x = c->in[0];
    int n, rank;
    const int64_t *s = ints_of(c, 1, &n);
    int64_t d[ZOO_MAX_RANK];
    if (s && n <= ZOO_MAX_RANK) {
        if (!strcmp(c->op, "Tile")) {
            if (n != x->rank) return onnx_node_fail(c, "%d repeats for rank %d", n, x->rank);
            for (int i = 0; i < n; i++) {
                if (s[i] < 0 || (s[i] && x->d[i] > ONNX_MAX_NUMEL / s[i])) return onnx_node_fail(c, "bad repeats");
                d[i] = x->d[i] * s[i];
            }
            rank = n;
        } else {
            rank = n > x->rank ? n : x->rank;
            for (int i = 0; i < rank; i++) {
                int ia = i - (rank - x->rank), is = i - (rank - n);
                int64_t a = ia >= 0 ? x->d[ia] : 1, b = is >= 0 ? s[is] : 1;
                if (a != b && a != 1 && b != 1) return onnx_node_fail(c, "shape does not broadcast at dim %d", i);
                d[i] = a == 1 ? b : a;
            }
        }
        if ((st = set_out(c, 0, x->elem, rank, d)) != GOPT_OK) return st;
    }
    if ((st = onnx_outputs_ready(c)) != GOPT_OK) return st;
    return emit1(c, onnx_elem_is_float(x->elem) ? ZK_ADD : ZK_NONE, GOPT_OP_CLASS_DATA_MOVEMENT, 0, NULL);
}

/* Pad: the gradient slices the padding off (the Concat rule with one input). */
gopt_status onnx_run_pad(onnx_node *c) {
    gopt_status st = need(c, 0);
    if (st != GOPT_OK) return st;
    const onnx_value *x = c->in[0];
    int64_t pads[2 * ZOO_MAX_RANK], d[ZOO_MAX_RANK];
    int n = onnx_attr_ints(c, "pads", pads, 2 * ZOO_MAX_RANK);
    if (n < 0) {
        const int64_t *v = ints_of(c, 1, &n);
        if (v && n <= 2 * ZOO_MAX_RANK) memcpy(pads, v, sizeof *v * (size_t)n);
        else n = -1;
    }
    if (n == 2 * x->rank && !IN(c, 3)) {
        for (int i = 0; i < x->rank; i++) {
            int64_t p0 = pads[i], p1 = pads[i + x->rank];
            if (p0 > ONNX_MAX_NUMEL || p0 < -ONNX_MAX_NUMEL || p1 > ONNX_MAX_NUMEL || p1 < -ONNX_MAX_NUMEL ||
                (d[i] = x->d[i] + p0 + p1) < 0)
                return onnx_node_fail(c, "pads %lld, %lld do not fit dim %d", (long long)p0, (long long)p1, i);
        }
        if ((st = set_out(c, 0, x->elem, x->rank, d)) != GOPT_OK) return st;
    }
    if ((st = onnx_outputs_ready(c)) != GOPT_OK) return st;
    return emit1(c, onnx_elem_is_float(x->elem) ? ZK_CONCAT : ZK_NONE, GOPT_OP_CLASS_DATA_MOVEMENT, 0, NULL);
}

/* Resize/Upsample: output from sizes or scales; gradient an average-pool gradient. */
gopt_status onnx_run_resize(onnx_node *c) {
    gopt_status st = need(c, 0);
    if (st != GOPT_OK) return st;
    const onnx_value *x = c->in[0];
    int n;
    const int64_t *sz = ints_of(c, 3, &n);
    if (sz && n == x->rank && (st = set_out(c, 0, x->elem, n, sz)) != GOPT_OK) return st;
    if ((st = onnx_outputs_ready(c)) != GOPT_OK) return st; /* scales are floats: value_info says */
    int32_t attr[4] = {1, 1, 0, 0};
    return emit1(c, ZK_POOL, GOPT_OP_CLASS_DATA_MOVEMENT, 0, attr);
}

/* ---- constants and shapes: no node ---------------------------------------------------------------- */
gopt_status onnx_run_shape(onnx_node *c) {
    gopt_status st = need(c, 0);
    if (st != GOPT_OK) return st;
    int r = c->in[0]->rank;
    int64_t s = onnx_attr_int(c, "start", 0), e = onnx_attr_int(c, "end", r);
    s = s < 0 ? s + r : s;
    e = e < 0 ? e + r : e;
    s = s < 0 ? 0 : (s > r ? r : s);
    e = e < s ? s : (e > r ? r : e);
    int64_t n = e - s;
    return const_out(c, 1, &n, c->in[0]->d + s, (int)n);
}

gopt_status onnx_run_size(onnx_node *c) {
    gopt_status st = need(c, 0);
    int64_t n = onnx_numel(c->in[0]);
    return st != GOPT_OK ? st : const_out(c, 0, NULL, &n, 1);
}

gopt_status onnx_run_constant(onnx_node *c) {
    if (!c->nout || !c->out[0]) return GOPT_OK;
    onnx_value *o = c->out[0];
    const Onnx__AttributeProto *a = onnx_attr(c, "value");
    gopt_status st;
    if (a && a->t) {
        st = onnx_tensor_value(c->x, c, o, a->t);
    } else if ((a = onnx_attr(c, "value_int")) || (a = onnx_attr(c, "value_ints"))) {
        int64_t n = a->n_ints ? (int64_t)a->n_ints : 1;
        st = a->n_ints ? onnx_value_set_shape(c->x, c, o, ONNX_I64, 1, &n) : onnx_value_set_shape(c->x, c, o, ONNX_I64, 0, NULL);
        if (st == GOPT_OK) st = onnx_value_set_ints(c->x, o, a->n_ints ? a->ints : &a->i, (int)(n < 1000 ? n : 1000));
    } else if ((a = onnx_attr(c, "value_float")) || (a = onnx_attr(c, "value_floats"))) {
        int64_t n = (int64_t)a->n_floats;
        if (!a->n_floats && a->has_f) o->fv = a->f, o->has_fv = 1;
        st = a->n_floats ? onnx_value_set_shape(c->x, c, o, 1, 1, &n) : onnx_value_set_shape(c->x, c, o, 1, 0, NULL);
    } else {
        return onnx_node_fail(c, "a Constant without a value this import reads (value, value_int(s), value_float(s))");
    }
    o->defined = 1;
    return st;
}

gopt_status onnx_run_constant_of_shape(onnx_node *c) {
    int n;
    const int64_t *s = ints_of(c, 0, &n);
    const Onnx__AttributeProto *a = onnx_attr(c, "value");
    int elem = a && a->t && a->t->has_data_type ? a->t->data_type : 1;
    gopt_status st;
    if (s && n <= ZOO_MAX_RANK) {
        if ((st = set_out(c, 0, elem, n, s)) != GOPT_OK) return st;
        int64_t nel = c->out[0] ? onnx_numel(c->out[0]) : 0;
        if (!onnx_elem_is_float(elem) && nel <= ONNX_MAX_CONST && c->out[0]) { /* e.g. ones for a shape */
            int64_t vals[ONNX_MAX_CONST], fill = 0;
            if (a && a->t) {
                onnx_value tmp = {.name = "value", .ncv = -1};
                if (onnx_tensor_value(c->x, c, &tmp, a->t) != GOPT_OK) return c->x->b.st;
                if (tmp.ncv >= 1) fill = tmp.cv[0];
                free(tmp.cv);
            }
            for (int64_t i = 0; i < nel; i++) vals[i] = fill;
            c->out[0]->defined = 1;
            return onnx_value_set_ints(c->x, c->out[0], vals, (int)nel);
        }
    }
    if ((st = onnx_outputs_ready(c)) != GOPT_OK) return st;
    return onnx_emit(c, ZK_NONE, GOPT_OP_CLASS_DATA_MOVEMENT, 0, NULL, 0, NULL);
}

gopt_status onnx_run_range(onnx_node *c) {
    int n0, n1, n2;
    const int64_t *a = ints_of(c, 0, &n0), *b = ints_of(c, 1, &n1), *d = ints_of(c, 2, &n2);
    if (a && b && d && n0 == 1 && n1 == 1 && n2 == 1 && d[0] != 0) {
        double nd = ceil(((double)b[0] - (double)a[0]) / (double)d[0]);
        if (nd > (double)ONNX_MAX_NUMEL) return onnx_node_fail(c, "range of %.0f elements", nd);
        int64_t n = nd > 0 ? (int64_t)nd : 0;
        int64_t vals[ONNX_MAX_CONST];
        for (int64_t i = 0; i < n && i < ONNX_MAX_CONST; i++) vals[i] = (int64_t)((uint64_t)a[0] + (uint64_t)i * (uint64_t)d[0]);
        gopt_status st = set_out(c, 0, ONNX_I64, 1, &n);
        if (st != GOPT_OK || !c->out[0]) return st;
        c->out[0]->defined = 1;
        if (n <= ONNX_MAX_CONST) return onnx_value_set_ints(c->x, c->out[0], vals, (int)n);
    }
    gopt_status st = onnx_outputs_ready(c);
    return st != GOPT_OK ? st : onnx_emit(c, ZK_NONE, GOPT_OP_CLASS_DATA_MOVEMENT, 0, NULL, 0, NULL);
}

gopt_status onnx_run_trilu(onnx_node *c) {
    gopt_status st = need(c, 0);
    if (st == GOPT_OK) st = like(c, 0, c->in[0]);
    if (st == GOPT_OK) st = onnx_outputs_ready(c);
    return st != GOPT_OK ? st : emit1(c, ZK_MOVE, GOPT_OP_CLASS_DATA_MOVEMENT, 0, NULL);
}
