#!/usr/bin/env python3
"""The shared libraries export the public API and nothing else (issue 30, item 7).

  exported_symbols.py SOURCE_DIR LIBRELAXC LIBRELAXC_RUNTIME [LIBRARY_OR_OBJECT...]

LIBRELAXC may be '-' where there is none (the runtime built alone, -DRX_RUNTIME_ONLY=ON).

- LIBRELAXC (librelaxc.so, compiler and runtime) exports exactly the functions declared in
  include/relaxc/*.h;
- LIBRELAXC_RUNTIME (librelaxc_runtime.so) those of relaxc/runtime.h, llm.h, autobatch.h, ccl.h and
  types.h, and nothing that no public header declares (base/, compiled into both libraries, may
  define a function of compiler.h: it is exported by both);
- no symbol with external linkage in the static libraries and objects that follow (the
  compiler's, the runtime's, the command line's) is named rx_* unless a public header declares
  it: `rx_` is the public API's prefix, internal functions take their module's (`ir_`, `ops_`,
  `sched_`, `rt_`, ...) or are static.
Lists each symbol that breaks a rule and exits 1. Needs nm (binutils)."""
import os
import re
import subprocess
import sys

RUNTIME_HEADERS = ("runtime.h", "llm.h", "autobatch.h", "ccl.h", "types.h")
# what the linker defines in every shared library
LINKER_SYMBOLS = {"_init", "_fini", "_edata", "_end", "__bss_start"}


def declared(path):
    """The functions a public header declares (every top-level declaration with a parameter
    list that is not a typedef)."""
    text = open(path, encoding="utf-8").read()
    text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)
    text = re.sub(r"\\\n", " ", text)  # a macro's continued lines
    text = re.sub(r"\"(\\.|[^\"\\])*\"", '""', text)
    lines = [l for l in text.split("\n") if not l.lstrip().startswith("#")
             and not re.fullmatch(r'\s*(extern\s*""\s*\{|\})\s*', l)]
    names, depth, stmt = set(), 0, []
    for ch in "\n".join(lines):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == ";" and depth == 0:
            s = " ".join("".join(stmt).split())
            stmt = []
            if s.startswith("typedef") or "(" not in s:
                continue
            m = re.search(r"\b([A-Za-z_]\w*)\s*\(", s)
            if m and not re.search(r"\(\s*\*", s[:m.end() + 2]):
                names.add(m.group(1))
            continue
        if depth == 0:
            stmt.append(ch)
    return names


def nm(args, path):
    out = subprocess.run(["nm"] + args + [path], check=True, capture_output=True,
                         text=True).stdout
    syms = set()
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3:  # address, type, name (archives add "member.o:" lines)
            syms.add(f[2])
    return syms


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    src, full_lib, rt_lib, others = argv[0], argv[1], argv[2], argv[3:]
    inc = os.path.join(src, "include", "relaxc")
    headers = sorted(h for h in os.listdir(inc) if h.endswith(".h"))
    per_header = {h: declared(os.path.join(inc, h)) for h in headers}
    public = set().union(*per_header.values())
    public_rt = set().union(*(per_header[h] for h in RUNTIME_HEADERS if h in per_header))
    bad = []
    for lib, want in ((full_lib, public), (rt_lib, public_rt)):
        if lib == "-":
            continue  # a runtime built alone (tests/install/install_test.sh): no librelaxc.so
        got = nm(["-D", "--defined-only"], lib) - LINKER_SYMBOLS
        name = os.path.basename(lib)
        bad += ["%s exports %s, which no public header declares" % (name, s)
                for s in sorted(got - public)]
        bad += ["%s does not export %s (declared in relaxc/*.h: RX_API missing?)" % (name, s)
                for s in sorted(want - got)]
        # base/ is the runtime's too: a public function of the compiler defined there (e.g.
        # rx_diag_text) is declared, and exported by both
        extra = sorted(got & public - want)
        print("%s: %d symbols exported, %d declared in its headers%s" %
              (name, len(got), len(want), " (and %s)" % ", ".join(extra) if extra else ""))
    internal = set()
    others = [p for arg in others for p in arg.split(";") if p]  # ctest passes lists whole
    for path in others:
        for s in nm(["-g", "--defined-only"], path):
            if s.startswith("rx_") and s not in public:
                internal.add(s)
    bad += ["%s: external symbol named rx_ that no public header declares (use the module's "
            "prefix or make it static)" % s for s in sorted(internal)]
    print("%d libraries and objects checked for internal rx_ names" % len(others))
    for b in bad:
        print("FAIL: " + b)
    print("%d problems" % len(bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
