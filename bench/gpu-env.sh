# bench/gpu-env.sh: what bench/gpu.sh and scripts/gpu-tests.sh share on a GPU machine, sourced
# with $root set to the repository: the Debian packages the build needs and a CUDA image may lack
# (downloaded here by `bench/gpu.sh --fetch-deps`, carried in build-gpu-deps/debs, unpacked into
# build-gpu-deps/root, never into /), and where NVRTC, the NVIDIA Vulkan driver and the Khronos
# validation layer are.
# shellcheck shell=bash
deps=$root/build-gpu-deps
# what the build needs and a CUDA image may lack, and what the NVIDIA Vulkan driver loads
deb_packages=(libcjson1 libcjson-dev libvulkan1 libvulkan-dev libshaderc-dev glslang-dev spirv-tools
  libglvnd0 libglx0 libegl1 libgl1 libopengl0 libgles2 vulkan-validationlayers)

fetch_deps() {
  local lists=/tmp/relaxc-gpu-deps-lists
  local o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 "-oDir::State::Lists=$lists")
  mkdir -p "$deps/debs" "$lists/partial"
  echo "gpu.sh: downloading ${deb_packages[*]} (amd64) into $deps/debs"
  apt-get "${o[@]}" update -qq
  (cd "$deps/debs" && apt-get "${o[@]}" download "${deb_packages[@]}")
  du -sh "$deps/debs"
  echo "gpu.sh: carry build-gpu-deps/debs to the GPU machine (run(..., carry=[\"build-gpu-deps/debs\"]))"
}

# Unpacks the carried .deb files into $deps/root and points the build and the loader at them.
use_deps() {
  local debs=("$deps"/debs/*.deb)
  [ -e "${debs[0]}" ] || return 0
  if [ ! -e "$deps/root/.unpacked" ] || [ -n "$(find "$deps/debs" -newer "$deps/root/.unpacked")" ]; then
    rm -rf "$deps/root"
    mkdir -p "$deps/root"
    local f
    for f in "${debs[@]}"; do
      if command -v dpkg-deb >/dev/null; then
        dpkg-deb -x "$f" "$deps/root"
      else
        (cd "$deps/root" && ar p "$f" "$(ar t "$f" | grep '^data\.tar')" | tar -xJf -)
      fi
    done
    touch "$deps/root/.unpacked"
  fi
  local lib=$deps/root/usr/lib/x86_64-linux-gnu
  cmake_deps=(-DCMAKE_PREFIX_PATH="$deps/root/usr" -DCMAKE_INCLUDE_PATH="$deps/root/usr/include"
    -DCMAKE_LIBRARY_PATH="$lib")
  export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  echo "gpu.sh: using the ${#debs[@]} carried packages unpacked in $deps/root"
}

# The NVIDIA Vulkan driver's manifest where the loader would not find it by itself.
find_vulkan_icd() {
  [ -n "${VK_DRIVER_FILES:-}${VK_ICD_FILENAMES:-}" ] && return 0
  local d
  for d in /usr/share/vulkan/icd.d /etc/vulkan/icd.d /usr/local/share/vulkan/icd.d; do
    if compgen -G "$d/nvidia*.json" >/dev/null; then return 0; fi
  done
  local nv=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  if [ -f "$nv" ]; then
    export VK_DRIVER_FILES=$nv
    echo "gpu.sh: VK_DRIVER_FILES=$nv"
  fi
}

# NVRTC, which relaxc loads to make cubins: where relaxc would not find it by itself (its search:
# RX_NVRTC_PATH, the loader's path, $CUDA_HOME/lib64, /usr/local/cuda/lib64), the CUDA toolkit's
# or PyTorch's pip wheel copy
find_nvrtc() {
  [ -n "${RX_NVRTC_PATH:-}" ] && return 0
  if ldconfig -p 2>/dev/null | grep -q 'libnvrtc\.so' || [ -e /usr/local/cuda/lib64/libnvrtc.so ] ||
    { [ -n "${CUDA_HOME:-}" ] && [ -e "$CUDA_HOME/lib64/libnvrtc.so" ]; }; then
    return 0
  fi
  local f site
  site=$(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null || true)
  for f in /usr/local/cuda*/lib64/libnvrtc.so* /usr/local/cuda*/targets/*/lib/libnvrtc.so*; do
    [ -e "$f" ] && break
  done
  if [ ! -e "$f" ]; then
    # shellcheck disable=SC2086 # site is a list of directories
    f=$(find $site -path '*nvidia*' -name 'libnvrtc.so*' ! -name '*builtins*' 2>/dev/null | sort | head -1)
  fi
  if [ -n "$f" ] && [ -e "$f" ]; then
    export RX_NVRTC_PATH=$f
    echo "gpu.sh: RX_NVRTC_PATH=$f"
  else
    echo "gpu.sh: no libnvrtc.so found: relaxc cannot make CUDA binaries (set RX_NVRTC_PATH)"
  fi
}

# The Khronos validation layer from the carried packages, for the tests that run Vulkan under it.
find_validation_layer() {
  local d=$deps/root/usr/share/vulkan/explicit_layer.d
  if [ -d "$d" ]; then
    export VK_LAYER_PATH=$d${VK_LAYER_PATH:+:$VK_LAYER_PATH}
    echo "gpu.sh: VK_LAYER_PATH=$d"
  fi
}
