#!/usr/bin/env bash
# tests/run.sh — runs every test of meshsweep and prints the closing line "N passed, N failed, N skipped".
# Each test (a build/tests/* binary or a tests/t_*.sh script) reports one line per check,
# "ok   NAME", "FAIL NAME: why" or "skip NAME: why", through tests/check.h or tests/lib.sh, which
# append them to a result file ($MESHSWEEP_TEST_RESULTS) besides the log. Only that file is counted:
# program output on stdout can never count as a pass.
# The manifest tests/expected.txt lists every test with the least number of ok checks it must
# report. A test fails when it is missing, reports fewer checks than listed, exits non-zero without a
# FAIL line (a crash is never a pass), or reports nothing; a test that is not in the manifest fails
# too (add new tests there). A test marked may-skip there may skip all its checks (no GPU, sanitizer
# build); the closing line names every test that skipped everything.
# Environment: BUILD (default build), ONLY=substring to run a subset (an ONLY that matches no test
# fails); JOBS=N tests at a time (default 1; `make test` passes TEST_JOBS, 2): the suites spend much of
# their time waiting (ranks sleep-polling in collectives, timeouts, launches), so a second one fills
# the cores; a test marked "alone" in the manifest runs with nothing beside it (timing or whole-host
# checks), tests marked "excl:KEY" never run beside one with the same KEY (shared build outputs) and
# tests marked "long" start first;
# MANIFEST and SUITE_DIR (default tests/expected.txt, tests) for the runner's own test.
# Writes $BUILD/test-logs/NAME.log, NAME.results and summary.tsv (name ok failed skipped seconds), in
# the order the tests finished.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export BUILD
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export OPENBLAS_NUM_THREADS=1
# sweeps in the suites neither calibrate this host nor check its drift (core/sweep/machine.h); t_cost.sh
# turns it on where it tests it
export MESHSWEEP_CALIBRATE=${MESHSWEEP_CALIBRATE:-0}
# and predict with no machine model unless a suite names one (t_cost.sh), whatever build/machines/ holds
export MESHSWEEP_MACHINE=${MESHSWEEP_MACHINE:-none}
# `make test SAN=1`: sanitizer options, suppressions and report collection (tests/san/env.sh)
if [ "$BUILD" = build-san ]; then . tests/san/env.sh; fi
MANIFEST=${MANIFEST:-tests/expected.txt}
pass=0; fail=0; skip=0
logdir=$BUILD/test-logs; mkdir -p "$logdir"
# train's default --data is build/data/kjv/train.bin, which the suites' runs without --data read; a
# build other than build/ (the sanitizer's, run on its own) has its own copy from `make data`
if [ "$BUILD" != build ] && [ ! -s build/data/kjv/train.bin ] && [ -s "$BUILD/data/kjv/train.bin" ]; then
  mkdir -p build/data/kjv && cp "$BUILD/data/kjv/train.bin" "$BUILD/data/kjv/val.bin" build/data/kjv/ 2>/dev/null \
    || cp "$BUILD/data/kjv/train.bin" build/data/kjv/
fi
summary=$logdir/summary.tsv; : > "$summary"

declare -A want_min=() may_skip=() seen=() alone=() excl=() long=()
if [ ! -f "$MANIFEST" ]; then echo "FAIL run: manifest $MANIFEST missing"; exit 1; fi
while read -r name min flags; do
  case "$name" in ''|'#'*) continue;; esac
  want_min[$name]=$min
  for fl in ${flags:-}; do
    case "$fl" in
      may-skip) may_skip[$name]=1;;
      alone) alone[$name]=1;;
      long) long[$name]=1;;
      excl:*) excl[$name]=${fl#excl:};;
      san:*) [ "$BUILD" = build-san ] && want_min[$name]=${fl#san:};;   # fewer checks in the sanitizer build
    esac
  done
done < "$MANIFEST"

tests=() rest=()
for t in "$BUILD"/tests/*; do [ -x "$t" ] && [ -f "$t" ] && rest+=("$t"); done
for t in "${SUITE_DIR:-tests}"/t_*.sh; do [ -f "$t" ] && rest+=("$t"); done
# the suites marked "long" first, so that with JOBS > 1 the run does not end on one of them alone
for t in "${rest[@]}"; do [ -n "${long[$(basename "$t")]:-}" ] && tests+=("$t"); done
for t in "${rest[@]}"; do [ -z "${long[$(basename "$t")]:-}" ] && tests+=("$t"); done
allskip=()
ran=0
JOBS=${JOBS:-1}
case "$JOBS" in ''|*[!0-9]*|0) echo "FAIL run: JOBS='$JOBS' is not a positive number"; exit 1;; esac
# run_one PATH NAME: the test, its exit status and seconds into NAME.rc (written last: its presence says done)
run_one() {
  local t=$1 name=$2 res="$logdir/$2.results" start rc
  start=$(date +%s)
  if [[ "$t" == *.sh ]]; then MESHSWEEP_TEST_RESULTS=$res timeout 1800 bash "$t" > "$logdir/$name.log" 2>&1; rc=$?
  else MESHSWEEP_TEST_RESULTS=$res timeout 1800 "$t" > "$logdir/$name.log" 2>&1; rc=$?; fi
  echo "$rc $(( $(date +%s) - start ))" > "$logdir/$name.rc.tmp" && mv "$logdir/$name.rc.tmp" "$logdir/$name.rc"
}
# report NAME: count a finished test's checks against the manifest, print its line
report() {
  local name=$1 res="$logdir/$1.results" log="$logdir/$1.log" rc secs p f s
  read -r rc secs < "$logdir/$name.rc"; rm -f "$logdir/$name.rc"
  note() { echo "FAIL $name: $1" >> "$res"; echo "FAIL $name: $1" >> "$log"; }
  p=$(grep -c '^ok ' "$res"); f=$(grep -c '^FAIL ' "$res"); s=$(grep -c '^skip ' "$res")
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then note "exited $rc without a FAIL line"; f=1; fi
  if [ "$p" -eq 0 ] && [ "$f" -eq 0 ] && [ "$s" -eq 0 ]; then note "ran no check"; f=1; fi
  if [ -z "${want_min[$name]:-}" ]; then note "not in the manifest $MANIFEST (add it with its check count)"; f=$((f + 1))
  elif [ "$p" -eq 0 ] && [ "$s" -gt 0 ] && [ "$f" -eq 0 ]; then
    allskip+=("$name")
    [ -n "${may_skip[$name]:-}" ] || { note "skipped every check ($s); only may-skip tests may"; f=1; }
  elif [ "$f" -eq 0 ] && [ "$p" -lt "${want_min[$name]}" ]; then note "$p ok checks, the manifest expects at least ${want_min[$name]}"; f=$((f + 1)); fi
  pass=$((pass+p)); fail=$((fail+f)); skip=$((skip+s))
  printf '%s\t%d\t%d\t%d\t%d\n' "$name" "$p" "$f" "$s" "$secs" >> "$summary"
  printf '%-28s %4d ok %3d failed %3d skipped  (%ds)\n' "$name" "$p" "$f" "$s" "$secs"
  grep -E '^(FAIL|skip) ' "$res" | sed 's/^/    /'
}
declare -A running=()
# reap: report every running test that has finished
reap() {
  local n
  for n in "${!running[@]}"; do
    [ -f "$logdir/$n.rc" ] || continue
    wait "${running[$n]}" 2>/dev/null
    unset "running[$n]"; report "$n"
  done
}
# busy NAME: 1 when NAME may not start now (the slots are full, an alone test runs or NAME is alone and
# anything runs, or a test with NAME's excl key runs)
busy() {
  local n=$1 r
  [ "${#running[@]}" -eq 0 ] && return 1
  [ "${#running[@]}" -ge "$JOBS" ] || [ -n "${alone[$n]:-}" ] && return 0
  for r in "${!running[@]}"; do
    [ -n "${alone[$r]:-}" ] && return 0
    [ -n "${excl[$n]:-}" ] && [ "${excl[$r]:-}" = "${excl[$n]}" ] && return 0
  done
  return 1
}
for t in "${tests[@]}"; do
  name=$(basename "$t")
  if [ -n "${ONLY:-}" ] && [[ "$name" != *"$ONLY"* ]]; then continue; fi
  seen[$name]=1; ran=$((ran + 1))
  : > "$logdir/$name.results"; rm -f "$logdir/$name.rc"
  while busy "$name"; do wait -n 2>/dev/null; reap; done
  run_one "$t" "$name" &
  running[$name]=$!
done
while [ "${#running[@]}" -gt 0 ]; do wait -n 2>/dev/null; reap; done
# listed tests that did not run: a deleted binary or suite must not just vanish from the count
for name in "${!want_min[@]}"; do
  if [ -n "${ONLY:-}" ] && [[ "$name" != *"$ONLY"* ]]; then continue; fi
  [ -n "${seen[$name]:-}" ] && continue
  echo "FAIL $name: listed in $MANIFEST but not found (missing binary or suite)"; fail=$((fail + 1))
  printf '%s\t0\t1\t0\t0\n' "$name" >> "$summary"
done
if [ "$ran" -eq 0 ]; then echo "FAIL run: no test matches ONLY='${ONLY:-}'"; fail=$((fail + 1)); fi
if [ "$BUILD" = build-san ]; then san_check; fail=$((fail + $?)); fi
line="$pass passed, $fail failed, $skip skipped"
[ "${#allskip[@]}" -gt 0 ] && line="$line; skipped entirely: ${allskip[*]}"
echo "$line"
[ "$fail" -eq 0 ]
