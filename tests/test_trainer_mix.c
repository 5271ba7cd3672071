/* test_trainer_mix.c: the trainer with a cost model and device count per
 * graph (gopt_trainer_add_graph_on) and its graph cache.
 *
 * Three small graphs on three clusters: 2 V100s of the DGX-1 profile, 3 and
 * 2 H100s of the NVSwitch profile. Each graph's reference is exactly what a
 * trainer on that cluster alone computes, its greedy decisions use only its
 * own devices, and a run killed after 3 steps and resumed (another cache
 * size, another initialisation seed) ends with the policy and state files of
 * the uninterrupted run byte for byte (which keeps every graph built: the
 * cache changes memory, not results). The state names each graph's profile
 * and devices, and a resume on another device count, another profile, or a
 * profile file with the same name and other content is refused naming the
 * graph and the field (a state without these fields, written before they
 * existed, still resumes). A graph on more devices than the policy places, or
 * added without a cost model, is refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gopt_trainer.h"

/* `heavy` independent GEMMs of 1e9 FLOPs from one source into one sink. */
static gopt_graph *fan_graph(const char *name, int heavy) {
    gopt_graph *g = NULL;
    assert_int_equal(gopt_graph_create(&g, name, "test", NULL), GOPT_OK);
    gopt_node_attrs a = {0};
    a.op = "Add";
    a.cls = GOPT_OP_CLASS_ELEMENTWISE;
    a.flops = 1e3;
    a.out_bytes = 1024;
    a.layer = -1;
    a.name = "src";
    int32_t src = -1, sink = -1, ids[16];
    assert_int_equal(gopt_graph_add_node(g, &a, &src, NULL), GOPT_OK);
    a.name = "sink";
    assert_int_equal(gopt_graph_add_node(g, &a, &sink, NULL), GOPT_OK);
    char nm[16];
    for (int i = 0; i < heavy; i++) {
        snprintf(nm, sizeof nm, "mm%d", i);
        gopt_node_attrs m = a;
        m.name = nm;
        m.op = "MatMul";
        m.cls = GOPT_OP_CLASS_GEMM;
        m.flops = 1e9 * (1 + i % 3);
        assert_int_equal(gopt_graph_add_node(g, &m, &ids[i], NULL), GOPT_OK);
        assert_int_equal(gopt_graph_add_edge(g, src, ids[i], 1024, NULL), GOPT_OK);
        assert_int_equal(gopt_graph_add_edge(g, ids[i], sink, 1024, NULL), GOPT_OK);
    }
    assert_int_equal(gopt_graph_finalize(g, NULL), GOPT_OK);
    return g;
}

typedef struct {
    gopt_profile *v100, *h100, *ua, *ub;
    gopt_costmodel *v2, *h3, *h2, *ua2, *ub2, *v8;
} clusters;

static void clusters_init(clusters *c) {
    gopt_error err = {0};
    memset(c, 0, sizeof *c);
    assert_int_equal(gopt_profile_load(GOPT_SOURCE_DIR "/profiles/v100-dgx1-x8.json", &c->v100, &err), GOPT_OK);
    assert_int_equal(gopt_profile_load(GOPT_SOURCE_DIR "/profiles/h100-nvswitch-x8.json", &c->h100, &err), GOPT_OK);
    c->ua = test_profile_uniform(2, 1e12, 1e12, "test_trainer_mix"); /* both named "test" */
    c->ub = test_profile_uniform(2, 1e12, 5e11, "test_trainer_mix");
    assert_int_equal(gopt_cost_create(c->v100, 2, &c->v2, &err), GOPT_OK);
    assert_int_equal(gopt_cost_create(c->h100, 3, &c->h3, &err), GOPT_OK);
    assert_int_equal(gopt_cost_create(c->h100, 2, &c->h2, &err), GOPT_OK);
    assert_int_equal(gopt_cost_create(c->ua, 2, &c->ua2, &err), GOPT_OK);
    assert_int_equal(gopt_cost_create(c->ub, 2, &c->ub2, &err), GOPT_OK);
    assert_int_equal(gopt_cost_create(c->v100, 8, &c->v8, &err), GOPT_OK);
}

static void clusters_free(clusters *c) {
    gopt_costmodel *cms[] = {c->v2, c->h3, c->h2, c->ua2, c->ub2, c->v8};
    for (size_t i = 0; i < sizeof cms / sizeof cms[0]; i++) gopt_cost_free(cms[i]);
    gopt_profile_free(c->v100);
    gopt_profile_free(c->h100);
    gopt_profile_free(c->ua);
    gopt_profile_free(c->ub);
}

static void options(gopt_trainer_options *o) {
    gopt_trainer_options_default(o);
    o->samples = 6;
    o->epochs = 2;
    o->imitate_steps = 2;
    o->graphs_per_step = 2;
    o->seed = 3;
}

typedef struct {
    gopt_policy *pol;
    gopt_trainer *tr;
} run;

static gopt_policy *tiny_policy(uint64_t pseed) {
    gopt_policy_config c;
    gopt_policy_config_default(&c);
    c.hidden = 16;
    c.sage_layers = 1;
    c.attn_layers = 1;
    c.heads = 2;
    c.segment = 8;
    c.ffn_mult = 1;
    c.max_devices = 4;
    c.sched_levels = 4;
    c.fusion_levels = 2;
    gopt_policy *p = NULL;
    assert_int_equal(gopt_policy_create(&p, &c, pseed, NULL), GOPT_OK);
    return p;
}

/* A trainer without a default cost model, graph k ("fan<3+k>") on cms[k]. */
static void run_init(run *r, const gopt_trainer_options *o, uint64_t pseed, const gopt_costmodel *const *cms,
                     int ng, int cache) {
    gopt_error err = {0};
    r->pol = tiny_policy(pseed);
    assert_int_equal(gopt_trainer_create(&r->tr, r->pol, NULL, o, &err), GOPT_OK);
    if (cache >= 0) gopt_trainer_set_cache(r->tr, cache);
    for (int k = 0; k < ng; k++) {
        char name[16];
        snprintf(name, sizeof name, "fan%d", 3 + k);
        gopt_status st = gopt_trainer_add_graph_on(r->tr, fan_graph(name, 3 + k), cms[k], 0, &err);
        if (st) fprintf(stderr, "%s\n", err.msg);
        assert_int_equal(st, GOPT_OK);
    }
}

static void run_free(run *r) {
    gopt_trainer_free(r->tr);
    gopt_policy_free(r->pol);
}

static void steps(run *r, int n) {
    gopt_error err = {0};
    for (int i = 0; i < n; i++) {
        gopt_trainer_stats st;
        gopt_status s = gopt_trainer_step(r->tr, &st, &err);
        if (s) fprintf(stderr, "%s\n", err.msg);
        assert_int_equal(s, GOPT_OK);
    }
}

/* Resuming pb on clusters cms must fail with a message containing want. */
static void refused(const gopt_trainer_options *o, const gopt_costmodel *const *cms, int ng, const char *pb,
                    const char *want) {
    run r;
    run_init(&r, o, 5, cms, ng, -1);
    gopt_error err = {0};
    assert_int_equal(gopt_trainer_load(r.tr, pb, &err), GOPT_EINVAL);
    if (!strstr(err.msg, want)) fprintf(stderr, "got: %s\nwant: %s\n", err.msg, want);
    assert_non_null(strstr(err.msg, want));
    run_free(&r);
}

static void test_mixed_clusters(void **state) {
    (void)state;
    char dir[256], pa[300], pb[300], sa[310], sb[310];
    assert_int_equal(test_tmpdir_make(dir, sizeof dir, "trainer_mix"), 0);
    snprintf(pa, sizeof pa, "%s/a.ckpt", dir);
    snprintf(pb, sizeof pb, "%s/b.ckpt", dir);
    snprintf(sa, sizeof sa, "%s.state", pa);
    snprintf(sb, sizeof sb, "%s.state", pb);
    clusters c;
    clusters_init(&c);
    gopt_trainer_options o;
    options(&o);
    gopt_error err = {0};
    const gopt_costmodel *cms[3] = {c.v2, c.h3, c.h2};
    /* uninterrupted, every graph kept built */
    run r;
    run_init(&r, &o, 5, cms, 3, 0);
    for (int k = 0; k < 3; k++) assert_ptr_equal(gopt_trainer_graph_costmodel(r.tr, k), cms[k]);
    /* each reference is the one a trainer on that cluster alone computes */
    for (int k = 0; k < 3; k++) {
        run one;
        one.pol = tiny_policy(5);
        assert_int_equal(gopt_trainer_create(&one.tr, one.pol, cms[k], &o, &err), GOPT_OK);
        char name[16];
        snprintf(name, sizeof name, "fan%d", 3 + k);
        assert_int_equal(gopt_trainer_add_graph(one.tr, fan_graph(name, 3 + k), 0, &err), GOPT_OK);
        assert_true(gopt_trainer_reference(one.tr, 0, NULL) == gopt_trainer_reference(r.tr, k, NULL));
        run_free(&one);
    }
    /* the references differ between the clusters (so the test can tell them apart) */
    assert_true(gopt_trainer_reference(r.tr, 1, NULL) != gopt_trainer_reference(r.tr, 2, NULL) ||
                gopt_trainer_reference(r.tr, 0, NULL) != gopt_trainer_reference(r.tr, 1, NULL));
    steps(&r, 6);
    /* greedy decisions stay on each graph's own devices */
    for (int k = 0; k < 3; k++) {
        const gopt_graph *g = gopt_trainer_graph(r.tr, k);
        gopt_decisions d = {0};
        gopt_sim_result res;
        assert_int_equal(gopt_decisions_init(&d, gopt_graph_num_nodes(g), NULL), GOPT_OK);
        assert_int_equal(gopt_trainer_greedy(r.tr, k, &d, &res, &err), GOPT_OK);
        assert_int_equal(res.ndev, gopt_cost_num_devices(cms[k]));
        for (int32_t v = 0; v < d.n; v++) assert_in_range(d.device[v], 0, gopt_cost_num_devices(cms[k]) - 1);
        gopt_decisions_destroy(&d);
    }
    assert_int_equal(gopt_trainer_save(r.tr, pa, &err), GOPT_OK);
    run_free(&r);
    /* killed after 3 steps (the default cache), resumed with a cache of 2 and another init seed */
    run_init(&r, &o, 5, cms, 3, -1);
    steps(&r, 3);
    assert_int_equal(gopt_trainer_save(r.tr, pb, &err), GOPT_OK);
    steps(&r, 1); /* lost */
    run_free(&r);
    run_init(&r, &o, 77, cms, 3, 2);
    gopt_status st = gopt_trainer_load(r.tr, pb, &err);
    if (st) fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(st, GOPT_OK);
    steps(&r, 3);
    /* the greedy evaluations of the uninterrupted run updated its bests: do the same */
    for (int k = 0; k < 3; k++) {
        gopt_decisions d = {0};
        gopt_sim_result res;
        assert_int_equal(gopt_decisions_init(&d, gopt_graph_num_nodes(gopt_trainer_graph(r.tr, k)), NULL), GOPT_OK);
        assert_int_equal(gopt_trainer_greedy(r.tr, k, &d, &res, &err), GOPT_OK);
        gopt_decisions_destroy(&d);
    }
    assert_int_equal(gopt_trainer_save(r.tr, pb, &err), GOPT_OK);
    run_free(&r);
    test_assert_same_files(pa, pb);
    test_assert_same_files(sa, sb);
    /* the state names each graph's cluster */
    size_t len;
    char *text = test_read_file(sb, &len);
    assert_non_null(strstr(text, "\"profile\": \"v100-dgx1-x8\""));
    assert_non_null(strstr(text, "\"profile\": \"h100-nvswitch-x8\""));
    assert_non_null(strstr(text, "\"devices\": 3"));
    free(text);
    /* a resume on other clusters is refused, naming the graph and the field */
    refused(&o, (const gopt_costmodel *const[]){c.v2, c.h2, c.h2}, 3, pb, "graph 'fan4': devices was 3, now 2");
    refused(&o, (const gopt_costmodel *const[]){c.h2, c.h3, c.h2}, 3, pb,
            "graph 'fan3': profile was 'v100-dgx1-x8', now 'h100-nvswitch-x8'");
    /* a state written before graphs had their own cluster (no per-graph fields) still resumes */
    json_t *j = json_load_file(sb, 0, NULL);
    assert_non_null(j);
    json_t *gs = json_object_get(j, "graphs");
    for (size_t i = 0; i < json_array_size(gs); i++) {
        json_t *g = json_array_get(gs, i);
        assert_int_equal(json_object_del(g, "profile") | json_object_del(g, "profile_fnv64") |
                             json_object_del(g, "devices"),
                         0);
    }
    assert_int_equal(json_dump_file(j, sb, JSON_INDENT(1) | JSON_REAL_PRECISION(17)), 0);
    json_decref(j);
    run_init(&r, &o, 5, cms, 3, -1);
    st = gopt_trainer_load(r.tr, pb, &err);
    if (st) fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(st, GOPT_OK);
    assert_int_equal(gopt_trainer_steps_done(r.tr), 6);
    run_free(&r);
    /* same name, other content */
    const gopt_costmodel *ua[1] = {c.ua2}, *ub[1] = {c.ub2};
    run_init(&r, &o, 5, ua, 1, -1);
    steps(&r, 1);
    assert_int_equal(gopt_trainer_save(r.tr, pa, &err), GOPT_OK);
    run_free(&r);
    refused(&o, ub, 1, pa, "graph 'fan3': profile_fnv64 was");
    clusters_free(&c);
    assert_int_equal(test_tmpdir_remove(dir), 0);
}

static void test_add_graph_on_refusals(void **state) {
    (void)state;
    clusters c;
    clusters_init(&c);
    gopt_trainer_options o;
    options(&o);
    run r;
    run_init(&r, &o, 5, NULL, 0, -1);
    gopt_error err = {0};
    /* no default cost model */
    assert_int_equal(gopt_trainer_add_graph(r.tr, fan_graph("lone", 3), 0, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "graph 'lone': no cost model"));
    /* 8 devices for a policy that places on 4 */
    assert_int_equal(gopt_trainer_add_graph_on(r.tr, fan_graph("wide", 3), c.v8, 0, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "graph 'wide': 8 devices but the policy places on 1..4"));
    assert_int_equal(gopt_trainer_num_graphs(r.tr), 0);
    /* a graph on 2 devices is fine, and a step runs */
    assert_int_equal(gopt_trainer_add_graph_on(r.tr, fan_graph("ok", 3), c.h2, 0, &err), GOPT_OK);
    steps(&r, 1);
    run_free(&r);
    clusters_free(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mixed_clusters),
        cmocka_unit_test(test_add_graph_on_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
