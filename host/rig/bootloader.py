"""The boot of a virtual board, as an ESP32 with MicroPython's ESP-IDF configuration
(CONFIG_BOOTLOADER_APP_ROLLBACK_ENABLE=y, in its sdkconfig.base) does it, on the board's
emulated flash:

1. the ROM checks the second-stage bootloader image at 0x1000 ("invalid header" if none);
2. the second stage reads the partition table at 0x8000 (MD5 checked);
3. it picks the app from otadata (two 4 KB sectors, an esp_ota_select_entry_t each:
   ota_seq, seq_label, ota_state, crc32 of ota_seq): every entry still PENDING_VERIFY is
   first marked ABORTED (an image booted once and never confirmed: the rollback); the
   valid entry with the highest ota_seq then selects ota_[(seq - 1) % number of OTA
   slots], and if that entry is NEW it becomes PENDING_VERIFY; with no valid entry, the
   factory app, or ota_0 (and then otadata[0] is written with seq 1, VALID);
4. it loads the first image that verifies, from that slot down to factory and then up.

The app then confirms itself with esp_ota_mark_app_valid_cancel_rollback() (the board's
esp32.Partition.mark_app_valid_cancel_rollback(), host/rig/emul/esp32.py); if it resets
before that, step 3 rolls it back at the next boot. The states: NEW (set_boot) ->
PENDING_VERIFY (first boot) -> VALID (confirmed) or ABORTED (next boot, unconfirmed).
Every rule here follows ESP-IDF's bootloader_utility.c and bootloader_common_loader.c."""

import struct
import zlib

from fleetwire.host.rig import espimage, partitions as pt

NEW, PENDING_VERIFY, VALID, INVALID, ABORTED, UNDEFINED = 0, 1, 2, 3, 4, 0xFFFFFFFF
STATE_NAMES = {
    NEW: "new",
    PENDING_VERIFY: "pending_verify",
    VALID: "valid",
    INVALID: "invalid",
    ABORTED: "aborted",
    UNDEFINED: "undefined",
}
BOOTLOADER_OFFSET = 0x1000
FACTORY_INDEX, TEST_APP_INDEX = -1, -2
SECTOR = 0x1000
_ENTRY = struct.Struct("<I20sII")


class BootFailure(Exception):
    """Nothing bootable: the board prints this and stays halted (a real one resets in a loop)."""


def entry_crc(seq):
    return zlib.crc32(struct.pack("<I", seq), 0xFFFFFFFF)


class Entry:
    """One otadata sector's esp_ota_select_entry_t."""

    def __init__(self, raw):
        self.seq, self.label, self.state, self.crc = _ENTRY.unpack(raw[:32])

    def pack(self):
        return _ENTRY.pack(self.seq, self.label, self.state, self.crc)

    def invalid(self):  # bootloader_common_ota_select_invalid
        return self.seq == 0xFFFFFFFF or self.state in (INVALID, ABORTED)

    def valid(self):  # bootloader_common_ota_select_valid
        return not self.invalid() and self.crc == entry_crc(self.seq)

    def initial(self):
        return self.seq == 0xFFFFFFFF or self.crc != entry_crc(self.seq)

    def __repr__(self):
        return "Entry(seq=%d, state=%s)" % (self.seq, STATE_NAMES.get(self.state, self.state))


def active(entries):
    """bootloader_common_get_active_otadata: the valid entry with the higher seq (0 on a tie)."""
    ok = [e.valid() for e in entries]
    if ok[0] and ok[1]:
        return 0 if entries[0].seq >= entries[1].seq else 1
    return 0 if ok[0] else 1 if ok[1] else -1


def read_otadata(flash, part):
    return [Entry(flash.read(part.offset + i * SECTOR, 32)) for i in (0, 1)]


def write_otadata(flash, part, i, entry):
    flash.erase(part.offset + i * SECTOR, SECTOR)
    flash.write(part.offset + i * SECTOR, entry.pack())


class Layout:
    """What the bootloader keeps of the table (bootloader_state_t)."""

    def __init__(self, parts):
        self.parts = parts
        apps = [p for p in parts if p.type == pt.TYPE_APP]
        self.factory = next((p for p in apps if p.subtype == pt.SUBTYPE_FACTORY), None)
        self.test = next((p for p in apps if p.subtype == pt.SUBTYPE_TEST), None)
        self.ota = {}
        for p in apps:
            if p.is_ota_app():
                self.ota[p.subtype & 0x0F] = p
        self.app_count = len(self.ota)
        self.otadata = next(
            (p for p in parts if p.type == pt.TYPE_DATA and p.subtype == pt.SUBTYPE_OTA_DATA), None
        )

    def partition(self, index):
        if index == FACTORY_INDEX:
            return self.factory
        if index == TEST_APP_INDEX:
            return self.test
        return self.ota.get(index) if 0 <= index < self.app_count else None


class Boot:
    """The result of a boot: the partition and image that run, the index tried first,
    the otadata slots rolled back at this boot, and the log the bootloader wrote."""

    def __init__(self, partition, image, parts, rolled_back, log):
        self.partition, self.image, self.partitions = partition, image, parts
        self.rolled_back, self.log = rolled_back, log

    @property
    def version(self):
        return (self.image.app or {}).get("version")

    @property
    def project(self):
        return (self.image.app or {}).get("project")


def _reader(flash, part):
    return lambda off, n: flash.read(part.offset + off, n)


def boot(flash):
    """Run the ROM and second-stage bootloader on `flash` (a vflash.FlashFile) -> Boot.
    Writes otadata as ESP-IDF's bootloader does. BootFailure if the board cannot boot."""
    log = []
    try:
        espimage.verify(
            lambda off, n: flash.read(BOOTLOADER_OFFSET + off, n),
            pt.TABLE_OFFSET - BOOTLOADER_OFFSET,
            mapped=False,
        )
    except espimage.ImageError as e:
        head = flash.read(BOOTLOADER_OFFSET, 4)
        if head[0] != espimage.MAGIC:
            raise BootFailure("invalid header: 0x%08x" % struct.unpack("<I", head)[0])
        raise BootFailure("bootloader image at 0x1000: %s" % e)
    try:
        parts = pt.from_binary(flash.read(pt.TABLE_OFFSET, pt.TABLE_MAX))
    except pt.PartitionTableError as e:
        raise BootFailure("E boot: %s\nE boot: load partition table error!" % e)
    bs = Layout(parts)
    rolled_back = []
    start, initial = _select(flash, bs, log, rolled_back)
    order = list(range(start, FACTORY_INDEX - 1, -1)) + list(range(start + 1, bs.app_count))
    for index in order:
        part = bs.partition(index)
        if part is None:
            continue
        try:
            img = espimage.verify(_reader(flash, part), part.size)
        except espimage.ImageError as e:
            log.append("E esp_image: %s" % e)
            log.append(
                "E boot: %s is not bootable"
                % ("Factory app partition" if index == FACTORY_INDEX else "OTA app partition slot %d" % index)
            )
            continue
        if index > FACTORY_INDEX and initial:  # set_actual_ota_seq
            e = Entry(b"\xff" * 32)
            e.seq, e.state = index + 1, VALID
            e.crc = entry_crc(e.seq)
            write_otadata(flash, bs.otadata, 0, e)
            log.append("I boot: Set actual ota_seq=%d in otadata[0]" % e.seq)
        log.append("I boot: Loaded app from partition at offset 0x%x" % part.offset)
        return Boot(part, img, parts, rolled_back, log)
    if bs.test is not None:
        try:
            img = espimage.verify(_reader(flash, bs.test), bs.test.size)
            log.append("W boot: Falling back to test app as only bootable partition")
            return Boot(bs.test, img, parts, rolled_back, log)
        except espimage.ImageError:
            pass
    log.append("E boot: No bootable app partitions in the partition table")
    raise BootFailure("\n".join(x for x in log if x.startswith("E ")))


def _select(flash, bs, log, rolled_back):
    """bootloader_utility_get_selected_boot_partition -> (index to try first, initial otadata)."""
    if bs.otadata is None:
        return FACTORY_INDEX, False
    if bs.otadata.size < 2 * SECTOR:
        raise BootFailure(
            "E boot: ota_info partition size %d is too small (minimum %d bytes)"
            % (bs.otadata.size, 2 * SECTOR)
        )
    od = read_otadata(flash, bs.otadata)
    for i, e in enumerate(od):
        if e.state == PENDING_VERIFY:  # booted once, never confirmed: roll it back
            e.state = ABORTED
            write_otadata(flash, bs.otadata, i, e)
            if bs.app_count and e.seq != 0xFFFFFFFF:
                slot = bs.ota.get((e.seq - 1) % bs.app_count)
                rolled_back.append(slot.label if slot else "ota_%d" % ((e.seq - 1) % bs.app_count))
            log.append("D boot: otadata[%d] is marking as ABORTED" % i)
    if (od[0].invalid() and od[1].invalid()) or bs.app_count == 0:
        if bs.factory is not None:
            return FACTORY_INDEX, False
        return 0, od[0].initial() and od[1].initial()
    a = active(od)
    if a == -1:
        log.append(
            "E boot: ota data partition invalid, %s"
            % ("falling back to factory" if bs.factory else "and no factory, will try all partitions")
        )
        return FACTORY_INDEX, False
    index = (od[a].seq - 1) % bs.app_count
    if od[a].state == NEW:
        od[a].state = PENDING_VERIFY
        write_otadata(flash, bs.otadata, a, od[a])
    return index, False
