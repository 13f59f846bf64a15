#!/usr/bin/env bash
# bench/anchors.sh — the step-time model against published GPU training runs, as a page: plans every row of
# tests/anchors/published.tsv on the shipped GPU models (tests/anchors/anchors.py, the same check as
# tests/t_anchors.sh in make test) and writes results/bench/anchors.md (OUT=...) with the date and build.
# Plans only: no GPU, a few seconds. Usage: bash bench/anchors.sh
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=${OUT:-results/bench/anchors.md}
make -s -j"$(nproc)" "$BUILD/train" >/dev/null || exit 1
tmp=$(mktemp); trap 'rm -f "$tmp" "$tmp.log"' EXIT
python3 tests/anchors/anchors.py "$BUILD/train" "$tmp" > "$tmp.log" || exit 1
{
  echo "# The step-time model against published runs"
  echo
  echo "\`bash bench/anchors.sh\` on $(date -u +%Y-%m-%d) (build $(git describe --always --dirty 2>/dev/null || echo unknown)): each"
  echo "published bf16 run of \`tests/anchors/published.tsv\` planned with \`build/train --plan\` on the shipped GPU"
  echo "model (\`core/cost/machine_gpus.c\`) with the nearest setting of ours; predicted over published per GPU."
  echo "Plans only, no GPU. What the figures are and how far to trust them: docs/cost-model.md, \"Against"
  echo "published runs\" (the GEMM tops of each GPU were fitted to these tables within the published cuBLAS"
  echo "ranges; the H200 row is derived from an fp8 run)."
  echo
  cat "$tmp"
  echo
  echo "Checks (tests/t_anchors.sh runs the same in make test):"
  echo
  echo '```'
  cat "$tmp.log"
  echo '```'
} > "$OUT.tmp" && mv "$OUT.tmp" "$OUT"
echo "wrote $OUT"
