#!/usr/bin/env bash
# tests/t_cuda_emu.sh — the CUDA kernels of kernels/cuda/ *executed* without a GPU: the .cu files are
# compiled as C++20 against tests/emu/cuda_emu.cuh (a fiber per CUDA thread in a seeded order, real block
# barriers and warp shuffles, cuBLAS as checked column-major loops) and tests/test_cuda_kernels
# (ops_cuda, fp32) and tests/test_cuda_bf16 (ops_cuda_bf16) compare every op with the CPU reference;
# tests/test_cuda_attention checks the emulated mma layout and the tensor-core attention.
# tests/test_cuda_emu_streams checks the emulator's asynchronous model itself (queues run lazily in
# a seeded order, so a missing event wait or a premature stream-ordered free is caught here), and
# tests/test_cuda_emu_ptx its cp.async, ldmatrix and ex2.approx (a missing wait_group or a wrong
# fragment layout must fail there).
# This checks indexing, masking, rounding and synchronisation logic; it says nothing about speed or
# about the real CUDA toolchain (the nvcc build of `make` covers compilation). Skipped when no C++20
# compiler is found.
source "$(dirname "$0")/lib.sh"
# the emulator builds with g++ on its own, not with the sanitizer build: it runs in the plain suite only
case "$BUILD" in *san*) skip "$(basename "$0" .sh)" "runs in the plain suite (not a sanitizer build)"; exit 0;; esac
command -v g++ >/dev/null || { skip cuda_emu "no g++"; exit 0; }
O="$BUILD/emu"; mkdir -p "$O"
# the kernels for the emulator, shared with t_cuda_engine_emu.sh (built once, in parallel)
OBJ="$BUILD/emu-obj"
bash tests/emu/build.sh "$OBJ" || { fail cuda_emu_build "$(head -6 "$OBJ/build.log" | tr '\n' ' ')"; exit 1; }
rc=0
# the emulator's own models: lazy seeded streams, events, pool, premature-free reports
# (test_cuda_emu_streams), cp.async / ldmatrix / ex2.approx (test_cuda_emu_ptx); their bug variants
# make the emulator print its reports on stderr: expected, hence 2>/dev/null
for t in test_cuda_emu_streams test_cuda_emu_ptx; do
  if g++ -std=c++20 -O1 -x c++ -DMESHSWEEP_CUDA -DMESHSWEEP_CUDA_EMU -I. -Itests/emu/include -Wall -Wextra \
       -Wno-unknown-pragmas "tests/$t.cu" -lpthread -o "$O/$t" 2>"$O/build.log"; then
    timeout 300 "$O/$t" 2>/dev/null
    r=$?
    [ "$r" -eq 0 ] || { [ "$r" -ne 1 ] && fail "${t#test_}" "exit status $r"; rc=1; }
  else
    fail "cuda_emu_build_${t#test_cuda_}" "$(head -5 "$O/build.log")"; rc=1
  fi
done
for t in test_cuda_kernels test_cuda_bf16 test_cuda_attention; do
  gcc -std=c11 -D_GNU_SOURCE -O2 -I. -I/usr/include/x86_64-linux-gnu/openblas-pthread -DMESHSWEEP_CUDA \
      "tests/$t.c" kernels/cpu/ops_cpu.c "$OBJ"/*.o -lopenblas -lm -lstdc++ -lpthread -o "$O/${t}_emu" 2>"$O/build.log" \
    || { fail "cuda_emu_build_$t" "$(head -5 "$O/build.log")"; rc=1; continue; }
  timeout 900 "$O/${t}_emu" | sed -e 's/^ok   /ok   emu_/' -e 's/^FAIL /FAIL emu_/'
  r=${PIPESTATUS[0]}
  # 1: some check printed FAIL; anything else (timeout 124, a crash) gets its own line
  [ "$r" -eq 0 ] || { [ "$r" -ne 1 ] && fail "cuda_emu_$t" "exit status $r (124: timed out after 900 s)"; rc=1; }
done
# bench/gpu_bench.c at toy shapes (--small) on the emulated kernels: the benchmark the GPU check runs
# must work end to end (every timed op, the attention sweep, the fused AdamW, both MFU conventions,
# the table and the JSON); its emulated times mean nothing.
# (the engine files it uses are built without MESHSWEEP_CUDA: they need no CUDA, and comm.c would want NCCL)
mkdir -p "$O/bench"
: > "$O/build.log"
benchok=1
for src in core/formats/config.c core/job/metrics.c core/job/catalog.c core/common/files.c core/common/parse.c core/common/cleanup.c \
           core/common/errmsg.c core/engine/comm.c core/engine/comm_nccl.c core/engine/mem.c kernels/cpu/null.c; do
  mpicc -std=c11 -D_GNU_SOURCE -O2 -I. -c "$src" -o "$O/bench/$(basename "$src" .c).o" 2>>"$O/build.log" || { benchok=0; break; }
done
[ "$benchok" = 1 ] \
  && mpicc -std=c11 -D_GNU_SOURCE -O2 -I. -I/usr/include/x86_64-linux-gnu/openblas-pthread -DMESHSWEEP_CUDA \
    bench/gpu_bench.c kernels/cpu/ops_cpu.c "$OBJ"/*.o "$O"/bench/*.o \
    -ljansson -lopenblas -lm -lstdc++ -lpthread -o "$O/gpu_bench_emu" 2>>"$O/build.log" \
  && { timeout 900 "$O/gpu_bench_emu" --small --json "$O/gpu_bench.json" > "$O/gpu_bench.txt" 2>&1; r=$?; true; } \
  || { fail cuda_emu_gpu_bench_build "$(head -5 "$O/build.log")"; rc=1; r=-1; }
if [ "$r" -ge 0 ]; then
  rows=$(grep -c '^  ' "$O/gpu_bench.txt")
  if [ "$r" -eq 0 ] && [ "$rows" -ge 30 ] && grep -q '^# kernel-sum step' "$O/gpu_bench.txt" \
     && [ "$(grep -c '"name": ' "$O/gpu_bench.json")" -ge 25 ] && grep -q '"kernel_sum_ms": [0-9]' "$O/gpu_bench.json" \
     && grep -q '"name": "attention sweep backward hd128' "$O/gpu_bench.json" \
     && grep -q '"name": "attention sweep backward dQ folded hd128' "$O/gpu_bench.json" \
     && grep -q '"name": "attention backward, dQ folded (--deterministic off)' "$O/gpu_bench.json" \
     && grep -q '"name": "adamw fused' "$O/gpu_bench.json" && grep -q '"mfu_causal_gemm_peak": ' "$O/gpu_bench.json"; then
    ok cuda_emu_gpu_bench_small
  else
    fail cuda_emu_gpu_bench_small "exit $r, $rows table rows: $(tail -3 "$O/gpu_bench.txt" | tr '\n' ' ')"; rc=1
  fi
fi
# the versions line (gpu_bench --versions, the GPU kit's first line): the emulated driver's CUDA
# version (MESHSWEEP_EMU_DRIVER_VERSION) against the runtime's 13.0: as new (a device, exit 0), older
# (exit 3, the line names both versions: a driver too old is not "no device"), none (exit 1)
if [ "$r" -ge 0 ]; then
  vcheck() { # NAME DRIVER WANT_EXIT PATTERN
    local out rv
    out=$(MESHSWEEP_EMU_DRIVER_VERSION=$2 timeout 60 "$O/gpu_bench_emu" --versions 2>&1); rv=$?
    if [ "$rv" -eq "$3" ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] && printf '%s' "$out" | grep -qE "$4"; then ok "cuda_emu_versions_$1"
    else fail "cuda_emu_versions_$1" "exit $rv (want $3): $out"; rc=1; fi
  }
  vcheck driver_current 13000 0 '^driver CUDA 13\.0, runtime CUDA 13\.0, cuBLAS 13\.0\.0, NCCL [^:]*$'
  vcheck driver_too_old 12040 3 "^driver CUDA 12\.4, runtime CUDA 13\.0, cuBLAS 13\.0\.0, NCCL .*: the NVIDIA driver supports CUDA 12\.4, older than this build's CUDA 13\.0 runtime"
  vcheck no_driver 0 1 '^driver CUDA none, runtime CUDA 13\.0, .*: no NVIDIA driver'
fi
# the block's threads run in a seeded order from barrier to barrier (tests/emu/cuda_emu_threads.cuh), so
# a missing __syncthreads must give wrong results: attention_scalar.cu without the barrier that keeps
# the next tile's loads off the tile still being read must fail some check of test_cuda_kernels
M="$O/mut"; mkdir -p "$M"
sed 's|__syncthreads(); /\* the previous tile is consumed (and qs is written) \*/|/* barrier removed */|' kernels/cuda/attention_scalar.cu > "$M/attention_scalar.cu"
if cmp -s kernels/cuda/attention_scalar.cu "$M/attention_scalar.cu"; then fail cuda_emu_sees_missing_syncthreads "the planted bug no longer applies"; rc=1
elif g++ -std=c++20 -O2 -x c++ -DMESHSWEEP_CUDA -DMESHSWEEP_CUDA_EMU -I. -Ikernels/cuda -Itests/emu/include -Wno-unknown-pragmas \
       -c "$M/attention_scalar.cu" -o "$M/cu_attention_scalar.o" 2>"$M/build.log" \
     && gcc -std=c11 -D_GNU_SOURCE -O2 -I. -I/usr/include/x86_64-linux-gnu/openblas-pthread -DMESHSWEEP_CUDA tests/test_cuda_kernels.c \
       kernels/cpu/ops_cpu.c $(ls "$OBJ"/*.o | grep -v '/cu_attention_scalar.o$') "$M/cu_attention_scalar.o" -lopenblas -lm -lstdc++ -lpthread \
       -o "$M/test_cuda_kernels_mut" 2>>"$M/build.log"; then
  n=$(env -u MESHSWEEP_TEST_RESULTS timeout 900 "$M/test_cuda_kernels_mut" 2>/dev/null | grep -c '^FAIL ')
  if [ "$n" -gt 0 ]; then ok "cuda_emu_sees_missing_syncthreads  ($n checks fail without the barrier)"
  else fail cuda_emu_sees_missing_syncthreads "every check passed with a __syncthreads removed"; rc=1; fi
else fail cuda_emu_sees_missing_syncthreads "build: $(head -3 "$M/build.log" | tr '\n' ' ')"; rc=1; fi
# a __syncthreads that part of the block returned before is reported and aborts, not a hang
cat > "$M/deadlock.cu" <<'CU'
#include "kernels/cuda/cuda_common.cuh"
__global__ void early_return(float *x) { if (threadIdx.x < 16) return; __syncthreads(); x[threadIdx.x] = 1; }
int main() { float *d; cudaMalloc((void **)&d, 256); LAUNCH(early_return, dim3(1), dim3(64), 0, d); cudaDeviceSynchronize(); return 0; }
CU
if g++ -std=c++20 -O1 -x c++ -DMESHSWEEP_CUDA -DMESHSWEEP_CUDA_EMU -I. -Itests/emu/include -Wno-unknown-pragmas "$M/deadlock.cu" \
     -lpthread -o "$M/deadlock" 2>"$M/build.log"; then
  timeout 60 "$M/deadlock" 2>"$M/deadlock.err"; r=$?
  if [ "$r" -ne 0 ] && [ "$r" -ne 124 ] && grep -q '^emu: deadlock in a block of early_return' "$M/deadlock.err"; then ok cuda_emu_partial_barrier_reported
  else fail cuda_emu_partial_barrier_reported "exit $r (124: hung): $(head -2 "$M/deadlock.err" | tr '\n' ' ')"; rc=1; fi
else fail cuda_emu_partial_barrier_reported "build: $(head -3 "$M/build.log" | tr '\n' ' ')"; rc=1; fi
exit "$rc"
