# tests/lib.sh — shell helpers for tests/t_*.sh: ok/fail/skip lines as tests/check.h prints them.
# Result channel: tests/run.sh counts only the lines these helpers (and tests/check.h) append to the
# file $MESHSWEEP_TEST_RESULTS; what programs print on stdout is never counted, so a program whose
# output happens to start with "ok " cannot make a pass. Each line also goes to stdout for the log.
BUILD=${BUILD:-build}
result_() { echo "$1"; if [ -n "${MESHSWEEP_TEST_RESULTS:-}" ]; then echo "$1" >> "$MESHSWEEP_TEST_RESULTS"; fi; }
ok()   { result_ "ok   $1"; }
fail() { result_ "FAIL $1: $2"; }
skip() { result_ "skip $1: $2"; }
# check NAME COND-COMMAND... : runs the command, ok if it succeeds
check() { local n=$1; shift; if "$@"; then ok "$n"; else fail "$n" "command failed: $*"; fi; }
# must NAME CMD... : runs CMD (a program whose outputs later checks read); a non-zero exit is a FAIL
# line naming the run, so a crashed run can never just remove the checks that follow. Returns CMD's status.
must() {
  local n=$1; shift
  local err; err=$(mktemp)
  "$@" 2>"$err"; local rc=$?
  cat "$err" >&2
  [ "$rc" -eq 0 ] || fail "$n" "exit $rc: $(grep -v '^\s*$' "$err" | tail -2 | tr '\n' ' ' | head -c 300)"
  rm -f "$err"; return "$rc"
}
# expect_exit NAME CODE PATTERN -- CMD... : CMD must exit CODE and print exactly one line on stderr matching PATTERN
# without ARRAY OPT... : the words of ARRAY less each OPT and the value after it, into the array WITHOUT
# (build/train refuses an option given twice: a case that sets one of ARRAY's options drops it first)
without() {
  local -n _src=$1; shift
  WITHOUT=()
  local i o drop
  for ((i = 0; i < ${#_src[@]}; i++)); do
    drop=0
    for o in "$@"; do [ "${_src[i]}" = "$o" ] && drop=1; done
    if [ $drop -eq 1 ]; then i=$((i + 1)); else WITHOUT+=("${_src[i]}"); fi
  done
}
expect_exit() {
  local n=$1 code=$2 pat=$3; shift 4
  local err; err=$(mktemp)
  timeout 120 "$@" >/dev/null 2>"$err"; local rc=$?
  local lines; lines=$(grep -c . "$err")
  if [ "$rc" -ne "$code" ]; then fail "$n" "exit $rc, want $code: $(head -c 300 "$err")";
  elif ! grep -qE -- "$pat" "$err"; then fail "$n" "stderr does not match '$pat': $(head -c 300 "$err")";
  elif [ "$lines" -ne 1 ]; then fail "$n" "want one stderr line, got $lines: $(head -c 300 "$err")";
  else ok "$n"; fi
  rm -f "$err"
}
# Python checks in the suites print "ok NAME" / "FAIL NAME: why" / "skip NAME: why" on stdout. Every
# call of /usr/bin/python3 in a suite goes through this function: those lines are passed on through
# ok/fail/skip (so they reach the result channel), other output is passed through unchanged, and an
# exception in a check script becomes a FAIL line (a check that raises can never vanish silently).
/usr/bin/python3() {
  local out err rc line
  out=$(mktemp); err=$(mktemp)
  command /usr/bin/python3 "$@" >"$out" 2>"$err"; rc=$?
  while IFS= read -r line || [ -n "$line" ]; do
    case "$line" in
      "ok "*)   line=${line#ok }; ok "${line#"${line%%[! ]*}"}" ;;
      "FAIL "*) line=${line#FAIL }; if [[ "$line" == *": "* ]]; then fail "${line%%: *}" "${line#*: }"; else fail "$line" "(no reason given)"; fi ;;
      "skip "*) line=${line#skip }; if [[ "$line" == *": "* ]]; then skip "${line%%: *}" "${line#*: }"; else skip "$line" "(no reason given)"; fi ;;
      *) printf '%s\n' "$line" ;;
    esac
  done < "$out"
  cat "$err" >&2
  # a script (heredoc "-" or a file) is a check: its exception is a FAIL; a "-c" one-liner is a
  # predicate whose exit status the caller tests (and may poll), so its exception is only a status
  if [ "${1:-}" != -c ] && grep -q '^Traceback ' "$err"; then
    fail "python_exception_${BASH_SOURCE[1]##*/}_line_${BASH_LINENO[0]}" "$(tail -1 "$err" | head -c 300)"
  fi
  rm -f "$out" "$err"
  return "$rc"
}
MPIRUN=(mpirun --oversubscribe --allow-run-as-root)
