"""CPU test of the simulated serving benchmark ``python -m flashkit.bench.kvcache_sim``
(small sizes): it runs, writes the SPEC §4 CSV rows the results reader accepts, and its
exit status follows the bars."""

import subprocess
import sys

SMALL = ["--requests", "60", "--sampling-requests", "12", "--num-blocks", "2048",
         "--max-batch", "32", "--user-prompt", "16:256", "--output", "16:128",
         "--sampling-prompt", "256:512"]


def test_kvcache_sim_writes_spec_rows(flashkit_ext, tmp_path):
    from flashkit.bench import kvcache_sim, report

    r = subprocess.run([sys.executable, "-m", "flashkit.bench.kvcache_sim", *SMALL,
                        "--out-dir", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode in (0, 1), r.stderr
    files = list(tmp_path.glob("kvcache-sim-*.csv"))
    assert len(files) == 1
    header = files[0].read_text().splitlines()[0]
    assert header == ",".join(report.CSV_COLUMNS)
    rows = report.read_csv(files[0])
    assert [x["mode"] for x in rows] == ["waste", "prefix_hit_rate", "memory_ratio"]
    for x in rows:
        assert (x["op"], x["impl"], x["unit"], x["gpu"], x["page_size"]) == (
            "kvcache_sim", "flashkit", "ratio", "cpu", 16)
        assert 0.0 <= x["value"] <= 1.0
    by = {x["mode"]: x["value"] for x in rows}
    assert by["prefix_hit_rate"] > 0  # the shared system prompt is reused
    met = by["waste"] < kvcache_sim.WASTE_BAR and by["memory_ratio"] <= kvcache_sim.MEMORY_RATIO_BAR
    assert r.returncode == (0 if met else 1), r.stdout
    assert ("bars: met" in r.stdout) == met


def test_kvcache_sim_no_csv(flashkit_ext, tmp_path):
    r = subprocess.run([sys.executable, "-m", "flashkit.bench.kvcache_sim", *SMALL, "--no-csv",
                        "--out-dir", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode in (0, 1), r.stderr
    assert "internal waste" in r.stdout and not list(tmp_path.iterdir())
