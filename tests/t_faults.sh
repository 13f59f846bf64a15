#!/usr/bin/env bash
# tests/t_faults.sh — faults end to end on the smoke sweep (sweeps/smoke.json, with absolute data paths
# and more steps so a run can be hit mid-way): one rank SIGKILLed mid-run (recorded failed, the sweep
# goes on, finished runs untouched, a rerun retries only the failed run); a hung rank (SIGSTOP: the run is killed
# at timeout_s and recorded, nothing left running); SIGINT to the runner mid-run (exit 130, no partial
# record; the next invocation resumes, re-runs only the interrupted launch and loses nothing); a
# diverging run (--lr 1e6 --grad-clip 0: status diverged, exit 4 on every rank, no hang); a full and a
# read-only output directory (one clear line, exit 1, every file present complete).
# Not the sweep's normal behaviour (tests/t_sweep.sh) nor the spec parser (tests/test_sweep_spec.c).
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
SWEEP=$BUILD/sweep
TRAIN=$BUILD/train
PY=/usr/bin/python3
for f in "$SWEEP" "$TRAIN" "$BUILD/data/kjv/train.bin"; do
  [ -e "$f" ] || { fail faults_setup "$f missing (make && make data)"; exit 1; }
done
[ -x "$PY" ] || { fail faults_setup "$PY missing (used to read JSON)"; exit 1; }

T=$(mktemp -d /tmp/t_faults.XXXXXX)
MNT=""
# after a FAIL line, the run logs and records of every sweep and launch are kept for the post-mortem in
# $BUILD/test-logs/t_faults.kept/ (a failure under load may not come back when run again alone)
keep_logs() {
  [ -n "${MESHSWEEP_TEST_RESULTS:-}" ] && grep -q '^FAIL faults_' "$MESHSWEEP_TEST_RESULTS" 2>/dev/null || return 0
  local K=$BUILD/test-logs/t_faults.kept; case $K in /*) ;; *) K=$(pwd)/$K;; esac
  rm -rf "$K"; mkdir -p "$K" || return 0
  (cd "$T" && find . -path ./mnt -prune -o -type f \( -name '*.log' -o -name '*.err' -o -name '*.json' -o -name '*.spec' \) -print0 \
     | tar cf - --null -T - | tar xf - -C "$K") 2>/dev/null
  echo "t_faults: the logs of this run are kept in $K"
}
cleanup() {
  # anything a failed check left behind: stopped ranks first get SIGCONT so SIGKILL is not queued
  for p in $(pgrep -f "$T/" 2>/dev/null); do kill -CONT "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; done
  [ -n "$MNT" ] && umount "$MNT" 2>/dev/null
  keep_logs
  rm -rf "$T"
}
trap cleanup EXIT
# Generous timeouts under the sanitizers (every launch is 2-3x slower there).
SLOW=1; [ "$BUILD" = build-san ] && SLOW=3

# mkspec OUT NAME STEPS TIMEOUT [PYTHON-ASSIGNMENTS]: sweeps/smoke.json with absolute data paths
mkspec() {
  "$PY" - "$1" "$2" "$3" "$4" "${5:-}" "$(pwd)" <<'PY'
import json, sys
out, name, steps, timeout, extra, root = sys.argv[1:7]
d = json.load(open(f"{root}/sweeps/smoke.json"))
d["name"] = name; d["steps"] = int(steps); d["eval_every"] = int(steps); d["timeout_s"] = float(timeout)
d["data"] = f"{root}/{d['data']}"; d["eval_data"] = f"{root}/{d['eval_data']}"
exec(extra)
json.dump(d, open(out, "w"), indent=2)
PY
}
latest() { ls -d "$1"/*/ 2>/dev/null | sort | tail -1 | sed 's:/$::'; }
has_folder() { [ -n "$(latest "$1")" ]; }
# json_ok FILE PYEXPR: FILE is JSON and the expression on it (d) is true
json_ok() { "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' "$1" "$2" 2>/dev/null; }
# wait_for SECONDS COMMAND...: poll until the command succeeds; 1 on timeout
wait_for() {
  local until=$(( $(date +%s) + $1 )); shift
  until "$@"; do [ "$(date +%s)" -ge "$until" ] && return 1; sleep 0.2; done
}
log_has() { grep -q -- "$2" "$1" 2>/dev/null; }
# the train ranks (not mpirun) of this suite (their command line names a file below $T: a second copy of the
# suite running at the same time has ranks of the same meshes) whose command line holds PATTERN
rank_pids() {
  local p
  for p in $(pgrep -f -- "$T/.*$1"); do [ "$(cat /proc/$p/comm 2>/dev/null)" = train ] && echo "$p"; done
}
rank_of() { tr '\0' '\n' < "/proc/$1/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p'; }
# PID of rank R of the launch whose command line holds PATTERN
pid_of_rank() {
  local p
  for p in $(rank_pids "$1"); do [ "$(rank_of "$p")" = "$2" ] && { echo "$p"; return 0; }; done
  return 1
}
# every .json below DIR is complete JSON and no temp file is left: "nothing half-written"
all_complete() {
  local f
  for f in $(find "$1" -name '*.json'); do "$PY" -c 'import json,sys; json.load(open(sys.argv[1]))' "$f" 2>/dev/null || { echo "incomplete $f"; return 1; }; done
  if find "$1" \( -name '*.tmp*' -o -name '.*.train.json' \) | grep -q .; then echo "temp files: $(find "$1" -name '*.tmp*' -o -name '.*.train.json')"; return 1; fi
  return 0
}
# sha256 and mtime of every file below DIR except those matching the grep -v pattern
snapshot() { find "$1" -type f | grep -v -- "${2:-^$}" | sort | while read -r f; do echo "$(sha256sum < "$f" | cut -c1-16) $(stat -c %Y.%y "$f") $f"; done; }
leftovers() { pgrep -f "$T/" >/dev/null 2>&1; }

# ==== 1. one rank SIGKILLed in the middle of the 2x2 run ===========================================
mkspec "$T/kill.json" kill 12 $((120 * SLOW))
"$SWEEP" "$T/kill.json" --out-dir "$T/res" > /dev/null 2> "$T/kill.err" &
sp=$!
K=""; victim=""
if wait_for $((120 * SLOW)) has_folder "$T/res/kill" && K=$(latest "$T/res/kill") \
   && wait_for $((240 * SLOW)) log_has "$K/runs/2x2.log" 'train: step 1/'; then
  before_1x4=$(snapshot "$K/runs" '2x2\|4x1')
  victim=$(pid_of_rank 'runs/\.2x2\.train\.json' 2)
  [ -n "$victim" ] && kill -KILL "$victim"
fi
rc=0; wait "$sp" || rc=$?
sleep 0.5
if [ -z "$victim" ]; then
  fail faults_sigkill_rank "never saw rank 2 of the 2x2 run (rc $rc): $(tail -3 "$T/kill.err" | tr '\n' ' ')"
else
  why=""
  [ "$rc" -eq 0 ] || why="$why sweep exit $rc;"
  json_ok "$K/runs/2x2.json" 'd["status"]=="failed" and d["error"]' || why="$why 2x2 not recorded failed;"
  json_ok "$K/runs/1x4.json" 'd["status"]=="ok"' && json_ok "$K/runs/4x1.json" 'd["status"]=="ok" and len(d["steps"])==12' \
    || why="$why 1x4/4x1 not ok (the sweep must go on);"
  json_ok "$K/summary.json" '[m["status"] for m in d["meshes"]]==["ok","failed","ok"]' || why="$why summary wrong;"
  [ "$before_1x4" = "$(snapshot "$K/runs" '2x2\|4x1')" ] || why="$why a finished 1x4 file changed;"
  msg=$(all_complete "$K") || why="$why $msg;"
  leftovers && why="$why processes left: $(pgrep -fa "$T/" | head -2 | tr '\n' ' ');"
  [ -z "$why" ] && ok faults_sigkill_rank_recorded_failed || fail faults_sigkill_rank_recorded_failed "$why"
  # a rerun retries only the failed run: ok runs are final, and their files stay as they were
  before=$(snapshot "$K/runs" '2x2\.json\|2x2\.log')
  "$SWEEP" "$T/kill.json" --out-dir "$T/res" > /dev/null 2> "$T/kill2.err"; rc=$?
  after=$(snapshot "$K/runs" '2x2\.json\|2x2\.log')
  if [ $rc -eq 0 ] && [ "$(grep -c 'skipped: resumed from' "$T/kill2.err")" -eq 2 ] && grep -q '2x2  run: was failed .*retrying' "$T/kill2.err" \
     && json_ok "$K/runs/2x2.json" 'd["status"]=="ok"' && [ "$before" = "$after" ]; then
    ok faults_sigkill_rerun_retries_only_failed
  else fail faults_sigkill_rerun_retries_only_failed "rc $rc, $(grep -c skipped "$T/kill2.err") skipped, changed: $(diff <(echo "$before") <(echo "$after") | head -2 | tr '\n' ' ')"; fi
fi

# ==== 2. a hung run: rank 1 of the 4x1 run stopped (SIGSTOP), killed at the timeout ================
TO=$((25 * SLOW))
mkspec "$T/hang.json" hang 8 $TO 'd["meshes"] = ["4x1", "2x2"]'
"$SWEEP" "$T/hang.json" --out-dir "$T/res" > /dev/null 2> "$T/hang.err" &
sp=$!
H=""; victim=""
if wait_for $((120 * SLOW)) has_folder "$T/res/hang" && H=$(latest "$T/res/hang") \
   && wait_for $((240 * SLOW)) log_has "$H/runs/4x1.log" 'train: step 1/'; then
  victim=$(pid_of_rank 'runs/\.4x1\.train\.json' 1)
  [ -n "$victim" ] && kill -STOP "$victim"
fi
start=$(date +%s)
rc=0; wait "$sp" || rc=$?
took=$(( $(date +%s) - start ))
sleep 0.5
if [ -z "$victim" ]; then
  fail faults_hung_run "never saw rank 1 of the 4x1 run (rc $rc): $(tail -3 "$T/hang.err" | tr '\n' ' ')"
else
  why=""
  [ "$rc" -eq 0 ] || why="$why sweep exit $rc;"
  json_ok "$H/runs/4x1.json" 'd["status"]=="timeout" and "timeout" in d["error"]' || why="$why 4x1 not recorded timeout;"
  json_ok "$H/runs/2x2.json" 'd["status"]=="ok"' || why="$why 2x2 after it not ok;"
  json_ok "$H/summary.json" '[m["status"] for m in d["meshes"]]==["timeout","ok"]' || why="$why summary wrong;"
  [ -e "/proc/$victim" ] && why="$why the stopped rank $victim is still there;"
  leftovers && why="$why processes left: $(pgrep -fa "$T/" | head -2 | tr '\n' ' ');"
  msg=$(all_complete "$H") || why="$why $msg;"
  [ -z "$why" ] && ok "faults_hung_run_killed_at_timeout  (timeout ${TO}s, sweep ended ${took}s after the stop)" \
    || fail faults_hung_run_killed_at_timeout "$why"
fi

# ==== 3. SIGINT to the runner during the 2x2 run, then resume ======================================
mkspec "$T/int.json" int 12 $((120 * SLOW))
"$SWEEP" "$T/int.json" --out-dir "$T/res" > /dev/null 2> "$T/int.err" &
sp=$!
N=""; sent=0
if wait_for $((120 * SLOW)) has_folder "$T/res/int" && N=$(latest "$T/res/int") \
   && wait_for $((240 * SLOW)) log_has "$N/runs/2x2.log" 'train: step 1/'; then
  kill -INT "$sp" && sent=1
fi
rc=0; wait "$sp" || rc=$?
sleep 0.5
if [ $sent -eq 0 ]; then
  fail faults_sigint "never reached the 2x2 run (rc $rc): $(tail -3 "$T/int.err" | tr '\n' ' ')"
else
  why=""
  [ "$rc" -eq 130 ] || why="$why exit $rc, want 130;"
  [ -e "$N/runs/2x2.json" ] && why="$why a record of the interrupted run exists;"
  [ -e "$N/summary.json" ] && why="$why summary written;"
  json_ok "$N/runs/1x4.json" 'd["status"]=="ok"' || why="$why 1x4 lost;"
  msg=$(all_complete "$N") || why="$why $msg;"
  leftovers && why="$why processes left: $(pgrep -fa "$T/" | head -2 | tr '\n' ' ');"
  grep -q 'interrupted' "$T/int.err" || why="$why no 'interrupted' message;"
  [ -z "$why" ] && ok faults_sigint_stops_cleanly || fail faults_sigint_stops_cleanly "$why"
  # resume: every file written before the interrupt stays byte for byte (nothing re-run); only the
  # interrupted launch (its log is rewritten) and what came after it run
  before=$(snapshot "$N" 'runs/2x2\.log$')
  "$SWEEP" "$T/int.json" --out-dir "$T/res" > /dev/null 2> "$T/int2.err"; rc=$?
  after=$(snapshot "$N" 'runs/2x2\.log$' | grep -F -f <(awk '{print $NF}' <<<"$before"))
  why=""
  [ $rc -eq 0 ] || why="$why resume exit $rc: $(tail -2 "$T/int2.err" | tr '\n' ' ');"
  grep -q "resuming $N" "$T/int2.err" || why="$why did not resume $N;"
  [ "$before" = "$after" ] || why="$why files of finished launches changed: $(diff <(echo "$before") <(echo "$after") | head -3 | tr '\n' ' ');"
  grep -q '1x4  run b=[0-9]* \.\.\. skipped' "$T/int2.err" || why="$why 1x4 not skipped;"
  grep -q '2x2  plan: max batch [0-9]* (done before)' "$T/int2.err" || why="$why 2x2 plan re-run;"
  [ "$(grep '2x2  probe' "$T/int2.err" | grep -vc 'done before')" -eq 0 ] || why="$why a 2x2 probe re-run;"
  json_ok "$N/summary.json" '[m["status"] for m in d["meshes"]]==["ok","ok","ok"]' || why="$why final summary not all ok;"
  [ "$(ls -d "$T/res/int"/*/ | wc -l)" -eq 1 ] || why="$why a second results folder;"
  msg=$(all_complete "$N") || why="$why $msg;"
  [ -z "$why" ] && ok faults_sigint_resume_loses_nothing_runs_nothing_twice || fail faults_sigint_resume_loses_nothing_runs_nothing_twice "$why"
fi

# ==== 4. a diverging run ==========================================================================
# every rank exits 4 on its own: the wrapper exits 0 so that mpirun never aborts a rank for us
rm -f "$T"/rc.*
start=$(date +%s)
timeout $((120 * SLOW)) "${MPIRUN[@]}" -np 4 sh -c '"$0" "$@"; echo $? > "'"$T"'/rc.$OMPI_COMM_WORLD_RANK"; exit 0' \
  "$TRAIN" --tp 2 --steps 20 --lr 1e6 --grad-clip 0 --seq-len 64 --out "$T/div.json" > "$T/div.log" 2>&1
trc=$?
codes=$(cat "$T"/rc.0 "$T"/rc.1 "$T"/rc.2 "$T"/rc.3 2>/dev/null | tr '\n' ' ')
if [ $trc -eq 0 ] && [ "$codes" = "4 4 4 4 " ] && json_ok "$T/div.json" 'd["status"]=="diverged" and len(d["steps"]) < 20' \
   && [ "$(grep -c 'diverged at step' "$T/div.log")" -eq 1 ]; then ok "faults_diverged_exit4_every_rank  ($(( $(date +%s) - start ))s)"
else fail faults_diverged_exit4_every_rank "timeout/mpirun rc $trc, rank exit codes '$codes', $(grep -c 'diverged at step' "$T/div.log") diverged lines: $(tail -2 "$T/div.log" | tr '\n' ' ')"; fi
timeout $((60 * SLOW)) "$TRAIN" --steps 20 --lr 1e6 --grad-clip 0 --seq-len 64 --log-every 100 --out "$T/div1.json" 2> "$T/div1.err"; rc=$?
if [ $rc -eq 4 ] && [ "$(grep -c '^train: diverged at step [0-9]*: ' "$T/div1.err")" -eq 1 ] && json_ok "$T/div1.json" 'd["status"]=="diverged"'; then ok faults_diverged_one_rank_exit4
else fail faults_diverged_one_rank_exit4 "exit $rc: $(tail -2 "$T/div1.err" | tr '\n' ' ')"; fi
# in the sweep: the measured runs diverge (probes are 2 steps, before the blow-up), the sweep completes
mkspec "$T/div.json.spec" diverge 10 $((120 * SLOW)) 'd["lr"] = 1e6; d["grad_clip"] = 0.0'
"$SWEEP" "$T/div.json.spec" --out-dir "$T/res" > /dev/null 2> "$T/divs.err"; rc=$?
V=$(latest "$T/res/diverge")
if [ $rc -eq 0 ] && [ -n "$V" ] && json_ok "$V/summary.json" '[m["status"] for m in d["meshes"]]==["diverged"]*3' \
   && json_ok "$V/runs/2x2.json" 'd["status"]=="diverged" and "non-finite" in d["error"]' && msg=$(all_complete "$V"); then ok faults_diverged_in_sweep
else fail faults_diverged_in_sweep "rc $rc: $(tail -3 "$T/divs.err" | tr '\n' ' ') $(cat "$V/summary.json" 2>/dev/null | head -c 200)"; fi

# ==== 5. full and read-only output directories =====================================================
MNT=$T/mnt; mkdir -p "$MNT"
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=256k tmpfs "$MNT" 2>/dev/null; then
  # full: the disk fills up while the sweep runs (filled right after the first run is complete)
  mkspec "$T/full.json" full 4 $((120 * SLOW))
  "$SWEEP" "$T/full.json" --out-dir "$MNT/res" > /dev/null 2> "$T/full.err" &
  sp=$!
  F=""; filled=0
  if wait_for $((120 * SLOW)) has_folder "$MNT/res/full" && F=$(latest "$MNT/res/full") \
     && wait_for $((240 * SLOW)) test -e "$F/runs/1x4.json"; then
    dd if=/dev/zero of="$MNT/filler" bs=4k 2>/dev/null; filled=1
  fi
  rc=0; wait "$sp" || rc=$?
  why=""
  [ $filled -eq 1 ] || why="$why never saw runs/1x4.json;"
  [ $rc -eq 1 ] || why="$why exit $rc, want 1;"
  grep -q 'No space left on device' "$T/full.err" || why="$why no 'No space left' line: $(tail -2 "$T/full.err" | tr '\n' ' ');"
  grep -q '^sweep: stopped: the results folder cannot be written' "$T/full.err" || why="$why did not stop at the first failed write;"
  grep -q '4x1' "$T/full.err" && why="$why went on to 4x1 after the disk was full;"
  [ -n "$F" ] && { msg=$(all_complete "$F") || why="$why $msg;"; }
  json_ok "$F/runs/1x4.json" 'd["status"]=="ok"' || why="$why the finished 1x4 record was damaged;"
  leftovers && why="$why processes left;"
  [ -z "$why" ] && ok faults_full_disk_mid_sweep || fail faults_full_disk_mid_sweep "$why"
  # full before the start: nothing can be created; one line, exit 1, no half-made folder with files
  expect_exit faults_full_disk_at_start 1 'sweep: cannot (create|write) .*No space left on device' -- "$SWEEP" "$T/full.json" --out-dir "$MNT/res2" --fresh
  msg=$(all_complete "$MNT") && ok faults_full_disk_nothing_half_written || fail faults_full_disk_nothing_half_written "$msg"
  # read-only: remount the same folder read-only (the full sweep's complete files are in it)
  rm -f "$MNT/filler"
  before=$(snapshot "$MNT")
  if mount -o remount,ro "$MNT" 2>/dev/null; then
    expect_exit faults_readonly_new_sweep 1 'sweep: cannot (create|write) .*Read-only file system' -- "$SWEEP" "$T/full.json" --out-dir "$MNT/res" --fresh
    expect_exit faults_readonly_resume 1 'sweep: cannot write in .*Read-only file system' -- "$SWEEP" "$T/full.json" --out-dir "$MNT/res"
    expect_exit faults_readonly_train_out 2 'cannot write|Read-only' -- "$TRAIN" --steps 1 --out "$MNT/run.json"
    expect_exit faults_readonly_mkdata 1 'Read-only file system' -- "$BUILD/mkdata" "$BUILD/data/kjv/kjv.txt" "$MNT/data"
    [ "$before" = "$(snapshot "$MNT")" ] && ok faults_readonly_nothing_changed || fail faults_readonly_nothing_changed "files changed"
  else
    skip faults_readonly "cannot remount a tmpfs read-only here"
  fi
  umount "$MNT" && MNT=""
else
  skip faults_full_and_readonly "needs root and tmpfs mounts (mount -t tmpfs) to make a full or read-only folder"
fi
exit 0
