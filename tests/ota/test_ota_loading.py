"""Updates cost nothing to a program that does not enable them: the board's own main.py
(firmware/main.py, fleetwire.runner) on MicroPython (the board tree as .mpy) against
mosquitto, with an app that prints the fleetwire modules loaded once set up and once the
main loop runs. Without "ota" in config.json no ota* module is ever imported; with it the
resident updater (fleetwire.ota.agent, and fleetwire.ota.state for its files) is, and nothing of an
offer, a download or a trial until one comes (fleetwire.ota.ops, ota.trust, ota.reasons, ota.app,
ota.fw, otaboot). That ota.trust and ota.reasons go again after an offer is
test_signed_releases.py's to show, step by step."""

import json
import os
import shutil
import subprocess

import pytest

from support import device_command

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAIN = os.path.join(ROOT, "firmware", "main.py")
# The app: what is loaded when setup() runs, and in the main loop (where the updater is)
APP = """import sys
def _loaded():
    return " ".join(sorted(k[10:] for k in sys.modules if k.startswith("fleetwire.")))
def setup(client):
    print("STEP setup", _loaded())
def step(client):
    print("STEP loop", _loaded())
    raise SystemExit(0)
"""
# The 64-bit unix port's heap that runs the board program with updates on (bench/ota_heap.py)
HEAP = "160K"


def run_main(board_lib, broker, where, **cfg):
    os.makedirs(where)
    shutil.copy(MAIN, os.path.join(where, "main.py"))
    with open(os.path.join(where, "app.py"), "w") as f:
        f.write(APP)
    cfg.update(
        device_id="loading-%d-%s" % (os.getpid(), os.path.basename(where)),
        broker=broker.host,
        port=broker.port,
        fw_version="1.0.0",
        period_s=3600,
    )
    with open(os.path.join(where, "config.json"), "w") as f:
        json.dump(cfg, f)
    cmd, env = device_command("micropython", board_lib, "main.py")
    cmd[cmd.index("-X") + 1] = "heapsize=" + HEAP
    r = subprocess.run(cmd, cwd=where, capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    steps = {}
    for line in r.stdout.splitlines():
        w = line.split()
        if w and w[0] == "STEP":
            steps[w[1]] = set(w[2:])
    assert set(steps) == {"setup", "loop"}, r.stdout + r.stderr
    return steps


def ota_modules(mods):
    return {m for m in mods if m.startswith("ota")}


@pytest.mark.micropython
def test_a_program_without_updates_imports_no_ota_module(board_lib, mosquitto, tmp_path):
    s = run_main(board_lib, mosquitto, str(tmp_path / "plain"))
    assert "runner" in s["loop"] and "vitals" in s["loop"], s  # the board program did run
    assert not ota_modules(s["setup"] | s["loop"]), s


@pytest.mark.micropython
def test_a_program_with_updates_holds_only_the_resident_updater_until_an_offer_comes(
    board_lib, mosquitto, tmp_path
):
    s = run_main(board_lib, mosquitto, str(tmp_path / "ota"), ota=True)
    assert ota_modules(s["setup"]) == {"ota", "ota.state"}, s  # the boot state: which release runs
    assert ota_modules(s["loop"]) == {"ota", "ota.agent", "ota.state"}, s
