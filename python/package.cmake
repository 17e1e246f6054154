# python/package.cmake: what the Python package (python/pyproject.toml, scikit-build-core) takes
# from the CMake project. Included by CMakeLists.txt when scikit-build-core runs it (SKBUILD set);
# scikit-build-core builds only the target relaxc_python (below) and installs only the component
# "python", so a wheel holds:
#
#   relaxc/_lib/librelaxc.so.MAJOR     the library the ctypes bindings open (relaxc/_lib.py), under
#                                      its SONAME (a wheel carries no symbolic links)
#   relaxc/_lib/include/relaxc/*.h     the public headers, for C extensions built against it
#
# The Python sources (relaxc/*.py, *.pyi, py.typed) are scikit-build-core's wheel.packages.
#
# The library is built from source (relaxc_python depends on relaxc_shared: librelaxc, compiler
# and runtime in one library), or, with -C cmake.define.RX_PY_PREBUILT_LIB=PATH (or the
# environment's SKBUILD_CMAKE_DEFINE=RX_PY_PREBUILT_LIB=PATH), taken as it is from PATH, a
# librelaxc.so.MAJOR[.MINOR.PATCH] this source tree already built (a build tree's
# $<TARGET_FILE:relaxc_shared>; ctest python.package passes its own): nothing is compiled. The
# headers always come from this source tree. The definition is read once and dropped from the
# cache, so a later install in the same build folder without it builds from source again.
if(APPLE)
  set(rx_py_lib "librelaxc.${PROJECT_VERSION_MAJOR}.dylib")
  set(rx_py_lib_re "^librelaxc([.][0-9]+)*[.]dylib$")
else()
  set(rx_py_lib "librelaxc.so.${PROJECT_VERSION_MAJOR}")
  set(rx_py_lib_re "^librelaxc[.]so[.]${PROJECT_VERSION_MAJOR}([.][0-9]+)*$")
endif()
set(rx_py_prebuilt "${RX_PY_PREBUILT_LIB}")
unset(RX_PY_PREBUILT_LIB CACHE)
if(rx_py_prebuilt)
  get_filename_component(rx_py_name "${rx_py_prebuilt}" NAME)
  if(NOT EXISTS "${rx_py_prebuilt}" OR IS_DIRECTORY "${rx_py_prebuilt}")
    message(FATAL_ERROR "relaxc python package: RX_PY_PREBUILT_LIB=${rx_py_prebuilt}: no such "
                        "file (expected librelaxc built from this source tree, e.g. "
                        "build/librelaxc.so.${PROJECT_VERSION})")
  endif()
  if(NOT rx_py_name MATCHES "${rx_py_lib_re}")
    message(FATAL_ERROR "relaxc python package: RX_PY_PREBUILT_LIB=${rx_py_prebuilt}: expected "
                        "the file ${rx_py_lib}[.MINOR.PATCH] (librelaxc of version "
                        "${PROJECT_VERSION}), not ${rx_py_name}")
  endif()
  message(STATUS "relaxc python package: librelaxc taken from ${rx_py_prebuilt} (not compiled)")
  add_custom_target(relaxc_python)
  install(FILES "${rx_py_prebuilt}" DESTINATION relaxc/_lib RENAME ${rx_py_lib} COMPONENT python)
else()
  add_custom_target(relaxc_python)
  add_dependencies(relaxc_python relaxc_shared)
  install(FILES $<TARGET_FILE:relaxc_shared> DESTINATION relaxc/_lib RENAME ${rx_py_lib}
          COMPONENT python)
endif()
install(FILES ${CMAKE_SOURCE_DIR}/include/relaxc/runtime.h ${CMAKE_SOURCE_DIR}/include/relaxc/llm.h
              ${CMAKE_SOURCE_DIR}/include/relaxc/autobatch.h
              ${CMAKE_SOURCE_DIR}/include/relaxc/types.h
              ${CMAKE_SOURCE_DIR}/include/relaxc/compiler.h
        DESTINATION relaxc/_lib/include/relaxc COMPONENT python)
