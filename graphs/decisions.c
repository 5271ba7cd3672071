/* decisions.c: per-node placement, priority and fusion; validation and the
 * text file format. See gopt_decisions.h for the rules. All checks are
 * O(N + E): colocation by a first-seen device per group, fusion groups by a
 * union-find over member edges (connectivity) and Kahn's algorithm over the
 * graph with each group contracted to one unit (acyclicity). */
#include "gopt_decisions.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

gopt_status gopt_decisions_init(gopt_decisions *d, int32_t n, gopt_error *err) {
    memset(d, 0, sizeof *d);
    d->device = gopt_calloc((size_t)n, sizeof *d->device, err);
    d->priority = gopt_calloc((size_t)n, sizeof *d->priority, err);
    d->group = gopt_malloc((size_t)n * sizeof *d->group, err);
    if (!d->device || !d->priority || !d->group) {
        gopt_decisions_destroy(d);
        return GOPT_ENOMEM;
    }
    d->n = n;
    for (int32_t v = 0; v < n; v++) d->group[v] = -1;
    return GOPT_OK;
}

void gopt_decisions_destroy(gopt_decisions *d) {
    free(d->device);
    free(d->priority);
    free(d->group);
    memset(d, 0, sizeof *d);
}

void gopt_decisions_set_default(gopt_decisions *d, const gopt_frozen *f) {
    for (int32_t v = 0; v < f->n; v++) {
        d->device[v] = 0;
        d->priority[v] = f->n - f->rank[v];
        d->group[v] = -1;
    }
}

void gopt_decisions_copy(gopt_decisions *dst, const gopt_decisions *src) {
    memcpy(dst->device, src->device, (size_t)src->n * sizeof *src->device);
    memcpy(dst->priority, src->priority, (size_t)src->n * sizeof *src->priority);
    memcpy(dst->group, src->group, (size_t)src->n * sizeof *src->group);
}

static int32_t uf_find(int32_t *parent, int32_t x) {
    while (parent[x] != x) {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    return x;
}

gopt_status gopt_decisions_validate(const gopt_decisions *d, const gopt_graph *g, int ndev, gopt_error *err) {
    const gopt_frozen *f = gopt_graph_frozen(g);
    if (!f) return gopt_error_set(err, GOPT_EINVAL, "graph '%s' is not finalized", gopt_graph_name(g));
    int32_t n = f->n;
    if (d->n != n)
        return gopt_error_set(err, GOPT_EINVAL, "decisions cover %d nodes but graph '%s' has %d", d->n,
                              gopt_graph_name(g), n);
    if (ndev < 1) return gopt_error_set(err, GOPT_EINVAL, "the cluster has %d devices", ndev);
    gopt_status st = GOPT_OK;
    int32_t *first = NULL, *gdev = NULL, *parent = NULL, *unit = NULL, *indeg = NULL, *queue = NULL;
    for (int32_t v = 0; v < n; v++) {
        if (d->device[v] < 0 || d->device[v] >= ndev)
            return gopt_error_set(err, GOPT_EINVAL, "node '%s': device %d does not exist (the cluster has %d devices)",
                                  gopt_graph_node_name(g, v), d->device[v], ndev);
        if (d->group[v] < -1 || d->group[v] >= n)
            return gopt_error_set(err, GOPT_EINVAL, "node '%s': fusion group %d is out of range [-1, %d)",
                                  gopt_graph_node_name(g, v), d->group[v], n);
    }
    first = malloc(((size_t)f->n_coloc + 1) * sizeof *first);
    gdev = malloc(((size_t)n + 1) * sizeof *gdev);
    parent = malloc(((size_t)n + 1) * sizeof *parent);
    unit = malloc(((size_t)n + 1) * sizeof *unit);
    indeg = calloc((size_t)n + 1, sizeof *indeg);
    queue = malloc(((size_t)n + 1) * sizeof *queue);
    if (!first || !gdev || !parent || !unit || !indeg || !queue) {
        st = gopt_error_set(err, GOPT_ENOMEM, "out of memory validating decisions");
        goto out;
    }
    /* colocation: every member on the device of the group's first member */
    for (int32_t c = 0; c < f->n_coloc; c++) first[c] = -1;
    for (int32_t v = 0; v < n; v++) {
        int32_t c = f->coloc[v];
        if (c < 0) continue;
        if (first[c] < 0) first[c] = v;
        else if (d->device[v] != d->device[first[c]]) {
            gopt_node_attrs a;
            gopt_graph_node(g, v, &a);
            st = gopt_error_set(err, GOPT_EINVAL,
                                "node '%s': device %d breaks colocation group '%s' (node '%s' is on device %d)", a.name,
                                d->device[v], a.colocate, gopt_graph_node_name(g, first[c]), d->device[first[c]]);
            goto out;
        }
    }
    /* fusion groups: one device */
    for (int32_t k = 0; k < n; k++) gdev[k] = -1;
    for (int32_t v = 0; v < n; v++) {
        int32_t k = d->group[v];
        parent[v] = v;
        if (k < 0) continue;
        if (gdev[k] < 0) gdev[k] = v;
        else if (d->device[v] != d->device[gdev[k]]) {
            st = gopt_error_set(err, GOPT_EINVAL, "fusion group %d: node '%s' is on device %d but node '%s' on device %d",
                                k, gopt_graph_node_name(g, gdev[k]), d->device[gdev[k]], gopt_graph_node_name(g, v),
                                d->device[v]);
            goto out;
        }
    }
    /* connectivity: union members joined by an edge inside the group */
    for (int32_t e = 0; e < f->m; e++) {
        int32_t a = f->edge_src[e], b = f->edge_dst[e];
        if (d->group[a] >= 0 && d->group[a] == d->group[b]) {
            int32_t ra = uf_find(parent, a), rb = uf_find(parent, b);
            if (ra != rb) parent[ra] = rb;
        }
    }
    for (int32_t v = 0; v < n; v++) {
        int32_t k = d->group[v];
        if (k < 0) continue;
        int32_t r0 = uf_find(parent, gdev[k]);
        if (uf_find(parent, v) != r0) {
            st = gopt_error_set(err, GOPT_EINVAL,
                                "fusion group %d is not connected: no path inside the group joins node '%s' and node '%s'",
                                k, gopt_graph_node_name(g, gdev[k]), gopt_graph_node_name(g, v));
            goto out;
        }
    }
    /* acyclicity after contraction: a node's unit is its group's first member, or itself */
    for (int32_t v = 0; v < n; v++) unit[v] = d->group[v] >= 0 ? gdev[d->group[v]] : v;
    /* indegree of units, counting only edges between different units */
    for (int32_t e = 0; e < f->m; e++) {
        int32_t ua = unit[f->edge_src[e]], ub = unit[f->edge_dst[e]];
        if (ua != ub) indeg[ub]++;
    }
    /* Kahn over units: a unit is processed through all its members' out-edges */
    int32_t head = 0, tail = 0, done_units = 0, n_units = 0;
    /* members of each unit, as a linked list through `parent` (reused) */
    for (int32_t v = 0; v < n; v++) parent[v] = -1;
    for (int32_t v = n - 1; v >= 0; v--)
        if (unit[v] != v) {
            parent[v] = parent[unit[v]];
            parent[unit[v]] = v;
        }
    for (int32_t v = 0; v < n; v++)
        if (unit[v] == v) {
            n_units++;
            if (indeg[v] == 0) queue[tail++] = v;
        }
    while (head < tail) {
        int32_t u = queue[head++];
        done_units++;
        for (int32_t x = u; x >= 0; x = parent[x])
            for (int32_t s = f->out_ptr[x]; s < f->out_ptr[x + 1]; s++) {
                int32_t w = unit[f->out_dst[s]];
                if (w != u && --indeg[w] == 0) queue[tail++] = w;
            }
    }
    if (done_units < n_units) {
        /* name a fused unit left over: every cycle among units passes through one */
        int32_t bad = -1;
        for (int32_t v = 0; v < n && bad < 0; v++)
            if (unit[v] == v && indeg[v] > 0 && d->group[v] >= 0) bad = v;
        if (bad < 0) bad = 0;
        st = gopt_error_set(err, GOPT_EINVAL,
                            "fusion group %d (with node '%s'): fusing it creates a cycle (a path leaves the group and "
                            "comes back)",
                            d->group[bad], gopt_graph_node_name(g, bad));
        goto out;
    }
out:
    free(first);
    free(gdev);
    free(parent);
    free(unit);
    free(indeg);
    free(queue);
    return st;
}

/* ---- file format -------------------------------------------------------- */
static void put_name(gopt_buf *b, const char *s) {
    if (*s == '#') { /* a line starting with '#' is a comment */
        gopt_buf_puts(b, "\\#");
        s++;
    }
    for (; *s; s++) {
        if (*s == '\\') gopt_buf_puts(b, "\\\\");
        else if (*s == '\t') gopt_buf_puts(b, "\\t");
        else if (*s == '\n') gopt_buf_puts(b, "\\n");
        else gopt_buf_append(b, s, 1);
    }
}

gopt_status gopt_decisions_save(const char *path, const gopt_graph *g, int ndev, const gopt_decisions *d,
                                gopt_error *err) {
    gopt_buf b;
    gopt_buf_init(&b);
    gopt_buf_puts(&b, "gopt-decisions 1\ngraph ");
    put_name(&b, gopt_graph_name(g));
    gopt_buf_printf(&b, "\ndevices %d\nnode\tdevice\tpriority\tgroup\n", ndev);
    for (int32_t v = 0; v < d->n; v++) {
        put_name(&b, gopt_graph_node_name(g, v));
        gopt_buf_printf(&b, "\t%d\t%d\t%d\n", d->device[v], d->priority[v], d->group[v]);
    }
    gopt_status st = b.failed ? gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", path)
                              : gopt_file_write_atomic(path, b.data, b.len, gopt_path_is_gz(path) ? 6 : 0, err);
    gopt_buf_destroy(&b);
    return st;
}

/* Unescape a name in place. */
static void unescape(char *s) {
    char *o = s;
    for (; *s; s++) {
        if (*s == '\\' && s[1]) {
            s++;
            *o++ = *s == 't' ? '\t' : *s == 'n' ? '\n' : *s;
        } else {
            *o++ = *s;
        }
    }
    *o = '\0';
}

/* A decimal integer, optionally negative, nothing else (no space, no '+'). */
static int parse_i32(const char *s, int32_t *out) {
    const char *d = s + (*s == '-');
    if (*d < '0' || *d > '9') return 0;
    char *e;
    errno = 0;
    long v = strtol(s, &e, 10);
    if (e == s || *e || errno || v < INT32_MIN || v > INT32_MAX) return 0;
    *out = (int32_t)v;
    return 1;
}

gopt_status gopt_decisions_load(const char *path, const gopt_graph *g, int ndev, gopt_decisions *d, gopt_error *err) {
    memset(d, 0, sizeof *d);
    char *text = NULL;
    size_t len = 0;
    gopt_status st = gopt_file_read_all(path, &text, &len, err);
    if (st != GOPT_OK) return st;
    int32_t n = gopt_graph_num_nodes(g);
    uint8_t *seen = calloc((size_t)n + 1, 1);
    if (!seen || (st = gopt_decisions_init(d, n, err)) != GOPT_OK) {
        free(text);
        free(seen);
        return st ? st : gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    }
    int lineno = 0, header = 0, count = 0;
    for (char *line = text, *next; line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        lineno++;
        size_t ll = strlen(line);
        if (ll && line[ll - 1] == '\r') line[--ll] = '\0';
        if (!ll || line[0] == '#') continue;
        if (header == 0) {
            if (strcmp(line, "gopt-decisions 1") != 0) {
                st = gopt_error_set(err, GOPT_EFORMAT, "%s: line %d: expected 'gopt-decisions 1', found '%.60s'", path,
                                    lineno, line);
                goto fail;
            }
            header = 1;
            continue;
        }
        if (header == 1) {
            if (strncmp(line, "graph ", 6) != 0) {
                st = gopt_error_set(err, GOPT_EFORMAT, "%s: line %d: expected 'graph NAME', found '%.60s'", path, lineno,
                                    line);
                goto fail;
            }
            unescape(line + 6);
            if (strcmp(line + 6, gopt_graph_name(g)) != 0) {
                st = gopt_error_set(err, GOPT_EINVAL, "%s: line %d: the decisions are for graph '%.100s', not '%.100s'",
                                    path, lineno, line + 6, gopt_graph_name(g));
                goto fail;
            }
            header = 2;
            continue;
        }
        if (header == 2) {
            int32_t nd = 0;
            if (strncmp(line, "devices ", 8) != 0 || !parse_i32(line + 8, &nd)) {
                st = gopt_error_set(err, GOPT_EFORMAT, "%s: line %d: expected 'devices N', found '%.60s'", path, lineno,
                                    line);
                goto fail;
            }
            if (nd != ndev) {
                st = gopt_error_set(err, GOPT_EINVAL, "%s: line %d: the decisions are for %d devices, the cluster has %d",
                                    path, lineno, (int)nd, ndev);
                goto fail;
            }
            header = 3;
            continue;
        }
        if (header == 3) {
            if (strcmp(line, "node\tdevice\tpriority\tgroup") != 0) {
                st = gopt_error_set(err, GOPT_EFORMAT,
                                    "%s: line %d: expected the column header 'node<TAB>device<TAB>priority<TAB>group'",
                                    path, lineno);
                goto fail;
            }
            header = 4;
            continue;
        }
        /* exactly three tabs: an empty field is an error, never a collapsed separator */
        char *fields[4];
        int nf = 0;
        for (char *tok = line; nf < 5; nf++) {
            if (nf < 4) fields[nf] = tok;
            char *tab = strchr(tok, '\t');
            if (!tab) {
                nf++;
                break;
            }
            *tab = '\0';
            tok = tab + 1;
        }
        if (nf != 4) {
            st = gopt_error_set(err, GOPT_EFORMAT, "%s: line %d: expected 4 tab-separated fields, found %s", path, lineno,
                                nf > 4 ? "more" : "fewer");
            goto fail;
        }
        for (int k = 0; k < 4; k++)
            if (!fields[k][0]) {
                st = gopt_error_set(err, GOPT_EFORMAT, "%s: line %d: field %d (%s) is empty (two tabs in a row?)", path,
                                    lineno, k + 1, k == 0 ? "node" : k == 1 ? "device" : k == 2 ? "priority" : "group");
                goto fail;
            }
        unescape(fields[0]);
        int32_t v = gopt_graph_find(g, fields[0]);
        if (v < 0) {
            st = gopt_error_set(err, GOPT_EINVAL, "%s: line %d: node '%s' is not in graph '%s'", path, lineno, fields[0],
                                gopt_graph_name(g));
            goto fail;
        }
        if (seen[v]) {
            st = gopt_error_set(err, GOPT_EINVAL, "%s: line %d: node '%s' appears twice", path, lineno, fields[0]);
            goto fail;
        }
        static const char *const what[3] = {"device", "priority", "group"};
        int32_t *dst[3] = {&d->device[v], &d->priority[v], &d->group[v]};
        for (int k = 0; k < 3; k++)
            if (!parse_i32(fields[k + 1], dst[k])) {
                st = gopt_error_set(err, GOPT_EFORMAT, "%s: line %d: node '%s': %s '%s' is not an integer", path,
                                    lineno, fields[0], what[k], fields[k + 1]);
                goto fail;
            }
        seen[v] = 1;
        count++;
    }
    if (header < 4) {
        static const char *const missing[4] = {"'gopt-decisions 1'", "'graph NAME'", "'devices N'",
                                               "the column header 'node<TAB>device<TAB>priority<TAB>group'"};
        st = gopt_error_set(err, GOPT_EFORMAT, "%s: not a decisions file: the header line %s is missing", path,
                            missing[header]);
        goto fail;
    }
    if (count < n) {
        int32_t v = 0;
        while (seen[v]) v++;
        st = gopt_error_set(err, GOPT_EINVAL, "%s: node '%s' has no decision (%d of %d nodes missing)", path,
                            gopt_graph_node_name(g, v), n - count, n);
        goto fail;
    }
    if ((st = gopt_decisions_validate(d, g, ndev, err)) != GOPT_OK) {
        gopt_error_prefix(err, "%s", path);
        goto fail;
    }
    free(text);
    free(seen);
    return GOPT_OK;
fail:
    free(text);
    free(seen);
    gopt_decisions_destroy(d);
    return st;
}
