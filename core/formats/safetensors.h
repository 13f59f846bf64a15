/* core/formats/safetensors.h — reading and writing HF safetensors files (F32, BF16).
 * Reading validates the whole header before any tensor is used: JSON syntax, every entry's dtype,
 * shape, data_offsets (in bounds, begin <= end, size = numel*dtype size, no overlap between tensors,
 * no gap requirement), the header length against the file size, UTF-8 names, duplicate names.
 * The reader only maps what is asked: st_read_f32() reads an element range of a tensor and
 * converts it to fp32, so each rank reads only its slice. */
#ifndef MESHSWEEP_SAFETENSORS_H
#define MESHSWEEP_SAFETENSORS_H
#include <stddef.h>
#include <stdint.h>

typedef enum { ST_F32 = 0, ST_BF16 = 1 } st_dtype;

typedef struct st_tensor {
    char *name;
    st_dtype dtype;
    int ndim;
    int64_t shape[4];
    uint64_t begin, end;           /* byte offsets relative to the data section */
} st_tensor;

typedef struct st_file {
    char path[4096];
    void *fp;                      /* FILE* */
    uint64_t file_bytes;
    uint64_t data_start;           /* 8 + header length */
    int n;
    st_tensor *t;
} st_file;

/* Open and validate. On error: one line into err, returns -1, nothing left open. */
int st_open(st_file *f, const char *path, char *err, size_t errlen);
void st_close(st_file *f);
const st_tensor *st_find(const st_file *f, const char *name);
/* Read a contiguous element range [first, first+count) of tensor `t` (row-major flat index) as fp32
 * into dst. Returns -1 with a message on I/O error. */
int st_read_f32(const st_file *f, const st_tensor *t, int64_t first, int64_t count, float *dst,
                char *err, size_t errlen);

/* Writing: declare every tensor (name, fp32, shape), then write the data in declaration order
 * with st_writer_put (any number of calls, any chunking), then st_writer_finish, which renames
 * the temp file into place. On any error the temp file is removed and nothing is left at path. */
typedef struct st_writer st_writer;
st_writer *st_writer_begin(const char *path, int n, const char *const *names, const int *ndims,
                           const int64_t (*shapes)[4], char *err, size_t errlen);
int st_writer_put(st_writer *w, const float *data, int64_t count, char *err, size_t errlen);
int st_writer_finish(st_writer *w, char *err, size_t errlen);
void st_writer_abort(st_writer *w);
#endif
