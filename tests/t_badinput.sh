#!/usr/bin/env bash
# tests/t_badinput.sh — the rows of the bad-input table (docs/bad-input.md) that no other test covers end
# to end: each bad input to build/train, build/sweep or build/mkdata must exit with the documented code,
# print exactly one line on stderr naming the input, and leave no output file behind. Run under
# `make test SAN=1` the same commands also prove that no bad input crashes under ASan/UBSan.
# Not: the unit-level parser checks (tests/test_io.c, tests/test_sweep_spec.c) nor the rows already
# exercised end to end in tests/t_train.sh, t_memory.sh and t_sweep.sh (the table names each).
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
TR=$BUILD/train
SW=$BUILD/sweep
MK=$BUILD/mkdata
PY=/usr/bin/python3
for f in "$TR" "$SW" "$MK" "$BUILD/data/kjv/train.bin"; do
  [ -e "$f" ] || { fail badinput_setup "$f missing (make && make data)"; exit 1; }
done
T=$(mktemp -d /tmp/t_badinput.XXXXXX)
trap 'rm -rf "$T"' EXIT
DATA=$(pwd)/$BUILD/data/kjv/train.bin

# bad NAME CODE PATTERN ARGS...: build/train ARGS --out $T/out.json exits CODE with one stderr line
# matching PATTERN, and neither out.json nor any temp file of it is left
bad() {
  local n=$1 code=$2 pat=$3; shift 3
  rm -f "$T"/out.json*
  local pre=() # the defaults of this file, unless the case gives its own (an option twice is refused)
  [[ " $* " == *" --steps"[\ =]* ]] || pre+=(--steps 1)
  [[ " $* " == *" --seq-len"[\ =]* ]] || pre+=(--seq-len 16)
  expect_exit "$n" "$code" "$pat" -- "$TR" "${pre[@]}" "$@" --out "$T/out.json"
  if ls "$T"/out.json* >/dev/null 2>&1; then fail "${n}_no_output" "left $(ls "$T"/out.json*)"; fi
}

# ---- options ---------------------------------------------------------------------------------------
bad opt_tp_zero 2 '^train: --tp must be >= 1' --tp 0
bad opt_tp_negative 2 '^train: --tp must be >= 1' --tp -1
bad opt_steps_negative 2 '^train: --steps must be >= 0' --steps -1
bad opt_seq_len_zero 2 '^train: --seq-len must be >= 1' --seq-len 0
bad opt_lr_negative 2 '^train: --lr, --weight-decay and --grad-clip must be >= 0' --lr -1
bad opt_lr_nan 2 "^train: option --lr: 'nan' is not a number" --lr nan
bad opt_lr_inf 2 "^train: option --lr: 'inf' is not a number" --lr inf
bad opt_batch_zero 2 '^train: --batch-size must be a positive integer' --batch-size 0
bad opt_batch_too_large 2 '^train: --batch-size must be a positive integer' --batch-size 16777217
bad opt_int_overflow 2 "^train: option --steps: '99999999999' is not an integer" --steps 99999999999
bad opt_log_every_zero 2 '^train: --log-every must be >= 1' --log-every 0
bad opt_world_without_plan 2 '^train: --world is only valid with --plan' --world 4
bad opt_bf16_on_cpu 2 '^train: --dtype bf16 needs --backend cuda' --dtype bf16
bad opt_unknown_backend 2 "^train: --backend must be cpu or cuda \(got 'gpu'\)" --backend gpu
# every numeric option says its range; an option that would be accepted and then ignored is refused
bad opt_peak_tflops_negative 2 '^train: --peak-tflops must be >= 0' --peak-tflops -5
bad opt_seed_beyond_range 2 "^train: option --seed: '18446744073709551615' is not an integer in \[0, 9223372036854775807\]" --seed 18446744073709551615
bad opt_seed_negative 2 "^train: option --seed: '-1' is not an integer in \[0, 9223372036854775807\]" --seed -1
bad opt_int_range_named 2 "^train: option --eval-every: '2147483648' is not an integer in \[-2147483647, 2147483647\]" --eval-every 2147483648
bad opt_warmup_with_constant 2 '^train: --warmup 5 applies to --schedule cosine only' --warmup 5
bad opt_warmup_not_below_steps 2 '^train: --warmup 3 must be below --steps 3' --schedule cosine --warmup 3 --steps 3
# a value with a newline in it stays on one line (every message of train and mkdata)
bad opt_newline_in_string_value 2 "^train: --schedule must be constant or cosine \(got 'cos\?ine'\)" --schedule $'cos\nine'
bad opt_newline_in_number 2 "^train: option --steps: '1\?2' is not an integer" --steps $'1\n2'
bad opt_newline_in_option_name 2 "^train: unknown option '--fo\?o'" $'--fo\no'
bad opt_newline_in_save_folder 2 "^train: cannot write /nonexistent\?dir/x.st" --save $'/nonexistent\ndir/x.st'
bad opt_newline_in_dtype 2 "^train: --dtype must be fp32 or bf16 \(got 'f\?p'\)" --dtype $'f\np'
expect_exit mkdata_newline_in_path 2 "^mkdata: cannot open $T/no\?ne.txt" -- "$MK" "$T/no"$'\n'"ne.txt" "$T/o"
expect_exit sweep_opt_two_specs 2 '^sweep: one spec at a time' -- "$SW" sweeps/smoke.json sweeps/default.json
expect_exit sweep_opt_out_dir_no_value 2 '^sweep: --out-dir needs a value' -- "$SW" sweeps/smoke.json --out-dir
expect_exit sweep_opt_no_spec 2 '^sweep: missing SPEC.json' -- "$SW"
# calibrate --check FILE --out FILE (or a link to it): the check's record would replace the calibration
printf '{"schema": "meshsweep.machine/1"}\n' > "$T/calib.json"; ln -sf "$T/calib.json" "$T/calib-link.json"
expect_exit calibrate_check_out_is_input 2 '^calibrate: --out .*calib.json is the machine file --check reads' -- \
  "$BUILD/calibrate" --check "$T/calib.json" --out "$T/calib.json"
expect_exit calibrate_check_out_is_input_link 2 '^calibrate: --out .*calib-link.json is the machine file --check reads' -- \
  "$BUILD/calibrate" --check "$T/calib.json" --out "$T/calib-link.json"
grep -qx '{"schema": "meshsweep.machine/1"}' "$T/calib.json" && ok calibrate_check_out_is_input_file_kept \
  || fail calibrate_check_out_is_input_file_kept "the machine file changed: $(head -c 200 "$T/calib.json")"
expect_exit mkdata_opt_extra_arg 2 '^mkdata: expected TEXT_FILE OUTDIR' -- "$MK" a b c
# an option given twice is refused (the last value winning silently ran what was not meant), in either
# spelling, flags too; every:K takes K in digits only (every:01, every:+2 would name one value twice)
bad opt_given_twice 2 "^train: option --grad-accum given twice: give it once$" --grad-accum 2 --grad-accum 3
bad opt_given_twice_eq 2 "^train: option --lr given twice: give it once$" --lr=0.1 --lr 0.2
bad opt_flag_given_twice 2 "^train: option --no-prefetch given twice: give it once$" --no-prefetch --no-prefetch
bad opt_every_leading_zero 2 "^train: --checkpoint-activations every:01: write K in digits without sign or leading zeros \(every:1\)$" --checkpoint-activations every:01
bad opt_every_plus_sign 2 "^train: --checkpoint-activations every:\+2: write K in digits without sign or leading zeros \(every:2\)$" --checkpoint-activations every:+2
expect_exit sweep_opt_given_twice 2 '^sweep: --out-dir given twice: give it once$' -- "$SW" sweeps/smoke.json --out-dir "$T/a" --out-dir "$T/b"
check sweep_opt_given_twice_nothing_created test ! -e "$T/a" -a ! -e "$T/b"
# --gpus-per-host outside 1..world: exit 2, one line, on every path (train --plan; a spec's extra_args,
# planned per cell before anything runs, with and without --plan-only, grids too)
expect_exit plan_gpus_per_host_zero 2 '^train: --gpus-per-host must be in 1\.\.--world 4 \(got 0\)$' -- "$TR" --plan --world 4 --gpus-per-host 0
expect_exit plan_gpus_per_host_above_world 2 '^train: --gpus-per-host must be in 1\.\.--world 4 \(got 8\)$' -- "$TR" --plan --world 4 --gpus-per-host 8
# --batch-size max with a global batch no number of micro-batches the engine takes can reach: that limit is named
expect_exit plan_max_global_batch_past_micro_batches 2 '^train: --global-batch 16777216 on mesh 1x1 is 16777216 sequences per DP rank: micro-batches of at most [0-9]+ fit, so a step would take more than 65536 micro-batches' -- \
  "$TR" --plan --batch-size max --global-batch 16777216 --mem-budget 1GiB --seq-len 128
# --gpu names fold case (the catalog's spelling is what the plan says)
"$TR" --plan --gpu H100-80GB > "$T/gpucase.txt" 2>&1 && grep -q '^# --gpu h100-80gb ' "$T/gpucase.txt" && ok plan_gpu_name_case_folded \
  || fail plan_gpu_name_case_folded "$(head -c 300 "$T/gpucase.txt")"

# ---- sizes -----------------------------------------------------------------------------------------
for s in 18446744073709551616 0 1.5 16EiB ' 96MiB' '96 MiB' 0x10MiB 1.0000000000000000001KiB; do
  bad "size_bad_'$s'" 2 "^train: --mem-budget '$s' is not a size" --mem-budget "$s"
done
# a legal size below the model's state: a clean out-of-budget stop, not a parse error (exit 3)
rm -f "$T/out.json"
expect_exit size_below_state_exit3 3 '^train: out of memory budget: params asked' -- "$TR" --steps 1 --seq-len 16 --mem-budget 1.3KB

# ---- meshes ----------------------------------------------------------------------------------------
bad mesh_tp_above_world 2 '^train: --tp 8 does not divide the world size 1' --tp 8
expect_exit mesh_plan_world_mod_tp 2 '^train: --tp 2 does not divide the world size 3' -- "$TR" --plan --world 3 --tp 2
expect_exit mesh_plan_heads_mod_tp 2 'does not divide num_attention_heads 8' -- "$TR" --plan --world 3 --tp 3

# ---- HF configs ------------------------------------------------------------------------------------
# cfg FILE 'PYTHON-DICT-UPDATE': a valid tiny config with some fields replaced (written by python)
cfg() {
  "$PY" -c 'import json,sys; d={"vocab_size": 256, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
"num_attention_heads": 4, "max_position_embeddings": 64}; d.update(eval(sys.argv[2])); open(sys.argv[1],"w").write(json.dumps(d))' "$T/$1" "$2"
}
base='"vocab_size": 256, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 4, "max_position_embeddings": 64'
: > "$T/empty.json"; mkdir -p "$T/folder.json"
cfg huge_vocab.json '{"vocab_size": 2147483647}'
cfg huge_layers.json '{"num_hidden_layers": 100000}'
cfg neg.json '{"hidden_size": -64}'
cfg float.json '{"num_hidden_layers": 1.5}'
cfg string.json '{"num_hidden_layers": "1"}'
printf '{%s, "hidden_size": 128}' "$base" > "$T/dup.json"
cfg mistral.json '{"model_type": "mistral"}'
cfg hd.json '{"head_dim": 32}'
cfg eps.json '{"rms_norm_eps": 0}'
printf '[{%s}]' "$base" > "$T/array.json"
printf '{"vocab_size": 256, "hid\xff": 1}' > "$T/latin1.json"
bad cfg_empty_file 2 "^train: $T/empty.json: invalid config.json" --model "$T/empty.json"
bad cfg_folder 2 "^train: $T/folder.json: not a regular file" --model "$T/folder.json"
bad cfg_huge_vocab 2 'vocab_size 2147483647 is larger than meshsweep supports' --model "$T/huge_vocab.json"
bad cfg_huge_layers 2 'num_hidden_layers 100000 is larger than meshsweep supports' --model "$T/huge_layers.json"
bad cfg_negative 2 'hidden_size must be a positive integer' --model "$T/neg.json"
bad cfg_float 2 'num_hidden_layers must be a positive integer' --model "$T/float.json"
bad cfg_string 2 'num_hidden_layers must be a positive integer' --model "$T/string.json"
bad cfg_duplicate_key 2 'duplicate' --model "$T/dup.json"
bad cfg_other_model_type 2 'model_type must be "llama"' --model "$T/mistral.json"
bad cfg_head_dim 2 'head_dim 32 must equal hidden_size/num_attention_heads' --model "$T/hd.json"
bad cfg_eps_zero 2 'rms_norm_eps must be a number > 0' --model "$T/eps.json"
bad cfg_not_object 2 'config must be a JSON object' --model "$T/array.json"
bad cfg_not_utf8 2 'invalid config.json' --model "$T/latin1.json"
bad cfg_missing 2 "^train: $T/none.json: invalid config.json: unable to open" --model "$T/none.json"
bad cfg_newline_in_name 2 "^train: unknown model 'tiny\?x'" --model $'tiny\nx'

# ---- token files -----------------------------------------------------------------------------------
: > "$T/empty.bin"; mkdir -p "$T/folder.bin"; mkfifo "$T/fifo.bin"
printf '\x01\x00\x02\x00' > "$T/short.bin"
bad tok_empty 2 "^train: data: $T/empty.bin is empty" --data "$T/empty.bin"
bad tok_folder 2 "^train: data: $T/folder.bin is not a regular file" --data "$T/folder.bin"
bad tok_fifo_no_hang 2 "^train: data: $T/fifo.bin is not a regular file" --data "$T/fifo.bin"
bad tok_device 2 '^train: data: /dev/zero is not a regular file' --data /dev/zero
bad tok_shorter_than_seq 2 "^train: data: $T/short.bin has 2 tokens, need at least T\+1 = 17" --data "$T/short.bin"
bad tok_eval_empty 2 "^train: data: $T/empty.bin is empty" --eval-data "$T/empty.bin"

# ---- safetensors (--init) --------------------------------------------------------------------------
"$PY" - "$T" <<'PY'
import json, struct, sys
d = sys.argv[1]
def raw(name, hdr, data=b"", hlen=None):
    open(f"{d}/{name}", "wb").write(struct.pack("<Q", len(hdr) if hlen is None else hlen) + hdr + data)
t = lambda b, e, shape=None: {"dtype": "F32", "shape": shape or [(e - b) // 4], "data_offsets": [b, e]}
raw("overlap.st", json.dumps({"a": t(0, 16), "b": t(8, 24)}).encode(), b"\0" * 24)
raw("hdr_past_file.st", b"{}", hlen=1 << 20)
raw("hdr_absurd.st", b"{}", hlen=(1 << 64) - 1)
raw("shape_absurd.st", json.dumps({"a": t(0, 16, [1 << 62, 1 << 62])}).encode(), b"\0" * 16)
raw("offset_absurd.st", json.dumps({"a": t(0, (1 << 63) - 1, [1])}).encode(), b"\0" * 16)
raw("non_utf8.st", b'{"model.norm.weight\xff": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}', b"\0" * 4)
raw("dup.st", b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}', b"\0" * 8)
raw("truncated_hdr.st", b'{"a": {"dtype": "F32"', hlen=100)
raw("newline_name.st", json.dumps({"bad\nname": t(0, 8, [1])}).encode(), b"\0" * 8)
PY
: > "$T/empty.st"
bad st_overlapping_offsets 2 'tensors a \[0, 16\) and b \[8, 24\) overlap' --init "$T/overlap.st"
bad st_header_larger_than_file 2 'header length 1048576 is larger than the file' --init "$T/hdr_past_file.st"
bad st_header_length_absurd 2 'header length 18446744073709551615 is larger than the file' --init "$T/hdr_absurd.st"
bad st_shape_absurd 2 'shape has too many elements' --init "$T/shape_absurd.st"
bad st_offset_absurd 2 'past the data section' --init "$T/offset_absurd.st"
bad st_non_utf8_name 2 'not valid UTF-8 .*tensor names must be UTF-8' --init "$T/non_utf8.st"
bad st_duplicate_names 2 'duplicate tensor name' --init "$T/dup.st"
bad st_truncated_header 2 'larger than the file' --init "$T/truncated_hdr.st"
bad st_empty_file 2 'too short for a safetensors header' --init "$T/empty.st"
bad st_folder 2 "^train: $T/folder.bin: not a regular file" --init "$T/folder.bin"
bad st_fifo_no_hang 2 "^train: $T/fifo.bin: not a regular file" --init "$T/fifo.bin"
bad st_newline_in_name_one_line 2 'tensor bad\?name: data_offsets span 8 bytes' --init "$T/newline_name.st"

# ---- output paths that cannot be written -------------------------------------------------------------
: > "$T/afile"
expect_exit out_missing_folder 2 "^train: cannot write $T/no/such/x.json: folder $T/no/such" -- "$TR" --steps 1 --out "$T/no/such/x.json"
expect_exit out_under_a_file 2 "^train: cannot write $T/afile/x.json" -- "$TR" --steps 1 --out "$T/afile/x.json"
expect_exit save_missing_folder 2 "^train: cannot write $T/no/a.st" -- "$TR" --steps 1 --save "$T/no/a.st"
expect_exit sweep_out_dir_under_a_file 1 "^sweep: cannot create $T/afile/smoke" -- "$SW" sweeps/smoke.json --out-dir "$T/afile"
expect_exit mkdata_out_under_a_file 1 "^mkdata: cannot create directory $T/afile/d" -- "$MK" "$BUILD/data/kjv/kjv.txt" "$T/afile/d"
check out_nothing_left test -z "$(find "$T" -name '*.tmp*')"

# ---- sweep specs -------------------------------------------------------------------------------------
spec() { # spec FILE NAME-JSON [EXTRA]
  printf '{"name": %s, "world": 2, "meshes": ["1x2"], "model": "tiny", "seq_len": 16, "steps": 1, "lr": 0.003,
           "batch_size": 1, "data": "%s", "timeout_s": 60%s}\n' "$2" "$DATA" "${3:-}" > "$1"
}
for case in 'dotdot:".."' 'dot:"."' 'slash:"a/b"' 'abs:"/tmp/x"' 'escape:"../../x"' 'empty:""' 'newline:"a\nb"' 'nul:"a\u0000b"' 'long:"'"$(printf 'x%.0s' $(seq 101))"'"' 'number:7'; do
  n=${case%%:*}; v=${case#*:}
  spec "$T/name_$n.json" "$v"
  pat='^sweep: .*name: '; [ "$n" = nul ] && pat='^sweep: .*invalid JSON.*\\u0000'
  expect_exit "spec_name_$n" 2 "$pat" -- "$SW" "$T/name_$n.json" --out-dir "$T/res"
done
check spec_name_nothing_created test ! -e "$T/res"
spec "$T/res_dir.json" '"ok"' ', "results_dir": "'"$T"'/afile/r"'
expect_exit spec_results_dir_unwritable 1 "^sweep: cannot create $T/afile/r/ok" -- "$SW" "$T/res_dir.json"
: > "$T/empty_spec.json"
expect_exit spec_empty_file 2 '^sweep: .*spec: invalid JSON' -- "$SW" "$T/empty_spec.json"
expect_exit spec_folder 2 "^sweep: $T/folder.json: not a regular file" -- "$SW" "$T/folder.json"
expect_exit spec_fifo_no_hang 2 "^sweep: $T/fifo.bin: not a regular file" -- "$SW" "$T/fifo.bin"
printf '{"name": "a\0b"}' > "$T/nul_spec.json"
expect_exit spec_nul_byte 2 '^sweep: .*NUL' -- "$SW" "$T/nul_spec.json"
spec "$T/world0.json" '"ok"' ', "world": 0'
expect_exit spec_duplicate_key 2 '^sweep: .*duplicate' -- "$SW" "$T/world0.json"
spec "$T/timeout_neg.json" '"ok"' '' && sed -i 's/"timeout_s": 60/"timeout_s": -1/' "$T/timeout_neg.json"
expect_exit spec_timeout_negative 2 '^sweep: .*timeout_s: ' -- "$SW" "$T/timeout_neg.json"
spec "$T/launcher_bad.json" '"ok"' ', "launcher": "mpirun -np 2"'
expect_exit spec_launcher_string 2 '^sweep: .*launcher: expected an array of strings' -- "$SW" "$T/launcher_bad.json"
# faults that only a launch of every mesh used to find (the folder made, every mesh failed, exit 0):
# found before anything runs, as build/train itself would refuse them (exit 2, one line, the key named)
mkfifo "$T/fifo_data.bin"
spec "$T/fifo_data.json" '"ok"' ''; sed -i "s|\"data\": \"$DATA\"|\"data\": \"$T/fifo_data.bin\"|" "$T/fifo_data.json"
expect_exit spec_data_fifo_no_hang 2 "^sweep: .*: data: $T/fifo_data.bin is not a regular file" -- "$SW" "$T/fifo_data.json" --out-dir "$T/res"
printf '\x92NUMPY\x01\x00\x46\x00{"descr": "<u2", "fortran_order": False, "shape": (100,), }' > "$T/near.npy"; head -c 200 /dev/zero >> "$T/near.npy"
spec "$T/near_eval.json" '"ok"' ', "eval_data": "'"$T"'/near.npy"'
expect_exit spec_eval_data_damaged_header 2 "^sweep: .*: eval_data: $T/near.npy looks like a .npy file with a damaged header" -- "$SW" "$T/near_eval.json" --out-dir "$T/res"
spec "$T/gpu_bad.json" '"ok"' ', "gpu": "h900-1tb", "batch_size": "max", "mem_budget": "auto", "backend": "cuda"'
sed -i 's/"batch_size": 1, //' "$T/gpu_bad.json"
expect_exit spec_unknown_gpu 2 "^sweep: .*: gpu: build/train refuses cell 1x2: --gpu 'h900-1tb' is not a known device" -- "$SW" "$T/gpu_bad.json" --out-dir "$T/res" --plan-only
spec "$T/seq_long.json" '"ok"' '' && sed -i 's/"seq_len": 16/"seq_len": 4096/' "$T/seq_long.json"
expect_exit spec_seq_len_past_positions 2 "^sweep: .*: seq_len: build/train refuses cell 1x2: --seq-len 4096 exceeds max_position_embeddings 1024" -- "$SW" "$T/seq_long.json" --out-dir "$T/res"
spec "$T/gpu_budget.json" '"ok"' ', "gpu": "h100-80gb", "mem_budget": "16MiB"'
expect_exit spec_gpu_and_byte_budget 2 "^sweep: .*: mem_budget: build/train refuses cell 1x2: --mem-budget 16MiB and --gpu h100-80gb are two budgets" -- "$SW" "$T/gpu_budget.json" --out-dir "$T/res"
spec "$T/warm.json" '"ok"' ', "schedule": "cosine", "warmup": 1'
expect_exit spec_warmup_not_below_steps 2 "^sweep: .*: warmup: build/train refuses cell 1x2: --warmup 1 must be below --steps 1" -- "$SW" "$T/warm.json" --out-dir "$T/res"
spec "$T/warm_const.json" '"ok"' ', "warmup": 1'
expect_exit spec_warmup_with_constant 2 "^sweep: .*: warmup: build/train refuses cell 1x2: --warmup 1 applies to --schedule cosine only" -- "$SW" "$T/warm_const.json" --out-dir "$T/res"
spec "$T/extra_bad.json" '"ok"' ', "extra_args": ["--bogus"]'
expect_exit spec_extra_args_unknown_option 2 "^sweep: .*: extra_args: build/train refuses cell 1x2: unknown option '--bogus'" -- "$SW" "$T/extra_bad.json" --out-dir "$T/res"
spec "$T/heads.json" '"ok"' '' && sed -i 's/"world": 2, "meshes": \["1x2"\]/"world": 3, "meshes": ["1x3"]/' "$T/heads.json"
expect_exit spec_tp_not_dividing_heads 2 "^sweep: .*: meshes: build/train refuses cell 1x3: --tp 3 does not divide" -- "$SW" "$T/heads.json" --out-dir "$T/res"
head -c 100 "$DATA" > "$T/few.bin"
spec "$T/few.json" '"ok"' '' && sed -i "s|\"data\": \"$DATA\"|\"data\": \"$T/few.bin\"|; s/\"batch_size\": 1/\"batch_size\": 4/" "$T/few.json"
expect_exit spec_data_fewer_sequences_than_a_batch 2 "^sweep: .*: data: $T/few.bin holds 3 sequences of 16 tokens, fewer than one global batch of 4 \(cell 1x2\)" -- "$SW" "$T/few.json" --out-dir "$T/res"
# a grid axis with one value spelled twice (two cells of one run), and a seq_len axis value past the
# model's positions (it used to plan or run the other cells and exit 0): refused before any launch
spec "$T/ax_ckpt.json" '"ok"' ', "axes": {"checkpoint_activations": ["every:1", "full"]}'
expect_exit spec_grid_ckpt_same_value 2 "^sweep: .*: axes\.checkpoint_activations\[1\]: \"full\" is the same value as \[0\] \"every:1\"$" -- "$SW" "$T/ax_ckpt.json" --out-dir "$T/res"
spec "$T/ax_mem.json" '"ok"' ', "axes": {"mem_budget": ["16MiB", "16777216B"]}'
expect_exit spec_grid_mem_same_bytes 2 "^sweep: .*: axes\.mem_budget\[1\]: \"16777216B\" is the same value as \[0\] \"16MiB\"$" -- "$SW" "$T/ax_mem.json" --out-dir "$T/res" --plan-only
spec "$T/ax_seq.json" '"ok"' ', "axes": {"seq_len": [16, 4096]}' && sed -i 's/"seq_len": 16, //' "$T/ax_seq.json"
expect_exit spec_grid_seq_len_past_positions 2 "^sweep: .*: axes\.seq_len\[1\]: 4096 exceeds max_position_embeddings 1024 of model tiny$" -- "$SW" "$T/ax_seq.json" --out-dir "$T/res"
expect_exit spec_grid_seq_len_past_positions_plan_only 2 "^sweep: .*: axes\.seq_len\[1\]: 4096 exceeds max_position_embeddings 1024 of model tiny$" -- "$SW" "$T/ax_seq.json" --out-dir "$T/res" --plan-only
spec "$T/gph0.json" '"ok"' ', "extra_args": ["--gpus-per-host", "0"]'
expect_exit spec_extra_gpus_per_host_zero 2 "^sweep: .*: extra_args: build/train refuses cell 1x2: --gpus-per-host must be in 1\.\.--world 2 \(got 0\)$" -- "$SW" "$T/gph0.json" --out-dir "$T/res"
spec "$T/gph3.json" '"ok"' ', "extra_args": ["--gpus-per-host", "3"]'
expect_exit spec_extra_gpus_per_host_above_world_plan_only 2 "^sweep: .*: extra_args: build/train refuses cell 1x2: --gpus-per-host must be in 1\.\.--world 2 \(got 3\)$" -- "$SW" "$T/gph3.json" --out-dir "$T/res" --plan-only
spec "$T/gph_grid.json" '"ok"' ', "axes": {"checkpoint_activations": ["none", "full"]}, "extra_args": ["--gpus-per-host", "0"]'
expect_exit spec_grid_gpus_per_host_zero 2 "^sweep: .*: extra_args: build/train refuses cell 1x2.ac=none: --gpus-per-host must be in 1\.\.--world 2 \(got 0\) \(and every other cell\)$" -- "$SW" "$T/gph_grid.json" --out-dir "$T/res"
# --grad-accum in extra_args: the record, the progress line and the report would count the batch apart
spec "$T/ga.json" '"ok"' ', "extra_args": ["--grad-accum", "2"]'
expect_exit spec_extra_args_grad_accum 2 "^sweep: .*: extra_args\[0\]: \"--grad-accum\": the micro-batches per step come from \"global_batch\"" -- "$SW" "$T/ga.json" --out-dir "$T/res"
check spec_errors_nothing_created test ! -e "$T/res"
# a sweep in which every run failed is not a success (exit 1, said)
spec "$T/allfail.json" '"allfail"' ', "launcher": ["false"]'
"$SW" "$T/allfail.json" --out-dir "$T/res_af" > /dev/null 2> "$T/allfail.err"; rc=$?
[ $rc -eq 1 ] && grep -q '^sweep: every run failed' "$T/allfail.err" && ok spec_every_run_failed_exit_1 \
  || fail spec_every_run_failed_exit_1 "rc $rc: $(tail -2 "$T/allfail.err" | tr '\n' ' ')"

# ---- the runner launches argv arrays only --------------------------------------------------------------
# no shell anywhere in the programs: the only exec is sweep_launch's execvpe of an argv array
shells=$(grep -nE '\b(system|popen|execl|execlp|execle|execv|execve)[[:space:]]*\(|"/bin/sh"|"sh", *"-c"' core/*/*.c bench/*.c kernels/cpu/*.c)
execs=$(grep -lE '\bexecvpe[[:space:]]*\(' core/*/*.c bench/*.c)
if [ -z "$shells" ] && [ "$execs" = core/sweep/launch.c ]; then ok runner_no_shell_in_code
else fail runner_no_shell_in_code "shell or other exec calls: $shells $execs"; fi
# shell syntax in launcher and extra_args elements reaches the programs as data: env sets a variable
# whose value is the literal text (the run is ok), and train rejects the backtick text in extra_args as
# an unexpected argument, which the runner finds before it launches anything (exit 2, the key named)
spec "$T/shell.json" '"shell"' ', "launcher": ["env", "MESHSWEEP_X=$(touch '"$T"'/pwned1); touch '"$T"'/pwned2", "mpirun", "-np", "{world}"]'
"$SW" "$T/shell.json" --out-dir "$T/shres" > /dev/null 2> "$T/shell.err"; rc=$?
S=$(ls -d "$T/shres/shell"/*/ 2>/dev/null | head -1)
if [ $rc -eq 0 ] && [ -n "$S" ] && ! ls "$T"/pwned* >/dev/null 2>&1 \
   && "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["status"]=="ok" else 1)' "$S/runs/1x2.json"; then ok runner_shell_syntax_in_launcher_is_data
else fail runner_shell_syntax_in_launcher_is_data "rc $rc, pwned: $(ls "$T"/pwned* 2>&1 | head -1): $(tail -2 "$T/shell.err" | tr '\n' ' ')"; fi
spec "$T/shell2.json" '"shell2"' ', "extra_args": ["`touch '"$T"'/pwned3`"]'
expect_exit runner_shell_syntax_in_extra_args_is_data 2 "^sweep: .*: extra_args: build/train refuses cell 1x2: unexpected argument '\`touch $T/pwned3\`'" -- "$SW" "$T/shell2.json" --out-dir "$T/shres2"
if ls "$T"/pwned* >/dev/null 2>&1 || [ -e "$T/shres2" ]; then fail runner_shell_syntax_extra_args_nothing_run "$(ls "$T"/pwned* "$T/shres2" 2>&1 | head -2)"; fi
# ---- build/calibrate's inputs (issue 40 D, 7): refused before anything is measured or written -----------
# (a copy of the program in a scratch folder: its default machine file is $T/cbin/machines/HOST-Nc.json)
CAL=$BUILD/calibrate
mkdir -p "$T/cbin" && cp "$CAL" "$T/cbin/calibrate"
expect_exit calibrate_one_rank_default_file 2 "^calibrate: one rank measures no collectives: this host's machine file .*/cbin/machines/.*\.json would lose them" -- \
  "$T/cbin/calibrate" --quick
if ls "$T"/cbin/machines/*.json* >/dev/null 2>&1; then fail calibrate_one_rank_default_file_untouched "$(ls "$T"/cbin/machines)"
else ok calibrate_one_rank_default_file_untouched; fi
if "$T/cbin/calibrate" --quick --no-collectives > /dev/null 2> "$T/cal1.err" \
   && "$PY" -c 'import json,sys,glob; d=json.load(open(glob.glob(sys.argv[1])[0])); sys.exit(0 if d["sources"]["comm.collectives"].startswith("none measured") else 1)' "$T/cbin/machines/*.json"; then
  ok calibrate_one_rank_no_collectives_says_so
else fail calibrate_one_rank_no_collectives_says_so "$(tail -2 "$T/cal1.err")"; fi
# --out unwritable: one line (with --verbose 1 a measurement would print more), nothing written
touch "$T/plainfile"
expect_exit calibrate_out_missing_folder 2 "^calibrate: --out: cannot write $T/nodir/m.json: folder $T/nodir" -- \
  "$CAL" --quick --verbose 1 --model tiny --out "$T/nodir/m.json"
expect_exit calibrate_out_folder_is_file 2 "^calibrate: --out: cannot write $T/plainfile/m.json" -- \
  "$CAL" --quick --verbose 1 --out "$T/plainfile/m.json"
expect_exit calibrate_out_is_folder 2 "^calibrate: --out: cannot write $T: it names a folder" -- "$CAL" --quick --verbose 1 --out "$T"
expect_exit calibrate_check_out_missing_folder 2 "^calibrate: --out: cannot write $T/nodir/c.json" -- \
  "$CAL" --check "$T/calib.json" --out "$T/nodir/c.json"
# under mpirun every rank exits 2 and only rank 0 says why (mpirun adds its own report of the exit)
timeout 120 "${MPIRUN[@]}" -np 2 "$CAL" --quick --verbose 1 --out "$T/nodir/m.json" > /dev/null 2> "$T/calmpi.err"; rc=$?
n=$(grep -c '^calibrate: ' "$T/calmpi.err")
if [ $rc -eq 2 ] && [ "$n" -eq 1 ] && grep -q '^calibrate: --out: cannot write' "$T/calmpi.err"; then ok calibrate_out_unwritable_every_rank
else fail calibrate_out_unwritable_every_rank "exit $rc, $n calibrate lines: $(head -c 300 "$T/calmpi.err")"; fi
[ -e "$T/nodir" ] && fail calibrate_out_nothing_written "$T/nodir was made"
# --spec: zero specs, or an empty name between commas
expect_exit calibrate_spec_lone_comma 2 "^calibrate: --spec ',': an empty name" -- "$CAL" --quick --spec , --out "$T/m.json"
expect_exit calibrate_spec_trailing_comma 2 "^calibrate: --spec 'sweeps/smoke.json,': an empty name" -- \
  "$CAL" --quick --spec sweeps/smoke.json, --out "$T/m.json"
expect_exit calibrate_spec_doubled_comma 2 "^calibrate: --spec 'sweeps/smoke.json,,sweeps/smoke.json': an empty name" -- \
  "$CAL" --quick --spec sweeps/smoke.json,,sweeps/smoke.json --out "$T/m.json"
expect_exit calibrate_spec_empty 2 '^calibrate: option --spec: empty value' -- "$CAL" --quick --spec '' --out "$T/m.json"
# --build: a newline or a control character would be written into the file
expect_exit calibrate_build_newline 2 '^calibrate: --build: a newline or control character' -- "$CAL" --quick --build $'v1\nx' --out "$T/m.json"
expect_exit calibrate_build_control 2 '^calibrate: --build: a newline or control character' -- "$CAL" --quick --build $'v1\tx' --out "$T/m.json"
[ -e "$T/m.json" ] && fail calibrate_bad_input_nothing_written "$T/m.json was written"
exit 0
