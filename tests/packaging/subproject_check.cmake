# SPDX-License-Identifier: Apache-2.0
# libsoftmax inside another project: its tests and benchmark are not configured unless asked for,
# the parent's build type is left alone, and softmax::softmax is there to link. Configures
# subproject/ twice (default, then -DSOFTMAX_BUILD_TESTS=ON) and looks at the targets made.
#   cmake -DSOURCE_DIR=<repo> -DWORK_DIR=<scratch> -DGENERATOR=<generator> -P subproject_check.cmake

function(configure_consumer dir)
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${CMAKE_CURRENT_LIST_DIR}/subproject -B ${dir}
                          -G ${GENERATOR} -DSOFTMAX_SOURCE_DIR=${SOURCE_DIR}
                          -DSOFTMAX_WITH_CUDA=OFF ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_QUIET)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "configuring a project that adds libsoftmax as a subdirectory failed (${rc})")
  endif()
endfunction()

# A target exists when CMake wrote its folder (generator independent).
function(expect_target dir subdir target want)
  if(EXISTS "${dir}/softmax/${subdir}/CMakeFiles/${target}.dir")
    set(have TRUE)
  else()
    set(have FALSE)
  endif()
  if(NOT have STREQUAL want)
    message(FATAL_ERROR "${dir}: target ${target} exists: ${have}, expected ${want}")
  endif()
  message(STATUS "${target}: ${have}")
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")

message(STATUS "== default: the library only")
configure_consumer(${WORK_DIR}/default)
expect_target(${WORK_DIR}/default "." softmax TRUE)
expect_target(${WORK_DIR}/default "tests/api" softmax_api_tests FALSE)
expect_target(${WORK_DIR}/default "bench" softmax_bench FALSE)
if(NOT EXISTS "${WORK_DIR}/default/CMakeFiles/app.dir")
  message(FATAL_ERROR "the consumer's app target (linking softmax::softmax) was not generated")
endif()
file(STRINGS "${WORK_DIR}/default/CMakeCache.txt" build_type REGEX "^CMAKE_BUILD_TYPE:")
if(NOT build_type MATCHES "^CMAKE_BUILD_TYPE:[A-Z]*=$")
  message(FATAL_ERROR "libsoftmax changed the parent's build type: ${build_type}")
endif()

message(STATUS "== -DSOFTMAX_BUILD_TESTS=ON: the suites are there when asked for")
configure_consumer(${WORK_DIR}/tests -DSOFTMAX_BUILD_TESTS=ON)
expect_target(${WORK_DIR}/tests "tests/api" softmax_api_tests TRUE)
