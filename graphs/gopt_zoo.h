/* gopt_zoo.h: generators of training-step graphs: the paper's model families
 * and random synthetic graphs for pre-training.
 *
 * Every generated graph is one training step at TensorFlow-op granularity:
 * forward ops, each forward op's gradient ops (reading the incoming gradient
 * and the forward tensors they need), gradient accumulation (AddN) where a
 * tensor feeds several consumers, and one optimizer update per parameter,
 * colocated with it. FLOPs and bytes follow from fp32 shapes (docs/zoo.md
 * states the conventions). Nothing here touches files: callers save the
 * graph with gopt_graph_save. Graphs come back finalized.
 *
 * Cost: O(nodes + edges); the largest family setting (~80k nodes) builds in
 * well under a second.
 */
#ifndef GOPT_ZOO_H
#define GOPT_ZOO_H

#include "gopt_common.h"
#include "gopt_graph.h"

typedef enum {
    GOPT_OPTIM_DEFAULT = 0, /* the family's own choice (docs/zoo.md) */
    GOPT_OPTIM_SGD,         /* param_bytes = 1x weights */
    GOPT_OPTIM_MOMENTUM,    /* 2x: weights + velocity */
    GOPT_OPTIM_ADAM,        /* 3x: weights + two moments */
    GOPT_OPTIM_RMSPROP,     /* 2x: weights + mean square (the ONNX import only) */
    GOPT_OPTIM_ADAMW        /* 3x: Adam with decoupled weight decay (one more FLOP per weight) */
} gopt_optimizer;

/* Zero fields mean "the family's default" (docs/zoo.md lists them). */
typedef struct {
    const char *family; /* "rnnlm", "gnmt", "transformer_xl", "inception_v3", "amoebanet", "wavenet", "resnet" */
    int layers;         /* LSTM / Transformer layers, AmoebaNet cells per stack, WaveNet dilated layers, ResNet depth */
    int batch;
    int seq;            /* sequence length (tokens, audio samples) or image side for the vision families */
    gopt_optimizer optimizer;
    int clip_grad_norm; /* 1: the gradients clipped to one global norm before the updates (docs/zoo.md) */
} gopt_zoo_spec;

/* Upper bound on generated nodes; a spec whose estimate exceeds it is refused
 * (GOPT_EINVAL) before anything is allocated. */
#define GOPT_ZOO_MAX_NODES 2000000

/* An optimizer's name ("default", "sgd", "momentum", "adam", "rmsprop", "adamw"), NULL out of
 * range; and the optimizer a name other than "default" names, -1 for none. */
const char *gopt_optimizer_name(gopt_optimizer o);
int gopt_optimizer_parse(const char *name);

/* Number of families and the name of family i (0 <= i < count), NULL past the end. */
int gopt_zoo_family_count(void);
const char *gopt_zoo_family_name(int i);

/* Resolve the defaults of a spec: copies *spec into *out with every zero
 * field replaced by the family's default. GOPT_EINVAL for an unknown family or
 * a negative or too large size (message names the field and value). */
gopt_status gopt_zoo_resolve(const gopt_zoo_spec *spec, gopt_zoo_spec *out, gopt_error *err);

/* Build the training-step graph of one family. On success *out is a
 * finalized graph the caller frees; on error *out is NULL and err says why
 * (GOPT_EINVAL for a bad spec, GOPT_ENOMEM). */
gopt_status gopt_zoo_generate(const gopt_zoo_spec *spec, gopt_graph **out, gopt_error *err);

/* Synthetic graphs: one random training-step graph per call, every choice
 * drawn from rng (so a seed reproduces the graph exactly). Structure kinds:
 * layered DAGs of dense ops, NAS-like cells stacked into networks, chains
 * with skip connections and branches, unrolled recurrent grids, transformers
 * (attention, embeddings, mixture of experts), recommenders, U-Nets. */
typedef enum {
    GOPT_SYNTH_ALL = -2, /* draw the kind from rng among the first seven (layered .. unet) */
    GOPT_SYNTH_ANY = -1, /* draw the kind from rng among the first four (layered .. grid), as
                            before the later kinds existed: a seed gives the same graphs */
    GOPT_SYNTH_LAYERED = 0,
    GOPT_SYNTH_CELLS,
    GOPT_SYNTH_CHAIN,
    GOPT_SYNTH_GRID,
    GOPT_SYNTH_TRANSFORMER, /* token embeddings, multi-head attention blocks, optional MoE, encoder-decoder */
    GOPT_SYNTH_RECSYS,      /* embedding tables (sparse gradients), MLPs, feature interaction */
    GOPT_SYNTH_UNET,        /* stacked conv U-Nets: pooling down, transposed convs up, skips */
    GOPT_SYNTH_TABLES,      /* a recommender dominated by a few very large embedding tables (heavy-tailed
                               sizes, mostly dense gradients, as PyTorch's default embeddings have) */
    GOPT_SYNTH_KIND_COUNT
} gopt_synth_kind;
#define GOPT_SYNTH_ANY_KIND_COUNT 4 /* the kinds GOPT_SYNTH_ANY draws from */
#define GOPT_SYNTH_ALL_KIND_COUNT 7 /* the kinds GOPT_SYNTH_ALL draws from (layered .. unet): a seed
                                       gives the same graphs as before tables existed */

typedef struct {
    gopt_synth_kind kind;
    int target_nodes; /* 0: draw log-normally, median 2000, clipped to [min_nodes, max_nodes] */
    int min_nodes, max_nodes; /* 0: 200 and 20000 */
    int clip_grad_norm;       /* 1: the gradients clipped to one global norm (as gopt_zoo_spec's; draws nothing) */
} gopt_synth_opts;

const char *gopt_synth_kind_name(gopt_synth_kind k);

/* Build one synthetic graph named `name`. The node count lands within about
 * 15% of the target (and inside [min_nodes, max_nodes]). */
gopt_status gopt_zoo_synthetic(gopt_rng *rng, const gopt_synth_opts *opts, const char *name, gopt_graph **out,
                               gopt_error *err);

/* Save a graph as GraphML with gzip at `gzip_level` (1 fastest .. 9 smallest;
 * gopt_graph_save uses 6), atomically. `gopt graph gen synthetic` writes
 * level 1: three times faster to compress, about 40% larger files. */
gopt_status gopt_zoo_save(const gopt_graph *g, const char *path, int gzip_level, gopt_error *err);

#endif /* GOPT_ZOO_H */
