#!/usr/bin/env python3
"""tests/fuzz/make_corpus.py — writes the seed corpora of the fuzz targets (tests/fuzz/corpus/*/).
The corpora are committed; this script only documents where they came from and can regenerate
them (python3, no other dependency). Seeds are small valid inputs plus one of each known kind of
bad input, so the fuzzer starts from every branch of the parsers. Not run by the build."""
import json, os, struct, sys

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))


def put(target, name, data):
    d = os.path.join(here, "corpus", target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- size parser ----
for i, s in enumerate(["96MiB", "80GB", "80GiB", "1.5GiB", "1000", "512KiB", "0", "18446744073709551615",
                       "18446744073709551616", "16EiB", "1TB", "1TiB", "17179869184GiB", "1e3", "-1", ".5KiB",
                       "3e-3", "-7", "+42", "0x10", "1.", "1.0000000000000000001KiB", "12XB", "96mib", " 1",
                       "nan", "inf", "1e400", "2147483648", "-9223372036854775808"]):
    put("size", f"seed-{i:02d}", s)

# ---- HF config.json ----
llama1b = {"architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
           "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu",
           "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
           "max_position_embeddings": 131072, "mlp_bias": False, "model_type": "llama",
           "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
           "pretraining_tp": 1, "rms_norm_eps": 1e-05,
           "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                            "original_max_position_embeddings": 8192, "rope_type": "llama3"},
           "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
           "transformers_version": "4.45.0", "use_cache": True, "vocab_size": 128256}
put("hf_config", "llama3.2-1b-untied.json", json.dumps(llama1b, indent=2))
tiny = {"model_type": "llama", "vocab_size": 256, "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64}
put("hf_config", "tiny-gqa.json", json.dumps(tiny))
bad = [
    dict(tiny, hidden_size=100, num_attention_heads=3),
    dict(tiny, num_key_value_heads=3),
    dict(tiny, tie_word_embeddings=True),
    dict(tiny, model_type="mistral"),
    dict(tiny, head_dim=32),
    dict(tiny, vocab_size=-1),
    dict(tiny, vocab_size=2**40),
    dict(tiny, rms_norm_eps=0),
    dict(tiny, rope_theta="big"),
    dict(tiny, num_key_value_heads=None),
    {k: v for k, v in tiny.items() if k != "vocab_size"},
]
for i, b in enumerate(bad):
    put("hf_config", f"bad-{i:02d}.json", json.dumps(b))
put("hf_config", "broken.json", '{"vocab_size": 256, "hidden_size": 64')
put("hf_config", "dup.json", '{"vocab_size": 256, "vocab_size": 512}')
put("hf_config", "array.json", "[1, 2, 3]")
put("hf_config", "preset-tiny", "tiny")
put("hf_config", "preset-8b", "llama3.1-8b")
put("hf_config", "preset-bad", "llama-7b")

# ---- sweep specs ----
for fn in sorted(os.listdir(os.path.join(root, "sweeps"))):
    if fn.endswith(".json"):
        with open(os.path.join(root, "sweeps", fn), "rb") as f:
            put("sweep_spec", "sweeps-" + fn, f.read())
base = {"name": "e", "world": 4, "meshes": ["1x4", "2x2", "4x1"], "model": "tiny", "seq_len": 32, "steps": 2,
        "lr": 0.003, "data": "build/data/kjv/train.bin", "timeout_s": 60}
variants = [
    dict(base, batch_size=2),
    dict(base, batch_size={"1x4": 1, "2x2": 2, "4x1": 3}),
    dict(base, global_batch=8),
    dict(base, batch_size="max", mem_budget="16MiB", eval_data="v.bin", eval_every=2, seed=3,
         schedule="cosine", warmup=1, grad_clip=1.0, weight_decay=0.0, sequence_parallel=False, prefetch=False,
         checkpoint_activations=True, extra_args=["--log-every", "1"], results_dir="out", backend="cpu",
         launcher=["mpirun", "-np", "{world}{world}"]),
    dict(base, launcher=[], batch_size=1),
    dict(base, name="../../escape", batch_size=1),
    dict(base, name="a/b", batch_size=1),
    dict(base, meshes=["3x"], batch_size=1),
    dict(base, meshes=["2x4"], batch_size=1),
    dict(base, batch_size="max"),
    dict(base, batch_size=1, bogus=1),
    dict(base, batch_size=1, data="x; touch /tmp/pwned"),
    dict(base, batch_size=1, data="a\u0000b"),
    dict(base, global_batch=6),
]
for i, v in enumerate(variants):
    put("sweep_spec", f"variant-{i:02d}.json", json.dumps(v))
# grids (axes crossed with the meshes) and the matched global batch
noseq = {k: v for k, v in base.items() if k != "seq_len"}
grids = [
    dict(noseq, batch_size="max", mem_budget="16MiB",
         axes={"checkpoint_activations": [False, "full", "every:2"], "seq_len": [32, 64]}),
    dict(base, batch_size="max", mem_budget="16MiB", global_batch=8),
    dict(base, batch_size="max", axes={"mem_budget": ["16MiB", "1GB"], "sp_activations": ["local", "gathered"],
                                       "sequence_parallel": [True, False], "prefetch": [False]}),
    dict(base, axes={"global_batch": [4, 8]}),
    dict(base, batch_size="max", mem_budget="16MiB", axes={"global_batch": [4, 8]}),
    dict(base, batch_size=1, axes={"steps": [1, 2]}),
    dict(base, batch_size=1, axes={"seq_len": [32]}),
    dict(base, batch_size=1, axes={"prefetch": []}),
    dict(base, batch_size=1, axes={"checkpoint_activations": ["every:0", "none"]}),
    dict(base, batch_size=1, axes={"checkpoint_activations": [False, "none"]}),
    dict(base, batch_size=1, axes={"global_batch": [6]}),
    dict(base, batch_size=1, checkpoint_activations="every:3"),
]
for i, v in enumerate(grids):
    put("sweep_spec", f"grid-{i:02d}.json", json.dumps(v))
put("sweep_spec", "dup-key.json", '{"name": "a", "name": "b"}')
put("sweep_spec", "not-object.json", '"spec"')

# ---- safetensors ----
def st(tensors, meta=True, pad=True, hlen=None, extra=b""):
    hdr, blob, off = {}, b"", 0
    if meta:
        hdr["__metadata__"] = {"format": "pt"}
    for k, (dt, shape, data) in tensors.items():
        hdr[k] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(data)]}
        blob += data
        off += len(data)
    h = json.dumps(hdr).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h) if hlen is None else hlen) + h + blob + extra

f32 = lambda *xs: struct.pack(f"<{len(xs)}f", *xs)
bf16 = lambda *xs: b"".join(struct.pack("<f", x)[2:] for x in xs)
good = {"model.norm.weight": ("F32", [4], f32(1, 2, 3, 4)),
        "model.embed_tokens.weight": ("BF16", [2, 3], bf16(1, -2, 0.5, 3, 4, 5)),
        "empty": ("F32", [0, 3], b"")}
put("safetensors", "good.st", st(good))
put("safetensors", "good-nometa.st", st(good, meta=False, pad=False))
put("safetensors", "empty-header.st", struct.pack("<Q", 2) + b"{}")
g = st(good)
put("safetensors", "truncated.st", g[:-5])
put("safetensors", "header-larger-than-file.st", struct.pack("<Q", 1 << 20) + b"{}")
put("safetensors", "absurd-header-len.st", struct.pack("<Q", (1 << 64) - 1) + b"{}")
put("safetensors", "short.st", b"\x02\x00\x00")
h = b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}'
put("safetensors", "overlap.st", struct.pack("<Q", len(h)) + h + b"\0" * 12)
h = b'{"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}}'
put("safetensors", "absurd-shape.st", struct.pack("<Q", len(h)) + h + b"\0" * 8)
h = b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,18446744073709551615]}}'
put("safetensors", "absurd-offset.st", struct.pack("<Q", len(h)) + h + b"\0" * 8)
h = b'{"a\xff\xfe":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'
put("safetensors", "non-utf8-name.st", struct.pack("<Q", len(h)) + h + b"\0" * 4)
h = b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}'
put("safetensors", "duplicate-name.st", struct.pack("<Q", len(h)) + h + b"\0" * 8)
h = b'{"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}}'
put("safetensors", "f16.st", struct.pack("<Q", len(h)) + h + b"\0" * 4)
h = b'{"a":{"dtype":"F32","shape":[1,1,1,1,1],"data_offsets":[0,4]}}'
put("safetensors", "five-dims.st", struct.pack("<Q", len(h)) + h + b"\0" * 4)
h = b'{"__metadata__":{"format":1}}'
put("safetensors", "bad-metadata.st", struct.pack("<Q", len(h)) + h)
print("corpora written under", os.path.join(here, "corpus"))
