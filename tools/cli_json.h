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
/* A JSON string of text that may not be UTF-8 (a file path is bytes): valid text as it is, else a
 * copy with every byte that does not start a valid UTF-8 sequence replaced by U+FFFD, so that a
 * key is never dropped (jansson's json_string returns NULL on invalid UTF-8). */
json_t *cli_json_text(const char *s);
/* Print o on stdout, indented, reals with 17 digits (exact round trip), and release it. */
void cli_json_print(json_t *o);

#endif /* GOPT_CLI_JSON_H */
