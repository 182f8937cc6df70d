// FlashKit C++ example: bf16 attention forward and backward on random inputs.
//
// Builds q/k/v as [B, S, H, D] bf16 tensors in device memory, runs
// flashkit::attention_fwd on the default stream, checks the Status and prints a few
// outputs and log-sum-exp values; then runs flashkit::attention_bwd for a random dout
// (workspace sized by attention_bwd_workspace_size) and prints a few gradients. Exits 0
// with a message when no GPU is present.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include <flashkit/flashkit.h>

namespace {

// float <-> bfloat16 bits (round to nearest even), so the example needs no CUDA headers
// beyond the runtime API.
uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float from_bf16(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

#define CHECK_CUDA(expr)                                                              \
  do {                                                                                \
    cudaError_t err_ = (expr);                                                        \
    if (err_ != cudaSuccess) {                                                        \
      std::fprintf(stderr, "%s failed: %s\n", #expr, cudaGetErrorString(err_));       \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

}  // namespace

int main() {
  std::printf("FlashKit %s\n", flashkit::version());

  int n_devices = 0;
  if (cudaGetDeviceCount(&n_devices) != cudaSuccess || n_devices == 0) {
    std::printf("No CUDA device found; nothing to run.\n");
    return 0;
  }

  const int64_t B = 2, S_q = 256, S_k = 256, H_q = 8, H_kv = 2, D = 128;
  const int64_t n_q = B * S_q * H_q * D, n_kv = B * S_k * H_kv * D, n_lse = B * H_q * S_q;

  std::mt19937 rng(0);
  std::normal_distribution<float> normal(0.f, 1.f);
  auto random_bf16 = [&](int64_t n) {
    std::vector<uint16_t> h(static_cast<size_t>(n));
    for (uint16_t& x : h) x = to_bf16(normal(rng));
    return h;
  };
  const std::vector<uint16_t> q_h = random_bf16(n_q), k_h = random_bf16(n_kv), v_h = random_bf16(n_kv);

  void *q = nullptr, *k = nullptr, *v = nullptr, *out = nullptr, *lse = nullptr;
  CHECK_CUDA(cudaMalloc(&q, n_q * 2));
  CHECK_CUDA(cudaMalloc(&k, n_kv * 2));
  CHECK_CUDA(cudaMalloc(&v, n_kv * 2));
  CHECK_CUDA(cudaMalloc(&out, n_q * 2));
  CHECK_CUDA(cudaMalloc(&lse, n_lse * 4));
  CHECK_CUDA(cudaMemcpy(q, q_h.data(), n_q * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(k, k_h.data(), n_kv * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(v, v_h.data(), n_kv * 2, cudaMemcpyHostToDevice));

  using flashkit::DType;
  using flashkit::TensorRef;
  flashkit::AttentionFwdArgs args;
  args.q = TensorRef::cuda(q, DType::kBFloat16, {B, S_q, H_q, D});
  args.k = TensorRef::cuda(k, DType::kBFloat16, {B, S_k, H_kv, D});
  args.v = TensorRef::cuda(v, DType::kBFloat16, {B, S_k, H_kv, D});
  args.out = TensorRef::cuda(out, DType::kBFloat16, {B, S_q, H_q, D});
  args.lse = TensorRef::cuda(lse, DType::kFloat32, {B, H_q, S_q});
  args.causal = true;  // softmax_scale left at 0: 1/sqrt(D)

  const flashkit::Status status = flashkit::attention_fwd(args, /*stream=*/nullptr);
  if (!status.ok()) {
    std::fprintf(stderr, "attention_fwd failed (code %d): %s\n", static_cast<int>(status.code()),
                 status.message().c_str());
    return 1;
  }
  CHECK_CUDA(cudaDeviceSynchronize());

  std::vector<uint16_t> out_h(static_cast<size_t>(n_q));
  std::vector<float> lse_h(static_cast<size_t>(n_lse));
  CHECK_CUDA(cudaMemcpy(out_h.data(), out, n_q * 2, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(lse_h.data(), lse, n_lse * 4, cudaMemcpyDeviceToHost));

  std::printf("out[0, 0, 0, 0:4] =");
  for (int i = 0; i < 4; ++i) std::printf(" %.4f", from_bf16(out_h[i]));
  std::printf("\nout[1, %d, %d, 0:4] =", int(S_q - 1), int(H_q - 1));
  const int64_t last_row = ((1 * S_q + (S_q - 1)) * H_q + (H_q - 1)) * D;
  for (int i = 0; i < 4; ++i) std::printf(" %.4f", from_bf16(out_h[last_row + i]));
  std::printf("\nlse[0, 0, 0:4] = %.4f %.4f %.4f %.4f\n", lse_h[0], lse_h[1], lse_h[2], lse_h[3]);
  // Causal row 0 sees only key 0: out[0, 0, h] == v[0, 0, h / (H_q/H_kv)], lse == q.k * scale.
  std::printf("v[0, 0, 0, 0:4]   = %.4f %.4f %.4f %.4f (row 0 of causal out equals this)\n",
              from_bf16(v_h[0]), from_bf16(v_h[1]), from_bf16(v_h[2]), from_bf16(v_h[3]));

  // Backward: gradients of sum(out * dout) with respect to q, k, v.
  const std::vector<uint16_t> dout_h = random_bf16(n_q);
  void *dout = nullptr, *dq = nullptr, *dk = nullptr, *dv = nullptr, *workspace = nullptr;
  const int64_t ws_bytes = flashkit::attention_bwd_workspace_size(B, B * S_q, S_q, H_q, D,
                                                                  /*deterministic=*/false);
  CHECK_CUDA(cudaMalloc(&dout, n_q * 2));
  CHECK_CUDA(cudaMalloc(&dq, n_q * 2));
  CHECK_CUDA(cudaMalloc(&dk, n_kv * 2));
  CHECK_CUDA(cudaMalloc(&dv, n_kv * 2));
  CHECK_CUDA(cudaMalloc(&workspace, ws_bytes));
  CHECK_CUDA(cudaMemcpy(dout, dout_h.data(), n_q * 2, cudaMemcpyHostToDevice));

  flashkit::AttentionBwdArgs bwd;
  bwd.dout = TensorRef::cuda(dout, DType::kBFloat16, {B, S_q, H_q, D});
  bwd.q = args.q;
  bwd.k = args.k;
  bwd.v = args.v;
  bwd.out = args.out;
  bwd.lse = args.lse;  // the forward's: required
  bwd.dq = TensorRef::cuda(dq, DType::kBFloat16, {B, S_q, H_q, D});
  bwd.dk = TensorRef::cuda(dk, DType::kBFloat16, {B, S_k, H_kv, D});
  bwd.dv = TensorRef::cuda(dv, DType::kBFloat16, {B, S_k, H_kv, D});
  bwd.workspace = TensorRef::cuda(workspace, DType::kUInt8, {ws_bytes});
  bwd.causal = true;  // as the forward
  const flashkit::Status bwd_status = flashkit::attention_bwd(bwd, /*stream=*/nullptr);
  if (!bwd_status.ok()) {
    std::fprintf(stderr, "attention_bwd failed (code %d): %s\n", static_cast<int>(bwd_status.code()),
                 bwd_status.message().c_str());
    return 1;
  }
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<uint16_t> dq_h(static_cast<size_t>(n_q)), dk_h(static_cast<size_t>(n_kv));
  CHECK_CUDA(cudaMemcpy(dq_h.data(), dq, n_q * 2, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(dk_h.data(), dk, n_kv * 2, cudaMemcpyDeviceToHost));
  // Causal row 0 sees one key, so its softmax is constant: dq[0, 0, h] is 0 up to rounding.
  std::printf("dq[0, 0, 0, 0:4]  = %.4f %.4f %.4f %.4f (~0: row 0 sees one key)\n", from_bf16(dq_h[0]),
              from_bf16(dq_h[1]), from_bf16(dq_h[2]), from_bf16(dq_h[3]));
  const int64_t dq_last = ((1 * S_q + (S_q - 1)) * H_q + (H_q - 1)) * D;
  std::printf("dq[1, %d, %d, 0:4] = %.4f %.4f %.4f %.4f\n", int(S_q - 1), int(H_q - 1),
              from_bf16(dq_h[dq_last]), from_bf16(dq_h[dq_last + 1]), from_bf16(dq_h[dq_last + 2]),
              from_bf16(dq_h[dq_last + 3]));
  std::printf("dk[0, 0, 0, 0:4]  = %.4f %.4f %.4f %.4f\n", from_bf16(dk_h[0]), from_bf16(dk_h[1]),
              from_bf16(dk_h[2]), from_bf16(dk_h[3]));

  for (void* p : {q, k, v, out, lse, dout, dq, dk, dv, workspace}) cudaFree(p);
  return 0;
}
