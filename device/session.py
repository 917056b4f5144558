# fleetwire's MQTT 3.1.1 session, sans-IO (Paho's ClientState, sized for a board): bytes
# and time go in, bytes to write and events come out. It never touches a socket or a
# clock, so the blocking client (client.py), the asyncio one (aio.py) and the tests'
# scripted brokers all drive this one core. Every table is allocated here, once.
#
# How an I/O loop drives it:
#   start(now) -> n        CONNECT packed into tx[:n] (what MQTT refuses raises ValueError
#                          here, before the loop opens anything); write it first
#   rx() / received(n, now)  the buffer to read into / n bytes went into it: every whole
#                          packet is acted on while room() holds (room for its ack)
#   pack(now)              the next packet due, packed into tx (0: none); once it is
#                          written, last_out = now (keepalive counts from it)
#   tick(now)              deadlines -> ms until the next one; raises on a dead link
#   lost(now, why)         the transport is gone -> ms to wait before reconnecting by
#                          itself (reconnect=True), or the reason is raised
#
# The connection, by what is true now:
#   DISCONNECTED  no transport                    -> start(): CONNECTING
#   CONNECTING    CONNECT is out, no CONNACK yet  -> CONNACK 0: CONNECTED; a refusal:
#                                                    DISCONNECTED, ConnectRefused raised
#   CONNECTED     the broker accepted the session -> disconnect(): CLOSING
#   CLOSING       DISCONNECT is due, nothing else -> DISCONNECT packed: DISCONNECTED
#   lost() takes any of them to DISCONNECTED.
#
# An outbound message lives in a slot of a ring, in the order publish() took it:
#   QUEUED    accepted, never written     -> written: WRITTEN (QoS 1/2), free (QoS 0)
#   WRITTEN   awaiting PUBACK / PUBREC    -> PUBACK: free; PUBREC: RECEIVED (qos2.py)
#   RECEIVED  QoS 2: the broker has it (PUBREC came); PUBREL due or written, awaiting
#             PUBCOMP                     -> PUBCOMP: free
#   After a CONNACK, WRITTEN and RECEIVED slots are discarded (on_discarded) on a clean
#   session and written again on a kept one (RESEND: PUBLISH with DUP, or PUBREL once
#   RECEIVED, MQTT-4.3.3-1); QUEUED ones wait either way. At most max_inflight slots are
#   WRITTEN or RECEIVED (the window). The cursor (_c) is the first slot not yet written;
#   the head (_h) the oldest in use. Slots complete out of order, so a ring full of gaps
#   is closed up (_compact) before the queue is called full. With a store, QoS 1/2
#   messages wait in it (flash) and take a slot when the window does; the slot then holds
#   the record's handle (_t is None, _m the handle).
#
# The slot arrays are the Session's, and these feature modules reach into them (a board
# cannot afford an accessor per field; this table is the contract, kept by hand):
#   module      writes                                         calls
#   store.py    _t _m _p _f _n _c, inflight (a stored message  _slot, _compact
#               takes a slot; a moved record's handle in _m)
#   mount.py    _m _p _f _n _c, inflight (the restore: what    _slot
#               was in flight on flash takes its slot again)
#   qos2.py     _f (WRITTEN -> RECEIVED on PUBREC)             _slot
#   renew.py    _f (RESEND), _c; _sf (a clean session forgets  _slot, _release, _advance
#               its filters)
#   dropold.py  _queued (a dropped QoS 0 message)              _slot, _release, _advance
#
# Features a program may not use live in modules loaded by the call that needs them,
# never by a packet's arrival: qos2.py (publish or subscribe at QoS 2, a persistent
# session, a store), store.py (store=), reconnect.py (reconnect=True), renew.py (a
# connection after the first, or a store's restored messages). Errors are worded
# by say() from reasons.py, read only when one happens.
try:
    from micropython import const
    from time import ticks_diff
except ImportError:
    from .cpython import const, ticks_diff

from .codec import wire
from .codec.wire import CodecError
from .codec.wire import check_filter, check_name
from . import MQTTException, say

# the package: its __getattr__ loads an error class (errkinds.py) when one is first raised
fw = __import__(__name__.rpartition(".")[0], None, None, ["_"])

# errors, by their line in reasons.TEXT (a number costs a board no interned name)
_ACKS_FULL = const(28)
_FIRST_PKT = const(21)
_HALF_PKT = const(24)
_INFLIGHT_Q = const(1)
_MALFORMED = const(20)
_NO_CONNACK = const(17)
_NO_PID = const(7)
_NO_PONG = const(18)
_PONG_BODY = const(22)
_PW_NO_USER = const(2)
_QOS = const(3)
_QUEUE_FULL = const(6)
_REFUSED = const(15)
_STALLED = const(19)
_STRAY_ACK = const(27)
_SUBACK_CNT = const(26)
_SUBS_FULL = const(8)
_TOO_BIG = const(5)
_UNEXPECTED = const(23)
_WILL_TOPIC = const(4)
_LONG_HEAD = const(38)

# packet types (as packets.CONNACK...: constants of this module, no lookups)
_CONNACK = const(2)
_PUBLISH = const(3)
_PUBACK = const(4)
_PUBREC = const(5)
_PUBREL = const(6)
_PUBCOMP = const(7)
_SUBSCRIBE = const(8)
_SUBACK = const(9)
_UNSUBSCRIBE = const(10)
_UNSUBACK = const(11)
_PINGREQ = const(12)
_PINGRESP = const(13)
_DISCONNECT = const(14)

DISCONNECTED = const(0)
CONNECTING = const(1)
CONNECTED = const(2)
CLOSING = const(3)

# a slot's flags: QoS (bits 0-1), retain, and its state
_RETAIN = const(4)
_QUEUED = const(8)
_WRITTEN = const(16)
_RECEIVED = const(24)
_STATE = const(24)
_RESEND = const(32)  # WRITTEN or RECEIVED, to be written again on this connection

# a subscription's state: ACTIVE + the QoS granted once SUBACK came; a refused one keeps
# SUBACK's 0x80 (sub_result tells it) until the entry is reused
_S_SUB = const(1)  # SUBSCRIBE due
_S_SUBACK = const(2)  # SUBSCRIBE written, awaiting SUBACK
_S_UNSUB = const(3)  # UNSUBSCRIBE due
_S_UNSUBACK = const(4)
_S_ACTIVE = const(5)

_TX = const(128)  # bytes of tx and of rx, whatever max_packet (see __init__); rx is
_RX = const(256)  # the larger: received bytes cost a read per buffer (bench/client.py's rate)
_DELTA = const(100)  # ms of slack on keepalive checks, as Paho
_MAX = const(268435460)  # the longest packet MQTT can frame
_PING_DUE = const(-2)  # _ping_at: a PINGREQ is due (-1: none out; else when it was written)


class Session:
    # What most sessions never change is the class's, not each instance's (a board pays
    # for every instance attribute): the callbacks and events, all optional, are
    # cb(topic, msg), on_connect(session_present), on_disconnect(reason),
    # on_delivered(pid), on_discarded(topic, msg, qos), on_reconnect(attempt, delay_ms).
    cb = on_connect = on_disconnect = on_delivered = on_discarded = on_reconnect = None
    will = None  # (topic, msg, qos, retain)
    store = _q2 = _rc = _rn = None  # the store, and the feature modules once loaded
    tail = None  # the payload of the packet in tx, written after tx[:length - len(tail)]
    retained = False  # the message being delivered: its retain flag, QoS, and the bytes
    qos = rest = dropped = 0  # of it still to come after this piece (see _publish_in)
    drop_oldest = reconnect = False

    def __init__(
        self,
        client_id,
        keepalive=0,
        clean_session=True,
        user=None,
        password=None,
        *,
        max_inflight=10,
        queue_size=16,
        max_packet=1024,
        max_subscriptions=8,
        drop_oldest=False,
        timeout=10,
        reconnect=False,
        backoff_min=1,
        backoff_max=128,
        takeover_kicks=3,
        store=None,
    ):
        if max_inflight < 1 or queue_size < max_inflight:
            raise ValueError(say(_INFLIGHT_Q))
        if password is not None and user is None:
            raise ValueError(say(_PW_NO_USER))
        self.client_id = _bytes(client_id)
        self.username = _bytes(user)
        self.password = _bytes(password)
        self.keepalive = keepalive
        self.clean_session = clean_session
        self.max_inflight = max_inflight
        if drop_oldest:
            from . import dropold as dr

            self.drop_oldest = True
            self._dr = dr
        self.timeout_ms = int(timeout * 1000)
        # Small buffers whatever max_packet, the largest packet either way: a message longer
        # than tx is written from the caller's bytes after its head (tail); a packet longer
        # than rx is read into a buffer of its own, dropped once it is handled. A store loads
        # whole packets into tx: tx grows to the longest one stored (publish(), the mount).
        self.max_packet = max_packet
        self.tx = bytearray(min(max_packet, _TX))
        self._rs = self._rb = bytearray(min(max_packet, _RX))  # received bytes, handled where they lie
        self._rmv = memoryview(self._rb)
        self._rp = self._re = 0  # the unhandled bytes are _rb[_rp:_re]
        self._pub_topic = None  # the last topic publish() checked (bytes: checked for good)
        self._rx_topic = None  # the last topic received, handed on again while it repeats
        n = queue_size + (max_inflight if store is not None else 0)  # the window's stored messages
        self._t = [None] * n  # topic, or None for a stored message
        self._m = [None] * n  # payload, or the stored record's handle
        self._p = [0] * n  # packet id
        self._f = bytearray(n)  # flags
        self._h = self._n = self._c = 0  # head; slots in use from it; cursor (offset from it)
        self._queued = self.inflight = 0
        # acks, PUBREL, SUBSCRIBE, UNSUBSCRIBE due, in order: type << 16 | packet id (or a
        # subscription's index). A received packet is taken only while 8 more fit (room()).
        self._fl = [0] * (max_subscriptions + 8)
        self._fh = self._fc = 0
        m = max_subscriptions
        self._sf = [None] * m  # filter (None: a free entry)
        self._sq = bytearray(m)  # the QoS asked for
        self._ss = bytearray(m)  # state, or SUBACK's return code 0x80 (refused)
        self._sp = [0] * m  # packet id of the SUBSCRIBE / UNSUBSCRIBE
        self._last_pid = 0
        self.state = DISCONNECTED
        self.session_present = False
        self._ping_at = -1
        self.last_in = self.last_out = 0  # when bytes last arrived / a packet was written
        self._up_at = -1  # when the last CONNACK came, -1: never
        self._handled = 0  # packets handled, and the first byte of the last one
        self._op = None
        if reconnect:
            from . import reconnect as rc

            self.reconnect = True
            rc.setup(self, backoff_min, backoff_max, takeover_kicks)
        if store is not None:
            from .store import attach

            attach(self, store)

    # ---- the application's calls

    def set_callback(self, f):
        """f(topic, msg) is called with bytes for every message received."""
        self.cb = f

    def set_last_will(self, topic, msg, retain=False, qos=0):
        topic = _bytes(topic)
        if qos < 0 or qos > 2:
            raise ValueError(say(_QOS))
        if not topic:
            raise ValueError(say(_WILL_TOPIC))
        self.will = (topic, _bytes(msg), qos, bool(retain))

    def publish(self, topic, msg, qos=0, retain=False):
        """Accept a message -> its packet id (0 for QoS 0). A bytes topic and msg are held by
        reference until written; other types are copied (a caller may reuse its buffer)."""
        if type(topic) is not bytes:
            topic = _bytes(topic) if isinstance(topic, str) else bytes(topic)
        if topic is not self._pub_topic:  # a device publishes to a few topics, over and over
            check_name(topic)
            self._pub_topic = topic
        if qos != 0 and qos != 1:
            if qos != 2:
                raise ValueError(say(_QOS))
            self.need_qos2()
        n = len(topic) + len(msg) + 4
        if n + 5 > self.max_packet and 1 + wire.varint_size(n) + n > self.max_packet:
            raise ValueError(say(_TOO_BIG, n, self.max_packet))
        self._fit(len(topic) + 9)  # the head of its PUBLISH fits tx
        if qos and self.store is not None:
            # on flash before publish() returns: from now on it survives a reset. It is sent
            # from flash, loaded whole into tx: a longer message than any before grows tx now
            self._fit(1 + wire.varint_size(n) + n)
            pid = self._new_pid()
            self.store.add(topic, msg, qos, retain, pid)
            return pid
        # queue_size bounds the messages RAM holds (with a store, the QoS 0 ones)
        full = len(self._f) - (self.max_inflight if self.store is not None else 0)
        used = self._queued + (self.inflight if self.store is None else 0)
        if used >= full and not (self.drop_oldest and self._dr.drop(self)):
            raise fw.QueueFull(say(_QUEUE_FULL, used))
        if self._n == len(self._f):
            self._compact()
        pid = self._new_pid() if qos else 0
        s = self._slot(self._n)
        self._n += 1
        self._t[s] = topic
        self._m[s] = msg
        self._p[s] = pid
        self._f[s] = qos | (_RETAIN if retain else 0) | _QUEUED
        self._queued += 1
        return pid

    def pack_qos0(self, topic, msg, retain):
        """A QoS 0 message packed straight into tx when nothing is due before it -> its
        length, or 0: then publish() queues it. For a caller whose tx is idle; it writes
        the packet at once (a sensor loop's usual path: no queue, no allocation)."""
        if (
            self.state != CONNECTED
            or self._c != self._n
            or self._fc
            or self._ping_at == _PING_DUE
            or type(topic) is not bytes
            or len(topic) + 7 > len(self.tx)
            or len(topic) + len(msg) + 7 > self.max_packet
        ):
            return 0  # publish() queues it, copies the topic, or refuses it with its reason
        if topic is not self._pub_topic:
            check_name(topic)
            self._pub_topic = topic
        n = wire.put_publish(self.tx, topic, msg, 0, retain, False, 0)
        self.tail = msg if n > len(self.tx) else None
        return n

    def subscribe(self, topic_filter, qos=0, state=_S_SUB):
        """Queue a SUBSCRIBE -> its packet id (sub_result(pid) tells the outcome)."""
        topic_filter = _bytes(topic_filter)
        check_filter(topic_filter)
        self._fit(len(topic_filter) + 10)
        if qos < 0 or qos > 2:
            raise ValueError(say(_QOS))
        if qos == 2:
            self.need_qos2()
        free = -1
        for i in range(len(self._sf)):  # the filter's entry, else a free one
            f = self._sf[i]
            if f == topic_filter:
                break
            if (f is None or self._ss[i] & 0x80) and free < 0:
                free = i
        else:
            if free < 0:
                raise MQTTException(say(_SUBS_FULL, len(self._sf)))
            i = free
            self._sf[i] = topic_filter
        if state == _S_SUB:
            self._sq[i] = qos
        return self._sub_queue(i, state)

    def unsubscribe(self, topic_filter):
        """Queue an UNSUBSCRIBE -> its packet id (sub_result(pid) is -1 until UNSUBACK)."""
        return Session.subscribe(self, topic_filter, 0, _S_UNSUB)

    def sub_result(self, pid):
        """-1 while the SUBSCRIBE or UNSUBSCRIBE with this packet id awaits its ack, then the
        QoS granted (0x80: refused; 0 for UNSUBSCRIBE)."""
        for i in range(len(self._sf)):
            if self._sp[i] == pid and self._sf[i] is not None:
                s = self._ss[i]
                return -1 if s < _S_ACTIVE else s if s & 0x80 else s - _S_ACTIVE
        return 0

    def forget(self, pid=0):
        """Drop every subscription without telling the broker (a clean start), or with a
        packet id only the one whose SUBSCRIBE the program was told failed: neither is made
        again behind the program's back."""
        for i in range(len(self._sf)):
            s = self._ss[i]
            if not pid or self._sp[i] == pid and (s < _S_ACTIVE or s & 0x80):
                self._sf[i] = None

    def need_qos2(self):
        """Load QoS 2 (qos2.py): for a call that declares it, never for a packet."""
        if self._q2 is None:
            from . import qos2

            self._q2 = qos2
            qos2.setup(self)

    def in_flight(self, pid):
        """True while the message with this packet id is queued, stored or in flight."""
        for k in range(self._n):
            s = self._slot(k)
            if self._f[s] and self._p[s] == pid:
                return True
        return self.store is not None and self.store.in_backlog(pid)

    @property
    def pending(self):
        """Messages accepted and not yet complete: queued, in the store, in flight."""
        return self._queued + self.inflight + (self.store.backlog if self.store is not None else 0)

    def disconnect(self):
        """Queue DISCONNECT; once it is written, close the transport."""
        if self.state == CONNECTED:
            self.state = CLOSING

    def is_connected(self):
        return self.state == CONNECTED

    # ---- the I/O loop's calls

    def start(self, now):
        if not self.clean_session:
            self.need_qos2()  # the session kept may hold QoS 2 flows either way
        if self._up_at >= 0 and not self._rn:
            # a connection before this one left messages and subscriptions: renew.py says
            # what a CONNACK does to them (a reconnect or a store loads it up front)
            from . import renew

            self._rn = renew
        w = self.will or (None, None, 0, False)
        n = 17 + len(self.client_id)  # CONNECT's length at most
        for f in (w[0], w[1], self.username, self.password):
            if f is not None:
                n += 2 + len(f)
        self._fit(n)
        self.tail = None
        n = wire.pack_connect(
            self.tx,
            self.client_id,
            self.clean_session,
            self.keepalive,
            w[0],
            w[1],
            w[2],
            w[3],
            self.username,
            self.password,
        )
        self.state = CONNECTING
        self._ping_at = -1
        self._fh = self._fc = self._rp = self._re = 0
        self.last_in = self.last_out = now
        return n

    def lost(self, now, why, retry=True):
        """The transport is gone (why: the exception, None for a close the program asked
        for) -> ms to wait before reconnecting by itself; raises why when it will not (and
        always with retry=False: the program's own connect() failed)."""
        was = self.state
        self.state = DISCONNECTED
        self._fc = self._rp = self._re = 0
        if self.rest:  # a message cut off: the broker sends it again whole (QoS 1/2), so a
            self.rest = 0  # QoS 2 id taken for it is no repeat
            lp = self._lp
            if lp >> 18 & 3 == 2 and not lp & 0x10000 and self._q2:
                self._q2.forget(self, lp & 0xFFFF)
        self._ping_at = -1
        if was == CONNECTED and self._rc:
            self._rc.went_down(self, now)
        if was >= CONNECTED and self.on_disconnect:  # a link that was up went down
            self.on_disconnect(why)
        if why is None:
            return 0
        if retry and self._rc and self._up_at >= 0 and isinstance(why, (OSError, MQTTException)):
            return self._rc.retry(self, why)  # or raises
        raise why

    def rx(self):
        """The buffer to read received bytes into (a partial packet moved to its front)."""
        p = self._rp
        e = self._re
        if p == e:
            self._rp = self._re = 0
            if self._rb is not self._rs:  # a long packet's own buffer, handled: dropped
                self._rb = self._rs
                self._rmv = memoryview(self._rs)
            return self._rmv
        if p:
            self._rb[: e - p] = self._rmv[p:e]
            self._rp = 0
            self._re = e = e - p
        return self._rmv[e:]

    def received(self, n, now):
        """n bytes were read into rx(): act on every whole packet while room() holds
        (received(0, now) goes on with those held back, once the acks were written) -> how
        many packets were handled."""
        if n:
            self._re += n
            self.last_in = now
        k = 0
        while self.room():
            b = self._rb
            p = self._rp
            e = self._re
            r = self.rest
            if r:  # more of a message longer than max_packet: delivered as it comes
                if p == e:
                    break
                c = min(r, e - p)
                self._rp = p + c
                if r == c:
                    self._handled += 1
                    k += 1
                self._publish_in(0, p, c)
                continue
            if e - p < 2:
                break
            try:
                x = wire.frame(b, p, e, _MAX if b[p] >> 4 == _PUBLISH else self.max_packet)
            except CodecError as err:
                raise fw.ProtocolError(say(_MALFORMED, err))
            if x < 0:
                break
            i = p + (x & 7)
            h = i + (x >> 3)  # the packet's end
            need = h
            if h - p > self.max_packet:
                # A PUBLISH longer than max_packet (MQTT sets no limit, and refusing it would
                # end the link on every redelivery): acted on once its topic and packet id are
                # in (a topic is at most 64 KB: held whole, longer than max_packet or not),
                # its payload handed to the callback in pieces as they arrive
                need = i + 2
                if e >= need:
                    need = min(h, need + (b[i] << 8 | b[i + 1]) + (2 if b[p] & 6 else 0))
            if need > e:
                if need - p > len(b):
                    # longer than rx: read into a buffer of its size (max_packet at most, or
                    # a long topic's)
                    try:
                        b = bytearray(need - p)
                    except MemoryError:
                        raise MemoryError(say(_LONG_HEAD, need - p))
                    b[: e - p] = self._rmv[p:e]
                    self._rb = b
                    self._rmv = memoryview(b)
                    self._rp = 0
                    self._re = e - p
                break
            if h <= e:
                k += 1
                self._handled += 1  # wait_msg() and check_msg() tell by these
            self._rp = min(h, e)  # before acting: a callback may run the loop again
            self._op = b[p]
            self._handle(b[p], i, h - i)
        if self._rb is not self._rs:
            self.rx()  # a long packet, handled: its buffer goes now, not at the next read
        return k

    def room(self):
        """True while a received packet can be taken: its ack fits. While false the I/O loop
        reads no more until the acks are written (backpressure), so a burst of any length
        is taken, never refused."""
        return self._fc < len(self._fl) - len(self._sf)

    def pack(self, now):
        """The next packet due, packed into tx -> its length, 0 if none. Order (Paho):
        DISCONNECT, PINGREQ, acks and subscriptions, then messages in order: resends after
        a reconnect, then new ones within the window."""
        st = self.state
        tx = self.tx
        self.tail = None
        if st == CLOSING:
            self.state = DISCONNECTED
            return wire.pack_empty(tx, _DISCONNECT)
        if st != CONNECTED:
            return 0
        if self._ping_at == _PING_DUE:
            self._ping_at = now
            return wire.pack_empty(tx, _PINGREQ)
        while self._fc:
            f = self._fl[self._fh]
            self._fh = (self._fh + 1) % len(self._fl)
            self._fc -= 1
            t = f >> 16
            i = f & 0xFFFF
            if t == _SUBSCRIBE or t == _UNSUBSCRIBE:
                if self._ss[i] == (_S_SUB if t == _SUBSCRIBE else _S_UNSUB):  # else superseded
                    self._ss[i] += 1  # the ack is awaited
                    if t == _SUBSCRIBE:
                        return wire.pack_subscribe(tx, self._sp[i], ((self._sf[i], self._sq[i]),))
                    return wire.pack_subscribe(tx, self._sp[i], (self._sf[i],), t)
            else:
                return wire.pack_ack(tx, t, i)
        while self._c < self._n:
            s = self._slot(self._c)
            f = self._f[s]
            if f & _RESEND:
                self._f[s] = f ^ _RESEND
                self._c += 1
                if f & _STATE == _RECEIVED:
                    return wire.pack_ack(tx, _PUBREL, self._p[s])
                return self._put(s, f, True)
            if f & _STATE == _QUEUED:
                if f & 3 and self.inflight >= self.max_inflight:
                    return 0
                n = self._put(s, f, False)
                self._queued -= 1
                self._c += 1
                if f & 3:
                    self._f[s] = f ^ (_QUEUED | _WRITTEN)
                    self.inflight += 1
                else:
                    self._release(s)
                    self._advance()
                return n
            self._c += 1
        if self.store is not None and self.inflight < self.max_inflight:
            return self._st.pack_stored(self)
        return 0

    def tick(self, now):
        """Deadlines -> ms until the next check; raises MQTTException on a dead link."""
        st = self.state
        if st == CONNECTING:
            left = self.timeout_ms - ticks_diff(now, self.last_out)
            if left <= 0:
                raise MQTTException(say(_NO_CONNACK, self.timeout_ms))
            return left
        if st != CONNECTED:
            return 60000
        wait = 60000
        if (self._rp != self._re or self.rest) and self.room():
            # A packet begun is finished within the timeout, keepalive or not: a link that
            # stops half-way through one is dead (waiting for the next packet may be endless).
            wait = self.timeout_ms - ticks_diff(now, self.last_in)
            if wait <= 0:
                raise MQTTException(say(_HALF_PKT, self.timeout_ms))
        if not self.keepalive:
            return wait
        k = self.keepalive * 1000
        if self._ping_at >= 0:
            # a PINGREQ is out: alive only if something arrived since it was written
            since = ticks_diff(now, self._ping_at)
            if ticks_diff(self.last_in, self._ping_at) < 0 and since >= k + _DELTA:
                raise MQTTException(say(_NO_PONG, self.keepalive))
            return min(wait, max(1, k + _DELTA - since))
        out = ticks_diff(now, self.last_out)
        if out >= 2 * k:
            raise MQTTException(say(_STALLED, self.keepalive))
        idle = max(out, ticks_diff(now, self.last_in))
        if idle >= k - _DELTA:
            self._ping_at = _PING_DUE
            return 1
        return min(wait, k - _DELTA - idle)

    # ---- received packets

    def _handle(self, first, i, n):
        t = first >> 4
        b = self._rb
        if self.state == CONNECTING:
            if t != _CONNACK:
                raise fw.ProtocolError(say(_FIRST_PKT, t))
            c = self._check(wire.connack_code, i, n)
            if c & 255:
                self.state = DISCONNECTED
                from .codec.reasons import CONNACK_REASONS

                raise fw.ConnectRefused(c & 255, say(_REFUSED, CONNACK_REASONS[c & 255], c & 255))
            self.state = CONNECTED
            self.session_present = c = c > 255
            self._up_at = self.last_in
            if self._rn:
                self._rn.renew(self, c)  # what the last connection left
            self._wake()
            if self.on_connect:
                self.on_connect(c)
        elif t == _PUBLISH:
            self._publish_in(first, i, n)
        elif t == _PINGRESP:
            if n:
                raise fw.ProtocolError(say(_PONG_BODY))
            self._ping_at = -1
        elif t == _SUBACK:
            pid = self._check(wire.suback_check, i, n)
            if n != 3:  # one return code per filter, and a SUBSCRIBE carries one (MQTT-3.8.4-5)
                raise fw.ProtocolError(say(_SUBACK_CNT, n - 2))
            self._acked(pid, _S_SUBACK, b[i + 2])
        elif t > _PUBCOMP and t != _UNSUBACK or t < _PUBACK:
            raise fw.ProtocolError(say(_UNEXPECTED, t))  # CONNACK again, or a client's packet
        else:  # an ack: PUBACK, PUBREC, PUBREL, PUBCOMP, UNSUBACK
            pid = b[i] << 8 | b[i + 1] if n == 2 else 0
            if not pid:
                self._check(wire.ack_id, i, n, t)  # raises what is wrong with it
            if t == _PUBACK:
                self._complete(pid, t)
            elif t == _UNSUBACK:
                self._acked(pid, _S_UNSUBACK, 0)
            elif self._q2:
                self._q2.ack(self, t, pid)
            elif t == _PUBREC:  # not a message of ours: answer so the broker can finish
                self._flow(_PUBREL, pid)
            elif t == _PUBREL:
                self._flow(_PUBCOMP, pid)
            else:
                raise fw.ProtocolError(say(_STRAY_ACK, t, pid))

    def _check(self, f, i, n, *a):
        # a codec parser on the body _rb[i:i+n] (a view: these packets are rare), its error a
        # ProtocolError
        try:
            return f(*(a + (self._rmv[i : i + n], n)))
        except CodecError as e:
            raise fw.ProtocolError(say(_MALFORMED, e))

    def _acked(self, pid, state, rc):
        # SUBACK (its return code rc) or UNSUBACK, for the entry awaiting it
        for k in range(len(self._sf)):
            if self._ss[k] == state and self._sp[k] == pid and self._sf[k] is not None:
                if state == _S_UNSUBACK:
                    self._sf[k] = None
                else:
                    self._ss[k] = rc if rc & 0x80 else _S_ACTIVE + rc
                self._wake()

    def _publish_in(self, first, i, n):
        # A PUBLISH from b[i], n bytes of its body here; while `rest` is set, n more bytes of
        # the payload of one longer than max_packet, delivered in pieces as they arrive (its
        # first byte, whether it repeats a QoS 2 message, and its id are in _lp meanwhile)
        b = self._rb
        h = i + n
        e = min(h, self._re)  # a message longer than max_packet goes on past the buffer
        r = self.rest
        if r:
            r -= n
            first = self._lp >> 17
            again = self._lp & 0x10000
            pid = self._lp & 0xFFFF
            qos = first >> 1 & 3
            ps = i
        else:
            te = i + 2 + (b[i] << 8 | b[i + 1]) if n >= 2 else e + 1
            qos = first >> 1 & 3
            ps = te + 2 if qos else te
            pid = b[te] << 8 | b[te + 1] if qos and ps <= e else 0
            if ps > e or te == i + 2 or (qos and not pid):
                self._check(wire.publish_fields, i, n, first)  # raises what is wrong with it
            topic = self._rx_topic
            if topic is None or len(topic) != te - i - 2 or self._rmv[i + 2 : te] != topic:
                # another topic than the last: copied and checked (a device hears a few
                # topics over and over, so most messages skip both)
                topic = bytes(self._rmv[i + 2 : te])
                try:
                    wire.check_pub_topic(topic, 0, te - i - 2)
                except CodecError as err:
                    raise fw.ProtocolError(say(_MALFORMED, err))
                self._rx_topic = topic
            # Exactly once (MQTT-4.3.3-2): the ids of QoS 2 messages delivered are kept until
            # their PUBREL, so that a repeat is answered and not delivered again (qos2.py,
            # loaded by a subscription at QoS 2 or a kept session). A broker that sends QoS 2
            # to a session that never asked for it (aedes) breaks MQTT-3.8.4-6: its messages
            # are delivered and answered all the same, without the table.
            again = 0x10000 if qos == 2 and self._q2 and self._q2.take(self, pid) else 0
            r = h - e
            if r:
                self._lp = first << 17 | again | pid
                if ps == e:  # its payload is still to come: no empty piece
                    self.rest = r
                    return
        self.rest = r
        # The ack goes with the last piece, queued before the callback runs; if the
        # application raises, it is taken back, so the message is not acknowledged, and the
        # exception ends the connection (MQTT-4.8.0-2): the broker sends it again whole.
        if qos and not r:
            self._flow(_PUBACK if qos == 1 else _PUBREC, pid)
        if again:
            return  # a repeat of one delivered and not yet released: answered only
        k = self._fc
        try:
            self.retained = bool(first & 1)
            self.qos = qos
            if self.cb:
                self.cb(self._rx_topic, bytes(self._rmv[ps:e]))
        except Exception:
            if qos and not r and self._fc == k:
                self._fc -= 1
            if qos == 2 and self._q2:
                self._q2.forget(self, pid)
            raise
        if qos == 2 and not r and self._q2:
            self._q2.delivered(self, pid)

    def _complete(self, pid, t):
        # PUBACK (or PUBCOMP, from qos2.py) for a message in flight
        for k in range(self._n):
            s = self._slot(k)
            # PUBACK completes a WRITTEN message: QoS 1, or QoS 2 still awaiting PUBREC from a
            # broker that downgrades QoS 2 to 1 (RabbitMQ: it has it at least once and would
            # never answer a PUBREL); PUBCOMP completes a RECEIVED one.
            if self._p[s] == pid and self._f[s] & _STATE == (_WRITTEN if t == _PUBACK else _RECEIVED):
                self._release(s)
                self._advance()
                self._wake()
                if self.on_delivered:
                    self.on_delivered(pid)
                return
        raise fw.ProtocolError(say(_STRAY_ACK, t, pid))

    # ---- helpers

    def _slot(self, k):
        return (self._h + k) % len(self._f)

    def _put(self, s, f, dup):
        # the PUBLISH of slot s into tx -> its length
        if self._t[s] is None:
            return self._st.load(self, self._m[s], dup)
        n = wire.put_publish(self.tx, self._t[s], self._m[s], f & 3, f & _RETAIN, dup, self._p[s])
        if n > len(self.tx):
            self.tail = self._m[s]
        return n

    def _release(self, s):
        # slot s is done with: written (QoS 0), complete, or discarded
        if self._f[s] & _STATE > _QUEUED:
            self.inflight -= 1
            if self._t[s] is None:
                self._st.done(self, self._m[s])
        self._f[s] = 0
        self._t[s] = self._m[s] = None

    def _advance(self):
        # the head past free slots
        while self._n and not self._f[self._h]:
            self._h = (self._h + 1) % len(self._f)
            self._n -= 1
            if self._c:
                self._c -= 1

    def _compact(self):
        # close up the gaps that completions out of order left, keeping the order
        j = c = 0
        for k in range(self._n):
            s = self._slot(k)
            if self._f[s]:
                if j != k:
                    d = self._slot(j)
                    self._t[d], self._m[d], self._p[d], self._f[d] = (
                        self._t[s],
                        self._m[s],
                        self._p[s],
                        self._f[s],
                    )
                    self._f[s] = 0
                    self._t[s] = self._m[s] = None
                j += 1
                if k < self._c:
                    c = j
        self._n = j
        self._c = c

    def _flow(self, t, v):
        fl = self._fl
        if self._fc == len(fl):
            raise fw.ProtocolError(say(_ACKS_FULL))
        fl[(self._fh + self._fc) % len(fl)] = t << 16 | v
        self._fc += 1

    def _sub_queue(self, i, state):
        self._ss[i] = state
        self._sp[i] = pid = self._new_pid()
        self._flow(_SUBSCRIBE if state == _S_SUB else _UNSUBSCRIBE, i)
        return pid

    def _new_pid(self):
        # 1..65535, wrapping, skipping ids still in use (MQTT-2.3.1-2)
        p = self._last_pid
        for _ in range(65535):
            p = p + 1 if p < 65535 else 1
            if not self.in_flight(p) and self.sub_result(p) >= 0:
                self._last_pid = p
                return p
        raise fw.QueueFull(say(_NO_PID))

    def _fit(self, n):
        # tx holds n bytes from now on (a long topic, filter, CONNECT or stored message: grown
        # once, by the call that needs it, never on a send path); a packet partly written is kept
        if n > len(self.tx):
            b = bytearray(n)
            b[: len(self.tx)] = self.tx
            self.tx = b

    def _wake(self):
        # something a waiter may be waiting for happened (aio.py wakes its tasks)
        pass


def _bytes(x):
    # str as UTF-8; bytes (and None) as they are
    return x.encode() if isinstance(x, str) else x
