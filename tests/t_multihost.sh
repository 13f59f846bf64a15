#!/usr/bin/env bash
# tests/t_multihost.sh — two hosts on one machine: two Linux network namespaces joined by a veth pair
# (10.213.0.1 and .2, nothing else reachable from them), each with its own host name (UTS namespace),
# mount namespace, /etc/hosts and /dev/shm. Open MPI starts the second host's ranks through its
# remote-shell agent (plm_rsh_agent), here a small script that runs the command inside the other
# namespaces with a clean environment, as ssh would on a real second machine; a hostfile gives each
# host 4 slots. Checks: 2x4 and 8x1 on two hosts give the losses of the same mesh on one host (exactly
# where every host ran the same BLAS kernels, as the records say; to rounding where not) and of the
# 1-rank run; other BLAS kernels on one host are recorded per host and noted; the record maps ranks to hosts; a data file missing on one host, and a
# different data file on one host, end the job with exit 2 and one line naming the rank and host
# (no hang: every run is under a timeout). Everything it made — processes, namespaces (and with them
# the veth pair and the mounts), files — is removed on exit. Prints `skip` when the machine refuses
# namespaces (not root, no unshare/nsenter/ip, or a kernel that says no). The hosts: tests/hosts.sh.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/hosts.sh"
# the remote agent starts the far ranks with a clean environment, so the sanitizer build's options
# and Open MPI leak suppressions would not reach them: this suite runs in the plain build only
case "$BUILD" in *san*) skip multihost "runs in the plain suite (not a sanitizer build: remote ranks get a clean environment)"; exit 0;; esac
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TRAIN="$ROOT/$BUILD/train"
DATA="$ROOT/$BUILD/data/kjv/train.bin"
[ -x "$TRAIN" ] || { fail multihost_built "$TRAIN missing (make)"; exit 1; }
[ -f "$DATA" ] || { fail multihost_data "$DATA missing (make data)"; exit 1; }
hosts_need || { skip multihost "$HOSTS_ERR"; exit 0; }

T=$(mktemp -d)
HA="mhost-a-$$" HB="mhost-b-$$"
cleanup() { hosts_cleanup; rm -rf "$T"; }
trap cleanup EXIT

# the inputs: one data folder everyone has, one that is empty on host B, one whose train.bin differs on B
mkdir -p "$T/data" "$T/miss" "$T/diff" "$T/b-miss" "$T/b-diff" "$T/ompi"
cp "$DATA" "$T/data/train.bin"; cp "$DATA" "$T/miss/train.bin"; cp "$DATA" "$T/diff/train.bin"
# B's differs as another build of the data would (the same size, the tokens shifted by one): the check
# samples blocks, so it finds files that differ throughout, not a single changed byte
{ tail -c +3 "$DATA"; head -c 2 "$DATA"; } > "$T/b-diff/train.bin"
printf '127.0.0.1 localhost\n10.213.0.1 %s\n10.213.0.2 %s\n' "$HA" "$HB" > "$T/hosts"

# one host each (tests/hosts.sh); B mounts its own view of the two special folders (the mounts exist
# in B's mount namespace only and go with it)
hosts_start "$HA" "$T/hosts" "$T" || { skip multihost "$HOSTS_ERR"; exit 0; }
hosts_start "$HB" "$T/hosts" "$T" "&& mount --bind '$T/b-miss' '$T/miss' && mount --bind '$T/b-diff' '$T/diff'" \
  || { skip multihost "$HOSTS_ERR"; exit 0; }
PA=${HOST_PID[$HA]} PB=${HOST_PID[$HB]}
if ! hosts_link "$HA" 10.213.0.1 "$HB" 10.213.0.2 mhv; then
  case "$HOSTS_ERR" in veth*) skip multihost "$HOSTS_ERR"; exit 0;; *) fail multihost_network "$HOSTS_ERR"; exit 1;; esac
fi
[ "$(nsenter -t "$PB" -u hostname)" = "$HB" ] && ok multihost_namespaces || { fail multihost_namespaces "host B is not named $HB"; exit 1; }

# the remote-shell agent: `agent [ssh options] HOST COMMAND...` runs COMMAND in HOST's namespaces with
# a clean environment (what the launcher does not pass on explicitly does not reach the remote ranks)
cat > "$T/agent" <<AGENT
#!/bin/sh
while [ \$# -gt 0 ]; do case "\$1" in -*) shift;; *) break;; esac; done
h=\$1; shift
case "\$h" in $HA) p=$PA;; $HB) p=$PB;; *) echo "agent: unknown host \$h" >&2; exit 1;; esac
exec nsenter -t \$p -n -u -m env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root sh -c "\$*"
AGENT
chmod +x "$T/agent"
printf '%s slots=4\n%s slots=4\n' "$HA" "$HB" > "$T/hostfile"

# mpirun runs on host A; the MCA settings on its command line are passed to the remote side
mh_run() { # -np N ARGS... (train arguments); MAP=node maps round-robin over the hosts
  local np=$2; shift 2
  timeout 120 nsenter -t "$PA" -n -u -m env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    mpirun --hostfile "$T/hostfile" -np "$np" --map-by "${MAP:-slot}" --mca plm_rsh_agent "$T/agent" \
    --mca oob_tcp_if_include 10.213.0.0/24 --mca btl_tcp_if_include 10.213.0.0/24 --mca btl self,vader,tcp \
    --mca mpi_yield_when_idle 1 --mca btl_vader_single_copy_mechanism none --mca orte_tmpdir_base "$T/ompi" \
    -x OPENBLAS_NUM_THREADS=1 "$TRAIN" "$@"
}
# the same meshes on one host (this machine, as the other tests run them)
COMMON=(--model tiny --seq-len 32 --steps 4 --lr 3e-3 --log-every 100)
"$TRAIN" "${COMMON[@]}" --data "$T/data/train.bin" --batch-size 8 --out "$T/ref1.json" 2>"$T/ref1.err" \
  || { fail multihost_reference "1-rank run failed: $(tail -2 "$T/ref1.err")"; exit 1; }

# Bit-identity with the one-host run holds only where every rank runs the same BLAS kernels: OpenBLAS
# picks them by CPU or by OPENBLAS_CORETYPE, and host B's ranks start with a clean environment (as on a
# real cluster), so a variable set here reaches host A's ranks only. The records say which kernels each
# host ran (env.blas_by_host); where they all match the one-host run's, the comparison is exact, else
# it has the tolerance of another summation order in fp32 GEMMs, the one every mesh is held to against
# the 1-rank run (1e-5 relative: docs/semantics.md#fsdp, "to float rounding").
tolerance() { # ONE.json TWO.json: "0" when the kernels match everywhere, else "1e-5"
  /usr/bin/python3 -c '
import json, sys
a, b = (json.load(open(p))["env"] for p in sys.argv[1:3])
cores = {a.get("blas_core")} | {h.get("core") for h in (b.get("blas_by_host") or {}).values()}
print("0" if len(cores) == 1 and not b.get("blas_hosts_differ") and not a.get("blas_hosts_differ") else "1e-5")' "$1" "$2" 2>/dev/null || echo 1e-5
}
for mesh in 2x4 8x1; do
  dp=${mesh%x*} tp=${mesh#*x}
  timeout 120 "${MPIRUN[@]}" -np 8 "$TRAIN" "${COMMON[@]}" --data "$T/data/train.bin" --tp "$tp" --batch-size $((8 / dp)) \
    --out "$T/one-$mesh.json" >"$T/one-$mesh.log" 2>&1 || fail "multihost_one_host_$mesh" "$(tail -3 "$T/one-$mesh.log" | tr '\n' ' ')"
  if mh_run -np 8 "${COMMON[@]}" --data "$T/data/train.bin" --tp "$tp" --batch-size $((8 / dp)) \
       --out "$T/two-$mesh.json" >"$T/two-$mesh.log" 2>&1; then
    ok "multihost_run_$mesh"
    tol=$(tolerance "$T/one-$mesh.json" "$T/two-$mesh.json")
    /usr/bin/python3 "$ROOT/tests/tools/compare.py" runs "multihost_${mesh}_equals_one_host" "$T/one-$mesh.json" "$T/two-$mesh.json" "$tol" "$tol"
    /usr/bin/python3 "$ROOT/tests/tools/compare.py" runs "multihost_${mesh}_equals_1_rank" "$T/ref1.json" "$T/two-$mesh.json" 1e-5 1e-5
  else
    fail "multihost_run_$mesh" "exit $?: $(grep -v '^\s*$' "$T/two-$mesh.log" | tail -3 | tr '\n' ' ')"
  fi
done

# Other kernels on host A on purpose (OPENBLAS_CORETYPE there only, a core every x86-64 CPU runs): the
# record names each host's kernels and says they differ, the first progress line says so, the losses agree
# with the one-host run to the rounding tolerance
without COMMON --steps
"$TRAIN" "${WITHOUT[@]}" --data "$T/data/train.bin" --steps 0 --out "$T/auto.json" 2>/dev/null
AUTO=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["env"]["blas_core"])' "$T/auto.json" 2>/dev/null)
if [ "${OPENBLAS_CORETYPE:-}" != "" ]; then AUTO=$(env -u OPENBLAS_CORETYPE "$TRAIN" "${WITHOUT[@]}" --data "$T/data/train.bin" --steps 0 --out "$T/auto.json" 2>/dev/null; \
  /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["env"]["blas_core"])' "$T/auto.json" 2>/dev/null); fi
FORCED=Nehalem; [ "$AUTO" = Nehalem ] && FORCED=Core2
if OPENBLAS_CORETYPE=$FORCED mh_run -np 8 "${COMMON[@]}" --data "$T/data/train.bin" --tp 4 --batch-size 4 --out "$T/blas.json" >"$T/blas.log" 2>&1; then
  /usr/bin/python3 - "$T/blas.json" "$HA" "$HB" "$FORCED" "$AUTO" <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))["env"]; a, b, forced, auto = sys.argv[2:6]
m = e.get("blas_by_host") or {}
ok = e.get("blas_hosts_differ") is True and m.get(a, {}).get("core") == forced and m.get(a, {}).get("coretype_env") == forced \
     and m.get(b, {}).get("core") == auto and m.get(b, {}).get("coretype_env") is None and "OpenBLAS" in (m.get(b, {}).get("library") or "")
print("ok   multihost_blas_by_host_recorded" if ok else f"FAIL multihost_blas_by_host_recorded: {m!r} differ {e.get('blas_hosts_differ')!r}")
PY
  grep -q '^train: step 1/.* | BLAS kernels differ between ranks' "$T/blas.log" && ok multihost_blas_differ_note \
    || fail multihost_blas_differ_note "$(grep 'step 1/' "$T/blas.log" | head -2)"
  /usr/bin/python3 "$ROOT/tests/tools/compare.py" runs multihost_other_kernels_within_rounding "$T/one-2x4.json" "$T/blas.json" 1e-5 1e-5
else
  fail multihost_blas_run "exit $?: $(grep -v '^\s*$' "$T/blas.log" | tail -3 | tr '\n' ' ')"
fi

# the record maps ranks to hosts: 0-3 on A, 4-7 on B (--map-by slot fills A's 4 slots first)
/usr/bin/python3 - "$T/two-2x4.json" "$HA" "$HB" <<'PY'
import json, sys
def res(name, cond, why): print(("ok   " + name) if cond else ("FAIL %s: %s" % (name, why)))
try: e = json.load(open(sys.argv[1]))["env"]
except Exception as x: res("multihost_ranks_by_host", False, str(x)); sys.exit(0)
a, b = sys.argv[2], sys.argv[3]
m = e.get("ranks_by_host")
res("multihost_ranks_by_host", m == {a: [0, 1, 2, 3], b: [4, 5, 6, 7]}, "env.ranks_by_host %r" % (m,))
res("multihost_tp_in_one_host", e.get("tp_spans_hosts") is False, "env.tp_spans_hosts %r" % (e.get("tp_spans_hosts"),))
c = e.get("cores_by_host")
res("multihost_cores_by_host", isinstance(c, dict) and set(c) == {a, b} and all(isinstance(v, int) and v >= 1 for v in c.values()),
    "env.cores_by_host %r" % (c,))
PY

# a TP group across the hosts (--map-by node alternates hosts) is run, and warned about once
MAP=node mh_run -np 4 "${COMMON[@]}" --data "$T/data/train.bin" --tp 2 --batch-size 4 --out "$T/span.json" >"$T/span.log" 2>&1
if grep -q 'TP group.*spans hosts.*--map-by slot' "$T/span.log" \
   && /usr/bin/python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["env"]["tp_spans_hosts"] is True else 1)' "$T/span.json" 2>/dev/null
then ok multihost_tp_spans_warning; else fail multihost_tp_spans_warning "no warning or env.tp_spans_hosts not true: $(grep -i 'span' "$T/span.log" | head -2)"; fi

# faults on one host only: exit 2, one line from train naming a rank of host B, no hang
fault() { # NAME PATTERN DATA
  mh_run -np 8 "${COMMON[@]}" --data "$3" --tp 2 --batch-size 2 --out "$T/$1.json" >"$T/$1.out" 2>"$T/$1.err"; local rc=$?
  local n; n=$(grep -c '^train:' "$T/$1.err")
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then fail "$1" "hung (killed after 120 s)"
  elif [ "$rc" -ne 2 ] || [ "$n" -ne 1 ] || ! grep -qE "^train: $2" "$T/$1.err"; then
    fail "$1" "exit $rc, $n train lines: $(grep -v '^\s*$' "$T/$1.err" | head -3 | tr '\n' ' ')"
  elif [ -e "$T/$1.json" ]; then fail "$1" "a record was written"
  else ok "$1"; fi
}
fault multihost_data_missing_on_one_host "rank [4-7] on $HB: .*$T/miss/train.bin" "$T/miss/train.bin"
fault multihost_data_differs_on_one_host "--data $T/diff/train.bin differs between ranks: .* on $HA .*; .* on $HB " "$T/diff/train.bin"

# nothing left behind: the holders' namespaces end with them; no rank or orted outlives the test
cleanup; trap - EXIT
left=$(pgrep -f -- "$T/" | grep -v "^$$\$" | head -3)
[ -z "$left" ] && ok multihost_cleanup || fail multihost_cleanup "processes left: $left"
