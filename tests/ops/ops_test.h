/*
 * ops_test.h: the op conformance suite's shared declarations (tests/ops).
 *
 * The suite follows the idea of ggml's test-backend-ops: every op of tg.h, in
 * every type combination it supports, on random inputs, run on every backend
 * present and compared with a float64 reference by normalised mean squared
 * error (NMSE) with a per-op limit. It is split by purpose:
 *   harness.c   PRNG, half-float codecs, input leaves and views, placing every
 *               tensor in one backend buffer between guard bytes, running a
 *               case and judging it;
 *   ref.c       the float64 reference of every op, written here from the
 *               comments of tg.h and the layout of op_params.h alone; it reads
 *               every tensor through its own ne/nb, never through the backend;
 *   cases_*.c   the case lists, one file per family of ops, and
 *               cases_random.c, sizes drawn from the seed for the ops
 *               whose kernels block;
 *   selftest.c  proof that the harness fails what it should (NaN, overrun,
 *               wrong value, modified input) and skips what is unsupported;
 *   main.c      command line, backends, the support matrix, the summary.
 * It deliberately does not measure speed and does not go through tg_sched:
 * placing tensors ourselves is what lets us put guard bytes around each one.
 */
#ifndef OPS_TEST_H
#define OPS_TEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tg.h"

/* ---------------------------------------------------------------- limits */

/* NMSE limits (tests/ops policy, DESIGN.md "Conformance"). */
#define LIM_ELEM 1e-7    /* elementwise ops, copies, norms, softmax, f32 conv  */
#define LIM_MATMUL 5e-4  /* mul_mat / attention at default precision: the     */
                         /* backend may round activations to bf16 or f16      */
#define LIM_MATMUL_F32 1e-6 /* mul_mat / attention with TG_PREC_F32: f32 inputs
                             * and accumulation; bf16 rounding of the inputs
                             * alone gives ~3e-6, so this catches a backend that
                             * ignores the request, while f32 rounding over
                             * K = 5120 stays below 1e-10 */
#define LIM_EXACT 0.0    /* argmax and integer outputs: exact               */

/* ------------------------------------------------------------------- PRNG */

/* splitmix64: small, fixed, ours; a case's inputs depend only on its seed. */
typedef struct rng {
    uint64_t s;
} rng;

uint64_t rng_next(rng *r);
double rng_uniform(rng *r, double lo, double hi); /* [lo, hi) */
int64_t rng_int(rng *r, int64_t n);               /* [0, n) */

/* ------------------------------------------------------- type codecs (ours) */

uint16_t ref_f32_to_f16(float f);   /* round to nearest even */
double ref_f16_to_f64(uint16_t h);
uint16_t ref_f32_to_bf16(float f);  /* round to nearest even */
double ref_bf16_to_f64(uint16_t h);
size_t ref_type_size(tg_type t);
/* The value v as stored in an element of type t (rounded / truncated). */
double ref_round_to(tg_type t, double v);
/* Element codecs on raw storage. */
double ref_load(tg_type t, const void *p);
void ref_store(tg_type t, void *p, double v);

/* ------------------------------------------------------------ input fills */

typedef enum fill_kind {
    FILL_UNIFORM,      /* uniform in [lo, hi)                                  */
    FILL_AWAY0,        /* |x| uniform in [lo, hi), random sign (divisors)      */
    FILL_LEVELS,       /* integers in [lo, hi] (ties for argmax, i32 data)     */
    FILL_IDS,          /* integers in [0, hi) (row ids, repeats allowed)       */
    FILL_IDS_DISTINCT, /* per group of ne[0] ids: distinct values in [0, hi)  */
    FILL_MASK,         /* additive mask: U(lo, hi), -INFINITY at ~25%, ~1/6 of
                          rows (and always row 1) fully -INFINITY              */
    FILL_MASK_NOFULL,  /* as FILL_MASK without fully masked rows              */
} fill_kind;

typedef struct fill_spec {
    fill_kind kind;
    double lo, hi;
} fill_spec;

static inline fill_spec fill_u(double lo, double hi) { return (fill_spec){FILL_UNIFORM, lo, hi}; }

/* How an input is laid out in memory. */
typedef enum layout {
    L_CONT = 0, /* contiguous leaf                                              */
    L_ROWPAD,   /* a view whose rows are 3 elements longer than ne[0] and whose
                   planes have one spare row: strides larger than the data    */
    L_T01,      /* a transposed view: storage dims 0 and 1 swapped            */
    L_T12,      /* dims 1 and 2 swapped (dim 0 stays contiguous)              */
    L_PERM,     /* storage dim 0 -> 1, 1 -> 2, 2 -> 0                          */
    L_COUNT,
} layout;

const char *layout_name(layout l);

/* ------------------------------------------------------------------ cases */

typedef struct case_params {
    tg_type type[4];
    int64_t ne[4][4];  /* shapes of up to four operands */
    int layout[4];
    int i[8];
    float f[4];
} case_params;

typedef struct case_env case_env;

/* Builds the case's graph in env's context from p and returns the output
 * tensor (NULL when a constructor refused; its error is reported). */
typedef tg_tensor *(*build_fn)(case_env *e, const case_params *p);

typedef struct op_case {
    tg_op op;          /* the op under test (the --op filter and summary key) */
    char name[200];
    double limit;      /* largest NMSE accepted */
    build_fn build;
    case_params p;
} op_case;

typedef struct case_list {
    op_case *v;
    int n, cap;
} case_list;

/* Appends a case; the name is printf-formatted. Exits the test program when
 * memory runs out (this is a test, not library code). */
void cases_add(case_list *l, tg_op op, double limit, build_fn build, const case_params *p,
               const char *fmt, ...) __attribute__((format(printf, 6, 7)));
void cases_free(case_list *l);

/* Attention masks (build_attention's i[6]). */
enum {
    MASK_NONE,
    MASK_FULL,     /* [Tk, Tq, H, B] */
    MASK_SHARED,   /* [Tk, Tq, 1, 1] */
    MASK_PER_HEAD, /* [Tk, Tq, H, 1] */
    MASK_PER_SEQ,  /* [Tk, Tq, 1, B] */
    MASK_REL,      /* rel_shift view of [2T-1, T, H, B] (a bias, no -inf) */
    MASK_KINDS,
};
extern const char *const mask_names[MASK_KINDS];

/* Builders shared with the random cases (parameters: see each definition). */
tg_tensor *build_binary(case_env *e, const case_params *p);        /* cases_elementwise.c */
tg_tensor *build_layer_norm(case_env *e, const case_params *p);    /* cases_norm_reduce.c */
tg_tensor *build_get_rows(case_env *e, const case_params *p);      /* cases_data.c */
tg_tensor *build_mul_mat(case_env *e, const case_params *p);       /* cases_matmul.c */
tg_tensor *build_soft_max(case_env *e, const case_params *p);      /* cases_attention.c */
tg_tensor *build_attention(case_env *e, const case_params *p);     /* cases_attention.c */
tg_tensor *build_conv(case_env *e, const case_params *p);          /* cases_conv.c */

/* The case lists, one per family. */
void cases_elementwise(case_list *l);
void cases_norm_reduce(case_list *l);
void cases_data(case_list *l);
void cases_matmul(case_list *l);
void cases_attention(case_list *l);
void cases_conv(case_list *l);
/* n cases of random shapes, layouts and types drawn from seed (cases_random.c). */
void cases_random(case_list *l, int n, uint64_t seed);

/* Formats ne as "[a,b,c,d]" without trailing 1 dims into buf (returns buf). */
const char *fmt_ne(char *buf, size_t size, const int64_t ne[4]);
/* Formats operand k of p as its shape and layout, e.g. "[7,3] T01". */
const char *cp_shape(const case_params *p, int k, char *buf, size_t size);

/* Fresh parameters: every shape [1,1,1,1], contiguous, F32. */
static inline case_params cp_new(void) {
    case_params p;
    memset(&p, 0, sizeof p);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) p.ne[i][j] = 1;
    return p;
}

static inline void cp_ne(case_params *p, int k, int64_t n0, int64_t n1, int64_t n2, int64_t n3) {
    p->ne[k][0] = n0;
    p->ne[k][1] = n1;
    p->ne[k][2] = n2;
    p->ne[k][3] = n3;
}

/* ---------------------------------------------------- builder environment */

tg_ctx *env_ctx(case_env *e);
/* An input of the given type, shape and layout, filled per f. Returns the
 * tensor the op should read (the leaf, or a view of it), NULL on failure. */
tg_tensor *env_input(case_env *e, tg_type type, const int64_t ne[4], layout l, fill_spec f);
/* Records a contract violation seen while building (the case fails with it). */
void env_fail(case_env *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Checks a view's geometry against what the builder computed on its own. */
void env_expect_view(case_env *e, const char *what, const tg_tensor *v, const int64_t ne[4],
                     const size_t nb[4], size_t offset_from_src);

/* Checks that node t stores the parameters the builder passed where
 * op_params.h says (int32 slots first..first+n-1, or an f32 slot), so the
 * reference, which reads them from there, cannot agree with a constructor
 * that stores them wrongly. NULL t is ignored (the constructor failed). */
void env_expect_i32(case_env *e, const tg_tensor *t, int first, const int32_t *vals, int n);
void env_expect_f32(case_env *e, const tg_tensor *t, int slot, float val);

/* ----------------------------------------------------------------- running */

typedef enum case_result {
    RES_PASS,
    RES_FAIL,
    RES_SKIP,
} case_result;

typedef struct case_outcome {
    case_result res;
    double nmse;
    char sig[160];   /* op and type combination, e.g. "mul_mat bf16,f32 -> f32" */
    char msg[512];   /* why it failed / was skipped */
} case_outcome;

/* Runs case c (seeded by seed) on backend and judges it. */
void run_case(tg_backend *backend, const op_case *c, uint64_t seed, case_outcome *out);
/* Builds case c only, to find its type signature and ask backend whether it
 * supports every node: 1 yes, 0 no, -1 the case did not build. */
int case_supported(tg_backend *backend, const op_case *c, char *sig, size_t sig_size);

/* Judging, exposed for the self-test: NMSE of out against ref over n values;
 * returns false (with a reason in msg) on a non-finite output. */
bool judge_values(const double *out, const double *ref, int64_t n, double *out_nmse,
                  char *msg, size_t msg_size);

/* ---------------------------------------------------------------- reference */

typedef struct ref_state ref_state;

ref_state *ref_new(void);
void ref_free(ref_state *r);
/* Registers the storage of root tensor t (not a view) with initial values
 * (n = elements of t; copied). Returns false when out of memory. */
bool ref_add_root(ref_state *r, const tg_tensor *t, const double *values, int64_t n);
/* Value of element (i0..i3) of t, read through t's strides and view chain. */
double ref_get(const ref_state *r, const tg_tensor *t, int64_t i0, int64_t i1, int64_t i2,
               int64_t i3);
/* Computes node into the mirrors. Returns false with a reason (bad shape, bad
 * type, unknown op) in msg. */
bool ref_compute(ref_state *r, const tg_tensor *node, char *msg, size_t msg_size);
/* The root tensor of t and t's byte offset in it. */
const tg_tensor *ref_root(const tg_tensor *t, size_t *out_offset);

/* ----------------------------------------------------------------- selftest */

/* Returns the number of self-test failures (0 = the harness fails and skips
 * what it should); prints one line per check when verbose. */
int selftest_run(tg_backend *cpu, bool verbose, int *out_checks);

#endif /* OPS_TEST_H */
