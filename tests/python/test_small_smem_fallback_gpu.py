"""The small-shared-memory tile configuration (64x32 tiles, 4 warps).

The launcher picks it on GPUs whose per-block shared memory can't hold the main
configuration (sm_86/89: 99 KB, against 102/135 KB at d192/d256). FLASHKIT_FWD_SMALL_TILES=1
forces it on any GPU that runs the portable family: on Hopper with FLASHKIT_FWD_PORTABLE=1 too
(the switch is read by the portable launcher only; without it a Hopper run never reached the
small tiles, so until 2026-11-29 this test could not fail there). The variables are read once
per process, so the checks run in a subprocess: scripts/sanitize_small.py compares every case
against the reference and exits non-zero on any mismatch.
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
    env = dict(os.environ, FLASHKIT_FWD_SMALL_TILES="1", FLASHKIT_FWD_PORTABLE="1")
    # (every compiled variant on the portable family, where the switch is read)
    probe = ("import flashkit; v = flashkit.compiled_fwd_variants(); "
             "f = {flashkit.fwd_kernel_family(*x.split('/')[:1], int(x.split('/')[1])) for x in v}; "
             "print(sorted(f))")
    r = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "['sm80']", r.stdout
    cmd = [sys.executable, str(REPO / "scripts" / "sanitize_small.py"),
           "--dims", "64", "96", "128", "192", "256"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"small-tile path failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    assert "cases passed" in r.stdout, r.stdout[-2000:]
