# SPDX-License-Identifier: Apache-2.0
# Builds one example project against the libsoftmax installed in PREFIX (find_package(softmax
# CONFIG COMPONENTS ...), as a user would) and runs it, under LAUNCH when given (mpiexec -n 2).
#   cmake -DSOURCE_DIR=<examples/mpi> -DWORK_DIR=<scratch> -DPREFIX=<prefix> -DGENERATOR=<generator>
#         -DEXE=<program> [-DLAUNCH=<launcher;args>]
#         -P build_installed_example.cmake
# A program that exits with 77 could not run here (no GPU); this prints "SKIPPED: <why>" and
# succeeds, which ctest reports as a skip.
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}): ${ARGN}")
  endif()
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
run("configure ${SOURCE_DIR}" "${CMAKE_COMMAND}" -S "${SOURCE_DIR}" -B "${WORK_DIR}" -G "${GENERATOR}"
    -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=${PREFIX}")
run("build ${SOURCE_DIR}" "${CMAKE_COMMAND}" --build "${WORK_DIR}")
execute_process(COMMAND ${LAUNCH} "${WORK_DIR}/${EXE}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(rc EQUAL 77)
  message("SKIPPED: ${EXE} cannot run on this machine (see its output above)")
elseif(NOT rc EQUAL 0)
  message(FATAL_ERROR "${EXE} failed (${rc})")
endif()
