# MQTTClient: the thin I/O loop around the sans-IO Session, with the API of
# micropython-lib's umqtt.simple (so code ports by changing the import) plus
# QoS 2, a pipelined in-flight window, keepalive pings and bounded queues.
# One non-blocking socket, polled; nothing waits without a deadline.
import socket
import select

try:
    from time import ticks_ms, ticks_diff, ticks_add, sleep_ms
except ImportError:
    from .cpython import ticks_ms, ticks_diff, ticks_add, sleep_ms
try:
    from random import getrandbits
except ImportError:  # a port built without random
    from .cpython import getrandbits

# `from .session import ...`, never `from . import session`: the package's lazy
# __getattr__ would answer for the submodule on MicroPython.
from .session import (MQTTException, ConnectRefused, QueueFull, ProtocolError,  # noqa: F401
                      StoreFull, SessionTakenOver, CONNECTING, CONNECTED, DISCONNECTED, to_bytes, backoff,
                      say, Front)

_POLLIN = select.POLLIN
_POLLOUT = select.POLLOUT
_IPPROTO_TCP = 6
_TCP_NODELAY = 1


class MQTTClient(Front):
    def __init__(self, client_id, server, port=0, user=None, password=None, keepalive=0,
                 ssl=None, ssl_params=None, *, max_inflight=10, queue_size=16, max_packet=1024,
                 max_subscriptions=8, drop_oldest=False, timeout=10, rx_buffer=256,
                 reconnect=False, backoff_min=1, backoff_max=128, takeover_kicks=3, store=None):
        super().__init__(client_id, server, port, user, password, keepalive, ssl, max_inflight,
                         queue_size, max_packet, max_subscriptions, drop_oldest, timeout, reconnect,
                         backoff_min, backoff_max, takeover_kicks, store)
        self.ssl_params = ssl_params or {}
        self.sock = None
        self._poll = None
        self._rx = memoryview(bytearray(rx_buffer))  # a view: feed() slices it without copying
        self._rxp = self._rxe = 0
        self._txo = self._txn = 0
        self._topic_str = None    # last str topic and its bytes: no allocation when reused
        self._topic_bytes = None
        self._sub_rc = -1
        self.retained = False     # retain flag of the message being delivered
        self.qos = 0              # its QoS
        self._retry_at = 0
        self._in_connect = False

    # ---- umqtt.simple API: set_callback and set_last_will are Front's

    def connect(self, clean_session=True, timeout=None):
        """Open the connection and wait for CONNACK -> 1 if the broker had a session, else 0.

        A clean session starts with no subscriptions, as the broker's does: this call
        forgets the ones made before (the client's own reconnects keep and renew them)."""
        if clean_session:
            self._s.forget()
        return self._connect(clean_session, timeout)

    def _connect(self, clean_session, timeout=None):
        if self.sock:
            self._close()
        s = self._s
        s.clean_session = clean_session
        s.connect_packet()  # arguments MQTT refuses raise here (ValueError), before anything opens
        self._clean = clean_session
        t = self.timeout_ms if timeout is None else int(timeout * 1000)
        addr = socket.getaddrinfo(self.server, self.port)[0][-1]
        sock = socket.socket()
        try:
            sock.settimeout(t / 1000)
            sock.connect(addr)
            try:
                sock.setsockopt(_IPPROTO_TCP, _TCP_NODELAY, 1)  # one packet, one segment, now
            except (OSError, AttributeError):
                pass
            if self.ssl:
                sock = self._wrap(sock)
            sock.setblocking(False)
        except BaseException:
            sock.close()
            raise
        self._open(sock)
        s.start(ticks_ms())
        self._in_connect = True
        try:
            self._wait(_until_connected, 0, t)
        except BaseException as e:
            if self.sock:
                self._lose(e)  # a connect that fails leaves nothing open
            raise
        finally:
            self._in_connect = False
        return 1 if s.session_present else 0

    def disconnect(self):
        """Send DISCONNECT (the broker then drops the will) and close."""
        if self.sock:
            self._s.disconnect()
            try:
                self._wait(_until_disconnected, 0, self.timeout_ms)
            finally:
                self._close()

    def ping(self):
        self._s.ping()
        try:
            self._flush(ticks_ms())
        except (OSError, MQTTException) as e:
            self._failed(e)

    def publish(self, topic, msg, retain=False, qos=0, *, block=True):
        """Publish msg to topic -> packet id (0 for QoS 0).

        block=True (umqtt behaviour) waits until a QoS 1/2 message is complete, and a
        QoS 0 message until it is written to the socket.
        block=False returns at once; the message is sent within the in-flight
        window, kept for resending until acknowledged, and on_delivered(pid) says
        when it completes. Pass bytes to publish without allocating."""
        if isinstance(topic, str):
            if topic is not self._topic_str:
                self._topic_bytes = topic.encode("utf-8")
                self._topic_str = topic
            topic = self._topic_bytes
        if type(msg) is not bytes:
            # str as UTF-8; a bytearray or memoryview is copied: a caller may reuse its buffer
            msg = msg.encode("utf-8") if isinstance(msg, str) else bytes(msg)
        s = self._s
        if block and s.state != CONNECTED and not self.reconnect:
            raise MQTTException(say("not_conn"))
        if not qos and self.sock and self._txo >= self._txn:
            # nothing queued or due ahead of it: written now, past the queue (a sensor loop's
            # usual case; this path costs no more than umqtt.simple's publish)
            n = s.pack_qos0(topic, msg, retain)
            if n:
                self._txo = 0
                self._txn = n
                try:
                    self._txo = self._send(s.tx, 0, n) or 0
                except OSError as e:
                    self._failed(e)  # lost with the link, as a QoS 0 message may be
                    return 0
                if self._txo >= n:
                    s.last_out = ticks_ms()  # s.wrote(), inline: this is the hot path
                elif block:
                    self._wait(_until_written, 0, self.timeout_ms)
                return 0
        pid = s.publish(topic, msg, qos, retain)
        if self.sock:
            try:
                self._flush(ticks_ms())
            except (OSError, MQTTException) as e:
                self._failed(e)  # the message stays queued for the next connection
        if block:
            if qos:
                self._wait(_until_complete, pid, self.timeout_ms)
            elif self.sock and (s.pending or self._txo < self._txn):
                # The socket is full (a slow link): wait for it, as umqtt's blocking write
                # does, rather than fill the queue and raise QueueFull.
                self._wait(_until_written, 0, self.timeout_ms)
        return pid

    def subscribe(self, topic, qos=0):
        """Subscribe and wait for SUBACK; raises MQTTException if the broker refuses."""
        if self.cb is None:
            raise MQTTException(say("no_cb"))
        pid = self._s.subscribe(to_bytes(topic), qos)
        self._sub_rc = -1
        self._sub_pid = pid
        try:
            self._wait(_until_suback, pid, self.timeout_ms)
        except Exception:
            self._s.sub_drop(pid)  # it failed, and the program knows: not made again behind its back
            raise
        if self._sub_rc == 0x80:
            raise MQTTException(say("sub_refuse", topic))
        return self._sub_rc

    def unsubscribe(self, topic):
        pid = self._s.unsubscribe(to_bytes(topic))
        self._wait(_until_unsuback, pid, self.timeout_ms)

    def wait_msg(self):
        """Block until one packet arrives and is handled -> its first byte (umqtt semantics).

        Waiting for a packet has no deadline, as in umqtt; keepalive pings go out meanwhile,
        and a dead link (no PINGRESP, or a packet stopped half-way for `timeout`) is closed
        and raised, or reconnected with reconnect=True."""
        n = self._handled
        while self._handled == n:
            self._step(60000)  # _step waits no longer than the next keepalive deadline
        return self._op

    def check_msg(self):
        """Handle whatever has arrived, without blocking -> first byte of the last packet, or None."""
        n = self._handled
        self.loop(0)
        return self._op if self._handled != n else None

    # ---- extensions

    def loop(self, timeout_ms=0):
        """Do all due I/O and keepalive work, waiting at most timeout_ms for input."""
        self._step(timeout_ms)

    # ---- the loop

    _handled = 0
    _op = None

    def _step(self, timeout_ms):
        if not self.sock:
            if self.reconnect and self._up_at >= 0 and not self._in_connect:
                return self._retry(timeout_ms)
            raise MQTTException(say("not_conn"))
        s = self._s
        try:
            now = ticks_ms()
            wait = s.tick(now)
            self._flush(now)
            if s.state == DISCONNECTED:
                return  # DISCONNECT is out: the broker closes, nothing more to read
            room = s.room()
            if self._rxp >= self._rxe or not room:
                if timeout_ms > wait:
                    timeout_ms = wait
                # No room for another packet's ack: wait only until the acks can be written.
                m = _POLLOUT if not room else _POLLIN | _POLLOUT if self._txo < self._txn else _POLLIN
                if m != self._pmask:
                    # only on a change: modify() looks the socket up by its address, an
                    # int that allocates where addresses pass 2**30 (a 32-bit unix port)
                    self._poll.modify(self.sock, m)
                    self._pmask = m
                if timeout_ms > 0 and not self._pending_tls():
                    self._wait_io(timeout_ms)
            self._read()
            self._flush(ticks_ms())
        except Exception as e:  # the application's too: its callback failed on a packet (MQTT-4.8.0-2)
            self._failed(e)

    def _failed(self, e):
        # The connection broke: close it, then raise, or plan the reconnect. A failure of
        # the application's own (its callback raised) always reaches it.
        self._lose(e)
        if (not self.reconnect or self._in_connect or self._up_at < 0 or isinstance(e, ConnectRefused)
                or not isinstance(e, (OSError, MQTTException))):
            raise e
        self._schedule()

    def _schedule(self):
        # The connection is gone: decide when to try again.
        if self.takeover_kicks and self._kicks >= self.takeover_kicks:
            self.reconnect = False
            raise SessionTakenOver(self._kicks, self._s.client_id)
        self._delay, d = backoff(self._delay, self.backoff_min, self.backoff_max, getrandbits(16))
        self._attempt += 1
        self._retry_at = ticks_add(ticks_ms(), d)
        if self.on_reconnect:
            self.on_reconnect(self._attempt, d)

    def _retry(self, timeout_ms):
        wait = ticks_diff(self._retry_at, ticks_ms())
        if wait > 0:
            sleep_ms(wait if wait < timeout_ms else timeout_ms)
            return
        try:
            self._connect(self._clean)
        except ConnectRefused as e:
            if e.code != 3:  # only "server unavailable" is worth retrying
                raise
            self._schedule()
        except (OSError, MQTTException):
            self._schedule()

    def _wait(self, until, arg, timeout_ms):
        # Run the loop until until(self, arg) is true, for at most timeout_ms.
        t0 = ticks_ms()
        while not until(self, arg):
            left = timeout_ms - ticks_diff(ticks_ms(), t0)
            if left <= 0:
                raise MQTTException(say("timeout", timeout_ms))
            self._step(left)

    def _read(self):
        s = self._s
        if self._rxp >= self._rxe:
            n = self._recv(self._rx)
            if n is None:
                return
            if n == 0:
                self._eof = True
                raise OSError(104, say("closed"))
            self._rxp = 0
            self._rxe = n
        now = ticks_ms()
        r = s.reader
        # Positions live on self: a callback may re-enter the loop and consume bytes.
        # With no room for more acks the rest waits in the buffer (backpressure).
        while self._rxp < self._rxe and s.room():
            self._rxp = s.feed(self._rx, self._rxp, self._rxe, now)
            if r.ready:
                self._handled += 1
                self._op = r.first
                s.handle(now)

    def _flush(self, now):
        s = self._s
        while True:
            if self._txo >= self._txn:
                n = s.pack_next(now)
                if not n:
                    return
                self._txo = 0
                self._txn = n
            w = self._send(s.tx, self._txo, self._txn - self._txo)
            if not w:
                return  # the socket is full: POLLOUT will tell
            self._txo += w
            if self._txo >= self._txn:
                s.wrote(now)
                if s.state == DISCONNECTED:
                    return  # DISCONNECT written: nothing may follow (MQTT-3.14.4-2)

    # ---- socket plumbing (MicroPython and CPython sockets differ)

    def _open(self, sock):
        self.sock = sock
        self._rxp = self._rxe = 0
        self._txo = self._txn = 0
        self._eof = False
        self._poll = select.poll()
        self._poll.register(sock, _POLLIN)
        self._pmask = _POLLIN
        self._ipoll = getattr(self._poll, "ipoll", None)
        if hasattr(sock, "recv_into"):  # CPython
            from .cpython import socket_io
            self._recv, self._send = socket_io(sock)
        else:
            self._recv = sock.readinto
            self._send = sock.write

    def _wait_io(self, timeout_ms):
        if self._ipoll:
            for _ in self._ipoll(timeout_ms):  # not one-shot: the mask stays as set
                pass
        else:
            self._poll.poll(timeout_ms)

    def _pending_tls(self):
        p = getattr(self.sock, "pending", None)
        return p is not None and p() > 0

    def _wrap(self, sock):
        if self.ssl is True:  # old umqtt style: ssl=True, ssl_params={...}
            import ssl
            return ssl.wrap_socket(sock, **self.ssl_params)
        return self.ssl.wrap_socket(sock, server_hostname=self.server)

    def _close(self):
        sock = self.sock
        self.sock = None
        if sock:
            try:
                self._poll.unregister(sock)
            except Exception:
                pass
            sock.close()

    def _lose(self, reason):
        was = self.sock is not None
        if was and self._s.state == CONNECTED:
            self._went_down(ticks_ms())
        self._close()
        self._s.lost()
        if was and self.on_disconnect:
            self.on_disconnect(reason)

    # ---- session events

    def _message(self, topic, msg, first):
        self.retained = bool(first & 1)
        self.qos = first >> 1 & 3
        if self.cb:
            self.cb(topic, msg)

    def _suback(self, pid, rc):
        if pid == self._sub_pid:
            self._sub_rc = rc

    _sub_pid = 0


# Conditions for MQTTClient._wait: plain functions, so waiting allocates no closure.
def _until_connected(c, _):
    return c._s.state != CONNECTING


def _until_disconnected(c, _):
    return c._s.state == DISCONNECTED and c._txo >= c._txn


def _until_complete(c, pid):
    return not c._s.holds(pid)


def _until_written(c, _):
    return c.sock is None or (not c._s.pending and c._txo >= c._txn)


def _until_suback(c, pid):
    return c._sub_rc >= 0


def _until_unsuback(c, pid):
    return not c._s.sub_pending(pid)
