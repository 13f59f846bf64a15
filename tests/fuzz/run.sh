#!/usr/bin/env bash
# tests/fuzz/run.sh — runs the libFuzzer targets built by `make fuzz` (build-fuzz/fuzz_NAME), each from its
# seed corpus (tests/fuzz/corpus/NAME, read-only) into a scratch corpus under build-fuzz/, for FUZZ_RUNS
# executions (default 1000000) bounded by FUZZ_TIME seconds (default 900). Prints one line per target
# with the execution count; exits 1 on a crash, sanitizer report, leak, oracle failure or timeout, or
# when a target stopped before FUZZ_RUNS executions. A crash input is left in build-fuzz/artifacts/NAME/:
# copy it into tests/fuzz/regress/NAME/ and it becomes a regression test (build/tests/test_fuzz_replay).
# Not the replay of the corpora in the normal suite (tests/test_fuzz_replay.c).
set -u
cd "$(dirname "$0")/../.."
RUNS=${FUZZ_RUNS:-1000000}
TIME=${FUZZ_TIME:-900}
status=0
for name in "$@"; do
  bin=build-fuzz/fuzz_$name
  [ -x "$bin" ] || { echo "FAIL fuzz_$name: $bin not built"; status=1; continue; }
  work=build-fuzz/corpus/$name; art=build-fuzz/artifacts/$name/; log=build-fuzz/fuzz_$name.log
  mkdir -p "$work" "$art"
  dict=(); [ -f "tests/fuzz/$name.dict" ] && dict=(-dict="tests/fuzz/$name.dict")
  maxlen=4096; [ "$name" = size ] && maxlen=64
  start=$(date +%s)
  # -detect_leaks=1: a parser that forgets to free on an error path fails here too
  "$bin" -runs="$RUNS" -max_total_time="$TIME" -max_len="$maxlen" -timeout=10 -rss_limit_mb=2048 \
    -detect_leaks=1 -print_final_stats=1 -artifact_prefix="$art" "${dict[@]}" "$work" "tests/fuzz/corpus/$name" \
    > "$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1)
  took=$(( $(date +%s) - start ))
  if [ "$rc" -ne 0 ] || grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|fuzz oracle failed' "$log"; then
    echo "FAIL fuzz_$name: exit $rc after ${execs:-?} executions; $(grep -m1 -E 'ERROR|runtime error|oracle' "$log")"
    echo "    input saved in $art (see $log); copy it into tests/fuzz/regress/$name/ once fixed"
    status=1
  elif [ -z "$execs" ] || [ "$execs" -lt "$RUNS" ]; then
    echo "FAIL fuzz_$name: only ${execs:-0} executions in ${took}s (want $RUNS; raise FUZZ_TIME)"
    status=1
  else
    echo "ok   fuzz_$name: $execs executions in ${took}s, $cov, no crash or sanitizer report"
  fi
done
exit $status
