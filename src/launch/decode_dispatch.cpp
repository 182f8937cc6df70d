#include "launch/decode_dispatch.h"

#include <cuda_runtime_api.h>

#include "launch/decode_launch.h"

namespace flashkit {
namespace {

struct DecodeVariant {
  DType dtype;
  int head_dim;
  int (*split)(const DecodeParams&, const DeviceInfo&, cudaStream_t);
  int (*occupancy)(int, const DeviceInfo&, int*);
  int (*combine)(const DecodeParams&, bool, cudaStream_t);
};

#define FLASHKIT_DTYPE_fp16 DType::kFloat16
#define FLASHKIT_DTYPE_bf16 DType::kBFloat16
#define FLASHKIT_DECODE_VARIANT(dt, d) \
  {FLASHKIT_DTYPE_##dt, d, &launch_decode_split<dt##_t, d>, &decode_split_blocks_per_sm<dt##_t, d>, \
   &launch_decode_combine<dt##_t>},
const DecodeVariant kDecodeVariants[] = {
#include "flashkit/decode_variants.inc"
    {DType::kInvalid, 0, nullptr, nullptr, nullptr},
};
#undef FLASHKIT_DECODE_VARIANT

const DecodeVariant* find(DType dtype, int head_dim) {
  for (const DecodeVariant& v : kDecodeVariants) {
    if (v.split != nullptr && v.head_dim == head_dim && (dtype == DType::kInvalid || v.dtype == dtype)) return &v;
  }
  return nullptr;
}

}  // namespace

bool decode_variant_compiled(DType dtype, int head_dim) { return find(dtype, head_dim) != nullptr; }

int decode_blocks_per_sm(int head_dim, int rows, const DeviceInfo& dev, int* blocks) {
  const DecodeVariant* v = find(DType::kInvalid, head_dim);
  if (v == nullptr) return int(cudaErrorInvalidDeviceFunction);
  return v->occupancy(rows, dev, blocks);
}

int launch_decode_split_for(DType dtype, const DecodeParams& p, const DeviceInfo& dev, cudaStream_t stream) {
  const DecodeVariant* v = find(dtype, p.head_dim);
  if (v == nullptr) return int(cudaErrorInvalidDeviceFunction);
  return v->split(p, dev, stream);
}

int launch_decode_combine_for(DType dtype, const DecodeParams& p, bool pdl, cudaStream_t stream) {
  const DecodeVariant* v = find(dtype, p.head_dim);
  if (v == nullptr) return int(cudaErrorInvalidDeviceFunction);
  return v->combine(p, pdl, stream);
}

}  // namespace flashkit
