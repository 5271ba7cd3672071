/* features.c: node features of a frozen graph for the policy network.
 *
 * Feature row layout (GOPT_POLICY_NFEAT = 80 floats, every value in
 * [0, 1.5]: the log-scaled ones are clamped at 1.5; fixed transforms so that
 * graphs of any size are normalised alike):
 *    0.. 7  op class, one-hot
 *    8..39  op name hashed into 32 buckets, one-hot
 *   40..43  phase (none, fwd, bwd, opt), one-hot
 *   44 log1p(flops)/30            45 log1p(out_bytes)/25
 *   46 log1p(param_bytes)/25      47 log1p(in-degree)/4
 *   48 log1p(out-degree)/4        49 topological rank / (n-1)
 *   50 layer known                51 layer / (max layer + 1)
 *   52 in a colocation group      53 log1p(colocation group size)/5
 *   54 ln(1 + predicted time in us)/ln(1e6)
 *   55 log1p(predicted time / mean predicted time)/5
 *   56 log1p(bytes of all in-edges)/25
 *   57 log1p(flops / (out_bytes + param_bytes + 1))/15   (arithmetic intensity)
 *   58 log2(ndev)/4               59 source (no predecessor)
 *   60 sink (no successor)        61 longest-path depth / max depth
 *   62 predicted time unknown     63 constant 1
 *   64..79 absolute layer index min(layer, 15), one-hot (all 0 when unknown)
 *
 * The absolute layer (64..79, added in the 80-feature layout) is what lets a
 * layer-wise placement transfer across depths: the normalised layer (51)
 * of layer 1 is 0.25 in a 2-layer RNN LM and 0.2 in a 3-layer one, while a
 * layer-wise expert puts layer k on device k-1 in both. Checkpoints store
 * the feature count, so one written with the 64-feature layout is refused
 * on load (policy/optim.c), not misread.
 * Cost O(n + m).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "policy_net.h"

#define HASH_BUCKETS 32

/* log1p(x) / scale, clamped to 1.5 so that outliers cannot dominate. */
static float logf_scaled(double x, double scale) {
    double y = log1p(x) / scale;
    return (float)(y < 1.5 ? y : 1.5);
}

gopt_status gopt_policy_features(const gopt_frozen *fz, int32_t ndev, const float *pred_time, float *feat,
                                 gopt_error *err) {
    if (!fz || fz->n < 1) return gopt_error_set(err, GOPT_EINVAL, "policy features: empty graph");
    if (ndev < 1 || ndev > GOPT_POLICY_MAX_DEVICES)
        return gopt_error_set(err, GOPT_EINVAL, "policy features: ndev = %d is outside 1..%d", (int)ndev,
                              GOPT_POLICY_MAX_DEVICES);
    const int n = fz->n;
    double tsum = 0.0;
    if (pred_time) {
        for (int v = 0; v < n; v++) {
            if (!isfinite(pred_time[v]) || pred_time[v] < 0.0f)
                return gopt_error_set(err, GOPT_EINVAL, "policy features: node %d: predicted time %g is not >= 0", v,
                                      (double)pred_time[v]);
            tsum += pred_time[v];
        }
    }
    double tmean = tsum / n;
    int32_t *depth = gopt_malloc(sizeof(int32_t) * (size_t)n, err);
    int32_t *csize = gopt_calloc((size_t)(fz->n_coloc > 0 ? fz->n_coloc : 1), sizeof(int32_t), err);
    if (!depth || !csize) {
        free(depth);
        free(csize);
        return GOPT_ENOMEM;
    }
    int32_t max_depth = 0, max_layer = 0;
    for (int i = 0; i < n; i++) {
        int v = fz->topo[i], dv = 0;
        for (int e = fz->in_ptr[v]; e < fz->in_ptr[v + 1]; e++) {
            int dp = depth[fz->in_src[e]] + 1;
            dv = dp > dv ? dp : dv;
        }
        depth[v] = dv;
        max_depth = dv > max_depth ? dv : max_depth;
        if (fz->layer[v] > max_layer) max_layer = fz->layer[v];
        if (fz->coloc[v] >= 0) csize[fz->coloc[v]]++;
    }
    for (int v = 0; v < n; v++) {
        float *f = feat + (size_t)v * GOPT_POLICY_NFEAT;
        memset(f, 0, sizeof(float) * GOPT_POLICY_NFEAT);
        int cls = fz->op_class[v] < GOPT_OP_CLASS_COUNT ? fz->op_class[v] : GOPT_OP_CLASS_OTHER;
        f[cls] = 1.0f;
        uint32_t hb = (fz->op_hash[v] * 2654435761u) >> 27; /* top 5 bits of a Knuth multiply */
        f[8 + hb] = 1.0f;
        f[40 + (fz->phase[v] < GOPT_PHASE_COUNT ? fz->phase[v] : 0)] = 1.0f;
        int indeg = fz->in_ptr[v + 1] - fz->in_ptr[v], outdeg = fz->out_ptr[v + 1] - fz->out_ptr[v];
        f[44] = logf_scaled(fz->flops[v], 30.0);
        f[45] = logf_scaled(fz->out_bytes[v], 25.0);
        f[46] = logf_scaled(fz->param_bytes[v], 25.0);
        f[47] = logf_scaled((double)indeg, 4.0);
        f[48] = logf_scaled((double)outdeg, 4.0);
        f[49] = n > 1 ? (float)fz->rank[v] / (float)(n - 1) : 0.0f;
        if (fz->layer[v] >= 0) {
            f[50] = 1.0f;
            f[51] = (float)fz->layer[v] / (float)(max_layer + 1);
            f[64 + (fz->layer[v] < 15 ? fz->layer[v] : 15)] = 1.0f;
        }
        if (fz->coloc[v] >= 0) {
            f[52] = 1.0f;
            f[53] = logf_scaled((double)csize[fz->coloc[v]], 5.0);
        }
        if (pred_time) {
            double t = pred_time[v];
            f[54] = logf_scaled(t * 1e6, 6.0 * log(10.0));
            f[55] = tmean > 0.0 ? logf_scaled(t / tmean, 5.0) : 0.0f;
        } else {
            f[62] = 1.0f;
        }
        double inb = 0.0;
        for (int e = fz->in_ptr[v]; e < fz->in_ptr[v + 1]; e++) inb += fz->edge_bytes[fz->in_eid[e]];
        f[56] = logf_scaled(inb, 25.0);
        f[57] = logf_scaled(fz->flops[v] / (fz->out_bytes[v] + fz->param_bytes[v] + 1.0), 15.0);
        f[58] = (float)(log2((double)ndev) / 4.0);
        f[59] = indeg == 0 ? 1.0f : 0.0f;
        f[60] = outdeg == 0 ? 1.0f : 0.0f;
        f[61] = max_depth > 0 ? (float)depth[v] / (float)max_depth : 0.0f;
        f[63] = 1.0f;
    }
    free(depth);
    free(csize);
    return GOPT_OK;
}
