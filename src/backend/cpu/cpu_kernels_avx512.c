/*
 * cpu_kernels_avx512.c: the AVX-512 kernels of the CPU backend (compiled
 * with -mavx512f/bw/vl/dq, used only when the CPU has them).
 *
 * The GEMM register tile is 6 rows x 64 columns: 24 zmm accumulators, four
 * loads of the packed weight panel and six broadcasts of the activations per
 * k, which keeps both FMA ports busy with loads to spare. The k loop is
 * unrolled by 4: without it the loop's own bookkeeping held the kernel to
 * ~80% of the FMA peak on cached data, with it ~100% (measured). pack_a converts
 * 16 rows x 16 k of bf16/f16/f32 weights at a time and transposes them in
 * registers into the [k][64] panel layout. exp is a Cephes-style polynomial
 * with range reduction by ln 2 and _mm512_scalef_ps for 2^n, accurate to
 * about 1 ulp over the whole float range and exact at the limits (0, inf,
 * NaN). f32 -> bf16 is integer rounding (not VCVTNEPS2BF16, which treats
 * subnormal inputs as zero) so that it matches tg_f32_to_bf16 bit for bit.
 *
 * Not here: anything not faster than the portable loop; the table starts
 * as cpu_kernels_scalar and only the entries below are replaced.
 */
#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu_impl.h"

enum { MR = 6, NR = 64 };

/* ------------------------------------------------------------------ GEMM */

static void gemm_6x64(int64_t kc, const float *b, int64_t ldb, const float *ap, float *c,
                      int64_t ldc, bool acc) {
    __m512 c00 = _mm512_setzero_ps(), c01 = c00, c02 = c00, c03 = c00;
    __m512 c10 = c00, c11 = c00, c12 = c00, c13 = c00;
    __m512 c20 = c00, c21 = c00, c22 = c00, c23 = c00;
    __m512 c30 = c00, c31 = c00, c32 = c00, c33 = c00;
    __m512 c40 = c00, c41 = c00, c42 = c00, c43 = c00;
    __m512 c50 = c00, c51 = c00, c52 = c00, c53 = c00;
    const float *b0 = b, *b1 = b + ldb, *b2 = b + 2 * ldb, *b3 = b + 3 * ldb, *b4 = b + 4 * ldb,
                *b5 = b + 5 * ldb;
#pragma GCC unroll 4
    for (int64_t k = 0; k < kc; k++) {
        const float *a = ap + k * NR;
        __m512 a0 = _mm512_load_ps(a), a1 = _mm512_load_ps(a + 16);
        __m512 a2 = _mm512_load_ps(a + 32), a3 = _mm512_load_ps(a + 48);
        __m512 bb;
#define ROW(i)                                 \
    bb = _mm512_set1_ps(b##i[k]);              \
    c##i##0 = _mm512_fmadd_ps(a0, bb, c##i##0); \
    c##i##1 = _mm512_fmadd_ps(a1, bb, c##i##1); \
    c##i##2 = _mm512_fmadd_ps(a2, bb, c##i##2); \
    c##i##3 = _mm512_fmadd_ps(a3, bb, c##i##3);
        ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5)
#undef ROW
    }
#define STORE(i)                                                                    \
    {                                                                               \
        float *r = c + (i) * ldc;                                                   \
        if (acc) {                                                                  \
            c##i##0 = _mm512_add_ps(c##i##0, _mm512_loadu_ps(r));                   \
            c##i##1 = _mm512_add_ps(c##i##1, _mm512_loadu_ps(r + 16));              \
            c##i##2 = _mm512_add_ps(c##i##2, _mm512_loadu_ps(r + 32));              \
            c##i##3 = _mm512_add_ps(c##i##3, _mm512_loadu_ps(r + 48));              \
        }                                                                           \
        _mm512_storeu_ps(r, c##i##0);                                               \
        _mm512_storeu_ps(r + 16, c##i##1);                                          \
        _mm512_storeu_ps(r + 32, c##i##2);                                          \
        _mm512_storeu_ps(r + 48, c##i##3);                                          \
    }
    STORE(0) STORE(1) STORE(2) STORE(3) STORE(4) STORE(5)
#undef STORE
}


/* An edge tile: rows < mr and columns < nr of the 6 x 64 tile, with NV =
 * ceil(nr / 16) column vectors computed (the last one stored under a mask).
 * B must have 6 readable rows (the driver pads short panels). */
static inline __attribute__((always_inline)) void
gemm_6xv(int64_t kc, const float *b, int64_t ldb, const float *ap, float *c, int64_t ldc, bool acc,
         int mr, int nr, const int NV) {
    __m512 t[6][4];
#pragma GCC unroll 6
    for (int i = 0; i < 6; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++) t[i][j] = _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int64_t k = 0; k < kc; k++) {
        const float *a = ap + k * NR;
        __m512 av[4];
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++) av[j] = _mm512_load_ps(a + 16 * j);
#pragma GCC unroll 6
        for (int i = 0; i < 6; i++) {
            __m512 bb = _mm512_set1_ps(b[i * ldb + k]);
#pragma GCC unroll 4
            for (int j = 0; j < NV; j++) t[i][j] = _mm512_fmadd_ps(av[j], bb, t[i][j]);
        }
    }
    __mmask16 last = (__mmask16)(nr - 16 * (NV - 1) >= 16 ? 0xffff : (1u << (nr - 16 * (NV - 1))) - 1);
#pragma GCC unroll 6
    for (int i = 0; i < 6; i++) {
        if (i >= mr) break;
        float *r = c + i * ldc;
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++) {
            __mmask16 m = j == NV - 1 ? last : 0xffff;
            __m512 v = t[i][j];
            if (acc) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, r + 16 * j));
            _mm512_mask_storeu_ps(r + 16 * j, m, v);
        }
    }
}

static void gemm_part(int64_t kc, const float *b, int64_t ldb, const float *ap, float *c,
                      int64_t ldc, bool acc, int mr, int nr) {
    switch ((nr + 15) / 16) {
    case 1: gemm_6xv(kc, b, ldb, ap, c, ldc, acc, mr, nr, 1); break;
    case 2: gemm_6xv(kc, b, ldb, ap, c, ldc, acc, mr, nr, 2); break;
    case 3: gemm_6xv(kc, b, ldb, ap, c, ldc, acc, mr, nr, 3); break;
    default: gemm_6xv(kc, b, ldb, ap, c, ldc, acc, mr, nr, 4); break;
    }
}

/* -------------------------------------------------------------- converts */

static inline __m512 load16_f32(tg_type t, const void *p, __mmask16 m) {
    if (t == TG_BF16) {
        __m256i h = _mm256_maskz_loadu_epi16(m, p);
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    if (t == TG_F16) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
    return _mm512_maskz_loadu_ps(m, p);
}

static inline __m256i f32_to_bf16_16(__m512 x) {
    __m512i u = _mm512_castps_si512(x);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
    r = _mm512_srli_epi32(r, 16);
    __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(r);
}

static void to_f32(tg_type t, const void *x, float *y, int64_t n) {
    size_t es = t == TG_F32 ? 4 : 2;
    if (t != TG_F32 && t != TG_F16 && t != TG_BF16) {
        cpu_kernels_scalar.to_f32(t, x, y, n);
        return;
    }
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, load16_f32(t, (const char *)x + i * es, 0xffff));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, load16_f32(t, (const char *)x + i * es, m));
    }
}

static void from_f32(tg_type t, const float *x, void *y, int64_t n) {
    if (t != TG_F16 && t != TG_BF16) {
        cpu_kernels_scalar.from_f32(t, x, y, n);
        return;
    }
    uint16_t *h = y;
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        __m256i r = t == TG_BF16 ? f32_to_bf16_16(v)
                                 : _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm256_mask_storeu_epi16(h + i, m, r);
    }
}

/* Transposes 16 vectors in place: r[j][i] <- r[i][j]. */
static inline void transpose16(__m512 r[16]) {
    __m512 t[16], u[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int g = 0; g < 4; g++) {
        __m512d t0 = _mm512_castps_pd(t[4 * g]), t1 = _mm512_castps_pd(t[4 * g + 1]);
        __m512d t2 = _mm512_castps_pd(t[4 * g + 2]), t3 = _mm512_castps_pd(t[4 * g + 3]);
        u[4 * g + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
        u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
        u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
        u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
    }
    /* u[4g + c], 128-bit lane L, holds column 4L + c of rows 4g..4g+3. */
    for (int c = 0; c < 4; c++) {
        __m512 x0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88);
        __m512 x1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xdd);
        __m512 x2 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
        __m512 x3 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xdd);
        r[c] = _mm512_shuffle_f32x4(x0, x2, 0x88);
        r[4 + c] = _mm512_shuffle_f32x4(x1, x3, 0x88);
        r[8 + c] = _mm512_shuffle_f32x4(x0, x2, 0xdd);
        r[12 + c] = _mm512_shuffle_f32x4(x1, x3, 0xdd);
    }
}

static void pack_a(tg_type t, const void *a, size_t rs, int nrows, int64_t kc, int nr, float *ap) {
    if ((t != TG_F32 && t != TG_F16 && t != TG_BF16) || nr % 16) {
        cpu_kernels_scalar.pack_a(t, a, rs, nrows, kc, nr, ap);
        return;
    }
    size_t es = t == TG_F32 ? 4 : 2;
    for (int r0 = 0; r0 < nr; r0 += 16) {
        for (int64_t k0 = 0; k0 < kc; k0 += 16) {
            int64_t kn = kc - k0 < 16 ? kc - k0 : 16;
            __mmask16 m = kn == 16 ? 0xffff : (__mmask16)((1u << kn) - 1);
            __m512 v[16];
            for (int i = 0; i < 16; i++) {
                int r = r0 + i;
                v[i] = r < nrows ? load16_f32(t, (const char *)a + (size_t)r * rs + k0 * es, m)
                                 : _mm512_setzero_ps();
            }
            transpose16(v);
            for (int64_t j = 0; j < kn; j++) _mm512_store_ps(ap + (k0 + j) * nr + r0, v[j]);
        }
    }
}

/* ------------------------------------------------------------- elementwise */

static inline __m512 binop(enum cpu_binop op, __m512 x, __m512 y) {
    switch (op) {
    case CPU_ADD: return _mm512_add_ps(x, y);
    case CPU_SUB: return _mm512_sub_ps(x, y);
    case CPU_MUL: return _mm512_mul_ps(x, y);
    default: return _mm512_div_ps(x, y);
    }
}

static inline __mmask16 tail(int64_t left) {
    return left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1);
}

static void binary(enum cpu_binop op, int64_t n, float *z, const float *x, const float *y) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(z + i, binop(op, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
    if (i < n) {
        __mmask16 m = tail(n - i);
        /* masked-off lanes compute 1 op 1, never a spurious exception */
        __m512 one = _mm512_set1_ps(1.0f);
        __m512 r = binop(op, _mm512_mask_loadu_ps(one, m, x + i), _mm512_mask_loadu_ps(one, m, y + i));
        _mm512_mask_storeu_ps(z + i, m, r);
    }
}

static void binary_s(enum cpu_binop op, int64_t n, float *z, const float *x, float s) {
    __m512 sv = _mm512_set1_ps(s), one = _mm512_set1_ps(1.0f);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail(n - i);
        _mm512_mask_storeu_ps(z + i, m, binop(op, _mm512_mask_loadu_ps(one, m, x + i), sv));
    }
}

static void binary_sv(enum cpu_binop op, int64_t n, float *z, float s, const float *y) {
    __m512 sv = _mm512_set1_ps(s), one = _mm512_set1_ps(1.0f);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail(n - i);
        _mm512_mask_storeu_ps(z + i, m, binop(op, sv, _mm512_mask_loadu_ps(one, m, y + i)));
    }
}

/* exp(x): n = round(x / ln2), r = x - n ln2 (two-part constant), Cephes'
 * degree-5 polynomial for exp(r) on [-ln2/2, ln2/2], scaled by 2^n. */
static inline __m512 exp16(__m512 x) {
    __m512 xc = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(89.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), xc);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500E-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507E-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073E-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894E-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459E-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201E-1f));
    __m512 r2 = _mm512_mul_ps(r, r);
    p = _mm512_fmadd_ps(p, r2, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    __m512 e = _mm512_scalef_ps(p, n);
    /* NaN in, NaN out (the clamp above would have turned it into a number). */
    return _mm512_mask_mov_ps(e, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

/* 1 / (1 + exp(-x)) with the division as a 14-bit reciprocal estimate and
 * one Newton step (~1 ulp; a true division costs more than the exp). d is
 * in [1, inf]. Where exp(-x) overflows (x below about -88.7) d is inf, whose
 * estimate is 0, but the step's d * 0 would make it NaN: those lanes get 0,
 * as 1 / inf is. */
static inline __m512 sigmoid16(__m512 x) {
    __m512 one = _mm512_set1_ps(1.0f);
    __m512 d = _mm512_add_ps(one, exp16(_mm512_sub_ps(_mm512_setzero_ps(), x)));
    __m512 r = _mm512_rcp14_ps(d);
    r = _mm512_mul_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(2.0f)));
    r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(d, _mm512_set1_ps(INFINITY), _CMP_EQ_OQ), _mm512_setzero_ps());
    return _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(d, d, _CMP_UNORD_Q), d);
}

static void unary(enum cpu_unop op, int64_t n, float *y, const float *x, float p) {
    if (op == CPU_LOG) { /* no vector log of our own: libm's, per value */
        cpu_kernels_scalar.unary(op, n, y, x, p);
        return;
    }
    __m512 pv = _mm512_set1_ps(p), zero = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail(n - i);
        __m512 v = _mm512_maskz_loadu_ps(m, x + i), r;
        switch (op) {
        case CPU_RELU: r = _mm512_max_ps(v, zero); break;
        case CPU_SILU: r = _mm512_mul_ps(v, sigmoid16(v)); break;
        case CPU_SIGMOID: r = sigmoid16(v); break;
        case CPU_SQRT: r = _mm512_sqrt_ps(v); break;
        default: r = _mm512_mul_ps(v, pv); break;
        }
        _mm512_mask_storeu_ps(y + i, m, r);
    }
}

static void glu(int64_t n, float *y, const float *a, const float *g) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail(n - i);
        __m512 r = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, a + i),
                                 sigmoid16(_mm512_maskz_loadu_ps(m, g + i)));
        _mm512_mask_storeu_ps(y + i, m, r);
    }
}

static float vmax(int64_t n, const float *x) {
    __m512 acc = _mm512_set1_ps(-INFINITY);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail(n - i);
        acc = _mm512_max_ps(acc, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), m, x + i));
    }
    return _mm512_reduce_max_ps(acc);
}

/* Sums 16 f32 lanes in double. */
static inline double hsum_d(__m512 v) {
    __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    return _mm512_reduce_add_pd(_mm512_add_pd(lo, hi));
}

/* Blocks of 256 elements are summed in f32 lanes, then folded into double:
 * the f32 part sees at most 16 additions per lane. */
static double exp_sum(int64_t n, float *y, const float *x, float mx) {
    __m512 mv = _mm512_set1_ps(mx);
    double s = 0.0;
    for (int64_t b = 0; b < n; b += 256) {
        int64_t e = n - b < 256 ? n : b + 256;
        __m512 acc = _mm512_setzero_ps();
        for (int64_t i = b; i < e; i += 16) {
            __mmask16 m = tail(e - i);
            __m512 v = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), mv));
            v = _mm512_maskz_mov_ps(m, v);
            _mm512_mask_storeu_ps(y + i, m, v);
            acc = _mm512_add_ps(acc, v);
        }
        s += hsum_d(acc);
    }
    return s;
}

static double sum(int64_t n, const float *x) {
    double s = 0.0;
    for (int64_t b = 0; b < n; b += 256) {
        int64_t e = n - b < 256 ? n : b + 256;
        __m512 acc = _mm512_setzero_ps();
        for (int64_t i = b; i < e; i += 16) acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(tail(e - i), x + i));
        s += hsum_d(acc);
    }
    return s;
}

static double sum_sq_dev(int64_t n, const float *x, float mean) {
    __m512 mv = _mm512_set1_ps(mean);
    double s = 0.0;
    for (int64_t b = 0; b < n; b += 256) {
        int64_t e = n - b < 256 ? n : b + 256;
        __m512 acc = _mm512_setzero_ps();
        for (int64_t i = b; i < e; i += 16) {
            __mmask16 m = tail(e - i);
            __m512 d = _mm512_maskz_sub_ps(m, _mm512_maskz_loadu_ps(m, x + i), mv);
            acc = _mm512_fmadd_ps(d, d, acc);
        }
        s += hsum_d(acc);
    }
    return s;
}

static void norm(int64_t n, float *y, const float *x, float mean, float rstd, const float *w,
                 const float *b) {
    __m512 mv = _mm512_set1_ps(mean), rv = _mm512_set1_ps(rstd);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail(n - i);
        __m512 v = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), mv), rv);
        if (w) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, w + i));
        if (b) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, b + i));
        _mm512_mask_storeu_ps(y + i, m, v);
    }
}

static float dot(int64_t n, const float *x, const float *y) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), a0);
        a1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(y + i + 16), a1);
        a2 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 32), _mm512_loadu_ps(y + i + 32), a2);
        a3 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 48), _mm512_loadu_ps(y + i + 48), a3);
    }
    for (; i < n; i += 16) {
        __mmask16 m = tail(n - i);
        a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i), a0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

static void axpy(int64_t n, float a, const float *x, float *y) {
    __m512 av = _mm512_set1_ps(a);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail(n - i);
        __m512 r = _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i));
        _mm512_mask_storeu_ps(y + i, m, r);
    }
}

static void mad(int64_t n, float *y, const float *x, const float *w) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail(n - i);
        __m512 r = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, w + i),
                                   _mm512_maskz_loadu_ps(m, y + i));
        _mm512_mask_storeu_ps(y + i, m, r);
    }
}

void cpu_kernels_avx512_init(cpu_kernels *k) {
    k->name = "avx512";
    k->mr = MR;
    k->nr = NR;
    k->gemm = gemm_6x64;
    k->gemm_part = gemm_part;
    k->pack_a = pack_a;
    k->to_f32 = to_f32;
    k->from_f32 = from_f32;
    k->binary = binary;
    k->binary_s = binary_s;
    k->binary_sv = binary_sv;
    k->unary = unary;
    k->glu = glu;
    k->max = vmax;
    k->exp_sum = exp_sum;
    k->sum = sum;
    k->sum_sq_dev = sum_sq_dev;
    k->norm = norm;
    k->dot = dot;
    k->axpy = axpy;
    k->mad = mad;
}
#endif
