#!/usr/bin/env bash
# tests/t_cuda_emu.sh — the CUDA kernels of kernels/cuda/ *executed* without a GPU: the .cu files are
# compiled as C++20 against kernels/cuda/cuda_emu.cuh (one host thread per CUDA thread, real block
# barriers and warp shuffles, cuBLAS as checked column-major loops) and tests/test_cuda_kernels
# compares every op with the CPU reference. This checks indexing, masking and synchronisation
# logic; it says nothing about speed or about the real CUDA toolchain (the nvcc build of `make`
# covers compilation). Skipped when no C++20 compiler is found.
source "$(dirname "$0")/lib.sh"
command -v g++ >/dev/null || { skip cuda_emu "no g++"; exit 0; }
O="$BUILD/emu"; mkdir -p "$O"
for f in kernels/cuda/[a-z]*.cu; do
  g++ -std=c++20 -O1 -x c++ -DMESHSWEEP_CUDA -DMESHSWEEP_CUDA_EMU -I. -Wall -Wextra -Wno-unknown-pragmas \
      -c "$f" -o "$O/$(basename "$f" .cu).o" 2>"$O/build.log" || { fail cuda_emu_build "$f: $(head -5 "$O/build.log")"; exit 1; }
done
gcc -std=c11 -D_GNU_SOURCE -O2 -I. -I/usr/include/x86_64-linux-gnu/openblas-pthread -DMESHSWEEP_CUDA \
    tests/test_cuda_kernels.c kernels/cpu/ops_cpu.c "$O"/*.o -lopenblas -lm -lstdc++ -lpthread -o "$O/test_cuda_emu" 2>"$O/build.log" \
  || { fail cuda_emu_build "$(head -5 "$O/build.log")"; exit 1; }
timeout 900 "$O/test_cuda_emu" | sed -e 's/^ok   /ok   emu_/' -e 's/^FAIL /FAIL emu_/'
exit "${PIPESTATUS[0]}"
