/* test_sim.c: the simulator against hand-computed timelines (two ops and a
 * transfer, a diamond over two devices, priorities, a fused chain, out of
 * memory), against a brute-force reference simulator written here
 * independently (a naive instant-by-instant list simulation, O(N^2) per
 * instant) on hundreds of random small graphs and decisions, invariants on
 * larger layered graphs, determinism (repeat, batch on 2 threads), the trace
 * file (parsed back, and held to the rules of Perfetto's JSON importer on the
 * zoo graphs too), and every rejection.
 *
 * The unit profile makes times exact binary fractions: peak 1 FLOP/s, memory
 * bandwidth 1024 B/s, launch 0.5 s, links 1 s + bytes/1024 B/s. An op of
 * class "other" takes 0.5 + max(flops, bytes/1024) s (bytes = out + in edges). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gopt_sim.h"
#include "gopt_zoo.h"

static char tmpdir[256];

static const char *UNIT_PROFILE =
    "{\"format\":\"gopt-profile\",\"version\":1,\"name\":\"unit\",\"description\":\"simulator tests\","
    "\"provenance\":{\"source\":\"datasheet\",\"reference\":\"unit test numbers\"},"
    "\"devices\":[{\"name\":\"dev\",\"count\":%d,\"kind\":\"cpu\",\"model\":\"unit\",\"memory_bytes\":%.0f,"
    "\"peak_flops\":{\"fp32\":1.0},\"memory_bandwidth\":1024.0,\"launch_overhead\":0.5}],"
    "\"topology\":{\"kind\":\"uniform\",\"bandwidth\":1024.0,\"latency\":1.0}}";

/* A profile with awkward numbers and an asymmetric topology (few exact ties). */
static const char *ODD_PROFILE =
    "{\"format\":\"gopt-profile\",\"version\":1,\"name\":\"odd\",\"description\":\"simulator tests\","
    "\"provenance\":{\"source\":\"datasheet\",\"reference\":\"unit test numbers\"},"
    "\"devices\":[{\"name\":\"dev\",\"count\":%d,\"kind\":\"gpu\",\"model\":\"odd\",\"memory_bytes\":%.0f,"
    "\"peak_flops\":{\"fp32\":3.7},\"memory_bandwidth\":977.0,\"launch_overhead\":0.013}],"
    "\"topology\":{\"kind\":\"pcie_tree\",\"bandwidth\":1500.0,\"latency\":0.21,\"devices_per_switch\":2,"
    "\"cross_bandwidth\":700.0,\"cross_latency\":0.57}}";

/* Three devices; the link between dev0 and dev1 has a measured copy table (the others use
 * latency + bytes / bandwidth). */
static const char *TABLE_PROFILE =
    "{\"format\":\"gopt-profile\",\"version\":1,\"name\":\"tab\",\"description\":\"simulator tests\","
    "\"provenance\":{\"source\":\"datasheet\",\"reference\":\"unit test numbers\"},"
    "\"devices\":[{\"name\":\"dev\",\"count\":%d,\"kind\":\"cpu\",\"model\":\"unit\",\"memory_bytes\":%.0f,"
    "\"peak_flops\":{\"fp32\":1.0},\"memory_bandwidth\":1024.0,\"launch_overhead\":0.5}],"
    "\"topology\":{\"kind\":\"uniform\",\"bandwidth\":1024.0,\"latency\":1.0},"
    "\"links\":[{\"src\":\"dev0\",\"dst\":\"dev1\",\"bandwidth\":1024.0,\"latency\":1.0,\"tables\":\"cp\"}],"
    "\"tables\":{\"cp\":{\"copy\":[[256,0.75],[1024,3.0],[4096,5.0]]}}}";

/* UNIT_PROFILE's devices on one memory bus of 1536 B/s (each alone: 1024 B/s, 2/3 of it). */
static const char *BUS_PROFILE =
    "{\"format\":\"gopt-profile\",\"version\":1,\"name\":\"bus\",\"description\":\"simulator tests\","
    "\"provenance\":{\"source\":\"datasheet\",\"reference\":\"unit test numbers\"},"
    "\"devices\":[{\"name\":\"dev\",\"count\":%d,\"kind\":\"cpu\",\"model\":\"unit\",\"memory_bytes\":%.0f,"
    "\"peak_flops\":{\"fp32\":1.0},\"memory_bandwidth\":1024.0,\"launch_overhead\":0.5}],"
    "\"topology\":{\"kind\":\"shared_memory\",\"bandwidth\":1024.0,\"latency\":1.0,\"memory_bandwidth\":1536.0}}";

typedef struct {
    gopt_profile *p;
    gopt_costmodel *cm;
} cluster;

static void cluster_make(cluster *c, const char *fmt, int ndev, double memory) {
    char text[2048];
    snprintf(text, sizeof text, fmt, ndev, memory);
    gopt_error err = {0};
    gopt_status st = gopt_profile_parse(text, strlen(text), "unit.json", &c->p, &err);
    if (st) print_error("%s\n", err.msg);
    assert_int_equal(st, GOPT_OK);
    assert_int_equal(gopt_cost_create(c->p, ndev, &c->cm, &err), GOPT_OK);
}

static void cluster_free(cluster *c) {
    gopt_cost_free(c->cm);
    gopt_profile_free(c->p);
}

typedef struct {
    const char *name;
    gopt_op_class cls;
    double flops, out, param;
} node_spec;
typedef struct {
    int src, dst;
    double bytes;
} edge_spec;

static gopt_graph *graph_make(const node_spec *nodes, int n, const edge_spec *edges, int m) {
    gopt_graph *g;
    gopt_error err = {0};
    assert_int_equal(gopt_graph_create(&g, "t", "test", &err), GOPT_OK);
    for (int i = 0; i < n; i++) {
        gopt_node_attrs a = {0};
        a.name = nodes[i].name;
        a.op = "Op";
        a.cls = nodes[i].cls;
        a.flops = nodes[i].flops;
        a.out_bytes = nodes[i].out;
        a.param_bytes = nodes[i].param;
        a.layer = -1;
        assert_int_equal(gopt_graph_add_node(g, &a, NULL, &err), GOPT_OK);
    }
    for (int e = 0; e < m; e++) assert_int_equal(gopt_graph_add_edge(g, edges[e].src, edges[e].dst, edges[e].bytes, &err), GOPT_OK);
    assert_int_equal(gopt_graph_finalize(g, &err), GOPT_OK);
    return g;
}

/* Run decisions (devices, priorities, groups given per node; NULL = default). */
static void run_case(const gopt_graph *g, const cluster *c, const int *dev, const int *prio, const int *grp,
                     gopt_sim_result *r, gopt_sim **sim_out, gopt_sim_scratch **s_out, gopt_decisions *d) {
    gopt_error err = {0};
    int n = gopt_graph_num_nodes(g);
    assert_int_equal(gopt_decisions_init(d, n, &err), GOPT_OK);
    gopt_decisions_set_default(d, gopt_graph_frozen(g));
    for (int v = 0; v < n; v++) {
        if (dev) d->device[v] = dev[v];
        if (prio) d->priority[v] = prio[v];
        if (grp) d->group[v] = grp[v];
    }
    gopt_status st = gopt_decisions_validate(d, g, gopt_cost_num_devices(c->cm), &err);
    if (st) print_error("%s\n", err.msg);
    assert_int_equal(st, GOPT_OK);
    assert_int_equal(gopt_sim_create(g, c->cm, sim_out, &err), GOPT_OK);
    assert_int_equal(gopt_sim_scratch_create(*sim_out, s_out, &err), GOPT_OK);
    st = gopt_sim_run(*sim_out, d, r, *s_out, &err);
    if (st) print_error("%s\n", err.msg);
    assert_int_equal(st, GOPT_OK);
}

#define EXACT(a, b) assert_true(fabs((double)(a) - (double)(b)) <= 1e-12 * (1 + fabs((double)(b))))

/* ---- hand-computed timelines ------------------------------------------------------------ */
static void test_two_ops_one_transfer(void **state) {
    (void)state;
    cluster c;
    cluster_make(&c, UNIT_PROFILE, 2, 1e6);
    /* a: 0.5 + max(2, 1024/1024) = 2.5 s; b: 0.5 + max(3, 1024/1024) = 3.5 s; transfer 1 + 1 = 2 s */
    node_spec nodes[] = {{"a", GOPT_OP_CLASS_OTHER, 2, 1024, 0}, {"b", GOPT_OP_CLASS_OTHER, 3, 0, 0}};
    edge_spec edges[] = {{0, 1, 1024}};
    gopt_graph *g = graph_make(nodes, 2, edges, 1);
    gopt_sim *sim;
    gopt_sim_scratch *s;
    gopt_decisions d;
    gopt_sim_result r;
    int dev[] = {0, 1};
    run_case(g, &c, dev, NULL, NULL, &r, &sim, &s, &d);
    EXACT(r.step_time_s, 8.0); /* a 0-2.5, transfer 2.5-4.5, b 4.5-8 */
    EXACT(gopt_sim_node_start(s, 1), 4.5);
    EXACT(r.busy_s[0], 2.5);
    EXACT(r.busy_s[1], 3.5);
    assert_int_equal(r.transfers, 1);
    EXACT(r.transferred_bytes, 1024);
    EXACT(r.sent_bytes[0], 1024);
    assert_int_equal(r.peak_memory_bytes[0], 1024);
    assert_int_equal(r.peak_memory_bytes[1], 1024);
    assert_false(r.oom);
    assert_int_equal(r.oom_device, -1);
    gopt_sim_transfer t;
    assert_int_equal(gopt_sim_num_transfers(s), 1);
    gopt_sim_transfer_get(s, 0, &t);
    assert_int_equal(t.node, 0);
    assert_int_equal(t.src, 0);
    assert_int_equal(t.dst, 1);
    EXACT(t.start, 2.5);
    EXACT(t.end, 4.5);
    /* same device: no transfer */
    d.device[1] = 0;
    gopt_error err = {0};
    assert_int_equal(gopt_sim_run(sim, &d, &r, s, &err), GOPT_OK);
    EXACT(r.step_time_s, 6.0);
    assert_int_equal(r.transfers, 0);
    gopt_decisions_destroy(&d);
    gopt_sim_scratch_free(s);
    gopt_sim_free(sim);
    gopt_graph_free(g);
    cluster_free(&c);
}

/* Shared memory bus: a memory-bound kernel that starts while another device's memory-bound
 * kernel runs has its memory part slowed down by how far the two demands exceed the bus; the
 * one already running keeps its time; without a bus nothing changes. */
static void test_shared_bus(void **state) {
    (void)state;
    /* a (dev 0): elementwise, 4096 B: 0.5 + 4 s (memory 4 s), runs 0-4.5, draws 2/3 * 4/4.5 of
     * the bus; b (dev 1): 0.5 + 1 s, runs 0-1.5; c (dev 1, after b): elementwise 2048 B, 0.5 + 2 s
     * alone; it starts at 1.5 while a runs: demand 2/3 + 16/27 = 34/27 of the bus, so its 2 s of
     * memory traffic take 2 * 34/27 s */
    node_spec nodes[] = {{"a", GOPT_OP_CLASS_ELEMENTWISE, 0, 4096, 0},
                         {"b", GOPT_OP_CLASS_OTHER, 1, 1024, 0},
                         {"c", GOPT_OP_CLASS_ELEMENTWISE, 0, 1024, 0}};
    edge_spec edges[] = {{1, 2, 1024}};
    gopt_graph *g = graph_make(nodes, 3, edges, 1);
    int dev[] = {0, 1, 1};
    const char *fmts[2] = {BUS_PROFILE, UNIT_PROFILE};
    for (int k = 0; k < 2; k++) {
        cluster c;
        cluster_make(&c, fmts[k], 2, 1e6);
        gopt_sim *sim;
        gopt_sim_scratch *s;
        gopt_decisions d;
        gopt_sim_result r;
        run_case(g, &c, dev, NULL, NULL, &r, &sim, &s, &d);
        double cdur = k == 0 ? 0.5 + 2.0 * 34.0 / 27.0 : 2.5;
        EXACT(gopt_sim_node_start(s, 2), 1.5);
        EXACT(gopt_sim_node_end(s, 2), 1.5 + cdur);
        EXACT(gopt_sim_node_end(s, 0), 4.5);
        EXACT(r.busy_s[1], 1.5 + cdur);
        EXACT(r.step_time_s, k == 0 ? 1.5 + cdur : 4.5);
        /* one device alone never waits for the bus: all three on device 0 */
        int one[] = {0, 0, 0};
        for (int v = 0; v < 3; v++) d.device[v] = one[v];
        gopt_error err = {0};
        assert_int_equal(gopt_sim_run(sim, &d, &r, s, &err), GOPT_OK);
        EXACT(r.step_time_s, 4.5 + 1.5 + 2.5);
        gopt_decisions_destroy(&d);
        gopt_sim_scratch_free(s);
        gopt_sim_free(sim);
        cluster_free(&c);
    }
    gopt_graph_free(g);
}

static void test_diamond_two_devices(void **state) {
    (void)state;
    cluster c;
    cluster_make(&c, UNIT_PROFILE, 2, 1e6);
    /* s 1.5 s (dev0); l 4.5 s (dev0); r 3.5 s (dev1); t 3.5 s (dev0) */
    node_spec nodes[] = {{"s", GOPT_OP_CLASS_OTHER, 1, 1024, 0},
                         {"l", GOPT_OP_CLASS_OTHER, 4, 1024, 0},
                         {"r", GOPT_OP_CLASS_OTHER, 2, 2048, 0},
                         {"t", GOPT_OP_CLASS_OTHER, 1, 0, 0}};
    edge_spec edges[] = {{0, 1, 1024}, {0, 2, 1024}, {1, 3, 1024}, {2, 3, 2048}};
    gopt_graph *g = graph_make(nodes, 4, edges, 4);
    gopt_sim *sim;
    gopt_sim_scratch *s;
    gopt_decisions d;
    gopt_sim_result r;
    int dev[] = {0, 0, 1, 0};
    run_case(g, &c, dev, NULL, NULL, &r, &sim, &s, &d);
    /* s 0-1.5; s->dev1 1.5-3.5; l 1.5-6; r 3.5-7; r->dev0 (2048 B: 1+2 s) 7-10; t 10-13.5 */
    EXACT(gopt_sim_node_start(s, 1), 1.5);
    EXACT(gopt_sim_node_start(s, 2), 3.5);
    EXACT(gopt_sim_node_start(s, 3), 10.0);
    EXACT(r.step_time_s, 13.5);
    EXACT(r.busy_s[0], 1.5 + 4.5 + 3.5);
    EXACT(r.busy_s[1], 3.5);
    assert_int_equal(r.transfers, 2);
    EXACT(r.transferred_bytes, 3072);
    /* dev0: s+l = 2048 at 1.5; s freed at 6; + copy of r (2048) at 7 -> 3072.
     * dev1: copy of s (1024, until r ends at 7) + r's output (2048, from 3.5) -> 3072 */
    assert_int_equal(r.peak_memory_bytes[0], 3072);
    assert_int_equal(r.peak_memory_bytes[1], 3072);
    gopt_decisions_destroy(&d);
    gopt_sim_scratch_free(s);
    gopt_sim_free(sim);
    gopt_graph_free(g);
    cluster_free(&c);
}

static void test_priorities_and_ties(void **state) {
    (void)state;
    cluster c;
    cluster_make(&c, UNIT_PROFILE, 1, 1e6);
    /* s -> x, s -> y, all 0.5 + 1 = 1.5 s (bytes 0) on one device */
    node_spec nodes[] = {{"s", GOPT_OP_CLASS_OTHER, 1, 0, 0},
                         {"x", GOPT_OP_CLASS_OTHER, 1, 0, 0},
                         {"y", GOPT_OP_CLASS_OTHER, 1, 0, 0}};
    edge_spec edges[] = {{0, 1, 0}, {0, 2, 0}};
    gopt_graph *g = graph_make(nodes, 3, edges, 2);
    gopt_sim *sim;
    gopt_sim_scratch *s;
    gopt_decisions d;
    gopt_sim_result r;
    int prio[] = {0, 1, 5};
    run_case(g, &c, NULL, prio, NULL, &r, &sim, &s, &d);
    EXACT(gopt_sim_node_start(s, 2), 1.5); /* y first: higher priority */
    EXACT(gopt_sim_node_start(s, 1), 3.0);
    EXACT(r.step_time_s, 4.5);
    /* equal priorities: topological order (x has the smaller rank) */
    const gopt_frozen *f = gopt_graph_frozen(g);
    d.priority[1] = d.priority[2] = 7;
    gopt_error err = {0};
    assert_int_equal(gopt_sim_run(sim, &d, &r, s, &err), GOPT_OK);
    int first = f->rank[1] < f->rank[2] ? 1 : 2;
    EXACT(gopt_sim_node_start(s, first), 1.5);
    EXACT(gopt_sim_node_start(s, 3 - first), 3.0);
    /* negative and extreme priorities order correctly */
    d.priority[1] = INT32_MIN;
    d.priority[2] = INT32_MAX;
    assert_int_equal(gopt_sim_run(sim, &d, &r, s, &err), GOPT_OK);
    EXACT(gopt_sim_node_start(s, 2), 1.5);
    d.priority[1] = -1;
    d.priority[2] = -2;
    assert_int_equal(gopt_sim_run(sim, &d, &r, s, &err), GOPT_OK);
    EXACT(gopt_sim_node_start(s, 1), 1.5);
    gopt_decisions_destroy(&d);
    gopt_sim_scratch_free(s);
    gopt_sim_free(sim);
    gopt_graph_free(g);
    cluster_free(&c);
}

static void test_fused_chain(void **state) {
    (void)state;
    cluster c;
    cluster_make(&c, UNIT_PROFILE, 1, 1e6);
    /* i (input) -> a -> b -> c -> d; a, b, c elementwise; compute part = flops */
    node_spec nodes[] = {{"i", GOPT_OP_CLASS_INPUT, 0, 1024, 0},
                         {"a", GOPT_OP_CLASS_ELEMENTWISE, 1, 2048, 0},
                         {"b", GOPT_OP_CLASS_ELEMENTWISE, 2, 2048, 0},
                         {"c", GOPT_OP_CLASS_ELEMENTWISE, 1, 1024, 0},
                         {"d", GOPT_OP_CLASS_OTHER, 1, 0, 0}};
    edge_spec edges[] = {{0, 1, 1024}, {1, 2, 2048}, {2, 3, 2048}, {3, 4, 1024}};
    gopt_graph *g = graph_make(nodes, 5, edges, 4);
    gopt_sim *sim;
    gopt_sim_scratch *s;
    gopt_decisions d;
    gopt_sim_result r;
    /* unfused: a 0.5+3 = 3.5, b 0.5+4 = 4.5, c 0.5+3 = 3.5, d 0.5+1 = 1.5 */
    run_case(g, &c, NULL, NULL, NULL, &r, &sim, &s, &d);
    EXACT(r.step_time_s, 13.0);
    assert_int_equal(r.tasks, 5);
    /* i 1024 + a 2048 at 0; a's end frees i; + b 2048 at 3.5 -> 4096 */
    assert_int_equal(r.peak_memory_bytes[0], 4096);
    /* fused a+b+c: 0.5 + (1+2+1) + (1024 in + 1024 out)/1024 = 6.5 s */
    d.group[1] = d.group[2] = d.group[3] = 3;
    gopt_error err = {0};
    assert_int_equal(gopt_decisions_validate(&d, g, 1, &err), GOPT_OK);
    assert_int_equal(gopt_sim_run(sim, &d, &r, s, &err), GOPT_OK);
    EXACT(r.step_time_s, 8.0);
    assert_int_equal(r.tasks, 3);
    EXACT(gopt_sim_node_start(s, 2), 0.0);
    EXACT(gopt_sim_node_end(s, 2), 6.5);
    EXACT(gopt_sim_node_start(s, 4), 6.5);
    /* internal tensors take no memory: i 1024 + c's output 1024 */
    assert_int_equal(r.peak_memory_bytes[0], 2048);
    /* the same fused group on the device of a 2-device cluster with d elsewhere: c's output is sent */
    gopt_decisions_destroy(&d);
    gopt_sim_scratch_free(s);
    gopt_sim_free(sim);
    cluster_free(&c);
    cluster_make(&c, UNIT_PROFILE, 2, 1e6);
    int dev[] = {0, 0, 0, 0, 1}, grp[] = {-1, 3, 3, 3, -1};
    run_case(g, &c, dev, NULL, grp, &r, &sim, &s, &d);
    EXACT(r.step_time_s, 6.5 + 2.0 + 1.5);
    assert_int_equal(r.transfers, 1);
    gopt_decisions_destroy(&d);
    gopt_sim_scratch_free(s);
    gopt_sim_free(sim);
    gopt_graph_free(g);
    cluster_free(&c);
}

static void test_out_of_memory(void **state) {
    (void)state;
    cluster c;
    cluster_make(&c, UNIT_PROFILE, 2, 4096);
    /* w: a parameter of 3072 resident bytes (its 1024-byte output is that parameter); m reads it */
    node_spec nodes[] = {{"w", GOPT_OP_CLASS_PARAM, 0, 1024, 3072}, {"m", GOPT_OP_CLASS_OTHER, 1, 2048, 0}};
    edge_spec edges[] = {{0, 1, 1024}};
    gopt_graph *g = graph_make(nodes, 2, edges, 1);
    gopt_sim *sim;
    gopt_sim_scratch *s;
    gopt_decisions d;
    gopt_sim_result r;
    run_case(g, &c, NULL, NULL, NULL, &r, &sim, &s, &d);
    assert_int_equal(r.peak_memory_bytes[0], 3072 + 2048);
    assert_true(r.oom);
    assert_int_equal(r.oom_device, 0);
    EXACT(r.oom_excess_bytes, 1024);
    EXACT(r.step_time_s, 0.5 + 3.0); /* the run completes: 0.5 + max(1, 3072/1024) */
    /* m on device 1: a 1024-byte copy + 2048 output there, 3072 params on device 0: fits */
    d.device[1] = 1;
    gopt_error err = {0};
    assert_int_equal(gopt_sim_run(sim, &d, &r, s, &err), GOPT_OK);
    assert_false(r.oom);
    assert_int_equal(r.peak_memory_bytes[0], 3072);
    assert_int_equal(r.peak_memory_bytes[1], 3072);
    gopt_decisions_destroy(&d);
    gopt_sim_scratch_free(s);
    gopt_sim_free(sim);
    gopt_graph_free(g);
    /* m's output of 4096 bytes on device 1: over by 1024 there */
    nodes[1].out = 4096;
    g = graph_make(nodes, 2, edges, 1);
    int dev[] = {0, 1};
    run_case(g, &c, dev, NULL, NULL, &r, &sim, &s, &d);
    assert_true(r.oom);
    assert_int_equal(r.oom_device, 1);
    EXACT(r.oom_excess_bytes, 1024);
    gopt_decisions_destroy(&d);
    gopt_sim_scratch_free(s);
    gopt_sim_free(sim);
    gopt_graph_free(g);
    cluster_free(&c);
}

/* Transfers on one link queue: two outputs sent at once go one after the other. */
static void test_link_fifo(void **state) {
    (void)state;
    cluster c;
    cluster_make(&c, UNIT_PROFILE, 2, 1e6);
    /* p, q (inputs, zero time) on dev0 -> x, y on dev1: two 1024-byte transfers of 2 s each on link 0->1 */
    node_spec nodes[] = {{"p", GOPT_OP_CLASS_INPUT, 0, 1024, 0},
                         {"q", GOPT_OP_CLASS_INPUT, 0, 1024, 0},
                         {"x", GOPT_OP_CLASS_OTHER, 4, 0, 0},
                         {"y", GOPT_OP_CLASS_OTHER, 4, 0, 0}};
    edge_spec edges[] = {{0, 2, 1024}, {1, 3, 1024}};
    gopt_graph *g = graph_make(nodes, 4, edges, 2);
    gopt_sim *sim;
    gopt_sim_scratch *s;
    gopt_decisions d;
    gopt_sim_result r;
    int dev[] = {0, 0, 1, 1};
    run_case(g, &c, dev, NULL, NULL, &r, &sim, &s, &d);
    /* the first transfer ends at 2, the second at 4; x, y take 4.5 s each on dev1 */
    double sx = gopt_sim_node_start(s, 2), sy = gopt_sim_node_start(s, 3);
    EXACT(fmin(sx, sy), 2.0);
    EXACT(fmax(sx, sy), 6.5);
    EXACT(r.step_time_s, 11.0);
    /* two receivers of one tensor on one device: one transfer; a receiver on each of 2 devices: 2 */
    gopt_decisions_destroy(&d);
    gopt_sim_scratch_free(s);
    gopt_sim_free(sim);
    gopt_graph_free(g);
    cluster_free(&c);
    cluster_make(&c, UNIT_PROFILE, 3, 1e6);
    node_spec n2[] = {{"p", GOPT_OP_CLASS_OTHER, 1, 1024, 0},
                      {"x", GOPT_OP_CLASS_OTHER, 1, 0, 0},
                      {"y", GOPT_OP_CLASS_OTHER, 1, 0, 0},
                      {"z", GOPT_OP_CLASS_OTHER, 1, 0, 0}};
    edge_spec e2[] = {{0, 1, 1024}, {0, 2, 512}, {0, 3, 1024}};
    g = graph_make(n2, 4, e2, 3);
    int dev2[] = {0, 1, 1, 2};
    run_case(g, &c, dev2, NULL, NULL, &r, &sim, &s, &d);
    assert_int_equal(r.transfers, 2);
    EXACT(r.transferred_bytes, 2048); /* the largest edge to each device */
    gopt_decisions_destroy(&d);
    gopt_sim_scratch_free(s);
    gopt_sim_free(sim);
    gopt_graph_free(g);
    cluster_free(&c);
}

/* ---- the reference: a naive instant-by-instant list simulation ---------------------------
 * Written from the rules in docs/simulator.md without the simulator's data structures: no
 * heaps, no hold counters; readiness, queues and memory are recomputed by scanning
 * everything at every instant. O(N^2 + N E) per instant: small graphs only. */
typedef struct {
    int u, src, dst, started, finished;
    double bytes, enq, start, end;
} ref_xfer;

typedef struct {
    double step, bytes;
    double busy[GOPT_SIM_MAX_DEVICES];
    int64_t peak[GOPT_SIM_MAX_DEVICES];
    double peak_t[GOPT_SIM_MAX_DEVICES]; /* when the peak was first reached */
    int ntasks, nxfer;
    double start[64];
} ref_result;

typedef struct {
    const gopt_frozen *f;
    const gopt_decisions *d;
    const gopt_costmodel *cm;
    int n, nd, nx;
    int rep[64], started[64], finished[64], ext[64], prio[64];
    double dur[64], st[64], en[64];
    ref_xfer x[256];
} ref_state;

static int ref_present(const ref_state *R, int u, int D) {
    int c = R->rep[u];
    if (R->d->device[c] == D) return R->finished[c];
    for (int i = 0; i < R->nx; i++)
        if (R->x[i].u == u && R->x[i].dst == D) return R->x[i].finished;
    return 0;
}

static int ref_ready(const ref_state *R, int c) {
    if (R->started[c]) return 0;
    for (int v = 0; v < R->n; v++) {
        if (R->rep[v] != c) continue;
        for (int e = 0; e < R->f->m; e++)
            if (R->f->edge_dst[e] == v && R->rep[R->f->edge_src[e]] != c && !ref_present(R, R->f->edge_src[e], R->d->device[c]))
                return 0;
    }
    return 1;
}

static int64_t ref_memory(const ref_state *R, int D) {
    const gopt_frozen *f = R->f;
    int64_t sum = 0;
    for (int v = 0; v < R->n; v++)
        if (R->d->device[v] == D) sum += (int64_t)ceil(f->param_bytes[v]);
    for (int v = 0; v < R->n; v++) {
        int c = R->rep[v];
        if (R->d->device[v] != D || !R->ext[v] || f->op_class[v] == GOPT_OP_CLASS_PARAM || !R->started[c]) continue;
        int live = !R->finished[c];
        for (int e = 0; e < f->m && !live; e++) {
            int w = f->edge_dst[e];
            if (f->edge_src[e] == v && R->rep[w] != c && R->d->device[w] == D && !R->finished[R->rep[w]]) live = 1;
        }
        for (int i = 0; i < R->nx && !live; i++)
            if (R->x[i].u == v && !R->x[i].finished) live = 1;
        if (live) sum += (int64_t)ceil(f->out_bytes[v]);
    }
    for (int i = 0; i < R->nx; i++) {
        const ref_xfer *x = &R->x[i];
        if (x->dst != D || !x->started) continue;
        int live = !x->finished;
        for (int e = 0; e < f->m && !live; e++) {
            int w = f->edge_dst[e];
            if (f->edge_src[e] == x->u && R->d->device[w] == D && !R->finished[R->rep[w]]) live = 1;
        }
        if (live) sum += (int64_t)ceil(x->bytes);
    }
    return sum;
}

static void ref_dispatch(ref_state *R, double t, ref_result *out) {
    const gopt_frozen *f = R->f;
    for (int D = 0; D < R->nd; D++) {
        int busy = 0, best = -1;
        for (int c = 0; c < R->n; c++)
            if (R->rep[c] == c && R->d->device[c] == D && R->started[c] && !R->finished[c]) busy = 1;
        if (busy) continue;
        for (int c = 0; c < R->n; c++) {
            if (R->rep[c] != c || R->d->device[c] != D || !ref_ready(R, c)) continue;
            if (best < 0 || R->prio[c] > R->prio[best] || (R->prio[c] == R->prio[best] && f->rank[c] < f->rank[best]))
                best = c;
        }
        if (best < 0) continue;
        R->started[best] = 1;
        R->st[best] = t;
        R->en[best] = t + R->dur[best];
        out->busy[D] += R->dur[best];
    }
    for (int s = 0; s < R->nd; s++)
        for (int D = 0; D < R->nd; D++) {
            if (s == D) continue;
            int busy = 0, best = -1;
            for (int i = 0; i < R->nx; i++)
                if (R->x[i].src == s && R->x[i].dst == D && R->x[i].started && !R->x[i].finished) busy = 1;
            if (busy) continue;
            for (int i = 0; i < R->nx; i++) {
                ref_xfer *x = &R->x[i];
                if (x->src != s || x->dst != D || x->started) continue;
                if (best < 0 || x->enq < R->x[best].enq ||
                    (x->enq == R->x[best].enq && f->rank[x->u] < f->rank[R->x[best].u]))
                    best = i;
            }
            if (best < 0) continue;
            ref_xfer *x = &R->x[best];
            x->started = 1;
            x->start = t;
            x->end = t + gopt_cost_transfer_time(R->cm, s, D, x->bytes);
            out->bytes += x->bytes;
        }
    for (int D = 0; D < R->nd; D++) {
        int64_t m = ref_memory(R, D);
        if (m > out->peak[D]) {
            out->peak[D] = m;
            out->peak_t[D] = t;
        }
    }
}

static void ref_simulate(const gopt_graph *g, const gopt_costmodel *cm, const gopt_decisions *d, ref_result *out) {
    static ref_state R;
    memset(&R, 0, sizeof R);
    memset(out, 0, sizeof *out);
    const gopt_frozen *f = gopt_graph_frozen(g);
    R.f = f;
    R.d = d;
    R.cm = cm;
    R.n = f->n;
    R.nd = gopt_cost_num_devices(cm);
    assert_true(R.n <= 64);
    gopt_cost_table tab;
    gopt_error err = {0};
    assert_int_equal(gopt_cost_table_build(cm, g, &tab, &err), GOPT_OK);
    for (int v = 0; v < R.n; v++) {
        int best = v;
        if (d->group[v] >= 0)
            for (int w = 0; w < R.n; w++)
                if (d->group[w] == d->group[v] && f->rank[w] < f->rank[best]) best = w;
        R.rep[v] = best;
    }
    for (int c = 0; c < R.n; c++) {
        if (R.rep[c] != c) continue;
        out->ntasks++;
        int mem[64], k = 0, D = d->device[c];
        for (int i = 0; i < R.n; i++)
            if (R.rep[f->topo[i]] == c) mem[k++] = f->topo[i];
        double extb = 0;
        R.prio[c] = INT32_MIN;
        for (int j = 0; j < k; j++) {
            int v = mem[j], outdeg = 0, leaves = 0;
            if (d->priority[v] > R.prio[c]) R.prio[c] = d->priority[v];
            int pass = !tab.heavy[v]; /* the memory pass moves the memory-bound members' bytes */
            for (int e = 0; e < f->m; e++) {
                if (pass && f->edge_dst[e] == v && R.rep[f->edge_src[e]] != c) {
                    /* a data-movement op reads at most its output from one input (a slice) */
                    double b = f->edge_bytes[e];
                    extb += f->op_class[v] == GOPT_OP_CLASS_DATA_MOVEMENT && f->out_bytes[v] < b ? f->out_bytes[v] : b;
                }
                if (f->edge_src[e] == v) {
                    outdeg++;
                    if (R.rep[f->edge_dst[e]] != c) leaves = 1;
                }
            }
            R.ext[v] = k == 1 || outdeg == 0 || leaves;
            if (R.ext[v] && pass) extb += f->out_bytes[v];
        }
        R.dur[c] = k == 1 ? tab.time[c * R.nd + D] : gopt_cost_group_time(&tab, D, mem, k, extb);
    }
    double t = 0;
    ref_dispatch(&R, t, out);
    for (;;) {
        int any = 0;
        double next = 0;
        for (int c = 0; c < R.n; c++)
            if (R.rep[c] == c && R.started[c] && !R.finished[c] && (!any || R.en[c] < next)) {
                next = R.en[c];
                any = 1;
            }
        for (int i = 0; i < R.nx; i++)
            if (R.x[i].started && !R.x[i].finished && (!any || R.x[i].end < next)) {
                next = R.x[i].end;
                any = 1;
            }
        if (!any) break;
        t = next;
        int nx0 = R.nx;
        for (int i = 0; i < nx0; i++)
            if (R.x[i].started && !R.x[i].finished && R.x[i].end == t) R.x[i].finished = 1;
        for (int c = 0; c < R.n; c++) {
            if (R.rep[c] != c || !R.started[c] || R.finished[c] || R.en[c] != t) continue;
            R.finished[c] = 1;
            int src = d->device[c];
            for (int v = 0; v < R.n; v++) {
                if (R.rep[v] != c || !R.ext[v]) continue;
                for (int D = 0; D < R.nd; D++) {
                    if (D == src) continue;
                    double maxb = -1;
                    for (int e = 0; e < f->m; e++)
                        if (f->edge_src[e] == v && R.rep[f->edge_dst[e]] != c && d->device[f->edge_dst[e]] == D &&
                            f->edge_bytes[e] > maxb)
                            maxb = f->edge_bytes[e];
                    if (maxb < 0) continue;
                    assert_true(R.nx < 256);
                    R.x[R.nx++] = (ref_xfer){v, src, D, 0, 0, maxb, t, -1, -1};
                }
            }
        }
        ref_dispatch(&R, t, out);
    }
    for (int c = 0; c < R.n; c++)
        if (R.rep[c] == c) assert_true(R.finished[c]);
    out->step = t;
    out->nxfer = R.nx;
    for (int v = 0; v < R.n; v++) out->start[v] = R.st[R.rep[v]];
    gopt_cost_table_destroy(&tab);
}

/* ---- random small graphs and decisions ------------------------------------------------------ */
static gopt_graph *random_graph(gopt_rng *rng, int n) {
    static const gopt_op_class CL[] = {GOPT_OP_CLASS_INPUT,       GOPT_OP_CLASS_PARAM,     GOPT_OP_CLASS_OTHER,
                                       GOPT_OP_CLASS_ELEMENTWISE, GOPT_OP_CLASS_REDUCTION, GOPT_OP_CLASS_GEMM,
                                       GOPT_OP_CLASS_DATA_MOVEMENT}; /* a slice: reads at most its output */
    node_spec nodes[64];
    edge_spec edges[512];
    char names[64][16];
    int m = 0;
    for (int v = 0; v < n; v++) {
        snprintf(names[v], sizeof names[v], "n%d", v);
        gopt_op_class c = CL[gopt_rng_below(rng, 7)];
        double flops = c == GOPT_OP_CLASS_INPUT || c == GOPT_OP_CLASS_PARAM ? 0 : (double)gopt_rng_below(rng, 5);
        double out = 256.0 * (double)gopt_rng_below(rng, 9);
        nodes[v] = (node_spec){names[v], c, flops, out, c == GOPT_OP_CLASS_PARAM ? out * 3 : 0};
    }
    for (int j = 1; j < n; j++)
        for (int i = 0; i < j; i++)
            if (gopt_rng_below(rng, 10) < 3 && m < 512) {
                double b = gopt_rng_below(rng, 4) ? nodes[i].out : 128.0 * (double)gopt_rng_below(rng, 5);
                edges[m++] = (edge_spec){i, j, b};
                if (gopt_rng_below(rng, 20) == 0 && m < 512) edges[m++] = (edge_spec){i, j, b}; /* a multi-edge */
            }
    return graph_make(nodes, n, edges, m);
}

/* Random valid decisions: devices, priorities in a small range (many ties), fusion by merging
 * groups along random same-device edges, each merge kept only when still valid. */
static void random_decisions(gopt_rng *rng, const gopt_graph *g, int ndev, gopt_decisions *d, int fuse) {
    const gopt_frozen *f = gopt_graph_frozen(g);
    gopt_error err = {0};
    for (int v = 0; v < f->n; v++) {
        d->device[v] = (int32_t)gopt_rng_below(rng, (uint64_t)ndev);
        d->priority[v] = (int32_t)gopt_rng_below(rng, 3) - 1;
        d->group[v] = -1;
    }
    if (!fuse || f->m == 0) return;
    int32_t *save = malloc((size_t)f->n * sizeof *save);
    for (int tries = 0; tries < 6; tries++) {
        int e = (int)gopt_rng_below(rng, (uint64_t)f->m);
        int u = f->edge_src[e], v = f->edge_dst[e];
        memcpy(save, d->group, (size_t)f->n * sizeof *save);
        memcpy(save, d->group, (size_t)f->n * sizeof *save);
        int32_t dv = d->device[u], old = d->device[v];
        d->device[v] = dv;
        int32_t gu = d->group[u] >= 0 ? d->group[u] : u, gv = d->group[v];
        d->group[u] = gu;
        for (int w = 0; w < f->n; w++)
            if (gv >= 0 && d->group[w] == gv) {
                d->group[w] = gu;
                d->device[w] = dv;
            }
        d->group[v] = gu;
        if (gopt_decisions_validate(d, g, ndev, &err) != GOPT_OK) {
            memcpy(d->group, save, (size_t)f->n * sizeof *save);
            d->device[v] = old;
            for (int w = 0; w < f->n; w++)
                if (gv >= 0 && save[w] == gv) d->device[w] = old;
        }
    }
    free(save);
    assert_int_equal(gopt_decisions_validate(d, g, ndev, &err), GOPT_OK);
}

/* Soak mode, for a long one-off run outside CI: GOPT_SIM_SOAK=K runs K times as many random
 * cases, GOPT_SIM_SOAK_SEED=S draws them from another seed (defaults: 1 and 0, what ctest runs). */
static int soak_factor(void) {
    const char *e = getenv("GOPT_SIM_SOAK");
    int k = e ? atoi(e) : 1;
    return k >= 1 ? k : 1;
}

static void test_reference_random(void **state) {
    (void)state;
    gopt_rng rng;
    const char *seed_env = getenv("GOPT_SIM_SOAK_SEED");
    gopt_rng_seed(&rng, 20261121 + (seed_env ? strtoull(seed_env, NULL, 10) : 0));
    const int soak = soak_factor();
    cluster cl[3];
    cluster_make(&cl[0], UNIT_PROFILE, 2, 1e6);
    cluster_make(&cl[1], UNIT_PROFILE, 3, 4096);
    cluster_make(&cl[2], ODD_PROFILE, 4, 1e6);
    int cases = 0, fused_cases = 0, with_transfers = 0, ooms = 0;
    for (int it = 0; it < 600 * soak; it++) {
        int n = 2 + (int)gopt_rng_below(&rng, 13);
        gopt_graph *g = random_graph(&rng, n);
        const cluster *c = &cl[it % 3];
        int nd = gopt_cost_num_devices(c->cm);
        gopt_sim *sim;
        gopt_sim_scratch *s;
        gopt_error err = {0};
        assert_int_equal(gopt_sim_create(g, c->cm, &sim, &err), GOPT_OK);
        assert_int_equal(gopt_sim_scratch_create(sim, &s, &err), GOPT_OK);
        gopt_decisions d;
        assert_int_equal(gopt_decisions_init(&d, n, &err), GOPT_OK);
        for (int rep = 0; rep < 2; rep++) {
            random_decisions(&rng, g, nd, &d, (int)gopt_rng_below(&rng, 3));
            gopt_sim_result r;
            ref_result want;
            assert_int_equal(gopt_sim_run(sim, &d, &r, s, &err), GOPT_OK);
            ref_simulate(g, c->cm, &d, &want);
            int bad = r.step_time_s != want.step || r.tasks != want.ntasks || r.transfers != want.nxfer ||
                      r.transferred_bytes != want.bytes;
            for (int v = 0; v < n; v++) bad |= gopt_sim_node_start(s, v) != want.start[v];
            for (int dd = 0; dd < nd; dd++)
                bad |= r.busy_s[dd] != want.busy[dd] || r.peak_memory_bytes[dd] != want.peak[dd] ||
                       r.peak_time_s[dd] != want.peak_t[dd];
            if (bad) {
                print_error("case %d.%d: n=%d ndev=%d: step %.17g vs ref %.17g, tasks %d/%d, transfers %d/%d\n", it, rep,
                            n, nd, r.step_time_s, want.step, r.tasks, want.ntasks, r.transfers, want.nxfer);
                for (int v = 0; v < n; v++)
                    print_error("  node %d dev %d prio %d group %d: start %.17g vs %.17g\n", v, d.device[v],
                                d.priority[v], d.group[v], gopt_sim_node_start(s, v), want.start[v]);
                for (int dd = 0; dd < nd; dd++)
                    print_error("  device %d: peak %lld vs %lld at %.17g vs %.17g, busy %.17g vs %.17g\n", dd,
                                (long long)r.peak_memory_bytes[dd], (long long)want.peak[dd], r.peak_time_s[dd],
                                want.peak_t[dd], r.busy_s[dd], want.busy[dd]);
            }
            assert_false(bad);
            cases++;
            fused_cases += r.tasks < n;
            with_transfers += r.transfers > 0;
            ooms += r.oom;
        }
        gopt_decisions_destroy(&d);
        gopt_sim_scratch_free(s);
        gopt_sim_free(sim);
        gopt_graph_free(g);
    }
    /* more than 32 devices: the transfer records are found by search, not by device mask */
    cluster wide;
    cluster_make(&wide, UNIT_PROFILE, 40, 1e6);
    for (int it = 0; it < 150 * soak; it++) {
        int n = 4 + (int)gopt_rng_below(&rng, 11);
        gopt_graph *g = random_graph(&rng, n);
        gopt_sim *sim;
        gopt_sim_scratch *s;
        gopt_error err = {0};
        gopt_decisions d;
        assert_int_equal(gopt_sim_create(g, wide.cm, &sim, &err), GOPT_OK);
        assert_int_equal(gopt_sim_scratch_create(sim, &s, &err), GOPT_OK);
        assert_int_equal(gopt_decisions_init(&d, n, &err), GOPT_OK);
        random_decisions(&rng, g, 40, &d, it % 2);
        for (int v = 0; v < n; v++) /* spread over the high devices too */
            if (d.group[v] < 0) d.device[v] = 33 + (int32_t)gopt_rng_below(&rng, 4);
        gopt_sim_result r;
        ref_result want;
        assert_int_equal(gopt_sim_run(sim, &d, &r, s, &err), GOPT_OK);
        ref_simulate(g, wide.cm, &d, &want);
        assert_true(r.step_time_s == want.step);
        assert_int_equal(r.transfers, want.nxfer);
        for (int dd = 0; dd < 40; dd++) assert_true(r.peak_memory_bytes[dd] == want.peak[dd]);
        for (int dd = 0; dd < 40; dd++) assert_true(r.peak_time_s[dd] == want.peak_t[dd]);
        for (int v = 0; v < n; v++) assert_true(gopt_sim_node_start(s, v) == want.start[v]);
        gopt_decisions_destroy(&d);
        gopt_sim_scratch_free(s);
        gopt_sim_free(sim);
        gopt_graph_free(g);
    }
    cluster_free(&wide);
    /* a link with a measured copy table: its transfers take the table's time */
    cluster tabc;
    cluster_make(&tabc, TABLE_PROFILE, 3, 1e6);
    assert_true(fabs(gopt_cost_transfer_time(tabc.cm, 0, 1, 1024) - 3.0) < 1e-9); /* the table, not 1 + 1024/1024 */
    for (int it = 0; it < 150 * soak; it++) {
        int n = 3 + (int)gopt_rng_below(&rng, 10);
        gopt_graph *g = random_graph(&rng, n);
        gopt_sim *sim;
        gopt_sim_scratch *s;
        gopt_error err = {0};
        gopt_decisions d;
        assert_int_equal(gopt_sim_create(g, tabc.cm, &sim, &err), GOPT_OK);
        assert_int_equal(gopt_sim_scratch_create(sim, &s, &err), GOPT_OK);
        assert_int_equal(gopt_decisions_init(&d, n, &err), GOPT_OK);
        random_decisions(&rng, g, 3, &d, it % 2);
        gopt_sim_result r;
        ref_result want;
        assert_int_equal(gopt_sim_run(sim, &d, &r, s, &err), GOPT_OK);
        ref_simulate(g, tabc.cm, &d, &want);
        assert_true(r.step_time_s == want.step);
        assert_int_equal(r.transfers, want.nxfer);
        for (int dd = 0; dd < 3; dd++) assert_true(r.peak_memory_bytes[dd] == want.peak[dd]);
        for (int dd = 0; dd < 3; dd++) assert_true(r.peak_time_s[dd] == want.peak_t[dd]);
        for (int v = 0; v < n; v++) assert_true(gopt_sim_node_start(s, v) == want.start[v]);
        for (int i = 0; i < r.transfers; i++) {
            gopt_sim_transfer t;
            gopt_sim_transfer_get(s, i, &t);
            EXACT(t.end - t.start, gopt_cost_transfer_time(tabc.cm, t.src, t.dst, t.bytes));
        }
        gopt_decisions_destroy(&d);
        gopt_sim_scratch_free(s);
        gopt_sim_free(sim);
        gopt_graph_free(g);
    }
    cluster_free(&tabc);
    /* the random cases exercise what they should */
    assert_int_equal(cases, 1200 * soak);
    assert_true(fused_cases > 100);
    assert_true(with_transfers > 400);
    assert_true(ooms > 10);
    for (int i = 0; i < 3; i++) cluster_free(&cl[i]);
}

/* ---- larger graphs: invariants, determinism, batch ------------------------------------------ */
/* A layered training-step-like DAG: n nodes in layers of `width`, each node reading 1-3 nodes
 * of the previous two layers; params (colocated with nothing) feed some gemms. */
static gopt_graph *layered_graph(gopt_rng *rng, int n, int width) {
    gopt_graph *g;
    gopt_error err = {0};
    assert_int_equal(gopt_graph_create(&g, "layered", "test", &err), GOPT_OK);
    static const gopt_op_class CL[] = {GOPT_OP_CLASS_GEMM, GOPT_OP_CLASS_ELEMENTWISE, GOPT_OP_CLASS_REDUCTION,
                                       GOPT_OP_CLASS_ELEMENTWISE, GOPT_OP_CLASS_OTHER, GOPT_OP_CLASS_PARAM};
    char name[32];
    for (int v = 0; v < n; v++) {
        gopt_node_attrs a = {0};
        snprintf(name, sizeof name, "v%d", v);
        a.name = name;
        a.op = "Op";
        a.cls = v < width ? GOPT_OP_CLASS_INPUT : CL[gopt_rng_below(rng, 6)];
        a.flops = a.cls == GOPT_OP_CLASS_INPUT || a.cls == GOPT_OP_CLASS_PARAM ? 0 : 1e6 * (double)(1 + gopt_rng_below(rng, 1000));
        a.out_bytes = 4096.0 * (double)(1 + gopt_rng_below(rng, 256));
        a.param_bytes = a.cls == GOPT_OP_CLASS_PARAM ? 3 * a.out_bytes : 0;
        a.layer = v / width;
        assert_int_equal(gopt_graph_add_node(g, &a, NULL, &err), GOPT_OK);
    }
    const gopt_frozen *none = NULL;
    (void)none;
    for (int v = width; v < n; v++) {
        int k = 1 + (int)gopt_rng_below(rng, 3);
        int lo = (v / width - 2) * width;
        if (lo < 0) lo = 0;
        int hi = (v / width) * width; /* previous layers only */
        for (int j = 0; j < k; j++) {
            int u = lo + (int)gopt_rng_below(rng, (uint64_t)(hi - lo));
            gopt_node_attrs a;
            gopt_graph_node(g, u, &a);
            assert_int_equal(gopt_graph_add_edge(g, u, v, a.out_bytes, &err), GOPT_OK);
        }
    }
    assert_int_equal(gopt_graph_finalize(g, &err), GOPT_OK);
    return g;
}

/* Random valid fusion for a large graph: chains u -> v where v is u's only consumer, u is
 * v's only producer, both on one device (always legal: contraction cannot make a cycle). */
static void fuse_chains(gopt_rng *rng, const gopt_graph *g, gopt_decisions *d) {
    const gopt_frozen *f = gopt_graph_frozen(g);
    for (int i = 0; i < f->n; i++) {
        int u = f->topo[i];
        if (f->out_ptr[u + 1] - f->out_ptr[u] != 1 || gopt_rng_below(rng, 2)) continue;
        int v = f->out_dst[f->out_ptr[u]];
        if (f->in_ptr[v + 1] - f->in_ptr[v] != 1 || d->device[u] != d->device[v]) continue;
        if (d->group[u] < 0) d->group[u] = u;
        d->group[v] = d->group[u];
    }
}

/* The rules Perfetto's JSON importer applies (trace_processor: importers/json), so that a trace
 * that passes here opens there as written: pid and tid not 0 (pid 0 / tid 0 are the kernel's
 * swapper, handled specially); ts and dur in microseconds, turned into integer nanoseconds by
 * truncation (static_cast<int64_t>(us * 1000)); complete events ("X") of one thread must nest or
 * not overlap, else the later one is mis-nested or dropped. Checked under truncation and under
 * rounding to the nearest nanosecond (what other readers do). Returns the number of X events. */
typedef struct {
    int64_t ts, end;
    int tid;
} trace_slice;

static int cmp_slice(const void *a, const void *b) {
    const trace_slice *x = a, *y = b;
    if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    return (x->end > y->end) - (x->end < y->end);
}

static int check_trace_perfetto(json_t *ev) {
    size_t n = json_array_size(ev), nx = 0;
    trace_slice *sl = calloc(n + 1, sizeof *sl);
    assert_non_null(sl);
    for (int mode = 0; mode < 2; mode++) {
        nx = 0;
        for (size_t i = 0; i < n; i++) {
            json_t *e = json_array_get(ev, i);
            assert_true(json_is_integer(json_object_get(e, "pid")));
            assert_true(json_is_integer(json_object_get(e, "tid")));
            json_int_t pid = json_integer_value(json_object_get(e, "pid"));
            json_int_t tid = json_integer_value(json_object_get(e, "tid"));
            if (pid < 1 || tid < 1) print_error("trace event %zu: pid %lld tid %lld (0 is the swapper's)\n", i,
                                                (long long)pid, (long long)tid);
            assert_true(pid >= 1 && tid >= 1);
            const char *ph = json_string_value(json_object_get(e, "ph"));
            if (strcmp(ph, "C") == 0) { /* a counter: numeric bytes */
                assert_true(json_is_integer(json_object_get(json_object_get(e, "args"), "bytes")));
                assert_true(json_number_value(json_object_get(e, "ts")) >= 0);
            }
            if (strcmp(ph, "X") != 0) continue;
            double ts = json_number_value(json_object_get(e, "ts")), du = json_number_value(json_object_get(e, "dur"));
            assert_true(ts >= 0 && du >= 0);
            int64_t a = mode == 0 ? (int64_t)(ts * 1000) : llround(ts * 1000);
            int64_t d = mode == 0 ? (int64_t)(du * 1000) : llround(du * 1000);
            sl[nx++] = (trace_slice){a, a + d, (int)tid};
        }
        qsort(sl, nx, sizeof *sl, cmp_slice);
        for (size_t i = 1; i < nx; i++) {
            if (sl[i].tid != sl[i - 1].tid) continue;
            if (sl[i].ts < sl[i - 1].end)
                print_error("trace: tid %d: a slice at %lld ns starts before the one at %lld ns ends (%lld ns; %s)\n",
                            sl[i].tid, (long long)sl[i].ts, (long long)sl[i - 1].ts, (long long)sl[i - 1].end,
                            mode == 0 ? "truncated" : "rounded");
            assert_true(sl[i].ts >= sl[i - 1].end);
        }
    }
    free(sl);
    return (int)nx;
}

/* The memory log of the last run (recording on): time never goes back, each device starts at
 * its parameters at time 0 and ends there (every tensor freed), and its largest value is the
 * run's peak. */
static void check_memory_log(const gopt_sim_scratch *s, const gopt_sim_result *r) {
    int64_t n = gopt_sim_memory_samples(s), first[GOPT_SIM_MAX_DEVICES], lastv[GOPT_SIM_MAX_DEVICES],
            maxv[GOPT_SIM_MAX_DEVICES];
    double tmax[GOPT_SIM_MAX_DEVICES] = {0};
    assert_true(n >= r->ndev);
    double prev = 0;
    for (int dd = 0; dd < r->ndev; dd++) first[dd] = -1;
    for (int64_t i = 0; i < n; i++) {
        double t;
        int dv;
        int64_t b;
        gopt_sim_memory_sample(s, i, &t, &dv, &b);
        assert_true(dv >= 0 && dv < r->ndev);
        assert_true(t >= prev && t <= r->step_time_s);
        assert_true(b >= 0);
        prev = t;
        if (first[dv] < 0) {
            assert_true(t == 0);
            first[dv] = maxv[dv] = b;
            tmax[dv] = t;
        }
        if (b > maxv[dv]) {
            maxv[dv] = b;
            tmax[dv] = t;
        }
        lastv[dv] = b;
    }
    for (int dd = 0; dd < r->ndev; dd++) {
        assert_true(first[dd] >= 0);
        assert_int_equal(maxv[dd], r->peak_memory_bytes[dd]);
        assert_true(tmax[dd] == r->peak_time_s[dd]); /* first reached then */
        assert_int_equal(lastv[dd], first[dd]);
    }
}

/* Write the last run's trace to a file, read it back and apply check_trace_perfetto. */
static void check_trace_file(const gopt_sim *sim, const gopt_decisions *d, const gopt_sim_scratch *s,
                             const gopt_sim_result *r) {
    char path[400];
    snprintf(path, sizeof path, "%s/trace_check.json", tmpdir);
    gopt_error err = {0};
    assert_int_equal(gopt_sim_trace_write(sim, d, s, path, &err), GOPT_OK);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) print_error("%s: line %d: %s\n", path, je.line, je.text);
    assert_non_null(root);
    assert_int_equal(check_trace_perfetto(json_object_get(root, "traceEvents")), r->tasks + r->transfers);
    json_decref(root);
    unlink(path);
}

/* Validate d, simulate it and check the invariants every run must satisfy (the zoo and random
 * graphs' tests share this). */
static void run_checked(gopt_sim *sim, gopt_sim_scratch *s, const gopt_decisions *d, gopt_sim_result *r) {
    const gopt_graph *g = gopt_sim_graph(sim);
    gopt_error err = {0};
    gopt_status vst = gopt_decisions_validate(d, g, gopt_sim_num_devices(sim), &err);
    if (vst) print_error("%s\n", err.msg);
    assert_int_equal(vst, GOPT_OK);
    assert_int_equal(gopt_sim_run(sim, d, r, s, &err), GOPT_OK);
    const gopt_frozen *f = gopt_graph_frozen(g);
    const gopt_cost_table *t = gopt_sim_cost_table(sim);
    int nd = gopt_sim_num_devices(sim);
    const double eps = 1e-12 * (1 + r->step_time_s);
    /* precedence: a consumer starts after its producer's kernel ends (and after the transfer) */
    for (int e = 0; e < f->m; e++) {
        int u = f->edge_src[e], v = f->edge_dst[e];
        if (gopt_sim_node_start(s, u) == gopt_sim_node_start(s, v) && d->group[u] >= 0 && d->group[u] == d->group[v])
            continue;
        assert_true(gopt_sim_node_start(s, v) >= gopt_sim_node_end(s, u));
    }
    /* the critical path of kernel times, unfused nodes only where no fusion */
    double *fin = calloc((size_t)f->n, sizeof *fin), cp = 0, total = 0, maxbusy = 0;
    int fused = 0;
    for (int v = 0; v < f->n; v++) fused |= d->group[v] >= 0;
    for (int i = 0; i < f->n; i++) {
        int v = f->topo[i];
        double st = 0;
        for (int k = f->in_ptr[v]; k < f->in_ptr[v + 1]; k++)
            if (fin[f->in_src[k]] > st) st = fin[f->in_src[k]];
        fin[v] = st + t->time[(size_t)v * nd + d->device[v]];
        if (fin[v] > cp) cp = fin[v];
    }
    free(fin);
    if (!fused) assert_true(r->step_time_s + eps >= cp);
    for (int dd = 0; dd < nd; dd++) {
        total += r->busy_s[dd];
        if (r->busy_s[dd] > maxbusy) maxbusy = r->busy_s[dd];
        assert_true(r->peak_memory_bytes[dd] >= 0);
    }
    assert_true(r->step_time_s + eps >= total / nd);
    assert_true(r->step_time_s + eps >= maxbusy);
    /* transfers: after the producer, before the consumers on the receiver; one at a time per link */
    int nx = gopt_sim_num_transfers(s);
    assert_int_equal(nx, r->transfers);
    double sent = 0;
    double *link_end = calloc((size_t)nd * nd, sizeof *link_end);
    for (int i = 0; i < nx; i++) {
        gopt_sim_transfer x;
        gopt_sim_transfer_get(s, i, &x);
        sent += x.bytes;
        assert_true(x.start >= gopt_sim_node_end(s, x.node));
        assert_true(x.end >= x.start);
        for (int k = f->out_ptr[x.node]; k < f->out_ptr[x.node + 1]; k++)
            if (d->device[f->out_dst[k]] == x.dst) assert_true(gopt_sim_node_start(s, f->out_dst[k]) >= x.end);
    }
    /* links: sort-free check, the transfers of a link in start order do not overlap */
    for (int l = 0; l < nd * nd; l++) {
        double last_end = -1, last_start = -1;
        for (;;) { /* take the next transfer of link l by start time (O(nx^2) worst, fine here) */
            int best = -1;
            gopt_sim_transfer bx = {0};
            for (int i = 0; i < nx; i++) {
                gopt_sim_transfer x;
                gopt_sim_transfer_get(s, i, &x);
                if (x.src * nd + x.dst != l || x.start < last_start || (x.start == last_start && x.end <= last_end)) continue;
                if (best < 0 || x.start < bx.start) {
                    best = i;
                    bx = x;
                }
            }
            if (best < 0) break;
            assert_true(bx.start >= last_end || last_end < 0);
            last_start = bx.start;
            last_end = bx.end;
        }
    }
    free(link_end);
    assert_true(fabs(sent - r->transferred_bytes) <= 1e-9 * (1 + sent));
}

static void test_invariants_layered(void **state) {
    (void)state;
    gopt_rng rng;
    gopt_rng_seed(&rng, 7);
    gopt_profile *p;
    gopt_costmodel *cm;
    gopt_error err = {0};
    assert_int_equal(gopt_profile_load(GOPT_SOURCE_DIR "/profiles/v100-dgx1-x8.json", &p, &err), GOPT_OK);
    assert_int_equal(gopt_cost_create(p, 8, &cm, &err), GOPT_OK);
    for (int gi = 0; gi < 3; gi++) {
        gopt_graph *g = layered_graph(&rng, 300 + 150 * gi, 12 + 4 * gi);
        gopt_sim *sim;
        gopt_sim_scratch *s;
        assert_int_equal(gopt_sim_create(g, cm, &sim, &err), GOPT_OK);
        assert_int_equal(gopt_sim_scratch_create(sim, &s, &err), GOPT_OK);
        gopt_decisions d;
        assert_int_equal(gopt_decisions_init(&d, gopt_graph_num_nodes(g), &err), GOPT_OK);
        for (int k = 0; k < 6; k++) {
            for (int v = 0; v < d.n; v++) {
                d.device[v] = k == 0 ? 0 : (int32_t)gopt_rng_below(&rng, 8);
                d.priority[v] = (int32_t)gopt_rng_below(&rng, 1000);
                d.group[v] = -1;
            }
            if (k >= 3) fuse_chains(&rng, g, &d);
            gopt_sim_result r;
            run_checked(sim, s, &d, &r);
            if (k == 0) { /* one device: no transfer, the step is the sum of the kernels */
                assert_int_equal(r.transfers, 0);
                assert_true(fabs(r.step_time_s - r.busy_s[0]) <= 1e-9 * r.step_time_s);
            }
        }
        gopt_decisions_destroy(&d);
        gopt_sim_scratch_free(s);
        gopt_sim_free(sim);
        gopt_graph_free(g);
    }
    gopt_cost_free(cm);
    gopt_profile_free(p);
}

/* The zoo's training-step graphs (small settings): random placement per colocation group,
 * random priorities, chain fusion on half the runs; the same invariants. */
static void test_invariants_zoo(void **state) {
    (void)state;
    gopt_rng rng;
    gopt_rng_seed(&rng, 5);
    gopt_profile *p;
    gopt_costmodel *cm;
    gopt_error err = {0};
    assert_int_equal(gopt_profile_load(GOPT_SOURCE_DIR "/profiles/a100-nvswitch-x8.json", &p, &err), GOPT_OK);
    assert_int_equal(gopt_cost_create(p, 8, &cm, &err), GOPT_OK);
    const gopt_zoo_spec specs[] = {{"gnmt", 2, 0, 8, GOPT_OPTIM_DEFAULT, 0},
                                   {"transformer_xl", 2, 0, 512, GOPT_OPTIM_DEFAULT, 0},
                                   {"rnnlm", 2, 0, 8, GOPT_OPTIM_DEFAULT, 0},
                                   {"inception_v3", 0, 0, 0, GOPT_OPTIM_DEFAULT, 0},
                                   {"wavenet", 6, 0, 1000, GOPT_OPTIM_DEFAULT, 0}};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        gopt_graph *g;
        gopt_status st = gopt_zoo_generate(&specs[i], &g, &err);
        if (st) print_error("%s\n", err.msg);
        assert_int_equal(st, GOPT_OK);
        const gopt_frozen *f = gopt_graph_frozen(g);
        gopt_sim *sim;
        gopt_sim_scratch *s;
        assert_int_equal(gopt_sim_create(g, cm, &sim, &err), GOPT_OK);
        assert_int_equal(gopt_sim_scratch_create(sim, &s, &err), GOPT_OK);
        gopt_decisions d;
        assert_int_equal(gopt_decisions_init(&d, f->n, &err), GOPT_OK);
        int32_t *cdev = calloc((size_t)f->n_coloc + 1, sizeof *cdev);
        for (int k = 0; k < 4; k++) {
            for (int32_t c = 0; c < f->n_coloc; c++) cdev[c] = (int32_t)gopt_rng_below(&rng, 8);
            for (int32_t v = 0; v < f->n; v++) {
                d.device[v] = f->coloc[v] >= 0 ? cdev[f->coloc[v]] : (int32_t)gopt_rng_below(&rng, 8);
                d.priority[v] = (int32_t)gopt_rng_below(&rng, 100);
                d.group[v] = -1;
            }
            if (k % 2) fuse_chains(&rng, g, &d);
            gopt_sim_result r;
            run_checked(sim, s, &d, &r);
            assert_true(r.transfers > 0);
            if (k == 1) { /* recording memory changes nothing else; its log agrees with the peaks */
                gopt_sim_result r2;
                assert_int_equal(gopt_sim_scratch_record_memory(s, 1, &err), GOPT_OK);
                assert_int_equal(gopt_sim_run(sim, &d, &r2, s, &err), GOPT_OK);
                assert_memory_equal(&r, &r2, sizeof r);
                check_memory_log(s, &r2);
                check_trace_file(sim, &d, s, &r2);
                assert_int_equal(gopt_sim_scratch_record_memory(s, 0, &err), GOPT_OK);
                assert_int_equal(gopt_sim_memory_samples(s), 0);
            }
        }
        free(cdev);
        gopt_decisions_destroy(&d);
        gopt_sim_scratch_free(s);
        gopt_sim_free(sim);
        gopt_graph_free(g);
    }
    gopt_cost_free(cm);
    gopt_profile_free(p);
}

static void test_determinism_and_batch(void **state) {
    (void)state;
    gopt_rng rng;
    gopt_rng_seed(&rng, 11);
    gopt_profile *p;
    gopt_costmodel *cm;
    gopt_error err = {0};
    assert_int_equal(gopt_profile_load(GOPT_SOURCE_DIR "/profiles/p100-pcie-x8.json", &p, &err), GOPT_OK);
    assert_int_equal(gopt_cost_create(p, 4, &cm, &err), GOPT_OK);
    gopt_graph *g = layered_graph(&rng, 800, 16);
    gopt_sim *sim;
    gopt_sim_scratch *sc[3];
    assert_int_equal(gopt_sim_create(g, cm, &sim, &err), GOPT_OK);
    for (int i = 0; i < 3; i++) assert_int_equal(gopt_sim_scratch_create(sim, &sc[i], &err), GOPT_OK);
    enum { K = 9 };
    gopt_decisions ds[K];
    gopt_sim_result seq[K], bat[K], again;
    for (int k = 0; k < K; k++) {
        assert_int_equal(gopt_decisions_init(&ds[k], gopt_graph_num_nodes(g), &err), GOPT_OK);
        for (int v = 0; v < ds[k].n; v++) {
            ds[k].device[v] = (int32_t)gopt_rng_below(&rng, 4);
            ds[k].priority[v] = (int32_t)gopt_rng_below(&rng, 50);
            ds[k].group[v] = -1;
        }
        if (k % 2) fuse_chains(&rng, g, &ds[k]);
        memset(&seq[k], 0, sizeof seq[k]);
        assert_int_equal(gopt_sim_run(sim, &ds[k], &seq[k], sc[0], &err), GOPT_OK);
    }
    /* the same run again, after others, in another scratch: bit for bit */
    memset(&again, 0, sizeof again);
    assert_int_equal(gopt_sim_run(sim, &ds[3], &again, sc[2], &err), GOPT_OK);
    assert_memory_equal(&again, &seq[3], sizeof again);
    for (int nt = 1; nt <= 3; nt++) {
        memset(bat, 0xff, sizeof bat);
        assert_int_equal(gopt_sim_run_batch(sim, ds, K, bat, sc, nt, &err), GOPT_OK);
        for (int k = 0; k < K; k++) {
            /* memset before: padding bytes compare too */
            gopt_sim_result x;
            memset(&x, 0, sizeof x);
            x = bat[k];
            assert_true(x.step_time_s == seq[k].step_time_s);
            assert_memory_equal(x.peak_memory_bytes, seq[k].peak_memory_bytes, sizeof x.peak_memory_bytes);
            assert_memory_equal(x.busy_s, seq[k].busy_s, sizeof x.busy_s);
            assert_int_equal(x.transfers, seq[k].transfers);
            assert_true(x.transferred_bytes == seq[k].transferred_bytes);
        }
    }
    /* different decisions give different results (the comparison can fail) */
    assert_true(seq[0].step_time_s != seq[1].step_time_s);
    /* a failing item: the lowest failing index is reported, the others are filled */
    ds[5].device[0] = 9;
    ds[7].device[0] = 9;
    assert_int_equal(gopt_sim_run_batch(sim, ds, K, bat, sc, 2, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "decision set 5"));
    assert_true(bat[8].step_time_s == seq[8].step_time_s);
    assert_int_equal(gopt_sim_run_batch(sim, ds, K, bat, sc, 0, &err), GOPT_EINVAL);
    for (int k = 0; k < K; k++) gopt_decisions_destroy(&ds[k]);
    for (int i = 0; i < 3; i++) gopt_sim_scratch_free(sc[i]);
    gopt_sim_free(sim);
    gopt_graph_free(g);
    gopt_cost_free(cm);
    gopt_profile_free(p);
}

/* ---- trace ---------------------------------------------------------------------------------- */
static void test_trace(void **state) {
    (void)state;
    cluster c;
    cluster_make(&c, UNIT_PROFILE, 2, 1e6);
    node_spec nodes[] = {{"s\"q", GOPT_OP_CLASS_OTHER, 1, 1024, 0},
                         {"l", GOPT_OP_CLASS_ELEMENTWISE, 4, 1024, 0},
                         {"l2", GOPT_OP_CLASS_ELEMENTWISE, 4, 1024, 0},
                         {"r", GOPT_OP_CLASS_OTHER, 2, 2048, 0},
                         {"t", GOPT_OP_CLASS_OTHER, 1, 0, 0}};
    edge_spec edges[] = {{0, 1, 1024}, {1, 2, 1024}, {0, 3, 1024}, {2, 4, 1024}, {3, 4, 2048}};
    gopt_graph *g = graph_make(nodes, 5, edges, 5);
    gopt_sim *sim;
    gopt_sim_scratch *s;
    gopt_decisions d;
    gopt_sim_result r;
    int dev[] = {0, 0, 0, 1, 0}, grp[] = {-1, 1, 1, -1, -1};
    gopt_error err = {0};
    assert_int_equal(gopt_sim_create(g, c.cm, &sim, &err), GOPT_OK);
    assert_int_equal(gopt_sim_scratch_create(sim, &s, &err), GOPT_OK);
    assert_int_equal(gopt_decisions_init(&d, 5, &err), GOPT_OK);
    char path[400];
    snprintf(path, sizeof path, "%s/trace.json", tmpdir);
    /* no finished run yet */
    assert_int_equal(gopt_sim_trace_write(sim, &d, s, path, &err), GOPT_EINVAL);
    assert_int_equal(access(path, F_OK), -1);
    gopt_decisions_set_default(&d, gopt_graph_frozen(g));
    memcpy(d.device, dev, sizeof dev);
    memcpy(d.group, grp, sizeof grp);
    assert_int_equal(gopt_sim_scratch_record_memory(s, 1, &err), GOPT_OK);
    assert_int_equal(gopt_sim_run(sim, &d, &r, s, &err), GOPT_OK);
    check_memory_log(s, &r);
    assert_int_equal(gopt_sim_trace_write(sim, &d, s, path, &err), GOPT_OK);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) print_error("%s: line %d: %s\n", path, je.line, je.text);
    assert_non_null(root);
    json_t *ev = json_object_get(root, "traceEvents");
    assert_true(json_is_array(ev));
    int kernels = 0, transfers = 0, dev_names = 0, link_names = 0, fused = 0;
    double last_end = 0;
    json_int_t mem_max[2] = {-1, -1};
    for (size_t i = 0; i < json_array_size(ev); i++) {
        json_t *e = json_array_get(ev, i);
        const char *ph = json_string_value(json_object_get(e, "ph"));
        const char *name = json_string_value(json_object_get(e, "name"));
        assert_non_null(ph);
        assert_non_null(name);
        int tid = (int)json_integer_value(json_object_get(e, "tid"));
        if (strcmp(ph, "M") == 0) {
            const char *tn = json_string_value(json_object_get(json_object_get(e, "args"), "name"));
            if (strcmp(name, "thread_name") == 0 && strncmp(tn, "device ", 7) == 0) dev_names++;
            if (strcmp(name, "thread_name") == 0 && strcmp(tn, "link 0->1") == 0 && tid == 2 + 1 + 1) link_names++;
            if (strcmp(name, "thread_name") == 0 && strcmp(tn, "link 1->0") == 0 && tid == 2 + 2 + 1) link_names++;
            continue;
        }
        if (strcmp(ph, "C") == 0) { /* memory counter of device tid - 1 */
            assert_true(tid == 1 || tid == 2);
            assert_string_equal(name, tid == 1 ? "memory device 0" : "memory device 1");
            json_int_t b = json_integer_value(json_object_get(json_object_get(e, "args"), "bytes"));
            if (b > mem_max[tid - 1]) mem_max[tid - 1] = b;
            continue;
        }
        assert_string_equal(ph, "X");
        double ts = json_number_value(json_object_get(e, "ts")), du = json_number_value(json_object_get(e, "dur"));
        if (ts + du > last_end) last_end = ts + du;
        const char *cat = json_string_value(json_object_get(e, "cat"));
        if (strcmp(cat, "transfer") == 0) {
            transfers++;
            assert_true(tid >= 3);
        } else {
            kernels++;
            assert_true(tid == 1 || tid == 2);
            if (strcmp(cat, "fused") == 0) {
                fused++;
                assert_string_equal(name, "l +1");
            }
        }
    }
    assert_int_equal(kernels, r.tasks);
    assert_int_equal(kernels, 4);
    assert_int_equal(fused, 1);
    assert_int_equal(transfers, r.transfers);
    assert_int_equal(dev_names, 2);
    assert_int_equal(link_names, 2);
    assert_int_equal(mem_max[0], r.peak_memory_bytes[0]); /* the counters reach the peaks */
    assert_int_equal(mem_max[1], r.peak_memory_bytes[1]);
    assert_true(fabs(last_end - r.step_time_s * 1e6) < 1e-3); /* nanosecond resolution */
    assert_int_equal(check_trace_perfetto(ev), r.tasks + r.transfers);
    json_decref(root);
    gopt_decisions_destroy(&d);
    gopt_sim_scratch_free(s);
    gopt_sim_free(sim);
    gopt_graph_free(g);
    cluster_free(&c);
}

/* ---- rejections ------------------------------------------------------------------------------ */
static void expect_run_error(const gopt_sim *sim, const gopt_decisions *d, gopt_sim_scratch *s, const char *a,
                             const char *b) {
    gopt_error err = {0};
    gopt_sim_result r;
    gopt_status st = gopt_sim_run(sim, d, &r, s, &err);
    if (st == GOPT_OK || (a && !strstr(err.msg, a)) || (b && !strstr(err.msg, b))) print_error("%d: %s\n", st, err.msg);
    assert_int_equal(st, GOPT_EINVAL);
    if (a) assert_non_null(strstr(err.msg, a));
    if (b) assert_non_null(strstr(err.msg, b));
}

/* Every amount at its bound on devices at the slowest accepted rates: finite times, exact
 * byte counts (no int64 overflow, no float-to-int cast out of range), an honest OOM. */
static void test_values_at_their_bounds(void **state) {
    (void)state;
    cluster c;
    cluster_make(&c, UNIT_PROFILE, 2, 1e6);
    const double B = GOPT_GRAPH_MAX_BYTES, F = GOPT_GRAPH_MAX_FLOPS;
    node_spec nodes[] = {{"a", GOPT_OP_CLASS_GEMM, F, B, B}, {"b", GOPT_OP_CLASS_GEMM, F, B, B}};
    edge_spec edges[] = {{0, 1, B}};
    gopt_graph *g = graph_make(nodes, 2, edges, 1);
    int dev[] = {0, 1};
    gopt_sim_result r;
    gopt_sim *sim;
    gopt_sim_scratch *s;
    gopt_decisions d;
    run_case(g, &c, dev, NULL, NULL, &r, &sim, &s, &d);
    assert_true(isfinite(r.step_time_s) && r.step_time_s >= 2 * F);
    assert_int_equal(r.peak_memory_bytes[0], (int64_t)1 << 51); /* parameters + output */
    assert_int_equal(r.peak_memory_bytes[1], ((int64_t)1 << 51) + ((int64_t)1 << 50)); /* + the copy */
    assert_true(r.oom);
    gopt_decisions_destroy(&d);
    gopt_sim_scratch_free(s);
    gopt_sim_free(sim);
    gopt_graph_free(g);
    cluster_free(&c);
}

static void test_rejections(void **state) {
    (void)state;
    cluster c;
    cluster_make(&c, UNIT_PROFILE, 2, 1e6);
    node_spec nodes[] = {{"a", GOPT_OP_CLASS_OTHER, 1, 8, 0}, {"b", GOPT_OP_CLASS_OTHER, 1, 8, 0}, {"c", GOPT_OP_CLASS_OTHER, 1, 8, 0}};
    edge_spec edges[] = {{0, 1, 8}, {1, 2, 8}, {0, 2, 8}};
    gopt_graph *g = graph_make(nodes, 3, edges, 3);
    gopt_sim *sim, *sim2;
    gopt_sim_scratch *s, *s2;
    gopt_error err = {0};
    assert_int_equal(gopt_sim_create(g, c.cm, &sim, &err), GOPT_OK);
    assert_int_equal(gopt_sim_create(g, c.cm, &sim2, &err), GOPT_OK);
    assert_int_equal(gopt_sim_scratch_create(sim, &s, &err), GOPT_OK);
    assert_int_equal(gopt_sim_scratch_create(sim2, &s2, &err), GOPT_OK);
    gopt_decisions d;
    assert_int_equal(gopt_decisions_init(&d, 3, &err), GOPT_OK);
    gopt_decisions_set_default(&d, gopt_graph_frozen(g));
    gopt_sim_result r;
    assert_int_equal(gopt_sim_run(sim, &d, &r, s, &err), GOPT_OK);
    /* a scratch of another simulator */
    assert_int_equal(gopt_sim_run(sim, &d, &r, s2, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "another simulator"));
    d.device[1] = 2;
    expect_run_error(sim, &d, s, "node 'b'", "device 2");
    d.device[1] = -1;
    expect_run_error(sim, &d, s, "node 'b'", "device -1");
    d.device[1] = 0;
    d.group[2] = 3;
    expect_run_error(sim, &d, s, "node 'c'", "fusion group 3");
    d.group[2] = -5;
    expect_run_error(sim, &d, s, "node 'c'", "fusion group -5");
    d.group[0] = d.group[2] = 0;
    d.device[2] = 1;
    expect_run_error(sim, &d, s, "node 'c'", "fusion group 0");
    /* a, c fused around b: contraction makes a cycle; validate rejects it, the run reports a deadlock */
    d.device[2] = 0;
    assert_int_equal(gopt_decisions_validate(&d, g, 2, &err), GOPT_EINVAL);
    expect_run_error(sim, &d, s, "deadlock", "node 'a'");
    /* after a failed run, a good run works again */
    d.group[0] = d.group[2] = -1;
    assert_int_equal(gopt_sim_run(sim, &d, &r, s, &err), GOPT_OK);
    EXACT(r.step_time_s, 1.5 + 1.5 + 1.5);
    gopt_decisions d2;
    assert_int_equal(gopt_decisions_init(&d2, 2, &err), GOPT_OK);
    expect_run_error(sim, &d2, s, "decisions for 2 nodes", "has 3");
    gopt_decisions_destroy(&d2);
    /* too many devices: no profile holds them (the loader stops at the simulator's limit,
     * naming the file); unfinalized graph */
    _Static_assert(GOPT_PROFILE_MAX_DEVICES == GOPT_SIM_MAX_DEVICES, "profiles and the simulator share a limit");
    char text[2048];
    snprintf(text, sizeof text, UNIT_PROFILE, GOPT_SIM_MAX_DEVICES + 1, 1e6);
    gopt_profile *bigp = NULL;
    assert_int_equal(gopt_profile_parse(text, strlen(text), "unit.json", &bigp, &err), GOPT_EINVAL);
    assert_null(bigp);
    assert_non_null(strstr(err.msg, "unit.json"));
    assert_non_null(strstr(err.msg, "'count' = 65"));
    gopt_sim *bad = NULL;
    gopt_graph *raw;
    assert_int_equal(gopt_graph_create(&raw, "raw", "test", &err), GOPT_OK);
    assert_int_equal(gopt_sim_create(raw, c.cm, &bad, &err), GOPT_EINVAL);
    assert_non_null(strstr(err.msg, "not finalized"));
    gopt_graph_free(raw);
    gopt_decisions_destroy(&d);
    gopt_sim_scratch_free(s);
    gopt_sim_scratch_free(s2);
    gopt_sim_free(sim);
    gopt_sim_free(sim2);
    gopt_graph_free(g);
    cluster_free(&c);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/gopt_test_sim_XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_ops_one_transfer),
        cmocka_unit_test(test_shared_bus),
        cmocka_unit_test(test_diamond_two_devices),
        cmocka_unit_test(test_priorities_and_ties),
        cmocka_unit_test(test_fused_chain),
        cmocka_unit_test(test_out_of_memory),
        cmocka_unit_test(test_link_fifo),
        cmocka_unit_test(test_reference_random),
        cmocka_unit_test(test_invariants_layered),
        cmocka_unit_test(test_invariants_zoo),
        cmocka_unit_test(test_determinism_and_batch),
        cmocka_unit_test(test_trace),
        cmocka_unit_test(test_values_at_their_bounds),
        cmocka_unit_test(test_rejections),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) rc = rc ? rc : 1;
    return rc;
}
