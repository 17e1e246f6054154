# frontends/onnx/onnx.cmake: the ONNX importer (frontends/onnx/*.c) in relaxc_core.
# Include from the top-level CMakeLists after add_library(relaxc_core ...):
#   include(${CMAKE_SOURCE_DIR}/frontends/onnx/onnx.cmake)
# Needs protoc-c and libprotobuf-c (Debian: protobuf-c-compiler libprotobuf-c-dev) and the
# onnx.proto of libonnx-dev; the C parser is generated from it at build time into the build
# dir. Without them nothing is added and `relaxc import` says how to get ONNX support.
find_program(RX_PROTOC_C protoc-c)
find_path(RX_PROTOBUF_C_INCLUDE protobuf-c/protobuf-c.h)
find_library(RX_PROTOBUF_C_LIB protobuf-c)
find_file(RX_ONNX_PROTO NAMES onnx/onnx.proto onnx/onnx-ml.proto
          PATHS /usr/include /usr/local/include)

if(RX_PROTOC_C AND RX_PROTOBUF_C_INCLUDE AND RX_PROTOBUF_C_LIB AND RX_ONNX_PROTO)
  get_filename_component(rx_onnx_proto_name ${RX_ONNX_PROTO} NAME_WE)  # onnx or onnx-ml
  get_filename_component(rx_onnx_proto_dir ${RX_ONNX_PROTO} DIRECTORY)
  get_filename_component(rx_onnx_proto_root ${rx_onnx_proto_dir} DIRECTORY)
  set(rx_onnx_gen ${CMAKE_BINARY_DIR}/onnx_gen)
  set(rx_onnx_c ${rx_onnx_gen}/onnx/${rx_onnx_proto_name}.pb-c.c)
  set(rx_onnx_h ${rx_onnx_gen}/onnx/${rx_onnx_proto_name}.pb-c.h)
  file(MAKE_DIRECTORY ${rx_onnx_gen})
  add_custom_command(
    OUTPUT ${rx_onnx_c} ${rx_onnx_h}
    COMMAND ${RX_PROTOC_C} --c_out=${rx_onnx_gen} --proto_path=${rx_onnx_proto_root}
            onnx/${rx_onnx_proto_name}.proto
    DEPENDS ${RX_ONNX_PROTO}
    COMMENT "protoc-c: generating the ONNX parser from ${RX_ONNX_PROTO}")
  # generated code: not held to the project's warnings
  set_source_files_properties(${rx_onnx_c} PROPERTIES GENERATED TRUE COMPILE_OPTIONS "-w")
  file(GLOB rx_onnx_sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/frontends/onnx/*.c)
  target_sources(relaxc_core PRIVATE ${rx_onnx_sources} ${rx_onnx_c} ${rx_onnx_h})
  target_include_directories(relaxc_core PRIVATE ${rx_onnx_gen} ${RX_PROTOBUF_C_INCLUDE})
  string(REPLACE "-" "_" rx_onnx_proto_id ${rx_onnx_proto_name})
  target_compile_definitions(relaxc_core PUBLIC RX_HAVE_ONNX
                             RX_ONNX_PB_H="onnx/${rx_onnx_proto_name}.pb-c.h")
  target_link_libraries(relaxc_core PUBLIC ${RX_PROTOBUF_C_LIB})
  set(RX_ONNX ON)  # tests/lit: the `onnx` feature
  message(STATUS "ONNX frontend: on (${RX_ONNX_PROTO})")
else()
  set(RX_ONNX OFF)
  message(STATUS "ONNX frontend: off (install protobuf-c-compiler libprotobuf-c-dev libonnx-dev)")
endif()
