/*
 * fft.h: a real-input FFT in double precision for the log-mel frontend
 * (internal to src/audio).
 *
 * Only what the frontend needs: a forward transform of n real samples (n a
 * power of two, at least 4) giving the n/2+1 one-sided bins. The plan holds
 * precomputed tables and is read-only once made, so one plan serves any number
 * of threads; each call brings its own scratch.
 */
#ifndef CT_FFT_H
#define CT_FFT_H

#include "tg_status.h"

typedef struct ct_fft {
    int n;          /* real transform size */
    int m;          /* n/2: size of the complex transform inside */
    int *bitrev;    /* [m] bit-reversal permutation of 0..m-1 */
    double *tw_m;   /* [m/2][2] exp(-2πi j/m) */
    double *tw_n;   /* [m+1][2] exp(-2πi k/n), for the real-input unpacking */
} ct_fft;

/* Makes a plan for n real samples; n must be a power of two >= 4. Free the
 * tables with ct_fft_free (the struct itself is the caller's). */
tg_status ct_fft_init(ct_fft *f, int n);
void ct_fft_free(ct_fft *f);
/* X[k] = Σ_t in[t]·exp(-2πi kt/n) for k = 0..n/2, written to out as n/2+1
 * (re, im) pairs. work: scratch of n doubles owned by the caller. in, out and
 * work must not overlap. */
void ct_fft_real_forward(const ct_fft *f, const double *in, double *out, double *work);

#endif
