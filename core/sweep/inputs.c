/* core/sweep/inputs.c — see inputs.h. */
#include "core/sweep/inputs.h"

#include "core/formats/config.h"
#include "core/formats/data.h"
#include "core/job/job.h"
#include "core/job/catalog.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define K(id) job_record_key(JOB_KEY_##id) /* the record's keys: core/job/keys.h */

/* ---- fingerprints ----------------------------------------------------------------------------- */

/* "<bytes>:<fnv1a64 of every byte>" of a regular file; -1 when it cannot be read (errno). A rerun
 * reads each input once (about a second per GB); nothing is sampled, so no change can slip through. */
static int file_print(const char *path, char *out, size_t cap) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        errno = EINVAL;
        return -1;
    }
    static unsigned char buf[1 << 16];
    uint64_t h = 1469598103934665603ull;
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        for (ssize_t i = 0; i < n; i++) h = (h ^ buf[i]) * 1099511628211ull;
    int e = errno;
    close(fd);
    if (n < 0) {
        errno = e;
        return -1;
    }
    snprintf(out, cap, "%lld:%016llx", (long long)st.st_size, (unsigned long long)h);
    return 0;
}

/* a token file as train names it: the file, or a Megatron prefix's .bin and .idx */
static json_t *data_print(const data_file *d) {
    if (d->synthetic) return json_string("synthetic");
    char a[64], b[64] = "", idx[4200];
    if (file_print(d->path, a, sizeof a)) return json_string("unreadable");
    if (d->format == DATA_MEGATRON) {
        snprintf(idx, sizeof idx, "%s", d->path);
        size_t n = strlen(idx);
        if (n > 4) snprintf(idx + n - 4, 5, ".idx");
        if (file_print(idx, b, sizeof b)) snprintf(b, sizeof b, "unreadable");
    }
    char both[140];
    snprintf(both, sizeof both, "%s%s%s", a, b[0] ? " + " : "", b);
    return json_string(both);
}

/* ---- opening ---------------------------------------------------------------------------------- */

static int open_tokens(const char *key, const char *path, const model_config *c, int T, int64_t *tokens,
                       json_t **print, char *err, size_t el) {
    data_file d;
    char e[1200];
    if (data_open(&d, path, c->vocab_size, T, 0, e, sizeof e)) {
        /* train's own line, without its "data: " (the key says which file) */
        snprintf(err, el, "%s: %s (for model %s at seq_len %d)", key, strncmp(e, "data: ", 6) ? e : e + 6, c->name, T);
        return -1;
    }
    *tokens = d.synthetic ? -1 : d.ntokens;
    *print = data_print(&d);
    data_close(&d);
    return 0;
}

int sweep_inputs_open(const sweep_spec *s, sweep_inputs *in, char *err, size_t el) {
    memset(in, 0, sizeof *in);
    model_config c;
    char why[1200];
    if (catalog_model(&c, s->model, why, sizeof why) != 0) {
        snprintf(err, el, "model: %s", why);
        return -1;
    }
    in->model = config_to_json(&c);
    in->fingerprints = json_object();
    char mp[96] = "";
    if (catalog_is_preset(s->model)) snprintf(mp, sizeof mp, "preset %s", s->model);
    else if (file_print(s->model, mp, sizeof mp)) snprintf(mp, sizeof mp, "unreadable");
    json_object_set_new(in->fingerprints, "model", json_string(mp));
    int T = 1;
    for (int i = 0; i < s->n_cells; i++) T = s->cells[i].seq_len > T ? s->cells[i].seq_len : T;
    job_t def;
    job_init(&def);
    in->eval_batches = def.o.eval_batches;
    for (int i = 0; i < s->n_extra_args; i++) { /* --eval-batches N or --eval-batches=N in extra_args */
        const char *a = s->extra_args[i], *v = NULL;
        if (!a) continue;
        if (!strcmp(a, "--eval-batches") && i + 1 < s->n_extra_args) v = s->extra_args[i + 1];
        else if (!strncmp(a, "--eval-batches=", 15)) v = a + 15;
        if (v && strtol(v, NULL, 10) > 0 && strtol(v, NULL, 10) < 1 << 30) in->eval_batches = (int)strtol(v, NULL, 10);
    }
    json_t *p = NULL;
    if (open_tokens("data", s->data, &c, T, &in->data_tokens, &p, err, el)) return sweep_inputs_free(in), -1;
    json_object_set_new(in->fingerprints, "data", p);
    p = json_null();
    if (s->eval_data && s->eval_every > 0) {
        json_decref(p);
        if (open_tokens("eval_data", s->eval_data, &c, T, &in->eval_tokens, &p, err, el)) return sweep_inputs_free(in), -1;
    }
    json_object_set_new(in->fingerprints, "eval_data", p);
    return 0;
}

void sweep_inputs_free(sweep_inputs *in) {
    json_decref(in->model);
    json_decref(in->fingerprints);
    in->model = in->fingerprints = NULL;
}

int sweep_inputs_max_batch(const sweep_inputs *in, const sweep_mesh *m, int with_eval) {
    int64_t b = INT32_MAX;
    if (m->seq_len <= 0 || m->dp <= 0) return 0;
    if (in->data_tokens > 0) {
        int64_t nseq = (in->data_tokens - 1) / m->seq_len, x = nseq / m->dp;
        b = x < b ? x : b;
    }
    if (with_eval && in->eval_tokens > 0) {
        int64_t nseq = (in->eval_tokens - 1) / m->seq_len, x = nseq / ((int64_t)m->dp * in->eval_batches);
        b = x < b ? x : b;
    }
    return (int)b;
}

/* ---- a kept record against the spec ----------------------------------------------------------- */

static const char *differs(char *buf, size_t cap, const char *key, json_t *have, const char *want_text) {
    char *h = have ? json_dumps(have, JSON_ENCODE_ANY | JSON_REAL_PRECISION(17)) : NULL;
    snprintf(buf, cap, "the record is of %s %.60s; asked: %.60s", key, h ? h : "(none)", want_text);
    free(h);
    return buf;
}

/* A field the record leaves out is not compared (train writes them all; a stand-in's or an older
 * train's record may not): what is there must be what is asked. */
static const char *num(json_t *cfg, const char *key, double want, char *buf, size_t cap) {
    json_t *v = json_object_get(cfg, key);
    if (!v || (json_is_number(v) && json_number_value(v) == want)) return NULL;
    char w[40];
    snprintf(w, sizeof w, "%.17g", want);
    return differs(buf, cap, key, v, w);
}

static const char *str(json_t *cfg, const char *key, const char *want, char *buf, size_t cap) {
    json_t *v = json_object_get(cfg, key);
    if (!v || (want ? json_is_string(v) && !strcmp(json_string_value(v), want) : json_is_null(v))) return NULL;
    return differs(buf, cap, key, v, want ? want : "none");
}

const char *sweep_inputs_record_mismatch(const sweep_inputs *in, const sweep_spec *s, const sweep_mesh *m, int kind,
                                         json_t *rec, char *buf, size_t cap) {
    json_t *cfg = json_object_get(rec, K(CONFIG));
    if (!json_is_object(cfg)) return snprintf(buf, cap, "the record has no configuration"), buf;
    json_t *model = json_object_get(cfg, K(MODEL));
    if (json_is_string(model)) /* a record the runner wrote itself (no run to take a configuration from) */
        return strcmp(json_string_value(model), s->model) ? differs(buf, cap, "model", model, s->model) : NULL;
    const char *key;
    json_t *want;
    json_object_foreach(in->model, key, want) {
        if (!strcmp(key, "name") || !json_is_object(model)) continue;
        json_t *have = json_object_get(model, key);
        if (!have || json_equal(have, want)) continue;
        char *w = json_dumps(want, JSON_ENCODE_ANY | JSON_COMPACT);
        char k[80];
        snprintf(k, sizeof k, "model.%s", key);
        differs(buf, cap, k, have, w ? w : "?");
        free(w);
        return buf;
    }
    job_t dj;
    job_init(&dj);
    const job_opts d = dj.o;
    const char *r;
    if ((r = num(cfg, K(LR), s->lr, buf, cap)) || (r = num(cfg, K(SEED), (double)(s->has_seed ? s->seed : d.seed), buf, cap)) ||
        (r = num(cfg, K(GRAD_CLIP), s->has_grad_clip ? s->grad_clip : d.grad_clip, buf, cap)) ||
        (r = num(cfg, K(WEIGHT_DECAY), s->has_weight_decay ? s->weight_decay : d.weight_decay, buf, cap)) ||
        (r = num(cfg, K(WARMUP), s->warmup >= 0 ? s->warmup : d.warmup, buf, cap)) ||
        (r = str(cfg, K(SCHEDULE), s->schedule ? s->schedule : d.schedule, buf, cap)) ||
        (r = str(cfg, K(BACKEND), s->backend, buf, cap)) || (r = str(cfg, K(DATA), s->data, buf, cap)))
        return r;
    int eval = kind == SWEEP_ARGV_RUN && s->eval_data && s->eval_every > 0;
    if ((r = str(cfg, K(EVAL_DATA), eval ? s->eval_data : NULL, buf, cap)) ||
        (eval && (r = num(cfg, K(EVAL_EVERY), s->eval_every, buf, cap))))
        return r;
    json_t *mb = json_object_get(cfg, K(MEM_BUDGET));
    if (m->mem_budget_bytes && mb && !(json_is_integer(mb) && (uint64_t)json_integer_value(mb) == m->mem_budget_bytes)) {
        char w[40];
        snprintf(w, sizeof w, "%llu", (unsigned long long)m->mem_budget_bytes);
        return differs(buf, cap, K(MEM_BUDGET), mb, w);
    }
    return NULL;
}
