/* tests/fuzz/fuzz_safetensors.c — libFuzzer target for the safetensors reader (core/formats/safetensors.c:
 * st_open's header validation, then st_read_f32 of the first and last elements of every tensor).
 * The input is the whole file. Oracles: an accepted file's tensors lie inside the data section,
 * span exactly numel * dtype size bytes, do not overlap, have non-empty unique names and can be
 * read; a rejected file gives one line that names the path and leaves nothing open. Not the writer
 * (round trips are tests/test_io.c's). */
#include "tests/fuzz/fuzz_common.h"

#include "core/formats/safetensors.h"

static uint64_t st_numel(const st_tensor *t) {
    uint64_t n = 1;
    for (int k = 0; k < t->ndim; k++) n *= (uint64_t)t->shape[k];
    return n;
}

int FUZZ_ENTRY(const uint8_t *data, size_t size);
int FUZZ_ENTRY(const uint8_t *data, size_t size) {
    if (size > 1 << 20) return 0;
    const char *path = fuzz_as_file(data, size);
    if (!path) return 0;
    st_file f;
    char err[512] = "";
    if (st_open(&f, path, err, sizeof err) != 0) {
        FUZZ_ASSERT(err[0] != '\0' && strchr(err, '\n') == NULL && strstr(err, path) != NULL);
        FUZZ_ASSERT(f.fp == NULL && f.t == NULL);
        return 0;
    }
    FUZZ_ASSERT(f.data_start >= 8 && f.data_start <= f.file_bytes && f.file_bytes == size);
    uint64_t data_bytes = f.file_bytes - f.data_start;
    for (int i = 0; i < f.n; i++) {
        const st_tensor *t = &f.t[i];
        size_t es = t->dtype == ST_BF16 ? 2 : 4;
        FUZZ_ASSERT(t->name && t->name[0]);
        FUZZ_ASSERT(t->ndim >= 0 && t->ndim <= 4);
        FUZZ_ASSERT(t->begin <= t->end && t->end <= data_bytes);
        uint64_t numel = st_numel(t);
        FUZZ_ASSERT(t->end - t->begin == numel * es);
        FUZZ_ASSERT(st_find(&f, t->name) == t); /* names are unique */
        for (int j = 0; j < i; j++) {
            const st_tensor *u = &f.t[j];
            if (t->begin == t->end || u->begin == u->end) continue;
            FUZZ_ASSERT(t->end <= u->begin || u->end <= t->begin);
        }
        float x[2];
        char rerr[512];
        if (numel > 0) {
            FUZZ_ASSERT(st_read_f32(&f, t, 0, 1, &x[0], rerr, sizeof rerr) == 0);
            FUZZ_ASSERT(st_read_f32(&f, t, (int64_t)numel - 1, 1, &x[1], rerr, sizeof rerr) == 0);
        }
        FUZZ_ASSERT(st_read_f32(&f, t, (int64_t)numel, 1, x, rerr, sizeof rerr) == -1); /* past the end */
        FUZZ_ASSERT(st_read_f32(&f, t, 0, 0, x, rerr, sizeof rerr) == 0);
    }
    st_close(&f);
    return 0;
}
