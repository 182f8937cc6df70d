"""Per-function SASS comparison of two builds (cubins, .so files or objects): which functions of NEW have the same
instructions as in OLD, which differ, which are new (offsets and whitespace ignored).

    python3 scripts/dev/sass_diff.py OLD NEW [--rename FROM=TO ...] [--cuobjdump PATH]

--rename: a regular expression over a NEW function's name and its replacement (re.sub), applied before the lookup in
OLD: a template parameter added since, e.g. the forward's kCluster:
    --rename '(fwd_kernel_persistent.*ELb[01])ELb0(EEEvNS_9FwdParamsE)=\1\2'
cuobjdump needs nvdisasm on the PATH (or beside it). Exit 1 if a function differs. Every instruction counts, offsets
past 0xffff too (a `{4}`-digit offset pattern once cut the comparison of large kernels at 4096 instructions).
"""
import argparse
import hashlib
import os
import re
import subprocess
import sys

_INST = re.compile(r"\s+/\*[0-9a-f]{4,}\*/")
_FUNC = re.compile(r"\s+Function : (\S+)")


def functions(path, cuobjdump):
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(os.path.abspath(cuobjdump)) + os.pathsep + env.get("PATH", "")
    out = subprocess.run([cuobjdump, "-sass", path], capture_output=True, text=True, env=env, check=True).stdout
    funcs, cur, buf = {}, None, []
    for line in out.splitlines():
        m = _FUNC.match(line)
        if m:
            if cur:
                funcs[cur] = (hashlib.md5("".join(buf).encode()).hexdigest(), len(buf))
            cur, buf = m.group(1), []
        elif cur and _INST.match(line):
            # (whitespace collapsed: cuobjdump pads each line to the file's widest, so one changed function could
            # make every other one of the file look different)
            buf.append(" ".join(re.sub(r"/\*[0-9a-f]*\*/", "", line).split()))
    if cur:
        funcs[cur] = (hashlib.md5("".join(buf).encode()).hexdigest(), len(buf))
    return funcs


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--rename", action="append", default=[], metavar="FROM=TO")
    p.add_argument("--cuobjdump", default="cuobjdump")
    a = p.parse_args(argv)
    old, new = functions(a.old, a.cuobjdump), functions(a.new, a.cuobjdump)
    same = differ = added = 0
    for name, (digest, count) in sorted(new.items()):
        key = name
        for r in a.rename:
            frm, to = r.split("=", 1)
            key = re.sub(frm, to, key)
        if key not in old:
            added += 1
            print(f"new   {count:6d} {name}")
        elif old[key][0] == digest:
            same += 1
        else:
            differ += 1
            print(f"DIFF  {count:6d} {name} (old: {old[key][1]} instructions)")
    print(f"{same} same, {differ} different, {added} new; {len(old)} functions in {a.old}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
