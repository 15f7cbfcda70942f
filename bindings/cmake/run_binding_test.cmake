# SPDX-License-Identifier: Apache-2.0
# Runs one binding's test command for ctest, with the C compiler's view of the ABI layout in the
# environment (SOFTMAX_C_LAYOUT, printed by softmax_abi_layout_probe) so that the binding's
# layout test can compare its own declarations against it.
#
#   cmake -DPROBE=<probe> -DWORKDIR=<dir> -P run_binding_test.cmake -- <command> [args...]
#   cmake -DMISSING="<why>" -P run_binding_test.cmake       (a prerequisite is missing: fail)
if(DEFINED MISSING)
  message(FATAL_ERROR "${MISSING}")
endif()

set(cmd "")
set(seen_separator FALSE)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
  if(seen_separator)
    list(APPEND cmd "${CMAKE_ARGV${i}}")
  elseif("${CMAKE_ARGV${i}}" STREQUAL "--")
    set(seen_separator TRUE)
  endif()
endforeach()
if(NOT cmd)
  message(FATAL_ERROR "run_binding_test.cmake: no command after --")
endif()

execute_process(COMMAND "${PROBE}" OUTPUT_VARIABLE layout RESULT_VARIABLE rc
                OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "layout probe ${PROBE} failed: ${rc}")
endif()
set(ENV{SOFTMAX_C_LAYOUT} "${layout}")
message(STATUS "SOFTMAX_C_LAYOUT=${layout}")

execute_process(COMMAND ${cmd} WORKING_DIRECTORY "${WORKDIR}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "test command exited with ${rc}: ${cmd}")
endif()
