#!/usr/bin/env bash
# tests/emu/build.sh OUT — the CUDA sources of kernels/cuda/ compiled for the host emulator, once for
# both emulator suites (t_cuda_emu.sh, t_cuda_engine_emu.sh): OUT/cu_NAME.o for each kernels/cuda/NAME.cu,
# as C++20 against tests/emu/ (a fiber per CUDA thread). The files compile in parallel, one per
# core; OUT/stamp holds a hash of the flags and of every source and header they can include, and a
# second call with the same hash reuses the objects. Exit 1 with the compiler's first lines on
# OUT/build.log when a file does not compile.
set -u
O=$1
mkdir -p "$O"
FLAGS=(-std=c++20 -O2 -x c++ -DMESHSWEEP_CUDA -DMESHSWEEP_CUDA_EMU -I. -Itests/emu/include -Wall -Wextra -Wno-unknown-pragmas)
stamp=$( { echo "${FLAGS[*]}"; g++ --version | head -1; cat kernels/*.h kernels/cuda/* tests/emu/*.cuh tests/emu/include/*; } | sha1sum | cut -d' ' -f1)
if [ -f "$O/stamp" ] && [ "$(cat "$O/stamp")" = "$stamp" ]; then exit 0; fi
rm -f "$O"/*.o "$O"/*.err "$O/stamp" # objects of .cu files that no longer exist must not be linked
: > "$O/build.log"
export O
ls kernels/cuda/[a-z]*.cu | xargs -P "$(nproc)" -I{} sh -c \
  'f={}; n=$(basename "$f" .cu); g++ "$@" -c "$f" -o "$O/cu_$n.o" 2>"$O/$n.err" || { echo "$f:"; head -5 "$O/$n.err"; exit 255; }' \
  sh "${FLAGS[@]}" >> "$O/build.log" 2>&1
rc=$?
[ "$rc" -eq 0 ] || exit 1
echo "$stamp" > "$O/stamp"
