#!/usr/bin/env bash
# tests/t_structure.sh — the layout of the code, checked from its own includes and literals:
# - floors: a file of core/ or kernels/ includes only its own folder or a lower floor, in the order
#   common < kernels < formats < engine < job < cost < run < sweep < tune (bench/ is above them all);
# - no include loop: no header reaches itself through the headers it includes;
# - each enumeration a newcomer extends exists once: the model presets and the GPU names (the lists
#   build/train --help prints) are string literals of core/job/catalog.c only; build/train's options
#   are rows of core/job/options.c only (no program scans argv for one by hand); the run record's
#   keys are written through core/job/keys.h (no json_object_set_new of a listed key elsewhere);
#   this host's machine-file name is made in core/job/catalog.c only.
# What it is not: a picture of the structure (docs/where-to-change.md says what a change touches).
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.." || exit 1
TRAIN="$BUILD/train"
[ -x "$TRAIN" ] || { fail structure_build "$TRAIN is missing (run make all)"; exit 1; }
"$TRAIN" --help > "$BUILD/structure_help.txt" 2>&1

/usr/bin/python3 - "$BUILD/structure_help.txt" > "$BUILD/structure_out.txt" 2>&1 <<'PY'
import glob, os, re, sys
help_text = open(sys.argv[1]).read()
def ok(n): print(f"ok   {n}")
def fail(n, why): print(f"FAIL {n}: {why}")
FLOORS = ["core/common", "kernels", "core/formats", "core/engine", "core/job", "core/cost", "core/run", "core/sweep", "core/tune"]
def floor(path):
    for i, f in enumerate(FLOORS):
        if path.startswith(f + "/"): return i, f
    return None, None
src = [f for f in glob.glob("core/*/*.[ch]") + glob.glob("kernels/**/*.[ch]", recursive=True)
       + glob.glob("kernels/**/*.cu", recursive=True) + glob.glob("kernels/**/*.cuh", recursive=True)]
text = {f: open(f, errors="replace").read() for f in src}
# floors
bad = []
for f, t in text.items():
    fi, fd = floor(f)
    if fi is None: continue
    for inc in re.findall(r'#include "((?:core|kernels)/[^"]+)"', t):
        ii, idir = floor(inc)
        if ii is None or idir == fd: continue
        if ii > fi: bad.append(f"{f} -> {inc}")
ok("structure_floors") if not bad else fail("structure_floors", "includes that climb a floor: " + "; ".join(bad[:8]))
# header include loops
hdr = {f: [i for i in re.findall(r'#include "((?:core|kernels)/[^"]+\.(?:h|cuh))"', t) if i != f]
       for f, t in text.items() if f.endswith((".h", ".cuh"))}
loops, state = [], {}
def dfs(u, stack):
    state[u] = 1; stack.append(u)
    for v in hdr.get(u, []):
        if state.get(v) == 1: loops.append(" -> ".join(stack[stack.index(v):] + [v]))
        elif not state.get(v): dfs(v, stack)
    stack.pop(); state[u] = 2
for h in hdr:
    if not state.get(h): dfs(h, [])
ok("structure_no_include_loop") if not loops else fail("structure_no_include_loop", "; ".join(loops[:5]))
# enumerations once
code = {f: t for f, t in text.items()}
for f in glob.glob("bench/*.c"): code[f] = open(f).read()
def literal_files(word):
    pat = re.compile(r'"' + re.escape(word) + r'"')
    return sorted(f for f, t in code.items() if pat.search(t))
def listed(label):
    m = re.search(r"^" + re.escape(label) + r"\s*(.*)$", help_text, re.M)
    return [w.strip() for w in m.group(1).split(",") if w.strip()] if m else []
for label, what in (("model presets:", "preset"), ("GPUs (--gpu, --machine):", "gpu")):
    names = listed(label)
    # a file naming more than half of the list holds a second copy of it (one name is a use: a default)
    if len(names) < 2: fail(f"structure_{what}_list", f"build/train --help has no '{label}' list"); continue
    elsewhere = {n: [f for f in literal_files(n) if f != "core/job/catalog.c"] for n in names}
    files = sorted({f for fs in elsewhere.values() for f in fs})
    copies = [f for f in files if sum(f in elsewhere[n] for n in names) * 2 > len(names)]
    elsewhere = {n: [f for f in fs if f in copies] for n, fs in elsewhere.items()}
    elsewhere = {n: fs for n, fs in elsewhere.items() if fs}
    missing = [n for n in names if "core/job/catalog.c" not in literal_files(n)]
    if missing: fail(f"structure_{what}s_once", f"not in core/job/catalog.c: {missing}")
    elif elsewhere: fail(f"structure_{what}s_once", "; ".join(f"{n} also in {fs}" for n, fs in elsewhere.items()))
    else: ok(f"structure_{what}s_once")
opts = re.findall(r'^\s*\{"([a-z0-9-]+)", CLI_', code["core/job/options.c"], re.M)
dup = [o for o in set(opts) if opts.count(o) > 1]
rows = {}
for f, t in code.items():
    if f == "core/job/options.c" or f.startswith("bench/") and f != "bench/train.c": continue
    for o in opts:
        if re.search(r'\{"' + re.escape(o) + r'", CLI_', t): rows.setdefault(o, []).append(f)
scan = "strncmp(argv" in code["bench/train.c"] or "strcmp(argv" in code["bench/train.c"]
if len(opts) < 30 or dup or rows or scan:
    fail("structure_train_options_once", f"{len(opts)} rows; twice in the table: {dup}; rows elsewhere: {rows}; train.c scans argv: {scan}")
else: ok("structure_train_options_once")
keys = re.findall(r'X\(\w+, "([a-z_]+)", "([a-z_]*)"\)', open("core/job/keys.h").read())
written = []
for f, t in code.items():
    if f.startswith("core/run/") or f.startswith("core/job/"):
        for k, _ in keys:
            if re.search(r'json_object_set_new\([^,;]*, "' + k + r'"', t): written.append(f"{f}: {k}")
if len(keys) < 20: fail("structure_record_keys_once", f"core/job/keys.h lists {len(keys)} keys")
elif written: fail("structure_record_keys_once", "written by hand: " + "; ".join(written[:8]))
else: ok("structure_record_keys_once")
mp = sorted(f for f, t in code.items() if re.search(r'"%s/machines/', t))
ok("structure_machine_path_once") if mp == ["core/job/catalog.c"] else fail("structure_machine_path_once", f"made in {mp}")
PY
rc=$?
while IFS= read -r line; do
  case "$line" in "ok   "*) ok "${line#ok   }" ;; "FAIL "*) n=${line#FAIL }; fail "${n%%:*}" "${n#*: }" ;; esac
done < "$BUILD/structure_out.txt"
[ "$rc" -eq 0 ] || fail structure_checker "exit $rc: $(tail -2 "$BUILD/structure_out.txt" | tr '\n' ' ')"
