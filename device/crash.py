# Crash capture: why a board reset, taken on the board, kept across the reset, uploaded
# after it (fleetwire.crashsend). Loaded on use: fleetwire.runner installs it; a program
# of its own calls run(main, release) (or install() and catch()).
#
# Theory of operation.
#   install() allocates all the crash path needs, once: the record (a bytearray of `size`
#   bytes, 2048 at most: an ESP32's RTC memory), the log ring (`lines` slots of `width`
#   bytes) and a stream (_W) that print() and sys.print_exception() write into, which
#   copies into whichever buffer it is pointed at and drops what does not fit. So catch()
#   allocates nothing (a MemoryError is taken as any other) and the heap's state cannot
#   stop it.
#   log(text) copies one line into the ring, over the oldest.
#   catch(e) formats the record, then keeps it in RTC memory (machine.RTC().memory(), one
#   copy in C: it survives machine.reset(), a panic and the watchdog, and is lost on a power
#   cut, which it needs no protection from: nothing half-written outlives one). A port
#   without RTC memory gets a file, written now (this allocates: a best effort).
#   At the next boot fleetwire.crashsend checks the record's sum, moves it to flash (write,
#   rename: the old file or the new), clears RTC memory and uploads it.
#
# The record (little-endian; the body at 32, its sections ending at the offsets given):
#   0 "FC"             2 u16 crash id (+1 per record; with the device and boot id, its key)
#   4 u16 body end     6 u16 sum: Fletcher-16 of bytes 0..5 and 8..body end
#   8 u32 boot id     12 u32 uptime s     16 u32 heap free     20 u32 largest free (0: unknown)
#   24 u8 kind: 0 an exception, else the reset cause it was recorded from (crashsend.CAUSES)
#   25 u8 -            26 u16 release end    28 u16 "Type: message" end    30 u16 traceback end
#   body: release | "Type: message" (_MSG bytes at most) | traceback | log lines, oldest first
import gc
import io
import sys

try:
    from micropython import const
    from time import ticks_ms
except ImportError:
    from .cpython import const, ticks_ms

_HEAD = const(32)
_MSG = const(96)

_b = None  # the record
_r = None  # the log ring: lines x width bytes
_n = None  # each slot's length
_h = [0, 0, 0, 0]  # next slot, width, boot id, last crash id
_k = [None, b""]  # the RTC (or None: a file), the release as bytes


class _W(io.IOBase):
    # a stream into t[i:e], allocating nothing. Past e, what comes is dropped; or, with s a
    # start (not -1), it wraps round to s (w: it did), so the region keeps the stream's end
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
_BUF = (bytes, bytearray, memoryview)


def install(release="", boot=0, lines=8, width=64, size=1024):
    """Take crashes from now on: the record (size bytes) and a log ring of `lines` lines of
    `width` bytes are allocated here, and nothing later."""
    global _b, _r, _n
    _b = bytearray(size)
    _r = bytearray(lines * width)
    _n = bytearray(lines)
    _w.t, _w.i, _w.e, _w.s, _w.w = _b, 0, 0, -1, 0  # now: a first store would allocate at the crash
    _h[1] = width
    _h[2] = boot
    _k[1] = release.encode() if isinstance(release, str) else release
    try:
        import machine

        _k[0] = machine.RTC()
        m = _k[0].memory()
    except (ImportError, AttributeError):
        _k[0] = None
        m = b""
    # crash ids go on from the last record, even one already sent ("F" stays); after a
    # power cut they start anywhere: with the boot id the key stays unique
    if len(m) > 4 and m[0] == 70:
        _h[3] = m[2] | m[3] << 8
    else:
        try:
            from random import getrandbits
        except ImportError:
            from .cpython import getrandbits
        _h[3] = getrandbits(15)
    if "asyncio" in sys.modules:  # a task that ends with an exception nobody awaits
        sys.modules["asyncio"].get_event_loop().set_exception_handler(_task)


def log(s):
    """One line into the ring, over the oldest: bytes as they are, else as print() prints it.
    Allocates nothing itself (the caller's formatting may)."""
    if _r is None:  # not installed: nothing to keep it in
        return
    w = _w
    h, wd = _h[0], _h[1]
    w.t, w.i, w.e = _r, h * wd, h * wd + wd
    if type(s) in _BUF:
        w.write(s)  # its bytes, not its repr
    else:
        print(s, end="", file=w)
    _n[h] = w.i - h * wd
    _h[0] = (h + 1) % len(_n)


def _u(b, i, v, n):
    for k in range(n):
        b[i + k] = v & 255
        v >>= 8


def _sum(b, n):
    a = c = 0
    for i in range(n):
        if i == 6:
            continue
        if i == 7:
            continue
        a = (a + b[i]) % 255
        c = (c + a) % 255
    return c << 8 | a


def take(e, kind=0):
    """Format the record of e into its buffer -> its length. Allocates nothing."""
    b, w = _b, _w
    gc.collect()
    _h[3] = c = (_h[3] + 1) & 0xFFFF
    for i in range(_HEAD):
        b[i] = 0
    b[0] = 70
    b[1] = 67
    _u(b, 2, c, 2)
    _u(b, 8, _h[2], 4)
    _u(b, 12, ticks_ms() // 1000 if e is not None else 0, 4)  # ticks: since boot on a board
    _u(b, 16, gc.mem_free() if hasattr(gc, "mem_free") else 0, 4)
    b[24] = kind
    r = _k[1]
    w.t, w.i, w.e = b, _HEAD, len(b)
    w.write(r)
    _u(b, 26, w.i, 2)
    if e is not None:
        w.e = w.i + _MSG
        print(type(e).__name__, end=": ", file=w)
        print(e, end="", file=w)
        _u(b, 28, w.i, 2)
        room = 0
        for k in range(len(_n)):
            room += _n[k] + 1
        w.e = len(b) - room
        if w.e > w.i:
            # the traceback's end, where it failed, matters most: a long one wraps round and
            # is turned back in place, "..." for what was lost
            w.s, w.w = w.i, 0
            sys.print_exception(e, w)
            s, i, x = w.s, w.i, w.e
            w.s = -1
            if w.w:
                _rev(b, s, i)
                _rev(b, i, x)
                _rev(b, s, x)
                b[s] = b[s + 1] = b[s + 2] = 46  # "..."
                w.i = x
        _u(b, 30, w.i, 2)
        w.e = len(b)
        h, wd = _h[0], _h[1]
        for k in range(len(_n)):  # the ring, oldest line first
            j = (h + k) % len(_n)
            if _n[j]:
                _line(w, j * wd, _n[j])
                w.write(b"\n")
    else:  # a reset's record, made at the next boot: no traceback, and this boot's log is not its
        _u(b, 28, w.i, 2)
        _u(b, 30, w.i, 2)
    _u(b, 4, w.i, 2)
    _u(b, 6, _sum(b, w.i), 2)
    return w.i


def _rev(b, i, j):
    # b[i:j] reversed in place
    j -= 1
    while i < j:
        b[i], b[j] = b[j], b[i]
        i += 1
        j -= 1


def _line(w, i, n):
    t, o, e = w.t, w.i, w.e
    if n > e - o:
        n = e - o
    for k in range(n):
        t[o + k] = _r[i + k]
    w.i = o + n


def catch(e, kind=0):
    """Record e (an exception, or None with the reset `kind`) and keep the record for the
    next boot. Allocates nothing on a board with RTC memory."""
    take(e, kind)
    rtc = _k[0]
    if rtc is not None:
        rtc.memory(_b)
        return
    try:  # no RTC memory: a file (written whole, then renamed: the old one or the new)
        import os

        with open("crash.rtc.tmp", "wb") as f:
            f.write(_b)
        os.rename("crash.rtc.tmp", "crash.rtc")
    except (OSError, MemoryError):
        pass


def _task(loop, ctx):
    e = ctx.get("exception")
    catch(e)
    _reset()


def _reset():
    try:
        import machine

        machine.reset()
    except (ImportError, AttributeError):  # the unix port's machine has no reset()
        pass
    raise SystemExit("reset")


def run(main, release="", boot=0, lines=8, width=64, size=1024):
    """install(), then main(): an exception out of it is recorded and the board reset."""
    install(release, boot, lines, width, size)
    try:
        main()
    except Exception as e:
        catch(e)
        _reset()
