"""The A/B tests' subprocess runner (conftest run_probe): the drop list clears what the caller's environment holds,
and the names set are set, also where a name is in both. (Until 2026-11-29 the drop list was applied after the set,
so an A/B test that listed its own switch in both ran the same process twice and could not fail.)"""


def test_set_wins_over_drop(run_probe, monkeypatch):
    monkeypatch.setenv("FLASHKIT_PROBE_A", "inherited")
    monkeypatch.setenv("FLASHKIT_PROBE_B", "inherited")
    monkeypatch.setenv("FLASHKIT_PROBE_C", "inherited")
    code = "import os; print(*(os.environ.get(f'FLASHKIT_PROBE_{n}', '-') for n in 'ABC'))"
    out = run_probe(code, {"FLASHKIT_PROBE_A": "1"}, ["FLASHKIT_PROBE_A", "FLASHKIT_PROBE_B"]).split()
    assert out == ["1", "-", "inherited"]


def test_args_and_failure(run_probe):
    assert run_probe("import sys; print(sys.argv[1:])", {}, args=(3, "x")).strip() == "['3', 'x']"
    try:
        run_probe("import sys; sys.exit(3)", {})
    except AssertionError:
        pass
    else:
        raise AssertionError("a failing probe must fail the test")
