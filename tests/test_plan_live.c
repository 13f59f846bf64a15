/* tests/test_plan_live.c — planning inside a running engine (core/engine/engine.h): a real CPU engine
 * (1 MPI rank, model tiny) is built and stepped, then plans are made in the same process while it
 * holds its memory: the plan of its own configuration and a max-batch plan of an 8-rank mesh, each
 * through plan_report, the function behind `build/train --plan`. Their table (stdout) and record
 * (--out) must be the same bytes as build/train --plan's for the same options, run first as a
 * separate process; the live engine must come out untouched: its arena's figures the same, and its
 * next step the same loss and gradient norm, bit for bit, as a second engine stepped without plans
 * in between. The planned peak of its own configuration equals its measured peak. */
#include "tests/check.h"
#include "core/common/cli.h"
#include "core/engine/model.h"
#include "core/engine/optim.h"
#include "core/run/plan_report.h"
#include "core/job/catalog.h"
#include <fcntl.h>
#include <mpi.h>
#include <string.h>

enum { B = 2, T = 32, STEPS = 2 };
static const char *const MODEL = "tiny";

typedef struct live { engine_t E; comm_group tpg, dpg, wg; model_t M; } live_t;

static int32_t g_in[B * T], g_tg[B * T];

static void build(live_t *L, const model_config *c, const model_opts *mo) {
    char err[256];
    mesh_t m;
    if (mesh_init(&m, 1, 0, 1, err, sizeof err) || engine_init(&L->E, &device_cpu, DTYPE_F32, err, sizeof err)) {
        printf("FAIL plan_live_setup: %s\n", err); exit(1);
    }
    comm_mpi_groups(&L->E.comm, &L->tpg, &L->dpg, 1);
    comm_mpi_world(&L->E.comm, &L->wg);
    if (model_init(&L->M, &L->E, c, &m, &L->tpg, &L->dpg, mo, err, sizeof err)) { printf("FAIL plan_live_model: %s\n", err); exit(1); }
    model_init_params(&L->M, 1337);
}

/* one optimizer step; the loss and the gradient norm */
static void step(live_t *L, int s, double out[2]) {
    optim_cfg oc = {.lr = 3e-3, .weight_decay = 0.1, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .grad_clip = 1.0};
    out[0] = model_forward_backward(&L->M, g_in, g_tg, 1.0f / (B * T));
    out[1] = optim_step(&L->M, &L->wg, &oc, s, STEPS + 1, NULL);
}

static void drop(live_t *L) {
    model_free(&L->M);
    comm_mpi_groups_free(&L->tpg, &L->dpg);
    engine_release(&L->E);
}

/* the whole of a file, NUL-terminated (NULL when it cannot be read) */
static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long l = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = l >= 0 ? malloc((size_t)l + 1) : NULL;
    *n = p && fread(p, 1, (size_t)l, f) == (size_t)l ? (size_t)l : 0;
    if (p) p[*n] = 0;
    fclose(f);
    return p;
}

static int same_files(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    char *x = slurp(a, &na), *y = slurp(b, &nb);
    int same = x && y && na > 0 && na == nb && !memcmp(x, y, na);
    free(x); free(y);
    return same;
}

/* plan_report inside this process, its stdout into a file */
static int plan_here(const engine_t *E, const model_config *c, int world, int tp, const model_opts *mo, int max_batch,
                     uint64_t budget, const char *out, const char *table) {
    fflush(stdout);
    int keep = dup(1), fd = open(table, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (keep < 0 || fd < 0) return -1;
    dup2(fd, 1); close(fd);
    plan_req q = {.cfg = c, .world = world, .tp = tp, .mo = *mo, .max_batch = max_batch, .budget = budget, .E = E, .out = out};
    int rc = plan_report(&q);
    fflush(stdout);
    dup2(keep, 1); close(keep);
    return rc;
}

int main(int argc, char **argv) {
    if (check_mkscratch("plan_live")) { printf("FAIL plan_live_scratch: cannot make a folder\n"); return 1; }
    const char *bin = getenv("BUILD") ? getenv("BUILD") : "build";
    /* build/train --plan first, in a process of its own, before MPI starts here */
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s/train --plan --model %s --batch-size %d --seq-len %d --out %s > %s 2>&1 && "
             "%s/train --plan --model %s --world 8 --tp 2 --batch-size max --mem-budget 24MiB --seq-len %d --out %s > %s 2>&1",
             bin, MODEL, B, T, check_path("own.json"), check_path("own.txt"), bin, MODEL, T, check_path("mesh.json"),
             check_path("mesh.txt"));
    int cli_rc = system(cmd);
    MPI_Init(&argc, &argv);
    cpu_blas_init();
    cli_set_program("train");
    model_config c;
    char err[256];
    if (catalog_model(&c, MODEL, err, sizeof err)) { printf("FAIL plan_live_config: %s\n", err); return 1; }
    for (int i = 0; i < B * T; i++) { g_in[i] = (i * 7 + 3) % c.vocab_size; g_tg[i] = (i * 11 + 5) % c.vocab_size; }
    model_opts mo = {.B = B, .T = T, .sequence_parallel = 1, .sp_local = 1, .prefetch = 1}; /* build/train's defaults */

    live_t A, R;   /* A plans between its steps, R does not */
    build(&A, &c, &mo);
    build(&R, &c, &mo);
    double a[2], r[2];
    for (int s = 0; s < STEPS; s++) { step(&A, s, a); step(&R, s, r); }
    mem_stats before = *mem_get_stats(&A.E.mem);

    int own = plan_here(&A.E, &c, 1, 1, &mo, 0, 0, check_path("own_live.json"), check_path("own_live.txt"));
    int mesh = plan_here(&A.E, &c, 8, 2, &mo, 1, 24ull << 20, check_path("mesh_live.json"), check_path("mesh_live.txt"));
    CHECK(cli_rc == 0 && own == 0 && mesh == 0, "plan_live_plans_made", "build/train --plan %d, in the engine %d and %d",
          cli_rc, own, mesh);
    CHECK(same_files(check_path("own.txt"), check_path("own_live.txt")) &&
          same_files(check_path("own.json"), check_path("own_live.json")), "plan_live_own_config_same_bytes_as_cli",
          "the table or record of the plan made beside the engine differs from build/train --plan's");
    CHECK(same_files(check_path("mesh.txt"), check_path("mesh_live.txt")) &&
          same_files(check_path("mesh.json"), check_path("mesh_live.json")), "plan_live_mesh_max_batch_same_bytes_as_cli",
          "the table or record of the 8-rank max-batch plan differs from build/train --plan's");
    CHECK(!memcmp(&before, mem_get_stats(&A.E.mem), sizeof before), "plan_live_arena_untouched",
          "the live arena's figures changed while planning (total now %llu, was %llu)",
          (unsigned long long)mem_get_stats(&A.E.mem)->total_cur, (unsigned long long)before.total_cur);
    mem_stats planned;
    int rc = plan_rank(&A.E, &c, 1, 1, 0, &mo, 0, &planned, err, sizeof err);
    CHECK(rc == 0 && planned.total_peak == before.total_peak && !memcmp(planned.peak, before.peak, sizeof planned.peak),
          "plan_live_planned_equals_measured", "planned %llu, measured %llu", (unsigned long long)planned.total_peak,
          (unsigned long long)before.total_peak);
    step(&A, STEPS, a); step(&R, STEPS, r);
    CHECK(a[0] == r[0] && a[1] == r[1] && a[0] > 0, "plan_live_next_step_unchanged",
          "loss %.17g vs %.17g, norm %.17g vs %.17g (with plans between the steps vs without)", a[0], r[0], a[1], r[1]);
    drop(&A); drop(&R);
    MPI_Finalize();
    check_rmtree(check_scratch);
    return check_exit();
}
