# An ESP32 data partition emulated by a file, for bench/heap.py's store program on the unix
# port: MicroPython's extended block protocol, as esp32.Partition offers it, with the flash
# in a file rather than in the heap (host/portable/norflash.py, the suite's emulator, keeps its flash
# in a bytearray: firmware/partitions-mqtt.csv's 256 KB partition would not fit a board's
# heap, and would swamp the smallest heap measured). Programs overwrite bytes as NOR flash
# does only because the ring store programs a state byte as the AND of what it read.
_FF = b"\xff" * 256


class FlashFile:
    def __init__(self, path, blocks, block_size):
        self.blocks = blocks
        self.bs = block_size
        self.f = open(path, "w+b")
        for _ in range(blocks * block_size // len(_FF)):  # erased
            self.f.write(_FF)

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
