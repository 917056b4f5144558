"""The documentation's board examples run as written, on virtual boards (the MicroPython unix
port behind a pty, with an ESP32's flash, ROM loader and bootloader emulated), which the
commands treat as they treat /dev/ttyUSB0."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from examples import command_lines, snippet
from support import ROOT

BIN = os.path.dirname(sys.executable)
ENV = dict(os.environ, PATH=BIN + os.pathsep + os.environ["PATH"])


@pytest.fixture
def vboard(tmp_path):
    """A virtual board fresh from the factory (MicroPython's partition table), 128K of heap."""
    from fleetwire.host.rig.vboard import VirtualBoard, wait_for_prompt

    b = VirtualBoard(str(tmp_path / "vb"), heap="128K").start()
    assert wait_for_prompt(b.port)
    yield b
    b.stop()


def test_flash_deploy_and_console_bring_a_board_up_with_its_app(vboard, mosquitto, make_observer, tmp_path):
    from fleetwire.host.rig import espimage, partitions

    # FIRMWARE: a MicroPython-style image (bootloader, partition table, app) as a release is
    table = partitions.to_binary(partitions.load(os.path.join(ROOT, "firmware", "partitions-mqtt.csv")))
    (tmp_path / "fw.bin").write_bytes(espimage.firmware(espimage.app_image("1.25.0"), table))
    os.symlink(os.path.join(ROOT, "firmware"), tmp_path / "firmware")
    (tmp_path / "app.py").write_text(snippet("device/app.py"))
    cfg = json.loads(snippet("files/device.json"))
    cfg.update(broker=mosquitto.host, port=mosquitto.port)  # the test's broker
    (tmp_path / "device.json").write_text(json.dumps(cfg))
    observer = make_observer(mosquitto)
    observer.subscribe("fleet/sensor-17/#", 1)
    src = snippet("shell/flash_deploy.sh")
    # a virtual board's port carries no modem lines for esptool's stub: it takes --no-stub
    src = src.replace("fleetwire flash ", "fleetwire flash --no-stub ")
    # the console's wait is a deadline: a loaded machine (the suite on four workers) boots slower
    src = src.replace('--until "app: ready" --timeout 60', '--until "app: ready" --timeout 240')
    assert "--timeout 240" in src
    r = subprocess.run(
        ["bash", "-e", "-c", src],
        cwd=tmp_path,
        env=dict(ENV, PORT=vboard.port, FIRMWARE="fw.bin"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "app: ready" in r.stdout
    # flashed: the firmware's table, with the store's partition, is the board's now
    assert [p.label for p in vboard.partition_table()][-2:] == ["mqtt", "vfs"]
    observer.publish("fleet/sensor-17/cmd/led", b"on", qos=1)
    got = observer.wait_until(lambda m: any(x[0] == "fleet/sensor-17/led" for x in m), 20)
    assert [m[1] for m in got if m[0] == "fleet/sensor-17/led"] == [b"on"]
    assert observer.wait_until(lambda m: any(x[0] == "fleet/sensor-17/telemetry" for x in m), 20)


@pytest.fixture
def board(tmp_path):
    """Two virtual boards started by the example's own first command, which runs until Ctrl-C;
    -> the prefix of their links. At the end, Ctrl-C stops both."""
    line = command_lines("shell/vboard.sh")[0]
    prefix = str(tmp_path / "board")
    p = subprocess.Popen(
        ["bash", "-c", "exec " + line.replace("/tmp/board", prefix)],
        cwd=tmp_path,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its boards with it: killed as a group if Ctrl-C does not end them
    )
    deadline = time.monotonic() + 120  # a deadline: two boards' start on a loaded machine
    while not (os.path.exists(prefix + "1") and os.path.exists(prefix + "2")):
        assert p.poll() is None and time.monotonic() < deadline, "no boards: %s" % p.stdout.read()
        time.sleep(0.1)
    yield prefix
    p.send_signal(signal.SIGINT)
    try:
        out = p.communicate(timeout=90)[0]  # a deadline: a loaded machine took over 30 s
    finally:
        if p.poll() is None:  # never leave boards running after the test
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert "stopped 2 board(s)" in out, out


def test_the_virtual_boards_answer_mpremote_as_boards_do(board):
    lines = command_lines("shell/vboard.sh")
    assert len(lines) == 2
    r = subprocess.run(
        ["bash", "-c", lines[1].replace("/tmp/board", board)],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == repr(bytes.fromhex("f00d00000001"))  # the first board's machine.unique_id()
