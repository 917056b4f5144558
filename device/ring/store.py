# RingStore: the client's messages on a raw flash partition, as a log-structured ring.
# Why this shape (measured; see docs/design/store.md): one record per message, appended;
# acknowledgements clear bits in the record's state byte, so an ack costs one byte
# programmed and no erase; a block is erased only when the ring comes round to it.
#
# The device: MicroPython's extended block protocol (esp32.Partition, or the host's
# NorFlash emulator): readblocks(n, buf, off), writeblocks(n, buf, off), ioctl(4) block
# count, ioctl(5) block size, ioctl(6, n) erase.
#
# Block: u32 block sequence, u16 rmax (no record in the block is longer), u32 CRC-32 of
# those 6 bytes begun from _SEED (a header of another format never passes), spare bytes up
# to offset 16, then records. The blocks in use follow each other round the partition,
# oldest first, their sequences one apart; the one after the newest (the head) is the next
# opened: its header is zeroed before the erase, so a torn erase never looks like a block.
#
# Record, at a 4-byte boundary: state byte; u32 CRC-32 of everything after it; kind (the
# PUBLISH's first byte for an outbound message, _IN for the id of an inbound QoS 2 one);
# u16 n; u16 packet id; u16 record sequence; then n bytes: the topic length (big-endian,
# as on the wire), the topic, the payload (inbound: a topic length of 0, nothing else).
# No buffer of a packet's size is kept: a record longer than _BUF is written as its
# 14-byte head, the topic and the payload, and load() builds the PUBLISH in the caller's.
# A record counts only with a good CRC, so a torn write is recognised; the mount notes it
# (.torn), and whoever walks the block steps rmax bytes past it (the next record is there).
# Making a RingStore, mounting it and clear() run once: that code is in ring/mount.py,
# loaded for the call (store.once()).
from binascii import crc32
from struct import pack_into

try:
    from micropython import const
except ImportError:
    from ..cpython import const

from ..codec.wire import header  # the codec's fixed-header writer (its varint)
from .. import say
from ..store import StoreFull, UNSENT, LIVE, once

_HEAD = const(14)  # a record's header and its topic length: what a walk reads
_BUF = const(128)  # a record up to this long is written at once; moves copy this much at a time
_FIRST = const(16)  # offset of a block's first record
_IN = const(0x5A)  # the kind of an inbound QoS 2 record
_SEED = const(0x2F32)  # a block header's CRC begins from it
# (ring/mount.py restates them: a private const costs a board nothing, a public one a
# global; tests/test_constants.py holds every restated constant to one value)
# errors, by their line in reasons.TEXT
_RING_FULL = const(32)


class RingStore:
    """Messages on a raw partition: RingStore(esp32.Partition.find(...)[0]).
    Give it to MQTTClient(store=...); the client mounts it."""

    def __init__(self, device):
        once("ring.mount", "make", self, device)

    def open(self, max_packet, on_move):
        """Scan the partition -> the length of the longest PUBLISH stored. What was stored
        and is not complete is left in .window [[seq, handle, kind, state, pid]], oldest
        first; on_move(old, new) is called when a live record moves."""
        return once("ring.mount", "mount", self, max_packet, on_move)

    # ---- what the session calls

    def add(self, topic, msg, qos, retain, pid):
        """Write one outbound PUBLISH before publish() returns -> its handle.
        Raises StoreFull, leaving everything stored as it was."""
        a = self._put(0x30 | qos << 1 | (1 if retain else 0), pid, topic, msg)
        if not self.backlog:
            self.cur = a
            self.pk_pid = pid
        self.backlog += 1
        self.last_pid = pid
        return a

    def add_inbound(self, pid, *_):
        """Keep the id of an inbound QoS 2 message until PUBREL -> handle."""
        return self._put(_IN, pid, b"", b"")

    def forget_inbound(self, pid):
        """The inbound record of pid is done (the session no longer holds its handle)."""
        if self.used:  # from the oldest block in use
            a = self._find((self.head - self.used + 1) % self.nblocks * self.bs + _FIRST, pid)
            if a >= 0:
                self.end(a, LIVE)

    def in_backlog(self, pid):
        """True if pid may belong to a stored message not yet sent."""
        if not self.backlog:
            return False
        return (pid - self.pk_pid) % 65536 <= (self.last_pid - self.pk_pid) % 65536

    def load(self, a, buf):
        """The stored PUBLISH at a, built in buf -> its length."""
        b = a // self.bs
        a %= self.bs
        hb = self.hb
        dev = self.dev
        dev.readblocks(b, hb, a)
        k = _u16(hb, 6)  # the topic length, the topic and the payload
        i = header(buf, hb[5], k + 2) - 1  # the fixed header; then the packet id follows
        p = i + 3 + (hb[12] << 8 | hb[13])  # where the packet id goes
        n = i + 3 + k
        mv = memoryview(buf)
        dev.readblocks(b, mv[i + 1 : p], a + 12)
        buf[p] = hb[9]
        buf[p + 1] = hb[8]
        if n > p + 2:
            dev.readblocks(b, mv[p + 2 : n], a + _HEAD + p - i - 3)  # after the topic
        return n

    def end(self, a, bit):
        """The state bit names (UNSENT, AWAIT_REC, LIVE) is over for the record at a: clear
        it, programming the AND of what is there (a bit once cleared stays so)."""
        o = self.one
        b = a // self.bs
        self.dev.readblocks(b, o, a % self.bs)
        o[0] &= ~bit
        self.dev.writeblocks(b, o, a % self.bs)
        if bit == UNSENT and a == self.cur:
            self.backlog -= 1
            a = self._find(a, -1) if self.backlog else -1
            self.cur = a
            if a < 0:
                self.backlog = 0  # counted more than the flash holds: trust the flash
            else:
                self.pk_pid = _u16(self.hb, 8)

    def message(self, a):
        """-> (topic, msg) of a stored outbound record (allocates; for on_discarded)."""
        b = a // self.bs
        a %= self.bs
        hb = self.hb
        self.dev.readblocks(b, hb, a)
        body = bytearray(_u16(hb, 6))
        self.dev.readblocks(b, body, a + 12)
        te = 2 + (hb[12] << 8 | hb[13])
        return bytes(body[2:te]), bytes(body[te:])

    def clear(self):
        """Forget every stored message."""
        once("ring.mount", "clear", self)

    # ---- space

    def _put(self, kind, pid, topic, msg):
        # write a record (opening a block if it needs one) -> its address
        tl = len(topic)
        k = 2 + tl + len(msg)
        r = (k + 15) & ~3
        n = self.nblocks
        c = 0  # blocks opened: a second if what the first took in left no room
        while self.head < 0 or self.wp + r > self.bs:
            # Open the next block. One is kept in reserve: the block after the one opened
            # must be free, or hold only records that may move (sent, or inbound), which
            # move into the new block at once. So there is always room to move live
            # records, and messages never sent can fill all blocks but two.
            u = self.used
            nb = (self.head + 1) % n
            t = (nb + 1) % n
            if c > 1 or u == n and self._live(nb) or u >= n - 1 and self._live(t) < 0:
                raise StoreFull(say(_RING_FULL, self.backlog, n, self.bs))
            while self.torn and self.torn[0][0] // self.bs == nb:
                self.torn.pop(0)  # the oldest block's, it is reused
            dev = self.dev
            dev.writeblocks(nb, b"\0\0\0\0", 0)  # a torn erase then never looks like a block
            dev.ioctl(6, nb)
            self.bseq += 1
            hb = self.hb
            pack_into("<IHIHH", hb, 0, self.bseq, self.rmax, 0, 0xFFFF, 0xFFFF)
            pack_into("<I", hb, 6, crc32(hb[:6], _SEED))
            dev.writeblocks(nb, hb, 0)
            self.head = nb
            self.wp = _FIRST
            if u < n:
                self.used = u + 1
            if u >= n - 1:
                self._live(t, 1)
            c += 1
        b = self.head
        o = self.wp
        hb = self.hb
        pack_into("<BIBHHH", hb, 0, 0xFF, 0, kind, k, pid, self.seq)
        hb[12] = tl >> 8
        hb[13] = tl & 255
        pack_into("<I", hb, 1, crc32(msg, crc32(topic, crc32(hb[5:]))))
        dev = self.dev
        k += 12  # the record's length, unpadded
        if k <= _BUF:  # most: in one write
            bv = self.bv
            bv[_HEAD : _HEAD + tl] = topic
            bv[_HEAD + tl : k] = msg
            dev.writeblocks(b, bv[:k], o)
        else:
            dev.writeblocks(b, hb, o)
            dev.writeblocks(b, topic, o + _HEAD)
            if msg:
                dev.writeblocks(b, msg, o + _HEAD + tl)
        self.seq = (self.seq + 1) & 0xFFFF
        self.wp = o + r
        return b * self.bs + o

    def _live(self, b, move=0):
        # The live records of block b -> their bytes, or -1 if one was never sent (moving
        # it would change the order messages go out in); move: copy each into the head
        # block (_BUF bytes at a time), then mark the original.
        total = 0
        bs = self.bs
        hb = self.hb
        off = self._next(b, _FIRST)
        while off >= 0:
            r = (_u16(hb, 6) + 15) & ~3
            if hb[0] & LIVE:
                if hb[5] != _IN and hb[0] & UNSENT:
                    return -1
                total += r
                if move:
                    new = self.head * bs + self.wp
                    for i in range(0, r, _BUF):
                        c = self.bv[: min(_BUF, r - i)]
                        self.dev.readblocks(b, c, off + i)
                        self.dev.writeblocks(self.head, c, self.wp + i)
                    self.wp += r
                    self.end(b * bs + off, LIVE)
                    self.on_move(b * bs + off, new)
            off = self._next(b, off + r)
        return total

    def _next(self, b, off):
        # -> offset of the first record at or after off in block b (its head in hb), or -1
        while off + _HEAD <= self.bs:
            for a, nxt in self.torn:
                if a == b * self.bs + off:
                    off = nxt  # torn: the next record is rmax further on
                    break
            else:
                self.dev.readblocks(b, self.hb, off)
                return off if self.hb[5] != 0xFF else -1
        return -1

    def _find(self, a, pid):
        # -> address of the first live record at or after a: the inbound one of pid, or
        # (pid < 0) an outbound one never sent; -1 if none (the record's head is in hb)
        bs = self.bs
        b = a // bs
        off = a % bs
        hb = self.hb
        for _ in range((self.head - b) % self.nblocks + 1):
            off = self._next(b, off)
            while off >= 0:
                if hb[0] & LIVE and (
                    hb[5] == _IN and _u16(hb, 8) == pid if pid >= 0 else hb[5] != _IN and hb[0] & UNSENT
                ):
                    return b * bs + off
                off = self._next(b, off + ((_u16(hb, 6) + 15) & ~3))
            b = (b + 1) % self.nblocks
            off = _FIRST
        return -1


def _u16(b, i):
    return b[i] | b[i + 1] << 8
