#!/usr/bin/env bash
# scripts/python-venv.sh [BUILD_DIR]: creates BUILD_DIR/venv-python (default build/venv-python),
# the Python virtual environment in which ctest's python.package builds, installs and tests the
# relaxc Python package (tests/python/run_test.py), from tests/python/requirements.txt:
# scikit-build-core and NumPy at exact versions, from PyPI. The same pattern as
# scripts/serve-venv.sh: idempotent (a venv whose stamp matches the requirements file is kept; a
# stale or half-made one is made again); needs Debian's python3-venv and PyPI, or a pip configured
# with a mirror or a wheelhouse (PIP_INDEX_URL, PIP_FIND_LINKS); without them it fails saying so.
# The relaxc package itself is (re)installed by the test, never here.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-build}"
mkdir -p "$build"
venv="$(cd "$build" && pwd)/venv-python"
req="$root/tests/python/requirements.txt"
stamp="$venv/.relaxc-requirements"
if [ -f "$stamp" ] && cmp -s "$stamp" "$req" && [ -x "$venv/bin/python" ]; then
  exit 0
fi
echo "python-venv.sh: making $venv from tests/python/requirements.txt (pip, PyPI)"
rm -rf "$venv"
fail() {
  rm -rf "$venv"
  echo "python-venv.sh: error: $1" >&2
  echo "python-venv.sh: the Python package's test needs it; with network access (or" \
    "PIP_INDEX_URL / PIP_FIND_LINKS set) run: bash scripts/python-venv.sh $build" >&2
  exit 1
}
python3 -m venv "$venv" || fail "python3 -m venv failed (Debian: apt-get install python3-venv)"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
  -r "$req" || fail "pip could not install tests/python/requirements.txt"
"$venv/bin/python" -c 'import numpy, scikit_build_core' || fail "the venv cannot import numpy"
cp "$req" "$stamp" # last: a venv without its stamp is made again
echo "python-venv.sh: $venv ready"
