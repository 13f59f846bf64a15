#!/usr/bin/env bash
# gpukit/make_kit.sh — `make gpu-kit`: packs what a bare CUDA machine needs to run the GPU check
# into $BUILD/gpu-kit/ (at most 48 MiB), so that nothing is built or installed there.
#
#   tree/build/{train,initbench,gpu_bench,calibrate}, tree/build/tests/test_cuda_{kernels,bf16,attention}   built by `make`
#        (nvcc: sm_80 and sm_90 code + compute_90 PTX; RUNPATH only, so LD_LIBRARY_PATH wins)
#   tree/gpukit/{gpu_check.sh,run_gpu.sh}, tree/tests/lib.sh, tree/bench/gpu_bench.sh   the check itself
#   debs/*.deb + debs/LIST                                        the Debian runtime packages the
#        binaries need beyond libc, libstdc++, libgcc and CUDA, fetched with `apt-get download`
#   setup.sh, run.sh                                              unpack + environment; the one command
#   cuda-sonames                                                  the CUDA libraries the binaries ask for
#   glibc-min                                                     the newest glibc symbol version they need
#
# The package list is derived, not kept by hand: ldd of the binaries (and of every ELF file of every
# package taken, so Open MPI's plugins and helpers bring theirs), each resolved library mapped to its
# package with `dpkg -S` (through the alternatives symlink when needed), to a fixed point; plus
# openmpi-bin and openmpi-common (mpirun, orted, help files: not ELF dependencies of the binaries).
# Excluded: libc6, libstdc++6, libgcc-s1 (every image has them) and /usr/local/cuda (the device's own).
# tests/t_gpu_kit.sh proves the result is complete (ldd with the system copies hidden).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
KIT=$BUILD/gpu-kit
MAX_BYTES=$((48 * 1024 * 1024))
say() { echo "gpu-kit: $*"; }
die() { echo "gpu-kit: $*" >&2; exit 1; }

BINS=("$BUILD/train" "$BUILD/initbench" "$BUILD/gpu_bench" "$BUILD/calibrate" "$BUILD/tests/test_cuda_kernels"
      "$BUILD/tests/test_cuda_bf16" "$BUILD/tests/test_cuda_attention")
for b in "${BINS[@]}"; do [ -x "$b" ] || die "$b is not built (run make; the kit needs nvcc for the CUDA tests)"; done
readelf -d "$BUILD/train" | grep -q 'libcudart' || die "$BUILD/train has no CUDA (nvcc not found at build time?)"
# compute_90 PTX must be embedded so a newer GPU can JIT it (`make clean` if objects predate the flag)
for b in "$BUILD/train" "$BUILD/gpu_bench" "$BUILD/tests/test_cuda_kernels" "$BUILD/tests/test_cuda_bf16" \
         "$BUILD/tests/test_cuda_attention"; do
  grep -aq '\.target sm_90' "$b" || die "$b carries no compute_90 PTX (objects built before the flag: make clean && make)"
done

rm -rf "$KIT.tmp"; mkdir -p "$KIT.tmp/tree/build/tests" "$KIT.tmp/tree/tests" "$KIT.tmp/tree/gpukit" "$KIT.tmp/tree/bench" "$KIT.tmp/debs"
for b in "${BINS[@]}"; do
  objcopy --strip-debug "$b" "$KIT.tmp/tree/build/${b#"$BUILD"/}"
done
cp gpukit/gpu_check.sh gpukit/run_gpu.sh "$KIT.tmp/tree/gpukit/"; cp tests/lib.sh "$KIT.tmp/tree/tests/"
cp bench/gpu_bench.sh "$KIT.tmp/tree/bench/"
cp gpukit/setup.sh gpukit/run.sh "$KIT.tmp/"
git rev-parse --short HEAD > "$KIT.tmp/tree/GIT_REVISION" 2>/dev/null || echo unknown > "$KIT.tmp/tree/GIT_REVISION"

# ---- the CUDA libraries the binaries ask for (found on the device by setup.sh)
for b in "${BINS[@]}"; do readelf -d "$b" | sed -n 's/.*NEEDED.*\[\(lib\(cuda\|cublas\|nccl\)[^]]*\)\].*/\1/p'; done \
  | sort -u > "$KIT.tmp/cuda-sonames"
# cuBLAS loads cuBLASLt itself: it must be found too
grep -q '^libcublas\.so\.' "$KIT.tmp/cuda-sonames" && ! grep -q '^libcublasLt' "$KIT.tmp/cuda-sonames" && \
  sed -n 's/^libcublas\.so\./libcublasLt.so./p' "$KIT.tmp/cuda-sonames" >> "$KIT.tmp/cuda-sonames"

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
  case "$l" in NOTFOUND:*) die "ldd of the binaries: ${l#NOTFOUND:} not found here";; esac
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

# the newest glibc symbol version any carried ELF file needs (Debian 12's libevent wants 2.36):
# run.sh compares it with the machine's before anything else
mkdir -p "$KIT.tmp/x"
for d in "$KIT.tmp"/debs/*.deb; do dpkg -x "$d" "$KIT.tmp/x"; done
find "$KIT.tmp/x" "$KIT.tmp/tree/build" -type f | while read -r f; do
  if head -c 4 "$f" | grep -q ELF; then objdump -T "$f" 2>/dev/null | grep -o 'GLIBC_2\.[0-9]*' || true; fi
done | sed 's/GLIBC_//' | sort -uV | tail -n 1 > "$KIT.tmp/glibc-min"
rm -rf "$KIT.tmp/x"
[ -s "$KIT.tmp/glibc-min" ] || die "could not read the glibc versions the kit needs (objdump missing?)"

bytes=$(du -sb "$KIT.tmp" | cut -f1)
[ "$bytes" -le "$MAX_BYTES" ] || die "kit is $bytes bytes, more than 48 MiB"
rm -rf "$KIT"; mv "$KIT.tmp" "$KIT"
say "$KIT: ${#pkgs[@]} packages, $(( bytes / 1024 / 1024 )) MiB ($bytes bytes); CUDA libraries from the device: $(tr '\n' ' ' < "$KIT/cuda-sonames")"
say "on the GPU machine: bash $KIT/run.sh [OUTDIR]"
