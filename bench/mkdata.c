/* bench/mkdata.c — turns a text file into byte-level token files for training (design 4.3):
 * every byte is one little-endian uint16 token (V = 256); the last floor(n/20) tokens (5%) go to
 * OUTDIR/val.bin, the rest to OUTDIR/train.bin. Each file is written to a temp name, fsynced and
 * renamed, so an interrupted run never leaves a half-written token file.
 * Not a tokenizer: no BPE, no vocabulary file. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *usage =
    "usage: mkdata TEXT_FILE OUTDIR\n"
    "  Writes OUTDIR/train.bin and OUTDIR/val.bin: one uint16 token per byte of TEXT_FILE (vocab 256),\n"
    "  the last 5% of the tokens (floor(n*0.05)) to val.bin. OUTDIR is created if missing.\n"
    "  Exit 0 ok, 1 I/O error, 2 bad usage.\n";

/* Write tokens as uint16 LE to dir/name atomically. Returns 0 or -1 after printing one line. */
static int write_tokens(const char *dir, const char *name, const unsigned char *bytes, size_t n) {
    char path[4096], tmp[4200];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) {
        fprintf(stderr, "mkdata: output path too long: %s/%s\n", dir, name);
        return -1;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *fp = fopen(tmp, "wb");
    if (!fp) {
        fprintf(stderr, "mkdata: cannot create %s: %s\n", tmp, strerror(errno));
        return -1;
    }
    enum { CHUNK = 1 << 15 };
    unsigned char buf[2 * CHUNK];
    for (size_t done = 0; done < n;) {
        size_t m = n - done < CHUNK ? n - done : CHUNK;
        for (size_t i = 0; i < m; i++) buf[2 * i] = bytes[done + i], buf[2 * i + 1] = 0;
        /* cppcheck-suppress uninitvar ; the loop above filled buf[0, 2m), and m >= 1 since done < n */
        if (fwrite(buf, 1, 2 * m, fp) != 2 * m) {
            fprintf(stderr, "mkdata: cannot write %s: %s\n", tmp, strerror(errno));
            fclose(fp);
            unlink(tmp);
            return -1;
        }
        done += m;
    }
    int ok = fflush(fp) == 0 && fsync(fileno(fp)) == 0;
    int e = errno;
    if (fclose(fp) != 0 && ok) ok = 0, e = errno;
    if (!ok) {
        fprintf(stderr, "mkdata: cannot write %s: %s\n", tmp, strerror(e));
        unlink(tmp);
        return -1;
    }
    if (rename(tmp, path) != 0) {
        fprintf(stderr, "mkdata: cannot rename %s to %s: %s\n", tmp, path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        fputs(usage, stdout);
        return 0;
    }
    if (argc != 3 || !*argv[1] || !*argv[2]) {
        fprintf(stderr, "mkdata: expected TEXT_FILE OUTDIR (see mkdata --help)\n");
        return 2;
    }
    const char *text = argv[1], *outdir = argv[2];
    FILE *fp = fopen(text, "rb");
    if (!fp) {
        fprintf(stderr, "mkdata: cannot open %s: %s\n", text, strerror(errno));
        return 1;
    }
    struct stat sb;
    if (fstat(fileno(fp), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fprintf(stderr, "mkdata: %s is not a readable regular file\n", text);
        fclose(fp);
        return 1;
    }
    size_t n = (size_t)sb.st_size;
    if (n == 0) {
        fprintf(stderr, "mkdata: %s is empty\n", text);
        fclose(fp);
        return 1;
    }
    unsigned char *bytes = malloc(n);
    if (!bytes) {
        fprintf(stderr, "mkdata: out of memory for %zu bytes of %s\n", n, text);
        fclose(fp);
        return 1;
    }
    if (fread(bytes, 1, n, fp) != n) {
        fprintf(stderr, "mkdata: cannot read %s: %s\n", text, ferror(fp) ? strerror(errno) : "short read");
        free(bytes);
        fclose(fp);
        return 1;
    }
    fclose(fp); /* read-only stream: nothing to lose on close */
    if (mkdir(outdir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "mkdata: cannot create directory %s: %s\n", outdir, strerror(errno));
        free(bytes);
        return 1;
    }
    struct stat ds;
    if (stat(outdir, &ds) != 0 || !S_ISDIR(ds.st_mode)) {
        fprintf(stderr, "mkdata: %s is not a directory\n", outdir);
        free(bytes);
        return 1;
    }
    size_t nval = n / 20; /* floor(n * 0.05), exactly */
    size_t ntrain = n - nval;
    if (write_tokens(outdir, "train.bin", bytes, ntrain) < 0 || write_tokens(outdir, "val.bin", bytes + ntrain, nval) < 0) {
        free(bytes);
        return 1;
    }
    free(bytes);
    printf("mkdata: %s: %zu tokens -> %s/train.bin %zu tokens, %s/val.bin %zu tokens (vocab 256)\n", text, n, outdir,
           ntrain, outdir, nval);
    return 0;
}
