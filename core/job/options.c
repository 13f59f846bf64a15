/* core/job/options.c — the one option table of build/train: it drives the parser and --help (job_parse,
 * job_usage), and, inverted, the command line a sweep launches (job_argv); its flags say what the ranks of
 * a launch compare (job_option_fields) and its keys which options a sweep spec owns (job_owned_option).
 * Adding an option is one row here, its field in options.h and its check in job.c (docs/where-to-change.md). */
#include "core/job/options.h"
#include "core/job/catalog.h"

#include <string.h>

#define F(x) offsetof(job_opts, x)
const cli_opt job_options[] = {
    {"model", CLI_STR, F(model), "NAME|PATH", "a preset (listed below) or an HF config.json",
     CLI_NAME_OR_PATH, "model", NULL},
    {"tp", CLI_INT, F(tp), "N", "tensor-parallel degree; dp = world / tp", 0, "meshes", NULL},
    {"replicate", CLI_INT, F(replicate), "R", "HSDP: replicas of the FSDP shard group, mesh R x S x tp with S = world / (R * tp); "
     "state sharded over S, gradients reduce-scattered within S then all-reduced across R (default 1)", 0, "meshes", NULL},
    {"batch-size", CLI_STR, F(batch), "N|max", "sequences per DP rank and micro-batch (global batch = dp * N * --grad-accum); max only with --plan",
     0, "batch_size / global_batch", NULL},
    {"grad-accum", CLI_INT, F(grad_accum), "N", "micro-batches per optimizer step (default 1); loss and gradient are the mean over the global batch",
     0, "global_batch", NULL},
    {"global-batch", CLI_INT, F(global_batch), "G", "sequences per optimizer step: --grad-accum = G / (dp * --batch-size); with --plan --batch-size max the largest micro-batch that fits and divides G/dp",
     0, "global_batch", NULL},
    {"accum-reduce", CLI_STR, F(accum_reduce), "each|last", "with --grad-accum > 1 and dp > 1: reduce-scatter each micro-batch's gradient (each, default), or keep the unsharded gradient and reduce-scatter once after the last (last: fewer bytes, more memory)",
     0, NULL, NULL},
    {"seq-len", CLI_INT, F(seq_len), "T", "sequence length", 0, "seq_len", NULL},
    {"steps", CLI_INT, F(steps), "N", "optimizer steps", 0, "steps", NULL},
    {"lr", CLI_DBL, F(lr), "X", "peak learning rate", 0, "lr", NULL},
    {"weight-decay", CLI_DBL, F(weight_decay), "X", "AdamW weight decay on matrices (not on norm weights)", 0, "weight_decay", NULL},
    {"beta1", CLI_DBL, F(beta1), "X", "AdamW beta1", 0, NULL, NULL},
    {"beta2", CLI_DBL, F(beta2), "X", "AdamW beta2", 0, NULL, NULL},
    {"adam-eps", CLI_DBL, F(adam_eps), "X", "AdamW epsilon", 0, NULL, NULL},
    {"grad-clip", CLI_DBL, F(grad_clip), "C", "clip the global gradient L2 norm to C (0: off)", 0, "grad_clip", NULL},
    {"schedule", CLI_STR, F(schedule), "constant|cosine", "learning-rate schedule", 0, "schedule", NULL},
    {"warmup", CLI_INT, F(warmup), "N", "linear warmup steps (cosine schedule)", 0, "warmup", NULL},
    {"min-lr-ratio", CLI_DBL, F(min_lr_ratio), "X", "cosine: final lr = lr * X", 0, NULL, NULL},
    {"seed", CLI_LL, F(seed), "N", "initialisation seed (the same model on every mesh)", 0, "seed", NULL},
    {"data", CLI_STR, F(data), "PATH|synthetic", "training tokens: llm.c .bin, .npy, Megatron PREFIX[.bin], uint16 .bin; or synthetic",
     CLI_PATH, "data", NULL},
    {"eval-data", CLI_STR, F(eval_data), "PATH", "validation tokens", CLI_PATH, "eval_data", NULL},
    {"eval-every", CLI_INT, F(eval_every), "N", "evaluate every N steps and at the end (0: only at the end; needs --eval-data)",
     0, "eval_every", NULL},
    {"eval-batches", CLI_INT, F(eval_batches), "N", "validation batches per evaluation (default 4; at most the batches --eval-data holds: its sequences / global batch)",
     0, NULL, NULL},
    {"init", CLI_STR, F(init), "FILE", "initialise from an HF-named safetensors file (F32 or BF16)", CLI_PATH, NULL, NULL},
    {"save", CLI_STR, F(save), "FILE", "write the trained model as HF-named F32 safetensors", CLI_PATH, NULL, NULL},
    {"out", CLI_STR, F(out), "FILE", "run record (or plan) as JSON, written atomically", CLI_LOCAL, "the results folder", NULL},
    {"mem-budget", CLI_STR, F(mem_budget), "SIZE|auto", "per-rank tracked memory budget: 96MiB, 80GB, 80GiB ...; auto (CUDA): "
     "device memory free after context, cuBLAS and NCCL set-up, minus --mem-reserve", 0, "mem_budget", NULL},
    {"mem-reserve", CLI_STR, F(mem_reserve), "SIZE", "with auto or --gpu: device memory kept out of the budget (default 1GiB)", 0, NULL, NULL},
    {"gpu", CLI_STR, F(gpu), "NAME", "with --plan: plan against device NAME (listed below; "
     "usable - runtime overhead - reserve); on a CUDA run: --mem-budget auto", 0, "gpu", NULL},
    {"plan", CLI_ON, F(plan), NULL, "plan memory for one step without running (one process)", 0, "--plan-only", NULL},
    {"world", CLI_INT, F(world), "W", "with --plan: world size to plan for", 0, "world", NULL},
    {"machine", CLI_STR, F(machine), "NAME|FILE", "step-time model: a GPU's name (as --gpu) or a machine file "
     "(default: this host's `make calibrate` file, or the --gpu / CUDA device's model); --plan predicts the step, a run "
     "records the prediction next to what it measured", 0, NULL, NULL},
    {"gpus-per-host", CLI_INT, F(gpus_per_host), "N", "with --plan: ranks per host (consecutive ranks fill a host; default: "
     "one GPU per rank on a GPU machine, every rank on this host on a CPU one)", 0, NULL, NULL},
    {"sequence-parallel", CLI_ON, F(sp), NULL, "sequence parallel (default on when tp > 1)", 0, "sequence_parallel", NULL},
    {"no-sequence-parallel", CLI_OFF, F(sp), NULL, "replicate the residual stream across the TP group", 0, "sequence_parallel", NULL},
    {"sp-activations", CLI_STR, F(sp_activations), "local|gathered", "sequence parallel: save each column-parallel block's input as the sequence shard and all-gather it again in backward (local), or save it all-gathered (gathered)",
     0, "sp_activations", NULL},
    {"no-prefetch", CLI_OFF, F(prefetch), NULL, "do not prefetch the next FSDP unit", 0, "prefetch", NULL},
    {"checkpoint-activations", CLI_OPT, F(ckpt), "[none|full|every:K]", "keep only the input of every layer (full, the bare flag) or of the first of every K (layers 1, K+1, 2K+1, ...); recompute it in backward",
     0, "checkpoint_activations", "full"},
    {"backend", CLI_STR, F(backend), "cpu|cuda", "compute backend", 0, "backend", NULL},
    {"deterministic", CLI_STR, F(deterministic), "on|off", "on (default): every run of the same job gives the same bits; "
     "off: the CUDA attention backward sums dq by fp32 atomics in its dk/dv pass (one pass instead of two, the "
     "order run-dependent; B*T*H*hd*4 more workspace bytes). The CPU backend is deterministic either way", 0, NULL, NULL},
    {"comm", CLI_STR, F(comm), "mpi|nccl", "collectives: mpi, or nccl (CUDA; the default for multi-rank CUDA runs with one GPU per rank)",
     0, NULL, NULL},
    {"dtype", CLI_STR, F(dtype), "fp32|bf16", "compute precision (default: bf16 on cuda, fp32 on cpu; --plan takes either)", 0, NULL, NULL},
    {"warmup-steps-excluded", CLI_INT, F(excluded), "N", "steps left out of the median step time", 0, NULL, NULL},
    {"peak-tflops", CLI_DBL, F(peak_tflops), "X", "peak FLOP/s per rank for MFU (default: measured SGEMM on CPU)", 0, NULL, NULL},
    {"log-every", CLI_INT, F(log_every), "N", "progress line every N steps (rank 0, stderr)", CLI_LOCAL, NULL, NULL},
    {"help", CLI_ON, F(help), NULL, "this text", CLI_LOCAL, NULL, NULL},
};
#undef F
const int job_noptions = (int)(sizeof job_options / sizeof job_options[0]);
_Static_assert(sizeof job_options / sizeof job_options[0] <= JOB_MAX_OPTS, "job_t.given has a slot per option");

void job_usage(FILE *f) {
    cli_usage(f, job_options, job_noptions);
    char names[512];
    catalog_preset_names(names, sizeof names);
    fprintf(f, "\nmodel presets: %s\n", names);
    catalog_gpu_names(names, sizeof names);
    fprintf(f, "GPUs (--gpu, --machine): %s\n", names);
}

int job_option_index(const char *name) {
    for (int i = 0; i < job_noptions; i++) if (!strcmp(job_options[i].name, name)) return i;
    return -1;
}

const char *job_owned_option(const char *arg) {
    if (strncmp(arg, "--", 2)) return NULL;
    for (int i = 0; i < job_noptions; i++) {
        size_t n = strlen(job_options[i].name);
        if (job_options[i].key && !strncmp(arg + 2, job_options[i].name, n) && (arg[2 + n] == 0 || arg[2 + n] == '='))
            return job_options[i].key;
    }
    return NULL;
}
