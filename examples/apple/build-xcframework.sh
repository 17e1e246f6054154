#!/usr/bin/env bash
# examples/apple/build-xcframework.sh: RelaxcRuntime.xcframework, the relaxc runtime built alone with
# its Metal backend (-DRX_RUNTIME_ONLY=ON -DRX_BACKENDS=metal) as static libraries for macOS (arm64
# and x86_64), iOS devices (arm64) and the iOS simulator (arm64 and x86_64), each with the headers
# and the Clang module map (include/module.modulemap) that Swift imports; Package.swift uses it.
# Runs on a Mac with Xcode (xcodebuild, the SDKs) and CMake >= 3.20; docs/mobile.md.
#   examples/apple/build-xcframework.sh [OUT_DIR]    (default: examples/apple)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$here}"
work="$root/build-apple"
command -v xcodebuild >/dev/null || { echo "build-xcframework.sh: needs Xcode (xcodebuild)" >&2; exit 1; }

# slice: name, CMAKE_SYSTEM_NAME, SDK, architectures, deployment target
slices=(
  "macos Darwin macosx arm64;x86_64 13.0"
  "ios iOS iphoneos arm64 16.0"
  "ios-simulator iOS iphonesimulator arm64;x86_64 16.0"
)
args=()
for s in "${slices[@]}"; do
  read -r name system sdk archs target <<<"$s"
  b="$work/$name"
  cmake -S "$root" -B "$b" -DCMAKE_BUILD_TYPE=Release -DRX_RUNTIME_ONLY=ON -DRX_BACKENDS=metal \
    -DCMAKE_SYSTEM_NAME="$system" -DCMAKE_OSX_SYSROOT="$sdk" -DCMAKE_OSX_ARCHITECTURES="$archs" \
    -DCMAKE_OSX_DEPLOYMENT_TARGET="$target" -DCMAKE_INSTALL_PREFIX="$b/install"
  cmake --build "$b" -j
  cmake --install "$b"
  rm -f "$b/install/include/module.modulemap"
  cp "$here/include/module.modulemap" "$b/install/include/"
  args+=(-library "$b/install/lib/librelaxc_runtime.a" -headers "$b/install/include")
done
rm -rf "$out/RelaxcRuntime.xcframework"
xcodebuild -create-xcframework "${args[@]}" -output "$out/RelaxcRuntime.xcframework"
echo "build-xcframework.sh: $out/RelaxcRuntime.xcframework"
