/* tests/test_fuzz_replay.c — runs the fuzz targets of tests/fuzz/ (the same code libFuzzer drives in
 * `make fuzz`) over their committed seed corpora (tests/fuzz/corpus/NAME/) and crash regressions
 * (tests/fuzz/regress/NAME/), built with the project's compiler and flags — so under `make test SAN=1`
 * every input also runs under ASan/UBSan/LSan. A crash, sanitizer report or failed oracle stops the
 * program (tests/run.sh counts that as a failure); the CHECK per target asserts the inputs were found.
 * Not fuzzing itself: no new inputs are generated here. */
#define FUZZ_ENTRY fuzz_size_one
#include "tests/fuzz/fuzz_size.c"
#undef FUZZ_ENTRY
#define FUZZ_ENTRY fuzz_hf_config_one
#include "tests/fuzz/fuzz_hf_config.c"
#undef FUZZ_ENTRY
#define FUZZ_ENTRY fuzz_sweep_spec_one
#include "tests/fuzz/fuzz_sweep_spec.c"
#undef FUZZ_ENTRY
#define FUZZ_ENTRY fuzz_safetensors_one
#include "tests/fuzz/fuzz_safetensors.c"
#undef FUZZ_ENTRY

#include "tests/check.h"

#include <dirent.h>
#include <errno.h>

/* Feed every regular file of dir to fn; returns the count, or -1 when a file cannot be read. */
static int replay_dir(const char *dir, int (*fn)(const uint8_t *, size_t)) {
    DIR *d = opendir(dir);
    if (!d) return errno == ENOENT ? 0 : -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f) { n = -1; break; }
        uint8_t *buf = malloc(1 << 20);
        size_t len = buf ? fread(buf, 1, 1 << 20, f) : 0;
        int bad = !buf || ferror(f);
        fclose(f);
        if (bad) { free(buf); n = -1; break; }
        fn(buf, len);
        free(buf);
        n++;
    }
    closedir(d);
    return n;
}

int main(void) {
    static const struct { const char *name; int (*fn)(const uint8_t *, size_t); } targets[] = {
        {"size", fuzz_size_one},
        {"hf_config", fuzz_hf_config_one},
        {"sweep_spec", fuzz_sweep_spec_one},
        {"safetensors", fuzz_safetensors_one},
    };
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) {
        char dir[256], name[96];
        snprintf(dir, sizeof dir, "tests/fuzz/corpus/%s", targets[i].name);
        int nc = replay_dir(dir, targets[i].fn);
        snprintf(dir, sizeof dir, "tests/fuzz/regress/%s", targets[i].name);
        int nr = replay_dir(dir, targets[i].fn);
        snprintf(name, sizeof name, "fuzz_replay_%s", targets[i].name);
        /* reaching this line means no input crashed or failed an oracle */
        CHECK(nc >= 5 && nr >= 0, name, "%d seed inputs, %d regressions (want >= 5 seeds; run from the repo root)",
              nc, nr);
    }
    return check_exit();
}
