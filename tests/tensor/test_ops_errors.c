/*
 * test_ops_errors.c: the op constructors: every refusal (wrong types, shapes
 * that do not fit, bad broadcasts, odd GLU, bad convolution parameters), with
 * messages that name the op, the tensors and their shapes; NULL sources
 * propagating silently; the first error staying the recorded one; and, for
 * the accepted cases, the result's type, shape, sources and op_params laid
 * out as op_params.h says.
 */
#include "check.h"
#include "op_params.h"

static tg_ctx *S; /* owns the sources */

static tg_tensor *mk(tg_type type, int64_t n0, int64_t n1, int64_t n2, int64_t n3,
                     const char *name) {
    if (!S) S = tg_ctx_new();
    return tg_set_name(tg_new_4d(S, type, n0, n1, n2, n3), "%s", name);
}

/* Runs one constructor call in a fresh context and expects a refusal whose
 * message contains needle. */
#define EXPECT_FAIL(call, needle)                                                     \
    do {                                                                              \
        tg_ctx *ctx = tg_ctx_new();                                                   \
        CHECK_MSG((call) == NULL, "%s accepted", #call);                              \
        CHECK_ERR(tg_ctx_check(ctx), TG_ERR_INVALID_ARG, needle);                     \
        tg_ctx_free(ctx);                                                             \
    } while (0)

/* Expects success and no error; leaves the result in `out`. */
#define EXPECT_OK(out, call)                                                          \
    do {                                                                              \
        out = (call);                                                                 \
        CHECK_MSG(out != NULL, "%s refused", #call);                                  \
        CHECK_OK(tg_ctx_check(ctx));                                                  \
    } while (0)

static bool has_shape(const tg_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d) {
    return t && t->ne[0] == a && t->ne[1] == b && t->ne[2] == c && t->ne[3] == d;
}

static void test_message_names_op_tensors_shapes(void) {
    tg_tensor *w = mk(TG_BF16, 1280, 5120, 1, 1, "enc.0.ff1.w");
    tg_tensor *x = mk(TG_F32, 1024, 438, 1, 1, "x");
    EXPECT_FAIL(tg_mul_mat(ctx, w, x),
                "mul_mat: a 'enc.0.ff1.w' [1280,5120] and b 'x' [1024,438]: ne[0] differ "
                "(1280 vs 1024)");
    tg_tensor *anon = tg_new_2d(S, TG_F16, 3, 2);
    EXPECT_FAIL(tg_relu(ctx, anon), "relu: a #");
    EXPECT_FAIL(tg_relu(ctx, anon), "[3,2] has type f16; expected f32");
}

static void test_rows_errors(void) {
    tg_tensor *a = mk(TG_F32, 8, 10, 2, 1, "emb");
    tg_tensor *ai = mk(TG_I32, 8, 10, 1, 1, "emb_i");
    tg_tensor *ids = mk(TG_I32, 3, 2, 1, 1, "ids");
    tg_tensor *idsf = mk(TG_F32, 3, 2, 1, 1, "idsf");
    tg_tensor *ids_bad = mk(TG_I32, 3, 5, 1, 1, "ids5");
    tg_tensor *ids_4d = mk(TG_I32, 3, 2, 1, 2, "ids4");
    EXPECT_FAIL(tg_get_rows(ctx, ai, ids), "get_rows: a 'emb_i' [8,10] has type i32");
    EXPECT_FAIL(tg_get_rows(ctx, a, idsf), "get_rows: ids 'idsf' [3,2] has type f32; expected i32");
    EXPECT_FAIL(tg_get_rows(ctx, a, ids_bad), "get_rows: a 'emb' [8,10,2] and ids 'ids5' [3,5]");
    EXPECT_FAIL(tg_get_rows(ctx, a, ids_4d), "get_rows");
    tg_tensor *at = tg_transpose(S, mk(TG_F32, 10, 8, 2, 1, "embT"));
    EXPECT_FAIL(tg_get_rows(ctx, at, ids), "dim 0 is strided");

    tg_tensor *cache = mk(TG_F16, 8, 16, 2, 1, "kv");
    tg_tensor *cache_i = mk(TG_I32, 8, 16, 2, 1, "kvi");
    tg_tensor *src = mk(TG_F32, 8, 3, 2, 1, "new");
    tg_tensor *src16 = mk(TG_F16, 8, 3, 2, 1, "new16");
    tg_tensor *src_w = mk(TG_F32, 4, 3, 2, 1, "narrow");
    tg_tensor *src_h = mk(TG_F32, 8, 3, 3, 1, "heads3");
    tg_tensor *pos = mk(TG_I32, 3, 2, 1, 1, "pos");
    tg_tensor *pos_bad = mk(TG_I32, 2, 2, 1, 1, "pos2");
    EXPECT_FAIL(tg_set_rows(ctx, cache_i, src, pos), "set_rows: dst 'kvi' [8,16,2] has type i32");
    EXPECT_FAIL(tg_set_rows(ctx, cache, src16, pos), "set_rows: src 'new16'");
    EXPECT_FAIL(tg_set_rows(ctx, cache, src, idsf), "set_rows: ids 'idsf'");
    EXPECT_FAIL(tg_set_rows(ctx, cache, src_w, pos), "ne[0] differ (8 vs 4)");
    EXPECT_FAIL(tg_set_rows(ctx, cache, src_h, pos), "dims 2 and 3 differ");
    EXPECT_FAIL(tg_set_rows(ctx, cache, src, pos_bad), "set_rows: src 'new' [8,3,2] and ids 'pos2'");
    tg_tensor *cache_t = tg_permute(S, mk(TG_F32, 16, 8, 2, 1, "kvT"), 1, 0, 2, 3);
    EXPECT_FAIL(tg_set_rows(ctx, cache_t, src, pos), "dim 0 is strided");

    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *r;
    EXPECT_OK(r, tg_get_rows(ctx, a, ids));
    CHECK(has_shape(r, 8, 3, 2, 1) && r->type == TG_F32 && r->op == TG_OP_GET_ROWS);
    CHECK(r->src[0] == a && r->src[1] == ids && r->src[2] == NULL);
    EXPECT_OK(r, tg_get_rows(ctx, cache, ids));
    CHECK(r->type == TG_F32);
    EXPECT_OK(r, tg_set_rows(ctx, cache, src, pos));
    CHECK(r->op == TG_OP_SET_ROWS && r->view_src == cache && r->type == TG_F16);
    CHECK(r->src[0] == src && r->src[1] == pos && tg_same_shape(r, cache));
    tg_ctx_free(ctx);
}

static void test_binary_errors(void) {
    tg_tensor *a = mk(TG_F32, 4, 3, 2, 1, "a");
    tg_tensor *h = mk(TG_F16, 4, 3, 2, 1, "h");
    tg_tensor *i = mk(TG_I32, 4, 3, 2, 1, "i");
    tg_tensor *bad = mk(TG_F32, 4, 2, 2, 1, "b");
    tg_tensor *row = mk(TG_F32, 4, 1, 1, 1, "row");
    tg_tensor *col = mk(TG_F32, 1, 3, 2, 1, "col");
    tg_tensor *(*fns[4])(tg_ctx *, tg_tensor *, tg_tensor *) = {tg_add, tg_sub, tg_mul, tg_div};
    const char *names[4] = {"add", "sub", "mul", "div"};
    const tg_op ops[4] = {TG_OP_ADD, TG_OP_SUB, TG_OP_MUL, TG_OP_DIV};
    for (int k = 0; k < 4; k++) {
        char needle[128];
        snprintf(needle, sizeof needle, "%s: a 'h' [4,3,2] has type f16; expected f32", names[k]);
        EXPECT_FAIL(fns[k](ctx, h, a), needle);
        snprintf(needle, sizeof needle, "%s: b 'i' [4,3,2] has type i32", names[k]);
        EXPECT_FAIL(fns[k](ctx, a, i), needle);
        snprintf(needle, sizeof needle,
                 "%s: a 'a' [4,3,2] and b 'b' [4,2,2]: ne[1] differ (3 vs 2) and neither is 1",
                 names[k]);
        EXPECT_FAIL(fns[k](ctx, a, bad), needle);
        tg_ctx *ctx = tg_ctx_new();
        tg_tensor *r;
        EXPECT_OK(r, fns[k](ctx, a, row));
        CHECK(has_shape(r, 4, 3, 2, 1) && r->op == ops[k] && r->src[0] == a && r->src[1] == row);
        /* broadcasting both ways: [4,1,1] with [1,3,2] is [4,3,2] */
        EXPECT_OK(r, fns[k](ctx, row, col));
        CHECK(has_shape(r, 4, 3, 2, 1));
        tg_ctx_free(ctx);
    }
}

static void test_unary_errors(void) {
    tg_tensor *a = mk(TG_F32, 6, 3, 1, 1, "a");
    tg_tensor *h = mk(TG_BF16, 6, 3, 1, 1, "h");
    tg_tensor *odd = mk(TG_F32, 5, 3, 1, 1, "odd");
    EXPECT_FAIL(tg_scale(ctx, h, 2.0f), "scale: a 'h' [6,3] has type bf16");
    EXPECT_FAIL(tg_relu(ctx, h), "relu: a 'h'");
    EXPECT_FAIL(tg_silu(ctx, h), "silu: a 'h'");
    EXPECT_FAIL(tg_sigmoid(ctx, h), "sigmoid: a 'h'");
    EXPECT_FAIL(tg_ln(ctx, h), "log: a 'h'");
    EXPECT_FAIL(tg_sqrt(ctx, h), "sqrt: a 'h'");
    EXPECT_FAIL(tg_glu(ctx, h), "glu: a 'h'");
    EXPECT_FAIL(tg_glu(ctx, odd), "glu: a 'odd' [5,3]: ne[0] = 5 is odd");
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *r;
    EXPECT_OK(r, tg_scale(ctx, a, 0.125f));
    CHECK(r->op == TG_OP_SCALE && tg_param_f32(r, 0) == 0.125f && tg_same_shape(r, a));
    EXPECT_OK(r, tg_glu(ctx, a));
    CHECK(has_shape(r, 3, 3, 1, 1) && r->op == TG_OP_GLU && r->src[0] == a);
    EXPECT_OK(r, tg_silu(ctx, a));
    CHECK(r->op == TG_OP_SILU);
    EXPECT_OK(r, tg_sigmoid(ctx, a));
    CHECK(r->op == TG_OP_SIGMOID);
    EXPECT_OK(r, tg_relu(ctx, a));
    CHECK(r->op == TG_OP_RELU);
    EXPECT_OK(r, tg_ln(ctx, a));
    CHECK(r->op == TG_OP_LOG && tg_same_shape(r, a));
    EXPECT_OK(r, tg_sqrt(ctx, a));
    CHECK(r->op == TG_OP_SQRT && tg_same_shape(r, a));
    tg_ctx_free(ctx);
}

static void test_mul_mat_errors(void) {
    tg_tensor *w = mk(TG_F16, 16, 8, 2, 1, "w");
    tg_tensor *wi = mk(TG_I32, 16, 8, 1, 1, "wi");
    tg_tensor *x = mk(TG_F32, 16, 5, 6, 1, "x");
    tg_tensor *xh = mk(TG_F16, 16, 5, 6, 1, "xh");
    tg_tensor *x3 = mk(TG_F32, 16, 5, 3, 1, "x3");
    EXPECT_FAIL(tg_mul_mat(ctx, wi, x), "mul_mat: a 'wi' [16,8] has type i32");
    EXPECT_FAIL(tg_mul_mat(ctx, w, xh), "mul_mat: b 'xh' [16,5,6] has type f16; expected f32");
    EXPECT_FAIL(tg_mul_mat(ctx, w, x3),
                "mul_mat: a 'w' [16,8,2] and b 'x3' [16,5,3]: b.ne[2] = 3 is not a multiple "
                "of a.ne[2] = 2");
    tg_tensor *xt = tg_transpose(S, mk(TG_F32, 5, 16, 1, 1, "xT"));
    tg_tensor *w2 = mk(TG_F32, 16, 8, 1, 1, "w2");
    EXPECT_FAIL(tg_mul_mat(ctx, w2, xt), "mul_mat: b 'xT (permute)' [16,5]: dim 0 is strided");
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *r = tg_relu(ctx, x);
    CHECK(tg_set_prec(r, TG_PREC_F32) == r && tg_node_prec(r) == TG_PREC_DEFAULT);
    CHECK_ERR(tg_ctx_check(ctx), TG_ERR_INVALID_ARG, "set_prec: node #0 [16,5,6]: op is relu");
    tg_ctx_free(ctx);
    ctx = tg_ctx_new();
    EXPECT_OK(r, tg_mul_mat(ctx, w, x));
    CHECK(has_shape(r, 8, 5, 6, 1) && r->type == TG_F32 && r->op == TG_OP_MUL_MAT);
    CHECK(r->src[0] == w && r->src[1] == x && tg_node_prec(r) == TG_PREC_DEFAULT);
    CHECK(tg_set_prec(r, TG_PREC_F32) == r && tg_node_prec(r) == TG_PREC_F32);
    CHECK(r->op_params[TG_P_PREC] == TG_PREC_F32);
    CHECK_OK(tg_ctx_check(ctx));
    CHECK(tg_set_prec(r, (tg_prec)7) == r);
    CHECK_ERR(tg_ctx_check(ctx), TG_ERR_INVALID_ARG, "bad precision 7");
    tg_ctx_free(ctx);
    /* tf32 is a conv_2d's request only */
    ctx = tg_ctx_new();
    EXPECT_OK(r, tg_mul_mat(ctx, w, x));
    CHECK(tg_set_prec(r, TG_PREC_TF32) == r && tg_node_prec(r) == TG_PREC_DEFAULT);
    CHECK_ERR(tg_ctx_check(ctx), TG_ERR_INVALID_ARG, "bad precision 2 for mul_mat");
    tg_ctx_free(ctx);
    ctx = tg_ctx_new();
    tg_tensor *c = tg_conv_2d(ctx, mk(TG_F32, 1, 1, 6, 4, "k"), mk(TG_F32, 16, 5, 6, 1, "img"), 1, 1, 0, 0);
    CHECK(c && tg_node_prec(c) == TG_PREC_DEFAULT);
    CHECK(tg_set_prec(c, TG_PREC_TF32) == c && tg_node_prec(c) == TG_PREC_TF32);
    CHECK_OK(tg_ctx_check(ctx));
    tg_ctx_free(ctx);
    CHECK(tg_set_prec(NULL, TG_PREC_F32) == NULL);
}

static void test_conv_errors(void) {
    tg_tensor *k = mk(TG_F32, 3, 3, 4, 8, "k");
    tg_tensor *kh = mk(TG_F16, 3, 3, 4, 8, "kh");
    tg_tensor *in = mk(TG_F32, 10, 12, 4, 2, "in");
    tg_tensor *inh = mk(TG_F16, 10, 12, 4, 2, "inh");
    tg_tensor *in5 = mk(TG_F32, 10, 12, 5, 2, "in5");
    tg_tensor *tiny = mk(TG_F32, 2, 2, 4, 1, "tiny");
    EXPECT_FAIL(tg_conv_2d(ctx, kh, in, 1, 1, 1, 1), "conv_2d: kernel 'kh' [3,3,4,8] has type f16");
    EXPECT_FAIL(tg_conv_2d(ctx, k, inh, 1, 1, 1, 1), "conv_2d: input 'inh'");
    EXPECT_FAIL(tg_conv_2d(ctx, k, in, 0, 1, 1, 1), "bad stride/padding (s0 0");
    EXPECT_FAIL(tg_conv_2d(ctx, k, in, 1, -1, 1, 1), "conv_2d: kernel 'k' [3,3,4,8]: bad stride");
    EXPECT_FAIL(tg_conv_2d(ctx, k, in, 1, 1, -1, 0), "paddings >= 0");
    EXPECT_FAIL(tg_conv_2d(ctx, k, in5, 1, 1, 1, 1),
                "conv_2d: kernel 'k' [3,3,4,8] and input 'in5' [10,12,5,2]: input channels differ");
    EXPECT_FAIL(tg_conv_2d(ctx, k, tiny, 1, 1, 0, 0), "larger than the padded input");

    tg_tensor *kdw = mk(TG_F32, 3, 3, 1, 4, "kdw");
    tg_tensor *kdw_bad = mk(TG_F32, 3, 3, 2, 4, "kdw2");
    tg_tensor *kdw_c = mk(TG_F32, 3, 3, 1, 5, "kdw5");
    EXPECT_FAIL(tg_conv_2d_dw(ctx, kdw_bad, in, 2, 2, 1, 1), "conv_2d_dw: kernel 'kdw2' [3,3,2,4] and input 'in'");
    EXPECT_FAIL(tg_conv_2d_dw(ctx, kdw_c, in, 2, 2, 1, 1), "[KW, KH, 1, C] with C = input ne[2] = 4");
    EXPECT_FAIL(tg_conv_2d_dw(ctx, kh, in, 2, 2, 1, 1), "conv_2d_dw: kernel 'kh'");
    EXPECT_FAIL(tg_conv_2d_dw(ctx, kdw, in, 2, 0, 1, 1), "conv_2d_dw: kernel 'kdw' [3,3,1,4]: bad stride");
    EXPECT_FAIL(tg_conv_2d_dw(ctx, mk(TG_F32, 5, 5, 1, 4, "k5"), tiny, 1, 1, 1, 1), "larger than the padded input");

    tg_tensor *k1 = mk(TG_F32, 9, 16, 1, 1, "k1");
    tg_tensor *k1_3d = mk(TG_F32, 9, 16, 2, 1, "k13");
    tg_tensor *x1 = mk(TG_F32, 16, 20, 2, 1, "x1");
    tg_tensor *x1_4d = mk(TG_F32, 16, 20, 2, 2, "x14");
    tg_tensor *x1_c = mk(TG_F32, 12, 20, 2, 1, "x1c");
    tg_tensor *x1_short = mk(TG_F32, 16, 3, 1, 1, "short");
    EXPECT_FAIL(tg_conv_1d_dw(ctx, k1_3d, x1, 1, 4), "conv_1d_dw: kernel 'k13' [9,16,2]: must be 2-D");
    EXPECT_FAIL(tg_conv_1d_dw(ctx, k1, x1_4d, 1, 4), "conv_1d_dw: input 'x14' [16,20,2,2]: must be 3-D");
    EXPECT_FAIL(tg_conv_1d_dw(ctx, k1, x1_c, 1, 4), "channels differ (kernel ne[1] = 16, input ne[0] = 12)");
    EXPECT_FAIL(tg_conv_1d_dw(ctx, k1, x1_short, 1, 2), "longer than the padded input");
    EXPECT_FAIL(tg_conv_1d_dw(ctx, k1, x1, 0, 4), "conv_1d_dw: kernel 'k1' [9,16]: bad stride");
    EXPECT_FAIL(tg_conv_1d_dw(ctx, k1, x1, 1, -4), "bad stride/padding");
    EXPECT_FAIL(tg_conv_1d_dw(ctx, mk(TG_F16, 9, 16, 1, 1, "k1h"), x1, 1, 4), "conv_1d_dw: kernel 'k1h'");
    EXPECT_FAIL(tg_conv_1d_dw(ctx, k1, mk(TG_I32, 16, 20, 2, 1, "x1i"), 1, 4), "conv_1d_dw: input 'x1i'");

    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *r;
    EXPECT_OK(r, tg_conv_2d(ctx, k, in, 2, 1, 1, 0));
    /* OW = (10 + 2 - 3)/2 + 1 = 5, OH = (12 + 0 - 3)/1 + 1 = 10 */
    CHECK(has_shape(r, 5, 10, 8, 2) && r->op == TG_OP_CONV_2D && r->src[0] == k && r->src[1] == in);
    CHECK(r->op_params[0] == 2 && r->op_params[1] == 1 && r->op_params[2] == 1 && r->op_params[3] == 0);
    EXPECT_OK(r, tg_conv_2d_dw(ctx, kdw, in, 2, 2, 1, 1));
    CHECK(has_shape(r, 5, 6, 4, 2) && r->op == TG_OP_CONV_2D_DW);
    EXPECT_OK(r, tg_conv_1d_dw(ctx, k1, x1, 1, 4));
    CHECK(has_shape(r, 16, 20, 2, 1) && r->op == TG_OP_CONV_1D_DW);
    CHECK(r->op_params[0] == 1 && r->op_params[1] == 4);
    EXPECT_OK(r, tg_conv_1d_dw(ctx, k1, x1, 2, 0));
    CHECK(has_shape(r, 16, 6, 2, 1)); /* (20 - 9)/2 + 1 */
    tg_ctx_free(ctx);
}

static void test_norm_softmax_errors(void) {
    tg_tensor *a = mk(TG_F32, 8, 4, 2, 1, "a");
    tg_tensor *ah = mk(TG_F16, 8, 4, 2, 1, "ah");
    tg_tensor *w = mk(TG_F32, 8, 1, 1, 1, "w");
    tg_tensor *wh = mk(TG_F16, 8, 1, 1, 1, "wh");
    tg_tensor *w7 = mk(TG_F32, 7, 1, 1, 1, "w7");
    tg_tensor *w82 = mk(TG_F32, 8, 2, 1, 1, "w82");
    EXPECT_FAIL(tg_layer_norm(ctx, ah, w, w, 1e-5f), "layer_norm: a 'ah'");
    EXPECT_FAIL(tg_layer_norm(ctx, a, wh, w, 1e-5f), "layer_norm: w 'wh' [8] has type f16");
    EXPECT_FAIL(tg_layer_norm(ctx, a, w7, w, 1e-5f), "layer_norm: a 'a' [8,4,2] and w 'w7' [7]: w must be a vector of a.ne[0] = 8");
    EXPECT_FAIL(tg_layer_norm(ctx, a, w, w82, 1e-5f), "and b 'w82' [8,2]");
    EXPECT_FAIL(tg_layer_norm(ctx, a, w, w, -1.0f), "eps -1 must be finite");
    EXPECT_FAIL(tg_layer_norm(ctx, a, NULL, NULL, NAN), "eps nan");
    EXPECT_FAIL(tg_layer_norm(ctx, a, NULL, NULL, INFINITY), "must be finite");

    tg_tensor *m = mk(TG_F32, 8, 4, 1, 1, "m");
    tg_tensor *mh = mk(TG_F16, 8, 4, 1, 1, "mh");
    tg_tensor *m_bad = mk(TG_F32, 8, 3, 1, 1, "m3");
    tg_tensor *m_bad2 = mk(TG_F32, 8, 4, 3, 1, "m43");
    EXPECT_FAIL(tg_soft_max(ctx, ah, m, 1.0f), "soft_max: a 'ah'");
    EXPECT_FAIL(tg_soft_max(ctx, a, mh, 1.0f), "soft_max: mask 'mh'");
    EXPECT_FAIL(tg_soft_max(ctx, a, m_bad, 1.0f), "soft_max: a 'a' [8,4,2] and mask 'm3' [8,3]");
    EXPECT_FAIL(tg_soft_max(ctx, a, m_bad2, 1.0f), "mask must match a");

    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *r;
    EXPECT_OK(r, tg_layer_norm(ctx, a, w, NULL, 1e-5f));
    CHECK(r->op == TG_OP_LAYER_NORM && r->src[0] == a && r->src[1] == w && r->src[2] == NULL);
    CHECK(tg_param_f32(r, 0) == 1e-5f && tg_same_shape(r, a));
    EXPECT_OK(r, tg_layer_norm(ctx, a, NULL, w, 0.0f));
    CHECK(r->src[1] == NULL && r->src[2] == w);
    EXPECT_OK(r, tg_soft_max(ctx, a, m, 0.5f));
    CHECK(r->op == TG_OP_SOFT_MAX && r->src[1] == m && tg_param_f32(r, 0) == 0.5f);
    EXPECT_OK(r, tg_soft_max(ctx, a, NULL, 1.0f));
    CHECK(r->src[1] == NULL);
    tg_ctx_free(ctx);
}

static void test_attention_errors(void) {
    /* q [D, Tq, H, B], k [D, Tk, H, B], v [Dv, Tk, H, B] */
    tg_tensor *q = mk(TG_F32, 16, 5, 4, 2, "q");
    tg_tensor *k = mk(TG_F16, 16, 7, 4, 2, "k");
    tg_tensor *v = mk(TG_F32, 12, 7, 4, 2, "v");
    EXPECT_FAIL(tg_attention(ctx, mk(TG_F16, 16, 5, 4, 2, "qh"), k, v, NULL, 1), "attention: q 'qh'");
    EXPECT_FAIL(tg_attention(ctx, q, mk(TG_I32, 16, 7, 4, 2, "ki"), v, NULL, 1), "attention: k 'ki' [16,7,4,2] has type i32; expected f32 or f16");
    EXPECT_FAIL(tg_attention(ctx, q, k, mk(TG_I64, 12, 7, 4, 2, "vl"), NULL, 1), "attention: v 'vl'");
    EXPECT_FAIL(tg_attention(ctx, q, mk(TG_F32, 8, 7, 4, 2, "k8"), v, NULL, 1), "attention: q 'q' [16,5,4,2] and k 'k8' [8,7,4,2]: head sizes");
    EXPECT_FAIL(tg_attention(ctx, q, mk(TG_F32, 16, 7, 2, 2, "kh2"), v, NULL, 1), "heads or batch");
    EXPECT_FAIL(tg_attention(ctx, q, k, mk(TG_F32, 12, 6, 4, 2, "v6"), NULL, 1), "attention: k 'k' [16,7,4,2] and v 'v6'");
    tg_tensor *mask = mk(TG_F32, 7, 5, 1, 1, "mask");
    EXPECT_FAIL(tg_attention(ctx, q, k, v, mk(TG_F16, 7, 5, 1, 1, "maskh"), 1), "attention: mask 'maskh'");
    EXPECT_FAIL(tg_attention(ctx, q, k, v, mk(TG_F32, 5, 7, 1, 1, "maskT"), 1), "mask must be [Tk, Tq, H or 1, B or 1] = [7,5,4|1,2|1]");
    EXPECT_FAIL(tg_attention(ctx, q, k, v, mk(TG_F32, 7, 5, 3, 1, "maskH3"), 1), "mask 'maskH3'");
    tg_tensor *qt = tg_permute(S, mk(TG_F32, 5, 16, 4, 2, "qT"), 1, 0, 2, 3);
    EXPECT_FAIL(tg_attention(ctx, qt, k, v, NULL, 1), "dim 0 is strided");

    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *r;
    EXPECT_OK(r, tg_attention(ctx, q, k, v, mask, 0.25f));
    CHECK(has_shape(r, 12, 4, 5, 2) && r->type == TG_F32 && r->op == TG_OP_ATTENTION);
    CHECK(r->src[0] == q && r->src[1] == k && r->src[2] == v && r->src[3] == mask);
    CHECK(tg_param_f32(r, 0) == 0.25f);
    CHECK(tg_node_prec(tg_set_prec(r, TG_PREC_F32)) == TG_PREC_F32);
    EXPECT_OK(r, tg_attention(ctx, q, k, v, mk(TG_F32, 7, 5, 4, 2, "maskfull"), 1));
    tg_ctx_free(ctx);
}

static void test_copy_concat_pad_errors(void) {
    tg_tensor *a = mk(TG_F32, 4, 3, 1, 1, "a");
    tg_tensor *b12 = mk(TG_F16, 12, 1, 1, 1, "b12");
    tg_tensor *b10 = mk(TG_F16, 10, 1, 1, 1, "b10");
    EXPECT_FAIL(tg_cpy(ctx, a, b10), "cpy: a 'a' [4,3] and b 'b10' [10]: element counts differ (12 vs 10)");
    EXPECT_FAIL(tg_cast(ctx, a, TG_TYPE_COUNT), "cast: a 'a' [4,3]: bad target type");

    tg_tensor *ai = mk(TG_I32, 4, 3, 1, 1, "ai");
    tg_tensor *ab = mk(TG_BF16, 4, 3, 1, 1, "ab");
    tg_tensor *a5 = mk(TG_F32, 4, 5, 1, 1, "a5");
    EXPECT_FAIL(tg_concat(ctx, ab, ab, 0), "concat: a 'ab' [4,3] has type bf16; expected f32 or i32");
    EXPECT_FAIL(tg_concat(ctx, a, ai, 0), "concat: a 'a' [4,3] and b 'ai' [4,3]: types differ (f32 vs i32)");
    EXPECT_FAIL(tg_concat(ctx, a, a, 4), "dim 4 not in 0..3");
    EXPECT_FAIL(tg_concat(ctx, a, a, -1), "dim -1 not in 0..3");
    EXPECT_FAIL(tg_concat(ctx, a, a5, 0), "ne[1] differ (3 vs 5); only dim 0 may");

    int lo[4] = {1, 0, 0, 0}, hi[4] = {0, 2, 0, 0}, neg[4] = {0, -1, 0, 0};
    EXPECT_FAIL(tg_pad(ctx, a, neg, hi), "pad: a 'a' [4,3]: negative padding -1/2 in dim 1");
    EXPECT_FAIL(tg_pad(ctx, a, lo, neg), "negative padding");
    EXPECT_FAIL(tg_pad(ctx, ai, lo, hi), "pad: a 'ai'");

    EXPECT_FAIL(tg_argmax(ctx, ai), "argmax: a 'ai'");
    EXPECT_FAIL(tg_argmax(ctx, mk(TG_F32, 0, 3, 1, 1, "empty")), "argmax: a 'empty' [0,3]: dim 0 is empty");
    EXPECT_FAIL(tg_sum_rows(ctx, ab), "sum_rows: a 'ab'");
    EXPECT_FAIL(tg_mean(ctx, ab), "mean: a 'ab'");

    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *r;
    EXPECT_OK(r, tg_cpy(ctx, a, b12));
    CHECK(r->op == TG_OP_CPY && r->view_src == b12 && r->src[0] == a && r->src[1] == b12);
    CHECK(r->type == TG_F16 && tg_same_shape(r, b12));
    /* into a view (the KV cache pattern) */
    tg_tensor *big = mk(TG_F16, 24, 1, 1, 1, "big");
    tg_tensor *half = tg_view_1d(ctx, big, 12, 24);
    EXPECT_OK(r, tg_cpy(ctx, a, half));
    CHECK(r->view_src == half && r->type == TG_F16 && r->ne[0] == 12);
    EXPECT_OK(r, tg_cast(ctx, a, TG_BF16));
    CHECK(r->op == TG_OP_CPY && r->type == TG_BF16 && r->src[1] == NULL && r->view_src == NULL);
    CHECK(tg_same_shape(r, a) && tg_is_contiguous(r));
    EXPECT_OK(r, tg_cont(ctx, tg_transpose(ctx, a)));
    CHECK(has_shape(r, 3, 4, 1, 1) && r->type == TG_F32 && tg_is_contiguous(r));
    EXPECT_OK(r, tg_concat(ctx, a, a5, 1));
    CHECK(has_shape(r, 4, 8, 1, 1) && r->op_params[0] == 1 && r->src[1] == a5);
    EXPECT_OK(r, tg_concat(ctx, ai, ai, 3));
    CHECK(has_shape(r, 4, 3, 1, 2) && r->type == TG_I32);
    EXPECT_OK(r, tg_pad(ctx, a, lo, hi));
    CHECK(has_shape(r, 5, 5, 1, 1) && r->op_params[0] == 1 && r->op_params[5] == 2);
    CHECK(r->op_params[4] == 0 && r->op_params[1] == 0);
    EXPECT_OK(r, tg_argmax(ctx, mk(TG_F32, 10, 3, 2, 1, "logits")));
    CHECK(has_shape(r, 3, 2, 1, 1) && r->type == TG_I32 && r->op == TG_OP_ARGMAX);
    EXPECT_OK(r, tg_sum_rows(ctx, a));
    CHECK(has_shape(r, 1, 3, 1, 1) && r->op == TG_OP_SUM_ROWS);
    EXPECT_OK(r, tg_mean(ctx, a));
    CHECK(has_shape(r, 1, 3, 1, 1) && r->op == TG_OP_MEAN);
    tg_ctx_free(ctx);
}

static void test_null_propagates_silently(void) {
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *a = mk(TG_F32, 4, 4, 1, 1, "a");
    tg_tensor *i = mk(TG_I32, 4, 1, 1, 1, "i");
    int pads[4] = {0, 0, 0, 0};
    CHECK(tg_get_rows(ctx, NULL, i) == NULL && tg_get_rows(ctx, a, NULL) == NULL);
    CHECK(tg_set_rows(ctx, NULL, a, i) == NULL && tg_set_rows(ctx, a, NULL, i) == NULL);
    CHECK(tg_set_rows(ctx, a, a, NULL) == NULL);
    CHECK(tg_add(ctx, NULL, a) == NULL && tg_sub(ctx, a, NULL) == NULL);
    CHECK(tg_mul(ctx, NULL, NULL) == NULL && tg_div(ctx, a, NULL) == NULL);
    CHECK(tg_scale(ctx, NULL, 2) == NULL && tg_relu(ctx, NULL) == NULL);
    CHECK(tg_silu(ctx, NULL) == NULL && tg_sigmoid(ctx, NULL) == NULL && tg_glu(ctx, NULL) == NULL);
    CHECK(tg_ln(ctx, NULL) == NULL && tg_sqrt(ctx, NULL) == NULL);
    CHECK(tg_mul_mat(ctx, NULL, a) == NULL && tg_mul_mat(ctx, a, NULL) == NULL);
    CHECK(tg_conv_2d(ctx, NULL, a, 1, 1, 0, 0) == NULL && tg_conv_2d(ctx, a, NULL, 1, 1, 0, 0) == NULL);
    CHECK(tg_conv_2d_dw(ctx, NULL, a, 1, 1, 0, 0) == NULL);
    CHECK(tg_conv_1d_dw(ctx, a, NULL, 1, 0) == NULL);
    CHECK(tg_layer_norm(ctx, NULL, a, a, 1e-5f) == NULL);
    CHECK(tg_soft_max(ctx, NULL, a, 1) == NULL);
    CHECK(tg_attention(ctx, NULL, a, a, NULL, 1) == NULL && tg_attention(ctx, a, NULL, a, NULL, 1) == NULL);
    CHECK(tg_attention(ctx, a, a, NULL, NULL, 1) == NULL);
    CHECK(tg_cpy(ctx, NULL, a) == NULL && tg_cpy(ctx, a, NULL) == NULL);
    CHECK(tg_cast(ctx, NULL, TG_F16) == NULL && tg_cont(ctx, NULL) == NULL);
    CHECK(tg_concat(ctx, NULL, a, 0) == NULL && tg_pad(ctx, NULL, pads, pads) == NULL);
    CHECK(tg_argmax(ctx, NULL) == NULL && tg_sum_rows(ctx, NULL) == NULL && tg_mean(ctx, NULL) == NULL);
    CHECK_OK(tg_ctx_check(ctx));
    CHECK(tg_ctx_n_tensors(ctx) == 0);
    /* a chain after a failure stays NULL and keeps the first message */
    tg_tensor *bad = tg_glu(ctx, mk(TG_F32, 3, 1, 1, 1, "odd"));
    tg_tensor *y = tg_scale(ctx, tg_relu(ctx, bad), 2.0f);
    CHECK(bad == NULL && y == NULL);
    CHECK_ERR(tg_ctx_check(ctx), TG_ERR_INVALID_ARG, "glu: a 'odd'");
    /* a NULL context is refused without a crash */
    CHECK(tg_add(NULL, a, a) == NULL);
    tg_ctx_free(ctx);
}

static void test_first_error_is_sticky(void) {
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *a = mk(TG_F32, 4, 3, 1, 1, "first");
    tg_tensor *b = mk(TG_F32, 5, 3, 1, 1, "second");
    CHECK(tg_add(ctx, a, b) == NULL);
    CHECK(tg_glu(ctx, b) == NULL); /* a second, different error */
    tg_tensor *ok = tg_relu(ctx, a); /* later good calls still work */
    CHECK(ok != NULL);
    tg_status st = tg_ctx_check(ctx);
    CHECK(st && strstr(tg_status_message(st), "add: a 'first'") != NULL);
    CHECK(st && strstr(tg_status_message(st), "glu") == NULL);
    tg_status_free(st);
    /* checking does not clear it */
    CHECK_ERR(tg_ctx_check(ctx), TG_ERR_INVALID_ARG, "add: a 'first' [4,3] and b 'second' [5,3]");
    tg_ctx_free(ctx);
}

static void test_sources_were_valid(void) {
    CHECK_OK(tg_ctx_check(S)); /* the refusals above came from the ops alone */
    tg_ctx_free(S);
    S = NULL;
}

TEST_MAIN(T(test_message_names_op_tensors_shapes), T(test_rows_errors),
          T(test_binary_errors), T(test_unary_errors), T(test_mul_mat_errors),
          T(test_conv_errors), T(test_norm_softmax_errors), T(test_attention_errors),
          T(test_copy_concat_pad_errors), T(test_null_propagates_silently),
          T(test_first_error_is_sticky), T(test_sources_were_valid))
