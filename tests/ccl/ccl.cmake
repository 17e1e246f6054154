# tests/ccl/ccl.cmake: the collective builtins (runtime/ccl) under mpirun on lavapipe, one Vulkan
# device per rank (included by tests/CMakeLists.txt; needs the runtime built with MPI and
# Open MPI's mpirun; the runtime opens libmpi.so.40 itself). Each run takes seconds; the timeouts
# are the proof that nothing hangs.
find_program(RX_MPIRUN NAMES mpirun mpiexec HINTS ${MPIEXEC_EXECUTABLE})
add_executable(ccl_test ${CMAKE_CURRENT_LIST_DIR}/ccl_test.c)
target_include_directories(ccl_test PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../unit ${CMAKE_SOURCE_DIR})
target_link_libraries(ccl_test PRIVATE relaxc_core relaxc_runtime)
if(NOT RX_MPIRUN)
  message(WARNING "relaxc: mpirun not found (Debian: openmpi-bin): the ccl tests are left out")
  return()
endif()
# as root (CI's containers) OpenMPI wants --allow-run-as-root; --oversubscribe: 4 ranks on 2 cores
set(RX_MPIRUN_ARGS --allow-run-as-root --oversubscribe)
# In a sanitized build, LeakSanitizer's suppressions (tests/runtime/lsan.supp) must see Open MPI's
# frames: its libraries are built without frame pointers, so the slow unwinder, and its
# components stay mapped to the end
set(RX_CCL_ENV ${RX_RT_VK_ENV} "OMPI_MCA_mca_base_component_disable_dlclose=1")
list(TRANSFORM RX_CCL_ENV REPLACE "^(LSAN_OPTIONS=.*)$" "\\1:fast_unwind_on_malloc=0")
foreach(n 2 4)
  add_test(NAME ccl.mpi_${n} COMMAND ${RX_MPIRUN} ${RX_MPIRUN_ARGS} -n ${n} $<TARGET_FILE:ccl_test>)
  set_tests_properties(ccl.mpi_${n} PROPERTIES ENVIRONMENT "${RX_CCL_ENV}" LABELS "vulkan;mpi"
                       TIMEOUT 120 SKIP_RETURN_CODE 77)
endforeach()
# The CUDA path with NCCL on the fake CUDA driver (tests/runtime/fake_cuda.c, runtime.cmake) and
# the fake NCCL (tests/runtime/fake_nccl.c: libnccl.so.2 in a directory of its own, named by
# RX_NCCL_LIBRARY), which computes the collectives on the host across the rank processes
if(TARGET rt_fake_cuda)
  add_library(rt_fake_nccl SHARED ${CMAKE_SOURCE_DIR}/tests/runtime/fake_nccl.c
                                  ${CMAKE_SOURCE_DIR}/base/half.c)
  target_include_directories(rt_fake_nccl PRIVATE ${CMAKE_SOURCE_DIR})
  set_target_properties(rt_fake_nccl PROPERTIES PREFIX "lib" OUTPUT_NAME "nccl" SUFFIX ".so.2"
                        C_VISIBILITY_PRESET hidden
                        LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fake_nccl)
  add_dependencies(ccl_test rt_fake_nccl rt_fake_cuda)
  foreach(n 2 4)
    add_test(NAME ccl.nccl_${n}
             COMMAND ${RX_MPIRUN} ${RX_MPIRUN_ARGS} -n ${n} $<TARGET_FILE:ccl_test> --cuda
                     $<TARGET_FILE:rt_fake_cuda>)
    set_tests_properties(ccl.nccl_${n} PROPERTIES LABELS "cuda;mpi" TIMEOUT 120
      ENVIRONMENT "${RX_CCL_ENV};LD_LIBRARY_PATH=$<TARGET_FILE_DIR:rt_fake_cuda>;RX_NCCL_LIBRARY=$<TARGET_FILE:rt_fake_nccl>")
  endforeach()
endif()
# a rank that exits or is killed in the middle ends the job with an error naming it, in time
foreach(mode die kill)
  add_test(NAME ccl.rank_${mode}
           COMMAND ${CMAKE_COMMAND} -DMPIRUN=${RX_MPIRUN} "-DMPIRUN_ARGS=${RX_MPIRUN_ARGS}"
                   -DTEST=$<TARGET_FILE:ccl_test> -DMODE=--${mode} -P
                   ${CMAKE_CURRENT_LIST_DIR}/die.cmake)
  set_tests_properties(ccl.rank_${mode} PROPERTIES ENVIRONMENT "${RX_CCL_ENV}"
                       LABELS "vulkan;mpi" TIMEOUT 120)
endforeach()
set(rx_ccl_sanitized 0)
if(RX_SANITIZE OR CMAKE_C_FLAGS MATCHES "-fsanitize")
  set(rx_ccl_sanitized 1)
endif()
# mpirun -n 2 relaxc generate (rank 0 drives, rank 1 follows) against one process: tokens equal
add_test(NAME ccl.generate_2
         COMMAND ${CMAKE_COMMAND} -DRELAXC=$<TARGET_FILE:relaxc> -DMPIRUN=${RX_MPIRUN}
                 "-DMPIRUN_ARGS=${RX_MPIRUN_ARGS}"
                 -DMODEL=${CMAKE_SOURCE_DIR}/tests/llm/models/tiny-llama-gqa
                 -DWORK=${CMAKE_CURRENT_BINARY_DIR}/ccl_generate -DSANITIZED=${rx_ccl_sanitized} -P
                 ${CMAKE_CURRENT_LIST_DIR}/generate.cmake)
set_tests_properties(ccl.generate_2 PROPERTIES ENVIRONMENT "${RX_RT_VK_ENV}" LABELS "vulkan;mpi"
                     TIMEOUT 400)
# the Megatron preset (relaxc compile HF_DIR --tensor-parallel N) against the model whole: logits
# and greedy tokens. 2 ranks: tiny-llama-gqa (an lm_head of its own) and tiny-qwen2 (q/k/v biases,
# lm_head tied to the embedding table), whose 2 KV heads allow no more (tests/lit/dist/tp_llm);
# 4 ranks: tiny-llama-kv4 (4 KV heads; made by the fixture script gen_tp_model in tests/ccl, which
# CI does not run: it needs transformers).
add_executable(tp_llm_test ${CMAKE_CURRENT_LIST_DIR}/tp_llm_test.c)
target_include_directories(tp_llm_test PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../unit ${CMAKE_SOURCE_DIR})
target_link_libraries(tp_llm_test PRIVATE relaxc_runtime m)
foreach(case tiny-llama-gqa:2 tiny-qwen2:2 tiny-llama-kv4:4)
  string(REPLACE ":" ";" parts ${case})
  list(GET parts 0 model)
  list(GET parts 1 n)
  set(dir ${CMAKE_SOURCE_DIR}/tests/llm/models/${model})
  if(model STREQUAL "tiny-llama-kv4")
    set(dir ${CMAKE_CURRENT_LIST_DIR}/models/${model})
  endif()
  add_test(NAME ccl.tp_${model}_${n}
           COMMAND ${CMAKE_COMMAND} -DRELAXC=$<TARGET_FILE:relaxc> -DTEST=$<TARGET_FILE:tp_llm_test>
                   -DMPIRUN=${RX_MPIRUN} "-DMPIRUN_ARGS=${RX_MPIRUN_ARGS}" -DN=${n} -DMODEL=${dir}
                   -DWORK=${CMAKE_CURRENT_BINARY_DIR}/ccl_tp_${model}_${n}
                   -DSANITIZED=${rx_ccl_sanitized} -P ${CMAKE_CURRENT_LIST_DIR}/tp_llm.cmake)
  set_tests_properties(ccl.tp_${model}_${n} PROPERTIES ENVIRONMENT "${RX_RT_VK_ENV}"
                       LABELS "vulkan;mpi" TIMEOUT 400)
endforeach()
# pipeline parallelism (relaxc compile HF_DIR --pipeline-parallel N: stage r holds its layers and
# sends its hidden states to stage r + 1, the last stage's logits go to rank 0): the same check,
# 2 stages of the tiny Llama's 2 layers (3 and 4 stages of kjv-llama's 4 pass by hand:
# docs/distributed.md, "Pipeline parallelism")
add_test(NAME ccl.pp_tiny-llama-gqa_2
         COMMAND ${CMAKE_COMMAND} -DRELAXC=$<TARGET_FILE:relaxc> -DTEST=$<TARGET_FILE:tp_llm_test>
                 -DMPIRUN=${RX_MPIRUN} "-DMPIRUN_ARGS=${RX_MPIRUN_ARGS}" -DN=2
                 -DMODEL=${CMAKE_SOURCE_DIR}/tests/llm/models/tiny-llama-gqa
                 -DFLAG=--pipeline-parallel -DWORK=${CMAKE_CURRENT_BINARY_DIR}/ccl_pp_tiny-llama-gqa_2
                 -DSANITIZED=${rx_ccl_sanitized} -P ${CMAKE_CURRENT_LIST_DIR}/tp_llm.cmake)
set_tests_properties(ccl.pp_tiny-llama-gqa_2 PROPERTIES ENVIRONMENT "${RX_RT_VK_ENV}"
                     LABELS "vulkan;mpi" TIMEOUT 400)
# the preset on weights quantized at import (--quantize with zero points; the embedding table and
# the tied lm_head too; Qwen2's q/k/v biases) against the same model quantized whole
add_test(NAME ccl.tp_tiny-qwen2_q4_2
         COMMAND ${CMAKE_COMMAND} -DRELAXC=$<TARGET_FILE:relaxc> -DTEST=$<TARGET_FILE:tp_llm_test>
                 -DMPIRUN=${RX_MPIRUN} "-DMPIRUN_ARGS=${RX_MPIRUN_ARGS}" -DN=2
                 -DMODEL=${CMAKE_SOURCE_DIR}/tests/llm/models/tiny-qwen2
                 "-DQUANTIZE=--quantize;q4f16a_g32;--quantize-embeddings"
                 -DWORK=${CMAKE_CURRENT_BINARY_DIR}/ccl_tp_tiny-qwen2_q4_2
                 -DSANITIZED=${rx_ccl_sanitized} -P ${CMAKE_CURRENT_LIST_DIR}/tp_llm.cmake)
set_tests_properties(ccl.tp_tiny-qwen2_q4_2 PROPERTIES ENVIRONMENT "${RX_RT_VK_ENV}"
                     LABELS "vulkan;mpi" TIMEOUT 400)
# runtime/ccl/mpi_api.h against Open MPI's mpi.h (where CMake finds MPI; no MPI is needed to build
# the runtime itself)
find_package(MPI COMPONENTS C QUIET)
if(MPI_C_FOUND)
  add_executable(rt_mpi_decls_test ${CMAKE_SOURCE_DIR}/tests/runtime/mpi_decls_test.c)
  target_include_directories(rt_mpi_decls_test PRIVATE ${CMAKE_SOURCE_DIR})
  target_link_libraries(rt_mpi_decls_test PRIVATE MPI::MPI_C ${CMAKE_DL_LIBS})
  add_test(NAME runtime.mpi_decls COMMAND rt_mpi_decls_test)
  set_tests_properties(runtime.mpi_decls PROPERTIES LABELS "runtime;unit")
endif()
