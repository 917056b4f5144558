# What the device code takes from MicroPython and CPython lacks: the ticks clock,
# const, and socket calls shaped like MicroPython's. Imported only where the
# MicroPython name is missing, so on a board this module is never loaded and its
# code costs no RAM (a fallback defined inline would, in every module that has it).
import time as _time


def ticks_ms():
    return int(_time.monotonic() * 1000)


def ticks_diff(a, b):
    return a - b  # plain integer milliseconds: they never wrap


def ticks_add(a, b):
    return a + b


def sleep_ms(ms):
    _time.sleep(ms / 1000)


def const(x):
    return x


def getrandbits(n):
    # for a MicroPython port built without `random`: jitter from the clock
    try:
        from time import ticks_ms as t
    except ImportError:
        t = ticks_ms
    return t() & ((1 << n) - 1)


def socket_io(sock):
    """(recv(buf) -> n | None, send(buf, off, n) -> n | None) for a CPython socket:
    None where MicroPython's readinto/write on a non-blocking socket give None."""

    def recv(buf):
        try:
            return sock.recv_into(buf)
        except OSError as e:
            if _would_block(e):
                return None
            raise

    def send(buf, off, n):
        try:
            return sock.send(memoryview(buf)[off : off + n])
        except OSError as e:
            if _would_block(e):
                return None
            raise

    return recv, send


def _would_block(e):
    return e.errno == 11 or type(e).__name__ in ("SSLWantReadError", "SSLWantWriteError")
