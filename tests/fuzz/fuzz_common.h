/* tests/fuzz/fuzz_common.h — helpers shared by the libFuzzer targets in tests/fuzz/: hand an input to a
 * parser that takes a path (through one memfd per process, rewritten for each input), and copy an
 * input into a NUL-terminated string. Also used by tests/test_fuzz_replay.c, which runs the same
 * targets over the seed corpora and the crash regressions with gcc (and under SAN=1).
 * Not a fuzzing engine: libFuzzer (clang -fsanitize=fuzzer) or test_fuzz_replay.c drives the targets. */
#ifndef MESHSWEEP_FUZZ_COMMON_H
#define MESHSWEEP_FUZZ_COMMON_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The entry point's name: LLVMFuzzerTestOneInput under libFuzzer; the replay test renames each. */
#ifndef FUZZ_ENTRY
#define FUZZ_ENTRY LLVMFuzzerTestOneInput
#endif

/* An oracle failed: the parser accepted something it promises to reject (or the reverse). Abort so
 * that libFuzzer saves the input as a crash. */
#define FUZZ_ASSERT(cond)                                                                       \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            fprintf(stderr, "fuzz oracle failed at %s:%d: %s\n", __FILE__, __LINE__, #cond);    \
            abort();                                                                            \
        }                                                                                       \
    } while (0)

/* Write data into this process's memfd and return a path that opens it ("/proc/self/fd/N"), or NULL
 * when the memfd cannot be made (then the input is skipped: not the code under test). */
static inline const char *fuzz_as_file(const uint8_t *data, size_t size) {
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("meshsweep-fuzz", 0);
        if (fd < 0) return NULL;
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0) return NULL;
    size_t done = 0;
    while (done < size) {
        ssize_t w = pwrite(fd, data + done, size - done, (off_t)done);
        if (w <= 0) return NULL;
        done += (size_t)w;
    }
    return path;
}

/* A NUL-terminated copy (the caller frees); an embedded NUL simply ends the string early. */
static inline char *fuzz_cstr(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s) return NULL;
    if (size) memcpy(s, data, size);
    s[size] = '\0';
    return s;
}
#endif
