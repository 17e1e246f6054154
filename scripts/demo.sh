#!/usr/bin/env bash
# `make demo`: the bundled examples through relaxc.
#  1. the front end on the model examples: parse, deduce shapes, verify, print;
#  2. kernels for every target from examples/softmax.rx (CUDA C + PTX where NVRTC is present,
#     GLSL + SPIR-V, MSL), run by examples/run_kernels at two sizes;
#  3. the decoder layer compiled once for vulkan, cuda and metal into one artifact, inspected,
#     and run at two sequence lengths on the best backend present (RX_DEVICE picks another);
#  4. an LLM compiled from its Hugging Face folder, generating text.
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

echo "== relaxc compile examples/decoder.rx --target vulkan,cuda,metal -o $out/decoder.rxm"
"$relaxc" compile examples/decoder.rx --target vulkan,cuda,metal -o "$out/decoder.rxm"
"$relaxc" inspect "$out/decoder.rxm"
weights="--input attn_norm=random:256 --input wq=random:256x256 --input wk=random:256x256"
weights+=" --input wv=random:256x256 --input wo=random:256x256 --input mlp_norm=random:256"
weights+=" --input wg=random:256x688 --input wu=random:256x688 --input wd=random:688x256"
for s in 7 64; do
  echo "== relaxc run $out/decoder.rxm at sequence length $s"
  # shellcheck disable=SC2086
  "$relaxc" run "$out/decoder.rxm" --fn decoder_layer --input x=random:${s}x256 --input mask=random:${s}x${s} \
    $weights --bench 3
done

# 4. an LLM from its Hugging Face folder: the tiny Llama trained on the King James Bible
#    (tests/llm/models/kjv-llama), compiled for every target into one artifact that holds its
#    weights and tokenizer, then text generated on the best backend present.
echo "== relaxc compile tests/llm/models/kjv-llama --target vulkan,cuda,metal -o $out/kjv.rxm"
"$relaxc" compile tests/llm/models/kjv-llama --target vulkan,cuda,metal -o "$out/kjv.rxm"
for prompt in "In the beginning" "And the LORD said unto Moses"; do
  echo "== relaxc generate $out/kjv.rxm --prompt '$prompt' --max-tokens 48 --seed 1"
  "$relaxc" generate "$out/kjv.rxm" --prompt "$prompt" --max-tokens 48 --seed 1
done
