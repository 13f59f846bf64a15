#!/usr/bin/env bash
# tests/t_sweep.sh — build/sweep end to end with the real build/train: the smoke sweep (records,
# summary, CSV, charts, report, max batch = the plan's, probes), resume without re-running, a mesh
# that fails while the others complete (and is retried), a run past its timeout, shell syntax in a
# spec field, Ctrl-C, equivalence mode, dry run, spec errors and missing inputs (exit 2, one line,
# before any launch); resume only of a matching folder (build, runner.json), the folder lock, records
# that are not what was asked (launcher -np, empty launcher, a hand-written record), incomplete
# charts and an unwritable report, kill -9 of the runner, --plan-only, hosts and cores in the report;
# grids (bad axes, a cell's own search, record and row, charts by axis, the report's answers, resume
# per cell, --plan-only, the 8B grid's plans) and the matched global batch (when train takes it).
# Not the parser's unit tests (tests/test_sweep_spec.c). Uses python3 (or jq) only to validate JSON.
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
# inputs the spec names are checked before any launch (exit 2 naming the key, nothing created)
spec "$T/m1.json" '{"name": "e", '"${base/$DATA/$T/none.bin}"', "meshes": ["1x4"], "batch_size": 1}'
expect_exit sweep_input_data_missing 2 "data: cannot open $T/none.bin" -- "$SWEEP" "$T/m1.json" --out-dir "$T/r"
spec "$T/m2.json" '{"name": "e", '"$base"', "meshes": ["1x4"], "batch_size": 1, "eval_data": "'"$T"'"}'
expect_exit sweep_input_eval_data_folder 2 'eval_data: .* is a folder' -- "$SWEEP" "$T/m2.json" --out-dir "$T/r"
spec "$T/m3.json" '{"name": "e", '"${base/\"tiny\"/\"no-such-preset\"}"', "meshes": ["1x4"], "batch_size": 1}'
expect_exit sweep_input_unknown_preset 2 '^sweep: .*: model: ' -- "$SWEEP" "$T/m3.json" --out-dir "$T/r"
spec "$T/m4.json" '{"name": "e", '"${base/\"tiny\"/\"$T/no/config.json\"}"', "meshes": ["1x4"], "batch_size": 1}'
expect_exit sweep_input_missing_config 2 '^sweep: .*: model: ' -- "$SWEEP" "$T/m4.json" --out-dir "$T/r"
spec "$T/m5.json" '{"name": "e", '"$base"', "meshes": ["1x4"], "batch_size": 1, "launcher": ["no-such-mpirun", "-np", "{world}"]}'
expect_exit sweep_input_launcher_not_on_path 2 'launcher\[0\]: no-such-mpirun is not a program on PATH' -- "$SWEEP" "$T/m5.json" --out-dir "$T/r"
spec "$T/m6.json" '{"name": "e", '"$base"', "meshes": ["1x4"], "batch_size": 1, "extra_args": ["--steps", "9"]}'
expect_exit sweep_spec_extra_args_owned 2 'extra_args\[0\]: "--steps" is set by the runner' -- "$SWEEP" "$T/m6.json" --out-dir "$T/r"
check sweep_spec_errors_write_nothing test ! -e "$T/r"

# ---- dry run: commands, no files -----------------------------------------------------------------
out=$("$SWEEP" sweeps/smoke.json --dry-run --out-dir "$T/dry" 2>&1); rc=$?
if [ $rc -eq 0 ] && grep -q -- '--plan' <<<"$out" && grep -q 'mpirun -x OPENBLAS_NUM_THREADS ' <<<"$out" && [ ! -e "$T/dry" ]; then ok sweep_dry_run
else fail sweep_dry_run "rc $rc, files: $(ls "$T/dry" 2>&1 | head -1), out: $(head -c 300 <<<"$out")"; fi
# a dry run plans every cell as a run does: a cell train refuses is named with train's line (the others'
# commands printed), and a spec whose every cell is refused is refused (exit 2, one line, no folder)
b2='"model": "tiny", "steps": 2, "lr": 0.003, "data": "'$DATA'", "timeout_s": 60, "world": 2'
spec "$T/dry2.json" '{"name": "d", '"$b2"', "seq_len": 33, "meshes": ["2x1", "1x2"], "batch_size": 1}'
out=$("$SWEEP" "$T/dry2.json" --dry-run --out-dir "$T/dry" 2>&1); rc=$?
if [ $rc -eq 0 ] && grep -q '^\[2/2\] 1x2  refused by build/train --plan (its run would fail): --seq-len 33 is not divisible by --tp 2' <<<"$out" \
   && grep -q '^\[1/2\] 2x1  run: ' <<<"$out" && ! grep -q '1x2  run:' <<<"$out" && grep -q '^sweep: machine model: ' <<<"$out" && [ ! -e "$T/dry" ]; then ok sweep_dry_run_plans_each_cell
else fail sweep_dry_run_plans_each_cell "rc $rc: $(head -c 400 <<<"$out")"; fi
spec "$T/dry3.json" '{"name": "d", '"$b2"', "seq_len": 32, "meshes": ["2x1", "1x2"], "batch_size": 1, "extra_args": ["--gpus-per-host", "0"]}'
expect_exit sweep_dry_run_refuses_spec 2 '^sweep: .*dry3.json: extra_args: build/train refuses cell 2x1: --gpus-per-host must be in 1..--world 2 \(got 0\) \(and every other cell\)' -- "$SWEEP" "$T/dry3.json" --dry-run --out-dir "$T/dry"
# srun that cannot reach a Slurm controller (no configuration here: srun's own lines, as the real one prints
# them; t_slurm runs the real srun): the sweep stops at that first launch (exit 2, said), not every mesh
mkdir -p "$T/fakesrun"
cat > "$T/fakesrun/srun" <<'SH'
#!/bin/sh
echo "srun: error: fetch_config: DNS SRV lookup failed" >&2
echo "srun: fatal: Could not establish a configuration source" >&2
exit 1
SH
chmod +x "$T/fakesrun/srun"
spec "$T/srun.json" '{"name": "srun", '"$b2"', "seq_len": 32, "meshes": ["2x1", "1x2"], "batch_size": 1, "launcher": ["srun", "--ntasks={world}"]}'
PATH="$T/fakesrun:$PATH" "$SWEEP" "$T/srun.json" --out-dir "$T/srunres" > /dev/null 2> "$T/srun.err"; rc=$?
if [ $rc -eq 2 ] && grep -q '^sweep: stopped: srun cannot reach a Slurm controller (srun: fatal: Could not establish a configuration source): run the sweep inside an allocation' "$T/srun.err" \
   && grep -q '^\[1/2\] 2x1 ' "$T/srun.err" && ! grep -q '^\[2/2\]' "$T/srun.err"; then ok sweep_srun_without_controller_stops
else fail sweep_srun_without_controller_stops "rc $rc: $(tail -3 "$T/srun.err" | tr '\n' ' ')"; fi
# the example batch script run by hand (outside a job) says to submit it (exit 2), launching nothing
expect_exit sweep_sbatch_script_outside_a_job 2 '^sweep.sbatch: not inside a Slurm job \(no SLURM_JOB_ID\): submit it with sbatch' -- \
  env -u SLURM_JOB_ID bash sweeps/slurm/sweep.sbatch

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
  if [ "$rows" -eq 3 ] && [ "$badrows" -eq 0 ] && head -1 "$D/summary.csv" | grep -q '^mesh,dp,tp,batch_size,global_batch,tok_s,tok_s_per_rank,mfu,peak_bytes,.*activations_bytes.*,final_loss,final_eval_loss,mfu_share,seconds_to_target_loss,predicted_step_ms,measured_step_ms,prediction_error,status$'; then ok sweep_smoke_csv
  else fail sweep_smoke_csv "rows $rows, ragged $badrows, header $(head -1 "$D/summary.csv")"; fi
  bad=""
  for c in loss loss_tokens loss_time throughput memory max_batch; do
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
  stamp=$(basename "$D")
  [ "$(grep -c "skipped: resumed from $stamp" "$T/resume.err")" -eq 3 ] && grep -q "ok (resumed from $stamp)" "$D/report.md" \
    && json_ok "$D/summary.json" 'all(m["resumed_from"]=="'"$stamp"'" for m in d["meshes"])' \
    && ok sweep_resume_labelled || fail sweep_resume_labelled "$(grep skipped "$T/resume.err" | head -1)"
  # the first paragraph answers with this sweep's numbers
  fast=$(json_get "$D/summary.json" 'max(d["meshes"], key=lambda m: m["tok_s"])["mesh"]')
  big=$(json_get "$D/summary.json" 'max(d["meshes"], key=lambda m: m["global_batch"])["mesh"]')
  first=$(json_get "$D/summary.json" 'min(d["meshes"], key=lambda m: m["seconds_to_target_loss"])["mesh"]')
  sed -n 3p "$D/report.md" | grep -q "^Highest throughput: \*\*$fast\*\*, .*First to reach loss [0-9.]* (the highest final loss among the meshes): \*\*$first\*\*, after [0-9.]* s.*Largest global batch: \*\*$big\*\*" \
    && ok sweep_report_first_paragraph || fail sweep_report_first_paragraph "want $fast/$first/$big: $(sed -n 3p "$D/report.md" | head -c 300)"
  json_ok "$D/summary.json" 'd["target_loss"]==max(m["final_loss"] for m in d["meshes"]) and all(m["seconds_to_target_loss"]>0 for m in d["meshes"]) and "loss_time.png" in d["charts"]' \
    && grep -q '(loss_time.png)' "$D/report.md" && ok sweep_time_to_loss || fail sweep_time_to_loss "$(grep -o '"target_loss.*' "$D/summary.json" | head -2)"

  # a hand-written {"status": "ok"} is not a record of the mesh: that mesh runs again, the others do not
  echo '{"status": "ok"}' > "$D/runs/4x1.json"
  "$SWEEP" sweeps/smoke.json --out-dir "$T/res" > /dev/null 2> "$T/hand.err"; rc=$?
  if [ $rc -eq 0 ] && grep -q '4x1  run: runs/4x1.json is not a record of this launch' "$T/hand.err" \
     && json_ok "$D/runs/4x1.json" 'd["schema"]=="meshsweep.run/1" and d["status"]=="ok" and len(d["steps"])>0' \
     && [ "$(grep -c 'skipped: resumed' "$T/hand.err")" -eq 2 ]; then ok sweep_handwritten_record_not_trusted
  else fail sweep_handwritten_record_not_trusted "rc $rc: $(grep 4x1 "$T/hand.err" | head -2)"; fi

  # a record copied in from a run with another --grad-accum (same mesh, batch and steps) is run again
  "$PY" -c 'import json,sys; p=sys.argv[1]; d=json.load(open(p)); d["grad_accum"]=2; d["global_batch"]*=2; d["config"]["grad_accum"]=2; json.dump(d, open(p, "w"))' "$D/runs/4x1.json"
  "$SWEEP" sweeps/smoke.json --out-dir "$T/res" > /dev/null 2> "$T/accum.err"; rc=$?
  if [ $rc -eq 0 ] && grep -q '4x1  run: runs/4x1.json is not a record of this launch (the record is of 2 micro-batches per step' "$T/accum.err" \
     && json_ok "$D/runs/4x1.json" 'd["status"]=="ok" and d["grad_accum"]==1 and d["global_batch"]==d["mesh"]["dp"]*d["batch_size"]' \
     && [ "$(grep -c 'skipped: resumed' "$T/accum.err")" -eq 2 ]; then ok sweep_resume_other_grad_accum_rerun
  else fail sweep_resume_other_grad_accum_rerun "rc $rc: $(grep 4x1 "$T/accum.err" | head -2)"; fi

  # Ctrl-C while the charts are drawn (the third gnuplot hangs): "interrupted", exit 130, and the folder's
  # report set (summary, charts, report) is the earlier one byte for byte, never a new summary and some
  # new charts without their report; a --plan-only sweep (a new folder) interrupted so is left with none
  cat > "$T/slowgp" <<GP
#!/bin/sh
n=\$(cat "$T/gp.count" 2>/dev/null || echo 0); n=\$((n + 1)); echo \$n > "$T/gp.count"
if [ \$n -ge 3 ]; then touch "$T/gp.hung"; exec sleep 120; fi
exec gnuplot "\$@"
GP
  chmod +x "$T/slowgp"
  gp_int() { # OUT-ERR ARGS...: the sweep with slowgp, SIGINT once the third chart hangs; sets rc
    local e=$1; shift
    rm -f "$T/gp.count" "$T/gp.hung"
    MESHSWEEP_GNUPLOT=$T/slowgp "$SWEEP" "$@" > /dev/null 2> "$e" &
    local p=$! i=0
    while [ ! -e "$T/gp.hung" ] && [ $i -lt 600 ]; do sleep 0.2; i=$((i + 1)); done
    kill -INT $p; rc=0; wait $p || rc=$?
  }
  set_sum() { (cd "$1" && md5sum summary.json summary.csv report.md *.png *.svg 2>/dev/null); }
  before=$(set_sum "$D")
  gp_int "$T/gpint.err" sweeps/smoke.json --out-dir "$T/res"
  if [ $rc -eq 130 ] && grep -q '^sweep: interrupted (SIGINT) while drawing the charts: the report set is left as it was (the earlier report)' "$T/gpint.err" \
     && [ "$(set_sum "$D")" = "$before" ] && [ -n "$before" ] && ! ls "$D"/.*.tmp >/dev/null 2>&1; then ok sweep_interrupt_charts_keeps_old_set
  else fail sweep_interrupt_charts_keeps_old_set "rc $rc, set changed: $([ "$(set_sum "$D")" = "$before" ] && echo no || echo yes): $(tail -2 "$T/gpint.err" | tr '\n' ' ')"; fi
  gp_int "$T/gpint2.err" sweeps/smoke.json --out-dir "$T/gpres" --plan-only
  P=$(latest "$T/gpres/smoke")
  if [ $rc -eq 130 ] && grep -q 'while drawing the charts: the report set is left as it was (none)' "$T/gpint2.err" && [ -n "$P" ] \
     && [ ! -e "$P/summary.json" ] && [ ! -e "$P/report.md" ] && ! ls "$P"/*.png "$P"/*.svg "$P"/.*.tmp >/dev/null 2>&1; then ok sweep_interrupt_charts_leaves_none
  else fail sweep_interrupt_charts_leaves_none "rc $rc: $(ls "$P" 2>&1 | tr '\n' ' ') $(tail -1 "$T/gpint2.err")"; fi

  # gnuplot that exits 0 after writing half a PNG (as on a full disk): no chart is kept or named
  cat > "$T/fakegp" <<'GP'
#!/bin/sh
# writes the 8-byte PNG signature only to the out='...' file of the -e text, then exits 0
out=$(printf '%s' "$2" | sed -n "s/.*out='\([^']*\)'.*/\1/p")
printf '\211PNG\r\n\032\n' > "$out"
exit 0
GP
  chmod +x "$T/fakegp"
  MESHSWEEP_GNUPLOT=$T/fakegp "$SWEEP" sweeps/smoke.json --out-dir "$T/res" > /dev/null 2> "$T/gp.err"; rc=$?
  pngs=$(ls "$D"/*.png "$D"/*.svg 2>/dev/null | wc -l)
  if [ $rc -eq 1 ] && [ "$pngs" -eq 0 ] && ! grep -q '\.png)' "$D/report.md" && grep -q 'Not drawn' "$D/report.md" \
     && json_ok "$D/summary.json" 'd["charts"]==[]' && grep -q 'incomplete file' "$T/gp.err" && ! ls "$D"/.*.tmp >/dev/null 2>&1; then ok sweep_incomplete_chart_removed
  else fail sweep_incomplete_chart_removed "rc $rc, charts left $pngs: $(tail -2 "$T/gp.err")"; fi
  # a report that cannot be written is not named
  rm -f "$D/report.md" && mkdir "$D/report.md"
  "$SWEEP" sweeps/smoke.json --out-dir "$T/res" > /dev/null 2> "$T/rep.err"; rc=$?
  last=$(tail -1 "$T/rep.err")
  if [ $rc -eq 1 ] && ! grep -q 'report: ' <<<"$last" && grep -q 'no report' <<<"$last" && [ -s "$D/loss.png" ]; then ok sweep_unwritten_report_not_named
  else fail sweep_unwritten_report_not_named "rc $rc: $last"; fi
  rmdir "$D/report.md"
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
# failed is retried by the next invocation, ok is not
before=$(stat -c %Y.%y "$F/runs/4x1.json" "$F/runs/2x2.json")
"$SWEEP" "$T/fail.json" --out-dir "$T/res" > /dev/null 2> "$T/retry.err"; rc=$?
if [ $rc -eq 0 ] && grep -q '1x4  run: was failed in the run of .*: retrying' "$T/retry.err" && grep -q '1x4  run b=2 steps=2 \.\.\. failed' "$T/retry.err" \
   && [ "$(grep -c 'skipped: resumed' "$T/retry.err")" -eq 2 ] && [ "$before" = "$(stat -c %Y.%y "$F/runs/4x1.json" "$F/runs/2x2.json")" ]; then ok sweep_failed_retried
else fail sweep_failed_retried "rc $rc: $(head -3 "$T/retry.err")"; fi
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
if [ $rc -eq 1 ] && grep -q '^sweep: every run failed' "$T/slow.err" && [ -n "$S" ] && json_ok "$S/runs/2x1.json" 'd["status"]=="timeout" and "timeout" in d["error"]' \
   && [ "$took" -lt 40 ] && ! leftovers; then ok sweep_timeout_recorded
else fail sweep_timeout_recorded "rc $rc, ${took}s, leftovers: $(pgrep -fa "$T/" | head -2)"; fi

# ---- shell syntax in a spec field is data, not a command --------------------------------------------
# a real token file whose name is shell syntax: the run reads it, nothing is executed
cp "$DATA" "$T/x; touch pwned-by-sweep"
spec "$T/inject.json" '{"name": "inject", "world": 2, "meshes": ["1x2"], "model": "tiny", "seq_len": 32, "steps": 2,
  "lr": 0.003, "batch_size": 1, "data": "'"$T"'/x; touch pwned-by-sweep", "timeout_s": 60}'
"$SWEEP" "$T/inject.json" --out-dir "$T/res" > /dev/null 2> "$T/inject.err"; rc=$?
I=$(latest "$T/res/inject")
if [ $rc -eq 0 ] && [ ! -e pwned-by-sweep ] && [ ! -e "$T/pwned-by-sweep" ] && [ ! -e "$I/pwned-by-sweep" ] \
   && json_ok "$I/runs/1x2.json" 'd["status"]=="ok" and d["config"]["data"].endswith("x; touch pwned-by-sweep")'; then ok sweep_shell_syntax_is_data
else fail sweep_shell_syntax_is_data "rc $rc: $(tail -2 "$T/inject.err")"; rm -f pwned-by-sweep; fi

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
  "lr": 0.003, "global_batch": 2, "data": "'"$DATA"'", "eval_data": "'"$VAL"'", "timeout_s": 120, "target_loss": 100}'
"$SWEEP" "$T/eq.json" --out-dir "$T/res" > /dev/null 2> "$T/eq.err"; rc=$?
E=$(latest "$T/res/eq")
# target_loss 100: every mesh is there after its first step
check sweep_target_loss_from_spec json_ok "$E/summary.json" 'd["target_loss"]==100 and d["target_loss_from"]=="spec" and all(abs(m["seconds_to_target_loss"] - json.load(open("'"$E"'/"+m["record"]))["steps"][0]["ms"]/1000) < 1e-3 for m in d["meshes"])' 
if [ $rc -eq 0 ] && json_ok "$E/summary.json" 'd["mode"]=="global_batch" and d["loss_deviation"]["steps_compared"]==3 and d["loss_deviation"]["max_rel"] < 1e-3 and [m["batch_size"] for m in d["meshes"]]==[2,1]' \
   && grep -q 'largest relative loss deviation' "$T/eq.err"; then ok sweep_equivalence_deviation
else fail sweep_equivalence_deviation "rc $rc: $(tail -2 "$T/eq.err")"; fi
# ---- resume only what this runner made for this spec, build and hosts; one runner per folder ------------
spec "$T/r1.json" '{"name": "r1", "world": 2, "meshes": ["2x1", "1x2"], "model": "tiny", "seq_len": 32, "steps": 2,
  "lr": 0.003, "batch_size": 1, "data": "'"$DATA"'", "timeout_s": 120}'
"$SWEEP" "$T/r1.json" --out-dir "$T/res" > /dev/null 2> "$T/r1.err"; rc=$?
R1=$(latest "$T/res/r1")
if [ $rc -ne 0 ] || [ -z "$R1" ]; then fail sweep_r1_runs "rc $rc: $(tail -3 "$T/r1.err")"; else
  json_ok "$R1/runner.json" 'd["schema"]=="meshsweep.sweep-folder/1" and d["kind"]=="run" and d["identity"]["build"]["id"].startswith("fnv1a64:") and d["identity"]["hosts"]["runner"]' \
    && ok sweep_folder_identity || fail sweep_folder_identity "$(head -c 300 "$R1/runner.json")"
  # a second runner on the same folder refuses (exit 2, one line) and changes nothing
  flock -o "$R1/.lock" sleep 30 & holder=$!
  sleep 0.5
  snap=$(find "$R1" -type f ! -name .lock | sort | xargs stat -c '%n %Y %s')
  expect_exit sweep_lock_second_runner 2 "is in use by another runner" -- "$SWEEP" "$T/r1.json" --out-dir "$T/res"
  [ "$snap" = "$(find "$R1" -type f ! -name .lock | sort | xargs stat -c '%n %Y %s')" ] && ok sweep_lock_nothing_changed || fail sweep_lock_nothing_changed "files changed"
  kill $(pgrep -P "$holder") "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
  # the cores each rank had, the hosts, a TP group across hosts: from the record's env (as train writes it)
  "$PY" - "$R1" <<'PY'
import json, sys
d = sys.argv[1]
for mesh, rb, cb in (("2x1", {"hostA": [0, 1]}, {"hostA": 1}), ("1x2", {"hostA": [0], "hostB": [1]}, {"hostA": 1, "hostB": 1})):
    p = f"{d}/runs/{mesh}.json"; r = json.load(open(p))
    r["env"]["hosts"] = sorted(rb); r["env"]["ranks_by_host"] = rb; r["env"]["cores_by_host"] = cb
    r["env"]["tp_spans_hosts"] = len(rb) > 1          # as train derives it for these maps (1 rank per TP group host)
    r["summary"].pop("mfu_share", None)                # train's own figure is of this machine: the runner recomputes it
    json.dump(r, open(p, "w"))
PY
  "$SWEEP" "$T/r1.json" --out-dir "$T/res" > /dev/null 2> "$T/r1b.err"; rc=$?
  if [ $rc -eq 0 ] && grep -q '2 ranks on 1 cores\?: each rank had 1/2 of a core' "$R1/report.md" \
     && grep -q 'Warning:.* on mesh 1x2 a tensor-parallel group spans hosts' "$R1/report.md" && grep -q 'Hosts: `hostA`' "$R1/report.md" \
     && json_ok "$R1/summary.json" '[abs(m[0]["mfu_share"] - 2*m[0]["mfu"]) < 1e-9 and m[0]["tp_spans_hosts"]==False and m[1]["tp_spans_hosts"]==True and m[1]["ranks_by_host"]=={"hostA": [0], "hostB": [1]} for m in [d["meshes"]]][0]'; then ok sweep_hosts_cores_in_report
  else fail sweep_hosts_cores_in_report "rc $rc: $(grep -i 'ranks on\|warning' "$R1/report.md" | head -2)"; fi
  # a folder the runner did not make (no runner.json: a copy, a committed reference) is never resumed or
  # touched, and (whatever its stamp) does not hide this runner's own latest folder, which is resumed
  C="$T/res/r1/29991231T235959Z"
  cp -a "$R1" "$C" && rm -f "$C/runner.json" "$C/.lock"
  csnap=$(find "$C" -type f | sort | xargs stat -c '%n %Y %s')
  n0=$(ls -d "$T/res/r1"/*/ | wc -l)
  "$SWEEP" "$T/r1.json" --out-dir "$T/res" > /dev/null 2> "$T/r1c.err"; rc=$?
  if [ $rc -eq 0 ] && grep -q "not resuming $C: it has no runner.json.*; resuming $R1" "$T/r1c.err" && [ "$csnap" = "$(find "$C" -type f | sort | xargs stat -c '%n %Y %s')" ] \
     && [ "$(ls -d "$T/res/r1"/*/ | wc -l)" -eq "$n0" ]; then ok sweep_foreign_folder_untouched
  else fail sweep_foreign_folder_untouched "rc $rc: $(head -2 "$T/r1c.err")"; fi
  rm -rf "$C"
  # another build of train: a new folder, and the reason said
  cp "$TRAIN" "$T/train2" && printf 'x' >> "$T/train2"
  n0=$(ls -d "$T/res/r1"/*/ | wc -l)
  "$SWEEP" "$T/r1.json" --out-dir "$T/res" --train "$T/train2" > /dev/null 2> "$T/r1d.err"; rc=$?
  if [ $rc -eq 0 ] && grep -q 'not resuming .*another build' "$T/r1d.err" && [ "$(ls -d "$T/res/r1"/*/ | wc -l)" -eq $((n0 + 1)) ] \
     && ! grep -q skipped "$T/r1d.err"; then ok sweep_other_build_new_folder
  else fail sweep_other_build_new_folder "rc $rc: $(head -2 "$T/r1d.err")"; fi
fi

# ---- a record that is not what was asked is failed, never ok -----------------------------------------
spec "$T/np.json" '{"name": "np", "world": 2, "meshes": ["2x1"], "model": "tiny", "seq_len": 32, "steps": 2, "lr": 0.003,
  "batch_size": 1, "data": "'"$DATA"'", "timeout_s": 120, "launcher": ["mpirun", "--oversubscribe", "-np", "4"]}'
"$SWEEP" "$T/np.json" --out-dir "$T/res" > /dev/null 2> "$T/np.err"; rc=$?
P=$(latest "$T/res/np")
[ $rc -eq 1 ] && json_ok "$P/runs/2x1.json" 'd["status"]=="failed" and "world 4" in d["error"] and "not what was asked" in d["error"]' \
  && json_ok "$P/summary.json" 'd["meshes"][0]["status"]=="failed" and d["meshes"][0]["tok_s"] is None' \
  && ok sweep_record_world_mismatch_failed || fail sweep_record_world_mismatch_failed "rc $rc: $(tail -2 "$T/np.err")"
spec "$T/nol.json" '{"name": "nol", "world": 2, "meshes": ["2x1"], "model": "tiny", "seq_len": 32, "steps": 2, "lr": 0.003,
  "batch_size": 1, "data": "'"$DATA"'", "timeout_s": 120, "launcher": []}'
"$SWEEP" "$T/nol.json" --out-dir "$T/res" > /dev/null 2> "$T/nol.err"; rc=$?
P=$(latest "$T/res/nol")
[ $rc -eq 1 ] && json_ok "$P/runs/2x1.json" 'd["status"]=="failed" and "world 1" in d["error"]' \
  && ok sweep_empty_launcher_failed || fail sweep_empty_launcher_failed "rc $rc: $(tail -2 "$T/nol.err")"

# ---- kill -9 of the runner: its mpirun and ranks do not stay behind ---------------------------------
spec "$T/k9.json" '{"name": "k9", "world": 2, "meshes": ["2x1"], "model": "tiny", "seq_len": 64, "steps": 100000,
  "lr": 0.003, "batch_size": 1, "data": "'"$DATA"'", "timeout_s": 300}'
"$SWEEP" "$T/k9.json" --out-dir "$T/res" > /dev/null 2> "$T/k9.err" &
pid=$!
for i in $(seq 1 100); do [ "$(pgrep -f "$T/res/k9/.*train.json" | wc -l)" -ge 3 ] && break; sleep 0.2; done
seen=$(pgrep -f "$T/res/k9/.*train.json" | wc -l)
kill -KILL "$pid"; wait "$pid" 2>/dev/null
for i in $(seq 1 100); do pgrep -f "$T/res/k9/" >/dev/null || break; sleep 0.2; done
if [ "$seen" -ge 3 ] && ! pgrep -f "$T/res/k9/" >/dev/null; then ok "sweep_kill9_no_orphans  ($seen processes before, none $((i / 5)) s after)"
else fail sweep_kill9_no_orphans "saw $seen, left: $(pgrep -fa "$T/res/k9/" | head -3 | tr '\n' ' ')"; pkill -KILL -f "$T/res/k9/"; fi

# ---- --plan-only: no launches, plans, memory and max-batch charts, report ---------------------------------
"$SWEEP" sweeps/smoke.json --plan-only --out-dir "$T/plan" > /dev/null 2> "$T/plan.err"; rc=$?
Q=$(latest "$T/plan/smoke")
if [ $rc -eq 0 ] && [ -n "$Q" ] && json_ok "$Q/summary.json" 'd["plan_only"] and [m["status"] for m in d["meshes"]]==["planned"]*3 and all(m["peak_bytes"]>0 and m["fits"] for m in d["meshes"]) and d["charts"]==["memory.png","max_batch.png"]' \
   && [ -z "$(ls "$Q"/runs/*x?.json 2>/dev/null)" ] && [ "$(ls "$Q"/runs/*.plan.json | wc -l)" -eq 3 ] && grep -q '^# Plan of sweep' "$Q/report.md" \
   && grep -q 'Largest planned global batch' "$Q/report.md" && ! grep -q 'probe' "$T/plan.err" \
   && json_ok "$Q/runner.json" 'd["kind"]=="plan-only"'; then ok sweep_plan_only
else fail sweep_plan_only "rc $rc: $(tail -3 "$T/plan.err")"; fi
b14=$(json_get "$Q/summary.json" 'd["meshes"][0]["batch_size"]')
want=$(json_get "$T/plan-1x4.json" 'd["batch_size"]' 2>/dev/null)
[ -n "$want" ] && [ "$b14" = "$want" ] && ok sweep_plan_only_matches_train_plan || fail sweep_plan_only_matches_train_plan "sweep $b14, train --plan $want"
# a later real run never resumes a plan folder
"$SWEEP" sweeps/llama3.1-8b-8xH100.json --plan-only --out-dir "$T/plan" > /dev/null 2> "$T/plan8b.err"; rc=$?
Q=$(latest "$T/plan/llama3.1-8b-8xH100")
[ $rc -eq 0 ] && json_ok "$Q/summary.json" 'all(m["status"]=="planned" and m["batch_size"]>0 for m in d["meshes"])' && [ -s "$Q/memory.png" ] \
  && ok sweep_plan_only_8b_on_cpu || fail sweep_plan_only_8b_on_cpu "rc $rc: $(tail -2 "$T/plan8b.err")"
# ---- grids: meshes x axis values, one cell each (its own search, record, row) ----------------------
gbase='"world": 2, "meshes": ["1x2", "2x1"], "model": "tiny", "steps": 2, "lr": 0.003, "mem_budget": "16MiB", "batch_size": "max", "data": "'$DATA'", "timeout_s": 120'
spec "$T/grid.json" '{"name": "grid", '"$gbase"', "seq_len": 32, "axes": {"checkpoint_activations": [false, true]}}'
cells="1x2.ac=none 1x2.ac=full 2x1.ac=none 2x1.ac=full"
# bad axes: exit 2 naming the key, before anything is written
spec "$T/ga1.json" '{"name": "ga", '"$gbase"', "seq_len": 32, "axes": {"steps": [2, 4]}}'
expect_exit sweep_grid_unknown_axis 2 'axes\.steps: not an option that can be swept' -- "$SWEEP" "$T/ga1.json" --out-dir "$T/gr"
spec "$T/ga2.json" '{"name": "ga", '"$gbase"', "seq_len": 32, "axes": {"checkpoint_activations": ["none", 3]}}'
expect_exit sweep_grid_axis_wrong_type 2 'axes\.checkpoint_activations\[1\]: expected' -- "$SWEEP" "$T/ga2.json" --out-dir "$T/gr"
spec "$T/ga3.json" '{"name": "ga", '"$gbase"', "seq_len": 32, "axes": {"prefetch": []}}'
expect_exit sweep_grid_axis_empty 2 'axes\.prefetch: expected a non-empty array' -- "$SWEEP" "$T/ga3.json" --out-dir "$T/gr"
spec "$T/ga4.json" '{"name": "ga", '"$gbase"', "seq_len": 32, "axes": {"seq_len": [32, 64]}}'
expect_exit sweep_grid_axis_repeats_top_level 2 'axes\.seq_len: also given at the top level' -- "$SWEEP" "$T/ga4.json" --out-dir "$T/gr"
check sweep_grid_errors_write_nothing test ! -e "$T/gr"
out=$("$SWEEP" "$T/grid.json" --dry-run --out-dir "$T/gdry" 2>&1); rc=$?
[ $rc -eq 0 ] && grep -q '^sweep: 4 cells (2 meshes x 2 settings)' <<<"$out" && [ "$(grep -c '2x1.ac=full  run: .*--checkpoint-activations' <<<"$out")" -eq 1 ] \
  && ! grep -q '1x2.ac=none  run: .*--checkpoint-activations' <<<"$out" && [ ! -e "$T/gdry" ] && ok sweep_grid_dry_run \
  || fail sweep_grid_dry_run "rc $rc: $(head -c 300 <<<"$out")"
"$SWEEP" "$T/grid.json" --out-dir "$T/gres" > /dev/null 2> "$T/grid.err"; rc=$?
G=$(latest "$T/gres/grid")
if [ $rc -ne 0 ] || [ -z "$G" ]; then fail sweep_grid_runs "exit $rc: $(tail -3 "$T/grid.err")"; else
  ok sweep_grid_runs
  bad=""
  for c in $cells; do
    ck=${c#*ac=}
    json_ok "$G/runs/$c.json" 'd["status"]=="ok" and d["config"]["checkpoint_activations"]=="'"$ck"'" and d["config"]["seq_len"]==32' || bad="$bad $c"
    # each cell's own search: the plan of that cell, confirmed by probes at b (fits) and b+1 (oom)
    m=${c%%.*}; flag=$([ "$ck" = full ] && echo --checkpoint-activations)
    "$TRAIN" --plan --world 2 --tp "${m#*x}" --batch-size max --mem-budget 16MiB --model tiny --seq-len 32 --backend cpu $flag \
      --out "$T/gplan-$c.json" >/dev/null 2>&1 || bad="$bad $c:plan-exit-$?"
    want=$(json_get "$T/gplan-$c.json" 'd["batch_size"]'); got=$(json_get "$G/runs/$c.json" 'd["batch_size"]')
    [ "$want" = "$got" ] || bad="$bad $c:plan=$want,sweep=$got"
    json_ok "$G/runs/$c.probe-b$got.json" 'd["status"]=="ok"' && json_ok "$G/runs/$c.probe-b$((got+1)).json" 'd["status"]=="oom"' || bad="$bad $c:probes"
  done
  [ -z "$bad" ] && ok sweep_grid_cell_records_and_search || fail sweep_grid_cell_records_and_search "$bad"
  bn=$(json_get "$G/runs/2x1.ac=none.json" 'd["batch_size"]'); bf=$(json_get "$G/runs/2x1.ac=full.json" 'd["batch_size"]')
  [ "$bf" -gt "$bn" ] && ok sweep_grid_checkpointing_raises_max_batch || fail sweep_grid_checkpointing_raises_max_batch "none $bn, full $bf"
  check sweep_grid_summary json_ok "$G/summary.json" '[m["cell"] for m in d["meshes"]]=="'"$cells"'".split() and [m["mesh"] for m in d["meshes"]]==["1x2","1x2","2x1","2x1"] and [m["axes"]["checkpoint_activations"] for m in d["meshes"]]==["none","full"]*2 and d["axes"]==[{"key":"checkpoint_activations","short":"ac","values":["none","full"]}] and d["cells"]==4 and all(m["status"]=="ok" and len(m["max_batch_search"]["probes"])>=2 for m in d["meshes"])'
  head -1 "$G/summary.csv" | grep -q '^cell,checkpoint_activations,mesh,dp,tp,batch_size,global_batch,tok_s,' && [ "$(grep -c '^2x1.ac=full,full,2x1,2,1,' "$G/summary.csv")" -eq 1 ] \
    && ok sweep_grid_csv || fail sweep_grid_csv "$(head -2 "$G/summary.csv")"
  bad=""
  for ch in loss memory throughput max_batch_ac throughput_ac; do [ -s "$G/$ch.png" ] && [ -s "$G/$ch.svg" ] && grep -q "($ch.png)" "$G/report.md" || bad="$bad $ch"; done
  [ -e "$G/max_batch.png" ] && bad="$bad max_batch.png(all cells on one line)"
  [ -z "$bad" ] && json_ok "$G/summary.json" '"max_batch_ac.png" in d["charts"]' && grep -q '^# panel 1, ac=full' "$G/axis_ac.dat" \
    && ok sweep_grid_charts_by_axis || fail sweep_grid_charts_by_axis "$bad"
  fast=$(json_get "$G/summary.json" 'max(d["meshes"], key=lambda m: m["tok_s"])["cell"]')
  sed -n 3p "$G/report.md" | grep -q "^Mode: \*\*largest batch\*\*.* Grid: 2 meshes × checkpoint_activations (ac: none, full) = 4 cells\. Fastest cell: \*\*$fast\*\*" \
    && grep -q "^| ac=full | \[$bf\](runs/2x1.ac=full.json) | " "$G/report.md" && grep -q '^### checkpoint_activations (ac)' "$G/report.md" \
    && ok sweep_grid_report_answers || fail sweep_grid_report_answers "want $fast: $(sed -n 3p "$G/report.md" | head -c 300)"
  # resume per cell: a complete grid runs nothing; a cell whose record is gone runs again (its search is kept)
  before=$(mtimes "$G")
  "$SWEEP" "$T/grid.json" --out-dir "$T/gres" > /dev/null 2> "$T/grid2.err"; rc=$?
  [ $rc -eq 0 ] && [ "$before" = "$(mtimes "$G")" ] && [ "$(grep -c 'skipped: resumed' "$T/grid2.err")" -eq 4 ] && ! grep -q 'probe b=' "$T/grid2.err" \
    && ok sweep_grid_resume_skips_cells || fail sweep_grid_resume_skips_cells "rc $rc: $(grep -c skipped "$T/grid2.err") skipped"
  rm "$G/runs/1x2.ac=full.json"
  "$SWEEP" "$T/grid.json" --out-dir "$T/gres" > /dev/null 2> "$T/grid3.err"; rc=$?
  [ $rc -eq 0 ] && [ "$(grep -c 'skipped: resumed' "$T/grid3.err")" -eq 3 ] && grep -q '1x2.ac=full  plan: max batch [0-9]* (done before)' "$T/grid3.err" \
    && grep -q '1x2.ac=full  run b=[0-9]* steps=2 \.\.\.' "$T/grid3.err" && json_ok "$G/runs/1x2.ac=full.json" 'd["status"]=="ok"' \
    && ok sweep_grid_resume_reruns_one_cell || fail sweep_grid_resume_reruns_one_cell "rc $rc: $(grep 1x2.ac=full "$T/grid3.err" | head -3)"
  # the record checks are per cell: another cell's record (other checkpointing) is not this cell's
  cp "$G/runs/2x1.ac=none.json" "$G/runs/2x1.ac=full.json"
  "$SWEEP" "$T/grid.json" --out-dir "$T/gres" > /dev/null 2> "$T/grid4.err"; rc=$?
  [ $rc -eq 0 ] && grep -q '2x1.ac=full  run: runs/2x1.ac=full.json is not a record of this launch (the record is of checkpoint_activations "none"; asked: full)' "$T/grid4.err" \
    && json_ok "$G/runs/2x1.ac=full.json" 'd["status"]=="ok" and d["config"]["checkpoint_activations"]=="full" and d["batch_size"]=='"$bf" \
    && [ "$(grep -c 'skipped: resumed' "$T/grid4.err")" -eq 3 ] && ok sweep_grid_record_of_other_cell_rerun \
    || fail sweep_grid_record_of_other_cell_rerun "rc $rc: $(grep 2x1.ac=full "$T/grid4.err" | head -2)"
  # --plan-only on the grid: a plan per cell, the same batches as the run's plans
  "$SWEEP" "$T/grid.json" --plan-only --out-dir "$T/gplan" > /dev/null 2> "$T/gplan.err"; rc=$?
  Q=$(latest "$T/gplan/grid")
  [ $rc -eq 0 ] && [ "$(ls "$Q"/runs/*.plan.json | wc -l)" -eq 4 ] && [ -z "$(ls "$Q/runs" | grep -v '\.plan\.\(json\|log\)$')" ] \
    && json_ok "$Q/summary.json" '[m["status"] for m in d["meshes"]]==["planned"]*4 and [m["batch_size"] for m in d["meshes"]]==[json.load(open("'"$T"'/gplan-"+m["cell"]+".json"))["batch_size"] for m in d["meshes"]] and d["charts"]==["memory.png","max_batch_ac.png"]' \
    && grep -q '^# Plan of sweep' "$Q/report.md" && grep -q '^| ac=none | \[' "$Q/report.md" && ok sweep_grid_plan_only || fail sweep_grid_plan_only "rc $rc: $(tail -2 "$T/gplan.err")"
fi
# the 8B 8xH100 grid (4 meshes x 3 checkpointing settings x 2 sequence lengths) plans on the CPU; every:K
# only where train takes it (until then those cells fail saying why)
"$SWEEP" sweeps/llama3.1-8b-8xH100-grid.json --plan-only --out-dir "$T/plan" > /dev/null 2> "$T/g8b.err"; rc=$?
Q=$(latest "$T/plan/llama3.1-8b-8xH100-grid")
every_ok=$("$TRAIN" --help 2>&1 | grep -q 'every:K' && echo 1 || echo 0)
[ $rc -eq 0 ] && json_ok "$Q/summary.json" 'len(d["meshes"])==24 and all(m["status"]=="planned" and m["batch_size"]>0 for m in d["meshes"] if "every" not in m["cell"]) and all((m["status"]=="planned") if '"$every_ok"' else (m["status"]=="failed" and "every:2" in m["error"]) for m in d["meshes"] if "every" in m["cell"]) and all(a["batch_size"] < b["batch_size"] for a in d["meshes"] for b in d["meshes"] if a["mesh"]==b["mesh"] and a["axes"]["seq_len"]==b["axes"]["seq_len"] and a["axes"]["checkpoint_activations"]=="none" and b["axes"]["checkpoint_activations"]=="full")' \
  && ok sweep_grid_8b_plan_only || fail sweep_grid_8b_plan_only "rc $rc: $(tail -2 "$T/g8b.err")"
# matched global batch: each mesh at its largest micro-batch, accumulated to G (needs train --global-batch)
if ! "$TRAIN" --help 2>&1 | grep -q -- '--global-batch'; then
  skip sweep_matched_global_batch "build/train --help has no --global-batch yet (gradient accumulation in train); the argv is unit-tested in test_sweep_grid"
else
  spec "$T/mg.json" '{"name": "mg", "world": 2, "meshes": ["1x2", "2x1"], "model": "tiny", "seq_len": 32, "steps": 3, "lr": 0.003,
    "mem_budget": "16MiB", "batch_size": "max", "global_batch": 48, "data": "'"$DATA"'", "timeout_s": 120}'
  "$SWEEP" "$T/mg.json" --out-dir "$T/res" > /dev/null 2> "$T/mg.err"; rc=$?
  M=$(latest "$T/res/mg")
  [ $rc -eq 0 ] && json_ok "$M/summary.json" 'd["mode"]=="matched_global_batch" and all(m["status"]=="ok" and m["global_batch"]==48 and 48 % (m["dp"]*m["batch_size"])==0 and m["grad_accum"]*m["dp"]*m["batch_size"]==48 for m in d["meshes"]) and d["loss_deviation"]["steps_compared"]==3 and d["loss_deviation"]["max_rel"] < 1e-3' \
    && sed -n 3p "$M/report.md" | grep -q '^Mode: \*\*matched global batch\*\*.*same global batch in the same data order' \
    && ok sweep_matched_global_batch || fail sweep_matched_global_batch "rc $rc: $(tail -2 "$T/mg.err")"
  # the micro-batch is the largest divisor of G/dp that fits: the next divisor up does not
  bad=""
  for m in 1x2 2x1; do
    b=$(json_get "$M/runs/$m.json" 'd["batch_size"]'); dp=${m%x*}; n=$((48 / dp)); nx=$((b + 1)); while [ $nx -le $n ] && [ $((n % nx)) -ne 0 ]; do nx=$((nx + 1)); done
    [ $nx -gt $n ] || json_ok "$M/runs/$m.probe-b$nx.json" 'd["status"]=="oom"' || bad="$bad $m:b=$b,next=$nx"
  done
  [ -z "$bad" ] && ok sweep_matched_micro_batch_divides || fail sweep_matched_micro_batch_divides "$bad"
fi
# the runner's side of the matched mode against a stand-in train (memory: b fits up to 5 sequences at dp 1,
# 3 at dp 2; its plan answers 5, not a divisor): the search walks the divisors of G/dp, passes --global-batch
cat > "$T/fake_train" <<'PY'
#!/usr/bin/env python3
import json, sys
a = sys.argv[1:]
def opt(k, d=None): return a[a.index(k) + 1] if k in a else d
tp, b, g, out = int(opt("--tp")), opt("--batch-size"), int(opt("--global-batch", "0")), opt("--out")
world = 2; dp = world // tp; limit = 5 if dp == 1 else 3
open(out + ".argv", "a").write(" ".join(a) + "\n")
if "--plan" in a:
    json.dump({"schema": "meshsweep.plan/1", "world": world, "tp": tp, "batch_size": limit, "global_batch": dp * limit, "fits": True, "peak": 1}, open(out, "w"))
    sys.exit(0)
b = int(b); steps = int(opt("--steps")); n = g // (dp * b)
rec = {"schema": "meshsweep.run/1", "mesh": {"world": world, "dp": dp, "tp": tp}, "batch_size": b, "micro_batch": b, "grad_accum": n,
       "global_batch": dp * b * n, "config": {"steps": steps, "seq_len": int(opt("--seq-len"))}}
if b > limit:
    rec.update(status="oom", error="out of memory budget"); json.dump(rec, open(out, "w")); sys.exit(3)
rec.update(status="ok", steps=[{"step": k, "loss": 5.0 - 0.1 * k, "ms": 10.0} for k in range(1, steps + 1)],
           summary={"steps_done": steps, "tok_s": 1000.0 * dp, "final_loss": 5.0 - 0.1 * steps}, memory={"peak": 1})
json.dump(rec, open(out, "w"))
PY
chmod +x "$T/fake_train"
spec "$T/mf.json" '{"name": "mf", "world": 2, "meshes": ["1x2", "2x1"], "model": "tiny", "seq_len": 32, "steps": 3, "lr": 0.003,
  "mem_budget": "16MiB", "batch_size": "max", "global_batch": 24, "data": "'"$DATA"'", "timeout_s": 60, "launcher": []}'
"$SWEEP" "$T/mf.json" --out-dir "$T/res" --train "$T/fake_train" > /dev/null 2> "$T/mf.err"; rc=$?
M=$(latest "$T/res/mf")
[ $rc -eq 0 ] && json_ok "$M/summary.json" '[(m["batch_size"], m["grad_accum"], [p["batch_size"] for p in m["max_batch_search"]["probes"]]) for m in d["meshes"]]==[(4, 6, [4, 6]), (3, 4, [3, 4])] and d["loss_deviation"]["max_rel"]==0' \
  && grep -q -- '--batch-size max --global-batch 24' "$M/runs/.1x2.plan.train.json.argv" && grep -q -- '--batch-size 4 --global-batch 24' "$M/runs/.1x2.train.json.argv" \
  && grep -q '1x2  max micro-batch 4 per DP rank dividing 24: 6 micro-batches to global batch 24' "$T/mf.err" \
  && sed -n 3p "$M/report.md" | grep -q '^Mode: \*\*matched global batch\*\*.*deviation between meshes: \*\*0\*\*.*same global batch in the same data order.*at equal tokens per step (768 on every mesh)' \
  && ok sweep_matched_search_divisors || fail sweep_matched_search_divisors "rc $rc: $(tail -3 "$T/mf.err") $(sed -n 3p "$M/report.md" | head -c 300)"
"$SWEEP" "$T/mf.json" --out-dir "$T/res" --train "$T/fake_train" > /dev/null 2> "$T/mf2.err"; rc=$?
[ $rc -eq 0 ] && [ "$(grep -c 'skipped: resumed' "$T/mf2.err")" -eq 2 ] \
  && json_ok "$M/summary.json" '[[p["batch_size"] for p in m["max_batch_search"]["probes"]] for m in d["meshes"]]==[[4, 6], [3, 4]] and not any(m["max_batch_search"]["capped_at_engine_limit"] for m in d["meshes"])' \
  && ok sweep_matched_resume_keeps_search || fail sweep_matched_resume_keeps_search "rc $rc: $(tail -2 "$T/mf2.err")"
# the max batch never goes past the engine's own limit (B x T <= 2^26 tokens per rank)
spec "$T/cap.json" '{"name": "cap", "world": 2, "meshes": ["2x1"], "model": "tiny", "seq_len": 256, "steps": 2, "lr": 0.003,
  "batch_size": "max", "mem_budget": "1000TB", "data": "'"$DATA"'", "timeout_s": 120}'
"$SWEEP" "$T/cap.json" --plan-only --out-dir "$T/plan" > /dev/null 2> "$T/cap.err"; rc=$?
Q=$(latest "$T/plan/cap")
[ $rc -eq 0 ] && json_ok "$Q/summary.json" 'd["meshes"][0]["batch_size"]==262144 and d["meshes"][0]["capped_at_engine_limit"]' \
  && ok sweep_max_batch_capped_at_engine_limit || fail sweep_max_batch_capped_at_engine_limit "rc $rc: $(grep -o '"batch_size": [0-9]*' "$Q/summary.json" | head -1)"
exit 0
