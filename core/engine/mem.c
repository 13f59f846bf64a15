/* core/engine/mem.c — tracked allocator (see mem.h). Live allocations are kept in an open-addressed table
 * keyed by address so mem_free needs no size; the table itself is host bookkeeping, not engine memory. */
#include "core/engine/mem.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MEM_CAT_NAME_(id, name) name,
const char *const mem_cat_names[MEM_NCAT] = {MEM_CATEGORIES(MEM_CAT_NAME_)};
#undef MEM_CAT_NAME_

typedef struct { uintptr_t addr; uint64_t bytes; int cat; } live_t;

static const ops_t *g_ops;
static int g_plan;
static mem_stats g_st;
static live_t *g_tab;
static size_t g_cap, g_n;
static uintptr_t g_fake_next = 0x10000;
static mem_oom_handler g_oom;

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

_Noreturn void mem_host_failed(const char *what, size_t bytes) {
    g_st.alloc_failed = 2; g_st.oom_what = what; g_st.oom_where = "host";
    g_st.oom_bytes = bytes; g_st.oom_in_use = g_st.total_cur;
    (g_oom ? g_oom : default_oom)(&g_st);
    exit(3);
}

void mem_init(const ops_t *ops, int plan, uint64_t budget) {
    mem_shutdown();
    g_ops = ops; g_plan = plan;
    g_st.budget = budget;
    if (!g_oom) g_oom = default_oom;
}

void mem_set_oom_handler(mem_oom_handler h) { g_oom = h ? h : default_oom; }

static size_t slot(uintptr_t a) { return (size_t)((a >> 4) * 0x9E3779B97F4A7C15ull) & (g_cap - 1); }

static void tab_put(uintptr_t a, uint64_t bytes, int cat) {
    if ((g_n + 1) * 2 > g_cap) {
        size_t oc = g_cap; live_t *ot = g_tab;
        g_cap = oc ? oc * 2 : 1024;
        g_tab = calloc(g_cap, sizeof *g_tab);
        if (!g_tab) mem_host_failed("the allocation table", g_cap * sizeof *g_tab);
        g_n = 0;
        for (size_t i = 0; i < oc; i++) if (ot[i].addr) tab_put(ot[i].addr, ot[i].bytes, ot[i].cat);
        free(ot);
    }
    size_t i = slot(a);
    while (g_tab[i].addr) i = (i + 1) & (g_cap - 1);
    g_tab[i] = (live_t){a, bytes, cat};
    g_n++;
}

static int tab_take(uintptr_t a, live_t *out) {
    if (!g_cap) return -1;
    size_t i = slot(a);
    while (g_tab[i].addr) {
        if (g_tab[i].addr == a) {
            *out = g_tab[i];
            /* backward-shift deletion keeps probe chains intact */
            size_t j = i;
            for (;;) {
                g_tab[j].addr = 0;
                size_t k = j;
                for (;;) {
                    k = (k + 1) & (g_cap - 1);
                    if (!g_tab[k].addr) { g_n--; return 0; }
                    size_t h = slot(g_tab[k].addr);
                    if ((j < k) ? (h <= j || h > k) : (h <= j && h > k)) break;
                }
                g_tab[j] = g_tab[k];
                j = k;
            }
        }
        i = (i + 1) & (g_cap - 1);
    }
    return -1;
}

void *mem_alloc(mem_cat c, size_t bytes) {
    if (bytes == 0) bytes = 1; /* distinct address, counted as one byte in both modes */
    /* checked: bytes may be near SIZE_MAX in a plan of a huge config, so no sum may wrap */
    if (g_st.budget && (g_st.total_cur > g_st.budget || bytes > g_st.budget - g_st.total_cur) && !g_st.over_budget) {
        g_st.over_budget = 1; g_st.oom_cat = c; g_st.oom_bytes = bytes;
        g_st.oom_in_use = g_st.total_cur; g_st.oom_peak_before = g_st.total_peak;
        if (!g_plan) g_oom(&g_st);
    }
    void *p;
    if (g_plan) {
        /* distinct addresses that never wrap (the sizes are in the table, not in the spacing) */
        p = (void *)g_fake_next;
        g_fake_next += 256;
        if (bytes > MEM_PLAN_CAP || g_st.total_cur > MEM_PLAN_CAP - bytes) { g_st.overflow = 1; bytes = 0; }
    } else {
        p = g_ops->dev_alloc(bytes);
        if (!p) { /* the device itself (the host, on the CPU backend) is full: not the budget */
            g_st.alloc_failed = 1; g_st.oom_cat = c; g_st.oom_bytes = bytes; g_st.oom_in_use = g_st.total_cur;
            g_st.oom_where = strcmp(g_ops->name, "cpu") ? "device" : "host";
            g_oom(&g_st);
            exit(3);
        }
    }
    tab_put((uintptr_t)p, bytes, c);
    g_st.cur[c] += bytes; g_st.total_cur += bytes;
    if (g_st.cur[c] > g_st.peak[c]) g_st.peak[c] = g_st.cur[c];
    if (g_st.total_cur > g_st.total_peak) {
        g_st.total_peak = g_st.total_cur;
        memcpy(g_st.at_peak, g_st.cur, sizeof g_st.at_peak);
    }
    return p;
}

void *mem_calloc(mem_cat c, size_t bytes) {
    void *p = mem_alloc(c, bytes);
    if (!g_plan) g_ops->zero(p, bytes);
    return p;
}

void mem_free(void *p) {
    if (!p) return;
    live_t e;
    if (tab_take((uintptr_t)p, &e) != 0) { fprintf(stderr, "mem: free of an unknown pointer %p\n", p); abort(); }
    g_st.cur[e.cat] -= e.bytes; g_st.total_cur -= e.bytes;
    if (!g_plan) g_ops->dev_free(p);
}

const mem_stats *mem_get_stats(void) { return &g_st; }

void mem_reset_peaks(void) {
    for (int c = 0; c < MEM_NCAT; c++) g_st.peak[c] = g_st.cur[c];
    g_st.total_peak = g_st.total_cur;
    memcpy(g_st.at_peak, g_st.cur, sizeof g_st.at_peak);
}

void mem_shutdown(void) {
    if (g_tab) {
        for (size_t i = 0; i < g_cap; i++)
            if (g_tab[i].addr && !g_plan && g_ops) g_ops->dev_free((void *)g_tab[i].addr);
        free(g_tab);
    }
    g_tab = NULL; g_cap = g_n = 0;
    uint64_t budget = g_st.budget;
    memset(&g_st, 0, sizeof g_st);
    g_st.budget = budget;
    g_fake_next = 0x10000;
}

void mem_format(char *buf, size_t len, uint64_t bytes) {
    static const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes; int i = 0;
    while (v >= 1024.0 && i < 4) { v /= 1024.0; i++; }
    if (i == 0) snprintf(buf, len, "%llu B", (unsigned long long)bytes);
    else snprintf(buf, len, "%.2f %s", v, u[i]);
}
