/* core/engine/mesh.c — rank to (rep_rank, shard_rank, tp_rank); see mesh.h. */
#include "core/engine/mesh.h"
#include <stdio.h>

int mesh_init(mesh_t *m, int world, int rank, int tp, char *err, size_t errlen) {
    return mesh_init_hsdp(m, world, rank, 1, tp, err, errlen);
}

int mesh_init_hsdp(mesh_t *m, int world, int rank, int rep, int tp, char *err, size_t errlen) {
    if (world < 1 || tp < 1 || rank < 0 || rank >= world) {
        snprintf(err, errlen, "mesh: invalid world %d / tp %d / rank %d", world, tp, rank);
        return -1;
    }
    if (world % tp) {
        snprintf(err, errlen, "--tp %d does not divide the world size %d", tp, world);
        return -1;
    }
    int dp = world / tp;
    if (rep < 1) {
        snprintf(err, errlen, "--replicate must be >= 1 (got %d)", rep);
        return -1;
    }
    if (dp % rep) {
        snprintf(err, errlen, "--replicate %d does not divide dp = world %d / tp %d = %d (mesh R x S x tp needs R * S * tp = world)",
                 rep, world, tp, dp);
        return -1;
    }
    m->world = world; m->rank = rank; m->tp = tp; m->dp = dp;
    m->tp_rank = rank % tp; m->dp_rank = rank / tp;
    m->rep = rep; m->shard = dp / rep;
    m->shard_rank = m->dp_rank % m->shard; m->rep_rank = m->dp_rank / m->shard;
    return 0;
}

void mesh_name(const mesh_t *m, char *buf, size_t cap) {
    if (m->rep > 1) snprintf(buf, cap, "%dx%dx%d", m->rep, m->shard, m->tp);
    else snprintf(buf, cap, "%dx%d", m->dp, m->tp);
}
