"""CPU-only tests of the decode side of flashkit.bench (``--op decode``): the sweep and its
default subset, the byte / bandwidth model, CSV rows, the ratio table and bar checks, the
plot, the FlashInfer peer's library lookup, the rotating timer (with a fake torch), and the
command line (dry-run, no-GPU exit, --op routing). No GPU, torch or extension needed.
"""

import csv
import subprocess
import sys
import types

import pytest

from _bench_loader import REPO, SPEC_COLUMNS, load_bench


bench = load_bench("_flashkit_bench_decode_under_test",
                   ("sweeps", "timing", "report", "cli", "decode_sweeps", "decode_report", "decode_cli",
                    "decode_impls", "fi_peer"))
ds, dr, dcli, di, report, fi_peer, timing = (bench.decode_sweeps, bench.decode_report,
                                             bench.decode_cli, bench.decode_impls, bench.report,
                                             bench.fi_peer, bench.timing)


def _run(args, **kw):
    env = {"PYTHONPATH": str(REPO / "python"), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "flashkit.bench", *args], cwd=kw.get("cwd", REPO),
                          capture_output=True, text=True, env=env, timeout=120)


# --------------------------------------------------------------------------- sweep


def test_default_subset_covers_the_bar():
    sel = ds.build_selection()
    assert sel.mode == "default"
    shapes = {(s.B, s.H_q, s.H_kv, s.S_k, s.s_q): s for s in sel.shapes}
    skipped = {(s.B, s.H_q, s.H_kv, s.S_k, s.s_q) for s, _ in sel.skipped}
    # (a) every B x ratio x S_k of the main grid at page 16, s_q 1, or skipped by the budget
    for B in (1, 16, 64, 128):
        for hq, hkv in ((32, 8), (64, 8), (32, 32)):
            for S in (1024, 4096, 8192, 16384, 32768, 65536):
                key = (B, hq, hkv, S, 1)
                assert (key in shapes) != (key in skipped), key
                if key in shapes:
                    assert 16 in shapes[key].page_sizes
                    assert shapes[key].kv_bytes <= 20e9
                else:
                    assert ds.kv_bytes(B, hkv, S) > 20e9
    assert skipped == {(128, 32, 8, 65536, 1), (128, 64, 8, 65536, 1), (64, 32, 32, 32768, 1),
                       (64, 32, 32, 65536, 1), (128, 32, 32, 16384, 1), (128, 32, 32, 32768, 1),
                       (128, 32, 32, 65536, 1)}
    # (b) page sizes 1/16/64/256 at the page points
    for B, hq, hkv, S in ds.PAGE_POINTS:
        assert shapes[(B, hq, hkv, S, 1)].page_sizes == (1, 16, 64, 256)
    # (c) s_q 1/2/4 at the s_q points, page 16
    for B, hq, hkv, S in ds.SQ_POINTS:
        for sq in (1, 2, 4):
            assert 16 in shapes[(B, hq, hkv, S, sq)].page_sizes
    # (d) B=1 at 64k and B=64 at 8k for every ratio
    for hq, hkv in ((32, 8), (64, 8), (32, 32)):
        assert (1, hq, hkv, 65536, 1) in shapes and (64, hq, hkv, 8192, 1) in shapes
    # nothing at s_q > 1 or page != 16 beyond the points
    assert {s.s_q for s in sel.shapes} == {1, 2, 4}
    assert sum(len(s.page_sizes) for s in sel.shapes) == len(sel.shapes) + 3 * len(ds.PAGE_POINTS)
    # fits a run of minutes
    assert ds.rough_seconds(sel.shapes, 4, 3) < 8 * 60


def test_quick_grid_and_full_selections():
    q = ds.build_selection(quick=True)
    assert q.mode == "quick" and 3 <= len(q.shapes) <= 10
    assert any(s.page_sizes == (1, 16, 64, 256) for s in q.shapes)
    assert {s.s_q for s in q.shapes} == {1, 2, 4}
    g = ds.build_selection(batches=[64], page_sizes=[1, 16])
    assert g.mode == "grid"
    assert {s.B for s in g.shapes} == {64}
    assert all(s.page_sizes == (1, 16) and s.s_q == 1 for s in g.shapes)
    assert {(s.H_q, s.H_kv) for s in g.shapes} | {(s.H_q, s.H_kv) for s, _ in g.skipped} == \
        set(ds.RATIOS)
    g2 = ds.build_selection(sqs=[2], ratios=[(32, 8)], seqlens=[1000])
    assert [(s.B, s.S_k, s.s_q, s.page_sizes) for s in g2.shapes] == \
        [(1, 1000, 2, (16,)), (16, 1000, 2, (16,)), (64, 1000, 2, (16,)), (128, 1000, 2, (16,))]
    f = ds.build_selection(full=True, kv_budget_gb=1e9)
    assert f.mode == "full" and not f.skipped
    assert len(f.shapes) == 4 * 3 * 7 * 3
    assert all(s.page_sizes == (1, 16, 64, 256) for s in f.shapes)
    small = ds.build_selection(kv_budget_gb=0.5)
    assert all(s.kv_bytes <= 0.5e9 for s in small.shapes) and small.skipped


def test_bytes_and_bandwidth_model():
    # K and V of the valid tokens + Q + O, bf16
    assert ds.kv_bytes(64, 8, 8192) == 2 * 64 * 8192 * 8 * 128 * 2
    b = ds.decode_bytes(64, 32, 8, 8192, 1)
    assert b == 2 * 64 * 8192 * 8 * 128 * 2 + 2 * 64 * 1 * 32 * 128 * 2
    assert ds.decode_bytes(64, 32, 8, 8192, 4) - b == 2 * 64 * 3 * 32 * 128 * 2
    s = ds.DecodeShape(64, 32, 8, 8192, 1)
    assert s.bytes == b and s.kv_bytes == ds.kv_bytes(64, 8, 8192)
    assert ds.gbps(4e9, 1.0) == pytest.approx(4000.0)
    # 256 MB bar threshold: B=1, 32/8, 64k is exactly 256 MiB of KV
    assert ds.kv_bytes(1, 8, 65536) == ds.BAR_MIN_KV_BYTES
    assert ds.count_measurements([s, ds.DecodeShape(1, 32, 8, 1024, 1, (1, 16))], 4, 3) == \
        (4 + 3) + (8 + 3)


def test_parsers():
    assert ds.parse_ratio("32/8") == (32, 8) and ds.parse_ratio("64:8") == (64, 8)
    for bad in ("32", "8/32", "0/8", "x"):
        with pytest.raises(ValueError):
            ds.parse_ratio(bad)
    assert ds.parse_positive_ints(["1", "16"], "x") == [1, 16]
    with pytest.raises(ValueError):
        ds.parse_positive_ints(["0"], "x")


# --------------------------------------------------------------------------- CSV / report


def _rows(spec, gpu="NVIDIA H200"):
    """spec: [(impl, B, H_q, H_kv, S_k, s_q, page, GB/s)] -> rows (GB/s and us), as the runner
    writes them."""
    out = []
    for impl, B, hq, hkv, S, sq, page, gbs in spec:
        us = ds.decode_bytes(B, hq, hkv, S, sq) / (gbs * 1e9) * 1e6
        for unit, v in (("GB/s", gbs), ("us", us)):
            out.append(report.make_row(op="decode", impl=impl, dtype="bf16", D=128, B=B, H_q=hq,
                                       H_kv=hkv, S_q=sq, S_k=S, causal=True, mode="fwd",
                                       page_size=page, value=v, unit=unit, gpu=gpu,
                                       date="2026-11-23", commit="abc1234"))
    return out


def test_csv_rows_roundtrip(tmp_path):
    rows = _rows([("flashkit", 64, 32, 8, 8192, 1, 16, 4000.0),
                  ("sdpa_cudnn", 64, 32, 8, 8192, 1, 0, 3900.0)])
    path = report.results_path(tmp_path, "NVIDIA H200", "2026-11-23", "t", op="decode")
    assert path.name == "decode-h200-2026-11-23-t.csv"
    report.write_csv(path, rows)
    text = path.read_text().splitlines()
    assert text[0] == SPEC_COLUMNS
    assert text[1].startswith("decode,flashkit,bf16,128,128,64,32,8,1,8192,True,fwd,16,4000.00,GB/s,")
    back = report.read_csv(path)
    assert [(r["impl"], r["page_size"], r["unit"]) for r in back] == [
        ("flashkit", 16, "GB/s"), ("flashkit", 16, "us"), ("sdpa_cudnn", 0, "GB/s"),
        ("sdpa_cudnn", 0, "us")]
    us = [r for r in back if r["unit"] == "us"][0]["value"]
    assert us == pytest.approx(ds.decode_bytes(64, 32, 8, 8192, 1) / 4000e9 * 1e6, abs=0.01)
    # prefill tables ignore decode rows; the decode report uses them
    assert report.format_tables(back) == "(no prefill TFLOPS rows)"
    assert "flashkit" in dr.format_report(back)


def test_report_bar_checks():
    big, small = (64, 32, 8, 8192), (1, 32, 8, 1024)
    spec = []
    for B, hq, hkv, S in (big, small):
        spec += [("flashkit", B, hq, hkv, S, 1, 16, 4000), ("flashinfer", B, hq, hkv, S, 1, 16, 3000),
                 ("flashinfer_tc", B, hq, hkv, S, 1, 16, 3500),  # best FlashInfer: 4000/3500=1.14
                 ("sdpa_cudnn", B, hq, hkv, S, 1, 0, 3900), ("sdpa_flash", B, hq, hkv, S, 1, 0, 3000),
                 ("read_limit", B, hq, hkv, S, 1, 0, 4400)]
    spec += [("flashkit", 64, 32, 8, 8192, 1, 1, 3500)]       # page 1 / page 16 = 0.875 ok
    spec += [("flashkit", 1, 32, 8, 65536, 1, 16, 3300)]      # B=1 64k / B=64 8k = 0.825 ok
    spec += [("flashkit", 64, 32, 8, 8192, 4, 16, 3500)]      # time s_q4/s_q1 ~ 4000/3500 = 1.14
    rows = _rows(spec)
    text = dr.format_report(rows)
    assert "bar checks on NVIDIA H200: " in text
    # big row: 3 checks pass (1.14 >= 1.1, 1.03 >= 1, 0.91 >= 0.85); small row (< 256 MB): none
    passed, failed, unevaluated = dr.bar_summary(rows)["NVIDIA H200"]
    # + page1 + long + s_q4; the s_q=4 row and B=1 64k row have no peers: their vs-peer checks
    # are not evaluable (3 + 3)
    assert (passed, failed) == (6, 0), text
    assert unevaluated == 6, text
    assert "<256MB" in text and "3500 tc" in text
    line = [ln for ln in text.splitlines() if ln.startswith(" 1  32/8  64k")][0]
    assert line.endswith("n/a")  # B=1 64k: no peer measured, nothing to compare
    # failing variants
    rows2 = _rows([("flashkit", 64, 32, 8, 8192, 1, 16, 3000),
                   ("flashinfer", 64, 32, 8, 8192, 1, 16, 2900),
                   ("sdpa_cudnn", 64, 32, 8, 8192, 1, 0, 3100),
                   ("read_limit", 64, 32, 8, 8192, 1, 0, 4400),
                   ("flashkit", 64, 32, 8, 8192, 1, 1, 2000),
                   ("flashkit", 64, 32, 8, 8192, 4, 16, 1500)])
    text2 = dr.format_report(rows2)
    p2, f2, _ = dr.bar_summary(rows2)["NVIDIA H200"]
    assert p2 == 0 and f2 == 5, text2   # fi, cudnn, read, page1, s_q4
    assert "FAIL fi,cudnn,read" in text2
    # a flagged (mismatching) flashkit row fails its checks and is marked
    text3 = dr.format_report(rows, {("flashkit", 64, 32, 8, 8192, 1, 16)})
    assert "4000!" in text3 and "[output mismatch]" in text3


def test_report_flashinfer_reference():
    # s_q = 1: the bar's FlashInfer is the decode wrapper's default kernel (flashinfer); a
    # faster tensor-core kernel is shown as fi* and noted, not held to the bar
    rows = _rows([("flashkit", 64, 32, 8, 8192, 1, 16, 4000), ("flashinfer", 64, 32, 8, 8192, 1, 16, 2900),
                  ("flashinfer_tc", 64, 32, 8, 8192, 1, 16, 4300),
                  ("flashkit", 64, 32, 8, 8192, 4, 16, 3900),
                  ("flashinfer_tc", 64, 32, 8, 8192, 4, 16, 3600),
                  ("flashinfer_fa3", 64, 32, 8, 8192, 4, 16, 1000)])
    text = dr.format_report(rows)
    line1 = [ln for ln in text.splitlines() if ln.startswith("64  32/8   8k    1")][0]
    assert "2900 d" in line1 and "4300 tc" in line1 and "1.38" in line1 and "0.93" in line1
    assert "a FlashInfer kernel is faster than flashkit on 1 row(s)" in text
    # s_q > 1: the prefill wrapper's default backend on Hopper (fa3); fi* = flashinfer_tc
    line4 = [ln for ln in text.splitlines() if ln.startswith("64  32/8   8k    4")][0]
    assert "1000 f3" in line4 and "3600 tc" in line4 and "3.90" in line4 and "1.08" in line4
    assert dr.bar_summary(rows)["NVIDIA H200"][:2] == (3, 0)  # + the s_q4/s_q1 time check
    rows += _rows([("flashkit", 64, 32, 8, 8192, 4, 16, 1050)])  # the later row wins
    assert dr.bar_summary(rows)["NVIDIA H200"][:2] == (1, 2)  # fi 1.05x, time 3.7x


def test_report_without_flashkit_rows():
    rows = _rows([("flashinfer", 64, 32, 8, 8192, 1, 16, 3000),
                  ("sdpa_cudnn", 64, 32, 8, 8192, 1, 0, 3900)])
    text = dr.format_report(rows)
    assert "no flashkit rows" in text
    assert dr.format_report([]) == "(no decode rows)"


def test_decode_plot(tmp_path):
    if not report.have_matplotlib():
        pytest.skip("matplotlib not installed")
    spec = [(impl, B, 32, 8, S, 1, 0 if impl in ("sdpa_cudnn", "read_limit") else 16, v)
            for impl, v in (("flashkit", 3000), ("flashinfer", 2000), ("sdpa_cudnn", 2500),
                            ("read_limit", 3500))
            for B in (1, 64) for S in (1024, 8192)]
    p = dr.plot_rows(_rows(spec), tmp_path / "d.png")
    assert p and p.exists() and p.stat().st_size > 1000
    assert dr.plot_rows(_rows([("flashkit", 1, 32, 8, 1024, 2, 16, 1.0)]), tmp_path / "x.png") is None


# --------------------------------------------------------------------------- peers / timing


def test_flashinfer_library_lookup(tmp_path, monkeypatch):
    lib_dir = tmp_path / "fi"
    lib_dir.mkdir()
    (lib_dir / "libfi_decode.so").write_bytes(b"")
    monkeypatch.delenv(fi_peer.ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(fi_peer, "REPO_CARRY", tmp_path / "no-repo-carry")  # a checkout may have one
    path, searched = fi_peer.find_library("decode", str(lib_dir))
    assert path == lib_dir / "libfi_decode.so" and searched[0] == lib_dir
    assert fi_peer.find_library("fa3", str(lib_dir))[0] is None
    monkeypatch.setenv(fi_peer.ENV_VAR, str(lib_dir))
    assert fi_peer.find_library("decode")[0] == lib_dir / "libfi_decode.so"
    monkeypatch.delenv(fi_peer.ENV_VAR)
    (tmp_path / ".carry" / "flashinfer").mkdir(parents=True)
    (tmp_path / ".carry" / "flashinfer" / "libfi_fa2.so").write_bytes(b"")
    assert fi_peer.find_library("fa2")[0] == tmp_path / ".carry" / "flashinfer" / "libfi_fa2.so"


def test_impl_registry():
    assert set(di.ALL_IMPLS) == {"flashkit", "flashkit_onecall", "flashinfer", "flashinfer_tc",
                                 "flashinfer_fa3", "sdpa_cudnn", "sdpa_flash", "read_limit"}
    assert set(di.DEFAULT_IMPLS) == set(di.ALL_IMPLS) - {"flashkit_onecall"}  # opt-in
    assert set(di.PAGED_IMPLS) == {"flashkit", "flashkit_onecall", "flashinfer", "flashinfer_tc",
                                   "flashinfer_fa3"}
    for n in di.ALL_IMPLS:
        impl = di.make_impl(n)
        assert impl.name == n and impl.paged == (n in di.PAGED_IMPLS)
    fi = di.make_impl("flashinfer")
    assert "one query token" in fi.supports(ds.DecodeShape(1, 32, 8, 1024, 2))
    assert fi.supports(ds.DecodeShape(1, 32, 8, 1024, 1)) is None
    assert di.make_impl("flashinfer_tc").supports(ds.DecodeShape(1, 32, 8, 1024, 4)) is None
    with pytest.raises(ValueError):
        di.make_impl("nope")


def test_flashkit_impl_not_available(monkeypatch):
    fake = types.ModuleType("flashkit")
    monkeypatch.setitem(sys.modules, "flashkit", fake)
    impl = di.make_impl("flashkit")
    assert "not available" in impl.setup(di.Env())
    fake.decode = lambda *a, **k: None
    assert impl.setup(di.Env()) is None and "plan inside" in impl.how
    fake.DecodePlan = object
    assert impl.setup(di.Env()) is None and "outside the timed region" in impl.how


def test_flashkit_onecall_impl_times_the_plan(monkeypatch):
    # flashkit_onecall calls flashkit.decode (plan kernel in the timed call) even where DecodePlan
    # exists, and says why it cannot run without flashkit.decode.
    fake = types.ModuleType("flashkit")
    monkeypatch.setitem(sys.modules, "flashkit", fake)
    impl = di.make_impl("flashkit_onecall")
    fake.DecodePlan = object
    assert "not available" in impl.setup(di.Env())
    calls = []
    fake.decode = lambda *a, **k: calls.append((a, k)) or ("out", "lse")
    assert impl.setup(di.Env()) is None and "plan inside" in impl.how
    pc = types.SimpleNamespace(k="k", v="v", block_table="bt", seqlens="sl")
    d = types.SimpleNamespace(q="q", paged={16: pc})
    fns = impl.prepare(ds.DecodeShape(1, 32, 8, 1024, 1), 16, [d])
    assert len(fns) == 1 and fns[0]() == "out"
    assert calls == [(("q", "k", "v", "bt", "sl"), {"causal": True})]


def test_rotating_timer_with_fake_torch(monkeypatch):
    clock = {"t": 0.0}
    calls = []

    class Event:
        def __init__(self, enable_timing=False):
            self.t = None

        def record(self):
            self.t = clock["t"]

        def elapsed_time(self, other):
            return other.t - self.t

    fake = types.ModuleType("torch")
    fake.cuda = types.SimpleNamespace(
        synchronize=lambda: None, Event=Event,
        _sleep=lambda cycles: clock.__setitem__("t", clock["t"] + 1000.0))

    def make(i):
        def fn():
            calls.append(i)
            clock["t"] += 0.5 + 0.1 * i   # ms of "GPU time" per call
        return fn
    monkeypatch.setitem(sys.modules, "torch", fake)
    ms, n = timing.rotating_median_ms([make(0), make(1), make(2)],
                                      timing.RotatingOptions(warmup_ms=1, rep_ms=20,
                                                             min_samples=5, max_samples=50))
    assert ms == pytest.approx((0.5 + 0.6 + 0.7) / 3)   # per call, sleep not counted
    assert n == 11                                       # 20 ms / 1.8 ms per pass
    assert calls.count(0) == calls.count(2) and calls.count(0) >= n + 2


# --------------------------------------------------------------------------- command line


def test_cli_resolve_and_errors(capsys):
    p = dcli.build_parser()
    sel = dcli.resolve(p.parse_args(["--batch", "1,64", "--ratios", "32/8", "--seqlens", "8k",
                                     "--page-sizes", "1", "16", "--sq", "1", "4"]), p)
    assert len(sel["selection"].shapes) == 4
    assert sel["impls"] == list(di.DEFAULT_IMPLS)
    sel = dcli.resolve(p.parse_args(["--impls", "flashkit,sdpa_cudnn", "--quick"]), p)
    assert sel["impls"] == ["flashkit", "sdpa_cudnn"] and sel["selection"].mode == "quick"
    for bad in (["--impls", "nope"], ["--ratios", "8/32"], ["--page-sizes", "512"],
                ["--sq", "0"], ["--kv-budget-gb", "0"], ["--seqlens", "1k", "--kv-budget-gb", "1e-9"]):
        with pytest.raises(SystemExit):
            dcli.resolve(p.parse_args(bad), p)


def test_module_decode_dry_run_needs_no_gpu():
    r = _run(["--op", "decode", "--dry-run"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("decode sweep (default): 73 shapes")
    assert "B=1   H=32/8  S_k=64k  s_q=1  pages 1,16,64,256" in r.stdout
    assert r.stdout.count("skipped") == 7
    r = _run(["--op=decode", "--quick", "--dry-run", "--impls", "flashkit", "read_limit"])
    assert r.returncode == 0 and "decode sweep (quick)" in r.stdout
    assert "impls flashkit, read_limit" in r.stdout


def test_module_decode_exits_2_without_gpu(tmp_path):
    r = _run(["--op", "decode", "--quick", "--out-dir", str(tmp_path)])
    assert r.returncode == 2
    assert "flashkit.bench needs a CUDA GPU and PyTorch; none found" in r.stderr
    assert not list(tmp_path.iterdir())


def test_module_op_routing():
    r = _run(["--op", "kvcache", "--help"])  # routed to python -m flashkit.bench.kvcache_sim
    assert r.returncode == 0 and "kvcache_sim" in r.stdout
    r = _run(["--op", "nope"])
    assert r.returncode == 2 and "invalid choice" in r.stderr
    r = _run(["--op", "prefill", "--dry-run", "--sweep", "small"])
    assert r.returncode == 0 and r.stdout.startswith("28 configs")
    r = _run(["--dry-run", "--sweep", "small"])      # prefill stays the default
    assert r.returncode == 0 and r.stdout.startswith("28 configs")
    r = _run(["--op", "decode", "--help"])
    assert r.returncode == 0 and "--page-sizes" in r.stdout and "--flashinfer-path" in r.stdout


def test_plot_command_reads_decode_csv(tmp_path):
    rows = _rows([("flashkit", 64, 32, 8, 8192, 1, 16, 4000.0),
                  ("flashinfer", 64, 32, 8, 8192, 1, 16, 3000.0),
                  ("sdpa_cudnn", 64, 32, 8, 8192, 1, 0, 3900.0)])
    path = tmp_path / "decode-h200-2026-11-23.csv"
    report.write_csv(path, rows)
    r = _run(["plot", str(path)])
    assert r.returncode == 0, r.stderr
    assert "== decode | bf16 cache" in r.stdout and "bar checks on NVIDIA H200" in r.stdout
    assert "prefill" not in r.stdout.split("==")[0]
    if report.have_matplotlib():
        assert path.with_suffix(".png").exists()
    with open(path) as f:
        assert next(csv.reader(f)) == SPEC_COLUMNS.split(",")
