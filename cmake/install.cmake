# cmake/install.cmake: what `cmake --install` (and `make install PREFIX=...`) puts where, and the
# package files that let other projects use it (docs/install.md). Included by CMakeLists.txt after
# the libraries are defined, in the full build and in the runtime built alone (RX_RUNTIME_ONLY).
#
#   bin/relaxc                                      the command line (not with RX_RUNTIME_ONLY)
#   include/relaxc/*.h                              the public headers (the runtime's alone with
#                                                   RX_RUNTIME_ONLY: no compiler.h)
#   lib/librelaxc_runtime.so.X.Y.Z, .so.X, .so, .a  the runtime (relaxc::runtime, ::runtime_static)
#   lib/librelaxc.so.X.Y.Z, .so.X, .so, .a          the compiler and the runtime (relaxc::compiler);
#                                                   the .a holds the compiler's objects and links
#                                                   librelaxc_runtime.a (relaxc::compiler_static)
#   lib/cmake/relaxc/relaxcConfig.cmake, relaxcConfigVersion.cmake, relaxcTargets*.cmake
#   lib/pkgconfig/relaxc-runtime.pc, relaxc.pc
#   share/doc/relaxc/README.md, docs/install.md, cli/*.txt (the CLI's --help texts), the licenses
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(RX_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/relaxc)
set(RX_INSTALL_DOCDIR ${CMAKE_INSTALL_DATADIR}/doc/relaxc)

# ---- targets: the imported names are relaxc::<EXPORT_NAME> ----
set_target_properties(relaxc_runtime_shared PROPERTIES EXPORT_NAME runtime)
set_target_properties(relaxc_runtime PROPERTIES EXPORT_NAME runtime_static)
set(rx_install_targets relaxc_runtime_shared relaxc_runtime)
set(rx_headers runtime.h llm.h autobatch.h ccl.h types.h) # what librelaxc_runtime implements
if(NOT RX_RUNTIME_ONLY)
  set_target_properties(relaxc_shared PROPERTIES EXPORT_NAME compiler)
  set_target_properties(relaxc_core PROPERTIES EXPORT_NAME compiler_static OUTPUT_NAME relaxc)
  set_target_properties(relaxc PROPERTIES EXPORT_NAME relaxc) # relaxc::relaxc, the command line
  list(APPEND rx_install_targets relaxc_shared relaxc_core relaxc)
  list(APPEND rx_headers compiler.h)
endif()
install(TARGETS ${rx_install_targets} EXPORT relaxcTargets
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
list(TRANSFORM rx_headers PREPEND ${CMAKE_SOURCE_DIR}/include/relaxc/)
install(FILES ${rx_headers} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/relaxc)

# ---- the CMake package: find_package(relaxc [VERSION]) ----
install(EXPORT relaxcTargets NAMESPACE relaxc:: DESTINATION ${RX_INSTALL_CMAKEDIR})
if(RX_RUNTIME_ONLY)
  set(RX_HAS_COMPILER FALSE)
else()
  set(RX_HAS_COMPILER TRUE)
endif()
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/relaxcConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/relaxcConfig.cmake
                              INSTALL_DESTINATION ${RX_INSTALL_CMAKEDIR})
# 0.x: every 0.MINOR may change the API, so only the same MAJOR.MINOR is compatible (the SONAME
# carries MAJOR alone, as the libraries' users on Debian expect; docs/install.md)
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(rx_compat SameMinorVersion)
else()
  set(rx_compat SameMajorVersion)
endif()
write_basic_package_version_file(${CMAKE_BINARY_DIR}/relaxcConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY ${rx_compat})
install(FILES ${CMAKE_BINARY_DIR}/relaxcConfig.cmake ${CMAKE_BINARY_DIR}/relaxcConfigVersion.cmake
        DESTINATION ${RX_INSTALL_CMAKEDIR})

# ---- pkg-config: relaxc-runtime.pc, relaxc.pc. prefix is found from the file's own place
# (${pcfiledir}), so that `cmake --install --prefix P` anywhere gives working files ----
string(REGEX REPLACE "[^/]+" ".." RX_PC_UP "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
set(RX_PC_RUNTIME_REQUIRES "")
set(RX_PC_RUNTIME_LIBS "${CMAKE_DL_LIBS}")
list(TRANSFORM RX_PC_RUNTIME_LIBS PREPEND "-l")
list(APPEND RX_PC_RUNTIME_LIBS -pthread -lm)
if(NOT RX_VENDORED_CJSON)
  set(RX_PC_RUNTIME_REQUIRES "Requires.private: libcjson") # Debian's libcjson-dev has libcjson.pc
endif()
list(JOIN RX_PC_RUNTIME_LIBS " " RX_PC_RUNTIME_LIBS)
configure_file(${CMAKE_SOURCE_DIR}/cmake/relaxc-runtime.pc.in
               ${CMAKE_BINARY_DIR}/pkgconfig/relaxc-runtime.pc @ONLY)
set(rx_pc_files ${CMAKE_BINARY_DIR}/pkgconfig/relaxc-runtime.pc)
if(NOT RX_RUNTIME_ONLY)
  # the static compiler's own libraries (shaderc, SPIRV-Tools, protobuf-c: absolute paths as found)
  set(rx_libs ${RX_SHADERC_LIBS} ${RX_SPIRV_TOOLS_LIBS})
  if(RX_ONNX)
    list(APPEND rx_libs ${RX_PROTOBUF_C_LIB})
  endif()
  list(REMOVE_DUPLICATES rx_libs)
  set(RX_PC_COMPILER_LIBS)
  foreach(l ${rx_libs})
    if(l STREQUAL "Threads::Threads")
      list(APPEND RX_PC_COMPILER_LIBS -pthread)
    elseif(IS_ABSOLUTE "${l}")
      list(APPEND RX_PC_COMPILER_LIBS "${l}")
    else()
      list(APPEND RX_PC_COMPILER_LIBS "-l${l}")
    endif()
  endforeach()
  list(JOIN RX_PC_COMPILER_LIBS " " RX_PC_COMPILER_LIBS)
  configure_file(${CMAKE_SOURCE_DIR}/cmake/relaxc.pc.in ${CMAKE_BINARY_DIR}/pkgconfig/relaxc.pc
                 @ONLY)
  list(APPEND rx_pc_files ${CMAKE_BINARY_DIR}/pkgconfig/relaxc.pc)
endif()
install(FILES ${rx_pc_files} DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# ---- documentation: README, this page, the licenses, the CLI's --help texts ----
install(FILES ${CMAKE_SOURCE_DIR}/README.md ${CMAKE_SOURCE_DIR}/docs/install.md
        DESTINATION ${RX_INSTALL_DOCDIR})
if(EXISTS ${CMAKE_SOURCE_DIR}/LICENSE)
  install(FILES ${CMAKE_SOURCE_DIR}/LICENSE DESTINATION ${RX_INSTALL_DOCDIR})
endif()
if(RX_VENDORED_CJSON)
  install(FILES ${CMAKE_SOURCE_DIR}/third_party/cjson/LICENSE DESTINATION ${RX_INSTALL_DOCDIR}
          RENAME LICENSE.cJSON)
endif()
if(NOT RX_RUNTIME_ONLY AND NOT CMAKE_CROSSCOMPILING)
  set(rx_cli_dir ${CMAKE_BINARY_DIR}/doc/cli)
  add_custom_command(OUTPUT ${rx_cli_dir}/.stamp
                     COMMAND ${CMAKE_COMMAND} -DRELAXC=$<TARGET_FILE:relaxc> -DOUT=${rx_cli_dir}
                             -P ${CMAKE_SOURCE_DIR}/cmake/cli-help.cmake
                     DEPENDS relaxc ${CMAKE_SOURCE_DIR}/cmake/cli-help.cmake
                     COMMENT "relaxc --help texts for share/doc/relaxc/cli")
  add_custom_target(rx_cli_help ALL DEPENDS ${rx_cli_dir}/.stamp)
  install(DIRECTORY ${rx_cli_dir}/ DESTINATION ${RX_INSTALL_DOCDIR}/cli FILES_MATCHING
          PATTERN "*.txt")
endif()
