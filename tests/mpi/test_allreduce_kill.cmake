# A rank killed outright (SIGKILL) in the middle of all-reduces: mpirun must end the job
# promptly with a non-zero status (nothing hangs), and the next start's sweep must leave no
# /dev/shm/sluice-* names of dead creators (a planted stale name included).
# The driver (kill_driver.cmake) runs mpirun itself because this mpirun is expected to fail.
string(REPLACE ";" "|" sl_mpirun_arg "${SL_MPIRUN}")
add_test(NAME ${SL_TEST_NAME}
         COMMAND ${CMAKE_COMMAND} "-DMPIRUN=${sl_mpirun_arg}" -DEXE=$<TARGET_FILE:${SL_TEST_TARGET}>
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/mpi/kill_driver.cmake)
list(APPEND registered ${SL_TEST_NAME})
