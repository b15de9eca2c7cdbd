/*
 * op_params.h: where each op keeps its parameters and sources (internal).
 *
 * This is the contract between the op constructors (ops.c) and every backend
 * (cpu, cuda) and the conformance suite: read an op's parameters only through
 * these accessors and indices. Sources not listed are NULL.
 *
 *   op           src[0]  src[1]  src[2]  src[3]   op_params
 *   VIEW         -       -       -       -        (view_src, view_offs)
 *   GET_ROWS     a       ids     -       -
 *   SET_ROWS     src     ids     -       -        node is a view of dst (view_src)
 *   ADD..DIV     a       b       -       -        broadcasting both ways
 *   SCALE        a       -       -       -        f32 [0] = s
 *   MUL_MAT      a (w)   b       -       -        [TG_P_PREC]
 *   CONV_2D      kernel  input   -       -        [0] s0 [1] s1 [2] p0 [3] p1 [TG_P_PREC]
 *   CONV_2D_DW   kernel  input   -       -        [0] s0 [1] s1 [2] p0 [3] p1
 *   CONV_1D_DW   kernel  input   -       -        [0] s  [1] p
 *   LAYER_NORM   a       w|NULL  b|NULL  -        f32 [0] = eps
 *   RELU/SILU/SIGMOID/GLU/LOG/SQRT  a
 *   SOFT_MAX     a       mask|NULL -     -        f32 [0] = scale
 *   ATTENTION    q       k       v       mask|NULL f32 [0] = scale, [TG_P_PREC]
 *   CPY          a       dst|NULL -      -        with dst: node is a view of dst
 *                                                 (tg_cpy); without: a new
 *                                                 contiguous tensor (tg_cast)
 *   CONCAT       a       b       -       -        [0] dim
 *   PAD          a       -       -       -        [0..3] lo, [4..7] hi
 *   ARGMAX/SUM_ROWS/MEAN  a
 *
 * A node whose view_src is set and whose op is not VIEW writes into its view
 * source's storage (CPY into dst, SET_ROWS): the planner allocates nothing for
 * it and keeps the source alive.
 */
#ifndef TG_OP_PARAMS_H
#define TG_OP_PARAMS_H

#include <string.h>

#include "tg.h"

#define TG_P_PREC (TG_MAX_OP_PARAMS - 1)

static inline float tg_param_f32(const tg_tensor *t, int i) {
    float f;
    memcpy(&f, &t->op_params[i], sizeof f);
    return f;
}

static inline void tg_set_param_f32(tg_tensor *t, int i, float f) {
    memcpy(&t->op_params[i], &f, sizeof f);
}

static inline int32_t tg_param_i32(const tg_tensor *t, int i) { return t->op_params[i]; }

static inline tg_prec tg_node_prec(const tg_tensor *t) {
    return (tg_prec)t->op_params[TG_P_PREC];
}

/* True for nodes that compute nothing (views, reshapes, permutes). */
static inline bool tg_op_is_view(tg_op op) { return op == TG_OP_NONE || op == TG_OP_VIEW; }

#endif
