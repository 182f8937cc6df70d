"""SM clock and power of a GPU call run back to back (shared by decode_clocks.py, fwd_clocks.py, mla_clocks.py).

sustained(step, seconds): `step` back to back for `seconds` (events over 20 calls at a time) while nvidia-smi
samples every 50 ms; returns the median time per call (us) and the median SM clock (MHz), power (W), the maximum
temperature (C) and the throttle reasons seen, all over the middle half of the run, and the number of calls.
"""
from __future__ import annotations

import statistics
import subprocess
import tempfile
import time


def sustained(step, seconds):
    import torch

    log = tempfile.NamedTemporaryFile("w+", suffix=".csv")
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,"
                            "clocks_throttle_reasons.active", "--format=csv,noheader,nounits", "-lms", "50"],
                           stdout=log, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    t_end = time.time() + seconds
    times = []
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    while time.time() < t_end:
        e0.record()
        for _ in range(20):
            step()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) * 1000 / 20)
    smi.terminate()
    smi.wait()
    log.seek(0)
    rows = [r.split(", ") for r in log.read().strip().splitlines() if r.count(",") >= 4]
    mid = rows[len(rows) // 4: max(len(rows) // 4 + 1, 3 * len(rows) // 4)]

    def num(i):
        out = []
        for r in mid:
            try:
                out.append(float(r[i]))
            except ValueError:
                pass
        return out

    clk, pwr, tmp = num(1), num(2), num(3)
    reasons = sorted({r[4].strip() for r in mid})
    t_mid = times[len(times) // 4: max(len(times) // 4 + 1, 3 * len(times) // 4)]
    nan = float("nan")
    return (statistics.median(t_mid), statistics.median(clk) if clk else nan,
            statistics.median(pwr) if pwr else nan, max(tmp) if tmp else nan, reasons, 20 * len(times))
