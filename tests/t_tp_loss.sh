#!/usr/bin/env bash
# tests/t_tp_loss.sh — the vocab-parallel cross-entropy of core/engine/tp.c over 2, 3 and 4 TP ranks with a
# padded vocabulary (tests/test_tp_loss.c against a full-vocabulary double reference; rank 0 reports).
source "$(dirname "$0")/lib.sh"
B="$BUILD/tests/test_tp_loss"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
[ -x "$B" ] || { fail tp_loss_binary "$B missing"; exit 1; }
for np in 2 3 4; do
  timeout 300 "${MPIRUN[@]}" -np $np "$B" > "$T/np$np.log" 2>&1; rc=$?
  [ $rc -eq 0 ] || fail "tp_loss_np${np}_exit" "exit $rc: $(grep -v '^\s*$' "$T/np$np.log" | tail -2 | tr '\n' ' ')"
done
