#!/bin/sh
# bench/ragged_bench.sh: ragged_attention over packed sequences (no padding) against the same
# sequences padded to the longest, on one device (default vulkan:0; lavapipe here). Three
# artifacts of causal attention, f32, H heads of dim D:
#   packed: ragged_attention(q, k, v, indptr) over total = sum of lengths rows
#   padded: the same ragged_attention kernel with every sequence padded to the longest (b * Lmax
#           rows): what padding costs the same kernel
#   dense:  attention(q, k, v, causal=true) over [b, H, Lmax, D]: the padded layout through
#           relaxc's dense attention kernel
# Each is run with `relaxc run --bench N` (mean per call, after one warm call).
# usage: bench/ragged_bench.sh [BUILD_DIR] [N] [LENGTHS (comma-separated)]
set -eu
build=${1:-build}
n=${2:-5}
lens=${3:-1,7,16,17,100}
H=${H:-4}
D=${D:-64}
dev=${RX_DEVICE:-vulkan:0}
target=${TARGET:-vulkan}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
relaxc="$build/relaxc"
b=$(echo "$lens" | tr ',' '\n' | wc -l)
total=$(echo "$lens" | tr ',' '+' | bc)
lmax=$(echo "$lens" | tr ',' '\n' | sort -n | tail -1)
padded=$((b * lmax))
# offsets as .npy (i32): python3's standard library writes the format
npy_i32() { # file, values...
  python3 -c 'import struct, sys
v = [int(x) for x in sys.argv[2:]]
h = "{\x27descr\x27: \x27<i4\x27, \x27fortran_order\x27: False, \x27shape\x27: (%d,), }" % len(v)
h += " " * (63 - (10 + len(h)) % 64) + "\n"
open(sys.argv[1], "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + struct.pack("<%di" % len(v), *v))' "$@"
}
acc=0
set --
for l in $(echo "$lens" | tr ',' ' '); do set -- "$@" $acc; acc=$((acc + l)); done
npy_i32 "$out/packed.npy" "$@" $acc
set --
acc=0
for _ in $(seq "$b"); do set -- "$@" $acc; acc=$((acc + lmax)); done
npy_i32 "$out/padded.npy" "$@" $acc
cat >"$out/ragged.rx" <<EOT
graph_fn main(q: f32[total, $H, $D], k: f32[total, $H, $D], v: f32[total, $H, $D], indptr: i32[nb]) {
  y = ragged_attention(q, k, v, indptr)
  return y
}
EOT
cat >"$out/dense.rx" <<EOT
graph_fn main(q: f32[b, $H, s, $D], k: f32[b, $H, s, $D], v: f32[b, $H, s, $D]) {
  y = attention(q, k, v, causal=true)
  return y
}
EOT
"$relaxc" compile "$out/ragged.rx" --target "$target" -o "$out/ragged.rxm" >/dev/null
"$relaxc" compile "$out/dense.rx" --target "$target" -o "$out/dense.rxm" >/dev/null
run() { # name, artifact, inputs...
  name=$1
  art=$2
  shift 2
  ms=$("$relaxc" run "$art" --device "$dev" "$@" --bench "$n" | sed -n "s/^bench: .*, \([0-9.]*\) ms per call.*/\1/p")
  echo "$name: $ms ms per call"
}
echo "lengths {$lens}: b = $b, total = $total rows, padded to $lmax: $padded rows; H = $H, D = $D, f32, causal; $dev, mean of $n calls"
rag="$H""x$D"
run "packed ragged_attention ($total rows)" "$out/ragged.rxm" --input q=random:${total}x$rag \
  --input k=random:${total}x$rag --input v=random:${total}x$rag --input indptr="$out/packed.npy"
run "padded ragged_attention ($padded rows)" "$out/ragged.rxm" --input q=random:${padded}x$rag \
  --input k=random:${padded}x$rag --input v=random:${padded}x$rag --input indptr="$out/padded.npy"
den="${b}x${H}x${lmax}x$D"
run "padded dense attention [$b, $H, $lmax, $D]" "$out/dense.rxm" --input q=random:$den \
  --input k=random:$den --input v=random:$den
