# The sans-IO MQTT session (Paho's ClientState, sized for a microcontroller).
# Bytes and time go in (feed, tick), bytes to write come out (pack_next into
# self.tx; pack_qos0 for a QoS 0 message nothing waits ahead of), and the
# application hears of events through the on_* attributes.
# It never touches a socket or a clock, so tests drive it with scripted bytes and
# a fake clock. Every table is a fixed-size list allocated here, once.
# Errors are raised with say(key, ...): their texts are in reasons.py, read only
# when an error happens, so they cost a board no RAM until then.
try:
    from micropython import const
    from time import ticks_diff
except ImportError:
    from .cpython import const, ticks_diff

from .codec import wire
from .codec.errors import CodecError
from .codec.stream import PacketReader
from .codec.topics import check_filter, check_name

# connection states
DISCONNECTED = const(0)
CONNECTING = const(1)    # CONNECT queued or sent, no CONNACK yet
CONNECTED = const(2)
DISCONNECTING = const(3)  # DISCONNECT queued

# outbound message slot flags (low two bits: QoS)
_RETAIN = const(4)
_SENT = const(8)      # written at least once: a resend carries DUP=1
_REL = const(16)      # PUBREC received: only PUBREL may be sent from now on (MQTT-4.3.3-1)
_RESEND = const(32)   # to be written again after a reconnect

# subscription entry states
_S_FREE = const(0)
_S_SUB = const(1)      # SUBSCRIBE to be written
_S_SUBACK = const(2)   # SUBSCRIBE written, awaiting SUBACK
_S_ACTIVE = const(3)
_S_UNSUB = const(4)    # UNSUBSCRIBE to be written
_S_UNSUBACK = const(5)

# state bits of a stored record, cleared (flash can only clear bits) as it progresses
SENT = const(1)    # written to the connection at least once
REL = const(2)     # PUBREC received: only PUBREL is sent from now on
DONE = const(4)    # complete: the record is dead

_DELTA = const(100)  # ms of slack on keepalive checks, as Paho
_RX2 = const(32)     # inbound QoS 2 packet ids kept in the table before the bitmap
_NIL = const(-1)


class MQTTException(Exception):
    """Base of fleetwire's errors; the message says what happened and what to do."""


class ConnectRefused(MQTTException):
    """CONNACK refused the connection. args = (return code, reason): args[0] is the
    code, as umqtt.simple's MQTTException carries it."""

    def __init__(self, code):
        from .codec.reasons import CONNACK_REASONS
        super().__init__(code, CONNACK_REASONS[code])

    @property
    def code(self):
        return self.args[0]

    @property
    def reason(self):
        return self.args[1]

    def __str__(self):
        return say("refused", self.args[1], self.args[0])


class QueueFull(MQTTException):
    pass


class StoreFull(MQTTException):
    """The message store has no room; what it holds is kept. Connect, or publish less."""


class SessionTakenOver(MQTTException):
    """The broker keeps closing the connection right after accepting it: another
    client is using the same client id. Client ids must be unique per device."""

    def __init__(self, kicks, client_id):
        super().__init__(say("taken_over", kicks, client_id))


class ProtocolError(MQTTException):
    """The broker broke MQTT 3.1.1; the connection is closed."""


class Session:
    def __init__(self, client_id, keepalive=0, clean_session=True, max_inflight=10,
                 queue_size=16, max_packet=1024, max_subscriptions=8, drop_oldest=False,
                 connect_timeout=10000, store=None):
        if max_inflight < 1 or queue_size < max_inflight:
            raise ValueError(say("inflight_q"))
        # With a store, QoS 1/2 messages live in it (flash) from publish() until
        # complete; RAM holds only the in-flight window's index and QoS 0 messages.
        self.store = store
        if store:
            store.open(max_packet, self._moved)
        self.client_id = client_id
        self.keepalive = keepalive
        self.clean_session = clean_session
        self.max_inflight = max_inflight
        self.drop_oldest = drop_oldest
        self.connect_timeout = connect_timeout
        self.will = None          # (topic, msg, qos, retain) or None
        self.username = None
        self.password = None
        self.reader = PacketReader(max_packet)
        # Handlers read received packets through a view: a slice of it, copied once by
        # bytes(), is the topic or payload (a slice of the bytearray would copy twice).
        self._rview = memoryview(self.reader.buf)
        self.tx = bytearray(max_packet)
        self._valid_topic = None  # the last bytes topic name check_name() passed
        self._rx_last = None  # the last received topic name (checked), handed on again
        # Outbound messages: slots in three singly linked lists (free, pending =
        # accepted not yet sent, inflight = sent QoS>0 awaiting completion), so
        # order is kept and every operation is O(1) or O(max_inflight).
        n = queue_size
        if store:
            n += max(max_inflight, len(store.window))
        self._queue_size = queue_size
        self._h = [-1] * n    # store handle of the slot's message, -1: held in RAM
        self._topic = [None] * n
        self._msg = [None] * n
        self._flags = bytearray(n)
        self._pid = [0] * n
        self._next = [_NIL] * n
        for i in range(n - 1):
            self._next[i] = i + 1
        self._free = 0
        self._pend_head = self._pend_tail = _NIL
        self._infl_head = self._infl_tail = _NIL
        self.pending = 0    # accepted, not yet written
        self.inflight = 0   # written, awaiting PUBACK / PUBCOMP
        self._resend = 0    # inflight slots still to write again after a reconnect
        # Flows (acks, PUBREL, SUBSCRIBE, UNSUBSCRIBE) waiting to be written, in order:
        # type << 16 | packet id (or subscription index for SUBSCRIBE/UNSUBSCRIBE).
        fn = 2 * max_inflight + max_subscriptions + 4
        self._flows = [0] * fn
        self._fhead = 0
        self._fcount = 0
        # Inbound QoS 2 (MQTT 3.1.1 §4.3.3, method B): a message is delivered when it
        # arrives and only its packet id is kept until PUBREL, so a repeat is answered and
        # never delivered twice. A table of _RX2 ids (with their store handles) holds what a
        # broker's usual window sends. Past it, ids go into a bitmap of all 65535 ids, in 16
        # parts of 512 bytes made when first needed and dropped when empty: any number a
        # conforming broker may send is taken, in at most 8 KB.
        self._rx_pid = [0] * _RX2
        self._rx_h = [-1] * _RX2
        self._rx_bits = None
        # Subscriptions, kept so they can be made again after a clean reconnect.
        m = max_subscriptions
        self._sub_topic = [None] * m
        self._sub_qos = bytearray(m)
        self._sub_state = bytearray(m)
        self._sub_pid = [0] * m
        self._last_pid = 0
        self.state = DISCONNECTED
        self.session_present = False
        self._connect_sent = False
        self._ping_due = False
        self._ping_at = -1   # when the outstanding PINGREQ was written, -1 if none
        self._rx_at = 0      # when bytes last arrived
        self.last_in = 0
        self.last_out = 0
        self.dropped = 0     # QoS 0 messages dropped by the drop_oldest policy
        # Event handlers (set by the owner). on_message(topic, msg, first_byte);
        # on_delivered(pid); on_suback(pid, rc); on_unsuback(pid); on_connack(present);
        # on_lost(reason); on_discarded(topic, msg, qos) for drop_oldest / clean start.
        self.on_message = _ignore
        self.on_delivered = _ignore1
        self.on_suback = _ignore
        self.on_unsuback = _ignore1
        self.on_connack = _ignore1
        self.on_pingresp = _ignore0
        self.on_discarded = _ignore
        if store:
            self._restore(store)

    def _restore(self, st):
        # Paho's restoreState: what was sent goes in flight again (PUBREL if PUBREC
        # came, else PUBLISH with DUP), oldest first; inbound QoS 2 awaits PUBREL.
        for h, pid, state, _, first in st.window:
            s = self._free
            self._free = self._next[s]
            self._h[s] = h
            self._pid[s] = pid
            self._flags[s] = (first >> 1 & 3) | (_RETAIN if first & 1 else 0) | _SENT | (0 if state & REL else _REL)
            self._append_inflight(s)
        self.inflight = len(st.window)
        st.window = None
        for h, pid, _ in st.inbound:   # delivered, awaiting PUBREL
            k = self._rx_add(pid)
            if k >= 0:
                self._rx_h[k] = h
        st.inbound = None
        self._last_pid = st.last_pid

    def _moved(self, old, new):
        # the store moved a record to reuse its block
        for i in range(len(self._h)):
            if self._h[i] == old:
                self._h[i] = new
                return
        for k in range(_RX2):
            if self._rx_h[k] == old:
                self._rx_h[k] = new
                return

    def set_login(self, user, password):
        """User name and password for CONNECT (str or bytes, None for none)."""
        if password is not None and user is None:
            raise ValueError(say("pw_no_user"))
        self.username = to_bytes(user)
        self.password = to_bytes(password)

    # ---- application calls

    def publish(self, topic, msg, qos=0, retain=False):
        """Accept a message (bytes topic and msg, held by reference; a topic of another type is
        copied) -> packet id (0 for QoS 0)."""
        if type(topic) is not bytes:
            topic = bytes(topic)  # held until sent: a caller's buffer could change meanwhile
        if topic is not self._valid_topic:  # a device publishes to a few topics, over and over
            check_name(topic)
            self._valid_topic = topic     # bytes are immutable: checked once is checked for good
        if qos < 0 or qos > 2:
            raise ValueError(say("qos"))
        n = len(topic) + len(msg) + 4   # remaining length, at most (QoS 0 has no packet id)
        if n + 5 > len(self.tx) and 1 + wire.varint_size(n) + n > len(self.tx):
            raise ValueError(say("too_big", n, len(self.tx)))
        st = self.store
        if qos and st:
            # into the store before publish() returns: it survives a reset from now on
            pid = self._new_pid()
            st.add(topic, msg, qos, retain, pid)
            return pid
        s = self._free
        if st and self.pending >= self._queue_size:
            s = _NIL
        if s == _NIL:
            s = self._drop_oldest_qos0() if self.drop_oldest else _NIL
            if s == _NIL:
                raise QueueFull(say("queue_full", self.pending + self.inflight))
        self._free = self._next[s]
        pid = self._new_pid() if qos else 0
        self._topic[s] = topic
        self._msg[s] = msg
        self._flags[s] = qos | (_RETAIN if retain else 0)
        self._pid[s] = pid
        self._next[s] = _NIL
        if self._pend_tail == _NIL:
            self._pend_head = s
        else:
            self._next[self._pend_tail] = s
        self._pend_tail = s
        self.pending += 1
        return pid

    def pack_qos0(self, topic, msg, retain):
        """A QoS 0 message packed straight into tx, when nothing is queued or due before it
        -> its length, or 0: then publish() queues it. For a caller whose last packet is
        fully written; it writes this one at once (a sensor loop's usual path: no queue)."""
        if self.state != CONNECTED or self.pending or self._fcount or self._resend or self._ping_due:
            return 0
        if type(topic) is not bytes or len(topic) + len(msg) + 7 > len(self.tx):
            return 0  # publish() copies the topic, or refuses the message with its reason
        if topic is not self._valid_topic:
            check_name(topic)
            self._valid_topic = topic
        return wire.put_publish(self.tx, topic, msg, 0, retain, False, 0)

    def subscribe(self, topic_filter, qos=0):
        check_filter(topic_filter)
        if qos < 0 or qos > 2:
            raise ValueError(say("qos"))
        i = self._sub_find(topic_filter)
        if i < 0:
            i = self._sub_find(None)
            if i < 0:
                raise MQTTException(say("subs_full", len(self._sub_state)))
            self._sub_topic[i] = topic_filter
        self._sub_qos[i] = qos
        return self._sub_queue(i, _S_SUB)

    def unsubscribe(self, topic_filter):
        check_filter(topic_filter)
        i = self._sub_find(topic_filter)
        if i < 0:
            i = self._sub_find(None)
            if i < 0:
                raise MQTTException(say("subs_full", len(self._sub_state)))
            self._sub_topic[i] = topic_filter
        return self._sub_queue(i, _S_UNSUB)

    def ping(self):
        self._ping_due = True

    def forget(self):
        """Drop every subscription, without telling the broker (for a clean start)."""
        for i in range(len(self._sub_state)):
            self._sub_state[i] = _S_FREE
            self._sub_topic[i] = None

    def connect_packet(self):
        """CONNECT packed into tx -> its length. Raises CodecError (a ValueError) for what
        MQTT refuses (an empty client id without a clean session, a bad will topic, ...)."""
        w = self.will or (None, None, 0, False)
        return wire.pack_connect(self.tx, self.client_id, self.clean_session, self.keepalive,
                                 w[0], w[1], w[2], w[3], self.username, self.password)

    def disconnect(self):
        """Queue DISCONNECT; after it is written the connection must be closed."""
        if self.state == CONNECTED:
            self.state = DISCONNECTING

    # ---- connection

    def start(self, now):
        """A transport is open: CONNECT goes first."""
        self.reader.reset()
        self.state = CONNECTING
        self._connect_sent = False
        self._ping_due = False
        self._ping_at = -1
        self._fhead = self._fcount = 0
        self.last_in = self.last_out = now

    def lost(self):
        """The transport is gone. In-flight messages stay for resending; volatile flows go."""
        self.state = DISCONNECTED
        self._fcount = 0
        self._ping_due = False
        self._ping_at = -1
        self.reader.reset()

    def handle(self, now):
        """Act on the packet self.reader has ready (the I/O loop frames with reader.feed)."""
        r = self.reader
        self.last_in = now
        first = r.first
        n = r.size
        r.reset()  # the body stays in r.buf until the reader is fed again
        try:
            self._handle(first, self._rview, n)
        except CodecError as e:
            raise ProtocolError(say("malformed", e))

    def feed(self, data, i, n, now):
        """Frame received bytes data[i:n] up to the end of one packet -> the index of the
        first byte not taken; handle() the packet once self.reader.ready. Take a packet
        only while room() is true."""
        try:
            i = self.reader.feed(data, i, n)
        except CodecError as e:
            raise ProtocolError(say("malformed", e))
        self._rx_at = now
        return i

    def room(self):
        """True while a received packet can be taken: there is room to queue its
        acknowledgement. While false, the I/O loop stops reading (backpressure) until the
        acknowledgements are written, so a burst of any length is taken, never refused."""
        return self._fcount < len(self._flows) - len(self._sub_state)

    def receive(self, data, now):
        """Frame and act on every packet in data (for tests and simple loops)."""
        i = 0
        n = len(data)
        while i < n:
            i = self.feed(data, i, n, now)
            if self.reader.ready:
                self.handle(now)

    def holds(self, pid):
        """True while the message with this packet id is queued or in flight."""
        return (self._find(self._pend_head, pid) != _NIL or self._find(self._infl_head, pid) != _NIL
                or (self.store is not None and self.store.in_backlog(pid)))

    def sub_drop(self, pid):
        """Forget the subscription whose SUBSCRIBE (pid) the program was told failed: it is
        never made again by itself."""
        for i in range(len(self._sub_state)):
            if self._sub_pid[i] == pid and self._sub_state[i] in (_S_SUB, _S_SUBACK):
                self._sub_state[i] = _S_FREE
                self._sub_topic[i] = None

    def sub_pending(self, pid):
        """True while a SUBSCRIBE or UNSUBSCRIBE with this packet id awaits its ack."""
        for i in range(len(self._sub_state)):
            st = self._sub_state[i]
            if st != _S_FREE and st != _S_ACTIVE and self._sub_pid[i] == pid:
                return True
        return False

    def want_write(self):
        """True if pack_next would produce a packet now."""
        st = self.state
        if st == CONNECTING:
            return not self._connect_sent
        if st == DISCONNECTED:
            return False
        if st == DISCONNECTING or self._ping_due or self._fcount or self._resend:
            return True
        if self.pending and (self.inflight < self.max_inflight or self._flags[self._pend_head] & 3 == 0):
            return True
        return self.store is not None and self.store.backlog and self.inflight < self.max_inflight

    def pack_next(self, now):
        """Pack the next packet to write into self.tx; -> its length, 0 if nothing is due.

        Order (Paho): CONNECT; then DISCONNECT, PINGREQ, flows, resends after a
        reconnect, new messages within the in-flight window."""
        st = self.state
        tx = self.tx
        if st == CONNECTING:
            if self._connect_sent:
                return 0
            self._connect_sent = True
            return self.connect_packet()
        if st == DISCONNECTED:
            return 0
        if st == DISCONNECTING:
            self.state = DISCONNECTED
            return wire.pack_empty(tx, wire.DISCONNECT)
        if self._ping_due:
            self._ping_due = False
            self._ping_at = now
            return wire.pack_empty(tx, wire.PINGREQ)
        if self._fcount:
            f = self._flows[self._fhead]
            self._fhead = (self._fhead + 1) % len(self._flows)
            self._fcount -= 1
            t = f >> 16
            if t == wire.SUBSCRIBE or t == wire.UNSUBSCRIBE:
                i = f & 0xFFFF
                st = self._sub_state[i]
                if t == wire.SUBSCRIBE and st == _S_SUB:
                    self._sub_state[i] = _S_SUBACK
                    return wire.pack_subscribe(tx, self._sub_pid[i], ((self._sub_topic[i], self._sub_qos[i]),))
                if t == wire.UNSUBSCRIBE and st == _S_UNSUB:
                    self._sub_state[i] = _S_UNSUBACK
                    return wire.pack_unsubscribe(tx, self._sub_pid[i], (self._sub_topic[i],))
                return self.pack_next(now)  # superseded by a later subscribe/unsubscribe
            return wire.pack_ack(tx, t, f & 0xFFFF)
        if self._resend:
            s = self._infl_head
            while s != _NIL and not self._flags[s] & _RESEND:
                s = self._next[s]
            if s != _NIL:
                self._resend -= 1
                fl = self._flags[s] & ~_RESEND
                self._flags[s] = fl
                if fl & _REL:
                    return wire.pack_ack(tx, wire.PUBREL, self._pid[s])
                if self._h[s] >= 0:
                    n = self.store.load(self._h[s], tx)
                    tx[0] |= 8   # DUP
                    return n
                return wire.put_publish(tx, self._topic[s], self._msg[s], fl & 3,
                                        fl & _RETAIN, True, self._pid[s])
            self._resend = 0
        s = self._pend_head
        if s == _NIL:
            return 0 if self.store is None else self._pack_stored(tx)
        fl = self._flags[s]
        qos = fl & 3
        if qos and self.inflight >= self.max_inflight:
            return 0
        n = wire.put_publish(tx, self._topic[s], self._msg[s], qos, fl & _RETAIN, False, self._pid[s])
        # off the pending list
        self._pend_head = self._next[s]
        if self._pend_head == _NIL:
            self._pend_tail = _NIL
        self.pending -= 1
        if qos:
            self._flags[s] = fl | _SENT
            self._append_inflight(s)
            self.inflight += 1
        else:
            self._release(s)
        return n

    def wrote(self, now):
        """The packet from pack_next is fully written."""
        self.last_out = now

    def tick(self, now):
        """Keepalive and CONNACK deadlines -> ms until the next check; raises on a dead link."""
        st = self.state
        if st == CONNECTING:
            left = self.connect_timeout - ticks_diff(now, self.last_out)
            if left <= 0:
                raise MQTTException(say("no_connack", self.connect_timeout))
            return left
        if self.reader.first:
            # A packet begun is finished within the timeout, keepalive or not: a link that
            # stops half-way through one is dead (waiting for the next packet may be endless).
            left = self.connect_timeout - ticks_diff(now, self._rx_at)
            if left <= 0:
                raise MQTTException(say("half_pkt", self.connect_timeout))
            if st != CONNECTED or not self.keepalive:
                return left
        if st != CONNECTED or not self.keepalive:
            return 60000
        k = self.keepalive * 1000
        if self._ping_at >= 0:
            # a PINGREQ is out: alive only if something arrived since it was written
            since = ticks_diff(now, self._ping_at)
            if ticks_diff(self.last_in, self._ping_at) < 0 and since >= k + _DELTA:
                raise MQTTException(say("no_pong", self.keepalive))
            return max(1, k + _DELTA - since)
        out = ticks_diff(now, self.last_out)
        if out >= 2 * k:
            raise MQTTException(say("stalled", self.keepalive))
        if ticks_diff(now, self.last_in) >= k - _DELTA or out >= k - _DELTA:
            self._ping_due = True
            return 1
        return max(1, k - _DELTA - max(out, ticks_diff(now, self.last_in)))

    # ---- received packets

    def _handle(self, first, b, n):
        t = first >> 4
        st = self.state
        if st == CONNECTING:
            if t != wire.CONNACK:
                raise ProtocolError(say("first_pkt", t))
            c = wire.connack_code(b, n)
            if c & 255:
                self.state = DISCONNECTED
                raise ConnectRefused(c & 255)
            self._connected(c >> 8)
            return
        if t == wire.PUBLISH:
            self._on_publish(first, b, n)
        elif t == wire.PUBACK:
            self._complete(wire.ack_id(t, b, n), 1, t)
        elif t == wire.PUBREC:
            pid = wire.ack_id(t, b, n)
            s = self._find(self._infl_head, pid)
            if s == _NIL or self._flags[s] & 3 != 2:
                # Not ours: answer so the broker can finish (Paho does the same).
                self._flow(wire.PUBREL, pid)
                return
            if self._h[s] >= 0:
                self.store.mark(self._h[s], REL)   # sc-: a restart resends PUBREL, not PUBLISH
            self._flags[s] |= _REL
            self._flow(wire.PUBREL, pid)
        elif t == wire.PUBCOMP:
            self._complete(wire.ack_id(t, b, n), 2, t)
        elif t == wire.PUBREL:
            self._on_pubrel(wire.ack_id(t, b, n))
        elif t == wire.SUBACK:
            pid = wire.suback_check(b, n)
            if n != 3:  # one return code per filter, and each SUBSCRIBE carries one (MQTT-3.8.4-5)
                raise ProtocolError(say("suback_cnt", n - 2))
            for i in range(len(self._sub_state)):
                if self._sub_state[i] == _S_SUBACK and self._sub_pid[i] == pid:
                    rc = wire.suback_code(b, n, 0)
                    self._sub_state[i] = _S_ACTIVE if rc != wire.SUBACK_FAILURE else _S_FREE
                    if rc == wire.SUBACK_FAILURE:
                        self._sub_topic[i] = None
                    self.on_suback(pid, rc)
                    return
        elif t == wire.UNSUBACK:
            pid = wire.ack_id(t, b, n)
            for i in range(len(self._sub_state)):
                if self._sub_state[i] == _S_UNSUBACK and self._sub_pid[i] == pid:
                    self._sub_state[i] = _S_FREE
                    self._sub_topic[i] = None
                    self.on_unsuback(pid)
                    return
        elif t == wire.PINGRESP:
            if n:
                raise ProtocolError(say("pong_body"))
            self._ping_at = -1
            self.on_pingresp()
        else:  # CONNACK twice, or a packet only a client sends
            raise ProtocolError(say("unexpected", t))

    def _connected(self, present):
        self.state = CONNECTED
        self.session_present = bool(present)
        if self.clean_session:
            # A clean session starts empty (Paho): what was in flight is discarded,
            # and said so; messages never sent stay queued.
            s = self._infl_head
            while s != _NIL:
                nxt = self._next[s]
                h = self._h[s]
                if h >= 0:
                    t, m = self.store.message(h)
                    self.store.mark(h, DONE)
                    self.on_discarded(t, m, self._flags[s] & 3)
                else:
                    self.on_discarded(self._topic[s], self._msg[s], self._flags[s] & 3)
                self._release(s)
                s = nxt
            self._infl_head = self._infl_tail = _NIL
            self.inflight = 0
        if not present:
            # A new session at the broker will never send PUBREL for the ids we keep.
            for k in range(_RX2):
                if self._rx_pid[k]:
                    self._rx_release(self._rx_pid[k])
            bits = self._rx_bits
            if bits is not None:
                for c in range(16):
                    part = bits[c]
                    for i in range(512 if part else 0):
                        for j in range(8 if part[i] else 0):
                            if part[i] & 1 << j:
                                self._rx_release(c << 12 | i << 3 | j)
        # Resend what is in flight, in order, with the original ids (MQTT-4.4.0-1).
        self._resend = 0
        s = self._infl_head
        while s != _NIL:
            self._flags[s] |= _RESEND
            self._resend += 1
            s = self._next[s]
        # Subscriptions the broker may not have: all of them if the session is new.
        for i in range(len(self._sub_state)):
            st = self._sub_state[i]
            if st == _S_FREE:
                continue
            if st == _S_UNSUB or st == _S_UNSUBACK:
                if present:
                    self._sub_queue(i, _S_UNSUB)
                else:
                    self._sub_state[i] = _S_FREE
                    self._sub_topic[i] = None
            elif st != _S_ACTIVE or not present:
                self._sub_queue(i, _S_SUB)
        self.on_connack(self.session_present)

    def _on_publish(self, first, b, n):
        te, pid, ps = wire.publish_fields(first, b, n, False)
        topic = self._rx_last
        if topic is None or len(topic) != te - 2 or b[2:te] != topic:
            # not the last topic received: copied, and checked byte by byte (a device hears
            # a few topics over and over, so most messages skip both)
            topic = bytes(b[2:te])
            wire.check_pub_topic(topic, 0, te - 2)
            self._rx_last = topic
        qos = first >> 1 & 3
        if qos == 2:
            if self._rx_has(pid):
                # a repeat (after a reconnect) of one delivered and not yet released:
                # acknowledged, never delivered twice (MQTT-4.3.3-2)
                self._flow(wire.PUBREC, pid)
                return
            k = self._rx_add(pid)   # before delivering: the room for its id is certain
        msg = bytes(b[ps:n])
        if qos:
            self._flow(wire.PUBACK if qos == 1 else wire.PUBREC, pid)
        try:
            self._deliver(topic, msg, first)
        except Exception:
            if qos == 2:
                self._rx_release(pid)  # not acknowledged: the broker will deliver it again
            raise
        if qos == 2 and self.store:
            # on flash after the callback: a reset in between delivers it again (at least
            # once, never lost), and the id survives a reset once it is written. A full
            # store keeps it in RAM only: exactly once until a reset, and the link stays up.
            try:
                h = self.store.add_inbound(pid, b, 0)
            except StoreFull:
                h = -1
            if k >= 0:
                self._rx_h[k] = h

    def _on_pubrel(self, pid):
        # the message went to the application when it arrived: forget its id (MQTT-4.3.3-2)
        self._rx_release(pid)
        self._flow(wire.PUBCOMP, pid)

    def _rx_has(self, pid):
        if self._rx_find(pid) >= 0:
            return True
        part = self._rx_bits[pid >> 12] if self._rx_bits else None
        return part is not None and part[pid >> 3 & 511] & 1 << (pid & 7)

    def _rx_add(self, pid):
        # keep an inbound QoS 2 id -> its table index, or -1 if it went into the bitmap
        k = self._rx_find(0)
        if k >= 0:
            self._rx_pid[k] = pid
            return k
        if self._rx_bits is None:
            self._rx_bits = [None] * 16
        c = pid >> 12
        if self._rx_bits[c] is None:
            try:
                self._rx_bits[c] = bytearray(512)
            except MemoryError:  # not acknowledged: the broker delivers it again later
                raise MQTTException(say("rx_mem", pid))
        self._rx_bits[c][pid >> 3 & 511] |= 1 << (pid & 7)
        return -1

    def _rx_release(self, pid):
        k = self._rx_find(pid)
        if k >= 0:
            if self._rx_h[k] >= 0:
                self.store.mark(self._rx_h[k], DONE)
            self._rx_pid[k] = 0
            self._rx_h[k] = -1
        elif self._rx_has(pid):
            part = self._rx_bits[pid >> 12]
            part[pid >> 3 & 511] &= ~(1 << (pid & 7))
            if self.store:
                self.store.forget_inbound(pid)
            for i in range(512):
                if part[i]:
                    return
            self._rx_bits[pid >> 12] = None  # empty: its 512 bytes go back to the heap

    def _deliver(self, topic, msg, first):
        # The ack is queued already; if the application raises, take it back so the
        # message is not acknowledged, and let the exception end the connection.
        tail = self._fcount
        try:
            self.on_message(topic, msg, first)
        except Exception:
            if first & 6 and self._fcount == tail:
                self._fcount -= 1
            raise

    def _complete(self, pid, qos, t):
        # PUBACK (qos 1) or PUBCOMP (qos 2) for an in-flight message.
        prev = _NIL
        s = self._infl_head
        while s != _NIL and self._pid[s] != pid:
            prev = s
            s = self._next[s]
        fl = self._flags[s] if s != _NIL else 0
        # A PUBACK for a QoS 2 message still awaiting PUBREC completes it: a broker that
        # downgrades QoS 2 to 1 (RabbitMQ) has taken it at least once, and would never
        # answer a PUBREL.
        if s == _NIL or (fl & 3 != qos and not (qos == 1 and not fl & _REL)) or (
                qos == 2 and not fl & _REL):
            raise ProtocolError(say("stray_ack", t, pid))
        nxt = self._next[s]
        if prev == _NIL:
            self._infl_head = nxt
        else:
            self._next[prev] = nxt
        if self._infl_tail == s:
            self._infl_tail = prev
        if self._flags[s] & _RESEND:
            self._resend -= 1
        self.inflight -= 1
        if self._h[s] >= 0:
            self.store.mark(self._h[s], DONE)
        self._release(s)
        self.on_delivered(pid)

    # ---- helpers

    def _flow(self, t, v):
        fl = self._flows
        if self._fcount == len(fl):
            raise ProtocolError(say("acks_full"))
        fl[(self._fhead + self._fcount) % len(fl)] = t << 16 | v
        self._fcount += 1

    def _pack_stored(self, tx):
        # the oldest stored message never sent, if the window has room (there is a store)
        st = self.store
        if not st.backlog or self.inflight >= self.max_inflight:
            return 0
        h = st.next_unsent()
        s = self._free
        if h < 0 or s == _NIL:
            return 0
        pid = st.pk_pid
        n = st.load(h, tx)
        st.mark(h, SENT)   # before it is written: after a reset it is resent with DUP
        self._free = self._next[s]
        self._h[s] = h
        self._pid[s] = pid
        self._flags[s] = (tx[0] >> 1 & 3) | _SENT
        self._append_inflight(s)
        self.inflight += 1
        return n

    def _append_inflight(self, s):
        self._next[s] = _NIL
        if self._infl_tail == _NIL:
            self._infl_head = s
        else:
            self._next[self._infl_tail] = s
        self._infl_tail = s

    def _release(self, s):
        self._h[s] = -1
        self._topic[s] = self._msg[s] = None
        self._flags[s] = 0
        self._pid[s] = 0
        self._next[s] = self._free
        self._free = s

    def _drop_oldest_qos0(self):
        prev = _NIL
        s = self._pend_head
        while s != _NIL and self._flags[s] & 3:
            prev = s
            s = self._next[s]
        if s == _NIL:
            return _NIL
        nxt = self._next[s]
        if prev == _NIL:
            self._pend_head = nxt
        else:
            self._next[prev] = nxt
        if self._pend_tail == s:
            self._pend_tail = prev
        self.pending -= 1
        self.dropped += 1
        self.on_discarded(self._topic[s], self._msg[s], 0)
        self._release(s)
        s = self._free
        return s

    def _find(self, s, pid):
        # Walk a slot list from s to the slot holding pid.
        while s != _NIL and self._pid[s] != pid:
            s = self._next[s]
        return s

    def _rx_find(self, pid):
        p = self._rx_pid
        for k in range(_RX2):
            if p[k] == pid:
                return k
        return -1

    def _sub_find(self, topic_filter):
        for i in range(len(self._sub_state)):
            if topic_filter is None:
                if self._sub_state[i] == _S_FREE:
                    return i
            elif self._sub_state[i] != _S_FREE and self._sub_topic[i] == topic_filter:
                return i
        return -1

    def _sub_queue(self, i, state):
        self._sub_state[i] = state
        pid = self._new_pid()
        self._sub_pid[i] = pid
        self._flow(wire.SUBSCRIBE if state == _S_SUB else wire.UNSUBSCRIBE, i)
        return pid

    def _in_use(self, pid):
        return self.holds(pid) or self.sub_pending(pid)

    def _new_pid(self):
        # 1..65535, wrapping, skipping ids still in use (MQTT-2.3.1-2).
        p = self._last_pid
        for _ in range(65535):
            p = p + 1 if p < 65535 else 1
            if not self._in_use(p):
                self._last_pid = p
                return p
        raise QueueFull(say("no_pid"))


def open_store(store):
    """store= of the client: None (messages in RAM), a directory path (FileStore),
    a block device such as an esp32.Partition (RingStore), or a store object."""
    if store is None or hasattr(store, "open"):
        return store
    if isinstance(store, str):
        from .filestore import FileStore
        return FileStore(store)
    if hasattr(store, "readblocks"):
        from .ringstore import RingStore
        return RingStore(store)
    raise ValueError(say("store_arg"))


def backoff(prev, lo, hi, rnd16):
    """Reconnect delay after `prev` ms (0: first try) -> (delay, wait): the delay
    doubles from lo to hi ms; the wait is 50..100 % of it (rnd16: 16 random bits),
    so a fleet that lost its broker does not come back in step."""
    d = prev * 2 if prev else lo
    if d > hi:
        d = hi
    return d, d // 2 + rnd16 * (d // 2) // 65536


def to_bytes(x):
    """str as UTF-8 bytes; bytes (and None) as they are."""
    return x.encode("utf-8") if isinstance(x, str) else x


def say(key, *values):
    """The text of the client's error `key` (fleetwire.reasons, loaded now, not at import)."""
    try:
        from .reasons import TEXT
        from .codec.reasons import text
        return text(key, values, TEXT)
    except MemoryError:  # no room for the table: the key still says what broke
        return key


# ---- the clients' common part

class Front:
    """What MQTTClient and AsyncClient share, all of it without I/O or a clock: the
    options, the Session and its event callbacks, and the bookkeeping of a link
    that went down (the backoff, and the clash-of-ids count behind SessionTakenOver)."""

    def __init__(self, client_id, server, port, user, password, keepalive, ssl, max_inflight,
                 queue_size, max_packet, max_subscriptions, drop_oldest, timeout, reconnect,
                 backoff_min, backoff_max, takeover_kicks, store):
        self.server = server
        self.port = port or (8883 if ssl else 1883)
        self.ssl = ssl
        self.timeout_ms = int(timeout * 1000)
        s = Session(to_bytes(client_id), keepalive, True, max_inflight, queue_size, max_packet,
                    max_subscriptions, drop_oldest, self.timeout_ms, open_store(store))
        s.set_login(user, password)
        s.on_message = self._message
        s.on_delivered = self._delivered
        s.on_suback = self._suback
        s.on_connack = self._connack
        s.on_discarded = self._discarded
        self._s = s
        self.cb = None
        # Event callbacks, all optional: on_connect(session_present),
        # on_disconnect(reason), on_delivered(pid), on_discarded(topic, msg, qos),
        # on_reconnect(attempt, delay_ms) before each wait.
        self.on_connect = None
        self.on_disconnect = None
        self.on_delivered = None
        self.on_discarded = None
        self.on_reconnect = None
        # Automatic reconnect (off by default, as umqtt.simple): backoff from
        # backoff_min s doubling to backoff_max s, with jitter so a fleet does not
        # return in step; back to backoff_min after a connection that stayed up 60 s.
        self.reconnect = reconnect
        self.backoff_min = int(backoff_min * 1000)
        self.backoff_max = int(backoff_max * 1000)
        self.takeover_kicks = takeover_kicks
        self._delay = 0          # last backoff delay, ms (0: none)
        self._attempt = 0
        self._up_at = -1         # ticks of the last CONNACK, -1 if never connected
        self._kicks = 0          # broker closed us soon after CONNACK, in a row
        self._eof = False        # the broker closed the connection (FIN), not a reset or a timeout
        self._clean = True

    def set_callback(self, f):
        """f(topic, msg) is called with bytes for every message received."""
        self.cb = f

    def set_last_will(self, topic, msg, retain=False, qos=0):
        if not 0 <= qos <= 2:
            raise ValueError(say("qos"))
        if not topic:
            raise ValueError(say("will_topic"))
        self._s.will = (to_bytes(topic), to_bytes(msg), qos, bool(retain))

    def is_connected(self):
        return self._s.state == CONNECTED

    @property
    def pending(self):
        """Messages accepted and not yet completed (queued, in the store, in flight)."""
        s = self._s
        return s.pending + s.inflight + (s.store.backlog if s.store is not None else 0)

    @property
    def inflight(self):
        return self._s.inflight

    @property
    def store(self):
        """The opened message store, None without one (its `backlog`: messages held in flash)."""
        return self._s.store

    @property
    def dropped(self):
        return self._s.dropped

    def in_flight(self, pid):
        """True while the message with packet id pid is queued or awaiting its acknowledgement."""
        return self._s.holds(pid)

    def _went_down(self, now):
        # A connection that had its CONNACK is gone.
        up = ticks_diff(now, self._up_at)
        # Closed by the broker soon after CONNACK: a sign of a client id clash. A reset
        # or a timeout is the network's doing; a clean close (FIN) is the broker's.
        if self._eof and up < 60000:
            self._kicks += 1
        else:
            self._kicks = 0
        if up >= 60000:
            self._delay = 0  # it stayed up: start the backoff over
            self._attempt = 0

    # ---- session events

    def _delivered(self, pid):
        if self.on_delivered:
            self.on_delivered(pid)

    def _connack(self, present):
        self._up_at = self._s.last_in  # when the CONNACK came
        if self.on_connect:
            self.on_connect(present)

    def _discarded(self, topic, msg, qos):
        if self.on_discarded:
            self.on_discarded(topic, msg, qos)


def _ignore(*a):
    pass


def _ignore1(a):
    pass


def _ignore0():
    pass
