# SPDX-License-Identifier: Apache-2.0
# The "mpi" component of the softmax CMake package, included by softmaxConfig.cmake when asked
# for (find_package(softmax CONFIG COMPONENTS mpi)): MPI's C API, then softmax::softmax_mpi.
find_package(MPI QUIET COMPONENTS C)
if(MPI_C_FOUND)
  include("${CMAKE_CURRENT_LIST_DIR}/softmax_mpiTargets.cmake")
  set(softmax_mpi_FOUND TRUE)
else()
  set(softmax_mpi_FOUND FALSE)
endif()
