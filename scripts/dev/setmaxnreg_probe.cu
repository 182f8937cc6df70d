// Probe (no GPU needed): does ptxas allocate a setmaxnreg.inc region above the entry cap?
//   nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -cubin scripts/dev/setmaxnreg_probe.cu
// CUDA 13.0: "Used 168 registers", 0 spills with 200 live floats per consumer thread: yes, here.
// (The forward kernel with a producer warpgroup still spilled at 168: see docs/kernels/fwd_sm90.md.)
#include <cstdint>
template <int N> __device__ __forceinline__ void inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N)); }
template <int N> __device__ __forceinline__ void dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N)); }
__global__ void __launch_bounds__(384, 1) k(const float* __restrict__ in, float* out, int n) {
  const int wg = __shfl_sync(0xffffffffu, threadIdx.x / 128, 0);
  if (wg == 0) {
    dec<24>();
    if (threadIdx.x == 0) out[0] = in[0];
  } else {
    inc<240>();
    float acc[200];
#pragma unroll
    for (int i = 0; i < 200; ++i) acc[i] = in[i * 7 + threadIdx.x];
    for (int it = 0; it < n; ++it) {
#pragma unroll
      for (int i = 0; i < 200; ++i) acc[i] = acc[i] * acc[(i + 1) % 200] + 1.f;
    }
    float s = 0;
#pragma unroll
    for (int i = 0; i < 200; ++i) s += acc[i] * (i + 1);
    out[threadIdx.x] = s;
  }
}
