#!/usr/bin/env bash
# tests/t_cost.sh — the step-time model through the programs: --plan's predicted step and its "time"
# record, --world 64 --gpus-per-host 8 (the DP groups across hosts on the network, TP inside), a run
# record's summary.predicted_step_ms and prediction_error, build/calibrate on a tiny grid (--quick)
# and its drift check, a sweep that calibrates its host once (copies of the programs in a scratch
# folder, so the build's own machine file is never written) and reports predicted against measured,
# --plan-only ranking the 8B 8×H100 meshes by predicted tok/s, and the bad inputs (an unknown
# --machine, machine files that are malformed, miss a field or have a zero rate: exit 2, one line
# naming the field). Never a full calibration: only --quick grids and a given machine file.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
TRAIN=$BUILD/train; CAL=$BUILD/calibrate; SWEEP=$BUILD/sweep
for p in "$TRAIN" "$CAL" "$SWEEP"; do [ -x "$p" ] || { fail cost_programs "$p missing"; exit 1; }; done
T=$(mktemp -d /tmp/t_cost.XXXXXX); trap 'rm -rf "$T"' EXIT
unset MESHSWEEP_MACHINE
FIX=tests/cost/machine-cpu.json
j() { /usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null; }
jt() { [ "$(j "$1" "$2")" = True ]; }   # jt FILE PYEXPR: the expression holds for the document d

# ---- --plan: the predicted step and the plan record's "time" --------------------------------------
P8B=(--plan --model llama3.1-8b --seq-len 1024 --backend cuda --dtype bf16)
if must cost_plan_h100 "$TRAIN" "${P8B[@]}" --world 8 --tp 2 --batch-size 2 --machine h100-80gb --out "$T/p.json" > "$T/p.txt"; then
  jt "$T/p.json" 'd["time"]["predicted"] and d["time"]["machine"] == "h100-80gb" and d["time"]["step_ms"] > 0 and 0 < d["time"]["mfu"] < 1 and d["time"]["compute_ms"] > 0 and d["time"]["comm_ms"] > 0 and 0 <= d["time"]["exposed_comm_ms"] <= d["time"]["comm_ms"] + 1e-9' \
    && ok cost_plan_time_fields || fail cost_plan_time_fields "$(head -c 400 "$T/p.json")"
  jt "$T/p.json" 'abs(d["time"]["tok_s"] - d["global_batch"] * d["seq_len"] / (d["time"]["step_ms"] / 1e3)) < 1e-6 * d["time"]["tok_s"]' \
    && ok cost_plan_tok_s_from_step || fail cost_plan_tok_s_from_step "tok_s is not global tokens / step"
  n=$(grep -c 'ms' "$T/p.txt"); np=$(grep 'ms' "$T/p.txt" | grep -v '^# rank\|MiB' | grep -vc predicted)
  [ "$np" -eq 0 ] && grep -q '^# predicted step' "$T/p.txt" && ok cost_plan_labelled_predicted \
    || fail cost_plan_labelled_predicted "a time line without 'predicted': $(grep ms "$T/p.txt" | grep -v predicted | head -2)"
fi
for rph in 8 64; do
  must cost_plan_world64_$rph "$TRAIN" "${P8B[@]}" --world 64 --tp 8 --batch-size 2 --gpus-per-host $rph --machine h100-80gb --out "$T/w$rph.json" > /dev/null
done
dp8=$(j "$T/w8.json" 'd["time"]["comm_ms_by_group"]["dp"]["all_gather"]'); dp64=$(j "$T/w64.json" 'd["time"]["comm_ms_by_group"]["dp"]["all_gather"]')
tp8=$(j "$T/w8.json" 'd["time"]["comm_ms_by_group"]["tp"]["all_gather"]'); tp64=$(j "$T/w64.json" 'd["time"]["comm_ms_by_group"]["tp"]["all_gather"]')
/usr/bin/python3 -c "import sys; sys.exit(0 if float('$dp8') > 2 * float('$dp64') and float('$tp8') == float('$tp64') else 1)" 2>/dev/null \
  && ok cost_plan_dp_across_hosts_tp_inside || fail cost_plan_dp_across_hosts_tp_inside "dp all_gather $dp8 vs $dp64 ms, tp $tp8 vs $tp64 ms"

# ---- bad input: exit 2, one line -------------------------------------------------------------------
PT=(--plan --world 2 --tp 2 --model tiny --seq-len 32 --batch-size 2)
expect_exit cost_unknown_machine 2 "not a known machine \(known: h100-80gb, h200-141gb, a100-80gb\)" -- "$TRAIN" "${PT[@]}" --machine nosuch
sed 's/"peak_tflops": 0.1/"peak_tflops": 0/' "$FIX" > "$T/zero.json"
expect_exit cost_machine_zero_rate 2 'zero.json: compute.peak_tflops: must be > 0' -- "$TRAIN" "${PT[@]}" --machine "$T/zero.json"
grep -v '"memory_gbs"' "$FIX" > "$T/miss.json"
expect_exit cost_machine_missing_field 2 'miss.json: compute.memory_gbs: missing' -- "$TRAIN" "${PT[@]}" --machine "$T/miss.json"
head -c 300 "$FIX" > "$T/trunc.json"
expect_exit cost_machine_malformed 2 'trunc.json: line [0-9]+: not valid JSON' -- "$TRAIN" "${PT[@]}" --machine "$T/trunc.json"
sed 's/"busbw_gbs": 2,/"busbw_gbs": -2,/' "$FIX" > "$T/neg.json"
expect_exit cost_machine_negative_bandwidth 2 'comm.collectives\[3\].busbw_gbs: must be > 0' -- "$TRAIN" "${PT[@]}" --machine "$T/neg.json"
/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["compute"]["memory_gbs"]=1e-320; json.dump(d,open(sys.argv[2],"w"))' "$FIX" "$T/denorm.json"
expect_exit cost_machine_denormal_rate 2 'denorm.json: compute.memory_gbs: .* is not a plausible figure' -- "$TRAIN" "${PT[@]}" --machine "$T/denorm.json"
/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["compute"]["peak_tflops"]=1e15; json.dump(d,open(sys.argv[2],"w"))' "$FIX" "$T/flops.json"
expect_exit cost_machine_unit_confused 2 'flops.json: compute.peak_tflops: .* is not a plausible figure' -- "$TRAIN" "${PT[@]}" --machine "$T/flops.json"
MESHSWEEP_MACHINE=$T/zero.json expect_exit cost_env_machine_checked 2 'compute.peak_tflops' -- "$TRAIN" "${PT[@]}"
expect_exit cost_gpus_per_host_plan_only 2 'gpus-per-host is only valid with --plan' -- "$TRAIN" --gpus-per-host 8 --steps 1
expect_exit cost_gpus_per_host_divides_world 2 '^train: --gpus-per-host 8 does not divide --world 12' -- \
  "$TRAIN" --plan --model tiny --world 12 --gpus-per-host 8 --machine h100-80gb
/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["comm"]["overlap_slowdown"]=-0.1; json.dump(d,open(sys.argv[2],"w"))' "$FIX" "$T/ovneg.json"
expect_exit cost_machine_overlap_slowdown_negative 2 'ovneg.json: comm.overlap_slowdown: must be >= 0' -- "$TRAIN" "${PT[@]}" --machine "$T/ovneg.json"
/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["comm"]["overlap_slowdown"]=3; json.dump(d,open(sys.argv[2],"w"))' "$FIX" "$T/ov3.json"
expect_exit cost_machine_overlap_slowdown_range 2 'ov3.json: comm.overlap_slowdown: must be <= 1' -- "$TRAIN" "${PT[@]}" --machine "$T/ov3.json"
/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["comm"]["collectives"][0]["busbw_half_bytes"]=-5; json.dump(d,open(sys.argv[2],"w"))' "$FIX" "$T/half.json"
expect_exit cost_machine_half_bytes_negative 2 'half.json: comm.collectives\[0\].busbw_half_bytes: must be >= 0' -- "$TRAIN" "${PT[@]}" --machine "$T/half.json"
# machine files damaged but parseable (they used to predict, exit 0): one line naming the file and the field
mach() { # NAME PYTHON-STATEMENT-ON-d: a copy of the fixture changed by the statement
  /usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); exec(sys.argv[3]); json.dump(d,open(sys.argv[2],"w"))' "$FIX" "$T/$1.json" "$2"
}
mach gemm0 'd["compute"]["gemm"]=[]'
expect_exit cost_machine_empty_gemm 2 'gemm0.json: compute.gemm: must be a non-empty array' -- "$TRAIN" "${PT[@]}" --machine "$T/gemm0.json"
mach dupcoll 'd["comm"]["collectives"].append(dict(d["comm"]["collectives"][0]))'
expect_exit cost_machine_duplicate_collective 2 'dupcoll.json: comm.collectives\[4\]: the same collective as comm.collectives\[0\]' -- "$TRAIN" "${PT[@]}" --machine "$T/dupcoll.json"
mach kind 'd["comm"]["collectives"][0]["kind"]="all_to_all"'
expect_exit cost_machine_unknown_kind 2 "kind.json: comm.collectives\[0\]: kind 'all_to_all' is not" -- "$TRAIN" "${PT[@]}" --machine "$T/kind.json"
mach nl 'd["name"]="a\nb"'
expect_exit cost_machine_name_newline 2 'nl.json: name: holds a control character \(byte 10\)' -- "$TRAIN" "${PT[@]}" --machine "$T/nl.json"
mach lat 'd["comm"]["collectives"][0]["latency_us"]=1e300'
expect_exit cost_machine_latency_implausible 2 'lat.json: comm.collectives\[0\].latency_us: .* is not a plausible figure' -- "$TRAIN" "${PT[@]}" --machine "$T/lat.json"

# ---- a run records its prediction next to what it measured ----------------------------------------
if MESHSWEEP_MACHINE=$FIX must cost_run "${MPIRUN[@]}" -np 2 "$TRAIN" --tp 2 --model tiny --seq-len 32 --batch-size 2 --steps 4 \
     --log-every 100 --out "$T/r.json" > "$T/r.log" 2>&1; then
  jt "$T/r.json" 'd["summary"]["predicted_step_ms"] > 0 and d["summary"]["prediction_machine"] == "test-cpu" and abs(d["summary"]["prediction_error"] - (d["summary"]["predicted_step_ms"] / d["summary"]["step_ms_median"] - 1)) < 1e-9 and d["prediction"]["predicted"] and d["prediction"]["step_ms"] == d["summary"]["predicted_step_ms"]' \
    && ok cost_run_record_prediction || fail cost_run_record_prediction "$(j "$T/r.json" 'd["summary"]')"
  grep -q '^train: step 1/4 .* | predicted step [0-9.]* ms (machine test-cpu)' "$T/r.log" && ok cost_run_says_predicted \
    || fail cost_run_says_predicted "the first progress line does not say the predicted step: $(grep 'step 1/' "$T/r.log")"
fi

# ---- calibration on a tiny grid, and its drift check ----------------------------------------------
# (MESHSWEEP_CALIB_SEQUENCE=1: the step replays run with no more ranks than cores too, as with more)
if MESHSWEEP_CALIB_SEQUENCE=1 must cost_calibrate_quick "${MPIRUN[@]}" -np 2 "$CAL" --quick --model tiny --tp 2 --seq-len 16 --verbose 1 \
     --out "$T/m.json" > "$T/c.log" 2>&1; then
  jt "$T/m.json" 'd["schema"] == "meshsweep.machine/1" and d["calibrated"] and d["cores"] >= 1 and len(d["compute"]["gemm"]) > 0 and any(c.get("ranks") == 2 and c["kind"] == "reduce_scatter" and len(c["table"]) >= 3 for c in d["comm"]["collectives"])' \
    && ok cost_calibrate_file || fail cost_calibrate_file "$(head -c 300 "$T/m.json")"
  # the one step of --model (rank 0's) replayed in order: the file's factor is the ratio its line gives
  sf=$(sed -n 's/^calibrate: step 0 ([0-9]* ops): table [0-9.]* ms, in order on every rank [0-9.]* ms (x\([0-9.]*\)).*/\1/p' "$T/c.log")
  [ -n "$sf" ] && ! grep -q '^calibrate: step 1 ' "$T/c.log" \
    && jt "$T/m.json" "abs(d['compute']['sequence_factor'] - min(max($sf, 0.25), 4)) < 6e-4 and 'compute.sequence_factor' in d['sources']" \
    && ok cost_calibrate_sequence_factor \
    || fail cost_calibrate_sequence_factor "factor '$sf' from the log ($(grep '^calibrate: step' "$T/c.log" | head -2)); file: $(j "$T/m.json" 'd["compute"].get("sequence_factor")')"
  must cost_calibrated_plan "$TRAIN" "${PT[@]}" --machine "$T/m.json" --out "$T/mp.json" > /dev/null \
    && jt "$T/mp.json" 'd["time"]["machine_from"] == "calibrated" and d["time"]["step_ms"] > 0' \
    && ok cost_calibrated_machine_predicts || fail cost_calibrated_machine_predicts "$(head -c 300 "$T/mp.json")"
  must cost_check "${MPIRUN[@]}" -np 2 "$CAL" --check "$T/m.json" --out "$T/chk.json" > /dev/null 2>&1 \
    && jt "$T/chk.json" 'd["schema"] == "meshsweep.machine_check/1" and d["compute_ratio"] > 0 and d["comm_ratio"] > 0 and len(d["load"]) == 3' \
    && ok cost_check_ratios || fail cost_check_ratios "$(head -c 300 "$T/chk.json" 2>/dev/null)"
fi
expect_exit cost_calibrate_bad_spec 2 'calibrate: .*nosuch.json' -- "$CAL" --quick --spec "$T/nosuch.json" --out "$T/x.json"

# ---- calibrate --check of a file without a collective of the world's size: said in words, never "xnan" --
if must cost_calibrate_one_rank "$CAL" --quick --model tiny --seq-len 16 --out "$T/one.json" > /dev/null 2>&1; then
  "${MPIRUN[@]}" -np 2 "$CAL" --check "$T/one.json" --out "$T/chk1.json" > /dev/null 2> "$T/chk1.log"; rc=$?
  [ $rc -eq 0 ] && ! grep -qiwE 'x?nan' "$T/chk1.log" && grep -q 'collectives not compared (the file has no collective of 2 ranks)' "$T/chk1.log" \
    && jt "$T/chk1.json" 'd["comm_ratio"] is None and "no collective of 2 ranks" in d["comm_note"] and d["compute_ratio"] > 0' \
    && ok cost_check_no_collective_no_nan || fail cost_check_no_collective_no_nan "exit $rc: $(grep 'machine check' "$T/chk1.log")"
  "$CAL" --check "$T/one.json" > "$T/chk2.json" 2> "$T/chk2.log"; rc=$?
  [ $rc -eq 0 ] && ! grep -qiwE 'x?nan' "$T/chk2.log" && grep -q 'collectives not compared (one rank has none)' "$T/chk2.log" \
    && ok cost_check_one_rank_no_nan || fail cost_check_one_rank_no_nan "exit $rc: $(grep 'machine check' "$T/chk2.log")"
  jt "$T/one.json" 'd["sources"]["comm.collectives"].startswith("none measured (one rank)")' && ok cost_calibrate_one_rank_placeholder_said \
    || fail cost_calibrate_one_rank_placeholder_said "$(j "$T/one.json" 'd["sources"].get("comm.collectives")')"
  # one rank has a core of its own: no step replays, the factor 1 and why
  jt "$T/one.json" 'd["compute"]["sequence_factor"] == 1 and d["sources"]["compute.sequence_factor"].startswith("1: not measured with no more ranks than cores")' \
    && ok cost_calibrate_no_sequence_factor_undersubscribed \
    || fail cost_calibrate_no_sequence_factor_undersubscribed "$(j "$T/one.json" '[d["compute"].get("sequence_factor"), d["sources"].get("compute.sequence_factor")]')"
fi

# ---- a loaded host: refused before anything is measured, or --force records that it was forced -------
# (the busy cores read from $MESHSWEEP_LOADAVG's 1-minute figure; a calibration without --quick, of one rank and no spec: seconds)
echo "9.00 9.00 9.00 1/100 1" > "$T/load9"
MESHSWEEP_LOADAVG=$T/load9 expect_exit cost_calibrate_loaded_refused 1 \
  "^calibrate: the host is loaded: 9.00 of [0-9]+ cores busy with other work \(limit [0-9.]+; load average 9.00\), .*scheduler's luck.*--force" -- "$CAL" --out "$T/loaded.json"
[ -e "$T/loaded.json" ] && fail cost_calibrate_loaded_nothing_written "$T/loaded.json was written"
if MESHSWEEP_LOADAVG=$T/load9 must cost_calibrate_forced "$CAL" --force --out "$T/forced.json" > /dev/null 2> "$T/forced.log"; then
  jt "$T/forced.json" 'd["sources"]["calibrated"].startswith("FORCED on a loaded host: 9.00 of ") and "FORCED" in d["description"]' \
    && grep -q '^calibrate: wrote .*FORCED on a loaded host' "$T/forced.log" && ok cost_calibrate_forced_recorded \
    || fail cost_calibrate_forced_recorded "$(j "$T/forced.json" '(d["description"], d["sources"].get("calibrated"))')"
fi
# ---- the collectives' rounds are spread over the calibration, not timed one after another -------------
# (a full calibration of 2 ranks, forced so that a busy test machine does not refuse it: ~10 s; the rounds
# begin over most of it, where back to back they took a sixth of it)
if must cost_calibrate_full_two_ranks "${MPIRUN[@]}" -np 2 "$CAL" --force --model tiny --tp 2 --seq-len 16 --verbose 1 \
     --out "$T/full2.json" > "$T/full2.log" 2>&1; then
  span=$(sed -n 's/^calibrate: collectives: 5 rounds of [0-9]* points, begun over \([0-9.]*\) s$/\1/p' "$T/full2.log")
  total=$(sed -n 's/^calibrate: wrote .* collective tables, \([0-9]*\) s, .*/\1/p' "$T/full2.log")
  [ -n "$span" ] && [ -n "$total" ] && awk -v s="$span" -v t="$total" 'BEGIN{exit !(t > 0 && s >= 0.5 * t)}' \
    && ok cost_calibrate_collective_rounds_spread \
    || fail cost_calibrate_collective_rounds_spread "rounds begun over '$span' s of '$total' s: $(grep '^calibrate: \(collectives\|wrote\)' "$T/full2.log")"
fi
grep -q '$(if $(FORCE),--force)' Makefile && ok cost_make_calibrate_force || fail cost_make_calibrate_force "make calibrate has no FORCE=1"

# ---- a sweep on a host without a machine file calibrates it once, then predicts every mesh -------
mkdir -p "$T/bin"; cp "$TRAIN" "$CAL" "$T/bin/"
DATA=$(pwd)/$BUILD/data/kjv/train.bin
printf '%s\n' '{"name": "cost", "world": 2, "meshes": ["1x2", "2x1"], "model": "tiny", "seq_len": 32, "steps": 4,
  "lr": 0.003, "batch_size": 2, "data": "'"$DATA"'", "backend": "cpu",
  "launcher": ["mpirun", "--oversubscribe", "-np", "{world}"], "timeout_s": 120}' > "$T/s.json"
if MESHSWEEP_CALIBRATE=quick must cost_sweep "$SWEEP" "$T/s.json" --train "$T/bin/train" --out-dir "$T/res" > "$T/s.log" 2>&1; then
  D=$(ls -d "$T"/res/cost/*/ | head -1)
  ls "$T"/bin/machines/*.json >/dev/null 2>&1 && grep -q 'calibrating it once' "$T/s.log" && ok cost_sweep_calibrates_once \
    || fail cost_sweep_calibrates_once "no machine file in $T/bin/machines: $(tail -3 "$T/s.log")"
  jt "$D/summary.json" 'd["machine"]["calibrated_by_this_sweep"] and d["machine"]["check"]["compute_ratio"] > 0 and all(m["predicted_step_ms"] > 0 and abs(m["prediction_error"] - (m["predicted_step_ms"] / m["measured_step_ms"] - 1)) < 1e-9 for m in d["meshes"])' \
    && ok cost_sweep_summary_prediction || fail cost_sweep_summary_prediction "$(j "$D/summary.json" '[(m["predicted_step_ms"], m["measured_step_ms"]) for m in d["meshes"]]')"
  grep -q '^## Predicted step time' "$D/report.md" && grep -q 'prediction error' "$D/report.md" && [ -s "$D/prediction.png" ] \
    && ok cost_sweep_report_and_chart || fail cost_sweep_report_and_chart "no section or prediction.png"
  head -1 "$D/summary.csv" | grep -q 'predicted_step_ms,measured_step_ms,prediction_error,status$' && ok cost_sweep_csv \
    || fail cost_sweep_csv "$(head -1 "$D/summary.csv")"
  MESHSWEEP_CALIBRATE=quick must cost_sweep_again "$SWEEP" "$T/s.json" --fresh --train "$T/bin/train" --out-dir "$T/res" > "$T/s2.log" 2>&1 \
    && ! grep -q 'calibrating it once' "$T/s2.log" && grep -q 'sweep: machine .* now compute' "$T/s2.log" \
    && ok cost_sweep_second_checks_only || fail cost_sweep_second_checks_only "$(grep 'sweep: ' "$T/s2.log" | head -3)"
  # a machine file 5x too fast for this host (its GEMMs' times divided by 5): the drift check finds compute
  # about x5, and report.md says so in its first paragraph, before the answers
  MF=$(ls "$T"/bin/machines/*.json | head -1)
  /usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
for g in d["compute"]["gemm"]: g["us"] /= 5
json.dump(d, open(sys.argv[2], "w"))' "$MF" "$T/drifted.json"
  if MESHSWEEP_CALIBRATE=quick MESHSWEEP_MACHINE=$T/drifted.json must cost_sweep_drifted "$SWEEP" "$T/s.json" --fresh --train "$T/bin/train" --out-dir "$T/resd" > "$T/sd.log" 2>&1; then
    D=$(ls -d "$T"/resd/cost/*/ | head -1)
    cr=$(j "$D/summary.json" '"x%.2f" % d["machine"]["check"]["compute_ratio"]')
    # the first paragraph: the lines after the title up to the first blank line
    awk 'NR > 2 && /^$/ {exit} NR > 2' "$D/report.md" > "$T/first.txt"
    grep -q "^\*\*This host has drifted [0-9]*% from its machine file\*\* .*compute measured $cr" "$T/first.txt" \
      && grep -q 'predicted step time below includes that drift' "$T/first.txt" && ok cost_report_drift_first_paragraph \
      || fail cost_report_drift_first_paragraph "check $cr; first paragraph: $(head -c 300 "$T/first.txt")"
  fi
fi

# ---- --plan-only ranks the meshes by predicted tok/s (the 8B 8xH100 spec, no GPU needed) ---------
if must cost_plan_only_8b "$SWEEP" sweeps/llama3.1-8b-8xH100.json --plan-only --out-dir "$T/pl" > "$T/pl.log" 2>&1; then
  D=$(ls -d "$T"/pl/*/*/ | head -1)
  jt "$D/summary.json" 'sorted(m["predicted_rank"] for m in d["meshes"]) == [1, 2, 3, 4] and all((a["predicted_rank"] < b["predicted_rank"]) == (a["predicted_tok_s"] > b["predicted_tok_s"]) for a in d["meshes"] for b in d["meshes"] if a is not b)' \
    && ok cost_plan_only_ranked || fail cost_plan_only_ranked "$(j "$D/summary.json" '[(m["mesh"], m["predicted_rank"], m["predicted_tok_s"]) for m in d["meshes"]]')"
  grep -q 'rank by predicted tok/s' "$D/report.md" && grep -q 'are estimates' "$D/report.md" && ok cost_plan_only_report \
    || fail cost_plan_only_report "report.md has no ranking or no estimates line"
fi
