"""`fleetwire flash` (esptool underneath): every way flashing goes wrong is named
plainly, proven against fake serial ports -- a silent one (no chip), a noisy one,
and a fake ROM bootloader answering as a given chip -- and against bad files."""

import struct
import subprocess
import sys

import pytest
import serial

from fleetwire.host.rig.flash import FlashError, check_firmware, detect, expand_ports

from rig.fake_esp import FakeChip


def image(segments=((0x40080000, 64),), hash_appended=False):
    """A well-formed ESP image: header, extended header, segments, checksum, padding."""
    h = struct.pack("<BBBBI", 0xE9, len(segments), 2, 0x20, 0x40080000)
    h += bytes(15) + bytes([1 if hash_appended else 0])
    body = b"".join(struct.pack("<II", a, n) + b"\x00" * n for a, n in segments)
    img = h + body
    img += b"\x00" * (16 - len(img) % 16)
    return img + (b"\x00" * 32 if hash_appended else b"")


def firmware(tmp_path, chip_base=0x1000, truncate_app=0):
    """A MicroPython-like .bin: bootloader image, then the app image at 0x10000 - base."""
    boot = image()
    app = image(((0x3F400020, 4096), (0x40080000, 8192)), hash_appended=True)
    data = boot + b"\xff" * (0x10000 - chip_base - len(boot)) + app
    if truncate_app:
        data = data[:-truncate_app]
    p = tmp_path / "fw.bin"
    p.write_bytes(data)
    return str(p)


def flash_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "fleetwire.tools.cli", "flash", "--connect-attempts", "1"] + list(args),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def chips():
    made = []

    def make(chip=None, noise=False):
        f = FakeChip(chip, noise)
        made.append(f)
        return f

    yield make
    for f in made:
        f.close()


def test_a_good_image_passes_and_a_truncated_or_foreign_file_does_not(tmp_path):
    assert check_firmware(firmware(tmp_path)) > 0x10000
    with pytest.raises(FlashError, match="truncated .the application image"):
        check_firmware(firmware(tmp_path, truncate_app=100))
    (tmp_path / "x.bin").write_bytes(b"PK\x03\x04 a zip, not firmware")
    with pytest.raises(FlashError, match="not an ESP32 firmware image"):
        check_firmware(str(tmp_path / "x.bin"))
    (tmp_path / "e.bin").write_bytes(b"")
    with pytest.raises(FlashError, match="is empty"):
        check_firmware(str(tmp_path / "e.bin"))
    with pytest.raises(FlashError, match="no firmware file"):
        check_firmware(str(tmp_path / "missing.bin"))


@pytest.mark.parametrize("chip,want", [("esp32c3", "esp32c3"), ("esp32s3", "esp32s3"), ("esp32", "esp32")])
def test_the_chip_is_detected(chips, chip, want):
    assert detect(chips(chip).port, connect_attempts=1) == want


def test_no_chip_answering_is_said_so(chips):
    with pytest.raises(FlashError, match="no chip answering on .*bootloader mode"):
        detect(chips(None).port, connect_attempts=1)
    with pytest.raises(FlashError, match="no chip answering"):
        detect(chips(noise=True).port, connect_attempts=1)


def test_a_busy_port_is_said_so(chips):
    f = chips("esp32c3")
    with serial.Serial(f.port, exclusive=True):  # a console holds it
        with pytest.raises(FlashError, match="is busy: another program has it open"):
            detect(f.port, connect_attempts=1)


def test_the_command_names_each_failure(chips, tmp_path):
    fw = firmware(tmp_path)
    r = flash_cli("--port", "/dev/ttyNOPE9", "--firmware", fw)
    assert r.returncode == 1 and "no such serial port: /dev/ttyNOPE9" in r.stderr
    r = flash_cli("--port", chips("esp32c3").port, "--firmware", fw, "--chip", "esp32s3")
    assert r.returncode == 1 and "wrong chip on" in r.stderr and "it is esp32c3, not esp32s3" in r.stderr
    r = flash_cli("--port", "/dev/null", "--firmware", str(tmp_path / "nope.bin"))
    assert r.returncode == 2 and "no firmware file" in r.stderr
    r = flash_cli("--port", "/dev/ttyNOPE*", "--firmware", fw)
    assert r.returncode == 2 and "no serial port matches /dev/ttyNOPE*" in r.stderr


def test_several_boards_in_parallel_get_a_summary_row_each(chips, tmp_path):
    fw = firmware(tmp_path)
    silent, wrong = chips(None), chips("esp32")
    r = flash_cli("--port", silent.port, "--port", wrong.port, "--firmware", fw, "--chip", "esp32s3")
    assert r.returncode == 1
    table = r.stdout[r.stdout.index("port ") :]
    rows = [line for line in table.splitlines()[1:] if line.strip()]
    assert len(rows) == 2 and all("FAILED" in row for row in rows)
    assert "no chip answering" in table and "it is esp32, not esp32s3" in table


def test_globs_expand_to_every_matching_port(tmp_path):
    for n in ("ttyX1", "ttyX2"):
        (tmp_path / n).write_text("")
    assert expand_ports([str(tmp_path / "ttyX*"), str(tmp_path / "ttyX1")]) == [
        str(tmp_path / "ttyX1"),
        str(tmp_path / "ttyX2"),
    ]
