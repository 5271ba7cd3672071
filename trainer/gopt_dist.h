/* gopt_dist.h: the communication seam of data-parallel pre-training. One
 * primitive, an all-gather of byte blocks in rank order, serves every exchange
 * the trainer makes (per-sample results, per-graph statistics and gradients,
 * the stop flag, consistency checks); the trainer then sums what it gathered
 * in a fixed order, so N ranks compute exactly what one process computes.
 * Docs: docs/trainer.md (Data-parallel pre-training).
 *
 * Implementations: a single process (rank 0 of 1: the gather is a copy);
 * Open MPI when gopt was built with it (GOPT_HAVE_MPI) and the process was
 * started by mpirun (MPI_COMM_WORLD, MPI_Allgatherv on MPI_BYTE); or a
 * caller-supplied gather function (tests run ranks as threads with it).
 *
 * Cost: one gather moves the sum of every rank's bytes to every rank.
 */
#ifndef GOPT_DIST_H
#define GOPT_DIST_H

#include <stddef.h>

#include "gopt_common.h"

typedef struct gopt_dist gopt_dist;

/* Gather: rank r contributes `bytes` bytes at `send`; every rank receives
 * the blocks of ranks 0..size-1 back to back in `recv`, counts[r] bytes each
 * (every rank passes the same counts; counts[rank] == bytes). */
typedef gopt_status (*gopt_dist_gather_fn)(void *ctx, const void *send, size_t bytes, void *recv,
                                           const size_t *counts, gopt_error *err);

/* 1 when this build has MPI support. */
int gopt_dist_built_with_mpi(void);
/* 1 when the environment says this process was started by an MPI launcher
 * (Open MPI's OMPI_COMM_WORLD_SIZE, or PMI_SIZE / PMIX_RANK). */
int gopt_dist_launched(void);

/* The process's communicator: MPI (MPI_Init) when built with MPI and
 * launched by mpirun, else a single process. Launched by mpirun without MPI
 * support in this build is an error (GOPT_EUNSUP) saying so, unless the world
 * has one rank. */
gopt_status gopt_dist_init(gopt_dist **out, gopt_error *err);
/* A communicator over a caller's gather function (rank of size). */
gopt_status gopt_dist_custom(gopt_dist **out, int rank, int size, gopt_dist_gather_fn fn, void *ctx,
                             gopt_error *err);
/* MPI_Finalize when MPI was initialised here; frees d (NULL is fine). */
void gopt_dist_free(gopt_dist *d);
/* End every rank of the job now with exit code `code` (MPI_Abort); a single
 * process just returns. */
void gopt_dist_abort(gopt_dist *d, int code);

int gopt_dist_rank(const gopt_dist *d); /* 0 for NULL */
int gopt_dist_size(const gopt_dist *d); /* 1 for NULL */

/* The all-gather above. d NULL: a single process (memcpy). */
gopt_status gopt_dist_allgatherv(gopt_dist *d, const void *send, size_t bytes, void *recv, const size_t *counts,
                                 gopt_error *err);
/* Every rank gets root's `bytes` bytes of buf. */
gopt_status gopt_dist_bcast(gopt_dist *d, void *buf, size_t bytes, int root, gopt_error *err);
/* *any = 1 on every rank when flag is non-zero on some rank. */
gopt_status gopt_dist_any(gopt_dist *d, int flag, int *any, gopt_error *err);
/* Every rank's 64-bit value, checked equal: EINVAL naming the first rank
 * whose value differs from rank 0's and `what`. */
gopt_status gopt_dist_check_same(gopt_dist *d, uint64_t value, const char *what, gopt_error *err);

#endif /* GOPT_DIST_H */
