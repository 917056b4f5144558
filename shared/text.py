# MQTT strings (§1.5.3): well-formed UTF-8, no UTF-16 surrogates, no U+0000,
# at most 65535 bytes. A byte order mark is data and is kept (MQTT-1.5.3-3).
# The checks index bytes one by one so they allocate nothing on MicroPython.
from .errors import fail_as

MAX_STRING = 65535


def check_utf8(b, start=0, end=-1):
    """Raise CodecError unless b[start:end] is an acceptable MQTT string body."""
    if end < 0:
        end = len(b)
    i = start
    while i < end:
        c = b[i]
        if c < 0x80:
            if c == 0:
                fail_as("u0")
            i += 1
            continue
        lo = 0x80
        hi = 0xBF
        if 0xC2 <= c <= 0xDF:
            n = 1
        elif 0xE0 <= c <= 0xEF:
            n = 2
            if c == 0xE0:
                lo = 0xA0  # overlong below U+0800
            elif c == 0xED:
                hi = 0x9F  # U+D800..U+DFFF are surrogates
        elif 0xF0 <= c <= 0xF4:
            n = 3
            if c == 0xF0:
                lo = 0x90  # overlong below U+10000
            elif c == 0xF4:
                hi = 0x8F  # above U+10FFFF
        else:
            fail_as("u8_start", c)
        if i + n >= end:
            fail_as("u8_short")
        d = b[i + 1]
        if d < lo or d > hi:
            if c == 0xED and d >= 0xA0 and d <= 0xBF:
                fail_as("u8_surr")
            fail_as("u8_bad")
        k = 2
        while k <= n:
            d = b[i + k]
            if d < 0x80 or d > 0xBF:
                fail_as("u8_bad")
            k += 1
        i += n + 1


def encode(s, what="string"):
    """s (a str) as UTF-8 bytes; CodecError, not UnicodeError, for a lone surrogate."""
    try:
        return s.encode("utf-8")
    except UnicodeError:  # a lone surrogate in a CPython str
        fail_as("u8_enc", what)


def to_utf8(s, what="string"):
    """A str or bytes-like as checked UTF-8 bytes (bytes-like input is not copied)."""
    b = encode(s, what) if isinstance(s, str) else s
    if len(b) > MAX_STRING:
        fail_as("str_long", what, len(b))
    check_utf8(b, 0, len(b))
    return b
