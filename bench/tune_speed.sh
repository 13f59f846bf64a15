#!/usr/bin/env bash
# bench/tune_speed.sh — how long build/tune searches the llama3.1-8b space on 64 H100 (8 per host), seq 8192,
# global batch 512 (the issue's target: <= 10 s on 2 cores): REPS interleaved launches each of --jobs 2 and
# --jobs 1, and once (the slow reference) --full-replay --jobs 2; the wall time of each, the search time it
# records (cells.json search_s) and its CPU time (user + sys of the whole run, /usr/bin/time: what other work
# on the machine does not inflate, so CPU / 2 is the wall time two processes take on two idle cores), medians,
# with the load average before and after.
# Writes the table on stdout (results/bench/tune.md is a copy of one run with its date and load).
set -u
BUILD=${BUILD:-build}
REPS=${REPS:-3}
OUT=$(mktemp -d); trap 'rm -rf "$OUT"' EXIT
ARGS=(--model llama3.1-8b --gpu h100-80gb --machine h100-80gb --world 64 --gpus-per-host 8 --seq-len 8192 --global-batch 512)
load() { cut -d' ' -f1-3 /proc/loadavg; }
L0=$(load)
declare -A WALL SEARCH CPU
for r in $(seq 1 "$REPS"); do
  modes="jobs2 jobs1"; [ "$r" = 1 ] && modes="jobs2 jobs1 full"
  for mode in $modes; do
    case $mode in jobs2) extra=(--jobs 2);; jobs1) extra=(--jobs 1);; full) extra=(--jobs 2 --full-replay);; esac
    t0=$(date +%s.%N)
    dir=$(/usr/bin/time -f '%U %S' -o "$OUT/cpu" "$BUILD/tune" "${ARGS[@]}" "${extra[@]}" --out-dir "$OUT/$mode.$r" 2>/dev/null) ||
      { echo "tune failed ($mode)"; exit 1; }
    t1=$(date +%s.%N)
    WALL[$mode]="${WALL[$mode]:-} $(echo "$t1 - $t0" | bc -l)"
    CPU[$mode]="${CPU[$mode]:-} $(awk '{print $1 + $2}' "$OUT/cpu")"
    SEARCH[$mode]="${SEARCH[$mode]:-} $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["search_s"])' "$dir/cells.json")"
    cells=$(python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["counts"]; print(c["cells"], c["fit"])' "$dir/cells.json")
  done
done
L1=$(load)
med() { python3 -c 'import statistics,sys; v=[float(x) for x in sys.argv[1:]]; print("%.2f (%s)" % (statistics.median(v), ", ".join("%.2f" % x for x in v)))' "$@"; }
echo "date $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load average before $L0, after $L1; cells, fitting: $cells"
echo
echo "| mode | search s, median (each) | wall s, median (each) | CPU s (user + sys), median (each) |"
echo "|---|---:|---:|---:|"
for mode in jobs2 jobs1 full; do
  # shellcheck disable=SC2086
  echo "| $mode | $(med ${SEARCH[$mode]}) | $(med ${WALL[$mode]}) | $(med ${CPU[$mode]}) |"
done
