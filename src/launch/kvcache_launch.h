// Launchers of the KV-cache manager's kernels (src/kernels/kvcache/): grid shapes only.
// Parameters are validated by the caller (src/api/kvcache_device.cpp).
#pragma once

#include "kernels/kvcache/kvcache_params.h"

typedef struct CUstream_st* cudaStream_t;

namespace flashkit {

// Return the cudaError_t of the launch (as int, 0 = success).
int launch_kvcache_copy_blocks(const kvcache::CopyBlocksParams& params, cudaStream_t stream);
int launch_kvcache_scatter_rows(const kvcache::ScatterRowsParams& params, cudaStream_t stream);

}  // namespace flashkit
