"""The host-time loop the host probes of scripts/dev share (host_probe.py, decode_host_probe.py,
host_pieces_probe.py)."""
import time

import torch


def host_us_per_call(fn, n=200, warmup=10):
    """Host microseconds per call of fn: n back-to-back calls between perf_counter reads, no sync
    inside (the GPU work of a short call finishes faster than the host enqueues the next one)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / n * 1e6


def emit(lines, path):
    """Prints the probe's report and writes it to `path` (the probes' common ending)."""
    txt = "\n".join(lines)
    print(txt)
    with open(path, "w") as f:
        f.write(txt)
