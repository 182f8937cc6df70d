// Logit soft-capping (Gemma-2): a raw score s = q . k becomes
//   softcap * tanh(s * softmax_scale / softcap),
// applied to S fragments right after Q K^T, before masking and the softmax (which then
// works with scale log2(e): the cap's input already carries softmax_scale). The backward
// multiplies dS by the derivative 1 - tanh^2.
#pragma once

#include "prims/numeric.cuh"

namespace flashkit::attn {

// `cap_scale` = softmax_scale / softcap (FwdParams::softcap_scale).
template <int kMTiles, int kNTiles>
__device__ __forceinline__ void apply_softcap(float (&s)[kMTiles][kNTiles][4], float softcap, float cap_scale) {
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[mt][nt][e] = softcap * prims::tanh_approx(s[mt][nt][e] * cap_scale);
}

}  // namespace flashkit::attn
