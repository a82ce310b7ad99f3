# Registration of test_quant_fast: the whole run, and one with SL_TEST_FILTER (tests/sl_test.h
# SL_RUN_SELECTED) that must run exactly the one test it names and pass it.
add_test(NAME ${SL_TEST_NAME} COMMAND ${SL_TEST_TARGET})
add_test(NAME ${SL_TEST_NAME}_filter COMMAND ${CMAKE_COMMAND} -E env SL_TEST_FILTER=test_e2m1_decode8
                                             $<TARGET_FILE:${SL_TEST_TARGET}>)
set_tests_properties(${SL_TEST_NAME}_filter PROPERTIES PASS_REGULAR_EXPRESSION "='test_e2m1_decode8': 1 of [0-9]+ tests"
                                                        FAIL_REGULAR_EXPRESSION "FAILED|ERROR")
list(APPEND registered ${SL_TEST_NAME} ${SL_TEST_NAME}_filter)
