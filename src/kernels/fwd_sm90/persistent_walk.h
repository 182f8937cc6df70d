// The persistent forward's walk (kernel_persistent.cuh), in a header that host code can include: the launcher's walk
// parameters (set_persistent_walk) and the C++ test of the kernel's own unit and tile decode
// (tests/cpp/test_fwd_sched.cpp: every (batch, head, row block) exactly once, for the snake, the rotated and the
// clusters' walks).
#pragma once

#include <cstdint>

#include "kernels/attention_params.h"

#ifdef __CUDACC__
#define FLASHKIT_WALK_HD __host__ __device__ __forceinline__
#else
#define FLASHKIT_WALK_HD inline
#endif

namespace flashkit::fwd_sm90 {

// Unit `round` of this CTA's walk (snake order); false past the end. A unit is a pair of
// row blocks of one (batch, head): m and num_m_blocks - 1 - m, the heavy one first. Under a
// causal mask every pair costs the same (num_m_blocks + 1 key tiles), so the static walk
// stays balanced where the walk over single tiles was not (scripts/dev/fwd_sched_model.py:
// 1.19x the ideal makespan at causal 16k, 1.08x at 1k; pairs 1.03x, the quantization of the
// units over the CTAs); the light block's keys are a prefix of the heavy one's (L2).
//
// p.walk_rotate (launch_persistent: a causal call in groups of one pair whose units per pair, U,
// divide the grid, over more than one round): round r gives CTA c the unit r * gridDim.x + c (no
// snake), and persistent_coords rotates the pair's unit index by r. Every pair's U units then lie
// in one round, so the rotation permutes them within the pair (same tiles, same bits), and a CTA
// takes unit kind (c + r) mod U in round r instead of the same kind in every round: where the
// kinds differ in cost (D 64's 192-row blocks over 128-key tiles: at causal 2k five pairs of 20-21
// key tiles and a lone middle block of 10) the CTAs' loads even out
// (scripts/dev/models/fwd_walk_order_model.py: 1.133 -> 1.031 of the ideal makespan at 2k, 1.058 ->
// 1.031 at 1k; never worse where the launcher sets it).
//
// g: the walk's CTAs (kCluster: its clusters), c: this one's index among them (fwd_kernel_persistent's kCluster: CTAs
// 2k and 2k + 1 form cluster k, which takes the units as one CTA would, CTA rank r the unit's half r).
FLASHKIT_WALK_HD bool persistent_tile_at(const FwdParams& p, int round, int g, int c, int& t) {
  t = round * g + ((round & 1) && !p.walk_rotate ? g - 1 - c : c);
  return round * g < p.num_tiles;  // (t itself may be past the end in the last round)
}

// Half `half` of unit u as a tile of the grid order (attn::BlockInfo's (x, m_block, z)),
// over the real (batch, head) pairs only: the last group of pairs may be smaller than
// p.sched_group, and its units are numbered as such (the grid's empty slots would leave the
// CTAs that land on them idle). False for the missing half of the middle block (odd
// num_m_blocks).
FLASHKIT_WALK_HD bool persistent_coords(const FwdParams& p, int u, int half, int round, int& x, int& m_block,
                                         int& z) {
  // (the divisions are multiply-highs with divisors from the launcher: prims/fastdiv.h)
  z = p.div_group_units.div(u);
  int rest = u - z * p.div_group_units.d;
  if (p.walk_rotate) {  // (groups of one pair: rest is the unit's index in its pair)
    int turns, shift;
    p.div_group_units.divmod(round, turns, shift);
    rest += shift;
    if (rest >= p.div_group_units.d) rest -= p.div_group_units.d;
  }
  // every group has sched_group pairs but the last (z * sched_group + its size = B x H)
  const prims::FastDiv& gdiv = (z + 1) * p.sched_group > p.batch * p.h_q ? p.div_last_group : p.div_group;
  int pi;
  gdiv.divmod(rest, pi, x);
  const int hi = p.num_m_blocks - 1 - pi;
  m_block = half == 0 ? hi : pi;
  return half == 0 || pi < hi;
}

// The walk's parameters (launch_persistent): units = (batch, head) pairs x pairs of row blocks, and the divisors of
// persistent_coords's decode. False when the units overflow an int.
inline bool set_persistent_walk(FwdParams& p) {
  const int64_t tiles = int64_t(p.batch) * p.h_q * ((p.num_m_blocks + 1) / 2);
  if (tiles > INT32_MAX) return false;
  p.num_tiles = int(tiles);
  const int64_t bh = int64_t(p.batch) * p.h_q;
  const int64_t last = bh - (bh - 1) / p.sched_group * p.sched_group;  // in [1, sched_group]
  p.div_group_units = prims::FastDiv::make(p.sched_group * ((p.num_m_blocks + 1) / 2));
  p.div_group = prims::FastDiv::make(p.sched_group);
  p.div_last_group = prims::FastDiv::make(int(last));
  return true;
}

}  // namespace flashkit::fwd_sm90

#undef FLASHKIT_WALK_HD
