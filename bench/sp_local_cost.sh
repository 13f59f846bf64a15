#!/usr/bin/env bash
# bench/sp_local_cost.sh — the step-time cost of `--sp-activations local` against `gathered` on the
# CPU meshes (results/bench/memory.md): ROUNDS interleaved rounds (local, gathered, local, ...), per
# run the median step time of the record (steps after the excluded warm-up ones), then per mesh the
# median over runs of each setting, the ratio of those medians and the median of the per-round
# ratios (each round's two runs side by side, so a drift of the machine's speed cancels).
# What it is not: a test (nothing is asserted). Needs build/train and mpirun.
# Usage: bench/sp_local_cost.sh   (env: MESHES="1x2" MODEL=small T=256 B=2 STEPS=12 ROUNDS=5)
#   a mesh DPxTP runs DP*TP ranks; on fewer cores than ranks the ranks share them (--oversubscribe)
set -euo pipefail
cd "$(dirname "$0")/.."
MESHES=${MESHES:-1x2} MODEL=${MODEL:-small} T=${T:-256} B=${B:-2} STEPS=${STEPS:-12} ROUNDS=${ROUNDS:-5}
BUILD=${BUILD:-build}
[ -x "$BUILD/train" ] || { echo "sp_local_cost: $BUILD/train missing (run make)" >&2; exit 2; }
export OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
med() { sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
ms() { grep -o '"step_ms_median": *[0-9.eE+-]*' "$1" | head -n 1 | sed 's/.*: *//'; }
echo "| mesh | ranks | runs each | gathered, ms | local, ms | local / gathered (medians) | median of per-round ratios |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for m in $MESHES; do
  dp=${m%x*} tp=${m#*x}; np=$(( dp * tp ))
  : > "$tmp/$m.local"; : > "$tmp/$m.gathered"; : > "$tmp/$m.ratio"
  for r in $(seq 1 "$ROUNDS"); do
    for s in local gathered; do
      mpirun --oversubscribe -np "$np" "$BUILD/train" --model "$MODEL" --seq-len "$T" --steps "$STEPS" --tp "$tp" \
        --batch-size "$B" --data synthetic --sp-activations "$s" --log-every 1000 --out "$tmp/$m.$s.$r.json" \
        > "$tmp/$m.$s.$r.log" 2>&1 || { echo "sp_local_cost: $m $s run $r failed: $(tail -n 2 "$tmp/$m.$s.$r.log")" >&2; exit 1; }
      ms "$tmp/$m.$s.$r.json" >> "$tmp/$m.$s"
    done
    awk -v a="$(ms "$tmp/$m.local.$r.json")" -v b="$(ms "$tmp/$m.gathered.$r.json")" 'BEGIN { print a / b }' >> "$tmp/$m.ratio"
  done
  l=$(med < "$tmp/$m.local"); g=$(med < "$tmp/$m.gathered"); q=$(med < "$tmp/$m.ratio")
  printf '| %s | %d | %d | %.1f | %.1f | %.3f | %.3f |\n' "$m" "$np" "$ROUNDS" "$g" "$l" "$(awk -v a="$l" -v b="$g" 'BEGIN { print a / b }')" "$q"
  echo "$m local: $(tr '\n' ' ' < "$tmp/$m.local"); gathered: $(tr '\n' ' ' < "$tmp/$m.gathered")" >&2
done
