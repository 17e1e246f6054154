# runtime/runtime.cmake: the relaxc runtime (runtime/, docs/kernel-abi.md) and its tests.
# Included by the top-level CMakeLists.txt. The runtime builds alone: it uses base/ (compiled
# again into it, since relaxc_core is the compiler's) and nothing else of the compiler.
#
# Needs (Debian): libcjson-dev (kernels.json; or RX_VENDORED_CJSON, below), libvulkan-dev (Vulkan headers only; the loader is
# opened at run time). Tests also use glslang-tools (glslangValidator), and run on lavapipe
# (mesa-vulkan-drivers, libvulkan1) under the Khronos validation layer (vulkan-validationlayers).
# Metal sources are linked in on Apple platforms only (elsewhere compiled against a stub, below).

#
# The backends (docs/install.md): RX_BACKENDS=all (default: Vulkan and CUDA, and Metal on Apple
# platforms) or one of vulkan, cuda, metal, for a runtime built for an app with the one its
# devices have (RX_RUNTIME_ONLY=ON in the top-level CMakeLists.txt). The null backend is always in.
# RX_VENDORED_CJSON (default: on with RX_RUNTIME_ONLY) compiles third_party/cjson into the runtime
# instead of linking the system's libcjson, so that it needs nothing beyond libc, libm, pthreads
# and the driver it opens at run time (third_party/cjson/README.md).
set(RX_BACKENDS "all" CACHE STRING "the runtime's backends: all, vulkan, cuda or metal")
set_property(CACHE RX_BACKENDS PROPERTY STRINGS all vulkan cuda metal)
if(NOT RX_BACKENDS MATCHES "^(all|vulkan|cuda|metal)$")
  message(FATAL_ERROR "relaxc runtime: RX_BACKENDS='${RX_BACKENDS}': expected all, vulkan, cuda "
                      "or metal")
endif()
if(RX_BACKENDS STREQUAL "metal" AND NOT APPLE)
  message(FATAL_ERROR "relaxc runtime: RX_BACKENDS=metal needs an Apple platform (the Metal "
                      "backend is linked on Apple platforms only)")
endif()
if(NOT RX_RUNTIME_ONLY AND NOT RX_BACKENDS STREQUAL "all")
  message(FATAL_ERROR "relaxc runtime: RX_BACKENDS=${RX_BACKENDS} needs -DRX_RUNTIME_ONLY=ON (the "
                      "compiler, the command line and the tests use every backend)")
endif()
set(RX_RT_WITH_VULKAN OFF)
set(RX_RT_WITH_CUDA OFF)
set(RX_RT_WITH_METAL OFF)
if(RX_BACKENDS STREQUAL "all")
  set(RX_RT_WITH_VULKAN ON)
  set(RX_RT_WITH_CUDA ON)
  if(APPLE)
    set(RX_RT_WITH_METAL ON)
  endif()
else()
  string(TOUPPER ${RX_BACKENDS} rx_be)
  set(RX_RT_WITH_${rx_be} ON)
endif()
option(RX_VENDORED_CJSON "Compile third_party/cjson into the runtime (no system libcjson)"
       ${RX_RUNTIME_ONLY})

find_package(Threads REQUIRED)
if(RX_VENDORED_CJSON)
  set(RX_CJSON_INCLUDE_DIR ${CMAKE_CURRENT_LIST_DIR}/../third_party/cjson)
  set(RX_CJSON_LIBRARY "")
else()
  find_path(RX_CJSON_INCLUDE_DIR cjson/cJSON.h)
  find_library(RX_CJSON_LIBRARY cjson)
  if(NOT RX_CJSON_INCLUDE_DIR OR NOT RX_CJSON_LIBRARY)
    message(FATAL_ERROR "relaxc runtime: cJSON not found (Debian: apt-get install libcjson-dev; "
                        "or -DRX_VENDORED_CJSON=ON)")
  endif()
endif()
if(RX_RT_WITH_VULKAN OR NOT RX_RUNTIME_ONLY)
  find_path(RX_VULKAN_INCLUDE_DIR vulkan/vulkan.h)
  if(NOT RX_VULKAN_INCLUDE_DIR)
    message(FATAL_ERROR "relaxc runtime: Vulkan headers not found (Debian: apt-get install libvulkan-dev)")
  endif()
endif()

set(RX_RUNTIME_DIR ${CMAKE_CURRENT_LIST_DIR})
get_filename_component(RX_RUNTIME_ROOT ${RX_RUNTIME_DIR} DIRECTORY)

set(RX_RUNTIME_SOURCES
  ${RX_RUNTIME_DIR}/runtime.c
  ${RX_RUNTIME_DIR}/expr.c
  ${RX_RUNTIME_DIR}/library.c
  ${RX_RUNTIME_DIR}/artifact.c
  ${RX_RUNTIME_DIR}/artifact_ranks.c
  ${RX_RUNTIME_DIR}/vm.c
  ${RX_RUNTIME_DIR}/vm_walk.c
  ${RX_RUNTIME_DIR}/autobatch.c
  ${RX_RUNTIME_DIR}/autobatch_policy.c
  ${RX_RUNTIME_DIR}/replay.c
  ${RX_RUNTIME_DIR}/externs.c
  ${RX_RUNTIME_DIR}/weights.c
  ${RX_RUNTIME_DIR}/ccl/comm.c
  ${RX_RUNTIME_DIR}/ccl/builtins.c
  ${RX_RUNTIME_DIR}/ccl/nccl.c
  ${RX_RUNTIME_DIR}/null/null.c
  ${RX_RUNTIME_ROOT}/base/base.c
  ${RX_RUNTIME_ROOT}/base/crc32.c       # the sections' CRC-32 (runtime/artifact.c)
  ${RX_RUNTIME_ROOT}/base/half.c        # f16/bf16 reductions of the collectives (runtime/ccl)
  ${RX_RUNTIME_ROOT}/base/safetensors.c # the weights' header (runtime/weights.c)
  ${RX_RUNTIME_ROOT}/base/npy.c)        # base_npy_elem_size, for safetensors.c
# runtime/llm/: the KV cache, tokenizer, sampler and generation loop (relaxc/llm.h)
file(GLOB RX_RUNTIME_LLM_SOURCES CONFIGURE_DEPENDS ${RX_RUNTIME_DIR}/llm/*.c)
list(APPEND RX_RUNTIME_SOURCES ${RX_RUNTIME_LLM_SOURCES})
set(RX_RT_NO_BACKENDS) # the RX_RT_NO_* of the backends left out (runtime/runtime.c)
if(RX_RT_WITH_VULKAN)
  list(APPEND RX_RUNTIME_SOURCES ${RX_RUNTIME_DIR}/vulkan/vulkan.c)
else()
  list(APPEND RX_RT_NO_BACKENDS RX_RT_NO_VULKAN)
endif()
if(RX_RT_WITH_CUDA)
  list(APPEND RX_RUNTIME_SOURCES ${RX_RUNTIME_DIR}/cuda/cuda.c ${RX_RUNTIME_DIR}/cuda/cublaslt.c)
else()
  list(APPEND RX_RT_NO_BACKENDS RX_RT_NO_CUDA)
endif()
if(RX_RT_WITH_METAL)
  # Metal: C over the Objective-C runtime (objc_msgSend); on Linux only compiled (rt_metal_compile).
  list(APPEND RX_RUNTIME_SOURCES ${RX_RUNTIME_DIR}/metal/metal.c)
else()
  list(APPEND RX_RT_NO_BACKENDS RX_RT_NO_METAL)
endif()
if(RX_VENDORED_CJSON)
  list(APPEND RX_RUNTIME_SOURCES ${RX_RUNTIME_ROOT}/third_party/cjson/cjson/cJSON.c)
  # upstream's code, not built to the house's warning flags
  set_source_files_properties(${RX_RUNTIME_ROOT}/third_party/cjson/cjson/cJSON.c PROPERTIES
                              COMPILE_OPTIONS "-w")
endif()
if(RX_VENDORED_CJSON)
  set(rx_cjson_from "third_party/cjson")
else()
  set(rx_cjson_from "${RX_CJSON_LIBRARY}")
endif()
message(STATUS "relaxc runtime: backends ${RX_BACKENDS} (vulkan ${RX_RT_WITH_VULKAN}, cuda "
               "${RX_RT_WITH_CUDA}, metal ${RX_RT_WITH_METAL}), cJSON from ${rx_cjson_from}")

add_library(relaxc_runtime STATIC ${RX_RUNTIME_SOURCES})
# the headers from the source tree when built here, from <prefix>/include when installed
target_include_directories(relaxc_runtime
  PUBLIC $<BUILD_INTERFACE:${RX_RUNTIME_ROOT}/include> $<INSTALL_INTERFACE:include>
  PRIVATE ${RX_RUNTIME_ROOT} ${RX_CJSON_INCLUDE_DIR} ${RX_VULKAN_INCLUDE_DIR})
target_compile_definitions(relaxc_runtime PRIVATE ${RX_RT_NO_BACKENDS})
target_link_libraries(relaxc_runtime PUBLIC ${RX_CJSON_LIBRARY} ${CMAKE_DL_LIBS} Threads::Threads m) # m: floor, exp, ...
if(RX_RT_WITH_METAL)
  target_link_libraries(relaxc_runtime PUBLIC "-framework Metal" "-framework Foundation" objc)
endif()
# Only what relaxc/*.h declares (RX_API) is visible outside a shared library; position-independent
# so that the same objects also make librelaxc_runtime.so (and, with the compiler's, librelaxc.so)
set_target_properties(relaxc_runtime PROPERTIES C_VISIBILITY_PRESET hidden
                      POSITION_INDEPENDENT_CODE ON)
# librelaxc_runtime.so: the runtime alone as a shared library (relaxc/runtime.h, llm.h,
# autobatch.h, types.h), from relaxc_runtime's objects; the tools and tests link the static one
# SONAME librelaxc_runtime.so.MAJOR, file librelaxc_runtime.so.MAJOR.MINOR.PATCH (the version of
# relaxc/types.h); installed as relaxc::runtime (cmake/install.cmake)
add_library(relaxc_runtime_shared SHARED $<TARGET_OBJECTS:relaxc_runtime>)
set_target_properties(relaxc_runtime_shared PROPERTIES OUTPUT_NAME relaxc_runtime
                      VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR})
target_include_directories(relaxc_runtime_shared INTERFACE
                           $<BUILD_INTERFACE:${RX_RUNTIME_ROOT}/include> $<INSTALL_INTERFACE:include>)
target_link_libraries(relaxc_runtime_shared PRIVATE ${RX_CJSON_LIBRARY} ${CMAKE_DL_LIBS}
                      Threads::Threads m)
if(CMAKE_SYSTEM_NAME STREQUAL "Linux" AND NOT RX_SANITIZE AND NOT RX_FUZZ)
  target_link_options(relaxc_runtime_shared PRIVATE -Wl,--no-undefined) # everything resolved
endif()
if(RX_RT_WITH_METAL)
  target_link_libraries(relaxc_runtime_shared PRIVATE "-framework Metal" "-framework Foundation"
                        objc)
endif()

# ---- tests (not in the runtime built alone: they use every backend and the compiler's tools) ----
if((BUILD_TESTING OR NOT DEFINED BUILD_TESTING) AND NOT RX_RUNTIME_ONLY)
  set(RX_RT_TEST_DIR ${RX_RUNTIME_ROOT}/tests/runtime)
  find_program(RX_GLSLANG glslangValidator)

  # the expression evaluator: no device needed
  add_executable(rt_expr_test ${RX_RT_TEST_DIR}/expr_test.c)
  target_link_libraries(rt_expr_test PRIVATE relaxc_runtime)
  target_include_directories(rt_expr_test PRIVATE ${RX_RUNTIME_ROOT})
  add_test(NAME runtime.expr COMMAND rt_expr_test)
  set_tests_properties(runtime.expr PROPERTIES LABELS "runtime;unit")

  # the launch replay cache of the CUDA and Vulkan backends, with a mock backend: no device needed
  add_executable(rt_replay_test ${RX_RT_TEST_DIR}/replay_test.c)
  target_link_libraries(rt_replay_test PRIVATE relaxc_runtime)
  target_include_directories(rt_replay_test PRIVATE ${RX_RUNTIME_ROOT})
  add_test(NAME runtime.replay COMMAND rt_replay_test)
  set_tests_properties(runtime.replay PROPERTIES LABELS "runtime;unit")

  # the null backend (every call unsupported) and thread-safe driver loading
  add_executable(rt_backends_test ${RX_RT_TEST_DIR}/backends_test.c)
  target_link_libraries(rt_backends_test PRIVATE relaxc_runtime Threads::Threads)
  target_include_directories(rt_backends_test PRIVATE ${RX_RUNTIME_ROOT})
  add_test(NAME runtime.backends COMMAND rt_backends_test)

  # Metal off Apple: metal.c compiled, never linked, against the SDK's declarations it uses
  # (tests/runtime/objc_stub/README.md), once per objc_msgSend prototype, so it keeps compiling
  if(NOT APPLE)
    foreach(t rt_metal_compile rt_metal_compile_old_dispatch)
      add_library(${t} OBJECT ${RX_RUNTIME_DIR}/metal/metal.c)
      target_include_directories(${t} PRIVATE ${RX_RT_TEST_DIR}/objc_stub ${RX_RUNTIME_ROOT}
                                 ${RX_RUNTIME_ROOT}/include)
      if(CMAKE_C_COMPILER_ID MATCHES "Clang")
        target_compile_options(${t} PRIVATE -fblocks) # dispatch_block_t as in Apple clang
      endif()
    endforeach()
    target_compile_definitions(rt_metal_compile PRIVATE OBJC_OLD_DISPATCH_PROTOTYPES=0)
    target_compile_definitions(rt_metal_compile_old_dispatch PRIVATE OBJC_OLD_DISPATCH_PROTOTYPES=1)
  endif()

  # kernels for the Vulkan tests: GLSL compiled to SPIR-V at build time
  set(RX_RT_KERNEL_DIR ${CMAKE_CURRENT_BINARY_DIR}/rt_kernels)
  set(RX_RT_SPV)
  if(RX_GLSLANG)
    foreach(k saxpy saxpy_ubo scale_add)
      add_custom_command(OUTPUT ${RX_RT_KERNEL_DIR}/${k}.spv
        COMMAND ${CMAKE_COMMAND} -E make_directory ${RX_RT_KERNEL_DIR}
        COMMAND ${RX_GLSLANG} -V --target-env vulkan1.1 -o ${RX_RT_KERNEL_DIR}/${k}.spv
                ${RX_RT_TEST_DIR}/kernels/${k}.comp
        DEPENDS ${RX_RT_TEST_DIR}/kernels/${k}.comp
        COMMENT "glslangValidator ${k}.comp")
      list(APPEND RX_RT_SPV ${RX_RT_KERNEL_DIR}/${k}.spv)
    endforeach()
    add_custom_command(OUTPUT ${RX_RT_KERNEL_DIR}/kernels.json
      COMMAND ${CMAKE_COMMAND} -E copy ${RX_RT_TEST_DIR}/kernels/kernels.json ${RX_RT_KERNEL_DIR}/kernels.json
      DEPENDS ${RX_RT_TEST_DIR}/kernels/kernels.json)
    add_custom_target(rt_kernels ALL DEPENDS ${RX_RT_SPV} ${RX_RT_KERNEL_DIR}/kernels.json)
  else()
    message(WARNING "relaxc runtime: glslangValidator not found (Debian: glslang-tools): "
                    "the Vulkan kernel tests will report themselves skipped")
  endif()

  add_executable(rt_vulkan_test ${RX_RT_TEST_DIR}/vulkan_test.c ${RX_RUNTIME_ROOT}/tests/unit/check.h)
  target_link_libraries(rt_vulkan_test PRIVATE relaxc_runtime)
  target_include_directories(rt_vulkan_test PRIVATE ${RX_RUNTIME_ROOT})
  add_test(NAME runtime.vulkan COMMAND rt_vulkan_test ${RX_RT_KERNEL_DIR})
  # lavapipe only (other ICDs of mesa-vulkan-drivers have no hardware here), the Khronos
  # validation layer on, and LeakSanitizer told about the loader's and drivers' own leaks.
  set(RX_RT_VK_ENV
    "RX_VULKAN_VALIDATION=1"
    "LSAN_OPTIONS=suppressions=${RX_RT_TEST_DIR}/lsan.supp:print_suppressions=0")
  if(EXISTS /usr/share/vulkan/icd.d/lvp_icd.x86_64.json AND CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
    list(APPEND RX_RT_VK_ENV "VK_DRIVER_FILES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json"
                             "VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json")
  elseif(CMAKE_CROSSCOMPILING AND CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")
    # the aarch64 build under qemu-user (cmake/toolchains/aarch64-linux-gnu.cmake, scripts/arm64.sh):
    # Debian's arm64 lavapipe (mesa-vulkan-drivers:arm64) and validation layer (:arm64 too)
    list(APPEND RX_RT_VK_ENV "VK_DRIVER_FILES=/usr/share/vulkan/icd.d/lvp_icd.aarch64.json"
                             "VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/lvp_icd.aarch64.json")
  endif()
  # In a sanitized build the Vulkan loader unloads lavapipe at vkDestroyInstance, before
  # LeakSanitizer reports; lavapipe's own process-lifetime allocations (Mesa 22.3.6-1+deb12u2:
  # 128 bytes per instance) then come from an "<unknown module>" that no suppression can name.
  # Preloading the ICD (after the ASan runtime, which must come first) keeps it mapped, so the
  # suppression leak:libvulkan_lvp.so above applies. relaxc's own frames are never suppressed.
  # RX_TEST_RUN_PREFIX carries the same environment to the lit tests' %relaxc (for the commands
  # that open a device).
  set(RX_TEST_RUN_PREFIX "")
  if(RX_SANITIZE AND EXISTS /usr/share/vulkan/icd.d/lvp_icd.x86_64.json)
    file(READ /usr/share/vulkan/icd.d/lvp_icd.x86_64.json rx_lvp_json)
    string(JSON rx_lvp_lib ERROR_VARIABLE rx_lvp_err GET "${rx_lvp_json}" ICD library_path)
    execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libasan.so
                    OUTPUT_VARIABLE rx_asan_rt OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(NOT rx_lvp_err AND EXISTS "${rx_lvp_lib}" AND IS_ABSOLUTE "${rx_asan_rt}"
       AND EXISTS "${rx_asan_rt}")
      list(APPEND RX_RT_VK_ENV "LD_PRELOAD=${rx_asan_rt}:${rx_lvp_lib}")
      # the lit tests through tests/lit/sanitized.sh: lavapipe preloaded only where a command
      # opens a device (a compile that loads NVRTC crashes LeakSanitizer's tracer with it)
      set(RX_TEST_RUN_PREFIX "sh ${CMAKE_SOURCE_DIR}/tests/lit/sanitized.sh ${rx_asan_rt} ${rx_lvp_lib} ${RX_RT_TEST_DIR}/lsan.supp ")
    endif()
  endif()
  set_tests_properties(runtime.vulkan PROPERTIES LABELS "runtime;vulkan" ENVIRONMENT "${RX_RT_VK_ENV}"
                       SKIP_RETURN_CODE 77)
  set_tests_properties(runtime.backends PROPERTIES LABELS "runtime;vulkan"
                       ENVIRONMENT "${RX_RT_VK_ENV}")

  # artifacts and the VM: hand-assembled host programs over the same kernels, same environment
  add_executable(rt_vm_test ${RX_RT_TEST_DIR}/vm_test.c ${RX_RUNTIME_ROOT}/tests/unit/check.h)
  target_link_libraries(rt_vm_test PRIVATE relaxc_runtime)
  target_include_directories(rt_vm_test PRIVATE ${RX_RUNTIME_ROOT})
  if(TARGET rt_kernels)
    add_dependencies(rt_vm_test rt_kernels)
  endif()
  add_test(NAME runtime.vm COMMAND rt_vm_test ${RX_RT_KERNEL_DIR})
  set_tests_properties(runtime.vm PROPERTIES LABELS "runtime;vulkan;vm" ENVIRONMENT "${RX_RT_VK_ENV}"
                       SKIP_RETURN_CODE 77)

  add_executable(rt_cuda_test ${RX_RT_TEST_DIR}/cuda_test.c ${RX_RUNTIME_ROOT}/tests/unit/check.h)
  target_link_libraries(rt_cuda_test PRIVATE relaxc_runtime)
  target_include_directories(rt_cuda_test PRIVATE ${RX_RUNTIME_ROOT})
  add_test(NAME runtime.cuda COMMAND rt_cuda_test)
  set_tests_properties(runtime.cuda PROPERTIES LABELS "runtime;cuda" SKIP_RETURN_CODE 77)

  # CUDA graphs (cuda/cuda.c replaying launches) against a fake driver on the host
  # (tests/runtime/fake_cuda.c): libcuda.so.1 in a directory of its own, first on LD_LIBRARY_PATH
  # and opened by the test by its path before the runtime opens libcuda.so.1, so the test runs on
  # every machine and never on a real driver. Built with the same flags (sanitizers included).
  # runtime.cuda_graph_old_driver: the same test on a fake of a driver older than CUDA 12.0 (no
  # graph entry points exported), where every launch is issued directly.
  add_executable(rt_cuda_graph_test ${RX_RT_TEST_DIR}/cuda_graph_test.c ${RX_RUNTIME_ROOT}/tests/unit/check.h)
  target_link_libraries(rt_cuda_graph_test PRIVATE relaxc_runtime)
  target_include_directories(rt_cuda_graph_test PRIVATE ${RX_RUNTIME_ROOT})
  foreach(v "" "_old")
    add_library(rt_fake_cuda${v} SHARED ${RX_RT_TEST_DIR}/fake_cuda.c)
    target_include_directories(rt_fake_cuda${v} PRIVATE ${RX_RUNTIME_ROOT})
    set_target_properties(rt_fake_cuda${v} PROPERTIES PREFIX "lib" OUTPUT_NAME "cuda"
                          SUFFIX ".so.1"
                          LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/fake_cuda${v})
    add_dependencies(rt_cuda_graph_test rt_fake_cuda${v})
  endforeach()
  target_compile_definitions(rt_fake_cuda_old PRIVATE FAKE_CUDA_NO_GRAPHS)
  add_test(NAME runtime.cuda_graph COMMAND rt_cuda_graph_test $<TARGET_FILE:rt_fake_cuda>)
  add_test(NAME runtime.cuda_graph_old_driver
           COMMAND rt_cuda_graph_test $<TARGET_FILE:rt_fake_cuda_old> --old-driver)
  set_tests_properties(runtime.cuda_graph PROPERTIES LABELS "runtime;cuda;unit"
                       ENVIRONMENT "LD_LIBRARY_PATH=${CMAKE_CURRENT_BINARY_DIR}/fake_cuda")
  set_tests_properties(runtime.cuda_graph_old_driver PROPERTIES LABELS "runtime;cuda;unit"
                       ENVIRONMENT "LD_LIBRARY_PATH=${CMAKE_CURRENT_BINARY_DIR}/fake_cuda_old")

  # cuBLASLt dispatch (cuda/cublaslt.c, the builtin rx_cublaslt_matmul) on the fake driver and a
  # fake cuBLASLt (tests/runtime/fake_cublaslt.c: computes every matmul on the host and refuses
  # layouts that do not agree), named in RX_CUBLASLT_LIBRARY by the test; runtime.cublaslt_missing:
  # the error where the library cannot be opened
  add_executable(rt_cublaslt_test ${RX_RT_TEST_DIR}/cublaslt_test.c ${RX_RUNTIME_ROOT}/tests/unit/check.h)
  target_link_libraries(rt_cublaslt_test PRIVATE relaxc_runtime m)
  target_include_directories(rt_cublaslt_test PRIVATE ${RX_RUNTIME_ROOT})
  add_library(rt_fake_cublaslt SHARED ${RX_RT_TEST_DIR}/fake_cublaslt.c)
  target_include_directories(rt_fake_cublaslt PRIVATE ${RX_RUNTIME_ROOT})
  set_target_properties(rt_fake_cublaslt PROPERTIES PREFIX "lib" OUTPUT_NAME "cublasLt"
                        SUFFIX ".so.13"
                        LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/fake_cublaslt)
  add_dependencies(rt_cublaslt_test rt_fake_cublaslt rt_fake_cuda)
  add_test(NAME runtime.cublaslt COMMAND rt_cublaslt_test $<TARGET_FILE:rt_fake_cuda>
                                         $<TARGET_FILE:rt_fake_cublaslt>)
  add_test(NAME runtime.cublaslt_missing
           COMMAND rt_cublaslt_test $<TARGET_FILE:rt_fake_cuda> --missing)
  set_tests_properties(runtime.cublaslt runtime.cublaslt_missing PROPERTIES
                       LABELS "runtime;cuda;unit"
                       ENVIRONMENT "LD_LIBRARY_PATH=${CMAKE_CURRENT_BINARY_DIR}/fake_cuda")

  # cuda/cuda_api.h (the driver API declared by hand) against the toolkit's cuda.h, where one
  # is installed (no Debian package: the image's /usr/local/cuda); skipped (77) without it
  find_path(RX_CUDA_H_DIR cuda.h HINTS ENV CUDA_PATH ENV CUDA_HOME /usr/local/cuda
            PATH_SUFFIXES include)
  add_executable(rt_cuda_decls_test ${RX_RT_TEST_DIR}/cuda_decls_test.c
                 ${RX_RUNTIME_DIR}/cuda/cuda_api.h)
  target_include_directories(rt_cuda_decls_test PRIVATE ${RX_RUNTIME_ROOT})
  if(RX_CUDA_H_DIR)
    target_include_directories(rt_cuda_decls_test PRIVATE ${RX_CUDA_H_DIR})
    target_compile_definitions(rt_cuda_decls_test PRIVATE RX_HAVE_CUDA_H)
  else()
    message(STATUS "relaxc runtime: no CUDA toolkit cuda.h: runtime.cuda_decls will report "
                   "itself skipped")
  endif()
  # cuda/cublaslt_api.h (cuBLASLt declared by hand) against the toolkit's cublasLt.h, likewise
  find_path(RX_CUBLASLT_H_DIR cublasLt.h HINTS ENV CUDA_PATH ENV CUDA_HOME /usr/local/cuda
            PATH_SUFFIXES include)
  add_executable(rt_cublaslt_decls_test ${RX_RT_TEST_DIR}/cublaslt_decls_test.c
                 ${RX_RUNTIME_DIR}/cuda/cublaslt_api.h)
  target_include_directories(rt_cublaslt_decls_test PRIVATE ${RX_RUNTIME_ROOT})
  if(RX_CUBLASLT_H_DIR)
    # SYSTEM: the toolkit header is not written for -Wstrict-prototypes
    target_include_directories(rt_cublaslt_decls_test SYSTEM PRIVATE ${RX_CUBLASLT_H_DIR})
    target_compile_definitions(rt_cublaslt_decls_test PRIVATE RX_HAVE_CUBLASLT_H)
  endif()
  add_test(NAME runtime.cublaslt_decls COMMAND rt_cublaslt_decls_test)
  set_tests_properties(runtime.cublaslt_decls PROPERTIES LABELS "runtime;cuda;unit"
                       SKIP_RETURN_CODE 77)
  add_test(NAME runtime.cuda_decls COMMAND rt_cuda_decls_test)
  set_tests_properties(runtime.cuda_decls PROPERTIES LABELS "runtime;cuda;unit" SKIP_RETURN_CODE 77)
endif()
