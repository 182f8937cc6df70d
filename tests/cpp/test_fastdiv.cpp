// prims::FastDiv (src/prims/fastdiv.h): the multiply-high division the forward kernels use to
// decode their tile coordinates must agree with `/` and `%` for every dividend in [0, 2^31).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "prims/fastdiv.h"

namespace {

using flashkit::prims::FastDiv;

void expect_exact(const FastDiv& f, int32_t n) {
  int32_t q = -1, r = -1;
  f.divmod(n, q, r);
  ASSERT_EQ(q, n / f.d) << "n=" << n << " d=" << f.d;
  ASSERT_EQ(r, n % f.d) << "n=" << n << " d=" << f.d;
  ASSERT_EQ(f.div(n), n / f.d);
}

std::vector<int32_t> divisors() {
  std::vector<int32_t> ds;
  for (int32_t d = 1; d <= 4096; ++d) ds.push_back(d);
  for (int s = 12; s <= 30; ++s) {  // around every power of two
    const int32_t p = int32_t(1) << s;
    for (int32_t e = -3; e <= 3; ++e) ds.push_back(p + e);
  }
  ds.push_back(INT32_MAX);
  ds.push_back(INT32_MAX - 1);
  ds.push_back(46341);       // ~sqrt(2^31)
  ds.push_back(65535 * 32);  // the largest grid-y x heads products the launchers form
  return ds;
}

TEST(FastDiv, EdgesOfEveryDivisor) {
  for (int32_t d : divisors()) {
    const FastDiv f = FastDiv::make(d);
    ASSERT_EQ(f.d, d);
    // n near 0, near multiples of d, and near the top of the range
    for (int32_t n = 0; n < 64; ++n) expect_exact(f, n);
    for (int64_t k : {int64_t(1), int64_t(2), int64_t(3), int64_t(1000), int64_t(INT32_MAX) / d}) {
      const int64_t base = k * d;
      for (int64_t e = -2; e <= 2; ++e) {
        const int64_t n = base + e;
        if (n >= 0 && n <= INT32_MAX) expect_exact(f, int32_t(n));
      }
    }
    for (int32_t e = 0; e < 8; ++e) expect_exact(f, INT32_MAX - e);
  }
}

TEST(FastDiv, RandomPairs) {
  std::mt19937_64 rng(20261127);
  std::uniform_int_distribution<int32_t> any(0, INT32_MAX);
  std::uniform_int_distribution<int32_t> small(1, 1 << 16);
  for (int i = 0; i < 2000000; ++i) {
    const int32_t d = (i & 1) ? small(rng) : std::max<int32_t>(1, any(rng) >> (rng() % 31));
    expect_exact(FastDiv::make(d), any(rng));
  }
}

TEST(FastDiv, ExhaustiveSmallDividends) {
  // every n below 2^20 for a few divisors the kernels meet (heads, GQA ratios, group sizes)
  for (int32_t d : {1, 2, 3, 5, 7, 8, 12, 16, 28, 32, 40, 48, 64, 96, 128, 132, 1000}) {
    const FastDiv f = FastDiv::make(d);
    for (int32_t n = 0; n < (1 << 20); ++n) {
      if (f.div(n) != n / d) FAIL() << "n=" << n << " d=" << d;
    }
  }
}

TEST(FastDiv, NonPositiveDivisorBecomesOne) {
  for (int32_t d : {0, -1, INT32_MIN}) {
    const FastDiv f = FastDiv::make(d);
    EXPECT_EQ(f.d, 1);
    EXPECT_EQ(f.div(12345), 12345);
  }
}

}  // namespace
