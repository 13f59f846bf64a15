/* core/sweep/grid.h — grid sweeps (docs/grids.md): the spec key "axes" (option keys of the spec to lists of
 * values), checked strictly, crossed with the meshes into cells, and the cell names ("2x4.ac=full.seq=4096")
 * files, charts and the report know the cells by. Also the values an option takes wherever it is given
 * (checkpointing as none|full|every:K). Pure functions on the parsed spec: no I/O.
 * Not the rest of the spec (core/sweep/spec.c), not the runs (core/sweep/mesh_runs.c). */
#ifndef MESHSWEEP_SWEEP_GRID_H
#define MESHSWEEP_SWEEP_GRID_H
#include <stddef.h>

#include "core/formats/config.h"
#include "core/sweep/spec.h"

/* The option keys that may be axes and their short names in cells: checkpoint_activations ac,
 * sp_activations spa, sequence_parallel sp, prefetch pf, seq_len seq, global_batch gb, mem_budget mem. */
/* The short name of an axis key ("seq_len" -> "seq"); NULL when the key cannot be an axis. */
const char *sweep_axis_short_name(const char *key);

/* The spec's "axes" object only as far as the other keys depend on it: 1 when KEY is an axis. */
int sweep_axes_has(json_t *root, const char *key);
/* Structural checks that come before the top-level keys are read: "axes" is an object of known keys,
 * none also given at the top level, each a non-empty array. 0, or -1 with one line in err. */
int sweep_axes_check_shape(json_t *root, char *err, size_t el);
/* After the top-level keys: give every mesh the spec's options, read every axis value, and build the
 * cells (without axes: one cell per mesh, named as the mesh). 0, or -1 with one line in err. */
int sweep_grid_build(json_t *root, sweep_spec *s, char *err, size_t el);
void sweep_grid_free(sweep_spec *s);
/* The axes against the spec's model, once it is loaded (core/sweep/runner.c, before any launch or plan):
 * every seq_len value within the model's max_position_embeddings, by the check build/train makes of
 * --seq-len (config_check_seq_len), so a grid with one value too long is refused, not half run.
 * 0, or -1 with "axes.seq_len[i]: T exceeds max_position_embeddings N of model M" in err. */
int sweep_axes_check_model(const sweep_spec *s, const model_config *cfg, char *err, size_t el);

/* Checkpointing as the spec writes it: false/"none", true/"full", "every:K" (K a positive integer
 * without sign or leading zeros). *out: "none", "full" (static) or the string itself. 0 or -1. */
int sweep_parse_checkpointing(json_t *v, const char **out);
/* A cell name: one path component of [A-Za-z0-9._=:-], at most SWEEP_CELL_NAME_MAX characters,
 * starting with a digit (a mesh), never "." or "..". */
int sweep_cell_name_valid(const char *name);

/* NULL when a run record agrees with cell c where the cell differs from its neighbours: each axis
 * value the record's config carries, and at a matched global batch the record's global batch (and
 * micro_batch, when it has one). Else why not, in buf. Keys a record lacks are not judged. */
const char *sweep_cell_record_mismatch(const sweep_spec *s, const sweep_mesh *c, json_t *rec, char *buf, size_t cap);

/* The text of cell c's value of axis k, as in its name ("every:2"). */
const char *sweep_cell_value(const sweep_spec *s, const sweep_mesh *c, int k);
/* A setting's values as "ac=full seq=4096" (sep between the pairs), leaving out axis `skip` (-1:
 * none); "" when nothing is left. Returns out. */
char *sweep_setting_label(const sweep_spec *s, const sweep_mesh *c, int skip, const char *sep, char *out,
                          size_t cap);
/* "3 meshes", or in a grid "24 cells (4 meshes x 6 settings)". */
void sweep_count_text(const sweep_spec *s, char *out, size_t cap);
#endif
