/* core/run/agree.c — see agree.h. Everything here is collective over MPI_COMM_WORLD unless said;
 * without MPI (not initialised, e.g. `train --plan`) it acts as a world of one rank. */
#include "core/run/agree.h"
#include "core/common/errmsg.h"
#include <fcntl.h>
#include <mpi.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { HOSTLEN = 64, MSGLEN = 768 };

static const char *g_prog = "meshsweep";
static int g_rank = 0, g_world = 1;
static char g_me[HOSTLEN] = "?";
static char *g_hosts;          /* world * HOSTLEN */
static cpu_set_t *g_cpus;      /* world masks */
static int g_code;             /* this rank's recorded failure, 0 if none */
static char g_msg[MSGLEN];
static char g_last[MSGLEN + HOSTLEN + 32];

static int mpi_on(void) {
    int on = 0, off = 0;
    MPI_Initialized(&on);
    if (on) MPI_Finalized(&off);
    return on && !off;
}

int agree_init(const char *prog) {
    if (prog) g_prog = prog;
    if (gethostname(g_me, sizeof g_me - 1) != 0 || !g_me[0]) snprintf(g_me, sizeof g_me, "unknown");
    g_me[HOSTLEN - 1] = 0;
    errmsg_one_line(g_me, sizeof g_me);
    cpu_set_t mine;
    CPU_ZERO(&mine);
    if (sched_getaffinity(0, sizeof mine, &mine) != 0) CPU_SET(0, &mine);
    if (mpi_on()) {
        MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
        MPI_Comm_size(MPI_COMM_WORLD, &g_world);
    }
    free(g_hosts); free(g_cpus);
    g_hosts = calloc((size_t)g_world, HOSTLEN);
    g_cpus = calloc((size_t)g_world, sizeof(cpu_set_t));
    int ok = g_hosts && g_cpus, all = ok;
    if (mpi_on()) MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all) { free(g_hosts); free(g_cpus); g_hosts = NULL; g_cpus = NULL; return -1; }
    if (mpi_on()) {
        MPI_Allgather(g_me, HOSTLEN, MPI_CHAR, g_hosts, HOSTLEN, MPI_CHAR, MPI_COMM_WORLD);
        MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, g_cpus, (int)sizeof mine, MPI_BYTE, MPI_COMM_WORLD);
    } else {
        memcpy(g_hosts, g_me, HOSTLEN);
        g_cpus[0] = mine;
    }
    return 0;
}

void agree_free(void) { free(g_hosts); free(g_cpus); g_hosts = NULL; g_cpus = NULL; }

int agree_rank(void) { return g_rank; }
int agree_world(void) { return g_world; }
const char *agree_host(void) { return g_me; }
const char *agree_host_of(int rank) {
    if (!g_hosts || rank < 0 || rank >= g_world) return "?";
    return g_hosts + (size_t)rank * HOSTLEN;
}

void agree_fail(int code, const char *fmt, ...) {
    if (g_code) return;
    g_code = code > 0 ? code : 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_msg, sizeof g_msg, fmt, ap);
    va_end(ap);
    errmsg_one_line(g_msg, sizeof g_msg);
}
int agree_failed(void) { return g_code != 0; }
const char *agree_last_error(void) { return g_last; }

/* FNV-1a over 64-bit words (and the tail bytes): cheap, and any changed byte changes it */
static uint64_t fnv(uint64_t h, const unsigned char *p, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) { uint64_t w; memcpy(&w, p + i, 8); h = (h ^ w) * 0x100000001b3ull; }
    for (; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

int agree_check(void) {
    struct { int code; char msg[MSGLEN]; } pick = {0, ""};
    int first = g_code ? g_rank : g_world;
    if (mpi_on() && g_world > 1) {
        /* one all-reduce (MIN) of: the lowest failing rank; whether every rank failed; the least and
         * (negated) the greatest hash of (code, message): all failed alike exactly when they are equal */
        uint64_t h = fnv(0xcbf29ce484222325ull ^ (uint64_t)g_code, (const unsigned char *)g_msg, strlen(g_msg)) >> 2;
        int64_t v[4] = {first, g_code != 0, g_code ? (int64_t)h : INT64_MAX, g_code ? -(int64_t)h : INT64_MAX};
        MPI_Allreduce(MPI_IN_PLACE, v, 4, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD);
        int lowest = (int)v[0];
        if (lowest == g_world) { g_code = 0; return 0; }
        if (g_rank == lowest) { pick.code = g_code; memcpy(pick.msg, g_msg, sizeof pick.msg); }
        MPI_Bcast(&pick, (int)sizeof pick, MPI_BYTE, lowest, MPI_COMM_WORLD);
        int alike = v[1] == 1 && v[2] == -v[3];
        if (alike) snprintf(g_last, sizeof g_last, "%s", pick.msg);
        else snprintf(g_last, sizeof g_last, "rank %d on %s: %s", lowest, agree_host_of(lowest), pick.msg);
    } else {
        if (!g_code) return 0;
        pick.code = g_code;
        memcpy(pick.msg, g_msg, sizeof pick.msg);
        snprintf(g_last, sizeof g_last, "%s", pick.msg);
    }
    if (g_rank == 0) { fprintf(stderr, "%s: %s\n", g_prog, g_last); fflush(stderr); }
    g_code = 0;
    g_msg[0] = 0;
    return pick.code;
}

/* ------------------------------------------------------------------ the configuration */
/* "LABEL differs between ranks: V on rank 0 (h), rank 1 (h); W on rank 2 (h2)" from the gathered
 * values (world x AGREE_VALUE_LEN): at most 4 values, 4 ranks each */
static void fields_msg(char *out, size_t len, const char *label, const char *vals) {
    size_t used = (size_t)snprintf(out, len, "%s differs between ranks:", label);
    int nval = 0;
    for (int r = 0; r < g_world && used < len; r++) {
        const char *v = vals + (size_t)r * AGREE_VALUE_LEN;
        int seen = 0;
        for (int q = 0; q < r && !seen; q++) seen = !strcmp(vals + (size_t)q * AGREE_VALUE_LEN, v);
        if (seen) continue;
        if (++nval > 4) { (void)snprintf(out + used, len - used, "; ..."); break; }
        used += (size_t)snprintf(out + used, len - used, "%s %s on", nval > 1 ? ";" : "", v);
        int nr = 0;
        for (int q = r; q < g_world && used < len; q++) {
            if (strcmp(vals + (size_t)q * AGREE_VALUE_LEN, v)) continue;
            if (++nr > 4) { used += (size_t)snprintf(out + used, len - used, " ..."); break; }
            used += (size_t)snprintf(out + used, len - used, "%s rank %d (%s)", nr > 1 ? "," : "", q, agree_host_of(q));
        }
    }
}

int agree_fields(const agree_field *f, int n) {
    if (!mpi_on() || g_world == 1) return 0;
    char msg[MSGLEN];
    int cnt[2] = {n, -n};
    MPI_Allreduce(MPI_IN_PLACE, cnt, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    int first = -1;
    if (cnt[0] != -cnt[1]) {
        snprintf(msg, sizeof msg, "the ranks run different builds of %s (%d configuration fields on one rank, %d on "
                 "another): launch one build everywhere", g_prog, cnt[0], -cnt[1]);
    } else {
        /* MIN over [h..., ~h...]: the least hash of each field and the complement of the greatest */
        uint64_t *h = malloc((size_t)(2 * n + 1) * sizeof *h);
        int ok = h != NULL, all = ok;
        MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (!all || !h) { free(h); agree_fail(1, "configuration check: out of host memory"); return agree_check(); }
        for (int i = 0; i < n; i++) {
            h[i] = fnv(0xcbf29ce484222325ull, (const unsigned char *)f[i].value, strnlen(f[i].value, AGREE_VALUE_LEN));
            h[n + i] = ~h[i];
        }
        MPI_Allreduce(MPI_IN_PLACE, h, 2 * n, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
        for (int i = 0; i < n && first < 0; i++)
            if (h[i] != ~h[n + i]) first = i;
        free(h);
        if (first < 0) return 0;
        /* every rank knows which field: gather its values (a fixed size everywhere) */
        char mine[AGREE_VALUE_LEN];
        snprintf(mine, sizeof mine, "%s", f[first].value);
        errmsg_one_line(mine, sizeof mine);
        char *vals = calloc((size_t)g_world, AGREE_VALUE_LEN);
        ok = vals != NULL;
        MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (!all || !vals) { free(vals); agree_fail(1, "configuration check: out of host memory"); return agree_check(); }
        MPI_Allgather(mine, AGREE_VALUE_LEN, MPI_CHAR, vals, AGREE_VALUE_LEN, MPI_CHAR, MPI_COMM_WORLD);
        fields_msg(msg, sizeof msg, f[first].label, vals);
        free(vals);
    }
    errmsg_one_line(msg, sizeof msg);
    snprintf(g_last, sizeof g_last, "%s", msg);
    if (g_rank == 0) { fprintf(stderr, "%s: %s\n", g_prog, msg); fflush(stderr); }
    return 2;
}

/* ------------------------------------------------------------------ inputs */
/* size and sampled hash of one regular file; kind -1 missing, -2 not a regular file, -3 unreadable */
static void measure_file(const char *path, int64_t *size, uint64_t *hash) {
    struct stat st;
    *hash = 0;
    if (stat(path, &st) != 0) { *size = -1; return; }
    if (!S_ISREG(st.st_mode)) { *size = -2; return; } /* a FIFO would be consumed by reading it */
    int fd = open(path, O_RDONLY);
    if (fd < 0) { *size = -3; return; }
    enum { EDGE = 65536, BLK = 4096, NBLK = 14 };
    static unsigned char buf[EDGE];
    int64_t n = st.st_size;
    uint64_t h = fnv(0xcbf29ce484222325ull, (const unsigned char *)&n, sizeof n);
    int64_t offs[NBLK + 2]; size_t lens[NBLK + 2]; int k = 0;
    offs[k] = 0; lens[k++] = (size_t)(n < EDGE ? n : EDGE);
    for (int i = 0; i < NBLK; i++) { offs[k] = n / (NBLK + 1) * (i + 1); lens[k++] = BLK; }
    offs[k] = n > EDGE ? n - EDGE : 0; lens[k++] = (size_t)(n < EDGE ? n : EDGE);
    for (int i = 0; i < k; i++) {
        size_t want = lens[i];
        if (offs[i] + (int64_t)want > n) want = (size_t)(n - offs[i]);
        ssize_t got = want ? pread(fd, buf, want, offs[i]) : 0;
        if (got < 0) { close(fd); *size = -3; return; }
        h = fnv(h, buf, (size_t)got);
    }
    close(fd);
    *size = n;
    *hash = h;
}

/* a path that is not there may be the prefix of an indexed dataset (PREFIX.bin + PREFIX.idx) */
static void measure_input(const char *path, int64_t *size, uint64_t *hash) {
    measure_file(path, size, hash);
    if (*size != -1 || strlen(path) > 4000) return;
    char p[4100];
    int64_t sb, si; uint64_t hb, hi;
    snprintf(p, sizeof p, "%s.bin", path); measure_file(p, &sb, &hb);
    snprintf(p, sizeof p, "%s.idx", path); measure_file(p, &si, &hi);
    if (sb < 0 || si < 0) return;
    *size = sb + si;
    *hash = fnv(hb, (const unsigned char *)&hi, sizeof hi);
}

static void describe(char *out, size_t len, int64_t size, uint64_t hash) {
    if (size == -1) snprintf(out, len, "missing");
    else if (size == -2) snprintf(out, len, "not a regular file");
    else if (size == -3) snprintf(out, len, "unreadable");
    else snprintf(out, len, "%lld bytes, hash %016llx", (long long)size, (unsigned long long)hash);
}

/* "PATH differs between hosts: VALUE on h1, h2; VALUE on h3" (at most 4 values, 4 hosts each) */
static void mismatch_msg(char *out, size_t len, const agree_input *in, const int64_t *sz, const uint64_t *hs,
                         int stride, int idx) {
    size_t used = (size_t)snprintf(out, len, "%s %s differs between ranks:", in->label, in->path);
    int nval = 0;
    for (int r = 0; r < g_world && used < len; r++) {
        int64_t s = sz[(size_t)r * stride + idx]; uint64_t h = hs[(size_t)r * stride + idx];
        int seen = 0;
        for (int q = 0; q < r && !seen; q++) seen = sz[(size_t)q * stride + idx] == s && hs[(size_t)q * stride + idx] == h;
        if (seen) continue;
        if (++nval > 4) { (void)snprintf(out + used, len - used, "; ..."); break; }
        char d[80];
        describe(d, sizeof d, s, h);
        used += (size_t)snprintf(out + used, len - used, "%s %s on", nval > 1 ? ";" : "", d);
        int nh = 0;
        for (int q = r; q < g_world && used < len; q++) {
            if (sz[(size_t)q * stride + idx] != s || hs[(size_t)q * stride + idx] != h) continue;
            const char *hq = agree_host_of(q);
            int dup = 0;
            for (int p = r; p < q && !dup; p++)
                dup = sz[(size_t)p * stride + idx] == s && hs[(size_t)p * stride + idx] == h && !strcmp(agree_host_of(p), hq);
            if (dup) continue;
            if (++nh > 4) { used += (size_t)snprintf(out + used, len - used, " ..."); break; }
            used += (size_t)snprintf(out + used, len - used, "%s %s (rank %d)", nh > 1 ? "," : "", hq, q);
        }
    }
}

int agree_inputs(const agree_input *in, int n) {
    if (n <= 0) return 0;
    int64_t *mine = calloc((size_t)n * 2, sizeof(int64_t));
    int64_t *all = (mpi_on() && g_world > 1) ? calloc((size_t)n * 2 * (size_t)g_world, sizeof(int64_t)) : NULL;
    if (!mine || (mpi_on() && g_world > 1 && !all)) agree_fail(1, "input check: out of host memory");
    int rc = agree_check();
    if (rc || !mine) { free(mine); free(all); return rc ? rc : 1; }
    for (int i = 0; i < n; i++) {
        uint64_t h;
        measure_input(in[i].path, &mine[(size_t)2 * i], &h);
        memcpy(&mine[(size_t)2 * i + 1], &h, sizeof h);
    }
    if (!all) { free(mine); return 0; }
    MPI_Allgather(mine, 2 * n, MPI_INT64_T, all, 2 * n, MPI_INT64_T, MPI_COMM_WORLD);
    /* every rank sees the same table, so every rank reaches the same verdict without another call */
    int64_t *sz = malloc((size_t)n * (size_t)g_world * sizeof *sz);
    uint64_t *hs = malloc((size_t)n * (size_t)g_world * sizeof *hs);
    if (!sz || !hs) agree_fail(1, "input check: out of host memory");
    else {
        for (size_t k = 0; k < (size_t)n * (size_t)g_world; k++) { sz[k] = all[2 * k]; memcpy(&hs[k], &all[2 * k + 1], sizeof hs[k]); }
        for (int i = 0; i < n && !rc; i++)
            for (int r = 1; r < g_world; r++)
                if (sz[(size_t)r * n + i] != sz[i] || hs[(size_t)r * n + i] != hs[i]) {
                    char msg[MSGLEN];
                    mismatch_msg(msg, sizeof msg, &in[i], sz, hs, n, i);
                    errmsg_one_line(msg, sizeof msg);
                    snprintf(g_last, sizeof g_last, "%s", msg);
                    if (g_rank == 0) { fprintf(stderr, "%s: %s\n", g_prog, msg); fflush(stderr); }
                    rc = 2;
                    break;
                }
    }
    free(sz); free(hs); free(mine); free(all);
    int rc2 = agree_check(); /* an allocation failure above, on some rank */
    return rc ? rc : rc2;
}

/* ------------------------------------------------------------------ the map */
static int first_rank_of(int r) {
    for (int q = 0; q < r; q++) if (!strcmp(agree_host_of(q), agree_host_of(r))) return q;
    return r;
}

json_t *agree_ranks_by_host(void) {
    json_t *o = json_object();
    for (int r = 0; r < g_world && g_hosts; r++) {
        const char *h = agree_host_of(r);
        json_t *a = json_object_get(o, h);
        if (!a) { a = json_array(); json_object_set_new(o, h, a); }
        json_array_append_new(a, json_integer(r));
    }
    return o;
}

int agree_ranks_on_host(int rank) {
    int n = 0;
    for (int r = 0; r < g_world; r++) n += !strcmp(agree_host_of(r), agree_host_of(rank));
    return n;
}

int agree_cores_on_host(int rank) {
    if (!g_cpus) return 1;
    cpu_set_t u;
    CPU_ZERO(&u);
    for (int r = 0; r < g_world; r++)
        if (!strcmp(agree_host_of(r), agree_host_of(rank))) CPU_OR(&u, &u, &g_cpus[r]);
    int c = CPU_COUNT(&u);
    return c > 0 ? c : 1;
}

json_t *agree_cores_by_host(void) {
    json_t *o = json_object();
    for (int r = 0; r < g_world && g_hosts; r++)
        if (first_rank_of(r) == r) json_object_set_new(o, agree_host_of(r), json_integer(agree_cores_on_host(r)));
    return o;
}

int agree_tp_spans_hosts(int tp) {
    if (tp < 1) return 0;
    for (int r = 0; r < g_world; r++)
        if (r % tp && strcmp(agree_host_of(r), agree_host_of(r - r % tp))) return 1;
    return 0;
}

int agree_nhosts(void) {
    int n = 0;
    for (int r = 0; r < g_world; r++) n += first_rank_of(r) == r;
    return n;
}
