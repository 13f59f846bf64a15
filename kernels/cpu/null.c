/* kernels/cpu/null.c — `ops_null`, the backend that computes nothing, and `device_null`, its device.
 *
 * What it is: the ops_t table whose every entry returns at once (sumsq gives 0.0), made from the one
 * list of ops (OPS_LIST, kernels/kernels.h), so that `--plan` can run the engine's whole allocation
 * sequence — every size it would ask for, in order — without memory or arithmetic. A planner's arena
 * (core/engine/mem) records the sizes and never calls dev_alloc (which gives NULL here). Each op hands
 * its arguments to the trace hooks a planner binds for its replay (ops_null_bind), if any: what a
 * step-time model of the plan records.
 * What it is not: a stub to fill in later; every pointer is set (tests/test_kernels.c checks it),
 * because the model calls through the table without NULL checks.
 */
#include "kernels/device.h"
#include "kernels/kernels.h"

/* The one piece of state here: the hooks of the replay running on this thread. The ops of a table
 * take no context argument (none does), so a planner binds its engine's hooks around its replay. */
static _Thread_local const ops_trace *t_trace;

const ops_trace *ops_null_bind(const ops_trace *t) {
    const ops_trace *was = t_trace;
    t_trace = t;
    return was;
}

#define NULL_RETURN_void
#define NULL_RETURN_double return 0.0;
#define NULL_OP_(ret, name, params, args, prec)                                  \
    static ret null_##name params {                                             \
        if (t_trace && t_trace->name) t_trace->name(t_trace->ctx OPS_COMMA_ args); \
        NULL_RETURN_##ret                                                        \
    }
OPS_LIST(NULL_OP_)
#undef NULL_OP_

static void *null_dev_alloc(size_t bytes) { (void)bytes; return NULL; }
static void null_dev_free(void *p) { (void)p; }
static void null_synchronize(void) {}

#define NULL_ENTRY_(ret, name, params, args, prec) .name = null_##name,
#define NULL_DEVICE_ENTRY_(ret, name, params) .name = null_##name,
const ops_t ops_null = {
    .name = "null",
    .cbytes = 4,
    OPS_LIST(NULL_ENTRY_)
    OPS_DEVICE(NULL_DEVICE_ENTRY_)
};
#undef NULL_ENTRY_
#undef NULL_DEVICE_ENTRY_

/* the planner's device: every precision is ops_null; nothing to select, measure or pool */
static int null_count(void) { return 1; }
static int null_select(int local_rank, char *err, size_t errlen) { (void)local_rank; (void)err; (void)errlen; return 0; }
static void null_mem_info(size_t *free_b, size_t *total_b) { *free_b = 0; *total_b = 0; }
static const char *null_device_name(void) { return "null"; }
static double null_peak_flops(void) { return 0.0; }
static void null_pool_reserved(uint64_t *now_b, uint64_t *high_b) { *now_b = 0; *high_b = 0; }

const device_t device_null = {
    .name = "null", .host_memory = 1, .fp32 = &ops_null, .bf16 = &ops_null,
    .count = null_count, .select = null_select, .mem_info = null_mem_info, .device_name = null_device_name,
    .peak_flops = null_peak_flops, .pool_reserved = null_pool_reserved,
};
