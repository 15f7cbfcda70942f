// SPDX-License-Identifier: Apache-2.0
// GPU section: 1 GiB of input per shape, copy of the same bytes measured in the
// same run, the library next to CUB, Thrust and the published H200 anchors.
#include <cuda_runtime.h>

#include <cstdio>

#include "comparisons/cub_softmax.h"
#include "comparisons/thrust_softmax.h"
#include "cuda_harness.h"
#include "cuda_parts.h"
#include "sections.h"

namespace bench {

namespace {

const std::vector<Shape> kF32Shapes = {{8388608, 32},  {2097152, 128}, {524288, 512},  {262144, 1024},
                                       {131072, 2048}, {65536, 4096},  {32768, 8192},  {16384, 16384},
                                       {8192, 32768},  {4096, 65536},  {256, 1048576}, {1, 268435456}};
const std::vector<Shape> kBf16Shapes = {{8388608, 32}, {262144, 1024}, {65536, 4096},
                                        {16384, 16384}, {4096, 65536}, {1, 268435456}};
const std::vector<Shape> kQuickShapes = {{4096, 1024}, {1000, 33}, {64, 65536}, {1, 1000003}};
// Thrust is a slow reference: a few shapes spanning short, medium, long rows and one row.
const std::vector<Shape> kThrustShapes = {{2097152, 128}, {262144, 1024}, {8192, 32768}, {1, 268435456}};
// The dropout shapes.
const std::vector<Shape> kDropoutShapes = {{2097152, 128}, {262144, 1024}, {65536, 4096}, {8192, 32768}};

constexpr float kDropoutP = 0.1f;
// A multiple of 4, as a training loop advances it (4 uniforms per Philox draw); an offset with
// offset % 4 != 0 costs the library a second Philox block per 4 elements.
constexpr uint64_t kDropoutOffset = 8;

bool contains(const std::vector<Shape>& list, const Shape& s) {
  for (const Shape& t : list)
    if (t.rows == s.rows && t.cols == s.cols) return true;
  return false;
}

}  // namespace

bool cuda_device_present(std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(e);
    cudaGetLastError();
    return false;
  }
  if (count == 0) {
    *why = "no CUDA device";
    return false;
  }
  return true;
}

void run_gpu_rows_table(const Options& o, Report* report, const GpuInfo& gpu, cudaStream_t stream) {
  const int reps = o.reps > 0 ? o.reps : o.quick ? 5 : 50;
  std::vector<std::pair<softmax_dtype, std::vector<Shape>>> plan;
  if (!o.shapes.empty() || o.quick) {
    const std::vector<Shape>& shapes = !o.shapes.empty() ? o.shapes : kQuickShapes;
    for (softmax_dtype t : o.dtypes.empty() ? std::vector<softmax_dtype>{SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_BF16} : o.dtypes)
      plan.push_back({t, shapes});
  } else if (o.dtypes.empty()) {
    plan = {{SOFTMAX_DTYPE_F32, kF32Shapes}, {SOFTMAX_DTYPE_BF16, kBf16Shapes}};
  } else {
    for (softmax_dtype t : o.dtypes) plan.push_back({t, t == SOFTMAX_DTYPE_F32 ? kF32Shapes : kBf16Shapes});
  }
  const bool every_shape = !o.shapes.empty() || o.quick;

  report->section_header("CUDA: row softmax, " + gpu.name +
                         " (anchor = best of torch eager/compile, OneFlow, Triton, cuDNN at this shape)");
  softmax_options opt = softmax_default_options();
  opt.backend = SOFTMAX_BACKEND_CUDA;
  opt.stream = stream;

  for (const auto& entry : plan) {
    const softmax_dtype dtype = entry.first;
    for (const Shape& shape : entry.second) {
      const bool dropout = every_shape || contains(kDropoutShapes, shape);
      GpuCase c;
      make_gpu_case(&c, shape, dtype, dropout, o.seed ^ static_cast<uint64_t>(shape.cols), gpu.l2_bytes, stream);
      const Row copy = measure_gpu_copy(report, c, "rows", o.warmup, reps, stream);
      const double xy = 2.0 * c.bytes_x;

      Expectation soft;
      const Row lib = measure_gpu_variant(report, c, "rows", "libsoftmax", xy, copy.gbs, soft, [&](int s) {
        return LaunchResult::from_status(softmax_rows(c.x_at(s), c.y_at(s), shape.rows, shape.cols, dtype, &opt));
      }, o.warmup, reps, stream);

      if (!o.lib_only) {
        Expectation logsoft;
        logsoft.expect = Expect::LogSoftmax;
        softmax_options log_opt = opt;
        log_opt.flags = SOFTMAX_FLAG_LOG;
        measure_gpu_variant(report, c, "rows", "libsoftmax_log", xy, copy.gbs, logsoft, [&](int s) {
          return LaunchResult::from_status(softmax_rows(c.x_at(s), c.y_at(s), shape.rows, shape.cols, dtype, &log_opt));
        }, o.warmup, reps, stream);

        // CUB's block per row needs enough rows to fill the GPU; a long single row would run on one SM.
        if (shape.rows >= 2 * gpu.sms && shape.rows <= 0x7fffffff) {
          measure_gpu_variant(report, c, "rows", "cub_block_reduce", xy, copy.gbs, soft, [&](int s) {
            return LaunchResult::from_cuda(softmax_compare::cub_block_softmax(c.x_at(s), c.y_at(s), shape.rows,
                                                                              shape.cols, dtype, false, stream));
          }, o.warmup, reps, stream);
        }
        if (dtype == SOFTMAX_DTYPE_F32 && (every_shape || contains(kThrustShapes, shape))) {
          DeviceBuffer ws(softmax_compare::thrust_softmax_workspace_bytes(shape.rows));
          measure_gpu_variant(report, c, "rows", "thrust_reduce_by_key", xy, copy.gbs, soft, [&](int s) {
            return LaunchResult::from_cuda(softmax_compare::thrust_row_softmax(
                static_cast<const float*>(c.x_at(s)), static_cast<float*>(c.y_at(s)), shape.rows, shape.cols,
                false, ws.get(), stream));
          }, o.warmup, std::min(reps, 10), stream);
        }
      }

      if (lib.check == "pass" && !std::isnan(lib.anchor_gbs)) {
        char line[256];
        std::snprintf(line, sizeof line,
                      "cuda %s %s: libsoftmax %.0f GB/s = %.0f%% of copy (%.0f); best anchor %s %.0f -> %.2fx",
                      shape_name(shape).c_str(), dtype_label(dtype), lib.gbs, lib.pct_copy, copy.gbs,
                      lib.anchor_impl.c_str(), lib.anchor_gbs, lib.gbs / lib.anchor_gbs);
        report->summary(line);
      }

      if (dropout) {
        Expectation drop;
        drop.expect = Expect::Dropout;
        drop.dropout = DropoutExpect{kDropoutP, o.seed, kDropoutOffset};
        const Row d = measure_gpu_variant(report, c, "dropout", "libsoftmax_dropout_p0.1", xy, copy.gbs, drop,
                                          [&](int s) {
          return LaunchResult::from_status(softmax_dropout(c.x_at(s), c.y_at(s), nullptr, shape.rows, shape.cols,
                                                           dtype, kDropoutP, o.seed, kDropoutOffset, &opt));
        }, o.warmup, reps, stream);
        Expectation drop_mask = drop;
        drop_mask.mask_written = true;
        if (!o.lib_only) measure_gpu_variant(report, c, "dropout", "libsoftmax_dropout_p0.1_mask", xy + c.bytes_mask, copy.gbs,
                            drop_mask, [&](int s) {
          return LaunchResult::from_status(softmax_dropout(c.x_at(s), c.y_at(s), c.mask_at(s), shape.rows,
                                                           shape.cols, dtype, kDropoutP, o.seed, kDropoutOffset, &opt));
        }, o.warmup, reps, stream);
        if (d.check == "pass" && !std::isnan(d.anchor_gbs)) {
          char line[256];
          std::snprintf(line, sizeof line,
                        "cuda %s %s: libsoftmax_dropout %.0f GB/s = %.0f%% of copy; best anchor %s %.0f -> %.2fx",
                        shape_name(shape).c_str(), dtype_label(dtype), d.gbs, d.pct_copy,
                        d.anchor_impl.c_str(), d.anchor_gbs, d.gbs / d.anchor_gbs);
          report->summary(line);
        }
      }
    }
  }
}

void run_cuda_section(const Options& o, Report* report) {
  int device = 0;
  BENCH_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  BENCH_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  GpuInfo gpu;
  gpu.name = prop.name;
  gpu.sms = prop.multiProcessorCount;
  gpu.l2_bytes = static_cast<size_t>(prop.l2CacheSize);
  std::printf("\nCUDA section: %s, %d SMs, L2 %.0f MiB, %.1f GiB; warm-up %d; CUDA events, median\n",
              prop.name, prop.multiProcessorCount, prop.l2CacheSize / 1048576.0,
              prop.totalGlobalMem / 1073741824.0, o.warmup);
  report->set_meta("gpu", prop.name);
  cudaStream_t stream;
  BENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  if (o.gpu_parts.count("rows")) run_gpu_rows_table(o, report, gpu, stream);
  if (o.gpu_parts.count("ladder")) run_seed_ladder(o, report, gpu, stream);
  if (o.gpu_parts.count("dropout_ladder")) run_dropout_ladder(o, report, gpu, stream);
  BENCH_CUDA_CHECK(cudaStreamDestroy(stream));
}

}  // namespace bench
