/* trainer_internal.h: the trainer struct shared by trainer.c (graphs,
 * schedule, decisions), ppo.c (the PPO and imitation steps) and state.c
 * (checkpoint and resume). Internal to trainer/.
 */
#ifndef GOPT_TRAINER_INTERNAL_H
#define GOPT_TRAINER_INTERNAL_H

#include "gopt_trainer.h"

#define TR_MAX_WIDTH 16 /* widest action space (devices, levels) */
#define TR_MAX_THREADS 64
#define TR_MAX_BASE 16
#define TR_MAX_SYM 40320 /* device symmetries considered (8!) */

typedef struct {
    gopt_graph *g;
    const gopt_frozen *fz;
    gopt_sim *sim;
    gopt_sim_scratch *scratch[TR_MAX_THREADS];
    float *feat;            /* (n, GOPT_POLICY_NFEAT) */
    int32_t *unit_first;    /* (n) first member (topological order) of v's colocation group, or v */
    double *dec_in;         /* (2n + ndev) the decoder's inputs: node times, node memory, device
                               capacities (gopt_go_decoder_inputs); built by the first tr_forward */
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
    double best;            /* best step time found (s), +inf before any */
    gopt_decisions best_dec;
    int has_best;
} tr_graph;

struct gopt_trainer {
    gopt_policy *pol;
    const gopt_costmodel *cm;
    gopt_trainer_options o;
    char reference[256];
    int ndev;
    tr_graph *graphs;
    int ng, capg;
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
    int32_t *ract;      /* (TR_MAX_WIDTH, 3, cap_n) actions of the backward rounds (--backward rounds) */
    float *rw;          /* (TR_MAX_WIDTH, 3 * cap_n) their weights; row 0 also the imitation loss's */
    float *rent;        /* (3 * cap_n) entropy weights */
    int32_t *group;     /* (cap_n) */
    gopt_decisions *dec; /* (K) */
    int dec_n;          /* n the decisions are sized for */
    gopt_sim_result *res; /* (K) */
    int32_t *sym;       /* (TR_MAX_SYM, GOPT_POLICY_MAX_DEVICES) device symmetries of a graph (scratch) */
};

/* The policy's forward on graph G with its decoder inputs (memory model) set. */
gopt_status tr_forward(gopt_trainer *t, tr_graph *G, gopt_error *err);
/* Actions of sample k of batch slot b. */
gopt_policy_actions tr_actions(gopt_trainer *t, int b, int k);
/* Make sure every scratch array fits n nodes. */
gopt_status tr_reserve(gopt_trainer *t, int32_t n, gopt_error *err);
/* Size t->dec for n nodes. */
gopt_status tr_decisions_for(gopt_trainer *t, int32_t n, gopt_error *err);
/* Simulate t->dec[0..k) on graph G into t->res; ok[i] = 0 when sample i was
 * rejected by the simulator. */
gopt_status tr_simulate(gopt_trainer *t, tr_graph *G, int k, int *ok, gopt_error *err);
/* Record a valid result as G's best when it is. */
void tr_note_best(tr_graph *G, const gopt_decisions *d, double step);
/* Advance the schedule (fills t->sel). */
void tr_schedule_next(gopt_trainer *t);

gopt_status tr_ppo_step(gopt_trainer *t, gopt_trainer_stats *st, gopt_error *err);
gopt_status tr_imitate_step(gopt_trainer *t, gopt_trainer_stats *st, gopt_error *err);

#endif
