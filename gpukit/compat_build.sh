#!/usr/bin/env bash
# gpukit/compat_build.sh — `make gpu-kit-compat`: the GPU kit for older and CUDA 12 machines, in
# $BUILD/gpu-kit-compat/ (the same layout as `make gpu-kit`'s, at most 48 MiB). Needs root (debootstrap,
# chroot, mount namespaces), the network the first time (Debian's mirror, PyPI) and this machine's CUDA
# 13 nvcc; the roots take ~7 GB and some minutes to make once, under $COMPAT_DIR (default
# ~/.cache/meshsweep/compat: outside the tree, so neither git, `make clean` nor a test's copy of the
# tree touches them), and are reused after that (each finished one has a .meshsweep-ready stamp).
#
#   build-root       Debian 11 (glibc 2.31) with gcc 10, Open MPI, OpenBLAS, jansson (-dev); the cu13 set
#                    is built in it with this machine's CUDA 13 toolkit bind-mounted read-only at
#                    /opt/cuda-13, and the kit is packed in it (so its debs are Debian 11's)
#   build-root-cu12  a copy of it plus CUDA 12.4 from Debian 13's non-free packages (nvidia-cuda-toolkit,
#                    nvidia-cuda-dev, ...; unpacked with dpkg -x, not installed) and NCCL 2.21.5 from
#                    the nvidia-nccl-cu12 wheel: the cu12 set. No PyPI wheel of CUDA 12 carries nvcc itself.
#   run-root         bare Debian 11 with python3 and no CUDA: where tests/t_gpu_kit.sh runs the kit
#   wheels/, site-cu12/  nvidia-cublas-cu12 and nvidia-nccl-cu12, and their libraries unpacked as a
#                    PyTorch cu12 image has them (the test places them in the run root)
# Both sets link the CUDA runtime statically (-lcudart_static): the machine gives the driver's
# libcuda, cuBLAS/cuBLASLt and NCCL (cuBLAS and cuBLASLt 12 are ~550 MB, far over the kit's 48 MiB).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
C=${COMPAT_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/meshsweep/compat}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
say() { echo "gpu-kit-compat: $*"; }
die() { echo "gpu-kit-compat: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot, mount namespaces)"
for t in debootstrap unzip unshare; do command -v $t >/dev/null || die "no $t (apt-get install ${t/unshare/util-linux})"; done
[ -x "$NVCC" ] && "$NVCC" --version | grep -q 'release 13\.' || die "the cu13 set needs this machine's CUDA 13 nvcc (NVCC=$NVCC)"
CUDA13=$(cd "$(dirname "$(realpath "$NVCC")")/.." && pwd)
mkdir -p "$C"
C=$(cd "$C" && pwd)
exec 9> "$C/.lock" && flock 9 || die "cannot lock $C/.lock"   # one build at a time in the shared roots
REV=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
in_root() { # ROOT COMMAND...: in a private mount namespace (proc, and CUDA 13 for the build root)
  local r=$1; shift
  unshare -m bash -c 'r=$1 cuda=$2; shift 2; mount -t proc proc "$r/proc" || exit 1
    if [ -d "$r/opt/cuda-13" ]; then mount --bind -o ro "$cuda" "$r/opt/cuda-13" || exit 1; fi
    chroot "$r" /usr/bin/env DEBIAN_FRONTEND=noninteractive "$@"' _ "$r" "$CUDA13" "$@"
}

make_build_root() {
  local r=$C/build-root
  [ -e "$r/.meshsweep-ready" ] && return 0
  say "making $r (Debian 11, minutes)"; rm -rf "$r"
  debootstrap --variant=minbase bullseye "$r" "$MIRROR" > "$C/build-root.log" 2>&1 || die "debootstrap failed (see $C/build-root.log)"
  in_root "$r" bash -c 'apt-get update -q && apt-get install -y -q gcc g++ make binutils xz-utils libopenmpi-dev libopenblas-dev libjansson-dev' \
    >> "$C/build-root.log" 2>&1 || die "apt-get install in $r failed (see $C/build-root.log)"
  mkdir -p "$r/opt/cuda-13"; touch "$r/.meshsweep-ready"
}

make_cu12_root() {
  local r=$C/build-root-cu12 d
  [ -e "$r/.meshsweep-ready" ] && return 0
  say "making $r (CUDA 12.4 from Debian 13's non-free packages, ~1.3 GB to fetch)"; rm -rf "$r"; mkdir -p "$r"
  (cd "$C/build-root" && tar --exclude=./src --exclude='./proc/*' --exclude=./.meshsweep-ready -cf - .) | (cd "$r" && tar -xf -)
  rmdir "$r/opt/cuda-13"
  echo "deb $MIRROR trixie main contrib non-free" > "$r/etc/apt/sources.list.d/trixie.list"
  printf 'Package: *\nPin: release n=trixie\nPin-Priority: 1\n' > "$r/etc/apt/preferences.d/trixie"
  in_root "$r" bash -c 'apt-get update -q && mkdir -p /tmp/dl && cd /tmp/dl && apt-get download -q nvidia-cuda-toolkit/trixie \
    nvidia-cuda-dev/trixie libcudart12/trixie libcublas12/trixie libcublaslt12/trixie libnvvm4/trixie libcu++-dev/trixie' \
    > "$C/build-root-cu12.log" 2>&1 || die "apt-get download of CUDA 12 failed (see $C/build-root-cu12.log)"
  for d in "$r"/tmp/dl/*.deb; do dpkg -x "$d" "$r/" || die "dpkg -x $d failed"; done
  rm -rf "$r/tmp/dl"
  fetch_wheels
  unzip -q -o "$C"/wheels/nvidia_nccl_cu12-*.whl 'nvidia/nccl/include/*' 'nvidia/nccl/lib/*' -d "$C/nccl-x"
  cp "$C"/nccl-x/nvidia/nccl/include/nccl*.h "$r/usr/include/"
  cp "$C/nccl-x/nvidia/nccl/lib/libnccl.so.2" "$r/usr/lib/x86_64-linux-gnu/"
  ln -sf libnccl.so.2 "$r/usr/lib/x86_64-linux-gnu/libnccl.so"; rm -rf "$C/nccl-x"
  in_root "$r" nvcc --version | grep -q 'release 12\.4' || die "nvcc 12.4 does not run in $r"
  touch "$r/.meshsweep-ready"
}

fetch_wheels() {
  [ -e "$C/wheels/.meshsweep-ready" ] && return 0
  local pip; pip=$(command -v pip3 || command -v pip) || die "no pip (for the nvidia-*-cu12 wheels)"
  mkdir -p "$C/wheels"
  "$pip" download -q --no-deps --only-binary=:all: --platform manylinux2014_x86_64 --python-version 3.11 -d "$C/wheels" \
    nvidia-cublas-cu12==12.4.5.8 nvidia-nccl-cu12==2.21.5 > "$C/wheels.log" 2>&1 || die "pip download failed (see $C/wheels.log)"
  # their libraries as a PyTorch cu12 image has them (site-packages/nvidia/*/lib), for the test
  rm -rf "$C/site-cu12"; local w
  for w in "$C"/wheels/nvidia_cublas_cu12-*.whl "$C"/wheels/nvidia_nccl_cu12-*.whl; do
    unzip -q -o "$w" 'nvidia/*/lib/*' -d "$C/site-cu12" || die "cannot unpack $w"
  done
  touch "$C/wheels/.meshsweep-ready"
}

make_run_root() {
  local r=$C/run-root
  [ -e "$r/.meshsweep-ready" ] && return 0
  say "making $r (bare Debian 11 with python3, for tests/t_gpu_kit.sh)"; rm -rf "$r"
  debootstrap --variant=minbase --include=python3 bullseye "$r" "$MIRROR" > "$C/run-root.log" 2>&1 || die "debootstrap failed (see $C/run-root.log)"
  touch "$r/.meshsweep-ready"
}

build_set() { # ROOT NAME NVCC [CFLAGS]: the kit's seven binaries into ROOT/src/out/NAME
  local r=$1 name=$2 nvcc=$3 cflags=${4:-} t=(train initbench gpu_bench calibrate tests/test_cuda_kernels tests/test_cuda_bf16 tests/test_cuda_attention)
  mkdir -p "$r/src"
  find "$r/src" -mindepth 1 -maxdepth 1 ! -name out -exec rm -rf {} +
  git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$r/src"
  say "building set $name in $r (log: $C/$name.log)"
  in_root "$r" env CFLAGS="-O2 -g $cflags" make -C /src -j"$(nproc)" BUILD="out/$name" NVCC="$nvcc" GIT_REV="$REV" \
    CUDART_LIB="-lcudart_static -ldl -lrt -lpthread" "${t[@]/#/out/$name/}" > "$C/$name.log" 2>&1 \
    || die "the $name build failed: $(grep -m1 -E 'error|Error' "$C/$name.log" | cut -c1-200) (see $C/$name.log)"
}

make_build_root
make_cu12_root
make_run_root
fetch_wheels
build_set "$C/build-root" cu13 /opt/cuda-13/bin/nvcc
# NCCL 2.21's header declares ncclBfloat16 to C only where cuda_bf16.h did (C++), hence the define
build_set "$C/build-root-cu12" cu12 /usr/bin/nvcc -D__CUDA_BF16_TYPES_EXIST__
rm -rf "$C/build-root/src/out/cu12"; cp -a "$C/build-root-cu12/src/out/cu12" "$C/build-root/src/out/cu12"
rm -rf "$C/build-root/src/out/gpu-kit"
in_root "$C/build-root" env SETS="cu13=out/cu13 cu12=out/cu12" BUILD=out KIT=out/gpu-kit GIT_REV="$REV" bash /src/gpukit/make_kit.sh
rm -rf "$BUILD/gpu-kit-compat"; cp -a "$C/build-root/src/out/gpu-kit" "$BUILD/gpu-kit-compat"
echo "$REV" > "$BUILD/gpu-kit-compat/tree/GIT_REVISION"
say "$BUILD/gpu-kit-compat: for glibc $(cat "$BUILD/gpu-kit-compat/glibc-min") or newer, a CUDA 12.4+ or 13 driver and the machine's cuBLAS 12 or 13"
