"""ESP32 partition tables: the CSV that ESP-IDF's gen_esp32part.py reads and the binary
the second-stage bootloader reads at 0x8000 (32-byte entries, an MD5 entry, 0xFF after).
Used by `fleetwire flash --partitions` and by the virtual board, whose partitions are
whatever table its emulated flash holds."""

import hashlib
import re
import struct

TABLE_OFFSET = 0x8000
TABLE_MAX = 0xC00  # ESP_PARTITION_TABLE_MAX_LEN
SECTOR = 0x1000
APP_ALIGN = 0x10000  # app partitions start on a 64 KB flash MMU page
_MAGIC = b"\xaa\x50"
_MD5_MAGIC = b"\xeb\xeb"
_ENTRY = struct.Struct("<2sBBII16sI")

TYPE_APP, TYPE_DATA = 0x00, 0x01
TYPES = {"app": TYPE_APP, "data": TYPE_DATA}
APP_SUBTYPES = dict({"factory": 0x00, "test": 0x20}, **{"ota_%d" % i: 0x10 + i for i in range(16)})
DATA_SUBTYPES = {
    "ota": 0x00,
    "phy": 0x01,
    "nvs": 0x02,
    "coredump": 0x03,
    "nvs_keys": 0x04,
    "efuse": 0x05,
    "undefined": 0x06,
    "esphttpd": 0x80,
    "fat": 0x81,
    "spiffs": 0x82,
    "littlefs": 0x83,
}
FLAGS = {"encrypted": 1, "readonly": 2}
SUBTYPE_OTA_DATA = 0x00
SUBTYPE_FACTORY = 0x00
SUBTYPE_OTA_0 = 0x10
SUBTYPE_TEST = 0x20


class PartitionTableError(ValueError):
    """A partition table that cannot be read or would not work on a board."""


class Partition:
    __slots__ = ("label", "type", "subtype", "offset", "size", "flags")

    def __init__(self, label, type, subtype, offset, size, flags=0):
        self.label, self.type, self.subtype = label, type, subtype
        self.offset, self.size, self.flags = offset, size, flags

    @property
    def encrypted(self):
        return bool(self.flags & 1)

    @property
    def end(self):
        return self.offset + self.size

    def is_ota_app(self):
        return self.type == TYPE_APP and SUBTYPE_OTA_0 <= self.subtype < SUBTYPE_OTA_0 + 16

    def __eq__(self, other):
        return isinstance(other, Partition) and all(
            getattr(self, k) == getattr(other, k) for k in self.__slots__
        )

    def __repr__(self):
        return "Partition(%r, type=%d, subtype=0x%02x, offset=0x%x, size=0x%x, flags=%d)" % (
            self.label,
            self.type,
            self.subtype,
            self.offset,
            self.size,
            self.flags,
        )


def _number(text, what, line):
    t = text.strip().lower()
    m = re.fullmatch(r"(0x[0-9a-f]+|\d+)([km]?)", t)
    if not m:
        raise PartitionTableError(
            "line %d: %s %r is not a number (0x1000, 4096, 4K, 1M)" % (line, what, text)
        )
    n = int(m.group(1), 0)
    return n * {"": 1, "k": 1024, "m": 1024 * 1024}[m.group(2)]


def _subtype(kind, text, line):
    t = text.strip().lower()
    names = APP_SUBTYPES if kind == TYPE_APP else DATA_SUBTYPES if kind == TYPE_DATA else {}
    if t in names:
        return names[t]
    try:
        n = _number(t, "subtype", line)
    except PartitionTableError:
        raise PartitionTableError(
            "line %d: unknown subtype %r for this type (one of %s, or a number)"
            % (line, text, ", ".join(sorted(names)) or "a number")
        )
    if n > 0xFF:
        raise PartitionTableError("line %d: subtype %r is over 0xff" % (line, text))
    return n


def parse_csv(text):
    """ESP-IDF partition CSV text -> [Partition], with blank offsets placed as gen_esp32part.py does."""
    parts = []
    offset = TABLE_OFFSET + SECTOR
    for n, raw in enumerate(text.splitlines(), 1):
        row = raw.split("#", 1)[0].strip()
        if not row:
            continue
        cells = [c.strip() for c in row.split(",")]
        cells += [""] * (6 - len(cells))
        label, kind, sub, off, size, flags = cells[:6]
        if not label or not kind or not size:
            raise PartitionTableError("line %d: a partition needs a name, a type and a size: %r" % (n, raw))
        if len(label.encode()) > 15:
            raise PartitionTableError("line %d: name %r is longer than 15 bytes" % (n, label))
        if kind.lower() in TYPES:
            t = TYPES[kind.lower()]
        else:
            t = _number(kind, "type", n)
            if t > 0xFE:
                raise PartitionTableError("line %d: type %r is over 0xfe" % (n, kind))
        st = _subtype(t, sub, n) if sub else 0
        align = APP_ALIGN if t == TYPE_APP else SECTOR
        if off:
            o = _number(off, "offset", n)
            if o % align:
                raise PartitionTableError(
                    "line %d: %s starts at 0x%x, not on a 0x%x boundary" % (n, label, o, align)
                )
        else:
            o = (offset + align - 1) // align * align
        sz = _number(size, "size", n)
        if sz <= 0:
            raise PartitionTableError("line %d: %s has no size" % (n, label))
        fl = 0
        for f in (x.strip().lower() for x in flags.split(":") if x.strip()):
            if f not in FLAGS:
                raise PartitionTableError("line %d: unknown flag %r (encrypted, readonly)" % (n, f))
            fl |= FLAGS[f]
        parts.append(Partition(label, t, st, o, sz, fl))
        offset = o + sz
    check(parts)
    return parts


def check(parts, flash_size=None):
    """Refuse a table a bootloader would refuse or that overlaps itself."""
    if not parts:
        raise PartitionTableError("the partition table is empty")
    if len(parts) > TABLE_MAX // 32 - 1:
        raise PartitionTableError(
            "%d partitions: a table holds at most %d" % (len(parts), TABLE_MAX // 32 - 1)
        )
    labels = set()
    for p in parts:
        if p.label in labels:
            raise PartitionTableError("two partitions are named %r" % p.label)
        labels.add(p.label)
        if p.offset < TABLE_OFFSET + SECTOR:
            raise PartitionTableError(
                "%s starts at 0x%x, inside the bootloader or the table (before 0x%x)"
                % (p.label, p.offset, TABLE_OFFSET + SECTOR)
            )
        if flash_size is not None and p.end > flash_size:
            raise PartitionTableError(
                "%s ends at 0x%x, past the end of %d MB of flash" % (p.label, p.end, flash_size >> 20)
            )
    spans = sorted(parts, key=lambda p: p.offset)
    for a, b in zip(spans, spans[1:]):
        if a.end > b.offset:
            raise PartitionTableError(
                "%s (0x%x-0x%x) overlaps %s (from 0x%x)" % (a.label, a.offset, a.end, b.label, b.offset)
            )
    if sum(1 for p in parts if p.type == TYPE_DATA and p.subtype == SUBTYPE_OTA_DATA) > 1:
        raise PartitionTableError("more than one otadata partition")
    for p in parts:
        if p.type == TYPE_DATA and p.subtype == SUBTYPE_OTA_DATA and p.size < 2 * SECTOR:
            raise PartitionTableError("otadata is 0x%x bytes: it needs two 4 KB sectors" % p.size)


def to_binary(parts):
    """[Partition] -> the 0xC00-byte table as flashed at 0x8000 (MD5 entry included)."""
    check(parts)
    out = b"".join(
        _ENTRY.pack(_MAGIC, p.type, p.subtype, p.offset, p.size, p.label.encode(), p.flags) for p in parts
    )
    out += _MD5_MAGIC + b"\xff" * 14 + hashlib.md5(out).digest()
    return out + b"\xff" * (TABLE_MAX - len(out))


def from_binary(data):
    """The table's bytes (as read at 0x8000) -> [Partition]; PartitionTableError if a
    bootloader would refuse it (bad magic, MD5 mismatch, nothing in it)."""
    parts = []
    for i in range(0, min(len(data), TABLE_MAX), 32):
        e = data[i : i + 32]
        if len(e) < 32 or e[:2] == b"\xff\xff":
            break
        if e[:2] == _MD5_MAGIC:
            if hashlib.md5(data[:i]).digest() != e[16:32]:
                raise PartitionTableError("the partition table's MD5 does not match its entries")
            break
        if e[:2] != _MAGIC:
            raise PartitionTableError(
                "no partition table (entry %d starts 0x%s, expected aa50)" % (i // 32, e[:2].hex())
            )
        _, t, st, off, size, label, flags = _ENTRY.unpack(e)
        parts.append(Partition(label.split(b"\0", 1)[0].decode("utf-8", "replace"), t, st, off, size, flags))
    if not parts:
        raise PartitionTableError("no partition table (the first entry is empty)")
    return parts


def load(path):
    """A .csv or a .bin partition table file -> [Partition]."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] in (_MAGIC, _MD5_MAGIC):
        return from_binary(data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise PartitionTableError("%s is neither a partition table CSV nor a binary table" % path)
    return parse_csv(text)


def find(parts, type=None, subtype=None, label=None):
    return [
        p
        for p in parts
        if (type is None or p.type == type)
        and (subtype is None or p.subtype == subtype)
        and (label is None or p.label == label)
    ]
