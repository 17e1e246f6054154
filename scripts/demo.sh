#!/usr/bin/env bash
# `make demo`: the bundled examples through what relaxc does today.
#  1. the front end on the model examples: parse, deduce shapes, verify, print;
#  2. kernels for every target from examples/softmax.rx (CUDA C + PTX where NVRTC is present,
#     GLSL + SPIR-V, MSL);
#  3. the softmax run on the best backend present (RX_DEVICE picks another) at two sizes.
# Compiling whole models into one artifact and `relaxc run` come with the next issue.
set -euo pipefail
build=${1:-build}
relaxc="$build/relaxc"
out="$build/demo"
mkdir -p "$out"
for f in examples/mlp.rx examples/decoder.rx; do
  echo "== relaxc print $f   (every binding carries its deduced struct info)"
  "$relaxc" print "$f"
  echo
done
for t in "cuda -arch=sm_80" "vulkan-lavapipe" "vulkan" "metal"; do
  dir="$out/softmax-$(echo "$t" | tr -c 'a-z0-9_\n' '_')"
  echo "== relaxc codegen examples/softmax.rx --target '$t' -o $dir"
  "$relaxc" codegen examples/softmax.rx --target "$t" -o "$dir"
  ls "$dir"
done
# the best backend present: CUDA where a GPU and its driver are, else Vulkan
dir="$out/softmax-vulkan_lavapipe"
if [ -e /dev/nvidia0 ] && ldconfig -p 2>/dev/null | grep -q libcuda.so.1; then
  dir="$out/softmax-cuda__arch_sm_80"
  export RX_DEVICE=${RX_DEVICE:-cuda:0}
fi
for sizes in "n=3 m=7" "n=5 m=1000"; do
  echo "== run_kernels $dir softmax $sizes"
  # shellcheck disable=SC2086
  "$build/run_kernels" "$dir" softmax $sizes
done
