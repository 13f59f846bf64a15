/* core/common/cleanup.c — see cleanup.h. The table is written only outside the handler, and a slot's path is
 * complete before it is marked used, so the handler never reads a half-written path. */
#include "core/common/cleanup.h"
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { NSLOT = 8, PATHLEN = 4096 };
static char g_path[NSLOT][PATHLEN];
static volatile sig_atomic_t g_used[NSLOT];
static volatile sig_atomic_t g_sig;
static struct sigaction g_old_int, g_old_term;
static int g_on;

void cleanup_add(const char *path) {
    if (!path || strlen(path) >= PATHLEN) return;
    for (int i = 0; i < NSLOT; i++)
        if (!g_used[i]) { snprintf(g_path[i], PATHLEN, "%s", path); g_used[i] = 1; return; }
}

void cleanup_forget(const char *path) {
    for (int i = 0; i < NSLOT; i++)
        if (g_used[i] && !strcmp(g_path[i], path)) g_used[i] = 0;
}

void cleanup_all(void) {
    for (int i = 0; i < NSLOT; i++)
        if (g_used[i]) { unlink(g_path[i]); g_used[i] = 0; }
}

static void on_signal(int sig) {
    for (int i = 0; i < NSLOT; i++)
        if (g_used[i]) unlink(g_path[i]); /* the writer forgets it when it gives up */
    if (g_sig) _exit(128 + sig);
    g_sig = sig;
}

void cleanup_signals_on(void) {
    if (g_on) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &g_old_int);
    sigaction(SIGTERM, &sa, &g_old_term);
    g_sig = 0;
    g_on = 1;
}

void cleanup_signals_off(void) {
    if (!g_on) return;
    sigaction(SIGINT, &g_old_int, NULL);
    sigaction(SIGTERM, &g_old_term, NULL);
    g_on = 0;
}

int cleanup_signal(void) { return (int)g_sig; }

int cleanup_phase_begin(void) {
    if (g_on) return 0;
    cleanup_signals_on();
    return 1;
}

void cleanup_phase_end(int mine) {
    if (!mine) return;
    int sig = (int)g_sig;
    cleanup_signals_off();
    g_sig = 0;
    if (sig) raise(sig);
}

static int g_hold_depth;
static sigset_t g_hold_old;

void cleanup_hold(void) {
    if (g_hold_depth++) return;
    sigset_t hold;
    sigemptyset(&hold);
    sigaddset(&hold, SIGINT);
    sigaddset(&hold, SIGTERM);
    sigprocmask(SIG_BLOCK, &hold, &g_hold_old);
}

void cleanup_release(void) {
    if (g_hold_depth <= 0 || --g_hold_depth) return;
    sigprocmask(SIG_SETMASK, &g_hold_old, NULL); /* a signal held back is delivered here */
}

int cleanup_rename(const char *tmp, const char *path) {
    cleanup_hold();
    int rc, e = 0;
    if (g_sig) rc = -1, e = EINTR;
    else if ((rc = rename(tmp, path)) != 0) e = errno;
    cleanup_release();
    errno = e;
    return rc;
}
