# CTest `kvcache_fuzz`: builds tests/fuzz with a libFuzzer-capable compiler and runs the
# fuzzer for SECONDS seconds from an empty corpus. Invoked with -P and
# -DSRC=<repo> -DBIN=<build dir> -DCXX=<compiler> -DSECONDS=<n> -DGENERATOR=<generator>.
execute_process(
  COMMAND ${CMAKE_COMMAND} -S ${SRC}/tests/fuzz -B ${BIN} -G ${GENERATOR}
    -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=RelWithDebInfo
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring the fuzzer failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BIN} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building the fuzzer failed (${rc})")
endif()
file(REMOVE_RECURSE ${BIN}/corpus)
file(MAKE_DIRECTORY ${BIN}/corpus)
execute_process(
  COMMAND ${BIN}/kvcache_fuzzer -max_total_time=${SECONDS} -max_len=4096 -print_final_stats=1
    -artifact_prefix=${BIN}/
    ${BIN}/corpus
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the KV-cache fuzzer found a problem (exit ${rc}); the input is in ${BIN}")
endif()
