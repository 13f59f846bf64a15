#!/usr/bin/env bash
# tests/t_cuda_engine_emu.sh — the whole engine on the CUDA backend, without a GPU: build/train is
# linked against kernels/cuda/*.cu compiled for the host emulator (kernels/cuda/cuda_emu.cuh), so the
# device code paths of the engine run for real: device allocation through ops_cuda, host<->device
# copies of tokens and losses, FSDP and TP collectives on device buffers through the host-staged MPI
# fallback (2 ranks "share" the emulator's one GPU, as ranks sharing a GPU do). Losses must match the
# CPU backend; the plan must equal the measured peak on the device backend too. NCCL itself is not
# emulated (it needs real GPUs).
source "$(dirname "$0")/lib.sh"
# the emulator builds with g++ on its own, not with the sanitizer build: it runs in the plain suite only
case "$BUILD" in *san*) skip "$(basename "$0" .sh)" "runs in the plain suite (not a sanitizer build)"; exit 0;; esac
command -v g++ >/dev/null || { skip cuda_engine_emu "no g++"; exit 0; }
O="$BUILD/emu-engine"; mkdir -p "$O/obj"
BLAS_INC=/usr/include/x86_64-linux-gnu/openblas-pthread
log="$O/build.log"; : > "$log"
for f in kernels/cuda/[a-z]*.cu; do
  g++ -std=c++20 -O2 -x c++ -DMESHSWEEP_CUDA -DMESHSWEEP_CUDA_EMU -I. -Wno-unknown-pragmas \
      -c "$f" -o "$O/obj/cu_$(basename "$f" .cu).o" 2>>"$log" || { fail cuda_engine_emu_build "$f: $(head -5 "$log")"; exit 1; }
done
for f in core/*.c kernels/cpu/*.c; do
  def=-DMESHSWEEP_CUDA; [ "$f" = core/comm_nccl.c ] && def=   # NCCL is not emulated: its stubs
  mpicc -std=c11 -D_GNU_SOURCE -O2 $def -I. -I$BLAS_INC -c "$f" -o "$O/obj/$(echo "$f" | tr / _).o" 2>>"$log" \
    || { fail cuda_engine_emu_build "$f: $(head -5 "$log")"; exit 1; }
done
mpicc -std=c11 -D_GNU_SOURCE -O2 -DMESHSWEEP_CUDA -I. -I$BLAS_INC bench/train.c "$O"/obj/*.o \
  -lopenblas -ljansson -lm -lstdc++ -lpthread -o "$O/train" 2>>"$log" || { fail cuda_engine_emu_build "$(head -5 "$log")"; exit 1; }
ok cuda_engine_emu_build

T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cat > "$T/m.json" <<'JSON'
{"vocab_size": 250, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
 "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64}
JSON
COMMON=(--model "$T/m.json" --seq-len 16 --steps 2 --grad-clip 0.5 --data "$BUILD/data/kjv/train.bin" --log-every 100)
"$BUILD/train" "${COMMON[@]}" --batch-size 2 --out "$T/cpu.json" 2>"$T/cpu.err" || fail cuda_engine_emu_cpu_ref "$(tail -2 "$T/cpu.err")"
run() { # NAME NP TP B EXTRA...
  local name=$1 np=$2 tp=$3 b=$4; shift 4
  if timeout 600 "${MPIRUN[@]}" -np "$np" "$O/train" "${COMMON[@]}" --backend cuda --dtype fp32 --tp "$tp" --batch-size "$b" "$@" \
       --out "$T/$name.json" >"$T/$name.log" 2>&1; then
    /usr/bin/python3 tests/tools/compare.py runs "cuda_engine_emu_${name}_losses" "$T/cpu.json" "$T/$name.json" 1e-4 1e-3
    /usr/bin/python3 - "$name" "$T/$name.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[2])); m = r["memory"]
ok = m["planned"]["peak"] == m["peak"] and m["planned"]["by_category"] == m["by_category"] and r["env"]["backend"] == "cuda"
print(f"ok   cuda_engine_emu_{sys.argv[1]}_plan_equals_measured" if ok else
      f"FAIL cuda_engine_emu_{sys.argv[1]}_plan_equals_measured: {m['planned']} vs {m['peak']} {m['by_category']}")
PY
  else
    fail "cuda_engine_emu_$name" "run failed: $(grep -v '^\s*$' "$T/$name.log" | tail -3 | tr '\n' ' ')"
  fi
}
run 1x1 1 1 2
run 1x2_sp 2 2 2
run 2x1_fsdp 2 1 1
# bf16 mixed precision (ops_cuda_bf16: bf16 activations and gathered copies, fp32 masters, grads and
# AdamW): the loss follows the fp32 CPU run to bf16 accuracy (2e-2 relative: activations carry 8
# mantissa bits), on one rank and with FSDP + TP collectives in bf16 over host-staged MPI
run_bf16() { # NAME NP TP B
  local name=$1 np=$2 tp=$3 b=$4
  if timeout 600 "${MPIRUN[@]}" -np "$np" "$O/train" "${COMMON[@]}" --backend cuda --dtype bf16 --tp "$tp" --batch-size "$b" \
       --out "$T/$name.json" >"$T/$name.log" 2>&1; then
    /usr/bin/python3 tests/tools/compare.py runs "cuda_engine_emu_${name}_losses" "$T/cpu.json" "$T/$name.json" 2e-2 1e-1
  else
    fail "cuda_engine_emu_$name" "run failed: $(grep -v '^\s*$' "$T/$name.log" | tail -3 | tr '\n' ' ')"
  fi
}
run_bf16 bf16_1x1 1 1 2
run_bf16 bf16_2x2 4 2 1
/usr/bin/python3 - "$T/1x1.json" "$T/bf16_1x1.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
fa, fb = a["memory"]["by_category"]["activations"], b["memory"]["by_category"]["activations"]
ok = b["config"]["dtype"] == "bf16" and fb < 0.7 * fa and b["memory"]["planned"]["peak"] == b["memory"]["peak"]
print(f"ok   cuda_engine_emu_bf16_halves_activations  ({fb} vs {fa} bytes)" if ok else
      f"FAIL cuda_engine_emu_bf16_halves_activations: dtype {b['config']['dtype']}, {fb} vs {fa}, plan {b['memory']['planned']['peak']} vs {b['memory']['peak']}")
PY
