// FP8 (e4m3) to fp16 conversion of packed bytes, for the kernels that read FP8 caches
// (quantized decode, MLA over FlashMLA's FP8 layout).
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "prims/numeric.cuh"  // pack2

namespace flashkit::prims {

// The four e4m3 bytes of `w` as two fp16 pairs: bytes 0-1 -> lo, bytes 2-3 -> hi (byte 0
// in lo's low half). Every e4m3 value is an fp16 value: exact. sm_89+: the hardware
// conversion on each 16-bit half of the word in place. cuda_fp8.h's 16-bit argument made
// ptxas shift the high half down first (one SHF per word: 32 of the ~490 instructions per
// warp and tile of the FP8 decode loop); with the halves split by a PTX mov it selects the
// high half as an operand (F2FP ... R.H1) instead. Before sm_89: cuda_fp8.h's emulation.
__device__ __forceinline__ void e4m3x4_to_f16x2x2(uint32_t w, uint32_t& lo, uint32_t& hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\ncvt.rn.f16x2.e4m3x2 %0, l;\ncvt.rn.f16x2.e4m3x2 %1, h;\n}\n"
      : "=r"(lo), "=r"(hi)
      : "r"(w));
#else
  const __half2_raw a = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w & 0xffffu), __NV_E4M3);
  const __half2_raw b = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w >> 16), __NV_E4M3);
  lo = *reinterpret_cast<const uint32_t*>(&a);
  hi = *reinterpret_cast<const uint32_t*>(&b);
#endif
}

// The four e4m3 bytes of `w` times `scale` as four T values, packed in pairs (bytes 0-1 -> lo, 2-3 ->
// hi): exact to fp16, the multiply in fp32, one rounding to T, as the reference dequantizes (the MLA
// kernels' FP8 cache, portable and Hopper).
template <typename T>
__device__ __forceinline__ void e4m3x4_scaled(uint32_t w, float scale, uint32_t& lo, uint32_t& hi) {
  uint32_t hw[2];
  e4m3x4_to_f16x2x2(w, hw[0], hw[1]);
  const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&hw[0]));
  lo = pack2<T>(a.x * scale, a.y * scale);
  const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&hw[1]));
  hi = pack2<T>(b.x * scale, b.y * scale);
}

}  // namespace flashkit::prims
