/* utf8.c: one UTF-8 decoder for every reader and writer that checks text
 * (graph names against XML's rules, paths printed as JSON). O(1) per call. */
#include "gopt_common.h"

int gopt_utf8_decode(const unsigned char *s, size_t len, uint32_t *cp) {
    static const uint32_t MIN_CP[4] = {0, 0x80, 0x800, 0x10000}; /* shortest form only */
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    int k = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC2 ? 1 : -1; /* 0x80..0xC1: continuation or overlong */
    if (k < 0 || c > 0xF4 || len <= (size_t)k) return 0;
    uint32_t v = c & (0x3Fu >> k);
    for (int j = 1; j <= k; j++) {
        if ((s[j] & 0xC0) != 0x80) return 0;
        v = (v << 6) | (s[j] & 0x3Fu);
    }
    if (v < MIN_CP[k] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return k + 1;
}
