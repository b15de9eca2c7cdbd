/*
 * cuda_fusion.c: which nodes one launch covers (tg_cuda_fuse_len) and which
 * of a group's intermediate results that launch still stores
 * (tg_cuda_group_writes): matmul (+ scale as alpha) + bias (+ relu, or + a
 * residual); a layer norm inside its matvec product, and a decoder step's
 * K/V cache write inside its q/k/v product; the conv module's glu,
 * depthwise conv, bias and silu; the subsampling's bias, mask and relu,
 * and its first conv through the depthwise conv after it; two layer
 * norms in a row (an encoder layer's last and the next one's first); a
 * decoder step's embedding lookups, sum and norm; a decoder step's tail
 * (argmax, logit sums, the next step's feed and the history writes).
 *
 * Each matcher is a pure function of the nodes, their readers' counts and
 * the addresses the planner gave them, so tests/cuda/test_choices.c and
 * test_plan.c check it without a GPU. A group is taken only where its
 * kernel computes exactly what the nodes would, reads nothing a block of
 * it writes, and leaves unwritten only results nothing outside it reads.
 *
 * Not here: the kernels and their launches (cuda_ops.c, cuda_matvec.c,
 * cuda_matmul.c); the plan that calls these (cuda_context.c).
 */
#include "cuda_internal.h"
#include "hazard.h"
#include "op_params.h"

static bool f32_contiguous(const tg_tensor *t) { return t->type == TG_F32 && tg_is_contiguous(t); }

/* The longest group a product's K/V cache write joins: a layer norm, the
 * product, its bias add, two view nodes and the set_rows. */
enum { CUDA_KV_GROUP_MAX = 6 };
_Static_assert(CUDA_KV_GROUP_MAX <= TG_HAZARD_GROUP_MAX, "the hazard runs must model the K/V group as one launch");

static bool is_bias_for(const tg_tensor *bias, const tg_tensor *mm) {
    return bias && bias->type == TG_F32 && bias->data && tg_is_contiguous(bias) && bias->ne[0] == mm->ne[0] &&
           bias->ne[1] == 1 && bias->ne[2] == 1 && bias->ne[3] == 1;
}

/* The other source of add = sum + r when it can ride a product's epilogue
 * as the residual; NULL when not. */
static const tg_tensor *fused_residual(const tg_tensor *add, const tg_tensor *sum) {
    const tg_tensor *r = add->src[0] == sum ? add->src[1] : add->src[1] == sum ? add->src[0] : NULL;
    if (!r || r == sum || r->type != TG_F32 || !r->data || !tg_same_shape(r, add) || !tg_is_contiguous(r))
        return NULL;
    return r;
}

/* The scale node of a group (mul_mat, scale s, add bias ...): it reads the
 * product alone and stores what the product did, so s can be the
 * product's alpha. */
static bool is_alpha_for(const tg_tensor *sc, const tg_tensor *mm) {
    return sc->op == TG_OP_SCALE && sc->src[0] == mm && sc->type == TG_F32 && tg_same_shape(sc, mm) &&
           tg_is_contiguous(sc) && !(sc->flags & TG_FLAG_OUTPUT);
}

tg_cuda_fused tg_cuda_fused_parts(tg_tensor *const *nodes, int i, int len) {
    tg_cuda_fused f = {.bias = NULL, .res = NULL, .alpha = 1.0f, .relu = false};
    if (len < 2) return f;
    int j = i + 1;
    const tg_tensor *prev = nodes[i];
    if (nodes[j]->op == TG_OP_SCALE) {
        f.alpha = tg_param_f32(nodes[j], 0);
        prev = nodes[j++];
    }
    if (j >= i + len) return f; /* mul_mat, scale: alpha alone */
    const tg_tensor *add = nodes[j];
    f.bias = add->src[0] == prev ? add->src[1] : add->src[0];
    if (j + 1 < i + len) {
        const tg_tensor *last = nodes[j + 1];
        if (last->op == TG_OP_RELU) f.relu = true;
        else f.res = fused_residual(last, add);
    }
    return f;
}

static int product_fuse_len(const tg_cuda_ctx *c, tg_tensor *const *nodes, int n, int i, const int *n_uses) {
    if (!c->use_fusion || i + 1 >= n) return 1;
    const tg_tensor *mm = nodes[i];
    if (mm->op != TG_OP_MUL_MAT || n_uses[i] != 1 || (mm->flags & TG_FLAG_OUTPUT) || !tg_is_contiguous(mm))
        return 1;
    /* mul_mat [, scale s] , add bias: the scale (the encoder's feed-forward
     * halves, encoder.c) rides as the product's alpha; mul_mat, scale s
     * without a bias after it (the rel-pos table's projection scaled by
     * 1/sqrt(d_head)) is a group of two, the scale the alpha alone */
    int j = i + 1;
    const tg_tensor *prev = mm;
    if (c->use_scale && n_uses[j] == 1 && is_alpha_for(nodes[j], mm)) prev = nodes[j++];
    const tg_tensor *add = j < n ? nodes[j] : NULL;
    const tg_tensor *bias = !add || add->op != TG_OP_ADD ? NULL
                            : add->src[0] == prev    ? add->src[1]
                            : add->src[1] == prev    ? add->src[0]
                                                     : NULL;
    if (!is_bias_for(bias, mm) || !tg_same_shape(add, mm) || add->type != TG_F32 || !tg_is_contiguous(add)) {
        if (prev == mm || tg_hazard_overlap(prev, mm->src[0]) || tg_hazard_overlap(prev, mm->src[1])) return 1;
        return 2;
    }
    /* The epilogue needs one product over contiguous activations. */
    const tg_tensor *a = mm->src[0];
    if (a->ne[2] != 1 || a->ne[3] != 1) return 1;
    int len = j - i + 1;
    const tg_tensor *third = j + 1 < n ? nodes[j + 1] : NULL;
    bool chain = third && n_uses[j] == 1 && !(add->flags & TG_FLAG_OUTPUT) && tg_same_shape(third, add) &&
                 third->type == TG_F32 && tg_is_contiguous(third);
    if (chain && third->op == TG_OP_RELU && third->src[0] == add) len++;
    /* + a residual r (a layer's output product and its skip connection):
     * an F32 tensor of the result's shape and layout, read at the element
     * the launch writes, so r may be the result's own storage (storage
     * placed by hand; the planners never put an add's result on its
     * source) but must not overlap it otherwise */
    const tg_tensor *res = chain && c->use_residual && third->op == TG_OP_ADD ? fused_residual(third, add) : NULL;
    if (res && (!tg_hazard_overlap(res, third) || (res->data == third->data && tg_same_shape(res, third))))
        len++;
    /* The fused launch writes the last result while the product reads its
     * operands and the bias: never over them. The planners keep the
     * product's operands apart (tg_plan_fused_product); a bias that is not
     * a weight, or storage placed by hand, may still overlap, and then the
     * nodes run one by one. */
    const tg_tensor *out = nodes[i + len - 1];
    if (tg_hazard_overlap(out, mm->src[0]) || tg_hazard_overlap(out, mm->src[1]) || tg_hazard_overlap(out, bias))
        return 1;
    return len;
}

/* The conv module's glu -> conv_1d_dw (stride 1) -> add bias -> silu,
 * each read only by the next, as conv_glu_dw_silu_c4 takes them: F32,
 * contiguous, 16-byte aligned, channels a multiple of 4, at most
 * TG_DW1_KMAX taps, within the grid's limits; the result apart from the
 * GLU's input, the kernel and the bias. 4 when they fuse, else 1. */
static int conv_glu_fuse_len(const tg_cuda_ctx *c, tg_tensor *const *nodes, int n, int i, const int *n_uses) {
    if (!c->use_conv_glu || i + 3 >= n) return 1;
    const tg_tensor *glu = nodes[i], *dw = nodes[i + 1], *add = nodes[i + 2], *act = nodes[i + 3];
    for (int k = 0; k < 3; k++)
        if (n_uses[i + k] != 1 || (nodes[i + k]->flags & TG_FLAG_OUTPUT)) return 1;
    if (dw->op != TG_OP_CONV_1D_DW || dw->src[1] != glu || add->op != TG_OP_ADD || act->op != TG_OP_SILU ||
        act->src[0] != add)
        return 1;
    const tg_tensor *bias = add->src[0] == dw ? add->src[1] : add->src[1] == dw ? add->src[0] : NULL;
    const tg_tensor *a = glu->src[0], *kr = dw->src[0];
    if (!bias || !f32_contiguous(bias) || tg_nelements(bias) != dw->ne[0] || bias->ne[0] != dw->ne[0] || !bias->data)
        return 1;
    if (!f32_contiguous(a) || !f32_contiguous(kr) || !f32_contiguous(act) || !tg_same_shape(add, dw) ||
        !tg_same_shape(act, dw) || tg_param_i32(dw, 0) != 1)
        return 1;
    int64_t C = dw->ne[0], batch = a->ne[2] * a->ne[3];
    if (a->ne[0] != 2 * C || C % 4 != 0 || kr->ne[1] != C || kr->ne[0] > TG_DW1_KMAX || kr->ne[0] < 1 ||
        (((uintptr_t)a->data | (uintptr_t)act->data | (uintptr_t)bias->data) & 15) != 0 ||
        a->ne[0] * a->ne[1] >= INT32_MAX || dw->ne[1] >= INT32_MAX - TG_DW1_TT || batch > 65535 ||
        (dw->ne[1] + TG_DW1_TT - 1) / TG_DW1_TT > 65535 || dw->ne[2] * dw->ne[3] != batch)
        return 1;
    if (tg_hazard_overlap(act, a) || tg_hazard_overlap(act, kr) || tg_hazard_overlap(act, bias)) return 1;
    return 4;
}

/* A value per row of n: F32, ne[0] == 1, every other dim 1 or n's (a conv
 * bias [1, 1, C, 1], a frame mask [1, T, 1, B]). */
bool tg_cuda_row_value(const tg_tensor *t, const tg_tensor *n) {
    if (t->type != TG_F32 || t->ne[0] != 1 || !t->data) return false;
    for (int d = 1; d < 4; d++)
        if (t->ne[d] != 1 && t->ne[d] != n->ne[d]) return false;
    return true;
}

/* The operand of binary node n that is not `from`, when n reads `from` as
 * one operand and a row value as the other; else NULL. */
const tg_tensor *tg_cuda_row_operand(const tg_tensor *n, const tg_tensor *from) {
    const tg_tensor *o = n->src[0] == from ? n->src[1] : n->src[1] == from ? n->src[0] : NULL;
    return o && o != from && tg_cuda_row_value(o, n) ? o : NULL;
}

/* What ew_bias_mask_c4 needs of the chain from add (x + a row bias) to
 * last, with the mask when it has one. */
static bool bias_mask_c4_ok(const tg_tensor *add, const tg_tensor *x, const tg_tensor *bias, const tg_tensor *mask,
                            const tg_tensor *last) {
    if (!f32_contiguous(last) || add->ne[0] % 4 != 0 || add->ne[0] / 4 > INT32_MAX ||
        (((uintptr_t)x->data | (uintptr_t)last->data) & 15) != 0 || add->ne[1] > INT32_MAX || add->ne[2] > INT32_MAX)
        return false;
    return !(tg_hazard_overlap(last, x) && last->data != x->data) && !tg_hazard_overlap(last, bias) &&
           !(mask && tg_hazard_overlap(last, mask));
}

/* x and its row bias of an add node, when the add is x + a row value with
 * x F32 and contiguous, in the add's shape. */
static bool row_bias_add(const tg_tensor *add, const tg_tensor **x, const tg_tensor **bias) {
    if (add->op != TG_OP_ADD || add->type != TG_F32) return false;
    *x = tg_cuda_row_value(add->src[1], add) ? add->src[0] : add->src[1];
    *bias = *x == add->src[0] ? add->src[1] : add->src[0];
    return tg_cuda_row_value(*bias, add) && f32_contiguous(*x) && tg_same_shape(*x, add);
}

bool tg_cuda_bias_add_c4(const tg_cuda_ctx *c, const tg_tensor *add) {
    const tg_tensor *x, *bias;
    return c->use_bias_mask && c->use_bias_add_c4 && row_bias_add(add, &x, &bias) &&
           bias_mask_c4_ok(add, x, bias, NULL, add);
}

/* A conv's output x -> add a row bias [-> mul a row mask] [-> relu], each
 * read only by the next (the subsampling of spec 2.1: three passes over the
 * encoder's largest tensors), as ew_bias_mask_c4 takes them: contiguous F32
 * rows of a multiple of 4 floats, 16-byte aligned; the result exactly on x
 * (elementwise: each thread reads before it writes) or apart from it, and
 * apart from the bias and mask. 2 or 3 when they fuse, else 1. */
static int bias_mask_fuse_len(const tg_cuda_ctx *c, tg_tensor *const *nodes, int n, int i, const int *n_uses) {
    const tg_tensor *add = nodes[i], *x, *bias;
    if (!c->use_bias_mask || i + 1 >= n || !row_bias_add(add, &x, &bias)) return 1;
    const tg_tensor *last = add, *mask = NULL;
    int len = 1;
    if (n_uses[i] == 1 && !(add->flags & TG_FLAG_OUTPUT) && nodes[i + 1]->op == TG_OP_MUL &&
        (mask = tg_cuda_row_operand(nodes[i + 1], add)) && tg_same_shape(nodes[i + 1], add))
        last = nodes[i + len++];
    if (i + len < n && n_uses[i + len - 1] == 1 && !(last->flags & TG_FLAG_OUTPUT) &&
        nodes[i + len]->op == TG_OP_RELU && nodes[i + len]->src[0] == last && tg_same_shape(nodes[i + len], add))
        last = nodes[i + len++];
    return len > 1 && bias_mask_c4_ok(add, x, bias, mask, last) ? len : 1;
}

/* A conv's bias as conv_bias adds it: contiguous F32 [1, 1, C, 1]. */
static bool channel_bias(const tg_tensor *b, int64_t C) {
    return b && f32_contiguous(b) && b->data && b->ne[0] == 1 && b->ne[1] == 1 && b->ne[2] == C && b->ne[3] == 1;
}

/* A 3x3 stride-2 padding-1 conv's kernel [3, 3, 1, C] and params. */
static bool conv3_s2(const tg_tensor *n, int64_t C) {
    const tg_tensor *k = n->src[0];
    return f32_contiguous(k) && k->ne[0] == 3 && k->ne[1] == 3 && k->ne[2] == 1 && k->ne[3] == C &&
           tg_param_i32(n, 0) == 2 && tg_param_i32(n, 1) == 2 && tg_param_i32(n, 2) == 1 && tg_param_i32(n, 3) == 1;
}

/* Node j adds a channel bias to x (either operand order); the bias. */
static const tg_tensor *bias_add_of(const tg_tensor *add, const tg_tensor *x) {
    if (add->op != TG_OP_ADD || !tg_same_shape(add, x) || add->type != TG_F32) return NULL;
    const tg_tensor *b = add->src[0] == x ? add->src[1] : add->src[1] == x ? add->src[0] : NULL;
    return b != x && channel_bias(b, x->ne[2]) ? b : NULL;
}

/* Node m multiplies x by a frame mask (a value per row: ne[0] == 1, dim 2
 * of size 1); the mask. */
static const tg_tensor *frame_mask_of(const tg_tensor *m, const tg_tensor *x) {
    if (m->op != TG_OP_MUL || !tg_same_shape(m, x)) return NULL;
    const tg_tensor *k = tg_cuda_row_operand(m, x);
    return k && k->ne[2] == 1 ? k : NULL;
}

/* The subsampling's front as encoder.c builds it (spec 2.1): conv0 (one
 * input channel, 3x3, stride 2, padding 1) -> add its bias [-> mul a frame
 * mask] -> relu -> the depthwise 3x3 (stride 2, padding 1) -> add its bias
 * [-> mul a frame mask], each read only by the next, as sub_conv_dw takes
 * them: F32, contiguous input and result, sizes within 32-bit indexing and
 * the grid; the result apart from everything the kernel reads. 5 to 7 when
 * they fuse, else 1. */
static int sub_front_fuse_len(const tg_cuda_ctx *c, tg_tensor *const *nodes, int n, int i, const int *n_uses) {
    if (!c->use_sub_front || i + 4 >= n) return 1;
    const tg_tensor *conv = nodes[i], *x = conv->src[1];
    const int64_t C = conv->ne[2], B = conv->ne[3];
    if (conv->op != TG_OP_CONV_2D || !f32_contiguous(conv) || !f32_contiguous(x) || x->ne[2] != 1 || x->ne[3] != B ||
        !conv3_s2(conv, C))
        return 1;
    const tg_tensor *mask[2] = {NULL, NULL}, *bias[2] = {NULL, NULL}, *dw = NULL, *prev = conv;
    int j = i + 1;
    for (int stage = 0; stage < 2; stage++) {
        /* the bias, the mask if any, then relu (conv0) or the end (dw) */
        if (j >= n || !(bias[stage] = bias_add_of(nodes[j], prev))) return 1;
        prev = nodes[j++];
        if (j < n && (mask[stage] = frame_mask_of(nodes[j], prev))) prev = nodes[j++];
        if (stage == 1) break;
        if (j + 1 >= n || nodes[j]->op != TG_OP_RELU || nodes[j]->src[0] != prev || !tg_same_shape(nodes[j], prev))
            return 1;
        prev = nodes[j++];
        dw = nodes[j++];
        if (dw->op != TG_OP_CONV_2D_DW || dw->src[1] != prev || !f32_contiguous(dw) || dw->ne[2] != C ||
            dw->ne[3] != B || !conv3_s2(dw, C))
            return 1;
        prev = dw;
    }
    const int len = j - i;
    const tg_tensor *last = nodes[j - 1];
    if (len > TG_HAZARD_GROUP_MAX || !f32_contiguous(last)) return 1;
    for (int k = i; k < j - 1; k++)
        if (n_uses[k] != 1 || (nodes[k]->flags & TG_FLAG_OUTPUT)) return 1;
    if (x->ne[0] * x->ne[1] >= INT32_MAX || conv->ne[0] * conv->ne[1] >= INT32_MAX ||
        dw->ne[0] * dw->ne[1] >= INT32_MAX - 256 || (C + TG_SUB_TILE - 1) / TG_SUB_TILE > 65535 || B > 65535 ||
        C > INT32_MAX)
        return 1;
    const tg_tensor *reads[7] = {x, conv->src[0], dw->src[0], bias[0], bias[1], mask[0], mask[1]};
    for (int k = 0; k < 7; k++)
        if (reads[k] && tg_hazard_overlap(last, reads[k])) return 1;
    return len;
}

/* A get_rows from a 2-D table by contiguous I32 ids, F32 and contiguous
 * with one row per id, of the width `width`. */
static bool embed_lookup_ok(const tg_tensor *g, int64_t width) {
    const tg_tensor *t = g->src[0], *ids = g->src[1];
    return g->op == TG_OP_GET_ROWS && f32_contiguous(g) && t->ne[0] == width && t->ne[2] == 1 && t->ne[3] == 1 &&
           t->ne[1] <= INT32_MAX && ids->type == TG_I32 && tg_is_contiguous(ids) && tg_nelements(ids) == tg_nrows(g);
}

/* The decoder step's head: get_rows of the token table, get_rows of the
 * position table, their add, and the layer norm of it or of a reshape of
 * it (a view), each read only by the next, as embed_norm: 4 or 5 (with
 * the view's node) when they fuse, the norm last, else 1. The result may
 * not lie over what the kernel reads. */
static int embed_norm_fuse_len(const tg_cuda_ctx *c, tg_tensor *const *nodes, int n, int i, const int *n_uses) {
    if (!c->use_embed_norm || i + 3 >= n) return 1;
    const tg_tensor *ga = nodes[i], *gb = nodes[i + 1], *add = nodes[i + 2];
    /* the reshape is a view node in a whole graph, and no node at all in
     * a scheduler's split (which leaves views out) */
    const int len = i + 4 < n && tg_op_is_view(nodes[i + 3]->op) ? 5 : 4;
    const tg_tensor *ln = nodes[i + len - 1], *x = ln->src[0];
    if (add->op != TG_OP_ADD || ln->op != TG_OP_LAYER_NORM || len > TG_HAZARD_GROUP_MAX || !x) return 1;
    if (x != add && (x->view_src != add || x->data != add->data || !tg_is_contiguous(x))) return 1;
    if (len == 5 && nodes[i + 3] != x) return 1;
    for (int k = 0; k < len - 1; k++)
        if (n_uses[i + k] != 1 || (nodes[i + k]->flags & TG_FLAG_OUTPUT)) return 1;
    if (!((add->src[0] == ga && add->src[1] == gb) || (add->src[0] == gb && add->src[1] == ga))) return 1;
    const int64_t width = add->ne[0];
    if (!embed_lookup_ok(ga, width) || !embed_lookup_ok(gb, width) || !f32_contiguous(add) ||
        !tg_same_shape(ga, add) || !tg_same_shape(gb, add) || !f32_contiguous(ln) || ln->ne[0] != width ||
        tg_nelements(ln) != tg_nelements(add) || tg_nrows(ln) > INT32_MAX)
        return 1;
    for (int k = 1; k < 3; k++) {
        const tg_tensor *v = ln->src[k];
        if (v && (!f32_contiguous(v) || tg_nelements(v) != width || tg_hazard_overlap(ln, v))) return 1;
    }
    for (int k = 0; k < 2; k++)
        if (tg_hazard_overlap(ln, ga->src[k]) || tg_hazard_overlap(ln, gb->src[k])) return 1;
    return len;
}

/* A layer norm of a layer norm's result (an encoder layer's output norm,
 * then the next layer's first norm, encoder.c), as layer_norm2_w4 takes
 * them: both on layer_norm_w4's path (norm_vec_ok: contiguous F32 rows of
 * a multiple of 4 floats, at most a warp's 512 float4s, 16-byte aligned
 * with their parameters), the second reading the first's result as it is,
 * with the first's storage exactly its source's or apart from it, and the
 * second's apart from everything the launch reads or writes. The first's
 * result may have other readers: the launch writes it too
 * (tg_cuda_group_writes). Not where the second norm goes inside its
 * product's matvec launch instead (a decoder step's first layer norm after
 * the embedding norm, with CT_CUDA_FUSE_EMBED=0). 2 when they fuse, else
 * 1. */
static int norm_pair_fuse_len(const tg_cuda_ctx *c, tg_tensor *const *nodes, int n, int i, const int *n_uses) {
    if (!c->use_norm_pair || i + 1 >= n) return 1;
    const tg_tensor *a = nodes[i], *b = nodes[i + 1], *x = a->src[0];
    if (c->use_ln_matvec && i + 2 < n && n_uses[i + 1] == 1 && nodes[i + 2]->op == TG_OP_MUL_MAT &&
        nodes[i + 2]->src[1] == b && tg_cuda_ln_matvec_ok(c, b, nodes[i + 2], nodes[i + 2]))
        return 1;
    if (b->op != TG_OP_LAYER_NORM || b->src[0] != a || !x || !tg_same_shape(a, b) ||
        !tg_cuda_norm_vec_ok(a) || !tg_cuda_norm_vec_ok(b) || a->ne[0] / 4 > TG_NORM_WARP_N4 || tg_nrows(a) > INT32_MAX)
        return 1;
    if (tg_hazard_overlap(a, x) && !(a->data == x->data && tg_same_shape(a, x))) return 1;
    const tg_tensor *reads[6] = {x, a, a->src[1], a->src[2], b->src[1], b->src[2]};
    for (int k = 0; k < 6; k++) {
        if (reads[k] && tg_hazard_overlap(b, reads[k])) return 1;
        if (k >= 2 && reads[k] && tg_hazard_overlap(a, reads[k])) return 1;
    }
    return 2;
}

/* Contiguous, of type t, n elements. */
static bool flat_of(const tg_tensor *x, tg_type t, int64_t n) {
    return x && x->type == t && tg_is_contiguous(x) && tg_nelements(x) == n;
}

/* A set_rows of n values (v: a contiguous F32 [n, 1] on src's storage)
 * into one row, given by a single I32/I64 id, of an F32 history [n, rows]
 * whose rows are 4-byte aligned. */
static bool history_write(const tg_tensor *w, const tg_tensor *src, int64_t n) {
    const tg_tensor *v = w->src[0], *at = w->src[1];
    return w->op == TG_OP_SET_ROWS && w->type == TG_F32 && w->nb[0] == 4 && w->ne[0] == n && w->ne[2] == 1 &&
           w->ne[3] == 1 && w->nb[1] % 4 == 0 && flat_of(v, TG_F32, n) && v->ne[0] == n && v->data == src->data &&
           at && (at->type == TG_I32 || at->type == TG_I64) && tg_nelements(at) == 1 && at->data;
}

/* A decoder step's normed q product (nodes[i] the norm, i + 1 the
 * product, i + 2 its bias add), then the view of the add's result as
 * heads (a node in a whole graph, none in a scheduler's split) and the
 * attention reading it as q: the nodes after the product's group that
 * join it (1 or 2), else 0. The add and its view have no other reader,
 * and the attention's result lies over nothing the launch reads (its
 * blocks write it while others still read their operands). */
static int cross_q_len(const tg_cuda_ctx *c, tg_tensor *const *nodes, int n, int i, const int *n_uses) {
    if (!c->attn_cross_q || i + 3 >= n) return 0;
    const tg_tensor *ln = nodes[i], *mm = nodes[i + 1], *add = nodes[i + 2];
    if (add->op != TG_OP_ADD || n_uses[i + 2] != 1 || (add->flags & TG_FLAG_OUTPUT)) return 0;
    int j = i + 3;
    if (tg_op_is_view(nodes[j]->op)) {
        if (nodes[j]->view_src != add || n_uses[j] != 1 || (nodes[j]->flags & TG_FLAG_OUTPUT) || j + 1 >= n)
            return 0;
        j++;
    }
    const tg_tensor *att = nodes[j], *q = att->src[0];
    if (att->op != TG_OP_ATTENTION || !q || (q != add && q->view_src != add) || j - i + 1 > TG_HAZARD_GROUP_MAX)
        return 0;
    const tg_tensor *bias = tg_cuda_fused_parts(nodes, i + 1, 2).bias;
    if (!bias || !tg_cuda_attn_cross_q_ok(c, ln, mm, add, bias, att)) return 0;
    const tg_tensor *reads[8] = {ln->src[0], ln->src[1], ln->src[2], mm->src[0], bias, att->src[1], att->src[2],
                                 att->src[3]};
    for (int k = 0; k < 8; k++)
        if (reads[k] && tg_hazard_overlap(att, reads[k])) return 0;
    return j - (i + 2);
}

/* A decoder step's tail as decoder.c builds it (build_graph, build_feed),
 * as the scheduler's split holds it (no view nodes): argmax of the logits,
 * sum_rows of them, the copy of all the ids into the next step's feed, the
 * ids cast to F32, and the set_rows of the cast ids and of the sums into
 * one row of the histories: 6 when they fuse into argmax_sum, else 1. The
 * cast's result is not written (so only the set_rows may read it); every
 * other result is, so the group marks them in the hazard runs' writes
 * (tg_cuda_group_writes). No result may lie over the logits or the row id
 * (blocks read them while others write), nor over another. */
static int pick_fuse_len(const tg_cuda_ctx *c, tg_tensor *const *nodes, int n, int i, const int *n_uses) {
    if (!c->use_pick || i + 5 >= n) return 1;
    const tg_tensor *am = nodes[i], *sr = nodes[i + 1], *feed = nodes[i + 2], *cast = nodes[i + 3];
    const tg_tensor *hi = nodes[i + 4], *hs = nodes[i + 5], *logits = am->src[0];
    const int64_t rows = tg_nelements(am);
    if (!logits || logits->type != TG_F32 || sr->op != TG_OP_SUM_ROWS || sr->src[0] != logits ||
        feed->op != TG_OP_CPY || cast->op != TG_OP_CPY || cast->src[0] != am || rows < 1 || rows > INT32_MAX ||
        rows != tg_nrows(logits))
        return 1;
    if (!flat_of(am, TG_I32, rows) || !flat_of(sr, TG_F32, rows) || !flat_of(feed, TG_I32, rows) ||
        !flat_of(feed->src[0], TG_I32, rows) || feed->src[0]->data != am->data || !flat_of(cast, TG_F32, rows))
        return 1;
    /* tg_cast's own result (not a copy into a tensor someone else may
     * read), read only by the set_rows */
    if (n_uses[i + 3] != 1 || (cast->flags & TG_FLAG_OUTPUT) || cast->view_src || cast->src[1]) return 1;
    if (!history_write(hi, cast, rows) || !history_write(hs, sr, rows) || hi->ne[1] != hs->ne[1] ||
        hi->src[1]->data != hs->src[1]->data || hi->src[1]->type != hs->src[1]->type)
        return 1;
    const tg_tensor *outs[5] = {am, sr, feed, hi, hs};
    for (int k = 0; k < 5; k++) {
        if (tg_hazard_overlap(outs[k], logits) || tg_hazard_overlap(outs[k], hi->src[1])) return 1;
        for (int q = 0; q < k; q++)
            if (tg_hazard_overlap(outs[k], outs[q])) return 1;
    }
    _Static_assert(TG_HAZARD_GROUP_MAX >= 6, "the hazard runs must model argmax_sum's group as one launch");
    return 6;
}

int tg_cuda_fuse_len(const tg_cuda_ctx *c, tg_tensor *const *nodes, int n, int i, const int *n_uses) {
    if (!c->use_fusion || i + 1 >= n) return 1;
    if (nodes[i]->op == TG_OP_GLU) return conv_glu_fuse_len(c, nodes, n, i, n_uses);
    if (nodes[i]->op == TG_OP_GET_ROWS) return embed_norm_fuse_len(c, nodes, n, i, n_uses);
    if (nodes[i]->op == TG_OP_ADD) return bias_mask_fuse_len(c, nodes, n, i, n_uses);
    if (nodes[i]->op == TG_OP_ARGMAX) return pick_fuse_len(c, nodes, n, i, n_uses);
    if (nodes[i]->op == TG_OP_CONV_2D) return sub_front_fuse_len(c, nodes, n, i, n_uses);
    if (nodes[i]->op == TG_OP_LAYER_NORM && nodes[i + 1]->op == TG_OP_LAYER_NORM)
        return norm_pair_fuse_len(c, nodes, n, i, n_uses);
    int len, p = i;
    if (nodes[i]->op != TG_OP_LAYER_NORM) {
        len = product_fuse_len(c, nodes, n, i, n_uses);
    } else {
        if (!c->use_ln_matvec || n_uses[i] != 1) return 1;
        len = 1 + product_fuse_len(c, nodes, n, i + 1, n_uses);
        const tg_tensor *ln = nodes[i], *out = nodes[i + len - 1];
        /* every block reads x (all of it, or its tile's columns) while
         * others write out: never over it; and no group longer than the
         * concurrency runs model as one launch */
        if (len > TG_HAZARD_GROUP_MAX || !tg_cuda_ln_matvec_ok(c, ln, nodes[i + 1], out) ||
            tg_hazard_overlap(out, ln->src[0]))
            return 1;
        p = i + 1;
        /* then, with CT_CUDA_ATTN_CROSS_Q, the attention reading that
         * product as its q, in the same launch */
        const int more = len == 3 ? cross_q_len(c, nodes, n, i, n_uses) : 0;
        if (more > 0) return len + more;
    }
    /* then the set_rows of the group's k and v rows into the cache, in the
     * same launch where it takes it */
    if (nodes[p]->op == TG_OP_MUL_MAT) {
        /* at most the decoder's group (norm, product, bias, two views,
         * set_rows), as measured and tested; the hazard runs' limit is the
         * subsampling front's */
        int more = tg_cuda_kv_rows_len(c, nodes, n, p, i + len, p != i);
        if (more > 0 && len + more <= CUDA_KV_GROUP_MAX) len += more;
    }
    return len;
}

/* The index of the node of the group at nodes[i] (ending in a fused
 * set_rows) whose result the set_rows' rows view: the product group's
 * last node. */
int tg_cuda_kv_rows_source(tg_tensor *const *nodes, int i, int len) {
    const tg_tensor *src = nodes[i + len - 1]->src[0];
    for (int k = i + len - 2; k >= i; k--)
        if (src && src->view_src == nodes[k]) return k;
    return -1;
}

void tg_cuda_group_writes(tg_tensor *const *nodes, int i, int len, uint8_t *writes) {
    if (len > 1 && nodes[i]->op == TG_OP_ARGMAX) {
        /* argmax_sum: the ids, sums, feed and the ids' history row; not
         * the cast, which only the group read */
        for (int k = i; k < i + len - 1; k++) writes[k] = k != i + 3;
        return;
    }
    if (len == 2 && nodes[i]->op == TG_OP_LAYER_NORM && nodes[i + 1]->op == TG_OP_LAYER_NORM) {
        writes[i] = 1; /* layer_norm2_w4 stores both norms */
        return;
    }
    if (len < 2 || nodes[i + len - 1]->op != TG_OP_SET_ROWS) return;
    int k = tg_cuda_kv_rows_source(nodes, i, len);
    if (k >= 0) writes[k] = 1;
}

