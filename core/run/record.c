/* core/run/record.c — see record.h. */
#include "core/run/record.h"
#include "core/run/agree.h"
#include "core/common/cleanup.h"
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int record_write_atomic(const char *path, json_t *root, char *err, size_t errlen) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    char *s = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    if (!s) { snprintf(err, errlen, "%s: could not encode the JSON record", path); return -1; }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) { snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno)); free(s); return -1; }
    cleanup_add(tmp); /* removed on SIGINT/SIGTERM while it exists (core/common/cleanup.h) */
    size_t n = strlen(s), off = 0;
    int bad = 0;
    while (off < n) {
        ssize_t w = write(fd, s + off, n - off);
        if (w < 0) { if (errno == EINTR) continue; bad = errno; break; }
        off += (size_t)w;
    }
    if (!bad && write(fd, "\n", 1) != 1) bad = errno ? errno : EIO;
    if (!bad && fsync(fd) != 0) bad = errno;
    if (close(fd) != 0 && !bad) bad = errno;
    free(s);
    if (!bad && rename(tmp, path) != 0) bad = errno;
    cleanup_forget(tmp);
    if (bad) { unlink(tmp); snprintf(err, errlen, "cannot write %s: %s", path, strerror(bad)); return -1; }
    return 0;
}

json_t *record_categories(const uint64_t bytes[MEM_NCAT]) {
    json_t *o = json_object();
    for (int c = 0; c < MEM_NCAT; c++) json_object_set_new(o, mem_cat_names[c], json_integer((json_int_t)bytes[c]));
    return o;
}

json_t *record_comm(const comm_stats *s) {
    json_t *o = json_object();
    for (int k = 0; k < COMM_NKIND; k++)
        json_object_set_new(o, comm_kind_names[k], json_pack("{s:I, s:I, s:f}", "calls", (json_int_t)s->calls[k],
                                                             "bytes", (json_int_t)s->bytes[k], "ms", s->ms[k]));
    return o;
}

int record_check_writable(const char *path, char *err, size_t errlen) {
    struct stat st;
    size_t pl = strlen(path);
    if ((pl && path[pl - 1] == '/') || (stat(path, &st) == 0 && S_ISDIR(st.st_mode))) {
        snprintf(err, errlen, "cannot write %s: it names a folder (give a file name)", path);
        return -1;
    }
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "cannot write %s: it exists and is not a regular file", path);
        return -1;
    }
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    char *dir = dirname(buf);
    if (access(dir, W_OK | X_OK) != 0) {
        snprintf(err, errlen, "cannot write %s: folder %s: %s", path, dir, strerror(errno));
        return -1;
    }
    return 0;
}

void record_env_hosts(json_t *env, int tp) {
    json_object_set_new(env, "ranks_by_host", agree_ranks_by_host());
    json_object_set_new(env, "cores_by_host", agree_cores_by_host());
    json_object_set_new(env, "tp_spans_hosts", json_boolean(agree_tp_spans_hosts(tp)));
}

static json_t *env_or_null(const char *name) {
    const char *v = getenv(name);
    return v && *v ? json_string(v) : json_null();
}

/* "a,b,c" as ["a", "b", "c"] */
static json_t *str_list(const char *s) {
    json_t *a = json_array();
    while (s && *s) {
        const char *e = strchr(s, ',');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        json_array_append_new(a, json_stringn(s, n));
        s = e ? e + 1 : NULL;
    }
    return a;
}

void record_env_launch(json_t *env, const char *local_rank_from) {
    json_t *sl = json_null();
    if (getenv("SLURM_JOB_ID")) {
        static const char *const f[][2] = {{"job_id", "SLURM_JOB_ID"}, {"step_id", "SLURM_STEP_ID"},
                                           {"job_nodelist", "SLURM_JOB_NODELIST"}, {"step_nodelist", "SLURM_STEP_NODELIST"},
                                           {"cluster", "SLURM_CLUSTER_NAME"}, {"partition", "SLURM_JOB_PARTITION"},
                                           {"restart_count", "SLURM_RESTART_COUNT"}};
        sl = json_object();
        for (size_t i = 0; i < sizeof f / sizeof *f; i++) json_object_set_new(sl, f[i][0], env_or_null(f[i][1]));
    }
    json_object_set_new(env, "slurm", sl);
    json_object_set_new(env, "local_rank_from", local_rank_from ? json_string(local_rank_from) : json_null());
    char pml[256], btl[256];
    json_t *tr = json_null();
    if (comm_mpi_components("pml", pml, sizeof pml) > 0)
        tr = json_pack("{s:o, s:o}", "pml", str_list(pml), "btl", comm_mpi_components("btl", btl, sizeof btl) > 0 ? str_list(btl) : json_array());
    json_object_set_new(env, "mpi_transports", tr);
}

double record_mfu_share(double mfu, int world) {
    /* sum over hosts of min(cores, ranks), counted once per host at its first rank */
    double had = 0;
    for (int r = 0; r < world; r++) {
        int first = 1;
        for (int q = 0; q < r && first; q++) first = strcmp(agree_host_of(q), agree_host_of(r)) != 0;
        if (!first) continue;
        int n = agree_ranks_on_host(r), c = agree_cores_on_host(r);
        had += n < c ? n : c;
    }
    return had > 0 ? mfu * world / had : 0;
}
