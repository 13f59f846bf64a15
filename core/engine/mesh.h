/* core/engine/mesh.h — the 2D dp×tp mesh (docs/semantics.md#mesh): tp_rank = rank mod tp, dp_rank = rank / tp.
 * A TP group is tp consecutive ranks; a DP group is the ranks with equal tp_rank (strided). */
#ifndef MESHSWEEP_MESH_H
#define MESHSWEEP_MESH_H
#include <stddef.h>
typedef struct mesh { int world, rank, dp, tp, dp_rank, tp_rank; } mesh_t;
/* -1 with a message when tp < 1, world < 1, rank out of range or world mod tp != 0 */
int mesh_init(mesh_t *m, int world, int rank, int tp, char *err, size_t errlen);
#endif
