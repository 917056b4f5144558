"""The three source folders stay honest: device code never imports host code,
shared code imports neither, and the board tree holds device/ + shared/ only."""

import ast
import os
import subprocess
import sys

import pytest

from support import ROOT


def imports_of(folder):
    for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                tree = ast.parse(open(path, encoding="utf-8").read())
                for node in ast.walk(tree):
                    if isinstance(node, ast.Import):
                        for a in node.names:
                            yield path, a.name, 0
                    elif isinstance(node, ast.ImportFrom):
                        yield path, node.module or "", node.level


def test_shared_imports_only_itself_and_micropython_builtins():
    allowed = {"micropython", "struct", "sys"}
    for path, mod, level in imports_of("shared"):
        if level:
            continue  # relative: inside the codec
        assert mod.split(".")[0] in allowed, "%s imports %s" % (path, mod)


def test_device_never_imports_host_or_tools():
    for path, mod, level in imports_of("device"):
        assert not mod.startswith(("fleetwire.host", "fleetwire.tools")), "%s imports %s" % (path, mod)
        if level:
            assert not mod.startswith(("host", "tools")), "%s imports %s" % (path, mod)


def test_board_tree_holds_device_and_codec_only(board_lib_py):
    files = []
    for dirpath, _, names in os.walk(board_lib_py):
        files += [os.path.relpath(os.path.join(dirpath, n), board_lib_py) for n in names]
    assert "fleetwire/__init__.py" in files
    assert "fleetwire/codec/wire.py" in files
    assert not [f for f in files if "/host/" in f or "/tools/" in f]


# Compiling .py on the board needs far more heap than loading .mpy: boards get .mpy.
@pytest.mark.parametrize("tree,heap", [("board_lib", "96K"), ("board_lib_py", "256K")])
def test_micropython_imports_fleetwire_from_the_board_tree(tree, heap, request):
    from fleetwire.host import micropython

    lib = request.getfixturevalue(tree)
    r = micropython.run(["-c", "import fleetwire; print(fleetwire.__version__)"], lib=lib, heap=heap)
    assert r.returncode == 0, r.stderr + r.stdout
    import fleetwire

    assert r.stdout.strip() == fleetwire.__version__


def test_cli_help_lists_the_commands():
    r = subprocess.run(
        [sys.executable, "-m", "fleetwire.tools.cli", "--help"], capture_output=True, text=True
    )
    assert r.returncode == 0
    for cmd in ("build", "selfcheck", "demo"):
        assert cmd in r.stdout


def test_build_mpy_writes_only_mpy(tmp_path):
    from fleetwire.host import build

    files = build.build(str(tmp_path), mpy=True)
    assert files and all(f.endswith(".mpy") for f in files)
