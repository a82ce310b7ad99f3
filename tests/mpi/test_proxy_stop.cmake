# Registration of test_proxy_stop: rank 3 stops (SIGSTOP) and no longer progresses; the
# proxies putting to it must fail with SL_ERR_TIMEOUT naming it, and the job must end.
string(REPLACE ";" "|" sl_mpirun_arg "${SL_MPIRUN}")
add_test(NAME ${SL_TEST_NAME}_np4_2nodes
         COMMAND ${CMAKE_COMMAND} "-DMPIRUN=${sl_mpirun_arg}" -DEXE=$<TARGET_FILE:${SL_TEST_TARGET}> -DLIMIT_S=40
                 -DTIMEOUT_MS=2000 -DREQUIRE_FAILURE=0
                 "-DEXPECT=STOPPING rank 3|DETECTED by rank 0: SL_ERR_[A-Z]+: .*rank 3 \\(node 1, host |DETECTED by rank 1: "
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/mpi/proxy_fault_driver.cmake)
list(APPEND registered ${SL_TEST_NAME}_np4_2nodes)
