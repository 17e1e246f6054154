# relaxc serve driven by the official openai Python client (issue 33): the ctest function
# rx_serve_client_test and the client tests registered with it. Included by tests/CMakeLists.txt
# when relaxc serve is built (libmicrohttpd found).
#
#   rx_serve_client_test(NAME SCRIPT [SERVE_FLAGS...] [LABELS l...] [TIMEOUT s])
#
# adds the ctest NAME: tests/serve/run_client.py compiles (once, shared by every client test) the
# tiny Llama of tests/llm/models/kjv-llama with tests/chat/model's chat template for Vulkan
# (lavapipe), starts `relaxc serve` on a free port of 127.0.0.1 with SERVE_FLAGS, waits for
# /health, runs `python SCRIPT` in the virtual environment RX_SERVE_VENV (scripts/serve-venv.sh,
# from tests/serve/requirements.txt; `make test` makes it) with RX_SERVE_BASE_URL, RX_SERVE_MODEL,
# RX_SERVE_API_KEY, RX_SERVE_LOG (and more: run_client.py's header), then stops the server with
# SIGTERM: the test fails when the script fails, or when the server does not exit 0 in time.
# Without the venv the tests fail with a message saying how to make it. Labels: serve, vulkan,
# and the script's own (the load test's "load", so that CI can shard it off).
set(RX_SERVE_VENV ${CMAKE_BINARY_DIR}/venv-serve CACHE PATH
    "the virtual environment of relaxc serve's client tests (scripts/serve-venv.sh)")
# the Vulkan environment of the runtime's tests, but its LD_PRELOAD (a sanitized build's ASan
# runtime and lavapipe) reaches relaxc through RX_TEST_RUN_PREFIX, never the Python processes
set(RX_SERVE_CLIENT_ENV ${RX_RT_VK_ENV})
list(FILTER RX_SERVE_CLIENT_ENV EXCLUDE REGEX "^LD_PRELOAD=")

function(rx_serve_client_test NAME SCRIPT)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "TIMEOUT" "LABELS")
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 300)
  endif()
  add_test(NAME ${NAME}
           COMMAND ${RX_PYTHON} ${CMAKE_SOURCE_DIR}/tests/serve/run_client.py
                   --relaxc $<TARGET_FILE:relaxc> --venv ${RX_SERVE_VENV}
                   --work ${CMAKE_BINARY_DIR}/tests/serve --tests ${CMAKE_SOURCE_DIR}/tests
                   --prefix "${RX_TEST_RUN_PREFIX}" --name ${NAME} --timeout ${arg_TIMEOUT}
                   ${CMAKE_SOURCE_DIR}/tests/serve/${SCRIPT} -- ${arg_UNPARSED_ARGUMENTS})
  # ctest's limit: the script's, plus the artifact's compile, the server's start and its stop
  math(EXPR limit "${arg_TIMEOUT} + 240")
  set_tests_properties(${NAME} PROPERTIES ENVIRONMENT "${RX_SERVE_CLIENT_ENV}"
                       LABELS "serve;vulkan;${arg_LABELS}" TIMEOUT ${limit})
endfunction()

# The harness itself: a client script that fails makes its test fail. client_selftest_fails.py
# exits 3 on purpose, and this test passes only on run_client.py's report of exactly that failure
# (a missing venv, a server that does not start or stop, a script that passes: all fail it).
rx_serve_client_test(serve.harness_fails client_selftest_fails.py)
set_tests_properties(serve.harness_fails PROPERTIES PASS_REGULAR_EXPRESSION
                     "FAILED: client script client_selftest_fails.py failed with exit status 3")

# relaxc serve's operations (--api-key, /metrics, timeouts, shutdown, the request log) and its basic
# API (completions, chat, streaming, errors) through the openai client; the script starts two more
# servers of its own for the timeouts and the shutdowns
rx_serve_client_test(serve.client_ops client_ops.py --api-key relaxc-test-key-0123456789)

# Prefix caching through the openai client: a repeated prompt reports its cached tokens in
# usage.prompt_tokens_details and answers as it did uncached (runtime/llm/prefix_cache.c)
rx_serve_client_test(serve.client_prefix client_prefix.py)

# The API's fields through the openai client: stop strings (never leaked while streaming), n,
# logprobs in each endpoint's shape, echo, prompt lists and token ids, include_usage, penalties,
# logit_bias, seed, max_completion_tokens, and a 400 naming any field the server does not implement
rx_serve_client_test(serve.client_api client_api.py TIMEOUT 300)

# Structured output through the openai client: response_format json_schema (64 samples per schema
# at temperature 1, each parsed and validated by jsonschema) and json_object, batched across
# schemas, streamed, and the refusals (runtime/llm/grammar*.c)
rx_serve_client_test(serve.client_schema client_schema.py --max-batch 32 TIMEOUT 900)
# the sanitized build checks the same paths for memory errors with 20 samples per schema (the
# plain build's 64 validate the outputs; ASan's server is several times slower)
if(RX_SANITIZE)
  set_property(TEST serve.client_schema APPEND PROPERTY ENVIRONMENT RX_SCHEMA_SAMPLES=20)
endif()

# The load test: 256 concurrent streaming clients, some leaving mid-stream; every staying one gets
# its single-run answer, and every KV page is free at the end. Label "load": CI may shard it off.
rx_serve_client_test(serve.load client_load.py --max-batch 32 --max-queue 512 --max-connections 600
                     --max-connections-per-ip 600 LABELS load TIMEOUT 300)
# seconds they take on lavapipe (ctest starts the longest first; tests/CMakeLists.txt's COST list)
set_tests_properties(serve.load PROPERTIES COST 60)
set_tests_properties(serve.client_ops PROPERTIES COST 25)
set_tests_properties(serve.client_prefix PROPERTIES COST 25)
set_tests_properties(serve.client_api PROPERTIES COST 90)
set_tests_properties(serve.client_schema PROPERTIES COST 200)

# The server on two ranks (--tensor-parallel 2: relaxc serve starts `mpirun -n 2` of itself; each
# rank holds the whole tiny model, replicated): the one-process server's answers with the prefix
# cache on, rank 1's KV cache in step with rank 0's to the end, and a killed follower ending the
# server with an error naming it (docs/distributed.md, "relaxc serve on several ranks"). A
# sanitized build checks the ranks without leak checks, as ccl.generate_2 does (Open MPI's
# allocations past MPI_Finalize); the one-process server's leaks are the other serve tests'.
if(RX_MPIRUN)
  rx_serve_client_test(serve.tp_2 client_tp.py --tensor-parallel 2 TIMEOUT 400)
  string(REPLACE ";" " " rx_mpirun_args "${RX_MPIRUN_ARGS}")
  set_property(TEST serve.tp_2 APPEND PROPERTY ENVIRONMENT RX_MPIRUN=${RX_MPIRUN}
               "RX_MPIRUN_ARGS=${rx_mpirun_args}")
  set_property(TEST serve.tp_2 APPEND PROPERTY LABELS mpi)
  set_tests_properties(serve.tp_2 PROPERTIES COST 60)
  if(RX_SANITIZE OR CMAKE_C_FLAGS MATCHES "-fsanitize")
    set_property(TEST serve.tp_2 APPEND PROPERTY ENVIRONMENT ASAN_OPTIONS=detect_leaks=0)
  endif()
endif()
