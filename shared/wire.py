# MQTT 3.1.1 wire format for a client: the codec's error, packet types, the fixed header,
# the packers, each writing one whole packet into a caller's preallocated buffer and
# returning its length, the readers of the packets a client receives, and the topic and
# UTF-8 rules. The device client loads this module and nothing else of the codec, so it
# holds what a client needs and no more: every function, global and argument name is
# paid for in a board's heap. Strings and topics are bytes-like here (str is the host
# modules' business: text, topics, packets); every check indexes bytes one by one, so
# checking and packing allocate nothing on MicroPython. The full both-direction codec is
# packets.py.
try:
    from micropython import const
except ImportError:  # CPython

    def const(x):
        return x


class CodecError(ValueError):
    """The codec's one error (see errors.py): what is wrong, then " [rule]" (errors.rule()
    reads it: a board holds no method for it)."""


def fail_as(key, *values):
    """Raise the error of reasons.TEXT's line key (a number or a name), loaded now."""
    try:
        from .reasons import text

        m = text(key, values)
    except MemoryError:  # no room for the table: the key still says what broke
        m = key
    raise CodecError(m)


_CONNECT = const(1)
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

# Private (a board pays for no name): packets.py gives the packet types their public
# names. Type names and CONNACK texts: reasons.NAMES, reasons.CONNACK_REASONS (error
# texts live in reasons.py, loaded only when an error is raised).
_SUBACK_FAILURE = const(0x80)

_MAX_REMAINING = const(268435455)

# MicroPython looks a builtin up in the module's globals first: a miss probes the (well
# filled) table to an empty slot, a hit is cached. With len found here, put_publish (the hot
# path, three len calls) takes 0.76 us instead of 0.91 on the unix port.
len = len

# Errors by number: the line of reasons.TEXT that says what broke and the rule it breaks
# (fail_as loads it only when an error is raised). A number costs a board no heap, a
# name as a string would: about 450 bytes for these.
_RSVD_TYPE = const(1)
_QOS3 = const(2)
_DUP_QOS0 = const(3)
_FLAGS = const(4)
_BODY_MAX = const(5)
_NO_FIT = const(6)
_RL_LONG = const(7)
_OVER_MAX = const(8)
_PID_RANGE = const(9)
_QOS_WILL = const(10)
_QOS_SUB = const(11)
_FIELD_LONG = const(12)
_CID_EMPTY = const(13)
_KEEPALIVE = const(14)
_WILL_PART = const(15)
_PW_NO_USER = const(16)
_SUB_EMPTY = const(17)
_UNSUB_NONE = const(18)
_ACK_LEN = const(19)
_PID_ZERO = const(20)
_CONNACK_N = const(21)
_CONNACK_F = const(22)
_CONNACK_RC = const(23)
_CONNACK_SP = const(24)
_SUBACK_RC = const(25)
_SUBACK_N = const(26)
_PUB_SHORT = const(27)
_PUB_TLEN = const(28)
_PUB_NOTOP = const(29)
_PUB_WILD = const(30)
_PUB_PID0 = const(31)
_EMPTY = const(32)
_TOPIC_LONG = const(33)
_NAME_WILD = const(34)
_HASH_LAST = const(35)
_HASH_LVL = const(36)
_PLUS_LVL = const(37)
_U0 = const(38)
_U8_START = const(39)
_U8_SHORT = const(40)
_U8_SURR = const(41)
_U8_BAD = const(42)


def check_first_byte(b):
    """Raise CodecError unless b is a valid first byte of a 3.1.1 packet."""
    t = b >> 4
    if t == _PUBLISH:  # its flags are data: DUP, QoS, RETAIN
        if b & 6 == 6:
            fail_as(_QOS3)
        if b & 14 == 8:
            fail_as(_DUP_QOS0)
    elif t == 0 or t == 15:
        fail_as(_RSVD_TYPE, t)
    elif b & 15 != 0xA80 >> t & 2:  # 0010 for PUBREL, SUBSCRIBE, UNSUBSCRIBE, else 0000 (Table 2.2)
        fail_as(_FLAGS, t, b & 15, 0xA80 >> t & 2)


def frame(b, i, e, limit):
    """The fixed header starting at b[i], with b[i:e] received -> its length + 8 x the
    remaining length, or -1 while the header is not all there. Raises CodecError for a bad
    first byte, a length field of more than 4 bytes, or a packet (header included) over
    limit bytes, before any of its body is taken: no length field makes a caller hold more."""
    check_first_byte(b[i])
    n = 0
    k = i + 1
    shift = 0
    while k < e:
        c = b[k]
        n |= (c & 127) << shift
        k += 1
        if c < 128:
            k -= i
            if n + k > limit:
                fail_as(_OVER_MAX, n + k, limit)
            return k | n << 3
        if k - i == 5:
            fail_as(_RL_LONG)
        shift += 7
    return -1


def varint_size(n):
    return 1 if n < 128 else 2 if n < 16384 else 3 if n < 2097152 else 4


def header(buf, first, n, part=-1):
    # Writes the fixed header of a packet with an n-byte body -> the offset of the body;
    # the header and `part` bytes of the body (all of it by default) must fit buf.
    if n > _MAX_REMAINING:
        fail_as(_BODY_MAX, n)
    if part < 0:
        part = n
    if part + 5 > len(buf):  # the header takes at most 5 bytes: exact check only near the end
        k = 1 + varint_size(n) + part
        if k > len(buf):
            fail_as(_NO_FIT, first >> 4, k, len(buf))
    buf[0] = first
    i = 1
    while n > 127:
        buf[i] = n & 127 | 128
        n >>= 7
        i += 1
    buf[i] = n
    return i + 1


def put_publish(buf, topic, payload, qos, retain, dup, pid):
    """PUBLISH of a bytes-like topic and payload, unchecked: for a caller that checked the
    topic, QoS and packet id when it accepted the message (the session's send path), as it
    sends many times; packets.pack_publish checks them -> the packet's length. A buffer
    too short for the whole packet gets only its head (all that precedes the payload) and
    the caller writes the payload after buf[:length - len(payload)]: a board's small send
    buffer sends a large message without copying it. Allocates nothing."""
    tl = len(topic)
    pl = len(payload)
    first = 0x30 | (8 if dup else 0) | qos << 1 | (1 if retain else 0)
    n = 2 + tl + (2 if qos else 0) + pl
    if n < 128 and n + 2 <= len(buf):  # a one-byte length, most messages: no call
        buf[0] = first
        buf[1] = n
        i = 2
    else:
        i = header(buf, first, n, n - pl)
    buf[i] = tl >> 8
    buf[i + 1] = tl & 255
    i += 2
    buf[i : i + tl] = topic
    i += tl
    if qos:
        buf[i] = pid >> 8
        buf[i + 1] = pid & 255
        i += 2
    if i + pl <= len(buf):
        buf[i : i + pl] = payload
    return i + pl


def pack_connect(
    buf,
    client_id,
    clean_session,
    keepalive,
    will_topic=None,
    will_message=None,
    will_qos=0,
    will_retain=False,
    username=None,
    password=None,
    protocol_name=b"MQTT",
    protocol_level=4,
):
    """CONNECT; every string and binary field is bytes-like, None where absent."""
    if not client_id and not clean_session:
        fail_as(_CID_EMPTY)
    if not 0 <= keepalive <= 65535:
        fail_as(_KEEPALIVE, keepalive)
    flags = 2 if clean_session else 0
    if will_topic is None:
        if will_message is not None or will_qos or will_retain:
            fail_as(_WILL_PART)
    else:
        check_name(will_topic)
        if will_qos != 0 and will_qos != 1 and will_qos != 2:
            fail_as(_QOS_WILL, will_qos)
        flags |= 4 | will_qos << 3 | (32 if will_retain else 0)
        if will_message is None:
            will_message = b""
    if password is not None:
        if username is None:
            fail_as(_PW_NO_USER)
        flags |= 64
    if username is not None:
        flags |= 128
    # The length-prefixed fields in their order (§3.1.2, §3.1.3): 3 and 5 are binary data,
    # the others UTF-8 strings; the protocol level, flags and keepalive follow field 0.
    f = (protocol_name, client_id, will_topic, will_message, username, password)
    n = 4
    for k in range(6):
        s = f[k]
        if s is not None:
            m = len(s)
            if m > 65535:
                fail_as(_FIELD_LONG, k, m)
            if k != 3 and k != 5:
                check_utf8(s, 0, m)
            n += 2 + m
    i = header(buf, 0x10, n)
    for k in range(6):
        s = f[k]
        if s is not None:
            m = len(s)
            buf[i] = m >> 8
            buf[i + 1] = m & 255
            buf[i + 2 : i + 2 + m] = s
            i += 2 + m
            if k == 0:
                buf[i] = protocol_level
                buf[i + 1] = flags
                buf[i + 2] = keepalive >> 8
                buf[i + 3] = keepalive & 255
                i += 4
    return i


def pack_ack(buf, t, pid):
    """PUBACK, PUBREC, PUBREL, PUBCOMP or UNSUBACK (type t) with packet id pid."""
    if not 0 < pid < 65536:
        fail_as(_PID_RANGE, t, pid)
    buf[0] = t << 4 | (2 if t == _PUBREL else 0)
    buf[1] = 2
    buf[2] = pid >> 8
    buf[3] = pid & 255
    return 4


def pack_empty(buf, t):
    """PINGREQ, PINGRESP or DISCONNECT (type t)."""
    buf[0] = t << 4
    buf[1] = 0
    return 2


def pack_subscribe(buf, pid, filters, t=_SUBSCRIBE):
    """SUBSCRIBE for a sequence of (topic_filter, qos) pairs, each filter bytes-like (with
    t=UNSUBSCRIBE: UNSUBSCRIBE for a sequence of filters)."""
    if not 0 < pid < 65536:
        fail_as(_PID_RANGE, t, pid)
    if not filters:
        fail_as(_SUB_EMPTY if t == _SUBSCRIBE else _UNSUB_NONE)
    n = 2
    for f in filters:
        if t == _SUBSCRIBE:
            f, q = f
            n += 1 + len(check_filter(f))
            if q != 0 and q != 1 and q != 2:
                fail_as(_QOS_SUB, q)
        else:
            n += len(check_filter(f))
        n += 2
    i = header(buf, t << 4 | 2, n)
    buf[i] = pid >> 8
    buf[i + 1] = pid & 255
    i += 2
    for f in filters:
        if t == _SUBSCRIBE:
            f, q = f
        n = len(f)
        buf[i] = n >> 8
        buf[i + 1] = n & 255
        i += 2 + n
        buf[i - n : i] = f
        if t == _SUBSCRIBE:
            buf[i] = q
            i += 1
    return i


# ---- reading bodies the client receives (body = buf[0:n], fixed header removed)


def ack_id(t, b, n):
    """The packet id of the body b of a PUBACK/PUBREC/PUBREL/PUBCOMP/UNSUBACK (type t)."""
    if n != 2:
        fail_as(_ACK_LEN, t, n)
    pid = b[0] << 8 | b[1]
    if pid == 0:
        fail_as(_PID_ZERO, t)
    return pid


def connack_code(b, n):
    """CONNACK body b -> return code | session-present << 8 (reasons.CONNACK_REASONS names codes)."""
    if n != 2:
        fail_as(_CONNACK_N, n)
    flags = b[0]
    rc = b[1]
    if flags & 0xFE:
        fail_as(_CONNACK_F, flags)
    if rc > 5:
        fail_as(_CONNACK_RC, rc)
    if rc and flags:
        fail_as(_CONNACK_SP)
    return rc | flags << 8


def suback_check(b, n):
    """Packet id of a SUBACK body b after checking every return code."""
    if n < 3:
        fail_as(_SUBACK_N)
    pid = b[0] << 8 | b[1]
    if pid == 0:
        fail_as(_PID_ZERO, _SUBACK)
    for k in range(2, n):
        rc = b[k]
        if rc > 2 and rc != _SUBACK_FAILURE:
            fail_as(_SUBACK_RC, rc)
    return pid


def publish_fields(first, b, n):
    """PUBLISH body b -> (topic_end, packet_id, payload_start), all checked; the topic is
    b[2:topic_end]. (The session reads these itself and calls this for the error of a
    PUBLISH that is malformed, and check_pub_topic for a topic it has not seen.)"""
    if n < 2:
        fail_as(_PUB_SHORT)
    tl = b[0] << 8 | b[1]
    te = 2 + tl
    qos = first >> 1 & 3
    ps = te + (2 if qos else 0)
    if ps > n:
        fail_as(_PUB_TLEN, tl)
    if tl == 0:
        fail_as(_PUB_NOTOP)
    check_pub_topic(b, 2, te)
    pid = 0
    if qos:
        pid = b[te] << 8 | b[te + 1]
        if pid == 0:
            fail_as(_PUB_PID0, qos)
    return te, pid, ps


def check_pub_topic(b, i, end):
    """Raise CodecError unless b[i:end], a received topic name, is MQTT UTF-8 with no
    wildcard (MQTT-3.3.2-2)."""
    if check_utf8(b, i, end) < end:
        fail_as(_PUB_WILD)


# ---- topic names and filters (§4.7) and MQTT strings (§1.5.3), bytes-like


def check_name(t):
    """Raise CodecError unless t is a valid topic name (no wildcards); returns t."""
    n = len(t)
    if n == 0:
        fail_as(_EMPTY, "name")
    if n > 65535:
        fail_as(_TOPIC_LONG, "name", n)
    k = check_utf8(t, 0, n)  # also rejects U+0000 (MQTT-4.7.3-2 via MQTT-1.5.3-2)
    if k < n:
        fail_as(_NAME_WILD, t[k])
    return t


def check_filter(t):
    """Raise CodecError unless t is a valid topic filter; returns t."""
    n = len(t)
    if n == 0:
        fail_as(_EMPTY, "filter")
    if n > 65535:
        fail_as(_TOPIC_LONG, "filter", n)
    k = check_utf8(t, 0, n)
    while k < n:  # from the first wildcard on
        c = t[k]
        if c == 0x23:  # '#'
            if k != n - 1:
                fail_as(_HASH_LAST)
            if k and t[k - 1] != 0x2F:
                fail_as(_HASH_LVL)
        elif c == 0x2B and (k and t[k - 1] != 0x2F or k < n - 1 and t[k + 1] != 0x2F):  # '+'
            fail_as(_PLUS_LVL)
        k += 1
    return t


def check_utf8(b, i, end):
    """Raise CodecError unless b[i:end] is an acceptable MQTT string body -> the offset of its
    first wildcard ('+' or '#'), or end: one pass serves the topic checks too."""
    w = end
    while i < end:
        c = b[i]
        i += 1
        if c < 0x80:
            if c < 0x2C:  # NUL, '#' and '+' are the ASCII bytes of note, all below ','
                if c == 0:
                    fail_as(_U0)
                if (c == 0x23 or c == 0x2B) and w == end:
                    w = i - 1
            continue
        if c < 0xC2 or c > 0xF4:
            fail_as(_U8_START, c)
        n = i + (1 if c < 0xE0 else 2 if c < 0xF0 else 3)  # the end of the character
        if n > end:
            fail_as(_U8_SHORT)
        # the second byte's range excludes overlong forms (E0, F0), surrogates (ED) and
        # code points above U+10FFFF (F4)
        d = b[i]
        if d < (0xA0 if c == 0xE0 else 0x90 if c == 0xF0 else 0x80) or d > (
            0x9F if c == 0xED else 0x8F if c == 0xF4 else 0xBF
        ):
            fail_as(_U8_SURR if c == 0xED and 0x9F < d < 0xC0 else _U8_BAD)
        i += 1
        while i < n:
            if b[i] & 0xC0 != 0x80:
                fail_as(_U8_BAD)
            i += 1
    return w
