# SPDX-License-Identifier: Apache-2.0
# ctest fixture for the examples: installs the libsoftmax just built into a fresh prefix, as a
# user would (`cmake --install`), so the examples are built against the installed package.
#   cmake -DBUILD_DIR=<top build dir> -DPREFIX=<prefix> -P install_library.cmake
file(REMOVE_RECURSE "${PREFIX}")
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${PREFIX}"
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install ${BUILD_DIR} --prefix ${PREFIX} failed: ${rc}")
endif()
