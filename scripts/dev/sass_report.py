#!/usr/bin/env python3
"""Static SASS report per kernel (a development tool; no GPU): for each function of a cubin or
library (cuobjdump -sass), its instruction count, the exp2 instructions (MUFU.EX2) and how many of
them are not followed by a branch within 6 instructions ("unfragmented": ptxas could interleave
their chains; the backward's P loop once had none, docs/kernels/bwd.md "The P loop unswitched"),
emulated integer divisions (I2F.U32.RP / I2F.RP, the start of nvcc's division by a register;
MUFU.RCP alone is also a float reciprocal), and the local-memory
loads / stores inside the function's longest backward branch (its main loop) and overall.

    python3 scripts/dev/sass_report.py FILE [name substring ...]
"""
import bisect
import re
import subprocess
import sys


INT_DIV = re.compile(r"I2F(\.U32)?\.RP")


def functions(path):
    out = subprocess.run(["cuobjdump", "-sass", path], capture_output=True, text=True, check=True).stdout
    funcs, fn, arch = {}, None, ""
    for line in out.splitlines():
        m = re.search(r"arch = (\S+)", line)
        if m:
            arch = m.group(1)
        m = re.search(r"Function : (\S+)", line)
        if m:
            fn = (arch, m.group(1))
            funcs[fn] = []
            continue
        m = re.match(r"\s+/\*([0-9a-f]+)\*/\s+(.*?);", line)
        if m and fn:
            funcs[fn].append((int(m.group(1), 16), m.group(2).strip()))
    return funcs


def report(arch, name, ins):
    text = [t for _, t in ins]
    bras = [i for i, t in enumerate(text) if re.search(r"\bBRA\b", t)]
    mufu = [i for i, t in enumerate(text) if "MUFU.EX2" in t]

    def free(i):
        k = bisect.bisect_right(bras, i)
        return not (k < len(bras) and bras[k] - i <= 6)

    addr = {a: i for i, (a, _) in enumerate(ins)}
    loop = None
    for i, (a, t) in enumerate(ins):
        m = re.search(r"\bBRA\b.*?0x([0-9a-f]+)", t)
        if m and int(m.group(1), 16) < a and int(m.group(1), 16) in addr:
            span = (addr[int(m.group(1), 16)], i)
            if loop is None or span[1] - span[0] > loop[1] - loop[0]:
                loop = span
    body = text[loop[0]:loop[1] + 1] if loop else []
    local = lambda xs: (sum("STL" in t for t in xs), sum("LDL" in t for t in xs))  # noqa: E731
    idiv = sum(bool(INT_DIV.match(t)) for t in text)
    print(f"{arch or '-':7} {name[:110]}")
    print(f"        {len(ins)} instr; MUFU.EX2 {len(mufu)} ({sum(map(free, mufu))} unfragmented); "
          f"int divisions {idiv}; STL/LDL in the main loop {local(body)}, "
          f"overall {local(text)}")


def main(path, pats):
    for (arch, name), ins in functions(path).items():
        if all(p in name for p in pats):
            report(arch, name, ins)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
