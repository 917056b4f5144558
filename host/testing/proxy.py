"""A fault-injecting MQTT proxy: sits between a client and a broker, frames the
packets in both directions with the shared codec, logs every one it forwards, and
on request cuts, delays, throttles, blackholes, refuses or corrupts.

    p = Proxy(("127.0.0.1", broker_port)).start()
    client connects to p.port ...
    p.cut("up", at=7)                  # forward 7 more client->broker bytes, then cut
    p.cut("down", after="PUBREC")      # cut once the next PUBREC reaches the client
    p.blackhole()                      # sockets stay open, nothing passes
    p.refuse(seconds=2)                # new connections are reset at once

Directions: "up" is client -> broker, "down" is broker -> client. A fault armed
while a connection is live applies to that connection, counted from the moment it
was armed; otherwise to the next connection. Each cut fires once.

A cut resets both sockets (RST), as a dropped Wi-Fi link or a NAT timeout looks
to the ends; cut(..., graceful=True) closes them with FIN instead.
Only loopback addresses are accepted unless allow_remote=True.
"""

import collections
import socket
import threading
import time

from fleetwire.codec.errors import CodecError
from fleetwire.codec.reasons import NAMES
from fleetwire.codec.stream import PacketReader

UP = "up"
DOWN = "down"
DIRS = (UP, DOWN)
_TYPES = {name: i for i, name in enumerate(NAMES)}


def check_dir(d):
    if d not in DIRS:
        raise ValueError(
            "direction must be 'up' (client -> broker) or 'down' (broker -> client), not %r" % (d,)
        )


def packet_type(name):
    t = _TYPES.get(str(name).upper())
    if t is None or t == 0 or t == 15:
        raise ValueError("unknown MQTT packet type %r (one of %s)" % (name, ", ".join(NAMES[1:15])))
    return t


def _loopback(host):
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    for info in infos:
        a = info[4][0]
        if not (a.startswith("127.") or a == "::1"):
            return False
    return True


class Entry(collections.namedtuple("Entry", "t conn dir what size note")):
    """One log line: time (s since the proxy started), connection number, direction,
    packet name (or an event: "open", "cut", "refused", "close"), size, a note."""

    def __str__(self):
        arrow = {UP: "->", DOWN: "<-"}.get(self.dir, "  ")
        return "%9.3f #%d %s %-11s %5s %s" % (
            self.t,
            self.conn,
            arrow,
            self.what,
            self.size if self.size is not None else "",
            self.note,
        )


class _Fault:
    __slots__ = ("kind", "dir", "at", "ptype", "nth", "seen", "graceful", "xor", "conn")

    def __init__(self, kind, d, at=None, ptype=None, nth=1, graceful=False, xor=0xFF):
        self.kind = kind  # "cut" or "corrupt"
        self.dir = d
        self.at = at  # stream offset (absolute, set when bound to a connection)
        self.ptype = ptype  # packet type for "cut after the nth packet of a type"
        self.nth = nth
        self.seen = 0
        self.graceful = graceful
        self.xor = xor
        self.conn = None


def _cut_fault(direction=UP, at=None, after=None, nth=1, graceful=False):
    check_dir(direction)
    if (at is None) == (after is None) or (at is not None and at < 0):
        raise ValueError("cut at a byte offset >= 0, or after a packet type: one of them")
    return _Fault(
        "cut", direction, at=at, ptype=packet_type(after) if after else None, nth=nth, graceful=graceful
    )


class _Stream:
    """One direction of one connection: bytes forwarded and the packet framer."""

    def __init__(self, max_packet):
        self.sent = 0
        self.reader = PacketReader(max_packet)
        self.framed = True


class Connection:
    def __init__(self, proxy, n, client, upstream):
        self.proxy = proxy
        self.n = n
        self.sock = {UP: client, DOWN: upstream}  # the socket each direction reads from
        self.streams = {UP: _Stream(proxy.max_packet), DOWN: _Stream(proxy.max_packet)}
        self.faults = []
        self.closed = False
        self.done = set()
        self.blackholed = False
        self._lock = threading.Lock()

    def _dst(self, d):
        return self.sock[DOWN if d == UP else UP]

    def arm(self, f):
        with self._lock:
            if f.at is not None:
                f.at += self.streams[f.dir].sent
            f.conn = self.n
            self.faults.append(f)

    def pump(self, d):
        src = self.sock[d]
        dst = self._dst(d)
        st = self.streams[d]
        p = self.proxy
        try:
            while not self.closed:
                try:
                    data = src.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    break
                i, n = 0, len(data)
                while i < n and not self.closed:
                    stop = n
                    for f in self.faults:
                        if (
                            f.kind == "cut"
                            and f.dir == d
                            and f.at is not None
                            and st.sent <= f.at < st.sent + (stop - i)
                        ):
                            stop = i + (f.at - st.sent)
                    if stop == i:  # a cut at exactly this offset
                        self._fire(d, st.sent, None)
                        return
                    if st.framed:
                        try:
                            j = st.reader.feed(data, i, stop)
                        except CodecError as e:
                            st.framed = False
                            p._log(self.n, d, "unframed", None, str(e))
                            j = stop
                    else:
                        j = stop
                    piece = data[i:j]
                    piece = self._corrupt(d, st.sent, piece)
                    self._forward(d, dst, piece)
                    st.sent += len(piece)
                    p.last_activity = time.monotonic()
                    i = j
                    if st.framed and st.reader.ready:
                        t = st.reader.first >> 4
                        p._log(
                            self.n,
                            d,
                            NAMES[t],
                            st.reader.header_size() + st.reader.size,
                            "swallowed" if self.blackholed else "",
                        )
                        st.reader.reset()
                        if self._packet_cut(d, t):
                            return
                    for f in self.faults:
                        if f.kind == "cut" and f.dir == d and f.at == st.sent:
                            self._fire(d, st.sent, f)
                            return
            # The source closed its side: pass the close on (not through a blackhole).
            if self.blackholed:
                return
            with self._lock:
                self.done.add(d)
                both = len(self.done) == 2
            if not self.closed:
                try:
                    dst.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                if both:
                    self.close(True, "closed by both ends")
        except Exception as e:  # never leave a half-working connection behind
            p._log(self.n, d, "error", None, repr(e))
            self.close(False, "proxy error")

    def _forward(self, d, dst, piece):
        p = self.proxy
        if self.blackholed:
            return  # read and thrown away: the sender sees an open, silent link
        ms = p._delay_ms.get(d, 0)
        if ms:
            time.sleep(ms / 1000)
        bps = p._throttle.get(d, 0)
        step = max(1, bps // 20) if bps else len(piece)
        try:
            for i in range(0, len(piece), step):
                part = piece[i : i + step]
                if bps:
                    time.sleep(len(part) / bps)
                dst.sendall(part)
        except OSError:
            self.close(False, "write failed")

    def _corrupt(self, d, at, piece):
        for f in self.faults:
            if f.kind == "corrupt" and f.dir == d and at <= f.at < at + len(piece):
                b = bytearray(piece)
                b[f.at - at] ^= f.xor
                self.faults.remove(f)
                self.proxy._log(self.n, d, "corrupt", None, "byte %d ^ 0x%02x" % (f.at, f.xor))
                return bytes(b)
        return piece

    def _packet_cut(self, d, t):
        for f in self.faults:
            if f.kind == "cut" and f.dir == d and f.ptype == t:
                f.seen += 1
                if f.seen >= f.nth:
                    self._fire(d, self.streams[d].sent, f)
                    return True
        return False

    def _fire(self, d, at, f):
        graceful = f.graceful if f is not None else False
        if f is None:
            for g in self.faults:
                if g.kind == "cut" and g.dir == d and g.at == at:
                    f = g
                    graceful = g.graceful
                    break
        if f in self.faults:
            self.faults.remove(f)
        self.proxy.cuts += 1
        self.close(graceful, "cut %s after %d bytes" % (d, at))

    def close(self, graceful=True, note=""):
        with self._lock:
            if self.closed:
                return
            self.closed = True
        self.proxy._log(self.n, None, "cut" if note.startswith("cut") else "close", None, note)
        for s in self.sock.values():
            try:
                if not graceful:  # RST, not FIN
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                s.shutdown(socket.SHUT_RD)  # wakes the pump blocked on it
            except OSError:
                pass
        for s in self.sock.values():
            try:
                s.close()
            except OSError:
                pass


class Proxy:
    """A TCP proxy to `upstream` (host, port), listening on `listen` (port 0: any free)."""

    def __init__(
        self,
        upstream,
        listen=("127.0.0.1", 0),
        max_packet=1 << 18,
        log_limit=100000,
        allow_remote=False,
        echo=None,
    ):
        if not allow_remote and not (_loopback(listen[0]) and _loopback(upstream[0])):
            raise ValueError("the proxy only runs between loopback addresses unless allow_remote=True")
        self.upstream = tuple(upstream)
        self.max_packet = max_packet
        self.log = collections.deque(maxlen=log_limit)
        self.echo = echo  # echo(entry) is called for every log line (the CLI prints)
        self.cuts = 0
        self.recoveries = []  # seconds from each cut to the next CONNACK to the client
        self._cut_t = None
        self.accepted = 0
        self.refused = 0
        self._listen = listen
        self._srv = None
        self._conns = []
        self._pending = []  # faults waiting for the next connection
        self._cycle = []  # cut_each_connection()'s cuts
        self._cycle_i = 0
        self._refuse_until = 0.0
        self._refuse_count = 0
        self._blackhole_new = False
        self._delay_ms = {}
        self._throttle = {}
        self._t0 = time.monotonic()
        self.last_activity = self._t0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._changed = threading.Condition(self._lock)

    # ---- life

    def start(self):
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(self._listen)
        srv.listen(64)
        srv.settimeout(0.1)
        self._srv = srv
        threading.Thread(target=self._accept_loop, name="proxy-accept", daemon=True).start()
        return self

    @property
    def port(self):
        return self._srv.getsockname()[1]

    @property
    def address(self):
        return self._srv.getsockname()[:2]

    def stop(self):
        self._stop.set()
        for c in self.connections():
            c.close(True, "proxy stopped")
        if self._srv:
            self._srv.close()

    close = stop

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # ---- faults

    def cut(self, direction=UP, at=None, after=None, nth=1, graceful=False, on_next=False):
        """Cut the connection: `at` bytes further in `direction`, or after the `nth`
        packet of type `after` (e.g. "PUBREC") in that direction; with neither, now.
        on_next=True: on the next connection made, not the live one."""
        if at is None and after is None:
            check_dir(direction)
            return self.cut_now(graceful)
        f = _cut_fault(direction, at, after, nth, graceful)
        self._arm(f, on_next)
        return f

    def cut_each_connection(self, *cuts):
        """Arm one cut on every new connection, taking the next of `cuts` (dicts of
        cut()'s arguments) each time, round and round: a link that keeps breaking.
        With no arguments, stop."""
        faults = [_cut_fault(**c) for c in cuts]  # checked now, not at the next connection
        with self._lock:
            self._cycle = list(cuts)
            self._cycle_i = 0
        return len(faults)

    def corrupt(self, direction, at, xor=0xFF):
        """Flip bits (xor) of the byte `at` bytes further in `direction`."""
        check_dir(direction)
        if not 0 < xor < 256:
            raise ValueError("xor must be 1..255")
        self._arm(_Fault("corrupt", direction, at=at, xor=xor))

    def cut_now(self, graceful=False):
        """Cut every live connection."""
        for c in self.connections():
            self.cuts += 1
            c.close(graceful, "cut now")

    def blackhole(self, on=True, new=False):
        """Keep sockets open and pass nothing (only keepalive can notice). new=True
        also swallows connections made while it is on."""
        with self._lock:
            self._blackhole_new = on and new
            for c in self._conns:
                c.blackholed = on
        self._log(0, None, "blackhole", None, "on" if on else "off")

    def refuse(self, seconds=None, count=None):
        """Reset new connections at once, for `seconds` or for the next `count` ones."""
        with self._lock:
            self._refuse_until = time.monotonic() + seconds if seconds else 0.0
            self._refuse_count = count or 0

    def delay(self, ms, direction=None):
        """Hold every chunk for ms before passing it on (both directions by default)."""
        for d in (direction,) if direction else DIRS:
            check_dir(d)
            self._delay_ms[d] = ms

    def throttle(self, bytes_per_s, direction=None):
        """Limit the rate (0: unlimited)."""
        for d in (direction,) if direction else DIRS:
            check_dir(d)
            self._throttle[d] = bytes_per_s

    def clear(self):
        """Drop every armed fault and setting; live connections pass again."""
        with self._lock:
            self._pending = []
            self._cycle = []
            for c in self._conns:
                c.faults = []
                c.blackholed = False
            self._blackhole_new = False
            self._refuse_until = 0.0
            self._refuse_count = 0
        self._delay_ms.clear()
        self._throttle.clear()

    # ---- state

    def connections(self):
        with self._lock:
            return [c for c in self._conns if not c.closed]

    def wait_connections(self, n, timeout=10):
        """Wait until `n` connections have been accepted in all."""
        with self._changed:
            return self._changed.wait_for(lambda: self.accepted >= n, timeout)

    def wait_quiet(self, idle=0.05, timeout=10):
        """Wait until nothing has passed for `idle` seconds -> True, or False at timeout."""
        end = time.monotonic() + timeout
        while True:
            now = time.monotonic()
            quiet = now - self.last_activity
            if quiet >= idle:
                return True
            if now >= end:
                return False
            time.sleep(idle - quiet)

    def bytes(self, direction, conn=None):
        """Bytes forwarded in `direction` on connection number `conn` (default: the newest)."""
        with self._lock:
            for c in reversed(self._conns):
                if conn is None or c.n == conn:
                    return c.streams[direction].sent
        return 0

    def packets(self, conn=None):
        """[(direction, packet name)] forwarded, on connection `conn` (default: all)."""
        return [
            (e.dir, e.what)
            for e in list(self.log)
            if e.dir in DIRS and e.what.isupper() and (conn is None or e.conn == conn)
        ]

    # ---- internals

    def _arm(self, f, on_next=False):
        with self._lock:
            live = [c for c in self._conns if not c.closed]
            if on_next or not live:
                self._pending.append(f)
                return
        live[-1].arm(f)

    def _log(self, conn, d, what, size, note):
        e = Entry(time.monotonic() - self._t0, conn, d, what, size, note)
        if what == "cut":
            self._cut_t = e.t
        elif what == "CONNACK" and self._cut_t is not None:
            self.recoveries.append(e.t - self._cut_t)  # a cut to the next CONNACK
            self._cut_t = None
        self.log.append(e)
        if self.echo:
            self.echo(e)

    def _accept_loop(self):
        while not self._stop.is_set():
            try:
                client, _ = self._srv.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self._lock:
                refuse = self._refuse_count > 0 or time.monotonic() < self._refuse_until
                if self._refuse_count > 0:
                    self._refuse_count -= 1
            if refuse:
                self.refused += 1
                self._log(0, None, "refused", None, "")
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                client.close()
                continue
            try:
                up = socket.create_connection(self.upstream, timeout=5)
                up.settimeout(None)
            except OSError as e:
                self._log(0, None, "refused", None, "upstream: %s" % e)
                client.close()
                continue
            for s in (client, up):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._changed:
                self.accepted += 1
                c = Connection(self, self.accepted, client, up)
                c.blackholed = self._blackhole_new
                self._conns = [x for x in self._conns if not x.closed] + [c]
                pending, self._pending = self._pending, []
                if self._cycle:
                    pending.append(_cut_fault(**self._cycle[self._cycle_i % len(self._cycle)]))
                    self._cycle_i += 1
                self._changed.notify_all()
            for f in pending:
                c.arm(f)
            self._log(c.n, None, "open", None, "")
            for d in DIRS:
                threading.Thread(target=c.pump, args=(d,), name="proxy-%d-%s" % (c.n, d), daemon=True).start()
