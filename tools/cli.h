/* cli.h: argument helpers shared by the gopt verbs.
 *
 * Options are "--name VALUE" or "--name=VALUE"; every verb answers --help.
 * Usage errors print "gopt VERB: message" and a hint, and give exit code 2;
 * library errors print their message and map through gopt_status_exit_code. */
#ifndef GOPT_CLI_H
#define GOPT_CLI_H

#include "gopt_common.h"
#include "gopt_cost.h"

/* Exit code of a command the machine or build cannot serve (a CUDA request without a GPU): not an
 * input error (2), so that scripts and ctest can skip rather than fail. */
#define GOPT_EXIT_NO_DEVICE 3

typedef struct {
    int argc;
    char **argv;
    int i;            /* next argument to look at */
    const char *verb; /* "graph info", for messages */
    int bad;          /* set when an option value was malformed (message printed) */
} cli_args;

void cli_init(cli_args *a, int argc, char **argv, const char *verb);
int cli_is_help(const char *arg);
/* Whether any argument is -h/--help. */
int cli_wants_help(int argc, char **argv);
/* If the current argument is `name`, consume it and return 1. */
int cli_flag(cli_args *a, const char *name);
/* If the current argument is `name` (with a value), consume both and return 1. */
int cli_opt_str(cli_args *a, const char *name, const char **out);
int cli_opt_long(cli_args *a, const char *name, long *out, long min, long max);
int cli_opt_double(cli_args *a, const char *name, double *out, double min, double max);
/* The current argument as the verb's one positional argument: stored in
 * *slot when that is still empty. An unknown option or a second positional
 * prints its message and returns 2; 0 when consumed. */
int cli_positional(cli_args *a, const char **slot);
/* Print "gopt VERB: message" and the --help hint; returns 2. */
int cli_usage_error(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Print a library error; returns its exit code. */
int cli_report(const gopt_error *err);
/* Whether stderr is a terminal (progress bars only then). */
int cli_stderr_is_tty(void);

/* A verb's subcommands (`gopt graph info`): dispatch by name, with --help
 * anywhere printing `usage` to stdout (exit 0); a missing or unknown
 * subcommand prints it to stderr (exit 2). */
typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
} cli_subverb;
int cli_dispatch(const char *verb, const cli_subverb *subs, size_t nsubs, void (*usage)(FILE *), int argc,
                 char **argv);

/* Load the profile at `path`, check it has at least ndev devices (0 = all),
 * and build its cost model over the first ndev. On failure prints the error
 * and returns the exit code (nothing to free); 0 on success. */
int cli_open_cluster(const char *verb, const char *path, long ndev, gopt_profile **p, gopt_costmodel **cm);
/* Load the graph at `file`, then cli_open_cluster: what the single-graph verbs (cost, sim,
 * optimize) start with. Same contract: on failure the error is printed, nothing is left to free,
 * and the exit code is returned; 0 on success. */
int cli_open_graph_cluster(const char *verb, const char *file, const char *profile, long ndev, gopt_graph **g,
                           gopt_profile **p, gopt_costmodel **cm);

/* The verbs. Each returns the process exit code. */
int cmd_graph(int argc, char **argv);
int cmd_profile(int argc, char **argv);
int cmd_cost(int argc, char **argv);
int cmd_sim(int argc, char **argv);
int cmd_optimize(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_finetune(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_run(int argc, char **argv);      /* cmd_run.c */
int cmd_validate(int argc, char **argv); /* cmd_validate.c */
int graph_gen(int argc, char **argv); /* `gopt graph gen` (cmd_graph_gen.c) */

#endif
