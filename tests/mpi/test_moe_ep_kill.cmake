# A rank killed outright (SIGKILL) in the middle of MoE dispatch/combine calls: mpirun must
# end the job promptly with a non-zero status (nothing hangs), and the next start's sweep
# must leave no /dev/shm/sluice-* names of dead creators. The driver is the all-reduce kill
# test's (tests/mpi/kill_driver.cmake: -np 3, SL_TIMEOUT_MS=60000, 30 s limit), which runs
# `<exe> kill` and `<exe> sweep`.
string(REPLACE ";" "|" sl_mpirun_arg "${SL_MPIRUN}")
add_test(NAME ${SL_TEST_NAME}
         COMMAND ${CMAKE_COMMAND} "-DMPIRUN=${sl_mpirun_arg}" -DEXE=$<TARGET_FILE:${SL_TEST_TARGET}>
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/mpi/kill_driver.cmake)
list(APPEND registered ${SL_TEST_NAME})
