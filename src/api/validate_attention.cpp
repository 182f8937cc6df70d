// Argument validation of the dense attention forward (SPEC §2). Host-only: reads the
// TensorRef descriptors, never device memory, and makes no CUDA runtime call.
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <string>
#include <vector>

#include "api/attention_internal.h"
#include "api/validate_util.h"
#include "flashkit/attention.h"
#include "flashkit/tensor.h"
#include "launch/fwd_dispatch.h"

namespace flashkit {
namespace {
using namespace vutil;

constexpr int kSupportedHeadDims[] = {64, 96, 128, 192, 256};
constexpr int64_t kMaxGridYZ = 65535;                  // CUDA grid y/z limit (B, H_q)

std::string supported_head_dims() {
  std::string s;
  for (int d : kSupportedHeadDims) {
    if (!s.empty()) s += ", ";
    s += std::to_string(d);
  }
  return s;
}

bool head_dim_supported(int64_t d) {
  for (int s : kSupportedHeadDims) {
    if (d == s) return true;
  }
  return false;
}

Status check_max_seqlen(const char* name, int64_t max_seqlen, const char* total_name,
                        int64_t total) {
  if (max_seqlen < 0) {
    return invalid(name, "expected >= 0 (an upper bound of the sequence lengths), got " +
                             str(max_seqlen));
  }
  if (max_seqlen > kMaxSize) {
    return invalid(name, "expected < 2^31, got " + str(max_seqlen));
  }
  if (total > 0 && max_seqlen == 0) {
    return invalid(name, std::string("expected > 0 (an upper bound of the sequence lengths) when ") +
                             total_name + " = " + str(total) + " > 0, got 0");
  }
  return Status::Ok();
}

}  // namespace

FLASHKIT_EXPORT Status validate_attention_fwd(const AttentionFwdArgs& a) {
  struct Named {
    const char* name;
    const TensorRef& t;
  };
  const Named all[] = {{"q", a.q},     {"k", a.k},
                       {"v", a.v},     {"out", a.out},
                       {"lse", a.lse}, {"cu_seqlens_q", a.cu_seqlens_q},
                       {"cu_seqlens_k", a.cu_seqlens_k}};

  // 1. Representable descriptors; required tensors present; varlen pairing.
  for (const Named& n : all) {
    if (n.t.ndim < 0 || n.t.ndim > kMaxDims) {
      return invalid(n.name, "expected 0.." + str(kMaxDims) + " dims, got ndim = " + str(n.t.ndim));
    }
  }
  for (int i = 0; i < 4; ++i) {
    if (!all[i].t.defined()) {
      return invalid(all[i].name, "required tensor is missing (ndim == 0)");
    }
  }
  if (a.cu_seqlens_q.defined() && !a.cu_seqlens_k.defined()) {
    return invalid("cu_seqlens_k", "missing: cu_seqlens_q is set, and varlen mode needs both "
                                   "cu_seqlens_q and cu_seqlens_k");
  }
  if (a.cu_seqlens_k.defined() && !a.cu_seqlens_q.defined()) {
    return invalid("cu_seqlens_q", "missing: cu_seqlens_k is set, and varlen mode needs both "
                                   "cu_seqlens_q and cu_seqlens_k");
  }
  const bool varlen = a.cu_seqlens_q.defined();

  // 2. Devices: all CUDA, all on q's device.
  if (a.q.device == Device::kCUDA && a.q.device_id < 0) {
    return invalid("q", "expected a CUDA device id >= 0, got " + str(a.q.device_id));
  }
  for (const Named& n : all) {
    if (n.t.defined()) FK_RETURN_IF_ERROR(check_device(n.name, n.t, a.q.device_id));
  }

  // 3. Dtypes.
  if (a.q.dtype != DType::kFloat16 && a.q.dtype != DType::kBFloat16) {
    return invalid("q", std::string("expected dtype float16 or bfloat16, got ") +
                            dtype_name(a.q.dtype));
  }
  FK_RETURN_IF_ERROR(check_dtype("k", a.k, a.q.dtype, " (same as q)"));
  FK_RETURN_IF_ERROR(check_dtype("v", a.v, a.q.dtype, " (same as q)"));
  FK_RETURN_IF_ERROR(check_dtype("out", a.out, a.q.dtype, " (same as q)"));
  if (a.lse.defined()) FK_RETURN_IF_ERROR(check_dtype("lse", a.lse, DType::kFloat32, ""));
  if (varlen) {
    FK_RETURN_IF_ERROR(check_dtype("cu_seqlens_q", a.cu_seqlens_q, DType::kInt32, ""));
    FK_RETURN_IF_ERROR(check_dtype("cu_seqlens_k", a.cu_seqlens_k, DType::kInt32, ""));
  }

  // 4. Ranks.
  if (varlen) {
    FK_RETURN_IF_ERROR(check_ndim("q", a.q, 3, "[total_q, H_q, D] (varlen)"));
    FK_RETURN_IF_ERROR(check_ndim("k", a.k, 3, "[total_k, H_kv, D] (varlen)"));
    FK_RETURN_IF_ERROR(check_ndim("v", a.v, 3, "[total_k, H_kv, D_v] (varlen)"));
    FK_RETURN_IF_ERROR(check_ndim("out", a.out, 3, "[total_q, H_q, D_v] (varlen)"));
    if (a.lse.defined()) FK_RETURN_IF_ERROR(check_ndim("lse", a.lse, 2, "[H_q, total_q] (varlen)"));
    FK_RETURN_IF_ERROR(check_ndim("cu_seqlens_q", a.cu_seqlens_q, 1, "[B+1]"));
    FK_RETURN_IF_ERROR(check_ndim("cu_seqlens_k", a.cu_seqlens_k, 1, "[B+1]"));
  } else {
    FK_RETURN_IF_ERROR(check_ndim("q", a.q, 4, "[B, S_q, H_q, D]"));
    FK_RETURN_IF_ERROR(check_ndim("k", a.k, 4, "[B, S_k, H_kv, D]"));
    FK_RETURN_IF_ERROR(check_ndim("v", a.v, 4, "[B, S_k, H_kv, D_v]"));
    FK_RETURN_IF_ERROR(check_ndim("out", a.out, 4, "[B, S_q, H_q, D_v]"));
    if (a.lse.defined()) FK_RETURN_IF_ERROR(check_ndim("lse", a.lse, 3, "[B, H_q, S_q]"));
  }
  for (const Named& n : all) {
    if (n.t.defined()) FK_RETURN_IF_ERROR(check_sizes(n.name, n.t));
  }

  // 5. Shapes. Dense q [B, S_q, H_q, D]; varlen q [total_q, H_q, D] (o = dim offset).
  const int o = varlen ? 0 : 1;
  const int64_t B = varlen ? a.cu_seqlens_q.shape[0] - 1 : a.q.shape[0];
  const int64_t S_q = a.q.shape[o];  // total_q when varlen
  const int64_t H_q = a.q.shape[o + 1];
  const int64_t D = a.q.shape[o + 2];
  const int64_t S_k = a.k.shape[o];  // total_k when varlen
  const int64_t H_kv = a.k.shape[o + 1];
  const int64_t D_v = a.v.shape[o + 2];
  const char* s_q_name = varlen ? "total_q" : "S_q";
  const char* s_k_name = varlen ? "total_k" : "S_k";

  if (varlen) {
    if (a.cu_seqlens_q.shape[0] < 1) {
      return invalid("cu_seqlens_q", "expected length B+1 >= 1, got " + a.cu_seqlens_q.shape_str());
    }
    if (a.cu_seqlens_k.shape[0] != a.cu_seqlens_q.shape[0]) {
      return invalid("cu_seqlens_k", "expected length " + str(a.cu_seqlens_q.shape[0]) +
                                         " (B+1, same as cu_seqlens_q), got " +
                                         str(a.cu_seqlens_k.shape[0]));
    }
    if (B > kMaxGridYZ) {
      return invalid("cu_seqlens_q", "batch size B = len - 1 = " + str(B) +
                                         " exceeds the CUDA grid limit " + str(kMaxGridYZ));
    }
  } else {
    if (a.k.shape[0] != B) {
      return invalid("k", "expected batch size B = " + str(B) + " (from q), got " + str(a.k.shape[0]));
    }
    if (a.v.shape[0] != B) {
      return invalid("v", "expected batch size B = " + str(B) + " (from q), got " + str(a.v.shape[0]));
    }
    if (B > kMaxGridYZ) {
      return invalid("q", "batch size B = " + str(B) + " exceeds the CUDA grid limit " +
                              str(kMaxGridYZ));
    }
  }
  if (a.v.shape[o] != S_k) {
    return invalid("v", std::string("expected ") + s_k_name + " = " + str(S_k) + " (from k), got " +
                            str(a.v.shape[o]));
  }
  if (H_q < 1) return invalid("q", "expected H_q >= 1 heads, got " + str(H_q));
  if (H_kv < 1) return invalid("k", "expected H_kv >= 1 heads, got " + str(H_kv));
  if (a.v.shape[o + 1] != H_kv) {
    return invalid("v", "expected H_kv = " + str(H_kv) + " (from k), got " + str(a.v.shape[o + 1]));
  }
  if (H_q > kMaxGridYZ) {
    return invalid("q", "H_q = " + str(H_q) + " heads exceeds the CUDA grid limit " +
                            str(kMaxGridYZ));
  }
  if (H_q % H_kv != 0) {
    return Status::Invalid("q, k: H_q = " + str(H_q) + " (q) must be a multiple of H_kv = " +
                           str(H_kv) + " (k) for GQA/MQA (H_q % H_kv == 0)");
  }
  if (!head_dim_supported(D)) {
    return invalid("q", "head_dim D = " + str(D) + " is not supported (supported: " +
                            supported_head_dims() + ")");
  }
  if (a.k.shape[o + 2] != D) {
    return invalid("k", "expected head_dim D = " + str(D) + " (from q), got " +
                            str(a.k.shape[o + 2]));
  }
  if (D_v != D) {
    return invalid("v", "head_dim D_v = " + str(D_v) + " must equal D = " + str(D) +
                            " (from q) for now: D_v != D is not supported yet");
  }
  {
    const bool out_ok = varlen ? (a.out.shape[0] == S_q && a.out.shape[1] == H_q &&
                                  a.out.shape[2] == D_v)
                               : (a.out.shape[0] == B && a.out.shape[1] == S_q &&
                                  a.out.shape[2] == H_q && a.out.shape[3] == D_v);
    if (!out_ok) {
      const std::string want =
          varlen ? shape_of({S_q, H_q, D_v}) : shape_of({B, S_q, H_q, D_v});
      return invalid("out", "expected shape " + want + " (q's shape with D_v), got " +
                                a.out.shape_str());
    }
  }
  if (a.lse.defined()) {
    const bool lse_ok = varlen ? (a.lse.shape[0] == H_q && a.lse.shape[1] == S_q)
                               : (a.lse.shape[0] == B && a.lse.shape[1] == H_q &&
                                  a.lse.shape[2] == S_q);
    if (!lse_ok) {
      const std::string want = varlen ? "[H_q, total_q] = " + shape_of({H_q, S_q})
                                      : "[B, H_q, S_q] = " + shape_of({B, H_q, S_q});
      return invalid("lse", "expected shape " + want + ", got " + a.lse.shape_str());
    }
  }
  if (varlen) {
    FK_RETURN_IF_ERROR(check_max_seqlen("max_seqlen_q", a.max_seqlen_q, s_q_name, S_q));
    FK_RETURN_IF_ERROR(check_max_seqlen("max_seqlen_k", a.max_seqlen_k, s_k_name, S_k));
  }

  // 6. Strides, alignment, pointers.
  FK_RETURN_IF_ERROR(check_qkvo_layout("q", a.q, false));
  FK_RETURN_IF_ERROR(check_qkvo_layout("k", a.k, false));
  FK_RETURN_IF_ERROR(check_qkvo_layout("v", a.v, false));
  FK_RETURN_IF_ERROR(check_qkvo_layout("out", a.out, true));
  if (a.lse.defined()) FK_RETURN_IF_ERROR(check_contiguous("lse", a.lse));
  if (varlen) {
    FK_RETURN_IF_ERROR(check_contiguous("cu_seqlens_q", a.cu_seqlens_q));
    FK_RETURN_IF_ERROR(check_contiguous("cu_seqlens_k", a.cu_seqlens_k));
  }

  // 7. Scalars.
  if (a.softmax_scale > 0.f && !std::isfinite(a.softmax_scale)) {
    return invalid("softmax_scale", "expected a finite value > 0 (or <= 0 / NaN for the default "
                                    "1/sqrt(D)), got inf");
  }

  if (a.window_left < -1) {
    return invalid("window_left", "expected -1 (no bound) or a number of keys >= 0, got " + str(a.window_left));
  }
  if (a.window_right < -1) {
    return invalid("window_right", "expected -1 (no bound) or a number of keys >= 0, got " + str(a.window_right));
  }
  if (!(a.softcap >= 0.f) || !std::isfinite(a.softcap)) {  // NaN fails the first test
    return invalid("softcap", "expected 0 (off) or a finite value > 0, got " + std::to_string(a.softcap));
  }
  if (a.softcap > 0.f) {  // the kernels multiply scores by softmax_scale / softcap
    const double scale = a.softmax_scale > 0.f ? double(a.softmax_scale) : 1.0 / std::sqrt(double(D));
    if (!std::isfinite(static_cast<float>(scale / double(a.softcap)))) {
      char got[64];
      std::snprintf(got, sizeof(got), "%g", double(a.softcap));
      return invalid("softcap", std::string("too small: softmax_scale / softcap overflows float32 (softcap = ") +
                                    got + ")");
    }
  }

  // 8. Is this variant in the build?
  if (!fwd_variant_compiled(a.q.dtype, static_cast<int>(D))) {
    std::string compiled;
    for (const std::string& v : fwd_variants()) compiled += (compiled.empty() ? "" : ", ") + v;
    return Status::NotCompiled(std::string("attention forward for dtype ") +
                               dtype_name(a.q.dtype) + " and head_dim " + str(D) +
                               " is not compiled into this build of FlashKit (compiled: " +
                               (compiled.empty() ? std::string("none") : compiled) +
                               "; see FLASHKIT_DTYPES / FLASHKIT_HEAD_DIMS)");
  }
  return Status::Ok();
}

FLASHKIT_EXPORT std::vector<std::string> compiled_fwd_variants() { return fwd_variants(); }

FLASHKIT_EXPORT bool is_fwd_variant_compiled(DType dtype, int head_dim) {
  return fwd_variant_compiled(dtype, head_dim);
}

FLASHKIT_EXPORT std::vector<std::string> compiled_fwd_kernels() { return fwd_kernels(); }

FLASHKIT_EXPORT std::string fwd_kernel_family(DType dtype, int head_dim) {
  return fwd_family(dtype, head_dim);
}

}  // namespace flashkit
