/* cli_json.h: the JSON shapes the verbs share, so that `gopt sim` and `gopt run` (the two
 * evaluators) print one result object with the same keys. */
#ifndef GOPT_CLI_JSON_H
#define GOPT_CLI_JSON_H

#include <jansson.h>

#include "gopt_sim.h"

/* Add an evaluator result's keys to o: step_time_s, oom, oom_device (null when none),
 * oom_excess_bytes, per-device arrays peak_memory_bytes, peak_time_s, capacity_bytes, busy_s,
 * sent_bytes (r->ndev entries), transferred_bytes, kernels, transfers. */
void cli_json_sim_result(json_t *o, const gopt_sim_result *r);
/* Print o on stdout, indented, reals with 17 digits (exact round trip), and release it. */
void cli_json_print(json_t *o);

#endif /* GOPT_CLI_JSON_H */
