# Registration of gpu/mpi_moe_internode: one GPU shared by 4 ranks as two simulated nodes of
# 2, and by 2 ranks as two nodes of 1 (the host-driven inter-node path).
add_test(NAME ${SL_TEST_NAME}_np4_2nodes
         COMMAND ${SL_MPIRUN} -np 4 -x SL_RANKS_PER_NODE=2 $<TARGET_FILE:${SL_TEST_TARGET}>)
add_test(NAME ${SL_TEST_NAME}_np2_2nodes
         COMMAND ${SL_MPIRUN} -np 2 -x SL_RANKS_PER_NODE=1 $<TARGET_FILE:${SL_TEST_TARGET}>)
list(APPEND registered ${SL_TEST_NAME}_np4_2nodes ${SL_TEST_NAME}_np2_2nodes)
