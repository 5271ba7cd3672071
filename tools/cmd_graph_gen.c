/* cmd_graph_gen.c: `gopt graph gen`: write the training-step graph of a
 * model family, or a directory of synthetic graphs (docs/zoo.md).
 *
 *   gopt graph gen FAMILY [--layers N] [--batch B] [--seq T] [--optimizer O] [--clip-grad-norm MAX] -o FILE
 *   gopt graph gen synthetic --count N --seed S -o DIR [--kind K] [--nodes N] [--prefix P] [--clip-grad-norm MAX]
 *     K: any (default: layered, cells, chain or grid, drawn per graph), all (any of
 *     the seven kinds, drawn per graph), or one kind (tables too); files P_NNNNN
 *     (default synth_NNNNN), named so in the graph as well
 *   gopt graph gen --list
 *
 * Synthetic graph i is drawn from the i-th child stream of the seed's RNG, so
 * a seed reproduces every file byte for byte. Files are written atomically;
 * a failure stops at the first bad graph and exits with its code.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "gopt_zoo.h"

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n > k && strcmp(s + n - k, suffix) == 0;
}

static void print_summary(const char *path, const gopt_graph *g) {
    gopt_graph_stats s;
    gopt_graph_get_stats(g, &s);
    printf("%s: %s, %d nodes, %d edges, %.3f GFLOP, %.1f MB parameters+state\n", path, gopt_graph_name(g), s.nodes,
           s.edges, s.flops / 1e9, s.param_bytes / 1e6);
}

static int gen_list(void) {
    printf("%-16s %7s %6s %6s  %s\n", "family", "layers", "batch", "seq", "optimizer");
    for (int i = 0; i < gopt_zoo_family_count(); i++) {
        gopt_zoo_spec in = {.family = gopt_zoo_family_name(i)}, s;
        gopt_error err = {0};
        if (gopt_zoo_resolve(&in, &s, &err) != GOPT_OK) return cli_report(&err);
        printf("%-16s %7d %6d %6d  %s\n", s.family, s.layers, s.batch, s.seq, gopt_optimizer_name(s.optimizer));
    }
    printf("%-16s (see --count, --seed, --kind, --nodes)\n", "synthetic");
    return 0;
}

static int make_dir(const char *dir) {
    if (mkdir(dir, 0755) == 0 || errno == EEXIST) {
        struct stat st;
        if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) return 0;
    }
    fprintf(stderr, "gopt: error: %s: cannot create directory: %s\n", dir, strerror(errno ? errno : ENOTDIR));
    return 2;
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static int gen_synthetic(int count, uint64_t seed, const char *dir, const char *prefix, const gopt_synth_opts *opts) {
    int rc = make_dir(dir);
    if (rc) return rc;
    int *nodes = calloc((size_t)count, sizeof *nodes);
    size_t plen = strlen(dir) + 64;
    char *path = malloc(plen);
    if (!nodes || !path) {
        free(nodes);
        free(path);
        return cli_report(&(gopt_error){GOPT_ENOMEM, "out of memory"});
    }
    gopt_rng master, child;
    gopt_rng_seed(&master, seed);
    double t0 = gopt_now_seconds();
    long long total = 0;
    for (int i = 0; i < count && !rc; i++) {
        gopt_rng_split(&master, &child);
        char name[64];
        snprintf(name, sizeof name, "%s_%05d", prefix, i);
        snprintf(path, plen, "%s/%s.graphml.gz", dir, name);
        gopt_graph *g = NULL;
        gopt_error err = {0};
        if (gopt_zoo_synthetic(&child, opts, name, &g, &err) != GOPT_OK || gopt_zoo_save(g, path, 1, &err) != GOPT_OK)
            rc = cli_report(&err);
        else
            total += nodes[i] = gopt_graph_num_nodes(g);
        gopt_graph_free(g);
    }
    double dt = gopt_now_seconds() - t0;
    if (!rc) {
        qsort(nodes, (size_t)count, sizeof *nodes, cmp_int);
        printf("%s: %d graphs, nodes min %d median %d max %d (total %lld), %.2f s, %.1f graphs/s\n", dir, count,
               nodes[0], nodes[count / 2], nodes[count - 1], total, dt, count / (dt > 0 ? dt : 1e-9));
    }
    free(nodes);
    free(path);
    return rc;
}

int graph_gen(int argc, char **argv) {
    const char *family = NULL, *out = NULL, *optim = NULL, *kind = NULL, *prefix = NULL;
    long layers = 0, batch = 0, seq = 0, seed = 0, count = -1, target = 0;
    double clip = 0;
    int list = 0;
    cli_args a;
    cli_init(&a, argc, argv, "graph gen");
    while (a.i < a.argc) {
        if (cli_flag(&a, "--list")) list = 1;
        else if (cli_opt_long(&a, "--layers", &layers, 1, 4096) || cli_opt_long(&a, "--batch", &batch, 1, 65536) ||
                 cli_opt_long(&a, "--seq", &seq, 1, 1 << 20) || cli_opt_long(&a, "--seed", &seed, 0, 0x7fffffffL) ||
                 cli_opt_long(&a, "--count", &count, 1, 1000000) ||
                 cli_opt_long(&a, "--nodes", &target, 200, 20000) || cli_opt_str(&a, "--optimizer", &optim) ||
                 cli_opt_str(&a, "--kind", &kind) || cli_opt_str(&a, "--prefix", &prefix) ||
                 cli_opt_double(&a, "--clip-grad-norm", &clip, 1e-30, 1e30) ||
                 cli_opt_str(&a, "-o", &out)) {
            if (a.bad) return 2;
        } else if (cli_positional(&a, &family)) return 2;
    }
    if (list) return gen_list();
    if (!family) return cli_usage_error(a.verb, "missing FAMILY (one of the families of --list, or synthetic)");
    if (!out) return cli_usage_error(a.verb, "missing -o %s", strcmp(family, "synthetic") == 0 ? "DIR" : "FILE");
    if (strcmp(family, "synthetic") == 0) {
        if (layers || batch || seq || optim)
            return cli_usage_error(a.verb,
                                   "synthetic takes --count, --seed, --kind, --nodes, --prefix and --clip-grad-norm only");
        if (count < 0) return cli_usage_error(a.verb, "synthetic needs --count N");
        gopt_synth_opts opts = {.kind = GOPT_SYNTH_ANY, .target_nodes = (int)target, .clip_grad_norm = clip > 0};
        if (kind && strcmp(kind, "all") == 0) opts.kind = GOPT_SYNTH_ALL;
        else if (kind && strcmp(kind, "any") != 0) {
            int k = 0;
            while (k < GOPT_SYNTH_KIND_COUNT && strcmp(kind, gopt_synth_kind_name((gopt_synth_kind)k)) != 0) k++;
            if (k == GOPT_SYNTH_KIND_COUNT)
                return cli_usage_error(a.verb,
                                       "option --kind: '%s' is not one of any, all, layered, cells, chain, grid, "
                                       "transformer, recsys, unet, tables", kind);
            opts.kind = (gopt_synth_kind)k;
        }
        if (!prefix) prefix = "synth";
        if (!*prefix || strlen(prefix) > 32 || strspn(prefix, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") != strlen(prefix))
            return cli_usage_error(a.verb, "option --prefix: '%s' is not 1-32 letters, digits, '_' or '-'", prefix);
        return gen_synthetic((int)count, (uint64_t)seed, out, prefix, &opts);
    }
    if (count >= 0 || kind || target || prefix)
        return cli_usage_error(a.verb, "--count, --kind, --nodes and --prefix are for synthetic only");
    if (!ends_with(out, ".graphml") && !ends_with(out, ".graphml.gz"))
        return cli_usage_error(a.verb, "-o '%s' must end in .graphml or .graphml.gz", out);
    gopt_zoo_spec spec = {.family = family, .layers = (int)layers, .batch = (int)batch, .seq = (int)seq,
                          .clip_grad_norm = clip > 0};
    if (optim) {
        int k = gopt_optimizer_parse(optim);
        if (k < 0 || k == GOPT_OPTIM_RMSPROP) /* the ONNX import's alone */
            return cli_usage_error(a.verb, "option --optimizer: '%s' is not one of sgd, momentum, adam, adamw", optim);
        spec.optimizer = (gopt_optimizer)k;
    }
    gopt_graph *g = NULL;
    gopt_error err = {0};
    if (gopt_zoo_generate(&spec, &g, &err) != GOPT_OK) return cli_report(&err);
    int rc = 0;
    if (gopt_graph_save(g, out, &err) != GOPT_OK) rc = cli_report(&err);
    else print_summary(out, g);
    gopt_graph_free(g);
    return rc;
}
