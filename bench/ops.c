/*
 * ops.c (bench-ops): how fast the CPU backend runs the ops that dominate the
 * model, next to a yardstick measured in the same run on the same machine.
 *
 *   mul_mat at the encoder's shapes (M = 438 x {1, 2} rows; 1280 -> 5120 and
 *   5120 -> 1280) with BF16, F16 and F32 weights, in GFLOP/s, beside
 *   OpenBLAS cblas_sgemm on the same shapes with f32 weights (the ratio is
 *   ours / OpenBLAS);
 *   layer_norm, add, mul, silu, glu and soft_max on 64 MB tensors, in GB/s
 *   (bytes read + written), beside memcpy's bandwidth.
 *
 * Each measurement is one warm-up and then repeated runs; the median is
 * printed. Beside wall-clock GFLOP/s the table gives GFLOP per CPU-second
 * of the process (all its threads): on a machine shared with other work
 * (builds, tests, other sessions' cgroups) wall time mostly measures how
 * much CPU we were given, while per-CPU-second says what the code does
 * with a core while it has one. The load average is printed before and
 * after for the same reason. Threads: the backend's default (one per core) unless given as
 * the first argument; OpenBLAS is set to the same count and is idle while
 * our pool works, so neither oversubscribes the other. CT_CPU_ISA picks the
 * backend's ISA path as everywhere else. The whole run stays near 30 s on
 * two cores.
 *
 * OpenBLAS picks its kernels from the CPU model at load time, and Debian's
 * 0.3.21 does not know newer Xeons (model 207 here): it falls back to its
 * SSE3 "Prescott" kernels, about 8x slower. A yardstick that slow would
 * flatter us, so on an AVX-512 CPU without OPENBLAS_CORETYPE set the
 * program re-executes itself with OPENBLAS_CORETYPE=SkylakeX (the variable
 * is read when the library loads, before main). Both names are printed.
 *
 * Not a test: it checks nothing but that every compute succeeds.
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base.h"
#include "tg.h"

/* OpenBLAS's own calls (not in cblas.h of every distribution). */
void openblas_set_num_threads(int num_threads);
char *openblas_get_corename(void);

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One timing: wall seconds and process CPU seconds (all threads). */
typedef struct timing {
    double wall, cpu;
} timing;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void die(tg_status st, const char *what) {
    if (!st) return;
    fprintf(stderr, "bench-ops: %s: %s\n", what, tg_status_message(st));
    tg_status_free(st);
    exit(1);
}

static uint64_t rng_state = 0x12345678u;

static float frand(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) * 0x1p-24) * 2.0f - 1.0f;
}

static void fill(tg_tensor *t) {
    int64_t n = tg_nelements(t);
    if (t->type == TG_F32) {
        float *p = t->data;
        for (int64_t i = 0; i < n; i++) p[i] = frand();
    } else {
        uint16_t *p = t->data;
        for (int64_t i = 0; i < n; i++)
            p[i] = t->type == TG_F16 ? tg_f32_to_f16(frand()) : tg_f32_to_bf16(frand());
    }
}

/* Medians of `reps` computes of g after one warm-up. */
static timing time_graph(tg_backend *be, tg_graph *g, int reps) {
    double w[16], c[16];
    die(tg_backend_graph_compute(be, g), "warm-up");
    for (int r = 0; r < reps; r++) {
        double t0 = now_s(), c0 = cpu_now_s();
        die(tg_backend_graph_compute(be, g), "compute");
        w[r] = now_s() - t0;
        c[r] = cpu_now_s() - c0;
    }
    return (timing){median(w, reps), median(c, reps)};
}

static void load_average(char *buf, size_t size) {
    FILE *f = fopen("/proc/loadavg", "r");
    buf[0] = 0;
    if (f) {
        if (!fgets(buf, (int)size, f)) buf[0] = 0;
        fclose(f);
    }
    char *nl = strchr(buf, '\n');
    if (nl) *nl = 0;
}

/* -------------------------------------------------------------- mul_mat */

static timing sgemm_time(int64_t M, int64_t N, int64_t K, int reps) {
    float *A = tg_aligned_alloc(64, (size_t)(N * K) * sizeof(float));
    float *B = tg_aligned_alloc(64, (size_t)(M * K) * sizeof(float));
    float *C = tg_aligned_alloc(64, (size_t)(M * N) * sizeof(float));
    if (!A || !B || !C) die(tg_status_new(TG_ERR_NO_MEMORY, "sgemm buffers"), "openblas");
    for (int64_t i = 0; i < N * K; i++) A[i] = frand();
    for (int64_t i = 0; i < M * K; i++) B[i] = frand();
    double w[16], c[16];
    for (int r = -1; r < reps; r++) {
        double t0 = now_s(), c0 = cpu_now_s();
        /* C[m][n] = sum_k B[m][k] A[n][k]: our mul_mat's orientation */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0f, B,
                    (int)K, A, (int)K, 0.0f, C, (int)N);
        if (r >= 0) {
            w[r] = now_s() - t0;
            c[r] = cpu_now_s() - c0;
        }
    }
    tg_aligned_free(A);
    tg_aligned_free(B);
    tg_aligned_free(C);
    return (timing){median(w, reps), median(c, reps)};
}

static timing mul_mat_time(tg_backend *be, tg_type wt, int64_t M, int64_t N, int64_t K, int reps) {
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *a = tg_new_2d(ctx, wt, K, N);
    tg_tensor *b = tg_new_2d(ctx, TG_F32, K, M);
    tg_tensor *c = tg_mul_mat(ctx, a, b);
    tg_graph *g = tg_graph_new(ctx);
    die(tg_graph_build(g, c), "mul_mat graph");
    tg_buffer *buf = NULL;
    die(tg_ctx_alloc_tensors(ctx, be, &buf), "mul_mat alloc");
    fill(a);
    fill(b);
    timing s = time_graph(be, g, reps);
    tg_buffer_free(buf);
    tg_ctx_free(ctx);
    return s;
}

/* ------------------------------------------------------------ bandwidth */

enum { BW_COLS = 1280, BW_ROWS = 13120 }; /* 16.8 M floats = 67 MB */

typedef struct bw_op {
    const char *name;
    double traffic; /* bytes moved per call, in units of one tensor */
} bw_op;

static tg_tensor *build_bw(tg_ctx *ctx, int which, tg_tensor *x, tg_tensor *y) {
    switch (which) {
    case 0: return tg_layer_norm(ctx, x, tg_new_1d(ctx, TG_F32, BW_COLS),
                                 tg_new_1d(ctx, TG_F32, BW_COLS), 1e-5f);
    case 1: return tg_add(ctx, x, y);
    case 2: return tg_mul(ctx, x, y);
    case 3: return tg_silu(ctx, x);
    case 4: return tg_glu(ctx, x);
    default: return tg_soft_max(ctx, x, NULL, 0.125f);
    }
}

static const bw_op bw_ops[] = {
    {"layer_norm", 2.0}, {"add", 3.0}, {"mul", 3.0},
    {"silu", 2.0},       {"glu", 1.5}, {"soft_max", 2.0},
};

static double memcpy_gbs(int reps) {
    size_t n = (size_t)BW_COLS * BW_ROWS * sizeof(float);
    char *a = tg_aligned_alloc(64, n), *b = tg_aligned_alloc(64, n);
    if (!a || !b) die(tg_status_new(TG_ERR_NO_MEMORY, "memcpy buffers"), "memcpy");
    memset(a, 1, n);
    memset(b, 2, n);
    double t[16];
    for (int r = -1; r < reps; r++) {
        double t0 = now_s();
        memcpy(b, a, n);
        if (r >= 0) t[r] = now_s() - t0;
    }
    tg_aligned_free(a);
    tg_aligned_free(b);
    return 2.0 * (double)n / median(t, reps) * 1e-9;
}

int main(int argc, char **argv) {
    if (!getenv("OPENBLAS_CORETYPE") && __builtin_cpu_supports("avx512f")) {
        printf("bench-ops: OpenBLAS chose '%s' kernels for this CPU; re-running with "
               "OPENBLAS_CORETYPE=SkylakeX\n", openblas_get_corename());
        fflush(stdout);
        setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
        execv("/proc/self/exe", argv);
        fprintf(stderr, "bench-ops: re-exec failed; OpenBLAS keeps its choice\n");
    }
    int n_threads = argc > 1 ? atoi(argv[1]) : 0;
    tg_backend *be = NULL;
    die(tg_backend_cpu_new(n_threads, &be), "cpu backend");
    if (n_threads <= 0) n_threads = tg_cpu_count();
    openblas_set_num_threads(n_threads);
    printf("bench-ops: %s; OpenBLAS (%s kernels) with %d threads\n\n", tg_backend_name(be),
           openblas_get_corename(), n_threads);

    double t_start = now_s();
    char load[128];
    load_average(load, sizeof load);
    printf("load average at start: %s (other work on this machine slows every number)\n\n", load);
    static const int64_t Ms[] = {438, 876};
    static const int64_t KN[][2] = {{1280, 5120}, {5120, 1280}};
    static const tg_type wts[] = {TG_BF16, TG_F16, TG_F32};
    printf("mul_mat (weights [K,N] x activations [K,M]), GFLOP/s by wall time, median of 5;\n"
           "ratio = ours / OpenBLAS sgemm; 'per cpu-s' = GFLOP per CPU-second of the process\n"
           "(what each core delivers while it runs, whatever else shares the machine)\n");
    printf("%5s %5s %5s | %7s %7s %7s | %8s | %5s %5s %5s | %12s %12s\n", "M", "K", "N", "bf16",
           "f16", "f32", "openblas", "bf16x", "f16x", "f32x", "bf16 per cpu-s", "oblas per cpu-s");
    for (int mi = 0; mi < 2; mi++) {
        for (int s = 0; s < 2; s++) {
            int64_t M = Ms[mi], K = KN[s][0], N = KN[s][1];
            double flop = 2.0 * (double)M * (double)N * (double)K, gf[3], gc = 0;
            for (int w = 0; w < 3; w++) {
                timing t = mul_mat_time(be, wts[w], M, N, K, 5);
                gf[w] = flop / t.wall * 1e-9;
                if (w == 0) gc = flop / t.cpu * 1e-9;
            }
            timing ot = sgemm_time(M, N, K, 5);
            double ob = flop / ot.wall * 1e-9, obc = flop / ot.cpu * 1e-9;
            printf("%5lld %5lld %5lld | %7.1f %7.1f %7.1f | %8.1f | %5.2f %5.2f %5.2f | %14.1f %15.1f\n",
                   (long long)M, (long long)K, (long long)N, gf[0], gf[1], gf[2], ob, gf[0] / ob,
                   gf[1] / ob, gf[2] / ob, gc, obc);
        }
    }

    printf("\nrow ops on [%d, %d] f32 (%.0f MB), GB/s (read + written), median of 5\n", BW_COLS,
           BW_ROWS, (double)BW_COLS * BW_ROWS * 4 / 1e6);
    double mc = memcpy_gbs(5);
    printf("%-10s %7.1f\n", "memcpy", mc);
    for (int i = 0; i < (int)(sizeof bw_ops / sizeof bw_ops[0]); i++) {
        tg_ctx *ctx = tg_ctx_new();
        tg_tensor *x = tg_new_2d(ctx, TG_F32, BW_COLS, BW_ROWS);
        tg_tensor *y = tg_new_2d(ctx, TG_F32, BW_COLS, BW_ROWS);
        tg_tensor *out = build_bw(ctx, i, x, y);
        tg_graph *g = tg_graph_new(ctx);
        die(tg_graph_build(g, out), bw_ops[i].name);
        tg_buffer *buf = NULL;
        die(tg_ctx_alloc_tensors(ctx, be, &buf), bw_ops[i].name);
        for (int j = 0; j < tg_ctx_n_tensors(ctx); j++) {
            tg_tensor *t = tg_ctx_tensor(ctx, j);
            if (t->op == TG_OP_NONE && t->data) fill(t);
        }
        timing s = time_graph(be, g, 5);
        double gbs = bw_ops[i].traffic * (double)BW_COLS * BW_ROWS * 4 / s.wall * 1e-9;
        printf("%-10s %7.1f  (%.2f of memcpy)\n", bw_ops[i].name, gbs, gbs / mc);
        tg_buffer_free(buf);
        tg_ctx_free(ctx);
    }
    load_average(load, sizeof load);
    printf("\nload average at end: %s; total %.1f s\n", load, now_s() - t_start);
    tg_backend_free(be);
    return 0;
}
