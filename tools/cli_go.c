/* cli_go.c: the `go` method hook for the optimizer registry (cli_go.h). */
#include "cli_go.h"

#include "gopt_trainer.h"

static gopt_go_options g_go = {NULL, 0, 1, NULL, 1.0f, GOPT_GO_TIES_BEST, GOPT_GO_THREADS, GOPT_GO_PASS_BEST};

static gopt_status go_decide(const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err) {
    return gopt_go_decide(&g_go, p, d, err);
}

gopt_status cli_go_register(gopt_bl_registry *r, gopt_error *err) {
    static const gopt_bl_method m = {"go", GOPT_BL_JOINT, go_decide,
                                     "GO policy: trained network, greedy or best of --samples K (--checkpoint C)"};
    return gopt_bl_registry_add(r, &m, err);
}

int cli_go_option(cli_args *a) {
    long k, s;
    double t;
    if (cli_opt_str(a, "--checkpoint", &g_go.checkpoint) || cli_opt_str(a, "--device", &g_go.device)) return 1;
    if (cli_opt_long(a, "--samples", &k, 0, 4096)) {
        if (!a->bad) g_go.samples = (int)k;
        return 1;
    }
    if (cli_opt_double(a, "--temperature", &t, 0.05, 100.0)) {
        if (!a->bad) g_go.temperature = (float)t;
        return 1;
    }
    const char *ties = NULL;
    if (cli_opt_str(a, "--go-ties", &ties)) {
        if (a->bad) return 1;
        const int tv = gopt_go_ties_parse(ties);
        if (tv < 0) {
            cli_usage_error(a->verb, "option --go-ties: '%s' is not best, cp or topo", ties);
            a->bad = 1;
        } else {
            g_go.ties = tv;
        }
        return 1;
    }
    const char *fp = NULL;
    if (cli_opt_str(a, "--go-fusion-pass", &fp)) {
        if (a->bad) return 1;
        const int pv = gopt_go_pass_parse(fp);
        if (pv < 0) {
            cli_usage_error(a->verb, "option --go-fusion-pass: '%s' is not best, merge or first", fp);
            a->bad = 1;
        } else {
            g_go.fusion_pass = pv;
        }
        return 1;
    }
    if (cli_opt_long(a, "--go-seed", &s, 0, 0x7fffffffL)) {
        if (!a->bad) g_go.seed = (uint64_t)s;
        return 1;
    }
    if (cli_opt_long(a, "--go-threads", &k, 1, GOPT_POLICY_MAX_THREADS)) {
        if (!a->bad) g_go.threads = (int)k;
        return 1;
    }
    return 0;
}

void cli_go_usage(FILE *f) {
    fprintf(f, "  --checkpoint C    method go: trained policy (default: the shipped pre-trained checkpoint)\n"
               "  --samples K       method go: best of the greedy solution and K samples (default 0: greedy)\n"
               "  --temperature T   method go: the samples' temperature, 0.05..100 (default 1: the policy's own\n"
               "                    distribution; above 1 samples stray further from greedy)\n"
               "  --go-seed S       method go: sampling seed (default 1)\n"
               "  --go-ties best|cp|topo  method go: order within a priority level: the critical path (cp, as\n"
               "                    in training), topological (topo), or each candidate judged under both and\n"
               "                    the faster kept (best, the default)\n"
               "  --go-fusion-pass best|merge|first  method go: the pass that turns fusion levels into groups:\n"
               "                    merging (merge, as in training), first-fit (first), or each candidate\n"
               "                    judged under both and the faster kept (best, the default)\n"
               "  --go-threads N    method go: threads of the network on the CPU (default %d; the decisions\n"
               "                    are the same on any count)\n"
               "  --device cpu|cuda method go: where the network runs (default cpu; cuda: the first GPU)\n",
            GOPT_GO_THREADS);
}
