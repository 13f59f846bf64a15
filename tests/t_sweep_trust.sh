#!/usr/bin/env bash
# tests/t_sweep_trust.sh — what a sweep trusts and what it says: a rerun resumes only runs made from the
# same inputs (a token file or model config whose contents changed starts a new folder), and keeps a
# record only when its configuration is the spec's (one copied in from another experiment is run
# again); a folder copied from another host with a later stamp, or one whose runner.json is truncated,
# never makes every rerun start a new folder, and is named as what it is; the max-batch search stops
# where the token files stop (the measured run's eval batches included), so the confirmed batch is
# never refused; a --plan-only sweep whose model fits no mesh at batch 1 says so and what batch 1
# needs; a results root of ~240 characters keeps every chart and no hidden temp file; report.md notes
# runs whose ranks ran other BLAS kernels. Small specs on one rank (no launcher): seconds each.
# Not: the spec parser (tests/test_sweep_spec.c), faults during runs (tests/t_faults.sh), the sweep
# end to end (tests/t_sweep.sh).
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
SW=$BUILD/sweep
TR=$BUILD/train
PY=/usr/bin/python3
for f in "$SW" "$TR" "$BUILD/data/kjv/train.bin" "$BUILD/data/kjv/val.bin"; do
  [ -e "$f" ] || { fail trust_setup "$f missing (make && make data)"; exit 1; }
done
T=$(mktemp -d /tmp/t_sweep_trust.XXXXXX)
trap 'rm -rf "$T"' EXIT
cp "$BUILD/data/kjv/train.bin" "$T/train.bin"; cp "$BUILD/data/kjv/val.bin" "$T/val.bin"
json_ok() { "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' "$1" "$2" 2>/dev/null; }
latest() { ls -d "$1"/*/ 2>/dev/null | sort | tail -1 | sed 's:/$::'; }
nfolders() { ls -d "$1"/*/ 2>/dev/null | wc -l; }
# spec FILE NAME [EXTRA-JSON]: one rank, mesh 1x1, fixed batch 1, 2 steps of tiny at seq 32
spec() {
  printf '{"name": "%s", "world": 1, "meshes": ["1x1"], "model": "%s", "seq_len": 32, "steps": 2, "lr": 0.003, "batch_size": 1,
  "data": "%s", "timeout_s": 120, "launcher": []%s}\n' "$2" "${MODEL:-tiny}" "${DATAF:-$T/train.bin}" "${3:-}" > "$1"
}
run() { "$SW" "$1" --out-dir "$T/res" > /dev/null 2> "$2"; }

# ---- the inputs' contents are part of the folder's identity ------------------------------------------
spec "$T/a.json" a
run "$T/a.json" "$T/a1.err" || fail trust_first_run "$(tail -2 "$T/a1.err")"
A1=$(latest "$T/res/a")
run "$T/a.json" "$T/a2.err"; rc=$?
[ $rc -eq 0 ] && grep -q 'skipped: resumed' "$T/a2.err" && [ "$(nfolders "$T/res/a")" -eq 1 ] && ok trust_same_inputs_resume \
  || fail trust_same_inputs_resume "rc $rc: $(tail -2 "$T/a2.err")"
# the same size, other tokens (another build of the data would): a new folder, and the reason said
"$PY" -c 'import sys; p=sys.argv[1]; b=bytearray(open(p,"rb").read()); b[4096:4098]=b[4098:4100]; b[4098:4100]=bytes([(b[4098]+1)%256, 0]); open(p,"wb").write(b)' "$T/train.bin"
run "$T/a.json" "$T/a3.err"; rc=$?
[ $rc -eq 0 ] && grep -q "not resuming $A1: its inputs have changed since (data: " "$T/a3.err" && [ "$(nfolders "$T/res/a")" -eq 2 ] \
  && ! grep -q 'skipped: resumed' "$T/a3.err" && ok trust_data_contents_changed_new_folder \
  || fail trust_data_contents_changed_new_folder "rc $rc: $(head -3 "$T/a3.err")"
# a model config.json whose contents change (one field) is another model
echo '{"vocab_size": 256, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 4, "max_position_embeddings": 64}' > "$T/m.json"
MODEL=$T/m.json spec "$T/b.json" b
run "$T/b.json" "$T/b1.err" || fail trust_model_run "$(tail -2 "$T/b1.err")"
B1=$(latest "$T/res/b")
sed -i 's/"num_hidden_layers": 1/"num_hidden_layers": 2/' "$T/m.json"
run "$T/b.json" "$T/b2.err"; rc=$?
[ $rc -eq 0 ] && grep -q "not resuming $B1: its inputs have changed since (model: " "$T/b2.err" && [ "$(nfolders "$T/res/b")" -eq 2 ] \
  && ok trust_model_contents_changed_new_folder || fail trust_model_contents_changed_new_folder "rc $rc: $(head -3 "$T/b2.err")"

# ---- a kept record must be of the spec's configuration ---------------------------------------------
A2=$(latest "$T/res/a")
for c in lr:--lr:0.01 seed:--seed:7 model:--model:small data:--data:$T/val.bin; do
  IFS=: read -r key opt val <<<"$c"
  base=(--model tiny --seq-len 32 --steps 2 --lr 0.003 --batch-size 1 --data "$T/train.bin")
  without base "$opt"; args=("${WITHOUT[@]}")
  # the same run with one value changed (given once: an option given twice is refused), its record
  # copied into the folder as if it were this spec's
  "$TR" "${args[@]}" "$opt" "$val" --log-every 100 --out "$T/other.json" 2>/dev/null || { fail "trust_copied_record_$key" "the other run failed"; continue; }
  cp "$T/other.json" "$A2/runs/1x1.json"
  run "$T/a.json" "$T/c_$key.err"; rc=$?
  if [ $rc -eq 0 ] && grep -q "runs/1x1.json is not a record of this launch (the record is of [a-z_.]*$key.*): running it again" "$T/c_$key.err" \
     && json_ok "$A2/runs/1x1.json" 'd["status"]=="ok" and d["config"]["lr"]==0.003 and d["config"]["data"].endswith("/train.bin") and d["config"]["model"]["name"]=="tiny"'
  then ok "trust_copied_record_other_$key"; else fail "trust_copied_record_other_$key" "rc $rc: $(grep -i 'record\|resum' "$T/c_$key.err" | head -2)"; fi
done

# ---- folders this runner did not make never hide its own -------------------------------------------
# a copy from another host whose clock runs ahead (a later stamp, another runner host): passed over,
# named, untouched; this runner's latest is resumed, now and on the next rerun
F="$T/res/a/29991231T235959Z"
cp -a "$A2" "$F" && rm -f "$F/.lock"
"$PY" -c 'import json,sys; p=sys.argv[1]; d=json.load(open(p)); d["identity"]["hosts"]["runner"]="elsewhere"; json.dump(d,open(p,"w"))' "$F/runner.json"
n0=$(nfolders "$T/res/a")
run "$T/a.json" "$T/f1.err"; rc1=$?
run "$T/a.json" "$T/f2.err"; rc2=$?
[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ "$(nfolders "$T/res/a")" -eq "$n0" ] && grep -q "not resuming $F: it was made on other hosts.*; resuming $A2" "$T/f2.err" \
  && grep -q 'skipped: resumed' "$T/f2.err" && ok trust_later_copy_from_elsewhere_passed_over \
  || fail trust_later_copy_from_elsewhere_passed_over "rc $rc1/$rc2, $(nfolders "$T/res/a") folders (was $n0): $(head -2 "$T/f2.err")"
rm -rf "$F"
# this runner's latest with a truncated runner.json: said as such (not "no runner.json"), never resumed
head -c 40 "$A2/runner.json" > "$T/rj" && cp "$T/rj" "$A2/runner.json"
run "$T/a.json" "$T/t1.err"; rc=$?
[ $rc -eq 0 ] && grep -q "not resuming $A2: its runner.json is not valid JSON (truncated or damaged)" "$T/t1.err" && ! grep -q 'skipped: resumed' "$T/t1.err" \
  && ok trust_truncated_runner_json_named || fail trust_truncated_runner_json_named "rc $rc: $(head -2 "$T/t1.err")"

# ---- the max-batch search stops where the token files stop -------------------------------------------
# 800 validation tokens = 24 sequences of 32: 4 eval batches of at most 6; the memory budget alone
# would allow 17. The search confirms 6 (the data's limit), and the measured run at 6 is ok.
head -c 1600 "$T/val.bin" > "$T/val800.bin"
spec "$T/mx.json" mx ', "eval_data": "'"$T"'/val800.bin", "mem_budget": "32MiB"'
sed -i 's/"batch_size": 1/"batch_size": "max"/' "$T/mx.json"
run "$T/mx.json" "$T/mx.err"; rc=$?
M=$(latest "$T/res/mx")
[ $rc -eq 0 ] && json_ok "$M/runs/1x1.json" 'd["status"]=="ok" and d["batch_size"]==6 and len(d["eval"])>=1' \
  && json_ok "$M/summary.json" 'd["meshes"][0]["max_batch_search"]["capped_at_data_limit"] is True' \
  && grep -q 'max batch 6 per DP rank (global 6): the most the token files hold' "$T/mx.err" && ok trust_max_batch_within_the_data \
  || fail trust_max_batch_within_the_data "rc $rc: $(grep -E 'max batch|run b=|probe' "$T/mx.err" | tr '\n' ' ' | head -c 300)"

# ---- --plan-only: a model that fits no mesh even at batch 1 -------------------------------------------
spec "$T/nf.json" nf ', "mem_budget": "1MiB"'
sed -i 's/"batch_size": 1/"batch_size": "max"/' "$T/nf.json"
"$SW" "$T/nf.json" --plan-only --out-dir "$T/res" > /dev/null 2> "$T/nf.err"; rc=$?
N=$(latest "$T/res/nf")
grep -q 'No mesh fits the memory budget even at batch 1: batch 1 needs 15.1 MiB per rank at the least (1x1)' "$N/report.md" 2>/dev/null \
  && grep -q '| none fits | 0 | batch 1 needs 15.1 ' "$N/report.md" && ! grep -q 'planned peak 0.0 MiB' "$N/report.md" \
  && json_ok "$N/runs/1x1.plan.json" 'd["batch_size"]==0 and d["batch_1_needs"]["peak"] > 15e6' && ok trust_plan_only_nothing_fits_says_so \
  || fail trust_plan_only_nothing_fits_says_so "rc $rc: $(grep -i 'fit\|largest' "$N/report.md" 2>/dev/null | head -2)"

# ---- a long results root keeps every chart -------------------------------------------------------------
L="$T/$(printf 'l%.0s' $(seq 120))/$(printf 'm%.0s' $(seq 100))"
mkdir -p "$L"
spec "$T/lp.json" lp ', "eval_data": "'"$T"'/val.bin"'
"$SW" "$T/lp.json" --out-dir "$L" > /dev/null 2> "$T/lp.err"; rc=$?
P=$(latest "$L/lp")
missing=""; for c in loss loss_tokens loss_time throughput memory max_batch; do for e in png svg; do [ -s "$P/$c.$e" ] || missing="$missing $c.$e"; done; done
hidden=$(ls -A "$P" 2>/dev/null | grep '^\..*tmp')
[ $rc -eq 0 ] && [ ${#L} -ge 240 ] && [ -z "$missing" ] && [ -z "$hidden" ] && ok trust_long_results_root_keeps_charts \
  || fail trust_long_results_root_keeps_charts "rc $rc, root ${#L} chars, missing:$missing hidden: $hidden"

# ---- report.md says when ranks ran other BLAS kernels ---------------------------------------------------
# a stand-in train whose record says the hosts' kernels differ, as train's does (env.blas_by_host)
cat > "$T/fake_train" <<'PY'
#!/usr/bin/env python3
import json, sys
a = sys.argv[1:]
out = a[a.index("--out") + 1]
if "--plan" in a:
    json.dump({"schema": "meshsweep.plan/1", "world": 1, "tp": 1, "batch_size": 1, "fits": True, "peak": 1}, open(out, "w")); sys.exit(0)
steps = int(a[a.index("--steps") + 1])
json.dump({"schema": "meshsweep.run/1", "status": "ok", "mesh": {"world": 1, "dp": 1, "tp": 1}, "batch_size": 1, "global_batch": 1, "grad_accum": 1,
           "config": {"steps": steps, "seq_len": 32}, "steps": [{"step": k, "loss": 5.0, "ms": 1.0} for k in range(1, steps + 1)],
           "summary": {"steps_done": steps, "tok_s": 10.0, "final_loss": 5.0}, "memory": {"peak": 1},
           "env": {"blas_hosts_differ": True, "blas_by_host": {"hostA": {"core": "Cooperlake"}, "hostB": {"core": "Nehalem"}}}}, open(out, "w"))
PY
chmod +x "$T/fake_train"
spec "$T/bl.json" bl
"$SW" "$T/bl.json" --out-dir "$T/res" --train "$T/fake_train" > /dev/null 2> "$T/bl.err"; rc=$?
Q=$(latest "$T/res/bl")
[ $rc -eq 0 ] && grep -q 'the ranks ran different BLAS kernels in 1x1 (`hostA` Cooperlake, `hostB` Nehalem): their losses agree with a run on one host to rounding' "$Q/report.md" \
  && ok trust_report_notes_other_blas_kernels || fail trust_report_notes_other_blas_kernels "rc $rc: $(grep -i blas "$Q/report.md" | head -2) $(tail -2 "$T/bl.err")"
exit 0
