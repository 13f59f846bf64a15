/* core/job/keys.h — the run record's keys (docs/formats.md, schema meshsweep.run/1), as one list: the
 * writer (core/run/run_record.c, job_config_json) and every reader (core/sweep: the resume checks, the
 * grid's record match, the inputs check) name a key through it, so a key renamed here is renamed for
 * all of them. X(ID, "key", where): where is the object that holds it. */
#ifndef MESHSWEEP_JOB_KEYS_H
#define MESHSWEEP_JOB_KEYS_H

#define JOB_RECORD_KEYS(X)                                         \
    X(SCHEMA, "schema", "")                                        \
    X(STATUS, "status", "")                                        \
    X(ERROR, "error", "")                                          \
    X(CONFIG, "config", "")                                        \
    X(MESH, "mesh", "")                                            \
    X(DATA_FILES, "data", "")                                      \
    X(BATCH_SIZE, "batch_size", "")                                \
    X(MICRO_BATCH, "micro_batch", "")                              \
    X(GLOBAL_BATCH, "global_batch", "")                            \
    X(STEP_LIST, "steps", "")                                      \
    X(EVAL, "eval", "")                                            \
    X(SUMMARY, "summary", "")                                      \
    X(PREDICTION, "prediction", "")                                \
    X(MEMORY, "memory", "")                                        \
    X(COMM_STATS, "comm", "")                                      \
    X(ENV, "env", "")                                              \
    X(WORLD, "world", "mesh")                                      \
    X(DP, "dp", "mesh")                                            \
    X(TP, "tp", "mesh")                                            \
    X(REPLICATE, "replicate", "mesh")                              \
    X(SHARD, "shard", "mesh")                                      \
    X(STEPS_DONE, "steps_done", "summary")                         \
    X(STEP_MS_MEDIAN, "step_ms_median", "summary")                 \
    X(MODEL, "model", "config")                                    \
    X(SEQ_LEN, "seq_len", "config")                                \
    X(STEPS, "steps", "config")                                    \
    X(LR, "lr", "config")                                          \
    X(WEIGHT_DECAY, "weight_decay", "config")                      \
    X(BETA1, "beta1", "config")                                    \
    X(BETA2, "beta2", "config")                                    \
    X(ADAM_EPS, "adam_eps", "config")                              \
    X(GRAD_CLIP, "grad_clip", "config")                            \
    X(SCHEDULE, "schedule", "config")                              \
    X(WARMUP, "warmup", "config")                                  \
    X(MIN_LR_RATIO, "min_lr_ratio", "config")                      \
    X(SEED, "seed", "config")                                      \
    X(DATA, "data", "config")                                      \
    X(EVAL_DATA, "eval_data", "config")                            \
    X(EVAL_EVERY, "eval_every", "config")                          \
    X(EVAL_BATCHES, "eval_batches", "config")                      \
    X(INIT, "init", "config")                                      \
    X(SEQUENCE_PARALLEL, "sequence_parallel", "config")            \
    X(SP_ACTIVATIONS, "sp_activations", "config")                  \
    X(PREFETCH, "prefetch", "config")                              \
    X(CHECKPOINT_ACTIVATIONS, "checkpoint_activations", "config")  \
    X(GRAD_ACCUM, "grad_accum", "config")                          \
    X(ACCUM_REDUCE, "accum_reduce", "config")                      \
    X(BACKEND, "backend", "config")                                \
    X(DETERMINISTIC, "deterministic", "config")                    \
    X(COMM, "comm", "config")                                      \
    X(DTYPE, "dtype", "config")                                    \
    X(MEM_BUDGET, "mem_budget", "config")                          \
    X(MEM_BUDGET_AUTO, "mem_budget_auto", "config")                \
    X(MEM_RESERVE, "mem_reserve", "config")                        \
    X(GPU, "gpu", "config")                                        \
    X(WARMUP_STEPS_EXCLUDED, "warmup_steps_excluded", "config")

typedef enum job_key {
#define JOB_KEY_ENUM(id, key, where) JOB_KEY_##id,
    JOB_RECORD_KEYS(JOB_KEY_ENUM)
#undef JOB_KEY_ENUM
    JOB_NKEYS
} job_key;

/* JOB_KEY(GRAD_ACCUM): the key's text, where a record is written or read */
#define JOB_KEY(id) job_record_key(JOB_KEY_##id)
/* the key's name in its object ("grad_accum"), and the object that holds it ("config"; "" the top) */
const char *job_record_key(job_key k);
const char *job_record_key_where(job_key k);
/* the key ID named `name` in object `where` (NULL: any), or -1: the sweep's axes name config keys */
int job_record_key_find(const char *where, const char *name);
#endif
