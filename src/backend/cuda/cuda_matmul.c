/*
 * cuda_matmul.c: the matrix products, through cuBLASLt: which type the
 * operands are fed in (and whether either needs a conversion pass first,
 * into the scratch), the plan per shape (matmul descriptor, layouts, the
 * heuristic's algorithm for the alignments at hand) made once and kept in
 * the context, the bias (+ relu) epilogue, and the cuBLASLt launch.
 *
 * The plan is keyed by everything the heuristic saw (types, shapes, leading
 * dimensions, batch strides, pointer alignments, epilogue), so a shape seen
 * before costs a lookup and no heuristic call; only the bias pointer, which
 * the plan's descriptor holds, is set again per launch. Products whose
 * weights are shared by every batch and whose activations are evenly
 * strided run as one product with all the columns; the rest batch over the
 * activations that share a weight matrix.
 *
 * Not here: the conversion kernels (cuda_ops.c, tg_cuda_convert), the
 * choice to fuse a bias add (tg_cuda_fuse_len), the workspace (owned by the
 * context).
 */
#include <string.h>

#include "cuda_internal.h"
#include "op_params.h"

static cudaDataType_t lt_type(tg_type t) {
    return t == TG_F16 ? CUDA_R_16F : t == TG_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

static uint32_t align_of(uint64_t x) {
    uint64_t a = x & (~x + 1);
    return a == 0 || a > 256 ? 256 : (uint32_t)a;
}

static uint32_t min_u32(uint32_t a, uint32_t b) { return a < b ? a : b; }

typedef struct mm_setup {
    tg_type target;      /* the type both operands are fed in */
    cublasComputeType_t compute;
    bool conv_a, conv_b;
} mm_setup;

static bool usable_as(const tg_tensor *t, tg_type target) {
    size_t es = tg_type_size(target);
    return t->type == target && t->nb[0] == es && t->nb[1] % es == 0 && t->nb[2] % es == 0 &&
           t->nb[3] % es == 0 && ((uintptr_t)t->data) % es == 0 && t->nb[1] / es >= (size_t)t->ne[0];
}

static mm_setup mm_choose(const tg_cuda_ctx *c, const tg_tensor *node) {
    const tg_tensor *a = node->src[0], *b = node->src[1];
    mm_setup s;
    bool prec32 = tg_node_prec(node) == TG_PREC_F32 || c->dev->props.tc_level == 0;
    const tg_tensor *root = a;
    while (root->view_src) root = root->view_src;
    if (!prec32 && a->type == TG_F32 && !(root->flags & TG_FLAG_WEIGHT) && c->dev->props.tc_level >= 2 &&
        c->dev->props.bf16) {
        /* Two F32 activations (the encoder's rel-pos term, r . (q + v)):
         * both rounded to bf16, which default precision allows, for the
         * bf16 tensor cores: at batch 64 the TF32 path took 1.2 ms per
         * layer for 63 GFLOP. F32 weights stay TF32 (converting them at
         * every call would cost more than it saves). */
        s.target = TG_BF16;
        s.compute = CUBLAS_COMPUTE_32F;
    } else if (prec32 || a->type == TG_F32) {
        s.target = TG_F32;
        s.compute = prec32 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_FAST_TF32;
    } else {
        s.target = a->type;
        s.compute = CUBLAS_COMPUTE_32F;
    }
    s.conv_a = !usable_as(a, s.target);
    s.conv_b = !usable_as(b, s.target);
    return s;
}

bool tg_cuda_mm_bf16_operands(const tg_cuda_ctx *c, const tg_tensor *node) {
    const mm_setup s = mm_choose(c, node);
    return s.target == TG_BF16 && s.compute == CUBLAS_COMPUTE_32F;
}

size_t tg_cuda_mm_scratch(const tg_cuda_ctx *c, const tg_tensor *node) {
    mm_setup s = mm_choose(c, node);
    size_t es = tg_type_size(s.target), n = 0;
    if (s.conv_a) n += tg_cuda_align256((size_t)tg_nelements(node->src[0]) * es);
    if (s.conv_b) n += tg_cuda_align256((size_t)tg_nelements(node->src[1]) * es);
    return n;
}

/* Attention on the tensor cores (attention_mma.cu); the rest (F32 precision,
 * other head sizes) takes the F32 kernel (attention.cu). */
static tg_status lt_fail(cublasStatus_t s, const char *what) {
    return tg_status_new(TG_ERR_DEVICE, "cuBLASLt %s failed (status %d)", what, (int)s);
}

static tg_status mm_plan_make(tg_cuda_ctx *c, const cuda_mm_key *k, cuda_mm_plan **out);

/* Whether cuBLASLt's status s, making key k's plan, says something of the
 * key itself (no algorithm, not supported, a value or layout this GPU does
 * not take), which asking again would only repeat; a failure that could
 * pass (allocation, internal, execution, not initialised) does not. */
static bool lt_refusal(cublasStatus_t s) {
    return s == CUBLAS_STATUS_SUCCESS || s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_INVALID_VALUE ||
           s == CUBLAS_STATUS_ARCH_MISMATCH;
}

/* The error of a refused key, the same when first refused and when found
 * refused in the table. */
static tg_status mm_refused(const cuda_mm_key *k, int s) {
    return tg_status_new(TG_ERR_UNSUPPORTED,
                         "cuBLASLt refused a %lldx%lldx%lld product (types %d/%d/%d, batch %lld, epilogue %d, "
                         "status %d%s)",
                         (long long)k->n, (long long)k->m, (long long)k->k, k->atype, k->btype, k->dtype,
                         (long long)k->batch, k->epilogue, s, s == 0 ? ": no algorithm" : "");
}

/* The plan for key k: found, or made (its host time counted in
 * c->plan_ms, what a first call pays that a later one does not). */
static tg_status mm_plan(tg_cuda_ctx *c, const cuda_mm_key *k, cuda_mm_plan **out) {
    for (int i = 0; i < c->n_plans; i++)
        if (memcmp(&c->plans[i].key, k, sizeof *k) == 0) {
            c->plans[i].used |= !c->in_prewarm;
            if (c->plans[i].none) return mm_refused(k, c->plans[i].none_status);
            *out = &c->plans[i];
            return NULL;
        }
    double t0 = tg_clock_now_ms();
    tg_status st = mm_plan_make(c, k, out);
    c->plan_ms += tg_clock_now_ms() - t0;
    if (!st) (*out)->used = !c->in_prewarm;
    return st;
}

/* cublasLtMatmul with plan p on stream s; the host time of each plan's first
 * launch (where cuBLASLt loads its kernel, lazily) is counted in
 * c->lt_first_ms. */
static cublasStatus_t mm_launch(tg_cuda_ctx *c, cuda_mm_plan *p, const float *alpha, CUdeviceptr A,
                                CUdeviceptr B, const float *beta, CUdeviceptr C, CUdeviceptr D,
                                CUdeviceptr ws, size_t ws_size, CUstream s) {
    double t0 = p->launched ? 0.0 : tg_clock_now_ms();
    cublasStatus_t ls = c->dev->lt->cublasLtMatmul(c->dev->lt_handle, p->op, alpha, (const void *)(uintptr_t)A,
                                                   p->la, (const void *)(uintptr_t)B, p->lb, beta,
                                                   (void *)(uintptr_t)C, p->ld, (void *)(uintptr_t)D, p->ld,
                                                   &p->algo, (void *)(uintptr_t)ws, ws_size, s);
    if (!p->launched && ls == CUBLAS_STATUS_SUCCESS) {
        c->lt_first_ms += tg_clock_now_ms() - t0;
        c->n_lt_first++;
        p->launched = true;
    }
    return ls;
}

/* Keeps key k as refused where cuBLASLt's status s is a refusal of the key
 * (lt_refusal), so that a plan asking again (tg_cuda_mm_d16_ok, at every
 * compute that is not a replay) costs a lookup, not a heuristic call; a
 * failure that could pass is not kept (the next compute asks again). */
static void mm_plan_refused(tg_cuda_ctx *c, const cuda_mm_key *k, cublasStatus_t s) {
    TG_DEBUG("%s: cuBLASLt %s a %lldx%lldx%lld product (types %d/%d/%d, batch %lld, epilogue %d, status %d)",
             c->name, lt_refusal(s) ? "refused" : "failed on", (long long)k->n, (long long)k->m, (long long)k->k,
             k->atype, k->btype, k->dtype, (long long)k->batch, k->epilogue, (int)s);
    if (!lt_refusal(s) || !tg_grow((void **)&c->plans, &c->cap_plans, c->n_plans + 1, sizeof *c->plans)) return;
    cuda_mm_plan *none = &c->plans[c->n_plans++];
    memset(none, 0, sizeof *none);
    none->key = *k;
    none->none = true;
    none->none_status = (int)s;
    none->used = !c->in_prewarm; /* a refusal is first-use work too: the prewarm asks again */
}

static tg_status mm_plan_make(tg_cuda_ctx *c, const cuda_mm_key *k, cuda_mm_plan **out) {
    const tg_cublaslt_api *lt = c->dev->lt;
    cuda_mm_plan p;
    memset(&p, 0, sizeof p);
    p.key = *k;
    cublasLtMatmulPreference_t pref = NULL;
    cublasStatus_t s;
    tg_status st = NULL;
    const char *what = "create";
    if ((s = lt->cublasLtMatmulDescCreate(&p.op, (cublasComputeType_t)k->compute, CUDA_R_32F))) goto lt_err;
    /* a_plain (the 1x1 convs): A is n x k as stored, not transposed, and
     * no workspace (a conv node may run beside a product, which owns it) */
    bool plain = k->a_plain != 0;
    cublasOperation_t ta = plain ? CUBLAS_OP_N : CUBLAS_OP_T, tb = CUBLAS_OP_N;
    what = "set attributes";
    if ((s = lt->cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta))) goto lt_err;
    if ((s = lt->cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb))) goto lt_err;
    if (k->epilogue) {
        cublasLtEpilogue_t ep = (cublasLtEpilogue_t)k->epilogue;
        cudaDataType_t bt = CUDA_R_32F;
        if ((s = lt->cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep))) goto lt_err;
        if ((s = lt->cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt)))
            goto lt_err;
    }
    what = "layouts";
    if ((s = lt->cublasLtMatrixLayoutCreate(&p.la, (cudaDataType_t)k->atype, (uint64_t)(plain ? k->n : k->k),
                                            (uint64_t)(plain ? k->k : k->n), k->lda)))
        goto lt_err;
    if ((s = lt->cublasLtMatrixLayoutCreate(&p.lb, (cudaDataType_t)k->btype, (uint64_t)k->k, (uint64_t)k->m, k->ldb)))
        goto lt_err;
    if ((s = lt->cublasLtMatrixLayoutCreate(&p.ld, (cudaDataType_t)k->dtype, (uint64_t)k->n, (uint64_t)k->m, k->ldd)))
        goto lt_err;
    if (k->batch > 1) {
        int32_t bc = (int32_t)k->batch;
        cublasLtMatrixLayout_t ls[3] = {p.la, p.lb, p.ld};
        int64_t strides[3] = {k->sa, k->sb, k->sd};
        for (int i = 0; i < 3; i++) {
            if ((s = lt->cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc)))
                goto lt_err;
            if ((s = lt->cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                          &strides[i], sizeof strides[i])))
                goto lt_err;
        }
    }
    what = "preference";
    if ((s = lt->cublasLtMatmulPreferenceCreate(&pref))) goto lt_err;
    uint64_t ws = plain ? 0 : c->lt_ws_size;
    uint32_t al[4] = {(uint32_t)k->align_a, (uint32_t)k->align_b, (uint32_t)k->align_d, (uint32_t)k->align_d};
    if ((s = lt->cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws)))
        goto lt_err;
    const cublasLtMatmulPreferenceAttributes_t aa[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; i++)
        if ((s = lt->cublasLtMatmulPreferenceSetAttribute(pref, aa[i], &al[i], sizeof al[i]))) goto lt_err;
    cublasLtMatmulHeuristicResult_t res;
    int n_res = 0;
    what = "heuristic";
    s = lt->cublasLtMatmulAlgoGetHeuristic(c->dev->lt_handle, p.op, p.la, p.lb, p.ld, p.ld, pref, 1, &res, &n_res);
    if (s || n_res == 0) {
        st = lt_refusal(s) ? mm_refused(k, (int)s) : lt_fail(s, what);
        mm_plan_refused(c, k, s);
        goto fail;
    }
    p.algo = res.algo;
    p.ws = res.workspaceSize;
    lt->cublasLtMatmulPreferenceDestroy(pref);
    pref = NULL;
    if (!tg_grow((void **)&c->plans, &c->cap_plans, c->n_plans + 1, sizeof *c->plans)) {
        st = tg_status_new(TG_ERR_NO_MEMORY, "matmul plans");
        goto fail;
    }
    c->plans[c->n_plans] = p;
    *out = &c->plans[c->n_plans++];
    return NULL;
lt_err:
    st = lt_refusal(s) ? mm_refused(k, (int)s) : lt_fail(s, what);
    mm_plan_refused(c, k, s);
fail:
    if (pref) lt->cublasLtMatmulPreferenceDestroy(pref);
    if (p.la) lt->cublasLtMatrixLayoutDestroy(p.la);
    if (p.lb) lt->cublasLtMatrixLayoutDestroy(p.lb);
    if (p.ld) lt->cublasLtMatrixLayoutDestroy(p.ld);
    if (p.op) lt->cublasLtMatmulDescDestroy(p.op);
    return st;
}

/* Bytes of an element of cuBLASLt type t; 0 for a type this file never
 * plans. */
static size_t lt_type_size(int32_t t) {
    return t == (int32_t)CUDA_R_32F ? 4 : t == (int32_t)CUDA_R_16F || t == (int32_t)CUDA_R_16BF ? 2 : 0;
}

#define SPAN_MAX ((int64_t)1 << 40) /* elements: far above any product here */
#define SPAN_ALIGN(x) (((x) + 255) & ~(size_t)255)

/* Bytes a matrix of `rows` x `cols` elements of `type` with leading
 * dimension ld, batch times at stride bstride, spans; 0 where the type is
 * unknown, ld cannot hold the rows or a size is out of range (checked
 * before any product, so nothing overflows). */
static size_t span_bytes(int32_t type, int64_t rows, int64_t ld, int64_t cols, int64_t batch, int64_t bstride) {
    size_t es = lt_type_size(type);
    if (!es || rows <= 0 || rows > SPAN_MAX || ld < rows || ld > SPAN_MAX || cols <= 0 || cols > SPAN_MAX ||
        batch <= 0 || batch > SPAN_MAX || bstride < 0 || bstride > SPAN_MAX)
        return 0;
    int64_t last, body, elems;
    if (__builtin_mul_overflow(batch - 1, bstride, &last) || __builtin_mul_overflow(ld, cols, &body) ||
        __builtin_add_overflow(last, body, &elems) || elems > SPAN_MAX)
        return 0;
    return es * (size_t)elems;
}

/* The bytes of key k's A, B and D (C is D) and the scratch all four (with
 * the bias) take, 256-byte aligned; 0 where tg_cuda_mm_key_ok would say no. */
static size_t key_spans(const cuda_mm_key *k, size_t *a, size_t *b, size_t *d) {
    /* A as mm_plan_make lays it out: n x k (plain) or k x n (transposed) */
    *a = span_bytes(k->atype, k->a_plain ? k->n : k->k, k->lda, k->a_plain ? k->k : k->n, k->batch, k->sa);
    *b = span_bytes(k->btype, k->k, k->ldb, k->m, k->batch, k->sb);
    *d = span_bytes(k->dtype, k->n, k->ldd, k->m, k->batch, k->sd);
    if (!*a || !*b || !*d) return 0;
    return SPAN_ALIGN(*a) + SPAN_ALIGN(*b) + SPAN_ALIGN(*d) + SPAN_ALIGN((size_t)k->n * 4);
}

static bool align_ok(int32_t a) { return a >= 1 && a <= 256 && (a & (a - 1)) == 0; }

/* key_spans for a key tg_cuda_mm_key_ok takes; 0 for any other. */
static size_t key_usable(const cuda_mm_key *k, size_t *a, size_t *b, size_t *d) {
    bool fields = (k->compute == CUBLAS_COMPUTE_32F || k->compute == CUBLAS_COMPUTE_32F_FAST_TF32) &&
                  (k->epilogue == 0 || k->epilogue == CUBLASLT_EPILOGUE_BIAS ||
                   k->epilogue == CUBLASLT_EPILOGUE_RELU_BIAS) &&
                  (k->a_plain == 0 || k->a_plain == 1) && align_ok(k->align_a) && align_ok(k->align_b) &&
                  align_ok(k->align_d);
    return fields ? key_spans(k, a, b, d) : 0;
}

bool tg_cuda_mm_key_ok(const cuda_mm_key *k) {
    size_t a, b, d;
    return key_usable(k, &a, &b, &d) != 0;
}

CUresult tg_cuda_mm_prewarm(tg_cuda_ctx *c, const cuda_mm_key *keys, int n, size_t max_scratch, const int *stop,
                            tg_cuda_prewarm_counts *out_counts) {
    const tg_cu_api *cu = c->dev->cu;
    if (!c->dev->lt || n <= 0) return CUDA_SUCCESS;
    size_t need = 0, a, b, d;
    for (int i = 0; i < n; i++) {
        size_t all = key_usable(&keys[i], &a, &b, &d);
        if (all && all <= max_scratch && all > need) need = all;
    }
    CUdeviceptr scratch = 0;
    CUstream s = NULL;
    CUresult r = need ? cu->cuMemAlloc(&scratch, need) : CUDA_SUCCESS;
    if (need && r == CUDA_SUCCESS && (r = cu->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS)
        cu->cuMemFree(scratch);
    if (!need || r != CUDA_SUCCESS) {
        if (need) out_counts->failed += n; /* no memory or stream: none prepared */
        else out_counts->skipped += n;
        return CUDA_SUCCESS;               /* nothing launched: the context is as it was */
    }
    const float alpha = 1.0f, beta = 0.0f;
    c->in_prewarm = true;
    for (int i = 0; i < n; i++) {
        if (__atomic_load_n(stop, __ATOMIC_RELAXED)) break; /* the first compute is waiting */
        const cuda_mm_key *k = &keys[i];
        size_t all = key_usable(k, &a, &b, &d);
        if (!all || all > need) {
            out_counts->skipped++;
            continue;
        }
        cuda_mm_plan *p = NULL;
        tg_status st = mm_plan(c, k, &p);
        if (st) {
            /* refused again (kept in the table, where the compute asking
             * finds it: mm_refused's code), or failed */
            if (tg_status_code(st) == TG_ERR_UNSUPPORTED) out_counts->refused++;
            else out_counts->failed++;
            tg_status_free(st);
            continue;
        }
        CUdeviceptr A = scratch, B = A + SPAN_ALIGN(a), D = B + SPAN_ALIGN(b), bias = D + SPAN_ALIGN(d);
        if (k->epilogue) {
            const void *bp = (const void *)(uintptr_t)bias;
            if (c->dev->lt->cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp,
                                                           sizeof bp)) {
                out_counts->failed++;
                continue;
            }
        }
        cublasStatus_t ls = k->a_plain ? mm_launch(c, p, &alpha, A, B, &beta, D, D, 0, 0, s)
                                       : mm_launch(c, p, &alpha, A, B, &beta, D, D, c->lt_ws, p->ws, s);
        if (ls) out_counts->failed++;
        else out_counts->done++;
    }
    c->in_prewarm = false;
    r = cu->cuStreamSynchronize(s);
    cu->cuStreamDestroy(s);
    cu->cuMemFree(scratch);
    return r;
}

void tg_cuda_mm_free(tg_cuda_ctx *c) {
    const tg_cublaslt_api *lt = c->dev->lt;
    for (int i = 0; i < c->n_plans && lt; i++) {
        if (c->plans[i].none) continue;
        lt->cublasLtMatrixLayoutDestroy(c->plans[i].la);
        lt->cublasLtMatrixLayoutDestroy(c->plans[i].lb);
        lt->cublasLtMatrixLayoutDestroy(c->plans[i].ld);
        lt->cublasLtMatmulDescDestroy(c->plans[i].op);
    }
    tg_free(c->plans);
    c->plans = NULL;
    c->n_plans = c->cap_plans = 0;
}


/* The product of node = mul_mat(a, b), optionally scaled (alpha), with a
 * bias vector added (and relu applied) by the cuBLASLt epilogue and a
 * residual as C (beta 1: D = alpha A B + C + bias, C of D's layout,
 * possibly D itself, which cuBLASLt allows in place); the result goes to
 * out. */
tg_status tg_cuda_encode_mul_mat(tg_cuda_ctx *c, CUstream s, const tg_tensor *node, const tg_cuda_fused *f,
                                 const tg_tensor *out, tg_type b_stored) {
    const tg_tensor *a = node->src[0], *b = node->src[1];
    const tg_tensor *bias = f->bias, *res = f->res;
    bool relu = f->relu;
    const tg_cublaslt_api *lt = c->dev->lt;
    mm_setup ms = mm_choose(c, node);
    size_t es = tg_type_size(ms.target);
    /* D in F32, or BF16 in the first half of out's storage (the emit
     * fusion: a mask for attentions, plan_emit), its strides out's in
     * elements; C (a residual) is read in D's type, so not with BF16 */
    const bool d16 = f->d_type == TG_BF16;
    const size_t es_d = d16 ? 2 : 4;
    if (d16 && (res || f->rows))
        return tg_status_new(TG_ERR_INTERNAL, "mul_mat '%s': a BF16 result with a residual or a cache write", node->name);
    int64_t K = a->ne[0], N = a->ne[1], M = b->ne[1];
    int64_t A2 = a->ne[2], A3 = a->ne[3], B2 = b->ne[2], B3 = b->ne[3];
    if (N == 0 || M == 0 || B2 == 0 || B3 == 0) return NULL;
    tg_status st;
    CUdeviceptr pa = (CUdeviceptr)(uintptr_t)a->data, pb = (CUdeviceptr)(uintptr_t)b->data;
    int64_t lda, sa2, sa3, ldb, sb2, sb3;
    CUdeviceptr next = c->scratch;
    /* c->mm_dry (tg_cuda_mm_d16_ok): the plans only, nothing launched */
    const bool dry = c->mm_dry;
    if (ms.conv_a) {
        if (!dry && (st = tg_cuda_convert(c, s, a, ms.target, next))) return st;
        pa = next;
        next += tg_cuda_align256((size_t)tg_nelements(a) * es);
        lda = K, sa2 = K * N, sa3 = K * N * A2;
    } else {
        lda = (int64_t)(a->nb[1] / es), sa2 = (int64_t)(a->nb[2] / es), sa3 = (int64_t)(a->nb[3] / es);
    }
    if (b_stored != TG_F32 && b_stored != ms.target)
        return tg_status_new(TG_ERR_INTERNAL, "mul_mat '%s': activations stored as %s for %s operands", node->name,
                             tg_type_name(b_stored), tg_type_name(ms.target));
    if (b_stored != TG_F32) {
        /* Its producer already stored it in the product's type, contiguous. */
        ldb = K, sb2 = K * M, sb3 = K * M * B2;
    } else if (ms.conv_b) {
        if (!dry && (st = tg_cuda_convert(c, s, b, ms.target, next))) return st;
        pb = next;
        ldb = K, sb2 = K * M, sb3 = K * M * B2;
    } else {
        ldb = (int64_t)(b->nb[1] / es), sb2 = (int64_t)(b->nb[2] / es), sb3 = (int64_t)(b->nb[3] / es);
    }
    CUdeviceptr pd = (CUdeviceptr)(uintptr_t)out->data;
    int64_t ldd = (int64_t)(out->nb[1] / 4), sd2 = (int64_t)(out->nb[2] / 4), sd3 = (int64_t)(out->nb[3] / 4);

    /* Weights shared by every batch and activations evenly strided: one
     * product with M*B2*B3 columns. */
    int64_t m_tot = M, n_b2 = B2, n_b3 = B3;
    if (A2 == 1 && A3 == 1 && (B2 == 1 || (sb2 == ldb * M && sd2 == ldd * M)) &&
        (B3 == 1 || (sb3 == sb2 * B2 && sd3 == sd2 * B2))) {
        m_tot = M * B2 * B3;
        n_b2 = n_b3 = 1;
    }
    int64_t r2 = B2 / A2, r3 = B3 / A3;
    float alpha = f->alpha, beta = res ? 1.0f : 0.0f;
    /* C at D's offsets: the residual has the result's shape and layout */
    CUdeviceptr pc = res ? (CUdeviceptr)(uintptr_t)res->data : pd;
    int epilogue = bias ? (relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS) : 0;
    /* A matrix per dim-2 entry shared over a longer dim 3 (the rel-pos
     * term: r [hd, 2T-1, H, 1] against (q + v) [hd, T, H, B]): one call per
     * dim-2 entry batched over dim 3, H calls instead of B. */
    bool by_dim3 = A3 == 1 && A2 > 1 && A2 == n_b2 && n_b3 > A2;
    for (int64_t o = 0; o < (by_dim3 ? A2 : n_b3); o++) {
        /* One call per weight matrix in dim 2, batched over the activations
         * that share it (all of dim 2 when A2 == B2 or A2 == 1). */
        int64_t i3 = o;
        int64_t groups = by_dim3 || A2 == n_b2 || A2 == 1 ? 1 : A2;
        for (int64_t g = 0; g < groups; g++) {
            int64_t batch = groups == 1 ? n_b2 : r2;
            int64_t b2_0 = groups == 1 ? 0 : g * r2;
            int64_t sa = (A2 == 1 || groups > 1) ? 0 : sa2, sb = sb2, sd = sd2;
            CUdeviceptr A = pa + (CUdeviceptr)(((i3 / r3) * sa3 + (groups > 1 ? g * sa2 : 0)) * (int64_t)es);
            CUdeviceptr B = pb + (CUdeviceptr)((i3 * sb3 + b2_0 * sb2) * (int64_t)es);
            CUdeviceptr D = pd + (CUdeviceptr)((i3 * sd3 + b2_0 * sd2) * (int64_t)es_d);
            CUdeviceptr C = pc + (CUdeviceptr)((i3 * sd3 + b2_0 * sd2) * (int64_t)es_d);
            if (by_dim3) {
                batch = n_b3, sa = 0, sb = sb3, sd = sd3;
                A = pa + (CUdeviceptr)(o * sa2 * (int64_t)es);
                B = pb + (CUdeviceptr)(o * sb2 * (int64_t)es);
                D = pd + (CUdeviceptr)(o * sd2 * (int64_t)es_d);
                C = pc + (CUdeviceptr)(o * sd2 * (int64_t)es_d);
            }
            cuda_mm_key k;
            memset(&k, 0, sizeof k);
            k.atype = (int32_t)lt_type(ms.target);
            k.btype = k.atype;
            k.compute = (int32_t)ms.compute;
            k.epilogue = epilogue;
            k.dtype = d16 ? (int32_t)CUDA_R_16BF : (int32_t)CUDA_R_32F;
            k.m = m_tot, k.n = N, k.k = K, k.lda = lda, k.ldb = ldb, k.ldd = ldd;
            k.batch = batch;
            k.sa = sa, k.sb = sb, k.sd = sd;
            k.align_a = (int32_t)min_u32(align_of(A), min_u32(align_of((uint64_t)(lda * (int64_t)es)),
                                                               batch > 1 && sa ? align_of((uint64_t)(sa * (int64_t)es)) : 256));
            k.align_b = (int32_t)min_u32(align_of(B), min_u32(align_of((uint64_t)(ldb * (int64_t)es)),
                                                               batch > 1 ? align_of((uint64_t)(sb * (int64_t)es)) : 256));
            k.align_d = (int32_t)min_u32(align_of(D), min_u32(align_of((uint64_t)(ldd * (int64_t)es_d)),
                                                               batch > 1 ? align_of((uint64_t)(sd * (int64_t)es_d)) : 256));
            if (bias) k.align_d = (int32_t)min_u32((uint32_t)k.align_d, align_of((uint64_t)(uintptr_t)bias->data));
            if (res) k.align_d = (int32_t)min_u32((uint32_t)k.align_d, align_of(C));
            cuda_mm_plan *p = NULL;
            if ((st = mm_plan(c, &k, &p))) return tg_status_wrap(st, "mul_mat '%s'", node->name);
            if (dry) continue;
            if (bias) {
                const void *bp = bias->data;
                cublasStatus_t ls = lt->cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof bp);
                if (ls) return lt_fail(ls, "bias pointer");
            }
            /* after what a step chain recorded (cuda_chain.c) */
            tg_status fst = tg_cuda_chain_flush(c);
            if (fst) return fst;
            c->last_kernel = "cublasLtMatmul";
            c->last_grid[0] = (unsigned)N;
            c->last_grid[1] = (unsigned)m_tot;
            c->last_grid[2] = (unsigned)batch;
            c->last_block = (unsigned)K;
            cublasStatus_t ls = mm_launch(c, p, &alpha, A, B, &beta, C, D, c->lt_ws, p->ws, s);
            if (ls) {
                st = lt_fail(ls, "matmul");
                return tg_status_wrap(st, "mul_mat '%s' (%lldx%lldx%lld)", node->name, (long long)N,
                                      (long long)m_tot, (long long)K);
            }
        }
    }
    return NULL;
}

bool tg_cuda_mm_d16_ok(tg_cuda_ctx *c, tg_tensor *const *nodes, int head, int len, tg_type b_stored,
                       bool drop_bias) {
    if (!c->dev->lt || !c->dev->lt_handle) return true; /* a plan without a device (tg_cuda_test_plan) */
    tg_cuda_fused f = tg_cuda_fused_parts(nodes, head, len);
    f.d_type = TG_BF16;
    if (drop_bias) f.bias = NULL;
    c->mm_dry = true;
    tg_status st = tg_cuda_encode_mul_mat(c, NULL, nodes[head], &f, nodes[head + len - 1], b_stored);
    c->mm_dry = false;
    if (!st) return true;
    TG_DEBUG("%s: '%s' keeps its F32 result: %s", c->name, nodes[head]->name, tg_status_message(st));
    tg_status_free(st);
    return false;
}

/* ------------------------------------------------ conv_2d 1x1 as a product
 *
 * conv_2d takes three paths (cuda_ops.c: encode_conv_2d), by shape (the
 * subsampling of spec 2.1 has one of each kind;
 * floors per 35 s clip, NOTES.md: conv0 writes 115 MB, 28 us at the copy;
 * the 1x1 convs are 3.67 and 0.92 GFLOP, 55 and 14 us at the f32 peak):
 * - 1x1, stride 1, no padding, pixels contiguous: a cuBLASLt product per
 *   batch entry, out[pix, co] = sum_ci x[pix, ci] K[ci, co] with x read in
 *   place (pix rows, ci columns, ld = x.nb[2]) and K as Cin x Cout (ld =
 *   K.nb[3]); F32 operands, f32 compute unless the node asks TG_PREC_TF32
 *   (then tf32 inputs on the tensor cores): without the request a conv's
 *   conformance limit is the elementwise one (tests/ops/cases_conv.c), so
 *   it must stay an f32 sum.
 * - one input channel, 3x3, F32: conv_2d_c1_3x3 (kernels/conv.cu).
 * - anything else: the direct kernel conv_2d, one thread per output. */

bool tg_cuda_conv_1x1_ok(const tg_cuda_ctx *c, const tg_tensor *n) {
    const tg_tensor *k = n->src[0], *x = n->src[1];
    int64_t P = x->ne[0] * x->ne[1];
    return c->dev->lt != NULL && k->ne[0] == 1 && k->ne[1] == 1 && tg_param_i32(n, 0) == 1 &&
           tg_param_i32(n, 1) == 1 && tg_param_i32(n, 2) == 0 && tg_param_i32(n, 3) == 0 && tg_cuda_f32_words(k) &&
           tg_cuda_f32_words(x) && tg_cuda_f32_words(n) && k->nb[2] == 4 && k->nb[3] / 4 >= (size_t)k->ne[2] && x->nb[0] == 4 &&
           x->nb[1] == 4 * (size_t)x->ne[0] && x->nb[2] / 4 >= (size_t)P && n->nb[0] == 4 &&
           n->nb[1] == 4 * (size_t)n->ne[0] && n->nb[2] / 4 >= (size_t)P && x->ne[3] <= INT32_MAX;
}

/* out[w, h, co, b] = sum_ci K[0, 0, ci, co] x[w, h, ci, b] (conv_1x1_ok holds),
 * in f32, or on the tf32 tensor cores where the node asks TG_PREC_TF32 (the
 * encoder's pointwise subsampling convs: without it cuBLASLt runs a SIMT
 * sgemm, 0.64 ms for 29 GFLOP at batch 8 on an H100). */
tg_status tg_cuda_conv_1x1(tg_cuda_ctx *c, CUstream s, const tg_tensor *n) {
    const tg_tensor *kr = n->src[0], *x = n->src[1];
    int64_t P = x->ne[0] * x->ne[1], Cin = kr->ne[2], Cout = kr->ne[3], B = x->ne[3];
    CUdeviceptr A = (CUdeviceptr)(uintptr_t)x->data, Bm = (CUdeviceptr)(uintptr_t)kr->data;
    CUdeviceptr D = (CUdeviceptr)(uintptr_t)n->data;
    cuda_mm_key k;
    memset(&k, 0, sizeof k);
    k.atype = k.btype = (int32_t)CUDA_R_32F;
    k.compute = (int32_t)(tg_node_prec(n) == TG_PREC_TF32 && c->dev->props.tc_level >= 2 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                                          : CUBLAS_COMPUTE_32F);
    /* D (P x Cout) = x (P x Cin, as stored) K (Cin x Cout), column-major:
     * mm_plan's n x m result with A not transposed */
    k.n = P, k.m = Cout, k.k = Cin;
    k.lda = (int64_t)(x->nb[2] / 4), k.ldb = (int64_t)(kr->nb[3] / 4), k.ldd = (int64_t)(n->nb[2] / 4);
    k.batch = B;
    k.sa = (int64_t)(x->nb[3] / 4), k.sb = 0, k.sd = (int64_t)(n->nb[3] / 4);
    k.align_a = (int32_t)min_u32(align_of(A), min_u32(align_of(x->nb[2]), B > 1 ? align_of(x->nb[3]) : 256));
    k.align_b = (int32_t)min_u32(align_of(Bm), align_of(kr->nb[3]));
    k.align_d = (int32_t)min_u32(align_of(D), min_u32(align_of(n->nb[2]), B > 1 ? align_of(n->nb[3]) : 256));
    k.a_plain = 1;
    cuda_mm_plan *p = NULL;
    tg_status st = mm_plan(c, &k, &p);
    if (st) return tg_status_wrap(st, "conv_2d '%s' (1x1)", n->name);
    float alpha = 1.0f, beta = 0.0f;
    c->last_kernel = "cublasLtMatmul (conv_2d 1x1)";
    c->last_grid[0] = (unsigned)P;
    c->last_grid[1] = (unsigned)Cout;
    c->last_grid[2] = (unsigned)B;
    c->last_block = (unsigned)Cin;
    cublasStatus_t ls = mm_launch(c, p, &alpha, A, Bm, &beta, D, D, 0, 0, s);
    if (ls)
        return tg_status_wrap(lt_fail(ls, "matmul"), "conv_2d '%s' (1x1, %lldx%lldx%lld, batch %lld)", n->name,
                              (long long)P, (long long)Cout, (long long)Cin, (long long)B);
    return NULL;
}
