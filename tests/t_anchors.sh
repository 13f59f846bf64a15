#!/usr/bin/env bash
# tests/t_anchors.sh — the step-time model against published runs: tests/anchors/anchors.py plans every row of
# tests/anchors/published.tsv with build/train --plan on the shipped GPU models (17 runs: 1 to 256 GPUs, H100,
# H200 and A100, 1B to 70B) and checks each predicted/published ratio against its band, the median, FSDP weak
# scaling 64/8 and 128/8 >= 0.93, the one-node mesh ranking and the one-node MFU against the best published.
# It writes the table to $BUILD/anchors.md (bench/anchors.sh commits it as results/bench/anchors.md).
# What it is not: a measurement (plans take milliseconds; no GPU is needed).
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.." || exit 1
TRAIN="$BUILD/train"
[ -x "$TRAIN" ] || { fail anchors_build "$TRAIN is missing (run make all)"; exit 1; }
/usr/bin/python3 tests/anchors/anchors.py "$TRAIN" "$BUILD/anchors.md"
# a row that cannot be planned is a FAIL naming it, not a skipped row: one over its budget, as a copy of the table
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
mkdir -p "$T/a" && cp tests/anchors/*.json tests/anchors/anchors.py "$T/a/"
{ grep '^#' tests/anchors/published.tsv
  printf 'too_big\tmpt-70b\th100-80gb\t8\t8\t2048\t64\t1\tnone\t1\ttok_s_gpu\t1000\t0.8\t1.25\ta 70B at batch 64 on 8 GPUs\n'; } > "$T/a/published.tsv"
out=$(python3 "$T/a/anchors.py" "$TRAIN" 2>&1 | grep 'anchor_too_big')
case "$out" in "FAIL anchor_too_big: cannot be planned: exit 3"*) ok anchors_unplannable_row_fails ;;
  *) fail anchors_unplannable_row_fails "want 'FAIL anchor_too_big: cannot be planned: exit 3 (out of the memory budget)...', got: ${out:0:300}" ;; esac
