#!/usr/bin/env bash
# scripts/arm64.sh: relaxc on aarch64 Linux, cross-built with Debian's cross compiler and run under
# qemu-user on Debian's arm64 lavapipe, as on an arm64 phone's or server's CPU (issue 34; what it
# catches: char is unsigned there, other alignment and page-size assumptions; docs/install.md).
#   bash scripts/arm64.sh [HOST_BUILD]     CI's arm64 step (.ci/run); HOST_BUILD defaults to build
#   bash scripts/arm64.sh --sizes          the aarch64 runtime-only library sizes (docs/install.md)
# Needs `bash scripts/deps.sh --arm64` (gcc-aarch64-linux-gnu, libc6-dev-arm64-cross, qemu-user,
# libvulkan1:arm64, mesa-vulkan-drivers:arm64; multiarch arm64 enabled). Steps:
#   1. cross-build the runtime, the CLI and the runtime's tests into build-arm64
#      (cmake/toolchains/aarch64-linux-gnu.cmake): the arm64 relaxc has no shaderc, SPIRV-Tools,
#      ONNX import or serve (no arm64 copies in the cross sysroot): it runs, inspects and generates
#      from artifacts; the x86-64 relaxc of HOST_BUILD compiles them;
#   2. the runtime's tests that need no compiler (runtime.expr, .replay, .backends, .vulkan, .vm)
#      under qemu-aarch64 through ctest (CMAKE_CROSSCOMPILING_EMULATOR), none may skip;
#   3. tests/arm64/check.py: tests/e2e's models and `relaxc generate` on the tiny Llama, arm64
#      against x86-64 and against the NumPy / transformers references.
set -euo pipefail
cd "$(dirname "$0")/.."
ARM_BUILD=${ARM_BUILD:-build-arm64}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
TOOLCHAIN=$PWD/cmake/toolchains/aarch64-linux-gnu.cmake

for need in aarch64-linux-gnu-gcc qemu-aarch64; do
  if ! command -v "$need" >/dev/null 2>&1; then
    echo "arm64.sh: $need not found: run bash scripts/deps.sh --arm64" >&2
    exit 1
  fi
done
if [ ! -f /usr/share/vulkan/icd.d/lvp_icd.aarch64.json ] || [ ! -e /usr/lib/aarch64-linux-gnu/libvulkan.so.1 ]; then
  echo "arm64.sh: Debian's arm64 lavapipe or Vulkan loader is missing: run bash scripts/deps.sh --arm64" >&2
  exit 1
fi

if [ "${1:-}" = --sizes ]; then
  # librelaxc_runtime.so per backend and build type, stripped (docs/install.md's table)
  for bt in Release MinSizeRel; do
    for be in vulkan cuda all; do
      dir=build-arm64-rt-$be-$bt
      cmake -S . -B "$dir" -DCMAKE_TOOLCHAIN_FILE="$TOOLCHAIN" -DCMAKE_BUILD_TYPE=$bt \
        -DRX_RUNTIME_ONLY=ON -DRX_BACKENDS=$be >/dev/null
      cmake --build "$dir" -j"$JOBS" --target relaxc_runtime_shared >/dev/null
      so=$(find "$dir" -maxdepth 1 -name 'librelaxc_runtime.so.*.*.*' | head -1)
      aarch64-linux-gnu-strip -o "$dir/stripped.so" "$so"
      echo "aarch64 $be $bt: $(stat -c %s "$dir/stripped.so") bytes"
    done
  done
  exit 0
fi

HOST_BUILD=${1:-build}
t0=$(date +%s)
echo "== arm64: cross-building the runtime, relaxc and the runtime's tests in $ARM_BUILD"
cmake --no-warn-unused-cli -S . -B "$ARM_BUILD" -DCMAKE_TOOLCHAIN_FILE="$TOOLCHAIN" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$ARM_BUILD" -j"$JOBS" --target relaxc relaxc_runtime_shared rt_expr_test \
  rt_replay_test rt_backends_test rt_vulkan_test rt_vm_test rt_kernels >/dev/null
if ! readelf -h "$ARM_BUILD/relaxc" | grep -q 'Machine:.*AArch64'; then
  echo "arm64.sh: $ARM_BUILD/relaxc is not an AArch64 program" >&2
  exit 1
fi
if [ ! -x "$HOST_BUILD/relaxc" ]; then
  echo "== arm64: building the x86-64 relaxc in $HOST_BUILD (it compiles the artifacts)"
  cmake -S . -B "$HOST_BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$HOST_BUILD" -j"$JOBS" --target relaxc >/dev/null
fi
t1=$(date +%s)

echo "== arm64: the runtime's tests under qemu-aarch64 on the arm64 lavapipe"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! (cd "$ARM_BUILD" && ctest -R '^runtime[.](expr|replay|backends|vulkan|vm)$' \
  --no-tests=error --output-on-failure) >"$log" 2>&1; then
  cat "$log"
  exit 1
fi
grep -E '^ *[0-9]+/[0-9]+ Test|tests passed' "$log"
if grep -q 'Skipped' "$log"; then
  echo "arm64.sh: a runtime test skipped under qemu (no arm64 Vulkan device?)" >&2
  exit 1
fi

echo "== arm64: tests/e2e and relaxc generate, arm64 against x86-64 and the references"
work="$ARM_BUILD/check"
rm -rf "$work"
python3 tests/arm64/check.py --src . --host-relaxc "$HOST_BUILD/relaxc" \
  --arm-relaxc "$ARM_BUILD/relaxc" --emu qemu-aarch64 --work "$work"

echo "== arm64: examples/android against the aarch64 runtime built alone (Vulkan), as the NDK would"
# the aarch64 Linux toolchain stands in for the NDK's (docs/mobile.md): same options, same package
rt="$ARM_BUILD/runtime-vulkan"
cmake -S . -B "$rt" -DCMAKE_TOOLCHAIN_FILE="$TOOLCHAIN" -DCMAKE_BUILD_TYPE=Release \
  -DRX_RUNTIME_ONLY=ON -DRX_BACKENDS=vulkan -DCMAKE_INSTALL_PREFIX="$PWD/$rt/install" >/dev/null
cmake --build "$rt" -j"$JOBS" >/dev/null
cmake --install "$rt" >/dev/null
cmake -S examples/android -B "$ARM_BUILD/android-example" -DCMAKE_TOOLCHAIN_FILE="$TOOLCHAIN" \
  -Drelaxc_DIR="$PWD/$rt/install/lib/cmake/relaxc" >/dev/null
cmake --build "$ARM_BUILD/android-example" >/dev/null
printf 'graph_fn main(x: f32[n], y: f32[n]) -> f32[n] {\n  a = multiply(x, y)\n  b = add(a, x)\n  return b\n}\n' >"$work/xy.rx"
"$HOST_BUILD/relaxc" compile "$work/xy.rx" --target vulkan -o "$work/xy.rxm" >/dev/null
got=$(VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/lvp_icd.aarch64.json \
  qemu-aarch64 "$ARM_BUILD/android-example/run_artifact" "$work/xy.rxm" main 7)
want="main(7) on vulkan, relaxc $("$HOST_BUILD/relaxc" --version | awk '{print $2}'): 0 0.75 2 3.75 6 8.75 12"
echo "$got"
if [ "$got" != "$want" ]; then
  echo "arm64.sh: examples/android's run_artifact printed '$got', expected '$want'" >&2
  exit 1
fi
t2=$(date +%s)
echo "arm64.sh: build $((t1 - t0)) s, runs under qemu and the example $((t2 - t1)) s"
