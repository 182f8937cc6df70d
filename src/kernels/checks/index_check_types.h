// Plain types of the device-side index checks (host and device code): what is checked,
// and what the check found. See src/kernels/checks/index_rules.h for the rules and
// src/api/index_checks.h for the C++ functions that run them and word the messages.
#pragma once

#include <cstdint>

namespace flashkit::checks {

// A cu_seqlens array: `size` = B + 1 int32 entries that must start at 0, never decrease,
// end at `rows` (the rows of the packed tensor) and give lengths <= `max_len`.
struct CuSeqlensIndex {
  const int32_t* cu;
  int64_t size;
  int64_t rows;
  int64_t max_len;
};

// A paged KV cache's block table [batch, max_pages] (row stride `row_stride` elements)
// and lengths [batch]: every length in [0, max_pages * page_size], and every block id used
// by sequence b (its first ceil(lengths[b] / page_size) entries) in [0, num_pages).
struct BlockTableIndex {
  const int32_t* table;
  int64_t batch;
  int64_t max_pages;
  int64_t row_stride;
  const int32_t* lengths;
  int64_t num_pages;
  int64_t page_size;
};

enum CuSeqlensProblem : int32_t {
  kCuSeqlensOk = 0,
  kCuSeqlensStartNotZero = 1,  // value = {cu[0]}
  kCuSeqlensDecreasing = 2,    // at i: value = {cu[i-1], cu[i]}
  kCuSeqlensPastEnd = 3,       // at i: value = {cu[i]} (> rows)
  kCuSeqlensTooLong = 4,       // at i: value = {cu[i-1], cu[i]} (difference > max_len)
  kCuSeqlensEndNotRows = 5,    // at i = size - 1: value = {cu[i]} (!= rows)
};

enum BlockTableProblem : int32_t {
  kBlockTableOk = 0,
  kBlockTableLengthNegative = 1,  // value = {b, -1, lengths[b]}
  kBlockTableLengthTooLong = 2,   // value = {b, -1, lengths[b]} (> max_pages * page_size)
  kBlockTableIdOutOfRange = 3,    // value = {b, j, table[b, j], lengths[b]}
};

// The first violation in a rule's order of positions (cu_seqlens: entry index; block
// table: b * (max_pages + 1) + slot, slot 0 = lengths[b], slot 1 + j = table[b, j]).
struct IndexViolation {
  int64_t position = -1;  // -1: none
  int32_t kind = 0;       // a *Problem value; 0: none
  int32_t reserved = 0;
  int64_t value[4] = {0, 0, 0, 0};
};

}  // namespace flashkit::checks
