/* core/common/files.c — see files.h. */
#include "core/common/files.h"
#include "core/common/cleanup.h"
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* the whole buffer to fd, then fsync and close; 0 or an errno */
static int write_all(int fd, const char *p, size_t left) {
    int bad = 0;
    while (left && !bad) {
        ssize_t w = write(fd, p, left);
        if (w < 0) { if (errno != EINTR) bad = errno; continue; }
        p += w, left -= (size_t)w;
    }
    if (!bad && fsync(fd) != 0) bad = errno;
    if (close(fd) != 0 && !bad) bad = errno;
    return bad;
}

int files_write_atomic(const char *path, const void *data, size_t len) {
    char tmp[4200];
    int n = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof tmp) { errno = ENAMETOOLONG; return -1; }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    int bad = write_all(fd, data, len);
    if (!bad && rename(tmp, path) != 0) bad = errno;
    if (bad) { unlink(tmp); errno = bad; return -1; }
    return 0;
}

int files_write_json(const char *path, json_t *root, char *err, size_t errlen) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    char *s = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    if (!s) { snprintf(err, errlen, "%s: could not encode the JSON record", path); return -1; }
    size_t n = strlen(s);
    char *t = realloc(s, n + 2);
    if (!t) { free(s); snprintf(err, errlen, "%s: out of host memory", path); return -1; }
    s = t;
    s[n++] = '\n', s[n] = 0;
    int phase = cleanup_phase_begin(); /* SIGINT/SIGTERM remove the temp file (core/common/cleanup.h) */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        free(s);
        cleanup_phase_end(phase);
        return -1;
    }
    cleanup_add(tmp); /* removed on SIGINT/SIGTERM while it exists */
    int bad = write_all(fd, s, n);
    free(s);
    if (!bad && cleanup_rename(tmp, path) != 0) bad = errno; /* EINTR: a signal removed tmp */
    cleanup_forget(tmp);
    if (bad) unlink(tmp), snprintf(err, errlen, "cannot write %s: %s", path, bad == EINTR ? "interrupted by a signal" : strerror(bad));
    cleanup_phase_end(phase);
    return bad ? -1 : 0;
}

/* A temp file with the name the writers give it (PATH.tmp.PID: here, core/formats/safetensors.c,
 * core/formats/data_write.c) is created and removed again, so a path that fails only at the end of a
 * run (a folder component that is a file, no room in NAME_MAX for the temp suffix, a read-only file
 * system) fails here. */
int files_check_writable(const char *path, char *err, size_t errlen) {
    struct stat st;
    size_t pl = strlen(path);
    if ((pl && path[pl - 1] == '/') || (stat(path, &st) == 0 && S_ISDIR(st.st_mode))) {
        snprintf(err, errlen, "cannot write %s: it names a folder (give a file name)", path);
        return -1;
    }
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "cannot write %s: it exists and is not a regular file", path);
        return -1;
    }
    char tmp[4200];
    if (pl + 24 >= 4096) { /* PATH_MAX, with the temp suffix and the writers' 4096-byte buffers */
        snprintf(err, errlen, "cannot write a path of %zu bytes: too long (at most %d, for the temp suffix): %.200s...", pl,
                 4096 - 24, path);
        return -1;
    }
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    char *dir = dirname(buf);
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        int e = errno;
        snprintf(err, errlen, "cannot write %s: folder %s: %s", path, dir, strerror(stat(dir, &st) == 0 ? ENOTDIR : e));
        return -1;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST) return 0; /* a leftover of this pid: the writer truncates it */
    if (fd < 0) {
        int e = errno;
        if (e == ENAMETOOLONG)
            snprintf(err, errlen, "cannot write %s: the file name is too long for its temp file (NAME_MAX; at most %d bytes "
                     "before the suffix .tmp.PID)", path, 255 - 16);
        else snprintf(err, errlen, "cannot write %s: folder %s: %s", path, dir, strerror(e));
        return -1;
    }
    close(fd);
    unlink(tmp);
    return 0;
}

int files_same(const char *a, const char *b) {
    if (!a || !b) return 0;
    if (!strcmp(a, b)) return 1;
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}
