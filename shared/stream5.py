# Incremental, bounded framing for MQTT 5: stream.PacketReader with MQTT 5's first-byte rules
# (AUTH is packet type 15) and its errors as wire5.ProtocolError, each with the reason code a
# client sends in DISCONNECT: 0x95 Packet too large for a length over max_packet, 0x81
# Malformed Packet for a broken fixed header.
try:
    from micropython import const
except ImportError:  # CPython

    def const(x):
        return x


from .errors import CodecError
from .stream import PacketReader
from . import wire, wire5
from .wire5 import again, fail5

_AUTH = const(15)
_VBI_LONG = const(16 | 0x81 << 8)
_FLAGS = const(34 | 0x81 << 8)
_OVER_MAX = const(58 | 0x95 << 8)


def check_first_byte(b):
    """Raise ProtocolError unless b is a valid first byte of an MQTT 5 packet: 3.1.1's rules
    (wire.check_first_byte), and AUTH with flags 0000."""
    if b >> 4 == _AUTH:
        if b & 15:
            fail5(_FLAGS, b & 15)
        return
    try:
        wire.check_first_byte(b)
    except CodecError as e:
        again(e, 0x81)


def frame(b, i, e, limit):
    """wire.frame() for MQTT 5 (which also frames AUTH): the fixed header at b[i], b[i:e]
    received -> its length + 8 x the remaining length, or -1 while it is not all there.
    (wire.frame's first-byte check is 3.1.1's, which refuses type 15; this is its loop again
    rather than a hook in the 3.1.1 client's hot path.)"""
    check_first_byte(b[i])
    n = 0
    k = i + 1
    shift = 0
    while k < e:
        c = b[k]
        n |= (c & 127) << shift
        k += 1
        if c < 128:
            k -= i
            if n + k > limit:
                fail5(_OVER_MAX, n + k, limit)
            return k | n << 3
        if k - i == 5:
            fail5(_VBI_LONG)
        shift += 7
    return -1


class PacketReader5(PacketReader):
    """stream.PacketReader for MQTT 5: feed() bytes; when `ready`, the packet is
    (first, buf[:size]), for packets5.decode or wire5's readers."""

    check_first = staticmethod(check_first_byte)

    def feed(self, data, start=0, end=-1):
        try:
            return PacketReader.feed(self, data, start, end)
        except CodecError as e:  # 3.1.1's text for a length: over max_packet, or too long
            wire5.again(e, 0x81 if self.header_size() == 5 else 0x95)
