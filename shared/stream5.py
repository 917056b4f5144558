# Incremental, bounded framing for MQTT 5: stream.PacketReader with MQTT 5's first-byte rules
# (AUTH is packet type 15) and its errors as wire5.ProtocolError, each with the reason code a
# client sends in DISCONNECT: 0x95 Packet too large for a length over max_packet, 0x81
# Malformed Packet for a broken fixed header.
from .errors import CodecError
from .stream import PacketReader
from . import wire5


class PacketReader5(PacketReader):
    """stream.PacketReader for MQTT 5: feed() bytes; when `ready`, the packet is
    (first, buf[:size]), for packets5.decode or wire5's readers."""

    check_first = staticmethod(wire5.check_first_byte)

    def feed(self, data, start=0, end=-1):
        try:
            return PacketReader.feed(self, data, start, end)
        except CodecError as e:  # 3.1.1's text for a length: over max_packet, or too long
            wire5.again(e, 0x81 if self.header_size() == 5 else 0x95)
