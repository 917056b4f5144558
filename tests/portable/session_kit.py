# What the portable session case modules share: a session connected to a scripted
# broker, the packets it writes, the events it raises. Imported by its bare name, as
# run.py is (tests/portable/harness.py puts it beside them on MicroPython).
from fleetwire.session import Session
from fleetwire.feed import feed
from fleetwire.codec import packets as P


def packet(s, n):
    """The n-byte packet the session packed, as an I/O loop writes it: tx, then the tail (a
    long message's payload, written from the caller's bytes)."""
    t = s.tail
    return bytes(s.tx[: n - len(t)]) + bytes(t) if t else bytes(s.tx[:n])


def raw_out(s, now=0):
    """Every packet the session writes now, as bytes."""
    res = []
    while True:
        n = s.pack(now)
        if not n:
            return res
        s.last_out = now
        res.append(packet(s, n))


def start(s, now=0):
    """The CONNECT the session starts with, decoded (written, as an I/O loop would)."""
    n = s.start(now)
    s.last_out = now
    return [P.decode_all(packet(s, n))[0]]


def out(s, now=0):
    """Every packet the session writes now, decoded."""
    return [P.decode_all(p)[0] for p in raw_out(s, now)]


def recv(s, *pkts, now=0):
    feed(s, b"".join(p.encode() for p in pkts), now)


def session(present=False, clean=True, now=0, **kw):
    s = Session(b"dev", clean_session=clean, **kw)
    s.start(now)
    out(s, now)
    recv(s, P.Connack(present, 0), now=now)
    return s


def eq(got, want):
    if got != want:
        raise AssertionError("got %r, want %r" % (got, want))


def events(s):
    log = []
    s.cb = lambda t, m: log.append(("msg", t, m, s.qos))
    s.on_delivered = lambda pid: log.append(("delivered", pid))
    s.on_discarded = lambda t, m, q: log.append(("discarded", t, m, q))
    return log


def reconnect(s, present, now=0):
    s.lost(now, None)
    c = start(s, now)
    recv(s, P.Connack(present, 0), now=now)
    return c


def raw_publish(topic, payload, qos=0, pid=0):
    # PUBLISH bytes the codec would refuse to build
    body = bytes([len(topic) >> 8, len(topic) & 255]) + topic
    if qos:
        body += bytes([pid >> 8, pid & 255])
    body += payload
    return bytes([0x30 | qos << 1, len(body)]) + body
