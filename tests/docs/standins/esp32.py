# The unix port has no `esp32` module: this stand-in gives the documentation's examples the
# one thing they take from it, the board's `mqtt` data partition (firmware/partitions-mqtt.csv,
# 256 KB), as esp32.Partition offers it (MicroPython's extended block protocol and info()),
# with the flash in a file of the working directory (NOR flash: erased bytes read 0xFF).
_FF = b"\xff" * 256


class _Partition:
    def __init__(self, path, label, blocks=64, block_size=4096):
        self.label = label
        self.blocks = blocks
        self.bs = block_size
        try:
            self.f = open(path, "r+b")
        except OSError:
            self.f = open(path, "w+b")
            for _ in range(blocks * block_size // len(_FF)):
                self.f.write(_FF)

    def info(self):  # (type, subtype, address, size, label, encrypted)
        return (Partition.TYPE_DATA, 0x99, 0x310000, self.blocks * self.bs, self.label, False)

    def readblocks(self, n, buf, off=0):
        self.f.seek(n * self.bs + off)
        self.f.readinto(buf)

    def writeblocks(self, n, buf, off=0):
        self.f.seek(n * self.bs + off)
        self.f.write(buf)

    def ioctl(self, op, arg):
        if op == 4:  # block count
            return self.blocks
        if op == 5:  # block size
            return self.bs
        if op == 6:  # erase a block
            self.f.seek(arg * self.bs)
            for _ in range(self.bs // len(_FF)):
                self.f.write(_FF)
        return 0


class Partition:
    TYPE_APP = 0
    TYPE_DATA = 1

    @staticmethod
    def find(type=TYPE_APP, subtype=0xFF, label=None):
        if type == Partition.TYPE_DATA and label == "mqtt":
            return [_Partition(label + ".flash", label)]
        return []
