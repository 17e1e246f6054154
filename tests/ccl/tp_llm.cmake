# tests/ccl/tp_llm.cmake: the Megatron preset end to end. A tiny Hugging Face model compiled whole
# and with --tensor-parallel N (f32, vulkan), then tp_llm_test under mpirun -n N compares the
# sharded model's logits (packed prefill, continuation, decode) and greedy tokens with the whole
# one's (tests/ccl/tp_llm_test.c). With -DFLAG=--pipeline-parallel the same for N pipeline
# stages (docs/distributed.md, "Pipeline parallelism"). With QUANTIZE (relaxc compile's flags, e.g.
# "--quantize;q4f16a_g32;--quantize-embeddings") both are quantized at import: each rank's blocks
# are the whole model's groups, bit for bit, so the same 1e-5 holds.
# cmake -DRELAXC=... -DTEST=... -DMPIRUN=... -DMPIRUN_ARGS=... -DMODEL=DIR -DN=2 -DWORK=DIR
#   [-DFLAG=--pipeline-parallel] [-DQUANTIZE=FLAGS] [-DSANITIZED=1] -P tp_llm.cmake
if(NOT FLAG)
  set(FLAG --tensor-parallel)
endif()
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
foreach(kind whole tp)
  set(extra "")
  if(kind STREQUAL "tp")
    set(extra ${FLAG} ${N})
  endif()
  execute_process(COMMAND ${RELAXC} compile ${MODEL} --target vulkan --dtype f32 --max-seq-len 128
                          ${QUANTIZE} ${extra} -o ${WORK}/${kind}.rxm
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "relaxc compile ${MODEL} ${QUANTIZE} ${extra}: ${out}${err}")
  endif()
endforeach()
# as generate.cmake: leaks are checked by the ccl.mpi_* tests, not through a whole LLM's load
set(env "")
if(SANITIZED)
  set(env ${CMAKE_COMMAND} -E env ASAN_OPTIONS=detect_leaks=0)
endif()
set(quick "")
if(QUANTIZE)
  set(quick --quick) # its kernels are slower on lavapipe: fewer decode steps (tp_llm_test.c)
endif()
execute_process(COMMAND ${env} ${MPIRUN} ${MPIRUN_ARGS} -n ${N} ${TEST} ${WORK}/tp.rxm
                        ${WORK}/whole.rxm ${quick}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 300)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mpirun -n ${N} tp_llm_test: ${rc}")
endif()
if(NOT out MATCHES "no rank failed")
  message(FATAL_ERROR "tp_llm_test did not finish")
endif()
