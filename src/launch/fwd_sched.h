// How many (batch, head) pairs form one scheduling group of the forward's tile order
// (FwdParams::sched_group; attn::BlockInfo and kernel_persistent.cuh's walk decode it). Host-only
// and header-only, so that the CPU tests check the rule (tests/cpp/test_fwd_sched.cpp).
//
// The grid orders tiles by group, then by row block (heaviest first), then by pair within the
// group: a group of g pairs puts g pairs' row blocks of one level next to each other. With
// the hardware block scheduler (the non-persistent kernels) that spreads a causal call's
// heavy row blocks over many heads, so they start first (+6-27% over head-major order on the
// causal sweeps when it came, 2026-11-21). Its cost is the L2: a pair's row blocks are g tiles
// apart, so every pair of the group keeps its K/V in flight together; the rule sizes g so that
// a group's K and V fit in the L2.
//
// The persistent kernel walks units of two row blocks of one pair (m, num_m - 1 - m) that cost
// the same under a causal mask, so its balance does not need the spread, and the whole L2 was
// too much for its K/V: at D 128, S 512 causal (groups of 171 pairs, 44 MB of K/V between the two
// units of a pair) it read 333 MB from DRAM against cuDNN's 259 MB, the non-causal call 261 MB
// (ncu, H100, 2026-11-26, fwd_sm90-logs/ncu-vs-cudnn-h100-2026-11-26.txt). Its default is
// head-major order: groups of one pair, the units of a pair side by side.
//
// FLASHKIT_FWD_SCHED_GROUP (read once by the launchers; A/B runs) overrides causal calls of both
// kernels: "l2" = the L2 rule for both (the persistent kernel's order before 2026-11-28), "l2/N" =
// the same rule with 1/N of the L2, a number n >= 1 = groups of n pairs. Anything else: the
// default.
#pragma once

#include <algorithm>
#include <cstdint>

namespace flashkit::launch_util {

// A parsed FLASHKIT_FWD_SCHED_GROUP: kind 0 = default, 1 = the L2 rule with l2_div, 2 = fixed n.
struct FwdSchedOverride {
  int kind = 0;
  int64_t value = 0;
};

inline FwdSchedOverride parse_fwd_sched_override(const char* env) {
  FwdSchedOverride o;
  if (env == nullptr || *env == '\0') return o;
  auto number = [](const char* s, int64_t* out) {
    int64_t v = 0;
    if (*s == '\0') return false;
    for (; *s != '\0'; ++s) {
      if (*s < '0' || *s > '9' || v > 1000000000) return false;
      v = v * 10 + (*s - '0');
    }
    *out = v;
    return v >= 1;
  };
  if (env[0] == 'l' && env[1] == '2') {
    int64_t div = 1;
    if (env[2] == '\0' || (env[2] == '/' && number(env + 3, &div))) {
      o.kind = 1;
      o.value = div;
    }
    return o;
  }
  int64_t n = 0;
  if (number(env, &n)) {
    o.kind = 2;
    o.value = n;
  }
  return o;
}

// Pairs per group for a call with num_bh (batch x heads) pairs whose K and V take kv_bytes each
// pair (seqlen_k x head_dim x element bytes x 2), on a GPU with l2_bytes of L2. Non-causal calls:
// one pair per group (every tile costs the same; head-major order keeps the row blocks that share
// a K/V in flight together). Always >= 1 and <= max(1, num_bh); the caller widens it for grid.z.
inline int64_t fwd_sched_group(int64_t num_bh, bool causal, int64_t kv_bytes, int64_t l2_bytes, bool persistent,
                               FwdSchedOverride ovr = {}) {
  if (num_bh <= 1 || !causal) return 1;
  auto l2_rule = [&](int64_t budget) {
    int64_t group = kv_bytes > 0 ? budget / kv_bytes : num_bh;
    group = std::max<int64_t>(1, std::min(group, num_bh));
    // groups of equal size: a small last group would put its heaviest row blocks at the very end
    const int64_t groups = (num_bh + group - 1) / group;
    return (num_bh + groups - 1) / groups;
  };
  if (ovr.kind == 1) return l2_rule(l2_bytes / std::max<int64_t>(1, ovr.value));
  if (ovr.kind == 2) return std::min(ovr.value, num_bh);
  return persistent ? 1 : l2_rule(l2_bytes);
}

// Whether the persistent kernel's walk rotates each pair's units by the round (FwdParams::walk_rotate,
// kernel_persistent.cuh): a causal call in groups of one pair (sched_group 1) whose units per pair
// (pairs of row blocks, units_per_pair) divide the grid (ctas), so that every pair's units fall in one
// round, with more units than CTAs (a single round has nothing to even out). Where the units of a
// pair differ in cost (D 64's 192-row blocks), a CTA then takes a different kind of unit each round;
// where they cost the same (128-row blocks over 128-key tiles) the loads are the same in both walks.
// FLASHKIT_FWD_WALK_ROTATE=0 (read by the launcher) turns it off for A/B runs.
inline bool fwd_walk_rotate(bool causal, int64_t sched_group, int64_t units_per_pair, int64_t units, int64_t ctas) {
  return causal && sched_group == 1 && units_per_pair >= 2 && ctas >= 1 && ctas % units_per_pair == 0 &&
         units > ctas;
}

}  // namespace flashkit::launch_util
