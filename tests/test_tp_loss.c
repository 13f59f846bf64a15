/* tests/test_tp_loss.c — the vocab-parallel cross-entropy at the core/engine/tp.c level (tp_shape_of and
 * tp_cross_entropy) over the MPI world as the TP group, against a full-vocabulary double-precision
 * cross-entropy written here. The vocabulary (37) is divisible by no TP degree above 1, so the last
 * rank(s) hold padding; the pad logits are filled with large values, so a loss that does not mask
 * them is visibly wrong. Checks per-token losses, dloss/dlogits * scale on every real column, exact
 * zeros on pad columns, and targets on every rank (including the last real id V-1).
 * Run alone it checks tp = 1; tests/t_tp_loss.sh runs it under mpirun with 2, 3 and 4 ranks. */
#include "tests/check.h"
#include "core/engine/mem.h"
#include "core/engine/tp.h"
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

enum { V = 37, ROWS = 7 };

static double full_logit(int r, int v) { return 3.0 * sin(0.7 * r + 1.3 * v) + 0.05 * v; }

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    cpu_blas_init();
    mem_init(&ops_cpu, 0, 0);
    comm_group g;
    comm_mpi_world(&g);
    int tp = g.size, rank = g.rank;
    model_config c;
    memset(&c, 0, sizeof c);
    c.vocab_size = V; c.hidden_size = 24; c.intermediate_size = 24; c.num_hidden_layers = 1;
    c.num_attention_heads = 12; c.num_key_value_heads = 12; c.max_position_embeddings = 16;
    tp_shape s;
    char err[256], name[96];
    int rc = tp_shape_of(&s, &c, tp, rank, err, sizeof err);
    int vp = (V + tp - 1) / tp * tp, vl = vp / tp;
    int v0 = rank * vl, valid = V - v0 < 0 ? 0 : (V - v0 > vl ? vl : V - v0);
    int shape_ok = rc == 0 && s.Vp == vp && s.Vl == vl && s.v_start == v0 && s.v_valid == valid;
    int32_t tg[ROWS] = {0, V - 1, 5, V / 2, vl < V ? vl : 1, /* the first id of rank 1 */ V - 2, 17};
    float *logits = mem_alloc(MEM_WORKSPACE, (size_t)ROWS * vl * sizeof(float));
    float *stats = mem_alloc(MEM_WORKSPACE, 3 * ROWS * sizeof(float));
    float *loss = mem_alloc(MEM_WORKSPACE, ROWS * sizeof(float)); /* the "device" losses (ops_cpu: host memory) */
    for (int r = 0; r < ROWS; r++)
        for (int j = 0; j < vl; j++)
            logits[(size_t)r * vl + j] = j < valid ? (float)full_logit(r, v0 + j) : 50.0f + j; /* pad: large, must be masked */
    tp_ctx t;
    tp_init(&t, &g, &ops_cpu, 0, 1, ROWS, 4);
    const double scale = 1.0 / ROWS;
    if (shape_ok) tp_cross_entropy(&t, &s, logits, logits, tg, ROWS, (float)scale, stats, loss);
    /* reference over the full vocabulary */
    double worst_loss = 0, worst_grad = 0, pad_nonzero = 0;
    for (int r = 0; r < ROWS && shape_ok; r++) {
        double mx = -1e300, se = 0;
        for (int v = 0; v < V; v++) mx = fmax(mx, full_logit(r, v));
        for (int v = 0; v < V; v++) se += exp(full_logit(r, v) - mx);
        double lse = mx + log(se), want = lse - full_logit(r, tg[r]);
        double e = fabs(loss[r] - want) / fabs(want);
        if (getenv("TP_LOSS_DEBUG")) printf("row %d loss %g want %g\n", r, loss[r], want);
        if (!(e <= worst_loss)) worst_loss = e;
        for (int j = 0; j < vl; j++) {
            double gv = logits[(size_t)r * vl + j];
            if (j >= valid) { if (!(gv == 0.0)) pad_nonzero = 1; continue; }
            int v = v0 + j;
            double want_g = (exp(full_logit(r, v) - lse) - (v == tg[r])) * scale;
            double eg = fabs(gv - want_g);
            if (!(eg <= worst_grad)) worst_grad = eg;
        }
    }
    double w[4] = {worst_loss, worst_grad, pad_nonzero, shape_ok ? 0.0 : 1.0};
    MPI_Allreduce(MPI_IN_PLACE, w, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) {
        snprintf(name, sizeof name, "tp_loss_shape_tp%d", tp);
        CHECK(w[3] == 0, name, "tp_shape_of: rc %d Vp %d Vl %d v_start %d v_valid %d (want %d %d %d %d) on some rank",
              rc, s.Vp, s.Vl, s.v_start, s.v_valid, vp, vl, v0, valid);
        snprintf(name, sizeof name, "tp_loss_per_token_tp%d", tp);
        CHECK(w[3] == 0 && w[0] < 1e-5, name, "max rel err %g against the full-vocabulary loss", w[0]);
        snprintf(name, sizeof name, "tp_loss_grad_tp%d", tp);
        CHECK(w[3] == 0 && w[1] < 1e-6, name, "max |err| %g of dloss/dlogits", w[1]);
        snprintf(name, sizeof name, "tp_loss_pad_grad_zero_tp%d", tp);
        CHECK(w[3] == 0 && w[2] == 0, name, "a pad column got a non-zero gradient");
    }
    mem_free(loss); mem_free(stats); mem_free(logits);
    mem_shutdown();
    int bad = check_exit();
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return bad;
}
