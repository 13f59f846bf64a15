/* core/run/checkpoint.c — --init (shape check, parameter load) and --save (gather, write) of HF-named
 * safetensors checkpoints; see checkpoint.h. Host memory only: checkpoint I/O is not engine memory. */
#include "core/run/checkpoint.h"
#include "core/run/agree.h"
#include "core/common/cleanup.h"
#include <math.h>
#include <mpi.h>
#include <signal.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { st_file *f; int failed; char err[1024]; } st_ctx;
static void fill_st(void *ctx, const fsdp_seg *s, int64_t first, int64_t count, float *dst) {
    st_ctx *c = ctx;
    if (c->failed) return;
    const st_tensor *t = st_find(c->f, s->name);
    int64_t e = first, end = first + count;
    while (e < end) {
        int64_t r = e / s->cols, col = e % s->cols;
        int64_t run = s->cols - col;
        if (run > end - e) run = end - e;
        if (r >= s->valid_rows) memset(dst + (e - first), 0, (size_t)run * sizeof(float));
        else if (st_read_f32(c->f, t, (s->row0 + r) * s->full_cols + s->col0 + col, run, dst + (e - first), c->err, sizeof c->err)) {
            c->failed = 1; return;
        } else {
            /* a NaN or infinity is not a starting point: bad input, named, not a divergence at step 1 */
            const float *v = dst + (e - first);
            for (int64_t i = 0; i < run; i++)
                if (!isfinite(v[i])) {
                    int64_t at = (s->row0 + r) * s->full_cols + s->col0 + col + i;
                    snprintf(c->err, sizeof c->err, "%.500s: tensor %s element %lld is %s (an initial value must be finite)",
                             c->f->path, s->name, (long long)at, isnan(v[i]) ? "nan" : v[i] > 0 ? "inf" : "-inf");
                    c->failed = 1; return;
                }
        }
        e += run;
    }
}


int checkpoint_check_shapes(const model_t *M, const st_file *f, char *err, size_t errlen) {
    /* a checkpoint of another depth first, then each of the model's tensors (missing, wrong shape),
     * then tensors the model does not have */
    const char **names = calloc((size_t)f->n + 1, sizeof *names);
    if (!names) { snprintf(err, errlen, "%.1000s: out of host memory", f->path); return -1; }
    for (int i = 0; i < f->n; i++) names[i] = f->t[i].name;
    char foreign[1024] = "";
    int rc = config_check_tensor_names(&M->cfg, f->path, names, f->n, foreign, sizeof foreign);
    free(names);
    if (rc == -1) { snprintf(err, errlen, "%s", foreign); return -1; }
    for (int i = 0; i < M->fsdp.n; i++)
        for (int k = 0; k < M->units[i].nseg; k++) {
            const fsdp_seg *s = &M->units[i].seg[k];
            const st_tensor *t = st_find(f, s->name);
            if (!t) { snprintf(err, errlen, "%.1000s: tensor %s is missing", f->path, s->name); return -1; }
            int ok = s->ndim == 1 ? (t->ndim == 1 && t->shape[0] == s->full_cols)
                                  : (t->ndim == 2 && t->shape[0] == s->full_rows && t->shape[1] == s->full_cols);
            if (!ok) {
                if (s->ndim == 1) snprintf(err, errlen, "%.1000s: tensor %s has the wrong shape (expected [%lld])", f->path, s->name, (long long)s->full_cols);
                else snprintf(err, errlen, "%.1000s: tensor %s has the wrong shape (expected [%lld, %lld])", f->path, s->name,
                              (long long)s->full_rows, (long long)s->full_cols);
                return -1;
            }
        }
    if (rc) { snprintf(err, errlen, "%s", foreign); return -1; }
    return 0;
}


int checkpoint_load(model_t *M, st_file *f, char *err, size_t errlen) {
    st_ctx c = {.f = f};
    fsdp_fill_params(&M->fsdp, fill_st, &c);
    int bad = c.failed;
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!bad) return 0;
    if (!c.failed) return -2;
    snprintf(err, errlen, "%s", c.err);
    return -1;
}

/* A write error that a signal caused (the handler removed the temp file; an interrupted write) is the
 * signal's: the signal is what is reported, with its exit code 128 + signal. */
static void note_error(const char *err) {
    if (!cleanup_signal()) agree_fail(1, "save: %s", err);
}
static void note_signal(const char *path, int written) {
    int sig = cleanup_signal();
    if (!sig) return;
    const char *name = sig == SIGINT ? "SIGINT" : "SIGTERM";
    if (written) agree_fail(128 + sig, "interrupted by %s after --save had written %s (complete)", name, path);
    else agree_fail(128 + sig, "interrupted by %s during --save: %s not written (a file already there is kept)", name, path);
}

int checkpoint_save(model_t *M, comm_group *tpg, const char *path, char *err, size_t errlen) {
    /* every rank gathers the TP-local units over dp; the TP group then gathers each segment to its
     * rank 0; the global rank 0 assembles full HF tensors and writes them. Host memory only. */
    int ntens = 0;
    for (int i = 0; i < M->fsdp.n; i++) ntens += M->units[i].nseg;
    size_t cap = (size_t)(ntens > 0 ? ntens : 1);
    const char **names = calloc(cap, sizeof *names);
    int *nd = calloc(cap, sizeof *nd);
    int64_t (*shapes)[4] = calloc(cap, sizeof *shapes);
    int *order = calloc(cap, sizeof *order);
    if (!names || !nd || !shapes || !order) {
        free(names); free(nd); free(shapes); free(order);
        snprintf(err, errlen, "save: out of host memory");
        return -1;
    }
    /* HF order: embedding (unit L's first segment), layers, then the rest of the root units in order:
     * final norm, lm_head unless tied (entry = unit * 16 + segment) */
    int no = 0;
    int root = M->L;
    order[no++] = root * 16 + 0;
    for (int i = 0; i < M->L; i++) for (int k = 0; k < M->units[i].nseg; k++) order[no++] = i * 16 + k;
    for (int i = root; i < M->fsdp.n; i++)
        for (int k = i == root; k < M->units[i].nseg; k++) order[no++] = i * 16 + k;
    for (int j = 0; j < no; j++) {
        const fsdp_seg *s = &M->units[order[j] / 16].seg[order[j] % 16];
        names[j] = s->name; nd[j] = s->ndim;
        if (s->ndim == 1) shapes[j][0] = s->full_cols; else { shapes[j][0] = s->full_rows; shapes[j][1] = s->full_cols; }
    }
    /* One rule for a failure on one rank (core/run/agree.h): rank 0 is the only writer, so a write that
     * fails there (a full disk) is agreed on before the next collective, and every rank leaves the
     * loop together. SIGINT/SIGTERM remove the temp file at once and are agreed on the same way. */
    int rank0 = M->mesh.rank == 0, rc = 0;
    cleanup_signals_on();
    st_writer *w = NULL;
    if (rank0) {
        w = st_writer_begin(path, no, names, nd, (const int64_t(*)[4])shapes, err, errlen);
        if (!w) agree_fail(1, "save: %s", err);
    }
    rc = agree_check();
    int cur_unit = -1;
    float *unit = NULL, *tmp = NULL, *seg_all = NULL, *full = NULL;
    for (int j = 0; j < no && rc == 0; j++) {
        int ui = order[j] / 16;
        fsdp_unit *u = &M->units[ui];
        const fsdp_seg *s = &u->seg[order[j] % 16];
        int new_unit = ui != cur_unit;
        if (new_unit) {
            free(unit); free(tmp);
            unit = malloc((size_t)u->padded * sizeof(float)); tmp = malloc((size_t)u->shard * sizeof(float) + 4);
            if (!unit || !tmp) agree_fail(1, "save: out of host memory");
            cur_unit = ui;
        }
        size_t n = (size_t)(s->rows * s->cols);
        free(seg_all); free(full);
        seg_all = malloc(n * tpg->size * sizeof(float));
        full = rank0 ? malloc((size_t)(s->full_rows * s->full_cols) * sizeof(float)) : NULL;
        if (!seg_all || (rank0 && !full)) agree_fail(1, "save: out of host memory");
        note_signal(path, 0);
        if ((rc = agree_check())) break; /* the previous tensor's write, this one's buffers, a signal */
        if (!unit || !tmp || !seg_all || (rank0 && !full)) { rc = 1; break; } /* agreed above; states it for the analyser */
        if (new_unit) fsdp_unit_to_host(&M->fsdp, ui, unit, tmp);
        comm_all_gather_host(tpg, seg_all, unit + s->off, n);
        if (!rank0) continue;
        for (int t = 0; t < tpg->size; t++) {
            const float *src = seg_all + (size_t)t * n;
            for (int64_t r = 0; r < s->rows; r++) {
                int64_t gr, gc0;
                if (s->split == SPLIT_ROWS) { gr = t * s->rows + r; gc0 = 0; }
                else if (s->split == SPLIT_COLS) { gr = r; gc0 = t * s->cols; }
                else { gr = r; gc0 = 0; }
                if (gr >= s->full_rows) continue; /* vocabulary padding */
                memcpy(full + gr * s->full_cols + gc0, src + r * s->cols, (size_t)s->cols * sizeof(float));
            }
            if (s->split == SPLIT_NONE) break;
        }
        if (st_writer_put(w, full, s->full_rows * s->full_cols, err, errlen)) note_error(err);
    }
    free(unit); free(tmp); free(seg_all); free(full);
    if (rc == 0) {
        int written = 0;
        if (rank0 && !cleanup_signal()) {
            /* the rename cannot race the handler (cleanup_rename): either the file at path is complete and
             * new, or nothing was renamed and whatever was there before is still there */
            int fr = st_writer_finish(w, err, errlen); /* frees w in every case */
            w = NULL;
            if (fr) note_error(err);
            written = fr == 0;
        }
        note_signal(path, written);
        rc = agree_check();
    }
    if (w) st_writer_abort(w);
    if (rc) { cleanup_all(); snprintf(err, errlen, "%s", agree_last_error()); }
    cleanup_signals_off();
    free(names); free(nd); free(shapes); free(order);
    return rc;
}

