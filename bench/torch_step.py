#!/usr/bin/env python3
"""bench/torch_step.py — the PyTorch reference step for the CPU benchmark (bench/bench_step.sh).

What it is: the Llama model of docs/semantics.md#model written by hand in PyTorch (RMSNorm, HF rotate_half RoPE,
GQA, SwiGLU, untied lm_head, fp32), trained with torch.optim.AdamW (betas 0.9/0.95, eps 1e-8,
weight decay 0.1 on matrices, none on norm weights) and clip_grad_norm_(1.0), on uniformly random
tokens (as `build/train --data synthetic`), on one thread. It times the median of N steps after
warm-up, both wall clock and process CPU time (the CPU time is what to compare on a shared,
loaded machine), and prints one JSON object on stdout.
What it is not: a correctness reference (tests/ check the engine's mathematics), nor needed by
`make test`; nothing in the build depends on Python.

Usage: /usr/bin/python3 bench/torch_step.py [--model small|tiny|CONFIG.json] [--batch-size 4]
         [--seq-len 256] [--steps 10] [--warmup 3] [--attention sdpa|manual|both] [--threads 1]
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F

# The CPU presets of core/formats/config.c (HF LlamaConfig names); keep in sync with config_presets there.
PRESETS = {
    "tiny": dict(vocab_size=256, hidden_size=128, intermediate_size=384, num_hidden_layers=4,
                 num_attention_heads=8, num_key_value_heads=8, max_position_embeddings=1024),
    "small": dict(vocab_size=256, hidden_size=256, intermediate_size=768, num_hidden_layers=6,
                  num_attention_heads=8, num_key_value_heads=8, max_position_embeddings=2048),
}


def load_config(name):
    if name in PRESETS:
        c = dict(PRESETS[name])
    else:
        try:
            with open(name) as fh:
                c = json.load(fh)
        except (OSError, ValueError) as e:
            sys.exit(f"torch_step: --model {name}: not a preset ({', '.join(PRESETS)}) nor a readable JSON config: {e}")
    c.setdefault("num_key_value_heads", c["num_attention_heads"])
    c.setdefault("rms_norm_eps", 1e-5)
    c.setdefault("rope_theta", 10000.0)
    c.setdefault("initializer_range", 0.02)
    return c


class RMSNorm(torch.nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class Layer(torch.nn.Module):
    def __init__(self, c, attention):
        super().__init__()
        d, f = c["hidden_size"], c["intermediate_size"]
        self.H, self.KV = c["num_attention_heads"], c["num_key_value_heads"]
        self.hd = d // self.H
        self.input_layernorm = RMSNorm(d, c["rms_norm_eps"])
        self.q_proj = torch.nn.Linear(d, self.H * self.hd, bias=False)
        self.k_proj = torch.nn.Linear(d, self.KV * self.hd, bias=False)
        self.v_proj = torch.nn.Linear(d, self.KV * self.hd, bias=False)
        self.o_proj = torch.nn.Linear(self.H * self.hd, d, bias=False)
        self.post_attention_layernorm = RMSNorm(d, c["rms_norm_eps"])
        self.gate_proj = torch.nn.Linear(d, f, bias=False)
        self.up_proj = torch.nn.Linear(d, f, bias=False)
        self.down_proj = torch.nn.Linear(f, d, bias=False)
        self.attention = attention

    def forward(self, x, cos, sin, mask):
        B, T, _ = x.shape
        h = self.input_layernorm(x)
        q = self.q_proj(h).view(B, T, self.H, self.hd).transpose(1, 2)
        k = self.k_proj(h).view(B, T, self.KV, self.hd).transpose(1, 2)
        v = self.v_proj(h).view(B, T, self.KV, self.hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if self.KV != self.H:  # query head j uses kv head j // (H/KV)
            k = k.repeat_interleave(self.H // self.KV, dim=1)
            v = v.repeat_interleave(self.H // self.KV, dim=1)
        if self.attention == "sdpa":
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(self.hd))
            s = s.masked_fill(mask, float("-inf"))
            o = torch.softmax(s, dim=-1) @ v
        x = x + self.o_proj(o.transpose(1, 2).reshape(B, T, self.H * self.hd))
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Llama(torch.nn.Module):
    def __init__(self, c, T, attention):
        super().__init__()
        d, V = c["hidden_size"], c["vocab_size"]
        self.embed_tokens = torch.nn.Embedding(V, d)
        self.layers = torch.nn.ModuleList(Layer(c, attention) for _ in range(c["num_hidden_layers"]))
        self.norm = RMSNorm(d, c["rms_norm_eps"])
        self.lm_head = torch.nn.Linear(d, V, bias=False)
        hd = d // c["num_attention_heads"]
        inv_freq = c["rope_theta"] ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
        ang = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
        ang = torch.cat((ang, ang), dim=-1)
        self.register_buffer("cos", ang.cos().float(), persistent=False)
        self.register_buffer("sin", ang.sin().float(), persistent=False)
        self.register_buffer("mask", torch.ones(T, T, dtype=torch.bool).triu(1), persistent=False)
        for n, p in self.named_parameters():
            if p.dim() == 2:
                torch.nn.init.normal_(p, 0.0, c["initializer_range"])

    def forward(self, tok, tgt):
        x = self.embed_tokens(tok)
        for layer in self.layers:
            x = layer(x, self.cos, self.sin, self.mask)
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), tgt.reshape(-1))


def flops_per_token(c, T):
    """6·(N − N_embedding) + 12·L·d·T, as core/job/metrics.c (PaLM / torchtitan convention)."""
    d, f, L, H, KV, V = (c[k] for k in ("hidden_size", "intermediate_size", "num_hidden_layers",
                                          "num_attention_heads", "num_key_value_heads", "vocab_size"))
    hd = d // H
    per_layer = 2 * d + d * H * hd * 2 + d * KV * hd * 2 + 3 * d * f
    n_non_emb = L * per_layer + d + V * d
    return 6.0 * n_non_emb + 12.0 * L * d * T


def run(c, args, attention):
    torch.manual_seed(1337)
    model = Llama(c, args.seq_len, attention)
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=3e-3, betas=(0.9, 0.95), eps=1e-8)
    V, B, T = c["vocab_size"], args.batch_size, args.seq_len
    g = torch.Generator().manual_seed(1)
    walls, cpus, losses = [], [], []
    for s in range(args.warmup + args.steps):
        seq = torch.randint(0, V, (B, T + 1), generator=g)
        w0, c0 = time.perf_counter(), time.process_time()
        opt.zero_grad(set_to_none=True)
        loss = model(seq[:, :-1], seq[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        lv = loss.item()
        w1, c1 = time.perf_counter(), time.process_time()
        if s >= args.warmup:
            walls.append((w1 - w0) * 1e3)
            cpus.append((c1 - c0) * 1e3)
            losses.append(lv)
    med = statistics.median(walls)
    fpt = flops_per_token(c, T)
    return {"attention": attention, "step_ms": walls, "cpu_ms": cpus,
            "step_ms_median": med, "cpu_ms_median": statistics.median(cpus),
            "tok_s": B * T / med * 1e3, "flops_per_token": fpt,
            "model_gflops_wall": fpt * B * T / med * 1e-6,
            "model_gflops_cpu": fpt * B * T / statistics.median(cpus) * 1e-6,
            "final_loss": losses[-1]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="small")
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--attention", choices=["sdpa", "manual", "both"], default="both")
    args = ap.parse_args()
    if min(args.batch_size, args.seq_len, args.steps, args.threads) < 1 or args.warmup < 0:
        sys.exit("torch_step: --batch-size, --seq-len, --steps, --threads must be >= 1, --warmup >= 0")
    torch.set_num_threads(args.threads)
    c = load_config(args.model)
    have_sdpa = hasattr(F, "scaled_dot_product_attention")
    kinds = ["sdpa", "manual"] if args.attention == "both" else [args.attention]
    if not have_sdpa:
        if args.attention == "sdpa":
            sys.exit(f"torch_step: torch {torch.__version__} has no scaled_dot_product_attention (needs >= 2.0)")
        kinds = ["manual"]
    results = [run(c, args, k) for k in kinds]
    best = min(results, key=lambda r: r["cpu_ms_median"])
    print(json.dumps({"schema": "meshsweep.torch_step/1", "torch": torch.__version__,
                      "threads": torch.get_num_threads(), "blas": torch.__config__.show().split("BLAS_INFO=")[-1].split(",")[0],
                      "sdpa_available": have_sdpa, "model": args.model, "config": c,
                      "batch_size": args.batch_size, "seq_len": args.seq_len, "steps": args.steps,
                      "warmup": args.warmup, "runs": results, "best": best["attention"],
                      "step_ms_median": best["step_ms_median"], "cpu_ms_median": best["cpu_ms_median"]}, indent=1))


if __name__ == "__main__":
    main()
