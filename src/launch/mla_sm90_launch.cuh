// Launcher of the Hopper MLA split kernel. Included only by the instantiation files
// src/kernels/mla/inst/mla_sm90_<dtype>.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstring>
#include <mutex>

#include "kernels/mla/sm90_kernel.cuh"
#include "launch/element_type.cuh"
#include "launch/launch_common.cuh"
#include "launch/mla_launch.h"
#include "launch/pdl_launch.cuh"
#include "launch/tma_encode.cuh"

namespace flashkit {
namespace mla_sm90 {

using launch_util::tensor_map_encoder;

inline int gcd_int(int a, int b) {
  while (b != 0) {
    const int t = a % b;
    a = b;
    b = t;
  }
  return a;
}

// TMA boxes of 64 columns x gcd(page_size, 64) tokens: one box never crosses a page or a
// 64-token block. Page sizes that are not multiples of 16 (boxes of < 16 rows: too many
// copies per block) and caches the map cannot describe keep the cp.async loads (0).
template <typename T>
int make_kv_tensor_map(MlaParams& p) {
  static_assert(sizeof(CUtensorMap) == sizeof(MlaTmaDesc), "MlaTmaDesc mirrors CUtensorMap");
  const int box = gcd_int(p.page_size, kMlaBlockN);
  if (box < 16) return 0;
  const auto encode = tensor_map_encoder();
  if (encode == nullptr) return 0;
  const int64_t es = sizeof(T);
  const int64_t strides[3] = {p.kv_slot_stride * es, p.kv_head_stride * es, p.kv_page_stride * es};
  for (int64_t st : strides) {
    if (st <= 0 || st % 16 != 0 || st >= (int64_t(1) << 40)) return 0;
  }
  if (reinterpret_cast<uintptr_t>(p.kv) % 16 != 0) return 0;
  cuuint64_t dims[4] = {cuuint64_t(kMlaHeadDim), cuuint64_t(p.page_size), cuuint64_t(p.h_kv),
                        cuuint64_t(p.num_pages)};
  cuuint64_t gstrides[3] = {cuuint64_t(strides[0]), cuuint64_t(strides[1]), cuuint64_t(strides[2])};
  cuuint32_t boxdim[4] = {64, cuuint32_t(box), 1, 1};
  cuuint32_t estr[4] = {1, 1, 1, 1};
  CUtensorMap map;
  const CUresult r = encode(&map, std::is_same<T, __half>::value ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                                 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
                            4, const_cast<void*>(p.kv), dims, gstrides, boxdim, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) return 0;
  std::memcpy(&p.kv_tmap, &map, sizeof(map));
  return box;
}

template <class Tr>
cudaError_t launch(const MlaParams& p, const DeviceInfo& dev, cudaStream_t stream) {
  constexpr auto kernel = &mla_split_kernel<Tr>;
  cudaError_t err = launch_util::raise_smem_limit<kernel>(dev.device, Tr::kSmemBytes);
  if (err != cudaSuccess) return err;
  // Programmatic dependent launch: the kernel waits (griddepcontrol.wait) before it reads
  // anything, so its prologue overlaps the previous kernel's tail.
  return launch_util::launch_pdl(kernel, dim3(p.m_blocks, p.h_kv, p.num_parts), dim3(Tr::kThreads),
                                 Tr::kSmemBytes, stream, true, p);
}

}  // namespace mla_sm90

// FLASHKIT_MLA_NO_TMA=1 (read once) forces the cp.async loads (for comparisons).
template <typename Tag>
int launch_mla_split_sm90(const MlaParams& params, const DeviceInfo& dev, cudaStream_t stream) {
  using T = typename ElementOf<Tag>::type;
  if (params.batch <= 0 || params.num_parts <= 0) return cudaSuccess;
  static const bool no_tma = [] {
    const char* e = std::getenv("FLASHKIT_MLA_NO_TMA");
    return e != nullptr && e[0] == '1';
  }();
  MlaParams p = params;
  p.tma_box_rows = no_tma ? 0 : mla_sm90::make_kv_tensor_map<T>(p);
  if (p.tma_box_rows > 0) return mla_sm90::launch<mla_sm90::Traits<T, true>>(p, dev, stream);
  return mla_sm90::launch<mla_sm90::Traits<T, false>>(p, dev, stream);
}

}  // namespace flashkit

#define FLASHKIT_INSTANTIATE_MLA_SM90(TAG)                                                  \
  template int flashkit::launch_mla_split_sm90<flashkit::TAG>(const flashkit::MlaParams&,   \
                                                              const flashkit::DeviceInfo&, cudaStream_t);
