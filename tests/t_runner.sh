#!/usr/bin/env bash
# tests/t_runner.sh — the test harness itself: tests/run.sh on a scratch set of fake tests and a
# scratch manifest must fail when a listed test is missing, when a test reports fewer ok checks than
# listed, when an unlisted test appears, when ONLY= matches nothing, when a test crashes after some
# checks; it must not count program output that looks like "ok NAME", must name an all-skip test in
# its closing line and refuse it unless the manifest allows skipping; a Python check that raises is a
# FAIL. And tests/tools/compare.py must fail on NaN parameters and losses, and accept zero references.
source "$(dirname "$0")/lib.sh"
ROOT=$(pwd)
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
mkdir -p "$T/b/tests" "$T/s"
# fake C-style tests: executables that report through the result file as tests/check.h does
fake() { # NAME BODY
  printf '#!/usr/bin/env bash\nsource %q/tests/lib.sh\n%s\n' "$ROOT" "$2" > "$T/b/tests/$1"; chmod +x "$T/b/tests/$1"
}
fake a_good 'ok a1; ok a2; ok a3'
fake b_printer 'ok b1; echo "ok   counterfeit_from_program_output"; echo "ok  counterfeit2"'
fake c_skipper 'skip c1 "no device"; skip c2 "no device"'
printf '#!/usr/bin/env bash\nsource %q/tests/lib.sh\nok s1\n/usr/bin/python3 - <<PY\nprint("ok   s2")\nPY\n' "$ROOT" > "$T/s/t_suite.sh"
runner() { # OUT MANIFEST-LINES... : runs tests/run.sh on the scratch tests; returns its status
  local out=$1; shift
  printf '%s\n' "$@" > "$T/manifest"
  ( unset MESHSWEEP_TEST_RESULTS ONLY; BUILD="$T/b" SUITE_DIR="$T/s" MANIFEST="$T/manifest" bash tests/run.sh ) > "$T/$out" 2>&1
}
closing() { tail -1 "$T/$1"; }
# everything as listed: passes, counterfeit lines not counted (a 3 + b 1 + s 2 = 6 ok)
runner all.out "a_good 3" "b_printer 1" "c_skipper 0 may-skip" "t_suite.sh 2"; rc=$?
if [ $rc -eq 0 ] && closing all.out | grep -q '^6 passed, 0 failed, 2 skipped; skipped entirely: c_skipper$'; then ok runner_counts_only_harness_lines
else fail runner_counts_only_harness_lines "exit $rc: $(closing all.out)"; fi
# a counterfeit ok cannot make up a short count
runner short.out "a_good 3" "b_printer 2" "c_skipper 0 may-skip" "t_suite.sh 2"; rc=$?
[ $rc -ne 0 ] && grep -q 'FAIL b_printer: 1 ok checks, the manifest expects at least 2' "$T/short.out" \
  && ok runner_fails_short_test || fail runner_fails_short_test "exit $rc: $(closing short.out)"
# a listed test that is gone
runner missing.out "a_good 3" "b_printer 1" "c_skipper 0 may-skip" "t_suite.sh 2" "gone_test 4"; rc=$?
[ $rc -ne 0 ] && grep -q 'FAIL gone_test: listed in' "$T/missing.out" && ok runner_fails_missing_test \
  || fail runner_fails_missing_test "exit $rc: $(closing missing.out)"
# an unlisted test
runner unlisted.out "a_good 3" "c_skipper 0 may-skip" "t_suite.sh 2"; rc=$?
[ $rc -ne 0 ] && grep -q 'FAIL b_printer: not in the manifest' "$T/unlisted.out" && ok runner_fails_unlisted_test \
  || fail runner_fails_unlisted_test "exit $rc: $(closing unlisted.out)"
# an all-skip test the manifest does not allow to skip
runner skip.out "a_good 3" "b_printer 1" "c_skipper 2" "t_suite.sh 2"; rc=$?
[ $rc -ne 0 ] && grep -q 'FAIL c_skipper: skipped every check' "$T/skip.out" && ok runner_fails_unexpected_all_skip \
  || fail runner_fails_unexpected_all_skip "exit $rc: $(closing skip.out)"
# ONLY matching nothing
( unset MESHSWEEP_TEST_RESULTS ONLY; printf 'a_good 3\n' > "$T/m1"; ONLY=no_such_test BUILD="$T/b" SUITE_DIR="$T/s" MANIFEST="$T/m1" \
  bash tests/run.sh ) > "$T/only.out" 2>&1; rc=$?
[ $rc -ne 0 ] && grep -q "FAIL run: no test matches ONLY='no_such_test'" "$T/only.out" && ok runner_fails_only_matching_nothing \
  || fail runner_fails_only_matching_nothing "exit $rc: $(closing only.out)"
# a crash after some checks, and a Python check that raises
fake a_good 'ok a1; ok a2; ok a3; exit 139'
printf '#!/usr/bin/env bash\nsource %q/tests/lib.sh\nok s1\n/usr/bin/python3 - <<PY\nprint("ok   s2")\nraise KeyError("x")\nPY\n' "$ROOT" > "$T/s/t_suite.sh"
runner crash.out "a_good 3" "b_printer 1" "c_skipper 0 may-skip" "t_suite.sh 2"; rc=$?
[ $rc -ne 0 ] && grep -q 'FAIL a_good: exited 139 without a FAIL line' "$T/crash.out" && ok runner_fails_crash_after_checks \
  || fail runner_fails_crash_after_checks "exit $rc: $(closing crash.out)"
grep -q 'FAIL python_exception_t_suite.sh_line_[0-9]*: KeyError' "$T/crash.out" && ok runner_python_exception_is_fail \
  || fail runner_python_exception_is_fail "$(grep -i python "$T/crash.out" | head -2)"

# JOBS=2: the same counts as one at a time; two tests run side by side (each waits, at most 20 s, to see
# the other's marker: one at a time, neither would); an "alone" test runs with nothing beside it and
# nothing starts beside it; tests with the same "excl:" key never overlap; a "long" one starts first
mkdir -p "$T/p" "$T/pb/tests"
par() { # NAME OTHER: marks itself running, waits to see OTHER running, then leaves
  printf '#!/usr/bin/env bash\nsource %q/tests/lib.sh\nM=%q\n%s\n' "$ROOT" "$T/p" "$2" > "$T/p/$1"
}
par t_1lonely.sh 'touch "$M/run.lonely"; sleep 1; if ls "$M"/run.[ab]* >/dev/null 2>&1; then fail lonely_alone "another test ran beside it"; else ok lonely_alone; fi; rm "$M/run.lonely"'
pair='touch "$M/run.$ME"; for i in $(seq 200); do [ -e "$M/run.$OTHER" ] && break; sleep 0.1; done
[ -e "$M/run.lonely" ] && fail ${ME}_not_beside_alone "started beside the alone test"
[ -e "$M/run.$OTHER" ] && ok ${ME}_saw_$OTHER || fail ${ME}_saw_$OTHER "never ran beside $OTHER"
touch "$M/saw.$ME"; for i in $(seq 200); do [ -e "$M/saw.$OTHER" ] && break; sleep 0.1; done; rm -f "$M/run.$ME"'
par t_2a.sh "ME=a OTHER=b; $pair"
par t_2b.sh "ME=b OTHER=a; $pair"
excl='[ -e "$M/excl.busy" ] && fail ${ME}_excl "overlapped the other excl test"; touch "$M/excl.busy"; sleep 0.5; rm "$M/excl.busy"; ok ${ME}_excl'
par t_3x.sh "ME=x; $excl"
par t_3y.sh "ME=y; $excl"
( unset MESHSWEEP_TEST_RESULTS ONLY; printf '%s\n' "t_1lonely.sh 1 alone" "t_2a.sh 1" "t_2b.sh 1" "t_3x.sh 1 excl:k" "t_3y.sh 1 excl:k long" > "$T/pm"
  JOBS=2 BUILD="$T/pb" SUITE_DIR="$T/p" MANIFEST="$T/pm" bash tests/run.sh ) > "$T/par.out" 2>&1; rc=$?
# (t_3y.sh is marked long: it starts first, so it is the first to finish)
if [ $rc -eq 0 ] && [ "$(tail -1 "$T/par.out")" = "5 passed, 0 failed, 0 skipped" ] && head -1 "$T/par.out" | grep -q '^t_3y.sh '; then
  ok runner_jobs_side_by_side_alone_excl_and_long_first
else fail runner_jobs_side_by_side_alone_excl_and_long_first "exit $rc: $(grep -E 'FAIL|passed|^t_' "$T/par.out" | tr '\n' ' ')"; fi

# (the crashing set above: its failures counted as one at a time counted them)
( unset MESHSWEEP_TEST_RESULTS ONLY; JOBS=2 BUILD="$T/b" SUITE_DIR="$T/s" MANIFEST="$T/manifest" bash tests/run.sh ) > "$T/par2.out" 2>&1; rc=$?
[ $rc -ne 0 ] && [ "$(tail -1 "$T/par2.out")" = "$(closing crash.out)" ] && grep -q 'FAIL a_good: exited 139 without a FAIL line' "$T/par2.out" \
  && ok runner_jobs_same_counts || fail runner_jobs_same_counts "exit $rc: $(tail -1 "$T/par2.out") vs $(closing crash.out)"
( unset MESHSWEEP_TEST_RESULTS ONLY; JOBS=x BUILD="$T/b" SUITE_DIR="$T/s" MANIFEST="$T/manifest" bash tests/run.sh ) > "$T/parx.out" 2>&1; rc=$?
[ $rc -ne 0 ] && grep -q "FAIL run: JOBS='x' is not a positive number" "$T/parx.out" && ok runner_jobs_bad_value \
  || fail runner_jobs_bad_value "exit $rc: $(tail -1 "$T/parx.out")"

# compare.py: NaN parameters or losses fail; a zero reference is no crash
/usr/bin/python3 - "$T" <<'PY'
import json, struct, sys
d = sys.argv[1]
def st(path, vals):
    b = struct.pack(f"<{len(vals)}f", *vals)
    h = json.dumps({"w": {"dtype": "F32", "shape": [len(vals)], "data_offsets": [0, len(b)]}}).encode()
    h += b" " * (-len(h) % 8)
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + b)
st(f"{d}/nan.st", [float("nan")] * 4); st(f"{d}/one.st", [1.0] * 4)
def rec(path, loss, norm):
    json.dump({"status": "ok", "steps": [{"step": 1, "loss": loss, "grad_norm": norm, "lr": 0.0}]}, open(path, "w"))
rec(f"{d}/zero.json", 1.0, 0.0); rec(f"{d}/nanloss.json", float("nan"), 1.0)
PY
cmp_says() { command /usr/bin/python3 tests/tools/compare.py "$@" 2>&1; }
cmp_says params x "$T/nan.st" "$T/nan.st" 1e-3 | grep -q '^FAIL x: w: non-finite' && ok runner_compare_params_nan_fails \
  || fail runner_compare_params_nan_fails "$(cmp_says params x "$T/nan.st" "$T/nan.st" 1e-3)"
cmp_says params x "$T/one.st" "$T/nan.st" 1e-3 | grep -q '^FAIL ' && ok runner_compare_params_nan_other_fails \
  || fail runner_compare_params_nan_other_fails "$(cmp_says params x "$T/one.st" "$T/nan.st" 1e-3)"
cmp_says same x "$T/nan.st" "$T/nan.st" | grep -q '^FAIL ' && ok runner_compare_same_nan_fails \
  || fail runner_compare_same_nan_fails "$(cmp_says same x "$T/nan.st" "$T/nan.st")"
cmp_says runs x "$T/nanloss.json" "$T/nanloss.json" 1e-5 1e-5 | grep -q '^FAIL x: non-finite' && ok runner_compare_runs_nan_fails \
  || fail runner_compare_runs_nan_fails "$(cmp_says runs x "$T/nanloss.json" "$T/nanloss.json" 1e-5 1e-5)"
cmp_says runs x "$T/zero.json" "$T/zero.json" 1e-5 1e-5 | grep -q '^ok   x' && ok runner_compare_zero_reference \
  || fail runner_compare_zero_reference "$(cmp_says runs x "$T/zero.json" "$T/zero.json" 1e-5 1e-5)"
cmp_says params x "$T/none.st" "$T/one.st" 1e-3 | grep -q '^FAIL x: FileNotFoundError' && ok runner_compare_missing_file_fails \
  || fail runner_compare_missing_file_fails "$(cmp_says params x "$T/none.st" "$T/one.st" 1e-3)"
