#!/bin/sh
# Times `relaxc check` on a graph function of N bindings (issue 10, item 4): each binding
# `vK = add(multiply(vK-1, 1.001), vR)` nests a call (normalization names it: 2N bindings after)
# and reads a pseudo-random earlier binding vR, so no lookup finds its name at the end of a list.
#
# usage: bench/check_scale.sh [RELAXC] [N...]     (default: build/relaxc, 40000 400000)
# Prints one line per N: bindings, wall, user and system seconds, peak memory (GNU time).
set -eu
relaxc=${1:-build/relaxc}
[ $# -gt 0 ] && shift
sizes=${*:-40000 400000}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for n in $sizes; do
  awk -v n="$n" 'BEGIN {
    print "graph_fn chain(x: f32[n, 16]) -> f32[n, 16] where n <= 4096 {"
    print "  dataflow {"
    print "    v0 = add(multiply(x, 1.001), x)"
    s = 12345
    for (k = 1; k < n; k++) {
      s = (s * 1103515245 + 12345) % 2147483648
      printf "    v%d = add(multiply(v%d, 1.001), v%d)\n", k, k - 1, s % k
    }
    print "  }"
    printf "  return v%d\n}\n", n - 1
  }' >"$dir/chain$n.rx"
  /usr/bin/time -f "%e %U %S %M" -o "$dir/time" "$relaxc" check "$dir/chain$n.rx"
  read -r secs user sys kb <"$dir/time"
  echo "relaxc check: $n bindings in ${secs} s wall (${user} s user, ${sys} s system), peak ${kb} KB"
done
