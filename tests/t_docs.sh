#!/usr/bin/env bash
# tests/t_docs.sh — the documentation against the programs and against itself, in a few seconds:
# - docs/options.md against every program's --help (each bench/NAME.c, built as $BUILD/NAME): every
#   option the --help text names is listed in the first column of that program's table in
#   docs/options.md (the section "## `build/NAME`"), and every option listed there is named by the
#   --help text (--help itself excepted: the program has just shown it accepts it; an option right
#   after another program's name, as in "build/train --plan", is that program's); a program whose
#   --help exits non-zero in this build (gpu_bench without CUDA) is skipped, naming why;
# - every section of docs/options.md that names a program names one in bench/;
# - every relative link and image in the repository's markdown resolves to a file, and a link with
#   an anchor to a heading of the target page (GitHub's heading ids);
# - every page in docs/ is linked from README.md, and README.md is at most 300 lines;
# - no markdown page refers to numbered sections of a design document (which is not in the
#   repository) or to a design.md.
# What it is not: a check of what the pages say; it keeps them pointing at what exists.
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.." || exit 1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/help"
for src in bench/*.c; do
  prog=$(basename "$src" .c)
  bin="$BUILD/$prog"
  if [ ! -x "$bin" ]; then fail "docs_help_$prog" "$bin is missing (run make all)"; continue; fi
  timeout 30 "$bin" --help > "$tmp/help/$prog.txt" 2>&1; rc=$?
  if [ "$rc" -ne 0 ]; then
    skip "docs_options_$prog" "$bin --help exits $rc in this build: $(head -1 "$tmp/help/$prog.txt" | head -c 200)"
    rm -f "$tmp/help/$prog.txt"
  elif [ ! -s "$tmp/help/$prog.txt" ]; then
    fail "docs_help_$prog" "$bin --help printed nothing"; rm -f "$tmp/help/$prog.txt"
  fi
done
/usr/bin/python3 - "$tmp/help" <<'EOF'
import os, re, sys, unicodedata
helpdir = sys.argv[1]
progs = sorted(f[:-2] for f in os.listdir("bench") if f.endswith(".c"))
OPT = re.compile(r"(?<![\w-])--[a-z0-9][a-z0-9-]*")

def ok(name): print("ok " + name)
def fail(name, why): print("FAIL %s: %s" % (name, why))

def blocks(text):
    """the lines of a markdown page outside fenced code blocks, with their numbers"""
    fence = None
    for n, line in enumerate(text.split("\n"), 1):
        m = re.match(r"\s*(```|~~~)", line)
        if m:
            fence = None if fence == m.group(1) else (fence or m.group(1))
            continue
        if fence is None:
            yield n, line

def slug(heading):
    """GitHub's id of a heading: the rendered text, lower case, punctuation dropped, spaces to '-'"""
    t = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    t = t.replace("`", "").replace("*", "").strip().lower()
    keep = [c for c in t if c in " -" or unicodedata.category(c)[0] in "LNM" or unicodedata.category(c) == "Pc"]
    return "".join(keep).replace(" ", "-")

anchors_cache = {}
def anchors(path):
    if path not in anchors_cache:
        seen, ids = {}, set()
        for _, line in blocks(open(path, encoding="utf-8").read()):
            m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
            if not m: continue
            s = slug(m.group(1))
            k = seen.get(s, 0); seen[s] = k + 1
            ids.add(s if k == 0 else "%s-%d" % (s, k))
        anchors_cache[path] = ids
    return anchors_cache[path]

# ---- docs/options.md against --help -------------------------------------------------------------
listed, where = {}, {}
section = None
for n, line in blocks(open("docs/options.md", encoding="utf-8").read()):
    if line.startswith("## "):
        m = re.match(r"## `?build/([A-Za-z0-9_]+)`?\s*$", line)
        section = m.group(1) if m else None
        if section: listed.setdefault(section, set()); where[section] = n
        continue
    if section and line.startswith("|") and not re.match(r"\|\s*:?-", line):
        first = re.split(r"(?<!\\)\|", line)[1]
        if first.strip() in ("option", "target", "variable"): continue
        listed[section].update(OPT.findall(first))
bad = [p for p in listed if p not in progs]
if bad: fail("docs_options_sections", "docs/options.md has sections for programs not in bench/: " + ", ".join("build/" + p for p in bad))
else: ok("docs_options_sections")
for p in progs:
    hf = os.path.join(helpdir, p + ".txt")
    if not os.path.exists(hf): continue          # skipped or failed above
    helped = set()
    for line in open(hf, encoding="utf-8", errors="replace"):
        for m in OPT.finditer(line):
            before = line[:m.start()].split()
            # an option right after another program's name is that program's ("build/train --plan")
            if before and os.path.basename(before[-1]) in progs and os.path.basename(before[-1]) != p: continue
            helped.add(m.group(0))
    if p not in listed:
        fail("docs_options_" + p, "build/%s has --help but docs/options.md has no section \"## `build/%s`\"" % (p, p)); continue
    missing = sorted(helped - listed[p])
    extra = sorted(listed[p] - helped - {"--help"})
    why = ["option %s is in build/%s --help but not in docs/options.md" % (o, p) for o in missing]
    why += ["option %s is in docs/options.md (its build/%s section, line %d) but not in build/%s --help" % (o, p, where[p], p) for o in extra]
    if why: fail("docs_options_" + p, "; ".join(why))
    else: ok("docs_options_" + p)

# ---- links and anchors in every markdown page ----------------------------------------------------
pages = []
for root, dirs, files in os.walk("."):
    dirs[:] = [d for d in dirs if not d.startswith(".") and not d.startswith("build")]
    pages += [os.path.normpath(os.path.join(root, f)) for f in files if f.endswith(".md")]
pages.sort()
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
for page in pages:
    broken = []
    for n, line in blocks(open(page, encoding="utf-8").read()):
        for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
            if re.match(r"[a-z][a-z0-9+.-]*:", target): continue      # http:, https:, mailto:
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            if not os.path.exists(dest): broken.append("line %d: %s (no %s)" % (n, target, dest)); continue
            if anchor and dest.endswith(".md") and anchor not in anchors(dest):
                broken.append("line %d: %s (no heading #%s in %s)" % (n, target, anchor, dest))
    if broken: fail("docs_links_" + page, "; ".join(broken[:8]) + (" (+%d more)" % (len(broken) - 8) if len(broken) > 8 else ""))
    else: ok("docs_links_" + page)

# ---- the README as the way in ---------------------------------------------------------------------
readme = open("README.md", encoding="utf-8").read()
linked = {os.path.normpath(t.partition("#")[0]) for _, l in blocks(readme) for t in LINK.findall(l)}
unlinked = sorted(p for p in pages if p.startswith("docs" + os.sep) and p not in linked)
if unlinked: fail("docs_readme_links_every_page", "README.md does not link " + ", ".join(unlinked))
else: ok("docs_readme_links_every_page")
nlines = readme.count("\n")
if nlines > 300: fail("docs_readme_length", "README.md has %d lines (at most 300: the reference belongs in docs/)" % nlines)
else: ok("docs_readme_length")

# ---- no pointers into a document that is not in the repository ------------------------------------
DESIGN = re.compile(r"\bdesign(?:'s)?\s+(?:doc(?:ument)?\s+)?(?:section\s+|§\s*)?\d|design\.md", re.I)
hits = []
for page in pages:
    for n, line in enumerate(open(page, encoding="utf-8").read().split("\n"), 1):
        if DESIGN.search(line): hits.append("%s:%d: %s" % (page, n, DESIGN.search(line).group(0)))
if hits: fail("docs_no_design_refs", "references to a design document that is not in the repository: " + "; ".join(hits[:10]))
else: ok("docs_no_design_refs")
EOF
