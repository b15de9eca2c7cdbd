/*
 * hazard.c: the memory-range hazard tracker (see hazard.h).
 *
 * Linear in the number of nodes times the length of the current run: the run
 * keeps its read and write ranges and is cleared at each barrier, as the
 * seed's mem_ranges are. Ranges are conservative: a tensor's span runs from
 * its first to one past its last byte, whatever its strides skip.
 *
 * Not here: exact per-node dependency edges (a run boundary is a full
 * barrier, which is what a stream join gives anyway).
 */
#include "hazard.h"

#include <stdint.h>

#include "base.h"
#include "op_params.h"

typedef struct range {
    uintptr_t lo, hi;
    bool write;
} range;

static bool span(const tg_tensor *t, range *out) {
    if (!t || !t->data) return false;
    size_t bytes = tg_nbytes(t);
    if (bytes == 0) return false;
    out->lo = (uintptr_t)t->data;
    out->hi = out->lo + bytes;
    return true;
}

bool tg_hazard_overlap(const tg_tensor *a, const tg_tensor *b) {
    range x, y;
    if (!span(a, &x) || !span(b, &y)) return false;
    return x.lo < y.hi && y.lo < x.hi;
}

static bool conflicts(const range *run, int n_run, const range *r) {
    for (int i = 0; i < n_run; i++)
        if ((r->write || run[i].write) && r->lo < run[i].hi && run[i].lo < r->hi) return true;
    return false;
}

int tg_hazard_runs(tg_tensor *const *nodes, int n, const uint8_t *cls, int max_run, int *out_run) {
    return tg_hazard_runs_grouped(nodes, n, cls, NULL, NULL, max_run, out_run);
}

/* Most ranges one launch of a group touches: its results, every source. */
#define GROUP_MAX TG_HAZARD_GROUP_MAX
#define MINE_MAX (GROUP_MAX * (TG_MAX_SRC + 1))

int tg_hazard_runs_grouped(tg_tensor *const *nodes, int n, const uint8_t *cls, const int *group,
                           const uint8_t *writes, int max_run, int *out_run) {
    range *run = NULL;
    int n_run = 0, cap = 0, run_id = -1, run_len = 0;
    bool run_exclusive = false, run_alone = false;
    int covered_to = 0; /* nodes before this one belong to an accepted group */
    for (int i = 0; i < n; i++) {
        const tg_tensor *t = nodes[i];
        int len = group ? group[i] : 1;
        if (len == 0 && i < covered_to) {
            out_run[i] = out_run[i - 1]; /* launched with the group before it */
            continue;
        }
        if (len < 1 || len > GROUP_MAX || i + len > n) len = 1; /* refused: a launch of its own */
        covered_to = i + len;
        if (tg_op_is_view(t->op)) {
            out_run[i] = -1;
            continue;
        }
        range mine[MINE_MAX];
        int n_mine = 0;
        if (span(nodes[i + len - 1], &mine[n_mine])) mine[n_mine++].write = true;
        for (int j = i; writes && j < i + len - 1; j++)
            if (writes[j] && span(nodes[j], &mine[n_mine])) mine[n_mine++].write = true;
        for (int j = i; j < i + len; j++)
            for (int s = 0; s < TG_MAX_SRC; s++) {
                const tg_tensor *src = nodes[j]->src[s];
                bool inner = false;
                for (int q = i; q < j; q++) inner = inner || src == nodes[q];
                if (!inner && span(src, &mine[n_mine])) mine[n_mine++].write = false;
            }
        bool excl = cls && cls[i] != TG_HAZARD_FREE, alone = cls && cls[i] == TG_HAZARD_ALONE;
        bool barrier = run_id < 0 || (max_run > 0 && run_len >= max_run) || (excl && run_exclusive) || run_alone ||
                       (alone && run_len > 0);
        for (int k = 0; k < n_mine && !barrier; k++) barrier = conflicts(run, n_run, &mine[k]);
        if (barrier) {
            run_id++;
            n_run = 0;
            run_len = 0;
            run_exclusive = false;
            run_alone = false;
        }
        if (!tg_grow((void **)&run, &cap, n_run + n_mine, sizeof *run)) {
            tg_free(run);
            return -1;
        }
        for (int k = 0; k < n_mine; k++) run[n_run++] = mine[k];
        run_len++;
        run_exclusive = run_exclusive || excl;
        run_alone = run_alone || alone;
        out_run[i] = run_id;
    }
    tg_free(run);
    return run_id + 1;
}
