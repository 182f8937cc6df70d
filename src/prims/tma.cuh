// Hopper tensor-memory-accelerator copies (cp.async.bulk.tensor): a box of a tensor
// described by a CUtensorMap, global -> shared, completing as transactions on an mbarrier.
// PTX ISA: "Data Movement and Conversion Instructions: cp.async.bulk.tensor".
#pragma once

#include <cstdint>

namespace flashkit::prims {

// 4-D tile load of the box at coordinates (c0 innermost .. c3) into shared `dst`, with an
// L2 cache-policy hint. Coordinates outside the tensor are filled with zeros (and still
// count as delivered bytes). `tmap` is the generic address of a __grid_constant__ map.
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const void* tmap, int c0, int c1, int c2, int c3,
                                            uint32_t bar, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%2, %3, %4, %5}], [%6], %7;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(tmap)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar), "l"(policy)
      : "memory");
}

// The same, issued only where `pred` is set: a predicated instruction, not a branch (a
// thread-divergent branch among in-flight wgmmas makes ptxas serialize them, C7520).
__device__ __forceinline__ void tma_load_4d_if(bool pred, uint32_t dst, const void* tmap, int c0, int c1, int c2,
                                               int c3, uint32_t bar, uint64_t policy) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %8, 0;\n"
      "@p cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%2, %3, %4, %5}], [%6], %7;\n}\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(tmap)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar), "l"(policy),
      "r"(int(pred))
      : "memory");
}

// The same without an L2 hint (data that other CTAs read again: the forward's K and V).
__device__ __forceinline__ void tma_load_4d_nohint_if(bool pred, uint32_t dst, const void* tmap, int c0, int c1,
                                                      int c2, int c3, uint32_t bar) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %7, 0;\n"
      "@p cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5}], [%6];\n}\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(tmap)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar), "r"(int(pred))
      : "memory");
}

// The same box multicast to the CTAs of this cluster set in `cta_mask` (bit r: rank r): it lands at `dst` (the
// same shared offset) in each of them and completes its bytes on the mbarrier at `bar`'s offset in each. Every
// destination CTA expects the bytes on its own barrier (mbarrier_arrive_expect_tx) and must not exit before they
// land.
__device__ __forceinline__ void tma_load_4d_multicast(uint32_t dst, const void* tmap, int c0, int c1, int c2, int c3,
                                                      uint32_t bar, uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3, %4, %5}], [%6], %7;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(tmap)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar), "h"(cta_mask)
      : "memory");
}

// 4-D tile store of shared `src` (the map's swizzled box layout) to the box at (c0..c3):
// the parts of the box outside the tensor are not written. Tracked as a bulk async-group
// of the issuing thread (bulk_commit_group / bulk_wait_group*). The writers of `src` make
// their generic-proxy stores visible first (fence_proxy_async_smem, then a barrier).
__device__ __forceinline__ void tma_store_4d(const void* tmap, uint32_t src, int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(
                   reinterpret_cast<uint64_t>(tmap)),
               "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
}
// 4-D tile reduce-add of shared `src` (the map's swizzled box layout) into the box at
// (c0..c3) in global memory (element type from the map; fp32 here): each element is added
// atomically, the parts outside the tensor are skipped. A bulk async-group operation like
// tma_store_4d (bulk_commit_group / bulk_wait_group*).
__device__ __forceinline__ void tma_reduce_add_4d(const void* tmap, uint32_t src, int c0, int c1, int c2, int c3) {
  asm volatile("cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(
                   reinterpret_cast<uint64_t>(tmap)),
               "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
}
// Orders this thread's completed async-proxy global accesses (bulk reduce-adds it waited for)
// before its later generic-proxy ones (the release of a turn counter).
__device__ __forceinline__ void fence_proxy_async_global() {
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
}
// Non-tensor bulk copy of `bytes` (a multiple of 16; both addresses 16-byte aligned) from
// shared to global memory, in this thread's current bulk group.
__device__ __forceinline__ void bulk_store(void* gdst, uint32_t src, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(gdst), "r"(src), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_commit_group() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Until at most N of this thread's bulk groups are pending their reads of shared memory
// (the source may be overwritten then) ...
template <int N>
__device__ __forceinline__ void bulk_wait_group_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
// ... or pending at all (the writes are done).
template <int N>
__device__ __forceinline__ void bulk_wait_group() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void tma_prefetch_desc(const void* tmap) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(tmap)) : "memory");
}

}  // namespace flashkit::prims
