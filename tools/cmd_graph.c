/* cmd_graph.c: `gopt graph info|convert|dot|import`: inspect, convert, draw,
 * and import an ONNX model as a training-step graph (graphs/gopt_onnx.h). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_json.h"
#include "gopt_graph.h"
#include "gopt_onnx.h"

static void graph_usage(FILE *f) {
    fprintf(f, "Usage: gopt graph SUBCOMMAND ...\n\n"
               "  info FILE [--json]     summary: nodes, edges, FLOPs, parameter bytes, classes, depth\n"
               "  convert IN OUT         rewrite GraphML <-> GraphML.gz (by OUT's extension)\n"
               "  dot FILE [-o OUT]      Graphviz DOT, nodes coloured by op class\n"
               "  gen FAMILY [--layers N] [--batch B] [--seq T] [--optimizer sgd|momentum|adam|adamw]\n"
               "      [--clip-grad-norm MAX] -o FILE\n"
               "                         training-step graph of a model family (gen --list: families, defaults);\n"
               "                         --clip-grad-norm: the gradients clipped to one global norm before the\n"
               "                         updates (every update then waits for the whole backward; docs/zoo.md)\n"
               "  gen synthetic --count N --seed S -o DIR [--kind K] [--nodes N] [--prefix P] [--clip-grad-norm MAX]\n"
               "                         N random training-step graphs, reproducible from the seed (docs/zoo.md);\n"
               "                         K: any (default: layered, cells, chain or grid per graph), all (any of\n"
               "                         the seven kinds), layered, cells, chain, grid, transformer, recsys, unet,\n"
               "                         or tables (a recommender of a few very large tables; not drawn by all);\n"
               "                         files and graphs are named P_NNNNN (default synth_NNNNN)\n"
               "  import MODEL.onnx [--batch N] [--optimizer sgd|momentum|adam|adamw|rmsprop] [--forward-only]\n"
               "         [--clip-grad-norm MAX] [--unknown-as other] -o FILE\n"
               "                         the training step of an ONNX model: its forward ops, a softmax\n"
               "                         cross-entropy loss on its first output (unless that is a scalar),\n"
               "                         the backward ops and one optimizer update per weight (default adam;\n"
               "                         --clip-grad-norm as for gen).\n"
               "                         --batch sets the first dim of every data input; --forward-only keeps\n"
               "                         the forward ops alone; --unknown-as other imports ops outside the\n"
               "                         rules as class other instead of refusing the model (docs/zoo.md)\n\n"
               "FILE is GraphML, plain or gzip-compressed (docs/graph-format.md).\n");
}

static int load_or_report(const char *path, gopt_graph **g) {
    gopt_error err = {0};
    if (gopt_graph_load(path, g, &err) != GOPT_OK) return cli_report(&err);
    return 0;
}

static void human_bytes(double b, char *out, size_t n) {
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (b >= 1024 && u < 4) {
        b /= 1024;
        u++;
    }
    snprintf(out, n, u ? "%.2f %s" : "%.0f %s", b, unit[u]);
}

static int graph_info(int argc, char **argv) {
    const char *file = NULL;
    int json = 0;
    cli_args a;
    cli_init(&a, argc, argv, "graph info");
    while (a.i < a.argc) {
        if (cli_flag(&a, "--json")) json = 1;
        else if (cli_positional(&a, &file)) return 2;
    }
    if (!file) return cli_usage_error(a.verb, "missing FILE");
    gopt_graph *g = NULL;
    int rc = load_or_report(file, &g);
    if (rc) return rc;
    gopt_graph_stats s;
    gopt_graph_get_stats(g, &s);
    if (json) {
        json_t *o = json_object(), *cls = json_object();
        json_object_set_new(o, "file", cli_json_text(file));
        json_object_set_new(o, "name", json_string(gopt_graph_name(g)));
        json_object_set_new(o, "family", json_string(gopt_graph_family(g)));
        json_object_set_new(o, "nodes", json_integer(s.nodes));
        json_object_set_new(o, "edges", json_integer(s.edges));
        json_object_set_new(o, "flops", json_real(s.flops));
        json_object_set_new(o, "param_bytes", json_real(s.param_bytes));
        json_object_set_new(o, "out_bytes", json_real(s.out_bytes));
        json_object_set_new(o, "edge_bytes", json_real(s.edge_bytes));
        json_object_set_new(o, "depth", json_integer(s.depth));
        json_object_set_new(o, "sources", json_integer(s.sources));
        json_object_set_new(o, "sinks", json_integer(s.sinks));
        json_object_set_new(o, "colocation_groups", json_integer(s.colocation_groups));
        for (int c = 0; c < GOPT_OP_CLASS_COUNT; c++)
            json_object_set_new(cls, gopt_op_class_name((gopt_op_class)c), json_integer(s.class_count[c]));
        json_object_set_new(o, "classes", cls);
        cli_json_print(o);
    } else {
        char pb[32], ob[32];
        human_bytes(s.param_bytes, pb, sizeof pb);
        human_bytes(s.edge_bytes, ob, sizeof ob);
        printf("graph       %s (family %s)\n", gopt_graph_name(g), gopt_graph_family(g)[0] ? gopt_graph_family(g) : "-");
        printf("nodes       %d\nedges       %d\n", s.nodes, s.edges);
        printf("flops       %.4g (%.3f GFLOP)\n", s.flops, s.flops / 1e9);
        printf("params      %s (param_bytes %.0f)\n", pb, s.param_bytes);
        printf("edge bytes  %s\n", ob);
        printf("depth       %d nodes on the longest path\n", s.depth);
        printf("sources     %d, sinks %d, colocation groups %d\n", s.sources, s.sinks, s.colocation_groups);
        printf("classes    ");
        for (int c = 0; c < GOPT_OP_CLASS_COUNT; c++)
            if (s.class_count[c])
                printf(" %s %d (%.1f%%)", gopt_op_class_name((gopt_op_class)c), s.class_count[c],
                       100.0 * s.class_count[c] / (s.nodes ? s.nodes : 1));
        printf("\n");
    }
    gopt_graph_free(g);
    return 0;
}

static int graph_convert(int argc, char **argv) {
    if (argc != 2) return cli_usage_error("graph convert", "expected IN and OUT");
    const char *out = argv[1];
    size_t n = strlen(out);
    if (!((n > 8 && strcmp(out + n - 8, ".graphml") == 0) || (n > 11 && strcmp(out + n - 11, ".graphml.gz") == 0)))
        return cli_usage_error("graph convert", "OUT '%s' must end in .graphml or .graphml.gz", out);
    gopt_graph *g = NULL;
    int rc = load_or_report(argv[0], &g);
    if (rc) return rc;
    gopt_error err = {0};
    if (gopt_graph_save(g, out, &err) != GOPT_OK) rc = cli_report(&err);
    gopt_graph_free(g);
    return rc;
}

/* Colours by class, in the order of gopt_op_class. */
static const char *const CLASS_COLOUR[GOPT_OP_CLASS_COUNT] = {"#dddddd", "#ffe08a", "#f4a582", "#d6604d",
                                                              "#92c5de", "#4393c3", "#b8e186", "#ffffff"};

static void dot_escape(gopt_buf *b, const char *s) {
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') gopt_buf_append(b, "\\", 1);
        gopt_buf_append(b, s, 1);
    }
}

static int graph_dot(int argc, char **argv) {
    const char *file = NULL, *out = NULL;
    cli_args a;
    cli_init(&a, argc, argv, "graph dot");
    while (a.i < a.argc) {
        if (cli_opt_str(&a, "-o", &out)) {
            if (a.bad) return 2;
        } else if (cli_positional(&a, &file)) return 2;
    }
    if (!file) return cli_usage_error(a.verb, "missing FILE");
    gopt_graph *g = NULL;
    int rc = load_or_report(file, &g);
    if (rc) return rc;
    gopt_buf b;
    gopt_buf_init(&b);
    gopt_buf_puts(&b, "digraph \"");
    dot_escape(&b, gopt_graph_name(g));
    gopt_buf_puts(&b, "\" {\n  rankdir=TB;\n  node [shape=box, style=filled, fontsize=10];\n");
    const gopt_frozen *f = gopt_graph_frozen(g);
    for (int32_t v = 0; v < f->n; v++) {
        gopt_node_attrs na;
        gopt_graph_node(g, v, &na);
        gopt_buf_printf(&b, "  n%d [label=\"", v);
        dot_escape(&b, na.name);
        gopt_buf_puts(&b, "\\n");
        dot_escape(&b, na.op);
        gopt_buf_printf(&b, "\", fillcolor=\"%s\", tooltip=\"%s %.3g flops\"];\n", CLASS_COLOUR[na.cls],
                        gopt_op_class_name(na.cls), na.flops);
    }
    for (int32_t e = 0; e < f->m; e++) gopt_buf_printf(&b, "  n%d -> n%d;\n", f->edge_src[e], f->edge_dst[e]);
    gopt_buf_puts(&b, "}\n");
    gopt_error err = {0};
    if (b.failed) {
        rc = cli_report(&(gopt_error){GOPT_ENOMEM, "out of memory writing DOT"});
    } else if (out) {
        if (gopt_file_write_atomic(out, b.data, b.len, 0, &err) != GOPT_OK) rc = cli_report(&err);
    } else {
        fwrite(b.data, 1, b.len, stdout);
    }
    gopt_buf_destroy(&b);
    gopt_graph_free(g);
    return rc;
}

static int graph_import(int argc, char **argv) {
    const char *model = NULL, *out = NULL, *optim = NULL, *unknown = NULL;
    long batch = 0;
    double clip = 0;
    gopt_onnx_opts o = {0};
    cli_args a;
    cli_init(&a, argc, argv, "graph import");
    while (a.i < a.argc) {
        if (cli_flag(&a, "--forward-only")) o.forward_only = 1;
        else if (cli_opt_long(&a, "--batch", &batch, 1, 1 << 20) || cli_opt_str(&a, "--optimizer", &optim) ||
                 cli_opt_double(&a, "--clip-grad-norm", &clip, 1e-30, 1e30) ||
                 cli_opt_str(&a, "--unknown-as", &unknown) || cli_opt_str(&a, "-o", &out)) {
            if (a.bad) return 2;
        } else if (cli_positional(&a, &model)) return 2;
    }
    if (!model) return cli_usage_error(a.verb, "missing MODEL.onnx");
    if (!out) return cli_usage_error(a.verb, "missing -o FILE");
    size_t n = strlen(out);
    if (!((n > 8 && strcmp(out + n - 8, ".graphml") == 0) || (n > 11 && strcmp(out + n - 11, ".graphml.gz") == 0)))
        return cli_usage_error(a.verb, "-o '%s' must end in .graphml or .graphml.gz", out);
    if (optim) {
        int k = gopt_optimizer_parse(optim);
        if (k < 0)
            return cli_usage_error(a.verb, "option --optimizer: '%s' is not one of sgd, momentum, adam, adamw, rmsprop",
                                   optim);
        if (o.forward_only) return cli_usage_error(a.verb, "--optimizer and --forward-only exclude each other");
        o.optimizer = (gopt_optimizer)k;
    }
    if (unknown) {
        if (strcmp(unknown, "other") != 0)
            return cli_usage_error(a.verb, "option --unknown-as: '%s' is not 'other'", unknown);
        o.unknown_as_other = 1;
    }
    if (clip > 0 && o.forward_only) return cli_usage_error(a.verb, "--clip-grad-norm and --forward-only exclude each other");
    o.clip_grad_norm = clip > 0;
    o.batch = (int)batch;
    if (!gopt_onnx_available()) {
        fprintf(stderr, "gopt graph import: this build has no ONNX import: protoc-c and libprotobuf-c were not found "
                        "when it was configured (tools/install-deps.sh installs protobuf-c-compiler and "
                        "libprotobuf-c-dev; then re-run cmake)\n");
        return GOPT_EXIT_NO_DEVICE;
    }
    gopt_graph *g = NULL;
    gopt_error err = {0};
    if (gopt_onnx_import(model, &o, &g, &err) != GOPT_OK) return cli_report(&err);
    int rc = 0;
    if (gopt_graph_save(g, out, &err) != GOPT_OK) {
        rc = cli_report(&err);
    } else {
        gopt_graph_stats s;
        gopt_graph_get_stats(g, &s);
        printf("%s: %s, %d nodes, %d edges, %.3f GFLOP, %.1f MB parameters+state\n", out, gopt_graph_name(g), s.nodes,
               s.edges, s.flops / 1e9, s.param_bytes / 1e6);
    }
    gopt_graph_free(g);
    return rc;
}

static const cli_subverb GRAPH_SUBVERBS[] = {
    {"info", graph_info},
    {"convert", graph_convert},
    {"dot", graph_dot},
    {"gen", graph_gen},
    {"import", graph_import},
};

int cmd_graph(int argc, char **argv) {
    return cli_dispatch("graph", GRAPH_SUBVERBS, sizeof GRAPH_SUBVERBS / sizeof GRAPH_SUBVERBS[0], graph_usage, argc, argv);
}
