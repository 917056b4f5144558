# esp32.Partition, as a virtual board emulates it: a data partition is a file in the
# board directory with NOR flash rules (erased bytes are 0xFF, programming only
# clears bits), read and written through the file so it costs no heap and survives
# a "power cycle".
import _vboard

_BLOCK = 4096


class Partition:
    BOOT = 0
    RUNNING = 1
    TYPE_APP = 0
    TYPE_DATA = 1

    def __init__(self, label, blocks):
        self.label = label
        self.encrypted = False
        if isinstance(blocks, dict):  # {"blocks": n, "encrypted": true}: flagged in the table
            self.encrypted = bool(blocks.get("encrypted"))
            blocks = blocks["blocks"]
        self.blocks = blocks
        self.path = _vboard.DIR + "/flash-%s.bin" % label
        self._buf = bytearray(64)

    @classmethod
    def find(cls, type=TYPE_APP, subtype=0xFF, label=None):
        if type != cls.TYPE_DATA:
            return []
        parts = _vboard.info().get("partitions", {"mqtt": 64})
        return [cls(name, n) for name, n in parts.items() if label is None or name == label]

    def info(self):
        return (self.TYPE_DATA, 0x99, 0, self.blocks * _BLOCK, self.label, self.encrypted)

    def readblocks(self, block, buf, off=0):
        with open(self.path, "rb") as f:
            f.seek(block * _BLOCK + off)
            n = f.readinto(buf)
        for i in range(n or 0, len(buf)):
            buf[i] = 0xFF

    def writeblocks(self, block, buf, off=None):
        if off is None:  # the simple protocol: erase, then write whole blocks
            for b in range(len(buf) // _BLOCK):
                self.ioctl(6, block + b)
            off = 0
        addr = block * _BLOCK + off
        tmp = self._buf
        with open(self.path, "r+b") as f:
            done = 0
            while done < len(buf):
                n = min(len(tmp), len(buf) - done)
                f.seek(addr + done)
                f.readinto(tmp)
                for i in range(n):  # NOR: programming can only clear bits
                    tmp[i] &= buf[done + i]
                f.seek(addr + done)
                f.write(memoryview(tmp)[:n])
                done += n

    def ioctl(self, op, arg):
        if op == 4:
            return self.blocks
        if op == 5:
            return _BLOCK
        if op == 6:
            with open(self.path, "r+b") as f:
                f.seek(arg * _BLOCK)
                ff = b"\xff" * 256
                for _ in range(_BLOCK // 256):
                    f.write(ff)
            return 0
        return 0
