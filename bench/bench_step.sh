#!/usr/bin/env bash
# bench/bench_step.sh — the CPU step benchmark of docs/benchmarks.md: the engine's 1-rank step against the same
# model in PyTorch on the same thread count, and the engine's model FLOP rate against the measured
# single-thread SGEMM rate; writes results/bench/step.md (or $OUT_MD).
#
# What it is: a driver around build/train, bench/torch_step.py and build/profile_step. It runs ROUNDS
# interleaved rounds (engine, then PyTorch) and reports medians, both in wall time and in process CPU
# time: on a shared machine the wall time of a single-threaded program is inflated by whatever else
# runs, CPU time much less, so the CPU-time columns are the comparison to trust there.
# The engine's CPU time per step is (CPU of a STEPS+3-step run − CPU of a 3-step run) / STEPS, which
# cancels start-up (init, the SGEMM measurement) exactly.
# What it is not: a test (nothing is asserted; `make test` never runs it) nor required by the build.
# Needs: build/train and build/profile_step (make build/train build/profile_step), /usr/bin/python3
# with torch (Debian: apt-get install python3-torch).
#
# Usage: bench/bench_step.sh   (env: MODEL=small B=4 T=256 STEPS=10 ROUNDS=3 PY=/usr/bin/python3
#                               OUT_MD=results/bench/step.md NO_PROFILE=1 to skip the kernel table)
# The report is regenerated whole, except what stands below its marker line (hand-written notes).
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${MODEL:-small} B=${B:-4} T=${T:-256} STEPS=${STEPS:-10} ROUNDS=${ROUNDS:-3}
PY=${PY:-/usr/bin/python3} OUT_MD=${OUT_MD:-results/bench/step.md} BUILD=${BUILD:-build}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
TRAIN=$BUILD/train PROF=$BUILD/profile_step
for f in "$TRAIN" "$PROF"; do
    [[ -x $f ]] || { echo "bench_step: $f missing: run make $f" >&2; exit 2; }
done
"$PY" -c 'import torch' 2>/dev/null || { echo "bench_step: $PY cannot import torch (apt-get install python3-torch)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# process CPU seconds (user+sys) of a command, its stdout/stderr to files
cpu_of() { # out_prefix cmd...
    local p=$1; shift
    /usr/bin/time -f '%U %S' -o "$p.time" "$@" >"$p.out" 2>"$p.err" || { echo "bench_step: failed: $*" >&2; cat "$p.err" >&2; exit 1; }
    awk '{print $1 + $2}' "$p.time"
}

args=(--model "$MODEL" --seq-len "$T" --batch-size "$B" --data synthetic)
declare -a E_WALL E_CPU P_WALL P_CPU E_PEAK P_ATT SG_CPU
for r in $(seq 1 "$ROUNDS"); do
    echo "bench_step: round $r/$ROUNDS: engine" >&2
    c_long=$(cpu_of "$tmp/el$r" "$TRAIN" "${args[@]}" --steps $((STEPS + 3)) --out "$tmp/e$r.json")
    c_short=$(cpu_of "$tmp/es$r" "$TRAIN" "${args[@]}" --steps 3 --out "$tmp/es$r.json")
    E_WALL[r]=$("$PY" -c 'import json,sys; print("%.1f" % json.load(open(sys.argv[1]))["summary"]["step_ms_median"])' "$tmp/e$r.json")
    E_PEAK[r]=$("$PY" -c 'import json,sys; print("%.1f" % (json.load(open(sys.argv[1]))["summary"]["peak_tflops"]*1e3))' "$tmp/e$r.json")
    E_CPU[r]=$(awk -v a="$c_long" -v b="$c_short" -v n="$STEPS" 'BEGIN{printf "%.1f", (a - b) / n * 1e3}')
    echo "bench_step: round $r/$ROUNDS: pytorch" >&2
    "$PY" bench/torch_step.py --model "$MODEL" --batch-size "$B" --seq-len "$T" --steps "$STEPS" --warmup 3 \
        --threads 1 --attention both >"$tmp/t$r.json"
    read -r P_WALL[r] P_CPU[r] P_ATT[r] < <("$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); print("%.1f %.1f %s" % (r["step_ms_median"], r["cpu_ms_median"], r["best"]))' "$tmp/t$r.json")
    SG_CPU[r]=$("$PROF" --sgemm | awk '/cpu/{print $2}')
    echo "bench_step:   engine ${E_WALL[r]} ms wall, ${E_CPU[r]} ms CPU; pytorch (${P_ATT[r]}) ${P_WALL[r]} ms wall, ${P_CPU[r]} ms CPU" >&2
done
med() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END{if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
ew=$(med "${E_WALL[@]}") ec=$(med "${E_CPU[@]}") pw=$(med "${P_WALL[@]}") pc=$(med "${P_CPU[@]}") epk=$(med "${E_PEAK[@]}")
sgc=$(med "${SG_CPU[@]}")
fpt=$("$PY" -c 'import json,sys; print("%.0f" % json.load(open(sys.argv[1]))["summary"]["flops_per_token"])' "$tmp/e1.json")
tv=$("$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["torch"], r["blas"], r["sdpa_available"])' "$tmp/t1.json")
torch_runs=$("$PY" -c '
import json,sys
for f in sys.argv[1:]:
    r = json.load(open(f))
    print(" ".join("%s %.1f ms wall / %.1f ms CPU;" % (x["attention"], x["step_ms_median"], x["cpu_ms_median"]) for x in r["runs"]))
' "$tmp"/t*.json)
read -r R_WALL R_CPU G_WALL G_CPU F_WALL F_CPU < <(awk -v ew="$ew" -v ec="$ec" -v pw="$pw" -v pc="$pc" -v f="$fpt" \
    -v n=$((B * T)) -v sw="$epk" -v sc="$sgc" 'BEGIN{gw = f*n/ew*1e-6; gc = f*n/ec*1e-6;
    printf "%.2f %.2f %.1f %.1f %.1f %.1f\n", ew/pw, ec/pc, gw, gc, 100*gw/sw, 100*gc/sc}')

table=$(cat <<EOF
| | wall clock | process CPU time |
|---|---:|---:|
| engine step (median of $ROUNDS rounds × $STEPS steps) | $ew ms | $ec ms |
| PyTorch step (best attention: ${P_ATT[1]}) | $pw ms | $pc ms |
| ratio engine / PyTorch (target ≤ 0.8) | $R_WALL | $R_CPU |
| engine model FLOP rate (flops/token × $((B * T)) tokens / step) | $G_WALL GFLOP/s | $G_CPU GFLOP/s |
| single-thread SGEMM 512³ (engine's own measure for wall; build/profile_step --sgemm for CPU) | $epk GFLOP/s | $sgc GFLOP/s |
| engine FLOP rate / SGEMM (target ≥ 75%) | $F_WALL % | $F_CPU % |
EOF
)
echo "$table"
[[ -n ${NO_PROFILE:-} ]] || "$PROF" --model "$MODEL" --batch-size "$B" --seq-len "$T" --reps 5 >"$tmp/prof.txt"

mkdir -p "$(dirname "$OUT_MD")"
# hand-written notes below the marker line of an existing report are carried over
MARK='<!-- hand-written notes below this line are kept by bench/bench_step.sh -->'
notes=""
[[ -f $OUT_MD ]] && notes=$(awk -v m="$MARK" 'f{print} $0==m{f=1}' "$OUT_MD")
{
    echo "# CPU step benchmark: engine vs PyTorch, MFU vs SGEMM"
    echo
    echo "Generated by \`bench/bench_step.sh\` on $(date -u +%Y-%m-%dT%H:%MZ)."
    echo
    echo "- machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(getconf _NPROCESSORS_ONLN) cores; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "- engine: build/train ($(git rev-parse --short HEAD 2>/dev/null || echo unknown)), $(mpicc --version | head -1), OpenBLAS $(dpkg-query -W -f '${Version}' libopenblas0-pthread 2>/dev/null || echo '?')"
    echo "- PyTorch: torch ${tv%% *} (BLAS_INFO=$(echo "$tv" | cut -d' ' -f2); scaled_dot_product_attention available: ${tv##* }), $("$PY" --version 2>&1)"
    echo "- threads: OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1, torch.set_num_threads(1)"
    echo "- shape: model \`$MODEL\`, batch $B, seq len $T (1 rank), flops/token $fpt (6·(N − N_emb) + 12·L·d·T)"
    echo
    echo "## Engine vs PyTorch"
    echo
    echo "$table"
    echo
    echo "Per round (engine wall / CPU ms per step; PyTorch wall / CPU ms per step; SGEMM rates):"
    echo
    for r in $(seq 1 "$ROUNDS"); do
        echo "- round $r: engine ${E_WALL[r]} / ${E_CPU[r]}; PyTorch ${P_WALL[r]} / ${P_CPU[r]} (${P_ATT[r]}); SGEMM ${E_PEAK[r]} GFLOP/s wall (engine's) / ${SG_CPU[r]} GFLOP/s CPU"
    done
    echo
    echo "PyTorch attention variants per round: "
    echo
    echo "$torch_runs" | sed 's/^/- /'
    echo
    echo "Commands:"
    echo
    echo '```'
    echo "OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $TRAIN ${args[*]} --steps $((STEPS + 3)) --out e.json   # and --steps 3 for the CPU-time difference"
    echo "OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $PY bench/torch_step.py --model $MODEL --batch-size $B --seq-len $T --steps $STEPS --warmup 3 --threads 1 --attention both"
    echo "$PROF --sgemm"
    [[ -n ${NO_PROFILE:-} ]] || echo "$PROF --model $MODEL --batch-size $B --seq-len $T --reps 5"
    echo '```'
    if [[ -z ${NO_PROFILE:-} ]]; then
        echo
        echo "## Per-kernel breakdown (build/profile_step: ops_cpu called with the model's shapes, thread CPU time)"
        echo
        cat "$tmp/prof.txt"
    fi
    echo
    echo "$MARK"
    [[ -z $notes ]] || echo "$notes"
} >"$OUT_MD.tmp"
mv "$OUT_MD.tmp" "$OUT_MD"
echo "bench_step: wrote $OUT_MD" >&2
