#!/usr/bin/env python3
"""Registers and spills of every kernel instantiation, from ptxas -v (no GPU needed).

    python3 scripts/dev/ptxas_report.py [--build build/dev2] [--filter fwd_sm90] [-j 2] [-D MACRO=VALUE ...]

Compiles each src/kernels/*/inst/*.cu for its family's architecture (sm_90a for *_sm90*
files, sm_80 otherwise) with the library's flags and prints one line per kernel: file,
kernel (demangled template arguments shortened), registers, spill stores/loads (bytes).
Needs a configured build directory for the generated headers (--build).
"""
import argparse
import concurrent.futures as cf
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_\w+)'")
SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
USED = re.compile(r"Used (\d+) registers")


def demangle(names):
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True)
        return out.stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return names


def short(name):
    name = re.sub(r"flashkit::|\(flashkit::\w+Params\)|__nv_bfloat16|__half", lambda m: {"__nv_bfloat16": "bf16", "__half": "fp16"}.get(m.group(0), ""), name)
    return name.replace("void ", "")


def compile_one(path, build, defines=()):
    arch = "90a" if "_sm90" in path.name else "80"
    cmd = ["nvcc", "-std=c++17", "-O3", f"-gencode=arch=compute_{arch},code=sm_{arch}", "--expt-relaxed-constexpr",
           "-Xptxas=-v", f"-I{REPO}/include", f"-I{REPO}/src", f"-I{build}/generated", *(f"-D{d}" for d in defines),
           "-c", str(path), "-o", "/dev/null"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    rows, cur = [], None
    for line in (r.stdout + r.stderr).splitlines():
        if "warning" in line or "serialized" in line:  # C7510/C7511/C7520: wgmma serialized
            print(f"{path.name}: {line.strip()}", file=sys.stderr)
        m = ENTRY.search(line)
        if m:
            cur = [m.group(1), None, None, None]
            rows.append(cur)
            continue
        if cur is None:
            continue
        m = SPILL.search(line)
        if m and cur[2] is None:
            cur[2], cur[3] = int(m.group(1)), int(m.group(2))
        m = USED.search(line)
        if m and cur[1] is None:
            cur[1] = int(m.group(1))
    return path, r.returncode, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=str(REPO / "build" / "dev2"))
    ap.add_argument("--filter", default="")
    ap.add_argument("-j", type=int, default=2)
    ap.add_argument("-D", dest="defines", action="append", default=[], metavar="MACRO=VALUE",
                    help="a tuning switch for every file (e.g. FLASHKIT_FWD_RS_Q=1)")
    a = ap.parse_args()
    files = sorted(p for p in (REPO / "src" / "kernels").glob("*/inst/*.cu") if a.filter in str(p))
    status = 0
    with cf.ThreadPoolExecutor(a.j) as ex:
        results = list(ex.map(lambda p: compile_one(p, a.build, a.defines), files))
    print(f"{'file':28s} {'regs':>4s} {'spill st/ld':>11s}  kernel")
    for path, rc, rows in results:
        if rc != 0:
            print(f"{path.name:28s} compile failed")
            status = 1
            continue
        names = demangle([r[0] for r in rows])
        for (mangled, regs, st, ld), name in zip(rows, names):
            if "kernel" not in name:
                continue
            print(f"{path.stem:28s} {regs if regs is not None else '?':>4} {f'{st}/{ld}':>11s}  {short(name)}")
    return status


if __name__ == "__main__":
    sys.exit(main())
