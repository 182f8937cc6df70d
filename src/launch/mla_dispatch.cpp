#include "launch/mla_dispatch.h"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>

#include "launch/mla_launch.h"

namespace flashkit {
namespace {

struct MlaVariant {
  DType dtype;
  int (*sm80)(const MlaParams&, const DeviceInfo&, cudaStream_t);
  int (*sm90)(const MlaParams&, const DeviceInfo&, cudaStream_t);  // null: not compiled
  int (*combine)(const MlaParams&, bool, cudaStream_t);
};

#define FLASHKIT_DTYPE_fp16 DType::kFloat16
#define FLASHKIT_DTYPE_bf16 DType::kBFloat16
#define FLASHKIT_MLA_VARIANT(dt) \
  {FLASHKIT_DTYPE_##dt, &launch_mla_split_sm80<dt##_t>, nullptr, &launch_mla_combine<dt##_t>},
#ifdef FLASHKIT_HAVE_MLA_SM90
#define FLASHKIT_MLA_SM90_VARIANT(dt)                                                      \
  {FLASHKIT_DTYPE_##dt, &launch_mla_split_sm80<dt##_t>, &launch_mla_split_sm90<dt##_t>, \
   &launch_mla_combine<dt##_t>},
#else
#define FLASHKIT_MLA_SM90_VARIANT(dt) FLASHKIT_MLA_VARIANT(dt)
#endif
const MlaVariant kMlaVariants[] = {
#include "flashkit/mla_variants.inc"
    {DType::kInvalid, nullptr, nullptr, nullptr},
};
#undef FLASHKIT_MLA_VARIANT
#undef FLASHKIT_MLA_SM90_VARIANT

const MlaVariant* find(DType dtype) {
  for (const MlaVariant& v : kMlaVariants) {
    if (v.sm80 != nullptr && v.dtype == dtype) return &v;
  }
  return nullptr;
}

// Whether `name` is set to something other than "" or "0" (read per call: tests flip these).
bool env_set(const char* name) {
  const char* e = std::getenv(name);
  return e != nullptr && e[0] != '\0' && std::strcmp(e, "0") != 0;
}

bool portable_forced() { return env_set("FLASHKIT_MLA_PORTABLE"); }

// The FP8 cache: the Hopper kernel for bf16 q (whose launcher hands calls it has no kernel for,
// pages that are not multiples of 64 tokens, back: launch_mla_split_for), the portable one otherwise.
// FLASHKIT_MLA_FP8_PORTABLE=1 (per call) keeps FP8 on the portable kernel (comparisons, tests).
bool use_sm90(const MlaVariant& v, const DeviceInfo& dev, bool fp8_cache) {
  if (fp8_cache && (v.dtype != DType::kBFloat16 || env_set("FLASHKIT_MLA_FP8_PORTABLE"))) return false;
  return v.sm90 != nullptr && dev.cc_major == 9 && dev.cc_minor == 0 && !portable_forced();
}

}  // namespace

bool mla_variant_compiled(DType dtype) { return find(dtype) != nullptr; }

const char* mla_split_family(DType dtype, const DeviceInfo& dev, bool fp8_cache) {
  const MlaVariant* v = find(dtype);
  if (v == nullptr) return "";
  return use_sm90(*v, dev, fp8_cache) ? "sm90" : "sm80";
}

int mla_split_smem_bytes(DType dtype, const DeviceInfo& dev, bool fp8_cache) {
  const MlaVariant* v = find(dtype);
  if (v == nullptr) return 0;
  return use_sm90(*v, dev, fp8_cache) ? 0 : kMlaSm80SmemBytes;  // the sm90 launcher checks its own needs
}

int launch_mla_split_for(DType dtype, const MlaParams& p, const DeviceInfo& dev, cudaStream_t stream) {
  const MlaVariant* v = find(dtype);
  if (v == nullptr) return int(cudaErrorInvalidDeviceFunction);
  if (use_sm90(*v, dev, p.kv_fp8)) {
    const int r = v->sm90(p, dev, stream);
    if (r != kMlaLaunchNotHandled) return r;
  }
  return v->sm80(p, dev, stream);
}

int launch_mla_combine_for(DType dtype, const MlaParams& p, bool pdl, cudaStream_t stream) {
  const MlaVariant* v = find(dtype);
  if (v == nullptr) return int(cudaErrorInvalidDeviceFunction);
  return v->combine(p, pdl, stream);
}

}  // namespace flashkit
