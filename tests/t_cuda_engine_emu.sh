#!/usr/bin/env bash
# tests/t_cuda_engine_emu.sh — the whole engine on the CUDA backend, without a GPU: build/train is
# linked against kernels/cuda/*.cu compiled for the host emulator (tests/emu/cuda_emu.cuh), so the
# device code paths of the engine run for real: device allocation through ops_cuda's stream-ordered
# pool, host<->device copies of tokens and losses, FSDP and TP collectives on device buffers through
# the host-staged MPI fallback (2 ranks "share" the emulator's one GPU, as ranks sharing a GPU do),
# and through core/engine/comm_nccl.c over the emulated NCCL (tests/emu/nccl_emu.cuh: one emulated GPU
# per rank, collectives carried by MPI when their stream reaches them). Work runs lazily with the
# streams interleaved by MESHSWEEP_EMU_SEED, different for each run, so a missing event wait between
# the NCCL and compute streams or a premature free shows up as a wrong loss or an emulator error.
# Gradient accumulation (both reduce modes, and over NCCL with SP) on device buffers too.
# Losses must match the CPU backend; the plan must equal the measured peak on the device backend
# too; after the first step a step makes no cudaMalloc, cudaFree or device synchronisation (the
# emulator's counters); a failing ncclGetUniqueId or ncclCommInitRank ends every rank with one line;
# tests/test_comm_nccl_emu.cu checks comm_nccl.c's streams and event waits on their own, and its started
# reduce-scatter against the blocking one; the ranks' NCCL issue order is compared through the emulated
# NCCL's logs (MESHSWEEP_EMU_NCCL_LOG); tests/emu/test_dw_accum.c sums the bf16 step's weight gradients
# over 4 micro-batches against the fp32 CPU engine.
source "$(dirname "$0")/lib.sh"
# the emulator builds with g++ on its own, not with the sanitizer build: it runs in the plain suite only
case "$BUILD" in *san*) skip "$(basename "$0" .sh)" "runs in the plain suite (not a sanitizer build)"; exit 0;; esac
command -v g++ >/dev/null || { skip cuda_engine_emu "no g++"; exit 0; }
O="$BUILD/emu-engine"
log="$O/build.log"
# build/train for the emulator (tests/emu/build_train.sh: the kernels t_cuda_emu.sh built, the engine's C
# files with MESHSWEEP_CUDA; reused while no source changed)
bash tests/emu/build_train.sh "$O" || { fail cuda_engine_emu_build "$(head -6 "$log" | tr '\n' ' ')"; exit 1; }
ok cuda_engine_emu_build

# core/engine/comm_nccl.c's streams and events (tests/test_comm_nccl_emu.cu, 2 ranks, one stream per
# communicator): every seeded interleaving right, and a TP collective not held up by a DP prefetch
# (on one shared stream that deadlocks: the timeout fails it); then copies of comm_nccl.c with one
# event wait removed must give wrong results for some seed, or the test could not see a missing wait
NC=(-x c++ -std=c++20 -DMESHSWEEP_CUDA_EMU -DOMPI_SKIP_MPICXX -Wno-unknown-pragmas -D_GNU_SOURCE -O2 -DMESHSWEEP_CUDA
    -I. -Itests/emu/include)
if mpicc "${NC[@]}" -Wall -Wextra -c tests/test_comm_nccl_emu.cu -o "$O/tcn.o" 2>>"$log" \
   && mpicc "$O/tcn.o" "$O/obj/core_engine_comm_nccl.c.o" "$BUILD"/emu-obj/*.o -lstdc++ -lpthread -lm \
        -o "$O/test_comm_nccl_emu" 2>>"$log"; then
  MESHSWEEP_EMU_DEVICES=2 timeout 120 "${MPIRUN[@]}" -np 2 "$O/test_comm_nccl_emu" > "$O/tcn.log" 2>&1
  r=$?
  cat "$O/tcn.log"
  [ "$r" -eq 0 ] || fail comm_nccl_emu "exit $r (124: timed out: a TP collective waited behind a prefetch?): $(tail -2 "$O/tcn.log" | tr '\n' ' ')"
  nccl_mut() { # NAME SED-EXPRESSION [FIELD: wrong (the order scenario), rs_wrong (the reduce-scatter's)]
    sed "$2" core/engine/comm_nccl.c > "$O/mut_$1.c"
    if cmp -s core/engine/comm_nccl.c "$O/mut_$1.c"; then fail "comm_nccl_emu_sees_$1" "the planted bug no longer applies"; return; fi
    mpicc "${NC[@]}" -c "$O/mut_$1.c" -o "$O/mut_$1.o" 2>>"$log" && mpicc "$O/tcn.o" "$O/mut_$1.o" "$BUILD"/emu-obj/*.o \
      -lstdc++ -lpthread -lm -o "$O/tcn_$1" 2>>"$log" || { fail "comm_nccl_emu_sees_$1" "build: $(tail -2 "$log")"; return; }
    local n
    n=$(MESHSWEEP_EMU_DEVICES=2 timeout 120 "${MPIRUN[@]}" -np 2 "$O/tcn_$1" --count-wrong 2>/dev/null | sed -n "s/^${3:-wrong} //p")
    if [ -n "$n" ] && [ "$n" -gt 0 ]; then ok "comm_nccl_emu_sees_$1  ($n of 16 runs wrong)"
    else fail "comm_nccl_emu_sees_$1" "with the wait removed every seeded run was right (${n:-no result})"; fi
  }
  # two communicators on one device, run one collective at a time in issue order (the worst case of
  # NCCL kernels that cannot run side by side): one issue order on every rank finishes and is right;
  # the same program with rank 1 issuing DP before TP must hang (the timeout is the expected outcome)
  MESHSWEEP_EMU_NCCL_SERIAL=1 MESHSWEEP_EMU_DEVICES=2 timeout 120 "${MPIRUN[@]}" -np 2 "$O/test_comm_nccl_emu" --serial \
    > "$O/tcn_serial.log" 2>&1; r=$?
  cat "$O/tcn_serial.log"
  [ "$r" -eq 0 ] || fail comm_nccl_emu_serial "exit $r (124: timed out): $(tail -2 "$O/tcn_serial.log" | tr '\n' ' ')"
  MESHSWEEP_EMU_NCCL_SERIAL=1 MESHSWEEP_EMU_DEVICES=2 timeout 20 "${MPIRUN[@]}" -np 2 "$O/test_comm_nccl_emu" --serial --swap \
    > "$O/tcn_swap.log" 2>&1; r=$?
  if [ "$r" -eq 124 ] && ! grep -q '^ok ' "$O/tcn_swap.log"; then ok comm_nccl_emu_serial_sees_swapped_order
  else fail comm_nccl_emu_serial_sees_swapped_order "exit $r, want a hang (124): $(tail -2 "$O/tcn_swap.log" | tr '\n' ' ')"; fi
  nccl_mut collective_not_waiting_for_compute 's/    CUDA_CHECK(cudaStreamWaitEvent(g->stream, g->ready, 0));//'
  nccl_mut compute_not_waiting_for_collective 's/    CUDA_CHECK(cudaStreamWaitEvent(0, f_, 0)); \\/    \\/'
  nccl_mut compute_not_waiting_for_prefetch 's/    CUDA_CHECK(cudaStreamWaitEvent(0, h->end, 0));//'
  # the started reduce-scatter's input freed in the compute stream's order: a later allocation on the
  # compute stream may be handed its memory while the collective still reads it
  nccl_mut reduce_scatter_input_freed_on_compute_stream 's/    cuda_free_after(send, (void \*)g->stream);//' rs_wrong
  # the issue order as the emulated NCCL logs it (MESHSWEEP_EMU_NCCL_LOG): the same on both ranks when they
  # issue alike, different when rank 1 swaps its TP and DP collectives, or comparing the logs could not fail
  ilog() { # NAME ARGS...: 0 when the two ranks' logs are the same and not empty
    local name=$1; shift
    rm -f "$O/ilog_$name".*
    MESHSWEEP_EMU_NCCL_LOG="$O/ilog_$name" MESHSWEEP_EMU_DEVICES=2 timeout 120 "${MPIRUN[@]}" -np 2 "$O/test_comm_nccl_emu" \
      "$@" > /dev/null 2>&1
    [ -s "$O/ilog_$name.0" ] && cmp -s "$O/ilog_$name.0" "$O/ilog_$name.1"
  }
  if ilog same --count-wrong; then ok "comm_nccl_emu_issue_logs_equal  ($(wc -l < "$O/ilog_same.0") collectives a rank)"
  else fail comm_nccl_emu_issue_logs_equal "the two ranks' logs differ or are empty: $(diff "$O/ilog_same.0" "$O/ilog_same.1" 2>&1 | head -3 | tr '\n' ' ')"; fi
  if ! ilog swap --count-wrong --swap && [ -s "$O/ilog_swap.1" ]; then ok comm_nccl_emu_issue_logs_see_swapped_order
  else fail comm_nccl_emu_issue_logs_see_swapped_order "rank 1 issued DP before TP, yet the logs are the same (or empty)"; fi
else
  fail comm_nccl_emu_build "$(tail -5 "$log")"
fi

T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cat > "$T/m.json" <<'JSON'
{"vocab_size": 250, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
 "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64}
JSON
COMMON=(--model "$T/m.json" --seq-len 16 --steps 2 --grad-clip 0.5 --data "$BUILD/data/kjv/train.bin" --log-every 100)
"$BUILD/train" "${COMMON[@]}" --batch-size 2 --out "$T/cpu.json" 2>"$T/cpu.err" || fail cuda_engine_emu_cpu_ref "$(tail -2 "$T/cpu.err")"
# a driver too old for the runtime (the emulated driver says CUDA 12.4, the runtime is 13.0) is not "no
# device": the run stops and one line names both versions; without a driver (version 0) no such line
MESHSWEEP_EMU_DRIVER_VERSION=12040 timeout 120 "$O/train" "${COMMON[@]}" --backend cuda --batch-size 2 > /dev/null 2> "$T/old.err"; r=$?
if [ "$r" -ne 0 ] && grep -q "^cuda: the NVIDIA driver supports CUDA 12.4, older than this build's CUDA 13.0 runtime" "$T/old.err"; then
  ok cuda_engine_emu_driver_too_old_named
else fail cuda_engine_emu_driver_too_old_named "exit $r: $(head -3 "$T/old.err" | tr '\n' ' ')"; fi
MESHSWEEP_EMU_DRIVER_VERSION=0 timeout 120 "$O/train" "${COMMON[@]}" --backend cuda --batch-size 2 > /dev/null 2> "$T/none.err"; r=$?
if [ "$r" -ne 0 ] && ! grep -q 'older than' "$T/none.err" && grep -q 'no CUDA device or driver' "$T/none.err"; then
  ok cuda_engine_emu_no_driver_is_no_device
else fail cuda_engine_emu_no_driver_is_no_device "exit $r: $(head -3 "$T/none.err" | tr '\n' ' ')"; fi
run() { # NAME NP TP B EXTRA...
  local name=$1 np=$2 tp=$3 b=$4; shift 4
  if timeout 600 "${MPIRUN[@]}" -np "$np" "$O/train" "${COMMON[@]}" --backend cuda --dtype fp32 --tp "$tp" --batch-size "$b" "$@" \
       --out "$T/$name.json" >"$T/$name.log" 2>&1; then
    /usr/bin/python3 tests/tools/compare.py runs "cuda_engine_emu_${name}_losses" "$T/${REF:-cpu}.json" "$T/$name.json" 1e-4 1e-3
    /usr/bin/python3 - "$name" "$T/$name.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[2])); m = r["memory"]
ok = m["planned"]["peak"] == m["peak"] and m["planned"]["by_category"] == m["by_category"] and r["env"]["backend"] == "cuda"
print(f"ok   cuda_engine_emu_{sys.argv[1]}_plan_equals_measured" if ok else
      f"FAIL cuda_engine_emu_{sys.argv[1]}_plan_equals_measured: {m['planned']} vs {m['peak']} {m['by_category']}")
# the pool behind the tracked allocations holds at least their peak
pr = m.get("device_pool_reserved")
print(f"ok   cuda_engine_emu_{sys.argv[1]}_pool_reserved  ({pr} for a tracked peak of {m['peak']})"
      if isinstance(pr, int) and pr >= m["peak"] > 0 else
      f"FAIL cuda_engine_emu_{sys.argv[1]}_pool_reserved: {pr} for a tracked peak of {m['peak']}")
PY
  else
    fail "cuda_engine_emu_$name" "run failed: $(grep -v '^\s*$' "$T/$name.log" | tail -3 | tr '\n' ' ')"
  fi
}
run 1x1 1 1 2
run 1x2_sp 2 2 2
run 2x1_fsdp 2 1 1
# gradient accumulation on device buffers with the unsharded gradient kept over the micro-batches: 2
# micro-batches of 1 per DP rank against the CPU run of batch 4 (the sum so far copied into the
# unsharded gradient, the default: nccl_2x2_accum below)
"$BUILD/train" "${COMMON[@]}" --batch-size 4 --out "$T/cpu4.json" 2>"$T/cpu4.err" || fail cuda_engine_emu_cpu4_ref "$(tail -2 "$T/cpu4.err")"
REF=cpu4 run 2x1_accum_last 2 1 1 --grad-accum 2 --accum-reduce last
# core/engine/comm_nccl.c over the emulated NCCL: one emulated GPU per rank, a different seed per run
# (one layer and T = 8 keep the emulator's time down; the CPU reference is the same small run)
cat > "$T/m1.json" <<'JSON'
{"vocab_size": 250, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
 "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64}
JSON
SMALL=(--model "$T/m1.json" --seq-len 8 --steps 2 --grad-clip 0.5 --data "$BUILD/data/kjv/train.bin" --log-every 100)
"$BUILD/train" "${SMALL[@]}" --batch-size 2 --out "$T/cpu_small.json" 2>"$T/cpu_small.err" || fail cuda_engine_emu_cpu_small_ref "$(tail -2 "$T/cpu_small.err")"
run_nccl() { # NAME NP TP B SEED EXTRA...
  local name=$1 np=$2 tp=$3 b=$4 seed=$5; shift 5
  if MESHSWEEP_EMU_DEVICES=4 MESHSWEEP_EMU_SEED=$seed timeout 600 "${MPIRUN[@]}" -np "$np" "$O/train" "${SMALL[@]}" \
       --backend cuda --dtype fp32 --tp "$tp" --batch-size "$b" --comm nccl "$@" --out "$T/$name.json" >"$T/$name.log" 2>&1; then
    /usr/bin/python3 tests/tools/compare.py runs "cuda_engine_emu_${name}_losses" "$T/${REF:-cpu_small}.json" "$T/$name.json" 1e-4 1e-3
  else
    fail "cuda_engine_emu_$name" "run failed: $(grep -v '^\s*$' "$T/$name.log" | tail -3 | tr '\n' ' ')"
  fi
}
run_nccl nccl_1x2 2 2 2 11
run_nccl nccl_2x1 2 1 1 12
# the gradient's reduce-scatter is started on NCCL (the compute stream goes on with the next unit) and blocking
# over MPI staged through host memory, which sums the same two shards with the same MPI call: the records
# must be equal bit for bit
if MESHSWEEP_EMU_DEVICES=4 timeout 600 "${MPIRUN[@]}" -np 2 "$O/train" "${SMALL[@]}" --backend cuda --dtype fp32 --tp 1 \
     --batch-size 1 --comm mpi --out "$T/mpi_2x1.json" > "$T/mpi_2x1.log" 2>&1; then
  [ -s "$T/nccl_2x1.json" ] && /usr/bin/python3 tests/tools/compare.py runs cuda_engine_emu_nccl_2x1_equals_blocking_mpi \
    "$T/mpi_2x1.json" "$T/nccl_2x1.json" 0 0
else fail cuda_engine_emu_mpi_2x1 "run failed: $(tail -3 "$T/mpi_2x1.log" | tr '\n' ' ')"; fi
# every rank of the 2x2 mesh issues its TP and DP collectives in one order (docs/gpu.md): the emulated
# NCCL's issue logs of the 4 ranks are the same, both communicators and the started reduce-scatter in them
MESHSWEEP_EMU_NCCL_LOG="$T/ilog" run_nccl nccl_2x2 4 2 1 13
if [ -s "$T/ilog.0" ] && cmp -s "$T/ilog.0" "$T/ilog.1" && cmp -s "$T/ilog.0" "$T/ilog.2" && cmp -s "$T/ilog.0" "$T/ilog.3" \
   && grep -q '^0 ' "$T/ilog.0" && grep -q '^1 ncclReduceScatter ' "$T/ilog.0"; then
  ok "cuda_engine_emu_nccl_2x2_one_issue_order  ($(wc -l < "$T/ilog.0") collectives a rank, TP and DP)"
else fail cuda_engine_emu_nccl_2x2_one_issue_order "the ranks' logs differ or lack a communicator: $(wc -l "$T"/ilog.* 2>&1 | tr '\n' ' ')"; fi
# the same 2x2 mesh with every rank's device running one collective at a time in issue order
# (tests/emu/nccl_emu.cuh): the engine issues its TP and DP collectives in one order on every rank,
# so it finishes with the same losses (ranks in different orders would hang here)
MESHSWEEP_EMU_NCCL_SERIAL=1 run_nccl nccl_2x2_serial 4 2 1 15
# accumulation over NCCL with sequence parallel (2x2: 2 micro-batches of 1 per DP rank, global 4)
"$BUILD/train" "${SMALL[@]}" --batch-size 4 --out "$T/cpu_small4.json" 2>"$T/cpu_small4.err" || fail cuda_engine_emu_cpu_small4_ref "$(tail -2 "$T/cpu_small4.err")"
REF=cpu_small4 run_nccl nccl_2x2_accum 4 2 1 14 --grad-accum 2
for n in nccl_1x2 nccl_2x1 nccl_2x2; do
  [ -s "$T/$n.json" ] || continue
  /usr/bin/python3 - "$n" "$T/$n.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[2])); st = r["steps"]; c = r["comm"]
# the all-gathers and reduce-scatters run on NCCL only: their ms come from CUDA events on the NCCL
# stream (here the host time of the emulated collectives, carried by MPI: 10 us and more each since
# the engine waits in MPI_Wait; 12.6 us an all-gather measured with another suite beside it), not from
# the host time of enqueueing them (a microsecond or two each); every step's comm_ms lies within the step
per = lambda k: c[k]["ms"] * 1e3 / max(c[k]["calls"], 1)
ok = (per("all_gather") > 5 and per("reduce_scatter") > 5 and
      all(0 <= s["comm_ms"] <= s["ms"] and s["compute_ms"] >= 0 for s in st))
print(f"ok   cuda_engine_emu_{sys.argv[1]}_comm_ms_from_events" if ok else
      f"FAIL cuda_engine_emu_{sys.argv[1]}_comm_ms_from_events: comm {c}, steps {[(s['ms'], s['comm_ms']) for s in st]}")
PY
done
# NCCL setup failures: rank 0 cannot make the unique id, or one rank's init fails: every rank
# exits non-zero (none hangs: timeout 300), with one error line in all
nccl_fault() { # NAME FAULT NP TP
  local name=$1 fault=$2 np=$3 tp=$4
  MESHSWEEP_EMU_DEVICES=4 MESHSWEEP_EMU_NCCL_FAIL=$fault timeout 300 "${MPIRUN[@]}" -np "$np" "$O/train" "${COMMON[@]}" \
    --backend cuda --dtype fp32 --tp "$tp" --batch-size 1 --comm nccl --out "$T/$name.json" >"$T/$name.log" 2>&1
  local rc=$? lines
  lines=$(grep -c "NCCL" "$T/$name.log")
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$lines" -eq 1 ] && [ ! -e "$T/$name.json" ]; then ok "cuda_engine_emu_$name"
  else fail "cuda_engine_emu_$name" "exit $rc (124: hung), $lines NCCL lines: $(tr '\n' ' ' < "$T/$name.log" | cut -c1-300)"; fi
}
nccl_fault nccl_unique_id_fails unique_id 2 2
nccl_fault nccl_init_fails_on_one_rank init:1 4 2
# after step 1 a step makes no cudaMalloc, cudaFree or device-wide synchronisation: the emulator's
# counts for 3 steps equal those for 1 step (everything else in the run is the same), and so does
# the pool's growth, while the pool allocations grow with the steps. The same
# comparison without the pool (MESHSWEEP_CUDA_POOL=0: cudaMalloc per buffer; 1 and 2 steps) must differ, or the
# comparison could not see per-step allocations.
counts() { # NAME STEPS POOL
  rm -f "$T/st_$1".*
  MESHSWEEP_CUDA_POOL=$3 MESHSWEEP_EMU_DEVICES=4 MESHSWEEP_EMU_STATS="$T/st_$1" timeout 600 "${MPIRUN[@]}" -np 2 "$O/train" \
    --model "$T/m1.json" --seq-len 8 --steps "$2" --data "$BUILD/data/kjv/train.bin" --log-every 100 --backend cuda \
    --dtype fp32 --tp 1 --batch-size 1 --comm nccl --out "$T/$1.json" >"$T/$1.log" 2>&1 \
    || { fail "cuda_engine_emu_counts_$1" "run failed: $(tail -2 "$T/$1.log" | tr '\n' ' ')"; return; }
  # summed over the ranks; pool_grow: the pool reserving more (the device-side counterpart of a cudaMalloc)
  cat "$T/st_$1".* | awk '{s[$1]+=$2} END {printf "cudaMalloc %d cudaFree %d cudaDeviceSynchronize %d pool_grow %d cudaMallocAsync %d memcpy_to_host %d\n",
    s["cudaMalloc"], s["cudaFree"], s["cudaDeviceSynchronize"], s["pool_grow"], s["cudaMallocAsync"], s["memcpy_to_host"]}' > "$T/$1.counts"
}
counts pool1 1 1; counts pool3 3 1; counts nopool1 1 0; counts nopool3 2 0
if [ -s "$T/pool1.counts" ] && [ -s "$T/pool3.counts" ] && [ -s "$T/nopool1.counts" ] && [ -s "$T/nopool3.counts" ]; then
  p1=$(cut -d' ' -f1-8 "$T/pool1.counts"); p3=$(cut -d' ' -f1-8 "$T/pool3.counts")
  a1=$(cut -d' ' -f10 "$T/pool1.counts"); a3=$(cut -d' ' -f10 "$T/pool3.counts")
  if [ "$p1" = "$p3" ] && [ "$a3" -gt "$a1" ]; then ok "cuda_engine_emu_step_makes_no_malloc_free_or_device_sync  ($p3; cudaMallocAsync $a1 -> $a3)"
  else fail cuda_engine_emu_step_makes_no_malloc_free_or_device_sync "1 step: $(cat "$T/pool1.counts"); 3 steps: $(cat "$T/pool3.counts")"; fi
  # the host waits for the device's results twice a step: the per-token losses (one copy after the
  # last loss chunk) and the gradient norm (one sumsq over every segment); 2 ranks, 2 steps more
  h1=$(cut -d' ' -f12 "$T/pool1.counts"); h3=$(cut -d' ' -f12 "$T/pool3.counts")
  if [ -n "$h1" ] && [ -n "$h3" ] && [ $(( h3 - h1 )) -le 8 ] && [ $(( h3 - h1 )) -gt 0 ]; then
    ok "cuda_engine_emu_step_copies_to_host_twice  ($(( (h3 - h1) / 4 )) per step and rank)"
  else fail cuda_engine_emu_step_copies_to_host_twice "device-to-host copies: 1 step $h1, 3 steps $h3 (2 ranks): more than 2 per step and rank"; fi
  if [ "$(cat "$T/nopool1.counts")" != "$(cat "$T/nopool3.counts")" ]; then ok cuda_engine_emu_counts_see_per_step_cudaMalloc
  else fail cuda_engine_emu_counts_see_per_step_cudaMalloc "without the pool 1 and 2 steps counted the same: $(cat "$T/nopool3.counts")"; fi
fi
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
# --deterministic off through the engine to the tensor-core attention (head dim 64: hidden 128, 2 heads,
# 1 KV head; T 24, not a multiple of a tile): dq folded into the dk/dv pass with its larger workspace
# planned and allocated (the plan equals the measured peak); the losses follow the deterministic run's
# (the folded dq differs from it by at most about one bf16 ulp: tests/test_cuda_attention.c)
cat > "$T/m64.json" <<'JSON'
{"vocab_size": 250, "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 1,
 "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 64}
JSON
for d in on off; do
  rm -f "$T/detst_$d".*
  MESHSWEEP_EMU_STATS="$T/detst_$d" timeout 600 "$O/train" --model "$T/m64.json" --seq-len 24 --steps 2 --grad-clip 0.5 --data "$BUILD/data/kjv/train.bin" \
    --log-every 100 --backend cuda --dtype bf16 --batch-size 2 --deterministic $d --out "$T/det_$d.json" >"$T/det_$d.log" 2>&1 \
    || fail "cuda_engine_emu_deterministic_$d" "run failed: $(grep -v '^\s*$' "$T/det_$d.log" | tail -3 | tr '\n' ' ')"
done
[ -f "$T/det_on.json" ] && [ -f "$T/det_off.json" ] && /usr/bin/python3 - "$T/det_on.json" "$T/det_off.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
la, lb = [s["loss"] for s in a["steps"]], [s["loss"] for s in b["steps"]]
worst = max(abs(x - y) / abs(x) for x, y in zip(la, lb)) if la and len(la) == len(lb) else float("inf")
ok = b["config"]["deterministic"] is False and a["config"]["deterministic"] is True and worst <= 1e-3
print(f"ok   cuda_engine_emu_deterministic_off_losses  ({la} vs {lb})" if ok else
      f"FAIL cuda_engine_emu_deterministic_off_losses: {la} vs {lb} (relative {worst:.3g} > 1e-3), config {a['config'].get('deterministic')} {b['config'].get('deterministic')}")
pb = b["memory"]["peak"]
ok = b["memory"]["planned"]["peak"] == pb
print(f"ok   cuda_engine_emu_deterministic_off_plan_is_peak  ({pb} bytes)" if ok else
      f"FAIL cuda_engine_emu_deterministic_off_plan_is_peak: planned {b['memory']['planned']['peak']}, measured {pb}")
# the workspace high-water mark grows by the fp32 dQ: B·T·H·hd·4 = 2·24·2·64·4 bytes (it is at the attention)
wa, wb = a["memory"]["by_category"]["workspace"], b["memory"]["by_category"]["workspace"]
print(f"ok   cuda_engine_emu_deterministic_off_dq_workspace  ({wb} - {wa} bytes)" if wb - wa == 2 * 24 * 2 * 64 * 4 else
      f"FAIL cuda_engine_emu_deterministic_off_dq_workspace: workspace {wb} - {wa} = {wb - wa} bytes, want {2 * 24 * 2 * 64 * 4}")
PY
# which kernels each run launched (the emulator's counts by kernel name): the deterministic backward runs
# the separate dQ kernel, the folded one none of it and adds its fp32 dQ instead, as many times; so the
# flag reached the kernel, which equal losses and the workspace alone could not show
kc() { cat "$T/detst_$1".* 2>/dev/null | awk -v k="launch:$2" '$1 == k {s += $2} END {print s + 0}'; }
dq_on=$(kc on 'attention_backward_dq_tc_kernel<HD>'); dq_off=$(kc off 'attention_backward_dq_tc_kernel<HD>')
add_on=$(kc on attention_dq_add_kernel); add_off=$(kc off attention_dq_add_kernel)
if [ "$dq_on" -gt 0 ] && [ "$add_on" = 0 ] && [ "$dq_off" = 0 ] && [ "$add_off" = "$dq_on" ]; then
  ok "cuda_engine_emu_deterministic_off_reaches_the_kernel  (on: $dq_on dQ kernels; off: $add_off folded dQ adds, no dQ kernel)"
else fail cuda_engine_emu_deterministic_off_reaches_the_kernel "dQ kernel launches on $dq_on / off $dq_off, folded dQ adds on $add_on / off $add_off"; fi
/usr/bin/python3 - "$T/1x1.json" "$T/bf16_1x1.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
fa, fb = a["memory"]["by_category"]["activations"], b["memory"]["by_category"]["activations"]
ok = b["config"]["dtype"] == "bf16" and fb < 0.7 * fa and b["memory"]["planned"]["peak"] == b["memory"]["peak"]
print(f"ok   cuda_engine_emu_bf16_halves_activations  ({fb} vs {fa} bytes)" if ok else
      f"FAIL cuda_engine_emu_bf16_halves_activations: dtype {b['config']['dtype']}, {fb} vs {fa}, plan {b['memory']['planned']['peak']} vs {b['memory']['peak']}")
PY
# the bf16 step's weight gradients over 4 micro-batches (tests/emu/test_dw_accum.c): the fp32 sum within
# its hand bound of the exact sum, a bf16 sum far outside it, both against the fp32 CPU run
if mpicc -std=c11 -D_GNU_SOURCE -O2 -DMESHSWEEP_CUDA -I. -I/usr/include/x86_64-linux-gnu/openblas-pthread -Wall -Wextra \
     tests/emu/test_dw_accum.c "$O"/obj/*.o "$BUILD"/emu-obj/*.o -lopenblas -ljansson -lm -lstdc++ -lpthread \
     -o "$O/test_dw_accum" 2>>"$log"; then
  timeout 300 "$O/test_dw_accum" > "$T/dw.log" 2>&1 || true
  cat "$T/dw.log"
  grep -q '^ok   dw_accum_emu_against_cpu' "$T/dw.log" || fail dw_accum_emu "$(tail -3 "$T/dw.log" | tr '\n' ' ')"
else fail dw_accum_emu_build "$(tail -3 "$log" | tr '\n' ' ')"; fi
