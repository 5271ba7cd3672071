/* batch.c: evaluate K decision sets on T threads.
 *
 * Each thread owns one scratch and takes the next unclaimed index from an
 * atomic counter (dynamic assignment balances a noisy machine). A result
 * depends only on its decision set (gopt_sim_run is deterministic and the
 * simulator is read-only), so the results equal a sequential loop's, bit for
 * bit, whatever the interleaving. Cost: K runs / T plus one thread start per
 * thread.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "sim_internal.h"

typedef struct {
    const gopt_sim *sim;
    const gopt_decisions *ds;
    gopt_sim_result *res;
    int k;
    atomic_int *next;
    gopt_sim_scratch *scratch;
    int fail_index; /* lowest failing index this thread saw, or k */
    gopt_status fail_status;
    gopt_error err;
} batch_worker;

static void *batch_main(void *arg) {
    batch_worker *w = arg;
    for (;;) {
        int j = atomic_fetch_add(w->next, 1);
        if (j >= w->k) break;
        gopt_error e = {0};
        gopt_status st = gopt_sim_run(w->sim, &w->ds[j], &w->res[j], w->scratch, &e);
        if (st != GOPT_OK && j < w->fail_index) {
            w->fail_index = j;
            w->fail_status = st;
            w->err = e;
        }
    }
    return NULL;
}

gopt_status gopt_sim_run_batch(const gopt_sim *sim, const gopt_decisions *ds, int k, gopt_sim_result *res,
                               gopt_sim_scratch *const *scratch, int nthreads, gopt_error *err) {
    if (nthreads < 1) return gopt_error_set(err, GOPT_EINVAL, "sim batch: %d threads (need at least 1)", nthreads);
    if (k < 0) return gopt_error_set(err, GOPT_EINVAL, "sim batch: %d decision sets", k);
    for (int t = 0; t < nthreads; t++)
        if (!scratch[t] || scratch[t]->sim != sim)
            return gopt_error_set(err, GOPT_EINVAL, "sim batch: scratch %d is missing or for another simulator", t);
    if (nthreads > k) nthreads = k > 0 ? k : 1;
    batch_worker *w = gopt_calloc((size_t)nthreads, sizeof *w, err);
    pthread_t *th = gopt_calloc((size_t)nthreads, sizeof *th, err);
    if (!w || !th) {
        free(w);
        free(th);
        return GOPT_ENOMEM;
    }
    atomic_int next;
    atomic_init(&next, 0);
    int started = 0;
    for (int t = 0; t < nthreads; t++) {
        w[t] = (batch_worker){sim, ds, res, k, &next, scratch[t], k, GOPT_OK, {0}};
        /* thread 0 is this thread; the others are started here */
        if (t > 0 && pthread_create(&th[t], NULL, batch_main, &w[t]) == 0) started = t;
        else if (t > 0) break;
    }
    batch_main(&w[0]);
    for (int t = 1; t <= started; t++) pthread_join(th[t], NULL);
    int worst = 0;
    for (int t = 1; t <= started; t++)
        if (w[t].fail_index < w[worst].fail_index) worst = t;
    gopt_status st = GOPT_OK;
    if (w[worst].fail_index < k) {
        st = w[worst].fail_status;
        if (err) *err = w[worst].err;
        gopt_error_prefix(err, "decision set %d", w[worst].fail_index);
    }
    free(w);
    free(th);
    return st;
}
