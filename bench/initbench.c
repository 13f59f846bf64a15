/* bench/initbench.c — how long initialisation of one rank's owned slices takes (docs/semantics.md#initialisation,
 * core/engine/init.c): builds the model's FSDP state for one rank of a mesh with the null kernel table (no
 * device, nothing allocated but the host buffer of one unit at a time) and times model_init_params,
 * the same host code a real run executes before copying each unit to the device.
 * Prints the owned element count, the thread count, wall seconds and CPU seconds (user + system of
 * the process, so a loaded machine still gives the work per element) and ns of CPU per element.
 *   build/initbench --model llama3.2-1b [--world 1 --tp 1 --rank 0] [--threads N] [--seed 1337]
 * Not a test: it asserts nothing (speed is measured, never asserted; docs/gpu.md, "Initialisation on the host"). */
#include "core/common/cli.h"
#include "core/formats/config.h"
#include "core/engine/init.h"
#include "core/engine/mem.h"
#include "core/engine/model.h"
#include "core/job/catalog.h"
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

typedef struct { const char *model; int world, tp, rank, threads, help; long long seed; } opts_t;
#define F(x) offsetof(opts_t, x)
static const cli_opt OPTS[] = {
    {"model", CLI_STR, F(model), "NAME|PATH", "preset or HF config.json (default llama3.2-1b)", 0, NULL, NULL},
    {"world", CLI_INT, F(world), "W", "ranks of the mesh (default 1)", 0, NULL, NULL},
    {"tp", CLI_INT, F(tp), "N", "tensor-parallel degree (default 1)", 0, NULL, NULL},
    {"rank", CLI_INT, F(rank), "R", "the rank whose owned slices are generated (default 0)", 0, NULL, NULL},
    {"threads", CLI_INT, F(threads), "N", "host threads (default: as a run picks them, core/engine/init.c)", 0, NULL, NULL},
    {"seed", CLI_LL, F(seed), "N", "initialisation seed (default 1337)", 0, NULL, NULL},
    {"help", CLI_ON, F(help), NULL, "this text", 0, NULL, NULL},
};
#define NOPTS ((int)(sizeof OPTS / sizeof *OPTS))

static double now_s(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static double cpu_s(void) {
    struct rusage u; getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

int main(int argc, char **argv) {
    opts_t o = {.model = "llama3.2-1b", .world = 1, .tp = 1, .rank = 0, .threads = 0, .seed = 1337};
    char err[512];
    cli_set_program("initbench");
    if (cli_parse(OPTS, NOPTS, &o, NULL, argc, argv, err, sizeof err)) { cli_say("%s", err); return 2; }
    if (o.help) { printf("usage: initbench [options]\n"); cli_usage(stdout, OPTS, NOPTS); return 0; }
    if (o.world < 1 || o.tp < 1 || o.rank < 0 || o.rank >= o.world || o.threads < 0) {
        cli_say("need --world >= 1, --tp >= 1, 0 <= --rank < --world, --threads >= 0"); return 2;
    }
    model_config c;
    if (catalog_model(&c, o.model, err, sizeof err)) { cli_say("%s", err); return 2; }
    mesh_t m;
    if (mesh_init(&m, o.world, o.rank, o.tp, err, sizeof err)) { cli_say("%s", err); return 2; }
    model_opts mo = {.B = 1, .T = 8, .sequence_parallel = 0, .prefetch = 1, .checkpoint = 0};
    engine_t E;
    engine_init_plan(&E, DTYPE_F32, 0);
    comm_group tpg, dpg;
    comm_null_group(&tpg, &E.comm, m.tp, m.tp_rank); comm_null_group(&dpg, &E.comm, m.dp, m.dp_rank);
    model_t M;
    if (model_init(&M, &E, &c, &m, &tpg, &dpg, &mo, err, sizeof err)) { cli_say("%s", err); return 2; }
    if (o.threads) { char v[16]; snprintf(v, sizeof v, "%d", o.threads); setenv("MESHSWEEP_INIT_THREADS", v, 1); }
    long long n = 0;
    for (int i = 0; i < M.fsdp.n; i++) n += M.units[i].shard;
    double w0 = now_s(), c0 = cpu_s();
    model_init_params(&M, (uint64_t)o.seed);
    double w = now_s() - w0, cs = cpu_s() - c0;
    printf("# model %s, rank %d of %dx%d, %d threads\n", c.name, o.rank, m.dp, m.tp, init_threads());
    printf("# %14s %10s %10s %12s\n", "owned_elems", "wall_s", "cpu_s", "cpu_ns_elem");
    printf("%16lld %10.3f %10.3f %12.2f\n", n, w, cs, cs * 1e9 / (double)(n ? n : 1));
    model_free(&M);
    engine_release(&E);
    return 0;
}
