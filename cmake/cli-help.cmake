# cmake/cli-help.cmake: the command line's help texts as files, for share/doc/relaxc/cli/
# (cmake/install.cmake runs it at build time, after relaxc is linked):
#   cmake -DRELAXC=path/to/relaxc -DOUT=dir -P cmake/cli-help.cmake
# writes OUT/relaxc.txt (relaxc --help) and OUT/<command>.txt (relaxc <command> --help) for every
# command that relaxc --help lists, so that the texts are the CLI's own, never a second copy.
if(NOT RELAXC OR NOT OUT)
  message(FATAL_ERROR "cli-help.cmake: usage: cmake -DRELAXC=relaxc -DOUT=DIR -P cli-help.cmake")
endif()
file(REMOVE_RECURSE ${OUT}) # a command removed leaves no stale text
file(MAKE_DIRECTORY ${OUT})
execute_process(COMMAND ${RELAXC} --help OUTPUT_VARIABLE top RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cli-help.cmake: '${RELAXC} --help' exited with ${rc}")
endif()
file(WRITE ${OUT}/relaxc.txt "${top}")
# the commands: the lines "  relaxc NAME SYNOPSIS" of the top-level help
string(REGEX MATCHALL "\n  relaxc [a-z][a-z0-9-]*" lines "${top}")
set(count 0)
foreach(line ${lines})
  string(REGEX REPLACE "\n  relaxc " "" cmd "${line}")
  execute_process(COMMAND ${RELAXC} ${cmd} --help OUTPUT_VARIABLE text RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "cli-help.cmake: '${RELAXC} ${cmd} --help' exited with ${rc}")
  endif()
  file(WRITE ${OUT}/${cmd}.txt "${text}")
  math(EXPR count "${count} + 1")
endforeach()
if(count EQUAL 0)
  message(FATAL_ERROR "cli-help.cmake: no command found in '${RELAXC} --help'")
endif()
file(WRITE ${OUT}/.stamp "${count}\n")
