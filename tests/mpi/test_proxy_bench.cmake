# Registration of test_proxy_bench: the benchmark lives in launch/ (the sluice command), so
# its files are compiled into this test (bench_cupti.c without the CUPTI header: kernel times
# off); runs -np 2 (one node) and -np 4 as two simulated nodes.
target_sources(${SL_TEST_TARGET} PRIVATE ${CMAKE_SOURCE_DIR}/launch/bench_proxy.c ${CMAKE_SOURCE_DIR}/launch/bench_util.c
                                         ${CMAKE_SOURCE_DIR}/launch/bench_cupti.c)
target_include_directories(${SL_TEST_TARGET} PRIVATE ${CMAKE_SOURCE_DIR}/launch)
add_test(NAME ${SL_TEST_NAME}_np2 COMMAND ${SL_MPIRUN} -np 2 $<TARGET_FILE:${SL_TEST_TARGET}>)
add_test(NAME ${SL_TEST_NAME}_np4_2nodes COMMAND ${SL_MPIRUN} -np 4 -x SL_RANKS_PER_NODE=2 $<TARGET_FILE:${SL_TEST_TARGET}>)
list(APPEND registered ${SL_TEST_NAME}_np2 ${SL_TEST_NAME}_np4_2nodes)
