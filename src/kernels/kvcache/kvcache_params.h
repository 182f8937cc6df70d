// Plain parameters of the KV-cache manager's two kernels (kvcache_kernels.cu). Sizes in
// bytes or int32 elements as named; everything was validated on the host
// (src/api/kvcache_device.cpp), and the kernels still skip entries that are out of range
// instead of following them.
#pragma once

#include <cstdint>

namespace flashkit {
namespace kvcache {

// Copy-on-write block copies: for every (src, dst) pair and every cache, the block_bytes
// bytes of block src are copied over block dst. Grid (num_pairs, num_caches, chunks): a
// CTA copies one chunk of one block of one cache.
struct CopyBlocksParams {
  const uint64_t* cache_ptrs;  // device [num_caches]: base address of each cache
  const int32_t* pairs;        // device [num_pairs, 2]
  int64_t block_bytes;
  int64_t block_stride_bytes;
  int32_t num_caches;
  int32_t num_blocks;
  int32_t num_pairs;
};

// Block-table row updates from the packed buffer of KVCacheUpdates: one warp per row
// header (row, seqlen, col_begin, col_count, offset) at buffer[rows_offset + 5 * i].
struct ScatterRowsParams {
  const int32_t* buffer;  // device copy of KVCacheUpdates::buffer
  int64_t length;         // its int32 count
  int64_t rows_offset;
  int32_t* block_table;  // [max_batch, row_stride]
  int32_t* seqlens;      // [max_batch]
  int64_t row_stride;
  int32_t num_rows;
  int32_t max_batch;
  int32_t max_blocks_per_seq;
};

inline constexpr int kCopyThreads = 256;
inline constexpr int kCopyChunkBytes = 16 * 1024;  // one CTA per 16 KB of a block
inline constexpr int kScatterThreads = 128;       // 4 rows per CTA, one warp each

// Kernel entry points, for cudaLaunchKernel (src/launch/kvcache_launch.cpp).
const void* copy_blocks_kernel();
const void* scatter_rows_kernel();

}  // namespace kvcache
}  // namespace flashkit
