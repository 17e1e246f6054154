# python/package.cmake: what the Python package (python/pyproject.toml, scikit-build-core) takes
# from the CMake project. Included by CMakeLists.txt when scikit-build-core runs it (SKBUILD set);
# scikit-build-core builds only the target librelaxc (relaxc_shared: compiler and runtime in one
# library) and installs only the component "python", so a wheel holds:
#
#   relaxc/_lib/librelaxc.so.MAJOR     the library the ctypes bindings open (relaxc/_lib.py), under
#                                      its SONAME (a wheel carries no symbolic links)
#   relaxc/_lib/include/relaxc/*.h     the public headers, for C extensions built against it
#
# The Python sources (relaxc/*.py, *.pyi, py.typed) are scikit-build-core's wheel.packages.
if(APPLE)
  set(rx_py_lib "librelaxc.${PROJECT_VERSION_MAJOR}.dylib")
else()
  set(rx_py_lib "librelaxc.so.${PROJECT_VERSION_MAJOR}")
endif()
install(FILES $<TARGET_FILE:relaxc_shared> DESTINATION relaxc/_lib RENAME ${rx_py_lib}
        COMPONENT python)
install(FILES ${CMAKE_SOURCE_DIR}/include/relaxc/runtime.h ${CMAKE_SOURCE_DIR}/include/relaxc/llm.h
              ${CMAKE_SOURCE_DIR}/include/relaxc/autobatch.h
              ${CMAKE_SOURCE_DIR}/include/relaxc/types.h
              ${CMAKE_SOURCE_DIR}/include/relaxc/compiler.h
        DESTINATION relaxc/_lib/include/relaxc COMPONENT python)
