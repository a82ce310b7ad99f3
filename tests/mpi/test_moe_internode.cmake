# MoE EP over the whole job: -np 2 and -np 4 on one node (the node handle), -np 4 as two
# simulated nodes of 2 and -np 2 as two nodes of 1 (the inter-node path: shm + UCX proxy over
# TCP loopback).
foreach(cfg np2 np4 np4_2nodes np2_2nodes)
  set(np 2)
  set(extra -x UCX_TLS=tcp)
  if(cfg STREQUAL "np4")
    set(np 4)
  elseif(cfg STREQUAL "np4_2nodes")
    set(np 4)
    list(APPEND extra -x SL_RANKS_PER_NODE=2)
  elseif(cfg STREQUAL "np2_2nodes")
    list(APPEND extra -x SL_RANKS_PER_NODE=1)
  endif()
  add_test(NAME ${SL_TEST_NAME}_${cfg} COMMAND ${SL_MPIRUN} -np ${np} ${extra} $<TARGET_FILE:${SL_TEST_TARGET}>)
  list(APPEND registered ${SL_TEST_NAME}_${cfg})
endforeach()
# Smoke run of `sluice bench moe --nodes-sim` (CPU, two simulated nodes of one rank, one
# iteration), including its proxy section, so the benchmark cannot rot between GPU runs.
add_test(NAME ${SL_TEST_NAME}_bench_smoke
         COMMAND ${SL_MPIRUN} -np 2 -x SL_DEVICE=cpu -x SL_RANKS_PER_NODE=1 -x UCX_TLS=tcp $<TARGET_FILE:sluice>
                 bench moe --nodes-sim --quick --iters 1)
list(APPEND registered ${SL_TEST_NAME}_bench_smoke)
