#include "launch/device_errors.h"

#include "api/attention_internal.h"  // FLASHKIT_EXPORT

#include <cuda_runtime.h>

#include <mutex>

namespace flashkit {
namespace {
__device__ uint32_t g_device_errors;
}  // namespace

uint32_t* device_error_word(int device) {
  constexpr int kCached = 64;
  static std::once_flag once[kCached];
  static uint32_t* table[kCached];
  if (device < 0 && cudaGetDevice(&device) != cudaSuccess) return nullptr;
  auto lookup = [] {
    void* p = nullptr;
    return cudaGetSymbolAddress(&p, g_device_errors) == cudaSuccess ? static_cast<uint32_t*>(p) : nullptr;
  };
  if (device >= kCached) return lookup();
  std::call_once(once[device], [&] { table[device] = lookup(); });
  return table[device];
}

FLASHKIT_EXPORT int device_errors_read(int device, bool clear, uint32_t* bits) {
  int prev = 0;
  cudaError_t err = cudaGetDevice(&prev);
  if (err != cudaSuccess) return int(err);
  if (device < 0) device = prev;
  if (device != prev && (err = cudaSetDevice(device)) != cudaSuccess) return int(err);
  uint32_t* word = device_error_word(device);
  if (word == nullptr) {
    err = cudaErrorInvalidSymbol;
  } else {
    err = cudaMemcpy(bits, word, sizeof(uint32_t), cudaMemcpyDeviceToHost);
    if (err == cudaSuccess && clear) err = cudaMemset(word, 0, sizeof(uint32_t));
    if (err == cudaSuccess) err = cudaDeviceSynchronize();
  }
  if (device != prev) cudaSetDevice(prev);
  return int(err);
}

}  // namespace flashkit
