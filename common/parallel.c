/* parallel.c: static parts on a few threads (gopt_parallel_parts). */
#include <pthread.h>

#include "gopt_common.h"

#define PARALLEL_MAX_THREADS 64

typedef struct {
    void (*fn)(void *ctx, int part);
    void *ctx;
    int nparts, first, stride;
} parallel_worker;

static void *parallel_main(void *arg) {
    const parallel_worker *w = arg;
    for (int j = w->first; j < w->nparts; j += w->stride) w->fn(w->ctx, j);
    return NULL;
}

void gopt_parallel_parts(int nparts, int nthreads, void (*fn)(void *ctx, int part), void *ctx) {
    int T = nthreads < nparts ? nthreads : nparts;
    if (T > PARALLEL_MAX_THREADS) T = PARALLEL_MAX_THREADS;
    if (T < 1) T = 1;
    parallel_worker w[PARALLEL_MAX_THREADS];
    pthread_t th[PARALLEL_MAX_THREADS];
    int started[PARALLEL_MAX_THREADS] = {0};
    for (int t = 0; t < T; t++) w[t] = (parallel_worker){fn, ctx, nparts, t, T};
    for (int t = 1; t < T; t++) started[t] = pthread_create(&th[t], NULL, parallel_main, &w[t]) == 0;
    parallel_main(&w[0]);
    for (int t = 1; t < T; t++) {
        if (started[t]) pthread_join(th[t], NULL);
        else parallel_main(&w[t]);
    }
}
