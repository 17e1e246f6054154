# targets/targets.cmake: the toolchain libraries of targets/, linked into relaxc_core.
# Include after add_library(relaxc_core ...):   include(${CMAKE_SOURCE_DIR}/targets/targets.cmake)
#
# - SPIRV-Tools (spirv.c): Debian `spirv-tools` ships the headers and static libraries
#   (libSPIRV-Tools.a, libSPIRV-Tools-opt.a; C++ inside, hence stdc++). A shared
#   libSPIRV-Tools-shared.so is preferred where a distribution ships one.
# - shaderc (shaderc.c): a self-contained libshaderc_shared.so where one exists (Ubuntu, Arch,
#   the LunarG SDK). Debian bookworm has none: its libshaderc.so.1 leaves glslang's symbols
#   undefined and crashes when they are resolved from glslang-dev 12's static libraries, so on
#   Debian we link libshaderc_combined.a with glslang's static libraries and SPIRV-Tools-opt
#   (packages libshaderc-dev, glslang-dev, spirv-tools).
# - NVRTC is loaded with dlopen at run time (nvrtc.c): only ${CMAKE_DL_LIBS} here.
# Each part that is missing leaves its macro undefined; the code then returns a status that
# says what to install, and the build still succeeds.

find_package(Threads QUIET)

# ---- SPIRV-Tools --------------------------------------------------------------------------
find_path(RX_SPIRV_TOOLS_INCLUDE_DIR spirv-tools/libspirv.h)
find_library(RX_SPIRV_TOOLS_SHARED_LIB NAMES SPIRV-Tools-shared)
find_library(RX_SPIRV_TOOLS_LIB NAMES SPIRV-Tools)
find_library(RX_SPIRV_TOOLS_OPT_LIB NAMES SPIRV-Tools-opt)

set(RX_SPIRV_TOOLS_LIBS)
if(RX_SPIRV_TOOLS_INCLUDE_DIR AND RX_SPIRV_TOOLS_SHARED_LIB)
  set(RX_SPIRV_TOOLS_LIBS ${RX_SPIRV_TOOLS_SHARED_LIB})
elseif(RX_SPIRV_TOOLS_INCLUDE_DIR AND RX_SPIRV_TOOLS_LIB)
  set(RX_SPIRV_TOOLS_LIBS ${RX_SPIRV_TOOLS_LIB} stdc++ m)
endif()

if(RX_SPIRV_TOOLS_LIBS)
  message(STATUS "relaxc: SPIR-V validation with SPIRV-Tools (${RX_SPIRV_TOOLS_LIBS})")
  target_compile_definitions(relaxc_core PUBLIC RX_HAVE_SPIRV_TOOLS=1)
  target_include_directories(relaxc_core PUBLIC ${RX_SPIRV_TOOLS_INCLUDE_DIR})
else()
  message(STATUS "relaxc: SPIRV-Tools not found (Debian: apt-get install spirv-tools); "
                 "SPIR-V validation disabled")
endif()

# ---- shaderc ------------------------------------------------------------------------------
find_path(RX_SHADERC_INCLUDE_DIR shaderc/shaderc.h)
find_library(RX_SHADERC_SHARED_LIB NAMES shaderc_shared)
find_library(RX_SHADERC_COMBINED_LIB NAMES libshaderc_combined.a shaderc_combined)
set(RX_GLSLANG_PARTS glslang MachineIndependent OSDependent GenericCodeGen OGLCompiler SPIRV)
set(RX_GLSLANG_LIBS)
set(RX_GLSLANG_COMPLETE ON)
foreach(part ${RX_GLSLANG_PARTS})
  find_library(RX_GLSLANG_${part}_LIB NAMES lib${part}.a ${part})
  if(RX_GLSLANG_${part}_LIB)
    list(APPEND RX_GLSLANG_LIBS ${RX_GLSLANG_${part}_LIB})
  else()
    set(RX_GLSLANG_COMPLETE OFF)
  endif()
endforeach()

set(RX_SHADERC_LIBS)
if(RX_SHADERC_INCLUDE_DIR AND RX_SHADERC_SHARED_LIB)
  set(RX_SHADERC_LIBS ${RX_SHADERC_SHARED_LIB})
elseif(RX_SHADERC_INCLUDE_DIR AND RX_SHADERC_COMBINED_LIB AND RX_GLSLANG_COMPLETE
       AND RX_SPIRV_TOOLS_OPT_LIB AND RX_SPIRV_TOOLS_LIB)
  # order matters for static libraries: each before what it uses
  set(RX_SHADERC_LIBS ${RX_SHADERC_COMBINED_LIB} ${RX_GLSLANG_LIBS} ${RX_SPIRV_TOOLS_OPT_LIB}
                      ${RX_SPIRV_TOOLS_LIB} stdc++ m)
  if(TARGET Threads::Threads)
    list(APPEND RX_SHADERC_LIBS Threads::Threads)
  endif()
endif()

if(RX_SHADERC_LIBS)
  message(STATUS "relaxc: GLSL to SPIR-V with shaderc (${RX_SHADERC_LIBS})")
  target_compile_definitions(relaxc_core PUBLIC RX_HAVE_SHADERC=1)
  # its version goes into the kernel cache's key (tgt_shaderc_id): a new shaderc recompiles
  execute_process(COMMAND pkg-config --modversion shaderc OUTPUT_VARIABLE RX_SHADERC_VERSION
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(RX_SHADERC_VERSION)
    target_compile_definitions(relaxc_core PRIVATE RX_SHADERC_VERSION="${RX_SHADERC_VERSION}")
  endif()
  target_include_directories(relaxc_core PUBLIC ${RX_SHADERC_INCLUDE_DIR})
  target_link_libraries(relaxc_core PUBLIC ${RX_SHADERC_LIBS})
else()
  message(STATUS "relaxc: shaderc not found (Debian: apt-get install libshaderc-dev glslang-dev "
                 "spirv-tools); GLSL to SPIR-V disabled")
endif()

# SPIRV-Tools after shaderc: shaderc's static libraries use it too
if(RX_SPIRV_TOOLS_LIBS)
  target_link_libraries(relaxc_core PUBLIC ${RX_SPIRV_TOOLS_LIBS})
endif()

# ---- NVRTC (dlopen) and ptxas / xcrun (posix_spawn) ---------------------------------------
target_link_libraries(relaxc_core PUBLIC ${CMAKE_DL_LIBS})
if(TARGET Threads::Threads)
  target_link_libraries(relaxc_core PUBLIC Threads::Threads) # pthread_once in nvrtc.c
endif()
