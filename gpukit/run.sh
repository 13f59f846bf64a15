#!/usr/bin/env bash
# run.sh — the one command on a GPU machine: `bash build/gpu-kit/run.sh [OUTDIR] [--budget-s S]` (default
# build/gpu-check, relative to where it is started). Unpacks the kit's packages into a private prefix
# and sets the environment, picks the binary set (cu13 or cu12) that the driver and the machine's cuBLAS
# allow and unpacks it into the kit's tree/build (setup.sh), checks that build/train resolves every library, then runs
# gpukit/gpu_check.sh on the carried binaries (built on the build machine; nothing is compiled here),
# writing the logs, run records, the table and summary.json under OUTDIR. The 10-minute budget of the
# check (or --budget-s S, passed on) counts from the start of this script, unpacking included.
# Exit status: gpu_check.sh's.
set -u
T0=$(date +%s)
OUT_DIR=build/gpu-check; pass=()
while [ $# -gt 0 ]; do
  case "$1" in
    --budget-s) [ $# -ge 2 ] || { echo "run.sh: --budget-s needs a value" >&2; exit 2; }; pass=(--budget-s "$2"); shift 2;;
    -*) echo "run.sh: unknown option '$1' (usage: run.sh [OUTDIR] [--budget-s S])" >&2; exit 2;;
    *) OUT_DIR=$1; shift;;
  esac
done
mkdir -p "$OUT_DIR" || { echo "run.sh: cannot create $OUT_DIR" >&2; exit 1; }
OUT_DIR=$(cd "$OUT_DIR" && pwd)
KIT=$(cd "$(dirname "$0")" && pwd)
# the carried files need a glibc at least as new as the one they were built against (a kit of
# `make gpu-kit-compat`: Debian 11's, 2.31 or older; of `make gpu-kit`: this build machine's)
need=$(cat "$KIT/glibc-min" 2>/dev/null); have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{ print $2 }')
if [ -n "$need" ] && [ -n "$have" ] && [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -n 1)" != "$need" ]; then
  echo "run.sh: this machine's glibc $have is older than the $need the kit's binaries and libraries need (a kit made by make gpu-kit-compat needs 2.31)" >&2
  exit 1
fi
# shellcheck source=/dev/null
. "$KIT/setup.sh" > "$OUT_DIR/setup.log" 2>&1; rc=$?
[ "$rc" -eq 0 ] || { cat "$OUT_DIR/setup.log"; exit 1; }
missing=$(ldd "$KIT/tree/build/train" 2>&1 | awk '/not found/ { printf "%s ", $1 }')
if [ -n "$missing" ]; then cat "$OUT_DIR/setup.log"; echo "run.sh: build/train cannot start: not found: $missing(see $OUT_DIR/setup.log)" >&2; exit 1; fi
# the first line: driver, runtime, cuBLAS and NCCL versions; a driver too old for the runtime stops here
vline=$("$KIT/tree/build/gpu_bench" --versions 2>&1); vrc=$?
printf '%s\n' "$vline" | tee "$OUT_DIR/versions.txt"
cat "$OUT_DIR/setup.log"
if [ "$vrc" -eq 3 ]; then echo "run.sh: stopped: the driver is too old for the kit's CUDA runtime (the line above)" >&2; exit 1; fi
ldd "$KIT/tree/build/train" > "$OUT_DIR/ldd-train.txt" 2>&1
cd "$KIT/tree" || exit 1
GPU_CHECK_T0=$T0 GPU_CHECK_PREBUILT=1 OUT=$OUT_DIR BUILD=build bash gpukit/gpu_check.sh "${pass[@]}"
