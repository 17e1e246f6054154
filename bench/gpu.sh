#!/usr/bin/env bash
# bench/gpu.sh: the one command that measures relaxc on an NVIDIA GPU (issues 12, 13, 14, 31).
#
# Builds relaxc (RelWithDebInfo, into build-gpu) and bench/llm_bench.c, prints the device, then
# runs bench/gpu_bench.py, most important rows first (issue 31): the references of the run (copy
# bandwidth, matrix peak), a random-weight 7B-shaped Llama end to end (decode and prefill beside
# transformers eager and torch.compile, % of the floor, launches per step, CUDA graph replay on
# and off), the decode GEMV at 1..16 rows and the f16/bf16 GEMM at the projection shapes beside
# cuBLAS, decode and prefill attention beside scaled_dot_product_attention, then the per-kernel
# table, the quantized GEMVs and dequantizing GEMM, and the kernels again on the NVIDIA Vulkan
# driver. Each part has a share of the time budget (--budget, default 560 s for everything, the
# build included, so that one 10-minute call of a 15-minute GPU session suffices:
# bench/gpu-plan.md) and a part that fails says why while the others go on. It prints a Markdown
# table per part and writes a report whose last table holds rows for bench/RESULTS.md (--out,
# default bench/gpu-results.md; raw figures and the units done beside it as .json), rewritten
# after every measured row.
#
# usage: bench/gpu.sh [--smoke] [--out FILE] [--resume REPORT] [--device cuda:0]
#                     [--parts copy,model,gemm,attention,kernels,quant,vulkan]
#                     [--layers N] [--models 7b[,8b]] [--budget SECONDS] [--build-dir DIR]
#                     [--compile-mode MODE] [--cuda-target TARGET] [--keep]
#        bench/gpu.sh --fetch-deps
#
#   parts run most important first (issue 31): the 7B model's decode and prefill beside
#                 transformers and torch.compile, then the GEMV/GEMM tables, then attention, then
#                 the rest; each gets a share of the budget and a part that ends early leaves its
#                 time to the next. Default budget 560 s: one 600 s device call, the build
#                 included (bench/gpu-plan.md)
#   --resume R    continue the report R (its directory, .md or .json; a report that came back
#                 from an earlier call, e.g. bench/runs/DATE-h200): only the rows and model
#                 measurements it lacks are measured, and --out gets the merged report
#   $OUT          where set (the device tool), the report and its .json are copied there after
#                 every measured row and the log is written there as it grows, so a call killed
#                 at its time limit still brings back every row measured
#
#   --smoke       every part at tiny shapes on whatever is here (the runtime's default device,
#                 PyTorch on the CPU): a test of the script, its figures measure nothing
#   --fetch-deps  on a machine with Debian's archive (not the GPU machine, which has no network):
#                 downloads the .deb files of what the build needs and the GPU image may lack
#                 (cJSON, the Vulkan headers and loader, shaderc, glslang, SPIRV-Tools, glvnd)
#                 into build-gpu-deps/debs; carry build-gpu-deps to the GPU machine, where this
#                 script unpacks them into build-gpu-deps/root (never into /) and builds with them
#
# Without shaderc the build still succeeds (targets/targets.cmake: each missing toolchain leaves its
# macro undefined) and relaxc compiles for CUDA; only `--target vulkan` fails, so the vulkan part
# says why and the others run. cJSON and the Vulkan headers are required by runtime/runtime.cmake:
# without them (and without build-gpu-deps) the configure step stops and says what to install.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

usage() {
  cat <<'EOF'
usage: bench/gpu.sh [--smoke] [--out FILE] [--resume REPORT] [--device cuda:0]
                    [--parts copy,model,gemm,attention,kernels,quant,vulkan]
                    [--layers N] [--models 7b[,8b]] [--budget SECONDS] [--build-dir DIR]
                    [--compile-mode MODE] [--cuda-target TARGET] [--keep]
       bench/gpu.sh --fetch-deps
EOF
}

die() {
  echo "gpu.sh: error: $*" >&2
  exit 2
}

smoke=0
fetch=0
resume=
out=bench/gpu-results.md
build="build-gpu"
budget=
py_args=()
orig_args=("$@")
while [ $# -gt 0 ]; do
  opt=$1
  val=
  case $opt in
    --*=*) val=${opt#*=}; opt=${opt%%=*} ;;
  esac
  case $opt in
    --smoke) smoke=1; py_args+=(--smoke) ;;
    --fetch-deps) fetch=1 ;;
    --keep) py_args+=(--keep) ;;
    -h | --help) usage; exit 0 ;;
    --out | --budget | --build-dir | --device | --parts | --layers | --models | --compile-mode | --cuda-target | --resume)
      if [ -z "$val" ]; then
        [ $# -ge 2 ] || die "$opt needs a value"
        val=$2
        shift
      fi
      case $opt in
        --out) out=$val ;;
        --budget) budget=$val ;;
        --build-dir) build=$val ;;
        --resume) resume=$val ;;
        *) py_args+=("$opt" "$val") ;;
      esac
      ;;
    *) usage >&2; die "unknown option '$1'" ;;
  esac
  shift
done
if [ -z "$budget" ]; then
  if [ "$smoke" = 1 ]; then budget=1500; else budget=560; fi
fi
case $budget in '' | *[!0-9]*) die "--budget takes whole seconds, got '$budget'" ;; esac
if [ -n "$resume" ]; then
  # checked before the build: a wrong path must not cost a GPU session its build time
  r=$resume
  [ -d "$r" ] && r=$(ls -t "$r"/gpu-results*.json "$r"/*.json 2>/dev/null | head -1)
  case $r in *.md) r=${r%.md}.json ;; esac
  [ -n "$r" ] && [ -f "$r" ] || die "--resume $resume: no report (.json) there"
  grep -q '"format": "relaxc-gpu-bench"' "$r" ||
    die "--resume $resume: $r is no report of this script with units (written before --resume?)"
  py_args+=(--resume "$r")
fi

# shellcheck source=bench/gpu-env.sh
source "$root/bench/gpu-env.sh"

print_device() {
  echo "== device"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap,clocks.max.sm,clocks.max.mem \
      --format=csv || true
  else
    echo "nvidia-smi: not found (no NVIDIA driver here)"
  fi
  echo "host: $(uname -srm), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo) memory"
  df -h "$root" | tail -1 | awk '{print "disk: " $4 " free under " $6}'
}

build_relaxc() {
  echo "== build ($build, RelWithDebInfo)"
  local gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  # an existing build dir keeps its generator
  [ -f "$build/CMakeCache.txt" ] && gen=()
  local t0=$SECONDS
  # RX_WERROR=OFF: another compiler's new warnings must not stop a benchmark
  if ! cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRX_WERROR=OFF \
    "${cmake_deps[@]}" >"$build/gpu-configure.log" 2>&1; then
    tail -20 "$build/gpu-configure.log"
    echo "gpu.sh: cmake configure failed (log: $build/gpu-configure.log); bench/gpu.sh --fetch-deps" \
      "on a machine with Debian's archive gets the missing packages"
    return 1
  fi
  grep -E 'relaxc: |ONNX frontend' "$build/gpu-configure.log" || true
  if ! cmake --build "$build" -j "$(nproc)" --target relaxc >"$build/gpu-build.log" 2>&1; then
    tail -30 "$build/gpu-build.log"
    echo "gpu.sh: build failed (log: $build/gpu-build.log)"
    return 1
  fi
  echo "built $build/relaxc in $((SECONDS - t0)) s"
  local cjson
  cjson=$(sed -n 's/^RX_CJSON_LIBRARY:FILEPATH=//p' "$build/CMakeCache.txt")
  if "${CC:-cc}" -O2 -std=c11 -I"$root/include" -I"$root" "$root/bench/llm_bench.c" "$build/librelaxc_runtime.a" \
    "$cjson" -Wl,-rpath,"$(dirname "$cjson")" -ldl -lpthread -lm -o "$build/llm_bench"; then
    echo "built $build/llm_bench"
  else
    rm -f "$build/llm_bench"
    echo "gpu.sh: bench/llm_bench.c did not build: the model part uses relaxc generate alone"
  fi
}

run_all() {
  local t0=$SECONDS
  local commit=${RX_BENCH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo '?')}
  echo "gpu.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $commit, budget ${budget} s"
  use_deps
  print_device
  build_relaxc || return 1
  find_nvrtc
  find_vulkan_icd
  echo "== python"
  python3 - <<'EOF' || return 1
import sys
print("python", sys.version.split()[0])
try:
    import numpy
    print("numpy", numpy.__version__)
except ImportError:
    sys.exit("gpu.sh: numpy is missing (bench/requirements-gpu.txt)")
try:
    import torch
    print("torch", torch.__version__, "cuda", torch.version.cuda,
          "device", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")
except ImportError:
    print("torch: not installed (the PyTorch comparisons and the model part are skipped)")
try:
    import transformers
    print("transformers", transformers.__version__)
except ImportError:
    print("transformers: not installed (the model part is skipped)")
EOF
  local left=$((budget - (SECONDS - t0)))
  if [ "$left" -lt 60 ]; then
    echo "gpu.sh: only ${left} s of the budget left after the build"
    return 1
  fi
  local driver=()
  [ -x "$build/llm_bench" ] && driver=(--driver "$build/llm_bench")
  local shown="bench/gpu.sh"
  [ ${#orig_args[@]} -gt 0 ] && shown+=" ${orig_args[*]}"
  local mirror=()
  [ -n "${OUT:-}" ] && [ -d "${OUT:-}" ] && mirror=(--mirror "$OUT")
  local cmd=(python3 -u "$root/bench/gpu_bench.py" --relaxc "$build/relaxc" "${driver[@]}"
    --workdir "$build/bench-work" --budget "$((left - 25))" --out "$out" --command "$shown"
    "${mirror[@]}" "${py_args[@]}")
  echo "== bench: ${cmd[*]}"
  # the script keeps to its budget; timeout is the backstop (SIGTERM: it writes what it has)
  if command -v timeout >/dev/null; then
    PYTHONUNBUFFERED=1 timeout --kill-after=10 "$((left - 5))" "${cmd[@]}"
  else
    PYTHONUNBUFFERED=1 "${cmd[@]}"
  fi
}

copy_out() {
  [ -n "${OUT:-}" ] && [ -d "${OUT:-}" ] || return 0
  local f
  for f in "$out" "${out%.md}.json" "$log"; do
    [ -f "$f" ] && { [ "$f" -ef "$OUT/$(basename "$f")" ] || cp "$f" "$OUT/"; }
  done
  echo "gpu.sh: report, raw figures and log copied to $OUT"
}

if [ "$fetch" = 1 ]; then
  fetch_deps
  exit 0
fi
cmake_deps=()
mkdir -p "$build" "$(dirname "$out")"
log=$build/gpu-bench.log
# the log goes to $OUT as it grows (a call killed at its limit still brings it back)
logs=("$log")
[ -n "${OUT:-}" ] && [ -d "${OUT:-}" ] && logs+=("$OUT/$(basename "$log")")
set +e
run_all 2>&1 | tee "${logs[@]}"
rc=${PIPESTATUS[0]}
set -e
copy_out
echo "gpu.sh: exit $rc; log $log"
exit "$rc"
