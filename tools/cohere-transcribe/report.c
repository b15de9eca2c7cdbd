/*
 * report.c: what the user sees on stderr while a run goes on -- messages,
 * the progress bar -- and the signals that stop it.
 *
 * The bar is drawn only when stderr is a terminal (and not --quiet): one
 * line, redrawn in place at most ten times a second, cleared before any
 * message and drawn again after it, so messages and the bar never share a
 * line. It shows files done of the total, audio seconds done of the audio
 * decoded so far, the speed as a multiple of real time and an ETA that
 * extrapolates the audio of the files not yet decoded from those that were.
 *
 * SIGINT and SIGTERM only set a flag, which the backends' abort callback and
 * the run loop read; the handler then restores the default action, so a
 * second Ctrl-C kills at once. Nothing is ever half-written either way:
 * outputs become visible only through output sets (output_set.c).
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool bar_on, bar_drawn;
static char bar_line[256];
static double bar_last, bar_start;
static int bar_files;

double cli_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void clear_bar(void) {
    if (bar_drawn) fputs("\r\033[K", stderr);
    bar_drawn = false;
}

void cli_msg(const char *fmt, ...) {
    pthread_mutex_lock(&lock);
    clear_bar();
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    if (bar_on && bar_line[0]) {
        fputs(bar_line, stderr);
        bar_drawn = true;
    }
    fflush(stderr);
    pthread_mutex_unlock(&lock);
}

void cli_progress_begin(bool enabled, int n_files) {
    bar_on = enabled && isatty(STDERR_FILENO);
    bar_files = n_files;
    bar_start = cli_now_s();
    bar_last = 0;
    bar_line[0] = 0;
}

static void hms(double s, char *buf, size_t n) {
    long t = s > 0 && isfinite(s) ? (long)(s + 0.5) : 0;
    if (t >= 3600) snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, n, "%ld:%02ld", t / 60, t % 60);
}

void cli_progress_update(int files_done, double audio_done_s, double audio_known_s,
                         int files_known, bool force) {
    if (!bar_on) return;
    double now = cli_now_s();
    if (!force && now - bar_last < 0.1) return;
    bar_last = now;
    double el = now - bar_start;
    double speed = el > 0 ? audio_done_s / el : 0;
    /* the audio of files not decoded yet, at the mean of those that were */
    double total = files_known > 0 ? audio_known_s * bar_files / files_known : 0;
    char eta[32] = "?";
    if (speed > 0 && total >= audio_done_s) hms((total - audio_done_s) / speed, eta, sizeof eta);
    int width = 24, fill = total > 0 ? (int)(width * fmin(1, audio_done_s / total)) : 0;
    char bar[64];
    for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
    bar[width] = 0;
    pthread_mutex_lock(&lock);
    snprintf(bar_line, sizeof bar_line,
             "[%s] %d/%d files  %.1f/%.1f s audio  %.1fx  ETA %s", bar, files_done, bar_files,
             audio_done_s, audio_known_s, speed, eta);
    clear_bar();
    fputs(bar_line, stderr);
    bar_drawn = true;
    fflush(stderr);
    pthread_mutex_unlock(&lock);
}

void cli_progress_end(void) {
    if (!bar_on) return;
    pthread_mutex_lock(&lock);
    if (bar_drawn) fputs("\n", stderr);
    bar_drawn = false;
    bar_on = false;
    bar_line[0] = 0;
    fflush(stderr);
    pthread_mutex_unlock(&lock);
}

/* ---------------------------------------------------------------- signals */

/* Read by every thread (the producer, the backends' abort callbacks), so an
 * atomic (lock-free, which C11 allows in a handler), not a volatile
 * sig_atomic_t, whose cross-thread reads are a data race. */
static atomic_int caught;

static void on_signal(int sig) {
    int saved = errno; /* the interrupted code may be about to read errno */
    atomic_store_explicit(&caught, sig, memory_order_relaxed);
    /* a second one ends the process at once (SA_RESETHAND restored the
     * default action on entry) */
    errno = saved;
}

void cli_signals_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int cli_signal_caught(void) { return atomic_load_explicit(&caught, memory_order_relaxed); }

bool cli_abort_requested(void *user) {
    (void)user;
    return cli_signal_caught() != 0;
}
