/* cmd_train.c: `gopt train` (PPO pre-training over many graphs) and
 * `gopt finetune` (PPO on one graph from a trained checkpoint), sharing one
 * runner: graphs loaded, references computed (the best baseline per graph),
 * optional imitation warm start, PPO steps with a progress line on a
 * terminal, metrics as JSON lines, checkpoints every few minutes and at the
 * end (and on SIGINT/SIGTERM), `--resume` continuing bit for bit.
 * Under mpirun every rank runs this runner in lockstep (gopt_dist): the steps
 * are shared out by the trainer, rank 0 alone prints, writes the metrics and
 * the checkpoints; a failing rank ends the whole job (MPI_Abort).
 * `gopt finetune --evaluator runtime` judges the samples by measured steps of
 * the real runtime (gopt_rt_evaluate, one sample at a time) instead of the
 * simulator; references and baselines stay simulated.
 * `gopt plot` is in cmd_plot.c. docs/trainer.md.
 */
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "gopt_runtime.h"
#include "gopt_trainer.h"

#define MAX_GRAPH_FILES 4096
#define MAX_PROFILES 16

static volatile sig_atomic_t g_stop = 0;
static void on_signal(int sig) {
    (void)sig;
    g_stop = 1;
}

/* gopt finetune's self-imitation: every FT_IMITATE_EVERY-th step imitates the best found so far
 * (chosen on the validation split: docs/results.md, "Self-imitation") */
#define FT_IMITATE_EVERY 4
/* and its PPO epochs per step: 2 buys about 1.7x the steps of 4 in a minute (docs/results.md,
 * "PPO epochs with self-imitation") */
#define FT_EPOCHS 2
/* and what trains: the heads alone (--train heads), whose steps cost the decoder, not the network,
 * so a minute buys 2-3x the steps (docs/results.md, "Fine-tuning the heads"); with --shrink < 1
 * the whole network (the warm start + shrink recipe retrains the shrunk trunk) */
#define FT_TRAIN_HEADS 1
/* --steps when only --seconds bounds the run (above --steps' own maximum) */
#define STEPS_UNBOUNDED 1000000000L

static void common_options_help(FILE *f) {
    fprintf(f,
            "  --profile P           device profile (JSON); --devices N uses its first N devices (default all)\n"
            "  --tasks LIST          learned tasks, any of place,sched,fuse (default all three; finetune: the\n"
            "                        checkpoint's); tasks not learned use device 0 / topological order / no fusion\n"
            "  --steps S             training steps (a step = K samples of graphs-per-step graphs)\n"
            "  --seconds T           stop after T seconds of wall time from the start (loading, references\n"
            "                        and the zero-shot evaluation included), or at --steps S if sooner;\n"
            "                        with --seconds, --steps may be left out (the step count then depends\n"
            "                        on the machine's speed, the run on the seed and that count)\n"
            "  -o CKPT               checkpoint to write (policy; CKPT.state holds the trainer state)\n"
            "  --resume              continue the run saved in CKPT (same options and graphs)\n"
            "  --metrics FILE        JSON lines, one per step (default CKPT.metrics.jsonl)\n"
            "  --checkpoint-every S  seconds between checkpoints (default 300); also written at the end\n"
            "  --decisions FILE      write the best decisions found for the first graph\n"
            "  --quiet               no progress line\n");
    fprintf(f,
            "PPO (defaults in parentheses):\n"
            "  --samples K (16; finetune: %d)  --epochs E (4; finetune: %d)  --clip EPS (0.2)  --entropy BETA (0.01)\n"
            "  --lr LR (1e-3)\n"
            "  --clip-norm C (1)  --invalid-reward R (-4: reward of an OOM or rejected sample)\n"
            "  --threads T (2: simulator and decoder threads; results do not depend on it)  --seed S (1)\n"
            "  --device cpu|cuda (cpu) where the network's forward and backward run; cuda: the first GPU\n"
            "                    (the decoder and Adam stay on the CPU; exit 3 without a GPU; docs/policy.md)\n"
            "  --imitate N (0)   warm start: N steps of imitation of the best baseline's decisions\n"
            "  --imitate-every M (0: off) after the warm start every M-th step is an imitation step\n"
            "                    too (M >= 2): PPO anchored to the references (docs/trainer.md)\n"
            "  --imitate-target reference|best (reference) what the steps of --imitate-every imitate:\n"
            "                    best: the best solution found so far on the graph, as sampled by the\n"
            "                    policy (self-imitation; the reference until one is found)\n"
            "  --place-temperature T (1) the trained policy's placement temperature, 0.05..100: above 1\n"
            "                    its samples try other devices (PPO stays on policy; greedy decisions do\n"
            "                    not change; docs/trainer.md)\n"
            "  --splice M (0; finetune: %d; 0 with --evaluator runtime) after each PPO step (one graph\n"
            "                    per step), M children (0..%d) of the best answer found so far, each with a\n"
            "                    short window of one of the step's samples spliced in (its priorities and\n"
            "                    fusion levels), simulated in batches (--splice-batch), each from the best so far;\n"
            "                    a faster one is kept as the search's answer, apart from PPO's incumbent\n"
            "                    (needs --imitate-target best; docs/trainer.md)\n"
            "  --splice-place F (0; finetune: %.2g) the share of those children, 0..1, that move placement\n"
            "                    instead: the window's colocation groups to one other device, drawn from\n"
            "                    the policy's placement scores; one out of memory is dropped\n"
            "  --splice-batch B (K) those children simulated together, 1..K; smaller batches make the\n"
            "                    search more sequential (each batch starts from the best so far)\n",
            GOPT_TRAINER_FINETUNE_SAMPLES, FT_EPOCHS, GOPT_TRAINER_FINETUNE_SPLICE, GOPT_TRAINER_MAX_SPLICE,
            (double)GOPT_TRAINER_FINETUNE_SPLICE_PLACE);
    fprintf(f,
            "  --sample-variant own|incumbent (own; finetune: incumbent) how PPO's samples become\n"
            "                    decisions: own, the policy's fusion pass with critical-path ties;\n"
            "                    incumbent, as the best answer so far was made (its fusion pass and tie\n"
            "                    order, of the ones the zero-shot answers are judged under)\n"
            "  --style-probation N (0: off) when the zero-shot answer self-imitation starts\n"
            "                    from was decoded under another combination's hints (a style), and N PPO\n"
            "                    steps find nothing faster, the incumbent becomes the policy's own greedy\n"
            "                    answer; the style's stays an answer (0..%d; needs --imitate-target best)\n"
            "  --train all|heads (all; finetune: heads, all with --shrink < 1) heads: only the policy's\n"
            "                    task heads and the decoder's conditioning train, the network's trunk stays;\n"
            "                    on one graph a step then costs the decoder, not the network (docs/trainer.md);\n"
            "                    --lr and --imitate-lr then default to 3e-3 and 1e-1\n"
            "  --imitate-lr LR (3e-3)  --graphs-per-step B (1)  --switch-every N (1)\n"
            "  --backward batched|rounds (batched: one policy backward per epoch; rounds: one per\n"
            "                    distinct action, same gradient up to rounding, what docs/results.md used)\n"
            "  --reference LIST  baselines whose best is the per-graph reference (train:\n"
            "                    single,expert,metis,heft,mtopo,metf,msct,heft+cp+xla; finetune: the 35\n"
            "                    combinations the hints are drawn from, each of heft,metf,metis,expert,msct,\n"
            "                    mtopo,single + cp+xla, fifo+xla, cp+tvm, cp+xlamo, fifo+xlamo)\n"
            "  --reference-evals N (0: the methods' defaults) a reference that anneals (sa) stops after\n"
            "                    N simulations instead of 10 s of wall time: reproducible references\n"
            "  --reference-anneal-max-nodes N (0: all) a reference that anneals runs only on graphs\n"
            "                    of at most N nodes; larger graphs take the best of the others\n"
            "  --canonical-targets on|off (on: imitation targets' devices relabelled canonically by a\n"
            "                    symmetry of the cluster, kept where that simulates no slower; off: the\n"
            "                    baseline's own device ids, what the 2026-11-21 tables in docs/results.md used)\n"
            "  --fresh-optimizer on|off (finetune: on, train --init: off) start from the loaded policy's\n"
            "                    parameters with a fresh Adam (off: keep its moments and step count)\n"
            "  --shrink L (1: off) multiply the loaded policy's parameters by L in (0, 1] before training\n"
            "                    (after the zero-shot evaluation): restores a pre-trained policy's ability\n"
            "                    to fit a new graph; with --imitate 500, L = 0.3 (docs/results.md)\n",
            GOPT_TRAINER_MAX_PROBATION);
}

static void train_usage(FILE *f) {
    fprintf(f, "Usage: gopt train --graphs DIR|FILE... --profile P [--devices N] [--tasks place,sched,fuse]\n"
               "                  --steps S|--seconds T -o CKPT [--resume] [options]\n"
               "       gopt train [--graphs DIR|FILE...] [--manifest LIST] [--profiles P1,P2,...]\n"
               "                  [--devices-range LO-HI] --steps S|--seconds T -o CKPT [--resume] [options]\n\n"
               "Train the GO policy with PPO on the simulator over many graphs (reward -sqrt(step/reference),\n"
               "reference = best baseline per graph). Every argument after --graphs that is not an option is a\n"
               "graph file or a directory of *.graphml[.gz] files (sorted by name).\n"
               "Each graph has its own cluster (profile and device count; docs/trainer.md, \"Mixing clusters\"):\n"
               "  --profiles P1,P2,...  each graph gets one of these profiles, drawn uniformly from --seed and the\n"
               "                        graph's file name (instead of one --profile for all)\n"
               "  --devices-range LO-HI each graph gets LO..HI devices (1..16), drawn the same way and capped by\n"
               "                        its profile's devices (a profile with fewer than LO devices is an error)\n"
               "  --manifest LIST       graphs listed in a tab-separated file: a header of column names, one\n"
               "                        graph per line; columns file (relative to LIST's folder), and optionally\n"
               "                        profile (a path) and devices (1..16); an empty cell is drawn as above\n"
               "                        (tools/pretrain-data.sh writes OUT/manifest.tsv in this form)\n"
               "  --graph-cache N       keep the simulator, scratch and features of the N graphs used last\n"
               "                        (default graphs-per-step + 1, at least 2; 0: all): memory, not results\n"
               "  --skip-unfit          leave out (with a warning) a graph that no reference baseline fits on\n"
               "                        its cluster (all out of memory) instead of stopping; one process only\n"
               "  --targets DIR         improved imitation targets (expert iteration, docs/trainer.md): a graph\n"
               "                        NAME with DIR/NAME.ckpt.state (gopt finetune -o DIR/NAME.ckpt on its\n"
               "                        cluster; tools/expert-targets.sh) imitates the best actions found\n"
               "                        there instead of its reference's decisions, when they simulate faster\n"
               "  --targets-keep all|place (all) what of a target is kept: all its decisions, or its\n"
               "                        placement with the best of {cp, fifo} x xla on it\n"
               "A run's state records each graph's profile and devices; --resume refuses others.\n"
               "Data-parallel: mpirun -np N gopt train ... shares each step's graphs (--graphs-per-step) and\n"
               "samples out to N ranks and gives the checkpoint one process would (docs/trainer.md)%s.\n",
               gopt_dist_built_with_mpi() ? "" : "; this build has no MPI");
    common_options_help(f);
    fprintf(f, "Network (new runs; defaults from the policy library):\n"
               "  --hidden D  --sage-layers L  --attn-layers L  --heads H  --segment S\n"
               "  --sched-levels P  --fusion-levels F  --init CKPT (start from a trained policy)\n"
               "  --hints H (0: off) the decoder also reads H classical placements (of heft, metf,\n"
               "                    metis, expert, msct, mtopo, single, in that order) and heft+cp+xla's\n"
               "                    priorities and fusion as features (docs/policy.md, \"Hints\")\n"
               "  --hint-quality    with --hints: the decoder also reads each hint's simulated step against\n"
               "                    the best hint's, and the schedule and fusion hints come from the best\n"
               "                    hint's placer+cp+xla\n"
               "  --fuse-cond       the fusion term also sees, per level, whether it joins a predecessor's\n"
               "                    fused group or roots a new one (docs/policy.md)\n"
               "  --fuse-hint       with --fuse-cond and --hints: ... and whether the group it joins is\n"
               "                    the hint fusion's group of the node or another\n"
               "  --fuse-hint-level with --fuse-cond and --hints: ... and which level the first decided\n"
               "                    member of the node's hint group took (groups with several roots)\n"
               "  --place-succ      the placement scorer also sees where a node's output goes: per device,\n"
               "                    the share of its output bytes whose consumer is already placed there\n"
               "                    (a weight's gradient sees its update's device; docs/policy.md)\n"
               "  --fuse-pass first|merge  the fusion pass: merge (default) joins every predecessor group\n"
               "                    of the level that keeps the groups acyclic; first joins one group\n"
               "                    (the pass of checkpoints before version 5)\n"
               "  --sched-cond      with --hints: the schedule term also sees which priority level the\n"
               "                    hint's priority rank falls in\n");
}

static void finetune_usage(FILE *f) {
    fprintf(f, "Usage: gopt finetune [--checkpoint C] GRAPH --profile P [--devices N] --steps S|--seconds T -o CKPT\n"
               "                     [options]\n\n"
               "Fine-tune a trained policy on one graph with PPO, then compare against every reference baseline:\n"
               "their simulated steps, GO zero-shot (greedy, before fine-tuning) and the best GO solution found.\n"
               "Without --checkpoint the shipped pre-trained checkpoint is used. --steps 0 only evaluates\n"
               "(zero-shot against the baselines; -o is then optional). --imitate N (counted in --steps) first\n"
               "imitates the graph's reference for N cheap steps (a warm start), then PPO; the best solution\n"
               "reported is never worse than the zero-shot one. Self-imitation is on by default: every\n"
               "%dth step imitates the best solution found so far (--imitate-every %d --imitate-target best,\n"
               "docs/trainer.md); --imitate-every 0 gives plain PPO. PPO runs --epochs %d per step by default,\n"
               "and only the policy's heads train (--train heads; --train all: the whole network).\n"
               "  --zero-shot-samples on|off (on) before the first step, also judge the pre-trained policy's\n"
               "                    --samples K samples (drawn from a stream of their own, so training is the\n"
               "                    same either way): the best found is then never worse than GO's best of K\n"
               "Evaluator of the samples (rewards, greedy, best found; references and baselines stay simulated):\n"
               "  --evaluator sim|runtime (sim) runtime: each sample's step is measured on this machine by\n"
               "                    the real runtime (as gopt run), one sample at a time; one process only\n"
               "  --backend cpu|cuda (cpu)  runtime backend; cuda exits 3 where there is no GPU\n"
               "  --reps R (3)      timed steps per measured sample (after one warm-up); the median is its step\n"
               "  --clock wall|cpu|cpu-min (wall)  the runtime's clock (gopt run --help)\n",
            FT_IMITATE_EVERY, FT_IMITATE_EVERY, FT_EPOCHS);
    common_options_help(f);
}

/* A profile graphs are trained on, loaded once, and its cost models by device count (built when used). */
typedef struct {
    const char *path;
    gopt_profile *prof;
    gopt_costmodel *cm[GOPT_POLICY_MAX_DEVICES + 1];
} train_cluster;

typedef struct {
    int finetune;
    const char *prof, *outp, *metrics, *decisions, *init, *tasks_s;
    const char *profiles_s, *range_s, *manifest; /* gopt train: the per-graph clusters */
    long dlo, dhi;                               /* --devices-range (0: none) */
    int cache;                                   /* --graph-cache (-1: the trainer's default) */
    int skip_unfit;                              /* --skip-unfit: leave out graphs nothing fits */
    const char *targets;                         /* --targets DIR: improved imitation targets */
    int targets_keep;                            /* --targets-keep: GOPT_TARGET_ALL or _PLACE */
    long ndev, steps;
    double seconds; /* --seconds: wall-time limit of the run (0: none) */
    double ckpt_every;
    int resume, quiet;
    int fresh_optimizer; /* zero the loaded policy's Adam moments: -1 unset (finetune: on, train --init: off) */
    double shrink;       /* multiply the loaded policy's parameters by this before training (1: off) */
    int zs_samples;      /* finetune: the pre-trained policy's K samples judged first (-1 unset: on) */
    int target_set;      /* --imitate-target given */
    int lr_set, imitate_lr_set; /* --lr, --imitate-lr given (--train heads has its own defaults) */
    int train_set;              /* --train given */
    int samples_set;            /* --samples given */
    int splice_set;             /* --splice given */
    int splice_place_set;       /* --splice-place given */
    int sample_variant_set;     /* --sample-variant given */
    int runtime;         /* finetune --evaluator runtime: measured steps judge the samples */
    const char *device;  /* --device: where the network runs (NULL: the CPU) */
    gopt_rt_options rto; /* its backend, reps, clock */
    gopt_trainer_options o;
    gopt_policy_config pc;
    const char *files[MAX_GRAPH_FILES];
    int nfiles;
    /* per graph file: its cluster (index in cl) and devices, -1 until assigned; the manifest line that
     * named it (0: none) */
    int fcl[MAX_GRAPH_FILES], fndev[MAX_GRAPH_FILES], fline[MAX_GRAPH_FILES];
    const char *fprofile[MAX_GRAPH_FILES]; /* the manifest's profile for it, or NULL */
    int tfile[MAX_GRAPH_FILES]; /* the file of each trainer graph (files may be skipped) */
    train_cluster cl[MAX_PROFILES];
    int ncl, nbase; /* profiles loaded; the first nbase are --profile / --profiles (drawn from) */
} train_args;

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* Expand a directory into its graph files, sorted (owned strings in *owned). */
static int add_path(train_args *ta, const char *path, char ***owned, int *nowned) {
    DIR *d = opendir(path);
    if (!d) {
        if (ta->nfiles == MAX_GRAPH_FILES) return -1;
        ta->files[ta->nfiles++] = path;
        return 0;
    }
    int start = ta->nfiles;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!ends_with(e->d_name, ".graphml") && !ends_with(e->d_name, ".graphml.gz")) continue;
        if (ta->nfiles == MAX_GRAPH_FILES) {
            closedir(d);
            return -1;
        }
        size_t len = strlen(path) + strlen(e->d_name) + 2;
        char *s = malloc(len), **no = realloc(*owned, sizeof(char *) * (size_t)(*nowned + 1));
        if (!s || !no) {
            free(s);
            if (no) *owned = no;
            closedir(d);
            return -1;
        }
        *owned = no;
        snprintf(s, len, "%s/%s", path, e->d_name);
        (*owned)[(*nowned)++] = s;
        ta->files[ta->nfiles++] = s;
    }
    closedir(d);
    qsort(ta->files + start, (size_t)(ta->nfiles - start), sizeof(char *), cmp_str);
    return 0;
}

/* Keep s (malloc'd) in *owned; NULL when s is NULL or out of memory (s freed). */
static char *own(char ***owned, int *nowned, char *s) {
    char **no = s ? realloc(*owned, sizeof(char *) * (size_t)(*nowned + 1)) : NULL;
    if (!no) {
        free(s);
        return NULL;
    }
    *owned = no;
    return (*owned)[(*nowned)++] = s;
}

/* The graph list FILE (--manifest): tab-separated, a header line of column
 * names (one of them `file`; `profile` and `devices` optional, other columns
 * ignored), then one graph per line; empty lines and lines starting with #
 * are skipped. A graph path is relative to FILE's folder; a profile path as
 * on the command line. An empty profile or devices cell is drawn as for the
 * graphs given on the command line. Returns 0 or the exit code. */
static int read_manifest(train_args *ta, const char *verb, char ***owned, int *nowned) {
    gopt_error err = {0};
    char *text = NULL;
    size_t len = 0;
    if (gopt_file_read_all(ta->manifest, &text, &len, &err)) return cli_report(&err);
    const char *slash = strrchr(ta->manifest, '/');
    int dlen = slash ? (int)(slash - ta->manifest) : 0, rc = 0, header = 0, lineno = 0, added = 0;
    int cfile = -1, cprof = -1, cdev = -1;
    for (char *line = text, *next; line && line < text + len; line = next) {
        char *nl = memchr(line, '\n', (size_t)(text + len - line));
        next = nl ? nl + 1 : NULL;
        if (nl) *nl = 0;
        lineno++;
        size_t ll = strlen(line);
        if (ll && line[ll - 1] == '\r') line[--ll] = 0;
        if (!ll || line[0] == '#') continue;
        char *cell[32];
        int nc = 0;
        for (char *c = line; c && nc < 32; nc++) {
            cell[nc] = c;
            char *tab = strchr(c, '\t');
            if (tab) *tab = 0;
            c = tab ? tab + 1 : NULL;
        }
        if (!header) {
            for (int k = 0; k < nc; k++) {
                if (strcmp(cell[k], "file") == 0) cfile = k;
                if (strcmp(cell[k], "profile") == 0) cprof = k;
                if (strcmp(cell[k], "devices") == 0) cdev = k;
            }
            if (cfile < 0) {
                rc = cli_usage_error(verb, "%s:%d: the header has no 'file' column (tab-separated column names)",
                                     ta->manifest, lineno);
                goto out;
            }
            header = 1;
            continue;
        }
        const char *f = cfile < nc ? cell[cfile] : "", *pr = cprof >= 0 && cprof < nc ? cell[cprof] : "",
                   *dv = cdev >= 0 && cdev < nc ? cell[cdev] : "";
        if (!f[0]) {
            rc = cli_usage_error(verb, "%s:%d: no graph file in column 'file'", ta->manifest, lineno);
            goto out;
        }
        long nd = 0;
        if (dv[0]) {
            char *end = NULL;
            nd = strtol(dv, &end, 10);
            if (*end || end == dv || nd < 1 || nd > GOPT_POLICY_MAX_DEVICES) {
                rc = cli_usage_error(verb, "%s:%d: devices '%s' is not a whole number in 1..%d", ta->manifest, lineno,
                                     dv, GOPT_POLICY_MAX_DEVICES);
                goto out;
            }
        }
        if (ta->nfiles == MAX_GRAPH_FILES) {
            rc = cli_usage_error(verb, "%s:%d: too many graph files (at most %d)", ta->manifest, lineno,
                                 MAX_GRAPH_FILES);
            goto out;
        }
        size_t pl = strlen(f) + (size_t)dlen + 2;
        char *path = own(owned, nowned, malloc(pl)), *prof = pr[0] ? own(owned, nowned, strdup(pr)) : NULL;
        if (!path || (pr[0] && !prof)) {
            rc = cli_usage_error(verb, "%s: out of memory", ta->manifest);
            goto out;
        }
        if (f[0] == '/' || !slash) snprintf(path, pl, "%s", f);
        else snprintf(path, pl, "%.*s/%s", dlen, ta->manifest, f);
        ta->fprofile[ta->nfiles] = prof;
        ta->fndev[ta->nfiles] = (int)nd;
        ta->fline[ta->nfiles] = lineno;
        ta->files[ta->nfiles++] = path;
        added++;
    }
    if (!header) rc = cli_usage_error(verb, "%s: no header line (tab-separated column names, one of them 'file')",
                                      ta->manifest);
    else if (!added) rc = cli_usage_error(verb, "%s: no graphs listed", ta->manifest);
out:
    free(text);
    return rc;
}

/* The index of profile `path` in ta->cl, loaded the first time. */
static gopt_status cluster_of(train_args *ta, const char *path, int *k, gopt_error *err) {
    for (*k = 0; *k < ta->ncl; (*k)++)
        if (strcmp(ta->cl[*k].path, path) == 0) return GOPT_OK;
    if (ta->ncl == MAX_PROFILES) return gopt_error_set(err, GOPT_EINVAL, "more than %d profiles", MAX_PROFILES);
    train_cluster *c = &ta->cl[ta->ncl];
    memset(c, 0, sizeof *c);
    gopt_status st = gopt_profile_load(path, &c->prof, err);
    if (st) return st;
    c->path = path;
    *k = ta->ncl++;
    return GOPT_OK;
}

/* --devices-range LO-HI (or N): 1 <= LO <= HI <= 16. Returns 0, or 2 after the message. */
static int parse_range(train_args *ta, const char *verb) {
    const char *s = ta->range_s;
    char *end = NULL;
    long lo = strtol(s, &end, 10), hi = lo;
    if (end != s && *end == '-') {
        const char *h = end + 1;
        hi = strtol(h, &end, 10);
        if (end == h) end = (char *)h - 1; /* "4-": malformed */
    }
    if (end == s || *end || lo < 1 || hi > GOPT_POLICY_MAX_DEVICES || lo > hi)
        return cli_usage_error(verb, "--devices-range '%s': expected LO-HI (or N) with 1 <= LO <= HI <= %d", s,
                               GOPT_POLICY_MAX_DEVICES);
    ta->dlo = lo;
    ta->dhi = hi;
    return 0;
}

static int mixing(const train_args *ta) { return ta->profiles_s || ta->range_s || ta->manifest; }

/* Give every graph file a profile and a device count: the manifest's, else
 * drawn from the stream seeded by --seed and the file's name (a profile of
 * --profiles, uniformly; devices uniformly in --devices-range capped by the
 * profile's devices), else --profile and --devices (default: all). Builds
 * the cost models used. Returns 0 or the exit code. */
static int assign_clusters(train_args *ta, const char *verb) {
    gopt_error err = {0};
    int k = 0;
    if (ta->profiles_s) {
        for (const char *p = ta->profiles_s; *p;) {
            const char *e = strchr(p, ',');
            size_t l = e ? (size_t)(e - p) : strlen(p);
            if (!l) return cli_usage_error(verb, "--profiles '%s': an empty profile path", ta->profiles_s);
            char *path = strndup(p, l);
            if (!path) return cli_usage_error(verb, "out of memory");
            gopt_status st = cluster_of(ta, path, &k, &err);
            if (st || ta->cl[k].path != path) free(path); /* loaded before, or failed */
            if (st) {
                gopt_error_prefix(&err, "--profiles");
                return cli_report(&err);
            }
            p = e ? e + 1 : p + l;
        }
    } else if (ta->prof && cluster_of(ta, ta->prof, &k, &err)) {
        return cli_report(&err);
    }
    ta->nbase = ta->ncl;
    for (int i = 0; i < ta->nfiles; i++) {
        const char *f = ta->files[i], *base = strrchr(f, '/');
        base = base ? base + 1 : f;
        uint64_t h = 1469598103934665603ull; /* FNV-1a of the file name: the draw does not depend on the order */
        for (const char *c = base; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
        gopt_rng r;
        gopt_rng_seed(&r, ta->o.seed ^ h);
        char where[512] = "";
        if (ta->fline[i]) snprintf(where, sizeof where, "%s:%d: ", ta->manifest, ta->fline[i]);
        if (ta->fprofile[i]) {
            if (cluster_of(ta, ta->fprofile[i], &k, &err)) {
                gopt_error_prefix(&err, "%sprofile", where);
                return cli_report(&err);
            }
        } else if (!ta->nbase) {
            return cli_usage_error(verb, "%s%s: no profile (give --profile P or --profiles P1,P2,...)", where, f);
        } else {
            k = ta->nbase > 1 ? (int)gopt_rng_below(&r, (uint64_t)ta->nbase) : 0;
        }
        const gopt_profile *pr = ta->cl[k].prof;
        int have = gopt_profile_num_devices(pr);
        long nd = ta->fndev[i];
        if (nd > have)
            return cli_usage_error(verb, "%sdevices %ld: profile '%s' has %d devices", where, nd,
                                   gopt_profile_name(pr), have);
        if (!nd && ta->dlo) {
            if (ta->dlo > have)
                return cli_usage_error(verb, "--devices-range %s: profile '%s' has %d devices", ta->range_s,
                                       gopt_profile_name(pr), have);
            long hi = ta->dhi < have ? ta->dhi : have;
            nd = ta->dlo + (long)gopt_rng_below(&r, (uint64_t)(hi - ta->dlo + 1));
        } else if (!nd) {
            if (ta->ndev > have)
                return cli_usage_error(verb, "--devices %ld: profile '%s' has %d devices", ta->ndev,
                                       gopt_profile_name(pr), have);
            nd = ta->ndev ? ta->ndev : have;
        }
        if (nd > GOPT_POLICY_MAX_DEVICES)
            return cli_usage_error(verb, "%s: profile '%s' has %ld devices, more than the policy places on (%d): "
                                   "give --devices", f, gopt_profile_name(pr), nd, GOPT_POLICY_MAX_DEVICES);
        if (!ta->cl[k].cm[nd] && gopt_cost_create(pr, (int)nd, &ta->cl[k].cm[nd], &err)) return cli_report(&err);
        ta->fcl[i] = k;
        ta->fndev[i] = (int)nd;
    }
    return 0;
}

static void free_clusters(train_args *ta) {
    for (int k = 0; k < ta->ncl; k++) {
        for (int d = 0; d <= GOPT_POLICY_MAX_DEVICES; d++) gopt_cost_free(ta->cl[k].cm[d]);
        gopt_profile_free(ta->cl[k].prof);
        if (k < ta->nbase && ta->profiles_s) free((char *)ta->cl[k].path);
    }
    ta->ncl = ta->nbase = 0;
}

static const gopt_costmodel *file_cm(const train_args *ta, int i) { return ta->cl[ta->fcl[i]].cm[ta->fndev[i]]; }

/* How many graphs each profile x device count got (stderr). */
static void print_assignment(const train_args *ta, const char *verb) {
    static int count[MAX_PROFILES][GOPT_POLICY_MAX_DEVICES + 1];
    memset(count, 0, sizeof count);
    for (int i = 0; i < ta->nfiles; i++) count[ta->fcl[i]][ta->fndev[i]]++;
    fprintf(stderr, "%s: %d graphs by profile and device count:\n", verb, ta->nfiles);
    for (int k = 0; k < ta->ncl; k++)
        for (int d = 1; d <= GOPT_POLICY_MAX_DEVICES; d++)
            if (count[k][d])
                fprintf(stderr, "  %-28s %2d device%s %6d graph%s\n", gopt_profile_name(ta->cl[k].prof), d,
                        d > 1 ? "s" : " ", count[k][d], count[k][d] > 1 ? "s" : "");
}

/* "on" 1, "off" 0, anything else a usage error (-1). */
/* A two-way option's value s: 0 for v0, 1 for v1, -1 (the usage error said) otherwise. */
static int one_of_two(cli_args *a, const char *name, const char *s, const char *v0, const char *v1) {
    if (strcmp(s, v0) == 0) return 0;
    if (strcmp(s, v1) == 0) return 1;
    cli_usage_error(a->verb, "%s: '%s' is not %s or %s", name, s, v0, v1);
    return -1;
}

static int on_off(cli_args *a, const char *name, const char *s) {
    const int k = one_of_two(a, name, s, "on", "off");
    return k < 0 ? -1 : !k;
}

/* Parse the options shared by train and finetune. Returns -1 when the
 * argument was consumed, 2 on a bad value, 0 when not ours. */
static int parse_common(cli_args *a, train_args *ta) {
    long l;
    double x;
    const char *s;
    if (cli_opt_str(a, "--profile", &ta->prof) || cli_opt_str(a, "-o", &ta->outp) ||
        cli_opt_str(a, "--output", &ta->outp) || cli_opt_str(a, "--metrics", &ta->metrics) ||
        cli_opt_str(a, "--decisions", &ta->decisions) || cli_opt_str(a, "--tasks", &ta->tasks_s) ||
        cli_opt_long(a, "--devices", &ta->ndev, 1, GOPT_POLICY_MAX_DEVICES) ||
        cli_opt_long(a, "--steps", &ta->steps, 0, 100000000L) ||
        cli_opt_double(a, "--seconds", &ta->seconds, 1e-3, 1e9) ||
        cli_opt_double(a, "--checkpoint-every", &ta->ckpt_every, 0.0, 1e9))
        return a->bad ? 2 : -1;
    if (cli_opt_long(a, "--samples", &l, 2, GOPT_TRAINER_MAX_SAMPLES)) {
        ta->o.samples = (int)l;
        ta->samples_set = 1;
    } else if (cli_opt_long(a, "--epochs", &l, 1, 100)) ta->o.epochs = (int)l;
    else if (cli_opt_double(a, "--clip", &x, 1e-6, 0.999)) ta->o.clip_eps = (float)x;
    else if (cli_opt_double(a, "--entropy", &x, 0.0, 10.0)) ta->o.entropy_coef = (float)x;
    else if (cli_opt_double(a, "--lr", &x, 1e-9, 0.999)) {
        ta->o.adam.lr = (float)x;
        ta->lr_set = 1;
    }
    else if (cli_opt_double(a, "--clip-norm", &x, 0.0, 1e9)) ta->o.adam.clip_norm = (float)x;
    else if (cli_opt_double(a, "--invalid-reward", &x, -1e6, 0.0)) ta->o.invalid_reward = (float)x;
    else if (cli_opt_long(a, "--threads", &l, 1, 64)) ta->o.sim_threads = (int)l;
    else if (cli_opt_long(a, "--seed", &l, 0, 0x7fffffffL)) ta->o.seed = (uint64_t)l;
    else if (cli_opt_long(a, "--imitate", &l, 0, 100000000L)) ta->o.imitate_steps = (int)l;
    else if (cli_opt_long(a, "--imitate-every", &l, 0, 100000000L)) ta->o.imitate_every = (int)l;
    else if (cli_opt_double(a, "--imitate-lr", &x, 1e-9, 0.999)) {
        ta->o.imitate_lr = (float)x;
        ta->imitate_lr_set = 1;
    } else if (cli_opt_str(a, "--train", &s)) {
        if ((ta->o.train_heads = one_of_two(a, "--train", s, "all", "heads")) < 0) return 2;
        ta->train_set = 1;
    }
    else if (cli_opt_double(a, "--place-temperature", &x, 0.05, 100)) ta->o.place_temperature = (float)x;
    else if (cli_opt_long(a, "--splice", &l, 0, GOPT_TRAINER_MAX_SPLICE)) {
        ta->o.splice = (int)l;
        ta->splice_set = 1;
    }
    else if (cli_opt_double(a, "--splice-place", &x, 0, 1)) {
        ta->o.splice_place = (float)x;
        ta->splice_place_set = 1;
    }
    else if (cli_opt_long(a, "--splice-batch", &l, 1, GOPT_TRAINER_MAX_SAMPLES)) ta->o.splice_batch = (int)l;
    else if (cli_opt_long(a, "--style-probation", &l, 0, GOPT_TRAINER_MAX_PROBATION)) ta->o.style_probation = (int)l;
    else if (cli_opt_str(a, "--sample-variant", &s)) {
        if ((ta->o.sample_variant = one_of_two(a, "--sample-variant", s, "own", "incumbent")) < 0) return 2;
        ta->sample_variant_set = 1;
    }
    else if (cli_opt_str(a, "--imitate-target", &s)) {
        if ((ta->o.imitate_best = one_of_two(a, "--imitate-target", s, "reference", "best")) < 0) return 2;
        ta->target_set = 1;
    }
    else if (cli_opt_double(a, "--shrink", &x, 1e-3, 1)) ta->shrink = x;
    else if (cli_opt_long(a, "--graphs-per-step", &l, 1, 256)) ta->o.graphs_per_step = (int)l;
    else if (cli_opt_long(a, "--switch-every", &l, 1, 100000000L)) ta->o.switch_every = (int)l;
    else if (cli_opt_str(a, "--reference", &s)) ta->o.reference = s;
    else if (cli_opt_long(a, "--reference-evals", &l, 0, 1000000000L)) ta->o.reference_evals = l;
    else if (cli_opt_long(a, "--reference-anneal-max-nodes", &l, 0, 100000000L))
        ta->o.reference_anneal_max_nodes = (int)l;
    else if (cli_opt_str(a, "--device", &s)) ta->device = s;
    else if (cli_opt_str(a, "--backward", &s)) {
        if ((ta->o.backward_rounds = one_of_two(a, "--backward", s, "batched", "rounds")) < 0) return 2;
    }
    else if (cli_opt_str(a, "--canonical-targets", &s)) {
        if ((ta->o.canonical_targets = on_off(a, "--canonical-targets", s)) < 0) return 2;
    }
    else if (cli_opt_str(a, "--fresh-optimizer", &s)) {
        if ((ta->fresh_optimizer = on_off(a, "--fresh-optimizer", s)) < 0) return 2;
    }
    else if (cli_opt_str(a, "--zero-shot-samples", &s)) {
        if ((ta->zs_samples = on_off(a, "--zero-shot-samples", s)) < 0) return 2;
    }
    else if (cli_flag(a, "--resume")) ta->resume = 1;
    else if (cli_flag(a, "--quiet")) ta->quiet = 1;
    else return 0;
    return a->bad ? 2 : -1;
}

static json_t *jnum(double x) { return isfinite(x) ? json_real(x) : json_null(); }

static void write_metrics(FILE *mf, const gopt_trainer *t, const gopt_trainer_stats *st, double elapsed,
                          double graphs_per_s) {
    json_t *o = json_object();
    json_object_set_new(o, "step", json_integer((json_int_t)st->step));
    json_object_set_new(o, "phase", json_string(st->imitation ? "imitation" : "ppo"));
    json_object_set_new(o, "graph", json_string(gopt_graph_name(gopt_trainer_graph(t, st->graph))));
    json_object_set_new(o, "graphs", json_integer(st->graphs));
    json_object_set_new(o, "mean_step_s", jnum(st->mean_step_s));
    json_object_set_new(o, "best_step_s", jnum(st->best_step_s));
    json_object_set_new(o, "mean_rel", jnum(st->mean_rel));
    json_object_set_new(o, "best_rel", jnum(st->best_rel));
    json_object_set_new(o, "best_so_far_rel", jnum(st->best_so_far_rel));
    if (st->imitation) {
        json_object_set_new(o, "target_rel", jnum(st->target_rel));
        json_t *acc = json_object();
        for (int k = 0; k < GOPT_TASK_COUNT; k++)
            if (gopt_trainer_options_tasks(t) & GOPT_TASK_BIT(k))
                json_object_set_new(acc, gopt_task_name((gopt_task)k), jnum(st->imitate_acc[k]));
        json_object_set_new(o, "greedy_accuracy", acc);
    }
    json_object_set_new(o, "reward", jnum(st->reward_mean));
    json_object_set_new(o, "entropy", jnum(st->entropy));
    json_object_set_new(o, "loss", jnum(st->loss));
    json_object_set_new(o, "grad_norm", jnum(st->grad_norm));
    json_object_set_new(o, "invalid", json_integer(st->invalid));
    json_object_set_new(o, "skipped", json_integer(st->skipped));
    json_object_set_new(o, "backward_calls", json_integer(st->backward_calls));
    /* only on the step that ends a style's probation (--style-probation) */
    if (st->probation_ended) json_object_set_new(o, "incumbent_own_s", jnum(st->own_step_s));
    json_object_set_new(o, "seconds", jnum(st->seconds));
    json_object_set_new(o, "elapsed_s", jnum(elapsed));
    json_object_set_new(o, "graphs_per_s", jnum(graphs_per_s));
    char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(9));
    if (s) {
        fprintf(mf, "%s\n", s);
        fflush(mf);
    }
    free(s);
    json_decref(o);
}

/* On resume: keep the metric lines of steps before `step`, drop the rest
 * (they came after the checkpoint and will be redone). */
static gopt_status trim_metrics(const char *path, int64_t step, gopt_error *err) {
    if (access(path, F_OK) != 0) return GOPT_OK;
    char *text = NULL;
    size_t len = 0;
    gopt_status st = gopt_file_read_all(path, &text, &len, err);
    if (st) return st;
    gopt_buf b;
    gopt_buf_init(&b);
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        size_t ll = nl ? (size_t)(nl - line) : strlen(line);
        json_t *j = json_loadb(line, ll, 0, NULL);
        json_t *s = j ? json_object_get(j, "step") : NULL;
        if (!s || !json_is_integer(s) || json_integer_value(s) < step) {
            gopt_buf_append(&b, line, ll);
            gopt_buf_puts(&b, "\n");
        }
        json_decref(j);
        line = nl ? nl + 1 : NULL;
    }
    st = b.failed ? gopt_error_set(err, GOPT_ENOMEM, "out of memory") : gopt_file_write_atomic(path, b.data ? b.data : "", b.len, 0, err);
    gopt_buf_destroy(&b);
    free(text);
    return st;
}

static void progress(const gopt_trainer_stats *st, long steps, double gps, int tty) {
    char of[32] = ""; /* "/S" unless the run is bounded by --seconds alone */
    if (steps < STEPS_UNBOUNDED) snprintf(of, sizeof of, "/%ld", steps);
    if (st->imitation)
        fprintf(stderr, "%sstep %lld%s imitation  %.2f graphs/s  loss %.4f  entropy %.3f  targets %.3fx ref%s",
                tty ? "\r" : "", (long long)st->step + 1, of, gps, st->loss, st->entropy, st->target_rel,
                tty ? "   " : "\n");
    else
        fprintf(stderr,
                "%sstep %lld%s  %.2f graphs/s  mean %.4g ms  best %.4g ms (%.3fx ref, so far %.3fx)  entropy %.3f%s%s",
                tty ? "\r" : "", (long long)st->step + 1, of, gps, st->mean_step_s * 1e3, st->best_step_s * 1e3,
                st->best_rel, st->best_so_far_rel, st->entropy, st->skipped ? "  SKIPPED (non-finite)" : "",
                tty ? "   " : "\n");
}

/* finetune's table lists every reference baseline up to FT_TABLE_ROWS of them; beyond, each
 * placer's fastest combination (the placer: a name's text before its first '+'). */
#define FT_TABLE_ROWS 16

/* Keep, in first-seen order of the placers, each placer's fastest baseline (a fitting step beats an
 * out-of-memory one, negative; none, +inf, loses to both); returns how many rows remain. */
static int fastest_per_placer(const char **names, double *steps, int nb) {
    int k = 0;
    for (int j = 0; j < nb; j++) {
        const size_t pl = strcspn(names[j], "+");
        int g = -1;
        for (int r = 0; r < k && g < 0; r++)
            if (strcspn(names[r], "+") == pl && !strncmp(names[r], names[j], pl)) g = r;
        if (g < 0) {
            names[k] = names[j];
            steps[k++] = steps[j];
            continue;
        }
        /* rank: fitting (by step), then out of memory (by step), then none */
        const double a = steps[j], b = steps[g];
        const int ca = isinf(a) ? 2 : a < 0, cb = isinf(b) ? 2 : b < 0;
        if (ca < cb || (ca == cb && ca < 2 && fabs(a) < fabs(b))) {
            names[g] = names[j];
            steps[g] = a;
        }
    }
    return k;
}

static void print_reference(const train_args *ta, const gopt_trainer *tr, int i) {
    if (ta->quiet) return;
    const char *m;
    double ref = gopt_trainer_reference(tr, i, &m);
    double rs = 0;
    int rl = gopt_trainer_target_relabel(tr, i, &rs), f = ta->tfile[i];
    if (mixing(ta))
        fprintf(stderr, "%s (%s, %d device%s)", ta->files[f], gopt_profile_name(ta->cl[ta->fcl[f]].prof),
                ta->fndev[f], ta->fndev[f] > 1 ? "s" : "");
    else
        fprintf(stderr, "%s", ta->files[f]);
    fprintf(stderr, ": reference %.6g ms (%s)%s", ref * 1e3, m,
            rl == 0 ? "\n" : rl > 0 ? "; target relabelled" : "; relabelled target slower, kept as is");
    if (rl) fprintf(stderr, " (%.6g ms)\n", rs * 1e3);
}

static int run(train_args *ta, const char *verb, const char *init) {
    gopt_error err = {0};
    const double start = gopt_now_seconds(); /* --seconds counts from here */
    const gopt_costmodel *cm = NULL; /* graph 0's */
    gopt_policy *pol = NULL;
    gopt_trainer *tr = NULL;
    gopt_dist *dist = NULL;
    FILE *mf = NULL;
    char *mpath = NULL;
    gopt_runtime *rt = NULL;
    gopt_rt_eval_ctx rctx;
    memset(&rctx, 0, sizeof rctx);
    int rc = 0;
    if (gopt_dist_init(&dist, &err)) return cli_report(&err);
    const int root = gopt_dist_rank(dist) == 0, ranks = gopt_dist_size(dist);
    if (!root) ta->quiet = 1; /* rank 0 alone prints, and writes the metrics and checkpoints */
    if (ta->skip_unfit && ranks > 1) { /* the references are computed after every graph is added */
        rc = cli_usage_error(verb, "--skip-unfit runs in one process (not under mpirun with %d ranks)", ranks);
        goto give_up;
    }
    if (ta->runtime && ranks > 1) { /* ranks measuring at once on one machine would time each other */
        rc = cli_usage_error(verb, "--evaluator runtime runs in one process (not under mpirun with %d ranks)", ranks);
        goto give_up;
    }
    if ((rc = assign_clusters(ta, verb))) goto give_up;
    cm = file_cm(ta, 0);
    if (root && mixing(ta) && !ta->quiet) print_assignment(ta, verb);
    /* the policy: resumed (loaded below by the trainer), initialised from a
     * trained checkpoint, or fresh */
    if (init) {
        if (gopt_policy_load(&pol, init, &err)) goto fail;
        /* fine-tuning is a new task: a fresh Adam (moments from pre-training over many graphs damp
         * and bias the first steps on one graph; docs/results.md measures it) */
        if (ta->fresh_optimizer > 0 || (ta->fresh_optimizer < 0 && ta->finetune)) gopt_policy_adam_reset(pol);
        if (!ta->tasks_s && gopt_trainer_checkpoint_tasks(init, &ta->o.tasks, &err)) goto fail;
    } else if (gopt_policy_config_check(&ta->pc, &err) || gopt_policy_create(&pol, &ta->pc, ta->o.seed, &err)) {
        goto fail;
    }
    if (ta->device && gopt_policy_set_device(pol, ta->device, &err)) {
        rc = cli_report(&err);
        if (err.code == GOPT_EUNSUP) rc = GOPT_EXIT_NO_DEVICE;
        goto give_up;
    }
    if (gopt_trainer_create(&tr, pol, mixing(ta) ? NULL : cm, &ta->o, &err)) goto fail;
    gopt_trainer_set_dist(tr, dist);
    const gopt_policy_config *pcfg = gopt_policy_get_config(pol);
    if (root && !ta->finetune && (ta->o.imitate_steps > 0 || ta->o.imitate_every > 0) && pcfg->hints > 0 &&
        pcfg->hint_quality && (ta->o.tasks & GOPT_TASK_BIT(GOPT_TASK_PLACE))) { /* imitation of the references */
        char miss[64];
        const int nm = gopt_go_hint_refs_missing(ta->o.reference, pcfg->hints, miss, sizeof miss);
        if (nm > 0)
            fprintf(stderr,
                    "%s: warning: --reference lacks %d of the combinations the hints are drawn from (e.g. %s): "
                    "where one of them is the best hint, imitation teaches the policy to leave it "
                    "(docs/trainer.md, \"References and hints\")\n",
                    verb, nm, miss);
    }
    if (ta->cache >= 0) gopt_trainer_set_cache(tr, ta->cache);
    if (root && ranks > 1 && !ta->quiet)
        fprintf(stderr, "%s: %d ranks, %d graph(s) per step\n", verb, ranks, ta->o.graphs_per_step);
    int skipped = 0;
    for (int i = 0; i < ta->nfiles; i++) {
        gopt_graph *g = NULL;
        if (gopt_graph_load(ta->files[i], &g, &err)) goto fail;
        if (!ta->quiet && ranks == 1)
            fprintf(stderr, "%s: %d nodes, computing the reference...\n", ta->files[i], gopt_graph_num_nodes(g));
        gopt_status as = gopt_trainer_add_graph_on(tr, g, file_cm(ta, i), 0, &err);
        if (as == GOPT_EUNSUP && ta->skip_unfit) { /* nothing fits this graph on its cluster */
            if (root) fprintf(stderr, "%s: skipped (--skip-unfit): %s\n", ta->files[i], err.msg);
            skipped++;
            continue;
        }
        if (as) {
            gopt_error_prefix(&err, "%s", ta->files[i]);
            goto fail;
        }
        ta->tfile[gopt_trainer_num_graphs(tr) - 1] = i;
        if (ranks == 1) print_reference(ta, tr, gopt_trainer_num_graphs(tr) - 1);
    }
    if (skipped && root)
        fprintf(stderr, "%s: %d of %d graphs skipped: no reference baseline fits them on their cluster\n", verb,
                skipped, ta->nfiles);
    if (!gopt_trainer_num_graphs(tr)) {
        gopt_error_set(&err, GOPT_EUNSUP, "every graph was skipped (--skip-unfit): nothing fits them");
        goto fail;
    }
    if (ranks > 1) { /* each rank computes the references of every N-th graph, then they are shared */
        if (!ta->quiet) fprintf(stderr, "%d graphs: computing the references on %d ranks...\n", ta->nfiles, ranks);
        if (gopt_trainer_share_references(tr, &err)) goto fail;
        for (int i = 0; i < ta->nfiles; i++) print_reference(ta, tr, i);
    }
    if (ta->targets) { /* improved imitation targets, after the references they must beat */
        gopt_trainer_targets tg;
        if (gopt_trainer_load_targets(tr, ta->targets, ta->targets_keep, &tg, &err)) goto fail;
        if (root && !ta->quiet)
            fprintf(stderr,
                    "--targets %s: %d of %d graphs have one; %d taken (mean %.4fx their reference), %d no faster "
                    "than the reference, %d for another cluster\n",
                    ta->targets, tg.files, gopt_trainer_num_graphs(tr), tg.used, tg.used ? tg.rel_sum / tg.used : NAN,
                    tg.slower, tg.other_cluster);
        if (root && !tg.files)
            fprintf(stderr, "%s: warning: --targets %s: no NAME.ckpt.state there for any of the %d graphs\n", verb,
                    ta->targets, gopt_trainer_num_graphs(tr));
    }
    if (ta->runtime) { /* the real runtime judges the samples (finetune: one graph) */
        if (gopt_rt_create(gopt_trainer_graph(tr, 0), cm, &rt, &err)) goto fail;
        rctx.rt = rt;
        rctx.opt = ta->rto;
        gopt_trainer_set_evaluator(tr, gopt_rt_evaluate, &rctx);
        if (!ta->quiet)
            fprintf(stderr, "evaluator: runtime, backend %s, %d timed step(s) per sample, %s clock\n",
                    gopt_rt_backend_name(ta->rto.backend), ta->rto.reps, gopt_rt_clock_name(ta->rto.clock));
    }
    if (ta->resume) {
        /* rank 0 first: it may finish an interrupted commit (rename) the others then read */
        int any = 0;
        if (root && gopt_trainer_load(tr, ta->outp, &err)) goto fail;
        if (gopt_dist_any(dist, 0, &any, &err)) goto fail;
        if (!root && gopt_trainer_load(tr, ta->outp, &err)) goto fail;
        if (!ta->quiet)
            fprintf(stderr, "resumed %s at step %lld\n", ta->outp, (long long)gopt_trainer_steps_done(tr));
    }
    const char *metrics = ta->metrics;
    if (!metrics && ta->outp) {
        size_t ml = strlen(ta->outp) + 32;
        mpath = malloc(ml);
        if (!mpath) {
            gopt_error_set(&err, GOPT_ENOMEM, "out of memory");
            goto fail;
        }
        snprintf(mpath, ml, "%s.metrics.jsonl", ta->outp);
        metrics = mpath;
    }
    if (metrics && root) {
        if (ta->resume && trim_metrics(metrics, gopt_trainer_steps_done(tr), &err)) goto fail;
        mf = fopen(metrics, ta->resume ? "a" : "w");
        if (!mf) {
            gopt_error_set(&err, GOPT_EIO, "%s: cannot open for writing", metrics);
            goto fail;
        }
    }
    /* fine-tuning: the zero-shot greedy decisions first, for the comparison; not on resume: the
     * policy is no longer the pre-trained one, and its greedy answer judged there could become a
     * best the uninterrupted run never had (a resumed run continues it bit for bit) */
    gopt_sim_result zero_shot = {0};
    double zero_shot_k = NAN; /* the pre-trained policy's best of K (NAN: not judged) */
    const int zs_greedy = ta->finetune && !ta->resume;
    if (zs_greedy) {
        gopt_decisions d0 = {0};
        const gopt_graph *g0 = gopt_trainer_graph(tr, 0);
        gopt_status s0 = gopt_decisions_init(&d0, gopt_graph_num_nodes(g0), &err);
        if (!s0) s0 = gopt_trainer_greedy(tr, 0, &d0, &zero_shot, &err);
        gopt_decisions_destroy(&d0);
        if (!s0 && ta->zs_samples != 0) { /* GO's best of K, from a stream of its own */
            gopt_rng zr;
            gopt_rng_seed(&zr, ta->o.seed ^ 0x7a65726f73686f74ull); /* "zeroshot" */
            s0 = gopt_trainer_sample_best(tr, 0, &zr, &zero_shot_k, &err);
        }
        if (s0 && rt && rctx.err.code) { /* the runtime's own message; no GPU here: exit 3 */
            rc = cli_report(&rctx.err);
            if (rctx.err.code == GOPT_EUNSUP && ta->rto.backend == GOPT_RT_CUDA) rc = GOPT_EXIT_NO_DEVICE;
            goto give_up;
        }
        if (s0) goto fail;
        double sty = 0, own = 0;
        if (!ta->quiet && gopt_trainer_style_probation(tr, 0, &sty, &own))
            fprintf(stderr, "zero-shot: self-imitation starts from a style's answer (%.4g ms, decoded under another "
                    "combination's hints); if %d PPO steps find nothing faster it follows the policy's own "
                    "(%.4g ms)\n", sty * 1e3, ta->o.style_probation, own * 1e3);
    }
    /* shrink after the zero-shot evaluation (which stays the pre-trained policy's); a resumed run's
     * parameters already descend from the shrunk ones */
    if (ta->shrink < 1 && !ta->resume) gopt_policy_shrink(pol, (float)ta->shrink);
    if (gopt_dist_check_same(dist, gopt_trainer_fingerprint(tr), "policy and trainer state", &err)) goto fail;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    int tty = cli_stderr_is_tty() && !ta->quiet;
    double t0 = gopt_now_seconds(), last_ckpt = t0;
    int64_t done0 = gopt_trainer_steps_done(tr);
    long graphs_done = 0;
    while (gopt_trainer_steps_done(tr) < ta->steps) {
        int stop = g_stop; /* every rank stops before the same step */
        if (ranks > 1 && gopt_dist_any(dist, g_stop, &stop, &err)) goto fail;
        if (stop) {
            g_stop = 1;
            break;
        }
        if (ta->seconds > 0) { /* the time limit: a normal end, decided by any rank for all */
            int late = gopt_now_seconds() - start >= ta->seconds;
            if (ranks > 1 && gopt_dist_any(dist, late, &late, &err)) goto fail;
            if (late) break;
        }
        gopt_trainer_stats st;
        if (gopt_trainer_step(tr, &st, &err)) goto fail;
        if (st.probation_ended && !ta->quiet && root)
            fprintf(stderr, "%sstep %lld: the style's zero-shot answer led to nothing faster in %d PPO steps: "
                    "self-imitation now follows the policy's own answer (%.4g ms); the style's stays an answer\n",
                    tty ? "\n" : "", (long long)st.step + 1, ta->o.style_probation, st.own_step_s * 1e3);
        graphs_done += st.graphs;
        double now = gopt_now_seconds(), gps = graphs_done / (now - t0 > 1e-9 ? now - t0 : 1e-9);
        if (mf) write_metrics(mf, tr, &st, now - t0, gps);
        if (st.skipped && root) fprintf(stderr, "%sstep %lld: %d update(s) skipped: non-finite loss or gradient\n", tty ? "\n" : "",
                                (long long)st.step, st.skipped);
        if (!ta->quiet && (tty || (st.step + 1) % 10 == 0 || st.step + 1 == ta->steps || st.step == done0))
            progress(&st, ta->steps, gps, tty);
        if (root && ta->outp && ta->ckpt_every > 0 && now - last_ckpt >= ta->ckpt_every) {
            if (gopt_trainer_save(tr, ta->outp, &err)) goto fail;
            last_ckpt = now;
        }
    }
    if (tty) fprintf(stderr, "\n");
    if (gopt_dist_check_same(dist, gopt_trainer_fingerprint(tr), "policy and trainer state", &err)) goto fail;
    if (root && ta->outp && gopt_trainer_save(tr, ta->outp, &err)) goto fail;
    if (g_stop) {
        if (root) fprintf(stderr, "%s: interrupted at step %lld; checkpoint %s written (continue with --resume)\n", verb,
                (long long)gopt_trainer_steps_done(tr), ta->outp);
        rc = 130;
        goto out;
    }
    if (!root) goto out; /* the summary is rank 0's */
    /* summary: greedy decisions of the final policy, best found, reference */
    printf("%-28s %8s %12s %12s %12s %12s  %-16s%s\n", "graph", "nodes", "reference_ms", "go_greedy_ms", "go_best_ms",
           "best/ref", "reference method", mixing(ta) ? "  cluster" : "");
    double sum_rel = 0;
    int none = 0;
    for (int i = 0; i < gopt_trainer_num_graphs(tr); i++) {
        const gopt_graph *g = gopt_trainer_graph(tr, i);
        gopt_decisions d = {0};
        gopt_sim_result res;
        if (gopt_decisions_init(&d, gopt_graph_num_nodes(g), &err) || gopt_trainer_greedy(tr, i, &d, &res, &err)) {
            gopt_decisions_destroy(&d);
            if (rt && rctx.err.code) err = rctx.err;
            goto fail;
        }
        gopt_decisions_destroy(&d);
        const char *m;
        double ref = gopt_trainer_reference(tr, i, &m);
        const gopt_decisions *bd;
        double best = gopt_trainer_best(tr, i, &bd);
        if (isfinite(best)) sum_rel += best / ref;
        else none++;
        printf("%-28s %8d %12.6g %12.6g%s %12.6g %12.4f  %-16s", gopt_graph_name(g), gopt_graph_num_nodes(g),
               ref * 1e3, res.step_time_s * 1e3, res.oom ? "!" : " ", best * 1e3, best / ref, m);
        if (mixing(ta))
            printf("  %s x%d", gopt_profile_name(ta->cl[ta->fcl[ta->tfile[i]]].prof), ta->fndev[ta->tfile[i]]);
        printf("\n");
        if (i == 0 && ta->decisions && bd) {
            if (gopt_decisions_save(ta->decisions, g, ta->fndev[ta->tfile[0]], bd, &err)) goto fail;
        } else if (i == 0 && ta->decisions) {
            fprintf(stderr, "gopt %s: --decisions '%s' not written: %s\n", ta->finetune ? "finetune" : "train",
                    ta->decisions, isfinite(best) ? "the best answer was found before the resume, and the state "
                                                    "(written by a build before 2026-12-02) keeps nothing to "
                                                    "remake its decisions from"
                                                  : "no valid solution found");
        }
    }
    const int found = gopt_trainer_num_graphs(tr) - none;
    printf("mean best/ref over %d graphs: %.4f (< 1: GO beats the best baseline)", found, found ? sum_rel / found : NAN);
    if (none) printf("; no valid solution found on %d graph(s)", none);
    printf("%s%s\n", ta->outp ? "; checkpoint " : "", ta->outp ? ta->outp : "");
    if (ta->finetune) { /* the comparison against every reference baseline */
        const char *names[64];
        double steps[64];
        int nb = gopt_trainer_baselines(tr, 0, names, steps, 64);
        const char *m;
        double ref = gopt_trainer_reference(tr, 0, &m);
        if (rt)
            printf("\nbaselines simulated; GO's steps measured (runtime, %s, median of %d)\n",
                   gopt_rt_backend_name(ta->rto.backend), ta->rto.reps);
        const int all = nb;
        if (nb > FT_TABLE_ROWS) nb = fastest_per_placer(names, steps, nb);
        if (nb < all) printf("\neach placer's fastest of the %d reference combinations simulated\n", all);
        printf("\n%-26s %12s %10s\n", "method", "step_ms", "vs best");
        for (int j = 0; j < nb; j++) {
            if (isinf(steps[j])) printf("%-26s %12s %10s\n", names[j], "none", "-");
            else printf("%-26s %12.6g %10.4f%s\n", names[j], fabs(steps[j]) * 1e3, fabs(steps[j]) / ref,
                        steps[j] < 0 ? "  OUT OF MEMORY" : strcmp(names[j], m) == 0 ? "  (best baseline)" : "");
        }
        if (zs_greedy)
            printf("%-26s %12.6g %10.4f%s\n", "go zero-shot (greedy)", zero_shot.step_time_s * 1e3,
                   zero_shot.step_time_s / ref, zero_shot.oom ? "  OUT OF MEMORY" : "");
        else
            printf("%-26s %12s %10s  (judged before the resume)\n", "go zero-shot (greedy)", "-", "-");
        if (!isnan(zero_shot_k)) {
            char label[40];
            snprintf(label, sizeof label, "go zero-shot (best of %d)", ta->o.samples);
            if (isinf(zero_shot_k)) printf("%-26s %12s %10s\n", label, "none", "-");
            else printf("%-26s %12.6g %10.4f\n", label, zero_shot_k * 1e3, zero_shot_k / ref);
        }
        if (ta->steps > 0) {
            const gopt_decisions *bd;
            double best = gopt_trainer_best(tr, 0, &bd);
            printf("%-26s %12.6g %10.4f  (%lld steps", "go fine-tuned (best found)", best * 1e3, best / ref,
                   (long long)gopt_trainer_steps_done(tr));
            if (ta->seconds > 0) printf(" in %.1f s", gopt_now_seconds() - start);
            printf(")\n");
        }
    }
    goto out;
fail:
    rc = cli_report(&err);
give_up:
    if (ranks > 1) gopt_dist_abort(dist, rc); /* the other ranks would wait for this one forever */
out:
    if (mf) fclose(mf);
    free(mpath);
    gopt_trainer_free(tr);
    gopt_rt_free(rt);
    gopt_policy_free(pol);
    free_clusters(ta);
    gopt_dist_free(dist);
    return rc;
}

static void args_init(train_args *ta) {
    memset(ta, 0, sizeof *ta);
    gopt_trainer_options_default(&ta->o);
    gopt_policy_config_default(&ta->pc);
    ta->ckpt_every = 300;
    ta->steps = -1;
    ta->fresh_optimizer = -1;
    ta->zs_samples = -1;
    ta->shrink = 1;
    ta->cache = -1;
}

static int check_common(train_args *ta, const char *verb) {
    if (ta->finetune && !ta->train_set) ta->o.train_heads = FT_TRAIN_HEADS && ta->shrink == 1;
    if (ta->finetune) ta->o.greedy_styles = GOPT_GO_STYLES_ALL; /* its zero-shot greedy answer is `optimize --method go`'s */
    if (ta->o.train_heads && !ta->lr_set) ta->o.adam.lr = GOPT_TRAINER_HEADS_LR;
    if (ta->o.train_heads && !ta->imitate_lr_set) ta->o.imitate_lr = GOPT_TRAINER_HEADS_IMITATE_LR;
    if (!ta->finetune && ta->zs_samples >= 0)
        return cli_usage_error(verb, "--zero-shot-samples is an option of gopt finetune");
    /* finetune's default (gopt_trainer_finetune_splice) meets both: only a given --splice can fail */
    if (ta->o.splice > 0 && !ta->o.imitate_best) /* its first parent is self-imitation's incumbent */
        return cli_usage_error(verb, "--splice %d needs --imitate-target best (and --imitate-every M)", ta->o.splice);
    if (ta->o.style_probation > 0 && !ta->o.imitate_best) /* it changes self-imitation's incumbent */
        return cli_usage_error(verb, "--style-probation %d needs --imitate-target best (and --imitate-every M)",
                               ta->o.style_probation);
    if (!ta->prof && !ta->profiles_s && !ta->manifest)
        return cli_usage_error(verb, "missing --profile P%s", ta->finetune ? "" : " (or --profiles P1,P2,...)");
    if (ta->prof && ta->profiles_s) return cli_usage_error(verb, "--profile and --profiles: give one of them");
    if (ta->ndev && ta->range_s) return cli_usage_error(verb, "--devices and --devices-range: give one of them");
    if (ta->steps < 0 && ta->seconds > 0) ta->steps = STEPS_UNBOUNDED; /* --seconds alone bounds the run */
    if (ta->steps < 0) return cli_usage_error(verb, "missing --steps S (or --seconds T)");
    if (!ta->outp && !(ta->finetune && ta->steps == 0)) return cli_usage_error(verb, "missing -o CKPT");
    if (!ta->outp && ta->resume) return cli_usage_error(verb, "--resume needs -o CKPT");
    if (ta->tasks_s) {
        gopt_error err = {0};
        if (gopt_trainer_parse_tasks(ta->tasks_s, &ta->o.tasks, &err)) return cli_usage_error(verb, "--tasks: %s", err.msg);
    }
    gopt_error err = {0};
    if (gopt_trainer_options_check(&ta->o, &err)) return cli_usage_error(verb, "%s", err.msg);
    return 0;
}

int cmd_train(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) {
        train_usage(stdout);
        return 0;
    }
    static train_args ta;
    args_init(&ta);
    char **owned = NULL;
    int nowned = 0, rc = 0, in_graphs = 0;
    const char *fpass = NULL, *tkeep = NULL;
    cli_args a;
    cli_init(&a, argc, argv, "train");
    while (a.i < a.argc) {
        long l;
        int r = parse_common(&a, &ta);
        if (r == 2) {
            rc = 2;
            goto out;
        }
        if (r == -1) continue;
        if (cli_opt_long(&a, "--hidden", &l, 2, 1024)) ta.pc.hidden = (int32_t)l;
        else if (cli_opt_long(&a, "--sage-layers", &l, 0, 8)) ta.pc.sage_layers = (int32_t)l;
        else if (cli_opt_long(&a, "--attn-layers", &l, 0, 8)) ta.pc.attn_layers = (int32_t)l;
        else if (cli_opt_long(&a, "--heads", &l, 1, 64)) ta.pc.heads = (int32_t)l;
        else if (cli_opt_long(&a, "--segment", &l, 1, 4096)) ta.pc.segment = (int32_t)l;
        else if (cli_opt_long(&a, "--sched-levels", &l, 1, 16)) ta.pc.sched_levels = (int32_t)l;
        else if (cli_opt_long(&a, "--fusion-levels", &l, 1, 16)) ta.pc.fusion_levels = (int32_t)l;
        else if (cli_opt_long(&a, "--hints", &l, 0, 7)) ta.pc.hints = (int32_t)l;
        else if (cli_flag(&a, "--hint-quality")) ta.pc.hint_quality = 1;
        else if (cli_flag(&a, "--fuse-cond")) ta.pc.fuse_cond = 1;
        else if (cli_flag(&a, "--fuse-hint")) ta.pc.fuse_hint = 1;
        else if (cli_flag(&a, "--fuse-hint-level")) ta.pc.fuse_hint_level = 1;
        else if (cli_flag(&a, "--place-succ")) ta.pc.place_succ = 1;
        else if (cli_opt_str(&a, "--fuse-pass", &fpass)) {
            if (strcmp(fpass, "merge") && strcmp(fpass, "first")) {
                rc = cli_usage_error(a.verb, "--fuse-pass '%s': expected first or merge", fpass);
                goto out;
            }
            ta.pc.fuse_merge = !strcmp(fpass, "merge");
        }
        else if (cli_flag(&a, "--sched-cond")) ta.pc.sched_cond = 1;
        else if (cli_opt_str(&a, "--init", &ta.init) || cli_opt_str(&a, "--profiles", &ta.profiles_s) ||
                 cli_opt_str(&a, "--manifest", &ta.manifest)) {
        } else if (cli_opt_long(&a, "--graph-cache", &l, 0, 1000000L)) ta.cache = (int)l;
        else if (cli_flag(&a, "--skip-unfit")) ta.skip_unfit = 1;
        else if (cli_opt_str(&a, "--targets", &ta.targets)) {
        } else if (cli_opt_str(&a, "--targets-keep", &tkeep)) {
            if (strcmp(tkeep, "all") && strcmp(tkeep, "place")) {
                rc = cli_usage_error(a.verb, "--targets-keep '%s': expected all or place", tkeep);
                goto out;
            }
            ta.targets_keep = strcmp(tkeep, "all") ? GOPT_TARGET_PLACE : GOPT_TARGET_ALL;
        }
        else if (cli_opt_str(&a, "--devices-range", &ta.range_s)) {
            if (parse_range(&ta, a.verb)) {
                rc = 2;
                goto out;
            }
        } else if (cli_flag(&a, "--graphs")) in_graphs = 1;
        else if (a.argv[a.i][0] == '-' && a.argv[a.i][1]) {
            rc = cli_usage_error(a.verb, "unknown option '%s'", a.argv[a.i]);
            goto out;
        } else {
            (void)in_graphs;
            if (add_path(&ta, a.argv[a.i++], &owned, &nowned)) {
                rc = cli_usage_error(a.verb, "too many graph files (at most %d) or out of memory", MAX_GRAPH_FILES);
                goto out;
            }
        }
        if (a.bad) {
            rc = 2;
            goto out;
        }
    }
    if (ta.manifest && (rc = read_manifest(&ta, a.verb, &owned, &nowned))) goto out;
    if (!ta.nfiles) {
        rc = cli_usage_error(a.verb, "missing --graphs DIR|FILE... or --manifest FILE (no graph files found)");
        goto out;
    }
    if ((rc = check_common(&ta, a.verb))) goto out;
    if (tkeep && !ta.targets) {
        rc = cli_usage_error(a.verb, "--targets-keep %s needs --targets DIR (the targets whose decisions it keeps)", tkeep);
        goto out;
    }
    if (ta.shrink < 1 && !ta.init) {
        rc = cli_usage_error(a.verb, "--shrink needs a trained policy to shrink (--init CKPT)");
        goto out;
    }
    rc = run(&ta, a.verb, ta.resume ? ta.outp : ta.init);
out:
    for (int i = 0; i < nowned; i++) free(owned[i]);
    free(owned);
    return rc;
}

/* gopt finetune's default --reference: every hint placer x every hint combination (the grid the
 * hints are drawn from, gopt_go_hint_placers x gopt_go_hint_combos: 35), so that the reference, the
 * table's "vs best" and a warm start's target are the best classical combination, not a placer
 * without fusion. */
static const char *ft_default_reference(void) {
    static char list[1024];
    if (!list[0]) (void)gopt_go_hint_references(GOPT_POLICY_MAX_HINTS, list, sizeof list);
    return list;
}

int cmd_finetune(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) {
        finetune_usage(stdout);
        return 0;
    }
    static train_args ta;
    args_init(&ta);
    ta.finetune = 1;
    ta.o.imitate_steps = 0;
    ta.o.imitate_every = FT_IMITATE_EVERY;
    ta.o.imitate_best = 1;
    ta.o.epochs = FT_EPOCHS;
    ta.o.reference = ft_default_reference();
    ta.rto.warmup = 1;
    ta.rto.reps = 3;
    const char *ckpt = NULL, *evaluator = NULL, *backend = NULL, *clock = NULL;
    long reps = 0; /* 0: not given (3) */
    cli_args a;
    cli_init(&a, argc, argv, "finetune");
    while (a.i < a.argc) {
        int r = parse_common(&a, &ta);
        if (r == 2) return 2;
        if (r == -1) continue;
        if (cli_opt_str(&a, "--checkpoint", &ckpt) || cli_opt_str(&a, "--evaluator", &evaluator) ||
            cli_opt_str(&a, "--backend", &backend) || cli_opt_str(&a, "--clock", &clock) ||
            cli_opt_long(&a, "--reps", &reps, 1, 100000)) {
            if (a.bad) return 2;
        } else if (a.argv[a.i][0] == '-' && a.argv[a.i][1]) {
            return cli_usage_error(a.verb, "unknown option '%s'", a.argv[a.i]);
        } else if (ta.nfiles == 0) {
            ta.files[ta.nfiles++] = a.argv[a.i++];
        } else {
            return cli_usage_error(a.verb, "one GRAPH only (got '%s' too)", a.argv[a.i]);
        }
    }
    if (!ta.nfiles) return cli_usage_error(a.verb, "missing GRAPH");
    if (!ta.o.imitate_every && !ta.target_set) ta.o.imitate_best = 0; /* --imitate-every 0: plain PPO */
    if (evaluator && strcmp(evaluator, "sim") && strcmp(evaluator, "runtime"))
        return cli_usage_error(a.verb, "--evaluator '%s': expected sim or runtime", evaluator);
    ta.runtime = evaluator && strcmp(evaluator, "runtime") == 0;
    int be = backend ? gopt_rt_backend_parse(backend) : GOPT_RT_CPU;
    if (be < 0) return cli_usage_error(a.verb, "--backend '%s': expected cpu or cuda", backend);
    int ck = clock ? gopt_rt_clock_parse(clock) : GOPT_RT_CLOCK_WALL;
    if (ck < 0) return cli_usage_error(a.verb, "--clock '%s': expected wall, cpu or cpu-min", clock);
    if (!ta.runtime && (backend || clock || reps))
        return cli_usage_error(a.verb, "--backend, --reps and --clock need --evaluator runtime");
    ta.rto.backend = (gopt_rt_backend)be;
    ta.rto.clock = (gopt_rt_clock)ck;
    ta.rto.reps = reps ? (int)reps : 3;
    /* off with the runtime evaluator: each child would be measured */
    if (!ta.splice_set) ta.o.splice = ta.runtime ? 0 : gopt_trainer_finetune_splice(&ta.o);
    if (!ta.splice_place_set) ta.o.splice_place = gopt_trainer_finetune_splice_place(&ta.o);
    if (!ta.sample_variant_set) ta.o.sample_variant = 1;
    if (!ta.samples_set) ta.o.samples = GOPT_TRAINER_FINETUNE_SAMPLES;
    int rc = check_common(&ta, a.verb);
    if (rc) return rc;
    if (!ckpt) ckpt = gopt_trainer_default_checkpoint();
    if (access(ckpt, R_OK) != 0 && !ta.resume)
        return cli_usage_error(a.verb, "checkpoint '%s' cannot be read", ckpt);
    return run(&ta, a.verb, ta.resume ? ta.outp : ckpt);
}
