// validate_attention_fwd: every rejected input names the argument and says what was
// expected and what was got; valid inputs pass (Ok, or NotCompiled when the variant is
// not in this build). No GPU needed: only descriptors are read.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "attention_test_util.h"
#include "flashkit/attention.h"

namespace flashkit_test {
namespace {

using flashkit::Device;

constexpr int64_t k2p31 = int64_t{1} << 31;

struct InvalidCase {
  std::string name;  // test name
  bool varlen;       // start from varlen_args() instead of dense_args()
  std::function<void(AttentionFwdArgs&)> mutate;
  std::string prefix;                 // message must start with this ("q: ")
  std::vector<std::string> contains;  // ... and contain each of these
};

std::ostream& operator<<(std::ostream& os, const InvalidCase& c) { return os << c.name; }

void* offset_ptr(void* p, uintptr_t bytes) {
  return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) + bytes);
}

using M = std::function<void(AttentionFwdArgs&)>;

std::vector<InvalidCase> invalid_cases() {
  const DType f16 = DType::kFloat16, bf16 = DType::kBFloat16, f32 = DType::kFloat32,
              i32 = DType::kInt32;
  std::vector<InvalidCase> c;
  auto add = [&](std::string name, bool varlen, M m, std::string prefix,
                 std::vector<std::string> contains) {
    c.push_back({std::move(name), varlen, std::move(m), std::move(prefix), std::move(contains)});
  };

  // --- missing tensors / bad descriptors ---
  add("MissingQ", false, [](auto& a) { a.q = TensorRef(); }, "q: ", {"missing"});
  add("MissingK", false, [](auto& a) { a.k = TensorRef(); }, "k: ", {"missing"});
  add("MissingV", false, [](auto& a) { a.v = TensorRef(); }, "v: ", {"missing"});
  add("MissingOut", false, [](auto& a) { a.out = TensorRef(); }, "out: ", {"missing"});
  add("MissingQVarlen", true, [](auto& a) { a.q = TensorRef(); }, "q: ", {"missing"});
  add("NdimTooLarge", false, [](auto& a) { a.q.ndim = 5; }, "q: ", {"0..4 dims", "ndim = 5"});
  add("NdimNegative", false, [](auto& a) { a.lse.ndim = -1; }, "lse: ", {"0..4 dims", "ndim = -1"});
  add("TooManyDimsBuilt", false,
      [=](auto& a) { a.q = TensorRef::cuda(fake_ptr(1), bf16, {2, 128, 8, 128, 1}); }, "q: ",
      {"float16 or bfloat16", "invalid"});
  add("StrideListLengthMismatch", false,
      [=](auto& a) { a.q = TensorRef::cuda_strided(fake_ptr(1), bf16, {2, 128, 8, 128}, {1}); },
      "q: ", {"float16 or bfloat16", "invalid"});

  // --- varlen pairing ---
  add("CuSeqlensKMissing", true, [](auto& a) { a.cu_seqlens_k = TensorRef(); }, "cu_seqlens_k: ",
      {"missing", "cu_seqlens_q is set"});
  add("CuSeqlensQMissing", true, [](auto& a) { a.cu_seqlens_q = TensorRef(); }, "cu_seqlens_q: ",
      {"missing", "cu_seqlens_k is set"});

  // --- devices ---
  add("QOnCpu", false, [](auto& a) { a.q.device = Device::kCPU; }, "q: ",
      {"expected a CUDA tensor", "got a cpu tensor"});
  add("KOnCpu", false, [](auto& a) { a.k.device = Device::kCPU; }, "k: ",
      {"expected a CUDA tensor", "cpu"});
  add("VOnOther", false, [](auto& a) { a.v.device = Device::kOther; }, "v: ",
      {"expected a CUDA tensor", "other"});
  add("OutOnCpu", false, [](auto& a) { a.out.device = Device::kCPU; }, "out: ",
      {"expected a CUDA tensor", "cpu"});
  add("LseOnCpu", false, [](auto& a) { a.lse.device = Device::kCPU; }, "lse: ",
      {"expected a CUDA tensor", "cpu"});
  add("CuSeqlensQOnCpu", true, [](auto& a) { a.cu_seqlens_q.device = Device::kCPU; },
      "cu_seqlens_q: ", {"expected a CUDA tensor", "cpu"});
  add("CuSeqlensKOnCpu", true, [](auto& a) { a.cu_seqlens_k.device = Device::kCPU; },
      "cu_seqlens_k: ", {"expected a CUDA tensor", "cpu"});
  add("KOtherDevice", false, [](auto& a) { a.k.device_id = 1; }, "k: ",
      {"expected CUDA device 0", "got device 1"});
  add("VOtherDevice", false, [](auto& a) { a.v.device_id = 1; }, "v: ",
      {"expected CUDA device 0", "got device 1"});
  add("OutOtherDevice", false, [](auto& a) { a.out.device_id = 3; }, "out: ",
      {"expected CUDA device 0", "got device 3"});
  add("LseOtherDevice", false, [](auto& a) { a.lse.device_id = 1; }, "lse: ",
      {"expected CUDA device 0", "got device 1"});
  add("CuSeqlensKOtherDevice", true, [](auto& a) { a.cu_seqlens_k.device_id = 1; },
      "cu_seqlens_k: ", {"expected CUDA device 0", "got device 1"});
  add("QOtherDeviceThanRest", false, [](auto& a) { a.q.device_id = 2; }, "k: ",
      {"expected CUDA device 2", "got device 0"});
  add("NegativeDeviceId", false, [](auto& a) { a.q.device_id = -1; }, "q: ",
      {"device id >= 0", "-1"});

  // --- dtypes ---
  add("QFloat32", false, [=](auto& a) { a.q.dtype = f32; }, "q: ",
      {"expected dtype float16 or bfloat16, got float32"});
  add("QInt32", false, [=](auto& a) { a.q.dtype = i32; }, "q: ",
      {"expected dtype float16 or bfloat16, got int32"});
  add("KDtypeMismatch", false, [=](auto& a) { a.k.dtype = f16; }, "k: ",
      {"expected dtype bfloat16 (same as q), got float16"});
  add("VDtypeMismatch", false, [=](auto& a) { a.v.dtype = f16; }, "v: ",
      {"expected dtype bfloat16 (same as q), got float16"});
  add("OutDtypeMismatch", false, [=](auto& a) { a.out.dtype = f32; }, "out: ",
      {"expected dtype bfloat16 (same as q), got float32"});
  add("LseNotFloat32", false, [=](auto& a) { a.lse.dtype = bf16; }, "lse: ",
      {"expected dtype float32, got bfloat16"});
  add("CuSeqlensQNotInt32", true, [=](auto& a) { a.cu_seqlens_q.dtype = f32; }, "cu_seqlens_q: ",
      {"expected dtype int32, got float32"});
  add("CuSeqlensKNotInt32", true, [](auto& a) { a.cu_seqlens_k.dtype = DType::kInvalid; },
      "cu_seqlens_k: ", {"expected dtype int32, got invalid"});

  // --- ranks ---
  add("QWrongNdim", false, [=](auto& a) { a.q = TensorRef::cuda(fake_ptr(1), bf16, {256, 8, 128}); },
      "q: ", {"expected 4 dims [B, S_q, H_q, D], got [256, 8, 128]"});
  add("KWrongNdim", false, [=](auto& a) { a.k = TensorRef::cuda(fake_ptr(2), bf16, {2, 3}); }, "k: ",
      {"expected 4 dims [B, S_k, H_kv, D], got [2, 3]"});
  add("VWrongNdim", false, [=](auto& a) { a.v = TensorRef::cuda(fake_ptr(3), bf16, {512, 2, 128}); },
      "v: ", {"expected 4 dims [B, S_k, H_kv, D_v]", "[512, 2, 128]"});
  add("OutWrongNdim", false, [=](auto& a) { a.out = TensorRef::cuda(fake_ptr(4), bf16, {256, 1024}); },
      "out: ", {"expected 4 dims [B, S_q, H_q, D_v]", "[256, 1024]"});
  add("LseWrongNdimDense", false,
      [=](auto& a) { a.lse = TensorRef::cuda(fake_ptr(5), f32, {8, 256}); }, "lse: ",
      {"expected 3 dims [B, H_q, S_q]", "[8, 256]"});
  add("QWrongNdimVarlen", true,
      [=](auto& a) { a.q = TensorRef::cuda(fake_ptr(1), bf16, {1, 300, 8, 128}); }, "q: ",
      {"expected 3 dims [total_q, H_q, D]", "[1, 300, 8, 128]"});
  add("KWrongNdimVarlen", true,
      [=](auto& a) { a.k = TensorRef::cuda(fake_ptr(2), bf16, {1, 500, 2, 128}); }, "k: ",
      {"expected 3 dims [total_k, H_kv, D]"});
  add("VWrongNdimVarlen", true, [=](auto& a) { a.v = TensorRef::cuda(fake_ptr(3), bf16, {500, 256}); },
      "v: ", {"expected 3 dims [total_k, H_kv, D_v]"});
  add("OutWrongNdimVarlen", true,
      [=](auto& a) { a.out = TensorRef::cuda(fake_ptr(4), bf16, {1, 300, 8, 128}); }, "out: ",
      {"expected 3 dims [total_q, H_q, D_v]"});
  add("LseWrongNdimVarlen", true,
      [=](auto& a) { a.lse = TensorRef::cuda(fake_ptr(5), f32, {2, 8, 150}); }, "lse: ",
      {"expected 2 dims [H_q, total_q]", "[2, 8, 150]"});
  add("CuSeqlensQWrongNdim", true,
      [=](auto& a) { a.cu_seqlens_q = TensorRef::cuda(fake_ptr(6), i32, {3, 1}); }, "cu_seqlens_q: ",
      {"expected 1 dim [B+1]", "[3, 1]"});
  add("CuSeqlensKWrongNdim", true,
      [=](auto& a) { a.cu_seqlens_k = TensorRef::cuda(fake_ptr(7), i32, {1, 3}); }, "cu_seqlens_k: ",
      {"expected 1 dim [B+1]", "[1, 3]"});

  // --- sizes ---
  add("NegativeSize", false, [](auto& a) { a.k.shape[1] = -4; }, "k: ",
      {"non-negative sizes", "-4"});
  add("SizeNotBelow2Pow31", false, [](auto& a) { a.q.shape[1] = k2p31; a.out.shape[1] = k2p31; },
      "q: ", {"< 2^31", "2147483648"});
  add("LseSizeNotBelow2Pow31", false, [](auto& a) { a.lse.shape[2] = k2p31; }, "lse: ",
      {"< 2^31"});

  // --- shape consistency (dense) ---
  add("KBatchMismatch", false, [](auto& a) { a.k.shape[0] = 3; }, "k: ",
      {"expected batch size B = 2 (from q), got 3"});
  add("VBatchMismatch", false, [](auto& a) { a.v.shape[0] = 1; }, "v: ",
      {"expected batch size B = 2 (from q), got 1"});
  add("VSeqlenMismatch", false, [](auto& a) { a.v.shape[1] = 255; }, "v: ",
      {"expected S_k = 256 (from k), got 255"});
  add("VHeadsMismatch", false, [](auto& a) { a.v.shape[2] = 4; }, "v: ",
      {"expected H_kv = 2 (from k), got 4"});
  add("ZeroQueryHeads", false, [](auto& a) { a.q.shape[2] = 0; a.out.shape[2] = 0; }, "q: ",
      {"H_q >= 1", "got 0"});
  add("ZeroKvHeads", false, [](auto& a) { a.k.shape[2] = 0; a.v.shape[2] = 0; }, "k: ",
      {"H_kv >= 1", "got 0"});
  add("HqNotMultipleOfHkv", false,
      [](auto& a) { a.q.shape[2] = 6; a.out.shape[2] = 6; a.k.shape[2] = 4; a.v.shape[2] = 4; },
      "q, k: ", {"H_q = 6", "H_kv = 4", "multiple"});
  add("HeadDimUnsupported", false,
      [=](auto& a) {
        a.q = TensorRef::cuda(fake_ptr(1), bf16, {2, 128, 8, 80});
        a.k = TensorRef::cuda(fake_ptr(2), bf16, {2, 256, 2, 80});
        a.v = TensorRef::cuda(fake_ptr(3), bf16, {2, 256, 2, 80});
        a.out = TensorRef::cuda(fake_ptr(4), bf16, {2, 128, 8, 80});
      },
      "q: ", {"head_dim D = 80 is not supported", "64, 96, 128, 192, 256"});
  add("KHeadDimMismatch", false,
      [=](auto& a) { a.k = TensorRef::cuda(fake_ptr(2), bf16, {2, 256, 2, 64}); }, "k: ",
      {"expected head_dim D = 128 (from q), got 64"});
  add("DvDiffersFromD", false,
      [=](auto& a) {
        a.v = TensorRef::cuda(fake_ptr(3), bf16, {2, 256, 2, 64});
        a.out = TensorRef::cuda(fake_ptr(4), bf16, {2, 128, 8, 64});
      },
      "v: ", {"D_v = 64", "D = 128", "not supported yet"});
  add("OutShapeSeqlen", false, [](auto& a) { a.out.shape[1] = 64; }, "out: ",
      {"expected shape [2, 128, 8, 128]", "got [2, 64, 8, 128]"});
  add("OutShapeBatch", false, [](auto& a) { a.out.shape[0] = 1; }, "out: ",
      {"expected shape [2, 128, 8, 128]", "got [1, 128, 8, 128]"});
  add("OutShapeHeads", false, [](auto& a) { a.out.shape[2] = 2; }, "out: ",
      {"expected shape [2, 128, 8, 128]", "got [2, 128, 2, 128]"});
  add("OutShapeHeadDim", false, [](auto& a) { a.out.shape[3] = 64; }, "out: ",
      {"expected shape [2, 128, 8, 128]", "got [2, 128, 8, 64]"});
  add("LseShapeDense", false, [=](auto& a) { a.lse = TensorRef::cuda(fake_ptr(5), f32, {2, 128, 8}); },
      "lse: ", {"expected shape [B, H_q, S_q] = [2, 8, 128]", "got [2, 128, 8]"});
  add("BatchOverGridLimit", false,
      [](auto& a) { a.q.shape[0] = a.k.shape[0] = a.v.shape[0] = a.out.shape[0] = 65536; a.lse = TensorRef(); },
      "q: ", {"B = 65536", "65535"});
  add("HeadsOverGridLimit", false,
      [](auto& a) { a.q.shape[2] = a.out.shape[2] = 65536; a.lse = TensorRef(); }, "q: ",
      {"H_q = 65536", "65535"});

  // --- shape consistency (varlen) ---
  add("VarlenVTotalMismatch", true, [](auto& a) { a.v.shape[0] = 499; }, "v: ",
      {"expected total_k = 500 (from k), got 499"});
  add("VarlenVHeadsMismatch", true, [](auto& a) { a.v.shape[1] = 1; }, "v: ",
      {"expected H_kv = 2 (from k), got 1"});
  add("VarlenHqNotMultipleOfHkv", true,
      [](auto& a) { a.k.shape[1] = a.v.shape[1] = 3; }, "q, k: ", {"H_q = 8", "H_kv = 3"});
  add("VarlenOutShape", true, [](auto& a) { a.out.shape[0] = 299; }, "out: ",
      {"expected shape [300, 8, 128]", "got [299, 8, 128]"});
  add("VarlenLseShape", true, [=](auto& a) { a.lse = TensorRef::cuda(fake_ptr(5), f32, {300, 8}); },
      "lse: ", {"expected shape [H_q, total_q] = [8, 300]", "got [300, 8]"});
  add("CuSeqlensQEmpty", true,
      [=](auto& a) {
        a.cu_seqlens_q = TensorRef::cuda(fake_ptr(6), i32, {0});
        a.cu_seqlens_k = TensorRef::cuda(fake_ptr(7), i32, {0});
      },
      "cu_seqlens_q: ", {"B+1 >= 1", "got [0]"});
  add("CuSeqlensLengthMismatch", true,
      [=](auto& a) { a.cu_seqlens_k = TensorRef::cuda(fake_ptr(7), i32, {4}); }, "cu_seqlens_k: ",
      {"expected length 3 (B+1, same as cu_seqlens_q), got 4"});
  add("VarlenBatchOverGridLimit", true,
      [=](auto& a) {
        a.cu_seqlens_q = TensorRef::cuda(fake_ptr(6), i32, {65537});
        a.cu_seqlens_k = TensorRef::cuda(fake_ptr(7), i32, {65537});
      },
      "cu_seqlens_q: ", {"B = len - 1 = 65536", "65535"});
  add("MaxSeqlenQNegative", true, [](auto& a) { a.max_seqlen_q = -1; }, "max_seqlen_q: ",
      {"expected >= 0", "got -1"});
  add("MaxSeqlenKNegative", true, [](auto& a) { a.max_seqlen_k = -5; }, "max_seqlen_k: ",
      {"expected >= 0", "got -5"});
  add("MaxSeqlenQZeroWithTokens", true, [](auto& a) { a.max_seqlen_q = 0; }, "max_seqlen_q: ",
      {"expected > 0", "total_q = 300", "got 0"});
  add("MaxSeqlenKZeroWithTokens", true, [](auto& a) { a.max_seqlen_k = 0; }, "max_seqlen_k: ",
      {"expected > 0", "total_k = 500", "got 0"});
  add("MaxSeqlenTooLarge", true, [](auto& a) { a.max_seqlen_q = k2p31; }, "max_seqlen_q: ",
      {"< 2^31", "2147483648"});

  // --- strides ---
  add("QLastDimStrided", false,
      [=](auto& a) { a.q = TensorRef::cuda_strided(fake_ptr(1), bf16, {2, 128, 8, 128}, {262144, 2048, 256, 2}); },
      "q: ", {"last dimension to be contiguous (stride 1)", "got stride 2"});
  add("KLastDimStrided", false, [](auto& a) { a.k.stride[3] = 8; }, "k: ",
      {"stride 1", "got stride 8"});
  add("VLastDimStrided", false, [](auto& a) { a.v.stride[3] = 16; }, "v: ", {"stride 1", "got stride 16"});
  add("OutLastDimStrided", false, [](auto& a) { a.out.stride[3] = 0; }, "out: ",
      {"stride 1", "got stride 0"});
  add("QRowStrideUnaligned", false, [](auto& a) { a.q.stride[1] = 1028; }, "q: ",
      {"stride of dim 1 is 1028", "multiple of 8", "16-byte"});
  add("KHeadStrideUnaligned", false, [](auto& a) { a.k.stride[2] = 132; }, "k: ",
      {"stride of dim 2 is 132", "multiple of 8"});
  add("VBatchStrideUnaligned", false, [](auto& a) { a.v.stride[0] = 65540; }, "v: ",
      {"stride of dim 0 is 65540", "multiple of 8"});
  add("OutRowStrideUnaligned", false, [](auto& a) { a.out.stride[1] = 1025; }, "out: ",
      {"stride of dim 1 is 1025", "multiple of 8"});
  add("VarlenQRowStrideUnaligned", true, [](auto& a) { a.q.stride[0] = 1030; }, "q: ",
      {"stride of dim 0 is 1030", "multiple of 8"});
  add("NegativeStride", false, [](auto& a) { a.k.stride[1] = -256; }, "k: ",
      {"non-negative strides", "-256"});
  add("OutZeroStrideOverlaps", false, [](auto& a) { a.out.stride[0] = 0; }, "out: ",
      {"stride of dim 0 is 0", "must not overlap"});
  add("StrideSpanOverflow", false, [](auto& a) { a.k.stride[0] = int64_t{1} << 62; }, "k: ",
      {"address more than 2^63"});
  add("LseNotContiguous", false,
      [=](auto& a) { a.lse = TensorRef::cuda_strided(fake_ptr(5), f32, {2, 8, 128}, {1024, 1, 8}); },
      "lse: ", {"expected a contiguous tensor", "[1024, 1, 8]"});
  add("LsePaddedRows", false, [](auto& a) { a.lse.stride[0] = 2048; }, "lse: ",
      {"expected a contiguous tensor"});
  add("VarlenLseNotContiguous", true, [](auto& a) { a.lse.stride[0] = 304; }, "lse: ",
      {"expected a contiguous tensor", "[304, 1]"});
  add("CuSeqlensQNotContiguous", true, [](auto& a) { a.cu_seqlens_q.stride[0] = 2; },
      "cu_seqlens_q: ", {"expected a contiguous tensor", "[2]"});
  add("CuSeqlensKNotContiguous", true, [](auto& a) { a.cu_seqlens_k.stride[0] = 0; },
      "cu_seqlens_k: ", {"expected a contiguous tensor"});

  // --- data pointers ---
  add("QNullData", false, [](auto& a) { a.q.data = nullptr; }, "q: ", {"null", "elements"});
  add("KNullData", false, [](auto& a) { a.k.data = nullptr; }, "k: ", {"null"});
  add("VNullData", false, [](auto& a) { a.v.data = nullptr; }, "v: ", {"null"});
  add("OutNullData", false, [](auto& a) { a.out.data = nullptr; }, "out: ", {"null"});
  add("LseNullData", false, [](auto& a) { a.lse.data = nullptr; }, "lse: ", {"null"});
  add("CuSeqlensQNullData", true, [](auto& a) { a.cu_seqlens_q.data = nullptr; }, "cu_seqlens_q: ",
      {"null"});
  add("CuSeqlensKNullData", true, [](auto& a) { a.cu_seqlens_k.data = nullptr; }, "cu_seqlens_k: ",
      {"null"});
  add("QMisaligned", false, [](auto& a) { a.q.data = offset_ptr(a.q.data, 8); }, "q: ",
      {"not 16-byte aligned"});
  add("KMisaligned", false, [](auto& a) { a.k.data = offset_ptr(a.k.data, 2); }, "k: ",
      {"not 16-byte aligned"});
  add("VMisaligned", false, [](auto& a) { a.v.data = offset_ptr(a.v.data, 4); }, "v: ",
      {"not 16-byte aligned"});
  add("OutMisaligned", false, [](auto& a) { a.out.data = offset_ptr(a.out.data, 14); }, "out: ",
      {"not 16-byte aligned"});
  add("LseMisaligned", false, [](auto& a) { a.lse.data = offset_ptr(a.lse.data, 2); }, "lse: ",
      {"not 4-byte aligned"});
  add("CuSeqlensMisaligned", true, [](auto& a) { a.cu_seqlens_k.data = offset_ptr(a.cu_seqlens_k.data, 1); },
      "cu_seqlens_k: ", {"not 4-byte aligned"});

  // --- scalars ---
  add("SoftmaxScaleInf", false, [](auto& a) { a.softmax_scale = std::numeric_limits<float>::infinity(); },
      "softmax_scale: ", {"finite", "got inf"});
  add("WindowLeftBelowMinusOne", false, [](auto& a) { a.window_left = -2; }, "window_left: ",
      {"-1 (no bound)", "got -2"});
  add("WindowRightBelowMinusOne", true, [](auto& a) { a.window_right = -5; }, "window_right: ",
      {"-1 (no bound)", "got -5"});
  add("SoftcapNegative", false, [](auto& a) { a.softcap = -1.f; }, "softcap: ", {"0 (off)", "got -1"});
  add("SoftcapNaN", false, [](auto& a) { a.softcap = std::numeric_limits<float>::quiet_NaN(); }, "softcap: ",
      {"0 (off)", "got nan"});
  add("SoftcapTooSmall", false, [](auto& a) { a.softcap = 1e-40f; }, "softcap: ", {"too small", "overflows"});
  add("SoftcapInf", true, [](auto& a) { a.softcap = std::numeric_limits<float>::infinity(); }, "softcap: ",
      {"finite", "got inf"});
  return c;
}

class InvalidArgs : public ::testing::TestWithParam<InvalidCase> {};

TEST_P(InvalidArgs, RejectedWithNamedArgument) {
  const InvalidCase& c = GetParam();
  AttentionFwdArgs a = c.varlen ? varlen_args() : dense_args();
  c.mutate(a);
  const Status s = flashkit::validate_attention_fwd(a);
  ASSERT_EQ(s.code(), Status::Code::kInvalidArgument) << s.message();
  EXPECT_EQ(s.message().rfind(c.prefix, 0), 0u)
      << "message should start with '" << c.prefix << "': " << s.message();
  for (const std::string& sub : c.contains) {
    EXPECT_NE(s.message().find(sub), std::string::npos)
        << "message lacks '" << sub << "': " << s.message();
  }
  // attention_fwd reports the same error without touching the GPU.
  const Status launched = flashkit::attention_fwd(a, nullptr);
  EXPECT_EQ(launched.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(launched.message(), s.message());
}

INSTANTIATE_TEST_SUITE_P(Validate, InvalidArgs, ::testing::ValuesIn(invalid_cases()),
                         [](const ::testing::TestParamInfo<InvalidCase>& p) {
                           return p.param.name;
                         });

// ------------------------------------------------------------------------------------
// Valid inputs.

TEST(ValidateValid, DenseBf16) { expect_valid(dense_args()); }
TEST(ValidateValid, DenseFp16) { expect_valid(dense_args(DType::kFloat16)); }
TEST(ValidateValid, Varlen) { expect_valid(varlen_args()); }
TEST(ValidateValid, WithoutLse) {
  AttentionFwdArgs a = dense_args();
  a.lse = TensorRef();
  expect_valid(a);
  AttentionFwdArgs b = varlen_args();
  b.lse = TensorRef();
  expect_valid(b);
}

TEST(ValidateValid, EverySupportedHeadDimAndDtype) {
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    for (int d : {64, 96, 128, 192, 256}) {
      SCOPED_TRACE(std::string(flashkit::dtype_name(dt)) + "/" + std::to_string(d));
      expect_valid(dense_args(dt, d));
      expect_valid(varlen_args(dt, d));
    }
  }
}

TEST(ValidateValid, MhaAndMqa) {
  AttentionFwdArgs mha = dense_args();
  mha.k = TensorRef::cuda(fake_ptr(2), DType::kBFloat16, {2, 256, 8, 128});
  mha.v = TensorRef::cuda(fake_ptr(3), DType::kBFloat16, {2, 256, 8, 128});
  expect_valid(mha);
  AttentionFwdArgs mqa = dense_args();
  mqa.k = TensorRef::cuda(fake_ptr(2), DType::kBFloat16, {2, 256, 1, 128});
  mqa.v = TensorRef::cuda(fake_ptr(3), DType::kBFloat16, {2, 256, 1, 128});
  expect_valid(mqa);
}

// Packed qkv [B, S, 3, H, D] sliced into q, k, v: non-contiguous, aligned strides.
TEST(ValidateValid, StridedViewsOfPackedQkv) {
  const int64_t B = 2, S = 64, H = 4, D = 64;
  const int64_t s_row = 3 * H * D, s_batch = S * s_row;
  char* base = static_cast<char*>(fake_ptr(10));
  AttentionFwdArgs a;
  a.q = TensorRef::cuda_strided(base, DType::kFloat16, {B, S, H, D}, {s_batch, s_row, D, 1});
  a.k = TensorRef::cuda_strided(base + 2 * H * D, DType::kFloat16, {B, S, H, D},
                                {s_batch, s_row, D, 1});
  a.v = TensorRef::cuda_strided(base + 4 * H * D, DType::kFloat16, {B, S, H, D},
                                {s_batch, s_row, D, 1});
  a.out = TensorRef::cuda(fake_ptr(4), DType::kFloat16, {B, S, H, D});
  a.causal = true;
  expect_valid(a);
}

// BHSD tensors transposed to BSHD views are accepted (any strides, last dim contiguous).
TEST(ValidateValid, TransposedBhsdViews) {
  AttentionFwdArgs a = dense_args();
  a.q = TensorRef::cuda_strided(fake_ptr(1), DType::kBFloat16, {2, 128, 8, 128},
                                {8 * 128 * 128, 128, 128 * 128, 1});
  expect_valid(a);
}

// A size-1 dim's stride is never used, so it need not be aligned (DLPack exporters may
// write 1 there).
TEST(ValidateValid, SizeOneDimsIgnoreStride) {
  AttentionFwdArgs a;
  a.q = TensorRef::cuda_strided(fake_ptr(1), DType::kBFloat16, {1, 16, 1, 64}, {1, 64, 1, 1});
  a.k = TensorRef::cuda_strided(fake_ptr(2), DType::kBFloat16, {1, 32, 1, 64}, {3, 64, 7, 1});
  a.v = TensorRef::cuda(fake_ptr(3), DType::kBFloat16, {1, 32, 1, 64});
  a.out = TensorRef::cuda(fake_ptr(4), DType::kBFloat16, {1, 16, 1, 64});
  a.lse = TensorRef::cuda_strided(fake_ptr(5), DType::kFloat32, {1, 1, 16}, {5, 3, 1});
  expect_valid(a);
}

TEST(ValidateValid, BroadcastKvStrideZero) {
  AttentionFwdArgs a = dense_args();
  a.k.stride[0] = 0;  // the same keys for every batch entry (read-only: allowed)
  a.v.stride[0] = 0;
  expect_valid(a);
}

TEST(ValidateValid, SoftmaxScaleDefaultsAndExplicit) {
  for (float s : {0.f, -1.f, 0.125f, 3.f, std::numeric_limits<float>::quiet_NaN(),
                  -std::numeric_limits<float>::infinity()}) {
    SCOPED_TRACE(s);
    AttentionFwdArgs a = dense_args();
    a.softmax_scale = s;
    expect_valid(a);
  }
}

TEST(ValidateValid, WindowAndSoftcap) {
  for (const int64_t left : {int64_t{-1}, int64_t{0}, int64_t{1}, int64_t{4096}, int64_t{1} << 40}) {
    for (const int64_t right : {int64_t{-1}, int64_t{0}, int64_t{7}}) {
      for (const bool causal : {false, true}) {
        AttentionFwdArgs a = dense_args();
        a.window_left = left;
        a.window_right = right;
        a.causal = causal;
        a.softcap = left == 0 ? 0.f : 30.f;
        expect_valid(a);
        AttentionFwdArgs v = varlen_args();
        v.window_left = left;
        v.window_right = right;
        v.causal = causal;
        expect_valid(v);
      }
    }
  }
}

TEST(ValidateValid, SeqlensDifferAndCausal) {
  AttentionFwdArgs a = dense_args();
  a.causal = true;  // S_q (128) < S_k (256): bottom-right aligned, allowed
  expect_valid(a);
  AttentionFwdArgs b = dense_args();
  // S_q > S_k: under causal the first S_q - S_k rows see no key.
  b.q = TensorRef::cuda(fake_ptr(1), DType::kBFloat16, {2, 512, 8, 128});
  b.out = TensorRef::cuda(fake_ptr(4), DType::kBFloat16, {2, 512, 8, 128});
  b.lse = TensorRef::cuda(fake_ptr(5), DType::kFloat32, {2, 8, 512});
  b.causal = true;
  expect_valid(b);
}

TEST(ValidateValid, DeviceIdOtherThanZero) {
  AttentionFwdArgs a = dense_args();
  for (TensorRef* t : {&a.q, &a.k, &a.v, &a.out, &a.lse}) t->device_id = 3;
  expect_valid(a);
}

// ------------------------------------------------------------------------------------
// Every tensor argument names the dtype actually given, whichever it is.

TEST(ValidateDtypeNames, EveryArgumentNamesTheGivenDtype) {
  struct Arg {
    const char* name;
    TensorRef AttentionFwdArgs::*member;
    const char* expected;  // what the message says is expected
  };
  const Arg args[] = {
      {"q", &AttentionFwdArgs::q, "expected dtype float16 or bfloat16, got "},
      {"k", &AttentionFwdArgs::k, "expected dtype bfloat16 (same as q), got "},
      {"v", &AttentionFwdArgs::v, "expected dtype bfloat16 (same as q), got "},
      {"out", &AttentionFwdArgs::out, "expected dtype bfloat16 (same as q), got "},
      {"lse", &AttentionFwdArgs::lse, "expected dtype float32, got "},
      {"cu_seqlens_q", &AttentionFwdArgs::cu_seqlens_q, "expected dtype int32, got "},
      {"cu_seqlens_k", &AttentionFwdArgs::cu_seqlens_k, "expected dtype int32, got "},
  };
  const DType dtypes[] = {DType::kInt64,  DType::kFloat32,      DType::kUInt8,
                          DType::kBool,   DType::kFloat64,      DType::kInt8,
                          DType::kInt16,  DType::kFloat8E4M3FN, DType::kFloat8E5M2,
                          DType::kUInt16, DType::kUInt32,       DType::kUInt64};
  int checked = 0;
  for (const Arg& arg : args) {
    for (DType dt : dtypes) {
      AttentionFwdArgs a = varlen_args();
      TensorRef& t = a.*(arg.member);
      const DType valid = t.dtype;
      if (dt == valid) continue;  // (lse, float32) is what lse must be
      t.dtype = dt;
      const std::string want = std::string(arg.name) + ": " + arg.expected + flashkit::dtype_name(dt);
      SCOPED_TRACE(want);
      const Status s = flashkit::validate_attention_fwd(a);
      EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
      EXPECT_EQ(s.message(), want);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 7 * 12 - 1);
}

// ------------------------------------------------------------------------------------
// Zero-size problems are valid; their data pointers may be null.

TEST(ValidateEmpty, ZeroQueries) {
  AttentionFwdArgs a = dense_args();
  a.q = TensorRef::cuda(nullptr, DType::kBFloat16, {2, 0, 8, 128});
  a.out = TensorRef::cuda(nullptr, DType::kBFloat16, {2, 0, 8, 128});
  a.lse = TensorRef::cuda(nullptr, DType::kFloat32, {2, 8, 0});
  expect_valid(a);
}

TEST(ValidateEmpty, ZeroKeys) {
  AttentionFwdArgs a = dense_args();
  a.k = TensorRef::cuda(nullptr, DType::kBFloat16, {2, 0, 2, 128});
  a.v = TensorRef::cuda(nullptr, DType::kBFloat16, {2, 0, 2, 128});
  expect_valid(a);  // rows see no key: out = 0, lse = -inf
}

TEST(ValidateEmpty, ZeroBatch) {
  AttentionFwdArgs a;
  a.q = TensorRef::cuda(nullptr, DType::kFloat16, {0, 128, 8, 64});
  a.k = TensorRef::cuda(nullptr, DType::kFloat16, {0, 128, 8, 64});
  a.v = TensorRef::cuda(nullptr, DType::kFloat16, {0, 128, 8, 64});
  a.out = TensorRef::cuda(nullptr, DType::kFloat16, {0, 128, 8, 64});
  a.lse = TensorRef::cuda(nullptr, DType::kFloat32, {0, 8, 128});
  expect_valid(a);
}

TEST(ValidateEmpty, VarlenNoTokens) {
  AttentionFwdArgs a = varlen_args();
  a.q = TensorRef::cuda(nullptr, DType::kBFloat16, {0, 8, 128});
  a.out = TensorRef::cuda(nullptr, DType::kBFloat16, {0, 8, 128});
  a.lse = TensorRef::cuda(nullptr, DType::kFloat32, {8, 0});
  a.max_seqlen_q = 0;  // allowed: total_q == 0
  expect_valid(a);
  a.k = TensorRef::cuda(nullptr, DType::kBFloat16, {0, 2, 128});
  a.v = TensorRef::cuda(nullptr, DType::kBFloat16, {0, 2, 128});
  a.max_seqlen_k = 0;
  expect_valid(a);
}

TEST(ValidateEmpty, VarlenZeroBatch) {
  AttentionFwdArgs a = varlen_args();
  a.cu_seqlens_q = TensorRef::cuda(fake_ptr(6), DType::kInt32, {1});
  a.cu_seqlens_k = TensorRef::cuda(fake_ptr(7), DType::kInt32, {1});
  a.q = TensorRef::cuda(nullptr, DType::kBFloat16, {0, 8, 128});
  a.out = TensorRef::cuda(nullptr, DType::kBFloat16, {0, 8, 128});
  a.lse = TensorRef();
  a.max_seqlen_q = 0;
  expect_valid(a);
}

// ------------------------------------------------------------------------------------
// Variants not in the build.

bool find_uncompiled(DType* dt, int* d) {
  for (DType t : {DType::kFloat16, DType::kBFloat16}) {
    for (int hd : {64, 96, 128, 192, 256}) {
      if (!flashkit::is_fwd_variant_compiled(t, hd)) {
        *dt = t;
        *d = hd;
        return true;
      }
    }
  }
  return false;
}

TEST(ValidateNotCompiled, ReportsDtypeAndHeadDim) {
  DType dt;
  int d;
  if (!find_uncompiled(&dt, &d)) GTEST_SKIP() << "every forward variant is compiled in";
  for (const AttentionFwdArgs& a : {dense_args(dt, d), varlen_args(dt, d)}) {
    const Status s = flashkit::validate_attention_fwd(a);
    ASSERT_EQ(s.code(), Status::Code::kNotCompiled) << s.message();
    EXPECT_NE(s.message().find(flashkit::dtype_name(dt)), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("head_dim " + std::to_string(d)), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("not compiled"), std::string::npos) << s.message();
    // attention_fwd returns it too, before any CUDA call.
    EXPECT_EQ(flashkit::attention_fwd(a, nullptr).code(), Status::Code::kNotCompiled);
  }
}

TEST(ValidateNotCompiled, ShapeErrorsComeFirst) {
  DType dt;
  int d;
  if (!find_uncompiled(&dt, &d)) GTEST_SKIP() << "every forward variant is compiled in";
  AttentionFwdArgs a = dense_args(dt, d);
  a.out.shape[1] = 7;
  EXPECT_EQ(flashkit::validate_attention_fwd(a).code(), Status::Code::kInvalidArgument);
}

TEST(ValidateNotCompiled, CompiledListMatchesQuery) {
  const std::vector<std::string> names = flashkit::compiled_fwd_variants();
  int n_compiled = 0;
  for (DType t : {DType::kFloat16, DType::kBFloat16}) {
    for (int hd : {64, 96, 128, 192, 256}) {
      const std::string name = std::string(flashkit::dtype_name(t)) + "/" + std::to_string(hd);
      const bool listed = std::find(names.begin(), names.end(), name) != names.end();
      EXPECT_EQ(listed, flashkit::is_fwd_variant_compiled(t, hd)) << name;
      n_compiled += listed ? 1 : 0;
    }
  }
  EXPECT_EQ(static_cast<size_t>(n_compiled), names.size());
  EXPECT_FALSE(flashkit::is_fwd_variant_compiled(DType::kFloat32, 128));
  EXPECT_FALSE(flashkit::is_fwd_variant_compiled(DType::kBFloat16, 80));
}

// ------------------------------------------------------------------------------------
// attention_fwd without a GPU.

TEST(AttentionFwd, EmptyProblemReturnsWithoutLaunching) {
  AttentionFwdArgs a = dense_args();
  a.q = TensorRef::cuda(nullptr, DType::kBFloat16, {2, 0, 8, 128});
  a.out = TensorRef::cuda(nullptr, DType::kBFloat16, {2, 0, 8, 128});
  a.lse = TensorRef::cuda(nullptr, DType::kFloat32, {2, 8, 0});
  const Status s = flashkit::attention_fwd(a, nullptr);
  if (flashkit::is_fwd_variant_compiled(DType::kBFloat16, 128)) {
    EXPECT_TRUE(s.ok()) << s.message();
  } else {
    EXPECT_EQ(s.code(), Status::Code::kNotCompiled) << s.message();
  }
}

TEST(AttentionFwd, NothingIsWrittenOnInvalidInput) {
  // Host buffers marked as CUDA would crash if anything wrote to them through the GPU;
  // here they are poisoned and must stay untouched after a rejected call.
  alignas(16) static uint16_t out_host[2 * 16 * 2 * 64];
  for (uint16_t& x : out_host) x = 0xFFFF;
  AttentionFwdArgs a;
  a.q = TensorRef::cuda(fake_ptr(1), DType::kFloat16, {2, 16, 2, 64});
  a.k = TensorRef::cuda(fake_ptr(2), DType::kFloat16, {2, 16, 2, 64});
  a.v = TensorRef::cuda(fake_ptr(3), DType::kFloat16, {2, 16, 2, 65});  // bad D_v
  a.out = TensorRef::cuda(out_host, DType::kFloat16, {2, 16, 2, 64});
  const Status s = flashkit::attention_fwd(a, nullptr);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  for (uint16_t x : out_host) ASSERT_EQ(x, 0xFFFF);
}

}  // namespace
}  // namespace flashkit_test
