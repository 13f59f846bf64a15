/* core/run/record.c — see record.h. */
#include "core/run/record.h"
#include "core/run/agree.h"
#include "core/common/cleanup.h"
#include "kernels/kernels.h"
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <mpi.h>
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
    int phase = cleanup_phase_begin(); /* SIGINT/SIGTERM remove the temp file (core/common/cleanup.h) */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        free(s);
        cleanup_phase_end(phase);
        return -1;
    }
    cleanup_add(tmp); /* removed on SIGINT/SIGTERM while it exists */
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
    if (!bad && cleanup_rename(tmp, path) != 0) bad = errno; /* EINTR: a signal removed tmp */
    cleanup_forget(tmp);
    if (bad) unlink(tmp), snprintf(err, errlen, "cannot write %s: %s", path, bad == EINTR ? "interrupted by a signal" : strerror(bad));
    cleanup_phase_end(phase);
    return bad ? -1 : 0;
}

json_t *record_categories(const uint64_t bytes[MEM_NCAT]) {
    json_t *o = json_object();
    for (int c = 0; c < MEM_NCAT; c++) json_object_set_new(o, mem_cat_names[c], json_integer((json_int_t)bytes[c]));
    return o;
}

void record_peaks(json_t *obj, uint64_t peak, const uint64_t by_category[MEM_NCAT], const uint64_t at_peak[MEM_NCAT]) {
    json_object_set_new(obj, "peak", json_integer((json_int_t)peak));
    json_object_set_new(obj, "by_category", record_categories(by_category));
    json_object_set_new(obj, "at_peak", record_categories(at_peak));
}

json_t *record_comm(const comm_stats *s) {
    json_t *o = json_object();
    for (int k = 0; k < COMM_NKIND; k++)
        json_object_set_new(o, comm_kind_names[k], json_pack("{s:I, s:I, s:f}", "calls", (json_int_t)s->calls[k],
                                                             "bytes", (json_int_t)s->bytes[k], "ms", s->ms[k]));
    return o;
}

/* What the writers will do, done now: the folder must be a folder, and a temp file with the name the
 * writers give it (PATH.tmp.PID, core/run/record.c, core/formats/safetensors.c, core/formats/data_write.c)
 * is created and removed again, so a path that fails only at the end of a run (a folder component
 * that is a file, no room in NAME_MAX for the temp suffix, a read-only file system) fails here. */
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
    char tmp[4200];
    if (pl + 24 >= 4096) { /* PATH_MAX, with the temp suffix and the writers' 4096-byte buffers */
        snprintf(err, errlen, "cannot write a path of %zu bytes: too long (at most %d, for the temp suffix): %.200s...", pl,
                 4096 - 24, path);
        return -1;
    }
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    char *dir = dirname(buf);
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        int e = errno;
        snprintf(err, errlen, "cannot write %s: folder %s: %s", path, dir, strerror(stat(dir, &st) == 0 ? ENOTDIR : e));
        return -1;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST) return 0; /* a leftover of this pid: the writer truncates it */
    if (fd < 0) {
        int e = errno;
        if (e == ENAMETOOLONG)
            snprintf(err, errlen, "cannot write %s: the file name is too long for its temp file (NAME_MAX; at most %d bytes "
                     "before the suffix .tmp.PID)", path, 255 - 16);
        else snprintf(err, errlen, "cannot write %s: folder %s: %s", path, dir, strerror(e));
        return -1;
    }
    close(fd);
    unlink(tmp);
    return 0;
}

int record_same_file(const char *a, const char *b) {
    if (!a || !b) return 0;
    if (!strcmp(a, b)) return 1;
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

void record_env_hosts(json_t *env, int tp) {
    json_object_set_new(env, "ranks_by_host", agree_ranks_by_host());
    json_object_set_new(env, "cores_by_host", agree_cores_by_host());
    json_object_set_new(env, "tp_spans_hosts", json_boolean(agree_tp_spans_hosts(tp)));
}

json_t *record_gather_blas(int *differ) {
    enum { LEN = 256 };
    char mine[LEN];
    const char *env = getenv("OPENBLAS_CORETYPE");
    snprintf(mine, sizeof mine, "%.180s|%.40s|%.30s", cpu_blas_config(), cpu_blas_core(), env ? env : "");
    int world = agree_world(), on = 0, off = 0;
    MPI_Initialized(&on);
    if (on) MPI_Finalized(&off);
    char *all = calloc((size_t)world, LEN);
    *differ = 0;
    if (!all) mem_host_failed("the BLAS map of the ranks", (size_t)world * LEN);
    json_t *o = json_object();
    if (on && !off && world > 1) MPI_Allgather(mine, LEN, MPI_CHAR, all, LEN, MPI_CHAR, MPI_COMM_WORLD);
    else memcpy(all, mine, LEN);
    char first[LEN] = ""; /* rank 0's "library|core" */
    for (int r = 0; r < world; r++) {
        char *lib = all + (size_t)r * LEN, *core = strchr(lib, '|'), *ct = core ? strchr(core + 1, '|') : NULL;
        if (!core || !ct) continue;
        *ct++ = 0;
        if (r == 0) snprintf(first, sizeof first, "%s", lib);
        else if (strcmp(first, lib)) *differ = 1;
        *core++ = 0;
        const char *h = agree_host_of(r);
        if (json_object_get(o, h)) continue;
        json_object_set_new(o, h, json_pack("{s:s, s:s, s:o}", "library", lib, "core", core, "coretype_env",
                                            *ct ? json_string(ct) : json_null()));
    }
    free(all);
    return o;
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
