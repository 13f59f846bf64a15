#!/usr/bin/env bash
# tests/t_sweep.sh — build/sweep end to end with the real build/train: the smoke sweep (records,
# summary, CSV, charts, report, max batch = the plan's, probes), resume without re-running, a mesh
# that fails while the others complete, a run past its timeout, shell syntax in a spec field, Ctrl-C,
# equivalence mode, dry run, and spec errors (exit 2, one line). Not the parser's unit tests
# (tests/test_sweep_spec.c). Uses python3 (or jq) only to validate JSON.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
SWEEP=$BUILD/sweep
TRAIN=$BUILD/train

if [ ! -x "$TRAIN" ]; then fail sweep_e2e "$TRAIN missing"; exit 1; fi
if [ ! -x "$SWEEP" ]; then fail sweep_e2e "$SWEEP missing"; exit 1; fi
if [ ! -f "$BUILD/data/kjv/train.bin" ]; then fail sweep_e2e "$BUILD/data/kjv/train.bin missing (make data)"; exit 1; fi

PY=""
for p in /usr/bin/python3 python3; do command -v "$p" >/dev/null 2>&1 && { PY=$p; break; }; done
if [ -z "$PY" ] && ! command -v jq >/dev/null 2>&1; then fail sweep_e2e "neither python3 nor jq to validate JSON"; exit 1; fi

T=$(mktemp -d /tmp/t_sweep.XXXXXX)
trap 'rm -rf "$T"' EXIT
# specs below point at the data by absolute path, so they work from any folder
DATA=$(pwd)/$BUILD/data/kjv/train.bin
VAL=$(pwd)/$BUILD/data/kjv/val.bin

# json_ok FILE PYEXPR : FILE is valid JSON and PYEXPR (python, `d` is the document) is true
json_ok() {
  if [ -n "$PY" ]; then
    "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' "$1" "$2" 2>/dev/null
  else jq -e . "$1" >/dev/null 2>&1; fi
}
json_get() { "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }
latest() { ls -d "$1"/*/ 2>/dev/null | sort | tail -1 | sed 's:/$::'; }
mtimes() { stat -c '%n %y' "$1"/runs/*.json | sort; }
leftovers() { pgrep -f "$T/" >/dev/null 2>&1; }

# ---- spec errors: exit 2, one line naming the key -----------------------------------------------
spec() { # spec FILE JSON
  printf '%s\n' "$2" > "$1"
}
base='"world": 4, "model": "tiny", "seq_len": 32, "steps": 2, "lr": 0.003, "data": "'$DATA'", "timeout_s": 60'
spec "$T/e1.json" '{"name": "e", '"$base"', "meshes": ["1x4"], "batch_size": 1, "bogus": 1}'
expect_exit sweep_spec_unknown_key 2 'bogus: unknown key' -- "$SWEEP" "$T/e1.json" --out-dir "$T/r"
spec "$T/e2.json" '{"name": "e", '"$base"', "meshes": ["3x"], "batch_size": 1}'
expect_exit sweep_spec_bad_mesh 2 'meshes\[0\]' -- "$SWEEP" "$T/e2.json" --out-dir "$T/r"
spec "$T/e3.json" '{"name": "e", '"$base"', "meshes": ["2x4"], "batch_size": 1}'
expect_exit sweep_spec_mesh_world 2 'world is 4' -- "$SWEEP" "$T/e3.json" --out-dir "$T/r"
spec "$T/e4.json" '{"name": "../../escape", '"$base"', "meshes": ["1x4"], "batch_size": 1}'
expect_exit sweep_spec_name_escape 2 '^sweep: .*name:' -- "$SWEEP" "$T/e4.json" --out-dir "$T/r"
spec "$T/e5.json" '{"name": "e", '"$base"', "meshes": ["1x4"], "batch_size": "max"}'
expect_exit sweep_spec_max_needs_budget 2 'mem_budget' -- "$SWEEP" "$T/e5.json" --out-dir "$T/r"
spec "$T/e6.json" '{"name": "e", '"$base"', "meshes": ["1x4"], "batch_size": 1, "steps": "2"}'
expect_exit sweep_spec_wrong_type 2 'steps' -- "$SWEEP" "$T/e6.json" --out-dir "$T/r"
spec "$T/e7.json" '{"name": "e", '"$base"', "meshes": ["1x4", "4x1"], "global_batch": 6}'
expect_exit sweep_spec_global_batch_divides 2 'global_batch' -- "$SWEEP" "$T/e7.json" --out-dir "$T/r"
expect_exit sweep_spec_missing_file 2 'cannot open' -- "$SWEEP" "$T/none.json"
expect_exit sweep_unknown_option 2 'unknown option' -- "$SWEEP" sweeps/smoke.json --bogus
check sweep_spec_errors_write_nothing test ! -e "$T/r"

# ---- dry run: commands, no files -----------------------------------------------------------------
out=$("$SWEEP" sweeps/smoke.json --dry-run --out-dir "$T/dry" 2>&1); rc=$?
if [ $rc -eq 0 ] && grep -q -- '--plan' <<<"$out" && grep -q 'mpirun' <<<"$out" && [ ! -e "$T/dry" ]; then ok sweep_dry_run
else fail sweep_dry_run "rc $rc, files: $(ls "$T/dry" 2>&1 | head -1), out: $(head -c 300 <<<"$out")"; fi

# ---- the smoke sweep -----------------------------------------------------------------------------
"$SWEEP" sweeps/smoke.json --out-dir "$T/res" > "$T/smoke.out" 2> "$T/smoke.err"; rc=$?
D=$(latest "$T/res/smoke")
if [ $rc -ne 0 ] || [ -z "$D" ]; then
  fail sweep_smoke_runs "exit $rc: $(tail -5 "$T/smoke.err")"
else
  ok sweep_smoke_runs
  meshes=$(json_get sweeps/smoke.json '" ".join(d["meshes"])')
  bad=""
  for m in $meshes; do
    json_ok "$D/runs/$m.json" 'd["schema"]=="meshsweep.run/1" and d["status"]=="ok" and all(k in d for k in ("mesh","batch_size","global_batch","steps","eval","summary","memory","config")) and len(d["steps"])>0 and d["summary"]["tok_s"]>0' || bad="$bad $m"
  done
  [ -z "$bad" ] && ok sweep_smoke_records || fail sweep_smoke_records "bad or failed records:$bad"
  bad=""
  for f in "$D"/runs/*.json; do json_ok "$f" 'isinstance(d, dict)' || bad="$bad $f"; done
  [ -z "$bad" ] && ok sweep_smoke_all_json_valid || fail sweep_smoke_all_json_valid "invalid:$bad"
  check sweep_smoke_spec_copy json_ok "$D/spec.json" 'd == json.load(open("sweeps/smoke.json"))'
  check sweep_smoke_summary json_ok "$D/summary.json" 'd["schema"]=="meshsweep.sweep/1" and len(d["meshes"])==3 and all(m["status"]=="ok" and m["tok_s"]>0 and m["peak_bytes"]>0 and m["final_loss"]>0 and len(m["by_category"])==7 and len(m["max_batch_search"]["probes"])>=2 for m in d["meshes"])'
  rows=$(tail -n +2 "$D/summary.csv" | grep -c .)
  cols=$(head -1 "$D/summary.csv" | awk -F, '{print NF}')
  badrows=$(awk -F, -v n="$cols" 'NF != n' "$D/summary.csv" | wc -l)
  if [ "$rows" -eq 3 ] && [ "$badrows" -eq 0 ] && head -1 "$D/summary.csv" | grep -q '^mesh,dp,tp,batch_size,global_batch,tok_s,tok_s_per_rank,mfu,peak_bytes,.*activations_bytes.*,final_loss,final_eval_loss,status$'; then ok sweep_smoke_csv
  else fail sweep_smoke_csv "rows $rows, ragged $badrows, header $(head -1 "$D/summary.csv")"; fi
  bad=""
  for c in loss loss_tokens throughput memory max_batch; do
    [ -s "$D/$c.png" ] && [ "$(head -c 8 "$D/$c.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || bad="$bad $c.png"
    [ -s "$D/$c.svg" ] && grep -q '<svg' "$D/$c.svg" || bad="$bad $c.svg"
    grep -q "($c.png)" "$D/report.md" || bad="$bad report:$c"
  done
  [ -z "$bad" ] && ok sweep_smoke_charts || fail sweep_smoke_charts "missing, empty or unreferenced:$bad"
  [ -s "$D/memory.dat" ] && [ -s "$D/throughput.dat" ] && [ -s "$D/max_batch.dat" ] && ok sweep_smoke_plot_data || fail sweep_smoke_plot_data "a .dat file is missing"
  grep -q '\[1/3\] 1x4  probe b=[0-9]* \.\.\. fits' "$T/smoke.err" && grep -q "report: $D/report.md" "$T/smoke.err" \
    && ok sweep_smoke_progress || fail sweep_smoke_progress "$(head -3 "$T/smoke.err")"
  # the max batch is the plan's, confirmed by probes at b (ok) and b+1 (oom)
  bad=""
  for m in $meshes; do
    tp=${m#*x}
    "$TRAIN" --plan --world 4 --tp "$tp" --batch-size max --mem-budget "$(json_get sweeps/smoke.json 'd["mem_budget"]')" \
      --model tiny --seq-len "$(json_get sweeps/smoke.json 'd["seq_len"]')" --backend cpu --out "$T/plan-$m.json" >/dev/null 2>&1 \
      || bad="$bad $m:plan-exit-$?"
    want=$(json_get "$T/plan-$m.json" 'd["batch_size"]')
    got=$(json_get "$D/runs/$m.json" 'd["batch_size"]')
    [ "$want" = "$got" ] || bad="$bad $m:plan=$want,sweep=$got"
    json_ok "$D/runs/$m.probe-b$got.json" 'd["status"]=="ok"' || bad="$bad $m:probe-b$got"
    json_ok "$D/runs/$m.probe-b$((got+1)).json" 'd["status"]=="oom"' || bad="$bad $m:probe-b$((got+1))"
  done
  [ -z "$bad" ] && ok sweep_max_batch_matches_plan || fail sweep_max_batch_matches_plan "$bad"
  b1=$(json_get "$D/runs/1x4.json" 'd["batch_size"]'); b4=$(json_get "$D/runs/4x1.json" 'd["batch_size"]')
  [ "$b1" -gt "$b4" ] && ok sweep_max_batch_grows_with_tp || fail sweep_max_batch_grows_with_tp "1x4 $b1, 4x1 $b4"

  # ---- resume: nothing re-run -------------------------------------------------------------------
  before=$(mtimes "$D")
  "$SWEEP" sweeps/smoke.json --out-dir "$T/res" > /dev/null 2> "$T/resume.err"; rc=$?
  after=$(mtimes "$D")
  skipped=$(grep -c 'skipped' "$T/resume.err")
  if [ $rc -eq 0 ] && [ "$before" = "$after" ] && [ "$skipped" -eq 3 ] && grep -q "resuming $D" "$T/resume.err" \
     && [ "$(ls -d "$T/res/smoke"/*/ | wc -l)" -eq 1 ] && ! grep -q 'probe b=' "$T/resume.err"; then ok sweep_resume_skips
  else fail sweep_resume_skips "rc $rc, skipped $skipped, records changed: $([ "$before" = "$after" ] && echo no || echo yes)"; fi
fi

# ---- a failing mesh (tp does not divide the heads), the others complete; --fresh ------------------
mkdir -p "$T/h6"
printf '{"vocab_size": 256, "hidden_size": 48, "intermediate_size": 96, "num_hidden_layers": 2,
 "num_attention_heads": 6, "num_key_value_heads": 6, "max_position_embeddings": 256}\n' > "$T/h6/config.json"
spec "$T/fail.json" '{"name": "fail", "world": 4, "meshes": ["4x1", "1x4", "2x2"], "model": "'"$T"'/h6/config.json",
  "seq_len": 32, "steps": 2, "lr": 0.003, "batch_size": 2, "data": "'"$DATA"'", "timeout_s": 120}'
"$SWEEP" "$T/fail.json" --out-dir "$T/res" > /dev/null 2> "$T/fail.err"; rc=$?
F=$(latest "$T/res/fail")
if [ $rc -eq 0 ] && [ -n "$F" ] \
   && json_ok "$F/runs/1x4.json" 'd["status"]=="failed" and "divide" in d["error"]' \
   && json_ok "$F/runs/4x1.json" 'd["status"]=="ok"' && json_ok "$F/runs/2x2.json" 'd["status"]=="ok"' \
   && json_ok "$F/summary.json" '[m["status"] for m in d["meshes"]]==["ok","failed","ok"]' \
   && [ -s "$F/loss.png" ] && grep -q 'failed' "$F/report.md"; then ok sweep_failed_mesh_recorded
else fail sweep_failed_mesh_recorded "rc $rc: $(tail -3 "$T/fail.err")"; fi
sleep 1 # a new timestamp
"$SWEEP" "$T/fail.json" --out-dir "$T/res" --fresh > /dev/null 2> "$T/fresh.err"; rc=$?
n=$(ls -d "$T/res/fail"/*/ | wc -l)
[ $rc -eq 0 ] && [ "$n" -eq 2 ] && ! grep -q skipped "$T/fresh.err" && ok sweep_fresh_new_folder || fail sweep_fresh_new_folder "rc $rc, folders $n"

# ---- a run past its timeout is killed and recorded ------------------------------------------------
spec "$T/slow.json" '{"name": "slow", "world": 2, "meshes": ["2x1"], "model": "tiny", "seq_len": 64, "steps": 100000,
  "lr": 0.003, "batch_size": 1, "data": "'"$DATA"'", "timeout_s": 1}'
start=$(date +%s)
"$SWEEP" "$T/slow.json" --out-dir "$T/res" > /dev/null 2> "$T/slow.err"; rc=$?
took=$(( $(date +%s) - start ))
S=$(latest "$T/res/slow")
sleep 0.5
if [ $rc -eq 0 ] && [ -n "$S" ] && json_ok "$S/runs/2x1.json" 'd["status"]=="timeout" and "timeout" in d["error"]' \
   && [ "$took" -lt 40 ] && ! leftovers; then ok sweep_timeout_recorded
else fail sweep_timeout_recorded "rc $rc, ${took}s, leftovers: $(pgrep -fa "$T/" | head -2)"; fi

# ---- shell syntax in a spec field is data, not a command --------------------------------------------
spec "$T/inject.json" '{"name": "inject", "world": 2, "meshes": ["1x2"], "model": "tiny", "seq_len": 32, "steps": 2,
  "lr": 0.003, "batch_size": 1, "data": "x; touch '"$T"'/pwned", "timeout_s": 60}'
"$SWEEP" "$T/inject.json" --out-dir "$T/res" > /dev/null 2> "$T/inject.err"; rc=$?
I=$(latest "$T/res/inject")
if [ $rc -eq 0 ] && [ ! -e "$T/pwned" ] && json_ok "$I/runs/1x2.json" 'd["status"]=="failed"' \
   && grep -q "x; touch $T/pwned" "$I/runs/1x2.log"; then ok sweep_shell_syntax_is_data
else fail sweep_shell_syntax_is_data "rc $rc, pwned: $(ls "$T/pwned" 2>&1)"; fi

# ---- Ctrl-C: forwarded, no partial record, exit 130 -------------------------------------------------
spec "$T/int.json" '{"name": "int", "world": 2, "meshes": ["2x1", "1x2"], "model": "tiny", "seq_len": 64, "steps": 100000,
  "lr": 0.003, "batch_size": 1, "data": "'"$DATA"'", "timeout_s": 300}'
"$SWEEP" "$T/int.json" --out-dir "$T/res" > /dev/null 2> "$T/int.err" &
pid=$!
sleep 3
kill -INT "$pid"
rc=0; wait "$pid" || rc=$?
N=$(latest "$T/res/int")
sleep 0.5
if [ $rc -eq 130 ] && [ -n "$N" ] && [ -z "$(ls "$N/runs/"*.json 2>/dev/null)" ] && ! ls "$N"/runs/.*tmp* >/dev/null 2>&1 \
   && [ ! -e "$N/summary.json" ] && ! leftovers; then ok sweep_interrupt
else fail sweep_interrupt "rc $rc, files: $(ls -a "$N/runs" 2>&1 | tr '\n' ' '), leftovers: $(pgrep -fa "$T/" | head -2)"; fi

# ---- equivalence mode: same global batch, loss deviation reported ------------------------------------
spec "$T/eq.json" '{"name": "eq", "world": 2, "meshes": ["1x2", "2x1"], "model": "tiny", "seq_len": 32, "steps": 3,
  "lr": 0.003, "global_batch": 2, "data": "'"$DATA"'", "eval_data": "'"$VAL"'", "timeout_s": 120}'
"$SWEEP" "$T/eq.json" --out-dir "$T/res" > /dev/null 2> "$T/eq.err"; rc=$?
E=$(latest "$T/res/eq")
if [ $rc -eq 0 ] && json_ok "$E/summary.json" 'd["mode"]=="global_batch" and d["loss_deviation"]["steps_compared"]==3 and d["loss_deviation"]["max_rel"] < 1e-3 and [m["batch_size"] for m in d["meshes"]]==[2,1]' \
   && grep -q 'largest relative loss deviation' "$T/eq.err"; then ok sweep_equivalence_deviation
else fail sweep_equivalence_deviation "rc $rc: $(tail -2 "$T/eq.err")"; fi
exit 0
