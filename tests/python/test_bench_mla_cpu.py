"""CPU-only tests of the MLA side of flashkit.bench (``--op mla``): the sweep (FlashMLA's test
matrix, --quick, filters), the varlen length distribution, the FLOP / byte model, CSV rows,
the ratio table and bar, FlashMLA test-log parsing, the plot, the flash_mla lookup, and the
command line (dry-run, bad arguments, no-GPU exit, --op routing). No GPU, torch or extension.
"""

import csv
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from _bench_loader import REPO, SPEC_COLUMNS, load_bench


bench = load_bench("_flashkit_bench_mla_under_test",
                   ("sweeps", "timing", "report", "cli", "mla_sweeps", "mla_report", "mla_cli",
                    "mla_impls"))
ms, mr, mcli, mi, report = (bench.mla_sweeps, bench.mla_report, bench.mla_cli, bench.mla_impls,
                            bench.report)


def _run(args, **kw):
    env = {"PYTHONPATH": str(REPO / "python"), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "flashkit.bench", *args], cwd=kw.get("cwd", REPO),
                          capture_output=True, text=True, env=env, timeout=120)


# --------------------------------------------------------------------------- sweep


def test_default_selection_is_flashmla_test_matrix():
    sel = ms.build_selection()
    keys = [c.key for c in sel.configs]
    assert len(keys) == 48 == len(set(keys))
    expect = {(128, sq, S, hq, mode) for S in (4096, 8192, 16384) for hq in (16, 32, 64, 128)
              for sq in (1, 2) for mode in ("fixed", "varlen")}
    assert set(keys) == expect
    # FlashMLA's loop order: S_k, h_q, s_q, varlen
    assert keys[:4] == [(128, 1, 4096, 16, "fixed"), (128, 1, 4096, 16, "varlen"),
                        (128, 2, 4096, 16, "fixed"), (128, 2, 4096, 16, "varlen")]
    assert sel.flashkit_pages == (16, 32, 64, 128)
    for c in sel.configs:
        assert (c.H_kv, c.D, c.Dv) == (1, 576, 512)


def test_quick_and_filters():
    q = ms.build_selection(quick=True)
    assert len(q.configs) == 8 and q.flashkit_pages == (16, 64)
    assert {c.S_k for c in q.configs} == {8192} and {c.H_q for c in q.configs} == {16, 128}
    assert {c.mode for c in q.configs} == {"fixed", "varlen"} and {c.s_q for c in q.configs} == {1, 2}
    f = ms.build_selection(sqs=[1], seqlens_=[4096], heads=[64], modes=["varlen"],
                           flashkit_pages=[32, 32, 128])
    assert [c.key for c in f.configs] == [(128, 1, 4096, 64, "varlen")]
    assert f.flashkit_pages == (32, 128)
    with pytest.raises(ValueError):
        ms.build_selection(modes=["ragged"])
    assert ms.measurements(ms.build_selection(), ["flashkit", "flashmla"]) == 48 * 5
    assert ms.measurements(q, ["flashmla"]) == 8


def test_varlen_lengths_follow_flashmla_distribution():
    c = ms.MlaConfig(B=128, s_q=2, S_k=8192, H_q=64, mode="varlen")
    a, b = ms.seqlens(c), ms.seqlens(c)
    assert a == b                                  # deterministic
    assert ms.seqlens(c, seed=1) != a              # the base seed matters
    assert all(isinstance(x, int) and x >= 2 for x in a)
    # normalvariate(mean, mean / 2), many draws: mean and std close to FlashMLA's
    draws = []
    for H in (16, 32, 64, 128):
        for s in range(8):
            draws += ms.seqlens(ms.MlaConfig(B=128, s_q=1, S_k=8192, H_q=H, mode="varlen"), s)
    assert abs(statistics.mean(draws) - 8192) < 300
    assert abs(statistics.pstdev(draws) - 4096) < 300
    fixed = ms.MlaConfig(B=128, s_q=1, S_k=4096, H_q=16, mode="fixed")
    assert ms.seqlens(fixed) == [4096] * 128
    # a configuration's lengths do not depend on what else is selected
    assert ms.seqlens(c) == ms.seqlens(ms.build_selection(heads=[64], sqs=[2], seqlens_=[8192],
                                                          modes=["varlen"]).configs[0])
    tiny = ms.MlaConfig(B=4096, s_q=2, S_k=8, H_q=16, mode="varlen")
    assert min(ms.seqlens(tiny)) == 2              # max(.., s_q) clamps the negative draws


def test_padding_and_model():
    assert ms.padded_max([1, 256]) == 256 and ms.padded_max([257, 3]) == 512
    c = ms.MlaConfig(B=128, s_q=2, S_k=4096, H_q=128, mode="fixed")
    total = 128 * 4096
    assert ms.flops(c, total) == 2 * 2 * total * 128 * (576 + 512)
    assert ms.nbytes(c, total) == (total * 576 + 128 * 2 * 128 * (576 + 512)) * 2
    # the anchor log's row (0.486 ms -> 601 TFLOPS, 1388 GB/s; its ms is rounded to 3 digits)
    assert ms.tflops(c, total, 0.486) == pytest.approx(601, abs=2)
    assert ms.gbps(c, total, 0.486) == pytest.approx(1388, abs=3)
    assert ms.cache_bytes(c, 4096) == 128 * 4096 * 576 * 2


# --------------------------------------------------------------------------- rows, report

def _row(impl, value, unit, mode="fixed", S=4096, hq=16, sq=1, page=64, gpu="NVIDIA H200"):
    return report.make_row(op="mla_decode", impl=impl, dtype="bf16", D=576, Dv=512, B=128,
                           H_q=hq, H_kv=1, S_q=sq, S_k=S, causal=True, mode=mode, value=value,
                           unit=unit, gpu=gpu, date="2026-11-23", commit="abc1234",
                           page_size=page)


def _rows():
    rows = []
    for hq, fm_us, fk_us in ((16, 168.0, 150.0), (128, 486.0, 470.0)):
        for impl, us, pages in (("flashmla", fm_us, (64,)), ("flashkit", fk_us, (16, 64))):
            for p in pages:
                t = us * (1.1 if p == 16 else 1.0)
                c = ms.MlaConfig(B=128, s_q=1, S_k=4096, H_q=hq, mode="fixed")
                rows += [_row(impl, ms.tflops(c, 128 * 4096, t / 1e3), "TFLOPS", hq=hq, page=p),
                         _row(impl, ms.gbps(c, 128 * 4096, t / 1e3), "GB/s", hq=hq, page=p),
                         _row(impl, t, "us", hq=hq, page=p)]
    return rows


def test_csv_columns_and_roundtrip(tmp_path):
    path = report.write_csv(tmp_path / "mla.csv", _rows())
    lines = path.read_text().splitlines()
    assert lines[0] == SPEC_COLUMNS
    first = next(csv.DictReader(lines))
    assert (first["op"], first["impl"], first["D"], first["Dv"], first["H_kv"], first["S_k"],
            first["causal"], first["mode"], first["page_size"], first["unit"]) == \
        ("mla_decode", "flashmla", "576", "512", "1", "4096", "True", "fixed", "64", "TFLOPS")
    back = report.read_csv(path)
    assert len(back) == len(_rows())
    assert {r["unit"] for r in back} == {"TFLOPS", "GB/s", "us"}
    assert {r["mode"] for r in back} == {"fixed"} and {r["page_size"] for r in back} == {16, 64}


def test_report_table_speedups_and_bar():
    rows = _rows()
    text = mr.format_report(rows)
    assert "fk@16 us" in text and "fk@64 us" in text and "x@64" in text
    # 168/150 = 1.12 passes 1.05; 486/470 = 1.03 fails
    assert "1.12" in text and "1.03" in text
    assert mr.bar_summary(rows) == {"NVIDIA H200": (1, 1, 0)}
    assert "FAIL fixed S_k=4k H_q=128 s_q=1: 1.03x" in text
    # a correctness mark fails the bar and shows in the check column
    marks = {("flashkit", "fixed", 4096, 16, 1, 64)}
    text = mr.format_report(rows, marks, {k: "x" for k in marks})
    assert "WARN flashkit@64" in text and "bar checks on NVIDIA H200: 0 passed, 2 failed" in text
    # flashmla alone: nothing to hold to the bar
    only = [r for r in rows if r["impl"] == "flashmla"]
    assert mr.bar_summary(only) == {"NVIDIA H200": (0, 0, 2)}
    assert "no flashkit rows" in mr.format_report(only)
    assert mr.format_report([]) == "(no mla_decode rows)"


ANCHOR = """\
b=128, s_q=1, mean_sk=4096, h_q=16, h_kv=1, d=576, dv=512, causal=True, varlen=False
0.168 ms, 109 TFLOPS, 3627 GB/s
b=128, s_q=2, mean_sk=4096, h_q=128, h_kv=1, d=576, dv=512, causal=True, varlen=True
0.481 ms, 626 TFLOPS, 1443 GB/s
"""


def test_read_flashmla_log(tmp_path):
    p = tmp_path / "h200-flashmla-seed-2026-11-21.log"
    p.write_text(ANCHOR)
    rows = mr.read_flashmla_log(p)
    assert len(rows) == 6
    assert {r["gpu"] for r in rows} == {"H200 (anchor 2026-11-21)"}
    us = {(r["mode"], r["H_q"], r["S_q"]): r["value"] for r in rows if r["unit"] == "us"}
    assert us == {("fixed", 16, 1): pytest.approx(168.0), ("varlen", 128, 2): pytest.approx(481.0)}
    assert all(r["impl"] == "flashmla_anchor" and r["page_size"] == 64 for r in rows)


def test_plot(tmp_path):
    pytest.importorskip("matplotlib")
    out = mr.plot_rows(_rows(), tmp_path / "mla.png")
    assert out is not None and out.stat().st_size > 1000
    assert mr.plot_rows([], tmp_path / "none.png") is None


def test_plot_command_with_anchor_log(tmp_path):
    path = report.write_csv(tmp_path / "mla-h200-2026-11-23.csv", _rows())
    log = tmp_path / "h200-flashmla-seed-2026-11-21.log"
    log.write_text(ANCHOR)
    r = _run(["plot", str(path), str(log), "--no-plot"])
    assert r.returncode == 0, r.stderr
    # the anchor joins the H200 run's table (its own column), not a table of its own
    assert "anchor us" in r.stdout and "(anchor" not in r.stdout
    assert "== mla_decode" in r.stdout


# --------------------------------------------------------------------------- flash_mla lookup

def _fake_flashmla(d: Path) -> Path:
    (d / "flash_mla").mkdir(parents=True)
    (d / "flash_mla" / "__init__.py").write_text("")
    (d / "flash_mla_cuda.cpython-312-x86_64-linux-gnu.so").write_bytes(b"")
    return d


def test_find_flashmla(tmp_path):
    good = _fake_flashmla(tmp_path / "built")
    assert mi.is_flashmla_dir(good) and not mi.is_flashmla_dir(tmp_path)
    path, _ = mi.find_flashmla(str(good), env={}, cwd=tmp_path)
    assert path == good
    path, searched = mi.find_flashmla(str(tmp_path / "nope"), env={}, cwd=tmp_path)
    assert path is None and searched == [tmp_path / "nope"]
    path, _ = mi.find_flashmla(None, env={mi.ENV_VAR: str(good)}, cwd=tmp_path)
    assert path == good
    carry = _fake_flashmla(tmp_path / "cwd" / ".carry" / "flashmla_built")
    path, searched = mi.find_flashmla(None, env={}, cwd=tmp_path / "cwd")
    assert path == carry and searched[0] == carry


def test_flashmla_supports_page_64_only():
    impl = mi.make_impl("flashmla")
    c = ms.MlaConfig(B=128, s_q=1, S_k=4096, H_q=16, mode="fixed")
    assert impl.pages == (64,) and impl.supports(c, 64) is None and impl.supports(c, 16)
    fk = mi.make_impl("flashkit", (16, 128))
    assert fk.pages == (16, 128) and fk.supports(c, 16) is None
    with pytest.raises(ValueError):
        mi.make_impl("sdpa")


def test_flashkit_impl_reports_missing_module():
    # flashkit.mla does not import here (no torch / extension, or not built yet): a reason,
    # not an exception
    impl = mi.make_impl("flashkit")
    reason = impl.setup(mi.Env())
    if reason is not None:
        assert "flashkit.mla" in reason


# --------------------------------------------------------------------------- command line

def test_cli_dry_run_and_quick():
    r = _run(["--op", "mla", "--dry-run"])
    assert r.returncode == 0, r.stderr
    assert "48 configs" in r.stdout and "240 measurements" in r.stdout
    r = _run(["--op", "mla", "--quick", "--impls", "flashmla", "--dry-run"])
    assert r.returncode == 0 and "8 configs" in r.stdout and "8 measurements" in r.stdout
    r = _run(["--op", "mla", "--heads", "64", "--sq", "2", "--seqlens", "16k", "--modes",
              "varlen", "--page-sizes", "16,64", "--dry-run"])
    assert r.returncode == 0 and "1 configs" in r.stdout
    assert "S_k=16k" in r.stdout and "varlen" in r.stdout


@pytest.mark.parametrize("bad", [["--impls", "flashinfer"], ["--modes", "ragged"],
                                 ["--sq", "0"], ["--sq", "17"], ["--page-sizes", "512"],
                                 ["--seqlens", "x"], ["--cos-tol", "0"],
                                 ["--sets", "0"], ["--sets", "9"], ["--block-table", "random"]])
def test_cli_bad_arguments(bad):
    r = _run(["--op", "mla", *bad, "--dry-run"])
    assert r.returncode == 2, (bad, r.stdout)


def test_shuffled_block_tables_keep_every_token():
    """--block-table shuffled: per page size the pages move to a permutation of the ids and the
    table follows, so each sequence reads its own tokens (CPU torch where installed)."""
    torch = pytest.importorskip("torch")
    import importlib

    runner = importlib.import_module(f"{bench.__name__}.mla_runner")
    cfg = ms.MlaConfig(B=3, s_q=1, S_k=100, H_q=16, mode="fixed")
    lengths = [100, 37, 64]
    seq = runner.MlaData(torch, cfg, lengths, 128, seed=5, device="cpu")
    shf = runner.MlaData(torch, cfg, lengths, 128, seed=5, device="cpu", shuffled=True)
    assert torch.equal(seq.cache.nan_to_num(7.0), shf.cache.nan_to_num(7.0))
    for page in (16, 64):
        k0, bt0 = seq.paged(page)
        k1, bt1 = shf.paged(page)
        n = seq.max_pad // page
        assert torch.equal(bt0, torch.arange(3 * n, dtype=torch.int32).view(3, n))
        assert sorted(bt1.flatten().tolist()) == list(range(3 * n)) and not torch.equal(bt0, bt1)
        for b, L in enumerate(lengths):
            pos = torch.arange(L)
            a = k0[bt0[b].long()[pos // page], pos % page]
            c = k1[bt1[b].long()[pos // page], pos % page]
            assert torch.equal(a, c), (page, b)
        assert torch.equal(shf.page_perm(page), shf.page_perm(page))  # the FP8 impl redraws it
    assert seq.page_perm(16) is None


def test_cli_no_gpu_exit_status():
    r = _run(["--op", "mla", "--quick"])
    if "needs a CUDA GPU" not in r.stderr:
        pytest.skip("a GPU with torch is visible here")
    assert r.returncode == 2


def test_cli_help_routes_to_mla():
    r = _run(["--op", "mla", "--help"])
    assert r.returncode == 0 and "--flashmla-path" in r.stdout and "--page-sizes" in r.stdout
    r = _run(["--help"])
    assert "mla" in r.stdout
