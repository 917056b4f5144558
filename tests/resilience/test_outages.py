"""Outages a deployed device meets: a link that goes silent, a broker that restarts
(with and without its store), a long time offline, and a second device with the
same client id. The device is the real client with reconnect=True, each front
(MQTTClient and AsyncClient), on MicroPython (80 KB heap) and on CPython, against
mosquitto; paho-mqtt clients watch."""

import os
import re

from fleetwire.host.testing.observer import Observer

from support import ROOT

with open(os.path.join(ROOT, "device", "session.py")) as f:
    NO_PONG = int(re.search(r"_NO_PONG = const\((\d+)\)", f.read())[1])  # its line in reasons.TEXT


def start(device, interp, front, port, name, clean=False, **kw):
    d = device("%s-%s-%s" % (name, front[0], interp[:2]))
    opts = dict(
        id=d.client_id,
        host="127.0.0.1",
        port=port,
        reconnect=True,
        backoff_min=0.05,
        backoff_max=0.5,
        io_timeout=5,
    )
    opts.update(kw)
    d.call("init", **opts)
    return d


def test_a_silent_link_is_noticed_by_keepalive_and_the_will_goes_out(
    device, make_proxy, make_observer, interp, front
):
    p = make_proxy()
    d = start(device, interp, front, p.port, "blackhole", keepalive=1)
    will = "outage/will/%s/%s" % (front, interp)
    d.call("will", topic=will, msg="gone", qos=1)
    d.call("connect", clean=True)
    watcher = make_observer()
    watcher.subscribe(will, 1)
    d.call("loop", ms=300)
    p.blackhole()  # the sockets stay open; nothing passes either way
    r = d.call("until_lost", ms=5000)
    assert r["lost"], "the client did not notice a dead link: %s" % r
    # its reason: no PINGRESP within keepalive (or the error's line in fleetwire.reasons, which
    # say() gives when the heap has no room to load the text: the 80 KB asyncio agent, once in
    # a while on a loaded machine)
    assert any(
        e.startswith("lost: ") and ("keepalive" in e or e == "lost: %d" % NO_PONG) for e in r["events"]
    ), r
    # (when: keepalive + 100 ms after the unanswered PINGREQ, specified with a fake
    # clock in tests/portable/session_cases.py; bench-free wall clocks stay out of tests)
    r = d.call("settle", ms=5000)
    assert r["connected"], "no reconnect after the dead link"
    assert p.accepted == 2
    # The broker hears nothing from the old connection either: it ends it and sends the will.
    got = watcher.wait_for(1, timeout=10)
    assert got[0][:2] == (will, b"gone")


def test_a_broker_restart_loses_nothing_and_keeps_the_subscriptions(device, fresh_mosquitto, interp, front):
    b = fresh_mosquitto(persistence=True)
    topic, inbound = "restart/%s/%s/out" % (front, interp), "restart/%s/%s/in" % (front, interp)
    o = Observer(b.host, b.port, client_id="restart-watch-%s-%s" % (front, interp), clean_session=False)
    try:
        o.subscribe(topic, 1)
        d = start(device, interp, front, b.port, "restart", queue_size=64)
        d.call("connect", clean=False)
        d.call("sub", topic=inbound, qos=1)
        r1 = d.call("fill", topic=topic, prefix="a", max=20)
        d.call("settle")
        b.stop()  # a clean stop: mosquitto writes its store
        r2 = d.call("fill", topic=topic, prefix="b", max=20)  # offline: queued
        assert (r1["accepted"], r2["accepted"]) == (20, 20)
        b.start()
        r = d.call("settle", ms=15000)
        assert r["pending"] == 0 and r["connected"], r
        want = ["a%04d" % i for i in range(20)] + ["b%04d" % i for i in range(20)]
        msgs = o.wait_until(lambda m: {x[1].decode() for x in m} >= set(want), 15)
        firsts = []
        for m in msgs:
            if m[1].decode() not in firsts:
                firsts.append(m[1].decode())
        assert firsts == want  # in order, nothing lost
        # The subscription survived in the broker's store: no resubscribe needed or done.
        o.publish(inbound, b"after the restart", qos=1)
        got = d.call("recv", n=1, ms=5000)["msgs"]
        assert [m[1] for m in got] == ["after the restart"]
    finally:
        o.close()


def test_a_broker_that_lost_the_session_gets_the_subscriptions_again(device, fresh_mosquitto, interp, front):
    b = fresh_mosquitto()  # no persistence: a restart forgets every session
    inbound = "forgot/%s/%s" % (front, interp)
    d = start(device, interp, front, b.port, "forgot")
    assert d.call("connect", clean=False)["present"] == 0
    d.call("sub", topic=inbound, qos=1)
    b.stop()
    b.start()
    r = d.call("settle", ms=10000)
    assert r["connected"]
    assert "connected: 0" in d.call("events")["events"]  # the broker said: no session
    o = Observer(b.host, b.port)
    try:
        for _ in range(50):  # the resubscription may still be on its way
            o.publish(inbound, b"hello again", qos=1)
            got = d.call("recv", n=1, ms=200)["msgs"]
            if got:
                break
        assert got and got[0][1] == "hello again", "the device did not resubscribe"
    finally:
        o.close()


def test_offline_the_queue_fills_says_so_and_drains_in_order(
    device, make_proxy, make_observer, interp, front
):
    p = make_proxy()
    topic = "offline/%s/%s" % (front, interp)
    o = make_observer()
    o.subscribe(topic, 1)
    d = start(device, interp, front, p.port, "offline", queue_size=8, max_inflight=4)
    d.call("connect", clean=False)
    p.refuse(seconds=3600)  # the broker is unreachable from now on
    p.cut_now()
    d.call("loop", ms=200)
    r = d.call("fill", topic=topic, max=100)
    assert r["accepted"] == 8, r  # queue_size counts queued and in-flight messages
    # the class says it; so does the text where the heap has room to load it, else its
    # key (fleetwire.say: the texts load only when an error is raised)
    assert r["full"].startswith("QueueFull: "), r
    assert "queue full" in r["full"] or r["full"] == "QueueFull: 6", r
    d.call("loop", ms=1000)  # retrying against a refusing broker changes nothing
    assert d.call("state")["pending"] == r["accepted"]
    p.refuse(seconds=0)
    s = d.call("settle", ms=10000)
    assert s["pending"] == 0 and s["connected"], s
    want = ["%04d" % i for i in range(r["accepted"])]
    msgs = o.wait_until(lambda m: len(m) >= len(want), 10)
    assert [m[1].decode() for m in msgs] == want


def test_offline_with_drop_oldest_the_oldest_qos0_go_and_are_counted(
    device, make_proxy, make_observer, interp, front
):
    p = make_proxy()
    topic = "dropold/%s/%s" % (front, interp)
    o = make_observer()
    o.subscribe(topic, 0)
    d = start(device, interp, front, p.port, "dropold", queue_size=8, max_inflight=4, drop_oldest=True)
    d.call("connect", clean=True)
    p.refuse(seconds=3600)
    p.cut_now()
    d.call("loop", ms=200)
    r = d.call("fill", topic=topic, qos=0, max=20)
    assert r == {"ok": True, "accepted": 20, "full": None}
    ev = d.call("events")
    assert ev["counts"]["discarded"] == 12
    p.refuse(seconds=0)
    d.call("settle", ms=10000)
    msgs = o.wait_until(lambda m: len(m) >= 8, 10)
    assert [m[1].decode() for m in msgs] == ["%04d" % i for i in range(12, 20)]  # the newest 8


def test_two_devices_with_one_client_id_are_told_instead_of_fighting(device, mosquitto, interp, front):
    ids = "twin-%s-%s" % (front[0], interp)
    a = device(ids)
    b = device(ids)
    for d in (a, b):
        d.call(
            "init",
            id=ids,
            host="127.0.0.1",
            port=mosquitto.port,
            reconnect=True,
            backoff_min=0.05,
            backoff_max=0.2,
            io_timeout=5,
        )
    a.call("connect")
    b.call("connect")  # takes the session over: a is closed by the broker
    errors = []
    for _ in range(40):
        for d in (a, b):
            if d in errors:
                continue
            r = d.try_call("loop", ms=100)
            if not r["ok"]:
                errors.append(d)
                assert "SessionTakenOver" in r["error"] and ids in r["error"], r["error"]
        if errors:
            break
    assert errors, "two devices with one client id went on knocking each other off"
    # The one that gave up stays away; the other keeps its connection.
    other = b if errors[0] is a else a
    other.call("loop", ms=500)
    assert other.call("state")["connected"]


def test_a_failing_callback_ends_the_link_unacknowledged_and_the_client_comes_back(
    device, mosquitto, make_observer, interp, front
):
    # MQTT-4.8.0-2: the application's error ends the link before the message is
    # acknowledged, so the broker sends it again. MQTTClient raises it from the program's
    # loop(), whose next call reconnects; AsyncClient has no call of the program's under
    # way: on_disconnect says why and it reconnects by itself (it used to stay down).
    topic = "cbfail/%s/%s" % (front, interp)
    d = start(device, interp, front, mosquitto.port, "cbfail")
    d.call("connect", clean=False)
    d.call("sub", topic=topic, qos=1)
    d.call("fail_next")
    make_observer().publish(topic, b"m1", qos=1)
    r = d.try_call("recv", n=1, ms=3000)
    if front == "blocking":
        assert not r["ok"] and "RuntimeError: the application failed on m1" in r["error"], r
        r = d.call("recv", n=1, ms=5000)
    assert r["ok"] and [m[1] for m in r["msgs"]] == ["m1"], r
    ev = d.call("events")
    assert ev["counts"]["lost"] == 1 and ev["counts"]["connected"] == 2, ev
    assert "lost: the application failed on m1" in ev["events"], ev
    assert d.call("state")["connected"]
