"""The small-shared-memory tile configuration (64x32 tiles, 4 warps).

The launcher picks it on GPUs whose per-block shared memory can't hold the main
configuration (sm_86/89: 99 KB, against 102/135 KB at d192/d256). FLASHKIT_FWD_SMALL_TILES=1
forces it on any GPU. The variable is read once per process, so the checks run in a
subprocess: scripts/sanitize_small.py compares every case against the reference and exits
non-zero on any mismatch.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.gpu
def test_small_smem_tiles_match_reference():
    env = dict(os.environ, FLASHKIT_FWD_SMALL_TILES="1")
    cmd = [sys.executable, str(REPO / "scripts" / "sanitize_small.py"),
           "--dims", "64", "96", "128", "192", "256"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"small-tile path failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    assert "cases passed" in r.stdout, r.stdout[-2000:]
