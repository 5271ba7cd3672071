/* sort.c: a stable LSD radix sort of (64-bit key, 32-bit value) pairs, for the hot sorts whose
 * comparison is a number then the order the items came in (the critical-path schedule sorts
 * every sample's nodes this way: qsort's comparator calls were a fifth of a fine-tuning run).
 * Eight passes of one byte each; a byte that every key shares costs its histogram only. */
#include <string.h>

#include "gopt_common.h"

uint64_t gopt_sort_key_desc(double x) {
    if (x == 0) x = 0; /* -0 and +0 compare equal: one key */
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    u = (u >> 63) ? ~u : u | (UINT64_C(1) << 63); /* ascending in x */
    return ~u;
}

void gopt_sort_pairs(gopt_sort_pair *a, gopt_sort_pair *tmp, size_t n) {
    if (n < 2) return;
    size_t count[8][256];
    memset(count, 0, sizeof count);
    for (size_t i = 0; i < n; i++)
        for (int b = 0; b < 8; b++) count[b][(a[i].key >> (8 * b)) & 0xff]++;
    gopt_sort_pair *src = a, *dst = tmp;
    for (int b = 0; b < 8; b++) {
        size_t *c = count[b];
        if (c[(src[0].key >> (8 * b)) & 0xff] == n) continue; /* every key has this byte */
        size_t sum = 0;
        for (int d = 0; d < 256; d++) {
            size_t k = c[d];
            c[d] = sum;
            sum += k;
        }
        for (size_t i = 0; i < n; i++) dst[c[(src[i].key >> (8 * b)) & 0xff]++] = src[i];
        gopt_sort_pair *t = src;
        src = dst;
        dst = t;
    }
    if (src != a) memcpy(a, src, n * sizeof *a);
}
