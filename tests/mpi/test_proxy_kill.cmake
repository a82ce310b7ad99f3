# Registration of test_proxy_kill: a driver runs mpirun (-np 4, two simulated nodes), rank 3
# kills itself mid-exchange, and the job must end with a failure within the limit.
string(REPLACE ";" "|" sl_mpirun_arg "${SL_MPIRUN}")
add_test(NAME ${SL_TEST_NAME}_np4_2nodes
         COMMAND ${CMAKE_COMMAND} "-DMPIRUN=${sl_mpirun_arg}" -DEXE=$<TARGET_FILE:${SL_TEST_TARGET}> -DLIMIT_S=30
                 -DTIMEOUT_MS=5000 -DREQUIRE_FAILURE=1 "-DEXPECT=KILLING rank 3"
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/mpi/proxy_fault_driver.cmake)
list(APPEND registered ${SL_TEST_NAME}_np4_2nodes)
