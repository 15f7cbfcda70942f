/* SPDX-License-Identifier: Apache-2.0 */
// One measured row of the benchmark, the human table it is printed in, and the JSON dump.
//
// Rows are printed as soon as they are measured (a crash later still leaves the numbers on the
// screen); the JSON file and the summary lines are written at the end.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace bench {

struct Row {
  std::string device;   // "cpu" or "cuda"
  std::string section;  // "rows", "dropout", "ladder", "dropout_ladder"
  int64_t rows = 0;
  int64_t cols = 0;
  std::string dtype;
  std::string variant;
  double bytes = 0;                // bytes counted for GB/s: x + y (+ mask when written)
  double ms = NAN;                 // median of the timed runs
  double gbs = NAN;                // bytes / median time
  double copy_gbs = NAN;           // copy of the same bytes in the same run (read + write)
  double pct_copy = NAN;           // gbs / copy_gbs
  double max_err = NAN;            // max relative error vs float64 on sampled rows
  double tolerance = NAN;          // the bound max_err was held to
  std::string check = "unchecked"; // "pass", "FAIL", "skipped"
  double anchor_gbs = NAN;         // best anchor at this shape, on the GPU model it was measured on
  std::string anchor_impl;
  int reps = 0;
  std::string note;
};

class Report {
 public:
  // Prints the row at once and keeps it for the JSON file.
  void add(const Row& row);
  // A line printed again at the end ("library/oneDNN at 2048x32768: 1.62x").
  void summary(const std::string& line);
  void section_header(const std::string& title);
  // A string written into the JSON file's "meta" object (e.g. "gpu": "NVIDIA H200").
  void set_meta(const std::string& key, const std::string& value);
  void print_summary() const;
  bool write_json(const std::string& path, const std::string& meta_json) const;
  int failures() const { return failures_; }
  const std::vector<Row>& rows() const { return rows_; }
  // The first row matching, or nullptr.
  const Row* find(const std::string& device, const std::string& section, int64_t rows,
                  int64_t cols, const std::string& dtype, const std::string& variant) const;

 private:
  std::vector<Row> rows_;
  std::vector<std::string> summaries_;
  std::vector<std::pair<std::string, std::string>> meta_;
  int failures_ = 0;
};

// Fills gbs and pct_copy from bytes, ms and copy_gbs.
void finish_rates(Row* row);

// The summary line of a library row beside its anchor's on the same case: "cpu <what>:
// libsoftmax/oneDNN = <ratio> (...)".
std::string anchor_ratio_line(const std::string& what, const Row& lib, const Row& anchor, double copy_gbs);

}  // namespace bench
