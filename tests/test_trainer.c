/* test_trainer.c: the PPO trainer.
 *
 * Known answer from scratch: ten heavy ops between a source and a sink on two
 * devices, one ten times slower: the best placement puts every heavy op on
 * the fast device. PPO with a tiny network must make its *greedy* decisions
 * reach that step within a bounded number of steps (60). Resume after
 * an interruption equals the uninterrupted run bit for bit (parameters, Adam
 * state, RNG, schedule). A non-finite loss skips the update and is reported,
 * parameters untouched. Imitation lowers its loss. Decisions from actions
 * (defaults for unlearned tasks, fusion singletons), the go method on a saved
 * checkpoint, and refusals: bad options, bad tasks, resume with other options,
 * a state that does not match its policy file. Canonical device labels of
 * imitation targets: symmetries of the DGX-1 links simulate equal. An
 * evaluator set in place of the simulator judges every sample, the greedy
 * decisions and the bests, and PPO follows it (to the placement the simulator
 * judges worst); a failing evaluator rejects samples and fails the greedy.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <pthread.h>

#include "gopt_trainer.h"
#include "gopt_zoo.h"
#include "trainer_internal.h" /* tr_shard_of */

static gopt_profile *make_profile2(int ndev, double mem, double peak1) {
    return test_profile_uniform(ndev, mem, peak1, "test_trainer");
}
static gopt_profile *make_profile(int ndev, double mem) { return make_profile2(ndev, mem, 1e12); }

static int32_t add(gopt_graph *g, const char *name, gopt_op_class c, double flops, double out) {
    gopt_node_attrs a = {0};
    a.name = name;
    a.op = c == GOPT_OP_CLASS_GEMM ? "MatMul" : "Add";
    a.cls = c;
    a.flops = flops;
    a.out_bytes = out;
    a.layer = -1;
    int32_t id = -1;
    assert_int_equal(gopt_graph_add_node(g, &a, &id, NULL), GOPT_OK);
    return id;
}

/* `heavy` independent 1 ms GEMMs (1e9 flops at 1e12 FLOP/s) from one source
 * into one sink, tiny tensors. */
static gopt_graph *fan_graph(const char *name, int heavy) {
    gopt_graph *g = NULL;
    assert_int_equal(gopt_graph_create(&g, name, "test", NULL), GOPT_OK);
    int32_t src = add(g, "src", GOPT_OP_CLASS_ELEMENTWISE, 1e3, 16);
    int32_t sink = -1, ids[64];
    char nm[32];
    for (int i = 0; i < heavy; i++) {
        snprintf(nm, sizeof nm, "mm%d", i);
        ids[i] = add(g, nm, GOPT_OP_CLASS_GEMM, 1e9, 16);
    }
    sink = add(g, "sink", GOPT_OP_CLASS_ELEMENTWISE, 1e3, 16);
    for (int i = 0; i < heavy; i++) {
        assert_int_equal(gopt_graph_add_edge(g, src, ids[i], 16, NULL), GOPT_OK);
        assert_int_equal(gopt_graph_add_edge(g, ids[i], sink, 16, NULL), GOPT_OK);
    }
    gopt_error err = {0};
    assert_int_equal(gopt_graph_finalize(g, &err), GOPT_OK);
    return g;
}

/* src -> a_i, b_i -> c_i (i < count), every c_i -> sink; all elementwise: the diamonds a -> c <-
 * b where the merging fusion pass and the first-fit one form different groups */
static gopt_graph *diamond_graph(const char *name, int count) {
    gopt_graph *g = NULL;
    assert_int_equal(gopt_graph_create(&g, name, "test", NULL), GOPT_OK);
    int32_t src = add(g, "src", GOPT_OP_CLASS_ELEMENTWISE, 1e3, 1 << 20);
    int32_t sink = add(g, "sink", GOPT_OP_CLASS_ELEMENTWISE, 1e3, 16);
    char nm[32];
    for (int i = 0; i < count; i++) {
        int32_t v[3];
        for (int j = 0; j < 3; j++) {
            snprintf(nm, sizeof nm, "%c%d", "abc"[j], i);
            v[j] = add(g, nm, GOPT_OP_CLASS_ELEMENTWISE, 1e6, 1 << 20);
        }
        assert_int_equal(gopt_graph_add_edge(g, src, v[0], 1 << 20, NULL), GOPT_OK);
        assert_int_equal(gopt_graph_add_edge(g, src, v[1], 1 << 20, NULL), GOPT_OK);
        assert_int_equal(gopt_graph_add_edge(g, v[0], v[2], 1 << 20, NULL), GOPT_OK);
        assert_int_equal(gopt_graph_add_edge(g, v[1], v[2], 1 << 20, NULL), GOPT_OK);
        assert_int_equal(gopt_graph_add_edge(g, v[2], sink, 16, NULL), GOPT_OK);
    }
    assert_int_equal(gopt_graph_finalize(g, NULL), GOPT_OK);
    return g;
}

static void tiny_config(gopt_policy_config *c, int ndev) {
    gopt_policy_config_default(c);
    c->hidden = 16;
    c->sage_layers = 1;
    c->attn_layers = 1;
    c->heads = 2;
    c->segment = 8;
    c->ffn_mult = 1;
    c->max_devices = ndev;
    c->sched_levels = 4;
    c->fusion_levels = 2;
}

typedef struct {
    gopt_profile *prof;
    gopt_costmodel *cm;
    gopt_policy *pol;
    gopt_trainer *tr;
} env;

static void env_init2(env *e, int ndev, const gopt_trainer_options *o, uint64_t pseed, double peak1) {
    memset(e, 0, sizeof *e);
    e->prof = make_profile2(ndev, 1e12, peak1);
    assert_int_equal(gopt_cost_create(e->prof, ndev, &e->cm, NULL), GOPT_OK);
    gopt_policy_config c;
    tiny_config(&c, ndev);
    gopt_error err = {0};
    assert_int_equal(gopt_policy_create(&e->pol, &c, pseed, &err), GOPT_OK);
    gopt_status st = gopt_trainer_create(&e->tr, e->pol, e->cm, o, &err);
    if (st) fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(st, GOPT_OK);
}

static void env_init(env *e, int ndev, const gopt_trainer_options *o, uint64_t pseed) {
    env_init2(e, ndev, o, pseed, 1e12);
}

static void env_free(env *e) {
    gopt_trainer_free(e->tr);
    gopt_policy_free(e->pol);
    gopt_cost_free(e->cm);
    gopt_profile_free(e->prof);
}

static void add_graph(env *e, gopt_graph *g) {
    gopt_error err = {0};
    gopt_status st = gopt_trainer_add_graph(e->tr, g, 0, &err);
    if (st) fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(st, GOPT_OK);
}

static double greedy_step(env *e, int i) {
    gopt_decisions d = {0};
    gopt_sim_result r;
    gopt_error err = {0};
    assert_int_equal(gopt_decisions_init(&d, gopt_graph_num_nodes(gopt_trainer_graph(e->tr, i)), NULL), GOPT_OK);
    assert_int_equal(gopt_trainer_greedy(e->tr, i, &d, &r, &err), GOPT_OK);
    gopt_decisions_destroy(&d);
    return r.step_time_s;
}

/* ---- PPO finds the known best placement from scratch ----------------------------
 * Ten independent 1 ms GEMMs on two devices, device 1 ten times slower: the
 * unique best puts all of them on device 0. (A symmetric problem, e.g. two
 * equal devices where any 5+5 split is best, is much harder for a factorised
 * policy: the good samples disagree on each node's device, docs/trainer.md.) */
static void test_ppo_finds_known_placement(void **state) {
    (void)state;
    gopt_trainer_options o;
    gopt_trainer_options_default(&o);
    o.tasks = GOPT_TASK_BIT(GOPT_TASK_PLACE);
    o.samples = 16;
    o.epochs = 4;
    o.adam.lr = 1e-2f;
    o.entropy_coef = 0.0f;
    o.sim_threads = 1;
    o.seed = 7;
    env e;
    env_init2(&e, 2, &o, 3, 1e11);
    add_graph(&e, fan_graph("fan10", 10));
    const char *m;
    double ref = gopt_trainer_reference(e.tr, 0, &m);
    /* the best: every heavy op on the fast device 0, 10 x 1 ms */
    assert_true(ref > 10.0e-3 && ref < 10.1e-3);
    double start_mean = 0;
    int reached = -1;
    for (int s = 0; s < 60 && reached < 0; s++) {
        gopt_trainer_stats st;
        gopt_error err = {0};
        assert_int_equal(gopt_trainer_step(e.tr, &st, &err), GOPT_OK);
        assert_int_equal(st.skipped, 0);
        if (getenv("TRAINER_DEBUG"))
            fprintf(stderr, "step %d reward %.4f best %.4f mean %.4f ent %.4f loss %.5f gn %.5f bw %d\n", s,
                    st.reward_mean, st.best_rel, st.mean_rel, st.entropy, st.loss, st.grad_norm, st.backward_calls);
        if (s == 0) start_mean = st.mean_rel;
        /* found: the greedy decisions are optimal and so are nearly all samples */
        if (st.mean_rel < 1.02 && greedy_step(&e, 0) <= ref * 1.002) reached = s + 1;
    }
    if (reached < 0) fprintf(stderr, "greedy %.6g ms vs best %.6g ms\n", greedy_step(&e, 0) * 1e3, ref * 1e3);
    assert_true(reached > 0);
    assert_true(start_mean > 2.0); /* the untrained samples were far off */
    env_free(&e);
}

/* ---- the evaluator seam ------------------------------------------------------------
 * An evaluator that prefers device 1 (1 ms per node left on device 0, the
 * simulator's fast device): PPO must follow it, not the simulator. */
typedef struct {
    long calls;
    int fail;
} count_eval;

static double dev1_evaluate(void *ctx, const gopt_decisions *d, int *oom) {
    count_eval *c = ctx;
    c->calls++;
    *oom = 0;
    if (c->fail) return -1;
    int on0 = 0;
    for (int32_t v = 0; v < d->n; v++) on0 += d->device[v] == 0;
    return 1e-3 * (1 + on0);
}

static void test_evaluator_seam(void **state) {
    (void)state;
    gopt_trainer_options o;
    gopt_trainer_options_default(&o);
    o.tasks = GOPT_TASK_BIT(GOPT_TASK_PLACE);
    o.samples = 16;
    o.adam.lr = 1e-2f;
    o.entropy_coef = 0.0f;
    o.sim_threads = 1;
    o.seed = 7;
    env e;
    env_init2(&e, 2, &o, 3, 1e11);
    add_graph(&e, fan_graph("fan10", 10));
    const double ref = gopt_trainer_reference(e.tr, 0, NULL); /* simulated, before the evaluator */
    count_eval c = {0, 0};
    gopt_trainer_set_evaluator(e.tr, dev1_evaluate, &c);
    gopt_decisions d = {0};
    gopt_sim_result r;
    gopt_error err = {0};
    assert_int_equal(gopt_decisions_init(&d, gopt_graph_num_nodes(gopt_trainer_graph(e.tr, 0)), NULL), GOPT_OK);
    /* the policy's best of K, judged by the evaluator like the rollouts (fine-tuning's first look) */
    gopt_rng zr;
    gopt_rng_seed(&zr, 11);
    double bk = 0;
    assert_int_equal(gopt_trainer_sample_best(e.tr, 0, &zr, &bk, &err), GOPT_OK);
    assert_int_equal(c.calls, o.samples);
    assert_true(bk >= 1e-3 && fabs(bk * 1e3 - round(bk * 1e3)) < 1e-9);
    assert_true(gopt_trainer_best(e.tr, 0, NULL) <= bk);
    assert_int_equal(gopt_trainer_sample_best(e.tr, 1, &zr, &bk, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "out of range"));
    assert_int_equal(gopt_trainer_sample_best(e.tr, 0, NULL, &bk, &err), GOPT_EINVAL);
    c.calls = 0;
    int reached = -1;
    for (int s = 0; s < 60 && reached < 0; s++) {
        gopt_trainer_stats st;
        long before = c.calls;
        assert_int_equal(gopt_trainer_step(e.tr, &st, &err), GOPT_OK);
        assert_int_equal(c.calls - before, o.samples); /* every sample judged by the evaluator, once */
        /* the step's best is an evaluator's value: a whole number of ms */
        double ms = st.best_step_s * 1e3;
        assert_true(fabs(ms - round(ms)) < 1e-9 && ms >= 1);
        assert_int_equal(gopt_trainer_greedy(e.tr, 0, &d, &r, &err), GOPT_OK);
        assert_int_equal(c.calls - before, o.samples + 1);
        assert_true(gopt_trainer_best(e.tr, 0, NULL) <= r.step_time_s);
        if (r.step_time_s <= 1.5e-3) reached = s + 1; /* every node on device 1 */
    }
    assert_true(reached > 0);
    for (int32_t v = 0; v < d.n; v++) assert_int_equal(d.device[v], 1);
    assert_true(gopt_trainer_best(e.tr, 0, NULL) == 1e-3);
    /* the simulator judges the same decisions far worse than its reference */
    gopt_trainer_set_evaluator(e.tr, NULL, NULL);
    assert_int_equal(gopt_trainer_greedy(e.tr, 0, &d, &r, &err), GOPT_OK);
    assert_true(r.step_time_s > 2 * ref);
    /* a failing evaluator: every sample rejected, the greedy evaluation an error */
    c.fail = 1;
    gopt_trainer_set_evaluator(e.tr, dev1_evaluate, &c);
    gopt_trainer_stats st;
    assert_int_equal(gopt_trainer_step(e.tr, &st, &err), GOPT_OK);
    assert_int_equal(st.invalid, o.samples);
    assert_int_equal(gopt_trainer_greedy(e.tr, 0, &d, &r, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "evaluator failed"));
    gopt_decisions_destroy(&d);
    env_free(&e);
}

/* ---- the tie order within GO's priority levels -------------------------------------
 * With the schedule learned, the greedy answer and fine-tuning's zero-shot samples are judged
 * under both orders within a level (critical path, topological) and the faster kept, as
 * gopt_go_decide does: an evaluator that scores each decision set by a hash of its priorities
 * sees two sets per answer, and the answer is the faster of the two. */
typedef struct {
    long calls;
    double last[64];
} ties_eval;

static double prio_evaluate(void *ctx, const gopt_decisions *d, int *oom) {
    ties_eval *c = ctx;
    uint64_t h = 1469598103934665603ull;
    for (int32_t v = 0; v < d->n; v++) h = (h ^ (uint64_t)(uint32_t)d->priority[v]) * 1099511628211ull;
    const double s = 1e-3 * (1 + (double)(h % 1000));
    c->last[c->calls++ % 64] = s;
    *oom = 0;
    return s;
}

static void test_greedy_tie_orders(void **state) {
    (void)state;
    gopt_trainer_options o;
    gopt_trainer_options_default(&o);
    o.tasks = GOPT_TASK_BIT(GOPT_TASK_PLACE) | GOPT_TASK_BIT(GOPT_TASK_SCHED);
    o.samples = 8;
    o.sim_threads = 1;
    env e;
    env_init(&e, 2, &o, 3);
    add_graph(&e, test_random_graph(60, 9, 0)); /* chains of several lengths: the orders differ */
    ties_eval c = {0};
    gopt_trainer_set_evaluator(e.tr, prio_evaluate, &c);
    gopt_decisions d = {0};
    gopt_sim_result r;
    gopt_error err = {0};
    assert_int_equal(gopt_decisions_init(&d, gopt_graph_num_nodes(gopt_trainer_graph(e.tr, 0)), NULL), GOPT_OK);
    assert_int_equal(gopt_trainer_greedy(e.tr, 0, &d, &r, &err), GOPT_OK);
    assert_int_equal(c.calls, 2); /* one answer, two orders */
    assert_true(c.last[0] != c.last[1]); /* the two orders are two decision sets */
    assert_true(r.step_time_s == fmin(c.last[0], c.last[1]));
    int oom;
    assert_true(prio_evaluate(&c, &d, &oom) == r.step_time_s); /* d is the faster one's decisions */
    c.calls = 0;
    gopt_rng zr;
    gopt_rng_seed(&zr, 5);
    double bk = 0;
    assert_int_equal(gopt_trainer_sample_best(e.tr, 0, &zr, &bk, &err), GOPT_OK);
    assert_int_equal(c.calls, 2 * o.samples);
    double lo = INFINITY;
    for (int k = 0; k < 2 * o.samples; k++) lo = fmin(lo, c.last[k]);
    assert_true(bk == lo);
    assert_true(gopt_trainer_best(e.tr, 0, NULL) <= bk);
    gopt_decisions_destroy(&d);
    env_free(&e);
}

/* ---- resume equals the uninterrupted run ------------------------------------------ */
static void run_steps(env *e, int n) {
    for (int s = 0; s < n; s++) {
        gopt_trainer_stats st;
        gopt_error err = {0};
        gopt_status r = gopt_trainer_step(e->tr, &st, &err);
        if (r) fprintf(stderr, "%s\n", err.msg);
        if (getenv("TRAINER_DEBUG"))
            fprintf(stderr, "run step %lld im %d loss %g gn %g skipped %d ent %g\n", (long long)st.step, st.imitation,
                    st.loss, st.grad_norm, st.skipped, st.entropy);
        assert_int_equal(r, GOPT_OK);
    }
}

static void test_resume_equals_uninterrupted(void **state) {
    (void)state;
    char dir[] = "/tmp/gopt_test_trainer_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char pa[256], pb[256], sa[300], sb[300];
    snprintf(pa, sizeof pa, "%s/a.ckpt", dir);
    snprintf(pb, sizeof pb, "%s/b.ckpt", dir);
    gopt_trainer_options o;
    gopt_trainer_options_default(&o);
    o.samples = 6;
    o.epochs = 2;
    o.imitate_steps = 2;
    o.sim_threads = 2;
    o.seed = 11;
    o.switch_every = 2;
    /* uninterrupted: 8 steps over two graphs */
    env e;
    env_init(&e, 2, &o, 5);
    add_graph(&e, fan_graph("fan4", 4));
    add_graph(&e, fan_graph("fan5", 5));
    run_steps(&e, 8);
    gopt_error err = {0};
    assert_int_equal(gopt_trainer_save(e.tr, pa, &err), GOPT_OK);
    env_free(&e);
    /* interrupted after 3 steps, resumed in a fresh process-like setup */
    env_init(&e, 2, &o, 5);
    add_graph(&e, fan_graph("fan4", 4));
    add_graph(&e, fan_graph("fan5", 5));
    run_steps(&e, 3);
    assert_int_equal(gopt_trainer_save(e.tr, pb, &err), GOPT_OK);
    run_steps(&e, 2); /* work lost by the "kill" */
    env_free(&e);
    env_init(&e, 2, &o, 99); /* another init seed: everything must come from the checkpoint */
    add_graph(&e, fan_graph("fan4", 4));
    add_graph(&e, fan_graph("fan5", 5));
    gopt_status st = gopt_trainer_load(e.tr, pb, &err);
    if (st) fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(st, GOPT_OK);
    assert_int_equal(gopt_trainer_steps_done(e.tr), 3);
    run_steps(&e, 5);
    assert_int_equal(gopt_trainer_save(e.tr, pb, &err), GOPT_OK);
    env_free(&e);
    size_t la, lb;
    char *a = test_read_file(pa, &la), *b = test_read_file(pb, &lb);
    assert_int_equal(la, lb);
    assert_memory_equal(a, b, la); /* parameters, Adam moments and step */
    free(a);
    free(b);
    snprintf(sa, sizeof sa, "%s.state", pa);
    snprintf(sb, sizeof sb, "%s.state", pb);
    a = test_read_file(sa, &la);
    b = test_read_file(sb, &lb);
    assert_int_equal(la, lb);
    assert_memory_equal(a, b, la); /* step, RNG, schedule, bests */
    free(a);
    free(b);

    /* a kill between the state and the policy rename: load finishes it */
    env_init(&e, 2, &o, 5);
    add_graph(&e, fan_graph("fan4", 4));
    add_graph(&e, fan_graph("fan5", 5));
    assert_int_equal(gopt_trainer_load(e.tr, pb, &err), GOPT_OK);
    char next[300];
    snprintf(next, sizeof next, "%s.next", pb);
    assert_int_equal(rename(pb, next), 0);
    assert_int_equal(gopt_trainer_load(e.tr, pb, &err), GOPT_OK);
    assert_int_equal(access(next, F_OK), -1);
    /* a policy file that does not belong to the state is refused */
    assert_int_equal(gopt_trainer_save(e.tr, pa, &err), GOPT_OK);
    run_steps(&e, 1);
    assert_int_equal(gopt_policy_save(e.pol, pa, &err), GOPT_OK);
    assert_int_equal(gopt_trainer_load(e.tr, pa, &err), GOPT_EFORMAT);
    assert_non_null(strstr(err.msg, "does not belong"));
    env_free(&e);
    /* resuming with other options or other graphs is refused, naming them */
    gopt_trainer_options o2 = o;
    o2.epochs = 3;
    env_init(&e, 2, &o2, 5);
    add_graph(&e, fan_graph("fan4", 4));
    add_graph(&e, fan_graph("fan5", 5));
    assert_int_equal(gopt_trainer_load(e.tr, pb, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "option epochs"));
    env_free(&e);
    env_init(&e, 2, &o, 5);
    add_graph(&e, fan_graph("fan4", 4));
    assert_int_equal(gopt_trainer_load(e.tr, pb, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "same graphs"));
    env_free(&e);
    /* a damaged .state is refused naming the .state file: an all-zero RNG (xoshiro's fixed
     * point), unknown tasks */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "sed -i 's/^\\( *\\)\"[0-9a-f]\\{16\\}\"/\\1\"0000000000000000\"/' '%s'", sb);
    assert_int_equal(system(cmd), 0);
    env_init(&e, 2, &o, 5);
    add_graph(&e, fan_graph("fan4", 4));
    add_graph(&e, fan_graph("fan5", 5));
    assert_int_equal(gopt_trainer_load(e.tr, pb, &err), GOPT_EFORMAT);
    assert_non_null(strstr(err.msg, ".state: rng state is all zero"));
    env_free(&e);
    snprintf(cmd, sizeof cmd, "sed -i 's/\"tasks\": \"[^\"]*\"/\"tasks\": \"bogus\"/' '%s'", sb);
    assert_int_equal(system(cmd), 0);
    unsigned tasks = 0;
    assert_int_equal(gopt_trainer_checkpoint_tasks(pb, &tasks, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, ".state: options.tasks: tasks 'bogus'"));
    /* a number below a double's range is refused, not read as 0 (gopt_json_check_numbers) */
    snprintf(cmd, sizeof cmd, "sed -i 's/\"tasks\": \"[^\"]*\"/\"tasks\": \"place\"/; s/\"entropy\": [^,]*/\"entropy\": 1e-400/' '%s'", sb);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(gopt_trainer_checkpoint_tasks(pb, &tasks, &err), GOPT_EFORMAT);
    assert_non_null(strstr(err.msg, ".state: line "));
    assert_non_null(strstr(err.msg, ": options.entropy: the number 1e-400 is below the smallest double"));
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* ---- several graphs per step, switching every two steps ------------------------------ */
static void test_graphs_per_step(void **state) {
    (void)state;
    gopt_trainer_options o;
    gopt_trainer_options_default(&o);
    o.samples = 4;
    o.epochs = 2;
    o.graphs_per_step = 2;
    o.switch_every = 2;
    o.imitate_steps = 1;
    o.sim_threads = 2;
    env e;
    env_init(&e, 2, &o, 8);
    add_graph(&e, fan_graph("fan3", 3));
    add_graph(&e, fan_graph("fan4", 4));
    add_graph(&e, fan_graph("fan5", 5));
    int seen[3] = {0, 0, 0};
    for (int s = 0; s < 6; s++) {
        gopt_trainer_stats st;
        gopt_error err = {0};
        assert_int_equal(gopt_trainer_step(e.tr, &st, &err), GOPT_OK);
        assert_int_equal(st.graphs, 2);
        assert_int_equal(st.skipped, 0);
        if (!st.imitation) assert_true(st.best_so_far_rel > 0 && isfinite(st.best_so_far_rel));
        seen[st.graph]++;
    }
    assert_true(seen[0] + seen[1] + seen[2] == 6);
    /* every graph was sampled at least once in 5 PPO steps of 2 graphs each */
    for (int i = 0; i < 3; i++) assert_true(isfinite(gopt_trainer_best(e.tr, i, NULL)));
    env_free(&e);
}

/* ---- the batched PPO backward (weights inside the replay) equals the per-sample path ------- */
/* With 3 epochs and with 1: the first epoch of the batched path reuses the
 * rollout's forward and its kept gradients (no replay, ratios all 1), the
 * later ones replay; with one epoch the reported loss is the first epoch's. */
static void test_batched_equals_rounds(void **state) {
    (void)state;
    static const int epochs[2] = {3, 1};
    for (int c = 0; c < 2; c++) {
        const int E = epochs[c];
        env e[2];
        double loss[2];
        for (int r = 0; r < 2; r++) {
            gopt_trainer_options o;
            gopt_trainer_options_default(&o);
            o.samples = 6;
            o.epochs = E;
            o.sim_threads = 1;
            o.backward_rounds = r;
            env_init(&e[r], 3, &o, 4);
            add_graph(&e[r], fan_graph("fan7", 7));
            gopt_trainer_stats st;
            gopt_error err = {0};
            for (int s = 0; s < 2; s++) assert_int_equal(gopt_trainer_step(e[r].tr, &st, &err), GOPT_OK);
            assert_int_equal(st.backward_calls, r ? 6 * E : E);
            loss[r] = st.loss;
        }
        assert_true(fabs(loss[0] - loss[1]) <= 1e-4 * (fabs(loss[1]) + 1e-3));
        float *p0, *p1;
        gopt_policy_tensor(e[0].pol, 0, NULL, &p0, NULL, NULL);
        gopt_policy_tensor(e[1].pol, 0, NULL, &p1, NULL, NULL);
        double dd = 0, moved = 0;
        gopt_policy *fresh = NULL;
        gopt_policy_config cfg;
        tiny_config(&cfg, 3);
        assert_int_equal(gopt_policy_create(&fresh, &cfg, 4, NULL), GOPT_OK);
        float *pf;
        gopt_policy_tensor(fresh, 0, NULL, &pf, NULL, NULL);
        for (size_t i = 0; i < gopt_policy_num_params(e[0].pol); i++) {
            dd += (p0[i] - p1[i]) * (double)(p0[i] - p1[i]);
            moved += (p1[i] - pf[i]) * (double)(p1[i] - pf[i]);
        }
        assert_true(moved > 0);          /* the steps changed the policy */
        assert_true(dd <= 1e-6 * moved); /* both paths moved it alike */
        gopt_policy_free(fresh);
        env_free(&e[0]);
        env_free(&e[1]);
    }
}

/* ---- a non-finite loss is detected, the update skipped and reported ---------------- */
static void test_nan_update_skipped(void **state) {
    (void)state;
    gopt_trainer_options o;
    gopt_trainer_options_default(&o);
    o.samples = 4;
    o.epochs = 2;
    o.sim_threads = 1;
    env e;
    env_init(&e, 2, &o, 1);
    add_graph(&e, fan_graph("fan4", 4));
    /* poison one head bias: its logits (and so the loss) become NaN */
    int nt = gopt_policy_num_tensors(e.pol), poisoned = 0;
    for (int i = 0; i < nt && !poisoned; i++) {
        const char *name;
        float *p, *g;
        size_t cnt;
        gopt_policy_tensor(e.pol, i, &name, &p, &g, &cnt);
        if (strstr(name, "head") && strstr(name, "b") && cnt >= 2) {
            p[1] = NAN;
            poisoned = 1;
        }
    }
    assert_true(poisoned);
    size_t np = gopt_policy_num_params(e.pol);
    float *before = malloc(sizeof(float) * np);
    size_t off = 0;
    for (int i = 0; i < nt; i++) {
        const char *name;
        float *p, *g;
        size_t cnt;
        gopt_policy_tensor(e.pol, i, &name, &p, &g, &cnt);
        memcpy(before + off, p, sizeof(float) * cnt);
        off += cnt;
    }
    gopt_trainer_stats st;
    gopt_error err = {0};
    gopt_status s = gopt_trainer_step(e.tr, &st, &err);
    if (s) fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(s, GOPT_OK);
    assert_int_equal(st.skipped, 2); /* both epochs skipped and counted */
    off = 0;
    for (int i = 0; i < nt; i++) {
        const char *name;
        float *p, *g;
        size_t cnt;
        gopt_policy_tensor(e.pol, i, &name, &p, &g, &cnt);
        assert_memory_equal(before + off, p, sizeof(float) * cnt); /* nothing applied (NaN bits included) */
        off += cnt;
    }
    free(before);
    env_free(&e);
}

/* ---- imitation learns the reference decisions --------------------------------------- */
static void test_imitation_lowers_loss(void **state) {
    (void)state;
    gopt_trainer_options o;
    gopt_trainer_options_default(&o);
    o.imitate_steps = 40;
    o.imitate_lr = 1e-2f;
    o.sim_threads = 1;
    env e;
    env_init(&e, 2, &o, 2);
    add_graph(&e, fan_graph("fan6", 6));
    double first = 0, last = 0;
    for (int s = 0; s < 40; s++) {
        gopt_trainer_stats st;
        gopt_error err = {0};
        assert_int_equal(gopt_trainer_step(e.tr, &st, &err), GOPT_OK);
        assert_int_equal(st.imitation, 1);
        if (s == 0) first = st.loss;
        last = st.loss;
    }
    assert_true(last < 0.5 * first);
    env_free(&e);
}

/* Interleaved imitation: after the warm start, every imitate_every-th step
 * imitates; 1 and negative values are refused. */
static void test_imitate_every(void **state) {
    (void)state;
    gopt_trainer_options o;
    gopt_trainer_options_default(&o);
    o.imitate_steps = 2;
    o.imitate_every = 3;
    o.samples = 2;
    o.sim_threads = 1;
    env e;
    env_init(&e, 2, &o, 2);
    add_graph(&e, fan_graph("fan3", 3));
    const int want[8] = {1, 1, 0, 0, 1, 0, 0, 1};
    for (int s = 0; s < 8; s++) {
        gopt_trainer_stats st;
        gopt_error err = {0};
        assert_int_equal(gopt_trainer_step(e.tr, &st, &err), GOPT_OK);
        assert_int_equal(st.imitation, want[s]);
    }
    env_free(&e);
    gopt_error err = {0};
    for (int bad = -1; bad <= 1; bad += 2) {
        o.imitate_every = bad;
        assert_int_equal(gopt_trainer_options_check(&o, &err), GOPT_EINVAL);
        assert_non_null(strstr(err.msg, "imitate every"));
    }
}

/* Self-imitation (imitate_best): the steps of imitate_every imitate the actions
 * behind the best solution found so far (their target's step is the best's);
 * a resumed run imitates the same actions (the state keeps them) and ends bit
 * for bit where the uninterrupted one does; a damaged best_actions is refused
 * naming it; the option needs imitate_every and is 0 or 1. */
/* A state's best_actions as states written before 2026-11-25 held them: arrays of integers
 * instead of strings of hex digits; src (a .state file) into dst. */
static void state_actions_as_arrays(const char *src, const char *dst) {
    json_t *j = json_load_file(src, 0, NULL);
    assert_non_null(j);
    json_t *gs = json_object_get(j, "graphs"), *g;
    size_t i;
    int converted = 0;
    json_array_foreach(gs, i, g) {
        const char *s = json_string_value(json_object_get(g, "best_actions"));
        if (!s) continue;
        json_t *a = json_array();
        for (const char *c = s; *c; c++) json_array_append_new(a, json_integer(*c <= '9' ? *c - '0' : *c - 'a' + 10));
        json_object_set_new(g, "best_actions", a);
        converted++;
    }
    assert_true(converted > 0);
    assert_int_equal(json_dump_file(j, dst, JSON_INDENT(1) | JSON_REAL_PRECISION(17)), 0);
    json_decref(j);
}

/* Loading path into a fresh trainer of options o on fan4 fails with EFORMAT and msg. */
/* Loading path into a fresh trainer of graph g (device 1's peak peak1) fails with code and msg. */
static void expect_load_error(const gopt_trainer_options *o, double peak1, gopt_graph *g, const char *path,
                              gopt_status code, const char *msg) {
    env e;
    gopt_error err = {0};
    env_init2(&e, 2, o, 3, peak1);
    add_graph(&e, g);
    assert_int_equal(gopt_trainer_load(e.tr, path, &err), code);
    if (!strstr(err.msg, msg)) fprintf(stderr, "got: %s\n", err.msg);
    assert_non_null(strstr(err.msg, msg));
    env_free(&e);
}

static void expect_fan4_load_error(const gopt_trainer_options *o, const char *path, const char *msg) {
    expect_load_error(o, 1e11, fan_graph("fan4", 4), path, GOPT_EFORMAT, msg);
}

static void test_imitate_best(void **state) {
    (void)state;
    char dir[] = "/tmp/gopt_test_trainer_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char pa[256], pb[256], sb[300];
    snprintf(pa, sizeof pa, "%s/a.ckpt", dir);
    snprintf(pb, sizeof pb, "%s/b.ckpt", dir);
    gopt_trainer_options o;
    gopt_trainer_options_default(&o);
    o.imitate_every = 2;
    o.imitate_best = 1;
    o.samples = 4;
    o.epochs = 1;
    o.sim_threads = 1;
    o.seed = 5;
    env e;
    env_init2(&e, 2, &o, 3, 1e11); /* device 1 ten times slower */
    add_graph(&e, fan_graph("fan4", 4));
    for (int s = 0; s < 8; s++) {
        gopt_trainer_stats st;
        gopt_error err = {0};
        const double best_before = gopt_trainer_best(e.tr, 0, NULL);
        assert_int_equal(gopt_trainer_step(e.tr, &st, &err), GOPT_OK);
        assert_int_equal(st.imitation, s % 2);
        if (st.imitation) /* the target is the best found so far, not the reference */
            assert_true(st.target_rel == best_before / gopt_trainer_reference(e.tr, 0, NULL));
    }
    env_free(&e);
    /* resume: 7 steps straight against 3, save, load into a fresh trainer, 4 more */
    gopt_error err = {0};
    for (int pass = 0; pass < 2; pass++) {
        env_init2(&e, 2, &o, 3, 1e11);
        add_graph(&e, fan_graph("fan4", 4));
        run_steps(&e, pass ? 3 : 7);
        assert_int_equal(gopt_trainer_save(e.tr, pass ? pb : pa, &err), GOPT_OK);
        env_free(&e);
    }
    snprintf(sb, sizeof sb, "%s.state", pb);
    size_t la, lb;
    char *text = test_read_file(sb, &lb);
    assert_non_null(strstr(text, "\"best_actions\": \"")); /* 3n hex digits */
    assert_non_null(strstr(text, "\"imitate_target\": \"best\""));
    free(text);
    /* the same state with the actions as arrays (states written before 2026-11-25) resumes the same */
    char pc[256], sc[300], cmd[900];
    snprintf(pc, sizeof pc, "%s/c.ckpt", dir);
    snprintf(sc, sizeof sc, "%s.state", pc);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", pb, pc);
    assert_int_equal(system(cmd), 0);
    state_actions_as_arrays(sb, sc);
    for (int k = 0; k < 2; k++) {
        env_init2(&e, 2, &o, 99, 1e11);
        add_graph(&e, fan_graph("fan4", 4));
        assert_int_equal(gopt_trainer_load(e.tr, k ? pc : pb, &err), GOPT_OK);
        run_steps(&e, 4);
        assert_int_equal(gopt_trainer_save(e.tr, k ? pc : pb, &err), GOPT_OK);
        env_free(&e);
    }
    char *a = test_read_file(pa, &la), *b = test_read_file(pb, &lb), *c = test_read_file(pc, &lb);
    assert_int_equal(la, lb);
    assert_memory_equal(a, b, la);
    assert_memory_equal(a, c, la);
    free(a);
    free(b);
    free(c);
    /* a device out of range in best_actions is refused, naming the file and the field: in the
     * string, and in an array */
    snprintf(cmd, sizeof cmd, "sed -i 's/\"best_actions\": \"./\"best_actions\": \"7/' '%s'", sb);
    assert_int_equal(system(cmd), 0);
    state_actions_as_arrays(sb, sc);
    expect_fan4_load_error(&o, pb, ".state: graph 'fan4': best_actions[0] is not a value in 0..1");
    expect_fan4_load_error(&o, pc, ".state: graph 'fan4': best_actions[0] is not a value in 0..1");
    /* a string of the wrong length, or with a character that is not a hex digit */
    snprintf(cmd, sizeof cmd, "sed -i 's/\"best_actions\": \"7/\"best_actions\": \"/' '%s'", sb);
    assert_int_equal(system(cmd), 0);
    expect_fan4_load_error(&o, pb, "best_actions is not a string of 3 x 6 hex digits");
    snprintf(cmd, sizeof cmd, "sed -i 's/\"best_actions\": \"/\"best_actions\": \"x/' '%s'", sb);
    assert_int_equal(system(cmd), 0);
    expect_fan4_load_error(&o, pb, "best_actions[0] is not a value in 0..1");
    /* refused options */
    o.imitate_every = 0;
    assert_int_equal(gopt_trainer_options_check(&o, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "needs imitate every"));
    o.imitate_every = 2;
    o.imitate_best = 2;
    assert_int_equal(gopt_trainer_options_check(&o, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "imitate best = 2"));
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* ---- the splice search (splice.c) ----------------------------------------------------------
 * Beside PPO, never in it: the policy after 9 steps is the same bit for bit with and without it,
 * and the answer is never slower (here faster: the search finds something). A resumed run ends
 * where the uninterrupted one does; a damaged splice_s / splice_actions is refused, naming it. */
/* a small generated training step (a Transformer-XL, some 500 nodes): priorities and fusion matter */
static gopt_graph *splice_graph(void) {
    gopt_graph *g = NULL;
    gopt_error err = {0};
    gopt_zoo_spec spec = {"transformer_xl", 1, 2, 16, GOPT_OPTIM_DEFAULT, 0};
    assert_int_equal(gopt_zoo_generate(&spec, &g, &err), GOPT_OK);
    return g;
}

/* the best answer's decisions, copied into out (NULL: not kept) */
static void keep_best_decisions(gopt_trainer *tr, gopt_decisions *out) {
    const gopt_decisions *d = NULL;
    (void)gopt_trainer_best(tr, 0, &d);
    assert_non_null(d);
    assert_int_equal(gopt_decisions_validate(d, gopt_trainer_graph(tr, 0), 2, NULL), GOPT_OK);
    if (!out) return;
    assert_int_equal(gopt_decisions_init(out, d->n, NULL), GOPT_OK);
    gopt_decisions_copy(out, d);
}

static void assert_decisions_equal(const gopt_decisions *a, const gopt_decisions *b) {
    assert_int_equal(a->n, b->n);
    assert_memory_equal(a->device, b->device, sizeof(int32_t) * (size_t)a->n);
    assert_memory_equal(a->priority, b->priority, sizeof(int32_t) * (size_t)a->n);
    assert_memory_equal(a->group, b->group, sizeof(int32_t) * (size_t)a->n);
}

static void splice_run(const gopt_trainer_options *o, int steps, const char *save, double *best, gopt_decisions *out) {
    env e;
    gopt_error err = {0};
    env_init(&e, 2, o, 3);
    add_graph(&e, splice_graph());
    run_steps(&e, steps);
    *best = gopt_trainer_best(e.tr, 0, NULL);
    keep_best_decisions(e.tr, out);
    if (save) assert_int_equal(gopt_trainer_save(e.tr, save, &err), GOPT_OK);
    env_free(&e);
}

static void expect_splice_load_error(const gopt_trainer_options *o, const char *path, gopt_status code, const char *msg) {
    expect_load_error(o, 1e12, splice_graph(), path, code, msg);
}

/* A fresh trainer (options o, another seed) loads the state at path, and its best decisions are want. */
static void expect_resumed_best(const gopt_trainer_options *o, const char *path, const gopt_decisions *want) {
    env e;
    gopt_error err = {0};
    gopt_decisions d = {0};
    env_init(&e, 2, o, 99);
    add_graph(&e, splice_graph());
    assert_int_equal(gopt_trainer_load(e.tr, path, &err), GOPT_OK);
    keep_best_decisions(e.tr, &d); /* made again from the kept actions, or kept as they are */
    assert_decisions_equal(&d, want);
    env_free(&e);
    gopt_decisions_destroy(&d);
}

/* A trainer (options o, seed 3) on splice_graph that has judged its greedy answer. */
static void splice_greedy_env(env *e, const gopt_trainer_options *o) {
    gopt_error err = {0};
    gopt_decisions d = {0};
    gopt_sim_result res;
    env_init(e, 2, o, 3);
    add_graph(e, splice_graph());
    assert_int_equal(gopt_decisions_init(&d, gopt_graph_num_nodes(gopt_trainer_graph(e->tr, 0)), NULL), GOPT_OK);
    assert_int_equal(gopt_trainer_greedy(e->tr, 0, &d, &res, &err), GOPT_OK);
    gopt_decisions_destroy(&d);
}

static void test_splice(void **state) {
    (void)state;
    char dir[] = "/tmp/gopt_test_trainer_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char pa[256], pb[256], pc[256], sb[300], sc[300], cmd[2048];
    snprintf(pa, sizeof pa, "%s/a.ckpt", dir);
    snprintf(pb, sizeof pb, "%s/b.ckpt", dir);
    snprintf(pc, sizeof pc, "%s/c.ckpt", dir);
    snprintf(sb, sizeof sb, "%s.state", pb);
    snprintf(sc, sizeof sc, "%s.state", pc);
    gopt_trainer_options o;
    gopt_trainer_options_default(&o);
    o.samples = 6;
    o.epochs = 1;
    o.sim_threads = 1;
    o.seed = 7;
    o.imitate_every = 2;
    o.imitate_best = 1;
    double off, on, again;
    splice_run(&o, 9, pa, &off, NULL);
    o.splice = 15; /* three batches of at most K = 6 */
    gopt_decisions d9 = {0}, d4 = {0}, dr = {0};
    splice_run(&o, 9, pb, &on, &d9);
    test_assert_same_files(pa, pb); /* PPO ran as without the search */
    assert_true(on < off); /* and the search found a faster answer */
    size_t lb;
    char *b;
    splice_run(&o, 9, NULL, &again, NULL);
    assert_true(again == on); /* deterministic */
    o.sim_threads = 3; /* three simulator threads: the same run */
    gopt_decisions dt = {0};
    splice_run(&o, 9, NULL, &again, &dt);
    assert_true(again == on);
    assert_decisions_equal(&dt, &d9);
    gopt_decisions_destroy(&dt);
    o.sim_threads = 1;
    b = test_read_file(sb, &lb);
    assert_non_null(strstr(b, "\"splice_s\": "));
    assert_non_null(strstr(b, "\"splice_actions\": \""));
    assert_non_null(strstr(b, "\"splice\": 15"));
    free(b);
    /* resume: 4 steps, save, load into a fresh trainer, 5 more = 9 straight */
    splice_run(&o, 4, pc, &again, &d4);
    env e;
    gopt_error err = {0};
    env_init(&e, 2, &o, 99);
    add_graph(&e, splice_graph());
    assert_int_equal(gopt_trainer_load(e.tr, pc, &err), GOPT_OK);
    keep_best_decisions(e.tr, &dr); /* the state keeps actions: the decisions are made again, the same */
    assert_decisions_equal(&dr, &d4);
    run_steps(&e, 5);
    assert_true(gopt_trainer_best(e.tr, 0, NULL) == on);
    gopt_decisions_destroy(&dr);
    keep_best_decisions(e.tr, &dr);
    assert_decisions_equal(&dr, &d9);
    gopt_decisions_destroy(&dr);
    gopt_decisions_destroy(&d4);
    gopt_decisions_destroy(&d9);
    assert_int_equal(gopt_trainer_save(e.tr, pc, &err), GOPT_OK);
    env_free(&e);
    test_assert_same_files(sb, sc);
    /* placement moves (o.splice_place): still beside PPO (the policy as without the search),
     * deterministic, and a resumed run ends where the straight one does */
    {
        gopt_trainer_options op = o;
        op.splice_place = 0.5f;
        double pl, pl2, pr;
        splice_run(&op, 9, pc, &pl, NULL);
        test_assert_same_files(pa, pc);
        assert_true(pl < on); /* here the moves find a faster answer than the levels alone */
        splice_run(&op, 9, NULL, &pl2, NULL);
        assert_true(pl2 == pl);
        b = test_read_file(sc, &lb);
        assert_non_null(strstr(b, "\"splice_place\": 0.5"));
        free(b);
        splice_run(&op, 4, pc, &pr, NULL);
        env_init(&e, 2, &op, 99);
        add_graph(&e, splice_graph());
        assert_int_equal(gopt_trainer_load(e.tr, pc, &err), GOPT_OK);
        run_steps(&e, 5);
        assert_true(gopt_trainer_best(e.tr, 0, NULL) == pl);
        env_free(&e);
        expect_splice_load_error(&o, pc, GOPT_EINVAL, "option splice_place");
        op.splice_place = 1.5f;
        assert_int_equal(gopt_trainer_options_check(&op, &err), GOPT_EINVAL);
        assert_non_null(strstr(err.msg, "splice place = 1.5 is outside 0..1"));
    }
    /* o.splice_batch: smaller batches, more of them from a newer best; PPO as without the search,
     * deterministic, recorded, and a run with another batch is not resumed */
    {
        gopt_trainer_options ob = o;
        ob.splice_batch = 2;
        double bt, bt2;
        splice_run(&ob, 9, pc, &bt, NULL);
        test_assert_same_files(pa, pc);
        assert_true(bt < off); /* the search still finds a faster answer */
        assert_true(bt != on); /* and another one than in batches of K */
        splice_run(&ob, 9, NULL, &bt2, NULL);
        assert_true(bt2 == bt);
        b = test_read_file(sc, &lb);
        assert_non_null(strstr(b, "\"splice_batch\": 2"));
        free(b);
        expect_splice_load_error(&o, pc, GOPT_EINVAL, "option splice_batch");
        ob.splice_batch = 7; /* more than the K = 6 sample slots */
        assert_int_equal(gopt_trainer_options_check(&ob, &err), GOPT_EINVAL);
        assert_non_null(strstr(err.msg, "splice batch = 7 is outside 1..6"));
        ob.splice_batch = -1;
        assert_int_equal(gopt_trainer_options_check(&ob, &err), GOPT_EINVAL);
    }
    /* the greedy answer judged under the tie orders and fusion passes: the state keeps the variant
     * its best was made with, and a resumed run makes the same decisions from the actions */
    {
        gopt_trainer_options og = o;
        og.splice = 0;
        splice_greedy_env(&e, &og);
        keep_best_decisions(e.tr, &d4);
        assert_int_equal(gopt_trainer_save(e.tr, pc, &err), GOPT_OK);
        env_free(&e);
        b = test_read_file(sc, &lb);
        assert_non_null(strstr(b, "\"best_variant\": ")); /* this graph's best is another variant's */
        free(b);
        expect_resumed_best(&og, pc, &d4);
        gopt_decisions_destroy(&d4);
    }
    /* o.sample_variant: PPO's samples made into decisions as the incumbent was. Here the greedy
     * incumbent is another variant's (the other fusion pass); with 1 a sample that beats it keeps
     * that variant (the state's best_variant) and a resumed run makes the same decisions from its
     * actions; with 0 (the policy's own pass) the sample's best is variant 0's; a run with the
     * other setting is not resumed */
    for (int sv = 0; sv < 2; sv++) {
        gopt_trainer_options ov = o;
        ov.splice = 0;
        ov.sample_variant = sv;
        splice_greedy_env(&e, &ov);
        const double g0 = gopt_trainer_best(e.tr, 0, NULL);
        assert_int_equal(gopt_trainer_save(e.tr, pc, &err), GOPT_OK);
        b = test_read_file(sc, &lb);
        assert_non_null(strstr(b, "\"best_variant\": 2,"));
        free(b);
        run_steps(&e, 9);
        assert_true(gopt_trainer_best(e.tr, 0, NULL) < g0); /* a sample beat the greedy answer */
        keep_best_decisions(e.tr, &d4);
        assert_int_equal(gopt_trainer_save(e.tr, pc, &err), GOPT_OK);
        env_free(&e);
        b = test_read_file(sc, &lb);
        assert_true((strstr(b, "\"best_variant\": 2,") != NULL) == sv);
        assert_true((strstr(b, "\"sample_variant\": \"incumbent\"") != NULL) == sv);
        free(b);
        expect_resumed_best(&ov, pc, &d4);
        gopt_decisions_destroy(&d4);
        ov.sample_variant = !sv;
        expect_splice_load_error(&ov, pc, GOPT_EINVAL, "option sample_variant");
    }
    {
        gopt_trainer_options ov = o;
        ov.sample_variant = 2;
        assert_int_equal(gopt_trainer_options_check(&ov, &err), GOPT_EINVAL);
        assert_non_null(strstr(err.msg, "sample variant = 2 is not 0 (own) or 1 (incumbent)"));
    }
    /* the splice search's variant (G->sp_var, the parent's; exercised on a real graph whose
     * greedy answer is another variant's in tests/cli/trainer.sh): a damaged one is refused */
    {
        snprintf(cmd, sizeof cmd, "cp '%s' '%s' && sed 's/\"splice_actions\": /\"splice_variant\": 4, &/' '%s' > '%s'",
                 pb, pc, sb, sc);
        assert_int_equal(system(cmd), 0);
        expect_splice_load_error(&o, pc, GOPT_EFORMAT, "graph 'transformer_xl_l1_b2_s16': splice_variant is not an "
                                                       "integer in 0..3");
        snprintf(cmd, sizeof cmd, "sed -i -e 's/\"splice_variant\": 4/\"splice_variant\": 1/' "
                 "-e 's/\"splice_actions\"/\"no_splice_actions\"/' -e '/\"splice_s\"/d' '%s'", sc);
        assert_int_equal(system(cmd), 0);
        expect_splice_load_error(&o, pc, GOPT_EFORMAT, "splice_variant is given without splice_actions");
    }
    /* without self-imitation the state keeps no actions: it keeps the best answer's decisions as
     * they are, and a resumed run has them (gopt finetune --decisions); damaged ones are refused */
    {
        gopt_trainer_options ns = o;
        ns.splice = 0;
        ns.imitate_best = 0;
        splice_run(&ns, 3, pc, &again, &d4);
        b = test_read_file(sc, &lb);
        assert_non_null(strstr(b, "\"best_decisions\": {"));
        assert_null(strstr(b, "\"best_actions\""));
        free(b);
        expect_resumed_best(&ns, pc, &d4);
        gopt_decisions_destroy(&d4);
        char pd[256];
        snprintf(pd, sizeof pd, "%s/d.ckpt", dir);
        snprintf(cmd, sizeof cmd, "cp '%s' '%s' && cp '%s.state' '%s.state' && "
                 "sed -i 's/\"device\": \"[0-9]*/\"device\": \"7/' '%s.state'", pc, pd, pc, pd, pd);
        assert_int_equal(system(cmd), 0);
        expect_splice_load_error(&ns, pd, GOPT_EFORMAT, "graph 'transformer_xl_l1_b2_s16': best_decisions: ");
        snprintf(cmd, sizeof cmd, "cp '%s.state' '%s.state' && sed -i 's/\"group\": \"[-0-9]*/\"group\": \"x/' '%s.state'",
                 pc, pd, pd);
        assert_int_equal(system(cmd), 0);
        expect_splice_load_error(&ns, pd, GOPT_EFORMAT, "best_decisions.group[0] is not an integer");
        snprintf(cmd, sizeof cmd, "cp '%s.state' '%s.state' && sed -i 's/\"priority\": \"[-0-9 ]*/& 5/' '%s.state'",
                 pc, pd, pd);
        assert_int_equal(system(cmd), 0);
        expect_splice_load_error(&ns, pd, GOPT_EFORMAT, "best_decisions.priority has more than");
    }
    /* a run without the search does not resume one with it */
    gopt_trainer_options o0 = o;
    o0.splice = 0;
    expect_splice_load_error(&o0, pb, GOPT_EINVAL, "option splice");
    /* damaged fields, named */
    snprintf(cmd, sizeof cmd, "cp '%s' '%s' && cp '%s' '%s'", pb, pc, sb, sc);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "sed -i 's/\"splice_actions\": \"./\"splice_actions\": \"7/' '%s'", sc);
    assert_int_equal(system(cmd), 0);
    expect_splice_load_error(&o, pc, GOPT_EFORMAT, ".state: graph 'transformer_xl_l1_b2_s16': splice_actions[0] is not a value in 0..1");
    snprintf(cmd, sizeof cmd, "sed -i '/\"splice_actions\"/d' '%s'", sc);
    assert_int_equal(system(cmd), 0);
    expect_splice_load_error(&o, pc, GOPT_EFORMAT, "splice_s and splice_actions come together, found only splice_s");
    snprintf(cmd, sizeof cmd, "cp '%s' '%s' && sed -i 's/\"splice_s\": [^,]*/\"splice_s\": -1/' '%s'", sb, sc, sc);
    assert_int_equal(system(cmd), 0);
    expect_splice_load_error(&o, pc, GOPT_EFORMAT, "graph 'transformer_xl_l1_b2_s16': splice_s is not a step time > 0");
    snprintf(cmd, sizeof cmd, "cp '%s' '%s' && sed -i 's/\"best_actions\": /\"best_variant\": 4, &/' '%s'", sb, sc, sc);
    assert_int_equal(system(cmd), 0);
    expect_splice_load_error(&o, pc, GOPT_EFORMAT, "graph 'transformer_xl_l1_b2_s16': best_variant is not an integer in 0..3");
    /* refused options */
    o.splice = GOPT_TRAINER_MAX_SPLICE + 1;
    assert_int_equal(gopt_trainer_options_check(&o, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "splice = 4097 is outside 0..4096"));
    o.splice = -1;
    assert_int_equal(gopt_trainer_options_check(&o, &err), GOPT_EINVAL);
    o.splice = 6;
    o.graphs_per_step = 2;
    assert_int_equal(gopt_trainer_options_check(&o, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "splice needs one graph per step"));
    /* the style probation (trainer.c, tr_probation_step; exercised on a real graph whose zero-shot
     * answer is a style's in tests/cli/trainer.sh): its range, and it needs self-imitation */
    o.splice = 0;
    o.graphs_per_step = 1;
    o.style_probation = GOPT_TRAINER_MAX_PROBATION + 1;
    assert_int_equal(gopt_trainer_options_check(&o, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "style probation = 100001 is outside 0..100000"));
    o.style_probation = 3;
    assert_int_equal(gopt_trainer_options_check(&o, &err), GOPT_OK);
    o.imitate_best = 0;
    assert_int_equal(gopt_trainer_options_check(&o, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "style probation of 3 steps needs self-imitation"));
    o.imitate_best = 1;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* ---- improved imitation targets (gopt_trainer_set_target, gopt_trainer_load_targets) -----
 * fan4 on two equal devices against the reference `single` (4 x 1 ms on device 0): actions
 * that split the GEMMs over both devices are faster and become the imitation target; the
 * reference's own placement is not taken; bad actions, files and resumes are refused. */
static void fan4_spread(int32_t *v, int n, int spread) { /* nodes: src, mm0..mm3, sink */
    memset(v, 0, sizeof(int32_t) * 3 * (size_t)n);
    for (int i = 0; i < 4 && spread; i++) v[1 + i] = i & 1;
}

static void write_target_state(const char *path, const char *hash, int nodes, int devices, const char *actions) {
    json_t *g = json_pack("{s:s, s:i, s:s, s:s, s:i}", "name", "fan4", "nodes", nodes, "profile", "test_trainer",
                          "profile_fnv64", hash, "devices", devices);
    if (actions) json_object_set_new(g, "best_actions", json_string(actions));
    json_t *j = json_pack("{s:s, s:i, s:[o]}", "format", "gopt-trainer-state", "version", 1, "graphs", g);
    assert_int_equal(json_dump_file(j, path, 0), 0);
    json_decref(j);
}

static void targets_env(env *e, const gopt_trainer_options *o) {
    env_init(e, 2, o, 3);
    add_graph(e, fan_graph("fan4", 4));
}

static void test_targets(void **state) {
    (void)state;
    gopt_trainer_options o;
    gopt_trainer_options_default(&o);
    o.reference = "single";
    o.imitate_steps = 2;
    o.samples = 4;
    o.epochs = 1;
    o.sim_threads = 1;
    env e;
    targets_env(&e, &o);
    gopt_error err = {0};
    const double ref = gopt_trainer_reference(e.tr, 0, NULL);
    int32_t v[18];
    int used = -1;
    double step = 0;
    /* the reference's own placement: no faster, not taken */
    fan4_spread(v, 6, 0);
    assert_int_equal(gopt_trainer_set_target(e.tr, 0, v, GOPT_TARGET_ALL, &used, &step, &err), GOPT_OK);
    assert_int_equal(used, 0);
    assert_true(step >= ref);
    /* an action out of its space */
    v[0] = 2;
    assert_int_equal(gopt_trainer_set_target(e.tr, 0, v, GOPT_TARGET_ALL, &used, &step, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "graph 'fan4': target action 0 = 2 is not in 0..1"));
    /* the split: about twice as fast, taken; imitation imitates it */
    fan4_spread(v, 6, 1);
    assert_int_equal(gopt_trainer_set_target(e.tr, 0, v, GOPT_TARGET_ALL, &used, &step, &err), GOPT_OK);
    assert_int_equal(used, 1);
    assert_true(step < 0.6 * ref);
    /* the placement alone, with the classical schedule and fusion on it: taken too; a bad mode */
    double step_p = 0;
    assert_int_equal(gopt_trainer_set_target(e.tr, 0, v, GOPT_TARGET_PLACE, &used, &step_p, &err), GOPT_OK);
    assert_int_equal(used, 1);
    assert_true(step_p < 0.6 * ref);
    assert_int_equal(gopt_trainer_set_target(e.tr, 0, v, 5, &used, &step_p, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "target keep = 5 is not all or place"));
    /* the split with the devices swapped: the same target once relabelled (mm0 on device 0) */
    for (int i = 0; i < 4; i++) v[1 + i] = !(i & 1);
    v[0] = v[5] = 1;
    double step_s = 0;
    assert_int_equal(gopt_trainer_set_target(e.tr, 0, v, GOPT_TARGET_ALL, &used, &step_s, &err), GOPT_OK);
    assert_int_equal(used, 1);
    assert_true(step_s == step);
    const int32_t *ta = e.tr->graphs[0].tgt_act; /* devices numbered in order of first use */
    assert_true(ta[0] == 0 && ta[1] == 0 && ta[2] == 1 && ta[5] == 0);
    fan4_spread(v, 6, 1);
    assert_int_equal(gopt_trainer_set_target(e.tr, 0, v, GOPT_TARGET_ALL, &used, &step, &err), GOPT_OK);
    gopt_trainer_stats st;
    assert_int_equal(gopt_trainer_step(e.tr, &st, &err), GOPT_OK);
    assert_int_equal(st.imitation, 1);
    assert_true(st.target_rel == step / ref);
    for (int s = 0; s < 60; s++) assert_int_equal(gopt_trainer_step(e.tr, &st, &err), GOPT_OK);
    /* the state records the target; a resume without it is refused */
    char dir[] = "/tmp/gopt_test_targets_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char pa[256], sa[300], tf[300], cmd[600];
    snprintf(pa, sizeof pa, "%s/a.ckpt", dir);
    snprintf(sa, sizeof sa, "%s.state", pa);
    snprintf(tf, sizeof tf, "%s/fan4.ckpt.state", dir);
    assert_int_equal(gopt_trainer_save(e.tr, pa, &err), GOPT_OK);
    json_t *j = json_load_file(sa, 0, NULL);
    assert_non_null(j);
    json_t *g0 = json_array_get(json_object_get(j, "graphs"), 0);
    assert_true(json_real_value(json_object_get(g0, "target_s")) == step);
    char hash[24];
    snprintf(hash, sizeof hash, "%s", json_string_value(json_object_get(g0, "profile_fnv64")));
    json_decref(j);
    env_free(&e);
    targets_env(&e, &o);
    assert_int_equal(gopt_trainer_load(e.tr, pa, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "graph 'fan4': its improved imitation target was"));
    assert_non_null(strstr(err.msg, "now none: resume with the same --targets"));
    /* from a directory of fine-tuning states: the same target, then the resume is accepted */
    char hex[19] = "000000000000000000"; /* devices, levels, fusion: 3 x 6 */
    hex[2] = hex[4] = '1';
    write_target_state(tf, hash, 6, 2, hex);
    gopt_trainer_targets rep;
    assert_int_equal(gopt_trainer_load_targets(e.tr, dir, GOPT_TARGET_ALL, &rep, &err), GOPT_OK);
    assert_int_equal(rep.files, 1);
    assert_int_equal(rep.used, 1);
    assert_true(rep.rel_sum == step / ref);
    assert_int_equal(gopt_trainer_load(e.tr, pa, &err), GOPT_OK);
    /* the same target kept for its placement alone: recorded, and a resume keeping all is refused */
    int used2 = 0;
    double step2 = 0;
    assert_int_equal(gopt_trainer_set_target(e.tr, 0, v, GOPT_TARGET_PLACE, &used2, &step2, &err), GOPT_OK);
    assert_int_equal(used2, 1);
    char pb[256], sb[300];
    snprintf(pb, sizeof pb, "%s/b.ckpt", dir);
    snprintf(sb, sizeof sb, "%s.state", pb);
    assert_int_equal(gopt_trainer_save(e.tr, pb, &err), GOPT_OK);
    char *text = test_read_file(sb, &(size_t){0});
    assert_non_null(strstr(text, "\"target_keep\": \"place\""));
    free(text);
    const double step_place = step2;
    assert_int_equal(gopt_trainer_set_target(e.tr, 0, v, GOPT_TARGET_ALL, &used2, &step2, &err), GOPT_OK);
    assert_int_equal(gopt_trainer_load(e.tr, pb, &err), GOPT_EINVAL);
    /* the same step either way here (fan4's split is its best schedule too): the mode is named */
    assert_true(step2 == step_place);
    assert_non_null(strstr(err.msg, "kept for place, now for all: resume with the same --targets-keep"));
    env_free(&e);
    /* another cluster: counted, not taken; the reference's placement: counted as no faster */
    targets_env(&e, &o);
    write_target_state(tf, hash, 6, 3, hex);
    assert_int_equal(gopt_trainer_load_targets(e.tr, dir, GOPT_TARGET_ALL, &rep, &err), GOPT_OK);
    assert_true(rep.files == 1 && rep.other_cluster == 1 && rep.used == 0);
    write_target_state(tf, hash, 6, 2, "000000000000000000");
    assert_int_equal(gopt_trainer_load_targets(e.tr, dir, GOPT_TARGET_ALL, &rep, &err), GOPT_OK);
    assert_true(rep.files == 1 && rep.slower == 1 && rep.used == 0);
    /* refused, naming the file and the field */
    write_target_state(tf, hash, 7, 2, hex);
    assert_int_equal(gopt_trainer_load_targets(e.tr, dir, GOPT_TARGET_ALL, &rep, &err), GOPT_EFORMAT);
    assert_non_null(strstr(err.msg, "fan4.ckpt.state: graph 'fan4': nodes is 7, the graph has 6"));
    write_target_state(tf, hash, 6, 2, NULL);
    assert_int_equal(gopt_trainer_load_targets(e.tr, dir, GOPT_TARGET_ALL, &rep, &err), GOPT_EFORMAT);
    assert_non_null(strstr(err.msg, "fan4.ckpt.state: graph 'fan4': no best_actions"));
    write_target_state(tf, hash, 6, 2, "00000000000000000z");
    assert_int_equal(gopt_trainer_load_targets(e.tr, dir, GOPT_TARGET_ALL, &rep, &err), GOPT_EFORMAT);
    assert_non_null(strstr(err.msg, "fan4.ckpt.state: graph 'fan4': best_actions[17] is not a value in 0..1"));
    write_target_state(tf, "xyz", 6, 2, hex);
    assert_int_equal(gopt_trainer_load_targets(e.tr, dir, GOPT_TARGET_ALL, &rep, &err), GOPT_EFORMAT);
    assert_non_null(strstr(err.msg, "profile_fnv64 or devices is missing or malformed"));
    assert_int_equal(gopt_file_write_atomic(tf, "{", 1, 0, NULL), GOPT_OK);
    assert_int_equal(gopt_trainer_load_targets(e.tr, dir, GOPT_TARGET_ALL, &rep, &err), GOPT_EFORMAT);
    assert_non_null(strstr(err.msg, "fan4.ckpt.state: line 1"));
    env_free(&e);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* A placement temperature (place_temperature): the trainer sets it on the policy; the
 * pre-trained policy's samples (gopt_trainer_sample_best) stay at 1; the run is another run
 * than at 1; the state records it, resume is bit for bit, a state of another temperature is
 * refused; bad values are refused. */
static void test_place_temperature(void **state) {
    (void)state;
    char dir[] = "/tmp/gopt_test_trainer_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char pa[256], pb[256], p1[256], sb[300];
    snprintf(pa, sizeof pa, "%s/a.ckpt", dir);
    snprintf(pb, sizeof pb, "%s/b.ckpt", dir);
    snprintf(p1, sizeof p1, "%s/one.ckpt", dir);
    gopt_trainer_options o;
    gopt_trainer_options_default(&o);
    o.samples = 4;
    o.epochs = 1;
    o.sim_threads = 1;
    o.seed = 5;
    gopt_error err = {0};
    double zs[2];
    env e;
    for (int k = 0; k < 2; k++) { /* k = 0: temperature 1; 1: 3 */
        o.place_temperature = k ? 3.0f : 1.0f;
        env_init2(&e, 2, &o, 3, 1e11);
        add_graph(&e, fan_graph("fan4", 4));
        assert_float_equal(gopt_policy_task_temperature(e.pol, GOPT_TASK_PLACE), o.place_temperature, 1e-6);
        gopt_rng r;
        gopt_rng_seed(&r, 11);
        assert_int_equal(gopt_trainer_sample_best(e.tr, 0, &r, &zs[k], &err), GOPT_OK);
        assert_float_equal(gopt_policy_task_temperature(e.pol, GOPT_TASK_PLACE), o.place_temperature, 1e-6);
        env_free(&e);
    }
    assert_true(zs[0] == zs[1]); /* the pre-trained policy's samples do not see the temperature */
    /* resume: 7 steps straight against 3, save, load into a fresh trainer, 4 more; and 7 at 1 */
    for (int pass = 0; pass < 3; pass++) {
        o.place_temperature = pass == 2 ? 1.0f : 3.0f;
        env_init2(&e, 2, &o, 3, 1e11);
        add_graph(&e, fan_graph("fan4", 4));
        run_steps(&e, pass == 1 ? 3 : 7);
        assert_int_equal(gopt_trainer_save(e.tr, pass == 0 ? pa : pass == 1 ? pb : p1, &err), GOPT_OK);
        env_free(&e);
    }
    snprintf(sb, sizeof sb, "%s.state", pb);
    size_t la, lb, l1;
    char *text = test_read_file(sb, &lb);
    assert_non_null(strstr(text, "\"place_temperature\": 3"));
    free(text);
    o.place_temperature = 3.0f;
    env_init2(&e, 2, &o, 99, 1e11);
    add_graph(&e, fan_graph("fan4", 4));
    assert_int_equal(gopt_trainer_load(e.tr, pb, &err), GOPT_OK);
    run_steps(&e, 4);
    assert_int_equal(gopt_trainer_save(e.tr, pb, &err), GOPT_OK);
    env_free(&e);
    char *a = test_read_file(pa, &la), *b = test_read_file(pb, &lb), *one = test_read_file(p1, &l1);
    assert_int_equal(la, lb);
    assert_memory_equal(a, b, la);
    assert_true(la != l1 || memcmp(a, one, la) != 0); /* the temperature changed the run */
    free(a);
    free(b);
    free(one);
    /* a state written at 3 does not resume at 1, and the reverse */
    o.place_temperature = 1.0f;
    env_init2(&e, 2, &o, 3, 1e11);
    add_graph(&e, fan_graph("fan4", 4));
    assert_int_equal(gopt_trainer_load(e.tr, pb, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "option place_temperature was 3"));
    env_free(&e);
    o.place_temperature = 2.0f;
    env_init2(&e, 2, &o, 3, 1e11);
    add_graph(&e, fan_graph("fan4", 4));
    assert_int_equal(gopt_trainer_load(e.tr, p1, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "option place_temperature was missing, now 2"));
    env_free(&e);
    const float bad[3] = {0.0f, 0.01f, NAN};
    for (int i = 0; i < 3; i++) {
        o.place_temperature = bad[i];
        assert_int_equal(gopt_trainer_options_check(&o, &err), GOPT_EINVAL);
        assert_non_null(strstr(err.msg, "placement temperature"));
    }
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* Heads-only training (train_heads): the trainer sets it on the policy; PPO and imitation steps
 * move the heads and cond.* and leave the trunk bit for bit; the state records it and a state
 * of the other kind is refused; a value other than 0 or 1 is refused. */
static void test_train_heads(void **state) {
    (void)state;
    char dir[] = "/tmp/gopt_test_trainer_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char pa[256], sa[300];
    snprintf(pa, sizeof pa, "%s/a.ckpt", dir);
    snprintf(sa, sizeof sa, "%s.state", pa);
    gopt_trainer_options o;
    gopt_trainer_options_default(&o);
    o.samples = 4;
    o.epochs = 2;
    o.sim_threads = 1;
    o.seed = 5;
    o.imitate_every = 2;
    o.imitate_best = 1;
    o.train_heads = 1;
    gopt_error err = {0};
    env e;
    env_init2(&e, 2, &o, 3, 1e11);
    add_graph(&e, fan_graph("fan4", 4));
    assert_int_equal(gopt_policy_train_heads(e.pol), 1);
    const size_t np = gopt_policy_num_params(e.pol);
    float *before = malloc(sizeof(float) * np);
    size_t off = 0, first = 0;
    for (int i = 0; i < gopt_policy_num_tensors(e.pol); i++) {
        const char *nm;
        float *w;
        size_t cnt;
        gopt_policy_tensor(e.pol, i, &nm, &w, NULL, &cnt);
        if (!first && !strncmp(nm, "head_", 5)) first = off;
        memcpy(before + off, w, sizeof(float) * cnt);
        off += cnt;
    }
    assert_true(first > 0);
    run_steps(&e, 6);
    size_t moved = 0;
    off = 0;
    for (int i = 0; i < gopt_policy_num_tensors(e.pol); i++) {
        float *w;
        size_t cnt;
        gopt_policy_tensor(e.pol, i, NULL, &w, NULL, &cnt);
        if (off < first) assert_memory_equal(w, before + off, sizeof(float) * cnt);
        else
            for (size_t j = 0; j < cnt; j++) moved += w[j] != before[off + j];
        off += cnt;
    }
    assert_true(moved > 0);
    assert_int_equal(gopt_trainer_save(e.tr, pa, &err), GOPT_OK);
    env_free(&e);
    size_t ls;
    char *text = test_read_file(sa, &ls);
    assert_non_null(strstr(text, "\"train\": \"heads\""));
    free(text);
    o.train_heads = 0;
    env_init2(&e, 2, &o, 3, 1e11);
    add_graph(&e, fan_graph("fan4", 4));
    assert_int_equal(gopt_policy_train_heads(e.pol), 0);
    assert_int_equal(gopt_trainer_load(e.tr, pa, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "option train was \"heads\", now \"all\""));
    env_free(&e);
    o.train_heads = 2;
    assert_int_equal(gopt_trainer_options_check(&o, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "train heads = 2"));
    free(before);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* Annealing as a reference, bounded by evaluations: two trainers with one seed
 * get the same reference; on eight independent GEMMs over two equal devices it
 * beats one device; a negative cap is refused. */
static void test_reference_evals(void **state) {
    (void)state;
    gopt_trainer_options o;
    gopt_trainer_options_default(&o);
    o.reference = "single,sa";
    o.reference_evals = 300;
    o.samples = 2;
    o.sim_threads = 1;
    double ref[2];
    for (int k = 0; k < 2; k++) {
        env e;
        env_init(&e, 2, &o, 2);
        add_graph(&e, fan_graph("fan8", 8));
        const char *m = NULL;
        ref[k] = gopt_trainer_reference(e.tr, 0, &m);
        assert_string_equal(m, "sa");
        env_free(&e);
    }
    assert_true(ref[0] == ref[1]);
    assert_true(ref[0] < 0.75 * 8e-3); /* one device: 8 x 1 ms */
    /* a node cap below the graph's size: annealing is skipped, single is the reference;
     * at the graph's size it runs again */
    for (int cap = 9; cap <= 10; cap++) {
        o.reference_anneal_max_nodes = cap;
        env e;
        env_init(&e, 2, &o, 2);
        add_graph(&e, fan_graph("fan8", 8)); /* 10 nodes: src, 8 matmuls, sink */
        const char *m = NULL, *names[4];
        double steps[4];
        assert_int_equal(gopt_graph_num_nodes(gopt_trainer_graph(e.tr, 0)), 10);
        double r = gopt_trainer_reference(e.tr, 0, &m);
        int nb = gopt_trainer_baselines(e.tr, 0, names, steps, 4);
        if (cap == 9) {
            assert_string_equal(m, "single");
            assert_int_equal(nb, 1);
            assert_true(r > ref[0]);
        } else {
            assert_string_equal(m, "sa");
            assert_int_equal(nb, 2);
            assert_true(r == ref[0]);
        }
        env_free(&e);
    }
    gopt_error err = {0};
    o.reference_anneal_max_nodes = -1;
    assert_int_equal(gopt_trainer_options_check(&o, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "node cap = -1"));
    o.reference_anneal_max_nodes = 0;
    o.reference_evals = -1;
    assert_int_equal(gopt_trainer_options_check(&o, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "reference evaluations = -1"));
    o.reference_evals = 0;
    /* 21 references (7 placers x 3 schedule+fusion combinations) fit; 1,024 characters do not */
    o.reference = "single+cp+xla,expert+cp+xla,metis+cp+xla,heft+cp+xla,mtopo+cp+xla,metf+cp+xla,msct+cp+xla,"
                  "single+fifo+xla,expert+fifo+xla,metis+fifo+xla,heft+fifo+xla,mtopo+fifo+xla,metf+fifo+xla,"
                  "msct+fifo+xla,single+cp+tvm,expert+cp+tvm,metis+cp+tvm,heft+cp+tvm,mtopo+cp+tvm,metf+cp+tvm,"
                  "msct+cp+tvm";
    assert_int_equal(gopt_trainer_options_check(&o, &err), GOPT_OK);
    char longlist[1100];
    memset(longlist, 'x', sizeof longlist - 1);
    longlist[sizeof longlist - 1] = 0;
    o.reference = longlist;
    assert_int_equal(gopt_trainer_options_check(&o, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "too long"));
}

/* gopt_trainer_group_levels: the levels of the groups the merging pass formed give those
 * groups back (random graphs, random levels, one or two devices), no two groups that touch on
 * a device share a level when the levels suffice, unfused nodes get 0; bad arguments are
 * refused. The colouring that looked only at the first member's predecessors failed this on
 * real graphs (EfficientNet-b0: its targets simulated 1.069x the reference they remade). */
static int same_partition(const int32_t *a, const int32_t *b, int32_t n) {
    for (int32_t u = 0; u < n; u++)
        for (int32_t v = 0; v < n; v++)
            if (((a[u] >= 0 && a[u] == a[v]) != (b[u] >= 0 && b[u] == b[v]))) return 0;
    return 1;
}

static void test_group_levels(void **state) {
    (void)state;
    enum { N = 80 };
    gopt_error err = {0};
    int multi = 0;
    for (int trial = 0; trial < 40; trial++) {
        gopt_graph *g = test_random_graph(N, 100 + (uint64_t)trial, 0);
        const gopt_frozen *fz = gopt_graph_frozen(g);
        gopt_rng rng;
        gopt_rng_seed(&rng, 7 + (uint64_t)trial);
        int32_t place[N], sched[N], fuse[N], level[N], grp[N];
        const int ndev = 1 + trial % 2;
        for (int v = 0; v < N; v++) {
            place[v] = (int32_t)gopt_rng_below(&rng, (uint64_t)ndev);
            sched[v] = 0;
            fuse[v] = (int32_t)gopt_rng_below(&rng, 3); /* few levels: groups touch and merge */
        }
        gopt_policy_actions a = {place, sched, fuse};
        gopt_decisions d = {0}, d2 = {0};
        assert_int_equal(gopt_decisions_init(&d, N, NULL), GOPT_OK);
        assert_int_equal(gopt_decisions_init(&d2, N, NULL), GOPT_OK);
        assert_int_equal(gopt_trainer_actions_to_decisions(fz, GOPT_TASKS_ALL, 1, NULL, &a, &d, grp, &err), GOPT_OK);
        assert_int_equal(gopt_trainer_group_levels(fz, d.group, d.device, 32, level, &err), GOPT_OK);
        for (int v = 0; v < N; v++) {
            assert_true(d.group[v] < 0 ? level[v] == 0 : level[v] >= 1 && level[v] <= 31);
            for (int e = fz->out_ptr[v]; e < fz->out_ptr[v + 1]; e++) {
                const int32_t w = fz->out_dst[e];
                if (d.group[v] >= 0 && d.group[w] >= 0 && d.group[v] != d.group[w] && d.device[v] == d.device[w]) {
                    assert_int_not_equal(level[v], level[w]);
                    multi++;
                }
            }
        }
        gopt_policy_actions b = {place, sched, level};
        assert_int_equal(gopt_trainer_actions_to_decisions(fz, GOPT_TASKS_ALL, 1, NULL, &b, &d2, grp, &err), GOPT_OK);
        assert_true(same_partition(d.group, d2.group, N));
        gopt_decisions_destroy(&d);
        gopt_decisions_destroy(&d2);
        gopt_graph_free(g);
    }
    assert_true(multi > 0); /* touching groups occurred: the property was exercised */
    /* refused: fusion levels out of 2..32, a group id out of range */
    gopt_graph *g = test_random_graph(10, 3, 0);
    const gopt_frozen *fz = gopt_graph_frozen(g);
    int32_t grp[10], dev[10] = {0}, level[10];
    for (int v = 0; v < 10; v++) grp[v] = -1;
    assert_int_equal(gopt_trainer_group_levels(fz, grp, dev, 1, level, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "fusion levels"));
    assert_int_equal(gopt_trainer_group_levels(fz, grp, dev, 33, level, &err), GOPT_EINVAL);
    grp[4] = 10;
    assert_int_equal(gopt_trainer_group_levels(fz, grp, dev, 4, level, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "group id 10"));
    gopt_graph_free(g);
}

/* ---- decisions from actions ----------------------------------------------------------- */
static void test_actions_to_decisions(void **state) {
    (void)state;
    gopt_graph *g = fan_graph("fan3", 3); /* src, mm0..2, sink */
    const gopt_frozen *fz = gopt_graph_frozen(g);
    int32_t n = fz->n, place[5] = {1, 1, 0, 1, 1}, sched[5] = {3, 2, 1, 0, 3}, fuse[5] = {0, 1, 1, 0, 1}, grp[5];
    gopt_policy_actions a = {place, sched, fuse};
    gopt_decisions d = {0};
    gopt_error err = {0};
    assert_int_equal(gopt_decisions_init(&d, n, NULL), GOPT_OK);
    assert_int_equal(gopt_trainer_actions_to_decisions(fz, GOPT_TASKS_ALL, 1, NULL, &a, &d, grp, &err), GOPT_OK);
    for (int v = 0; v < n; v++) { /* the level first, then the topological order */
        assert_int_equal(d.device[v], place[v]);
        assert_int_equal(d.priority[v], sched[v] * (n + 1) + n - fz->rank[v]);
    }
    /* src (level 0) roots a group; mm0 (level 1, its only pred src in it, same device)
     * joins only if src's level is 1: it is 0, so every group is a singleton -> -1,
     * except where the pass merges */
    assert_int_equal(gopt_decisions_validate(&d, g, 2, &err), GOPT_OK);
    int fused = 0;
    for (int v = 0; v < n; v++) fused += d.group[v] >= 0;
    for (int v = 0; v < n; v++)
        if (d.group[v] >= 0) {
            int mates = 0;
            for (int u = 0; u < n; u++) mates += d.group[u] == d.group[v];
            assert_true(mates >= 2); /* no singleton groups */
        }
    (void)fused;
    /* unlearned tasks: device 0, topological priorities, no fusion */
    assert_int_equal(gopt_trainer_actions_to_decisions(fz, GOPT_TASK_BIT(GOPT_TASK_SCHED), 1, NULL, &a, &d, grp, &err),
                     GOPT_OK);
    for (int v = 0; v < n; v++) {
        assert_int_equal(d.device[v], 0);
        assert_int_equal(d.priority[v], sched[v] * (n + 1) + n - fz->rank[v]);
        assert_int_equal(d.group[v], -1);
    }
    assert_int_equal(gopt_trainer_actions_to_decisions(fz, GOPT_TASK_BIT(GOPT_TASK_PLACE), 1, NULL, &a, &d, grp, &err),
                     GOPT_OK);
    for (int v = 0; v < n; v++) assert_int_equal(d.priority[v], n - fz->rank[v]);
    gopt_decisions_destroy(&d);
    gopt_graph_free(g);

    /* ties within a level by the critical path on the decided placement: src -> b (tiny) -> sink
     * and src -> a (a 1 ms GEMM) -> sink, b before a in topological order; at one level a runs
     * before b, and a higher level still comes first */
    gopt_graph *h = NULL;
    assert_int_equal(gopt_graph_create(&h, "ties", "test", NULL), GOPT_OK);
    int32_t src = add(h, "src", GOPT_OP_CLASS_ELEMENTWISE, 1e3, 16), b = add(h, "b", GOPT_OP_CLASS_ELEMENTWISE, 1e3, 16);
    int32_t am = add(h, "a", GOPT_OP_CLASS_GEMM, 1e9, 16), sink = add(h, "sink", GOPT_OP_CLASS_ELEMENTWISE, 1e3, 16);
    assert_int_equal(gopt_graph_add_edge(h, src, b, 16, NULL), GOPT_OK);
    assert_int_equal(gopt_graph_add_edge(h, src, am, 16, NULL), GOPT_OK);
    assert_int_equal(gopt_graph_add_edge(h, b, sink, 16, NULL), GOPT_OK);
    assert_int_equal(gopt_graph_add_edge(h, am, sink, 16, NULL), GOPT_OK);
    assert_int_equal(gopt_graph_finalize(h, &err), GOPT_OK);
    fz = gopt_graph_frozen(h);
    assert_true(fz->rank[b] < fz->rank[am]);
    gopt_profile *prof = make_profile(2, 1e12);
    gopt_costmodel *cm = NULL;
    gopt_cost_table ct;
    assert_int_equal(gopt_cost_create(prof, 2, &cm, NULL), GOPT_OK);
    assert_int_equal(gopt_cost_table_build(cm, h, &ct, &err), GOPT_OK);
    gopt_bl_problem bp = {0};
    bp.graph = h;
    bp.cm = cm;
    bp.cost = &ct;
    bp.ndev = 2;
    int32_t pl[4] = {0, 0, 0, 0}, sc[4] = {1, 1, 1, 1}, fu[4] = {0, 0, 0, 0}, gs[4];
    gopt_policy_actions at = {pl, sc, fu};
    assert_int_equal(gopt_decisions_init(&d, 4, NULL), GOPT_OK);
    assert_int_equal(gopt_trainer_actions_to_decisions(fz, GOPT_TASKS_ALL, 1, &bp, &at, &d, gs, &err), GOPT_OK);
    assert_true(d.priority[src] > d.priority[am] && d.priority[am] > d.priority[b] && d.priority[b] > d.priority[sink]);
    assert_int_equal(gopt_trainer_actions_to_decisions(fz, GOPT_TASKS_ALL, 1, NULL, &at, &d, gs, &err), GOPT_OK);
    assert_true(d.priority[b] > d.priority[am]); /* without: topological */
    sc[b] = 2;
    assert_int_equal(gopt_trainer_actions_to_decisions(fz, GOPT_TASKS_ALL, 1, &bp, &at, &d, gs, &err), GOPT_OK);
    assert_true(d.priority[b] > d.priority[src] && d.priority[src] > d.priority[am]);
    /* a problem for another graph is refused */
    bp.graph = g = fan_graph("fan3", 3);
    assert_int_equal(gopt_trainer_actions_to_decisions(fz, GOPT_TASKS_ALL, 1, &bp, &at, &d, gs, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "another graph"));
    gopt_graph_free(g);
    gopt_decisions_destroy(&d);
    gopt_cost_table_destroy(&ct);
    gopt_cost_free(cm);
    gopt_profile_free(prof);
    gopt_graph_free(h);
}

/* ---- the trainer's fusion decoding: weights and earlier tensors may stay outside -- */
static void test_fusion_groups(void **state) {
    (void)state;
    /* x -> a -> b <- w (parameter), a -> c <- y (x -> y -> a: y before the root a): b and
     * c join a's group although w and y are not in it (the default pass, merge = 1) */
    gopt_graph *g = NULL;
    assert_int_equal(gopt_graph_create(&g, "f", "test", NULL), GOPT_OK);
    int32_t x = add(g, "x", GOPT_OP_CLASS_ELEMENTWISE, 1e3, 64), y = add(g, "y", GOPT_OP_CLASS_ELEMENTWISE, 1e3, 64);
    int32_t a = add(g, "a", GOPT_OP_CLASS_ELEMENTWISE, 1e3, 64), b = add(g, "b", GOPT_OP_CLASS_ELEMENTWISE, 1e3, 64);
    int32_t c = add(g, "c", GOPT_OP_CLASS_ELEMENTWISE, 1e3, 64), w = add(g, "w", GOPT_OP_CLASS_PARAM, 0, 64);
    int32_t z = add(g, "z", GOPT_OP_CLASS_ELEMENTWISE, 1e3, 64);
    int32_t src = add(g, "src", GOPT_OP_CLASS_INPUT, 0, 64);
    int edges[][2] = {{src, x}, {x, a}, {x, y}, {y, a}, {a, b}, {w, b}, {a, c}, {y, c}, {b, z}, {c, z}};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        assert_int_equal(gopt_graph_add_edge(g, edges[i][0], edges[i][1], 64, NULL), GOPT_OK);
    assert_int_equal(gopt_graph_finalize(g, NULL), GOPT_OK);
    const gopt_frozen *fz = gopt_graph_frozen(g);
    int32_t n = fz->n, place[16] = {0}, fuse[16] = {0}, grp[16], ng = 0;
    fuse[a] = fuse[b] = fuse[c] = 1;
    gopt_error err = {0};
    assert_int_equal(gopt_policy_fusion_groups(fz, place, fuse, 1, grp, &ng, &err), GOPT_OK);
    assert_int_equal(grp[b], grp[a]);
    assert_int_equal(grp[c], grp[a]);
    assert_int_not_equal(grp[y], grp[a]);
    /* z reads b and c, both in the group, but has level 0: not fused */
    assert_int_not_equal(grp[z], grp[a]);
    /* another level, or another device, roots a new group */
    fuse[c] = 2;
    assert_int_equal(gopt_policy_fusion_groups(fz, place, fuse, 1, grp, &ng, &err), GOPT_OK);
    assert_int_not_equal(grp[c], grp[a]);
    fuse[c] = 1;
    place[b] = 1;
    assert_int_equal(gopt_policy_fusion_groups(fz, place, fuse, 1, grp, &ng, &err), GOPT_OK);
    assert_int_not_equal(grp[b], grp[a]);
    /* a negative level is refused */
    fuse[b] = 0;
    place[b] = 0;
    fuse[y] = 0;
    fuse[src] = -1;
    assert_int_equal(gopt_policy_fusion_groups(fz, place, fuse, 1, grp, &ng, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "negative"));
    gopt_graph_free(g);

    /* random levels and devices on a generated training step: always valid */
    gopt_zoo_spec spec = {"resnet", 18, 8, 32, GOPT_OPTIM_DEFAULT, 0};
    assert_int_equal(gopt_zoo_generate(&spec, &g, &err), GOPT_OK);
    fz = gopt_graph_frozen(g);
    n = fz->n;
    int32_t *pl = calloc((size_t)n, sizeof *pl), *fu = calloc((size_t)n, sizeof *fu), *sc = calloc((size_t)n, 4);
    int32_t *zero = calloc((size_t)n, sizeof *zero);
    gopt_decisions d = {0};
    assert_int_equal(gopt_decisions_init(&d, n, NULL), GOPT_OK);
    gopt_rng rng;
    gopt_rng_seed(&rng, 5);
    int fused_total = 0;
    for (int rep = 0; rep < 30; rep++) {
        for (int32_t v = 0; v < n; v++) {
            pl[v] = rep % 3 == 0 ? 0 : (int32_t)gopt_rng_below(&rng, 2);
            fu[v] = (int32_t)gopt_rng_below(&rng, rep % 2 ? 2 : 4);
        }
        /* colocation groups share a device */
        for (int32_t v = 0; v < n; v++)
            if (fz->coloc[v] >= 0)
                for (int32_t u = 0; u < n; u++)
                    if (fz->coloc[u] == fz->coloc[v]) {
                        pl[v] = pl[u];
                        break;
                    }
        gopt_policy_actions act = {pl, zero, fu};
        assert_int_equal(gopt_trainer_actions_to_decisions(fz, GOPT_TASKS_ALL, 1, NULL, &act, &d, sc, &err), GOPT_OK);
        gopt_status st = gopt_decisions_validate(&d, g, 2, &err);
        if (st) fprintf(stderr, "rep %d: %s\n", rep, err.msg);
        assert_int_equal(st, GOPT_OK);
        for (int32_t v = 0; v < n; v++) fused_total += d.group[v] >= 0;
    }
    assert_true(fused_total > 30 * n / 10); /* it did fuse */
    gopt_decisions_destroy(&d);
    free(pl);
    free(fu);
    free(sc);
    free(zero);
    gopt_graph_free(g);
}

static gopt_go_options g_test_go;
static gopt_status test_go_method(const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err) {
    return gopt_go_decide(&g_test_go, p, d, err);
}

/* A problem on graph g over ndev devices of e's cluster, the simulator as its evaluator (as
 * `gopt optimize --method go` runs it); free with go_problem_free. */
typedef struct {
    gopt_sim *sim;
    gopt_sim_scratch *scr;
    gopt_bl_sim_ctx ctx;
    gopt_bl_problem p;
} go_problem;

static void go_problem_init(go_problem *q, const env *e, gopt_graph *g, int ndev) {
    memset(q, 0, sizeof *q);
    assert_int_equal(gopt_sim_create(g, e->cm, &q->sim, NULL), GOPT_OK);
    assert_int_equal(gopt_sim_scratch_create(q->sim, &q->scr, NULL), GOPT_OK);
    q->ctx.sim = q->sim;
    q->ctx.scratch = q->scr;
    q->p.graph = g;
    q->p.cm = e->cm;
    q->p.cost = gopt_sim_cost_table(q->sim);
    q->p.ndev = ndev;
    q->p.evaluate = gopt_bl_sim_evaluate;
}

static void go_problem_free(go_problem *q) {
    gopt_sim_scratch_free(q->scr);
    gopt_sim_free(q->sim);
}

/* ---- the go method on a saved checkpoint ------------------------------------------- */
static void test_go_decide(void **state) {
    (void)state;
    char dir[] = "/tmp/gopt_test_go_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/p.ckpt", dir);
    gopt_trainer_options o;
    gopt_trainer_options_default(&o);
    o.samples = 4;
    o.epochs = 1;
    o.sim_threads = 1;
    o.tasks = GOPT_TASK_BIT(GOPT_TASK_PLACE) | GOPT_TASK_BIT(GOPT_TASK_SCHED);
    env e;
    env_init(&e, 2, &o, 4);
    add_graph(&e, fan_graph("fan4", 4));
    run_steps(&e, 2);
    gopt_error err = {0};
    assert_int_equal(gopt_trainer_save(e.tr, path, &err), GOPT_OK);
    unsigned tasks = 0;
    assert_int_equal(gopt_trainer_checkpoint_tasks(path, &tasks, &err), GOPT_OK);
    assert_int_equal(tasks, o.tasks);
    /* run it through the registry like `gopt optimize --method go` */
    gopt_graph *g = fan_graph("fan6", 6);
    go_problem q;
    go_problem_init(&q, &e, g, 2);
    gopt_bl_problem p = q.p;
    gopt_bl_sim_ctx ctx = q.ctx;
    p.eval_ctx = &ctx;
    gopt_go_options go = {path, 0, 1, NULL, 1.0f, GOPT_GO_TIES_BEST, 0, GOPT_GO_PASS_BEST, 0};
    gopt_decisions d1 = {0}, d2 = {0};
    assert_int_equal(gopt_decisions_init(&d1, gopt_graph_num_nodes(g), NULL), GOPT_OK);
    assert_int_equal(gopt_decisions_init(&d2, gopt_graph_num_nodes(g), NULL), GOPT_OK);
    assert_int_equal(gopt_go_decide(&go, &p, &d1, &err), GOPT_OK);
    assert_int_equal(gopt_decisions_validate(&d1, g, 2, &err), GOPT_OK);
    for (int v = 0; v < d1.n; v++) assert_int_equal(d1.group[v], -1); /* fusion was not trained */
    int oom = 0;
    double greedy = gopt_bl_sim_evaluate(&ctx, &d1, &oom);
    /* ties: the best of the two orders within a level is the faster of cp's and topo's, and is one of them */
    double tie_step[3];
    for (int t = 0; t < 3; t++) {
        go.ties = t;
        assert_int_equal(gopt_go_decide(&go, &p, &d2, &err), GOPT_OK);
        tie_step[t] = gopt_bl_sim_evaluate(&ctx, &d2, &oom);
    }
    go.ties = GOPT_GO_TIES_BEST;
    assert_true(tie_step[GOPT_GO_TIES_BEST] == greedy);
    assert_true(tie_step[GOPT_GO_TIES_BEST] <= tie_step[GOPT_GO_TIES_CP]);
    assert_true(tie_step[GOPT_GO_TIES_BEST] <= tie_step[GOPT_GO_TIES_TOPO]);
    assert_true(tie_step[GOPT_GO_TIES_BEST] == tie_step[GOPT_GO_TIES_CP] ||
                tie_step[GOPT_GO_TIES_BEST] == tie_step[GOPT_GO_TIES_TOPO]);
    assert_int_equal(gopt_go_ties_parse("best"), GOPT_GO_TIES_BEST);
    assert_int_equal(gopt_go_ties_parse("cp"), GOPT_GO_TIES_CP);
    assert_int_equal(gopt_go_ties_parse("topo"), GOPT_GO_TIES_TOPO);
    assert_int_equal(gopt_go_ties_parse("fifo"), -1);
    assert_int_equal(gopt_go_ties_parse(NULL), -1);
    go.samples = 8;
    assert_int_equal(gopt_go_decide(&go, &p, &d2, &err), GOPT_OK);
    double best = gopt_bl_sim_evaluate(&ctx, &d2, &oom);
    assert_true(best <= greedy); /* best of greedy and samples */
    /* through a registry, as `gopt optimize --method go` runs it */
    gopt_bl_registry reg;
    gopt_bl_registry_init(&reg);
    gopt_bl_method gm = {"go", GOPT_BL_JOINT, test_go_method, "GO policy"};
    assert_int_equal(gopt_bl_registry_add(&reg, &gm, &err), GOPT_OK);
    g_test_go = go;
    gopt_bl_combo combo;
    assert_int_equal(gopt_bl_combo_parse(&reg, "go", &combo, &err), GOPT_OK);
    gopt_decisions d3 = {0};
    gopt_status cst = gopt_bl_combo_decide(&reg, &combo, &p, &d3, &err);
    if (cst) fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(cst, GOPT_OK);
    assert_true(gopt_bl_sim_evaluate(&ctx, &d3, &oom) <= greedy);
    gopt_decisions_destroy(&d3);
    /* refusals: missing checkpoint, too many devices */
    go.checkpoint = "/nonexistent/x.ckpt";
    assert_int_not_equal(gopt_go_decide(&go, &p, &d2, &err), GOPT_OK);
    assert_non_null(strstr(err.msg, "checkpoint: /nonexistent/x.ckpt"));
    go.checkpoint = path;
    p.ndev = 3;
    assert_int_equal(gopt_go_decide(&go, &p, &d2, &err), GOPT_EINVAL);
    gopt_decisions_destroy(&d1);
    gopt_decisions_destroy(&d2);
    go_problem_free(&q);
    gopt_graph_free(g);
    env_free(&e);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* ---- the go method's fusion pass -----------------------------------------------------
 * A checkpoint trained for every task, fusion included: each candidate's levels are judged
 * under the merging and the first-fit pass by default (best), and the answer is the faster of
 * the two forced passes. */
static void test_go_fusion_pass(void **state) {
    (void)state;
    char dir[] = "/tmp/gopt_test_gopass_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/p.ckpt", dir);
    gopt_trainer_options o;
    gopt_trainer_options_default(&o);
    o.samples = 4;
    o.epochs = 1;
    o.sim_threads = 1;
    env e;
    env_init(&e, 2, &o, 4);
    add_graph(&e, fan_graph("fan4", 4));
    run_steps(&e, 2);
    gopt_error err = {0};
    assert_int_equal(gopt_trainer_save(e.tr, path, &err), GOPT_OK);
    gopt_graph *g = diamond_graph("diamonds", 40);
    go_problem q;
    go_problem_init(&q, &e, g, 1);
    q.p.eval_ctx = &q.ctx;
    gopt_go_options go = {path, 4, 1, NULL, 1.0f, GOPT_GO_TIES_BEST, 0, GOPT_GO_PASS_BEST, 0};
    gopt_decisions d = {0};
    assert_int_equal(gopt_decisions_init(&d, gopt_graph_num_nodes(g), NULL), GOPT_OK);
    double step[3];
    int oom = 0;
    for (int fp = 0; fp < 3; fp++) {
        go.fusion_pass = fp;
        assert_int_equal(gopt_go_decide(&go, &q.p, &d, &err), GOPT_OK);
        assert_int_equal(gopt_decisions_validate(&d, g, 1, &err), GOPT_OK);
        step[fp] = gopt_bl_sim_evaluate(&q.ctx, &d, &oom);
        assert_int_equal(oom, 0);
    }
    assert_true(step[GOPT_GO_PASS_MERGE] != step[GOPT_GO_PASS_FIRST]); /* the diamonds: the passes differ */
    assert_true(step[GOPT_GO_PASS_BEST] <= step[GOPT_GO_PASS_MERGE]);
    assert_true(step[GOPT_GO_PASS_BEST] <= step[GOPT_GO_PASS_FIRST]);
    assert_true(step[GOPT_GO_PASS_BEST] == step[GOPT_GO_PASS_MERGE] ||
                step[GOPT_GO_PASS_BEST] == step[GOPT_GO_PASS_FIRST]);
    assert_int_equal(gopt_go_pass_parse("best"), GOPT_GO_PASS_BEST);
    assert_int_equal(gopt_go_pass_parse("merge"), GOPT_GO_PASS_MERGE);
    assert_int_equal(gopt_go_pass_parse("first"), GOPT_GO_PASS_FIRST);
    assert_int_equal(gopt_go_pass_parse("hint"), GOPT_GO_PASS_HINT);
    assert_int_equal(gopt_go_pass_parse("free"), GOPT_GO_PASS_FREE);
    /* a checkpoint without hints: free is best, hint the checkpoint's own pass (merge) */
    double fr, hi;
    go.fusion_pass = GOPT_GO_PASS_FREE;
    assert_int_equal(gopt_go_decide(&go, &q.p, &d, &err), GOPT_OK);
    fr = gopt_bl_sim_evaluate(&q.ctx, &d, &oom);
    go.fusion_pass = GOPT_GO_PASS_HINT;
    assert_int_equal(gopt_go_decide(&go, &q.p, &d, &err), GOPT_OK);
    hi = gopt_bl_sim_evaluate(&q.ctx, &d, &oom);
    assert_true(fr == step[GOPT_GO_PASS_BEST]);
    assert_true(hi == step[GOPT_GO_PASS_MERGE]);
    assert_int_equal(gopt_go_pass_parse("xla"), -1);
    assert_int_equal(gopt_go_pass_parse(NULL), -1);
    gopt_decisions_destroy(&d);
    go_problem_free(&q);
    gopt_graph_free(g);
    env_free(&e);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* ---- the go method is memory-safe by construction ---------------------------------------------
 * Six 1 GB parameters, each read by a GEMM, on four devices of 3.5 GB: a
 * classical placer fits them. A policy biased towards device 0 (as a policy
 * that learned single-device placements is) overflows it when its decoder is
 * not given the memory model; `go` masks the devices a unit would overflow and
 * fits. The repair step: with an evaluator stricter than the model (out of
 * memory above 60% of a device), `go` decodes again with the overflowing
 * device's capacity scaled down until the evaluator is satisfied. */
typedef struct {
    const gopt_frozen *fz;
    double limit;
} strict_eval;

static double strict_evaluate(void *ctx, const gopt_decisions *d, int *oom) {
    strict_eval *c = ctx;
    double used[8] = {0};
    for (int32_t v = 0; v < c->fz->n; v++) used[d->device[v]] += c->fz->param_bytes[v];
    *oom = 0;
    for (int k = 0; k < 8; k++)
        if (used[k] > c->limit && (!*oom || used[k] > used[*oom - 1])) *oom = 1 + k;
    return 1e-3;
}

static void test_go_memory_safe(void **state) {
    (void)state;
    enum { NDEV = 4, NPAR = 6 };
    char dir[256], path[300];
    assert_int_equal(test_tmpdir_make(dir, sizeof dir, "go_mem"), 0);
    snprintf(path, sizeof path, "%s/p.ckpt", dir);
    gopt_trainer_options o;
    gopt_trainer_options_default(&o);
    o.samples = 4;
    o.sim_threads = 1;
    env e;
    env_init(&e, NDEV, &o, 3);
    add_graph(&e, fan_graph("fan4", 4));
    for (int i = 0; i < gopt_policy_num_tensors(e.pol); i++) {
        const char *nm;
        float *w;
        gopt_policy_tensor(e.pol, i, &nm, &w, NULL, NULL);
        if (strcmp(nm, "head_place.b") == 0) w[0] = 8.0f; /* everything on device 0 */
    }
    gopt_error err = {0};
    assert_int_equal(gopt_trainer_save(e.tr, path, &err), GOPT_OK);
    /* the problem: 3.5 GB devices */
    gopt_profile *prof = make_profile(NDEV, 3.5e9);
    gopt_costmodel *cm = NULL;
    assert_int_equal(gopt_cost_create(prof, NDEV, &cm, NULL), GOPT_OK);
    gopt_graph *g = NULL;
    assert_int_equal(gopt_graph_create(&g, "params", "test", NULL), GOPT_OK);
    int32_t sink = -1, ids[2 * NPAR];
    char nm[32];
    for (int i = 0; i < NPAR; i++) {
        snprintf(nm, sizeof nm, "w%d", i);
        gopt_node_attrs a = {0};
        a.name = nm;
        a.op = "Variable";
        a.cls = GOPT_OP_CLASS_PARAM;
        a.out_bytes = 1e9;
        a.param_bytes = 1e9;
        a.layer = -1;
        assert_int_equal(gopt_graph_add_node(g, &a, &ids[i], NULL), GOPT_OK);
        snprintf(nm, sizeof nm, "mm%d", i);
        ids[NPAR + i] = add(g, nm, GOPT_OP_CLASS_GEMM, 1e9, 1e3);
        assert_int_equal(gopt_graph_add_edge(g, ids[i], ids[NPAR + i], 1e3, NULL), GOPT_OK);
    }
    sink = add(g, "sink", GOPT_OP_CLASS_ELEMENTWISE, 1e3, 16);
    for (int i = 0; i < NPAR; i++) assert_int_equal(gopt_graph_add_edge(g, ids[NPAR + i], sink, 1e3, NULL), GOPT_OK);
    assert_int_equal(gopt_graph_finalize(g, &err), GOPT_OK);
    const gopt_frozen *fz = gopt_graph_frozen(g);
    gopt_sim *sim = NULL;
    gopt_sim_scratch *scr = NULL;
    assert_int_equal(gopt_sim_create(g, cm, &sim, &err), GOPT_OK);
    assert_int_equal(gopt_sim_scratch_create(sim, &scr, &err), GOPT_OK);
    gopt_bl_sim_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.sim = sim;
    ctx.scratch = scr;
    gopt_bl_problem p = {0};
    p.graph = g;
    p.cm = cm;
    p.cost = gopt_sim_cost_table(sim);
    p.ndev = NDEV;
    p.evaluate = gopt_bl_sim_evaluate;
    p.eval_ctx = &ctx;
    p.last_peak = gopt_bl_sim_last_peak;
    /* a classical method fits */
    gopt_bl_registry reg;
    gopt_bl_registry_init(&reg);
    gopt_bl_combo combo;
    assert_int_equal(gopt_bl_combo_parse(&reg, "heft", &combo, &err), GOPT_OK);
    gopt_decisions dc = {0};
    assert_int_equal(gopt_bl_combo_decide(&reg, &combo, &p, &dc, &err), GOPT_OK);
    int oom = 0;
    gopt_bl_sim_evaluate(&ctx, &dc, &oom);
    assert_int_equal(oom, 0);
    /* the policy's decoder without the memory model overflows device 0 */
    gopt_policy *pol = NULL;
    assert_int_equal(gopt_policy_load(&pol, path, &err), GOPT_OK);
    int32_t n = fz->n;
    float *feat = malloc(sizeof(float) * (size_t)n * GOPT_POLICY_NFEAT);
    int32_t *buf = malloc(sizeof(int32_t) * 3 * (size_t)n), *grp = malloc(sizeof(int32_t) * (size_t)n);
    gopt_policy_actions a = {buf, buf + n, buf + 2 * n};
    assert_int_equal(gopt_policy_features(fz, NDEV, NULL, feat, &err), GOPT_OK);
    assert_int_equal(gopt_policy_forward(pol, fz, feat, NDEV, NULL, &err), GOPT_OK);
    assert_int_equal(gopt_policy_greedy(pol, &a, &err), GOPT_OK);
    gopt_decisions du = {0};
    assert_int_equal(gopt_decisions_init(&du, n, NULL), GOPT_OK);
    assert_int_equal(gopt_trainer_actions_to_decisions(fz, GOPT_TASKS_ALL, 1, NULL, &a, &du, grp, &err), GOPT_OK);
    assert_int_equal(gopt_bl_memory_check(&p, &du, &err), GOPT_EUNSUP);
    gopt_bl_sim_evaluate(&ctx, &du, &oom);
    assert_int_equal(oom, 1);
    /* go: masked by the memory model, fits */
    gopt_go_options go = {path, 0, 1, NULL, 1.0f, GOPT_GO_TIES_BEST, 0, GOPT_GO_PASS_BEST, 0};
    gopt_decisions d = {0};
    assert_int_equal(gopt_decisions_init(&d, n, NULL), GOPT_OK);
    for (int k = 0; k <= 8; k += 8) {
        go.samples = k;
        assert_int_equal(gopt_go_decide(&go, &p, &d, &err), GOPT_OK);
        gopt_bl_sim_evaluate(&ctx, &d, &oom);
        assert_int_equal(oom, 0);
        assert_int_equal(gopt_bl_memory_check(&p, &d, &err), GOPT_OK);
    }
    /* the repair step: an evaluator stricter than the model */
    strict_eval se = {fz, 0.6 * 3.5e9};
    gopt_bl_problem q = p;
    q.evaluate = strict_evaluate;
    q.eval_ctx = &se;
    q.last_peak = NULL;
    go.samples = 0;
    assert_int_equal(gopt_go_decide(&go, &q, &d, &err), GOPT_OK);
    double greedy_s = strict_evaluate(&se, &d, &oom);
    assert_int_equal(oom, 0);
    /* with samples the repair may follow another candidate's peaks: never worse than greedy's */
    for (int k = 1; k <= 8; k *= 2) {
        go.samples = k;
        assert_int_equal(gopt_go_decide(&go, &q, &d, &err), GOPT_OK);
        double s = strict_evaluate(&se, &d, &oom);
        assert_int_equal(oom, 0);
        assert_true(s <= greedy_s);
    }
    /* the first decode alone would not do: the masks let device 0 take 3 GB */
    double *din = malloc(sizeof(double) * (2 * (size_t)n + NDEV));
    gopt_go_decoder_inputs(&p, din, din + n, din + 2 * n);
    assert_int_equal(gopt_policy_set_decoder_inputs(pol, n, NDEV, din, din + n, din + 2 * n, &err), GOPT_OK);
    assert_int_equal(gopt_policy_forward(pol, fz, feat, NDEV, NULL, &err), GOPT_OK);
    assert_int_equal(gopt_policy_greedy(pol, &a, &err), GOPT_OK);
    assert_int_equal(gopt_trainer_actions_to_decisions(fz, GOPT_TASKS_ALL, 1, NULL, &a, &du, grp, &err), GOPT_OK);
    assert_int_equal(gopt_bl_memory_check(&p, &du, &err), GOPT_OK);
    strict_evaluate(&se, &du, &oom);
    assert_int_equal(oom, 1);
    free(din);
    gopt_decisions_destroy(&dc);
    gopt_decisions_destroy(&du);
    gopt_decisions_destroy(&d);
    free(feat);
    free(buf);
    free(grp);
    gopt_policy_free(pol);
    gopt_sim_scratch_free(scr);
    gopt_sim_free(sim);
    gopt_graph_free(g);
    gopt_cost_free(cm);
    gopt_profile_free(prof);
    env_free(&e);
    assert_int_equal(test_tmpdir_remove(dir), 0);
}

/* ---- option and task refusals ----------------------------------------------------------- */
static void test_refusals(void **state) {
    (void)state;
    gopt_trainer_options o;
    gopt_error err = {0};
    gopt_trainer_options_default(&o);
    assert_int_equal(gopt_trainer_options_check(&o, &err), GOPT_OK);
    o.samples = 1;
    assert_int_equal(gopt_trainer_options_check(&o, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "samples = 1"));
    gopt_trainer_options_default(&o);
    o.clip_eps = 1.5f;
    assert_int_equal(gopt_trainer_options_check(&o, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "clip"));
    gopt_trainer_options_default(&o);
    o.invalid_reward = 1.0f;
    assert_int_equal(gopt_trainer_options_check(&o, &err), GOPT_EINVAL);
    gopt_trainer_options_default(&o);
    o.tasks = 0;
    assert_int_equal(gopt_trainer_options_check(&o, &err), GOPT_EINVAL);
    unsigned t = 0;
    assert_int_equal(gopt_trainer_parse_tasks("place,fuse", &t, &err), GOPT_OK);
    assert_int_equal(t, GOPT_TASK_BIT(GOPT_TASK_PLACE) | GOPT_TASK_BIT(GOPT_TASK_FUSE));
    char buf[32];
    gopt_trainer_tasks_str(t, buf, sizeof buf);
    assert_string_equal(buf, "place,fuse");
    assert_int_equal(gopt_trainer_parse_tasks("place,schedule", &t, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "unknown task 'schedule'"));
    assert_int_equal(gopt_trainer_parse_tasks("", &t, &err), GOPT_EINVAL);
    /* a step without graphs, a policy too narrow for the devices */
    gopt_trainer_options_default(&o);
    env e;
    env_init(&e, 2, &o, 1);
    gopt_trainer_stats st;
    assert_int_equal(gopt_trainer_step(e.tr, &st, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "no graphs"));
    gopt_trainer *t2 = NULL;
    gopt_profile *p4 = make_profile(4, 1e12);
    gopt_costmodel *cm4 = NULL;
    assert_int_equal(gopt_cost_create(p4, 4, &cm4, NULL), GOPT_OK);
    assert_int_equal(gopt_trainer_create(&t2, e.pol, cm4, &o, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "at most 2"));
    /* a graph nothing fits: no reference */
    gopt_profile *tiny = make_profile(2, 1.0);
    gopt_costmodel *cmt = NULL;
    assert_int_equal(gopt_cost_create(tiny, 2, &cmt, NULL), GOPT_OK);
    assert_int_equal(gopt_trainer_create(&t2, e.pol, cmt, &o, &err), GOPT_OK);
    gopt_graph *g = NULL;
    assert_int_equal(gopt_graph_create(&g, "big", "test", NULL), GOPT_OK);
    gopt_node_attrs a = {0};
    a.name = "w";
    a.op = "Var";
    a.cls = GOPT_OP_CLASS_PARAM;
    a.param_bytes = 1e6;
    a.layer = -1;
    assert_int_equal(gopt_graph_add_node(g, &a, NULL, NULL), GOPT_OK);
    assert_int_equal(gopt_graph_finalize(g, NULL), GOPT_OK);
    assert_int_not_equal(gopt_trainer_add_graph(t2, g, 0, &err), GOPT_OK);
    assert_non_null(strstr(err.msg, "big"));
    gopt_trainer_free(t2);
    gopt_cost_free(cmt);
    gopt_profile_free(tiny);
    gopt_cost_free(cm4);
    gopt_profile_free(p4);
    env_free(&e);
}

/* ---- canonical device labels of imitation targets ---------------------------------------
 * The shipped DGX-1 profile's links are not all alike (hybrid cube mesh), so
 * only the permutations that preserve every link's cost are symmetries. Every
 * symmetry must map the heft placement of a small ResNet to one that
 * simulates to the same step, the canonical labels must not depend on which
 * equivalent labelling a baseline produced, and with every permutation allowed
 * (identical devices, uniform links) devices are numbered by first use. */
static int is_perm(const int32_t *p, int n) {
    uint32_t seen = 0;
    for (int i = 0; i < n; i++) {
        if (p[i] < 0 || p[i] >= n || ((seen >> p[i]) & 1u)) return 0;
        seen |= 1u << p[i];
    }
    return 1;
}

static void test_canonical_devices(void **state) {
    (void)state;
    gopt_error err = {0};
    gopt_profile *prof = NULL;
    gopt_costmodel *cm = NULL;
    gopt_graph *g = NULL;
    gopt_sim *sim = NULL;
    gopt_sim_scratch *sc = NULL;
    assert_int_equal(gopt_profile_load(GOPT_SOURCE_DIR "/profiles/v100-dgx1-x8.json", &prof, &err), GOPT_OK);
    assert_int_equal(gopt_cost_create(prof, 8, &cm, &err), GOPT_OK);
    gopt_zoo_spec spec = {"resnet", 18, 8, 32, GOPT_OPTIM_DEFAULT, 0};
    assert_int_equal(gopt_zoo_generate(&spec, &g, &err), GOPT_OK);
    assert_int_equal(gopt_sim_create(g, cm, &sim, &err), GOPT_OK);
    assert_int_equal(gopt_sim_scratch_create(sim, &sc, &err), GOPT_OK);
    const gopt_frozen *fz = gopt_graph_frozen(g);
    const int32_t n = fz->n;
    int32_t perms[64 * 8];
    int np = gopt_trainer_device_symmetries(cm, gopt_sim_cost_table(sim), perms, 64);
    assert_true(np >= 2 && np < 40320); /* some symmetry, far from all 8! permutations */
    for (int k = 0; k < 8; k++) assert_int_equal(perms[k], k); /* identity first */
    /* a placement using several devices: heft's */
    gopt_bl_registry reg;
    gopt_bl_registry_init(&reg);
    gopt_bl_options bo = {0};
    bo.seed = 1;
    gopt_decisions d = {0}, r = {0}, c1 = {0}, c2 = {0};
    gopt_bl_outcome out;
    assert_int_equal(gopt_bl_optimize(&reg, "heft", sim, cm, &bo, &d, &out, &err), GOPT_OK); /* sizes d */
    assert_int_equal(gopt_decisions_init(&r, n, NULL), GOPT_OK);
    assert_int_equal(gopt_decisions_init(&c1, n, NULL), GOPT_OK);
    assert_int_equal(gopt_decisions_init(&c2, n, NULL), GOPT_OK);
    gopt_sim_result base, res;
    assert_int_equal(gopt_sim_run(sim, &d, &base, sc, &err), GOPT_OK);
    int32_t used = 0;
    for (int32_t v = 0; v < n; v++) used |= 1 << d.device[v];
    assert_true(__builtin_popcount((unsigned)used) >= 2);
    assert_int_equal(gopt_trainer_canonical_devices(fz, 8, d.device, perms, np, c1.device, NULL, &err), GOPT_OK);
    for (int p = 0; p < np; p++) {
        const int32_t *P = perms + (size_t)p * 8;
        assert_true(is_perm(P, 8));
        gopt_decisions_copy(&r, &d);
        for (int32_t v = 0; v < n; v++) r.device[v] = P[d.device[v]];
        assert_int_equal(gopt_sim_run(sim, &r, &res, sc, &err), GOPT_OK);
        assert_true(fabs(res.step_time_s - base.step_time_s) <= 1e-9 * base.step_time_s);
        /* the same canonical labels whichever equivalent labelling we start from */
        assert_int_equal(gopt_trainer_canonical_devices(fz, 8, r.device, perms, np, c2.device, NULL, &err), GOPT_OK);
        assert_memory_equal(c1.device, c2.device, sizeof(int32_t) * (size_t)n);
    }
    /* a permutation that is not a symmetry changes the step of this placement */
    int32_t swap[8] = {0, 1, 2, 3, 4, 5, 6, 7}, all[8];
    int changed = 0;
    for (int a = 0; a < 8 && !changed; a++)
        for (int b = a + 1; b < 8 && !changed; b++) {
            swap[a] = b, swap[b] = a;
            int sym = 0;
            for (int p = 0; p < np; p++) sym |= memcmp(perms + (size_t)p * 8, swap, sizeof swap) == 0;
            if (!sym) {
                gopt_decisions_copy(&r, &d);
                for (int32_t v = 0; v < n; v++) r.device[v] = swap[d.device[v]];
                assert_int_equal(gopt_sim_run(sim, &r, &res, sc, &err), GOPT_OK);
                changed = res.step_time_s != base.step_time_s;
            }
            swap[a] = a, swap[b] = b;
        }
    assert_true(changed);
    /* every permutation allowed: devices numbered in order of first use */
    assert_int_equal(gopt_trainer_canonical_devices(fz, 8, d.device, NULL, 0, c2.device, all, &err), GOPT_OK);
    assert_true(is_perm(all, 8));
    assert_int_equal(c2.device[fz->topo[0]], 0);
    int32_t next = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t x = c2.device[fz->topo[i]];
        assert_true(x <= next);
        if (x == next) next++;
    }
    /* deterministic, and in place */
    gopt_decisions_copy(&r, &d);
    assert_int_equal(gopt_trainer_canonical_devices(fz, 8, r.device, NULL, 0, r.device, NULL, &err), GOPT_OK);
    assert_memory_equal(r.device, c2.device, sizeof(int32_t) * (size_t)n);
    /* identical devices on uniform links: all 4! permutations are symmetries */
    gopt_profile *p4 = make_profile2(4, 1e12, 1e12);
    gopt_costmodel *cm4 = NULL;
    gopt_sim *sim4 = NULL;
    int32_t perms4[32 * 4];
    assert_int_equal(gopt_cost_create(p4, 4, &cm4, NULL), GOPT_OK);
    assert_int_equal(gopt_sim_create(g, cm4, &sim4, &err), GOPT_OK);
    assert_int_equal(gopt_trainer_device_symmetries(cm4, gopt_sim_cost_table(sim4), perms4, 32), 24);
    assert_int_equal(gopt_trainer_device_symmetries(cm4, gopt_sim_cost_table(sim4), perms4, 5), 5);
    gopt_sim_free(sim4);
    gopt_cost_free(cm4);
    gopt_profile_free(p4);
    /* a device out of range is refused naming the node */
    r.device[fz->topo[3]] = 8;
    assert_int_equal(gopt_trainer_canonical_devices(fz, 8, r.device, NULL, 0, c2.device, NULL, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "device 8 is outside 0..7"));
    assert_int_equal(gopt_trainer_canonical_devices(fz, 8, d.device, perms, 0, c2.device, NULL, &err), GOPT_EINVAL);
    gopt_decisions_destroy(&d);
    gopt_decisions_destroy(&r);
    gopt_decisions_destroy(&c1);
    gopt_decisions_destroy(&c2);
    gopt_sim_scratch_free(sc);
    gopt_sim_free(sim);
    gopt_graph_free(g);
    gopt_cost_free(cm);
    gopt_profile_free(prof);
}

/* ---- data-parallel steps: ranks as threads over a gather in rank order ---------------- */

/* The share-out covers every slot and sample once, in rank order, and every
 * slot has one leader that works on it. */
static void test_shard_partition(void **state) {
    (void)state;
    for (int B = 1; B <= 9; B++)
        for (int K = 1; K <= 7; K++)
            for (int N = 1; N <= 9; N++) {
                int next_lo = 0, next_l = 0, lead_of[16] = {0};
                for (int r = 0; r < N; r++) {
                    tr_shard sh;
                    tr_shard_of(B, K, N, r, &sh);
                    assert_int_equal(sh.lo, next_lo); /* samples: contiguous, in rank order */
                    assert_true(sh.hi >= sh.lo);
                    next_lo = sh.hi;
                    if (sh.l1 > sh.l0) { /* led slots: contiguous, in rank order, worked on */
                        assert_int_equal(sh.l0, next_l);
                        next_l = sh.l1;
                        assert_true(sh.l0 >= sh.s0 && sh.l1 <= sh.s1);
                    }
                    for (int b = sh.l0; b < sh.l1; b++) lead_of[b]++;
                    if (sh.hi > sh.lo) assert_true(sh.lo >= sh.s0 * K && sh.hi <= sh.s1 * K);
                    assert_true(sh.s1 > sh.s0);
                    if (B >= N) assert_true(sh.l0 == sh.s0 && sh.l1 == sh.s1);
                }
                assert_int_equal(next_lo, B * K);
                assert_int_equal(next_l, B);
                for (int b = 0; b < B; b++) assert_int_equal(lead_of[b], 1);
            }
}

#define MAX_RANKS 4
/* Ranks as threads. Only one rank computes at a time (it holds `run` except
 * inside a gather): the ranks of a real run are processes, while threads
 * share the process's state of the libraries under the trainer (Debian's
 * METIS draws from the C library's srand/rand, so concurrent references
 * partitioned differently: a 1-in-10 failure before this lock). */
typedef struct {
    pthread_barrier_t bar;
    pthread_mutex_t run;
    const void *send[MAX_RANKS];
    size_t bytes[MAX_RANKS];
} thread_world;

/* Each rank posts its block, then copies every block in rank order. */
static gopt_status thread_gather(void *ctx, const void *send, size_t bytes, void *recv, const size_t *counts,
                                 gopt_error *err) {
    (void)counts;
    (void)err;
    thread_world *w = ((void **)ctx)[0];
    int r = (int)(intptr_t)((void **)ctx)[1], n = (int)(intptr_t)((void **)ctx)[2];
    w->send[r] = send;
    w->bytes[r] = bytes;
    pthread_mutex_unlock(&w->run);
    pthread_barrier_wait(&w->bar);
    size_t off = 0;
    for (int q = 0; q < n; q++) {
        if (w->bytes[q]) memcpy((char *)recv + off, w->send[q], w->bytes[q]);
        off += w->bytes[q];
    }
    pthread_barrier_wait(&w->bar);
    pthread_mutex_lock(&w->run);
    return GOPT_OK;
}

typedef struct {
    thread_world *w;
    int rank, size, steps;
    const gopt_trainer_options *o;
    char path[300];
    gopt_status st;
    uint64_t fp;
} rank_job;

static void three_graphs(env *e) {
    add_graph(e, fan_graph("fan3", 3));
    add_graph(e, fan_graph("fan4", 4));
    add_graph(e, fan_graph("fan5", 5));
}

static void *rank_main(void *arg) {
    rank_job *j = arg;
    void *ctx[3] = {j->w, (void *)(intptr_t)j->rank, (void *)(intptr_t)j->size};
    gopt_dist *d = NULL;
    gopt_error err = {0};
    env e;
    pthread_mutex_lock(&j->w->run);
    env_init(&e, 2, j->o, 5);
    j->st = gopt_dist_custom(&d, j->rank, j->size, thread_gather, ctx, &err);
    if (!j->st) { /* communicator first: each rank computes every N-th graph's reference, then they are shared */
        gopt_trainer_set_dist(e.tr, d);
        three_graphs(&e);
        j->st = gopt_trainer_share_references(e.tr, &err);
    }
    for (int s = 0; s < j->steps && !j->st; s++) {
        gopt_trainer_stats st;
        j->st = gopt_trainer_step(e.tr, &st, &err);
    }
    if (!j->st) j->st = gopt_dist_check_same(d, gopt_trainer_fingerprint(e.tr), "state", &err);
    if (!j->st) j->st = gopt_trainer_save(e.tr, j->path, &err);
    if (j->st) fprintf(stderr, "rank %d: %s\n", j->rank, err.msg);
    j->fp = gopt_trainer_fingerprint(e.tr);
    gopt_dist_free(d);
    env_free(&e);
    pthread_mutex_unlock(&j->w->run);
    return NULL;
}

/* N ranks (threads) end with the checkpoint one process writes, every rank
 * alike: graphs shared out (B >= N), samples of a graph shared out (B < N),
 * both backward paths. */
static void test_data_parallel_equals_one_process(void **state) {
    (void)state;
    char dir[] = "/tmp/gopt_test_trainer_XXXXXX";
    assert_non_null(mkdtemp(dir));
    /* B, N, rounds, self-imitation (every 2nd step imitates the best found: ranks share its actions) */
    static const int cases[][4] = {{1, 2, 0, 0}, {2, 2, 0, 0}, {2, 3, 0, 0}, {3, 2, 1, 0}, {3, 4, 0, 0}, {1, 2, 0, 1},
                                   {2, 3, 0, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        gopt_trainer_options o;
        gopt_trainer_options_default(&o);
        o.samples = 5;
        o.epochs = 2;
        o.imitate_steps = 1;
        o.sim_threads = 1;
        o.seed = 3;
        o.graphs_per_step = cases[c][0];
        o.backward_rounds = cases[c][2];
        o.imitate_every = cases[c][3] ? 2 : 0;
        o.imitate_best = cases[c][3];
        const int N = cases[c][1], steps = cases[c][3] ? 6 : 4;
        char one[300], one_state[320];
        snprintf(one, sizeof one, "%s/one%zu.ckpt", dir, c);
        snprintf(one_state, sizeof one_state, "%s.state", one);
        env e;
        env_init(&e, 2, &o, 5);
        three_graphs(&e);
        run_steps(&e, steps);
        gopt_error err = {0};
        assert_int_equal(gopt_trainer_save(e.tr, one, &err), GOPT_OK);
        uint64_t fp = gopt_trainer_fingerprint(e.tr);
        env_free(&e);
        thread_world w;
        assert_int_equal(pthread_barrier_init(&w.bar, NULL, (unsigned)N), 0);
        assert_int_equal(pthread_mutex_init(&w.run, NULL), 0);
        rank_job jobs[MAX_RANKS];
        pthread_t th[MAX_RANKS];
        for (int r = 0; r < N; r++) {
            jobs[r] = (rank_job){&w, r, N, steps, &o, {0}, GOPT_OK, 0};
            snprintf(jobs[r].path, sizeof jobs[r].path, "%s/r%zu_%d.ckpt", dir, c, r);
            assert_int_equal(pthread_create(&th[r], NULL, rank_main, &jobs[r]), 0);
        }
        for (int r = 0; r < N; r++) assert_int_equal(pthread_join(th[r], NULL), 0);
        pthread_barrier_destroy(&w.bar);
        pthread_mutex_destroy(&w.run);
        for (int r = 0; r < N; r++) {
            char st[320];
            assert_int_equal(jobs[r].st, GOPT_OK);
            assert_true(jobs[r].fp == fp);
            test_assert_same_files(one, jobs[r].path);
            snprintf(st, sizeof st, "%s.state", jobs[r].path);
            test_assert_same_files(one_state, st);
        }
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

typedef struct {
    thread_world *w;
    int rank, rank_ok;
    gopt_status st, check;
    char msg[GOPT_ERROR_MSG_MAX];
    int any;
    char got[8];
} comm_job;

static void *comm_main(void *arg) {
    comm_job *j = arg; /* no cmocka asserts off the main thread: results are checked there */
    void *ctx[3] = {j->w, (void *)(intptr_t)j->rank, (void *)(intptr_t)3};
    gopt_dist *d = NULL;
    gopt_error err = {0};
    pthread_mutex_lock(&j->w->run);
    j->st = gopt_dist_custom(&d, j->rank, 3, thread_gather, ctx, &err);
    j->rank_ok = gopt_dist_rank(d) == j->rank && gopt_dist_size(d) == 3;
    if (!j->st) j->st = gopt_dist_any(d, j->rank == 2, &j->any, &err);
    snprintf(j->got, sizeof j->got, "%s", j->rank == 1 ? "bcast" : "");
    if (!j->st) j->st = gopt_dist_bcast(d, j->got, sizeof j->got, 1, &err);
    /* rank 2 disagrees */
    if (!j->st) j->check = gopt_dist_check_same(d, j->rank == 2 ? 7u : 5u, "thing", &err);
    snprintf(j->msg, sizeof j->msg, "%s", err.msg);
    gopt_dist_free(d);
    pthread_mutex_unlock(&j->w->run);
    return NULL;
}

/* The communicator: one process, refused arguments, any / bcast / check over threads. */
static void test_dist(void **state) {
    (void)state;
    gopt_error err = {0};
    gopt_dist *d = NULL;
    if (!gopt_dist_launched()) { /* a plain process: one rank, the gather is a copy */
        assert_int_equal(gopt_dist_init(&d, &err), GOPT_OK);
        assert_int_equal(gopt_dist_rank(d), 0);
        assert_int_equal(gopt_dist_size(d), 1);
        double x[2] = {1.5, -2}, y[2] = {0, 0};
        size_t counts[1] = {sizeof x};
        assert_int_equal(gopt_dist_allgatherv(d, x, sizeof x, y, counts, &err), GOPT_OK);
        assert_memory_equal(x, y, sizeof x);
        int any = 0;
        assert_int_equal(gopt_dist_any(d, 1, &any, &err), GOPT_OK);
        assert_int_equal(any, 1);
        assert_int_equal(gopt_dist_check_same(d, 42, "x", &err), GOPT_OK);
        gopt_dist_free(d);
    }
    assert_int_equal(gopt_dist_rank(NULL), 0);
    assert_int_equal(gopt_dist_size(NULL), 1);
    assert_int_equal(gopt_dist_custom(&d, 2, 2, thread_gather, NULL, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "rank 2 of 2"));
    assert_int_equal(gopt_dist_custom(&d, 0, 1, NULL, NULL, &err), GOPT_EINVAL);
    /* rank 0 of 2: the references wait for gopt_trainer_share_references, and a step refuses to run before */
    gopt_trainer_options o;
    gopt_trainer_options_default(&o);
    o.samples = 4;
    env e;
    env_init(&e, 2, &o, 5);
    assert_int_equal(gopt_dist_custom(&d, 0, 2, thread_gather, NULL, &err), GOPT_OK);
    gopt_trainer_set_dist(e.tr, d);
    add_graph(&e, fan_graph("fan3", 3));
    assert_true(gopt_trainer_reference(e.tr, 0, NULL) == 0);
    gopt_trainer_stats st;
    assert_int_equal(gopt_trainer_step(e.tr, &st, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "'fan3' has no reference yet"));
    env_free(&e);
    gopt_dist_free(d);
    thread_world w;
    assert_int_equal(pthread_barrier_init(&w.bar, NULL, 3), 0);
    assert_int_equal(pthread_mutex_init(&w.run, NULL), 0);
    comm_job jobs[3];
    pthread_t th[3];
    for (int r = 0; r < 3; r++) {
        memset(&jobs[r], 0, sizeof jobs[r]);
        jobs[r].w = &w;
        jobs[r].rank = r;
        assert_int_equal(pthread_create(&th[r], NULL, comm_main, &jobs[r]), 0);
    }
    for (int r = 0; r < 3; r++) assert_int_equal(pthread_join(th[r], NULL), 0);
    pthread_barrier_destroy(&w.bar);
    pthread_mutex_destroy(&w.run);
    for (int r = 0; r < 3; r++) {
        assert_int_equal(jobs[r].st, GOPT_OK);
        assert_true(jobs[r].rank_ok);
        assert_int_equal(jobs[r].any, 1);
        assert_string_equal(jobs[r].got, "bcast");
        assert_int_equal(jobs[r].check, GOPT_EINVAL);
        assert_non_null(strstr(jobs[r].msg, "rank 2's thing"));
    }
}


/* tr_actions_to_decisions through a critical-path cache: the same decisions as without it, for a
 * placement seen before, a new one, and the same placement under another device count */
static void test_cp_cache(void **state) {
    (void)state;
    gopt_error err = {0};
    gopt_graph *g = NULL;
    gopt_zoo_spec spec = {"transformer_xl", 1, 2, 16, GOPT_OPTIM_DEFAULT, 0};
    assert_int_equal(gopt_zoo_generate(&spec, &g, &err), GOPT_OK);
    const gopt_frozen *fz = gopt_graph_frozen(g);
    const int32_t n = fz->n;
    gopt_profile *prof = make_profile(4, 1e12);
    gopt_costmodel *cm = NULL;
    gopt_cost_table ct[2];
    assert_int_equal(gopt_cost_create(prof, 4, &cm, NULL), GOPT_OK);
    assert_int_equal(gopt_cost_table_build(cm, g, &ct[0], &err), GOPT_OK);
    assert_int_equal(gopt_cost_table_build(cm, g, &ct[1], &err), GOPT_OK);
    gopt_bl_problem bp[2] = {{0}, {0}};
    for (int k = 0; k < 2; k++) {
        bp[k].graph = g;
        bp[k].cm = cm;
        bp[k].cost = &ct[k];
        bp[k].ndev = 4 - 2 * k;
    }
    int32_t *pl = malloc(sizeof(int32_t) * 6 * (size_t)n), *sc = pl + n, *fu = sc + n, *grp = fu + n, *pl2 = grp + n;
    gopt_rng r;
    gopt_rng_seed(&r, 3);
    for (int32_t v = 0; v < n; v++) {
        pl[v] = (int32_t)gopt_rng_below(&r, 2);
        pl2[v] = (int32_t)gopt_rng_below(&r, 2);
        sc[v] = (int32_t)gopt_rng_below(&r, 3);
        fu[v] = 0;
    }
    gopt_policy_actions a = {pl, sc, fu}, a2 = {pl2, sc, fu};
    gopt_decisions d, want;
    assert_int_equal(gopt_decisions_init(&d, n, NULL), GOPT_OK);
    assert_int_equal(gopt_decisions_init(&want, n, NULL), GOPT_OK);
    tr_cp_cache c = {0};
    const gopt_policy_actions *seq[] = {&a, &a, &a2, &a, &a};
    const int prob[] = {0, 0, 0, 0, 1};
    for (int i = 0; i < 5; i++) {
        const gopt_bl_problem *p = &bp[prob[i]];
        assert_int_equal(gopt_trainer_actions_to_decisions(fz, GOPT_TASKS_ALL, 1, p, seq[i], &want, grp, &err), GOPT_OK);
        for (int32_t v = 0; v < n; v++) d.priority[v] = -7; /* whatever was there before */
        assert_int_equal(tr_actions_to_decisions(fz, GOPT_TASKS_ALL, 1, NULL, p, &c, seq[i], &d, grp, &err), GOPT_OK);
        assert_memory_equal(d.priority, want.priority, sizeof(int32_t) * (size_t)n);
        assert_memory_equal(d.device, want.device, sizeof(int32_t) * (size_t)n);
        assert_true(c.fz == fz && c.ndev == p->ndev); /* it holds the last placement ranked */
    }
    /* ties on the topological order (no problem): the cache is not read */
    assert_int_equal(tr_actions_to_decisions(fz, GOPT_TASKS_ALL, 1, NULL, NULL, &c, &a, &d, grp, &err), GOPT_OK);
    for (int32_t v = 0; v < n; v++) assert_int_equal(d.priority[v], sc[v] * (n + 1) + n - fz->rank[v]);
    tr_cp_cache_free(&c);
    free(pl);
    gopt_decisions_destroy(&d);
    gopt_decisions_destroy(&want);
    for (int k = 0; k < 2; k++) gopt_cost_table_destroy(&ct[k]);
    gopt_cost_free(cm);
    gopt_profile_free(prof);
    gopt_graph_free(g);
}


/* tr_variants_render on three threads: each action set's decisions as tr_variant_decisions makes
 * them one by one, under each fusion pass and tie order */
static void test_variants_render(void **state) {
    (void)state;
    gopt_trainer_options o;
    gopt_trainer_options_default(&o);
    o.samples = 6;
    o.sim_threads = 3;
    env e;
    env_init(&e, 2, &o, 3);
    gopt_graph *g = NULL;
    gopt_error err = {0};
    gopt_zoo_spec spec = {"transformer_xl", 4, 4, 16, GOPT_OPTIM_DEFAULT, 0};
    assert_int_equal(gopt_zoo_generate(&spec, &g, &err), GOPT_OK);
    add_graph(&e, g);
    gopt_trainer *t = e.tr;
    tr_graph *G = &t->graphs[0];
    const int32_t n = G->fz->n;
    assert_true(6 * n >= TR_RENDER_MIN_NODES); /* enough nodes for the threads */
    gopt_bl_problem bp;
    assert_int_equal(tr_reserve(t, n, &err), GOPT_OK);
    assert_int_equal(tr_decisions_for(t, n, &err), GOPT_OK);
    assert_int_equal(tr_problem(t, 0, &bp, &err), GOPT_OK);
    const gopt_policy_config *c = gopt_policy_get_config(t->pol);
    gopt_rng r;
    gopt_rng_seed(&r, 5);
    gopt_policy_actions as[6];
    for (int k = 0; k < 6; k++) {
        as[k] = tr_actions(t, 0, k);
        for (int32_t v = 0; v < n; v++) {
            as[k].place[v] = k % 2 ? 0 : (int32_t)gopt_rng_below(&r, 2); /* half on one placement */
            as[k].sched[v] = (int32_t)gopt_rng_below(&r, (uint64_t)c->sched_levels);
            as[k].fuse[v] = (int32_t)gopt_rng_below(&r, (uint64_t)c->fusion_levels);
        }
    }
    gopt_decisions ref;
    assert_int_equal(gopt_decisions_init(&ref, n, NULL), GOPT_OK);
    for (int var = 0; var < 4; var++) {
        assert_int_equal(tr_variants_render(t, G, as, 6, var, NULL, &bp, t->dec, &err), GOPT_OK);
        for (int k = 0; k < 6; k++) {
            assert_int_equal(tr_variant_decisions(t, G, &as[k], var, NULL, &bp, &ref, &err), GOPT_OK);
            assert_decisions_equal(&t->dec[k], &ref);
        }
    }
    /* a bad action set: its error, as the loop in order reports it */
    as[3].fuse[0] = -1;
    as[5].fuse[0] = -2;
    assert_int_equal(tr_variants_render(t, G, as, 6, 0, NULL, &bp, t->dec, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "level -1"));
    gopt_decisions_destroy(&ref);
    env_free(&e);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ppo_finds_known_placement),
        cmocka_unit_test(test_evaluator_seam),
        cmocka_unit_test(test_greedy_tie_orders),
        cmocka_unit_test(test_cp_cache),
        cmocka_unit_test(test_variants_render),
        cmocka_unit_test(test_resume_equals_uninterrupted),
        cmocka_unit_test(test_graphs_per_step),
        cmocka_unit_test(test_batched_equals_rounds),
        cmocka_unit_test(test_nan_update_skipped),
        cmocka_unit_test(test_imitation_lowers_loss),
        cmocka_unit_test(test_imitate_every),
        cmocka_unit_test(test_imitate_best), cmocka_unit_test(test_splice), cmocka_unit_test(test_targets), cmocka_unit_test(test_place_temperature), cmocka_unit_test(test_train_heads),
        cmocka_unit_test(test_reference_evals),
        cmocka_unit_test(test_actions_to_decisions), cmocka_unit_test(test_group_levels),
        cmocka_unit_test(test_fusion_groups),
        cmocka_unit_test(test_go_decide),
        cmocka_unit_test(test_go_fusion_pass),
        cmocka_unit_test(test_go_memory_safe),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_canonical_devices),
        cmocka_unit_test(test_shard_partition),
        cmocka_unit_test(test_data_parallel_equals_one_process),
        cmocka_unit_test(test_dist),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
