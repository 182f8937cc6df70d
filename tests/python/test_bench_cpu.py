"""CPU-only tests of flashkit.bench: CLI, sweeps, CSV schema, tables, plots, the no-GPU
exit, and the measuring loop driven by a fake torch (no GPU, no torch, no extension).

The in-process tests load python/flashkit/bench under a private package name, so they do
not depend on flashkit/__init__.py (nor on the compiled extension); the subprocess tests
run the real ``python -m flashkit.bench``.
"""

import csv
import importlib.util
import os
import subprocess
import sys
import types

import numpy as np
import pytest

from _bench_loader import REPO, SPEC_COLUMNS, load_bench
ANCHOR = REPO.parent / "shared" / "anchors" / "h200-sdpa-2026-11-21.csv"


bench = load_bench("_flashkit_bench_under_test",
                   ("sweeps", "timing", "impls", "report", "cli", "runner"))
sweeps, report, cli, impls, runner = (bench.sweeps, bench.report, bench.cli, bench.impls,
                                      bench.runner)


def _resolve(argv):
    parser = cli.build_parser()
    return cli.resolve(parser.parse_args(argv), parser)


def _row(impl, D, S, causal, value, mode="fwd", sweep="fa3", gpu="NVIDIA H200"):
    if sweep == "fa3":
        B, H = 16384 // S, 2048 // D
    else:
        B, H = 4, 8
    return report.make_row(impl=impl, dtype="bf16", D=D, B=B, H_q=H, H_kv=H, S_q=S, S_k=S,
                           causal=causal, mode=mode, value=value, gpu=gpu,
                           date="2026-11-22", commit="abc1234")


# --------------------------------------------------------------------------- sweeps / CLI


def test_sweeps_match_spec():
    fa3 = sweeps.build_configs(["fa3"])
    assert len(fa3) == 3 * 2 * 6
    for c in fa3:
        assert c.B * c.S == 16384 and c.H_q * c.D == 2048 and c.H_q == c.H_kv
    assert {c.S for c in fa3} == {512, 1024, 2048, 4096, 8192, 16384}
    assert {(c.D, c.H_q) for c in fa3} == {(64, 32), (128, 16), (256, 8)}
    small = sweeps.build_configs(["small"])
    assert len(small) == 2 * 2 * 7
    assert {(c.B, c.H_q) for c in small} == {(4, 8)}
    assert {c.S for c in small} == {256, 512, 1024, 2048, 4096, 8192, 16384}
    assert {c.D for c in small} == {64, 128}
    dims = sweeps.build_configs(["dims"])
    assert len(dims) == 2 * 2 * 6
    assert {(c.D, c.H_q) for c in dims} == {(96, 16), (192, 16)}
    for c in dims:
        assert c.B * c.S == 16384 and c.H_q == c.H_kv
    for c in fa3 + small + dims:
        assert sweeps.classify_sweep(c.B, c.H_q, c.S, c.D) == c.sweep
    # "all" is fa3 + small; dims only by name
    assert len(_resolve(["--sweep", "all"])["configs"]) == len(fa3) + len(small)
    assert len(_resolve(["--sweep", "dims", "--quick"])["configs"]) == 2 * 2 * 3


def test_flops_model():
    c = sweeps.Config("fa3", 1, 16, 16, 16384, 128, False)
    f = 4 * 1 * 16 * 16384 * 16384 * 128
    assert sweeps.flops(c, "fwd") == f
    assert sweeps.flops(c, "bwd") == 2.5 * f
    assert sweeps.flops(c, "fwd_bwd") == 3.5 * f
    cc = sweeps.Config("fa3", 1, 16, 16, 16384, 128, True)
    assert sweeps.flops(cc, "fwd") == f / 2
    # 2.2 TFLOP in 4 ms = 550 TFLOPS
    assert sweeps.tflops(f, 4.0) == pytest.approx(f / 4e-3 / 1e12)


def test_cli_defaults():
    sel = _resolve([])
    assert sel["modes"] == ["fwd"] and sel["deterministic"] is False
    assert sel["impls"] == ["flashkit", "sdpa_flash", "sdpa_cudnn", "sdpa_efficient"]
    assert len(sel["configs"]) == 36 + 28
    args = cli.build_parser().parse_args([])
    assert args.dtype == "bf16" and args.out_dir == "bench/results" and not args.no_plot


def test_cli_filters_and_lists():
    sel = _resolve(["--sweep", "fa3", "--mode", "fwd_bwd", "fwd", "--mode", "bwd",
                    "--seqlens", "1k,16k", "--heads-dims", "128", "--causal", "yes",
                    "--impls", "flashkit,sdpa_cudnn", "--flex"])
    assert sel["modes"] == ["fwd", "bwd", "fwd_bwd"]
    assert sel["impls"] == ["flashkit", "sdpa_cudnn", "flex"]
    assert [(c.S, c.D, c.causal) for c in sel["configs"]] == [(1024, 128, True),
                                                              (16384, 128, True)]
    sel = _resolve(["--sweep", "small", "--heads-dims", "8x64"])
    assert {c.D for c in sel["configs"]} == {64}
    sel = _resolve(["--quick"])
    assert {c.S for c in sel["configs"] if c.sweep == "fa3"} == set(sweeps.FA3_SEQLENS_QUICK)
    assert {c.S for c in sel["configs"] if c.sweep == "small"} == set(sweeps.SMALL_SEQLENS_QUICK)


@pytest.mark.parametrize("argv", [["--mode", "fwdx"], ["--impls", "triton"],
                                  ["--seqlens", "abc"], ["--heads-dims", "0"],
                                  ["--sweep", "decode"], ["--sweep", "fa3", "--seqlens", "3000"],
                                  ["--dtype", "fp32"]])
def test_cli_rejects(argv, capsys):
    with pytest.raises(SystemExit) as e:
        _resolve(argv)
    assert e.value.code == 2


def test_parse_helpers():
    assert sweeps.parse_seqlen("16k") == 16384 and sweeps.parse_seqlen("512") == 512
    assert sweeps.parse_heads_dim("16x128") == (16, 128)
    assert sweeps.parse_heads_dim("16:128") == (16, 128)
    assert sweeps.parse_heads_dim("64") == (None, 64)
    assert sweeps.format_seqlen(2048) == "2k" and sweeps.format_seqlen(256) == "256"


def test_dry_run_needs_no_gpu(capsys):
    assert cli.main(["--dry-run", "--sweep", "small", "--quick"]) == 0
    out = capsys.readouterr().out
    assert "12 configs" in out and "48 measurements" in out


def test_cli_backward_modes_and_deterministic(capsys):
    sel = _resolve(["--mode", "bwd", "fwd_bwd", "--deterministic"])
    assert sel["modes"] == ["bwd", "fwd_bwd"] and sel["deterministic"] is True
    assert cli.main(["--dry-run", "--sweep", "fa3", "--heads-dims", "128", "--seqlens", "16k",
                     "--causal", "no", "--mode", "fwd", "bwd", "fwd_bwd",
                     "--deterministic"]) == 0
    out = capsys.readouterr().out
    assert "1 configs x modes fwd,bwd,fwd_bwd" in out and "deterministic backward" in out
    # SPEC §4: bwd = 2.5x and fwd_bwd = 3.5x the forward's 4 B H S^2 D (2.2 TFLOP here)
    f = 4 * 1 * 16 * 16384 * 16384 * 128 / 1e9
    line = [ln for ln in out.splitlines() if "S=16384" in ln][0]
    assert f"fwd GFLOP {f:10.1f}" in line and f"bwd GFLOP {2.5 * f:10.1f}" in line
    assert f"fwd_bwd GFLOP {3.5 * f:10.1f}" in line


def test_cli_gqa(capsys):
    sel = _resolve(["--sweep", "fa3", "--heads-dims", "128", "--gqa", "4"])
    assert sel["configs"] and all(c.H_kv * 4 == c.H_q for c in sel["configs"])
    assert all(c.H_kv == c.H_q for c in _resolve(["--sweep", "fa3"])["configs"])
    assert cli.main(["--dry-run", "--sweep", "fa3", "--heads-dims", "128", "--seqlens", "4k",
                     "--causal", "no", "--gqa", "8"]) == 0
    out = capsys.readouterr().out
    assert "H=16/2" in out  # 2048 / 128 = 16 query heads, 2 KV heads
    for argv in (["--gqa", "0"], ["--sweep", "fa3", "--heads-dims", "256", "--gqa", "3"]):
        with pytest.raises(SystemExit) as e:
            _resolve(argv)
        assert e.value.code == 2


# --------------------------------------------------------------------------- CSV


def test_results_path_and_slug(tmp_path):
    assert report.gpu_slug("NVIDIA H100 80GB HBM3") == "h100-80gb-hbm3"
    assert report.gpu_slug("NVIDIA H200") == "h200"
    p = report.results_path(tmp_path, "NVIDIA H200", "2026-11-22")
    assert p == tmp_path / "prefill-h200-2026-11-22.csv"
    p.write_text("x")
    assert report.results_path(tmp_path, "NVIDIA H200", "2026-11-22") == \
        tmp_path / "prefill-h200-2026-11-22-2.csv"  # never overwrites
    assert report.results_path(tmp_path, "NVIDIA H200", "2026-11-22", "my tag/1").name == \
        "prefill-h200-2026-11-22-my-tag-1.csv"


def test_csv_schema_roundtrip(tmp_path):
    rows = [_row("flashkit", 128, 4096, True, 612.345), _row("sdpa_cudnn", 128, 4096, True, 565)]
    path = report.write_csv(tmp_path / "r.csv", rows)
    lines = path.read_text().splitlines()
    assert lines[0] == SPEC_COLUMNS
    assert lines[1] == ("prefill,flashkit,bf16,128,128,4,16,16,4096,4096,True,fwd,,612.35,"
                        "TFLOPS,NVIDIA H200,2026-11-22,abc1234")
    with open(path, newline="") as f:
        got = list(csv.DictReader(f))
    assert all(r["page_size"] == "" and r["unit"] == "TFLOPS" and r["op"] == "prefill"
               for r in got)
    back = report.read_csv(path)
    assert back[0]["D"] == 128 and back[0]["causal"] is True and back[0]["page_size"] is None
    assert back[0]["value"] == pytest.approx(612.35)


def test_read_csv_rejects_foreign(tmp_path):
    p = tmp_path / "x.csv"
    p.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError):
        report.read_csv(p)


def test_git_commit_fallbacks(monkeypatch):
    def no_git(*a, **k):
        raise OSError("no git")
    monkeypatch.setattr(report.subprocess, "run", no_git)
    assert report.git_commit({"FLASHKIT_COMMIT": "deadbee"}) == "deadbee"
    assert report.git_commit({}) == "unknown"


def test_git_commit_env_wins():
    assert report.git_commit({"FLASHKIT_COMMIT": "c0ffee1"}) == "c0ffee1"


@pytest.mark.skipif(not ANCHOR.exists(), reason="shared/anchors not beside the repo")
def test_reads_peer_anchor_file():
    rows = report.read_csv(ANCHOR)
    assert rows and {r["impl"] for r in rows} == {"sdpa_flash", "sdpa_cudnn", "sdpa_efficient"}
    cell = [r for r in rows if r["impl"] == "sdpa_cudnn" and r["D"] == 128 and
            r["S_q"] == 16384 and not r["causal"] and r["mode"] == "fwd"]
    assert len(cell) == 1 and cell[0]["value"] == 614


# --------------------------------------------------------------------------- tables


def test_table_ratios_and_geomean():
    rows = [_row("flashkit", 128, 2048, False, 600), _row("sdpa_flash", 128, 2048, False, 300),
            _row("sdpa_cudnn", 128, 2048, False, 500),
            _row("flashkit", 128, 4096, False, 800), _row("sdpa_flash", 128, 4096, False, 400),
            _row("sdpa_cudnn", 128, 4096, False, 800),
            _row("sdpa_flash", 64, 512, True, 150),  # no flashkit: ratio '-'
            _row("flashkit", 64, 256, False, 10, sweep="small"),
            _row("sdpa_cudnn", 64, 256, False, 20, sweep="small")]
    groups = report.group_rows(rows)
    assert list(groups) == [("NVIDIA H200", "bf16", "fwd", "fa3"),
                            ("NVIDIA H200", "bf16", "fwd", "small")]
    cells = groups[("NVIDIA H200", "bf16", "fwd", "fa3")]
    assert report.ratio(cells[(128, False, 2048, 8, 16)], "sdpa_cudnn") == pytest.approx(1.2)
    assert report.ratio(cells[(64, True, 512, 32, 32)], "sdpa_cudnn") is None
    text = report.format_tables(rows)
    fa3 = text.split("\n\n")[0]
    assert "flashkit/sdpa_flash" in fa3 and "flashkit/sdpa_cudnn" in fa3
    header = fa3.splitlines()[1].split()
    assert header[:8] == ["D", "causal", "S", "B", "H", "flashkit", "sdpa_flash", "sdpa_cudnn"]
    line_2k = [ln for ln in fa3.splitlines() if ln.split()[:3] == ["128", "no", "2k"]][0]
    assert line_2k.split()[-2:] == ["2.00x", "1.20x"]
    gm = [ln for ln in fa3.splitlines() if ln.strip().startswith("geomean")][0]
    assert gm.split()[-2:] == ["2.00x", f"{(1.2 * 1.0) ** 0.5:.2f}x"]
    small = text.split("\n\n")[1]
    assert "prefill small" in small and "flashkit/sdpa_cudnn" in small
    assert "flashkit/sdpa_flash" not in small  # no sdpa_flash column there
    assert "0.50x" in small


def test_table_marks_mismatches():
    rows = [_row("flashkit", 128, 2048, False, 900), _row("sdpa_flash", 128, 2048, False, 300)]
    marks = {("fwd", "flashkit", 128, False, 2048, 8, 16)}
    text = report.format_tables(rows, marks)
    assert "900.0!" in text and "did not match" in text
    assert "did not match" not in report.format_tables(rows, {("bwd",) + tuple(marks)[0][1:]})


# --------------------------------------------------------------------------- plots


def _synthetic_rows():
    rows = []
    for sweep, dims, lens in (("fa3", (64, 128), (512, 2048, 16384)),
                              ("small", (64,), (256, 4096))):
        for D in dims:
            for causal in (False, True):
                for S in lens:
                    for impl, base in (("flashkit", 500), ("sdpa_flash", 300),
                                       ("sdpa_cudnn", 450)):
                        for mode in ("fwd", "bwd"):
                            rows.append(_row(impl, D, S, causal, base * (1 + S / 32768),
                                             mode=mode, sweep=sweep))
    return rows


def test_plot_from_synthetic_rows(tmp_path):
    pytest.importorskip("matplotlib")
    png = report.plot_rows(_synthetic_rows(), tmp_path / "p.png")
    assert png is not None and png.exists()
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_gives_gqa_rows_their_own_panels(tmp_path, monkeypatch):
    """Rows of one (sweep, D) with H_kv < H_q (a --gqa run in the same file) get their own
    panel row titled "GQA <ratio>" instead of overwriting the MHA lines; a (mode, causal)
    column with no such rows is left blank."""
    pytest.importorskip("matplotlib")
    rows = _synthetic_rows()
    gqa = []
    for causal in (False, True):
        for S in (512, 2048):
            g = _row("flashkit", 128, S, causal, 111.0 + S, mode="bwd")
            g["H_kv"] = g["H_q"] // 8
            gqa.append(g)
    seen = {}

    def capture(fig, path):
        seen["titles"] = [ax.get_title() for ax in fig.axes if ax.axison]
        seen["lines"] = {ax.get_title(): [list(line.get_ydata()) for line in ax.get_lines()]
                         for ax in fig.axes if ax.axison}
        import matplotlib.pyplot as plt
        plt.close(fig)
        return path

    monkeypatch.setattr(report, "save_figure", capture)
    assert report._group_of(gqa[0]) == 8 and report._group_of(rows[0]) == 1
    report.plot_rows(rows + gqa, tmp_path / "p.png")
    gqa_titles = [t for t in seen["titles"] if "GQA 8" in t]
    assert sorted(t.split("\n")[0] for t in gqa_titles) == [
        "fa3 D=128 GQA 8 causal bwd", "fa3 D=128 GQA 8 non-causal bwd"]
    for t in gqa_titles:  # only the GQA rows' values, one line (flashkit)
        assert seen["lines"][t] == [[111.0 + 512, 111.0 + 2048]]
    mha = [t for t in seen["titles"] if t.startswith("fa3 D=128 causal bwd")]
    assert mha and all(111.0 + 512 not in y for y in seen["lines"][mha[0]])


def test_plot_without_matplotlib(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import raises ImportError
    assert not report.have_matplotlib()
    assert report.plot_rows(_synthetic_rows(), tmp_path / "p.png") is None
    assert not (tmp_path / "p.png").exists()
    csv_path = report.write_csv(tmp_path / "r.csv", _synthetic_rows())
    assert cli.main(["plot", str(csv_path)]) == 0


def test_plot_command(tmp_path, capsys):
    rows = _synthetic_rows() + [_row("flashkit", 64, 512, False, 1.0, gpu="NVIDIA H100 80GB HBM3")]
    csv_path = report.write_csv(tmp_path / "prefill-h200-2026-11-22.csv", rows)
    assert cli.main(["plot", str(csv_path), "--no-plot"]) == 0
    out = capsys.readouterr().out
    assert "prefill fa3 | fwd | bf16 | TFLOPS | NVIDIA H200" in out
    assert "prefill small | bwd" in out
    assert cli.main(["plot", str(tmp_path / "missing.csv")]) == 2
    if report.have_matplotlib():
        assert cli.main(["plot", str(csv_path)]) == 0
        pngs = sorted(p.name for p in tmp_path.glob("*.png"))
        assert pngs == ["prefill-h200-2026-11-22-h100-80gb-hbm3-bf16.png",
                        "prefill-h200-2026-11-22-h200-bf16.png"]


# --------------------------------------------------------------------------- subprocess


def _env_without_gpu():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "python")] +
                                        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["CUDA_VISIBLE_DEVICES"] = ""  # where torch and a GPU exist, hide the GPU
    return env


def _why(r):
    if "Error while finding module specification for 'flashkit.bench'" in r.stderr:
        return ("the flashkit package itself (python/flashkit/__init__.py) does not import "
                "without torch / the extension, so no `python -m flashkit.bench` can start:\n"
                + r.stderr)
    return r.stdout + r.stderr


def test_module_help_without_torch_or_extension():
    r = subprocess.run([sys.executable, "-m", "flashkit.bench", "--help"], cwd=REPO,
                       env=_env_without_gpu(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, _why(r)
    assert "--sweep" in r.stdout and "plot" in r.stdout


def test_module_exits_2_without_gpu(tmp_path):
    r = subprocess.run([sys.executable, "-m", "flashkit.bench", "--out-dir", str(tmp_path)],
                       cwd=REPO, env=_env_without_gpu(), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2, _why(r)
    assert "flashkit.bench needs a CUDA GPU and PyTorch; none found" in r.stderr
    assert not list(tmp_path.iterdir())


# --------------------------------------------------------------------------- the loop, faked


class _T:
    """A tiny numpy stand-in for a torch tensor (what runner.py uses of one)."""

    def __init__(self, a, requires_grad=False, grad_fn=None):
        self.a = np.asarray(a, dtype=np.float64)
        self.requires_grad = requires_grad
        self.grad_fn = grad_fn

    shape = property(lambda self: self.a.shape)

    def float(self):
        return _T(self.a)

    def __sub__(self, o):
        return _T(self.a - o.a)

    def __add__(self, o):
        return _T(self.a + (o.a if isinstance(o, _T) else o))

    def abs(self):
        return _T(np.abs(self.a))

    def max(self):
        return _T(self.a.max())

    def all(self):
        return _T(np.all(self.a))

    def item(self):
        return self.a.reshape(-1)[0].item()

    def add_(self, x):
        self.a = self.a + x
        return self

    def detach(self):
        return _T(self.a)

    def clone(self):
        return _T(self.a.copy())

    def requires_grad_(self, flag=True):
        self.requires_grad = flag
        return self

    def __getitem__(self, idx):
        return _T(self.a[idx])


def _fake_torch():
    t = types.ModuleType("torch")
    rng = {"g": np.random.default_rng(0)}
    t.__version__ = "0.0+fake"
    t.bfloat16, t.float16 = "bfloat16", "float16"
    t.version = types.SimpleNamespace(cuda="0.0")
    t.backends = types.SimpleNamespace(cudnn=types.SimpleNamespace(
        version=lambda: 0, is_available=lambda: True))
    t.cuda = types.SimpleNamespace(get_device_name=lambda: "NVIDIA Fake 9000",
                                   synchronize=lambda: None, empty_cache=lambda: None)
    t.manual_seed = lambda s: rng.update(g=np.random.default_rng(s))
    t.randn = lambda shape, device=None, dtype=None: _T(rng["g"].standard_normal(shape))
    t.ones = lambda n, device=None: _T(np.ones(n))
    t.isfinite = lambda x: _T(np.isfinite(x.a))

    def grad(outputs, inputs, grad_outputs, retain_graph=False):
        return outputs.grad_fn(grad_outputs)
    t.autograd = types.SimpleNamespace(grad=grad)
    return t


class _FakeImpl(impls.Impl):
    """out = (q + k + v) / 3 (+ error); backward optional; may refuse small D; ``direct``:
    a backward entry point of its own (Impl.backward_fn, like flashkit's), giving
    gradients off by ``direct_error``."""

    def __init__(self, name, error=0.0, backward=True, refuse_d=None, direct=False,
                 direct_error=0.0):
        self.name, self.error, self.backward, self.refuse_d = name, error, backward, refuse_d
        self.direct, self.direct_error = direct, direct_error
        self.calls = 0
        self.direct_calls = 0
        self.deterministic = None

    def configure(self, deterministic=False):
        self.deterministic = deterministic

    def backward_fn(self, q, k, v, dout, causal):
        if not self.direct:
            return None
        self.forward(q, k, v, causal)  # the forward's saved results, outside the timing

        def fn():
            self.direct_calls += 1
            return tuple(_T(dout.a / 3 + self.direct_error) for _ in range(3))
        return fn

    def forward(self, q, k, v, causal):
        self.calls += 1
        if self.refuse_d == q.shape[-1]:
            raise RuntimeError("No available kernel. Aborting execution.")
        out = (q.a + k.a + v.a) / 3 + self.error
        need = q.requires_grad or k.requires_grad or v.requires_grad

        def grad_fn(dout):
            if not self.backward:
                raise NotImplementedError("flashkit: the attention backward is not implemented yet")
            return tuple(_T(dout.a / 3) for _ in range(3))
        return _T(out, requires_grad=need, grad_fn=grad_fn if need else None)


def test_runner_loop_with_fake_torch(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", _fake_torch())
    fakes = {"flashkit": _FakeImpl("flashkit", direct=True),
             "sdpa_flash": _FakeImpl("sdpa_flash"),
             "sdpa_cudnn": _FakeImpl("sdpa_cudnn", refuse_d=64),
             "sdpa_efficient": _FakeImpl("sdpa_efficient", error=0.5, backward=False)}
    monkeypatch.setattr(impls, "make_impl", lambda name: fakes[name])
    timed = []

    def fake_bench(fn, opts):
        fn()  # the timed closure must work
        timed.append(fn)
        return 2.0
    monkeypatch.setattr(runner.timing, "bench_median_ms", fake_bench)
    monkeypatch.setenv("FLASHKIT_COMMIT", "f00f00")
    monkeypatch.setattr(report, "git_commit", lambda env=None: "f00f00")

    configs = [sweeps.Config("small", 4, 8, 8, 16, D, causal)
               for D in (64, 128) for causal in (False, True)]
    opts = runner.RunOptions(configs=configs, modes=["fwd", "bwd", "fwd_bwd"], dtype="bf16",
                             impls=list(fakes), out_dir=str(tmp_path), tag="t", plot=True,
                             argv=["--tag", "t"], deterministic=True)
    rc = runner.run(opts)
    captured = capsys.readouterr()
    out = captured.out
    assert rc == 1, out  # sdpa_efficient mismatches
    assert "4 output mismatch(es)" in captured.err

    csvs = list(tmp_path.glob("*.csv"))
    assert [p.name for p in csvs] == [f"prefill-fake-9000-{report.today()}-t.csv"]
    rows = report.read_csv(csvs[0])
    assert csvs[0].read_text().splitlines()[0] == SPEC_COLUMNS
    by = {}
    for r in rows:
        by.setdefault((r["impl"], r["mode"]), []).append(r)
    # flashkit: every mode; bwd through its own entry point (4 checks + 4 timings), the
    # deterministic choice handed over
    assert [len(by[("flashkit", m)]) for m in ("fwd", "bwd", "fwd_bwd")] == [4, 4, 4]
    assert fakes["flashkit"].direct_calls == 8 and fakes["flashkit"].deterministic is True
    assert "backward: flashkit: attention_backward from the saved out/lse, deterministic" in out
    # sdpa_efficient: forward only (its backward raises NotImplementedError)
    assert ("sdpa_efficient", "bwd") not in by and ("sdpa_efficient", "fwd_bwd") not in by
    assert len(by[("sdpa_flash", "bwd")]) == 4 and len(by[("sdpa_flash", "fwd_bwd")]) == 4
    # cudnn refused D=64: only the D=128 configs
    assert {r["D"] for r in by[("sdpa_cudnn", "fwd")]} == {128}
    # value = FLOPs / 2 ms
    r = [r for r in by[("sdpa_flash", "bwd")] if r["causal"] and r["D"] == 128][0]
    assert r["value"] == pytest.approx(round(
        2.5 * 4 * 4 * 8 * 16 * 16 * 128 / 2 / 2e-3 / 1e12, 2), abs=0.01)
    assert all(r["gpu"] == "NVIDIA Fake 9000" and r["commit"] == "f00f00" and
               r["unit"] == "TFLOPS" for r in rows)

    assert "MISMATCH sdpa_efficient fwd" in out
    assert "sdpa_efficient bwd not measured" in out and "not implemented yet" in out
    assert "sdpa_cudnn fwd not measured" in out
    assert "flashkit/sdpa_cudnn" in out and "!" in out
    assert "| bwd |" in out and "| fwd_bwd |" in out  # a table per mode
    notes = csvs[0].with_suffix(".notes.txt").read_text()
    assert "not measured: sdpa_efficient bwd (4 configs)" in notes
    assert "mismatch:" in notes and "backward: flashkit:" in notes
    if report.have_matplotlib():
        assert csvs[0].with_suffix(".png").exists()
    assert len(timed) == len(rows)


def _run_one_config(monkeypatch, tmp_path, fakes, causal, modes, dtype="bf16", others=None):
    """runner.run over one small D 64 config with these fake impls (others: the impls not in
    fakes, e.g. the SDPA references), each timing a single call at 1 ms; returns its exit code."""
    others = others or (lambda name: _FakeImpl(name))
    monkeypatch.setattr(impls, "make_impl", lambda name: fakes.get(name) or others(name))
    monkeypatch.setattr(runner.timing, "bench_median_ms", lambda fn, opts: (fn(), 1.0)[1])
    monkeypatch.setattr(report, "git_commit", lambda env=None: "x")
    opts = runner.RunOptions(configs=[sweeps.Config("small", 4, 8, 8, 16, 64, causal)],
                             modes=modes, dtype=dtype, impls=list(fakes),
                             out_dir=str(tmp_path), plot=False)
    return runner.run(opts)


def test_runner_checks_the_direct_backward(tmp_path, monkeypatch, capsys):
    """A backward entry point whose gradients are wrong is flagged on its bwd rows only (the
    autograd path behind fwd_bwd is checked separately); without --deterministic the fast
    mode is configured."""
    monkeypatch.setitem(sys.modules, "torch", _fake_torch())
    fakes = {"flashkit": _FakeImpl("flashkit", direct=True, direct_error=1.0),
             "sdpa_flash": _FakeImpl("sdpa_flash")}
    assert _run_one_config(monkeypatch, tmp_path, fakes, True, ["bwd", "fwd_bwd"],
                           others=lambda name: _FakeImpl(name, refuse_d=64)) == 1
    out = capsys.readouterr().out
    assert fakes["flashkit"].deterministic is False
    assert "MISMATCH flashkit bwd (direct)" in out and "dq: max|g-ref|" in out
    assert "fast (dq summed in any order)" in out
    rows = report.read_csv(next(tmp_path.glob("*.csv")))
    assert sorted((r["impl"], r["mode"]) for r in rows) == [
        ("flashkit", "bwd"), ("flashkit", "fwd_bwd"), ("sdpa_flash", "bwd"),
        ("sdpa_flash", "fwd_bwd")]
    flagged = [ln for ln in out.splitlines() if "!MISMATCH" in ln]
    assert len(flagged) == 1 and " bwd " in flagged[0] and "flashkit" in flagged[0]


class _Leaf:
    def detach(self):
        return self


def _stand_in_flashkit(monkeypatch):
    """A flashkit module whose attention / attention_backward record their calls: returns
    (module, calls)."""
    calls = []
    fake = types.ModuleType("flashkit")

    def attention(q, k, v, causal=False, return_lse=False, deterministic=False):
        calls.append(("fwd", causal, return_lse, deterministic))
        return ("out", "lse") if return_lse else "out"

    def attention_backward(dout, q, k, v, out, lse, causal=False, deterministic=False):
        calls.append(("bwd", dout, out, lse, causal, deterministic))
        return "dq", "dk", "dv"

    fake.attention, fake.attention_backward = attention, attention_backward
    monkeypatch.setitem(sys.modules, "flashkit", fake)
    return fake, calls


def test_flashkit_impl_backward_entry_point(monkeypatch):
    """FlashKitImpl: forward with the deterministic choice, backward_fn through
    flashkit.attention_backward from the saved out and lse (a stand-in flashkit module)."""
    _, calls = _stand_in_flashkit(monkeypatch)
    Leaf = _Leaf

    impl = impls.make_impl("flashkit")
    assert impl.setup() is None
    impl.configure(deterministic=True)
    assert impl.forward(Leaf(), Leaf(), Leaf(), True) == "out"
    fn = impl.backward_fn(Leaf(), Leaf(), Leaf(), "dout", False)
    assert fn() == ("dq", "dk", "dv")
    assert calls == [("fwd", True, False, True), ("fwd", False, True, False),
                     ("bwd", "dout", "out", "lse", False, True)]
    # A peer times autograd: no entry point of its own.
    assert impls.Impl().backward_fn(None, None, None, None, True) is None


def test_runner_flashkit_missing_is_loud(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", _fake_torch())

    class Missing(impls.Impl):
        name = "flashkit"

        def setup(self):
            return "import flashkit failed: ImportError: no _C"
    fakes = {"flashkit": Missing(), "sdpa_flash": _FakeImpl("sdpa_flash")}
    assert _run_one_config(monkeypatch, tmp_path, fakes, False, ["fwd"], dtype="fp16",
                           others=lambda name: _FakeImpl(name, refuse_d=64)) == 1
    captured = capsys.readouterr()
    assert "FLASHKIT NOT MEASURED" in captured.out
    assert "flashkit not measured: import flashkit failed" in captured.err
    rows = report.read_csv(next(tmp_path.glob("*.csv")))
    assert [(r["impl"], r["dtype"]) for r in rows] == [("sdpa_flash", "fp16")]


def test_shared_helpers():
    """The pieces the prefill, decode and MLA modules share (report, cli, timing)."""
    assert report.page_of({"page_size": None}) == 0 and report.page_of({"page_size": "16"}) == 16
    assert report.fmt_value(None) == "-" and report.fmt_value(2.345, 2) == "2.35"
    assert report.safe_ratio(3.0, 2.0) == 1.5
    assert report.safe_ratio(None, 2.0) is None and report.safe_ratio(1.0, 0.0) is None
    assert report.table_lines(["a", "bb"], [["100", "1"]]) == ["  a  bb", "---  --", "100   1"]
    assert report.bar_counts(["x", "bar checks on G: 3 passed, 1 failed, 2 not evaluable"],
                             "G") == (3, 1, 2)
    assert cli.split_list(["a,b", " c ", ",,"]) == ["a", "b", "c"]
    parser = cli.build_parser()
    assert cli.resolve_impls(["y,x", "y"], ("x", "y"), ("x",), parser) == ["y", "x"]
    assert cli.resolve_impls(None, ("x", "y"), ("x",), parser) == ["x"]
    with pytest.raises(SystemExit):
        cli.resolve_impls(["z"], ("x", "y"), ("x",), parser)
    t = bench.timing
    assert t.with_overrides(t.DECODE_QUICK) == t.DECODE_QUICK
    assert t.with_overrides(t.DECODE_QUICK, rep_ms=7.0) == t.RotatingOptions(
        warmup_ms=5.0, rep_ms=7.0, min_samples=8)
    assert t.with_overrides(t.QUICK, warmup_ms=0.0).warmup_ms == 0.0


@pytest.mark.parametrize("op", ["decode", "mla"])
def test_sweep_runner_summary_with_fake_torch(op, tmp_path, monkeypatch, capsys):
    """The decode and MLA runners share BaseRunner's loop and closing summary: rows stream to
    the CSV, a broken CUDA context stops the run as a problem, flagged outputs are listed and
    digested on stderr, and the op's report comes last."""
    fake = _fake_torch()
    fake.cuda.get_device_properties = lambda i: types.SimpleNamespace(L2_cache_size=2**20)
    fake.device = lambda s: s
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.setattr(report, "git_commit", lambda env=None: "f00f00")
    name = bench.__name__
    mod = importlib.import_module(f"{name}.{op}_runner")
    if op == "decode":
        ds, di = (importlib.import_module(f"{name}.{m}") for m in ("decode_sweeps", "decode_impls"))
        items = [ds.DecodeShape(1, 32, 8, 65536, 1, (16,)), ds.DecodeShape(64, 32, 8, 8192, 1)]
        opts = mod.DecodeOptions(shapes=items, impls=["flashkit"], out_dir=str(tmp_path),
                                 plot=False, argv=["--op", "decode"])
        monkeypatch.setattr(di, "make_impl", lambda n: types.SimpleNamespace(
            name=n, paged=True, setup=lambda env: None))
        step, flagged = "_run_shape", "mismatches"
        row = dict(op="decode", H_kv=8, S_q=1, mode="fwd", page_size=16, unit="GB/s")
    else:
        ms, mi = (importlib.import_module(f"{name}.{m}") for m in ("mla_sweeps", "mla_impls"))
        items = [ms.MlaConfig(128, 1, 8192, 16, "fixed"), ms.MlaConfig(128, 1, 8192, 64, "fixed")]
        opts = mod.MlaOptions(configs=items, impls=["flashkit"], flashkit_pages=(64,),
                              out_dir=str(tmp_path), plot=False, argv=["--op", "mla"])
        monkeypatch.setattr(mi, "make_impl", lambda n, pages: types.SimpleNamespace(
            name=n, pages=(64,), how="fake", setup=lambda env: None))
        step, flagged = "_run_config", "warnings"
        row = dict(op="mla_decode", Dv=512, H_kv=1, S_q=1, mode="fixed", page_size=64, unit="us")
    seen = []

    def fake_step(self, item, *args):
        writer = args[-1]
        seen.append(item)
        if len(seen) == 2:  # the second one breaks the CUDA context
            fake.cuda.synchronize = lambda: (_ for _ in ()).throw(RuntimeError("illegal\naddr"))
            self._check_context()
        r = report.make_row(impl="flashkit", dtype="bf16", D=128, B=item.B, H_q=item.H_q,
                            S_k=item.S_k, causal=True, value=1.0, gpu=self.gpu,
                            date=self.date, commit=self.commit, **row)
        writer.write(r)
        self.rows.append(r)
        getattr(self, flagged).append("!!! something")
        self.skip("peer", "refused", "label")
    monkeypatch.setattr(getattr(mod, "DecodeRunner" if op == "decode" else "MlaRunner"),
                        step, fake_step)
    assert mod.run(opts) == 1
    out, err = capsys.readouterr()
    csv_path = tmp_path / f"{op}-fake-9000-{report.today()}.csv"
    assert [r["S_k"] for r in report.read_csv(csv_path)] == [items[0].S_k]
    assert "note: peer not measured (label): refused" in out
    assert "!!! CUDA CONTEXT BROKEN, stopping early: RuntimeError: illegal" in out
    assert "  peer: 1 config(s): refused" in out and "\n  !!! something\n" in out
    assert out.index("notes:   ") < out.index("bar checks on NVIDIA Fake 9000")
    assert err.startswith(f"flashkit.bench {op}: 1 ")
    assert "CUDA context broken, run stopped early" in err
    notes = csv_path.with_suffix(".notes.txt").read_text().splitlines()
    assert notes[:5] == [f"command: python -m flashkit.bench --op {op}", "gpu: NVIDIA Fake 9000",
                         f"date: {report.today()}", "commit: f00f00",
                         "torch: 0.0+fake cuda 0.0" + (" cudnn 0" if op == "decode" else "")]
    assert "not measured: peer (1 configs): refused" in notes


# --------------------------------------------------------------------------- --window


def _brute_pairs(S_q, S_k, causal, left, right):
    d = S_k - S_q
    if causal:
        right = 0
    return sum(1 for i in range(S_q) for j in range(S_k)
               if (right < 0 or j <= i + d + right) and (left < 0 or j >= i + d - left))


def test_visible_pairs_is_the_brute_force_count():
    for S_q in range(0, 8):
        for S_k in range(0, 8):
            for causal in (False, True):
                for left in (-1, 0, 1, 3, 9):
                    for right in (-1, 0, 2, 9):
                        assert sweeps.visible_pairs(S_q, S_k, causal, left, right) == \
                            _brute_pairs(S_q, S_k, causal, left, right), \
                            (S_q, S_k, causal, left, right)
    # a few larger, uneven ones
    for case in ((300, 77, True, 40, -1), (77, 300, False, 5, 17), (129, 129, True, 64, -1)):
        assert sweeps.visible_pairs(*case) == _brute_pairs(*case), case


def test_window_flop_count():
    S, W = 16384, 4096
    # S_q = S_k = S, causal window W < S: row i sees min(i, W) + 1 keys
    pairs = S + W * (W + 1) // 2 + (S - 1 - W) * W
    assert pairs == 58734592 == sweeps.visible_pairs(S, S, True, W)
    cfg = sweeps.Config("fa3", 1, 16, 16, S, 128, True)
    assert sweeps.window_flops(cfg, W, "fwd") == 4 * 1 * 16 * 128 * pairs
    assert sweeps.window_flops(cfg, W, "bwd") == 2.5 * 4 * 1 * 16 * 128 * pairs
    # SPEC §4's mode factors apply to the window rows as to the others
    assert sweeps.MODE_FLOP_FACTOR == {"fwd": 1.0, "bwd": 2.5, "fwd_bwd": 3.5}
    assert sweeps.window_flops(cfg, W, "bwd") == 2.5 * sweeps.window_flops(cfg, W, "fwd")
    assert sweeps.window_flops(cfg, W, "fwd_bwd") == 3.5 * sweeps.window_flops(cfg, W, "fwd")
    assert sweeps.window_flops(cfg, W, "bwd") / sweeps.flops(cfg, "bwd") == \
        pytest.approx(0.437607, abs=1e-6)
    # vs SPEC's full causal count S^2 / 2: 0.4376 of its FLOPs
    assert sweeps.window_flops(cfg, W, "fwd") / sweeps.flops(cfg, "fwd") == \
        pytest.approx(0.437607, abs=1e-6)
    # a window covering everything is exact causal, S(S+1)/2 pairs; W = 0: the diagonal
    assert sweeps.visible_pairs(S, S, True, S) == S * (S + 1) // 2
    assert sweeps.visible_pairs(S, S, True, S - 1) == S * (S + 1) // 2
    assert sweeps.visible_pairs(S, S, True, 0) == S
    assert sweeps.visible_pairs(S, S, False) == S * S
    assert sweeps.parse_window("4k") == 4096 and sweeps.parse_window("0") == 0
    for bad in ("-1", "abc", "1.5"):
        with pytest.raises(ValueError):
            sweeps.parse_window(bad)


def test_cli_window(capsys):
    sel = _resolve(["--window", "4k"])
    assert sel["window"] == 4096
    assert _resolve([])["window"] is None
    # the window rows run in every mode: backward modes alone are fine
    for modes in (["bwd"], ["fwd_bwd"], ["bwd", "fwd_bwd"], ["fwd", "bwd", "fwd_bwd"]):
        sel = _resolve(["--window", "64", "--mode", *modes])
        assert sel["window"] == 64 and sel["modes"] == modes
    for argv in (["--window", "-3"], ["--window", "x"], ["--window", "64", "--causal", "no"],
                 ["--window", "64", "--mode", "bwd", "--causal", "no"],
                 ["--window", "64", "--impls", "sdpa_flash"]):
        with pytest.raises(SystemExit) as e:
            _resolve(argv)
        assert e.value.code == 2, argv
    capsys.readouterr()
    assert cli.main(["--dry-run", "--sweep", "fa3", "--heads-dims", "128", "--seqlens", "16k",
                     "--window", "4096", "--mode", "fwd", "bwd"]) == 0
    out = capsys.readouterr().out
    assert "+ 2 flashkit_window4096 fwd,bwd" in out
    line = [ln for ln in out.splitlines() if "causal=1" in ln][0]
    wf = 4 * 16 * 128 * 58734592 / 1e9
    assert f"flashkit_window4096 fwd GFLOP {wf:10.1f}" in line
    assert f"flashkit_window4096 bwd GFLOP {2.5 * wf:10.1f}" in line
    assert "flashkit_window" not in [ln for ln in out.splitlines() if "causal=0" in ln][0]


def test_cli_window_dry_run_backward_modes(capsys):
    """--window with bwd and fwd_bwd only: the window rows' GFLOP of both modes (2.5x and
    3.5x the window forward), none for fwd."""
    assert cli.main(["--dry-run", "--sweep", "fa3", "--heads-dims", "64", "--seqlens", "16k",
                     "--causal", "yes", "--window", "4k", "--mode", "bwd", "fwd_bwd"]) == 0
    out = capsys.readouterr().out
    assert "1 configs x modes bwd,fwd_bwd" in out and "+ 2 flashkit_window4096 bwd,fwd_bwd" in out
    line = [ln for ln in out.splitlines() if "causal=1" in ln][0]
    wf = 4 * 32 * 64 * 58734592 / 1e9  # fa3 D=64: B=1, H=32
    assert f"flashkit_window4096 bwd GFLOP {2.5 * wf:10.1f}" in line
    assert f"flashkit_window4096 fwd_bwd GFLOP {3.5 * wf:10.1f}" in line
    assert "flashkit_window4096 fwd GFLOP" not in line
    f = 4 * 32 * 16384 * 16384 * 64 / 2 / 1e9
    assert f"  bwd GFLOP {2.5 * f:10.1f}" in line


def test_window_table_ratio():
    rows = [_row("flashkit", 128, 16384, True, 500), _row("sdpa_cudnn", 128, 16384, True, 550),
            _row("flashkit_window4096", 128, 16384, True, 460),
            _row("flashkit", 128, 8192, True, 400),
            _row("flashkit_window4096", 128, 8192, True, 380),
            _row("flashkit", 128, 8192, False, 600)]
    text = report.format_tables(rows)
    header = text.splitlines()[1].split()
    assert header[5:8] == ["flashkit", "flashkit_window4096", "sdpa_cudnn"]
    assert header[-2:] == ["flashkit/sdpa_cudnn", "flashkit_window4096/flashkit"]
    line = [ln for ln in text.splitlines() if ln.split()[:3] == ["128", "yes", "16k"]][0]
    assert line.split()[-1] == "0.92x"
    gm = [ln for ln in text.splitlines() if ln.strip().startswith("geomean")][0]
    assert gm.split()[-1] == f"{(0.92 * 0.95) ** 0.5:.2f}x"
    assert "visible (query, key) pairs" in text
    assert report.impl_sort_key("flashkit_window64") < report.impl_sort_key("flashkit_window4096") \
        < report.impl_sort_key("sdpa_flash")


def test_flashkit_window_impl(monkeypatch):
    calls = []
    fake = types.ModuleType("flashkit")

    def attention(q, k, v, causal=False, return_lse=False, deterministic=False,
                  window=(-1, -1)):
        calls.append((causal, window))
        return "out"

    fake.attention = attention
    monkeypatch.setitem(sys.modules, "flashkit", fake)
    impl = impls.make_impl("flashkit_window4096")
    assert impl.name == "flashkit_window4096" and impl.left == 4096
    assert impl.setup() is None
    assert impl.forward(None, None, None, True) == "out"
    assert calls == [(True, (4096, -1))]
    # a build without attention_backward: autograd is timed instead
    assert impl.backward_fn(None, None, None, None, True) is None
    assert impls.window_of("flashkit_window0") == 0 and impls.window_of("flashkit") is None
    with pytest.raises(ValueError):
        impls.make_impl("flashkit_windowx")


def test_flashkit_window_impl_backward(monkeypatch):
    """With attention_backward: the window impl's forward takes the deterministic choice and
    its backward_fn is attention_backward from the saved out and lse, causal with the same
    window, as FlashKitImpl's (a stand-in flashkit module)."""
    calls = []
    fake = types.ModuleType("flashkit")

    def attention(q, k, v, causal=False, return_lse=False, deterministic=False,
                  window=(-1, -1)):
        calls.append(("fwd", causal, return_lse, deterministic, window))
        return ("out", "lse") if return_lse else "out"

    def attention_backward(dout, q, k, v, out, lse, causal=False, deterministic=False,
                           window=(-1, -1)):
        calls.append(("bwd", dout, out, lse, causal, deterministic, window))
        return "dq", "dk", "dv"

    fake.attention, fake.attention_backward = attention, attention_backward
    monkeypatch.setitem(sys.modules, "flashkit", fake)
    impl = impls.make_impl("flashkit_window4096")
    assert impl.setup() is None and impl.modes is None
    impl.configure(deterministic=True)
    assert impl.forward(_Leaf(), _Leaf(), _Leaf(), True) == "out"
    fn = impl.backward_fn(_Leaf(), _Leaf(), _Leaf(), "dout", False)  # causal whatever asked
    assert fn() == ("dq", "dk", "dv")
    assert calls == [("fwd", True, False, True, (4096, -1)),
                     ("fwd", True, True, False, (4096, -1)),
                     ("bwd", "dout", "out", "lse", True, True, (4096, -1))]
    impl.configure(deterministic=False)
    impl.backward_fn(_Leaf(), _Leaf(), _Leaf(), "dout", True)()
    assert calls[-1][-2:] == (False, (4096, -1))


@pytest.mark.parametrize("case", ["ok", "fwd_mismatch", "bwd_mismatch", "no_backward"])
def test_runner_window_rows(tmp_path, monkeypatch, capsys, case):
    """The window rows in every selected mode, on the causal config only: FLOPs of the
    visible pairs per mode, the ratio column in each mode's table, the deterministic choice
    handed over, the forward check marking every mode, the backward checked against the
    window's reference gradients (a wrong direct backward flags its bwd row only), and an
    impl without a backward listed under not measured for bwd / fwd_bwd."""
    monkeypatch.setitem(sys.modules, "torch", _fake_torch())
    wimpl = _FakeImpl("flashkit_window8", backward=case != "no_backward",
                      direct=case != "no_backward",
                      direct_error=1.0 if case == "bwd_mismatch" else 0.0)
    wimpl.left = 8
    fakes = {"flashkit": _FakeImpl("flashkit", direct=True),
             "sdpa_flash": _FakeImpl("sdpa_flash"), "flashkit_window8": wimpl}
    monkeypatch.setattr(impls, "make_impl", lambda name: fakes.get(name) or
                        _FakeImpl(name, refuse_d=64))
    # every call "takes" 1e-9 ms, so a row's TFLOPS is its FLOP count
    monkeypatch.setattr(runner.timing, "bench_median_ms", lambda fn, opts: (fn(), 1e-9)[1])
    monkeypatch.setattr(report, "git_commit", lambda env=None: "x")
    checked, ref_asked = [], []

    def window_diff(self, q, k, v, out, left):
        checked.append(left)
        return (1.0 if case == "fwd_mismatch" else 0.0), 1.0, True

    def window_ref_grads(self, q, k, v, dout, left):
        # the fakes' exact gradients are dout / 3: rows 0..3 for dq, keys 8..15 for dk / dv
        ref_asked.append(left)
        return runner.WindowGrads([(0, 0, 4, _T(dout.a[:, 0:4] / 3)),
                                   (1, 8, 16, _T(dout.a[:, 8:16] / 3)),
                                   (2, 8, 16, _T(dout.a[:, 8:16] / 3))])
    monkeypatch.setattr(runner.Runner, "_window_diff", window_diff)
    monkeypatch.setattr(runner.Runner, "_window_ref_grads", window_ref_grads)
    configs = [sweeps.Config("small", 4, 8, 8, 16, 64, causal) for causal in (False, True)]
    modes = ["fwd", "bwd", "fwd_bwd"]
    opts = runner.RunOptions(configs=configs, modes=modes, dtype="bf16",
                             impls=["flashkit", "sdpa_flash"], out_dir=str(tmp_path),
                             plot=False, window=8, deterministic=True)
    rc = runner.run(opts)
    out = capsys.readouterr().out
    assert rc == (1 if "mismatch" in case else 0), out
    assert checked == [8] and ref_asked == [8] and wimpl.deterministic is True
    assert "2 configs, 15 measurements" in out
    rows = report.read_csv(next(tmp_path.glob("*.csv")))
    wrows = {r["mode"]: r for r in rows if r["impl"] == "flashkit_window8"}
    assert all(r["causal"] for r in wrows.values())
    if case == "no_backward":
        assert list(wrows) == ["fwd"]
        assert "flashkit_window8 bwd not measured" in out and "not implemented yet" in out
        assert "not measured: flashkit_window8 fwd_bwd" in \
            next(tmp_path.glob("*.notes.txt")).read_text()
    else:
        assert list(wrows) == modes
        assert "not measured" not in out
        assert wimpl.direct_calls >= 2  # checked once, then timed
    for mode, r in wrows.items():  # visible pairs: 16 + 8·9/2 + 7·8 = 108
        assert f"[{13 + modes.index(mode):>4}/15] small D=64  causal=1" in out
        assert r["value"] == pytest.approx(sweeps.MODE_FLOP_FACTOR[mode] * 4 * 4 * 8 * 64 * 108)
        assert r["value"] == pytest.approx(sweeps.window_flops(configs[1], 8, mode))
    # each mode's table compares the window with full causal flashkit of the same mode:
    # both in the same time, so the ratio is the visible-pair share, 108 / 128 pairs
    tables = {t.split(" |")[0]: t for t in out.split("\n== prefill small | ")[1:]}
    assert list(tables) == modes
    for mode, t in tables.items():
        if mode not in wrows:
            assert "flashkit_window8" not in t.splitlines()[1]  # no column
            continue
        assert "flashkit_window8/flashkit" in t
        line = [ln for ln in t.splitlines() if ln.split()[:3] == ["64", "yes", "16"]][0]
        assert line.split()[-1] == "0.84x"
    flagged = [ln.split("H=8")[1].split()[:2] for ln in out.splitlines() if "!MISMATCH" in ln]
    if case == "fwd_mismatch":  # the first call's output is wrong: every mode is suspect
        assert "MISMATCH flashkit_window8 fwd" in out
        assert flagged == [[m, "flashkit_window8"] for m in modes]
    elif case == "bwd_mismatch":
        assert "MISMATCH flashkit_window8 bwd (direct)" in out
        assert "dq: max|g-ref|" in out and "vs a float32 window reference" in out
        assert flagged == [["bwd", "flashkit_window8"]]
    else:
        assert not flagged and "MISMATCH" not in out
    assert "window: flashkit_window8: flashkit alone" in out
    notes = next(tmp_path.glob("*.notes.txt")).read_text()
    assert "window: flashkit_window8" in notes and "dk/dv on 3 slices of keys" in notes


def _load_reference():
    """flashkit/testing/reference.py loaded by path (the package itself may not import
    without the extension)."""
    spec = importlib.util.spec_from_file_location(
        "_ref_for_bench", REPO / "python" / "flashkit" / "testing" / "reference.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["_ref_for_bench"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_window_check_against_the_reference():
    """Runner._window_diff (real torch on the CPU): ~0 for the reference's own windowed
    output, large for the output of another window (or of full causal)."""
    torch = pytest.importorskip("torch")
    R = _load_reference()
    g = torch.Generator().manual_seed(0)
    B, S, H_q, H_kv, D = 2, 300, 4, 2, 16
    q, k, v = (torch.randn((B, S, h, D), generator=g) for h in (H_q, H_kv, H_kv))
    this = types.SimpleNamespace(torch=torch)
    for left in (0, 5, 200, 400):
        out, _ = R.attention_reference(q, k, v, causal=True, window=(left, -1))
        diff, mag, finite = runner.Runner._window_diff(this, q, k, v, out, left)
        assert finite and diff < 1e-5 and mag > 0.1, (left, diff)
    out, _ = R.attention_reference(q, k, v, causal=True)
    diff, _, _ = runner.Runner._window_diff(this, q, k, v, out, 5)
    assert diff > 0.1


@pytest.mark.parametrize("chunked", [False, True])
def test_window_grads_check_against_the_reference(monkeypatch, chunked):
    """Runner._window_ref_grads / _window_grad_diffs (real torch on the CPU): ~0 for the
    reference's own windowed gradients (GQA, windows from the diagonal alone to past the
    length; chunked: one kv head per step), large for another window's gradients."""
    torch = pytest.importorskip("torch")
    R = _load_reference()
    if chunked:
        monkeypatch.setattr(runner, "_WINDOW_REF_ELEMS", 1)
    g = torch.Generator().manual_seed(0)
    B, S, H_q, H_kv, D = 2, 300, 4, 2, 16
    q, k, v = (torch.randn((B, S, h, D), generator=g) for h in (H_q, H_kv, H_kv))
    dout = torch.randn((B, S, H_q, D), generator=g)
    this = runner.Runner.__new__(runner.Runner)
    this.torch = torch

    def diffs(grads, left):
        ref = this._window_ref_grads(q, k, v, dout, left)
        # dq on 3 row slices, dk and dv on 3 key slices each
        assert sorted(i for i, *_ in ref.slices) == [0, 0, 0, 1, 1, 1, 2, 2, 2]
        return {name: (d, mag, fin) for name, d, mag, fin in this._window_grad_diffs(grads, ref)}

    for left in (0, 5, 200, 400):
        grads = R.attention_backward_reference(q, k, v, dout, causal=True, window=(left, -1))
        for name, (d, mag, finite) in diffs(grads, left).items():
            assert finite and d < 1e-4, (left, name, d, mag)
            # (left 0: each row sees its own key alone, out = v: dq and dk are exactly 0)
            assert mag > 0.1 or (left == 0 and name != "dv"), (left, name, mag)
    grads = R.attention_backward_reference(q, k, v, dout, causal=True, window=(50, -1))
    got = diffs(grads, 5)
    assert all(got[n][0] > 0.1 for n in ("dq", "dk", "dv")), got


def test_flashkit_deterministic_impl(monkeypatch):
    """flashkit_deterministic: FlashKit with its deterministic backward whatever --deterministic
    says, rows for bwd and fwd_bwd only; refused by a build without the backward."""
    fake, calls = _stand_in_flashkit(monkeypatch)
    Leaf = _Leaf
    assert impls.FLASHKIT_DET in impls.ALL_IMPLS and impls.FLASHKIT_DET not in impls.DEFAULT_IMPLS
    impl = impls.make_impl("flashkit_deterministic")
    assert impl.name == "flashkit_deterministic" and impl.modes == ("bwd", "fwd_bwd")
    assert impl.setup() is None
    impl.configure(deterministic=False)
    assert impl.forward(Leaf(), Leaf(), Leaf(), True) == "out"
    assert impl.backward_fn(Leaf(), Leaf(), Leaf(), "dout", False)() == ("dq", "dk", "dv")
    assert [(c[0], c[-1]) for c in calls] == [("fwd", True), ("fwd", False), ("bwd", True)]
    assert impls.make_impl("flashkit").modes is None
    del fake.attention_backward
    assert "no backward" in impls.make_impl("flashkit_deterministic").setup()
    assert report.impl_sort_key("flashkit") < report.impl_sort_key("flashkit_deterministic") \
        < report.impl_sort_key("sdpa_flash")


def test_runner_skips_the_modes_an_impl_has_no_rows_for(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", _fake_torch())
    det = _FakeImpl("flashkit_deterministic", direct=True)
    det.modes = ("bwd", "fwd_bwd")
    fakes = {"flashkit": _FakeImpl("flashkit", direct=True), "flashkit_deterministic": det,
             "sdpa_flash": _FakeImpl("sdpa_flash")}
    assert _run_one_config(monkeypatch, tmp_path, fakes, False, ["fwd", "bwd"]) == 0
    out = capsys.readouterr().out
    rows = report.read_csv(next(tmp_path.glob("*.csv")))
    assert sorted((r["impl"], r["mode"]) for r in rows) == [
        ("flashkit", "bwd"), ("flashkit", "fwd"), ("flashkit_deterministic", "bwd"),
        ("sdpa_flash", "bwd"), ("sdpa_flash", "fwd")]
    assert "not measured" not in out and det.direct_calls >= 1
