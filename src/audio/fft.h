/*
 * fft.h: a real-input FFT in double precision for the log-mel frontend
 * (internal to src/audio).
 *
 * Only what the frontend needs: a forward transform of n real samples (n a
 * power of two, at least 4) giving the n/2+1 one-sided bins, done for
 * CT_FFT_LANES independent frames at once. The frames are interleaved
 * (sample j of frame l at [j][l]) so that every butterfly is the same
 * arithmetic on CT_FFT_LANES contiguous doubles: a loop of constant length
 * that the compiler turns into vector code without intrinsics, while each
 * lane's arithmetic stays exactly that of a scalar FFT. The plan holds
 * precomputed tables and is read-only once made, so one plan serves any
 * number of threads; each call brings its own scratch.
 */
#ifndef CT_FFT_H
#define CT_FFT_H

#include "tg_status.h"

/* Frames per call: 8 doubles is one AVX-512 register, two AVX2 ones, four
 * SSE2 ones; the scratch of a 512-point call (about 50 KB) stays in L2. */
#define CT_FFT_LANES 8

typedef struct ct_fft {
    int n;            /* real transform size */
    int m;            /* n/2: size of the complex transform inside */
    int *bitrev;      /* [m] bit-reversal permutation of 0..m-1 */
    double *tw_re;    /* [m-1]: for the stage of half-length h = 2, 4, ..., m/2, */
    double *tw_im;    /* exp(-2πi j/(2h)) for j < h at offset h-1 */
    double *tw_n;     /* [m+1][2] exp(-2πi k/n), for the real-input unpacking */
} ct_fft;

/* Makes a plan for n real samples; n must be a power of two >= 4. Free the
 * tables with ct_fft_free (the struct itself is the caller's). */
tg_status ct_fft_init(ct_fft *f, int n);
void ct_fft_free(ct_fft *f);
/* For each lane l < CT_FFT_LANES: X_l[k] = Σ_t in[t][l]·exp(-2πi kt/n) for
 * k = 0..n/2, written as out_re[k][l], out_im[k][l]. in: [n][LANES];
 * out_re, out_im: [n/2+1][LANES]; work: scratch of n·LANES doubles. All
 * owned by the caller; none may overlap. */
void ct_fft_real_forward_lanes(const ct_fft *f, const double *restrict in,
                               double *restrict out_re, double *restrict out_im,
                               double *restrict work);

#endif
