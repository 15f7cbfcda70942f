// SPDX-License-Identifier: Apache-2.0
// Launching a plan: the grid of a register-row kernel (with its cluster attribute), and the
// waves of a split-row kernel with their stream-ordered workspace. Host code, shared by the
// per-operation launch files.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "backends/cuda/cuda_outcome.h"
#include "backends/cuda/device_limits.h"
#include "backends/cuda/forward_kernels.cuh"
#include "backends/cuda/kernel_cache.h"
#include "backends/cuda/launch_plan.h"
#include "backends/cuda/workspace_pool.h"

namespace softmax_internal {

struct LaunchEnv {
  cudaStream_t stream;
  int device;
  const DeviceLimits* limits;
};

namespace launch_detail {

constexpr unsigned kSegmentThreads = 256;
constexpr int64_t kMaxBlockGroups = int64_t{1} << 20;
constexpr int64_t kMaxSegmentBlocks = int64_t{1} << 30;  // grids stay within gridDim.x

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The whole number in environment variable `name` (0 to `most`), else -1 (unset or invalid).
inline int env_count(const char* name, int most) {
  const char* s = std::getenv(name);
  if (s == nullptr || *s == '\0') return -1;
  char* end = nullptr;
  const long n = std::strtol(s, &end, 10);
  return *end == '\0' && n >= 0 && n <= most ? int(n) : -1;
}

// The tile count in environment variable `name` (1 to 1024), else `fallback`: the split knobs
// below, each read once per process.
inline int64_t env_tiles(const char* name, int64_t fallback) {
  const int n = env_count(name, 1024);
  return n >= 1 ? int64_t(n) : fallback;
}

// Tiles per split part at least (SOFTMAX_CUDA_SPLIT_MIN_TILES, for tuning; 4 by default: on the
// H200 one tile per part ran 256 x 1M f32 at 1.43 TB/s, eight at 1.84 TB/s, but left a single
// 2^20 row on 32 blocks).
inline int64_t split_min_tiles() {
  static const int64_t v = env_tiles("SOFTMAX_CUDA_SPLIT_MIN_TILES", 4);
  return v;
}

// Tiles per normalisation piece of a split part (SOFTMAX_CUDA_SPLIT_PIECE_TILES, for tuning and
// tests): n >= 1 cuts every part's normalisation into pieces of n tiles, a block each; 0 (unset
// or invalid) keeps launch_split's rule.
inline int64_t split_piece_tiles_override() {
  static const int64_t v = env_tiles("SOFTMAX_CUDA_SPLIT_PIECE_TILES", 0);
  return v;
}

// SOFTMAX_CUDA_SEGMENT_WAVES (read once, for measuring): n >= 1 caps every segment grid at n
// waves, 0 gives every group of rows its own block; -1 (unset or invalid) keeps the launchers'
// choice.
inline int64_t segment_waves_override() {
  static const int64_t v = env_count("SOFTMAX_CUDA_SEGMENT_WAVES", 1024);
  return v;
}

// SOFTMAX_CUDA_STAGED_ROWS=0 (read once, for measuring and tests): segment kernels never move
// their rows through a shared-memory stage (segment_staging).
inline bool staged_rows_allowed() {
  static const bool v = [] {
    const char* s = std::getenv("SOFTMAX_CUDA_STAGED_ROWS");
    return s == nullptr || s[0] != '0';
  }();
  return v;
}

// The widest segment whose rows move through the warps' stages (segment_staging): f32 rows at
// every width; 16-bit rows in segments of up to two lanes where they are aligned, four where
// they start mid-vector. SOFTMAX_CUDA_STAGED_ALIGNED_WIDTH=w and SOFTMAX_CUDA_STAGED_WIDTH=w
// (mid-vector) (read once, for measuring) set them to w for every type (0: none).
constexpr int staged_width_for(int elem_bytes, bool aligned) { return elem_bytes == 4 ? 32 : aligned ? 2 : 4; }
inline int staged_width(int elem_bytes, bool aligned) {
  static const int aligned_env = env_count("SOFTMAX_CUDA_STAGED_ALIGNED_WIDTH", 32);
  static const int mid_vector_env = env_count("SOFTMAX_CUDA_STAGED_WIDTH", 32);
  const int env = aligned ? aligned_env : mid_vector_env;
  return env >= 0 ? env : staged_width_for(elem_bytes, aligned);
}

// SOFTMAX_CUDA_RESIDENT_SPLIT (read once, for measuring and tests): 0 never runs the resident
// split (split rows always run in waves); n in 1..4 holds n tiles per part (as many as fit in
// the stash, if fewer) and fails a call whose rows it cannot hold rather than running the waves,
// so a test run under it knows the resident kernel ran; -1 (unset or invalid) keeps
// launch_resident_split's choice.
inline int resident_split_override() {
  static const int v = [] {
    const char* s = std::getenv("SOFTMAX_CUDA_RESIDENT_SPLIT");
    if (s == nullptr || s[0] < '0' || s[0] > '4' || s[1] != '\0') return -1;
    return s[0] - '0';
  }();
  return v;
}

// Shared memory a resident split block keeps its part in, at most: three blocks per SM (two for
// dropout) fit on sm_90 beside their reduction scratch.
constexpr int kResidentStashBytes = 64 * 1024;

// SOFTMAX_CUDA_LOOP_ROWS (read once, for measuring): 0 gives every row group its own block or
// cluster even where the rule of launch_register would loop; 1 loops every block and cluster
// plan.
enum class LoopRowsOverride { None, Never, Always };
inline LoopRowsOverride loop_rows_override() {
  static const LoopRowsOverride v = [] {
    const char* s = std::getenv("SOFTMAX_CUDA_LOOP_ROWS");
    if (s == nullptr) return LoopRowsOverride::None;
    return s[0] == '0' ? LoopRowsOverride::Never : s[0] == '1' ? LoopRowsOverride::Always : LoopRowsOverride::None;
  }();
  return v;
}

// Runs launch(workspace) with `bytes` of stream-ordered workspace, freed in stream order after
// it even when it fails, so the pool never leaks.
template <class F>
Outcome with_workspace(const LaunchEnv& env, size_t bytes, F&& launch) {
  void* workspace = nullptr;
  if (Outcome o = workspace_alloc(env.device, bytes, env.stream, &workspace); !o.good()) return o;
  const Outcome result = launch(workspace);
  const cudaError_t free_err = workspace_free(workspace, env.stream);
  if (result.good() && free_err != cudaSuccess) return cuda_failure("cudaFreeAsync", free_err);
  return result;
}

}  // namespace launch_detail

// How a segment plan's warps move their rows (warp_stage.cuh): through a shared-memory stage
// (aligned or mid-vector) or by themselves. Segments of one or two lanes, whose vector accesses
// touch 16 or 32 rows, one or two sectors of each, stage their rows aligned or not: on the H200,
// with one stage a warp, the aligned stage ran rows of 4-32 f32 columns 5-38% faster and 16-bit
// rows of 8-64 columns 7-29%, and aligned four-lane segments (64 f32, 128 16-bit columns) 1-6%
// slower. With the stage read ahead, on an H100: f32 rows at every width, aligned ones 0-1%
// faster staged (300 columns, a part-empty segment of 32 lanes, 6%) and those that start
// mid-vector (realigned by shuffles otherwise) 20-31% at 33-65 columns, 7-18% at 127-129, up to
// 4% at 255-513; 16-bit rows that start mid-vector 16-20% at four lanes (65 columns, 128 one
// element off), but at eight lanes bf16 256 columns one element off 9% slower (130 columns 19%
// faster) and at sixteen 500 columns 3% slower; aligned 16-bit rows past two lanes within 0.3%
// (backends/cuda/TUNING.md).
inline cuda_kernels::Staging segment_staging(const Plan& plan, int elem_bytes, int64_t cols, const void* x,
                                             const void* y) {
  using cuda_kernels::Staging;
  if (!launch_detail::staged_rows_allowed() || plan.strategy != Strategy::Segment) return Staging::None;
  const bool aligned = cols * elem_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(y) % 16 == 0;
  if (plan.width > launch_detail::staged_width(elem_bytes, aligned)) return Staging::None;
  return aligned ? Staging::Aligned : Staging::MidVector;
}

// Dynamic shared memory of a block-mode launch (block and cluster plans) of a kernel that
// realigns misaligned rows through its warps' stages (row_layout.cuh, warp_realign_stage;
// `in_stage`): at most 32 warps a block, 16.5 KB, never what limits the blocks resident on an SM,
// which the registers do.
inline int realign_stage_bytes(int threads, bool in_stage) {
  return in_stage ? threads / 32 * cuda_kernels::kRealignStageBytesPerWarp : 0;
}

// How many waves of resident blocks a segment plan's grid holds at most; its blocks loop over the
// remaining rows. Softmax's forward rows (log-softmax, statistics and mixed types too) take Many:
// in single calls on the H200 at 16-512 columns they ran 2-5% (f32) and 1-8% (16-bit) faster than
// with Few. softmax_dropout and the backward families take Many for f32 rows and Few for the
// others (kDropoutOrBackwardWaves): timed back to back on an H100 at 128-512 columns, 32 waves
// against 8 ran f32 dropout 2-3% and the f32 backward up to 2.6% faster, bf16 dropout 3% slower
// (backends/cuda/TUNING.md, "Segment grids").
enum class SegmentWaves : int64_t { Few = 8, Many = 32 };

// The cap of a softmax_dropout or backward segment grid whose rows (x, or y and dy) are of type T.
template <class T>
constexpr SegmentWaves kDropoutOrBackwardWaves = std::is_same_v<T, float> ? SegmentWaves::Many : SegmentWaves::Few;

// How a block or cluster plan's grid covers the rows: a block (or cluster) per row group, or one
// wave of resident blocks or clusters that loop over the rows.
enum class Looping {
  Never,
  // Where the occupancy calculator puts a block alone on its SM (long rows: over 512 threads at
  // 64 registers): with a block per row, each SM would sit idle from a block's last store to the
  // next block's first load. Smaller blocks share an SM and hide that gap already
  // (backends/cuda/TUNING.md has the measurements, also for softmax_dropout, which never loops).
  WhenAlone,
  // Always (kernels that issue the next row's loads early, which only a looping block can do).
  Always,
};

// Launches kernel(args, shape) for `plan` (segment, block or cluster); `looping` applies to
// block and cluster plans, `waves` to segment plans, `realign_in_stage` (the kernel's blocks
// realign misaligned rows through their warps' stages) to block and cluster plans.
template <class Args>
Outcome launch_register(void (*kernel)(Args, cuda_kernels::RowShape), const Args& args, int64_t rows, int64_t cols,
                        const Plan& plan, const LaunchEnv& env, const char* name,
                        Looping looping = Looping::WhenAlone, SegmentWaves waves = SegmentWaves::Few,
                        bool realign_in_stage = false) {
  using namespace launch_detail;
  int cluster_shift = 0;
  while ((1 << cluster_shift) < plan.cluster) ++cluster_shift;
  cuda_kernels::RowShape shape{rows, static_cast<int>(cols), plan.width, plan.cluster, cluster_shift};
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  cfg.stream = env.stream;
  if (plan.strategy == Strategy::Segment) {
    const int64_t rows_per_block = int64_t(kSegmentThreads / 32) * (32 / plan.width) * plan.r;
    int resident = 0;
    if (Outcome o = resident_blocks(reinterpret_cast<const void*>(kernel), env.device, kSegmentThreads, 0,
                                    env.limits->sm_count, &resident);
        !o.good())
      return o;
    const int64_t forced = segment_waves_override();
    const int64_t cap = forced >= 0 ? forced : static_cast<int64_t>(waves);
    const int64_t groups = ceil_div(rows, rows_per_block);
    cfg.blockDim = dim3(kSegmentThreads);
    const int64_t blocks = std::min(groups, cap == 0 ? kMaxSegmentBlocks : resident * cap);
    cfg.gridDim = dim3(static_cast<unsigned>(blocks));
  } else {
    const void* fn = reinterpret_cast<const void*>(kernel);
    int64_t groups = std::min(ceil_div(rows, plan.r), kMaxBlockGroups);
    if (plan.cluster > 8) {
      if (Outcome o = allow_large_clusters(fn, env.device); !o.good()) return o;
    }
    switch (loop_rows_override()) {
      case LoopRowsOverride::Never: looping = Looping::Never; break;
      case LoopRowsOverride::Always: looping = Looping::Always; break;
      case LoopRowsOverride::None: break;
    }
    if (looping != Looping::Never) {
      int resident = 0;
      if (Outcome o = resident_clusters(fn, env.device, plan.threads, plan.cluster,
                                        realign_stage_bytes(plan.threads, realign_in_stage), env.limits->sm_count,
                                        &resident);
          !o.good())
        return o;
      if (looping == Looping::Always || int64_t(resident) * plan.cluster <= env.limits->sm_count)
        groups = std::min<int64_t>(groups, resident);
    }
    cfg.blockDim = dim3(static_cast<unsigned>(plan.threads));
    cfg.gridDim = dim3(static_cast<unsigned>(groups * plan.cluster));
    cfg.dynamicSmemBytes = size_t(realign_stage_bytes(plan.threads, realign_in_stage));
    if (plan.cluster > 1) {
      attr[0].id = cudaLaunchAttributeClusterDimension;
      attr[0].val.clusterDim.x = static_cast<unsigned>(plan.cluster);
      attr[0].val.clusterDim.y = 1;
      attr[0].val.clusterDim.z = 1;
      cfg.attrs = attr;
      cfg.numAttrs = 1;
    }
  }
  const cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, args, shape);
  if (err != cudaSuccess) return cuda_failure(name, err);
  return cuda_launch_outcome(name);
}

// What one wave of split rows reads at most: half of L2, so that its normalisation reads them
// again from there.
inline int64_t split_wave_bytes(const DeviceLimits& dev) { return static_cast<int64_t>(dev.l2_bytes) / 2; }

// Whether launch_split runs `rows` rows (`bytes_per_col` read per column) in one wave.
inline bool split_rows_in_one_wave(int64_t rows, int64_t cols, int64_t bytes_per_col, const DeviceLimits& dev) {
  return rows <= split_wave_bytes(dev) / (cols * bytes_per_col);
}

// What a launch_split kernel does with its rows: reduces them and writes them (Both), only
// writes them from given statistics (Normalise), or only writes their statistics (Stats).
enum class SplitWork { Both, Normalise, Stats };

// The SplitWork of an operation that takes its statistics as given, or only writes them.
constexpr SplitWork split_work(bool stats_given, bool stats_only) {
  return stats_given ? SplitWork::Normalise : stats_only ? SplitWork::Stats : SplitWork::Both;
}

// Launches a split-row kernel over all rows in waves (see forward_kernels.cuh): parts per row
// from the row length and the device alone (so a row's sums never depend on its batch), waves
// of rows that fit in half of L2 (`bytes_per_col` is what one column reads), partials
// double-buffered by wave parity. Without a stats role (SplitWork::Normalise) every launch only
// normalises.
template <class Part, class Args>
Outcome launch_split(void (*kernel)(Args, cuda_kernels::SplitShape, cuda_kernels::SplitWave), const Args& args,
                     int64_t rows, int64_t cols, int chunk_elems, int tile_chunks, int64_t bytes_per_col,
                     SplitWork work, const LaunchEnv& env, const char* name) {
  using namespace launch_detail;
  const DeviceLimits& dev = *env.limits;
  int resident = 0;
  if (Outcome o = resident_blocks(reinterpret_cast<const void*>(kernel), env.device, cuda_kernels::kSplitThreads, 0,
                                  dev.sm_count, &resident);
      !o.good())
    return o;
  // Parts of split_min_tiles() tiles, more where that many parts would outnumber the resident
  // blocks (a row of 2^28 elements gets every resident block): a block that reads one tile and
  // leaves spends more on starting, reducing and merging than on its 16 KB, while fewer parts
  // leave SMs idle on few rows. These are the resident split's parts wherever that holds the row
  // (its stash takes as many tiles), so a row gets the same bits from either form.
  const int64_t chunks = ceil_div(cols, chunk_elems);
  const int64_t tiles = ceil_div(chunks, tile_chunks);
  const int64_t part_chunks = std::max(split_min_tiles(), ceil_div(tiles, resident)) * tile_chunks;
  const int64_t parts = ceil_div(chunks, part_chunks);
  const bool reduce = work != SplitWork::Normalise;
  // Normalisation pieces (split_piece_tiles): where the call is one wave, its parts'
  // normalisation is spread over as many blocks as are resident beside the stats role's (so that
  // the second launch still starts early, below). A lone row's part otherwise writes its tiles
  // one after another on one SM while most SMs idle, and the normalisation is the longer half of
  // the call (the exps, dropout's keep bits, the stores). Rows past one wave fill the SMs already.
  const int64_t part_tiles = part_chunks / tile_chunks;
  int64_t piece_tiles = part_tiles;
  if (split_piece_tiles_override() > 0) {
    piece_tiles = std::min(part_tiles, split_piece_tiles_override());
  } else if (work != SplitWork::Stats && split_rows_in_one_wave(rows, cols, bytes_per_col, dev)) {
    piece_tiles = split_piece_tiles(part_tiles, rows, parts, reduce ? rows * parts : 0, resident);
  }
  const int64_t pieces = ceil_div(part_tiles, piece_tiles);
  int64_t wave_rows = std::min(rows, std::max<int64_t>(1, split_wave_bytes(dev) / (cols * bytes_per_col)));
  wave_rows = std::min<int64_t>(wave_rows, std::max<int64_t>(1, (int64_t{1} << 30) / (parts * pieces)));
  const int64_t waves = ceil_div(rows, wave_rows);
  const cuda_kernels::SplitShape sp{part_chunks, static_cast<int>(parts), static_cast<int>(pieces),
                                    piece_tiles * tile_chunks};

  if (!reduce) {
    Outcome result = Outcome::ok();
    for (int64_t k = 0; k < waves && result.good(); ++k) {
      cuda_kernels::SplitWave w{};
      w.norm_row0 = k * wave_rows;
      w.norm_rows = static_cast<int>(std::min(wave_rows, rows - w.norm_row0));
      kernel<<<static_cast<unsigned>(w.norm_rows * parts * pieces), cuda_kernels::kSplitThreads, 0, env.stream>>>(
          args, sp, w);
      result = cuda_launch_outcome(name);
    }
    return result;
  }

  const size_t per_wave = static_cast<size_t>(wave_rows * parts);
  return with_workspace(env, 2 * per_wave * sizeof(Part), [&](void* workspace) {
    Part* partials = static_cast<Part*>(workspace);
    Outcome result = Outcome::ok();
    int64_t previous_blocks = 0;
    for (int64_t k = 0; k <= waves && result.good(); ++k) {
      cuda_kernels::SplitWave w{};
      if (k < waves) {
        w.stats_row0 = k * wave_rows;
        w.stats_rows = static_cast<int>(std::min(wave_rows, rows - w.stats_row0));
        w.stats_out = partials + (k & 1) * per_wave;
      }
      if (k >= 1) {
        w.norm_row0 = (k - 1) * wave_rows;
        w.norm_rows = static_cast<int>(std::min(wave_rows, rows - w.norm_row0));
        w.norm_in = partials + ((k - 1) & 1) * per_wave;
      }
      // A launch overlaps the one before it (split_parts.cuh, release_next_wave) where the two
      // launches' blocks are resident together. On the H100, in graph replay: one f32 row of
      // 256K columns 8.4 -> 7.4-7.5 us, four 8.8 -> 7.8, one of 1M 8.7 -> 8.0, dropout and the
      // backward alike; where they were not (16 x 256K, 4 x 1M, 1 x 4M: 256 blocks each, 396
      // resident), the overlap cost 8-12%.
      const int64_t blocks = (int64_t{w.stats_rows} + int64_t{w.norm_rows} * pieces) * parts;
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(static_cast<unsigned>(blocks));
      cfg.blockDim = dim3(cuda_kernels::kSplitThreads);
      cfg.stream = env.stream;
      cudaLaunchAttribute overlap[1];
      overlap[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      overlap[0].val.programmaticStreamSerializationAllowed = 1;
      if (k >= 1 && dev.dependent_launch && previous_blocks + blocks <= resident) {
        cfg.attrs = overlap;
        cfg.numAttrs = 1;
      }
      previous_blocks = blocks;
      const cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, args, sp, w);
      result = err != cudaSuccess ? cuda_failure(name, err) : cuda_launch_outcome(name);
    }
    return result;
  });
}

// Launches the resident split of `kernel` (forward_kernels.cuh, backward_kernels.cuh) for rows
// that the resident blocks' shared memory holds part by part, one cooperative launch for all
// rows, and sets *launched; leaves it false where the row is too long (or the device cannot
// launch cooperatively), for launch_split's waves to run instead. A tile is `tile_chunks` chunks,
// stashed in `held_words` 16-byte words per thread (every array the kernel holds). Parts take as
// many tiles as the stash holds (kResidentStashBytes): on the H200, 256 rows of 1M f32 columns ran
// at 3.2 TB/s with four tiles per part, 2.3 with two, as each round's wait for the group is paid
// over more bytes. Like the waves' parts, they depend only on the row length and the device.
//
// Rows that launch_split runs in one wave (`bytes_per_col` read per column) are left to it where
// its parts are these (as many tiles), so a row's bits do not depend on the form: two plain
// launches, the second reading the rows from L2, take less time than the cooperative launch, whose
// arrival counters need a memset (about 2 us of a CUDA graph's replay on the H100). There, in
// graph replay: one f32 row of 256K columns 9.2 -> 8.0 us, of 1M 9.6 -> 8.8, of 4M 14.5 -> 12.8;
// past one wave the resident split wins (8 x 1M f32 36.4 us, 39.4 in waves).
template <class Part, class Args>
Outcome launch_resident_split(void (*kernel)(Args, cuda_kernels::ResidentSplit<Part>), const Args& args, int64_t rows,
                              int64_t cols, int chunk_elems, int tile_chunks, int held_words, int64_t bytes_per_col,
                              const LaunchEnv& env, const char* name, bool* launched) {
  using namespace launch_detail;
  *launched = false;
  const int forced = resident_split_override();
  auto cannot = [&](const char* why) {
    if (forced <= 0) return Outcome::ok();
    return Outcome::fail(SOFTMAX_STATUS_INTERNAL_ERROR, "SOFTMAX_CUDA_RESIDENT_SPLIT forces the resident split, which "
                                                        "cannot run rows of " + std::to_string(cols) + " columns: " + why);
  };
  if (forced == 0) return Outcome::ok();
  if (!env.limits->cooperative_launch) return cannot("this device has no cooperative launches");
  if (env.limits->max_smem_per_block_optin < kResidentStashBytes)
    return cannot("this device's blocks cannot take the stash's shared memory");
  const void* fn = reinterpret_cast<const void*>(kernel);
  const int64_t tiles = ceil_div(ceil_div(cols, chunk_elems), tile_chunks);
  const int tile_bytes = held_words * 16 * cuda_kernels::kSplitThreads;
  const int max_tiles = kResidentStashBytes / tile_bytes;
  const int tiles_per_part = forced > 0 ? std::min(forced, max_tiles) : max_tiles;
  if (forced < 0 && tiles_per_part == split_min_tiles() && split_rows_in_one_wave(rows, cols, bytes_per_col, *env.limits))
    return Outcome::ok();
  int resident = 0;
  if (Outcome o = resident_blocks_with_smem(fn, env.device, cuda_kernels::kSplitThreads, tiles_per_part * tile_bytes,
                                            kResidentStashBytes, env.limits->sm_count, &resident);
      !o.good())
    return o;
  ResidentShape shape;
  if (const char* why = resident_split_shape(tiles, tiles_per_part, resident, rows, &shape)) return cannot(why);
  const int64_t parts = shape.parts, groups = shape.groups;

  const size_t partial_bytes = size_t(2 * groups * parts) * sizeof(Part);
  const Outcome result = with_workspace(env, partial_bytes + size_t(groups) * sizeof(unsigned), [&](void* workspace) {
    cuda_kernels::ResidentSplit<Part> rs{};
    rs.part_chunks = int64_t(tiles_per_part) * tile_chunks;
    rs.exchange.partials = static_cast<Part*>(workspace);
    rs.exchange.arrivals = reinterpret_cast<unsigned*>(static_cast<char*>(workspace) + partial_bytes);
    rs.exchange.parts = static_cast<int>(parts);
    rs.exchange.groups = static_cast<int>(groups);
    const size_t arrival_bytes = size_t(groups) * sizeof(unsigned);
    if (const cudaError_t zeroed = cudaMemsetAsync(rs.exchange.arrivals, 0, arrival_bytes, env.stream);
        zeroed != cudaSuccess) {
      return cuda_failure("cudaMemsetAsync", zeroed);
    }
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeCooperative;
    attr[0].val.cooperative = 1;
    cfg.gridDim = dim3(static_cast<unsigned>(groups * parts));
    cfg.blockDim = dim3(cuda_kernels::kSplitThreads);
    cfg.dynamicSmemBytes = static_cast<size_t>(tiles_per_part * tile_bytes);
    cfg.stream = env.stream;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    const cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, args, rs);
    return err != cudaSuccess ? cuda_failure(name, err) : cuda_launch_outcome(name);
  });
  *launched = result.good();
  return result;
}

// Runs l.template segment<K, R>(plan) for the instantiated segment shape with K == plan.k
// (R = segment_rows(K, KR); a reduced family has only the smallest and largest power of two,
// kThree families K = 3 too).
template <int KMAX, int KR, bool kFull, bool kThree, class L, int K = 1>
Outcome for_segment_shape(const Plan& plan, const L& l) {
  if constexpr (kThree && K == 1) {
    if (plan.k == 3) return l.template segment<3, segment_rows(3, KR)>(plan);
  }
  if constexpr (K > KMAX) {
    return Outcome::fail(SOFTMAX_STATUS_INTERNAL_ERROR,
                         "no segment kernel holds " + std::to_string(plan.k) + " chunks per thread");
  } else {
    if constexpr (kFull || K == 1 || K == KMAX) {
      if (plan.k == K) return l.template segment<K, segment_rows(K, KR)>(plan);
    }
    return for_segment_shape<KMAX, KR, kFull, kThree, L, K * 2>(plan, l);
  }
}

// Plans and launches one kernel family: l provides segment<K, R>(plan), block<K>(plan) (block
// and cluster plans, K = max_chunks, wide_chunks, warp_chunks or trim_chunks; wide_chunks only
// with kWideFirst) and split(). kWideFirst, kSegmentChunks, kMaxCluster, kSmall and
// kWideTieBlocks: see kernel_family; kPacked16 (softmax rows): wide_chunks and warp_chunks;
// kTrim: the family has a block kernel of trim_chunks; kSegmentThree: segments of three chunks.
template <int kChunkElems, int kArrays, bool kFull, bool kWideFirst, bool kPacked16, int kSegmentChunks,
          int kMaxCluster, SmallBlockClusters kSmall, int kWideTieBlocks, bool kTrim, bool kSegmentThree, class L>
Outcome launch_plan_of(int64_t cols, const L& l, const LaunchEnv& env) {
  constexpr int KMAX = max_chunks(kChunkElems, kArrays);
  constexpr int KWIDE = wide_chunks(kChunkElems, kArrays, kPacked16);
  constexpr int KWARP = warp_chunks(kChunkElems, kArrays, kPacked16);
  constexpr int KTRIM = trim_chunks(kChunkElems, kArrays, kTrim);
  Plan plan;
  if (Outcome o = make_plan(cols, kChunkElems,
                            kernel_family(kChunkElems, kArrays, kFull, kWideFirst, KWIDE, kSegmentChunks, kMaxCluster,
                                          kSmall, kWideTieBlocks, KTRIM, kSegmentThree),
                            *env.limits, &plan);
      !o.good())
    return o;
  switch (plan.strategy) {
    case Strategy::Segment: return for_segment_shape<KMAX, kSegmentChunks, kFull, kSegmentThree>(plan, l);
    case Strategy::Block:
    case Strategy::Cluster:
      if (plan.k == KWIDE) return l.template block<KWIDE>(plan);
      if constexpr (KWARP > 0) {
        if (plan.k == KWARP) return l.template block<KWARP>(plan);
      }
      if constexpr (KTRIM > 0) {
        if (plan.k == KTRIM) return l.template block<KTRIM>(plan);
      }
      if constexpr (!kWideFirst && KWIDE != KMAX) {
        if (plan.k == KMAX) return l.template block<KMAX>(plan);
      }
      return Outcome::fail(SOFTMAX_STATUS_INTERNAL_ERROR,
                           "no block kernel holds " + std::to_string(plan.k) + " chunks per thread");
    case Strategy::Split: break;
  }
  return l.split();
}

}  // namespace softmax_internal
