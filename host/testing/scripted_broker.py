"""A scripted fake broker for conformance tests: a listening socket on 127.0.0.1
that the client under test connects to, driven step by step from the test thread
(accept, expect exact bytes, answer with exact bytes, expect a close or silence).

Nothing runs in the background: each call does its own socket I/O with a deadline,
and a failure is an AssertionError that shows both sides decoded by the codec and
the conversation so far."""

import socket
import struct
import time

from fleetwire.codec import packets
from fleetwire.codec.errors import CodecError
from fleetwire.codec.stream import PacketReader
from fleetwire.codec.wire import check_first_byte

HOST = "127.0.0.1"


def as_bytes(p):
    """A packet, bytes, or a list of either -> the bytes on the wire."""
    if isinstance(p, (bytes, bytearray, memoryview)):
        return bytes(p)
    if isinstance(p, (list, tuple)):
        return b"".join(as_bytes(x) for x in p)
    return p.encode()


def render(data, limit=400):
    """Bytes as the codec reads them (packets, or the error), with the hex."""
    data = bytes(data)
    try:
        text = ", ".join(repr(p) for p in packets.decode_all(data)) or "nothing"
    except (CodecError, IndexError, ValueError) as e:
        text = "undecodable (%s)" % e
    if len(text) > limit:
        text = text[:limit] + "..."
    h = data.hex(" ")
    return "%s  [%d bytes: %s]" % (text, len(data), h if len(h) <= 120 else h[:120] + " ...")


def _valid_first(b):
    try:
        check_first_byte(b)
        return True
    except CodecError:
        return False


class _Timeout(Exception):
    pass


class _Closed(Exception):
    pass


class ScriptedBroker:
    """Listen on 127.0.0.1:<free port> (.host, .port); one client connection at a time.

    transcript: [("client", bytes) | ("broker", bytes), ...], whole packets in order.
    """

    def __init__(self, max_packet=1 << 20, send_timeout=5):
        self.host = HOST
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.bind((HOST, 0))
        self.listener.listen(8)
        self.port = self.listener.getsockname()[1]
        self.max_packet = max_packet
        self.send_timeout = send_timeout
        self.conn = None
        self.peer = None
        self.transcript = []
        self._reader = PacketReader(max_packet)
        self._pending = bytearray()  # received, not yet fed to the reader
        self._partial = bytearray()  # fed to the reader: the packet being framed

    @property
    def address(self):
        return (self.host, self.port)

    # ---- connection

    def accept(self, timeout=5):
        """Wait for the client to connect (a previous connection is dropped first)."""
        self.close_client()
        self.listener.settimeout(timeout)
        try:
            conn, self.peer = self.listener.accept()
        except socket.timeout:
            raise AssertionError(
                "scripted broker: no client connected to port %d within %s s" % (self.port, timeout)
            ) from None
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.conn = conn
        self._reader.reset()
        self._pending = bytearray()
        self._partial = bytearray()
        return self

    def close_client(self, reset=False):
        """Drop the client's connection: FIN, or with reset=True an RST."""
        conn, self.conn = self.conn, None
        if conn is None:
            return
        try:
            if reset:
                # Linger 0: close() discards unsent data and sends RST.
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            else:
                conn.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        conn.close()

    def close(self):
        self.close_client()
        self.listener.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- sending

    def send(self, packet_or_bytes, split=None):
        """Send a packet, bytes or a list of them in one write; split=n sends n-byte
        pieces with a short pause between, so they arrive as separate reads."""
        data = as_bytes(packet_or_bytes)
        conn = self._conn()
        self.transcript.append(("broker", data))
        conn.settimeout(self.send_timeout)
        step = split or len(data) or 1
        try:
            for i in range(0, len(data), step):
                if i:
                    time.sleep(0.005)
                conn.sendall(data[i : i + step])
        except socket.timeout:
            raise AssertionError(
                "scripted broker: the client read none of %s within %s s" % (render(data), self.send_timeout)
            ) from None
        except OSError as e:
            raise AssertionError(
                "scripted broker: could not send %s, the client had closed the "
                "connection (%s)%s" % (render(data), e, self._story())
            ) from None

    # ---- receiving

    def receive_raw(self, timeout=5):
        """The next whole packet the client sends, as its exact bytes."""
        try:
            return self._next_packet(time.monotonic() + timeout)
        except _Timeout:
            part = bytes(self._partial + self._pending)
            got = "; %d byte(s) of a packet arrived: %s" % (len(part), part.hex(" ")) if part else ""
            raise AssertionError(
                "scripted broker: no (whole) packet from the client within %s s%s%s"
                % (timeout, got, self._story())
            ) from None
        except _Closed as e:
            raise AssertionError(
                "scripted broker: the client %s while a packet was expected%s%s"
                % (e, self._partial_note(), self._story())
            ) from None

    def receive(self, timeout=5):
        """The next packet the client sends, decoded (a fleetwire.codec.packets object)."""
        data = self.receive_raw(timeout)
        try:
            (p,) = packets.decode_all(data)
        except ValueError as e:  # CodecError, or a stray UnicodeDecodeError
            raise AssertionError(
                "scripted broker: the client sent a malformed packet: %s  [%s]%s"
                % (e, data.hex(" "), self._story())
            ) from None
        return p

    def expect(self, packet_or_bytes, timeout=5):
        """The client's next bytes must be exactly these (one packet or several);
        -> the packet received, decoded (a list if several were expected)."""
        want = as_bytes(packet_or_bytes)
        deadline = time.monotonic() + timeout
        got = b""
        n = 0
        # Packet by packet, so a wrong packet fails at once rather than at the deadline.
        while len(got) < len(want) and want.startswith(got):
            try:
                got += self._next_packet(deadline)
                n += 1
            except _Timeout:
                raise AssertionError(
                    "scripted broker: expected %s\n  but within %s s the client sent "
                    "%s%s"
                    % (
                        render(want),
                        timeout,
                        render(got) if got else "nothing",
                        self._partial_note() + self._story(),
                    )
                ) from None
            except _Closed as e:
                raise AssertionError(
                    "scripted broker: expected %s\n  but the client %s after sending "
                    "%s%s"
                    % (
                        render(want),
                        e,
                        render(got) if got else "nothing",
                        self._partial_note() + self._story(),
                    )
                ) from None
        if got != want:
            at = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
            raise AssertionError(
                "scripted broker: the client sent something else (first difference "
                "at byte %d)\n  got:      %s\n  expected: %s%s"
                % (at, render(got), render(want), self._story())
            )
        try:
            decoded = packets.decode_all(got)
        except ValueError:
            return got  # the test expected malformed bytes on purpose
        return decoded[0] if n == 1 else decoded

    def expect_nothing(self, seconds):
        """The client sends nothing and keeps the connection open for `seconds`."""
        if self._pending or self._partial:
            raise AssertionError(
                "scripted broker: expected nothing, but the client had already sent %s%s"
                % (render(self._partial + self._pending), self._story())
            )
        deadline = time.monotonic() + seconds
        try:
            chunk = self._recv(deadline)
        except _Timeout:
            return
        except _Closed as e:
            raise AssertionError(
                "scripted broker: expected silence, but the client %s%s" % (e, self._story())
            ) from None
        self._pending += chunk
        raise AssertionError(
            "scripted broker: expected nothing for %s s, but the client sent %s%s"
            % (seconds, render(chunk), self._story())
        )

    def expect_closed(self, timeout=5):
        """The client closes the connection within `timeout`, sending nothing more first."""
        if self._pending or self._partial:
            raise AssertionError(
                "scripted broker: expected the client to close, but it sent %s%s"
                % (render(self._partial + self._pending), self._story())
            )
        try:
            chunk = self._recv(time.monotonic() + timeout)
        except _Timeout:
            raise AssertionError(
                "scripted broker: the client did not close the connection within %s s%s"
                % (timeout, self._story())
            ) from None
        except _Closed:
            self.close_client()
            return
        self._pending += chunk
        raise AssertionError(
            "scripted broker: expected the client to close, but it sent %s%s" % (render(chunk), self._story())
        )

    # ---- internals

    def _conn(self):
        if self.conn is None:
            raise AssertionError(
                "scripted broker: no client connection (call accept() first, or it was closed)"
            )
        return self.conn

    def _recv(self, deadline):
        # One read: bytes, or _Timeout / _Closed. Never returns b"".
        conn = self._conn()
        left = deadline - time.monotonic()
        if left <= 0:
            raise _Timeout()
        conn.settimeout(left)
        try:
            chunk = conn.recv(65536)
        except socket.timeout:
            raise _Timeout() from None
        except ConnectionResetError:
            raise _Closed("reset the connection") from None
        if not chunk:
            raise _Closed("closed the connection")
        return chunk

    def _next_packet(self, deadline):
        r = self._reader
        while True:
            if self._pending and not self._partial and not _valid_first(self._pending[0]):
                # PacketReader refuses a bad first byte (QoS 3, reserved flags). The
                # length still frames it: hand it over, so expect() can match it and
                # receive() can say what is wrong with it.
                n = self._frame_by_length()
                if n:
                    data = bytes(self._pending[:n])
                    del self._pending[:n]
                    self.transcript.append(("client", data))
                    return data
            elif self._pending:
                try:
                    i = r.feed(self._pending)
                except CodecError as e:
                    bad = bytes(self._partial + self._pending)
                    raise AssertionError(
                        "scripted broker: the client sent bytes that cannot be framed: "
                        "%s  [%s]%s" % (e, bad.hex(" "), self._story())
                    ) from None
                # Keep the exact bytes: re-encoding would hide a non-minimal length.
                self._partial += self._pending[:i]
                del self._pending[:i]
                if r.ready:
                    data = bytes(self._partial)
                    self._partial = bytearray()
                    r.reset()
                    self.transcript.append(("client", data))
                    return data
                continue
            self._pending += self._recv(deadline)

    def _frame_by_length(self):
        # Size of the packet at the start of _pending from its remaining length, or
        # 0 while more bytes are needed.
        b = self._pending
        size, shift = 0, 0
        for k in range(1, 5):
            if k >= len(b):
                return 0
            size |= (b[k] & 127) << shift
            shift += 7
            if not b[k] & 128:
                n = k + 1 + size
                if n > self.max_packet:
                    break
                return n if len(b) >= n else 0
        raise AssertionError(
            "scripted broker: the client sent bytes that cannot be framed  [%s]%s"
            % (bytes(b[:16]).hex(" "), self._story())
        )

    def _partial_note(self):
        part = bytes(self._partial + self._pending)
        if not part:
            return ""
        return "\n  (and %d byte(s) of an unfinished packet: %s)" % (len(part), part[:40].hex(" "))

    def _story(self, last=8):
        if not self.transcript:
            return ""
        lines = ["  %-6s %s" % (who, render(data, 160)) for who, data in self.transcript[-last:]]
        more = len(self.transcript) - last
        return "\nconversation so far%s:\n%s" % (" (last %d)" % last if more > 0 else "", "\n".join(lines))
