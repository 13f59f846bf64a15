#!/usr/bin/env bash
# tests/t_reliab.sh — train's faults on outputs and limits: --save on a full disk (1 and 2 ranks: exit 1,
# one line, no hang, no temp file, a record saying failed), SIGINT/SIGTERM during --save (temp file
# removed, a record saying interrupted, exit 128+signal), outputs checked before training (a folder,
# a missing folder, an output that is also an input or another output), --plan bounded and
# overflow-safe and silent on stdout when it refuses, --eval-every without --eval-data, an
# --eval-batches larger than the eval data. A full disk is a small tmpfs mounted in a private mount
# namespace (unshare -m); without it those checks print skip.
source "$(dirname "$0")/lib.sh"
TRAIN="$BUILD/train"
DATA="$BUILD/data/kjv/train.bin"
VAL="$BUILD/data/kjv/val.bin"
[ -x "$TRAIN" ] || { fail reliab_built "$TRAIN missing"; exit 1; }
[ -f "$DATA" ] || { fail reliab_data "$DATA missing (make data)"; exit 1; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
RUN=(--model tiny --seq-len 32 --batch-size 2 --steps 1 --log-every 100 --data "$DATA")

# errors_only FILE: stderr lines that are not step progress
errors_only() { grep -v -E '^train: step [0-9]+' "$1" | grep -v -E '^\s*$' | grep -v -E '^(-{5,}|Primary job|a non-zero exit|Per user-direction|mpirun detected|the job to be|  Process name|  Exit code|job\.|process returned)'; }
# one_error NAME CODE PATTERN RC ERRFILE: exit code and exactly one train line matching PATTERN
one_error() {
  local n=$1 code=$2 pat=$3 rc=$4 f=$5 lines
  lines=$(errors_only "$f" | grep -c '^train:')
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then fail "$n" "hung (killed by the timeout)"; return 1
  elif [ "$rc" -ne "$code" ]; then fail "$n" "exit $rc, want $code: $(head -c 300 "$f")"; return 1
  elif [ "$lines" -ne 1 ]; then fail "$n" "want one train line, got $lines: $(errors_only "$f" | head -c 300)"; return 1
  elif ! errors_only "$f" | grep -qE -- "$pat"; then fail "$n" "no line matches '$pat': $(errors_only "$f" | head -c 300)"; return 1
  fi
  return 0
}
# record_says FILE STATUS PATTERN: the record exists with that status and an error matching PATTERN
record_says() {
  /usr/bin/python3 - "$@" <<'PY'
import json, re, sys
try: r = json.load(open(sys.argv[1]))
except Exception as e: print("no record: %s" % e); sys.exit(1)
if r.get("status") != sys.argv[2] or not re.search(sys.argv[3], r.get("error") or ""):
    print("status %r error %r" % (r.get("status"), r.get("error"))); sys.exit(1)
PY
}

# ---------------------------------------------------------------- --save on a full disk
if unshare -m true 2>/dev/null && mkdir -p "$T/full"; then
  for np in 1 2; do
    n=reliab_save_full_disk_${np}rank
    launch=("$TRAIN"); [ $np -gt 1 ] && launch=("${MPIRUN[@]}" -np $np "$TRAIN")
    # inside the private mount namespace: a 64 KiB tmpfs at $T/full; the listing of what stayed is
    # taken there (the mount and its files go with the namespace)
    timeout 120 unshare -m sh -c 'mount -t tmpfs -o size=64k tmpfs "$1" || exit 99; shift; "$@"; rc=$?; ls -a "'"$T/full"'" > "'"$T/left.$np"'"; exit $rc' \
      sh "$T/full" "${launch[@]}" "${RUN[@]}" --tp 1 --out "$T/full$np.json" --save "$T/full/model.st" >/dev/null 2>"$T/full$np.err"
    rc=$?
    if [ $rc -eq 99 ]; then skip "$n" "tmpfs mount refused"; continue; fi
    if one_error "$n" 1 "^train: .*save.*(No space left|cannot)" $rc "$T/full$np.err"; then
      why=$(record_says "$T/full$np.json" failed 'save') || { fail "$n" "record: $why"; continue; }
      left=$(grep -v -E '^\.\.?$' "$T/left.$np" | tr '\n' ' ')
      [ -z "$left" ] && ok "$n" || fail "$n" "left in the save folder: $left"
    fi
  done
else
  skip reliab_save_full_disk "no private mount namespace (unshare -m) here"
fi

# ---------------------------------------------------------------- SIGINT / SIGTERM during --save
# The save's temp file "<save>.tmp.<pid>" is made a FIFO before train starts (its pid is known in the
# child before exec), so the save blocks on it until this reader takes data: the signal then arrives
# while the save is certainly in progress. The reader keeps draining so the writer is never stuck.
for sig in INT TERM; do
  n=reliab_save_sig$sig
  /usr/bin/python3 - "$sig" "$T" "$TRAIN" "${RUN[@]}" <<'PY'
import os, select, signal, subprocess, sys, time, json
sig, T, train, run = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
save, out = f"{T}/sig{sig}.st", f"{T}/sig{sig}.json"
name = f"reliab_save_sig{sig}"
def fifo(): os.mkfifo(f"{save}.tmp.{os.getpid()}")
err = open(f"{T}/sig{sig}.err", "w")
p = subprocess.Popen([train] + run + ["--out", out, "--save", save], preexec_fn=fifo, stdout=subprocess.DEVNULL, stderr=err)
path = f"{save}.tmp.{p.pid}"
fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
got, t0, sent = 0, time.time(), False
while time.time() - t0 < 100:
    if p.poll() is not None: break
    r, _, _ = select.select([fd], [], [], 0.2)
    if r:
        try: b = os.read(fd, 65536)
        except BlockingIOError: b = b""
        got += len(b)
        if got and not sent:
            p.send_signal(getattr(signal, "SIG" + sig)); sent = True
        if not b and sent: time.sleep(0.01)
try: rc = p.wait(timeout=60)
except subprocess.TimeoutExpired: p.kill(); rc = "hung"
os.close(fd)
left = [f for f in os.listdir(T) if ".tmp." in f]
want = 128 + getattr(signal, "SIG" + sig)
try: r = json.load(open(out))
except Exception as e: r = {"status": "no record: %s" % e}
lines = [l for l in open(f"{T}/sig{sig}.err") if l.startswith("train:") and not l.startswith("train: step ")]
if not sent: print(f"FAIL {name}: the save never wrote to its temp file (exit {rc})")
elif rc != want: print(f"FAIL {name}: exit {rc}, want {want}: {''.join(lines)[:200]}")
elif left: print(f"FAIL {name}: left behind: {left}")
elif os.path.exists(save): print(f"FAIL {name}: {save} exists after an interrupted save")
elif r.get("status") != "interrupted" or "SIG" + sig not in (r.get("error") or ""):
    print(f"FAIL {name}: record status {r.get('status')!r} error {r.get('error')!r}")
elif len(lines) != 1 or "interrupted" not in lines[0]: print(f"FAIL {name}: stderr {lines!r}")
else: print(f"ok   {name}")
PY
done

# ---------------------------------------------------------------- a signal at the end of --save keeps the previous file
# A previous checkpoint sits at the --save path. The signal is sent while the last tensor is being
# written or the file flushed and renamed (the reader holds back the last 96 KiB, more than a pipe holds): the previous file
# must be there unchanged afterwards, with exit 128+signal, status interrupted and no temp file.
"$TRAIN" "${RUN[@]}" --save "$T/prev.st" 2>/dev/null || fail reliab_prev_checkpoint "could not save a checkpoint"
for sig in INT TERM; do
  /usr/bin/python3 - "$sig" "$T" "$TRAIN" "${RUN[@]}" <<'PY'
import hashlib, os, select, shutil, signal, subprocess, sys, time, json
sig, T, train, run = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
name = f"reliab_save_sig{sig}_at_end_keeps_previous"
save, out = f"{T}/late{sig}.st", f"{T}/late{sig}.json"
shutil.copy(f"{T}/prev.st", save)
total, before = os.path.getsize(save), hashlib.md5(open(save, "rb").read()).hexdigest()
def fifo(): os.mkfifo(f"{save}.tmp.{os.getpid()}")
err = open(f"{T}/late{sig}.err", "w")
p = subprocess.Popen([train] + run + ["--out", out, "--save", save], preexec_fn=fifo, stdout=subprocess.DEVNULL, stderr=err)
fd = os.open(f"{save}.tmp.{p.pid}", os.O_RDONLY | os.O_NONBLOCK)
got, t0, sent = 0, time.time(), False
while time.time() - t0 < 100 and p.poll() is None:
    r, _, _ = select.select([fd], [], [], 0.2)
    if not r: continue
    try: b = os.read(fd, min(65536, max(1, total - 98304 - got)) if not sent else 65536)
    except BlockingIOError: b = b""
    got += len(b)
    if not sent and got >= total - 98304:
        time.sleep(0.2); p.send_signal(getattr(signal, "SIG" + sig)); sent = True
    if not b: time.sleep(0.01)
try: rc = p.wait(timeout=60)
except subprocess.TimeoutExpired: p.kill(); rc = "hung"
os.close(fd)
left = [f for f in os.listdir(T) if ".tmp." in f]
want = 128 + getattr(signal, "SIG" + sig)
try: r = json.load(open(out))
except Exception as e: r = {"status": "no record: %s" % e}
after = hashlib.md5(open(save, "rb").read()).hexdigest() if os.path.exists(save) else None
lines = [l for l in open(f"{T}/late{sig}.err") if l.startswith("train:") and not l.startswith("train: step ")]
if not sent: print(f"FAIL {name}: the save never reached its last tensor (exit {rc}, {got} of {total} bytes)")
elif after != before: print(f"FAIL {name}: the previous checkpoint at --save is {'gone' if after is None else 'changed'} (exit {rc}: {''.join(lines)[:200]})")
elif rc != want: print(f"FAIL {name}: exit {rc}, want {want}: {''.join(lines)[:200]}")
elif left: print(f"FAIL {name}: left behind: {left}")
elif r.get("status") != "interrupted": print(f"FAIL {name}: record status {r.get('status')!r} error {r.get('error')!r}")
elif len(lines) != 1 or "interrupted" not in lines[0]: print(f"FAIL {name}: stderr {lines!r}")
else: print(f"ok   {name}")
PY
done

# ---------------------------------------------------------------- outputs checked before training
chk() { # NAME CODE PATTERN ARGS...: train exits CODE with one line matching PATTERN and no step ran
  local n=$1 code=$2 pat=$3; shift 3
  timeout 120 "$TRAIN" "$@" >/dev/null 2>"$T/$n.err"; local rc=$?
  one_error "$n" "$code" "$pat" $rc "$T/$n.err" || return
  grep -q '^train: step ' "$T/$n.err" && { fail "$n" "training ran before the check"; return; }
  ok "$n"
}
chk reliab_out_missing_folder 2 "^train: .*$T/nodir/" "${RUN[@]}" --out "$T/nodir/"
# a folder component that is a file (executable or not) is "Not a directory", found before training;
# a name with no room left for the temp suffix, and a path beyond PATH_MAX, too
printf '#!/bin/sh\n' > "$T/exe"; chmod 755 "$T/exe"; printf 'x' > "$T/plain"; chmod 644 "$T/plain"
chk reliab_out_under_executable_file 2 "^train: cannot write $T/exe/x.json: .*Not a directory" "${RUN[@]}" --out "$T/exe/x.json"
chk reliab_save_under_executable_file 2 "^train: cannot write $T/exe/m.st: .*Not a directory" "${RUN[@]}" --save "$T/exe/m.st"
chk reliab_out_under_plain_file 2 "^train: cannot write $T/plain/x.json: .*Not a directory" "${RUN[@]}" --out "$T/plain/x.json"
chk reliab_out_under_executable_file_deeper 2 "^train: cannot write $T/exe/a/x.json: .*Not a directory" "${RUN[@]}" --out "$T/exe/a/x.json"
long=$(printf 'n%.0s' $(seq 250))
chk reliab_out_name_no_room_for_temp 2 "^train: cannot write $T/$long.json: .*too long" "${RUN[@]}" --out "$T/$long.json"
chk reliab_save_name_no_room_for_temp 2 "^train: cannot write $T/$long.st: .*too long" "${RUN[@]}" --save "$T/$long.st"
deep=$T; while [ ${#deep} -lt 4090 ]; do deep="$deep/$long"; done
chk reliab_out_path_beyond_path_max 2 "^train: cannot write .*too long" "${RUN[@]}" --out "$deep/x.json"
expect_exit reliab_mkdata_convert_under_executable_file 2 "^mkdata: cannot write $T/exe/c.bin: .*Not a directory" -- "$BUILD/mkdata" --convert "$DATA" "$T/exe/c.bin"
expect_exit reliab_mkdata_convert_name_no_room 2 "^mkdata: cannot write $T/$long.bin: .*too long" -- "$BUILD/mkdata" --convert "$DATA" "$T/$long.bin"
[ -z "$(ls "$T" | grep '\.tmp\.')" ] && ok reliab_output_checks_leave_nothing || fail reliab_output_checks_leave_nothing "$(ls "$T" | grep '\.tmp\.')"
chk reliab_out_is_folder 2 "^train: .*$T/.*folder" "${RUN[@]}" --out "$T/"
chk reliab_save_missing_folder 2 "^train: .*$T/nodir/" "${RUN[@]}" --save "$T/nodir/"
cp "$DATA" "$T/d.bin"; cp "$VAL" "$T/v.bin"; sum=$(md5sum < "$T/d.bin")
without RUN --data
chk reliab_out_is_data 2 "^train: .*--out .* is also --data" "${WITHOUT[@]}" --data "$T/d.bin" --out "$T/d.bin"
[ "$(md5sum < "$T/d.bin")" = "$sum" ] && ok reliab_out_is_data_untouched || fail reliab_out_is_data_untouched "the data file changed"
chk reliab_out_is_eval_data 2 "^train: .*--out .* is also --eval-data" "${RUN[@]}" --eval-data "$T/v.bin" --out "$T/v.bin"
ln -s "$T/d.bin" "$T/alias.bin"
cp "$DATA" "$T/d.bin"
chk reliab_save_is_data_by_link 2 "^train: .*--save .* is also --data" "${WITHOUT[@]}" --data "$T/d.bin" --save "$T/alias.bin"
chk reliab_out_is_save 2 "^train: .*--out .* is also --save" "${RUN[@]}" --out "$T/same.x" --save "$T/same.x"
"$TRAIN" "${RUN[@]}" --save "$T/init.st" 2>/dev/null || fail reliab_init_file "could not save a checkpoint"
chk reliab_save_is_init 2 "^train: .*--save .* is also --init" "${RUN[@]}" --init "$T/init.st" --save "$T/init.st"
echo '{"model_type": "llama", "vocab_size": 256, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "max_position_embeddings": 64}' > "$T/m.json"
chk reliab_out_is_model 2 "^train: .*--out .* is also --model" --model "$T/m.json" --seq-len 32 --batch-size 2 --steps 1 --data "$DATA" --out "$T/m.json"

# ---------------------------------------------------------------- a non-finite --init tensor is bad input (exit 2, named)
/usr/bin/python3 - "$T/init.st" "$T" <<'PY'
import json, struct, sys
src, d = sys.argv[1], sys.argv[2]
raw = open(src, "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; h = json.loads(raw[8:8 + n]); data = bytearray(raw[8 + n:])
def put(name, tensor, index, value):
    b = h[tensor]["data_offsets"][0] + 4 * index
    x = bytearray(data); x[b:b + 4] = struct.pack("<f", value)
    open(f"{d}/{name}", "wb").write(raw[:8 + n] + bytes(x))
put("nan.st", "model.layers.1.mlp.up_proj.weight", 777, float("nan"))
put("inf.st", "lm_head.weight", 5, float("inf"))
put("ninf.st", "model.norm.weight", 0, float("-inf"))
# the same in BF16: every tensor converted (the upper halves), one NaN
hb, blob, off = {}, b"", 0
for k, v in h.items():
    if k == "__metadata__": continue
    a, e = v["data_offsets"]; vals = struct.unpack(f"<{(e - a) // 4}I", bytes(data[a:e]))
    if k == "model.embed_tokens.weight": vals = (0x7fc00000,) + vals[1:]
    part = struct.pack(f"<{len(vals)}H", *[x >> 16 for x in vals])
    hb[k] = {"dtype": "BF16", "shape": v["shape"], "data_offsets": [off, off + len(part)]}; blob += part; off += len(part)
j = json.dumps(hb).encode(); j += b" " * (-len(j) % 8)
open(f"{d}/bf16nan.st", "wb").write(struct.pack("<Q", len(j)) + j + blob)
PY
chk reliab_init_nan 2 "^train: $T/nan.st: tensor model.layers.1.mlp.up_proj.weight element 777 is nan" "${RUN[@]}" --init "$T/nan.st"
chk reliab_init_inf 2 "^train: $T/inf.st: tensor lm_head.weight element 5 is inf" "${RUN[@]}" --init "$T/inf.st"
chk reliab_init_minus_inf 2 "^train: $T/ninf.st: tensor model.norm.weight element 0 is -inf" "${RUN[@]}" --init "$T/ninf.st"
chk reliab_init_bf16_nan 2 "^train: $T/bf16nan.st: tensor model.embed_tokens.weight element 0 is nan" "${RUN[@]}" --init "$T/bf16nan.st"
# two ranks, the bad element on one rank's slice only: every rank stops with exit 2, one line naming it
timeout 120 "${MPIRUN[@]}" -np 2 "$TRAIN" "${RUN[@]}" --tp 2 --init "$T/nan.st" --out "$T/nan2.json" >/dev/null 2>"$T/nan2.err"; rc=$?
one_error reliab_init_nan_2rank 2 "^train: (rank [01] on [^:]*: )?$T/nan.st: tensor model.layers.1.mlp.up_proj.weight element 777 is nan" $rc "$T/nan2.err" \
  && { [ -e "$T/nan2.json" ] && fail reliab_init_nan_2rank "a record was written" || ok reliab_init_nan_2rank; }

# ---------------------------------------------------------------- non-finite after the last step: diverged, exit 4
# the last update (its loss is computed before it) makes the parameters non-finite: status diverged,
# no checkpoint saved, on 1 and 2 ranks; a non-finite eval loss is recorded (as null) and diverges
for np in 1 2; do
  n=reliab_last_update_nonfinite_${np}rank
  launch=("$TRAIN"); [ $np -gt 1 ] && launch=("${MPIRUN[@]}" -np $np "$TRAIN")
  rm -f "$T/div.st"
  timeout 120 "${launch[@]}" "${RUN[@]}" --lr 1e300 --grad-clip 0 --save "$T/div.st" --out "$T/div$np.json" >/dev/null 2>"$T/div$np.err"; rc=$?
  if one_error "$n" 4 "^train: diverged at step 1: its update made the parameters non-finite" $rc "$T/div$np.err"; then
    why=$(record_says "$T/div$np.json" diverged 'non-finite') || { fail "$n" "record: $why"; continue; }
    [ -e "$T/div.st" ] && fail "$n" "a checkpoint was saved" || ok "$n"
  fi
done
without RUN --steps
timeout 120 "$TRAIN" "${WITHOUT[@]}" --steps 3 --lr 1e300 --grad-clip 0 --eval-data "$VAL" --eval-every 1 --out "$T/evnan.json" >/dev/null 2>"$T/evnan.err"; rc=$?
if one_error reliab_eval_loss_nonfinite 4 "^train: diverged at step 1: eval loss .*non-finite" $rc "$T/evnan.err"; then
  /usr/bin/python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); sys.exit(0 if r["status"]=="diverged" and r["eval"]==[{"step": 1, "loss": None}] else 1)' "$T/evnan.json" \
    && ok reliab_eval_loss_nonfinite || fail reliab_eval_loss_nonfinite "record: $(head -c 300 "$T/evnan.json")"
fi

# ---------------------------------------------------------------- ranks launched with different options
# (MPMD: one command line per rank) end at once with exit 2 and one line naming the option, the values
# and the ranks; never a hang (the timeout), an MPI error or a run that trains something else
two=(timeout 60 "${MPIRUN[@]}")
mpmd() { # NAME PATTERN ARGS-RANK0 -- ARGS-RANK1: exit 2, one matching line, no record
  local n=$1 pat=$2; shift 2
  local a=() b=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do a+=("$1"); shift; done; shift
  b=("$@")
  rm -f "$T/mpmd.json"
  local ra rb o # each rank's RUN less the options its case sets (an option given twice is refused)
  without RUN $(for o in "${a[@]}"; do [[ $o == --* ]] && echo "$o"; done); ra=("${WITHOUT[@]}")
  without RUN $(for o in "${b[@]}"; do [[ $o == --* ]] && echo "$o"; done); rb=("${WITHOUT[@]}")
  "${two[@]}" -np 1 "$TRAIN" "${ra[@]}" "${a[@]}" --out "$T/mpmd.json" : -np 1 "$TRAIN" "${rb[@]}" "${b[@]}" --out "$T/mpmd.json" >/dev/null 2>"$T/$n.err"
  local rc=$?
  one_error "$n" 2 "$pat" $rc "$T/$n.err" || return
  [ -e "$T/mpmd.json" ] && { fail "$n" "a record was written"; return; }
  ok "$n"
}
ranks='on rank 0 \([^)]*\); .* on rank 1 \([^)]*\)$'
mpmd reliab_mpmd_steps "^train: --steps differs between ranks: 2 on rank 0 \([^)]*\); 5 on rank 1 \([^)]*\)$" --steps 2 -- --steps 5
mpmd reliab_mpmd_tp "^train: --tp differs between ranks: 1 $ranks" --tp 1 -- --tp 2
mpmd reliab_mpmd_model "^train: --model differs between ranks: tiny $ranks" --model tiny -- --model small
mpmd reliab_mpmd_seq_len "^train: --seq-len differs between ranks: 32 $ranks" -- --seq-len 64
mpmd reliab_mpmd_lr "^train: --lr differs between ranks: " --lr 0.003 -- --lr 0.001
mpmd reliab_mpmd_seed "^train: --seed differs between ranks: 1337 \(default\) $ranks" -- --seed 7
mpmd reliab_mpmd_batch "^train: --batch-size differs between ranks: 2 $ranks" -- --batch-size 3
mpmd reliab_mpmd_data_kind "^train: --data differs between ranks: a file $ranks" -- --data synthetic
mpmd reliab_mpmd_init_on_one "^train: --init differs between ranks: \(not given\) $ranks" -- --init "$T/init.st"
mpmd reliab_mpmd_prefetch "^train: --no-prefetch differs between ranks" -- --no-prefetch
mpmd reliab_mpmd_peak_tflops "^train: --peak-tflops differs between ranks" --peak-tflops 1 --
mpmd reliab_mpmd_bad_option_on_one "^train: rank 1 on [^:]*: unknown option '--bogus'" -- --bogus
mpmd reliab_mpmd_bad_value_on_one "^train: --tp differs between ranks: 1 \(default\) $ranks" -- --tp 0
# the accumulation and checkpointing options are agreed like every other (a default says so)
mpmd reliab_mpmd_grad_accum "^train: --grad-accum differs between ranks: 2 $ranks" --grad-accum 2 -- --grad-accum 3
mpmd reliab_mpmd_grad_accum_one "^train: --grad-accum differs between ranks: [0-9]* \(default\) $ranks" -- --grad-accum 2
mpmd reliab_mpmd_global_batch "^train: --global-batch differs between ranks: " --global-batch 4 -- --global-batch 8
mpmd reliab_mpmd_accum_reduce "^train: --accum-reduce differs between ranks: last $ranks" --grad-accum 2 --accum-reduce last -- --grad-accum 2 --accum-reduce each
mpmd reliab_mpmd_ckpt_every "^train: --checkpoint-activations differs between ranks: every:1 $ranks" --checkpoint-activations every:1 -- --checkpoint-activations every:2
mpmd reliab_mpmd_ckpt_one "^train: --checkpoint-activations differs between ranks: " -- --checkpoint-activations
# one option text, two config files that differ in one field: the resolved configuration names it
sed 's/"num_hidden_layers": 2/"num_hidden_layers": 3/' "$T/m.json" > "$T/m3.json"
mpmd reliab_mpmd_model_field "^train: --model differs between ranks: num_hidden_layers 2 $ranks" --model "$T/m.json" -- --model "$T/m3.json"
# the same bad value on every rank is said once, without a rank
"${two[@]}" -np 2 "$TRAIN" "${RUN[@]}" --tp 0 >/dev/null 2>"$T/tp0.err"; rc=$?
one_error reliab_same_refusal_every_rank 2 "^train: --tp must be >= 1 \(got 0\)$" $rc "$T/tp0.err" && ok reliab_same_refusal_every_rank

# ---------------------------------------------------------------- a token file truncated while training
# (by another process, after step 1): one line naming the file, exit 1, a failed record, on every rank;
# no SIGBUS. Train data on 1 and 2 ranks, eval data on 1 rank.
for c in train1:1:data train2:2:data eval1:1:eval; do
  IFS=: read -r n np which <<<"$c"
  /usr/bin/python3 - "$n" "$np" "$which" "$T" "$DATA" "$VAL" "$TRAIN" "${MPIRUN[@]}" <<'PY'
import json, os, shutil, subprocess, sys, time
n, np, which, T, data, val, train = sys.argv[1:8]; mpirun = sys.argv[8:]
name = f"reliab_tokens_truncated_{n}"
f = f"{T}/shrink_{n}.bin"; shutil.copy(data if which == "data" else val, f)
args = ["--model", "tiny", "--seq-len", "32", "--batch-size", "2", "--steps", "100000", "--log-every", "1", "--out", f"{T}/shrink_{n}.json"]
args += ["--data", f] if which == "data" else ["--data", data, "--eval-data", f, "--eval-every", "1", "--eval-batches", "1"]
cmd = ([train] if np == "1" else mpirun + ["-np", np, train]) + args
err = f"{T}/shrink_{n}.err"
p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(err, "w"))
t0, cut = time.time(), False
while time.time() - t0 < 100 and p.poll() is None:
    if not cut and "train: step 1/" in open(err).read():
        os.truncate(f, 0); cut = True
    time.sleep(0.05)
try: rc = p.wait(timeout=60)
except subprocess.TimeoutExpired: p.kill(); rc = "hung"
lines = [l for l in open(err) if l.startswith("train:") and not l.startswith("train: step ")]
try: r = json.load(open(f"{T}/shrink_{n}.json"))
except Exception as e: r = {"status": f"no record: {e}"}
if not cut: print(f"FAIL {name}: never reached step 1 (exit {rc})")
elif rc != 1: print(f"FAIL {name}: exit {rc} (want 1): {lines!r}")
elif len(lines) != 1 or f"{f} changed while it was read" not in lines[0]: print(f"FAIL {name}: stderr {lines!r}")
elif r.get("status") != "failed" or "changed while it was read" not in (r.get("error") or ""): print(f"FAIL {name}: record {r.get('status')!r} {r.get('error')!r}")
else: print(f"ok   {name}")
PY
done

# ---------------------------------------------------------------- the host cannot give the engine its memory
# (ulimit -v 2.5 GB; the plan says 3.1 GiB per rank): one line "out of host memory", exit 3, an oom record; on
# one rank of two only: the same, naming that rank. Not in the sanitizer build (ASan maps terabytes).
BIG=(--model tiny --seq-len 1024 --batch-size 96 --steps 1 --log-every 100 --data "$DATA")
if [ "$BUILD" = build-san ]; then skip reliab_host_oom "ulimit -v cannot coexist with ASan's shadow memory"
else
  rm -f "$T/hoom1.json"
  (ulimit -v 2500000; timeout 120 "$TRAIN" "${BIG[@]}" --out "$T/hoom1.json" >/dev/null 2>"$T/hoom1.err"); rc=$?
  if one_error reliab_host_oom_1rank 3 "^train: out of host memory: the engine needs 3.12 GiB" $rc "$T/hoom1.err"; then
    why=$(record_says "$T/hoom1.json" oom 'out of host memory') && ok reliab_host_oom_1rank || fail reliab_host_oom_1rank "record: $why"
  fi
  rm -f "$T/hoom2.json"
  timeout 120 "${MPIRUN[@]}" -np 1 "$TRAIN" "${BIG[@]}" --out "$T/hoom2.json" : -np 1 sh -c 'ulimit -v 2500000; exec "$@"' sh "$TRAIN" "${BIG[@]}" --out "$T/hoom2.json" >/dev/null 2>"$T/hoom2.err"; rc=$?
  if one_error reliab_host_oom_one_rank_of_two 3 "^train: rank 1 on [^:]*: out of host memory: the engine needs" $rc "$T/hoom2.err"; then
    why=$(record_says "$T/hoom2.json" oom 'rank 1 on .*out of host memory') && ok reliab_host_oom_one_rank_of_two || fail reliab_host_oom_one_rank_of_two "record: $why"
  fi
fi

# ---------------------------------------------------------------- what the record says the run was built and run with
# env.git: the tree's revision (a commit of this repository, -dirty when the build had local changes),
# "unknown" for a tree without .git (the Makefile's buildinfo, checked in an empty copy); env.compiler:
# the compiler's version line; env.blas*: the library and the kernels each rank ran, and whether they
# differ (OPENBLAS_CORETYPE on one rank of two here)
without RUN --steps
"$TRAIN" "${WITHOUT[@]}" --steps 0 --out "$T/env.json" 2>/dev/null
/usr/bin/python3 - "$T/env.json" "$(mpicc --version 2>/dev/null | head -1)" "$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel 2>/dev/null)" <<'PY'
import json, re, subprocess, sys
e = json.load(open(sys.argv[1]))["env"]; cc, top = sys.argv[2], sys.argv[3]
g = e.get("git") or ""
m = re.fullmatch(r"([0-9a-f]{7,40})(-dirty)?", g)
if top:
    known = m and subprocess.run(["git", "-C", top, "cat-file", "-e", m.group(1) + "^{commit}"], capture_output=True).returncode == 0
    print("ok   reliab_record_git_revision" if known else f"FAIL reliab_record_git_revision: env.git {g!r} is not a commit of this tree")
else:
    print("ok   reliab_record_git_revision" if g == "unknown" else f"FAIL reliab_record_git_revision: {g!r} outside a git tree")
print("ok   reliab_record_compiler" if e.get("compiler") == cc and cc else f"FAIL reliab_record_compiler: {e.get('compiler')!r} vs {cc!r}")
print("ok   reliab_record_blas" if "OpenBLAS" in (e.get("blas") or "") and e.get("blas_core") and e.get("blas_hosts_differ") is False
      else f"FAIL reliab_record_blas: {e.get('blas')!r} {e.get('blas_core')!r} {e.get('blas_hosts_differ')!r}")
PY
mkdir -p "$T/tarball"; cp "$(dirname "$0")/../Makefile" "$T/tarball/"
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$T/tarball" -n all BUILD=build >/dev/null 2>&1
grep -q '^#define MESHSWEEP_GIT "unknown"$' "$T/tarball/build/gen/buildinfo.h" 2>/dev/null && ok reliab_buildinfo_without_git \
  || fail reliab_buildinfo_without_git "$(cat "$T/tarball/build/gen/buildinfo.h" 2>&1 | head -2)"
timeout 60 "${MPIRUN[@]}" -np 1 "$TRAIN" "${RUN[@]}" --out "$T/blas2.json" : -np 1 env OPENBLAS_CORETYPE=Nehalem "$TRAIN" "${RUN[@]}" --out "$T/blas2.json" >/dev/null 2>"$T/blas2.err"
/usr/bin/python3 -c 'import json, sys; sys.exit(0 if json.load(open(sys.argv[1]))["env"]["blas_hosts_differ"] is True else 1)' "$T/blas2.json" 2>/dev/null \
  && grep -q 'step 1/.* | BLAS kernels differ between ranks' "$T/blas2.err" && ok reliab_blas_kernels_differ_recorded \
  || fail reliab_blas_kernels_differ_recorded "$(grep 'step 1/' "$T/blas2.err" | head -1)"

# ---------------------------------------------------------------- evaluation options
chk reliab_eval_every_without_data 2 "^train: --eval-every .*--eval-data" "${RUN[@]}" --eval-every 1
chk reliab_eval_batches_bounded 2 "^train: --eval-batches 2147483647" "${RUN[@]}" --eval-data "$VAL" --eval-batches 2147483647

# ---------------------------------------------------------------- --plan
# a refused plan prints nothing on stdout (the table's header is not printed before the error)
timeout 120 "$TRAIN" --plan --world 6 --tp 3 --model tiny --seq-len 32 --batch-size 2 >"$T/p.out" 2>"$T/p.err"; rc=$?
one_error reliab_plan_error_before_table 2 "^train: " $rc "$T/p.err" && { [ -s "$T/p.out" ] && fail reliab_plan_error_before_table "stdout: $(head -c 200 "$T/p.out")" || ok reliab_plan_error_before_table; }
# bytes beyond 64 bits: 8192 layers, d 2^20, the most tokens per rank: the plan must not say it fits
echo '{"model_type": "llama", "vocab_size": 256, "hidden_size": 1048576, "intermediate_size": 4194304, "num_hidden_layers": 8192, "num_attention_heads": 8192, "num_key_value_heads": 8192, "max_position_embeddings": 16777216}' > "$T/huge.json"
timeout 120 "$TRAIN" --plan --model "$T/huge.json" --seq-len 4096 --batch-size 16384 --mem-budget 80GB --out "$T/huge.plan.json" >"$T/h.out" 2>"$T/h.err"; rc=$?
if [ $rc -eq 124 ]; then fail reliab_plan_overflow "hung"
elif [ $rc -eq 0 ] || grep -qi 'fits' "$T/h.out"; then fail reliab_plan_overflow "exit $rc: $(tail -2 "$T/h.out")"
elif [ $rc -ne 3 ] && [ $rc -ne 2 ]; then fail reliab_plan_overflow "exit $rc: $(head -c 200 "$T/h.err")"
else ok reliab_plan_overflow; fi
# many layers on many ranks: the plan still answers (every rank of a mesh allocates alike, so it is
# not recomputed per rank: 2 ranks planned, not 1024); the limit guards against a hang (planning
# every rank takes many minutes), it is not a speed target
echo '{"model_type": "llama", "vocab_size": 256, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 16384, "num_attention_heads": 8, "max_position_embeddings": 256}' > "$T/deep.json"
timeout 120 "$TRAIN" --plan --world 512 --tp 8 --model "$T/deep.json" --seq-len 32 --batch-size 1 >"$T/deep.out" 2>"$T/deep.err"; rc=$?
[ $rc -eq 0 ] && [ "$(grep -c '^[0-9]' "$T/deep.out")" -eq 512 ] && ok reliab_plan_deep_wide \
  || fail reliab_plan_deep_wide "exit $rc, $(grep -c '^[0-9]' "$T/deep.out") rank rows: $(head -c 200 "$T/deep.err")"
