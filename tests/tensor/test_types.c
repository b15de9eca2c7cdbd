/*
 * test_types.c: element types: sizes and names, the f16 and bf16 conversions
 * (round to nearest even with ties, NaN, Inf, overflow, f16 subnormals), and
 * tg_convert between every pair of types.
 */
#include <stdint.h>

#include "check.h"
#include "tg.h"

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static void test_sizes_and_names(void) {
    CHECK(tg_type_size(TG_F32) == 4);
    CHECK(tg_type_size(TG_F16) == 2);
    CHECK(tg_type_size(TG_BF16) == 2);
    CHECK(tg_type_size(TG_I32) == 4);
    CHECK(tg_type_size(TG_I64) == 8);
    CHECK(tg_type_size(TG_TYPE_COUNT) == 0);
    CHECK(tg_type_size((tg_type)-1) == 0);
    CHECK(strcmp(tg_type_name(TG_BF16), "bf16") == 0);
    CHECK(strcmp(tg_type_name(TG_I64), "i64") == 0);
    CHECK(strcmp(tg_op_name(TG_OP_MUL_MAT), "mul_mat") == 0);
    CHECK(strcmp(tg_op_name(TG_OP_COUNT), "invalid-op") == 0);
    for (int op = 0; op < TG_OP_COUNT; op++)
        CHECK_MSG(strcmp(tg_op_name((tg_op)op), "invalid-op") != 0, "op %d has no name", op);
}

static void test_bf16_round_to_nearest_even(void) {
    CHECK(tg_f32_to_bf16(1.0f) == 0x3f80);
    CHECK(tg_f32_to_bf16(-2.0f) == 0xc000);
    /* exactly halfway: ties go to the even mantissa */
    CHECK(tg_f32_to_bf16(from_bits(0x3f808000u)) == 0x3f80);
    CHECK(tg_f32_to_bf16(from_bits(0x3f818000u)) == 0x3f82);
    /* just above and below halfway */
    CHECK(tg_f32_to_bf16(from_bits(0x3f808001u)) == 0x3f81);
    CHECK(tg_f32_to_bf16(from_bits(0x3f807fffu)) == 0x3f80);
    /* the largest float rounds up to infinity; infinity stays */
    CHECK(tg_f32_to_bf16(from_bits(0x7f7fffffu)) == 0x7f80);
    CHECK(tg_f32_to_bf16(INFINITY) == 0x7f80);
    CHECK(tg_f32_to_bf16(-INFINITY) == 0xff80);
    /* NaN stays NaN, even when only low payload bits are set (plain
     * rounding would turn 0x7f800001 into infinity) */
    uint16_t n1 = tg_f32_to_bf16(from_bits(0x7f800001u));
    uint16_t n2 = tg_f32_to_bf16(from_bits(0xffc00000u));
    CHECK((n1 & 0x7f80) == 0x7f80 && (n1 & 0x7f) != 0);
    CHECK((n2 & 0x7f80) == 0x7f80 && (n2 & 0x7f) != 0 && (n2 & 0x8000));
    CHECK(isnan(tg_bf16_to_f32(n1)));
    /* back to f32 is exact */
    CHECK(to_bits(tg_bf16_to_f32(0x3f81)) == 0x3f810000u);
    CHECK(tg_bf16_to_f32(0x0001) > 0.0f); /* bf16 subnormal survives */
    /* every finite bf16 round-trips */
    for (uint32_t h = 0; h < 0x10000u; h++) {
        if ((h & 0x7f80) == 0x7f80 && (h & 0x7f)) continue;
        CHECK_MSG(tg_f32_to_bf16(tg_bf16_to_f32((uint16_t)h)) == h, "bf16 0x%04x", h);
    }
}

static void test_f16_specials(void) {
    CHECK(tg_f32_to_f16(1.0f) == 0x3c00);
    CHECK(tg_f32_to_f16(-0.0f) == 0x8000);
    CHECK(tg_f32_to_f16(0.0f) == 0x0000);
    CHECK(tg_f32_to_f16(65504.0f) == 0x7bff);
    CHECK(tg_f32_to_f16(65519.0f) == 0x7bff);  /* below the midpoint */
    CHECK(tg_f32_to_f16(65520.0f) == 0x7c00);  /* the midpoint rounds to even: inf */
    CHECK(tg_f32_to_f16(1e10f) == 0x7c00);
    CHECK(tg_f32_to_f16(-1e10f) == 0xfc00);
    CHECK(tg_f32_to_f16(INFINITY) == 0x7c00);
    uint16_t n = tg_f32_to_f16(NAN);
    CHECK((n & 0x7c00) == 0x7c00 && (n & 0x3ff) != 0);
    n = tg_f32_to_f16(from_bits(0x7f800001u)); /* payload only in low bits */
    CHECK((n & 0x7c00) == 0x7c00 && (n & 0x3ff) != 0);
    CHECK(isnan(tg_f16_to_f32(0x7e00)));
    CHECK(isinf(tg_f16_to_f32(0xfc00)) && tg_f16_to_f32(0xfc00) < 0);
    /* ties in the normal range */
    CHECK(tg_f32_to_f16(1.0f + 0x1p-11f) == 0x3c00);
    CHECK(tg_f32_to_f16(1.0f + 3 * 0x1p-11f) == 0x3c02);
    /* a carry out of the mantissa bumps the exponent */
    CHECK(tg_f32_to_f16(2.0f - 0x1p-12f) == 0x4000);
}

static void test_f16_subnormals(void) {
    CHECK(tg_f32_to_f16(0x1p-24f) == 0x0001);           /* smallest subnormal */
    CHECK(tg_f32_to_f16(0x1p-25f) == 0x0000);           /* tie to even: 0 */
    CHECK(tg_f32_to_f16(0x1p-25f * 1.0001f) == 0x0001); /* above the tie */
    CHECK(tg_f32_to_f16(3 * 0x1p-26f) == 0x0001);
    CHECK(tg_f32_to_f16(1.5f * 0x1p-24f) == 0x0002);    /* tie, 1 odd: up */
    CHECK(tg_f32_to_f16(2.5f * 0x1p-24f) == 0x0002);    /* tie, 2 even: stays */
    CHECK(tg_f32_to_f16(1023 * 0x1p-24f) == 0x03ff);    /* largest subnormal */
    CHECK(tg_f32_to_f16(1023.5f * 0x1p-24f) == 0x0400); /* rounds into the normals */
    CHECK(tg_f32_to_f16(0x1p-14f) == 0x0400);
    CHECK(tg_f32_to_f16(-0x1p-24f) == 0x8001);
    CHECK(tg_f32_to_f16(from_bits(0x00000001u)) == 0x0000); /* f32 subnormal */
    CHECK(tg_f16_to_f32(0x0001) == 0x1p-24f);
    CHECK(tg_f16_to_f32(0x83ff) == -1023 * 0x1p-24f);
}

static void test_f16_roundtrip_and_nearest(void) {
    for (uint32_t h = 0; h < 0x10000u; h++) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) {
            CHECK(isnan(tg_f16_to_f32((uint16_t)h)));
            continue;
        }
        CHECK_MSG(tg_f32_to_f16(tg_f16_to_f32((uint16_t)h)) == h, "f16 0x%04x", h);
    }
    /* random finite floats below the overflow threshold: the result is the
     * nearest f16, and an even one on a tie */
    uint32_t x = 12345;
    for (int i = 0; i < 200000; i++) {
        x = x * 1664525u + 1013904223u;
        uint32_t bits = (x & 0x80000000u) | (0x30000000u + (x % 0x17800000u));
        float f = from_bits(bits);
        if (!(fabsf(f) < 65504.0f)) continue;
        uint16_t h = tg_f32_to_f16(f);
        double d = fabs((double)f - tg_f16_to_f32(h));
        uint16_t mag = h & 0x7fff;
        for (int dir = -1; dir <= 1; dir += 2) {
            int nm = (int)mag + dir;
            if (nm < 0 || nm > 0x7bff) continue;
            double dn = fabs((double)f - tg_f16_to_f32((uint16_t)((h & 0x8000) | nm)));
            CHECK_MSG(d < dn || (d == dn && (h & 1) == 0), "f32 0x%08x -> f16 0x%04x", bits, h);
        }
    }
}

static void test_convert_float_to_int(void) {
    float in[6] = {2.7f, -2.7f, NAN, 1e20f, -1e20f, -0.5f};
    int32_t out[6];
    CHECK_OK(tg_convert(TG_F32, in, TG_I32, out, 6));
    CHECK(out[0] == 2 && out[1] == -2 && out[2] == 0);
    CHECK(out[3] == INT32_MAX && out[4] == INT32_MIN && out[5] == 0);
    int64_t out64[6];
    CHECK_OK(tg_convert(TG_F32, in, TG_I64, out64, 6));
    CHECK(out64[0] == 2 && out64[1] == -2 && out64[3] == INT64_MAX && out64[4] == INT64_MIN);
    int64_t big[2] = {(int64_t)1 << 40, -((int64_t)1 << 40)};
    int32_t small[2];
    CHECK_OK(tg_convert(TG_I64, big, TG_I32, small, 2));
    CHECK(small[0] == INT32_MAX && small[1] == INT32_MIN);
}

static void test_convert_all_pairs(void) {
    /* small integers are exact in every type: any pair preserves them */
    const double vals[5] = {0, 1, -3, 7, 100};
    for (int s = 0; s < TG_TYPE_COUNT; s++) {
        for (int d = 0; d < TG_TYPE_COUNT; d++) {
            float f32[5];
            for (int i = 0; i < 5; i++) f32[i] = (float)vals[i];
            unsigned char src[5 * 8], dst[5 * 8];
            CHECK_OK(tg_convert(TG_F32, f32, (tg_type)s, src, 5));
            CHECK_OK(tg_convert((tg_type)s, src, (tg_type)d, dst, 5));
            float back[5];
            CHECK_OK(tg_convert((tg_type)d, dst, TG_F32, back, 5));
            for (int i = 0; i < 5; i++)
                CHECK_MSG(back[i] == (float)vals[i], "%s -> %s: %g became %g",
                          tg_type_name((tg_type)s), tg_type_name((tg_type)d), vals[i],
                          (double)back[i]);
        }
    }
    /* rounding on the way down: 1 + 2^-7 + 2^-8 is a bf16 tie (odd below: up) */
    float f = 1.0f + 0x1p-7f + 0x1p-8f;
    uint16_t b;
    CHECK_OK(tg_convert(TG_F32, &f, TG_BF16, &b, 1));
    CHECK(b == tg_f32_to_bf16(f) && b == 0x3f82);
    uint16_t h;
    CHECK_OK(tg_convert(TG_BF16, &b, TG_F16, &h, 1));
    CHECK(tg_f16_to_f32(h) == tg_bf16_to_f32(b));
}

static void test_convert_bad_types(void) {
    float x = 1;
    int32_t y;
    CHECK_ERR(tg_convert(TG_TYPE_COUNT, &x, TG_F32, &y, 1), TG_ERR_UNSUPPORTED, "bad type");
    CHECK_ERR(tg_convert(TG_F32, &x, (tg_type)99, &y, 1), TG_ERR_UNSUPPORTED, "bad type");
    CHECK_ERR(tg_convert(TG_F32, NULL, TG_I32, &y, 1), TG_ERR_INVALID_ARG, "NULL");
    CHECK_OK(tg_convert(TG_F32, NULL, TG_I32, NULL, 0));
}

/* issue 12 item 8: checkpoint data may sit at any byte offset (a valid
 * safetensors file with an odd header length): tg_convert must read and write
 * through unaligned pointers (UBSan, in `make asan`, flags an unaligned load
 * or store as undefined behaviour). Every pair, from and to offset 1. */
static void test_convert_unaligned(void) {
    static const tg_type types[5] = {TG_F32, TG_F16, TG_BF16, TG_I32, TG_I64};
    enum { N = 7 };
    for (int a = 0; a < 5; a++) {
        for (int b = 0; b < 5; b++) {
            size_t sa = tg_type_size(types[a]), sb = tg_type_size(types[b]);
            _Alignas(16) unsigned char src[N * 8 + 16], ref_src[N * 8 + 16];
            _Alignas(16) unsigned char dst[N * 8 + 16], ref[N * 8 + 16];
            /* small integers: exact in every type */
            float v[N] = {0, 1, -2, 3, 7, -16, 100};
            CHECK_OK(tg_convert(TG_F32, v, types[a], ref_src, N));
            memcpy(src + 1, ref_src, N * sa);
            CHECK_OK(tg_convert(types[a], ref_src, types[b], ref, N));
            CHECK_OK(tg_convert(types[a], src + 1, types[b], dst + 1, N));
            CHECK_MSG(memcmp(dst + 1, ref, N * sb) == 0, "%s -> %s from offset 1",
                      tg_type_name(types[a]), tg_type_name(types[b]));
        }
    }
}

TEST_MAIN(T(test_sizes_and_names), T(test_convert_unaligned), T(test_bf16_round_to_nearest_even), T(test_f16_specials),
          T(test_f16_subnormals), T(test_f16_roundtrip_and_nearest),
          T(test_convert_float_to_int), T(test_convert_all_pairs), T(test_convert_bad_types))
