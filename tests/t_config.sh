#!/usr/bin/env bash
# tests/t_config.sh — what build/train would otherwise silently ignore in an HF config.json is refused
# end to end: exit 2, one line naming the file and the field (hidden_act, attention_bias, mlp_bias,
# architectures, rope_scaling types other than linear/llama3), as are checkpoints with more or fewer
# layers than the config or tensors the model does not have; the rope_scaling it does support loads;
# tied embeddings save only model.embed_tokens.weight and load from such a checkpoint.
source "$(dirname "$0")/lib.sh"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
TR="$BUILD/train"
[ -x "$TR" ] || { fail config_setup "$TR missing (make)"; exit 1; }
cfg() {
  /usr/bin/python3 -c 'import json,sys; d={"vocab_size": 256, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
"num_attention_heads": 4, "max_position_embeddings": 64}; d.update(eval(sys.argv[2])); open(sys.argv[1],"w").write(json.dumps(d))' "$T/$1" "$2"
}
bad() { local n=$1 pat=$2; shift 2; expect_exit "$n" 2 "$pat" -- "$TR" --steps 1 --seq-len 16 --data synthetic "$@"; }
cfg gelu.json '{"hidden_act": "gelu"}'
cfg abias.json '{"attention_bias": True}'
cfg mbias.json '{"mlp_bias": True}'
cfg arch.json '{"architectures": ["Qwen2ForCausalLM"]}'
cfg dyn.json '{"rope_scaling": {"type": "dynamic", "factor": 2.0}}'
cfg l3bad.json '{"rope_scaling": {"rope_type": "llama3", "factor": 8.0}}'
bad config_hidden_act "^train: $T/gelu.json: hidden_act gelu is not supported" --model "$T/gelu.json"
bad config_attention_bias "^train: $T/abias.json: attention_bias true is not supported" --model "$T/abias.json"
bad config_mlp_bias "^train: $T/mbias.json: mlp_bias true is not supported" --model "$T/mbias.json"
bad config_architectures "^train: $T/arch.json: architectures Qwen2ForCausalLM is not supported" --model "$T/arch.json"
bad config_rope_dynamic "^train: $T/dyn.json: rope_scaling type 'dynamic' is not supported" --model "$T/dyn.json"
bad config_rope_llama3_incomplete "^train: $T/l3bad.json: rope_scaling.low_freq_factor \(llama3\)" --model "$T/l3bad.json"
# a field that changes the mathematics is refused unless neutral; a field meshsweep does not know is
# refused, not ignored; a malformed architectures says what is expected
cfg adrop.json '{"attention_dropout": 0.5}'
cfg hdrop.json '{"hidden_dropout": 0.1}'
cfg adrop_str.json '{"attention_dropout": "0.5"}'
cfg window.json '{"sliding_window": 4096}'
cfg quant.json '{"quantization_config": {"bits": 4}}'
cfg arch_str.json '{"architectures": "LlamaForCausalLM"}'
cfg arch_empty.json '{"architectures": []}'
cfg arch_num.json '{"architectures": [7]}'
bad config_attention_dropout "^train: $T/adrop.json: attention_dropout 0.5 is not supported \(meshsweep trains without dropout" --model "$T/adrop.json"
bad config_hidden_dropout "^train: $T/hdrop.json: hidden_dropout 0.1 is not supported" --model "$T/hdrop.json"
bad config_dropout_not_a_number "^train: $T/adrop_str.json: attention_dropout must be a number" --model "$T/adrop_str.json"
bad config_sliding_window "^train: $T/window.json: sliding_window is not supported" --model "$T/window.json"
bad config_unknown_field "^train: $T/quant.json: field quantization_config is not one meshsweep knows" --model "$T/quant.json"
bad config_architectures_string "^train: $T/arch_str.json: architectures must be a list of names, \[\"LlamaForCausalLM\"\] \(got a string\)$" --model "$T/arch_str.json"
bad config_architectures_empty "^train: $T/arch_empty.json: architectures must be a list of names, .*\(got an empty list\)$" --model "$T/arch_empty.json"
bad config_architectures_number "^train: $T/arch_num.json: architectures must be a list of names, .*\(entry 0 is a number\)$" --model "$T/arch_num.json"

# the supported forms load and train (legacy "type" key included), with neutral values and metadata
cfg lin.json '{"rope_scaling": {"type": "linear", "factor": 2.0}, "hidden_act": "silu", "attention_bias": False, "architectures": ["LlamaForCausalLM"], "attention_dropout": 0.0, "sliding_window": None, "pretraining_tp": 1, "torch_dtype": "bfloat16", "bos_token_id": 1, "use_cache": True}'
cfg l3.json '{"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 32}}'
for c in lin l3; do
  if "$TR" --steps 1 --seq-len 16 --data synthetic --model "$T/$c.json" --out "$T/$c.out.json" 2>"$T/$c.err"; then ok "config_rope_${c}_trains"
  else fail "config_rope_${c}_trains" "$(tail -1 "$T/$c.err")"; fi
done

# --- checkpoints against the config: layer count, foreign tensors; tied save/init round trip
cfg two.json '{"num_hidden_layers": 2}'
cfg tied.json '{"tie_word_embeddings": True}'
"$TR" --steps 1 --seq-len 16 --data synthetic --model "$T/two.json" --save "$T/two.st" 2>/dev/null || fail config_setup "2-layer save failed"
# --lr 0: the saved tied model is the initial one
"$TR" --steps 1 --seq-len 16 --data synthetic --model "$T/tied.json" --lr 0 --save "$T/tied.st" --out "$T/tied0.json" \
  2>"$T/tied.err" || fail config_tied_save "$(tail -1 "$T/tied.err")"
cfg base.json '{}'
bad config_ckpt_more_layers "^train: $T/two.st: the checkpoint has 2 layers but num_hidden_layers is 1" --model "$T/base.json" --init "$T/two.st"
cfg three.json '{"num_hidden_layers": 3}'
bad config_ckpt_fewer_layers "^train: $T/two.st: the checkpoint has 2 layers but num_hidden_layers is 3" --model "$T/three.json" --init "$T/two.st"
/usr/bin/python3 - "$T/two.st" "$T/extra.st" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; h = json.loads(raw[8:8 + n]); data = raw[8 + n:]
end = max(v["data_offsets"][1] for k, v in h.items() if k != "__metadata__")
for i, k in enumerate(["vision.proj.weight", "model.layers.0.self_attn.q_proj.bias", "model.rotary.inv_freq", "score.weight"]):
    h[k] = {"dtype": "F32", "shape": [1], "data_offsets": [end + 4 * i, end + 4 * i + 4]}
hb = json.dumps(h).encode()
open(sys.argv[2], "wb").write(struct.pack("<Q", len(hb)) + hb + data[:end] + b"\0" * 16)
PY
bad config_ckpt_foreign_tensors "^train: $T/extra.st: 4 tensors the model does not have: .*, \.\.\.$" --model "$T/two.json" --init "$T/extra.st"
/usr/bin/python3 - "$T/tied.st" <<'PY' && ok config_tied_saves_only_embedding || fail config_tied_saves_only_embedding "lm_head.weight saved or embedding missing"
import json, struct, sys
raw = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; h = json.loads(raw[8:8 + n])
sys.exit(0 if "model.embed_tokens.weight" in h and "lm_head.weight" not in h else 1)
PY
# a tied checkpoint (no lm_head.weight) initialises a tied model: the same first loss as the run that saved it
if "$TR" --steps 1 --seq-len 16 --data synthetic --model "$T/tied.json" --lr 0 --init "$T/tied.st" --out "$T/tied1.json" 2>"$T/tied1.err"; then
  /usr/bin/python3 - "$T/tied0.json" "$T/tied1.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
ok = abs(a["steps"][0]["loss"] - b["steps"][0]["loss"]) < 1e-6 and b["config"]["model"]["tie_word_embeddings"] is True
print("ok   config_tied_init_from_tied_checkpoint" if ok else f"FAIL config_tied_init_from_tied_checkpoint: {a['steps'][0]['loss']} vs {b['steps'][0]['loss']}")
PY
else fail config_tied_init_from_tied_checkpoint "$(tail -1 "$T/tied1.err")"; fi
exit 0
