# MQTTClient: the blocking I/O loop around the sans-IO Session, with micropython-lib's
# umqtt.simple API (code ports by changing the import) and the Session's features. One
# non-blocking socket, polled; nothing waits without a deadline but wait_msg(), which
# waits for a message as umqtt's does. The loop decides nothing: the Session does.
import socket
import select

try:
    from micropython import const
    from time import ticks_ms, ticks_diff, ticks_add, sleep_ms
except ImportError:
    from .cpython import const, ticks_ms, ticks_diff, ticks_add, sleep_ms

from .session import Session, CONNECTING, CONNECTED, DISCONNECTED, fw  # fw: the package (errors)
from . import MQTTException, say

# errors, by their line in reasons.TEXT (a number costs a board no interned name)
_CLOSED = const(14)
_NO_CB = const(11)
_NOT_CONN = const(10)
_SUB_REFUSE = const(12)
_TIMEOUT = const(13)

_POLLIN = select.POLLIN
_POLLOUT = select.POLLOUT


class MQTTClient(Session):
    """MQTTClient(client_id, server, port=0, user=None, password=None, keepalive=0, ssl=None,
    ssl_params=None, **options): the options are the Session's (max_inflight, queue_size,
    max_packet, max_subscriptions, drop_oldest, timeout, reconnect, backoff_min,
    backoff_max, takeover_kicks, store); see docs/reference/client.md."""

    sock = ssl = ssl_params = None
    _topic_str = _topic_bytes = None  # the last str topic published, and its bytes
    _own = False  # the program's connect() is running: a failure reaches it
    _retry_at = _txo = _txn = 0  # tx[_txo:_txn] is still to be written

    def __init__(
        self,
        client_id,
        server,
        port=0,
        user=None,
        password=None,
        keepalive=0,
        ssl=None,
        ssl_params=None,
        **options,
    ):
        Session.__init__(self, client_id, keepalive, True, user, password, **options)
        self.server = server
        self.port = port or (8883 if ssl else 1883)
        if ssl:
            self.ssl = ssl
            self.ssl_params = ssl_params

    # ---- umqtt.simple's API (set_callback, set_last_will: the Session's)

    def connect(self, clean_session=True, timeout=None):
        """Open the connection and wait for CONNACK -> 1 if the broker had a session, else 0.
        A clean session starts with no subscriptions, as the broker's does: this call
        forgets the ones made before (the client's own reconnects renew them)."""
        if clean_session:
            self.forget()
        self._own = True
        try:
            return self._connect(clean_session, timeout)
        except Exception as e:
            self._close()
            self.lost(ticks_ms(), e, False)  # raises e
        finally:
            self._own = False

    def disconnect(self):
        """Send DISCONNECT (the broker then drops the will) and close."""
        if self.sock:
            Session.disconnect(self)
            try:
                self._wait(1, 0, self.timeout_ms)
            finally:
                self._close()
                self.lost(ticks_ms(), None)

    def ping(self):
        self._ping_at = -2  # a PINGREQ is due
        self._write()

    def publish(self, topic, msg, retain=False, qos=0, *, block=True):
        """Publish msg to topic -> packet id (0 for QoS 0). block=True (umqtt's way) waits
        until a QoS 1/2 message is complete, and a QoS 0 one until it is written; block=False
        returns at once (on_delivered(pid) says when it completes). Pass bytes to publish
        without allocating."""
        if isinstance(topic, str):
            if topic is not self._topic_str:
                self._topic_bytes = topic.encode()
                self._topic_str = topic
            topic = self._topic_bytes
        if type(msg) is not bytes:
            # str as UTF-8; a bytearray or memoryview is copied: a caller may reuse its buffer
            msg = msg.encode() if isinstance(msg, str) else bytes(msg)
        if block and self.state != CONNECTED and not self.reconnect:
            raise fw.NotConnected(say(_NOT_CONN))
        if not qos and self.sock and self._txo >= self._txn:
            # nothing queued or due ahead of it: written now, past the queue (a sensor loop's
            # usual case; this path costs no more than umqtt.simple's publish)
            n = self.pack_qos0(topic, msg, retain)
            if n:
                self._txo = 0
                self._txn = n
                try:
                    if self.tail is None:  # one write, most messages: no call on the hot path
                        self._txo = self._send(self.tx, 0, n) or 0
                    while self._txo < n and self._out():
                        pass
                except OSError as e:
                    self._failed(e)  # lost with the link, as a QoS 0 message may be
                    return 0
                if self._txo >= n:
                    self.last_out = ticks_ms()  # wrote(), inline: the hot path
                elif block:
                    self._wait(3, 0, self.timeout_ms)
                return 0
        pid = Session.publish(self, topic, msg, qos, retain)
        self._write()
        if block:
            if qos:
                self._wait(2, pid, self.timeout_ms)
            elif self.sock and (self._queued or self._txo < self._txn):
                # the socket is full (a slow link): wait for it, as umqtt's blocking write
                # does, rather than fill the queue and raise QueueFull
                self._wait(3, 0, self.timeout_ms)
        return pid

    def subscribe(self, topic, qos=0):
        """Subscribe and wait for SUBACK -> the QoS granted; SubscribeRefused if refused."""
        if self.cb is None:
            raise MQTTException(say(_NO_CB))
        pid = Session.subscribe(self, topic, qos)
        try:
            self._wait(4, pid, self.timeout_ms)
        except Exception:
            self.forget(pid)  # it failed and the program knows: not made again behind its back
            raise
        rc = self.sub_result(pid)
        if rc & 0x80:
            raise fw.SubscribeRefused(say(_SUB_REFUSE, topic))
        return rc

    def unsubscribe(self, topic):
        self._wait(4, Session.unsubscribe(self, topic), self.timeout_ms)

    def wait_msg(self):
        """Block until one packet arrives and is handled -> its first byte (umqtt's way).
        Waiting has no deadline, as in umqtt; keepalive pings go out meanwhile, and a dead
        link (no PINGRESP, or a packet stopped half-way for `timeout`) is closed and raised,
        or reconnected with reconnect=True."""
        n = self._handled
        while self._handled == n:
            self.loop(60000)  # loop() waits no longer than the next deadline
        return self._op

    def check_msg(self):
        """Handle whatever has arrived, without blocking -> the first byte of the last
        packet handled, or None."""
        n = self._handled
        self.loop(0)
        return self._op if self._handled != n else None

    # ---- the loop

    def _connect(self, clean_session, timeout=None):
        self._close()
        self.clean_session = clean_session
        n = self.start(ticks_ms())  # what MQTT refuses raises here (ValueError), before anything opens
        t = self.timeout_ms if timeout is None else int(timeout * 1000)
        addr = socket.getaddrinfo(self.server, self.port)[0][-1]
        sock = socket.socket()
        try:
            sock.settimeout(t / 1000)
            sock.connect(addr)
            try:
                sock.setsockopt(6, 1, 1)  # IPPROTO_TCP, TCP_NODELAY: one packet, one segment, now
            except (OSError, AttributeError):
                pass
            if self.ssl:
                from .tls import wrap  # (a dotted name would cost every board its string)

                sock = wrap.wrap(sock, self.ssl, self.ssl_params, self.server)
            sock.setblocking(False)
        except BaseException:
            sock.close()
            raise
        self.sock = sock
        self._txo = 0
        self._txn = n  # CONNECT goes first
        self.eof = False
        self._poll = select.poll()
        self._poll.register(sock, _POLLIN)
        self._pmask = _POLLIN
        self._ipoll = getattr(self._poll, "ipoll", None)
        if hasattr(sock, "readinto"):  # MicroPython (a TLS socket has recv_into as well)
            self._recv = sock.readinto
            self._send = sock.write
        else:  # CPython
            from .cpython import socket_io

            self._recv, self._send = socket_io(sock)
        self.last_out = ticks_ms()  # the CONNACK deadline runs from here
        self._wait(0, 0, t)
        return 1 if self.session_present else 0

    def loop(self, timeout_ms=0):
        """Do all I/O and keepalive work that is due, waiting at most timeout_ms for input."""
        if not self.sock:
            if self.reconnect and self._up_at >= 0:
                return self._retry(timeout_ms)
            raise fw.NotConnected(say(_NOT_CONN))
        try:
            now = ticks_ms()
            wait = self.tick(now)
            self._flush(now)
            if self.state == DISCONNECTED:
                return  # DISCONNECT is out: the broker closes, nothing more to read
            room = self.room()
            if room and self.received(0, now):  # packets that waited for room for their acks
                timeout_ms = 0  # are this call's news: no waiting for more
            if timeout_ms > wait:
                timeout_ms = wait
            # no room for another packet's ack: wait only until the acks can be written
            m = (_POLLIN if room else 0) | (_POLLOUT if self._txo < self._txn else 0)
            if m != self._pmask:
                # only on a change: modify() looks the socket up by its address, an int
                # that allocates where addresses pass 2**30 (a 32-bit unix port)
                self._poll.modify(self.sock, m)
                self._pmask = m
            p = self.ssl and getattr(self.sock, "pending", None)  # TLS may hold decrypted bytes
            if timeout_ms > 0 and not (p and p()):
                if self._ipoll:
                    for _ in self._ipoll(timeout_ms):  # no list made, unlike poll()
                        pass
                else:
                    self._poll.poll(timeout_ms)
            # read while the buffer comes back full (more is waiting): the small buffer
            # costs a read, not a turn of the loop, per buffer
            while self.room():
                b = self.rx()
                n = self._recv(b)
                if n == 0:
                    self.eof = True
                    raise OSError(104, say(_CLOSED))
                if not n:
                    break
                self.received(n, ticks_ms())
                if n < len(b):
                    break
            self._flush(ticks_ms())
        except Exception as e:  # the application's too: its callback failed (MQTT-4.8.0-2)
            self._failed(e)

    def _write(self):
        # write what is due, reading nothing (umqtt's ping() and publish() only write: the
        # answer is for wait_msg() to take)
        if self.sock:
            try:
                self._flush(ticks_ms())
            except OSError as e:
                self._failed(e)  # a message stays queued for the next connection

    def _failed(self, e):
        # The link broke: close it; the Session decides whether to raise or to come back.
        self._close()
        self._retry_at = ticks_add(ticks_ms(), self.lost(ticks_ms(), e, not self._own))

    def _retry(self, timeout_ms):
        wait = ticks_diff(self._retry_at, ticks_ms())
        if wait > 0:
            sleep_ms(wait if wait < timeout_ms else timeout_ms)
            return
        try:
            self._connect(self.clean_session)
        except Exception as e:
            self._failed(e)

    def _wait(self, until, arg, timeout_ms):
        # Run the loop until the condition holds, for at most timeout_ms.
        t0 = ticks_ms()
        while not (
            self.state != CONNECTING
            if until == 0
            else self.state == DISCONNECTED and self._txo >= self._txn
            if until == 1
            else not self.in_flight(arg)
            if until == 2
            else self.sock is None or not self._queued and self._txo >= self._txn
            if until == 3
            else self.sub_result(arg) >= 0
        ):
            left = timeout_ms - ticks_diff(ticks_ms(), t0)
            if left <= 0:
                raise fw.Timeout(say(_TIMEOUT, timeout_ms))
            self.loop(left)

    def _flush(self, now):
        while True:
            if self._txo >= self._txn:
                n = self.pack(now)
                if not n:
                    return
                self._txo = 0
                self._txn = n
            if not self._out():
                return  # the socket is full: POLLOUT will tell
            if self._txo >= self._txn:
                self.last_out = now
                if self.state == DISCONNECTED:
                    return  # DISCONNECT written: nothing may follow (MQTT-3.14.4-2)

    def _out(self):
        # write what the socket takes of the packet due: tx[:head], then the session's tail
        # (a long message's payload, from the caller's bytes) -> False if it took nothing
        t = self.tail
        o = self._txo
        h = self._txn - len(t) if t else self._txn
        w = self._send(self.tx, o, h - o) if o < h else self._send(t, o - h, self._txn - o)
        if w:
            self._txo = o + w
        return w

    def _close(self):
        sock = self.sock
        self.sock = None
        if sock:
            try:
                self._poll.unregister(sock)
            except Exception:
                pass
            sock.close()
