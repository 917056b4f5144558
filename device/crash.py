# Crash capture: why a board reset, taken on the board, kept across the reset, uploaded
# after it (fleetwire.crashsend). Loaded on use: fleetwire.runner installs it; a program of
# its own calls run(main, release) (or install(), then catch(e) where it catches): both are
# fleetwire.crashrun's, loaded by the first use of either name here.
#
# Theory of operation.
#   install() (its code in crashsend, loaded for the call and dropped) allocates the record,
#   once: one bytearray of `size` bytes (2048 at most: an ESP32's RTC memory) that holds the
#   header, the release, and at its end the log ring (`lines` slots of `width` bytes, each
#   ended by a 0 when shorter). _w is a stream that print() and sys.print_exception() write
#   into, copying into the record and allocating nothing. log(text) writes the next slot,
#   over the oldest. catch(e) takes the record (the message, the traceback between it and
#   the ring, the numbers, the sum) and keeps it in RTC memory: machine.RTC().memory(), one
#   copy in C that outlives machine.reset(), a panic and the watchdog, and not a power cut,
#   which so cannot leave half a record behind. Nothing is allocated on the way: a
#   MemoryError is taken as any other. A port without RTC memory gets a file (crashsend._F:
#   this allocates, a best effort). At the next boot crashsend checks the sum, moves the
#   record to flash (write, rename), marks RTC memory moved, and sends it.
#   Only what a crash needs stays resident: this module is log(), catch() and the stream,
#   whose state (t the record, r its keeper, i s e the window) lives on _w; every name a
#   module holds costs a board heap, so it imports in the functions (builtin modules: no
#   allocation) and holds no others.
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


class _W(__import__("io").IOBase):
    # byte i of what is written goes to t[i] when s <= i < e, else it only counts: with
    # s = e, a first print measures what a second one keeps the end of
    def write(self, b):
        t, i, e = self.t, self.i, self.e  # (four at once would build a tuple)
        s = self.s
        for k in range(len(b)):
            if s <= i < e:
                t[i] = b[k]
            i += 1
        self.i = i
        return len(b)


_w = _W()
_w.t = None


def log(s):
    """One line (str, or bytes as they are) into the ring, over the oldest. Allocates nothing
    itself (a caller's formatting may)."""
    w = _w
    b = w.t
    if b is None:  # not installed
        return
    n, h = b[25], b[27]
    w.s = w.i = len(b) - (n - h) * b[26]
    w.e = w.i + b[26]
    if type(s) is str:
        print(s, end="", file=w)
    else:
        w.write(s)
    if w.i < w.e:
        b[w.i] = 0
    b[27] = (h + 1) % n


def catch(e):
    """Record e and keep the record for the next boot. Allocates nothing on a board with
    RTC memory."""
    import gc
    import struct
    import sys
    import time  # (from x import y allocates)

    w = _w
    b = w.t
    gc.collect()
    m = w.s = w.i = b[28] | b[29] << 8
    w.e = m + 96
    print(type(e).__name__, end=": ", file=w)
    print(e, end="", file=w)
    m = w.i = min(w.i, w.e)
    # the traceback, between the message and the ring; where it failed matters most, so
    # it is printed twice: measured, then its end kept ("..." saying something went)
    w.s = w.e = 0
    sys.print_exception(e, w)
    x = len(b) - b[25] * b[26]
    c = w.i - x
    w.s, w.i, w.e = m, m - max(c, 0), x
    sys.print_exception(e, w)
    if c > 0:
        b[m] = b[m + 1] = b[m + 2] = 46
    struct.pack_into("<BHHH", b, 1, 67, (b[2] | b[3] << 8) + 1, min(w.i, x), 0)
    struct.pack_into("<IIIB", b, 12, time.ticks_ms() // 1000, gc.mem_free(), 0, 0)
    b[30], b[31] = m & 255, m >> 8
    x = c = 0  # Fletcher-16
    for k in range(len(b)):
        x = (x + b[k]) % 255
        c = (c + x) % 255
    b[6], b[7] = x, c
    w.r.memory(b)
