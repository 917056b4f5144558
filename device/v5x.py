# MQTT 5's rare work, beside v5.py (the client's resident part): CONNECT and CONNACK, once a
# connection, and the wording of MQTT 5's errors. v5.py loads this module for the call that
# needs it and lets it go after (v5.drop), so a connected board holds none of it; the codec's
# pack5 likewise, for CONNECT only.
try:
    from micropython import const
except ImportError:
    from .cpython import const

from .session import fw
from . import say
from .v5 import drop, head
from .codec import wire, wire5
from .codec.wire import CodecError

DISCONNECTED = const(0)
CONNECTING = const(1)
CONNECTED = const(2)

_CONNACK = const(2)
_PUBLISH = const(3)
_ALIAS_OUT_5 = const(10)
_MALFORMED = const(20)
_STRAY_ACK = const(27)
_WRITTEN = const(16)
_STATE = const(24)
_REFUSED_5 = const(1)
_NOT_V5 = const(8)

# The texts of MQTT 5's errors, as reasons.TEXT (the codec's reasons.text() formats them):
# key, rule ("." for none), message
TEXT = """
refused_5  .             broker refused the connection: %s
sub_ref_5  .             broker refused the subscription to %r: %s
pub_ref_5  .             broker refused message %d: %s
srv_disc_5 .             the broker ended the connection: %s
too_big_5  MQTT-3.1.2-24 a packet of %d bytes is over the broker's Maximum Packet Size (%d)
cut_5      .             (no longer raised: the line keeps the numbers below)
alias_5    MQTT-3.3.2-9  a Topic Alias from the broker, which was allowed none (Topic Alias Maximum 0)
not_v5     §3.2.2.2      the broker answered with 3.1.1's refusal %d: it does not speak MQTT 5
no_store_5 .             store= is not yet available with MQTT 5: give fleetwire.MQTTClient (3.1.1) the store
alias_o_5  .             topic aliases are not yet available: leave out property 0x23
"""


def word(key, *values):
    """The text of MQTT 5 error `key` (line `key` of TEXT), as reasons.text() words one (here,
    so that wording one loads no 3 KB table beside this one). A reason code is passed as a
    tuple (type, code[, body, offset of its properties]): its name (the codec's codes5, let
    go after) and the broker's Reason String."""
    v = []
    for x in values:
        if type(x) is tuple:
            t, c = x[0], x[1]
            try:
                from .codec.codes5 import reason_name

                r = "%s (reason code 0x%02x)" % (reason_name(c, t), c)
            except MemoryError:
                r = "reason code 0x%02x" % c
            drop("codes5")
            if len(x) > 2 and x[3] < len(x[2]):
                k = wire5.prop(x[2], x[3], 0x1F)
                if k >= 0:
                    r += ': "%s"' % str(bytes(x[2][k + 2 : k + 2 + wire5.u16(x[2], k)]), "utf-8")
            x = r
        v.append(x)
    line = TEXT.split("\n")[key].split(None, 2)
    m = line[2] % tuple(v)
    return m if line[1] == "." else "%s [%s]" % (m, line[1])


def properties(b):
    """The property block b (checked on arrival), decoded -> [(identifier, value)]."""
    out = []
    k = wire5.props_start(b, 0) if b else 0
    e = wire5.props_end(b, 0) if b else 0
    while k < e:
        p = b[k]
        t = wire5.PROPS[p << 2 | 1] & 7  # its type: 1..4 numbers, 5, 6 bytes, 7 a pair
        j = k + 1
        if t == 1:
            v = b[j]
        elif t == 2:
            v = wire5.u16(b, j)
        elif t == 3:
            v = wire5.u32(b, j)
        elif t == 4:
            v = wire5.vbi(b, j)
        else:
            n = j + 2 + wire5.u16(b, j)
            v = bytes(b[j + 2 : n])
            if t == 7:
                v = (v, bytes(b[n + 2 : n + 2 + wire5.u16(b, n)]))
        out.append((p, v))
        k = wire5.next_prop(b, k)
    return out


def encode_props(pairs):
    """Session5.encode_props(): the PUBLISH property block of (identifier, value) pairs."""
    for p in pairs:
        if p[0] == 0x23:  # a Topic Alias needs the broker's maximum, kept per connection
            raise ValueError(word(_ALIAS_OUT_5))
    from .codec import pack5

    try:
        b = bytearray(pack5.props_size(pairs))
        pack5.put_props(b, 0, _PUBLISH, pairs)
        return bytes(b)
    except CodecError as e:
        raise ValueError(str(e))
    finally:
        drop("pack5")


def cut(s, i, n):
    """n more bytes at s._rb[i] of a message whose head a read cut (s._cut): kept until its
    property block is whole, then handed on from there as if read whole (s._publish5)."""
    c = s._cut
    c.extend(s._rmv[i : i + n])
    s.rest -= n
    f = s._cf
    x = head(c, 2 + (c[0] << 8 | c[1]) + (2 if f >> 24 & 6 else 0), len(c))
    if not x or x > len(c):
        if s.rest:
            return
        raise fw.ProtocolError(say(_MALFORMED, "PUBLISH ends in its properties"))
    rb, rmv, re = s._rb, s._rmv, s._re
    s._cut = None
    s._rb = c
    s._rmv = memoryview(c)
    s._re = len(c)
    s.rest = 0
    try:
        s._publish5(f >> 24, 0, f & 0xFFFFFFF)
    finally:
        s._rb, s._rmv, s._re = rb, rmv, re


def refused(s, pid, c, t):
    """PUBACK or PUBREC with reason code c of 0x80 or more: message pid of session s is
    complete, and not delivered (on_refused; a blocking publish raises PublishRefused)."""
    for k in range(s._n):
        i = s._slot(k)
        if s._p[i] == pid and s._f[i] & _STATE == _WRITTEN:
            s._release(i)
            s._advance()
            s._rf = pid | c << 16
            s._wake()
            if s.on_refused:
                s.on_refused(pid, c)
            return
    raise fw.ProtocolError(say(_STRAY_ACK, t, pid))


def start(s, now):
    """Session.start() in MQTT 5: CONNECT into s.tx -> its length."""
    if not s.clean_session:
        s.need_qos2()  # the session kept may hold QoS 2 flows either way
    if s._up_at >= 0 and not s._rn:
        from . import renew

        s._rn = renew
    ka, mi, se, mp = s._ask
    s.keepalive = ka
    s.max_inflight = mi
    s._smax = 0
    if se is None:
        se = 0 if s.clean_session else 0xFFFFFFFF
    s.session_expiry = se  # unless CONNACK says otherwise
    # The property block: Receive Maximum, what the ack queue holds (room()), so a broker
    # never sends more QoS 1/2 messages than the board can acknowledge at once
    p = bytearray(b"\x03\x21") + (len(s._fl) - len(s._sf)).to_bytes(2, "big")
    if se:
        p += b"\x11" + se.to_bytes(4, "big")
    if mp:
        p += b"\x27" + mp.to_bytes(4, "big")
    p[0] = len(p) - 1
    wire5.check_props(0x21, p, 0, len(p))  # CONNECT, the client's (a value out of range)
    w = s.will or (None, None, 0, False)
    n = 20 + len(p) + len(s.client_id)
    for f in (w[0], w[1], s.username, s.password):
        if f is not None:
            n += 2 + len(f)
    s._fit(n)
    s.tail = None
    tx = s.tx
    # 3.1.1's CONNECT at level 5 (its checks are the codec's), then MQTT 5's: the property
    # block after the keep alive, and the will's (empty) before the will topic
    try:
        n = wire.pack_connect(
            tx, s.client_id, s.clean_session, ka, w[0], w[1], w[2], w[3], s.username, s.password, b"MQTT", 5
        )
    except CodecError as e:
        raise ValueError(str(e))
    k = 2 if tx[1] < 128 else 3 if tx[2] < 128 else 4
    b = bytes(tx[k:n])
    c = 12 + len(s.client_id)  # the end of the client identifier in b
    w = 1 if b[7] & 4 else 0
    i = wire.header(tx, 0x10, len(b) + len(p) + w)
    tx[i : i + 10] = b[:10]
    tx[i + 10 : i + 10 + len(p)] = p
    i += 10 + len(p)
    tx[i : i + c - 10] = b[10:c]
    i += c - 10
    if w:
        tx[i] = 0
        i += 1
    tx[i : i + len(b) - c] = b[c:]
    s.state = CONNECTING
    s._ping_at = -1
    s._fh = s._fc = s._rp = s._re = 0
    s.last_in = s.last_out = now
    return i + len(b) - c


def connack(s, v, n):
    """The CONNACK body v (n bytes) for session s: the session is up (on_connect), or
    ConnectRefused."""
    if n == 2 and 0 < v[1] < 6 and not v[0]:
        # 3.1.1's refusal (1: unacceptable protocol version): a 3.1.1 broker (aedes)
        s.state = DISCONNECTED
        raise fw.ConnectRefused(0x84, word(_NOT_V5, v[1]))
    try:
        c = wire5.connack(v, n)
    except CodecError as e:
        raise fw.ProtocolError(say(_MALFORMED, e))
    if c & 255:
        s.state = DISCONNECTED
        raise fw.ConnectRefused(c & 255, word(_REFUSED_5, (_CONNACK, c & 255, v, 2)))
    # what the broker's properties say for this connection
    k = wire5.props_start(v, 2)
    e = wire5.props_end(v, 2)
    while k < e:
        p = v[k]
        if p == 0x21:  # Receive Maximum: caps the window
            s.max_inflight = min(s.max_inflight, wire5.u16(v, k + 1))
        elif p == 0x13:  # Server Keep Alive
            s.keepalive = wire5.u16(v, k + 1)
        elif p == 0x12:  # Assigned Client Identifier: the one to come back with
            s.client_id = bytes(v[k + 3 : k + 3 + wire5.u16(v, k + 1)])
        elif p == 0x11:  # Session Expiry Interval: the broker's wins
            s.session_expiry = wire5.u32(v, k + 1)
        elif p == 0x27:  # Maximum Packet Size
            s._smax = wire5.u32(v, k + 1)
        k = wire5.next_prop(v, k)
    s.state = CONNECTED
    s.session_present = c = c > 255
    s._up_at = s.last_in
    if s._rn:
        s._rn.renew(s, c)  # what the last connection left
    s._wake()
    if s.on_connect:
        s.on_connect(c)
