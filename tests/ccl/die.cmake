# tests/ccl/die.cmake: `mpirun -n 3 ccl_test MODE` (--die: rank 2 exits with code 3; --kill: it
# is killed) while ranks 0 and 1 wait in an allreduce: the job must end within 60 seconds, fail,
# and mpirun must name rank 2 as the process that ended it.
# cmake -DMPIRUN=... -DMPIRUN_ARGS=... -DTEST=ccl_test -DMODE=--die -P die.cmake
string(TIMESTAMP t0 "%s")
execute_process(COMMAND ${MPIRUN} ${MPIRUN_ARGS} -n 3 ${TEST} ${MODE}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out TIMEOUT 60)
string(TIMESTAMP t1 "%s")
math(EXPR secs "${t1} - ${t0}")
message("${out}")
message("mpirun ${MODE}: exit ${rc} after ${secs} s")
if(rc MATCHES "timeout|terminated" OR secs GREATER_EQUAL 60)
  message(FATAL_ERROR "the job hung after rank 2 ended (${rc})")
endif()
if(rc EQUAL 0)
  message(FATAL_ERROR "mpirun succeeded although rank 2 ended in the middle")
endif()
# OpenMPI 4: "Process name: [[JOB,1],2]" (an exit code) or "process rank 2 with PID" (a signal)
if(NOT out MATCHES "rank 2: exiting in the middle"
   OR NOT out MATCHES "(\\[\\[[0-9]+,[0-9]+\\],2\\]|process rank 2 )")
  message(FATAL_ERROR "the output does not say that rank 2 ended the job")
endif()
