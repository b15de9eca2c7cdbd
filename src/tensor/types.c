/*
 * types.c: element types of the tensor runtime: sizes, names, the f16 and
 * bf16 conversions and tg_convert between any two types.
 *
 * The half-precision conversions are written with integer arithmetic so that
 * they round to nearest even exactly (ties included), keep NaN a NaN (quiet)
 * and Inf an Inf, and produce f16 subnormals, independent of the compiler's or
 * the CPU's float16 support. They are the reference the backends are checked
 * against; the backends may use F16C/AVX-512 instructions for speed.
 *
 * tg_convert reads and writes element by element with memcpy, so its
 * buffers may have any alignment (weights straight from a mapping).
 *
 * Not here: block-quantized types (none yet), vectorised conversion loops.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base.h"
#include "tg.h"

size_t tg_type_size(tg_type t) {
    switch (t) {
    case TG_F32: return 4;
    case TG_F16: return 2;
    case TG_BF16: return 2;
    case TG_I32: return 4;
    case TG_I64: return 8;
    default: return 0;
    }
}

const char *tg_type_name(tg_type t) {
    switch (t) {
    case TG_F32: return "f32";
    case TG_F16: return "f16";
    case TG_BF16: return "bf16";
    case TG_I32: return "i32";
    case TG_I64: return "i64";
    default: return "invalid-type";
    }
}

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float tg_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x3ffu;
    if (e == 0) {
        /* zero or subnormal: m * 2^-24, exact in f32 */
        float v = (float)m * 0x1p-24f;
        return sign ? -v : v;
    }
    if (e == 31) return bits_f32(sign | 0x7f800000u | (m << 13));
    return bits_f32(sign | ((e - 15 + 127) << 23) | (m << 13));
}

uint16_t tg_f32_to_f16(float f) {
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) {
        if (ax > 0x7f800000u) /* NaN: quiet, keep the top payload bits */
            return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
        return (uint16_t)(sign | 0x7c00u);
    }
    /* 65520 is halfway between 65504 (max, odd mantissa) and 65536: ties go up. */
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x38800000u) { /* normal f16 (>= 2^-14) */
        uint32_t e = (ax >> 23) - 127 + 15;
        uint32_t mant = ax & 0x7fffffu;
        uint32_t h = (e << 10) | (mant >> 13);
        uint32_t rem = mant & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* carry may bump e */
        return (uint16_t)(sign | h);
    }
    /* subnormal f16 or zero: value / 2^-24 rounded to nearest even */
    uint32_t E = ax >> 23;
    if (E == 0) return sign; /* f32 zero or subnormal: far below 2^-25 */
    uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - E; /* >= 14 here */
    if (shift > 24) return sign;
    uint32_t h = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}

float tg_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t tg_f32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: quiet, never truncated to Inf */
        return (uint16_t)((x >> 16) | 0x40u);
    /* round to nearest even; overflow carries into Inf correctly */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

/* ------------------------------------------------------------ tg_convert */

static bool type_is_float(tg_type t) { return t == TG_F32 || t == TG_F16 || t == TG_BF16; }

/* Element i of p, read with memcpy: checkpoint data may sit at any byte
 * offset (a safetensors header of odd length), and an unaligned load through
 * a typed pointer is undefined behaviour. Compilers turn these into plain
 * loads where the target allows them. */
static uint16_t load_u16(const void *p, size_t i) {
    uint16_t v;
    memcpy(&v, (const unsigned char *)p + i * sizeof v, sizeof v);
    return v;
}

static float load_float(tg_type t, const void *p, size_t i) {
    switch (t) {
    case TG_F32: {
        float v;
        memcpy(&v, (const unsigned char *)p + i * sizeof v, sizeof v);
        return v;
    }
    case TG_F16: return tg_f16_to_f32(load_u16(p, i));
    default: return tg_bf16_to_f32(load_u16(p, i));
    }
}

static int64_t load_int(tg_type t, const void *p, size_t i) {
    if (t == TG_I32) {
        int32_t v;
        memcpy(&v, (const unsigned char *)p + i * sizeof v, sizeof v);
        return v;
    }
    int64_t v;
    memcpy(&v, (const unsigned char *)p + i * sizeof v, sizeof v);
    return v;
}

/* Float to integer: truncation toward zero, NaN to 0, saturating at the
 * destination's limits (C leaves out-of-range conversions undefined). */
static int64_t float_to_int(float v, tg_type dst) {
    if (isnan(v)) return 0;
    double d = trunc((double)v);
    double lo = dst == TG_I32 ? (double)INT32_MIN : -9223372036854775808.0;
    double hi = dst == TG_I32 ? (double)INT32_MAX : 9223372036854775807.0;
    if (d <= lo) return dst == TG_I32 ? INT32_MIN : INT64_MIN;
    if (d >= hi) return dst == TG_I32 ? INT32_MAX : INT64_MAX;
    return (int64_t)d;
}

/* Stores through memcpy, for the same reason as the loads. */
static void store_bytes(void *p, size_t i, const void *v, size_t size) {
    memcpy((unsigned char *)p + i * size, v, size);
}

static void store_float(tg_type t, void *p, size_t i, float v) {
    uint16_t h;
    switch (t) {
    case TG_F32: store_bytes(p, i, &v, sizeof v); break;
    case TG_F16: h = tg_f32_to_f16(v); store_bytes(p, i, &h, sizeof h); break;
    default: h = tg_f32_to_bf16(v); store_bytes(p, i, &h, sizeof h); break;
    }
}

static void store_int(tg_type t, void *p, size_t i, int64_t v) {
    if (t == TG_I32) {
        if (v > INT32_MAX) v = INT32_MAX;
        if (v < INT32_MIN) v = INT32_MIN;
        int32_t w = (int32_t)v;
        store_bytes(p, i, &w, sizeof w);
    } else {
        store_bytes(p, i, &v, sizeof v);
    }
}

tg_status tg_convert(tg_type src_type, const void *src, tg_type dst_type, void *dst,
                     size_t n) {
    if (tg_type_size(src_type) == 0 || tg_type_size(dst_type) == 0)
        return tg_status_new(TG_ERR_UNSUPPORTED, "convert: bad type (%d to %d)",
                             (int)src_type, (int)dst_type);
    if (n == 0) return NULL;
    if (!src || !dst)
        return tg_status_new(TG_ERR_INVALID_ARG, "convert %s to %s: NULL buffer",
                             tg_type_name(src_type), tg_type_name(dst_type));
    if (src_type == dst_type) {
        memmove(dst, src, n * tg_type_size(src_type));
        return NULL;
    }
    bool sf = type_is_float(src_type), df = type_is_float(dst_type);
    for (size_t i = 0; i < n; i++) {
        if (sf && df) {
            store_float(dst_type, dst, i, load_float(src_type, src, i));
        } else if (sf) {
            store_int(dst_type, dst, i, float_to_int(load_float(src_type, src, i), dst_type));
        } else if (df) {
            /* integers above 2^24 round once to f32, then to f16/bf16 */
            store_float(dst_type, dst, i, (float)load_int(src_type, src, i));
        } else {
            store_int(dst_type, dst, i, load_int(src_type, src, i));
        }
    }
    return NULL;
}
