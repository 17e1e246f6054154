#!/usr/bin/env bash
# Runs relaxc over every .rx and .onnx file under tests/ and writes what it prints (stdout,
# stderr, exit status) for each command into OUTDIR, one file per file x command, so that two
# builds can be compared with `diff -r`. A refactoring that changes no behaviour leaves the
# directories identical (issue 11: "relaxc output on every test file is byte-identical").
#   scripts/golden-outputs.sh BUILD_DIR OUTDIR
set -euo pipefail
build=$(cd "$1" && pwd)
out=$2
cd "$(dirname "$0")/.."
mkdir -p "$out"
out=$(cd "$out" && pwd)
export RELAXC="$build/relaxc" OUT="$out"
export RELAXC_NO_CACHE=1 # every compile cold, nothing left in the kernel cache under $HOME
one() {
  f=$1
  key=$(echo "$f" | tr '/' '_')
  tmp=$(mktemp -d)
  run() { # run NAME CMD...: record stdout, stderr and the exit status of CMD
    local name=$1
    shift
    set +e
    "$@" >"$tmp/o" 2>"$tmp/e"
    local rc=$?
    set -e
    { echo "## rc=$rc"; sed "s|$tmp|TMP|g" "$tmp/o"; echo "## stderr"; sed "s|$tmp|TMP|g" "$tmp/e"; } \
      >"$OUT/$key.$name"
  }
  case "$f" in
  *.rx)
    run print "$RELAXC" print "$f"
    for t in cuda vulkan metal vulkan-adreno; do
      run "schedule-$t" "$RELAXC" schedule "$f" --target "$t"
      run "codegen-$t" "$RELAXC" codegen "$f" --target "$t"
    done
    ;;
  *.onnx)
    run import "$RELAXC" import "$f"
    ;;
  esac
  run compile "$RELAXC" compile "$f" --target vulkan,cuda,metal --no-nvrtc --dump-after all \
    -o "$tmp/m.rxm"
  if [ -f "$tmp/m.rxm" ]; then
    run inspect "$RELAXC" inspect "$tmp/m.rxm"
    sha256sum <"$tmp/m.rxm" >"$OUT/$key.artifact-sha256"
  fi
  rm -rf "$tmp"
}
export -f one
find tests -name '*.rx' -o -name '*.onnx' | sort | xargs -P "$(nproc)" -I{} bash -c 'one {}'
echo "$(ls "$out" | wc -l) outputs in $out"
