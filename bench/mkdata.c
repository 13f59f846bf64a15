/* bench/mkdata.c — token files for training, tests and conversion (docs/semantics.md#data-order). Two modes:
 *   mkdata [--format F] [--dtype T] TEXT_FILE OUTDIR   byte-level tokens of a text (V = 256): the last
 *       floor(n/20) tokens (5%) to OUTDIR/val.*, the rest to OUTDIR/train.*;
 *   mkdata --convert [--format F] [--dtype T] TOKENS OUT   any token file build/train reads, rewritten as F.
 * The formats and their writers are core/formats/data.h and core/formats/data_write.c (atomic: temp file, fsync,
 * rename). Not a tokenizer: no BPE, no vocabulary file. */
#include "core/common/cleanup.h"
#include "core/common/cli.h"
#include "core/formats/data.h"
#include "core/formats/data_write.h"
#include "core/run/record.h"
#include "core/common/files.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* Every file the writer would create for stem (STEM.ext, and STEM.idx for megatron) may neither be
 * one of the input's files (the same path, a link, another spelling: files_same) nor sit in a
 * folder it cannot create files in: one line and 2 (refused before anything is written). */
static int check_outputs(const char *stem, int fmt, const char *const *ins, int nin, int writable) {
    char outs[2][4200], err[4600];
    int nout = 1;
    snprintf(outs[0], sizeof outs[0], "%s%s", stem, data_write_ext(fmt));
    if (fmt == DATA_MEGATRON) snprintf(outs[nout++], sizeof outs[1], "%s.idx", stem);
    for (int i = 0; i < nout; i++) {
        for (int k = 0; k < nin; k++)
            if (ins[k] && files_same(outs[i], ins[k])) {
                cli_say("output %s is also the input %s: give another output", outs[i], ins[k]);
                return -1;
            }
        if (writable && files_check_writable(outs[i], err, sizeof err)) {
            cli_say("%s", err);
            return -1;
        }
    }
    return 0;
}

/* a failed write: interrupted (SIGINT/SIGTERM, the temp files already removed) or an I/O error */
static void say_write_error(const char *stem, const char *err) {
    int sig = cleanup_signal();
    if (sig) cli_say("interrupted by %s: %s not written (a file already there is kept)", sig == SIGINT ? "SIGINT" : "SIGTERM", stem);
    else cli_say("%s", err);
}

static int bytes_src(void *ctx, int64_t first, int64_t n, int64_t *dst, char *err, size_t errlen) {
    const unsigned char *p = ctx;
    (void)err, (void)errlen;
    for (int64_t i = 0; i < n; i++) dst[i] = p[first + i];
    return 0;
}
static int file_src(void *ctx, int64_t first, int64_t n, int64_t *dst, char *err, size_t errlen) {
    return data_read(ctx, first, n, dst, err, errlen);
}

/* one text split: Megatron sequences end after each newline */
static int write_text(const char *dir, const char *name, int fmt, int dtype, unsigned char *p, int64_t n) {
    char stem[4200], err[512];
    snprintf(stem, sizeof stem, "%s/%s", dir, name);
    int64_t *ends = malloc((size_t)(n + 1) * sizeof *ends), ns = 0;
    if (!ends) return cli_say("out of memory"), 1;
    for (int64_t i = 0; i < n; i++)
        if (p[i] == '\n' || i + 1 == n) ends[ns++] = i + 1;
    int rc = data_write(stem, fmt, dtype, bytes_src, p, n, ends, ns, err, sizeof err);
    free(ends);
    if (rc) say_write_error(stem, err);
    return rc ? 1 : 0;
}

static int convert(const char *in, const char *out, int fmt, int dtype) {
    data_file d;
    char err[1024], stem[4200];
    if (data_open(&d, in, INT32_MAX, 1, 0, err, sizeof err)) return cli_say("%s", err), 2;
    int64_t mx = 0, buf[4096];
    for (int64_t i = 0; i < d.ntokens && dtype < 0; i += 4096) {
        int64_t m = d.ntokens - i < 4096 ? d.ntokens - i : 4096;
        if (data_read(&d, i, m, buf, err, sizeof err)) return cli_say("%s", err), data_close(&d), 1;
        for (int64_t k = 0; k < m; k++) mx = buf[k] > mx ? buf[k] : mx;
    }
    snprintf(stem, sizeof stem, "%s", out);
    size_t len = strlen(stem), el = strlen(data_write_ext(fmt));
    if (len > el && (strcmp(stem + len - el, data_write_ext(fmt)) == 0 ||
                     (fmt == DATA_MEGATRON && strcmp(stem + len - 4, ".idx") == 0)))
        stem[len - el] = 0;
    /* the input's files: the token file, and a Megatron pair's index */
    char idx[4200] = "";
    if (d.format == DATA_MEGATRON) {
        snprintf(idx, sizeof idx, "%s", d.path);
        size_t il = strlen(idx);
        if (il > 4) snprintf(idx + il - 4, 5, ".idx");
    }
    const char *ins[2] = {d.path, idx[0] ? idx : NULL};
    if (check_outputs(stem, fmt, ins, 2, 1)) return data_close(&d), 2;
    int rc = data_write(stem, fmt, dtype < 0 ? data_write_default_dtype(fmt, mx) : (data_dtype)dtype, file_src, &d,
                        d.ntokens, NULL, 0, err, sizeof err);
    if (rc) say_write_error(stem, err);
    else printf("mkdata: %s: %lld tokens -> %s as %s\n", in, (long long)d.ntokens, out, data_format_names[fmt]);
    data_close(&d);
    return rc ? 1 : 0;
}

/* the text's bytes; 0, or the exit code with its line said */
static int read_text(const char *text, unsigned char **out, size_t *len) {
    /* a FIFO, a device or a folder is refused before it is opened (opening a FIFO blocks until a writer
     * comes), and the open does not block either should the path be swapped for one in between */
    struct stat sb;
    if (stat(text, &sb) == 0 && !S_ISREG(sb.st_mode)) return cli_say("%s is not a readable regular file", text), 2;
    int fd = open(text, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return cli_say("cannot open %s: %s", text, strerror(errno)), 2;
    FILE *fp = fdopen(fd, "rb");
    if (!fp) return close(fd), cli_say("cannot open %s: %s", text, strerror(errno)), 1;
    if (fstat(fileno(fp), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(fp);
        return cli_say("%s is not a readable regular file", text), 2;
    }
    size_t n = (size_t)sb.st_size;
    if (n < 40) { /* val = floor(n/20) must hold T+1 = 2 tokens */
        fclose(fp);
        return cli_say("%s has %zu bytes: too few tokens (at least 40, so that the 5%% for validation holds 2)", text, n), 2;
    }
    unsigned char *bytes = malloc(n);
    if (!bytes || fread(bytes, 1, n, fp) != n) {
        cli_say("cannot read %s: %s", text, bytes ? strerror(errno) : "out of memory");
        free(bytes), fclose(fp);
        return 1;
    }
    fclose(fp); /* read-only stream: nothing to lose on close */
    *out = bytes, *len = n;
    return 0;
}

int main(int argc, char **argv) {
    int fmt = DATA_NANOGPT, dtype = -1, conv = 0, npos = 0;
    const char *pos[2] = {NULL, NULL};
    cli_set_program("mkdata");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return fputs(usage, stdout), 0;
        if (!strcmp(a, "--convert")) conv = 1;
        else if (!strcmp(a, "--format") || !strcmp(a, "--dtype")) {
            int isf = a[2] == 'f';
            int v = i + 1 < argc ? (isf ? lookup(argv[i + 1], data_format_names, DATA_SYNTHETIC)
                                        : lookup(argv[i + 1], data_dtype_names, DATA_NDTYPES)) : -1;
            if (v < 0 || (!isf && v != DATA_U16 && v != DATA_U32 && v != DATA_I32 && v != DATA_I64)) {
                cli_say("%s expects %s (see mkdata --help)", a, isf ? "nanogpt, llmc, npy or megatron" : "u16, u32, i32 or i64");
                return 2;
            }
            *(isf ? &fmt : &dtype) = v, i++;
        } else if (a[0] == '-' && a[1]) return cli_say("unknown option %s (see mkdata --help)", a), 2;
        else if (npos < 2 && *a) pos[npos++] = a;
        else npos = 3;
    }
    if (npos != 2) {
        cli_say("expected %s (see mkdata --help)", conv ? "TOKENS OUT" : "TEXT_FILE OUTDIR");
        return 2;
    }
    if (dtype >= 0 && !data_write_dtype_ok(fmt, dtype)) {
        cli_say("--format %s cannot hold --dtype %s", data_format_names[fmt], data_dtype_names[dtype]);
        return 2;
    }
    /* SIGINT/SIGTERM remove the temp files at once; the writer stops at its next block */
    cleanup_signals_on();
    int rc;
    if (conv) rc = convert(pos[0], pos[1], fmt, dtype);
    else {
        const char *text = pos[0], *outdir = pos[1];
        unsigned char *bytes = NULL;
        size_t n = 0;
        if ((rc = read_text(text, &bytes, &n))) return rc;
        char stems[2][4200];
        snprintf(stems[0], sizeof stems[0], "%s/train", outdir);
        snprintf(stems[1], sizeof stems[1], "%s/val", outdir);
        const char *ins[1] = {text};
        rc = check_outputs(stems[0], fmt, ins, 1, 0) || check_outputs(stems[1], fmt, ins, 1, 0) ? 2 : 0;
        struct stat ds;
        int bad_dir = !rc && mkdir(outdir, 0777) != 0 && errno != EEXIST;
        if (bad_dir) cli_say("cannot create directory %s: %s", outdir, strerror(errno));
        else if (!rc && (bad_dir = stat(outdir, &ds) != 0 || !S_ISDIR(ds.st_mode))) cli_say("%s is not a directory", outdir);
        if (bad_dir) rc = 1;
        if (!rc && (check_outputs(stems[0], fmt, ins, 1, 1) || check_outputs(stems[1], fmt, ins, 1, 1))) rc = 2;
        size_t nval = n / 20, ntrain = n - nval; /* floor(n * 0.05), exactly */
        if (dtype < 0) dtype = DATA_U16;
        if (!rc) rc = write_text(outdir, "train", fmt, dtype, bytes, (int64_t)ntrain);
        if (!rc) rc = write_text(outdir, "val", fmt, dtype, bytes + ntrain, (int64_t)nval);
        free(bytes);
        if (!rc)
            printf("mkdata: %s: %zu tokens -> %s/train%s %zu tokens, %s/val%s %zu tokens (vocab 256, %s)\n", text, n, outdir,
                   data_write_ext(fmt), ntrain, outdir, data_write_ext(fmt), nval, data_format_names[fmt]);
    }
    int sig = cleanup_signal();
    cleanup_signals_off();
    return rc == 1 && sig ? 128 + sig : rc;
}
