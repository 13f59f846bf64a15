#!/usr/bin/env bash
# bench/comm_algos.sh — Open MPI coll/tuned algorithm choices against the default decision rules, measured
# with build/commbench on one mesh (default 2x4): each MPI_Allreduce algorithm (which also carries the
# engine's default reduce-scatter, Allreduce + copy) and each MPI_Reduce_scatter_block algorithm
# (--rs-algo native), forced with coll_tuned_use_dynamic_rules=1. Prints one table per run plus a summary
# of busbw per algorithm and size (stdout; markdown). A benchmark on a shared machine: asserts nothing.
# Usage: bash bench/comm_algos.sh   (env: TP=4 W=8 MIN=64K MAX=4M ITERS=10)
set -u
BUILD=${BUILD:-build}
TP=${TP:-4}; W=${W:-8}; MIN=${MIN:-64K}; MAX=${MAX:-4M}; ITERS=${ITERS:-10}
[ -x "$BUILD/commbench" ] || { echo "comm_algos: $BUILD/commbench missing (run make)" >&2; exit 2; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
export OMPI_MCA_mpi_yield_when_idle=1 OPENBLAS_NUM_THREADS=1
MPIRUN=(mpirun --oversubscribe --allow-run-as-root --bind-to none -np "$W")
CB=("$BUILD/commbench" --tp "$TP" --min-bytes "$MIN" --max-bytes "$MAX" --iters "$ITERS" --warmup 2 --memcpy-bytes 64M)
AR_NAMES=(default basic_linear nonoverlapping recursive_doubling ring segmented_ring rabenseifner)
RS_NAMES=(default basic_linear recursive_doubling recursive_halving butterfly)
echo "# comm_algos: mesh $((W / TP))x$TP, sizes $MIN..$MAX, iters $ITERS, $(date -u +%FT%TZ), load $(cut -d' ' -f1 /proc/loadavg)"
for a in 0 1 2 3 4 5 6; do
  mca=(); [ "$a" -gt 0 ] && mca=(--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm "$a")
  "${MPIRUN[@]}" "${mca[@]}" "${CB[@]}" --rs-algo allreduce --json "$T/ar$a.json" >"$T/ar$a.txt" 2>&1 \
    || echo "# allreduce algorithm $a (${AR_NAMES[$a]}) failed: $(tail -1 "$T/ar$a.txt")"
done
for a in 0 1 2 3 4; do
  mca=(); [ "$a" -gt 0 ] && mca=(--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_reduce_scatter_block_algorithm "$a")
  "${MPIRUN[@]}" "${mca[@]}" "${CB[@]}" --rs-algo native --json "$T/rs$a.json" >"$T/rs$a.txt" 2>&1 \
    || echo "# reduce_scatter_block algorithm $a (${RS_NAMES[$a]}) failed: $(tail -1 "$T/rs$a.txt")"
done
/usr/bin/python3 - "$T" "${AR_NAMES[*]}" "${RS_NAMES[*]}" <<'PY'
import json, os, sys
T, arn, rsn = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
def table(prefix, names, coll, algo, title):
    runs = {}
    for i, n in enumerate(names):
        try: runs[n] = json.load(open(os.path.join(T, "%s%d.json" % (prefix, i))))["records"]
        except Exception: pass
    if not runs: return
    sizes = sorted({(r["group"], r["size_bytes"]) for rs in runs.values() for r in rs if r["collective"] == coll and r["algo"] == algo},
                   key=lambda x: (x[0] != "tp", x[1]))
    print("\n%s: busbw GB/s (time us), #wrong all 0 unless marked\n" % title)
    print("| group | size B | " + " | ".join(runs) + " |")
    print("|---|---|" + "---|" * len(runs))
    for g, s in sizes:
        cells = []
        for n, rs in runs.items():
            m = [r for r in rs if r["group"] == g and r["size_bytes"] == s and r["collective"] == coll and r["algo"] == algo]
            cells.append("%.2f (%.0f)%s" % (m[0]["busbw_gbs"], m[0]["time_us"], " WRONG" if m[0]["wrong"] else "") if m else "-")
        print("| %s | %d | %s |" % (g, s, " | ".join(cells)))
table("ar", arn, "reduce_scatter", "allreduce", "reduce_scatter as MPI_Allreduce + copy, by coll_tuned_allreduce_algorithm")
table("ar", arn, "all_reduce", "mpi", "all_reduce, by coll_tuned_allreduce_algorithm")
table("rs", rsn, "reduce_scatter", "native", "reduce_scatter as MPI_Reduce_scatter_block, by coll_tuned_reduce_scatter_block_algorithm")
PY
