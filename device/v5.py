# MQTT 5 for the device client, loaded only by a program that asks for it:
#     from fleetwire.v5 import MQTTClient        (or fleetwire.MQTTClient(..., version=5))
# A 3.1.1 program never imports this module, and session.py and client.py hold no MQTT 5
# code: this one overrides the few Session methods whose packets differ and hands the rest
# to them (tests/device/test_loading.py, bench/heap.py's fw+v5 program).
#
# What differs on the wire, and where it is done here:
#   CONNECT     start(): level 5 and a property block (Receive Maximum, Session Expiry,
#               Maximum Packet Size), packed by the codec's pack5, loaded for the call.
#   CONNACK     _handle(): a reason code and properties; the broker's Receive Maximum caps
#               the window, its Server Keep Alive, Assigned Client Identifier, Session
#               Expiry and Maximum Packet Size are taken for this connection.
#   PUBLISH     out: wire5.put_publish (an empty property block after the packet id). In:
#               its property block is checked (wire5), then the topic and packet id are
#               moved up over it in the receive buffer, and the 3.1.1 path takes the packet
#               as it stands (long messages in pieces, QoS 2, the callback), allocating
#               nothing more than it does.
#   SUBSCRIBE, UNSUBSCRIBE: the 3.1.1 packet with an empty property block put in after
#               its packet id (a 3.1.1 QoS byte is MQTT 5's options byte with no option set).
#   acks        the short forms (the most a broker sends) go to the 3.1.1 path; a longer one
#               carries a reason code: a PUBACK or PUBREC code of 0x80 or more ends the flow
#               as refused (on_refused(pid, code); a blocking publish raises PublishRefused).
#   SUBACK      a reason code per filter: a refusal keeps its code (SubscribeRefused.args[1]).
#   DISCONNECT  from the broker: Disconnected(code, text) ends the link (on_disconnect).
# Texts (reason names, reason strings) are made only when an error is raised.
try:
    from micropython import const
except ImportError:
    from .cpython import const

from .client import MQTTClient as _Client
from .session import Session, fw
from .codec import wire5
from .codec.wire import CodecError
from . import MQTTException, say

# errors, by their line in reasons.TEXT
_MALFORMED = const(20)
_NO_CB = const(11)
_STRAY_ACK = const(27)
_SUBACK_CNT = const(26)
_REFUSED5 = const(39)
_SUB_REFUSE5 = const(40)
_PUB_REFUSE = const(41)
_SRV_DISC = const(42)
_TOO_BIG5 = const(43)
_PROPS_CUT = const(44)
_ALIAS_IN = const(45)
_NOT_V5 = const(46)

# packet types
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
_DISCONNECT = const(14)
_BY_SERVER = const(0x10)

DISCONNECTED = const(0)
CONNECTING = const(1)
CONNECTED = const(2)

_WRITTEN = const(16)
_STATE = const(24)
_S_SUBACK = const(2)
_S_UNSUBACK = const(4)


class MQTTClient(_Client):
    """MQTTClient(client_id, server, port=0, user=None, password=None, keepalive=0, ssl=None,
    ssl_params=None, session_expiry=None, **options): fleetwire.MQTTClient speaking MQTT 5.
    session_expiry (seconds) is asked for in CONNECT; None asks for 3.1.1's behaviour (0 for
    a clean session, never for a kept one); session_expiry then holds the broker's answer.
    max_packet, when given, is advertised to the broker (Maximum Packet Size)."""

    on_refused = None  # on_refused(pid, code): a PUBACK or PUBREC refused message pid
    session_expiry = None
    _smax = 0  # the broker's Maximum Packet Size, 0: none
    _rf = 0  # the last message refused: its pid | its reason code << 16

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
        session_expiry=None,
        version=5,
        **options,
    ):
        # (a password without a user name is MQTT 5's to allow: set after 3.1.1's check)
        _Client.__init__(self, client_id, server, port, user, None, keepalive, ssl, ssl_params, **options)
        self.password = password.encode() if isinstance(password, str) else password
        # what the program asked for; a CONNACK may change them for its connection
        self._ask = (keepalive, self.max_inflight, session_expiry, options.get("max_packet", 0))

    # ---- the program's calls

    def publish(self, topic, msg, retain=False, qos=0, *, block=True):
        if self._smax:  # the broker's limit: a packet over it must not be sent (MQTT-3.1.2-24)
            t = topic.encode() if isinstance(topic, str) else topic
            n = 3 + len(t) + (2 if qos else 0) + len(msg)
            n += 1 + (1 if n < 128 else 2 if n < 16384 else 3 if n < 2097152 else 4)
            if n > self._smax:
                raise ValueError(say(_TOO_BIG5, n, self._smax))
        self._rf = 0
        pid = _Client.publish(self, topic, msg, retain, qos, block=block)
        if block and pid and self._rf & 0xFFFF == pid:
            raise fw.PublishRefused(self._rf >> 16, say(_PUB_REFUSE, pid, _reason(_PUBACK, self._rf >> 16)))
        return pid

    def subscribe(self, topic, qos=0):
        """Subscribe and wait for SUBACK -> the QoS granted; SubscribeRefused (args[1]: the
        reason code) if refused."""
        if self.cb is None:
            raise MQTTException(say(_NO_CB))
        self._fit(len(topic) + 12)  # (room for the property block)
        pid = Session.subscribe(self, topic, qos)
        try:
            self._wait(4, pid, self.timeout_ms)
        except Exception:
            self.forget(pid)  # it failed and the program knows: not made again behind its back
            raise
        rc = self.sub_result(pid)
        if rc & 0x80:
            raise fw.SubscribeRefused(say(_SUB_REFUSE5, topic, _reason(_SUBACK, rc)), rc)
        return rc

    def unsubscribe(self, topic):
        self._fit(len(topic) + 12)
        _Client.unsubscribe(self, topic)

    # ---- the Session's methods whose packets differ in MQTT 5

    def start(self, now):
        from .codec import pack5  # CONNECT's packer: held only while it packs

        try:
            return self._start(now, pack5)
        finally:
            _drop("pack5")

    def _start(self, now, pack5):
        if not self.clean_session:
            self.need_qos2()  # the session kept may hold QoS 2 flows either way
        if self._up_at >= 0 and not self._rn:
            from . import renew

            self._rn = renew
        ka, mi, se, mp = self._ask
        self.keepalive = ka
        self.max_inflight = mi
        self._smax = 0
        if se is None:
            se = 0 if self.clean_session else 0xFFFFFFFF
        self.session_expiry = se  # unless CONNACK says otherwise
        # Receive Maximum: what the ack queue holds (room()), so a broker never sends more
        # QoS 1/2 messages than the board can acknowledge at once
        p = [(0x21, len(self._fl) - len(self._sf))]
        if se:
            p.append((0x11, se))
        if mp:
            p.append((0x27, mp))
        b = bytearray(pack5.props_size(p))
        pack5.put_props(b, 0, 1, p)
        w = self.will or (None, None, 0, False)
        n = 20 + len(b) + len(self.client_id)
        for f in (w[0], w[1], self.username, self.password):
            if f is not None:
                n += 2 + len(f)
        self._fit(n)
        self.tail = None
        try:
            n = pack5.pack_connect(
                self.tx,
                self.client_id,
                self.clean_session,
                ka,
                b,
                w[0],
                w[1],
                w[2],
                w[3],
                b"\x00",
                self.username,
                self.password,
            )
        except CodecError as e:
            raise ValueError(str(e))
        self.state = CONNECTING
        self._ping_at = -1
        self._fh = self._fc = self._rp = self._re = 0
        self.last_in = self.last_out = now
        return n

    def pack_qos0(self, topic, msg, retain):
        if (
            self.state != CONNECTED
            or self._c != self._n
            or self._fc
            or self._ping_at == -2
            or type(topic) is not bytes
            or len(topic) + 8 > len(self.tx)
            or len(topic) + len(msg) + 8 > self.max_packet
        ):
            return 0
        if topic is not self._pub_topic:
            wire5.wire.check_name(topic)
            self._pub_topic = topic
        n = wire5.put_publish(self.tx, topic, msg, 0, retain, False, 0)
        self.tail = msg if n > len(self.tx) else None
        return n

    def _put(self, s, f, dup):
        t = self._t[s]
        if t is None:
            return Session._put(self, s, f, dup)  # a stored message: see the store (3.1.1 only)
        self._fit(len(t) + 10)
        m = self._m[s]
        n = wire5.put_publish(self.tx, t, m, f & 3, f & 4, dup, self._p[s])
        if n > len(self.tx):
            self.tail = m
        return n

    def pack(self, now):
        n = Session.pack(self, now)
        tx = self.tx
        if n and (tx[0] >> 4 == _SUBSCRIBE or tx[0] >> 4 == _UNSUBSCRIBE):
            # 3.1.1's SUBSCRIBE or UNSUBSCRIBE: an empty property block after the packet id
            k = 2 if tx[1] < 128 else 3 if tx[2] < 128 else 4
            body = bytes(tx[k:n])
            i = wire5.wire.header(tx, tx[0], n - k + 1)
            tx[i : i + 2] = body[:2]
            tx[i + 2] = 0
            tx[i + 3 : i + 1 + len(body)] = body[2:]
            n = i + 1 + len(body)
        return n

    def _handle(self, first, i, n):
        t = first >> 4
        if t == _PUBLISH:
            return self._publish5(first, i, n)
        if t == 13 or (t == _PUBACK or t == _PUBREC or t == _PUBREL or t == _PUBCOMP) and n == 2:
            return Session._handle(self, first, i, n)  # the short forms: 3.1.1's
        if self.state == CONNECTING and t != _CONNACK:
            return Session._handle(self, first, i, n)  # (raises)
        v = self._rmv[i : i + n]
        if t == _CONNACK and n == 2 and 0 < v[1] < 6 and not v[0]:
            # 3.1.1's refusal (1: unacceptable protocol version; aedes, a 3.1.1 broker)
            self.state = DISCONNECTED
            raise fw.ConnectRefused(0x84, say(_NOT_V5, v[1]))
        try:
            if t == _CONNACK and self.state == CONNECTING:
                c = wire5.connack(v, n)
            elif t == _SUBACK or t == _UNSUBACK:
                c = wire5.suback(t, v, n)
            elif t == _DISCONNECT:
                c = wire5.reason(t, v, n)
            elif t >= _PUBACK and t <= _PUBCOMP:
                c = wire5.ack(t, v, n)
            else:
                return Session._handle(self, first, i, n)  # (raises: unexpected)
        except CodecError as e:
            raise fw.ProtocolError(say(_MALFORMED, e))
        if t == _CONNACK:
            if c & 255:
                self.state = DISCONNECTED
                raise fw.ConnectRefused(c & 255, say(_REFUSED5, _reason(t, c & 255, v, 2)))
            self._connack(v)
            self.state = CONNECTED
            self.session_present = c = c > 255
            self._up_at = self.last_in
            if self._rn:
                self._rn.renew(self, c)
            self._wake()
            if self.on_connect:
                self.on_connect(c)
        elif t == _SUBACK or t == _UNSUBACK:
            if n - c != 1:  # one reason code per filter, and a SUBSCRIBE carries one
                raise fw.ProtocolError(say(_SUBACK_CNT, n - c))
            if t == _SUBACK:
                self._acked(v[0] << 8 | v[1], _S_SUBACK, v[c])
            else:
                self._acked(v[0] << 8 | v[1], _S_UNSUBACK, 0)
        elif t == _DISCONNECT:
            raise fw.Disconnected(c, say(_SRV_DISC, _reason(t, c, v, 1)))
        else:
            pid = c & 0xFFFF
            c >>= 16
            if c > 127 and t < _PUBREL:  # the broker refused the message: its flow ends
                self._refused(pid, c, t)
            elif t == _PUBACK:
                self._complete(pid, t)
            elif self._q2:
                self._q2.ack(self, t, pid)
            elif t == _PUBREC:
                self._flow(_PUBREL, pid)
            elif t == _PUBREL:
                self._flow(_PUBCOMP, pid)
            else:
                raise fw.ProtocolError(say(_STRAY_ACK, t, pid))

    def _connack(self, v):
        # what the broker's CONNACK properties say for this connection
        k = wire5.props_start(v, 2)
        e = wire5.props_end(v, 2)
        while k < e:
            p = v[k]
            if p == 0x21:  # Receive Maximum: caps the window
                self.max_inflight = min(self.max_inflight, wire5.u16(v, k + 1))
            elif p == 0x13:  # Server Keep Alive
                self.keepalive = wire5.u16(v, k + 1)
            elif p == 0x12:  # Assigned Client Identifier: the one to come back with
                self.client_id = bytes(v[k + 3 : k + 3 + wire5.u16(v, k + 1)])
            elif p == 0x11:  # Session Expiry Interval: the broker's wins
                self.session_expiry = wire5.u32(v, k + 1)
            elif p == 0x27:  # Maximum Packet Size
                self._smax = wire5.u32(v, k + 1)
            k = wire5.next_prop(v, k)

    def _refused(self, pid, c, t):
        # PUBACK or PUBREC with a code of 0x80 or more: message pid is complete, not delivered
        for k in range(self._n):
            s = self._slot(k)
            if self._p[s] == pid and self._f[s] & _STATE == _WRITTEN:
                self._release(s)
                self._advance()
                self._rf = pid | c << 16
                self._wake()
                if self.on_refused:
                    self.on_refused(pid, c)
                return
        raise fw.ProtocolError(say(_STRAY_ACK, t, pid))

    def _publish5(self, first, i, n):
        # An MQTT 5 PUBLISH made a 3.1.1 one where it lies: its properties checked, then its
        # topic and packet id moved up over them (Session.received has them all in _rb)
        b = self._rb
        e = min(i + n, self._re)
        k = i + 2 + (b[i] << 8 | b[i + 1] if n >= 2 else 0) + (2 if first & 6 else 0)
        if k < e:
            try:
                x = wire5.check_props(_PUBLISH | _BY_SERVER, b, k, e)
            except CodecError as err:
                if i + n <= e:
                    raise fw.ProtocolError(say(_MALFORMED, err))
                raise fw.ProtocolError(say(_PROPS_CUT))
            d = x - k
            if d > 1 and wire5.prop(b, k, 0x23) >= 0:  # Topic Alias Maximum is 0 (none asked)
                raise fw.ProtocolError(say(_ALIAS_IN))
            m = self._rmv
            m[i + d : k + d] = m[i:k]
            i += d
            n -= d
        elif k >= i + n:
            raise fw.ProtocolError(say(_MALFORMED, "PUBLISH without its property length"))
        else:
            raise fw.ProtocolError(say(_PROPS_CUT))
        Session._publish_in(self, first, i, n)


def _drop(name):
    # a codec module used for one call, let go (its names stay interned: about 250 bytes)
    import sys
    from . import codec

    sys.modules.pop(codec.__name__ + "." + name, None)
    try:
        delattr(codec, name)
    except AttributeError:
        pass


def _reason(t, c, b=None, k=0):
    # "name (0xNN)", and the broker's Reason String when the properties at b[k] carry one
    from .codec.reasons5 import reason_name

    r = "%s (reason code 0x%02x)" % (reason_name(c, t), c)
    if b is not None and k < len(b):
        s = wire5.prop(b, k, 0x1F)
        if s >= 0:
            r += ': "%s"' % str(bytes(b[s + 2 : s + 2 + wire5.u16(b, s)]), "utf-8")
    return r
