#!/usr/bin/env bash
# tests/t_gpu_check.sh — gpukit/gpu_check.sh tells the truth. Its GPU detection is injected
# (GPU_CHECK_NVIDIA_SMI points at a fake nvidia-smi), so the FAIL paths run on this machine:
#   no_gpu      nvidia-smi fails as it does without a driver: every GPU step is `skip ... no GPU`, the
#               exit is 0, summary.json is valid JSON with every step;
#   broken      a temporary copy of the tree with a file that does not compile, a GPU present: the
#               build row is FAIL, the GPU steps are FAIL ("not run"), exit 1;
#   injected    carried binaries replaced: a CUDA test that prints a FAIL line (and exits 0), one that
#               only skips although a GPU is there, a train that exits 1: those rows and every run
#               that uses train are FAIL, exit 1;
#   budget      the stage limits add up to the budget (600 s); --budget-s 100 cuts the last stages
#               (`skip ... not run: budget`); a stage out of time is FAIL and leaves the earlier tables,
#               and so does a SIGKILL in the middle of a stage;
#   no_time     a spent budget: GPU steps are `skip ... not run`, nothing is started.
# What it cannot prove here: that the ok paths on a real GPU read their figures right (no GPU).
source "$(dirname "$0")/lib.sh"
# the gpu_check.sh runs below are the subject, not checks of this suite: their ok/FAIL lines must not
# reach this suite's result channel (the variable stays set here for ok/fail, unexported)
export -n MESHSWEEP_TEST_RESULTS 2>/dev/null || true
case "$BUILD" in *san*) skip gpu_check "runs in the plain suite (not a sanitizer build)"; exit 0;; esac
[ -x "$BUILD/train" ] || { fail gpu_check "$BUILD/train not built"; exit 1; }
command -v python3 >/dev/null || { skip gpu_check "no python3 (summary.json is checked with it)"; exit 0; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
GPU_STEPS=(versions cuda_kernels cuda_bf16 cuda_attention speed bench_b1 bench_b4 bench_b8 calibrate cpu_vs_cuda mesh_1x1 mesh_1x8
           mesh_2x4 mesh_4x2 mesh_8x1 init_1b plan prediction)
ALL_STEPS=(env build "${GPU_STEPS[@]}")

mkdir -p "$T/bin"
cat > "$T/bin/smi-none" <<'SH'
#!/bin/sh
echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver." >&2; exit 9
SH
cat > "$T/bin/smi-h200" <<'SH'
#!/bin/sh
case "$*" in *query-gpu*) echo "NVIDIA H200, 580.95.05, 143771 MiB";; *) echo "fake nvidia-smi";; esac
SH
chmod +x "$T/bin/"smi-*

# status NAME DIR : the status column of step NAME in DIR/summary.txt
status() { awk -v n="$1" '$1 == n { print $2 }' "$2/summary.txt"; }
note() { awk -v n="$1" '$1 == n { $1 = ""; $2 = ""; $3 = ""; sub(/^ +/, ""); print }' "$2/summary.txt"; }
json_ok() { # DIR NSTEPS WANT_FAILED : summary.json parses, has NSTEPS steps, failed flag as wanted
  python3 - "$1/summary.json" "$2" "$3" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert len(s["steps"]) == int(sys.argv[2]), f"{len(s['steps'])} steps"
assert s["failed"] == (sys.argv[3] == "1"), f"failed={s['failed']}"
for st in s["steps"]:
    assert st["status"] in ("ok", "FAIL", "skip") and isinstance(st["seconds"], int) and isinstance(st["figures"], dict), st
PY
}

# ---- no GPU: every GPU step is skip ... no GPU, exit 0
O=$T/no_gpu
OUT=$O GPU_CHECK_PREBUILT=1 GPU_CHECK_NVIDIA_SMI=$T/bin/smi-none bash gpukit/gpu_check.sh > "$T/no_gpu.out" 2>&1; rc=$?
check gpu_check_no_gpu_exit_0 [ "$rc" -eq 0 ]
bad=""
for s in "${GPU_STEPS[@]}"; do
  [ "$(status "$s" "$O")" = skip ] && note "$s" "$O" | grep -q '^no GPU' || bad="$bad $s=$(status "$s" "$O")"
done
[ -z "$bad" ] && ok "gpu_check_no_gpu_every_gpu_step_skip_no_gpu (${#GPU_STEPS[@]} steps)" || fail gpu_check_no_gpu_every_gpu_step_skip_no_gpu "$bad"
check gpu_check_no_gpu_binaries_ok [ "$(status binaries "$O")" = ok ]
if json_ok "$O" 20 0 2> "$T/j.err"; then ok gpu_check_no_gpu_summary_json; else fail gpu_check_no_gpu_summary_json "$(tail -n 1 "$T/j.err")"; fi
# and without any nvidia-smi at all
OUT=$T/no_smi GPU_CHECK_PREBUILT=1 GPU_CHECK_NVIDIA_SMI=$T/bin/absent bash gpukit/gpu_check.sh > /dev/null 2>&1; rc=$?
check gpu_check_no_nvidia_smi_exit_0 [ "$rc" -eq 0 ]
check gpu_check_no_nvidia_smi_skips [ "$(status bench_b4 "$T/no_smi")" = skip ]

# ---- a file that does not compile, in a temporary copy of the tree (objects copied, timestamps kept)
C=$T/tree; mkdir -p "$C"
tar -C . --exclude=./build/emu --exclude=./build/emu-engine --exclude=./build/gpu-kit --exclude=./build/gpu-kit-debs \
    --exclude=./build/gpu-kit.tmp --exclude=./build/test-logs --exclude=./build/data --exclude=./build/gpu-check \
    --exclude=./.git --format=posix -cf - . | tar -C "$C" -xf -
echo '#error injected by t_gpu_check: this file does not compile' >> "$C/core/engine/init.c"
O=$T/broken
OUT=$O GPU_CHECK_NVIDIA_SMI=$T/bin/smi-h200 bash "$C/gpukit/gpu_check.sh" > "$T/broken.out" 2>&1; rc=$?
check gpu_check_broken_build_exit_1 [ "$rc" -eq 1 ]
if [ "$(status build "$O")" = FAIL ]; then ok gpu_check_broken_build_row_fail
else fail gpu_check_broken_build_row_fail "build row: $(status build "$O") $(note build "$O")"; fi
bad=""
for s in "${GPU_STEPS[@]}"; do [ "$(status "$s" "$O")" = FAIL ] || bad="$bad $s=$(status "$s" "$O")"; done
[ -z "$bad" ] && ok gpu_check_broken_build_gpu_steps_fail_not_run || fail gpu_check_broken_build_gpu_steps_fail_not_run "$bad"
grep -q 'injected by t_gpu_check' "$O/build.log" && ok gpu_check_broken_build_log_has_error || fail gpu_check_broken_build_log_has_error "no compiler error in build.log"
if json_ok "$O" 20 1 2> "$T/j.err"; then ok gpu_check_broken_summary_json; else fail gpu_check_broken_summary_json "$(tail -n 1 "$T/j.err")"; fi

# ---- carried binaries replaced: a CUDA test printing FAIL (exit 0), one only skipping, a train exiting 1
B=$T/fakebuild; mkdir -p "$B/tests"
printf '#include <stdio.h>\nint main(void){puts("ok   cuda_op_a");puts("FAIL cuda_op_b: injected wrong value");return 0;}\n' > "$T/k.c"
printf '#include <stdio.h>\nint main(void){puts("skip cuda_bf16: no CUDA device");return 0;}\n' > "$T/b.c"
printf '#include <stdio.h>\nint main(void){fputs("train: injected failure\\n", stderr);return 1;}\n' > "$T/t.c"
printf '#include <stdio.h>\n#include <string.h>\nint main(int c,char**v){if(c>1&&!strcmp(v[1],"--versions")){puts("driver CUDA 12.4, runtime CUDA 12.8, cuBLAS 12.8.4, NCCL 2.21.5");return 0;}fputs("gpu_bench: injected failure\\n",stderr);return 1;}\n' > "$T/g.c"
gcc -o "$B/tests/test_cuda_kernels" "$T/k.c" && gcc -o "$B/tests/test_cuda_bf16" "$T/b.c" && gcc -o "$B/train" "$T/t.c" \
  && gcc -o "$B/gpu_bench" "$T/g.c" && cp "$B/train" "$B/initbench" && cp "$B/train" "$B/calibrate" && cp "$B/tests/test_cuda_kernels" "$B/tests/test_cuda_attention" \
  || { fail gpu_check_injected_build "gcc"; exit 1; }
O=$T/injected
OUT=$O BUILD=$B GPU_CHECK_PREBUILT=1 GPU_CHECK_NVIDIA_SMI=$T/bin/smi-h200 bash gpukit/gpu_check.sh > "$T/injected.out" 2>&1; rc=$?
check gpu_check_injected_exit_1 [ "$rc" -eq 1 ]
check gpu_check_injected_env_names_gpu grep -q 'NVIDIA H200' "$O/summary.txt"
want() { # NAME STATUS NOTE-PATTERN
  if [ "$(status "$1" "$O")" = "$2" ] && note "$1" "$O" | grep -qE "$3"; then ok "gpu_check_injected_${1}_$2"
  else fail "gpu_check_injected_${1}_$2" "row: $(status "$1" "$O") $(note "$1" "$O")"; fi
}
want cuda_kernels FAIL 'FAIL lines'
want cuda_bf16 FAIL 'skipped on a GPU machine'
want cuda_attention FAIL 'FAIL lines'
want init_1b FAIL 'exit'
want cpu_vs_cuda FAIL 'exit|no ok line'
for b in 1 4 8; do want bench_b$b FAIL 'exit 1: train: injected failure'; done
want versions ok 'driver CUDA 12.4, runtime CUDA 12.8, cuBLAS 12.8.4, NCCL 2.21.5'
want mesh_1x1 FAIL 'exit 1'
for m in mesh_1x8 mesh_2x4 mesh_4x2 mesh_8x1; do want "$m" FAIL 'exit'; done
want plan FAIL 'missing|lacks|planned'
want calibrate FAIL 'exit 1'
want prediction FAIL 'no run record'
want speed FAIL 'exit'
if json_ok "$O" 20 1 2> "$T/j.err"; then ok gpu_check_injected_summary_json; else fail gpu_check_injected_summary_json "$(tail -n 1 "$T/j.err")"; fi

# ---- every program replaced by a fake that passes and writes a record: the ok paths read the right
# figures, and a plan that differs from the measured bytes or a device over budget + overhead is FAIL
F=$T/okbuild; mkdir -p "$F/tests"
cat > "$F/train" <<'SH'
#!/bin/bash
out=""; steps=6; b=1
while [ $# -gt 0 ]; do case "$1" in --out) out=$2; shift;; --steps) steps=$2; shift;; --batch-size) b=$2; shift;; esac; shift; done
planned=800; used=1500
[ "${FAKE:-}" = planbad ] && planned=801
[ "${FAKE:-}" = devbad ] && used=1601
st=$(for i in $(seq 1 "$steps"); do printf '%s{"step": %d, "loss": 2.5}' "$([ "$i" -gt 1 ] && echo ,)" "$i"; done)
[ -n "$out" ] && cat > "$out.$$" <<JSON && mv "$out.$$" "$out"
{"status": "ok", "steps": [$st],
 "config": {"seq_len": 5, "model": {"num_hidden_layers": 2, "hidden_size": 10}},
 "summary": {"tok_s": $(( 1000 * b )).5, "mfu": 0.41, "step_ms_median": 99.5, "final_loss": 2.5, "flops_per_token": 1000.0,
             "predicted_step_ms": 89.55, "prediction_machine": "fake"},
 "memory": {"budget": 1000, "peak": 800, "by_category": {"params": 800},
            "planned": {"peak": $planned, "by_category": {"params": $planned}},
            "device": {"total": 5000, "used_at_end": $used, "runtime_overhead": 600}}}
JSON
exit 0
SH
printf '#!/bin/sh\necho "ok   op_a"; echo "ok   op_b"\n' > "$F/tests/test_cuda_kernels"
# the calibration: a machine file at --out (under mpirun too)
cat > "$F/calibrate" <<'SH'
#!/bin/bash
out=""; while [ $# -gt 0 ]; do [ "$1" = --out ] && out=$2; shift; done
[ -n "$out" ] && echo '{"schema": "meshsweep.machine/1", "name": "fake", "compute": {"peak_tflops": 321.5}}' > "$out"
exit 0
SH
cp "$F/tests/test_cuda_kernels" "$F/tests/test_cuda_bf16"
cp "$F/tests/test_cuda_kernels" "$F/tests/test_cuda_attention"
printf '#!/bin/sh\necho "# model llama3.2-1b, rank 0 of 1x1, 16 threads"; echo "# owned_elems wall_s cpu_s cpu_ns_elem"; echo "  1498482688 4.900 75.100 50.12"\n' > "$F/initbench"
# the benchmark program: the versions line, its table, and records as build/gpu_bench --json writes them
# (FAKE=slowbench: the kernels take longer than any stage here allows)
cat > "$F/gpu_bench" <<'SH'
#!/bin/bash
[ "$1" = --versions ] && { echo "driver CUDA 12.4, runtime CUDA 12.8, cuBLAS 12.8.4, NCCL 2.21.5"; exit 0; }
[ "${FAKE:-}" = slowbench ] && sleep 30
j=""; while [ $# -gt 0 ]; do [ "$1" = --json ] && j=$2; shift; done
echo "# kernel             ms"
[ -n "$j" ] && echo '{"kernel_sum_ms": 80.5, "mfu": 0.47, "mfu_causal": 0.43, "kernels": [{"name": "attention forward", "ms": 1.0, "tflops": 212.5},
 {"name": "attention backward", "ms": 2.0, "tflops": 131.25}, {"name": "adamw fused (bf16 copy, zero g)", "ms": 9.95, "gb_s": 2900.5}],
 "step": {"groups": [{"group": "gemm", "ms": 50.0}, {"group": "optimizer", "ms": 9.95}]}}' > "$j"
exit 0
SH
chmod +x "$F/train" "$F/initbench" "$F/gpu_bench" "$F/calibrate" "$F/tests/"*
O=$T/all_ok
OUT=$O BUILD=$F GPU_CHECK_PREBUILT=1 GPU_CHECK_NVIDIA_SMI=$T/bin/smi-h200 bash gpukit/gpu_check.sh > "$T/all_ok.out" 2>&1; rc=$?
check gpu_check_fake_ok_exit_0 [ "$rc" -eq 0 ]
bad=""
for s in "${GPU_STEPS[@]}"; do [ "$(status "$s" "$O")" = ok ] || bad="$bad $s=$(status "$s" "$O")"; done
[ -z "$bad" ] && ok gpu_check_fake_ok_every_step_ok || fail gpu_check_fake_ok_every_step_ok "$bad $(grep -v '^ok' "$O/summary.txt" | head -n 3)"
if python3 - "$O/summary.json" <<'PY' 2> "$T/j.err"
import json, sys
j = json.load(open(sys.argv[1])); s = {x["step"]: x for x in j["steps"]}
assert j["finished"] is True and j["versions"].startswith("driver CUDA 12.4, runtime CUDA 12.8"), j["versions"]
v = s["versions"]["figures"]
assert v == {"driver_cuda": 12.4, "runtime_cuda": 12.8, "cublas": "12.8.4", "nccl": "2.21.5"}, v
for b in (1, 4, 8):
    f = s[f"bench_b{b}"]["figures"]
    assert f["batch"] == b and f["tok_s"] == 1000 * b + 0.5 and f["mfu"] == 0.41 and f["step_ms"] == 99.5, f
    # causal: 0.41 x (1000 - 6 x 2 x 10 x 5) / 1000; the optimizer's 9.95 ms of a 99.5 ms step
    assert abs(f["mfu_causal"] - 0.164) < 1e-9 and abs(f["optimizer_share"] - 0.1) < 1e-9, f
    assert f["peak_tracked_bytes"] == 800 and f["device_used_bytes"] == 1500, f
    assert s[f"bench_b{b}"]["stage"] == "steps", s[f"bench_b{b}"]
p, i = s["plan"]["figures"], s["init_1b"]["figures"]
assert p["bench_b4_runtime_overhead_bytes"] == 600 and p["bench_b8_budget_bytes"] == 1000 and p["bench_b1_tracked_bytes"] == 800, p
assert i["wall_s"] == 4.9 and i["threads"] == 16 and i["elements"] == 1498482688, i
g = s["speed"]["figures"]
assert g["attention_forward_tflops"] == 212.5 and g["attention_backward_tflops"] == 131.25, g
assert g["kernel_sum_mfu"] == 0.47 and g["kernel_sum_mfu_causal"] == 0.43 and g["adamw_fused_gb_s"] == 2900.5 and g["optimizer_ms"] == 9.95, g
assert s["mesh_2x4"]["figures"]["final_loss"] == 2.5 and s["env"]["figures"]["gpu"] == "NVIDIA H200", s["env"]
c, q = s["calibrate"]["figures"], s["prediction"]["figures"]
assert c["bf16_peak_tflops"] == 321.5 and c["fp32_peak_tflops"] == 321.5, c
assert abs(q["bench_b8_prediction_error"] - (89.55 / 99.5 - 1)) < 1e-4 and q["mesh_2x4_predicted_ms"] == 89.55, q
st = [x["stage"] for x in j["stages"]]
assert st == ["versions", "kernels", "speed", "steps", "calibrate", "meshes"], st
assert sum(x["limit_s"] for x in j["stages"]) == 600 and all(x["state"] == "done" for x in j["stages"]), j["stages"]
PY
then ok gpu_check_fake_ok_figures_in_summary_json; else fail gpu_check_fake_ok_figures_in_summary_json "$(tail -n 1 "$T/j.err")"; fi
# the steps in the order the window needs them: versions first, the meshes last
order=$(cut -f1 "$O/steps.tsv" | tr '\n' ' ')
want_order="env binaries versions cuda_kernels cuda_bf16 cuda_attention speed bench_b1 bench_b4 bench_b8 calibrate cpu_vs_cuda mesh_1x1 mesh_1x8 mesh_2x4 mesh_4x2 mesh_8x1 init_1b plan prediction "
[ "$order" = "$want_order" ] && ok gpu_check_stage_order || fail gpu_check_stage_order "$order"
for mode in planbad devbad; do
  O=$T/$mode
  FAKE=$mode OUT=$O BUILD=$F GPU_CHECK_PREBUILT=1 GPU_CHECK_NVIDIA_SMI=$T/bin/smi-h200 bash gpukit/gpu_check.sh > "$T/$mode.out" 2>&1; rc=$?
  if [ "$rc" -eq 1 ] && [ "$(status plan "$O")" = FAIL ] && [ "$(status bench_b1 "$O")" = ok ]; then ok "gpu_check_fake_${mode}_plan_fail"
  else fail "gpu_check_fake_${mode}_plan_fail" "exit $rc, plan $(status plan "$O"): $(note plan "$O")"; fi
done

# ---- the budget: the stage limits add up to it; a shorter one scales them and cuts what does not fit
stages_ok() { # DIR BUDGET : the limits of the stages that run add up to BUDGET at most
  awk -F'\t' -v b="$2" '{ s += $2 } END { exit !(s <= b && s > 0) }' "$1/stages.tsv"
}
check gpu_check_budget_default_adds_up_to_600 stages_ok "$T/all_ok" 600
O=$T/short
OUT=$O BUILD=$F GPU_CHECK_PREBUILT=1 GPU_CHECK_NVIDIA_SMI=$T/bin/smi-h200 bash gpukit/gpu_check.sh --budget-s 100 > "$T/short.out" 2>&1; rc=$?
check gpu_check_budget_100_exit_0 [ "$rc" -eq 0 ]
check gpu_check_budget_100_limits_fit stages_ok "$O" 100
bad=""
for s in versions cuda_kernels speed bench_b1 bench_b8; do [ "$(status "$s" "$O")" = ok ] || bad="$bad $s=$(status "$s" "$O")"; done
for s in calibrate cpu_vs_cuda mesh_1x1 mesh_8x1 init_1b; do
  [ "$(status "$s" "$O")" = skip ] && note "$s" "$O" | grep -q '^not run: budget' || bad="$bad $s=$(status "$s" "$O")"
done
[ -z "$bad" ] && ok gpu_check_budget_100_cuts_the_last_stages || fail gpu_check_budget_100_cuts_the_last_stages "$bad; $(cat "$O/stages.tsv" | tr '\n\t' '; ')"
check gpu_check_budget_100_cut_not_started [ ! -e "$O/calibrate.log" ] && [ ! -e "$O/mesh_1x1.log" ]
for b in abc 0 601; do
  bash gpukit/gpu_check.sh --budget-s "$b" > /dev/null 2> "$T/badbudget.err"; rc=$?
  if [ "$rc" -eq 2 ] && [ "$(wc -l < "$T/badbudget.err")" -eq 1 ]; then ok "gpu_check_budget_${b}_refused"
  else fail "gpu_check_budget_${b}_refused" "exit $rc: $(head -c 200 "$T/badbudget.err")"; fi
done

# ---- a stage that runs out of time: FAIL, the tables before it stay, the stages after it still run
O=$T/slow
FAKE=slowbench OUT=$O BUILD=$F GPU_CHECK_PREBUILT=1 GPU_CHECK_NVIDIA_SMI=$T/bin/smi-h200 \
  GPU_CHECK_STAGES="versions:5:3 kernels:20:5 speed:3:1 steps:20:5 calibrate:10:5 meshes:30:5" \
  bash gpukit/gpu_check.sh > "$T/slow.out" 2>&1; rc=$?
check gpu_check_slow_stage_exit_1 [ "$rc" -eq 1 ]
if [ "$(status speed "$O")" = FAIL ] && note speed "$O" | grep -q '^timed out'; then ok gpu_check_slow_stage_timed_out
else fail gpu_check_slow_stage_timed_out "speed: $(status speed "$O") $(note speed "$O")"; fi
check gpu_check_slow_stage_keeps_earlier [ "$(status cuda_attention "$O")" = ok ]
check gpu_check_slow_stage_later_stages_run [ "$(status bench_b8 "$O")" = ok ]

# ---- a stop from outside (SIGKILL: no trap runs) in the middle of a stage leaves every earlier table
O=$T/killed
( FAKE=slowbench OUT=$O BUILD=$F GPU_CHECK_PREBUILT=1 GPU_CHECK_NVIDIA_SMI=$T/bin/smi-h200 \
  exec setsid bash gpukit/gpu_check.sh > "$T/killed.out" 2>&1 ) &
kpid=$!
for _ in $(seq 1 100); do grep -q '^speed' "$O/steps.tsv" 2>/dev/null && break; [ -e "$O/speed.log" ] && break; sleep 0.2; done
sleep 0.5
kill -KILL -- -"$kpid" 2>/dev/null; wait "$kpid" 2>/dev/null
if python3 - "$O/summary.json" <<'PY' 2> "$T/j.err"
import json, sys
j = json.load(open(sys.argv[1])); s = {x["step"]: x["status"] for x in j["steps"]}
assert j["finished"] is False, "finished"
assert s.get("cuda_attention") == "ok" and s.get("versions") == "ok", s
assert "speed" not in s and "bench_b1" not in s, s
PY
then ok gpu_check_killed_mid_stage_keeps_earlier_tables; else fail gpu_check_killed_mid_stage_keeps_earlier_tables "$(tail -n 1 "$T/j.err")"; fi

# ---- the budget spent before the GPU steps: not started, said so, and not a failure
O=$T/no_time
OUT=$O BUILD=$B GPU_CHECK_PREBUILT=1 GPU_CHECK_BUDGET_S=5 GPU_CHECK_NVIDIA_SMI=$T/bin/smi-h200 GPU_CHECK_T0=$(( $(date +%s) - 60 )) \
  bash gpukit/gpu_check.sh > "$T/no_time.out" 2>&1; rc=$?
bad=""
for s in versions cuda_kernels cuda_bf16 speed calibrate cpu_vs_cuda bench_b1 mesh_1x1 mesh_2x4 prediction; do
  [ "$(status "$s" "$O")" = skip ] && note "$s" "$O" | grep -q 'not run' || bad="$bad $s=$(status "$s" "$O")"
done
[ -z "$bad" ] && ok gpu_check_no_time_skips_not_started || fail gpu_check_no_time_skips_not_started "$bad"
check gpu_check_no_time_exit_0 [ "$rc" -eq 0 ]
check gpu_check_no_time_nothing_ran [ ! -e "$O/bench_b1.log" ] && [ ! -e "$O/cuda_kernels.log" ]
exit 0
