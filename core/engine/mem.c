/* core/engine/mem.c — the tracked allocator's arenas (see mem.h). Live allocations are kept in an
 * open-addressed table keyed by address so mem_free needs no size; the table itself is host
 * bookkeeping, not engine memory. Nothing here is global: every figure belongs to its arena. */
#include "core/engine/mem.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MEM_CAT_NAME_(id, name) name,
const char *const mem_cat_names[MEM_NCAT] = {MEM_CATEGORIES(MEM_CAT_NAME_)};
#undef MEM_CAT_NAME_

struct mem_live { uintptr_t addr; uint64_t bytes; int cat; };
typedef struct mem_live live_t;
#define FAKE_FIRST ((uintptr_t)0x10000)

void mem_oom_message(const mem_stats *s, char *buf, size_t len) {
    char a[32], u[32], b[32];
    mem_format(a, sizeof a, s->oom_bytes); mem_format(u, sizeof u, s->oom_in_use); mem_format(b, sizeof b, s->budget);
    if (s->alloc_failed == 2)
        snprintf(buf, len, "out of host memory: %s needed %s (%llu bytes) more", s->oom_what, a, (unsigned long long)s->oom_bytes);
    else if (s->alloc_failed)
        snprintf(buf, len, "out of %s memory: %s asked %s (%llu bytes) with %s tracked in use; the %s itself is full "
                 "(%s%s)", s->oom_where, mem_cat_names[s->oom_cat], a, (unsigned long long)s->oom_bytes, u, s->oom_where,
                 s->budget ? "the budget is " : "no --mem-budget", s->budget ? b : "");
    else
        snprintf(buf, len, "out of memory budget: %s asked %s (%llu bytes) with %s in use, budget %s",
                 mem_cat_names[s->oom_cat], a, (unsigned long long)s->oom_bytes, u, b);
}

static void default_oom(const mem_stats *s) {
    char m[512];
    mem_oom_message(s, m, sizeof m);
    fprintf(stderr, "%s\n", m);
    exit(3);
}

/* the real arena host bookkeeping failures are told to: the last one given an oom handler */
static mem_arena *g_host_arena;

_Noreturn void mem_host_failed(const char *what, size_t bytes) {
    mem_stats st = {0};
    if (g_host_arena) st = g_host_arena->st;
    st.alloc_failed = 2; st.oom_what = what; st.oom_where = "host";
    st.oom_bytes = bytes; st.oom_in_use = st.total_cur;
    (g_host_arena ? g_host_arena->oom : default_oom)(&st);
    exit(3);
}

void mem_arena_init(mem_arena *a, const ops_t *ops, int plan, uint64_t budget) {
    memset(a, 0, sizeof *a);
    a->ops = ops; a->plan = plan;
    a->st.budget = budget;
    a->fake_next = FAKE_FIRST;
    a->oom = default_oom;
}

void mem_set_budget(mem_arena *a, uint64_t budget) { a->st.budget = budget; }
void mem_set_oom_handler(mem_arena *a, mem_oom_handler h) {
    a->oom = h ? h : default_oom;
    if (!a->plan) g_host_arena = h ? a : (g_host_arena == a ? NULL : g_host_arena);
}

/* the table's slot of address a: the top bits of a multiplicative hash (Fibonacci hashing). The low bits of
 * the product repeat those of the address, and a plan's addresses are 256 apart (a device's are aligned):
 * taking them filled one slot in sixteen and made the probe chains long */
static size_t slot(const mem_arena *m, uintptr_t a) {
    return (size_t)(((uint64_t)a * 0x9E3779B97F4A7C15ull) >> (64 - __builtin_ctzll((unsigned long long)m->cap)));
}

static void tab_put(mem_arena *m, uintptr_t a, uint64_t bytes, int cat) {
    if ((m->n + 1) * 2 > m->cap) {
        size_t oc = m->cap; live_t *ot = m->tab;
        m->cap = oc ? oc * 2 : 1024;
        m->tab = calloc(m->cap, sizeof *m->tab);
        if (!m->tab) mem_host_failed("the allocation table", m->cap * sizeof *m->tab);
        m->n = 0;
        for (size_t i = 0; i < oc; i++) if (ot[i].addr) tab_put(m, ot[i].addr, ot[i].bytes, ot[i].cat);
        free(ot);
    }
    size_t i = slot(m, a);
    while (m->tab[i].addr) i = (i + 1) & (m->cap - 1);
    m->tab[i] = (live_t){a, bytes, cat};
    m->n++;
}

static int tab_take(mem_arena *m, uintptr_t a, live_t *out) {
    if (!m->cap) return -1;
    live_t *t = m->tab;
    size_t i = slot(m, a), mask = m->cap - 1;
    while (t[i].addr) {
        if (t[i].addr == a) {
            *out = t[i];
            /* backward-shift deletion keeps probe chains intact */
            size_t j = i;
            for (;;) {
                t[j].addr = 0;
                size_t k = j;
                for (;;) {
                    k = (k + 1) & mask;
                    if (!t[k].addr) { m->n--; return 0; }
                    size_t h = slot(m, t[k].addr);
                    if ((j < k) ? (h <= j || h > k) : (h <= j && h > k)) break;
                }
                t[j] = t[k];
                j = k;
            }
        }
        i = (i + 1) & mask;
    }
    return -1;
}

void *mem_alloc(mem_arena *a, mem_cat c, size_t bytes) {
    mem_stats *st = &a->st;
    if (bytes == 0) bytes = 1; /* distinct address, counted as one byte in both modes */
    /* checked: bytes may be near SIZE_MAX in a plan of a huge config, so no sum may wrap */
    if (st->budget && (st->total_cur > st->budget || bytes > st->budget - st->total_cur) && !st->over_budget) {
        st->over_budget = 1; st->oom_cat = c; st->oom_bytes = bytes;
        st->oom_in_use = st->total_cur; st->oom_peak_before = st->total_peak;
        if (!a->plan) a->oom(st);
    }
    void *p;
    if (a->plan) {
        /* distinct addresses that never wrap (the sizes are in the table, not in the spacing) */
        p = (void *)a->fake_next;
        a->fake_next += 256;
        if (bytes > MEM_PLAN_CAP || st->total_cur > MEM_PLAN_CAP - bytes) { st->overflow = 1; bytes = 0; }
    } else {
        p = a->ops->dev_alloc(bytes);
        if (!p) { /* the device itself (the host, on the CPU backend) is full: not the budget */
            st->alloc_failed = 1; st->oom_cat = c; st->oom_bytes = bytes; st->oom_in_use = st->total_cur;
            st->oom_where = strcmp(a->ops->name, "cpu") ? "device" : "host";
            a->oom(st);
            exit(3);
        }
    }
    tab_put(a, (uintptr_t)p, bytes, c);
    st->cur[c] += bytes; st->total_cur += bytes;
    if (st->cur[c] > st->peak[c]) st->peak[c] = st->cur[c];
    if (st->total_cur > st->total_peak) {
        st->total_peak = st->total_cur;
        memcpy(st->at_peak, st->cur, sizeof st->at_peak);
    }
    return p;
}

void *mem_calloc(mem_arena *a, mem_cat c, size_t bytes) {
    void *p = mem_alloc(a, c, bytes);
    /* in plan mode too, through ops_null: it touches nothing but hands the zeroing to the trace hooks
     * a planner bound (ops_null_bind), which count it as part of the step */
    (a->plan ? &ops_null : a->ops)->zero(p, bytes);
    return p;
}

void mem_free(mem_arena *a, void *p) {
    if (!p) return;
    live_t e;
    if (tab_take(a, (uintptr_t)p, &e) != 0) { fprintf(stderr, "mem: free of an unknown pointer %p\n", p); abort(); }
    a->st.cur[e.cat] -= e.bytes; a->st.total_cur -= e.bytes;
    if (!a->plan) a->ops->dev_free(p);
}

const mem_stats *mem_get_stats(const mem_arena *a) { return &a->st; }

void mem_reset_peaks(mem_arena *a) {
    mem_stats *st = &a->st;
    for (int c = 0; c < MEM_NCAT; c++) st->peak[c] = st->cur[c];
    st->total_peak = st->total_cur;
    memcpy(st->at_peak, st->cur, sizeof st->at_peak);
}

void mem_arena_release(mem_arena *a) {
    if (a->tab) {
        for (size_t i = 0; i < a->cap; i++)
            if (a->tab[i].addr && !a->plan) a->ops->dev_free((void *)a->tab[i].addr);
        free(a->tab);
    }
    a->tab = NULL; a->cap = a->n = 0;
    memset(&a->st, 0, sizeof a->st);
    a->fake_next = FAKE_FIRST;
    if (g_host_arena == a) g_host_arena = NULL;
}

void mem_format(char *buf, size_t len, uint64_t bytes) {
    static const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes; int i = 0;
    while (v >= 1024.0 && i < 4) { v /= 1024.0; i++; }
    if (i == 0) snprintf(buf, len, "%llu B", (unsigned long long)bytes);
    else snprintf(buf, len, "%.2f %s", v, u[i]);
}
