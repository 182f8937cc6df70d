// Kernel launch with programmatic dependent launch (PDL, compute capability 9.0+): the
// kernel may be scheduled while the previous kernel on the stream is still running; it
// calls `griddepcontrol.wait` before reading what that kernel wrote. Also captured into
// CUDA graphs as a programmatic edge.
#pragma once

#include <cuda_runtime.h>

#include "launch/cluster_launch.cuh"

namespace flashkit::launch_util {

template <typename... KArgs, typename... Args>
cudaError_t launch_pdl(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem,
                       cudaStream_t stream, bool pdl, Args&&... args) {
  return launch_cluster(kernel, grid, block, smem, stream, 1, pdl, static_cast<Args&&>(args)...);
}

}  // namespace flashkit::launch_util
