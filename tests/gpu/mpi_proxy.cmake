# Registration of gpu/mpi_proxy: -np 2 and -np 4 (every other rank remote) and -np 4 as two
# simulated nodes of two ranks, all sharing one GPU.
foreach(np 2 4)
  add_test(NAME ${SL_TEST_NAME}_np${np} COMMAND ${SL_MPIRUN} -np ${np} $<TARGET_FILE:${SL_TEST_TARGET}>)
  list(APPEND registered ${SL_TEST_NAME}_np${np})
endforeach()
add_test(NAME ${SL_TEST_NAME}_np4_2nodes
         COMMAND ${SL_MPIRUN} -np 4 -x SL_RANKS_PER_NODE=2 $<TARGET_FILE:${SL_TEST_TARGET}>)
list(APPEND registered ${SL_TEST_NAME}_np4_2nodes)
