"""The cut sweep: the connection is cut at every byte offset of a QoS 1 and a QoS 2
exchange, in each direction, and after every packet of it; the client reconnects
by itself and the message still arrives: at least once for QoS 1, exactly once
for QoS 2. Outbound, an independent paho-mqtt subscriber counts what arrives;
inbound, the device's own callback does.

The device is the real client, each front (MQTTClient and AsyncClient), on MicroPython
(80 KB heap) and on CPython, one process per sweep, behind the fault-injecting proxy in
front of mosquitto. Cuts
are resets (RST), as a lost Wi-Fi link looks; the session is persistent
(clean_session=False), as exactly-once needs.
"""

import collections
import time

import pytest

TIMEOUT = 20


def start(device, proxy, interp, front, name):
    d = device("sw-%s-%s-%s" % (name, front[0], interp[:2]))
    d.call(
        "init",
        id=d.client_id,
        host="127.0.0.1",
        port=proxy.port,
        reconnect=True,
        backoff_min=0.01,
        backoff_max=0.05,
        io_timeout=5,
    )
    d.call("connect", clean=False)
    return d


def heap(d):
    """-> (bytes allocated, the modules loaded)."""
    d.call("settle")
    d.call("loop", ms=60)  # a cut that came after the last ack is noticed and repaired
    d.call("events")  # drop the agent's own event log first
    r = d.call("mem")
    return r["alloc"], r["mods"]


def grew(marks, end):
    """The heap's growth up to `end` from the first of `marks` with the same modules loaded. An
    error's text or class loads once, with the first such error: on a loaded machine that may
    come after the first reconnect (the first mark), and is no growth per reconnect."""
    for alloc, mods in marks:
        if mods == end[1]:
            return end[0] - alloc
    raise AssertionError("modules still loading in the sweep's second half: %s" % (set(end[1]) - set(mods)))


def cut_points(proxy, before, packets):
    """Every byte offset of the measured exchange in each direction, and after every packet."""
    up, down = before
    points = [("up", {"at": n}) for n in range(proxy.bytes("up") - up)]
    points += [("down", {"at": n}) for n in range(proxy.bytes("down") - down)]
    seen = collections.Counter()
    for direction, name in packets:
        seen[(direction, name)] += 1
        points.append((direction, {"after": name, "nth": seen[(direction, name)]}))
    return points


def check(counts, sent, qos, points):
    lost = [m for m in sent if counts[m] == 0]
    dup = {m: counts[m] for m in sent if counts[m] > 1}
    assert not lost, "%d of %d messages lost over %d cut points: %s" % (
        len(lost),
        len(sent),
        len(points),
        lost[:10],
    )
    if qos == 2:
        assert not dup, "QoS 2 delivered more than once over %d cut points: %s" % (len(points), dup)
    assert not set(counts) - set(sent), "messages nobody sent: %s" % (set(counts) - set(sent))


@pytest.mark.parametrize("qos", [1, 2])
def test_outbound_survives_a_cut_at_every_byte_and_after_every_packet(
    device, make_proxy, make_observer, interp, front, qos, cut_report
):
    p = make_proxy()
    d = start(device, p, interp, front, "out%d" % qos)
    topic = "sweep/out/%s/%s/%d" % (front, interp, qos)
    o = make_observer()
    o.subscribe(topic, 2)
    sent = []

    def exchange():
        msg = "m%05d" % len(sent)
        sent.append(msg)
        d.call("pub", topic=topic, msg=msg, qos=qos, block=False)
        r = d.call("settle", timeout=TIMEOUT)
        assert r["pending"] == 0 and r["connected"], "not settled after %s: %s" % (msg, r)
        assert p.wait_quiet(0.02)

    # One clean exchange measures the bytes and packets to cut at.
    p.wait_quiet(0.05)
    before = (p.bytes("up"), p.bytes("down"))
    conn = p.accepted
    exchange()
    points = cut_points(p, before, p.packets(conn)[-(4 if qos == 2 else 2) :])
    assert len(points) >= (36 if qos == 2 else 22)
    marks = []
    for i, (direction, where) in enumerate(points):
        p.cut(direction, **where)
        exchange()
        if i in (0, len(points) // 2):
            marks.append(heap(d))  # after the first reconnect its one-time allocations are made
    assert p.cuts >= len(points) - 2  # a cut armed past the exchange's end may not fire
    g = grew(marks, heap(d))
    assert g < 512, "the heap grew by %d bytes over %d reconnects" % (g, p.cuts)
    o.wait_until(lambda msgs: len(msgs) >= len(sent), TIMEOUT)
    time.sleep(0.3)  # a late duplicate would arrive by now
    counts = collections.Counter(m[1].decode() for m in o.messages if m[0] == topic)
    check(counts, sent, qos, points)
    cut_report(len(points), len(sent))
    assert p.accepted >= len(points) - 2  # it reconnected after every cut


@pytest.mark.parametrize("qos", [1, 2])
def test_inbound_survives_a_cut_at_every_byte_and_after_every_packet(
    device, make_proxy, make_observer, interp, front, qos, cut_report
):
    p = make_proxy()
    d = start(device, p, interp, front, "in%d" % qos)
    topic = "sweep/in/%s/%s/%d" % (front, interp, qos)
    d.call("sub", topic=topic, qos=2)
    pub = make_observer()
    sent = []
    got = []

    def exchange():
        msg = "m%05d" % len(sent)
        sent.append(msg)
        d.begin("recv", n=1, ms=TIMEOUT * 1000, tail=30)
        pub.publish(topic, msg.encode(), qos=qos)
        r = d.result(TIMEOUT + 5)
        assert r["ok"], r
        got.extend(m[1] for m in r["msgs"])
        assert p.wait_quiet(0.02)

    p.wait_quiet(0.05)
    before = (p.bytes("up"), p.bytes("down"))
    conn = p.accepted
    exchange()
    points = cut_points(p, before, p.packets(conn)[-(4 if qos == 2 else 2) :])
    assert len(points) >= (36 if qos == 2 else 22)
    marks = []
    for i, (direction, where) in enumerate(points):
        p.cut(direction, **where)
        exchange()
        if i in (0, len(points) // 2):
            marks.append(heap(d))  # after the first reconnect its one-time allocations are made
    g = grew(marks, heap(d))
    assert g < 512, "the heap grew by %d bytes over %d reconnects" % (g, p.cuts)
    r = d.call("recv", n=10**6, ms=500)  # anything late, such as a QoS 1 duplicate
    got.extend(m[1] for m in r["msgs"])
    counts = collections.Counter(got)
    check(counts, sent, qos, points)
    cut_report(len(points), len(sent))
    firsts = [m for i, m in enumerate(got) if m not in got[:i]]
    assert firsts == sorted(firsts), "messages out of order"


def test_a_cut_during_the_reconnect_itself_loses_nothing(
    device, make_proxy, make_observer, interp, front, cut_report
):
    """A QoS 2 message is in flight when the link drops; the reconnect (CONNECT,
    CONNACK, the resent PUBLISH and the rest of the flow) is then cut at each of
    its byte offsets in turn, so the resend itself is interrupted."""
    p = make_proxy()
    d = start(device, p, interp, front, "recon")
    topic = "sweep/recon/%s/%s" % (front, interp)
    o = make_observer()
    o.subscribe(topic, 2)
    sent = []

    def exchange(second=None):
        msg = "m%05d" % len(sent)
        sent.append(msg)
        p.cut("up", after="PUBLISH")
        if second:
            p.cut(second[0], on_next=True, **second[1])
        d.call("pub", topic=topic, msg=msg, qos=2, block=False)
        r = d.call("settle", timeout=TIMEOUT)
        assert r["pending"] == 0 and r["connected"], "not settled after %s: %s" % (msg, r)
        assert p.wait_quiet(0.02)

    up = down = 0
    measured = 0
    for _ in range(10):  # measure the reconnect: the longest of three whole ones (timing can
        n = p.accepted  # shorten one, and a loaded machine split one over two connections)
        exchange()
        if p.accepted == n + 1:  # one connection carried all of it
            up, down = max(up, p.bytes("up")), max(down, p.bytes("down"))
            measured += 1
            if measured == 3:
                break
    points = [("up", {"at": n}) for n in range(up)] + [("down", {"at": n}) for n in range(down)]
    assert len(points) > 50
    for point in points:
        exchange(point)
    o.wait_until(lambda msgs: len(msgs) >= len(sent), TIMEOUT)
    time.sleep(0.3)
    counts = collections.Counter(m[1].decode() for m in o.messages if m[0] == topic)
    check(counts, sent, 2, points)
    cut_report(len(points), len(sent))
