# An emulated NOR flash with MicroPython's extended block-device protocol, for the
# store's tests, its bench and the virtual board (in place of esp32.Partition).
# It behaves like the real part where it matters for power-loss safety:
#   - erased bytes read 0xFF; an erase works on a whole block (4096 bytes);
#   - programming can only clear bits: writing a 1 over a 0 raises FlashMisuse;
#   - a power cut can be armed to strike at the N-th program or erase, optionally
#     leaving that operation half done (a prefix of a program, a torn erase);
#   - watch (a callable) sees each program/erase before it happens, and cut_copy()
#     makes the flash a cut there would leave: the power-cut sweep forks at every
#     operation instead of replaying the work up to each one (host/portable/cutsweep.py).
# It counts erases per block and bytes programmed. Portable: runs on the
# MicroPython unix port and on CPython (it is host code, not board code).

BLOCK_SIZE = 4096

# ioctl operations of MicroPython's block protocol
_INIT = 1
_DEINIT = 2
_SYNC = 3
_COUNT = 4
_SIZE = 5
_ERASE = 6


class PowerCut(Exception):
    """The emulated power failed: every operation fails until power_on()."""


class FlashMisuse(Exception):
    """An operation real NOR flash cannot do (programming 0 -> 1, out of range)."""


class _Rng:
    # A tiny LCG, so a cut sweep is repeatable on both interpreters.
    def __init__(self, seed):
        self.x = seed & 0x7FFFFFFF or 1

    def below(self, n):
        self.x = (self.x * 1103515245 + 12345) & 0x7FFFFFFF
        return self.x % n if n else 0


class NorFlash:
    def __init__(self, blocks, block_size=BLOCK_SIZE, path=None, encrypted=False):
        self.encrypted = encrypted  # what info() reports, as esp32.Partition.info() does
        self.blocks = blocks
        self.block_size = block_size
        self.size = blocks * block_size
        self.path = path
        self.data = bytearray(self.size)
        ff = b"\xff" * block_size  # erased, a block at a time: no second full-size copy
        for b in range(blocks):
            self.data[b * block_size : (b + 1) * block_size] = ff
        if path:
            try:
                with open(path, "rb") as f:  # read in place: no second copy in RAM
                    f.readinto(self.data)
            except OSError:
                pass
            self._save(0, self.size)
        self._view = memoryview(self.data)
        self.erases = [0] * blocks
        self.programmed = 0
        self.ops = 0  # programs and erases so far
        self._cut_at = -1  # op number at which power fails, -1 if not armed
        self._partial = False
        self._rng = _Rng(1)
        self.dead = False
        self.watch = None  # watch(op, where, buf) before each program ("p", address, data)
        # and erase ("e", block, None)

    def info(self):
        """esp32.Partition.info()'s shape: (type, subtype, address, size, label, encrypted)."""
        return (1, 0x99, 0, self.size, "norflash", self.encrypted)

    # ---- power-cut injection

    def arm(self, after_ops, partial=False, seed=1):
        """Fail power at the after_ops-th program/erase from now (1 = the next one)."""
        self._cut_at = self.ops + after_ops
        self._partial = partial
        self._rng = _Rng(seed)

    def disarm(self):
        self._cut_at = -1

    def power_on(self):
        """Power is back: the contents stay as the cut left them."""
        self.dead = False
        self._cut_at = -1

    def copy(self, into=None):
        """A second flash with the same contents (counters at zero, no file, powered);
        into: a flash of the same size to reuse (no new buffer: no heap fragments)."""
        f = into if into is not None else NorFlash(self.blocks, self.block_size, encrypted=self.encrypted)
        f.data[:] = self.data
        f.erases = [0] * self.blocks
        f.programmed = f.ops = 0
        f._cut_at = -1
        f.dead = False
        f.watch = None
        return f

    def cut_copy(self, op, where, buf, partial=False, seed=1, into=None):
        """-> a copy of this flash as a power cut at the operation watch() was just
        shown would leave it: that operation not done, or (partial) half done exactly
        as arm(1, partial, seed) would have left it."""
        f = self.copy(into)
        if partial:
            f._rng = _Rng(seed)
            if op == "e":
                f._tear_erase(where)
            else:
                f._tear_program(where, buf)
        return f

    def _op(self):
        # Called before each program/erase; True if this one is cut.
        if self.dead:
            raise PowerCut("power is off")
        self.ops += 1
        if self.ops == self._cut_at:
            self.dead = True
            return True
        return False

    # ---- the block protocol

    def readblocks(self, n, buf, off=0):
        a = n * self.block_size + off
        if a < 0 or a + len(buf) > self.size:
            raise FlashMisuse("read past the end of the flash")
        buf[:] = self._view[a : a + len(buf)]  # a view, not a copy: reads allocate little

    def writeblocks(self, n, buf, off=None):
        if off is None:  # simple protocol: erase the blocks, then program them
            for k in range((len(buf) + self.block_size - 1) // self.block_size):
                self.erase(n + k)
            off = 0
        self.program(n * self.block_size + off, buf)

    def ioctl(self, op, arg):
        if op == _COUNT:
            return self.blocks
        if op == _SIZE:
            return self.block_size
        if op == _ERASE:
            self.erase(arg)
            return 0
        if op in (_INIT, _DEINIT, _SYNC):
            return 0
        return None

    # ---- raw operations (also used directly by the ring store's tests)

    def program(self, addr, buf):
        n = len(buf)
        if addr < 0 or addr + n > self.size:
            raise FlashMisuse("program past the end of the flash")
        d = self.data
        for i in range(n):
            b = buf[i]
            if b & ~d[addr + i] & 0xFF:
                raise FlashMisuse(
                    "programming can only clear bits: 0x%02x over 0x%02x at %d" % (b, d[addr + i], addr + i)
                )
        if self.watch is not None and not self.dead:
            self.watch("p", addr, buf)
        cut = self._op()
        if cut and self._partial:
            self._tear_program(addr, buf)
        if cut:
            raise PowerCut("power cut while programming %d bytes at %d" % (n, addr))
        for i in range(n):
            d[addr + i] &= buf[i]
        self.programmed += n
        self._save(addr, n)

    def erase(self, block):
        if not 0 <= block < self.blocks:
            raise FlashMisuse("erase of block %d, the flash has %d" % (block, self.blocks))
        a = block * self.block_size
        if self.watch is not None and not self.dead:
            self.watch("e", block, None)
        cut = self._op()
        if cut and self._partial:
            self._tear_erase(block)
        if cut:
            raise PowerCut("power cut while erasing block %d" % block)
        self.data[a : a + self.block_size] = b"\xff" * self.block_size
        self.erases[block] += 1
        self._save(a, self.block_size)

    def _tear_program(self, addr, buf):
        n = len(buf)
        d = self.data
        k = self._rng.below(n + 1)  # a prefix lands, then one byte half-programmed
        for i in range(k):
            d[addr + i] &= buf[i]
        if k < n:
            d[addr + k] &= buf[k] | self._rng.below(256)
        self.programmed += k
        self._save(addr, n)

    def _tear_erase(self, block):
        a = block * self.block_size
        k = self._rng.below(self.block_size + 1)  # a torn erase: some bytes are 0xFF
        for i in range(k):
            self.data[a + i] = 0xFF
        self._save(a, self.block_size)

    def _save(self, addr, n):
        if not self.path:
            return
        try:
            f = open(self.path, "r+b")
        except OSError:
            f = open(self.path, "wb")
        with f:
            f.seek(addr)
            f.write(memoryview(self.data)[addr : addr + n])
