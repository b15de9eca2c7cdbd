/*
 * cpu_kernels.c: the portable vector kernels of the CPU backend, and the
 * choice of instruction set at run time.
 *
 * These loops are the reference the AVX2 and AVX-512 files are compared
 * with (tests/cpu), so they are written for clarity and exactness first:
 * f32 arithmetic as IEEE says, libm's expf, reductions accumulated in double.
 * They also serve every CPU without x86 vector units (ARM builds use them
 * as they are: NEON kernels are not written yet).
 *
 * Not here: index arithmetic over tensor strides (the op files), threading.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

#include "cpu_impl.h"

enum { S_MR = 4, S_NR = 16 };

static void s_gemm(int64_t kc, const float *b, int64_t ldb, const float *ap, float *c,
                   int64_t ldc, bool acc) {
    float t[S_MR][S_NR];
    memset(t, 0, sizeof t);
    for (int64_t k = 0; k < kc; k++) {
        const float *a = ap + k * S_NR;
        for (int i = 0; i < S_MR; i++)
            for (int j = 0; j < S_NR; j++) t[i][j] += b[i * ldb + k] * a[j];
    }
    for (int i = 0; i < S_MR; i++)
        for (int j = 0; j < S_NR; j++) c[i * ldc + j] = acc ? c[i * ldc + j] + t[i][j] : t[i][j];
}

static void s_to_f32(tg_type t, const void *x, float *y, int64_t n) {
    if (t == TG_F32) {
        memmove(y, x, (size_t)n * sizeof(float));
    } else if (t == TG_BF16) {
        const uint16_t *h = x;
        for (int64_t i = 0; i < n; i++) {
            uint32_t u = (uint32_t)h[i] << 16;
            memcpy(&y[i], &u, 4);
        }
    } else if (t == TG_F16) {
        const uint16_t *h = x;
        for (int64_t i = 0; i < n; i++) y[i] = tg_f16_to_f32(h[i]);
    } else {
        for (int64_t i = 0; i < n; i++)
            y[i] = cpu_load_f32(t, (const char *)x + i * (int64_t)tg_type_size(t));
    }
}

static void s_from_f32(tg_type t, const float *x, void *y, int64_t n) {
    if (t == TG_F32) {
        memmove(y, x, (size_t)n * sizeof(float));
    } else if (t == TG_BF16) {
        uint16_t *h = y;
        for (int64_t i = 0; i < n; i++) h[i] = tg_f32_to_bf16(x[i]);
    } else if (t == TG_F16) {
        uint16_t *h = y;
        for (int64_t i = 0; i < n; i++) h[i] = tg_f32_to_f16(x[i]);
    } else {
        tg_status st = tg_convert(TG_F32, x, t, y, (size_t)n);
        tg_status_free(st);
    }
}

static void s_pack_a(tg_type t, const void *a, size_t rs, int nrows, int64_t kc, int nr,
                     float *ap) {
    float row[256];
    for (int r = 0; r < nrows; r++) {
        const char *src = (const char *)a + (size_t)r * rs;
        for (int64_t k0 = 0; k0 < kc; k0 += 256) {
            int64_t n = kc - k0 < 256 ? kc - k0 : 256;
            s_to_f32(t, src + k0 * (int64_t)tg_type_size(t), row, n);
            for (int64_t k = 0; k < n; k++) ap[(k0 + k) * nr + r] = row[k];
        }
    }
    for (int r = nrows; r < nr; r++)
        for (int64_t k = 0; k < kc; k++) ap[k * nr + r] = 0.0f;
}

static inline float binop(enum cpu_binop op, float x, float y) {
    switch (op) {
    case CPU_ADD: return x + y;
    case CPU_SUB: return x - y;
    case CPU_MUL: return x * y;
    default: return x / y;
    }
}

static void s_binary(enum cpu_binop op, int64_t n, float *z, const float *x, const float *y) {
    for (int64_t i = 0; i < n; i++) z[i] = binop(op, x[i], y[i]);
}

static void s_binary_s(enum cpu_binop op, int64_t n, float *z, const float *x, float s) {
    for (int64_t i = 0; i < n; i++) z[i] = binop(op, x[i], s);
}

static void s_binary_sv(enum cpu_binop op, int64_t n, float *z, float s, const float *y) {
    for (int64_t i = 0; i < n; i++) z[i] = binop(op, s, y[i]);
}

static inline float sigmoidf(float x) {
    return 1.0f / (1.0f + expf(-x));
}

static void s_unary(enum cpu_unop op, int64_t n, float *y, const float *x, float p) {
    switch (op) {
    case CPU_RELU:
        for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
        break;
    case CPU_SILU:
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * sigmoidf(x[i]);
        break;
    case CPU_SIGMOID:
        for (int64_t i = 0; i < n; i++) y[i] = sigmoidf(x[i]);
        break;
    case CPU_SCALE:
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * p;
        break;
    case CPU_LOG:
        for (int64_t i = 0; i < n; i++) y[i] = logf(x[i]);
        break;
    case CPU_SQRT:
        for (int64_t i = 0; i < n; i++) y[i] = sqrtf(x[i]);
        break;
    }
}

static void s_glu(int64_t n, float *y, const float *a, const float *g) {
    for (int64_t i = 0; i < n; i++) y[i] = a[i] * sigmoidf(g[i]);
}

static float s_max(int64_t n, const float *x) {
    float m = -INFINITY;
    for (int64_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

static double s_exp_sum(int64_t n, float *y, const float *x, float m) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) {
        y[i] = expf(x[i] - m);
        s += y[i];
    }
    return s;
}

static double s_sum(int64_t n, const float *x) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += x[i];
    return s;
}

static double s_sum_sq_dev(int64_t n, const float *x, float m) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)x[i] - m;
        s += d * d;
    }
    return s;
}

static void s_norm(int64_t n, float *y, const float *x, float mean, float rstd, const float *w,
                   const float *b) {
    for (int64_t i = 0; i < n; i++) {
        float v = (x[i] - mean) * rstd;
        if (w) v *= w[i];
        if (b) v += b[i];
        y[i] = v;
    }
}

static float s_dot(int64_t n, const float *x, const float *y) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += (double)x[i] * y[i];
    return (float)s;
}

static void s_axpy(int64_t n, float a, const float *x, float *y) {
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

static void s_mad(int64_t n, float *y, const float *x, const float *w) {
    for (int64_t i = 0; i < n; i++) y[i] += x[i] * w[i];
}

const cpu_kernels cpu_kernels_scalar = {
    .name = "scalar",
    .mr = S_MR,
    .nr = S_NR,
    .gemm = s_gemm,
    .pack_a = s_pack_a,
    .to_f32 = s_to_f32,
    .from_f32 = s_from_f32,
    .binary = s_binary,
    .binary_s = s_binary_s,
    .binary_sv = s_binary_sv,
    .unary = s_unary,
    .glu = s_glu,
    .max = s_max,
    .exp_sum = s_exp_sum,
    .sum = s_sum,
    .sum_sq_dev = s_sum_sq_dev,
    .norm = s_norm,
    .dot = s_dot,
    .axpy = s_axpy,
    .mad = s_mad,
};

/* ------------------------------------------------------------- selection */

/* F16C is read from CPUID leaf 1 (ECX bit 29) directly: clang 14's
 * __builtin_cpu_supports does not know the "f16c" name. */
static bool cpu_has_f16c(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
    return (c >> 29) & 1u;
#else
    return false;
#endif
}

static bool cpu_has(const char *isa) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (!strcmp(isa, "avx2"))
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
               cpu_has_f16c();
    if (!strcmp(isa, "avx512"))
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("fma") && cpu_has_f16c();
#endif
    return !strcmp(isa, "scalar");
}

const char *cpu_isa_choose(void) {
    const char *env = getenv("CT_CPU_ISA");
    if (env && *env) {
        if (!strcmp(env, "scalar") || !strcmp(env, "avx2") || !strcmp(env, "avx512")) {
            if (cpu_has(env)) return !strcmp(env, "scalar") ? "scalar"
                                     : !strcmp(env, "avx2") ? "avx2" : "avx512";
            TG_WARN("CT_CPU_ISA=%s: this CPU cannot run it; choosing automatically", env);
        } else {
            TG_WARN("CT_CPU_ISA=%s: unknown (scalar, avx2 or avx512); choosing automatically", env);
        }
    }
    if (cpu_has("avx512")) return "avx512";
    if (cpu_has("avx2")) return "avx2";
    return "scalar";
}

bool cpu_kernels_select(const char *isa, cpu_kernels *k) {
    if (!cpu_has(isa)) return false;
    *k = cpu_kernels_scalar;
#if defined(__x86_64__)
    if (!strcmp(isa, "avx2")) cpu_kernels_avx2_init(k);
    if (!strcmp(isa, "avx512")) cpu_kernels_avx512_init(k);
#endif
    return true;
}
