"""`fleetwire flash` end to end without hardware: esptool (the real one, --no-stub)
writes a firmware and a partition table through a virtual board's emulated ESP32 ROM
bootloader into its emulated flash; esptool's own MD5 check passes, a write fault is
caught, and the table written decides the partitions MicroPython sees on the board."""

import os
import subprocess
import sys
import time

import pytest
import serial

from fleetwire.host.rig import espimage, partitions as pt
from fleetwire.host.rig.flash import VerifyError, flash_one
from fleetwire.host.rig.vboard import VirtualBoard, wait_for_prompt

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OTA_CSV = """# Name, Type, SubType, Offset, Size, Flags
nvs,      data, nvs,     0x9000,  0x4000,
otadata,  data, ota,     0xd000,  0x2000,
phy_init, data, phy,     0xf000,  0x1000,
ota_0,    app,  ota_0,   0x10000, 1M,
ota_1,    app,  ota_1,   ,        1M,
mqtt,     data, 0x99,    ,        64K,
"""


def flash_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "fleetwire.tools.cli", "flash", "--connect-attempts", "1"] + list(args),
        capture_output=True,
        text=True,
        timeout=120,
    )


def board_run(board, code):
    r = subprocess.run(
        [sys.executable, "-m", "mpremote", "connect", board.port, "resume", "exec", code],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout.strip()


def firmware(path, version, padding=0):
    """A MicroPython-style merged .bin (bootloader, fleetwire's partition table, an app at
    0x10000 with `padding` more bytes frozen into it) for 0x1000."""
    table = pt.to_binary(pt.load(os.path.join(ROOT, "firmware", "partitions-mqtt.csv")))
    files = {"fwinfo.py": "VERSION = %r\n" % version, "pad.bin": b"\0" * padding}
    data = espimage.firmware(espimage.app_image(version, files=files), table)
    path.write_bytes(data)
    return str(path), data


@pytest.fixture
def board(tmp_path):
    b = VirtualBoard(str(tmp_path / "vb")).start()  # a factory board: MicroPython's default table
    assert wait_for_prompt(b.port)
    yield b
    b.stop()


def test_flash_writes_firmware_and_table_and_esptools_check_passes(board, tmp_path):
    fw, data = firmware(tmp_path / "fw.bin", "3.0.0")
    (tmp_path / "ota.csv").write_text(OTA_CSV)
    r = flash_cli(
        "--port", board.port, "--firmware", fw, "--partitions", str(tmp_path / "ota.csv"), "--no-stub"
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ok" in r.stdout.splitlines()[-1]
    # the emulated flash holds the image, with the table asked for in place of the firmware's own
    table = pt.to_binary(pt.parse_csv(OTA_CSV))
    assert board.flash.read(0x1000, 0x7000) == data[:0x7000]
    assert board.flash.read(0x8000, len(table)) == table
    assert board.flash.read(0x10000, len(data) - 0xF000) == data[0xF000:]
    # esptool, on its own, agrees: the flash holds the file (its MD5 over the serial port)
    merged = bytearray(data)
    merged[0x7000 : 0x7000 + len(table)] = table
    (tmp_path / "merged.bin").write_bytes(merged)
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "esptool",
            "--port",
            board.port,
            "--no-stub",
            "verify-flash",
            "0x1000",
            str(tmp_path / "merged.bin"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0 and "Verification successful (digest matched)" in r.stdout, r.stdout + r.stderr
    # the board boots the new firmware from the new table's first app slot
    assert wait_for_prompt(board.port)
    assert (board.boot.partition.label, board.boot.version) == ("ota_0", "3.0.0")
    assert board_run(board, "import fwinfo; print(fwinfo.VERSION)") == "3.0.0"


def test_the_written_partition_table_decides_the_partitions_the_board_sees(board, tmp_path):
    before = board_run(
        board, "import esp32\nP = esp32.Partition\nprint([p.info()[4] for p in P.find(P.TYPE_DATA)])"
    )
    assert before == "['nvs', 'phy_init', 'mqtt']"  # the factory table
    fw, _ = firmware(tmp_path / "fw.bin", "3.0.0")  # fleetwire's firmware/partitions-mqtt.csv
    r = flash_cli("--port", board.port, "--firmware", fw, "--no-stub")
    assert r.returncode == 0, r.stdout + r.stderr
    assert wait_for_prompt(board.port)
    out = board_run(
        board,
        "import esp32\nP = esp32.Partition\n"
        "print([p.info()[4] for p in P.find(P.TYPE_DATA)])\n"
        "print(P.find(P.TYPE_DATA, label='mqtt')[0].info())\nprint(P(P.RUNNING).info())",
    )
    assert out.splitlines() == [
        "['nvs', 'phy_init', 'mqtt', 'vfs']",
        "(1, 153, 2097152, 262144, 'mqtt', False)",  # 0x200000, 256 KB
        "(0, 0, 65536, 2031616, 'factory', False)",
    ]
    # and the store's partition works there: fleetwire's runner opens its ring store on it
    from fleetwire.host.rig import build

    build.build(board.fs, mpy=True)
    out = board_run(board, "from fleetwire import runner; s = runner.open_store({}); print(type(s).__name__)")
    assert out.splitlines()[-1] == "RingStore"


def test_a_corrupted_write_is_caught(board, tmp_path):
    fw, data = firmware(tmp_path / "fw.bin", "3.0.0")
    board.corrupt_writes = 1  # one bit of the next block programmed stays set
    r = flash_cli("--port", board.port, "--firmware", fw, "--no-stub")
    assert r.returncode == 1
    assert "verification failed on %s" % board.port in r.stderr and "MD5" in r.stderr, r.stderr
    board.corrupt_writes = 1
    with pytest.raises(VerifyError, match="the flash does not hold what was written"):
        flash_one(board.port, fw, no_stub=True, connect_attempts=1)
    r = flash_cli("--port", board.port, "--firmware", fw, "--no-stub")  # a second try, no fault: ok
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_board_busy_printing_is_flashed_and_mpremote_reaches_the_new_firmware_at_once(board, tmp_path):
    # a program logging without pause: esptool's SYNC still takes the board into its ROM
    # loader, and the first bytes of a terminal afterwards boot it (no wait for a reset)
    (tmp_path / "main.py").write_text("n = 0\nwhile True:\n    print('log line', n)\n    n += 1\n")
    os.replace(tmp_path / "main.py", os.path.join(board.fs, "main.py"))
    board.power_cycle()
    with serial.Serial(board.port, 115200, timeout=0.2) as s:
        seen, end = b"", time.monotonic() + 10
        while b"log line" not in seen and time.monotonic() < end:
            seen = seen[-64:] + s.read(4096)
    assert b"log line" in seen
    fw, _ = firmware(tmp_path / "fw.bin", "3.0.0")
    r = flash_cli("--port", board.port, "--firmware", fw, "--no-stub")
    assert r.returncode == 0, r.stdout + r.stderr
    os.remove(os.path.join(board.fs, "main.py"))
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "mpremote",
            "connect",
            board.port,
            "exec",
            "import fwinfo; print(fwinfo.VERSION)",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.stdout.strip().splitlines()[-1] == "3.0.0", r.stdout + r.stderr


def test_without_no_stub_the_board_says_what_to_do(board, tmp_path):
    fw, _ = firmware(tmp_path / "fw.bin", "3.0.0")
    r = flash_cli("--port", board.port, "--firmware", fw)
    assert r.returncode == 1
    assert "refused esptool's flasher stub (a virtual board runs none): flash with --no-stub" in r.stderr
    assert wait_for_prompt(board.port)  # and it runs on as before
    assert board.boot.version == espimage.STOCK_VERSION


def test_a_partition_table_that_cannot_work_is_refused_before_touching_a_board(tmp_path):
    fw, _ = firmware(tmp_path / "fw.bin", "3.0.0", padding=8192)
    cases = {
        "no app at 0x10000": (
            "nvs, data, nvs, 0x9000, 0x6000\nfactory, app, factory, 0x20000, 1M\n",
            "no app partition at 0x10000, where the firmware's app goes",
        ),
        "app too small": (
            "nvs, data, nvs, 0x9000, 0x6000\nfactory, app, factory, 0x10000, 4K\n",
            "the firmware's app (9 KB) does not fit in partition factory (4 KB)",
        ),
        "overlap": (
            "nvs, data, nvs, 0x9000, 0x8000\nfactory, app, factory, 0x10000, 1M\n",
            "nvs (0x9000-0x11000) overlaps factory",
        ),
        "bad subtype": ("nvs, data, nvram, 0x9000, 0x6000\n", "unknown subtype 'nvram'"),
    }
    for name, (csv, why) in cases.items():
        (tmp_path / "t.csv").write_text(csv)
        r = flash_cli("--port", "/dev/null", "--firmware", fw, "--partitions", str(tmp_path / "t.csv"))
        assert r.returncode == 2 and why in r.stderr, (name, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1
