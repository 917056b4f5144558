# Topic names and filters (§4.7): validation and matching, for a str or a bytes-like
# topic. The checks themselves are wire.check_name and wire.check_filter (the client's
# module, bytes-like only); matching is for hosts. Bytes are walked by index, so
# checking and matching a bytes topic allocates nothing on MicroPython.
from . import wire
from .text import encode

_SLASH = 0x2F
_PLUS = 0x2B
_HASH = 0x23
_DOLLAR = 0x24


def _b(t):
    return encode(t, "topic") if isinstance(t, str) else t


def check_name(topic):
    """Raise CodecError unless topic is a valid topic name (no wildcards); returns it as bytes."""
    return wire.check_name(_b(topic))


def check_filter(topic_filter):
    """Raise CodecError unless topic_filter is a valid topic filter; returns it as bytes."""
    return wire.check_filter(_b(topic_filter))


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
