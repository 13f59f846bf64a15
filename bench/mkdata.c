/* bench/mkdata.c — token files for training, tests and conversion (design 4.3). Two modes:
 *   mkdata [--format F] [--dtype T] TEXT_FILE OUTDIR   byte-level tokens of a text (V = 256): the last
 *       floor(n/20) tokens (5%) to OUTDIR/val.*, the rest to OUTDIR/train.*;
 *   mkdata --convert [--format F] [--dtype T] TOKENS OUT   any token file build/train reads, rewritten as F.
 * The formats and their writers are core/formats/data.h and core/formats/data_write.c (atomic: temp file, fsync,
 * rename). Not a tokenizer: no BPE, no vocabulary file. */
#include "core/formats/data.h"
#include "core/formats/data_write.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *usage =
    "usage: mkdata [--format F] [--dtype T] TEXT_FILE OUTDIR\n"
    "       mkdata --convert [--format F] [--dtype T] TOKENS OUT\n"
    "  Text: one token per byte of TEXT_FILE (vocab 256); the last 5% of the tokens (floor(n*0.05), at least 2)\n"
    "  go to OUTDIR/val.*, the rest to OUTDIR/train.* (OUTDIR is created if missing; the text needs >= 40 bytes).\n"
    "  --convert: read TOKENS (any format build/train reads) and write it whole to OUT as F.\n"
    "  --format nanogpt|llmc|npy|megatron  (default nanogpt) files: nanogpt, llmc .bin; npy .npy;\n"
    "      megatron PREFIX.bin + PREFIX.idx (text: one sequence per line; conversion: blocks of 2^20 tokens)\n"
    "  --dtype u16|u32|i32|i64  token type (default u16, or u32 / i32 for megatron when an id is >= 65536);\n"
    "      nanogpt holds u16, llmc u16 or u32, megatron anything but u32\n"
    "  Exit 0 ok, 1 I/O error, 2 bad usage or bad input.\n";

static int lookup(const char *s, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0) return i;
    return -1;
}

static void bytes_src(void *ctx, int64_t first, int64_t n, int64_t *dst) {
    const unsigned char *p = ctx;
    for (int64_t i = 0; i < n; i++) dst[i] = p[first + i];
}
static void file_src(void *ctx, int64_t first, int64_t n, int64_t *dst) { data_read(ctx, first, n, dst); }

/* one text split: Megatron sequences end after each newline */
static int write_text(const char *dir, const char *name, int fmt, int dtype, unsigned char *p, int64_t n) {
    char stem[4200], err[512];
    snprintf(stem, sizeof stem, "%s/%s", dir, name);
    int64_t *ends = malloc((size_t)(n + 1) * sizeof *ends), ns = 0;
    if (!ends) return fprintf(stderr, "mkdata: out of memory\n"), 1;
    for (int64_t i = 0; i < n; i++)
        if (p[i] == '\n' || i + 1 == n) ends[ns++] = i + 1;
    int rc = data_write(stem, fmt, dtype, bytes_src, p, n, ends, ns, err, sizeof err);
    free(ends);
    if (rc) fprintf(stderr, "mkdata: %s\n", err);
    return rc ? 1 : 0;
}

static int convert(const char *in, const char *out, int fmt, int dtype) {
    data_file d;
    char err[1024], stem[4200];
    if (data_open(&d, in, INT32_MAX, 1, 0, err, sizeof err)) return fprintf(stderr, "mkdata: %s\n", err), 2;
    int64_t mx = 0, buf[4096];
    for (int64_t i = 0; i < d.ntokens && dtype < 0; i += 4096) {
        int64_t m = d.ntokens - i < 4096 ? d.ntokens - i : 4096;
        data_read(&d, i, m, buf);
        for (int64_t k = 0; k < m; k++) mx = buf[k] > mx ? buf[k] : mx;
    }
    snprintf(stem, sizeof stem, "%s", out);
    size_t len = strlen(stem), el = strlen(data_write_ext(fmt));
    if (len > el && (strcmp(stem + len - el, data_write_ext(fmt)) == 0 ||
                     (fmt == DATA_MEGATRON && strcmp(stem + len - 4, ".idx") == 0)))
        stem[len - el] = 0;
    int rc = data_write(stem, fmt, dtype < 0 ? data_write_default_dtype(fmt, mx) : (data_dtype)dtype, file_src, &d,
                        d.ntokens, NULL, 0, err, sizeof err);
    if (rc) fprintf(stderr, "mkdata: %s\n", err);
    else printf("mkdata: %s: %lld tokens -> %s as %s\n", in, (long long)d.ntokens, out, data_format_names[fmt]);
    data_close(&d);
    return rc ? 1 : 0;
}

int main(int argc, char **argv) {
    int fmt = DATA_NANOGPT, dtype = -1, conv = 0, npos = 0;
    const char *pos[2] = {NULL, NULL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return fputs(usage, stdout), 0;
        if (!strcmp(a, "--convert")) conv = 1;
        else if (!strcmp(a, "--format") || !strcmp(a, "--dtype")) {
            int isf = a[2] == 'f';
            int v = i + 1 < argc ? (isf ? lookup(argv[i + 1], data_format_names, DATA_SYNTHETIC)
                                        : lookup(argv[i + 1], data_dtype_names, DATA_NDTYPES)) : -1;
            if (v < 0 || (!isf && v != DATA_U16 && v != DATA_U32 && v != DATA_I32 && v != DATA_I64)) {
                fprintf(stderr, "mkdata: %s expects %s (see mkdata --help)\n", a,
                        isf ? "nanogpt, llmc, npy or megatron" : "u16, u32, i32 or i64");
                return 2;
            }
            *(isf ? &fmt : &dtype) = v, i++;
        } else if (a[0] == '-' && a[1]) return fprintf(stderr, "mkdata: unknown option %s (see mkdata --help)\n", a), 2;
        else if (npos < 2 && *a) pos[npos++] = a;
        else npos = 3;
    }
    if (npos != 2) {
        fprintf(stderr, "mkdata: expected %s (see mkdata --help)\n", conv ? "TOKENS OUT" : "TEXT_FILE OUTDIR");
        return 2;
    }
    if (dtype >= 0 && !data_write_dtype_ok(fmt, dtype)) {
        fprintf(stderr, "mkdata: --format %s cannot hold --dtype %s\n", data_format_names[fmt], data_dtype_names[dtype]);
        return 2;
    }
    if (conv) return convert(pos[0], pos[1], fmt, dtype);
    const char *text = pos[0], *outdir = pos[1];
    FILE *fp = fopen(text, "rb");
    struct stat sb;
    if (!fp) return fprintf(stderr, "mkdata: cannot open %s: %s\n", text, strerror(errno)), 2;
    if (fstat(fileno(fp), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(fp);
        return fprintf(stderr, "mkdata: %s is not a readable regular file\n", text), 2;
    }
    size_t n = (size_t)sb.st_size;
    if (n < 40) { /* val = floor(n/20) must hold T+1 = 2 tokens */
        fclose(fp);
        return fprintf(stderr, "mkdata: %s has %zu bytes: too few tokens (at least 40, so that the 5%% for "
                       "validation holds 2)\n", text, n), 2;
    }
    unsigned char *bytes = malloc(n);
    if (!bytes || fread(bytes, 1, n, fp) != n) {
        fprintf(stderr, "mkdata: cannot read %s: %s\n", text, bytes ? strerror(errno) : "out of memory");
        free(bytes), fclose(fp);
        return 1;
    }
    fclose(fp); /* read-only stream: nothing to lose on close */
    struct stat ds;
    int bad_dir = mkdir(outdir, 0777) != 0 && errno != EEXIST;
    if (bad_dir) fprintf(stderr, "mkdata: cannot create directory %s: %s\n", outdir, strerror(errno));
    else if ((bad_dir = stat(outdir, &ds) != 0 || !S_ISDIR(ds.st_mode))) fprintf(stderr, "mkdata: %s is not a directory\n", outdir);
    if (bad_dir) return free(bytes), 1;
    size_t nval = n / 20, ntrain = n - nval; /* floor(n * 0.05), exactly */
    if (dtype < 0) dtype = DATA_U16;
    int rc = write_text(outdir, "train", fmt, dtype, bytes, (int64_t)ntrain);
    if (!rc) rc = write_text(outdir, "val", fmt, dtype, bytes + ntrain, (int64_t)nval);
    free(bytes);
    if (!rc)
        printf("mkdata: %s: %zu tokens -> %s/train%s %zu tokens, %s/val%s %zu tokens (vocab 256, %s)\n", text, n, outdir,
               data_write_ext(fmt), ntrain, outdir, data_write_ext(fmt), nval, data_format_names[fmt]);
    return rc;
}
