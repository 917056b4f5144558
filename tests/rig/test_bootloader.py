"""The virtual board's bootloader (fleetwire.host.rig.bootloader) chooses as ESP-IDF's
does with app rollback enabled (MicroPython's sdkconfig): a table of cases on an
emulated flash, otadata written entry by entry as esp_ota_ops writes it. The images it
verifies are ESP32 images esptool itself accepts."""

import struct

import pytest
from esptool.bin_image import LoadFirmwareImage

from fleetwire.host.rig import bootloader as bl, espimage, partitions as pt, vfactory
from fleetwire.host.rig.vflash import FlashFile

NEW, PENDING, VALID, INVALID, ABORTED = bl.NEW, bl.PENDING_VERIFY, bl.VALID, bl.INVALID, bl.ABORTED


def flash_with(tmp_path, ota=True, slots=("v0", "v1"), factory_app=None):
    f = FlashFile(str(tmp_path / "flash.bin"))
    parts = vfactory.layout({"mqtt": 4}, ota=ota)
    vfactory.program(f, parts, espimage.app_image(slots[0]) if slots[0] else b"\xff")
    apps = [p for p in parts if p.type == pt.TYPE_APP]
    for p, v in zip(apps[1:], slots[1:]):
        if v:
            f.write(p.offset, espimage.app_image(v))
    return f, {p.label: p for p in parts}


def set_entry(f, parts, i, seq, state, crc=None):
    e = bl.Entry(b"\xff" * 32)
    e.seq, e.state, e.crc = seq, state, bl.entry_crc(seq) if crc is None else crc
    bl.write_otadata(f, parts["otadata"], i, e)


def states(f, parts):
    return [(e.seq, e.state) for e in bl.read_otadata(f, parts["otadata"])]


@pytest.mark.parametrize(
    "entries,boots,after",
    [
        # both entries erased (as esptool leaves them), no factory: ota_0, and otadata[0] = seq 1 VALID
        ([], "ota_0", [(1, VALID), (0xFFFFFFFF, 0xFFFFFFFF)]),
        # the highest valid seq wins: (seq - 1) % 2 slots
        ([(1, VALID), (2, VALID)], "ota_1", [(1, VALID), (2, VALID)]),
        ([(3, VALID), (2, VALID)], "ota_0", [(3, VALID), (2, VALID)]),
        # set_boot wrote NEW: booted once, it becomes PENDING_VERIFY
        ([(1, VALID), (2, NEW)], "ota_1", [(1, VALID), (2, PENDING)]),
        # PENDING_VERIFY at boot: never confirmed, so ABORTED and the other one boots
        ([(1, VALID), (2, PENDING)], "ota_0", [(1, VALID), (2, ABORTED)]),
        # INVALID / ABORTED entries and a bad crc are not selectable
        ([(1, VALID), (2, INVALID)], "ota_0", [(1, VALID), (2, INVALID)]),
        ([(1, VALID), (2, VALID, 0x1234)], "ota_0", [(1, VALID), (2, VALID)]),
        # a tie goes to otadata[0]
        ([(2, VALID), (2, NEW)], "ota_1", [(2, VALID), (2, NEW)]),
    ],
)
def test_the_slot_booted_and_the_otadata_left_behind(tmp_path, entries, boots, after):
    f, parts = flash_with(tmp_path)
    for i, e in enumerate(entries):
        set_entry(f, parts, i, *e)
    b = bl.boot(f)
    assert b.partition.label == boots
    assert states(f, parts) == after
    assert b.rolled_back == (["ota_1"] if (2, ABORTED) in after and (2, PENDING) in entries else [])


def test_a_slot_that_does_not_verify_falls_back_to_the_other(tmp_path):
    f, parts = flash_with(tmp_path, slots=("v0", None))  # ota_1 erased
    set_entry(f, parts, 0, 1, VALID)
    set_entry(f, parts, 1, 2, NEW)
    b = bl.boot(f)
    assert (b.partition.label, b.version) == ("ota_0", "v0")
    assert "E boot: OTA app partition slot 1 is not bootable" in b.log
    assert "E esp_image: image has invalid magic byte (expected 0xE9, saw 0xff)" in b.log
    # nothing chosen yet and ota_0 empty: from slot 0 upwards, and otadata says so after
    (tmp_path / "b").mkdir()
    f, parts = flash_with(tmp_path / "b", slots=(None, "v1"))
    assert bl.boot(f).partition.label == "ota_1"
    assert states(f, parts)[0] == (2, VALID)


def test_a_factory_table_boots_factory_and_nothing_bootable_halts(tmp_path):
    f, parts = flash_with(tmp_path, ota=False, slots=("v0",))
    assert bl.boot(f).partition.label == "factory"
    f.write(parts["factory"].offset, b"\x00" * 4)  # the app's header broken
    with pytest.raises(bl.BootFailure, match="No bootable app partitions"):
        bl.boot(f)
    f.erase(0, f.size)  # esptool erase-flash
    with pytest.raises(bl.BootFailure, match="invalid header: 0xffffffff"):
        bl.boot(f)


def test_images_are_what_esptool_reads_and_any_changed_bit_fails_verification(tmp_path):
    img = espimage.app_image("1.2.3", "proj", files={"a.py": "x = 1\n", "pkg/b.mpy": b"\x4d\x06"})
    parsed = LoadFirmwareImage("esp32", img)
    parsed.verify()  # esptool: checksum and SHA-256 valid
    assert [(s.addr, len(s.data)) for s in parsed.segments][0][0] == 0x3F400020
    read = lambda off, n: (img + b"\xff" * 4096)[off : off + n]  # noqa: E731
    got = espimage.verify(read, 0x10000)
    assert got.app == {"version": "1.2.3", "project": "proj", "secure_version": 0}
    assert espimage.frozen_files(read, *got.payload) == {"a.py": b"x = 1\n", "pkg/b.mpy": b"\x4d\x06"}
    for pos, why in (
        (0, "invalid magic byte"),
        (100, "checksum failed"),
        (len(img) - 1, "image hash failed"),
        (len(img) - 33, "checksum failed"),
    ):
        bad = bytearray(img)
        bad[pos] ^= 0x10
        with pytest.raises(espimage.ImageError, match=why):
            flash = bytes(bad) + b"\xff" * 4096
            espimage.verify(lambda off, n: flash[off : off + n], 0x10000)  # noqa: B023
    with pytest.raises(espimage.ImageError, match="past the partition"):
        espimage.verify(read, 256)
    assert struct.unpack_from("<I", img, 0x20)[0] == espimage.APP_DESC_MAGIC  # where a program finds it
