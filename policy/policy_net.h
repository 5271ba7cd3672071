/* policy_net.h: the gopt_policy struct shared by network.c, decode.c and
 * optim.c (internal to policy/).
 *
 * Parameters, gradients and the two Adam moments are four allocations of
 * nparams floats each, carved by the same layout into named tensors
 * (shapes in the comments below). Activations of one forward live in one
 * block sized for cap_n nodes / cap_m edges; backward scratch in another.
 * Inside the network every (n, .) array is in topological-rank order: row i
 * is node fz->topo[i].
 */
#ifndef GOPT_POLICY_NET_H
#define GOPT_POLICY_NET_H

#include "gopt_policy.h"
#include "policy_internal.h"

#define POLICY_MAX_SAGE 8
#define POLICY_MAX_ATTN 8
#define POLICY_MAX_ATTN_ALL (POLICY_MAX_ATTN + GOPT_TASK_COUNT)
#define POLICY_MAX_TENSORS 256
#define POLICY_NAME_MAX 48
#define POLICY_MAX_COND 64 /* largest cond_hidden */
#define ATTN_PARTS 4       /* parts of a chunk's segment attention; also the most chunk workers (network.c) */
#define WGRAD_PARTS 4      /* row parts of the backward's weight-gradient products (network.c) */
#define AGG_PARTS 2        /* source-row parts of the aggregation's backward (network.c) */
#define POLICY_NPHI 8      /* features phi(unit, device) of the conditioned placement scorer (decode.c) */
#define POLICY_NPSI 5      /* features psi(node, its device) of the schedule and fusion terms (decode.c) */
#define POLICY_NHINT_PSI GOPT_POLICY_NHINT /* hint features appended to psi when cfg.hints > 0 */
#define POLICY_NHINT_QUALITY 2 /* phi features appended when cfg.hint_quality (decode.c) */
#define POLICY_NSUCC 2 /* phi features appended when cfg.place_succ (decode.c) */
#define POLICY_MAX_PHI (POLICY_NPHI + GOPT_POLICY_MAX_HINTS + 1 + POLICY_NHINT_QUALITY + POLICY_NSUCC)
#define POLICY_MAX_PSI (POLICY_NPSI + POLICY_NHINT_PSI)
/* The fusion pass (fusion.c), node by node in topological order: the state of the groups formed
 * so far. A group's id is its first member's node id (merged groups keep the earliest). */
#define POLICY_FUSE_MAX_MEMBERS 64 /* merge = 1: largest group (the xla baseline's cap) */
#define POLICY_FUSE_SEARCH 4096    /* merge = 1: nodes one legality search may visit */
#define POLICY_FUSE_MAX_CAND 32    /* predecessor groups considered per node */
#define POLICY_FUSE_ARRAYS 5       /* int32 arrays of n per state */
typedef struct {
    uint32_t *mark; /* (n) stamps: union members and visited nodes */
    uint32_t clock;
    int32_t *stack; /* (n) */
    int32_t n;
} policy_fuse_scratch;
typedef struct {
    const gopt_frozen *fz;
    int merge;   /* cfg.fuse_merge */
    const int32_t *within; /* NULL, or (n) ids (-1: none): v joins only groups of its own id (fusion.c) */
    int32_t *gid;  /* (n) group of each decided node */
    int32_t *next; /* (n) next member of the same group, -1 at the end (a list from the group's id) */
    int32_t *tail, *size; /* per group id: last member in the list, members */
    int32_t *heavy;       /* per group id: GEMMs and convolutions among its members */
    policy_fuse_scratch *w; /* shared by states used one after another */
} policy_fuse_state;
/* buf: POLICY_FUSE_ARRAYS * n int32 (nothing needs clearing). */
void policy_fuse_init(policy_fuse_state *s, const gopt_frozen *fz, int merge, int32_t *buf,
                             policy_fuse_scratch *w);
gopt_status policy_fuse_scratch_init(policy_fuse_scratch *w, int32_t n, gopt_error *err);
void policy_fuse_scratch_free(policy_fuse_scratch *w);
/* The group node v would join at fusion level `level` > 0 (the first it may join), or -1 (v would
 * root a new group). place: the decided devices (v's included); fuse: the decided levels. */
int32_t policy_fuse_join(const policy_fuse_state *s, const int32_t *place, const int32_t *fuse, int32_t v,
                         int32_t level);
/* Add v, whose level fuse[v] is decided, to the groups. first: what policy_fuse_join returned for
 * v at fuse[v] with the same state (its search is not repeated), or POLICY_FUSE_UNKNOWN. */
#define POLICY_FUSE_UNKNOWN (-2)
void policy_fuse_commit(policy_fuse_state *s, const int32_t *place, const int32_t *fuse, int32_t v, int32_t first);
/* features of the scorer (H hint indicators and the agreement feature appended when
 * cfg.hints = H > 0, then the two quality features with cfg.hint_quality, then the two
 * consumer features with cfg.place_succ, always last) and of the schedule/fusion terms for a config */
#define POLICY_CFG_NPHI(c)                                                                                             \
    (POLICY_NPHI + ((c)->hints ? (c)->hints + 1 + ((c)->hint_quality ? POLICY_NHINT_QUALITY : 0) : 0) +             \
     ((c)->place_succ ? POLICY_NSUCC : 0))
#define POLICY_CFG_NPSI(c) (POLICY_NPSI + ((c)->hints ? POLICY_NHINT_PSI : 0))
/* rows of cond.fgrp (cfg.fuse_cond): join, root, with cfg.fuse_hint join another group than the
 * hint's, with cfg.fuse_hint_level (last) the level of v's hint group */
#define POLICY_CFG_NFGRP(c) (2 + ((c)->fuse_hint ? 1 : 0) + ((c)->fuse_hint_level ? 1 : 0))

typedef struct {
    float *w;    /* (5D, D) */
    float *b;    /* (D) */
    float *ln_w; /* (D) */
    float *ln_b; /* (D) */
} sage_params;

typedef struct {
    float *ln1_w, *ln1_b;    /* (D) */
    float *film_s, *film_b;  /* (D, D): graph vector -> scale and shift of ln1 */
    float *qkv_w;            /* (D, 3D) */
    float *qkv_b;            /* (3D) */
    float *relpos;           /* (H, 3S - 1) relative-position bias */
    float *proj_w;           /* (D, D) */
    float *proj_b;           /* (D) */
    float *ln2_w, *ln2_b;    /* (D) */
    float *fc1_w;            /* (D, Fh) */
    float *fc1_b;            /* (Fh) */
    float *fc2_w;            /* (Fh, D) */
    float *fc2_b;            /* (D) */
} attn_params;

typedef struct {
    float *ln_w, *ln_b; /* (D) */
    float *w;           /* (D, A_t) */
    float *b;           /* (A_t) */
} head_params;

typedef struct {
    float *in_w; /* (NFEAT, D) */
    float *in_b; /* (D) */
    sage_params sage[POLICY_MAX_SAGE];
    attn_params attn[POLICY_MAX_ATTN_ALL]; /* trunk layers, then one per task */
    head_params head[GOPT_TASK_COUNT];
    /* conditioned decoder (absent when cond_hidden = 0) */
    float *cond_u;     /* (NPHI, Hc) decision features -> scorer hidden */
    float *cond_v;     /* (D, Hc) placement head input -> scorer hidden */
    float *cond_b;     /* (Hc) */
    float *cond_w;     /* (Hc) scorer hidden -> logit */
    float *cond_sched; /* (NPSI, P) */
    float *cond_fuse;  /* (NPSI, F) */
    float *cond_fgrp;  /* (2 or 3, NPSI) cfg.fuse_cond: weights of the join, root and (with hints)
                          join-another-group terms */
    float *cond_shint; /* (NPSI) cfg.sched_cond: weights of the hint's level term */
} policy_params;

typedef struct {
    char name[POLICY_NAME_MAX];
    size_t off, count;
    int decay; /* weight matrices get weight decay; biases, norms, relpos do not */
} policy_tensor;

typedef struct {
    float *cat;               /* (N, 5D) */
    float *a;                 /* (N, D) relu(cat W + b) */
    float *r;                 /* (N, D) residual sum, layer-norm input */
    float *mean, *rstd;       /* (N) */
    float *out;               /* (N, D) */
} sage_acts;

typedef struct {
    float *ms, *mb;         /* (D) modulation of ln1 */
    float *x1;              /* (N, D) */
    float *mean1, *rstd1;   /* (N) */
    float *qkv;             /* (N, 3D) */
    float *att;             /* (N, H, 2S) */
    float *ctx;             /* (N, D) */
    float *h2;              /* (N, D) after the attention residual */
    float *x2;              /* (N, D) */
    float *mean2, *rstd2;   /* (N) */
    float *f1;              /* (N, Fh) relu output */
    float *out;             /* (N, D) */
} attn_acts;

typedef struct {
    float *x;          /* (N, D) */
    float *mean, *rstd; /* (N) */
    float *logits;     /* (N, A_t) the unconditioned logits */
} head_acts;

typedef struct {
    int32_t *pred_ptr, *pred_idx, *succ_ptr, *succ_idx; /* (N+1), (M): CSR over ranks */
    float *x0;                                          /* (N, NFEAT) */
    float *h0;                                          /* (N, D) */
    float *g;                                           /* (D) graph vector */
    sage_acts sage[POLICY_MAX_SAGE];
    attn_acts attn[POLICY_MAX_ATTN_ALL];
    head_acts head[GOPT_TASK_COUNT];
    /* placement units (colocation groups or single nodes) */
    int32_t *unit_of;    /* (N) unit of rank i */
    int32_t *unit_rep;   /* (N) rank of the unit's first member */
    int32_t *unit_size;  /* (N) */
    uint32_t *unit_mask; /* (N) allowed devices */
    int32_t *coloc_unit; /* (N) scratch: colocation group -> unit */
    int32_t *unit_ptr, *unit_idx; /* (N+1), (N): CSR of each unit's member ranks */
    float *pooled;       /* (N, maxdev) pooled placement logits per unit */
    float *vh;           /* (N, Hc) LN'd placement head input @ cond_v, per rank */
    float *vh_unit;      /* (N, Hc) its mean over each unit's members */
    int32_t *dev_rank;   /* (N) scratch of policy_decode_prepare (fill cursors) */
} policy_acts;

typedef struct {
    float *da, *db;               /* (N, D) ping-pong gradients of layer outputs */
    float *dtmp, *dh2;            /* (N, D) */
    float *dqkv_self, *dqkv_mem;  /* (N, 3D) */
    float *dff;                   /* (N, Fh) */
    float *dcat;                  /* (N, 5D) */
    float *dlogits[GOPT_TASK_COUNT]; /* (N, A_t) */
    float *dpooled;               /* (N, maxdev) */
    float *dvh, *dvh_unit;        /* (N, Hc) per rank, per unit */
    float *dg;                    /* (D) */
    float *dms, *dmb;             /* (D) */
    float *seg_scratch;           /* ATTN_PARTS x GOPT_SEGATTN_SCRATCH(S, H, D) */
    float *dagg_parts;            /* (AGG_PARTS - 1, N, D): the aggregation backward's parts 1.. */
} policy_bwd;

struct gopt_policy {
    gopt_policy_config cfg;
    int width[GOPT_TASK_COUNT]; /* action counts of the heads */
    int n_attn;                 /* attn_layers + GOPT_TASK_COUNT */
    int nt;
    policy_tensor tab[POLICY_MAX_TENSORS];
    size_t nparams;
    float *params, *grads, *m, *v;
    uint64_t adam_t;
    policy_params P, G;
    float task_inv_t[GOPT_TASK_COUNT]; /* 1 / the task temperatures (gopt_policy_set_task_temperature) */
    /* gopt_policy_set_train_heads: only head_* and cond.* train; the trunk's outputs of the last
     * CPU forward (trunk_ok) are reused by a forward on the same graph (trunk_fz, trunk_m) and features */
    int heads_only, trunk_ok;
    const gopt_frozen *trunk_fz;
    int32_t trunk_m;

    int32_t cap_n, cap_m;
    int has_bwd;
    void *act_block, *bwd_block;
    size_t act_bytes, bwd_bytes;
    policy_acts A;
    policy_bwd B;
    float *seg_scratch_fwd; /* ATTN_PARTS x GOPT_SEGATTN_SCRATCH(S, H, D) (network.c) */
    /* test hook (gopt_policy_debug_freeze_memory): frozen memory states */
    float *frozen_x1[POLICY_MAX_ATTN_ALL];  /* (N, D) or NULL */
    float *frozen_qkv[POLICY_MAX_ATTN_ALL]; /* (N, 3D) */
    int32_t frozen_n;
    int fwd_chunk; /* segments per chunk of the forward; 0: the default (gopt_policy_debug_chunk) */

    /* decoder inputs (gopt_policy_set_decoder_inputs; caller-owned, may be NULL) */
    const double *in_time, *in_mem, *in_cap;
    int32_t in_n, in_ndev;
    /* hints (gopt_policy_set_hints; caller-owned, may be NULL): cfg.hints
     * classical placements (hints, n) and per-node features (n, POLICY_NHINT_PSI) */
    const int32_t *hint_dev;
    const float *hint_feat;
    const int32_t *hint_group; /* (n) or NULL */
    int32_t hint_n, hint_ndev;
    float hint_q[GOPT_POLICY_MAX_HINTS]; /* each hint's quality (copied; 0 without) */
    int hint_best;                       /* the hint of quality 1, -1 when none */
    double total_time; /* sum of node times of the last forward's graph (n when no times) */

    /* state of the last forward */
    const gopt_frozen *fz;
    int32_t n, ndev, n_units;
    int forwarded;
    double fwd_flops, bwd_flops;

    /* gradients kept by gopt_policy_sample_batch (decode.c): kept_k sets' blocks of kept_sz
     * floats, then the entropy term's; kept_k = 0 (none) after every forward */
    float *kept;
    size_t kept_cap, kept_sz; /* floats allocated, floats per block */
    int kept_k;
    /* the batched backward's parts 1.. gradient blocks (decode.c, run_parts), kept_sz floats each */
    float *part_grad;
    size_t part_cap;
    int threads; /* the network's chunks and the decoder's batched replays (gopt_policy_set_threads; 1) */
    /* the network's chunks on those threads (network.c): per-chunk flags and small gradient blocks */
    int *chunk_done;
    size_t chunk_done_cap;
    float *chunk_grad;
    size_t chunk_grad_cap;
    float *wgrad; /* WGRAD_PARTS row parts' weight gradients of one layer's products */
    size_t wgrad_cap;
    /* cfg.fuse_cond: the fusion pass's joins recorded by the last sample batch (decode.c):
     * fj_k sets' (n, F - 1) joins by rank, the placements and fusion levels (2n each) they were
     * computed for, and the graph's fingerprint */
    int32_t *fj, *fj_act;
    size_t fj_cap, fj_act_cap;
    int fj_k;
    uint64_t fj_graph;

    struct policy_dev *dev; /* the network on a device (netdev.h), NULL: on the CPU */
};

/* Parameters a valid config needs, without allocating them (0 and err set when out of memory):
 * a checkpoint's size is checked against it before anything is allocated. */
size_t policy_config_num_params(const gopt_policy_config *cfg, gopt_error *err);
/* Room for need elements of elem bytes in *buf (capacity *cap elements), kept when it is
 * there already; GOPT_ENOMEM naming `what` when it cannot grow (network.c). */
gopt_status policy_grow(void **buf, size_t *cap, size_t need, size_t elem, const char *what, gopt_error *err);
/* decode.c: build the placement units, pool their logits and scorer inputs (end of forward). */
gopt_status policy_decode_prepare(gopt_policy *p, const uint16_t *dev_mask, gopt_error *err);
/* decode.c: dlogits (and dpooled) of J for the given actions; checks them. */
gopt_status policy_decode_backward(gopt_policy *p, const gopt_policy_actions *a, const float *w_logp,
                                   const float *w_ent, gopt_error *err);
/* decode.c: check actions against the last forward; fills nothing. */
gopt_status policy_check_actions(const gopt_policy *p, const gopt_policy_actions *a, gopt_error *err);
/* network.c: backward from B.dlogits (and B.dvh) through every layer, on the CPU or the device. */
gopt_status policy_network_backward(gopt_policy *p, gopt_error *err);
/* Offset of the first parameter gopt_policy_set_train_heads trains (head_*, then cond.*). */
size_t policy_heads_offset(const gopt_policy *p);

#endif /* GOPT_POLICY_NET_H */
