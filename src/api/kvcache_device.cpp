// kvcache_apply_updates: validation of the device-side arguments, then the two launches.
// No device memory is read on the host; entries inside the buffer are range-checked by
// the kernels themselves.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "flashkit/kvcache.h"
#include "launch/kvcache_launch.h"

namespace flashkit {
namespace {

Status invalid(const std::string& what) { return Status::Invalid("kvcache_apply_updates: " + what); }

Status check_caches(const KVCacheDeviceCaches& c) {
  if (c.cache_ptrs == nullptr) return invalid("caches.cache_ptrs is null but there are copies");
  if (c.num_caches < 1 || c.num_caches > 65535) {
    return invalid("caches.num_caches must be 1..65535, got " + std::to_string(c.num_caches));
  }
  if (c.num_blocks < 1) return invalid("caches.num_blocks must be > 0, got " + std::to_string(c.num_blocks));
  if (c.block_bytes < 1) return invalid("caches.block_bytes must be > 0, got " + std::to_string(c.block_bytes));
  if (c.block_stride_bytes < c.block_bytes) {
    return invalid("caches.block_stride_bytes (" + std::to_string(c.block_stride_bytes) +
                   ") must be >= block_bytes (" + std::to_string(c.block_bytes) + ")");
  }
  if (c.block_stride_bytes > INT64_MAX / c.num_blocks) return invalid("caches: num_blocks * block_stride_bytes overflows");
  return Status::Ok();
}

Status check_tables(const KVCacheDeviceTables& t) {
  if (t.block_table == nullptr) return invalid("tables.block_table is null but there are rows");
  if (t.seqlens == nullptr) return invalid("tables.seqlens is null but there are rows");
  if (t.max_batch < 1) return invalid("tables.max_batch must be > 0, got " + std::to_string(t.max_batch));
  if (t.max_blocks_per_seq < 1) {
    return invalid("tables.max_blocks_per_seq must be > 0, got " + std::to_string(t.max_blocks_per_seq));
  }
  if (t.row_stride < t.max_blocks_per_seq) {
    return invalid("tables.row_stride (" + std::to_string(t.row_stride) + ") must be >= max_blocks_per_seq (" +
                   std::to_string(t.max_blocks_per_seq) + ")");
  }
  return Status::Ok();
}

Status launched(int err, const char* what) {
  if (err == 0) return Status::Ok();
  const cudaError_t e = static_cast<cudaError_t>(err);
  return Status::Cuda(std::string("kvcache_apply_updates: ") + what + " launch failed: " +
                      cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

}  // namespace

FLASHKIT_KVCACHE_API Status kvcache_apply_updates(const int32_t* updates_device, int64_t length,
                                                  int32_t num_copies, int32_t num_rows,
                                                  const KVCacheDeviceCaches& caches,
                                                  const KVCacheDeviceTables& tables,
                                                  cudaStream_t stream) {
  if (num_copies < 0 || num_rows < 0) {
    return invalid("num_copies and num_rows must be >= 0, got " + std::to_string(num_copies) +
                   " and " + std::to_string(num_rows));
  }
  if (num_copies == 0 && num_rows == 0) return Status::Ok();
  if (updates_device == nullptr) return invalid("updates_device is null");
  const int64_t header = 2 * static_cast<int64_t>(num_copies) + 5 * static_cast<int64_t>(num_rows);
  if (length < header || length > INT32_MAX) {
    return invalid("length " + std::to_string(length) + " does not hold " + std::to_string(num_copies) +
                   " copies and " + std::to_string(num_rows) + " row headers (" + std::to_string(header) +
                   " int32) or exceeds 2^31 - 1");
  }
  if (num_copies > 0) {
    Status st = check_caches(caches);
    if (!st.ok()) return st;
  }
  if (num_rows > 0) {
    Status st = check_tables(tables);
    if (!st.ok()) return st;
  }
  if (num_copies > 0) {
    kvcache::CopyBlocksParams p{caches.cache_ptrs, updates_device, caches.block_bytes,
                                caches.block_stride_bytes, caches.num_caches, caches.num_blocks,
                                num_copies};
    Status st = launched(launch_kvcache_copy_blocks(p, stream), "copy_blocks");
    if (!st.ok()) return st;
  }
  if (num_rows > 0) {
    kvcache::ScatterRowsParams p{updates_device, length, 2 * static_cast<int64_t>(num_copies),
                                 tables.block_table, tables.seqlens, tables.row_stride, num_rows,
                                 tables.max_batch, tables.max_blocks_per_seq};
    return launched(launch_kvcache_scatter_rows(p, stream), "scatter_rows");
  }
  return Status::Ok();
}

}  // namespace flashkit
