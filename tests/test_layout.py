"""The house's rules. The source folders stay honest: device code never imports host code,
shared code imports neither, and the board tree holds device/ + shared/ only. host/ is
grouped by job, one subpackage each, and a group uses only the groups below it; host code
never calls the CLI (tools/); no module imports another's private name."""

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
    from fleetwire.host.rig import micropython

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
    from fleetwire.host.rig import build

    files = build.build(str(tmp_path), mpy=True)
    assert files and all(f.endswith(".mpy") for f in files)


# host/'s groups, each a subpackage, from the bottom up: a group may import only the groups
# of the layers below its own (a library calls a library; nothing points back up).
LAYERS = [
    {"portable", "identity"},  # MicroPython-capable helpers; the fleet's certificates
    {"rig", "brokers"},  # boards and their tools; brokers
    {"fleet", "testing", "command"},  # the fleet at run time; the test kit; commands and desired state
    {"analytics"},  # the fleet report
    {"rollout"},  # releases, the update service, staged rollouts gated by the report
]
GROUPS = set().union(*LAYERS)


def host_group(path):
    rel = os.path.relpath(path, os.path.join(ROOT, "host")).split(os.sep)
    return rel[0] if len(rel) > 1 else None


def test_host_holds_only_its_groups_each_a_package_that_says_what_it_is_for():
    here = os.path.join(ROOT, "host")
    entries = {e for e in os.listdir(here) if e != "__pycache__"}
    assert entries == GROUPS | {"__init__.py"}, "host/ holds %s" % sorted(entries - GROUPS)
    for g in GROUPS:
        init = os.path.join(here, g, "__init__.py")
        assert os.path.exists(init), "host/%s has no __init__.py" % g
        assert ast.get_docstring(ast.parse(open(init).read())), "host/%s/__init__.py says nothing" % g


def test_each_host_group_imports_only_the_groups_below_it():
    layer = {g: i for i, gs in enumerate(LAYERS) for g in gs}
    for path, mod, level in imports_of("host"):
        g = host_group(path)
        if level or g is None or "/emul/" in path:
            continue
        names = [mod]
        if mod == "fleetwire.host":  # from fleetwire.host import portable
            tree = ast.parse(open(path, encoding="utf-8").read())
            names = [
                "fleetwire.host." + a.name
                for n in ast.walk(tree)
                if isinstance(n, ast.ImportFrom) and n.module == "fleetwire.host"
                for a in n.names
                if a.name in GROUPS  # (not host's own Missing)
            ]
        for m in names:
            assert not m.startswith("fleetwire.tools"), "%s calls the CLI (%s): call the library" % (path, m)
            if m.startswith("fleetwire.host."):
                other = m.split(".")[2]
                assert other == g or layer[other] < layer[g], "%s (%s) imports %s, a group not below it" % (
                    path,
                    g,
                    m,
                )


def test_no_module_imports_a_private_name_of_another():
    for folder in ("device", "shared", "host", "tools", "bench"):
        for path, mod, level in imports_of(folder):
            if "/emul/" in path or not (level or mod.startswith("fleetwire")):
                continue  # the emulated board modules share their own; third-party is theirs
            tree = ast.parse(open(path, encoding="utf-8").read())
            for n in ast.walk(tree):
                if isinstance(n, ast.ImportFrom) and (n.module or "") == mod and n.level == level:
                    bad = [a.name for a in n.names if a.name.startswith("_") and not a.name.startswith("__")]
                    assert not bad, "%s imports %s from %s" % (path, bad, mod or ".")
