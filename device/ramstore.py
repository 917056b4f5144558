# RamStore: the ring store's code over a RAM buffer instead of flash. Volatile (a
# reset loses it), but bounded in bytes rather than in messages, and it holds
# copies: the application may reuse its buffers after publish() returns.
# Without any store= the client keeps up to queue_size messages by reference in
# RAM, which costs less; RamStore is for a byte-bounded offline queue.
try:
    from micropython import const
except ImportError:
    from .cpython import const

from . import say
from .ring.store import RingStore

_RAM_SMALL = const(37)  # an error, by its line in reasons.TEXT


class RamBlocks:
    # the extended block protocol over a bytearray; erased bytes read 0xFF
    def __init__(self, blocks, block_size):
        self.bs = block_size
        self.n = blocks
        self.data = bytearray(blocks * block_size)
        for b in range(blocks):
            self.ioctl(6, b)

    def readblocks(self, b, buf, off=0):
        a = b * self.bs + off
        buf[:] = memoryview(self.data)[a : a + len(buf)]

    def writeblocks(self, b, buf, off=0):
        a = b * self.bs + off
        self.data[a : a + len(buf)] = buf

    def ioctl(self, op, arg):
        if op == 4:
            return self.n
        if op == 5:
            return self.bs
        if op == 6:
            a = arg * self.bs
            self.data[a : a + self.bs] = b"\xff" * self.bs
        return 0


class RamStore(RingStore):
    """MQTTClient(store=RamStore(16384)): a 16 KB volatile message ring."""

    def __init__(self, size=16384, block_size=2048):
        if size // block_size < 3:
            raise ValueError(say(_RAM_SMALL))
        super().__init__(RamBlocks(size // block_size, block_size))
