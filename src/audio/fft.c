/*
 * fft.c: the real-input forward FFT of fft.h, CT_FFT_LANES frames at a time.
 *
 * A real sequence of n points is packed into a complex one of n/2 points
 * (even samples as real parts, odd ones as imaginary parts), transformed with
 * an iterative radix-2 decimation-in-time FFT, and unpacked into the n/2+1
 * bins of the real transform. Everything is double precision, and every
 * twiddle factor is computed directly with cos/sin rather than by recurrence,
 * so the result is accurate to a few ulps of double: the frontend then has
 * float32-level agreement with torch.stft to spare.
 *
 * Speed comes from the layout, not from the algorithm: the complex data is
 * split (real parts, imaginary parts) and each point holds CT_FFT_LANES
 * frames side by side, so the innermost loop of every butterfly runs over
 * the lanes with one twiddle for all of them. The compiler vectorises that
 * loop at -O2 for whatever ISA it targets; there are no shuffles, and each
 * stage reads its twiddles contiguously. The first stage (twiddle 1) is done
 * without multiplications.
 *
 * Deliberately not here: inverse transforms, other sizes than powers of two,
 * radix-4 or split-radix (fewer flops, more code; the frontend is within its
 * budget without them), intrinsics.
 */
#include "fft.h"

#include <math.h>
#include <string.h>

#include "base.h"

enum { L = CT_FFT_LANES };

/* GCC on x86-64 compiles the transform once per ISA and picks one at load
 * time (an ifunc): the loops over lanes then use 256- or 512-bit vectors
 * where the CPU has them. ISO C mode leaves floating-point contraction off,
 * so every clone computes the same bits. Not under Clang (its clones do not
 * link in the fuzzers' instrumented build) nor the sanitizers. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__)
#define FFT_CLONES __attribute__((target_clones("default", "avx2", "avx512f")))
#else
#define FFT_CLONES
#endif

tg_status ct_fft_init(ct_fft *f, int n) {
    memset(f, 0, sizeof *f);
    if (n < 4 || (n & (n - 1)) != 0)
        return tg_status_new(TG_ERR_INVALID_ARG, "FFT size %d is not a power of two >= 4", n);
    int m = n / 2;
    f->n = n;
    f->m = m;
    f->bitrev = tg_malloc((size_t)m * sizeof *f->bitrev);
    f->tw_re = tg_malloc((size_t)m * sizeof *f->tw_re);
    f->tw_im = tg_malloc((size_t)m * sizeof *f->tw_im);
    f->tw_n = tg_malloc((size_t)(m + 1) * 2 * sizeof *f->tw_n);
    if (!f->bitrev || !f->tw_re || !f->tw_im || !f->tw_n) {
        ct_fft_free(f);
        return tg_status_new(TG_ERR_NO_MEMORY, "FFT plan of size %d: out of memory", n);
    }
    int bits = 0;
    while ((1 << bits) < m) bits++;
    for (int i = 0; i < m; i++) {
        int r = 0;
        for (int b = 0; b < bits; b++)
            if (i & (1 << b)) r |= 1 << (bits - 1 - b);
        f->bitrev[i] = r;
    }
    const double two_pi = 6.283185307179586476925286766559;
    /* exp(-2πi j/(2h)) = exp(-2πi (j·m/(2h))/m): the same values the
     * strided table of one m-point transform holds, stored per stage */
    for (int h = 1; h < m; h <<= 1)
        for (int j = 0; j < h; j++) {
            int jm = j * (m / (2 * h));
            f->tw_re[h - 1 + j] = cos(two_pi * jm / m);
            f->tw_im[h - 1 + j] = -sin(two_pi * jm / m);
        }
    for (int k = 0; k <= m; k++) {
        f->tw_n[2 * k] = cos(two_pi * k / n);
        f->tw_n[2 * k + 1] = -sin(two_pi * k / n);
    }
    return NULL;
}

void ct_fft_free(ct_fft *f) {
    if (!f) return;
    tg_free(f->bitrev);
    tg_free(f->tw_re);
    tg_free(f->tw_im);
    tg_free(f->tw_n);
    memset(f, 0, sizeof *f);
}

/* One radix-2 butterfly on L lanes: (a, b) <- (a + w·b, a − w·b). A function
 * of its own so that restrict tells the vectoriser a and b are distinct. */
static inline void butterfly(double *restrict ar, double *restrict ai, double *restrict br,
                             double *restrict bi, double wr, double wi) {
    for (int l = 0; l < L; l++) {
        double xr = br[l] * wr - bi[l] * wi;
        double xi = br[l] * wi + bi[l] * wr;
        br[l] = ar[l] - xr;
        bi[l] = ai[l] - xi;
        ar[l] += xr;
        ai[l] += xi;
    }
}

static inline void butterfly_w1(double *restrict ar, double *restrict ai, double *restrict br,
                                double *restrict bi) {
    for (int l = 0; l < L; l++) {
        double xr = br[l], xi = bi[l];
        br[l] = ar[l] - xr;
        bi[l] = ai[l] - xi;
        ar[l] += xr;
        ai[l] += xi;
    }
}

/* In-place complex FFT of f->m points of L lanes, split into zr and zi,
 * input already in bit-reversed order. */
static void complex_fft_lanes(const ct_fft *f, double *restrict zr, double *restrict zi) {
    int m = f->m;
    for (int s = 0; s < m; s += 2)
        butterfly_w1(zr + s * L, zi + s * L, zr + (s + 1) * L, zi + (s + 1) * L);
    for (int h = 2; h < m; h <<= 1) {
        const double *wr = f->tw_re + h - 1, *wi = f->tw_im + h - 1;
        for (int s = 0; s < m; s += 2 * h)
            for (int j = 0; j < h; j++) {
                size_t a = (size_t)(s + j) * L, b = (size_t)(s + j + h) * L;
                butterfly(zr + a, zi + a, zr + b, zi + b, wr[j], wi[j]);
            }
    }
}

FFT_CLONES void ct_fft_real_forward_lanes(const ct_fft *f, const double *restrict in,
                                          double *restrict out_re, double *restrict out_im,
                                          double *restrict work) {
    int m = f->m;
    double *zr = work, *zi = work + (size_t)m * L;
    /* z[t] = in[2t] + i·in[2t+1], stored bit-reversed for the in-place pass */
    for (int t = 0; t < m; t++) {
        size_t r = (size_t)f->bitrev[t] * L;
        const double *ev = in + (size_t)(2 * t) * L, *od = ev + L;
        for (int l = 0; l < L; l++) {
            zr[r + l] = ev[l];
            zi[r + l] = od[l];
        }
    }
    complex_fft_lanes(f, zr, zi);
    /* With Z = FFT_m(z): E[k] = (Z[k] + conj(Z[m-k]))/2 is the transform of
     * the even samples, O[k] = (Z[k] - conj(Z[m-k]))/(2i) that of the odd
     * ones, and X[k] = E[k] + exp(-2πi k/n)·O[k] for k = 0..m (indices of Z
     * taken mod m). */
    for (int k = 0; k <= m; k++) {
        size_t k1 = (size_t)(k % m) * L, k2 = (size_t)((m - k) % m) * L;
        double wr = f->tw_n[2 * k], wi = f->tw_n[2 * k + 1];
        double *xr = out_re + (size_t)k * L, *xi = out_im + (size_t)k * L;
        for (int l = 0; l < L; l++) {
            double zr1 = zr[k1 + l], zi1 = zi[k1 + l];
            double cr = zr[k2 + l], ci = -zi[k2 + l];   /* conj(Z[m-k]) */
            double er = 0.5 * (zr1 + cr), ei = 0.5 * (zi1 + ci);
            double dr = zr1 - cr, di = zi1 - ci;        /* Z[k] - conj(Z[m-k]) */
            double or_ = 0.5 * di, oi = -0.5 * dr;      /* divided by 2i */
            xr[l] = er + (or_ * wr - oi * wi);
            xi[l] = ei + (or_ * wi + oi * wr);
        }
    }
}
