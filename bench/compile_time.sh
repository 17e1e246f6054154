#!/bin/sh
# Compile time of the text-format Llama decoder at Llama-2-7B shapes (bench/decoder.py --shape 7b
# --layout hf, f16) for vulkan,cuda,metal (issue 16): for each layer count, a cold compile (an
# empty kernel cache in a temporary directory, never the user's) and then a warm one (the same
# cache), each writing an artifact; the two artifacts are compared byte for byte.
#
# usage: bench/compile_time.sh [RELAXC] [LAYERS...]   (default: build/relaxc, 1 8 32)
#        JOBS=N bench/compile_time.sh ...              (relaxc -j N; default: the online CPUs)
# Prints one row per compile: layers, cache, wall, user + system CPU seconds (GNU time), kernels
# per target, artifact bytes, and the load average before it (the machine may be shared).
set -eu
relaxc=${1:-build/relaxc}
[ $# -gt 0 ] && shift
layers=${*:-1 8 32}
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
jobs=${JOBS:+-j $JOBS}
echo "| layers | cache | wall s | cpu s (user+sys) | kernels | artifact bytes | load before |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
for n in $layers; do
  python3 "$here/decoder.py" "$n" f16 --shape 7b --layout hf > "$dir/d$n.rx"
  rm -rf "$dir/cache"
  for cache in cold warm; do
    load=$(cut -d' ' -f1 /proc/loadavg)
    # shellcheck disable=SC2086 # $jobs is two words or none
    /usr/bin/time -f "%e %U %S" -o "$dir/time" "$relaxc" compile "$dir/d$n.rx" \
      --target vulkan,cuda,metal $jobs --quiet --cache-dir "$dir/cache" -o "$dir/$cache.rxm" \
      > "$dir/out" 2>&1 || { cat "$dir/out"; exit 1; }
    read -r wall user sys < "$dir/time"
    kernels=$(sed -n 's/.*kernels: \([^;]*\);.*/\1/p' "$dir/out")
    bytes=$(wc -c < "$dir/$cache.rxm")
    cpu=$(echo "$user $sys" | awk '{printf "%.2f", $1 + $2}')
    echo "| $n | $cache | $wall | $cpu | $kernels | $bytes | $load |"
  done
  cmp -s "$dir/cold.rxm" "$dir/warm.rxm" || { echo "cold and warm artifacts differ ($n layers)"; exit 1; }
done
