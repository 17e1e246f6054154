#!/usr/bin/env bash
# scripts/serve-venv.sh [BUILD_DIR]: creates BUILD_DIR/venv-serve (default build/venv-serve), the
# Python virtual environment of relaxc serve's client tests (tests/serve/run_client.py, ctest's
# rx_serve_client_test), from tests/serve/requirements.txt: the official openai client and
# jsonschema at exact versions, from PyPI. `make test` and `make asan` call it before ctest (and so
# .ci/run). Idempotent: a venv whose stamp matches the requirements file is kept as it is; a stale
# or half-made one is made again. Needs Debian's python3-venv (scripts/deps.sh names it) and
# PyPI, or a pip configured with a mirror or a wheelhouse (PIP_INDEX_URL, PIP_FIND_LINKS).
# Without them it fails saying so, and the client tests fail with the same instructions, never
# passing silently.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-build}"
mkdir -p "$build"
venv="$(cd "$build" && pwd)/venv-serve"
req="$root/tests/serve/requirements.txt"
stamp="$venv/.relaxc-requirements"
if [ -f "$stamp" ] && cmp -s "$stamp" "$req" && [ -x "$venv/bin/python" ]; then
  exit 0
fi
echo "serve-venv.sh: making $venv from tests/serve/requirements.txt (pip, PyPI)"
rm -rf "$venv"
fail() {
  rm -rf "$venv"
  echo "serve-venv.sh: error: $1" >&2
  echo "serve-venv.sh: relaxc serve's client tests need it; with network access (or" \
    "PIP_INDEX_URL / PIP_FIND_LINKS set) run: bash scripts/serve-venv.sh $build" >&2
  exit 1
}
python3 -m venv "$venv" || fail "python3 -m venv failed (Debian: apt-get install python3-venv)"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
  -r "$req" || fail "pip could not install tests/serve/requirements.txt"
"$venv/bin/python" -c 'import openai, jsonschema' || fail "the venv cannot import openai"
cp "$req" "$stamp" # last: a venv without its stamp is made again
echo "serve-venv.sh: $venv ready"
