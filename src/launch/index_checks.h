// Launchers of the device-side index checks (src/kernels/checks/): find the first
// violation of an index array's rules on `stream` and wait for the answer. Callers (see
// src/api/index_checks.h) make the data's device current and word the messages.
#pragma once

#include "kernels/checks/index_check_types.h"

typedef struct CUstream_st* cudaStream_t;

namespace flashkit::checks {

// Run on `stream`, then synchronize it; *out gets the first violation (position -1 when
// none). Return a cudaError_t as int (0 = success). Not usable during graph capture.
int find_violation(const CuSeqlensIndex& index, cudaStream_t stream, IndexViolation* out);
int find_violation(const BlockTableIndex& index, cudaStream_t stream, IndexViolation* out);

}  // namespace flashkit::checks
