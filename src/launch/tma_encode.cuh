// Host side of the Hopper TMA copies: cuTensorMapEncodeTiled from the driver, looked up once
// through the runtime (no link to libcuda, so the library loads where there is no driver).
// Included by the Hopper launchers only (their .cu files are built with the CUDA toolkit's
// cuda.h for the CUtensorMap types).
#pragma once

#include <cuda.h>  // CUtensorMap and its enums (types only: the driver is reached at run time)
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

namespace flashkit::launch_util {

// nullptr when the driver does not provide it.
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) !=
            cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      f = nullptr;
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

}  // namespace flashkit::launch_util
