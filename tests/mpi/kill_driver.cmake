# Driver of mpi_test_allreduce_kill (see test_allreduce_kill.cmake).
string(REPLACE "|" ";" MPIRUN "${MPIRUN}")

# 1. Plant a stale name whose creator pid is dead (the pid of a shell that has exited).
execute_process(COMMAND sh -c "echo $$" OUTPUT_VARIABLE dead_pid OUTPUT_STRIP_TRAILING_WHITESPACE)
set(stale /dev/shm/sluice-${dead_pid}-deadbeef-0-0)
file(WRITE ${stale} "")

# 2. Rank 1 kills itself mid-run. The others' timeout is long (60 s), so only mpirun's
#    abort can end the job within the 30 s allowed here.
string(TIMESTAMP t0 "%s")
execute_process(COMMAND ${MPIRUN} -np 3 -x SL_TIMEOUT_MS=60000 ${EXE} kill
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 30)
string(TIMESTAMP t1 "%s")
math(EXPR took "${t1} - ${t0}")
message(STATUS "killed job: status '${rc}' after ${took} s")
if(rc MATCHES "timeout" OR took GREATER 30)
  message(FATAL_ERROR "the job with a killed rank did not end within 30 s (status ${rc})\n${out}\n${err}")
endif()
if(rc EQUAL 0)
  message(FATAL_ERROR "the job with a killed rank exited 0: the kill did not happen?\n${out}\n${err}")
endif()
string(REGEX MATCHALL "SLUICE_PID [0-9]+" pid_lines "${out}")
list(LENGTH pid_lines npids)
if(npids LESS 3)
  message(FATAL_ERROR "expected 3 'SLUICE_PID' lines from the killed job, got ${npids}\n${out}\n${err}")
endif()

# 3. The next start sweeps.
execute_process(COMMAND ${MPIRUN} -np 2 ${EXE} sweep RESULT_VARIABLE rc2 OUTPUT_VARIABLE out2 ERROR_VARIABLE err2
                TIMEOUT 60)
if(NOT rc2 EQUAL 0)
  message(FATAL_ERROR "the start after the killed job failed (${rc2})\n${out2}\n${err2}")
endif()
if(EXISTS ${stale})
  message(FATAL_ERROR "the start-up sweep left the stale name ${stale}")
endif()
foreach(line IN LISTS pid_lines)
  string(REPLACE "SLUICE_PID " "" pid "${line}")
  file(GLOB left /dev/shm/sluice-${pid}-*)
  if(left)
    message(FATAL_ERROR "shared memory of the killed job remains: ${left}")
  endif()
endforeach()
message(STATUS "killed job ended in ${took} s; no shared memory of it remains")
