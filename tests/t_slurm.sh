#!/usr/bin/env bash
# tests/t_slurm.sh — meshsweep under a real Slurm (Debian's slurm-wlm) on this machine: munge, slurmctld
# and two slurmd nodes, each slurmd on a host of its own (tests/hosts.sh: network, UTS and mount
# namespaces, a veth pair), so that Open MPI sees two hosts and keeps its shared-memory transport
# between the ranks of one node. Everything runs as a user of a cluster would run it:
#   - `srun --mpi=pmix` starts a 2x4 run across the two nodes (4 ranks each, a TP group per node),
#     and `mpirun` inside an allocation (`salloc`) does too: the losses are those of the same mesh on
#     one host and of the 1-rank run; the record names the job, step, nodes, the source of the
#     local rank and the MPI transports;
#   - a data file missing on one node ends the step with the one line train prints under mpirun;
#   - a rank SIGKILLed on one node ends the step (every rank out, no hang) and the sweep records the
#     run `failed`; Ctrl-C (SIGINT) to the sweep runner inside an allocation stops srun at once;
#   - the example batch script (sweeps/slurm/sweep.sbatch with sweeps/slurm/cpu-2nodes.json) is
#     submitted with sbatch; scancel during its second run stops it cleanly (exit 130, the finished
#     run kept, nothing half-written, no rank left), and submitting it again resumes the folder: the
#     finished run is kept byte for byte, the interrupted one runs, the losses are the references'.
# Tolerance: the nodes are this machine (same binary, same OpenBLAS kernels), but the comparisons allow
# what rounding allows across meshes: relative 1e-5 on losses and gradient norms over the spec's 10
# steps, the bound t_mesh holds every mesh to against the 1-rank run (fp32 partial sums added in another
# order differ by a few ulps, ~3e-7 after 10 steps here). Hosts that picked other BLAS kernels would
# differ by as much; so the tolerance holds on a real cluster too.
# Every process it started (daemons, steps, ranks) is killed and every file removed on exit (a trap).
# Skips when it is not root (namespaces) or when Slurm, munge or Slurm's PMIx plugin are not installed
# (make deps installs them), saying which.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/hosts.sh"
# like t_multihost: remote ranks get a launcher's environment, not the sanitizer build's options
case "$BUILD" in *san*) skip slurm "runs in the plain suite (not a sanitizer build)"; exit 0;; esac
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TRAIN="$ROOT/$BUILD/train" SWEEP="$ROOT/$BUILD/sweep"
DATA="$ROOT/build/data/kjv/train.bin"
SPEC="$ROOT/sweeps/slurm/cpu-2nodes.json" SBATCH_SCRIPT="$ROOT/sweeps/slurm/sweep.sbatch"
[ -x "$TRAIN" ] && [ -x "$SWEEP" ] || { fail slurm_built "$TRAIN or $SWEEP missing (make)"; exit 1; }
[ -f "$DATA" ] || { fail slurm_data "$DATA missing (make data)"; exit 1; }
hosts_need || { skip slurm "$HOSTS_ERR"; exit 0; }
for p in munged slurmctld slurmd srun sbatch salloc scancel scontrol sinfo; do
  command -v $p >/dev/null || { skip slurm "$p not installed (make deps installs slurmctld slurmd slurm-client munge libpmix-dev)"; exit 0; }
done

T=$(mktemp -d)
HA="slurm-a-$$" HB="slurm-b-$$" IPA=10.214.0.1 IPB=10.214.0.2
cleanup() {
  hosts_cleanup
  # what the ranks of a killed step leave in the shared /tmp (Open MPI's session folders of these hosts)
  rm -rf "/tmp/ompi.$HA".* "/tmp/ompi.$HB".* "$T"
}
trap cleanup EXIT
# srun with a configuration whose controller is not running (port 1: refused at once): the sweep stops at
# its first launch and says srun cannot reach a controller (exit 2), instead of failing every mesh
printf 'ClusterName=none\nSlurmctldHost=localhost\nSlurmctldPort=1\nNodeName=n1 CPUs=1\nPartitionName=p Nodes=n1 Default=YES\n' > "$T/none.conf"
(cd "$ROOT" && SLURM_CONF="$T/none.conf" timeout 300 "$SWEEP" "$SPEC" --out-dir "$T/nores") > /dev/null 2> "$T/none.err"; rc=$?
if [ $rc -eq 2 ] && grep -q '^sweep: stopped: srun cannot reach a Slurm controller (srun: .*Unable to contact slurm controller' "$T/none.err" \
   && ! grep -q '^\[2/2\]' "$T/none.err"; then ok slurm_no_controller_stops_sweep
else fail slurm_no_controller_stops_sweep "rc $rc: $(tail -3 "$T/none.err" | tr '\n' ' ')"; fi
export SLURM_CONF="$T/slurm.conf"
PY="command /usr/bin/python3"
# every launch is under a timeout (a hang is a FAIL, never a stuck suite), generous for a loaded machine
TO=300
# Slurm's fences as a ring for this suite's own srun steps, as the sweep runner sets for its launches
# (core/sweep/runner.c; docs/cluster.md): with the tree, Slurm 22.05 + Open MPI 4.1 let ranks leave MPI_Init
# while a rank on the other node was still in its modex fence, and their first message killed it (SIGSEGV).
# The runner's launches below run without it (env -u), so that they get the runner's own.
export SLURM_PMIX_FENCE=ring
# the seconds since the start, in the log (where the time goes)
phase() { echo "# $(( $(date +%s) - T0 )) s: $*"; }
T0=$(date +%s)
wait_for() { local until=$(( $(date +%s) + $1 )); shift; until "$@"; do [ "$(date +%s)" -ge "$until" ] && return 1; sleep 0.2; done; }
log_has() { grep -q -- "$2" "$1" 2>/dev/null; }
# commands of a user on the first node (the login node too): Slurm's clients, mpirun, the runner
on_a() { hosts_exec "$HA" "$@"; }
# the train ranks running on a host, and on either
ranks_on() {
  local ns p; ns=$(readlink "/proc/${HOST_PID[$1]}/ns/net")
  for p in $(pgrep -x train); do [ "$(readlink "/proc/$p/ns/net" 2>/dev/null)" = "$ns" ] && echo "$p"; done
}
# both nodes idle: the last job is gone, the next one starts at once (the scheduler does not wait)
idle() { [ "$(on_a sinfo -h -o '%D %T' 2>/dev/null)" = "2 idle" ]; }
no_ranks() { [ -z "$(ranks_on "$HA")$(ranks_on "$HB")" ]; }
job_state() { on_a scontrol -o show job "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }
job_done() { case "$(job_state "$1")" in COMPLETED|CANCELLED|FAILED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) return 0;; esac; return 1; }
latest() { ls -d "$1"/*/ 2>/dev/null | sort | tail -1 | sed 's:/$::'; }
# the last lines of a run's log (what its ranks and srun printed), for a FAIL line: the cause of a run
# that failed is then in the suite's summary, not only in a folder the trap removes
run_log() { printf 'runs/%s.log: ' "$(basename "$1" .log)"; grep -v '^\s*$' "$1" 2>/dev/null | tail -4 | tr '\n' ' ' | head -c 500; }
# every JSON below DIR complete, no temp file of a writer left
all_complete() {
  local f
  while IFS= read -r f; do
    $PY -c 'import json,sys; json.load(open(sys.argv[1]))' "$f" 2>/dev/null || { echo "incomplete $f"; return 1; }
  done < <(find "$1" -name '*.json')
  if find "$1" \( -name '*.tmp*' -o -name '.*.train.json' \) | grep -q .; then echo "temp files: $(find "$1" -name '*.tmp*' -o -name '.*.train.json' | head -3)"; return 1; fi
}

# ---------------------------------------------------------------- the two hosts and the cluster
mkdir -p "$T/munge" "$T/state" "$T/spool" "$T/log" "$T/nodetmp/$HA" "$T/nodetmp/$HB" "$T/miss" "$T/b-miss"
cp "$DATA" "$T/miss/train.bin"
printf '127.0.0.1 localhost\n%s %s\n%s %s\n' "$IPA" "$HA" "$IPB" "$HB" > "$T/hosts"
hosts_start "$HA" "$T/hosts" "$T" || { skip slurm "$HOSTS_ERR"; exit 0; }
# on B the data folder $T/miss is empty: a file present on one node only
hosts_start "$HB" "$T/hosts" "$T" "&& mount --bind '$T/b-miss' '$T/miss'" || { skip slurm "$HOSTS_ERR"; exit 0; }
if ! hosts_link "$HA" "$IPA" "$HB" "$IPB" slv; then
  case "$HOSTS_ERR" in veth*) skip slurm "$HOSTS_ERR"; exit 0;; *) fail slurm_network "$HOSTS_ERR"; exit 1;; esac
fi

# munge with a key of its own (the machine's /etc/munge is not touched), on node A; its socket is a
# file, reached from B as from A
head -c 1024 /dev/urandom > "$T/munge/munge.key"; chmod 400 "$T/munge/munge.key"
on_a munged -F --force --socket="$T/munge/sock" --key-file="$T/munge/munge.key" --pid-file="$T/munge/pid" \
  --log-file="$T/log/munged.log" --seed-file="$T/munge/seed" </dev/null >"$T/log/munged.out" 2>&1 &
# several slurmd on one machine: %n (the node name) in their spool, pid, log and temporary folders
# (TmpFS: Slurm's PMIx plugin makes its per-step folder there, the same name on every node);
# config_overrides: a node declares 4 CPUs, more than this machine may have; one task per CPU
cat > "$SLURM_CONF" <<CONF
ClusterName=meshsweep-test
SlurmctldHost=$HA($IPA)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$T/munge/sock
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
SlurmdParameters=config_overrides
SlurmctldPidFile=$T/slurmctld.pid
SlurmctldLogFile=$T/log/slurmctld.log
StateSaveLocation=$T/state
SlurmdPidFile=$T/slurmd.%n.pid
SlurmdSpoolDir=$T/spool/%n
SlurmdLogFile=$T/log/slurmd.%n.log
TmpFS=$T/nodetmp/%n
KillWait=10
InactiveLimit=0
NodeName=$HA NodeAddr=$IPA CPUs=4 State=UNKNOWN
NodeName=$HB NodeAddr=$IPB CPUs=4 State=UNKNOWN
PartitionName=test Nodes=$HA,$HB Default=YES MaxTime=INFINITE State=UP
CONF
# Slurm's PMIx plugin loads the unversioned libpmix.so (libpmix-dev)
if ! srun --mpi=list 2>&1 | grep -q pmix || ! ldconfig -p | grep -q 'libpmix\.so '; then
  skip slurm "Slurm's PMIx plugin or libpmix.so is missing (make deps installs slurm-wlm-basic-plugins, libpmix-dev)"; exit 0
fi
wait_for 20 test -S "$T/munge/sock" || { fail slurm_munge "munged did not start: $(tail -2 "$T/log/munged.log" "$T/log/munged.out" 2>/dev/null | tr '\n' ' ')"; exit 1; }
on_a slurmctld -D -i </dev/null >"$T/log/slurmctld.out" 2>&1 &
hosts_exec "$HA" slurmd -D -N "$HA" </dev/null >"$T/log/slurmd.a.out" 2>&1 &
hosts_exec "$HB" slurmd -D -N "$HB" </dev/null >"$T/log/slurmd.b.out" 2>&1 &
if wait_for 60 idle; then ok slurm_cluster_up
else fail slurm_cluster_up "nodes not idle after 60 s: $(on_a sinfo -h 2>&1 | head -2 | tr '\n' ' ') $(tail -2 "$T"/log/*.log | tr '\n' ' ' | head -c 400)"; exit 1; fi
names=$(on_a timeout 60 srun -N2 -n2 hostname 2>&1 | sort | tr '\n' ' ')
[ "$names" = "$(printf '%s\n%s\n' "$HA" "$HB" | sort | tr '\n' ' ')" ] && ok slurm_nodes_are_hosts \
  || fail slurm_nodes_are_hosts "srun -N2 hostname: $names"
NODELIST=$(on_a sinfo -h -o '%N')

# ---------------------------------------------------------------- the references, on this machine
phase "references"
# the options of the example spec: its runs and these are the same runs
read -r S_MODEL S_SEQ S_STEPS S_LR S_GB S_NAME S_WORLD S_MESHES <<<"$($PY -c '
import json, sys; d = json.load(open(sys.argv[1]))
print(d["model"], d["seq_len"], d["steps"], d["lr"], d["global_batch"], d["name"], d["world"], ",".join(d["meshes"]))' "$SPEC")"
[ "$S_WORLD,$S_MESHES,$S_GB" = "8,2x4,8x1,8" ] || { fail slurm_example_spec "$SPEC: world $S_WORLD, meshes $S_MESHES, global batch $S_GB: this suite expects 8, 2x4,8x1, 8"; exit 1; }
COMMON=(--model "$S_MODEL" --seq-len "$S_SEQ" --steps "$S_STEPS" --lr "$S_LR" --log-every 100)
must slurm_reference_1_rank "$TRAIN" "${COMMON[@]}" --data "$DATA" --batch-size 8 --out "$T/ref1.json" 2>/dev/null
must slurm_reference_one_host_2x4 timeout $TO "${MPIRUN[@]}" -np 8 "$TRAIN" "${COMMON[@]}" --data "$DATA" --tp 4 --batch-size 4 \
  --out "$T/one-2x4.json" >/dev/null 2>&1
compare() { # NAME REF OTHER
  /usr/bin/python3 "$ROOT/tests/tools/compare.py" runs "$1" "$2" "$3" 1e-5 1e-5
}
# env of a record: ranks by host, the job, the local rank's source, the transports
check_env() { # NAME RECORD LOCAL-RANK-SOURCES(|) STEP(1: a step id is set)
  /usr/bin/python3 - "$@" "$HA" "$HB" "$NODELIST" <<'PY'
import json, re, sys
name, path, sources, want_step, a, b, nodelist = sys.argv[1:]
try: e = json.load(open(path))["env"]
except Exception as x: print(f"FAIL {name}: {x}"); sys.exit(0)
why = []
if e.get("ranks_by_host") != {a: [0, 1, 2, 3], b: [4, 5, 6, 7]}: why.append(f"ranks_by_host {e.get('ranks_by_host')}")
if e.get("tp_spans_hosts") is not False: why.append(f"tp_spans_hosts {e.get('tp_spans_hosts')}")
s = e.get("slurm") or {}
if not re.fullmatch(r"\d+", str(s.get("job_id"))): why.append(f"slurm.job_id {s.get('job_id')}")
if want_step == "1" and not re.fullmatch(r"\d+", str(s.get("step_id"))): why.append(f"slurm.step_id {s.get('step_id')}")
if s.get("job_nodelist") != nodelist: why.append(f"slurm.job_nodelist {s.get('job_nodelist')}, want {nodelist}")
if e.get("local_rank_from") not in sources.split("|"): why.append(f"local_rank_from {e.get('local_rank_from')}, want {sources}")
btl = (e.get("mpi_transports") or {}).get("btl") or []
# shared memory between the ranks of a node, TCP between the nodes: nothing turned off
if "vader" not in btl or "tcp" not in btl: why.append(f"mpi_transports {e.get('mpi_transports')}")
print(f"FAIL {name}: " + "; ".join(why) if why else f"ok {name}")
PY
}

# ---------------------------------------------------------------- srun --mpi=pmix across the nodes
phase "srun"
# 4 tasks per node in block order: ranks 0-3 (one TP group) on A, 4-7 on B
wait_for 60 idle
if on_a timeout $TO srun --mpi=pmix -N2 --ntasks-per-node=4 -n 8 "$TRAIN" "${COMMON[@]}" --data "$DATA" --tp 4 --batch-size 4 \
     --out "$T/srun-2x4.json" >"$T/srun-2x4.log" 2>&1; then
  ok slurm_srun_2x4
  compare slurm_srun_2x4_equals_one_host "$T/one-2x4.json" "$T/srun-2x4.json"
  compare slurm_srun_2x4_equals_1_rank "$T/ref1.json" "$T/srun-2x4.json"
  # srun's own number for the local rank (Open MPI's if it sets one under srun), not MPI's count
  check_env slurm_srun_record_env "$T/srun-2x4.json" "SLURM_LOCALID|OMPI_COMM_WORLD_LOCAL_RANK" 1
else
  fail slurm_srun_2x4 "exit $?: $(grep -v '^\s*$' "$T/srun-2x4.log" | tail -3 | tr '\n' ' ')"
fi

# ---------------------------------------------------------------- mpirun inside an allocation
phase "mpirun in an allocation"
# Open MPI reads the allocation (no hostfile) and starts its daemons through srun
wait_for 60 idle
if on_a timeout $TO env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 salloc -N2 --ntasks-per-node=4 \
     mpirun -np 8 "$TRAIN" "${COMMON[@]}" --data "$DATA" --tp 4 --batch-size 4 --out "$T/mpirun-2x4.json" >"$T/mpirun-2x4.log" 2>&1; then
  ok slurm_mpirun_in_allocation_2x4
  compare slurm_mpirun_in_allocation_equals_one_host "$T/one-2x4.json" "$T/mpirun-2x4.json"
  # the ranks inherit SLURM_LOCALID of the daemons' step (0 everywhere): Open MPI's number is taken
  check_env slurm_mpirun_record_env "$T/mpirun-2x4.json" "OMPI_COMM_WORLD_LOCAL_RANK" 0
else
  fail slurm_mpirun_in_allocation_2x4 "exit $?: $(grep -v '^\s*$' "$T/mpirun-2x4.log" | tail -3 | tr '\n' ' ')"
fi

# ---------------------------------------------------------------- a file missing on one node
phase "missing file"
# exit 2 and the one line train gives under mpirun: the rank and host, the file; no record
wait_for 60 idle
on_a timeout $TO srun --mpi=pmix -N2 --ntasks-per-node=4 -n 8 "$TRAIN" "${COMMON[@]}" --data "$T/miss/train.bin" --tp 4 \
  --batch-size 4 --out "$T/miss.json" >"$T/miss.out" 2>"$T/miss.err"; rc=$?
n=$(grep -c '^train:' "$T/miss.err")
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then fail slurm_data_missing_on_one_node "hung (killed after $TO s)"
elif [ "$rc" -ne 2 ] || [ "$n" -ne 1 ] || ! grep -qE "^train: rank [4-7] on $HB: .*$T/miss/train.bin" "$T/miss.err"; then
  fail slurm_data_missing_on_one_node "exit $rc, $n train lines: $(grep -v '^\s*$' "$T/miss.err" | head -3 | tr '\n' ' ')"
  sed 's/^/# miss.err: /' "$T/miss.err" | head -60   # all of it in the log (a crash's backtrace), for whoever reads it
elif [ -e "$T/miss.json" ]; then fail slurm_data_missing_on_one_node "a record was written"
else ok slurm_data_missing_on_one_node; fi

# ---------------------------------------------------------------- the sweep runner inside an allocation
# the example spec, one long 2x4 run with absolute paths, under `salloc ... build/sweep`
$PY - "$SPEC" "$T/long.json" "$DATA" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d.update(name="slurm-long", meshes=["2x4"], steps=100000, data=sys.argv[3])
json.dump(d, open(sys.argv[2], "w"), indent=1)
PY
start_long() { # OUT-DIR: the runner in an allocation, in the background; waits for the run's first step
  wait_for 60 idle
  on_a timeout $TO env -u SLURM_PMIX_FENCE salloc -N2 --ntasks-per-node=4 "$SWEEP" "$T/long.json" --out-dir "$1" >"$1.out" 2>&1 &
  LONG=$!
  # until its first step, or until the runner is over (a run that failed at its start: no use waiting)
  wait_for $((TO - 60)) long_started_or_over "$1"
  long_started "$1"
}
long_started() { log_has "$(latest "$1/slurm-long")/runs/2x4.log" 'train: step 1/'; }
long_started_or_over() { long_started "$1" || ! kill -0 "$LONG" 2>/dev/null; }
# a rank SIGKILLed on node B: the step ends with every rank out, the run is recorded failed, the sweep goes on
# (and, its one run failed, exits 1)
phase "a rank killed"
if start_long "$T/kill"; then
  victim=$(ranks_on "$HB" | head -1)
  kill -9 "$victim"
  wait "$LONG"; rc=$?
  D=$(latest "$T/kill/slurm-long")
  why=""
  [ "$rc" -eq 124 ] && why="$why hung (killed after $TO s);"
  # its one run failed: a sweep whose every run failed exits 1
  [ "$rc" -eq 1 ] || [ "$rc" -eq 124 ] || why="$why runner exit $rc (want 1);"
  wait_for 20 no_ranks || why="$why ranks left: $(ranks_on "$HA") $(ranks_on "$HB");"
  $PY -c 'import json,sys; r=json.load(open(sys.argv[1])); sys.exit(0 if r["status"]=="failed" and ("signal" in r["error"] or "code" in r["error"]) else 1)' \
    "$D/runs/2x4.json" 2>/dev/null || why="$why record: $(head -c 300 "$D/runs/2x4.json" 2>/dev/null | tr '\n' ' ');"
  msg=$(all_complete "$D") || why="$why $msg;"
  [ -z "$why" ] && ok slurm_rank_killed_on_one_node_run_failed || fail slurm_rank_killed_on_one_node_run_failed "$why"
else
  fail slurm_rank_killed_on_one_node_run_failed "the run never started: $(tail -3 "$T/kill.out" | tr '\n' ' ') $(run_log "$(latest "$T/kill/slurm-long")/runs/2x4.log")"
  kill "$LONG" 2>/dev/null; wait "$LONG"
fi
# Ctrl-C to the runner (the terminal signals the runner; srun is in a process group of its own): the
# runner forwards SIGTERM, which stops srun's step (srun's SIGINT would only print the tasks' state)
phase "SIGINT to the runner"
if start_long "$T/int"; then
  for p in $(pgrep -f -- "--out-dir $T/int"); do [ "$(cat "/proc/$p/comm" 2>/dev/null)" = sweep ] && kill -INT "$p"; done
  wait "$LONG"; rc=$?
  D=$(latest "$T/int/slurm-long")
  why=""
  [ "$rc" -eq 130 ] || why="$why exit $rc, want 130;"
  grep -q 'forwarding SIGTERM' "$D/runs/2x4.log" || why="$why no SIGTERM forwarded: $(grep '\[sweep\]' "$D/runs/2x4.log" | head -2 | tr '\n' ' ');"
  grep -q 'one more within' "$D/runs/2x4.log" && why="$why srun got SIGINT;"
  [ -e "$D/runs/2x4.json" ] && why="$why a record of the interrupted run;"
  wait_for 20 no_ranks || why="$why ranks left;"
  msg=$(all_complete "$D") || why="$why $msg;"
  [ -z "$why" ] && ok slurm_sigint_to_runner_stops_srun || fail slurm_sigint_to_runner_stops_srun "$why"
else
  fail slurm_sigint_to_runner_stops_srun "the run never started: $(tail -3 "$T/int.out" | tr '\n' ' ') $(run_log "$(latest "$T/int/slurm-long")/runs/2x4.log")"
  kill "$LONG" 2>/dev/null; wait "$LONG"
fi

# ---------------------------------------------------------------- the example batch script
# submitted as a user would, from the checkout; results under $T/results
submit() {
  wait_for 60 idle
  (cd "$ROOT" && on_a env -u SLURM_PMIX_FENCE MESHSWEEP_RESULTS="$T/results" MESHSWEEP_SWEEP="$SWEEP" \
     sbatch --parsable --output="$T/job-%j.out" "$SBATCH_SCRIPT" "$SPEC")
}
J1=$(submit 2>"$T/sbatch1.err") || { fail slurm_sbatch "sbatch: $(head -c 300 "$T/sbatch1.err")"; exit 1; }
R8=""
first_done_second_started() { D=$(latest "$T/results/$S_NAME") && [ -s "$D/runs/2x4.json" ] && log_has "$D/runs/8x1.log" 'train: step 1/'; }
first_done_second_started_or_job_over() { first_done_second_started || job_done "$J1"; }
phase "sbatch job $J1"
# polled often: the 8x1 run has 9 more steps once its first is logged
end=$(( $(date +%s) + TO ))
until first_done_second_started_or_job_over || [ "$(date +%s)" -ge "$end" ]; do sleep 0.05; done
if first_done_second_started; then
  # hold the ranks where they are (scancel sends SIGCONT before SIGTERM), so that the cancel finds the
  # run in progress however fast it is
  for p in $(ranks_on "$HA") $(ranks_on "$HB"); do kill -STOP "$p"; done
  # the runner's ranks got Slurm's ring fence from the runner (the job was submitted without it)
  fence=$(for p in $(ranks_on "$HA") $(ranks_on "$HB"); do tr '\0' '\n' < "/proc/$p/environ" | grep '^SLURM_PMIX_FENCE=' || echo none; done | sort | uniq -c | tr '\n' ' ')
  [ "$(echo $fence)" = "8 SLURM_PMIX_FENCE=ring" ] && ok slurm_runner_sets_ring_fence || fail slurm_runner_sets_ring_fence "the 8x1 ranks' SLURM_PMIX_FENCE: $fence"
  phase "scancel $J1 in its 8x1 run"
  on_a scancel "$J1"
  wait_for 60 job_done "$J1"
  R8=$D
fi
if [ -z "$R8" ]; then
  fail slurm_scancel_stops_cleanly "job $J1 ($(job_state "$J1")) never reached the 8x1 run: $(tail -3 "$T/job-$J1.out" 2>/dev/null | tr '\n' ' ') $(run_log "$(latest "$T/results/$S_NAME")/runs/8x1.log")"
  on_a scancel "$J1" 2>/dev/null
else
  why=""
  [ "$(job_state "$J1")" = CANCELLED ] || why="$why job state $(job_state "$J1");"
  grep -q '^sweep: interrupted (SIGTERM)' "$T/job-$J1.out" || why="$why no 'interrupted (SIGTERM)': $(tail -2 "$T/job-$J1.out" | tr '\n' ' ');"
  [ -e "$R8/runs/8x1.json" ] && why="$why a record of the interrupted run;"
  [ -e "$R8/summary.json" ] && why="$why summary written;"
  $PY -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["status"]=="ok" else 1)' "$R8/runs/2x4.json" 2>/dev/null || why="$why 2x4 lost;"
  msg=$(all_complete "$R8") || why="$why $msg;"
  wait_for 20 no_ranks || why="$why ranks left;"
  [ -z "$why" ] && ok slurm_scancel_stops_cleanly || fail slurm_scancel_stops_cleanly "$why"
  # the same script again: the folder is resumed, 2x4 is kept as it was, 8x1 runs
  phase "job $J1 over"
  before=$(sha256sum < "$R8/runs/2x4.json")
  phase "sbatch again"
  J2=$(submit 2>"$T/sbatch2.err") || fail slurm_sbatch_resume "sbatch: $(head -c 300 "$T/sbatch2.err")"
  wait_for $TO job_done "$J2" || on_a scancel "$J2"
  echo "# job $J2: $(on_a scontrol -o show job "$J2" | grep -oE '(Submit|Start|End)Time=[^ ]*' | tr '\n' ' ')"
  why=""
  [ "$(job_state "$J2")" = COMPLETED ] || why="$why job state $(job_state "$J2");"
  grep -q "resuming $R8" "$T/job-$J2.out" || why="$why did not resume $R8;"
  grep -q '2x4  run b=4 \.\.\. skipped' "$T/job-$J2.out" || why="$why 2x4 not skipped;"
  [ "$(sha256sum < "$R8/runs/2x4.json")" = "$before" ] || why="$why 2x4.json changed;"
  [ "$(ls -d "$T/results/$S_NAME"/*/ | wc -l)" -eq 1 ] || why="$why a second results folder;"
  $PY -c 'import json,sys; sys.exit(0 if [m["status"] for m in json.load(open(sys.argv[1]))["meshes"]]==["ok","ok"] else 1)' \
    "$R8/summary.json" 2>/dev/null || why="$why summary not ok, ok;"
  msg=$(all_complete "$R8") || why="$why $msg;"
  [ -z "$why" ] && ok slurm_sbatch_rerun_resumes || fail slurm_sbatch_rerun_resumes "$why: $(tail -3 "$T/job-$J2.out" | tr '\n' ' ') $(run_log "$R8/runs/8x1.log")"
  compare slurm_sbatch_2x4_equals_one_host "$T/one-2x4.json" "$R8/runs/2x4.json"
  compare slurm_sbatch_8x1_equals_1_rank "$T/ref1.json" "$R8/runs/8x1.json"
  check_env slurm_sbatch_record_env "$R8/runs/8x1.json" "SLURM_LOCALID|OMPI_COMM_WORLD_LOCAL_RANK" 1
  /usr/bin/python3 - "$R8/runs/2x4.json" "$R8/runs/8x1.json" "$J1" "$J2" <<'PY'
import json, sys
a, b = (json.load(open(p))["env"]["slurm"]["job_id"] for p in sys.argv[1:3])
ok = (a, b) == (sys.argv[3], sys.argv[4])
print("ok slurm_sbatch_records_name_their_jobs" if ok else f"FAIL slurm_sbatch_records_name_their_jobs: job ids {a}, {b}; want {sys.argv[3]}, {sys.argv[4]}")
PY
fi

# ---------------------------------------------------------------- nothing left behind
phase "cleanup"
cleanup; trap - EXIT
left=$(pgrep -f -- "$T/" | grep -v "^$$\$" | head -3)
[ -z "$left" ] && [ ! -e "$T" ] && ok slurm_cleanup || fail slurm_cleanup "processes left: $left"
