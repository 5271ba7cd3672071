/* test_runtime.c: the real-hardware runtime on this machine's CPUs (fast: small graphs, a few
 * millisecond steps).
 *
 * From the timestamps the runtime records: no kernel starts before each input has arrived on
 * its device (a local producer's end, a copy's end; a copy never starts before its producer
 * ends); every node runs on the device its decisions name; a device runs one kernel at a time
 * and, when it starts one, no kernel that was already ready there had a higher priority (or the
 * same priority and an earlier topological rank). Memory: on one device the measured peak equals
 * the simulator's accounting for the same decisions, byte for byte, fused or not; on several,
 * every device's peak lies between its parameters and the sum of everything it could hold. Bad
 * decisions and unknown devices are refused with the node named; CUDA without a GPU is
 * GOPT_EUNSUP (with one, a CNN runs on it with cuDNN and with im2col, eager and as a CUDA graph,
 * its peak the simulator's). The convolution the CUDA backend gives cuDNN has the node's FLOPs,
 * and the CUDA options are checked before anything runs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gopt_baselines.h"
#include "gopt_runtime.h"
#include "gopt_zoo.h"
#include "rt_internal.h"
#include "test_util.h"

typedef struct {
    gopt_graph *g;
    gopt_profile *p;
    gopt_costmodel *cm;
    gopt_sim *sim;
    gopt_sim_scratch *s;
    gopt_runtime *rt;
} fixture;

static void fixture_open(fixture *x, gopt_graph *g, int ndev) {
    gopt_error err = {0};
    memset(x, 0, sizeof *x);
    x->g = g;
    x->p = test_profile_uniform(ndev, 4e9, 1e12, "test_runtime");
    assert_int_equal(gopt_cost_create(x->p, ndev, &x->cm, &err), GOPT_OK);
    assert_int_equal(gopt_sim_create(g, x->cm, &x->sim, &err), GOPT_OK);
    assert_int_equal(gopt_sim_scratch_create(x->sim, &x->s, &err), GOPT_OK);
    assert_int_equal(gopt_rt_create(g, x->cm, &x->rt, &err), GOPT_OK);
}

static void fixture_close(fixture *x) {
    gopt_rt_free(x->rt);
    gopt_sim_scratch_free(x->s);
    gopt_sim_free(x->sim);
    gopt_cost_free(x->cm);
    gopt_profile_free(x->p);
    gopt_graph_free(x->g);
}

static gopt_graph *load_example(void) {
    gopt_graph *g = NULL;
    gopt_error err = {0};
    gopt_status st = gopt_graph_load(GOPT_SOURCE_DIR "/graphs/examples/mlp_train.graphml", &g, &err);
    if (st) fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(st, GOPT_OK);
    return g;
}

static gopt_graph *zoo_graph(const char *family, int layers, int batch, int seq) {
    gopt_zoo_spec spec = {family, layers, batch, seq, GOPT_OPTIM_DEFAULT, 0};
    gopt_graph *g = NULL;
    gopt_error err = {0};
    gopt_status st = gopt_zoo_generate(&spec, &g, &err);
    if (st) fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(st, GOPT_OK);
    return g;
}

/* The mlp example's two-device decisions of tests/cli/sim.sh: layer 2 on device 1, mm1+relu1 fused. */
static void mlp_decisions(const gopt_graph *g, gopt_decisions *d) {
    static const struct {
        const char *name;
        int dev, prio, grp;
    } rows[] = {{"x", 0, 14, -1},        {"labels", 0, 13, -1},     {"w1", 0, 12, -1},     {"w2", 1, 11, -1},
                {"mm1", 0, 10, 4},       {"relu1", 0, 9, 4},        {"mm2", 1, 8, -1},     {"loss", 0, 7, -1},
                {"grad/mm2", 0, 6, -1},  {"grad/w2", 1, 5, -1},     {"grad/relu1", 0, 4, -1}, {"grad/w1", 0, 3, -1},
                {"update/w1", 0, 2, -1}, {"update/w2", 1, 1, -1}};
    gopt_error err = {0};
    assert_int_equal(gopt_decisions_init(d, gopt_graph_num_nodes(g), &err), GOPT_OK);
    assert_int_equal(gopt_graph_num_nodes(g), (int)(sizeof rows / sizeof rows[0]));
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        int32_t v = gopt_graph_find(g, rows[i].name);
        assert_true(v >= 0);
        d->device[v] = rows[i].dev;
        d->priority[v] = rows[i].prio;
        d->group[v] = rows[i].grp;
    }
    assert_int_equal(gopt_decisions_validate(d, g, 2, &err), GOPT_OK);
}

/* Decisions of a classical method (valid by construction: colocation, fusion legality). */
static void method_decisions(fixture *x, const char *spec, gopt_decisions *d) {
    gopt_bl_registry reg;
    gopt_bl_registry_init(&reg);
    gopt_bl_options opt = {.seed = 7};
    gopt_bl_outcome oc;
    gopt_error err = {0};
    gopt_status st = gopt_bl_optimize(&reg, spec, x->sim, x->cm, &opt, d, &oc, &err);
    if (st) fprintf(stderr, "%s: %s\n", spec, err.msg);
    assert_int_equal(st, GOPT_OK);
}

/* The task (representative) of node v: its group's member first in topological order. */
static int32_t task_of(const gopt_frozen *f, const gopt_decisions *d, int32_t v) {
    if (d->group[v] < 0) return v;
    int32_t r = v;
    for (int32_t u = 0; u < f->n; u++)
        if (d->group[u] == d->group[v] && f->rank[u] < f->rank[r]) r = u;
    return r;
}

/* Group priority: the largest of its members'. */
static int32_t task_prio(const gopt_frozen *f, const gopt_decisions *d, int32_t r) {
    if (d->group[r] < 0) return d->priority[r];
    int32_t p = INT32_MIN;
    for (int32_t u = 0; u < f->n; u++)
        if (d->group[u] == d->group[r] && d->priority[u] > p) p = d->priority[u];
    return p;
}

/* Every rule the timestamps can show (see the file's header). The priority rule holds on the
 * wall clock only: the CPU clock recomposes the times along the run's order, and a kernel that
 * really waited may look ready earlier there. */
static void check_timeline(const fixture *x, const gopt_decisions *d, const gopt_rt_report *rep, int wall) {
    const gopt_frozen *f = gopt_graph_frozen(x->g);
    const gopt_runtime *rt = x->rt;
    int32_t nx = gopt_rt_num_transfers(rt);
    gopt_sim_transfer *xs = calloc((size_t)nx + 1, sizeof *xs);
    for (int32_t i = 0; i < nx; i++) {
        gopt_rt_transfer_get(rt, i, &xs[i]);
        assert_true(xs[i].start >= gopt_rt_node_end(rt, xs[i].node)); /* copy after its producer */
        assert_true(xs[i].end >= xs[i].start);
        assert_int_equal(xs[i].src, d->device[xs[i].node]);
    }
    double last = 0;
    for (int32_t v = 0; v < f->n; v++) {
        int32_t tv = task_of(f, d, v);
        assert_int_equal(gopt_rt_node_device(rt, v), d->device[v]); /* placement */
        double s = gopt_rt_node_start(rt, v), e = gopt_rt_node_end(rt, v), r = gopt_rt_node_ready(rt, v);
        assert_true(s >= 0 && e >= s && s >= r);
        if (e > last) last = e;
        for (int32_t k = f->in_ptr[v]; k < f->in_ptr[v + 1]; k++) {
            int32_t u = f->in_src[k];
            if (task_of(f, d, u) == tv) continue;
            double arrived = -1;
            if (d->device[u] == d->device[v]) {
                arrived = gopt_rt_node_end(rt, u);
            } else {
                for (int32_t i = 0; i < nx; i++)
                    if (xs[i].node == u && xs[i].dst == d->device[v]) arrived = xs[i].end;
            }
            assert_true(arrived >= 0);  /* a remote input came by a copy */
            assert_true(r >= arrived);  /* ready only once it arrived ... */
            assert_true(s >= arrived);  /* ... and started after */
        }
    }
    for (int32_t i = 0; i < nx; i++)
        if (xs[i].end > last) last = xs[i].end;
    assert_true(fabs(last - rep->res.step_time_s) < 1e-12);
    /* per device: one kernel at a time; when a kernel starts, no other kernel already ready there
     * ranks before it */
    for (int32_t a = 0; a < f->n; a++) {
        if (task_of(f, d, a) != a) continue;
        for (int32_t b = 0; b < f->n; b++) {
            if (b == a || task_of(f, d, b) != b || d->device[a] != d->device[b]) continue;
            double sa = gopt_rt_node_start(rt, a), sb = gopt_rt_node_start(rt, b);
            if (sa < sb) assert_true(gopt_rt_node_end(rt, a) <= sb); /* no overlap */
            if (wall && sa < sb && gopt_rt_node_ready(rt, b) < sa) {
                int32_t pa = task_prio(f, d, a), pb = task_prio(f, d, b);
                assert_true(pa > pb || (pa == pb && f->rank[a] < f->rank[b]));
            }
        }
    }
    free(xs);
}

static void run_ok(fixture *x, const gopt_decisions *d, gopt_rt_clock clock, gopt_rt_report *rep) {
    gopt_rt_options o = {.backend = GOPT_RT_CPU, .warmup = 1, .reps = 3, .clock = clock};
    gopt_error err = {0};
    gopt_status st = gopt_rt_run(x->rt, d, &o, rep, &err);
    if (st) fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(st, GOPT_OK);
    assert_int_equal(rep->reps, 3);
    /* cpu-min composes each kernel's fastest repetition along the median step's order: at most that step */
    if (clock == GOPT_RT_CLOCK_CPU_MIN) assert_true(rep->step_median_s <= rep->step_max_s + 1e-12);
    else assert_true(rep->step_min_s <= rep->step_median_s && rep->step_median_s <= rep->step_max_s);
    assert_true(rep->res.step_time_s > 0);
}

static void test_mlp_two_devices(void **state) {
    (void)state;
    fixture x;
    fixture_open(&x, load_example(), 2);
    gopt_decisions d;
    mlp_decisions(x.g, &d);
    for (int ck = 0; ck < GOPT_RT_CLOCK_COUNT; ck++) {
        gopt_rt_report rep;
        run_ok(&x, &d, (gopt_rt_clock)ck, &rep);
        check_timeline(&x, &d, &rep, ck == GOPT_RT_CLOCK_WALL);
        gopt_sim_result sr;
        gopt_error err = {0};
        assert_int_equal(gopt_sim_run(x.sim, &d, &sr, x.s, &err), GOPT_OK);
        assert_int_equal(rep.res.tasks, sr.tasks); /* the same contraction: 13 kernels */
        assert_int_equal(rep.res.transfers, sr.transfers);
        assert_true(fabs(rep.res.transferred_bytes - sr.transferred_bytes) < 1e-6);
        assert_int_equal(rep.res.oom, 0);
    }
    gopt_decisions_destroy(&d);
    fixture_close(&x);
}

/* One device: the order is the device's alone, so the measured peak is the simulator's exactly. */
static void test_peak_equals_simulator(void **state) {
    (void)state;
    static const char *specs[] = {"single", "single+cp+xla", "single+fifo+tvm"};
    gopt_graph *graphs[] = {zoo_graph("resnet", 18, 1, 32), load_example()};
    for (size_t gi = 0; gi < 2; gi++) {
        fixture x;
        fixture_open(&x, graphs[gi], 1);
        for (size_t k = 0; k < 3; k++) {
            gopt_decisions d = {0};
            method_decisions(&x, specs[k], &d);
            gopt_rt_report rep;
            run_ok(&x, &d, GOPT_RT_CLOCK_WALL, &rep);
            check_timeline(&x, &d, &rep, 1);
            gopt_sim_result sr;
            gopt_error err = {0};
            assert_int_equal(gopt_sim_run(x.sim, &d, &sr, x.s, &err), GOPT_OK);
            assert_int_equal(rep.res.tasks, sr.tasks);
            assert_int_equal((long long)rep.res.peak_memory_bytes[0], (long long)sr.peak_memory_bytes[0]);
            gopt_decisions_destroy(&d);
        }
        fixture_close(&x);
    }
}

/* Several devices from classical methods (transfers, fusion): every rule of the timeline; peaks
 * between the parameters and everything the device could hold at once. */
static void test_methods_two_devices(void **state) {
    (void)state;
    static const char *specs[] = {"heft+cp+xla", "metis+fifo", "msct+cp+tvm"};
    fixture x;
    fixture_open(&x, zoo_graph("resnet", 18, 1, 32), 2);
    const gopt_frozen *f = gopt_graph_frozen(x.g);
    for (size_t k = 0; k < 3; k++) {
        gopt_decisions d = {0};
        method_decisions(&x, specs[k], &d);
        gopt_rt_report rep;
        run_ok(&x, &d, GOPT_RT_CLOCK_WALL, &rep);
        check_timeline(&x, &d, &rep, 1);
        for (int dv = 0; dv < 2; dv++) {
            double params = 0, all = 0;
            for (int32_t v = 0; v < f->n; v++) {
                if (d.device[v] == dv) params += ceil(f->param_bytes[v]);
                all += ceil(f->param_bytes[v]) + ceil(f->out_bytes[v]);
            }
            assert_true((double)rep.res.peak_memory_bytes[dv] >= params);
            assert_true((double)rep.res.peak_memory_bytes[dv] <= all + 64.0 * f->m);
        }
        gopt_decisions_destroy(&d);
    }
    fixture_close(&x);
}

static void test_bad_decisions(void **state) {
    (void)state;
    fixture x;
    fixture_open(&x, load_example(), 2);
    gopt_decisions d;
    mlp_decisions(x.g, &d);
    gopt_rt_options o = {.backend = GOPT_RT_CPU, .reps = 1};
    gopt_rt_report rep;
    gopt_error err = {0};
    int32_t w1 = gopt_graph_find(x.g, "w1"), mm2 = gopt_graph_find(x.g, "mm2"), relu1 = gopt_graph_find(x.g, "relu1");
    /* an unknown device */
    d.device[w1] = 5;
    d.device[gopt_graph_find(x.g, "update/w1")] = 5;
    assert_int_equal(gopt_rt_run(x.rt, &d, &o, &rep, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "w1"));
    d.device[w1] = d.device[gopt_graph_find(x.g, "update/w1")] = 0;
    /* a fusion group spread over two devices */
    d.group[mm2] = d.group[relu1];
    assert_int_equal(gopt_rt_run(x.rt, &d, &o, &rep, &err), GOPT_EINVAL);
    d.group[mm2] = -1;
    /* a colocation split */
    d.device[gopt_graph_find(x.g, "update/w2")] = 0;
    assert_int_equal(gopt_rt_run(x.rt, &d, &o, &rep, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "w2"));
    d.device[gopt_graph_find(x.g, "update/w2")] = 1;
    /* decisions of another graph; a bad option */
    gopt_decisions small;
    assert_int_equal(gopt_decisions_init(&small, 3, &err), GOPT_OK);
    assert_int_equal(gopt_rt_run(x.rt, &small, &o, &rep, &err), GOPT_EINVAL);
    gopt_decisions_destroy(&small);
    gopt_rt_options bad = {.backend = GOPT_RT_CPU, .reps = -1};
    assert_int_equal(gopt_rt_run(x.rt, &d, &bad, &rep, &err), GOPT_EINVAL);
    gopt_rt_options graph_on_cpu = {.backend = GOPT_RT_CPU, .reps = 1, .cuda_graph = 1};
    assert_int_equal(gopt_rt_run(x.rt, &d, &graph_on_cpu, &rep, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "cuda backend"));
    /* a CUDA convolution kernel on the CPU backend; an unknown one */
    for (int cc = GOPT_RT_CUDA_CONV_CUDNN; cc < GOPT_RT_CUDA_CONV_COUNT; cc++) {
        gopt_rt_options conv_on_cpu = {.backend = GOPT_RT_CPU, .reps = 1, .cuda_conv = (gopt_rt_cuda_conv)cc};
        assert_int_equal(gopt_rt_run(x.rt, &d, &conv_on_cpu, &rep, &err), GOPT_EINVAL);
        assert_non_null(strstr(err.msg, "cuda backend"));
        assert_non_null(strstr(err.msg, gopt_rt_cuda_conv_name((gopt_rt_cuda_conv)cc)));
    }
    gopt_rt_options bad_conv = {.backend = GOPT_RT_CUDA, .reps = 1, .cuda_conv = GOPT_RT_CUDA_CONV_COUNT};
    assert_int_equal(gopt_rt_run(x.rt, &d, &bad_conv, &rep, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "convolution"));
    /* a refused run leaves no timeline */
    assert_int_equal(gopt_rt_num_transfers(x.rt), 0);
    assert_true(gopt_rt_node_start(x.rt, 0) < 0);
    /* and the runtime still works after refusals */
    run_ok(&x, &d, GOPT_RT_CLOCK_WALL, &rep);
    gopt_decisions_destroy(&d);
    fixture_close(&x);
}

/* Without a GPU (or without CUDA in the build) the CUDA backend says so; with one it runs. */
static void test_cuda_backend(void **state) {
    (void)state;
    fixture x;
    fixture_open(&x, load_example(), 2);
    gopt_decisions d;
    mlp_decisions(x.g, &d);
    gopt_rt_options o = {.backend = GOPT_RT_CUDA, .reps = 2};
    gopt_rt_report rep;
    gopt_error err = {0};
    gopt_status st = gopt_rt_run(x.rt, &d, &o, &rep, &err);
    if (st == GOPT_EUNSUP) {
        assert_true(strlen(err.msg) > 0);
        printf("# cuda backend: skipped (%s)\n", err.msg);
    } else {
        assert_int_equal(st, GOPT_OK);
        check_timeline(&x, &d, &rep, 1);
    }
    /* the step captured as a CUDA graph: refused on two GPUs (or no GPU here) */
    o.cuda_graph = 1;
    assert_int_equal(gopt_rt_run(x.rt, &d, &o, &rep, &err), GOPT_EUNSUP);
    assert_true(strlen(err.msg) > 0);
    /* convolutions by cuDNN in a build without it: refused, whether there is a GPU or not */
    o.cuda_graph = 0;
    o.cuda_conv = GOPT_RT_CUDA_CONV_CUDNN;
    st = gopt_rt_run(x.rt, &d, &o, &rep, &err);
    if (!gopt_rt_cudnn_built()) {
        assert_int_equal(st, GOPT_EUNSUP);
        assert_non_null(strstr(err.msg, "cuDNN"));
    } else {
        assert_true(st == GOPT_OK || st == GOPT_EUNSUP);
    }
    gopt_decisions_destroy(&d);
    fixture_close(&x);
}

/* With a GPU: a CNN on one GPU, its convolutions by cuDNN (where built) and by im2col, each step
 * issued eagerly and replayed as a CUDA graph; every timeline rule holds and the measured peak is
 * the simulator's accounting (cuDNN's scratch and workspace are outside it). Without a GPU every
 * run is GOPT_EUNSUP. */
static void test_cuda_cnn(void **state) {
    (void)state;
    fixture x;
    fixture_open(&x, zoo_graph("resnet", 18, 1, 32), 1);
    gopt_decisions d = {0};
    method_decisions(&x, "single+cp+xla", &d);
    gopt_sim_result sr;
    gopt_error err = {0};
    assert_int_equal(gopt_sim_run(x.sim, &d, &sr, x.s, &err), GOPT_OK);
    for (int cc = GOPT_RT_CUDA_CONV_DEFAULT; cc < GOPT_RT_CUDA_CONV_COUNT; cc++)
        for (int graph = 0; graph < 2; graph++) {
            if (cc == GOPT_RT_CUDA_CONV_CUDNN && !gopt_rt_cudnn_built()) continue;
            gopt_rt_options o = {.backend = GOPT_RT_CUDA, .reps = 2, .cuda_graph = graph,
                                 .cuda_conv = (gopt_rt_cuda_conv)cc};
            gopt_rt_report rep;
            gopt_status st = gopt_rt_run(x.rt, &d, &o, &rep, &err);
            if (st == GOPT_EUNSUP) {
                printf("# cuda cnn (%s%s): skipped (%s)\n", gopt_rt_cuda_conv_name((gopt_rt_cuda_conv)cc),
                       graph ? ", graph" : "", err.msg);
                continue;
            }
            if (st) fprintf(stderr, "%s\n", err.msg);
            assert_int_equal(st, GOPT_OK);
            check_timeline(&x, &d, &rep, 1);
            assert_int_equal((long long)rep.res.peak_memory_bytes[0], (long long)sr.peak_memory_bytes[0]);
            assert_true(rep.conv_cudnn + rep.conv_im2col > 0);
            if (gopt_rt_cuda_conv_resolve((gopt_rt_cuda_conv)cc) == GOPT_RT_CUDA_CONV_IM2COL)
                assert_int_equal(rep.conv_cudnn, 0);
            else
                assert_true(rep.conv_cudnn > 0);
            printf("# cuda cnn (%s%s): %.3f ms, %d convolutions by cuDNN, %d by im2col\n",
                   gopt_rt_cuda_conv_name((gopt_rt_cuda_conv)cc), graph ? ", graph" : "", rep.res.step_time_s * 1e3,
                   rep.conv_cudnn, rep.conv_im2col);
        }
    gopt_decisions_destroy(&d);
    fixture_close(&x);
}

/* The convolution the CUDA backend gives cuDNN for an implicit GEMM (m, n, k): m output pixels
 * exactly (n h w = m, w the largest divisor of m not above its square root), n filters, c r r = k
 * (3 x 3 when k is a multiple of 9), so 2 n k h w c r r = 2 m n k: the node's FLOPs. */
static void test_conv_shape(void **state) {
    (void)state;
    static const int64_t cases[][3] = {
        {100352, 64, 576}, /* resnet's 3 x 3, 64 -> 64 at 56 x 56, batch 32 */
        {100352, 256, 64}, /* its 1 x 1 */
        {114688, 7, 4608}, {401408, 64, 147}, {1, 1, 1}, {7919, 3, 27}, /* a prime m */
        {36, 5, 9}, {1000003 * 2LL, 10, 18}, {50000, 1, 8},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t m = cases[i][0], n = cases[i][1], k = cases[i][2];
        rt_conv_shape s;
        assert_int_equal(rt_conv_shape_of(m, n, k, &s), 1);
        assert_int_equal(s.n * s.h * s.w, m);
        assert_int_equal(s.k, n);
        assert_int_equal(s.c * s.r * s.r, k);
        assert_int_equal(s.r, k % 9 == 0 ? 3 : 1);
        assert_int_equal(s.n, 1);
        assert_true(s.w <= s.h && s.w * s.w <= m);
        for (int64_t w = s.w + 1; w * w <= m; w++) assert_true(m % w != 0); /* the largest such divisor */
    }
    rt_conv_shape s;
    assert_int_equal(rt_conv_shape_of(7919, 3, 27, &s), 1);
    assert_int_equal(s.w, 1);
    assert_int_equal(rt_conv_shape_of(100352, 64, 576, &s), 1);
    assert_int_equal(s.w, 256);
    assert_int_equal(s.h, 392);
    assert_int_equal(s.c, 64);
    /* nothing to run, or a tensor cuDNN's 4-d descriptors cannot hold (2^31 elements) */
    assert_int_equal(rt_conv_shape_of(0, 64, 576, &s), 0);
    assert_int_equal(s.n, 0);
    assert_int_equal(rt_conv_shape_of(100, 0, 9, &s), 0);
    assert_int_equal(rt_conv_shape_of(100, 4, -9, &s), 0);
    assert_int_equal(rt_conv_shape_of(1LL << 24, 64, 1152, &s), 0);  /* input 2^24 x 128 */
    assert_int_equal(rt_conv_shape_of(1LL << 26, 64, 9, &s), 0);     /* output 2^26 x 64 */
    assert_int_equal(rt_conv_shape_of(64, 1 << 16, 1 << 16, &s), 0); /* filter 2^32 */
    assert_int_equal(rt_conv_shape_of(1LL << 24, 64, 1143, &s), 1);  /* input 2^24 x 127: just below */
    assert_int_equal(rt_conv_taps(576), 9);
    assert_int_equal(rt_conv_taps(9), 9);
    assert_int_equal(rt_conv_taps(147), 1);
    assert_int_equal(rt_conv_taps(0), 1);
}

/* The operands' workspace regions start at multiples of 64 floats (256 bytes: cuBLAS's and
 * cuDNN's vectorized kernels), one after the other, within what the call says it needs. */
static void test_gemm_operands_aligned(void **state) {
    (void)state;
    static const int64_t dims[][3] = {{5, 7, 3}, {33, 1, 17}, {100, 64, 576}};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        for (int conv = 0; conv < 2; conv++) {
            const int64_t *dm = dims[i];
            const float *A, *B;
            float *C, *col;
            int64_t need = rt_gemm_operands(dm, conv, NULL, 0, (rt_span){NULL, 0}, NULL, &A, &B, &C, &col);
            float *ws = malloc((size_t)need * sizeof(float));
            assert_non_null(ws);
            assert_int_equal(rt_gemm_operands(dm, conv, NULL, 0, (rt_span){NULL, 0}, ws, &A, &B, &C, &col), need);
            const float *regions[] = {conv ? B : A, conv ? C : B, conv ? col : C};
            const int64_t sizes[] = {conv ? dm[2] * dm[1] : dm[0] * dm[2], conv ? dm[0] * dm[1] : dm[2] * dm[1],
                                     conv ? rt_conv_block_rows(dm[0], dm[2]) * dm[2] : dm[0] * dm[1]};
            for (int r = 0; r < 3; r++) {
                assert_int_equal((regions[r] - ws) % 64, 0);
                assert_true(regions[r] + sizes[r] <= ws + need);
                if (r > 0) assert_true(regions[r] >= regions[r - 1] + sizes[r - 1]);
            }
            free(ws);
        }
}

static void test_names(void **state) {
    (void)state;
    assert_int_equal(gopt_rt_backend_parse("cpu"), GOPT_RT_CPU);
    assert_int_equal(gopt_rt_backend_parse("cuda"), GOPT_RT_CUDA);
    assert_int_equal(gopt_rt_backend_parse("tpu"), -1);
    assert_int_equal(gopt_rt_clock_parse("cpu"), GOPT_RT_CLOCK_CPU);
    assert_int_equal(gopt_rt_clock_parse("sundial"), -1);
    assert_null(gopt_rt_backend_name(GOPT_RT_BACKEND_COUNT));
    assert_int_equal(gopt_rt_cuda_conv_parse("cudnn"), GOPT_RT_CUDA_CONV_CUDNN);
    assert_int_equal(gopt_rt_cuda_conv_parse("im2col"), GOPT_RT_CUDA_CONV_IM2COL);
    assert_int_equal(gopt_rt_cuda_conv_parse("default"), -1); /* not a user's choice: leave the option out */
    assert_int_equal(gopt_rt_cuda_conv_parse("winograd"), -1);
    assert_int_equal(gopt_rt_cuda_conv_parse(NULL), -1);
    assert_string_equal(gopt_rt_cuda_conv_name(GOPT_RT_CUDA_CONV_IM2COL), "im2col");
    assert_null(gopt_rt_cuda_conv_name(GOPT_RT_CUDA_CONV_COUNT));
    assert_int_equal(gopt_rt_cuda_conv_resolve(GOPT_RT_CUDA_CONV_DEFAULT),
                     gopt_rt_cudnn_built() ? GOPT_RT_CUDA_CONV_CUDNN : GOPT_RT_CUDA_CONV_IM2COL);
    assert_int_equal(gopt_rt_cuda_conv_resolve(GOPT_RT_CUDA_CONV_IM2COL), GOPT_RT_CUDA_CONV_IM2COL);
}

/* A gemm's or convolution's weight is its B operand, read from its own buffer: the tightest input
 * that holds k x n floats, whether it is the larger input (a late convolution, a matmul's
 * weight) or the smaller (an early convolution); A is the largest of the others. */
static void test_gemm_inputs(void **state) {
    (void)state;
    int ia, ib;
    const int64_t late[3] = {8, 512, 4608}, early[3] = {2048, 64, 576}, mv[3] = {1, 4096, 2048}, big[3] = {8, 8, 8};
    rt_span ins[2] = {{NULL, 4096}, {NULL, 4608 * 512}};
    rt_gemm_inputs(late, ins, 2, &ia, &ib);
    assert_true(ia == 0 && ib == 1);
    ins[0].floats = 131072;
    ins[1].floats = 576 * 64;
    rt_gemm_inputs(early, ins, 2, &ia, &ib);
    assert_true(ia == 0 && ib == 1);
    ins[0].floats = 4096 * 2048;
    ins[1].floats = 2048;
    rt_gemm_inputs(mv, ins, 2, &ia, &ib);
    assert_true(ia == 1 && ib == 0);
    ins[0].floats = 10;
    ins[1].floats = 20;
    rt_gemm_inputs(big, ins, 2, &ia, &ib); /* neither holds B: the workspace does */
    assert_true(ia == 1 && ib == -1);
    rt_gemm_inputs(big, ins, 0, &ia, &ib);
    assert_true(ia == -1 && ib == -1);
}

/* The memory-bound kernel's values: each input is read once over its own length (an input
 * shorter than the output adds into its start, the rest of the output is zero, as the CUDA kernel
 * does), input floats past the outputs' end are summed into the returned reduction, and nothing
 * is summed when there are none. Outputs shorter than one block, exactly one, across two. */
static void test_memory_kernel_values(void **state) {
    (void)state;
    enum { N = 5003, B = 7, R = 10000 };
    float *a = malloc(R * sizeof(float)), *b = malloc(B * sizeof(float)), *o = malloc(R * sizeof(float));
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(o);
    for (int i = 0; i < R; i++) a[i] = 0.25f * (float)(i % 4);
    for (int i = 0; i < B; i++) b[i] = (float)(i + 1);
    int lens[] = {N, 5, 2048, 2049};
    for (size_t t = 0; t < sizeof lens / sizeof lens[0]; t++) {
        int n = lens[t];
        rt_span in[2] = {{a, n}, {b, B}}, out = {o, n};
        float red = rt_memory_kernel(in, 2, &out, 1), want = 0;
        for (int i = n; i < B; i++) want += b[i]; /* the short input past a shorter output */
        assert_true(red == want);
        for (int i = 0; i < n; i++) assert_true(o[i] == a[i] + (i < B ? b[i] : 0));
    }
    /* every input shorter than the output, in any order, the long ones ending inside a block (a
     * scatter into an embedding table fused with the sums before it; a concatenation) */
    {
        enum { NA = 5 };
        const int64_t len[NA] = {3001, 2500, 2600, 2700, 2800};
        rt_span in[NA + 1], out = {o, R};
        for (int j = 0; j < NA; j++) in[j] = (rt_span){a + j, len[j]};
        in[NA] = (rt_span){b, B};
        for (int nin = 2; nin <= NA + 1; nin += NA - 1) {
            in[1] = nin == 2 ? in[NA] : (rt_span){a + 1, len[1]}; /* two inputs: a long one and b */
            assert_true(rt_memory_kernel(in, nin, &out, 1) == 0);
            for (int i = 0; i < R; i++) {
                float want = i < B ? b[i] : 0;
                for (int j = 0; j < nin - 1; j++) want += i < len[j] ? a[j + i] : 0;
                assert_true(o[i] == want);
            }
        }
    }
    /* no input: the output is written, with zeros */
    {
        rt_span out = {o, 3000};
        o[2999] = 1;
        assert_true(rt_memory_kernel(NULL, 0, &out, 1) == 0);
        for (int i = 0; i < 3000; i++) assert_true(o[i] == 0);
    }
    /* a reduction: 10000 floats into 3 */
    rt_span in = {a, R}, out = {o, 3};
    float red = rt_memory_kernel(&in, 1, &out, 1);
    double want = 0;
    for (int i = 3; i < R; i++) want += a[i];
    assert_true(fabs(red - want) < 1e-3);
    for (int i = 0; i < 3; i++) assert_true(o[i] == a[i]);
    free(a);
    free(b);
    free(o);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_memory_kernel_values),
        cmocka_unit_test(test_gemm_inputs),
        cmocka_unit_test(test_mlp_two_devices),
        cmocka_unit_test(test_peak_equals_simulator),
        cmocka_unit_test(test_methods_two_devices),
        cmocka_unit_test(test_bad_decisions),
        cmocka_unit_test(test_cuda_backend),
        cmocka_unit_test(test_cuda_cnn),
        cmocka_unit_test(test_conv_shape),
        cmocka_unit_test(test_gemm_operands_aligned),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
