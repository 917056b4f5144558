# Topic names and filters (§4.7): validation and matching.
# Every function takes a str or a bytes-like object; bytes are walked by index,
# so checking and matching a bytes topic allocates nothing on MicroPython.
from .errors import fail_as
from .text import check_utf8, encode

_SLASH = 0x2F
_PLUS = 0x2B
_HASH = 0x23
_DOLLAR = 0x24


def _b(t):
    return encode(t, "topic") if isinstance(t, str) else t


def _check_len(t, what):
    n = len(t)
    if n == 0:
        fail_as("empty", what)
    if n > 65535:
        fail_as("topic_long", what, n)
    return n


def check_name(topic):
    """Raise CodecError unless topic is a valid topic name (no wildcards)."""
    t = _b(topic)
    n = _check_len(t, "topic name")
    for i in range(n):
        c = t[i]
        if c == _PLUS or c == _HASH:
            fail_as("name_wild", chr(c))
    check_utf8(t, 0, n)  # also rejects U+0000 (MQTT-4.7.3-2 via MQTT-1.5.3-2)
    return t


def check_filter(topic_filter):
    """Raise CodecError unless topic_filter is a valid topic filter."""
    t = _b(topic_filter)
    n = _check_len(t, "topic filter")
    for i in range(n):
        c = t[i]
        if c == _HASH:
            if i != n - 1:
                fail_as("hash_last")
            if i > 0 and t[i - 1] != _SLASH:
                fail_as("hash_lvl")
        elif c == _PLUS:
            if (i > 0 and t[i - 1] != _SLASH) or (i < n - 1 and t[i + 1] != _SLASH):
                fail_as("plus_lvl")
    check_utf8(t, 0, n)
    return t


def is_wildcard(topic_filter):
    t = _b(topic_filter)
    for i in range(len(t)):
        if t[i] == _PLUS or t[i] == _HASH:
            return True
    return False


def matches(topic_filter, topic):
    """True if the (valid) filter matches the (valid) topic name."""
    f = _b(topic_filter)
    t = _b(topic)
    fl = len(f)
    tl = len(t)
    # A leading wildcard does not match topics starting with '$' (MQTT-4.7.2-1).
    if tl and t[0] == _DOLLAR and fl and (f[0] == _PLUS or f[0] == _HASH):
        return False
    i = 0
    j = 0
    while i < fl:
        c = f[i]
        if c == _HASH:
            return True
        if c == _PLUS:
            while j < tl and t[j] != _SLASH:
                j += 1
            i += 1
            continue
        if j >= tl or t[j] != c:
            # "a/#" also matches its parent level "a" (§4.7.1.2).
            return j == tl and c == _SLASH and i + 2 == fl and f[i + 1] == _HASH
        i += 1
        j += 1
    return j == tl
