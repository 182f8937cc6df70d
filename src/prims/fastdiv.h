// Division by a run-time constant as a multiply-high, an add and a shift (Granlund and
// Montgomery, "Division by invariant integers using multiplication", PLDI 1994, the
// round-up method; CUTLASS's FastDivmod and FlashAttention-3's tile scheduler do the
// same). Built on the host once per call and passed in the kernel parameters; in the
// kernels it replaces the ~25-instruction I2F / MUFU.RCP sequence that nvcc emits for a
// 32-bit division by a register (fwd_sm90.md, "What is left": five of them per tile in
// the persistent forward's tile decode).
//
// Exact for every dividend n in [0, 2^31) and divisor d in [1, 2^31): with
// s = ceil(log2 d) and m = floor(2^32 (2^s - d) / d) + 1 (< 2^32), n / d is
// (umulhi(n, m) + n) >> s, and umulhi(n, m) + n < 2^32 because n < 2^31.
// tests/cpp/test_fastdiv.cpp checks it against `/` and `%` on edges and random values.
#pragma once

#include <cstdint>

#ifndef __CUDACC__
#define FLASHKIT_FASTDIV_HD inline
#else
#define FLASHKIT_FASTDIV_HD __host__ __device__ __forceinline__
#endif

namespace flashkit::prims {

struct FastDiv {
  int32_t d;     // the divisor (>= 1)
  uint32_t mul;  // m above
  uint32_t shift;

  // m for divisor d >= 1 and s = ceil(log2 d).
  FLASHKIT_FASTDIV_HD static uint32_t mul_for(int32_t d, uint32_t s) {
    return uint32_t(((uint64_t(1) << 32) * ((uint64_t(1) << s) - uint64_t(d))) / uint64_t(d) + 1);
  }

  // d < 1 is turned into 1 (a FastDiv is always safe to use; callers never divide by 0).
  static inline FastDiv make(int32_t divisor) {
    FastDiv f;
    f.d = divisor < 1 ? 1 : divisor;
    uint32_t s = 0;
    while ((uint64_t(1) << s) < uint64_t(f.d)) ++s;
    f.shift = s;
    f.mul = mul_for(f.d, s);
    return f;
  }

#ifdef __CUDACC__
  // The same built in a kernel (one 64-bit division; for divisors known only there, e.g. a
  // CTA's own count of row blocks).
  __device__ __forceinline__ static FastDiv make_on_device(int32_t divisor) {
    FastDiv f;
    f.d = divisor < 1 ? 1 : divisor;
    f.shift = f.d <= 1 ? 0u : uint32_t(32 - __clz(f.d - 1));
    f.mul = mul_for(f.d, f.shift);
    return f;
  }
#endif

  // n / d for 0 <= n < 2^31.
  FLASHKIT_FASTDIV_HD int32_t div(int32_t n) const {
    const uint32_t u = uint32_t(n);
#ifdef __CUDA_ARCH__
    const uint32_t hi = __umulhi(u, mul);
#else
    const uint32_t hi = uint32_t((uint64_t(u) * mul) >> 32);
#endif
    return int32_t((hi + u) >> shift);
  }

  // q = n / d and r = n % d (0 <= n < 2^31).
  FLASHKIT_FASTDIV_HD void divmod(int32_t n, int32_t& q, int32_t& r) const {
    q = div(n);
    r = n - q * d;
  }
};

}  // namespace flashkit::prims

#undef FLASHKIT_FASTDIV_HD
