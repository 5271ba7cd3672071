/* gopt.c: the gopt command: one binary, verbs dispatched from a table.
 * Exit codes: 0 ok, 2 bad input or usage, 1 internal error. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} verb;

static const verb VERBS[] = {
    {"graph", cmd_graph, "inspect, convert, draw and generate computation graphs"},
    {"profile", cmd_profile, "show device profiles; calibrate this machine (CPU, CUDA) into one"},
    {"cost", cmd_cost, "predicted per-op times of a graph on a profile's devices"},
    {"sim", cmd_sim, "simulate a training step under placement, scheduling and fusion decisions"},
    {"optimize", cmd_optimize, "decide placement, priorities and fusion with a classical method"},
    {"compare", cmd_compare, "table of simulated step times: graphs x classical methods"},
    {"train", cmd_train, "train the GO policy with PPO on the simulator over many graphs (resumable)"},
    {"finetune", cmd_finetune, "fine-tune a trained GO policy on one graph"},
    {"run", cmd_run, "execute a training step for real (CPU threads, CUDA GPUs) under decisions and measure it"},
    {"validate", cmd_validate, "the simulator against real runs: step errors and rank correlation per method"},
    {"plot", cmd_plot, "draw learning curves (SVG) from training metrics"},
};
#define NVERBS (sizeof VERBS / sizeof VERBS[0])

static void usage(FILE *f) {
    fprintf(f, "gopt %s: learned device placement, scheduling and fusion for ML computation graphs\n\n"
               "Usage: gopt VERB [ARGS...]\n\nVerbs:\n",
            GOPT_VERSION);
    for (size_t i = 0; i < NVERBS; i++) fprintf(f, "  %-10s %s\n", VERBS[i].name, VERBS[i].summary);
    fprintf(f, "\nRun 'gopt VERB --help' for a verb's options. Exit codes: 0 ok, 2 bad input or usage, 1 internal "
               "error.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (cli_is_help(argv[1])) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("gopt %s\n", GOPT_VERSION);
        return 0;
    }
    for (size_t i = 0; i < NVERBS; i++)
        if (strcmp(argv[1], VERBS[i].name) == 0) return VERBS[i].run(argc - 2, argv + 2);
    fprintf(stderr, "gopt: unknown verb '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
