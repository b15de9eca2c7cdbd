/*
 * hash.c: a fast 64-bit non-cryptographic hash for cache keys and graph
 * signatures.
 *
 * Shape: four independent accumulators take 32 bytes per step (so the
 * multiplies of one step overlap in the pipeline), each word going through a
 * multiply-rotate-multiply round that is a bijection of the accumulator, so
 * no input can collapse the state to a constant. Leftover whole words go
 * through the same round into the joined state, and the last 1..7 bytes are
 * loaded into one zero-padded word; the length is folded in first so that
 * padding zeros never equal real zeros. A finaliser of xor-shifts and a
 * 128-bit multiply-fold spreads every input bit over every output bit. The
 * constants are random odd 64-bit numbers with about half their bits set.
 * Words are read little-endian on every machine, so values are portable.
 *
 * Not here: resistance to chosen-input (HashDoS) attacks, cryptographic
 * strength, incremental/streaming hashing.
 */
#include <string.h>

#include "base.h"

#define K1 0xA39EED24C2C063FFull
#define K2 0xF768064F958507ADull
#define K3 0xD5113DC30E9A8DF5ull
#define K4 0xD966EB44E0C67745ull
#define K5 0xCCA82984FCB042D9ull
#define K6 0xD6C93F01A9F18631ull

static inline uint64_t rotl64(uint64_t x, int r) {
    return (x << r) | (x >> (64 - r));
}

static inline uint64_t load64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

/* One data word into an accumulator; bijective in acc for a fixed w. */
static inline uint64_t absorb(uint64_t acc, uint64_t w) {
    acc ^= w * K1;
    acc = rotl64(acc, 29) * K2;
    return acc ^ (acc >> 31);
}

static inline uint64_t fold_mul(uint64_t a, uint64_t b) {
    unsigned __int128 r = (unsigned __int128)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

static inline uint64_t finish(uint64_t h) {
    h ^= h >> 32;
    h *= K3;
    h ^= h >> 29;
    h = fold_mul(h ^ K4, K5);
    h ^= h >> 32;
    h *= K6;
    return h ^ (h >> 30);
}

uint64_t tg_hash64(const void *data, size_t size, uint64_t seed) {
    const uint8_t *p = data;
    size_t left = size;
    uint64_t h = seed ^ ((uint64_t)size * K5);
    if (left >= 32) {
        uint64_t a = seed + K1, b = seed ^ K2, c = rotl64(seed, 17) + K3, d = ~seed ^ K4;
        do {
            a = absorb(a, load64(p));
            b = absorb(b, load64(p + 8));
            c = absorb(c, load64(p + 16));
            d = absorb(d, load64(p + 24));
            p += 32;
            left -= 32;
        } while (left >= 32);
        h = absorb(h, a);
        h = absorb(h, rotl64(b, 13));
        h = absorb(h, rotl64(c, 26));
        h = absorb(h, rotl64(d, 39));
    }
    while (left >= 8) {
        h = absorb(h, load64(p));
        p += 8;
        left -= 8;
    }
    if (left > 0) {
        uint64_t w = 0;
        for (size_t i = 0; i < left; i++) w |= (uint64_t)p[i] << (8 * i);
        h = absorb(h, w ^ K6);
    }
    return finish(h);
}

uint64_t tg_hash_combine(uint64_t h, uint64_t v) {
    /* Order matters: combine(combine(s, a), b) != combine(combine(s, b), a). */
    return finish(absorb(h + K3, v));
}
