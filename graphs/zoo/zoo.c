/* zoo.c: the family table (names, default sizes, optimizer, size limits)
 * and gopt_zoo_generate, which validates a spec, estimates its node count
 * (refusing specs past GOPT_ZOO_MAX_NODES before allocating anything) and
 * runs the family's forward description plus zoo_backward.
 */
#include <stdio.h>
#include <string.h>

#include "zoo_internal.h"

int zoo_resnet_depth_ok(int depth);

typedef struct {
    const char *name;
    zoo_family_fn build;
    int layers, batch, seq;
    gopt_optimizer optim;
    int min_seq;         /* smallest sequence length / image side that builds */
    double nodes_per[3]; /* node estimate: a + b*layers + c*layers*seq (upper bound) */
} zoo_family;

static const zoo_family FAMILIES[] = {
    {"rnnlm", zoo_rnnlm, 2, 64, 20, GOPT_OPTIM_SGD, 1, {40, 10, 50}},
    {"gnmt", zoo_gnmt, 4, 128, 80, GOPT_OPTIM_ADAM, 1, {40, 20, 130}},
    {"transformer_xl", zoo_transformer_xl, 4, 16, 5120, GOPT_OPTIM_ADAM, 1, {40, 60, 3}},
    {"inception_v3", zoo_inception_v3, 0, 32, 299, GOPT_OPTIM_MOMENTUM, 75, {3000, 0, 0}},
    {"amoebanet", zoo_amoebanet, 6, 32, 331, GOPT_OPTIM_MOMENTUM, 32, {1500, 1000, 0}},
    {"wavenet", zoo_wavenet, 30, 4, 16000, GOPT_OPTIM_ADAM, 1, {60, 60, 0}},
    {"resnet", zoo_resnet, 50, 32, 224, GOPT_OPTIM_MOMENTUM, 32, {300, 30, 0}},
};
#define NFAMILIES ((int)(sizeof FAMILIES / sizeof FAMILIES[0]))

int gopt_zoo_family_count(void) { return NFAMILIES; }
const char *gopt_zoo_family_name(int i) { return i >= 0 && i < NFAMILIES ? FAMILIES[i].name : NULL; }

static const char *const OPTIM_NAMES[] = {"default", "sgd", "momentum", "adam", "rmsprop", "adamw"};

const char *gopt_optimizer_name(gopt_optimizer o) {
    return o >= GOPT_OPTIM_DEFAULT && o <= GOPT_OPTIM_ADAMW ? OPTIM_NAMES[o] : NULL;
}

int gopt_optimizer_parse(const char *name) {
    for (int k = GOPT_OPTIM_SGD; name && k <= GOPT_OPTIM_ADAMW; k++)
        if (strcmp(name, OPTIM_NAMES[k]) == 0) return k;
    return -1;
}

static const zoo_family *find_family(const char *name) {
    for (int i = 0; name && i < NFAMILIES; i++)
        if (strcmp(FAMILIES[i].name, name) == 0) return &FAMILIES[i];
    return NULL;
}

static gopt_status check_size(const char *family, const char *field, int v, int lo, int hi, gopt_error *err) {
    if (v < lo || v > hi)
        return gopt_error_set(err, GOPT_EINVAL, "family %s: %s = %d is out of range [%d, %d]", family, field, v, lo, hi);
    return GOPT_OK;
}

gopt_status gopt_zoo_resolve(const gopt_zoo_spec *spec, gopt_zoo_spec *out, gopt_error *err) {
    const zoo_family *f = find_family(spec->family);
    if (!f) {
        char names[256] = "";
        for (int i = 0; i < NFAMILIES; i++) {
            strncat(names, i ? ", " : "", sizeof names - strlen(names) - 1);
            strncat(names, FAMILIES[i].name, sizeof names - strlen(names) - 1);
        }
        return gopt_error_set(err, GOPT_EINVAL, "unknown family '%s' (known: %s)", spec->family ? spec->family : "",
                              names);
    }
    *out = *spec;
    out->family = f->name;
    if (!out->layers) out->layers = f->layers;
    if (!out->batch) out->batch = f->batch;
    if (!out->seq) out->seq = f->seq;
    if (out->optimizer == GOPT_OPTIM_DEFAULT) out->optimizer = f->optim;
    gopt_status st;
    if (f->layers == 0 && out->layers != 0)
        return gopt_error_set(err, GOPT_EINVAL, "family %s: layers = %d, but this family has a fixed depth", f->name,
                              out->layers);
    if (f->layers && (st = check_size(f->name, "layers", out->layers, 1, 4096, err)) != GOPT_OK) return st;
    if ((st = check_size(f->name, "batch", out->batch, 1, 65536, err)) != GOPT_OK) return st;
    int max_seq = f->min_seq > 1 ? 4096 : 1 << 20;
    if ((st = check_size(f->name, "seq", out->seq, f->min_seq, max_seq, err)) != GOPT_OK) return st;
    if (out->optimizer < GOPT_OPTIM_SGD || out->optimizer > GOPT_OPTIM_ADAMW || out->optimizer == GOPT_OPTIM_RMSPROP)
        return gopt_error_set(err, GOPT_EINVAL, "family %s: optimizer %d is not valid", f->name, (int)out->optimizer);
    if (f->build == zoo_resnet && !zoo_resnet_depth_ok(out->layers))
        return gopt_error_set(err, GOPT_EINVAL, "family resnet: layers = %d is not a ResNet depth (18, 34, 50, 101, 152)",
                              out->layers);
    double est = f->nodes_per[0] + f->nodes_per[1] * out->layers + f->nodes_per[2] * out->layers * (double)out->seq;
    if (est > GOPT_ZOO_MAX_NODES)
        return gopt_error_set(err, GOPT_EINVAL,
                              "family %s: layers = %d, seq = %d would give about %.3g nodes, over the limit of %d",
                              f->name, out->layers, out->seq, est, GOPT_ZOO_MAX_NODES);
    return GOPT_OK;
}

gopt_status gopt_zoo_generate(const gopt_zoo_spec *spec, gopt_graph **out, gopt_error *err) {
    *out = NULL;
    gopt_zoo_spec s;
    gopt_status st = gopt_zoo_resolve(spec, &s, err);
    if (st != GOPT_OK) return st;
    const zoo_family *f = find_family(s.family);
    char name[128];
    if (f->layers) snprintf(name, sizeof name, "%s_l%d_b%d_s%d", s.family, s.layers, s.batch, s.seq);
    else snprintf(name, sizeof name, "%s_b%d_s%d", s.family, s.batch, s.seq);
    zoo_builder b;
    if ((st = zoo_begin(&b, name, s.family, s.optimizer, err)) != GOPT_OK) return st;
    b.clip = s.clip_grad_norm != 0;
    f->build(&b, &s);
    return zoo_finish(&b, out);
}

gopt_status gopt_zoo_save(const gopt_graph *g, const char *path, int gzip_level, gopt_error *err) {
    if (gzip_level < 1 || gzip_level > 9)
        return gopt_error_set(err, GOPT_EINVAL, "%s: gzip level %d is not in [1, 9]", path, gzip_level);
    gopt_buf b;
    gopt_buf_init(&b);
    gopt_status st = gopt_graph_write_graphml(g, &b, err);
    if (st == GOPT_OK) st = gopt_file_write_atomic(path, b.data, b.len, gzip_level, err);
    gopt_buf_destroy(&b);
    return st;
}
