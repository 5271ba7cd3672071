/* test_netdev.c: the policy network on a device (policy/netdev.h) against
 * the CPU path: the heads' logits, the greedy decisions and every parameter
 * gradient of a decoder loss, on graphs of one partial segment to many
 * segments (the device's buffers growing in between), with and without
 * memory_grad; device selection and its errors.
 *
 * `test_netdev` runs it on the "emulated" device (the device path's kernels
 * and orchestration on the CPU); `test_netdev cuda` on the GPU, and exits 3
 * (ctest: skipped) with a message where the build has no CUDA or the machine
 * no GPU.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gopt_graph.h"
#include "gopt_policy.h"
#include "netdev_kernels.h"
#include "policy_internal.h"
#include "test_util.h"

static const char *g_device = "emulated";

static gopt_policy_config small_config(int memory_grad) {
    gopt_policy_config c;
    gopt_policy_config_default(&c);
    c.hidden = 16;
    c.heads = 2;
    c.segment = 8;
    c.sage_layers = 2;
    c.attn_layers = 1;
    c.ffn_mult = 2;
    c.max_devices = 4;
    c.sched_levels = 4;
    c.fusion_levels = 3;
    c.cond_hidden = 4;
    c.memory_grad = memory_grad;
    return c;
}

typedef struct {
    float *logits, *grads;
    int32_t *act;
} run_out;

/* forward, logits, greedy decisions, and the gradient of sum_t sum_v w[t n + v] logp_t(v) */
static void run(gopt_policy *p, const gopt_frozen *fz, const float *feat, const float *w, run_out *o) {
    gopt_error err;
    const gopt_policy_config *c = gopt_policy_get_config(p);
    const int n = fz->n;
    if (gopt_policy_forward(p, fz, feat, 4, NULL, &err) != GOPT_OK) fail_msg("forward on %s: %s", gopt_policy_device(p), err.msg);
    assert_int_equal(gopt_policy_logits(p, GOPT_TASK_PLACE, o->logits, &err), GOPT_OK);
    assert_int_equal(gopt_policy_logits(p, GOPT_TASK_SCHED, o->logits + (size_t)n * c->max_devices, &err), GOPT_OK);
    assert_int_equal(
        gopt_policy_logits(p, GOPT_TASK_FUSE, o->logits + (size_t)n * (c->max_devices + c->sched_levels), &err),
        GOPT_OK);
    gopt_policy_actions a = {o->act, o->act + n, o->act + 2 * n};
    assert_int_equal(gopt_policy_greedy(p, &a, &err), GOPT_OK);
    gopt_policy_zero_grad(p);
    if (gopt_policy_backward(p, &a, w, NULL, &err) != GOPT_OK) fail_msg("backward on %s: %s", gopt_policy_device(p), err.msg);
    for (int i = 0, off = 0; i < gopt_policy_num_tensors(p); i++) {
        float *grd;
        size_t cnt;
        gopt_policy_tensor(p, i, NULL, NULL, &grd, &cnt);
        memcpy(o->grads + off, grd, sizeof(float) * cnt);
        off += (int)cnt;
    }
}

/* max |x - y| within tol of max |y|, per tensor for the gradients */
static void close_enough(const char *what, const float *x, const float *y, size_t n, double tol) {
    double diff = 0, scale = 0;
    for (size_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs((double)x[i] - y[i]));
        scale = fmax(scale, fabs((double)y[i]));
    }
    if (!(diff <= tol * scale) || !(scale > 0)) fail_msg("%s: differ by %g (scale %g)", what, diff, scale);
}

static void compare(int memory_grad) {
    static const int sizes[] = {3, 150, 1100, 40};
    gopt_policy_config c = small_config(memory_grad);
    gopt_error err;
    gopt_policy *cpu = NULL, *dev = NULL;
    assert_int_equal(gopt_policy_create(&cpu, &c, 7, &err), GOPT_OK);
    assert_int_equal(gopt_policy_create(&dev, &c, 7, &err), GOPT_OK);
    if (gopt_policy_set_device(dev, g_device, &err) != GOPT_OK) fail_msg("set_device %s: %s", g_device, err.msg);
    assert_string_equal(gopt_policy_device(dev), g_device);
    const size_t np = gopt_policy_num_params(cpu);
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        const int n = sizes[s];
        gopt_graph *g = test_random_graph(n, 100 + s, 9);
        const gopt_frozen *fz = gopt_graph_frozen(g);
        const int W = c.max_devices + c.sched_levels + c.fusion_levels;
        float *feat = malloc(sizeof(float) * n * GOPT_POLICY_NFEAT), *w = malloc(sizeof(float) * 3 * n);
        assert_int_equal(gopt_policy_features(fz, 4, NULL, feat, &err), GOPT_OK);
        gopt_rng rng;
        gopt_rng_seed(&rng, 11 + s);
        for (int i = 0; i < 3 * n; i++) w[i] = (float)(gopt_rng_uniform(&rng) * 2.0 - 1.0);
        run_out r[2];
        for (int k = 0; k < 2; k++) {
            r[k].logits = malloc(sizeof(float) * n * W);
            r[k].grads = malloc(sizeof(float) * np);
            r[k].act = malloc(sizeof(int32_t) * 3 * n);
            run(k ? dev : cpu, fz, feat, w, &r[k]);
        }
        char what[64];
        snprintf(what, sizeof what, "%d nodes: logits", n);
        close_enough(what, r[1].logits, r[0].logits, (size_t)n * W, 2e-5);
        int same = 0;
        for (int i = 0; i < 3 * n; i++) same += r[0].act[i] == r[1].act[i];
        if (same < 3 * n - 1) fail_msg("%d nodes: greedy decisions differ in %d of %d", n, 3 * n - same, 3 * n);
        for (int i = 0, off = 0; i < gopt_policy_num_tensors(cpu); i++) {
            const char *name;
            size_t cnt;
            gopt_policy_tensor(cpu, i, &name, NULL, NULL, &cnt);
            snprintf(what, sizeof what, "%d nodes: gradient of %s", n, name);
            int any = 0;
            for (size_t j = 0; j < cnt; j++) any |= r[0].grads[off + j] != 0.0f;
            if (any) close_enough(what, r[1].grads + off, r[0].grads + off, cnt, 2e-4);
            else
                for (size_t j = 0; j < cnt; j++)
                    if (fabsf(r[1].grads[off + j]) > 1e-6f) fail_msg("%s: %g where the CPU has 0", what, r[1].grads[off + j]);
            off += (int)cnt;
        }
        for (int k = 0; k < 2; k++) {
            free(r[k].logits);
            free(r[k].grads);
            free(r[k].act);
        }
        free(feat);
        free(w);
        gopt_graph_free(g);
    }
    gopt_policy_free(cpu);
    gopt_policy_free(dev);
}

static void test_equal_cpu(void **state) {
    (void)state;
    compare(0);
}

static void test_equal_cpu_memory_grad(void **state) {
    (void)state;
    compare(1);
}

/* Unknown names are refused; a device this machine lacks leaves the policy where it was; back to
 * the CPU a forward works again. */
static void test_select(void **state) {
    (void)state;
    gopt_policy_config c = small_config(0);
    gopt_error err;
    gopt_policy *p = NULL;
    assert_int_equal(gopt_policy_create(&p, &c, 3, &err), GOPT_OK);
    assert_string_equal(gopt_policy_device(p), "cpu");
    assert_int_equal(gopt_policy_set_device(p, "tpu", &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "tpu"));
    gopt_status st = gopt_policy_set_device(p, "cuda", &err);
    if (st != GOPT_OK) {
        assert_int_equal(st, GOPT_EUNSUP);
        assert_string_equal(gopt_policy_device(p), "cpu");
    }
    assert_int_equal(gopt_policy_set_device(p, "emulated", &err), GOPT_OK);
    gopt_graph *g = test_random_graph(30, 5, 9);
    const gopt_frozen *fz = gopt_graph_frozen(g);
    float *feat = malloc(sizeof(float) * 30 * GOPT_POLICY_NFEAT);
    assert_int_equal(gopt_policy_features(fz, 4, NULL, feat, &err), GOPT_OK);
    assert_int_equal(gopt_policy_forward(p, fz, feat, 4, NULL, &err), GOPT_OK);
    assert_int_equal(gopt_policy_set_device(p, "cpu", &err), GOPT_OK);
    assert_string_equal(gopt_policy_device(p), "cpu");
    int32_t act[90];
    gopt_policy_actions a = {act, act + 30, act + 60};
    assert_int_equal(gopt_policy_greedy(p, &a, &err), GOPT_EINVAL); /* a forward is needed after a change */
    assert_int_equal(gopt_policy_forward(p, fz, feat, 4, NULL, &err), GOPT_OK);
    assert_int_equal(gopt_policy_greedy(p, &a, &err), GOPT_OK);
    free(feat);
    gopt_graph_free(g);
    gopt_policy_free(p);
}

/* The kernels' exp is the CPU path's polynomial, bit for bit (two copies: one must compile for a
 * GPU, the other vectorises on the CPU). */
static void test_expf_same(void **state) {
    (void)state;
    for (int i = -2000; i <= 2000; i++) {
        const float x = (float)i * 0.0443f;
        const float a = gk_expf(x), b = gopt_expf_inline(x);
        if (memcmp(&a, &b, sizeof a) != 0) fail_msg("exp(%g): kernels %.9g, CPU path %.9g", x, a, b);
    }
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "cuda") == 0) {
        g_device = "cuda";
        gopt_policy_config c = small_config(0);
        gopt_error err;
        gopt_policy *p = NULL;
        if (gopt_policy_create(&p, &c, 1, &err) != GOPT_OK) return 1;
        gopt_status st = gopt_policy_set_device(p, "cuda", &err);
        gopt_policy_free(p);
        if (st == GOPT_EUNSUP) {
            printf("test_netdev cuda: skipped: %s\n", err.msg);
            return 3;
        }
        const struct CMUnitTest cuda[] = {cmocka_unit_test(test_equal_cpu), cmocka_unit_test(test_equal_cpu_memory_grad)};
        return cmocka_run_group_tests_name("netdev_cuda", cuda, NULL, NULL);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_equal_cpu),
        cmocka_unit_test(test_equal_cpu_memory_grad),
        cmocka_unit_test(test_select),
        cmocka_unit_test(test_expf_same),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
