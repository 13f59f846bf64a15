/* core/formats/safetensors.c — HF safetensors reader (F32, BF16) and fp32 writer.
 * The reader validates the whole header before any tensor is touched and then reads only the
 * element ranges asked for (pread, so ranks read their own slices); it never maps the whole file.
 * The writer streams fp32 data into "<path>.tmp.<pid>" and renames it into place on success.
 * Not: F16/integer dtypes, big-endian hosts, tensors of more than 4 dimensions. */
#include "core/formats/safetensors.h"
#include "core/common/cleanup.h"
#include "core/common/errmsg.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <fcntl.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c assumes a little-endian host (the format is little-endian)"
#endif

#define ST_MAX_HEADER_BYTES (100ull << 20) /* same bound as the reference implementation */

static size_t dtype_size(st_dtype d) { return d == ST_BF16 ? 2 : 4; }

/* Index of the first byte that breaks UTF-8 (overlongs, surrogates and > U+10FFFF included), or -1. */
static long long utf8_invalid_at(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t len;
        unsigned min, cp;
        if (c < 0x80) { i++; continue; }
        else if ((c & 0xE0) == 0xC0) len = 2, min = 0x80, cp = c & 0x1F;
        else if ((c & 0xF0) == 0xE0) len = 3, min = 0x800, cp = c & 0x0F;
        else if ((c & 0xF8) == 0xF0) len = 4, min = 0x10000, cp = c & 0x07;
        else return (long long)i;
        if (i + len > n) return (long long)i;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return (long long)i;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return (long long)i;
        i += len;
    }
    return -1;
}

static void free_tensors(st_file *f) {
    if (f->t)
        for (int i = 0; i < f->n; i++) free(f->t[i].name);
    free(f->t);
    f->t = NULL;
    f->n = 0;
}

void st_close(st_file *f) {
    if (!f) return;
    free_tensors(f);
    if (f->fp) fclose((FILE *)f->fp);
    f->fp = NULL;
}

static int cmp_begin(const void *a, const void *b) {
    const st_tensor *x = *(const st_tensor *const *)a, *y = *(const st_tensor *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return (x->end > y->end) - (x->end < y->end);
}

/* Parse one tensor entry into t (name already set). */
static int parse_entry(const char *path, const char *name, json_t *v, uint64_t data_bytes, st_tensor *t, char *err,
                       size_t errlen) {
    if (!json_is_object(v)) {
        errmsg_set(err, errlen, "%s: tensor %s: entry must be an object with dtype, shape, data_offsets", path, name);
        return -1;
    }
    json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"),
           *off = json_object_get(v, "data_offsets");
    if (!json_is_string(dt)) {
        errmsg_set(err, errlen, "%s: tensor %s: missing or non-string dtype", path, name);
        return -1;
    }
    if (strcmp(json_string_value(dt), "F32") == 0) t->dtype = ST_F32;
    else if (strcmp(json_string_value(dt), "BF16") == 0) t->dtype = ST_BF16;
    else {
        errmsg_set(err, errlen, "%s: unsupported dtype %s for tensor %s (F32 and BF16 are supported)", path,
                json_string_value(dt), name);
        return -1;
    }
    if (!json_is_array(sh)) {
        errmsg_set(err, errlen, "%s: tensor %s: missing or non-array shape", path, name);
        return -1;
    }
    size_t nd = json_array_size(sh);
    if (nd > 4) {
        errmsg_set(err, errlen, "%s: tensor %s: %zu dimensions, at most 4 supported", path, name, nd);
        return -1;
    }
    t->ndim = (int)nd;
    uint64_t numel = 1;
    const uint64_t numel_max = (uint64_t)INT64_MAX / 4; /* numel * dtype size must fit in int64 */
    for (size_t k = 0; k < nd; k++) {
        json_t *e = json_array_get(sh, k);
        if (!json_is_integer(e) || json_integer_value(e) < 0) {
            errmsg_set(err, errlen, "%s: tensor %s: shape[%zu] must be a non-negative integer", path, name, k);
            return -1;
        }
        t->shape[k] = json_integer_value(e);
        uint64_t dim = (uint64_t)t->shape[k];
        if (dim > numel_max || (dim != 0 && numel > numel_max / dim)) {
            errmsg_set(err, errlen, "%s: tensor %s: shape has too many elements (overflow)", path, name);
            return -1;
        }
        numel *= dim;
    }
    uint64_t nbytes = numel * dtype_size(t->dtype);
    if (!json_is_array(off) || json_array_size(off) != 2 || !json_is_integer(json_array_get(off, 0)) ||
        !json_is_integer(json_array_get(off, 1)) || json_integer_value(json_array_get(off, 0)) < 0 ||
        json_integer_value(json_array_get(off, 1)) < 0) {
        errmsg_set(err, errlen, "%s: tensor %s: data_offsets must be two non-negative integers [begin, end]", path,
                name);
        return -1;
    }
    t->begin = (uint64_t)json_integer_value(json_array_get(off, 0));
    t->end = (uint64_t)json_integer_value(json_array_get(off, 1));
    if (t->begin > t->end) {
        errmsg_set(err, errlen, "%s: tensor %s: data_offsets begin %llu > end %llu", path, name,
                (unsigned long long)t->begin, (unsigned long long)t->end);
        return -1;
    }
    if (t->end > data_bytes) {
        errmsg_set(err, errlen, "%s: tensor %s: data_offsets end %llu is past the data section (%llu bytes; file "
                             "truncated?)", path, name, (unsigned long long)t->end, (unsigned long long)data_bytes);
        return -1;
    }
    if (t->end - t->begin != nbytes) {
        errmsg_set(err, errlen, "%s: tensor %s: data_offsets span %llu bytes but shape and dtype need %llu", path, name,
                (unsigned long long)(t->end - t->begin), (unsigned long long)nbytes);
        return -1;
    }
    return 0;
}

/* -1 with a message naming the string the first invalid byte sits in (the JSON cannot be parsed, so by
 * its printable start) when the header is not UTF-8 */
static int check_utf8(const char *hdr, uint64_t hlen, const char *path, char *err, size_t errlen) {
    long long bad = utf8_invalid_at((const unsigned char *)hdr, hlen);
    if (bad < 0) return 0;
    long long q = bad;
    while (q > 0 && hdr[q - 1] != '"' && bad - q < 60) q--;
    char ctx[64];
    int m = 0;
    for (long long i = q; i < bad && m < (int)sizeof ctx - 1; i++)
        ctx[m++] = (hdr[i] >= 0x20 && hdr[i] < 0x7f) ? hdr[i] : '?';
    ctx[m] = 0;
    errmsg_set(err, errlen, "%s: header is not valid UTF-8 at byte %lld (byte 0x%02x after \"%s\"): tensor names "
                         "must be UTF-8", path, bad, (unsigned char)hdr[bad], ctx);
    return -1;
}

/* -1 with a message when two tensors' byte ranges overlap (sorted by begin; empty tensors overlap nothing) */
static int check_overlaps(const st_file *f, const char *path, char *err, size_t errlen) {
    if (f->n < 2) return 0;
    const st_tensor **ord = malloc((size_t)f->n * sizeof *ord);
    if (!ord) {
        errmsg_set(err, errlen, "%s: out of host memory", path);
        return -1;
    }
    for (int i = 0; i < f->n; i++) ord[i] = &f->t[i];
    qsort(ord, (size_t)f->n, sizeof *ord, cmp_begin);
    const st_tensor *prev = NULL;
    int rc = 0;
    for (int i = 0; i < f->n && !rc; i++) {
        const st_tensor *t = ord[i];
        if (t->begin == t->end) continue;
        if (prev && t->begin < prev->end) {
            errmsg_set(err, errlen, "%s: tensors %s [%llu, %llu) and %s [%llu, %llu) overlap", path, prev->name,
                    (unsigned long long)prev->begin, (unsigned long long)prev->end, t->name,
                    (unsigned long long)t->begin, (unsigned long long)t->end);
            rc = -1;
        }
        if (!prev || t->end > prev->end) prev = t;
    }
    free(ord);
    return rc;
}

static int open_validate(st_file *f, const char *path, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    if (snprintf(f->path, sizeof f->path, "%s", path) >= (int)sizeof f->path) {
        errmsg_set(err, errlen, "safetensors: path too long");
        return -1;
    }
    /* checked before fopen as well: opening a FIFO would block until someone writes to it */
    struct stat pre;
    if (stat(path, &pre) == 0 && !S_ISREG(pre.st_mode)) {
        errmsg_set(err, errlen, "%s: not a regular file", path);
        return -1;
    }
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        errmsg_set(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    f->fp = fp;
    char *hdr = NULL;
    json_t *root = NULL;
    struct stat sb;
    if (fstat(fileno(fp), &sb) != 0) {
        errmsg_set(err, errlen, "%s: cannot stat: %s", path, strerror(errno));
        goto fail;
    }
    if (!S_ISREG(sb.st_mode)) {
        errmsg_set(err, errlen, "%s: not a regular file", path);
        goto fail;
    }
    f->file_bytes = (uint64_t)sb.st_size;
    if (f->file_bytes < 8) {
        errmsg_set(err, errlen, "%s: file is %llu bytes, too short for a safetensors header (8-byte length first)",
                path, (unsigned long long)f->file_bytes);
        goto fail;
    }
    unsigned char lenb[8];
    if (fread(lenb, 1, 8, fp) != 8) {
        errmsg_set(err, errlen, "%s: cannot read header length: %s", path, ferror(fp) ? strerror(errno) : "short read");
        goto fail;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | lenb[i];
    if (hlen > f->file_bytes - 8) {
        errmsg_set(err, errlen, "%s: header length %llu is larger than the file (%llu bytes after the length)", path,
                (unsigned long long)hlen, (unsigned long long)(f->file_bytes - 8));
        goto fail;
    }
    if (hlen > ST_MAX_HEADER_BYTES) {
        errmsg_set(err, errlen, "%s: header length %llu exceeds the 100 MiB limit", path, (unsigned long long)hlen);
        goto fail;
    }
    if (hlen < 2) {
        errmsg_set(err, errlen, "%s: header of %llu bytes cannot be a JSON object", path, (unsigned long long)hlen);
        goto fail;
    }
    hdr = malloc(hlen);
    if (!hdr) {
        errmsg_set(err, errlen, "%s: out of host memory for a %llu-byte header", path, (unsigned long long)hlen);
        goto fail;
    }
    if (fread(hdr, 1, hlen, fp) != hlen) {
        errmsg_set(err, errlen, "%s: cannot read header: %s", path, ferror(fp) ? strerror(errno) : "short read");
        goto fail;
    }
    f->data_start = 8 + hlen;
    uint64_t data_bytes = f->file_bytes - f->data_start;
    if (check_utf8(hdr, hlen, path, err, errlen)) goto fail;
    json_error_t jerr;
    root = json_loadb(hdr, hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        if (strstr(jerr.text, "duplicate"))
            errmsg_set(err, errlen, "%s: duplicate tensor name in header: %s", path, jerr.text);
        else
            errmsg_set(err, errlen, "%s: header is not valid JSON: %s (at byte %d)", path, jerr.text, jerr.position);
        goto fail;
    }
    if (!json_is_object(root)) {
        errmsg_set(err, errlen, "%s: header must be a JSON object", path);
        goto fail;
    }
    size_t cap = json_object_size(root);
    f->t = calloc(cap ? cap : 1, sizeof *f->t);
    if (!f->t) {
        errmsg_set(err, errlen, "%s: out of host memory for %zu tensor entries", path, cap);
        goto fail;
    }
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0) {
            /* the format allows only a string -> string map here */
            const char *mk;
            json_t *mv;
            if (!json_is_object(val)) {
                errmsg_set(err, errlen, "%s: __metadata__ must be an object of strings", path);
                goto fail;
            }
            json_object_foreach(val, mk, mv) if (!json_is_string(mv)) {
                errmsg_set(err, errlen, "%s: __metadata__ value of %s must be a string", path, mk);
                goto fail;
            }
            continue;
        }
        if (!*key) {
            errmsg_set(err, errlen, "%s: tensor with an empty name", path);
            goto fail;
        }
        st_tensor *t = &f->t[f->n];
        t->name = strdup(key);
        if (!t->name) {
            errmsg_set(err, errlen, "%s: out of host memory", path);
            goto fail;
        }
        f->n++;
        if (parse_entry(path, key, val, data_bytes, t, err, errlen) < 0) goto fail;
    }
    if (check_overlaps(f, path, err, errlen)) goto fail;
    json_decref(root);
    free(hdr);
    return 0;
fail:
    json_decref(root);
    free(hdr);
    st_close(f);
    return -1;
}

int st_open(st_file *f, const char *path, char *err, size_t errlen) {
    int rc = open_validate(f, path, err, errlen);
    if (rc != 0) errmsg_one_line(err, errlen);
    return rc;
}

const st_tensor *st_find(const st_file *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->t[i].name, name) == 0) return &f->t[i];
    return NULL;
}

static int64_t numel_of(const st_tensor *t) {
    int64_t n = 1;
    for (int k = 0; k < t->ndim; k++) n *= t->shape[k];
    return n;
}

/* Read exactly n bytes at absolute offset off; pread keeps concurrent readers independent of FILE state. */
static int pread_all(int fd, void *buf, size_t n, uint64_t off) {
    char *p = buf;
    while (n > 0) {
        ssize_t r = pread(fd, p, n, (off_t)off);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (r == 0) {
            errno = EIO; /* the file shrank after validation */
            return -1;
        }
        p += r, n -= (size_t)r, off += (uint64_t)r;
    }
    return 0;
}

int st_read_f32(const st_file *f, const st_tensor *t, int64_t first, int64_t count, float *dst, char *err,
                size_t errlen) {
    int64_t numel = numel_of(t);
    if (first < 0 || count < 0 || first > numel || count > numel - first) {
        errmsg_set(err, errlen, "%s: tensor %s: element range [%lld, +%lld) outside its %lld elements", f->path,
                t->name, (long long)first, (long long)count, (long long)numel);
        return -1;
    }
    if (count == 0) return 0;
    int fd = fileno((FILE *)f->fp);
    size_t es = dtype_size(t->dtype);
    uint64_t off = f->data_start + t->begin + (uint64_t)first * es;
    if (t->dtype == ST_F32) {
        if (pread_all(fd, dst, (size_t)count * 4, off) < 0) goto ioerr;
        return 0;
    }
    /* BF16 is the upper half of an fp32: widen by shifting into the high 16 bits */
    enum { CHUNK = 1 << 13 }; /* 16 KiB of stack */
    uint16_t buf[CHUNK];
    for (int64_t done = 0; done < count;) {
        size_t m = (size_t)(count - done < CHUNK ? count - done : CHUNK);
        if (pread_all(fd, buf, m * 2, off + (uint64_t)done * 2) < 0) goto ioerr;
        for (size_t i = 0; i < m; i++) {
            uint32_t u = (uint32_t)buf[i] << 16; // NOLINT(clang-analyzer-core.UndefinedBinaryOperatorResult): pread_all filled buf[0, m)
            memcpy(&dst[done + (int64_t)i], &u, 4);
        }
        done += (int64_t)m;
    }
    return 0;
ioerr:
    errmsg_set(err, errlen, "%s: tensor %s: read failed: %s", f->path, t->name, strerror(errno));
    return -1;
}

/* ---- writer -------------------------------------------------------------------------------- */

struct st_writer {
    char path[4096];
    char tmp[4200];
    FILE *fp;
    uint64_t expect_bytes, put_bytes;
    int failed;
};

static void writer_discard(st_writer *w) {
    if (w->fp) fclose(w->fp);
    w->fp = NULL;
    if (w->tmp[0]) { unlink(w->tmp); cleanup_forget(w->tmp); }
    w->tmp[0] = 0;
    w->failed = 1;
}

st_writer *st_writer_begin(const char *path, int n, const char *const *names, const int *ndims,
                           const int64_t (*shapes)[4], char *err, size_t errlen) {
    if (n < 0) {
        errmsg_set(err, errlen, "%s: negative tensor count", path);
        return NULL;
    }
    st_writer *w = calloc(1, sizeof *w);
    json_t *root = json_object();
    json_t *meta = json_object();
    char *js = NULL;
    if (!w || !root || !meta || json_object_set_new(meta, "format", json_string("pt")) ||
        json_object_set(root, "__metadata__", meta)) {
        errmsg_set(err, errlen, "%s: out of host memory", path);
        goto fail;
    }
    if (snprintf(w->path, sizeof w->path, "%s", path) >= (int)sizeof w->path) {
        errmsg_set(err, errlen, "safetensors: path too long");
        goto fail;
    }
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        const char *name = names[i];
        if (!name || !*name || strcmp(name, "__metadata__") == 0 ||
            utf8_invalid_at((const unsigned char *)name, strlen(name)) >= 0) {
            errmsg_set(err, errlen, "%s: tensor %d: invalid name", path, i);
            goto fail;
        }
        if (json_object_get(root, name)) {
            errmsg_set(err, errlen, "%s: tensor %s declared twice", path, name);
            goto fail;
        }
        if (ndims[i] < 0 || ndims[i] > 4) {
            errmsg_set(err, errlen, "%s: tensor %s: ndim %d outside 0..4", path, name, ndims[i]);
            goto fail;
        }
        uint64_t numel = 1;
        json_t *shape = json_array();
        json_t *ent = json_object();
        json_t *offs = json_array();
        if (!shape || !ent || !offs) {
            json_decref(shape), json_decref(ent), json_decref(offs);
            errmsg_set(err, errlen, "%s: out of host memory", path);
            goto fail;
        }
        int bad = 0;
        for (int k = 0; k < ndims[i]; k++) {
            int64_t dim = shapes[i][k];
            if (dim < 0 || (dim && numel > (uint64_t)INT64_MAX / 4 / (uint64_t)dim)) bad = 1;
            else numel *= (uint64_t)dim;
            json_array_append_new(shape, json_integer(dim));
        }
        uint64_t nbytes = numel * 4;
        if (bad || off + nbytes > (uint64_t)INT64_MAX) {
            json_decref(shape), json_decref(ent), json_decref(offs);
            errmsg_set(err, errlen, "%s: tensor %s: invalid or too large shape", path, name);
            goto fail;
        }
        uint64_t end = off + nbytes; /* <= INT64_MAX: checked above */
        json_array_append_new(offs, json_integer((json_int_t)off));
        json_array_append_new(offs, json_integer((json_int_t)end));
        off = end;
        if (json_object_set_new(ent, "dtype", json_string("F32")) || json_object_set_new(ent, "shape", shape) ||
            json_object_set_new(ent, "data_offsets", offs) || json_object_set_new(root, name, ent)) {
            errmsg_set(err, errlen, "%s: out of host memory", path);
            goto fail;
        }
    }
    w->expect_bytes = off;
    js = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!js) {
        errmsg_set(err, errlen, "%s: cannot encode the header", path);
        goto fail;
    }
    size_t jl = strlen(js);
    size_t padded = (jl + 7) & ~(size_t)7; /* data section 8-byte aligned, spaces as HF pads */
    snprintf(w->tmp, sizeof w->tmp, "%s.tmp.%ld", path, (long)getpid());
    w->fp = fopen(w->tmp, "wb");
    if (!w->fp) {
        errmsg_set(err, errlen, "%s: cannot create %s: %s", path, w->tmp, strerror(errno));
        w->tmp[0] = 0;
        goto fail;
    }
    cleanup_add(w->tmp); /* removed on SIGINT/SIGTERM during the write (core/common/cleanup.h) */
    unsigned char lenb[8];
    for (int i = 0; i < 8; i++) lenb[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    int ok = fwrite(lenb, 1, 8, w->fp) == 8 && fwrite(js, 1, jl, w->fp) == jl;
    for (size_t i = jl; ok && i < padded; i++) ok = fputc(' ', w->fp) != EOF;
    if (!ok) {
        errmsg_set(err, errlen, "%s: cannot write the header: %s", w->tmp, strerror(errno));
        goto fail;
    }
    free(js);
    json_decref(meta);
    json_decref(root);
    return w;
fail:
    free(js);
    json_decref(meta);
    json_decref(root);
    if (w) writer_discard(w);
    free(w);
    return NULL;
}

int st_writer_put(st_writer *w, const float *data, int64_t count, char *err, size_t errlen) {
    if (w->failed) {
        errmsg_set(err, errlen, "%s: writer already failed", w->path);
        return -1;
    }
    if (count < 0 || (uint64_t)count * 4 > w->expect_bytes - w->put_bytes) {
        errmsg_set(err, errlen, "%s: %lld more elements than the declared tensors hold", w->path, (long long)count);
        writer_discard(w);
        return -1;
    }
    if (count && fwrite(data, 4, (size_t)count, w->fp) != (size_t)count) {
        errmsg_set(err, errlen, "%s: write failed: %s", w->tmp, strerror(errno));
        writer_discard(w);
        return -1;
    }
    w->put_bytes += (uint64_t)count * 4;
    return 0;
}

/* Finishes (or fails) and frees the writer in every case. */
int st_writer_finish(st_writer *w, char *err, size_t errlen) {
    int rc = -1;
    if (w->failed) {
        errmsg_set(err, errlen, "%s: writer already failed; nothing written", w->path);
        goto out;
    }
    if (w->put_bytes != w->expect_bytes) {
        errmsg_set(err, errlen, "%s: %llu bytes of tensor data written, %llu declared", w->path,
                (unsigned long long)w->put_bytes, (unsigned long long)w->expect_bytes);
        goto out;
    }
    FILE *fp = w->fp;
    w->fp = NULL;
    int flush_ok = fflush(fp) == 0 && fsync(fileno(fp)) == 0;
    int e = errno;
    if (fclose(fp) != 0 && flush_ok) flush_ok = 0, e = errno;
    if (!flush_ok) {
        errmsg_set(err, errlen, "%s: cannot flush %s: %s", w->path, w->tmp, strerror(e));
        goto out;
    }
    if (cleanup_rename(w->tmp, w->path) != 0) { /* never races the signal handler (core/common/cleanup.h) */
        errmsg_set(err, errlen, "%s: cannot rename %s into place: %s", w->path, w->tmp,
                   errno == EINTR ? "interrupted by a signal" : strerror(errno));
        goto out;
    }
    cleanup_forget(w->tmp);
    w->tmp[0] = 0;
    rc = 0;
out:
    if (rc) writer_discard(w);
    free(w);
    return rc;
}

void st_writer_abort(st_writer *w) {
    if (!w) return;
    writer_discard(w);
    free(w);
}
