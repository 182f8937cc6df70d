#include "launch/decode_dispatch.h"

#include <cuda_runtime_api.h>

#include "launch/decode_launch.h"

namespace flashkit {
namespace {

struct DecodeVariant {
  DType dtype;
  int head_dim;
  int quant;  // 0: 16-bit cache, 1: int8, 2: fp8 e4m3
  int (*split)(const DecodeParams&, const DeviceInfo&, cudaStream_t);
  int (*occupancy)(int, const DeviceInfo&, int*);
  int (*combine)(const DecodeParams&, bool, cudaStream_t);
};

#define FLASHKIT_DTYPE_fp16 DType::kFloat16
#define FLASHKIT_DTYPE_bf16 DType::kBFloat16
#define FLASHKIT_DECODE_VARIANT(dt, d)                                                             \
  {FLASHKIT_DTYPE_##dt, d, 0, &launch_decode_split<dt##_t, d, 0>, &decode_split_blocks_per_sm<dt##_t, d, 0>, \
   &launch_decode_combine<dt##_t>},
#define FLASHKIT_DECODE_QUANT_VARIANT(dt, d)                                                       \
  {FLASHKIT_DTYPE_##dt, d, 1, &launch_decode_split<dt##_t, d, 1>, &decode_split_blocks_per_sm<dt##_t, d, 1>, \
   &launch_decode_combine<dt##_t>},                                                                \
  {FLASHKIT_DTYPE_##dt, d, 2, &launch_decode_split<dt##_t, d, 2>, &decode_split_blocks_per_sm<dt##_t, d, 2>, \
   &launch_decode_combine<dt##_t>},
const DecodeVariant kDecodeVariants[] = {
#include "flashkit/decode_variants.inc"
    {DType::kInvalid, 0, 0, nullptr, nullptr, nullptr},
};
#undef FLASHKIT_DECODE_VARIANT
#undef FLASHKIT_DECODE_QUANT_VARIANT

const DecodeVariant* find(DType dtype, int head_dim, int quant) {
  for (const DecodeVariant& v : kDecodeVariants) {
    if (v.split != nullptr && v.head_dim == head_dim && v.quant == quant &&
        (dtype == DType::kInvalid || v.dtype == dtype)) {
      return &v;
    }
  }
  return nullptr;
}

}  // namespace

bool decode_variant_compiled(DType dtype, int head_dim, int quant) {
  return find(dtype, head_dim, quant) != nullptr;
}

int decode_blocks_per_sm(int head_dim, int rows, int quant, const DeviceInfo& dev, int* blocks) {
  const DecodeVariant* v = find(DType::kInvalid, head_dim, quant);
  if (v == nullptr) return int(cudaErrorInvalidDeviceFunction);
  return v->occupancy(rows, dev, blocks);
}

int launch_decode_split_for(DType dtype, int quant, const DecodeParams& p, const DeviceInfo& dev,
                            cudaStream_t stream) {
  const DecodeVariant* v = find(dtype, p.head_dim, quant);
  if (v == nullptr) return int(cudaErrorInvalidDeviceFunction);
  return v->split(p, dev, stream);
}

int launch_decode_combine_for(DType dtype, const DecodeParams& p, bool pdl, cudaStream_t stream) {
  const DecodeVariant* v = find(dtype, p.head_dim, 0);
  if (v == nullptr) return int(cudaErrorInvalidDeviceFunction);
  return v->combine(p, pdl, stream);
}

int launch_decode_append_quant_for(DType dtype, int quant, const AppendParams& p, int num_sms,
                                   cudaStream_t stream) {
  if (dtype == DType::kFloat16) {
    return quant == 1 ? launch_decode_append_quant<fp16_t, 1>(p, num_sms, stream)
                      : launch_decode_append_quant<fp16_t, 2>(p, num_sms, stream);
  }
  return quant == 1 ? launch_decode_append_quant<bf16_t, 1>(p, num_sms, stream)
                    : launch_decode_append_quant<bf16_t, 2>(p, num_sms, stream);
}

}  // namespace flashkit
