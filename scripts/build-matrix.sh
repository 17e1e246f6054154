#!/usr/bin/env bash
# The build matrix: relaxc configured and built with GCC 12 and clang 16 in Release (GCC 12 in
# Debug is make asan's build), in build-matrix-<compiler>-<type>/ (default target: the libraries, the relaxc tool, the
# tests' executables and compile-only checks such as rt_metal_compile; no test is run). The builds
# use -Werror (RX_WERROR, on by default), and the script also fails on any warning line left in
# the configure or build output (a linker's or CMake's, which -Werror does not stop). CI runs it
# after `make test` (.ci/run).
#   bash scripts/build-matrix.sh            both, one after the other, 2 compile jobs each
#   MATRIX_JOBS=N MATRIX_ONLY='gcc-12:Release' bash scripts/build-matrix.sh
# The directories are kept: a second run builds only what changed (with -Werror a file that
# warned has no object, so its warning comes back; MATRIX_CLEAN=1 rebuilds everything).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${MATRIX_JOBS:-2}
# Debug builds are not in the default list (CI's time): `make asan` builds the whole tree with
# gcc 12 in Debug (asserts on, -O1) with -Werror (sanitizers on), after this script in CI, and clang's warnings come
# from its front end, the same at -O0 as at -O3, where Release's NDEBUG adds the unused-variable
# cases (MATRIX_ONLY='clang-16:Debug gcc-12:Debug' runs them)
combos=${MATRIX_ONLY:-gcc-12:Release clang-16:Release}
clean=()
[ "${MATRIX_CLEAN:-0}" = 1 ] && clean=(--clean-first)

echo "== build matrix: $combos (scripts/build-matrix.sh)"
failed=()
start_all=$SECONDS
for combo in $combos; do
  cc=${combo%%:*}
  type=${combo#*:}
  dir="build-matrix-${cc%%-*}-${type,,}"
  log="$dir/matrix.log"
  if ! command -v "$cc" >/dev/null; then
    echo "build-matrix: $cc not found (scripts/deps.sh installs it)" >&2
    failed+=("$cc $type (no compiler)")
    continue
  fi
  start=$SECONDS
  status=ok
  mkdir -p "$dir"
  {
    CC=$cc cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE="$type" -DRX_WERROR=ON -DRX_SANITIZE=OFF \
      -DRX_FUZZ=OFF &&
      cmake --build "$dir" -j "$jobs" "${clean[@]}"
  } >"$log" 2>&1 || status=failed
  # a warning that did not stop the build: the compiler's (-Werror off somewhere), the linker's,
  # CMake's
  warnings=$(grep -E -i '(^|[: ])warning[:[ ]|^CMake Warning' "$log" || true)
  if [ "$status" = ok ] && [ -n "$warnings" ]; then status="warned"; fi
  echo "== $cc $type ($dir): $status, $((SECONDS - start)) s"
  if [ "$status" != ok ]; then
    failed+=("$cc $type")
    { [ -n "$warnings" ] && echo "$warnings"; grep -E -B2 -A6 'error|Error' "$log" || true; } |
      head -n 60
    echo "   (the whole output: $log)"
  fi
done
echo "build-matrix: $((SECONDS - start_all)) s in all"
if [ ${#failed[@]} -gt 0 ]; then
  printf 'build-matrix: FAILED: %s\n' "${failed[@]}" >&2
  exit 1
fi
