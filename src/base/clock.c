/*
 * clock.c: the monotonic clock every timing in the project reads
 * (milliseconds, as a double): the session's per-stage times, the backends'
 * start times, the model's debug splits. One function so that they all read
 * the same clock; wall-clock dates are not here.
 */
#include <time.h>

#include "base.h"

double tg_clock_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}
