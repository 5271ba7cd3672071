/* graphml.c: GraphML reader and writer for computation graphs.
 *
 * The reader is a single pass over the (already gunzipped) text with a small
 * XML tokenizer: elements, attributes, entities (named and numeric), CDATA,
 * comments, processing instructions and DOCTYPE. It decodes values in place,
 * so attribute and text pointers stay valid for the whole parse. Nodes are
 * added as they close (values checked by gopt_graph_add_node); edges are kept
 * until the end because GraphML lets them name nodes defined later. Any
 * error names the origin, the line, the element and the value, and frees the
 * half-built graph. Cost: O(bytes) plus O(keys) per <data>.
 *
 * The writer emits the schema of docs/graph-format.md; optional attributes
 * equal to their declared default are omitted, numbers are printed in the
 * shortest form that reads back to the same double. */
#include "graph_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- tokenizer ------------------------------------------------------------ */
#define XML_MAX_ATTRS 32

typedef enum { TOK_START, TOK_EMPTY, TOK_END, TOK_EOF } tok_kind;

typedef struct {
    tok_kind kind;
    char *name; /* local name (namespace prefix dropped) */
    char *pos;  /* where the tag starts, for line numbers */
    int nattr;
    char *attr_name[XML_MAX_ATTRS];
    char *attr_val[XML_MAX_ATTRS];
} xml_tok;

typedef struct {
    const char *origin;
    char *buf, *p, *end;
    gopt_error *err;
} xml_reader;

static int line_of(const xml_reader *r, const char *pos) {
    int line = 1;
    for (const char *q = r->buf; q < pos && q < r->end; q++)
        if (*q == '\n') line++;
    return line;
}

static gopt_status xml_fail(xml_reader *r, const char *pos, const char *fmt, const char *a, const char *b) {
    char what[768];
    snprintf(what, sizeof what, fmt, a ? a : "", b ? b : "");
    return gopt_error_set(r->err, GOPT_EFORMAT, "%s: line %d: %s", r->origin, line_of(r, pos), what);
}

/* Prefix an error raised by the graph builder with the origin and line. */
static gopt_status located(xml_reader *r, const char *pos, gopt_status st) {
    gopt_error_prefix(r->err, "%s: line %d", r->origin, line_of(r, pos));
    return st;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static int is_name_char(char c) {
    return !(is_space(c) || c == '=' || c == '>' || c == '/' || c == '<' || c == '"' || c == '\'' || c == '\0');
}

static char *put_utf8(char *o, unsigned long cp) {
    if (cp < 0x80) {
        *o++ = (char)cp;
    } else if (cp < 0x800) {
        *o++ = (char)(0xC0 | (cp >> 6));
        *o++ = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        *o++ = (char)(0xE0 | (cp >> 12));
        *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *o++ = (char)(0x80 | (cp & 0x3F));
    } else {
        *o++ = (char)(0xF0 | (cp >> 18));
        *o++ = (char)(0x80 | ((cp >> 12) & 0x3F));
        *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *o++ = (char)(0x80 | (cp & 0x3F));
    }
    return o;
}

/* Decode entities of [s, e) in place, writing from o; returns the new end. */
static char *decode_entities(xml_reader *r, char *s, char *e, char *o, gopt_status *st) {
    while (s < e) {
        if (*s != '&') {
            *o++ = *s++;
            continue;
        }
        char *semi = memchr(s, ';', (size_t)(e - s));
        if (!semi || semi - s > 12) {
            *st = xml_fail(r, s, "unterminated entity reference '%.8s'", s, NULL);
            return o;
        }
        size_t n = (size_t)(semi - s - 1);
        const char *ent = s + 1;
        if (n == 2 && !memcmp(ent, "lt", 2)) *o++ = '<';
        else if (n == 2 && !memcmp(ent, "gt", 2)) *o++ = '>';
        else if (n == 3 && !memcmp(ent, "amp", 3)) *o++ = '&';
        else if (n == 4 && !memcmp(ent, "quot", 4)) *o++ = '"';
        else if (n == 4 && !memcmp(ent, "apos", 4)) *o++ = '\'';
        else if (n >= 2 && ent[0] == '#') {
            char *q;
            unsigned long cp = (ent[1] == 'x' || ent[1] == 'X') ? strtoul(ent + 2, &q, 16) : strtoul(ent + 1, &q, 10);
            if (q != semi || cp == 0 || cp > 0x10FFFF || !(cp == 0x9 || cp == 0xA || cp == 0xD || (cp >= 0x20 && cp <= 0xD7FF) ||
                                                           (cp >= 0xE000 && cp <= 0xFFFD) || cp >= 0x10000)) {
                char ref[16];
                snprintf(ref, sizeof ref, "%.*s", (int)(semi - s + 1), s);
                *st = xml_fail(r, s, "bad character reference '%s': not a character XML allows", ref, NULL);
                return o;
            }
            o = put_utf8(o, cp);
        } else {
            *semi = '\0';
            *st = xml_fail(r, s, "unknown entity '%s'", s, NULL);
            return o;
        }
        s = semi + 1;
    }
    return o;
}

/* Skip "<!-- ... -->", "<?...?>", "<!DOCTYPE ...>" at r->p (which is at '<').
 * Returns 1 if something was skipped, 0 if r->p is a normal tag, -1 error. */
static int skip_markup(xml_reader *r, gopt_status *st) {
    char *p = r->p;
    if (p[1] == '!' && p[2] == '-' && p[3] == '-') {
        char *q = strstr(p + 4, "-->");
        if (!q) {
            *st = xml_fail(r, p, "unterminated comment", NULL, NULL);
            return -1;
        }
        r->p = q + 3;
        return 1;
    }
    if (p[1] == '?') {
        char *q = strstr(p + 2, "?>");
        if (!q) {
            *st = xml_fail(r, p, "unterminated processing instruction", NULL, NULL);
            return -1;
        }
        r->p = q + 2;
        return 1;
    }
    if (p[1] == '!' && strncmp(p + 2, "DOCTYPE", 7) == 0) {
        int depth = 0;
        for (char *q = p + 1; q < r->end; q++) {
            if (*q == '[') depth++;
            else if (*q == ']') depth--;
            else if (*q == '>' && depth <= 0) {
                r->p = q + 1;
                return 1;
            }
        }
        *st = xml_fail(r, p, "unterminated DOCTYPE", NULL, NULL);
        return -1;
    }
    return 0;
}

/* Next tag, skipping text (which must be whitespace unless the caller reads
 * it with read_text) and markup. */
static gopt_status next_tag(xml_reader *r, xml_tok *t) {
    gopt_status st = GOPT_OK;
    for (;;) {
        char *lt = memchr(r->p, '<', (size_t)(r->end - r->p));
        for (char *q = r->p; q < (lt ? lt : r->end); q++)
            if (!is_space(*q))
                return xml_fail(r, q, "unexpected text '%.20s' outside a <data> element", q, NULL);
        if (!lt) {
            t->kind = TOK_EOF;
            t->pos = r->end;
            return GOPT_OK;
        }
        r->p = lt;
        int sk = skip_markup(r, &st);
        if (sk < 0) return st;
        if (sk > 0) continue;
        break;
    }
    char *p = r->p + 1;
    t->pos = r->p;
    t->nattr = 0;
    t->kind = TOK_START;
    if (*p == '/') {
        t->kind = TOK_END;
        p++;
    }
    if (*p == '!') return xml_fail(r, t->pos, "unexpected markup '%.12s'", t->pos, NULL);
    char *name = p, *local = p; /* local: after the last ':' (namespace prefix dropped) */
    while (p < r->end && is_name_char(*p)) {
        if (*p == ':') local = p + 1;
        p++;
    }
    if (p == name) return xml_fail(r, t->pos, "malformed tag '%.20s'", t->pos, NULL);
    char *name_end = p;
    for (;;) {
        while (p < r->end && is_space(*p)) p++;
        if (p >= r->end) return xml_fail(r, t->pos, "unterminated tag <%.40s", name, NULL);
        if (*p == '>') {
            p++;
            break;
        }
        if (*p == '/' && p[1] == '>') {
            if (t->kind == TOK_END) return xml_fail(r, t->pos, "malformed end tag", NULL, NULL);
            t->kind = TOK_EMPTY;
            p += 2;
            break;
        }
        if (t->kind == TOK_END) return xml_fail(r, t->pos, "malformed end tag", NULL, NULL);
        char *an = p;
        while (p < r->end && is_name_char(*p)) p++;
        char *an_end = p;
        while (p < r->end && is_space(*p)) p++;
        if (an == an_end || *p != '=')
            return xml_fail(r, an, "malformed attribute in tag <%.40s", name, NULL);
        p++;
        while (p < r->end && is_space(*p)) p++;
        char q = *p;
        if (q != '"' && q != '\'') return xml_fail(r, an, "attribute value not quoted in tag <%.40s", name, NULL);
        char *vs = ++p;
        char *ve = memchr(vs, q, (size_t)(r->end - vs));
        if (!ve) return xml_fail(r, an, "unterminated attribute value in tag <%.40s", name, NULL);
        if (t->nattr == XML_MAX_ATTRS) return xml_fail(r, t->pos, "too many attributes in tag <%.40s", name, NULL);
        *an_end = '\0';
        for (char *c = an; c < an_end; c++) /* keep the local name: xsi:schemaLocation -> schemaLocation */
            if (*c == ':') an = c + 1;
        char *de = decode_entities(r, vs, ve, vs, &st);
        if (st != GOPT_OK) return st;
        *de = '\0';
        t->attr_name[t->nattr] = an;
        t->attr_val[t->nattr] = vs;
        t->nattr++;
        p = ve + 1;
    }
    *name_end = '\0';
    t->name = local;
    r->p = p;
    return GOPT_OK;
}

static const char *tok_attr(const xml_tok *t, const char *name) {
    for (int i = 0; i < t->nattr; i++)
        if (strcmp(t->attr_name[i], name) == 0) return t->attr_val[i];
    return NULL;
}

/* The "]]>" closing the CDATA section that starts at lt, or NULL after
 * recording the error. */
static char *cdata_end(xml_reader *r, char *lt, gopt_status *st) {
    char *ce = strstr(lt + 9, "]]>");
    if (!ce) *st = xml_fail(r, lt, "unterminated CDATA section", NULL, NULL);
    return ce;
}

/* Read character data up to the end tag </name>; decode it in place, trim
 * surrounding whitespace; consume the end tag. */
static gopt_status read_text(xml_reader *r, const char *name, const char *start_pos, char **out) {
    char *o = r->p, *text = r->p;
    gopt_status st = GOPT_OK;
    for (;;) {
        char *lt = memchr(r->p, '<', (size_t)(r->end - r->p));
        if (!lt) return xml_fail(r, start_pos, "element <%s> is not closed", name, NULL);
        o = decode_entities(r, r->p, lt, o, &st);
        if (st != GOPT_OK) return st;
        r->p = lt;
        if (strncmp(lt, "<![CDATA[", 9) == 0) {
            char *ce = cdata_end(r, lt, &st);
            if (!ce) return st;
            size_t n = (size_t)(ce - (lt + 9));
            memmove(o, lt + 9, n);
            o += n;
            r->p = ce + 3;
            continue;
        }
        int sk = skip_markup(r, &st);
        if (sk < 0) return st;
        if (sk > 0) continue;
        xml_tok t;
        if ((st = next_tag(r, &t)) != GOPT_OK) return st;
        if (t.kind != TOK_END || strcmp(t.name, name) != 0)
            return xml_fail(r, t.pos, "unexpected element <%s> inside <%s>", t.name, name);
        break;
    }
    *o = '\0';
    while (*text && is_space(*text)) text++;
    char *e = text + strlen(text);
    while (e > text && is_space(e[-1])) *--e = '\0';
    *out = text;
    return GOPT_OK;
}

/* Skip an element's whole subtree (for elements we do not interpret). */
static gopt_status skip_element(xml_reader *r, const xml_tok *open) {
    if (open->kind == TOK_EMPTY) return GOPT_OK;
    int depth = 1;
    while (depth > 0) {
        char *lt = memchr(r->p, '<', (size_t)(r->end - r->p));
        if (!lt) return xml_fail(r, open->pos, "element <%s> is not closed", open->name, NULL);
        r->p = lt;
        gopt_status st = GOPT_OK;
        if (strncmp(lt, "<![CDATA[", 9) == 0) {
            char *ce = cdata_end(r, lt, &st);
            if (!ce) return st;
            r->p = ce + 3;
            continue;
        }
        int sk = skip_markup(r, &st);
        if (sk < 0) return st;
        if (sk > 0) continue;
        xml_tok t;
        if ((st = next_tag(r, &t)) != GOPT_OK) return st;
        if (t.kind == TOK_START) depth++;
        else if (t.kind == TOK_END) depth--;
    }
    return GOPT_OK;
}

/* ---- GraphML schema ----------------------------------------------------- */
enum { NA_NAME, NA_OP, NA_CLASS, NA_FLOPS, NA_OUT_BYTES, NA_PARAM_BYTES, NA_SHAPE, NA_DTYPE, NA_PHASE, NA_LAYER,
       NA_COLOCATE, NA_COUNT };
static const char *const NODE_ATTR[NA_COUNT] = {"name",  "op",    "class", "flops", "out_bytes", "param_bytes",
                                                "shape", "dtype", "phase", "layer", "colocate"};
static const int NODE_ATTR_REQUIRED[NA_COUNT] = {1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0};
enum { GA_NAME, GA_FAMILY, GA_COUNT };
static const char *const GRAPH_ATTR[GA_COUNT] = {"name", "family"};

typedef enum { FOR_GRAPH = 1, FOR_NODE = 2, FOR_EDGE = 4, FOR_ALL = 7 } key_for;

typedef struct {
    const char *id, *attr_name, *attr_type;
    const char *deflt;
    int domain;                  /* key_for bits */
    int slot[3];                 /* per graph/node/edge: schema index, or -1 */
    int extra[3];                /* per graph/node/edge: extra column, or -1 */
} keydef;

typedef struct {
    int key;
    const char *val;
} pending_val;

typedef struct {
    char *src, *dst, *pos;
    const char *bytes;
    int extra_first, extra_count; /* into the edge extras list */
} pending_edge;

typedef struct {
    xml_reader r;
    gopt_graph *g;
    keydef *keys;
    int nkeys, kcap;
    strmap ids; /* GraphML node id -> node index */
    pending_edge *edges;
    size_t nedges, ecap;
    int key_hint;       /* index of the last <key> matched by a <data> */
    pending_val *evals; /* extra values of pending edges */
    size_t nevals, evcap;
} gml_parser;

static int kind_index(key_for k) { return k == FOR_GRAPH ? 0 : k == FOR_NODE ? 1 : 2; }
static const char *kind_word(key_for k) { return k == FOR_GRAPH ? "graph" : k == FOR_NODE ? "node" : "edge"; }

static int find_key(const gml_parser *ps, const char *id) {
    for (int i = 0; i < ps->nkeys; i++)
        if (strcmp(ps->keys[i].id, id) == 0) return i;
    return -1;
}

/* Elements list their <data> in the same key order, so the key after the
 * previous match is almost always the next one: O(1) instead of O(keys). */
static int find_key_after(const gml_parser *ps, const char *id, int *hint) {
    int h = *hint + 1 < ps->nkeys ? *hint + 1 : 0;
    if (ps->nkeys && strcmp(ps->keys[h].id, id) == 0) return *hint = h;
    int k = find_key(ps, id);
    if (k >= 0) *hint = k;
    return k;
}

static gopt_status parse_key(gml_parser *ps, xml_tok *t) {
    xml_reader *r = &ps->r;
    const char *id = tok_attr(t, "id"), *fr = tok_attr(t, "for");
    const char *an = tok_attr(t, "attr.name"), *at = tok_attr(t, "attr.type");
    if (!id || !id[0]) return xml_fail(r, t->pos, "<key> without an id", NULL, NULL);
    if (find_key(ps, id) >= 0) return xml_fail(r, t->pos, "duplicate <key> id '%s'", id, NULL);
    int domain;
    if (!fr || strcmp(fr, "all") == 0) domain = FOR_ALL;
    else if (strcmp(fr, "node") == 0) domain = FOR_NODE;
    else if (strcmp(fr, "edge") == 0) domain = FOR_EDGE;
    else if (strcmp(fr, "graph") == 0) domain = FOR_GRAPH;
    else domain = 0; /* graphml, port, hyperedge, endpoint: kept out of our model */
    if (ps->nkeys == ps->kcap) {
        int cap = ps->kcap ? ps->kcap * 2 : 16;
        keydef *k = realloc(ps->keys, (size_t)cap * sizeof *k);
        if (!k) return gopt_error_set(r->err, GOPT_ENOMEM, "out of memory");
        ps->keys = k;
        ps->kcap = cap;
    }
    keydef *k = &ps->keys[ps->nkeys];
    memset(k, 0, sizeof *k);
    k->id = id;
    k->attr_name = an ? an : id;
    k->attr_type = at ? at : "string";
    k->domain = domain;
    for (int i = 0; i < 3; i++) k->slot[i] = k->extra[i] = -1;
    for (int a = 0; a < GA_COUNT; a++)
        if (strcmp(k->attr_name, GRAPH_ATTR[a]) == 0) k->slot[0] = a;
    for (int a = 0; a < NA_COUNT; a++)
        if (strcmp(k->attr_name, NODE_ATTR[a]) == 0) k->slot[1] = a;
    if (strcmp(k->attr_name, "bytes") == 0) k->slot[2] = 0;
    ps->nkeys++;
    if (t->kind == TOK_EMPTY) return GOPT_OK;
    for (;;) { /* children: <default>, <desc>, ... */
        xml_tok c;
        gopt_status st = next_tag(r, &c);
        if (st != GOPT_OK) return st;
        if (c.kind == TOK_EOF) return xml_fail(r, t->pos, "<key id=\"%s\"> is not closed", id, NULL);
        if (c.kind == TOK_END) {
            if (strcmp(c.name, "key") != 0) return xml_fail(r, c.pos, "unexpected </%s> inside <key>", c.name, NULL);
            return GOPT_OK;
        }
        if (strcmp(c.name, "default") == 0) {
            char *txt = (char *)"";
            if (c.kind == TOK_START && (st = read_text(r, "default", c.pos, &txt)) != GOPT_OK) return st;
            ps->keys[ps->nkeys - 1].deflt = txt;
        } else if ((st = skip_element(r, &c)) != GOPT_OK) {
            return st;
        }
    }
}

/* Read <data> children of an element until its end tag; vals[slot] receives
 * schema values, extras go to the pending list. */
static gopt_status read_datas(gml_parser *ps, const xml_tok *open, key_for kind, const char **vals, int nslots,
                              pending_val *xv, int *nxv, int xcap) {
    xml_reader *r = &ps->r;
    if (open->kind == TOK_EMPTY) return GOPT_OK;
    for (;;) {
        xml_tok c;
        gopt_status st = next_tag(r, &c);
        if (st != GOPT_OK) return st;
        if (c.kind == TOK_EOF) return xml_fail(r, open->pos, "<%s> is not closed", open->name, NULL);
        if (c.kind == TOK_END) {
            if (strcmp(c.name, open->name) != 0)
                return xml_fail(r, c.pos, "unexpected </%s> inside <%s>", c.name, open->name);
            return GOPT_OK;
        }
        if (strcmp(c.name, "data") != 0) {
            if (strcmp(c.name, "graph") == 0)
                return xml_fail(r, c.pos, "nested graphs are not supported (inside a <%s>)", open->name, NULL);
            if ((st = skip_element(r, &c)) != GOPT_OK) return st;
            continue;
        }
        const char *kid = tok_attr(&c, "key");
        if (!kid) return xml_fail(r, c.pos, "<data> without a key attribute", NULL, NULL);
        int ki = find_key_after(ps, kid, &ps->key_hint);
        if (ki < 0) return xml_fail(r, c.pos, "<data key=\"%s\"> refers to an undeclared <key>", kid, NULL);
        keydef *k = &ps->keys[ki];
        if (!(k->domain & kind))
            return xml_fail(r, c.pos, "<data key=\"%s\"> is not declared for a %s", kid, kind_word(kind));
        char *txt = (char *)"";
        if (c.kind == TOK_START && (st = read_text(r, "data", c.pos, &txt)) != GOPT_OK) return st;
        int si = k->slot[kind_index(kind)];
        if (si >= 0 && si < nslots) {
            vals[si] = txt;
        } else {
            if (*nxv == xcap) return xml_fail(r, c.pos, "too many extra attributes on one <%s>", open->name, NULL);
            xv[*nxv].key = ki;
            xv[*nxv].val = txt;
            (*nxv)++;
        }
    }
}

static const char *key_default(const gml_parser *ps, key_for kind, int slot) {
    for (int i = 0; i < ps->nkeys; i++)
        if ((ps->keys[i].domain & kind) && ps->keys[i].slot[kind_index(kind)] == slot) return ps->keys[i].deflt;
    return NULL;
}

/* A decimal number over the whole (trimmed) value: [+-]digits[.digits][e[+-]digits]
 * (what xsd:double writes, less INF and NaN). 0 when it is not one: hex floats,
 * "inf", "nan", and values too small or too large for a double (1e-400 would
 * silently become 0, 1e400 infinity). */
static int to_number(const char *s, double *out) {
    const char *p = s;
    int digits = 0;
    if (*p == '+' || *p == '-') p++;
    for (; *p >= '0' && *p <= '9'; p++) digits++;
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++) digits++;
    if (!digits) return 0;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!(*p >= '0' && *p <= '9')) return 0;
        while (*p >= '0' && *p <= '9') p++;
    }
    if (*p) return 0;
    char *e;
    errno = 0;
    double v = strtod(s, &e);
    if (e != p || errno == ERANGE || !isfinite(v)) return 0; /* ERANGE: overflow, underflow or subnormal */
    *out = v;
    return 1;
}

static gopt_status not_a_number(xml_reader *r, const char *pos, const char *elem, const char *attr, const char *s) {
    char what[512];
    snprintf(what, sizeof what,
             "%s: attribute %s = '%.60s' is not a decimal number within the range of a double (no hex, inf, nan; "
             "no value so small it would read as 0)",
             elem, attr, s);
    return gopt_error_set(r->err, GOPT_EFORMAT, "%s: line %d: %s", r->origin, line_of(r, pos), what);
}

/* Resolve the extra column for (key, kind), creating it on first use. */
static int extra_column(gml_parser *ps, int ki, key_for kind) {
    keydef *k = &ps->keys[ki];
    int idx = kind_index(kind);
    if (k->extra[idx] < 0)
        k->extra[idx] = graph_add_extra(ps->g, (extra_for)idx, k->attr_name, k->attr_type, ps->r.err);
    return k->extra[idx];
}

static gopt_status apply_extras(gml_parser *ps, key_for kind, int32_t elem, const pending_val *xv, int nxv) {
    for (int i = 0; i < nxv; i++) {
        int col = extra_column(ps, xv[i].key, kind);
        if (col < 0) return GOPT_ENOMEM;
        gopt_status st = graph_set_extra(ps->g, col, elem, xv[i].val, ps->r.err);
        if (st != GOPT_OK) return st;
    }
    return GOPT_OK;
}

#define MAX_EXTRA_PER_ELEM 64

/* "node 'NAME'", or "node id 'ID'" when the name is missing; built only
 * when a message needs it. */
static const char *node_label(char *buf, size_t n, const char *name, const char *id) {
    if (name && name[0]) snprintf(buf, n, "node '%s'", name);
    else snprintf(buf, n, "node id '%s'", id);
    return buf;
}

static gopt_status parse_node(gml_parser *ps, xml_tok *t) {
    xml_reader *r = &ps->r;
    const char *vals[NA_COUNT] = {0};
    pending_val xv[MAX_EXTRA_PER_ELEM];
    int nxv = 0;
    const char *id = tok_attr(t, "id");
    if (!id || !id[0]) return xml_fail(r, t->pos, "<node> without an id", NULL, NULL);
    char *id_copy = (char *)id; /* points into the buffer: stable */
    gopt_status st = read_datas(ps, t, FOR_NODE, vals, NA_COUNT, xv, &nxv, MAX_EXTRA_PER_ELEM);
    if (st != GOPT_OK) return st;
    for (int a = 0; a < NA_COUNT; a++)
        if (!vals[a]) vals[a] = key_default(ps, FOR_NODE, a);
    char elem[300];
#define NODE_LABEL node_label(elem, sizeof elem, vals[NA_NAME], id)
    for (int a = 0; a < NA_COUNT; a++)
        if (NODE_ATTR_REQUIRED[a] && (!vals[a] || (a == NA_NAME && !vals[a][0])))
            return xml_fail(r, t->pos, "%s: missing attribute %s", NODE_LABEL, NODE_ATTR[a]);
    gopt_node_attrs na;
    memset(&na, 0, sizeof na);
    na.name = vals[NA_NAME];
    na.op = vals[NA_OP];
    int cls = gopt_op_class_parse(vals[NA_CLASS]);
    if (cls < 0) {
        char what[600];
        snprintf(what, sizeof what, "%s: attribute class = '%.60s' is not one of input param gemm conv elementwise "
                 "reduction data_movement other", NODE_LABEL, vals[NA_CLASS]);
        return gopt_error_set(r->err, GOPT_EFORMAT, "%s: line %d: %s", r->origin, line_of(r, t->pos), what);
    }
    na.cls = (gopt_op_class)cls;
    static const int NUM_ATTR[3] = {NA_FLOPS, NA_OUT_BYTES, NA_PARAM_BYTES};
    double *num_dst[3] = {&na.flops, &na.out_bytes, &na.param_bytes};
    for (int i = 0; i < 3; i++)
        if (!to_number(vals[NUM_ATTR[i]], num_dst[i]))
            return not_a_number(r, t->pos, NODE_LABEL, NODE_ATTR[NUM_ATTR[i]], vals[NUM_ATTR[i]]);
    na.shape = vals[NA_SHAPE];
    na.dtype = vals[NA_DTYPE];
    na.colocate = vals[NA_COLOCATE];
    int ph = gopt_phase_parse(vals[NA_PHASE] ? vals[NA_PHASE] : "");
    if (ph < 0) {
        char what[512];
        snprintf(what, sizeof what, "%s: attribute phase = '%.60s' is not one of fwd, bwd, opt or empty", NODE_LABEL,
                 vals[NA_PHASE]);
        return gopt_error_set(r->err, GOPT_EFORMAT, "%s: line %d: %s", r->origin, line_of(r, t->pos), what);
    }
    na.phase = (gopt_phase)ph;
    na.layer = -1;
    if (vals[NA_LAYER] && vals[NA_LAYER][0]) {
        double lv = 0;
        if (!to_number(vals[NA_LAYER], &lv)) return not_a_number(r, t->pos, NODE_LABEL, "layer", vals[NA_LAYER]);
        if (!(lv >= -1 && lv <= 1e9) || lv != floor(lv)) {
            char what[512];
            snprintf(what, sizeof what, "%s: attribute layer = '%.60s' is not an integer >= -1", NODE_LABEL,
                     vals[NA_LAYER]);
            return gopt_error_set(r->err, GOPT_EFORMAT, "%s: line %d: %s", r->origin, line_of(r, t->pos), what);
        }
        na.layer = (int32_t)lv;
    }
    int32_t v;
    if ((st = gopt_graph_add_node(ps->g, &na, &v, r->err)) != GOPT_OK) return located(r, t->pos, st);
    int32_t prev = strmap_put(&ps->ids, id_copy, v);
    if (prev == -2) return gopt_error_set(r->err, GOPT_ENOMEM, "out of memory");
    if (prev >= 0) return xml_fail(r, t->pos, "duplicate node id '%s'", id, NULL);
    return apply_extras(ps, FOR_NODE, v, xv, nxv);
#undef NODE_LABEL
}

static gopt_status parse_edge(gml_parser *ps, xml_tok *t) {
    xml_reader *r = &ps->r;
    const char *vals[1] = {0};
    pending_val xv[MAX_EXTRA_PER_ELEM];
    int nxv = 0;
    char *src = (char *)tok_attr(t, "source"), *dst = (char *)tok_attr(t, "target");
    const char *dir = tok_attr(t, "directed");
    if (!src || !dst) return xml_fail(r, t->pos, "<edge> without %s", src ? "a target" : "a source", NULL);
    if (dir && strcmp(dir, "false") == 0)
        return xml_fail(r, t->pos, "undirected edge '%s' -- '%s': computation graphs are directed", src, dst);
    gopt_status st = read_datas(ps, t, FOR_EDGE, vals, 1, xv, &nxv, MAX_EXTRA_PER_ELEM);
    if (st != GOPT_OK) return st;
    if (ps->nedges == ps->ecap) {
        size_t cap = ps->ecap ? ps->ecap * 2 : 1024;
        pending_edge *e = realloc(ps->edges, cap * sizeof *e);
        if (!e) return gopt_error_set(r->err, GOPT_ENOMEM, "out of memory");
        ps->edges = e;
        ps->ecap = cap;
    }
    if (ps->nevals + (size_t)nxv > ps->evcap) {
        size_t cap = ps->evcap ? ps->evcap * 2 : 256;
        while (cap < ps->nevals + (size_t)nxv) cap *= 2;
        pending_val *e = realloc(ps->evals, cap * sizeof *e);
        if (!e) return gopt_error_set(r->err, GOPT_ENOMEM, "out of memory");
        ps->evals = e;
        ps->evcap = cap;
    }
    pending_edge *pe = &ps->edges[ps->nedges++];
    pe->src = src;
    pe->dst = dst;
    pe->pos = t->pos;
    pe->bytes = vals[0];
    pe->extra_first = (int)ps->nevals;
    pe->extra_count = nxv;
    if (nxv) memcpy(ps->evals + ps->nevals, xv, (size_t)nxv * sizeof *xv);
    ps->nevals += (size_t)nxv;
    return GOPT_OK;
}

static gopt_status add_pending_edges(gml_parser *ps) {
    xml_reader *r = &ps->r;
    const char *deflt = key_default(ps, FOR_EDGE, 0);
    for (size_t i = 0; i < ps->nedges; i++) {
        pending_edge *pe = &ps->edges[i];
        int32_t s = strmap_get(&ps->ids, pe->src), d = strmap_get(&ps->ids, pe->dst);
        if (s < 0)
            return xml_fail(r, pe->pos, "edge '%s' -> '%s': source node does not exist", pe->src, pe->dst);
        if (d < 0)
            return xml_fail(r, pe->pos, "edge '%s' -> '%s': target node does not exist", pe->src, pe->dst);
        const char *bv = pe->bytes ? pe->bytes : deflt;
        double b = 0;
        if (!bv || !to_number(bv, &b)) {
            char elem[600];
            snprintf(elem, sizeof elem, "edge '%s' -> '%s'", gopt_graph_node_name(ps->g, s),
                     gopt_graph_node_name(ps->g, d));
            if (!bv) return xml_fail(r, pe->pos, "%s: missing attribute bytes", elem, NULL);
            return not_a_number(r, pe->pos, elem, "bytes", bv);
        }
        gopt_status st;
        if ((st = gopt_graph_add_edge(ps->g, s, d, b, r->err)) != GOPT_OK) return located(r, pe->pos, st);
        if (pe->extra_count && /* evals is NULL when no edge has extras: no arithmetic on it */
            (st = apply_extras(ps, FOR_EDGE, (int32_t)i, ps->evals + pe->extra_first, pe->extra_count)) != GOPT_OK)
            return st;
    }
    return GOPT_OK;
}

static gopt_status parse_graph(gml_parser *ps, xml_tok *t) {
    xml_reader *r = &ps->r;
    const char *ed = tok_attr(t, "edgedefault");
    if (ed && strcmp(ed, "undirected") == 0)
        return xml_fail(r, t->pos, "<graph edgedefault=\"undirected\">: computation graphs are directed", NULL, NULL);
    const char *gvals[GA_COUNT] = {0};
    pending_val xv[MAX_EXTRA_PER_ELEM];
    int nxv = 0;
    if (t->kind == TOK_EMPTY) goto done;
    for (;;) {
        xml_tok c;
        gopt_status st = next_tag(r, &c);
        if (st != GOPT_OK) return st;
        if (c.kind == TOK_EOF) return xml_fail(r, t->pos, "<graph> is not closed (file truncated?)", NULL, NULL);
        if (c.kind == TOK_END) {
            if (strcmp(c.name, "graph") != 0) return xml_fail(r, c.pos, "unexpected </%s> inside <graph>", c.name, NULL);
            break;
        }
        if (strcmp(c.name, "node") == 0) st = parse_node(ps, &c);
        else if (strcmp(c.name, "edge") == 0) st = parse_edge(ps, &c);
        else if (strcmp(c.name, "data") == 0) {
            const char *kid = tok_attr(&c, "key");
            int ki = kid ? find_key(ps, kid) : -1;
            if (ki < 0) return xml_fail(r, c.pos, "<data key=\"%s\"> refers to an undeclared <key>", kid ? kid : "", NULL);
            if (!(ps->keys[ki].domain & FOR_GRAPH))
                return xml_fail(r, c.pos, "<data key=\"%s\"> is not declared for a graph", kid, NULL);
            char *txt = (char *)"";
            if (c.kind == TOK_START && (st = read_text(r, "data", c.pos, &txt)) != GOPT_OK) return st;
            int si = ps->keys[ki].slot[0];
            if (si >= 0) gvals[si] = txt;
            else if (nxv < MAX_EXTRA_PER_ELEM) xv[nxv++] = (pending_val){ki, txt};
        } else if (strcmp(c.name, "hyperedge") == 0) {
            return xml_fail(r, c.pos, "hyperedges are not supported", NULL, NULL);
        } else {
            st = skip_element(r, &c);
        }
        if (st != GOPT_OK) return st;
    }
done:
    for (int a = 0; a < GA_COUNT; a++)
        if (!gvals[a]) gvals[a] = key_default(ps, FOR_GRAPH, a);
    gopt_status st = graph_set_name(ps->g, gvals[GA_NAME] ? gvals[GA_NAME] : (tok_attr(t, "id") ? tok_attr(t, "id") : ""),
                                    gvals[GA_FAMILY] ? gvals[GA_FAMILY] : "", r->err);
    if (st != GOPT_OK) return st;
    return apply_extras(ps, FOR_GRAPH, 0, xv, nxv);
}

gopt_status gopt_graph_parse_graphml(char *text, size_t len, const char *origin, gopt_graph **out, gopt_error *err) {
    *out = NULL;
    gml_parser ps;
    memset(&ps, 0, sizeof ps);
    ps.r.origin = origin;
    ps.r.buf = ps.r.p = text;
    ps.r.end = text + len;
    ps.r.err = err;
    if (len >= 3 && (unsigned char)text[0] == 0xEF && (unsigned char)text[1] == 0xBB && (unsigned char)text[2] == 0xBF)
        ps.r.p += 3;
    if (memchr(text, '\0', len))
        return gopt_error_set(err, GOPT_EFORMAT, "%s: binary data (a NUL byte): not a GraphML text file", origin);
    long bad = gopt_graph_text_check(text, len);
    if (bad >= 0) {
        char hex[8];
        snprintf(hex, sizeof hex, "0x%02x", (unsigned)(unsigned char)text[bad]);
        return xml_fail(&ps.r, text + bad,
                        "byte %s is invalid UTF-8 or a character XML forbids (control character, U+FFFE, U+FFFF)", hex,
                        NULL);
    }
    gopt_status st = gopt_graph_create(&ps.g, "", "", err);
    if (st != GOPT_OK) return st;
    xml_tok t;
    if ((st = next_tag(&ps.r, &t)) != GOPT_OK) goto out;
    if (t.kind == TOK_EOF) {
        st = gopt_error_set(err, GOPT_EFORMAT, "%s: empty file: no <graphml> element", origin);
        goto out;
    }
    if (t.kind != TOK_START || strcmp(t.name, "graphml") != 0) {
        st = xml_fail(&ps.r, t.pos, "not a GraphML file: the root element is <%s>, not <graphml>", t.name, NULL);
        goto out;
    }
    int ngraphs = 0;
    for (;;) {
        xml_tok c;
        if ((st = next_tag(&ps.r, &c)) != GOPT_OK) goto out;
        if (c.kind == TOK_EOF) {
            st = xml_fail(&ps.r, c.pos, "<graphml> is not closed (file truncated?)", NULL, NULL);
            goto out;
        }
        if (c.kind == TOK_END) {
            if (strcmp(c.name, "graphml") != 0) {
                st = xml_fail(&ps.r, c.pos, "unexpected </%s>", c.name, NULL);
                goto out;
            }
            break;
        }
        if (strcmp(c.name, "key") == 0) {
            st = parse_key(&ps, &c);
        } else if (strcmp(c.name, "graph") == 0) {
            if (ngraphs++) {
                st = xml_fail(&ps.r, c.pos, "more than one <graph> in the file", NULL, NULL);
                goto out;
            }
            st = parse_graph(&ps, &c);
        } else {
            st = skip_element(&ps.r, &c);
        }
        if (st != GOPT_OK) goto out;
    }
    if ((st = next_tag(&ps.r, &t)) != GOPT_OK) goto out;
    if (t.kind != TOK_EOF) {
        st = xml_fail(&ps.r, t.pos, "content after </graphml>", NULL, NULL);
        goto out;
    }
    if (!ngraphs) {
        st = gopt_error_set(err, GOPT_EFORMAT, "%s: no <graph> element", origin);
        goto out;
    }
    if (gopt_graph_num_nodes(ps.g) == 0) {
        st = gopt_error_set(err, GOPT_EFORMAT, "%s: the <graph> has no <node>: a computation graph needs at least one op",
                            origin);
        goto out;
    }
    if ((st = add_pending_edges(&ps)) != GOPT_OK) goto out;
    if ((st = gopt_graph_finalize(ps.g, err)) != GOPT_OK) {
        gopt_error_prefix(err, "%s", origin);
        goto out;
    }
out:
    strmap_destroy(&ps.ids);
    free(ps.keys);
    free(ps.edges);
    free(ps.evals);
    if (st != GOPT_OK) {
        gopt_graph_free(ps.g);
        return st;
    }
    *out = ps.g;
    return GOPT_OK;
}

gopt_status gopt_graph_load(const char *path, gopt_graph **out, gopt_error *err) {
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    gopt_status st = gopt_file_read_all(path, &text, &len, err);
    if (st != GOPT_OK) return st;
    st = gopt_graph_parse_graphml(text, len, path, out, err);
    free(text);
    return st;
}

/* ---- writer ------------------------------------------------------------- */
static void put_escaped(gopt_buf *b, const char *s) {
    const char *run = s;
    for (; *s; s++) {
        const char *rep = NULL;
        switch (*s) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&quot;"; break;
        case '\n': rep = "&#10;"; break;
        case '\r': rep = "&#13;"; break;
        case '\t': rep = "&#9;"; break;
        default: continue;
        }
        gopt_buf_append(b, run, (size_t)(s - run));
        gopt_buf_puts(b, rep);
        run = s + 1;
    }
    gopt_buf_append(b, run, (size_t)(s - run));
}

/* Decimal digits of an integer-valued double |v| < 2^53, without printf. */
static void put_int(gopt_buf *b, int64_t v) {
    char tmp[24], *p = tmp + sizeof tmp;
    uint64_t u = v < 0 ? (uint64_t)(-(v + 1)) + 1 : (uint64_t)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) *--p = '-';
    gopt_buf_append(b, p, (size_t)(tmp + sizeof tmp - p));
}

/* Integers exactly; otherwise the shortest of %.15g/%.16g/%.17g that reads
 * back to exactly v. */
static void put_number(gopt_buf *b, double v) {
    if (v == floor(v) && fabs(v) < 9.007199254740992e15) {
        put_int(b, (int64_t)v);
        return;
    }
    char tmp[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, v);
        if (strtod(tmp, NULL) == v) break;
    }
    gopt_buf_puts(b, tmp);
}

static void put_data_open(gopt_buf *b, const char *key) {
    gopt_buf_puts(b, "<data key=\"");
    gopt_buf_puts(b, key);
    gopt_buf_puts(b, "\">");
}

static void put_data_str(gopt_buf *b, const char *key, const char *val) {
    put_data_open(b, key);
    put_escaped(b, val);
    gopt_buf_puts(b, "</data>");
}

static void put_data_num(gopt_buf *b, const char *key, double v) {
    put_data_open(b, key);
    put_number(b, v);
    gopt_buf_puts(b, "</data>");
}

static void put_extras(const gopt_graph *g, gopt_buf *b, extra_for kind, int32_t idx) {
    for (int k = 0; k < g->n_extras; k++) {
        const extra_attr *x = &g->extras[k];
        if (x->kind != kind || (size_t)idx >= x->cap || !x->vals[idx]) continue;
        char key[16];
        snprintf(key, sizeof key, "x%d", k);
        put_data_str(b, key, x->vals[idx]);
    }
}

gopt_status gopt_graph_write_graphml(const gopt_graph *g, gopt_buf *b, gopt_error *err) {
    gopt_buf_puts(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                     "<graphml xmlns=\"http://graphml.graphdrawing.org/xmlns\">\n"
                     "  <key id=\"g_name\" for=\"graph\" attr.name=\"name\" attr.type=\"string\"/>\n"
                     "  <key id=\"g_family\" for=\"graph\" attr.name=\"family\" attr.type=\"string\"/>\n"
                     "  <key id=\"name\" for=\"node\" attr.name=\"name\" attr.type=\"string\"/>\n"
                     "  <key id=\"op\" for=\"node\" attr.name=\"op\" attr.type=\"string\"/>\n"
                     "  <key id=\"class\" for=\"node\" attr.name=\"class\" attr.type=\"string\"/>\n"
                     "  <key id=\"flops\" for=\"node\" attr.name=\"flops\" attr.type=\"double\"/>\n"
                     "  <key id=\"out_bytes\" for=\"node\" attr.name=\"out_bytes\" attr.type=\"double\"/>\n"
                     "  <key id=\"param_bytes\" for=\"node\" attr.name=\"param_bytes\" attr.type=\"double\"/>\n"
                     "  <key id=\"shape\" for=\"node\" attr.name=\"shape\" attr.type=\"string\"><default></default></key>\n"
                     "  <key id=\"dtype\" for=\"node\" attr.name=\"dtype\" attr.type=\"string\"><default></default></key>\n"
                     "  <key id=\"phase\" for=\"node\" attr.name=\"phase\" attr.type=\"string\"><default></default></key>\n"
                     "  <key id=\"layer\" for=\"node\" attr.name=\"layer\" attr.type=\"int\"><default>-1</default></key>\n"
                     "  <key id=\"colocate\" for=\"node\" attr.name=\"colocate\" attr.type=\"string\"><default></default></key>\n"
                     "  <key id=\"bytes\" for=\"edge\" attr.name=\"bytes\" attr.type=\"double\"/>\n");
    static const char *const FOR_WORD[3] = {"graph", "node", "edge"};
    for (int k = 0; k < g->n_extras; k++) {
        gopt_buf_printf(b, "  <key id=\"x%d\" for=\"%s\" attr.name=\"", k, FOR_WORD[g->extras[k].kind]);
        put_escaped(b, g->extras[k].name);
        gopt_buf_puts(b, "\" attr.type=\"");
        put_escaped(b, g->extras[k].type);
        gopt_buf_puts(b, "\"/>\n");
    }
    gopt_buf_puts(b, "  <graph id=\"G\" edgedefault=\"directed\">\n    ");
    put_data_str(b, "g_name", g->name);
    put_data_str(b, "g_family", g->family);
    put_extras(g, b, EXTRA_FOR_GRAPH, 0);
    gopt_buf_puts(b, "\n");
    for (int32_t v = 0; v < g->n; v++) {
        gopt_buf_puts(b, "    <node id=\"n");
        put_int(b, v);
        gopt_buf_puts(b, "\">");
        put_data_str(b, "name", g->node_name[v]);
        put_data_str(b, "op", g->node_op[v]);
        put_data_str(b, "class", gopt_op_class_name((gopt_op_class)g->op_class[v]));
        put_data_num(b, "flops", g->flops[v]);
        put_data_num(b, "out_bytes", g->out_bytes[v]);
        put_data_num(b, "param_bytes", g->param_bytes[v]);
        if (g->node_shape[v][0]) put_data_str(b, "shape", g->node_shape[v]);
        if (g->node_dtype[v][0]) put_data_str(b, "dtype", g->node_dtype[v]);
        if (g->phase[v]) put_data_str(b, "phase", gopt_phase_name((gopt_phase)g->phase[v]));
        if (g->layer[v] != -1) put_data_num(b, "layer", g->layer[v]);
        if (g->node_coloc_str[v][0]) put_data_str(b, "colocate", g->node_coloc_str[v]);
        put_extras(g, b, EXTRA_FOR_NODE, v);
        gopt_buf_puts(b, "</node>\n");
    }
    for (int32_t e = 0; e < g->m; e++) {
        gopt_buf_puts(b, "    <edge source=\"n");
        put_int(b, g->edge_src[e]);
        gopt_buf_puts(b, "\" target=\"n");
        put_int(b, g->edge_dst[e]);
        gopt_buf_puts(b, "\">");
        put_data_num(b, "bytes", g->edge_bytes[e]);
        put_extras(g, b, EXTRA_FOR_EDGE, e);
        gopt_buf_puts(b, "</edge>\n");
    }
    gopt_buf_puts(b, "  </graph>\n</graphml>\n");
    if (b->failed) return gopt_error_set(err, GOPT_ENOMEM, "out of memory writing graph '%s'", g->name);
    return GOPT_OK;
}

gopt_status gopt_graph_save(const gopt_graph *g, const char *path, gopt_error *err) {
    gopt_buf b;
    gopt_buf_init(&b);
    gopt_status st = gopt_graph_write_graphml(g, &b, err);
    if (st == GOPT_OK) st = gopt_file_write_atomic(path, b.data, b.len, gopt_path_is_gz(path) ? 6 : 0, err);
    gopt_buf_destroy(&b);
    return st;
}
