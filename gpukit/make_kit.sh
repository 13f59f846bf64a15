#!/usr/bin/env bash
# gpukit/make_kit.sh — `make gpu-kit` (and the last step of `make gpu-kit-compat`): packs what a bare
# CUDA machine needs to run the GPU check into $KIT (default $BUILD/gpu-kit/, at most 48 MiB), so
# that nothing is built or installed there.
#
#   sets/NAME.tar.xz      one binary set per CUDA major (cu12, cu13): build/{train,initbench,gpu_bench,
#                         calibrate}, build/tests/test_cuda_{kernels,bf16,attention} (nvcc: sm_80 and
#                         sm_90 code + compute_90 PTX; RUNPATH only, so LD_LIBRARY_PATH wins); the seven
#                         share their CUDA code, so xz packs ~26 MB into ~1.5 MB
#   sets/NAME.sonames     the CUDA libraries that set asks the machine for (cuBLAS, cuBLASLt, NCCL and,
#                         unless it links the runtime statically, cudart)
#   tree/{gpukit/gpu_check.sh,gpukit/run_gpu.sh,tests/lib.sh,bench/gpu_bench.sh}   the check itself
#   debs/*.deb + debs/LIST  the Debian runtime packages the binaries need beyond libc, libstdc++, libgcc
#                         and CUDA, fetched with `apt-get download`
#   setup.sh, run.sh      unpack + pick a set + environment; the one command
#   glibc-min             the newest glibc symbol version any carried ELF file needs
#
# SETS="NAME=DIR ..." names the sets and the build folders they come from; by default one set from
# $BUILD, named after the cuBLAS major its train links (`make gpu-kit`: this machine's toolchain, so
# this machine's glibc). `make gpu-kit-compat` (gpukit/compat_build.sh) runs this script inside a
# Debian 11 root with two sets, cu12 and cu13, built there: glibc 2.31 and CUDA 12 or 13 machines.
# The package list is derived, not kept by hand: ldd of the binaries (and of every ELF file of every
# package taken, so Open MPI's plugins and helpers bring theirs), each resolved library mapped to its
# package with `dpkg -S` (through the alternatives symlink when needed), to a fixed point; plus
# openmpi-bin and openmpi-common (mpirun, orted, help files: not ELF dependencies of the binaries).
# Excluded: libc6, libstdc++6, libgcc-s1 (every image has them) and CUDA (the device's own).
# tests/t_gpu_kit.sh proves the result is complete (ldd with the system copies hidden).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
KIT=${KIT:-$BUILD/gpu-kit}
MAX_BYTES=$((48 * 1024 * 1024))
say() { echo "gpu-kit: $*"; }
die() { echo "gpu-kit: $*" >&2; exit 1; }

NAMES=(train initbench gpu_bench calibrate tests/test_cuda_kernels tests/test_cuda_bf16 tests/test_cuda_attention)
cublas_major() { readelf -d "$1" 2>/dev/null | sed -n 's/.*NEEDED.*\[libcublas\.so\.\([0-9]*\)\].*/\1/p' | head -n 1; }
if [ -z "${SETS:-}" ]; then
  [ -x "$BUILD/train" ] || die "$BUILD/train is not built (run make; the kit needs nvcc for the CUDA tests)"
  m=$(cublas_major "$BUILD/train")
  [ -n "$m" ] || die "$BUILD/train has no CUDA (nvcc not found at build time?)"
  SETS="cu$m=$BUILD"
fi
BINS=()
for s in $SETS; do
  name=${s%%=*} dir=${s#*=}
  for b in "${NAMES[@]}"; do [ -x "$dir/$b" ] || die "$dir/$b is not built (set $name; the kit needs nvcc for the CUDA tests)"; BINS+=("$dir/$b"); done
  [ "cu$(cublas_major "$dir/train")" = "$name" ] || die "$dir/train does not link the cuBLAS of set $name (readelf -d)"
  # compute_90 PTX must be embedded so a newer GPU can JIT it (`make clean` if objects predate the flag)
  for b in train gpu_bench tests/test_cuda_kernels tests/test_cuda_bf16 tests/test_cuda_attention; do
    grep -aq '\.target sm_90' "$dir/$b" || die "$dir/$b carries no compute_90 PTX (objects built before the flag: make clean && make)"
  done
done

rm -rf "$KIT.tmp"; mkdir -p "$KIT.tmp/tree/tests" "$KIT.tmp/tree/gpukit" "$KIT.tmp/tree/bench" "$KIT.tmp/debs" "$KIT.tmp/sets"
cp gpukit/gpu_check.sh gpukit/run_gpu.sh "$KIT.tmp/tree/gpukit/"; cp tests/lib.sh "$KIT.tmp/tree/tests/"
cp bench/gpu_bench.sh "$KIT.tmp/tree/bench/"
cp gpukit/setup.sh gpukit/run.sh "$KIT.tmp/"
git rev-parse --short HEAD > "$KIT.tmp/tree/GIT_REVISION" 2>/dev/null || echo "${GIT_REV:-unknown}" > "$KIT.tmp/tree/GIT_REVISION"

# ---- the sets: stripped binaries, packed; the CUDA libraries each asks for (found on the device by setup.sh)
for s in $SETS; do
  name=${s%%=*} dir=${s#*=} st=$KIT.tmp/stage-$name
  mkdir -p "$st/tests"
  for b in "${NAMES[@]}"; do objcopy --strip-debug "$dir/$b" "$st/$b"; done
  for b in "${NAMES[@]}"; do readelf -d "$dir/$b" | sed -n 's/.*NEEDED.*\[\(lib\(cuda\|cublas\|nccl\)[^]]*\)\].*/\1/p'; done \
    | sort -u > "$KIT.tmp/sets/$name.sonames"
  # cuBLAS loads cuBLASLt itself: it must be found too
  grep -q '^libcublasLt' "$KIT.tmp/sets/$name.sonames" || \
    sed -n 's/^libcublas\.so\./libcublasLt.so./p' "$KIT.tmp/sets/$name.sonames" >> "$KIT.tmp/sets/$name.sonames"
  (cd "$st" && tar -cf - "${NAMES[@]}") | xz -6 -T1 > "$KIT.tmp/sets/$name.tar.xz" || die "cannot pack set $name (xz missing?)"
done

# ---- the package closure
skip_re='^(libc6|libstdc\+\+6|libgcc-s1)$'
pkg_of() { # LIBPATH -> owning package (or nothing)
  local q; q=$(dpkg -S "$1" 2>/dev/null | head -n 1 | cut -d: -f1) || true
  [ -n "$q" ] || q=$(dpkg -S "$(realpath "$1")" 2>/dev/null | head -n 1 | cut -d: -f1) || true
  echo "$q"
}
libs_of() { ldd "$@" 2>/dev/null | awk '/=> \// { print $3 } /not found/ { print "NOTFOUND:" $1 }' | sort -u; }
# the device's own CUDA: a library of the toolkit, wherever the loader found it (/usr/local/cuda/lib64,
# a /usr/local/lib64 link to it, an LD_LIBRARY_PATH entry), known by its real path or by its name
is_cuda() {
  case "$(realpath "$1" 2>/dev/null || echo "$1")" in /usr/local/cuda*|*/cuda*/lib64/*|*/cuda*/targets/*) return 0;; esac
  case "${1##*/}" in libcuda.so*|libcudart.so*|libcublas.so*|libcublasLt.so*|libnccl.so*) return 0;; esac
  return 1
}
declare -A have
queue=(openmpi-bin openmpi-common)
while read -r l; do
  case "$l" in NOTFOUND:*) is_cuda "${l#NOTFOUND:}" || die "ldd of the binaries: ${l#NOTFOUND:} not found here"; continue;; esac
  is_cuda "$l" && continue
  p=$(pkg_of "$l"); [ -n "$p" ] || die "no Debian package owns $l (needed by the binaries)"
  [[ "$p" =~ $skip_re ]] || queue+=("$p")
done < <(libs_of "${BINS[@]}")
pkgs=()
while [ ${#queue[@]} -gt 0 ]; do
  p=${queue[0]}; queue=("${queue[@]:1}")
  [ -z "${have[$p]:-}" ] || continue
  have[$p]=1; pkgs+=("$p")
  elfs=()
  while read -r f; do
    [ -f "$f" ] && [ ! -L "$f" ] || continue
    case "$f" in *.so|*.so.*|*/bin/*|*/libexec/*) ;; *) continue;; esac
    head -c 4 "$f" | grep -q 'ELF' && elfs+=("$f")
  done < <(dpkg -L "$p")
  [ ${#elfs[@]} -gt 0 ] || continue
  while read -r l; do
    case "$l" in NOTFOUND:*) continue;; esac # plugins of optional stacks may miss one
    is_cuda "$l" && continue
    q=$(pkg_of "$l"); [ -n "$q" ] || continue
    [[ "$q" =~ $skip_re ]] || [ -n "${have[$q]:-}" ] || queue+=("$q")
  done < <(libs_of "${elfs[@]}")
done

# ---- fetch exactly the installed versions
: > "$KIT.tmp/debs/LIST"
for p in "${pkgs[@]}"; do
  v=$(dpkg-query -W -f='${Version}' "$p") || die "package $p is not installed here"
  echo "$p=$v" >> "$KIT.tmp/debs/LIST"
done
cache=$BUILD/gpu-kit-debs; mkdir -p "$cache"
need=()
while IFS='=' read -r p v; do
  ls "$cache/${p}_"*.deb >/dev/null 2>&1 && dpkg-deb -f "$(ls "$cache/${p}_"*.deb | head -n 1)" Version | grep -qxF "$v" \
    || need+=("$p=$v")
done < "$KIT.tmp/debs/LIST"
if [ ${#need[@]} -gt 0 ]; then
  say "apt-get download ${#need[@]} packages"
  for pv in "${need[@]}"; do rm -f "$cache/${pv%%=*}_"*.deb; done
  (cd "$cache" && apt-get download -q "${need[@]}" 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2) \
    || die "apt-get download failed for: ${need[*]} (run apt-get update?)"
fi
while IFS='=' read -r p v; do
  f=$(ls "$cache/${p}_"*.deb 2>/dev/null | head -n 1)
  [ -n "$f" ] || die "no .deb for $p after apt-get download"
  cp "$f" "$KIT.tmp/debs/"
done < "$KIT.tmp/debs/LIST"

# the newest glibc symbol version any carried ELF file needs (Debian 12's libevent wants 2.36, the
# Debian 11 root's files 2.29):
# run.sh compares it with the machine's before anything else
mkdir -p "$KIT.tmp/x"
for d in "$KIT.tmp"/debs/*.deb; do dpkg -x "$d" "$KIT.tmp/x"; done
find "$KIT.tmp/x" "$KIT.tmp"/stage-* -type f | while read -r f; do
  if head -c 4 "$f" | grep -q ELF; then objdump -T "$f" 2>/dev/null | grep -o 'GLIBC_2\.[0-9]*' || true; fi
done | sed 's/GLIBC_//' | sort -uV | tail -n 1 > "$KIT.tmp/glibc-min"
rm -rf "$KIT.tmp/x" "$KIT.tmp"/stage-*
[ -s "$KIT.tmp/glibc-min" ] || die "could not read the glibc versions the kit needs (objdump missing?)"

bytes=$(du -sb "$KIT.tmp" | cut -f1)
[ "$bytes" -le "$MAX_BYTES" ] || die "kit is $bytes bytes, more than 48 MiB"
rm -rf "$KIT"; mv "$KIT.tmp" "$KIT"
say "$KIT: sets $(cd "$KIT/sets" && ls *.tar.xz | sed 's/\.tar\.xz//' | tr '\n' ' ')(glibc $(cat "$KIT/glibc-min") or newer), ${#pkgs[@]} packages, $(( bytes / 1024 / 1024 )) MiB ($bytes bytes); CUDA libraries from the device: $(cat "$KIT"/sets/*.sonames | sort -u | tr '\n' ' ')"
say "on the GPU machine: bash $KIT/run.sh [OUTDIR]"
