"""Run a portable cases module (tests/portable/*_cases.py) on CPython (in-process) and on the
MicroPython unix port (one subprocess per module, .mpy-compiled, at the heap the module asks
for), each case its own pytest test so a failure is named. test_portable.py collects every
cases module there is: a new one needs no file of its own."""

import importlib
import os
import subprocess

from fleetwire.host.portable import PATH as PORTABLE
from fleetwire.host.portable.vectors import parse_results
from fleetwire.host.rig import build, micropython

HERE = os.path.dirname(os.path.abspath(__file__))
_mp_results = {}


def modules():
    """The cases modules, by name."""
    return sorted(f[:-3] for f in os.listdir(HERE) if f.endswith("_cases.py"))


def cases(modname):
    """-> (the module, the names of its cases). tests/portable is on pytest's pythonpath:
    the cases import run and each other by their bare names, as on MicroPython."""
    mod = importlib.import_module(modname)
    return mod, sorted(n for n in dir(mod) if n.startswith("test_"))


def source(name):
    """The file of a module a cases module imports by its bare name: beside it, or host code
    that also runs on MicroPython (fleetwire.host.portable: not in the board tree)."""
    for d in (HERE, PORTABLE):
        p = os.path.join(d, name + ".py")
        if os.path.exists(p):
            return p
    raise FileNotFoundError("%s.py is neither in %s nor in %s" % (name, HERE, PORTABLE))


def run_on_micropython(modname, board_lib, tmpdir):
    """-> {case: None | failure text} for every case of the module, run once per session."""
    if modname not in _mp_results:
        mod, _ = cases(modname)
        cross = build.mpy_cross_command()
        for name in (modname, "run") + tuple(mod.ALSO):
            r = subprocess.run(
                [cross, "-o", os.path.join(tmpdir, name + ".mpy"), "-s", name + ".py", source(name)],
                capture_output=True,
                text=True,
            )
            assert r.returncode == 0, r.stderr
        env_lib = board_lib + os.pathsep + tmpdir
        r = micropython.run(["-m", "run", modname], lib=env_lib, heap=mod.HEAP, timeout=600)
        res = parse_results(r.stdout)
        if not res:
            res = {"<module>": "no results; exit %d\n%s\n%s" % (r.returncode, r.stdout, r.stderr)}
        _mp_results[modname] = res
    return _mp_results[modname]
