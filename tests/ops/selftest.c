/*
 * selftest.c: proof that the conformance harness can fail.
 *
 * A suite that only ever passes proves nothing, so this runs one small add
 * case through a wrapper of the CPU backend that misbehaves on purpose after
 * the real compute: it writes NaN into the output, nudges one value, writes a
 * byte just past or just before the output, scribbles on an input, computes
 * nothing at all, or reports the op as unsupported. Each must come out failed
 * (with the matching reason) or skipped, and the honest wrapper must pass. The
 * wrapper is the CPU backend itself with its function table swapped for the
 * duration (a copy with a few entries replaced), which is why this file reads
 * backend_impl.h; it needs host-visible buffers, which the CPU backend's are.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend_impl.h"
#include "ops_test.h"

typedef enum mode {
    M_HONEST,
    M_UNSUPPORTED,
    M_NAN,
    M_WRONG,
    M_OVERRUN,
    M_UNDERRUN,
    M_INPUT,
    M_NOTHING,
    M_COUNT,
} mode;

static const struct tg_backend_iface *real_iface;
static mode cur_mode;

static bool fake_supports(tg_backend *b, const tg_tensor *node) {
    return cur_mode != M_UNSUPPORTED && real_iface->supports_op(b, node);
}

static tg_status fake_compute(tg_backend *b, tg_graph *g) {
    if (cur_mode == M_NOTHING) return NULL;
    tg_status st = real_iface->graph_compute(b, g);
    if (!st && real_iface->synchronize) st = real_iface->synchronize(b);
    if (st || g->n_nodes == 0) return st;
    tg_tensor *out = g->nodes[g->n_nodes - 1];
    if (!out->buffer || !out->buffer->host || out->type != TG_F32)
        return tg_status_new(TG_ERR_INTERNAL, "selftest: output not in host memory");
    float *d = out->data;
    uint8_t *bytes = out->data;
    switch (cur_mode) {
    case M_NAN: d[tg_nelements(out) / 2] = NAN; break;
    case M_WRONG: d[0] += 0.05f + 0.05f * fabsf(d[0]); break;
    case M_OVERRUN: bytes[tg_nbytes(out)] ^= 0x5a; break;
    case M_UNDERRUN: bytes[-1] ^= 0x01; break;
    case M_INPUT: ((uint8_t *)out->src[0]->data)[3] ^= 0x40; break;
    default: break;
    }
    return NULL;
}

static tg_tensor *build_add(case_env *e, const case_params *p) {
    tg_tensor *a = env_input(e, TG_F32, p->ne[0], L_CONT, fill_u(-1, 1));
    tg_tensor *b = env_input(e, TG_F32, p->ne[0], L_CONT, fill_u(-1, 1));
    return tg_add(env_ctx(e), a, b);
}

int selftest_run(tg_backend *cpu, bool verbose, int *out_checks) {
    static const struct {
        mode m;
        case_result want;
        const char *needle; /* expected in the message */
        const char *what;
    } checks[] = {
        {M_HONEST, RES_PASS, NULL, "an honest backend passes"},
        {M_UNSUPPORTED, RES_SKIP, "not supported", "an unsupported op is skipped, not passed"},
        {M_NAN, RES_FAIL, "non-finite", "a NaN in the output fails"},
        {M_WRONG, RES_FAIL, "NMSE", "one wrong value fails the NMSE limit"},
        {M_OVERRUN, RES_FAIL, "overrun", "a byte written past the output fails"},
        {M_UNDERRUN, RES_FAIL, "overrun", "a byte written before the output fails"},
        {M_INPUT, RES_FAIL, "modified", "a changed input fails"},
        {M_NOTHING, RES_FAIL, "non-finite", "an output never written fails"},
    };
    struct tg_backend_iface iface = *cpu->iface;
    iface.supports_op = fake_supports;
    iface.graph_compute = fake_compute;
    iface.synchronize = NULL;
    /* the CPU backend may embed its tg_backend in a larger struct, so the
     * table is swapped in place (and restored below) rather than copied */
    real_iface = cpu->iface;
    cpu->iface = &iface;

    op_case c;
    memset(&c, 0, sizeof c);
    c.op = TG_OP_ADD;
    c.limit = LIM_ELEM;
    c.build = build_add;
    c.p = cp_new();
    cp_ne(&c.p, 0, 33, 5, 1, 1);
    snprintf(c.name, sizeof c.name, "selftest add [33,5]");

    int failures = 0, n = (int)(sizeof checks / sizeof checks[0]);
    for (int i = 0; i < n; i++) {
        cur_mode = checks[i].m;
        case_outcome o;
        run_case(cpu, &c, 42, &o);
        bool ok = o.res == checks[i].want && (!checks[i].needle || strstr(o.msg, checks[i].needle));
        if (!ok) failures++;
        if (!ok || verbose)
            printf("%s selftest: %s%s%s\n", ok ? "ok  " : "FAIL", checks[i].what, o.msg[0] ? ": " : "",
                   o.msg);
    }
    cpu->iface = real_iface;
    *out_checks = n;
    return failures;
}
