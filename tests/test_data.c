/* tests/test_data.c — token files (core/formats/data.c, core/formats/data_write.c) and build/mkdata: every format and
 * dtype read back token for token against what was written, the same batches from every format,
 * hand-built files in each format's layout (so the writer is not checked only against itself), every
 * inconsistency as one line naming the file, a sparse multi-GB file opened in constant memory (with
 * the id scan's rate printed for docs/formats.md), synthetic tokens and the batch layout of docs/semantics.md#data-order.
 * Fixtures are generated at run time into a fresh temp dir, removed at the end. */
#include "core/formats/data.h"
#include "core/formats/data_write.h"
#include "tests/check.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char err[1024];

/* a growing byte buffer for hand-built files */
typedef struct { unsigned char b[1 << 16]; size_t n; } buf_t;
static void put(buf_t *b, const void *p, size_t n) { memcpy(b->b + b->n, p, n), b->n += n; }
static void put_u64(buf_t *b, uint64_t v) { put(b, &v, 8); }

static void write_tokens(const char *path, const uint16_t *t, size_t n) { check_write_file(path, t, n * 2); }
static uint16_t tok_at(int64_t i) { return (uint16_t)((i * 7 + 3) % 256); }

static void expect_bad_data(const char *name, const char *path, int V, int T, const char *want) {
    data_file d;
    memset(&d, 0x5a, sizeof d);
    err[0] = 0;
    int rc = data_open(&d, path, V, T, 0, err, sizeof err);
    CHECK(rc == -1 && strncmp(err, "data: ", 6) == 0 && strstr(err, want) && !strchr(err, '\n') && d.map == NULL &&
              d.idx_map == NULL, name, "rc %d, want '%s', got: %s", rc, want, err);
    printf("#    %s\n", err);
    if (rc == 0) data_close(&d);
}
/* as expect_bad_data, and the message names `file` */
static void expect_bad_named(const char *name, const char *path, const char *file, const char *want) {
    expect_bad_data(name, path, 256, 4, want);
    if (!strstr(err, file)) CHECK(0, name, "message does not name %s: %s", file, err);
}

/* ---- the batch layout and the nanoGPT file (docs/semantics.md#data-order) ----------------------------------------- */
static void test_layout(void) {
    /* batch layout against a hand computation: 23 tokens, T = 4 -> N = floor(22/4) = 5 sequences */
    const char *p = check_path("tok.bin");
    uint16_t toks[23];
    for (int i = 0; i < 23; i++) toks[i] = tok_at(i);
    write_tokens(p, toks, 23);
    data_file d;
    int rc = data_open(&d, p, 256, 4, 0, err, sizeof err);
    CHECK(rc == 0 && d.ntokens == 23 && d.synthetic == 0 && d.format == DATA_NANOGPT, "data_open_ok", "rc %d: %s", rc,
          err);
    if (rc != 0) return;
    CHECK(data_num_sequences(&d, 4) == 5, "data_num_sequences", "%lld", (long long)data_num_sequences(&d, 4));
    CHECK(data_num_sequences(&d, 22) == 1 && data_num_sequences(&d, 3) == 7, "data_num_sequences_other_T",
          "%lld %lld", (long long)data_num_sequences(&d, 22), (long long)data_num_sequences(&d, 3));
    /* dp = 2, b = 2, G = 4. step 1: sequences (4 + j) mod 5 = 4, 0 | 1, 2; step 2: 3, 4 | 0, 1. */
    struct { int64_t step; int rank; int seqs[2]; } cases[] = {
        {0, 0, {0, 1}}, {0, 1, {2, 3}}, {1, 0, {4, 0}}, {1, 1, {1, 2}}, {2, 0, {3, 4}}, {2, 1, {0, 1}},
        {1000000000000LL, 0, {0, 1}}, /* 4e12 mod 5 = 0 */
        {1000000000001LL, 1, {1, 2}}, /* (4e12 + 4 + 2) mod 5 = 1 */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int32_t in[8], tg[8];
        memset(in, 0xff, sizeof in), memset(tg, 0xff, sizeof tg);
        data_batch(&d, cases[c].step, 4, cases[c].rank, 2, 4, in, tg, NULL, 0);
        int ok = 1;
        for (int s = 0; s < 2; s++)
            for (int t = 0; t < 4; t++) {
                int64_t k = cases[c].seqs[s];
                ok &= in[s * 4 + t] == tok_at(k * 4 + t) && tg[s * 4 + t] == tok_at(k * 4 + t + 1);
            }
        char name[96];
        snprintf(name, sizeof name, "data_batch_step%lld_rank%d", (long long)cases[c].step, cases[c].rank);
        CHECK(ok, name, "in[0] %d want %d (seq %d)", in[0], tok_at(cases[c].seqs[0] * 4), cases[c].seqs[0]);
    }
    /* the same global batch on every mesh: dp=1,b=4 equals dp=2,b=2 ranks concatenated and dp=4,b=1 */
    int ok = 1;
    for (int64_t step = 0; step < 7; step++) {
        int32_t in1[16], tg1[16], in2[16], tg2[16], in4[16], tg4[16];
        data_batch(&d, step, 4, 0, 4, 4, in1, tg1, NULL, 0);
        for (int r = 0; r < 2; r++) data_batch(&d, step, 4, r, 2, 4, in2 + r * 8, tg2 + r * 8, NULL, 0);
        for (int r = 0; r < 4; r++) data_batch(&d, step, 4, r, 1, 4, in4 + r * 4, tg4 + r * 4, NULL, 0);
        ok &= !memcmp(in1, in2, sizeof in1) && !memcmp(tg1, tg2, sizeof tg1) && !memcmp(in1, in4, sizeof in1) &&
              !memcmp(tg1, tg4, sizeof tg1);
    }
    CHECK(ok, "data_batch_same_global_batch_any_dp", "rank-major split differs");
    /* a global batch larger than N wraps within one step */
    int32_t inw[28], tgw[28];
    data_batch(&d, 0, 7, 0, 7, 4, inw, tgw, NULL, 0);
    CHECK(inw[5 * 4] == tok_at(0) && inw[6 * 4] == tok_at(4) && tgw[6 * 4 + 3] == tok_at(8), "data_batch_wraps_in_step",
          "%d %d", inw[20], inw[24]);
    data_close(&d);
    CHECK(d.map == NULL && d.ntokens == 0, "data_close_unmaps", "mapping left");

    /* exactly T+1 tokens: one sequence */
    write_tokens(p, toks, 5);
    rc = data_open(&d, p, 256, 4, 0, err, sizeof err);
    CHECK(rc == 0 && data_num_sequences(&d, 4) == 1, "data_exactly_T_plus_1", "rc %d: %s", rc, err);
    if (rc == 0) data_close(&d);
    /* vocabularies above 65536 are allowed: the file's ids just have to be below V */
    write_tokens(p, toks, 23);
    rc = data_open(&d, p, 128256, 4, 0, err, sizeof err);
    CHECK(rc == 0, "data_large_vocab_file_ok", "rc %d: %s", rc, err);
    if (rc == 0) data_close(&d);

    /* bad nanoGPT files */
    check_write_file(p, toks, 9);
    expect_bad_data("data_bad_odd_length", p, 256, 2, "odd length 9 bytes");
    uint16_t badt[20];
    for (int i = 0; i < 20; i++) badt[i] = (uint16_t)i;
    badt[7] = 300;
    badt[12] = 400;
    write_tokens(p, badt, 20);
    expect_bad_data("data_bad_id_ge_vocab", p, 256, 4, "token 300 at index 7 >= vocab_size 256");
    /* the bad id in a later scan block than the first */
    uint16_t *many = calloc(20000, 2);
    many[12345] = 256;
    write_tokens(p, many, 20000);
    expect_bad_data("data_bad_id_late_block", p, 256, 4, "token 256 at index 12345 >= vocab_size 256");
    free(many);
    write_tokens(p, toks, 4);
    expect_bad_data("data_bad_too_short", p, 256, 4, "has 4 tokens, need at least T+1 = 5");
    check_write_file(p, "", 0);
    expect_bad_data("data_bad_empty", p, 256, 4, "empty");
    expect_bad_data("data_bad_missing", check_path("missing.bin"), 256, 4, "cannot open");
    expect_bad_data("data_bad_directory", check_scratch, 256, 4, "regular file");
    write_tokens(p, toks, 23);
    expect_bad_data("data_bad_T_zero", p, 256, 0, "positive");
}

/* ---- every format and dtype through the writer ------------------------------------------------- */
static int64_t src_tok(int64_t i, int64_t big) { return big ? (i * 104729 + 17) % 128256 : tok_at(i); }
static int gen_src(void *ctx, int64_t first, int64_t n, int64_t *dst, char *err, size_t errlen) {
    int64_t big = *(const int64_t *)ctx;
    (void)err, (void)errlen;
    for (int64_t i = 0; i < n; i++) dst[i] = src_tok(first + i, big);
    return 0;
}

static void test_formats(void) {
    const int64_t n = 3001;
    struct { data_format f; data_dtype t; const char *open_as; int big; } cases[] = {
        {DATA_NANOGPT, DATA_U16, "nanogpt.bin", 0}, {DATA_LLMC, DATA_U16, "llmc16.bin", 0},
        {DATA_LLMC, DATA_U32, "llmc32.bin", 1},    {DATA_NPY, DATA_U16, "npy16.npy", 0},
        {DATA_NPY, DATA_U32, "npy32.npy", 1},      {DATA_NPY, DATA_I32, "npyi32.npy", 1},
        {DATA_NPY, DATA_I64, "npyi64.npy", 1},     {DATA_NPY, DATA_U8, "npyu8.npy", 0},
        {DATA_MEGATRON, DATA_U16, "meg16", 0},     {DATA_MEGATRON, DATA_I32, "megi32.bin", 1},
        {DATA_MEGATRON, DATA_I64, "megi64.idx", 1}, {DATA_MEGATRON, DATA_U8, "megu8", 0},
    };
    int32_t ref_in[2][64], ref_tg[2][64];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char stem[512], name[128];
        snprintf(stem, sizeof stem, "%s/%.*s", check_scratch, (int)strcspn(cases[c].open_as, "."), cases[c].open_as);
        int64_t big = cases[c].big;
        /* Megatron: uneven sequences, so the stream crosses sequence boundaries inside a batch */
        int64_t ends[40], ns = 0;
        for (int64_t e = 37; e < n; e += 37 + ns * 11) ends[ns++] = e;
        ends[ns++] = n;
        int rc = data_write(stem, cases[c].f, cases[c].t, gen_src, &big, n, cases[c].f == DATA_MEGATRON ? ends : NULL,
                            ns, err, sizeof err);
        data_file d;
        int ro = rc ? -1 : data_open(&d, check_path(cases[c].open_as), big ? 128256 : 256, 8, 0, err, sizeof err);
        snprintf(name, sizeof name, "data_format_%s_%s_reads_back", data_format_names[cases[c].f],
                 data_dtype_names[cases[c].t]);
        int ok = rc == 0 && ro == 0 && d.ntokens == n && d.format == cases[c].f && d.dtype == cases[c].t;
        if (ok) {
            int64_t *got = malloc((size_t)n * sizeof *got);
            data_read(&d, 0, n, got, NULL, 0);
            for (int64_t i = 0; i < n; i++) ok &= got[i] == src_tok(i, big);
            free(got);
        }
        CHECK(ok, name, "write %d open %d: %s", rc, ro, err);
        if (ro == 0) {
            int32_t in[64], tg[64];
            data_batch(&d, 3, 8, 1, 8, 8, in, tg, NULL, 0);
            int k = big;
            if (c == 0 || (big && cases[c].f == DATA_LLMC)) memcpy(ref_in[k], in, sizeof in), memcpy(ref_tg[k], tg, sizeof tg);
            snprintf(name, sizeof name, "data_format_%s_%s_same_batch", data_format_names[cases[c].f],
                     data_dtype_names[cases[c].t]);
            /* step 3, G = 8, rank 1 of b = 8: sequences 32..39 of 375, so in[0] is token 32*8 */
            CHECK(!memcmp(in, ref_in[k], sizeof in) && !memcmp(tg, ref_tg[k], sizeof tg) && in[0] == src_tok(256, big) &&
                      tg[63] == src_tok(40 * 8, big),
                  name, "batch differs from the nanoGPT/llm.c one");
            data_close(&d);
        }
    }
    /* the writer refuses what the format cannot hold, and leaves nothing */
    int64_t big = 1;
    int rc = data_write(check_path("w16"), DATA_NANOGPT, DATA_U16, gen_src, &big, n, NULL, 0, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "does not fit u16") && access(check_path("w16.bin"), F_OK) != 0 &&
              access(check_path("w16.bin.tmp"), F_OK) != 0, "data_write_refuses_id_too_wide", "rc %d: %s", rc, err);
    rc = data_write(check_path("w32"), DATA_MEGATRON, DATA_U32, gen_src, &big, n, NULL, 0, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "cannot hold"), "data_write_megatron_has_no_u32", "rc %d: %s", rc, err);
    rc = data_write(check_path("nodir/x"), DATA_NPY, DATA_U16, gen_src, &big, n, NULL, 0, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "cannot create"), "data_write_bad_dir", "rc %d: %s", rc, err);
}

/* ---- files built by hand in each format's published layout ------------------------------------ */
static void llmc_file(const char *p, int32_t magic, int32_t version, int32_t count, int eb, int ntok) {
    buf_t *b = calloc(1, sizeof *b);
    int32_t h[256] = {magic, version, count};
    put(b, h, sizeof h);
    for (int i = 0; i < ntok; i++) {
        uint32_t v = (uint32_t)(i * 5 % 256);
        put(b, &v, (size_t)eb);
    }
    check_write_file(p, b->b, b->n);
    free(b);
}

static void npy_file(const char *p, int major, const char *dict, const void *data, size_t bytes) {
    buf_t *b = calloc(1, sizeof *b);
    put(b, "\x93NUMPY", 6);
    unsigned char v[2] = {(unsigned char)major, 0};
    put(b, v, 2);
    size_t pre = major == 1 ? 10 : 12, len = strlen(dict) + 1;
    while ((pre + len) % 64) len++;
    if (major == 1) { uint16_t l = (uint16_t)len; put(b, &l, 2); }
    else { uint32_t l = (uint32_t)len; put(b, &l, 4); }
    size_t at = b->n;
    memset(b->b + at, ' ', len);
    memcpy(b->b + at, dict, strlen(dict));
    b->b[at + len - 1] = '\n';
    b->n += len;
    put(b, data, bytes);
    check_write_file(p, b->b, b->n);
    free(b);
}

/* Megatron pair PREFIX.bin/.idx: sequences (len[i], ptr[i]) over bin, docs[D] */
static void megatron_files(const char *prefix, int code, int S, const int32_t *len, const int64_t *ptr, int D,
                           const int64_t *docs, const void *bin, size_t bin_bytes, uint64_t version) {
    char p[600];
    snprintf(p, sizeof p, "%s.bin", prefix);
    check_write_file(p, bin, bin_bytes);
    buf_t *b = calloc(1, sizeof *b);
    put(b, "MMIDIDX\0\0", 9);
    put_u64(b, version);
    unsigned char c = (unsigned char)code;
    put(b, &c, 1);
    put_u64(b, (uint64_t)S);
    put_u64(b, (uint64_t)D);
    put(b, len, 4 * (size_t)S);
    put(b, ptr, 8 * (size_t)S);
    put(b, docs, 8 * (size_t)D);
    snprintf(p, sizeof p, "%s.idx", prefix);
    check_write_file(p, b->b, b->n);
    free(b);
}

static void test_hand_built(void) {
    data_file d;
    /* llm.c uint16 and uint32 */
    const char *p = check_path("llmc.bin");
    llmc_file(p, 20240520, 1, 100, 2, 100);
    int rc = data_open(&d, p, 256, 8, 0, err, sizeof err);
    int64_t v[100];
    if (rc == 0) data_read(&d, 0, 100, v, NULL, 0);
    CHECK(rc == 0 && d.ntokens == 100 && d.format == DATA_LLMC && v[99] == 99 * 5 % 256, "llmc_v1_u16_by_hand",
          "rc %d: %s", rc, err);
    if (rc == 0) data_close(&d);
    llmc_file(p, 20240801, 7, 100, 4, 100);
    rc = data_open(&d, p, 256, 8, 0, err, sizeof err);
    if (rc == 0) data_read(&d, 0, 100, v, NULL, 0);
    CHECK(rc == 0 && d.dtype == DATA_U32 && v[51] == 51 * 5 % 256, "llmc_v7_u32_by_hand", "rc %d: %s", rc, err);
    if (rc == 0) data_close(&d);
    llmc_file(p, 20240520, 7, 100, 2, 100);
    expect_bad_named("llmc_bad_version", p, p, "version 7 (expected 1)");
    llmc_file(p, 20240801, 1, 100, 4, 100);
    expect_bad_named("llmc_bad_version_u32", p, p, "version 1 (expected 7)");
    llmc_file(p, 20240520, 1, 101, 2, 100);
    expect_bad_named("llmc_count_larger_than_file", p, p, "says 101 tokens but the file holds 100");
    llmc_file(p, 20240520, 1, 99, 2, 100);
    expect_bad_named("llmc_count_smaller_than_file", p, p, "says 99 tokens but the file holds 100");
    llmc_file(p, 20240520, 1, -1, 2, 100);
    expect_bad_named("llmc_count_negative", p, p, "says -1 tokens");
    int32_t magic = 20240520;
    check_write_file(p, &magic, 4); /* the magic alone */
    expect_bad_named("llmc_header_truncated", p, p, "the header alone is 1024");

    /* .npy versions 1, 2 and 3, and every refusal */
    int32_t i4[50];
    for (int i = 0; i < 50; i++) i4[i] = i * 3;
    p = check_path("a.npy");
    for (int major = 1; major <= 3; major++) {
        npy_file(p, major, "{'descr': '<i4', 'fortran_order': False, 'shape': (50,), }", i4, sizeof i4);
        rc = data_open(&d, p, 256, 8, 0, err, sizeof err);
        if (rc == 0) data_read(&d, 0, 50, v, NULL, 0);
        char name[64];
        snprintf(name, sizeof name, "npy_v%d_by_hand", major);
        CHECK(rc == 0 && d.format == DATA_NPY && d.ntokens == 50 && v[49] == 147, name, "rc %d: %s", rc, err);
        if (rc == 0) data_close(&d);
    }
    npy_file(p, 1, "{\"shape\": (50,), \"fortran_order\": False, \"descr\": \"<i4\"}", i4, sizeof i4);
    rc = data_open(&d, p, 256, 8, 0, err, sizeof err);
    CHECK(rc == 0 && d.ntokens == 50, "npy_keys_any_order_and_quotes", "rc %d: %s", rc, err);
    if (rc == 0) data_close(&d);
    i4[20] = -4;
    npy_file(p, 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (50,), }", i4, sizeof i4);
    expect_bad_named("npy_negative_id", p, p, "token -4 at index 20 is negative");
    int64_t i8[50] = {0};
    i8[33] = -((int64_t)1 << 40);
    npy_file(p, 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (50,), }", i8, sizeof i8);
    expect_bad_named("npy_negative_i8_id", p, p, "at index 33 is negative");
    uint32_t u4[50] = {0};
    u4[49] = 128256;
    npy_file(p, 1, "{'descr': '<u4', 'fortran_order': False, 'shape': (50,), }", u4, sizeof u4);
    expect_bad_data("npy_u4_id_ge_vocab", p, 128256, 4, "token 128256 at index 49 >= vocab_size 128256");
    npy_file(p, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (50,), }", u4, sizeof u4);
    expect_bad_named("npy_float_dtype", p, p, "dtype '<f4' is not a token type");
    npy_file(p, 1, "{'descr': '>u2', 'fortran_order': False, 'shape': (100,), }", u4, sizeof u4);
    expect_bad_named("npy_big_endian", p, p, "big-endian");
    npy_file(p, 1, "{'descr': '<u2', 'fortran_order': True, 'shape': (100,), }", u4, sizeof u4);
    expect_bad_named("npy_fortran_order", p, p, "C order");
    npy_file(p, 1, "{'descr': '<u2', 'fortran_order': False, 'shape': (10, 10), }", u4, sizeof u4);
    expect_bad_named("npy_two_dimensional", p, p, "one-dimensional");
    npy_file(p, 1, "{'descr': '<u2', 'fortran_order': False, 'shape': (), }", u4, sizeof u4);
    expect_bad_named("npy_zero_dimensional", p, p, "one-dimensional");
    npy_file(p, 1, "{'descr': '<u2', 'fortran_order': False, 'shape': (101,), }", u4, sizeof u4);
    expect_bad_named("npy_shape_larger_than_file", p, p, "says 101 tokens but the file holds 100");
    npy_file(p, 1, "{'descr': '<u4', 'fortran_order': False, 'shape': (49,), }", u4, sizeof u4);
    expect_bad_named("npy_shape_smaller_than_file", p, p, "says 49 tokens but the file holds 50");
    npy_file(p, 4, "{'descr': '<u2', 'fortran_order': False, 'shape': (100,), }", u4, sizeof u4);
    expect_bad_named("npy_version_4", p, p, "format version 4.0");
    check_write_file(p, "\x93NUMPY\x01\x00\xff\x7f{'descr'", 17);
    expect_bad_named("npy_header_length_past_end", p, p, "header length 32767 is larger than the file");

    /* Megatron: a stream in index order, not file order; prefix, .bin and .idx all name it */
    uint16_t bin[60];
    for (int i = 0; i < 60; i++) bin[i] = (uint16_t)(i + 100);
    int32_t len[3] = {10, 20, 15};
    int64_t ptr[3] = {80, 0, 40}, docs[3] = {0, 2, 3}; /* bytes: seq 0 = bin[40..50), seq 1 = bin[0..20), seq 2 = bin[20..35) */
    const char *pre = check_path("meg");
    megatron_files(pre, 8, 3, len, ptr, 3, docs, bin, sizeof bin, 1);
    const char *names[] = {"meg", "meg.bin", "meg.idx"};
    for (int k = 0; k < 3; k++) {
        rc = data_open(&d, check_path(names[k]), 256, 8, 0, err, sizeof err);
        int ok = rc == 0 && d.format == DATA_MEGATRON && d.ntokens == 45 && d.nruns == 2;
        if (ok) {
            data_read(&d, 0, 45, v, NULL, 0);
            for (int i = 0; i < 45; i++) ok &= v[i] == (i < 10 ? 140 + i : 100 + (i - 10));
            int32_t in[8], tg[8]; /* sequence 1 = stream [8, 17): crosses from the first run into the second */
            data_batch(&d, 1, 1, 0, 1, 8, in, tg, NULL, 0);
            ok &= in[0] == 148 && in[1] == 149 && in[2] == 100 && tg[7] == 106;
        }
        char name[64];
        snprintf(name, sizeof name, "megatron_by_hand_as_%s", names[k]);
        CHECK(ok, name, "rc %d runs %lld ntokens %lld: %s", rc, rc ? 0LL : (long long)d.nruns,
              rc ? 0LL : (long long)d.ntokens, err);
        if (rc == 0) data_close(&d);
    }
    char idx[600], binp[600];
    snprintf(idx, sizeof idx, "%s.idx", pre), snprintf(binp, sizeof binp, "%s.bin", pre);
    /* adjacent sequences form one run: constant memory for the usual, contiguous index */
    int64_t cptr[3] = {0, 20, 60};
    megatron_files(pre, 8, 3, len, cptr, 3, docs, bin, sizeof bin, 1);
    rc = data_open(&d, pre, 256, 8, 0, err, sizeof err);
    CHECK(rc == 0 && d.nruns == 1 && d.ntokens == 45, "megatron_contiguous_is_one_run", "rc %d: %s", rc, err);
    if (rc == 0) data_close(&d);
    megatron_files(pre, 8, 3, len, cptr, 3, docs, bin, sizeof bin, 2);
    expect_bad_named("megatron_bad_version", pre, idx, "version 2 (expected 1)");
    megatron_files(pre, 7, 3, len, cptr, 3, docs, bin, sizeof bin, 1);
    expect_bad_named("megatron_float_dtype_7", pre, idx, "dtype code 7 is not a token type");
    megatron_files(pre, 6, 3, len, cptr, 3, docs, bin, sizeof bin, 1);
    expect_bad_named("megatron_float_dtype_6", pre, idx, "dtype code 6");
    megatron_files(pre, 8, 3, len, cptr, 2, docs, bin, sizeof bin, 1); /* D = 2 but docs[1] != 3 */
    expect_bad_named("megatron_bad_document_index", pre, idx, "document index 1 is 2");
    int64_t optr[3] = {0, 20, 100};
    megatron_files(pre, 8, 3, len, optr, 3, docs, bin, sizeof bin, 1);
    expect_bad_named("megatron_pointer_outside_bin", pre, idx, "sequence 2 (15 tokens at byte 100) lies outside");
    if (!strstr(err, binp)) CHECK(0, "megatron_pointer_outside_bin_names_bin", "%s", err);
    int32_t nlen[3] = {10, -20, 15};
    megatron_files(pre, 8, 3, nlen, cptr, 3, docs, bin, sizeof bin, 1);
    expect_bad_named("megatron_negative_length", pre, idx, "sequence 1 has a negative length -20");
    megatron_files(pre, 8, 3, len, cptr, 3, docs, bin, sizeof bin, 1);
    FILE *fp = fopen(idx, "ab");
    fputc(0, fp), fclose(fp);
    expect_bad_named("megatron_index_size_mismatch", pre, idx, "does not match");
    check_write_file(idx, "MMIDIDY\0\0", 9);
    expect_bad_named("megatron_bad_magic", pre, idx, "not a Megatron index");
    int32_t bi[30]; /* int32 ids; two sequences that overlap in the .bin: [0, 10) and [5, 25) */
    for (int i = 0; i < 30; i++) bi[i] = i;
    bi[3] = -7;
    megatron_files(pre, 4, 2, len, cptr, 3, (int64_t[]){0, 1, 2}, bi, sizeof bi, 1);
    expect_bad_named("megatron_negative_id", pre, binp, "token -7 at index 3 is negative");
    unlink(binp);
    expect_bad_named("megatron_missing_bin", pre, binp, "cannot open");
}

/* ---- a sparse multi-GB file: constant memory, and the id scan's rate --------------------------- */
static long rss_anon_kib(void) {
    FILE *fp = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (fp && fgets(line, sizeof line, fp))
        if (sscanf(line, "RssAnon: %ld", &v) == 1) break;
    if (fp) fclose(fp);
    return v;
}
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void test_sparse_big(void) {
    const char *p = check_path("sparse.bin");
    const int64_t bytes = (int64_t)5 << 29; /* 2.5 GiB: 1.34e9 tokens, byte offsets past 2^31 */
    int fd = open(p, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    uint16_t tail[4] = {1, 2, 3, 4};
    int ok = fd >= 0 && ftruncate(fd, bytes) == 0 && pwrite(fd, tail, sizeof tail, bytes - (int64_t)sizeof tail) == 8;
    if (fd >= 0) close(fd);
    if (!ok) {
        SKIP("data_sparse_big", "cannot create a sparse 2.5 GiB file here");
        return;
    }
    long before = rss_anon_kib();
    data_file d;
    double t0 = now_s();
    int rc = data_open(&d, p, 256, 3, 0, err, sizeof err);
    double cold = now_s() - t0;
    long after = rss_anon_kib();
    CHECK(rc == 0 && d.ntokens == bytes / 2, "data_sparse_big_opens", "rc %d: %s", rc, err);
    CHECK(before > 0 && after - before < 1024, "data_sparse_big_constant_memory",
          "anonymous memory grew by %ld KiB opening a 2.5 GiB file", after - before);
    if (rc != 0) return;
    int64_t N = data_num_sequences(&d, 3);
    int32_t in[3], tg[3];
    data_batch(&d, N - 1, 1, 0, 1, 3, in, tg, NULL, 0); /* the last sequence, stream [3(N-1), 3N], reaches into the tail */
    int64_t M = bytes / 2, s0 = 3 * (N - 1);
    ok = 1;
    for (int t = 0; t < 3; t++) {
        int64_t a = s0 + t, b = s0 + t + 1;
        ok &= in[t] == (a >= M - 4 ? tail[a - (M - 4)] : 0) && tg[t] == (b >= M - 4 ? tail[b - (M - 4)] : 0);
    }
    CHECK(ok && tg[2] != 0, "data_sparse_big_last_batch", "in %d %d %d tg %d %d %d", in[0], in[1], in[2], tg[0],
          tg[1], tg[2]);
    data_close(&d);
    t0 = now_s();
    rc = data_open(&d, p, 256, 3, 0, err, sizeof err);
    double warm = now_s() - t0;
    if (rc == 0) data_close(&d);
    printf("#    id scan of %.2f GB (uint16): %.2f GB/s from holes (first open), %.2f GB/s with the pages cached\n",
           bytes / 1e9, bytes / 1e9 / cold, bytes / 1e9 / warm);
    unlink(p);
}

/* ---- synthetic tokens ------------------------------------------------------------------------- */
static void test_synthetic(void) {
    data_file s1, s2, s3;
    int rc = data_open(&s1, "synthetic", 1000, 16, 42, err, sizeof err);
    int rc2 = data_open(&s2, "synthetic", 1000, 16, 42, err, sizeof err);
    int rc3 = data_open(&s3, "synthetic", 1000, 16, 43, err, sizeof err);
    CHECK(rc == 0 && rc2 == 0 && rc3 == 0 && s1.synthetic && s1.map == NULL, "data_synthetic_open", "%s", err);
    CHECK(data_num_sequences(&s1, 16) == (int64_t)1 << 30, "data_synthetic_num_sequences", "%lld",
          (long long)data_num_sequences(&s1, 16));
    int32_t a_in[64], a_tg[64], b_in[64], b_tg[64], c_in[64], c_tg[64];
    data_batch(&s1, 5, 8, 1, 4, 16, a_in, a_tg, NULL, 0);
    data_batch(&s2, 5, 8, 1, 4, 16, b_in, b_tg, NULL, 0);
    data_batch(&s3, 5, 8, 1, 4, 16, c_in, c_tg, NULL, 0);
    CHECK(!memcmp(a_in, b_in, sizeof a_in) && !memcmp(a_tg, b_tg, sizeof a_tg), "data_synthetic_deterministic",
          "two opens differ");
    int same = 0;
    for (int i = 0; i < 64; i++) same += a_in[i] == c_in[i];
    CHECK(same < 8, "data_synthetic_seed_matters", "%d of 64 equal across seeds", same);
    /* consecutive sequences 44..47: target t = input t+1, and the last target is the next sequence's first input */
    int ok = 1;
    for (int s = 0; s < 4; s++) {
        for (int t = 0; t + 1 < 16; t++) ok &= a_tg[s * 16 + t] == a_in[s * 16 + t + 1];
        if (s < 3) ok &= a_tg[s * 16 + 15] == a_in[(s + 1) * 16];
    }
    CHECK(ok, "data_synthetic_target_is_next_input", "overlap broken");
    int32_t g_in[128], g_tg[128];
    data_batch(&s1, 5, 8, 0, 8, 16, g_in, g_tg, NULL, 0);
    CHECK(!memcmp(g_in + 64, a_in, sizeof a_in), "data_synthetic_rank_major", "dp split differs");
    /* uniform over [0, V): 160000 draws over 16 values, each count within 5 sigma (~500) of 10000 */
    data_file u;
    data_open(&u, "synthetic", 16, 1000, 7, err, sizeof err);
    int32_t *ui = malloc(160 * 1000 * sizeof(int32_t)), *ut = malloc(160 * 1000 * sizeof(int32_t));
    data_batch(&u, 0, 160, 0, 160, 1000, ui, ut, NULL, 0);
    int hist[16] = {0}, inrange = 1;
    for (int i = 0; i < 160000; i++) {
        if (ui[i] < 0 || ui[i] >= 16) inrange = 0;
        else hist[ui[i]]++;
    }
    int worst = 0;
    for (int v = 0; v < 16; v++) worst = abs(hist[v] - 10000) > worst ? abs(hist[v] - 10000) : worst;
    CHECK(inrange && worst < 500, "data_synthetic_uniform", "in range %d, worst deviation %d", inrange, worst);
    free(ui), free(ut);
    data_file big;
    data_open(&big, "synthetic", 128256, 64, 1, err, sizeof err);
    int32_t bi[64 * 8], bt[64 * 8];
    data_batch(&big, 3, 8, 0, 8, 64, bi, bt, NULL, 0);
    int hi = 0, okr = 1;
    for (int i = 0; i < 512; i++) hi += bi[i] >= 65536, okr &= bi[i] >= 0 && bi[i] < 128256;
    CHECK(okr && hi > 100, "data_synthetic_large_vocab", "%d of 512 above 65535, in range %d", hi, okr);
    data_close(&s1), data_close(&s2), data_close(&s3), data_close(&u), data_close(&big);
}

/* ---- build/mkdata ----------------------------------------------------------------------------- */
static int run_prog(char *const argv[]) {
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) dup2(fd, 1), dup2(fd, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    int st;
    if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st)) return -1;
    return WEXITSTATUS(st);
}

static int tmp_left(const char *d) {
    DIR *dd = opendir(d);
    int n = 0;
    struct dirent *e;
    while (dd && (e = readdir(dd))) n += strstr(e->d_name, ".tmp") != NULL;
    if (dd) closedir(dd);
    return n;
}

static void test_mkdata(void) {
    const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
    char prog[512];
    snprintf(prog, sizeof prog, "%s/mkdata", build);
    if (access(prog, X_OK) != 0) {
        SKIP("mkdata", "build/mkdata not built");
        return;
    }
    const char *txt = check_path("text.txt");
    size_t n = 1019; /* val = floor(1019 * 0.05) = 50, train = 969 */
    unsigned char *text = malloc(n);
    for (size_t i = 0; i < n; i++) text[i] = (unsigned char)((i * 31 + 7) % 256);
    check_write_file(txt, text, n);
    const char *fmts[] = {"nanogpt", "llmc", "npy", "megatron"};
    for (int f = 0; f < 4; f++) {
        char out[512], tr[600], va[600], name[96];
        snprintf(out, sizeof out, "%s/kjv_%s", check_scratch, fmts[f]);
        int rc = run_prog((char *const[]){prog, "--format", (char *)fmts[f], (char *)txt, out, NULL});
        const char *ext = f == 2 ? "npy" : "bin";
        snprintf(tr, sizeof tr, "%s/train.%s", out, ext), snprintf(va, sizeof va, "%s/val.%s", out, ext);
        data_file dt, dv;
        int r1 = data_open(&dt, tr, 256, 1, 0, err, sizeof err);
        int r2 = data_open(&dv, va, 256, 1, 0, err, sizeof err);
        snprintf(name, sizeof name, "mkdata_%s_split_5_percent", fmts[f]);
        CHECK(rc == 0 && r1 == 0 && r2 == 0 && dt.ntokens == 969 && dv.ntokens == 50 && (int)dt.format == f, name,
              "rc %d %d %d train %lld val %lld: %s", rc, r1, r2, r1 ? -1LL : (long long)dt.ntokens,
              r2 ? -1LL : (long long)dv.ntokens, err);
        if (rc == 0 && r1 == 0 && r2 == 0) {
            int64_t t[969];
            int ok = 1;
            data_read(&dt, 0, 969, t, NULL, 0);
            for (int64_t i = 0; i < 969; i++) ok &= t[i] == text[i];
            data_read(&dv, 0, 50, t, NULL, 0);
            for (int64_t i = 0; i < 50; i++) ok &= t[i] == text[969 + i];
            snprintf(name, sizeof name, "mkdata_%s_bytes_are_tokens", fmts[f]);
            CHECK(ok, name, "token mismatch");
        }
        if (r1 == 0) data_close(&dt);
        if (r2 == 0) data_close(&dv);
        snprintf(name, sizeof name, "mkdata_%s_no_temp_left", fmts[f]);
        CHECK(tmp_left(out) == 0, name, "%d temp files", tmp_left(out));
    }
    /* conversion: llm.c uint32 from the npy train file, then back to nanoGPT: the same tokens */
    char src[600], mid[600], back[600];
    snprintf(src, sizeof src, "%s/kjv_npy/train.npy", check_scratch);
    snprintf(mid, sizeof mid, "%s/conv32.bin", check_scratch), snprintf(back, sizeof back, "%s/conv16.bin", check_scratch);
    int rc1 = run_prog((char *const[]){prog, "--convert", "--format", "llmc", "--dtype", "u32", src, mid, NULL});
    int rc2 = run_prog((char *const[]){prog, "--convert", mid, back, NULL});
    data_file a, b;
    int ra = data_open(&a, mid, 256, 1, 0, err, sizeof err), rb = data_open(&b, back, 256, 1, 0, err, sizeof err);
    int ok = rc1 == 0 && rc2 == 0 && ra == 0 && rb == 0 && a.dtype == DATA_U32 && a.format == DATA_LLMC &&
             b.format == DATA_NANOGPT && b.ntokens == 969;
    if (ok) {
        int64_t t[969];
        data_read(&b, 0, 969, t, NULL, 0);
        for (int i = 0; i < 969; i++) ok &= t[i] == text[i];
    }
    CHECK(ok, "mkdata_convert_round_trip", "rc %d %d open %d %d: %s", rc1, rc2, ra, rb, err);
    if (ra == 0) data_close(&a);
    if (rb == 0) data_close(&b);
    char out[512];
    snprintf(out, sizeof out, "%s/kjv_nanogpt", check_scratch);
    CHECK(run_prog((char *const[]){prog, NULL}) == 2, "mkdata_usage_exit_2", "wrong exit");
    CHECK(run_prog((char *const[]){prog, "--format", "parquet", (char *)txt, out, NULL}) == 2,
          "mkdata_unknown_format_exit_2", "wrong exit");
    CHECK(run_prog((char *const[]){prog, "--format", "nanogpt", "--dtype", "u32", (char *)txt, out, NULL}) == 2,
          "mkdata_format_dtype_mismatch_exit_2", "wrong exit");
    CHECK(run_prog((char *const[]){prog, (char *)check_path("no-such.txt"), out, NULL}) == 2, "mkdata_missing_input_exit_2",
          "wrong exit");
    CHECK(run_prog((char *const[]){prog, "--convert", (char *)check_path("no-such.bin"), (char *)check_path("x.bin"), NULL}) == 2,
          "mkdata_convert_missing_input_exit_2", "wrong exit");
    /* a 1-byte text: refused, no (empty) val.bin written */
    const char *one = check_path("one.txt");
    check_write_file(one, "a", 1);
    char od[600], ov[700];
    snprintf(od, sizeof od, "%s/one_out", check_scratch);
    snprintf(ov, sizeof ov, "%s/val.bin", od);
    int rc = run_prog((char *const[]){prog, (char *)one, od, NULL});
    CHECK(rc == 2 && access(ov, F_OK) != 0, "mkdata_one_byte_refused_no_val", "rc %d, val.bin exists %d", rc,
          access(ov, F_OK) == 0);
    CHECK(run_prog((char *const[]){prog, (char *)txt, (char *)check_path("a/b/c"), NULL}) == 1,
          "mkdata_bad_outdir_exit_1", "wrong exit");
    free(text);
}


/* ---- almost a known format: refused, never read as headerless tokens; the .npy header strictly ------ */
static void test_near_formats(void) {
    const char *p = check_path("near.bin");
    uint16_t body[200];
    for (int i = 0; i < 200; i++) body[i] = (uint16_t)(i % 256);
    const struct { const char *name; int32_t magic, version, count; } llmc[] = {
        {"near_llmc_magic_plus_1", 20240521, 1, 200}, {"near_llmc_magic_minus_1", 20240519, 1, 200},
        {"near_llmc_v7_magic_plus_1", 20240802, 7, 100}, {"near_llmc_magic_one_byte", 20240520 ^ 0x7f, 1, 200},
        {"near_llmc_magic_zero_version_count_intact", 0, 1, 200}, {"near_llmc_magic_and_version_zero", 0, 0, 200},
        {"near_llmc_magic_plus_999", 20240520 + 999, 3, 5},
    };
    for (size_t k = 0; k < sizeof llmc / sizeof llmc[0]; k++) {
        llmc_file(p, llmc[k].magic, llmc[k].version, llmc[k].count, 2, 200);
        expect_bad_data(llmc[k].name, p, 65536, 4, "looks like an llm.c token file with a damaged header");
    }
    const char *npy_magics[] = {"\x92NUMPY", "\x93NUMPZ", "\x93NUM\0\0", "\x93numpy"};
    for (int k = 0; k < 4; k++) {
        npy_file(p, 1, "{'descr': '<u2', 'fortran_order': False, 'shape': (200,), }", body, sizeof body);
        FILE *fp = fopen(p, "r+b");
        if (fp) fwrite(npy_magics[k], 1, 6, fp), fclose(fp);
        char name[64];
        snprintf(name, sizeof name, "near_npy_damaged_magic_%d", k);
        expect_bad_data(name, p, 65536, 4, "looks like a .npy file with a damaged header");
    }
    unsigned char st[64] = {0};
    memcpy(st, "\x20\0\0\0\0\0\0\0{\"a\": {\"dtype\": \"F32\"}}        ", 40);
    check_write_file(p, st, sizeof st);
    expect_bad_data("near_safetensors_as_tokens", p, 65536, 4, "looks like a safetensors file");
    check_write_file(p, "PK\x03\x04zzzzzzzz", 12);
    expect_bad_data("near_npz_zip_as_tokens", p, 65536, 4, "looks like a zip archive");
    /* real headerless data stays readable, including data that begins like llm.c's magic word */
    uint16_t plain[200];
    for (int i = 0; i < 200; i++) plain[i] = (uint16_t)(i * 3 % 256);
    plain[0] = 0xD888, plain[1] = 0x0200; /* the low half of 20240520 (0x0134D888), then two bytes off */
    write_tokens(p, plain, 200);
    data_file d;
    int rc = data_open(&d, p, 65536, 4, 0, err, sizeof err);
    CHECK(rc == 0 && d.format == DATA_NANOGPT && d.ntokens == 200, "headerless_still_read", "rc %d: %s", rc, err);
    if (rc == 0) data_close(&d);

    /* .npy headers parsed strictly: a value that only starts right, a key too many or twice, text after */
    const struct { const char *name, *dict, *want; } npy[] = {
        {"npy_fortran_order_falsey", "{'descr': '<u2', 'fortran_order': Falsey, 'shape': (200,), }", "not separated by ','"},
        {"npy_fortran_order_truthy", "{'descr': '<u2', 'fortran_order': Truex, 'shape': (200,), }", "not separated by ','"},
        {"npy_fortran_order_number", "{'descr': '<u2', 'fortran_order': 0, 'shape': (200,), }", "not True or False"},
        {"npy_extra_key", "{'descr': '<u2', 'fortran_order': False, 'shape': (200,), 'x': 1}", "a key other than"},
        {"npy_key_twice", "{'descr': '<u2', 'descr': '<u2', 'fortran_order': False, 'shape': (200,)}", "names a key twice"},
        {"npy_missing_key", "{'descr': '<u2', 'shape': (200,), }", "lacks one of"},
        {"npy_text_after_dict", "{'descr': '<u2', 'fortran_order': False, 'shape': (200,), } x", "text after the dictionary"},
        {"npy_shape_not_a_tuple", "{'descr': '<u2', 'fortran_order': False, 'shape': (200), }", "not a tuple"},
        {"npy_shape_not_integers", "{'descr': '<u2', 'fortran_order': False, 'shape': (2e2,), }", "not a tuple of integers"},
        {"npy_descr_unquoted", "{'descr': <u2, 'fortran_order': False, 'shape': (200,), }", "descr that is not a short string"},
    };
    for (size_t k = 0; k < sizeof npy / sizeof npy[0]; k++) {
        npy_file(p, 1, npy[k].dict, body, sizeof body);
        expect_bad_data(npy[k].name, p, 256, 4, npy[k].want);
    }
    npy_file(p, 1, "{ 'shape' : ( 200 , ) ,'descr':\"<u2\" , 'fortran_order':False}", body, sizeof body);
    rc = data_open(&d, p, 256, 4, 0, err, sizeof err);
    CHECK(rc == 0 && d.ntokens == 200, "npy_header_spacing_and_order_free", "rc %d: %s", rc, err);
    if (rc == 0) data_close(&d);
}

/* ---- a file truncated under its mapping: the reads fail with one line, no SIGBUS -------------------- */
static void test_truncated_under_map(void) {
    const char *p = check_path("shrink.bin");
    static uint16_t t[1 << 16];
    for (int i = 0; i < 1 << 16; i++) t[i] = (uint16_t)(i % 256);
    write_tokens(p, t, 1 << 16);
    data_file d;
    int rc = data_open(&d, p, 256, 16, 0, err, sizeof err);
    CHECK(rc == 0, "shrink_open", "rc %d: %s", rc, err);
    if (rc) return;
    int64_t v[64];
    int32_t in[32], tg[32];
    int ok0 = data_read(&d, 30000, 64, v, err, sizeof err) == 0 && data_batch(&d, 100, 2, 0, 2, 16, in, tg, err, sizeof err) == 0;
    if (truncate(p, 4096) != 0) CHECK(0, "shrink_truncate", "%s", strerror(errno));
    err[0] = 0;
    rc = data_read(&d, 30000, 64, v, err, sizeof err);
    CHECK(ok0 && rc == -1 && strstr(err, "changed while it was read: it is now 4096 bytes, 131072 when opened") &&
              v[0] == 0 && v[63] == 0 && !strchr(err, '\n'), "shrink_data_read_fails_cleanly", "rc %d: %s", rc, err);
    memset(in, 0x7f, sizeof in);
    rc = data_batch(&d, 100, 2, 0, 2, 16, in, tg, err, sizeof err);
    int zeros = 1;
    for (int i = 0; i < 32; i++) zeros &= in[i] == 0 && tg[i] == 0;
    CHECK(rc == -1 && zeros && strstr(err, p), "shrink_data_batch_fails_with_zeros", "rc %d: %s", rc, err);
    rc = data_batch(&d, 0, 2, 0, 2, 16, in, tg, err, sizeof err); /* the part still in the file reads on */
    CHECK(rc == 0 && in[1] == 1, "shrink_data_batch_before_the_cut_still_reads", "rc %d: %s", rc, err);
    data_close(&d);
}

int main(void) {
    if (check_mkscratch("test_data")) {
        printf("FAIL setup: mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    test_layout();
    test_formats();
    test_hand_built();
    test_near_formats();
    test_truncated_under_map();
    test_sparse_big();
    test_synthetic();
    test_mkdata();
    check_rmtree(check_scratch);
    return check_exit();
}
