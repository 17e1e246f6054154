#!/usr/bin/env bash
# tests/install/install_test.sh: relaxc as another project sees it (issue 34, docs/install.md).
#
#   install_test.sh SOURCE_DIR BUILD_DIR PYTHON [CFLAGS]
#       ctest install.package: `cmake --install BUILD_DIR` into a temporary prefix, then
#   install_test.sh SOURCE_DIR BUILD_DIR PYTHON [CFLAGS] --runtime-only BACKEND
#       ctest install.runtime_only: the runtime built alone (-DRX_RUNTIME_ONLY=ON
#       -DRX_BACKENDS=BACKEND) from SOURCE_DIR in a temporary build directory and installed, then
#
# checks the installed tree (files, SONAMEs, the libraries' exported symbols through
# tests/tools/exported_symbols.py, their NEEDED libraries), compiles a small model with relaxc
# (the installed one, or BUILD_DIR's with --runtime-only), builds tests/install/consumer with
# find_package(relaxc) (examples/run_artifact.c against relaxc::runtime and relaxc::runtime_static,
# check_module.c against relaxc::compiler) and examples/run_artifact.c with
# `cc $(pkg-config --cflags --libs relaxc-runtime)`, runs each on the model at n = 1, 7, 33, 100,
# 1000 and compares its output with x*y + x computed here (relative tolerance 1e-6).
# CFLAGS: the build's sanitizer flags, for the consumers of a sanitized build. Exit 77 (skipped)
# when no Vulkan device can be opened: everything before the runs is checked all the same.
set -euo pipefail
SRC=$(cd "$1" && pwd)
BUILD=$(cd "$2" && pwd)
PY=$3
CFLAGS_EXTRA=${4:-}
RUNTIME_ONLY=
if [ "${5:-}" = "--runtime-only" ]; then RUNTIME_ONLY=${6:?--runtime-only needs a backend}; fi

# a sanitized build preloads the ASan runtime and lavapipe (tests/runtime/lsan.supp) for the
# programs built against the installed libraries only (RX_INSTALL_TEST_PRELOAD, from ctest), never
# for bash, cmake, cc or python
RUN_PRELOAD=${RX_INSTALL_TEST_PRELOAD:-}
run() { LD_PRELOAD=$RUN_PRELOAD "$@"; }

T=$(mktemp -d "${TMPDIR:-/tmp}/relaxc-install.XXXXXX")
trap 'rm -rf "$T"' EXIT
PREFIX=$T/prefix
fail() { echo "install_test: FAIL: $*" >&2; exit 1; }
step() { echo "install_test: $*"; }
quiet() { # run a command, showing its output only when it fails
  local log=$T/log
  if ! "$@" >"$log" 2>&1; then cat "$log" >&2; fail "$*"; fi
}

# ---- the tree to test ----
if [ -n "$RUNTIME_ONLY" ]; then
  step "the runtime alone (RX_BACKENDS=$RUNTIME_ONLY) from $SRC"
  # -O1 without debug information: the same code paths, built fast. Sanitized, without -Werror:
  # gcc 12's -Wformat-truncation misfires at -O1 with ASan (the project's builds check warnings)
  werror=ON
  [ -z "$CFLAGS_EXTRA" ] || werror=OFF
  quiet cmake -S "$SRC" -B "$T/rt-build" -DRX_RUNTIME_ONLY=ON -DRX_BACKENDS="$RUNTIME_ONLY" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS_RELEASE=-O1 -DCMAKE_C_FLAGS="$CFLAGS_EXTRA" \
    -DCMAKE_SHARED_LINKER_FLAGS="$CFLAGS_EXTRA" -DRX_WERROR=$werror
  quiet cmake --build "$T/rt-build" -j "$(nproc 2>/dev/null || echo 2)"
  quiet cmake --install "$T/rt-build" --prefix "$PREFIX"
  RELAXC=$BUILD/relaxc
else
  quiet cmake --install "$BUILD" --prefix "$PREFIX"
  RELAXC=$PREFIX/bin/relaxc
fi
LIB=$PREFIX/lib
step "installed into $PREFIX"

# ---- the installed files ----
want=(include/relaxc/runtime.h include/relaxc/llm.h include/relaxc/autobatch.h
      include/relaxc/types.h lib/librelaxc_runtime.a lib/librelaxc_runtime.so
      lib/librelaxc_runtime.so.0 lib/cmake/relaxc/relaxcConfig.cmake
      lib/cmake/relaxc/relaxcConfigVersion.cmake lib/cmake/relaxc/relaxcTargets.cmake
      lib/pkgconfig/relaxc-runtime.pc share/doc/relaxc/README.md share/doc/relaxc/install.md)
if [ -z "$RUNTIME_ONLY" ]; then
  want+=(bin/relaxc include/relaxc/compiler.h lib/librelaxc.a lib/librelaxc.so lib/librelaxc.so.0
         lib/pkgconfig/relaxc.pc share/doc/relaxc/cli/relaxc.txt share/doc/relaxc/cli/compile.txt
         share/doc/relaxc/cli/run.txt)
else
  want+=(share/doc/relaxc/LICENSE.cJSON)
  for f in bin/relaxc include/relaxc/compiler.h lib/librelaxc.so lib/pkgconfig/relaxc.pc; do
    [ ! -e "$PREFIX/$f" ] || fail "the runtime built alone installs $f"
  done
fi
for f in "${want[@]}"; do [ -e "$PREFIX/$f" ] || fail "not installed: $f"; done
if [ -z "$RUNTIME_ONLY" ]; then
  grep -q "usage: relaxc compile" "$PREFIX/share/doc/relaxc/cli/compile.txt" \
    || fail "share/doc/relaxc/cli/compile.txt is not relaxc compile --help"
  [ "$("$RELAXC" --version)" = "relaxc $(sed -n 's/^Version: //p' "$LIB/pkgconfig/relaxc.pc")" ] \
    || fail "relaxc --version differs from relaxc.pc's Version"
fi

# SONAME librelaxc*.so.MAJOR, and what each library needs (libc, libm, libdl, libpthread, the
# dynamic loader; the system build's runtime also libcjson; the compiler its toolchains' runtime)
sonames() { readelf -d "$1" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p'; }
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' '; }
libs=(librelaxc_runtime)
[ -n "$RUNTIME_ONLY" ] || libs+=(librelaxc)
for l in "${libs[@]}"; do
  [ "$(sonames "$LIB/$l.so")" = "$l.so.0" ] || fail "$l.so: SONAME '$(sonames "$LIB/$l.so")', expected $l.so.0"
done
rt_needed=$(needed "$LIB/librelaxc_runtime.so")
step "librelaxc_runtime.so needs: $rt_needed"
allowed='^(libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|ld-linux[-a-z0-9_.]*\.so\.[0-9]+|libasan\.so\.[0-9]+|libubsan\.so\.[0-9]+)$'
for n in $rt_needed; do
  if [ "$n" = libcjson.so.1 ] && [ -z "$RUNTIME_ONLY" ]; then continue; fi
  [[ $n =~ $allowed ]] || fail "librelaxc_runtime.so needs $n (only libc, libm, pthreads, libdl)"
done

# the installed shared libraries export the public API and nothing else
if [ -z "$RUNTIME_ONLY" ]; then
  quiet "$PY" "$SRC/tests/tools/exported_symbols.py" "$SRC" "$LIB/librelaxc.so" "$LIB/librelaxc_runtime.so"
else # the runtime alone: no librelaxc.so
  quiet "$PY" "$SRC/tests/tools/exported_symbols.py" "$SRC" - "$LIB/librelaxc_runtime.so"
fi
step "the installed libraries export the public API only"

# ---- consumers: CMake's find_package, then pkg-config ----
quiet cmake -S "$SRC/tests/install/consumer" -B "$T/consumer" -DCMAKE_PREFIX_PATH="$PREFIX" \
  -DRX_EXAMPLE="$SRC/examples/run_artifact.c" -DCMAKE_C_FLAGS="$CFLAGS_EXTRA"
quiet cmake --build "$T/consumer"
if [ -z "$RUNTIME_ONLY" ]; then
  grep -qx "$("$RELAXC" --version)" "$T/consumer/relaxc_version.txt" \
    || fail "relaxc::relaxc --version (the consumer's build step) differs from $RELAXC --version"
fi
export PKG_CONFIG_PATH=$LIB/pkgconfig
[ "$(pkg-config --modversion relaxc-runtime)" = "$(sed -n 's/^Version: //p' "$LIB/pkgconfig/relaxc-runtime.pc")" ] \
  || fail "pkg-config --modversion relaxc-runtime"
# shellcheck disable=SC2046
quiet cc $CFLAGS_EXTRA -o "$T/run_artifact_pc" "$SRC/examples/run_artifact.c" \
  $(pkg-config --cflags --libs relaxc-runtime) -Wl,-rpath,"$LIB"
if [ -z "$RUNTIME_ONLY" ]; then
  # shellcheck disable=SC2046
  quiet cc $CFLAGS_EXTRA -o "$T/check_module_pc" "$SRC/tests/install/consumer/check_module.c" \
    $(pkg-config --cflags --libs relaxc) -Wl,-rpath,"$LIB"
fi
step "built: the CMake consumer and the pkg-config ones"
# each links the installed library, not the build tree's
for exe in "$T/consumer/run_artifact" "$T/run_artifact_pc"; do
  deps=$(ldd "$exe") # whole, not piped into grep -q (pipefail and SIGPIPE)
  [[ $deps == *"librelaxc_runtime.so.0 => $LIB/"* ]] || fail "$exe does not load $LIB/librelaxc_runtime.so.0"
done

# ---- the compiler's library: parse and check a module ----
printf 'graph_fn main(x: f32[n], y: f32[n]) -> f32[n] {\n  a = multiply(x, y)\n  b = add(a, x)\n  return b\n}\n' >"$T/model.rx"
if [ -z "$RUNTIME_ONLY" ]; then
  for exe in "$T/consumer/check_module" "$T/consumer/check_module_static" "$T/check_module_pc"; do
    run "$exe" "$T/model.rx" >"$T/out" 2>&1 || { cat "$T/out" >&2; fail "$exe model.rx"; }
    grep -q "multiply(x, y)" "$T/out" || { cat "$T/out" >&2; fail "$exe: no module printed"; }
    printf 'graph_fn main(x: f32[n]) -> f32[n] {\n  return q\n}\n' >"$T/bad.rx"
    ! run "$exe" "$T/bad.rx" >"$T/out" 2>&1 || fail "$exe accepted bad.rx"
    grep -q "bad.rx:2" "$T/out" || { cat "$T/out" >&2; fail "$exe: bad.rx's error does not name its line"; }
  done
  step "the compiler's library parses, checks and prints a module (and names an error's line)"
fi

# ---- the example on a model compiled by relaxc, against x*y + x ----
quiet "$RELAXC" compile "$T/model.rx" --target vulkan -o "$T/model.rxm"
for exe in "$T/consumer/run_artifact" "$T/consumer/run_artifact_static" "$T/run_artifact_pc"; do
  for n in 1 7 33 100 1000; do
    if ! run "$exe" "$T/model.rxm" main "$n" >"$T/out" 2>"$T/err"; then
      if grep -q "no Vulkan driver found\|no Vulkan device" "$T/err"; then
        cat "$T/err"
        echo "install_test: skipped the runs: no Vulkan device (everything before them passed)"
        exit 77
      fi
      cat "$T/out" "$T/err" >&2
      fail "$exe model.rxm main $n"
    fi
    "$PY" - "$n" "$T/out" <<'PYEOF' || fail "$exe model.rxm main $n: wrong values"
import sys
n, text = int(sys.argv[1]), open(sys.argv[2]).read()
head, _, values = text.partition(":")
got = [float(v) for v in values.split()]
# the example's inputs: x = y = 0.5 * i
want = [(0.5 * i) * (0.5 * i) + 0.5 * i for i in range(n)]
bad = [(i, got[i], want[i]) for i in range(min(n, len(got)))
       if abs(got[i] - want[i]) > 1e-6 * max(1.0, abs(want[i]))]
if len(got) != n or bad:
    print(f"main({n}): {len(got)} values, {len(bad)} wrong (first: {bad[:3]})", file=sys.stderr)
    sys.exit(1)
PYEOF
  done
  step "$(basename "$exe"): x*y + x right at n = 1, 7, 33, 100, 1000 ($(head -c 60 "$T/out")...)"
done
# a device the runtime was built without says so
if [ -n "$RUNTIME_ONLY" ] && [ "$RUNTIME_ONLY" != all ]; then
  other=cuda
  [ "$RUNTIME_ONLY" != cuda ] || other=vulkan
  ! RX_DEVICE=$other run "$T/run_artifact_pc" "$T/model.rxm" main 1 >"$T/out" 2>&1 || fail "$other opened"
  grep -q "built without the $other backend" "$T/out" || { cat "$T/out" >&2; fail "RX_DEVICE=$other: no clear error"; }
  step "RX_DEVICE=$other: $(cat "$T/out")"
fi
echo "install_test: OK"
