/*
 * main.c: test-ops, the op conformance suite's command line.
 *
 *   test-ops                 every case on every backend present; exit 1 on
 *                            any failure
 *   test-ops --list          the op-support matrix (one row per op and type
 *                            combination, one column per backend), exit 0
 *   --backend NAME           only backends whose name contains NAME
 *   --op NAME                only cases of op NAME (tg_op_name), or "selftest"
 *   -v                       every case with its NMSE
 *   --name TEXT              only cases whose name contains TEXT
 *   --skip NAME              leave out the cases of op NAME (repeatable)
 *   --random N               N cases of random sizes from the seed (default 54)
 *   --progress               print each case before it runs (to find a hang)
 *   -t N                     CPU threads, best ISA; may be repeated
 *
 * By default the CPU backend is tested four times: best ISA with one thread
 * per core and with 3 threads (work split unevenly), AVX2 with 3 threads and
 * scalar with 1 thread (through CT_CPU_ISA, which the CPU backend reads when
 * it is created; a machine without an ISA falls back and the duplicate is
 * dropped). When CT_CPU_ISA is set by the caller, or -t is given, only the
 * best (or requested) ISA is tested.
 *   --seed N                 base seed of the input generator
 *
 * The CPU backend is always tested; CUDA when tg_backend_cuda_new(0) succeeds.
 * A machine without a GPU answers TG_ERR_UNSUPPORTED, which is reported as
 * "absent" and is not a failure. A case whose op the backend does not support
 * is counted as skipped, never as passed. The last line is "N passed,
 * N failed", as in every test program here.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops_test.h"

#define MAX_CPUS 4
#define MAX_BACKENDS (MAX_CPUS + 1)

typedef struct tally {
    int pass, fail, skip;
} tally;

static bool contains_nocase(const char *hay, const char *needle) {
    size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i])) i++;
        if (i == n) return true;
    }
    return n == 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t case_seed(uint64_t base, int index) {
    rng r = {base ^ (0x9E3779B97F4A7C15ull * (uint64_t)(index + 1))};
    return rng_next(&r);
}

static void usage(void) {
    fprintf(stderr, "usage: test-ops [--list] [--backend NAME] [--op NAME] [--name TEXT] "
                    "[--skip OP]... [--random N] [-v] [--progress] [-t THREADS]... [--seed N]\n");
}

/* --list: one row per distinct (op, types) signature, in case order. */
static void print_matrix(const case_list *cl, const bool *sel, tg_backend **be, int nbe) {
    int w[MAX_BACKENDS];
    printf("%-44s", "op / types");
    for (int b = 0; b < nbe; b++) {
        w[b] = (int)strlen(tg_backend_name(be[b]));
        if (w[b] < 12) w[b] = 12;
        printf(" %-*s", w[b], tg_backend_name(be[b]));
    }
    printf("\n");
    char (*sigs)[160] = calloc((size_t)cl->n, sizeof *sigs);
    int (*yes)[MAX_BACKENDS] = calloc((size_t)cl->n, sizeof *yes);
    int *cnt = calloc((size_t)cl->n, sizeof *cnt);
    if (!sigs || !yes || !cnt) {
        fprintf(stderr, "test-ops: out of memory\n");
        free(sigs); free(yes); free(cnt);
        return;
    }
    int nsig = 0;
    for (int i = 0; i < cl->n; i++) {
        if (!sel[i]) continue;
        char sig[160];
        int sup[MAX_BACKENDS];
        for (int b = 0; b < nbe; b++) sup[b] = case_supported(be[b], &cl->v[i], sig, sizeof sig);
        int k = 0;
        while (k < nsig && strcmp(sigs[k], sig) != 0) k++;
        if (k == nsig) snprintf(sigs[nsig++], sizeof sigs[0], "%s", sig);
        cnt[k]++;
        for (int b = 0; b < nbe; b++) yes[k][b] += sup[b] == 1;
    }
    for (int k = 0; k < nsig; k++) {
        printf("%-44s", sigs[k]);
        for (int b = 0; b < nbe; b++) {
            char cell[32];
            if (yes[k][b] == cnt[k]) snprintf(cell, sizeof cell, "yes");
            else if (yes[k][b] == 0) snprintf(cell, sizeof cell, "no");
            else snprintf(cell, sizeof cell, "no (%d/%d)", yes[k][b], cnt[k]);
            printf(" %-*s", w[b], cell);
        }
        printf("\n");
    }
    free(sigs);
    free(yes);
    free(cnt);
}

int main(int argc, char **argv) {
    bool list = false, verbose = false;
    const char *want_backend = NULL, *want_op = NULL;
    const char *want_name = NULL, *skip_ops[8];
    int n_skip = 0;
    bool progress = false;
    int n_random = 54;
    /* CPU configurations: ISA (NULL = the backend's choice) and threads */
    const char *isas[MAX_CPUS] = {NULL, NULL, "avx2", "scalar"};
    int threads[MAX_CPUS] = {0, 3, 3, 1}, n_cpus = 4;
    bool threads_given = false;
    uint64_t seed = 20261130;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--list")) list = true;
        else if (!strcmp(argv[i], "-v")) verbose = true;
        else if (!strcmp(argv[i], "--backend") && i + 1 < argc) want_backend = argv[++i];
        else if (!strcmp(argv[i], "--op") && i + 1 < argc) want_op = argv[++i];
        else if (!strcmp(argv[i], "--name") && i + 1 < argc) want_name = argv[++i];
        else if (!strcmp(argv[i], "--progress")) progress = true;
        else if (!strcmp(argv[i], "--random") && i + 1 < argc) n_random = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--skip") && i + 1 < argc && n_skip < 8) skip_ops[n_skip++] = argv[++i];
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) {
            if (!threads_given) n_cpus = 0;
            threads_given = true;
            if (n_cpus == MAX_CPUS) {
                usage();
                return 2;
            }
            isas[n_cpus] = NULL;
            threads[n_cpus++] = atoi(argv[++i]);
        }
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 0);
        else {
            usage();
            return 2;
        }
    }

    case_list cl = {0};
    cases_elementwise(&cl);
    cases_norm_reduce(&cl);
    cases_data(&cl);
    cases_matmul(&cl);
    cases_attention(&cl);
    cases_conv(&cl);
    cases_random(&cl, n_random, seed);

    bool *sel = calloc((size_t)cl.n, sizeof *sel);
    if (!sel) {
        fprintf(stderr, "test-ops: out of memory\n");
        return 2;
    }
    int nsel = 0;
    bool run_selftest = (!want_op || !strcmp(want_op, "selftest")) && !want_name;
    for (int i = 0; i < cl.n; i++) {
        sel[i] = (!want_op || !strcmp(tg_op_name(cl.v[i].op), want_op)) &&
                 (!want_name || strstr(cl.v[i].name, want_name));
        for (int k = 0; k < n_skip; k++)
            if (!strcmp(tg_op_name(cl.v[i].op), skip_ops[k])) sel[i] = false;
        nsel += sel[i];
    }
    if ((want_op || want_name) && !nsel && !run_selftest) {
        fprintf(stderr, "test-ops: no cases for op '%s' / name '%s'\n", want_op ? want_op : "*",
                want_name ? want_name : "*");
        free(sel);
        cases_free(&cl);
        return 2;
    }

    /* backends */
    tg_backend *be[MAX_BACKENDS];
    int nbe = 0, failed = 0, passed = 0, skipped = 0;
    tg_backend *cpus[MAX_CPUS] = {0}, *cpu = NULL;
    tg_status st = NULL;
    const char *user_isa = getenv("CT_CPU_ISA");
    for (int k = 0; k < n_cpus; k++) {
        if (isas[k] && user_isa && *user_isa) continue;
        if (isas[k]) setenv("CT_CPU_ISA", isas[k], 1);
        st = tg_backend_cpu_new(threads[k], &cpus[k]);
        if (isas[k]) unsetenv("CT_CPU_ISA");
        if (st) {
            printf("FAIL CPU backend (%s, %d threads): %s\n", isas[k] ? isas[k] : "best",
                   threads[k], tg_status_message(st));
            tg_status_free(st);
            failed++;
            continue;
        }
        /* the same configuration twice (say, a 3-core machine) is tested once */
        for (int j = 0; j < k; j++)
            if (cpus[j] && cpus[k] && !strcmp(tg_backend_name(cpus[j]), tg_backend_name(cpus[k]))) {
                tg_backend_free(cpus[k]);
                cpus[k] = NULL;
            }
        if (!cpu) cpu = cpus[k];
    }
    tg_backend *cuda = NULL;
    st = tg_backend_cuda_new(0, &cuda);
    if (st) {
        if (tg_status_code(st) == TG_ERR_UNSUPPORTED) {
            printf("CUDA backend absent (%s): skipped\n", tg_status_message(st));
        } else {
            printf("FAIL CUDA backend: %s\n", tg_status_message(st));
            failed++;
        }
        tg_status_free(st);
    }
    for (int k = 0; k < n_cpus; k++)
        if (cpus[k] && (!want_backend || contains_nocase(tg_backend_name(cpus[k]), want_backend) ||
                        contains_nocase("cpu", want_backend)))
            be[nbe++] = cpus[k];
    if (cuda && (!want_backend || contains_nocase(tg_backend_name(cuda), want_backend) ||
                 contains_nocase("cuda", want_backend)))
        be[nbe++] = cuda;
    if (want_backend && nbe == 0 && !failed) {
        fprintf(stderr, "test-ops: no backend matches '%s'\n", want_backend);
        failed++;
    }

    if (list) {
        print_matrix(&cl, sel, be, nbe);
        free(sel);
        cases_free(&cl);
        tg_backend_free(cuda);
        for (int k = 0; k < n_cpus; k++) tg_backend_free(cpus[k]);
        return 0;
    }

    /* per backend, per op */
    tally (*t)[TG_OP_COUNT] = calloc((size_t)(nbe ? nbe : 1), sizeof *t);
    double *secs = calloc((size_t)(nbe ? nbe : 1), sizeof *secs);
    if (!t || !secs) {
        fprintf(stderr, "test-ops: out of memory\n");
        return 2;
    }
    for (int b = 0; b < nbe; b++) {
        const char *bn = tg_backend_name(be[b]);
        double t0 = now_s();
        for (int i = 0; i < cl.n; i++) {
            if (!sel[i]) continue;
            const op_case *c = &cl.v[i];
            case_outcome o;
            if (progress) {
                printf("...  [%s] #%d %s\n", bn, i, c->name);
                fflush(stdout);
            }
            double c0 = now_s();
            run_case(be[b], c, case_seed(seed, i), &o);
            double dt = now_s() - c0;
            tally *ty = &t[b][c->op];
            if (o.res == RES_PASS) {
                ty->pass++;
                passed++;
                if (verbose)
                    printf("ok   [%s] %s  (%s)  NMSE %.3g (limit %.3g)  %.3fs\n", bn, c->name, o.sig,
                           o.nmse, c->limit, dt);
            } else if (o.res == RES_SKIP) {
                ty->skip++;
                skipped++;
                if (verbose) printf("skip [%s] %s: %s\n", bn, c->name, o.msg);
            } else {
                ty->fail++;
                failed++;
                printf("FAIL [%s] #%d %s  (%s): %s\n", bn, i, c->name, o.sig, o.msg);
            }
            fflush(stdout);
        }
        secs[b] = now_s() - t0;
    }

    int st_checks = 0, st_fail = 0;
    if (run_selftest && cpu) {
        st_fail = selftest_run(cpu, verbose, &st_checks);
        passed += st_checks - st_fail;
        failed += st_fail;
    }

    printf("\n%-26s %-12s %6s %6s %6s\n", "backend", "op", "passed", "failed", "skipped");
    for (int b = 0; b < nbe; b++) {
        for (int op = 0; op < TG_OP_COUNT; op++) {
            tally *ty = &t[b][op];
            if (ty->pass + ty->fail + ty->skip == 0) continue;
            printf("%-26s %-12s %6d %6d %6d\n", tg_backend_name(be[b]), tg_op_name((tg_op)op),
                   ty->pass, ty->fail, ty->skip);
        }
        if (nsel) printf("%-26s %-12s %.1f s\n", tg_backend_name(be[b]), "(time)", secs[b]);
    }
    if (st_checks) printf("%-26s %-12s %6d %6d %6d\n", "harness", "selftest", st_checks - st_fail, st_fail, 0);
    printf("%d skipped (unsupported by the backend)\n", skipped);
    printf("%d passed, %d failed\n", passed, failed);

    free(t);
    free(secs);
    free(sel);
    cases_free(&cl);
    tg_backend_free(cuda);
    for (int k = 0; k < n_cpus; k++) tg_backend_free(cpus[k]);
    return failed ? 1 : 0;
}
