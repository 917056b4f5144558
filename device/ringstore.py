# RingStore: the client's messages on a raw flash partition, as a log-structured
# ring. Why this shape (measured; see firmware/STORE.md): one record per message,
# appended; acknowledgements clear bits in the record's state byte, so an ack
# costs one byte programmed and no erase; a block is erased only when nothing
# live is left in it.
#
# The device: MicroPython's extended block protocol (esp32.Partition, or the
# host's NorFlash emulator): readblocks(n, buf, off), writeblocks(n, buf, off),
# ioctl(4) block count, ioctl(5) block size, ioctl(6, n) erase.
#
# Block: 16-byte header: b"FWR1", u32 block sequence, u16 rmax (no record in the
# block is longer), 2 spare bytes, crc32 of the 12 before. Then records:
# magic (0xA5 outbound PUBLISH, 0x5A inbound QoS 2 body), state byte, u16 length,
# u16 packet id, u16 record sequence, crc32 of bytes 2..7 and the body; then the
# body, padded to 4 bytes. A record counts only with a good CRC, so a torn write
# is recognised; the next record is then written rmax bytes after its start,
# never over it. Before an erase the block header is zeroed, so a torn erase is
# never taken for a valid block.
from binascii import crc32
from struct import pack_into  # a 32-bit CRC stored without shifting it: on a 32-bit board
# each shift of a value of 2**30 or more allocates

try:
    from micropython import const
except ImportError:
    from .cpython import const

from .codec import wire
from .store import StoreFull, UNSENT, AWAIT_REC, LIVE  # noqa: F401  (AWAIT_REC: for users of end)

_HDR = const(12)
_BHDR = const(16)
_OUT = const(0xA5)
_IN = const(0x5A)
_BMAGIC = b"FWR1"


class RingStore:
    """Messages on a raw partition: RingStore(esp32.Partition.find(...)[0]).
    Give it to MQTTClient(store=...); the client mounts it."""

    def __init__(self, device):
        info = getattr(device, "info", None)  # esp32.Partition: (..., label, encrypted)
        info = info() if info is not None else ()
        if len(info) > 5 and info[5]:
            # Encrypted flash is written in 16-byte units and reads erased bytes as
            # noise: acknowledging by clearing a bit, and finding free space, fail.
            raise ValueError(
                "partition %r is encrypted: the ring store needs a plain data partition "
                "(no 'encrypted' flag in the partition table); FileStore works on an "
                "encrypted filesystem" % info[4]
            )
        self.dev = device
        self.nblocks = device.ioctl(4, 0)
        self.bs = device.ioctl(5, 0)
        if self.nblocks < 3:
            raise ValueError(
                "the store needs a partition of at least 3 blocks, this one has %d" % self.nblocks
            )
        self._hb = bytearray(_HDR)
        self._hmv = memoryview(self._hb)
        self._hcrc = self._hmv[2:8]  # the header bytes a record's CRC covers
        self._bh = bytearray(_BHDR)
        self._one = bytearray(1)
        self._bseq = [-1] * self.nblocks  # block sequence, -1: free
        self._live = [0] * self.nblocks  # live records per block
        self._blank = bytearray(self.nblocks)  # 1: known to read all 0xFF
        self.backlog = 0  # stored messages never sent
        self.pk_pid = 0  # packet id of the oldest of them
        self.last_pid = 0
        self._head_rmax = 0

    # ---- mounting

    def open(self, max_packet, on_move):
        """Scan the partition and rebuild the index. The restored state is left in
        .window [(handle, pid, state, seq, first byte)] (sent, not complete, oldest
        first), .inbound [(handle, pid, body)] and .last_pid. on_move(old, new) is
        called when a live record moves."""
        dev = self.dev
        bh = self._bh
        rmax = [0] * self.nblocks
        used = []
        for b in range(self.nblocks):
            dev.readblocks(b, bh, 0)
            if bh[:4] == _BMAGIC and crc32(memoryview(bh)[:12]) == _u32(bh, 12):
                self._bseq[b] = _u32(bh, 4)
                rmax[b] = _u16(bh, 8)
                used.append(b)
        own = _rlen(max_packet)
        if own > self.bs - _BHDR:
            raise ValueError("max_packet %d does not fit a %d-byte flash block" % (max_packet, self.bs))
        self._buf = bytearray(max([own] + rmax))  # holds any stored record
        self._mv = memoryview(self._buf)
        self._body = self._mv[_HDR:]
        self._bcrc = self._mv[2:8]
        for b in range(self.nblocks):
            if self._bseq[b] < 0:
                self._blank[b] = self._erased(b, 0)
        bseq = self._bseq
        used.sort(key=lambda b: bseq[b])
        self._order = used  # blocks in use, oldest first
        self._torn = []  # (address, offset of the next record) of torn writes
        self._head = -1
        self._wp = self.bs
        self._cur = -1
        self.on_move = on_move
        hb = self._hb
        movable = []  # [seq, address, magic, state, pid, first byte] of sent or inbound records
        last = -1
        for b in used:
            off = _BHDR
            while off + _HDR <= self.bs:
                dev.readblocks(b, hb, off)
                m = hb[0]
                n = _u16(hb, 2)
                if m == 0xFF and self._erased(b, off):
                    break  # free from here
                if (
                    (m != _OUT and m != _IN)
                    or _HDR + n > len(self._buf)
                    or off + _HDR + n > self.bs
                    or not self._crc_ok(b, off, n)
                ):
                    self._torn.append((b * self.bs + off, off + rmax[b]))
                    off += rmax[b]
                    continue
                st = hb[1]
                seq = _u16(hb, 6)
                if last < 0 or _after(seq, last):
                    last = seq
                    if m == _OUT:
                        self.last_pid = _u16(hb, 4)
                a = b * self.bs + off
                off += _rlen(n)
                if not st & LIVE:
                    continue
                self._live[b] += 1
                if m == _IN or not st & UNSENT:
                    movable.append([seq, a, m, st, _u16(hb, 4), self._buf[_HDR]])
                else:
                    if self._cur < 0:
                        self._cur = a
                    self.backlog += 1
            self._head = b
            self._head_rmax = rmax[b]
            self._wp = min(off, self.bs)
        self._seq = (last + 1) & 0xFFFF if last >= 0 else 0
        # A move cut between the copy and the original's ack leaves both: keep the copy.
        movable.sort(key=lambda r: (r[0] - self._seq) & 0xFFFF)
        keep = []
        for k in range(len(movable)):
            r = movable[k]
            if k + 1 < len(movable) and movable[k + 1][0] == r[0]:
                self._set(r[1], LIVE)
                self._live[r[1] // self.bs] -= 1
            else:
                keep.append(r)
        if self._cur >= 0:
            self._peek_from(self._cur)
        # Finish a move that a power cut interrupted, if it fits.
        if self._head >= 0:
            t = (self._head + 1) % self.nblocks
            if self._bseq[t] >= 0 and self._live[t] and 0 <= self._movable(t) <= self.bs - self._wp:

                def moved(old, new):
                    for r in keep:
                        if r[1] == old:
                            r[1] = new

                self.on_move = moved
                self._evacuate(t)
                self.on_move = on_move
        self.window = []
        self.inbound = []
        for seq, a, m, st, pid, first in keep:
            if m == _IN:
                n = self.load(a, self._buf)
                self.inbound.append((a, pid, bytes(self._mv[:n])))
            else:
                self.window.append((a, pid, st, seq, first))

    def _erased(self, b, start):
        # 1 if block b reads all 0xFF from start to its end
        step = len(self._buf)
        buf = self._mv
        for off in range(start, self.bs, step):
            k = min(step, self.bs - off)
            mv = buf[:k]
            self.dev.readblocks(b, mv, off)
            for i in range(k):
                if mv[i] != 0xFF:
                    return 0
        return 1

    def _crc_ok(self, b, off, n):
        body = self._mv[_HDR : _HDR + n]
        self.dev.readblocks(b, body, off + _HDR)
        return crc32(body, crc32(self._hcrc)) == _u32(self._hb, 8)

    # ---- what the session calls

    def add(self, topic, msg, qos, retain, pid):
        """Write one outbound PUBLISH before publish() returns -> its handle.
        Raises StoreFull, leaving everything stored as it was."""
        n = 2 + len(topic) + 2 + len(msg)
        n += wire.varint_size(n) + 1
        a = self._room(n)
        n = wire.put_publish(self._body, topic, msg, qos, retain, False, pid)  # checked by the session
        self._write(a, _OUT, n, pid)
        if self.backlog == 0:
            self._cur = a
            self.pk_pid = pid
        self.backlog += 1
        self.last_pid = pid
        return a

    def add_inbound(self, pid, body, n):
        """Keep an inbound QoS 2 message (its PUBLISH body) until PUBREL -> handle."""
        a = self._room(n)
        self._body[:n] = body[:n]
        self._write(a, _IN, n, pid)
        return a

    def forget_inbound(self, pid):
        """The inbound record of pid is done (the session no longer holds its handle)."""
        for b in self._order:
            off = self._next_record(b, _BHDR)
            while off >= 0:
                hb = self._hb
                n = _rlen(_u16(hb, 2))
                if hb[0] == _IN and hb[1] & LIVE and _u16(hb, 4) == pid:
                    self.end(b * self.bs + off, LIVE)
                    return
                off = self._next_record(b, off + n)

    def next_unsent(self):
        """-> handle of the oldest message never sent (-1 if none); .pk_pid is its id."""
        return self._cur if self.backlog else -1

    def in_backlog(self, pid):
        """True if pid may belong to a stored message not yet sent."""
        if not self.backlog:
            return False
        return (pid - self.pk_pid) % 65536 <= (self.last_pid - self.pk_pid) % 65536

    def load(self, a, buf):
        """Read the stored packet (or inbound body) into buf -> its length."""
        bs = self.bs
        hb = self._hb
        self.dev.readblocks(a // bs, hb, a % bs)
        n = _u16(hb, 2)
        self.dev.readblocks(a // bs, memoryview(buf)[:n], a % bs + _HDR)
        return n

    def end(self, a, bit):
        """The state bit names (UNSENT, AWAIT_REC, LIVE) is over for the record at a: clear it."""
        self._set(a, bit)
        if bit == LIVE:
            self._live[a // self.bs] -= 1
        elif bit == UNSENT and a == self._cur:
            self.backlog -= 1
            self._peek_from(a)

    def message(self, a):
        """-> (topic, msg) of a stored outbound record (allocates; for on_discarded)."""
        n = self.load(a, self._buf)
        h = 1
        while self._buf[h] & 0x80:
            h += 1
        h += 1  # fixed header: first byte and the remaining length
        te, _, ps = wire.publish_fields(self._buf[0], self._mv[h:], n - h)
        return bytes(self._mv[h + 2 : h + te]), bytes(self._mv[h + ps : n])

    def clear(self):
        """Forget every stored message."""
        for b in range(self.nblocks):
            if self._bseq[b] >= 0:
                self._retire(b)
        self._order = []
        self._torn = []
        self._head = -1
        self._wp = self.bs
        self.backlog = 0
        self._cur = -1

    # ---- space

    def _room(self, n):
        # -> the address where a record with an n-byte body goes; opens a block if needed.
        k = _rlen(n)
        if self._head < 0 or self._wp + k > self.bs or k > self._head_rmax:
            self._open_block()
        return self._head * self.bs + self._wp

    def _open_block(self):
        # One block is kept in reserve: the block after the one opened must be
        # free, or hold only records that may move (sent, or inbound), which move
        # into the new block at once. So there is always room to move live
        # records, and messages never sent can fill all blocks but two.
        nb = (self._head + 1) % self.nblocks if self._head >= 0 else 0
        t = (nb + 1) % self.nblocks
        if (self._bseq[nb] >= 0 and self._live[nb]) or (
            self._bseq[t] >= 0 and self._live[t] and self._movable(t) < 0
        ):
            raise StoreFull(
                "message store full: %d messages wait to be sent; the partition has %d "
                "blocks of %d bytes" % (self.backlog, self.nblocks, self.bs)
            )
        if self._bseq[nb] >= 0:
            self._retire(nb)
        if not self._blank[nb]:
            self.dev.ioctl(6, nb)
        seq = self._bseq[self._order[-1]] + 1 if self._order else 1
        bh = self._bh
        bh[:4] = _BMAGIC
        pack_into("<I", bh, 4, seq)
        bh[8] = len(self._buf) & 255
        bh[9] = len(self._buf) >> 8
        bh[10] = bh[11] = 0xFF
        pack_into("<I", bh, 12, crc32(memoryview(bh)[:12]))
        self._blank[nb] = 0
        self.dev.writeblocks(nb, bh, 0)
        self._bseq[nb] = seq
        self._live[nb] = 0
        self._order.append(nb)
        self._head = nb
        self._head_rmax = len(self._buf)
        self._wp = _BHDR
        if self._bseq[t] >= 0 and self._live[t]:
            self._evacuate(t)

    def _retire(self, b):
        # zero the header first: a torn erase then never looks like a valid block
        self.dev.writeblocks(b, b"\0\0\0\0", 0)
        self._bseq[b] = -1
        self._live[b] = 0
        self._blank[b] = 0
        if b in self._order:
            self._order.remove(b)
        for k in range(len(self._torn) - 1, -1, -1):
            if self._torn[k][0] // self.bs == b:
                self._torn.pop(k)
        self.dev.ioctl(6, b)
        self._blank[b] = 1

    def _next_record(self, b, off):
        # -> offset of the first record at or after off in block b (its header in
        # self._hb), or -1 at the end of the block's records
        hb = self._hb
        a0 = b * self.bs
        while off + _HDR <= self.bs:
            for a, nxt in self._torn:
                if a == a0 + off:
                    off = nxt
                    break
            else:
                self.dev.readblocks(b, hb, off)
                m = hb[0]
                return off if m == _OUT or m == _IN else -1
        return -1

    def _movable(self, b):
        # -> bytes of the live records in block b, or -1 if one was never sent
        # (moving it would change the order messages go out in)
        total = 0
        off = self._next_record(b, _BHDR)
        while off >= 0:
            st = self._hb[1]
            n = _rlen(_u16(self._hb, 2))
            if st & LIVE:
                if self._hb[0] == _OUT and st & UNSENT:
                    return -1
                total += n
            off = self._next_record(b, off + n)
        return total

    def _evacuate(self, b):
        off = self._next_record(b, _BHDR)
        while off >= 0:
            st = self._hb[1]
            n = _rlen(_u16(self._hb, 2))
            if st & LIVE:
                rec = self._mv[:n]
                self.dev.readblocks(b, rec, off)
                new = self._head * self.bs + self._wp
                self.dev.writeblocks(self._head, rec, self._wp)
                self._wp += n
                self._live[self._head] += 1
                self._set(b * self.bs + off, LIVE)
                self._live[b] -= 1
                self.on_move(b * self.bs + off, new)
            off = self._next_record(b, off + n)

    def _write(self, a, magic, n, pid):
        buf = self._buf
        buf[0] = magic
        buf[1] = 0xFF
        buf[2] = n & 255
        buf[3] = n >> 8
        buf[4] = pid & 255
        buf[5] = pid >> 8
        buf[6] = self._seq & 255
        buf[7] = self._seq >> 8
        pack_into("<I", buf, 8, crc32(self._mv[_HDR : _HDR + n], crc32(self._bcrc)))
        k = _rlen(n)
        for i in range(_HDR + n, k):
            buf[i] = 0xFF
        self.dev.writeblocks(a // self.bs, self._mv[:k], a % self.bs)
        self._seq = (self._seq + 1) & 0xFFFF
        self._wp += k
        self._live[a // self.bs] += 1

    def _set(self, a, bit):
        # program only the bit that changes: the others keep what earlier marks cleared
        o = self._one
        self.dev.readblocks(a // self.bs, o, a % self.bs + 1)
        o[0] &= ~bit
        self.dev.writeblocks(a // self.bs, o, a % self.bs + 1)

    def _peek_from(self, a):
        # move the cursor to the first live, never-sent outbound record at or after a
        if not self.backlog:
            self._cur = -1
            return
        b = a // self.bs
        off = a % self.bs
        i = self._order.index(b)
        while True:
            off = self._next_record(b, off)
            while off >= 0:
                st = self._hb[1]
                if self._hb[0] == _OUT and st & UNSENT and st & LIVE:
                    self._cur = b * self.bs + off
                    self.pk_pid = _u16(self._hb, 4)
                    return
                off = self._next_record(b, off + _rlen(_u16(self._hb, 2)))
            i += 1
            if i >= len(self._order):
                self._cur = -1
                self.backlog = 0  # counted more than the flash holds: trust the flash
                return
            b = self._order[i]
            off = _BHDR


def _rlen(n):
    return (_HDR + n + 3) & ~3


def _after(a, b):
    # record sequence a is later than b (16-bit, wrap-aware)
    return 0 < (a - b) & 0xFFFF < 0x8000


def _u16(b, i):
    return b[i] | b[i + 1] << 8


def _u32(b, i):
    return b[i] | b[i + 1] << 8 | b[i + 2] << 16 | b[i + 3] << 24
