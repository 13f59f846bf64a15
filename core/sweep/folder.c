/* core/sweep/folder.c — which results folder a sweep writes to. A rerun resumes only a folder the
 * runner made (it has runner.json) for the same spec, build, hosts and input contents, so a committed reference or
 * another machine's results are never presented as this run's, and never rewritten. One runner per
 * folder: flock on DIR/.lock. Not the runs (core/sweep/runner.c). */
#include "core/sweep/folder.h"

#include "core/sweep/launch.h"
#include "core/sweep/spec.h"
#include "core/common/files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FOLDER_SCHEMA "meshsweep.sweep-folder/1"

void sweep_utc_now(char *stamp, size_t scap, char *iso, size_t icap) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    if (stamp) strftime(stamp, scap, "%Y%m%dT%H%M%SZ", &tm);
    if (iso) strftime(iso, icap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int sweep_is_stamp(const char *s) {
    if (strlen(s) != 16 || s[8] != 'T' || s[15] != 'Z') return 0;
    for (int i = 0; i < 15; i++)
        if (i != 8 && (s[i] < '0' || s[i] > '9')) return 0;
    return 1;
}

/* ---- identity ---------------------------------------------------------------------------------- */

/* FNV-1a 64 of a file's bytes; 0 when unreadable. */
static uint64_t file_hash(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    uint64_t h = 1469598103934665603ull;
    unsigned char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        for (size_t i = 0; i < n; i++) h = (h ^ buf[i]) * 1099511628211ull;
    int bad = ferror(f);
    fclose(f);
    return bad ? 0 : h;
}

/* The hostfile a launcher names (--hostfile F, -hostfile F, --machinefile F, --hostfile=F). */
static const char *launcher_hostfile(const sweep_spec *s) {
    static const char *const opts[] = {"--hostfile", "-hostfile", "--machinefile", "-machinefile",
                                       "--default-hostfile", "-default-hostfile"};
    for (int i = 0; i < s->n_launcher; i++)
        for (size_t k = 0; k < sizeof opts / sizeof opts[0]; k++) {
            size_t ol = strlen(opts[k]);
            if (strcmp(s->launcher[i], opts[k]) == 0 && i + 1 < s->n_launcher) return s->launcher[i + 1];
            if (strncmp(s->launcher[i], opts[k], ol) == 0 && s->launcher[i][ol] == '=') return s->launcher[i] + ol + 1;
        }
    const char *e = getenv("OMPI_MCA_orte_default_hostfile");
    return e && *e ? e : NULL;
}

/* "git describe --always --dirty" of the tree above the train binary's folder (build/..). */
static void git_describe(const char *train_path, char *out, size_t cap) {
    out[0] = '\0';
    char real[PATH_MAX], root[PATH_MAX + 8], dotgit[PATH_MAX + 16];
    if (!realpath(train_path, real)) return;
    char *slash = strrchr(real, '/');
    if (!slash) return;
    *slash = '\0';
    snprintf(root, sizeof root, "%s/..", real);
    snprintf(dotgit, sizeof dotgit, "%s/.git", root);
    if (access(dotgit, F_OK) != 0) return;
    char log[] = "/tmp/meshsweep-git.XXXXXX";
    int fd = mkstemp(log);
    if (fd < 0) return;
    close(fd);
    char *argv[] = {"git", "-C", root, "describe", "--always", "--dirty", "--abbrev=12", NULL};
    const char *env[] = {"GIT_OPTIONAL_LOCKS=0", NULL};
    sweep_launch_opts o = {.argv = argv, .log_path = log, .timeout_s = 20, .env = env};
    sweep_launch_result r;
    if (sweep_launch(&o, &r) == 0 && r.outcome == SWEEP_LAUNCH_EXITED && r.exit_code == 0) {
        char line[128];
        sweep_tail_lines(log, 1, line, sizeof line);
        size_t ok = strspn(line, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-._");
        if (ok == strlen(line) && ok > 0 && ok < cap) memcpy(out, line, ok + 1);
    }
    unlink(log);
}

int sweep_identity_get(sweep_identity *id, const char *train_path, const sweep_spec *s, char *err, size_t el) {
    memset(id, 0, sizeof *id);
    uint64_t ht = file_hash(train_path), hs = file_hash("/proc/self/exe");
    if (!ht || !hs) {
        snprintf(err, el, "cannot read %s to identify the build: %s", ht ? "/proc/self/exe" : train_path,
                 strerror(errno));
        return -1;
    }
    snprintf(id->build_id, sizeof id->build_id, "fnv1a64:%016llx.%016llx", (unsigned long long)ht,
             (unsigned long long)hs);
    git_describe(train_path, id->git, sizeof id->git);
    if (gethostname(id->runner_host, sizeof id->runner_host - 1) != 0) snprintf(id->runner_host, sizeof id->runner_host, "?");
    const char *hf = launcher_hostfile(s);
    if (hf) {
        snprintf(id->hostfile, sizeof id->hostfile, "%s", hf);
        uint64_t h = file_hash(hf);
        if (h) snprintf(id->hostfile_hash, sizeof id->hostfile_hash, "%016llx", (unsigned long long)h);
    }
    const char *sl = getenv("SLURM_JOB_NODELIST");
    if (sl) snprintf(id->slurm_nodes, sizeof id->slurm_nodes, "%s", sl);
    return 0;
}

static json_t *str_or_null(const char *s) { return s && *s ? json_string(s) : json_null(); }

json_t *sweep_identity_json(const sweep_identity *id) {
    return json_pack("{s:{s:s, s:o}, s:{s:s, s:o, s:o, s:o}}", "build", "id", id->build_id, "git",
                     str_or_null(id->git), "hosts", "runner", id->runner_host, "hostfile", str_or_null(id->hostfile),
                     "hostfile_hash", str_or_null(id->hostfile_hash), "slurm_nodes", str_or_null(id->slurm_nodes));
}

int sweep_identity_match(json_t *a, json_t *b, const char **why) {
    json_t *ba = json_object_get(json_object_get(a, "build"), "id");
    json_t *bb = json_object_get(json_object_get(b, "build"), "id");
    if (!json_is_string(ba) || !json_equal(ba, bb)) {
        *why = "it was made by another build of build/train or build/sweep";
        return 0;
    }
    if (!json_equal(json_object_get(a, "hosts"), json_object_get(b, "hosts"))) {
        *why = "it was made on other hosts (runner host, hostfile or Slurm node list differ)";
        return 0;
    }
    /* the inputs' contents (core/sweep/inputs.h): runs made from other bytes are other results */
    json_t *ia = json_object_get(a, "inputs"), *ib = json_object_get(b, "inputs");
    if (!json_equal(ia, ib)) {
        static char msg[160];
        const char *key = NULL;
        json_t *v;
        json_object_foreach(ib, key, v) if (!json_equal(v, json_object_get(ia, key))) break;
        snprintf(msg, sizeof msg, "its inputs have changed since (%s: other contents than when its runs were made)",
                 key && ia ? key : "model, data, eval_data");
        *why = msg;
        return 0;
    }
    return 1;
}

/* ---- lock -------------------------------------------------------------------------------------- */

/* The pid holding a flock on fd's file, from /proc/locks ("1: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE ..."); 0 unknown. */
static long flock_holder(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0) return 0;
    FILE *f = fopen("/proc/locks", "r");
    if (!f) return 0;
    char line[256], kind[16];
    long pid = 0, found = 0;
    unsigned long long ino;
    while (!found && fgets(line, sizeof line, f)) {
        if (sscanf(line, "%*s %15s %*s %*s %ld %*x:%*x:%llu", kind, &pid, &ino) == 3 && strcmp(kind, "FLOCK") == 0 &&
            ino == (unsigned long long)st.st_ino)
            found = pid;
    }
    fclose(f);
    return found;
}

int sweep_folder_lock(const char *dir, int *lock_fd) {
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/.lock", dir) >= (int)sizeof path) {
        fprintf(stderr, "sweep: path too long: %s\n", dir);
        return -1;
    }
    /* the file is never written: its flock is the lock, and the folder's files stay as they were */
    int fd = open(path, O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 && (errno == EROFS || errno == EACCES)) fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "sweep: cannot create %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        long pid = e == EWOULDBLOCK ? flock_holder(fd) : 0;
        close(fd);
        if (e == EWOULDBLOCK) {
            if (pid > 0)
                fprintf(stderr, "sweep: %s is in use by another runner (pid %ld); wait for it to finish, or use --fresh\n",
                        dir, pid);
            else
                fprintf(stderr, "sweep: %s is in use by another runner; wait for it to finish, or use --fresh\n", dir);
            return -2;
        }
        fprintf(stderr, "sweep: cannot lock %s: %s\n", path, strerror(e));
        return -1;
    }
    *lock_fd = fd;
    return 0;
}

/* ---- finding and creating ---------------------------------------------------------------------- */

static json_t *load_json(const char *dir, const char *name) {
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) return NULL;
    return json_load_file(path, JSON_REJECT_DUPLICATES, NULL);
}

/* why a folder's runner.json cannot be read: missing, or there but not valid JSON (truncated) */
static const char *meta_problem(const char *dir) {
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/runner.json", dir) >= (int)sizeof path) return "its path is too long";
    if (access(path, F_OK) != 0) return "it has no runner.json (not made by this runner, e.g. a copied or committed folder)";
    return "its runner.json is not valid JSON (truncated or damaged): its runs cannot be trusted";
}

static const char *kind_name(int kind) { return kind == SWEEP_FOLDER_PLAN ? "plan-only" : "run"; }

/* 1 when dir may be resumed; else 0 and *why. */
static int resumable(const char *dir, json_t *spec, json_t *identity, int kind, const char **why) {
    json_t *meta = load_json(dir, "runner.json");
    json_t *old = load_json(dir, "spec.json");
    int ok = 0;
    if (!meta) *why = meta_problem(dir);
    else if (!json_is_object(meta) || !json_is_string(json_object_get(meta, "schema")) ||
             strcmp(json_string_value(json_object_get(meta, "schema")), FOLDER_SCHEMA) != 0)
        *why = "its runner.json is not this runner's (another schema)";
    else if (!old || !json_equal(old, spec)) *why = "its spec.json differs from the spec";
    else if (!json_is_string(json_object_get(meta, "kind")) ||
             strcmp(json_string_value(json_object_get(meta, "kind")), kind_name(kind)) != 0)
        *why = kind == SWEEP_FOLDER_PLAN ? "it holds runs, not plans" : "it holds plans only (--plan-only)";
    else ok = sweep_identity_match(json_object_get(meta, "identity"), identity, why);
    json_decref(meta);
    json_decref(old);
    return ok;
}

/* Made by this runner on these hosts (its runner.json says so)? A copy from another machine, or one
 * without a readable runner.json, is not: it never hides this runner's own latest folder (a copy
 * from a host whose clock runs ahead would otherwise make every rerun start a new folder). */
static int ours(const char *dir, json_t *identity) {
    json_t *meta = load_json(dir, "runner.json");
    int ok = json_is_object(meta) && json_equal(json_object_get(json_object_get(meta, "identity"), "hosts"),
                                                json_object_get(identity, "hosts"));
    json_decref(meta);
    return ok;
}

static int by_name_desc(const void *a, const void *b) { return strcmp((const char *)b, (const char *)a); }

int sweep_folder_find(const char *base, json_t *spec, json_t *identity, int kind, char *out, size_t cap,
                      char *why_not, size_t wcap) {
    if (why_not && wcap) why_not[0] = '\0';
    DIR *d = opendir(base);
    if (!d) return 0;
    enum { MAXF = 4096 };
    static char names[MAXF][20];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < MAXF)
        if (sweep_is_stamp(e->d_name)) memcpy(names[n++], e->d_name, 17);
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], by_name_desc);
    /* this runner's latest folder of the name: an older one is an older experiment, never silently continued */
    char dir[PATH_MAX];
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        if (snprintf(dir, sizeof dir, "%s/%s", base, names[i]) >= (int)sizeof dir) return 0;
        const char *why = "";
        if (!ours(dir, identity)) {
            if (!resumable(dir, spec, identity, kind, &why) && why_not && used < wcap) /* say why it is passed over */
                used += (size_t)snprintf(why_not + used, wcap - used, "%snot resuming %s: %s", used ? "; " : "", dir, why);
            continue;
        }
        if (!resumable(dir, spec, identity, kind, &why)) {
            if (why_not && used < wcap) snprintf(why_not + used, wcap - used, "%snot resuming %s: %s", used ? "; " : "", dir, why);
            return 0;
        }
        return snprintf(out, cap, "%s", dir) < (int)cap;
    }
    return 0;
}

static int write_json_file(const char *dir, const char *name, json_t *j) {
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    char *text = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (!text) {
        errno = ENOMEM;
        return -1;
    }
    size_t len = strlen(text);
    char *t2 = realloc(text, len + 2);
    if (!t2) {
        free(text);
        errno = ENOMEM;
        return -1;
    }
    t2[len] = '\n', t2[len + 1] = '\0';
    int rc = files_write_atomic(path, t2, len + 1);
    free(t2);
    return rc;
}

int sweep_folder_create(const char *base, json_t *spec, json_t *identity, int kind, char *out, size_t cap,
                        int *lock_fd) {
    if (sweep_mkdirs(base, 0755) != 0) {
        fprintf(stderr, "sweep: cannot create %s: %s\n", base, strerror(errno));
        return -1;
    }
    char stamp[32], iso[32];
    for (int attempt = 0;; attempt++) {
        sweep_utc_now(stamp, sizeof stamp, iso, sizeof iso);
        int n = snprintf(out, cap, "%s/%s", base, stamp);
        if (n < 0 || (size_t)n >= cap) {
            fprintf(stderr, "sweep: results path too long: %s\n", base);
            return -1;
        }
        if (mkdir(out, 0755) == 0) break;
        if (errno != EEXIST || attempt >= 5) {
            fprintf(stderr, "sweep: cannot create %s: %s\n", out, strerror(errno));
            return -1;
        }
        sleep(1); /* two sweeps of one name in the same second: take the next second */
    }
    if (sweep_folder_lock(out, lock_fd) != 0) {
        rmdir(out);
        return -1;
    }
    json_t *meta = json_pack("{s:s, s:s, s:s, s:s, s:O}", "schema", FOLDER_SCHEMA, "kind", kind_name(kind), "stamp",
                             stamp, "created", iso, "identity", identity);
    /* spec.json last: a folder without it is never resumed, so a half-made one cannot be picked up */
    if (!meta || write_json_file(out, "runner.json", meta) != 0 || write_json_file(out, "spec.json", spec) != 0) {
        fprintf(stderr, "sweep: cannot write %s/spec.json: %s\n", out, strerror(errno));
        json_decref(meta);
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/runner.json", out), unlink(p);
        snprintf(p, sizeof p, "%s/.lock", out), unlink(p);
        rmdir(out);
        close(*lock_fd);
        *lock_fd = -1;
        return -1;
    }
    json_decref(meta);
    return 0;
}

void sweep_folder_created(const char *dir, char *iso, size_t cap) {
    json_t *meta = load_json(dir, "runner.json");
    const char *c = json_string_value(json_object_get(meta, "created"));
    snprintf(iso, cap, "%s", c ? c : "");
    json_decref(meta);
}
