// The device error word: its definition, the per-device lookup of its address, and the
// synchronizing read-and-clear behind flashkit::read_device_errors.
#include "launch/device_errors.h"

#include <cuda_runtime.h>

#include <mutex>

namespace flashkit {
namespace {

// One per device (each device's context loads this module and gets its own copy),
// zero when the module loads. Kernels only ever atomicOr into it.
__device__ uint32_t g_device_errors = 0;

__global__ void clear_device_error_bits(uint32_t* word, uint32_t bits) { atomicAnd(word, ~bits); }

cudaError_t lookup(int device, uint32_t** word) {
  *word = nullptr;
  int prev = 0;
  cudaError_t err = cudaGetDevice(&prev);
  if (err != cudaSuccess) return err;
  if (prev != device && (err = cudaSetDevice(device)) != cudaSuccess) return err;
  void* p = nullptr;
  err = cudaGetSymbolAddress(&p, g_device_errors);
  if (prev != device) cudaSetDevice(prev);
  if (err == cudaSuccess) *word = static_cast<uint32_t*>(p);
  return err;
}

}  // namespace

FLASHKIT_EXPORT uint32_t* device_error_word(int device, int* err) {
  constexpr int kCached = 64;
  static std::once_flag once[kCached];
  static uint32_t* words[kCached];
  static cudaError_t status[kCached];
  uint32_t* word = nullptr;
  cudaError_t e = cudaSuccess;
  if (device >= 0 && device < kCached) {
    std::call_once(once[device], [&] { status[device] = lookup(device, &words[device]); });
    word = words[device];
    e = status[device];
  } else {
    e = device < 0 ? cudaErrorInvalidDevice : lookup(device, &word);
  }
  if (err != nullptr) *err = static_cast<int>(e);
  return e == cudaSuccess ? word : nullptr;
}

int read_device_error_word(int device, bool clear, uint32_t* bits) {
  *bits = 0;
  cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) return err;
  int lookup_err = 0;
  uint32_t* word = device_error_word(device, &lookup_err);
  if (word == nullptr) return lookup_err;
  uint32_t value = 0;
  err = cudaMemcpy(&value, word, sizeof(value), cudaMemcpyDeviceToHost);
  if (err != cudaSuccess) return err;
  if (clear && value != 0) {
    // Clear only what was read: a bit set by a kernel of another thread meanwhile stays.
    clear_device_error_bits<<<1, 1>>>(word, value);
    err = cudaGetLastError();
    if (err == cudaSuccess) err = cudaDeviceSynchronize();
    if (err != cudaSuccess) return err;
  }
  *bits = value;
  return cudaSuccess;
}

}  // namespace flashkit
