/* gopt_onnx.h: import an ONNX model as the training step gopt optimizes.
 *
 * The model's forward ops become forward nodes (shapes from the model's
 * value_info, else inferred by per-op rules in graphs/onnx/onnx_ops.c);
 * then, as for the zoo's families, a softmax cross-entropy loss on the
 * first output, the backward ops (the zoo's gradient rules, zoo_grad.c), and
 * one optimizer update per parameter, colocated with it. FLOPs and bytes
 * follow tools/export_torch.py's conventions (docs/zoo.md, "Bringing a model
 * in"). Weight bytes are never read: sizes come from the initializers' dims
 * (or from graph inputs, for models saved without weights), and external
 * data files are only checked to exist and be long enough.
 *
 * Errors name the file, and the node and op type or the value concerned.
 * Cost: O(file size + nodes + edges); a recurrent op unrolls into ~20 nodes
 * a time step.
 */
#ifndef GOPT_ONNX_H
#define GOPT_ONNX_H

#include <stddef.h>
#include <stdint.h>

#include "gopt_common.h"
#include "gopt_graph.h"
#include "gopt_zoo.h"

typedef struct {
    int batch;                /* > 0: the first dim of every data input; 0: as in the file */
    gopt_optimizer optimizer; /* DEFAULT means Adam */
    int forward_only;         /* no loss, backward or updates; param_bytes = weights only */
    int clip_grad_norm;       /* 1: the gradients clipped to one global norm before the updates */
    int unknown_as_other;     /* ops outside the rules become class `other` instead of an error */
} gopt_onnx_opts;

/* Whether this build has the import (protoc-c and libprotobuf-c were found). */
int gopt_onnx_available(void);

/* Import the ONNX model at `path` (opts may be NULL: defaults). On success
 * *out is a finalized graph named after the file; on error *out is NULL and
 * err says why: GOPT_EFORMAT for a malformed file (not protobuf, truncated, a
 * cycle, an input nothing produces), GOPT_EINVAL for an op outside the rules
 * or a shape that cannot be inferred, GOPT_EIO for a missing external data
 * file, GOPT_EUNSUP when the build has no ONNX support. */
gopt_status gopt_onnx_import(const char *path, const gopt_onnx_opts *opts, gopt_graph **out, gopt_error *err);

/* The same from bytes in memory. `origin` names them in messages and in the
 * graph's name; external data files are looked up under `base_dir` (NULL:
 * a model with external data is refused). */
gopt_status gopt_onnx_import_mem(const uint8_t *data, size_t len, const char *origin, const char *base_dir,
                                 const gopt_onnx_opts *opts, gopt_graph **out, gopt_error *err);

#endif /* GOPT_ONNX_H */
