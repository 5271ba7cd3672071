/* cli_go.c: the `go` method hook for the optimizer registry (cli_go.h). */
#include "cli_go.h"

#include "gopt_trainer.h"

static gopt_go_options g_go = {NULL, 0, 1, NULL, 1.0f, GOPT_GO_TIES_BEST, GOPT_GO_THREADS, GOPT_GO_PASS_BEST, 0};

static gopt_status go_decide(const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err) {
    return gopt_go_decide(&g_go, p, d, err);
}

gopt_status cli_go_register(gopt_bl_registry *r, gopt_error *err) {
    static const gopt_bl_method m = {"go", GOPT_BL_JOINT, go_decide,
                                     "GO policy: trained network, greedy or best of --samples K (--checkpoint C)"};
    return gopt_bl_registry_add(r, &m, err);
}

/* Option name with a value that parse maps to an enum (-1: refused, naming the choices). */
static int enum_opt(cli_args *a, const char *name, int (*parse)(const char *), const char *choices, int *out) {
    const char *v = NULL;
    if (!cli_opt_str(a, name, &v)) return 0;
    if (a->bad) return 1;
    const int e = parse(v);
    if (e < 0) {
        cli_usage_error(a->verb, "option %s: '%s' is not %s", name, v, choices);
        a->bad = 1;
    } else {
        *out = e;
    }
    return 1;
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
    if (enum_opt(a, "--go-ties", gopt_go_ties_parse, "best, cp or topo", &g_go.ties) ||
        enum_opt(a, "--go-fusion-pass", gopt_go_pass_parse, "best, free, merge, first or hint", &g_go.fusion_pass) ||
        enum_opt(a, "--go-styles", gopt_go_styles_parse, "all, best or own", &g_go.styles))
        return 1;
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
               "  --go-fusion-pass best|free|merge|first|hint  method go: the pass that turns fusion levels\n"
               "                    into groups: merging (merge, as in training), first-fit (first), merging\n"
               "                    within the hint combination's groups (hint: the levels choose which of\n"
               "                    its fusions to take), each candidate judged under merge and first (free)\n"
               "                    or under all three (best, the default), the fastest kept\n"
               "  --go-styles all|best|own  method go: with a checkpoint that reads hint quality, also\n"
               "                    decode with other classical combinations (placement x schedule x\n"
               "                    fusion) read as the best hint and keep the fastest: the best hint\n"
               "                    placer's other schedules and fusions and the 8 fastest of the other\n"
               "                    placers' (all, the default), the best hint placer's alone (best), or\n"
               "                    none: the best hint alone (own)\n"
               "  --go-threads N    method go: threads of the network on the CPU, of the classical\n"
               "                    combinations read as hints and of each candidate's judging (default %d;\n"
               "                    the decisions are the same on any count)\n"
               "  --device cpu|cuda method go: where the network runs (default cpu; cuda: the first GPU)\n",
            GOPT_GO_THREADS);
}
