/* state.c: trainer checkpoints. A checkpoint is two files: PATH, the policy
 * (gopt_policy_save: parameters, Adam moments and step), and PATH.state, a
 * JSON record of everything else a resumed run needs to continue bit for bit:
 * the step, the RNG state, the graph schedule (pass order, cursor, current
 * selection), per-graph reference and best, the options, and the FNV-1a 64
 * hash of the policy file it belongs to.
 *
 * Commit order: policy -> PATH.next, state -> PATH.state (atomic), rename
 * PATH.next -> PATH. A kill before the state is renamed leaves the previous
 * pair intact (a stale PATH.next is ignored); a kill after it leaves a state
 * whose hash matches PATH.next, and gopt_trainer_load finishes the rename.
 * Cost: O(parameters) per save.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trainer_internal.h"

#define STATE_FORMAT "gopt-trainer-state"
#define STATE_VERSION 1

uint64_t tr_fnv64(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* FNV-1a (64 bits) of a file's (gunzipped) content; *exists = 0 when there
 * is no file. Not CRC-32: the policy file ends in its own CRC-32, and the
 * CRC-32 of data followed by its CRC is the same constant for every file. */
static gopt_status file_fnv64(const char *path, uint64_t *hash, int *exists, gopt_error *err) {
    *exists = access(path, F_OK) == 0;
    if (!*exists) return GOPT_OK;
    char *buf = NULL;
    size_t len = 0;
    gopt_status st = gopt_file_read_all(path, &buf, &len, err);
    if (st) return st;
    *hash = tr_fnv64(TR_FNV_INIT, buf, len);
    free(buf);
    return GOPT_OK;
}

static json_t *options_json(const gopt_trainer *t) {
    const gopt_trainer_options *o = &t->o;
    char tasks[32];
    gopt_trainer_tasks_str(o->tasks, tasks, sizeof tasks);
    json_t *j = json_object();
    json_object_set_new(j, "samples", json_integer(o->samples));
    json_object_set_new(j, "epochs", json_integer(o->epochs));
    json_object_set_new(j, "clip", json_real(o->clip_eps));
    json_object_set_new(j, "entropy", json_real(o->entropy_coef));
    json_object_set_new(j, "invalid_reward", json_real(o->invalid_reward));
    json_object_set_new(j, "lr", json_real(o->adam.lr));
    json_object_set_new(j, "clip_norm", json_real(o->adam.clip_norm));
    json_object_set_new(j, "tasks", json_string(tasks));
    json_object_set_new(j, "imitate_steps", json_integer(o->imitate_steps));
    json_object_set_new(j, "imitate_lr", json_real(o->imitate_lr));
    json_object_set_new(j, "graphs_per_step", json_integer(o->graphs_per_step));
    json_object_set_new(j, "switch_every", json_integer(o->switch_every));
    json_object_set_new(j, "seed", json_integer((json_int_t)o->seed));
    json_object_set_new(j, "reference", json_string(o->reference));
    json_object_set_new(j, "backward", json_string(o->backward_rounds ? "rounds" : "batched"));
    /* only when on: a state without it was written before targets were relabelled (off) */
    if (o->canonical_targets) json_object_set_new(j, "canonical_targets", json_true());
    /* only when on: a state without it was written before interleaved imitation (off) */
    if (o->imitate_every > 0) json_object_set_new(j, "imitate_every", json_integer(o->imitate_every));
    /* only when on: a state without it was written before self-imitation (off) */
    if (o->imitate_best) json_object_set_new(j, "imitate_target", json_string("best"));
    /* only when not 1: a state without it was written before the temperature existed (1) */
    if (o->place_temperature != 1.0f) json_object_set_new(j, "place_temperature", json_real(o->place_temperature));
    /* only when set: a state without it trained every parameter */
    if (o->train_heads) json_object_set_new(j, "train", json_string("heads"));
    /* only when set: a state without it was written before the cap existed (sa's defaults) */
    if (o->reference_evals > 0) json_object_set_new(j, "reference_evals", json_integer(o->reference_evals));
    /* only when on: a state without it was written before the splice search (off) */
    if (o->splice > 0) json_object_set_new(j, "splice", json_integer(o->splice));
    /* only when on: a state without it was written before the search moved placements (off) */
    if (o->splice_place > 0) json_object_set_new(j, "splice_place", json_real(o->splice_place));
    /* only when set: a state without it batched the splice search by the samples (0) */
    if (o->splice_batch > 0) json_object_set_new(j, "splice_batch", json_integer(o->splice_batch));
    /* only when on: a state without it was written before samples followed the incumbent (off) */
    if (o->sample_variant) json_object_set_new(j, "sample_variant", json_string("incumbent"));
    /* only when on: a state without it was written before the style probation (off) */
    if (o->style_probation > 0) json_object_set_new(j, "style_probation", json_integer(o->style_probation));
    if (o->reference_anneal_max_nodes > 0)
        json_object_set_new(j, "reference_anneal_max_nodes", json_integer(o->reference_anneal_max_nodes));
    return j;
}

/* 16 hex digits (a u64 as save writes it); 0 when s is anything else. */
static int parse_hex64(const char *s, uint64_t *out) {
    if (!s || strlen(s) != 16 || strspn(s, "0123456789abcdefABCDEF") != 16) return 0;
    *out = (uint64_t)strtoull(s, NULL, 16);
    return 1;
}

static json_t *real_or_null(double x) { return isfinite(x) ? json_real(x) : json_null(); }
static double real_or_inf(json_t *x) { return json_is_number(x) ? json_number_value(x) : INFINITY; }

/* The actions behind a graph's best (self-imitation's target, 3n integers:
 * devices, priority levels, fusion levels), so that a resumed run imitates
 * what the uninterrupted one would. */
static json_t *actions_json(const tr_graph *G, const int32_t *act) {
    /* one hex digit per action (every action space is at most TR_MAX_WIDTH = 16 wide): 3n
     * characters, where an array of integers took some 7 bytes a value in the indented state */
    _Static_assert(TR_MAX_WIDTH <= 16, "best_actions: one hex digit per action");
    static const char hex[] = "0123456789abcdef";
    const size_t len = 3 * (size_t)G->fz->n;
    char *s = malloc(len + 1);
    if (!s) return NULL;
    for (size_t i = 0; i < len; i++) s[i] = hex[act[i] & 15];
    s[len] = '\0';
    json_t *a = json_stringn(s, len);
    free(s);
    return a;
}

/* A hex digit's value, -1 for anything else. */
static int hex_value(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Parse a graph's field of 3n actions (`field` of graph `name` in `file`) into v (3n):
 * a string of 3n hex digits, or, as states written before 2026-11-25 hold them, an array
 * of 3n integers; each in its action space (devices, priority levels, fusion levels). */
static gopt_status parse_actions(const gopt_trainer *t, const tr_graph *G, json_t *a, const char *file,
                                 const char *name, const char *field, int32_t *v, gopt_error *err) {
    const int32_t n = G->fz->n;
    const size_t len = 3 * (size_t)n;
    const int str = json_is_string(a);
    if (!(str ? json_string_length(a) == len : json_is_array(a) && json_array_size(a) == len))
        return gopt_error_set(err, GOPT_EFORMAT, "%s: graph '%s': %s is not a string of 3 x %d hex digits", file,
                              name, field, n);
    const char *sv = str ? json_string_value(a) : NULL;
    for (size_t i = 0; i < len; i++) { /* anything that is not a value: -1, out of range below */
        json_t *x = str ? NULL : json_array_get(a, i);
        json_int_t y = str ? hex_value(sv[i]) : json_is_integer(x) ? json_integer_value(x) : -1;
        v[i] = y < 0 || y > INT32_MAX ? -1 : (int32_t)y;
    }
    int32_t hi;
    int64_t bad = tr_actions_out_of_range(t, G, v, &hi);
    if (bad >= 0)
        return gopt_error_set(err, GOPT_EFORMAT, "%s: graph '%s': %s[%lld] is not a value in 0..%d", file, name,
                              field, (long long)bad, hi - 1);
    return GOPT_OK;
}

/* Decisions kept as they are (an answer the state keeps no actions for: the hint pass's, or the
 * best of a run without self-imitation): an object of three strings of n space-separated
 * integers, "device", "priority" and "group", in node order. */
static const char *const DEC_FIELDS[3] = {"device", "priority", "group"};

static json_t *decisions_json(const gopt_decisions *d) {
    json_t *o = json_object();
    const size_t n = (size_t)d->n, cap = 12 * (n ? n : 1);
    char *s = malloc(cap);
    if (!o || !s) goto fail;
    for (int f = 0; f < 3; f++) {
        const int32_t *v = f == 0 ? d->device : f == 1 ? d->priority : d->group;
        size_t len = 0;
        for (size_t i = 0; i < n; i++) len += (size_t)snprintf(s + len, cap - len, i ? " %d" : "%d", (int)v[i]);
        if (json_object_set_new(o, DEC_FIELDS[f], json_stringn(s, len))) goto fail;
    }
    free(s);
    return o;
fail:
    free(s);
    json_decref(o);
    return NULL;
}

/* Parse a graph's `field` (decisions_json's object) into d (initialised for the graph's n nodes
 * here), then check it as every decisions file is checked (gopt_decisions_validate). */
static gopt_status parse_decisions(const tr_graph *G, json_t *o, const char *file, const char *name,
                                   const char *field, gopt_decisions *d, gopt_error *err) {
    const int32_t n = G->fz->n;
    gopt_status st = tr_decisions_fit(d, n, err);
    if (st) return st;
    if (!json_is_object(o))
        return gopt_error_set(err, GOPT_EFORMAT, "%s: graph '%s': %s is not an object of device, priority and group",
                              file, name, field);
    for (int f = 0; f < 3; f++) {
        const char *s = json_string_value(json_object_get(o, DEC_FIELDS[f]));
        int32_t *v = f == 0 ? d->device : f == 1 ? d->priority : d->group;
        if (!s)
            return gopt_error_set(err, GOPT_EFORMAT, "%s: graph '%s': %s.%s is not a string of %d integers", file,
                                  name, field, DEC_FIELDS[f], n);
        for (int32_t i = 0; i < n; i++) {
            char *end;
            errno = 0;
            long x = strtol(s, &end, 10);
            if (end == s || errno || x < INT32_MIN || x > INT32_MAX || (*end && *end != ' '))
                return gopt_error_set(err, GOPT_EFORMAT, "%s: graph '%s': %s.%s[%d] is not an integer", file, name,
                                      field, DEC_FIELDS[f], i);
            v[i] = (int32_t)x;
            s = end;
        }
        if (*s)
            return gopt_error_set(err, GOPT_EFORMAT, "%s: graph '%s': %s.%s has more than %d integers", file, name,
                                  field, DEC_FIELDS[f], n);
    }
    gopt_error e2 = {0};
    if (gopt_decisions_validate(d, G->g, G->ndev, &e2))
        return gopt_error_set(err, GOPT_EFORMAT, "%s: graph '%s': %s: %s", file, name, field, e2.msg);
    return GOPT_OK;
}

static gopt_status load_best_actions(const gopt_trainer *t, tr_graph *G, json_t *a, const char *state,
                                     const char *name, gopt_error *err) {
    const size_t len = 3 * (size_t)G->fz->n;
    int32_t *v = malloc(sizeof(int32_t) * (len ? len : 1));
    if (!v) return gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", state);
    gopt_status st = parse_actions(t, G, a, state, name, "best_actions", v, err);
    if (!st) {
        gopt_policy_actions act = tr_actions_packed(v, G->fz->n);
        st = tr_note_best_actions(t, G, &act, err);
    }
    free(v);
    return st;
}

/* A graph's style probation (trainer.c, tr_probation_step): the incumbent's kind ("style", or
 * "own" once a sample of the policy's beat it), the own answer to fall back on (its step, actions
 * and variant), and once running its PPO steps so far and the best held when it began. */
static json_t *probation_json(const tr_graph *G) {
    json_t *o = json_object(), *a = actions_json(G, G->own_act);
    if (!o || !a) {
        json_decref(o);
        json_decref(a);
        return NULL;
    }
    json_object_set_new(o, "incumbent", json_string(G->best_style ? "style" : "own"));
    json_object_set_new(o, "own_s", json_real(G->own_s));
    json_object_set_new(o, "own_actions", a);
    json_object_set_new(o, "own_variant", json_integer(G->own_var));
    if (G->probation == 2) {
        json_object_set_new(o, "steps", json_integer(G->prob_steps));
        json_object_set_new(o, "held_s", json_real(G->prob_ref));
    }
    return o;
}

/* probation_json's object p of graph `name` into G. */
static gopt_status parse_probation(const gopt_trainer *t, tr_graph *G, json_t *p, const char *state, const char *name,
                                   gopt_error *err) {
    const size_t len = 3 * (size_t)G->fz->n;
    if (!t->o.style_probation || !t->o.imitate_best)
        return gopt_error_set(err, GOPT_EFORMAT, "%s: graph '%s': style_probation given, but the run has none", state,
                              name);
    if (!json_is_object(p))
        return gopt_error_set(err, GOPT_EFORMAT, "%s: graph '%s': style_probation is not an object", state, name);
    const char *inc = json_string_value(json_object_get(p, "incumbent"));
    json_t *sj = json_object_get(p, "own_s"), *vj = json_object_get(p, "own_variant"), *kj = json_object_get(p, "steps"),
           *hj = json_object_get(p, "held_s");
    const double own = json_is_number(sj) ? json_number_value(sj) : NAN, held = json_is_number(hj) ? json_number_value(hj) : NAN;
    const json_int_t var = json_is_integer(vj) ? json_integer_value(vj) : -1, k = json_is_integer(kj) ? json_integer_value(kj) : -1;
    const char *bad = !inc || (strcmp(inc, "style") && strcmp(inc, "own")) ? "incumbent is not \"style\" or \"own\""
                      : !(own > 0) || !isfinite(own)                       ? "own_s is not a step time > 0"
                      : var < 0 || var > 3                                 ? "own_variant is not an integer in 0..3"
                      : !kj != !hj                                         ? "steps and held_s come together"
                      : kj && (k < 0 || k >= t->o.style_probation)         ? "steps is not an integer below the probation's"
                      : hj && (!(held > 0) || !isfinite(held))             ? "held_s is not a step time > 0"
                                                                           : NULL;
    if (bad) return gopt_error_set(err, GOPT_EFORMAT, "%s: graph '%s': style_probation: %s", state, name, bad);
    if (!G->own_act && !(G->own_act = gopt_malloc(sizeof(int32_t) * (len ? len : 1), err))) return GOPT_ENOMEM;
    gopt_status st = parse_actions(t, G, json_object_get(p, "own_actions"), state, name, "style_probation.own_actions",
                                   G->own_act, err);
    if (st) return st;
    G->best_style = strcmp(inc, "style") == 0;
    G->own_s = own;
    G->own_var = (int)var;
    G->probation = kj ? 2 : 1;
    G->prob_steps = kj ? (int)k : 0;
    G->prob_ref = kj ? held : 0;
    return GOPT_OK;
}

gopt_status gopt_trainer_save(const gopt_trainer *t, const char *path, gopt_error *err) {
    size_t pl = strlen(path);
    char *next = malloc(pl + 8), *state = malloc(pl + 8);
    json_t *j = NULL;
    char *text = NULL;
    gopt_status st = GOPT_OK;
    if (!next || !state) {
        st = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
        goto out;
    }
    snprintf(next, pl + 8, "%s.next", path);
    snprintf(state, pl + 8, "%s.state", path);
    if ((st = gopt_policy_save(t->pol, next, err))) goto out;
    uint64_t hash = 0;
    int exists = 0;
    if ((st = file_fnv64(next, &hash, &exists, err))) goto out;
    j = json_object();
    json_object_set_new(j, "format", json_string(STATE_FORMAT));
    json_object_set_new(j, "version", json_integer(STATE_VERSION));
    json_object_set_new(j, "step", json_integer((json_int_t)t->step));
    json_t *rng = json_array();
    for (int i = 0; i < 4; i++) {
        char h[24];
        snprintf(h, sizeof h, "%016llx", (unsigned long long)t->rng.s[i]);
        json_array_append_new(rng, json_string(h));
    }
    json_object_set_new(j, "rng", rng);
    json_t *perm = json_array(), *sel = json_array();
    for (int i = 0; i < t->ng; i++) json_array_append_new(perm, json_integer(t->perm[i]));
    for (int i = 0; i < t->nsel; i++) json_array_append_new(sel, json_integer(t->sel[i]));
    json_object_set_new(j, "perm", perm);
    json_object_set_new(j, "cursor", json_integer(t->cursor));
    json_object_set_new(j, "sel", sel);
    json_object_set_new(j, "options", options_json(t));
    json_t *gs = json_array();
    json_object_set_new(j, "graphs", gs); /* j owns it, also on error */
    for (int i = 0; i < t->ng; i++) {
        const tr_graph *G = &t->graphs[i];
        json_t *g = json_object();
        json_object_set_new(g, "name", json_string(gopt_graph_name(G->g)));
        json_object_set_new(g, "nodes", json_integer(G->fz->n));
        json_object_set_new(g, "reference_s", json_real(G->ref));
        json_object_set_new(g, "reference_method", json_string(G->ref_method));
        json_object_set_new(g, "best_s", real_or_null(G->best));
        /* only when found: a state without it was written before the hint pass (none) */
        if (isfinite(G->alt)) json_object_set_new(g, "hint_pass_s", json_real(G->alt));
        /* the decisions of the answers the state keeps no actions for, so that a resumed run can
         * write them (--decisions): the hint pass's, and the best of a run without self-imitation */
        const int keep_act = t->o.imitate_best && G->has_best_act;
        for (int k = 0; k < 2; k++) {
            const int has = k ? isfinite(G->best) && G->has_best && !keep_act : isfinite(G->alt) && G->has_alt;
            if (!has) continue;
            json_t *dj = decisions_json(k ? &G->best_dec : &G->alt_dec);
            if (!dj) {
                json_decref(g);
                st = gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory writing the state", state);
                goto out;
            }
            json_object_set_new(g, k ? "best_decisions" : "hint_pass_decisions", dj);
        }
        /* only with an improved target: a resumed run must be given the same (gopt_trainer_load) */
        if (G->has_tgt_act) json_object_set_new(g, "target_s", json_real(G->tgt_step));
        if (G->has_tgt_act && G->tgt_tasks != GOPT_TASKS_ALL) json_object_set_new(g, "target_keep", json_string("place"));
        /* only with the splice search's own best (splice.c): a state without it had none */
        if (G->sp_s < G->best) {
            json_t *sa = actions_json(G, G->sp_act);
            if (!sa) {
                json_decref(g);
                st = gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory writing the state", state);
                goto out;
            }
            json_object_set_new(g, "splice_s", json_real(G->sp_s));
            json_object_set_new(g, "splice_actions", sa);
            if (G->sp_var) json_object_set_new(g, "splice_variant", json_integer(G->sp_var));
        }
        if (t->o.imitate_best && G->has_best_act) {
            json_t *ba = actions_json(G, G->best_act);
            if (!ba) {
                json_decref(g);
                st = gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory writing the state", state);
                goto out;
            }
            json_object_set_new(g, "best_actions", ba);
            /* only when not 0: a state without it made its best as the samples are made */
            if (G->best_var) json_object_set_new(g, "best_variant", json_integer(G->best_var));
        }
        /* only while a style's answer is on probation (trainer.c, tr_probation_step) */
        if (G->probation) {
            json_t *pj = probation_json(G);
            if (!pj) {
                json_decref(g);
                st = gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory writing the state", state);
                goto out;
            }
            json_object_set_new(g, "style_probation", pj);
        }
        const tr_prof *P = &t->profs[G->prof];
        char ph[24];
        snprintf(ph, sizeof ph, "%016llx", (unsigned long long)P->hash);
        json_object_set_new(g, "profile", json_string(P->name));
        json_object_set_new(g, "profile_fnv64", json_string(ph));
        json_object_set_new(g, "devices", json_integer(G->ndev));
        json_array_append_new(gs, g);
    }
    char c[24];
    snprintf(c, sizeof c, "%016llx", (unsigned long long)hash);
    json_object_set_new(j, "policy_fnv64", json_string(c));
    text = json_dumps(j, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
    if (!text) {
        st = gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory writing the state", state);
        goto out;
    }
    if ((st = gopt_file_write_atomic(state, text, strlen(text), 0, err))) goto out;
    if (rename(next, path) != 0)
        st = gopt_error_set(err, GOPT_EIO, "%s: cannot rename to %s: %s", next, path, strerror(errno));
out:
    free(text);
    json_decref(j);
    free(next);
    free(state);
    return st;
}

static gopt_status read_state(const char *state, json_t **out, gopt_error *err) {
    char *text = NULL;
    size_t len = 0;
    gopt_status st = gopt_file_read_all(state, &text, &len, err);
    if (st) return st;
    if ((st = gopt_json_check_numbers(text, len, state, err))) {
        free(text);
        return st;
    }
    json_error_t je;
    json_t *j = json_loadb(text, len, 0, &je);
    free(text);
    if (!j) return gopt_error_set(err, GOPT_EFORMAT, "%s: line %d: %s", state, je.line, je.text);
    json_t *f = json_object_get(j, "format"), *v = json_object_get(j, "version");
    if (!json_is_string(f) || strcmp(json_string_value(f), STATE_FORMAT) != 0 || !json_is_integer(v) ||
        json_integer_value(v) != STATE_VERSION) {
        json_decref(j);
        return gopt_error_set(err, GOPT_EFORMAT, "%s: not a %s version %d file", state, STATE_FORMAT, STATE_VERSION);
    }
    *out = j;
    return GOPT_OK;
}

gopt_status gopt_trainer_checkpoint_tasks(const char *path, unsigned *tasks, gopt_error *err) {
    *tasks = GOPT_TASKS_ALL;
    size_t pl = strlen(path);
    char *state = malloc(pl + 8);
    if (!state) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    snprintf(state, pl + 8, "%s.state", path);
    gopt_status st = GOPT_OK;
    if (access(state, F_OK) == 0) {
        json_t *j = NULL;
        if (!(st = read_state(state, &j, err))) {
            json_t *ts = json_object_get(json_object_get(j, "options"), "tasks");
            if (!json_is_string(ts))
                st = gopt_error_set(err, GOPT_EFORMAT, "%s: options.tasks is missing", state);
            else if ((st = gopt_trainer_parse_tasks(json_string_value(ts), tasks, err)))
                gopt_error_prefix(err, "%s: options.tasks", state); /* name the .state file, not the graph */
            json_decref(j);
        }
    }
    free(state);
    return st;
}

/* Compare the saved options with the trainer's: name the first difference. What trains is
 * compared first: it sets the learning rates' defaults (gopt finetune), so a run resumed with the
 * other kind would otherwise be told of its learning rate. */
static gopt_status check_options(const gopt_trainer *t, json_t *saved, const char *state, gopt_error *err) {
    json_t *mine = options_json(t);
    const char *key;
    json_t *val;
    gopt_status st = GOPT_OK;
    const json_t *tsaved = json_object_get(saved, "train"); /* "heads", or absent: all (options_json) */
    const int heads_saved = json_is_string(tsaved) && strcmp(json_string_value(tsaved), "heads") == 0;
    if ((!tsaved || heads_saved) && heads_saved != (t->o.train_heads != 0)) { /* else the loops name it */
        json_decref(mine);
        return gopt_error_set(err, GOPT_EINVAL,
                              "%s: option train was \"%s\", now \"%s\": resume with the same options (--train %s)",
                              state, heads_saved ? "heads" : "all", t->o.train_heads ? "heads" : "all",
                              heads_saved ? "heads" : "all");
    }
    json_object_foreach(mine, key, val) {
        json_t *s = json_object_get(saved, key);
        int same = s && (json_is_number(val) ? json_is_number(s) && json_number_value(s) == json_number_value(val)
                                             : json_equal(s, val));
        if (!same) {
            char *a = json_dumps(val, JSON_ENCODE_ANY), *b = s ? json_dumps(s, JSON_ENCODE_ANY) : NULL;
            st = gopt_error_set(err, GOPT_EINVAL, "%s: option %s was %s, now %s: resume with the same options", state,
                                key, b ? b : "missing", a ? a : "?");
            free(a);
            free(b);
            break;
        }
    }
    if (!st) /* a saved option this run does not have (e.g. canonical_targets on, now off) */
        json_object_foreach(saved, key, val) {
            if (json_object_get(mine, key)) continue;
            char *b = json_dumps(val, JSON_ENCODE_ANY);
            st = gopt_error_set(err, GOPT_EINVAL, "%s: option %s was %s, now missing: resume with the same options",
                                state, key, b ? b : "?");
            free(b);
            break;
        }
    json_decref(mine);
    return st;
}

gopt_status gopt_trainer_load(gopt_trainer *t, const char *path, gopt_error *err) {
    size_t pl = strlen(path);
    char *next = malloc(pl + 8), *state = malloc(pl + 8);
    json_t *j = NULL;
    gopt_status st = GOPT_OK;
    if (!next || !state) {
        st = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
        goto out;
    }
    snprintf(next, pl + 8, "%s.next", path);
    snprintf(state, pl + 8, "%s.state", path);
    if ((st = read_state(state, &j, err))) goto out;
    json_t *c = json_object_get(j, "policy_fnv64");
    uint64_t want = 0;
    if (!parse_hex64(json_string_value(c), &want)) {
        st = gopt_error_set(err, GOPT_EFORMAT, "%s: field 'policy_fnv64' is not 16 hex digits", state);
        goto out;
    }
    uint64_t hash = 0;
    int exists = 0;
    if ((st = file_fnv64(next, &hash, &exists, err))) goto out;
    if (exists && hash == want && rename(next, path) != 0) {
        st = gopt_error_set(err, GOPT_EIO, "%s: cannot rename to %s: %s", next, path, strerror(errno));
        goto out;
    }
    if ((st = file_fnv64(path, &hash, &exists, err))) goto out;
    if (!exists || hash != want) {
        st = gopt_error_set(err, GOPT_EFORMAT,
                            "%s: the policy file %s does not belong to this state (hash %016llx, want %016llx)", state,
                            path, (unsigned long long)(exists ? hash : 0), (unsigned long long)want);
        goto out;
    }
    if ((st = check_options(t, json_object_get(j, "options"), state, err))) goto out;
    json_t *gs = json_object_get(j, "graphs"), *perm = json_object_get(j, "perm"), *sel = json_object_get(j, "sel");
    json_t *rng = json_object_get(j, "rng"), *step = json_object_get(j, "step"), *cur = json_object_get(j, "cursor");
    if (!json_is_array(gs) || !json_is_array(perm) || !json_is_array(sel) || !json_is_array(rng) ||
        json_array_size(rng) != 4 || !json_is_integer(step) || json_integer_value(step) < 0 || !json_is_integer(cur)) {
        st = gopt_error_set(err, GOPT_EFORMAT, "%s: missing or malformed field (graphs, perm, sel, rng, step, cursor)",
                            state);
        goto out;
    }
    if ((int)json_array_size(gs) != t->ng || (int)json_array_size(perm) != t->ng ||
        json_array_size(sel) > (size_t)t->o.graphs_per_step) {
        st = gopt_error_set(err, GOPT_EINVAL, "%s: the run had %d graphs, now %d: resume with the same graphs", state,
                            (int)json_array_size(gs), t->ng);
        goto out;
    }
    for (int i = 0; i < t->ng; i++) {
        json_t *g = json_array_get(gs, i);
        const char *name = json_string_value(json_object_get(g, "name"));
        tr_graph *G = &t->graphs[i];
        double ref = real_or_inf(json_object_get(g, "reference_s"));
        if (!name || strcmp(name, gopt_graph_name(G->g)) != 0 ||
            json_integer_value(json_object_get(g, "nodes")) != G->fz->n) {
            st = gopt_error_set(err, GOPT_EINVAL, "%s: graph %d was '%s', now '%s' (%d nodes): resume with the same graphs in the same order",
                                state, i, name ? name : "?", gopt_graph_name(G->g), G->fz->n);
            goto out;
        }
        /* the graph's cluster: absent from states written before graphs had their own */
        json_t *pj = json_object_get(g, "profile"), *hj = json_object_get(g, "profile_fnv64"),
               *dj = json_object_get(g, "devices");
        const tr_prof *P = &t->profs[G->prof];
        uint64_t ph = 0;
        if ((pj && !json_is_string(pj)) || (hj && !parse_hex64(json_string_value(hj), &ph)) ||
            (dj && !json_is_integer(dj))) {
            st = gopt_error_set(err, GOPT_EFORMAT, "%s: graph '%s': profile, profile_fnv64 or devices is malformed",
                                state, name);
            goto out;
        }
        if (pj && strcmp(json_string_value(pj), P->name) != 0) {
            st = gopt_error_set(err, GOPT_EINVAL, "%s: graph '%s': profile was '%s', now '%s': resume with the same "
                                "profile per graph", state, name, json_string_value(pj), P->name);
            goto out;
        }
        if (hj && ph != P->hash) {
            st = gopt_error_set(err, GOPT_EINVAL, "%s: graph '%s': profile_fnv64 was %016llx, now %016llx (profile "
                                "'%s' changed): resume with the same profile files", state, name,
                                (unsigned long long)ph, (unsigned long long)P->hash, P->name);
            goto out;
        }
        if (dj && json_integer_value(dj) != G->ndev) {
            st = gopt_error_set(err, GOPT_EINVAL, "%s: graph '%s': devices was %lld, now %d: resume with the same "
                                "device count per graph", state, name, (long long)json_integer_value(dj), G->ndev);
            goto out;
        }
        if (!(fabs(ref - G->ref) <= 1e-9 * G->ref)) {
            st = gopt_error_set(err, GOPT_EINVAL, "%s: graph '%s': reference step %.9g s, now %.9g s (another profile?)",
                                state, name, ref, G->ref);
            goto out;
        }
        json_t *bj = json_object_get(g, "best_s");
        double best = real_or_inf(bj);
        if ((bj && !json_is_null(bj) && !json_is_number(bj)) || !(best > 0)) {
            st = gopt_error_set(err, GOPT_EFORMAT, "%s: graph '%s': best_s is not a step time > 0 or null", state, name);
            goto out;
        }
        json_t *altj = json_object_get(g, "hint_pass_s");
        const double alt = altj ? real_or_inf(altj) : INFINITY;
        if (altj && (!json_is_number(altj) || !(alt > 0))) {
            st = gopt_error_set(err, GOPT_EFORMAT, "%s: graph '%s': hint_pass_s is not a step time > 0", state, name);
            goto out;
        }
        json_t *spj = json_object_get(g, "splice_s"), *spa = json_object_get(g, "splice_actions");
        const double sps = spj ? real_or_inf(spj) : INFINITY;
        if (spj && (!json_is_number(spj) || !(sps > 0) || !isfinite(sps))) {
            st = gopt_error_set(err, GOPT_EFORMAT, "%s: graph '%s': splice_s is not a step time > 0", state, name);
            goto out;
        }
        if (!spj != !spa) {
            st = gopt_error_set(err, GOPT_EFORMAT, "%s: graph '%s': splice_s and splice_actions come together, "
                                "found only %s", state, name, spj ? "splice_s" : "splice_actions");
            goto out;
        }
        json_t *svj = json_object_get(g, "splice_variant");
        const json_int_t svar = svj ? json_integer_value(svj) : 0; /* absent: 0, as states before it */
        if (svj && (!spa || !json_is_integer(svj) || svar < 0 || svar > 3)) {
            st = gopt_error_set(err, GOPT_EFORMAT, "%s: graph '%s': splice_variant is %s", state, name,
                                spa ? "not an integer in 0..3" : "given without splice_actions");
            goto out;
        }
        G->sp_var = (int)svar;
        if (spa) {
            const size_t len = 3 * (size_t)G->fz->n;
            if (!G->sp_act && !(G->sp_act = gopt_malloc(sizeof(int32_t) * (len ? len : 1), err))) {
                st = GOPT_ENOMEM;
                goto out;
            }
            if ((st = parse_actions(t, G, spa, state, name, "splice_actions", G->sp_act, err))) goto out;
        }
        json_t *tj = json_object_get(g, "target_s");
        if (tj && !json_is_number(tj)) {
            st = gopt_error_set(err, GOPT_EFORMAT, "%s: graph '%s': target_s is not a number", state, name);
            goto out;
        }
        if ((tj != NULL) != (G->has_tgt_act != 0) ||
            (tj && !(fabs(json_number_value(tj) - G->tgt_step) <= 1e-9 * G->tgt_step))) {
            char was[32] = "none", now[32] = "none";
            if (tj) snprintf(was, sizeof was, "%.9g s", json_number_value(tj));
            if (G->has_tgt_act) snprintf(now, sizeof now, "%.9g s", G->tgt_step);
            st = gopt_error_set(err, GOPT_EINVAL, "%s: graph '%s': its improved imitation target was %s, now %s: "
                                "resume with the same --targets", state, name, was, now);
            goto out;
        }
        json_t *kj = json_object_get(g, "target_keep");
        const int kept_place = json_is_string(kj) && strcmp(json_string_value(kj), "place") == 0;
        if ((kj && !kept_place) || (G->has_tgt_act && kept_place != (G->tgt_tasks != GOPT_TASKS_ALL))) {
            st = gopt_error_set(err, GOPT_EINVAL, "%s: graph '%s': its improved target was kept for %s, now for %s: "
                                "resume with the same --targets-keep", state, name, kept_place ? "place" : "all",
                                G->tgt_tasks != GOPT_TASKS_ALL ? "place" : "all");
            goto out;
        }
        G->ref = ref;
        G->best = best;
        G->alt = alt;
        G->sp_s = sps;
        G->has_sp_dec = 0;
        G->has_best = 0;
        json_t *aj = json_object_get(g, "best_actions"), *vj = json_object_get(g, "best_variant");
        const json_int_t var = vj ? json_integer_value(vj) : 0;
        if (vj && (!aj || !json_is_integer(vj) || var < 0 || var > 3)) {
            st = gopt_error_set(err, GOPT_EFORMAT, "%s: graph '%s': best_variant is %s", state, name,
                                aj ? "not an integer in 0..3" : "given without best_actions");
            goto out;
        }
        if (aj && (st = load_best_actions(t, G, aj, state, name, err))) goto out;
        G->best_var = (int)var;
        json_t *prj = json_object_get(g, "style_probation");
        G->probation = 0;
        G->best_style = 0;
        if (prj && !aj) {
            st = gopt_error_set(err, GOPT_EFORMAT, "%s: graph '%s': style_probation given without best_actions", state,
                                name);
            goto out;
        }
        if (prj && (st = parse_probation(t, G, prj, state, name, err))) goto out;
        /* the decisions are not kept: made again from the actions, as they were made */
        if ((st = tr_restore_decisions(t, G, err))) goto out;
        /* but for the answers without actions (save): kept as they are */
        json_t *hdj = json_object_get(g, "hint_pass_decisions"), *bdj = json_object_get(g, "best_decisions");
        if ((hdj && !isfinite(alt)) || (bdj && (!isfinite(best) || aj))) {
            st = gopt_error_set(err, GOPT_EFORMAT, "%s: graph '%s': %s", state, name,
                                hdj && !isfinite(alt) ? "hint_pass_decisions given without hint_pass_s"
                                : aj ? "best_decisions given with best_actions (one or the other)"
                                     : "best_decisions given without best_s");
            goto out;
        }
        G->has_alt = 0;
        if (hdj) {
            if ((st = parse_decisions(G, hdj, state, name, "hint_pass_decisions", &G->alt_dec, err))) goto out;
            G->has_alt = 1;
        }
        if (bdj) {
            if ((st = parse_decisions(G, bdj, state, name, "best_decisions", &G->best_dec, err))) goto out;
            G->has_best = 1;
        }
    }
    for (int i = 0; i < t->ng; i++) {
        json_int_t p = json_integer_value(json_array_get(perm, i));
        if (p < 0 || p >= t->ng) {
            st = gopt_error_set(err, GOPT_EFORMAT, "%s: perm[%d] = %lld is out of range", state, i, (long long)p);
            goto out;
        }
        t->perm[i] = (int32_t)p;
    }
    t->nsel = (int)json_array_size(sel);
    for (int i = 0; i < t->nsel; i++) {
        json_int_t p = json_integer_value(json_array_get(sel, i));
        if (p < 0 || p >= t->ng) {
            st = gopt_error_set(err, GOPT_EFORMAT, "%s: sel[%d] = %lld is out of range", state, i, (long long)p);
            goto out;
        }
        t->sel[i] = (int32_t)p;
    }
    json_int_t cu = json_integer_value(cur);
    if (cu < 0 || cu >= (t->ng ? t->ng : 1)) {
        st = gopt_error_set(err, GOPT_EFORMAT, "%s: cursor = %lld is out of range", state, (long long)cu);
        goto out;
    }
    gopt_rng rs;
    for (int i = 0; i < 4; i++) {
        if (!parse_hex64(json_string_value(json_array_get(rng, i)), &rs.s[i])) {
            st = gopt_error_set(err, GOPT_EFORMAT, "%s: rng[%d] is not 16 hex digits", state, i);
            goto out;
        }
    }
    if (!(rs.s[0] | rs.s[1] | rs.s[2] | rs.s[3])) { /* xoshiro's one fixed point: it would draw 0 forever */
        st = gopt_error_set(err, GOPT_EFORMAT, "%s: rng state is all zero", state);
        goto out;
    }
    t->rng = rs;
    if ((st = gopt_policy_load_into(t->pol, path, err))) goto out;
    t->cursor = (int32_t)cu;
    t->step = (int64_t)json_integer_value(step);
out:
    json_decref(j);
    free(next);
    free(state);
    return st;
}

gopt_status gopt_trainer_load_targets(gopt_trainer *t, const char *dir, int keep, gopt_trainer_targets *rep,
                                      gopt_error *err) {
    memset(rep, 0, sizeof *rep);
    gopt_status st = GOPT_OK;
    int32_t *v = NULL;
    size_t cap = 0;
    for (int i = 0; i < t->ng && !st; i++) {
        tr_graph *G = &t->graphs[i];
        const char *name = gopt_graph_name(G->g);
        size_t pl = strlen(dir) + strlen(name) + 16;
        char *path = malloc(pl);
        if (!path) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
        snprintf(path, pl, "%s/%s.ckpt.state", dir, name);
        json_t *j = NULL;
        if (access(path, F_OK) != 0) {
            free(path);
            continue;
        }
        rep->files++;
        if ((st = read_state(path, &j, err))) goto next;
        json_t *gs = json_object_get(j, "graphs"), *g = NULL;
        for (size_t k = 0; json_is_array(gs) && k < json_array_size(gs); k++) {
            const char *nk = json_string_value(json_object_get(json_array_get(gs, k), "name"));
            if (nk && strcmp(nk, name) == 0) g = json_array_get(gs, k);
        }
        if (!g) {
            st = gopt_error_set(err, GOPT_EFORMAT, "%s: no graph named '%s' in its graphs", path, name);
            goto next;
        }
        json_t *nj = json_object_get(g, "nodes");
        if (!json_is_integer(nj) || json_integer_value(nj) != G->fz->n) {
            st = gopt_error_set(err, GOPT_EFORMAT, "%s: graph '%s': nodes is %lld, the graph has %d (another graph "
                                "of that name?)", path, name, json_is_integer(nj) ? (long long)json_integer_value(nj) : -1LL,
                                G->fz->n);
            goto next;
        }
        uint64_t ph = 0;
        json_t *dj = json_object_get(g, "devices");
        if (!parse_hex64(json_string_value(json_object_get(g, "profile_fnv64")), &ph) || !json_is_integer(dj)) {
            st = gopt_error_set(err, GOPT_EFORMAT, "%s: graph '%s': profile_fnv64 or devices is missing or malformed",
                                path, name);
            goto next;
        }
        if (ph != t->profs[G->prof].hash || json_integer_value(dj) != G->ndev) {
            rep->other_cluster++;
            goto next;
        }
        json_t *aj = json_object_get(g, "best_actions");
        if (!aj) {
            st = gopt_error_set(err, GOPT_EFORMAT, "%s: graph '%s': no best_actions (a run without self-imitation, "
                                "or one that found nothing?)", path, name);
            goto next;
        }
        const size_t len = 3 * (size_t)G->fz->n;
        if (len > cap) {
            int32_t *nv = realloc(v, sizeof(int32_t) * len);
            if (!nv) {
                st = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
                goto next;
            }
            v = nv;
            cap = len;
        }
        if ((st = parse_actions(t, G, aj, path, name, "best_actions", v, err))) goto next;
        int used = 0;
        double step = 0;
        if ((st = gopt_trainer_set_target(t, i, v, keep, &used, &step, err))) {
            gopt_error_prefix(err, "%s", path);
            goto next;
        }
        if (used) {
            rep->used++;
            rep->rel_sum += step / G->ref;
        } else {
            rep->slower++;
        }
    next:
        json_decref(j);
        free(path);
    }
    free(v);
    return st;
}
