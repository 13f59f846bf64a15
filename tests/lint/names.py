#!/usr/bin/env python3
"""tests/lint/names.py — the naming and size rules `make lint` checks besides cppcheck and clang-tidy:
no function name is both static somewhere and public somewhere in core/, bench/ and kernels/ (a static
that shares a public name reads as if it were that function); no function over 150 lines and no file
over 800 lines in core/ and kernels/cpu/. Function definitions are found in the sources with comments
and literals blanked out: a name at the start of a line, a balanced parameter list, then a body.
Prints one line per finding and exits 1 if there is any. Usage: names.py [ROOT] (default: the checkout)."""
import os
import re
import sys

NAMES_IN = ("core", "bench", "kernels")
SIZES_IN = ("core", "kernels/cpu")
MAX_FUNCTION_LINES, MAX_FILE_LINES = 150, 800
KEYWORDS = {"if", "while", "for", "switch", "return", "sizeof", "defined"}


def blank(src):
    """comments and string / character literals as spaces (newlines kept, so line numbers hold)"""
    out, i, n = [], 0, len(src)
    while i < n:
        if src.startswith("/*", i) or src.startswith("//", i):
            j = src.find("*/", i + 2) + 2 if src[i + 1] == "*" else src.find("\n", i)
            j = n if j < 2 or j < i else j
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif src[i] in "\"'":
            j = i + 1
            while j < n and src[j] != src[i]:
                j += 2 if src[j] == "\\" else 1
            out.append(src[i] + " " * (j - i - 1) + src[i])
            i = j + 1
        else:
            out.append(src[i])
            i += 1
    return "".join(out)


def matching(s, i, open_c, close_c):
    """index just past the bracket that closes the one before i"""
    depth = 1
    while i < len(s) and depth:
        depth += (s[i] == open_c) - (s[i] == close_c)
        i += 1
    return i


def definitions(path):
    """(name, is_static, first line, lines) of every function defined in path"""
    s = blank(open(path, errors="replace").read())
    for m in re.finditer(r"^(?![ \t#])([^\n;{}()=]*?)\b([A-Za-z_]\w*)\s*\(", s, re.M):
        if m.group(2) in KEYWORDS:
            continue
        k = matching(s, m.end(), "(", ")")
        body = re.match(r"\s*(?:__attribute__\s*\(\(.*?\)\)\s*|const\s*)*\{", s[k:k + 200], re.S)
        if not body:
            continue
        end = matching(s, k + body.end(), "{", "}")
        first = s.count("\n", 0, m.start()) + 1
        yield m.group(2), "static" in m.group(1).split(), first, s.count("\n", 0, end) + 1 - first + 1


def sources(root, tops):
    for top in tops:
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if f.endswith((".c", ".h", ".cu", ".cuh")):
                    yield os.path.join(d, f), os.path.relpath(os.path.join(d, f), root)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    public, static, bad = {}, {}, []
    for path, rel in sources(root, NAMES_IN):
        for name, is_static, first, _ in definitions(path):
            (static if is_static else public).setdefault(name, []).append(f"{rel}:{first}")
    for name in sorted(set(public) & set(static)):
        bad.append(f"{name}: public at {', '.join(public[name])}, static at {', '.join(static[name])}")
    for path, rel in sources(root, SIZES_IN):
        lines = open(path, errors="replace").read().count("\n")
        if lines > MAX_FILE_LINES:
            bad.append(f"{rel}: {lines} lines (at most {MAX_FILE_LINES})")
        for name, _, first, n in definitions(path):
            if n > MAX_FUNCTION_LINES:
                bad.append(f"{rel}:{first}: {name} is {n} lines (at most {MAX_FUNCTION_LINES})")
    for b in bad:
        print(f"names.py: {b}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
