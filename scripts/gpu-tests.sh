#!/usr/bin/env bash
# scripts/gpu-tests.sh: relaxc's tests that run kernels through the runtime, on a machine with an
# NVIDIA GPU: the conformance suite, attention, end to end, dynamic shapes, fusion chains, big
# grids, the compile API, weights, the LLM tests and the runtime's own tests, each on every backend
# present (CUDA through the driver and NVRTC; NVIDIA's Vulkan driver under the validation layer
# where the carried packages hold it). The emulator and lavapipe parts skip where clang or Mesa
# are absent. Builds into build-gpu (RelWithDebInfo) with the packages of bench/gpu-env.sh.
#
# usage: scripts/gpu-tests.sh [CTEST_REGEX]   (logs and the ctest summary copied to $OUT if set)
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${RX_GPU_BUILD:-build-gpu}
regex=${1:-'unit\.test_(conformance|e2e|dynshape|fuse_chain|big_grid|compile_api|weights|attention|llm)$|^runtime\.'}
cmake_deps=()
# shellcheck source=bench/gpu-env.sh
source "$root/bench/gpu-env.sh"
use_deps
find_nvrtc
find_vulkan_icd
find_validation_layer
mkdir -p "$build"
log=$build/gpu-tests.log
{
  nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv 2>&1 || true
  gen=()
  command -v ninja >/dev/null && [ ! -f "$build/CMakeCache.txt" ] && gen=(-G Ninja)
  cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRX_WERROR=OFF \
    "${cmake_deps[@]}" >"$build/gpu-configure.log" 2>&1 || { tail -30 "$build/gpu-configure.log"; exit 1; }
  t0=$SECONDS
  cmake --build "$build" -j "$(nproc)" >"$build/gpu-build-all.log" 2>&1 ||
    { grep -E 'error|Error' "$build/gpu-build-all.log" | head -30; exit 1; }
  echo "built everything in $((SECONDS - t0)) s"
  (cd "$build" && ctest -R "$regex" -j "$(nproc)" --output-on-failure --timeout 500)
  echo "gpu-tests: ctest exit $?"
} 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
if [ -n "${OUT:-}" ] && [ -d "${OUT:-}" ]; then
  cp "$log" "$OUT/" && [ -f "$build/Testing/Temporary/LastTest.log" ] &&
    cp "$build/Testing/Temporary/LastTest.log" "$OUT/gpu-tests-LastTest.log"
fi
exit "$rc"
