# Crash capture: why a board reset, taken on the board, kept across the reset, uploaded
# after it (fleetwire.crashsend). Loaded on use: fleetwire.runner installs it; a program of
# its own calls run(main, release) (or install(), then catch(e) where it catches).
#
# Theory of operation.
#   install() allocates the record, once: one bytearray of `size` bytes (2048 at most: an
#   ESP32's RTC memory) that holds the header, the release, and at its end the log ring
#   (`lines` slots of `width` bytes, each ended by a 0 when shorter). log(text) writes into
#   the next slot, over the oldest. _W is a stream that print() and sys.print_exception()
#   write into, copying into the record where it is pointed and allocating nothing.
#   catch(e) takes the record (the message, the traceback between them and the ring, the
#   numbers, the sum) and keeps it in RTC memory: machine.RTC().memory(), one copy in C
#   that outlives machine.reset(), a panic and the watchdog, and not a power cut, which so
#   cannot leave half a record behind. Nothing is allocated on the way: a MemoryError is
#   taken as any other. A port without RTC memory gets a file (this allocates: a best effort).
#   At the next boot fleetwire.crashsend checks the sum, moves the record to flash (write,
#   rename), marks RTC memory moved, and sends it.
#
# The record (little-endian):
#   0 "F"   1 "C" once taken (an installed buffer or a moved record has 0)
#   2 u16 crash id (+1 a record, on from the last one RTC memory held, else from the clock:
#         with the device and the boot id, the record's key)
#   4 u16 traceback end   6 u16 sum: Fletcher-16 of the whole record, these two bytes as 0
#   8 u32 boot id   12 u32 uptime s   16 u32 heap free   20 u32 largest free block (0: unknown)
#   24 u8 kind: 0 an exception, else the reset cause it was recorded from (crashsend.CAUSES)
#   25 u8 log lines   26 u8 line width   27 u8 the next line (the oldest)
#   28 u16 release end   30 u16 message end
#   32 the release | "Type: message" (96 bytes at most) | the traceback (a long one keeps
#      its end: "..." then the innermost frames) | free | the log ring, lines x width bytes
import gc
import io
import sys

try:
    from micropython import const
    from time import ticks_ms
except ImportError:
    from .cpython import const, ticks_ms

_MSG = const(96)

_s = [None, 0, None]  # the record, the last crash id, the RTC (None: a file)


class _W(io.IOBase):
    # a stream into t[i:e]. Past e, what comes is dropped; or, with s a start (not -1), it
    # wraps round to s (w: it did), so the region keeps the stream's end
    def write(self, b):
        t, i, e = self.t, self.i, self.e  # (four at once would build a tuple)
        s = self.s
        for k in range(len(b)):
            if i >= e:
                if s < 0:
                    break
                i = s
                self.w = 1
            t[i] = b[k]
            i += 1
        self.i = i
        return len(b)


_w = _W()


def install(release="", boot=0, lines=8, width=64, size=1024):
    """Take crashes from now on: the record (size bytes, its last lines x width the log
    ring) is allocated here, and nothing later. ValueError: a record RTC memory cannot hold
    (over 2048 bytes), or a ring that leaves the traceback too little of it."""
    if not 256 <= size <= 2048 or not 0 < lines < 256 or not 0 < width < 256 or lines * width > size // 2:
        raise ValueError("crash record: 256..2048 bytes, its log ring half of it at most")
    b = bytearray(size)
    _w.t, _w.i, _w.e, _w.s, _w.w = b, 32, 32 + len(release), -1, 0  # all now: a first store allocates
    print(release, end="", file=_w)
    b[0] = 70
    _p(b, 8, boot, 4)
    b[25] = lines
    b[26] = width
    _p(b, 28, _w.i, 2)
    _s[0] = b
    _s[1] = ticks_ms() & 0x7FFF  # crashsend.keep() goes on from the last record's id instead
    try:
        import machine

        _s[2] = machine.RTC()
    except (ImportError, AttributeError):  # the unix port's machine has no RTC
        _s[2] = None
    try:  # (ESP32) an exception made with the heap full keeps 2 frames and its message
        from micropython import alloc_emergency_exception_buf

        alloc_emergency_exception_buf(100)
    except ImportError:  # the unix port has none
        pass
    if "asyncio" in sys.modules:  # a task that ends with an exception nobody awaits
        sys.modules["asyncio"].get_event_loop().set_exception_handler(lambda loop, c: _end(c["exception"]))


def log(s):
    """One line (str, or bytes as they are) into the ring, over the oldest. Allocates nothing
    itself (a caller's formatting may)."""
    b, w = _s[0], _w
    if b is None:  # not installed
        return
    n, wd, h = b[25], b[26], b[27]
    w.i = len(b) - (n - h) * wd
    w.e = w.i + wd
    if type(s) is str:
        print(s, end="", file=w)
    else:
        w.write(s)
    if w.i < w.e:
        b[w.i] = 0
    b[27] = (h + 1) % n


def _p(b, i, v, n):
    for k in range(n):
        b[i + k] = v & 255
        v >>= 8


def _rev(b, i, j):
    # b[i:j] reversed in place
    j -= 1
    while i < j:
        b[i], b[j] = b[j], b[i]
        i += 1
        j -= 1


def take(e, kind=0):
    """The record of e (None: of a reset, `kind` its cause) into the buffer -> its traceback's
    end. Allocates nothing."""
    b, w = _s[0], _w
    gc.collect()
    _s[1] = c = (_s[1] + 1) & 0xFFFF
    b[1] = 67
    _p(b, 2, c, 2)
    _p(b, 12, ticks_ms() // 1000 if e is not None else 0, 4)  # ticks: since boot, on a board
    _p(b, 16, gc.mem_free() if hasattr(gc, "mem_free") else 0, 4)
    b[24] = kind
    w.i = b[28] | b[29] << 8
    w.e = w.i + _MSG
    if e is not None:
        print(type(e).__name__, end=": ", file=w)
        print(e, end="", file=w)
    _p(b, 30, w.i, 2)
    # the traceback, between the message and the ring; where it failed matters most, so a
    # long one wraps round, is turned back in place, and "..." says what went
    w.s, w.w = w.i, 0
    w.e = len(b) - b[25] * b[26]
    if e is not None and w.e > w.i + 3:
        sys.print_exception(e, w)
    s, i, x = w.s, w.i, w.e
    w.s = -1
    if w.w:
        _rev(b, s, i)
        _rev(b, i, x)
        _rev(b, s, x)
        b[s] = b[s + 1] = b[s + 2] = 46
        i = x
    _p(b, 4, i, 2)
    _p(b, 6, 0, 2)
    _p(b, 6, sum16(b), 2)
    return i


def sum16(b):
    """Fletcher-16 of b."""
    x = y = 0
    for i in range(len(b)):
        x = (x + b[i]) % 255
        y = (y + x) % 255
    return y << 8 | x


def catch(e, kind=0):
    """Record e and keep the record for the next boot. Allocates nothing on a board with
    RTC memory."""
    take(e, kind)
    if _s[2] is not None:
        _s[2].memory(_s[0])
        return
    try:  # no RTC memory: a file, written whole, then renamed (the old one or the new)
        import os

        with open("crash.rtc.t", "wb") as f:
            f.write(_s[0])
        os.rename("crash.rtc.t", "crash.rtc")
    except (OSError, MemoryError):
        pass


def _end(e):
    # record e, and reset
    catch(e)
    try:
        import machine

        machine.reset()
    except (ImportError, AttributeError):  # the unix port's machine has no reset()
        pass
    raise SystemExit("reset")


def run(main, release="", boot=0, lines=8, width=64, size=1024):
    """install() (unless it ran), then main(): an exception out of it is recorded and the
    board reset."""
    if _s[0] is None:
        install(release, boot, lines, width, size)
    try:
        main()
    except Exception as e:
        _end(e)
