// Kernel launch with a thread-block cluster dimension (compute capability 9.0+): CTAs
// blockIdx.x = c * cluster_x .. c * cluster_x + cluster_x - 1 form one cluster, co-scheduled
// on one GPC, whose shared memories are addressable from each other (prims/cluster.cuh).
// grid.x must be a multiple of cluster_x (the launch fails otherwise). Optionally with
// programmatic dependent launch (launch_pdl, pdl_launch.cuh, is this with a cluster of one).
#pragma once

#include <cuda_runtime.h>

namespace flashkit::launch_util {

template <typename... KArgs, typename... Args>
cudaError_t launch_cluster(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                           unsigned cluster_x, bool pdl, Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  if (cluster_x > 1) {  // (a cluster of one is a plain launch: no attribute)
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = cluster_x;
    attr[n].val.clusterDim.y = 1;
    attr[n].val.clusterDim.z = 1;
    ++n;
  }
  if (pdl) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  cfg.attrs = n > 0 ? attr : nullptr;
  cfg.numAttrs = n;
  return cudaLaunchKernelEx(&cfg, kernel, static_cast<Args&&>(args)...);
}

// How many clusters of `cluster_x` CTAs of `kernel` (with `smem` bytes of dynamic shared
// memory and `threads` threads) can be resident at once on the device (0 if none fit, e.g.
// when the smem opt-in was not raised first): the bound a kernel whose clusters wait on each
// other must respect.
template <typename... KArgs>
int max_active_clusters(void (*kernel)(KArgs...), dim3 grid, int threads, size_t smem, unsigned cluster_x) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(unsigned(threads));
  cfg.dynamicSmemBytes = smem;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = cluster_x;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  int n = 0;
  if (cudaOccupancyMaxActiveClusters(&n, kernel, &cfg) != cudaSuccess) return 0;
  return n;
}

}  // namespace flashkit::launch_util
