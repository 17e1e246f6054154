# relaxc serve's HTTP server (tools/serve/server.c) on libmicrohttpd, optional: without it the
# build goes on and `relaxc serve` says it was not built (Debian: libmicrohttpd-dev).
find_path(RX_MICROHTTPD_INCLUDE_DIR microhttpd.h)
find_library(RX_MICROHTTPD_LIBRARY microhttpd)
if(RX_MICROHTTPD_INCLUDE_DIR AND RX_MICROHTTPD_LIBRARY)
  add_library(relaxc_serve STATIC ${CMAKE_SOURCE_DIR}/tools/serve/server.c
                         ${CMAKE_SOURCE_DIR}/tools/serve/answer.c ${CMAKE_SOURCE_DIR}/tools/serve/ops.c
                         ${CMAKE_SOURCE_DIR}/tools/serve/request.c
                         ${CMAKE_SOURCE_DIR}/tools/serve/grammars.c)
  target_include_directories(relaxc_serve PRIVATE ${RX_MICROHTTPD_INCLUDE_DIR}
                           PUBLIC ${CMAKE_SOURCE_DIR} ${RX_CJSON_INCLUDE_DIR})
  target_link_libraries(relaxc_serve PUBLIC relaxc_runtime ${RX_MICROHTTPD_LIBRARY} Threads::Threads)
  target_compile_definitions(relaxc_serve PUBLIC RX_HAVE_MICROHTTPD)
  set(RX_SERVE ON) # lit's `REQUIRES: serve` (tests/lit/lit.site.cfg.py.in)
  target_link_libraries(relaxc PRIVATE relaxc_serve)
  message(STATUS "relaxc serve: libmicrohttpd ${RX_MICROHTTPD_LIBRARY}")
else()
  message(STATUS "relaxc serve: libmicrohttpd not found (Debian: libmicrohttpd-dev); relaxc "
                 "serve is not built")
endif()
