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

}  // namespace detail
}  // namespace flashkit
