"""Every portable cases module (tests/portable/*_cases.py: the session, its statements, the
stores, the NOR flash, the fronts' shared cases, the vitals record) on CPython and on the
MicroPython unix port, each case its own test."""

import pytest

from portable.harness import cases, modules, run_on_micropython

CASES = [(m, c) for m in modules() for c in cases(m)[1]]
IDS = ["%s-%s" % (m[: -len("_cases")], c) for m, c in CASES]


@pytest.mark.parametrize("module,case", CASES, ids=IDS)
def test_cpython(module, case):
    getattr(cases(module)[0], case)()


@pytest.mark.parametrize("module,case", CASES, ids=IDS)
def test_micropython(module, case, board_lib, tmp_path_factory):
    res = run_on_micropython(module, board_lib, str(tmp_path_factory.mktemp("portable")))
    assert case in res, "case did not run on MicroPython: %r" % res.get("<module>", res)
    assert res[case] is None, res[case]
