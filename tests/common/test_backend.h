/*
 * test_backend.h: a fake backend for tests of the runtime core (scheduler,
 * data transfer), independent of the real CPU and CUDA backends.
 *
 * Its buffers are plain host memory, but can claim not to be (host = false)
 * so that the runtime must treat them as device memory and copy through the
 * buffer functions. It supports only the ops in its mask and computes a few
 * of them itself in plain C (add, sub, mul, div, scale, relu, cpy between f32
 * tensors, mul_mat f32, sum_rows), strided and with broadcasting. It refuses
 * (TG_ERR_INTERNAL) a graph in which any tensor it would touch lives in
 * another backend's buffer, which is how tests catch a missing copy.
 */
#ifndef TEST_BACKEND_H
#define TEST_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "tg.h"

#define TEST_OP(op) (1ull << (op))
/* Every op the fake computes. */
#define TEST_OPS_ALL                                                                    \
    (TEST_OP(TG_OP_ADD) | TEST_OP(TG_OP_SUB) | TEST_OP(TG_OP_MUL) | TEST_OP(TG_OP_DIV) | \
     TEST_OP(TG_OP_SCALE) | TEST_OP(TG_OP_RELU) | TEST_OP(TG_OP_CPY) |                  \
     TEST_OP(TG_OP_MUL_MAT) | TEST_OP(TG_OP_SUM_ROWS))

/* A new fake backend; free with tg_backend_free. `name` is copied. */
tg_backend *test_backend_new(const char *name, bool is_cpu, bool host_buffers,
                             uint64_t op_mask);
/* A device-like fake whose graph_compute only records the nodes (with the
 * sources they have at that moment) and whose synchronize runs them, as a
 * GPU stream would: reading results before synchronizing sees stale data.
 * Free with tg_backend_free. */
tg_backend *test_backend_new_deferred(const char *name, uint64_t op_mask);
/* Counters since creation. */
int test_backend_n_computes(const tg_backend *b);   /* graph_compute calls   */
int test_backend_n_nodes(const tg_backend *b);      /* nodes computed        */
int test_backend_n_buffers(const tg_backend *b);    /* buffers alive now     */

#endif
