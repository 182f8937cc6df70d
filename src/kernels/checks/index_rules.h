// The rules of the device-side index checks, one struct per kind of index array:
//
//   struct Rule {
//     int64_t size() const;                            // positions to check
//     int32_t check(int64_t pos, int64_t* value) const;  // 0, or a problem code (+ the
//   };                                                 // values involved, value[0..3])
//
// Plain host/device code: the kernels of index_rules.cuh run them on the GPU; the C++ tests
// run them on host arrays. Positions are ordered so that the first failing one is the one
// worth reporting (see each rule).
#pragma once

#include <cstdint>

#include "kernels/checks/index_check_types.h"

#if defined(__CUDACC__)
#define FLASHKIT_HD __host__ __device__
#else
#define FLASHKIT_HD
#endif

namespace flashkit::checks {

struct CuSeqlensRule {
  CuSeqlensIndex x;

  FLASHKIT_HD int64_t size() const { return x.size; }

  // Position i = entry i. Order of the checks at one entry: start, order, end of the
  // tensor, length, last entry == rows (so [0, 40, 30] reports "not non-decreasing at 2").
  FLASHKIT_HD int32_t check(int64_t i, int64_t* value) const {
    const int64_t c = x.cu[i];
    if (i == 0) {
      if (c != 0) {
        value[0] = c;
        return kCuSeqlensStartNotZero;
      }
    } else {
      const int64_t prev = x.cu[i - 1];
      value[0] = prev;
      value[1] = c;
      if (c < prev) return kCuSeqlensDecreasing;
      if (c > x.rows) {
        value[0] = c;
        return kCuSeqlensPastEnd;
      }
      if (c - prev > x.max_len) return kCuSeqlensTooLong;
    }
    if (i == x.size - 1 && c != x.rows) {
      value[0] = c;
      return kCuSeqlensEndNotRows;
    }
    return kCuSeqlensOk;
  }
};

struct BlockTableRule {
  BlockTableIndex x;

  FLASHKIT_HD int64_t size() const { return x.batch * (x.max_pages + 1); }

  // Position b * (max_pages + 1) + slot: slot 0 checks lengths[b], slot 1 + j the block id
  // table[b, j] when entry j holds part of sequence b (j < ceil(lengths[b] / page_size));
  // entries of a sequence with a bad length are not checked (its length is reported).
  FLASHKIT_HD int32_t check(int64_t pos, int64_t* value) const {
    const int64_t b = pos / (x.max_pages + 1);
    const int64_t slot = pos % (x.max_pages + 1);
    const int64_t len = x.lengths[b];
    const bool len_ok = len >= 0 && len <= x.max_pages * x.page_size;
    value[0] = b;
    value[1] = slot - 1;
    if (slot == 0) {
      value[2] = len;
      if (len < 0) return kBlockTableLengthNegative;
      if (!len_ok) return kBlockTableLengthTooLong;
      return kBlockTableOk;
    }
    const int64_t j = slot - 1;
    if (!len_ok || j >= (len + x.page_size - 1) / x.page_size) return kBlockTableOk;
    const int64_t id = x.table[b * x.row_stride + j];
    value[2] = id;
    value[3] = len;
    return id < 0 || id >= x.num_pages ? kBlockTableIdOutOfRange : kBlockTableOk;
  }
};

}  // namespace flashkit::checks
