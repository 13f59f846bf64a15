/* core/engine/mesh.h — the R×S×T mesh (docs/semantics.md#mesh): replicate × shard × tp, ranks tp fastest,
 * then shard, then replicate: tp_rank = rank mod tp, shard_rank = (rank / tp) mod S, rep_rank = rank / (S·tp).
 * A TP group is tp consecutive ranks; a shard group is the S ranks of equal rep_rank and tp_rank (stride tp);
 * a replica group is the R ranks of equal shard_rank and tp_rank (stride S·tp). dp = R·S is the data-parallel
 * degree of the batch and dp_rank = rank / tp its index (= rep_rank·S + shard_rank). R = 1 is the 2D S×T
 * mesh: dp = S, the shard group is the DP group. */
#ifndef MESHSWEEP_MESH_H
#define MESHSWEEP_MESH_H
#include <stddef.h>
typedef struct mesh {
    int world, rank, dp, tp, dp_rank, tp_rank;
    int rep, shard, rep_rank, shard_rank;   /* R, S and this rank's coordinates (R = 1: shard = dp) */
} mesh_t;
/* the 2D mesh (R = 1): -1 with a message when tp < 1, world < 1, rank out of range or world mod tp != 0 */
int mesh_init(mesh_t *m, int world, int rank, int tp, char *err, size_t errlen);
/* the R×S×T mesh, S = world / (rep·tp): also -1 when rep < 1 or rep does not divide dp = world / tp */
int mesh_init_hsdp(mesh_t *m, int world, int rank, int rep, int tp, char *err, size_t errlen);
/* "RxSxT", or "SxT" when R = 1 (as specs and records name meshes) */
void mesh_name(const mesh_t *m, char *buf, size_t cap);
#endif
