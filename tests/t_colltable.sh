#!/usr/bin/env bash
# tests/t_colltable.sh — `build/commbench --predict` (docs/cost-model.md, "Collectives as nccl-tests tables"): the shipped GPU models'
# collectives as nccl-tests rows. Checks the table's shape (11 groups x 4 collectives x 20 sizes, 8K..4G, the
# columns of a measured run with algo "model" and #wrong "-", busbw = algbw x nccl-tests factor), every
# published point of bench/collectives_gpu.sh's PUBLISHED block (predicted / published busbw within [0.75, 1.33]
# from 1 MB up, [0.5, 2] below: small messages are latency, and published latencies of the same GPUs differ by
# 1.5x), times computed by hand from the model's figures (the k-per-host rule: k = 8 ranks per host with a port
# each gives min(8 x port x 0.97, NVLink's busbw)), a machine file, and bad usage (exit 2, one line, no rows).
# What it is not: a measurement (predictions take milliseconds, no GPU, no MPI).
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.." || exit 1
CB="$BUILD/commbench"
[ -x "$CB" ] || { fail colltable_built "$CB missing (make $CB)"; exit 1; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT

if "$CB" --predict h100-80gb > "$T/h100.txt" 2> "$T/err.txt"; then ok colltable_predict_runs
else fail colltable_predict_runs "exit $?: $(head -2 "$T/err.txt")"; exit 1; fi
rows=$(awk '!/^#/ && NF' "$T/h100.txt" | wc -l)
[ "$rows" -eq 880 ] && ok colltable_rows || fail colltable_rows "want 880 rows (11 groups x 4 collectives x 20 sizes), got $rows"
bad=$(awk '!/^#/ && NF { if (NF != 10 || $6 != "model" || $10 != "-") n++ } END { print n + 0 }' "$T/h100.txt")
[ "$bad" -eq 0 ] && ok colltable_columns || fail colltable_columns "$bad rows not of 10 columns with algo model and #wrong -"
groups=$(awk '!/^#/ && NF { g[$3 " " $4] = 1 } END { for (k in g) n++; print n + 0 }' "$T/h100.txt")
[ "$groups" -eq 11 ] && ok colltable_groups || fail colltable_groups "want 11 groups (intra 2/4/8, k=1/2/4/8 of 16 and 64), got $groups"
badbw=$(awk '!/^#/ && NF { n = $4; f = ($5 == "all_reduce") ? 2 * (n - 1) / n : ($5 == "broadcast") ? 1 : (n - 1) / n;
          d = $9 - $8 * f; if (d < 0) d = -d; if (d > 0.0005 * (f + 1) + 1e-6) m++ } END { print m + 0 }' "$T/h100.txt")
[ "$badbw" -eq 0 ] && ok colltable_busbw_factor || fail colltable_busbw_factor "$badbw rows with busbw != algbw x factor"

# every published point of the results page against its tolerance, one check each
sed -n "/^cat > .*published.tsv.*<<'PUBLISHED'$/,/^PUBLISHED$/p" bench/collectives_gpu.sh | sed '1d;$d' > "$T/pub.tsv"
npub=$(wc -l < "$T/pub.tsv")
[ "$npub" -ge 20 ] && ok colltable_published_points || fail colltable_published_points "want >= 20 published points, read $npub"
for g in h100-80gb h200-141gb a100-80gb; do "$CB" --predict "$g" > "$T/$g.txt" || fail colltable_predict_$g "exit $?"; done
while IFS=$'\t' read -r g n k kind size bw src; do
  got=$(awk -v n="$n" -v k="$k" -v c="$kind" -v s="$size" '
    /^# [0-9]+ ranks, / { rn = $2; rk = $4 } !/^#/ && NF && rn == n && rk == k && $5 == c && $1 == s { print $9 }' "$T/$g.txt")
  name="colltable_${g}_${n}x${k}_${kind}_${size}_$src"
  if [ -z "$got" ]; then fail "$name" "no predicted row"; continue; fi
  awk -v p="$got" -v b="$bw" -v s="$size" 'BEGIN { r = p / b; lo = s >= 1048576 ? 0.75 : 0.5; hi = s >= 1048576 ? 1.33 : 2;
    exit !(r >= lo && r <= hi) }' && ok "$name" || fail "$name" "predicted busbw $got GB/s against published $bw ($src)"
done < "$T/pub.tsv"

# by hand: time = latency + 0.5 us x ring steps + S x factor x (1 + sqrt(half / S)) / busbw, busbw in GB/s = B/us / 1e3
hand() {   # GPU ranks per_host kind bytes want_us: the printed time within its 0.1 us rounding
  local got
  got=$(awk -v n="$2" -v k="$3" -v c="$4" -v s="$5" '/^# [0-9]+ ranks, / { rn = $2; rk = $4 }
    !/^#/ && NF && rn == n && rk == k && $5 == c && $1 == s { print $7 }' "$T/$1.txt")
  awk -v g="$got" -v w="$6" 'BEGIN { d = g - w; if (d < 0) d = -d; exit !(g != "" && d <= 0.051) }' && ok "$7" ||
    fail "$7" "$1 $4 of $2 ($3 per host) at $5 B: $got us, want $6"
}
S=4294967296
# 16 H100, 8 per host, all-gather: 8 ports x 50 GB/s x 0.97 = 388 > NVLink's 370 for all-gather: busbw 370;
# 20 us + 0.5 x 15 steps; half 6 MB across hosts
w=$(awk -v s=$S 'BEGIN { printf "%.4f", 20 + 0.5 * 15 + s * 15 / 16 * (1 + sqrt(6e6 / s)) / 370e3 }')
hand h100-80gb 16 8 all_gather $S "$w" colltable_hand_k8_nvlink_bound
# the same group with 2 per host: 2 x 48.5 = 97 GB/s; with 1 per host: 48.5
w=$(awk -v s=$S 'BEGIN { printf "%.4f", 20 + 0.5 * 15 + s * 15 / 16 * (1 + sqrt(6e6 / s)) / 97e3 }')
hand h100-80gb 16 2 all_gather $S "$w" colltable_hand_k2_two_ports
w=$(awk -v s=$S 'BEGIN { printf "%.4f", 20 + 0.5 * 63 + s * 63 / 64 * (1 + sqrt(6e6 / s)) / 48.5e3 }')
hand h100-80gb 64 1 all_gather $S "$w" colltable_hand_k1_one_port
# 16 A100, 8 per host, all-reduce: 8 x 25 x 0.97 = 194 > the host's 190 for all-reduce of 2-4 GPUs: 190; 30 steps
w=$(awk -v s=1073741824 'BEGIN { printf "%.4f", 20 + 0.5 * 30 + s * 1.875 * (1 + sqrt(6e6 / s)) / 190e3 }')
hand a100-80gb 16 8 all_reduce 1073741824 "$w" colltable_hand_a100_k8
# 8 H100 on one host, all-reduce at 8 KB: 18 us + 0.5 x 14 steps, NVLink SHARP's 480, half 4 MB
w=$(awk -v s=8192 'BEGIN { printf "%.4f", 18 + 0.5 * 14 + s * 1.75 * (1 + sqrt(4e6 / s)) / 480e3 }')
hand h100-80gb 8 8 all_reduce 8192 "$w" colltable_hand_intra_small

# one group, and a machine file (the CPU fixture of tests/t_cost.sh)
"$CB" --predict h200-141gb --ranks 16 --ranks-per-host 4 --min-bytes 1M --max-bytes 1M > "$T/one.txt" 2>&1
n=$(awk '!/^#/ && NF && $3 == "k=4" && $4 == 16' "$T/one.txt" | wc -l)
[ "$n" -eq 4 ] && ok colltable_one_group || fail colltable_one_group "want 4 rows of k=4, 16 ranks: $(tail -2 "$T/one.txt")"
if "$CB" --predict tests/cost/machine-cpu.json --ranks 2 --max-bytes 64K > "$T/cpu.txt" 2>&1 &&
   [ "$(awk '!/^#/ && NF && $4 == 2' "$T/cpu.txt" | wc -l)" -ge 4 ]; then ok colltable_machine_file
else fail colltable_machine_file "$(tail -2 "$T/cpu.txt")"; fi

# bad usage: exit 2, one line on stderr, nothing on stdout
bad_usage() {
  local name=$1; shift
  "$CB" "$@" > "$T/bo.txt" 2> "$T/be.txt"; local rc=$?
  if [ "$rc" -eq 2 ] && [ ! -s "$T/bo.txt" ] && [ "$(wc -l < "$T/be.txt")" -eq 1 ]; then ok "$name"
  else fail "$name" "$* -> exit $rc, stdout $(wc -c < "$T/bo.txt") B, stderr: $(head -3 "$T/be.txt" | tr '\n' '|')"; fi
}
bad_usage colltable_bad_machine --predict no-such-gpu
bad_usage colltable_bad_ranks --predict h100-80gb --ranks 1
bad_usage colltable_bad_per_host --predict h100-80gb --ranks 16 --ranks-per-host 3
bad_usage colltable_per_host_alone --predict h100-80gb --ranks-per-host 8
bad_usage colltable_measuring_option --predict h100-80gb --iters 5
bad_usage colltable_ranks_without_predict --ranks 8
bad_usage colltable_bad_size --predict h100-80gb --max-bytes lots
