/*
 * planner.h: the memory planner (internal).
 *
 * Two levels. tg_plan_items is the allocator itself: given blocks with a size
 * and a lifetime in steps (produced at `first`, last read at `last`), it gives
 * each an offset in one arena so that blocks alive at the same time never
 * overlap, and reports the arena's peak size. At each step the blocks produced
 * there are placed before the blocks whose last reader ran there are freed, so
 * a node's output never lands on its own inputs. Placement is best fit in a
 * free list kept sorted and coalesced; a block that fits nowhere extends the
 * arena (growing a free block that touches its end first).
 *
 * tg_plan_graph derives the lifetimes from a graph on one backend (the
 * scheduler does the same for each backend's share, with the copies it
 * inserts): a node's storage is produced at its step and lives until the last
 * node reading it or any view of it (views and in-place writers read their
 * root), or through a fused product's chain (tg_plan_fused_product); outputs
 * and inputs live to the end.
 */
#ifndef TG_PLANNER_H
#define TG_PLANNER_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "tg.h"

#define TG_PLAN_KEEP INT_MAX /* `last` of a block that lives to the end */

typedef struct tg_plan_item {
    size_t size;   /* bytes (rounded up to the alignment; 0 counts as 1) */
    int first;     /* step that produces it */
    int last;      /* last step that reads it (>= first), or TG_PLAN_KEEP */
    size_t offset; /* out: byte offset in the arena, a multiple of the alignment */
} tg_plan_item;

/* Assigns items[i].offset for all n items and sets *out_peak to the arena
 * size needed. alignment: a power of two. */
tg_status tg_plan_items(tg_plan_item *items, int n, size_t alignment, size_t *out_peak);

/* The result of planning a graph: the tensors that own planned storage and
 * their offsets. Free with tg_plan_free. */
typedef struct tg_plan {
    tg_tensor **tensors;
    size_t *offsets;
    int n;
    size_t peak;
} tg_plan;

/* Plans every tensor of g that needs storage: leafs without data (inputs, kept
 * to the end) and nodes that own storage (no view_src) and have no buffer of
 * their own yet (a tensor placed by the scheduler counts as not placed). Step
 * i+1 is g's node i. Assigns nothing to the tensors. */
tg_status tg_plan_graph(const tg_graph *g, size_t alignment, tg_plan *out_plan);
void tg_plan_free(tg_plan *plan);
/* The offset planned for t, or SIZE_MAX when t is not in the plan. */
size_t tg_plan_offset(const tg_plan *plan, const tg_tensor *t);

/* A backend may run a matrix product (or a depthwise 1-D conv) together
 * with the nodes after it that read it in a chain (a bias add and a relu
 * in the product's epilogue), so that the product's result is never stored
 * and the chain's last result is written while the product still reads
 * its inputs. Planning for that, the product's inputs live through every
 * node of such a chain, up to TG_PLAN_FUSE_DEPTH nodes after it: a fused
 * result never lands on them. tg_plan_fused_product gives the index of the
 * product (or conv) whose chain nodes[i] ends (nodes[q + 1] reads nodes[q]
 * for q from the product to i - 1), or -1. The cost: those inputs (a layer
 * norm's output, say) live up to three steps longer. */
#define TG_PLAN_FUSE_DEPTH 3
/* The same for a 2-D conv of one input channel (the subsampling's first,
 * spec 2.1) and up to TG_PLAN_FRONT_DEPTH nodes after it: its bias, mask
 * and relu, a depthwise conv, its bias and mask, which the CUDA backend
 * runs as one launch (sub_conv_dw) that reads the conv's input, the
 * features, while it writes the last result. Without this the features,
 * when a node made them (the frontend in the encoder's graph), are freed
 * after the conv and the chain's results land on them, and the backend
 * must launch the seven apart. The features are C times smaller than the
 * conv's result, so keeping them six steps longer costs little. */
#define TG_PLAN_FRONT_DEPTH 6
int tg_plan_fused_product(tg_tensor *const *nodes, int i);
/* A backend may also compute the node that such a chain's head reads
 * inside the head's launch: a layer norm before a product (the CUDA
 * backend's matvec at a decoder step), a GLU before a depthwise conv (its
 * conv module kernel). That node's input is read while the chain's result
 * is written, so it lives through the chain too. The same holds for a
 * layer norm of the layer norm just before it (the CUDA backend's
 * layer_norm2_w4: the first norm's input is read while the second's result
 * is written). The index of that node for nodes[i] (the head or a node of
 * its chain, or the second norm), or -1. */
int tg_plan_fused_lead(tg_tensor *const *nodes, int i);

/* True when t owns storage the planner must place: not a view or in-place
 * writer, no data placed by the user. */
bool tg_plan_needs_storage(const tg_tensor *t);

#endif
