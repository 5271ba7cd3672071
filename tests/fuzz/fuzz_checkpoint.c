/* fuzz_checkpoint.c: libFuzzer harness for policy checkpoints
 * (gopt_policy_load of P.ckpt). A plain (not gzip) input long enough to
 * hold a header gets its trailing CRC-32 recomputed before it is written,
 * so that mutations reach the checks behind the CRC (a CRC mismatch is
 * still tested by gzip inputs and by the regression files). An accepted
 * checkpoint runs one forward and a greedy decoding on a small graph:
 * every logit must be finite. With FUZZ_WRITE_SEEDS=DIR set,
 * initialization writes a tiny checkpoint, gzip and plain, into DIR.
 * Corpus: corpus/checkpoint/. */
#include <zlib.h>

#include "fuzz_common.h"
#include "gopt_policy.h"

static gopt_graph *G;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    gopt_error err = {0};
    FUZZ_REQUIRE(!gopt_graph_create(&G, "ckpt", "fuzz", &err), "%s", err.msg);
    for (int i = 0; i < 5; i++) {
        char name[8];
        snprintf(name, sizeof name, "n%d", i);
        gopt_node_attrs a = {name, "Op", i ? GOPT_OP_CLASS_GEMM : GOPT_OP_CLASS_INPUT, 1e6 * i, 4096, 0, "", "",
                             GOPT_PHASE_FWD, i, i == 3 || i == 4 ? "c" : ""};
        FUZZ_REQUIRE(!gopt_graph_add_node(G, &a, NULL, &err), "%s", err.msg);
    }
    for (int i = 1; i < 5; i++) FUZZ_REQUIRE(!gopt_graph_add_edge(G, i - 1, i, 4096, &err), "%s", err.msg);
    FUZZ_REQUIRE(!gopt_graph_add_edge(G, 0, 4, 8, &err), "%s", err.msg);
    FUZZ_REQUIRE(!gopt_graph_finalize(G, &err), "%s", err.msg);
    const char *seeds = getenv("FUZZ_WRITE_SEEDS");
    if (seeds && seeds[0]) { /* a plain network, and one with every decoder term (hints, quality, fuse_cond, sched_cond, place_succ) */
        const gopt_policy_config cfgs[2] = {{4, 1, 1, 2, 4, 1, 2, 4, 2, 0, 4, 0, 0, 0, 0, 1, 0, 0, 0},
                                            {4, 1, 1, 2, 4, 1, 2, 4, 2, 0, 4, 2, 1, 1, 1, 1, 1, 1, 1}};
        const char *names[2] = {"tiny", "tiny-hints"};
        for (int c = 0; c < 2; c++) {
            gopt_policy *p = NULL;
            FUZZ_REQUIRE(!gopt_policy_create(&p, &cfgs[c], 7, &err), "%s", err.msg);
            char path[512];
            snprintf(path, sizeof path, "%s/%s.ckpt.gz", seeds, names[c]);
            FUZZ_REQUIRE(!gopt_policy_save(p, path, &err), "%s", err.msg);
            char *raw = NULL;
            size_t len = 0;
            FUZZ_REQUIRE(!gopt_file_read_all(path, &raw, &len, &err), "%s", err.msg);
            snprintf(path, sizeof path, "%s/%s.ckpt", seeds, names[c]);
            fuzz_write(path, (const uint8_t *)raw, len);
            free(raw);
            gopt_policy_free(p);
        }
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_path("P.ckpt");
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    int gz = size >= 2 && buf[0] == 0x1f && buf[1] == 0x8b;
    if (!gz && size >= 76) {
        uint32_t crc = (uint32_t)crc32(0L, buf, (uInt)(size - 4));
        memcpy(buf + size - 4, &crc, 4);
    }
    fuzz_write(path, buf, size);
    free(buf);
    gopt_policy *p = NULL;
    gopt_error err = {0};
    gopt_status st = gopt_policy_load(&p, path, &err);
    if (st != GOPT_OK) {
        FUZZ_REQUIRE(!p, "a refused checkpoint was returned");
        FUZZ_REQUIRE(gopt_status_exit_code(st) == 2 || st == GOPT_ENOMEM, "status %d: %s", st, err.msg);
        FUZZ_REQUIRE(strstr(err.msg, "P.ckpt"), "the message does not name the file: %s", err.msg);
        return 0;
    }
    const gopt_policy_config *cfg = gopt_policy_get_config(p);
    const gopt_frozen *f = gopt_graph_frozen(G);
    int32_t nd = cfg->max_devices < 2 ? cfg->max_devices : 2;
    float *feat = malloc(sizeof(float) * (size_t)f->n * GOPT_POLICY_NFEAT);
    int32_t max_w = cfg->max_devices > cfg->sched_levels ? cfg->max_devices : cfg->sched_levels;
    if (cfg->fusion_levels > max_w) max_w = cfg->fusion_levels;
    float *logits = malloc(sizeof(float) * (size_t)f->n * (size_t)max_w);
    int32_t acts[3 * 5];
    FUZZ_REQUIRE(feat && logits, "out of memory");
    FUZZ_REQUIRE(!gopt_policy_features(f, nd, NULL, feat, &err), "%s", err.msg);
    st = gopt_policy_forward(p, f, feat, nd, NULL, &err);
    FUZZ_REQUIRE(st == GOPT_OK, "forward refused an accepted checkpoint: %s", err.msg);
    const int32_t width[GOPT_TASK_COUNT] = {cfg->max_devices, cfg->sched_levels, cfg->fusion_levels};
    for (int t = 0; t < GOPT_TASK_COUNT; t++) {
        FUZZ_REQUIRE(!gopt_policy_logits(p, (gopt_task)t, logits, &err), "%s", err.msg);
        for (int64_t i = 0; i < (int64_t)f->n * width[t]; i++)
            FUZZ_REQUIRE(isfinite(logits[i]), "task %s: logit %lld = %g", gopt_task_name((gopt_task)t), (long long)i,
                         (double)logits[i]);
    }
    gopt_policy_actions a = {acts, acts + 5, acts + 10};
    FUZZ_REQUIRE(!gopt_policy_greedy(p, &a, &err), "%s", err.msg);
    for (int v = 0; v < f->n; v++)
        FUZZ_REQUIRE(acts[v] >= 0 && acts[v] < nd && acts[5 + v] >= 0 && acts[5 + v] < cfg->sched_levels &&
                         acts[10 + v] >= 0 && acts[10 + v] < cfg->fusion_levels,
                     "node %d: actions %d %d %d out of range", v, acts[v], acts[5 + v], acts[10 + v]);
    free(feat);
    free(logits);
    gopt_policy_free(p);
    return 0;
}
