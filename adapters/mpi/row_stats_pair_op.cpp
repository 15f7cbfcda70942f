// SPDX-License-Identifier: Apache-2.0
#include "adapters/mpi/row_stats_pair_op.h"

#include "adapters/common/row_stats_merge.h"

namespace softmax_adapter {
namespace {

// MPI_User_function: inout[i] = in[i] merged with inout[i], for `len` (max, sum) pairs. MPI may
// call it on any segment of the buffer, so it only ever looks at whole pairs.
void merge_pairs(void* in, void* inout, int* len, MPI_Datatype* /*type*/) {
  const float* a = static_cast<const float*>(in);
  float* b = static_cast<float*>(inout);
  for (int i = 0; i < *len; ++i) {
    merge_row_stats(a[2 * i], a[2 * i + 1], b[2 * i], b[2 * i + 1], &b[2 * i], &b[2 * i + 1]);
  }
}

}  // namespace

RowStatsPairOp::RowStatsPairOp() {
  error_ = MPI_Type_contiguous(2, MPI_FLOAT, &type_);
  if (error_ == MPI_SUCCESS) error_ = MPI_Type_commit(&type_);
  // Commutative: the merge is symmetric bit for bit, so MPI may pair the ranks in any order.
  if (error_ == MPI_SUCCESS) error_ = MPI_Op_create(&merge_pairs, /*commute=*/1, &op_);
}

RowStatsPairOp::~RowStatsPairOp() {
  if (op_ != MPI_OP_NULL) MPI_Op_free(&op_);
  if (type_ != MPI_DATATYPE_NULL) MPI_Type_free(&type_);
}

}  // namespace softmax_adapter
