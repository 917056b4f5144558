"""Fixtures shared by the whole suite."""

import os
import subprocess
import sys

import pytest

from fleetwire.host.rig import build, micropython

pytest_plugins = ["fleetwire.host.testing.pytest_plugin", "fleetwire.host.testing.hil"]

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from support import ROOT  # noqa: F401,E402


@pytest.fixture(scope="session")
def board_lib(tmp_path_factory):
    """The board tree as a board runs it (.mpy, built by `fleetwire build --mpy`): the
    directory to put on MICROPYPATH."""
    out = tmp_path_factory.mktemp("board-mpy")
    build.build(str(out), mpy=True)
    return os.path.join(str(out), "lib")


@pytest.fixture(scope="session")
def board_lib_py(tmp_path_factory):
    """The board tree as .py sources."""
    out = tmp_path_factory.mktemp("board-py")
    build.build(str(out))
    return os.path.join(str(out), "lib")


class MicroPythonRunner:
    """Runs scripts on the MicroPython unix port with the board tree importable."""

    def __init__(self, lib):
        self.lib = lib

    def run(self, args, heap="96K", timeout=120, check=True, **kw):
        r = micropython.run(args, lib=self.lib, heap=heap, timeout=timeout, **kw)
        if check and r.returncode:
            raise AssertionError(
                "micropython %s exited %d\nstdout:\n%s\nstderr:\n%s"
                % (" ".join(map(str, args)), r.returncode, r.stdout, r.stderr)
            )
        return r

    def exec(self, code, heap="96K", **kw):
        return self.run(["-c", code], heap=heap, **kw)


@pytest.fixture(scope="session")
def mpy(board_lib):
    """Run code on real MicroPython (unix port) against the .mpy board tree."""
    return MicroPythonRunner(board_lib)


def run_cpython(args, **kw):
    return subprocess.run([sys.executable] + list(args), capture_output=True, text=True, **kw)
