# What a RingStore runs once, loaded for the call and dropped after (store.once()): making
# one (the partition's checks, the buffers), mounting it (the scan of the partition) and
# clear(). The ring's format is described in store.py, beside the code that goes on running.
from binascii import crc32
from struct import unpack_from

try:
    from micropython import const
except ImportError:
    from ..cpython import const

from ..codec.wire import varint_size
from .. import say
from ..store import UNSENT, LIVE

# the ring's format (store.py's, where it is described)
_HEAD = const(14)
_FIRST = const(16)
_BUF = const(128)
_IN = const(0x5A)
_SEED = const(0x2F32)
# errors, by their line in reasons.TEXT
_RING_CRYPT = const(29)
_RING_SMALL = const(30)
_RING_BLOCK = const(31)


def make(rs, device):
    """RingStore(device): the partition's checks, the store's buffers."""
    info = getattr(device, "info", None)  # esp32.Partition: (..., label, encrypted)
    info = info() if info else ()
    if len(info) > 5 and info[5]:
        # Encrypted flash is written in 16-byte units and reads erased bytes as
        # noise: acknowledging by clearing a bit, and finding free space, fail.
        raise ValueError(say(_RING_CRYPT, info[4]))
    rs.dev = device
    rs.nblocks = device.ioctl(4, 0)
    rs.bs = device.ioctl(5, 0)
    if rs.nblocks < 3:
        raise ValueError(say(_RING_SMALL, rs.nblocks))
    rs.bv = memoryview(bytearray(_BUF))  # a record or a piece of one
    rs.hb = rs.bv[:_HEAD]  # the header read or written last
    rs.one = bytearray(1)  # a state byte
    rs.backlog = rs.pk_pid = rs.last_pid = 0


def clear(rs):
    """RingStore.clear(): zero the blocks' headers, oldest first (a cut leaves the newest)."""
    for k in range(rs.used):
        rs.dev.writeblocks((rs.head - rs.used + 1 + k) % rs.nblocks, b"\0\0\0\0", 0)
    rs.used = rs.backlog = 0
    rs.head = rs.cur = -1
    rs.torn = []
    rs.wp = rs.bs


def mount(rs, max_packet, on_move):
    """RingStore.open(): scan the partition."""
    dev = rs.dev
    bs = rs.bs
    n = rs.nblocks
    hb = rs.hb
    rs.on_move = on_move
    rmax = (max_packet + 15) & ~3  # the longest record a packet of max_packet makes
    if rmax > bs - _FIRST:
        raise ValueError(say(_RING_BLOCK, max_packet, bs))
    used = []
    for b in range(n):
        dev.readblocks(b, hb, 0)
        if crc32(hb[:6], _SEED) == unpack_from("<I", hb, 6)[0]:
            used.append((unpack_from("<I", hb)[0], b, _u16(hb, 4)))
            rmax = max(rmax, _u16(hb, 4))
    used.sort()
    # the blocks in use end at the newest; one left over from anything else is free
    k = len(used) - 1
    while k > 0 and used[k - 1][:2] == (used[k][0] - 1, (used[k][1] - 1) % n):
        k -= 1
    used = used[k:]
    rs.rmax = rmax  # of the blocks opened from now on: no record they get is longer
    rs.used = len(used)
    rs.bseq = used[-1][0] if used else 0
    rs.head = rs.cur = -1
    rs.wp = bs
    t = bytearray(rmax)  # for the scan only
    tv = memoryview(t)
    window = []
    rs.torn = []  # (address, offset of the next record) of each torn write, oldest first
    last = -1
    longest = 0  # the longest PUBLISH stored, as load() builds it
    for _, b, bm in used:
        off = _FIRST
        while off + _HEAD <= bs:
            dev.readblocks(b, hb, off)
            m = hb[5]
            k = _u16(hb, 6)
            r = (k + 15) & ~3
            if m == 0xFF:
                c = tv[: min(bm, bs - off)]
                dev.readblocks(b, c, off)
                if min(c) == 0xFF:
                    break  # free from here
            ok = 2 <= k and r <= bm and off + r <= bs
            if ok:
                c = tv[: k - 2]
                dev.readblocks(b, c, off + _HEAD)
                ok = crc32(c, crc32(hb[5:])) == unpack_from("<I", hb, 1)[0]
            if not ok:
                rs.torn.append((b * bs + off, off + bm))
                off += bm
                continue
            st = hb[0]
            seq = _u16(hb, 10)
            pid = _u16(hb, 8)
            if last < 0 or 0 < (seq - last) & 0xFFFF < 0x8000:
                last = seq
                if m != _IN:
                    rs.last_pid = pid
            a = b * bs + off
            off += r
            if st & LIVE:
                if m != _IN:  # its remaining length is k + 2 (the packet id)
                    longest = max(longest, 3 + k + varint_size(k + 2))
                if m == _IN or not st & UNSENT:
                    window.append([seq, a, m, st, pid])
                else:
                    if rs.cur < 0:
                        rs.cur = a
                        rs.pk_pid = pid
                    rs.backlog += 1
        rs.head = b
        rs.wp = min(off, bs)
    rs.seq = s = (last + 1) & 0xFFFF
    # A move cut between the copy and the original's mark leaves both, alike: keep one.
    window.sort(key=lambda r: (r[0] - s) & 0xFFFF)
    keep = []
    for r in window:
        if keep and keep[-1][0] == r[0]:
            rs.end(keep.pop()[1], LIVE)
        keep.append(r)
    # Finish a move that a power cut interrupted, if it fits.
    t = (rs.head + 1) % n
    if rs.used == n and 0 < rs._live(t) <= bs - rs.wp:

        def moved(old, new):
            for r in keep:
                if r[1] == old:
                    r[1] = new

        rs.on_move = moved
        rs._live(t, 1)
        rs.on_move = on_move
    if used and bm < rmax:
        rs.wp = bs  # records may now be longer than the head block allows: a new one
    rs.window = keep
    return longest


def _u16(b, i):
    return b[i] | b[i + 1] << 8
