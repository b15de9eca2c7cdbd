/*
 * hazard.h: which nodes of a graph may run at the same time (internal).
 *
 * The seed's concurrency works from memory ranges: a node may join the
 * current concurrent run unless it reads memory a node of the run writes, or
 * writes memory a node of the run reads or writes; otherwise a barrier starts
 * a new run. This is that tracker, independent of any backend: it looks only
 * at tensor addresses and extents (views included), so a backend turns runs
 * into streams, graph edges or whatever it has.
 *
 * Not here: reordering nodes to make runs longer.
 */
#ifndef TG_HAZARD_H
#define TG_HAZARD_H

#include <stdbool.h>
#include <stdint.h>

#include "tg.h"

/* What a node needs beyond its memory ranges (tg_hazard_runs' `cls`). */
enum {
    TG_HAZARD_FREE = 0,   /* nothing: shares a run with any node it does not conflict with */
    TG_HAZARD_SHARED = 1, /* uses a resource all such nodes share (a scratch area): one per run */
    TG_HAZARD_ALONE = 2,  /* fills the device by itself (a large matrix product): a run of its own */
};

/* Assigns every node of nodes[0..n) to a run (out_run[i], runs numbered from
 * 0 in order; nodes that compute nothing, views and leaves, get -1). Nodes in
 * one run touch no memory another node of the run writes. cls (may be NULL:
 * all TG_HAZARD_FREE) classes each node as above; TG_HAZARD_ALONE implies
 * the SHARED rule too. max_run caps a run's length (<= 0: no cap). Returns
 * the number of runs, or -1 when out of memory. */
int tg_hazard_runs(tg_tensor *const *nodes, int n, const uint8_t *cls, int max_run, int *out_run);

/* The same where a backend launches some runs of nodes as one (fusion):
 * group[i] > 1 at the first node of a group of that many, whose launch
 * writes the group's last result (and the result of every node k of it
 * with writes[k] set: an intermediate the launch still stores because
 * nodes outside the group read it) and reads every source of its nodes
 * that is not one of them; group[i] == 0 for the nodes it covers, which
 * take the first node's run. group NULL: every node is its own launch;
 * writes NULL: only last results. A group longer than TG_HAZARD_GROUP_MAX
 * is modelled as separate launches, so a backend must not fuse one (the
 * CUDA backend's longest: the subsampling's conv0, bias, mask, relu,
 * depthwise conv, bias and mask; then a layer norm, a product, its bias
 * add, two view nodes and the set_rows that writes the product's k and v
 * into a cache). */
#define TG_HAZARD_GROUP_MAX 7
int tg_hazard_runs_grouped(tg_tensor *const *nodes, int n, const uint8_t *cls, const int *group,
                           const uint8_t *writes, int max_run, int *out_run);

/* True when the byte ranges that a and b span in memory overlap (both must
 * have data; views count their own span, not their source's). */
bool tg_hazard_overlap(const tg_tensor *a, const tg_tensor *b);

#endif /* TG_HAZARD_H */
