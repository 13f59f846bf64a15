/* core/formats/data_write.c — the token file writers behind core/formats/data_write.h: nanoGPT (headerless uint16),
 * llm.c (256 x int32 header), NumPy .npy format 1.0 and Megatron-LM indexed datasets (.bin + .idx),
 * each through a temp file that is fsynced and renamed into place. Streams the tokens from a source
 * callback in fixed blocks, so converting a file needs no copy of it in memory. */
#include "core/formats/data_write.h"
#include "core/common/cleanup.h"
#include "core/common/errmsg.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BLOCK 65536
#define MEGATRON_BLOCK ((int64_t)1 << 20)

int data_write_dtype_ok(data_format fmt, data_dtype t) {
    switch (fmt) {
    case DATA_NANOGPT: return t == DATA_U16;
    case DATA_LLMC: return t == DATA_U16 || t == DATA_U32;
    case DATA_NPY: return (unsigned)t < DATA_NDTYPES;
    case DATA_MEGATRON: return (unsigned)t < DATA_NDTYPES && t != DATA_U32;
    default: return 0;
    }
}

data_dtype data_write_default_dtype(data_format fmt, int64_t max_id) {
    if (max_id < 65536 || fmt == DATA_NANOGPT) return DATA_U16;
    return fmt == DATA_MEGATRON ? DATA_I32 : DATA_U32;
}

const char *data_write_ext(data_format fmt) { return fmt == DATA_NPY ? ".npy" : ".bin"; }

static int fits(int64_t v, data_dtype t) {
    static const int64_t lo[DATA_NDTYPES] = {0, -128, 0, -32768, 0, INT32_MIN, INT64_MIN};
    static const int64_t hi[DATA_NDTYPES] = {255, 127, 65535, 32767, UINT32_MAX, INT32_MAX, INT64_MAX};
    return v >= lo[t] && v <= hi[t];
}

/* an open temp file that becomes `path` on success */
typedef struct { FILE *fp; char path[4200], tmp[4300]; } out_file;

static int out_open(out_file *o, const char *stem, const char *ext, char *err, size_t errlen) {
    if (snprintf(o->path, sizeof o->path, "%s%s", stem, ext) >= (int)sizeof o->path) {
        errmsg_set(err, errlen, "output path too long: %s%s", stem, ext);
        return -1;
    }
    snprintf(o->tmp, sizeof o->tmp, "%s.tmp.%ld", o->path, (long)getpid());
    o->fp = fopen(o->tmp, "wb");
    if (!o->fp) {
        errmsg_set(err, errlen, "cannot create %s: %s", o->tmp, strerror(errno));
        o->tmp[0] = 0;
        return -1;
    }
    cleanup_add(o->tmp); /* removed at once on SIGINT/SIGTERM where the program handles them */
    return 0;
}

static int out_put(out_file *o, const void *p, size_t n, char *err, size_t errlen) {
    if (n && fwrite(p, 1, n, o->fp) != n) {
        errmsg_set(err, errlen, "cannot write %s: %s", o->tmp, strerror(errno));
        return -1;
    }
    return 0;
}

/* flush, fsync and close; the temp file stays until out_commit or out_abort */
static int out_close(out_file *o, char *err, size_t errlen) {
    int ok = fflush(o->fp) == 0 && fsync(fileno(o->fp)) == 0;
    int e = errno;
    if (fclose(o->fp) != 0 && ok) ok = 0, e = errno;
    o->fp = NULL;
    if (!ok) errmsg_set(err, errlen, "cannot write %s: %s", o->tmp, strerror(e));
    return ok ? 0 : -1;
}

static int out_commit(out_file *o, char *err, size_t errlen) {
    if (cleanup_rename(o->tmp, o->path) != 0) {
        errmsg_set(err, errlen, "cannot rename %s to %s: %s", o->tmp, o->path,
                   errno == EINTR ? "interrupted by a signal" : strerror(errno));
        return -1;
    }
    cleanup_forget(o->tmp);
    o->tmp[0] = 0;
    return 0;
}

static void out_abort(out_file *o) {
    if (o->fp) fclose(o->fp);
    o->fp = NULL;
    if (o->tmp[0]) unlink(o->tmp), cleanup_forget(o->tmp);
    o->tmp[0] = 0;
}

/* the tokens as little-endian elements of dtype t */
static int put_tokens(out_file *o, data_dtype t, data_src_fn src, void *ctx, int64_t n, char *err, size_t errlen) {
    static int64_t v[BLOCK];
    static unsigned char b[8 * BLOCK];
    int eb = data_dtype_bytes(t);
    for (int64_t done = 0; done < n;) {
        int64_t m = n - done < BLOCK ? n - done : BLOCK;
        if (cleanup_signal()) {
            errmsg_set(err, errlen, "interrupted by a signal");
            return -1;
        }
        if (src(ctx, done, m, v, err, errlen)) return -1;
        for (int64_t i = 0; i < m; i++) {
            if (!fits(v[i], t)) {
                errmsg_set(err, errlen, "token %lld at index %lld does not fit %s (choose a wider --dtype)",
                           (long long)v[i], (long long)done + i, data_dtype_names[t]);
                return -1;
            }
            memcpy(b + i * eb, &v[i], (size_t)eb); /* little-endian: the low bytes */
        }
        if (out_put(o, b, (size_t)(m * eb), err, errlen)) return -1;
        done += m;
    }
    return 0;
}

static int npy_header(out_file *o, data_dtype t, int64_t n, char *err, size_t errlen) {
    static const char *const descr[DATA_NDTYPES] = {"|u1", "|i1", "<u2", "<i2", "<u4", "<i4", "<i8"};
    char h[256];
    int len = snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': False, 'shape': (%lld,), }", descr[t],
                       (long long)n);
    while ((10 + len + 1) % 64) h[len++] = ' '; /* numpy pads so the data starts 64-byte aligned */
    h[len++] = '\n';
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(len & 0xff),
                             (unsigned char)(len >> 8)};
    return out_put(o, pre, sizeof pre, err, errlen) || out_put(o, h, (size_t)len, err, errlen) ? -1 : 0;
}

static int megatron_index(out_file *o, data_dtype t, int64_t ntokens, const int64_t *ends, int64_t nseq, char *err,
                          size_t errlen) {
    static const unsigned char code[DATA_NDTYPES] = {1, 2, 8, 3, 0, 4, 5};
    int64_t S = ends ? nseq : (ntokens + MEGATRON_BLOCK - 1) / MEGATRON_BLOCK, D = S + 1;
    uint64_t version = 1;
    unsigned char c = code[t];
    if (out_put(o, "MMIDIDX\0\0", 9, err, errlen) || out_put(o, &version, 8, err, errlen) ||
        out_put(o, &c, 1, err, errlen) || out_put(o, &S, 8, err, errlen) || out_put(o, &D, 8, err, errlen))
        return -1;
    for (int pass = 0; pass < 2; pass++) { /* lengths (int32), then byte pointers (int64) */
        int64_t prev = 0;
        for (int64_t i = 0; i < S; i++) {
            int64_t end = ends ? ends[i] : (i + 1 == S ? ntokens : (i + 1) * MEGATRON_BLOCK);
            int32_t len = (int32_t)(end - prev);
            int64_t ptr = prev * data_dtype_bytes(t);
            if (pass == 0 ? out_put(o, &len, 4, err, errlen) : out_put(o, &ptr, 8, err, errlen)) return -1;
            prev = end;
        }
    }
    for (int64_t i = 0; i < D; i++)
        if (out_put(o, &i, 8, err, errlen)) return -1;
    return 0;
}

static int write_all(const char *stem, data_format fmt, data_dtype t, data_src_fn src, void *ctx, int64_t n,
                     const int64_t *ends, int64_t nseq, char *err, size_t errlen) {
    if (!data_write_dtype_ok(fmt, t)) {
        errmsg_set(err, errlen, "format %s cannot hold dtype %s", data_format_names[fmt], data_dtype_names[t]);
        return -1;
    }
    if (fmt == DATA_LLMC && n > INT32_MAX) {
        errmsg_set(err, errlen, "llm.c files hold at most 2^31-1 tokens (got %lld)", (long long)n);
        return -1;
    }
    if (fmt == DATA_MEGATRON && ends) {
        int64_t prev = 0;
        for (int64_t i = 0; i < nseq; i++) {
            if (ends[i] <= prev || ends[i] - prev > INT32_MAX || (i + 1 == nseq && ends[i] != n)) {
                errmsg_set(err, errlen, "Megatron sequence %lld ends at %lld (expected increasing ends up to %lld)",
                           (long long)i, (long long)ends[i], (long long)n);
                return -1;
            }
            prev = ends[i];
        }
    }
    out_file bin = {0}, idx = {0};
    int idx_done = 0;
    int rc = out_open(&bin, stem, data_write_ext(fmt), err, errlen);
    if (rc == 0 && fmt == DATA_LLMC) {
        int32_t h[256] = {0};
        h[0] = t == DATA_U16 ? 20240520 : 20240801;
        h[1] = t == DATA_U16 ? 1 : 7;
        h[2] = (int32_t)n;
        rc = out_put(&bin, h, sizeof h, err, errlen);
    }
    if (rc == 0 && fmt == DATA_NPY) rc = npy_header(&bin, t, n, err, errlen);
    if (rc == 0) rc = put_tokens(&bin, t, src, ctx, n, err, errlen);
    if (rc == 0) rc = out_close(&bin, err, errlen);
    if (rc == 0 && fmt == DATA_MEGATRON) {
        rc = out_open(&idx, stem, ".idx", err, errlen);
        if (rc == 0) rc = megatron_index(&idx, t, n, ends, nseq, err, errlen);
        if (rc == 0) rc = out_close(&idx, err, errlen);
    }
    /* the pair is renamed with signals held back: both files are new, or (a signal noted before) neither */
    cleanup_hold();
    if (rc == 0 && fmt == DATA_MEGATRON) {
        rc = out_commit(&idx, err, errlen);
        idx_done = rc == 0;
    }
    if (rc == 0) rc = out_commit(&bin, err, errlen);
    cleanup_release();
    if (rc != 0) {
        out_abort(&bin);
        out_abort(&idx);
        if (idx_done) unlink(idx.path); /* an index without its .bin would name the old one */
    }
    return rc;
}

int data_write(const char *stem, data_format fmt, data_dtype dtype, data_src_fn src, void *ctx, int64_t ntokens,
               const int64_t *seq_ends, int64_t nseq, char *err, size_t errlen) {
    int rc = write_all(stem, fmt, dtype, src, ctx, ntokens, seq_ends, nseq, err, errlen);
    if (rc) errmsg_one_line(err, errlen);
    return rc;
}
