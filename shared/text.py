# MQTT strings (§1.5.3): well-formed UTF-8, no UTF-16 surrogates, no U+0000,
# at most 65535 bytes. A byte order mark is data and is kept (MQTT-1.5.3-3).
# The check itself is wire.check_utf8 (the client's module: it indexes bytes one by
# one and allocates nothing); this module adds what a host needs for str.
from .errors import fail_as
from . import wire

MAX_STRING = 65535


def check_utf8(b, start=0, end=-1):
    """Raise CodecError unless b[start:end] is an acceptable MQTT string body."""
    wire.check_utf8(b, start, len(b) if end < 0 else end)


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
