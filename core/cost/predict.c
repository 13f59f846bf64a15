/* core/cost/predict.c — the predicted step of a mesh, its JSON and its lines (see predict.h), and which
 * machine model a program uses. */
#include "core/cost/predict.h"
#include "core/job/metrics.h"
#include "core/job/catalog.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cost_default_ranks_per_host(const cost_machine *m, int world) {
    if (m->async && m->cores_per_host > 0) return m->cores_per_host < world ? m->cores_per_host : world;
    return world;
}

/* the figures of a prediction whose slowest rank p->r is set, for a step of n micro-batches */
static void rates(const cost_req *q, int rph, int n, cost_prediction *p) {
    p->ranks_per_host = rph;
    int W = q->world, dp = W / q->tp;   /* W is a multiple of tp (checked by predict) */
    p->tokens = (double)dp * q->mo.B * n * q->mo.T; /* the global batch */
    p->tok_s = p->r.step_ms > 0 ? p->tokens / (p->r.step_ms / 1e3) : 0;
    p->tok_s_per_rank = p->tok_s / W;
    p->flops_per_token = metrics_flops_per_token(q->cfg, q->mo.T);
    p->mfu = metrics_mfu(p->flops_per_token, p->tok_s_per_rank, q->m->peak_tflops * 1e12);
    p->mfu_causal = metrics_mfu(metrics_flops_per_token_causal(q->cfg, q->mo.T), p->tok_s_per_rank, q->m->peak_tflops * 1e12);
}

/* The step of n - 1 micro-batches from the recording of n >= 3: the micro-batches between the first and the
 * last behave alike (neither starts nor ends an accumulation), so cutting the second (events [e0, e1)) leaves the
 * recording of one fewer, event for event, where no collective started on one side of a cut is waited for on
 * the other. 0 with *o that trace; -1 when a cut splits a started collective from its wait (record it instead). */
static int cut_micro(const cost_trace *t, size_t e0, size_t e1, cost_trace *o) {
    uint32_t open[64];
    int nopen = 0;
    for (size_t i = 0; i < e1; i++) {
        const cost_event *e = &t->ev[i];
        if (i == e0 && nopen) return -1;
        if (e->type == COST_EV_START) {
            if (nopen == 64) return -1;
            open[nopen++] = e->id;
        } else if (e->type == COST_EV_WAIT) {
            for (int k = 0; k < nopen; k++) if (open[k] == e->id) { open[k] = open[--nopen]; break; }
        }
    }
    if (nopen) return -1;
    size_t n = t->n - (e1 - e0);
    if (n >= o->cap || !o->ev) {
        cost_event *ev = realloc(o->ev, (n + 1) * sizeof *ev);
        if (!ev) return -1;
        o->ev = ev, o->cap = n + 1;
    }
    memcpy(o->ev, t->ev, e0 * sizeof *o->ev);
    memcpy(o->ev + e0, t->ev + e1, (t->n - e1) * sizeof *o->ev);
    o->n = n, o->oom = 0, o->cbytes = t->cbytes;
    return 0;
}

/* the corner ranks (tp_rank 0 and tp−1 of dp_rank 0 and dp−1) and the first rank of the last host:
 * the ranks whose step or whose groups' placement can differ. With corner != NULL each corner's replay
 * also gives its memory (corner[k] of rank cand[k], k < 4: the memory plan's corners, plan_world_ranks).
 * With fewer != NULL and a step of 3 micro-batches, *fewer is the step of 2 from
 * the same recordings (cut_micro), and *fewer_ok says whether every rank's could be cut. */
static int predict(const cost_req *q, uint64_t budget, mem_stats *corner, cost_prediction *p, cost_prediction *fewer,
                   int *fewer_ok, char *err, size_t errlen) {
    memset(p, 0, sizeof *p);
    if (fewer_ok) *fewer_ok = 0;
    if (q->tp < 1 || q->world < 1 || q->world % q->tp) {
        snprintf(err, errlen, "world %d is not a multiple of --tp %d", q->world, q->tp);
        return -1;
    }
    int rph = q->ranks_per_host > 0 ? q->ranks_per_host : cost_default_ranks_per_host(q->m, q->world);
    int W = q->world, tp = q->tp, nm = model_micro_batches(&q->mo), cut = fewer && nm == 3;
    int cand[5] = {0, tp - 1, W - tp, W - 1, (W - 1) / rph * rph};
    /* the replays: one per distinct rank (per distinct TP rank with share_dp_ranks), each kept with its
     * memory and its cut; the timelines: one per replay and placement (a placement is the shapes of the
     * rank's groups, all the timeline reads of it). The events' buffers are kept from call to call (a
     * search prices thousands of cells: growing them from nothing each time took more system time than
     * the replays); one process prices one cell at a time. */
    static cost_trace t[5], t2[5];
    mem_stats mem[5];
    int key[5] = {0}, cut_ok[5] = {0}, nrec = 0;
    struct { int rec, shape[COST_NGROUPS][3]; cost_result r, r2; } tl[5] = {{0}};
    int ntl = 0;
    p->rank = -1;
    if (cut) memset(fewer, 0, sizeof *fewer), fewer->rank = -1;
    int rc = 0;
    for (int k = 0; k < 5 && !rc; k++) {
        int kk = q->share_dp_ranks ? cand[k] % tp : cand[k], i = 0;
        while (i < nrec && key[i] != kk) i++;
        if (i == nrec) {
            size_t ends[3] = {0};
            if (cost_record_step_mem(q->cfg, W, tp, cand[k], q->dtype, &q->mo, budget, &t[i], corner ? &mem[i] : NULL,
                                     cut ? ends : NULL, err, errlen)) { rc = -1; break; }
            key[i] = kk, nrec++;
            cut_ok[i] = cut && !cut_micro(&t[i], ends[0], ends[1], &t2[i]);
        }
        if (corner && k < 4) corner[k] = mem[i];
        cost_place pl = {.world = W, .tp = tp, .rank = cand[k], .ranks_per_host = rph, .replicate = q->mo.replicate};
        int shape[COST_NGROUPS][3], j = 0;
        for (int g = 0; g < COST_NGROUPS; g++) cost_group_shape(&pl, g, &shape[g][0], &shape[g][1], &shape[g][2]);
        while (j < ntl && !(tl[j].rec == i && !memcmp(tl[j].shape, shape, sizeof shape))) j++;
        if (j == ntl) {   /* a new replay or placement: priced (else the same figures as before) */
            tl[j].rec = i;
            memcpy(tl[j].shape, shape, sizeof shape);
            if (cost_timeline(&t[i], q->m, &pl, &tl[j].r, err, errlen)) { rc = -2; break; }
            if (cut_ok[i] && cost_timeline(&t2[i], q->m, &pl, &tl[j].r2, err, errlen)) cut_ok[i] = 0;
            ntl++;
        }
        if (p->rank < 0 || tl[j].r.step_ms > p->r.step_ms) { p->r = tl[j].r; p->rank = cand[k]; }
        if (cut && cut_ok[i]) {
            if (fewer->rank < 0 || tl[j].r2.step_ms > fewer->r.step_ms) { fewer->r = tl[j].r2; fewer->rank = cand[k]; }
        } else cut = 0;
    }
    if (rc) return rc;
    rates(q, rph, nm, p);
    if (cut) rates(q, rph, nm - 1, fewer), *fewer_ok = 1;
    return 0;
}

int cost_predict(const cost_req *q, cost_prediction *p, char *err, size_t errlen) {
    return predict(q, 0, NULL, p, NULL, NULL, err, errlen) ? -1 : 0;
}

int cost_predict_mem(const cost_req *q, uint64_t budget, mem_stats corner[4], cost_prediction *p, cost_prediction *fewer,
                     int *fewer_ok, char *err, size_t errlen) {
    int rc = predict(q, budget, corner, p, fewer, fewer_ok, err, errlen);
    return rc == -1 ? -1 : rc ? 1 : 0;
}

json_t *cost_prediction_json(const cost_prediction *p, const cost_machine *m, const char *from) {
    const cost_result *r = &p->r;
    json_t *cls = json_object(), *comm = json_object(), *ops = json_object();
    for (int c = 0; c < COST_NCLASS; c++) json_object_set_new(cls, cost_class_names[c], json_real(r->class_ms[c]));
    for (int k = 0; k < COST_NOPS; k++) if (r->op_ms[k] > 0) json_object_set_new(ops, cost_op_names[k], json_real(r->op_ms[k]));
    for (int g = 0; g < COST_NGROUPS; g++) {
        json_t *o = json_object();
        for (int k = 0; k < COMM_NKIND; k++)
            if (r->comm_by_ms[g][k] > 0) json_object_set_new(o, comm_kind_names[k], json_real(r->comm_by_ms[g][k]));
        json_object_set_new(comm, cost_group_names[g], o);
    }
    json_t *j = json_object();
    json_object_set_new(j, "predicted", json_true());
    json_object_set_new(j, "step_ms", json_real(r->step_ms));
    json_object_set_new(j, "tok_s", json_real(p->tok_s));
    json_object_set_new(j, "tok_s_per_rank", json_real(p->tok_s_per_rank));
    json_object_set_new(j, "mfu", json_real(p->mfu));
    json_object_set_new(j, "mfu_causal", json_real(p->mfu_causal));
    json_object_set_new(j, "mfu_convention", json_string("6(N - N_embedding) + 12 L d T per token: attention counted whole (PaLM, torchtitan); mfu_causal counts it half"));
    json_object_set_new(j, "compute_ms", json_real(r->compute_ms));
    json_object_set_new(j, "overlap_slowdown_ms", json_real(r->overlap_ms));
    json_object_set_new(j, "comm_ms", json_real(r->comm_ms));
    json_object_set_new(j, "exposed_comm_ms", json_real(r->exposed_comm_ms));
    json_object_set_new(j, "compute_ms_by_class", cls);
    json_object_set_new(j, "compute_ms_by_op", ops);
    json_object_set_new(j, "comm_ms_by_group", comm);
    json_object_set_new(j, "host_issue_ms", json_real(r->host_issue_ms));
    json_object_set_new(j, "compute_share", json_real(r->share));
    json_object_set_new(j, "slowest_rank", json_integer(p->rank));
    json_object_set_new(j, "ranks_per_host", json_integer(p->ranks_per_host));
    json_object_set_new(j, "machine", json_string(m->name));
    json_object_set_new(j, "machine_from", json_string(from ? from : "file"));
    json_object_set_new(j, "machine_calibrated", m->calibrated[0] ? json_string(m->calibrated) : json_null());
    json_object_set_new(j, "machine_estimates", cost_machine_estimates(m));
    return j;
}

void cost_prediction_print(FILE *f, const cost_prediction *p, const cost_machine *m, const char *from) {
    const cost_result *r = &p->r;
    json_t *est = cost_machine_estimates(m);
    fprintf(f, "# predicted step (machine %s, %s%s%s; %d ranks per host%s): %.3f ms, %.0f tok/s, MFU %.1f%% "
            "(attention counted whole; %.1f%% counted causal)\n", m->name,
            from ? from : "file", m->calibrated[0] ? " " : "", m->calibrated, p->ranks_per_host,
            r->share > 1 ? ", sharing compute" : "", r->step_ms, p->tok_s, 100 * p->mfu, 100 * p->mfu_causal);
    fprintf(f, "# predicted compute %.3f ms:", r->compute_ms);
    for (int c = 0; c < COST_NCLASS; c++) if (r->class_ms[c] > 0) fprintf(f, " %s %.3f", cost_class_names[c], r->class_ms[c]);
    if (r->overlap_ms > 0) fprintf(f, " beside-collectives %.3f", r->overlap_ms);
    fprintf(f, "\n# predicted communication %.3f ms, exposed %.3f ms:", r->comm_ms, r->exposed_comm_ms);
    for (int g = 0; g < COST_NGROUPS; g++)
        for (int k = 0; k < COMM_NKIND; k++)
            if (r->comm_by_ms[g][k] > 0) fprintf(f, " %s %s %.3f", cost_group_names[g], comm_kind_names[k], r->comm_by_ms[g][k]);
    fprintf(f, "\n");
    if (json_array_size(est)) {
        fprintf(f, "# predicted with estimated machine figures:");
        for (size_t i = 0; i < json_array_size(est); i++) fprintf(f, "%s %s", i ? "," : "", json_string_value(json_array_get(est, i)));
        fprintf(f, "\n");
    }
    json_decref(est);
}

static int is_file_spec(const char *s) {
    size_t n = strlen(s);
    return strchr(s, '/') || (n > 5 && !strcmp(s + n - 5, ".json")) || access(s, F_OK) == 0;
}

int cost_machine_resolve(const char *spec, const char *gpu, const char *build_dir, cost_machine *m, const char **from,
                         char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    *from = NULL;
    const char *env = getenv("MESHSWEEP_MACHINE");
    if ((spec && !strcmp(spec, "none")) || (!spec && env && !strcmp(env, "none"))) return 0;   /* no model: no prediction */
    if (spec) {
        if (cost_machine_shipped(spec, m) == 0) { *from = "shipped"; return 1; }
        if (!is_file_spec(spec)) {
            char names[128];
            cost_machine_shipped_names(names, sizeof names);
            snprintf(err, errlen, "--machine '%s' is not a known machine (known: %s) nor a machine file", spec, names);
            return -1;
        }
        if (cost_machine_load(spec, m, err, errlen)) return -1;
        *from = m->calibrated[0] ? "calibrated" : "file";
        return 1;
    }
    if (env && *env) {
        if (cost_machine_load(env, m, err, errlen)) return -1;
        *from = m->calibrated[0] ? "calibrated" : "file";
        return 1;
    }
    if (gpu && cost_machine_shipped(gpu, m) == 0) { *from = "shipped"; return 1; }
    char path[4200];
    if (!build_dir || catalog_machine_path(build_dir, path, sizeof path) || access(path, R_OK) != 0) return 0;
    if (cost_machine_load(path, m, err, errlen)) return -1;
    *from = "calibrated";
    return 1;
}
