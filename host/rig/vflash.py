"""A virtual board's SPI flash: one file, addressed as the chip is (the bootloader at
0x1000, the partition table at 0x8000, ...), with NOR rules: erased bytes read 0xFF, an
erase works on whole 4 KB sectors, programming can only clear bits. The file holds the
flash up to the last byte ever written; everything past its end reads as erased, so a
4 MB board costs only what it holds."""

import hashlib
import os

SECTOR = 0x1000
DEFAULT_SIZE = 4 * 1024 * 1024
_FF = b"\xff" * 65536


class FlashRangeError(ValueError):
    """An address range outside the flash chip."""


class FlashFile:
    def __init__(self, path, size=DEFAULT_SIZE):
        self.path = path
        self.size = size
        if not os.path.exists(path):
            open(path, "wb").close()

    def _check(self, addr, n):
        if addr < 0 or n < 0 or addr + n > self.size:
            raise FlashRangeError("0x%x+0x%x is outside %d MB of flash" % (addr, n, self.size >> 20))

    def _end(self, fd):
        return os.fstat(fd).st_size

    def read(self, addr, n):
        self._check(addr, n)
        fd = os.open(self.path, os.O_RDONLY)
        try:
            data = os.pread(fd, n, addr)
        finally:
            os.close(fd)
        return data + b"\xff" * (n - len(data))

    def write(self, addr, data):
        """Program `data` at `addr`: each byte becomes old & new, as on NOR flash (so
        0xFF bytes change nothing, and the file does not grow for them)."""
        n = len(data)
        self._check(addr, n)
        data = bytes(data)
        for at in range(0, n, len(_FF)):
            chunk = data[at : at + len(_FF)]
            if chunk != _FF[: len(chunk)]:
                self._program(addr + at, chunk)

    def _program(self, addr, data):
        n = len(data)
        old = self.read(addr, n)
        new = (int.from_bytes(old, "big") & int.from_bytes(data, "big")).to_bytes(n, "big")
        fd = os.open(self.path, os.O_RDWR)
        try:
            end = self._end(fd)
            while end < addr:  # fill the gap with erased bytes, not the zeros of a hole
                k = min(len(_FF), addr - end)
                os.pwrite(fd, _FF[:k], end)
                end += k
            os.pwrite(fd, new, addr)
        finally:
            os.close(fd)

    def erase(self, addr, n):
        """Erase the sectors covering addr..addr+n."""
        start = addr // SECTOR * SECTOR
        stop = -(-(addr + n) // SECTOR) * SECTOR
        self._check(start, stop - start)
        fd = os.open(self.path, os.O_RDWR)
        try:
            end = self._end(fd)
            if stop >= end:
                if start < end:
                    os.ftruncate(fd, start)  # what lies past the file's end is erased already
                return
            pos = start
            while pos < stop:
                k = min(len(_FF), stop - pos)
                os.pwrite(fd, _FF[:k], pos)
                pos += k
        finally:
            os.close(fd)

    def md5(self, addr, n):
        self._check(addr, n)
        h = hashlib.md5()
        done = 0
        while done < n:
            k = min(1 << 20, n - done)
            h.update(self.read(addr + done, k))
            done += k
        return h.hexdigest()
