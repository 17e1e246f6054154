#!/usr/bin/env python3
"""The Apple recipe's files agree with the tree (docs/mobile.md), checked where no Apple SDK or
Swift exists (issue 34):

  apple_layout.py SOURCE_DIR CC

- examples/apple/include/module.modulemap names as headers exactly the ones the runtime built alone
  installs (cmake/install.cmake's rx_headers without compiler.h), each existing under include/;
- each of them compiles alone as C11 with CC (-fsyntax-only), as Swift's Clang importer reads it;
- Package.swift's binary target is named like the module and points at the xcframework that
  build-xcframework.sh writes, which copies this module map into every slice; its executable
  target's path exists and imports the module;
- every rx_* / RX_* name the Swift example uses is declared by one of the module's headers (their
  text, or what the preprocessor makes of it).
Prints each disagreement and exits 1."""
import os
import re
import subprocess
import sys


def main():
    src, cc = sys.argv[1], sys.argv[2]
    apple = os.path.join(src, "examples/apple")
    fails = []

    mm = open(os.path.join(apple, "include/module.modulemap")).read()
    mm_code = re.sub(r"//[^\n]*", "", mm)
    module = re.search(r"\bmodule\s+(\w+)\s*\{", mm_code).group(1)
    headers = re.findall(r'\bheader\s+"([^"]+)"', mm_code)
    install = open(os.path.join(src, "cmake/install.cmake")).read()
    m = re.search(r"set\(rx_headers ([^)#]*)\)", install)
    installed = {"relaxc/" + h for h in m.group(1).split()} if m else set()
    if set(headers) != installed:
        fails.append(f"module.modulemap names {sorted(headers)}; the runtime alone installs "
                     f"{sorted(installed)} (cmake/install.cmake rx_headers)")
    text = ""
    for h in headers:
        path = os.path.join(src, "include", h)
        if not os.path.isfile(path):
            fails.append(f"module.modulemap: header \"{h}\": no include/{h}")
            continue
        text += open(path).read()
        p = subprocess.run([cc, "-std=c11", "-fsyntax-only", "-Wall", "-Werror", "-x", "c",
                            "-I", os.path.join(src, "include"), "-include", path, "/dev/null"],
                           capture_output=True, text=True)
        if p.returncode != 0:
            fails.append(f"include/{h} does not compile alone:\n{p.stderr}")
        # the names as Swift sees them: the headers' text and what it preprocesses to (the
        # dtypes' enum constants are made by a macro)
        p = subprocess.run([cc, "-std=c11", "-E", "-P", "-x", "c", "-I",
                            os.path.join(src, "include"), path], capture_output=True, text=True)
        text += p.stdout

    pkg = open(os.path.join(apple, "Package.swift")).read()
    b = re.search(r'\.binaryTarget\(\s*name:\s*"(\w+)",\s*path:\s*"([^"]+)"', pkg)
    if not b or b.group(1) != module:
        fails.append(f"Package.swift: no .binaryTarget named {module} (the module map's module)")
    elif b.group(2) != module + ".xcframework":
        fails.append(f"Package.swift: binary target path {b.group(2)}, expected {module}.xcframework")
    script = open(os.path.join(apple, "build-xcframework.sh")).read()
    if f"{module}.xcframework" not in script or "include/module.modulemap" not in script:
        fails.append(f"build-xcframework.sh does not write {module}.xcframework with "
                     "include/module.modulemap")
    for path in re.findall(r'\.executableTarget\([^)]*?path:\s*"([^"]+)"', pkg, re.S):
        d = os.path.join(apple, path)
        swift = [f for f in os.listdir(d) if f.endswith(".swift")] if os.path.isdir(d) else []
        if not swift:
            fails.append(f"Package.swift: executable target path {path} has no .swift file")
        for f in swift:
            code = open(os.path.join(d, f)).read()
            if not re.search(rf"^import {module}$", code, re.M):
                fails.append(f"{path}/{f} does not import {module}")
            for name in sorted(set(re.findall(r"\b(rx_\w+|RX_\w+)\b", code))):
                if not re.search(rf"\b{name}\b", text):
                    fails.append(f"{path}/{f}: {name} is declared by none of the module's headers")

    for f in fails:
        print("apple_layout: " + f)
    if not fails:
        print(f"apple_layout: OK (module {module}: {len(headers)} headers)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
