/*
 * cuda_ops.c: one encode function per op: kernel choice, launch shape and
 * arguments; the op/type support matrix; the scratch each node needs; the
 * launches of the fused groups cuda_fusion.c finds (the conv module's
 * chain, the subsampling's bias/mask/relu, the embedding head, a step's
 * tail; products' groups go to cuda_matmul.c and cuda_matvec.c); emit
 * (16-bit stores for a product).
 *
 * Every encode only enqueues work on the given stream, so the same code runs
 * for direct launches and inside a CUDA-graph capture. Temporaries (type
 * conversions in front of a matrix product) live in the context's scratch
 * area, sized before encoding starts by tg_cuda_op_scratch, never allocated
 * while encoding.
 *
 * Not here: which nodes fuse (cuda_fusion.c); streams, graphs, errors
 * (cuda_context.c); the attention's
 * paths (cuda_attention.c); products of few columns on matvec.cu
 * (cuda_matvec.c); the cuBLASLt products (cuda_matmul.c); device code
 * (kernels/).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cuda_internal.h"
#include "cuda_variants.h"
#include "hazard.h"
#include "op_params.h"

_Static_assert(TG_KT_F32 == TG_F32 && TG_KT_F16 == TG_F16 && TG_KT_BF16 == TG_BF16 && TG_KT_I32 == TG_I32 &&
                   TG_KT_I64 == TG_I64,
               "kernels/kargs.cuh's type codes must be tg_type's");

tg_t tg_cuda_desc(const tg_tensor *t) {
    tg_t d;
    memset(&d, 0, sizeof d);
    if (!t) {
        for (int i = 0; i < 4; i++) d.ne[i] = 1;
        return d;
    }
    d.p = (uint64_t)(uintptr_t)t->data;
    for (int i = 0; i < 4; i++) {
        d.ne[i] = t->ne[i];
        d.nb[i] = (int64_t)t->nb[i];
    }
    d.type = (int32_t)t->type;
    return d;
}

static bool is_float(tg_type t) { return t == TG_F32 || t == TG_F16 || t == TG_BF16; }

unsigned tg_cuda_grid(const tg_cuda_ctx *c, int64_t n, unsigned block) {
    int64_t g = (n + block - 1) / block;
    int64_t cap = (int64_t)c->dev->props.sm_count * 32;
    if (g > cap) g = cap;
    return g < 1 ? 1 : (unsigned)g;
}

void tg_cuda_launch_config(CUlaunchConfig *cfg, CUlaunchAttribute *at, unsigned gx, unsigned gy, unsigned gz,
                           unsigned bx, unsigned smem, CUstream s, bool pdl) {
    memset(at, 0, sizeof *at);
    at->id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    at->value.programmaticStreamSerializationAllowed = 1;
    memset(cfg, 0, sizeof *cfg);
    cfg->gridDimX = gx, cfg->gridDimY = gy, cfg->gridDimZ = gz;
    cfg->blockDimX = bx, cfg->blockDimY = 1, cfg->blockDimZ = 1;
    cfg->sharedMemBytes = smem;
    cfg->hStream = s;
    cfg->attrs = at;
    cfg->numAttrs = pdl ? 1 : 0;
}

tg_status tg_cuda_launch(tg_cuda_ctx *c, CUstream s, const char *module, const char *defines, const char *name,
                         unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned smem, void *args) {
    return tg_cuda_launch_cluster(c, s, module, defines, name, gx, gy, gz, bx, smem, args, 1);
}

tg_status tg_cuda_launch_cluster(tg_cuda_ctx *c, CUstream s, const char *module, const char *defines,
                                 const char *name, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned smem,
                                 void *args, unsigned cluster_x) {
    if (c->chain_may || c->chain.n > 0) {
        bool taken = false;
        tg_status st = tg_cuda_chain_offer(c, s, module, defines, name, gx, gy, gz, bx, smem, args, cluster_x, &taken);
        if (st || taken) return st;
    }
    return tg_cuda_launch_now(c, s, module, defines, name, gx, gy, gz, bx, smem, args, cluster_x);
}

tg_status tg_cuda_launch_now(tg_cuda_ctx *c, CUstream s, const char *module, const char *defines, const char *name,
                             unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned smem, void *args,
                             unsigned cluster_x) {
    void *params[] = {args};
    CUfunction fn;
    tg_status st = tg_cuda_kernel(c->dev, module, defines, name, &fn);
    if (st) return st;
    const tg_cu_api *cu = c->dev->cu;
    /* A block gets 48 KB of shared memory, its static and dynamic parts
     * together, unless the kernel opts in to more: past 48 KB of dynamic
     * memory, or past 48 KB with the kernel's static part (asked of the
     * driver only where the dynamic part is large: every kernel here has
     * less than 16 KB static; attn_decode_clq_bf16 at 6 chunks a row asks
     * for exactly 48 KB dynamic beside its 3.9 KB). */
    int stat = 0;
    if (smem > 32 * 1024 && smem <= 48 * 1024 &&
        cu->cuFuncGetAttribute(&stat, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn) != CUDA_SUCCESS)
        stat = 0;
    if (smem > 48 * 1024 || (int64_t)smem + stat > 48 * 1024) {
        CUresult r = cu->cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)smem);
        if (r != CUDA_SUCCESS) return tg_cuda_status(r, name);
    }
    c->last_kernel = name;
    c->last_grid[0] = gx;
    c->last_grid[1] = gy;
    c->last_grid[2] = gz;
    c->last_block = bx;
    c->last_smem = smem;
    /* The attributes: the dependent launch where on (the kernel may start
     * while the one before it still runs, and waits in TG_PDL() for its
     * results; kernels/common.cuh), then blocks of cluster_x along x as
     * one cluster (their shared memory shared) */
    CUlaunchAttribute at[2];
    CUlaunchConfig cfg;
    tg_cuda_launch_config(&cfg, &at[0], gx, gy, gz, bx, smem, s, c->use_pdl);
    if (cluster_x > 1) {
        memset(&at[1], 0, sizeof at[1]);
        at[1].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        at[1].value.clusterDim.x = cluster_x;
        at[1].value.clusterDim.y = 1;
        at[1].value.clusterDim.z = 1;
        cfg.attrs = c->use_pdl ? at : &at[1];
        cfg.numAttrs = c->use_pdl ? 2 : 1;
    }
    CUresult r = cfg.numAttrs ? cu->cuLaunchKernelEx(&cfg, fn, params, NULL)
                              : cu->cuLaunchKernel(fn, gx, gy, gz, bx, 1, 1, smem, s, params, NULL);
    if (r == CUDA_ERROR_NOT_SUPPORTED && c->use_pdl) {
        TG_INFO("%s: programmatic dependent launch refused (%s); launching plainly", c->name, tg_cuda_result_text(r));
        c->use_pdl = false;
        cfg.attrs = &at[1];
        cfg.numAttrs = cluster_x > 1 ? 1 : 0;
        r = cfg.numAttrs ? cu->cuLaunchKernelEx(&cfg, fn, params, NULL)
                         : cu->cuLaunchKernel(fn, gx, gy, gz, bx, 1, 1, smem, s, params, NULL);
    }
    if (r != CUDA_SUCCESS) return tg_cuda_ctx_fail(c, r, name);
    return NULL;
}


/* ------------------------------------------------------------- support */

bool tg_cuda_supports(const tg_cuda_device *dev, const tg_tensor *n) {
    const tg_tensor *a = n->src[0], *b = n->src[1];
    switch (n->op) {
    case TG_OP_NONE:
    case TG_OP_VIEW:
        return true;
    case TG_OP_GET_ROWS:
        return is_float(a->type) && (b->type == TG_I32 || b->type == TG_I64) && is_float(n->type);
    case TG_OP_SET_ROWS:
        return is_float(a->type) && (b->type == TG_I32 || b->type == TG_I64) && is_float(n->type);
    case TG_OP_ADD:
    case TG_OP_SUB:
    case TG_OP_MUL:
    case TG_OP_DIV:
        return is_float(a->type) && is_float(b->type) && is_float(n->type);
    case TG_OP_SCALE:
    case TG_OP_RELU:
    case TG_OP_SILU:
    case TG_OP_SIGMOID:
    case TG_OP_LOG:
    case TG_OP_SQRT:
    case TG_OP_GLU:
    case TG_OP_PAD:
    case TG_OP_SUM_ROWS:
    case TG_OP_MEAN:
        return is_float(a->type) && is_float(n->type);
    case TG_OP_MUL_MAT:
        return dev->lt != NULL && is_float(a->type) && is_float(b->type) && n->type == TG_F32 &&
               n->nb[0] == 4;
    case TG_OP_CONV_2D:
    case TG_OP_CONV_2D_DW:
    case TG_OP_CONV_1D_DW:
        return is_float(a->type) && is_float(b->type) && is_float(n->type);
    case TG_OP_LAYER_NORM:
        return is_float(a->type) && is_float(n->type) &&
               (!n->src[1] || (n->src[1]->type == TG_F32 && tg_is_contiguous(n->src[1]))) &&
               (!n->src[2] || (n->src[2]->type == TG_F32 && tg_is_contiguous(n->src[2])));
    case TG_OP_SOFT_MAX:
        return is_float(a->type) && is_float(n->type) && (!b || is_float(b->type));
    case TG_OP_ATTENTION: {
        const tg_tensor *k = n->src[1], *v = n->src[2], *m = n->src[3];
        int64_t D = a->ne[0], Dv = v->ne[0];
        size_t smem = (size_t)(32 * (D + 1) + 32 * Dv + 16 * D) * 4;
        int limit = dev->props.smem_per_block_optin > 0 ? dev->props.smem_per_block_optin
                                                        : dev->props.smem_per_block;
        return is_float(a->type) && is_float(k->type) && is_float(v->type) && (!m || is_float(m->type)) &&
               is_float(n->type) && D >= 1 && D <= 256 && Dv >= 1 && Dv <= 256 && smem <= (size_t)limit;
    }
    case TG_OP_CPY:
        return a->type < TG_TYPE_COUNT && n->type < TG_TYPE_COUNT;
    case TG_OP_CONCAT:
        return a->type == b->type && tg_type_size(a->type) == 4 && n->type == a->type;
    case TG_OP_ARGMAX:
        return is_float(a->type) && n->type == TG_I32;
    default:
        return false;
    }
}

/* ------------------------------------------------------------- scratch */

size_t tg_cuda_op_scratch(const tg_cuda_ctx *c, const tg_tensor *node) {
    if (node->op == TG_OP_MUL_MAT) return tg_cuda_mm_scratch(c, node);
    if (node->op == TG_OP_ATTENTION) return tg_cuda_attention_scratch(c, node);
    return 0;
}

/* n elements of contiguous src into contiguous dst of type dt. */
static tg_status encode_cvt(tg_cuda_ctx *c, CUstream s, uint64_t dst, tg_type dt, const tg_tensor *src, int64_t n) {
    tg_args_cvt_c a = {.d = dst,
                       .s = tg_cuda_dptr(src->data),
                       .dt = (int32_t)dt,
                       .dsz = (int32_t)tg_type_size(dt),
                       .st = (int32_t)src->type,
                       .ssz = (int32_t)tg_type_size(src->type),
                       .n = n};
    return LAUNCH(c, s, "copy.cu", "", cvt_c, tg_cuda_grid(c, n, 256), 1, 1, 256, 0, a);
}

/* cvt_rows_16's case: F32 rows of a multiple of 4 floats, every row start
 * 16-byte aligned, to BF16 or F16 at an 8-byte aligned dst, the row count
 * within 32-bit indexing. */
static bool rows16_ok(const tg_tensor *t, tg_type dt, CUdeviceptr dst) {
    if (t->type != TG_F32 || (dt != TG_BF16 && dt != TG_F16) || t->nb[0] != 4 || t->ne[0] % 4 != 0 ||
        t->ne[0] == 0 || ((uintptr_t)t->data & 15) != 0 || (dst & 7) != 0)
        return false;
    for (int k = 1; k < 4; k++)
        if (t->ne[k] > 1 && t->nb[k] % 16 != 0) return false;
    return t->ne[1] * t->ne[2] * t->ne[3] <= (int64_t)UINT32_MAX / 64;
}

tg_status tg_cuda_convert(tg_cuda_ctx *c, CUstream s, const tg_tensor *t, tg_type dt, CUdeviceptr dst) {
    int64_t n = tg_nelements(t);
    if (n == 0) return NULL;
    if (tg_is_contiguous(t) && t->type == TG_F32 && (dt == TG_BF16 || dt == TG_F16) && n % 4 == 0 &&
        ((uintptr_t)t->data & 15) == 0 && (dst & 7) == 0) {
        tg_args_cvt_f32_16_c4 a = {.d = dst, .s = tg_cuda_dptr(t->data), .n4 = n / 4, .to_bf16 = dt == TG_BF16};
        return LAUNCH(c, s, "copy.cu", "", cvt_f32_16_c4, tg_cuda_grid(c, a.n4, 256), 1, 1, 256, 0, a);
    }
    if (tg_is_contiguous(t)) return encode_cvt(c, s, dst, dt, t, n);
    tg_t d;
    if (rows16_ok(t, dt, dst)) {
        /* F32 rows at any strides (the encoder's heads, views of the
         * projections), a warp a row */
        memset(&d, 0, sizeof d);
        d.p = dst;
        d.type = (int32_t)dt;
        tg_args_cvt_rows_16 a = {.d = d, .a = tg_cuda_desc(t), .n = n};
        int64_t threads = n / t->ne[0] * 32;
        return LAUNCH(c, s, "copy.cu", "", cvt_rows_16, tg_cuda_grid(c, threads, 256), 1, 1, 256, 0, a);
    }
    memset(&d, 0, sizeof d);
    d.p = dst;
    d.type = (int32_t)dt;
    size_t es = tg_type_size(dt);
    for (int i = 0; i < 4; i++) {
        d.ne[i] = t->ne[i];
        d.nb[i] = i == 0 ? (int64_t)es : d.nb[i - 1] * d.ne[i - 1];
    }
    tg_args_cpy a = {.d = d, .a = tg_cuda_desc(t), .n = n};
    return LAUNCH(c, s, "copy.cu", "", cpy, tg_cuda_grid(c, n, 256), 1, 1, 256, 0, a);
}
static bool f32_contiguous(const tg_tensor *t) { return t->type == TG_F32 && tg_is_contiguous(t); }

static tg_status source_stored(const tg_cuda_ctx *c, tg_tensor *const *nodes, int i, const tg_tensor *src,
                               tg_type *out_type, const tg_tensor **out_bias);

/* True when the conv module's kernel must take its sigmoids exactly: the
 * product before the GLU (its result, or the bias add after it) was
 * asked for F32 precision, as the model does throughout when it is (a
 * silu or GLU node itself carries no precision). */
static bool conv_glu_exact(const tg_tensor *glu) {
    const tg_tensor *p = glu->src[0];
    if (p && p->op == TG_OP_ADD) p = p->src[0] && p->src[0]->op == TG_OP_MUL_MAT ? p->src[0] : p->src[1];
    return p && p->op == TG_OP_MUL_MAT && tg_node_prec(p) == TG_PREC_F32;
}

static tg_status encode_conv_glu(tg_cuda_ctx *c, CUstream s, tg_tensor *const *nodes, int i, int out16) {
    const tg_tensor *glu = nodes[i], *dw = nodes[i + 1], *add = nodes[i + 2], *act = nodes[i + 3];
    const tg_tensor *bias = add->src[0] == dw ? add->src[1] : add->src[0], *a = glu->src[0], *pre = NULL;
    tg_type a_stored = TG_F32;
    tg_status st = source_stored(c, nodes, i, a, &a_stored, &pre);
    if (st) return st;
    if (a_stored != TG_F32 && (a_stored != TG_BF16 || (pre && tg_nelements(pre) != a->ne[0])))
        return tg_status_new(TG_ERR_INTERNAL, "cuda: '%s' reads a 16-bit source its kernel does not take", glu->name);
    tg_args_conv_glu_dw_silu_c4 g = {.o = tg_cuda_dptr(act->data), .in = tg_cuda_dptr(a->data), .kr = tg_cuda_dptr(dw->src[0]->data),
                                     .bias = tg_cuda_dptr(bias->data), .pre = pre ? tg_cuda_dptr(pre->data) : 0,
                                     .c4 = (int)(dw->ne[0] / 4), .t = (int)a->ne[1], .ot = (int)dw->ne[1],
                                     .k = (int)dw->src[0]->ne[0], .p = tg_param_i32(dw, 1), .in16 = a_stored == TG_BF16,
                                     .fast = c->conv_fast && !conv_glu_exact(glu)};
    if (tg_nelements(act) == 0) return NULL;
    if (g.in16) c->n_unary16++;
    char defs[32] = "";
    if (out16 != TG_EMIT_F32) {
        snprintf(defs, sizeof defs, TG_DEFS_OUT16, out16);
        c->n_fused[TG_FUSED_EMIT]++; /* the silu's store, for its product */
    }
    c->n_fused[TG_FUSED_CONV_GLU]++;
    return LAUNCH(c, s, "conv.cu", defs, conv_glu_dw_silu_c4, (unsigned)((g.c4 + 63) / 64),
                  (unsigned)((dw->ne[1] + TG_DW1_TT - 1) / TG_DW1_TT), (unsigned)(a->ne[2] * a->ne[3]), 64, 0, g);
}

/* The subsampling's front, conv0 through the depthwise conv's mask, as
 * one sub_conv_dw launch (cuda_fusion.c's sub_front_fuse_len took the
 * group: conv, add, [mul], relu, conv_2d_dw, add, [mul]). */
static tg_status encode_sub_front(tg_cuda_ctx *c, CUstream s, tg_tensor *const *nodes, int i, int len) {
    const tg_tensor *conv = nodes[i], *dw = NULL, *last = nodes[i + len - 1];
    const tg_tensor *bias[2] = {NULL, NULL}, *mask[2] = {NULL, NULL};
    for (int k = i + 1, stage = 0; k < i + len; k++) {
        const tg_tensor *t = nodes[k], *prev = nodes[k - 1];
        if (t->op == TG_OP_ADD) bias[stage] = t->src[0] == prev ? t->src[1] : t->src[0];
        else if (t->op == TG_OP_MUL) mask[stage] = t->src[0] == prev ? t->src[1] : t->src[0];
        else if (t->op == TG_OP_CONV_2D_DW) dw = t, stage = 1;
    }
    if (!dw || !bias[0] || !bias[1])
        return tg_status_new(TG_ERR_INTERNAL, "cuda: '%s': not the subsampling's front", last->name);
    if (tg_nelements(last) == 0) return NULL;
    const tg_tensor *x = conv->src[1];
    tg_args_sub_conv_dw a = {.m1 = tg_cuda_desc(mask[0] ? mask[0] : bias[0]),
                             .m2 = tg_cuda_desc(mask[1] ? mask[1] : bias[1]),
                             .o = tg_cuda_dptr(last->data),
                             .x = tg_cuda_dptr(x->data),
                             .k0 = tg_cuda_dptr(conv->src[0]->data),
                             .b0 = tg_cuda_dptr(bias[0]->data),
                             .k1 = tg_cuda_dptr(dw->src[0]->data),
                             .b1 = tg_cuda_dptr(bias[1]->data),
                             .w0 = (int)x->ne[0], .h0 = (int)x->ne[1], .w1 = (int)conv->ne[0], .h1 = (int)conv->ne[1],
                             .ow = (int)dw->ne[0], .oh = (int)dw->ne[1], .c = (int)dw->ne[2],
                             .has_m1 = mask[0] != NULL, .has_m2 = mask[1] != NULL};
    c->n_fused[TG_FUSED_SUB_FRONT]++;
    return LAUNCH(c, s, "conv.cu", "", sub_conv_dw, (unsigned)((dw->ne[0] * dw->ne[1] + 255) / 256),
                  (unsigned)((dw->ne[2] + TG_SUB_TILE - 1) / TG_SUB_TILE), (unsigned)dw->ne[3], 256, 0, a);
}

/* ew_bias_mask_c4 for add (x + a row bias), then next (its mask mul or
 * relu; NULL for the add alone), ending at last. */
static tg_status encode_bias_mask(tg_cuda_ctx *c, CUstream s, const tg_tensor *add, const tg_tensor *next,
                                  const tg_tensor *last) {
    const tg_tensor *x = tg_cuda_row_value(add->src[1], add) ? add->src[0] : add->src[1];
    const tg_tensor *bias = x == add->src[0] ? add->src[1] : add->src[0];
    const tg_tensor *mask = next && next->op == TG_OP_MUL ? tg_cuda_row_operand(next, add) : NULL;
    int64_t ne = tg_nelements(add);
    if (ne == 0) return NULL;
    tg_args_ew_bias_mask_c4 a = {.bias = tg_cuda_desc(bias),
                                 .mask = mask ? tg_cuda_desc(mask) : tg_cuda_desc(bias),
                                 .d = tg_cuda_dptr(last->data),
                                 .x = tg_cuda_dptr(x->data),
                                 .n4 = ne / 4,
                                 .ne1 = add->ne[1],
                                 .ne2 = add->ne[2],
                                 .q4 = (int32_t)(add->ne[0] / 4),
                                 .has_mask = mask != NULL,
                                 .relu = last->op == TG_OP_RELU};
    char defs[48];
    snprintf(defs, sizeof defs, TG_DEFS_EW, TG_EW_ADD, TG_EMIT_F32);
    c->n_fused[TG_FUSED_BIAS_MASK] += next != NULL;
    return LAUNCH(c, s, "elementwise.cu", defs, ew_bias_mask_c4, tg_cuda_grid(c, a.n4, 256), 1, 1, 256, 0, a);
}

/* ------------------------------------------------------------ encoders */

/* Contiguous F32 whose operands repeat with a period (full size, or a
 * leading block such as one bias row): 16 bytes per thread. */
static bool binary_vec_ok(const tg_tensor *n, int64_t per[2]) {
    int64_t ne = tg_nelements(n);
    bool fast = n->type == TG_F32 && tg_is_contiguous(n) && ne % 4 == 0 && ((uintptr_t)n->data & 15) == 0;
    for (int k = 0; k < 2 && fast; k++) {
        const tg_tensor *t = n->src[k];
        fast = t->type == TG_F32 && tg_is_contiguous(t) && ((uintptr_t)t->data & 15) == 0;
        int d = 0;
        while (d < 4 && t->ne[d] == n->ne[d]) d++;
        for (int j = d; j < 4 && fast; j++) fast = t->ne[j] == 1;
        per[k] = tg_nelements(t);
        fast = fast && per[k] % 4 == 0;
    }
    return fast;
}

static bool unary_vec_ok(const tg_tensor *n) {
    const tg_tensor *a = n->src[0];
    return n->type == TG_F32 && a->type == TG_F32 && tg_is_contiguous(n) && tg_is_contiguous(a) &&
           tg_nelements(n) % 4 == 0 && (((uintptr_t)n->data | (uintptr_t)a->data) & 15) == 0;
}

static bool norm_vec_ok(const tg_tensor *n) {
    const tg_tensor *a = n->src[0], *w = n->src[1], *b = n->src[2];
    uintptr_t pw = w ? (uintptr_t)w->data : 0, pb = b ? (uintptr_t)b->data : 0;
    return a->type == TG_F32 && n->type == TG_F32 && tg_is_contiguous(a) && tg_is_contiguous(n) &&
           a->ne[0] % 4 == 0 && a->ne[0] / 4 <= 256 * 8 && ((uintptr_t)a->data & 15) == 0 &&
           ((uintptr_t)n->data & 15) == 0 && (pw & 15) == 0 && (pb & 15) == 0 && tg_nrows(a) < (1ll << 31);
}

bool tg_cuda_norm_vec_ok(const tg_tensor *n) { return n->op == TG_OP_LAYER_NORM && norm_vec_ok(n); }

static bool is_unary(tg_op op) {
    return op == TG_OP_SCALE || op == TG_OP_RELU || op == TG_OP_SILU || op == TG_OP_SIGMOID || op == TG_OP_LOG ||
           op == TG_OP_SQRT;
}

bool tg_cuda_unary_takes16(const tg_tensor *n) { return is_unary(n->op) && unary_vec_ok(n); }

bool tg_cuda_can_emit16(const tg_tensor *n) {
    int64_t per[2];
    switch (n->op) {
    case TG_OP_ADD:
    case TG_OP_SUB:
    case TG_OP_MUL:
    case TG_OP_DIV: return binary_vec_ok(n, per);
    case TG_OP_SCALE:
    case TG_OP_RELU:
    case TG_OP_SILU:
    case TG_OP_SIGMOID:
    case TG_OP_LOG:
    case TG_OP_SQRT: return unary_vec_ok(n);
    case TG_OP_LAYER_NORM: return norm_vec_ok(n);
    default: return false;
    }
}

/* F32 rows of at least a warp, each source's rows contiguous or one value
 * (ew_binary_rows); an F16/BF16 store (emit) never takes it. */
static bool binary_rows_ok(const tg_tensor *n) {
    bool ok = n->type == TG_F32 && n->nb[0] == 4 && n->ne[0] >= 32 && n->ne[0] <= INT32_MAX;
    for (int k = 0; k < 2 && ok; k++) {
        const tg_tensor *t = n->src[k];
        ok = t->type == TG_F32 && (t->ne[0] == 1 || (t->ne[0] == n->ne[0] && t->nb[0] == 4));
    }
    return ok;
}

static tg_status encode_binary(tg_cuda_ctx *c, CUstream s, const tg_tensor *n, int op, int out16) {
    const tg_tensor *a = n->src[0], *b = n->src[1];
    int64_t ne = tg_nelements(n);
    if (ne == 0) return NULL;
    char defs[48];
    snprintf(defs, sizeof defs, TG_DEFS_EW, op, out16);
    int64_t per[2];
    if (binary_vec_ok(n, per)) {
        tg_args_ew_binary_c4 v = {.d = tg_cuda_dptr(n->data),
                                  .a = tg_cuda_dptr(a->data),
                                  .b = tg_cuda_dptr(b->data),
                                  .n4 = ne / 4,
                                  .na4 = per[0] / 4,
                                  .nb4 = per[1] / 4};
        return LAUNCH(c, s, "elementwise.cu", defs, ew_binary_c4, tg_cuda_grid(c, v.n4, 256), 1, 1, 256, 0, v);
    }
    if (out16 == TG_EMIT_F32 && binary_rows_ok(n)) {
        int64_t rows = ne / n->ne[0];
        tg_args_ew_binary_rows r = {.d = tg_cuda_desc(n), .a = tg_cuda_desc(a), .b = tg_cuda_desc(b), .n = rows};
        return LAUNCH(c, s, "elementwise.cu", defs, ew_binary_rows, tg_cuda_grid(c, rows * 32, 256), 1, 1, 256, 0, r);
    }
    /* a row bias over rows too short for ew_binary_rows: one pass of
     * float4s, not an element at a time */
    if (op == TG_EW_ADD && out16 == TG_EMIT_F32 && tg_cuda_bias_add_c4(c, n)) return encode_bias_mask(c, s, n, NULL, n);
    tg_args_ew_binary g = {.d = tg_cuda_desc(n), .a = tg_cuda_desc(a), .b = tg_cuda_desc(b), .n = ne};
    return LAUNCH(c, s, "elementwise.cu", defs, ew_binary, tg_cuda_grid(c, ne, 256), 1, 1, 256, 0, g);
}

/* A unary op; a_stored: the type its source's producer stored (BF16 only
 * where plan_emit checked tg_cuda_unary_takes16: ew_unary_b4); bias, when
 * not NULL, the producer's bias, which it left for this op to add (F32,
 * one value a row of n, 16-byte aligned: plan_emit checked). */
static tg_status encode_unary(tg_cuda_ctx *c, CUstream s, const tg_tensor *n, int op, float sc, int out16,
                              tg_type a_stored, const tg_tensor *bias) {
    const tg_tensor *a = n->src[0];
    int64_t ne = tg_nelements(n);
    if (ne == 0) return NULL;
    char defs[48];
    snprintf(defs, sizeof defs, TG_DEFS_EW, op, out16);
    if (a_stored != TG_F32) {
        if (a_stored != TG_BF16 || !unary_vec_ok(n))
            return tg_status_new(TG_ERR_INTERNAL, "cuda: '%s' reads a 16-bit source its kernel does not take", n->name);
        tg_args_ew_unary_b4 v = {.d = tg_cuda_dptr(n->data),
                                 .a = tg_cuda_dptr(a->data),
                                 .bias = bias ? tg_cuda_dptr(bias->data) : 0,
                                 .s = sc,
                                 .n4 = ne / 4,
                                 .row = bias ? tg_nelements(bias) : 0}; /* the product's rows: n may be a reshape */
        c->n_unary16++;
        return LAUNCH(c, s, "elementwise.cu", defs, ew_unary_b4, tg_cuda_grid(c, v.n4, 256), 1, 1, 256, 0, v);
    }
    if (unary_vec_ok(n)) {
        tg_args_ew_unary_c4 v = {.d = tg_cuda_dptr(n->data), .a = tg_cuda_dptr(a->data), .s = sc, .n4 = ne / 4};
        return LAUNCH(c, s, "elementwise.cu", defs, ew_unary_c4, tg_cuda_grid(c, v.n4, 256), 1, 1, 256, 0, v);
    }
    tg_args_ew_unary g = {.d = tg_cuda_desc(n), .a = tg_cuda_desc(a), .s = sc, .n = ne};
    return LAUNCH(c, s, "elementwise.cu", defs, ew_unary, tg_cuda_grid(c, ne, 256), 1, 1, 256, 0, g);
}

static unsigned row_block(int64_t ne0) {
    unsigned b = 32;
    while (b < 256 && (int64_t)b < ne0) b *= 2;
    return b;
}

static tg_status encode_layer_norm(tg_cuda_ctx *c, CUstream s, const tg_tensor *n, int out16) {
    const tg_tensor *a = n->src[0], *w = n->src[1], *b = n->src[2];
    float eps = tg_param_f32(n, 0);
    int64_t rows = tg_nrows(a), ne0 = a->ne[0];
    if (rows == 0 || ne0 == 0) return NULL;
    uint64_t pw = w ? tg_cuda_dptr(w->data) : 0, pb = b ? tg_cuda_dptr(b->data) : 0;
    int64_t n4 = ne0 / 4;
    char defs[32] = "";
    if (out16 != TG_EMIT_F32) snprintf(defs, sizeof defs, TG_DEFS_OUT16, out16);
    if (norm_vec_ok(n)) {
        tg_args_layer_norm_c4 v = {
            .d = tg_cuda_dptr(n->data), .a = tg_cuda_dptr(a->data), .w = pw, .b = pb, .rows = rows, .n4 = (int32_t)n4, .eps = eps,
            /* the affine's lines into L2 before the wait, where no kernel writes them */
            .prefetch = c->norm_prefetch && (w || b) && (!w || tg_cuda_is_weight(w)) && (!b || tg_cuda_is_weight(b))};
        /* A warp per row: no block barriers, the row in registers. */
        if (n4 <= TG_NORM_WARP_N4)
            return LAUNCH(c, s, "norm.cu", defs, layer_norm_w4, (unsigned)((rows + 7) / 8), 1, 1, 256, 0, v);
        unsigned block = 32;
        while (block < 256 && block < n4) block += 32;
        while ((int64_t)block * 8 < n4) block += 32;
        return LAUNCH(c, s, "norm.cu", defs, layer_norm_c4, (unsigned)rows, 1, 1, block, 0, v);
    }
    tg_args_layer_norm g = {.d = tg_cuda_desc(n), .a = tg_cuda_desc(a), .w = pw, .b = pb, .eps = eps};
    return LAUNCH(c, s, "norm.cu", "", layer_norm, (unsigned)rows, 1, 1, row_block(ne0), 0, g);
}

/* The pair norm_pair_fuse_len took: a, a layer norm, and b, the layer
 * norm of a's result, in one layer_norm2_w4 launch; a stored F32, b as
 * out16 says. */
static tg_status encode_norm_pair(tg_cuda_ctx *c, CUstream s, const tg_tensor *a, const tg_tensor *b, int out16) {
    const int64_t rows = tg_nrows(a);
    if (rows == 0 || a->ne[0] == 0) return NULL;
    char defs[32] = "";
    if (out16 != TG_EMIT_F32) snprintf(defs, sizeof defs, TG_DEFS_OUT16, out16);
    const tg_tensor *par[4] = {a->src[1], a->src[2], b->src[1], b->src[2]};
    bool weights = true;
    for (int k = 0; k < 4; k++) weights = weights && (!par[k] || tg_cuda_is_weight(par[k]));
    tg_args_layer_norm2_w4 v = {.d = tg_cuda_dptr(b->data),
                                .d1 = tg_cuda_dptr(a->data),
                                .a = tg_cuda_dptr(a->src[0]->data),
                                .w1 = par[0] ? tg_cuda_dptr(par[0]->data) : 0,
                                .b1 = par[1] ? tg_cuda_dptr(par[1]->data) : 0,
                                .w2 = par[2] ? tg_cuda_dptr(par[2]->data) : 0,
                                .b2 = par[3] ? tg_cuda_dptr(par[3]->data) : 0,
                                .rows = rows,
                                .n4 = (int32_t)(a->ne[0] / 4),
                                .eps1 = tg_param_f32(a, 0),
                                .eps2 = tg_param_f32(b, 0),
                                .prefetch = c->norm_prefetch && weights};
    c->n_fused[TG_FUSED_NORM_PAIR]++;
    if (out16 != TG_EMIT_F32) c->n_fused[TG_FUSED_EMIT]++;
    return LAUNCH(c, s, "norm.cu", defs, layer_norm2_w4, (unsigned)((rows + 7) / 8), 1, 1, 256, 0, v);
}

/* The group of len nodes embed_norm_fuse_len took from nodes[i]: one
 * block a row. */
static tg_status encode_embed_norm(tg_cuda_ctx *c, CUstream s, tg_tensor *const *nodes, int i, int len) {
    const tg_tensor *ga = nodes[i], *gb = nodes[i + 1], *ln = nodes[i + len - 1];
    const tg_tensor *w = ln->src[1], *b = ln->src[2];
    int64_t rows = tg_nrows(ln);
    if (rows == 0 || ln->ne[0] == 0) return NULL;
    tg_args_embed_norm a = {.d = tg_cuda_desc(ln),
                            .ta = tg_cuda_desc(ga->src[0]),
                            .tb = tg_cuda_desc(gb->src[0]),
                            .ia = tg_cuda_desc(ga->src[1]),
                            .ib = tg_cuda_desc(gb->src[1]),
                            .w = w ? tg_cuda_dptr(w->data) : 0,
                            .b = b ? tg_cuda_dptr(b->data) : 0,
                            .eps = tg_param_f32(ln, 0)};
    c->n_fused[TG_FUSED_EMBED_NORM]++;
    return LAUNCH(c, s, "norm.cu", "", embed_norm, (unsigned)rows, 1, 1, row_block(ln->ne[0]), 0, a);
}

/* A kernel with one block per row of node n's source (row_block threads). */
#define LAUNCH_ROWS(c, s, module, kernel, n, args)                                                              \
    (tg_nrows((n)->src[0]) == 0 ? NULL                                                                          \
                                : LAUNCH(c, s, module, "", kernel, (unsigned)tg_nrows((n)->src[0]), 1, 1,       \
                                         row_block((n)->src[0]->ne[0]), 0, args))

/* A reduction (reduce.cu) with one block per row of node n's source: up
 * to 1024 threads, so a row of the vocabulary's 16384 logits takes four
 * float4 loads a thread instead of 64 one by one. */
static unsigned reduce_block(int64_t ne0) {
    unsigned b = 32;
    while (b < 1024 && (int64_t)b * 16 < ne0) b *= 2;
    return b;
}
#define LAUNCH_REDUCE(c, s, kernel, n, args)                                                                    \
    (tg_nrows((n)->src[0]) == 0 ? NULL                                                                          \
                                : LAUNCH(c, s, "reduce.cu", "", kernel, (unsigned)tg_nrows((n)->src[0]), 1, 1, \
                                         reduce_block((n)->src[0]->ne[0]), 0, args))

/* The group pick_fuse_len took from nodes[i]: argmax_sum, a block a row
 * with the block argmax takes. */
static tg_status encode_pick(tg_cuda_ctx *c, CUstream s, tg_tensor *const *nodes, int i) {
    const tg_tensor *am = nodes[i], *hi = nodes[i + 4], *hs = nodes[i + 5], *at = hi->src[1];
    tg_args_argmax_sum a = {.a = tg_cuda_desc(am->src[0]),
                            .ids = tg_cuda_dptr(am->data),
                            .sums = tg_cuda_dptr(nodes[i + 1]->data),
                            .feed = tg_cuda_dptr(nodes[i + 2]->data),
                            .hist_ids = tg_cuda_dptr(hi->data),
                            .hist_sums = tg_cuda_dptr(hs->data),
                            .at = tg_cuda_dptr(at->data),
                            .hist_ids_ld = (int64_t)hi->nb[1],
                            .hist_sums_ld = (int64_t)hs->nb[1],
                            .hist_rows = hi->ne[1],
                            .at_i64 = at->type == TG_I64};
    c->n_fused[TG_FUSED_PICK]++;
    return LAUNCH(c, s, "reduce.cu", "", argmax_sum, (unsigned)tg_nelements(am), 1, 1,
                  reduce_block(am->src[0]->ne[0]), 0, a);
}

/* F32 rows contiguous in dim 0 and 16-byte aligned everywhere a warp's
 * float4 loads land, short enough for the registers (softmax.cu's
 * TG_SM_WV: 4*32*12 floats). */
static bool rows16(const tg_tensor *t) {
    if (!t) return true;
    if (t->type != TG_F32 || t->nb[0] != 4 || ((uintptr_t)t->data & 15) != 0) return false;
    for (int k = 1; k < 4; k++)
        if (t->ne[k] > 1 && (t->nb[k] & 15) != 0) return false;
    return true;
}

static bool softmax_vec_ok(const tg_tensor *n) {
    const tg_tensor *a = n->src[0];
    return a->ne[0] % 4 == 0 && a->ne[0] / 4 <= 32 * 12 && rows16(n) && rows16(a) && rows16(n->src[1]);
}

/* conv_2d's three paths: 1x1 convs as products (cuda_matmul.c), one input
 * channel 3x3 (conv_2d_c1_3x3), the direct kernel for the rest. */
static bool conv_c1_ok(const tg_tensor *n) {
    const tg_tensor *k = n->src[0], *x = n->src[1];
    return k->ne[0] == 3 && k->ne[1] == 3 && k->ne[2] == 1 && tg_cuda_f32_words(k) && tg_cuda_f32_words(x) && tg_cuda_f32_words(n) &&
           (n->ne[2] + TG_CONV_C1_TILE - 1) / TG_CONV_C1_TILE <= 65535 && n->ne[3] <= 65535 &&
           (n->ne[0] * n->ne[1] + 255) / 256 <= INT32_MAX;
}

static tg_status encode_conv_c1(tg_cuda_ctx *c, CUstream s, const tg_tensor *n) {
    tg_args_conv_2d_c1_3x3 a = {.o = tg_cuda_desc(n),
                                .k = tg_cuda_desc(n->src[0]),
                                .x = tg_cuda_desc(n->src[1]),
                                .s0 = tg_param_i32(n, 0),
                                .s1 = tg_param_i32(n, 1),
                                .p0 = tg_param_i32(n, 2),
                                .p1 = tg_param_i32(n, 3)};
    return LAUNCH(c, s, "conv.cu", "", conv_2d_c1_3x3, (unsigned)((n->ne[0] * n->ne[1] + 255) / 256),
                  (unsigned)((n->ne[2] + TG_CONV_C1_TILE - 1) / TG_CONV_C1_TILE), (unsigned)n->ne[3], 256, 0, a);
}

/* The depthwise convs' fast paths: every tensor F32 and contiguous (and
 * 16-byte aligned for the float4 one), sizes within 32-bit indexing and
 * the grid's limits; the direct kernels take the rest. */
static bool conv_dw3_ok(const tg_tensor *n) {
    const tg_tensor *k = n->src[0], *x = n->src[1];
    return k->ne[0] == 3 && k->ne[1] == 3 && k->ne[2] == 1 && f32_contiguous(k) && f32_contiguous(x) &&
           f32_contiguous(n) && x->ne[0] * x->ne[1] < INT32_MAX && n->ne[0] * n->ne[1] < INT32_MAX - 256 &&
           n->ne[2] <= 65535 && n->ne[3] <= 65535 && k->ne[3] == n->ne[2];
}

static tg_status encode_conv_dw3(tg_cuda_ctx *c, CUstream s, const tg_tensor *n) {
    const tg_tensor *x = n->src[1];
    tg_args_conv_2d_dw_3x3 a = {.o = tg_cuda_dptr(n->data), .in = tg_cuda_dptr(x->data), .kr = tg_cuda_dptr(n->src[0]->data),
                                .w = (int)x->ne[0], .h = (int)x->ne[1], .ow = (int)n->ne[0], .oh = (int)n->ne[1],
                                .s0 = tg_param_i32(n, 0), .s1 = tg_param_i32(n, 1), .p0 = tg_param_i32(n, 2),
                                .p1 = tg_param_i32(n, 3)};
    if (tg_nelements(n) == 0) return NULL;
    return LAUNCH(c, s, "conv.cu", "", conv_2d_dw_3x3, (unsigned)((n->ne[0] * n->ne[1] + 255) / 256),
                  (unsigned)n->ne[2], (unsigned)n->ne[3], 256, 0, a);
}

static bool conv_dw1_c4_ok(const tg_tensor *n) {
    const tg_tensor *k = n->src[0], *x = n->src[1];
    int64_t batch = x->ne[2] * x->ne[3];
    return tg_param_i32(n, 0) == 1 && f32_contiguous(k) && f32_contiguous(x) && f32_contiguous(n) &&
           x->ne[0] % 4 == 0 && k->ne[1] == x->ne[0] && (((uintptr_t)x->data | (uintptr_t)n->data) & 15) == 0 &&
           x->ne[0] * x->ne[1] < INT32_MAX && n->ne[1] < INT32_MAX - TG_DW1_TT && k->ne[0] < 4096 &&
           batch <= 65535 && (n->ne[1] + TG_DW1_TT - 1) / TG_DW1_TT <= 65535;
}

static tg_status encode_conv_dw1_c4(tg_cuda_ctx *c, CUstream s, const tg_tensor *n) {
    const tg_tensor *x = n->src[1];
    tg_args_conv_1d_dw_c4 a = {.o = tg_cuda_dptr(n->data), .in = tg_cuda_dptr(x->data), .kr = tg_cuda_dptr(n->src[0]->data),
                               .c4 = (int)(x->ne[0] / 4), .t = (int)x->ne[1], .ot = (int)n->ne[1],
                               .k = (int)n->src[0]->ne[0], .p = tg_param_i32(n, 1)};
    if (tg_nelements(n) == 0) return NULL;
    return LAUNCH(c, s, "conv.cu", "", conv_1d_dw_c4, (unsigned)((a.c4 + 63) / 64),
                  (unsigned)((n->ne[1] + TG_DW1_TT - 1) / TG_DW1_TT), (unsigned)(x->ne[2] * x->ne[3]), 64, 0, a);
}

static tg_status encode_conv_2d(tg_cuda_ctx *c, CUstream s, const tg_tensor *n) {
    if (tg_nelements(n) == 0) return NULL;
    if (tg_cuda_conv_1x1_ok(c, n)) return tg_cuda_conv_1x1(c, s, n);
    if (conv_c1_ok(n)) return encode_conv_c1(c, s, n);
    tg_args_conv_2d a = {.o = tg_cuda_desc(n),
                         .kr = tg_cuda_desc(n->src[0]),
                         .in = tg_cuda_desc(n->src[1]),
                         .s0 = tg_param_i32(n, 0),
                         .s1 = tg_param_i32(n, 1),
                         .p0 = tg_param_i32(n, 2),
                         .p1 = tg_param_i32(n, 3),
                         .n = tg_nelements(n)};
    return LAUNCH_FLAT(c, s, "conv.cu", conv_2d, a);
}

/* cpy_rows4's case: the same shape and one 4-byte type on both sides, rows
 * contiguous in dim 0, row count and strides within 32-bit row indexing. */
static bool rows4_ok(const tg_tensor *a, const tg_tensor *n) {
    if (a->type != n->type || tg_type_size(a->type) != 4 || a->nb[0] != 4 || n->nb[0] != 4) return false;
    for (int k = 0; k < 4; k++)
        if (a->ne[k] != n->ne[k]) return false;
    return a->ne[0] >= 16 && a->ne[1] * a->ne[2] * a->ne[3] <= (int64_t)UINT32_MAX / 2;
}

static tg_status encode_cpy(tg_cuda_ctx *c, CUstream s, const tg_tensor *n) {
    const tg_tensor *a = n->src[0];
    int64_t ne = tg_nelements(a);
    if (ne == 0) return NULL;
    if (a->type == n->type && tg_is_contiguous(a) && tg_is_contiguous(n)) {
        c->last_kernel = "cuMemcpyDtoDAsync";
        CUresult r = c->dev->cu->cuMemcpyDtoDAsync((CUdeviceptr)(uintptr_t)n->data, (CUdeviceptr)(uintptr_t)a->data,
                                                   (size_t)ne * tg_type_size(a->type), s);
        return r == CUDA_SUCCESS ? NULL : tg_cuda_ctx_fail(c, r, "cpy");
    }
    if (tg_is_contiguous(a) && tg_is_contiguous(n)) return encode_cvt(c, s, tg_cuda_dptr(n->data), n->type, a, ne);
    if (rows4_ok(a, n)) {
        tg_args_cpy_rows4 r = {.d = tg_cuda_desc(n), .a = tg_cuda_desc(a), .n = ne};
        int64_t threads = ne / a->ne[0] * 32;
        return LAUNCH(c, s, "copy.cu", "", cpy_rows4, tg_cuda_grid(c, threads, 256), 1, 1, 256, 0, r);
    }
    tg_args_cpy g = {.d = tg_cuda_desc(n), .a = tg_cuda_desc(a), .n = ne};
    return LAUNCH_FLAT(c, s, "copy.cu", cpy, g);
}

int tg_cuda_stored_node(const tg_type *emit, tg_tensor *const *nodes, int i, int reach, const tg_tensor *src) {
    if (!emit) return -1;
    for (const tg_tensor *x = src; x; x = x->view_src)
        for (int j = i - 1; j >= 0 && j >= i - reach; j--)
            if (nodes[j] == x) {
                if (emit[j] != TG_F32) return j;
                if (x->op != TG_OP_VIEW) return -1;
                break;
            }
    return -1;
}

tg_type tg_cuda_stored_type(const tg_type *emit, tg_tensor *const *nodes, int i, const tg_tensor *src) {
    const int j = tg_cuda_stored_node(emit, nodes, i, TG_CUDA_STORED_REACH, src);
    return j < 0 ? TG_F32 : emit[j];
}

/* The type src (read by nodes[i]: a unary op, or the conv module group's
 * GLU) was stored in by its producer (plan_emit), and, where that product
 * group stored its sums without its bias (p->bias16), the bias it left to
 * its readers: the add's row operand, F32, a multiple of 4 values. */
static tg_status source_stored(const tg_cuda_ctx *c, tg_tensor *const *nodes, int i, const tg_tensor *src,
                               tg_type *out_type, const tg_tensor **out_bias) {
    const int j = tg_cuda_stored_node(c->emit, nodes, i, TG_CUDA_STORED_REACH, src);
    *out_type = j < 0 ? TG_F32 : c->emit[j];
    *out_bias = NULL;
    if (j < 1 || !c->bias16 || !c->bias16[j]) return NULL;
    /* the group's last node is its bias add (tg_cuda_fused_parts) */
    const tg_tensor *add = nodes[j], *prev = nodes[j - 1];
    const tg_tensor *bias = add->op != TG_OP_ADD ? NULL : add->src[0] == prev ? add->src[1] : add->src[0];
    if (!bias || bias->type != TG_F32 || tg_nelements(bias) % 4 != 0)
        return tg_status_new(TG_ERR_INTERNAL, "cuda: '%s': its source's bias not found", nodes[i]->name);
    *out_bias = bias;
    return NULL;
}

/* The store kind (TG_EMIT_*) the plan gave node k's result (plan_emit). */
static int emit_kind(const tg_cuda_ctx *c, int k) {
    const int t = c->emit ? c->emit[k] : TG_F32;
    return t == TG_BF16 ? TG_EMIT_BF16 : t == TG_F16 ? TG_EMIT_F16 : TG_EMIT_F32;
}

tg_status tg_cuda_op_encode(tg_cuda_ctx *c, CUstream s, tg_tensor *const *nodes, int i, int len) {
    const tg_tensor *n = nodes[i];
    if (len > 1 && n->op == TG_OP_GLU) return encode_conv_glu(c, s, nodes, i, emit_kind(c, i + len - 1));
    if (len > 1 && n->op == TG_OP_ADD) return encode_bias_mask(c, s, n, nodes[i + 1], nodes[i + len - 1]);
    if (len > 1 && n->op == TG_OP_CONV_2D) return encode_sub_front(c, s, nodes, i, len);
    if (len > 1 && n->op == TG_OP_GET_ROWS) return encode_embed_norm(c, s, nodes, i, len);
    if (len > 1 && n->op == TG_OP_ARGMAX) return encode_pick(c, s, nodes, i);
    if (len > 1 && nodes[i + len - 1]->op == TG_OP_SET_ROWS) {
        /* [the norm,] the product's group, views, and the set_rows of its
         * k and v into the cache: one mul_mat_vec_mma launch */
        int o = tg_cuda_kv_rows_source(nodes, i, len), p = i + (n->op == TG_OP_LAYER_NORM);
        if (o < p || nodes[p]->op != TG_OP_MUL_MAT)
            return tg_status_new(TG_ERR_INTERNAL, "cuda: a fused set_rows after '%s' without its product", n->name);
        tg_cuda_fused f = tg_cuda_fused_parts(nodes, p, o - p + 1);
        f.rows = nodes[i + len - 1];
        if (p == i && o > p && f.bias) c->n_fused[f.relu ? TG_FUSED_MM_BIAS_RELU : TG_FUSED_MM_BIAS]++;
        if (p > i) return tg_cuda_encode_product(c, s, nodes[p], &f, nodes[o], TG_F32, n);
        return tg_cuda_encode_product(c, s, nodes[p], &f, nodes[o],
                                      tg_cuda_stored_type(c->emit, nodes, i, nodes[p]->src[1]), NULL);
    }
    if (len == 2 && n->op == TG_OP_LAYER_NORM && nodes[i + 1]->op == TG_OP_LAYER_NORM)
        return encode_norm_pair(c, s, n, nodes[i + 1], emit_kind(c, i + 1));
    if (len > 1 && n->op == TG_OP_LAYER_NORM && nodes[i + len - 1]->op == TG_OP_ATTENTION) {
        /* the norm, the q product and its attention (CT_CUDA_ATTN_CROSS_Q) */
        c->n_fused[TG_FUSED_NORM_MATVEC]++;
        c->n_fused[TG_FUSED_ATTENTION]++;
        return tg_cuda_encode_attn_cross_q(c, s, nodes, i, len, c->emit ? c->emit[i + len - 1] : TG_F32);
    }
    if (len > 1 && n->op == TG_OP_LAYER_NORM) {
        /* the norm, then its product's group, in one matvec launch */
        tg_cuda_fused f = tg_cuda_fused_parts(nodes, i + 1, len - 1);
        return tg_cuda_encode_product(c, s, nodes[i + 1], &f, nodes[i + len - 1], TG_F32, n);
    }
    if (len > 1) {
        tg_cuda_fused f = tg_cuda_fused_parts(nodes, i, len);
        if (f.bias) c->n_fused[f.res ? TG_FUSED_MM_BIAS_RESIDUAL : f.relu ? TG_FUSED_MM_BIAS_RELU : TG_FUSED_MM_BIAS]++;
        if (nodes[i + 1]->op == TG_OP_SCALE) c->n_fused[TG_FUSED_MM_SCALE]++;
        /* the group's result stored BF16 for its readers (plan_emit) */
        if (c->emit && c->emit[i + len - 1] == TG_BF16) {
            f.d_type = TG_BF16;
            if (c->bias16 && c->bias16[i + len - 1]) f.bias = NULL; /* its unary readers add it */
            c->n_fused[TG_FUSED_EMIT]++;
            c->n_mm_out16++;
        }
        return tg_cuda_encode_product(c, s, n, &f, nodes[i + len - 1], tg_cuda_stored_type(c->emit, nodes, i, n->src[1]),
                                      NULL);
    }
    const int out16 = emit_kind(c, i);
    if (out16 != TG_EMIT_F32) c->n_fused[TG_FUSED_EMIT]++;
    tg_t dd = tg_cuda_desc(n), da = tg_cuda_desc(n->src[0]), db = tg_cuda_desc(n->src[1]);
    tg_type src_stored = TG_F32;
    const tg_tensor *src_bias = NULL;
    if (is_unary(n->op)) {
        tg_status st = source_stored(c, nodes, i, n->src[0], &src_stored, &src_bias);
        if (st) return st;
    }
    switch (n->op) {
    case TG_OP_NONE:
    case TG_OP_VIEW:
        return NULL;
    case TG_OP_ADD: return encode_binary(c, s, n, TG_EW_ADD, out16);
    case TG_OP_SUB: return encode_binary(c, s, n, TG_EW_SUB, out16);
    case TG_OP_MUL: return encode_binary(c, s, n, TG_EW_MUL, out16);
    case TG_OP_DIV: return encode_binary(c, s, n, TG_EW_DIV, out16);
    case TG_OP_SCALE: return encode_unary(c, s, n, TG_EW_SCALE, tg_param_f32(n, 0), out16, src_stored, src_bias);
    case TG_OP_RELU: return encode_unary(c, s, n, TG_EW_RELU, 0.0f, out16, src_stored, src_bias);
    case TG_OP_SILU: return encode_unary(c, s, n, TG_EW_SILU, 0.0f, out16, src_stored, src_bias);
    case TG_OP_SIGMOID: return encode_unary(c, s, n, TG_EW_SIGMOID, 0.0f, out16, src_stored, src_bias);
    case TG_OP_LOG: return encode_unary(c, s, n, TG_EW_LOG, 0.0f, out16, src_stored, src_bias);
    case TG_OP_SQRT: return encode_unary(c, s, n, TG_EW_SQRT, 0.0f, out16, src_stored, src_bias);
    case TG_OP_MUL_MAT: {
        tg_cuda_fused plain = tg_cuda_fused_parts(nodes, i, 1);
        /* BF16 for attentions' masks, unary ops or products (plan_emit) */
        if (c->emit && c->emit[i] == TG_BF16) {
            plain.d_type = TG_BF16;
            c->n_mm_out16++;
        }
        return tg_cuda_encode_product(c, s, n, &plain, n, tg_cuda_stored_type(c->emit, nodes, i, n->src[1]), NULL);
    }
    case TG_OP_LAYER_NORM:
        if (n->src[1] || n->src[2]) c->n_fused[TG_FUSED_NORM_AFFINE]++;
        return encode_layer_norm(c, s, n, out16);
    case TG_OP_SOFT_MAX: {
        tg_args_soft_max a = {.d = dd,
                              .a = da,
                              .mask = db,
                              .rows = tg_nrows(n->src[0]),
                              .has_mask = n->src[1] != NULL,
                              .scale = tg_param_f32(n, 0)};
        if (a.has_mask || a.scale != 1.0f) c->n_fused[TG_FUSED_SOFTMAX]++;
        if (a.rows > 0 && softmax_vec_ok(n) && (a.rows + 7) / 8 < (1ll << 31))
            return LAUNCH(c, s, "softmax.cu", "", soft_max_w4, (unsigned)((a.rows + 7) / 8), 1, 1, 256, 0, a);
        return LAUNCH_ROWS(c, s, "softmax.cu", soft_max, n, a);
    }
    case TG_OP_ATTENTION: {
        c->n_fused[TG_FUSED_ATTENTION]++;
        /* a mask whose producer stores BF16 (the plan marked this node,
         * plan_emit): the producer is the root of the mask's view chain */
        const tg_tensor *root = n->src[3];
        while (root && root->view_src) root = root->view_src;
        return tg_cuda_encode_attention(c, s, n, c->mask16 && c->mask16[i] ? TG_BF16 : TG_F32, root,
                                        c->emit ? c->emit[i] : TG_F32);
    }
    case TG_OP_GLU: {
        c->n_fused[TG_FUSED_GLU]++;
        tg_args_glu a = {.d = dd, .a = da, .n = tg_nelements(n)};
        return LAUNCH_FLAT(c, s, "reduce.cu", glu, a);
    }
    case TG_OP_ARGMAX: {
        tg_args_argmax a = {.o = dd, .a = da};
        return LAUNCH_REDUCE(c, s, argmax, n, a);
    }
    case TG_OP_SUM_ROWS:
    case TG_OP_MEAN: {
        tg_args_sum_rows a = {.o = dd, .a = da, .div = n->op == TG_OP_MEAN ? (float)n->src[0]->ne[0] : 1.0f};
        return LAUNCH_REDUCE(c, s, sum_rows, n, a);
    }
    case TG_OP_GET_ROWS: {
        tg_args_get_rows a = {.d = dd, .a = da, .ids = db, .n = tg_nelements(n)};
        return LAUNCH_FLAT(c, s, "rows.cu", get_rows, a);
    }
    case TG_OP_SET_ROWS: {
        tg_args_set_rows a = {.d = dd, .a = da, .ids = db, .n = tg_nelements(n->src[0])};
        return LAUNCH_FLAT(c, s, "rows.cu", set_rows, a);
    }
    case TG_OP_CPY:
        return encode_cpy(c, s, n);
    case TG_OP_CONCAT: {
        tg_args_concat a = {.o = dd, .a = da, .b = db, .dim = tg_param_i32(n, 0), .n = tg_nelements(n)};
        return LAUNCH_FLAT(c, s, "copy.cu", concat, a);
    }
    case TG_OP_PAD: {
        tg_args_pad a = {.o = dd, .a = da, .n = tg_nelements(n)};
        for (int k = 0; k < 4; k++) a.lo[k] = tg_param_i32(n, k);
        return LAUNCH_FLAT(c, s, "copy.cu", pad, a);
    }
    case TG_OP_CONV_2D: return encode_conv_2d(c, s, n);
    case TG_OP_CONV_2D_DW: {
        if (conv_dw3_ok(n)) return encode_conv_dw3(c, s, n);
        tg_args_conv_2d a = {.o = dd,
                             .kr = da,
                             .in = db,
                             .s0 = tg_param_i32(n, 0),
                             .s1 = tg_param_i32(n, 1),
                             .p0 = tg_param_i32(n, 2),
                             .p1 = tg_param_i32(n, 3),
                             .n = tg_nelements(n)};
        return LAUNCH_FLAT(c, s, "conv.cu", conv_2d_dw, a);
    }
    case TG_OP_CONV_1D_DW: {
        if (conv_dw1_c4_ok(n)) return encode_conv_dw1_c4(c, s, n);
        tg_args_conv_1d_dw a = {
            .o = dd, .kr = da, .in = db, .s = tg_param_i32(n, 0), .p = tg_param_i32(n, 1), .n = tg_nelements(n)};
        return LAUNCH_FLAT(c, s, "conv.cu", conv_1d_dw, a);
    }
    default:
        return tg_status_new(TG_ERR_UNSUPPORTED, "cuda: op %s (node '%s') is not supported", tg_op_name(n->op),
                             n->name);
    }
}
