/* core/engine/mem_categories.h — the memory categories of docs/memory.md, the one list: the allocator's
 * enumeration and names (core/engine/mem), the run and plan records' by_category objects
 * (core/run/record), and the sweep's tables, charts and report (core/sweep/), which need nothing else
 * of the engine. Order = the order of every table column and stacked bar. */
#ifndef MESHSWEEP_MEM_CATEGORIES_H
#define MESHSWEEP_MEM_CATEGORIES_H

/* X(ID, "name"): owned master shards, gradients, AdamW state, unsharded unit copies, activations saved for
 * backward, temporaries (logits chunks among them), communication staging */
#define MEM_CATEGORIES(X)                                                                              \
    X(PARAMS, "params") X(GRADS, "grads") X(OPTIMIZER, "optimizer") X(GATHERED, "gathered")            \
    X(ACTIVATIONS, "activations") X(WORKSPACE, "workspace") X(COMM, "comm")

#define MEM_CAT_ENUM_(id, name) MEM_##id,
typedef enum { MEM_CATEGORIES(MEM_CAT_ENUM_) MEM_NCAT } mem_cat;
#undef MEM_CAT_ENUM_
extern const char *const mem_cat_names[MEM_NCAT];
#endif
