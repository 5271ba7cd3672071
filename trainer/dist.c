/* dist.c: the communicator of data-parallel pre-training (gopt_dist.h): a
 * single process, Open MPI (built when CMake finds it: GOPT_HAVE_MPI), or a
 * caller's gather function. Everything is built on one all-gather of byte
 * blocks in rank order; broadcast, "any" and the consistency check are
 * gathers too (the payloads are bytes, the step's compute is seconds).
 *
 * MPI is initialised only when an MPI launcher started the process, so a
 * plain `gopt train` never touches MPI. MPI_Allgatherv counts are int: a
 * gather of 2 GiB or more is refused (EUNSUP).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "gopt_dist.h"

#ifdef GOPT_HAVE_MPI
#include <mpi.h>
#endif

struct gopt_dist {
    int rank, size;
    int mpi; /* 1: MPI_COMM_WORLD, initialised by gopt_dist_init */
    gopt_dist_gather_fn fn;
    void *ctx;
};

int gopt_dist_built_with_mpi(void) {
#ifdef GOPT_HAVE_MPI
    return 1;
#else
    return 0;
#endif
}

static const char *env_nonempty(const char *name) {
    const char *s = getenv(name);
    return s && s[0] ? s : NULL;
}

int gopt_dist_launched(void) {
    return env_nonempty("OMPI_COMM_WORLD_SIZE") || env_nonempty("PMI_SIZE") || env_nonempty("PMIX_RANK");
}

gopt_status gopt_dist_init(gopt_dist **out, gopt_error *err) {
    *out = NULL;
    gopt_dist *d = gopt_calloc(1, sizeof *d, err);
    if (!d) return GOPT_ENOMEM;
    d->size = 1;
    if (!gopt_dist_launched()) {
        *out = d;
        return GOPT_OK;
    }
#ifdef GOPT_HAVE_MPI
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited && MPI_Init(NULL, NULL) != MPI_SUCCESS) {
        free(d);
        return gopt_error_set(err, GOPT_EIO, "MPI_Init failed");
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d->size);
    d->mpi = !inited;
    *out = d;
    return GOPT_OK;
#else
    const char *ws = env_nonempty("OMPI_COMM_WORLD_SIZE");
    if (!ws) ws = env_nonempty("PMI_SIZE");
    if (ws && strcmp(ws, "1") != 0) {
        free(d);
        return gopt_error_set(err, GOPT_EUNSUP,
                              "started by an MPI launcher with %s ranks, but this gopt was built without MPI "
                              "(install libopenmpi-dev and rebuild)",
                              ws);
    }
    *out = d;
    return GOPT_OK;
#endif
}

gopt_status gopt_dist_custom(gopt_dist **out, int rank, int size, gopt_dist_gather_fn fn, void *ctx,
                             gopt_error *err) {
    *out = NULL;
    if (size < 1 || rank < 0 || rank >= size || !fn)
        return gopt_error_set(err, GOPT_EINVAL, "dist: rank %d of %d (or no gather function)", rank, size);
    gopt_dist *d = gopt_calloc(1, sizeof *d, err);
    if (!d) return GOPT_ENOMEM;
    d->rank = rank;
    d->size = size;
    d->fn = fn;
    d->ctx = ctx;
    *out = d;
    return GOPT_OK;
}

void gopt_dist_free(gopt_dist *d) {
    if (!d) return;
#ifdef GOPT_HAVE_MPI
    if (d->mpi) MPI_Finalize();
#endif
    free(d);
}

void gopt_dist_abort(gopt_dist *d, int code) {
#ifdef GOPT_HAVE_MPI
    if (d && d->mpi && d->size > 1) MPI_Abort(MPI_COMM_WORLD, code);
#else
    (void)d;
    (void)code;
#endif
}

int gopt_dist_rank(const gopt_dist *d) { return d ? d->rank : 0; }
int gopt_dist_size(const gopt_dist *d) { return d ? d->size : 1; }

gopt_status gopt_dist_allgatherv(gopt_dist *d, const void *send, size_t bytes, void *recv, const size_t *counts,
                                 gopt_error *err) {
    if (!d || d->size == 1) {
        if (bytes) memcpy(recv, send, bytes);
        return GOPT_OK;
    }
    if (counts[d->rank] != bytes)
        return gopt_error_set(err, GOPT_EINTERNAL, "dist: rank %d sends %zu bytes, the counts say %zu", d->rank,
                              bytes, counts[d->rank]);
    if (d->fn) return d->fn(d->ctx, send, bytes, recv, counts, err);
#ifdef GOPT_HAVE_MPI
    int *cnt = malloc(sizeof(int) * 2 * (size_t)d->size);
    if (!cnt) return gopt_error_set(err, GOPT_ENOMEM, "dist: out of memory");
    int *disp = cnt + d->size;
    size_t total = 0;
    for (int r = 0; r < d->size; r++) {
        if (counts[r] > (size_t)INT_MAX || total > (size_t)INT_MAX - counts[r]) {
            free(cnt);
            return gopt_error_set(err, GOPT_EUNSUP, "dist: a gather of %zu+ bytes exceeds MPI's int counts",
                                  total + counts[r]);
        }
        cnt[r] = (int)counts[r];
        disp[r] = (int)total;
        total += counts[r];
    }
    /* MPI wants a valid pointer even for an empty block */
    static const char none = 0;
    int rc = MPI_Allgatherv(bytes ? send : &none, (int)bytes, MPI_BYTE, recv, cnt, disp, MPI_BYTE, MPI_COMM_WORLD);
    free(cnt);
    if (rc != MPI_SUCCESS) return gopt_error_set(err, GOPT_EIO, "dist: MPI_Allgatherv failed (code %d)", rc);
    return GOPT_OK;
#else
    return gopt_error_set(err, GOPT_EINTERNAL, "dist: %d ranks without a transport", d->size);
#endif
}

gopt_status gopt_dist_bcast(gopt_dist *d, void *buf, size_t bytes, int root, gopt_error *err) {
    int size = gopt_dist_size(d), rank = gopt_dist_rank(d);
    if (size == 1 || bytes == 0) return GOPT_OK;
    size_t *counts = calloc((size_t)size, sizeof *counts);
    void *tmp = malloc(bytes);
    if (!counts || !tmp) {
        free(counts);
        free(tmp);
        return gopt_error_set(err, GOPT_ENOMEM, "dist: out of memory");
    }
    counts[root] = bytes;
    gopt_status st = gopt_dist_allgatherv(d, buf, rank == root ? bytes : 0, tmp, counts, err);
    if (!st) memcpy(buf, tmp, bytes);
    free(counts);
    free(tmp);
    return st;
}

gopt_status gopt_dist_any(gopt_dist *d, int flag, int *any, gopt_error *err) {
    int size = gopt_dist_size(d);
    *any = flag != 0;
    if (size == 1) return GOPT_OK;
    size_t *counts = calloc((size_t)size, sizeof *counts);
    unsigned char *all = malloc((size_t)size), mine = flag != 0;
    if (!counts || !all) {
        free(counts);
        free(all);
        return gopt_error_set(err, GOPT_ENOMEM, "dist: out of memory");
    }
    for (int r = 0; r < size; r++) counts[r] = 1;
    gopt_status st = gopt_dist_allgatherv(d, &mine, 1, all, counts, err);
    if (!st)
        for (int r = 0; r < size; r++) *any |= all[r] != 0;
    free(counts);
    free(all);
    return st;
}

gopt_status gopt_dist_check_same(gopt_dist *d, uint64_t value, const char *what, gopt_error *err) {
    int size = gopt_dist_size(d);
    if (size == 1) return GOPT_OK;
    size_t *counts = calloc((size_t)size, sizeof *counts);
    uint64_t *all = malloc(sizeof *all * (size_t)size);
    gopt_status st = GOPT_OK;
    if (!counts || !all) {
        st = gopt_error_set(err, GOPT_ENOMEM, "dist: out of memory");
        goto out;
    }
    for (int r = 0; r < size; r++) counts[r] = sizeof(uint64_t);
    if ((st = gopt_dist_allgatherv(d, &value, sizeof value, all, counts, err))) goto out;
    for (int r = 1; r < size; r++)
        if (all[r] != all[0]) {
            st = gopt_error_set(err, GOPT_EINVAL,
                                "rank %d's %s (%016llx) differs from rank 0's (%016llx): every rank must read the "
                                "same files with the same options and the same build",
                                r, what, (unsigned long long)all[r], (unsigned long long)all[0]);
            break;
        }
out:
    free(counts);
    free(all);
    return st;
}
