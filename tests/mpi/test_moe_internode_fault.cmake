# Inter-node MoE faults: -np 4 as two simulated nodes; the last rank (node 1) stalls, skips
# a combine, or has its network paused mid-dispatch, in direct and node-aggregated modes; the others must get SL_ERR_TIMEOUT naming
# it. Plus the kill test (kill_driver.cmake: -np 3, one rank per simulated node).
foreach(mode stall skip_combine pause)
  foreach(net direct agg)
    add_test(NAME ${SL_TEST_NAME}_${mode}_${net}
             COMMAND ${SL_MPIRUN} -np 4 -x SL_TIMEOUT_MS=1000 -x SL_RANKS_PER_NODE=2 -x UCX_TLS=tcp
                     $<TARGET_FILE:${SL_TEST_TARGET}> ${mode} ${net})
    list(APPEND registered ${SL_TEST_NAME}_${mode}_${net})
  endforeach()
endforeach()
string(REPLACE ";" "|" sl_mpirun_arg "${SL_MPIRUN}")
add_test(NAME ${SL_TEST_NAME}_kill
         COMMAND ${CMAKE_COMMAND} "-DMPIRUN=${sl_mpirun_arg}" -DEXE=$<TARGET_FILE:${SL_TEST_TARGET}>
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/mpi/kill_driver.cmake)
list(APPEND registered ${SL_TEST_NAME}_kill)
