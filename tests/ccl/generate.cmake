# tests/ccl/generate.cmake: `mpirun -n 2 relaxc generate` against one process. The tiny Llama is
# compiled once and placed as MODEL.rank0.rxm and MODEL.rank1.rxm too (the per-rank naming that
# serves until the multi-rank artifact of `relaxc compile --tensor-parallel N`; here each rank
# holds the whole model): rank 0 tokenizes, samples and drives, rank 1 follows its prefill and
# decodes; the greedy tokens must equal the single process's, and both runs must end in time.
# cmake -DRELAXC=... -DMPIRUN=... -DMPIRUN_ARGS=... -DMODEL=DIR -DWORK=DIR [-DSANITIZED=1]
#   -P generate.cmake
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
execute_process(COMMAND ${RELAXC} compile ${MODEL} --target vulkan -o ${WORK}/m.rxm
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "relaxc compile ${MODEL}: ${err}")
endif()
file(COPY_FILE ${WORK}/m.rxm ${WORK}/m.rank0.rxm)
file(COPY_FILE ${WORK}/m.rxm ${WORK}/m.rank1.rxm)
set(args generate ${WORK}/m.rxm --prompt-ids 1,5,9,3 --temperature 0 --max-tokens 6 --print-ids
    --kv-capacity 64)
execute_process(COMMAND ${RELAXC} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE one
                ERROR_VARIABLE err TIMEOUT 120)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "one process: ${rc}: ${err}")
endif()
# A sanitized build checks leaks in the single process only: Open MPI's own allocations past
# MPI_Finalize come from components it has unloaded, which no suppression can name unless every
# malloc is unwound slowly (the other ccl tests do that), and a whole LLM's load that way takes
# minutes. The ranks' code of runtime/ccl is leak-checked by ccl.mpi_* and ccl.nccl_*.
set(env "")
if(SANITIZED)
  set(env ${CMAKE_COMMAND} -E env ASAN_OPTIONS=detect_leaks=0)
endif()
execute_process(COMMAND ${env} ${MPIRUN} ${MPIRUN_ARGS} -n 2 ${RELAXC} ${args} RESULT_VARIABLE rc
                OUTPUT_VARIABLE two ERROR_VARIABLE err TIMEOUT 240)
message("one process: ${one}two ranks: ${two}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "two ranks: ${rc}: ${err}")
endif()
if(NOT one STREQUAL two OR NOT one MATCHES "^[0-9]+(,[0-9]+)*\n$")
  message(FATAL_ERROR "the ranks' tokens differ from one process's")
endif()
# rank 1 ran rank 0's prefill (4 tokens) and its 5 decodes (the 6th token is sampled, not fed)
if(NOT err MATCHES "rank 1: followed rank 0: sequence 0 holds 9 tokens")
  message(FATAL_ERROR "rank 1 did not follow rank 0's calls: ${err}")
endif()
