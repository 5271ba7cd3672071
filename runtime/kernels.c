/* kernels.c: the CPU runtime's kernels (rt_internal.h): sgemm, convolution as im2col + sgemm,
 * a memory-bound kernel over a node's input and output bytes, copies, and the stand-in compute
 * for nodes without shapes.
 *
 * These do the node's amount of work on real buffers; their values are not the model's (the
 * graph carries sizes, not data), so buffers hold small finite floats and the threads flush
 * denormals to zero (cpu.c): no kernel's speed depends on the values.
 * Cost: gemm and conv 2 m n k FLOPs (+ m k floats gathered for conv); the memory kernel one pass
 * over max(outputs, each input) floats in 8 KiB blocks; copy one pass.
 */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "rt_internal.h"

void rt_gemm(const rt_gemm_args *g) {
    if (g->m <= 0 || g->n <= 0 || g->k <= 0) return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)g->m, (int)g->n, (int)g->k, 1.0f, g->a, (int)g->k,
                g->b, (int)g->n, 0.0f, g->c, (int)g->n);
}

int64_t rt_conv_block_rows(int64_t m, int64_t k) {
    int64_t r = (256 * 1024) / (k > 0 ? k : 1);
    if (r < 1) r = 1;
    return r < m ? r : m;
}

void rt_conv(int64_t m, int64_t n, int64_t k, rt_span src, const float *b, float *c, float *col, int64_t block_rows) {
    if (m <= 0 || n <= 0 || k <= 0) return;
    int64_t taps = (k % 9 == 0 && k >= 9) ? 9 : 1, run = k / taps;
    int64_t len = src.floats;
    for (int64_t r0 = 0; r0 < m; r0 += block_rows) {
        int64_t rows = m - r0 < block_rows ? m - r0 : block_rows;
        for (int64_t r = 0; r < rows; r++) {
            float *dst = col + r * k;
            for (int64_t t = 0; t < taps; t++) {
                if (len <= 0) {
                    memset(dst + t * run, 0, (size_t)run * sizeof(float));
                    continue;
                }
                /* a neighbouring pixel's channels: runs of `run` floats, wrapping in the input */
                int64_t off = ((r0 + r) * run + t * 3 * run) % len;
                rt_copy((rt_span){dst + t * run, run}, (rt_span){src.p + off, len - off});
            }
        }
        rt_gemm(&(rt_gemm_args){rows, n, k, col, b, c + r0 * n});
    }
}

/* acc[0..len) += in[(o + j) mod n] */
static void add_cyclic(float *restrict acc, const float *restrict in, int64_t n, int64_t o, int64_t len) {
    int64_t pos = o % n, j = 0;
    while (j < len) {
        int64_t run = n - pos < len - j ? n - pos : len - j;
        const float *s = in + pos;
        for (int64_t i = 0; i < run; i++) acc[j + i] += s[i];
        j += run;
        pos = 0;
    }
}

#define RT_BLOCK 2048

float rt_memory_kernel(const rt_span *in, int nin, const rt_span *out, int nout) {
    int64_t total = 0, span = 0;
    for (int i = 0; i < nout; i++) total += out[i].floats;
    span = total;
    for (int i = 0; i < nin; i++)
        if (in[i].floats > span) span = in[i].floats;
    float acc[RT_BLOCK], red[RT_BLOCK] = {0}, sink = 0; /* red: the reduction, by lane (vectorizes) */
    int oi = 0;
    int64_t opos = 0; /* position in out[oi] */
    for (int64_t o = 0; o < span; o += RT_BLOCK) {
        int64_t len = span - o < RT_BLOCK ? span - o : RT_BLOCK;
        float *dst = o >= total ? red : acc; /* past the outputs: straight into the reduction */
        if (dst == acc)
            for (int64_t j = 0; j < len; j++) acc[j] = 0;
        for (int i = 0; i < nin; i++) {
            int64_t n = in[i].floats;
            if (n <= 0 || !in[i].p) continue;
            int64_t lim = n > total ? n : total; /* past both its end and the outputs': done */
            if (o >= lim) continue;
            add_cyclic(dst, in[i].p, n, o, lim - o < len ? lim - o : len);
        }
        int64_t j = 0;
        while (j < len && o + j < total) { /* write the block into the outputs it covers */
            while (opos >= out[oi].floats) {
                oi++;
                opos = 0;
            }
            int64_t run = out[oi].floats - opos < len - j ? out[oi].floats - opos : len - j;
            memcpy(out[oi].p + opos, acc + j, (size_t)run * sizeof(float));
            opos += run;
            j += run;
        }
        if (dst == acc)
            for (; j < len; j++) red[j] += acc[j];
    }
    for (int j = 0; j < RT_BLOCK; j++) sink += red[j];
    return sink;
}

void rt_copy(rt_span dst, rt_span src) {
    if (dst.floats <= 0) return;
    if (src.floats <= 0 || !src.p) {
        memset(dst.p, 0, (size_t)dst.floats * sizeof(float));
        return;
    }
    for (int64_t o = 0; o < dst.floats; o += src.floats) {
        int64_t run = dst.floats - o < src.floats ? dst.floats - o : src.floats;
        memcpy(dst.p + o, src.p, (size_t)run * sizeof(float));
    }
}

void rt_flops_kernel(double flops, float *ws) {
    while (flops >= 2.0) {
        double side = cbrt(flops / 2);
        int64_t s = side > 512 ? 512 : (int64_t)side;
        if (s < 1) s = 1;
        rt_gemm(&(rt_gemm_args){s, s, s, ws, ws + 512 * 512, ws + 2 * 512 * 512});
        flops -= 2.0 * (double)s * (double)s * (double)s;
    }
}
