/* core/engine/mesh.c — rank to (dp_rank, tp_rank); see mesh.h. */
#include "core/engine/mesh.h"
#include <stdio.h>

int mesh_init(mesh_t *m, int world, int rank, int tp, char *err, size_t errlen) {
    if (world < 1 || tp < 1 || rank < 0 || rank >= world) {
        snprintf(err, errlen, "mesh: invalid world %d / tp %d / rank %d", world, tp, rank);
        return -1;
    }
    if (world % tp) {
        snprintf(err, errlen, "--tp %d does not divide the world size %d", tp, world);
        return -1;
    }
    m->world = world; m->rank = rank; m->tp = tp; m->dp = world / tp;
    m->tp_rank = rank % tp; m->dp_rank = rank / tp;
    return 0;
}
