#!/usr/bin/env python3
"""Checks in the SASS that the Hopper forward's intra-warpgroup overlap survived ptxas (no
GPU needed): in the TMA kernel's and the persistent kernel's main loops all of the softmax's exp2s (MUFU.EX2) must sit
between the wait for Q K^T (WARPGROUP.DEPBAR.LE gsb0, 0x1) and the wait for P V (..., 0x0).
ptxas hoisted the second wait above (part of) the softmax without a word until a block
boundary was put before it (docs/kernels/fwd_sm90.md): without it 33 of 66 remained.

    python3 scripts/dev/sass_overlap_check.py [--build build/dev2] [--dims 96 128 192 256]

Exit 0 when every head dim has the exp2s in place, 1 otherwise.
"""
import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def overlap_exps(sass: str) -> list:
    """EX2 counts between each 'DEPBAR.LE gsb0, 0x1' and the next 'DEPBAR.LE gsb0, 0x0'."""
    counts, inside, n = [], False, 0
    for line in sass.splitlines():
        if "WARPGROUP.DEPBAR.LE gsb0, 0x1" in line:
            inside, n = True, 0
        elif "WARPGROUP.DEPBAR.LE gsb0, 0x0" in line and inside:
            counts.append(n)
            inside = False
        elif inside and "MUFU.EX2" in line:
            n += 1
    return counts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build/dev2", help="a configured build dir (generated headers)")
    ap.add_argument("--dims", nargs="+", type=int, default=[96, 128, 192, 256])
    args = ap.parse_args()
    ok = True
    for d in args.dims:
        src = REPO / "src" / "kernels" / "fwd_sm90" / "inst" / f"fwd_sm90_bf16_hd{d}.cu"
        with tempfile.TemporaryDirectory() as tmp:
            cubin = Path(tmp) / "k.cubin"
            subprocess.run(["nvcc", "-std=c++17", "-O3", "-gencode=arch=compute_90a,code=sm_90a",
                            "--expt-relaxed-constexpr", f"-I{REPO}/include", f"-I{REPO}/src",
                            f"-I{Path(args.build).resolve()}/generated", "-cubin", str(src), "-o", str(cubin)],
                           check=True, capture_output=True)
            sass = subprocess.run(["cuobjdump", "-sass", str(cubin)], check=True, capture_output=True,
                                  text=True).stdout
        # the kTma kernel (template arguments <..., false (kMods), true (kTma)>) and the
        # persistent kernel (kernel_persistent.cuh)
        funcs = re.split(r"\n\s*Function : ", sass)
        for name, key in (("tma", "Lb0ELb1E"), ("persistent", "fwd_kernel_persistent")):
            found = [f for f in funcs if key in f.split("\n", 1)[0]]
            counts = overlap_exps(found[0]) if found else []
            # all of the tile's exp2s: one per score a thread holds (kBlockN / 2: 128-key tiles
            # at D <= 128, 64-key tiles above) + the 2 rescale factors; a partial hoist leaves fewer
            need = (128 if d <= 128 else 64) // 2
            good = bool(counts) and max(counts) >= need
            ok &= good
            print(f"{'ok  ' if good else 'FAIL'} D{d} {name}: MUFU.EX2 between the two waits: "
                  f"{counts or 'no such waits'} (need >= {need})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
