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
# one binary set, named after the cuBLAS major of this build, packed with xz
m=$(readelf -d "$BUILD/train" | sed -n 's/.*NEEDED.*\[libcublas\.so\.\([0-9]*\)\].*/\1/p')
mkdir -p "$T/set" && tar -xJf "$KIT/sets/cu$m.tar.xz" -C "$T/set" 2>/dev/null
check "gpu_kit_one_set_cu$m" [ "$(ls "$KIT/sets/"*.tar.xz | wc -l)" -eq 1 ]
check gpu_kit_set_sonames_name_cublas grep -qx "libcublas.so.$m" "$KIT/sets/cu$m.sonames"
for b in train gpu_bench tests/test_cuda_kernels tests/test_cuda_bf16 tests/test_cuda_attention; do
  check "gpu_kit_carries_$(basename "$b")_with_compute_90_ptx" grep -aq '\.target sm_90' "$T/set/$b"
done
rm -rf "$T/set"
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

# ---- the kit of `make gpu-kit-compat` (cu12 + cu13 sets built in Debian 11) on a bare Debian 11 root
# (glibc 2.31, no /usr/local/cuda, no Open MPI): the CUDA libraries it finds are wheel copies placed
# where a PyTorch image has them (site-packages/nvidia/{cublas,nccl}/lib): the cu12 wheels for a cu12
# image, this machine's CUDA 13 libraries for a cu13 one. The roots take minutes and the network to
# make, and building the two sets in them takes minutes of both cores, in roots every copy of the suite
# shares: `make test` skips these checks; `make gpu-kit-compat-test` makes the roots and the kit and runs them
# (MESHSWEEP_KIT_COMPAT=1).
if [ "${MESHSWEEP_KIT_COMPAT:-0}" != 1 ]; then
  skip gpu_kit_compat "the Debian 11 / CUDA 12 kit is checked by make gpu-kit-compat-test (root, network, minutes)"; exit 0
fi
C=${COMPAT_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/meshsweep/compat}
R=$C/run-root
ready=1
for r in build-root build-root-cu12 run-root wheels; do [ -e "$C/$r/.meshsweep-ready" ] || ready=0; done
CU13=$(dirname "$(dirname "$(realpath "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")")
if [ "$ready" -ne 1 ]; then
  skip gpu_kit_compat "no Debian 11 roots under $C (make gpu-kit-compat makes them: root, network, minutes)"; exit 0
fi
[ -e "$CU13/lib64/libcublas.so.13" ] || { skip gpu_kit_compat "no CUDA 13 cuBLAS at $CU13/lib64 to stand for a cu13 image"; exit 0; }
if make --no-print-directory BUILD="$BUILD" COMPAT_DIR="$C" gpu-kit-compat > "$T/compat-make.log" 2>&1; then ok gpu_kit_compat_make
else fail gpu_kit_compat_make "$(tail -n 3 "$T/compat-make.log" | tr '\n' ' ' | cut -c1-400)"; exit 1; fi
CK=$BUILD/gpu-kit-compat
check gpu_kit_compat_at_most_48MiB [ "$(du -sb "$CK" | cut -f1)" -le $((48 * 1024 * 1024)) ]
check gpu_kit_compat_sets_cu12_cu13 [ "$(cd "$CK/sets" && ls *.tar.xz | tr '\n' ' ')" = "cu12.tar.xz cu13.tar.xz " ]
check gpu_kit_compat_cu12_asks_cublas_12 grep -qx libcublas.so.12 "$CK/sets/cu12.sonames"
check gpu_kit_compat_cudart_static [ -z "$(cat "$CK"/sets/*.sonames | grep libcudart)" ]
rglibc=$(chroot "$R" getconf GNU_LIBC_VERSION | awk '{ print $2 }')
check "gpu_kit_compat_glibc_min_$(cat "$CK/glibc-min")_at_most_root_$rglibc" \
  [ "$(printf '%s\n%s\n' "$(cat "$CK/glibc-min")" "$rglibc" | sort -V | tail -n 1)" = "$rglibc" ]
check gpu_kit_compat_root_glibc_older_than_2_35 [ "$(printf '%s\n2.35\n' "$rglibc" | sort -V | head -n 1)" = "$rglibc" ]
mkdir -p "$R/usr/local/lib/python3.9/dist-packages" "$T/site-cu13/nvidia/cublas/lib" "$T/site-both" "$T/site-none"
cat > "$T/compat.sh" <<'SH'
set -u
T=$1 R=$2 CK=$3 C=$4 CU13=$5
source tests/lib.sh
mount -t proc proc "$R/proc" && mount -t tmpfs tmpfs "$R/tmp" && mount -t tmpfs tmpfs "$R/dev/shm" || { fail gpu_kit_compat_namespace "mounts"; exit 1; }
mkdir -p "$R/tmp/kit" && cp -a "$CK/." "$R/tmp/kit/"
[ ! -e "$R/usr/local/cuda" ] && [ ! -e "$R/usr/lib/x86_64-linux-gnu/libmpi.so.40" ] && ok gpu_kit_compat_root_has_no_cuda_no_mpi \
  || fail gpu_kit_compat_root_has_no_cuda_no_mpi "$R has /usr/local/cuda or Open MPI"
site() { mount --rbind "$1" "$R/usr/local/lib/python3.9/dist-packages"; } # "as a PyTorch image has them"
in_root() { timeout 300 chroot "$R" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root GPU_CHECK_NVIDIA_SMI=/no-nvidia-smi "$@"; }
# a cu12 image: the whole check, every GPU stage skipped, exit 0; the first line is the versions line
site "$C/site-cu12"
in_root bash /tmp/kit/run.sh /tmp/out12 > "$T/c12.log" 2>&1; rc=$?
if [ "$rc" -eq 0 ] && grep -q '^binaries *ok' "$R/tmp/out12/summary.txt" && [ "$(grep -c ' skip .*no GPU' "$R/tmp/out12/summary.txt")" -ge 10 ]; then
  ok gpu_kit_compat_cu12_image_run_sh
else fail gpu_kit_compat_cu12_image_run_sh "exit $rc: $(tail -n 4 "$T/c12.log" | tr '\n' ' ' | cut -c1-400)"; fi
head -n 1 "$T/c12.log" | grep -qE '^driver CUDA none, runtime CUDA 12\.4, cuBLAS 12\.[0-9.]+, NCCL 2\.[0-9.]+: no NVIDIA driver' \
  && ok gpu_kit_compat_cu12_first_line_versions || fail gpu_kit_compat_cu12_first_line_versions "$(head -n 1 "$T/c12.log" | cut -c1-300)"
grep -q '^kit set: cu12 (.*cu13: not found: libcublas.so.13' "$T/c12.log" && ok gpu_kit_compat_cu12_set_picked_and_why \
  || fail gpu_kit_compat_cu12_set_picked_and_why "$(grep -m1 'kit set' "$T/c12.log")"
grep -q '^cuda library: libcublas.so.12 -> /usr/local/lib/python3.9/dist-packages/nvidia/cublas/lib/' "$T/c12.log" \
  && ok gpu_kit_compat_cu12_cublas_from_site_packages || fail gpu_kit_compat_cu12_cublas_from_site_packages "$(grep 'cuda library' "$T/c12.log" | tr '\n' ' ')"
# the engine trains on the old root, 1 rank and 2 ranks through the carried mpirun
cat > "$R/tmp/train.sh" <<'IN'
. /tmp/kit/setup.sh > /tmp/setup.log 2>&1 || exit 9
A="--model tiny --steps 2 --seq-len 32 --data synthetic --log-every 1"
/tmp/kit/tree/build/train $A --batch-size 2 --out /tmp/r1.json > /tmp/r1.log 2>&1 || exit 1
mpirun --allow-run-as-root --oversubscribe -np 2 /tmp/kit/tree/build/train $A --batch-size 1 --out /tmp/r2.json > /tmp/r2.log 2>&1 || exit 2
IN
in_root bash /tmp/train.sh; rc=$?
l1=$(grep -o '"loss": *[-0-9.eE+]*' "$R/tmp/r1.json" 2>/dev/null | tail -n 1 | sed 's/.*: *//')
l2=$(grep -o '"loss": *[-0-9.eE+]*' "$R/tmp/r2.json" 2>/dev/null | tail -n 1 | sed 's/.*: *//')
if [ "$rc" -eq 0 ] && grep -q '"status": *"ok"' "$R/tmp/r1.json" && grep -q '"ranks": *2' "$R/tmp/r2.json" \
   && awk -v a="$l1" -v b="$l2" 'BEGIN { d = (a - b) / b; if (d < 0) d = -d; exit !(a != "" && d < 1e-4) }'; then ok gpu_kit_compat_train_1_and_2_ranks_same_loss
else fail gpu_kit_compat_train_1_and_2_ranks_same_loss "exit $rc, loss ${l1:-none} / ${l2:-none}: $(tail -n 3 "$R/tmp/r2.log" "$R/tmp/r1.log" "$R/tmp/setup.log" 2>/dev/null | tr '\n' ' ' | cut -c1-400)"; fi
umount -R "$R/usr/local/lib/python3.9/dist-packages"
# a cu13 image: this machine's CUDA 13 libraries (cuBLAS, cuBLASLt, NCCL) in the wheel folder
mount --bind "$CU13/lib64" "$T/site-cu13/nvidia/cublas/lib"
site "$T/site-cu13"
in_root bash /tmp/kit/run.sh /tmp/out13 > "$T/c13.log" 2>&1; rc=$?
if [ "$rc" -eq 0 ] && head -n 1 "$T/c13.log" | grep -qE '^driver CUDA none, runtime CUDA 13\.[0-9]+, cuBLAS 13\.' \
   && grep -q '^kit set: cu13 (driver CUDA unknown (no nvidia-smi))' "$T/c13.log"; then ok gpu_kit_compat_cu13_image_picks_cu13
else fail gpu_kit_compat_cu13_image_picks_cu13 "exit $rc: $(head -n 2 "$T/c13.log" | tr '\n' ' ' | cut -c1-300)"; fi
umount -R "$R/usr/local/lib/python3.9/dist-packages"
# a driver of CUDA 12.4 on an image with both cuBLAS majors: cu12, and the line says why
printf '#!/bin/sh\necho "| NVIDIA-SMI 550.54   Driver Version: 550.54   CUDA Version: 12.4 |"\n' > "$R/tmp/smi124"; chmod +x "$R/tmp/smi124"
mount -t tmpfs tmpfs "$T/site-both" && mkdir -p "$T/site-both/nvidia/cublas" "$T/site-both/nvidia/nccl" "$T/site-both/nvidia/cu13/lib"
mount --bind "$C/site-cu12/nvidia/cublas" "$T/site-both/nvidia/cublas" && mount --bind "$C/site-cu12/nvidia/nccl" "$T/site-both/nvidia/nccl"
mount --bind "$CU13/lib64" "$T/site-both/nvidia/cu13/lib"
site "$T/site-both"
in_root GPU_CHECK_NVIDIA_SMI=/tmp/smi124 bash -c '. /tmp/kit/setup.sh' > "$T/drv124.log" 2>&1; rc=$?
if [ "$rc" -eq 0 ] && grep -qx 'kit set: cu12 (driver CUDA 12.4; cu13: the driver supports CUDA 12.4)' "$T/drv124.log"; then
  ok gpu_kit_compat_driver_12_4_picks_cu12
else fail gpu_kit_compat_driver_12_4_picks_cu12 "exit $rc: $(head -c 400 "$T/drv124.log")"; fi
umount -R "$R/usr/local/lib/python3.9/dist-packages"
# no cuBLAS at all: one clear line, non-zero exit, no table
site "$T/site-none"
in_root bash /tmp/kit/run.sh /tmp/outnone > "$T/none.log" 2>&1; rc=$?
if [ "$rc" -eq 1 ] && [ "$(grep -c . "$T/none.log")" -eq 1 ] && grep -q '^setup: no binary set of the kit fits this machine (cu13: not found: libcublas.so.13' "$T/none.log" \
   && grep -q 'cu12: not found: libcublas.so.12' "$T/none.log" && [ ! -e "$R/tmp/outnone/summary.txt" ]; then ok gpu_kit_compat_no_cublas_one_line
else fail gpu_kit_compat_no_cublas_one_line "exit $rc: $(head -c 400 "$T/none.log")"; fi
SH
unshare -m bash "$T/compat.sh" "$T" "$R" "$CK" "$C" "$CU13"
