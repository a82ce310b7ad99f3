# The default registration (np2, np4, np4 as two simulated nodes), plus a smoke test of
# `sluice bench allreduce` on the CPU backend (quick sweep, 2 iterations) under mpirun -np 2.
foreach(np 2 4)
  add_test(NAME ${SL_TEST_NAME}_np${np} COMMAND ${SL_MPIRUN} -np ${np} $<TARGET_FILE:${SL_TEST_TARGET}>)
  list(APPEND registered ${SL_TEST_NAME}_np${np})
endforeach()
add_test(NAME ${SL_TEST_NAME}_np4_2nodes
         COMMAND ${SL_MPIRUN} -np 4 -x SL_RANKS_PER_NODE=2 $<TARGET_FILE:${SL_TEST_TARGET}>)
list(APPEND registered ${SL_TEST_NAME}_np4_2nodes)
add_test(NAME mpi_bench_allreduce_np2
         COMMAND ${SL_MPIRUN} -np 2 -x SL_DEVICE=cpu $<TARGET_FILE:sluice> bench allreduce --iters 2)
set_tests_properties(mpi_bench_allreduce_np2 PROPERTIES PASS_REGULAR_EXPRESSION "allreduce +512 KiB bf16 +twoshot")
list(APPEND registered mpi_bench_allreduce_np2)
