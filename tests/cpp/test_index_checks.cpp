// The index checks of check mode without a GPU: the rules (src/kernels/checks/
// index_rules.h, plain host/device code) run on host arrays the way the kernels run them
// (smallest failing position, then its description), and the messages of
// src/api/index_checks.h for what they find.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "api/index_checks.h"
#include "kernels/checks/index_rules.h"

namespace {

using flashkit::checks::BlockTableCheck;
using flashkit::checks::BlockTableRule;
using flashkit::checks::CuSeqlensCheck;
using flashkit::checks::CuSeqlensRule;
using flashkit::checks::IndexViolation;

// What find_first_violation + describe_first_violation compute, on the host.
template <class Rule>
IndexViolation first_violation(const Rule& rule) {
  IndexViolation v;
  for (int64_t i = 0; i < rule.size(); ++i) {
    int64_t value[4];
    if (rule.check(i, value) != 0) {
      v.position = i;
      v.kind = rule.check(i, v.value);
      break;
    }
  }
  return v;
}

// The check-mode message for cu_seqlens `cu` of a tensor with `rows` rows, or "" if valid.
std::string cu_message(const std::vector<int32_t>& cu, int64_t rows, int64_t max_len, bool is_k = false) {
  const CuSeqlensCheck c = is_k ? CuSeqlensCheck{"cu_seqlens_k", "k", "total_k", "max_seqlen_k",
                                                 {cu.data(), int64_t(cu.size()), rows, max_len}}
                                : CuSeqlensCheck{"cu_seqlens_q", "q", "total_q", "max_seqlen_q",
                                                 {cu.data(), int64_t(cu.size()), rows, max_len}};
  const IndexViolation v = first_violation(CuSeqlensRule{c.index});
  return v.position < 0 ? std::string() : flashkit::checks::describe_violation(c, v);
}

TEST(CuSeqlensCheck, ValidArrays) {
  EXPECT_EQ(cu_message({0, 10, 10, 64}, 64, 54), "");
  EXPECT_EQ(cu_message({0}, 0, 0), "");  // B = 0
  EXPECT_EQ(cu_message({0, 0, 0}, 0, 1), "");
  EXPECT_EQ(cu_message({0, 64}, 64, 64), "");  // max_seqlen is an upper bound, may be equal
}

TEST(CuSeqlensCheck, DecreasingNamesTheFirstBadIndex) {
  EXPECT_EQ(cu_message({0, 40, 30, 64}, 64, 64, true),
            "cu_seqlens_k: not non-decreasing at index 2 (cu_seqlens_k[1] = 40 > cu_seqlens_k[2] = 30)");
  EXPECT_EQ(cu_message({0, -5, 20, 64}, 64, 64),
            "cu_seqlens_q: not non-decreasing at index 1 (cu_seqlens_q[0] = 0 > cu_seqlens_q[1] = -5)");
}

TEST(CuSeqlensCheck, PastTheEnd) {
  EXPECT_EQ(cu_message({0, 64, 200}, 64, 1000, true),
            "cu_seqlens_k: past the end of k at index 2 (cu_seqlens_k[2] = 200 > total_k = 64)");
  // The first bad position wins, whatever comes after it.
  EXPECT_EQ(cu_message({0, 70, 60, 200}, 64, 64),
            "cu_seqlens_q: past the end of q at index 1 (cu_seqlens_q[1] = 70 > total_q = 64)");
}

TEST(CuSeqlensCheck, NonZeroStart) {
  EXPECT_EQ(cu_message({8, 20, 64}, 64, 64), "cu_seqlens_q: does not start at 0 (cu_seqlens_q[0] = 8)");
  EXPECT_EQ(cu_message({-3, 20, 64}, 64, 64), "cu_seqlens_q: does not start at 0 (cu_seqlens_q[0] = -3)");
}

TEST(CuSeqlensCheck, LongerThanMaxSeqlen) {
  EXPECT_EQ(cu_message({0, 10, 100}, 100, 64),
            "cu_seqlens_q: sequence 1 is longer than max_seqlen_q at index 2 "
            "(cu_seqlens_q[2] - cu_seqlens_q[1] = 100 - 10 = 90 > max_seqlen_q = 64)");
  EXPECT_EQ(cu_message({0, 65, 100}, 100, 64, true),
            "cu_seqlens_k: sequence 0 is longer than max_seqlen_k at index 1 "
            "(cu_seqlens_k[1] - cu_seqlens_k[0] = 65 - 0 = 65 > max_seqlen_k = 64)");
}

TEST(CuSeqlensCheck, MustEndAtTheRows) {
  EXPECT_EQ(cu_message({0, 10, 50}, 64, 64),
            "cu_seqlens_q: does not end at the rows of q at index 2 (cu_seqlens_q[2] = 50, expected total_q = 64)");
  EXPECT_EQ(cu_message({0}, 5, 5, true),
            "cu_seqlens_k: does not end at the rows of k at index 0 (cu_seqlens_k[0] = 0, expected total_k = 5)");
}

TEST(CuSeqlensCheck, HugeValuesDoNotOverflow) {
  EXPECT_EQ(cu_message({0, INT32_MAX, INT32_MIN}, 64, 64),
            "cu_seqlens_q: past the end of q at index 1 (cu_seqlens_q[1] = 2147483647 > total_q = 64)");
  EXPECT_EQ(cu_message({0, 0, INT32_MIN}, 64, 64),
            "cu_seqlens_q: not non-decreasing at index 2 (cu_seqlens_q[1] = 0 > cu_seqlens_q[2] = -2147483648)");
}

TEST(CuSeqlensCheck, UnknownProblemCode) {
  const CuSeqlensCheck c{"cu_seqlens_q", "q", "total_q", "max_seqlen_q", {nullptr, 3, 10, 10}};
  IndexViolation v;
  v.position = 1;
  v.kind = 99;
  EXPECT_EQ(flashkit::checks::describe_violation(c, v), "cu_seqlens_q: invalid at index 1 (problem code 99)");
}

// Block table [4, 8] (row stride 10: a slice of a wider table), page_size 128, 100 pages.
struct Paged {
  std::vector<int32_t> table = std::vector<int32_t>(4 * 10, -7);  // -7: garbage in unused entries
  std::vector<int32_t> lengths = {5, 0, 700, 1024};
  Paged() {
    table[0 * 10 + 0] = 3;                                  // sequence 0: 1 page
    for (int j = 0; j < 6; ++j) table[2 * 10 + j] = 10 + j;  // sequence 2: 6 pages
    for (int j = 0; j < 8; ++j) table[3 * 10 + j] = 99 - j;  // sequence 3: all 8 pages
  }
  BlockTableCheck check() const {
    return {"block_table", "seqlens_k", {table.data(), 4, 8, 10, lengths.data(), 100, 128}};
  }
  std::string message() const {
    const BlockTableCheck c = check();
    const IndexViolation v = first_violation(BlockTableRule{c.index});
    return v.position < 0 ? std::string() : flashkit::checks::describe_violation(c, v);
  }
};

TEST(BlockTableCheck, ValidTableWithGarbageInUnusedEntries) { EXPECT_EQ(Paged().message(), ""); }

TEST(BlockTableCheck, BlockIdOutOfRange) {
  Paged p;
  p.table[2 * 10 + 5] = 130;
  EXPECT_EQ(p.message(),
            "block_table: block id out of range at [2, 5] (block_table[2, 5] = 130, expected 0 <= id < "
            "num_pages = 100; sequence 2 uses its first 6 entries: seqlens_k[2] = 700, page_size = 128)");
  p.table[2 * 10 + 5] = 15;
  p.table[0] = -1;  // the first sequence's only page
  EXPECT_EQ(p.message(),
            "block_table: block id out of range at [0, 0] (block_table[0, 0] = -1, expected 0 <= id < "
            "num_pages = 100; sequence 0 uses its first 1 entry: seqlens_k[0] = 5, page_size = 128)");
}

TEST(BlockTableCheck, EntryPastTheLengthIsNotChecked) {
  Paged p;
  p.table[2 * 10 + 6] = 1000;  // sequence 2 uses entries 0..5 only
  p.table[3 * 10 + 9] = 1000;  // column 9 is outside the [4, 8] view
  EXPECT_EQ(p.message(), "");
}

TEST(BlockTableCheck, Lengths) {
  Paged p;
  p.lengths[3] = -1;
  EXPECT_EQ(p.message(), "seqlens_k: negative at index 3 (seqlens_k[3] = -1)");
  p.lengths[3] = 1025;
  EXPECT_EQ(p.message(),
            "seqlens_k: more than the block table holds at index 3 (seqlens_k[3] = 1025 > max_pages * "
            "page_size = 8 * 128 = 1024)");
  // A sequence's length is checked before its entries, an earlier sequence before both.
  p.table[3 * 10 + 0] = 100;
  EXPECT_EQ(p.message().rfind("seqlens_k: more than", 0), 0u) << p.message();
  p.table[2 * 10 + 0] = 100;
  EXPECT_EQ(p.message().rfind("block_table: block id out of range at [2, 0]", 0), 0u) << p.message();
}

// Descriptor checks of check_block_table come before any CUDA call (no GPU needed).
TEST(BlockTableCheck, DescriptorsAreValidated) {
  using flashkit::DType;
  using flashkit::TensorRef;
  void* p = reinterpret_cast<void*>(uintptr_t{0x7f0000000000});
  const TensorRef table = TensorRef::cuda(p, DType::kInt32, {4, 8});
  const TensorRef lens = TensorRef::cuda(p, DType::kInt32, {4});
  auto msg = [](const TensorRef& t, const TensorRef& l, int64_t num_pages = 100, int64_t page_size = 16) {
    const flashkit::Status s = flashkit::checks::check_block_table(t, l, num_pages, page_size, nullptr);
    EXPECT_EQ(s.code(), flashkit::Status::Code::kInvalidArgument) << s.message();
    return s.message();
  };
  EXPECT_EQ(msg(TensorRef::cuda(p, DType::kInt64, {4, 8}), lens), "block_table: expected dtype int32, got int64");
  EXPECT_EQ(msg(table, TensorRef::cuda(p, DType::kBool, {4})), "seqlens_k: expected dtype int32, got bool");
  EXPECT_EQ(msg(TensorRef::cuda(p, DType::kInt32, {32}), lens),
            "block_table: expected 2 dims [B, max_pages], got [32]");
  EXPECT_EQ(msg(table, TensorRef::cuda(p, DType::kInt32, {3})),
            "seqlens_k: expected length B = 4 (from block_table), got 3");
  TensorRef cpu = lens;
  cpu.device = flashkit::Device::kCPU;
  EXPECT_EQ(msg(table, cpu), "seqlens_k: expected a CUDA tensor, got a cpu tensor");
  TensorRef other = lens;
  other.device_id = 1;
  EXPECT_EQ(msg(table, other), "seqlens_k: expected CUDA device 0 (the device of block_table), got 1");
  EXPECT_EQ(msg(TensorRef::cuda_strided(p, DType::kInt32, {4, 8}, {1, 4}), lens),
            "block_table: expected a contiguous last dimension (stride 1), got stride 4");
  EXPECT_EQ(msg(table, lens, -1), "num_pages: expected >= 0, got -1");
  EXPECT_EQ(msg(table, lens, 100, 0), "page_size: expected >= 1, got 0");
}

TEST(IndexChecks, CaptureRefusalNamesTheSwitch) {
  const std::string s = flashkit::checks::capture_refusal("check_inputs");
  EXPECT_EQ(s.rfind("check_inputs: ", 0), 0u) << s;
  EXPECT_NE(s.find("CUDA graph"), std::string::npos) << s;
}

}  // namespace
