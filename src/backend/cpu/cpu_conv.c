/*
 * cpu_conv.c: the convolutions of the CPU backend: conv_2d (groups = 1),
 * depthwise conv_2d_dw and depthwise conv_1d_dw (channels innermost).
 *
 * conv_2d is im2col followed by the shared GEMM (cpu_matmul.c): the input
 * patch matrix col[(kx, ky, ci)][pixel] is built per batch entry in scratch
 * and multiplied by the kernel (a 1x1 stride-1 convolution skips the patch
 * matrix: its input already is one). The depthwise ones are sums of scaled
 * rows: conv_2d_dw lays each input row of a plane out once, padded and
 * split into stride phases, so every tap is a contiguous axpy; conv_1d_dw runs across
 * contiguous channels with the vector multiply-add kernel.
 *
 * Not here: grouped convolutions other than depthwise, dilation, transposed
 * convolutions (the model has none).
 */
#include <string.h>

#include "cpu_impl.h"

/* In int64 as the constructors compute it: 2 * p overflows int for p >= 2^30. */
static inline int64_t out_size(int64_t in, int64_t k, int s, int p) {
    return (in + 2 * (int64_t)p - k) / s + 1;
}

/* ---------------------------------------------------------------- conv_2d */

typedef struct im2col_task {
    const tg_tensor *in;
    int64_t n;          /* batch entry */
    int64_t KW, KH, OW, OH;
    int s0, s1, p0, p1;
    float *col;         /* [KW*KH*Cin][OW*OH] */
} im2col_task;

static void im2col_fn(void *arg, int ith, int nth) {
    im2col_task *t = arg;
    const tg_tensor *in = t->in;
    int64_t rows = t->KW * t->KH * in->ne[2], lo, hi, P = t->OW * t->OH;
    cpu_range(rows, ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        int64_t kx = r % t->KW, ky = (r / t->KW) % t->KH, ci = r / (t->KW * t->KH);
        float *dst = t->col + r * P;
        for (int64_t oy = 0; oy < t->OH; oy++) {
            int64_t iy = oy * t->s1 - t->p1 + ky;
            float *d = dst + oy * t->OW;
            if (iy < 0 || iy >= in->ne[1]) {
                memset(d, 0, (size_t)t->OW * sizeof(float));
                continue;
            }
            const char *src = cpu_at(in, 0, iy, ci, t->n);
            for (int64_t ox = 0; ox < t->OW; ox++) {
                int64_t ix = ox * t->s0 - t->p0 + kx;
                d[ox] = ix < 0 || ix >= in->ne[0] ? 0.0f : *(const float *)(src + ix * in->nb[0]);
            }
        }
    }
}

tg_status cpu_op_conv_2d(cpu_backend *be, tg_tensor *node) {
    const tg_tensor *ker = node->src[0], *in = node->src[1];
    int s0 = tg_param_i32(node, 0), s1 = tg_param_i32(node, 1);
    int p0 = tg_param_i32(node, 2), p1 = tg_param_i32(node, 3);
    int64_t KW = ker->ne[0], KH = ker->ne[1], Cin = ker->ne[2], Cout = ker->ne[3];
    if (s0 <= 0 || s1 <= 0 || p0 < 0 || p1 < 0 || in->ne[2] != Cin ||
        node->ne[0] != out_size(in->ne[0], KW, s0, p0) ||
        node->ne[1] != out_size(in->ne[1], KH, s1, p1) || node->ne[2] != Cout ||
        node->ne[3] != in->ne[3])
        return tg_status_new(TG_ERR_INVALID_ARG, "conv_2d: kernel '%s' and input '%s' do not give "
                             "the result's shape", ker->name, in->name);
    int64_t OW = node->ne[0], OH = node->ne[1], P = OW * OH, K = KW * KH * Cin;
    if (node->nb[0] != sizeof(float) || node->nb[1] != (size_t)OW * sizeof(float) ||
        node->nb[2] % sizeof(float))
        return tg_status_new(TG_ERR_UNSUPPORTED, "conv_2d: result '%s' is not contiguous",
                             node->name);
    /* A 1x1 convolution with stride 1 and no padding over an input whose
     * pixels are contiguous needs no patch matrix: the input is one. */
    bool direct = KW == 1 && KH == 1 && s0 == 1 && s1 == 1 && p0 == 0 && p1 == 0 &&
                  in->nb[0] == sizeof(float) && in->nb[1] == (size_t)in->ne[0] * sizeof(float);
    /* Scratch: the kernel as [Cout][K] contiguous, then the patch matrix. */
    size_t kfl = (size_t)((K * Cout + 15) / 16 * 16);
    void *mem;
    tg_status st = cpu_scratch_outer(be, (kfl + (direct ? 0 : (size_t)(K * P))) * sizeof(float),
                                     &mem);
    if (st) return tg_status_wrap(st, "conv_2d");
    float *kc = mem, *col = kc + kfl;
    for (int64_t co = 0; co < Cout; co++)
        for (int64_t ci = 0; ci < Cin; ci++)
            for (int64_t ky = 0; ky < KH; ky++)
                for (int64_t kx = 0; kx < KW; kx++)
                    kc[co * K + (ci * KH + ky) * KW + kx] = *(const float *)cpu_at(ker, kx, ky, ci, co);
    for (int64_t n = 0; n < in->ne[3]; n++) {
        cpu_mat A = {.data = col, .type = TG_F32, .sk = (size_t)P * sizeof(float),
                     .sj = sizeof(float)};
        if (direct) {
            A.data = cpu_at(in, 0, 0, 0, n);
            A.sk = in->nb[2];
        } else {
            im2col_task t = {.in = in, .n = n, .KW = KW, .KH = KH, .OW = OW, .OH = OH, .s0 = s0,
                             .s1 = s1, .p0 = p0, .p1 = p1, .col = col};
            cpu_parallel(be, im2col_fn, &t, (double)(K * P));
        }
        /* out[pix, co] = sum_k col[k][pix] * kc[co][k]: pixels are the GEMM's
         * n (contiguous in the result), channels its m. */
        cpu_mat B = {.data = kc, .type = TG_F32, .sk = sizeof(float),
                     .sj = (size_t)K * sizeof(float)};
        st = cpu_gemm(be, Cout, P, K, &A, &B, cpu_at(node, 0, 0, 0, n),
                      (int64_t)(node->nb[2] / sizeof(float)), false);
        if (st) return tg_status_wrap(st, "conv_2d");
    }
    return NULL;
}

/* ------------------------------------------------------------- conv_2d_dw */

typedef struct dw_task {
    const cpu_kernels *k;
    tg_tensor *node;
    float *kbuf;        /* conv_1d_dw: kernel as [K][C]; conv_2d_dw: per-thread rows */
    int64_t row_stride; /* conv_2d_dw: floats per thread in kbuf */
} dw_task;

/* Each output row is a sum of KH x KW scaled input rows. Work is split by
 * (channel, batch) planes; each input row of a plane is laid out once, zero
 * padded and split into s0 phases (x[j*s0 + ph]), so every tap becomes a
 * contiguous multiply-add (axpy) whatever the stride. */
static void conv_2d_dw_fn(void *arg, int ith, int nth) {
    dw_task *t = arg;
    tg_tensor *n = t->node;
    const tg_tensor *ker = n->src[0], *in = n->src[1];
    int s0 = tg_param_i32(n, 0), s1 = tg_param_i32(n, 1);
    int p0 = tg_param_i32(n, 2), p1 = tg_param_i32(n, 3);
    int64_t KW = ker->ne[0], KH = ker->ne[1], OW = n->ne[0], OH = n->ne[1];
    int64_t W = in->ne[0], H = in->ne[1];
    int64_t Wp = (OW - 1) * s0 + KW;    /* padded input positions used */
    int64_t plen = (Wp + s0 - 1) / s0;  /* length of one phase */
    int64_t rlen = s0 * plen;           /* floats per prepared input row */
    float *rows = t->kbuf + ith * t->row_stride, *yb = rows + H * rlen;
    int64_t planes = n->ne[2] * n->ne[3], lo, hi;
    cpu_range(planes, ith, nth, &lo, &hi);
    for (int64_t pl = lo; pl < hi; pl++) {
        int64_t c = pl % n->ne[2], b = pl / n->ne[2];
        for (int64_t iy = 0; iy < H; iy++) {
            const char *src = cpu_at(in, 0, iy, c, b);
            float *dst = rows + iy * rlen;
            for (int q = 0; q < s0; q++) {
                /* phase q, element j is padded position i = j*s0 + q, input
                 * ix = i - p0: valid for j in [jlo, jhi) */
                float *d = dst + q * plen;
                int64_t jlo = p0 - q > 0 ? ((int64_t)p0 - q + s0 - 1) / s0 : 0;
                int64_t jhi = W + p0 - q > 0 ? (W + p0 - q + s0 - 1) / s0 : 0;
                if (jhi > (Wp - q + s0 - 1) / s0) jhi = (Wp - q + s0 - 1) / s0;
                if (jlo > jhi) jlo = jhi;
                for (int64_t j = 0; j < jlo; j++) d[j] = 0.0f;
                if (in->nb[0] == sizeof(float)) {
                    const float *sf = (const float *)src + (q - p0);
                    for (int64_t j = jlo; j < jhi; j++) d[j] = sf[j * s0];
                } else {
                    for (int64_t j = jlo; j < jhi; j++)
                        d[j] = *(const float *)(src + (j * s0 + q - p0) * (int64_t)in->nb[0]);
                }
                for (int64_t j = jhi; j < plen; j++) d[j] = 0.0f;
            }
        }
        for (int64_t oy = 0; oy < OH; oy++) {
            char *dst = cpu_at(n, 0, oy, c, b);
            float *y = n->nb[0] == sizeof(float) ? (float *)dst : yb;
            memset(y, 0, (size_t)OW * sizeof(float));
            for (int64_t ky = 0; ky < KH; ky++) {
                int64_t iy = oy * s1 - p1 + ky;
                if (iy < 0 || iy >= H) continue;
                const float *x = rows + iy * rlen;
                for (int64_t kx = 0; kx < KW; kx++) {
                    float w = *(const float *)cpu_at(ker, kx, ky, 0, c);
                    t->k->axpy(OW, w, x + (kx % s0) * plen + kx / s0, y);
                }
            }
            if (y == yb)
                for (int64_t ox = 0; ox < OW; ox++) *(float *)(dst + ox * n->nb[0]) = yb[ox];
        }
    }
}

tg_status cpu_op_conv_2d_dw(cpu_backend *be, tg_tensor *node) {
    const tg_tensor *ker = node->src[0], *in = node->src[1];
    int s0 = tg_param_i32(node, 0), s1 = tg_param_i32(node, 1);
    int p0 = tg_param_i32(node, 2), p1 = tg_param_i32(node, 3);
    if (s0 <= 0 || s1 <= 0 || p0 < 0 || p1 < 0 || ker->ne[2] != 1 || ker->ne[3] != in->ne[2] ||
        node->ne[0] != out_size(in->ne[0], ker->ne[0], s0, p0) ||
        node->ne[1] != out_size(in->ne[1], ker->ne[1], s1, p1) || node->ne[2] != in->ne[2] ||
        node->ne[3] != in->ne[3])
        return tg_status_new(TG_ERR_INVALID_ARG, "conv_2d_dw: kernel '%s' and input '%s' do not "
                             "give the result's shape", ker->name, in->name);
    int64_t OW = node->ne[0], Wp = (OW - 1) * s0 + ker->ne[0], plen = (Wp + s0 - 1) / s0;
    int64_t stride = (in->ne[1] * s0 * plen + OW + 15) / 16 * 16;
    void *mem;
    tg_status st = cpu_scratch(be, (size_t)(stride * be->n_threads) * sizeof(float), &mem);
    if (st) return tg_status_wrap(st, "conv_2d_dw");
    dw_task t = {.k = &be->k, .node = node, .kbuf = mem, .row_stride = stride};
    cpu_parallel(be, conv_2d_dw_fn, &t, (double)tg_nelements(node) * (double)(ker->ne[0] * ker->ne[1]));
    return NULL;
}

/* ------------------------------------------------------------- conv_1d_dw */

static void conv_1d_dw_fn(void *arg, int ith, int nth) {
    dw_task *t = arg;
    tg_tensor *n = t->node;
    const tg_tensor *ker = n->src[0], *in = n->src[1];
    int s = tg_param_i32(n, 0), p = tg_param_i32(n, 1);
    int64_t C = n->ne[0], OT = n->ne[1], K = ker->ne[0], T = in->ne[1];
    int64_t rows = OT * n->ne[2], lo, hi;
    float *cbuf = t->kbuf + K * C + (int64_t)ith * 2 * C;
    float *ybuf = cbuf + C;
    cpu_range(rows, ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        int64_t ot = r % OT, b = r / OT;
        char *pz = cpu_at(n, 0, ot, b, 0);
        float *y = n->nb[0] == sizeof(float) ? (float *)pz : ybuf;
        memset(y, 0, (size_t)C * sizeof(float));
        for (int64_t j = 0; j < K; j++) {
            int64_t it = ot * s - p + j;
            if (it < 0 || it >= T) continue;
            const char *px = cpu_at(in, 0, it, b, 0);
            const float *x = (const float *)px;
            if (in->nb[0] != sizeof(float)) {
                for (int64_t c = 0; c < C; c++) cbuf[c] = *(const float *)(px + c * in->nb[0]);
                x = cbuf;
            }
            t->k->mad(C, y, x, t->kbuf + j * C);
        }
        if (y == ybuf)
            for (int64_t c = 0; c < C; c++) *(float *)(pz + c * n->nb[0]) = y[c];
    }
}

tg_status cpu_op_conv_1d_dw(cpu_backend *be, tg_tensor *node) {
    const tg_tensor *ker = node->src[0], *in = node->src[1];
    int s = tg_param_i32(node, 0), p = tg_param_i32(node, 1);
    int64_t K = ker->ne[0], C = ker->ne[1];
    if (s <= 0 || p < 0 || in->ne[0] != C || node->ne[0] != C ||
        node->ne[1] != out_size(in->ne[1], K, s, p) || node->ne[2] != in->ne[2] ||
        ker->ne[2] != 1 || ker->ne[3] != 1 || in->ne[3] != 1)
        return tg_status_new(TG_ERR_INVALID_ARG, "conv_1d_dw: kernel '%s' and input '%s' do not "
                             "give the result's shape", ker->name, in->name);
    void *mem;
    tg_status st = cpu_scratch(be, (size_t)(K * C + 2 * C * be->n_threads) * sizeof(float), &mem);
    if (st) return tg_status_wrap(st, "conv_1d_dw");
    dw_task t = {.k = &be->k, .node = node, .kbuf = mem};
    /* The kernel transposed to [K][C], so each tap is a contiguous vector. */
    for (int64_t c = 0; c < C; c++)
        for (int64_t j = 0; j < K; j++) t.kbuf[j * C + c] = *(const float *)cpu_at(ker, j, c, 0, 0);
    cpu_parallel(be, conv_1d_dw_fn, &t, (double)tg_nelements(node) * (double)K);
    return NULL;
}
