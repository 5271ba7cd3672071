/* kernels.c: the CPU runtime's kernels (rt_internal.h): sgemm, convolution as im2col + sgemm,
 * a memory-bound kernel over a node's input and output bytes, copies, and the stand-in compute
 * for nodes without shapes.
 *
 * These do the node's amount of work on real buffers; their values are not the model's (the
 * graph carries sizes, not data), so buffers hold small finite floats and the threads flush
 * denormals to zero (cpu.c): no kernel's speed depends on the values.
 * Cost: gemm and conv 2 m n k FLOPs (+ m k floats gathered for conv); the memory kernel one pass
 * over max(outputs, each input) floats in 8 KiB blocks, each input read once; copy one pass.
 */
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "rt_internal.h"

void rt_gemm(const rt_gemm_args *g) {
    if (g->m <= 0 || g->n <= 0 || g->k <= 0) return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)g->m, (int)g->n, (int)g->k, 1.0f, g->a, (int)g->k,
                g->b, (int)g->n, 0.0f, g->c, (int)g->n);
}

/* Workspace regions start at multiples of 64 floats (256 bytes, as cudaMalloc aligns), so that
 * cuBLAS's and cuDNN's vectorized kernels take an operand there as they take a buffer. */
static int64_t ws_region(int64_t floats) { return (floats + 63) / 64 * 64; }

void rt_gemm_inputs(const int64_t dims[3], const rt_span *ins, int nin, int *ia, int *ib) {
    const int64_t kn = dims[2] * dims[1];
    *ia = *ib = -1;
    for (int i = 0; i < nin; i++) /* B: the tightest input that holds k x n floats (the weight) */
        if (ins[i].floats >= kn && (*ib < 0 || ins[i].floats < ins[*ib].floats)) *ib = i;
    for (int i = 0; i < nin; i++) /* A: the largest of the others */
        if (i != *ib && (*ia < 0 || ins[i].floats > ins[*ia].floats)) *ia = i;
}

int64_t rt_gemm_operands(const int64_t dims[3], int conv, const rt_span *ins, int nin, rt_span out, float *ws,
                         const float **A, const float **B, float **C, float **col) {
    int64_t m = dims[0], n = dims[1], k = dims[2], off = 0;
    int ia, ib;
    rt_gemm_inputs(dims, ins, nin, &ia, &ib);
    *col = NULL;
    if (conv) {
        *A = ia >= 0 ? ins[ia].p : NULL; /* the im2col source, whatever its size */
    } else if (ia >= 0 && ins[ia].floats >= m * k) {
        *A = ins[ia].p;
    } else {
        *A = ws ? ws + off : NULL;
        off += ws_region(m * k);
    }
    if (ib >= 0) {
        *B = ins[ib].p;
    } else {
        *B = ws ? ws + off : NULL;
        off += ws_region(k * n);
    }
    if (out.floats >= m * n) {
        *C = out.p;
    } else {
        *C = ws ? ws + off : NULL;
        off += ws_region(m * n);
    }
    if (conv) {
        *col = ws ? ws + off : NULL;
        off += rt_conv_block_rows(m, k) * k;
    }
    return off;
}

int64_t rt_edge_floats(const gopt_frozen *f, int32_t v, int32_t e) {
    double b = 0;
    for (int32_t e2 = e; e2 < f->in_ptr[v + 1]; e2++)
        if (f->in_src[e2] == f->in_src[e]) b += gopt_cost_read_bytes(f, v, e2);
    return (int64_t)(b / 4);
}

int64_t rt_conv_taps(int64_t k) { return (k % 9 == 0 && k >= 9) ? 9 : 1; }

int rt_conv_shape_of(int64_t m, int64_t n, int64_t k, rt_conv_shape *s) {
    memset(s, 0, sizeof *s);
    if (m < 1 || n < 1 || k < 1) return 0;
    int64_t taps = rt_conv_taps(k), c = k / taps;
    /* cuDNN's 4-d descriptors: ints, and each tensor below 2^31 elements */
    if (m > INT32_MAX / c || m > INT32_MAX / n || n > INT32_MAX / k) return 0;
    int64_t w = (int64_t)sqrt((double)m);
    while (w * w > m) w--;
    while ((w + 1) * (w + 1) <= m) w++;
    while (m % w) w--; /* the largest divisor of m not above its square root */
    *s = (rt_conv_shape){.n = 1, .c = c, .h = m / w, .w = w, .k = n, .r = taps == 9 ? 3 : 1};
    return 1;
}

int64_t rt_conv_block_rows(int64_t m, int64_t k) {
    int64_t r = (256 * 1024) / (k > 0 ? k : 1);
    if (r < 1) r = 1;
    return r < m ? r : m;
}

void rt_conv(int64_t m, int64_t n, int64_t k, rt_span src, const float *b, float *c, float *col, int64_t block_rows) {
    if (m <= 0 || n <= 0 || k <= 0) return;
    int64_t taps = rt_conv_taps(k), run = k / taps;
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

#define RT_BLOCK 2048

/* The usual block: at most three inputs, each covering the whole block or none of it, summed in
 * one pass (as the calibrator's `c = a + b`); 0 when the block is not of that kind. */
static int fused_block(float *restrict dst, int add, const rt_span *in, int nin, int64_t o, int64_t len) {
    const float *p[3];
    int k = 0;
    for (int i = 0; i < nin; i++) {
        int64_t n = in[i].floats;
        if (n <= o || !in[i].p) continue;
        if (k == 3 || n - o < len) return 0; /* ends inside the block: the general path */
        p[k++] = in[i].p + o;
    }
    const float *restrict a = k > 0 ? p[0] : NULL, *restrict b = k > 1 ? p[1] : NULL, *restrict c = k > 2 ? p[2] : NULL;
    if (add) { /* into the reduction */
        for (int64_t j = 0; j < len; j++) dst[j] += (k > 0 ? a[j] : 0) + (k > 1 ? b[j] : 0) + (k > 2 ? c[j] : 0);
        return 1;
    }
    switch (k) {
    case 0:
        memset(dst, 0, (size_t)len * sizeof(float));
        break;
    case 1:
        memcpy(dst, a, (size_t)len * sizeof(float));
        break;
    case 2:
        for (int64_t j = 0; j < len; j++) dst[j] = a[j] + b[j];
        break;
    default:
        for (int64_t j = 0; j < len; j++) dst[j] = a[j] + b[j] + c[j];
        break;
    }
    return 1;
}

/* Blocks of RT_BLOCK floats: a block inside one output is computed in place (the first input
 * sets it, the others add: one write of the output, as `c = a + b` does); a block across two
 * outputs goes through a buffer; past the outputs' end the inputs add into the reduction. Each
 * input is read once, over its own length: a broadcast's re-reads would come from the caches,
 * and a scatter or a concatenation reads its inputs once while writing a larger output. */
float rt_memory_kernel(const rt_span *in, int nin, const rt_span *out, int nout) {
    int64_t total = 0, span = 0;
    for (int i = 0; i < nout; i++) total += out[i].floats;
    span = total;
    for (int i = 0; i < nin; i++)
        if (in[i].floats > span) span = in[i].floats;
    /* red: the reduction, by lane (vectorizes); used only when the inputs reach past the outputs */
    float acc[RT_BLOCK], red[RT_BLOCK], sink = 0;
    if (span > total) memset(red, 0, sizeof red);
    int oi = 0;
    int64_t opos = 0; /* position in out[oi] */
    for (int64_t o = 0; o < span; o += RT_BLOCK) {
        int64_t len = span - o < RT_BLOCK ? span - o : RT_BLOCK;
        float *dst = red;
        int direct = 0;
        if (o < total) {
            while (opos >= out[oi].floats) {
                oi++;
                opos = 0;
            }
            direct = o + len <= total && opos + len <= out[oi].floats;
            dst = direct ? out[oi].p + opos : acc;
        }
        int first = dst != red;
        if ((direct || dst == red) && fused_block(dst, dst == red, in, nin, o, len)) {
            opos += direct ? len : 0;
            continue;
        }
        for (int i = 0; i < nin; i++) {
            int64_t n = in[i].floats;
            if (n <= o || !in[i].p) continue;
            int64_t l = n - o < len ? n - o : len;
            const float *restrict s = in[i].p + o;
            if (first) {
                memcpy(dst, s, (size_t)l * sizeof(float));
                if (l < len) memset(dst + l, 0, (size_t)(len - l) * sizeof(float));
            } else {
                for (int64_t j = 0; j < l; j++) dst[j] += s[j];
            }
            first = 0;
        }
        if (first) memset(dst, 0, (size_t)len * sizeof(float)); /* no input here: the output is still written */
        if (direct) {
            opos += len;
            continue;
        }
        if (dst == red) continue;
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
        for (; j < len; j++) red[j] += acc[j];
    }
    if (span > total) { /* the lanes summed 16 at a time: a serial sum of 2048 floats cost ~2 us a call */
        float part[16] = {0};
        for (int j = 0; j < RT_BLOCK; j += 16)
            for (int l = 0; l < 16; l++) part[l] += red[j + l];
        for (int l = 0; l < 16; l++) sink += part[l];
    }
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
