/*
 * cpu_kernels_avx2.c: the AVX2 + FMA + F16C kernels of the CPU backend
 * (compiled with -mavx2 -mfma -mf16c, used only when the CPU has them).
 *
 * The GEMM register tile is 6 rows x 16 columns (12 ymm accumulators, two
 * panel loads and six broadcasts per k), the classic shape for 16 ymm
 * registers. pack_a transposes 8 x 8 blocks in registers. exp uses the
 * same reduction and polynomial as the AVX-512 file, with 2^n built from
 * exponent bits in two halves so the whole float range (subnormal results,
 * overflow to inf) comes out right without scalef. Loops end with the
 * scalar kernel on the last n % 8 elements instead of masked loads.
 *
 * Not here: anything not faster than the portable loop; the table starts
 * as cpu_kernels_scalar and only the entries below are replaced.
 */
#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu_impl.h"

enum { MR = 6, NR = 16 };

#define S (&cpu_kernels_scalar)

static void gemm_6x16(int64_t kc, const float *b, int64_t ldb, const float *ap, float *c,
                      int64_t ldc, bool acc) {
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    const float *b0 = b, *b1 = b + ldb, *b2 = b + 2 * ldb, *b3 = b + 3 * ldb, *b4 = b + 4 * ldb,
                *b5 = b + 5 * ldb;
#pragma GCC unroll 4
    for (int64_t k = 0; k < kc; k++) {
        const float *a = ap + k * NR;
        __m256 a0 = _mm256_load_ps(a), a1 = _mm256_load_ps(a + 8), bb;
#define ROW(i)                                   \
    bb = _mm256_broadcast_ss(b##i + k);          \
    c##i##0 = _mm256_fmadd_ps(a0, bb, c##i##0);  \
    c##i##1 = _mm256_fmadd_ps(a1, bb, c##i##1);
        ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5)
#undef ROW
    }
#define STORE(i)                                                          \
    {                                                                     \
        float *r = c + (i) * ldc;                                         \
        if (acc) {                                                        \
            c##i##0 = _mm256_add_ps(c##i##0, _mm256_loadu_ps(r));         \
            c##i##1 = _mm256_add_ps(c##i##1, _mm256_loadu_ps(r + 8));     \
        }                                                                 \
        _mm256_storeu_ps(r, c##i##0);                                     \
        _mm256_storeu_ps(r + 8, c##i##1);                                 \
    }
    STORE(0) STORE(1) STORE(2) STORE(3) STORE(4) STORE(5)
#undef STORE
}

static inline __m256 load8_f32(tg_type t, const void *p) {
    if (t == TG_BF16) {
        __m128i h = _mm_loadu_si128(p);
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    if (t == TG_F16) return _mm256_cvtph_ps(_mm_loadu_si128(p));
    return _mm256_loadu_ps(p);
}

static inline __m128i f32_to_bf16_8(__m256 x) {
    __m256i u = _mm256_castps_si256(x);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
    __m256i q = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    r = _mm256_blendv_epi8(r, q, nan);
    /* pack 8 x u32 (< 65536) to u16 */
    __m128i lo = _mm256_castsi256_si128(r), hi = _mm256_extracti128_si256(r, 1);
    return _mm_packus_epi32(lo, hi);
}

static void to_f32(tg_type t, const void *x, float *y, int64_t n) {
    if (t != TG_F32 && t != TG_F16 && t != TG_BF16) {
        S->to_f32(t, x, y, n);
        return;
    }
    size_t es = t == TG_F32 ? 4 : 2;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, load8_f32(t, (const char *)x + i * es));
    if (i < n) S->to_f32(t, (const char *)x + i * es, y + i, n - i);
}

static void from_f32(tg_type t, const float *x, void *y, int64_t n) {
    if (t != TG_F16 && t != TG_BF16) {
        S->from_f32(t, x, y, n);
        return;
    }
    uint16_t *h = y;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m128i r = t == TG_BF16 ? f32_to_bf16_8(v)
                                 : _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128((__m128i *)(h + i), r);
    }
    if (i < n) S->from_f32(t, x + i, h + i, n - i);
}

static inline void transpose8(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int g = 0; g < 2; g++) {
        u[4 * g + 0] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
        u[4 * g + 1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0xee);
        u[4 * g + 2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
        u[4 * g + 3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xee);
    }
    for (int c = 0; c < 4; c++) {
        r[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
        r[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
    }
}

static void pack_a(tg_type t, const void *a, size_t rs, int nrows, int64_t kc, int nr, float *ap) {
    if ((t != TG_F32 && t != TG_F16 && t != TG_BF16) || nr % 8) {
        S->pack_a(t, a, rs, nrows, kc, nr, ap);
        return;
    }
    size_t es = t == TG_F32 ? 4 : 2;
    int64_t kfull = kc / 8 * 8;
    for (int r0 = 0; r0 < nr; r0 += 8) {
        for (int64_t k0 = 0; k0 < kfull; k0 += 8) {
            __m256 v[8];
            for (int i = 0; i < 8; i++) {
                int r = r0 + i;
                v[i] = r < nrows ? load8_f32(t, (const char *)a + (size_t)r * rs + k0 * es)
                                 : _mm256_setzero_ps();
            }
            transpose8(v);
            for (int j = 0; j < 8; j++) _mm256_store_ps(ap + (k0 + j) * nr + r0, v[j]);
        }
        for (int64_t k = kfull; k < kc; k++)
            for (int i = 0; i < 8; i++) {
                int r = r0 + i;
                ap[k * nr + r] = r < nrows ? cpu_load_f32(t, (const char *)a + (size_t)r * rs + k * es)
                                           : 0.0f;
            }
    }
}

static inline __m256 binop(enum cpu_binop op, __m256 x, __m256 y) {
    switch (op) {
    case CPU_ADD: return _mm256_add_ps(x, y);
    case CPU_SUB: return _mm256_sub_ps(x, y);
    case CPU_MUL: return _mm256_mul_ps(x, y);
    default: return _mm256_div_ps(x, y);
    }
}

static void binary(enum cpu_binop op, int64_t n, float *z, const float *x, const float *y) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(z + i, binop(op, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    if (i < n) S->binary(op, n - i, z + i, x + i, y + i);
}

static void binary_s(enum cpu_binop op, int64_t n, float *z, const float *x, float s) {
    __m256 sv = _mm256_set1_ps(s);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(z + i, binop(op, _mm256_loadu_ps(x + i), sv));
    if (i < n) S->binary_s(op, n - i, z + i, x + i, s);
}

static void binary_sv(enum cpu_binop op, int64_t n, float *z, float s, const float *y) {
    __m256 sv = _mm256_set1_ps(s);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(z + i, binop(op, sv, _mm256_loadu_ps(y + i)));
    if (i < n) S->binary_sv(op, n - i, z + i, s, y + i);
}

static inline __m256 pow2i(__m256i n) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
}

static inline __m256 exp8(__m256 x) {
    __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-104.0f)), _mm256_set1_ps(89.0f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500E-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507E-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073E-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894E-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459E-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201E-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    /* 2^n as 2^n1 * 2^n2 with both halves normal, n in [-150, 128]. */
    __m256i ni = _mm256_cvtps_epi32(n);
    __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    __m256 e = _mm256_mul_ps(_mm256_mul_ps(p, pow2i(n1)), pow2i(n2));
    return _mm256_blendv_ps(e, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

static inline __m256 sigmoid8(__m256 x) {
    __m256 one = _mm256_set1_ps(1.0f);
    return _mm256_div_ps(one, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

static void unary(enum cpu_unop op, int64_t n, float *y, const float *x, float p) {
    if (op == CPU_LOG) { /* no vector log of our own: libm's, per value */
        S->unary(op, n, y, x, p);
        return;
    }
    __m256 pv = _mm256_set1_ps(p), zero = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i), r;
        switch (op) {
        case CPU_RELU: r = _mm256_max_ps(v, zero); break;
        case CPU_SILU: r = _mm256_mul_ps(v, sigmoid8(v)); break;
        case CPU_SIGMOID: r = sigmoid8(v); break;
        case CPU_SQRT: r = _mm256_sqrt_ps(v); break;
        default: r = _mm256_mul_ps(v, pv); break;
        }
        _mm256_storeu_ps(y + i, r);
    }
    if (i < n) S->unary(op, n - i, y + i, x + i, p);
}

static void glu(int64_t n, float *y, const float *a, const float *g) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(a + i), sigmoid8(_mm256_loadu_ps(g + i))));
    if (i < n) S->glu(n - i, y + i, a + i, g + i);
}

static inline float hmax8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

static float vmax(int64_t n, const float *x) {
    __m256 acc = _mm256_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) acc = _mm256_max_ps(acc, _mm256_loadu_ps(x + i));
    float m = hmax8(acc);
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

static inline double hsum_d(__m256 v) {
    __m256d a = _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)),
                              _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

static double exp_sum(int64_t n, float *y, const float *x, float mx) {
    __m256 mv = _mm256_set1_ps(mx);
    double s = 0.0;
    int64_t i = 0;
    while (i + 8 <= n) {
        __m256 acc = _mm256_setzero_ps();
        int64_t e = n - i < 128 ? n : i + 128;
        for (; i + 8 <= e; i += 8) {
            __m256 v = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv));
            _mm256_storeu_ps(y + i, v);
            acc = _mm256_add_ps(acc, v);
        }
        s += hsum_d(acc);
    }
    if (i < n) s += S->exp_sum(n - i, y + i, x + i, mx);
    return s;
}

static double sum(int64_t n, const float *x) {
    double s = 0.0;
    int64_t i = 0;
    while (i + 8 <= n) {
        __m256 acc = _mm256_setzero_ps();
        int64_t e = n - i < 128 ? n : i + 128;
        for (; i + 8 <= e; i += 8) acc = _mm256_add_ps(acc, _mm256_loadu_ps(x + i));
        s += hsum_d(acc);
    }
    if (i < n) s += S->sum(n - i, x + i);
    return s;
}

static double sum_sq_dev(int64_t n, const float *x, float mean) {
    __m256 mv = _mm256_set1_ps(mean);
    double s = 0.0;
    int64_t i = 0;
    while (i + 8 <= n) {
        __m256 acc = _mm256_setzero_ps();
        int64_t e = n - i < 128 ? n : i + 128;
        for (; i + 8 <= e; i += 8) {
            __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), mv);
            acc = _mm256_fmadd_ps(d, d, acc);
        }
        s += hsum_d(acc);
    }
    if (i < n) s += S->sum_sq_dev(n - i, x + i, mean);
    return s;
}

static void norm(int64_t n, float *y, const float *x, float mean, float rstd, const float *w,
                 const float *b) {
    __m256 mv = _mm256_set1_ps(mean), rv = _mm256_set1_ps(rstd);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv), rv);
        if (w) v = _mm256_mul_ps(v, _mm256_loadu_ps(w + i));
        if (b) v = _mm256_add_ps(v, _mm256_loadu_ps(b + i));
        _mm256_storeu_ps(y + i, v);
    }
    if (i < n) S->norm(n - i, y + i, x + i, mean, rstd, w ? w + i : NULL, b ? b + i : NULL);
}

static float dot(int64_t n, const float *x, const float *y) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(y + i + 16), a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(y + i + 24), a3);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
    double s = hsum_d(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; i++) s += (double)x[i] * y[i];
    return (float)s;
}

static void axpy(int64_t n, float a, const float *x, float *y) {
    __m256 av = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    if (i < n) S->axpy(n - i, a, x + i, y + i);
}

static void mad(int64_t n, float *y, const float *x, const float *w) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(w + i),
                                                _mm256_loadu_ps(y + i)));
    if (i < n) S->mad(n - i, y + i, x + i, w + i);
}

void cpu_kernels_avx2_init(cpu_kernels *k) {
    k->name = "avx2";
    k->mr = MR;
    k->nr = NR;
    k->gemm = gemm_6x16;
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
