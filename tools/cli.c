/* cli.c: argument parsing helpers and error reporting for the gopt verbs. */
#include "cli.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void cli_init(cli_args *a, int argc, char **argv, const char *verb) {
    a->argc = argc;
    a->argv = argv;
    a->i = 0;
    a->verb = verb;
    a->bad = 0;
}

int cli_is_help(const char *arg) { return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0; }

int cli_wants_help(int argc, char **argv) {
    for (int i = 0; i < argc; i++)
        if (cli_is_help(argv[i])) return 1;
    return 0;
}

int cli_flag(cli_args *a, const char *name) {
    if (a->i < a->argc && strcmp(a->argv[a->i], name) == 0) {
        a->i++;
        return 1;
    }
    return 0;
}

int cli_opt_str(cli_args *a, const char *name, const char **out) {
    if (a->i >= a->argc) return 0;
    const char *arg = a->argv[a->i];
    size_t n = strlen(name);
    if (strncmp(arg, name, n) != 0) return 0;
    if (arg[n] == '=') {
        *out = arg + n + 1;
        a->i++;
        return 1;
    }
    if (arg[n] != '\0') return 0;
    if (a->i + 1 >= a->argc) {
        cli_usage_error(a->verb, "option %s needs a value", name);
        a->bad = 1;
        a->i++;
        return 1;
    }
    *out = a->argv[a->i + 1];
    a->i += 2;
    return 1;
}

int cli_opt_long(cli_args *a, const char *name, long *out, long min, long max) {
    const char *s = NULL;
    if (!cli_opt_str(a, name, &s)) return 0;
    if (a->bad) return 1;
    char *e;
    errno = 0;
    long v = strtol(s, &e, 10);
    if (e == s || *e || errno) {
        cli_usage_error(a->verb, "option %s: '%s' is not an integer", name, s);
        a->bad = 1;
    } else if (v < min || v > max) {
        cli_usage_error(a->verb, "option %s: %ld is out of range [%ld, %ld]", name, v, min, max);
        a->bad = 1;
    } else {
        *out = v;
    }
    return 1;
}

int cli_opt_double(cli_args *a, const char *name, double *out, double min, double max) {
    const char *s = NULL;
    if (!cli_opt_str(a, name, &s)) return 0;
    if (a->bad) return 1;
    char *e;
    errno = 0;
    double v = strtod(s, &e);
    if (e == s || *e || v != v) {
        cli_usage_error(a->verb, "option %s: '%s' is not a number", name, s);
        a->bad = 1;
    } else if (errno == ERANGE || (v != 0 && fabs(v) < DBL_MIN)) { /* 1e-400 would be 0; 1e-310 subnormal */
        cli_usage_error(a->verb, "option %s: '%s' is outside the range of a normal double", name, s);
        a->bad = 1;
    } else if (v < min || v > max) {
        cli_usage_error(a->verb, "option %s: %g is out of range [%g, %g]", name, v, min, max);
        a->bad = 1;
    } else {
        *out = v;
    }
    return 1;
}

int cli_positional(cli_args *a, const char **slot) {
    const char *arg = a->argv[a->i];
    if (arg[0] == '-' && arg[1]) return cli_usage_error(a->verb, "unknown option '%s'", arg);
    if (*slot) return cli_usage_error(a->verb, "unexpected argument '%s'", arg);
    *slot = arg;
    a->i++;
    return 0;
}

int cli_usage_error(const char *verb, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "gopt %s: ", verb);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nTry 'gopt %s --help'.\n", verb);
    va_end(ap);
    return 2;
}

int cli_report(const gopt_error *err) {
    fprintf(stderr, "gopt: error: %s\n", err->msg[0] ? err->msg : gopt_status_name(err->code));
    return gopt_status_exit_code(err->code);
}

int cli_stderr_is_tty(void) { return isatty(2); }

int cli_dispatch(const char *verb, const cli_subverb *subs, size_t nsubs, void (*usage)(FILE *), int argc,
                 char **argv) {
    if (argc < 1) {
        usage(stderr);
        return 2;
    }
    if (cli_is_help(argv[0])) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < nsubs; i++)
        if (strcmp(argv[0], subs[i].name) == 0) {
            if (cli_wants_help(argc - 1, argv + 1)) {
                usage(stdout);
                return 0;
            }
            return subs[i].run(argc - 1, argv + 1);
        }
    fprintf(stderr, "gopt %s: unknown subcommand '%s'\n\n", verb, argv[0]);
    usage(stderr);
    return 2;
}

int cli_open_graph_cluster(const char *verb, const char *file, const char *profile, long ndev, gopt_graph **g,
                           gopt_profile **p, gopt_costmodel **cm) {
    gopt_error err = {0};
    *g = NULL;
    *p = NULL;
    *cm = NULL;
    if (gopt_graph_load(file, g, &err)) return cli_report(&err);
    int rc = cli_open_cluster(verb, profile, ndev, p, cm);
    if (rc) {
        gopt_graph_free(*g);
        *g = NULL;
    }
    return rc;
}

int cli_open_cluster(const char *verb, const char *path, long ndev, gopt_profile **p, gopt_costmodel **cm) {
    gopt_error err = {0};
    *p = NULL;
    *cm = NULL;
    if (gopt_profile_load(path, p, &err)) return cli_report(&err);
    if (ndev > gopt_profile_num_devices(*p)) {
        int rc = cli_usage_error(verb, "--devices %ld: profile '%s' has %d devices", ndev, gopt_profile_name(*p),
                                 gopt_profile_num_devices(*p));
        gopt_profile_free(*p);
        *p = NULL;
        return rc;
    }
    if (gopt_cost_create(*p, (int)ndev, cm, &err)) {
        gopt_profile_free(*p);
        *p = NULL;
        return cli_report(&err);
    }
    return 0;
}
