/* core/run/checkpoint.h — model checkpoints as HF-named safetensors files: the shape check and parameter
 * load behind --init (F32 or BF16 files, each rank reading its own TP-local, DP-owned slices) and the
 * gather-and-write behind --save (full F32 tensors, written by rank 0). The file format itself is
 * core/safetensors; the training run that calls these is core/run/run. Collective over MPI_COMM_WORLD. */
#ifndef MESHSWEEP_CHECKPOINT_H
#define MESHSWEEP_CHECKPOINT_H
#include <stddef.h>
#include "core/engine/comm.h"
#include "core/engine/model.h"
#include "core/formats/safetensors.h"

/* -1 with a message when a tensor of the model is missing from f or has another shape (local) */
int checkpoint_check_shapes(const model_t *M, const st_file *f, char *err, size_t errlen);
/* Fill the owned parameter slices from f (collective). 0 ok; -1 this rank failed (message in err);
 * -2 another rank failed (err untouched). */
int checkpoint_load(model_t *M, st_file *f, char *err, size_t errlen);
/* Gather the model over dp and tp and write it to path as F32 safetensors (collective; rank 0 writes,
 * atomically). A failure on any rank (a full disk on rank 0) is agreed on before the next collective
 * (core/run/agree.h): rank 0 has printed one line, every rank returns the same code and err holds that
 * line without the program name. 0 ok, 1 failed, 128+signal when SIGINT/SIGTERM came during the
 * save (its temp file is removed at once; a file finished just then is removed too). */
int checkpoint_save(model_t *M, comm_group *tpg, const char *path, char *err, size_t errlen);
#endif
