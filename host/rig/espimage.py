"""ESP32 app images (the format esptool writes and ESP-IDF's bootloader loads): build
small ones for virtual boards, and verify any one as the bootloader and
esp_ota_set_boot_partition() do (magic, chip, segments, checksum, SHA-256).

A virtual board cannot run Xtensa code, so what "booting an image" means there is
decided by two things a real image also carries: its application description
(esp_app_desc_t, at 0x20 in the image: version and project name, which a program can
read from its own partition on a real board too) and, for images built here, the Python
modules frozen into it (the payload after the description, in the first DROM segment).
The virtual board's bootloader puts those modules on the module path right after
`.frozen`, where a real firmware's frozen modules are. A real MicroPython image (no
payload) boots as plain MicroPython."""

import hashlib
import struct

MAGIC = 0xE9
CHECKSUM_SEED = 0xEF
APP_DESC_MAGIC = 0xABCD5432
APP_DESC_OFFSET = 0x20  # 24-byte image header + 8-byte segment header
CHIP_ESP32 = 0
MAX_SEGMENTS = 16
_PAYLOAD_MAGIC = b"FWVB"
DROM = (0x3F400000, 0x3F800000)
IROM = (0x400D0000, 0x40400000)
_MMU_PAGE = 0x10000
STOCK_VERSION = "vboard"  # what a new virtual board's factory app says it is


class ImageError(ValueError):
    """Not a bootable ESP32 app image; the text is the reason ESP-IDF would log."""


def _pad4(b):
    return b + b"\0" * (-len(b) % 4)


def _fixed(text, n):
    b = text.encode()
    if len(b) >= n:
        raise ValueError("%r is longer than %d bytes" % (text, n - 1))
    return b.ljust(n, b"\0")


def app_description(version, project="fleetwire", secure_version=0, date="", time="", idf="vboard"):
    """esp_app_desc_t (256 bytes)."""
    return struct.pack(
        "<II8s32s32s16s16s32s32sHHB3s72s",
        APP_DESC_MAGIC,
        secure_version,
        b"",
        _fixed(version, 32),
        _fixed(project, 32),
        _fixed(time, 16),
        _fixed(date, 16),
        _fixed(idf, 32),
        bytes(32),
        0,
        0,
        0,
        b"",
        b"",
    )


def _payload(files):
    out = [_PAYLOAD_MAGIC, struct.pack("<I", len(files))]
    for name, data in sorted(files.items()):
        if isinstance(data, str):
            data = data.encode()
        n = name.encode()
        if not n or n.startswith(b"/") or b".." in n.split(b"/") or b"\0" in n:
            raise ValueError("frozen module path %r must be relative, without '..'" % name)
        out += [struct.pack("<HI", len(n), len(data)), n, data]
    return b"".join(out)


def image(segments, entry, hash_appended=True, chip=CHIP_ESP32, flash_mode=2, size_freq=0x20):
    """[(load_addr, data)] -> an ESP32 image: header, extended header, segments, checksum, SHA-256."""
    out = struct.pack("<BBBBI", MAGIC, len(segments), flash_mode, size_freq, entry)
    # extended header: wp pin, drive strengths, chip id, min rev, min/max full rev, hash flag
    out += struct.pack("<B3sHBHH4sB", 0xEE, b"", chip, 0, 0, 0xFFFF, b"", 1 if hash_appended else 0)
    ck = CHECKSUM_SEED
    for addr, data in segments:
        data = _pad4(data)
        out += struct.pack("<II", addr, len(data)) + data
        for b in data:
            ck ^= b
    out += b"\0" * (15 - len(out) % 16) + bytes([ck])
    if hash_appended:
        out += hashlib.sha256(out).digest()
    return out


def app_image(version, project="fleetwire", files=None, secure_version=0):
    """A small ESP32 app image for a virtual board: its description says `version` and
    `project`; `files` ({"fwinfo.py": b"...", "pkg/mod.mpy": ...}) are the modules frozen
    into it. Everything a real bootloader checks is real (esptool image-info reads it)."""
    drom = app_description(version, project, secure_version) + (_payload(files) if files else b"")
    iram = b"\x00\x00\x00\x00"  # the entry point's word
    return image([(DROM[0] + APP_DESC_OFFSET, drom), (0x40080000, iram)], entry=0x40080000)


def bootloader_image():
    """A second-stage bootloader image for 0x1000 (a virtual board runs its own in its place)."""
    desc = struct.pack("<BB2sI32s24s16s", 0x50, 0, b"", 1, _fixed("fleetwire-vboard", 32), b"", b"")
    return image([(0x3FFF0030, desc)], entry=0x3FFF0030, hash_appended=False)


def firmware(app, table, base=0x1000, boot=None):
    """A merged .bin as MicroPython's ESP32 releases are: bootloader, then the partition
    table (bytes, at 0x8000) and the app (at 0x10000), for writing at `base`."""
    boot = boot or bootloader_image()
    out = bytearray(b"\xff" * (0x10000 - base))
    out[0 : len(boot)] = boot
    out[0x8000 - base : 0x8000 - base + len(table)] = table
    return bytes(out) + app


class Image:
    """A verified image: its length, segments [(load_addr, flash offset, length)], its
    app description ({"version", "project", "secure_version"}) or None, and the offset
    and length of its frozen-module payload (0, 0 if none)."""

    def __init__(self, length, segments, app, payload):
        self.length, self.segments, self.app, self.payload = length, segments, app, payload


def verify(read, size, mapped=True):
    """Check the image at the start of a partition as esp_image_verify() does.
    read(offset, n) -> bytes (0xFF past what was written); size: the partition's.
    -> Image, or ImageError with the reason."""
    head = read(0, 24)
    if head[0] != MAGIC:
        raise ImageError("image has invalid magic byte (expected 0xE9, saw 0x%02x)" % head[0])
    nseg = head[1]
    if nseg == 0 or nseg > MAX_SEGMENTS:
        raise ImageError("image has %d segments (at most %d)" % (nseg, MAX_SEGMENTS))
    chip = struct.unpack_from("<H", head, 12)[0]
    if chip != CHIP_ESP32:
        raise ImageError("mismatch chip ID, expected %d, found %d" % (CHIP_ESP32, chip))
    hash_appended = head[23] == 1
    sha = hashlib.sha256(head)
    ck = CHECKSUM_SEED
    pos = 24
    segments = []
    for i in range(nseg):
        sh = read(pos, 8)
        addr, n = struct.unpack("<II", sh)
        if n % 4:
            raise ImageError("segment %d has a length of %d, not a multiple of 4" % (i, n))
        if pos + 8 + n > size:
            raise ImageError(
                "segment %d ends at 0x%x, past the partition's 0x%x bytes" % (i, pos + 8 + n, size)
            )
        if (
            mapped
            and (DROM[0] <= addr < DROM[1] or IROM[0] <= addr < IROM[1])
            and (pos + 8) % _MMU_PAGE != addr % _MMU_PAGE
        ):
            raise ImageError("segment %d load address 0x%08x doesn't match data 0x%08x" % (i, addr, pos + 8))
        sha.update(sh)
        done = 0
        while done < n:
            chunk = read(pos + 8 + done, min(4096, n - done))
            sha.update(chunk)
            ck ^= _xor(chunk)
            done += len(chunk)
        segments.append((addr, pos + 8, n))
        pos += 8 + n
    pad = 15 - pos % 16
    tail = read(pos, pad + 1)
    sha.update(tail)
    pos += pad + 1
    if tail[-1] != ck:
        raise ImageError("checksum failed. Calculated 0x%02x read 0x%02x" % (ck, tail[-1]))
    if hash_appended:
        if pos + 32 > size:
            raise ImageError("the image's SHA-256 lies past the end of the partition")
        if read(pos, 32) != sha.digest():
            raise ImageError("image hash failed - image is corrupt")
        pos += 32
    app, payload = None, (0, 0)
    if segments and segments[0][2] >= 256:
        d = read(segments[0][1], 256)
        app = parse_description(d)
        if app is not None and segments[0][2] >= 256 + 8 and read(segments[0][1] + 256, 4) == _PAYLOAD_MAGIC:
            payload = (segments[0][1] + 256, segments[0][2] - 256)
    return Image(pos, segments, app, payload)


def _xor(chunk):
    x = 0
    for b in chunk:
        x ^= b
    return x


def parse_description(d):
    """esp_app_desc_t bytes -> {"version", "project", "secure_version"}, None without its magic."""
    magic, secure = struct.unpack_from("<II", d)
    if magic != APP_DESC_MAGIC:
        return None

    def s(off, n):
        return d[off : off + n].split(b"\0", 1)[0].decode("utf-8", "replace")

    return {"version": s(16, 32), "project": s(48, 32), "secure_version": secure}


def frozen_files(read, offset, length):
    """The payload at `offset` (verify()'s Image.payload) -> {path: bytes}; ImageError if malformed."""
    if length < 8 or read(offset, 4) != _PAYLOAD_MAGIC:
        raise ImageError("no frozen modules in this image")
    count = struct.unpack("<I", read(offset + 4, 4))[0]
    pos, end, files = offset + 8, offset + length, {}
    for _ in range(count):
        if pos + 6 > end:
            raise ImageError("frozen module table cut short")
        nlen, dlen = struct.unpack("<HI", read(pos, 6))
        if pos + 6 + nlen + dlen > end:
            raise ImageError("frozen module %d runs past its segment" % len(files))
        name = read(pos + 6, nlen).decode("utf-8", "replace")
        if not name or name.startswith("/") or ".." in name.split("/"):
            raise ImageError("frozen module path %r is not a relative path" % name)
        files[name] = read(pos + 6 + nlen, dlen)
        pos += 6 + nlen + dlen
    return files
