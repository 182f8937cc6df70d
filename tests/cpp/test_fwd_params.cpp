// TensorRef -> FwdParams conversion (src/api/attention_internal.h).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "api/attention_internal.h"
#include "attention_test_util.h"

namespace flashkit_test {
namespace {

using flashkit::FwdParams;
using flashkit::detail::fwd_is_empty;
using flashkit::detail::make_fwd_params;

constexpr double kLog2e = 1.4426950408889634074;

void expect_validates(const AttentionFwdArgs& a) {
  const Status s = flashkit::validate_attention_fwd(a);
  ASSERT_NE(s.code(), Status::Code::kInvalidArgument) << s.message();
}

TEST(FwdParams, DenseContiguous) {
  AttentionFwdArgs a = dense_args();  // q [2,128,8,128], k/v [2,256,2,128], lse [2,8,128]
  a.causal = true;
  expect_validates(a);
  const FwdParams p = make_fwd_params(a);
  EXPECT_EQ(p.q, a.q.data);
  EXPECT_EQ(p.k, a.k.data);
  EXPECT_EQ(p.v, a.v.data);
  EXPECT_EQ(p.o, a.out.data);
  EXPECT_EQ(p.lse, a.lse.data);
  EXPECT_EQ(p.q_batch_stride, 128 * 8 * 128);
  EXPECT_EQ(p.q_row_stride, 8 * 128);
  EXPECT_EQ(p.q_head_stride, 128);
  EXPECT_EQ(p.k_batch_stride, 256 * 2 * 128);
  EXPECT_EQ(p.k_row_stride, 2 * 128);
  EXPECT_EQ(p.k_head_stride, 128);
  EXPECT_EQ(p.v_batch_stride, 256 * 2 * 128);
  EXPECT_EQ(p.v_row_stride, 2 * 128);
  EXPECT_EQ(p.v_head_stride, 128);
  EXPECT_EQ(p.o_batch_stride, 128 * 8 * 128);
  EXPECT_EQ(p.o_row_stride, 8 * 128);
  EXPECT_EQ(p.o_head_stride, 128);
  EXPECT_EQ(p.lse_batch_stride, 8 * 128);
  EXPECT_EQ(p.lse_head_stride, 128);
  EXPECT_EQ(p.cu_seqlens_q, nullptr);
  EXPECT_EQ(p.cu_seqlens_k, nullptr);
  EXPECT_EQ(p.batch, 2);
  EXPECT_EQ(p.h_q, 8);
  EXPECT_EQ(p.h_kv, 2);
  EXPECT_EQ(p.h_ratio, 4);
  // the kernels' tile decode divides by these (prims::FastDiv)
  EXPECT_EQ(p.div_h_q.d, 8);
  EXPECT_EQ(p.div_h_ratio.d, 4);
  for (int bh = 0; bh < 2 * 8; ++bh) {
    int batch = -1, head = -1;
    p.div_h_q.divmod(bh, batch, head);
    EXPECT_EQ(batch, bh / 8);
    EXPECT_EQ(head, bh % 8);
    EXPECT_EQ(p.div_h_ratio.div(head), head / 4);
  }
  EXPECT_EQ(p.seqlen_q, 128);
  EXPECT_EQ(p.seqlen_k, 256);
  EXPECT_EQ(p.total_q, 128);
  EXPECT_EQ(p.total_k, 256);
  EXPECT_EQ(p.error_flag, nullptr);  // attention_fwd sets the device's word
  EXPECT_EQ(p.head_dim, 128);
  EXPECT_TRUE(p.causal);
}

TEST(FwdParams, DefaultScaleIsInverseSqrtHeadDim) {
  for (int d : {64, 96, 128, 192, 256}) {
    for (float s : {0.f, -2.f, std::numeric_limits<float>::quiet_NaN(),
                    -std::numeric_limits<float>::infinity()}) {
      AttentionFwdArgs a = dense_args(DType::kFloat16, d);
      a.softmax_scale = s;
      const FwdParams p = make_fwd_params(a);
      const float expected = static_cast<float>(1.0 / std::sqrt(double(d)));
      EXPECT_FLOAT_EQ(p.softmax_scale, expected) << "D=" << d << " scale=" << s;
      EXPECT_FLOAT_EQ(p.softmax_scale_log2, static_cast<float>(expected * kLog2e));
    }
  }
}

TEST(FwdParams, ExplicitScale) {
  AttentionFwdArgs a = dense_args();
  a.softmax_scale = 0.3f;
  const FwdParams p = make_fwd_params(a);
  EXPECT_EQ(p.softmax_scale, 0.3f);
  EXPECT_FLOAT_EQ(p.softmax_scale_log2, static_cast<float>(0.3f * kLog2e));
  EXPECT_FALSE(p.causal);
}

TEST(FwdParams, StridedViews) {
  // q: a BHSD tensor viewed as BSHD; k/v: slices of a packed [B, S, 2, H, D] kv tensor
  // with padded rows.
  const int64_t B = 3, S = 64, H = 4, D = 64, Sk = 96, Hkv = 2;
  AttentionFwdArgs a;
  a.q = TensorRef::cuda_strided(fake_ptr(1), DType::kFloat16, {B, S, H, D},
                                {H * S * D, D, S * D, 1});
  const int64_t kv_row = 2 * Hkv * D + 64;  // padding after each row
  char* kv = static_cast<char*>(fake_ptr(2));
  a.k = TensorRef::cuda_strided(kv, DType::kFloat16, {B, Sk, Hkv, D}, {Sk * kv_row, kv_row, D, 1});
  a.v = TensorRef::cuda_strided(kv + Hkv * D * 2, DType::kFloat16, {B, Sk, Hkv, D},
                                {Sk * kv_row, kv_row, D, 1});
  a.out = TensorRef::cuda(fake_ptr(4), DType::kFloat16, {B, S, H, D});
  expect_validates(a);
  const FwdParams p = make_fwd_params(a);
  EXPECT_EQ(p.q_batch_stride, H * S * D);
  EXPECT_EQ(p.q_row_stride, D);
  EXPECT_EQ(p.q_head_stride, S * D);
  EXPECT_EQ(p.k_batch_stride, Sk * kv_row);
  EXPECT_EQ(p.k_row_stride, kv_row);
  EXPECT_EQ(p.k_head_stride, D);
  EXPECT_EQ(p.v, kv + Hkv * D * 2);
  EXPECT_EQ(p.v_row_stride, kv_row);
  EXPECT_EQ(p.lse, nullptr);
  EXPECT_EQ(p.lse_batch_stride, 0);
  EXPECT_EQ(p.lse_head_stride, 0);
  EXPECT_EQ(p.h_ratio, 2);
}

TEST(FwdParams, SizeOneDimsGetContiguousStrides) {
  AttentionFwdArgs a;
  a.q = TensorRef::cuda_strided(fake_ptr(1), DType::kBFloat16, {1, 16, 1, 64}, {1, 64, 1, 1});
  a.k = TensorRef::cuda_strided(fake_ptr(2), DType::kBFloat16, {1, 32, 1, 64}, {3, 128, 7, 1});
  a.v = TensorRef::cuda(fake_ptr(3), DType::kBFloat16, {1, 32, 1, 64});
  a.out = TensorRef::cuda(fake_ptr(4), DType::kBFloat16, {1, 16, 1, 64});
  expect_validates(a);
  const FwdParams p = make_fwd_params(a);
  EXPECT_EQ(p.q_head_stride, 64);
  EXPECT_EQ(p.q_row_stride, 64);
  EXPECT_EQ(p.q_batch_stride, 16 * 64);
  EXPECT_EQ(p.k_head_stride, 64);
  EXPECT_EQ(p.k_row_stride, 128);  // a real stride is kept
  EXPECT_EQ(p.k_batch_stride, 32 * 128);
  EXPECT_EQ(p.h_ratio, 1);
}

TEST(FwdParams, Varlen) {
  AttentionFwdArgs a = varlen_args();  // q [300,8,128], k/v [500,2,128], lse [8,300], B=2
  expect_validates(a);
  const FwdParams p = make_fwd_params(a);
  EXPECT_EQ(p.q_batch_stride, 0);
  EXPECT_EQ(p.k_batch_stride, 0);
  EXPECT_EQ(p.v_batch_stride, 0);
  EXPECT_EQ(p.o_batch_stride, 0);
  EXPECT_EQ(p.q_row_stride, 8 * 128);
  EXPECT_EQ(p.q_head_stride, 128);
  EXPECT_EQ(p.k_row_stride, 2 * 128);
  EXPECT_EQ(p.k_head_stride, 128);
  EXPECT_EQ(p.o_row_stride, 8 * 128);
  EXPECT_EQ(p.lse_batch_stride, 0);
  EXPECT_EQ(p.lse_head_stride, 300);
  EXPECT_EQ(p.cu_seqlens_q, a.cu_seqlens_q.data);
  EXPECT_EQ(p.cu_seqlens_k, a.cu_seqlens_k.data);
  EXPECT_EQ(p.batch, 2);
  EXPECT_EQ(p.seqlen_q, 200);
  EXPECT_EQ(p.seqlen_k, 300);
  EXPECT_EQ(p.total_q, 300);  // the clamp bounds of every cu_seqlens range
  EXPECT_EQ(p.total_k, 500);
  EXPECT_EQ(p.error_flag, nullptr);
  EXPECT_EQ(p.h_q, 8);
  EXPECT_EQ(p.h_kv, 2);
  EXPECT_EQ(p.h_ratio, 4);
  EXPECT_EQ(p.head_dim, 128);
  EXPECT_FLOAT_EQ(p.softmax_scale, static_cast<float>(1.0 / std::sqrt(128.0)));
}

TEST(FwdParams, VarlenMaxSeqlenClampedToTotal) {
  AttentionFwdArgs a = varlen_args();
  a.max_seqlen_q = 100000;  // loose upper bounds are allowed
  a.max_seqlen_k = 100000;
  expect_validates(a);
  const FwdParams p = make_fwd_params(a);
  EXPECT_EQ(p.seqlen_q, 300);
  EXPECT_EQ(p.seqlen_k, 500);
  EXPECT_EQ(p.total_q, 300);
  EXPECT_EQ(p.total_k, 500);
}

TEST(FwdParams, EmptyProblems) {
  EXPECT_FALSE(fwd_is_empty(dense_args()));
  EXPECT_FALSE(fwd_is_empty(varlen_args()));
  AttentionFwdArgs a = dense_args();
  a.q.shape[1] = 0;
  EXPECT_TRUE(fwd_is_empty(a));
  a = dense_args();
  a.q.shape[0] = 0;
  EXPECT_TRUE(fwd_is_empty(a));
  a = dense_args();
  a.k.shape[1] = 0;  // S_k == 0 still writes out = 0 and lse = -inf
  EXPECT_FALSE(fwd_is_empty(a));
  a = varlen_args();
  a.q.shape[0] = 0;
  EXPECT_TRUE(fwd_is_empty(a));
  a = varlen_args();
  a.cu_seqlens_q.shape[0] = 1;
  EXPECT_TRUE(fwd_is_empty(a));
}

TEST(FwdParams, WindowAndSoftcapNormalized) {
  AttentionFwdArgs a = dense_args();  // S_q 128, S_k 256
  FwdParams p = make_fwd_params(a);
  EXPECT_EQ(p.window_left, -1);
  EXPECT_EQ(p.window_right, -1);
  EXPECT_FALSE(p.causal);
  EXPECT_EQ(p.softcap, 0.f);

  a.causal = true;
  a.window_left = 64;
  a.window_right = 9;  // clipped to the diagonal by causal
  p = make_fwd_params(a);
  EXPECT_TRUE(p.causal);
  EXPECT_EQ(p.window_left, 64);
  EXPECT_EQ(p.window_right, 0);

  a.causal = false;
  a.window_right = 0;  // a right bound of 0 is the causal mask
  p = make_fwd_params(a);
  EXPECT_TRUE(p.causal);
  EXPECT_EQ(p.window_right, 0);

  a.window_right = 9;
  a.window_left = 256;  // as wide as the longest sequence: no bound
  p = make_fwd_params(a);
  EXPECT_FALSE(p.causal);
  EXPECT_EQ(p.window_right, 9);
  EXPECT_EQ(p.window_left, -1);

  a.window_right = int64_t{1} << 40;  // wider than any sequence: no bound (and no overflow)
  p = make_fwd_params(a);
  EXPECT_FALSE(p.causal);
  EXPECT_EQ(p.window_right, -1);

  a.softcap = 30.f;
  a.softmax_scale = 0.125f;
  p = make_fwd_params(a);
  EXPECT_FLOAT_EQ(p.softcap, 30.f);
  EXPECT_FLOAT_EQ(p.softcap_scale, 0.125f / 30.f);
  EXPECT_FLOAT_EQ(p.softmax_scale, 0.125f);
  EXPECT_FLOAT_EQ(p.softmax_scale_log2, static_cast<float>(kLog2e));  // the cap carries the scale
}

}  // namespace
}  // namespace flashkit_test
