#include "launch/kvcache_launch.h"

#include <cuda_runtime_api.h>

#include <algorithm>

namespace flashkit {

// Grid (pairs, caches, chunks): one CTA per 16 KB chunk of a block, so a 32 KB block
// (16 tokens x 8 heads x 128 dims, bf16) is two CTAs per cache, and every layer's K and V
// are copied by one launch. Chunks are capped at the grid's z limit.
int launch_kvcache_copy_blocks(const kvcache::CopyBlocksParams& p, cudaStream_t stream) {
  const int64_t chunks = std::min<int64_t>(
      65535, std::max<int64_t>(1, (p.block_bytes + kvcache::kCopyChunkBytes - 1) / kvcache::kCopyChunkBytes));
  const dim3 grid(static_cast<unsigned>(p.num_pairs), static_cast<unsigned>(p.num_caches),
                  static_cast<unsigned>(chunks));
  kvcache::CopyBlocksParams params = p;
  void* args[] = {&params};
  return static_cast<int>(
      cudaLaunchKernel(kvcache::copy_blocks_kernel(), grid, dim3(kvcache::kCopyThreads), args, 0, stream));
}

// One warp per changed row.
int launch_kvcache_scatter_rows(const kvcache::ScatterRowsParams& p, cudaStream_t stream) {
  constexpr int kRowsPerCta = kvcache::kScatterThreads / 32;
  const dim3 grid(static_cast<unsigned>((p.num_rows + kRowsPerCta - 1) / kRowsPerCta));
  kvcache::ScatterRowsParams params = p;
  void* args[] = {&params};
  return static_cast<int>(
      cudaLaunchKernel(kvcache::scatter_rows_kernel(), grid, dim3(kvcache::kScatterThreads), args, 0, stream));
}

}  // namespace flashkit
