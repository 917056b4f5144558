# esp32.Partition as a virtual board emulates it, following MicroPython's
# ports/esp32/esp32_partition.c over ESP-IDF's esp_partition: the partitions are those
# of the partition table in the board's emulated flash (flash.bin, an image of the whole
# SPI flash; the supervisor reads the table at each boot, as ESP-IDF does, and names the
# app it booted). NOR rules: erased bytes read 0xFF, erases are 4 KB, programming only
# clears bits. Errors are MicroPython's: OSError(-esp_err, "ESP_ERR_...") as
# check_esp_err raises them, OSError(ENOENT) for no such partition. Reads and writes go
# through the file: no heap, and they survive a power cut. The OTA half (set_boot,
# get_next_update, mark_app_valid_cancel_rollback, Partition.BOOT) is in _esp32ota.py,
# imported on first use: on a board this module costs no heap, here every byte counts.
import _vboard

_SEC = 4096
_FF = b"\xff" * 64
_F = _vboard.DIR + "/" + _vboard.info().get("flash", "flash.bin")


def _read(addr, buf):
    try:
        with open(_F, "rb") as f:
            f.seek(addr)
            n = f.readinto(buf) or 0
    except OSError:
        n = 0
    for i in range(n, len(buf)):  # past the file's end the flash is erased
        buf[i] = 0xFF


def _write(addr, buf, tmp):
    # NOR programming: each byte becomes old & new; a gap before addr is erased flash.
    # No allocation per chunk (on a board this is C code: a program's heap sees none).
    mv = memoryview(buf)
    with open(_F, "r+b") as f:
        end = f.seek(0, 2)
        while end < addr:
            k = min(64, addr - end)
            f.write(_FF if k == 64 else _FF[:k])
            end += k
        done = 0
        while done < len(mv):
            n = min(64, len(mv) - done)
            f.seek(addr + done)
            if addr + done < end:
                got = f.readinto(tmp) or 0
                for i in range(got, 64):
                    tmp[i] = 0xFF
                if tmp != _FF:  # not erased: program over what is there
                    for i in range(n):
                        tmp[i] &= mv[done + i]
                    f.seek(addr + done)
                    f.write(tmp if n == 64 else memoryview(tmp)[:n])
                    done += n
                    continue
                f.seek(addr + done)
            f.write(mv[done : done + n])
            done += n


def _erase(addr, n):
    with open(_F, "r+b") as f:
        stop = min(addr + n, f.seek(0, 2))  # past the file's end it is erased already
        f.seek(addr)
        while addr < stop:
            k = min(64, stop - addr)
            f.write(_FF if k == 64 else _FF[:k])
            addr += k


def _parts(type, subtype=0xFF, label=None):
    # the table the supervisor read from flash at boot, one partition a line, read on
    # demand (kept in RAM it would cost the program heap a board's own table does not)
    out = []
    with open(_vboard.DIR + "/partitions") as f:
        for line in f:
            t, st, off, size, enc, name = line.rstrip("\n").split(",", 5)
            p = [name, int(t), int(st), int(off), int(size), enc == "1"]
            if p[1] == type and (subtype == 0xFF or p[2] == subtype) and (label is None or name == label):
                out.append(p)
    return out


def _first(type, subtype=0xFF, label=None):
    p = _parts(type, subtype, label)
    return p[0] if p else None


class Partition:
    BOOT = 0
    RUNNING = 1
    TYPE_APP = 0
    TYPE_DATA = 1

    def __init__(self, id, block_size=_SEC):
        if isinstance(id, list):  # a table entry (find, get_next_update)
            p = id
        elif id == 0:
            import _esp32ota

            p = _esp32ota.boot()
        elif id == 1:
            r = _vboard.info().get("running")
            p = _first(0, 0xFF, r) if r else None
        elif isinstance(id, int):
            raise ValueError
        elif id is None:  # not a label (an empty get_next_update())
            p = None
        else:
            p = _first(0, 0xFF, id) or _first(1, 0xFF, id)
        if p is None:
            raise OSError(2)  # MP_ENOENT
        self._p = p
        self.block_size = block_size
        self._tmp = bytearray(64)

    @staticmethod
    def find(type=0, subtype=0xFF, label=None, block_size=_SEC):
        return [Partition(p, block_size) for p in _parts(type, subtype, label)]

    def info(self):
        p = self._p
        return (p[1], p[2], p[3], p[4], p[0], p[5])

    def __repr__(self):
        return "<Partition type=%u, subtype=%u, address=%u, size=%u, label=%s, encrypted=%u>" % (
            tuple(self._p[1:5]) + (self._p[0], self._p[5])
        )

    def _range(self, off, n, erase=False):
        # esp_partition_read/write/erase_range's checks, then the erase if asked
        if off > self._p[4] or erase and off % _SEC:
            raise OSError(-0x102, "ESP_ERR_INVALID_ARG")
        if off + n > self._p[4] or erase and n % _SEC:
            raise OSError(-0x104, "ESP_ERR_INVALID_SIZE")
        if erase:
            _erase(self._p[3] + off, n)

    def readblocks(self, block, buf, off=0):
        off += block * self.block_size
        self._range(off, len(buf))
        _read(self._p[3] + off, buf)

    def writeblocks(self, block, buf, off=None):
        addr = block * self.block_size
        if off is not None:  # an extended write: the caller erased
            addr += off
        elif self.block_size >= _SEC:  # a simple write: erase first
            self._range(addr, len(buf), True)
        else:
            import _esp32ota

            _esp32ota.erase_sections(self, addr, len(buf))
        self._range(addr, len(buf))
        _write(self._p[3] + addr, buf, self._tmp)

    def ioctl(self, op, arg):
        if op < 4:
            return 0
        if op == 4:
            return self._p[4] // self.block_size
        if op == 5:
            return self.block_size
        if op == 6:
            if self.block_size != _SEC:
                return -22  # -MP_EINVAL
            self._range(arg * _SEC, _SEC, True)
            return 0
        return None

    def set_boot(self):
        import _esp32ota

        _esp32ota.set_boot(self._p)

    def get_next_update(self):
        import _esp32ota

        return Partition(_esp32ota.next_update(self._p))

    @classmethod
    def mark_app_valid_cancel_rollback(cls):
        import _esp32ota

        _esp32ota.mark_valid()
