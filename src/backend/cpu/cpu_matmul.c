/*
 * cpu_matmul.c: matrix products on the CPU: the blocked GEMM driver shared by
 * mul_mat, attention and convolution, and the mul_mat op.
 *
 * C[m, n] = sum_k A(k, n) B(k, m): A is the weight (f32, f16 or bf16, k
 * usually contiguous), B the f32 activations, C f32 with n contiguous. The
 * shape follows the packed-panel design of Goto and BLIS, with one change:
 * B is not packed. Its rows are already contiguous in k, and the register
 * kernel broadcasts from MR of them directly, which saves a pass over all
 * of B per call (measured: ~8 ms of a ~60 ms 876x1280x5120 product) and
 * the M x K scratch it needed. Each thread takes NR-column slices of A,
 * converts one KC x NR panel at a time to f32 ([k][NR], the layout the
 * register kernel streams) and sweeps it over all its rows of B. The
 * register kernel (an MR x NR tile of accumulators, one broadcast of B and
 * NR/16 vector loads of A per k) comes from the ISA's kernel table.
 * Converting panel by panel means a bf16 weight is never held as f32
 * beyond one KC x NR panel per thread (128 KB with AVX-512), and the result
 * is exact to f32 accumulation: bf16 -> f32 is exact. A B that is strided
 * in k (never the case for mul_mat, whose constructor wants dense rows) is
 * first copied into contiguous rows. KC = 512 and the 6 x 64 AVX-512 tile
 * were chosen by measurement on the encoder's shapes (KC from 96 to 768 and
 * a 12 x 32 tile tried: ~146-154 GFLOP/s per core at 512, 125-145 at 128-
 * 384; the tile alone reaches the FMA peak, ~175, on cached data).
 *
 * Products with few rows (decoder steps) skip the packing, whose cost would
 * dominate: with A contiguous in k they run as dot products over converted
 * rows of A, with A contiguous in n (attention's V) as scaled row sums.
 *
 * Not here: reduced-precision (bf16 x bf16) products. TG_PREC_DEFAULT is
 * computed exactly as TG_PREC_F32 is, because the model must match float32.
 * An AVX512_BF16 path would not pay anyway: on the Xeon we measured,
 * VDPBF16PS (32 bf16 products) issues once per two cycles, 83 GFLOP/s per
 * core against 171 for two f32 FMA ports. AMX tiles would, but they need
 * bf16 activations too.
 */
#include <stdatomic.h>
#include <string.h>

#include "cpu_impl.h"

enum {
    KC = 512,        /* k block: one A panel is KC x NR f32 (128 KB, in L2)  */
    SMALL_M = 8,     /* at or below this many rows: dot-product path         */
    DOT_CHUNK = 512, /* k chunk of the dot-product path                      */
};

static inline int64_t round_up(int64_t x, int64_t m) {
    return (x + m - 1) / m * m;
}

/* Packs columns n0..n0+nr-1 of A over k0..k0+kc-1 into ap[kk*NR + j]. */
static void pack_a(const cpu_kernels *k, const cpu_mat *A, int64_t n0, int nr, int64_t k0,
                   int64_t kc, float *ap) {
    size_t es = tg_type_size(A->type);
    const char *base = (const char *)A->data + (size_t)n0 * A->sj + (size_t)k0 * A->sk;
    if (A->sk == es) {
        k->pack_a(A->type, base, A->sj, nr, kc, k->nr, ap);
        return;
    }
    if (A->sj == es) {
        /* n contiguous (attention's V): already [k][n], convert row by row. */
        for (int64_t kk = 0; kk < kc; kk++) {
            k->to_f32(A->type, base + (size_t)kk * A->sk, ap + kk * k->nr, nr);
            for (int j = nr; j < k->nr; j++) ap[kk * k->nr + j] = 0.0f;
        }
        return;
    }
    for (int j = 0; j < nr; j++)
        for (int64_t kk = 0; kk < kc; kk++)
            ap[kk * k->nr + j] = cpu_load_f32(A->type, base + (size_t)j * A->sj + (size_t)kk * A->sk);
    for (int j = nr; j < k->nr; j++)
        for (int64_t kk = 0; kk < kc; kk++) ap[kk * k->nr + j] = 0.0f;
}

/* Runs the register kernel on one tile. B rows are ldb floats apart and
 * contiguous in k. A partial tile (mr < MR or nr < NR) goes through bt
 * (MR x kc floats, the missing rows zero) and tmp (MR x NR). */
static void tile(const cpu_kernels *k, int64_t kc, const float *b, int64_t ldb, const float *ap,
                 float *c, int64_t ldc, bool acc, int mr, int nr, float *bt, float *tmp) {
    if (mr < k->mr) {
        for (int i = 0; i < k->mr; i++) {
            if (i < mr) memcpy(bt + i * kc, b + i * ldb, (size_t)kc * sizeof(float));
            else memset(bt + i * kc, 0, (size_t)kc * sizeof(float));
        }
        b = bt;
        ldb = kc;
    }
    if (mr == k->mr && nr == k->nr) {
        k->gemm(kc, b, ldb, ap, c, ldc, acc);
        return;
    }
    if (k->gemm_part) {
        k->gemm_part(kc, b, ldb, ap, c, ldc, acc, mr, nr);
        return;
    }
    k->gemm(kc, b, ldb, ap, tmp, k->nr, false);
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++)
            c[i * ldc + j] = acc ? c[i * ldc + j] + tmp[i * k->nr + j] : tmp[i * k->nr + j];
}

/* Per-thread working memory of the blocked path, in floats: one A panel,
 * one partial B panel, one partial C tile. */
static int64_t ws_floats(const cpu_kernels *k) {
    return round_up((int64_t)KC * k->nr + (int64_t)KC * k->mr + (int64_t)k->mr * k->nr, 16);
}

/* Computes columns of n-panels [jp0, jp1) for rows [m0, m1) of C. B is
 * f32 with rows ldb floats apart, contiguous in k. */
static void gemm_region(const cpu_kernels *k, int64_t N, int64_t K, const cpu_mat *A,
                        const float *B, int64_t ldb, float *C, int64_t ldc, bool acc, int64_t jp0,
                        int64_t jp1, int64_t m0, int64_t m1, float *ws) {
    int MR = k->mr, NR = k->nr;
    float *ap = ws, *bt = ap + (size_t)KC * NR, *tmp = bt + (size_t)KC * MR;
    for (int64_t jp = jp0; jp < jp1; jp++) {
        int64_t n0 = jp * NR;
        int nr = N - n0 < NR ? (int)(N - n0) : NR;
        for (int64_t k0 = 0; k0 < K; k0 += KC) {
            int64_t kc = K - k0 < KC ? K - k0 : KC;
            pack_a(k, A, n0, nr, k0, kc, ap);
            bool a2 = acc || k0 > 0;
            for (int64_t m = m0; m < m1; m += MR) {
                int mr = m1 - m < MR ? (int)(m1 - m) : MR;
                tile(k, kc, B + m * ldb + k0, ldb, ap, C + m * ldc + n0, ldc, a2, mr, nr, bt, tmp);
            }
        }
    }
}

/* Copies rows [m0, m1) of a B that is strided in k into a contiguous
 * row-major f32 buffer bc (K floats per row). */
static void copy_b_rows(const cpu_mat *B, int64_t K, int64_t m0, int64_t m1, float *bc) {
    for (int64_t m = m0; m < m1; m++) {
        const char *row = (const char *)B->data + (size_t)m * B->sj;
        for (int64_t kk = 0; kk < K; kk++) bc[m * K + kk] = *(const float *)(row + kk * B->sk);
    }
}

/* ---------------------------------------------------- dot-product path */

/* C rows m0..m1 x columns n0..n1 by dot products; buf holds DOT_CHUNK
 * floats. */
static void gemm_dots(const cpu_kernels *k, int64_t M, int64_t K, const cpu_mat *A,
                      const cpu_mat *B, float *C, int64_t ldc, bool acc, int64_t n0, int64_t n1,
                      float *abuf, float *bbuf) {
    size_t es = tg_type_size(A->type);
    bool b_cont = B->sk == sizeof(float);
    for (int64_t n = n0; n < n1; n++) {
        float s[SMALL_M];
        for (int64_t m = 0; m < M; m++) s[m] = 0.0f;
        const char *arow = (const char *)A->data + (size_t)n * A->sj;
        for (int64_t k0 = 0; k0 < K; k0 += DOT_CHUNK) {
            int64_t kc = K - k0 < DOT_CHUNK ? K - k0 : DOT_CHUNK;
            const float *av;
            if (A->sk == es) {
                if (A->type == TG_F32) {
                    av = (const float *)(arow + (size_t)k0 * es);
                } else {
                    k->to_f32(A->type, arow + (size_t)k0 * es, abuf, kc);
                    av = abuf;
                }
            } else {
                for (int64_t kk = 0; kk < kc; kk++)
                    abuf[kk] = cpu_load_f32(A->type, arow + (size_t)(k0 + kk) * A->sk);
                av = abuf;
            }
            for (int64_t m = 0; m < M; m++) {
                const char *brow = (const char *)B->data + (size_t)m * B->sj + (size_t)k0 * B->sk;
                const float *bv = (const float *)brow;
                if (!b_cont) {
                    for (int64_t kk = 0; kk < kc; kk++) bbuf[kk] = *(const float *)(brow + kk * B->sk);
                    bv = bbuf;
                }
                s[m] += k->dot(kc, av, bv);
            }
        }
        for (int64_t m = 0; m < M; m++) C[m * ldc + n] = acc ? C[m * ldc + n] + s[m] : s[m];
    }
}

/* C rows [0, M) x columns [n0, n1) as rows of A scaled and added (C[m, :] +=
 * B(k, m) A(k, :)), for few rows with A contiguous in n (attention's V at a
 * decoder step): one pass over A, no packing. abuf holds DOT_CHUNK floats. */
static void gemm_axpy(const cpu_kernels *k, int64_t M, int64_t K, const cpu_mat *A,
                      const cpu_mat *B, float *C, int64_t ldc, bool acc, int64_t n0, int64_t n1,
                      float *abuf) {
    for (int64_t nc = n0; nc < n1; nc += DOT_CHUNK) {
        int64_t w = n1 - nc < DOT_CHUNK ? n1 - nc : DOT_CHUNK;
        if (!acc)
            for (int64_t m = 0; m < M; m++) memset(C + m * ldc + nc, 0, (size_t)w * sizeof(float));
        for (int64_t kk = 0; kk < K; kk++) {
            const char *arow = (const char *)A->data + (size_t)kk * A->sk + (size_t)nc * A->sj;
            const float *av = (const float *)arow;
            if (A->type != TG_F32) {
                k->to_f32(A->type, arow, abuf, w);
                av = abuf;
            }
            for (int64_t m = 0; m < M; m++) {
                float bv = *(const float *)((const char *)B->data + (size_t)kk * B->sk +
                                            (size_t)m * B->sj);
                k->axpy(w, bv, av, C + m * ldc + nc);
            }
        }
    }
}

/* Which path a product takes. */
enum gemm_path { PATH_BLOCKED, PATH_DOTS, PATH_AXPY };

static enum gemm_path choose_path(int64_t M, const cpu_mat *A) {
    size_t es = tg_type_size(A->type);
    if (M > SMALL_M) return PATH_BLOCKED;
    if (A->sk == es) return PATH_DOTS;
    if (A->sj == es) return PATH_AXPY;
    return PATH_BLOCKED;
}

/* ------------------------------------------------------ single thread */

size_t cpu_gemm_st_scratch(const cpu_kernels *k, int64_t M, int64_t K) {
    size_t floats = (size_t)round_up(M * K, 16) + (size_t)ws_floats(k) + 2 * DOT_CHUNK;
    return floats * sizeof(float) + 256;
}

void cpu_gemm_st(const cpu_kernels *k, int64_t M, int64_t N, int64_t K, const cpu_mat *A,
                 const cpu_mat *B, float *C, int64_t ldc, bool acc, void *ws) {
    float *bc = ws;
    float *w = bc + round_up(M * K, 16);
    enum gemm_path path = choose_path(M, A);
    if (path == PATH_DOTS) {
        gemm_dots(k, M, K, A, B, C, ldc, acc, 0, N, w, w + DOT_CHUNK);
        return;
    }
    if (path == PATH_AXPY) {
        gemm_axpy(k, M, K, A, B, C, ldc, acc, 0, N, w);
        return;
    }
    const float *b = B->data;
    int64_t ldb = (int64_t)(B->sj / sizeof(float));
    if (B->sk != sizeof(float) || B->sj % sizeof(float)) {
        copy_b_rows(B, K, 0, M, bc);
        b = bc;
        ldb = K;
    }
    if (K == 0) {
        if (!acc)
            for (int64_t m = 0; m < M; m++) memset(C + m * ldc, 0, (size_t)N * sizeof(float));
        return;
    }
    gemm_region(k, N, K, A, b, ldb, C, ldc, acc, 0, (N + k->nr - 1) / k->nr, 0, M, w);
}

/* ------------------------------------------------------------ threaded */

typedef struct gemm_task {
    const cpu_kernels *k;
    int64_t M, N, K;
    const cpu_mat *A, *B;
    float *C;
    int64_t ldc;
    bool acc;
    const float *b;     /* B as contiguous rows */
    int64_t ldb;
    float *bc;          /* copy of a k-strided B */
    float *thread_ws;   /* per thread: ws_stride floats */
    int64_t ws_stride;
    int64_t n_mchunks;  /* the rows are split into this many chunks */
    atomic_llong next;  /* the next unclaimed item */
} gemm_task;

static void copy_b_task(void *arg, int ith, int nth) {
    gemm_task *t = arg;
    int64_t lo, hi;
    cpu_range(t->M, ith, nth, &lo, &hi);
    copy_b_rows(t->B, t->K, lo, hi, t->bc);
}

/* Items (an NR-column panel x a chunk of rows) are claimed one at a time
 * from a shared counter rather than split up front: on a machine shared with
 * other work a descheduled thread then delays the product by one item, not
 * by its whole share. Which thread computes an item never changes its
 * arithmetic, so results do not depend on the schedule. */
static void compute_task(void *arg, int ith, int nth) {
    gemm_task *t = arg;
    const cpu_kernels *k = t->k;
    float *ws = t->thread_ws + ith * t->ws_stride;
    int64_t njp = (t->N + k->nr - 1) / k->nr, nip = (t->M + k->mr - 1) / k->mr;
    int64_t items = njp * t->n_mchunks;
    for (;;) {
        int64_t it = atomic_fetch_add_explicit(&t->next, 1, memory_order_relaxed);
        if (it >= items) break;
        int64_t jp = it / t->n_mchunks, mc = it % t->n_mchunks, ip0, ip1;
        cpu_range(nip, (int)mc, (int)t->n_mchunks, &ip0, &ip1);
        int64_t m0 = ip0 * k->mr, m1 = ip1 * k->mr < t->M ? ip1 * k->mr : t->M;
        gemm_region(k, t->N, t->K, t->A, t->b, t->ldb, t->C, t->ldc, t->acc, jp, jp + 1, m0, m1,
                    ws);
    }
}

static void dots_task(void *arg, int ith, int nth) {
    gemm_task *t = arg;
    float *ws = t->thread_ws + ith * t->ws_stride;
    int64_t lo, hi;
    cpu_range(t->N, ith, nth, &lo, &hi);
    gemm_dots(t->k, t->M, t->K, t->A, t->B, t->C, t->ldc, t->acc, lo, hi, ws, ws + DOT_CHUNK);
}

static void axpy_task(void *arg, int ith, int nth) {
    gemm_task *t = arg;
    float *ws = t->thread_ws + ith * t->ws_stride;
    int64_t lo, hi;
    /* split in whole 16-float groups so threads never share a cache line */
    cpu_range((t->N + 15) / 16, ith, nth, &lo, &hi);
    lo *= 16;
    hi = hi * 16 < t->N ? hi * 16 : t->N;
    if (lo < hi) gemm_axpy(t->k, t->M, t->K, t->A, t->B, t->C, t->ldc, t->acc, lo, hi, ws);
}

tg_status cpu_gemm(cpu_backend *be, int64_t M, int64_t N, int64_t K, const cpu_mat *A,
                   const cpu_mat *B, float *C, int64_t ldc, bool acc) {
    const cpu_kernels *k = &be->k;
    int nth = be->n_threads;
    if (M <= 0 || N <= 0) return NULL;
    if (K == 0) {
        if (!acc)
            for (int64_t m = 0; m < M; m++) memset(C + m * ldc, 0, (size_t)N * sizeof(float));
        return NULL;
    }
    enum gemm_path path = choose_path(M, A);
    bool copy_b = path == PATH_BLOCKED && (B->sk != sizeof(float) || B->sj % sizeof(float));
    int64_t ws_stride = round_up(ws_floats(k) + 2 * DOT_CHUNK, 16);
    size_t bc_floats = copy_b ? (size_t)round_up(M * K, 16) : 0;
    void *mem;
    tg_status st = cpu_scratch(be, (bc_floats + (size_t)ws_stride * nth) * sizeof(float), &mem);
    if (st) return tg_status_wrap(st, "matrix product %lldx%lldx%lld", (long long)M, (long long)N,
                                  (long long)K);
    gemm_task t = {.k = k, .M = M, .N = N, .K = K, .A = A, .B = B, .C = C, .ldc = ldc, .acc = acc,
                   .b = B->data, .ldb = (int64_t)(B->sj / sizeof(float)), .bc = mem,
                   .thread_ws = (float *)mem + bc_floats, .ws_stride = ws_stride};
    if (path != PATH_BLOCKED) {
        cpu_parallel(be, path == PATH_DOTS ? dots_task : axpy_task, &t, (double)M * (double)N * (double)K);
        return NULL;
    }
    if (copy_b) {
        cpu_parallel(be, copy_b_task, &t, (double)M * (double)K);
        t.b = t.bc;
        t.ldb = K;
    }
    /* Enough items that every thread gets work even when N is narrow. */
    int64_t njp = (N + k->nr - 1) / k->nr, nip = (M + k->mr - 1) / k->mr;
    t.n_mchunks = 1;
    while (njp * t.n_mchunks < 4 * nth && t.n_mchunks < nip) t.n_mchunks++;
    atomic_init(&t.next, 0);
    cpu_parallel(be, compute_task, &t, (double)M * (double)N * (double)K);
    return NULL;
}

/* ---------------------------------------------------------------- op */

tg_status cpu_op_mul_mat(cpu_backend *be, tg_tensor *node) {
    const tg_tensor *a = node->src[0], *b = node->src[1];
    if (a->ne[0] != b->ne[0] || node->ne[0] != a->ne[1] || node->ne[1] != b->ne[1] ||
        node->ne[2] != b->ne[2] || node->ne[3] != b->ne[3] || b->ne[2] % a->ne[2] ||
        b->ne[3] % a->ne[3])
        return tg_status_new(TG_ERR_INVALID_ARG, "mul_mat: shapes of '%s' and '%s' do not fit",
                             a->name, b->name);
    if (node->nb[0] != sizeof(float))
        return tg_status_new(TG_ERR_UNSUPPORTED, "mul_mat: result '%s' is not contiguous in dim 0",
                             node->name);
    int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
    for (int64_t i3 = 0; i3 < b->ne[3]; i3++) {
        for (int64_t i2 = 0; i2 < b->ne[2]; i2++) {
            cpu_mat A = {.data = cpu_at(a, 0, 0, i2 / r2, i3 / r3), .type = a->type,
                         .sk = a->nb[0], .sj = a->nb[1]};
            cpu_mat B = {.data = cpu_at(b, 0, 0, i2, i3), .type = TG_F32, .sk = b->nb[0],
                         .sj = b->nb[1]};
            float *C = cpu_at(node, 0, 0, i2, i3);
            tg_status st = cpu_gemm(be, b->ne[1], a->ne[1], a->ne[0], &A, &B, C,
                                    (int64_t)(node->nb[1] / sizeof(float)), false);
            if (st) return st;
        }
    }
    return NULL;
}
