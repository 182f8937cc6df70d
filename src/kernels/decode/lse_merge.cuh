// Running log-sum-exp of partial LSEs, in the order they are added (deterministic): the
// combine kernel and the split kernel's fused merge both reduce a sequence's split LSEs
// with it. -inf inputs (splits that saw no key) add nothing; no input at all gives -inf.
#pragma once

#include <cmath>

namespace flashkit::decode {

struct LseSum {
  float m = -INFINITY, l = 0.f;
  __device__ __forceinline__ void add(float x) {
    if (x > m) {
      l = l * __expf(m - x) + 1.f;  // exp(-inf) = 0 on the first finite value
      m = x;
    } else if (x != -INFINITY) {
      l += __expf(x - m);
    }
  }
  __device__ __forceinline__ float total() const { return m == -INFINITY ? -INFINITY : m + __logf(l); }
};

}  // namespace flashkit::decode
