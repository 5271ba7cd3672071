/* cli_go.h: the hook that adds the `go` method (the trained policy) to a
 * command's optimizer registry. A verb that builds a registry calls
 * cli_go_register(&reg, &err) after gopt_bl_registry_init and passes each
 * unrecognised option to cli_go_option(&a) (--checkpoint C, --samples K), so
 * `gopt optimize GRAPH --method go` and `gopt compare --methods ...,go` work.
 * The registry's decide callback carries no context, so the options live in
 * this file (one command per process). */
#ifndef GOPT_CLI_GO_H
#define GOPT_CLI_GO_H

#include "cli.h"
#include "gopt_baselines.h"

/* Register `go` (kind joint) in r. */
gopt_status cli_go_register(gopt_bl_registry *r, gopt_error *err);
/* Consume --checkpoint C or --samples K (and --go-seed S) when a is at one:
 * returns 1 (a->bad set on a malformed value), else 0. */
int cli_go_option(cli_args *a);
/* Help lines for those options. */
void cli_go_usage(FILE *f);

#endif
