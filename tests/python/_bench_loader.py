"""Shared by the CPU tests of flashkit.bench (test_bench_cpu.py, test_bench_decode_cpu.py,
test_bench_mla_cpu.py): the bench package loaded from the source tree under a private module
name, so no build and no installed flashkit (nor torch) is needed, and the results-file
columns SPEC §4 fixes."""

import importlib
import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCH_DIR = REPO / "python" / "flashkit" / "bench"
SPEC_COLUMNS = ("op,impl,dtype,D,Dv,B,H_q,H_kv,S_q,S_k,causal,mode,page_size,value,unit,"
                "gpu,date,commit")


def load_bench(name, submodules):
    """python/flashkit/bench as package `name` (loaded once), with `submodules` imported and
    set as its attributes."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(
        name, BENCH_DIR / "__init__.py", submodule_search_locations=[str(BENCH_DIR)])
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    for sub in submodules:
        setattr(mod, sub, importlib.import_module(f"{name}.{sub}"))
    return mod
