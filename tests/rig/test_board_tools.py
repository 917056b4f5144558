"""`fleetwire deploy` and `fleetwire console` as a user runs them, on a virtual board,
and their clear errors when something is wrong."""

import json
import os
import subprocess
import sys
import time

import pytest

from fleetwire.host.rig.console import console
from fleetwire.host.testing.observer import Observer
from fleetwire.host.rig.vboard import VirtualBoard, wait_for_prompt


def cli(*args, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "fleetwire.tools.cli"] + list(args),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def vboard(tmp_path):
    b = VirtualBoard(str(tmp_path / "vb"), heap="128K").start()
    assert wait_for_prompt(b.port)
    yield b
    b.stop()


def test_deploy_copies_what_changed_and_never_prints_credentials(vboard, tmp_path, mosquitto):
    cfg = tmp_path / "device.json"
    cfg.write_text(
        json.dumps(
            {
                "device_id": "tool-1",
                "broker": "127.0.0.1",
                "port": mosquitto.port,
                "wifi_ssid": "lab",
                "wifi_password": "hunter2",
                "mqtt_user": "tool",
                "mqtt_password": "s3cret",
            }
        )
    )
    r = cli("deploy", "--port", vboard.port, "--config", str(cfg), "--mpy")
    assert r.returncode == 0, r.stderr
    assert "copied lib/fleetwire/client.mpy" in r.stdout and "copied config.json" in r.stdout
    assert "hunter2" not in r.stdout + r.stderr and "s3cret" not in r.stdout + r.stderr
    assert '"wifi_password": "(set)"' in r.stdout
    on_board = json.loads((tmp_path / "vb" / "fs" / "config.json").read_text())
    assert on_board["wifi_password"] == "hunter2"  # the board has it; the screen does not
    time.sleep(1)
    # nothing to copy, and still the board runs its program again afterwards (checking
    # it stopped main.py, as mpremote does on a board): it boots and reports at once
    with Observer(mosquitto.host, mosquitto.port) as o:
        o.subscribe("fleet/tool-1/telemetry", 1)
        r = cli("deploy", "--port", vboard.port, "--config", str(cfg), "--mpy")
        assert r.returncode == 0 and "0 copied" in r.stdout, r.stdout + r.stderr
        o.wait_for(1, timeout=20)


@pytest.mark.parametrize(
    "args,message",
    [
        (["--port", "/dev/ttyNOPE0"], "no such serial port: /dev/ttyNOPE0"),
        (["--port", "/dev/null", "--config", "/nonexistent.json"], "cannot read config /nonexistent.json"),
    ],
)
def test_deploy_explains_what_is_wrong(args, message):
    r = cli("deploy", *args)
    assert r.returncode == 2 and message in r.stderr, r.stderr


@pytest.mark.parametrize(
    "config,message",
    [
        ({"wifi_ssid": "lab"}, "lacks device_id, broker"),
        # the board's client would refuse it at every boot, so its program would never run
        ({"device_id": "d", "broker": "b", "mqtt_password": "pw"}, "mqtt_password but no mqtt_user"),
    ],
)
def test_deploy_refuses_a_config_the_device_cannot_run_with(tmp_path, config, message):
    cfg = tmp_path / "bad.json"
    cfg.write_text(json.dumps(config))
    r = cli("deploy", "--port", "/dev/null", "--config", str(cfg))
    assert r.returncode == 2 and message in r.stderr, r.stderr


def test_console_timestamps_lines_and_survives_a_reset(vboard, tmp_path):
    with open(os.path.join(vboard.fs, "main.py"), "w") as f:
        f.write(
            "import time\nfor i in range(3):\n    print('tick', i)\n    time.sleep(0.2)\n"
            "import machine\nmachine.reset()\n"
        )
    log = tmp_path / "console.log"
    out = []

    class W:
        def write(self, s):
            out.append(s)

        def flush(self):
            pass

    vboard.power_cycle()
    hit = console(vboard.port, log=str(log), until=r"tick 2", timeout=20, out=W())
    assert hit == "tick 2"
    # the board resets itself after its ticks; the console keeps reading across it
    hit = console(vboard.port, until=r"tick 1", timeout=20, out=W())
    assert hit == "tick 1" and vboard.resets >= 1
    lines = log.read_text().splitlines()
    assert any(line.endswith("tick 0") for line in lines)
    assert all(line[0] == "[" and line[13] == "]" for line in lines)  # [HH:MM:SS.mmm]


def test_console_stops_on_a_pattern_and_explains_a_missing_port(vboard):
    r = cli("console", "--port", "/dev/ttyNOPE1", timeout=30)
    assert r.returncode == 2 and "no such serial port: /dev/ttyNOPE1" in r.stderr
    r = cli("console", "--port", vboard.port, "--until", "never printed", "--timeout", "1", timeout=30)
    assert r.returncode == 1
