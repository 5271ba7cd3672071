/* cmd_plot.c: `gopt plot METRICS... -o FILE.svg [--title T]`: learning
 * curves from the trainer's JSON-lines metrics, drawn as a self-contained
 * SVG: top panel the mean reward per step, bottom panel the best step time
 * found so far and the best sample of each step, both relative to the best
 * baseline (the dashed line at 1: below it GO beats every baseline). Several
 * metrics files are overlaid, one colour each. Lines that are not step
 * records are skipped. Cost O(lines). docs/trainer.md.
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define PLOT_MAX_FILES 8

typedef struct {
    double *step, *reward, *best_rel, *sofar_rel;
    int n, cap;
    int imitation_end; /* steps before this were imitation */
} series;

static const char *COLORS[PLOT_MAX_FILES] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                                             "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};

static void plot_usage(FILE *f) {
    fprintf(f, "Usage: gopt plot METRICS... -o FILE.svg [--title T]\n\n"
               "Draw learning curves from trainer metrics (JSON lines: gopt train/finetune --metrics): mean\n"
               "reward per step, and best step time relative to the best baseline (per step and best so far),\n"
               "with the baseline at 1. Up to %d files are overlaid.\n",
            PLOT_MAX_FILES);
}

static double num(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static gopt_status load_series(const char *path, series *s, gopt_error *err) {
    char *text = NULL;
    size_t len = 0;
    gopt_status st = gopt_file_read_all(path, &text, &len, err);
    if (st) return st;
    if ((st = gopt_json_check_numbers(text, len, path, err))) {
        free(text);
        return st;
    }
    int lineno = 0;
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        size_t ll = nl ? (size_t)(nl - line) : strlen(line);
        lineno++;
        if (ll > 0) {
            json_error_t je;
            json_t *j = json_loadb(line, ll, 0, &je);
            if (!j) {
                free(text);
                return gopt_error_set(err, GOPT_EFORMAT, "%s: line %d: not JSON (%s)", path, lineno, je.text);
            }
            if (json_is_integer(json_object_get(j, "step"))) {
                if (s->n == s->cap) {
                    int cap = s->cap ? 2 * s->cap : 256;
                    double *p[4] = {realloc(s->step, sizeof(double) * cap), NULL, NULL, NULL};
                    if (p[0]) s->step = p[0];
                    p[1] = realloc(s->reward, sizeof(double) * cap);
                    if (p[1]) s->reward = p[1];
                    p[2] = realloc(s->best_rel, sizeof(double) * cap);
                    if (p[2]) s->best_rel = p[2];
                    p[3] = realloc(s->sofar_rel, sizeof(double) * cap);
                    if (p[3]) s->sofar_rel = p[3];
                    if (!p[0] || !p[1] || !p[2] || !p[3]) {
                        json_decref(j);
                        free(text);
                        return gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", path);
                    }
                    s->cap = cap;
                }
                const char *ph = json_string_value(json_object_get(j, "phase"));
                double stp = (double)json_integer_value(json_object_get(j, "step"));
                if (ph && strcmp(ph, "imitation") == 0) {
                    s->imitation_end = (int)stp + 1;
                    s->reward[s->n] = NAN;
                    s->best_rel[s->n] = NAN;
                } else {
                    s->reward[s->n] = num(j, "reward");
                    s->best_rel[s->n] = num(j, "best_rel");
                }
                s->step[s->n] = stp;
                s->sofar_rel[s->n] = num(j, "best_so_far_rel");
                s->n++;
            }
            json_decref(j);
        }
        line = nl ? nl + 1 : NULL;
    }
    free(text);
    if (!s->n) return gopt_error_set(err, GOPT_EFORMAT, "%s: no step records", path);
    return GOPT_OK;
}

/* A "nice" tick step for a range. */
static double nice_step(double range) {
    if (!(range > 0)) return 1;
    double e = pow(10, floor(log10(range / 5))), f = range / 5 / e;
    return e * (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10);
}

typedef struct {
    double x0, y0, w, h;     /* panel in pixels */
    double xmin, xmax, ymin, ymax;
} panel;

static double px(const panel *p, double x) { return p->x0 + (x - p->xmin) / (p->xmax - p->xmin) * p->w; }
static double py(const panel *p, double y) { return p->y0 + p->h - (y - p->ymin) / (p->ymax - p->ymin) * p->h; }

static void axes(gopt_buf *b, const panel *p, const char *ylabel) {
    gopt_buf_printf(b, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='none' stroke='#333'/>\n", p->x0, p->y0,
                    p->w, p->h);
    double xs = nice_step(p->xmax - p->xmin), ys = nice_step(p->ymax - p->ymin);
    for (double x = ceil(p->xmin / xs) * xs; x <= p->xmax + 1e-9; x += xs)
        gopt_buf_printf(b,
                        "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#ddd'/><text x='%.1f' y='%.1f' "
                        "font-size='11' text-anchor='middle'>%g</text>\n",
                        px(p, x), p->y0, px(p, x), p->y0 + p->h, px(p, x), p->y0 + p->h + 14, x);
    for (double y = ceil(p->ymin / ys) * ys; y <= p->ymax + 1e-9; y += ys)
        gopt_buf_printf(b,
                        "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#ddd'/><text x='%.1f' y='%.1f' "
                        "font-size='11' text-anchor='end'>%.3g</text>\n",
                        p->x0, py(p, y), p->x0 + p->w, py(p, y), p->x0 - 4, py(p, y) + 4, y);
    gopt_buf_printf(b,
                    "<text x='%.1f' y='%.1f' font-size='12' text-anchor='middle' transform='rotate(-90 %.1f %.1f)'>%s</text>\n",
                    p->x0 - 48, p->y0 + p->h / 2, p->x0 - 48, p->y0 + p->h / 2, ylabel);
    gopt_buf_printf(b, "<text x='%.1f' y='%.1f' font-size='12' text-anchor='middle'>step</text>\n", p->x0 + p->w / 2,
                    p->y0 + p->h + 30);
}

static void polyline(gopt_buf *b, const panel *p, const double *x, const double *y, int n, const char *color,
                     const char *extra) {
    int open = 0;
    for (int i = 0; i < n; i++) {
        if (!isfinite(y[i])) {
            if (open) gopt_buf_puts(b, "'/>\n");
            open = 0;
            continue;
        }
        double yy = y[i] < p->ymin ? p->ymin : y[i] > p->ymax ? p->ymax : y[i];
        if (!open) gopt_buf_printf(b, "<polyline fill='none' stroke='%s' %s points='", color, extra);
        gopt_buf_printf(b, "%.1f,%.1f ", px(p, x[i]), py(p, yy));
        open = 1;
    }
    if (open) gopt_buf_puts(b, "'/>\n");
}

int cmd_plot(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) {
        plot_usage(stdout);
        return 0;
    }
    const char *files[PLOT_MAX_FILES], *outp = NULL, *title = "GO training";
    int nf = 0;
    cli_args a;
    cli_init(&a, argc, argv, "plot");
    while (a.i < a.argc) {
        if (cli_opt_str(&a, "-o", &outp) || cli_opt_str(&a, "--output", &outp) || cli_opt_str(&a, "--title", &title)) {
            if (a.bad) return 2;
        } else if (a.argv[a.i][0] == '-' && a.argv[a.i][1]) {
            return cli_usage_error(a.verb, "unknown option '%s'", a.argv[a.i]);
        } else if (nf == PLOT_MAX_FILES) {
            return cli_usage_error(a.verb, "at most %d metrics files", PLOT_MAX_FILES);
        } else {
            files[nf++] = a.argv[a.i++];
        }
    }
    if (!nf) return cli_usage_error(a.verb, "missing METRICS");
    if (!outp) return cli_usage_error(a.verb, "missing -o FILE.svg");
    series s[PLOT_MAX_FILES];
    memset(s, 0, sizeof s);
    gopt_error err = {0};
    gopt_buf b;
    gopt_buf_init(&b);
    int rc = 0;
    for (int i = 0; i < nf; i++)
        if (load_series(files[i], &s[i], &err)) {
            rc = cli_report(&err);
            goto out;
        }
    double xmax = 1, rlo = INFINITY, rhi = -INFINITY, blo = INFINITY, bhi = -INFINITY;
    for (int i = 0; i < nf; i++)
        for (int k = 0; k < s[i].n; k++) {
            if (s[i].step[k] + 1 > xmax) xmax = s[i].step[k] + 1;
            if (isfinite(s[i].reward[k])) {
                rlo = fmin(rlo, s[i].reward[k]);
                rhi = fmax(rhi, s[i].reward[k]);
            }
            if (isfinite(s[i].sofar_rel[k])) {
                blo = fmin(blo, s[i].sofar_rel[k]);
                bhi = fmax(bhi, s[i].sofar_rel[k]);
            }
            if (isfinite(s[i].best_rel[k])) {
                blo = fmin(blo, s[i].best_rel[k]);
                bhi = fmax(bhi, fmin(s[i].best_rel[k], 3.0));
            }
        }
    if (!isfinite(rlo)) rlo = -1, rhi = 0;
    if (rhi - rlo < 1e-6) rlo -= 0.05, rhi += 0.05;
    if (!isfinite(blo)) blo = 0.5, bhi = 1.5;
    blo = fmin(blo, 1.0);
    bhi = fmax(bhi, 1.0);
    double pad = (bhi - blo) * 0.05 + 1e-3;
    panel top = {80, 50, 780, 230, 0, xmax, rlo - (rhi - rlo) * 0.05, rhi + (rhi - rlo) * 0.05};
    panel bot = {80, 340, 780, 230, 0, xmax, blo - pad, bhi + pad};
    gopt_buf_printf(&b,
                    "<?xml version='1.0' encoding='UTF-8'?>\n<svg xmlns='http://www.w3.org/2000/svg' width='900' "
                    "height='%d' font-family='sans-serif'>\n<rect width='100%%' height='100%%' fill='white'/>\n"
                    "<text x='450' y='24' font-size='15' text-anchor='middle'>",
                    640 + 18 * nf);
    for (const char *c = title; *c; c++) {
        if (*c == '<') gopt_buf_puts(&b, "&lt;");
        else if (*c == '&') gopt_buf_puts(&b, "&amp;");
        else if (*c == '>') gopt_buf_puts(&b, "&gt;");
        else gopt_buf_append(&b, c, 1);
    }
    gopt_buf_puts(&b, "</text>\n");
    axes(&b, &top, "mean reward");
    axes(&b, &bot, "step time / best baseline");
    gopt_buf_printf(&b,
                    "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#000' stroke-dasharray='6,4'/>"
                    "<text x='%.1f' y='%.1f' font-size='11' text-anchor='end'>best baseline</text>\n",
                    bot.x0, py(&bot, 1.0), bot.x0 + bot.w, py(&bot, 1.0), bot.x0 + bot.w - 4, py(&bot, 1.0) - 4);
    for (int i = 0; i < nf; i++) {
        if (s[i].imitation_end > 0)
            gopt_buf_printf(&b, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='%s' opacity='0.08'/>\n",
                            top.x0, top.y0, px(&top, s[i].imitation_end) - top.x0, top.h, COLORS[i]);
        polyline(&b, &top, s[i].step, s[i].reward, s[i].n, COLORS[i], "stroke-width='1.2'");
        polyline(&b, &bot, s[i].step, s[i].best_rel, s[i].n, COLORS[i], "stroke-width='0.8' opacity='0.35'");
        polyline(&b, &bot, s[i].step, s[i].sofar_rel, s[i].n, COLORS[i], "stroke-width='2'");
        double ly = 612 + 18 * i;
        gopt_buf_printf(&b, "<line x1='80' y1='%.1f' x2='110' y2='%.1f' stroke='%s' stroke-width='2'/><text x='116' y='%.1f' font-size='12'>",
                        ly, ly, COLORS[i], ly + 4);
        for (const char *c = files[i]; *c; c++) {
            if (*c == '<') gopt_buf_puts(&b, "&lt;");
            else if (*c == '&') gopt_buf_puts(&b, "&amp;");
            else gopt_buf_append(&b, c, 1);
        }
        gopt_buf_printf(&b, " (thick: best so far; thin: best sample of the step%s)</text>\n",
                        s[i].imitation_end ? "; shaded: imitation warm start" : "");
    }
    gopt_buf_puts(&b, "</svg>\n");
    if (b.failed) {
        gopt_error_set(&err, GOPT_ENOMEM, "out of memory drawing %s", outp);
        rc = cli_report(&err);
        goto out;
    }
    if (gopt_file_write_atomic(outp, b.data, b.len, 0, &err)) {
        rc = cli_report(&err);
        goto out;
    }
    printf("%s: %d series, %g steps\n", outp, nf, xmax);
out:
    gopt_buf_destroy(&b);
    for (int i = 0; i < nf; i++) {
        free(s[i].step);
        free(s[i].reward);
        free(s[i].best_rel);
        free(s[i].sofar_rel);
    }
    return rc;
}
