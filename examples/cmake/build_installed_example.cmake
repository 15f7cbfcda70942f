# SPDX-License-Identifier: Apache-2.0
# Builds and runs one example (C or C++) against the libsoftmax installed in PREFIX, twice: as a
# CMake project using find_package(softmax CONFIG), and as a single compiler command using
# `pkg-config --cflags --libs softmax`.
#   cmake -DLANG=c|cpp -DSOURCE_DIR=<examples/c> -DWORK_DIR=<scratch> -DPREFIX=<prefix>
#         -DLIBDIR=<lib> -DCOMPILER=<cc or c++> -DGENERATOR=<generator> -P build_installed_example.cmake

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}): ${ARGN}")
  endif()
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
set(exe softmax_example_${LANG})

# --- 1. CMake package -----------------------------------------------------------------------
message(STATUS "== ${LANG} example with find_package(softmax CONFIG), prefix ${PREFIX}")
if(LANG STREQUAL "c")
  set(compiler_var CMAKE_C_COMPILER)
else()
  set(compiler_var CMAKE_CXX_COMPILER)
endif()
run("configure" "${CMAKE_COMMAND}" -S "${SOURCE_DIR}" -B "${WORK_DIR}/cmake" -G "${GENERATOR}"
    -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=${PREFIX}" "-D${compiler_var}=${COMPILER}")
run("build" "${CMAKE_COMMAND}" --build "${WORK_DIR}/cmake")
run("${exe} (CMake build)" "${WORK_DIR}/cmake/${exe}")

# --- 2. pkg-config --------------------------------------------------------------------------
message(STATUS "== ${LANG} example with pkg-config")
find_program(PKG_CONFIG pkg-config REQUIRED)
set(ENV{PKG_CONFIG_PATH} "${PREFIX}/${LIBDIR}/pkgconfig")
# No --define-variable: softmax.pc must find the prefix it was installed into by itself.
set(pc "${PKG_CONFIG}")
execute_process(COMMAND ${pc} --cflags --libs softmax OUTPUT_VARIABLE flags
                RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pkg-config --cflags --libs softmax failed (${rc}); PKG_CONFIG_PATH=$ENV{PKG_CONFIG_PATH}")
endif()
execute_process(COMMAND ${pc} --variable=libdir softmax OUTPUT_VARIABLE libdir
                OUTPUT_STRIP_TRAILING_WHITESPACE)
message(STATUS "pkg-config: ${flags} (libdir ${libdir})")
separate_arguments(flags UNIX_COMMAND "${flags}")
if(LANG STREQUAL "c")
  set(source "${SOURCE_DIR}/softmax_example.c")
  set(std -std=c99)
  set(extra_libs -lm)  # the C example calls expf and fabs
else()
  set(source "${SOURCE_DIR}/softmax_example.cpp")
  set(std -std=c++17)
endif()
file(MAKE_DIRECTORY "${WORK_DIR}/pkgconfig")
run("compile with pkg-config flags" "${COMPILER}" ${std} -Wall -Werror "${source}" ${flags} ${extra_libs}
    "-Wl,-rpath,${libdir}" -o "${WORK_DIR}/pkgconfig/${exe}")
run("${exe} (pkg-config build)" "${WORK_DIR}/pkgconfig/${exe}")
