#!/usr/bin/env bash
# tests/t_deterministic.sh — the --deterministic option of build/train (core/job/options.c): a value other
# than on|off is one line and exit 2; the record's config says which was asked for; on the CPU backend off
# changes nothing (its kernels are deterministic either way: the same losses, bit for bit); the ranks of a
# launch must agree on it (exit 2, one line, no record). What off does on CUDA (dq folded into the dk/dv
# pass with fp32 atomics) is checked against the deterministic passes in tests/test_cuda_attention.c.
source "$(dirname "$0")/lib.sh"
TR="$BUILD/train"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
RUN=(--model tiny --seq-len 32 --batch-size 2 --steps 2 --log-every 100 --data synthetic)
expect_exit det_bad_value 2 "^train: --deterministic must be on or off .got 'yes'.$" -- "$TR" --plan --deterministic yes
for d in on off; do
  must "det_run_$d" "$TR" "${RUN[@]}" --deterministic "$d" --out "$T/$d.json" >/dev/null 2>&1
done
/usr/bin/python3 - "$T/on.json" "$T/off.json" <<'PY'
import json, sys
on, off = (json.load(open(p)) for p in sys.argv[1:3])
c_on, c_off = on["config"].get("deterministic"), off["config"].get("deterministic")
print("ok   det_record_config" if c_on is True and c_off is False
      else f"FAIL det_record_config: config.deterministic {c_on!r} (on), {c_off!r} (off)")
lo, lf = [s["loss"] for s in on["steps"]], [s["loss"] for s in off["steps"]]
print("ok   det_cpu_off_same_losses" if len(lo) == 2 and lo == lf else f"FAIL det_cpu_off_same_losses: {lo} vs {lf}")
PY
# the ranks of one launch compare it (CLI_SHARED in the option table)
rm -f "$T/mpmd.json"
timeout 60 "${MPIRUN[@]}" -np 1 "$TR" "${RUN[@]}" --deterministic on --out "$T/mpmd.json" : \
  -np 1 "$TR" "${RUN[@]}" --deterministic off --out "$T/mpmd.json" >/dev/null 2>"$T/mpmd.err"
rc=$?
n=$(grep -c '^train: --deterministic differs between ranks' "$T/mpmd.err")
if [ "$rc" -eq 2 ] && [ "$n" -eq 1 ] && [ ! -e "$T/mpmd.json" ]; then ok det_ranks_must_agree
else fail det_ranks_must_agree "exit $rc, $n matching lines, record $( [ -e "$T/mpmd.json" ] && echo written || echo absent): $(head -3 "$T/mpmd.err" | tr '\n' ' ')"; fi
