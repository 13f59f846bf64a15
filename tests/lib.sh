# tests/lib.sh — shell helpers for tests/t_*.sh: ok/fail/skip lines as tests/check.h prints them.
BUILD=${BUILD:-build}
ok()   { echo "ok   $1"; }
fail() { echo "FAIL $1: $2"; }
skip() { echo "skip $1: $2"; }
# check NAME COND-COMMAND... : runs the command, ok if it succeeds
check() { local n=$1; shift; if "$@"; then ok "$n"; else fail "$n" "command failed: $*"; fi; }
# expect_exit NAME CODE PATTERN -- CMD... : CMD must exit CODE and print exactly one line on stderr matching PATTERN
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
MPIRUN=(mpirun --oversubscribe --allow-run-as-root)
