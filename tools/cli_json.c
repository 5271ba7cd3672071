/* cli_json.c: JSON output shared by the verbs (cli_json.h). */
#include "cli_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cli_json_sim_result(json_t *o, const gopt_sim_result *r) {
    json_t *peak = json_array(), *peak_t = json_array(), *cap = json_array(), *busy = json_array(),
           *sent = json_array();
    json_object_set_new(o, "step_time_s", json_real(r->step_time_s));
    json_object_set_new(o, "oom", json_boolean(r->oom));
    json_object_set_new(o, "oom_device", r->oom ? json_integer(r->oom_device) : json_null());
    json_object_set_new(o, "oom_excess_bytes", json_real(r->oom_excess_bytes));
    for (int i = 0; i < r->ndev; i++) {
        json_array_append_new(peak, json_integer((json_int_t)r->peak_memory_bytes[i]));
        json_array_append_new(peak_t, json_real(r->peak_time_s[i]));
        json_array_append_new(cap, json_real(r->capacity_bytes[i]));
        json_array_append_new(busy, json_real(r->busy_s[i]));
        json_array_append_new(sent, json_real(r->sent_bytes[i]));
    }
    json_object_set_new(o, "peak_memory_bytes", peak);
    json_object_set_new(o, "peak_time_s", peak_t);
    json_object_set_new(o, "capacity_bytes", cap);
    json_object_set_new(o, "busy_s", busy);
    json_object_set_new(o, "sent_bytes", sent);
    json_object_set_new(o, "transferred_bytes", json_real(r->transferred_bytes));
    json_object_set_new(o, "kernels", json_integer(r->tasks));
    json_object_set_new(o, "transfers", json_integer(r->transfers));
}

void cli_json_print(json_t *o) {
    char *txt = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    if (txt) puts(txt);
    free(txt);
    json_decref(o);
}

json_t *cli_json_text(const char *s) {
    json_t *j = json_string(s);
    if (j) return j;
    size_t len = strlen(s);
    char *out = malloc(3 * len + 1); /* each byte becomes at most the 3 bytes of U+FFFD */
    if (!out) return json_null();
    size_t k = 0;
    for (const unsigned char *q = (const unsigned char *)s, *end = q + len; q < end;) {
        uint32_t cp;
        int n = gopt_utf8_decode(q, (size_t)(end - q), &cp);
        if (n) {
            memcpy(out + k, q, (size_t)n);
            k += (size_t)n, q += n;
        } else {
            memcpy(out + k, "\xef\xbf\xbd", 3);
            k += 3, q++;
        }
    }
    out[k] = 0;
    j = json_string(out);
    free(out);
    return j ? j : json_null();
}
