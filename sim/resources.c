/* resources.c: how devices and links behave, and the event loop that drives them.
 *
 * Device: a binary min-heap of ready tasks keyed by (~priority, topological
 * rank) packed in one uint64, so the highest priority runs first and ties go
 * to the task earliest in topological order. Starting a task allocates its
 * external outputs; finishing it releases its inputs, hands each external
 * output to its local consumers and queues one transfer per other consuming
 * device. Each transfer record lists its consumer tasks (built in that same
 * pass over the out-edges), and each remote consumer edge learns (xref) which
 * record its consumer will release, so neither an arrival nor an unfused
 * consumer's end walks the producer's edges again.
 *
 * Link (FIFO): an array sorted by (time queued, producer's rank), packed in
 * one uint64 as (instant counter << 32 | rank): first in first out, ties at
 * one instant by topological rank. A new item is appended and moved back
 * only past the items queued at the same instant; the head is taken by
 * advancing an index. One transfer
 * at a time, each taking gopt_cost_transfer_time (latency + bytes/bandwidth
 * or the link's measured copy table). Starting a transfer allocates the copy
 * on the receiving device; finishing it releases the sender's hold and makes
 * the copy available to the consumers on the receiver.
 *
 * Events: each resource has at most one event, kept as a time in its own slot
 * of a flat array of doubles (+inf when idle) under levels of block minima
 * (blocks of 8; 8 devices: 64 slots, one summary of 8), so the earliest event
 * is found with vector minima, compare masks and trailing-zero counts, without
 * data-dependent branches, and setting a slot rewrites one minimum per level.
 * The events of an instant with several (equal times; the masks tell) are
 * taken out together and handled in sequence order, so the order is (time,
 * sequence). When an instant has a single event (the usual case with
 * real-valued times), the event is taken out and the next one among the others
 * chosen before it is handled (that choice then overlaps with the handling
 * instead of waiting for what it adds); the finished resource is offered its
 * next item first, then the resources its end touched, in order, without the
 * dirty list, and the next event is the earlier of the choice and the earliest
 * event they added. The ready heaps end in a sentinel item (a key after every
 * real one), so choosing a child needs no bound check. Frees subtract
 * size & -(count == 0) instead of branching. After each instant the data the
 * next event will read through its edges is prefetched (records when tasks
 * became ready or reached the top of their queue, edge slots when they
 * started): on graphs that do not fit in cache the run is bound by these
 * misses and by mispredicted branches as much as by instructions.
 *
 * Code: the devices, links and the loop are in event_loop.inc, compiled twice
 * (for AVX2, chosen at run time where the CPU has it, and for the build's
 * baseline: SSE2 on x86-64, plain C elsewhere); this file holds the 8-double
 * primitives of each, the two inclusions and the entry points.
 *
 * Cost: O(log R) per ready-queue operation, O(1) per link-queue operation
 * (plus the same-instant items moved), O(levels) vector operations per event
 * set or chosen (levels = 2 up to 8 devices, 4 on 64), O(in + out degree) per
 * task finish, O(consumers on the receiver) per transfer arrival.
 */
#include <math.h>
#include <string.h>

#include "sim_internal.h"

/* ---- event selection and loop ------------------------------------------------------- */
/* Each resource has one slot (a device d the slot d*(ndev+1), the diagonal a link never uses; the
 * link s->d, resource ndev + s*ndev + d, the slot s*ndev + d), so ndev^2 slots: 64 on 8 devices,
 * which are one level of 8 blocks of 8 under a summary of 8 block minima (more levels of 8 on
 * larger clusters). The earliest event is found without data-dependent branches: the minimum of
 * the top 8, then at each level the first slot of the chosen block equal to it (compare mask,
 * count trailing zeros); the masks also say whether another event has the same time. Setting a
 * slot rewrites its block's minimum at each level above it. The loop takes the current event
 * out and chooses the next one among the others before handling it (so that choice does not
 * wait for what the handling adds and overlaps with it), then compares that with the earliest
 * event the handling added. 8 doubles are two AVX vectors or four SSE2 ones: the loop is
 * compiled twice (sim/event_loop.inc), for AVX2 and for the build's baseline, and the CPU
 * chooses at run time; each slot is written as part of the vector the next loads read, so that
 * they take it from the store buffer (a narrower store would make them wait for the cache). */
static inline int32_t ev_slot(const gopt_sim_scratch *s, int32_t r) {
    return r < s->ndev ? r * (s->ndev + 1) : r - s->ndev;
}

#if defined(__SSE2__)
#include <emmintrin.h>
static inline double min8_base(const double *p) {
    __m128d a = _mm_min_pd(_mm_load_pd(p), _mm_load_pd(p + 2));
    __m128d b = _mm_min_pd(_mm_load_pd(p + 4), _mm_load_pd(p + 6));
    a = _mm_min_pd(a, b);
    return _mm_cvtsd_f64(_mm_min_sd(a, _mm_unpackhi_pd(a, a)));
}
static inline uint32_t eq8_base(const double *p, double m) {
    __m128d x = _mm_set1_pd(m);
    return (uint32_t)_mm_movemask_pd(_mm_cmpeq_pd(_mm_load_pd(p), x)) |
           (uint32_t)_mm_movemask_pd(_mm_cmpeq_pd(_mm_load_pd(p + 2), x)) << 2 |
           (uint32_t)_mm_movemask_pd(_mm_cmpeq_pd(_mm_load_pd(p + 4), x)) << 4 |
           (uint32_t)_mm_movemask_pd(_mm_cmpeq_pd(_mm_load_pd(p + 6), x)) << 6;
}
static inline void put_base(double *p, int32_t k, double t) {
    static const int64_t lane[2][2] __attribute__((aligned(16))) = {{-1, 0}, {0, -1}};
    double *q = p + (k & ~1);
    __m128d m = _mm_load_pd((const double *)lane[k & 1]);
    _mm_store_pd(q, _mm_or_pd(_mm_and_pd(m, _mm_set1_pd(t)), _mm_andnot_pd(m, _mm_load_pd(q))));
}
#else
static inline double min8_base(const double *p) {
    double a = p[0] < p[1] ? p[0] : p[1], b = p[2] < p[3] ? p[2] : p[3];
    double c = p[4] < p[5] ? p[4] : p[5], d = p[6] < p[7] ? p[6] : p[7];
    a = a < b ? a : b;
    c = c < d ? c : d;
    return a < c ? a : c;
}
static inline uint32_t eq8_base(const double *p, double m) {
    uint32_t k = 0;
    for (int i = 0; i < 8; i++) k |= (uint32_t)(p[i] == m) << i;
    return k;
}
static inline void put_base(double *p, int32_t k, double t) { p[k] = t; }
#endif

#define SIM_V(name) name##_base
#define SIM_TARGET
#include "event_loop.inc"
#undef SIM_V
#undef SIM_TARGET

#if defined(__x86_64__) && defined(__GNUC__) && !defined(GOPT_SIM_NO_AVX2)
#define SIM_HAVE_AVX2 1
#include <immintrin.h>
#define SIM_TARGET __attribute__((target("avx2")))
SIM_TARGET static inline double min8_avx2(const double *p) {
    __m256d a = _mm256_min_pd(_mm256_load_pd(p), _mm256_load_pd(p + 4));
    __m128d b = _mm_min_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
    return _mm_cvtsd_f64(_mm_min_sd(b, _mm_unpackhi_pd(b, b)));
}
SIM_TARGET static inline uint32_t eq8_avx2(const double *p, double m) {
    __m256d x = _mm256_set1_pd(m);
    return (uint32_t)_mm256_movemask_pd(_mm256_cmp_pd(_mm256_load_pd(p), x, _CMP_EQ_OQ)) |
           (uint32_t)_mm256_movemask_pd(_mm256_cmp_pd(_mm256_load_pd(p + 4), x, _CMP_EQ_OQ)) << 4;
}
SIM_TARGET static inline void put_avx2(double *p, int32_t k, double t) {
    static const int64_t lane[4][4] __attribute__((aligned(32))) = {
        {-1, 0, 0, 0}, {0, -1, 0, 0}, {0, 0, -1, 0}, {0, 0, 0, -1}};
    double *q = p + (k & ~3);
    _mm256_store_pd(q, _mm256_blendv_pd(_mm256_load_pd(q), _mm256_set1_pd(t), _mm256_load_pd((const double *)lane[k & 3])));
}
#define SIM_V(name) name##_avx2
#include "event_loop.inc"
#undef SIM_V
#undef SIM_TARGET
#endif

/* Run until no event is left (the loop is in event_loop.inc). */
void sim_event_loop(gopt_sim_scratch *s) {
#ifdef SIM_HAVE_AVX2
    if (__builtin_cpu_supports("avx2")) {
        sim_event_loop_avx2(s);
        return;
    }
#endif
    sim_event_loop_base(s);
}

/* A task became ready before the loop runs (prepare). */
void sim_dev_push(gopt_sim_scratch *s, int32_t dv, int32_t c) { dev_push_base(s, dv, c); }
