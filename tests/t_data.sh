#!/usr/bin/env bash
# tests/t_data.sh — token files end to end: the same text written by build/mkdata in every format and
# dtype trains to bit-identical losses (train and eval) through build/train; a broken file of each
# format stops train with exit 2 and one line naming the file; mkdata's input faults exit 2.
source "$(dirname "$0")/lib.sh"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
TR="$BUILD/train"; MK="$BUILD/mkdata"
TXT="$BUILD/data/kjv/kjv.txt"
for f in "$TR" "$MK" "$TXT"; do [ -e "$f" ] || { fail data_setup "$f missing (make && make data)"; exit 1; }; done
head -c 200000 "$TXT" > "$T/text.txt"

# name format dtype train-file val-file
cases=(
  "nanogpt nanogpt u16 train.bin val.bin"
  "llmc16 llmc u16 train.bin val.bin"
  "llmc32 llmc u32 train.bin val.bin"
  "npy16 npy u16 train.npy val.npy"
  "npy32 npy u32 train.npy val.npy"
  "npyi64 npy i64 train.npy val.npy"
  "megatron16 megatron u16 train val"
  "megatroni32 megatron i32 train.bin val.bin"
)
for c in "${cases[@]}"; do
  set -- $c
  if ! "$MK" --format "$2" --dtype "$3" "$T/text.txt" "$T/$1" >/dev/null 2>"$T/$1.mk.err"; then
    fail "data_mkdata_$1" "$(head -c 300 "$T/$1.mk.err")"; continue
  fi
  "$TR" --steps 3 --batch-size 2 --seq-len 64 --data "$T/$1/$4" --eval-data "$T/$1/$5" --eval-batches 2 \
    --out "$T/$1.json" 2>"$T/$1.err" || fail "data_train_$1" "$(tail -2 "$T/$1.err")"
done
/usr/bin/python3 - "$T" "${cases[@]}" <<'PY'
import json, sys, os
d = sys.argv[1]; names = [c.split()[0] for c in sys.argv[2:]]
recs = {}
for n in names:
    p = f"{d}/{n}.json"
    if os.path.exists(p): recs[n] = json.load(open(p))
ref = recs.get("nanogpt")
if ref is None:
    print("FAIL data_same_losses_every_format: the nanoGPT run has no record"); sys.exit()
key = lambda r: ([s["loss"] for s in r["steps"]], [e["loss"] for e in r["eval"]])
for n in names[1:]:
    r = recs.get(n)
    ok = r is not None and r["status"] == "ok" and key(r) == key(ref) and len(key(r)[0]) == 3 and len(key(r)[1]) >= 1
    print(f"ok   data_same_losses_{n}" if ok else f"FAIL data_same_losses_{n}: {key(r) if r else 'no record'} vs {key(ref)}")
PY

# --- a broken file of each format: exit 2, one line naming the file
bad() { local n=$1 pat=$2; shift 2; expect_exit "$n" 2 "$pat" -- "$TR" --steps 1 --seq-len 16 "$@"; }
cp "$T/llmc16/train.bin" "$T/llmc_trunc.bin"; truncate -s -2 "$T/llmc_trunc.bin"
bad data_train_llmc_count_vs_size "^train: data: $T/llmc_trunc.bin: llm.c header says [0-9]+ tokens but the file holds" --data "$T/llmc_trunc.bin"
/usr/bin/python3 - "$T" <<'PY'
import struct, sys
d = sys.argv[1]
h = "{'descr': '<i4', 'fortran_order': False, 'shape': (100,), }"
h = h + " " * (64 - (10 + len(h) + 1) % 64) + "\n"
open(f"{d}/neg.npy", "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + struct.pack("<100i", *([5] * 50 + [-1] + [5] * 49)))
PY
bad data_train_npy_negative_id "^train: data: $T/neg.npy token -1 at index 50 is negative" --data "$T/neg.npy"
cp "$T/megatron16/train.bin" "$T/megcut.bin"; cp "$T/megatron16/train.idx" "$T/megcut.idx"; truncate -s 100 "$T/megcut.bin"
bad data_train_megatron_pointer_outside "^train: data: $T/megcut.idx: sequence [0-9]+ .* lies outside $T/megcut.bin" --data "$T/megcut"
/usr/bin/python3 -c "import struct,sys; open(sys.argv[1],'wb').write(b'MMIDIDX\0\0' + struct.pack('<QBQQ', 2, 8, 0, 1) + struct.pack('<q', 0))" "$T/megv.idx"; cp "$T/megatron16/train.bin" "$T/megv.bin"
bad data_train_megatron_bad_version "^train: data: $T/megv.idx: Megatron index version 2" --data "$BUILD/data/kjv/train.bin" --eval-data "$T/megv.bin"

# --- a file that is almost a known format is refused, not read as headerless tokens (with a vocabulary
# large enough that the header's bytes would pass as ids); what was detected is in the record and on
# the first progress line; a file with fewer sequences than one global batch is refused
echo '{"vocab_size": 65536, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 4, "max_position_embeddings": 64}' > "$T/v64k.json"
/usr/bin/python3 - "$T" <<'PY'
import struct, sys
d = sys.argv[1]
body = struct.pack("<2000H", *[(i * 7) % 256 for i in range(2000)])
hdr = lambda magic, ver=1: struct.pack("<3i", magic, ver, 2000) + b"\0" * (1024 - 12)
open(f"{d}/llmc_off1.bin", "wb").write(hdr(20240521) + body)
open(f"{d}/llmc_byte.bin", "wb").write(hdr(20240520 ^ 0x00ff0000) + body)
open(f"{d}/llmc_zero_magic.bin", "wb").write(hdr(0) + body)
h = "{'descr': '<u2', 'fortran_order': False, 'shape': (2000,), }"; h += " " * (64 - (10 + len(h) + 1) % 64) + "\n"
npy = lambda magic, hh=h: magic + b"\x01\x00" + struct.pack("<H", len(hh)) + hh.encode() + body
open(f"{d}/npy_magic.npy", "wb").write(npy(b"\x92NUMPY"))
open(f"{d}/npy_lower.npy", "wb").write(npy(b"\x93numpy"))
hy = "{'descr': '<u2', 'fortran_order': Falsey, 'shape': (2000,), }"; hy += " " * (64 - (10 + len(hy) + 1) % 64) + "\n"
open(f"{d}/npy_falsey.npy", "wb").write(npy(b"\x93NUMPY", hy))
open(f"{d}/few.bin", "wb").write(struct.pack("<100H", *range(100)))
PY
bad data_near_llmc_magic_off_by_one "^train: data: $T/llmc_off1.bin looks like an llm.c token file with a damaged header" --model "$T/v64k.json" --data "$T/llmc_off1.bin"
bad data_near_llmc_magic_one_byte "^train: data: $T/llmc_byte.bin looks like an llm.c token file" --model "$T/v64k.json" --data "$T/llmc_byte.bin"
bad data_near_llmc_magic_zeroed "^train: data: $T/llmc_zero_magic.bin looks like an llm.c token file" --model "$T/v64k.json" --data "$T/llmc_zero_magic.bin"
bad data_near_npy_magic "^train: data: $T/npy_magic.npy looks like a .npy file with a damaged header" --model "$T/v64k.json" --data "$T/npy_magic.npy"
bad data_near_npy_lowercase "^train: data: $T/npy_lower.npy looks like a .npy file" --model "$T/v64k.json" --eval-data "$T/npy_lower.npy" --data synthetic
bad data_npy_falsey "^train: data: $T/npy_falsey.npy: .npy header has entries not separated by ','" --data "$T/npy_falsey.npy"
"$TR" --steps 1 --seq-len 16 --batch-size 1 --data synthetic --save "$T/w.st" 2>/dev/null || fail data_setup_safetensors "could not save"
bad data_near_safetensors "^train: data: $T/w.st looks like a safetensors file" --data "$T/w.st"
bad data_fewer_sequences_than_a_batch "^train: --data $T/few.bin holds 6 sequences of 16 tokens, fewer than one global batch of 8" --data "$T/few.bin" --batch-size 8
bad data_eval_fewer_sequences_than_a_batch "^train: --eval-data $T/few.bin holds 6 sequences of 16 tokens, fewer than one global batch of 7" --eval-data "$T/few.bin" --batch-size 7
"$TR" --steps 1 --seq-len 16 --batch-size 2 --data "$T/llmc32/train.bin" --eval-data "$T/npy16/val.npy" --out "$T/fmt.json" 2>"$T/fmt.err"
if grep -q '^train: step 1/1 .* | data llmc u32, eval npy u16$' "$T/fmt.err" && /usr/bin/python3 -c '
import json, sys; d = json.load(open(sys.argv[1]))["data"]
sys.exit(0 if (d["train"]["format"], d["train"]["dtype"], d["eval"]["format"], d["eval"]["dtype"]) == ("llmc", "u32", "npy", "u16") and d["train"]["tokens"] > 0 else 1)' "$T/fmt.json"
then ok data_format_in_record_and_progress_line; else fail data_format_in_record_and_progress_line "$(grep 'step 1/' "$T/fmt.err")"; fi

# --- mkdata input faults (exit 2) and no val.bin from a 1-byte text
expect_exit data_mkdata_missing_input 2 "^mkdata: cannot open $T/none.txt" -- "$MK" "$T/none.txt" "$T/o1"
printf 'a' > "$T/one.txt"
expect_exit data_mkdata_one_byte 2 "^mkdata: $T/one.txt has 1 bytes: too few tokens" -- "$MK" "$T/one.txt" "$T/o2"
[ ! -e "$T/o2/val.bin" ] && [ ! -e "$T/o2/train.bin" ] && ok data_mkdata_one_byte_writes_nothing \
  || fail data_mkdata_one_byte_writes_nothing "$(ls "$T/o2")"
expect_exit data_mkdata_bad_format 2 "^mkdata: --format expects nanogpt, llmc, npy or megatron" -- "$MK" --format csv "$T/text.txt" "$T/o3"
expect_exit data_mkdata_format_dtype 2 "^mkdata: --format megatron cannot hold --dtype u32" -- "$MK" --format megatron --dtype u32 "$T/text.txt" "$T/o3"
expect_exit data_mkdata_convert_bad_input 2 "^mkdata: data: $T/neg.npy token -1 at index 50 is negative" -- "$MK" --convert "$T/neg.npy" "$T/x.bin"
# --- mkdata never reads a FIFO (it would block) and never writes over its own input
mkfifo "$T/fifo.txt"
expect_exit data_mkdata_fifo_no_hang 2 "^mkdata: $T/fifo.txt is not a readable regular file" -- "$MK" "$T/fifo.txt" "$T/o4"
expect_exit data_mkdata_device_input 2 "^mkdata: /dev/zero is not a readable regular file" -- "$MK" /dev/zero "$T/o4"
expect_exit data_mkdata_convert_fifo_no_hang 2 "^mkdata: data: $T/fifo.txt is not a regular file" -- "$MK" --convert "$T/fifo.txt" "$T/o5.bin"
md5() { cat "$@" | md5sum; }
# convert IN OUT FORMAT FILES...: refused (exit 2, one line), the input files unchanged
same_in() {
  local n=$1 in=$2 out=$3 fmt=$4; shift 4
  local before; before=$(md5 "$@")
  expect_exit "$n" 2 "^mkdata: .* is also the input" -- "$MK" --convert --format "$fmt" "$in" "$out"
  [ "$(md5 "$@")" = "$before" ] && ok "${n}_input_kept" || fail "${n}_input_kept" "the input changed"
}
same_in data_mkdata_convert_megatron_onto_itself "$T/megatron16/train" "$T/megatron16/train" megatron "$T/megatron16/train.bin" "$T/megatron16/train.idx"
same_in data_mkdata_convert_megatron_onto_its_bin "$T/megatron16/train.bin" "$T/megatron16/train.bin" megatron "$T/megatron16/train.bin" "$T/megatron16/train.idx"
same_in data_mkdata_convert_llmc_onto_itself "$T/llmc16/train.bin" "$T/llmc16/train.bin" llmc "$T/llmc16/train.bin"
same_in data_mkdata_convert_llmc_by_stem "$T/llmc16/train.bin" "$T/llmc16/train" llmc "$T/llmc16/train.bin"
same_in data_mkdata_convert_npy_onto_itself "$T/npy16/train.npy" "$T/npy16/train.npy" npy "$T/npy16/train.npy"
ln "$T/nanogpt/train.bin" "$T/hardlink.bin"
same_in data_mkdata_convert_onto_a_hard_link "$T/nanogpt/train.bin" "$T/hardlink.bin" nanogpt "$T/nanogpt/train.bin"
# a single-file output onto one file of a Megatron input pair
same_in data_mkdata_convert_onto_one_file_of_a_pair "$T/megatron16/train" "$T/megatron16/train.bin" nanogpt "$T/megatron16/train.bin" "$T/megatron16/train.idx"
mkdir -p "$T/txt"; cp "$T/text.txt" "$T/txt/train.bin"
expect_exit data_mkdata_text_onto_itself 2 "^mkdata: .*$T/txt/train.bin is also the input" -- "$MK" "$T/txt/train.bin" "$T/txt"
cmp -s "$T/text.txt" "$T/txt/train.bin" && ok data_mkdata_text_onto_itself_kept || fail data_mkdata_text_onto_itself_kept "the text changed"
# --- SIGINT/SIGTERM during mkdata --convert: exit 128+signal, one line, the previous output kept, no temp file
for sig in INT TERM; do
  cp "$T/llmc16/train.bin" "$T/prev$sig.bin"
  /usr/bin/python3 - "$sig" "$T" "$MK" <<'PY'
import hashlib, os, select, signal, subprocess, sys, time
sig, T, mk = sys.argv[1:4]
name = f"data_mkdata_sig{sig}_keeps_output"
out = f"{T}/prev{sig}.bin"
before = hashlib.md5(open(out, "rb").read()).hexdigest()
def fifo(): os.mkfifo(f"{out}.tmp.{os.getpid()}")
err = open(f"{T}/mksig{sig}.err", "w")
p = subprocess.Popen([mk, "--convert", "--format", "llmc", f"{T}/nanogpt/train.bin", out], preexec_fn=fifo, stdout=subprocess.DEVNULL, stderr=err)
fd = os.open(f"{out}.tmp.{p.pid}", os.O_RDONLY | os.O_NONBLOCK)
got, sent, t0 = 0, False, time.time()
while time.time() - t0 < 60 and p.poll() is None:
    r, _, _ = select.select([fd], [], [], 0.2)
    if not r: continue
    try: b = os.read(fd, 4096 if not sent else 65536)
    except BlockingIOError: b = b""
    got += len(b)
    if got and not sent: p.send_signal(getattr(signal, "SIG" + sig)); sent = True
    if not b: time.sleep(0.01)
try: rc = p.wait(timeout=60)
except subprocess.TimeoutExpired: p.kill(); rc = "hung"
os.close(fd)
lines = [l for l in open(f"{T}/mksig{sig}.err") if l.strip()]
left = [f for f in os.listdir(T) if ".tmp." in f]
after = hashlib.md5(open(out, "rb").read()).hexdigest() if os.path.exists(out) else None
if not sent: print(f"FAIL {name}: mkdata never wrote (exit {rc})")
elif rc != 128 + getattr(signal, "SIG" + sig): print(f"FAIL {name}: exit {rc}: {lines!r}")
elif after != before: print(f"FAIL {name}: the previous output changed or is gone")
elif left: print(f"FAIL {name}: left behind: {left}")
elif len(lines) != 1 or not lines[0].startswith("mkdata: interrupted by SIG" + sig): print(f"FAIL {name}: stderr {lines!r}")
else: print(f"ok   {name}")
PY
done
exit 0
