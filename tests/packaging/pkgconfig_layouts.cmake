# SPDX-License-Identifier: Apache-2.0
# softmax.pc as `cmake --install` lays it out, for several library folders: writes the file with
# cmake/softmax_pkgconfig.cmake into <prefix>/<libdir>/pkgconfig, copies the real header to
# <prefix>/include, then asks pkg-config (with no --define-variable) where the header and the
# library are. Each answer must be the folder that holds them.
#   cmake -DSOURCE_DIR=<repo> -DWORK_DIR=<scratch> -DPKG_CONFIG=<pkg-config> -P pkgconfig_layouts.cmake

if(NOT PKG_CONFIG)
  message(FATAL_ERROR "pkg-config not found (apt-get install pkg-config)")
endif()
include(${SOURCE_DIR}/cmake/softmax_pkgconfig.cmake)
set(PROJECT_SOURCE_DIR ${SOURCE_DIR})
set(PROJECT_DESCRIPTION "layout test")
set(PROJECT_VERSION 0.0.0)
set(SOFTMAX_LICENSE Apache-2.0)
set(CMAKE_INSTALL_INCLUDEDIR include)
file(REMOVE_RECURSE "${WORK_DIR}")

foreach(libdir lib lib64 lib/x86_64-linux-gnu lib/aarch64-linux-gnu)
  string(MAKE_C_IDENTIFIER "${libdir}" name)
  set(prefix "${WORK_DIR}/${name}/usr")
  set(CMAKE_INSTALL_LIBDIR ${libdir})
  set(CMAKE_INSTALL_PREFIX /usr)  # what the file was configured for; the copy lies elsewhere
  softmax_write_pkgconfig("${prefix}/${libdir}/pkgconfig/softmax.pc")
  file(COPY ${SOURCE_DIR}/include/softmax DESTINATION "${prefix}/include")
  file(TOUCH "${prefix}/${libdir}/libsoftmax.so")

  set(ENV{PKG_CONFIG_PATH} "${prefix}/${libdir}/pkgconfig")
  foreach(query cflags-only-I libs-only-L)
    execute_process(COMMAND ${PKG_CONFIG} --${query} softmax OUTPUT_VARIABLE flag
                    RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "libdir ${libdir}: pkg-config --${query} softmax failed (${rc})")
    endif()
    string(REGEX REPLACE "^-[IL]" "" dir "${flag}")
    if(query STREQUAL "cflags-only-I")
      set(must "${dir}/softmax/softmax.h")
    else()
      set(must "${dir}/libsoftmax.so")
    endif()
    if(NOT EXISTS "${must}")
      file(READ "${prefix}/${libdir}/pkgconfig/softmax.pc" pc)
      message(FATAL_ERROR "libdir ${libdir}: pkg-config --${query} gave '${flag}', "
                          "which has no ${must}\nsoftmax.pc:\n${pc}")
    endif()
    message(STATUS "libdir ${libdir}: --${query} -> ${flag}")
  endforeach()
endforeach()
