# SPDX-License-Identifier: Apache-2.0
# CPack: Debian packages (and a tarball) from the install components.
#
#   cmake -S . -B build-deb -G Ninja -DCMAKE_INSTALL_PREFIX=/usr -DSOFTMAX_BUILD_TESTS=OFF \
#         -DSOFTMAX_BUILD_BENCH=OFF && cmake --build build-deb && (cd build-deb && cpack -G DEB)
#
# gives libsoftmax0_<version>_<arch>.deb (the shared library, with its license) and
# libsoftmax-dev_<version>_<arch>.deb (header, CMake package, pkg-config file). Configure with
# CMAKE_INSTALL_PREFIX=/usr so that GNUInstallDirs picks Debian's multiarch library folder.
# Only the top-level project packages: a parent project that adds libsoftmax as a subdirectory
# has its own CPack configuration.
if(NOT PROJECT_IS_TOP_LEVEL)
  return()
endif()

set(SOFTMAX_PACKAGE_MAINTAINER "libsoftmax developers" CACHE STRING
    "Maintainer field of the Debian packages")

set(CPACK_PACKAGE_NAME libsoftmax)
set(CPACK_PACKAGE_VENDOR "libsoftmax developers")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_RPM_PACKAGE_LICENSE ${SOFTMAX_LICENSE})
set(CPACK_PACKAGE_CONTACT "${SOFTMAX_PACKAGE_MAINTAINER}")
set(CPACK_GENERATOR DEB TGZ)
set(CPACK_SOURCE_GENERATOR TGZ)
set(CPACK_SOURCE_IGNORE_FILES "/\\\\.git" "/build[^/]*/" "/target/" "__pycache__")

set(CPACK_COMPONENTS_ALL runtime dev)
set(CPACK_COMPONENT_RUNTIME_DISPLAY_NAME "libsoftmax shared library")
set(CPACK_COMPONENT_DEV_DISPLAY_NAME "libsoftmax development files")
set(CPACK_COMPONENT_DEV_DEPENDS runtime)

# --- Debian ------------------------------------------------------------------------------------
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${SOFTMAX_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Package names follow Debian's library policy: the runtime package carries the SONAME's major.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libsoftmax${PROJECT_VERSION_MAJOR})
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libsoftmax-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# The synopsis of both packages is the project description; these are their long descriptions.
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION
    "libsoftmax computes softmax, log-softmax and softmax fused with inverted dropout over the
rows of a matrix, with their gradients, on the CPU (OpenMP, SIMD chosen at run time) and on
NVIDIA GPUs, behind one stable C ABI. The CUDA runtime is linked statically: the library loads
and runs on the CPU on machines without an NVIDIA driver. License: ${SOFTMAX_LICENSE}.")
set(CPACK_COMPONENT_DEV_DESCRIPTION
    "Development files for libsoftmax: the C header softmax/softmax.h, the CMake package
(find_package(softmax)) and the pkg-config file (pkg-config softmax).
License: ${SOFTMAX_LICENSE}.")
# Runtime dependencies (libc, libgomp, libstdc++, libhwy when built with Highway) are read from
# the library itself; the shlibs file and ldconfig trigger let other packages depend on this one.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "libsoftmax${PROJECT_VERSION_MAJOR} (= ${PROJECT_VERSION})")

include(CPack)
