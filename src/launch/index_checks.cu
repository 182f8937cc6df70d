#include "launch/index_checks.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/checks/index_rules.cuh"

namespace flashkit::checks {
namespace {

// Scratch of one check: the smallest failing position, then the described violation.
struct Scratch {
  unsigned long long first;
  IndexViolation violation;
};

template <class Rule>
cudaError_t run(const Rule& rule, cudaStream_t stream, IndexViolation* out) {
  *out = IndexViolation{};
  const int64_t n = rule.size();
  if (n <= 0) return cudaSuccess;
  // Stream-ordered allocation (no device-wide sync); plain cudaMalloc where the device
  // has no memory pools.
  Scratch* s = nullptr;
  bool pooled = true;
  cudaError_t err = cudaMallocAsync(reinterpret_cast<void**>(&s), sizeof(Scratch), stream);
  if (err == cudaErrorNotSupported) {
    cudaGetLastError();
    pooled = false;
    err = cudaMalloc(reinterpret_cast<void**>(&s), sizeof(Scratch));
  }
  if (err != cudaSuccess) return err;
  constexpr int kThreads = 256;
  const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, 1024);
  err = cudaMemsetAsync(&s->first, 0xff, sizeof(s->first), stream);
  if (err == cudaSuccess) {
    find_first_violation<<<unsigned(blocks), kThreads, 0, stream>>>(rule, &s->first);
    describe_first_violation<<<1, 1, 0, stream>>>(rule, &s->first, &s->violation);
    err = cudaGetLastError();
  }
  IndexViolation host;
  if (err == cudaSuccess) {
    err = cudaMemcpyAsync(&host, &s->violation, sizeof(host), cudaMemcpyDeviceToHost, stream);
  }
  const cudaError_t free_err = pooled ? cudaFreeAsync(s, stream) : cudaSuccess;
  const cudaError_t sync_err = cudaStreamSynchronize(stream);
  if (!pooled) cudaFree(s);
  if (err == cudaSuccess) err = free_err != cudaSuccess ? free_err : sync_err;
  if (err == cudaSuccess) *out = host;
  return err;
}

}  // namespace

int find_violation(const CuSeqlensIndex& index, cudaStream_t stream, IndexViolation* out) {
  return run(CuSeqlensRule{index}, stream, out);
}

int find_violation(const BlockTableIndex& index, cudaStream_t stream, IndexViolation* out) {
  return run(BlockTableRule{index}, stream, out);
}

}  // namespace flashkit::checks
