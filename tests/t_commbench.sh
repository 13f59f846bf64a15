#!/usr/bin/env bash
# tests/t_commbench.sh — build/commbench (docs/options.md, docs/metrics.md): on 4 ranks as a 2x2 mesh with small sizes and few
# iterations it must exit 0 with #wrong 0 in every row, write valid JSON holding the same records as the
# table, and report busbw = algbw * nccl-tests factor (all-reduce 2(n-1)/n, all-gather and
# reduce-scatter (n-1)/n) and algbw = S/time. A corrupted result (test hook) must be counted as wrong and
# fail the run; bad usage exits 2 with one line. Timings themselves are never asserted (docs/benchmarks.md).
source "$(dirname "$0")/lib.sh"
CB="$BUILD/commbench"
[ -x "$CB" ] || { fail commbench_built "$CB missing (make $CB)"; exit 1; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
export OMPI_MCA_mpi_yield_when_idle=1
ARGS=(--tp 2 --min-bytes 1K --max-bytes 16K --iters 3 --warmup 1 --memcpy-bytes 1M)

if timeout 120 "${MPIRUN[@]}" -np 4 "$CB" "${ARGS[@]}" --json "$T/cb.json" >"$T/out.txt" 2>"$T/err.txt"; then
  ok commbench_run
else
  fail commbench_run "exit $?: $(tail -3 "$T/err.txt" | tr '\n' ' ')"; exit 1
fi

# table: 2 groups x 4 (collective, algo) x 5 sizes (1K..16K) rows, 10 columns, #wrong (column 10) 0
rows=$(awk '!/^#/ && NF' "$T/out.txt" | wc -l)
[ "$rows" -eq 40 ] && ok commbench_rows || fail commbench_rows "want 40 data rows, got $rows"
bad=$(awk '!/^#/ && NF { if (NF != 10 || $10 != 0) n++ } END { print n + 0 }' "$T/out.txt")
[ "$bad" -eq 0 ] && ok commbench_no_wrong || fail commbench_no_wrong "$bad rows with #wrong != 0 or a bad shape"
grep -q '^# memcpy .*GB/s' "$T/out.txt" && ok commbench_memcpy_line || fail commbench_memcpy_line "no memcpy reference line"
# table busbw = algbw * factor within the 3-decimal rounding of both columns
badbw=$(awk '!/^#/ && NF { n = $4; f = ($5 == "all_reduce") ? 2 * (n - 1) / n : (n - 1) / n;
          d = $9 - $8 * f; if (d < 0) d = -d; if (d > 0.0011) m++ } END { print m + 0 }' "$T/out.txt")
[ "$badbw" -eq 0 ] && ok commbench_table_busbw || fail commbench_table_busbw "$badbw rows with busbw != algbw*factor"

/usr/bin/python3 - "$T/cb.json" "$T/out.txt" <<'PY'
import json, sys
def res(name, cond, why):
    print(("ok   " + name) if cond else ("FAIL %s: %s" % (name, why)))
try:
    j = json.load(open(sys.argv[1]))
except Exception as e:
    res("commbench_json_valid", False, str(e)); sys.exit(0)
res("commbench_json_valid", j.get("schema") == "meshsweep.commbench/1" and j.get("world") == 4
    and j.get("mesh") == {"dp": 2, "tp": 2}, "schema/world/mesh: %r" % {k: j.get(k) for k in ("schema", "world", "mesh")})
recs = j.get("records", [])
table = [l.split() for l in open(sys.argv[2]) if l.strip() and not l.startswith("#")]
same = len(recs) == len(table) and all(
    int(t[0]) == r["size_bytes"] and int(t[1]) == r["count"] and t[2] == r["group"] and int(t[3]) == r["ranks"]
    and t[4] == r["collective"] and t[5] == r["algo"] and abs(float(t[7]) - r["algbw_gbs"]) <= 0.0006
    for t, r in zip(table, recs))
res("commbench_json_records", same, "%d records vs %d table rows, or fields differ" % (len(recs), len(table)))
kinds = {(r["group"], r["collective"], r["algo"]) for r in recs}
want = {(g, c, a) for g in ("tp", "dp") for c, a in (("all_reduce", "mpi"), ("all_gather", "mpi"),
        ("reduce_scatter", "allreduce"), ("reduce_scatter", "native"))}
res("commbench_json_kinds", kinds == want, "kinds %r" % sorted(kinds))
bad = []
for r in recs:
    n = r["ranks"]
    f = 2 * (n - 1) / n if r["collective"] == "all_reduce" else (n - 1) / n
    if abs(r["busbw_gbs"] - r["algbw_gbs"] * f) > 1e-9 * max(1, r["busbw_gbs"]): bad.append(("busbw", r))
    if abs(r["algbw_gbs"] - r["size_bytes"] / r["time_us"] / 1e3) > 1e-6 * r["algbw_gbs"]: bad.append(("algbw", r))
    if r["wrong"] != 0 or r["time_us"] <= 0 or r["count"] * 4 != r["size_bytes"]: bad.append(("fields", r))
res("commbench_json_bw", not bad and len(recs) > 0, "%d bad, first %r" % (len(bad), bad[:1]))
res("commbench_json_memcpy", len(j.get("memcpy", [])) == 2 and all(m["gbs"] > 0 for m in j["memcpy"]), "memcpy %r" % j.get("memcpy"))
PY

# the check must be able to fail: one corrupted element on each group's rank 0 per row
MESHSWEEP_COMMBENCH_FAULT=1 timeout 120 "${MPIRUN[@]}" -np 4 "$CB" "${ARGS[@]}" >"$T/f.txt" 2>"$T/ferr.txt"; rc=$?
fw=$(awk '!/^#/ && NF && $10 != 2 { n++ } END { print n + 0 }' "$T/f.txt")
if [ "$rc" -ne 0 ] && [ "$fw" -eq 0 ] && grep -q '^# Out of bounds values : 80 FAILED' "$T/f.txt" \
   && grep -q '^commbench: 80 wrong elements' "$T/ferr.txt"; then ok commbench_detects_wrong
else fail commbench_detects_wrong "exit $rc, $fw rows without #wrong 2: $(grep 'Out of bounds' "$T/f.txt")"; fi

# usage errors: exit 2, one line (singleton run; under mpirun, mpirun adds its own lines)
expect_exit commbench_bad_option 2 "^commbench: unknown option '--bogus'" -- "$CB" --bogus
expect_exit commbench_bad_size 2 "^commbench: option --max-bytes: 'lots'" -- "$CB" --max-bytes lots
expect_exit commbench_bad_range 2 "^commbench: --max-bytes 1K is below --min-bytes 4K" -- "$CB" --min-bytes 4K --max-bytes 1K
expect_exit commbench_bad_rs 2 "^commbench: --rs-algo 'ring'" -- "$CB" --rs-algo ring
timeout 120 "${MPIRUN[@]}" -np 4 "$CB" --tp 3 >/dev/null 2>"$T/tp.txt"; rc=$?
n=$(grep -c '^commbench:' "$T/tp.txt")
[ "$rc" -eq 2 ] && [ "$n" -eq 1 ] && grep -q 'does not divide' "$T/tp.txt" && ok commbench_bad_tp_mpirun \
  || fail commbench_bad_tp_mpirun "exit $rc, $n commbench lines: $(head -c 200 "$T/tp.txt")"
# a run that measures nothing fails instead of printing "0 OK"
expect_exit commbench_nothing_1rank 2 "^commbench: nothing to measure: 1 rank" -- "$CB" --max-bytes 4K --memcpy-bytes 4K
timeout 120 "${MPIRUN[@]}" -np 4 "$CB" --tp 4 --min-bytes 4 --max-bytes 8 >"$T/n.txt" 2>"$T/nerr.txt"; rc=$?
[ "$rc" -eq 2 ] && [ "$(grep -c '^commbench:' "$T/nerr.txt")" -eq 1 ] && grep -q 'nothing to measure' "$T/nerr.txt" \
  && ! grep -q 'OK' "$T/n.txt" && ok commbench_nothing_tiny_sizes || fail commbench_nothing_tiny_sizes "exit $rc: $(head -c 200 "$T/nerr.txt")"
# every host of the job is listed with its ranks
grep -qE '^# hosts: [^ ]+ \(ranks 0-3\)$' "$T/out.txt" && ok commbench_hosts_line || fail commbench_hosts_line "$(grep '^# hosts' "$T/out.txt")"
/usr/bin/python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["env"]; sys.exit(0 if list(e["ranks_by_host"].values())==[[0,1,2,3]] else 1)' "$T/cb.json" \
  && ok commbench_json_ranks_by_host || fail commbench_json_ranks_by_host "env.ranks_by_host missing or wrong"
"$CB" --help >"$T/help.txt" 2>&1 && grep -q -- '--rs-algo' "$T/help.txt" && ok commbench_help || fail commbench_help "--help failed or lacks options"

# HSDP (--replicate R, mesh R x S x T): the shard groups (S ranks) with every collective and the replica
# groups (every S*T-th rank) with the all-reduce the engine runs there; 8 ranks as 2x2x2
if timeout 120 "${MPIRUN[@]}" -np 8 "$CB" --tp 2 --replicate 2 --min-bytes 1K --max-bytes 4K --iters 2 --warmup 1 \
     --memcpy-bytes 1M --json "$T/h.json" >"$T/h.txt" 2>"$T/herr.txt"; then
  /usr/bin/python3 - "$T/h.json" "$T/h.txt" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); recs = j["records"]
rows = [l.split() for l in open(sys.argv[2]) if l.strip() and not l.startswith("#")]
by = {}
for r in recs: by.setdefault(r["group"], set()).add((r["collective"], r["ranks"]))
ok = (j["mesh"] == {"dp": 4, "tp": 2, "replicate": 2} and by.get("replica") == {("all_reduce", 2)}
      and {c for c, _ in by.get("shard", ())} == {"all_reduce", "all_gather", "reduce_scatter"}
      and all(n == 2 for _, n in by["shard"]) and len(rows) == len(recs) == 3 * 12 + 3
      and all(r[9] == "0" for r in rows))
print("ok   commbench_hsdp_groups" if ok else f"FAIL commbench_hsdp_groups: mesh {j['mesh']}, groups {by}, {len(rows)} rows")
PY
else
  fail commbench_hsdp_groups "exit $?: $(tail -2 "$T/herr.txt" | tr '\n' ' ')"
fi
timeout 120 "${MPIRUN[@]}" -np 8 "$CB" --tp 2 --replicate 3 >/dev/null 2>"$T/r3.txt"; rc=$?
[ "$rc" -eq 2 ] && [ "$(grep -c '^commbench:' "$T/r3.txt")" -eq 1 ] && grep -q 'replicate 3 does not divide' "$T/r3.txt" \
  && ok commbench_bad_replicate || fail commbench_bad_replicate "exit $rc: $(head -c 200 "$T/r3.txt")"
