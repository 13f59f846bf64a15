/* core/sweep/launch.h — run one program for the sweep runner: fork + execvp of an argv array (never a
 * shell), output to a log file, a wall-clock timeout, and Ctrl-C forwarded to the child's process
 * group. Also the small file helpers the runner needs to write only complete files (temp + rename).
 * Not the spec (core/sweep/spec.c) and not what a run's result means (bench/sweep.c). */
#ifndef MESHSWEEP_SWEEP_LAUNCH_H
#define MESHSWEEP_SWEEP_LAUNCH_H
#include <stddef.h>

enum sweep_launch_outcome {
    SWEEP_LAUNCH_EXITED = 1,   /* exit_code holds the exit status */
    SWEEP_LAUNCH_SIGNALED,     /* term_signal holds the signal (not one we sent) */
    SWEEP_LAUNCH_TIMEOUT,      /* ran past timeout_s; its process group was terminated */
    SWEEP_LAUNCH_INTERRUPTED,  /* SIGINT/SIGTERM reached the runner; forwarded, child reaped */
    SWEEP_LAUNCH_EXEC_FAILED,  /* the program could not be started (error says why) */
    SWEEP_LAUNCH_IO_ERROR,     /* the log could not be opened, fork failed, ... (error says why) */
};

typedef struct sweep_launch_opts {
    char *const *argv;         /* argv[0] is looked up in PATH (execvp) */
    const char *log_path;      /* stdout and stderr go here (created / truncated; appended if append) */
    int append;
    const char *cwd;           /* NULL: the runner's */
    double timeout_s;          /* <= 0: none */
    const char *const *env;    /* "NAME=VALUE" set in the child (overwriting), NULL-terminated, or NULL */
    const char *const *env_default; /* "NAME=VALUE" set only if NAME is not already set */
    double term_grace_s;       /* from SIGTERM to SIGKILL (default 10 when 0) */
    int stop_signal;           /* forwarded first when the runner is interrupted: 0 = SIGINT (mpirun
                                  stops on it), SIGTERM for srun (whose SIGINT only reports status);
                                  SIGTERM follows a SIGINT after term_grace_s, SIGKILL after that */
    const char *progress;      /* non-NULL: every few seconds, print this prefix and the newest
                                  "train: step ..." line of the log (step, loss, tok/s, ETA) on stderr */
} sweep_launch_opts;

typedef struct sweep_launch_result {
    int outcome;               /* enum sweep_launch_outcome */
    int exit_code;             /* EXITED */
    int term_signal;           /* SIGNALED */
    double elapsed_s;
    char error[512];
} sweep_launch_result;

/* Install SIGINT/SIGTERM handlers that only record the signal, so a running launch can forward it
 * and the runner can exit 130 after the child is reaped. Returns -1 on failure. */
int sweep_launch_install_signals(void);
/* Nonzero once SIGINT or SIGTERM was received; the signal number. */
int sweep_launch_interrupted(void);

/* Start, wait (polling the timeout and the interrupt flag) and reap. Returns 0 when the child was
 * started and reaped (look at outcome), -1 on EXEC_FAILED / IO_ERROR. */
int sweep_launch(const sweep_launch_opts *o, sweep_launch_result *r);

/* After a launch that was killed (SIGKILL to mpirun): remove the Open MPI session folder of that
 * mpirun pid and the shared-memory segments of its job, if they are ours and the pid is gone.
 * Returns how many were removed. Called by sweep_launch itself; public for tests. */
int sweep_launch_cleanup_openmpi(long pid);

/* mkdir -p; 0 or -1 (errno). */
int sweep_mkdirs(const char *path, int mode);
/* The last max_lines non-empty lines of a text file (at most cap-1 bytes, newlines kept between
 * lines); "" when unreadable. */
void sweep_tail_lines(const char *path, int max_lines, char *out, size_t cap);
#endif
