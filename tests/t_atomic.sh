#!/usr/bin/env bash
# tests/t_atomic.sh — every output file of every program is written to a temp file and renamed into
# place, never rewritten where it stands (so a reader, a crash or a full disk never leaves half a file
# under the final name). The check needs no signal and no timing: before a program runs, its output
# already exists and has a second hard link elsewhere. A rename gives the output name a new inode and
# leaves the other link's content as it was; a writer that opens the output itself truncates the one
# inode both names share. Outputs: train's --out and --save (1 rank and 2), --plan --out, mkdata's token
# files (nanogpt; the megatron .bin/.idx pair), commbench --json, calibrate --out and --check --out,
# and a sweep's files that a resume rewrites (records, summary, CSV, report, charts and their data).
# Not here: logs (train's and gnuplot's logs are appended while they run; they are not results).
source "$(dirname "$0")/lib.sh"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
mkdir -p "$T/keep"
TR="$BUILD/train"
DATA="$BUILD/data/kjv/train.bin"
[ -s "$DATA" ] || { fail atomic_data "$DATA missing (run make data)"; exit 1; }
nkeep=0
# arm FILE...: give each FILE (created with a marker line when missing) a second link under $T/keep
# and a copy of its content there
arm() {
  local f
  for f in "$@"; do
    [ -e "$f" ] || printf 'before the run: %s\n' "$f" > "$f"
    nkeep=$((nkeep + 1))
    cp "$f" "$T/keep/$nkeep.copy"
    ln -f "$f" "$T/keep/$nkeep.link"
    echo "$f" > "$T/keep/$nkeep.name"
  done
}
# renamed NAME FILE: FILE (armed) was replaced by a new non-empty file and its old inode kept its content
renamed() {
  local n=$1 f=$2 k
  for k in $(seq 1 "$nkeep"); do [ "$(cat "$T/keep/$k.name")" = "$f" ] && break; done
  if [ ! -s "$f" ]; then fail "$n" "$f missing or empty"
  elif [ "$(stat -c %i "$f")" = "$(stat -c %i "$T/keep/$k.link")" ]; then
    fail "$n" "$f was rewritten where it stands (same inode as before the run)"
  elif ! cmp -s "$T/keep/$k.link" "$T/keep/$k.copy"; then fail "$n" "the file that stood at $f was changed"
  else ok "$n"; fi
}

C=(--model tiny --seq-len 16 --steps 1 --log-every 100 --data "$DATA")
# --- train: the run record and the checkpoint, on 1 rank and on 2 (rank 0 writes what all gathered)
arm "$T/r1.json" "$T/c1.st"
must atomic_train_1 "$TR" "${C[@]}" --batch-size 1 --out "$T/r1.json" --save "$T/c1.st" 2>/dev/null
renamed atomic_train_record "$T/r1.json"
renamed atomic_train_checkpoint "$T/c1.st"
arm "$T/r2.json" "$T/c2.st"
must atomic_train_2 "${MPIRUN[@]}" -np 2 "$TR" "${C[@]}" --tp 2 --batch-size 1 --out "$T/r2.json" --save "$T/c2.st" >/dev/null 2>&1
renamed atomic_train_record_2_ranks "$T/r2.json"
renamed atomic_train_checkpoint_2_ranks "$T/c2.st"
arm "$T/plan.json"
must atomic_plan "$TR" --plan --world 4 --tp 2 --model tiny --seq-len 16 --batch-size 1 --out "$T/plan.json" >/dev/null
renamed atomic_plan_record "$T/plan.json"

# --- mkdata: both token files of a split, and the megatron pair (.bin and its .idx)
head -c 4000 "$BUILD/data/kjv/kjv.txt" > "$T/text.txt" 2>/dev/null || head -c 4000 "$DATA" > "$T/text.txt"
mkdir -p "$T/tok" "$T/meg"
arm "$T/tok/train.bin" "$T/tok/val.bin"
must atomic_mkdata "$BUILD/mkdata" "$T/text.txt" "$T/tok" >/dev/null 2>&1
renamed atomic_mkdata_train "$T/tok/train.bin"
renamed atomic_mkdata_val "$T/tok/val.bin"
arm "$T/meg/train.bin" "$T/meg/train.idx"
must atomic_mkdata_megatron "$BUILD/mkdata" --format megatron "$T/text.txt" "$T/meg" >/dev/null 2>&1
renamed atomic_mkdata_megatron_bin "$T/meg/train.bin"
renamed atomic_mkdata_megatron_idx "$T/meg/train.idx"

# --- commbench --json, calibrate's machine file and its check record
arm "$T/cb.json"
must atomic_commbench "${MPIRUN[@]}" -np 2 "$BUILD/commbench" --min-bytes 1K --max-bytes 2K --iters 2 --warmup 1 \
  --memcpy-bytes 1M --json "$T/cb.json" >/dev/null 2>&1
renamed atomic_commbench_json "$T/cb.json"
arm "$T/m.json"
if must atomic_calibrate "${MPIRUN[@]}" -np 2 "$BUILD/calibrate" --quick --model tiny --seq-len 16 --out "$T/m.json" >/dev/null 2>&1; then
  renamed atomic_calibrate_machine "$T/m.json"
  arm "$T/check.json"
  must atomic_calibrate_check "${MPIRUN[@]}" -np 2 "$BUILD/calibrate" --check "$T/m.json" --out "$T/check.json" >/dev/null 2>&1
  renamed atomic_calibrate_check_record "$T/check.json"
fi

# --- a sweep: the first pass fails both runs (a planted launcher failure), the resume retries them and
# rewrites every record, the summary, the report and the charts of the folder the first pass made
cat > "$T/train.sh" <<EOF
#!/usr/bin/env bash
[ -e "$T/fail" ] && { echo "planted failure" >&2; exit 1; }
exec "$(pwd)/$TR" "\$@"
EOF
chmod +x "$T/train.sh"
printf '{"name": "atomic", "world": 2, "meshes": ["1x2", "2x1"], "model": "tiny", "seq_len": 16, "steps": 2, "lr": 0.003,
 "batch_size": 1, "data": "%s", "launcher": ["mpirun", "--oversubscribe", "-np", "{world}"], "timeout_s": 120}\n' \
  "$(pwd)/$DATA" > "$T/spec.json"
touch "$T/fail"
"$BUILD/sweep" "$T/spec.json" --out-dir "$T/res" --train "$T/train.sh" > "$T/sweep1.log" 2>&1
rm -f "$T/fail"
D=$(ls -d "$T"/res/atomic/*/ 2>/dev/null | head -1); D=${D%/}
SW=(runs/1x2.json runs/2x1.json summary.json summary.csv report.md throughput.dat memory.dat loss.png throughput.svg)
if [ -n "$D" ] && [ -s "$D/runs/2x1.json" ] && [ -s "$D/summary.json" ]; then
  for f in "${SW[@]}"; do arm "$D/$f"; done
  if must atomic_sweep_resume "$BUILD/sweep" "$T/spec.json" --out-dir "$T/res" --train "$T/train.sh" > "$T/sweep2.log" 2>&1; then
    grep -q '2 of 2 runs ok' "$T/sweep2.log" && ok atomic_sweep_resumed_both_runs \
      || fail atomic_sweep_resumed_both_runs "$(tail -3 "$T/sweep2.log" | tr '\n' ' ')"
    for f in "${SW[@]}"; do renamed "atomic_sweep_${f//[\/.]/_}" "$D/$f"; done
  fi
else
  fail atomic_sweep_first_pass "no folder with records and a summary: $(tail -3 "$T/sweep1.log" | tr '\n' ' ')"
fi
