# MQTT 5 for the device client, loaded only by a program that asks for it:
#     from fleetwire.v5 import MQTTClient        (fleetwire.aio5.AsyncClient for asyncio)
# A 3.1.1 program never imports this module, and session.py and client.py hold no MQTT 5
# code: this one overrides the few Session methods whose packets differ and hands the rest
# to them (tests/device/test_loading.py; bench/heap.py's fw+v5 program). What a connection
# does once (CONNECT, CONNACK) and the wording of errors are in v5x.py, loaded for that call
# and let go after: a connected board holds this module and the codec's wire5 only.
#
# What differs on the wire, and where it is done:
#   CONNECT     start() -> v5x: level 5 and a property block (Receive Maximum, Session
#               Expiry, Maximum Packet Size), packed by the codec's pack5.
#   CONNACK     v5x.connack(): a reason code and properties; the broker's Receive Maximum
#               caps the window, its Server Keep Alive, Assigned Client Identifier, Session
#               Expiry and Maximum Packet Size hold for the connection.
#   PUBLISH     out: wire5.put_publish (an empty property block after the packet id). In:
#               its property block checked (wire5), then its topic and packet id moved up
#               over the block where they lie in the receive buffer, and the 3.1.1 path
#               takes it as it stands (long messages in pieces, QoS 2, the callback).
#   SUBSCRIBE, UNSUBSCRIBE: 3.1.1's packet with an empty property block put in after its
#               packet id (a 3.1.1 QoS byte is MQTT 5's options byte with no option set).
#   acks        the short forms (what a broker sends on success) go to the 3.1.1 path; a
#               longer one carries a reason code: a PUBACK or PUBREC code of 0x80 or more
#               ends the flow as refused (on_refused(pid, code); a blocking publish raises
#               PublishRefused).
#   SUBACK      a reason code per filter: a refusal keeps its code (SubscribeRefused.code).
#   DISCONNECT  from the broker: Disconnected(code, text) ends the link (on_disconnect).
# Disconnected and PublishRefused are errkinds5.py's, loaded with the first one raised (a
# 3.1.1 program's errkinds.py is as it was); fleetwire.v5 names them too.
try:
    from micropython import const
except ImportError:
    from .cpython import const

from .session import Session, fw
from .codec import wire5
from .codec.wire import CodecError
from . import say

# errors, by their line in reasons.TEXT (say) or v5x.TEXT (word)
_MALFORMED = const(20)
_SUBACK_CNT = const(26)
_STRAY_ACK = const(27)
_SUB_REF_5 = const(2)
_PUB_REF_5 = const(3)
_SRV_DISC_5 = const(4)
_TOO_BIG_5 = const(5)
_ALIAS_5 = const(7)
_NO_STORE_5 = const(9)
_NOT_CONN = const(10)

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

CONNECTING = const(1)
CONNECTED = const(2)

_BLOCK = const(64)  # a slot's flag: its payload begins with its property block
_S_SUBACK = const(2)
_S_UNSUBACK = const(4)


class Session5:
    """The Session's methods whose packets differ in MQTT 5, for a front to put before its
    own class: MQTTClient here, AsyncClient in aio5.py."""

    on_refused = None  # on_refused(pid, code): a PUBACK or PUBREC refused message pid
    session_expiry = props = None  # props: the message's property block, in the callback
    _smax = 0  # the broker's Maximum Packet Size, 0: none
    _rf = 0  # the last message or subscription refused: its pid | its reason code << 16
    _cut = None  # the head of a long message, while a read has cut its property block

    def _asked(self, keepalive, session_expiry, options):
        # what the program asked for; a CONNACK may change them for its connection
        self._ask = (keepalive, self.max_inflight, session_expiry, options.get("max_packet", 0))

    def _fits(self, topic, n, qos):
        # a publish of n bytes after its packet id (payload and property block): within the
        # broker's Maximum Packet Size (MQTT-3.1.2-24); no refusal yet
        self._rf = 0
        if self._smax:
            t = topic.encode() if isinstance(topic, str) else topic
            n += 2 + len(t) + (2 if qos else 0)
            n += 1 + (1 if n < 128 else 2 if n < 16384 else 3 if n < 2097152 else 4)
            if n > self._smax:
                raise ValueError(word(_TOO_BIG_5, n, self._smax))

    def _done(self, pid):
        # a publish that waited: pid, or PublishRefused if the broker refused it
        if pid and self._rf & 0xFFFF == pid:
            c = self._rf >> 16
            from .errkinds5 import PublishRefused

            raise PublishRefused(c, word(_PUB_REF_5, pid, (_PUBACK, c)))
        return pid

    def encode_props(self, pairs):
        """A PUBLISH property block for publish(props=), from (identifier, value) pairs: a
        value is an int, bytes for a string or binary data (Response Topic 0x08, Correlation
        Data 0x09, Content Type 0x03), a (name, value) pair of bytes for a User Property
        (0x26). Checked as the broker checks it (ValueError); made once, it goes with as many
        messages as the program likes. v5x.py and the codec's pack5 are loaded for the call."""
        from . import v5x

        try:
            return v5x.encode_props(pairs)
        finally:
            drop("v5x")

    def _queue5(self, topic, msg, qos, retain):
        # Session.publish() of a message whose payload begins with its property block: its
        # slot (the last, no store in MQTT 5) says so (_BLOCK), for _put
        pid = Session.publish(self, topic, msg, qos, retain)
        self._f[self._slot(self._n - 1)] |= _BLOCK
        return pid

    def _sub_refused(self, topic):
        # the SubscribeRefused of a refused subscription, its reason code in .code
        c = self._rf >> 16
        e = fw.SubscribeRefused(word(_SUB_REF_5, topic, (_SUBACK, c)))
        e.code = c
        return e

    def properties(self):
        """In the message callback: the message's properties, [(identifier, value)] in their
        order: an int, bytes for a string or binary data (Response Topic 0x08, Correlation
        Data 0x09, Content Type 0x03), a (name, value) pair of bytes for a User Property
        (0x26). Decoded on this call (v5x.py, loaded for it)."""
        from . import v5x

        try:
            return v5x.properties(self.props)
        finally:
            drop("v5x")

    def start(self, now):
        from . import v5x  # held until CONNACK

        return v5x.start(self, now)

    def pack_qos0(self, topic, msg, retain):
        return 0  # (MQTTClient's QoS 0 path past the queue: 3.1.1's only, for now)

    def _put(self, s, f, dup):
        t = self._t[s]
        if t is None:
            return Session._put(self, s, f, dup)  # a stored message (3.1.1 only, for now)
        self._fit(len(t) + 10)
        m = self._m[s]
        n = wire5.put_publish(self.tx, t, m, f & 3, f & 4, dup, self._p[s], b"" if f & _BLOCK else b"\x00")
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
            self._fit(n + 2)  # (a long filter: grown once, as the 3.1.1 client does)
            tx = self.tx
            i = wire5.wire.header(tx, tx[0], n - k + 1)
            tx[i : i + 2] = body[:2]
            tx[i + 2] = 0
            tx[i + 3 : i + 1 + len(body)] = body[2:]
            n = i + 1 + len(body)
        return n

    def _publish5(self, first, i, n):
        # An MQTT 5 PUBLISH made a 3.1.1 one where it lies: its properties checked, then its
        # topic and packet id moved up over them (Session.received has those two in _rb). A
        # message longer than max_packet comes in pieces: when a read cut its property block,
        # the head so far is kept (_cut) until the block is whole (_publish_in)
        b = self._rb
        e = min(i + n, self._re)
        k = i + 2 + (b[i] << 8 | b[i + 1] if n >= 2 else 0) + (2 if first & 6 else 0)
        if k >= i + n:
            raise fw.ProtocolError(say(_MALFORMED, "PUBLISH without its property length"))
        if i + n > e:
            x = head(b, k, e)
            if not x or x > e:
                self._cut = bytearray(self._rmv[i:e])
                self._cf = first << 24 | n  # its first byte and its length
                self.rest = i + n - e
                self._lp = 0  # (no QoS 2 id of this one's for lost() to forget yet)
                return
        try:
            x = wire5.check_props(_PUBLISH | _BY_SERVER, b, k, e)
        except CodecError as err:
            raise fw.ProtocolError(say(_MALFORMED, err))
        d = x - k
        self.props = None
        if d > 1:
            if wire5.prop(b, k, 0x23) >= 0:  # Topic Alias Maximum is 0 (none asked)
                raise fw.ProtocolError(word(_ALIAS_5))
            self.props = bytes(b[k:x])  # for the callback (properties())
        m = self._rmv
        m[i + d : k + d] = m[i:k]
        Session._publish_in(self, first, i + d, n - d)

    def _publish_in(self, first, i, n):
        # more of a message longer than max_packet (Session.received): while a read has cut
        # its head, v5x.cut() keeps it until its property block is whole (rare: loaded for it)
        if self._cut is None or first:
            return Session._publish_in(self, first, i, n)
        from . import v5x

        try:
            v5x.cut(self, i, n)
        finally:
            drop("v5x")

    def _handle(self, first, i, n):
        t = first >> 4
        if t == _PUBLISH:
            self._cut = None
            return self._publish5(first, i, n)
        if t == 13 or t >= _PUBACK and t <= _PUBCOMP and n == 2 or self.state == CONNECTING and t != _CONNACK:
            return Session._handle(self, first, i, n)  # PINGRESP, the acks' short forms (or raises)
        v = self._rmv[i : i + n]
        if t == _CONNACK and self.state == CONNECTING:
            from . import v5x

            try:
                return v5x.connack(self, v, n)
            finally:
                drop("v5x")
        try:
            if t == _SUBACK or t == _UNSUBACK:
                c = wire5.suback(t, v, n)
            elif t == _DISCONNECT:
                c = wire5.reason(t, v, n)
            elif t >= _PUBACK and t <= _PUBCOMP:
                c = wire5.ack(t, v, n)
            else:
                return Session._handle(self, first, i, n)  # (raises: unexpected)
        except CodecError as e:
            raise fw.ProtocolError(say(_MALFORMED, e))
        if t == _SUBACK or t == _UNSUBACK:
            if n - c != 1:  # one reason code per filter, and a SUBSCRIBE carries one
                raise fw.ProtocolError(say(_SUBACK_CNT, n - c))
            if t == _SUBACK:
                self._rf = v[0] << 8 | v[1] | v[c] << 16
                self._acked(v[0] << 8 | v[1], _S_SUBACK, v[c])
            else:
                self._acked(v[0] << 8 | v[1], _S_UNSUBACK, 0)
        elif t == _DISCONNECT:
            from .errkinds5 import Disconnected

            raise Disconnected(c, word(_SRV_DISC_5, (t, c, v, 1)))
        else:
            pid = c & 0xFFFF
            c >>= 16
            if c > 127 and t < _PUBREL:  # the broker refused the message: its flow ends
                from . import v5x

                try:
                    v5x.refused(self, pid, c, t)
                finally:
                    drop("v5x")
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


def head(b, k, e):
    # the end of the property block at b[k] (b[:e] received), or 0 while its length is cut
    j = k
    while j < e and j < k + 4:
        if b[j] < 128:
            return j + 1 + wire5.vbi(b, k, e)
        j += 1
    if j < k + 4:
        return 0
    return wire5.vbi(b, k, e)  # (raises: a length of more than 4 bytes)


def word(key, *values):
    # an MQTT 5 error's text (v5x.word)
    from . import v5x

    try:
        return v5x.word(key, *values)
    finally:
        drop("v5x")


def drop(name):
    """Let go of fleetwire.NAME or fleetwire.codec.NAME, loaded for one call (the names it
    interned stay: about 250 bytes for the codec's pack5)."""
    import sys

    p = __import__(__name__.rpartition(".")[0], None, None, ["_"])
    if name != "v5x":
        p = p.codec
    sys.modules.pop(p.__name__ + "." + name, None)
    try:
        delattr(p, name)
    except Exception:  # (gone already: MicroPython says KeyError)
        pass


def __getattr__(name):
    # MQTTClient, made on first use: an asyncio program (aio5.py) takes Session5 from here
    # and loads no client.py; MQTT 5's error classes, from errkinds5.py
    if name != "MQTTClient":
        from . import errkinds5

        try:
            return getattr(errkinds5, name)
        except AttributeError:
            raise AttributeError(name)
    from . import client

    class MQTTClient(Session5, client.MQTTClient):
        """MQTTClient(client_id, server, port=0, user=None, password=None, keepalive=0, ssl=None,
        ssl_params=None, session_expiry=None, **options): fleetwire.MQTTClient speaking MQTT 5
        (version=5 is accepted and changes nothing). session_expiry (seconds) is asked for in
        CONNECT; None asks for 3.1.1's behaviour (0 for a clean session, never for a kept one);
        once connected it holds the broker's answer. max_packet, when given, is sent to the
        broker as the client's Maximum Packet Size."""

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
            if options.get("store") is not None:  # (its records are 3.1.1 packets)
                raise ValueError(word(_NO_STORE_5))
            client.MQTTClient.__init__(
                self, client_id, server, port, user, password, keepalive, ssl, ssl_params, **options
            )
            self._asked(keepalive, session_expiry, options)

        def publish(self, topic, msg, retain=False, qos=0, *, block=True, props=None):
            """As fleetwire.MQTTClient's; props: a property block from encode_props(), sent
            with the message. A blocking QoS 1/2 publish raises PublishRefused if the broker
            refuses the message (block=False: on_refused(pid, code) says so)."""
            if props is None:
                self._fits(topic, len(msg) + 1, qos)
                pid = client.MQTTClient.publish(self, topic, msg, retain, qos, block=block)
                return self._done(pid) if block else pid
            if block and self.state != CONNECTED and not self.reconnect:
                raise fw.NotConnected(say(_NOT_CONN))
            msg = props + (msg.encode() if isinstance(msg, str) else msg)
            self._fits(topic, len(msg), qos)
            pid = self._queue5(topic, msg, qos, retain)
            self._write()
            if block:
                if qos:
                    self._wait(2, pid, self.timeout_ms)
                elif self.sock and (self._queued or self._txo < self._txn):
                    self._wait(3, 0, self.timeout_ms)
                return self._done(pid)
            return pid

        def subscribe(self, topic, qos=0):
            """Subscribe and wait for SUBACK -> the QoS granted; SubscribeRefused (args[1]: the
            reason code in .code) if refused."""
            try:
                return client.MQTTClient.subscribe(self, topic, qos)
            except fw.SubscribeRefused:
                raise self._sub_refused(topic)

    globals()[name] = MQTTClient
    return MQTTClient
