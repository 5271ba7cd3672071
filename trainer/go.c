/* go.c: zero-shot inference with a trained policy: the `go` method behind
 * the optimizer seam. One forward over the graph; the greedy decisions, or
 * the best of the greedy ones and K samples as judged by the problem's
 * evaluator (the simulator when wired in). Tasks the checkpoint was not
 * trained for get the defaults (device 0, topological priority, no fusion).
 * Cost: one forward plus K + 1 evaluations.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gopt_trainer.h"

const char *gopt_trainer_default_checkpoint(void) {
    const char *e = getenv("GOPT_CHECKPOINT");
    if (e && e[0]) return e;
#ifdef GOPT_DEFAULT_CHECKPOINT
    return GOPT_DEFAULT_CHECKPOINT;
#else
    return "trainer/checkpoints/go-pretrained.ckpt";
#endif
}

gopt_status gopt_go_decide(const gopt_go_options *o, const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err) {
    const char *path = o && o->checkpoint ? o->checkpoint : gopt_trainer_default_checkpoint();
    const gopt_frozen *fz = gopt_graph_frozen(p->graph);
    const int32_t n = fz->n;
    gopt_policy *pol = NULL;
    float *feat = NULL, *pred = NULL;
    int32_t *buf = NULL, *group = NULL;
    gopt_decisions cand = {0};
    unsigned tasks = GOPT_TASKS_ALL;
    gopt_status st;
    if ((st = gopt_policy_load(&pol, path, err)) || (st = gopt_trainer_checkpoint_tasks(path, &tasks, err))) {
        gopt_error_prefix(err, "checkpoint"); /* the caller names the method */
        goto out;
    }
    if (p->ndev > gopt_policy_get_config(pol)->max_devices) {
        st = gopt_error_set(err, GOPT_EINVAL, "checkpoint %s places on at most %d devices, asked for %d", path,
                            gopt_policy_get_config(pol)->max_devices, p->ndev);
        goto out;
    }
    size_t N = (size_t)(n ? n : 1);
    feat = gopt_malloc(sizeof(float) * N * GOPT_POLICY_NFEAT, err);
    pred = gopt_malloc(sizeof(float) * N, err);
    buf = gopt_malloc(sizeof(int32_t) * 3 * N, err);
    group = gopt_malloc(sizeof(int32_t) * N, err);
    if (!feat || !pred || !buf || !group) {
        st = GOPT_ENOMEM;
        goto out;
    }
    for (int32_t v = 0; v < n; v++) pred[v] = (float)p->cost->time[(size_t)v * p->cost->ndev];
    if ((st = gopt_policy_features(fz, p->ndev, pred, feat, err))) goto out;
    if ((st = gopt_policy_forward(pol, fz, feat, p->ndev, NULL, err))) goto out;
    if ((st = gopt_decisions_init(&cand, n, err))) goto out;
    gopt_policy_actions a = {buf, buf + N, buf + 2 * N};
    gopt_rng rng;
    gopt_rng_seed(&rng, o ? o->seed : 1);
    int K = o ? o->samples : 0;
    double best = INFINITY;
    int best_oom = 1;
    for (int k = 0; k <= K; k++) {
        st = k == 0 ? gopt_policy_greedy(pol, &a, err) : gopt_policy_sample(pol, &rng, &a, err);
        if (st) goto out;
        if ((st = gopt_trainer_actions_to_decisions(fz, tasks, &a, &cand, group, err))) goto out;
        if (K == 0) {
            gopt_decisions_copy(d, &cand);
            break;
        }
        if (gopt_decisions_validate(&cand, p->graph, p->ndev, NULL)) continue;
        int oom = 0;
        double s = gopt_bl_evaluate(p, &cand, &oom);
        if (!(s >= 0) || !isfinite(s)) continue;
        /* a fitting solution beats any OOM one; then the shorter step */
        if ((best_oom && !oom) || (oom == best_oom && s < best)) {
            best = s;
            best_oom = oom;
            gopt_decisions_copy(d, &cand);
        }
    }
out:
    gopt_decisions_destroy(&cand);
    gopt_policy_free(pol);
    free(feat);
    free(pred);
    free(buf);
    free(group);
    return st;
}
