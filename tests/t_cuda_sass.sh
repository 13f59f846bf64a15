#!/usr/bin/env bash
# tests/t_cuda_sass.sh — the tensor-core attention kernels compile to tensor-core instructions: the sm_90
# SASS of each of them (forward, dq, dk/dv at head dims 64 and 128) in the nvcc-built
# kernels/cuda/attention.cu contains HMMA, read with cuobjdump. cuobjdump is not part of every CUDA
# install: it is looked for on PATH, next to nvcc, and in $BUILD/tools (where `make cuda-tools`
# pip-installs the nvidia-cuda-cuobjdump wheel); the check is skipped, with that hint, where none is
# found, and skipped in builds without nvcc. What it is not: a run of the kernels (t_cuda_emu.sh).
source "$(dirname "$0")/lib.sh"
obj="$BUILD/obj/kernels/cuda/attention.o"
[ -f "$obj" ] || { skip cuda_sass_hmma "no nvcc-built $obj (a build without CUDA)"; exit 0; }
cuobjdump=$(command -v cuobjdump 2>/dev/null)
nvcc=$(command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
[ -z "$cuobjdump" ] && [ -n "$nvcc" ] && [ -x "$(dirname "$nvcc")/cuobjdump" ] && cuobjdump="$(dirname "$nvcc")/cuobjdump"
[ -z "$cuobjdump" ] && cuobjdump=$(ls "$BUILD"/tools/py/nvidia/*/bin/cuobjdump 2>/dev/null | head -1)
[ -n "$cuobjdump" ] || { skip cuda_sass_hmma "cuobjdump not found (run \`make cuda-tools\`: pip wheel nvidia-cuda-cuobjdump into $BUILD/tools)"; exit 0; }
sass=$(mktemp)
trap 'rm -f "$sass"' EXIT
"$cuobjdump" -sass -arch sm_90 "$obj" > "$sass" 2>&1 || { fail cuda_sass_hmma "$cuobjdump -sass -arch sm_90 $obj: $(head -3 "$sass")"; exit 1; }
rc=0
for k in attention_forward_tc_kernel attention_backward_dq_tc_kernel attention_backward_dkv_tc_kernel; do
  for hd in 64 128; do
    n=$(awk -v f="${k}ILi${hd}E" '/Function :/ { on = index($0, f) > 0 } on && /HMMA/ { c++ } END { print c + 0 }' "$sass")
    if [ "$n" -gt 0 ]; then ok "cuda_sass_hmma_${k}_hd$hd"; echo "# $k<$hd>: $n HMMA"
    else fail "cuda_sass_hmma_${k}_hd$hd" "no HMMA in the sm_90 SASS of $k<$hd>"; rc=1; fi
  done
done
exit "$rc"
