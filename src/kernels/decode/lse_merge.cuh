// Running log-sum-exp of partial LSEs, in the order they are added (deterministic): the
// combine kernel (per thread over a fixed residue class of splits, then a xor butterfly) and
// the split kernel's fused merge reduce a sequence's split LSEs with it. -inf inputs (splits
// that saw no key) add nothing; no input at all gives -inf.
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
  // Adds another running sum (m2, l2). Commutative bit for bit (max, products and one sum
  // of two terms), so a shuffle butterfly gives every lane the same result.
  __device__ __forceinline__ void merge(float m2, float l2) {
    const float mm = fmaxf(m, m2);
    if (mm == -INFINITY) return;
    l = (m == -INFINITY ? 0.f : l * __expf(m - mm)) + (m2 == -INFINITY ? 0.f : l2 * __expf(m2 - mm));
    m = mm;
  }
  __device__ __forceinline__ float total() const { return m == -INFINITY ? -INFINITY : m + __logf(l); }
};

}  // namespace flashkit::decode
