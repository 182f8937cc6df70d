// Host side of the Hopper TMA copies: cuTensorMapEncodeTiled from the driver, looked up once
// through the runtime (no link to libcuda, so the library loads where there is no driver).
// Included by the Hopper launchers only (their .cu files are built with the CUDA toolkit's
// cuda.h for the CUtensorMap types).
#pragma once

#include <cuda.h>  // CUtensorMap and its enums (types only: the driver is reached at run time)
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/tma_desc.h"
#include "launch/tma_layout.h"

namespace flashkit::launch_util {

// nullptr when the driver does not provide it.
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) !=
            cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      f = nullptr;
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

// Encodes a 4-D map of a tensor that passed tma_layout_ok (dims, byte strides st) with `swizzle`
// (the 128-byte swizzle unless given) and no OOB fill; false when there is no encoder or it refuses.
inline bool encode_tma_map_4d(TmaDesc* out, CUtensorMapDataType type, const void* base, const int64_t (&dims)[4],
                              const int64_t (&st)[3], const cuuint32_t (&box)[4], CUtensorMapL2promotion promotion,
                              CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B) {
  static_assert(sizeof(CUtensorMap) == sizeof(TmaDesc), "TmaDesc mirrors CUtensorMap");
  const auto encode = tensor_map_encoder();
  if (encode == nullptr) return false;
  cuuint64_t gdims[4] = {cuuint64_t(dims[0]), cuuint64_t(dims[1]), cuuint64_t(dims[2]), cuuint64_t(dims[3])};
  cuuint64_t gstrides[3] = {cuuint64_t(st[0]), cuuint64_t(st[1]), cuuint64_t(st[2])};
  cuuint32_t box_dims[4] = {box[0], box[1], box[2], box[3]};
  cuuint32_t estr[4] = {1, 1, 1, 1};
  CUtensorMap map;
  const CUresult r = encode(&map, type, 4, const_cast<void*>(base), gdims, gstrides, box_dims, estr,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, promotion,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) return false;
  std::memcpy(out, &map, sizeof(map));
  return true;
}

// A 4-D map of a 16-bit tensor with dims (innermost first) cols, rows, heads, batch and
// element strides row_s, head_s, batch_s, for boxes of 64 columns x box_rows rows x 1 head x
// box_batches consecutive batch indices (they land one after another: box_batches * box_rows
// rows of 128 bytes) with the 128-byte swizzle (tiles::Swizzle128Tile's layout), zeros outside
// the tensor. False when it cannot be described (an unaligned base, a stride that is 0, not a
// multiple of 16 bytes or >= 2^40 on a dim of size > 1) or there is no encoder.
// make_tma_map_4d_box: the same with boxes of 64 columns x box1 x box2 x box3 (they land in
// that order, dim 1 fastest: box1 * box2 * box3 rows of 128 bytes).
template <typename T>
bool make_tma_map_4d_box(TmaDesc* out, const void* base, const int64_t (&dims)[4], int64_t s1, int64_t s2,
                         int64_t s3, int box1, int box2, int box3,
                         CUtensorMapL2promotion promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_256B) {
  constexpr int64_t es = sizeof(T);
  int64_t st[3] = {s1 * es, s2 * es, s3 * es};
  if (!tma_layout_ok(base, dims, st)) return false;
  const cuuint32_t box[4] = {64, cuuint32_t(box1), cuuint32_t(box2), cuuint32_t(box3)};
  return encode_tma_map_4d(out,
                           std::is_same<T, __half>::value ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                          : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
                           base, dims, st, box, promotion);
}
template <typename T>
bool make_tma_map_4d(TmaDesc* out, const void* base, const int64_t (&dims)[4], int64_t row_s, int64_t head_s,
                     int64_t batch_s, int box_rows, int box_batches = 1,
                     CUtensorMapL2promotion promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_256B) {
  return make_tma_map_4d_box<T>(out, base, dims, row_s, head_s, batch_s, box_rows, 1, box_batches, promotion);
}

// A 4-D map of a byte tensor (dims innermost first, byte strides s1..s3) with boxes of
// box[0] bytes x box[1] x box[2] x box[3], swizzled (`swizzle`) or not; zeros outside the tensor.
// False as make_tma_map_4d.
inline bool make_tma_map_u8_4d(TmaDesc* out, const void* base, const int64_t (&dims)[4], int64_t s1, int64_t s2,
                               int64_t s3, const cuuint32_t (&box)[4], CUtensorMapSwizzle swizzle,
                               CUtensorMapL2promotion promotion) {
  int64_t st[3] = {s1, s2, s3};
  if (!tma_layout_ok(base, dims, st)) return false;
  return encode_tma_map_4d(out, CU_TENSOR_MAP_DATA_TYPE_UINT8, base, dims, st, box, promotion, swizzle);
}

// A 4-D map of the backward's fp32 dq accumulator for TMA reduce-adds: dims (innermost first)
// head_dim, h_q, rows, batch with byte strides st[0..2], boxes of 32 columns (128 bytes, the
// 128-byte swizzle's width) x 1 head x box_rows rows. Elements outside the tensor are not
// written. False as make_tma_map_4d.
// int32 = true: the same map over int32 elements (the deterministic mode's fixed-point dQ sums,
// whose reduce-adds are then integer adds).
inline bool make_tma_map_f32_reduce(TmaDesc* out, void* base, const int64_t (&dims)[4], const int64_t (&st_in)[3],
                                    int box_rows, bool int32 = false) {
  int64_t st[3] = {st_in[0], st_in[1], st_in[2]};
  if (dims[0] % 32 != 0 || !tma_layout_ok(base, dims, st)) return false;
  const cuuint32_t box[4] = {32, 1, cuuint32_t(box_rows), 1};
  return encode_tma_map_4d(out, int32 ? CU_TENSOR_MAP_DATA_TYPE_INT32 : CU_TENSOR_MAP_DATA_TYPE_FLOAT32, base, dims,
                           st, box, CU_TENSOR_MAP_L2_PROMOTION_NONE);
}

}  // namespace flashkit::launch_util
