# The complete MQTT 5 codec: all 15 packet types as objects, encoded and decoded in both
# directions, every field and property checked: packets.py's counterpart, on wire5's
# property block, packers and readers (a client's packets go through the packers a board
# uses, so the vectors test those). The host rig, tests and fake brokers use it. Strings may
# be str here (as UTF-8).
#
# Properties are a dict keyed by the property's name in lower case with "_" for " "
# (reasons5.PROPERTIES): {"topic_alias": 3, "content_type": "text/plain"}. A string is a
# str, binary data bytes, a number an int; "user_property" is a list of (name, value) pairs
# in their order, "subscription_identifier" a list of ints (PUBLISH may carry several).
#
# The sender of a packet is not known to this module: a rule that depends on it (only a
# client sends DISCONNECT 0x04; a client's PUBLISH has no Subscription Identifier) is wire5's
# for the client's side, and here either side's packets are accepted.
try:
    from micropython import const
except ImportError:  # CPython

    def const(x):
        return x


from .errors import CodecError
from .text import encode as _utf8
from . import pack5, stream5, wire, wire5
from .wire5 import ProtocolError, fail5, check_props, prop, utf8
from .reasons5 import NAMES, PROPERTIES, reason_name

MAX_REMAINING = 268435455
CONNECT = 1
CONNACK = 2
PUBLISH = 3
PUBACK = 4
PUBREC = 5
PUBREL = 6
PUBCOMP = 7
SUBSCRIBE = 8
SUBACK = 9
UNSUBSCRIBE = 10
UNSUBACK = 11
PINGREQ = 12
PINGRESP = 13
DISCONNECT = 14
AUTH = 15
WILL = 0  # the will properties, for the property checks
EITHER = 0x30  # sender bits: either side may have sent the packet (wire5)

# property name <-> identifier
PROPERTY_IDS = {}
for _line in PROPERTIES.strip().split("\n"):
    PROPERTY_IDS[_line[3:].lower().replace(" ", "_")] = int(_line[:2], 16)
PROPERTY_NAMES = {v: k for k, v in PROPERTY_IDS.items()}
_STRINGS = (0x03, 0x08, 0x12, 0x15, 0x1A, 0x1C, 0x1F)  # UTF-8 String properties
_BINARY = (0x09, 0x16)
_MANY = ("user_property", "subscription_identifier")


def _b(s, what="string"):
    # str as UTF-8 (a ProtocolError for a lone surrogate), anything else as it is
    if not isinstance(s, str):
        return s
    try:
        return _utf8(s, what)
    except CodecError as e:
        wire5.again(e, 0x81)


def property_pairs(props):
    """A properties dict -> the (identifier, value) pairs pack5.put_props takes, strings as
    UTF-8, by identifier (the order carries no meaning, §2.2.2.2, and a dict has none on
    MicroPython: this one makes the bytes the same on both interpreters)."""
    out = []
    for name, v in sorted((props or {}).items(), key=lambda kv: PROPERTY_IDS.get(kv[0], 0)):
        if name not in PROPERTY_IDS:
            raise CodecError("unknown property %r [§2.2.2.2]" % (name,))
        p = PROPERTY_IDS[name]
        if name in _MANY:
            for x in v:
                out.append((p, (_b(x[0], "user property"), _b(x[1], "user property")) if p == 0x26 else x))
        else:
            out.append((p, _b(v, name) if p in _STRINGS else v))
    return out


def encode_props(t, props):
    """The property block (bytes, its length first) of a properties dict for packet type t
    (WILL for will properties), checked as wire5.check_props checks a received one."""
    pairs = property_pairs(props)
    buf = bytearray(pack5.props_size(pairs))
    return bytes(buf[: pack5.put_props(buf, 0, t | EITHER, pairs)])


def decode_props(t, b, i, n):
    """The property block at b[i] of a packet of type t ending at n -> (properties dict, the
    offset after the block), all checked."""
    end = wire5.check_props(t | EITHER, b, i, n)
    out = {}
    k = wire5.props_start(b, i)
    while k < end:
        p = b[k]
        e = wire5.next_prop(b, k)
        v = k + 1
        name = PROPERTY_NAMES[p]
        if p == 0x26:
            m = v + 2 + wire5.u16(b, v)
            out.setdefault(name, []).append((_s(b, v, m), _s(b, m, e)))
        elif p == 0x0B:
            out.setdefault(name, []).append(wire5.vbi(b, v))
        elif p in _STRINGS:
            out[name] = _s(b, v, e)
        elif p in _BINARY:
            out[name] = bytes(b[v + 2 : e])
        elif e - v == 4:
            out[name] = wire5.u32(b, v)
        elif e - v == 2:
            out[name] = wire5.u16(b, v)
        else:
            out[name] = b[v]
        k = e
    return out, end


def _s(b, i, e):
    # the (checked) string whose length prefix is at b[i] and which ends at e
    return bytes(b[i + 2 : e]).decode("utf-8")


class Packet:
    """An MQTT 5 packet: equal to another of its type with equal FIELDS."""

    TYPE = 0
    FIELDS = ()

    def __eq__(self, other):
        return type(self) is type(other) and all(getattr(self, f) == getattr(other, f) for f in self.FIELDS)

    def __ne__(self, other):
        return not self == other

    def __repr__(self):
        return "%s(%s)" % (
            type(self).__name__,
            ", ".join("%s=%r" % (f, getattr(self, f)) for f in self.FIELDS),
        )

    @property
    def name(self):
        return NAMES[self.TYPE]

    def encode(self):
        buf = bytearray(self._bound())
        return bytes(memoryview(buf)[: self.pack_into(buf)])

    def _bound(self):
        return 8 + len(encode_props(self.TYPE, getattr(self, "properties", None)))


class Connect(Packet):
    TYPE = CONNECT
    FIELDS = (
        "client_id",
        "clean_start",
        "keepalive",
        "properties",
        "will_topic",
        "will_payload",
        "will_qos",
        "will_retain",
        "will_properties",
        "username",
        "password",
    )

    def __init__(
        self,
        client_id="",
        clean_start=True,
        keepalive=60,
        properties=None,
        will_topic=None,
        will_payload=None,
        will_qos=0,
        will_retain=False,
        will_properties=None,
        username=None,
        password=None,
    ):
        self.client_id = client_id
        self.clean_start = clean_start
        self.keepalive = keepalive
        self.properties = properties or {}
        self.will_topic = will_topic
        self.will_payload = will_payload
        self.will_qos = will_qos
        self.will_retain = will_retain
        self.will_properties = will_properties or {}
        self.username = username
        self.password = password

    def pack_into(self, buf):
        return pack5.pack_connect(
            buf,
            _b(self.client_id, "client identifier"),
            self.clean_start,
            self.keepalive,
            encode_props(CONNECT, self.properties),
            _b(self.will_topic, "will topic"),
            _b(self.will_payload, "will payload"),
            self.will_qos,
            self.will_retain,
            encode_props(WILL, self.will_properties),
            _b(self.username, "user name"),
            _b(self.password, "password"),
        )

    def _bound(self):
        n = 32 + len(encode_props(CONNECT, self.properties)) + len(encode_props(WILL, self.will_properties))
        for f in (self.client_id, self.will_topic, self.will_payload, self.username, self.password):
            if f is not None:
                n += 4 * len(f)
        return n


class Connack(Packet):
    TYPE = CONNACK
    FIELDS = ("session_present", "reason_code", "properties")

    def __init__(self, session_present=False, reason_code=0, properties=None):
        self.session_present = session_present
        self.reason_code = reason_code
        self.properties = properties or {}

    @property
    def reason(self):
        return reason_name(self.reason_code, CONNACK)

    def pack_into(self, buf):
        rc = wire5.check_rc(CONNACK | EITHER, self.reason_code)
        if rc > 127 and self.session_present:
            fail5("ack_sp", rc)
        p = encode_props(CONNACK, self.properties)
        i = wire.header(buf, 0x20, 2 + len(p))
        buf[i] = 1 if self.session_present else 0
        buf[i + 1] = rc
        buf[i + 2 : i + 2 + len(p)] = p
        return i + 2 + len(p)


class Publish(Packet):
    TYPE = PUBLISH
    FIELDS = ("topic", "payload", "qos", "retain", "dup", "packet_id", "properties")

    def __init__(self, topic, payload=b"", qos=0, retain=False, dup=False, packet_id=None, properties=None):
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.dup = dup
        self.packet_id = packet_id
        self.properties = properties or {}

    def _bound(self):
        p = self.payload
        return Packet._bound(self) + 8 + 4 * len(self.topic) + (4 * len(p) if isinstance(p, str) else len(p))

    def pack_into(self, buf):
        p = self.payload
        return pack5.pack_publish(
            buf,
            _b(self.topic, "topic"),
            _b(p, "payload"),
            self.qos,
            self.retain,
            self.dup,
            self.packet_id or 0,
            encode_props(PUBLISH, self.properties),
            EITHER,
        )


class _Ack(Packet):
    FIELDS = ("packet_id", "reason_code", "properties")

    def __init__(self, packet_id, reason_code=0, properties=None):
        self.packet_id = packet_id
        self.reason_code = reason_code
        self.properties = properties or {}

    @property
    def reason(self):
        return reason_name(self.reason_code, self.TYPE)

    def pack_into(self, buf):
        return pack5.pack_ack(
            buf,
            self.TYPE | EITHER,
            self.packet_id,
            self.reason_code,
            encode_props(self.TYPE, self.properties),
        )


class Puback(_Ack):
    TYPE = PUBACK


class Pubrec(_Ack):
    TYPE = PUBREC


class Pubrel(_Ack):
    TYPE = PUBREL


class Pubcomp(_Ack):
    TYPE = PUBCOMP


class Subscribe(Packet):
    """topics: (filter, options) pairs, options the byte of §3.8.3.1 (options() builds it)."""

    TYPE = SUBSCRIBE
    FIELDS = ("packet_id", "topics", "properties")

    def __init__(self, packet_id, topics, properties=None):
        self.packet_id = packet_id
        self.topics = [tuple(t) for t in topics]
        self.properties = properties or {}

    def _bound(self):
        return Packet._bound(self) + sum(3 + 4 * len(f) for f, _ in self.topics)

    def pack_into(self, buf):
        return pack5.pack_subscribe(
            buf,
            self.packet_id,
            [(_b(f, "topic filter"), o) for f, o in self.topics],
            encode_props(SUBSCRIBE, self.properties),
        )


def options(qos=0, no_local=False, retain_as_published=False, retain_handling=0):
    """The subscription options byte (§3.8.3.1)."""
    return qos | (4 if no_local else 0) | (8 if retain_as_published else 0) | retain_handling << 4


class Unsubscribe(Packet):
    TYPE = UNSUBSCRIBE
    FIELDS = ("packet_id", "topics", "properties")

    def __init__(self, packet_id, topics, properties=None):
        self.packet_id = packet_id
        self.topics = list(topics)
        self.properties = properties or {}

    def _bound(self):
        return Packet._bound(self) + sum(2 + 4 * len(f) for f in self.topics)

    def pack_into(self, buf):
        return pack5.pack_subscribe(
            buf,
            self.packet_id,
            [_b(f, "topic filter") for f in self.topics],
            encode_props(UNSUBSCRIBE, self.properties),
            UNSUBSCRIBE,
        )


class _Codes(Packet):
    # SUBACK and UNSUBACK: a reason code per topic filter
    FIELDS = ("packet_id", "reason_codes", "properties")

    def __init__(self, packet_id, reason_codes, properties=None):
        self.packet_id = packet_id
        self.reason_codes = list(reason_codes)
        self.properties = properties or {}

    @property
    def reasons(self):
        return [reason_name(c, self.TYPE) for c in self.reason_codes]

    def _bound(self):
        return Packet._bound(self) + 8 + len(self.reason_codes)

    def pack_into(self, buf):
        t = self.TYPE
        if not 0 < self.packet_id < 65536:
            fail5("pid_range", t, self.packet_id)
        if not self.reason_codes:
            fail5("no_codes", t)
        for c in self.reason_codes:
            wire5.check_rc(t | EITHER, c)
        p = encode_props(t, self.properties)
        i = wire.header(buf, t << 4, 2 + len(p) + len(self.reason_codes))
        buf[i] = self.packet_id >> 8
        buf[i + 1] = self.packet_id & 255
        i += 2
        buf[i : i + len(p)] = p
        i += len(p)
        for c in self.reason_codes:
            buf[i] = c
            i += 1
        return i


class Suback(_Codes):
    TYPE = SUBACK


class Unsuback(_Codes):
    TYPE = UNSUBACK


class _Empty(Packet):
    def pack_into(self, buf):
        return wire.pack_empty(buf, self.TYPE)


class Pingreq(_Empty):
    TYPE = PINGREQ


class Pingresp(_Empty):
    TYPE = PINGRESP


class _Reason(Packet):
    # DISCONNECT and AUTH: a reason code and properties, both omitted when there are none
    FIELDS = ("reason_code", "properties")

    def __init__(self, reason_code=0, properties=None):
        self.reason_code = reason_code
        self.properties = properties or {}

    @property
    def reason(self):
        return reason_name(self.reason_code, self.TYPE)

    def pack_into(self, buf):
        return pack5.pack_reason(
            buf, self.TYPE | EITHER, self.reason_code, encode_props(self.TYPE, self.properties)
        )


class Disconnect(_Reason):
    TYPE = DISCONNECT


class Auth(_Reason):
    TYPE = AUTH


# ---- decoding


# ---- readers moved here from wire5 (a board's client uses neither)

_PUBLISH = const(3)
_ALIAS = const(0x23)
_SHORT = const(22 | 0x81 << 8)
_CUT = const(27 | 0x81 << 8)
_NO_TOPIC = const(28 | 0x82 << 8)
_PUB_WILD = const(31 | 0x90 << 8)
_PID0 = const(24 | 0x82 << 8)


def string_end(b, i, end):
    """The end of the length-prefixed string at b[i], its UTF-8 checked; -1 if it does not end
    by end."""
    if i + 2 > end:
        return -1
    e = i + 2 + (b[i] << 8 | b[i + 1])
    if e > end:
        return -1
    utf8(b, i + 2, e)
    return e


def publish(first, b, n, who=0x10):
    """PUBLISH body -> the offset of its payload. The topic is b[2:2 + u16(b, 0)] (empty when a
    Topic Alias stands for it), then the packet identifier if QoS > 0, then the properties."""
    if n < 3:
        fail5(_SHORT, _PUBLISH, n)
    te = 2 + (b[0] << 8 | b[1])
    i = te + (2 if first & 6 else 0)
    if i >= n:
        fail5(_CUT, _PUBLISH, "topic")
    if utf8(b, 2, te) < te:
        fail5(_PUB_WILD)
    if first & 6 and not b[te] | b[te + 1]:
        fail5(_PID0, _PUBLISH)
    ps = check_props(_PUBLISH | who, b, i, n)
    if te == 2 and prop(b, i, _ALIAS) < 0:
        fail5(_NO_TOPIC)
    return ps


def _string(b, i, n, key, t):
    # a length-prefixed UTF-8 string at b[i] -> (str, offset after); key names the error
    e = string_end(b, i, n)
    if e < 0:
        fail5(key, t, "string") if key == "cut" else fail5(key)
    return _s(b, i, e), e


def _binary(b, i, n, key):
    if i + 2 > n or i + 2 + wire5.u16(b, i) > n:
        fail5(key, CONNECT, "binary data") if key == "cut" else fail5(key)
    e = i + 2 + wire5.u16(b, i)
    return bytes(b[i + 2 : e]), e


def _end(i, n, t):
    if i != n:
        fail5("trailing", t, n - i)


def _connect(first, b, n):
    if n < 10:
        fail5("short", CONNECT, n)
    e = string_end(b, 0, n)
    if e != 6 or bytes(b[2:6]) != b"MQTT":
        fail5("connect_nm", bytes(b[2 : max(e, 2)]))
    if b[6] != 5:
        fail5("connect_lv", b[6])
    flags = b[7]
    if flags & 1:
        fail5("connect_rs")
    will_qos = flags >> 3 & 3
    if not flags & 4:
        if will_qos:
            fail5("will_qos", will_qos)
        if flags & 32:
            fail5("will_ret")
    elif will_qos == 3:
        fail5("will_qos3", 3)
    props, i = decode_props(CONNECT, b, 10, n)
    cid, i = _string(b, i, n, "cut", CONNECT)
    p = Connect(cid, bool(flags & 2), wire5.u16(b, 8), props)
    if flags & 4:
        p.will_properties, i = decode_props(WILL, b, i, n)
        p.will_topic, i = _string(b, i, n, "cut", CONNECT)
        try:
            wire.check_name(_b(p.will_topic))
        except CodecError as e:
            wire5.again(e, 0x90)
        p.will_payload, i = _binary(b, i, n, "cut")
        p.will_qos = will_qos
        p.will_retain = bool(flags & 32)
    if flags & 128:
        p.username, i = _string(b, i, n, "user_cut", CONNECT)
    if flags & 64:
        p.password, i = _binary(b, i, n, "pw_cut")
    _end(i, n, CONNECT)
    return p


def _connack(first, b, n):
    c = wire5.connack(b, n)
    return Connack(bool(c >> 8), c & 255, decode_props(CONNACK, b, 2, n)[0])


def _publish(first, b, n):
    ps = publish(first, b, n, EITHER)
    te = 2 + wire5.u16(b, 0)
    qos = first >> 1 & 3
    return Publish(
        _s(b, 0, te),
        bytes(b[ps:n]),
        qos,
        bool(first & 1),
        bool(first & 8),
        wire5.u16(b, te) if qos else None,
        decode_props(PUBLISH, b, te + (2 if qos else 0), n)[0],
    )


def _ack(cls):
    def dec(first, b, n):
        v = wire5.ack(cls.TYPE | EITHER, b, n)
        return cls(v & 0xFFFF, v >> 16, decode_props(cls.TYPE, b, 3, n)[0] if n > 3 else None)

    return dec


def _subscribe(first, b, n):
    t = first >> 4
    if n < 3:
        fail5("short", t, n)
    pid = wire5.u16(b, 0)
    if not pid:
        fail5("pid0", t)
    props, i = decode_props(t, b, 2, n)
    topics = []
    while i < n:
        f, i = _string(b, i, n, "cut", t)
        if t == SUBSCRIBE:
            if i >= n:
                fail5("cut", t, "subscription options")
            pack5.sub_options(_b(f), b[i])
            topics.append((f, b[i]))
            i += 1
        else:
            try:
                wire.check_filter(_b(f))
            except CodecError as e:
                wire5.again(e, 0x8F)
            topics.append(f)
    if not topics:
        fail5("sub_none" if t == SUBSCRIBE else "unsub_none")
    return (Subscribe if t == SUBSCRIBE else Unsubscribe)(pid, topics, props)


def _codes(cls):
    def dec(first, b, n):
        i = wire5.suback(cls.TYPE | EITHER, b, n)
        return cls(wire5.u16(b, 0), [b[k] for k in range(i, n)], decode_props(cls.TYPE, b, 2, n)[0])

    return dec


def _empty(cls):
    def dec(first, b, n):
        _end(0, n, cls.TYPE)
        return cls()

    return dec


def _reason(cls):
    def dec(first, b, n):
        c = wire5.reason(cls.TYPE | EITHER, b, n)
        return cls(c, decode_props(cls.TYPE, b, 1, n)[0] if n > 1 else None)

    return dec


_DECODERS = (
    None,
    _connect,
    _connack,
    _publish,
    _ack(Puback),
    _ack(Pubrec),
    _ack(Pubrel),
    _ack(Pubcomp),
    _subscribe,
    _codes(Suback),
    _subscribe,
    _codes(Unsuback),
    _empty(Pingreq),
    _empty(Pingresp),
    _reason(Disconnect),
    _reason(Auth),
)


def decode(first, body, n=-1):
    """One packet from its first byte and its body (the bytes after the fixed header); raises
    wire5.ProtocolError, whose .code is the reason code for DISCONNECT."""
    if n < 0:
        n = len(body)
    stream5.check_first_byte(first)
    return _DECODERS[first >> 4](first, body, n)


def decode_all(data, max_packet=MAX_REMAINING + 5):
    """Every packet in a byte string; raises ProtocolError if one is malformed or cut short."""
    mv = memoryview(data)
    n = len(data)
    out = []
    i = 0
    while i < n:
        x = stream5.frame(data, i, n, max_packet)
        if x < 0:
            fail5("ends", data[i] >> 4, "fixed header")
        j = i + (x & 7)
        size = x >> 3
        if j + size > n:
            fail5("ends", data[i] >> 4, "body")
        out.append(decode(data[i], mv[j : j + size], size))
        i = j + size
    return out


def encode(packet):
    return packet.encode()


__all__ = [
    "ProtocolError",
    "CodecError",
    "Packet",
    "Connect",
    "Connack",
    "Publish",
    "Puback",
    "Pubrec",
    "Pubrel",
    "Pubcomp",
    "Subscribe",
    "Suback",
    "Unsubscribe",
    "Unsuback",
    "Pingreq",
    "Pingresp",
    "Disconnect",
    "Auth",
    "options",
    "encode_props",
    "decode_props",
    "decode",
    "decode_all",
    "encode",
]
