"""Run a portable test module's cases on CPython (in-process) and on the MicroPython
unix port (one subprocess per module, .mpy-compiled, constrained heap), and report
each case as its own pytest test so a failure is named."""

import importlib
import os
import subprocess
import sys

import pytest

from fleetwire.host.rig import build, micropython
from fleetwire.host.portable.vectors import parse_results

HERE = os.path.dirname(os.path.abspath(__file__))
_mp_results = {}


def case_names(modname):
    sys.path.insert(0, HERE)
    try:
        mod = importlib.import_module(modname)
    finally:
        sys.path.remove(HERE)
    return mod, sorted(n for n in dir(mod) if n.startswith("test_"))


def run_on_micropython(modname, board_lib, tmpdir, heap="96K", extra=()):
    """-> {case: None | failure text} for every case of the module, run once per session.

    extra: paths of further modules the cases import by their bare name (host code
    such as host/portable/norflash.py, which is not in the board tree)."""
    key = (modname, heap)
    if key not in _mp_results:
        cross = build.mpy_cross_command()
        srcs = [os.path.join(HERE, f + ".py") for f in (modname, "run")] + list(extra)
        for src in srcs:
            f = os.path.basename(src)[:-3]
            r = subprocess.run(
                [cross, "-o", os.path.join(tmpdir, f + ".mpy"), "-s", f + ".py", src],
                capture_output=True,
                text=True,
            )
            assert r.returncode == 0, r.stderr
        env_lib = board_lib + os.pathsep + tmpdir
        r = micropython.run(["-m", "run", modname], lib=env_lib, heap=heap, timeout=600)
        res = parse_results(r.stdout)
        if not res:
            res = {"<module>": "no results; exit %d\n%s\n%s" % (r.returncode, r.stdout, r.stderr)}
        _mp_results[key] = res
    return _mp_results[key]


def make_tests(modname, heap="96K", extra=()):
    """-> (test_cpython, test_micropython) to assign in a pytest module."""
    mod, names = case_names(modname)

    @pytest.mark.parametrize("case", names)
    def test_cpython(case):
        getattr(mod, case)()

    @pytest.mark.micropython
    @pytest.mark.parametrize("case", names)
    def test_micropython(case, board_lib, tmp_path_factory):
        res = run_on_micropython(modname, board_lib, str(tmp_path_factory.mktemp("portable")), heap, extra)
        assert case in res, "case did not run on MicroPython: %r" % res.get("<module>", res)
        assert res[case] is None, res[case]

    return test_cpython, test_micropython
