# The peer FFI test loads the shared library by its path, on the CPU backend.
add_dependencies(${SL_TEST_TARGET} sluice_peer_ffi)
target_link_libraries(${SL_TEST_TARGET} PRIVATE ${CMAKE_DL_LIBS})
add_test(NAME ${SL_TEST_NAME} COMMAND ${SL_TEST_TARGET} $<TARGET_FILE:sluice_peer_ffi>)
set(registered ${SL_TEST_NAME})
