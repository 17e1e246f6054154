#!/usr/bin/env python3
"""The house rules of ../shared/DESIGN.md and STYLE.md that a script can check (issue 11).

  scripts/check-house.py layering    a file includes only folders on its own floor or below
  scripts/check-house.py functions   no function outside tests/ is longer than MAX_LINES
  scripts/check-house.py link [DIR]  the same floors at link level, over the object files of the
                                     build directory DIR (default build/): no symbol defined on a
                                     floor is used by a file on a lower one
  scripts/check-house.py             all three (link over build/)

Each prints what breaks the rule, file and line (the link check: the using file and the symbol),
and exits 1 when anything does; there is no list of exceptions. The link check needs a build: it
says so and fails when DIR has no compile_commands.json or objects of the compiler's files are
missing (build first: make build, or cmake --build DIR)."""
import json
import os
import re
import shlex
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

# DESIGN.md "Folders": a folder may include the folders on its own floor or below.
FLOORS = {
    "tools": 9,
    "driver": 8,
    "codegen": 7,
    "passes": 6,
    "frontends": 6,
    "interp": 5,
    "ops": 4,
    "ir": 3,
    "shapes": 2,
    "targets": 2,
    "base": 1,
    "include": 0,
}
# runtime/ builds alone (for Android and iOS too): it includes only base/, include/ and itself.
# It depends on floors 1 and 0 only, so the compiler's folders from floor 2 up may include its
# format headers (the host program's opcodes, the device interface).
RUNTIME_ALLOWED = {"runtime", "base", "include"}
RUNTIME_FLOOR = 2

MAX_LINES = 150  # STYLE.md: "no function grows past about 150 lines"


def tracked(patterns):
    # tracked files and new ones not ignored (a clean checkout has only the former)
    cmd = ["git", "ls-files", "--cached", "--others", "--exclude-standard"] + patterns
    out = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return [f for f in out.split("\n") if f]


def folder_of(path):
    """The top folder of a repository path, or None outside the floors (tests/, examples/)."""
    top = path.split("/", 1)[0]
    if top in FLOORS or top == "runtime":
        return top
    return None


def resolve(src, inc):
    """Where #include "inc" in src points: beside src, then the repository root, then include/."""
    for base in (os.path.dirname(src), "", "include"):
        cand = os.path.normpath(os.path.join(base, inc))
        if os.path.isfile(os.path.join(ROOT, cand)):
            return cand
    return None


def floor(folder):
    return RUNTIME_FLOOR if folder == "runtime" else FLOORS[folder]


def check_layering():
    bad = 0
    files = [f for f in tracked(["*.c", "*.h", "*.def"]) if folder_of(f)]
    for src in files:
        me = folder_of(src)
        with open(os.path.join(ROOT, src), encoding="utf-8") as fh:
            for no, line in enumerate(fh, 1):
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if not m:
                    continue
                target = resolve(src, m.group(1))
                if target is None:
                    # a generated header (the ONNX protobuf-c parser) or a test stub: not ours
                    continue
                them = folder_of(target)
                if them is None:
                    print(f"{src}:{no}: includes {target}, outside the compiler and runtime folders")
                    bad += 1
                elif me == "runtime":
                    if them not in RUNTIME_ALLOWED:
                        print(f"{src}:{no}: runtime/ includes only base/ and include/, not {target}")
                        bad += 1
                elif them == "runtime" and floor(me) < RUNTIME_FLOOR:
                    print(f"{src}:{no}: {me}/ (floor {floor(me)}) includes {target} (runtime/)")
                    bad += 1
                elif floor(them) > floor(me):
                    print(f"{src}:{no}: {me}/ (floor {floor(me)}) includes {target} "
                          f"({them}/, floor {floor(them)})")
                    bad += 1
    print(f"check-house layering: {len(files)} files, {bad} includes above their floor")
    return bad


def functions(path):
    """(name, first line, length) of each function definition of a clang-formatted C file: a
    definition opens with a line ending in ') {' at file scope and ends at the next '}' line."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    out, start, i = [], None, 0
    head = None  # first line of the current top-level declaration
    while i < len(lines):
        line = lines[i]
        if start is None:
            if line and not line[0].isspace() and not line.startswith(("#", "//", "/*", " *", "}")):
                head = i
            if line.endswith(") {") and not line.rstrip().endswith("\\") and head is not None:
                start = head
                m = re.search(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(", lines[head])
                name = m.group(1) if m else "?"
        elif line == "}":
            out.append((name, start + 1, i - start + 1))
            start, head = None, None
        i += 1
    return out


def check_functions():
    bad, count = 0, 0
    for src in tracked(["*.c"]):
        if src.startswith(("tests/", "bench/")):
            continue
        for name, first, length in functions(src):
            count += 1
            if length > MAX_LINES:
                print(f"{src}:{first}: {name} is {length} lines (at most {MAX_LINES})")
                bad += 1
    print(f"check-house functions: {count} functions, {bad} longer than {MAX_LINES} lines")
    return bad


def objects_of(build):
    """({object path: repository path of its source}, {source: object} of those not built) for
    the compiler's and the runtime's files (folder_of not None) of build's compile_commands.json
    (CMake writes it: CMAKE_EXPORT_COMPILE_COMMANDS); (None, None) when there is none."""
    db = os.path.join(build, "compile_commands.json")
    if not os.path.isfile(db):
        return None, None
    with open(db, encoding="utf-8") as fh:
        entries = json.load(fh)
    objs, missing = {}, {}
    for e in entries:
        src = os.path.relpath(os.path.normpath(os.path.join(e["directory"], e["file"])), ROOT)
        if src.startswith("..") or folder_of(src) is None:
            continue  # generated (the ONNX protobuf-c parser), tests/, bench/, examples/
        out = e.get("output")
        if out is None:
            args = shlex.split(e["command"]) if "command" in e else e["arguments"]
            out = args[args.index("-o") + 1]
        out = os.path.normpath(os.path.join(e["directory"], out))
        if os.path.isfile(out):
            objs[out] = src
            missing.pop(src, None)
        elif src not in objs.values():
            missing[src] = out
    return objs, missing


def nm(args, files):
    """Lines of nm -A ARGS over files, in batches (a command line has a limit)."""
    out = []
    for i in range(0, len(files), 200):
        cmd = ["nm", "-A"] + args + files[i:i + 200]
        out += subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.split("\n")
    return out


def allowed(me, them):
    """May a file of folder me use a symbol defined in folder them (the include rule)?"""
    if me == "runtime":
        return them in RUNTIME_ALLOWED
    if them == "runtime":
        return floor(me) >= RUNTIME_FLOOR
    return floor(them) <= floor(me)


def check_link(build):
    """A symbol defined in a file on a higher floor and used by one on a lower floor: the edge
    an include check misses (a declaration in a lower header of a function defined above)."""
    objs, missing = objects_of(build)
    if objs is None:
        print(f"check-house link: no compile_commands.json in {build}/: build first (make build, "
              f"or cmake -S . -B {build} && cmake --build {build}), or name the build directory: "
              f"scripts/check-house.py link DIR")
        return 1
    if missing:
        first = ", ".join(sorted(missing)[:5])
        print(f"check-house link: {len(missing)} source files have no object file in {build}/ "
              f"({first}{', ...' if len(missing) > 5 else ''}): build everything first "
              f"(cmake --build {build})")
        return 1
    files = sorted(objs)
    defined = {}  # symbol -> folders defining it
    for line in nm(["--defined-only", "--extern-only"], files):
        m = re.match(r"(.*\.o):[0-9a-fA-F]*\s+[A-Z]\s+(\S+)$", line)
        if m:
            defined.setdefault(m.group(2), set()).add(folder_of(objs[m.group(1)]))
    bad, edges = 0, set()
    for line in nm(["-u"], files):
        m = re.match(r"(.*\.o):\s+[Uuvw]\s+(\S+)$", line)
        if not m or m.group(2) not in defined:
            continue  # libc, libm, cJSON, the toolchains' libraries
        src, sym = objs[m.group(1)], m.group(2)
        me, them = folder_of(src), defined[sym]
        if any(allowed(me, t) for t in them) or (src, sym) in edges:
            continue
        edges.add((src, sym))
        where = ", ".join(f"{t}/" for t in sorted(them))
        print(f"{src}: uses {sym}, defined in {where} (floor "
              f"{', '.join(str(floor(t)) for t in sorted(them))}) above {me}/ (floor {floor(me)})")
        bad += 1
    print(f"check-house link: {len(files)} objects in {build}/, {bad} uses of a symbol above their "
          f"floor")
    return bad


def main(argv):
    what = argv[1:] or ["layering", "functions", "link"]
    bad = 0
    i = 0
    while i < len(what):
        w = what[i]
        if w == "layering":
            bad += check_layering()
        elif w == "functions":
            bad += check_functions()
        elif w == "link":
            build = os.path.relpath(os.path.join(ROOT, "build"))  # default: this checkout's
            if i + 1 < len(what) and what[i + 1] not in ("layering", "functions", "link"):
                i += 1
                build = what[i]  # as given (relative to the working directory)
            bad += check_link(os.path.normpath(build))
        else:
            print(f"usage: {argv[0]} [layering] [functions] [link [BUILD_DIR]]", file=sys.stderr)
            return 2
        i += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
