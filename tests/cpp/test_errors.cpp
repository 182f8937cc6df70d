// The device error word's public side: bit values, describe_device_errors, argument
// checks of read_device_errors (no GPU needed for these).
#include <gtest/gtest.h>

#include <string>

#include "flashkit/flashkit.h"

namespace {

using flashkit::Status;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(DeviceErrors, BitValuesAreStable) {
  EXPECT_EQ(flashkit::kDeviceErrorCuSeqlens, 1u);
  EXPECT_EQ(flashkit::kDeviceErrorSeqlenAboveMax, 2u);
  EXPECT_EQ(flashkit::kDeviceErrorBlockId, 4u);
  EXPECT_EQ(flashkit::kDeviceErrorSeqlensK, 8u);
  EXPECT_EQ(flashkit::kDeviceErrorAppendSlot, 16u);
  EXPECT_EQ(flashkit::kDeviceErrorDecodePlan, 32u);
  EXPECT_EQ(flashkit::kDeviceErrorDetOrder, 64u);
}

TEST(DeviceErrors, DescribeNothing) { EXPECT_EQ(flashkit::describe_device_errors(0), "no device errors"); }

TEST(DeviceErrors, DescribeEachBit) {
  const std::string cu = flashkit::describe_device_errors(flashkit::kDeviceErrorCuSeqlens);
  EXPECT_TRUE(contains(cu, "cu_seqlens invalid (bit 0x1)")) << cu;
  EXPECT_TRUE(contains(cu, "out of order")) << cu;
  EXPECT_TRUE(contains(cu, "past the end")) << cu;
  EXPECT_TRUE(contains(cu, "lse = -inf")) << cu;
  const std::string max = flashkit::describe_device_errors(flashkit::kDeviceErrorSeqlenAboveMax);
  EXPECT_TRUE(contains(max, "longer than max_seqlen (bit 0x2)")) << max;
  EXPECT_TRUE(contains(max, "max_seqlen_q")) << max;
  EXPECT_TRUE(contains(max, "max_seqlen_k")) << max;
  const std::string block = flashkit::describe_device_errors(flashkit::kDeviceErrorBlockId);
  EXPECT_TRUE(contains(block, "block id out of range (bit 0x4)")) << block;
  EXPECT_TRUE(contains(block, "[0, num_pages)")) << block;
  const std::string lens = flashkit::describe_device_errors(flashkit::kDeviceErrorSeqlensK);
  EXPECT_TRUE(contains(lens, "seqlens_k out of range (bit 0x8)")) << lens;
  EXPECT_TRUE(contains(lens, "max_pages * page_size")) << lens;
  const std::string slot = flashkit::describe_device_errors(flashkit::kDeviceErrorAppendSlot);
  EXPECT_TRUE(contains(slot, "append slot invalid (bit 0x10)")) << slot;
  // One clause per bit, nothing about the others.
  EXPECT_FALSE(contains(cu, "bit 0x2")) << cu;
  EXPECT_FALSE(contains(slot, "cu_seqlens")) << slot;
}

TEST(DeviceErrors, DescribeCombinationInBitOrder) {
  const std::string s = flashkit::describe_device_errors(flashkit::kDeviceErrorSeqlenAboveMax |
                                                         flashkit::kDeviceErrorCuSeqlens);
  const size_t a = s.find("bit 0x1"), b = s.find("bit 0x2");
  ASSERT_NE(a, std::string::npos) << s;
  ASSERT_NE(b, std::string::npos) << s;
  EXPECT_LT(a, b) << s;
  EXPECT_TRUE(contains(s, "; ")) << s;
}

TEST(DeviceErrors, DescribeUnknownBits) {
  EXPECT_EQ(flashkit::describe_device_errors(0x80000000u), "unknown bits 0x80000000");
  const std::string s = flashkit::describe_device_errors(0x1u | 0x80u | 0x100u);
  EXPECT_TRUE(contains(s, "bit 0x1")) << s;
  EXPECT_TRUE(contains(s, "; unknown bits 0x180")) << s;
}

TEST(DeviceErrors, ReadNeedsAnOutput) {
  const Status s = flashkit::read_device_errors(-1, true, nullptr);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(contains(s.message(), "bits")) << s.message();
}

TEST(DeviceErrors, ReadFromANonexistentDeviceFails) {
  uint32_t bits = 123;
  const Status s = flashkit::read_device_errors(1 << 20, true, &bits);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(bits, 0u);
  // With GPUs present: "device: expected a CUDA device in [0, n)"; without: no usable device.
  EXPECT_TRUE(contains(s.message(), "device")) << s.message();
}

}  // namespace
