/* gopt_trainer.h: PPO training of the GO policy on the simulator, pre-training
 * over many graphs, fine-tuning, zero-shot inference and the `go` method of
 * the optimizer registry. Docs: docs/trainer.md.
 *
 * One PPO step on one graph: one forward pass gives every node's
 * distributions; K complete solutions are sampled in one shot, turned into
 * decisions (device, priority, fusion group) and simulated in a batch on
 * `sim_threads` threads; the reward of a sample is -sqrt(step / reference)
 * (reference: the best of a set of baselines on that graph, computed once
 * when the graph is added), or `invalid_reward` for an out-of-memory or
 * rejected sample; advantages are normalised within the K samples; then
 * `epochs` times: forward, per-node clipped surrogate plus entropy bonus,
 * backward, Adam. A non-finite loss or gradient skips the update and is
 * counted in the step's stats (never applied silently).
 *
 * A step with graphs_per_step B > 1 sums the B graphs' gradients (each
 * computed on its own, added in the step's graph order) before each Adam
 * step, and each graph samples from its own stream split from the trainer's
 * RNG (B = 1: the trainer's RNG itself). Graphs are visited in a shuffled
 * order (reshuffled each pass from the trainer's RNG), switching every
 * `switch_every` steps. Under MPI the B graphs and their samples are shared
 * out to the ranks with the same result (gopt_trainer_set_dist).
 *
 * Determinism: every random draw comes from the trainer's RNG; the simulator
 * batch is deterministic whatever the thread count. The trainer state (step,
 * RNG, schedule position, per-graph best) plus the policy checkpoint (params
 * and Adam moments) reproduce the rest of a run bit for bit (resume == an
 * uninterrupted run).
 *
 * Cost of a step: (epochs + 1) forwards and epochs * J backwards of the
 * network, J = the largest number of distinct actions one node received among
 * the K samples (<= K; backward calls are merged per distinct action), plus K
 * simulations.
 */
#ifndef GOPT_TRAINER_H
#define GOPT_TRAINER_H

#include <stdint.h>

#include "gopt_baselines.h"
#include "gopt_common.h"
#include "gopt_cost.h"
#include "gopt_decisions.h"
#include "gopt_dist.h"
#include "gopt_graph.h"
#include "gopt_policy.h"
#include "gopt_sim.h"

#define GOPT_TASK_BIT(t) (1u << (t))
#define GOPT_TASKS_ALL 7u

/* Every hyper-parameter; defaults (gopt_trainer_options_default) are
 * justified in docs/trainer.md. */
#define GOPT_TRAINER_MAX_SAMPLES 1024 /* K samples per graph per step, at most */
/* The learning rates that fit train_heads (Adam's lr, imitate_lr): the heads alone need larger
 * steps than the whole network (docs/trainer.md, --train; chosen on single-graph pilots) */
#define GOPT_TRAINER_HEADS_LR 3e-3f
#define GOPT_TRAINER_HEADS_IMITATE_LR 1e-1f
/* Fine-tuning's splice search: children per PPO step (docs/results.md, "The splice search"), and
 * the most a run takes */
#define GOPT_TRAINER_FINETUNE_SPLICE 64
#define GOPT_TRAINER_MAX_SPLICE 4096
/* Fine-tuning's samples per PPO step (o.samples; the trainer's default is 16): fewer samples buy
 * more steps in a minute (docs/results.md, "Four PPO samples per step"); below 4 few more, since
 * the splice search's children then dominate a step ("The splice search's batch") */
#define GOPT_TRAINER_FINETUNE_SAMPLES 4
/* gopt finetune's share of the splice search's children that move placement (o.splice_place) */
#define GOPT_TRAINER_FINETUNE_SPLICE_PLACE 0.25f
/* the most PPO steps of a style probation (o.style_probation) */
#define GOPT_TRAINER_MAX_PROBATION 100000

typedef struct {
    int samples;           /* K: solutions sampled per graph per step (16), 2..GOPT_TRAINER_MAX_SAMPLES */
    int epochs;            /* PPO epochs over the K samples per step (4) */
    float clip_eps;        /* PPO ratio clip (0.2) */
    float entropy_coef;    /* entropy bonus per node decision (0.01) */
    float invalid_reward;  /* reward of an OOM or rejected sample (-4) */
    gopt_adam_config adam; /* lr 1e-3, betas 0.9/0.999, eps 1e-8, clip_norm 1 */
    int sim_threads;       /* simulator threads, and the policy's decoder threads for its batched
                              replays (gopt_policy_set_threads; results do not depend on it) (2) */
    unsigned tasks;        /* learned tasks: bits GOPT_TASK_BIT(t) (all) */
    int imitate_steps;     /* warm start: steps of imitation of the reference decisions (0) */
    int imitate_every;     /* after them, every imitate_every-th step is an imitation step too, the
                              others PPO (0: off): PPO anchored to the references */
    int imitate_best;      /* 1: the steps of imitate_every imitate the best solution found so far on
                              their graph (the actions of the sample, greedy answer or zero-shot sample
                              behind gopt_trainer_best: self-imitation), the reference until there is
                              one; the warm start still imitates the reference. 0: the reference (0) */
    float imitate_lr;      /* learning rate during imitation (3e-3) */
    float place_temperature; /* the trained policy's placement temperature (gopt_policy_set_task_temperature,
                                which gopt_trainer_create sets on the policy), 0.05..100: above 1 the
                                samples explore other devices and PPO stays on policy; greedy decisions
                                and the pre-trained policy's samples (gopt_trainer_sample_best) do not
                                change (1) */
    int train_heads;       /* 1: only the policy's heads and the decoder's conditioning train
                              (gopt_policy_set_train_heads, which gopt_trainer_create sets): on one
                              graph a step skips the network's forward and backward; 0: every
                              parameter (0); its learning rates: GOPT_TRAINER_HEADS_LR below */
    int greedy_styles;     /* with hint quality, a GOPT_GO_STYLES_* value other than OWN:
                              gopt_trainer_greedy also decodes under those styles of each graph's
                              hints (gopt_go_hint_styles), as gopt_go_decide does, so a fine-tuned
                              answer is never slower than `go`'s greedy one; every combination the
                              hints are drawn from is then kept per graph (finetune: ALL, `go`'s
                              default; GOPT_GO_STYLES_OWN: none) */
    int graphs_per_step;   /* graphs per PPO step (1) */
    int switch_every;      /* steps before moving on to the next graphs (1) */
    uint64_t seed;         /* trainer RNG (1) */
    int backward_rounds;   /* 0: one policy backward per epoch, batched over the K samples (default);
                              1: one backward per distinct action value ("rounds"): the same gradient up
                              to float rounding, slower; what docs/results.md was produced with */
    const char *reference; /* comma-separated baselines whose best is the reference
                              ("single,expert,metis,heft,mtopo,metf,msct,heft+cp+xla") */
    long reference_evals;  /* > 0: a reference method that anneals (sa) stops after this many
                              evaluations, under a budget of an hour that the cap makes moot, so
                              the reference is reproducible; 0: its own defaults (sa: 10 s of
                              wall time, which depends on the machine) */
    int reference_anneal_max_nodes; /* > 0: a reference method that anneals runs only on graphs of
                                       at most this many nodes (its cost grows with the graph; the
                                       others take the best of the rest); 0: on every graph */
    int splice;            /* children per PPO step of the splice search (splice.c), 0..4096: the
                              best answer found so far with a short window of one of the step's
                              samples spliced in (its priorities and fusion levels), kept when
                              faster; simulated in batches of splice_batch, each batch from the
                              best so far; one graph per step (0: off; finetune: 64) */
    int splice_batch;      /* the splice search's children simulated together, each batch from the
                              best so far: 1..samples (0: as many as the samples, the default);
                              smaller batches make the search more sequential */
    float splice_place;    /* the share of the splice search's children, 0..1, that move placement
                              instead: the window's colocation groups all go to one other device,
                              drawn from the policy's placement logits of the window's first node
                              without its current device (priorities and fusion levels stay the
                              parent's; a child that runs out of memory is dropped) (0; finetune: 0.25) */
    int style_probation;   /* with self-imitation, when the zero-shot greedy's fastest answer is a
                              style's (decoded under another combination's hints, greedy_styles):
                              after this many PPO steps on the graph that found nothing faster than it
                              (nor the splice search), the incumbent self-imitation follows becomes the
                              policy's own greedy answer under the graph's hints and the style's is
                              kept apart, still counted by gopt_trainer_best (the splice search
                              leaves it too, for the own answer); imitation replays the
                              incumbent's actions under the graph's own hints, where a style's can be
                              other decisions (0: off, the style's answer stays). Off by default:
                              on the validation split it cost the one run of 51 it changed (the
                              Transformer at seed 1, 0.841x -> 0.881x; docs/results.md, "The style
                              probation") */
    int sample_variant;    /* 1: PPO's samples are made into decisions as the incumbent was (its fusion
                              pass and tie order, the variant tr_judge_variants found it with), so
                              one that beats it is the same kind of answer; 0: always the policy's
                              own pass with critical-path ties (0; finetune: 1; docs/trainer.md) */
    int canonical_targets; /* 1: the imitation target's devices are renumbered in order of first use
                              along the topological order (gopt_trainer_canonical_devices), kept only
                              where the relabelled target simulates no slower (links need not be
                              symmetric); 0: the baseline's own device ids (1) */
} gopt_trainer_options;

void gopt_trainer_options_default(gopt_trainer_options *o);
gopt_status gopt_trainer_options_check(const gopt_trainer_options *o, gopt_error *err);
/* Fine-tuning's default o->splice for options o: GOPT_TRAINER_FINETUNE_SPLICE with self-imitation
 * (o->imitate_best: the search's first parent); 0 without it. */
int gopt_trainer_finetune_splice(const gopt_trainer_options *o);
/* Fine-tuning's default o->splice_place: GOPT_TRAINER_FINETUNE_SPLICE_PLACE when o->splice > 0, else 0. */
float gopt_trainer_finetune_splice_place(const gopt_trainer_options *o);
/* Parse "place,sched,fuse" (any non-empty subset) into task bits. */
gopt_status gopt_trainer_parse_tasks(const char *s, unsigned *tasks, gopt_error *err);
/* "place,sched,fuse" form of task bits into buf (>= 32 bytes). */
void gopt_trainer_tasks_str(unsigned tasks, char *buf, size_t len);

typedef struct gopt_trainer gopt_trainer;

/* Create a trainer that trains `policy` (borrowed: it must outlive the
 * trainer); cm (borrowed, may be NULL) is the cost model of the graphs added
 * by gopt_trainer_add_graph. */
gopt_status gopt_trainer_create(gopt_trainer **out, gopt_policy *policy, const gopt_costmodel *cm,
                                const gopt_trainer_options *o, gopt_error *err);
void gopt_trainer_free(gopt_trainer *t);

/* Add a finalized graph (ownership passes to the trainer, also on error) on
 * cost model cm (borrowed: it must outlive the trainer; NULL: the trainer's
 * default): every use of a cluster for this graph (its simulator, reference
 * baselines, device symmetries, features, decoder inputs, the devices its
 * samples may use) is cm's, with gopt_cost_num_devices(cm) devices (1..the
 * policy's max_devices). Graphs of one trainer may each have their own cost
 * model and device count. Computes its reference by running the reference
 * baselines (the slow part: seconds on 10k nodes); GOPT_EUNSUP when none of
 * them finds a solution that fits (every one out of memory on cm). When
 * ref_step_s > 0 it is used instead and no baseline runs (imitation then has
 * no target for this graph). */
gopt_status gopt_trainer_add_graph_on(gopt_trainer *t, gopt_graph *g, const gopt_costmodel *cm, double ref_step_s,
                                      gopt_error *err);
/* gopt_trainer_add_graph_on with the trainer's default cost model. */
gopt_status gopt_trainer_add_graph(gopt_trainer *t, gopt_graph *g, double ref_step_s, gopt_error *err);
/* Graph i's cost model. */
const gopt_costmodel *gopt_trainer_graph_costmodel(const gopt_trainer *t, int i);
/* Memory: a graph's simulator (cost table), per-thread simulator scratch,
 * features and decoder inputs are built when a step (or the reference, or
 * gopt_trainer_greedy) needs them and kept for the `graphs` graphs used
 * last (default max(2, graphs_per_step + 1); 0: every graph, never rebuilt);
 * the rest of a graph stays (docs/trainer.md, "Memory"). Results are bit for
 * bit the same whatever the value; only time and memory change. */
void gopt_trainer_set_cache(gopt_trainer *t, int graphs);
/* Data-parallel (a communicator of N > 1 ranks set before the graphs are
 * added): gopt_trainer_add_graph leaves the references to this collective,
 * which computes graph i's on rank i mod N and gives every rank every graph's
 * reference, baselines' results and imitation target (what each rank would
 * have computed). A rank's failure is every rank's error. No-op otherwise.
 * Steps and gopt_trainer_load need it done. */
gopt_status gopt_trainer_share_references(gopt_trainer *t, gopt_error *err);
int gopt_trainer_num_graphs(const gopt_trainer *t);
const gopt_graph *gopt_trainer_graph(const gopt_trainer *t, int i);
/* Reference step time and the method that gave it ("given" when passed in). */
double gopt_trainer_reference(const gopt_trainer *t, int i, const char **method);
/* The reference baselines' results on graph i (the graph's own, computed when
 * it was added; none when a reference was given): up to max names and step
 * times in seconds (+inf: no valid solution; negative: -step of an OOM
 * solution). Returns how many. */
int gopt_trainer_baselines(const gopt_trainer *t, int i, const char **names, double *steps, int max);
/* How graph i's imitation target is labelled: 0 no target or the baseline's
 * ids were already canonical (or canonical_targets is off), 1 relabelled,
 * -1 the relabelled target simulated slower so the baseline's ids were kept.
 * *relabelled_s (optional): the relabelled target's step (s), 0 when none. */
int gopt_trainer_target_relabel(const gopt_trainer *t, int i, double *relabelled_s);
/* Best step time found for graph i so far (greedy evaluations and samples, every fusion pass
 * and tie order they are judged under), or +inf; and its decisions (NULL before any valid sample,
 * and after gopt_trainer_load). The answers of the pass within the hint's groups count here but
 * are not the incumbent that self-imitation follows and PPO's improvements are measured against
 * (the policy's own passes cannot reproduce them; docs/trainer.md). */
double gopt_trainer_best(const gopt_trainer *t, int i, const gopt_decisions **d);
/* 1 when graph i's self-imitation incumbent is a style's answer on probation (o.style_probation:
 * armed by the zero-shot gopt_trainer_greedy, or running); then *style_s and *own_s (each when
 * not NULL) are its step and that of the policy's own answer it falls back on (s); 0 otherwise. */
int gopt_trainer_style_probation(const gopt_trainer *t, int i, double *style_s, double *own_s);
/* An improved imitation target for graph i (expert iteration, docs/trainer.md "Improved
 * targets"): packed actions (3n values: devices, priority levels, fusion levels, as
 * gopt_trainer_save's best_actions), e.g. what fine-tuning found on the graph. They are turned
 * into decisions as the policy's samples are, their devices renumbered canonically (canonical_targets),
 * their priority levels and groups remade as a reference's are, and simulated on the graph's cluster; when they fit
 * and are faster than the graph's reference, imitation steps imitate them instead of the
 * reference's decisions (*used = 1), on the policy's own greedy decisions
 * (gopt_policy_backward_labels: teacher forcing on a target no hint predicts derails greedy
 * decoding, docs/trainer.md); otherwise nothing changes (*used = 0). *step_s: their
 * simulated step (+inf: out of memory or rejected). EINVAL for an action out of its range or a
 * graph without a reference. */
#define GOPT_TARGET_ALL 0   /* keep the actions' placement, schedule and fusion; imitation trains all three */
#define GOPT_TARGET_PLACE 1 /* keep their placement, judged with the best of {cp, fifo} x xla on it;
                               imitation trains the placement alone (the rest only conditions the decoder) */
gopt_status gopt_trainer_set_target(gopt_trainer *t, int i, const int32_t *packed, int keep, int *used, double *step_s,
                                    gopt_error *err);
/* What gopt_trainer_load_targets found. */
typedef struct {
    int files;         /* DIR/NAME.ckpt.state files found for the trainer's graphs */
    int used;          /* of them, targets taken (faster than the graph's reference) */
    int slower;        /* no faster than the reference, or out of memory: not taken */
    int other_cluster; /* for another profile or device count than the graph's: not taken */
    double rel_sum;    /* sum over the targets taken of target step / reference */
} gopt_trainer_targets;
/* gopt_trainer_set_target for every graph whose DIR/NAME.ckpt.state exists (NAME: the graph's
 * name), a trainer state as gopt finetune -o DIR/NAME.ckpt writes it: its entry for the graph
 * must have the graph's node count and best_actions (EFORMAT naming the file and field
 * otherwise); one on another cluster (profile_fnv64, devices) is counted and skipped. */
gopt_status gopt_trainer_load_targets(gopt_trainer *t, const char *dir, int keep, gopt_trainer_targets *rep,
                                      gopt_error *err);

/* What one step did. Step times are in seconds; rel = step / reference. */
typedef struct {
    int64_t step;           /* index of the step just done (0-based) */
    int imitation;          /* 1: an imitation step */
    int graphs;             /* graphs in this step */
    int32_t graph;          /* the first graph's index */
    double mean_step_s;     /* mean over valid samples (0 when none) */
    double best_step_s;     /* best sample of this step (+inf when none) */
    double mean_rel, best_rel; /* the same relative to the references (averaged over graphs) */
    double best_so_far_rel; /* per graph best so far / reference, averaged over this step's graphs */
    double target_rel;      /* imitation: step time of the imitation targets / reference (how much the
                               action space loses of the reference decisions), averaged */
    double imitate_acc[GOPT_TASK_COUNT]; /* imitation: fraction of the learned decisions whose greedy
                                            choice equals the target, per task (before the update) */
    double reward_mean;
    double entropy;         /* mean per-decision entropy (learned tasks) */
    double loss;            /* last epoch's loss */
    double grad_norm;       /* last epoch's gradient norm before clipping */
    int invalid;            /* samples OOM or rejected */
    int skipped;            /* epochs whose update was skipped (non-finite loss or gradient) */
    int backward_calls;     /* network backwards this step */
    int probation_ended;    /* graphs of this step whose style probation ended with nothing faster
                               found: self-imitation's incumbent became the policy's own greedy answer
                               (o.style_probation) */
    double own_step_s;      /* the first such graph's own answer (its new incumbent), s */
    double seconds;         /* wall time */
} gopt_trainer_stats;

/* Data-parallel training (docs/trainer.md): every rank of d creates the same
 * trainer (same options, graphs and policy) and calls gopt_trainer_step in
 * lockstep; the step's graphs and samples are shared out, and every rank ends
 * each step with the parameters, RNG, schedule and bests one process would
 * have (bit for bit), so any rank's checkpoint is the run's. d is borrowed;
 * NULL (the default) is one process. Call before the first step. */
void gopt_trainer_set_dist(gopt_trainer *t, gopt_dist *d);
/* FNV-1a hash of the parameters, step, RNG, references, bests and each
 * graph's profile and device count: equal on every rank of a consistent
 * data-parallel run. */
uint64_t gopt_trainer_fingerprint(const gopt_trainer *t);

/* The evaluator of the trainer's own decisions: fn (ctx borrowed) judges one
 * decision set at a time (gopt_bl_evaluate_fn: the step in seconds, *oom
 * nonzero when out of memory; a negative or non-finite step is a rejected
 * sample) in place of the simulator, for the rollout samples' rewards, the
 * imitation targets' step, gopt_trainer_greedy and the per-graph bests
 * (gopt_trainer_greedy then fills only step_time_s, oom and oom_device of
 * its result, and returns EINVAL when fn fails). The references, the
 * baselines and the relabelled imitation target stay simulated, so the
 * rewards are -sqrt(evaluated step / simulated reference) (advantages are
 * normalised per graph, so a constant ratio between the two cancels).
 * E.g. the runtime (gopt_rt_evaluate) for fine-tuning on measured steps.
 * NULL (the default) is the simulator, with results bit for bit as
 * without this call. Set it before the first step. */
void gopt_trainer_set_evaluator(gopt_trainer *t, gopt_bl_evaluate_fn fn, void *ctx);

/* One training step (imitation while step < imitate_steps, else PPO). */
gopt_status gopt_trainer_step(gopt_trainer *t, gopt_trainer_stats *st, gopt_error *err);
int64_t gopt_trainer_steps_done(const gopt_trainer *t);
unsigned gopt_trainer_options_tasks(const gopt_trainer *t); /* the learned task bits */

/* Greedy decisions of the current policy for graph i, simulated: fills d
 * (initialised by the caller for the graph) and res. Updates the best. */
gopt_status gopt_trainer_greedy(gopt_trainer *t, int i, gopt_decisions *d, gopt_sim_result *res, gopt_error *err);
/* The current policy's K samples on graph i (K: the options' samples), drawn
 * from rng (the caller's: the trainer's own streams are left as they are, so
 * the training that follows is the same with or without this call) and
 * judged like the rollouts' (the simulator or the evaluator). Updates the
 * graph's best; *best_s: the best valid sample's step (s), +inf when none.
 * Fine-tuning calls it before its first step, so that the best it reports is
 * never worse than the pre-trained policy's best of K. */
gopt_status gopt_trainer_sample_best(gopt_trainer *t, int i, gopt_rng *rng, double *best_s, gopt_error *err);

/* ---- state: checkpoint and resume ---------------------------------------------
 * gopt_trainer_save writes the policy (gopt_policy_save) to `path` and the
 * trainer state (JSON: step, RNG, schedule, per-graph reference and best,
 * options, and a hash of the policy file) to `path`.state, both
 * atomically; the policy is written first to `path`.next and only renamed
 * after the state names its hash, so a kill at any point leaves a consistent
 * pair (gopt_trainer_load finishes an interrupted rename). */
gopt_status gopt_trainer_save(const gopt_trainer *t, const char *path, gopt_error *err);
/* Restore the state of a run saved by gopt_trainer_save into a trainer
 * created with the same options and graphs (added in the same order): loads
 * the policy into the trainer's policy, then step, RNG, schedule and bests.
 * Mismatching graphs or options are refused (EINVAL) naming the field. */
gopt_status gopt_trainer_load(gopt_trainer *t, const char *path, gopt_error *err);

/* Tasks a checkpoint was trained for, read from its `path`.state (all tasks
 * when the file has no state). */
gopt_status gopt_trainer_checkpoint_tasks(const char *path, unsigned *tasks, gopt_error *err);

/* ---- decisions from actions ------------------------------------------------------
 * Tasks not in `tasks` get the defaults: device 0, topological priority,
 * no fusion. A learned priority is its level, higher first; within a level,
 * with `ties` (the problem the decisions are for: its graph is fz's, its
 * cost table and links price the critical path) the node with the longer
 * critical path on the decided placement runs first (gopt_bl_schedule_cp's
 * order), without it (NULL) the earlier in topological order; fusion groups
 * come from gopt_policy_fusion_groups with fuse_merge (the policy's
 * cfg.fuse_merge; singletons become -1). group_scratch: (n) ints. */
gopt_status gopt_trainer_actions_to_decisions(const gopt_frozen *fz, unsigned tasks, int fuse_merge,
                                              const gopt_bl_problem *ties, const gopt_policy_actions *a,
                                              gopt_decisions *d, int32_t *group_scratch, gopt_error *err);
/* The same with the fusion pass bounded by `within`'s groups (gopt_policy_fusion_groups_within;
 * fuse_merge is then not read); within NULL: gopt_trainer_actions_to_decisions. */
gopt_status gopt_trainer_actions_to_decisions_within(const gopt_frozen *fz, unsigned tasks, int fuse_merge,
                                                     const int32_t *within, const gopt_bl_problem *ties,
                                                     const gopt_policy_actions *a, gopt_decisions *d,
                                                     int32_t *group_scratch, gopt_error *err);

/* Fusion levels that remake groups: level[v] = 0 for an unfused node (group[v] < 0), else its
 * group's level in 1..levels-1 (levels: the policy's fusion_levels, 2..32). Imitation targets
 * (a reference's groups as the fusion head's levels) are made by it. The fusion pass joins a
 * node to the same-level groups of its predecessors on its device, so each group gets a level
 * that no group touching it (an edge either way between members on one device) already took:
 * greedy colouring in the topological order of the groups' first members; when every level is
 * taken, the one with the fewest edges to touching groups. With enough levels
 * gopt_trainer_actions_to_decisions(fuse_merge = 1) on these levels gives back the groups the
 * merging pass formed. group: ids in 0..n-1 or -1; device: (n) ids. */
gopt_status gopt_trainer_group_levels(const gopt_frozen *fz, const int32_t *group, const int32_t *device, int levels,
                                      int32_t *level, gopt_error *err);

/* Canonical device labels. Device ids of a placement are arbitrary up to
 * the cluster's symmetries (a permutation of devices that preserves every
 * op's time and every link's transfer time gives the same simulated step),
 * so baselines name equivalent placements differently. Canonical: among the
 * allowed permutations, the one whose relabelled devices, read along fz's
 * topological order, form the lexicographically smallest sequence (with all
 * permutations allowed: devices numbered in order of first use). perms:
 * nperm permutations (row p: old id -> new id, ndev entries), or NULL for
 * all of them. out (n) may equal device; perm_out (ndev, optional) receives
 * the permutation applied. Deterministic. EINVAL names the node of an id out
 * of range. Cost O(n + nperm * ndev). */
gopt_status gopt_trainer_canonical_devices(const gopt_frozen *fz, int32_t ndev, const int32_t *device,
                                           const int32_t *perms, int nperm, int32_t *out, int32_t *perm_out,
                                           gopt_error *err);

/* The symmetries of the cluster as graph g sees it: device permutations
 * (row p: old id -> new id) that preserve every node's time and compute part
 * on each device (cost table ct of g), each device's launch overhead and
 * memory bandwidth, and the transfer time of every link (1 KB, 1 MB and 64 MB
 * through gopt_cost_transfer_time). Found by backtracking, identity first;
 * at most max rows written; returns how many were found (capped at max). */
int gopt_trainer_device_symmetries(const gopt_costmodel *cm, const gopt_cost_table *ct, int32_t *perms, int max);

/* ---- zero-shot inference and the `go` method ------------------------------------ */
typedef struct {
    const char *checkpoint; /* NULL: gopt_trainer_default_checkpoint() */
    int samples;            /* 0: greedy only; K > 0: best of greedy and K samples (simulated) */
    uint64_t seed;          /* sampling seed */
    const char *device;     /* where the network runs (gopt_policy_set_device); NULL: the CPU */
    float temperature;      /* the samples' temperature (gopt_policy_sample_tempered); 0: 1 */
    int ties;               /* order within a priority level (gopt_go_ties): GOPT_GO_TIES_BEST (0) */
    int threads;            /* the network's threads (gopt_policy_set_threads), and those the hint
                               table (gopt_go_hint_table_build) and each candidate's judging run on;
                               0: GOPT_GO_THREADS. Results do not depend on it. */
    int fusion_pass;        /* the pass from fusion levels to groups (gopt_go_pass): GOPT_GO_PASS_BEST (0) */
    int styles;             /* with hint quality, GOPT_GO_STYLES_ALL (0): the greedy decisions are also
                               decoded under the fastest other hint combinations (gopt_go_styles) */
} gopt_go_options;
#define GOPT_GO_THREADS 2

/* The order of a device's ready ops within one of GO's priority levels: the critical path on
 * the decided placement (what training uses), the topological order (fifo's), or BEST: each
 * candidate judged under both and the faster kept (two evaluations per candidate). */
enum { GOPT_GO_TIES_BEST = 0, GOPT_GO_TIES_CP = 1, GOPT_GO_TIES_TOPO = 2 };
/* "best", "cp" or "topo" -> the enum, -1 for anything else */
int gopt_go_ties_parse(const char *s);
/* The fusion pass that turns GO's fusion levels into groups (gopt_policy_fusion_groups): the
 * merging pass (merge = 1, what checkpoints since version 5 train with), the first-fit pass
 * (merge = 0), the merging pass bounded by the hint's groups (HINT: a node joins its
 * predecessors' groups that are in its hint group, whatever their levels, when both levels are
 * above 0: the levels choose which of the hint combination's fusions to take;
 * gopt_policy_fusion_groups_within), FREE: each candidate judged under merge and first and the
 * faster kept, or BEST: under all three (with ties BEST, six evaluations per candidate;
 * checkpoints without hints: FREE). Every pass keeps one GEMM or convolution per group. */
enum { GOPT_GO_PASS_BEST = 0, GOPT_GO_PASS_MERGE = 1, GOPT_GO_PASS_FIRST = 2, GOPT_GO_PASS_HINT = 3, GOPT_GO_PASS_FREE = 4 };
/* "best", "free", "merge", "first" or "hint" -> the enum, -1 for anything else */
int gopt_go_pass_parse(const char *s);

/* Styles: with hint quality the best hint is its placer's fastest combination. GO also decodes
 * greedily with the hints conditioned on other combinations that fit (gopt_go_hint_styles), each
 * read as the best hint, and each such candidate is judged like the others. BEST: the best hint
 * placer's other combinations (its other schedules and fusions, at most 4 now); ALL (the
 * default): those, the GOPT_GO_WIDE_STYLES fastest combinations of the other placers and the
 * best combination of each of METIS's GOPT_GO_METIS_DRAWS extra draws (at most 15; never slower
 * than BEST); OWN: the best hint's alone. */
enum { GOPT_GO_STYLES_ALL = 0, GOPT_GO_STYLES_BEST = 1, GOPT_GO_STYLES_OWN = 2 };
/* "all", "best" or "own" -> the enum, -1 for anything else */
int gopt_go_styles_parse(const char *s);

#define GOPT_GO_REPAIRS 6

/* The checkpoint that ships with the project (compiled-in source path,
 * overridden by the environment variable GOPT_CHECKPOINT). */
const char *gopt_trainer_default_checkpoint(void);

/* What the policy's decoder reads for problem p (gopt_policy_set_decoder_inputs):
 * node_time (n) the cost model's time of each op on device 0 (the features'
 * predicted time), node_mem (n) gopt_bl_node_memory, dev_cap (p->ndev)
 * gopt_bl_device_capacity: the memory model every classical placer fits. */
void gopt_go_decoder_inputs(const gopt_bl_problem *p, double *node_time, double *node_mem, double *dev_cap);

/* Hints for a policy with cfg.hints = H (trainer/hint.c, docs/policy.md):
 * dev (H, n): row h the placement of gopt_go_hint_placers[h], device labels
 * canonical under the cluster's symmetries (-1: that placer found nothing
 * that fits); feat (n, GOPT_POLICY_NHINT) from the schedule and fusion of
 * GOPT_GO_HINT_METHOD. gopt_go_hints runs the methods on p (*have = 0 when
 * none finds anything that fits: then there is no hint);
 * gopt_go_hints_from converts decisions already made (hd[h] NULL: no row h;
 * sd NULL: features 0; ct: the graph's cost table with cm). group (n) or NULL:
 * sd's fused group of each node, named by its first member in topological
 * order (-1: not fused or a singleton). quality (nh) or
 * NULL: with it, each placer runs as placer + each of gopt_go_hint_combos,
 * judged by p's evaluator, hint h being its fastest; quality[h] = T_best / T_h
 * (1: the best; 0: found nothing that fits) and feat comes from the best
 * hint's combination (policy cfg.hint_quality); those combinations run on up to `threads`
 * threads (gopt_go_hint_table_build). */
#define GOPT_GO_HINT_METHOD "heft+cp+xla"
extern const char *const gopt_go_hint_combos[]; /* "+cp+xla", "+fifo+xla", "+cp+tvm", "+cp+xlamo",
                                                   "+fifo+xlamo", then NULL */
extern const char *const gopt_go_hint_placers[GOPT_POLICY_MAX_HINTS]; /* heft, metf, metis, expert, msct,
                                                                          mtopo, single, then NULL */
gopt_status gopt_go_hints(const gopt_bl_problem *p, int nh, int threads, int32_t *dev, float *feat, int32_t *group,
                          float *quality, int *have, gopt_error *err);
/* How many of the combinations the hints with quality are drawn from (the first nh placers of
 * gopt_go_hint_placers x gopt_go_hint_combos) the comma-separated reference list refs lacks
 * (combinations compared as parsed, so the order of the parts does not matter; names that do
 * not parse count as absent); the first missing one into first (cap bytes), "" when none.
 * Imitation targets are the best reference; where a missing combination is the best hint,
 * the target follows another placement than the best hint's and the policy learns to leave
 * it (docs/trainer.md, "References and hints"). */
int gopt_go_hint_refs_missing(const char *refs, int nh, char *first, size_t cap);
/* The reference list that names every combination the hints of the first nh placers are drawn
 * from (each of gopt_go_hint_combos, in order, with each placer): written into buf as
 * "heft+cp+xla,metf+cp+xla,...", its length returned; 0 (and "") when it does not fit in cap. */
size_t gopt_go_hint_references(int nh, char *buf, size_t cap);
gopt_status gopt_go_hints_from(const gopt_frozen *fz, const gopt_costmodel *cm, const gopt_cost_table *ct, int ndev,
                               int nh, const gopt_decisions *const *hd, const gopt_decisions *sd, int32_t *dev,
                               float *feat, int32_t *group, gopt_error *err);

/* The combinations the hints with quality are drawn from, each run and judged once: entry
 * r * nc + c of row r < nh is gopt_go_hint_placers[r] + gopt_go_hint_combos[c] on the problem;
 * rows nh..nrows-1 are `draws` (0..GOPT_GO_METIS_DRAWS, none when the first nh placers hold no
 * METIS) more draws of METIS (the placer that draws, row draw_row < nh), row nh + j at seed
 * p->opt.seed + 1 + j, with the same combinations: they only ever enter as styles (`go`'s
 * styles `all`), never as the graph's own hints, so a caller that needs no styles asks for
 * none (found[i] 0: it found nothing; step[i] its simulated step, INFINITY when it does not
 * fit). The entries are run on up to `threads` threads (gopt_bl_parallel: the same table on any
 * number; one thread where p's evaluator cannot be forked). */
typedef struct {
    int nh, nc;
    int nrows;             /* nh + the extra draws (nh when the first nh placers hold no METIS) */
    int draw_row;          /* the hint row the extra draws stand in for; -1: none */
    gopt_decisions *d;     /* (nrows * nc) */
    double *step;          /* (nrows * nc) */
    unsigned char *found;  /* (nrows * nc) */
} gopt_go_hint_table;
#define GOPT_GO_METIS_DRAWS 3
gopt_status gopt_go_hint_table_build(const gopt_bl_problem *p, int nh, int draws, int threads, gopt_go_hint_table *t,
                                     gopt_error *err);
void gopt_go_hint_table_free(gopt_go_hint_table *t);
/* The hints with quality from table t (what gopt_go_hints gives for pick -1), or conditioned on
 * entry pick (one that fits): its placement stands in hint row pick / nc (an extra METIS draw's in
 * METIS's row, draw_row), it reads as the best hint (quality 1; the others T_pick / T_h, below 1)
 * and the schedule and fusion features are its own: one of `go`'s styles
 * (gopt_go_options.styles). */
gopt_status gopt_go_hints_pick(const gopt_bl_problem *p, const gopt_go_hint_table *t, int pick, int32_t *dev,
                               float *feat, int32_t *group, float *quality, int *have, gopt_error *err);
/* The styles of t, at most cap of them into idx; returns how many (0 when no hint fits). First
 * the entries of the best hint's row other than the best hint that fit (its other schedules
 * and fusions), fastest first (ties by index); with all = 1 then the GOPT_GO_WIDE_STYLES fastest
 * entries of the other placers' rows that fit, fastest first, then the fastest entry of each of
 * METIS's extra draws that has one that fits, in draw order. So the styles of all = 1 hold those
 * of all = 0, the GOPT_GO_WIDE_STYLES fastest combinations of the other placers and each extra
 * draw's best. */
int gopt_go_hint_styles(const gopt_go_hint_table *t, int all, int *idx, int cap);
#define GOPT_GO_WIDE_STYLES 8
#define GOPT_GO_MAX_STYLES (4 + GOPT_GO_WIDE_STYLES + GOPT_GO_METIS_DRAWS)

/* Decide everything for problem p with the policy in o->checkpoint (the
 * tasks it was not trained for get defaults); candidates are judged by
 * p's evaluator. The decoder masks devices a unit would overflow under the
 * baselines' memory model; when the evaluator still reports out of memory,
 * the repair step decodes again with the overflowing devices' capacities
 * scaled down (GOPT_GO_REPAIRS rounds at most, docs/trainer.md). */
gopt_status gopt_go_decide(const gopt_go_options *o, const gopt_bl_problem *p, gopt_decisions *d, gopt_error *err);

#endif /* GOPT_TRAINER_H */
