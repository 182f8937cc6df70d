# Builds FlashKit with only bf16 / head dim 64 and runs the "variant not compiled" tests
# against it (they skip in a full build). Invoked by CTest with -P.
execute_process(
  COMMAND ${CMAKE_COMMAND} -S ${SRC} -B ${BIN} -G ${CMAKE_GENERATOR}
    -DCMAKE_BUILD_TYPE=Release
    -DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}
    -DCMAKE_CUDA_COMPILER=${CMAKE_CUDA_COMPILER}
    -DCMAKE_CUDA_ARCHITECTURES=80-virtual
    -DFLASHKIT_DTYPES=bf16 -DFLASHKIT_HEAD_DIMS=64
    -DFLASHKIT_BUILD_TESTS=ON -DFLASHKIT_TEST_NOT_COMPILED_BUILD=OFF -DFLASHKIT_BUILD_PYTHON=OFF
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring the minimal build failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BIN} --target flashkit_api_tests RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building the minimal build failed (${rc})")
endif()
execute_process(
  COMMAND ${BIN}/tests/cpp/flashkit_api_tests --gtest_filter=ValidateNotCompiled.*
  OUTPUT_VARIABLE out ERROR_VARIABLE out RESULT_VARIABLE rc)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ValidateNotCompiled tests failed in the minimal build")
endif()
# They must have run, not skipped: the minimal build lacks e.g. float16/128.
if(out MATCHES "SKIPPED")
  message(FATAL_ERROR "ValidateNotCompiled tests skipped in the minimal build")
endif()
