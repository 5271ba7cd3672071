/* bench/decide.c: how long `gopt optimize G --method go` takes on a large graph, and how much of
 * it is the classical combinations GO reads as hints.
 *
 * Usage: bench_decide [--graph FILE] [--profile P] [--devices N] [--threads T] [--reps R]
 *
 * The graph (default: the zoo's GNMT with 8 layers, batch 128, 120 steps: 74,993 nodes) on N
 * devices of P (default profiles/v100-dgx1-x8.json, 8), the shipped checkpoint, gopt_go_decide's
 * defaults (greedy, every style). Printed, each the fastest of R runs (default 1):
 *  - the hint table: the 50 classical combinations GO reads (7 placers and 3 more METIS draws x
 *    5 schedule+fusion combinations, each placer run once per row, each combination simulated;
 *    gopt_go_hint_table_build) on one
 *    thread and on T (default 2), the speedup, and whether both tables are the same;
 *  - the whole decision (gopt_go_decide) on one thread and on T, the speedup, and whether both
 *    decisions are the same; the rest of it (decision - table on T threads: the network, the
 *    decodes and each candidate's judging) against the 1 s target of the network's decode.
 * The reference is the table itself: GO's decision costs the portfolio run a user would make to
 * pick the best classical combination, plus the rest.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gopt_baselines.h"
#include "gopt_common.h"
#include "gopt_graph.h"
#include "gopt_profile.h"
#include "gopt_trainer.h"
#include "gopt_zoo.h"

static void die(const char *what, const gopt_error *err) {
    fprintf(stderr, "bench_decide: %s: %s\n", what, err->msg);
    exit(2);
}

static int usage(FILE *out) {
    fprintf(out, "usage: bench_decide [--graph FILE] [--profile P] [--devices N] [--threads T] [--reps R]\n");
    return 2;
}

static int same_decisions(const gopt_decisions *a, const gopt_decisions *b) {
    size_t s = sizeof(int32_t) * (size_t)a->n;
    return a->n == b->n && !memcmp(a->device, b->device, s) && !memcmp(a->priority, b->priority, s) &&
           !memcmp(a->group, b->group, s);
}

static int same_table(const gopt_go_hint_table *a, const gopt_go_hint_table *b) {
    if (a->nrows != b->nrows || a->nc != b->nc) return 0;
    for (int i = 0; i < a->nrows * a->nc; i++) {
        if (a->found[i] != b->found[i] || memcmp(&a->step[i], &b->step[i], sizeof(double))) return 0;
        if (a->found[i] && !same_decisions(&a->d[i], &b->d[i])) return 0;
    }
    return 1;
}

int main(int argc, char **argv) {
    const char *graph = NULL, *profile = GOPT_SOURCE_DIR "/profiles/v100-dgx1-x8.json";
    long ndev = 8, threads = 2, reps = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) return usage(stderr);
        const char *v = argv[++i];
        char *end = NULL;
        if (!strcmp(a, "--graph")) graph = v;
        else if (!strcmp(a, "--profile")) profile = v;
        else if (!strcmp(a, "--devices") || !strcmp(a, "--threads") || !strcmp(a, "--reps")) {
            long x = strtol(v, &end, 10);
            if (!*v || *end || x < 1 || x > 64) {
                fprintf(stderr, "bench_decide: %s: '%s' is not an integer in 1..64\n", a, v);
                return 2;
            }
            *(!strcmp(a, "--devices") ? &ndev : !strcmp(a, "--threads") ? &threads : &reps) = x;
        } else {
            fprintf(stderr, "bench_decide: unknown option '%s'\n", a);
            return usage(stderr);
        }
    }
    gopt_error err = {0};
    gopt_graph *g = NULL;
    if (graph) {
        if (gopt_graph_load(graph, &g, &err)) die("--graph", &err);
    } else {
        gopt_zoo_spec spec = {"gnmt", 8, 128, 120, GOPT_OPTIM_ADAM, 0};
        if (gopt_zoo_generate(&spec, &g, &err)) die("zoo gnmt", &err);
    }
    gopt_profile *prof = NULL;
    gopt_costmodel *cm = NULL;
    gopt_sim *sim = NULL;
    gopt_sim_scratch *scr = NULL;
    if (gopt_profile_load(profile, &prof, &err)) die("--profile", &err);
    if (gopt_cost_create(prof, (int)ndev, &cm, &err)) die("--devices", &err);
    if (gopt_sim_create(g, cm, &sim, &err) || gopt_sim_scratch_create(sim, &scr, &err)) die("simulator", &err);
    gopt_bl_options opt = {0};
    opt.seed = 1;
    gopt_bl_sim_ctx ctx;
    gopt_bl_problem p;
    gopt_bl_problem_on_sim(&p, &ctx, sim, scr, cm, &opt);
    const int32_t n = gopt_graph_frozen(g)->n;
    const char *ckpt = gopt_trainer_default_checkpoint();
    static char path[4096];
    if (ckpt[0] != '/') snprintf(path, sizeof path, "%s/%s", GOPT_SOURCE_DIR, ckpt), ckpt = path;
    printf("bench_decide: %s, %d nodes, %ld devices of %s, checkpoint %s, fastest of %ld\n", gopt_graph_name(g), n,
           ndev, gopt_profile_name(prof), ckpt, reps);
    fflush(stdout);

    /* the hint table: the combinations GO reads, on one thread and on T */
    const int T[2] = {1, (int)threads};
    double tab_s[2] = {INFINITY, INFINITY}, dec_s[2] = {INFINITY, INFINITY};
    gopt_go_hint_table tab[2];
    memset(tab, 0, sizeof tab);
    int nh = 0; /* every hint placer, as the shipped checkpoint reads */
    while (nh < GOPT_POLICY_MAX_HINTS && gopt_go_hint_placers[nh]) nh++;
    for (int k = 0; k < 2; k++)
        for (long r = 0; r < reps; r++) {
            gopt_go_hint_table_free(&tab[k]);
            double t0 = gopt_now_seconds();
            if (gopt_go_hint_table_build(&p, nh, GOPT_GO_METIS_DRAWS, T[k], &tab[k], &err))
                die("hint table", &err);
            double s = gopt_now_seconds() - t0;
            if (s < tab_s[k]) tab_s[k] = s;
        }
    const int ne = tab[0].nrows * tab[0].nc;
    const int tsame = same_table(&tab[0], &tab[1]);
    printf("hint table (%d combinations run and simulated): 1 thread %.2f s, %d threads %.2f s: %.2fx; same table: %s\n",
           ne, tab_s[0], T[1], tab_s[1], tab_s[0] / tab_s[1], tsame ? "yes" : "NO");
    fflush(stdout);

    /* the whole decision */
    gopt_decisions d[2];
    memset(d, 0, sizeof d);
    double step = 0;
    for (int k = 0; k < 2; k++)
        for (long r = 0; r < reps; r++) {
            gopt_decisions_destroy(&d[k]);
            if (gopt_decisions_init(&d[k], n, &err)) die("decisions", &err);
            gopt_decisions_set_default(&d[k], gopt_graph_frozen(g));
            gopt_go_options o = {0};
            o.checkpoint = ckpt;
            o.threads = T[k];
            double t0 = gopt_now_seconds();
            if (gopt_go_decide(&o, &p, &d[k], &err)) die("go", &err);
            double s = gopt_now_seconds() - t0;
            if (s < dec_s[k]) dec_s[k] = s;
            int oom = 0;
            step = gopt_bl_evaluate(&p, &d[k], &oom);
        }
    const int dsame = same_decisions(&d[0], &d[1]);
    printf("whole decision (gopt_go_decide, greedy, every style): 1 thread %.2f s, %d threads %.2f s: %.2fx; same "
           "decisions: %s; step %.3f ms\n",
           dec_s[0], T[1], dec_s[1], dec_s[0] / dec_s[1], dsame ? "yes" : "NO", step * 1e3);
    const double rest = dec_s[1] - tab_s[1];
    printf("on %d threads: the table %.2f s (%.0f%%), the rest (network, decodes, judging) %.2f s; "
           "decision / table %.2fx\n",
           T[1], tab_s[1], 100 * tab_s[1] / dec_s[1], rest, dec_s[1] / tab_s[1]);
    printf("whole decision < 1 s: %s (%.2f s on %d threads)\n", dec_s[1] < 1 ? "met" : "missed", dec_s[1], T[1]);
    for (int k = 0; k < 2; k++) {
        gopt_go_hint_table_free(&tab[k]);
        gopt_decisions_destroy(&d[k]);
    }
    gopt_sim_scratch_free(scr);
    gopt_sim_free(sim);
    gopt_cost_free(cm);
    gopt_profile_free(prof);
    gopt_graph_free(g);
    return tsame && dsame ? 0 : 1;
}
