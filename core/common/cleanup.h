/* core/common/cleanup.h — nothing half-written stays behind: the temp files of the atomic writers
 * (files_write_json, the safetensors writer) are registered while they exist, and SIGINT/SIGTERM
 * during a phase that writes (--save) remove them at once, in the handler, before anything else.
 * The handler only unlinks and notes the signal (async-signal-safe); the writer sees
 * cleanup_signal() != 0 at its next check, gives up, and the program says what happened.
 * A second signal of the same phase ends the process at once (exit 128 + signal).
 * Not here: the files themselves (their writers own them). */
#ifndef MESHSWEEP_CLEANUP_H
#define MESHSWEEP_CLEANUP_H
/* register / forget a temp path (at most 8 at a time; paths up to 4095 bytes) */
void cleanup_add(const char *path);
void cleanup_forget(const char *path);
/* remove every registered temp file now (failure paths) */
void cleanup_all(void);
/* SIGINT and SIGTERM remove the registered temp files and are noted, from _on until _off */
void cleanup_signals_on(void);
void cleanup_signals_off(void);
/* A writing phase of a writer that may run with or without a phase around it (files_write_json):
 * begin turns the handling on when it is off and returns 1 then (0 when it was on already); end with
 * that result turns it off again and raises a signal noted meanwhile once more, so the process ends as
 * that signal would have ended it, its temp file already removed. */
int cleanup_phase_begin(void);
void cleanup_phase_end(int mine);
/* the signal noted since cleanup_signals_on (0: none) */
int cleanup_signal(void);
/* rename(tmp, path) with SIGINT/SIGTERM held back for its duration: when a signal was noted before
 * (the handler has removed tmp) nothing is renamed and -1 is returned with errno EINTR, so a rename
 * that fails can never be mistaken for one that did not happen, and whatever was at path stays
 * there untouched. 0 when renamed; -1 with rename's errno otherwise. */
int cleanup_rename(const char *tmp, const char *path);
/* SIGINT/SIGTERM held back from cleanup_hold to the matching cleanup_release (nested calls count), so
 * that several renames that belong together (a Megatron .bin and .idx) all happen or none does */
void cleanup_hold(void);
void cleanup_release(void);
#endif
