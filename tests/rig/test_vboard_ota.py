"""OTA on a virtual board, as MicroPython on an ESP32 does it: esp32.Partition's app
slots, set_boot() and a bootloader that boots the other slot at the next reset and rolls
back an image that never called Partition.mark_app_valid_cancel_rollback() (ESP-IDF's
NEW -> PENDING_VERIFY -> VALID / ABORTED). Real MicroPython (the unix port behind a pty),
programs run with mpremote; the new image is copied into its slot by the board itself."""

import os
import struct
import subprocess
import sys
import time

import pytest

from fleetwire.host.rig import bootloader, espimage
from fleetwire.host.rig.vboard import VirtualBoard, wait_for_prompt

# the board copies img.bin (from its filesystem) into a slot, block by block, with the
# simple block protocol (erase, then write 4 KB)
COPY = """
import esp32, os
P = esp32.Partition
def copy(slot, path='img.bin'):
    buf = bytearray(4096)
    with open(path, 'rb') as f:
        blk = 0
        while True:
            n = f.readinto(buf)
            if not n:
                break
            for i in range(n, 4096):
                buf[i] = 0xFF
            slot.writeblocks(blk, buf)
            blk += 1
"""


def board_run(board, code, timeout=60):
    r = subprocess.run(
        [sys.executable, "-m", "mpremote", "connect", board.port, "resume", "exec", code],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout.strip()


def reset(board, how="machine.reset"):
    """Reset the board (machine.reset(), a power cut, or a crash of its program) and
    wait until it has booted again."""
    n = board.boots
    if how == "power":
        board.power_cycle()
    else:
        # mpremote's reset is machine.reset(); exiting with a status is a crash (the
        # interpreter dies as a board's firmware does in a panic)
        cmd = ["reset"] if how == "machine.reset" else ["exec", "--no-follow", "import sys; sys.exit(3)"]
        subprocess.run(
            [sys.executable, "-m", "mpremote", "connect", board.port, "resume"] + cmd,
            capture_output=True,
            timeout=30,
        )
    end = time.monotonic() + 20
    while board.boots == n and time.monotonic() < end:
        time.sleep(0.05)
    assert board.boots > n, "the board did not boot again"
    assert wait_for_prompt(board.port)


def otadata_states(board):
    part = next(p for p in board.partition_table() if p.label == "otadata")
    return [(e.seq, bootloader.STATE_NAMES[e.state]) for e in bootloader.read_otadata(board.flash, part)]


def image(version, **files):
    return espimage.app_image(version, files=dict({"fwinfo.py": "VERSION = %r\n" % version}, **files))


@pytest.fixture
def board(tmp_path):
    b = VirtualBoard(str(tmp_path / "vb"), ota=True).start()
    assert wait_for_prompt(b.port)
    yield b
    b.stop()


def stage(board, img, set_boot=True):
    """Put `img` in the next update slot from the board; -> what the board printed."""
    with open(os.path.join(board.fs, "img.bin"), "wb") as f:
        f.write(img)
    code = COPY + "nxt = P(P.RUNNING).get_next_update()\ncopy(nxt)\n"
    if set_boot:
        code += "nxt.set_boot()\n"
    return board_run(board, code + "print(P(P.RUNNING).info()[4], P(P.BOOT).info()[4], nxt.info()[4])")


def test_an_ota_board_shows_the_partitions_and_slots_micropython_shows_on_an_esp32(board):
    out = board_run(
        board,
        "import esp32\nP = esp32.Partition\n"
        "print([p.info() for p in P.find(P.TYPE_APP)])\n"
        "r = P(P.RUNNING)\nprint(r.info()[4], P(P.BOOT).info()[4], r.get_next_update().info()[4],"
        " r.get_next_update().get_next_update().info()[4])\n"
        "print(P('otadata').info(), P('ota_1').ioctl(4, 0), P('ota_1').ioctl(5, 0))\n"
        "print(repr(P('mqtt')))\n"
        "try:\n    r.readblocks(127, bytearray(8192))\nexcept OSError as e:\n    print(e.args)\n"
        "try:\n    P('nope')\nexcept OSError as e:\n    print(e.args)\n",
    )
    apps, slots, otadata, mqtt, past_end, missing = out.splitlines()
    assert apps == "[(0, 16, 65536, 524288, 'ota_0', False), (0, 17, 589824, 524288, 'ota_1', False)]"
    assert slots == "ota_0 ota_0 ota_1 ota_0"  # running, boot, next update, the one after that
    assert otadata == "(1, 0, 53248, 8192, 'otadata', False) 128 4096"
    assert mqtt == "<Partition type=1, subtype=153, address=1114112, size=262144, label=mqtt, encrypted=0>"
    assert past_end == "(-260, 'ESP_ERR_INVALID_SIZE')"  # esp_partition_read running past the end
    assert missing == "(2,)"  # ENOENT, as MicroPython raises it
    # flashed by "the factory" (esptool, on a real board): no otadata entry until the
    # bootloader booted ota_0 and wrote one, VALID; so there is nothing to roll back
    assert otadata_states(board) == [(1, "valid"), (0xFFFFFFFF, "undefined")]


def test_set_boot_and_a_reset_boot_the_other_slot(board):
    assert stage(board, image("2.0.0")) == "ota_0 ota_1 ota_1"  # running ota_0; ota_1 boots next
    assert otadata_states(board)[1] == (2, "new")
    reset(board)
    assert (board.boot.partition.label, board.boot.version) == ("ota_1", "2.0.0")
    # the new firmware's frozen module is what the board imports now
    assert (
        board_run(
            board, "import esp32, fwinfo\nP = esp32.Partition\nprint(fwinfo.VERSION, P(P.RUNNING).info()[4])"
        )
        == "2.0.0 ota_1"
    )
    # as on a board, the running image's app description (esp_app_desc_t at 0x20) names it
    assert (
        board_run(
            board,
            "import esp32\nP = esp32.Partition\nd = bytearray(80)\n"
            "P(P.RUNNING).readblocks(0, d, 0x20)\n"
            "print(hex(int.from_bytes(d[:4], 'little')), bytes(d[16:48]).rstrip(b'\\0').decode(),"
            " bytes(d[48:80]).rstrip(b'\\0').decode())",
        )
        == "0xabcd5432 2.0.0 fleetwire"
    )
    assert otadata_states(board)[1] == (2, "pending_verify")


@pytest.mark.parametrize("how", ["machine.reset", "power", "crash"])
def test_an_image_never_marked_valid_rolls_back_at_the_next_reset(board, how):
    stage(board, image("2.0.0"))
    reset(board)
    assert board.boot.partition.label == "ota_1"
    reset(board, how)  # it never called mark_app_valid_cancel_rollback()
    b = board.boot
    assert (b.partition.label, b.version, b.rolled_back) == ("ota_0", espimage.STOCK_VERSION, ["ota_1"])
    assert otadata_states(board) == [(1, "valid"), (2, "aborted")]
    out = board_run(
        board,
        "import esp32\nP = esp32.Partition\n"
        "print(P(P.RUNNING).info()[4], P(P.BOOT).info()[4])\n"
        "try:\n    import fwinfo\nexcept ImportError:\n    print('old firmware')\n",
    )
    assert out.splitlines() == ["ota_0 ota_0", "old firmware"]
    reset(board)  # and it stays rolled back
    assert board.boot.partition.label == "ota_0"


def test_mark_app_valid_cancel_rollback_keeps_the_new_image(board):
    stage(board, image("2.0.0"))
    reset(board)
    board_run(board, "import esp32; esp32.Partition.mark_app_valid_cancel_rollback()")
    assert otadata_states(board)[1] == (2, "valid")
    for how in ("machine.reset", "power", "crash"):
        reset(board, how)
        b = board.boot
        assert (b.partition.label, b.version, b.rolled_back) == ("ota_1", "2.0.0", [])
    # the next update goes to the other slot, the running one stays untouched
    assert stage(board, image("3.0.0")) == "ota_1 ota_0 ota_0"
    reset(board)
    assert (board.boot.partition.label, board.boot.version) == ("ota_0", "3.0.0")
    assert otadata_states(board) == [(3, "pending_verify"), (2, "valid")]


def test_set_boot_refuses_an_image_that_does_not_verify(board):
    good = image("2.0.0")
    torn = good[: len(good) // 2]  # a download cut short
    flipped = bytearray(good)
    flipped[300] ^= 0x40  # one bit changed
    for bad in (torn, bytes(flipped), b"\xff" * 64):
        out = stage(board, bad, set_boot=False)
        assert out == "ota_0 ota_0 ota_1"
        got = board_run(
            board,
            "import esp32\nP = esp32.Partition\ntry:\n    P('ota_1').set_boot()\n"
            "except OSError as e:\n    print(e.args)\nprint(P(P.BOOT).info()[4])",
        )
        assert got.splitlines() == ["(-5379, 'ESP_ERR_OTA_VALIDATE_FAILED')", "ota_0"]
    reset(board)
    assert board.boot.partition.label == "ota_0"


def test_a_factory_board_has_no_rollback_to_confirm(tmp_path):
    # MicroPython's default table (no otadata): what a program sees there
    b = VirtualBoard(str(tmp_path / "vb")).start()
    try:
        assert wait_for_prompt(b.port)
        out = board_run(
            b,
            "import esp32\nP = esp32.Partition\nprint(P(P.RUNNING).info()[4])\n"
            "for f in (lambda: P(P.BOOT), P.mark_app_valid_cancel_rollback,"
            " lambda: P(P.RUNNING).get_next_update()):\n"
            "    try:\n        f()\n    except OSError as e:\n        print(e.args)\n",
        )
        assert out.splitlines() == ["factory", "(2,)", "(-261, 'ESP_ERR_NOT_FOUND')", "(2,)"]
    finally:
        b.stop()


def test_the_otadata_entries_are_what_esp_idf_writes(board):
    # byte for byte: ota_seq, 20 bytes of seq_label, ota_state, crc32(ota_seq) seeded 0xFFFFFFFF
    stage(board, image("2.0.0"))
    part = next(p for p in board.partition_table() if p.label == "otadata")
    raw = board.flash.read(part.offset + 0x1000, 32)
    seq, label, state, crc = struct.unpack("<I20sII", raw)
    assert (seq, label, state) == (2, b"\xff" * 20, 0)
    import zlib

    assert crc == zlib.crc32(struct.pack("<I", 2), 0xFFFFFFFF)
    assert board.flash.read(part.offset + 0x1000 + 32, 64) == b"\xff" * 64  # the rest of the sector: erased
