#!/usr/bin/env bash
# tests/emu/build_train.sh OUT — build/train on the CUDA backend for the host emulator, as OUT/train, for
# the suites that run the engine without a GPU (t_cuda_engine_emu.sh, t_mem_auto.sh): the kernels from
# tests/emu/build.sh (BUILD/emu-obj), the engine's C files with MESHSWEEP_CUDA, one per core at a time
# (core/engine/comm_nccl.c as C++ against the emulated CUDA runtime and NCCL, tests/emu/nccl_emu.cuh),
# objects kept in OUT/obj. OUT/stamp holds a hash of the flags and of every source and header, and a
# second call with the same hash reuses the build. Exit 1 with the compiler's first lines on
# OUT/build.log when something does not compile or link.
set -u
O=$1
BUILD=${BUILD:-build}
OBJ="$BUILD/emu-obj"
BLAS_INC=/usr/include/x86_64-linux-gnu/openblas-pthread
mkdir -p "$O/obj"
bash tests/emu/build.sh "$OBJ" || { head -6 "$OBJ/build.log" > "$O/build.log"; exit 1; }
C=(-std=c11 -D_GNU_SOURCE -O2 -DMESHSWEEP_CUDA -I. -I$BLAS_INC)
NC=(-x c++ -std=c++20 -DMESHSWEEP_CUDA_EMU -Itests/emu/include -DOMPI_SKIP_MPICXX -Wall -Wextra -Wno-unknown-pragmas)
stamp=$( { echo "${C[*]} ${NC[*]}"; mpicc --version | head -1; cat "$OBJ/stamp" core/*/*.[ch] kernels/*.h kernels/cpu/* \
           bench/train.c tests/emu/*.cuh tests/emu/include/*; } | sha1sum | cut -d' ' -f1)
if [ -f "$O/stamp" ] && [ "$(cat "$O/stamp")" = "$stamp" ] && [ -x "$O/train" ]; then exit 0; fi
rm -f "$O"/obj/*.o "$O"/obj/*.err "$O/stamp" "$O/train"   # objects of files that no longer exist must not be linked
: > "$O/build.log"
compile() { # FILE
  local o lang=()
  [ "$1" = core/engine/comm_nccl.c ] && lang=("${NC[@]}")
  o="$O/obj/$(echo "$1" | tr / _)"
  mpicc "${C[@]}" "${lang[@]}" -c "$1" -o "$o.o" 2>"$o.log" || { echo "$1:" > "$o.err"; head -5 "$o.log" >> "$o.err"; }
}
for f in core/*/*.c kernels/cpu/*.c; do
  compile "$f" &
  while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n; done
done
wait
cat "$O"/obj/*.log >> "$O/build.log" 2>/dev/null
if ls "$O"/obj/*.err >/dev/null 2>&1; then cat "$O"/obj/*.err > "$O/build.log"; exit 1; fi
mpicc "${C[@]}" bench/train.c "$O"/obj/*.o "$OBJ"/*.o -lopenblas -ljansson -lm -lstdc++ -lpthread -o "$O/train" 2>>"$O/build.log" || exit 1
echo "$stamp" > "$O/stamp"
