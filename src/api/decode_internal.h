// Internal pieces of the paged-decode API that the CPU tests use directly (not installed; include
// with src/ on the include path).
#pragma once

#include <cstdint>

#include "export.h"
#include "flashkit/decode.h"

namespace flashkit {
namespace detail {

// What a plan with these sizes may write, for `target_ctas` split CTAs (decode_workspace_size
// takes that from the device): the head-row groups, the valid rows of a group, the shortest splits
// the plan uses, and the workspace's bounds on items, partial results and combine entries. The plan kernel refuses
// (kDecodeErrPlan) a plan that would exceed them; tests/cpp/test_decode_plan.cpp checks that no
// batch makes it.
struct DecodePlanLimits {
  int64_t hr = 0;        // KV heads x row groups
  int64_t rows_max = 0;  // valid rows of a head-row group: min(item rows, H_q / H_kv x s_q)
  int min_chunk = 0, min_chunk_tiny = 0;  // DecodeParams' (the env overrides applied)
  int fused_max_splits = 0;               // DecodeParams' (FLASHKIT_DECODE_FUSED_MAX_SPLITS applied)
  int split_cap = 0;                      // DecodeParams' (FLASHKIT_DECODE_SPLIT_CAP applied)
  int64_t h_kv = 0;
  int64_t head_dim_v = 0;
  int64_t max_items = 0, max_partials = 0, max_combines = 0;
};
FLASHKIT_EXPORT Status decode_plan_limits(const DecodePlanArgs& args, int target_ctas, DecodePlanLimits* out);

// DecodeParams::self_plan for a call (api/decode.cpp; kernels/decode/self_plan.cuh): 1 where the split
// CTAs compute their own items (the one-call form on a device of compute capability >= 9 with at most
// kSelfPlanMaxBatch sequences), 2 for the same with FLASHKIT_DECODE_SELF_PLAN=verify, 0 otherwise or
// with FLASHKIT_DECODE_SELF_PLAN=0. The environment is read at every call.
FLASHKIT_EXPORT int decode_self_plan_mode(bool plan_first, int cc_major, int64_t batch);

}  // namespace detail
}  // namespace flashkit
