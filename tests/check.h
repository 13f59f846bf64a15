/* tests/check.h — the tiny harness every C test uses. Each CHECK prints one line:
 *   "ok   <name>"  or  "FAIL <name>: <why>"  (or "skip <name>: <why>")
 * on stdout for the log and appends the same line to the file named by $MESHSWEEP_TEST_RESULTS
 * (set by tests/run.sh), which is the only place tests/run.sh counts results: output of the code
 * under test can never be mistaken for a pass. A test program exits 1 if any check failed. */
#ifndef MESHSWEEP_CHECK_H
#define MESHSWEEP_CHECK_H
#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
static int check_failed_ = 0, check_passed_ = 0;
static inline void check_emit_(const char *line) {
    fputs(line, stdout); fflush(stdout);
    const char *path = getenv("MESHSWEEP_TEST_RESULTS");
    if (path && *path) {
        FILE *f = fopen(path, "a");
        if (f) { fputs(line, f); fclose(f); }
    }
}
static inline void check_(int cond, const char *name, const char *fmt, ...) {
    char line[1024];
    if (cond) { snprintf(line, sizeof line, "ok   %s\n", name); check_passed_++; }
    else {
        int n = snprintf(line, sizeof line, "FAIL %s: ", name);
        if (n < 0 || n >= (int)sizeof line - 2) n = 0;
        va_list ap; va_start(ap, fmt); vsnprintf(line + n, sizeof line - n - 1, fmt, ap); va_end(ap);
        size_t l = 0; while (line[l]) l++;
        line[l] = '\n'; line[l + 1] = 0;
        check_failed_++;
    }
    check_emit_(line);
}
#define CHECK(cond, name, ...) check_((cond), (name), __VA_ARGS__)
static inline void skip_(const char *name, const char *why) {
    char line[1024]; snprintf(line, sizeof line, "skip %s: %s\n", name, why); check_emit_(line);
}
#define SKIP(name, why) skip_((name), (why))
static inline int check_exit(void) { return check_failed_ ? 1 : 0; }
/* A test's scratch folder: check_mkscratch makes /tmp/meshsweep_TEST.XXXXXX (0, or -1 with errno),
 * check_path names a file in it (8 rotating buffers, so several fit in one call), check_write_file
 * writes a fixture (exit 1 when it cannot), check_rmtree removes it at the end. */
static char check_scratch[256];
static inline int check_mkscratch(const char *test) {
    snprintf(check_scratch, sizeof check_scratch, "/tmp/meshsweep_%s.XXXXXX", test);
    return mkdtemp(check_scratch) ? 0 : -1;
}
static inline const char *check_path(const char *name) {
    static char buf[8][512];
    static int k = 0;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", check_scratch, name);
    return buf[k];
}
static inline void check_write_file(const char *path, const void *p, size_t n) {
    FILE *fp = fopen(path, "wb");
    int bad = !fp || (n && fwrite(p, 1, n, fp) != n);
    if ((fp && fclose(fp) != 0) || bad) {
        fprintf(stderr, "cannot write fixture %s\n", path);
        exit(1);
    }
}
/* remove a test's scratch folder and everything under it (no symlink is followed) */
static inline void check_rmtree(const char *d) {
    DIR *dd = opendir(d);
    if (!dd) return;
    struct dirent *e;
    while ((e = readdir(dd))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char p[1024];
        if ((size_t)snprintf(p, sizeof p, "%s/%s", d, e->d_name) >= sizeof p) continue;
        struct stat sb;
        if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode)) check_rmtree(p);
        else unlink(p);
    }
    closedir(dd);
    rmdir(d);
}
#endif
