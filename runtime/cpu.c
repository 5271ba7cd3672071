/* cpu.c: the CPU backend: each device a worker thread (pinned to one core of those this process
 * may use, device d on the (d mod cores)-th), each used link a copy thread, one step at a time.
 *
 * A device runs its ready tasks highest key first (rt_plan: priority, then topological rank);
 * a task's start allocates its external outputs from the device's arena, its end releases its
 * inputs, hands each output to its local consumers and queues one copy per other consuming
 * device on that link; a link copies one tensor at a time, first in first out, into a buffer it
 * allocates on the receiver, then releases the sender's hold and makes the copy available. The
 * bookkeeping (queues, counts, arenas, the timeline) is under one mutex; kernels and copies run
 * outside it. Memory is counted at exactly these points, so a device's peak is the bytes its
 * threads actually held at once under the simulator's memory model (tensors internal to a fused
 * group take none: their kernels write them to the device's workspace).
 *
 * Arenas are caching allocators: a freed buffer is kept, by exact size, for the next request of
 * that size (frameworks' allocators do the same), so repeated steps do not pay the kernel's page
 * faults; a new buffer is filled with small floats once. The workspace of a device (operands
 * that no input can serve, im2col blocks, group intermediates) is outside the model's accounting.
 *
 * Invariants: a task starts only after its pending count reached 0 under the mutex, which
 * happens after each producer's end (local) or each copy's end (remote) was recorded, so every
 * recorded start is at or after the arrival of each of its inputs. Cost per step: the kernels,
 * the copies, O((N + E) log N) bookkeeping, one thread start per device and used link.
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "rt_internal.h"

enum { RT_K_NONE = 0, RT_K_GEMM, RT_K_CONV, RT_K_MEM, RT_K_STANDIN };
#define RT_BUCKETS 1024

typedef struct rt_block {
    int64_t size; /* bytes, a multiple of 64 */
    float *p;
    struct rt_block *next;     /* in its free list */
    struct rt_block *all_next; /* every block of the arena */
} rt_block;

typedef struct {
    rt_block *bucket[RT_BUCKETS]; /* free blocks, chained by size hash */
    rt_block *all;
    int64_t live;
    float *ws;
    int64_t ws_floats;
    rt_span *ins, *outs; /* kernel argument scratch of the device's thread */
    int32_t max_ins, max_outs;
    volatile float sink;
} rt_arena;

typedef struct {
    uint64_t key;
    int32_t t, spare;
} rt_item;

struct rt_cpu {
    const gopt_graph *g;
    const gopt_frozen *f;
    const rt_plan *p;
    int nd, pin, ncpu;
    int *cpus;
    rt_arena ar[GOPT_SIM_MAX_DEVICES];
    float **pbuf;      /* (n) resident parameters */
    uint8_t *kind;     /* (n) RT_K_* */
    int64_t (*dims)[3]; /* (n) m, n, k */
    /* one step's state */
    pthread_mutex_t mu;
    pthread_cond_t dcond[GOPT_SIM_MAX_DEVICES];
    pthread_cond_t *lcond; /* (nd * nd) */
    rt_item *heap;
    int32_t hoff[GOPT_SIM_MAX_DEVICES], hlen[GOPT_SIM_MAX_DEVICES];
    int32_t *lq, *lq_start, *lq_head, *lq_tail; /* link queues: pool carved by link, (nd*nd) starts, heads, tails */
    uint8_t *link_used;
    int32_t *pending, *hold, *xhold;
    rt_block **obuf, **xbuf;
    int32_t done;
    int failed;
    gopt_error err;
    double t0;
    rt_timeline *tl;
};

typedef struct {
    rt_cpu *c;
    int id; /* device, or nd + link */
} rt_thread_arg;

/* ---- arenas (under the mutex) ------------------------------------------------------------- */
static rt_block *arena_get(rt_cpu *c, int dv, int64_t bytes) {
    if (bytes <= 0) return NULL;
    rt_arena *a = &c->ar[dv];
    int64_t size = (bytes + 63) & ~(int64_t)63;
    size_t h = (size_t)(size >> 6) % RT_BUCKETS;
    for (rt_block **pp = &a->bucket[h]; *pp; pp = &(*pp)->next)
        if ((*pp)->size == size) {
            rt_block *b = *pp;
            *pp = b->next;
            return b;
        }
    rt_block *b = malloc(sizeof *b);
    float *mem = b ? aligned_alloc(64, (size_t)size) : NULL;
    if (!mem) {
        free(b);
        if (!c->failed) {
            c->failed = 1;
            gopt_error_set(&c->err, GOPT_ENOMEM, "runtime: device %d: cannot allocate %lld bytes", dv,
                           (long long)size);
        }
        return NULL;
    }
    for (int64_t i = 0; i < size / 4; i++) mem[i] = 1e-3f * (float)(i & 7);
    b->size = size;
    b->p = mem;
    b->all_next = a->all;
    a->all = b;
    return b;
}

static void arena_put(rt_cpu *c, int dv, rt_block *b) {
    if (!b) return;
    rt_arena *a = &c->ar[dv];
    size_t h = (size_t)(b->size >> 6) % RT_BUCKETS;
    b->next = a->bucket[h];
    a->bucket[h] = b;
}

static double now_s(const rt_cpu *c) { return gopt_now_seconds() - c->t0; }

static void mem_log(rt_cpu *c, int dv, double t, int32_t event) {
    rt_timeline *tl = c->tl;
    int64_t cap = 2 * (int64_t)c->p->ntasks + 2 * (int64_t)c->p->nxf + c->nd;
    if (tl->nmemlog < cap) tl->memlog[tl->nmemlog++] = (gopt_trace_memory){t, dv, event, c->ar[dv].live};
}

static void mem_add(rt_cpu *c, int dv, int64_t bytes, double t, int32_t event) {
    int64_t m = c->ar[dv].live += bytes;
    if (m > c->tl->peak[dv]) {
        c->tl->peak[dv] = m;
        c->tl->peak_t[dv] = t;
    }
    mem_log(c, dv, t, event);
}

static double thread_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- ready heaps ------------------------------------------------------------------------- */
static void heap_push(rt_cpu *c, int dv, int32_t t) {
    rt_item *h = c->heap + c->hoff[dv];
    rt_item it = {c->p->key[t], t, 0};
    int32_t i = c->hlen[dv]++;
    while (i > 0) {
        int32_t q = (i - 1) / 2;
        if (h[q].key <= it.key) break;
        h[i] = h[q];
        i = q;
    }
    h[i] = it;
}

static int32_t heap_pop(rt_cpu *c, int dv) {
    rt_item *h = c->heap + c->hoff[dv];
    int32_t top = h[0].t, len = --c->hlen[dv];
    rt_item last = h[len];
    int32_t i = 0;
    for (;;) {
        int32_t k = 2 * i + 1;
        if (k >= len) break;
        if (k + 1 < len && h[k + 1].key < h[k].key) k++;
        if (last.key <= h[k].key) break;
        h[i] = h[k];
        i = k;
    }
    h[i] = last;
    return top;
}

/* ---- kernels of a task ---------------------------------------------------------------------- */
/* Node u's tensor as task t on device dv reads it. */
static rt_span tensor_on(const rt_cpu *c, int32_t u, int32_t t, int dv) {
    const rt_plan *p = c->p;
    if (p->dev[p->task[u]] == dv) {
        if (c->f->op_class[u] == GOPT_OP_CLASS_PARAM) return (rt_span){c->pbuf[u], p->psize[u] / 4};
        return c->obuf[u] ? (rt_span){c->obuf[u]->p, p->osize[u] / 4} : (rt_span){NULL, 0};
    }
    for (int32_t k = p->in_ptr[t]; k < p->in_ptr[t + 1]; k++)
        if (p->in_node[k] == u) {
            int32_t x = p->in_xf[k];
            return c->xbuf[x] ? (rt_span){c->xbuf[x]->p, (int64_t)ceil(p->xf_bytes[x]) / 4} : (rt_span){NULL, 0};
        }
    return (rt_span){NULL, 0};
}

/* The external inputs of node v (in task t) into ins (each producer once); their number. With
 * `clip`, each is cut to the bytes its edges into v carry (what the cost model says v reads,
 * gopt_cost_read_bytes: an optimizer update reads the parameter's edge, not every slot the
 * parameter holds; a slice reads its part). */
static int node_inputs(const rt_cpu *c, int32_t v, int32_t t, int dv, rt_span *ins, int32_t *from, int nin,
                       int clip) {
    const gopt_frozen *f = c->f;
    for (int32_t e = f->in_ptr[v]; e < f->in_ptr[v + 1]; e++) {
        int32_t u = f->in_src[e];
        if (c->p->task[u] == t) continue;
        int seen = 0;
        for (int i = 0; i < nin && !seen; i++) seen = from[i] == u;
        if (seen) continue;
        from[nin] = u;
        rt_span s = tensor_on(c, u, t, dv);
        if (clip) {
            int64_t fl = rt_edge_floats(f, v, e);
            if (fl < s.floats) s.floats = fl;
        }
        ins[nin++] = s;
    }
    return nin;
}

static int64_t gemm_operands(const rt_cpu *c, int32_t v, const rt_span *ins, int nin, rt_span out, float *ws,
                             const float **A, const float **B, float **C, float **col) {
    return rt_gemm_operands(c->dims[v], c->kind[v] == RT_K_CONV, ins, nin, out, ws, A, B, C, col);
}

static rt_span own_output(const rt_cpu *c, int32_t v) {
    if (!c->p->ext[v] || !c->obuf[v]) return (rt_span){NULL, 0};
    return (rt_span){c->obuf[v]->p, c->p->osize[v] / 4};
}

static void run_compute_node(rt_cpu *c, int32_t v, int32_t t, int dv, rt_span *ins, int32_t *from) {
    rt_arena *a = &c->ar[dv];
    int nin = node_inputs(c, v, t, dv, ins, from, 0, c->kind[v] == RT_K_STANDIN);
    rt_span out = own_output(c, v);
    const float *A, *B;
    float *C, *col;
    int64_t m = c->dims[v][0], n = c->dims[v][1], k = c->dims[v][2];
    switch (c->kind[v]) {
    case RT_K_GEMM:
        gemm_operands(c, v, ins, nin, out, a->ws, &A, &B, &C, &col);
        rt_gemm(&(rt_gemm_args){m, n, k, A, B, C});
        break;
    case RT_K_CONV: {
        gemm_operands(c, v, ins, nin, out, a->ws, &A, &B, &C, &col);
        int ia, ib;
        rt_gemm_inputs(c->dims[v], ins, nin, &ia, &ib);
        rt_conv(m, n, k, ia >= 0 ? ins[ia] : (rt_span){NULL, 0}, B, C, col, rt_conv_block_rows(m, k));
        break;
    }
    case RT_K_STANDIN:
        rt_flops_kernel(c->f->flops[v], a->ws);
        a->sink += rt_memory_kernel(ins, nin, &out, out.floats > 0);
        break;
    default:
        break;
    }
}

/* Task t's kernel: its members in topological order; in a fused group the memory-bound members
 * are one pass over their external inputs and outputs, the others their own kernels. */
static void run_task(rt_cpu *c, int32_t t, int dv) {
    const rt_plan *p = c->p;
    rt_arena *a = &c->ar[dv];
    int32_t j0 = p->mem_ptr[t], j1 = p->mem_ptr[t + 1];
    int32_t *from = (int32_t *)(a->outs + a->max_outs); /* a->max_ins int32 after the outs */
    if (j1 - j0 == 1) {
        int32_t v = p->mem[j0];
        if (c->kind[v] == RT_K_MEM) {
            int nin = node_inputs(c, v, t, dv, a->ins, from, 0, 1);
            rt_span out = own_output(c, v);
            a->sink += rt_memory_kernel(a->ins, nin, &out, out.floats > 0);
        } else if (c->kind[v] != RT_K_NONE) {
            run_compute_node(c, v, t, dv, a->ins, from);
        }
        return;
    }
    int nin = 0, nout = 0;
    for (int32_t j = j0; j < j1; j++) {
        int32_t v = p->mem[j];
        if (c->kind[v] == RT_K_MEM) {
            nin = node_inputs(c, v, t, dv, a->ins, from, nin, 1);
            rt_span o = own_output(c, v);
            if (o.floats > 0) a->outs[nout++] = o;
        } else if (c->kind[v] != RT_K_NONE) {
            /* its inputs go after the memory members' (ins has room for every member's) */
            run_compute_node(c, v, t, dv, a->ins + nin, from + nin);
        }
    }
    if (nin || nout) a->sink += rt_memory_kernel(a->ins, nin, a->outs, nout);
}

/* ---- threads ------------------------------------------------------------------------------------ */
static void thread_setup(void) {
#if defined(__SSE__)
    _mm_setcsr(_mm_getcsr() | 0x8040); /* flush denormals to zero, denormal inputs as zero */
#endif
}

static void finish_all(rt_cpu *c) {
    for (int d = 0; d < c->nd; d++) pthread_cond_broadcast(&c->dcond[d]);
    for (int l = 0; l < c->nd * c->nd; l++)
        if (c->link_used[l]) pthread_cond_broadcast(&c->lcond[l]);
}

static void *device_main(void *arg) {
    rt_cpu *c = ((rt_thread_arg *)arg)->c;
    int dv = ((rt_thread_arg *)arg)->id;
    const rt_plan *p = c->p;
    rt_timeline *tl = c->tl;
    thread_setup();
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (c->hlen[dv] == 0 && c->done < p->ntasks && !c->failed) pthread_cond_wait(&c->dcond[dv], &c->mu);
        if (c->hlen[dv] == 0) break;
        int32_t t = heap_pop(c, dv);
        tl->ran_on[t] = dv;
        for (int32_t j = p->mem_ptr[t]; j < p->mem_ptr[t + 1]; j++) {
            int32_t v = p->mem[j];
            if (p->ext[v]) c->obuf[v] = arena_get(c, dv, p->osize[v]);
        }
        double t_start = now_s(c);
        mem_add(c, dv, p->alloc[t], t_start, 1 + 2 * t);
        tl->tstart[t] = t_start;
        pthread_mutex_unlock(&c->mu);
        double cpu0 = thread_cpu_s();
        if (!c->failed) run_task(c, t, dv);
        double cpu1 = thread_cpu_s(), t_end = now_s(c);
        pthread_mutex_lock(&c->mu);
        tl->tend[t] = t_end;
        tl->tcpu[t] = cpu1 - cpu0;
        tl->busy_s[dv] += t_end - t_start;
        /* release the inputs */
        for (int32_t k = p->in_ptr[t]; k < p->in_ptr[t + 1]; k++) {
            int32_t x = p->in_xf[k], u = p->in_node[k];
            if (x >= 0) {
                if (--c->xhold[x] == 0) {
                    arena_put(c, dv, c->xbuf[x]);
                    c->ar[dv].live -= (int64_t)ceil(p->xf_bytes[x]);
                }
            } else if (--c->hold[u] == 0) {
                arena_put(c, dv, c->obuf[u]);
                c->ar[dv].live -= p->osize[u];
            }
        }
        /* hand the outputs on */
        for (int32_t j = p->mem_ptr[t]; j < p->mem_ptr[t + 1]; j++) {
            int32_t v = p->mem[j];
            if (!p->ext[v]) continue;
            c->hold[v] = p->hold0[v];
            if (p->hold0[v] == 0) {
                arena_put(c, dv, c->obuf[v]);
                c->ar[dv].live -= p->osize[v];
            }
            for (int32_t k = p->lc_ptr[v]; k < p->lc_ptr[v + 1]; k++)
                if (--c->pending[p->lc[k]] == 0) {
                    tl->tready[p->lc[k]] = now_s(c);
                    heap_push(c, dv, p->lc[k]);
                }
            for (int32_t x = p->xo_ptr[v]; x < p->xo_ptr[v + 1]; x++) {
                int l = p->xf_src[x] * c->nd + p->xf_dst[x];
                c->lq[c->lq_tail[l]++] = x;
                pthread_cond_signal(&c->lcond[l]);
            }
        }
        mem_log(c, dv, t_end, 2 + 2 * t);
        if (++c->done == p->ntasks) finish_all(c);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

static void *link_main(void *arg) {
    rt_cpu *c = ((rt_thread_arg *)arg)->c;
    int l = ((rt_thread_arg *)arg)->id - c->nd, src = l / c->nd, dst = l % c->nd;
    const rt_plan *p = c->p;
    rt_timeline *tl = c->tl;
    thread_setup();
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (c->lq_head[l] == c->lq_tail[l] && c->done < p->ntasks && !c->failed)
            pthread_cond_wait(&c->lcond[l], &c->mu);
        if (c->lq_head[l] == c->lq_tail[l] || c->failed) break;
        int32_t x = c->lq[c->lq_head[l]++], v = p->xf_node[x];
        int64_t bytes = (int64_t)ceil(p->xf_bytes[x]);
        c->xbuf[x] = arena_get(c, dst, bytes);
        double t_start = now_s(c);
        mem_add(c, dst, bytes, t_start, -1 - 2 * x);
        tl->xstart[x] = t_start;
        rt_span from = c->f->op_class[v] == GOPT_OP_CLASS_PARAM ? (rt_span){c->pbuf[v], p->psize[v] / 4}
                       : c->obuf[v]                             ? (rt_span){c->obuf[v]->p, p->osize[v] / 4}
                                                                : (rt_span){NULL, 0};
        rt_span to = c->xbuf[x] ? (rt_span){c->xbuf[x]->p, bytes / 4} : (rt_span){NULL, 0};
        pthread_mutex_unlock(&c->mu);
        double cpu0 = thread_cpu_s();
        if (to.p) rt_copy(to, from);
        double cpu1 = thread_cpu_s(), t_end = now_s(c);
        pthread_mutex_lock(&c->mu);
        tl->xend[x] = t_end;
        tl->xcpu[x] = cpu1 - cpu0;
        if (--c->hold[v] == 0) { /* the sender's copy */
            arena_put(c, src, c->obuf[v]);
            c->ar[src].live -= p->osize[v];
        }
        mem_log(c, src, t_end, -2 - 2 * x);
        for (int32_t k = p->xc_ptr[x]; k < p->xc_ptr[x + 1]; k++)
            if (--c->pending[p->xc[k]] == 0) {
                tl->tready[p->xc[k]] = now_s(c);
                heap_push(c, dst, p->xc[k]);
                pthread_cond_signal(&c->dcond[dst]);
            }
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* ---- create, step, free ------------------------------------------------------------------------ */
void rt_cpu_free(rt_cpu *c) {
    if (!c) return;
    for (int d = 0; d < GOPT_SIM_MAX_DEVICES; d++) {
        for (rt_block *b = c->ar[d].all, *nx; b; b = nx) {
            nx = b->all_next;
            free(b->p);
            free(b);
        }
        free(c->ar[d].ws);
        free(c->ar[d].ins);
        free(c->ar[d].outs);
    }
    if (c->pbuf)
        for (int32_t v = 0; v < c->p->n; v++) free(c->pbuf[v]);
    free(c->pbuf);
    free(c->kind);
    free(c->dims);
    free(c->cpus);
    free(c->lcond);
    free(c->heap);
    free(c->lq);
    free(c->lq_start);
    free(c->lq_head);
    free(c->lq_tail);
    free(c->link_used);
    free(c->pending);
    free(c->hold);
    free(c->xhold);
    free(c->obuf);
    free(c->xbuf);
    pthread_mutex_destroy(&c->mu);
    for (int d = 0; d < c->nd; d++) pthread_cond_destroy(&c->dcond[d]);
    free(c);
}

double rt_cpu_workspace_bytes(const rt_cpu *c) {
    double b = 0;
    for (int d = 0; d < c->nd; d++) b += 4.0 * (double)c->ar[d].ws_floats;
    return b;
}

static float *alloc_floats(int64_t floats, gopt_error *err) {
    size_t bytes = ((size_t)(floats > 0 ? floats : 1) * sizeof(float) + 63) & ~(size_t)63;
    float *q = aligned_alloc(64, bytes);
    if (!q) {
        gopt_error_set(err, GOPT_ENOMEM, "runtime: cannot allocate %zu bytes", bytes);
        return NULL;
    }
    for (size_t i = 0; i < bytes / sizeof(float); i++) q[i] = 1e-3f * (float)(i & 7);
    return q;
}

gopt_status rt_cpu_create(const gopt_graph *g, const rt_plan *p, int pin, rt_cpu **out, gopt_error *err) {
    *out = NULL;
    rt_cpu *c = gopt_calloc(1, sizeof *c, err);
    if (!c) return GOPT_ENOMEM;
    c->g = g;
    c->f = gopt_graph_frozen(g);
    c->p = p;
    c->nd = p->ndev;
    c->pin = pin;
    pthread_mutex_init(&c->mu, NULL);
    for (int d = 0; d < c->nd; d++) pthread_cond_init(&c->dcond[d], NULL);
    const gopt_frozen *f = c->f;
    int32_t n = p->n, nd = c->nd;
    size_t n1 = (size_t)n + 1, x1 = (size_t)p->nxf + 1, l2 = (size_t)nd * (size_t)nd;
    gopt_status st = GOPT_ENOMEM;
    int ok = 1;
#define A(field, count) ok &= (c->field = gopt_calloc((count), sizeof *c->field, err)) != NULL
    A(pbuf, n1);
    A(kind, n1);
    A(dims, n1);
    A(lcond, l2);
    A(heap, (size_t)p->ntasks + 1);
    A(lq, x1);
    A(lq_start, l2);
    A(lq_head, l2);
    A(lq_tail, l2);
    A(link_used, l2);
    A(pending, (size_t)p->ntasks + 1);
    A(hold, n1);
    A(xhold, x1);
    A(obuf, n1);
    A(xbuf, x1);
#undef A
    if (!ok) goto fail;
    for (size_t l = 0; l < l2; l++) pthread_cond_init(&c->lcond[l], NULL);
    /* the cores this process may use */
    cpu_set_t set;
    CPU_ZERO(&set);
    c->cpus = gopt_calloc(CPU_SETSIZE, sizeof(int), err);
    if (!c->cpus) goto fail;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int i = 0; i < CPU_SETSIZE; i++)
            if (CPU_ISSET(i, &set)) c->cpus[c->ncpu++] = i;
    /* kernels, heaps (tasks per device), link queues (copies per link), workspaces */
    int32_t per_dev[GOPT_SIM_MAX_DEVICES] = {0};
    for (int32_t t = 0; t < p->ntasks; t++) per_dev[p->dev[t]]++;
    for (int d = 0, off = 0; d < nd; d++) {
        c->hoff[d] = off;
        off += per_dev[d];
    }
    int32_t *per_link = gopt_calloc(l2, sizeof(int32_t), err);
    if (!per_link) goto fail;
    for (int32_t x = 0; x < p->nxf; x++) per_link[p->xf_src[x] * nd + p->xf_dst[x]]++;
    for (size_t l = 0, off = 0; l < l2; l++) {
        c->lq_start[l] = c->lq_head[l] = c->lq_tail[l] = (int32_t)off;
        c->link_used[l] = per_link[l] > 0;
        off += (size_t)per_link[l];
    }
    free(per_link);
    int32_t max_ins[GOPT_SIM_MAX_DEVICES] = {0}, max_outs[GOPT_SIM_MAX_DEVICES] = {0};
    for (int32_t t = 0; t < p->ntasks; t++) {
        int32_t deg = 0, d = p->dev[t];
        for (int32_t j = p->mem_ptr[t]; j < p->mem_ptr[t + 1]; j++) deg += f->in_ptr[p->mem[j] + 1] - f->in_ptr[p->mem[j]];
        if (deg > max_ins[d]) max_ins[d] = deg;
        if (p->mem_ptr[t + 1] - p->mem_ptr[t] > max_outs[d]) max_outs[d] = p->mem_ptr[t + 1] - p->mem_ptr[t];
    }
    for (int d = 0; d < nd; d++) {
        rt_arena *a = &c->ar[d];
        a->max_ins = max_ins[d] + 1;
        a->max_outs = max_outs[d] + 1;
        a->ins = gopt_calloc((size_t)a->max_ins, sizeof(rt_span), err);
        /* the outs, then max_ins int32 (the producers of ins) */
        a->outs = gopt_calloc((size_t)a->max_outs + ((size_t)a->max_ins * sizeof(int32_t) + sizeof(rt_span) - 1) /
                                                        sizeof(rt_span),
                              sizeof(rt_span), err);
        if (!a->ins || !a->outs) goto fail;
    }
    /* each node's kernel; the workspace each device needs (sizes only: no buffer exists yet) */
    int64_t ws_need[GOPT_SIM_MAX_DEVICES] = {0};
    rt_span *ins = gopt_calloc(n1 + (size_t)f->m, sizeof(rt_span), err);
    int32_t *from = gopt_calloc(n1 + (size_t)f->m, sizeof(int32_t), err);
    if (!ins || !from) {
        free(ins);
        free(from);
        goto fail;
    }
    for (int32_t v = 0; v < n; v++) {
        int32_t t = p->task[v], d = p->dev[t];
        double m = 0, nn = 0, k = 0;
        int gd = 0;
        switch ((gopt_op_class)f->op_class[v]) {
        case GOPT_OP_CLASS_INPUT:
        case GOPT_OP_CLASS_PARAM:
            c->kind[v] = RT_K_NONE;
            break;
        case GOPT_OP_CLASS_GEMM:
        case GOPT_OP_CLASS_CONV:
            if (f->flops[v] > 0 && (gd = gopt_cost_node_gemm_dims(g, v, &m, &nn, &k)) && m * nn * k < 1e13) {
                /* a convolution's weight gradient alone (gd 2) is a plain GEMM */
                c->kind[v] = f->op_class[v] == GOPT_OP_CLASS_GEMM || gd == 2 ? RT_K_GEMM : RT_K_CONV;
                c->dims[v][0] = (int64_t)m;
                c->dims[v][1] = (int64_t)nn;
                c->dims[v][2] = (int64_t)llround(k);
            } else {
                c->kind[v] = RT_K_STANDIN;
            }
            break;
        case GOPT_OP_CLASS_ELEMENTWISE:
        case GOPT_OP_CLASS_REDUCTION:
        case GOPT_OP_CLASS_DATA_MOVEMENT:
            c->kind[v] = RT_K_MEM;
            break;
        default:
            c->kind[v] = RT_K_STANDIN;
            break;
        }
        int64_t need = 0;
        if (c->kind[v] == RT_K_GEMM || c->kind[v] == RT_K_CONV) {
            /* sizes as the run will see them: local tensors and copies, not internal ones */
            int nin = 0;
            for (int32_t e = f->in_ptr[v]; e < f->in_ptr[v + 1]; e++) {
                int32_t u = f->in_src[e];
                if (p->task[u] == t) continue;
                int seen = 0;
                for (int i = 0; i < nin && !seen; i++) seen = from[i] == u;
                if (seen) continue;
                from[nin] = u;
                int64_t fl = 0;
                if (p->dev[p->task[u]] == d) {
                    fl = f->op_class[u] == GOPT_OP_CLASS_PARAM ? p->psize[u] / 4 : p->osize[u] / 4;
                } else {
                    for (int32_t x = p->xo_ptr[u]; x < p->xo_ptr[u + 1]; x++)
                        if (p->xf_dst[x] == d) fl = (int64_t)ceil(p->xf_bytes[x]) / 4;
                }
                ins[nin++] = (rt_span){NULL, fl};
            }
            rt_span o = {NULL, p->ext[v] ? p->osize[v] / 4 : 0};
            const float *A_, *B_;
            float *C_, *col_;
            need = gemm_operands(c, v, ins, nin, o, NULL, &A_, &B_, &C_, &col_);
        } else if (c->kind[v] == RT_K_STANDIN) {
            need = RT_FLOPS_WS_FLOATS;
        }
        if (need > ws_need[d]) ws_need[d] = need;
    }
    free(ins);
    free(from);
    for (int d = 0; d < nd; d++) {
        c->ar[d].ws_floats = ws_need[d];
        if (!(c->ar[d].ws = alloc_floats(ws_need[d], err))) goto fail;
    }
    for (int32_t v = 0; v < n; v++)
        if (p->psize[v] > 0 && !(c->pbuf[v] = alloc_floats((p->psize[v] + 3) / 4, err))) goto fail;
    *out = c;
    return GOPT_OK;
fail:
    rt_cpu_free(c);
    return st;
}

gopt_status rt_cpu_step(rt_cpu *c, rt_timeline *tl, gopt_error *err) {
    const rt_plan *p = c->p;
    int nd = c->nd;
    c->tl = tl;
    c->done = 0;
    c->failed = 0;
    tl->nmemlog = 0;
    for (int32_t t = 0; t < p->ntasks; t++) {
        c->pending[t] = p->pending0[t];
        tl->tstart[t] = tl->tend[t] = -1;
        tl->tready[t] = 0;
        tl->ran_on[t] = -1;
    }
    for (int32_t x = 0; x < p->nxf; x++) {
        c->xhold[x] = p->xc_ptr[x + 1] - p->xc_ptr[x];
        c->xbuf[x] = NULL;
        tl->xstart[x] = tl->xend[x] = -1;
    }
    for (int d = 0; d < nd; d++) {
        c->ar[d].live = 0;
        c->hlen[d] = 0;
        tl->busy_s[d] = 0;
    }
    for (int32_t v = 0; v < p->n; v++) {
        c->ar[p->dev[p->task[v]]].live += p->psize[v];
        c->obuf[v] = NULL;
    }
    for (int d = 0; d < nd; d++) {
        tl->peak[d] = c->ar[d].live;
        tl->peak_t[d] = 0;
        mem_log(c, d, 0, 0);
    }
    for (int l = 0; l < nd * nd; l++) c->lq_head[l] = c->lq_tail[l] = c->lq_start[l];
    for (int32_t t = 0; t < p->ntasks; t++)
        if (p->pending0[t] == 0) heap_push(c, p->dev[t], t);
    int nthreads = nd;
    for (int l = 0; l < nd * nd; l++) nthreads += c->link_used[l];
    pthread_t th[GOPT_SIM_MAX_DEVICES + GOPT_SIM_MAX_DEVICES * GOPT_SIM_MAX_DEVICES];
    rt_thread_arg args[GOPT_SIM_MAX_DEVICES + GOPT_SIM_MAX_DEVICES * GOPT_SIM_MAX_DEVICES];
    int started = 0;
    gopt_status st = GOPT_OK;
    /* the clock starts before any thread exists; threads start under the mutex, so none runs a
     * kernel before every thread was created */
    pthread_mutex_lock(&c->mu);
    c->t0 = gopt_now_seconds();
    for (int r = 0; r < nd + nd * nd && st == GOPT_OK; r++) {
        if (r >= nd && !c->link_used[r - nd]) continue;
        args[started] = (rt_thread_arg){c, r};
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        if (r < nd && c->pin && c->ncpu > 0) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(c->cpus[r % c->ncpu], &one);
            pthread_attr_setaffinity_np(&attr, sizeof one, &one);
        }
        if (pthread_create(&th[started], &attr, r < nd ? device_main : link_main, &args[started]) == 0) {
            started++;
        } else {
            c->failed = 1;
            st = gopt_error_set(err, GOPT_EINTERNAL, "runtime: cannot start thread %d of %d", r, nthreads);
        }
        pthread_attr_destroy(&attr);
    }
    c->t0 = gopt_now_seconds();
    if (st) finish_all(c);
    pthread_mutex_unlock(&c->mu);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    if (st) return st;
    if (c->failed) {
        if (err) *err = c->err;
        return c->err.code ? c->err.code : GOPT_EINTERNAL;
    }
    if (c->done != p->ntasks)
        return gopt_error_set(err, GOPT_EINTERNAL, "runtime: %d of %d kernels ran", c->done, p->ntasks);
    double end = 0;
    for (int32_t t = 0; t < p->ntasks; t++)
        if (tl->tend[t] > end) end = tl->tend[t];
    for (int32_t x = 0; x < p->nxf; x++)
        if (tl->xend[x] > end) end = tl->xend[x];
    tl->step_s = end;
    return GOPT_OK;
}
