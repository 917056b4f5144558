# MQTT 5 wire format for a client, loaded only by a program that speaks MQTT 5: a 3.1.1
# program never imports this module (tests/device/test_loading.py says so).
#
# Theory of operation. MQTT 5 is MQTT 3.1.1 plus a property block in every packet but
# PINGREQ/PINGRESP, a reason code in every acknowledgement, and AUTH (type 15). This module
# adds only that to wire.py, whose fixed header, packers and topic and UTF-8 checks it calls:
# - Properties travel as bytes. A block is a Variable Byte Integer length and then
#   (identifier, value) pairs. check_props() walks a received block once, checking every
#   rule the standard puts on it (identifier allowed in that packet, once unless it may
#   repeat, value of its type and range, inside the block), and returns where the packet
#   goes on; prop() then finds a value where it lies, and u16/u32/vbi read it: nothing is
#   copied or allocated. pack5.put_props() writes a block from (identifier, value) pairs
#   and runs the same check_props() over what it wrote, so a block is held to one set of
#   rules whichever way it travels. A session encodes a message's properties once and keeps
#   the block (put_publish copies it into each send).
# - This module holds what a connection uses all along: the readers of what a client
#   receives, and the packer of what it sends most (put_publish): a board running MQTT 5
#   holds all of this module, so nothing else is here (stream5 frames, packets5 reads a
#   PUBLISH for the host, pack5 has pack_ack and the packers' helpers). pack5 holds
#   the packers used when a program hands something over or once a connection (CONNECT,
#   SUBSCRIBE, DISCONNECT, AUTH, checked PUBLISH), for a session to load only then.
# - The packers write a whole packet into the caller's buffer, as wire.py's do: a buffer
#   too small is an error, never a grown buffer. The readers take a body (fixed header
#   removed, as frame() or stream5.PacketReader5 delimit it) and return numbers and
#   offsets, not objects.
# - A packet type may carry the sender's bits: _BY_SERVER (0x10), _BY_CLIENT (0x20), both
#   (0x30) when either may have sent it. Some rules depend on the sender (a client never
#   puts a Subscription Identifier in PUBLISH; only a client sends DISCONNECT 0x04). The
#   readers assume the server sent the packet and the packers that the client does, unless
#   told otherwise; packets5, the host codec, passes both bits.
# - Every error is a ProtocolError (a CodecError): its message says what is wrong and the
#   rule it breaks, and .code is the reason code a client sends in DISCONNECT before it
#   closes (0x81 Malformed Packet, 0x82 Protocol Error, or a more specific one). Texts are
#   in reasons5.py, loaded only when an error is raised; an error is named here by
#   const(its line | its code << 8), which costs a board no heap.
# No length field is trusted: every length is checked against the end of the packet before
# anything is read at its far end, and nothing is allocated from one.
try:
    from micropython import const
except ImportError:  # CPython

    def const(x):
        return x


from .wire import CodecError
from . import wire


class ProtocolError(CodecError):
    """Malformed or forbidden MQTT 5 input: str(e) says what and the rule it breaks, e.code
    is the reason code to send in DISCONNECT (0x81, 0x82, or a more specific one)."""

    def __init__(self, msg, code):
        super().__init__(msg)
        self.code = code


def fail5(k, *values):
    """Raise the ProtocolError of reasons5.TEXT's line k: const(line | code << 8) here, a key
    elsewhere."""
    code = 0x81
    try:
        from .reasons5 import text

        m, code = text(k & 255 if isinstance(k, int) else k, values)
    except MemoryError:  # no room for the table: the number still says what broke
        m = str(k)
        if isinstance(k, int):
            code = k >> 8
    raise ProtocolError(m, code)


def again(e, code):
    """Raise a 3.1.1 primitive's CodecError e as a ProtocolError, its rule renumbered for MQTT
    5; code is its reason code, but a string that is not UTF-8 is always 0x81 (§1.5.4)."""
    if isinstance(e, ProtocolError):
        raise e
    try:
        from .reasons5 import renumber

        m = renumber(e)
    except MemoryError:
        m = str(e)
    raise ProtocolError(m, 0x81 if "-1.5." in m or "§1.5" in m else code)


_CONNECT = const(1)
_CONNACK = const(2)
_PUBLISH = const(3)
_PUBREL = const(6)
_SUBSCRIBE = const(8)
_SUBACK = const(9)
_UNSUBSCRIBE = const(10)
_UNSUBACK = const(11)
_DISCONNECT = const(14)
_AUTH = const(15)
_BY_SERVER = const(0x10)
_BY_CLIENT = const(0x20)
_BIG = const(0x3FFFFFFF)

_USER = const(0x26)  # User Property: may repeat anywhere
_SUBID = const(0x0B)  # Subscription Identifier: may repeat in a server's PUBLISH
_ALIAS = const(0x23)
_AUTH_METHOD = const(0x15)

# Errors: const(line of reasons5.TEXT | reason code << 8)
_P_ID = const(1 | 0x81 << 8)
_P_WHERE = const(2 | 0x81 << 8)
_P_TWICE = const(3 | 0x82 << 8)
_P_CUT = const(4 | 0x81 << 8)
_P_LEN = const(5 | 0x81 << 8)
_P_BOOL = const(6 | 0x82 << 8)
_P_ZERO = const(7 | 0x82 << 8)
_P_ALIAS0 = const(8 | 0x94 << 8)
_P_SUBID0 = const(9 | 0x82 << 8)
_P_SUBID_C = const(10 | 0x82 << 8)
_P_SX_SRV = const(11 | 0x82 << 8)
_P_AD_NAM = const(12 | 0x82 << 8)
_P_RTOPIC = const(13 | 0x82 << 8)
_P_PAIR = const(14 | 0x81 << 8)
_VBI_LONG = const(16 | 0x81 << 8)
_VBI_MIN = const(17 | 0x81 << 8)
_VBI_CUT = const(18 | 0x81 << 8)
_RC_BAD = const(19 | 0x82 << 8)
_RC_SRV = const(20 | 0x82 << 8)
_RC_CLI = const(21 | 0x82 << 8)
_SHORT = const(22 | 0x81 << 8)
_TRAILING = const(23 | 0x81 << 8)
_PID0 = const(24 | 0x82 << 8)
_ACK_FLAGS = const(25 | 0x81 << 8)
_ACK_SP = const(26 | 0x82 << 8)
_CUT = const(27 | 0x81 << 8)
_NO_TOPIC = const(28 | 0x82 << 8)
_NO_CODES = const(29 | 0x82 << 8)
_AUTH_METH = const(30 | 0x82 << 8)
_PUB_WILD = const(31 | 0x90 << 8)
_V311 = const(32 | 0x84 << 8)
_NO_FIT = const(33 | 0x95 << 8)
_FLAGS = const(34 | 0x81 << 8)
_PID_RANGE = const(47 | 0x82 << 8)
_OVER_MAX = const(58 | 0x95 << 8)

# The properties (§2.2.2.2, Table 2-4), 4 bytes for each identifier 0x00..0x2A: its index
# among the 27 + 1 (0: no such property), its type (1 Byte, 2 Two Byte Integer, 3 Four Byte
# Integer, 4 Variable Byte Integer, 5 UTF-8 String, 6 Binary Data, 7 UTF-8 String Pair) | its
# range << 3 (1: 0 or 1, 2: not 0), and the packets it may appear in, a bit per packet type
# (bit 0: a CONNECT's will properties), low byte first. Names: reasons5.PROPERTIES.
PROPS = (
    b"\x00\x00\x00\x00"
    b"\x01\x09\x09\x00"  # 01 Payload Format Indicator: Byte, 0 or 1; will, PUBLISH
    b"\x02\x03\x09\x00"  # 02 Message Expiry Interval: Four Byte Integer; will, PUBLISH
    b"\x03\x05\x09\x00"  # 03 Content Type: UTF-8 String; will, PUBLISH
    b"\x00\x00\x00\x00"
    b"\x00\x00\x00\x00"
    b"\x00\x00\x00\x00"
    b"\x00\x00\x00\x00"
    b"\x04\x05\x09\x00"  # 08 Response Topic: UTF-8 String; will, PUBLISH
    b"\x05\x06\x09\x00"  # 09 Correlation Data: Binary Data; will, PUBLISH
    b"\x00\x00\x00\x00"
    b"\x06\x14\x08\x01"  # 0b Subscription Identifier: Variable Byte Integer, not 0; PUBLISH, SUBSCRIBE
    b"\x00\x00\x00\x00"
    b"\x00\x00\x00\x00"
    b"\x00\x00\x00\x00"
    b"\x00\x00\x00\x00"
    b"\x00\x00\x00\x00"
    b"\x07\x03\x06\x40"  # 11 Session Expiry Interval: Four Byte Integer; CONNECT, CONNACK, DISCONNECT
    b"\x08\x05\x04\x00"  # 12 Assigned Client Identifier: UTF-8 String; CONNACK
    b"\x09\x02\x04\x00"  # 13 Server Keep Alive: Two Byte Integer; CONNACK
    b"\x00\x00\x00\x00"
    b"\x0a\x05\x06\x80"  # 15 Authentication Method: UTF-8 String; CONNECT, CONNACK, AUTH
    b"\x0b\x06\x06\x80"  # 16 Authentication Data: Binary Data; CONNECT, CONNACK, AUTH
    b"\x0c\x09\x02\x00"  # 17 Request Problem Information: Byte, 0 or 1; CONNECT
    b"\x0d\x03\x01\x00"  # 18 Will Delay Interval: Four Byte Integer; will
    b"\x0e\x09\x02\x00"  # 19 Request Response Information: Byte, 0 or 1; CONNECT
    b"\x0f\x05\x04\x00"  # 1a Response Information: UTF-8 String; CONNACK
    b"\x00\x00\x00\x00"
    b"\x10\x05\x04\x40"  # 1c Server Reference: UTF-8 String; CONNACK, DISCONNECT
    b"\x00\x00\x00\x00"
    b"\x00\x00\x00\x00"
    b"\x11\x05\xf4\xca"  # 1f Reason String: UTF-8 String; acks, CONNACK, DISCONNECT, AUTH
    b"\x00\x00\x00\x00"
    b"\x12\x12\x06\x00"  # 21 Receive Maximum: Two Byte Integer, not 0; CONNECT, CONNACK
    b"\x13\x02\x06\x00"  # 22 Topic Alias Maximum: Two Byte Integer; CONNECT, CONNACK
    b"\x14\x12\x08\x00"  # 23 Topic Alias: Two Byte Integer, not 0; PUBLISH
    b"\x15\x09\x04\x00"  # 24 Maximum QoS: Byte, 0 or 1; CONNACK
    b"\x16\x09\x04\x00"  # 25 Retain Available: Byte, 0 or 1; CONNACK
    b"\x17\x07\xff\xcf"  # 26 User Property: UTF-8 String Pair; all but PINGREQ, PINGRESP
    b"\x18\x13\x06\x00"  # 27 Maximum Packet Size: Four Byte Integer, not 0; CONNECT, CONNACK
    b"\x19\x09\x04\x00"  # 28 Wildcard Subscription Available: Byte, 0 or 1; CONNACK
    b"\x1a\x09\x04\x00"  # 29 Subscription Identifier Available: Byte, 0 or 1; CONNACK
    b"\x1b\x09\x04\x00"  # 2a Shared Subscription Available: Byte, 0 or 1; CONNACK
)

# The reason codes of each packet type (Tables 3-1, 3-4..3-11), as pairs (code, who may send
# it: _BY_SERVER | _BY_CLIENT). Names: reasons5.REASONS.
_RC = (
    b"",
    b"",
    # CONNACK
    b"\x00\x10\x80\x10\x81\x10\x82\x10\x83\x10\x84\x10\x85\x10\x86\x10\x87\x10\x88\x10\x89\x10"
    b"\x8a\x10\x8c\x10\x90\x10\x95\x10\x97\x10\x99\x10\x9a\x10\x9b\x10\x9c\x10\x9d\x10\x9f\x10",
    b"",
    # PUBACK, PUBREC: 0x10 No matching subscribers is the server's
    b"\x00\x30\x10\x10\x80\x30\x83\x30\x87\x30\x90\x30\x91\x30\x97\x30\x99\x30",
    b"\x00\x30\x10\x10\x80\x30\x83\x30\x87\x30\x90\x30\x91\x30\x97\x30\x99\x30",
    # PUBREL, PUBCOMP
    b"\x00\x30\x92\x30",
    b"\x00\x30\x92\x30",
    b"",
    # SUBACK
    b"\x00\x10\x01\x10\x02\x10\x80\x10\x83\x10\x87\x10\x8f\x10\x91\x10\x97\x10\x9e\x10\xa1\x10\xa2\x10",
    b"",
    # UNSUBACK
    b"\x00\x10\x11\x10\x80\x10\x83\x10\x87\x10\x8f\x10\x91\x10",
    b"",
    b"",
    # DISCONNECT
    b"\x00\x30\x04\x20\x80\x30\x81\x30\x82\x30\x83\x30\x87\x10\x89\x10\x8b\x10\x8d\x10\x8e\x10"
    b"\x8f\x10\x90\x30\x93\x30\x94\x30\x95\x30\x96\x30\x97\x30\x98\x30\x99\x30\x9a\x10\x9b\x10"
    b"\x9c\x10\x9d\x10\x9e\x10\x9f\x10\xa0\x10\xa1\x10\xa2\x10",
    # AUTH
    b"\x00\x10\x18\x30\x19\x20",
)


def check_rc(t, c):
    """Raise ProtocolError unless c is a reason code of packet type t that its sender (t's
    sender bits) may send -> c."""
    s = _RC[t & 15]
    for k in range(0, len(s), 2):
        if s[k] == c:
            if not s[k + 1] & t:
                fail5(_RC_SRV if s[k + 1] == _BY_SERVER else _RC_CLI, t, c)
            return c
    fail5(_RC_BAD, t, c)


# ---- integers and strings in a body (b is any bytes-like; nothing is copied)


def u16(b, k):
    return b[k] << 8 | b[k + 1]


def u32(b, k):
    # (a value over 2**30 - 1 is a long int on a 32-bit board: Session Expiry 0xFFFFFFFF)
    return b[k] << 24 | b[k + 1] << 16 | b[k + 2] << 8 | b[k + 3]


def vbi(b, i, end=_BIG):
    """The Variable Byte Integer at b[i], none of its bytes at or past end -> its value; only
    the shortest form is accepted (MQTT-1.5.5-1), so its size is wire.varint_size(value)."""
    v = 0
    s = 0
    while True:
        if i >= end:
            fail5(_VBI_CUT)
        c = b[i]
        v |= (c & 127) << s
        i += 1
        if c < 128:
            break
        s += 7
        if s == 28:
            fail5(_VBI_LONG)
    if c == 0 and s:
        fail5(_VBI_MIN, v)
    return v


def utf8(b, i, end):
    """wire.check_utf8 in MQTT 5's terms: b[i:end] is an MQTT string -> the offset of its first
    wildcard, or end."""
    try:
        return wire.check_utf8(b, i, end)
    except CodecError as e:
        again(e, 0x81)


# ---- properties


def _value_end(typ, b, k, end):
    # the end of a value of type typ at b[k] (past end if it does not fit)
    if typ < 4:
        return k + (4 if typ == 3 else typ)
    if typ == 4:
        return k + wire.varint_size(vbi(b, k, end))
    if k + 2 > end:
        return end + 1
    k += 2 + (b[k] << 8 | b[k + 1])
    if typ == 7:  # the pair's second string
        if k + 2 > end:
            return end + 1
        k += 2 + (b[k] << 8 | b[k + 1])
    return k


def check_props(t, b, i, n):
    """Check the property block at b[i], the packet's body ending at n, of a packet of type t
    (0 for a CONNECT's will properties; with the sender's bits if known) -> the offset after
    the block. Raises ProtocolError for an identifier that is unknown or not allowed in t, a
    property repeated that may appear once, a value of the wrong size or range, or a length
    running past the block or the packet."""
    v = vbi(b, i, n)
    i += wire.varint_size(v)
    end = i + v
    if end > n:
        fail5(_P_LEN, v, n - i)
    pt = t & 15
    seen = 0
    while i < end:
        p = b[i]
        r = p << 2
        if p > 0x2A or not PROPS[r]:
            fail5(_P_ID, p)
        if not (PROPS[r + 2] | PROPS[r + 3] << 8) >> pt & 1:
            fail5(_P_WHERE, p, t)
        bit = 1 << (PROPS[r] - 1)
        if seen & bit and p != _USER and (p != _SUBID or pt != _PUBLISH):
            fail5(_P_TWICE, p)
        seen |= bit
        k = i + 1
        typ = PROPS[r + 1]
        i = _value_end(typ & 7, b, k, end)
        if i > end:
            fail5(_P_CUT, p)
        if typ & 7 == 7:  # both strings of the pair (MQTT-1.5.7-1)
            e = k + 2 + (b[k] << 8 | b[k + 1])
            _pair_part(b, k + 2, e, "name")
            _pair_part(b, e + 2, i, "value")
        elif typ & 7 == 5:
            w = utf8(b, k + 2, i)
            if p == 8 and (w < i or i == k + 2):  # Response Topic: a topic name
                fail5(_P_RTOPIC)
        elif typ & 24 == 8:
            if b[k] > 1:
                fail5(_P_BOOL, p, b[k])
        elif typ & 24:  # not 0
            z = 0
            for j in range(k, i):
                z |= b[j]
            if not z:
                fail5(_P_ALIAS0 if p == _ALIAS else _P_SUBID0 if p == _SUBID else _P_ZERO, p)
        if p == _SUBID and pt == _PUBLISH and t & 0x30 == _BY_CLIENT:
            fail5(_P_SUBID_C)
        if p == 0x11 and pt == _DISCONNECT and t & 0x30 == _BY_SERVER:
            fail5(_P_SX_SRV)
    if seen & 0x600 == 0x400:  # Authentication Data (index 11) without its Method (10)
        fail5(_P_AD_NAM)
    return end


def _pair_part(b, i, e, what):
    try:
        utf8(b, i, e)
    except ProtocolError:
        fail5(_P_PAIR, what)


def prop(b, i, p):
    """The offset of the value of the first property p in the (checked) block at b[i], or -1."""
    v = vbi(b, i)
    i += wire.varint_size(v)
    end = i + v
    while i < end:
        if b[i] == p:
            return i + 1
        i = next_prop(b, i)
    return -1


def next_prop(b, k):
    """The offset after the property at b[k] (its identifier), in a checked block: to walk
    one, from props_start(b, i) while below props_end(b, i)."""
    return _value_end(PROPS[b[k] << 2 | 1] & 7, b, k + 1, _BIG)


def props_start(b, i):
    """The offset of the first property of the (checked) block at b[i]."""
    return i + wire.varint_size(vbi(b, i))


def props_end(b, i):
    v = vbi(b, i)
    return i + wire.varint_size(v) + v


def _end(i, n, t):
    if i != n:
        fail5(_TRAILING, t, n - i)


# ---- the client's hot packers (pack5 has the others, and the property writer)


def put_publish(buf, topic, payload, qos, retain, dup, pid, props=b"\x00"):
    """PUBLISH with the encoded property block props, unchecked (pack_publish checks): for a
    caller that checked the message when it accepted it, as wire.put_publish -> the packet's
    length. A buffer too short for the whole packet gets its head (all before the payload),
    for the caller to send the payload after it. Allocates nothing."""
    tl = len(topic)
    pl = len(payload)
    n = 2 + tl + (2 if qos else 0) + len(props) + pl
    i = wire.header(buf, 0x30 | (8 if dup else 0) | qos << 1 | (1 if retain else 0), n, n - pl)
    buf[i] = tl >> 8
    buf[i + 1] = tl & 255
    i += 2
    buf[i : i + tl] = topic
    i += tl
    if qos:
        buf[i] = pid >> 8
        buf[i + 1] = pid & 255
        i += 2
    buf[i : i + len(props)] = props
    i += len(props)
    if i + pl <= len(buf):
        buf[i : i + pl] = payload
    return i + pl


# ---- readers: what a client receives (body b[:n], fixed header removed), all checked


def connack(b, n):
    """CONNACK body -> reason code | Session Present << 8; its properties start at b[2]. A 3.1.1
    CONNACK (2 bytes, return code 1..5) is the error that says the server does not speak 5."""
    if n == 2 and 0 < b[1] < 6 and not b[0]:
        fail5(_V311, b[1])
    if n < 3:
        fail5(_SHORT, _CONNACK, n)
    f = b[0]
    c = b[1]
    if f & 0xFE:
        fail5(_ACK_FLAGS, f)
    check_rc(_CONNACK | _BY_SERVER, c)
    if c > 127 and f:
        fail5(_ACK_SP, c)
    _end(check_props(_CONNACK | _BY_SERVER, b, 2, n), n, _CONNACK)
    return c | f << 8


def ack(t, b, n):
    """PUBACK/PUBREC/PUBREL/PUBCOMP body (type t, the server's unless t has sender bits) ->
    packet identifier | reason code << 16; its properties (if n > 3) start at b[3]."""
    who = t if t & 0x30 else t | _BY_SERVER
    if n < 2:
        fail5(_SHORT, t, n)
    pid = b[0] << 8 | b[1]
    if not pid:
        fail5(_PID0, t)
    c = 0
    if n > 2:
        c = check_rc(who, b[2])
        if n > 3:
            _end(check_props(who, b, 3, n), n, t)
    return pid | c << 16


def suback(t, b, n):
    """SUBACK or UNSUBACK body (type t) -> the offset of its first reason code (one per filter,
    to the end); its packet identifier is u16(b, 0), its properties start at b[2]."""
    who = t if t & 0x30 else t | _BY_SERVER
    if n < 3:
        fail5(_SHORT, t, n)
    if not b[0] | b[1]:
        fail5(_PID0, t)
    i = check_props(who, b, 2, n)
    if i == n:
        fail5(_NO_CODES, t)
    for k in range(i, n):
        check_rc(who, b[k])
    return i


def reason(t, b, n):
    """DISCONNECT or AUTH body (type t, the server's unless t has sender bits) -> its reason
    code (0 for an empty body); its properties (if n > 1) start at b[1]."""
    who = t if t & 0x30 else t | _BY_SERVER
    if not n:
        return 0
    c = check_rc(who, b[0])
    if n > 1:
        _end(check_props(who, b, 1, n), n, t)
    if t & 15 == _AUTH and c and (n < 2 or prop(b, 1, _AUTH_METHOD) < 0):
        fail5(_AUTH_METH, c)
    return c
