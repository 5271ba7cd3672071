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
 * imitation targets: symmetries of the DGX-1 links simulate equal.
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

#include "gopt_trainer.h"
#include "gopt_zoo.h"

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

static char *read_file(const char *path, size_t *len) {
    char *b = NULL;
    assert_int_equal(gopt_file_read_all(path, &b, len, NULL), GOPT_OK);
    return b;
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
    char *a = read_file(pa, &la), *b = read_file(pb, &lb);
    assert_int_equal(la, lb);
    assert_memory_equal(a, b, la); /* parameters, Adam moments and step */
    free(a);
    free(b);
    snprintf(sa, sizeof sa, "%s.state", pa);
    snprintf(sb, sizeof sb, "%s.state", pb);
    a = read_file(sa, &la);
    b = read_file(sb, &lb);
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
    assert_int_equal(gopt_trainer_actions_to_decisions(fz, GOPT_TASKS_ALL, &a, &d, grp, &err), GOPT_OK);
    for (int v = 0; v < n; v++) {
        assert_int_equal(d.device[v], place[v]);
        assert_int_equal(d.priority[v], sched[v]);
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
    assert_int_equal(gopt_trainer_actions_to_decisions(fz, GOPT_TASK_BIT(GOPT_TASK_SCHED), &a, &d, grp, &err),
                     GOPT_OK);
    for (int v = 0; v < n; v++) {
        assert_int_equal(d.device[v], 0);
        assert_int_equal(d.priority[v], sched[v]);
        assert_int_equal(d.group[v], -1);
    }
    assert_int_equal(gopt_trainer_actions_to_decisions(fz, GOPT_TASK_BIT(GOPT_TASK_PLACE), &a, &d, grp, &err),
                     GOPT_OK);
    for (int v = 0; v < n; v++) assert_int_equal(d.priority[v], n - fz->rank[v]);
    gopt_decisions_destroy(&d);
    gopt_graph_free(g);
}

/* ---- the trainer's fusion decoding: weights and earlier tensors may stay outside -- */
static void test_fusion_groups(void **state) {
    (void)state;
    /* x -> a -> b <- w (parameter), a -> c <- y (x -> y -> a: y before the root a): b and
     * c join a's group although w and y are not in it; the policy's pass would
     * keep both out */
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
    assert_int_equal(gopt_policy_fusion_groups(fz, place, fuse, grp, &ng, &err), GOPT_OK);
    assert_int_equal(grp[b], grp[a]);
    assert_int_equal(grp[c], grp[a]);
    assert_int_not_equal(grp[y], grp[a]);
    /* z reads b and c, both in the group, but has level 0: not fused */
    assert_int_not_equal(grp[z], grp[a]);
    /* another level, or another device, roots a new group */
    fuse[c] = 2;
    assert_int_equal(gopt_policy_fusion_groups(fz, place, fuse, grp, &ng, &err), GOPT_OK);
    assert_int_not_equal(grp[c], grp[a]);
    fuse[c] = 1;
    place[b] = 1;
    assert_int_equal(gopt_policy_fusion_groups(fz, place, fuse, grp, &ng, &err), GOPT_OK);
    assert_int_not_equal(grp[b], grp[a]);
    /* a negative level is refused */
    fuse[b] = 0;
    place[b] = 0;
    fuse[y] = 0;
    fuse[src] = -1;
    assert_int_equal(gopt_policy_fusion_groups(fz, place, fuse, grp, &ng, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "negative"));
    gopt_graph_free(g);

    /* random levels and devices on a generated training step: always valid */
    gopt_zoo_spec spec = {"resnet", 18, 8, 32, GOPT_OPTIM_DEFAULT};
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
        assert_int_equal(gopt_trainer_actions_to_decisions(fz, GOPT_TASKS_ALL, &act, &d, sc, &err), GOPT_OK);
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
    gopt_sim *sim = NULL;
    assert_int_equal(gopt_sim_create(g, e.cm, &sim, &err), GOPT_OK);
    gopt_bl_problem p = {0};
    gopt_sim_scratch *scr = NULL;
    assert_int_equal(gopt_sim_scratch_create(sim, &scr, &err), GOPT_OK);
    gopt_bl_sim_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.sim = sim;
    ctx.scratch = scr;
    p.graph = g;
    p.cm = e.cm;
    p.cost = gopt_sim_cost_table(sim);
    p.ndev = 2;
    p.evaluate = gopt_bl_sim_evaluate;
    p.eval_ctx = &ctx;
    gopt_go_options go = {path, 0, 1};
    gopt_decisions d1 = {0}, d2 = {0};
    assert_int_equal(gopt_decisions_init(&d1, gopt_graph_num_nodes(g), NULL), GOPT_OK);
    assert_int_equal(gopt_decisions_init(&d2, gopt_graph_num_nodes(g), NULL), GOPT_OK);
    assert_int_equal(gopt_go_decide(&go, &p, &d1, &err), GOPT_OK);
    assert_int_equal(gopt_decisions_validate(&d1, g, 2, &err), GOPT_OK);
    for (int v = 0; v < d1.n; v++) assert_int_equal(d1.group[v], -1); /* fusion was not trained */
    int oom = 0;
    double greedy = gopt_bl_sim_evaluate(&ctx, &d1, &oom);
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
    gopt_sim_scratch_free(scr);
    gopt_sim_free(sim);
    gopt_graph_free(g);
    env_free(&e);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
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
    gopt_zoo_spec spec = {"resnet", 18, 8, 32, GOPT_OPTIM_DEFAULT};
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ppo_finds_known_placement),
        cmocka_unit_test(test_resume_equals_uninterrupted),
        cmocka_unit_test(test_graphs_per_step),
        cmocka_unit_test(test_nan_update_skipped),
        cmocka_unit_test(test_imitation_lowers_loss),
        cmocka_unit_test(test_actions_to_decisions),
        cmocka_unit_test(test_fusion_groups),
        cmocka_unit_test(test_go_decide),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_canonical_devices),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
