// Scalar helpers: fast exp2, packing two floats into one 32-bit register of fp16/bf16,
// and the 4-lane (quad) reductions used by mma C fragments, whose row is spread over
// the 4 lanes of a quad.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace flashkit::prims {

// 2^x with the SFU (ex2.approx.ftz: ~2 ulp, -inf -> +0). Softmax works in base 2 with
// log2(e) folded into the scale, so one FFMA + one MUFU.EX2 per score.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// tanh with the SFU (tanh.approx.f32, sm_75+: max relative error ~2^-11).
__device__ __forceinline__ float tanh_approx(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi);

template <>
__device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
  __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&h);
}

template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&h);
}

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
  return x;
}

__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  x += __shfl_xor_sync(0xffffffffu, x, 2);
  return x;
}

// 2^k as a float for k in [-126, 127]: an exact power of two, so scaling by it never rounds
// (the backward's fixed-point dQ).
__device__ __forceinline__ float exp2_int(int k) { return __int_as_float((k + 127) << 23); }
// The backward's fixed-point dQ: (x, y) * 2^k rounded to int32 (bits returned in a float2, for the
// fp32 staging code). k below -126 (a row whose bound was not finite) scales by 2^-126: its sums
// are discarded by the post kernel.
__device__ __forceinline__ float2 to_fixed2(float2 v, int k) {
  const float sc = exp2_int(k < -126 ? -126 : k);
  return make_float2(__int_as_float(__float2int_rn(v.x * sc)), __int_as_float(__float2int_rn(v.y * sc)));
}

// base + units * kUnit bytes as one IMAD.WIDE.U32 (mad.wide.u32): the address of an element kept as a 32-bit offset in
// kUnit-byte units (the decode kernels' 32-bit offset rings). Written in PTX because the compiler otherwise forms the
// 64-bit product with a shift and adds it in two instructions.
template <uint32_t kUnit, typename T>
__device__ __forceinline__ const T* add_units(const T* base, uint32_t units) {
  uint64_t r;
  asm("mad.wide.u32 %0, %1, %2, %3;" : "=l"(r) : "r"(units), "n"(kUnit), "l"(reinterpret_cast<uint64_t>(base)));
  return reinterpret_cast<const T*>(r);
}

}  // namespace flashkit::prims
