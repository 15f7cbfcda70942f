// SPDX-License-Identifier: Apache-2.0
// GPU harness implementation (see cuda_harness.h).
#include "cuda_harness.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "h200_anchor_table.h"
#include "input_fill.h"
#include "timing.h"

namespace bench {

void cuda_fatal(const char* what, cudaError_t e, const char* file, int line) {
  std::fprintf(stderr, "softmax_bench: CUDA error %s (%s) in %s at %s:%d\n", cudaGetErrorName(e),
               cudaGetErrorString(e), what, file, line);
  std::exit(3);
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes) BENCH_CUDA_CHECK(cudaMalloc(&p_, bytes));
}

DeviceBuffer::~DeviceBuffer() {
  if (p_) cudaFree(p_);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (p_) cudaFree(p_);
    p_ = o.p_;
    bytes_ = o.bytes_;
    o.p_ = nullptr;
  }
  return *this;
}

namespace {

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

template <typename T>
__global__ void fill_kernel(T* dst, int64_t n, uint64_t seed, uint64_t base) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = from_float<T>(input_value(seed, base + static_cast<uint64_t>(i)));
}

}  // namespace

void fill_device_input(void* dst, softmax_dtype dtype, int64_t n, uint64_t seed, uint64_t base,
                       cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 65536));
  if (dtype == SOFTMAX_DTYPE_F32) fill_kernel<<<blocks, 256, 0, stream>>>(static_cast<float*>(dst), n, seed, base);
  else if (dtype == SOFTMAX_DTYPE_F16) fill_kernel<<<blocks, 256, 0, stream>>>(static_cast<__half*>(dst), n, seed, base);
  else fill_kernel<<<blocks, 256, 0, stream>>>(static_cast<__nv_bfloat16*>(dst), n, seed, base);
  BENCH_CUDA_CHECK(cudaGetLastError());
}

void make_gpu_case(GpuCase* c, Shape shape, softmax_dtype dtype, bool with_mask, uint64_t seed,
                   size_t l2_bytes, cudaStream_t stream) {
  c->shape = shape;
  c->dtype = dtype;
  const int64_t n = shape.elements();
  c->bytes_x = static_cast<size_t>(n) * dtype_bytes(dtype);
  c->bytes_mask = with_mask ? static_cast<size_t>(n) : 0;
  auto round_up = [](size_t b) { return (b + 255) & ~size_t(255); };
  c->stride_x = round_up(c->bytes_x);
  c->stride_mask = round_up(c->bytes_mask);
  const size_t footprint = 2 * c->bytes_x + c->bytes_mask;
  const size_t want = 4 * l2_bytes;  // four L2s of distinct data between two uses of one set
  c->sets = static_cast<int>(std::min<size_t>(64, std::max<size_t>(1, (want + footprint - 1) / footprint)));
  c->batch = c->sets > 1 ? 10 : 1;
  c->x = DeviceBuffer(c->stride_x * c->sets);
  c->y = DeviceBuffer(c->stride_x * c->sets);
  if (with_mask) c->mask = DeviceBuffer(c->stride_mask * c->sets);
  for (int s = 0; s < c->sets; ++s)
    fill_device_input(c->x_at(s), dtype, n, seed, static_cast<uint64_t>(s) * static_cast<uint64_t>(n), stream);
  BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));

  c->sampled_rows = sample_rows(shape.rows, shape.cols, int64_t(1) << 24, seed + 7);
  c->x_rows.clear();
  c->stats.clear();
  std::vector<unsigned char> raw(static_cast<size_t>(shape.cols) * dtype_bytes(dtype));
  for (int64_t r : c->sampled_rows) {
    BENCH_CUDA_CHECK(cudaMemcpy(raw.data(), c->x.get() + static_cast<size_t>(r) * raw.size(), raw.size(),
                                cudaMemcpyDeviceToHost));
    std::vector<float> row(shape.cols);
    widen(raw.data(), dtype, shape.cols, row.data());
    c->stats.push_back(row_stats(row.data(), shape.cols));
    c->x_rows.push_back(std::move(row));
  }
}

LaunchResult LaunchResult::from_cuda(cudaError_t e) {
  LaunchResult r;
  if (e != cudaSuccess) {
    r.ok = false;
    r.message = std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
  }
  return r;
}

LaunchResult LaunchResult::from_status(softmax_status s) {
  LaunchResult r;
  if (s != SOFTMAX_STATUS_SUCCESS) {
    r.ok = false;
    r.unavailable = s == SOFTMAX_STATUS_BACKEND_UNAVAILABLE;
    r.message = std::string(softmax_status_string(s)) + ": " + softmax_last_error();
  }
  return r;
}

std::vector<double> time_device_ms(const Launch& launch, int warmup, int reps, cudaStream_t stream,
                                   LaunchResult* failure, int batch) {
  for (int i = 0; i < warmup; ++i) {
    const LaunchResult r = launch(i + 1);
    if (!r.ok) return *failure = r, std::vector<double>{};
  }
  std::vector<cudaEvent_t> events(reps + 1);
  for (cudaEvent_t& e : events) BENCH_CUDA_CHECK(cudaEventCreate(&e));
  BENCH_CUDA_CHECK(cudaEventRecord(events[0], stream));
  int next = warmup + 1;
  for (int i = 0; i < reps && failure->ok; ++i) {
    for (int b = 0; b < batch; ++b) {
      const LaunchResult r = launch(next++);
      if (!r.ok) {
        *failure = r;
        break;
      }
    }
    BENCH_CUDA_CHECK(cudaEventRecord(events[i + 1], stream));
  }
  BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> ms;
  if (failure->ok) {
    for (int i = 0; i < reps; ++i) {
      float t = 0;
      BENCH_CUDA_CHECK(cudaEventElapsedTime(&t, events[i], events[i + 1]));
      ms.push_back(static_cast<double>(t) / batch);
    }
  }
  for (cudaEvent_t& e : events) BENCH_CUDA_CHECK(cudaEventDestroy(e));
  return ms;
}

namespace {

void attach_anchor(Row* row, const Shape& shape, bool dropout) {
  double gbs = 0;
  std::string impl;
  if (best_anchor(row->dtype, shape, dropout ? is_dropout_anchor : is_softmax_anchor, &gbs, &impl)) {
    row->anchor_gbs = gbs;
    row->anchor_impl = impl;
  }
}

// A table row for one variant of case c, before it is measured.
Row gpu_row(const GpuCase& c, const std::string& section, const std::string& variant, double bytes) {
  Row row;
  row.device = "cuda";
  row.section = section;
  row.rows = c.shape.rows;
  row.cols = c.shape.cols;
  row.dtype = dtype_label(c.dtype);
  row.variant = variant;
  row.bytes = bytes;
  return row;
}

}  // namespace

Row measure_gpu_variant(Report* report, GpuCase& c, const std::string& section,
                        const std::string& variant, double bytes, double copy_gbs,
                        const Expectation& ex, const Launch& launch, int warmup, int reps,
                        cudaStream_t stream) {
  Row row = gpu_row(c, section, variant, bytes);
  row.copy_gbs = copy_gbs;
  row.tolerance = tolerance_for(c.dtype, ex.float_sum);
  if (section != "ladder" && section != "dropout_ladder")
    attach_anchor(&row, c.shape, ex.expect == Expect::Dropout);

  // Poison: 0xFF bytes are NaN in f32, f16 and bf16, and 255 is no valid mask byte.
  BENCH_CUDA_CHECK(cudaMemsetAsync(c.y_at(0), 0xFF, c.bytes_x, stream));
  if (c.bytes_mask) BENCH_CUDA_CHECK(cudaMemsetAsync(c.mask_at(0), 0xFF, c.bytes_mask, stream));
  LaunchResult first = launch(0);
  if (first.ok) first = LaunchResult::from_cuda(cudaStreamSynchronize(stream));
  if (!first.ok) {
    row.check = first.unavailable ? "skipped" : "FAIL";
    row.note = first.message;
    report->add(row);
    return row;
  }

  const int64_t cols = c.shape.cols;
  const size_t es = dtype_bytes(c.dtype);
  std::vector<unsigned char> raw(static_cast<size_t>(cols) * es);
  std::vector<float> yrow(cols);
  std::vector<uint8_t> mrow;
  row.max_err = 0;
  for (size_t k = 0; k < c.sampled_rows.size(); ++k) {
    const int64_t r = c.sampled_rows[k];
    BENCH_CUDA_CHECK(cudaMemcpy(raw.data(), static_cast<unsigned char*>(c.y_at(0)) + static_cast<size_t>(r) * raw.size(),
                                raw.size(), cudaMemcpyDeviceToHost));
    widen(raw.data(), c.dtype, cols, yrow.data());
    const bool mask_written = c.bytes_mask && ex.mask_written;
    if (mask_written) {
      mrow.resize(cols);
      BENCH_CUDA_CHECK(cudaMemcpy(mrow.data(), c.mask_at(0) + static_cast<size_t>(r) * cols, cols, cudaMemcpyDeviceToHost));
    }
    RowError e;
    if (ex.uniforms) {
      // Keep decisions come from the pre-generated uniforms, not from the Philox definition:
      // compare with the softmax of the row, scaled where u > p and zero elsewhere.
      const std::vector<float>& u = (*ex.uniforms)[k];
      const double scale = 1.0 / (1.0 - ex.dropout.p);
      for (int64_t j = 0; j < cols; ++j) {
        const double want = u[j] > ex.dropout.p
                                ? std::exp(double(c.x_rows[k][j]) - c.stats[k].max) / c.stats[k].sum * scale
                                : 0.0;
        const double got = yrow[j];
        double err = std::fabs(got - want) / (std::fabs(want) + 1e-30);
        if (want == 0 && got != 0) err = INFINITY, e.problem = "dropped element is not 0";
        if (std::isnan(got)) err = INFINITY, e.problem = "NaN in output";
        if (err > e.max_err) e.max_err = err, e.worst_col = j;
      }
    } else {
      e = row_error(c.x_rows[k].data(), c.stats[k], yrow.data(), mask_written ? mrow.data() : nullptr, cols,
                    c.dtype, ex.expect, ex.dropout, r * cols);
    }
    if (e.max_err > row.max_err || !e.problem.empty()) {
      row.max_err = std::max(row.max_err, e.max_err);
      if (!e.problem.empty())
        row.note = "row " + std::to_string(r) + " col " + std::to_string(e.worst_col) + ": " + e.problem;
    }
  }
  row.check = row.max_err <= row.tolerance ? "pass" : "FAIL";

  LaunchResult failure;
  const std::vector<double> ms = time_device_ms(launch, warmup, reps, stream, &failure, c.batch);
  if (!failure.ok) {
    row.check = "FAIL";
    row.note = "failed while timing: " + failure.message;
  } else {
    row.ms = median(ms);
    row.reps = reps;
    finish_rates(&row);
  }
  if (c.sets > 1)
    row.note += (row.note.empty() ? "" : "; ") + std::to_string(c.sets) + " input sets rotated, " +
                std::to_string(c.batch) + " launches per sample";
  report->add(row);
  return row;
}

Row measure_gpu_copy(Report* report, GpuCase& c, const std::string& section, int warmup, int reps,
                     cudaStream_t stream) {
  Row row = gpu_row(c, section, "copy", 2.0 * c.bytes_x);
  const Launch copy = [&](int s) {
    return LaunchResult::from_cuda(cudaMemcpyAsync(c.y_at(s), c.x_at(s), c.bytes_x, cudaMemcpyDeviceToDevice, stream));
  };
  LaunchResult failure;
  const std::vector<double> ms = time_device_ms(copy, warmup, reps, stream, &failure, c.batch);
  if (!failure.ok) {
    row.check = "FAIL";
    row.note = failure.message;
  } else {
    // The copy's own check: set 0's y equals x on the sampled rows.
    BENCH_CUDA_CHECK(cudaMemcpyAsync(c.y_at(0), c.x_at(0), c.bytes_x, cudaMemcpyDeviceToDevice, stream));
    BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
    const size_t row_bytes = static_cast<size_t>(c.shape.cols) * dtype_bytes(c.dtype);
    std::vector<unsigned char> a(row_bytes), b(row_bytes);
    bool same = true;
    for (int64_t r : c.sampled_rows) {
      BENCH_CUDA_CHECK(cudaMemcpy(a.data(), static_cast<unsigned char*>(c.x_at(0)) + r * row_bytes, row_bytes, cudaMemcpyDeviceToHost));
      BENCH_CUDA_CHECK(cudaMemcpy(b.data(), static_cast<unsigned char*>(c.y_at(0)) + r * row_bytes, row_bytes, cudaMemcpyDeviceToHost));
      same = same && std::memcmp(a.data(), b.data(), row_bytes) == 0;
    }
    row.check = same ? "pass" : "FAIL";
    row.max_err = same ? 0 : NAN;
    row.ms = median(ms);
    row.reps = reps;
    finish_rates(&row);
    row.copy_gbs = row.gbs;
    finish_rates(&row);
  }
  double gbs = 0;
  std::string impl;
  if (best_anchor("f32", Shape{1, 268435456}, [](const std::string& i) { return i == "copy"; }, &gbs, &impl) &&
      section == "rows") {
    row.anchor_gbs = gbs;
    row.anchor_impl = "H200 copy, 1 GiB";
  }
  report->add(row);
  return row;
}

bool is_softmax_anchor(const std::string& impl) {
  return impl != "copy" && impl.rfind("seed", 0) != 0 && impl.find("dropout") == std::string::npos &&
         impl != "triton persistent tutorial";
}

bool is_dropout_anchor(const std::string& impl) { return impl.find("dropout") != std::string::npos; }

bool best_anchor(const std::string& dtype, const Shape& shape,
                 const std::function<bool(const std::string& impl)>& accept, double* gbs, std::string* impl) {
  // Anchors only on the GPU model they were measured on (h200_anchor_table.h).
  static const bool anchor_gpu = [] {
    int device = 0;
    cudaDeviceProp prop{};
    return cudaGetDevice(&device) == cudaSuccess &&
           cudaGetDeviceProperties(&prop, device) == cudaSuccess && anchors_apply_to(prop.name);
  }();
  if (!anchor_gpu) return false;
  bool found = false;
  for (const AnchorEntry& a : kH200Anchors) {
    if (dtype != a.dtype || a.rows != shape.rows || a.cols != shape.cols || !accept(a.impl)) continue;
    if (!found || a.gbs > *gbs) *gbs = a.gbs, *impl = a.impl, found = true;
  }
  return found;
}

}  // namespace bench
