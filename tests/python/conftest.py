"""pytest configuration of FlashKit's Python tests (settings in pytest.ini beside this file).

Two tiers:
- CPU tests (no marker): the reference against a naive loop, and the argument checks of
  the Python/C++ API with numpy arrays and fake CUDA descriptors. They need numpy only;
  the ones that call the native extension skip when it is not built, unless
  FLASHKIT_REQUIRE_EXT=1 (CI), which turns a missing extension into an error.
- GPU tests (``@pytest.mark.gpu``, run with ``pytest -m gpu tests/python``): skipped when
  torch is missing, CUDA is unavailable or the extension does not import, unless
  FLASHKIT_REQUIRE_GPU=1 (scripts/gpu_suite.sh), which makes that an error.

``flashkit`` is imported from wherever Python finds it (an install, or PYTHONPATH set to a
build's ``<build>/python``); when it is not found at all, the source tree's ``python/`` is
appended to ``sys.path`` so the pure-Python parts (the reference) can still be tested.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

if importlib.util.find_spec("flashkit") is None:
    sys.path.append(str(REPO / "python"))


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no", "off")


REQUIRE_EXT = _env_flag("FLASHKIT_REQUIRE_EXT")
REQUIRE_GPU = _env_flag("FLASHKIT_REQUIRE_GPU")


@functools.lru_cache(maxsize=None)
def extension_error() -> str | None:
    """None when flashkit and its native extension import; otherwise the reason."""
    try:
        import flashkit
    except Exception as e:  # noqa: BLE001 - any import failure means "not usable"
        return f"import flashkit failed: {type(e).__name__}: {e}"
    if getattr(flashkit, "_C", None) is None:
        why = getattr(flashkit, "_C_IMPORT_ERROR", None) or "unknown reason"
        return f"flashkit's native extension flashkit._C is not available: {why}"
    return None


@functools.lru_cache(maxsize=None)
def gpu_error() -> str | None:
    """None when the GPU tests can run; otherwise the reason."""
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        return f"torch is not importable: {type(e).__name__}: {e}"
    if not torch.cuda.is_available():
        return "torch.cuda.is_available() is False"
    return extension_error()


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "gpu: needs a CUDA GPU, torch and flashkit's native extension")
    if REQUIRE_EXT and extension_error():
        raise pytest.UsageError(f"FLASHKIT_REQUIRE_EXT is set but {extension_error()}")
    if REQUIRE_GPU and gpu_error():
        raise pytest.UsageError(f"FLASHKIT_REQUIRE_GPU is set but {gpu_error()}")


def pytest_report_header(config):
    lines = []
    err = extension_error()
    if err:
        lines.append(f"flashkit: {err}")
    else:
        import flashkit

        lines.append(f"flashkit {flashkit.__version__} from {Path(flashkit.__file__).parent}; "
                     f"compiled: {', '.join(flashkit.compiled_fwd_variants()) or 'none'}")
    try:
        import torch

        gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA device"
        lines.append(f"torch {torch.__version__} (CUDA {torch.version.cuda}), {gpu}")
    except Exception:  # noqa: BLE001
        lines.append("torch: not installed")
    return lines


def pytest_collection_modifyitems(config, items):
    reason = None
    for item in items:
        if item.get_closest_marker("gpu") is None:
            continue
        if reason is None:
            reason = gpu_error() or ""
        if reason:
            item.add_marker(pytest.mark.skip(reason=f"GPU test: {reason}"))


@pytest.fixture(scope="session")
def flashkit_ext():
    """The flashkit module with its native extension; skips (or, with
    FLASHKIT_REQUIRE_EXT=1, fails) when the extension is not available."""
    err = extension_error()
    if err:
        if REQUIRE_EXT:
            pytest.fail(err)
        pytest.skip(err)
    import flashkit

    return flashkit


def _load_reference_module():
    try:
        from flashkit.testing import reference
    except Exception:  # noqa: BLE001 - flashkit itself broken: load the file alone
        path = REPO / "python" / "flashkit" / "testing" / "reference.py"
        spec = importlib.util.spec_from_file_location("flashkit_testing_reference", path)
        reference = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = reference  # dataclasses look the module up by name
        spec.loader.exec_module(reference)
    return reference


@pytest.fixture(scope="session")
def R():
    """flashkit.testing.reference (loaded from the source tree if flashkit won't import)."""
    return _load_reference_module()


def _run_probe(code: str, env_set: dict, env_drop=(), args=(), timeout: int = 600) -> str:
    """Runs `code` in a fresh Python (environment switches are read once per process) with
    `env_drop` removed from this environment and then `env_set` added (a name in both is set:
    the drop list clears what the caller's environment may hold, the set wins); returns its
    stdout, failing the test with the child's stderr if it exits non-zero."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if k not in set(env_drop)}
    env.update(env_set)
    r = subprocess.run([sys.executable, "-c", code, *map(str, args)], env=env, capture_output=True, text=True,
                       timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


@pytest.fixture
def run_probe():
    """The subprocess runner of the A/B tests that compare two kernel variants chosen by
    environment switches (see _run_probe)."""
    return _run_probe


def _portable_sanitize_small(extra_env: dict) -> None:
    """scripts/sanitize_small.py at every head dim on the portable forward family
    (FLASHKIT_FWD_PORTABLE=1, plus `extra_env`), in subprocesses (the switches are read once per
    process): first that every compiled variant does run the portable family under that
    environment, then every case against the reference."""
    import subprocess

    env = dict(os.environ, FLASHKIT_FWD_PORTABLE="1", **extra_env)
    probe = ("import flashkit; v = flashkit.compiled_fwd_variants(); "
             "f = {flashkit.fwd_kernel_family(*x.split('/')[:1], int(x.split('/')[1])) for x in v}; "
             "print(sorted(f))")
    r = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "['sm80']", r.stdout
    repo = Path(__file__).resolve().parents[2]
    cmd = [sys.executable, str(repo / "scripts" / "sanitize_small.py"), "--dims", "64", "96", "128", "192", "256"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"portable path failed ({extra_env}):\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    assert "cases passed" in r.stdout, r.stdout[-2000:]


@pytest.fixture
def portable_sanitize_small():
    """_portable_sanitize_small: the portable forward family's reference checks, with extra switches."""
    return _portable_sanitize_small
