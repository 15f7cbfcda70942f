// SPDX-License-Identifier: Apache-2.0
// Parsing of softmax_bench's command line. Kept apart from the sections so that the options a CI
// script relies on (--quick, --device, --json) are all visible in one place.
#include "bench_options.h"

#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>

namespace bench {

namespace {

const char kUsage[] =
    "usage: softmax_bench [options]\n"
    "  --device cpu|cuda|all   sections to run (default: cpu, plus cuda when a GPU is present)\n"
    "  --shapes RxC,RxC,...    shapes instead of each section's list (e.g. 2048x32768,1x67108864)\n"
    "  --dtype f32|bf16|f16[,..] dtypes (default: CPU f32; GPU f32 and bf16 shape lists)\n"
    "  --reps N                timed repetitions per variant (median reported)\n"
    "  --warmup N              untimed runs before timing (default 2)\n"
    "  --threads N             CPU threads (default: OMP_NUM_THREADS, else 2)\n"
    "  --gpu-parts LIST        subset of rows,ladder,dropout_ladder (default: all)\n"
    "  --seed N                input seed (default: fresh each run)\n"
    "  --quick                 small sizes, few reps (CI smoke test)\n"
    "  --lib-only              GPU rows table: copy, softmax_rows, softmax_dropout only\n"
    "  --json FILE             also write every row as JSON\n";

bool parse_int64(const std::string& s, int64_t* v) {
  if (s.empty()) return false;
  char* end = nullptr;
  const long long x = std::strtoll(s.c_str(), &end, 10);
  if (*end != '\0') return false;
  *v = x;
  return true;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, sep))
    if (!item.empty()) parts.push_back(item);
  return parts;
}

bool parse_shapes(const std::string& text, std::vector<Shape>* out, std::string* error) {
  for (const std::string& item : split(text, ',')) {
    const size_t x = item.find('x');
    int64_t r = 0, c = 0;
    if (x == std::string::npos || !parse_int64(item.substr(0, x), &r) ||
        !parse_int64(item.substr(x + 1), &c) || r <= 0 || c <= 0) {
      *error = "bad shape '" + item + "' (want ROWSxCOLS with positive numbers)";
      return false;
    }
    out->push_back({r, c});
  }
  if (out->empty()) *error = "--shapes needs at least one shape";
  return !out->empty();
}

bool parse_dtypes(const std::string& text, std::vector<softmax_dtype>* out, std::string* error) {
  for (const std::string& item : split(text, ',')) {
    if (item == "f32" || item == "fp32" || item == "float32") out->push_back(SOFTMAX_DTYPE_F32);
    else if (item == "bf16" || item == "bfloat16") out->push_back(SOFTMAX_DTYPE_BF16);
    else if (item == "f16" || item == "fp16" || item == "float16") out->push_back(SOFTMAX_DTYPE_F16);
    else {
      *error = "unknown dtype '" + item + "' (f32, bf16, f16)";
      return false;
    }
  }
  if (out->empty()) *error = "--dtype needs at least one dtype";
  return !out->empty();
}

}  // namespace

std::string shape_name(const Shape& s) {
  return std::to_string(s.rows) + "x" + std::to_string(s.cols);
}

const char* dtype_label(softmax_dtype t) {
  return t == SOFTMAX_DTYPE_F32 ? "f32" : t == SOFTMAX_DTYPE_BF16 ? "bf16" : "f16";
}

size_t dtype_bytes(softmax_dtype t) { return t == SOFTMAX_DTYPE_F32 ? 4 : 2; }

bool parse_options(int argc, char** argv, Options* o, std::string* error) {
  if (const char* env = std::getenv("OMP_NUM_THREADS")) {
    int64_t t = 0;
    if (parse_int64(env, &t) && t > 0) o->threads = static_cast<int>(t);
  }
  o->seed = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](std::string* v) {
      if (i + 1 >= argc) {
        *error = a + " needs a value";
        return false;
      }
      *v = argv[++i];
      return true;
    };
    std::string v;
    int64_t n = 0;
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (a == "--quick") {
      o->quick = true;
    } else if (a == "--lib-only") {
      o->lib_only = true;
    } else if (a == "--device") {
      if (!value(&v)) return false;
      o->device_given = true;
      if (v == "cpu") o->run_cpu = true, o->run_cuda = false;
      else if (v == "cuda" || v == "gpu") o->run_cpu = false, o->run_cuda = true;
      else if (v == "all") o->run_cpu = true, o->run_cuda = true;
      else return *error = "--device must be cpu, cuda or all", false;
    } else if (a == "--shapes") {
      if (!value(&v) || !parse_shapes(v, &o->shapes, error)) return false;
    } else if (a == "--dtype" || a == "--dtypes") {
      if (!value(&v) || !parse_dtypes(v, &o->dtypes, error)) return false;
    } else if (a == "--reps" || a == "--warmup" || a == "--threads" || a == "--seed") {
      if (!value(&v)) return false;
      if (!parse_int64(v, &n) || n < 0 || (a != "--seed" && a != "--warmup" && n == 0))
        return *error = a + " needs a positive number, got '" + v + "'", false;
      if (a == "--reps") o->reps = static_cast<int>(n);
      else if (a == "--warmup") o->warmup = static_cast<int>(n);
      else if (a == "--threads") o->threads = static_cast<int>(n);
      else o->seed = static_cast<uint64_t>(n);
    } else if (a == "--gpu-parts") {
      if (!value(&v)) return false;
      o->gpu_parts.clear();
      for (const std::string& p : split(v, ',')) {
        if (p != "rows" && p != "ladder" && p != "dropout_ladder")
          return *error = "unknown --gpu-parts entry '" + p + "'", false;
        o->gpu_parts.insert(p);
      }
    } else if (a == "--json") {
      if (!value(&o->json_path)) return false;
    } else {
      *error = "unknown option '" + a + "'\n" + kUsage;
      return false;
    }
  }
  return true;
}

}  // namespace bench
