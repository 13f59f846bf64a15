#!/usr/bin/env bash
# tests/t_config.sh — what build/train would otherwise silently ignore in an HF config.json is refused
# end to end: exit 2, one line naming the file and the field (hidden_act, attention_bias, mlp_bias,
# architectures, rope_scaling types other than linear/llama3); the rope_scaling it does support loads.
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

# the supported forms load and train (legacy "type" key included)
cfg lin.json '{"rope_scaling": {"type": "linear", "factor": 2.0}, "hidden_act": "silu", "attention_bias": False, "architectures": ["LlamaForCausalLM"]}'
cfg l3.json '{"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 32}}'
for c in lin l3; do
  if "$TR" --steps 1 --seq-len 16 --data synthetic --model "$T/$c.json" --out "$T/$c.out.json" 2>"$T/$c.err"; then ok "config_rope_${c}_trains"
  else fail "config_rope_${c}_trains" "$(tail -1 "$T/$c.err")"; fi
done
exit 0
