/* bench/train.c — one training run of one mesh (`mpirun -np W build/train --tp T ...`), or its memory
 * plan without running (`build/train --plan --world W ...`). This file is the option table (one table
 * drives both the parser and --help) and main; the run itself (setup, step loop, evaluation, metrics,
 * the record of docs/formats.md) is core/run/run, the plan report core/engine/plan, --init/--save core/run/checkpoint.
 * Exit codes: 0 ok, 1 failed, 2 bad usage or configuration, 3 out of memory budget, 4 diverged. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/common/cli.h"
#include "core/run/run.h"

#define F(x) offsetof(run_cfg, x)
static const cli_opt OPTS[] = {
    {"model", CLI_STR, F(model), "NAME|PATH", "preset (tiny, small, llama3.2-1b, llama3.2-3b, llama3.1-8b) or HF config.json"},
    {"tp", CLI_INT, F(tp), "N", "tensor-parallel degree; dp = world / tp"},
    {"batch-size", CLI_STR, F(batch), "N|max", "sequences per DP rank and micro-batch (global batch = dp * N * --grad-accum); max only with --plan"},
    {"grad-accum", CLI_INT, F(grad_accum), "N", "micro-batches per optimizer step (default 1); loss and gradient are the mean over the global batch"},
    {"global-batch", CLI_INT, F(global_batch), "G", "sequences per optimizer step: --grad-accum = G / (dp * --batch-size); with --plan --batch-size max the largest micro-batch that fits and divides G/dp"},
    {"accum-reduce", CLI_STR, F(accum_reduce), "each|last", "with --grad-accum > 1 and dp > 1: reduce-scatter each micro-batch's gradient (each, default), or keep the unsharded gradient and reduce-scatter once after the last (last: fewer bytes, more memory)"},
    {"seq-len", CLI_INT, F(seq_len), "T", "sequence length"},
    {"steps", CLI_INT, F(steps), "N", "optimizer steps"},
    {"lr", CLI_DBL, F(lr), "X", "peak learning rate"},
    {"weight-decay", CLI_DBL, F(weight_decay), "X", "AdamW weight decay on matrices (not on norm weights)"},
    {"beta1", CLI_DBL, F(beta1), "X", "AdamW beta1"},
    {"beta2", CLI_DBL, F(beta2), "X", "AdamW beta2"},
    {"adam-eps", CLI_DBL, F(adam_eps), "X", "AdamW epsilon"},
    {"grad-clip", CLI_DBL, F(grad_clip), "C", "clip the global gradient L2 norm to C (0: off)"},
    {"schedule", CLI_STR, F(schedule), "constant|cosine", "learning-rate schedule"},
    {"warmup", CLI_INT, F(warmup), "N", "linear warmup steps (cosine schedule)"},
    {"min-lr-ratio", CLI_DBL, F(min_lr_ratio), "X", "cosine: final lr = lr * X"},
    {"seed", CLI_LL, F(seed), "N", "initialisation seed (the same model on every mesh)"},
    {"data", CLI_STR, F(data), "PATH|synthetic", "training tokens: llm.c .bin, .npy, Megatron PREFIX[.bin], uint16 .bin; or synthetic"},
    {"eval-data", CLI_STR, F(eval_data), "PATH", "validation tokens"},
    {"eval-every", CLI_INT, F(eval_every), "N", "evaluate every N steps and at the end (0: only at the end; needs --eval-data)"},
    {"eval-batches", CLI_INT, F(eval_batches), "N", "validation batches per evaluation (default 4; at most the batches --eval-data holds: its sequences / global batch)"},
    {"init", CLI_STR, F(init), "FILE", "initialise from an HF-named safetensors file (F32 or BF16)"},
    {"save", CLI_STR, F(save), "FILE", "write the trained model as HF-named F32 safetensors"},
    {"out", CLI_STR, F(out), "FILE", "run record (or plan) as JSON, written atomically"},
    {"mem-budget", CLI_STR, F(mem_budget), "SIZE|auto", "per-rank tracked memory budget: 96MiB, 80GB, 80GiB ...; auto (CUDA): "
     "device memory free after context, cuBLAS and NCCL set-up, minus --mem-reserve"},
    {"mem-reserve", CLI_STR, F(mem_reserve), "SIZE", "with auto or --gpu: device memory kept out of the budget (default 1GiB)"},
    {"gpu", CLI_STR, F(gpu), "NAME", "with --plan: plan against device NAME (h100-80gb, h200-141gb, a100-80gb, a100-40gb; "
     "usable - runtime overhead - reserve); on a CUDA run: --mem-budget auto"},
    {"plan", CLI_ON, F(plan), NULL, "plan memory for one step without running (one process)"},
    {"world", CLI_INT, F(world), "W", "with --plan: world size to plan for"},
    {"machine", CLI_STR, F(machine), "NAME|FILE", "step-time model: h100-80gb, h200-141gb, a100-80gb or a machine file "
     "(default: this host's `make calibrate` file, or the --gpu / CUDA device's model); --plan predicts the step, a run "
     "records the prediction next to what it measured"},
    {"gpus-per-host", CLI_INT, F(gpus_per_host), "N", "with --plan: ranks per host (consecutive ranks fill a host; default: "
     "one GPU per rank on a GPU machine, every rank on this host on a CPU one)"},
    {"sequence-parallel", CLI_ON, F(sp), NULL, "sequence parallel (default on when tp > 1)"},
    {"no-sequence-parallel", CLI_OFF, F(sp), NULL, "replicate the residual stream across the TP group"},
    {"sp-activations", CLI_STR, F(sp_activations), "local|gathered", "sequence parallel: save each column-parallel block's input as the sequence shard and all-gather it again in backward (local), or save it all-gathered (gathered)"},
    {"no-prefetch", CLI_OFF, F(prefetch), NULL, "do not prefetch the next FSDP unit"},
    {"checkpoint-activations", CLI_OPT, F(ckpt), "[none|full|every:K]", "keep only the input of every layer (full, the bare flag) or of the first of every K (layers 1, K+1, 2K+1, ...); recompute it in backward"},
    {"backend", CLI_STR, F(backend), "cpu|cuda", "compute backend"},
    {"comm", CLI_STR, F(comm), "mpi|nccl", "collectives: mpi, or nccl (CUDA; the default for multi-rank CUDA runs with one GPU per rank)"},
    {"dtype", CLI_STR, F(dtype), "fp32|bf16", "compute precision (default: bf16 on cuda, fp32 on cpu; --plan takes either)"},
    {"warmup-steps-excluded", CLI_INT, F(excluded), "N", "steps left out of the median step time"},
    {"peak-tflops", CLI_DBL, F(peak_tflops), "X", "peak FLOP/s per rank for MFU (default: measured SGEMM on CPU)"},
    {"log-every", CLI_INT, F(log_every), "N", "progress line every N steps (rank 0, stderr)"},
    {"help", CLI_ON, F(help), NULL, "this text"},
};
#undef F
#define NOPTS (int)(sizeof OPTS / sizeof OPTS[0])

static void usage(void) {
    printf("usage: [mpirun -np W] build/train [options]\n       build/train --plan --world W [options]\n\n");
    cli_usage(stdout, OPTS, NOPTS);
    printf("\nexit codes: 0 ok, 1 failed, 2 bad usage or configuration, 3 out of memory budget, 4 diverged\n");
}

int main(int argc, char **argv) {
    run_cfg o;
    run_cfg_defaults(&o);
    int rank0 = run_env_rank0();
    cli_set_program("train"); cli_set_rank0(rank0);
    const char *comm_default = o.comm;
    char err[256];
    int bad = cli_parse(OPTS, NOPTS, &o, argc, argv, err, sizeof err);
    if (!*o.ckpt) o.ckpt = "full"; /* the bare --checkpoint-activations */
    if (bad) {
        if (!run_env_launched()) { cli_say("%s", err); return 2; }
        o.parse_error = err; /* the other ranks may have parsed theirs: every rank leaves together */
        run_result res;
        return run_train(&o, &res);
    }
    o.comm_set = o.comm != comm_default;
    for (int i = 1; i < argc; i++) {
        if (!strncmp(argv[i], "--world", 7)) o.world_set = 1;
        if (!strncmp(argv[i], "--grad-accum", 12)) o.grad_accum_set = 1;
        if (!strncmp(argv[i], "--global-batch", 14)) o.global_batch_set = 1;
    }
    if (o.help) { if (rank0) usage(); return 0; }
    if (o.plan) return run_plan(&o);
    run_result res;
    return run_train(&o, &res);
}
