// What the forward and backward dispatchers share: a variant table per kernel family
// (portable sm80, Hopper sm90; generated from the CMake variant lists), the choice between
// the two for a device (Hopper code runs on compute capability 9.0 only; an environment
// flag forces the portable family), and the launch with its error mapping.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdlib>
#include <string>
#include <vector>

#include "flashkit/tensor.h"
#include "launch/fwd_dispatch.h"  // cached_device_info_status
#include "launch/fwd_launch.h"    // DeviceInfo

namespace flashkit::dispatch {

template <typename Params>
struct Variant {
  DType dtype;
  int head_dim;
  int (*launch)(const Params&, const DeviceInfo&, cudaStream_t);
};

// Table lookup; tables end with a {kInvalid, 0, nullptr} sentinel (keeps them non-empty).
template <typename Params, size_t N>
const Variant<Params>* find(const Variant<Params> (&table)[N], DType dtype, int head_dim) {
  for (const Variant<Params>& v : table) {
    if (v.launch != nullptr && v.dtype == dtype && v.head_dim == head_dim) return &v;
  }
  return nullptr;
}

// "dtype/head_dim" of every entry, each prefixed by `prefix`.
template <typename Params, size_t N>
void list(const Variant<Params> (&table)[N], const char* prefix, std::vector<std::string>* out) {
  for (const Variant<Params>& v : table) {
    if (v.launch != nullptr) {
      out->push_back(std::string(prefix) + dtype_name(v.dtype) + "/" + std::to_string(v.head_dim));
    }
  }
}

// Whether environment variable `name` starts with '1' (callers read it once, into a static).
inline bool env_flag(const char* name) {
  const char* e = std::getenv(name);
  return e != nullptr && e[0] == '1';
}
// Whether it starts with '0' (a default-on switch turned off; read once, as env_flag).
inline bool env_off(const char* name) {
  const char* e = std::getenv(name);
  return e != nullptr && e[0] == '0';
}
// Its value as a non-negative integer, or `fallback` when unset or not a plain decimal number
// (tuning overrides for A/B runs; read once, as env_flag).
inline int env_int(const char* name, int fallback) {
  const char* e = std::getenv(name);
  if (e == nullptr || *e == '\0') return fallback;
  long v = 0;
  for (const char* c = e; *c != '\0'; ++c) {
    if (*c < '0' || *c > '9' || v > 1000000) return fallback;
    v = v * 10 + (*c - '0');
  }
  return int(v);
}

// The Hopper entry when there is one and the device runs sm_90a code, unless forced off.
// `force_portable` is called only here, after the device checks (it reads its environment
// flag on first use, as the dispatchers did before they shared this code).
using Flag = bool (*)();
template <typename Params, size_t N>
const Variant<Params>* hopper_choice(const Variant<Params> (&sm90)[N], DType dtype, int head_dim,
                                     const DeviceInfo& dev, Flag force_portable) {
  if (dev.cc_major != 9 || dev.cc_minor != 0 || force_portable()) return nullptr;
  return find(sm90, dtype, head_dim);
}

// "sm90", "sm80" or "" (not compiled, or no usable sm_80+ device).
template <typename Params, size_t N1, size_t N2>
std::string family(const Variant<Params> (&sm80)[N1], const Variant<Params> (&sm90)[N2], DType dtype, int head_dim,
                   Flag force_portable) {
  if (find(sm80, dtype, head_dim) == nullptr) return "";
  DeviceInfo dev;
  if (cached_device_info_status(&dev) != 0 || dev.cc_major < 8) return "";
  return hopper_choice(sm90, dtype, head_dim, dev, force_portable) != nullptr ? "sm90" : "sm80";
}

// Launches the chosen family's kernel for already-validated params: NotCompiled when the
// variant is not in this build, Unsupported below sm_80 or without code for the device,
// Cuda on a launch error. `op` names the operation in the messages.
template <typename Params, size_t N1, size_t N2>
Status run(const Variant<Params> (&sm80)[N1], const Variant<Params> (&sm90)[N2], const Params& params, DType dtype,
           cudaStream_t stream, Flag force_portable, const char* op) {
  const Variant<Params>* variant = find(sm80, dtype, params.head_dim);
  if (variant == nullptr) {
    return Status::NotCompiled(std::string(op) + " for dtype " + dtype_name(dtype) + " and head_dim " +
                               std::to_string(params.head_dim) +
                               " is not compiled into this build of FlashKit (see "
                               "FLASHKIT_DTYPES / FLASHKIT_HEAD_DIMS)");
  }
  DeviceInfo dev;
  cudaError_t err = static_cast<cudaError_t>(cached_device_info_status(&dev));
  if (err != cudaSuccess) {
    return Status::Unsupported(std::string("no usable CUDA device: ") + cudaGetErrorString(err));
  }
  if (dev.cc_major < 8) {
    return Status::Unsupported(std::string(op) + " needs compute capability 8.0 or newer (device " +
                               std::to_string(dev.device) + " has " + std::to_string(dev.cc_major) + ".x)");
  }
  const Variant<Params>* hopper = hopper_choice(sm90, dtype, params.head_dim, dev, force_portable);
  err = static_cast<cudaError_t>((hopper != nullptr ? hopper : variant)->launch(params, dev, stream));
  if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidDeviceFunction) {
    return Status::Unsupported(std::string("this build of FlashKit has no code for the current GPU "
                                           "(CMAKE_CUDA_ARCHITECTURES): ") + cudaGetErrorString(err));
  }
  if (err != cudaSuccess) return Status::Cuda(std::string(op) + " launch failed: " + cudaGetErrorString(err));
  return Status::Ok();
}

}  // namespace flashkit::dispatch
