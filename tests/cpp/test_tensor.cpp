// TensorRef helpers, dtype/device names, version.
#include <gtest/gtest.h>

#include <string>

#include "flashkit/flashkit.h"

namespace {

using flashkit::Device;
using flashkit::DType;
using flashkit::Status;
using flashkit::TensorRef;

TEST(Tensor, DtypeNames) {
  EXPECT_STREQ(flashkit::dtype_name(DType::kFloat16), "float16");
  EXPECT_STREQ(flashkit::dtype_name(DType::kBFloat16), "bfloat16");
  EXPECT_STREQ(flashkit::dtype_name(DType::kFloat32), "float32");
  EXPECT_STREQ(flashkit::dtype_name(DType::kInt32), "int32");
  EXPECT_STREQ(flashkit::dtype_name(DType::kInt64), "int64");
  EXPECT_STREQ(flashkit::dtype_name(DType::kFloat64), "float64");
  EXPECT_STREQ(flashkit::dtype_name(DType::kUInt8), "uint8");
  EXPECT_STREQ(flashkit::dtype_name(DType::kInt8), "int8");
  EXPECT_STREQ(flashkit::dtype_name(DType::kInt16), "int16");
  EXPECT_STREQ(flashkit::dtype_name(DType::kBool), "bool");
  EXPECT_STREQ(flashkit::dtype_name(DType::kFloat8E4M3FN), "float8_e4m3fn");
  EXPECT_STREQ(flashkit::dtype_name(DType::kFloat8E5M2), "float8_e5m2");
  EXPECT_STREQ(flashkit::dtype_name(DType::kUInt16), "uint16");
  EXPECT_STREQ(flashkit::dtype_name(DType::kUInt32), "uint32");
  EXPECT_STREQ(flashkit::dtype_name(DType::kUInt64), "uint64");
  EXPECT_STREQ(flashkit::dtype_name(DType::kInvalid), "invalid");
  EXPECT_STREQ(flashkit::dtype_name(static_cast<DType>(42)), "invalid");
}

// Codes are ABI: a binding or a serialized TensorRef may carry them.
TEST(Tensor, DtypeCodesAreStable) {
  EXPECT_EQ(static_cast<int>(DType::kInvalid), 0);
  EXPECT_EQ(static_cast<int>(DType::kFloat16), 1);
  EXPECT_EQ(static_cast<int>(DType::kBFloat16), 2);
  EXPECT_EQ(static_cast<int>(DType::kFloat32), 3);
  EXPECT_EQ(static_cast<int>(DType::kInt32), 4);
  EXPECT_EQ(static_cast<int>(DType::kInt64), 5);
  EXPECT_EQ(static_cast<int>(DType::kFloat64), 6);
  EXPECT_EQ(static_cast<int>(DType::kUInt8), 7);
  EXPECT_EQ(static_cast<int>(DType::kInt8), 8);
  EXPECT_EQ(static_cast<int>(DType::kInt16), 9);
  EXPECT_EQ(static_cast<int>(DType::kBool), 10);
  EXPECT_EQ(static_cast<int>(DType::kFloat8E4M3FN), 11);
  EXPECT_EQ(static_cast<int>(DType::kFloat8E5M2), 12);
  EXPECT_EQ(static_cast<int>(DType::kUInt16), 13);
  EXPECT_EQ(static_cast<int>(DType::kUInt32), 14);
  EXPECT_EQ(static_cast<int>(DType::kUInt64), 15);
}

TEST(Tensor, DtypeSizes) {
  EXPECT_EQ(flashkit::dtype_size(DType::kFloat16), 2);
  EXPECT_EQ(flashkit::dtype_size(DType::kBFloat16), 2);
  EXPECT_EQ(flashkit::dtype_size(DType::kFloat32), 4);
  EXPECT_EQ(flashkit::dtype_size(DType::kInt32), 4);
  EXPECT_EQ(flashkit::dtype_size(DType::kInt64), 8);
  EXPECT_EQ(flashkit::dtype_size(DType::kFloat64), 8);
  EXPECT_EQ(flashkit::dtype_size(DType::kUInt8), 1);
  EXPECT_EQ(flashkit::dtype_size(DType::kInt8), 1);
  EXPECT_EQ(flashkit::dtype_size(DType::kInt16), 2);
  EXPECT_EQ(flashkit::dtype_size(DType::kBool), 1);
  EXPECT_EQ(flashkit::dtype_size(DType::kFloat8E4M3FN), 1);
  EXPECT_EQ(flashkit::dtype_size(DType::kFloat8E5M2), 1);
  EXPECT_EQ(flashkit::dtype_size(DType::kUInt16), 2);
  EXPECT_EQ(flashkit::dtype_size(DType::kUInt32), 4);
  EXPECT_EQ(flashkit::dtype_size(DType::kUInt64), 8);
  EXPECT_EQ(flashkit::dtype_size(DType::kInvalid), 0);
  EXPECT_EQ(flashkit::dtype_size(static_cast<DType>(-3)), 0);
}

TEST(Tensor, DeviceNames) {
  EXPECT_STREQ(flashkit::device_name(Device::kCPU), "cpu");
  EXPECT_STREQ(flashkit::device_name(Device::kCUDA), "cuda");
  EXPECT_STREQ(flashkit::device_name(Device::kOther), "other");
  EXPECT_STREQ(flashkit::device_name(static_cast<Device>(9)), "other");
}

TEST(Tensor, DefaultIsAbsent) {
  TensorRef t;
  EXPECT_FALSE(t.defined());
  EXPECT_EQ(t.shape_str(), "[]");
  EXPECT_EQ(t.device, Device::kCUDA);
}

TEST(Tensor, CudaBuildsContiguousView) {
  int dummy = 0;
  TensorRef t = TensorRef::cuda(&dummy, DType::kBFloat16, {2, 128, 8, 64}, 3);
  EXPECT_EQ(t.data, &dummy);
  EXPECT_EQ(t.dtype, DType::kBFloat16);
  EXPECT_EQ(t.device, Device::kCUDA);
  EXPECT_EQ(t.device_id, 3);
  ASSERT_EQ(t.ndim, 4);
  EXPECT_EQ(t.shape[0], 2);
  EXPECT_EQ(t.shape[3], 64);
  EXPECT_EQ(t.stride[0], 128 * 8 * 64);
  EXPECT_EQ(t.stride[1], 8 * 64);
  EXPECT_EQ(t.stride[2], 64);
  EXPECT_EQ(t.stride[3], 1);
  EXPECT_EQ(t.numel(), 2 * 128 * 8 * 64);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.shape_str(), "[2, 128, 8, 64]");
}

TEST(Tensor, CudaZeroSizeDimsKeepStridesPositive) {
  TensorRef t = TensorRef::cuda(nullptr, DType::kFloat16, {2, 0, 4});
  EXPECT_EQ(t.stride[2], 1);
  EXPECT_EQ(t.stride[1], 4);
  EXPECT_EQ(t.stride[0], 4);
  EXPECT_EQ(t.numel(), 0);
  EXPECT_TRUE(t.is_contiguous());
}

TEST(Tensor, CudaStrided) {
  TensorRef t = TensorRef::cuda_strided(nullptr, DType::kFloat16, {2, 16, 4, 64},
                                        {16 * 3 * 4 * 64, 3 * 4 * 64, 64, 1}, 1);
  ASSERT_EQ(t.ndim, 4);
  EXPECT_EQ(t.dtype, DType::kFloat16);
  EXPECT_EQ(t.device_id, 1);
  EXPECT_EQ(t.stride[0], 16 * 3 * 4 * 64);
  EXPECT_EQ(t.stride[1], 3 * 4 * 64);
  EXPECT_FALSE(t.is_contiguous());
}

TEST(Tensor, TooManyDimsGiveAnInvalidView) {
  TensorRef t = TensorRef::cuda(nullptr, DType::kFloat16, {1, 2, 3, 4, 5});
  EXPECT_EQ(t.dtype, DType::kInvalid);
  EXPECT_EQ(t.ndim, flashkit::kMaxDims);
  TensorRef u = TensorRef::cuda_strided(nullptr, DType::kFloat16, {2, 3}, {3, 1, 1});
  EXPECT_EQ(u.dtype, DType::kInvalid);
}

TEST(Tensor, IsContiguousFollowsPyTorchRules) {
  // Size-1 dims place no constraint on their stride.
  EXPECT_TRUE(TensorRef::cuda_strided(nullptr, DType::kFloat32, {1, 8, 16}, {1, 16, 1}).is_contiguous());
  EXPECT_TRUE(TensorRef::cuda_strided(nullptr, DType::kFloat32, {8, 1, 16}, {16, 99, 1}).is_contiguous());
  // Empty tensors are contiguous whatever their strides.
  EXPECT_TRUE(TensorRef::cuda_strided(nullptr, DType::kFloat32, {8, 0, 16}, {7, 5, 3}).is_contiguous());
  // Padding and transposes are not.
  EXPECT_FALSE(TensorRef::cuda_strided(nullptr, DType::kFloat32, {8, 16}, {32, 1}).is_contiguous());
  EXPECT_FALSE(TensorRef::cuda_strided(nullptr, DType::kFloat32, {8, 16}, {1, 8}).is_contiguous());
  EXPECT_FALSE(TensorRef::cuda_strided(nullptr, DType::kFloat32, {8}, {2}).is_contiguous());
  EXPECT_TRUE(TensorRef::cuda_strided(nullptr, DType::kFloat32, {8}, {1}).is_contiguous());
}

TEST(Tensor, ShapeStr) {
  EXPECT_EQ(TensorRef::cuda(nullptr, DType::kInt32, {5}).shape_str(), "[5]");
  EXPECT_EQ(TensorRef::cuda(nullptr, DType::kInt32, {2, 3}).shape_str(), "[2, 3]");
  TensorRef bad;
  bad.ndim = 7;  // corrupt descriptor: printing must not read past shape[]
  EXPECT_EQ(bad.shape_str(), "[0, 0, 0, 0, ...]");
}

TEST(Status, Codes) {
  EXPECT_TRUE(Status::Ok().ok());
  EXPECT_EQ(Status::Invalid("x").code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(Status::NotCompiled("x").code(), Status::Code::kNotCompiled);
  EXPECT_EQ(Status::Invalid("q: bad").message(), "q: bad");
}

TEST(Version, MatchesProject) {
  EXPECT_STREQ(flashkit::version(), FLASHKIT_EXPECTED_VERSION);
}

}  // namespace
