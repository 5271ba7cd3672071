/* rng.c: xoshiro256** (Blackman & Vigna), seeded through splitmix64.
 * Deterministic across platforms: only integer arithmetic and one fixed
 * conversion to double (53 high bits). */
#include "gopt_common.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void gopt_rng_seed(gopt_rng *rng, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) rng->s[i] = splitmix64(&x);
}

uint64_t gopt_rng_u64(gopt_rng *rng) {
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double gopt_rng_uniform(gopt_rng *rng) { return (double)(gopt_rng_u64(rng) >> 11) * 0x1.0p-53; }

uint64_t gopt_rng_below(gopt_rng *rng, uint64_t n) {
    /* Lemire-free rejection: reject the top partial bucket. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do {
        x = gopt_rng_u64(rng);
    } while (x >= limit);
    return x % n;
}

double gopt_rng_normal(gopt_rng *rng) {
    double u1 = gopt_rng_uniform(rng), u2 = gopt_rng_uniform(rng);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void gopt_rng_split(gopt_rng *parent, gopt_rng *child) {
    uint64_t x = gopt_rng_u64(parent);
    gopt_rng_seed(child, x ^ 0x5851f42d4c957f2dULL);
}
