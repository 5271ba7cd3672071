/* trace.c: a timeline (the simulator's last run, or a runtime's measured step) as Chrome
 * trace-event JSON: one writer for both evaluators.
 *
 * Format (the trace-event format that chrome://tracing and Perfetto read):
 *   {"traceEvents":[
 *     {"name":"process_name","ph":"M","pid":1,"tid":1,"args":{"name":"gopt sim: GRAPH"}},
 *     {"name":"thread_name","ph":"M","pid":1,"tid":T,"args":{"name":"device 0"}},  one per track
 *     {"name":"mm1","cat":"kernel","ph":"X","ts":12.50025,"dur":3.250,"pid":1,"tid":1,"args":{...}},
 *     ...], "displayTimeUnit":"ns"}
 * Tracks (tid): device d is d + 1; link src->dst is ndev + src*ndev + dst + 1, named
 * "link src->dst" (only links that carried something get a name). pid and tid are never 0:
 * Perfetto treats pid/tid 0 as the kernel's swapper. When the scratch recorded memory
 * (gopt_sim_scratch_record_memory), counter events ("ph":"C", "memory device D", args.bytes)
 * follow, one per change of a device's bytes in use: Perfetto shows one counter track each.
 *
 * Times are in microseconds at nanosecond resolution, exact on every track: a slice's start and
 * end are each rounded to the nanosecond, its duration is their difference, so a slice that
 * starts when the previous one on its track ends starts exactly at that end. Perfetto reads
 * numbers as doubles and truncates us * 1000 to integer nanoseconds, which can land one below the
 * decimal; each start therefore carries a quarter nanosecond (...25) so that truncation and
 * rounding both give the intended nanosecond, while a duration printed exactly can only lose one,
 * never overlap the next slice (which Perfetto would mis-nest or drop).
 * Cost: O(N + transfers + memory changes), one pass each.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

/* Whole nanoseconds, saturated: bounded inputs can still make a step last longer than the
 * 292 years a long long holds in ns (llround would then return an unspecified value). */
static long long ns_of(double t_s) {
    double ns = t_s * 1e9;
    return ns >= 9.2e18 ? 9200000000000000000LL : ns <= 0 ? 0 : llround(ns);
}

/* "ts" at time t_s (seconds), and "dur" of a slice from start_s to end_s: see the header. */
static void put_ts(gopt_buf *b, double t_s) {
    long long a = ns_of(t_s);
    gopt_buf_printf(b, "\"ts\":%lld.%03lld25", a / 1000, a % 1000);
}

static void put_span(gopt_buf *b, double start_s, double end_s) {
    long long a = ns_of(start_s), e = ns_of(end_s), d = e > a ? e - a : 0;
    put_ts(b, start_s);
    gopt_buf_printf(b, ",\"dur\":%lld.%03lld", d / 1000, d % 1000);
}

static void put_json_string(gopt_buf *b, const char *s) {
    gopt_buf_puts(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            char e[2] = {'\\', (char)*p};
            gopt_buf_append(b, e, 2);
        } else if (*p < 0x20) {
            gopt_buf_printf(b, "\\u%04x", *p);
        } else {
            gopt_buf_append(b, p, 1);
        }
    }
    gopt_buf_puts(b, "\"");
}

gopt_status gopt_trace_timeline_json(const gopt_graph *g, const gopt_trace_timeline *tl, gopt_buf *b,
                                     gopt_error *err) {
    const gopt_frozen *f = gopt_graph_frozen(g);
    int nd = tl->ndev;
    if (!f || nd < 1 || nd > GOPT_SIM_MAX_DEVICES)
        return gopt_error_set(err, GOPT_EINVAL, "trace: %d devices or an unfinalized graph", nd);
    gopt_buf_puts(b, "{\"traceEvents\":[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":1,\"args\":{\"name\":");
    put_json_string(b, tl->title ? tl->title : "gopt");
    gopt_buf_puts(b, "}}");
    for (int dd = 0; dd < nd; dd++)
        gopt_buf_printf(b,
                        ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"args\":{\"name\":\"device %d\"}}"
                        ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"args\":{\"sort_index\":%d}}",
                        dd + 1, dd, dd + 1, dd);
    /* name the links that carried something */
    uint8_t used[GOPT_SIM_MAX_DEVICES * GOPT_SIM_MAX_DEVICES];
    memset(used, 0, (size_t)nd * (size_t)nd);
    for (int32_t i = 0; i < tl->ntransfers; i++) used[tl->transfers[i].src * nd + tl->transfers[i].dst] = 1;
    for (int l = 0; l < nd * nd; l++)
        if (used[l])
            gopt_buf_printf(b,
                            ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"args\":{\"name\":\"link "
                            "%d->%d\"}},\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"args\":{"
                            "\"sort_index\":%d}}",
                            nd + l + 1, l / nd, l % nd, nd + l + 1, nd + l);
    for (int32_t i = 0; i < tl->nkernels; i++) {
        const gopt_trace_kernel *x = &tl->kernels[i];
        int32_t c = x->node, k = x->members;
        gopt_buf_puts(b, ",\n{\"name\":");
        if (k > 1) {
            char nm[600];
            snprintf(nm, sizeof nm, "%s +%d", gopt_graph_node_name(g, c), k - 1);
            put_json_string(b, nm);
        } else {
            put_json_string(b, gopt_graph_node_name(g, c));
        }
        const char *cls = gopt_op_class_name((gopt_op_class)f->op_class[c]);
        gopt_buf_printf(b, ",\"cat\":\"%s\",\"ph\":\"X\",", k > 1 ? "fused" : (cls ? cls : "op"));
        put_span(b, x->start, x->end);
        gopt_buf_printf(b, ",\"pid\":1,\"tid\":%d,\"args\":{\"priority\":%d,\"members\":%d,\"alloc_bytes\":%lld}}",
                        x->device + 1, x->priority, k, (long long)x->alloc_bytes);
    }
    for (int32_t i = 0; i < tl->ntransfers; i++) {
        const gopt_sim_transfer *x = &tl->transfers[i];
        gopt_buf_puts(b, ",\n{\"name\":");
        put_json_string(b, gopt_graph_node_name(g, x->node));
        gopt_buf_puts(b, ",\"cat\":\"transfer\",\"ph\":\"X\",");
        put_span(b, x->start, x->end);
        gopt_buf_printf(b, ",\"pid\":1,\"tid\":%d,\"args\":{\"bytes\":%.17g,\"src\":%d,\"dst\":%d}}",
                        nd + x->src * nd + x->dst + 1, x->bytes, x->src, x->dst);
    }
    /* memory counters (when given): each device's bytes in use, at every change of value */
    int64_t last[GOPT_SIM_MAX_DEVICES];
    for (int dd = 0; dd < nd; dd++) last[dd] = -1;
    for (int64_t i = 0; i < tl->nmemory; i++) {
        const gopt_trace_memory *m = &tl->memory[i];
        if (m->bytes == last[m->device]) continue;
        last[m->device] = m->bytes;
        gopt_buf_printf(b, ",\n{\"name\":\"memory device %d\",\"ph\":\"C\",", m->device);
        put_ts(b, m->t);
        gopt_buf_printf(b, ",\"pid\":1,\"tid\":%d,\"args\":{\"bytes\":%lld}}", m->device + 1, (long long)m->bytes);
    }
    gopt_buf_puts(b, "\n],\"displayTimeUnit\":\"ns\"}\n");
    if (b->failed) return gopt_error_set(err, GOPT_ENOMEM, "trace: out of memory");
    return GOPT_OK;
}

gopt_status gopt_trace_timeline_write(const gopt_graph *g, const gopt_trace_timeline *tl, const char *path,
                                      gopt_error *err) {
    gopt_buf b;
    gopt_buf_init(&b);
    gopt_status st = gopt_trace_timeline_json(g, tl, &b, err);
    if (st == GOPT_OK) st = gopt_file_write_atomic(path, b.data, b.len, gopt_path_is_gz(path) ? 6 : 0, err);
    gopt_buf_destroy(&b);
    return st;
}

/* The simulator's last run as a timeline (kernels in topological order of their representatives,
 * transfers in record order, the memory log when recorded). */
gopt_status gopt_sim_trace_json(const gopt_sim *sim, const gopt_decisions *d, const gopt_sim_scratch *s, gopt_buf *b,
                                gopt_error *err) {
    if (s->sim != sim || s->d != d || s->tasks_done != s->ntasks)
        return gopt_error_set(err, GOPT_EINVAL, "sim trace: the scratch does not hold a finished run of these decisions");
    const gopt_frozen *f = sim->f;
    int nd = sim->ndev;
    int64_t nmem = gopt_sim_memory_samples(s);
    gopt_trace_kernel *ks = gopt_malloc(((size_t)s->ntasks + 1) * sizeof *ks, err);
    gopt_sim_transfer *xs = gopt_malloc(((size_t)s->nxf + 1) * sizeof *xs, err);
    gopt_trace_memory *ms = gopt_malloc(((size_t)nmem + 1) * sizeof *ms, err);
    gopt_status st = GOPT_ENOMEM;
    if (!ks || !xs || !ms) goto out;
    int32_t nk = 0;
    for (int32_t i = 0; i < f->n; i++) {
        int32_t c = f->topo[i];
        if (s->nt[c].task != c) continue;
        const sim_nc *x = &s->nc[c];
        int32_t k = x->mem_count, prio = INT32_MIN;
        int64_t alloc = 0;
        for (int32_t j = 0; j < k; j++) {
            int32_t v = x->mem_first >= 0 ? s->mem_list[x->mem_first + j] : c;
            if (s->nt[v].ext) alloc += s->nc[v].osize;
            if (d->priority[v] > prio) prio = d->priority[v];
        }
        ks[nk++] = (gopt_trace_kernel){c, k, d->device[c], prio, alloc, x->start, x->start + x->dur};
    }
    for (int32_t i = 0; i < s->nxf; i++) gopt_sim_transfer_get(s, i, &xs[i]);
    for (int64_t i = 0; i < nmem; i++) {
        const sim_memrec *m = &s->memlog[i];
        ms[i] = (gopt_trace_memory){m->t, m->dev, 0, m->bytes};
    }
    char title[300];
    snprintf(title, sizeof title, "gopt sim: %s on %d devices", gopt_graph_name(sim->g), nd);
    gopt_trace_timeline tl = {title, nd, nk, ks, s->nxf, xs, nmem, ms};
    st = gopt_trace_timeline_json(sim->g, &tl, b, err);
out:
    free(ks);
    free(xs);
    free(ms);
    return st;
}

gopt_status gopt_sim_trace_write(const gopt_sim *sim, const gopt_decisions *d, const gopt_sim_scratch *s,
                                 const char *path, gopt_error *err) {
    gopt_buf b;
    gopt_buf_init(&b);
    gopt_status st = gopt_sim_trace_json(sim, d, s, &b, err);
    if (st == GOPT_OK) st = gopt_file_write_atomic(path, b.data, b.len, gopt_path_is_gz(path) ? 6 : 0, err);
    gopt_buf_destroy(&b);
    return st;
}
