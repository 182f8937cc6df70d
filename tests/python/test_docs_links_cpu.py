"""The results files and plots that the README and the docs name exist (a file moved to bench/results/history/
must be named there). Paths in braces (``x-{a,b}.csv``) are expanded as a shell would."""
import itertools
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
PATH = re.compile(r"bench/results/[A-Za-z0-9_./{},-]+\.(?:csv|png|txt|log)")
BRACES = re.compile(r"\{([^{}]*)\}")


def _expand(path: str) -> list[str]:
    parts = BRACES.split(path)  # literal, alternatives, literal, ...
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(c) for c in itertools.product(*choices)]


def _docs() -> list[pathlib.Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_expand():
    assert _expand("a-{x,y}-{1,2}.csv") == ["a-x-1.csv", "a-x-2.csv", "a-y-1.csv", "a-y-2.csv"]
    assert _expand("a.csv") == ["a.csv"]


def test_named_results_files_exist():
    missing = []
    for doc in _docs():
        for m in PATH.finditer(doc.read_text(encoding="utf-8")):
            if "{" in m.group(0) and "}" not in m.group(0):
                continue  # (a brace group cut by the pattern's end: `{csv,png,notes.txt,log}` ends in .log)
            for p in _expand(m.group(0)):
                if "*" not in p and not (ROOT / p).exists():
                    missing.append(f"{doc.relative_to(ROOT)}: {p}")
    assert not missing, "results files named in the docs but absent:\n" + "\n".join(sorted(set(missing)))
