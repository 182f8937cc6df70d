"""The small-shared-memory tile configuration (64x32 tiles, 4 warps).

The launcher picks it on GPUs whose per-block shared memory can't hold the main
configuration (sm_86/89: 99 KB, against 102/135 KB at d192/d256). FLASHKIT_FWD_SMALL_TILES=1
forces it on any GPU that runs the portable family: on Hopper with FLASHKIT_FWD_PORTABLE=1 too
(the switch is read by the portable launcher only; without it a Hopper run never reached the
small tiles, so until 2026-11-29 this test could not fail there). The variables are read once
per process, so the checks run in subprocesses (conftest's portable_sanitize_small):
scripts/sanitize_small.py compares every case against the reference and exits non-zero on any
mismatch.
"""

from __future__ import annotations

import pytest


@pytest.mark.gpu
def test_small_smem_tiles_match_reference(portable_sanitize_small):
    portable_sanitize_small({"FLASHKIT_FWD_SMALL_TILES": "1"})
