# tests/san/env.sh — sanitizer settings for the test suite built with `make test SAN=1` (BUILD=build-san).
# Sourced by tests/run.sh. Every sanitizer stop makes the program exit 86. ASan and LSan reports also
# go to files under $BUILD/san-logs/, so a report is found even when a test ignores a child's exit code
# and stderr (a leak is only found at exit, after the output a test looks at was written); san_check,
# called by run.sh after the last test, turns each such file into a FAIL line. UBSan reports (GCC's
# combined runtime ignores log_path for them) go to stderr and, with -fno-sanitize-recover, stop the
# program at the first one, so the test that ran it fails on the exit code or the missing output.
# Not the suppressions themselves (tests/san/lsan.supp, ubsan.supp).
SAN_DIR=$(pwd)/tests/san
SAN_LOGS=$(pwd)/$BUILD/san-logs
rm -rf "$SAN_LOGS"; mkdir -p "$SAN_LOGS"
# exitcode=86: distinct from every documented exit code (0-4, 130), so no test can mistake a
# sanitizer stop for an expected failure. fast_unwind_on_malloc=0: see lsan.supp.
# allocator_may_return_null=1: an absurd allocation returns NULL as in libc, so the engine's own
# "out of memory" path is what gets tested instead of ASan aborting first.
export ASAN_OPTIONS="exitcode=86:allocator_may_return_null=1:detect_leaks=1:fast_unwind_on_malloc=0:malloc_context_size=30:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=0:check_initialization_order=1:log_path=$SAN_LOGS/asan"
export LSAN_OPTIONS="suppressions=$SAN_DIR/lsan.supp:print_suppressions=0:exitcode=86"
export UBSAN_OPTIONS="suppressions=$SAN_DIR/ubsan.supp:print_stacktrace=1:halt_on_error=1:exitcode=86:log_path=$SAN_LOGS/ubsan"

# Print one FAIL line per sanitizer report file (with its first lines) and return the count.
san_check() {
  local n=0 f
  for f in "$SAN_LOGS"/*; do
    [ -s "$f" ] || continue
    n=$((n + 1))
    echo "FAIL sanitizer_report $(basename "$f"): $(grep -m1 -E 'ERROR|runtime error|leak' "$f" | head -c 300)"
    sed 's/^/    /' "$f" | head -20
  done
  return $n
}
