#!/usr/bin/env bash
# tests/t_cuda_sass.sh — the tensor-core attention kernels compile to the instructions they are written
# for, read from the nvcc-built kernels/cuda/attention_fwd.o and attention_bwd.o with cuobjdump:
#   - in the sm_90 SASS of each of forward, dq, dk/dv and dk/dv with the folded dq (--deterministic off)
#     at head dims 64 and 128: HMMA (mma.sync), LDGSTS (cp.async tile loads), LDSM (ldmatrix) and LDSM
#     .MT88 (ldmatrix .trans, the transposed operands: V in forward, K in dq, dO and Q in dk/dv, K in
#     the folded dq), MUFU.EX2 (ex2.approx); fp32 reductions to global memory (RED.ADD.F32, atomicAdd)
#     in the folded dk/dv kernel and none in the deterministic kernels; in the main loop of dk/dv at hd 64
#     only the plain ldmatrix of Q and dO (K and V stay in registers), at 128 those of K and V too;
#   - no local memory in any function of either object, sm_80 and sm_90 (cuobjdump -res-usage:
#     STACK:0 and LOCAL:0, i.e. no register spills), with the registers each kernel uses printed.
#   - 16-byte global loads or stores (LDG/STG.E.128) in the step's element-wise bf16 kernels (add,
#     SwiGLU forward and backward, the fused AdamW, the fp32 -> bf16 conversion).
# cuobjdump is not part of every CUDA install: it is looked for on PATH, next to nvcc, and in $BUILD/tools
# (where `make cuda-tools` pip-installs the nvidia-cuda-cuobjdump wheel); the check is skipped, with
# that hint, where none is found, and skipped in builds without nvcc. What it is not: a run of the
# kernels (t_cuda_emu.sh) or a measure of their speed (bench/gpu_bench.sh).
source "$(dirname "$0")/lib.sh"
objs="$BUILD/obj/kernels/cuda/attention_fwd.o $BUILD/obj/kernels/cuda/attention_bwd.o"
for o in $objs; do
  [ -f "$o" ] || { skip cuda_sass "no nvcc-built $o (a build without CUDA)"; exit 0; }
done
cuobjdump=$(command -v cuobjdump 2>/dev/null)
nvcc=$(command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
[ -z "$cuobjdump" ] && [ -n "$nvcc" ] && [ -x "$(dirname "$nvcc")/cuobjdump" ] && cuobjdump="$(dirname "$nvcc")/cuobjdump"
[ -z "$cuobjdump" ] && cuobjdump=$(ls "$BUILD"/tools/py/nvidia/*/bin/cuobjdump 2>/dev/null | head -1)
[ -n "$cuobjdump" ] || { skip cuda_sass "cuobjdump not found (run \`make cuda-tools\`: pip wheel nvidia-cuda-cuobjdump into $BUILD/tools)"; exit 0; }
sass=$(mktemp); res=$(mktemp)
trap 'rm -f "$sass" "$res"' EXIT
rc=0
for o in $objs; do
  "$cuobjdump" -sass -arch sm_90 "$o" >> "$sass" 2>&1 || { fail cuda_sass_read "$cuobjdump -sass -arch sm_90 $o: $(head -3 "$sass")"; exit 1; }
done
# count of instructions matching pattern $2 in the SASS of the function whose name contains $1
count() { awk -v f="$1" -v p="$2" '/Function :/ { on = index($0, f) > 0 } on && $0 ~ p { c++ } END { print c + 0 }' "$sass"; }
# kernel name, template arguments after the head dim (the dk/dv kernel's DQ: false, true), test name
for kt in attention_forward_tc_kernel::attention_forward_tc_kernel \
          attention_backward_dq_tc_kernel::attention_backward_dq_tc_kernel \
          attention_backward_dkv_tc_kernel:Lb0E:attention_backward_dkv_tc_kernel \
          attention_backward_dkv_tc_kernel:Lb1E:attention_backward_dkv_fold_dq_tc_kernel; do
  IFS=: read -r k targ tn <<< "$kt"
  for hd in 64 128; do
    f="${k}ILi${hd}E$targ"
    line="# $tn<$hd>:"
    for ins in HMMA LDGSTS LDSM LDSM_T EX2 RED; do
      case $ins in
        HMMA) p='HMMA'; what='mma.sync';; LDGSTS) p='LDGSTS'; what='cp.async';; LDSM) p='LDSM\.16\.M88'; what='ldmatrix';;
        LDSM_T) p='LDSM\.16\.MT88'; what='ldmatrix .trans';; EX2) p='MUFU\.EX2'; what='ex2.approx';;
        RED) p='(RED|ATOM)G?\.E\.ADD\.F32'; what='atomicAdd of fp32';;
      esac
      n=$(count "$f" "$p")
      line="$line $n $ins"
      name="cuda_sass_$(echo "$ins" | tr 'A-Z' 'a-z')_${tn}_hd$hd"
      # only the folded dq sums by atomics: the deterministic kernels must have none
      if [ "$ins" = RED ] && [ "$targ" != Lb1E ]; then
        if [ "$n" -eq 0 ]; then ok "cuda_sass_no_atomics_${tn}_hd$hd"
        else fail "cuda_sass_no_atomics_${tn}_hd$hd" "$n fp32 atomics in the deterministic $k<$hd>"; rc=1; fi
      elif [ "$n" -gt 0 ]; then ok "$name"
      else fail "$name" "no $p ($what) in the sm_90 SASS of $tn<$hd>"; rc=1; fi
    done
    echo "$line"
  done
done
# K and V fragments in registers (dk/dv at hd 64): the kernel's main loop (its longest backward branch)
# reads only Q and dO from shared memory by plain ldmatrix: 4 k-steps x 4 pairs of query n-tiles x 2 = 32
# LDSM.M88 per query tile and warp, where reading K and V there too made it 40. At hd 128 they stay in
# shared memory (in registers the kernel would spill): 8 x 2 x 2 + 2 x 8 = 48.
loop_ldsm() { # FUNCTION-NAME-PART [PATTERN]: instructions matching PATTERN (LDSM.M88) inside the largest
               # span of a backward branch
  /usr/bin/python3 - "$sass" "$1" "${2:-LDSM\.16\.M88}" <<'PY'
import re, sys
ins, on = [], False
for line in open(sys.argv[1]):
    if "Function :" in line: on = sys.argv[2] in line; continue
    m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s*(.*?);", line)
    if on and m: ins.append((int(m.group(1), 16), m.group(2)))
loops = [(int(m.group(1), 16), a) for a, t in ins for m in [re.search(r"BRA\s+(0x[0-9a-f]+)", t)] if m and int(m.group(1), 16) < a]
if not loops: print(-1); sys.exit()
s, e = max(loops, key=lambda x: x[1] - x[0])
print(sum(1 for a, t in ins if s <= a <= e and re.search(sys.argv[3], t)))
PY
}
for hd in 64 128; do
  want=$([ "$hd" = 64 ] && echo 32 || echo 48)
  n=$(loop_ldsm "attention_backward_dkv_tc_kernelILi${hd}ELb0E")
  echo "# attention_backward_dkv_tc_kernel<$hd>: $n LDSM.M88 in the main loop (want $want)"
  if [ "$n" = "$want" ]; then ok "cuda_sass_dkv_loop_ldsm_hd$hd"
  else fail "cuda_sass_dkv_loop_ldsm_hd$hd" "$n plain ldmatrix in the main loop of dk/dv<$hd>, want $want"; rc=1; fi
done
# the forward at hd 64 past one tile: 128-row blocks, 32 rows a warp (two m-tiles). Per key tile a warp
# reads K (4 k-steps x 4 n-pairs = 16 LDSM.M88) and V (4 x 4 = 16 LDSM.MT88) once for both m-tiles:
# 2 x 64 HMMA for S and O, 4 HMMA per ldmatrix, where the 16-row kernel <64, 1> does 64 HMMA on the
# same 32 ldmatrix (2 per ldmatrix): half the shared-memory reads a row.
for mt in 1 2; do
  f="attention_forward_tc_kernelILi64ELi${mt}E"
  a=$(loop_ldsm "$f" 'LDSM\.16\.M88'); b=$(loop_ldsm "$f" 'LDSM\.16\.MT88'); c=$(loop_ldsm "$f" 'HMMA')
  echo "# attention_forward_tc_kernel<64, $mt>: main loop $a LDSM.M88, $b LDSM.MT88, $c HMMA (want 16, 16, $((64 * mt)))"
  if [ "$a" = 16 ] && [ "$b" = 16 ] && [ "$c" = $((64 * mt)) ]; then ok "cuda_sass_forward_loop_rows_per_warp_$((16 * mt))"
  else fail "cuda_sass_forward_loop_rows_per_warp_$((16 * mt))" "main loop of forward<64, $mt>: $a LDSM.M88, $b LDSM.MT88, $c HMMA, want 16, 16, $((64 * mt))"; rc=1; fi
done
# the element-wise bf16 kernels of the step take 16-byte accesses (8 bf16, or 4 fp32, at a time)
ew=$(mktemp); trap 'rm -f "$sass" "$res" "$ew"' EXIT
for o in "$BUILD/obj/kernels/cuda/ops_cuda.o" "$BUILD/obj/kernels/cuda/matmul.o"; do
  [ -f "$o" ] && "$cuobjdump" -sass -arch sm_90 "$o" >> "$ew" 2>&1
done
for k in add_kernelI5bf16s swiglu_forward_kernelI5bf16s swiglu_backward_kernelI5bf16s adamw_fused_kernelI5bf16s \
         f32_to_bf16_kernel; do
  n=$(awk -v f="$k" '/Function :/ { on = index($0, f) > 0 } on && /(LDG|STG)\.E\.128/ { c++ } END { print c + 0 }' "$ew")
  echo "# $k: $n 16-byte global accesses"
  if [ "$n" -gt 0 ]; then ok "cuda_sass_16byte_${k%%I5bf16s}"
  else fail "cuda_sass_16byte_${k%%I5bf16s}" "no LDG.E.128 / STG.E.128 in the sm_90 SASS of $k"; rc=1; fi
done
for o in $objs; do
  for a in 80 90; do
    : > "$res"
    "$cuobjdump" -res-usage -arch "sm_$a" "$o" > "$res" 2>&1 || { fail "cuda_sass_res_usage" "$cuobjdump -res-usage $o: $(head -3 "$res")"; rc=1; continue; }
    # "Function NAME:" then "REG:n STACK:n SHARED:n LOCAL:n ...": each printed; offenders have stack or local memory
    awk -v a="$a" '/Function / { f = $2 } /REG:/ { for (i = 1; i <= NF; i++) { split($i, kv, ":"); v[kv[1]] = kv[2] }
        printf "# sm_%s %s REG %s STACK %s LOCAL %s\n", a, f, v["REG"], v["STACK"], v["LOCAL"] }' "$res"
    bad=$(awk '/Function / { f = $2 } /REG:/ { for (i = 1; i <= NF; i++) { split($i, kv, ":"); v[kv[1]] = kv[2] }
        n++; if (v["STACK"] != 0 || v["LOCAL"] != 0) printf "%s ", f } END { if (!n) print "no functions listed" }' "$res")
    name="cuda_sass_no_spills_$(basename "$o" .o)_sm$a"
    if [ -z "$bad" ]; then ok "$name"; else fail "$name" "local memory (spills) in: $bad"; rc=1; fi
  done
done
exit "$rc"
