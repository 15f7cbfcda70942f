# SPDX-License-Identifier: Apache-2.0
# The "nccl" component of the softmax CMake package, included by softmaxConfig.cmake when asked
# for (find_package(softmax CONFIG COMPONENTS nccl)): softmax::softmax_nccl. Its header needs
# neither nccl.h nor CUDA's headers, and libsoftmax_nccl carries its own NCCL dependency.
include("${CMAKE_CURRENT_LIST_DIR}/softmax_ncclTargets.cmake")
set(softmax_nccl_FOUND TRUE)
