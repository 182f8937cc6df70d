"""The measuring loop: side-by-side TFLOPS of FlashKit and its peers on one GPU.

Per configuration: fresh ``torch.randn`` inputs; an SDPA reference output (and gradients
when a backward mode is asked); for each implementation a first call that must succeed
and match the reference, then the timed modes.  Rows go to the CSV as soon as they are
measured.

Modes: ``fwd`` times the forward; ``bwd`` times the backward alone: an implementation's own
backward entry point given the forward's saved results when it has one
(``Impl.backward_fn``: FlashKit's ``attention_backward`` from out and lse), otherwise
``torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)`` on a graph built once
(the FlashAttention benchmarks' way); ``fwd_bwd`` times a forward and its autograd
backward together.

``--window LEFT`` (RunOptions.window) adds rows of FlashKit alone with a causal sliding
window ``(LEFT, 0)`` on the causal configurations (impl ``flashkit_window<LEFT>``), timed in
every selected mode the way flashkit is (bwd: ``attention_backward`` with the window, from
the saved out and lse). SDPA has no window, so the checks use float32 references of the
window on slices: the output on three slices of query rows (first, middle, last), and in
the backward modes dq on the same rows and dk / dv on three slices of keys (autograd of a
masked attention over every query row that sees them). Its TFLOPS count only the visible
(query, key) pairs (``sweeps.window_flops``, x 2.5 bwd, x 3.5 fwd_bwd).
"""

from __future__ import annotations

import platform
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from . import impls as impls_mod
from . import report, sweeps, timing

DTYPES = ("bf16", "fp16")
_MAX_LISTED = 20  # mismatches / warnings listed in the closing summary (all are in the notes)
# Rows (or keys) per slice of the --window checks, and the most float32 score elements one
# step of the windowed reference backward holds at once (it loops over kv heads to stay
# under it: 2^26 elements = 256 MiB per score-sized tensor).
_WINDOW_SLICE = 128
_WINDOW_REF_ELEMS = 1 << 26
WINDOW_REF_NAME = "a float32 window reference"

# Warnings torch emits when an op has no autograd formula: a backward through it would
# silently give wrong or no gradients, so it counts as "no backward".
_NO_AUTOGRAD_HINTS = ("autograd kernel was not registered", "does not have an autograd",
                      "not implemented for autograd", "derivative for")


@dataclass
class RunOptions:
    configs: Sequence[sweeps.Config]
    modes: Sequence[str]
    dtype: str
    impls: Sequence[str]
    out_dir: str
    tag: Optional[str] = None
    plot: bool = True
    quick: bool = False
    atol: float = 2e-2
    argv: Sequence[str] = field(default_factory=list)
    deterministic: bool = False  # FlashKit's backward in its deterministic mode
    window: Optional[int] = None  # --window LEFT: flashkit_window<LEFT> rows (causal configs)


class _Fatal(Exception):
    """The CUDA context is broken (illegal address, assert): stop measuring."""


@dataclass
class WindowGrads:
    """Reference gradients of a --window run on slices: (index, lo, hi, ref) with index 0, 1,
    2 for dq, dk, dv and ref the float32 gradient of rows (dq) or keys (dk, dv) lo..hi-1,
    to compare with grads[index][:, lo:hi]."""

    slices: list = field(default_factory=list)


def _short(exc_or_msg, limit: int = 240) -> str:
    if isinstance(exc_or_msg, BaseException):
        text = f"{type(exc_or_msg).__name__}: {exc_or_msg}"
    else:
        text = str(exc_or_msg)
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    text = lines[0] if lines else text
    return text if len(text) <= limit else text[: limit - 3] + "..."


class BaseRunner:
    """What the prefill, decode and MLA measuring loops share: the run's metadata, progress
    output, the CUDA context check, the CSV loop that survives Ctrl-C and a broken context,
    and the pieces of the closing summary (plot, notes header, warnings, stderr digest, exit
    status). Subclasses set up their own timing and say what they measured."""

    def __init__(self, opts, out=None) -> None:
        import torch

        self.torch = torch
        self.opts = opts
        self.out = out or sys.stdout
        self.rows: list[dict] = []
        self.marks: set = set()          # the measurements whose output check failed
        self.not_measured: dict = {}     # (impl, [mode,] reason) -> [config labels]
        self.problems: list[str] = []    # things that make the exit code 1
        self.gpu = torch.cuda.get_device_name()
        self.date = report.today()
        self.commit = report.git_commit()

    # -- output ---------------------------------------------------------------------------

    def say(self, msg: str = "") -> None:
        print(msg, file=self.out, flush=True)

    def _not_measured(self, key: tuple, what: str, reason: str, label: str) -> None:
        """Records label under key; says so the first time key comes up."""
        if key not in self.not_measured:
            self.say(f"  note: {what} not measured ({label.strip()}): {reason}"
                     "  [reported once; see summary]")
        self.not_measured.setdefault(key, []).append(label)

    # -- GPU helpers ------------------------------------------------------------------------

    def _check_context(self) -> None:
        """After an exception: is the CUDA context still usable?"""
        torch = self.torch
        try:
            torch.cuda.synchronize()
            torch.ones(1, device="cuda").add_(1).item()
        except Exception as e:
            raise _Fatal(_short(e)) from e

    def _l2_bytes(self) -> int:
        props = self.torch.cuda.get_device_properties(0)
        return int(getattr(props, "L2_cache_size", 50 * 2**20) or 50 * 2**20)

    @staticmethod
    def _triton_version() -> str:
        try:
            import triton
            return triton.__version__
        except Exception:
            return "none"

    # -- the loop -------------------------------------------------------------------------

    def _measure_into(self, csv_path: Path, measure) -> bool:
        """Calls measure(writer) with the results CSV open; returns True when interrupted.
        Ctrl-C and a broken CUDA context stop it early, keeping the rows written so far."""
        interrupted = False
        writer = report.CsvWriter(csv_path)
        try:
            measure(writer)
        except KeyboardInterrupt:
            interrupted = True
            self.say("\ninterrupted: keeping what was measured")
        except _Fatal as e:
            self.problems.append(f"CUDA context broken, run stopped early: {e}")
            self.say(f"\n!!! CUDA CONTEXT BROKEN, stopping early: {e}")
        finally:
            writer.close()
        return interrupted

    # -- the end --------------------------------------------------------------------------

    def _plot(self, plot_rows, csv_path: Path) -> Optional[Path]:
        """plot_rows(rows, <csv>.png) when asked for and possible; the PNG's path or None."""
        png = None
        if self.opts.plot and self.rows:
            if not report.have_matplotlib():
                self.say(f"note: {report.MATPLOTLIB_MISSING}")
            else:
                try:
                    png = plot_rows(self.rows, csv_path.with_suffix(".png"))
                except Exception as e:  # a plot must never lose a run
                    self.say(f"note: plot failed: {_short(e)}")
        return png

    def _summarize(self, flagged: Sequence[str], heading: str, digest_item: str,
                   notes_path: Path) -> list[str]:
        """Says the flagged outputs (the first _MAX_LISTED), the problems, and an empty run;
        returns the digest of all that for stderr."""
        digest = []
        if flagged:
            self.say(heading)
            for m in flagged[:_MAX_LISTED]:
                self.say("  " + m)
            if len(flagged) > _MAX_LISTED:
                self.say(f"  ... and {len(flagged) - _MAX_LISTED} more in {notes_path}")
            digest.append(digest_item)
        for p in self.problems:
            self.say(f"!!! {p}")
            digest.append(p)
        if not self.rows:
            self.say("!!! nothing was measured")
            digest.append("nothing was measured")
        return digest

    def _exit_status(self, prog: str, digest: Sequence[str], notes_path: Path,
                     interrupted: bool, flagged: Sequence[str]) -> int:
        """The digest on stderr; 130 interrupted, 1 something is wrong, else 0."""
        if digest:
            print(f"{prog}: {'; '.join(digest)} (see {notes_path})", file=sys.stderr,
                  flush=True)
        if interrupted:
            return 130
        return 1 if (flagged or self.problems or not self.rows) else 0

    def _notes_head(self, cudnn: bool = True) -> list[str]:
        torch = self.torch
        return [f"command: python -m flashkit.bench {' '.join(self.opts.argv)}",
                f"gpu: {self.gpu}", f"date: {self.date}", f"commit: {self.commit}",
                f"torch: {torch.__version__} cuda {torch.version.cuda}"
                + (f" cudnn {torch.backends.cudnn.version()}" if cudnn else "")]

    def _finish_sweep(self, csv_path: Path, interrupted: bool, *, plot_rows, flagged,
                      heading: str, digest_item: str, report_text, prog: str) -> int:
        """The closing summary of the decode and MLA sweeps (not_measured keys (impl, reason)):
        plot, notes file, what was not measured, the flagged outputs and problems, where the
        files are, then report_text() (the op's table and bar checks) last."""
        self.say("")
        png = self._plot(plot_rows, csv_path)
        notes_path = csv_path.with_suffix(".notes.txt")
        notes_path.write_text(self._notes_text())
        if self.not_measured:
            self.say("not measured:")
            for (impl, reason), labels in self.not_measured.items():
                self.say(f"  {impl}: {len(labels)} config(s): {reason}")
        digest = self._summarize(flagged, heading, digest_item, notes_path)
        self.say(f"\nresults: {csv_path} ({len(self.rows)} rows)")
        if png:
            self.say(f"plot:    {png}")
        self.say(f"notes:   {notes_path}")
        self.say("")
        self.say(report_text())
        return self._exit_status(prog, digest, notes_path, interrupted, flagged)

    def _notes_text(self) -> str:
        raise NotImplementedError


class Runner(BaseRunner):
    def __init__(self, opts: RunOptions, out=None) -> None:
        super().__init__(opts, out)
        torch = self.torch
        self.dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[opts.dtype]
        self.timing = timing.QUICK if opts.quick else timing.DEFAULT
        self.mismatches: list[str] = []
        # marks: (mode, impl, D, causal, S, B, H) that mismatched;
        # not_measured: (impl, mode, reason) -> [config labels]

    # -- output ---------------------------------------------------------------------------

    def loud(self, msg: str) -> None:
        """A warning that must not go unnoticed: '!!!' lines in the progress stream (the
        run's closing summary repeats them, and a one-line digest goes to stderr)."""
        self.say(msg)

    def skip(self, impl: str, mode: str, reason: str, cfg: sweeps.Config) -> None:
        self._not_measured((impl, mode, reason), f"{impl} {mode}", reason, cfg.label())

    # -- GPU helpers ------------------------------------------------------------------------

    def _call(self, impl, fn):
        """Run fn once inside impl's context; returns (result, warning messages)."""
        torch = self.torch
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with impl.context():
                result = fn()
            torch.cuda.synchronize()
        return result, [str(w.message) for w in caught]

    def _time(self, impl, fn) -> float:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with impl.context():
                return timing.bench_median_ms(fn, self.timing)

    def _diff(self, out, ref) -> tuple[float, float, bool]:
        """(max |out - ref|, max |ref|, out all finite)."""
        o, r = out.float(), ref.float()
        finite = bool(self.torch.isfinite(o).all().item())
        return (o - r).abs().max().item(), r.abs().max().item(), finite

    # -- main loop --------------------------------------------------------------------------

    def run(self) -> int:
        torch, opts = self.torch, self.opts
        impls = []
        for name in opts.impls:
            impl = impls_mod.make_impl(name)
            reason = impl.setup()
            if reason is None:
                impl.configure(deterministic=opts.deterministic)
                impls.append(impl)
            elif name == impls_mod.FLASHKIT:
                self.problems.append(f"flashkit not measured: {reason}")
                self.loud(f"!!! FLASHKIT NOT MEASURED: {reason}\n"
                          "!!! (is the extension built and on PYTHONPATH?) "
                          "Measuring the peers only.")
            else:
                self.say(f"note: {name} unavailable: {reason}")
        refs = []
        for name in impls_mod.REFERENCE_ORDER:
            ref = impls_mod.make_impl(name)
            if ref.setup() is None:
                refs.append(ref)
        self.window_impl = None
        if opts.window is not None:
            wimpl = impls_mod.make_impl(impls_mod.window_impl_name(opts.window))
            reason = wimpl.setup()
            if reason is None:
                wimpl.configure(deterministic=opts.deterministic)
                self.window_impl = wimpl
            else:
                self.problems.append(f"{wimpl.name} not measured: {reason}")
                self.loud(f"!!! {wimpl.name.upper()} NOT MEASURED: {reason}")

        csv_path = report.results_path(opts.out_dir, self.gpu, self.date, opts.tag)
        n_meas = len(opts.configs) * len(opts.modes) * len(impls)
        if self.window_impl is not None:
            n_meas += sum(1 for c in opts.configs if c.causal) * len(opts.modes)
        self._print_header(csv_path, impls, n_meas)
        if not impls and self.window_impl is None:
            self.loud("nothing to measure: no implementation available")
            return 1

        def measure(writer) -> None:
            done = 0
            for cfg in opts.configs:
                done = self._run_config(cfg, impls, refs, writer, done, n_meas)
        return self._finish(csv_path, interrupted=self._measure_into(csv_path, measure))

    def _print_header(self, csv_path: Path, impls, n_meas: int) -> None:
        torch = self.torch
        triton_v = self._triton_version()
        cudnn_v = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        t = self.timing
        self.say(f"flashkit.bench prefill | GPU {self.gpu} | {self.opts.dtype} | "
                 f"commit {self.commit} | {self.date}")
        self.say(f"torch {torch.__version__} (CUDA {torch.version.cuda}, cuDNN {cudnn_v}) | "
                 f"triton {triton_v} | python {platform.python_version()}")
        self.say(f"timer {timing.timer_name()}, warm-up {t.warmup_ms:g} ms, "
                 f"repeats {t.rep_ms:g} ms | correctness atol {self.opts.atol:g}")
        self.say(f"impls {', '.join(i.name for i in impls) or '-'} | modes "
                 f"{', '.join(self.opts.modes)} | {len(self.opts.configs)} configs, "
                 f"{n_meas} measurements")
        if any(m != "fwd" for m in self.opts.modes):
            self.say(f"backward: {self._bwd_note()}")
        if self.window_impl is not None:
            self.say(f"window: {self._window_note()}")
        self.say(f"writing {csv_path}")
        if any(i.name == impls_mod.FLEX for i in impls):
            self.say("note: flex compiles once per shape (and mode); the first call of each "
                     "is slow")

    def _run_config(self, cfg, impls, refs, writer, done: int, total: int) -> int:
        torch, opts = self.torch, self.opts
        torch.manual_seed(0)
        shape_q = (cfg.B, cfg.S_q, cfg.H_q, cfg.D)
        shape_kv = (cfg.B, cfg.S_k, cfg.H_kv, cfg.D)
        q = torch.randn(shape_q, device="cuda", dtype=self.dtype)
        k = torch.randn(shape_kv, device="cuda", dtype=self.dtype)
        v = torch.randn(shape_kv, device="cuda", dtype=self.dtype)
        want_bwd = any(m != "fwd" for m in opts.modes)
        dout = torch.randn(shape_q, device="cuda", dtype=self.dtype) if want_bwd else None

        ref_out, ref_name = self._reference_fwd(refs, q, k, v, cfg)
        ref_grads, ref_grad_name = (self._reference_bwd(refs, q, k, v, dout, cfg)
                                    if want_bwd else (None, None))
        if ref_out is None:
            self.say(f"  note: {cfg.label()}: no SDPA backend ran, outputs unverified")

        key = (cfg.D, cfg.causal, cfg.S, cfg.B, cfg.H_q)
        for impl in impls:
            # First call: must work and match the reference, or the impl is skipped here.
            try:
                out, _ = self._call(impl, lambda: impl.forward(q, k, v, cfg.causal))
            except Exception as e:
                self._check_context()
                for mode in opts.modes:
                    self.skip(impl.name, mode, _short(e), cfg)
                done += len(opts.modes)
                continue
            if ref_out is not None:
                d, mag, finite = self._diff(out, ref_out)
                if not finite or d > opts.atol:
                    what = "non-finite output" if not finite else f"max|out-ref| = {d:.3g}"
                    msg = (f"!!! MISMATCH {impl.name} fwd {cfg.label()}: {what} vs {ref_name} "
                           f"(atol {opts.atol:g}, max|ref| = {mag:.3g})")
                    self.loud(msg)
                    self.mismatches.append(msg)
                    self.marks.update((m, impl.name) + key for m in opts.modes)
            del out
            done = self._measure_modes(impl, cfg, q, k, v, dout, key, ref_grads,
                                       ref_grad_name, writer, done, total,
                                       lambda mode: sweeps.flops(cfg, mode))
        if self.window_impl is not None and cfg.causal:
            done = self._run_window(cfg, q, k, v, dout, writer, done, total)
        del q, k, v, dout, ref_out, ref_grads
        torch.cuda.empty_cache()
        return done

    def _measure_modes(self, impl, cfg, q, k, v, dout, key, ref_grads, ref_name, writer,
                       done: int, total: int, flops) -> int:
        """Times impl in each selected mode once its forward has run and been checked (a row
        per mode, TFLOPS from flops(mode)); the backward modes first go through _probe_bwd
        (and bwd through _direct_bwd), their gradients checked against ref_grads."""
        torch, opts = self.torch, self.opts
        grads_state = None  # (leaves, out) once a backward probe succeeded, or why not
        for mode in opts.modes:
            done += 1
            if impl.modes is not None and mode not in impl.modes:
                continue  # (flashkit_deterministic: no fwd rows, its forward is flashkit's)
            if mode == "fwd":
                fn = (lambda impl=impl: impl.forward(q, k, v, cfg.causal))
            else:
                if grads_state is None:
                    grads_state = self._probe_bwd(impl, q, k, v, dout, cfg, key,
                                                  ref_grads, ref_name)
                if isinstance(grads_state, str):
                    self.skip(impl.name, mode, grads_state, cfg)
                    continue
                leaves, o = grads_state
                if mode == "bwd":
                    fn = self._direct_bwd(impl, q, k, v, dout, cfg, key, ref_grads,
                                          ref_name)
                    if isinstance(fn, str):
                        self.skip(impl.name, mode, fn, cfg)
                        continue
                    if fn is None:
                        fn = (lambda o=o, leaves=leaves: torch.autograd.grad(
                            o, leaves, dout, retain_graph=True))
                else:
                    def fn(impl=impl, leaves=leaves):
                        o2 = impl.forward(*leaves, cfg.causal)
                        return torch.autograd.grad(o2, leaves, dout)
                    try:  # fwd_bwd's first call (compiles flex's joint graph, etc.)
                        self._call(impl, fn)
                    except Exception as e:
                        self._check_context()
                        self.skip(impl.name, mode, _short(e), cfg)
                        continue
            try:
                ms = self._time(impl, fn)
            except Exception as e:
                self._check_context()
                self.skip(impl.name, mode, f"timing failed: {_short(e)}", cfg)
                continue
            value = sweeps.tflops(flops(mode), ms)
            row = report.make_row(
                impl=impl.name, dtype=opts.dtype, D=cfg.D, B=cfg.B, H_q=cfg.H_q,
                H_kv=cfg.H_kv, S_q=cfg.S_q, S_k=cfg.S_k, causal=cfg.causal, mode=mode,
                value=value, gpu=self.gpu, date=self.date, commit=self.commit)
            writer.write(row)
            self.rows.append(row)
            flag = "  !MISMATCH" if (mode, impl.name) + key in self.marks else ""
            self.say(f"[{done:>4}/{total}] {cfg.label()} {mode:<7} {impl.name:<14} "
                     f"{value:8.1f} TFLOPS {ms:10.4f} ms{flag}")
        return done

    # -- --window rows ----------------------------------------------------------------------

    def _window_note(self) -> str:
        modes = ", ".join(self.opts.modes)
        note = (f"{self.window_impl.name}: flashkit alone, causal=True window=("
                f"{self.opts.window}, 0), on the causal configs, modes {modes} (no peer has a "
                "sliding window); its TFLOPS count only the visible (query, key) pairs; output "
                "checked against a float32 reference of the window on 3 slices of rows")
        if any(m != "fwd" for m in self.opts.modes):
            note += ("; dq on those rows and dk/dv on 3 slices of keys checked against "
                     "float32 autograd of the masked attention")
        return note

    def _window_diff(self, q, k, v, out, left: int) -> tuple[float, float, bool]:
        """(max |out - ref|, max |ref|, out all finite) over three slices of up to 128 query
        rows (first, middle, last), ref a float32 softmax over each row's window (left, 0):
        a check that costs O(rows x (rows + left)), not O(S^2)."""
        torch = self.torch
        B, S_q, H_q, D = q.shape
        S_k, H_kv = k.shape[1], k.shape[2]
        d, m = S_k - S_q, min(S_q, 128)
        finite = bool(torch.isfinite(out.float()).all().item())
        worst, mag = 0.0, 0.0
        for r0 in sorted({0, max(0, S_q // 2 - m // 2), S_q - m}):
            r1 = r0 + m
            k0, k1 = max(0, r0 + d - left), min(S_k, r1 + d)  # keys these rows can see
            if k1 <= k0:
                continue
            qs = q[:, r0:r1].float().transpose(1, 2)                          # [B, H, m, D]
            ks = k[:, k0:k1].float().repeat_interleave(H_q // H_kv, dim=2).transpose(1, 2)
            vs = v[:, k0:k1].float().repeat_interleave(H_q // H_kv, dim=2).transpose(1, 2)
            s = (qs @ ks.transpose(-1, -2)) * (D ** -0.5)                     # [B, H, m, n]
            i = torch.arange(r0, r1, device=q.device)[:, None]
            j = torch.arange(k0, k1, device=q.device)[None, :]
            s = s.masked_fill(~((j <= i + d) & (j >= i + d - left)), float("-inf"))
            ref = (torch.softmax(s, dim=-1).nan_to_num(0.0) @ vs).transpose(1, 2)
            o = out[:, r0:r1].float()
            worst = max(worst, (o - ref).abs().max().item())
            mag = max(mag, ref.abs().max().item())
        return worst, mag, finite

    @staticmethod
    def _window_slices(n: int) -> list[tuple[int, int]]:
        """Up to three slices [lo, hi) of _WINDOW_SLICE indices of 0..n-1: first, middle,
        last (fewer when they coincide)."""
        m = min(n, _WINDOW_SLICE)
        return [(lo, lo + m) for lo in sorted({0, max(0, n // 2 - m // 2), n - m})]

    def _window_block_grads(self, q, k, v, dout, r0: int, r1: int, left: int):
        """(dq, dk, dv, k0): float32 autograd gradients of attention restricted to query rows
        r0..r1-1 and the keys k0..k1-1 they can see under the causal window (left, 0), for
        the loss sum(out * dout) over those rows. dq [B, r1-r0, H_q, D] is exact for these
        rows (every key they see is in the block); dk / dv [B, k1-k0, H_kv, D] are exact for
        the keys whose every viewer is among the rows. Loops over kv heads so that no score
        tensor holds more than _WINDOW_REF_ELEMS elements."""
        torch = self.torch
        B, S_q, H_q, D = q.shape
        S_k, H_kv = k.shape[1], k.shape[2]
        g, d = H_q // H_kv, S_k - S_q
        k0 = max(0, r0 + d - left)
        k1 = max(k0, min(S_k, r1 + d))
        n, m = k1 - k0, r1 - r0
        f32 = torch.float32
        dq = torch.zeros((B, m, H_q, D), device=q.device, dtype=f32)
        dk = torch.zeros((B, n, H_kv, D), device=q.device, dtype=f32)
        dv = torch.zeros((B, n, H_kv, D), device=q.device, dtype=f32)
        if n == 0:
            return dq, dk, dv, k0
        i = torch.arange(r0, r1, device=q.device)[:, None]
        j = torch.arange(k0, k1, device=q.device)[None, :]
        hidden = ~((j <= i + d) & (j >= i + d - left))
        step = max(1, _WINDOW_REF_ELEMS // (B * g * m * n))  # kv heads per step
        for h0 in range(0, H_kv, step):
            h1 = min(H_kv, h0 + step)
            qs = q[:, r0:r1, h0 * g:h1 * g].to(f32, copy=True).requires_grad_(True)
            ks = k[:, k0:k1, h0:h1].to(f32, copy=True).requires_grad_(True)
            vs = v[:, k0:k1, h0:h1].to(f32, copy=True).requires_grad_(True)
            kr = ks.repeat_interleave(g, dim=2).transpose(1, 2)              # [B, h, n, D]
            vr = vs.repeat_interleave(g, dim=2).transpose(1, 2)
            s = (qs.transpose(1, 2) @ kr.transpose(-1, -2)) * (D ** -0.5)    # [B, h, m, n]
            p = torch.softmax(s.masked_fill(hidden, float("-inf")), dim=-1).nan_to_num(0.0)
            o = (p @ vr).transpose(1, 2)                                      # [B, m, h, D]
            gq, gk, gv = torch.autograd.grad(o, (qs, ks, vs),
                                             dout[:, r0:r1, h0 * g:h1 * g].float())
            dq[:, :, h0 * g:h1 * g] = gq
            dk[:, :, h0:h1] = gk
            dv[:, :, h0:h1] = gv
            del s, p, o, gq, gk, gv
        return dq, dk, dv, k0

    def _window_ref_grads(self, q, k, v, dout, left: int) -> WindowGrads:
        """Reference gradients of the causal window (left, 0) on slices, in float32: dq on
        the three row slices of _window_diff, dk and dv on three slices of up to 128 keys
        (first, middle, last), each from the block of every query row that sees them
        (_window_block_grads): O((128 + left) x (128 + 2 left)) per slice, not O(S^2)."""
        S_q, S_k = q.shape[1], k.shape[1]
        d = S_k - S_q
        ref = WindowGrads()
        for r0, r1 in self._window_slices(S_q):
            dq, _, _, _ = self._window_block_grads(q, k, v, dout, r0, r1, left)
            ref.slices.append((0, r0, r1, dq))
        for c0, c1 in self._window_slices(S_k):
            # the rows that see keys c0..c1-1: i + d - left <= j <= i + d
            r0, r1 = max(0, c0 - d), min(S_q, c1 - d + left)
            if r1 <= r0:  # no row sees these keys: their gradients are zero
                zero = k[:, c0:c1].float() * 0
                ref.slices += [(1, c0, c1, zero), (2, c0, c1, zero)]
                continue
            _, dk, dv, k0 = self._window_block_grads(q, k, v, dout, r0, r1, left)
            # (copies: a view would keep the whole block's gradients alive)
            ref.slices += [(1, c0, c1, dk[:, c0 - k0:c1 - k0].clone()),
                           (2, c0, c1, dv[:, c0 - k0:c1 - k0].clone())]
        return ref

    def _window_grad_diffs(self, grads, ref: WindowGrads):
        """(name, max |g - ref|, max |ref|, g all finite) for dq, dk, dv, over ref's slices
        (finiteness over the whole gradient)."""
        torch = self.torch
        for idx, name in enumerate(("dq", "dk", "dv")):
            g = grads[idx]
            finite = bool(torch.isfinite(g.float()).all().item())
            d = mag = 0.0
            for i, lo, hi, r in ref.slices:
                if i == idx:
                    d = max(d, (g[:, lo:hi].float() - r).abs().max().item())
                    mag = max(mag, r.abs().max().item())
            yield name, d, mag, finite

    def _run_window(self, cfg, q, k, v, dout, writer, done: int, total: int) -> int:
        """The flashkit_window<LEFT> rows of a causal config, one per selected mode: a first
        forward checked against the window reference (_window_diff), reference gradients of
        the window when a backward mode is selected (_window_ref_grads), then the modes timed
        as for flashkit (_measure_modes) with the window's visible-pair FLOPs."""
        impl, opts = self.window_impl, self.opts
        key = (cfg.D, cfg.causal, cfg.S, cfg.B, cfg.H_q)
        try:
            out, _ = self._call(impl, lambda: impl.forward(q, k, v, True))
        except Exception as e:
            self._check_context()
            for mode in opts.modes:
                self.skip(impl.name, mode, _short(e), cfg)
            return done + len(opts.modes)
        try:
            d, mag, finite = self._window_diff(q, k, v, out, impl.left)
        except Exception as e:  # the check itself failed (e.g. out of memory): say so
            self._check_context()
            self.loud(f"  note: {impl.name} {cfg.label()}: output unverified ({_short(e)})")
        else:
            if not finite or d > opts.atol:
                what = "non-finite output" if not finite else f"max|out-ref| = {d:.3g}"
                msg = (f"!!! MISMATCH {impl.name} fwd {cfg.label()}: {what} vs a float32 "
                       f"window reference (atol {opts.atol:g}, max|ref| = {mag:.3g})")
                self.loud(msg)
                self.mismatches.append(msg)
                self.marks.update((m, impl.name) + key for m in opts.modes)
        del out
        ref_grads = None
        if any(m != "fwd" for m in opts.modes):
            try:
                ref_grads = self._window_ref_grads(q, k, v, dout, impl.left)
            except Exception as e:  # as for the output: say so, measure all the same
                self._check_context()
                self.loud(f"  note: {impl.name} {cfg.label()}: gradients unverified "
                          f"({_short(e)})")
        done = self._measure_modes(impl, cfg, q, k, v, dout, key, ref_grads, WINDOW_REF_NAME,
                                   writer, done, total,
                                   lambda mode: sweeps.window_flops(cfg, impl.left, mode))
        del ref_grads
        return done

    def _reference_fwd(self, refs, q, k, v, cfg):
        for ref in refs:
            try:
                out, _ = self._call(ref, lambda: ref.forward(q, k, v, cfg.causal))
                return out, ref.name
            except Exception:
                self._check_context()
        return None, None

    def _leaves(self, q, k, v):
        return tuple(t.detach().clone().requires_grad_(True) for t in (q, k, v))

    def _reference_bwd(self, refs, q, k, v, dout, cfg):
        torch = self.torch
        for ref in refs:
            try:
                leaves = self._leaves(q, k, v)

                def fn():
                    o = ref.forward(*leaves, cfg.causal)
                    return torch.autograd.grad(o, leaves, dout)

                grads, _ = self._call(ref, fn)
                return grads, ref.name
            except Exception:
                self._check_context()
        return None, None

    def _probe_bwd(self, impl, q, k, v, dout, cfg, key, ref_grads, ref_name):
        """Forward with grad-requiring leaves and one backward. Returns (leaves, out) for
        timing, or a string saying why this impl has no backward here."""
        torch = self.torch
        leaves = self._leaves(q, k, v)
        try:
            o, w1 = self._call(impl, lambda: impl.forward(*leaves, cfg.causal))
            if not o.requires_grad:
                return "no backward (output does not require grad: no autograd formula)"
            grads, w2 = self._call(
                impl, lambda: torch.autograd.grad(o, leaves, dout, retain_graph=True))
        except (NotImplementedError, RuntimeError) as e:
            self._check_context()
            return f"no backward: {_short(e)}"
        except Exception as e:
            self._check_context()
            return f"backward failed: {_short(e)}"
        for msg in w1 + w2:
            if any(h in msg for h in _NO_AUTOGRAD_HINTS):
                return f"no backward: {_short(msg)}"
        if any(g is None for g in grads):
            return "no backward (gradients are None)"
        self._check_grads(impl, grads, ref_grads, ref_name, cfg, key, ("bwd", "fwd_bwd"))
        del grads
        return leaves, o

    def _check_grads(self, impl, grads, ref_grads, ref_name, cfg, key, modes,
                     how: str = "") -> None:
        """dq/dk/dv within atol * max(1, max|ref|) of the reference gradients, or a loud
        mismatch that marks `modes` of this impl and config. ref_grads: (dq, dk, dv) of the
        whole problem, or the WindowGrads slices of a --window run."""
        if ref_grads is None:
            return
        if isinstance(ref_grads, WindowGrads):
            diffs = self._window_grad_diffs(grads, ref_grads)
        else:  # lazily: stops at the first gradient out of tolerance
            diffs = ((name,) + self._diff(g, r)
                     for name, g, r in zip(("dq", "dk", "dv"), grads, ref_grads))
        worst = None
        for name, d, mag, finite in diffs:
            tol = self.opts.atol * max(1.0, mag)  # gradients scale with S: relative
            if not finite or d > tol:
                worst = (f"{name}: non-finite" if not finite else
                         f"{name}: max|g-ref| = {d:.3g} > {tol:.3g} (max|ref| = {mag:.3g})")
                break
        if worst:
            msg = f"!!! MISMATCH {impl.name} bwd{how} {cfg.label()}: {worst} vs {ref_name}"
            self.loud(msg)
            self.mismatches.append(msg)
            self.marks.update((m, impl.name) + key for m in modes)

    def _direct_bwd(self, impl, q, k, v, dout, cfg, key, ref_grads, ref_name):
        """The impl's own backward given the saved forward results (Impl.backward_fn),
        called once and checked like the autograd gradients: the closure to time, None
        (time autograd instead) or a string saying why it failed."""
        try:
            fn, _ = self._call(impl, lambda: impl.backward_fn(q, k, v, dout, cfg.causal))
            if fn is None:
                return None
            grads, _ = self._call(impl, fn)
        except Exception as e:
            self._check_context()
            return f"backward failed: {_short(e)}"
        self._check_grads(impl, grads, ref_grads, ref_name, cfg, key, ("bwd",),
                          " (direct)")
        return fn

    def _bwd_note(self) -> str:
        det = "deterministic" if self.opts.deterministic else "fast (dq summed in any order)"
        return (f"flashkit: attention_backward from the saved out/lse, {det}; flashkit_deterministic "
                "(where run): the same with deterministic=True; peers: autograd on a graph built "
                "once (retain_graph)")

    # -- the end ----------------------------------------------------------------------------

    def _finish(self, csv_path: Path, interrupted: bool) -> int:
        self.say("")
        self.say(report.format_tables(self.rows, self.marks))
        self.say("")
        self.say(f"results: {csv_path} ({len(self.rows)} rows)")
        png = self._plot(report.plot_rows, csv_path)
        if png:
            self.say(f"plot:    {png}")
        notes = self._notes_text()
        notes_path = csv_path.with_suffix(".notes.txt")
        notes_path.write_text(notes)
        self.say(f"notes:   {notes_path}")
        if self.not_measured:
            self.say("\nnot measured:")
            for (impl, mode, reason), labels in self.not_measured.items():
                self.say(f"  {impl} {mode}: {len(labels)} config(s): {reason}")
        digest = self._summarize(
            self.mismatches, f"\n!!! {len(self.mismatches)} OUTPUT MISMATCH(ES) against the "
            "SDPA reference; those numbers are marked '!' above and are suspect:",
            f"{len(self.mismatches)} output mismatch(es)", notes_path)
        return self._exit_status("flashkit.bench", digest, notes_path, interrupted,
                                 self.mismatches)

    def _notes_text(self) -> str:
        lines = self._notes_head() + [
            f"timer: {timing.timer_name()} warmup_ms={self.timing.warmup_ms} "
            f"rep_ms={self.timing.rep_ms}",
            f"rows: {len(self.rows)}"]
        if any(m != "fwd" for m in self.opts.modes):
            lines.append(f"backward: {self._bwd_note()}")
        if getattr(self, "window_impl", None) is not None:
            lines.append(f"window: {self._window_note()}")
        for (impl, mode, reason), labels in self.not_measured.items():
            lines.append(f"not measured: {impl} {mode} ({len(labels)} configs): {reason}")
        for m in self.mismatches:
            lines.append(f"mismatch: {m}")
        for p in self.problems:
            lines.append(f"problem: {p}")
        return "\n".join(lines) + "\n"


def run(opts: RunOptions, out=None) -> int:
    return Runner(opts, out).run()
