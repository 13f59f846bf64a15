/* core/common/files.h — every output file is written whole or not at all: a temp file beside it
 * (PATH.tmp.PID), fsync, rename; and the checks a program makes of its outputs before it starts (can
 * the path be written, is an output also an input). Used by every writer of records, plans, machine
 * files and sweep outputs. Not here: the temp-file registry and signals (core/common/cleanup.h). */
#ifndef MESHSWEEP_FILES_H
#define MESHSWEEP_FILES_H
#include <jansson.h>
#include <stddef.h>

/* len bytes of data to path atomically. 0, or -1 with errno (nothing left at path.tmp.PID). */
int files_write_atomic(const char *path, const void *data, size_t len);
/* root as indented JSON (17 significant digits, keys in order) and a newline, atomically; SIGINT/SIGTERM
 * meanwhile remove the temp file (core/common/cleanup.h) and the write fails as interrupted. 0, or -1
 * with one line in err (nothing left at path or its temp). */
int files_write_json(const char *path, json_t *root, char *err, size_t errlen);
/* What the writers will do, done now: path is not a folder, its folder exists and takes a temp file of
 * the writers' name. -1 with one line in err if not. */
int files_check_writable(const char *path, char *err, size_t errlen);
/* Are a and b one file? The same path as given, or the same file (device and inode: a hard or symbolic
 * link, another spelling). An output that is an input would destroy what is read. NULL is no file. */
int files_same(const char *a, const char *b);
#endif
