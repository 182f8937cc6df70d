// The device a dense-attention call launches on: q's device made current for the call's
// scope (vutil::DeviceGuard restores the caller's), and that device's error word for the
// kernels' params. Shared by attention_fwd and attention_bwd.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "api/cuda_util.h"
#include "flashkit/tensor.h"
#include "launch/device_errors.h"

namespace flashkit {
namespace detail {

class LaunchDevice {
 public:
  explicit LaunchDevice(int device) : guard_(device) {
    int current = 0;
    const cudaError_t err = cudaGetDevice(&current);
    if (err != cudaSuccess) {
      status_ = Status::Unsupported(std::string("no usable CUDA device: ") + cudaGetErrorString(err));
    } else if (!guard_.ok()) {
      status_ = Status::Unsupported("cannot make CUDA device " + std::to_string(device) +
                                    " (the device of q) current");
    } else {
      int word_err = 0;
      word_ = device_error_word(device, &word_err);
      if (word_ == nullptr) {
        status_ = Status::Unsupported("cannot use CUDA device " + std::to_string(device) +
                                      " (its FlashKit error word is not available): " +
                                      cudaGetErrorString(static_cast<cudaError_t>(word_err)));
      }
    }
  }
  const Status& status() const { return status_; }
  uint32_t* error_word() const { return word_; }

 private:
  vutil::DeviceGuard guard_;
  Status status_ = Status::Ok();
  uint32_t* word_ = nullptr;
};

}  // namespace detail
}  // namespace flashkit
