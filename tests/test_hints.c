/* test_hints.c: the decoder's hints (trainer/hint.c).
 *
 * gopt_go_hints_from on hand-made decisions: device labels canonical (on
 * identical, uniformly linked devices: numbered in order of first use along
 * the topological order), priority ranks in [0, 1] with 1 for the highest
 * priority and ties equal, fusion flags (root of a group of two or more;
 * joins a group; singletons and ungrouped nodes 0). gopt_go_hints runs the
 * hint method on a problem; with quality, each hint is its placer's
 * combination judged by the evaluator (T_best / T_h, exactly 1 for the best)
 * and the schedule features are the best combination's. The hint table
 * (gopt_go_hints_pick) gives the same hints, or hints conditioned on another
 * combination (go's styles, gopt_go_hint_styles). A trainer with a
 * hinted policy builds the hints and imitation then copies the hint's
 * placement where it is the target. gopt_go_hint_refs_missing names the hint
 * combinations a reference list lacks.
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

#include "gopt_trainer.h"
#include "trainer_internal.h" /* tr_graph: the hints the trainer built */

static int32_t add(gopt_graph *g, const char *name, gopt_op_class c, double flops) {
    gopt_node_attrs a = {0};
    a.name = name;
    a.op = c == GOPT_OP_CLASS_GEMM ? "MatMul" : "Add";
    a.cls = c;
    a.flops = flops;
    a.out_bytes = 4096;
    a.layer = -1;
    int32_t id = -1;
    assert_int_equal(gopt_graph_add_node(g, &a, &id, NULL), GOPT_OK);
    return id;
}

/* a chain of 6 (ids 0..5) plus two side branches from node 1 (ids 6, 7) into node 5 */
static gopt_graph *small_graph(void) {
    gopt_graph *g = NULL;
    assert_int_equal(gopt_graph_create(&g, "hints", "test", NULL), GOPT_OK);
    char nm[16];
    for (int i = 0; i < 8; i++) {
        snprintf(nm, sizeof nm, "n%d", i);
        add(g, nm, i % 2 ? GOPT_OP_CLASS_GEMM : GOPT_OP_CLASS_ELEMENTWISE, i % 2 ? 1e9 : 1e5);
    }
    for (int i = 0; i < 5; i++) assert_int_equal(gopt_graph_add_edge(g, i, i + 1, 4096, NULL), GOPT_OK);
    assert_int_equal(gopt_graph_add_edge(g, 1, 6, 4096, NULL), GOPT_OK);
    assert_int_equal(gopt_graph_add_edge(g, 6, 7, 4096, NULL), GOPT_OK);
    assert_int_equal(gopt_graph_add_edge(g, 7, 5, 4096, NULL), GOPT_OK);
    gopt_error err = {0};
    assert_int_equal(gopt_graph_finalize(g, &err), GOPT_OK);
    return g;
}

static void test_hints_from(void **state) {
    (void)state;
    enum { NDEV = 3 };
    gopt_graph *g = small_graph();
    const gopt_frozen *fz = gopt_graph_frozen(g);
    const int n = fz->n;
    gopt_profile *prof = test_profile_uniform(NDEV, 1e12, 1e12, "test_hints");
    gopt_costmodel *cm = NULL;
    gopt_error err = {0};
    assert_int_equal(gopt_cost_create(prof, NDEV, &cm, NULL), GOPT_OK);
    gopt_sim *sim = NULL;
    assert_int_equal(gopt_sim_create(g, cm, &sim, &err), GOPT_OK);
    gopt_decisions d = {0};
    assert_int_equal(gopt_decisions_init(&d, n, &err), GOPT_OK);
    /* devices 2 for the chain's head, 1 for the rest: canonical 0 then 1 */
    for (int v = 0; v < n; v++) d.device[v] = v < 2 ? 2 : 1;
    const int32_t prio[8] = {5, 9, 1, 1, 0, 7, 3, 2};
    for (int v = 0; v < n; v++) d.priority[v] = prio[v];
    for (int v = 0; v < n; v++) d.group[v] = -1;
    d.group[2] = d.group[3] = d.group[4] = 0; /* a group of three rooted at node 2 */
    d.group[6] = 1;                          /* a singleton group */
    int32_t dev[2 * 8];
    float feat[8 * GOPT_POLICY_NHINT];
    int32_t grp[8];
    const gopt_decisions *hd[2] = {&d, NULL}; /* row 1: a placer that found nothing */
    assert_int_equal(gopt_go_hints_from(fz, cm, gopt_sim_cost_table(sim), NDEV, 2, hd, &d, dev, feat, grp, &err), GOPT_OK);
    for (int v = 0; v < n; v++) assert_int_equal(dev[v], v < 2 ? 0 : 1);
    for (int v = 0; v < n; v++) assert_int_equal(dev[n + v], -1);
    /* ranks: sorted priorities 0,1,1,2,3,5,7,9 -> share of nodes strictly below / 7 */
    const float rank[8] = {5 / 7.f, 7 / 7.f, 1 / 7.f, 1 / 7.f, 0.f, 6 / 7.f, 4 / 7.f, 3 / 7.f};
    for (int v = 0; v < n; v++) assert_float_equal(feat[v * GOPT_POLICY_NHINT], rank[v], 1e-6);
    for (int v = 0; v < n; v++) {
        const float *f = feat + v * GOPT_POLICY_NHINT;
        assert_float_equal(f[2], v == 2 ? 1.0f : 0.0f, 0); /* root */
        assert_float_equal(f[1], v == 3 || v == 4 ? 1.0f : 0.0f, 0); /* joins */
        assert_int_equal(grp[v], v >= 2 && v <= 4 ? 2 : -1);           /* named by its root; singletons -1 */
    }
    /* the method on a problem: a hint with every device in range */
    gopt_bl_problem p = {0};
    p.graph = g;
    p.cm = cm;
    p.cost = gopt_sim_cost_table(sim);
    p.ndev = NDEV;
    int have = 0;
    assert_int_equal(gopt_go_hints(&p, 2, 1, dev, feat, NULL, NULL, &have, &err), GOPT_OK);
    assert_int_equal(have, 1);
    for (int v = 0; v < 2 * n; v++) assert_true(dev[v] >= 0 && dev[v] < NDEV);
    for (int i = 0; i < n * GOPT_POLICY_NHINT; i++) assert_true(feat[i] >= 0.0f && feat[i] <= 1.0f);
    assert_int_equal(gopt_go_hints(&p, 0, 1, dev, feat, NULL, NULL, &have, &err), GOPT_EINVAL);
    assert_int_equal(gopt_go_hints(&p, 8, 1, dev, feat, NULL, NULL, &have, &err), GOPT_EINVAL);
    gopt_decisions_destroy(&d);
    gopt_sim_free(sim);
    gopt_cost_free(cm);
    gopt_profile_free(prof);
    gopt_graph_free(g);
}

/* A problem on graph g over ndev uniform devices, judged by the simulator (seed 1). */
typedef struct {
    gopt_profile *prof;
    gopt_costmodel *cm;
    gopt_sim *sim;
    gopt_sim_scratch *scr;
    gopt_bl_sim_ctx ctx;
    gopt_bl_problem p;
} hint_env;

static void hint_env_init(hint_env *e, gopt_graph *g, int ndev) {
    gopt_error err = {0};
    memset(e, 0, sizeof *e);
    e->prof = test_profile_uniform(ndev, 1e12, 1e9, "test_hints");
    assert_int_equal(gopt_cost_create(e->prof, ndev, &e->cm, NULL), GOPT_OK);
    assert_int_equal(gopt_sim_create(g, e->cm, &e->sim, &err), GOPT_OK);
    assert_int_equal(gopt_sim_scratch_create(e->sim, &e->scr, &err), GOPT_OK);
    gopt_bl_options opt = {0};
    opt.seed = 1;
    gopt_bl_problem_on_sim(&e->p, &e->ctx, e->sim, e->scr, e->cm, &opt);
}

static void hint_env_free(hint_env *e) {
    gopt_sim_scratch_free(e->scr);
    gopt_sim_free(e->sim);
    gopt_cost_free(e->cm);
    gopt_profile_free(e->prof);
}

/* Quality: every hint is the faster of placer+cp+xla and placer+fifo+xla judged by the simulator;
 * quality[h] = T_best / T_h, the best exactly 1; the per-node features are those of the best
 * hint's combination. */
static void test_hints_quality(void **state) {
    (void)state;
    enum { NDEV = 3, NH = 7 };
    gopt_graph *g = small_graph();
    const gopt_frozen *fz = gopt_graph_frozen(g);
    const int n = fz->n;
    hint_env he;
    hint_env_init(&he, g, NDEV);
    gopt_costmodel *cm = he.cm;
    gopt_bl_problem p = he.p;
    gopt_error err = {0};
    int32_t dev[NH * 8];
    float feat[8 * GOPT_POLICY_NHINT], q[NH];
    int have = 0;
    assert_int_equal(gopt_go_hints(&p, NH, 1, dev, feat, NULL, q, &have, &err), GOPT_OK);
    assert_int_equal(have, 1);
    /* each combination's step, independently */
    gopt_bl_registry reg;
    gopt_bl_registry_init(&reg);
    double step[NH], best = INFINITY;
    int ibest = -1;
    gopt_decisions d[NH];
    for (int h = 0; h < NH; h++) {
        memset(&d[h], 0, sizeof d[h]);
        step[h] = INFINITY;
        for (int k = 0; k < 5; k++) {
            static const char *const combos[] = {"+cp+xla", "+fifo+xla", "+cp+tvm", "+cp+xlamo", "+fifo+xlamo"};
            char spec[64];
            snprintf(spec, sizeof spec, "%s%s", gopt_go_hint_placers[h], combos[k]);
            assert_string_equal(gopt_go_hint_combos[k], combos[k]);
            gopt_bl_combo c;
            gopt_decisions e = {0};
            assert_int_equal(gopt_bl_combo_parse(&reg, spec, &c, &err), GOPT_OK);
            assert_int_equal(gopt_bl_combo_decide(&reg, &c, &p, &e, &err), GOPT_OK);
            int oom = 0;
            double s = gopt_bl_evaluate(&p, &e, &oom);
            assert_int_equal(oom, 0);
            if (s < step[h]) {
                gopt_decisions_destroy(&d[h]);
                d[h] = e;
                step[h] = s;
            } else {
                gopt_decisions_destroy(&e);
            }
        }
        if (step[h] < best) best = step[h], ibest = h;
    }
    assert_null(gopt_go_hint_combos[5]);
    int ones = 0;
    for (int h = 0; h < NH; h++) {
        assert_float_equal(q[h], best / step[h], 1e-6);
        assert_true(q[h] > 0.0f && q[h] <= 1.0f);
        ones += q[h] == 1.0f;
    }
    assert_true(ones >= 1);
    assert_true(q[ibest] == 1.0f);
    /* single puts everything on one device: never better than the best */
    assert_true(step[6] >= best);
    /* the features: the best combination's schedule and fusion */
    float want[8 * GOPT_POLICY_NHINT];
    int32_t wdev[NH * 8];
    const gopt_decisions *hp[NH];
    for (int h = 0; h < NH; h++) hp[h] = &d[h];
    assert_int_equal(gopt_go_hints_from(fz, cm, p.cost, NDEV, NH, hp, &d[ibest], wdev, want, NULL, &err), GOPT_OK);
    assert_memory_equal(feat, want, sizeof want);
    assert_memory_equal(dev, wdev, sizeof(int32_t) * (size_t)NH * (size_t)n);
    for (int h = 0; h < NH; h++) gopt_decisions_destroy(&d[h]);
    hint_env_free(&he);
    gopt_graph_free(g);
}

/* The hint table: every combination run and judged once; pick -1 gives gopt_go_hints' hints with
 * quality; a conditioned pick reads as the only best hint (quality exactly 1 there, below 1
 * elsewhere) with its own placement, schedule and fusion as features; the styles are the best
 * hint placer's other entries that fit, fastest first, at most cap, and with all = 1 then the 8
 * fastest of the other placers' and the fastest of each of METIS's extra draws (at the seeds after
 * the problem's; a pick of one stands in METIS's row); bad picks are refused. */
static void test_hint_table(void **state) {
    (void)state;
    enum { NDEV = 3, NH = 7 };
    gopt_graph *g = small_graph();
    const gopt_frozen *fz = gopt_graph_frozen(g);
    const int n = fz->n;
    hint_env he;
    hint_env_init(&he, g, NDEV);
    gopt_costmodel *cm = he.cm;
    gopt_bl_problem p = he.p;
    gopt_error err = {0};
    gopt_go_hint_table t;
    assert_int_equal(gopt_go_hint_table_build(&p, 0, GOPT_GO_METIS_DRAWS, 1, &t, &err), GOPT_EINVAL);
    assert_null(t.d);
    assert_int_equal(gopt_go_hint_table_build(&p, NH, GOPT_GO_METIS_DRAWS, 1, &t, &err), GOPT_OK);
    assert_int_equal(t.nh, NH);
    assert_int_equal(t.nc, 5);
    assert_int_equal(t.draw_row, 2); /* metis */
    assert_string_equal(gopt_go_hint_placers[2], "metis");
    assert_int_equal(t.nrows, NH + GOPT_GO_METIS_DRAWS);
    const int NE = t.nrows * 5;
    /* each entry is its combination, judged by the evaluator; the extra rows METIS's at the seeds
     * after the problem's */
    gopt_bl_registry reg;
    gopt_bl_registry_init(&reg);
    for (int i = 0; i < NE; i++) {
        char spec[64];
        const int r = i / 5, x = r >= NH ? r - NH + 1 : 0;
        snprintf(spec, sizeof spec, "%s%s", gopt_go_hint_placers[x ? 2 : r], gopt_go_hint_combos[i % 5]);
        gopt_bl_combo c;
        gopt_decisions e = {0};
        gopt_bl_problem pe = p;
        pe.opt.seed = p.opt.seed + (uint64_t)x;
        assert_int_equal(gopt_bl_combo_parse(&reg, spec, &c, &err), GOPT_OK);
        assert_int_equal(gopt_bl_combo_decide(&reg, &c, &pe, &e, &err), GOPT_OK);
        int oom = 0;
        const double s = gopt_bl_evaluate(&pe, &e, &oom);
        assert_int_equal(t.found[i], 1);
        assert_true(t.step[i] == s);
        assert_memory_equal(t.d[i].device, e.device, sizeof(int32_t) * (size_t)n);
        assert_memory_equal(t.d[i].group, e.group, sizeof(int32_t) * (size_t)n);
        gopt_decisions_destroy(&e);
    }
    /* pick -1: the hints of gopt_go_hints */
    int32_t dev[NH * 8], dev2[NH * 8];
    float feat[8 * GOPT_POLICY_NHINT], feat2[8 * GOPT_POLICY_NHINT], q[NH], q2[NH];
    int have = 0, have2 = 0;
    assert_int_equal(gopt_go_hints(&p, NH, 1, dev, feat, NULL, q, &have, &err), GOPT_OK);
    assert_int_equal(gopt_go_hints_pick(&p, &t, -1, dev2, feat2, NULL, q2, &have2, &err), GOPT_OK);
    assert_int_equal(have2, have);
    assert_memory_equal(dev, dev2, sizeof dev);
    assert_memory_equal(feat, feat2, sizeof feat);
    assert_memory_equal(q, q2, sizeof q);
    /* the styles: the best hint placer's other entries, fastest first */
    int sty[8], bi = -1;
    for (int i = 0; i < NH * 5; i++)
        if (bi < 0 || t.step[i] < t.step[bi]) bi = i; /* the best hint: the first of the fastest */
    const int m = gopt_go_hint_styles(&t, 0, sty, 8);
    assert_int_equal(m, 4);
    for (int j = 0; j < m; j++) {
        assert_int_equal(sty[j] / 5, bi / 5);
        assert_int_not_equal(sty[j], bi);
        assert_true(t.step[sty[j]] >= t.step[bi]);
        if (j) assert_true(t.step[sty[j - 1]] < t.step[sty[j]] || (t.step[sty[j - 1]] == t.step[sty[j]] && sty[j - 1] < sty[j]));
        for (int k = 0; k < j; k++) assert_int_not_equal(sty[k], sty[j]);
    }
    int few[2];
    assert_int_equal(gopt_go_hint_styles(&t, 0, few, 2), 2);
    assert_memory_equal(few, sty, sizeof few);
    assert_int_equal(gopt_go_hint_styles(&t, 0, few, 0), 0);
    /* all = 1: those, then the 8 fastest entries of the other placers: every entry faster than
     * the slowest of them is a style */
    int wide[GOPT_GO_MAX_STYLES];
    const int mw = gopt_go_hint_styles(&t, 1, wide, GOPT_GO_MAX_STYLES);
    enum { W = 4 + GOPT_GO_WIDE_STYLES }; /* then each extra METIS draw's fastest entry */
    assert_int_equal(mw, W + GOPT_GO_METIS_DRAWS);
    assert_int_equal(GOPT_GO_MAX_STYLES, mw);
    assert_memory_equal(wide, sty, sizeof(int) * 4);
    for (int j = 4; j < W; j++) {
        assert_int_not_equal(wide[j] / 5, bi / 5);
        assert_true(wide[j] < NH * 5); /* the other placers' rows */
        if (j > 4) assert_true(t.step[wide[j - 1]] < t.step[wide[j]] || (t.step[wide[j - 1]] == t.step[wide[j]] && wide[j - 1] < wide[j]));
    }
    for (int i = 0; i < NH * 5; i++) {
        int in = i == bi;
        for (int j = 0; j < W; j++) in |= wide[j] == i;
        if (!in) assert_true(t.step[i] >= t.step[wide[W - 1]]);
    }
    for (int x = 0; x < GOPT_GO_METIS_DRAWS; x++) {
        const int e = wide[W + x], r = NH + x;
        assert_int_equal(e / 5, r);
        for (int c = 0; c < 5; c++) assert_true(t.step[e] < t.step[r * 5 + c] || (t.step[e] == t.step[r * 5 + c] && e <= r * 5 + c));
    }
    assert_int_equal(gopt_go_hint_styles(&t, 1, few, 2), 2); /* the cap keeps the best placer's first */
    assert_memory_equal(few, sty, sizeof few);
    int six[6];
    assert_int_equal(gopt_go_hint_styles(&t, 1, six, 6), 6);
    assert_memory_equal(six, wide, sizeof six);
    /* a conditioned pick, here another placer's slowest entry: it reads as the only best hint,
     * its features its own */
    int pick = -1;
    for (int i = 0; i < NH * 5; i++)
        if (i / 5 != bi / 5 && (pick < 0 || t.step[i] >= t.step[pick])) pick = i;
    const int ph = pick / 5;
    assert_int_equal(gopt_go_hints_pick(&p, &t, pick, dev2, feat2, NULL, q2, &have2, &err), GOPT_OK);
    assert_int_equal(have2, 1);
    for (int h = 0; h < NH; h++) {
        if (h == ph) assert_true(q2[h] == 1.0f);
        else assert_true(q2[h] > 0.0f && q2[h] < 1.0f);
    }
    const gopt_decisions *hp[NH];
    for (int h = 0; h < NH; h++) {
        int k = -1; /* placer h's fastest, the first on ties (gopt_go_hints' choice) */
        for (int c = 0; c < 5; c++)
            if (k < 0 || t.step[h * 5 + c] < t.step[k]) k = h * 5 + c;
        hp[h] = h == ph ? &t.d[pick] : &t.d[k];
    }
    int32_t wdev[NH * 8];
    float want[8 * GOPT_POLICY_NHINT];
    assert_int_equal(gopt_go_hints_from(fz, cm, p.cost, NDEV, NH, hp, &t.d[pick], wdev, want, NULL, &err), GOPT_OK);
    assert_memory_equal(feat2, want, sizeof want);
    assert_memory_equal(dev2, wdev, sizeof(int32_t) * (size_t)NH * (size_t)n);
    /* a pick among METIS's extra draws stands in METIS's row */
    int xp = -1;
    for (int i = NH * 5; i < NE; i++)
        if (t.step[i] < INFINITY) xp = i;
    assert_true(xp >= 0);
    assert_int_equal(gopt_go_hints_pick(&p, &t, xp, dev2, feat2, NULL, q2, &have2, &err), GOPT_OK);
    for (int h = 0; h < NH; h++) {
        int k = -1;
        for (int c = 0; c < 5; c++)
            if (k < 0 || t.step[h * 5 + c] < t.step[k]) k = h * 5 + c;
        hp[h] = h == 2 ? &t.d[xp] : &t.d[k];
        if (h == 2) assert_true(q2[h] == 1.0f);
        else assert_true(q2[h] < 1.0f);
    }
    assert_int_equal(gopt_go_hints_from(fz, cm, p.cost, NDEV, NH, hp, &t.d[xp], wdev, want, NULL, &err), GOPT_OK);
    assert_memory_equal(feat2, want, sizeof want);
    assert_memory_equal(dev2, wdev, sizeof(int32_t) * (size_t)NH * (size_t)n);
    assert_int_equal(gopt_go_hints_pick(&p, &t, NE, dev2, feat2, NULL, q2, &have2, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "combination 50 of 50"));
    gopt_go_hint_table_free(&t);
    gopt_go_hint_table_free(&t); /* twice is harmless */
    hint_env_free(&he);
    gopt_graph_free(g);
}

/* METIS's extra draws on a graph where the seed matters: each is METIS at the seed after the
 * problem's (so the table does not depend on anything but the problem), and some draw partitions
 * otherwise than the problem's seed does. */
static void test_hint_table_draws(void **state) {
    (void)state;
    enum { NDEV = 4, NH = 3 };
    gopt_graph *g = test_random_graph(120, 7, 0);
    const int n = gopt_graph_frozen(g)->n;
    hint_env he;
    hint_env_init(&he, g, NDEV);
    gopt_bl_problem p = he.p;
    p.opt.seed = 11;
    gopt_error err = {0};
    gopt_go_hint_table t;
    assert_int_equal(gopt_go_hint_table_build(&p, NH, GOPT_GO_METIS_DRAWS, 1, &t, &err), GOPT_OK);
    assert_int_equal(t.draw_row, 2);
    assert_int_equal(t.nrows, NH + GOPT_GO_METIS_DRAWS);
    gopt_bl_registry reg;
    gopt_bl_registry_init(&reg);
    int differ = 0;
    for (int x = 1; x <= GOPT_GO_METIS_DRAWS; x++) {
        gopt_bl_problem pe = p;
        pe.opt.seed = p.opt.seed + (uint64_t)x;
        gopt_bl_combo c;
        gopt_decisions e = {0};
        assert_int_equal(gopt_bl_combo_parse(&reg, "metis+cp+xla", &c, &err), GOPT_OK);
        assert_int_equal(gopt_bl_combo_decide(&reg, &c, &pe, &e, &err), GOPT_OK);
        const int i = (NH + x - 1) * t.nc; /* combination 0: +cp+xla */
        assert_int_equal(t.found[i], 1);
        assert_memory_equal(t.d[i].device, e.device, sizeof(int32_t) * (size_t)n);
        /* the same draw named by its seed suffix, on the problem at its own seed */
        char spec[32];
        snprintf(spec, sizeof spec, "metis+cp+xla@s%d", 11 + x);
        gopt_decisions es = {0};
        assert_int_equal(gopt_bl_combo_parse(&reg, spec, &c, &err), GOPT_OK);
        assert_int_equal(gopt_bl_combo_decide(&reg, &c, &p, &es, &err), GOPT_OK);
        assert_memory_equal(es.device, e.device, sizeof(int32_t) * (size_t)n);
        assert_memory_equal(es.priority, e.priority, sizeof(int32_t) * (size_t)n);
        assert_memory_equal(es.group, e.group, sizeof(int32_t) * (size_t)n);
        gopt_decisions_destroy(&es);
        differ |= memcmp(t.d[i].device, t.d[2 * t.nc].device, sizeof(int32_t) * (size_t)n) != 0;
        gopt_decisions_destroy(&e);
    }
    assert_true(differ); /* the seed reaches METIS: another draw, another partition */
    /* with fewer hints than METIS's row, no extra draws; none asked for, none; a bad count refused */
    gopt_go_hint_table t2;
    assert_int_equal(gopt_go_hint_table_build(&p, 2, GOPT_GO_METIS_DRAWS, 1, &t2, &err), GOPT_OK);
    assert_int_equal(t2.draw_row, -1);
    assert_int_equal(t2.nrows, 2);
    gopt_go_hint_table_free(&t2);
    assert_int_equal(gopt_go_hint_table_build(&p, NH, 0, 1, &t2, &err), GOPT_OK);
    assert_int_equal(t2.draw_row, 2);
    assert_int_equal(t2.nrows, NH);
    for (int i = 0; i < NH * t2.nc; i++) { /* the same rows as with the draws */
        assert_true(t2.step[i] == t.step[i]);
        assert_memory_equal(t2.d[i].device, t.d[i].device, sizeof(int32_t) * (size_t)n);
    }
    gopt_go_hint_table_free(&t2);
    assert_int_equal(gopt_go_hint_table_build(&p, NH, GOPT_GO_METIS_DRAWS + 1, 1, &t2, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "METIS draws"));
    assert_null(t2.d);
    assert_int_equal(gopt_go_hint_table_build(&p, NH, -1, 1, &t2, &err), GOPT_EINVAL);
    gopt_go_hint_table_free(&t);
    hint_env_free(&he);
    gopt_graph_free(g);
}

/* Each entry of the table is its combination run alone; the table on several threads is the
 * table on one: every entry's decisions and step, METIS's
 * draws among them (its calls take turns), also when the caller's problem has a random stream
 * (no combination of the table draws from it). */
static void test_hint_table_threads(void **state) {
    (void)state;
    enum { NDEV = 4, NH = 7 };
    gopt_graph *g = test_random_graph(150, 9, 0);
    const size_t n = (size_t)gopt_graph_frozen(g)->n;
    hint_env he;
    hint_env_init(&he, g, NDEV);
    gopt_error err = {0};
    gopt_go_hint_table t1, tk;
    assert_int_equal(gopt_go_hint_table_build(&he.p, NH, GOPT_GO_METIS_DRAWS, 1, &t1, &err), GOPT_OK);
    /* each entry is its combination run alone (the table keeps each placer's first answer for the
     * row's other combinations: the same decisions) */
    gopt_bl_registry reg;
    gopt_bl_registry_init(&reg);
    for (int i = 0; i < t1.nrows * t1.nc; i++) {
        const int r = i / t1.nc;
        char spec[96];
        snprintf(spec, sizeof spec, "%s%s", gopt_go_hint_placers[r < NH ? r : t1.draw_row], gopt_go_hint_combos[i % t1.nc]);
        if (r >= NH) snprintf(spec + strlen(spec), sizeof spec - strlen(spec), "@s%d", 1 + 1 + (r - NH));
        gopt_bl_combo c;
        gopt_decisions e = {0};
        assert_int_equal(gopt_bl_combo_parse(&reg, spec, &c, &err), GOPT_OK);
        gopt_status st = gopt_bl_combo_decide(&reg, &c, &he.p, &e, &err);
        assert_int_equal(st == GOPT_OK, t1.found[i]);
        if (t1.found[i]) {
            assert_memory_equal(e.device, t1.d[i].device, sizeof(int32_t) * n);
            assert_memory_equal(e.priority, t1.d[i].priority, sizeof(int32_t) * n);
            assert_memory_equal(e.group, t1.d[i].group, sizeof(int32_t) * n);
            /* its step, simulated once in the table (the run's own check), as simulating it again */
            int oom = 0;
            double s = gopt_bl_evaluate(&he.p, &e, &oom);
            if (oom || !(s > 0) || !isfinite(s)) s = INFINITY;
            assert_true(s == t1.step[i] || (isinf(s) && isinf(t1.step[i])));
        }
        gopt_decisions_destroy(&e);
    }
    gopt_rng rng;
    gopt_rng_seed(&rng, 5);
    for (int pass = 0; pass < 3; pass++) {
        gopt_bl_problem p = he.p;
        if (pass == 2) p.rng = &rng;
        assert_int_equal(gopt_go_hint_table_build(&p, NH, GOPT_GO_METIS_DRAWS, pass ? 3 : 2, &tk, &err), GOPT_OK);
        assert_int_equal(tk.nrows, t1.nrows);
        int found = 0;
        for (int i = 0; i < t1.nrows * t1.nc; i++) {
            assert_int_equal(tk.found[i], t1.found[i]);
            assert_true(tk.step[i] == t1.step[i] || (isinf(tk.step[i]) && isinf(t1.step[i])));
            if (!t1.found[i]) continue;
            found++;
            assert_memory_equal(tk.d[i].device, t1.d[i].device, sizeof(int32_t) * n);
            assert_memory_equal(tk.d[i].priority, t1.d[i].priority, sizeof(int32_t) * n);
            assert_memory_equal(tk.d[i].group, t1.d[i].group, sizeof(int32_t) * n);
        }
        assert_true(found > 20);
        gopt_go_hint_table_free(&tk);
    }
    gopt_go_hint_table_free(&t1);
    hint_env_free(&he);
    gopt_graph_free(g);
}

/* Imitation with a hinted policy: the target is the best reference baseline, here the hint's
 * own method (the only reference), so after a few steps greedy placement equals the target.
 * With hint_quality the trainer keeps the hints' quality too. */
static void trainer_uses_hints(int hq) {
    enum { NDEV = 2 };
    gopt_profile *prof = test_profile_uniform(NDEV, 1e12, 1e11, "test_hints");
    gopt_costmodel *cm = NULL;
    gopt_error err = {0};
    assert_int_equal(gopt_cost_create(prof, NDEV, &cm, NULL), GOPT_OK);
    gopt_policy_config c;
    gopt_policy_config_default(&c);
    c.hidden = 8, c.sage_layers = 1, c.attn_layers = 1, c.heads = 2, c.segment = 4, c.ffn_mult = 1;
    c.max_devices = NDEV, c.sched_levels = 3, c.fusion_levels = 2, c.cond_hidden = 4, c.hints = 2;
    c.hint_quality = hq;
    gopt_policy *pol = NULL;
    assert_int_equal(gopt_policy_create(&pol, &c, 1, &err), GOPT_OK);
    gopt_trainer_options o;
    gopt_trainer_options_default(&o);
    o.reference = GOPT_GO_HINT_METHOD;
    o.imitate_steps = 60;
    o.sim_threads = 1;
    o.tasks = GOPT_TASK_BIT(GOPT_TASK_PLACE);
    gopt_trainer *t = NULL;
    assert_int_equal(gopt_trainer_create(&t, pol, cm, &o, &err), GOPT_OK);
    assert_int_equal(gopt_trainer_add_graph(t, small_graph(), 0, &err), GOPT_OK);
    gopt_trainer_stats st;
    for (int i = 0; i < 60; i++) assert_int_equal(gopt_trainer_step(t, &st, &err), GOPT_OK);
    assert_float_equal(st.imitate_acc[GOPT_TASK_PLACE], 1.0, 1e-12);
    /* the trainer built the graph's hints once, from the hint method: equal to its own run */
    const tr_graph *G = &t->graphs[0];
    assert_int_equal(G->hint_state, 1);
    tr_hot *H = NULL;
    assert_int_equal(tr_hot_get(t, 0, &H, &err), GOPT_OK);
    assert_non_null(G->hint_dev);
    gopt_bl_problem p;
    gopt_bl_sim_ctx ctx;
    gopt_bl_options opt = {0};
    opt.seed = o.seed; /* as the trainer runs the methods */
    gopt_bl_problem_on_sim(&p, &ctx, H->sim, H->scratch[0], cm, &opt);
    int32_t dev[2 * 8];
    float feat[8 * GOPT_POLICY_NHINT];
    float q[2] = {0};
    int have = 0;
    assert_int_equal(gopt_go_hints(&p, 2, 1, dev, feat, NULL, hq ? q : NULL, &have, &err), GOPT_OK);
    assert_int_equal(have, 1);
    assert_memory_equal(dev, G->hint_dev, sizeof dev);
    assert_memory_equal(feat, G->hint_feat, sizeof feat);
    if (hq) {
        assert_memory_equal(q, G->hint_q, sizeof q);
        assert_true(q[0] == 1.0f || q[1] == 1.0f);
    }
    gopt_trainer_free(t);
    gopt_policy_free(pol);
    gopt_cost_free(cm);
    gopt_profile_free(prof);
}
/* gopt_trainer_greedy with greedy_styles (gopt finetune's: all): the graph keeps its hint table,
 * the answer is never slower than without the styles (own), all never slower than best, and the
 * graph's own hints are set again after (the same answer twice). */
static void test_trainer_greedy_styles(void **state) {
    (void)state;
    enum { NDEV = 3 };
    gopt_profile *prof = test_profile_uniform(NDEV, 1e12, 1e9, "test_hints");
    gopt_costmodel *cm = NULL;
    gopt_error err = {0};
    assert_int_equal(gopt_cost_create(prof, NDEV, &cm, NULL), GOPT_OK);
    gopt_policy_config c;
    gopt_policy_config_default(&c);
    c.hidden = 8, c.sage_layers = 1, c.attn_layers = 1, c.heads = 2, c.segment = 4, c.ffn_mult = 1;
    c.max_devices = NDEV, c.sched_levels = 3, c.fusion_levels = 3, c.cond_hidden = 4, c.hints = 7;
    c.hint_quality = 1;
    double step[3];
    const int mode[3] = {GOPT_GO_STYLES_OWN, GOPT_GO_STYLES_BEST, GOPT_GO_STYLES_ALL};
    for (int on = 0; on < 3; on++) {
        gopt_policy *pol = NULL;
        assert_int_equal(gopt_policy_create(&pol, &c, 3, &err), GOPT_OK);
        gopt_trainer_options o;
        gopt_trainer_options_default(&o);
        o.reference = GOPT_GO_HINT_METHOD;
        o.sim_threads = 1;
        o.greedy_styles = mode[on];
        gopt_trainer *t = NULL;
        assert_int_equal(gopt_trainer_create(&t, pol, cm, &o, &err), GOPT_OK);
        assert_int_equal(gopt_trainer_add_graph(t, small_graph(), 0, &err), GOPT_OK);
        gopt_decisions d1 = {0}, d2 = {0};
        gopt_sim_result r1, r2;
        assert_int_equal(gopt_decisions_init(&d1, 8, &err), GOPT_OK);
        assert_int_equal(gopt_decisions_init(&d2, 8, &err), GOPT_OK);
        assert_int_equal(gopt_trainer_greedy(t, 0, &d1, &r1, &err), GOPT_OK);
        const tr_graph *G = &t->graphs[0];
        if (on) {
            assert_non_null(G->hint_table);
            assert_int_equal(G->hint_table->nh * G->hint_table->nc, 35);
        } else {
            assert_null(G->hint_table);
        }
        assert_int_equal(gopt_trainer_greedy(t, 0, &d2, &r2, &err), GOPT_OK);
        assert_memory_equal(d1.device, d2.device, sizeof(int32_t) * 8);
        assert_memory_equal(d1.group, d2.group, sizeof(int32_t) * 8);
        assert_true(r1.step_time_s == r2.step_time_s);
        assert_false(r1.oom);
        /* the answer counts toward the best found, whichever pass gave it (the hint pass's apart:
         * never the incumbent of the search) */
        const gopt_decisions *bd = NULL;
        assert_true(gopt_trainer_best(t, 0, &bd) == r1.step_time_s);
        assert_non_null(bd);
        assert_memory_equal(bd->group, d1.group, sizeof(int32_t) * 8);
        assert_true(G->best >= r1.step_time_s && (G->best == r1.step_time_s || G->alt == r1.step_time_s));
        step[on] = r1.step_time_s;
        gopt_decisions_destroy(&d1);
        gopt_decisions_destroy(&d2);
        gopt_trainer_free(t);
        gopt_policy_free(pol);
    }
    assert_true(step[1] <= step[0]);
    assert_true(step[2] <= step[1]);
    gopt_cost_free(cm);
    gopt_profile_free(prof);
}

/* gopt_go_hint_refs_missing: the hint combinations a reference list lacks, compared as parsed
 * combinations (parts in any order; names that do not parse are absent). */
static void test_hint_refs_missing(void **state) {
    (void)state;
    char all[2048] = "", first[64];
    for (int h = 0; gopt_go_hint_placers[h]; h++)
        for (int c = 0; gopt_go_hint_combos[c]; c++) {
            if (all[0]) strcat(all, ",");
            strcat(all, gopt_go_hint_placers[h]);
            strcat(all, gopt_go_hint_combos[c]);
        }
    assert_int_equal(gopt_go_hint_refs_missing(all, 7, first, sizeof first), 0);
    assert_string_equal(first, "");
    /* the XLA-only references of go-hintlevel's recipe: TVM and xlamo missing for every placer */
    const char *xla = "heft+cp+xla,heft+fifo+xla,metf+cp+xla,metf+fifo+xla,metis+cp+xla,metis+fifo+xla,"
                      "expert+cp+xla,expert+fifo+xla,msct+cp+xla,msct+fifo+xla,mtopo+cp+xla,mtopo+fifo+xla,"
                      "single+cp+xla,single+fifo+xla";
    assert_int_equal(gopt_go_hint_refs_missing(xla, 7, first, sizeof first), 21);
    assert_string_equal(first, "heft+cp+tvm");
    assert_int_equal(gopt_go_hint_refs_missing(xla, 1, NULL, 0), 3); /* HEFT's hint only */
    /* the parts in another order are the same combination; a bad name is no combination */
    assert_int_equal(gopt_go_hint_refs_missing("xla+heft+cp,heft+fifo+xla,tvm+cp+heft,heft+cp+xlamo,"
                                               "heft+nosuch,heft+xlamo+fifo",
                                               1, first, sizeof first),
                     0);
    assert_int_equal(gopt_go_hint_refs_missing("heft+nosuch", 1, first, sizeof first), 5);
    assert_string_equal(first, "heft+cp+xla");
    assert_int_equal(gopt_go_hint_refs_missing("", 2, first, sizeof first), 10);
    /* gopt_go_hint_references: the list that lacks none of them (gopt finetune's default) */
    char list[1024];
    const size_t len = gopt_go_hint_references(7, list, sizeof list);
    assert_int_equal(len, strlen(list));
    assert_int_equal(gopt_go_hint_refs_missing(list, 7, first, sizeof first), 0);
    int names = 1;
    for (const char *q = list; *q; q++) names += *q == ',';
    assert_int_equal(names, 35);
    assert_memory_equal(list, "heft+cp+xla,metf+cp+xla,", 24);
    assert_int_equal(gopt_go_hint_references(1, list, sizeof list), strlen("heft+cp+xla,heft+fifo+xla,heft+cp+tvm,"
                                                                            "heft+cp+xlamo,heft+fifo+xlamo"));
    assert_int_equal(gopt_go_hint_references(7, list, 100), 0); /* does not fit */
    assert_string_equal(list, "");
}

static void test_trainer_uses_hints(void **state) {
    (void)state;
    trainer_uses_hints(0);
}
static void test_trainer_uses_hint_quality(void **state) {
    (void)state;
    trainer_uses_hints(1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hints_from),
        cmocka_unit_test(test_hints_quality),
        cmocka_unit_test(test_hint_table),
        cmocka_unit_test(test_hint_table_draws),
        cmocka_unit_test(test_hint_table_threads),
        cmocka_unit_test(test_hint_refs_missing),
        cmocka_unit_test(test_trainer_uses_hints),
        cmocka_unit_test(test_trainer_uses_hint_quality),
        cmocka_unit_test(test_trainer_greedy_styles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
