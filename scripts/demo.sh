#!/usr/bin/env bash
# `make demo`: runs the bundled examples through the parts of relaxc that exist today.
# Today that is the front end: parse, forward shape deduction, verification and printing.
# Code generation (CUDA C, GLSL/SPIR-V, MSL), the runtime and `relaxc run` come with the next
# issues; until then the demo says so instead of pretending.
set -euo pipefail
build=${1:-build}
relaxc="$build/relaxc"
for f in examples/*.rx; do
  echo "== relaxc check $f"
  "$relaxc" check "$f"
  echo "== relaxc print $f   (every binding carries its deduced struct info)"
  "$relaxc" print "$f"
  echo
done
echo "demo: code generation and running on a backend are not implemented yet (see README.md)."
