"""The deterministic backward's trace tool (scripts/dev/bwd_det_trace.py) reads back the line
that the FLASHKIT_BWD_DET_TRACE build of src/kernels/bwd_sm90/kernel_pp.cuh prints: its field
names must be the printf's, in order, and the shares it derives must be the sums' ratios."""
import importlib.util
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def load_tool():
    spec = importlib.util.spec_from_file_location("bwd_det_trace", REPO / "scripts" / "dev" / "bwd_det_trace.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_fields_match_the_kernel_printf():
    tool = load_tool()
    src = (REPO / "src" / "kernels" / "bwd_sm90" / "kernel_pp.cuh").read_text()
    fmt = re.search(r'printf\("(det_trace [^;]*?)\\n"', src.replace('"\n               "', ""))
    assert fmt, "the trace printf was not found in kernel_pp.cuh"
    names = re.findall(r"(\w+)=%", fmt.group(1))
    assert tuple(names) == tool.FIELDS


def test_parse_and_shares():
    tool = load_tool()
    line = ("det_trace D=128 batch=1 h_q=16 seqlen_q=16384 seqlen_k=16384 causal=0 rotate=1 grid=2048 "
            "issuing_warps=8 sends=4000 wait_ns=8000000 release_ns=2000000 cta_ns=5000000 span_ns=2000000")
    text = "case D128 ...\n" + line + "\nother output\n" + line.replace("sends=4000", "sends=2000") + "\n"
    recs = tool.parse(text)
    assert len(recs) == 2 and recs[0]["grid"] == 2048 and recs[1]["sends"] == 2000
    s = tool.shares(recs[0])
    assert s["wait_share"] == 8000000 / (5000000 * 8)
    assert s["release_share"] == 2000000 / (5000000 * 8)
    assert s["wait_us_per_send"] == 2.0 and s["resident"] == 2.5
    out = tool.summarize(text)  # one line per shape: the last call's
    assert out.count("\n") == 0 and "(4.00 us/send)" in out and "waits 20.0%" in out
