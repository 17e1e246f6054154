#!/bin/sh
# scripts/cross-aarch64.sh: builds the relaxc runtime (runtime/ + base/base.c) for aarch64 Linux
# with Debian's cross toolchain, the same C that Android's NDK compiles. The result is
# build-aarch64/librelaxc_runtime.a; with an arm64 cJSON it also links the runtime tests.
#
# Needs: gcc-aarch64-linux-gnu, libcjson-dev and libvulkan-dev (their headers are
# architecture-independent: only cjson/ and vulkan/ (+ vk_video/) are exposed to the cross
# compiler, never the host's /usr/include as a whole).
#
# Linking executables needs libcjson for arm64, which Debian provides only with multiarch:
#   dpkg --add-architecture arm64 && apt-get update && apt-get install libcjson-dev:arm64
# Without it the script stops after the static library (compile-and-archive check) and says so.
# The Vulkan and CUDA drivers are not needed at build time (dlopen at run time).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/build-aarch64}
CC=${CC:-aarch64-linux-gnu-gcc}
AR=${AR:-aarch64-linux-gnu-ar}
command -v "$CC" >/dev/null || { echo "cross-aarch64: $CC not found (Debian: gcc-aarch64-linux-gnu)"; exit 1; }
for h in /usr/include/cjson/cJSON.h /usr/include/vulkan/vulkan.h; do
  [ -f "$h" ] || { echo "cross-aarch64: $h not found (Debian: libcjson-dev, libvulkan-dev)"; exit 1; }
done
mkdir -p "$OUT/include" "$OUT/obj"
for d in cjson vulkan vk_video; do
  [ -d /usr/include/$d ] && ln -sfn /usr/include/$d "$OUT/include/$d"
done
CFLAGS="-std=c11 -O2 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-unused-parameter -D_POSIX_C_SOURCE=200809L"
INC="-I$ROOT -I$ROOT/include -I$OUT/include"
OBJS=
for src in runtime/runtime.c runtime/expr.c runtime/library.c runtime/vulkan/vulkan.c \
           runtime/cuda/cuda.c base/base.c; do
  obj="$OUT/obj/$(echo "$src" | tr / _ | sed 's/\.c$/.o/')"
  echo "  CC  $src"
  $CC $CFLAGS $INC -c "$ROOT/$src" -o "$obj"
  OBJS="$OBJS $obj"
done
rm -f "$OUT/librelaxc_runtime.a"
$AR rcs "$OUT/librelaxc_runtime.a" $OBJS
file "$OUT/obj/runtime_vulkan_vulkan.o" | sed "s|$OUT/||"
echo "cross-aarch64: built $OUT/librelaxc_runtime.a"
if [ -f /usr/lib/aarch64-linux-gnu/libcjson.so ] || [ -f /usr/lib/aarch64-linux-gnu/libcjson.a ]; then
  for t in expr_test vulkan_test cuda_test; do
    $CC $CFLAGS $INC -I$ROOT/tests/runtime "$ROOT/tests/runtime/$t.c" "$OUT/librelaxc_runtime.a" \
      -L/usr/lib/aarch64-linux-gnu -lcjson -ldl -lpthread -o "$OUT/rt_$t"
    echo "cross-aarch64: linked $OUT/rt_$t"
  done
else
  echo "cross-aarch64: no arm64 libcjson (needs multiarch, see the header of this script):"
  echo "  compiled and archived only; executables not linked"
fi
