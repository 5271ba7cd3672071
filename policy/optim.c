/* optim.c: Adam (with decoupled weight decay and global-norm clipping) and
 * checkpoints of the policy.
 *
 * Checkpoint file (then gzip-compressed as a whole, written atomically):
 *   "GOPTPOL" NUL          8 bytes magic
 *   u32 version            CKPT_VERSION
 *   i32 config[19]         hidden, sage_layers, attn_layers, heads, segment,
 *                          ffn_mult, max_devices, sched_levels, fusion_levels,
 *                          memory_grad, cond_hidden (version 2: the
 *                          conditioned decoder; version 1 files have the
 *                          first 10 and load with cond_hidden = 0: the same
 *                          network, decoded with the memory masks only),
 *                          hints (version 3; version 2 files have the first
 *                          11 and load with hints = 0: the same network),
 *                          hint_quality, fuse_cond, sched_cond (version 4;
 *                          older files load with all three 0: the same
 *                          network), fuse_merge, fuse_hint (version 5;
 *                          older files load with 0: the fusion pass they
 *                          were trained with, two rows of cond.fgrp),
 *                          fuse_hint_level (version 6; older files load
 *                          with 0), place_succ (version 7; older files
 *                          load with 0: the same network)
 *   u32 nfeat              GOPT_POLICY_NFEAT (feature layout)
 *   u64 nparams, u64 adam_t
 *   f32 params[nparams], m[nparams], v[nparams]
 *   u32 crc32 of every byte before it
 * On load every parameter must lie in [-1e3, 1e3] and every moment in
 * [-1e6, 1e6] (v in [0, 1e6]): finite but absurd values are refused.
 * Integers and floats little-endian (the host order; gopt targets x86-64
 * and arm64). Cost O(nparams).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "policy_net.h"

#define CKPT_MAGIC "GOPTPOL"
#define CKPT_VERSION 7u
#define CKPT_NCFG 19
/* config fields stored by each version (index: version) */
static const int ckpt_ncfg[] = {0, 10, 11, 12, 15, 17, 18, 19};
#define CKPT_HEADER_V(ncfg) (8 + 4 + 4 * (ncfg) + 4 + 8 + 8)
#define CKPT_HEADER CKPT_HEADER_V(CKPT_NCFG)
#define CKPT_MAX_PARAM 1e3  /* |parameter| on load */
#define CKPT_MAX_MOMENT 1e6 /* |m| and v (>= 0) on load */

void gopt_adam_config_default(gopt_adam_config *c) {
    c->lr = 3e-4f;
    c->beta1 = 0.9f;
    c->beta2 = 0.999f;
    c->eps = 1e-8f;
    c->weight_decay = 0.0f;
    c->clip_norm = 1.0f;
}

void gopt_policy_shrink(gopt_policy *p, float lambda) {
    for (size_t i = 0; i < p->nparams; i++) p->params[i] *= lambda;
}

void gopt_policy_adam_reset(gopt_policy *p) {
    memset(p->m, 0, sizeof(float) * p->nparams);
    memset(p->v, 0, sizeof(float) * p->nparams);
    p->adam_t = 0;
}

gopt_status gopt_policy_adam_step(gopt_policy *p, const gopt_adam_config *c, float *grad_norm, gopt_error *err) {
    if (!(c->lr >= 0.0f) || !(c->beta1 >= 0.0f && c->beta1 < 1.0f) || !(c->beta2 >= 0.0f && c->beta2 < 1.0f) ||
        !(c->eps > 0.0f))
        return gopt_error_set(err, GOPT_EINVAL, "adam: bad config (lr %g, beta1 %g, beta2 %g, eps %g)", (double)c->lr,
                              (double)c->beta1, (double)c->beta2, (double)c->eps);
    const size_t first = p->heads_only ? policy_heads_offset(p) : 0; /* the trunk stays (set_train_heads) */
    double ss = 0.0;
    for (size_t i = first; i < p->nparams; i++) ss += (double)p->grads[i] * p->grads[i];
    double norm = sqrt(ss);
    if (grad_norm) *grad_norm = (float)norm;
    if (!isfinite(norm)) return gopt_error_set(err, GOPT_EINVAL, "adam: gradient norm is %g; parameters untouched", norm);
    float scale = (c->clip_norm > 0.0f && norm > c->clip_norm) ? (float)(c->clip_norm / norm) : 1.0f;
    p->adam_t++;
    float bc1 = 1.0f - powf(c->beta1, (float)p->adam_t), bc2 = 1.0f - powf(c->beta2, (float)p->adam_t);
    for (int t = 0; t < p->nt; t++) {
        const policy_tensor *tt = &p->tab[t];
        if (tt->off < first) continue;
        float wd = tt->decay ? c->weight_decay : 0.0f;
        float *w = p->params + tt->off, *g = p->grads + tt->off, *m = p->m + tt->off, *v = p->v + tt->off;
        for (size_t i = 0; i < tt->count; i++) {
            float gi = g[i] * scale;
            m[i] = c->beta1 * m[i] + (1.0f - c->beta1) * gi;
            v[i] = c->beta2 * v[i] + (1.0f - c->beta2) * gi * gi;
            float mh = m[i] / bc1, vh = v[i] / bc2;
            w[i] -= c->lr * (mh / (sqrtf(vh) + c->eps) + wd * w[i]);
        }
    }
    return GOPT_OK;
}

/* ---- checkpoints -------------------------------------------------------------------- */
static void cfg_to_array(const gopt_policy_config *c, int32_t a[CKPT_NCFG]) {
    a[0] = c->hidden;
    a[1] = c->sage_layers;
    a[2] = c->attn_layers;
    a[3] = c->heads;
    a[4] = c->segment;
    a[5] = c->ffn_mult;
    a[6] = c->max_devices;
    a[7] = c->sched_levels;
    a[8] = c->fusion_levels;
    a[9] = c->memory_grad;
    a[10] = c->cond_hidden;
    a[11] = c->hints;
    a[12] = c->hint_quality;
    a[13] = c->fuse_cond;
    a[14] = c->sched_cond;
    a[15] = c->fuse_merge;
    a[16] = c->fuse_hint;
    a[17] = c->fuse_hint_level;
    a[18] = c->place_succ;
}
static void cfg_from_array(gopt_policy_config *c, const int32_t a[CKPT_NCFG]) {
    c->hidden = a[0];
    c->sage_layers = a[1];
    c->attn_layers = a[2];
    c->heads = a[3];
    c->segment = a[4];
    c->ffn_mult = a[5];
    c->max_devices = a[6];
    c->sched_levels = a[7];
    c->fusion_levels = a[8];
    c->memory_grad = a[9];
    c->cond_hidden = a[10];
    c->hints = a[11];
    c->hint_quality = a[12];
    c->fuse_cond = a[13];
    c->sched_cond = a[14];
    c->fuse_merge = a[15];
    c->fuse_hint = a[16];
    c->fuse_hint_level = a[17];
    c->place_succ = a[18];
}
static const char *cfg_names[CKPT_NCFG] = {"hidden",   "sage_layers", "attn_layers",  "heads",        "segment",
                                           "ffn_mult", "max_devices", "sched_levels", "fusion_levels", "memory_grad",
                                           "cond_hidden", "hints", "hint_quality", "fuse_cond", "sched_cond",
                                           "fuse_merge", "fuse_hint", "fuse_hint_level", "place_succ"};

gopt_status gopt_policy_save(const gopt_policy *p, const char *path, gopt_error *err) {
    size_t fb = sizeof(float) * p->nparams;
    size_t len = CKPT_HEADER + 3 * fb + 4;
    unsigned char *buf = gopt_malloc(len, err);
    if (!buf) return GOPT_ENOMEM;
    unsigned char *q = buf;
    memcpy(q, CKPT_MAGIC, 8);
    q += 8;
    uint32_t ver = CKPT_VERSION, nfeat = GOPT_POLICY_NFEAT;
    int32_t cfg[CKPT_NCFG];
    cfg_to_array(&p->cfg, cfg);
    uint64_t np = p->nparams, at = p->adam_t;
    memcpy(q, &ver, 4), q += 4;
    memcpy(q, cfg, sizeof cfg), q += sizeof cfg;
    memcpy(q, &nfeat, 4), q += 4;
    memcpy(q, &np, 8), q += 8;
    memcpy(q, &at, 8), q += 8;
    memcpy(q, p->params, fb), q += fb;
    memcpy(q, p->m, fb), q += fb;
    memcpy(q, p->v, fb), q += fb;
    uint32_t crc = (uint32_t)crc32(0L, buf, (uInt)(q - buf));
    memcpy(q, &crc, 4);
    gopt_status st = gopt_file_write_atomic(path, buf, len, 6, err);
    free(buf);
    return st;
}

/* Parse and check a checkpoint into a fresh policy. */
static gopt_status read_checkpoint(const char *path, gopt_policy **out, gopt_error *err) {
    *out = NULL;
    char *data = NULL;
    size_t len = 0;
    gopt_status st = gopt_file_read_all(path, &data, &len, err);
    if (st) return st;
    const unsigned char *b = (const unsigned char *)data;
    gopt_policy *p = NULL;
    if (len < 8 || memcmp(b, CKPT_MAGIC, 8) != 0) {
        st = gopt_error_set(err, GOPT_EFORMAT, "%s: not a gopt policy checkpoint (bad magic)", path);
        goto out;
    }
    uint32_t ver, nfeat;
    int32_t cfga[CKPT_NCFG] = {0}; /* version 1: no cond_hidden, i.e. 0; 1, 2: no hints; 1-3: none of the version 4 fields; 1-4: fuse_merge, fuse_hint 0; 1-5: fuse_hint_level 0; 1-6: place_succ 0 */
    uint64_t np, at;
    const unsigned char *q = b + 8;
    if (len < 12 + 4) {
        st = gopt_error_set(err, GOPT_EFORMAT, "%s: truncated checkpoint (%zu bytes)", path, len);
        goto out;
    }
    memcpy(&ver, q, 4), q += 4;
    if (ver < 1 || ver > CKPT_VERSION) {
        st = gopt_error_set(err, GOPT_EFORMAT, "%s: checkpoint version %u, this build reads versions 1 to %u", path,
                            ver, CKPT_VERSION);
        goto out;
    }
    const int ncfg = ckpt_ncfg[ver];
    const size_t header = CKPT_HEADER_V(ncfg);
    if (len < header + 4) {
        st = gopt_error_set(err, GOPT_EFORMAT, "%s: truncated checkpoint (%zu bytes, header needs %zu)", path, len,
                            header + 4);
        goto out;
    }
    memcpy(cfga, q, sizeof(int32_t) * (size_t)ncfg), q += sizeof(int32_t) * (size_t)ncfg;
    memcpy(&nfeat, q, 4), q += 4;
    memcpy(&np, q, 8), q += 8;
    memcpy(&at, q, 8), q += 8;
    if (nfeat != GOPT_POLICY_NFEAT) {
        st = gopt_error_set(err, GOPT_EFORMAT, "%s: checkpoint has %u features per node, this build has %d", path,
                            nfeat, GOPT_POLICY_NFEAT);
        goto out;
    }
    gopt_policy_config cfg;
    cfg_from_array(&cfg, cfga);
    if ((st = gopt_policy_config_check(&cfg, err))) {
        gopt_error_prefix(err, "%s", path);
        st = GOPT_EFORMAT;
        if (err) err->code = st;
        goto out;
    }
    /* sizes before any allocation: an 88-byte file naming a 1024-wide network must not cost a
     * gigabyte and seconds of initialisation before it is refused */
    size_t need = policy_config_num_params(&cfg, err);
    if (!need) {
        st = GOPT_ENOMEM;
        goto out;
    }
    if (np != need) {
        st = gopt_error_set(err, GOPT_EFORMAT, "%s: checkpoint holds %llu parameters, its config needs %zu", path,
                            (unsigned long long)np, need);
        goto out;
    }
    size_t fb = sizeof(float) * need, want = header + 3 * fb + 4;
    if (len != want) {
        st = gopt_error_set(err, GOPT_EFORMAT, "%s: checkpoint is %zu bytes, expected %zu (%s)", path, len, want,
                            len < want ? "truncated" : "trailing data");
        goto out;
    }
    if ((st = gopt_policy_create(&p, &cfg, 0, err))) goto out;
    uint32_t crc_file, crc = (uint32_t)crc32(0L, b, (uInt)(len - 4));
    memcpy(&crc_file, b + len - 4, 4);
    if (crc != crc_file) {
        st = gopt_error_set(err, GOPT_EFORMAT, "%s: checkpoint is corrupt (CRC-32 %08x, stored %08x)", path, crc,
                            crc_file);
        goto out;
    }
    memcpy(p->params, q, fb), q += fb;
    memcpy(p->m, q, fb), q += fb;
    memcpy(p->v, q, fb);
    p->adam_t = at;
    /* A trained network's weights stay within a few units (the shipped one: |w| < 4); 3e38 is
     * finite but makes every activation inf or NaN. The moments are bounded likewise. */
    for (size_t i = 0; i < p->nparams; i++)
        if (!(fabsf(p->params[i]) <= CKPT_MAX_PARAM) || !(fabsf(p->m[i]) <= CKPT_MAX_MOMENT) ||
            !(p->v[i] >= 0 && p->v[i] <= CKPT_MAX_MOMENT)) {
            int which = !(fabsf(p->params[i]) <= CKPT_MAX_PARAM) ? 0 : !(fabsf(p->m[i]) <= CKPT_MAX_MOMENT) ? 1 : 2;
            static const char *const what[3] = {"parameter", "Adam first moment of parameter",
                                                "Adam second moment of parameter"};
            float x = which == 0 ? p->params[i] : which == 1 ? p->m[i] : p->v[i];
            st = gopt_error_set(err, GOPT_EFORMAT, "%s: %s %zu = %g is outside [%g, %g]", path, what[which], i,
                                (double)x, which == 2 ? 0.0 : -(which ? CKPT_MAX_MOMENT : CKPT_MAX_PARAM),
                                which ? CKPT_MAX_MOMENT : CKPT_MAX_PARAM);
            goto out;
        }
    *out = p;
    p = NULL;
out:
    gopt_policy_free(p);
    free(data);
    return st;
}

gopt_status gopt_policy_load(gopt_policy **out, const char *path, gopt_error *err) {
    return read_checkpoint(path, out, err);
}

gopt_status gopt_policy_load_into(gopt_policy *p, const char *path, gopt_error *err) {
    gopt_policy *q = NULL;
    gopt_status st = read_checkpoint(path, &q, err);
    if (st) return st;
    int32_t a[CKPT_NCFG], b[CKPT_NCFG];
    cfg_to_array(&p->cfg, a);
    cfg_to_array(&q->cfg, b);
    for (int i = 0; i < CKPT_NCFG; i++)
        if (a[i] != b[i]) {
            st = gopt_error_set(err, GOPT_EINVAL, "%s: checkpoint config %s = %d, this policy has %d", path,
                                cfg_names[i], (int)b[i], (int)a[i]);
            gopt_policy_free(q);
            return st;
        }
    size_t fb = sizeof(float) * p->nparams;
    memcpy(p->params, q->params, fb);
    memcpy(p->m, q->m, fb);
    memcpy(p->v, q->v, fb);
    p->adam_t = q->adam_t;
    p->forwarded = 0;
    p->trunk_ok = 0;
    gopt_policy_free(q);
    return GOPT_OK;
}
