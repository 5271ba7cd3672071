/* hint.c: the decoder's hints (policy cfg.hints, docs/policy.md "Hints"):
 * a classical solution read as features, never as an answer.
 *
 * The hint is GOPT_GO_HINT_METHOD (HEFT placement, critical-path
 * priorities, XLA-style fusion) run through the optimizer registry on the
 * problem. Its device labels are made canonical under the cluster's
 * symmetries (gopt_trainer_device_symmetries + gopt_trainer_canonical_devices),
 * the labelling the trainer gives its imitation targets, so that a hint and
 * a target that place alike read alike. Per node: the device, the priority
 * rank in [0, 1] (1 = highest priority; ties share the rank of the first of
 * them), 1 when the node joins a predecessor's fused group, 1 when it roots
 * a fused group of two or more.
 * When the method finds nothing that fits (GOPT_EUNSUP), there is no hint:
 * the arrays are left NULL-equivalent (*have = 0) and the decoder reads 0s.
 * Cost: one run of the method (O(n ndev) placement and an O(n log n) sort)
 * plus the symmetry search (up to 8! permutations of 8 devices).
 */
#include <stdlib.h>
#include <string.h>

#include "trainer_internal.h"

typedef struct {
    int32_t prio;
    int32_t v;
} hint_key;

static int cmp_key(const void *a, const void *b) {
    const hint_key *x = a, *y = b;
    if (x->prio != y->prio) return x->prio < y->prio ? -1 : 1;
    return x->v < y->v ? -1 : x->v > y->v;
}

gopt_status gopt_go_hints_from(const gopt_frozen *fz, const gopt_costmodel *cm, const gopt_cost_table *ct, int ndev,
                               const gopt_decisions *hd, int32_t *dev, float *feat, gopt_error *err) {
    const int32_t n = fz->n;
    gopt_status st = GOPT_OK;
    int32_t *perms = gopt_malloc(sizeof(int32_t) * (size_t)TR_MAX_SYM * (size_t)ndev, err);
    hint_key *key = gopt_malloc(sizeof(hint_key) * (size_t)(n ? n : 1), err);
    int32_t *first = gopt_malloc(sizeof(int32_t) * (size_t)(n ? n : 1), err);
    int32_t *size = gopt_calloc((size_t)(n ? n : 1), sizeof(int32_t), err);
    if (!perms || !key || !first || !size) {
        st = GOPT_ENOMEM;
        goto out;
    }
    int np = gopt_trainer_device_symmetries(cm, ct, perms, TR_MAX_SYM);
    if (np >= 1) {
        if ((st = gopt_trainer_canonical_devices(fz, ndev, hd->device, perms, np, dev, NULL, err))) goto out;
    } else {
        memcpy(dev, hd->device, sizeof(int32_t) * (size_t)n);
    }
    /* priority rank: the share of nodes strictly below in priority */
    for (int32_t v = 0; v < n; v++) key[v] = (hint_key){hd->priority[v], v};
    qsort(key, (size_t)n, sizeof *key, cmp_key);
    for (int32_t i = 0, lo = 0; i < n; i++) {
        if (i > 0 && key[i].prio != key[i - 1].prio) lo = i;
        feat[(size_t)key[i].v * GOPT_POLICY_NHINT] = n > 1 ? (float)lo / (float)(n - 1) : 1.0f;
    }
    /* fusion: the first member of each group in topological order is its root */
    for (int32_t v = 0; v < n; v++) first[v] = -1;
    for (int32_t v = 0; v < n; v++)
        if (hd->group[v] >= 0 && hd->group[v] < n) size[hd->group[v]]++;
    for (int32_t i = 0; i < n; i++) {
        int32_t v = fz->topo[i], g = hd->group[v];
        float *f = feat + (size_t)v * GOPT_POLICY_NHINT;
        f[1] = f[2] = 0.0f;
        if (g < 0 || g >= n || size[g] < 2) continue;
        if (first[g] < 0) {
            first[g] = v;
            f[2] = 1.0f;
        } else {
            f[1] = 1.0f;
        }
    }
out:
    free(perms);
    free(key);
    free(first);
    free(size);
    return st;
}

gopt_status gopt_go_hints(const gopt_bl_problem *p, int32_t *dev, float *feat, int *have, gopt_error *err) {
    const gopt_frozen *fz = gopt_graph_frozen(p->graph);
    gopt_bl_registry reg;
    gopt_bl_registry_init(&reg);
    gopt_bl_combo c;
    gopt_decisions hd = {0};
    *have = 0;
    gopt_status st = gopt_bl_combo_parse(&reg, GOPT_GO_HINT_METHOD, &c, err);
    if (!st) st = gopt_bl_combo_decide(&reg, &c, p, &hd, err);
    if (st == GOPT_EUNSUP) { /* nothing fits: no hint */
        st = GOPT_OK;
        if (err) memset(err, 0, sizeof *err);
    } else if (!st && !(st = gopt_go_hints_from(fz, p->cm, p->cost, p->ndev, &hd, dev, feat, err))) {
        *have = 1;
    }
    gopt_decisions_destroy(&hd);
    return st;
}

gopt_status tr_build_hints(gopt_trainer *t, tr_graph *G, gopt_error *err) {
    const int32_t n = G->fz->n;
    G->hint_dev = gopt_malloc(sizeof(int32_t) * (size_t)n, err);
    G->hint_feat = gopt_malloc(sizeof(float) * (size_t)n * GOPT_POLICY_NHINT, err);
    if (!G->hint_dev || !G->hint_feat) return GOPT_ENOMEM; /* freed with the graph */
    gopt_bl_sim_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.sim = G->sim;
    ctx.scratch = G->scratch[0];
    gopt_bl_problem bp = {0};
    bp.graph = G->g;
    bp.cm = t->cm;
    bp.cost = gopt_sim_cost_table(G->sim);
    bp.ndev = t->ndev;
    bp.opt.seed = t->o.seed;
    bp.evaluate = gopt_bl_sim_evaluate;
    bp.eval_ctx = &ctx;
    bp.last_peak = gopt_bl_sim_last_peak;
    int have = 0;
    gopt_status st = gopt_go_hints(&bp, G->hint_dev, G->hint_feat, &have, err);
    if (st) {
        gopt_error_prefix(err, "graph '%s': hints", gopt_graph_name(G->g));
        return st;
    }
    G->hint_state = have ? 1 : -1;
    if (!have) {
        free(G->hint_dev);
        free(G->hint_feat);
        G->hint_dev = NULL;
        G->hint_feat = NULL;
    }
    return GOPT_OK;
}
