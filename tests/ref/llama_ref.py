#!/usr/bin/python3
"""tests/ref/llama_ref.py — an independent reference for the engine's mathematics (docs/semantics.md),
written from the design text with PyTorch autograd in float64. It imports nothing of the engine:
the model, RoPE, attention, loss, batch order, schedule, clipping and AdamW are PyTorch's or written
out here, so a bug in the engine's shared code (data, optimizer, schedule, RoPE, norm, loss) shows as
a difference against this run on every mesh, which comparing meshes with each other cannot see.

  llama_ref.py CONFIG.json INIT.safetensors TRAIN.bin OUT.json OUT.safetensors
      [--steps N] [--batch G] [--seq-len T] [--lr X] [--weight-decay X] [--beta1 X] [--beta2 X]
      [--adam-eps X] [--grad-clip C] [--schedule constant|cosine] [--warmup N] [--min-lr-ratio X]
      [--eval-data VAL.bin] [--eval-every N] [--eval-batches N]

--batch is the GLOBAL batch (dp*b sequences). Writes OUT.json in the engine's run-record shape
({"status", "steps": [{step, loss, grad_norm, lr}], "eval": [{step, loss}]}) and the final
parameters as F32 safetensors with HF names, for tests/tools/compare.py."""
import argparse, json, math, struct, sys

import numpy as np
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
torch.set_num_threads(1)


def load_st(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        b, e = v["data_offsets"]
        if v["dtype"] != "F32":
            raise ValueError(f"{path}: {k} has dtype {v['dtype']}, this reference reads F32")
        a = np.frombuffer(data[b:e], dtype="<f4").astype(np.float64).reshape(v["shape"])
        out[k] = torch.tensor(a)
    return out


def save_st(path, tensors):
    hdr, blobs, off = {}, [], 0
    for k in sorted(tensors):
        b = tensors[k].detach().numpy().astype("<f4").tobytes()
        hdr[k] = {"dtype": "F32", "shape": list(tensors[k].shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b); off += len(b)
    h = json.dumps(hdr).encode(); h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


class Llama:
    """Design 4.1: HF Llama, untied, no biases, rotate_half RoPE, GQA, SwiGLU, RMSNorm."""

    def __init__(self, cfg, params):
        self.V = cfg["vocab_size"]; self.d = cfg["hidden_size"]; self.L = cfg["num_hidden_layers"]
        self.H = cfg["num_attention_heads"]; self.KV = cfg.get("num_key_value_heads", self.H)
        self.hd = self.d // self.H
        self.eps = cfg.get("rms_norm_eps", 1e-5); self.theta = cfg.get("rope_theta", 10000.0)
        if cfg.get("tie_word_embeddings", False):
            raise ValueError("the reference covers untied embeddings only")
        self.p = {k: v.clone().requires_grad_(True) for k, v in params.items()}
        want = ["model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"]
        for i in range(self.L):
            pre = f"model.layers.{i}."
            want += [pre + "input_layernorm.weight", pre + "post_attention_layernorm.weight"]
            want += [pre + f"self_attn.{n}_proj.weight" for n in "qkvo"]
            want += [pre + f"mlp.{n}_proj.weight" for n in ("gate", "up", "down")]
        if sorted(want) != sorted(self.p):
            raise ValueError(f"tensor names differ from the config: {sorted(set(want) ^ set(self.p))[:4]}")

    def rmsnorm(self, x, w):
        return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * w

    def rope(self, x, T):
        # HF rotate_half: inv_freq_i = theta^(-2i/hd), angles duplicated over the two halves
        inv = 1.0 / (self.theta ** (torch.arange(0, self.hd, 2, dtype=torch.float64) / self.hd))
        ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
        emb = torch.cat([ang, ang], dim=-1)
        cos, sin = emb.cos(), emb.sin()
        x1, x2 = x[..., : self.hd // 2], x[..., self.hd // 2:]
        return x * cos + torch.cat([-x2, x1], dim=-1) * sin

    def loss(self, tok, tgt):
        p = self.p
        B, T = tok.shape
        x = p["model.embed_tokens.weight"][tok]
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        for i in range(self.L):
            pre = f"model.layers.{i}."
            h = self.rmsnorm(x, p[pre + "input_layernorm.weight"])
            q = (h @ p[pre + "self_attn.q_proj.weight"].T).view(B, T, self.H, self.hd).transpose(1, 2)
            k = (h @ p[pre + "self_attn.k_proj.weight"].T).view(B, T, self.KV, self.hd).transpose(1, 2)
            v = (h @ p[pre + "self_attn.v_proj.weight"].T).view(B, T, self.KV, self.hd).transpose(1, 2)
            q, k = self.rope(q, T), self.rope(k, T)
            rep = self.H // self.KV  # query head j uses kv head j // rep
            k = k.repeat_interleave(rep, dim=1); v = v.repeat_interleave(rep, dim=1)
            s = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd)
            s = s.masked_fill(~mask, float("-inf"))
            o = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, T, self.H * self.hd)
            x = x + o @ p[pre + "self_attn.o_proj.weight"].T
            h = self.rmsnorm(x, p[pre + "post_attention_layernorm.weight"])
            g = h @ p[pre + "mlp.gate_proj.weight"].T
            u = h @ p[pre + "mlp.up_proj.weight"].T
            x = x + (F.silu(g) * u) @ p[pre + "mlp.down_proj.weight"].T
        logits = self.rmsnorm(x, p["model.norm.weight"]) @ p["lm_head.weight"].T
        # mean cross-entropy over all B*T targets of the global batch
        return F.cross_entropy(logits.reshape(B * T, self.V), tgt.reshape(B * T), reduction="mean")


def batch(tokens, step, G, T):
    """Design 4.3: sequence k = tokens[kT : kT+T+1]; step s uses sequences (s*G + j) mod N."""
    N = (len(tokens) - 1) // T
    seqs = [((step * G + j) % N) for j in range(G)]
    a = np.stack([tokens[k * T: k * T + T + 1].astype(np.int64) for k in seqs])
    return torch.tensor(a[:, :T]), torch.tensor(a[:, 1:])


def lr_at(a, s):
    """Design 4.4: constant, or linear warmup over `warmup` steps (step s, 0-based, gets
    lr*(s+1)/warmup), then cosine from lr down to lr*min_lr_ratio reached at the last step."""
    if a.schedule == "constant":
        return a.lr
    if s < a.warmup:
        return a.lr * (s + 1) / a.warmup
    lo = a.lr * a.min_lr_ratio
    span = a.steps - 1 - a.warmup
    frac = min(1.0, (s - a.warmup) / span) if span > 0 else 1.0
    return lo + 0.5 * (a.lr - lo) * (1 + math.cos(math.pi * frac))


def main():
    ap = argparse.ArgumentParser()
    for n in ("config", "init", "data", "out_json", "out_st"):
        ap.add_argument(n)
    ap.add_argument("--steps", type=int, default=10); ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq-len", type=int, required=True); ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--beta1", type=float, default=0.9); ap.add_argument("--beta2", type=float, default=0.95)
    ap.add_argument("--adam-eps", type=float, default=1e-8); ap.add_argument("--grad-clip", type=float, default=1.0)
    ap.add_argument("--schedule", default="constant", choices=["constant", "cosine"])
    ap.add_argument("--warmup", type=int, default=0); ap.add_argument("--min-lr-ratio", type=float, default=0.1)
    ap.add_argument("--eval-data"); ap.add_argument("--eval-every", type=int, default=0)
    ap.add_argument("--eval-batches", type=int, default=4)
    a = ap.parse_args()

    cfg = json.load(open(a.config))
    m = Llama(cfg, load_st(a.init))
    tokens = np.fromfile(a.data, dtype="<u2")
    val = np.fromfile(a.eval_data, dtype="<u2") if a.eval_data else None
    # weight decay on matrices (embedding, projections, lm_head), none on norm weights
    decay = [t for n, t in m.p.items() if t.dim() == 2]
    no_decay = [t for n, t in m.p.items() if t.dim() == 1]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(a.beta1, a.beta2), eps=a.adam_eps)
    rec = {"status": "ok", "steps": [], "eval": []}
    for s in range(a.steps):
        tok, tgt = batch(tokens, s, a.batch, a.seq_len)
        opt.zero_grad(set_to_none=True)
        loss = m.loss(tok, tgt)
        loss.backward()
        params = list(m.p.values())
        if a.grad_clip > 0:
            norm = torch.nn.utils.clip_grad_norm_(params, a.grad_clip)
        else:
            norm = torch.sqrt(sum((t.grad ** 2).sum() for t in params))
        lr = lr_at(a, s)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        rec["steps"].append({"step": s + 1, "loss": loss.item(), "grad_norm": float(norm), "lr": lr})
        last = s + 1 == a.steps
        if val is not None and ((a.eval_every and (s + 1) % a.eval_every == 0) or last):
            with torch.no_grad():
                # mean over eval_batches validation batches of the global batch, in order from sequence 0
                el = sum(m.loss(*batch(val, k, a.batch, a.seq_len)).item() for k in range(a.eval_batches))
            rec["eval"].append({"step": s + 1, "loss": el / a.eval_batches})
    json.dump(rec, open(a.out_json, "w"), indent=1)
    save_st(a.out_st, m.p)


if __name__ == "__main__":
    main()
