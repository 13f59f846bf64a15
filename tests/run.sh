#!/usr/bin/env bash
# tests/run.sh — runs every test of meshsweep and prints the closing line "N passed, N failed".
# Each test (a build/tests/* binary or a tests/t_*.sh script) prints one line per check:
# "ok   NAME", "FAIL NAME: why" or "skip NAME: why" (tests/check.h, tests/lib.sh). A test that exits
# non-zero without printing a FAIL line counts as one failure, so a crash is never a pass.
# Environment: BUILD (default build), ONLY=substring to run a subset.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export BUILD
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export OPENBLAS_NUM_THREADS=1
# `make test SAN=1`: sanitizer options, suppressions and report collection (tests/san/env.sh)
if [ "$BUILD" = build-san ]; then . tests/san/env.sh; fi
pass=0; fail=0; skip=0
logdir=$BUILD/test-logs; mkdir -p "$logdir"
tests=()
for t in "$BUILD"/tests/*; do [ -x "$t" ] && [ -f "$t" ] && tests+=("$t"); done
for t in tests/t_*.sh; do [ -f "$t" ] && tests+=("$t"); done
for t in "${tests[@]}"; do
  name=$(basename "$t")
  if [ -n "${ONLY:-}" ] && [[ "$name" != *"$ONLY"* ]]; then continue; fi
  log="$logdir/$name.log"
  start=$(date +%s)
  if [[ "$t" == *.sh ]]; then timeout 1800 bash "$t" > "$log" 2>&1; rc=$?
  else timeout 1800 "$t" > "$log" 2>&1; rc=$?; fi
  p=$(grep -c '^ok ' "$log"); f=$(grep -c '^FAIL ' "$log"); s=$(grep -c '^skip ' "$log")
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then echo "FAIL $name: exited $rc without a FAIL line" >> "$log"; f=1; fi
  if [ "$p" -eq 0 ] && [ "$f" -eq 0 ] && [ "$s" -eq 0 ]; then echo "FAIL $name: ran no check" >> "$log"; f=1; fi
  pass=$((pass+p)); fail=$((fail+f)); skip=$((skip+s))
  printf '%-28s %4d ok %3d failed %3d skipped  (%ds)\n' "$name" "$p" "$f" "$s" "$(( $(date +%s) - start ))"
  grep -E '^(FAIL|skip) ' "$log" | sed 's/^/    /'
done
if [ "$BUILD" = build-san ]; then san_check; fail=$((fail + $?)); fi
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
