# The OTA half of the emulated esp32.Partition (esp32.py), following ESP-IDF's
# esp_ota_ops.c as MicroPython calls it: esp_ota_set_boot_partition (the image must
# verify: ESP_ERR_OTA_VALIDATE_FAILED; then otadata gets a NEW entry selecting the
# slot), esp_ota_get_next_update_partition, esp_ota_get_boot_partition and
# esp_ota_mark_app_valid_cancel_rollback (the running entry becomes VALID, so the
# bootloader does not roll it back). otadata is two 4 KB sectors holding an
# esp_ota_select_entry_t each: ota_seq, seq_label[20], ota_state, crc32(ota_seq).
import struct
from esp32 import _SEC, _erase, _first, _read, _write

_OTA0 = 0x10
_NEW, _VALID = 0, 2


def _err(code, name):
    raise OSError(-code, name)  # check_esp_err


def _crc(seq):
    import binascii

    return binascii.crc32(struct.pack("<I", seq), 0xFFFFFFFF)


def _u32(e, off=0):
    return struct.unpack_from("<I", e, off)[0]


def _ota_count():
    # esp_ota_get_app_partition_count: ota_0, ota_1, ... while they exist
    n = 0
    while _first(0, _OTA0 + n) is not None:
        n += 1
    return n


def _otadata():
    # -> (the otadata partition's table entry, [entry 0, entry 1]); ESP_ERR_NOT_FOUND without one
    p = _first(1, 0x00)
    if p is None:
        _err(0x105, "ESP_ERR_NOT_FOUND")
    od = [bytearray(32), bytearray(32)]
    _read(p[3], od[0])
    _read(p[3] + _SEC, od[1])
    return p, od


def _invalid(e):
    return _u32(e) == 0xFFFFFFFF or _u32(e, 24) in (3, 4)


def _active(od):
    # bootloader_common_get_active_otadata: the valid entry with the higher seq (0 on a tie)
    a, b = [not _invalid(e) and _u32(e, 28) == _crc(_u32(e)) for e in od]
    if a and b:
        return 0 if _u32(od[0]) >= _u32(od[1]) else 1
    return 0 if a else 1 if b else -1


def _rewrite(p, od, seq, i):
    # rewrite_ota_seq: the entry gets seq and its crc; its sector is erased and written
    struct.pack_into("<I", od[i], 0, seq)
    struct.pack_into("<I", od[i], 28, _crc(seq))
    _erase(p[3] + i * _SEC, _SEC)
    _write(p[3] + i * _SEC, od[i], bytearray(64))


def _default():
    # find_default_boot_partition: factory, else the first OTA slot, else the test app
    p = _first(0, 0x00)
    s = 0
    while p is None and s < 16:
        p = _first(0, _OTA0 + s)
        s += 1
    return p or _first(0, 0x20)


def boot():
    # esp_ota_get_boot_partition
    if _first(1, 0x00) is None:
        return None
    p, od = _otadata()
    n = _ota_count()
    a = _active(od)
    if (_invalid(od[0]) and _invalid(od[1])) or n == 0 or a == -1:
        return _default()
    return _first(0, _OTA0 + (_u32(od[a]) - 1) % n)


def next_update(cur):
    # esp_ota_get_next_update_partition: the OTA slot after cur, else the first one
    first = None
    hit = False
    for s in range(16):
        p = _first(0, _OTA0 + s)
        if p is None:
            continue
        if first is None:
            first = p
        if p[3] == cur[3]:
            hit = True
        elif hit:
            return p
    return first


def set_boot(p):
    # esp_ota_set_boot_partition
    if not verify(p):
        _err(0x1503, "ESP_ERR_OTA_VALIDATE_FAILED")
    if p[1] != 0:
        _err(0x102, "ESP_ERR_INVALID_ARG")
    if p[2] == 0x00:  # the factory app: otadata is erased
        od = _first(1, 0x00)
        if od is None:
            _err(0x105, "ESP_ERR_NOT_FOUND")
        _erase(od[3], od[4])
        return
    odp, od = _otadata()
    n = _ota_count()
    slot = p[2] & 0x0F
    if slot >= n:
        _err(0x102, "ESP_ERR_INVALID_ARG")
    a = _active(od)
    if a == -1:
        i, new = 0, slot + 1
    elif (_u32(od[a]) - 1) % n == slot:  # already selected: only its state changes
        i, new = a, _u32(od[a])
    else:  # the next seq that selects this slot, in the other sector
        i, seq, new = a ^ 1, _u32(od[a]), (slot + 1) % n
        while seq > new:
            new += n
    struct.pack_into("<I", od[i], 24, _NEW)
    _rewrite(odp, od, new, i)


def mark_valid():
    # esp_ota_mark_app_valid_cancel_rollback
    p, od = _otadata()
    a = _active(od)
    if a == -1 or _ota_count() == 0:
        _err(-1, "ESP_FAIL")  # "Running firmware is factory"
    if _u32(od[a], 24) != _VALID:
        struct.pack_into("<I", od[a], 24, _VALID)
        _rewrite(p, od, _u32(od[a]), a)


def erase_sections(part, offset, n):
    # writeblocks with a block size under 4 KB: erase whole sectors, keeping their other bytes
    c = bytearray(_SEC)
    a = offset // _SEC * _SEC
    o = offset % _SEC
    top = offset + n
    base = part._p[3]
    while a < top:
        if o > 0 or top < a + _SEC:
            part._range(a, _SEC)
            _read(base + a, c)
        part._range(a, _SEC, True)
        if o > 0:
            _write(base + a, memoryview(c)[:o], part._tmp)
        if top < a + _SEC:
            _write(base + top, memoryview(c)[top - a :], part._tmp)
        o = 0
        a += _SEC


def verify(p):
    # esp_image_verify: magic, chip, segments inside the partition, the MMU alignment of
    # flash-mapped ones, the XOR checksum (byte-wise XOR of 512-byte ints, folded at the
    # end: no Python loop per byte) and the appended SHA-256
    import hashlib

    base, size = p[3], p[4]
    h = bytearray(24)
    _read(base, h)
    nseg = h[1]
    if h[0] != 0xE9 or not 0 < nseg <= 16 or h[12] | h[13] << 8 != 0:
        return False
    sha = hashlib.sha256(h)
    acc = 0
    buf = bytearray(512)
    sh = bytearray(8)
    pos = 24
    for _ in range(nseg):
        _read(base + pos, sh)
        addr, n = struct.unpack("<II", sh)
        if n & 3 or pos + 8 + n > size:
            return False
        if (0x3F400000 <= addr < 0x3F800000 or 0x400D0000 <= addr < 0x40400000) and (pos + 8 - addr) & 0xFFFF:
            return False
        sha.update(sh)
        done = 0
        while done < n:
            k = min(512, n - done)
            mv = memoryview(buf)[:k]
            _read(base + pos + 8 + done, mv)
            sha.update(mv)
            acc ^= int.from_bytes(mv, "little")
            done += k
        pos += 8 + n
    ck = 0xEF
    for b in acc.to_bytes(512, "little"):
        ck ^= b
    tail = bytearray(16 - pos % 16)
    if pos + len(tail) + (32 if h[23] == 1 else 0) > size:
        return False
    _read(base + pos, tail)
    sha.update(tail)
    if tail[-1] != ck:
        return False
    if h[23] == 1:
        d = bytearray(32)
        _read(base + pos + len(tail), d)
        return bytes(d) == sha.digest()
    return True
