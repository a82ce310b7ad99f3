# MoE fault tests: rank 1 of each group stalls, skips a dispatch or skips a combine; the
# others must get SL_ERR_TIMEOUT naming it. Short timeout so the test is quick.
foreach(mode stall skip_dispatch skip_combine)
  foreach(cfg np2 np4 np4_2nodes)
    set(np 2)
    set(extra "")
    if(cfg STREQUAL "np4")
      set(np 4)
    elseif(cfg STREQUAL "np4_2nodes")
      set(np 4)
      set(extra -x SL_RANKS_PER_NODE=2)
    endif()
    add_test(NAME ${SL_TEST_NAME}_${mode}_${cfg}
             COMMAND ${SL_MPIRUN} -np ${np} -x SL_TIMEOUT_MS=500 ${extra} $<TARGET_FILE:${SL_TEST_TARGET}> ${mode})
    list(APPEND registered ${SL_TEST_NAME}_${mode}_${cfg})
  endforeach()
endforeach()
