#!/bin/sh
# bench/prefix_bench.sh: the prefix-caching and chunked-prefill rows of bench/RESULTS.md (issue
# 33), measured in one run of bench_prefix (bench/prefix_bench.c) on one device (default
# vulkan:0: lavapipe here). The model is the tiny KJV Llama of tests/llm/models (f32, 4 layers,
# hidden 128) with max_position_embeddings raised to 4096 (its weights do not depend on it; RoPE
# is computed), compiled with --max-seq-len 4096 --max-batch 16, so a 1,000-token system prompt
# and a 2,000-token prompt fit.
# usage: bench/prefix_bench.sh [BUILD_DIR] [bench_prefix options...]
#   (cmake --build BUILD_DIR --target relaxc bench_prefix first)
set -eu
build=${1:-build}
[ $# -gt 0 ] && shift
src=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
m="$src/tests/llm/models/kjv-llama"
mkdir -p "$out/m"
cp "$m/model.safetensors" "$m/tokenizer.json" "$m/generation_config.json" "$out/m/"
sed 's/"max_position_embeddings": 512/"max_position_embeddings": 4096/' "$m/config.json" >"$out/m/config.json"
grep -q '"max_position_embeddings": 4096' "$out/m/config.json"
target=${TARGET:-vulkan}
"$build/relaxc" compile "$out/m" --target "$target" --dtype f32 --max-seq-len 4096 --max-batch 16 \
  -o "$out/kjv4k.rxm" >/dev/null
echo "command: bench/prefix_bench.sh $build $*; $(date -u +%Y-%m-%d)"
"$build/bench_prefix" "$out/kjv4k.rxm" --device "${RX_DEVICE:-vulkan:0}" "$@"
