/* core/engine/init.c — counter-based normal generator and its threaded fill (see init.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#endif
#include "core/engine/init.h"
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

uint64_t init_splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

uint64_t init_name_hash(const char *name) { /* FNV-1a 64 */
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) { h ^= *p; h *= 0x100000001b3ull; }
    return h;
}

double init_normal(uint64_t seed, uint64_t name_hash, uint64_t index) {
    uint64_t a = init_splitmix64(seed ^ init_splitmix64(name_hash ^ init_splitmix64(index)));
    uint64_t b = init_splitmix64(a);
    double u1 = ((a >> 11) + 1) * (1.0 / 9007199254740992.0);  /* (0, 1] */
    double u2 = (b >> 11) * (1.0 / 9007199254740992.0);        /* [0, 1) */
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* one thread's share: walks rows and columns instead of dividing per element */
static void fill_range(const init_block *b, int64_t first, int64_t count, float *dst) {
    if (count <= 0) return;
    if (b->ndim == 1) { for (int64_t i = 0; i < count; i++) dst[i] = 1.0f; return; }
    int64_t r = first / b->cols, c = first % b->cols, end = first + count;
    for (int64_t e = first; e < end; r++, c = 0) {
        int64_t n = b->cols - c;
        if (n > end - e) n = end - e;
        if (r >= b->valid_rows) {
            for (int64_t i = 0; i < n; i++) dst[e - first + i] = 0.0f;
        } else {
            uint64_t idx = (uint64_t)((b->row0 + r) * b->full_cols + b->col0 + c);
            for (int64_t i = 0; i < n; i++)
                dst[e - first + i] = (float)(b->std * init_normal(b->seed, b->name_hash, idx + (uint64_t)i));
        }
        e += n;
    }
}

typedef struct { const init_block *b; int64_t first, count; float *dst; } fill_job;
static void *fill_thread(void *arg) {
    fill_job *j = arg;
    fill_range(j->b, j->first, j->count, j->dst);
    return NULL;
}

void init_fill(const init_block *b, int64_t first, int64_t count, float *dst, int threads) {
    enum { MIN_PER_THREAD = 1 << 16, MAX_THREADS = 256 };
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    if (threads > 1 && count / threads < MIN_PER_THREAD) threads = (int)(count / MIN_PER_THREAD);
    if (threads <= 1) { fill_range(b, first, count, dst); return; }
    pthread_t tid[MAX_THREADS];
    fill_job job[MAX_THREADS];
    char started[MAX_THREADS] = {0};
    for (int t = 0; t < threads; t++) {
        int64_t lo = count * t / threads, hi = count * (t + 1) / threads;
        job[t] = (fill_job){b, first + lo, hi - lo, dst + lo};
        /* the calling thread takes the last share, and any share whose thread cannot start */
        if (t < threads - 1 && pthread_create(&tid[t], NULL, fill_thread, &job[t]) == 0) started[t] = 1;
        else fill_thread(&job[t]);
    }
    for (int t = 0; t < threads - 1; t++)
        if (started[t]) pthread_join(tid[t], NULL);
}

static int env_int(const char *name) {
    const char *v = getenv(name);
    if (!v || !*v) return 0;
    char *end;
    long x = strtol(v, &end, 10);
    return (*end == 0 && x > 0 && x < 100000) ? (int)x : 0;
}

int init_threads(void) {
    int n = env_int("MESHSWEEP_INIT_THREADS");
    if (n) return n;
    cpu_set_t set;
    n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    /* ranks sharing this host share its cores (unless each is bound to its own already) */
    int local = env_int("OMPI_COMM_WORLD_LOCAL_SIZE");
    if (!local) local = env_int("MPI_LOCALNRANKS");
    if (!local) local = env_int("SLURM_NTASKS_PER_NODE");
    if (local > 1) n = n >= local ? n / local : 1;
    return n < 1 ? 1 : n;
}
