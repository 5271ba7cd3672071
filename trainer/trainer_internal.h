/* trainer_internal.h: the trainer struct shared by trainer.c (graphs,
 * schedule, decisions), ppo.c (the PPO and imitation steps) and state.c
 * (checkpoint and resume). Internal to trainer/.
 */
#ifndef GOPT_TRAINER_INTERNAL_H
#define GOPT_TRAINER_INTERNAL_H

#include "gopt_trainer.h"

#define TR_MAX_WIDTH 16 /* widest action space (devices, levels) */
#define TR_MAX_THREADS 64
#define TR_RENDER_THREADS 4 /* tr_variants_render's workers, at most */
#define TR_RENDER_MIN_NODES 2048 /* tr_variants_render: fewer nodes over all its action sets run on one thread */
#define TR_MAX_BASE 64
#define TR_MAX_SYM 40320 /* device symmetries considered (8!) */

/* What a step needs of a graph beyond its cold record: its simulator (cost
 * table), the per-thread simulator scratch, the node features and the
 * decoder's inputs. Built from the graph and its cost model on demand
 * (tr_hot_get) and kept in a small LRU cache (t->hot), so the trainer holds
 * them for a few graphs at a time, not for every graph (docs/trainer.md,
 * "Memory"). Rebuilt entries are bit for bit what they were. */
typedef struct {
    int32_t graph;          /* the graph it belongs to, -1 when free */
    uint64_t used;          /* LRU clock of its last use */
    gopt_sim *sim;
    gopt_sim_scratch *scratch[TR_MAX_THREADS]; /* sim_threads of them */
    float *feat;            /* (n, GOPT_POLICY_NFEAT) */
    double *dec_in;         /* (2n + ndev) the decoder's inputs: node times, node memory, device
                               capacities (gopt_go_decoder_inputs) */
} tr_hot;

/* A cost model graphs are trained on, and its identity in the state file. */
typedef struct {
    const gopt_costmodel *cm; /* borrowed */
    char name[64];            /* gopt_profile_name */
    uint64_t hash;            /* FNV-1a 64 of the profile's JSON (gopt_profile_write_json) */
} tr_prof;

typedef struct {
    gopt_graph *g;
    const gopt_frozen *fz;
    const gopt_costmodel *cm; /* the graph's cost model (borrowed): its simulator, baselines, features */
    int ndev;                 /* its devices (gopt_cost_num_devices(cm)) */
    int prof;                 /* index in t->profs */
    int32_t hot;              /* its entry in t->hot, -1 when not built */
    int32_t *unit_first;    /* (n) first member (topological order) of v's colocation group, or v */
    int32_t *hint_dev;      /* (H, n) the hints' devices (policy cfg.hints = H; gopt_go_hints), built
                               by the graph's first tr_forward and kept; NULL: none (hint_state) */
    float *hint_feat;       /* (n, GOPT_POLICY_NHINT) */
    int32_t *hint_group;    /* (n) the hint fusion's group of each node (its first member), -1 unfused */
    float hint_q[GOPT_POLICY_MAX_HINTS]; /* the hints' quality (policy cfg.hint_quality) */
    int hint_state;         /* 0 not built, 1 built, -1 no hint method found anything that fits */
    gopt_go_hint_table *hint_table; /* with greedy_styles and hint quality: every combination the
                                       hints were drawn from, for gopt_trainer_greedy's styles; NULL */
    int32_t rows;           /* learned decision rows: units (place) + n per other learned task */
    double ref;             /* reference step time (s) */
    char ref_method[64];
    int nbase;                                 /* reference baselines tried */
    char base_name[TR_MAX_BASE][32];           /* their names */
    double base_step[TR_MAX_BASE];             /* simulated step (s); +inf: none found; negative: OOM */
    gopt_decisions ref_dec; /* valid when has_ref_dec */
    int has_ref_dec;
    int relabel;            /* gopt_trainer_target_relabel: 0, 1 relabelled, -1 relabelled was slower */
    double relabel_step;    /* step of the relabelled target (s), 0 when not simulated */
    double target_rel;      /* step of the imitation targets / ref (0: not yet simulated) */
    int ref_pending;        /* reference not computed yet (data-parallel: gopt_trainer_share_references) */
    double best;            /* best step time found (s), +inf before any */
    gopt_decisions best_dec;
    int has_best;
    double alt;             /* best step time (s) of the answers the search cannot reproduce (the fusion
                               pass within the hint's groups, tr_judge_variants), +inf before any: they
                               count toward gopt_trainer_best, not toward best, so self-imitation and
                               the improvements PPO records stay on the policy's own passes */
    gopt_decisions alt_dec;
    int has_alt;
    double sp_s;            /* the splice search's best (splice.c): step (s), +inf before any; an answer
                               kept apart like alt: PPO and self-imitation never see it */
    int32_t *sp_act;        /* (3, n) its actions, when sp_s is finite */
    int sp_var;             /* the variant its decisions are made from sp_act with (best_var's kind,
                               0..3): its parent's, so a child differs from the parent by its window */
    gopt_decisions sp_dec;  /* its decisions, when has_sp_dec (after a resume: tr_restore_decisions) */
    int has_sp_dec;
    int32_t *best_act;      /* (3, n) the policy's actions behind best_dec, when has_best_act */
    int has_best_act;
    int best_var;           /* the variant best_dec was made from best_act with (tr_judge_variants'
                               v, 0..3: 0 the policy's own fusion pass with critical-path ties) */
    int samp_var;           /* the variant this PPO step's samples were made with: best_var when it
                               began with o.sample_variant, else 0 (ppo.c) */
    /* the probation of a style's answer as self-imitation's incumbent (o.style_probation,
     * tr_probation_step): the policy's own greedy answer under G's hints, kept to fall back on */
    int best_style;         /* 1: best_act was decoded under another style's hints (greedy_styles) */
    int note_mode;          /* while gopt_trainer_greedy judges: 1 its own passes, 2 the styles; else 0 */
    int probation;          /* 0 none; 1 armed (by the zero-shot greedy); 2 running */
    int prob_steps;         /* PPO steps of G since the probation began */
    double prob_ref;        /* min(best, sp_s) when it began: what counts as found is faster */
    double own_s;           /* the own answer's step (s), +inf before any */
    int32_t *own_act;       /* (3, n) its actions, when own_s is finite */
    int own_var;            /* the variant it was made with (best_var's) */
    gopt_decisions own_dec; /* its decisions */
    int32_t *tgt_act;       /* (3, n) an improved imitation target (gopt_trainer_set_target), when has_tgt_act */
    int has_tgt_act;
    double tgt_step;        /* its simulated step (s) */
    unsigned tgt_tasks;     /* the tasks it trains (GOPT_TASK_BIT: all, or the placement alone) */
} tr_graph;

/* The critical-path priorities of the last placement ranked (actions_to_decisions): samples and
 * splice children that keep a placement skip its ranking and sort. Keyed by the graph, cost model
 * and device count the tie-breaking problem was made for (its cost table follows from them). */
typedef struct {
    const gopt_frozen *fz; /* NULL: empty */
    const gopt_costmodel *cm;
    int ndev;
    int32_t cap;
    int32_t *dev, *prio; /* (cap) */
} tr_cp_cache;
void tr_cp_cache_free(tr_cp_cache *c);
/* gopt_trainer_actions_to_decisions_within through cache (NULL: none). */
gopt_status tr_actions_to_decisions(const gopt_frozen *fz, unsigned tasks, int fuse_merge, const int32_t *within,
                                    const gopt_bl_problem *ties, tr_cp_cache *cache, const gopt_policy_actions *a,
                                    gopt_decisions *d, int32_t *group, gopt_error *err);

struct gopt_trainer {
    gopt_policy *pol;
    const gopt_costmodel *cm; /* default cost model of gopt_trainer_add_graph (may be NULL) */
    gopt_trainer_options o;
    char reference[1024];
    tr_graph *graphs;
    int ng, capg;
    tr_prof *profs;     /* the distinct cost models of the graphs */
    int nprof, capprof;
    tr_hot *hot;        /* (nhot) built graphs, least recently used evicted first */
    int nhot, hot_cap;  /* hot_cap: most entries kept (0: no limit; gopt_trainer_set_cache) */
    uint64_t hot_clock;
    gopt_rng rng;
    int64_t step;
    /* schedule: perm is the current pass over the graphs, cursor the next
     * position in it; sel the graphs of the current step */
    int32_t *perm;
    int32_t cursor;
    int32_t *sel;  /* (graphs_per_step) */
    int nsel;
    /* scratch sized for cap_n nodes */
    int32_t cap_n;
    int32_t *act;       /* (B, K, 3, cap_n) sampled actions */
    float *old_logp;    /* (B, K, 3 * cap_n) */
    float *adv;         /* (B, K) */
    float *logp;        /* (3 * cap_n) */
    float *ent;         /* (3 * cap_n) */
    float *w_k;         /* (K, 3 * cap_n) per-sample weights of one graph */
    float *rw;          /* (3 * cap_n) the imitation loss's per-decision weights */
    float *rent;        /* (3 * cap_n) entropy weights */
    int32_t *group;     /* (cap_n) */
    tr_cp_cache cpc[TR_RENDER_THREADS]; /* tr_variants_render's critical-path priorities, one per worker */
    int32_t *wgroup[TR_RENDER_THREADS]; /* (cap_n) its workers' group scratch (the first is group) */
    gopt_decisions *dec; /* (K) */
    int dec_n;          /* n the decisions are sized for */
    gopt_sim_result *res; /* (K) */
    int32_t *sym;       /* (TR_MAX_SYM, GOPT_POLICY_MAX_DEVICES) device symmetries of a graph (scratch) */
    struct tr_dist *dp; /* data-parallel state (shard.c) */
    gopt_bl_evaluate_fn eval; /* NULL: the simulator judges the samples (gopt_trainer_set_evaluator) */
    void *eval_ctx;
};

/* Graph i's simulator, scratch, features and decoder inputs, built when
 * it has none (evicting the least recently used entry when the cache is
 * full). The entry stays valid until another graph is fetched while the
 * cache is full; the cache holds at least 2 (the last two graphs used). */
gopt_status tr_hot_get(gopt_trainer *t, int i, tr_hot **out, gopt_error *err);
/* Graph i as a baselines problem on its cluster (its hot entry's cost table; no evaluator). */
gopt_status tr_problem(gopt_trainer *t, int i, gopt_bl_problem *bp, gopt_error *err);
/* FNV-1a 64 of n bytes, continuing from h (start: TR_FNV_INIT). */
#define TR_FNV_INIT 1469598103934665603ull
uint64_t tr_fnv64(uint64_t h, const void *p, size_t n);

/* The policy's forward on graph G with its decoder inputs (memory model) set. */
gopt_status tr_forward(gopt_trainer *t, tr_graph *G, gopt_error *err);
/* Build G's hints (hint.c; the policy has cfg.hints) with its built simulator H. */
gopt_status tr_build_hints(gopt_trainer *t, tr_graph *G, tr_hot *H, gopt_error *err);
/* Actions of sample k of batch slot b. */
gopt_policy_actions tr_actions(gopt_trainer *t, int b, int k);
/* The policy's fusion pass (cfg.fuse_merge). */
static inline int tr_fuse_merge(const gopt_trainer *t) { return gopt_policy_get_config(t->pol)->fuse_merge; }
/* Keep d (step s, fits) as the graph's hint-pass answer (G->alt) when it is faster than the one
 * kept. */
gopt_status tr_note_alt(tr_graph *G, const gopt_decisions *d, double step, gopt_error *err);
/* The variants of slot 0's actions 0..k-1, from variant `first` on: 0 is the policy's own fusion
 * pass with the critical-path tie order, 1 the topological tie order, 2 and 3 both orders under
 * the other fusion pass, 4 and 5 under the pass bounded by `within` (the hint groups the actions
 * were decoded under; NULL: none), as gopt_go_decide judges them by default (tasks the trainer
 * does not learn have no variants 1-5). A caller that judged variant 0 itself passes first = 1.
 * Each valid one that fits goes to tr_note_best (variants 4 and 5: tr_note_alt); one faster than
 * *best_s replaces it, and best_d and best_res (when set) get its decisions and result. Overwrites
 * t->dec[0..k) and t->res[0..k). */
gopt_status tr_judge_variants(gopt_trainer *t, tr_graph *G, int k, int first, const int32_t *within, double *best_s,
                              gopt_decisions *best_d, gopt_sim_result *best_res, gopt_error *err);
/* Actions a into d as variant v (0..5) of tr_judge_variants makes them: v / 2 the fusion pass
 * (0 the checkpoint's own, 1 the other, 2 the one bounded by within), v % 2 the tie order (0
 * critical path, from bp; 1 topological). */
gopt_status tr_variant_decisions(gopt_trainer *t, tr_graph *G, const gopt_policy_actions *a, int v,
                                 const int32_t *within, const gopt_bl_problem *bp, gopt_decisions *d, gopt_error *err);
/* tr_variant_decisions for k action sets into dec[0..k), on up to min(sim_threads, 4) threads when
 * they hold TR_RENDER_MIN_NODES nodes or more (each result a function of its actions alone: the
 * same on any count). */
gopt_status tr_variants_render(gopt_trainer *t, tr_graph *G, const gopt_policy_actions *as, int k, int v,
                               const int32_t *within, const gopt_bl_problem *bp, gopt_decisions *dec, gopt_error *err);
/* After a PPO step on graph i: the probation of a style's answer as the incumbent
 * (o.style_probation). Once the graph's o.style_probation-th PPO step since the zero-shot
 * greedy has found nothing faster than the incumbent and the splice search's best (min(best,
 * sp_s)), and the incumbent is still the style's, self-imitation's incumbent becomes the
 * policy's own greedy answer under the graph's hints and the style's answer is kept apart
 * (tr_note_alt), where gopt_trainer_best still counts it; the splice search's best (then the
 * style's answer) is cleared, so its next parent is the own answer (splice.c, adopt_incumbent). */
gopt_status tr_probation_step(gopt_trainer *t, int i, gopt_trainer_stats *st, gopt_error *err);
/* Make sure every scratch array fits n nodes. */
gopt_status tr_reserve(gopt_trainer *t, int32_t n, gopt_error *err);
/* Make d hold n nodes (initialised again unless it already does; its values are then undefined). */
gopt_status tr_decisions_fit(gopt_decisions *d, int32_t n, gopt_error *err);
/* Size t->dec for n nodes. */
gopt_status tr_decisions_for(gopt_trainer *t, int32_t n, gopt_error *err);
/* Evaluate t->dec[0..k) on graph G into t->res (the simulator in a batch,
 * or the evaluator set by gopt_trainer_set_evaluator one at a time); ok[i] =
 * 0 when sample i was rejected (or the evaluator failed on it). */
gopt_status tr_simulate(gopt_trainer *t, tr_graph *G, int k, int *ok, gopt_error *err);
/* Keep d as G's best when step beats it, and a (the actions behind d, turned into d by variant var
 * of tr_judge_variants, 0..3; a may be NULL) when the trainer imitates its bests. GOPT_ENOMEM: the
 * caller fails with it (G's best is then undefined). */
gopt_status tr_note_best(const gopt_trainer *t, tr_graph *G, const gopt_decisions *d, const gopt_policy_actions *a,
                         int var, double step, gopt_error *err);
/* After a resume (the state keeps actions, not decisions): G->best_dec from G->best_act and
 * G->best_var, G->sp_dec from G->sp_act, as they were made (the same actions and variant make the
 * same decisions). The hint pass's answer (G->alt) keeps no actions: the state keeps its decisions
 * (state.c, hint_pass_decisions). */
gopt_status tr_restore_decisions(gopt_trainer *t, tr_graph *G, gopt_error *err);
/* Actions packed as (3, n) in buf (G->best_act's layout, and what ranks exchange): a view of buf,
 * and a copy of a into it. */
static inline gopt_policy_actions tr_actions_packed(int32_t *buf, int32_t n) {
    gopt_policy_actions a = {buf, buf + n, buf + 2 * (size_t)n};
    return a;
}
void tr_actions_pack(int32_t *buf, const gopt_policy_actions *a, int32_t n);
/* The index of the first of G's 3n packed actions outside its action space (devices, priority
 * levels, fusion levels), *hi that space's size; -1 when all are in range. */
int64_t tr_actions_out_of_range(const gopt_trainer *t, const tr_graph *G, const int32_t *v, int32_t *hi);
/* Imitation target of decisions d of graph G (the reference's, or an improved target's) into a:
 * device; priority rank cut into the P levels (higher priority, higher level); for a member of a
 * fused group its group's level from gopt_trainer_group_levels (differing from every group
 * touching it on its device), else 0. */
gopt_status tr_imitation_targets(gopt_trainer *t, const tr_graph *G, const gopt_decisions *d, gopt_policy_actions *a,
                                 gopt_error *err);
/* Keep a (the actions behind G's new best) in G->best_act when the trainer imitates its bests
 * (GOPT_ENOMEM: G has no best actions). */
gopt_status tr_note_best_actions(const gopt_trainer *t, tr_graph *G, const gopt_policy_actions *a, gopt_error *err);
/* Advance the schedule (fills t->sel). */
void tr_schedule_next(gopt_trainer *t);

/* ---- data-parallel steps (shard.c) ------------------------------------------
 * A step's B graphs ("slots") and their B*K samples (global index b*K + k)
 * are dealt to the N ranks: with B >= N rank r works on the contiguous slots
 * [r*B/N, (r+1)*B/N) and all their samples; with B < N the ranks
 * floor(r*B/N) == b share slot b: each simulates a contiguous part of its K
 * samples and the first of them (the slot's leader) does the network work.
 * Every rank ends up with every sample's result, every slot's statistics and
 * the same gradient: per-slot gradients summed in slot order, whatever N. */
typedef struct {
    int s0, s1; /* slots this rank works on */
    int lo, hi; /* global samples it simulates */
    int l0, l1; /* slots it leads (network work, contributes their gradients and statistics) */
} tr_shard;
void tr_shard_of(int B, int K, int N, int r, tr_shard *sh);

struct tr_dist {
    gopt_dist *dist;       /* borrowed; NULL: one process */
    tr_shard sh;           /* this rank's share of the current step */
    gopt_rng *rng;         /* (graphs_per_step) sampling streams of the step's slots (B > 1) */
    gopt_decisions *best;  /* (graphs_per_step) best of the samples this rank simulated, per slot */
    size_t P;              /* policy parameters */
    float *gloc;           /* (led slots, P) gradients to gather (N > 1); one process: scratch (P) */
    size_t cap_g;
    float *gall, *gacc;    /* a chunk of every slot's gradient; the ordered sum (P) */
    size_t cap_all;
    size_t *counts;        /* (N) */
};

/* Compute graph i's reference (the baselines; trainer.c). */
gopt_status tr_compute_reference(gopt_trainer *t, int i, gopt_error *err);
/* Allocate t->dp (called by gopt_trainer_create). */
gopt_status tr_dist_create(gopt_trainer *t, gopt_error *err);
void tr_dist_free(gopt_trainer *t);
/* Fill t->dp->sh for a step of B slots; split the slots' sampling streams. */
gopt_status tr_dist_begin(gopt_trainer *t, int B, int split_rng, gopt_error *err);
/* The sampling stream of slot b. */
gopt_rng *tr_slot_rng(gopt_trainer *t, int b);
/* Every rank's samples: mine = this rank's [lo, hi) values, all = (B*K). */
gopt_status tr_gather_samples(gopt_trainer *t, const double *mine, double *all, gopt_error *err);
/* S doubles per slot from each slot's leader: mine = (l1-l0, S), all = (B, S). */
gopt_status tr_gather_slots(gopt_trainer *t, int S, const double *mine, double *all, gopt_error *err);
/* Keep the policy's current gradient as led slot b's (call in slot order). */
gopt_status tr_grad_stash(gopt_trainer *t, int b, gopt_error *err);
/* The policy's gradient becomes the sum of every slot's, in slot order. */
gopt_status tr_grad_reduce(gopt_trainer *t, gopt_error *err);
/* Keep the local best sample k of slot b (decisions d) for tr_share_bests. */
gopt_status tr_keep_slot_best(gopt_trainer *t, int b, const gopt_decisions *d, gopt_error *err);
/* Slots whose best sample improved their graph's best (improved[b] = k or
 * -1, in slot order): the decisions travel from the rank that simulated them
 * to every rank's best_dec. */
gopt_status tr_share_bests(gopt_trainer *t, const int *improved, gopt_error *err);

gopt_status tr_ppo_step(gopt_trainer *t, gopt_trainer_stats *st, gopt_error *err);
gopt_status tr_imitate_step(gopt_trainer *t, gopt_trainer_stats *st, gopt_error *err);
/* After a PPO step: the splice search's children of this step (o.splice; splice.c). */
gopt_status tr_splice_step(gopt_trainer *t, gopt_error *err);

#endif
