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

# --- mkdata input faults (exit 2) and no val.bin from a 1-byte text
expect_exit data_mkdata_missing_input 2 "^mkdata: cannot open $T/none.txt" -- "$MK" "$T/none.txt" "$T/o1"
printf 'a' > "$T/one.txt"
expect_exit data_mkdata_one_byte 2 "^mkdata: $T/one.txt has 1 bytes: too few tokens" -- "$MK" "$T/one.txt" "$T/o2"
[ ! -e "$T/o2/val.bin" ] && [ ! -e "$T/o2/train.bin" ] && ok data_mkdata_one_byte_writes_nothing \
  || fail data_mkdata_one_byte_writes_nothing "$(ls "$T/o2")"
expect_exit data_mkdata_bad_format 2 "^mkdata: --format expects nanogpt, llmc, npy or megatron" -- "$MK" --format csv "$T/text.txt" "$T/o3"
expect_exit data_mkdata_format_dtype 2 "^mkdata: --format megatron cannot hold --dtype u32" -- "$MK" --format megatron --dtype u32 "$T/text.txt" "$T/o3"
expect_exit data_mkdata_convert_bad_input 2 "^mkdata: data: $T/neg.npy token -1 at index 50 is negative" -- "$MK" --convert "$T/neg.npy" "$T/x.bin"
exit 0
