#!/bin/sh
# tests/lit/sanitized.sh ASAN_RUNTIME LAVAPIPE SUPPRESSIONS RELAXC ARGS...: how the lit tests run
# relaxc in a sanitized build (runtime/runtime.cmake, RX_TEST_RUN_PREFIX). The ASan runtime is
# preloaded always; Mesa's lavapipe only for the commands that open a Vulkan device (run,
# generate, serve), to keep it mapped until LeakSanitizer reports so that its suppression
# applies (unmapped, its leaks come from "<unknown module>" and no suppression matches them). A
# command that loads NVRTC (compile for CUDA) must not have lavapipe preloaded: LeakSanitizer's
# scan of the thread-local storage then crashes in its tracer ("Tracer caught signal 11"), seen
# with gcc 12's libasan, NVRTC 13 and Mesa 22.3.
asan=$1 lvp=$2 supp=$3
shift 3
case "$2" in
run | generate | serve) pre="$asan:$lvp" ;;
*) pre="$asan" ;;
esac
exec env LD_PRELOAD="$pre" LSAN_OPTIONS="suppressions=$supp:print_suppressions=0" "$@"
