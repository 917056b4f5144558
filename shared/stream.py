# Incremental, bounded framing: bytes go in as they arrive, in pieces of any size,
# and whole packets come out of one buffer allocated once at construction. A length
# field is checked against max_packet before a byte of its body is stored, so no
# input can make the reader allocate or hold more than max_packet bytes.
from .errors import fail_as
from .wire import check_first_byte


class PacketReader:
    """Feed bytes with feed(); when `ready`, the packet is (first, buf[:size]).

    max_packet bounds the whole packet, fixed header included.
    """

    # the first byte's rules: 3.1.1's here, MQTT 5's in stream5.PacketReader5
    check_first = staticmethod(check_first_byte)

    def __init__(self, max_packet=4096):
        if max_packet < 2:
            raise ValueError("max_packet must be at least 2")
        self.max_packet = max_packet
        self.buf = bytearray(max_packet)
        self.reset()

    def reset(self):
        """Forget any partial packet: call after taking a packet or after an error."""
        self.first = 0  # first byte of the packet, 0 while none has arrived
        self.size = -1  # remaining length, -1 while it is being read
        self.got = 0  # body bytes stored so far
        self.ready = False
        self._hlen = 0  # fixed-header bytes read so far
        self._shift = 0

    def feed(self, data, start=0, end=-1):
        """Take bytes from data[start:end] up to the end of one packet.

        Returns the index of the first byte not taken. Raises CodecError on a
        malformed header or a packet over max_packet; reset() before reuse.
        """
        if end < 0:
            end = len(data)
        i = start
        while i < end and not self.ready:
            if self.size < 0:
                c = data[i]
                i += 1
                if self._hlen == 0:
                    self.check_first(c)
                    self.first = c
                    self.got = 0
                    self._hlen = 1
                    self._shift = 0
                    continue
                self.got |= (c & 127) << self._shift
                self._hlen += 1
                if c & 128:
                    if self._hlen == 5:
                        fail_as("rl_long")
                    self._shift += 7
                    continue
                n = self.got
                if n + self._hlen > self.max_packet:
                    fail_as("over_max", n + self._hlen, self.max_packet)
                self.size = n
                self.got = 0
                self.ready = n == 0
            else:
                take = self.size - self.got
                if end - i < take:
                    take = end - i
                g = self.got
                if take <= 8:  # short bodies (acks) byte by byte: no slice objects
                    for k in range(take):
                        self.buf[g + k] = data[i + k]
                else:
                    self.buf[g : g + take] = data[i : i + take]
                self.got = g + take
                i += take
                self.ready = self.got == self.size
        return i

    def header_size(self):
        return self._hlen

    def packets(self, data):
        """Host convenience: yield (first, bytes body) for each whole packet in data."""
        i = 0
        n = len(data)
        while i < n:
            i = self.feed(data, i, n)
            if self.ready:
                pkt = (self.first, bytes(self.buf[: self.size]))
                self.reset()
                yield pkt
