#!/usr/bin/env bash
# Installs the Debian packages relaxc needs, only those missing. Idempotent and quiet when
# everything is present. Called by `make demo` and `make test`.
#   bash scripts/deps.sh --check [BUILD_DIR...]   lists the packages the build and the tests use
#     that PACKAGES does not name (exit status 1 if any); see scripts/deps-check.sh. CI runs it.
#   bash scripts/deps.sh --arm64   PACKAGES and ARM64_PACKAGES: the aarch64 cross build and its
#     runs under qemu-user (scripts/arm64.sh; about 300 MB more, so not in the default install).
#     Enables dpkg's arm64 architecture first (multiarch) when it is not. CI runs it.
# Needs Debian's apt and dpkg (what it installs with); scripts/fresh-chroot.sh tries it all in
# a fresh bookworm chroot.
set -euo pipefail

# package -> why
PACKAGES=(
  gcc            # the C11 compiler
  libc6-dev      # the C library's headers and crt files (gcc only recommends it; we install
                 # without recommends)
  make
  cmake          # >= 3.20
  pkgconf        # pkg-config: shaderc's version for the kernel cache's key (targets/targets.cmake);
                 # tests/install builds against the installed relaxc-runtime.pc and relaxc.pc
  python3        # runs LLVM lit
  python3-venv   # python3 -m venv: scripts/serve-venv.sh makes the openai client's environment
                 # of relaxc serve's client tests (tests/serve; pip fills it from PyPI)
  llvm-14-tools  # lit, FileCheck, not
  llvm           # llvm-ar, llvm-ranlib: CMake archives with them when CC is clang (make fuzz)
                 # and they are installed, as on the CI image; named so every machine does the same
  libshaderc-dev # GLSL -> SPIR-V in process (static libshaderc_combined on Debian)
  glslang-dev    # glslang's static libraries, which Debian's libshaderc_combined needs
  spirv-tools    # SPIR-V validation (spvValidate) and disassembly
  clang-16       # the SIMT emulator compiles emitted CUDA C and MSL for the CPU (_Float16)
  libclang-rt-16-dev # clang 16's sanitizer and libFuzzer runtimes: make asan's kernels, tests/fuzz
  libcjson-dev   # kernels.json in the runtime
  libmicrohttpd-dev # `relaxc serve`'s HTTP server (optional to the build: without it relaxc has no
                    # serve command; tools/serve.cmake)
  libvulkan-dev  # Vulkan headers (the loader itself is opened with dlopen)
  libvulkan1     # the Vulkan loader
  mesa-vulkan-drivers     # lavapipe: Vulkan on the CPU, how CI runs Vulkan kernels
  vulkan-validationlayers # the Khronos validation layer the Vulkan tests run under
  glslang-tools  # glslangValidator for the runtime's hand-written test shaders
  protobuf-c-compiler # protoc-c generates the ONNX parser at build time
  libprotobuf-c-dev   # its runtime library
  libonnx-dev         # onnx.proto
  libonnx-testdata    # the ONNX backend node tests: tests/onnx/node_suite.c runs them (ctest onnx_nodes)
  curl           # tests/docs/readme_examples.py runs the README's `relaxc serve` example with it
  git            # make format and CI's format check list the sources with git ls-files
  binutils       # nm: tests/tools/exported_symbols.py lists the libraries' symbols; readelf:
                 # tests/install reads SONAMEs and NEEDED (gcc pulls it in; named because the
                 # tests run them)
  clang-format   # make format, and CI's check that the tree is formatted (.clang-format)
  libopenmpi-dev # MPI's C API: the tensor-parallel runtime's collectives on Vulkan and every
                 # backend's rank bootstrap (runtime/ccl, issue 35)
  openmpi-bin    # mpirun: the 2- and 4-rank tests
  ccache         # compiler cache: CMakeLists.txt compiles through it when installed (RX_CCACHE), so
                 # the build directories of every checkout share objects; the build works without it
  mawk           # awk for deps.sh --check (priority required, so present on any Debian; named
                 # because the check runs it)
)

# The aarch64 cross build and its runs under qemu-user (scripts/arm64.sh, deps.sh --arm64).
# `--check` counts them as named where they are installed (scripts/deps-check.sh).
ARM64_PACKAGES=(
  gcc-aarch64-linux-gnu     # Debian's cross compiler (cmake/toolchains/aarch64-linux-gnu.cmake)
  libc6-dev-arm64-cross     # its sysroot: /usr/aarch64-linux-gnu (libc, libm, pthreads, libdl)
  qemu-user                 # qemu-aarch64: runs the arm64 relaxc and tests on this machine
  libc6:arm64               # the arm64 loader and libc qemu-aarch64 runs the programs with (the
                            # ones the two below come with; not the cross sysroot's: they differ)
  libvulkan1:arm64          # the arm64 Vulkan loader (multiarch: /usr/lib/aarch64-linux-gnu)
  mesa-vulkan-drivers:arm64 # the arm64 lavapipe (lvp_icd.aarch64.json)
  vulkan-validationlayers:arm64 # the Khronos validation layer the runtime's tests open (arm64 copy)
)

# What the tree can use but no Debian package provides, so --check accepts its absence: find_*
# variables, headers, dlopen'd library names (without .so), Python modules, Vulkan layers.
# shellcheck disable=SC2034 # read by scripts/deps-check.sh
OPTIONAL=(
  RX_SHADERC_SHARED_LIB     # libshaderc_shared.so (Ubuntu, Arch, LunarG); Debian: static shaderc
  RX_SPIRV_TOOLS_SHARED_LIB # libSPIRV-Tools-shared.so, likewise; Debian: static SPIRV-Tools
  libSPIRV-Tools-shared     # runtime/library.c dlopens it where it exists
  libcuda                   # the NVIDIA driver, the machine's own; CUDA tests skip without it
  libnvrtc                  # NVRTC of the CUDA toolkit (/usr/local/cuda), not a Debian package
  RX_CUDA_H_DIR             # the toolkit's cuda.h (/usr/local/cuda/include); runtime.cuda_decls skips without it
  dispatch/dispatch.h       # Apple's libdispatch: the Metal backend on macOS only
  TargetConditionals.h      # Apple SDKs: runtime/metal/metal.c tells macOS from iOS with it
  qemu-aarch64              # the arm64 group (deps.sh --arm64): a machine without it builds and
  qemu-aarch64-static       # tests everything else (cmake/toolchains/aarch64-linux-gnu.cmake)
  lit                       # lit.cfg.py's module: lit.py (llvm-14-tools) puts it on sys.path
  openai                    # tests/serve/client_*.py: from PyPI into build/venv-serve
  jsonschema                # (scripts/serve-venv.sh, tests/serve/requirements.txt), not Debian's
  numpy                     # tests/python/test_relaxc.py: from PyPI into build/venv-python
  relaxc                    # (scripts/python-venv.sh, tests/python/requirements.txt) with the
                            # package itself (python/), installed there by ctest python.package
  mpi.h                     # libopenmpi-dev (named above) installs it under /usr/lib/*/openmpi/include,
                            # outside the include paths the check searches; the tests find it
                            # through CMake's FindMPI (MPI::MPI_C, tests/ccl/ccl.cmake)
)

# `deps.sh --check [BUILD_DIR...]`: report the packages the build and tests use that this list
# does not name (scripts/deps-check.sh says how "use" is computed); installs nothing.
if [ "${1:-}" = --check ]; then
  shift
  source "$(dirname "$0")/deps-check.sh" # exits with the check's status
  echo "deps.sh: scripts/deps-check.sh did not run to its end" >&2
  exit 2
fi

want=("${PACKAGES[@]}")
refresh="" # set when the package lists must be fetched again
if [ "${1:-}" = --arm64 ]; then
  want+=("${ARM64_PACKAGES[@]}")
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    if [ "$(id -u)" -ne 0 ]; then
      echo "deps.sh: --arm64 needs root to enable dpkg's arm64 architecture (dpkg --add-architecture arm64)" >&2
      exit 1
    fi
    dpkg --add-architecture arm64
    refresh=1 # the lists have no arm64 packages yet
  fi
fi

missing=()
for p in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps.sh: installing missing Debian packages: ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then # deps-check: optional
    SUDO="sudo -n"
  else
    echo "deps.sh: these packages are missing and installing them needs root:" >&2
    echo "  apt-get install ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
# refresh the package lists when they are missing or older than a day
if [ -n "$refresh" ] || [ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*_Packages' -mtime -1 2>/dev/null | head -1)" ]; then
  $SUDO apt-get update -qq
fi
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "deps.sh: installed ${missing[*]}"
