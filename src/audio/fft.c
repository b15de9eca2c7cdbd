/*
 * fft.c: the real-input forward FFT of fft.h.
 *
 * A real sequence of n points is packed into a complex one of n/2 points
 * (even samples as real parts, odd ones as imaginary parts), transformed with
 * an iterative radix-2 decimation-in-time FFT, and unpacked into the n/2+1
 * bins of the real transform. Everything is double precision, and every
 * twiddle factor is computed directly with cos/sin rather than by recurrence,
 * so the result is accurate to a few ulps of double: the frontend then has
 * float32-level agreement with torch.stft to spare.
 *
 * Deliberately not here: inverse transforms, other sizes than powers of two,
 * SIMD. The frontend spends far less time here than the encoder does anywhere.
 */
#include "fft.h"

#include <math.h>
#include <string.h>

#include "base.h"

tg_status ct_fft_init(ct_fft *f, int n) {
    memset(f, 0, sizeof *f);
    if (n < 4 || (n & (n - 1)) != 0)
        return tg_status_new(TG_ERR_INVALID_ARG, "FFT size %d is not a power of two >= 4", n);
    int m = n / 2;
    f->n = n;
    f->m = m;
    f->bitrev = tg_malloc((size_t)m * sizeof *f->bitrev);
    f->tw_m = tg_malloc((size_t)m * sizeof *f->tw_m);         /* m/2 pairs */
    f->tw_n = tg_malloc((size_t)(m + 1) * 2 * sizeof *f->tw_n);
    if (!f->bitrev || !f->tw_m || !f->tw_n) {
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
    for (int j = 0; j < m / 2; j++) {
        f->tw_m[2 * j] = cos(two_pi * j / m);
        f->tw_m[2 * j + 1] = -sin(two_pi * j / m);
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
    tg_free(f->tw_m);
    tg_free(f->tw_n);
    memset(f, 0, sizeof *f);
}

/* In-place complex FFT of f->m points, z interleaved (re, im), input already
 * in bit-reversed order. */
static void complex_fft(const ct_fft *f, double *z) {
    int m = f->m;
    for (int len = 2; len <= m; len <<= 1) {
        int half = len / 2, step = m / len;
        for (int s = 0; s < m; s += len) {
            for (int j = 0; j < half; j++) {
                double wr = f->tw_m[2 * j * step], wi = f->tw_m[2 * j * step + 1];
                double *a = z + 2 * (s + j), *b = z + 2 * (s + j + half);
                double br = b[0] * wr - b[1] * wi;
                double bi = b[0] * wi + b[1] * wr;
                b[0] = a[0] - br;
                b[1] = a[1] - bi;
                a[0] += br;
                a[1] += bi;
            }
        }
    }
}

void ct_fft_real_forward(const ct_fft *f, const double *in, double *out, double *work) {
    int m = f->m;
    /* z[t] = in[2t] + i·in[2t+1], stored bit-reversed for the in-place pass */
    for (int t = 0; t < m; t++) {
        int r = f->bitrev[t];
        work[2 * r] = in[2 * t];
        work[2 * r + 1] = in[2 * t + 1];
    }
    complex_fft(f, work);
    /* With Z = FFT_m(z): E[k] = (Z[k] + conj(Z[m-k]))/2 is the transform of
     * the even samples, O[k] = (Z[k] - conj(Z[m-k]))/(2i) that of the odd
     * ones, and X[k] = E[k] + exp(-2πi k/n)·O[k] for k = 0..m (indices of Z
     * taken mod m). */
    for (int k = 0; k <= m; k++) {
        int k1 = k % m, k2 = (m - k) % m;
        double zr = work[2 * k1], zi = work[2 * k1 + 1];
        double cr = work[2 * k2], ci = -work[2 * k2 + 1];   /* conj(Z[m-k]) */
        double er = 0.5 * (zr + cr), ei = 0.5 * (zi + ci);
        double dr = zr - cr, di = zi - ci;                  /* Z[k] - conj(Z[m-k]) */
        double or_ = 0.5 * di, oi = -0.5 * dr;              /* divided by 2i */
        double wr = f->tw_n[2 * k], wi = f->tw_n[2 * k + 1];
        out[2 * k] = er + (or_ * wr - oi * wi);
        out[2 * k + 1] = ei + (or_ * wi + oi * wr);
    }
}
