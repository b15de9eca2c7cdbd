/*
 * cuda_matvec.c: matrix products of few columns (a decoder step) on
 * matvec.cu, and the layer-norm fusion into them.
 *
 * A product of 1 to 32 columns at default precision runs on
 * mul_mat_vec_mma (17-32 as tiles of 16; to 64 on mul_mat_vec_mma_wide
 * where CT_CUDA_MATVEC_MMA_MAX and CT_CUDA_MATVEC_TILE16 or _TILE_MAX
 * allow, or on mul_mat_vec_mma_cl's clusters where CT_CUDA_MATVEC_CL
 * does), the tensor-core kernels; F32-precision requests of 1-2 columns on
 * mul_mat_vec; everything else, and any layout the kernels do not take, on
 * cuBLASLt (cuda_matmul.c). The bias, relu, alpha and residual of the
 * product's fused group (tg_cuda_fuse_len) go into the same launch, and so
 * may the layer norm in front of it.
 *
 * Not here: the fusion's pattern matching (cuda_ops.c), cuBLASLt
 * (cuda_matmul.c), device code (kernels/matvec.cu).
 */
#include "cuda_internal.h"
#include "hazard.h"
#include "op_params.h"

/* The byte distance between consecutive columns of t (dims 1-3 flattened,
 * dim 1 fastest) when every column c lies at c times it: the stride of the
 * first dim of extent > 1, each later such dim spaced by the product of the
 * extents before it (a dim of extent 1 may have any stride). 0 for a
 * single column; false when the columns are not evenly spaced. */
static bool column_stride(const tg_tensor *t, int64_t *out_ld) {
    int64_t ld = 0, span = 1;
    for (int d = 1; d < 4; d++) {
        if (t->ne[d] == 1) continue;
        if (ld == 0) ld = (int64_t)t->nb[d];
        else if ((int64_t)t->nb[d] != ld * span) return false;
        span *= t->ne[d];
    }
    *out_ld = ld;
    return true;
}

/* 1 to c->matvec_mma_max columns at default precision on a GPU with BF16
 * mma: mul_mat_vec_mma (up to TG_MVM_MAXM columns) or, where the switch
 * allows more, mul_mat_vec_mma_wide (TG_MVM_WIDE a block, more as blocks
 * of that many), which round x to BF16 as cuBLASLt's products do
 * (F32-precision requests keep mul_mat_vec's F32 x for 1-2 columns). On the
 * H200 (2026-12-04, the full-size decoder step; bench/README.md) it took the
 * step at batch 8 from 0.79 to 0.60 ms, where cuBLASLt ran each product on
 * 16-64 blocks in ~6 us, and at batch 1 from 0.58 to 0.54 ms against
 * mul_mat_vec. Above 16 columns cuBLASLt stays faster: tiles of 16, a
 * block each, took the step at batch 32 / 64 to 1.244 / 1.917 ms against
 * 1.097 / 1.350 (an H100, 2026-12-05), and the wide kernel, which reads the
 * weights once for 64 columns and takes the norm inside, to 2.00 against
 * 1.37 at batch 64 (an H100, sixth session): each block reads all 64 of
 * x's columns (256 KB at K = 1024) against 32 KB of weights, so L2, not
 * the weights, sets its time. Tiles of 16 with the layer norms launched
 * apart (a norm inside is normed again by every block of rows) beat
 * cuBLASLt at 17-32 columns only (an H100, twenty-fifth session: the step
 * at batch 24 / 32 -3.6% / -8.4%, at 40 / 48 / 56 / 64 +8.1% / +3.7% /
 * +6.9% / +7.6%), so that is the default (TG_CUDA_MATVEC_MMA_MAX,
 * CT_CUDA_MATVEC_TILE16=1, CT_CUDA_MATVEC_LN_MAX=16). CT_CUDA_MATVEC_MMA=0
 * gives the split of before (1-2 columns on mul_mat_vec, more on
 * cuBLASLt), CT_CUDA_MATVEC_MMA_MIN=3 leaves 1-2 columns on mul_mat_vec,
 * CT_CUDA_MATVEC_MMA_MAX the most columns it takes (16: none past one
 * tile), more with CT_CUDA_MATVEC_TILE16=0 on the wide kernel (for
 * measuring). */
static bool matvec_cl(const tg_cuda_ctx *c, const tg_tensor *n);
static bool matvec_mma(const tg_cuda_ctx *c, const tg_tensor *n) {
    const tg_tensor *x = n->src[1];
    int64_t M = x->ne[1] * x->ne[2] * x->ne[3];
    return c->use_matvec_mma && c->dev->props.tc_level >= 2 && M >= c->matvec_mma_min &&
           (M <= c->matvec_mma_max || matvec_cl(c, n)) && tg_node_prec(n) != TG_PREC_F32 && n->src[0]->ne[0] % 32 == 0;
}

bool tg_cuda_matvec_mma_takes(const tg_cuda_ctx *c, const tg_tensor *mm) { return matvec_mma(c, mm); }

/* mul_mat_vec_mma_cl's dynamic shared memory for K x M
 * (kernels/matvec.cu): x's slice of K / TG_MVC_S as BF16 rows of that +
 * 8, then the block's partial sums (a float4 a lane for each 8 rows of
 * each 16 columns). */
static int64_t mvc_smem(int64_t K, int64_t M) {
    return ((M * (K / TG_MVC_S + 8) + 7) & ~(int64_t)7) * 2 + (TG_MVC_ROWS / 16) * 4 * 2 * 32 * 16;
}
/* ... and its static: the norm's two sums a column */
#define MVC_STATIC_SMEM (2 * TG_MVM_WIDE * 4)
/* The mma kernels' static shared memory (mvm_norm_column_block's two sums
 * a warp), beside the dynamic, under the device's opt-in most */
#define MVM_STATIC_SMEM (2 * 32 * 4)

/* With CT_CUDA_MATVEC_CL=1, CT_CUDA_MATVEC_CL_MIN (default TG_MVM_MAXM +
 * 1) to TG_MVM_WIDE columns (a decoder step at batch 17-64; from 1 where
 * the minimum is lowered, in place of mul_mat_vec_mma) on
 * mul_mat_vec_mma_cl, clusters of TG_MVC_S blocks that split K (K a
 * multiple of 64 times that, at most 512 times: a warp's half of a
 * block's slice is 1 to 8 steps of 32), where mul_mat_vec_mma's tiles or
 * the wide kernel do not take them (CT_CUDA_MATVEC_MMA_MAX below the
 * columns: 33-64 by default since the tiles take 17-32) and the GPU
 * launches clusters (sm_90). Off by default: on an H100 (fourteenth session, against its
 * switch, interleaved) the step at batch 32 / 64 took 1.135 / 1.620 ms
 * against 0.886 / 1.145 with cuBLASLt and the norms' own launches, and at
 * 1 / 8 (the minimum at 1) 0.671 / 0.751 against 0.404 / 0.501 with
 * mul_mat_vec_mma. Stamped at 64, the products without the norm were
 * near cuBLASLt's (7.3 us for 2 MB); those with it 13-39 us, rising with
 * their clusters: a block's two cluster barriers and remote reads for the
 * norm's statistics hold it ~6 us, and the SMs hold two blocks at once. */
static bool matvec_cl(const tg_cuda_ctx *c, const tg_tensor *n) {
    const tg_tensor *x = n->src[1];
    const int64_t M = x->ne[1] * x->ne[2] * x->ne[3], K = n->src[0]->ne[0];
    return c->matvec_cl && c->dev->props.clusters && M >= c->matvec_cl_min && M <= TG_MVM_WIDE &&
           (M <= TG_MVM_MAXM || M > c->matvec_mma_max) && K % (64 * TG_MVC_S) == 0 && K <= 512 * TG_MVC_S &&
           mvc_smem(K, M) + MVC_STATIC_SMEM <= c->dev->props.smem_per_block_optin;
}

/* A product with few columns against BF16 weights (matvec.cu): the
 * decoder's step, on mul_mat_vec_mma (above) or, for F32-precision
 * requests (or with that kernel off), mul_mat_vec with F32 x. The latter
 * takes up to TG_MV_MAXM columns, but on the H200 (2026-12-02, a full-size
 * decoder step) it beat cuBLASLt only for one (6.6 against ~11 us a product
 * at batch 1); at 8 columns it was slower (17 us, the step 1.70 ms against
 * 1.20 with cuBLASLt), so it takes at most 2 (CT_CUDA_MATVEC_COLUMNS moves
 * the limit, for measuring). x is F32 as the node says, or BF16 when its
 * producer stored it so (stored); *ldx and *ldo get the column strides in
 * bytes. */
static bool matvec_ok(const tg_cuda_ctx *c, const tg_tensor *n, const tg_tensor *out, tg_type stored,
                      int64_t *ldx, int64_t *ldo) {
    const tg_tensor *w = n->src[0], *x = n->src[1];
    int64_t M = x->ne[1] * x->ne[2] * x->ne[3];
    if (!c->use_matvec || (M > c->matvec_columns && !matvec_mma(c, n)) || w->type != TG_BF16 || w->ne[2] != 1 || w->ne[3] != 1 ||
        w->nb[0] != 2 || w->nb[1] % 16 != 0 || ((uintptr_t)w->data & 15) != 0 || w->ne[0] % 8 != 0 ||
        w->ne[1] < 1 || (w->ne[1] + 7) / 8 > INT32_MAX || M < 1)
        return false;
    if (out->type != TG_F32 || out->nb[0] != 4 || !column_stride(out, ldo) || ((uintptr_t)out->data & 3) != 0)
        return false;
    if (stored == TG_BF16) {
        *ldx = 2 * w->ne[0];
        return ((uintptr_t)x->data & 15) == 0;
    }
    return stored == TG_F32 && x->type == TG_F32 && x->nb[0] == 4 && column_stride(x, ldx) && *ldx % 16 == 0 &&
           ((uintptr_t)x->data & 15) == 0;
}

bool tg_cuda_product_on_matvec(const tg_cuda_ctx *c, const tg_tensor *n, const tg_tensor *out) {
    int64_t ldx, ldo;
    return matvec_ok(c, n, out, TG_F32, &ldx, &ldo) || matvec_ok(c, n, out, TG_BF16, &ldx, &ldo);
}

/* The columns a block of the mma kernel for M columns holds. With
 * CT_CUDA_MATVEC_TILE16=1 (the default), a product of up to
 * CT_CUDA_MATVEC_TILE_MAX columns (default: any) takes tiles of
 * TG_MVM_MAXM columns (17-32 by default, where CT_CUDA_MATVEC_MMA_MAX lets
 * them in; 2-4 tiles a block of rows, next to each other in the grid, the
 * weights read from L2 after the first), not mul_mat_vec_mma_wide's one
 * block of 64. With CT_CUDA_MATVEC_MMA_MAX=64 and
 * CT_CUDA_MATVEC_TILE_MAX=32, 33-64 columns go to the wide kernel, the
 * norms apart (a lever, written in the twenty-fifth session: the wide
 * kernel lost to cuBLASLt with the norm inside, sixth session, and was
 * never measured with it apart). */
static int64_t mvm_block_columns(const tg_cuda_ctx *c, int64_t M) {
    return M <= TG_MVM_MAXM || (c->matvec_tile16 && M <= c->matvec_tile_max) ? TG_MVM_MAXM : TG_MVM_WIDE;
}

/* The mma kernels' warps: K split over 4 to 16 (32 x 4 k each at K =
 * 1024). */
static int64_t mvm_warps(int64_t K) { return K / 128 < 4 ? 4 : K / 128 > 16 ? 16 : K / 128; }

/* The mma kernels' shared memory for K x M (kernels/matvec.cu): with the
 * norm inside the block's normed columns (rows of K + 8 BF16, 16-byte
 * aligned), kept for further rows, then each warp's partial sums (4 floats
 * a lane for every 8 rows of every 16 columns). */
static int64_t mvm_smem(const tg_cuda_ctx *c, int64_t K, int64_t M, bool ln, int64_t rows_a_block) {
    const int64_t cols = mvm_block_columns(c, M), tile = M < cols ? M : cols;
    const int64_t red = mvm_warps(K) * (cols / 16) * (rows_a_block / 8) * 32 * 4 * 4;
    const int64_t xs = ln ? ((tile * (K + 8) + 7) & ~(int64_t)7) * 2 : 0;
    return xs + red;
}

/* A layer norm whose only reader is the product after it, which runs on
 * matvec.cu: the norm goes into that launch (its x in shared memory). */
bool tg_cuda_ln_matvec_ok(const tg_cuda_ctx *c, const tg_tensor *ln, const tg_tensor *mm, const tg_tensor *out) {
    const tg_tensor *x = ln->src[0];
    int64_t ldx = 0, ldo = 0, ldx_in = 0;
    if (ln->op != TG_OP_LAYER_NORM || mm->op != TG_OP_MUL_MAT || mm->src[1] != ln || mm->src[0] == ln ||
        (ln->flags & TG_FLAG_OUTPUT) || ln->type != TG_F32 || !tg_same_shape(ln, x))
        return false;
    if (!matvec_ok(c, mm, out, TG_F32, &ldx, &ldo)) return false;
    /* x: F32 columns at an even spacing (16-byte, as the plain path's); the
     * normed columns (F32 for mul_mat_vec with its static 32-float
     * reduction buffer, BF16 rows of K + 8 for the mma kernels) fit a
     * block's shared memory: 48 KB for mul_mat_vec, the device's opt-in
     * most for the mma kernels (launch() raises the limit past 48 KB; 64
     * columns of K = 1024 take 129 KB) */
    int64_t K = x->ne[0], M = tg_nrows(x);
    if (M > c->matvec_ln_max) return false;
    const bool mma = matvec_mma(c, mm), cl = mma && matvec_cl(c, mm);
    /* the cluster kernel norms slices of at most 128 (four threads a
     * column, a quarter each in registers); a larger K keeps its norm
     * apart (with CT_CUDA_MATVEC_CL_MIN lowered, also where
     * mul_mat_vec_mma would have taken it) */
    if (cl && K / TG_MVC_S > 128) return false;
    int64_t smem = !mma ? K * M * 4 + 32 * 4 : cl ? mvc_smem(K, M) : mvm_smem(c, K, M, true, TG_MVM_ROWS);
    int64_t smem_max = mma && c->dev->props.smem_per_block_optin > 48 * 1024 ? c->dev->props.smem_per_block_optin
                                                                           : 48 * 1024;
    if (x->type != TG_F32 || x->nb[0] != 4 || !column_stride(x, &ldx_in) || ldx_in % 16 != 0 ||
        ((uintptr_t)x->data & 15) != 0 || smem > smem_max || K > INT32_MAX)
        return false;
    for (int k = 1; k < 3; k++) {
        const tg_tensor *v = ln->src[k];
        if (v && (v->type != TG_F32 || !tg_is_contiguous(v) || tg_nelements(v) != K || !v->data)) return false;
    }
    return true;
}

/* t is (a view of) a weight: no kernel writes it. */
bool tg_cuda_is_weight(const tg_tensor *t) {
    while (t->view_src) t = t->view_src;
    return (t->flags & TG_FLAG_WEIGHT) != 0;
}

/* What mv_kv_store (matvec.cu) needs for the set_rows r of rows of out:
 * false when r is not such a write. src = r's rows, a view [hd, 1, G,
 * B] of out (heads side by side in out's columns, from row n0 on), ids
 * [1, G, B] I32, r a cache view [hd, T, G, B] of F32, F16 or BF16. */
static bool kv_rows_args(const tg_tensor *r, const tg_tensor *out, int64_t ldo, tg_args_mul_mat_vec *a) {
    const tg_tensor *src = r->src[0], *ids = r->src[1];
    if (r->op != TG_OP_SET_ROWS || !src || !ids || src->view_src != out || !src->data || !out->data || !r->data ||
        !ids->data)
        return false;
    const int64_t hd = src->ne[0], G = src->ne[2], B = src->ne[3];
    size_t es = r->type == TG_F32 ? 4 : 2;
    intptr_t off = (const char *)src->data - (const char *)out->data;
    if (src->type != TG_F32 || src->nb[0] != 4 || src->ne[1] != 1 || (int64_t)src->nb[2] != 4 * hd ||
        (B > 1 && (int64_t)src->nb[3] != ldo) || off < 0 || off % 4 != 0 || off / 4 + G * hd > out->ne[0] ||
        tg_nrows(out) != B || hd > INT32_MAX || G > INT32_MAX)
        return false;
    if ((r->type != TG_F32 && r->type != TG_BF16 && r->type != TG_F16) || r->nb[0] != es || r->ne[0] != hd ||
        r->ne[2] != G || r->ne[3] != B || r->ne[1] > INT32_MAX || ids->type != TG_I32 || ids->ne[0] != 1 ||
        ids->ne[1] != G || ids->ne[2] != B)
        return false;
    if (a) {
        a->kv = tg_cuda_dptr(r->data);
        a->kv_ids = tg_cuda_dptr(ids->data);
        a->kv_nb1 = (int64_t)r->nb[1];
        a->kv_nb2 = (int64_t)r->nb[2];
        a->kv_nb3 = (int64_t)r->nb[3];
        a->ids_nb1 = (int64_t)ids->nb[1];
        a->ids_nb2 = (int64_t)ids->nb[2];
        a->kv_n0 = off / 4;
        a->kv_hd = (int32_t)hd;
        a->kv_heads = (int32_t)G;
        a->kv_t = (int32_t)r->ne[1];
        a->kv_type = (int32_t)r->type;
    }
    return true;
}

int tg_cuda_kv_rows_len(const tg_cuda_ctx *c, tg_tensor *const *nodes, int n, int p, int end, bool ln) {
    if (!c->use_kv_rows || end >= n || end < 1) return 0;
    const tg_tensor *mm = nodes[p], *out = nodes[end - 1];
    int k = end;
    while (k < n && k < end + 2 && tg_op_is_view(nodes[k]->op)) k++;
    if (k >= n || nodes[k]->op != TG_OP_SET_ROWS || mm->op != TG_OP_MUL_MAT || !matvec_mma(c, mm)) return 0;
    const tg_tensor *r = nodes[k];
    int64_t ldx = 0, ldo = 0, ld2 = 0;
    /* the launch is mul_mat_vec_mma whatever x's producer stores (the emit
     * fusion is planned later), and the cache lies apart from everything
     * it reads and from out */
    if (!matvec_ok(c, mm, out, TG_F32, &ldx, &ldo) || !matvec_ok(c, mm, out, TG_BF16, &ldx, &ld2) ||
        !kv_rows_args(r, out, ldo, NULL))
        return 0;
    const tg_tensor *x = ln ? nodes[p - 1]->src[0] : mm->src[1];
    if (tg_hazard_overlap(r, x) || tg_hazard_overlap(r, mm->src[0]) || tg_hazard_overlap(r, out) ||
        tg_hazard_overlap(r, r->src[1]))
        return 0;
    for (int j = p + 1; j < end; j++)
        for (int q = 0; q < TG_MAX_SRC; q++)
            if (nodes[j]->src[q] && tg_hazard_overlap(r, nodes[j]->src[q])) return 0;
    if (ln)
        for (int q = 1; q < 3; q++)
            if (nodes[p - 1]->src[q] && tg_hazard_overlap(r, nodes[p - 1]->src[q])) return 0;
    return k + 1 - end;
}

void tg_cuda_record_launch(tg_cuda_ctx *c, tg_tensor *const *nodes, const uint8_t *writes, int i, int len) {
    /* cuBLASLt launches its own kernels, whose waits we do not know: what
     * comes after one is unknown */
    if (c->last_kernel && !strncmp(c->last_kernel, "cublasLt", 8)) {
        c->prev_n = -1;
        return;
    }
    if (c->last_kernel) c->prev_n = 0;
    for (int k = i; k < i + len && c->prev_n >= 0; k++) {
        if (k != i + len - 1 && !(writes && writes[k])) continue;
        if (c->prev_n == TG_HAZARD_GROUP_MAX) c->prev_n = -1;
        else c->prev_w[c->prev_n++] = nodes[k];
    }
}

bool tg_cuda_written_before(const tg_cuda_ctx *c, const tg_tensor *t) {
    if (c->prev_n < 0) return false;
    for (int k = 0; k < c->prev_n; k++)
        if (tg_hazard_overlap(t, c->prev_w[k])) return false;
    return true;
}

/* The product n (its group's parts f) into out; ln, when not NULL, the
 * layer norm producing n's x, done inside the matvec launch
 * (tg_cuda_fuse_len checked tg_cuda_ln_matvec_ok); f->rows, when not
 * NULL, the set_rows after the group, done by the same launch
 * (tg_cuda_kv_rows_len checked it). */
tg_status tg_cuda_encode_product(tg_cuda_ctx *c, CUstream s, const tg_tensor *n, const tg_cuda_fused *f,
                                const tg_tensor *out, tg_type stored, const tg_tensor *ln) {
    int64_t ldx = 0, ldo = 0, ldr = 0;
    const tg_tensor *bias = f->bias, *res = f->res;
    if (f->d_type != TG_F32 || !matvec_ok(c, n, out, stored, &ldx, &ldo) || (res && !column_stride(res, &ldr))) {
        if (ln) return tg_status_new(TG_ERR_INTERNAL, "cuda: layer norm '%s' fused into a product matvec.cu "
                                     "does not take", ln->name);
        if (f->rows) return tg_status_new(TG_ERR_INTERNAL, "cuda: set_rows '%s' fused into a product matvec.cu "
                                          "does not take", f->rows->name);
        return tg_cuda_encode_mul_mat(c, s, n, f, out, stored);
    }
    const tg_tensor *w = n->src[0], *x = ln ? ln->src[0] : n->src[1];
    int64_t M = x->ne[1] * x->ne[2] * x->ne[3];
    if (ln && !column_stride(x, &ldx))
        return tg_status_new(TG_ERR_INTERNAL, "cuda: layer norm '%s': input columns not evenly spaced", ln->name);
    tg_args_mul_mat_vec a = {.w = tg_cuda_dptr(w->data), .x = tg_cuda_dptr(x->data), .out = tg_cuda_dptr(out->data),
                             .bias = bias ? tg_cuda_dptr(bias->data) : 0, .res = res ? tg_cuda_dptr(res->data) : 0,
                             .n = w->ne[1], .k = w->ne[0], .lda = (int64_t)w->nb[1], .ldx = ldx, .ldo = ldo,
                             .ldr = ldr, .alpha = f->alpha, .m = (int32_t)M, .x_bf16 = !ln && stored == TG_BF16,
                             .relu = f->relu, .w_early = tg_cuda_is_weight(w)};
    const bool mma = matvec_mma(c, n), cl = mma && matvec_cl(c, n);
    if (f->rows) {
        if (!mma || !kv_rows_args(f->rows, out, ldo, &a))
            return tg_status_new(TG_ERR_INTERNAL, "cuda: set_rows '%s' fused into a product mul_mat_vec_mma "
                                 "does not take", f->rows->name);
        c->n_fused[TG_FUSED_KV_ROWS]++;
    }
    /* the mma kernels: TG_MVM_ROWS rows and up to TG_MVM_MAXM (or
     * TG_MVM_WIDE) columns a block (a block for every tile of columns;
     * with CT_CUDA_MATVEC_LOOP=1 at most one an SM, looping over rows), K
     * split over mvm_warps warps */
    const int64_t cols = mvm_block_columns(c, M), warps = mvm_warps(w->ne[0]), sms = c->dev->props.sm_count;
    /* with CT_CUDA_MATVEC_R8=1, blocks of 8 rows (mul_mat_vec_mma_r8)
     * where blocks of 16 would be fewer than the SMs and those of 8 no
     * more (a step's 1024-row products on 132 SMs: 128 blocks, not 64),
     * one tile of columns, no rows loop. Off by default: on an H100
     * (tenth session, against blocks of 16, interleaved) the step took
     * 2.2% longer at batch 1 and 2.6% at 8. Only for the feed-forward's
     * down product (K = 4096, whose 16-row blocks each read 128 KB after
     * their wait, the up product's blocks holding every SM's registers
     * until they end) it was no faster either (sixteenth session: the step
     * +1.5% at batch 1, +0.0% at 8, +0.4% at 64) */
    const int64_t r8_blocks = (w->ne[1] + TG_MVM_ROWS8 - 1) / TG_MVM_ROWS8;
    /* mul_mat_vec_mma_st(16) (CT_CUDA_MATVEC_STAGED, the most KB of shared
     * memory a block may take; 0, the default: off): blocks of 8 rows, no
     * more blocks than the SMs, each block's weight rows copied into its
     * shared memory before the wait, a block at most half an SM's
     * registers (kernels/matvec.cu), so that a decoder step's next kernel
     * is resident while this one runs and its weights arrive then. For the
     * weights of a product of 1-16 columns whose rows fit (not the logits:
     * 270 KB a block at K = 1024). Slower on an H100 (seventeenth session,
     * against off, five rounds): the step at batch 1 0.4137 against 0.3705
     * ms, +8-10% at 4 and 8, and +10% at 1 with every step kernel asking
     * for the most shared memory (so that no SM waits to change its
     * split). Stamped, the down product gained (7.5 -> 5.5 us: resident
     * 4.6 us early, not 0.6) and the q/k/v and up products lost (4.3 ->
     * 7.5, 4.5 -> 9.2 us): their blocks, 50-68 KB of rows each, arrived
     * 0.7-2.5 us before their turn, and a block computes nothing until all
     * its rows are in, where mul_mat_vec_mma's rounds overlap. */
    const int64_t K = w->ne[0], st_grid = r8_blocks > sms ? sms : r8_blocks;
    const int64_t st_base = (mvm_smem(c, K, M, ln != NULL, TG_MVM_ROWS8) + 127) & ~(int64_t)127;
    const int64_t st_smem =
        st_grid > 0 ? st_base + (r8_blocks + st_grid - 1) / st_grid * TG_MVM_ROWS8 * (2 * K + TG_MVS_PAD) : 0;
    /* r8 and staged: one tile of columns (written for 1-16; not the tiles
     * of 17-32 columns the default now takes) */
    const bool staged = mma && !cl && c->matvec_staged > 0 && M <= TG_MVM_MAXM && sms > 0 && a.w_early &&
                        st_smem <= (int64_t)c->matvec_staged * 1024 &&
                        st_smem + MVM_STATIC_SMEM <= c->dev->props.smem_per_block_optin;
    const bool r8 = !staged && mma && c->matvec_r8 && M <= TG_MVM_MAXM && sms > 0 && r8_blocks <= sms &&
                    (w->ne[1] + TG_MVM_ROWS - 1) / TG_MVM_ROWS < sms;
    const int64_t rows_a_block = staged || r8 ? TG_MVM_ROWS8 : TG_MVM_ROWS;
    unsigned smem = staged ? (unsigned)st_smem
                    : mma  ? (unsigned)mvm_smem(c, w->ne[0], M, ln != NULL, rows_a_block)
                    : ln   ? (unsigned)(w->ne[0] * M * 4)
                           : 0;
    if (ln) {
        a.ln = 1;
        a.ln_w = ln->src[1] ? tg_cuda_dptr(ln->src[1]->data) : 0;
        a.ln_b = ln->src[2] ? tg_cuda_dptr(ln->src[2]->data) : 0;
        a.ln_eps = tg_param_f32(ln, 0);
        c->n_fused[TG_FUSED_NORM_MATVEC]++;
        /* one read of the columns: on an H100 (seventh session, two calls,
         * interleaved) a step at batch 8 1.6-1.8% faster with it, at batch
         * 1 1.7-2.5% slower, so by default from two columns on */
        if (c->matvec_norm1 == 1 || (c->matvec_norm1 == 2 && M >= 2)) a.opt |= TG_MV_NORM1;
        /* one column normed by the whole block, a float4 a thread (the mma
         * kernels' blocks have K / 128 warps, 4 to 16) */
        if (mma && c->matvec_norm_block && M == 1 && w->ne[0] % 128 == 0 && w->ne[0] / 4 <= 32 * warps) {
            a.opt |= TG_MV_NORM_BLOCK;
            c->n_matvec_norm_block++;
        }
    }
    /* the bias and the norm's parameters asked into L2 before the wait
     * for the previous kernel, where every one is a weight */
    if (c->matvec_prefetch && (!bias || tg_cuda_is_weight(bias)) &&
        (!ln || ((!ln->src[1] || tg_cuda_is_weight(ln->src[1])) && (!ln->src[2] || tg_cuda_is_weight(ln->src[2])))))
        a.opt |= TG_MV_PREFETCH;
    /* the mma kernels' blocks of rows: one for every TG_MVM_ROWS rows, or
     * with CT_CUDA_MATVEC_LOOP=1 (=2: only past twice the SMs, the logits;
     * 0.9% slower at batch 1, seventh session) at most one an SM, going on
     * to further rows (kernels/matvec.cu) with the normed columns kept and
     * the next rows' weights loading during this one's sums. Measured
     * slower on an H100 (sixth session): the step at batch 1 0.566 against
     * 0.538 ms, at 8 0.639 against 0.630 (at 64 on the wide kernel 2.00
     * against 2.37), so a block for every 16 rows stayed the default
     * until =3 (below) */
    const int64_t row_blocks = (w->ne[1] + rows_a_block - 1) / rows_a_block;
    int64_t rows = row_blocks;
    if (sms > 0 && ((c->matvec_loop == 1 && rows > sms) || (c->matvec_loop == 2 && rows > 2 * sms))) rows = sms;
    /* =3, the default: the same as 2 with as many blocks as the SMs hold
     * at once (two of 256 threads at 128 registers, one of 512), which 1
     * and 2 halved against the grid of a block for every 16 rows. On an
     * H100 (tenth session, against 0, interleaved) the step 1.3% faster
     * at batch 1, 1.7% at 8, 0.1% at 64: the logits (1024 blocks of 16
     * rows at batch 1-16) */
    const int64_t resident = sms * (warps <= 8 ? 2 : 1);
    if (sms > 0 && c->matvec_loop == 3 && rows > 2 * resident) rows = resident;
    if (staged) rows = st_grid;
    /* mul_mat_vec_mma_ln (CT_CUDA_MATVEC_LN_STAGE: 1, the default, from two
     * columns on; 2 for any; 0 never): the norm's weights and biases,
     * weights both, copied into shared memory before the wait, where the
     * warp-a-column norm read them after its statistics, from memory (the
     * step's 260 MB of weights evict them from L2 every step). On an H100
     * (seventeenth session, five rounds, against 0): the step at batch 8
     * 0.4966 -> 0.4910 ms (-1.1%, every round apart), at 1 unchanged; for
     * one column too (=2) the step at batch 1 took 9.7% longer (0.4028
     * against 0.3673 ms): the block's norm loads x and the parameters at
     * once after the wait, and the copies' wait before the norm put the
     * parameters' trip in front of x's. */
    const tg_tensor *lnw = ln ? ln->src[1] : NULL, *lnb = ln ? ln->src[2] : NULL;
    const bool ln_stage = mma && !cl && !staged && !r8 && cols <= TG_MVM_MAXM && lnw && lnb &&
                          (c->matvec_ln_stage >= 2 || (c->matvec_ln_stage == 1 && M >= 2)) &&
                          tg_cuda_is_weight(lnw) && tg_cuda_is_weight(lnb) && ((uintptr_t)lnw->data & 15) == 0 &&
                          ((uintptr_t)lnb->data & 15) == 0 && w->ne[0] % 4 == 0 &&
                          (int64_t)smem + 8 * w->ne[0] + MVM_STATIC_SMEM <= c->dev->props.smem_per_block_optin;
    if (ln_stage) smem += (unsigned)(8 * w->ne[0]);
    /* the epilogue's bias and residual before the wait: a thread for every
     * output (one tile, 128 threads for each 8 rows a block), no rows loop, the bias a
     * weight, the residual not the previous launch's */
    if (mma && !cl && c->matvec_epi_early && cols <= TG_MVM_MAXM && 32 * warps >= 128 * (rows_a_block / 8) && rows == row_blocks &&
        (bias || res) && (!bias || tg_cuda_is_weight(bias)) && (!res || tg_cuda_written_before(c, res))) {
        a.opt |= TG_MV_EPI_EARLY;
        c->n_matvec_epi_early++;
    }
    c->n_matvec++;
    c->n_matvec_mma += mma;
    /* the next launch's K and V (a decoder step's cross-attention) asked
     * into L2 during this product (tg_cuda_next_prefetch) */
    if (mma && !cl && c->next_pf.a_bytes + c->next_pf.b_bytes > 0) {
        a.pf_a = c->next_pf.a;
        a.pf_a_bytes = (int64_t)c->next_pf.a_bytes;
        a.pf_b = c->next_pf.b;
        a.pf_b_bytes = (int64_t)c->next_pf.b_bytes;
        c->n_pf_ahead++;
    }
    if (cl) {
        /* a cluster of TG_MVC_S blocks for every TG_MVC_ROWS rows */
        const int64_t blocks = (w->ne[1] + TG_MVC_ROWS - 1) / TG_MVC_ROWS * TG_MVC_S;
        if (blocks > INT32_MAX)
            return tg_status_new(TG_ERR_UNSUPPORTED, "cuda: product '%s': %lld blocks of mul_mat_vec_mma_cl",
                                 n->name, (long long)blocks);
        c->n_matvec_cl++;
        const unsigned cl_smem = (unsigned)mvc_smem(w->ne[0], M), threads = 32 * 2 * (TG_MVC_ROWS / 16);
        /* a warp's half slice of more than 4 steps of 32 k (the feed-forward's
         * down): mul_mat_vec_mma_cl2, its weights in twice the registers, no norm */
        if (w->ne[0] / TG_MVC_S > 4 * 64) {
            if (ln)
                return tg_status_new(TG_ERR_INTERNAL, "cuda: layer norm '%s' fused into mul_mat_vec_mma_cl2",
                                     ln->name);
            return LAUNCH_CLUSTER(c, s, "matvec.cu", "", mul_mat_vec_mma_cl2, (unsigned)blocks, 1, 1, threads,
                                  cl_smem, a, TG_MVC_S);
        }
        return LAUNCH_CLUSTER(c, s, "matvec.cu", "", mul_mat_vec_mma_cl, (unsigned)blocks, 1, 1, threads, cl_smem, a,
                              TG_MVC_S);
    }
    if (mma) {
        const int64_t tiles = (M + cols - 1) / cols, blocks = rows * tiles;
        if (blocks > INT32_MAX)
            return tg_status_new(TG_ERR_UNSUPPORTED, "cuda: product '%s': %lld blocks of mul_mat_vec_mma",
                                 n->name, (long long)blocks);
        if (cols > TG_MVM_MAXM) {
            c->n_matvec_wide++;
            return LAUNCH(c, s, "matvec.cu", "", mul_mat_vec_mma_wide, (unsigned)blocks, 1, 1, (unsigned)(32 * warps),
                          smem, a);
        }
        if (ln_stage) {
            c->n_matvec_ln_stage++;
            return LAUNCH(c, s, "matvec.cu", "", mul_mat_vec_mma_ln, (unsigned)blocks, 1, 1, (unsigned)(32 * warps),
                          smem, a);
        }
        if (staged) {
            c->n_matvec_staged++;
            a.ws_off = (int32_t)st_base;
            if (warps <= 8)
                return LAUNCH(c, s, "matvec.cu", "", mul_mat_vec_mma_st, (unsigned)blocks, 1, 1,
                              (unsigned)(32 * warps), smem, a);
            return LAUNCH(c, s, "matvec.cu", "", mul_mat_vec_mma_st16, (unsigned)blocks, 1, 1, (unsigned)(32 * warps),
                          smem, a);
        }
        if (r8) {
            c->n_matvec_r8++;
            return LAUNCH(c, s, "matvec.cu", "", mul_mat_vec_mma_r8, (unsigned)blocks, 1, 1, (unsigned)(32 * warps),
                          smem, a);
        }
        return LAUNCH(c, s, "matvec.cu", "", mul_mat_vec_mma, (unsigned)blocks, 1, 1, (unsigned)(32 * warps), smem, a);
    }
    return LAUNCH(c, s, "matvec.cu", "", mul_mat_vec, (unsigned)((w->ne[1] + 7) / 8), 1, 1, 256, smem, a);
}
