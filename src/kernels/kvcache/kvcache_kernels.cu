// The KV-cache manager's device work (flashkit/kvcache.h, docs/kvcache.md): both kernels
// are memory copies, far from any tensor-core code, compiled for every target arch.
//
// copy_blocks: copy-on-write. Grid (pairs, caches, chunks): CTA (i, c, z) copies chunk z
// of block pairs[i].src over block pairs[i].dst in cache c, so one launch serves every
// layer's K and V. The pairs of one launch never overlap (the manager guarantees no block
// is both a source and a destination), so CTAs need no ordering. Each CTA picks the widest
// access its addresses allow: 16-byte vectors, else 4-byte words, else bytes.
//
// scatter_rows: the incremental block-table upload. One warp per changed row writes the
// row's seqlen and its changed block ids from the packed buffer.
#include <cstdint>

#include "kernels/kvcache/kvcache_params.h"

namespace flashkit {
namespace kvcache {
namespace {

template <typename T>
__device__ __forceinline__ void copy_range(const char* src, char* dst, int64_t begin, int64_t end) {
  const T* s = reinterpret_cast<const T*>(src + begin);
  T* d = reinterpret_cast<T*>(dst + begin);
  const int64_t n = (end - begin) / static_cast<int64_t>(sizeof(T));
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) d[i] = s[i];
}

__global__ void __launch_bounds__(kCopyThreads) copy_blocks(CopyBlocksParams p) {
  const int32_t pair = blockIdx.x;
  const int32_t src = p.pairs[2 * pair];
  const int32_t dst = p.pairs[2 * pair + 1];
  if (src < 0 || src >= p.num_blocks || dst < 0 || dst >= p.num_blocks || src == dst) return;
  char* base = reinterpret_cast<char*>(p.cache_ptrs[blockIdx.y]);
  if (base == nullptr) return;
  const char* s = base + src * p.block_stride_bytes;
  char* d = base + dst * p.block_stride_bytes;
  // This CTA's chunk: [begin, end), chunk boundaries on multiples of 16 bytes.
  const int64_t chunk = ((p.block_bytes + gridDim.z - 1) / gridDim.z + 15) & ~int64_t{15};
  const int64_t begin = blockIdx.z * chunk;
  const int64_t end = begin + chunk < p.block_bytes ? begin + chunk : p.block_bytes;
  if (begin >= end) return;
  const uint64_t align = reinterpret_cast<uint64_t>(s) | reinterpret_cast<uint64_t>(d) |
                         static_cast<uint64_t>(p.block_bytes);
  if ((align & 15) == 0) copy_range<uint4>(s, d, begin, end);
  else if ((align & 3) == 0) copy_range<uint32_t>(s, d, begin, end);
  else copy_range<unsigned char>(s, d, begin, end);
}

__global__ void __launch_bounds__(kScatterThreads) scatter_rows(ScatterRowsParams p) {
  const int32_t i = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int32_t lane = threadIdx.x % 32;
  if (i >= p.num_rows) return;
  const int32_t* h = p.buffer + p.rows_offset + 5 * static_cast<int64_t>(i);
  const int32_t row = h[0], seqlen = h[1], col = h[2], count = h[3], offset = h[4];
  const int64_t data_begin = p.rows_offset + 5 * static_cast<int64_t>(p.num_rows);
  if (row < 0 || row >= p.max_batch || col < 0 || count < 0 || col > p.max_blocks_per_seq - count ||
      offset < data_begin || offset > p.length - count) {
    return;  // a corrupt header: never follow it
  }
  if (lane == 0) p.seqlens[row] = seqlen;
  int32_t* out = p.block_table + row * p.row_stride + col;
  const int32_t* in = p.buffer + offset;
  for (int32_t j = lane; j < count; j += 32) out[j] = in[j];
}

}  // namespace

const void* copy_blocks_kernel() { return reinterpret_cast<const void*>(&copy_blocks); }
const void* scatter_rows_kernel() { return reinterpret_cast<const void*>(&scatter_rows); }

}  // namespace kvcache
}  // namespace flashkit
