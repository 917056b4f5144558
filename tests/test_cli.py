"""The `fleetwire` command as a user runs it."""

import os
import subprocess
import sys

from fleetwire.host.rig import micropython

FW = [sys.executable, "-m", "fleetwire.tools.cli"]


def run(*args, **kw):
    return subprocess.run(FW + list(args), capture_output=True, text=True, **kw)


def test_build_writes_a_tree_micropython_imports(tmp_path):
    r = run("build", "--mpy", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "wrote" in r.stdout and os.path.exists(tmp_path / "lib" / "fleetwire" / "client.mpy")
    p = micropython.run(
        ["-c", "from fleetwire import MQTTClient; print(MQTTClient.__name__)"],
        lib=str(tmp_path / "lib"),
        heap="96K",
    )
    assert p.stdout.strip() == "MQTTClient", p.stdout + p.stderr


def test_build_again_leaves_no_stale_modules(tmp_path):
    stale = tmp_path / "lib" / "fleetwire" / "old_module.py"
    stale.parent.mkdir(parents=True)
    stale.write_text("x = 1\n")
    assert run("build", "--out", str(tmp_path)).returncode == 0
    assert not stale.exists()


def test_build_with_an_arch_for_native_code(tmp_path):
    r = run("build", "--mpy", "--arch", "xtensawin", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr


def test_selfcheck_runs_the_vectors_on_both_interpreters(tmp_path):
    r = run("selfcheck", "--out", str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert any(l.startswith("MicroPython") and " 0 failed" in l for l in lines), r.stdout
    assert any(l.startswith("CPython") and " 0 failed" in l for l in lines), r.stdout


def test_no_command_prints_help_and_fails():
    r = run()
    assert r.returncode == 2 and "COMMAND" in r.stdout
