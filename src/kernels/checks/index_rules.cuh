// Device-side validation of index arrays, generic over a Rule (index_rules.h):
// find_first_violation checks every position (grid-stride) and keeps the smallest failing
// one (atomicMin); describe_first_violation re-checks that one position and writes the
// IndexViolation. Launched by src/launch/index_checks.cu.
#pragma once

#include <cstdint>

#include "kernels/checks/index_check_types.h"
#include "kernels/checks/index_rules.h"

namespace flashkit::checks {

inline constexpr unsigned long long kNoViolation = ~0ull;

template <class Rule>
__global__ void find_first_violation(const Rule rule, unsigned long long* first) {
  const int64_t n = rule.size();
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t value[4];
    if (rule.check(i, value) != 0) {
      atomicMin(first, static_cast<unsigned long long>(i));
      return;  // this thread's later positions are larger
    }
  }
}

template <class Rule>
__global__ void describe_first_violation(const Rule rule, const unsigned long long* first,
                                         IndexViolation* out) {
  IndexViolation r;
  if (*first != kNoViolation) {
    r.position = static_cast<int64_t>(*first);
    r.kind = rule.check(r.position, r.value);
  }
  *out = r;
}

}  // namespace flashkit::checks
