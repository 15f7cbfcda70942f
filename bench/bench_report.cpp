// SPDX-License-Identifier: Apache-2.0
// Table and JSON output of softmax_bench.
#include "bench_report.h"

#include <cstdio>

namespace bench {

namespace {

std::string fmt(const char* spec, double v) {
  if (std::isnan(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, spec, v);
  return buf;
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
      continue;
    }
    out += c;
  }
  return out;
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

std::string anchor_ratio_line(const std::string& what, const Row& lib, const Row& anchor, double copy_gbs) {
  char line[320];
  std::snprintf(line, sizeof line,
                "cpu %s: libsoftmax/oneDNN = %.2fx (%.1f vs %.1f GB/s; copy %.1f GB/s); max_err lib %.1e, oneDNN %.1e",
                what.c_str(), lib.gbs / anchor.gbs, lib.gbs, anchor.gbs, copy_gbs, lib.max_err, anchor.max_err);
  return line;
}

void finish_rates(Row* row) {
  if (!std::isnan(row->ms) && row->ms > 0) row->gbs = row->bytes / (row->ms * 1e-3) / 1e9;
  if (!std::isnan(row->gbs) && !std::isnan(row->copy_gbs) && row->copy_gbs > 0)
    row->pct_copy = 100.0 * row->gbs / row->copy_gbs;
}

// The last column holds the row's note and, for rows that have one, the anchor: a published
// measurement at the same shape on the GPU model it was taken on (only attached on that model).
void Report::section_header(const std::string& title) {
  std::printf("\n== %s\n", title.c_str());
  std::printf("%-4s %-15s %-5s %-26s %10s %9s %6s %9s %-5s %s\n", "dev", "shape", "dtype",
              "variant", "ms", "GB/s", "%copy", "max_err", "check", "note");
  std::fflush(stdout);
}

void Report::add(const Row& r) {
  rows_.push_back(r);
  if (r.check == "FAIL") ++failures_;
  const std::string shape = std::to_string(r.rows) + "x" + std::to_string(r.cols);
  const std::string check = r.check == "FAIL" ? "FAIL!" : r.check;
  std::string note = r.note;
  if (!std::isnan(r.anchor_gbs)) {
    note = "anchor " + fmt("%.0f", r.anchor_gbs) + " GB/s (" + r.anchor_impl + ")" +
           (note.empty() ? "" : "; " + note);
  }
  std::printf("%-4s %-15s %-5s %-26s %10s %9s %6s %9s %-5s %s\n", r.device.c_str(), shape.c_str(),
              r.dtype.c_str(), r.variant.c_str(), fmt("%.4f", r.ms).c_str(),
              fmt("%.1f", r.gbs).c_str(), fmt("%.0f%%", r.pct_copy).c_str(),
              fmt("%.2e", r.max_err).c_str(), check.c_str(), note.c_str());
  if (r.check == "FAIL")
    std::printf("!!!! CHECK FAILED: %s %s %s %s: max_err %.3e > tolerance %.3e %s\n",
                r.device.c_str(), shape.c_str(), r.dtype.c_str(), r.variant.c_str(), r.max_err,
                r.tolerance, r.note.c_str());
  std::fflush(stdout);
}

void Report::set_meta(const std::string& key, const std::string& value) { meta_.push_back({key, value}); }

void Report::summary(const std::string& line) {
  summaries_.push_back(line);
  std::printf("-- %s\n", line.c_str());
  std::fflush(stdout);
}

void Report::print_summary() const {
  std::printf("\n== summary\n");
  for (const std::string& s : summaries_) std::printf("%s\n", s.c_str());
  if (failures_ > 0) {
    std::printf("!!!! %d variant(s) FAILED their accuracy check:\n", failures_);
    for (const Row& r : rows_)
      if (r.check == "FAIL")
        std::printf("!!!!   %s %lldx%lld %s %s (max_err %.3e, tolerance %.3e) %s\n",
                    r.device.c_str(), static_cast<long long>(r.rows),
                    static_cast<long long>(r.cols), r.dtype.c_str(), r.variant.c_str(), r.max_err,
                    r.tolerance, r.note.c_str());
  } else {
    std::printf("all checked variants passed their accuracy checks\n");
  }
  std::fflush(stdout);
}

const Row* Report::find(const std::string& device, const std::string& section, int64_t rows,
                        int64_t cols, const std::string& dtype, const std::string& variant) const {
  for (const Row& r : rows_)
    if (r.device == device && r.section == section && r.rows == rows && r.cols == cols &&
        r.dtype == dtype && r.variant == variant)
      return &r;
  return nullptr;
}

bool Report::write_json(const std::string& path, const std::string& meta_json) const {
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return false;
  std::string meta = meta_json;  // "{...}": the caller's fields, then those set with set_meta
  for (const auto& kv : meta_)
    meta.insert(meta.size() - 1, ", \"" + json_escape(kv.first) + "\": \"" + json_escape(kv.second) + "\"");
  std::fprintf(f, "{\n \"meta\": %s,\n \"summary\": [", meta.c_str());
  for (size_t i = 0; i < summaries_.size(); ++i)
    std::fprintf(f, "%s\n  \"%s\"", i ? "," : "", json_escape(summaries_[i]).c_str());
  std::fprintf(f, "\n ],\n \"rows\": [");
  for (size_t i = 0; i < rows_.size(); ++i) {
    const Row& r = rows_[i];
    std::fprintf(f,
                 "%s\n  {\"device\": \"%s\", \"section\": \"%s\", \"rows\": %lld, \"cols\": %lld, "
                 "\"dtype\": \"%s\", \"variant\": \"%s\", \"bytes\": %.0f, \"ms\": %s, "
                 "\"gbs\": %s, \"copy_gbs\": %s, \"pct_copy\": %s, \"max_rel_err\": %s, "
                 "\"tolerance\": %s, \"check\": \"%s\", \"anchor_gbs\": %s, "
                 "\"anchor_impl\": \"%s\", \"reps\": %d, \"note\": \"%s\"}",
                 i ? "," : "", r.device.c_str(), r.section.c_str(), static_cast<long long>(r.rows),
                 static_cast<long long>(r.cols), r.dtype.c_str(), r.variant.c_str(), r.bytes,
                 json_number(r.ms).c_str(), json_number(r.gbs).c_str(),
                 json_number(r.copy_gbs).c_str(), json_number(r.pct_copy).c_str(),
                 json_number(r.max_err).c_str(), json_number(r.tolerance).c_str(), r.check.c_str(),
                 json_number(r.anchor_gbs).c_str(), json_escape(r.anchor_impl).c_str(), r.reps,
                 json_escape(r.note).c_str());
  }
  std::fprintf(f, "\n ]\n}\n");
  return std::fclose(f) == 0;
}

}  // namespace bench
