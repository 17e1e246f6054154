# SIMT emulator (tests/simt): runs emitted CUDA C and MSL kernels on the CPU with clang++ 16.
# Included from tests/CMakeLists.txt. Provides the static library rx_simt (simt_harness.c, for
# any test that wants to run kernels) and the self-test simt.self.
set(RX_SIMT_DIR ${CMAKE_CURRENT_LIST_DIR})
find_program(RX_SIMT_CLANG NAMES clang++-16 clang++-17 clang++-18 clang++-19
             DOC "clang++ 16 or newer, for the SIMT emulator (clang 14 lacks _Float16 on x86-64)")
if(NOT RX_SIMT_CLANG)
  set(RX_SIMT_CLANG clang++-16) # the self-test then reports itself skipped, with the reason
endif()

add_library(rx_simt STATIC ${RX_SIMT_DIR}/simt_harness.c ${RX_SIMT_DIR}/simt_trace.c)
target_include_directories(rx_simt PUBLIC ${RX_SIMT_DIR})
target_compile_definitions(rx_simt PRIVATE SIMT_DEFAULT_DIR="${RX_SIMT_DIR}")
# the fibers are the interpreter's (interp/fiber.c, in relaxc_core)
target_link_libraries(rx_simt PUBLIC relaxc_core ${CMAKE_DL_LIBS})

add_executable(simt_selftest ${RX_SIMT_DIR}/test_simt.c)
target_link_libraries(simt_selftest PRIVATE rx_simt m)

# Kernel objects are cached by a hash of everything that goes into them (the source, the
# preludes, clang's path, every flag: simt_harness.c), in the user's cache folder, so the build
# trees of every checkout (make test's, make asan's, CI's clean clones) share them as ccache
# shares objects: $XDG_CACHE_HOME/relaxc-simt or ~/.cache/relaxc-simt where that folder's parent
# exists, else the build tree; -DRX_SIMT_CACHE_DIR=... sets it. In a sanitized build the kernels
# are compiled with ASan + UBSan too (another key): they run inside the test process and use its
# (gcc's) sanitizer runtime, so an out-of-bounds access in emitted kernel code is reported with
# its kernel source line. Only set these flags for a process that itself links the sanitizers.
if(NOT RX_SIMT_CACHE_DIR)
  if(DEFINED ENV{XDG_CACHE_HOME} AND IS_DIRECTORY "$ENV{XDG_CACHE_HOME}")
    set(rx_simt_cache "$ENV{XDG_CACHE_HOME}/relaxc-simt")
  elseif(DEFINED ENV{HOME} AND IS_DIRECTORY "$ENV{HOME}/.cache")
    set(rx_simt_cache "$ENV{HOME}/.cache/relaxc-simt")
  else()
    set(rx_simt_cache "${CMAKE_BINARY_DIR}/simt-cache")
  endif()
  set(RX_SIMT_CACHE_DIR ${rx_simt_cache} CACHE PATH "where the SIMT emulator keeps compiled kernels")
endif()
set(RX_SIMT_ENV "SIMT_CACHE_DIR=${RX_SIMT_CACHE_DIR}" "SIMT_CLANG=${RX_SIMT_CLANG}")
if(RX_SANITIZE)
  list(APPEND RX_SIMT_ENV
       "SIMT_CFLAGS=-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer")
endif()
add_test(NAME simt.self COMMAND simt_selftest ${RX_SIMT_DIR})
set_tests_properties(simt.self PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 ENVIRONMENT "${RX_SIMT_ENV}")
