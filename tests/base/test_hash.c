/*
 * test_hash.c: tg_hash64 and tg_hash_combine: determinism, seed and length
 * sensitivity, avalanche, no trivial collisions, alignment independence.
 */
#include <stdint.h>

#include "base.h"
#include "check.h"

/* A fixed-seed generator so every run tests the same inputs. */
static uint64_t rng_state = 0x1234567887654321ull;
static uint64_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void is_deterministic(void) {
    const char *s = "the quick brown fox jumps over the lazy dog, twice over";
    CHECK(tg_hash64(s, strlen(s), 7) == tg_hash64(s, strlen(s), 7));
    char copy[64];
    memcpy(copy, s, strlen(s));
    CHECK(tg_hash64(copy, strlen(s), 7) == tg_hash64(s, strlen(s), 7));
    CHECK(tg_hash64(NULL, 0, 3) == tg_hash64("x", 0, 3)); /* size 0 reads nothing */
}

static void seed_changes_the_value(void) {
    unsigned char buf[100];
    for (int i = 0; i < 100; i++) buf[i] = (unsigned char)i;
    const size_t lens[] = {0, 1, 7, 8, 31, 32, 100};
    for (int l = 0; l < 7; l++) {
        uint64_t h0 = tg_hash64(buf, lens[l], 0);
        for (uint64_t seed = 1; seed < 50; seed++)
            CHECK_MSG(tg_hash64(buf, lens[l], seed) != h0, "len %zu seed %llu", lens[l],
                      (unsigned long long)seed);
    }
}

static void all_lengths_0_to_64_differ(void) {
    /* Same zero bytes, different lengths: the zero padding of the tail must
     * not make them equal. Also with non-zero content, prefixes of one buffer. */
    unsigned char zeros[65] = {0}, bytes[65];
    for (int i = 0; i < 65; i++) bytes[i] = (unsigned char)(rng() | 1);
    uint64_t hz[65], hb[65];
    for (int n = 0; n <= 64; n++) {
        hz[n] = tg_hash64(zeros, (size_t)n, 0);
        hb[n] = tg_hash64(bytes, (size_t)n, 0);
    }
    for (int a = 0; a <= 64; a++)
        for (int b = a + 1; b <= 64; b++) {
            CHECK_MSG(hz[a] != hz[b], "zeros: len %d and %d collide", a, b);
            CHECK_MSG(hb[a] != hb[b], "bytes: len %d and %d collide", a, b);
        }
}

static void one_bit_flips_change_about_half_the_output(void) {
    /* Strict avalanche over many samples: for every input length class
     * (tail only, words, 4-lane bulk) the mean number of output bits that
     * change when one input bit flips is 32 +- 0.5 (its sampling std error
     * here is ~0.05), and no input bit leaves any output bit fixed: each
     * (input bit, output bit) pair flips in 25%..75% of 200 trials (a fair
     * coin is outside that with probability ~1e-12). */
    const size_t lens[] = {3, 8, 13, 40, 77};
    for (int l = 0; l < 5; l++) {
        size_t len = lens[l];
        unsigned char buf[80];
        static int flips[80 * 8][64];
        memset(flips, 0, sizeof flips);
        long long total = 0, samples = 0;
        const int trials = 200;
        for (int t = 0; t < trials; t++) {
            for (size_t i = 0; i < len; i++) buf[i] = (unsigned char)rng();
            uint64_t seed = rng();
            uint64_t h = tg_hash64(buf, len, seed);
            for (size_t bit = 0; bit < len * 8; bit++) {
                buf[bit / 8] ^= (unsigned char)(1u << (bit % 8));
                uint64_t d = h ^ tg_hash64(buf, len, seed);
                buf[bit / 8] ^= (unsigned char)(1u << (bit % 8));
                total += __builtin_popcountll(d);
                samples++;
                for (int o = 0; o < 64; o++) flips[bit][o] += (int)((d >> o) & 1);
            }
        }
        double mean = (double)total / (double)samples;
        CHECK_MSG(mean > 31.5 && mean < 32.5, "len %zu: mean %.3f bits flip", len, mean);
        int worst = trials / 2;
        for (size_t bit = 0; bit < len * 8; bit++)
            for (int o = 0; o < 64; o++) {
                int f = flips[bit][o];
                if (abs(f - trials / 2) > abs(worst - trials / 2)) worst = f;
            }
        CHECK_MSG(worst >= trials / 4 && worst <= 3 * trials / 4,
                  "len %zu: some output bit flipped %d of %d times", len, worst, trials);
    }
}

static void seed_bits_avalanche_too(void) {
    const char *s = "graph signature";
    long long total = 0;
    int n = 0;
    for (int t = 0; t < 500; t++) {
        uint64_t seed = rng();
        uint64_t h = tg_hash64(s, strlen(s), seed);
        for (int b = 0; b < 64; b++) {
            total += __builtin_popcountll(h ^ tg_hash64(s, strlen(s), seed ^ (1ull << b)));
            n++;
        }
    }
    double mean = (double)total / n;
    CHECK_MSG(mean > 31.5 && mean < 32.5, "mean %.3f", mean);
}

static void independent_of_alignment(void) {
    unsigned char base[200];
    for (int i = 0; i < 200; i++) base[i] = (unsigned char)rng();
    unsigned char shifted[210];
    for (int off = 1; off < 8; off++) {
        memcpy(shifted + off, base, 200);
        for (size_t len = 0; len <= 200; len += 13)
            CHECK(tg_hash64(shifted + off, len, 5) == tg_hash64(base, len, 5));
    }
}

static void no_collisions_among_small_integers(void) {
    /* 2^16 distinct 4- and 8-byte keys: 64-bit collisions would be a bug. */
    enum { N = 1 << 16 };
    static uint64_t hs[2 * N];
    for (uint32_t i = 0; i < N; i++) {
        uint64_t v64 = i;
        hs[i] = tg_hash64(&i, 4, 0);
        hs[N + i] = tg_hash64(&v64, 8, 0);
    }
    /* Sort-free check: an open-addressing set of the values. */
    static uint64_t table[1 << 18];
    static unsigned char used[1 << 18];
    memset(used, 0, sizeof used);
    int dups = 0;
    for (int i = 0; i < 2 * N; i++) {
        size_t slot = (size_t)(hs[i] >> 46);
        while (used[slot] && table[slot] != hs[i]) slot = (slot + 1) & ((1 << 18) - 1);
        if (used[slot]) dups++;
        used[slot] = 1;
        table[slot] = hs[i];
    }
    CHECK_MSG(dups == 0, "%d duplicate hashes", dups);
}

static void combine_is_order_sensitive_and_spreads(void) {
    uint64_t a = tg_hash_combine(tg_hash_combine(0, 1), 2);
    uint64_t b = tg_hash_combine(tg_hash_combine(0, 2), 1);
    CHECK(a != b);
    CHECK(tg_hash_combine(0, 0) != 0);
    CHECK(tg_hash_combine(0, 0) != tg_hash_combine(1, 0));
    CHECK(tg_hash_combine(5, 0) != tg_hash_combine(5, 1));
    long long total = 0;
    int n = 0;
    for (int t = 0; t < 300; t++) {
        uint64_t h = rng(), v = rng();
        uint64_t c = tg_hash_combine(h, v);
        for (int bit = 0; bit < 64; bit++) {
            total += __builtin_popcountll(c ^ tg_hash_combine(h, v ^ (1ull << bit)));
            total += __builtin_popcountll(c ^ tg_hash_combine(h ^ (1ull << bit), v));
            n += 2;
        }
    }
    double mean = (double)total / n;
    CHECK_MSG(mean > 31.5 && mean < 32.5, "mean %.3f", mean);
}

TEST_MAIN(T(is_deterministic), T(seed_changes_the_value), T(all_lengths_0_to_64_differ),
          T(one_bit_flips_change_about_half_the_output), T(seed_bits_avalanche_too),
          T(independent_of_alignment), T(no_collisions_among_small_integers),
          T(combine_is_order_sensitive_and_spreads))
