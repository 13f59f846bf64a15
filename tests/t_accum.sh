#!/usr/bin/env bash
# tests/t_accum.sh — gradient accumulation, the global batch and layer-selective checkpointing:
# - equivalence: the same global batch of 4 on 1 rank (batch 4; batch 1 x 4 micro-batches), on a 2x2 mesh
#   (batch 1 x 2, both --accum-reduce modes), a 2x1 mesh by --global-batch, and TP alone (1x2, with and
#   without sequence parallel: the norm weights' sums over TP) give the same losses and gradient norms;
# - the record (micro_batch, grad_accum, global_batch, config) and the progress line say the batch;
# - the collective counters: each reduce-scatters every unit per micro-batch, last once per step;
# - plan = measured (every category, at peak) with accumulation in both modes and with every:K, and
#   every:K between none and full in activation memory;
# - --plan --batch-size max --global-batch G: the largest micro-batch that divides G/dp and fits (the next
#   divisor up does not fit); --global-batch with --batch-size derives N;
# - bad input: exit 2 with one line (N < 1, G not divisible, N and G disagreeing, every:0, every:K past
#   the layers, unknown values), on one rank and on a mesh.
source "$(dirname "$0")/lib.sh"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
TR="$BUILD/train"
DATA="$BUILD/data/kjv/train.bin"
[ -s "$DATA" ] || { fail accum_data "$DATA missing (run make data)"; exit 1; }
json_get() { /usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }
C=(--model tiny --seq-len 32 --steps 3 --log-every 1 --data "$DATA")
C2=(--model tiny --seq-len 32 --steps 2 --log-every 1 --data "$DATA") # the same, 2 steps

run() { # NAME NP TP ARGS...
  local name=$1 np=$2 tp=$3; shift 3
  local cmd=("$TR" --tp "$tp" "${C[@]}" "$@" --out "$T/$name.json")
  [ "$np" -gt 1 ] && cmd=("${MPIRUN[@]}" -np "$np" "${cmd[@]}")
  must "accum_run_$name" timeout 300 "${cmd[@]}" >/dev/null 2>"$T/$name.err"
}
run b4 1 1 --batch-size 4
run b1n4 1 1 --batch-size 1 --grad-accum 4
run mesh2x2_each 4 2 --batch-size 1 --grad-accum 2
run mesh2x2_last 4 2 --batch-size 1 --grad-accum 2 --accum-reduce last
run mesh2x1_gb 2 1 --batch-size 1 --global-batch 4
run mesh1x2_sp 2 2 --batch-size 2 --grad-accum 2
run mesh1x2_nosp 2 2 --batch-size 1 --grad-accum 4 --no-sequence-parallel
/usr/bin/python3 - "$T" <<'PY'
import json, sys
d = sys.argv[1]
def load(n):
    try: return json.load(open(f"{d}/{n}.json"))
    except Exception: return None
ref = load("b4")
def check(name, cond, why): print(f"ok   {name}" if cond else f"FAIL {name}: {why}")
for n, (b, acc) in {"b1n4": (1, 4), "mesh2x2_each": (1, 2), "mesh2x2_last": (1, 2), "mesh2x1_gb": (1, 2),
                    "mesh1x2_sp": (2, 2), "mesh1x2_nosp": (1, 4)}.items():
    r = load(n)
    if not r or not ref:
        check(f"accum_equivalent_{n}", False, "no record"); continue
    a = [(s["loss"], s["grad_norm"]) for s in ref["steps"]]; x = [(s["loss"], s["grad_norm"]) for s in r["steps"]]
    ok = len(x) == 3 and all(abs(p[0] - q[0]) <= 1e-5 * abs(p[0]) and abs(p[1] - q[1]) <= 1e-4 * abs(p[1]) for p, q in zip(a, x))
    check(f"accum_equivalent_{n}", ok and r["steps"][-1]["loss"] < r["steps"][0]["loss"], f"{x} vs batch 4 {a}")
    check(f"accum_record_{n}", r["batch_size"] == b and r["micro_batch"] == b and r["grad_accum"] == acc and r["global_batch"] == 4
          and r["config"]["grad_accum"] == acc and r["summary"]["tokens_per_step"] == 4 * 32
          and r["memory"]["planned"]["peak"] == r["memory"]["peak"],
          f"batch {r['batch_size']} micro {r.get('micro_batch')} accum {r.get('grad_accum')} global {r.get('global_batch')}")
check("accum_record_plain", ref["grad_accum"] == 1 and ref["micro_batch"] == 4 and ref["global_batch"] == 4
      and ref["config"]["accum_reduce"] == "each" and ref["config"]["checkpoint_activations"] == "none", "plain run's fields")
e, l = load("mesh2x2_each"), load("mesh2x2_last")
if e and l:
    re_, rl = e["comm"]["reduce_scatter"], l["comm"]["reduce_scatter"]
    # tiny: 4 layers + embedding + head = 6 units, 3 steps; the TP part (SP reduce-scatters) is the same in both
    check("accum_comm_each_reduce_scatters_per_micro_batch", re_["calls"] - rl["calls"] == 3 * 6 * (2 - 1)
          and re_["bytes"] > rl["bytes"] and l["config"]["accum_reduce"] == "last",
          f"each {re_} last {rl}")
    check("accum_last_holds_more_grads", l["memory"]["by_category"]["grads"] > e["memory"]["by_category"]["grads"],
          f"grads last {l['memory']['by_category']['grads']} each {e['memory']['by_category']['grads']}")
PY
grep -q 'train: step 1/3 .* batch 1x4 (global 4) eta' "$T/b1n4.err" && ! grep -q ' batch [0-9]*x' "$T/b4.err" \
  && ok accum_progress_line || fail accum_progress_line "$(grep -m1 'step 1/' "$T/b1n4.err")"

# --- plan = measured with accumulation (both modes) and every:K
plan_vs_run() { # NAME NP TP B ARGS...
  local name=$1 w=$2 tp=$3 b=$4; shift 4
  "$TR" --plan --world "$w" --tp "$tp" --batch-size "$b" "${C2[@]}" "$@" --out "$T/$name.plan.json" >/dev/null 2>"$T/$name.plan.err" \
    || { fail "accum_plan_$name" "plan failed: $(cat "$T/$name.plan.err")"; return; }
  local cmd=("$TR" --tp "$tp" --batch-size "$b" "${C2[@]}" "$@" --out "$T/$name.run.json")
  [ "$w" -gt 1 ] && cmd=("${MPIRUN[@]}" -np "$w" "${cmd[@]}")
  timeout 300 "${cmd[@]}" >"$T/$name.log" 2>&1 || { fail "accum_plan_$name" "run failed: $(tail -2 "$T/$name.log" | tr '\n' ' ')"; return; }
  json_ok2 "accum_plan_equals_measured_$name" "$T/$name.plan.json" "$T/$name.run.json" \
    'p["peak"]==r["memory"]["peak"] and p["by_category"]==r["memory"]["by_category"] and p["at_peak"]==r["memory"]["at_peak"] and p["grad_accum"]==r["grad_accum"] and p["global_batch"]==r["global_batch"]'
}
json_ok2() { # NAME PLAN RUN EXPR(p, r)
  /usr/bin/python3 - "$@" <<'PY'
import json, sys
n, p, r = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
if eval(sys.argv[4]): print(f"ok   {n}  ({r['memory']['peak']} bytes)")
elif "peak" in p: print(f"FAIL {n}: planned {p['peak']} {p['by_category']} measured {r['memory']['peak']} {r['memory']['by_category']}")
else: print(f"FAIL {n}: {[(s['loss'], s['grad_norm']) for s in p['steps']]} vs {[(s['loss'], s['grad_norm']) for s in r['steps']]}")
PY
}
plan_vs_run 1x1_n3 1 1 2 --grad-accum 3
plan_vs_run 2x1_n3_each 2 1 2 --grad-accum 3
plan_vs_run 2x1_n3_last 2 1 2 --grad-accum 3 --accum-reduce last
plan_vs_run 2x2_n2_last_ckpt 4 2 1 --grad-accum 2 --accum-reduce last --checkpoint-activations
plan_vs_run 2x2_gb8_each 4 2 2 --global-batch 8
plan_vs_run 1x1_every2 1 1 3 --checkpoint-activations every:2
plan_vs_run 2x2_every3_n2 4 2 2 --checkpoint-activations every:3 --grad-accum 2
# every:2: the losses and gradient norms of no checkpointing, bit for bit (recomputing is the same arithmetic)
must accum_run_every2_reference "$TR" --batch-size 3 "${C2[@]}" --out "$T/none_b3.json" 2>/dev/null
json_ok2 accum_every2_same_losses "$T/none_b3.json" "$T/1x1_every2.run.json" \
  '[(s["loss"], s["grad_norm"]) for s in p["steps"]]==[(s["loss"], s["grad_norm"]) for s in r["steps"]] and len(r["steps"])==2 and r["config"]["checkpoint_activations"]=="every:2"'
# every:2 lies between none and full in activation memory (tiny: 4 layers, layers 0 and 2 recomputed)
for ck in none full every:2; do
  "$TR" --plan --batch-size 4 "${C[@]}" --checkpoint-activations "$ck" --out "$T/ck_${ck/:/}.json" >/dev/null 2>&1
done
/usr/bin/python3 - "$T" <<'PY'
import json, sys
d = sys.argv[1]
a = {k: json.load(open(f"{d}/ck_{k}.json"))["by_category"]["activations"] for k in ("none", "full", "every2")}
print(f"ok   accum_every2_between_none_and_full  ({a})" if a["full"] < a["every2"] < a["none"] else f"FAIL accum_every2_between_none_and_full: {a}")
PY

# --- --plan --batch-size max --global-batch G: the largest fitting micro-batch that divides G/dp
# (20 MiB: the largest batch of one micro-batch per step is 10, not a divisor of 24; last holds more)
for mode in each last; do
  PB=(--plan --world 2 --tp 1 --mem-budget 20MiB "${C[@]}" --accum-reduce "$mode")
  "$TR" "${PB[@]}" --batch-size max --global-batch 48 --out "$T/mx.json" >"$T/mx.txt" 2>&1; rc=$?
  b=$(json_get "$T/mx.json" 'd["batch_size"]' 2>/dev/null); n=$(json_get "$T/mx.json" 'd["grad_accum"]' 2>/dev/null)
  free=$("$TR" "${PB[@]}" --batch-size max --out "$T/mx_free.json" >/dev/null 2>&1; json_get "$T/mx_free.json" 'd["batch_size"]')
  nx=$((b + 1)); while [ "$nx" -le 24 ] && [ $((24 % nx)) -ne 0 ]; do nx=$((nx + 1)); done
  "$TR" "${PB[@]}" --batch-size "$b" --global-batch 48 >/dev/null 2>&1; rc_b=$?
  "$TR" "${PB[@]}" --batch-size "$nx" --global-batch 48 >/dev/null 2>&1; rc_next=$?
  if [ "$rc" -eq 0 ] && [ -n "$b" ] && [ $((24 % b)) -eq 0 ] && [ $((b * n)) -eq 24 ] && [ "$rc_b" -eq 0 ] && [ "$rc_next" -eq 3 ] \
     && [ "$b" -lt "$free" ] && grep -q "^# max micro-batch per DP rank dividing 24: $b x $n micro-batches (global 48)" "$T/mx.txt"; then
    ok "accum_plan_max_micro_batch_divides_$mode  (micro-batch $b x $n; one micro-batch: $free)"
  else fail "accum_plan_max_micro_batch_divides_$mode" "rc $rc b=$b n=$n free max $free; at b exit $rc_b, next divisor $nx exit $rc_next: $(tail -2 "$T/mx.txt")"; fi
done

# the step-time model prices every micro-batch: 4 micro-batches of 2 take longer than one of 2 and less
# than 4 separate steps (one optimizer step, one gradient-norm all-reduce), at 4 times the tokens
P8=(--plan --world 8 --tp 2 --model llama3.1-8b --seq-len 4096 --gpu h100-80gb --machine h100-80gb --dtype bf16)
"$TR" "${P8[@]}" --batch-size 2 --out "$T/pred1.json" >"$T/pred1.txt" 2>&1; rc1=$?
"$TR" "${P8[@]}" --batch-size 2 --grad-accum 4 --out "$T/pred.json" >"$T/pred.txt" 2>&1; rc=$?
got=$(/usr/bin/python3 - "$T/pred1.json" "$T/pred.json" <<'PY' 2>&1
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
ta, tb = a["time"], b["time"]
ok = b["grad_accum"] == 4 and ta and tb and ta["step_ms"] < tb["step_ms"] < 4 * ta["step_ms"] \
     and abs(tb["tok_s"] * tb["step_ms"] - 4 * ta["tok_s"] * ta["step_ms"]) < 1e-6 * ta["tok_s"] * ta["step_ms"] * 4
print("ok" if ok else f"N=1 {ta and ta['step_ms']} ms, N=4 {tb and tb['step_ms']} ms")
print(f"{ta['step_ms']:.1f} ms -> {tb['step_ms']:.1f} ms" if ta and tb else "")
PY
)
if [ "$rc1" -eq 0 ] && [ "$rc" -eq 0 ] && [ "$(echo "$got" | head -1)" = ok ]; then ok "accum_prediction_prices_every_micro_batch  ($(echo "$got" | tail -1))"
else fail accum_prediction_prices_every_micro_batch "rc $rc1/$rc: $got $(grep -i predict "$T/pred.txt" | head -2)"; fi

# --- bad input: exit 2, one line, no output file
bad() { # NAME PATTERN ARGS...
  local n=$1 pat=$2; shift 2
  rm -f "$T/bad.json"
  expect_exit "$n" 2 "$pat" -- "$TR" --steps 1 --model tiny --seq-len 32 --out "$T/bad.json" "$@"
  [ -e "$T/bad.json" ] && fail "${n}_no_output" "output file written"
}
bad accum_bad_grad_accum_zero "--grad-accum must be in 1\.\.65536 \(got 0\)" --grad-accum 0
bad accum_bad_global_batch_zero "--global-batch must be >= 1 \(got 0\)" --global-batch 0
bad accum_bad_global_not_multiple "--global-batch 10 on mesh 1x1 is 10 sequences per DP rank, not a multiple of --batch-size 4 \(micro-batches that divide 10: 1, 2, 5, 10\)" --global-batch 10
bad accum_bad_disagree "--grad-accum 3 disagrees with --global-batch 8: dp 1 x --batch-size 4 x 3 = 12 \(give one of the two, or --grad-accum 2\)" --global-batch 8 --grad-accum 3
bad accum_bad_reduce_mode "--accum-reduce must be each or last \(got 'both'\)" --accum-reduce both
bad accum_bad_every0 "--checkpoint-activations every:0: K must be a positive integer" --checkpoint-activations every:0
bad accum_bad_every_past_layers "--checkpoint-activations every:5: K is more than the 4 layers of model tiny \(every:4 recomputes the first layer only\)" --checkpoint-activations every:5
bad accum_bad_ckpt_value "--checkpoint-activations must be none, full or every:K \(got 'some'\)" --checkpoint-activations some
expect_exit accum_bad_plan_max_both 2 "--batch-size max takes --global-batch or --grad-accum, not both" -- \
  "$TR" --plan --batch-size max --mem-budget 12MiB --global-batch 8 --grad-accum 2 --model tiny --seq-len 32
expect_exit accum_bad_plan_not_divisible_dp 2 "--global-batch 6 is not divisible by dp 4 of mesh 4x1 \(give a multiple of 4\)" -- \
  "$TR" --plan --world 4 --batch-size max --mem-budget 12MiB --global-batch 6 --model tiny --seq-len 32
out=$(timeout 60 "${MPIRUN[@]}" -np 4 "$TR" --steps 1 --model tiny --seq-len 32 --tp 2 --batch-size 2 --global-batch 6 2>&1); rc=$?
[ "$rc" -eq 2 ] && [ "$(grep -c '^train: ' <<<"$out")" -eq 1 ] \
  && grep -q '^train: --global-batch 6 on mesh 2x2 is 3 sequences per DP rank, not a multiple of --batch-size 2 (micro-batches that divide 3: 1, 3)$' <<<"$out" \
  && ok accum_bad_mesh_one_line || fail accum_bad_mesh_one_line "exit $rc: $(head -c 300 <<<"$out")"
# the bare flag is full; a following option is not its value
"$TR" --plan --batch-size 2 --model tiny --seq-len 32 --checkpoint-activations --out "$T/bare.json" >/dev/null 2>&1 \
  && "$TR" --plan --batch-size 2 --model tiny --seq-len 32 --checkpoint-activations full --out "$T/full.json" >/dev/null 2>&1 \
  && cmp -s "$T/bare.json" "$T/full.json" && ok accum_bare_flag_is_full || fail accum_bare_flag_is_full "plans differ or failed"
