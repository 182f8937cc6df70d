# cmake -P script run by the `example_find_package` test:
#   1. cmake --install FLASHKIT_BUILD_DIR --prefix FLASHKIT_BUILD_DIR/_install
#   2. configure + build FLASHKIT_EXAMPLE_DIR against that prefix (find_package(flashkit)).
foreach(_v FLASHKIT_BUILD_DIR FLASHKIT_EXAMPLE_DIR CMAKE_CXX_COMPILER CMAKE_CUDA_COMPILER)
  if(NOT DEFINED ${_v})
    message(FATAL_ERROR "example_find_package.cmake: ${_v} is not set")
  endif()
endforeach()

set(_prefix "${FLASHKIT_BUILD_DIR}/_install")
set(_example_build "${FLASHKIT_BUILD_DIR}/_example_build")
file(REMOVE_RECURSE "${_prefix}" "${_example_build}")

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "example_find_package: ${what} failed (${_rc})")
  endif()
endfunction()

set(_config_args "")
if(FLASHKIT_CONFIG)
  set(_config_args --config "${FLASHKIT_CONFIG}")
endif()
run_step("install" "${CMAKE_COMMAND}" --install "${FLASHKIT_BUILD_DIR}" --prefix "${_prefix}"
         ${_config_args})

# The toolkit that built flashkit: nvcc's parent directory.
get_filename_component(_cuda_bin "${CMAKE_CUDA_COMPILER}" DIRECTORY)
get_filename_component(_cuda_root "${_cuda_bin}" DIRECTORY)

set(_gen_args "")
if(CMAKE_GENERATOR)
  set(_gen_args -G "${CMAKE_GENERATOR}")
endif()
run_step("configure" "${CMAKE_COMMAND}" -S "${FLASHKIT_EXAMPLE_DIR}" -B "${_example_build}"
         ${_gen_args} --no-warn-unused-cli
         "-DCMAKE_PREFIX_PATH=${_prefix}"
         "-DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}"
         "-DCMAKE_CUDA_COMPILER=${CMAKE_CUDA_COMPILER}"
         "-DCUDAToolkit_ROOT=${_cuda_root}"
         "-DCMAKE_BUILD_TYPE=Release")
run_step("build" "${CMAKE_COMMAND}" --build "${_example_build}" ${_config_args})
message(STATUS "example_find_package: examples/cpp built against ${_prefix}")
