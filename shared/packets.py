# The complete MQTT 3.1.1 codec: all 14 packet types as objects, encoded and
# decoded in both directions (client -> server and server -> client), every field
# checked. The host rig, the fault proxy and the tests use it; the device client
# uses the lighter packers in wire.py directly. Strings may be str here (as UTF-8).
from .errors import CodecError, fail_as
from .text import check_utf8, encode as _utf8
from . import topics
from . import wire
from .reasons import NAMES, CONNACK_REASONS

MAX_REMAINING = 268435455
# packet types (wire.py's, private there: a board pays for no name)
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
SUBACK_FAILURE = 0x80


def fail(what, rule):
    raise CodecError(what + " [" + rule + "]")


def get_u16(buf, i):
    return buf[i] << 8 | buf[i + 1]


def put_u16(buf, i, v):
    buf[i] = v >> 8
    buf[i + 1] = v & 255
    return i + 2


def _bytes(s, what):
    # str as UTF-8 (a CodecError for a lone surrogate), anything else as it is
    return _utf8(s, what) if isinstance(s, str) else s


def pack_publish(buf, topic, payload, qos=0, retain=False, dup=False, pid=0):
    """PUBLISH of a bytes-like topic and payload, checked (wire.put_publish, which the
    client's send path uses, trusts its caller). Allocates nothing for bytes input."""
    wire.check_name(topic)
    if qos != 0 and qos != 1 and qos != 2:
        fail_as("qos_pub", qos)
    if qos:
        if not 0 < pid < 65536:
            fail_as("pub_pid", qos, pid)
    else:
        if dup:
            fail_as("dup_qos0")
        if pid:
            fail_as("pid_qos0")
    # the whole packet must fit buf (wire.put_publish would pack only its head): the fixed
    # header's writer checks it, and put_publish writes the header again
    wire.header(buf, 0x30, 2 + len(topic) + (2 if qos else 0) + len(payload))
    return wire.put_publish(buf, topic, payload, qos, retain, dup, pid)


class Packet:
    TYPE = 0
    FIELDS = ()

    def __eq__(self, other):
        if type(self) is not type(other):
            return False
        for f in self.FIELDS:
            if getattr(self, f) != getattr(other, f):
                return False
        return True

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
        return 7


class Connect(Packet):
    TYPE = CONNECT
    FIELDS = (
        "client_id",
        "clean_session",
        "keepalive",
        "will_topic",
        "will_message",
        "will_qos",
        "will_retain",
        "username",
        "password",
        "protocol_name",
        "protocol_level",
    )

    def __init__(
        self,
        client_id="",
        clean_session=True,
        keepalive=60,
        will_topic=None,
        will_message=None,
        will_qos=0,
        will_retain=False,
        username=None,
        password=None,
        protocol_name="MQTT",
        protocol_level=4,
    ):
        self.client_id = client_id
        self.clean_session = clean_session
        self.keepalive = keepalive
        self.will_topic = will_topic
        self.will_message = will_message
        self.will_qos = will_qos
        self.will_retain = will_retain
        self.username = username
        self.password = password
        self.protocol_name = protocol_name
        self.protocol_level = protocol_level

    def _bound(self):
        n = 32
        for f in (
            self.client_id,
            self.will_topic,
            self.will_message,
            self.username,
            self.password,
            self.protocol_name,
        ):
            if f is not None:
                n += 4 * len(f)  # a str may take up to 4 bytes a character
        return n

    def pack_into(self, buf):
        return wire.pack_connect(
            buf,
            _bytes(self.client_id, "client identifier"),
            self.clean_session,
            self.keepalive,
            _bytes(self.will_topic, "topic"),
            _bytes(self.will_message, "will message"),
            self.will_qos,
            self.will_retain,
            _bytes(self.username, "user name"),
            _bytes(self.password, "password"),
            _bytes(self.protocol_name, "protocol name"),
            self.protocol_level,
        )


class Connack(Packet):
    TYPE = CONNACK
    FIELDS = ("session_present", "return_code")

    def __init__(self, session_present=False, return_code=0):
        self.session_present = session_present
        self.return_code = return_code

    @property
    def reason(self):
        return CONNACK_REASONS[self.return_code]

    def pack_into(self, buf):
        rc = self.return_code
        if not 0 <= rc <= 5:
            fail("CONNACK return code %r is reserved" % (rc,), "§3.2.2.3")
        if rc and self.session_present:
            fail("CONNACK refusal with session present set", "MQTT-3.2.2-4")
        buf[0] = 0x20
        buf[1] = 2
        buf[2] = 1 if self.session_present else 0
        buf[3] = rc
        return 4


class Publish(Packet):
    TYPE = PUBLISH
    FIELDS = ("topic", "payload", "qos", "retain", "dup", "packet_id")

    def __init__(self, topic, payload=b"", qos=0, retain=False, dup=False, packet_id=None):
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.dup = dup
        self.packet_id = packet_id

    def _bound(self):
        p = self.payload
        return 16 + 4 * len(self.topic) + (4 * len(p) if isinstance(p, str) else len(p))

    def pack_into(self, buf):
        p = self.payload
        if isinstance(p, str):
            p = _utf8(p, "payload")
        return pack_publish(
            buf, topics._b(self.topic), p, self.qos, self.retain, self.dup, self.packet_id or 0
        )


class _Ack(Packet):
    FIELDS = ("packet_id",)

    def __init__(self, packet_id):
        self.packet_id = packet_id

    def pack_into(self, buf):
        return wire.pack_ack(buf, self.TYPE, self.packet_id)


class Puback(_Ack):
    TYPE = PUBACK


class Pubrec(_Ack):
    TYPE = PUBREC


class Pubrel(_Ack):
    TYPE = PUBREL


class Pubcomp(_Ack):
    TYPE = PUBCOMP


class Unsuback(_Ack):
    TYPE = UNSUBACK


class Subscribe(Packet):
    TYPE = SUBSCRIBE
    FIELDS = ("packet_id", "topics")

    def __init__(self, packet_id, topics):
        self.packet_id = packet_id
        self.topics = [tuple(t) for t in topics]  # [(filter, qos), ...]

    def _bound(self):
        return 16 + sum(3 + 4 * len(f) for f, _ in self.topics)

    def pack_into(self, buf):
        return wire.pack_subscribe(buf, self.packet_id, [(topics._b(f), q) for f, q in self.topics])


class Suback(Packet):
    TYPE = SUBACK
    FIELDS = ("packet_id", "return_codes")

    def __init__(self, packet_id, return_codes):
        self.packet_id = packet_id
        self.return_codes = list(return_codes)

    def _bound(self):
        return 16 + len(self.return_codes)

    def pack_into(self, buf):
        if not 0 < self.packet_id < 65536:
            fail("SUBACK needs a packet identifier in 1..65535", "MQTT-2.3.1-1")
        if not self.return_codes:
            fail("SUBACK needs at least one return code", "§3.9.3")
        for rc in self.return_codes:
            if rc not in (0, 1, 2, SUBACK_FAILURE):
                fail("SUBACK return code %r is reserved" % (rc,), "MQTT-3.9.3-2")
        i = put_u16(buf, wire.header(buf, 0x90, 2 + len(self.return_codes)), self.packet_id)
        for rc in self.return_codes:
            buf[i] = rc
            i += 1
        return i


class Unsubscribe(Packet):
    TYPE = UNSUBSCRIBE
    FIELDS = ("packet_id", "topics")

    def __init__(self, packet_id, topics):
        self.packet_id = packet_id
        self.topics = list(topics)

    def _bound(self):
        return 16 + sum(2 + 4 * len(f) for f in self.topics)

    def pack_into(self, buf):
        return wire.pack_subscribe(buf, self.packet_id, [topics._b(f) for f in self.topics], UNSUBSCRIBE)


class _Empty(Packet):
    def pack_into(self, buf):
        return wire.pack_empty(buf, self.TYPE)


class Pingreq(_Empty):
    TYPE = PINGREQ


class Pingresp(_Empty):
    TYPE = PINGRESP


class Disconnect(_Empty):
    TYPE = DISCONNECT


# ---- decoding


def _str(body, i, n, what, rule="§1.5.3"):
    # A length-prefixed UTF-8 string at i -> (str, next offset)
    if i + 2 > n:
        fail(what + ": packet ends inside its length", rule)
    e = i + 2 + get_u16(body, i)
    if e > n:
        fail(what + ": length runs past the packet end", rule)
    check_utf8(body, i + 2, e)
    return bytes(body[i + 2 : e]).decode("utf-8"), e


def _bin(body, i, n, what, rule="§1.5.6"):
    if i + 2 > n:
        fail(what + ": packet ends inside its length", rule)
    e = i + 2 + get_u16(body, i)
    if e > n:
        fail(what + ": length runs past the packet end", rule)
    return bytes(body[i + 2 : e]), e


def _end(i, n, what):
    if i != n:
        fail("%s has %d bytes after its payload" % (what, n - i), "§2.2.3")


def _connect(first, body, n):
    name, i = _str(body, 0, n, "protocol name")
    if name != "MQTT" and name != "MQIsdp":
        fail("protocol name %r is not MQTT" % name, "MQTT-3.1.2-1")
    if i + 4 > n:
        fail("CONNECT variable header cut short", "§3.1.2")
    level = body[i]
    flags = body[i + 1]
    keepalive = get_u16(body, i + 2)
    i += 4
    if (name == "MQTT") != (level == 4) or level not in (3, 4):
        fail(
            "protocol %r level %d is not MQTT 3.1.1 (the server answers CONNACK 1)" % (name, level),
            "MQTT-3.1.2-2",
        )
    if flags & 1:
        fail("CONNECT reserved flag bit 0 is set", "MQTT-3.1.2-3")
    will = flags & 4
    will_qos = flags >> 3 & 3
    if not will and flags & 0x38:
        fail("will QoS or retain set without the will flag", "MQTT-3.1.2-11")
    if will_qos == 3:
        fail("will QoS 3", "MQTT-3.1.2-14")
    if flags & 64 and not flags & 128:
        fail("password flag set without the user name flag", "MQTT-3.1.2-22")
    cid, i = _str(body, i, n, "client identifier", "MQTT-3.1.3-3")
    if not cid and not flags & 2:
        fail("empty client identifier with clean session 0", "MQTT-3.1.3-8")
    p = Connect(cid, bool(flags & 2), keepalive, protocol_name=name, protocol_level=level)
    if will:
        p.will_topic, i = _str(body, i, n, "will topic", "MQTT-3.1.2-9")
        topics.check_name(p.will_topic)
        p.will_message, i = _bin(body, i, n, "will message", "MQTT-3.1.2-9")
        p.will_qos = will_qos
        p.will_retain = bool(flags & 32)
    if flags & 128:
        p.username, i = _str(body, i, n, "user name", "MQTT-3.1.2-19")
    if flags & 64:
        p.password, i = _bin(body, i, n, "password", "MQTT-3.1.2-21")
    _end(i, n, "CONNECT")
    return p


def _publish(first, body, n):
    te, pid, ps = wire.publish_fields(first, body, n)
    qos = first >> 1 & 3
    return Publish(
        bytes(body[2:te]).decode("utf-8"),
        bytes(body[ps:n]),
        qos,
        bool(first & 1),
        bool(first & 8),
        pid if qos else None,
    )


def _subscribe(first, body, n):
    if n < 2:
        fail("SUBSCRIBE too short for its packet identifier", "§3.8.2")
    pid = get_u16(body, 0)
    if pid == 0:
        fail("SUBSCRIBE with packet identifier 0", "MQTT-2.3.1-1")
    i = 2
    pairs = []
    while i < n:
        f, i = _str(body, i, n, "topic filter", "MQTT-3.8.3-1")
        topics.check_filter(f)
        if i >= n:
            fail("topic filter without its requested QoS byte", "§3.8.3")
        q = body[i]
        if q > 2:
            fail("requested QoS byte 0x%02x: reserved bits set or QoS 3" % q, "MQTT-3.8.3-4")
        pairs.append((f, q))
        i += 1
    if not pairs:
        fail("SUBSCRIBE with no topic filter", "MQTT-3.8.3-3")
    return Subscribe(pid, pairs)


def _unsubscribe(first, body, n):
    if n < 2:
        fail("UNSUBSCRIBE too short for its packet identifier", "§3.10.2")
    pid = get_u16(body, 0)
    if pid == 0:
        fail("UNSUBSCRIBE with packet identifier 0", "MQTT-2.3.1-1")
    i = 2
    filters = []
    while i < n:
        f, i = _str(body, i, n, "topic filter", "MQTT-3.10.3-1")
        topics.check_filter(f)
        filters.append(f)
    if not filters:
        fail("UNSUBSCRIBE with no topic filter", "MQTT-3.10.3-2")
    return Unsubscribe(pid, filters)


def _connack(first, body, n):
    c = wire.connack_code(body, n)
    return Connack(bool(c >> 8), c & 255)


def _suback(first, body, n):
    pid = wire.suback_check(body, n)
    return Suback(pid, [body[k] for k in range(2, n)])


def _empty(cls):
    def dec(first, body, n):
        if n:
            fail("%s remaining length must be 0, got %d" % (NAMES[cls.TYPE], n), "§3.%d.1" % cls.TYPE)
        return cls()

    return dec


def _ack(cls):
    def dec(first, body, n):
        return cls(wire.ack_id(cls.TYPE, body, n))

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
    _suback,
    _unsubscribe,
    _ack(Unsuback),
    _empty(Pingreq),
    _empty(Pingresp),
    _empty(Disconnect),
    None,
)


def decode(first, body, n=-1):
    """One packet from its first byte and its body (the bytes after the fixed header)."""
    if n < 0:
        n = len(body)
    wire.check_first_byte(first)
    return _DECODERS[first >> 4](first, body, n)


def decode_all(data, max_packet=MAX_REMAINING + 5):
    """Every packet in a byte string; raises CodecError if one is malformed or cut short."""
    mv = memoryview(data)
    n = len(data)
    out = []
    i = 0
    while i < n:
        first = data[i]
        wire.check_first_byte(first)
        size = 0
        shift = 0
        j = i + 1
        while True:
            if j >= n:
                fail("input ends inside a %s fixed header" % NAMES[first >> 4], "§2.2.3")
            c = data[j]
            j += 1
            size |= (c & 127) << shift
            if not c & 128:
                break
            if j - i == 5:
                fail("remaining length longer than 4 bytes", "§2.2.3")
            shift += 7
        if size + j - i > max_packet:
            fail("packet of %d bytes is over max_packet (%d)" % (size + j - i, max_packet), "§2.2.3")
        if j + size > n:
            fail("input ends inside a %s packet" % NAMES[first >> 4], "§2.2.3")
        out.append(decode(first, mv[j : j + size], size))
        i = j + size
    return out


def encode(packet):
    return packet.encode()


__all__ = [
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
    "decode",
    "decode_all",
    "encode",
]
