/* gopt_policy.h: the GO policy network (features, forward, decoding,
 * backward, Adam, checkpoints) and the fusion pass that reads its output.
 *
 * Flow of one step: gopt_policy_features() builds the (n, GOPT_POLICY_NFEAT)
 * node features of a frozen graph; gopt_policy_forward() runs the network and
 * keeps every activation and the heads' logits; then any of
 * gopt_policy_sample / _greedy / _logprob run the conditioned decoder over
 * that state (node by node, on the decisions already made), and
 * gopt_policy_backward() accumulates the gradient of a weighted sum of
 * per-node log-probabilities and entropies into the parameter gradients.
 * gopt_policy_adam_step() applies them. Docs: docs/policy.md.
 *
 * The policy knows nothing of the simulator or the cost model: the caller
 * passes the device count, optional per-node device masks, the per-node
 * predicted time on the reference device and, for the decoder, per-node
 * memory charges and per-device capacities (gopt_policy_set_decoder_inputs).
 *
 * Every array indexed by node uses node ids (0..n-1) of the frozen graph.
 * Cost of a forward: O(n * D * (D + S)) flops per layer plus O(m * D) for
 * the graph aggregations; memory O(n * D) floats per layer (docs/policy.md).
 * A gopt_policy is not thread-safe; one seed on one thread is bit-for-bit
 * reproducible.
 */
#ifndef GOPT_POLICY_H
#define GOPT_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "gopt_common.h"
#include "gopt_graph.h"

/* The three tasks, in the order the heads are stacked. */
typedef enum { GOPT_TASK_PLACE = 0, GOPT_TASK_SCHED, GOPT_TASK_FUSE, GOPT_TASK_COUNT } gopt_task;
const char *gopt_task_name(gopt_task t); /* "place", "sched", "fuse" */

#define GOPT_POLICY_MAX_DEVICES 16
#define GOPT_POLICY_NFEAT 80 /* width of one node's feature row (layout in features.c; stored in checkpoints) */

/* Every size of the network. Defaults (gopt_policy_config_default) are
 * justified in docs/policy.md. */
typedef struct {
    int32_t hidden;        /* D: width of every node state */
    int32_t sage_layers;   /* GraphSAGE layers (pred/succ, mean/max) */
    int32_t attn_layers;   /* trunk segment-recurrent attention layers */
    int32_t heads;         /* attention heads; must divide hidden */
    int32_t segment;       /* S: nodes per segment (memory = previous segment) */
    int32_t ffn_mult;      /* feed-forward width = ffn_mult * hidden */
    int32_t max_devices;   /* width of the placement head, 1..16 */
    int32_t sched_levels;  /* P: scheduling priority levels (higher runs first) */
    int32_t fusion_levels; /* F: fusion levels (0 = not fused; fusion pass below) */
    int32_t memory_grad;   /* 0: memory states are gradient-stopped (Transformer-XL);
                              1: gradients also flow into the previous segment */
    int32_t cond_hidden;   /* Hc: hidden width of the conditioned decoder's placement
                              scorer (decisions already made -> logits); 0 = off */
    int32_t hints;         /* H > 0: the decoder also reads H classical placements given with
                              gopt_policy_set_hints (their device per unit) and a classical
                              schedule and fusion (priority rank, fusion per node); needs
                              cond_hidden > 0; 0 = off (at most GOPT_POLICY_MAX_HINTS) */
    int32_t hint_quality;  /* 1: the decoder also reads each hint's quality (its simulated step
                              against the best hint's, gopt_policy_set_hints) and the schedule and
                              fusion hints come from the best hint (needs hints > 0); 0 = off */
    int32_t fuse_cond;     /* 1: the fusion term also sees, for every level, whether that level
                              joins a predecessor's fused group or roots a new one (the groups
                              the fusion pass builds from the levels already decided; needs
                              cond_hidden > 0); 0 = off */
    int32_t sched_cond;    /* 1: the schedule term also sees which priority level the hint's
                              priority rank falls in (needs hints > 0); 0 = off */
    int32_t fuse_merge;    /* the fusion pass (gopt_policy_fusion_groups): 1 = a node joins every
                              predecessor group of its level that keeps the groups acyclic (XLA's
                              multi-source groups; the default); 0 = the first it may join alone
                              (checkpoints before version 5 load with 0) */
    int32_t fuse_hint;     /* 1: the fusion term tells joining the hint's fused group (the groups
                              given to gopt_policy_set_hints) from joining another group: a third
                              row of cond.fgrp (needs fuse_cond = 1 and hints > 0); 0 = off */
    int32_t fuse_hint_level; /* 1: the fusion term also marks the level that the first decided member
                              of v's hint group took: a group with several roots (XLA's a -> c <- b,
                              an optimizer update's state chains) merges only when its roots share a
                              level, and a root sees no other root otherwise; one more row of
                              cond.fgrp (needs fuse_cond = 1 and hints > 0; version 6); 0 = off */
    int32_t place_succ;    /* 1: the placement scorer also reads where the unit's output goes: per
                              device, the share of its output bytes whose consumer's unit is already
                              decided there (a colocation group is decided at its first member, so a
                              weight's gradient sees where its update already lives), and whether the
                              decided consumer of its largest output is there (two more scorer
                              features; needs cond_hidden > 0; version 7); 0 = off */
} gopt_policy_config;

void gopt_policy_config_default(gopt_policy_config *cfg);
/* Check every size; the message names the field and its value. */
gopt_status gopt_policy_config_check(const gopt_policy_config *cfg, gopt_error *err);

/* ---- features -------------------------------------------------------------
 * Fill feat (n, GOPT_POLICY_NFEAT), row v = node id v. ndev in 1..16.
 * pred_time (n) is the cost model's predicted time of each op on the
 * reference device in seconds (>= 0, finite), or NULL when unknown. All
 * transforms are fixed (log scales with constants, ranks divided by n), so
 * graphs of any size are normalised alike. */
gopt_status gopt_policy_features(const gopt_frozen *fz, int32_t ndev, const float *pred_time, float *feat,
                                 gopt_error *err);

/* ---- the network ------------------------------------------------------------ */
typedef struct gopt_policy gopt_policy;

/* Allocate parameters, gradients and Adam moments (one block each) and
 * initialise the parameters from `seed`. */
gopt_status gopt_policy_create(gopt_policy **out, const gopt_policy_config *cfg, uint64_t seed, gopt_error *err);
void gopt_policy_free(gopt_policy *p);
const gopt_policy_config *gopt_policy_get_config(const gopt_policy *p);

/* Where the network's forward and backward run: "cpu" (the default); "cuda" (the first GPU:
 * cuBLAS for the dense layers, kernels of our own for the aggregation, the segment attention,
 * the norms; the decoder, the losses and Adam stay on the CPU, so decisions and checkpoints are
 * the same, within float rounding, as on the CPU); "emulated" (the cuda path's kernels and
 * orchestration run on the CPU: for tests). GOPT_EUNSUP where the build has no CUDA or the
 * machine no GPU, and the policy stays where it was. A forward is needed after a change. */
gopt_status gopt_policy_set_device(gopt_policy *p, const char *device, gopt_error *err);
const char *gopt_policy_device(const gopt_policy *p); /* "cpu", "cuda" or "emulated" */

/* Threads of the network on the CPU and of the decoder's batched replays
 * (gopt_policy_sample_batch and the batched backwards): 1..GOPT_POLICY_MAX_THREADS, default 1.
 * The network's forward and backward work in chunks of 1,024 rows taken by up to 4 workers
 * (the weight gradients in 4 row parts); a batch's sets are cut into 4 parts of consecutive
 * sets. Every sum runs in an order fixed by the chunks and parts, not by the threads, and BLAS
 * runs on one thread inside the network, so every result is bit for bit the same on any number
 * of threads (and of OPENBLAS_NUM_THREADS); beyond 4 threads nothing is gained. A weight
 * callback (gopt_policy_backward_batch_fn) is then called from several threads at once, for
 * different sets. */
#define GOPT_POLICY_MAX_THREADS 64
gopt_status gopt_policy_set_threads(gopt_policy *p, int threads, gopt_error *err);
int gopt_policy_threads(const gopt_policy *p);

/* Size the activations for graphs of up to n_nodes nodes / n_edges edges
 * (forward calls it itself and only ever grows); with_backward also sizes
 * the backward scratch. */
gopt_status gopt_policy_reserve(gopt_policy *p, int32_t n_nodes, int32_t n_edges, int with_backward,
                                gopt_error *err);
/* Bytes currently held by parameters, gradients, moments and activations. */
size_t gopt_policy_memory_bytes(const gopt_policy *p);

/* Run the network over one graph. feat: (n, NFEAT) from gopt_policy_features.
 * ndev: 1..max_devices. dev_mask (n) or NULL: bit d set = node may run on
 * device d. A colocation group is placed as one unit (its members' placement
 * logits are averaged, its mask is the AND of theirs); a unit with no allowed
 * device is an error naming the node. The graph must stay alive and
 * unchanged until the next forward. */
gopt_status gopt_policy_forward(gopt_policy *p, const gopt_frozen *fz, const float *feat, int32_t ndev,
                                const uint16_t *dev_mask, gopt_error *err);

/* What the decoder reads besides the network: per-node predicted time
 * node_time (n, seconds, >= 0; the committed compute of each device),
 * per-node memory charge node_mem (n, bytes, >= 0) and per-device capacity
 * dev_cap (ndev, bytes, > 0) under one memory model (the caller's: the
 * policy does not know the simulator; gopt's `go` method passes the
 * baselines' model). Any array may be NULL: no time means every node counts
 * 1; no node_mem or dev_cap means no memory features and no memory masks.
 * The arrays are NOT copied: they are read at every later decode, logprob
 * and backward, so they must stay alive, and a caller may change the values
 * (e.g. scale a capacity down) between decodes. They stay set for later
 * forwards; a forward on a graph of another node count, or with dev_cap and
 * another device count, is refused. n = 0 with NULL arrays clears them.
 * Values that are negative or not finite are refused naming the index. */
gopt_status gopt_policy_set_decoder_inputs(gopt_policy *p, int32_t n, int32_t ndev, const double *node_time,
                                           const double *node_mem, const double *dev_cap, gopt_error *err);

/* Hints (a policy with cfg.hints = H > 0): classical solutions the decoder
 * reads as features, never as answers (docs/policy.md, "Hints"): dev (H, n)
 * the device of every node under each of H classical placements (row h,
 * 0..ndev-1, or -1 for a row without a hint; a unit reads its first
 * member's), feat (n, GOPT_POLICY_NHINT) per-node values in [0, 1]: a
 * classical schedule's priority rank (1 = runs first), 1 when a classical
 * fusion fuses the node into a predecessor's group, 1 when the node roots a
 * fused group; group (n) or NULL: the classical fusion's group of each node,
 * named by its first member in topological order (-1: not fused), read by
 * cfg.fuse_cond. Borrowed like the decoder inputs (kept for later forwards; a
 * forward on a graph of another node count is refused); NULL arrays clear
 * them (hint features 0). nh must equal cfg.hints. quality (nh) or NULL: each
 * hint's quality in [0, 1] (copied; read when cfg.hint_quality): 1 for the
 * best hint, T_best / T_h for hint h whose solution steps in T_h, 0 for a
 * hint that is missing or does not fit; NULL reads as 0. Out-of-range values
 * are refused naming the node or the hint. */
#define GOPT_POLICY_NHINT 3
#define GOPT_POLICY_MAX_HINTS 8
gopt_status gopt_policy_set_hints(gopt_policy *p, int32_t n, int32_t ndev, int nh, const int32_t *dev,
                                  const float *feat, const int32_t *group, const float *quality, gopt_error *err);

/* Per-node logits of the last forward for task t: (n, width) rows in node-id
 * order are copied into out; width = max_devices, sched_levels or
 * fusion_levels. These are the unconditioned logits of the network's heads
 * (placement: unpooled, unmasked); the decoder adds its conditioned terms
 * while it decides. */
gopt_status gopt_policy_logits(const gopt_policy *p, gopt_task t, float *out, gopt_error *err);

/* Decisions for every node (node-id order). place: device 0..ndev-1, equal
 * within a colocation group; sched: 0..P-1, higher runs first; fuse: 0..F-1. */
typedef struct {
    int32_t *place;
    int32_t *sched;
    int32_t *fuse;
} gopt_policy_actions;

/* Sample every decision of the last forward, node by node in topological
 * order, each conditioned on the decisions already made (the conditioned
 * decoder, docs/policy.md): one uniform draw per decision. With memory
 * inputs (gopt_policy_set_decoder_inputs) a unit's devices that it would
 * overflow are masked whenever one device fits it. */
gopt_status gopt_policy_sample(gopt_policy *p, gopt_rng *rng, gopt_policy_actions *out, gopt_error *err);
/* The same from the tempered policy: every decision drawn from softmax(z / temperature)
 * of its conditioned logits z over the allowed actions (temperature 1: gopt_policy_sample
 * bit for bit; above 1 flatter, below 1 sharper). For inference (best of K); training
 * samples at 1. temperature must be > 0 and finite. */
gopt_status gopt_policy_sample_tempered(gopt_policy *p, gopt_rng *rng, float temperature, gopt_policy_actions *out,
                                        gopt_error *err);
/* The policy's own temperature per task (default 1): from then on every decision of task t
 * (GOPT_TASK_PLACE, _SCHED, _FUSE) follows softmax(z / temperature) of its conditioned
 * logits z, in sampling, log-probabilities, entropies and every backward alike: the policy
 * trained is the tempered one (greedy decisions do not change). Unlike the temperature of
 * gopt_policy_sample_tempered (inference only; applied on top of this one) it keeps PPO on
 * policy: fine-tuning explores placements with it (docs/trainer.md, --place-temperature).
 * It is not saved in checkpoints. temperature in [0.05, 100]. */
gopt_status gopt_policy_set_task_temperature(gopt_policy *p, int task, float temperature, gopt_error *err);
float gopt_policy_task_temperature(const gopt_policy *p, int task);
/* Train the heads only (on = 1; 0: every parameter, the default). The Adam step then updates
 * only the task heads (their layer norms and products: head_*) and the decoder's conditioning
 * terms (cond.*); the trunk (input layer, GraphSAGE, attention layers) keeps its values. On the
 * CPU a forward on the same frozen graph with the same features reuses the trunk's outputs of
 * the last forward and recomputes the heads alone, and the backward stops at the heads: a
 * fine-tuning step on one graph costs the decoder and the heads, not the network (docs/policy.md,
 * "Training the heads only"). Results are those of a full forward within float rounding. It is
 * not saved in checkpoints. Switching it resets the reuse (the next forward is a full one). */
gopt_status gopt_policy_set_train_heads(gopt_policy *p, int on, gopt_error *err);
int gopt_policy_train_heads(const gopt_policy *p);
/* The same, also writing the log-probability and entropy of every sampled
 * decision into logp and ent ((3n) or NULL, as gopt_policy_logprob), which
 * saves the logprob replay. */
gopt_status gopt_policy_sample_scored(gopt_policy *p, gopt_rng *rng, gopt_policy_actions *out, float *logp,
                                      float *ent, gopt_error *err);
/* The same for k action sets in one pass over the nodes (the sets side by
 * side, 16 per pass): set s draws its uniforms from rng's stream after those
 * of sets 0..s-1, so the decisions, log-probabilities and entropies are bit
 * for bit those of k sequential gopt_policy_sample_scored calls with rng,
 * and rng ends where they leave it.
 * logp: set s's (3n) log-probabilities at logp + s * logp_stride
 * (logp_stride >= 3n), or NULL; ent0 (3n) or NULL: set 0's entropies.
 * w_keep (3n) or NULL: also keep, per set s, the gradient of
 * sum_t sum_v w_keep[t*n+v] * logp_t(v | s) (and of set 0's entropy term
 * with weights w_ent (3n) or NULL, apart) for gopt_policy_backward_kept:
 * a PPO step's first epoch, whose ratios are all 1, needs no replay. */
gopt_status gopt_policy_sample_batch(gopt_policy *p, int k, gopt_rng *rng, gopt_policy_actions *out, float *logp,
                                     size_t logp_stride, float *ent0, const float *w_keep, const float *w_ent,
                                     gopt_error *err);
/* Accumulate into the gradients d/dtheta of
 *   J = sum_s coef[s] sum_t sum_v w_keep[t*n+v] * logp_t(v | s) + sum_t sum_v w_ent[t*n+v] * ent_t(v | 0)
 * from the gradients kept by the last gopt_policy_sample_batch (k sets, w_keep given) of the
 * current forward, with ONE network backward: the same J as gopt_policy_backward_batch with
 * weights coef[s] * w_keep, equal within float rounding (the scaling is applied to each set's
 * sums instead of to each row). An error when no such sample batch kept k sets since the last
 * forward. */
gopt_status gopt_policy_backward_kept(gopt_policy *p, int k, const float *coef, gopt_error *err);
/* Argmax decoding, same order and masks (lowest index wins ties). */
gopt_status gopt_policy_greedy(gopt_policy *p, gopt_policy_actions *out, gopt_error *err);

/* Log-probability and entropy of the given actions under the last forward,
 * teacher-forced: every conditioned term and memory mask is recomputed from
 * the given actions by the rule the decoder uses, so this is exact for the
 * decoder's distribution.
 * logp, ent: (GOPT_TASK_COUNT * n) or NULL, [t*n + v]. A colocation group's
 * placement term is carried by its first member in topological order; the
 * other members get 0. total_logp/total_ent (GOPT_TASK_COUNT + 1) or NULL:
 * per task, then the sum. An action out of range, on a masked device, or
 * splitting a colocation group, or on a device its memory mask excludes, is
 * an error naming the node. */
gopt_status gopt_policy_logprob(gopt_policy *p, const gopt_policy_actions *a, float *logp, float *ent,
                                double *total_logp, double *total_ent, gopt_error *err);

/* Accumulate into the gradients d/dtheta of
 *   J = sum_t sum_v  w_logp[t*n+v] * logp_t(v) + w_ent[t*n+v] * ent_t(v)
 * for the last forward (same attribution of colocation groups as logprob;
 * the weight of a non-first member's placement term is ignored). Either
 * weight array may be NULL (all zero). To minimise a loss, pass the
 * negated weights. */
gopt_status gopt_policy_backward(gopt_policy *p, const gopt_policy_actions *a, const float *w_logp,
                                 const float *w_ent, gopt_error *err);
/* Imitation on the decoder's own decisions: the gradient of J = sum_t sum_v w_logp[t*n+v] *
 * log p_t(label_v | ctx), where the decoder's conditioned terms and memory masks follow the
 * context actions ctx (e.g. its own greedy decisions) while the rows score the label's actions
 * (teacher forcing is ctx = label, gopt_policy_backward). logp (3n) or NULL receives the labels'
 * log-probabilities; a label device that ctx's memory mask excludes scores 0 and gets no gradient. */
gopt_status gopt_policy_backward_labels(gopt_policy *p, const gopt_policy_actions *ctx,
                                        const gopt_policy_actions *label, const float *w_logp, float *logp,
                                        gopt_error *err);
/* The same for k action sets at once: J = sum_s sum_t sum_v w_logp[s*3n + t*n + v] * logp_t(v | a[s])
 * + sum_t sum_v w_ent[t*n+v] * ent_t(v | a[0]); the decoder's conditioned terms are replayed per
 * action set (O(n ndev Hc) each), then ONE network backward (it is linear in the logit gradients
 * and in the gradient of the scorer's node input). */
gopt_status gopt_policy_backward_batch(gopt_policy *p, int k, const gopt_policy_actions *a, const float *w_logp,
                                       const float *w_ent, gopt_error *err);
/* The same with each decision's weight computed from its own current log-probability during the
 * replay: w = wfn(ctx, s, t, v, logp_t(v | a[s])) (only decisions that carry a term are asked: a
 * colocation group's placement at its first member). For PPO, whose weight of a decision is a
 * function of that decision's ratio, this saves the logprob replay before the backward. ent0 (3n)
 * or NULL receives the entropies of set 0's decisions (as gopt_policy_logprob). With
 * gopt_policy_set_threads > 1, wfn is called concurrently for different sets (never for one
 * set from two threads): what it writes must be per set. */
typedef float (*gopt_policy_weight_fn)(void *ctx, int set, int task, int32_t node, float logp);
gopt_status gopt_policy_backward_batch_fn(gopt_policy *p, int k, const gopt_policy_actions *a,
                                          gopt_policy_weight_fn wfn, void *ctx, const float *w_ent, float *ent0,
                                          gopt_error *err);
void gopt_policy_zero_grad(gopt_policy *p);

/* ---- Adam ------------------------------------------------------------------ */
typedef struct {
    float lr, beta1, beta2, eps;
    float weight_decay; /* decoupled (AdamW), not applied to biases/norms */
    float clip_norm;    /* global L2 norm clip; <= 0 disables */
} gopt_adam_config;
void gopt_adam_config_default(gopt_adam_config *c); /* 3e-4, 0.9, 0.999, 1e-8, 0, 1.0 */
/* One step from the accumulated gradients; *grad_norm (may be NULL) gets the
 * global norm before clipping. A non-finite gradient is refused (EINVAL)
 * without touching the parameters. */
gopt_status gopt_policy_adam_step(gopt_policy *p, const gopt_adam_config *c, float *grad_norm, gopt_error *err);
/* Forget the Adam moments and step count (the parameters stay): a fresh optimizer for a new task,
 * e.g. fine-tuning a pre-trained policy on one graph. */
void gopt_policy_adam_reset(gopt_policy *p);
/* Multiply every parameter by lambda (the "shrink" of Ash & Adams' shrink-and-perturb, NeurIPS
 * 2020): a policy pre-trained on many graphs loses plasticity (its imitation of a new graph's
 * target stalls); shrinking restores it while keeping the parameters' directions. */
void gopt_policy_shrink(gopt_policy *p, float lambda);

/* ---- checkpoints -------------------------------------------------------------
 * One gzip-compressed file: magic, version, config, Adam step, parameters,
 * Adam m and v, CRC-32 (docs/policy.md). Written atomically. */
gopt_status gopt_policy_save(const gopt_policy *p, const char *path, gopt_error *err);
/* Create a policy from a checkpoint. Truncated, corrupt, wrong-version or
 * inconsistent files are refused (EFORMAT) with the reason. */
gopt_status gopt_policy_load(gopt_policy **out, const char *path, gopt_error *err);
/* Load into an existing policy; a file with another config is refused
 * (EINVAL) naming the first differing field. */
gopt_status gopt_policy_load_into(gopt_policy *p, const char *path, gopt_error *err);

/* ---- parameter table (tests, tools) -------------------------------------- */
size_t gopt_policy_num_params(const gopt_policy *p);
int gopt_policy_num_tensors(const gopt_policy *p);
/* Name, parameter and gradient pointers and element count of tensor i. */
void gopt_policy_tensor(gopt_policy *p, int i, const char **name, float **param, float **grad, size_t *count);
/* Total flops of the last forward (GEMMs and attention), for benchmarks. */
double gopt_policy_forward_flops(const gopt_policy *p);
double gopt_policy_backward_flops(const gopt_policy *p);

/* ---- fusion pass ---------------------------------------------------------------
 * Turn fusion levels into groups (pure function; policy/fusion.c). Nodes are
 * visited in topological order; node v with level l > 0 may join the groups
 * of its predecessors (not parameters or graph inputs without inputs of their
 * own: resident data) that have level l and are on v's device. merge = 0 (the
 * first-fit pass; cfg.fuse_merge = 0, checkpoints before version 5): v joins
 * the first such group G (in in-edge order) that keeps at most one GEMM or
 * convolution with v, when every other
 * predecessor of v is in G, has no inputs, or comes before G's first member
 * in topological order. merge = 1: v joins every such group whose
 * union with v and the groups already chosen keeps the contracted graph
 * acyclic (checked exactly, up to a search budget), merged into one group of
 * at most 64 members: XLA-style groups with several sources. Otherwise v
 * roots a new group. Groups are convex and never create a cycle.
 * group (n) gets ids 0..*n_groups-1 numbered by first member in topological
 * order. */
gopt_status gopt_policy_fusion_groups(const gopt_frozen *fz, const int32_t *place, const int32_t *fuse, int merge,
                                      int32_t *group, int32_t *n_groups, gopt_error *err);
/* The merging pass (merge = 1) bounded by other groups: within (n) gives each node a group id
 * (-1: none), and a node v with a level > 0 joins a predecessor's group only when that
 * predecessor has a level > 0 and within[v]'s id (>= 0), whatever the two levels are. The
 * groups are then parts of within's groups: the levels decide which of within's fusions to
 * take (gopt_go_decide's `hint` pass, within = the hint's groups). */
gopt_status gopt_policy_fusion_groups_within(const gopt_frozen *fz, const int32_t *place, const int32_t *fuse,
                                             const int32_t *within, int32_t *group, int32_t *n_groups,
                                             gopt_error *err);

#endif /* GOPT_POLICY_H */
