/* SPDX-License-Identifier: Apache-2.0 */
// The MPI datatype and reduction for per-row (max, sum) float pairs: MPI_Allreduce with them
// merges every rank's softmax_row_stats by the rule in adapters/common/row_stats_merge.h.
#pragma once

#include <mpi.h>

#include <string>

namespace softmax_adapter {

// Created per call and freed on scope exit: both are cheap local MPI calls, and holding them in
// statics would outlive MPI_Finalize.
class RowStatsPairOp {
 public:
  RowStatsPairOp();
  ~RowStatsPairOp();
  RowStatsPairOp(const RowStatsPairOp&) = delete;
  RowStatsPairOp& operator=(const RowStatsPairOp&) = delete;

  // MPI's error code from creating the type or the operation (MPI_SUCCESS when both exist).
  int error() const { return error_; }
  MPI_Datatype type() const { return type_; }
  MPI_Op op() const { return op_; }

 private:
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
  MPI_Op op_ = MPI_OP_NULL;
  int error_ = MPI_SUCCESS;
};

}  // namespace softmax_adapter
