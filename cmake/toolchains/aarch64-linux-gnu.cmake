# cmake/toolchains/aarch64-linux-gnu.cmake: cross-compiling relaxc for aarch64 Linux with
# Debian's cross compiler (gcc-aarch64-linux-gnu, libc6-dev-arm64-cross), and running what it
# builds under qemu-user (qemu-aarch64) on this machine: scripts/arm64.sh, docs/install.md.
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake
# Libraries come from the cross sysroot (/usr/aarch64-linux-gnu) only, so nothing of the host's
# x86-64 libraries is linked: shaderc, SPIRV-Tools, protobuf-c and libmicrohttpd have no arm64
# copies there, so the arm64 relaxc is built without them (no GLSL compilation, no ONNX import, no
# serve); cJSON is compiled in (RX_VENDORED_CJSON). Headers may come from the host's /usr/include
# (arch-independent ones: Vulkan's). The Vulkan loader and lavapipe are opened at run time: Debian's
# multiarch arm64 packages (libvulkan1:arm64, mesa-vulkan-drivers:arm64; scripts/deps.sh --arm64).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(RX_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${RX_CROSS_TRIPLE}-gcc)
set(CMAKE_FIND_ROOT_PATH /usr/${RX_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)  # protoc-c, glslangValidator: the host's
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)   # the sysroot's libraries, never the host's
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)   # the host's arch-independent headers too
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# ctest runs the built programs through qemu-user (package qemu-user). Without -L: the programs
# get the multiarch arm64 loader and libc (libc6:arm64, /lib/ld-linux-aarch64.so.1), the ones the
# Vulkan loader and lavapipe come with. `-L /usr/aarch64-linux-gnu` would give them the cross
# sysroot's ld.so while the loader's cache still finds the multiarch libc.so.6; on Debian 12 those
# differ (2.36-8cross1 and 2.36-9+deb12u*) and the process spins forever inside ld.so at the first
# dlopen of lavapipe (docs/mobile.md). Linking against the sysroot is fine: same ABI.
find_program(RX_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static)
if(RX_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${RX_QEMU_AARCH64})
endif()
set(RX_VENDORED_CJSON ON CACHE BOOL "Compile third_party/cjson into the runtime (no system libcjson)")
