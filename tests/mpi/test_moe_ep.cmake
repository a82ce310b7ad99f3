# MoE EP under mpirun: the default registration (-np 2, -np 4, -np 4 as two simulated nodes)
# plus a smoke run of `sluice bench moe` on the CPU backend (quick shapes, one iteration),
# so the benchmark cannot rot between GPU runs.
foreach(cfg np2 np4 np4_2nodes)
  set(np 2)
  set(extra "")
  if(cfg STREQUAL "np4")
    set(np 4)
  elseif(cfg STREQUAL "np4_2nodes")
    set(np 4)
    set(extra -x SL_RANKS_PER_NODE=2)
  endif()
  add_test(NAME ${SL_TEST_NAME}_${cfg} COMMAND ${SL_MPIRUN} -np ${np} ${extra} $<TARGET_FILE:${SL_TEST_TARGET}>)
  list(APPEND registered ${SL_TEST_NAME}_${cfg})
endforeach()
add_test(NAME ${SL_TEST_NAME}_bench_smoke
         COMMAND ${SL_MPIRUN} -np 2 -x SL_DEVICE=cpu $<TARGET_FILE:sluice> bench moe --quick --iters 1
                 --only dispatch)
list(APPEND registered ${SL_TEST_NAME}_bench_smoke)
