// Host helpers of the API layer that touch the CUDA runtime: cudaError_t -> Status and a
// scoped current-device switch. Shared by decode.cpp and mla.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "flashkit/tensor.h"

namespace flashkit {
namespace vutil {

inline Status cuda_status(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::Ok();
  if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidDeviceFunction) {
    return Status::Unsupported(std::string("this build of FlashKit has no code for the current GPU: ") +
                               cudaGetErrorString(err));
  }
  return Status::Cuda(std::string(what) + " failed: " + cudaGetErrorString(err));
}

// Makes `device` current for the scope (restores the caller's device).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    cudaGetDevice(&prev_);
    if (device >= 0 && device != prev_) {
      ok_ = cudaSetDevice(device) == cudaSuccess;
      switched_ = ok_;
    }
  }
  ~DeviceGuard() {
    if (switched_) cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  bool ok() const { return ok_; }

 private:
  int prev_ = 0;
  bool ok_ = true, switched_ = false;
};

}  // namespace vutil
}  // namespace flashkit
