#!/usr/bin/env bash
# tests/t_mesh.sh — every mesh against the 1-rank run (docs/semantics.md#fsdp, docs/testing.md): for a fixed global batch of 8
# sequences, 1x8, 2x4, 4x2, 8x1, 1x2, 2x1 and 2x2 (plus SP off, prefetch off and --sp-activations
# gathered variants — the default is local — and the seven meshes again with tied embeddings and
# llama3 rope_scaling, and 3x1, 6x1, 3x2 with a model whose FSDP units all leave padding) must give the
# losses and gradient norms of `build/train` on one rank over 10 AdamW steps with clipping active, and
# the same final parameters (saved from the sharded run). The model has GQA (KV = H/2) and a
# vocabulary of 250, not divisible by 4 or 8, so padding and masking of the vocab-parallel loss is
# exercised. Tolerances: the meshes reduce in different orders, so fp32 rounding differs at ~1e-7
# per operation; over 10 steps we accept 1e-5 relative on losses and gradient norms, and 3e-4
# absolute on parameters: Adam turns rounding noise in near-zero gradients into updates of up to
# ~1e-5 per step (measured max 3e-5 after 10 steps); a real sharding bug moves parameters by ~lr = 3e-3.
# HSDP meshes R x S x tp (2x2x2, 2x4x1, 4x2x1, 2x1x4, with accumulation each|last, SP off, checkpointing)
# against the same 1-rank run; checkpoints moved between 3D and 2D meshes; bad --replicate refused.
source "$(dirname "$0")/lib.sh"
# 10 steps; 4 in the sanitizer build, which looks for memory errors and undefined behaviour: the mesh
# runs take every code path by their third step (first-step allocations, the steady state with the
# prefetch and the reduce-scatter behind, clipping) and the plain suite checks the 10-step figures
STEPS=10; [ "$BUILD" = build-san ] && STEPS=4
# The sanitizer build also runs one case of each C path, not every mesh: the larger meshes (1x8, 2x4,
# 4x2, 8x1, 2x4x1, 4x2x1) run the code of 1x2, 2x2, 2x1 and 2x2x2 with other sizes, and each option
# (SP off, prefetch off, checkpointing, gathered, tied, padding) once on a small mesh, the checkpoint
# moved to one 3D and one 2D mesh; the numbers of the rest are the plain suite's (CI runs both), as is
# the 30-step KJV run.
SAN_CASES="1x2 2x1 2x2 2x2_nosp_noprefetch 2x2_ckpt_gathered 2x2x2 2x2x2_accum 2x1x4_accum_last ckpt_4x2x1 ckpt_2x4
  tied_2x2 tied_2x1 pad_3x1 pad_3x2"
in_san() { [ "$BUILD" != build-san ] || [[ " ${SAN_CASES//$'\n'/ } " == *" $1 "* ]]; }   # NAME: run in this build?
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cat > "$T/gqa.json" <<'JSON'
{"model_type": "llama", "vocab_size": 250, "hidden_size": 128, "intermediate_size": 256,
 "num_hidden_layers": 2, "num_attention_heads": 16, "num_key_value_heads": 8,
 "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "rope_theta": 10000.0}
JSON
COMMON=(--model "$T/gqa.json" --seq-len 32 --steps $STEPS --lr 3e-3 --grad-clip 0.5 --data "$BUILD/data/kjv/train.bin" --log-every 100)
"$BUILD/train" "${COMMON[@]}" --batch-size 8 --out "$T/ref.json" --save "$T/ref.st" 2>"$T/ref.err" \
  || { fail mesh_reference "1-rank run failed: $(tail -2 "$T/ref.err")"; exit 1; }
# clipping must really be active for the test to cover it
/usr/bin/python3 - "$T/ref.json" <<'PY' && ok mesh_clipping_active || fail mesh_clipping_active "grad norm never above the clip 0.5"
import json, sys
r = json.load(open(sys.argv[1]))
sys.exit(0 if any(s["grad_norm"] > 0.5 for s in r["steps"]) else 1)
PY
REF="$T/ref"
run_mesh() { # NAME DP TP EXTRA...  (against $REF.json / $REF.st with ${COMMON[@]})
  local name=$1 dp=$2 tp=$3; shift 3
  in_san "$name" || return 0
  local w=$((dp * tp)) bs=(--batch-size $((${G:-8} / dp)))
  # a case that sets its own --batch-size gives it once (an option given twice is refused)
  case " $* " in *" --batch-size "*) bs=() ;; esac
  if ! "${MPIRUN[@]}" -np $w "$BUILD/train" "${COMMON[@]}" --tp $tp "${bs[@]}" "$@" \
       --out "$T/$name.json" --save "$T/$name.st" >"$T/$name.log" 2>&1; then
    fail "mesh_$name" "run failed: $(grep -v '^\s*$' "$T/$name.log" | tail -3 | tr '\n' ' ')"; return
  fi
  /usr/bin/python3 tests/tools/compare.py runs "mesh_${name}_losses" "$REF.json" "$T/$name.json" 1e-5 1e-5
  /usr/bin/python3 tests/tools/compare.py params "mesh_${name}_params" "$REF.st" "$T/$name.st" 3e-4
}
run_mesh 1x8 1 8
run_mesh 2x4 2 4
run_mesh 4x2 4 2
run_mesh 8x1 8 1
run_mesh 1x2 1 2
run_mesh 2x1 2 1
run_mesh 2x2 2 2
run_mesh 2x4_nosp 2 4 --no-sequence-parallel
run_mesh 4x2_noprefetch 4 2 --no-prefetch
run_mesh 2x2_nosp_noprefetch 2 2 --no-sequence-parallel --no-prefetch
run_mesh 2x2_ckpt 2 2 --checkpoint-activations
# the runs above use --sp-activations local (the default); gathered saves the all-gathered inputs
run_mesh 1x8_gathered 1 8 --sp-activations gathered
run_mesh 2x4_gathered 2 4 --sp-activations gathered
run_mesh 2x2_ckpt_gathered 2 2 --checkpoint-activations --sp-activations gathered

# HSDP meshes R x S x tp (docs/semantics.md#hsdp): parameters, gradients and AdamW state sharded over S,
# the gradient reduce-scattered within the shard group and then all-reduced across the R replicas; the
# batch's data-parallel degree is dp = R * S. Each against the 1-rank run at the same global batch of 8:
# with sequence parallel (the default at tp > 1), without it, with accumulation each|last (micro-batch
# 1, so the replica all-reduce must wait for the last micro-batch), with checkpointing, and S = 1.
run_mesh 2x2x2 4 2 --replicate 2
run_mesh 2x4x1 8 1 --replicate 2
run_mesh 4x2x1 8 1 --replicate 4
run_mesh 2x1x4 2 4 --replicate 2
run_mesh 2x2x2_accum 4 2 --replicate 2 --batch-size 1 --global-batch 8
run_mesh 2x1x4_accum_last 2 4 --replicate 2 --batch-size 1 --global-batch 8 --accum-reduce last
run_mesh 2x2x2_nosp_ckpt 4 2 --replicate 2 --no-sequence-parallel --checkpoint-activations
# the record names the mesh's replicate and shard degrees
/usr/bin/python3 - "$T/2x2x2.json" <<'PY' && ok mesh_hsdp_record_mesh || fail mesh_hsdp_record_mesh "mesh object of the 2x2x2 record"
import json, sys
m = json.load(open(sys.argv[1]))["mesh"]
sys.exit(0 if (m["world"], m["dp"], m["tp"], m["replicate"], m["shard"]) == (8, 4, 2, 2, 2) else 1)
PY
# the replica all-reduce is started, not blocking: on a machine whose collectives overlap compute (H100,
# 8 per host) the plan of 8B on 8x8x1 hides most of it behind the backward. Blocking, it was all exposed
# (exposed 326 ms > the replica all-reduce's 238 ms); started, exposed is 107 ms, under the all-reduce alone.
"$BUILD/train" --plan --model llama3.1-8b --machine h100-80gb --gpu h100-80gb --world 64 --gpus-per-host 8 --seq-len 8192 \
  --batch-size 1 --dtype bf16 --replicate 8 --out "$T/plan8x8x1.json" >"$T/plan8x8x1.log" 2>&1
/usr/bin/python3 - "$T/plan8x8x1.json" <<'PY' && ok mesh_hsdp_replica_all_reduce_overlapped \
  || fail mesh_hsdp_replica_all_reduce_overlapped "exposed communication not under the replica all-reduce's time: $(grep -m1 'predicted communication' "$T/plan8x8x1.log")"
import json, sys
t = json.load(open(sys.argv[1]))["time"]
ar = t["comm_ms_by_group"]["replica"].get("all_reduce", 0)
print(f"replica all-reduce {ar:.1f} ms, exposed communication {t['exposed_comm_ms']:.1f} ms")
sys.exit(0 if ar > 0 and t["exposed_comm_ms"] < ar else 1)
PY
# checkpoints between meshes (the format is unsharded HF tensors): the 2x2x2 run's file loaded with --init on
# 4x2x1, 2x1x4, the 2D meshes 1x8 and 2x4 (R = 1), and one rank, and saved again without a step, is the same file
# byte for byte; a file of other shapes is refused on a 3D mesh (one line, exit 2, nothing written)
without COMMON --steps
for m in "4 2 1" "2 1 4" "1 1 8" "1 2 4" "1 1 1"; do
  set -- $m; name=${1}x${2}x${3}; [ "$1" = 1 ] && name=${2}x${3}
  in_san "ckpt_$name" || continue
  "${MPIRUN[@]}" -np $(($1 * $2 * $3)) "$BUILD/train" "${WITHOUT[@]}" --steps 0 --replicate $1 --tp $3 --init "$T/2x2x2.st" \
    --save "$T/re_$name.st" >"$T/re_$name.log" 2>&1
  rc=$?
  if [ $rc = 0 ] && cmp -s "$T/2x2x2.st" "$T/re_$name.st"; then ok "mesh_hsdp_checkpoint_2x2x2_to_$name"
  else fail "mesh_hsdp_checkpoint_2x2x2_to_$name" "exit $rc or a different file: $(tail -2 "$T/re_$name.log" | tr '\n' ' ')"; fi
done
sed 's/"intermediate_size": 256/"intermediate_size": 192/' "$T/gqa.json" >"$T/other.json"
rm -f "$T/other.st" "$T/other.out"
"${MPIRUN[@]}" -np 8 "$BUILD/train" --model "$T/other.json" --seq-len 32 --steps 1 --tp 2 --replicate 2 --init "$T/2x2x2.st" \
  --save "$T/other.st" --out "$T/other.out" >"$T/other.log" 2>&1
rc=$?; n=$(grep -c 'wrong shape' "$T/other.log")
if [ $rc = 2 ] && [ "$n" = 1 ] && [ ! -e "$T/other.st" ] && [ ! -e "$T/other.out" ]; then ok mesh_hsdp_checkpoint_other_shapes_refused
else fail mesh_hsdp_checkpoint_other_shapes_refused "exit $rc, $n lines: $(head -2 "$T/other.log" | tr '\n' ' ')"; fi
# the CUDA engine does not run HSDP: refused with one line before anything starts (exit 2)
"${MPIRUN[@]}" -np 2 "$BUILD/train" "${COMMON[@]}" --backend cuda --replicate 2 --out "$T/cuda.json" >"$T/cuda.log" 2>&1
rc=$?
if [ $rc = 2 ] && [ "$(grep -c '^train: --replicate 2: HSDP runs on --backend cpu only' "$T/cuda.log")" = 1 ] && [ ! -e "$T/cuda.json" ]; then
  ok mesh_hsdp_cuda_refused
else fail mesh_hsdp_cuda_refused "exit $rc: $(head -2 "$T/cuda.log" | tr '\n' ' ')"; fi
# bad meshes: one line, exit 2 on every rank, no record written
for r in 3 0 16; do
  rm -f "$T/bad.json"
  "${MPIRUN[@]}" -np 8 "$BUILD/train" "${COMMON[@]}" --tp 2 --replicate $r --out "$T/bad.json" >"$T/bad.log" 2>&1
  rc=$?; n=$(grep -c '^train: --replicate' "$T/bad.log")
  if [ $rc = 2 ] && [ "$n" = 1 ] && [ ! -e "$T/bad.json" ] && ! grep -Eq 'Exit code: *([013-9]|2[0-9])' "$T/bad.log"; then ok "mesh_hsdp_bad_replicate_$r"
  else fail "mesh_hsdp_bad_replicate_$r" "exit $rc, $n lines: $(head -3 "$T/bad.log" | tr '\n' ' ')"; fi
done

# tied embeddings (one tensor is the embedding and lm_head, vocabulary-parallel by rows) with llama3
# rope_scaling (hd 8: wavelengths 6.3 kept, 63 interpolated, 628 and 6283 divided): every mesh against
# its own 1-rank run; the checkpoints hold model.embed_tokens.weight and no lm_head.weight
/usr/bin/python3 - "$T/gqa.json" "$T/tied.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(tie_word_embeddings=True, rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
         "high_freq_factor": 4.0, "original_max_position_embeddings": 64})
json.dump(c, open(sys.argv[2], "w"))
PY
COMMON=(--model "$T/tied.json" --seq-len 32 --steps $STEPS --lr 3e-3 --grad-clip 0.5 --data "$BUILD/data/kjv/train.bin" --log-every 100)
REF="$T/tref"
if "$BUILD/train" "${COMMON[@]}" --batch-size 8 --out "$REF.json" --save "$REF.st" 2>"$T/tref.err"; then
  /usr/bin/python3 - "$REF.st" <<'PY' && ok mesh_tied_checkpoint_has_no_lm_head || fail mesh_tied_checkpoint_has_no_lm_head "lm_head.weight saved, or the embedding missing"
import json, struct, sys
raw = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; h = json.loads(raw[8:8 + n])
sys.exit(0 if "model.embed_tokens.weight" in h and "lm_head.weight" not in h else 1)
PY
  for m in 1x8:1:8 2x4:2:4 4x2:4:2 8x1:8:1 1x2:1:2 2x1:2:1 2x2:2:2; do
    IFS=: read -r name dp tp <<<"$m"; run_mesh "tied_$name" "$dp" "$tp"
  done
else
  fail mesh_tied_reference "1-rank run failed: $(tail -2 "$T/tref.err")"
fi
# FSDP padding (docs/semantics.md#fsdp: a unit is padded to a multiple of dp): tests/models/fsdp_pad.json
# (d 40, V 253, f 112) leaves padding in every unit at dp 3 and 6 (checked below), so the last shard of
# each is part padding; 3x1, 6x1 and 3x2 (V padded to 254 for TP too) against the model's own 1-rank run
# over a global batch of 6. A shard computed from the unpadded size drops each unit's last elements.
PAD=tests/models/fsdp_pad.json
/usr/bin/python3 - "$PAD" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
V, d, f, H, KV = (c[k] for k in ("vocab_size", "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads"))
hd, bad = d // H, []
for dp, tp in ((3, 1), (6, 1), (3, 2)):
    Vl = -(-V // tp)
    units = {"layer": 2 * d + 2 * (H // tp) * hd * d + 2 * (KV // tp) * hd * d + 3 * (f // tp) * d, "embedding": Vl * d,
             "head": d + Vl * d}
    bad += [f"{n} {u} at {dp}x{tp}" for n, u in units.items() if u % dp == 0]
print("ok   mesh_pad_every_unit_padded" if not bad and d % 3 and d % 6 and V % 3 and V % 6 and V % 2
      else f"FAIL mesh_pad_every_unit_padded: divisible by dp: {bad}")
PY
COMMON=(--model "$PAD" --seq-len 32 --steps $STEPS --lr 3e-3 --grad-clip 0.5 --data "$BUILD/data/kjv/train.bin" --log-every 100)
REF="$T/pref"
if must mesh_pad_reference "$BUILD/train" "${COMMON[@]}" --batch-size 6 --out "$REF.json" --save "$REF.st" 2>/dev/null; then
  G=6 run_mesh pad_3x1 3 1
  G=6 run_mesh pad_6x1 6 1
  G=6 run_mesh pad_3x2 3 2
fi
COMMON=(--model "$T/gqa.json" --seq-len 32 --steps $STEPS --lr 3e-3 --grad-clip 0.5 --data "$BUILD/data/kjv/train.bin" --log-every 100)
# a KJV training run on the 2x4 mesh learns as the 1-rank run does (30 steps, same global batch)
in_san kjv_30_steps || exit 0
without COMMON --steps
must mesh_kjv_run_1x1 "$BUILD/train" "${WITHOUT[@]}" --steps 30 --batch-size 8 --out "$T/long1.json" 2>/dev/null
must mesh_kjv_run_2x4 "${MPIRUN[@]}" -np 8 "$BUILD/train" "${WITHOUT[@]}" --steps 30 --tp 4 --batch-size 4 --out "$T/long8.json" >/dev/null 2>&1
/usr/bin/python3 tests/tools/compare.py runs mesh_2x4_kjv_30_steps "$T/long1.json" "$T/long8.json" 1e-4 1e-3
/usr/bin/python3 - "$T/long8.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["steps"]
a = sum(x["loss"] for x in s[:3]) / 3; b = sum(x["loss"] for x in s[-3:]) / 3
print(f"ok   mesh_2x4_kjv_loss_decreases  ({a:.3f} -> {b:.3f})" if b < a - 1.0 else f"FAIL mesh_2x4_kjv_loss_decreases: {a:.3f} -> {b:.3f}")
PY
