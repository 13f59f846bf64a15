/* core/sweep/inputs.h — what a sweep's inputs hold, found once before anything is launched, and what a
 * record kept from an earlier invocation must match:
 *  - the token files opened as build/train opens them (core/formats/data.h), so every fault train
 *    would stop each mesh for (a FIFO, a damaged header, an id past the vocabulary, fewer tokens than
 *    a cell's seq_len needs) stops the sweep first, naming the key; and their token counts, which bound
 *    a cell's batch (a global batch is distinct training sequences, and the measured run evaluates
 *    --eval-batches global batches of distinct validation sequences);
 *  - the fingerprints of the inputs' contents (the model's config.json, the token files: size and
 *    FNV-1a 64 of every byte), part of the results folder's identity, so a rerun resumes only runs
 *    made from the same bytes;
 *  - a kept record's configuration against what the spec asks of its cell (the model field by field,
 *    the optimizer and schedule, the data, the seed; train's defaults where the spec sets nothing).
 * Not the spec (core/sweep/spec.h), not the folder (core/sweep/folder.h), not one mesh's runs
 * (core/sweep/mesh_runs.c). */
#ifndef MESHSWEEP_SWEEP_INPUTS_H
#define MESHSWEEP_SWEEP_INPUTS_H
#include <stddef.h>
#include <stdint.h>

#include "core/sweep/spec.h"

typedef struct sweep_inputs {
    int64_t data_tokens;     /* the training stream's tokens; -1 synthetic (unbounded) */
    int64_t eval_tokens;     /* the validation stream's; -1 synthetic, 0 no evaluation in the measured run */
    int eval_batches;        /* the measured run's --eval-batches (train's default unless extra_args set it) */
    json_t *model;           /* the resolved model (config_to_json) */
    json_t *fingerprints;    /* {"model": "preset tiny" | "<bytes>:<fnv>", "data": ..., "eval_data": ... | null} */
} sweep_inputs;

/* Resolve the model, open the token files (vocabulary and the longest seq_len of any cell checked),
 * fingerprint them. 0, or -1 with "KEY: problem" in err (KEY a spec key: model, data, eval_data). */
int sweep_inputs_open(const sweep_spec *s, sweep_inputs *in, char *err, size_t el);
void sweep_inputs_free(sweep_inputs *in);
/* The largest batch per DP rank the token files allow cell m (INT32_MAX when unbounded); with_eval:
 * the measured run's evaluation counts too (a probe does not evaluate). */
int sweep_inputs_max_batch(const sweep_inputs *in, const sweep_mesh *m, int with_eval);
/* NULL when the record's configuration is what the spec asks of cell m for a launch of this kind
 * (SWEEP_ARGV_RUN or SWEEP_ARGV_PROBE); else why not, in buf. */
const char *sweep_inputs_record_mismatch(const sweep_inputs *in, const sweep_spec *s, const sweep_mesh *m, int kind,
                                         json_t *rec, char *buf, size_t cap);
#endif
