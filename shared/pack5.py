# MQTT 5 packers a client uses when a program hands it something (a message with properties,
# a subscription) or once a connection (CONNECT, DISCONNECT, AUTH), and the property block
# writer: beside wire5, which holds what every connection uses all the time (the readers,
# put_publish, pack_ack), so that a session may load this module only when it needs it.
# Everything is checked here: put_props() writes a block and has wire5.check_props() read
# it back, so a block meets the same rules whichever way it travels; the packers check
# their fields and blocks and write the whole packet into the caller's buffer.
try:
    from micropython import const
except ImportError:  # CPython

    def const(x):
        return x


from .wire import CodecError
from . import wire, wire5
from .wire5 import fail5, again, check_props, check_rc, props_end

_ALIAS = const(0x23)
_AUTH = const(15)
_AUTH_METH = const(30 | 0x82 << 8)
_AUTH_METHOD = const(0x15)
_BY_CLIENT = const(0x20)
_CONNECT = const(1)
_FIELD_LONG = const(38 | 0x82 << 8)
_KEEPALIVE = const(35 | 0x82 << 8)
_NO_FIT = const(33 | 0x95 << 8)
_NO_TOPIC = const(28 | 0x82 << 8)
_PID_RANGE = const(47 | 0x82 << 8)
_PUBLISH = const(3)
_PUBREL = const(6)
_UNSUBSCRIBE = const(10)
_TRAILING = const(23 | 0x81 << 8)
_PUB_DUP0 = const(50 | 0x81 << 8)
_PUB_PID0 = const(49 | 0x82 << 8)
_P_ID = const(1 | 0x81 << 8)
_P_RANGE = const(15 | 0x82 << 8)
_QOS = const(48 | 0x81 << 8)
_SHARE_NL = const(44 | 0x82 << 8)
_SHARE_NM1 = const(45 | 0x8F << 8)
_SHARE_NM2 = const(46 | 0x8F << 8)
_SUBSCRIBE = const(8)
_SUB_NONE = const(39 | 0x82 << 8)
_SUB_OPTS = const(41 | 0x81 << 8)
_SUB_QOS = const(42 | 0x82 << 8)
_SUB_RH = const(43 | 0x82 << 8)
_UNSUB_NONE = const(40 | 0x82 << 8)
_WILL_PART = const(36 | 0x82 << 8)
_WILL_QOS3 = const(37 | 0x81 << 8)


# ---- moved here from wire5: the packers' helpers (a board's client holds none of them)


def put_vbi(buf, i, v):
    """Write v as a Variable Byte Integer at buf[i] -> the offset after it."""
    while v > 127:
        buf[i] = v & 127 | 128
        v >>= 7
        i += 1
    buf[i] = v
    return i + 1


def check_block(t, props):
    """Raise ProtocolError unless props, bytes-like, is exactly one property block for type t."""
    if check_props(t, props, 0, len(props)) != len(props):
        fail5(_TRAILING, t, len(props) - props_end(props, 0))


def put_header(buf, t, n):
    """Write the fixed header of a packet of type t with an n-byte body -> the offset after it;
    buf must hold the whole packet."""
    k = 1 + wire.varint_size(n) + n
    if k > len(buf):
        fail5(_NO_FIT, t, k, len(buf))
    return wire.header(buf, t << 4 | (2 if t == _PUBREL or t == _SUBSCRIBE or t == _UNSUBSCRIBE else 0), n)


def pack_ack(buf, t, pid, rc=0, props=b"\x00"):
    """PUBACK, PUBREC, PUBREL or PUBCOMP (type t, the client's unless t has sender bits) with
    packet identifier pid, reason code rc and an encoded property block: in the short forms
    the standard allows when there is nothing to say (§3.4.2.1)."""
    who = t if t & 0x30 else t | _BY_CLIENT
    t &= 15
    if not 0 < pid < 65536:
        fail5(_PID_RANGE, t, pid)
    check_rc(who, rc)
    check_block(who, props)
    if len(props) == 1:
        if not rc:
            return wire.pack_ack(buf, t, pid)
        props = b""
    i = put_header(buf, t, 3 + len(props))
    buf[i] = pid >> 8
    buf[i + 1] = pid & 255
    buf[i + 2] = rc
    i += 3
    buf[i : i + len(props)] = props
    return i + len(props)


def _size(p, v):
    # the size of property p's value v (bytes-like, a pair of them, or an int), its fit checked
    r = p << 2
    if p < 0 or p > 0x2A or not wire5.PROPS[r]:
        fail5(_P_ID, p)
    typ = wire5.PROPS[r + 1] & 7
    if typ == 7:
        n = 4 + len(v[0]) + len(v[1])
        if len(v[0]) > 65535 or len(v[1]) > 65535:
            fail5(_P_RANGE, p, n)
        return n
    if typ > 4:
        if len(v) > 65535:
            fail5(_P_RANGE, p, len(v))
        return 2 + len(v)
    if v < 0 or v >= (256 if typ == 1 else 65536 if typ == 2 else 0x10000000 if typ == 4 else 0x100000000):
        fail5(_P_RANGE, p, v)
    return wire.varint_size(v) if typ == 4 else 4 if typ == 3 else typ


def _put_str(buf, i, s):
    n = len(s)
    buf[i] = n >> 8
    buf[i + 1] = n & 255
    buf[i + 2 : i + 2 + n] = s
    return i + 2 + n


def _content(props):
    # the size of the properties of a block, its length field left out
    n = 0
    for p, v in props:
        n += 1 + _size(p, v)
    return n


def props_size(props):
    """The size of the property block put_props writes for props."""
    n = _content(props)
    return wire.varint_size(n) + n


def put_props(buf, i, t, props):
    """Write the property block of (identifier, value) pairs props at buf[i] for a packet of
    type t (0: will properties; the client's unless t has sender bits) -> the offset after
    it. A value is an int, a bytes-like (UTF-8 for a string), or a pair of bytes-likes (a
    User Property). Checked as a received block is (check_props)."""
    c = _content(props)
    if i + wire.varint_size(c) + c > len(buf):
        fail5(_NO_FIT, t, i + wire.varint_size(c) + c, len(buf))
    s = i
    i = put_vbi(buf, i, c)
    for p, v in props:
        buf[i] = p
        i += 1
        typ = wire5.PROPS[p << 2 | 1] & 7
        if typ == 7:
            i = _put_str(buf, _put_str(buf, i, v[0]), v[1])
        elif typ > 4:
            i = _put_str(buf, i, v)
        elif typ == 4:
            i = put_vbi(buf, i, v)
        else:
            for k in range(3 if typ == 3 else typ - 1, -1, -1):
                buf[i] = v >> (k << 3) & 255
                i += 1
    wire5.check_props(t if t & 0x30 else t | _BY_CLIENT, buf, s, i)
    return i


# ---- packers: what a client sends (an encoded property block: b"\x00" for none)


def pack_publish(buf, topic, payload, qos=0, retain=False, dup=False, pid=0, props=b"\x00", who=_BY_CLIENT):
    """PUBLISH, checked: the topic (empty only with a Topic Alias), QoS, packet identifier and
    properties (sent by the client unless who says otherwise); the whole packet must fit."""
    if qos != 0 and qos != 1 and qos != 2:
        fail5(_QOS, qos)
    if qos:
        if not 0 < pid < 65536:
            fail5(_PID_RANGE, _PUBLISH, pid)
    elif dup:
        fail5(_PUB_DUP0)
    elif pid:
        fail5(_PUB_PID0)
    check_block(_PUBLISH | who, props)
    if len(topic):
        try:
            wire.check_name(topic)
        except CodecError as e:
            again(e, 0x90)
    elif wire5.prop(props, 0, _ALIAS) < 0:
        fail5(_NO_TOPIC)
    n = 2 + len(topic) + (2 if qos else 0) + len(props) + len(payload)
    put_header(buf, _PUBLISH, n)
    return wire5.put_publish(buf, topic, payload, qos, retain, dup, pid, props)


def pack_connect(
    buf,
    client_id,
    clean_start,
    keepalive,
    props=b"\x00",
    will_topic=None,
    will_payload=None,
    will_qos=0,
    will_retain=False,
    will_props=b"\x00",
    username=None,
    password=None,
):
    """CONNECT (protocol level 5); every string and binary field bytes-like, None where absent.
    An empty client_id asks the server to assign one, whatever clean_start says; a password
    needs no user name in MQTT 5."""
    if not 0 <= keepalive <= 65535:
        fail5(_KEEPALIVE, keepalive)
    flags = 2 if clean_start else 0
    check_block(_CONNECT | _BY_CLIENT, props)
    if will_topic is None:
        if will_payload is not None or will_qos or will_retain or len(will_props) > 1:
            fail5(_WILL_PART)
    else:
        try:
            wire.check_name(will_topic)
        except CodecError as e:
            again(e, 0x90)
        if will_qos != 0 and will_qos != 1 and will_qos != 2:
            fail5(_WILL_QOS3, will_qos)
        check_block(_BY_CLIENT, will_props)
        flags |= 4 | will_qos << 3 | (32 if will_retain else 0)
        if will_payload is None:
            will_payload = b""
    if password is not None:
        flags |= 64
    if username is not None:
        flags |= 128
    # the length-prefixed fields in their order (MQTT-3.1.3-1): 3 and 5 are binary data, the
    # others UTF-8 strings; the will properties come before field 2
    f = (client_id, will_topic, will_payload, username, password)
    n = 10 + len(props) + (len(will_props) if will_topic is not None else 0)
    for k in range(5):
        s = f[k]
        if s is not None:
            m = len(s)
            if m > 65535:
                fail5(
                    _FIELD_LONG,
                    ("client identifier", "will topic", "will payload", "user name", "password")[k],
                    m,
                )
            if k != 2 and k != 4:
                wire5.utf8(s, 0, m)
            n += 2 + m
    i = put_header(buf, _CONNECT, n)
    buf[i : i + 7] = b"\x00\x04MQTT\x05"
    buf[i + 7] = flags
    buf[i + 8] = keepalive >> 8
    buf[i + 9] = keepalive & 255
    i += 10
    buf[i : i + len(props)] = props
    i += len(props)
    for k in range(5):
        s = f[k]
        if s is not None:
            if k == 1:
                buf[i : i + len(will_props)] = will_props
                i += len(will_props)
            i = _put_str(buf, i, s)
    return i


def pack_reason(buf, t, rc=0, props=b"\x00"):
    """DISCONNECT or AUTH (type t, the client's unless t has sender bits) with reason code rc
    and an encoded property block, in the short forms when there is nothing to say."""
    who = t if t & 0x30 else t | _BY_CLIENT
    t &= 15
    wire5.check_rc(who, rc)
    check_block(who, props)
    if t == _AUTH and rc and wire5.prop(props, 0, _AUTH_METHOD) < 0:
        fail5(_AUTH_METH, rc)
    if len(props) == 1:
        props = b""
        if not rc:
            return wire.pack_empty(buf, t)
    i = put_header(buf, t, 1 + len(props))
    buf[i] = rc
    i += 1
    buf[i : i + len(props)] = props
    return i + len(props)


def sub_options(f, o):
    """Raise ProtocolError unless o is a valid subscription options byte for the topic filter f
    (bytes-like): the options' reserved bits, QoS and Retain Handling, a shared subscription's
    ($share/) name and No Local (§4.8.2), then the filter itself."""
    if o & 0xC0:
        fail5(_SUB_OPTS, o)
    if o & 3 == 3:
        fail5(_SUB_QOS, o)
    if o & 0x30 == 0x30:
        fail5(_SUB_RH, o)
    if len(f) > 6 and f[:7] == b"$share/":
        k = 7
        while k < len(f) and f[k] != 0x2F:  # '/'
            if f[k] == 0x2B or f[k] == 0x23:  # '+', '#'
                fail5(_SHARE_NM2)
            k += 1
        if k == 7:
            fail5(_SHARE_NM1)
        if k + 1 >= len(f):
            fail5(_SHARE_NM2)
        if o & 4:
            fail5(_SHARE_NL)
    try:
        wire.check_filter(f)
    except CodecError as e:
        again(e, 0x8F)


def pack_subscribe(buf, pid, filters, props=b"\x00", t=_SUBSCRIBE):
    """SUBSCRIBE for a sequence of (topic_filter, options) pairs, each filter bytes-like and
    options the byte of §3.8.3.1 (QoS | No Local << 2 | Retain As Published << 3 | Retain
    Handling << 4); with t=UNSUBSCRIBE (10): UNSUBSCRIBE for a sequence of filters."""
    if not 0 < pid < 65536:
        fail5(_PID_RANGE, t, pid)
    if not filters:
        if t == _SUBSCRIBE:
            fail5(_SUB_NONE)
        fail5(_UNSUB_NONE)
    check_block(t | _BY_CLIENT, props)
    n = 2 + len(props)
    for f in filters:
        if t == _SUBSCRIBE:
            f, o = f
            sub_options(f, o)
            n += 1
        else:
            try:
                wire.check_filter(f)
            except CodecError as e:
                again(e, 0x8F)
        n += 2 + len(f)
    i = put_header(buf, t, n)
    buf[i] = pid >> 8
    buf[i + 1] = pid & 255
    i += 2
    buf[i : i + len(props)] = props
    i += len(props)
    for f in filters:
        if t == _SUBSCRIBE:
            f, o = f
            i = _put_str(buf, i, f)
            buf[i] = o
            i += 1
        else:
            i = _put_str(buf, i, f)
    return i
