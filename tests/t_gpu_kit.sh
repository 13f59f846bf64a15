#!/usr/bin/env bash
# tests/t_gpu_kit.sh — `make gpu-kit` makes a kit that runs on a machine without the packages.
#
# What it proves: after unpacking the kit into a temporary prefix, the carried binaries, the carried
# mpirun/orted and every ELF file of the kit's packages (Open MPI's and PMIx's plugins included)
# resolve every library inside the prefix (or CUDA, or libc/libstdc++/libgcc, which the kit
# deliberately leaves to the machine), and build/train trains 2 steps on 1 rank and on 2 ranks
# through the carried mpirun (CPU backend); run.sh's first line is the versions line, and a driver
# too old for the kit's runtime (a gpu_bench that says so) stops it there. To make "inside the prefix" a fact rather than a reading
# of ldd's output, everything runs in a private mount namespace (`unshare -m`) in which every file of
# the kit's packages installed on this machine (/usr/lib/.../libmpi.so.40, Open MPI's plugins and
# help files, /usr/bin/orterun, libopenblas, libjansson, ...) has /dev/null bound over it: a lookup
# that fell through to the system copy would fail ("file too short"), and a relocated mpirun that
# looked for plugins or help files under /usr would find none. What it does not prove: that the
# device's own CUDA libraries are found (this machine's /usr/local/cuda is), nor anything on a GPU.
# Skipped without CUDA in the build, without dpkg/apt-get, or where mount namespaces are not allowed.
source "$(dirname "$0")/lib.sh"
case "$BUILD" in *san*) skip gpu_kit "runs in the plain suite (not a sanitizer build)"; exit 0;; esac
command -v apt-get >/dev/null && command -v dpkg >/dev/null || { skip gpu_kit "no apt-get/dpkg"; exit 0; }
readelf -d "$BUILD/train" 2>/dev/null | grep -q libcudart || { skip gpu_kit "no CUDA in this build (nvcc not found)"; exit 0; }
[ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null || { skip gpu_kit "no mount namespace (needs root and unshare -m)"; exit 0; }

T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
KIT=$BUILD/gpu-kit
if make --no-print-directory BUILD="$BUILD" gpu-kit > "$T/make.log" 2>&1; then ok gpu_kit_make
else fail gpu_kit_make "$(tail -n 3 "$T/make.log" | tr '\n' ' ')"; exit 1; fi
bytes=$(du -sb "$KIT" | cut -f1)
check gpu_kit_at_most_48MiB [ "$bytes" -le $((48 * 1024 * 1024)) ]
check gpu_kit_carries_gpu_bench_sh [ -f "$KIT/tree/bench/gpu_bench.sh" ]
for b in train gpu_bench tests/test_cuda_kernels tests/test_cuda_bf16 tests/test_cuda_attention; do
  check "gpu_kit_carries_$(basename "$b")_with_compute_90_ptx" grep -aq '\.target sm_90' "$KIT/tree/build/$b"
done
# the list is derived: every package of it owns a file (and the closure has MPI, OpenBLAS, jansson)
for p in openmpi-bin libopenmpi3 libopenblas0-pthread libjansson4 libpmix2 libhwloc15 libgfortran5; do
  check "gpu_kit_list_has_$p" grep -q "^$p=" "$KIT/debs/LIST"
done
n_debs=$(ls "$KIT"/debs/*.deb | wc -l)
check gpu_kit_one_deb_per_package [ "$n_debs" -eq "$(grep -c = "$KIT/debs/LIST")" ]

check gpu_kit_records_glibc_min grep -qE '^2\.[0-9]+$' "$KIT/glibc-min"
# a machine with an older glibc gets one clear line before anything is unpacked
cp -r "$KIT" "$T/oldkit" && echo 9.99 > "$T/oldkit/glibc-min"
KIT_PREFIX=$T/never bash "$T/oldkit/run.sh" "$T/oldcheck" > "$T/old.log" 2>&1; rc=$?
if [ "$rc" -eq 1 ] && grep -q 'older than the 9.99' "$T/old.log" && [ ! -e "$T/never" ]; then ok gpu_kit_refuses_older_glibc
else fail gpu_kit_refuses_older_glibc "exit $rc: $(head -c 300 "$T/old.log")"; fi
rm -rf "$T/oldkit"

# files to hide: every regular file the kit's packages installed here (docs aside)
: > "$T/hide"
while IFS='=' read -r p _; do
  dpkg -L "$p" 2>/dev/null | while read -r f; do
    case "$f" in /usr/share/doc/*|/usr/share/man/*|/usr/share/lintian/*) continue;; esac
    [ -f "$f" ] && [ ! -L "$f" ] && echo "$f"
  done >> "$T/hide"
done < "$KIT/debs/LIST"
# what may resolve outside the prefix: CUDA, and the libraries of libc6, libstdc++6, libgcc-s1
dpkg -L libc6 libstdc++6 libgcc-s1 2>/dev/null | grep '\.so' | while read -r f; do realpath -m "$f"; done | sort -u > "$T/allowed"
check gpu_kit_hides_system_copies [ "$(grep -c 'libmpi.so.40\|libopenblasp\|libjansson.so.4\|/orterun$' "$T/hide")" -ge 4 ]

cat > "$T/inside.sh" <<'SH'
set -u
T=$1 KIT=$2 BUILD=$3
source tests/lib.sh
export KIT_PREFIX=$T/prefix
# unpack first, with the system's own dpkg (the device has its own dpkg and libz; the kit's copies
# of libz etc. are hidden below, so dpkg-deb would not start afterwards)
(. "$KIT/setup.sh" > "$T/unpack.log" 2>&1) || { echo "FAIL gpu_kit_unpack: $(tail -n 2 "$T/unpack.log" | tr '\n' ' ')"; exit 1; }
ok gpu_kit_unpack
while read -r f; do mount --bind /dev/null "$f" || { echo "FAIL gpu_kit_namespace: cannot bind over $f"; exit 1; }; done < "$T/hide"
# the system copies are really gone here: without the kit's environment build/train cannot start
if "$BUILD/train" --help > "$T/hidden.log" 2>&1; then echo "FAIL gpu_kit_system_hidden: build/train still starts on the system's libraries"
else ok "gpu_kit_system_hidden ($(wc -l < "$T/hide") files; $(grep -m1 -o 'lib[a-z_.0-9-]*: file too short' "$T/hidden.log"))"; fi
. "$KIT/setup.sh" > "$T/setup.log" 2>&1 || { echo "FAIL gpu_kit_setup: $(tail -n 2 "$T/setup.log" | tr '\n' ' ')"; exit 1; }
ok gpu_kit_setup
grep -q '^cuda library: libcudart' "$T/setup.log" && ok gpu_kit_setup_reports_cuda_paths || echo "FAIL gpu_kit_setup_reports_cuda_paths: $(cat "$T/setup.log")"
# ldd under the kit's environment: the binaries, mpirun, orted and every ELF file of the prefix
bad=""
elfs=("$KIT"/tree/build/train "$KIT"/tree/build/gpu_bench "$KIT"/tree/build/tests/test_cuda_*)
while read -r f; do head -c 4 "$f" | grep -q ELF && elfs+=("$f"); done < <(find "$KIT_PREFIX" -type f \( -name '*.so*' -o -path '*/bin/*' \))
for f in "${elfs[@]}"; do
  while read -r lib path; do
    [ -n "$path" ] || continue
    case "$path" in "$KIT_PREFIX"/*|/usr/local/cuda*) continue;; esac
    case "$(realpath -m "$path")" in /usr/local/cuda*) continue;; esac # e.g. /usr/local/lib64 -> cuda
    grep -qxF "$(realpath -m "$path")" "$T/allowed" || bad="$bad $(basename "$f"):$lib=>$path"
  done < <(ldd "$f" 2>&1 | awk '/=>/ { print $1, ($3 == "not" ? "NOT-FOUND" : $3) } /error|too short/ { print "error", $0 }')
done
[ -z "$bad" ] && ok "gpu_kit_ldd_inside_prefix (${#elfs[@]} ELF files)" || echo "FAIL gpu_kit_ldd_inside_prefix:$(echo "$bad" | cut -c1-600)"
for l in libmpi.so.40 libopenblas.so.0 libjansson.so.4; do
  p=$(ldd "$KIT/tree/build/train" | awk -v l=$l '$1 == l { print $3 }')
  case "$p" in "$KIT_PREFIX"/*) ok "gpu_kit_train_${l%%.so*}_from_prefix";; *) echo "FAIL gpu_kit_train_${l%%.so*}_from_prefix: $l => ${p:-nothing}";; esac
done
case "$(command -v mpirun)" in "$KIT_PREFIX"/*) ok gpu_kit_mpirun_from_prefix;; *) echo "FAIL gpu_kit_mpirun_from_prefix: $(command -v mpirun)";; esac
A=(--model tiny --steps 2 --seq-len 32 --data synthetic --log-every 1)
if timeout 300 "$KIT/tree/build/train" "${A[@]}" --batch-size 2 --out "$T/r1.json" > "$T/r1.log" 2>&1 && grep -q '"status": *"ok"' "$T/r1.json"; then
  ok gpu_kit_train_1_rank
else echo "FAIL gpu_kit_train_1_rank: $(tail -n 3 "$T/r1.log" | tr '\n' ' ')"; fi
if timeout 300 mpirun --allow-run-as-root --oversubscribe -np 2 "$KIT/tree/build/train" "${A[@]}" --batch-size 1 --out "$T/r2.json" > "$T/r2.log" 2>&1 \
   && grep -q '"status": *"ok"' "$T/r2.json" && grep -q '"ranks": *2' "$T/r2.json"; then
  ok gpu_kit_train_2_ranks_carried_mpirun
else echo "FAIL gpu_kit_train_2_ranks_carried_mpirun: $(grep -v '^\s*$' "$T/r2.log" | tail -n 4 | tr '\n' ' ' | cut -c1-500)"; fi
# same loss on 1 and 2 ranks at the same global batch (2x1: FSDP over the kit's Open MPI), so the collectives really ran
l1=$(grep -o '"loss": *[-0-9.eE+]*' "$T/r1.json" | tail -n 1 | sed 's/.*: *//')
l2=$(grep -o '"loss": *[-0-9.eE+]*' "$T/r2.json" | tail -n 1 | sed 's/.*: *//')
if [ -n "$l1" ] && [ -n "$l2" ] && awk -v a="$l1" -v b="$l2" 'BEGIN { d = (a - b) / b; if (d < 0) d = -d; exit !(d < 1e-4) }'; then
  ok gpu_kit_2_ranks_same_loss
else echo "FAIL gpu_kit_2_ranks_same_loss: 1 rank ${l1:-none}, 2 ranks ${l2:-none}"; fi
# the one command end to end (no GPU here: every GPU step must say so, and the exit is 0)
GPU_CHECK_NVIDIA_SMI=$T/no-nvidia-smi timeout 300 bash "$KIT/run.sh" "$T/check" > "$T/run.log" 2>&1; rc=$?
if [ "$rc" -eq 0 ] && grep -q '^binaries *ok' "$T/check/summary.txt" && grep -q '^cuda library: libcublas' "$T/run.log" \
   && [ "$(grep -c ' skip .*no GPU' "$T/check/summary.txt")" -ge 10 ] && [ -s "$T/check/summary.json" ]; then
  ok gpu_kit_run_sh_end_to_end_without_gpu
else echo "FAIL gpu_kit_run_sh_end_to_end_without_gpu: exit $rc: $(tail -n 5 "$T/run.log" | tr '\n' ' ' | cut -c1-400)"; fi
# its first line: the versions (here no driver: the carried gpu_bench says so, and the check goes on)
if head -n 1 "$T/run.log" | grep -qE '^driver CUDA none, runtime CUDA [0-9.]+, cuBLAS [0-9.]+, NCCL [0-9.]+: no NVIDIA driver'; then
  ok gpu_kit_run_sh_first_line_versions
else echo "FAIL gpu_kit_run_sh_first_line_versions: $(head -n 1 "$T/run.log" | cut -c1-300)"; fi
# a driver too old for the kit's runtime (a gpu_bench that says so, exit 3): run.sh stops after that line
cp -r "$KIT" "$T/oldrt"
printf '#!/bin/sh\necho "driver CUDA 12.4, runtime CUDA 13.0, cuBLAS 13.1.0, NCCL 2.28.9: the NVIDIA driver supports CUDA 12.4, older than the CUDA 13.0 runtime"; exit 3\n' \
  > "$T/oldrt/tree/build/gpu_bench"
GPU_CHECK_NVIDIA_SMI=$T/no-nvidia-smi timeout 120 bash "$T/oldrt/run.sh" "$T/oldrtcheck" > "$T/oldrt.log" 2>&1; rc=$?
if [ "$rc" -eq 1 ] && head -n 1 "$T/oldrt.log" | grep -q '^driver CUDA 12.4, runtime CUDA 13.0' \
   && grep -q 'stopped: the driver is too old' "$T/oldrt.log" && [ ! -e "$T/oldrtcheck/summary.txt" ]; then
  ok gpu_kit_run_sh_stops_on_driver_too_old
else echo "FAIL gpu_kit_run_sh_stops_on_driver_too_old: exit $rc: $(head -n 3 "$T/oldrt.log" | tr '\n' ' ' | cut -c1-300)"; fi
SH
unshare -m bash "$T/inside.sh" "$T" "$KIT" "$BUILD"
