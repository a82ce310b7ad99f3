# Driver of the proxy fault tests (test_proxy_kill, test_proxy_stop): run the job as two
# simulated nodes and require that it ENDS within LIMIT_S seconds (a hang is the bug these
# tests exist for), with a failure status when REQUIRE_FAILURE is set, and with output
# matching each regex of EXPECT (a |-separated list).
string(REPLACE "|" ";" mpirun "${MPIRUN}")
string(TIMESTAMP t0 "%s")
execute_process(COMMAND ${mpirun} -np 4 -x SL_RANKS_PER_NODE=2 -x SL_TIMEOUT_MS=${TIMEOUT_MS} ${EXE}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT ${LIMIT_S})
string(TIMESTAMP t1 "%s")
math(EXPR elapsed "${t1} - ${t0}")
message("${out}${err}")
message("mpirun exit: ${rc}, ${elapsed} s")
if(NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "the job did not end within ${LIMIT_S} s (${rc}): it hangs")
endif()
if(REQUIRE_FAILURE AND rc EQUAL 0)
  message(FATAL_ERROR "the job exited 0 although a rank failed")
endif()
string(REPLACE "|" ";" expect "${EXPECT}")
foreach(re IN LISTS expect)
  if(NOT "${out}${err}" MATCHES "${re}")
    message(FATAL_ERROR "the output lacks '${re}'")
  endif()
endforeach()
if(elapsed GREATER ${LIMIT_S})
  message(FATAL_ERROR "the job took ${elapsed} s to end (limit ${LIMIT_S} s)")
endif()
