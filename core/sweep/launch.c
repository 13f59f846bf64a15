/* core/sweep/launch.c — fork + execvpe of an argv array with a log file, a timeout and Ctrl-C
 * forwarding; atomic file writes. Why a process group: the runner must be able to stop everything a
 * launch started (mpirun and its daemons) with one kill(-pgid). Open MPI puts each rank into a group
 * of its own and kills them when mpirun gets SIGTERM, so SIGTERM comes first with a grace period;
 * SIGKILL (which mpirun cannot forward) is then sent to every descendant found in /proc as well.
 * Not what a run means (bench/sweep.c). Single-threaded callers only. */
#include "core/sweep/launch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static volatile sig_atomic_t g_signal = 0;

static void on_signal(int sig) {
    if (!g_signal) g_signal = sig;
}

int sweep_launch_install_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: a sleep in the wait loop wakes up at once */
    if (sigaction(SIGINT, &sa, NULL) != 0) return -1;
    if (sigaction(SIGTERM, &sa, NULL) != 0) return -1;
    return 0;
}

int sweep_launch_interrupted(void) { return (int)g_signal; }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL); /* EINTR is fine: the loop re-checks everything */
}

/* Append one line to the log through the runner's own descriptor (shared offset with the child). */
static void log_note(int fd, const char *fmt, double a, long b) {
    char buf[256];
    int n = snprintf(buf, sizeof buf, fmt, a, b);
    if (fd >= 0 && n > 0) {
        ssize_t w = write(fd, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
        (void)w; /* best effort: the log is diagnostics, the record carries the status */
    }
}

/* SIGKILL every descendant of root (found through /proc/<pid>/stat ppid links) and their groups. */
static void kill_tree(pid_t root) {
    enum { MAXP = 4096 };
    static pid_t pids[MAXP], ppids[MAXP], pgids[MAXP];
    int n = 0;
    DIR *d = opendir("/proc");
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) && n < MAXP) {
        char *end;
        long p = strtol(e->d_name, &end, 10);
        if (*end || p <= 0) continue;
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/%ld/stat", p);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t got = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[got] = '\0';
        char *rp = strrchr(buf, ')'); /* comm may contain spaces and parentheses */
        int pp, pg;
        char st;
        if (!rp || sscanf(rp + 1, " %c %d %d", &st, &pp, &pg) != 3) continue;
        pids[n] = (pid_t)p, ppids[n] = pp, pgids[n] = pg, n++;
    }
    closedir(d);
    static char in[MAXP];
    memset(in, 0, sizeof in);
    for (int changed = 1; changed;) {
        changed = 0;
        for (int i = 0; i < n; i++) {
            if (in[i]) continue;
            int parent_in = ppids[i] == root;
            for (int j = 0; j < n && !parent_in; j++) parent_in = in[j] && pids[j] == ppids[i];
            if (parent_in) in[i] = 1, changed = 1;
        }
    }
    for (int i = 0; i < n; i++)
        if (in[i]) {
            kill(pids[i], SIGKILL);
            if (pgids[i] == pids[i]) kill(-pids[i], SIGKILL);
        }
}

/* The child's environment: the runner's, then env_default where unset, then env overriding. */
static char **build_env(const sweep_launch_opts *o) {
    size_t n = 0, extra = 0;
    while (environ && environ[n]) n++;
    for (const char *const *p = o->env; p && *p; p++) extra++;
    for (const char *const *p = o->env_default; p && *p; p++) extra++;
    char **env = calloc(n + extra + 1, sizeof *env);
    if (!env) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) env[k++] = environ[i];
    for (int pass = 0; pass < 2; pass++) {
        const char *const *list = pass == 0 ? o->env_default : o->env;
        for (const char *const *p = list; p && *p; p++) {
            const char *eq = strchr(*p, '=');
            if (!eq) continue;
            size_t nl = (size_t)(eq - *p) + 1;
            size_t found = k;
            for (size_t i = 0; i < k; i++)
                if (strncmp(env[i], *p, nl) == 0) found = i;
            if (found == k) env[k++] = (char *)*p;
            else if (pass == 1) env[found] = (char *)*p;
        }
    }
    env[k] = NULL;
    return env;
}

/* the newest progress line train wrote to the log (rank 0, "train: step N/M loss ... eta Ns"), printed as a new line */
static void show_progress(const sweep_launch_opts *o, double elapsed) {
    char tail[4096];
    sweep_tail_lines(o->log_path, 6, tail, sizeof tail);
    char *best = NULL;
    for (char *p = strstr(tail, "train: step "); p; p = strstr(p + 1, "train: step ")) best = p;
    if (!best || strstr(best, " eval ")) return;
    char *nl = strchr(best, '\n');
    if (nl) *nl = 0;
    /* each on its own line; the runner's closing words ("ok in ...") follow the last one */
    fprintf(stderr, "\n%s  %s  (%.0f s) ", o->progress, best + 7, elapsed);
}

int sweep_launch(const sweep_launch_opts *o, sweep_launch_result *r) {
    memset(r, 0, sizeof *r);
    double t0 = now_s();
    double grace = o->term_grace_s > 0 ? o->term_grace_s : 10.0;
    int logfd = open(o->log_path, O_WRONLY | O_CREAT | O_CLOEXEC | (o->append ? O_APPEND : O_TRUNC), 0644);
    if (logfd < 0) {
        r->outcome = SWEEP_LAUNCH_IO_ERROR;
        snprintf(r->error, sizeof r->error, "cannot open log %s: %s", o->log_path, strerror(errno));
        return -1;
    }
    int nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int pfd[2];
    char **env = build_env(o);
    if (nullfd < 0 || !env || pipe2(pfd, O_CLOEXEC) != 0) {
        r->outcome = SWEEP_LAUNCH_IO_ERROR;
        snprintf(r->error, sizeof r->error, "cannot prepare launch: %s", env ? strerror(errno) : "out of memory");
        free(env);
        if (nullfd >= 0) close(nullfd);
        close(logfd);
        return -1;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        r->outcome = SWEEP_LAUNCH_IO_ERROR;
        snprintf(r->error, sizeof r->error, "fork: %s", strerror(errno));
        close(pfd[0]), close(pfd[1]), close(nullfd), close(logfd);
        free(env);
        return -1;
    }
    if (pid == 0) {
        /* child: only async-signal-safe calls until exec */
        setpgid(0, 0);
        /* if the runner dies (kill -9), the launch gets SIGTERM: mpirun then stops its ranks */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) _exit(127);
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigaction(SIGINT, &dfl, NULL);
        sigaction(SIGTERM, &dfl, NULL);
        sigaction(SIGPIPE, &dfl, NULL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        int e = 0;
        if (dup2(nullfd, 0) < 0 || dup2(logfd, 1) < 0 || dup2(logfd, 2) < 0) e = errno;
        if (!e && o->cwd && chdir(o->cwd) != 0) e = errno;
        if (!e) {
            execvpe(o->argv[0], o->argv, env);
            e = errno;
        }
        ssize_t w = write(pfd[1], &e, sizeof e);
        (void)w;
        _exit(127);
    }
    /* parent: also set the group here, so a kill(-pid) right after fork cannot miss */
    if (setpgid(pid, pid) != 0) {
        /* EACCES: the child has exec'd and set it itself; ESRCH: it is gone already. Nothing to do. */
    }
    close(pfd[1]);
    close(nullfd);
    free(env);
    int child_errno = 0;
    ssize_t got;
    do got = read(pfd[0], &child_errno, sizeof child_errno);
    while (got < 0 && errno == EINTR);
    close(pfd[0]);
    if (got == (ssize_t)sizeof child_errno) {
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
        r->outcome = SWEEP_LAUNCH_EXEC_FAILED;
        snprintf(r->error, sizeof r->error, "cannot execute %s: %s", o->argv[0], strerror(child_errno));
        char line[600];
        int n = snprintf(line, sizeof line, "[sweep] %s\n", r->error);
        if (n > 0) {
            ssize_t w = write(logfd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
            (void)w;
        }
        close(logfd);
        r->elapsed_s = now_s() - t0;
        return -1;
    }

    enum { RUNNING, TERMINATING, INTERRUPTING, KILLED } state = RUNNING;
    double since = 0, last_progress = t0;
    int status = 0, timed_out = 0, interrupted = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) {
            r->outcome = SWEEP_LAUNCH_IO_ERROR;
            snprintf(r->error, sizeof r->error, "waitpid: %s", strerror(errno));
            kill(-pid, SIGKILL);
            close(logfd);
            return -1;
        }
        double t = now_s();
        if (g_signal && !interrupted) {
            interrupted = 1;
            int term = o->stop_signal == SIGTERM;
            log_note(logfd, term ? "[sweep] interrupted after %.1f s: forwarding SIGTERM to process group %ld\n"
                                 : "[sweep] interrupted after %.1f s: forwarding SIGINT to process group %ld\n",
                     t - t0, (long)pid);
            kill(-pid, term ? SIGTERM : SIGINT);
            state = term ? TERMINATING : INTERRUPTING, since = t;
        } else if (state == RUNNING && o->timeout_s > 0 && t - t0 > o->timeout_s) {
            timed_out = 1;
            log_note(logfd, "[sweep] timeout after %.1f s: SIGTERM to process group %ld\n", t - t0, (long)pid);
            kill(-pid, SIGTERM);
            state = TERMINATING, since = t;
        } else if ((state == TERMINATING || state == INTERRUPTING) && t - since > grace) {
            if (state == INTERRUPTING) {
                kill(-pid, SIGTERM);
                state = TERMINATING, since = t;
            } else {
                log_note(logfd, "[sweep] still running %.1f s after SIGTERM: SIGKILL to pid %ld and descendants\n",
                         t - since, (long)pid);
                kill_tree(pid);
                kill(-pid, SIGKILL);
                state = KILLED;
            }
        }
        if (o->progress && t - last_progress >= 5.0) { show_progress(o, t - t0); last_progress = t; }
        sleep_ms(20);
    }
    if (timed_out || interrupted) kill(-pid, SIGKILL); /* anything left in its group (ESRCH: none) */
    if (state == KILLED || (!timed_out && !interrupted && WIFSIGNALED(status))) {
        int n = sweep_launch_cleanup_openmpi(pid);
        if (n > 0) log_note(logfd, "[sweep] removed %.0f Open MPI leftovers of the killed launch (pid %ld)\n", n, (long)pid);
    }
    close(logfd);
    r->elapsed_s = now_s() - t0;
    if (interrupted) r->outcome = SWEEP_LAUNCH_INTERRUPTED;
    else if (timed_out) r->outcome = SWEEP_LAUNCH_TIMEOUT;
    else if (WIFEXITED(status)) r->outcome = SWEEP_LAUNCH_EXITED, r->exit_code = WEXITSTATUS(status);
    else r->outcome = SWEEP_LAUNCH_SIGNALED, r->term_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    return 0;
}

/* ---- Open MPI's leftovers ----------------------------------------------------------------------- */

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

/* mpirun (pid) keeps its session in $TMPDIR/ompi.<host>.<uid>/pid.<pid>/ and names the ranks'
 * shared-memory segments /dev/shm/vader_segment.<host>.<uid>.<jobid hex>.<rank>, the job family
 * being the first number of the session's contact.txt (family << 16). A SIGKILLed mpirun removes
 * neither; this does, for that pid and that job family only, once the process is gone. */
int sweep_launch_cleanup_openmpi(long pid) {
    char host[256], base[PATH_MAX], sess[PATH_MAX + 32], contact[PATH_MAX + 48];
    if (pid <= 0 || kill((pid_t)pid, 0) == 0 || gethostname(host, sizeof host) != 0) return 0;
    host[sizeof host - 1] = '\0';
    const char *tmp = getenv("TMPDIR");
    snprintf(base, sizeof base, "%s/ompi.%s.%u", tmp && *tmp ? tmp : "/tmp", host, (unsigned)getuid());
    snprintf(sess, sizeof sess, "%s/pid.%ld", base, pid);
    struct stat st;
    if (lstat(sess, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid()) return 0;
    int removed = 0;
    snprintf(contact, sizeof contact, "%s/contact.txt", sess);
    FILE *f = fopen(contact, "r");
    unsigned long long jobfam = 0;
    if (f) {
        if (fscanf(f, "%llu", &jobfam) != 1) jobfam = 0;
        fclose(f);
    }
    DIR *d = jobfam ? opendir("/dev/shm") : NULL;
    struct dirent *e;
    char prefix[300];
    int pl = snprintf(prefix, sizeof prefix, "vader_segment.%s.", host);
    while (d && (e = readdir(d))) {
        if (strncmp(e->d_name, prefix, (size_t)pl) != 0) continue;
        /* ...<uid>.<jobid hex>.<rank>: the jobid's upper 16 bits are the family */
        char name[256];
        snprintf(name, sizeof name, "%s", e->d_name + pl);
        char *last = strrchr(name, '.');
        if (!last) continue;
        *last = '\0';
        char *jid = strrchr(name, '.');
        char *end;
        unsigned long long j = strtoull(jid ? jid + 1 : name, &end, 16);
        if (*end || (j & ~0xffffull) != (jobfam & ~0xffffull)) continue;
        char path[600];
        snprintf(path, sizeof path, "/dev/shm/%s", e->d_name);
        if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == getuid() && unlink(path) == 0) removed++;
    }
    if (d) closedir(d);
    if (nftw(sess, rm_entry, 16, FTW_DEPTH | FTW_PHYS) == 0) removed++;
    return removed; /* base itself stays: another mpirun may be about to use it */
}


int sweep_mkdirs(const char *path, int mode) {
    char buf[4096];
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof buf) {
        errno = len ? ENAMETOOLONG : ENOENT;
        return -1;
    }
    memcpy(buf, path, len + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, (mode_t)mode) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    if (mkdir(buf, (mode_t)mode) != 0 && errno != EEXIST) return -1;
    struct stat st;
    if (stat(buf, &st) != 0) return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

void sweep_tail_lines(const char *path, int max_lines, char *out, size_t cap) {
    if (cap == 0) return;
    out[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (!f) return;
    static char buf[65536];
    long start = 0;
    if (fseek(f, 0, SEEK_END) == 0) {
        long end = ftell(f);
        start = end > (long)sizeof buf - 1 ? end - (long)sizeof buf + 1 : 0;
    }
    if (fseek(f, start, SEEK_SET) != 0) {
        fclose(f);
        return;
    }
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    for (size_t i = 0; i < n; i++)
        if (buf[i] == '\0') buf[i] = ' ';
    /* walk back over max_lines non-empty lines */
    int lines = 0;
    size_t pos = n;
    while (pos > 0 && lines < max_lines) {
        size_t e = pos;
        while (e > 0 && (buf[e - 1] == '\n' || buf[e - 1] == '\r')) e--;
        if (e == 0) {
            pos = 0;
            break;
        }
        size_t b = e;
        while (b > 0 && buf[b - 1] != '\n') b--;
        lines++;
        pos = b;
    }
    const char *s = buf + pos;
    size_t len = strlen(s);
    while (len && (s[len - 1] == '\n' || s[len - 1] == '\r')) len--;
    if (len >= cap) {
        s += len - (cap - 1);
        len = cap - 1;
    }
    memcpy(out, s, len);
    out[len] = '\0';
}
