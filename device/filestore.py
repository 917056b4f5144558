# FileStore: the client's messages as files, for stock firmware with no spare
# partition (the ring store wears the flash far less: prefer it when you can).
# One file per record in one directory, named by state and sequence:
#   q<seq>  outbound, never sent      s<seq>  sent, awaiting PUBACK/PUBREC
#   r<seq>  PUBREC received           i<seq>  inbound QoS 2, awaiting PUBREL
#   t<seq>  being written (a leftover is deleted on mount)
# A record is written whole to t<seq> and renamed, and a state change is a
# rename, so a power cut leaves the old state or the new one (rename is atomic
# on LittleFS and POSIX). Each file carries a CRC; a bad one is deleted on mount.
# Outbound sequence numbers are consecutive, so the messages never sent are
# exactly q<cursor> .. q<last>: no list of them is kept in RAM. No buffer of a packet's
# size is kept either: a record is written from the caller's topic and payload, checked by
# reading it a piece at a time, and loaded straight into the session's send buffer.
import os
from binascii import crc32
from struct import pack_into

try:
    from micropython import const
except ImportError:
    from .cpython import const

from .codec import wire
from .codec.wire import header  # the codec's fixed-header writer (its varint)
from . import say
from .store import StoreFull, UNSENT, AWAIT_REC, LIVE

_HDR = const(12)
_PIECE = const(36)  # bytes of a record's body read at a time to check it
_OUT = const(0xA5)
_IN = const(0x5A)
# errors, by their line in reasons.TEXT
_FILES_FULL = const(33)
_FS_RESERVE = const(34)
_FS_FULL = const(35)
_REC_GONE = const(36)


class FileStore:
    """Messages as files under directory: MQTTClient(store="/store")."""

    def __init__(self, directory, max_files=500, reserve=4):
        self.dir = directory.rstrip("/") or "/"
        self.max_files = max_files  # bounds the store: publish() raises StoreFull beyond
        self.reserve = reserve  # filesystem blocks kept free for state changes
        self.backlog = 0
        self.pk_pid = 0
        self.last_pid = 0

    def _name(self, c, seq):
        return "%s/%s%08x" % (self.dir, c, seq)

    def open(self, max_packet, on_move):
        try:
            os.mkdir(self.dir)
        except OSError:
            pass  # it exists
        self._buf = bytearray(_HDR + _PIECE)  # a record's header, then a piece of its body
        self._mv = memoryview(self._buf)
        # One pass over the directory without listing it in RAM: only the window
        # (sent, awaiting an ack) and inbound records are kept; the never-sent
        # backlog is a range q<first> .. q<last>.
        window = []
        ins = []
        self._files = 0
        self.cur = self._last = -1
        top = -1
        top_out = -1
        bad = []
        longest = 0
        for name in _names(self.dir):
            c = name[:1]
            try:
                seq = int(name[1:], 16)
            except ValueError:
                continue  # not ours
            path = self.dir + "/" + name
            n = -1 if c == "t" or c not in "qsri" else self._read(path)
            if n < 0:
                bad.append(path)  # half written, or corrupt: removed after the walk
                continue
            self._files += 1
            top = max(top, seq)
            if c == "i":
                ins.append(seq)
                continue
            longest = max(longest, n)  # a PUBLISH, whole
            if seq > top_out:
                top_out = seq
                self.last_pid = self._buf[4] | self._buf[5] << 8
            if c == "q":
                self.backlog += 1
                if self.cur < 0 or seq < self.cur:
                    self.cur = seq
                    self.pk_pid = self._buf[4] | self._buf[5] << 8
                self._last = max(self._last, seq)
            else:
                window.append((seq, c, self._buf[4] | self._buf[5] << 8, self._buf[_HDR]))
        for path in bad:
            os.remove(path)
        self._next = top + 1
        window.sort()
        ins.sort()
        self.window = []
        for seq, c, pid, first in window:
            st = 0xFF & ~UNSENT & (~AWAIT_REC if c == "r" else 0xFF)
            self.window.append([seq, seq, first, st, pid])
        for seq in ins:
            self._read(self._name("i", seq))
            self.window.append([seq, seq, _IN, LIVE, self._buf[4] | self._buf[5] << 8])
        return longest

    def _read(self, path, buf=None):
        # check a record file -> its body's length, -1 if it is not whole. Its header is left
        # in _buf[:_HDR]; its body goes into buf, or else through _buf a piece at a time (the
        # body's first byte, the PUBLISH's, stays at _buf[_HDR])
        b = self._buf
        mv = self._mv
        try:
            with open(path, "rb") as f:
                if f.readinto(mv[:_HDR]) != _HDR:
                    return -1
                n = b[2] | b[3] << 8
                c = crc32(mv[2:8])
                if buf is None:
                    o = _HDR
                    k = n
                    while k:
                        p = mv[o : o + min(k, _HDR + _PIECE - o)]
                        if f.readinto(p) != len(p):
                            return -1
                        c = crc32(p, c)
                        k -= len(p)
                        o = _HDR + 1
                else:
                    p = memoryview(buf)[:n]
                    if len(p) != n or f.readinto(p) != n:
                        return -1
                    c = crc32(p, c)
                if f.readinto(mv[1:2]):  # (a byte no check reads) longer than its header says
                    return -1
        except OSError:
            return -1
        return n if c == b[8] | b[9] << 8 | b[10] << 16 | b[11] << 24 else -1

    def _write(self, c, seq, magic, n, pid, *parts):
        # the record: its header, then the parts of its n-byte body
        if self._files >= self.max_files:
            raise StoreFull(say(_FILES_FULL, self._files, self.dir, self.max_files))
        if self._free_blocks() < self.reserve:
            # keep room to rename and remove: LittleFS needs free blocks for those too
            raise StoreFull(say(_FS_RESERVE, self.reserve, self.dir))
        b = self._buf
        b[0] = magic
        b[1] = 0xFF
        b[2] = n & 255
        b[3] = n >> 8
        b[4] = pid & 255
        b[5] = pid >> 8
        b[6] = seq & 255
        b[7] = seq >> 8 & 255
        k = crc32(self._mv[2:8])
        for p in parts:
            k = crc32(p, k)
        pack_into("<I", b, 8, k)
        tmp = self._name("t", seq)
        try:
            with open(tmp, "wb") as f:
                f.write(self._mv[:_HDR])
                for p in parts:
                    f.write(p)
            os.rename(tmp, self._name(c, seq))
        except OSError as e:
            try:
                os.remove(tmp)
            except OSError:
                pass
            if self._full(e):
                raise StoreFull(say(_FS_FULL, self.dir, e))
            raise
        self._files += 1

    def _free_blocks(self):
        try:
            st = os.statvfs(self.dir)
        except (OSError, AttributeError):
            return 1 << 30  # cannot tell: rely on ENOSPC
        return st[3] if st[3] <= st[2] else 0  # LittleFS over-full wraps below zero

    def _full(self, e):
        # ENOSPC; a full LittleFS may also answer a rename that needs a new
        # metadata block with LFS_ERR_NAMETOOLONG (36) although our names are short
        return bool(e.args) and e.args[0] in (28, 36)

    # ---- what the session calls (handles are sequence numbers)

    def add(self, topic, msg, qos, retain, pid):
        seq = self._next
        # the PUBLISH's head (its fixed header and topic length) built here, the topic and
        # payload written from the caller's bytes (checked by the session)
        mv = self._mv
        n = 4 + len(topic) + len(msg)
        h = header(mv[_HDR:], 0x30 | qos << 1 | (1 if retain else 0), n, 0) + _HDR
        mv[h] = len(topic) >> 8
        mv[h + 1] = len(topic) & 255
        mv[h + 2] = pid >> 8
        mv[h + 3] = pid & 255
        self._write("q", seq, _OUT, h - _HDR + n, pid, mv[_HDR : h + 2], topic, mv[h + 2 : h + 4], msg)
        self._next += 1
        if self.backlog == 0:
            self.cur = seq
            self.pk_pid = pid
        self._last = seq
        self.backlog += 1
        self.last_pid = pid
        return seq

    def add_inbound(self, pid, *_):
        seq = self._next
        self._write("i", seq, _IN, 0, pid)
        self._next += 1
        return seq

    def in_backlog(self, pid):
        if not self.backlog:
            return False
        return (pid - self.pk_pid) % 65536 <= (self.last_pid - self.pk_pid) % 65536

    def load(self, seq, buf):
        for c in "qsri":
            n = self._read(self._name(c, seq), buf)
            if n >= 0:
                return n
        raise OSError(say(_REC_GONE, seq))

    def end(self, seq, bit):
        if bit == LIVE:
            for c in "srqi":
                try:
                    os.remove(self._name(c, seq))
                    self._files -= 1
                    return
                except OSError:
                    pass
        elif bit == UNSENT:
            os.rename(self._name("q", seq), self._name("s", seq))
            if seq == self.cur:
                self.backlog -= 1
                self.cur += 1
                while self.backlog and self.cur <= self._last and self._read(self._name("q", self.cur)) < 0:
                    self.cur += 1  # an inbound record took this number
                if self.backlog:
                    self.pk_pid = self._buf[4] | self._buf[5] << 8
        elif bit == AWAIT_REC:
            os.rename(self._name("s", seq), self._name("r", seq))

    def forget_inbound(self, pid):
        """The inbound record of pid is done (the session no longer holds its handle)."""
        for name in _names(self.dir):
            if (
                name[:1] == "i"
                and self._read(self.dir + "/" + name) >= 0
                and self._buf[4] | self._buf[5] << 8 == pid
            ):
                self.end(int(name[1:], 16), LIVE)
                return

    def message(self, seq):
        for c in "qsri":
            if self._read(self._name(c, seq)) >= 0:
                b = bytearray(self._buf[2] | self._buf[3] << 8)
                n = self.load(seq, b)
                break
        else:
            raise OSError(say(_REC_GONE, seq))
        mv = memoryview(b)
        h = 1
        while b[h] & 0x80:
            h += 1
        h += 1
        te, _, ps = wire.publish_fields(b[0], mv[h:], n - h)
        return bytes(mv[h + 2 : h + te]), bytes(mv[h + ps : n])

    def clear(self):
        for name in list(_names(self.dir)):
            os.remove(self.dir + "/" + name)
        self._files = 0
        self.backlog = 0
        self.cur = -1


def _names(d):
    # the names in directory d, one at a time (no list of them in RAM)
    try:
        it = os.ilistdir(d)  # MicroPython
    except AttributeError:
        for e in os.scandir(d):
            yield e.name
        return
    for e in it:
        yield e[0]
