/* calib_cpu.c: measure this machine's CPU into a profile (gopt profile
 * calibrate --backend cpu).
 *
 * Devices are core groups: the online cores split into ndev equal groups
 * (one per core by default). The groups are identical, so every measurement
 * runs once on the calling thread with OpenBLAS limited to one group's
 * cores, and all devices share the resulting tables. Phases, each with a
 * share of the time budget (a phase stops early when its share is spent,
 * keeping what it measured, at least MIN_POINTS rows):
 *   1. thread hand-off latency (mutex + condition variable ping-pong)
 *   2. launch overhead (the median of single calls of the smallest kernel, each timed
 *      alone between two readings of the kernel clock: dispatch_overhead)
 *   3. elementwise table  c = a + b over sizes (bytes read + written), on data out of the
 *      caches (each call at a new place in the buffers: rotate); the
 *      memory bandwidth is its rate on arrays far beyond the caches
 *   4. reduction table    sum(a) over sizes (bytes read)
 *   5. copy table         hand-off + memcpy between two buffers (link)
 *   6. GEMM table         cblas_sgemm over random (m, n, k), log-uniform
 * Sizes and shapes are drawn from the seed (stratified log-uniform, so
 * points fall between any fixed grid). A shared machine changes speed over
 * time, so every point is timed once per round over several interleaved
 * rounds (each a batch of calls lasting ~MIN_BATCH_S) and keeps its fastest
 * round: contention only adds time, so the minimum is what an unshared core
 * does, and it is reproducible from run to run.
 * Cost: at most about the budget (default 60 s; ~30 s on 2 cores);
 * memory: about 200 MB of buffers, up to 768 MB for a workload's large GEMM operands.
 */
#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "profile_internal.h"

void openblas_set_num_threads(int num_threads); /* declared by OpenBLAS's cblas.h on some versions only */

#define MIN_BATCH_S 2e-4
#define MIN_POINTS 4
#define MAX_ELEM_BYTES (192.0 * 1024 * 1024)
#define MAX_RED_BYTES (64.0 * 1024 * 1024)
#define MAX_COPY_BYTES (64.0 * 1024 * 1024)
#define GEMM_MIN_DIM 8
#define GEMM_MAX_DIM 4096
#define GEMM_MAX_FLOPS 2e9
#define GEMM_MAX_POINTS 1500
#define GEMM_MAX_WORKLOAD_FLOPS 2e10 /* a workload's own shape: at most ~0.2 s a call here */
#define GEMM_WORKLOAD_MAX_FLOATS (64.0 * 1024 * 1024) /* and operands of at most 256 MB each */

typedef struct calib {
    const gopt_calib_options *o;
    double budget, t0, done_frac; /* fraction of the whole at the current phase's start */
    double phase_frac, phase_t0, phase_budget;
    const char *phase;
    gopt_rng rng;
    float *a, *b, *c; /* scratch, each MAX_ELEM_BYTES / 3 + room */
    size_t cap;       /* floats per scratch buffer the tables use */
    size_t gcap;      /* floats per scratch buffer, >= cap: room for the workload's GEMM operands */
    void (*fn)(struct calib *k, size_t n); /* the kernel batch_1d times */
    int rounds_used;  /* fewest rounds any table got (for the description) */
    int n_workload;   /* GEMM rows from o->gemm_shapes (for the description) */
    int thread_clock; /* time kernels by thread CPU time (one core per device) */
    size_t rot;       /* floats: where the next 1-D kernel call starts in the buffers (rotate) */
} calib;

static void progress(calib *k, double within) {
    if (!k->o->progress) return;
    double el = (gopt_now_seconds() - k->phase_t0) / k->phase_budget;
    if (el > within) within = el;
    if (within > 1) within = 1;
    k->o->progress(k->o->progress_ctx, k->done_frac + k->phase_frac * within, k->phase);
}

static void phase_begin(calib *k, const char *what, double frac) {
    k->phase = what;
    k->phase_frac = frac;
    k->phase_t0 = gopt_now_seconds();
    k->phase_budget = frac * k->budget;
    progress(k, 0);
}

static void phase_end(calib *k) {
    progress(k, 1);
    k->done_frac += k->phase_frac;
}


/* The clock kernels are timed with: the calling thread's CPU time when a
 * device is one core (OpenBLAS then runs on this thread alone), so that time
 * the scheduler gives to other processes is not counted; wall time for
 * multi-core groups, whose worker threads this thread's clock would miss. */
static double kernel_clock(const calib *k) {
    if (k->thread_clock) {
        struct timespec ts;
        if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0) return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    }
    return gopt_now_seconds();
}

/* ---- kernels (noinline through pointers so each call is a real call) ---------------- */
typedef void (*kernel_fn)(calib *k, size_t n);
static volatile float sink;

/* Where a call of n floats runs: each call moves on past the previous one's arrays (wrapping at
 * the buffers' end), so that a kernel reads data that is not in the caches, as a training step's
 * kernels do (a tensor is written once and read a few kernels later, after other tensors have
 * gone through the caches). Measured on hot, reused buffers the table came out 2-2.7x faster
 * than the runtime's kernels on tensors of 0.5-4 MB. */
static size_t rotate(calib *k, size_t n) {
    size_t at = k->rot;
    if (at + n > k->cap) at = 0; /* an n over cap (a workload's GEMM, gcap) starts at 0 */
    k->rot = at + ((n + 15) & ~(size_t)15);
    return at;
}

static void k_add(calib *k, size_t n) {
    size_t o = rotate(k, n);
    float *restrict a = k->a + o, *restrict b = k->b + o, *restrict c = k->c + o;
    for (size_t i = 0; i < n; i++) c[i] = a[i] + b[i];
}
static void k_sum(calib *k, size_t n) {
    /* by lane, as the runtime's reduction is (runtime/kernels.c): independent sums vectorize
     * without reassociating a float sum */
    const float *restrict a = k->a + rotate(k, n);
    float lane[16] = {0}, s = 0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) lane[l] += a[i + l];
    for (; i < n; i++) s += a[i];
    for (int l = 0; l < 16; l++) s += lane[l];
    sink = s;
}
/* A copy between core groups reads a tensor another core wrote (in that core's caches, or
 * memory) into a buffer of the receiver's: out of this core's caches, as rotate gives. From hot
 * buffers the table came out at half the runtime's copy times on inception-v3's 417 copies. */
static void k_copy(calib *k, size_t n) {
    size_t o = rotate(k, n);
    memcpy(k->c + o, k->a + o, n * sizeof(float));
}

static int cmp_double(const void *x, const void *y) {
    double u = *(const double *)x, v = *(const double *)y;
    return (u > v) - (u < v);
}

/* The launch overhead of a CPU kernel: what an executor that runs and times kernels one by one
 * pays per kernel besides its work. Each of DISPATCH_CALLS calls of the smallest kernel (16
 * floats, at a new place each time: rotate) is timed alone between two readings of the kernel
 * clock, and the median kept. On a one-core device the clock is the thread's CPU time, a system
 * call (about 0.65 us in this project's KVM guest): that is in every kernel time the runtime
 * measures, as a framework's per-op dispatch (several us in PyTorch eager) is in its step. Timed
 * in a batch instead, the call alone came out at 4 ns, and a step of 1000 small kernels was
 * simulated milliseconds short. */
#define DISPATCH_CALLS 4001
static double dispatch_overhead(calib *k) {
    double v[DISPATCH_CALLS];
    for (int r = 0; r < DISPATCH_CALLS; r++) {
        double t = kernel_clock(k);
        k_add(k, 16);
        v[r] = kernel_clock(k) - t;
    }
    qsort(v, DISPATCH_CALLS, sizeof v[0], cmp_double);
    return v[DISPATCH_CALLS / 2] > 0 ? v[DISPATCH_CALLS / 2] : 1e-9;
}

/* ---- hand-off latency ------------------------------------------------------------------ */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    long turn, rounds;
} pingpong;

static void *pong(void *arg) {
    pingpong *p = arg;
    pthread_mutex_lock(&p->mu);
    for (long i = 0; i < p->rounds; i++) {
        while (p->turn % 2 == 0) pthread_cond_wait(&p->cv, &p->mu);
        p->turn++;
        pthread_cond_signal(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* Seconds for one hand-off of work from one thread to another: half the median round trip
 * (each timed alone; the mean, on a machine shared with other jobs, carried their time slices:
 * 10 us on a quiet afternoon, 70 us at a load average of 12). */
static gopt_status handoff_latency(long rounds, double *out, gopt_error *err) {
    pingpong p = {.turn = 0, .rounds = rounds};
    double *trip = gopt_malloc((size_t)rounds * sizeof(double), err);
    if (!trip) return GOPT_ENOMEM;
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.cv, NULL);
    pthread_t th;
    if (pthread_create(&th, NULL, pong, &p) != 0) {
        pthread_mutex_destroy(&p.mu);
        pthread_cond_destroy(&p.cv);
        free(trip);
        return gopt_error_set(err, GOPT_EINTERNAL, "calibrate: could not start a thread for the hand-off test");
    }
    pthread_mutex_lock(&p.mu);
    for (long i = 0; i < rounds; i++) {
        double t = gopt_now_seconds();
        p.turn++;
        pthread_cond_signal(&p.cv);
        while (p.turn % 2 == 1) pthread_cond_wait(&p.cv, &p.mu);
        trip[i] = gopt_now_seconds() - t;
    }
    pthread_mutex_unlock(&p.mu);
    pthread_join(th, NULL);
    pthread_mutex_destroy(&p.mu);
    pthread_cond_destroy(&p.cv);
    qsort(trip, (size_t)rounds, sizeof(double), cmp_double);
    *out = trip[rounds / 2] / 2.0;
    free(trip);
    return GOPT_OK;
}

/* ---- tables ----------------------------------------------------------------------------- */
/* Stratified log-uniform sizes in [lo, hi] bytes, rounded to whole floats. */
static void draw_sizes(calib *k, double lo, double hi, int n, double *out) {
    double a = log(lo), w = (log(hi) - a) / n;
    for (int i = 0; i < n; i++) {
        double b = exp(a + w * (i + gopt_rng_uniform(&k->rng)));
        out[i] = b;
    }
}

/* ---- interleaved measurement ----------------------------------------------------------
 * On a shared machine the speed of a core changes over time (other processes,
 * frequency). Timing each point in one burst makes whole points fast or slow;
 * instead every point is timed once per round, over several rounds spread
 * across the phase, and its time is the fastest round's. */
typedef double (*batch_fn)(calib *k, const double *item, long reps); /* seconds per call */

static double batch_1d(calib *k, const double *item, long reps) {
    kernel_fn fn = k->fn;
    size_t n = (size_t)item[0];
    double t = kernel_clock(k);
    for (long r = 0; r < reps; r++) fn(k, n);
    return (kernel_clock(k) - t) / (double)reps;
}

/* C(m,n) = A(m,k) B(k,n), row-major, no transposes. B, the weight, is read where the previous
 * call's ended (rotate), as a step reads a weight last touched in the previous step; A and C, the
 * activation just produced and the output, stay put. On the same B call after call, a weight
 * that fits the L3 cache stayed there: a batch-one convolution's sgemm (8 x 512 x 4608, a 9.4 MB
 * weight) came out 1.5x faster than on the runtime's weight buffer. */
static double batch_gemm(calib *k, const double *item, long reps) {
    int m = (int)item[0], n = (int)item[1], kk = (int)item[2];
    double t = kernel_clock(k);
    for (long r = 0; r < reps; r++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, kk, 1.0f, k->a, kk,
                    k->b + rotate(k, (size_t)kk * (size_t)n), n, 0.0f, k->c, n);
    return (kernel_clock(k) - t) / (double)reps;
}

#define MAX_ROUNDS 9

/* items: (*nitems, w) coordinates; out: (*nitems) seconds per call, the
 * fastest round's (other processes only ever add time; the minimum over
 * rounds is the reproducible figure of an unshared core).
 * The first pass (warm-up, reps per item) may cut *nitems when it alone
 * uses a third of the phase; rounds are as many as the rest of the phase
 * allows (at least 1, at most MAX_ROUNDS). */
static gopt_status measure_interleaved(calib *k, const double *items, int *nitems, int w, batch_fn fn, double *out,
                                       gopt_error *err) {
    int n = *nitems;
    long *reps = gopt_malloc((size_t)n * sizeof(long), err);
    double *v = gopt_malloc((size_t)n * MAX_ROUNDS * sizeof(double), err);
    int *order = gopt_malloc((size_t)n * sizeof(int), err);
    if (!reps || !v || !order) {
        free(reps);
        free(v);
        free(order);
        return GOPT_ENOMEM;
    }
    double round_cost = 0;
    int m = 0;
    for (int i = 0; i < n; i++) {
        fn(k, items + (size_t)i * w, 1);
        double one = fn(k, items + (size_t)i * w, 1);
        reps[i] = one > 0 ? (long)(MIN_BATCH_S / one) + 1 : 1000;
        if (reps[i] > 100000) reps[i] = 100000;
        round_cost += (double)reps[i] * one;
        m++;
        progress(k, 0.3 * m / n);
        if (m >= MIN_POINTS * 2 && gopt_now_seconds() - k->phase_t0 > k->phase_budget / 3) break;
    }
    n = *nitems = m;
    double left = k->phase_budget - (gopt_now_seconds() - k->phase_t0);
    int rounds = round_cost > 0 ? (int)(left / (round_cost * 1.15)) : MAX_ROUNDS;
    if (rounds < 1) rounds = 1;
    if (rounds > MAX_ROUNDS) rounds = MAX_ROUNDS;
    if (k->rounds_used == 0 || rounds < k->rounds_used) k->rounds_used = rounds;
    for (int i = 0; i < n; i++) order[i] = i;
    for (int r = 0; r < rounds; r++) {
        for (int i = n - 1; i > 0; i--) {
            int j = (int)gopt_rng_below(&k->rng, (uint64_t)i + 1), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        for (int j = 0; j < n; j++) {
            int i = order[j];
            v[(size_t)i * MAX_ROUNDS + r] = fn(k, items + (size_t)i * w, reps[i]);
        }
        progress(k, 0.3 + 0.7 * (r + 1) / rounds);
    }
    for (int i = 0; i < n; i++) {
        qsort(v + (size_t)i * MAX_ROUNDS, (size_t)rounds, sizeof(double), cmp_double);
        out[i] = v[(size_t)i * MAX_ROUNDS]; /* the fastest round: contention only ever adds time */
    }
    free(reps);
    free(v);
    free(order);
    return GOPT_OK;
}

/* Measure a one-dimensional table: bytes = per_float * n floats, n drawn
 * stratified log-uniform in [lo, hi] bytes; extra_s is added to each time. */
static gopt_status measure_1d(calib *k, kernel_fn fn, double per_float, double lo, double hi, int npts,
                              double extra_s, double **rows, int32_t *nrows, gopt_error *err) {
    double *sz = gopt_malloc((size_t)npts * sizeof(double), err);
    double *t = gopt_malloc((size_t)npts * sizeof(double), err);
    double *r = gopt_malloc((size_t)npts * 2 * sizeof(double), err);
    gopt_status st = GOPT_ENOMEM;
    if (!sz || !t || !r) goto out;
    draw_sizes(k, lo, hi, npts, sz);
    /* Shuffled, so that a first pass cut short still spans the range. */
    for (int i = npts - 1; i > 0; i--) {
        int j = (int)gopt_rng_below(&k->rng, (uint64_t)i + 1);
        double x = sz[i];
        sz[i] = sz[j];
        sz[j] = x;
    }
    for (int i = 0; i < npts; i++) {
        double n = floor(sz[i] / per_float);
        if (n < 1) n = 1;
        if (n > (double)k->cap) n = (double)k->cap;
        sz[i] = n;
    }
    k->fn = fn;
    int m = npts;
    if ((st = measure_interleaved(k, sz, &m, 1, batch_1d, t, err))) goto out;
    for (int i = 0; i < m; i++) {
        r[2 * i] = sz[i] * per_float;
        r[2 * i + 1] = t[i] + extra_s;
    }
    *rows = r;
    *nrows = m;
    r = NULL;
out:
    free(sz);
    free(t);
    free(r);
    return st;
}

static int draw_dim(calib *k) {
    double l = log(GEMM_MIN_DIM) + gopt_rng_uniform(&k->rng) * (log(GEMM_MAX_DIM) - log(GEMM_MIN_DIM));
    return (int)floor(exp(l) + 0.5);
}

static int gemm_in_limits(double a, double b, double c, double max_flops) {
    return a >= 1 && b >= 1 && c >= 1 && 2.0 * a * b * c <= max_flops;
}

static int gemm_fits(const calib *k, double a, double b, double c, double max_flops) {
    return gemm_in_limits(a, b, c, max_flops) && a * c <= (double)k->gcap && c * b <= (double)k->gcap &&
           a * b <= (double)k->gcap;
}

/* The workload's shapes first (o->gemm_shapes), then GEMM_MAX_POINTS random ones. */
static gopt_status measure_gemm(calib *k, double **rows, int32_t *nrows, double *peak, gopt_error *err) {
    const int32_t nw = k->o->gemm_shapes ? k->o->n_gemm_shapes : 0;
    const size_t cap = (size_t)GEMM_MAX_POINTS + (size_t)(nw > 0 ? nw : 0);
    double *it = gopt_malloc(cap * 3 * sizeof(double), err);
    double *t = gopt_malloc(cap * sizeof(double), err);
    double *r = gopt_malloc(cap * 4 * sizeof(double), err);
    gopt_status st = GOPT_ENOMEM;
    if (!it || !t || !r) goto out;
    int m = 0, skipped = 0;
    for (int32_t i = 0; i < nw; i++) {
        const double *w = k->o->gemm_shapes + 3 * (size_t)i;
        if (!gemm_fits(k, w[0], w[1], w[2], GEMM_MAX_WORKLOAD_FLOPS)) {
            skipped++;
            continue;
        }
        memcpy(it + 3 * (size_t)m++, w, 3 * sizeof(double));
    }
    if (k->o->n_gemm_shapes_skipped) *k->o->n_gemm_shapes_skipped = skipped;
    k->n_workload = m;
    while (m < (int)cap - skipped) {
        int a = draw_dim(k), b = draw_dim(k), c = draw_dim(k);
        if (!gemm_fits(k, a, b, c, GEMM_MAX_FLOPS)) continue; /* rejection keeps the other dims log-uniform */
        it[3 * m] = a;
        it[3 * m + 1] = b;
        it[3 * m + 2] = c;
        m++;
    }
    if ((st = measure_interleaved(k, it, &m, 3, batch_gemm, t, err))) goto out;
    *peak = 0;
    for (int i = 0; i < m; i++) {
        memcpy(r + 4 * i, it + 3 * i, 3 * sizeof(double));
        r[4 * i + 3] = t[i];
        double rate = 2 * it[3 * i] * it[3 * i + 1] * it[3 * i + 2] / t[i];
        if (rate > *peak) *peak = rate;
    }
    *rows = r;
    *nrows = m;
    r = NULL;
out:
    free(it);
    free(t);
    free(r);
    return st;
}

/* Memory bandwidth: the median rate of the (up to) five largest elementwise
 * points, whose arrays are far beyond the caches. Taken from the table
 * (interleaved medians) rather than one burst, which a busy machine skews. */
static double memory_bandwidth(const double *rows, int32_t n) {
    double best[5][2] = {{0, 0}};
    int nb = 0;
    for (int32_t i = 0; i < n; i++) {
        int j = nb < 5 ? nb++ : 4;
        if (nb == 5 && j == 4 && rows[2 * i] <= best[4][0]) continue;
        while (j > 0 && best[j - 1][0] < rows[2 * i]) {
            best[j][0] = best[j - 1][0];
            best[j][1] = best[j - 1][1];
            j--;
        }
        best[j][0] = rows[2 * i];
        best[j][1] = rows[2 * i + 1];
    }
    double rate[5];
    for (int i = 0; i < nb; i++) rate[i] = best[i][0] / best[i][1];
    qsort(rate, (size_t)nb, sizeof rate[0], cmp_double);
    return nb ? rate[nb / 2] : 1e9;
}

/* ---- shared memory bandwidth ------------------------------------------------------------
 * The core groups share one memory bus. Each round, first one thread streams `c = a + b` alone,
 * then a thread per group streams at once, each over its own part of the buffers (arrays far
 * beyond the caches), in chunks of BUS_CHUNK floats, each chunk timed by the wall clock and the
 * thread's CPU time. A chunk counts only when its thread ran through it (CPU time >= 90% of its
 * wall time) and, for the concurrent part, when every other thread ran >= 90% of that interval
 * too: on a machine shared with other jobs the threads are often not running together, and
 * timing whole passes (wall or CPU) then measured the other jobs (8 GB/s for two cores against
 * 15 GB/s for one) or no sharing at all. The round's slowdown is the threads' mean rate over
 * such chunks against the lone thread's, the bus `ndev x bandwidth x that ratio` (bandwidth: the
 * device's memory_bandwidth, from the elementwise table); the median of the rounds that had
 * chunks enough is kept, 0 (no bus: the simulator shares nothing) when none had. Under `nice`
 * on a loaded machine the threads hardly ever run together and no round counts: calibrate at
 * normal priority (about one round in two counted at a load average of 10 on 2 cores). */
#define SHARED_ROUNDS 15
#define BUS_CHUNK (256 * 1024)
#define BUS_PASSES 2
#define BUS_MIN_CHUNKS 4
typedef struct {
    float *a, *b, *c;
    size_t n;
    int nch;
    double *t0, *t1, *cpu; /* (chunks) */
} bus_arg;

static double thread_cpu_now(void) {
    struct timespec ts;
    return clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0 ? (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec : 0;
}

static void *bus_stream(void *arg) {
    bus_arg *x = arg;
    int j = 0;
    for (int r = 0; r < BUS_PASSES; r++)
        for (size_t o = 0; o + BUS_CHUNK <= x->n && j < x->nch; o += BUS_CHUNK, j++) {
            float *restrict a = x->a + o, *restrict b = x->b + o, *restrict c = x->c + o;
            x->t0[j] = gopt_now_seconds();
            double c0 = thread_cpu_now();
            for (size_t i = 0; i < BUS_CHUNK; i++) c[i] = a[i] + b[i];
            x->cpu[j] = thread_cpu_now() - c0;
            x->t1[j] = gopt_now_seconds();
        }
    x->nch = j;
    return NULL;
}

/* Fraction of [t0, t1] thread x was running (its chunks' CPU share over their overlap). */
static double running_share(const bus_arg *x, double t0, double t1) {
    double on = 0;
    for (int j = 0; j < x->nch; j++) {
        double lo = x->t0[j] > t0 ? x->t0[j] : t0, hi = x->t1[j] < t1 ? x->t1[j] : t1, w = x->t1[j] - x->t0[j];
        if (hi > lo && w > 0) on += (hi - lo) * (x->cpu[j] < w ? x->cpu[j] / w : 1);
    }
    return t1 > t0 ? on / (t1 - t0) : 0;
}

/* Bytes per CPU second over thread x's chunks that ran through, and (concurrent) while every
 * other thread of xs ran; 0 when fewer than BUS_MIN_CHUNKS count. */
static double clean_rate(const bus_arg *xs, int nx, int self) {
    const bus_arg *x = &xs[self];
    double bytes = 0, cpu = 0;
    int used = 0;
    for (int j = 0; j < x->nch; j++) {
        double w = x->t1[j] - x->t0[j];
        if (w <= 0 || x->cpu[j] < 0.9 * w) continue;
        int all = 1;
        for (int e = 0; e < nx && all; e++)
            if (e != self && running_share(&xs[e], x->t0[j], x->t1[j]) < 0.9) all = 0;
        if (!all) continue;
        bytes += 12.0 * BUS_CHUNK;
        cpu += x->cpu[j];
        used++;
    }
    return used >= BUS_MIN_CHUNKS && cpu > 0 ? bytes / cpu : 0;
}

static gopt_status shared_bandwidth(calib *k, int ndev, double bw, double *out, gopt_error *err) {
    *out = 0;
    if (ndev < 2) return GOPT_OK;
    pthread_t th[GOPT_PROFILE_MAX_DEVICES];
    bus_arg args[GOPT_PROFILE_MAX_DEVICES];
    double ratio[SHARED_ROUNDS];
    int nr = 0;
    size_t n = k->cap / (size_t)ndev;
    int nch = BUS_PASSES * (int)(n / BUS_CHUNK);
    if (nch < BUS_MIN_CHUNKS) return GOPT_OK;
    double *mem = gopt_malloc((size_t)ndev * 3 * (size_t)nch * sizeof(double), err);
    if (!mem) return GOPT_ENOMEM;
    gopt_status st = GOPT_OK;
    for (int d = 0; d < ndev; d++) {
        size_t o = (size_t)d * n;
        double *m = mem + (size_t)d * 3 * (size_t)nch;
        args[d] = (bus_arg){k->a + o, k->b + o, k->c + o, n, nch, m, m + nch, m + 2 * nch};
    }
    for (int r = 0; r < SHARED_ROUNDS; r++) {
        args[0].nch = nch;
        bus_stream(&args[0]); /* alone */
        double solo = clean_rate(args, 1, 0);
        int started = 0;
        for (int d = 0; d < ndev; d++) {
            args[d].nch = nch;
            if (pthread_create(&th[d], NULL, bus_stream, &args[d])) break;
            started++;
        }
        for (int d = 0; d < started; d++) pthread_join(th[d], NULL);
        if (started < ndev) {
            st = gopt_error_set(err, GOPT_ENOMEM, "calibrate: cannot start thread %d of %d", started + 1, ndev);
            break;
        }
        double sum = 0;
        int ok = solo > 0;
        for (int d = 0; d < ndev && ok; d++) {
            double rate = clean_rate(args, ndev, d);
            ok = rate > 0;
            sum += rate;
        }
        if (ok) {
            double q = sum / ndev / solo;
            ratio[nr++] = q < 1 ? q : 1;
        }
        progress(k, (r + 1.0) / SHARED_ROUNDS);
    }
    free(mem);
    if (st || nr == 0) return st;
    qsort(ratio, (size_t)nr, sizeof ratio[0], cmp_double);
    *out = ndev * bw * ratio[nr / 2];
    return GOPT_OK;
}

/* ---- provenance ------------------------------------------------------------------------- */
static void cpu_model(char *out, size_t n) {
    snprintf(out, n, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *c = strchr(line, ':');
            if (c) {
                c++;
                while (*c == ' ') c++;
                c[strcspn(c, "\n")] = 0;
                snprintf(out, n, "%s", c);
            }
            break;
        }
    }
    fclose(f);
}

gopt_status gopt_calibrate_cpu(const gopt_calib_options *o, gopt_profile **out, gopt_error *err) {
    *out = NULL;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) cores = 1;
    int ndev = o->ndev > 0 ? o->ndev : (int)cores;
    if (ndev > cores)
        return gopt_error_set(err, GOPT_EINVAL, "calibrate: --devices %d is more than the %ld online cores", ndev, cores);
    int per = (int)(cores / ndev);
    calib k = {0};
    k.o = o;
    k.budget = o->budget_s > 0 ? o->budget_s : 60.0;
    k.t0 = gopt_now_seconds();
    gopt_rng_seed(&k.rng, o->seed);
    k.cap = (size_t)(MAX_ELEM_BYTES / 3 / sizeof(float)) + 1024;
    if (k.cap < (size_t)(MAX_RED_BYTES / sizeof(float))) k.cap = (size_t)(MAX_RED_BYTES / sizeof(float));
    k.gcap = k.cap;
    for (int32_t i = 0; o->gemm_shapes && i < o->n_gemm_shapes; i++) { /* the workload's operands, up to 256 MB */
        const double *w = o->gemm_shapes + 3 * (size_t)i;
        if (!gemm_in_limits(w[0], w[1], w[2], GEMM_MAX_WORKLOAD_FLOPS)) continue; /* skipped by measure_gemm: no room */
        const double need[3] = {w[0] * w[2], w[2] * w[1], w[0] * w[1]};
        for (int j = 0; j < 3; j++)
            if (need[j] > (double)k.gcap && need[j] <= GEMM_WORKLOAD_MAX_FLOATS) k.gcap = (size_t)need[j];
    }
    gopt_profile *p = NULL;
    double *elem = NULL, *red = NULL, *copy = NULL, *gemm = NULL;
    int32_t nelem = 0, nred = 0, ncopy = 0, ngemm = 0;
    gopt_status st = GOPT_ENOMEM;
    int blas_threads = 0; /* the caller's OpenBLAS thread count, restored at the end */
    k.a = malloc(k.gcap * sizeof(float));
    k.b = malloc(k.gcap * sizeof(float));
    k.c = malloc(k.gcap * sizeof(float));
    if (!k.a || !k.b || !k.c) {
        st = gopt_error_set(err, GOPT_ENOMEM, "calibrate: cannot allocate %zu MB of buffers",
                            3 * k.gcap * sizeof(float) >> 20);
        goto out;
    }
    for (size_t i = 0; i < k.gcap; i++) {
        k.a[i] = (float)(i % 7) * 0.25f;
        k.b[i] = (float)(i % 5) * 0.5f;
        k.c[i] = 0;
    }
    blas_threads = openblas_get_num_threads();
    openblas_set_num_threads(per);
    k.thread_clock = per == 1;

    double latency = 0, launch = 0, bw = 0, peak = 0;
    phase_begin(&k, "thread hand-off latency", 0.02);
    if ((st = handoff_latency(4000, &latency, err))) goto out;
    phase_end(&k);

    phase_begin(&k, "launch overhead", 0.01);
    launch = dispatch_overhead(&k);
    phase_end(&k);

    phase_begin(&k, "elementwise kernels", 0.19);
    if ((st = measure_1d(&k, k_add, 12.0, 1024, MAX_ELEM_BYTES, 48, 0, &elem, &nelem, err))) goto out;
    phase_end(&k);
    bw = memory_bandwidth(elem, nelem);

    double bus = 0;
    phase_begin(&k, "memory bus, all groups at once", 0.02);
    if ((st = shared_bandwidth(&k, ndev, bw, &bus, err))) goto out;
    phase_end(&k);

    phase_begin(&k, "reduction kernels", 0.08);
    if ((st = measure_1d(&k, k_sum, 4.0, 1024, MAX_RED_BYTES, 40, 0, &red, &nred, err))) goto out;
    phase_end(&k);

    phase_begin(&k, "copies between core groups", 0.08);
    if ((st = measure_1d(&k, k_copy, 4.0, 256, MAX_COPY_BYTES, 36, latency, &copy, &ncopy, err))) goto out;
    phase_end(&k);

    phase_begin(&k, "sgemm shapes", 1.0 - k.done_frac);
    if ((st = measure_gemm(&k, &gemm, &ngemm, &peak, err))) goto out;
    phase_end(&k);

    /* Link bandwidth: the largest copies, bytes per second beyond the latency. */
    double big = 0, bigt = 0;
    for (int32_t i = 0; i < ncopy; i++)
        if (copy[2 * i] > big) {
            big = copy[2 * i];
            bigt = copy[2 * i + 1];
        }
    double link_bw = bigt > latency ? big / (bigt - latency) : bw;

    if ((st = gopt_profile_alloc(ndev, 1, &p, err))) goto out;
    char model[256], machine[512], date[64], desc[768];
    cpu_model(model, sizeof model);
    struct utsname u;
    if (uname(&u) != 0) memset(&u, 0, sizeof u);
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    double ram = pages > 0 && psz > 0 ? (double)pages * (double)psz : 0;
    snprintf(machine, sizeof machine, "%s, %ld cores, %.1f GiB RAM, %s %s %s", model, cores, ram / (1 << 30), u.sysname,
             u.release, u.machine);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(desc, sizeof desc,
             "%d core group(s) of %d core(s) each on %s; MEASURED by the CPU calibrator (OpenBLAS sgemm, "
             "elementwise/reduction kernels, memcpy, thread hand-off; kernels timed by %s, fastest of %d rounds) in "
             "%.0f s%s",
             ndev, per, model, k.thread_clock ? "thread CPU time" : "wall time", k.rounds_used,
             gopt_now_seconds() - k.t0, k.n_workload ? "; the GEMM table also holds the workload's own shapes" : "");
    p->name = gopt_profile_strdup(o->name ? o->name : "cpu-measured", err);
    p->description = gopt_profile_strdup(desc, err);
    p->source = gopt_profile_strdup("measured", err);
    p->machine = gopt_profile_strdup(machine, err);
    p->date = gopt_profile_strdup(date, err);
    p->command = gopt_profile_strdup(o->command ? o->command : "gopt profile calibrate --backend cpu", err);
    p->reference = gopt_profile_strdup("", err);
    p->topology = gopt_profile_strdup("shared_memory", err);
    p->topology_json = json_pack("{s:s, s:f, s:f, s:s}", "kind", "shared_memory", "bandwidth", link_bw, "latency",
                                 latency, "note",
                                 "core groups share memory: hand-off latency + memcpy bandwidth; memory_bandwidth: "
                                 "all groups streaming at once");
    if (p->topology_json && bus > 0) json_object_set_new(p->topology_json, "memory_bandwidth", json_real(bus));
    p->bus_bw = bus;
    p->sets[0].name = gopt_profile_strdup("cpu", err);
    if (!p->name || !p->description || !p->source || !p->machine || !p->date || !p->command || !p->reference ||
        !p->topology || !p->topology_json || !p->sets[0].name) {
        st = GOPT_ENOMEM;
        goto out;
    }
    p->sets[0].pts[GOPT_TABLE_GEMM] = gemm;
    p->sets[0].n[GOPT_TABLE_GEMM] = ngemm;
    p->sets[0].pts[GOPT_TABLE_ELEMENTWISE] = elem;
    p->sets[0].n[GOPT_TABLE_ELEMENTWISE] = nelem;
    p->sets[0].pts[GOPT_TABLE_REDUCTION] = red;
    p->sets[0].n[GOPT_TABLE_REDUCTION] = nred;
    p->sets[0].pts[GOPT_TABLE_COPY] = copy;
    p->sets[0].n[GOPT_TABLE_COPY] = ncopy;
    gemm = elem = red = copy = NULL;
    for (int d = 0; d < ndev; d++) {
        gopt_device *v = &p->dev[d];
        char nm[32], md[320];
        snprintf(nm, sizeof nm, "cpu%d", d);
        snprintf(md, sizeof md, "%s x%d cores", model, per);
        v->name = gopt_profile_strdup(nm, err);
        v->model = gopt_profile_strdup(md, err);
        if (!v->name || !v->model) {
            st = GOPT_ENOMEM;
            goto out;
        }
        v->kind = GOPT_DEVICE_CPU;
        v->memory = ram > 0 ? ram / ndev : 1e9;
        v->peak[GOPT_DTYPE_FP32] = peak;
        v->bandwidth = bw;
        v->launch = launch;
        v->tableset = 0;
        for (int e = 0; e < ndev; e++) {
            p->link_bw[d * ndev + e] = link_bw;
            p->link_lat[d * ndev + e] = latency;
            p->link_set[d * ndev + e] = e == d ? -1 : 0;
        }
    }
    if ((st = gopt_profile_check(p, "calibrated profile", err))) goto out;
    *out = p;
    p = NULL;
    st = GOPT_OK;
out:
    if (blas_threads > 0) openblas_set_num_threads(blas_threads);
    gopt_profile_free(p);
    free(gemm);
    free(elem);
    free(red);
    free(copy);
    free(k.a);
    free(k.b);
    free(k.c);
    return st;
}
