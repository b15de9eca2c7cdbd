/*
 * cpu_attn.c: attention in one op on the CPU:
 * out = softmax(q·kᵀ·scale + mask)·v, per head and batch entry.
 *
 * The work is cut into (head, batch, block of up to 256 queries) items
 * spread over the pool (blocks shrink until each thread has two items). An item runs two single-thread GEMMs from cpu_matmul.c: the
 * scores S = Q·Kᵀ for its block (K is the "weight" operand, packed panel by
 * panel, so an f16 K is converted on the fly), then the softmax of each row
 * in place, then O = P·V with V read in its natural [Dv][Tk] layout (V's
 * rows are the k dimension of that product, already the packed layout).
 * At a decoder step (a handful of queries) the same two GEMMs take their
 * few-rows paths: dot products against K, scaled rows of V summed. A
 * row whose mask is -inf everywhere has all-zero probabilities and so a zero
 * output, as the API promises. The scores of a block (QB x Tk floats) are
 * the only intermediate; nothing of size Tq x Tk is ever materialised.
 *
 * Not here: online-softmax (flash) tiling over Tk; with the encoder's
 * Tk of a few hundred a whole score row fits in L1/L2 anyway.
 */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "cpu_impl.h"

enum { QB_MAX = 256 };

typedef struct attn_task {
    cpu_backend *be;
    tg_tensor *node;
    int64_t qb;         /* queries per item */
    int64_t n_qblocks;
    char *ws;           /* per thread: ws_stride bytes */
    size_t ws_stride;
    size_t gemm_ws;     /* bytes of the GEMM's scratch at the front */
    atomic_llong next;  /* the next unclaimed item (claimed one at a time, as
                           cpu_matmul.c does, so a descheduled thread costs
                           one item) */
} attn_task;

static void attn_item(attn_task *t, int64_t item, char *ws) {
    tg_tensor *n = t->node;
    const tg_tensor *q = n->src[0], *kt = n->src[1], *v = n->src[2], *mask = n->src[3];
    const cpu_kernels *k = &t->be->k;
    float scale = tg_param_f32(n, 0);
    int64_t D = q->ne[0], Tq = q->ne[1], Tk = kt->ne[1], Dv = v->ne[0];
    int64_t qb = item % t->n_qblocks, hb = item / t->n_qblocks;
    int64_t h = hb % q->ne[2], b = hb / q->ne[2];
    int64_t i0 = qb * t->qb, nq = Tq - i0 < t->qb ? Tq - i0 : t->qb;
    void *gws = ws;
    float *S = (float *)(ws + t->gemm_ws);

    /* S[i, j] = sum_d k[d, j] q[d, i] */
    cpu_mat A = {.data = cpu_at(kt, 0, 0, h, b), .type = kt->type, .sk = kt->nb[0],
                 .sj = kt->nb[1]};
    cpu_mat B = {.data = cpu_at(q, 0, i0, h, b), .type = TG_F32, .sk = q->nb[0], .sj = q->nb[1]};
    cpu_gemm_st(k, nq, Tk, D, &A, &B, S, Tk, false, gws);

    for (int64_t i = 0; i < nq; i++) {
        float *row = S + i * Tk;
        k->unary(CPU_SCALE, Tk, row, row, scale);
        if (mask) {
            const char *pm = cpu_at(mask, 0, i0 + i, h % mask->ne[2], b % mask->ne[3]);
            if (mask->nb[0] == sizeof(float)) {
                k->binary(CPU_ADD, Tk, row, row, (const float *)pm);
            } else {
                for (int64_t j = 0; j < Tk; j++) row[j] += *(const float *)(pm + j * mask->nb[0]);
            }
        }
        float m = k->max(Tk, row);
        if (m == -INFINITY) {
            memset(row, 0, (size_t)Tk * sizeof(float));
            continue;
        }
        double s = k->exp_sum(Tk, row, row, m);
        k->unary(CPU_SCALE, Tk, row, row, (float)(1.0 / s));
    }

    /* out[dv, h, i, b] = sum_j v[dv, j] P[i, j] */
    cpu_mat Av = {.data = cpu_at(v, 0, 0, h, b), .type = v->type, .sk = v->nb[1], .sj = v->nb[0]};
    cpu_mat Bp = {.data = S, .type = TG_F32, .sk = sizeof(float), .sj = (size_t)Tk * sizeof(float)};
    float *C = cpu_at(n, 0, h, i0, b);
    cpu_gemm_st(k, nq, Dv, Tk, &Av, &Bp, C, (int64_t)(n->nb[2] / sizeof(float)), false, gws);
}

static void attn_task_fn(void *arg, int ith, int nth) {
    attn_task *t = arg;
    const tg_tensor *q = t->node->src[0];
    int64_t items = t->n_qblocks * q->ne[2] * q->ne[3];
    for (;;) {
        int64_t it = atomic_fetch_add_explicit(&t->next, 1, memory_order_relaxed);
        if (it >= items) break;
        attn_item(t, it, t->ws + (size_t)ith * t->ws_stride);
    }
}

tg_status cpu_op_attention(cpu_backend *be, tg_tensor *node) {
    const tg_tensor *q = node->src[0], *k = node->src[1], *v = node->src[2], *mask = node->src[3];
    int64_t D = q->ne[0], Tq = q->ne[1], H = q->ne[2], B = q->ne[3], Tk = k->ne[1], Dv = v->ne[0];
    if (k->ne[0] != D || k->ne[2] != H || k->ne[3] != B || v->ne[1] != Tk || v->ne[2] != H ||
        v->ne[3] != B || node->ne[0] != Dv || node->ne[1] != H || node->ne[2] != Tq ||
        node->ne[3] != B)
        return tg_status_new(TG_ERR_INVALID_ARG, "attention: shapes of q '%s', k '%s', v '%s' do "
                             "not fit", q->name, k->name, v->name);
    if (mask && (mask->ne[0] != Tk || mask->ne[1] < Tq || H % mask->ne[2] || B % mask->ne[3]))
        return tg_status_new(TG_ERR_INVALID_ARG, "attention: mask '%s' is not [Tk, Tq, H|1, B|1]",
                             mask->name);
    if (node->nb[0] != sizeof(float) || node->nb[2] % sizeof(float))
        return tg_status_new(TG_ERR_UNSUPPORTED, "attention: result '%s' is not contiguous",
                             node->name);
    /* Big blocks amortise packing K (one pass per block), but every thread
     * needs items: halve the block until there are two per thread. */
    attn_task t = {.be = be, .node = node, .qb = Tq < QB_MAX ? Tq : QB_MAX};
    while (t.qb > 16 && H * B * ((Tq + t.qb - 1) / t.qb) < 2 * be->n_threads) t.qb = (t.qb + 1) / 2;
    if (t.qb < 1) t.qb = 1;
    t.n_qblocks = (Tq + t.qb - 1) / t.qb;
    int64_t kmax = D > Tk ? D : Tk;
    t.gemm_ws = (cpu_gemm_st_scratch(&be->k, t.qb, kmax) + 63) / 64 * 64;
    t.ws_stride = t.gemm_ws + ((size_t)t.qb * (size_t)Tk * sizeof(float) + 63) / 64 * 64;
    void *mem;
    tg_status st = cpu_scratch(be, t.ws_stride * (size_t)be->n_threads, &mem);
    if (st) return tg_status_wrap(st, "attention");
    t.ws = mem;
    atomic_init(&t.next, 0);
    cpu_parallel(be, attn_task_fn, &t, (double)(D + Dv) * (double)Tq * (double)Tk * (double)(H * B));
    return NULL;
}
