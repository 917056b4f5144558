"""The client end to end against every broker of the matrix (fleetwire.host.brokers:
mosquitto, aedes, amqtt, RabbitMQ), as a device process on the MicroPython unix port
(80 KB heap) and on CPython, each front (MQTTClient and AsyncClient), with paho-mqtt as the
other party: the client interoperability scenarios, one test each.

Where a broker departs from MQTT 3.1.1 the test asserts what that broker does (its
quirk: broker.quirk(feature) names it, its class describes it, the broker matrix in
docs/reference/brokers.md lists it) and the standard everywhere else, so a broker that
changes either way fails here; where a broker breaks the standard, the client copes (RabbitMQ's PUBACK for a
QoS 2 message completes it). Brokers are shared by the session:
each test uses topics and client ids of its own, and every client logs in."""

import signal
import time
import zlib

import pytest


@pytest.fixture
def tag(request, interp, front):
    """A short name of this test on this interpreter and front, for its topics and client
    ids. Every test takes it, so every test runs on both fronts (MQTTClient, AsyncClient)."""
    return "%08x-%s%s" % (zlib.crc32(request.node.originalname.encode()), interp[:2], front[0])


@pytest.fixture
def observer(broker, make_observer):
    """observer() -> a new paho-mqtt party on the broker, logged in."""
    return lambda **kw: make_observer(broker, username=broker.USER, password=broker.PASSWORD, **kw)


def connect(device, broker, cid, keepalive=30, clean=True, **kw):
    d = device(cid)
    d.call("init", id=cid, host=broker.host, port=broker.port, keepalive=keepalive, **broker.login, **kw)
    d.call("connect", clean=clean)
    return d


def quiet(d, ms=300):
    """Nothing (more) arrives at device d within ms."""
    assert d.call("recv", n=1, ms=ms)["msgs"] == []


# ---- sessions


def test_MQTT_3_1_2_6_and_3_2_2_2_a_clean_session_discards_the_persistent_one(device, broker, tag):
    d = device()
    d.call("init", id="cs-" + tag, host=broker.host, port=broker.port, keepalive=30, **broker.login)
    presents = []
    for clean, subscribe in ((True, False), (False, True), (False, False), (True, False), (False, False)):
        presents.append(d.call("connect", clean=clean)["present"])
        if subscribe:  # a session with something in it: aedes and RabbitMQ count only those
            d.call("sub", topic="fw/%s/x" % tag, qos=1)
        d.call("disconnect")
    # first clean, first persistent (new), persistent again (kept), clean, persistent after clean (new)
    standard = [0, 0, 1, 0, 0]
    assert presents == {"always_present": [0, 1, 1, 0, 1]}.get(broker.quirk("session"), standard)


def test_MQTT_3_1_2_6_a_clean_connect_starts_without_the_old_subscriptions(device, broker, observer, tag):
    d = connect(device, broker, "cs1-" + tag, clean=False)
    d.call("sub", topic="fw/%s/old" % tag, qos=1)
    d.call("disconnect")
    assert d.call("connect", clean=True)["present"] == 0
    d.call("loop", ms=500)  # whatever the client sends by itself after CONNACK is done
    observer().publish("fw/%s/old" % tag, b"not for you", qos=1)
    quiet(d, 1000)


def test_a_persistent_session_without_subscriptions_is_present(device, broker, tag):
    d = device()
    d.call("init", id="cs0-" + tag, host=broker.host, port=broker.port, keepalive=30, **broker.login)
    d.call("connect", clean=False)
    d.call("disconnect")
    present = d.call("connect", clean=False)["present"]
    d.call("disconnect")
    d.call("connect", clean=True)  # leaves nothing behind
    assert present == (0 if broker.quirk("session") == "present_needs_subscriptions" else 1)


def test_MQTT_3_1_3_6_a_zero_length_client_id_with_a_clean_session_is_accepted(device, broker, observer, tag):
    d = connect(device, broker, "")
    d.call("sub", topic="fw/%s/in" % tag, qos=1)
    observer().publish("fw/%s/in" % tag, b"hi", qos=1)
    assert d.call("recv", n=1)["msgs"] == [["fw/%s/in" % tag, "hi", 1, False]]


# ---- QoS


def test_publishes_arrive_as_each_qos_promises(device, broker, observer, tag):
    obs = observer()
    g = obs.subscribe("fw/%s/#" % tag, 2)
    assert g == broker.grants(2)
    d = connect(device, broker, "out-" + tag)
    for qos in (0, 1, 2):
        d.call("pub", topic="fw/%s/%d" % (tag, qos), msg="q%d" % qos, qos=qos)
    obs.wait_for(3, timeout=10)
    time.sleep(0.3)  # QoS 2: exactly once
    got = sorted((t.rsplit("/", 1)[1], p, q) for t, p, q, r in obs.messages)
    assert got == [(str(q), b"q%d" % q, broker.delivers_at(broker.takes_at(q), g)) for q in (0, 1, 2)]


def test_many_pipelined_qos1_and_qos2_publishes_all_arrive_once(device, broker, observer, tag):
    obs = observer()
    obs.subscribe("fw/%s/#" % tag, 2)
    d = connect(device, broker, "pipe-" + tag)
    for i in range(60):
        d.call("pub", topic="fw/%s/%d" % (tag, i % 2 + 1), msg="m%d" % i, qos=i % 2 + 1, block=False)
        d.call("loop", ms=0)
    assert d.call("loop", ms=2000)["pending"] == 0
    obs.wait_for(60, timeout=10)
    time.sleep(0.3)
    assert sorted(p for t, p, q, r in obs.messages) == sorted(b"m%d" % i for i in range(60))


def test_messages_arrive_at_every_qos(device, broker, observer, tag):
    d = connect(device, broker, "in-" + tag)
    g = d.call("sub", topic="fw/%s/#" % tag, qos=2)["rc"]
    assert g == broker.grants(2)
    obs = observer()
    for qos in (0, 1, 2):
        obs.publish("fw/%s/%d" % (tag, qos), b"p%d" % qos, qos=qos)
    msgs = sorted(d.call("recv", n=3, ms=5000)["msgs"])
    assert msgs == [["fw/%s/%d" % (tag, q), "p%d" % q, broker.delivers_at(q, g), False] for q in (0, 1, 2)]
    quiet(d)


def test_MQTT_3_8_4_6_a_message_arrives_at_the_lower_of_its_qos_and_the_granted_qos(
    device, broker, observer, tag
):
    d = connect(device, broker, "down-" + tag)
    assert d.call("sub", topic="fw/%s/#" % tag, qos=1)["rc"] == 1
    obs = observer()
    for qos in (0, 1, 2):
        obs.publish("fw/%s/%d" % (tag, qos), b"p%d" % qos, qos=qos)
    msgs = sorted(d.call("recv", n=3, ms=5000)["msgs"])
    assert [m[2] for m in msgs] == [broker.delivers_at(q, 1) for q in (0, 1, 2)]
    quiet(d)


# ---- retained


def test_a_retained_message_reaches_later_subscribers_and_an_empty_one_clears_it(
    device, broker, observer, tag
):
    topic = "fw/%s/state" % tag
    d = connect(device, broker, "ret-" + tag)
    d.call("pub", topic=topic, msg="on", qos=1, retain=True)
    exact = connect(device, broker, "ret1-" + tag)
    exact.call("sub", topic=topic, qos=1)
    got_exact = exact.call("recv", n=1)["msgs"]
    wild = connect(device, broker, "ret2-" + tag)
    on_connect = wild.call("recv", n=1, ms=500)["msgs"]  # before it subscribes to anything
    wild.call("sub", topic="fw/%s/#" % tag, qos=1)
    got_wild = wild.call("recv", n=1, ms=1000)["msgs"]
    quiet(wild)
    d.call("pub", topic=topic, msg="", qos=1, retain=True)  # clears it
    # the clearing message reaches the subscribers there are, as a live one: RETAIN 0 (MQTT-3.3.1-9)
    cleared = exact.call("recv", n=1)["msgs"]
    later = connect(device, broker, "ret3-" + tag)
    later.call("sub", topic=topic, qos=1)
    quiet(later)

    kept = [topic, "on", 1, True]
    q = broker.quirk("retained")
    assert got_exact == [kept]
    assert on_connect == ([[topic, "on", 0, True]] if q == "pushed_on_connect" else [])
    assert got_wild == ([] if q == "exact_only" else [kept])
    assert cleared == [[topic, "", 1, False]]


def test_a_retained_qos2_message_arrives_once_with_the_retained_flag(device, broker, observer, tag):
    topic = "fw/%s/r2" % tag
    qos = broker.delivers_at(2, broker.grants(2))
    obs = observer()
    obs.publish(topic, b"kept", qos=2, retain=True)
    try:
        d = connect(device, broker, "r2-" + tag)
        d.call("sub", topic=topic, qos=2)
        msgs = d.call("recv", n=1)["msgs"]
        quiet(d, 500)
    finally:
        obs.publish(topic, b"", qos=1, retain=True)
    assert msgs == [[topic, "kept", qos, True]]


# ---- will


def test_the_will_is_published_when_the_device_dies(device, broker, observer, tag):
    obs = observer()
    obs.subscribe("fw/%s/#" % tag, 1)
    d = device()
    d.call("init", id="will-" + tag, host=broker.host, port=broker.port, keepalive=30, **broker.login)
    d.call("will", topic="fw/%s/will" % tag, msg="gone", qos=1)
    d.call("connect")
    d.kill()
    msgs = obs.wait_for(1, timeout=10)
    assert msgs[0][:3] == ("fw/%s/will" % tag, b"gone", 1)


def test_MQTT_3_1_2_10_no_will_after_a_clean_disconnect(device, broker, observer, tag):
    obs = observer()
    obs.subscribe("fw/%s/#" % tag, 1)
    d = device()
    d.call("init", id="nowill-" + tag, host=broker.host, port=broker.port, keepalive=30, **broker.login)
    d.call("will", topic="fw/%s/will" % tag, msg="gone", qos=1)
    d.call("connect")
    d.call("disconnect")
    d.close()
    time.sleep(0.5)
    assert obs.messages == []


# ---- keepalive


def test_keepalive_pings_keep_an_idle_link_up(device, broker, tag):
    d = connect(device, broker, "ka-" + tag, keepalive=1)
    r = d.call("until_lost", ms=3500)
    assert not r["lost"], r["events"]
    assert d.call("state")["connected"]


def test_MQTT_3_1_2_24_a_silent_client_is_dropped_and_its_will_published(device, broker, observer, tag):
    # Deadlines are generous (a loaded machine is slow); they tell dropped from never dropped.
    q = broker.quirk("keepalive")
    obs = observer()
    obs.subscribe("fw/%s/#" % tag, 1)
    d = device()
    d.call("init", id="silent-" + tag, host=broker.host, port=broker.port, keepalive=1, **broker.login)
    d.call("will", topic="fw/%s/will" % tag, msg="silent", qos=1)
    d.call("connect")
    d.proc.send_signal(signal.SIGSTOP)  # the device stops: no PINGREQ, the socket stays open
    try:
        t0 = time.monotonic()
        if q == "never_drops":
            time.sleep(4)
            assert obs.messages == []
            return
        msgs = obs.wait_for(1, timeout=15)
        waited = time.monotonic() - t0
    finally:
        d.proc.send_signal(signal.SIGCONT)
    assert msgs[0][:2] == ("fw/%s/will" % tag, b"silent")
    limit = 10 if q == "late_drop" else 3  # 1.5 s, and slack
    assert waited < limit, "the will came %.1f s after the device went silent (keepalive 1 s)" % waited


# ---- subscriptions


def test_MQTT_3_10_4_1_unsubscribe_stops_delivery(device, broker, observer, tag):
    d = connect(device, broker, "unsub-" + tag)
    d.call("sub", topic="fw/%s/a" % tag, qos=1)
    d.call("sub", topic="fw/%s/b" % tag, qos=1)
    obs = observer()
    obs.publish("fw/%s/a" % tag, b"1", qos=1)
    assert d.call("recv", n=1)["msgs"] == [["fw/%s/a" % tag, "1", 1, False]]
    d.call("unsub", topic="fw/%s/a" % tag)
    obs.publish("fw/%s/a" % tag, b"2", qos=1)
    obs.publish("fw/%s/b" % tag, b"3", qos=1)
    assert d.call("recv", n=1)["msgs"] == [["fw/%s/b" % tag, "3", 1, False]]
    quiet(d)


@pytest.mark.parametrize("higher", ["wildcard", "exact"])
def test_MQTT_3_3_5_1_overlapping_subscriptions_deliver_at_the_highest_qos(
    device, broker, observer, tag, higher
):
    # the lower subscription (QoS 0) first, then the higher (QoS 2)
    topic = "fw/%s/%s/x" % (tag, higher)
    wild = "fw/%s/%s/#" % (tag, higher)
    subs = [(topic, 0), (wild, 2)] if higher == "wildcard" else [(wild, 0), (topic, 2)]
    d = connect(device, broker, "ov-%s-%s" % (higher[0], tag))
    for f, q in subs:
        d.call("sub", topic=f, qos=q)
    observer().publish(topic, b"both", qos=2)
    msgs = d.call("recv", n=1, ms=3000)["msgs"] + d.call("recv", n=1, ms=500)["msgs"]
    qos = sorted(m[2] for m in msgs)
    top = broker.delivers_at(2, broker.grants(2))
    q = broker.quirk("overlap")
    if q == "lowest_qos":
        assert qos == [0], msgs
    elif q == "first_match":
        assert qos == ([0] if higher == "wildcard" else [top]), msgs
    else:  # one copy at the highest QoS, or one per subscription (allowed)
        assert qos in ([top], [0, top]), msgs


def test_a_refused_subscription_raises_and_the_client_goes_on(device, broker, observer, tag):
    d = connect(device, broker, "deny-" + tag)
    denied = broker.DENIED_PREFIX + tag
    r = d.try_call("sub", topic=denied, qos=1)
    assert not r["ok"]
    if broker.quirk("sub_refused") == "closes":
        # the broker closed the link: the client says so (OSError, ConnectionResetError on CPython)
        assert "connection closed by the broker" in r["error"], r["error"]
        assert not d.call("state")["connected"]
        d.call("connect")
    else:
        assert r["error"] == "SubscribeRefused: broker refused the subscription to %r" % denied
    assert d.call("sub", topic="fw/%s/ok" % tag, qos=1)["rc"] == 1
    observer().publish("fw/%s/ok" % tag, b"fine", qos=1)
    assert d.call("recv", n=1)["msgs"] == [["fw/%s/ok" % tag, "fine", 1, False]]


def test_MQTT_4_7_2_1_a_wildcard_filter_matches_no_dollar_topic(device, broker, observer, tag, request):
    if broker.quirk("retained") == "pushed_on_connect":
        # amqtt remembers every filter ever subscribed and pushes the retained messages that match
        # them to each client that connects: "#" and "$SYS/#" would reach every later test's clients
        from fleetwire.host.brokers import make

        broker = make(broker.name).start()
        request.addfinalizer(broker.close)
    sys = connect(device, broker, "sys-" + tag)
    sys.call("sub", topic="$SYS/#", qos=0)
    sys_got = sys.call("recv", n=1, ms=2500)["msgs"]
    sys.call("unsub", topic="$SYS/#")  # mosquitto sends dozens each second: more than 80K hold
    everything = connect(device, broker, "all-" + tag)
    everything.call("recv", n=1000, ms=500)  # what comes on connecting (amqtt: retained, see its test)
    everything.call("sub", topic="#", qos=0)
    obs = request.getfixturevalue("make_observer")(broker, username=broker.USER, password=broker.PASSWORD)
    obs.publish("fw/%s/plain" % tag, b"x", qos=1)
    got = everything.call("recv", n=1000, ms=2500)["msgs"]  # with $SYS news of the observer, on some
    assert ["fw/%s/plain" % tag, "x", 0, False] in got
    assert [m[0] for m in got if m[0].startswith("$")] == []
    sys_roots = {m[0].split("/")[0] for m in sys_got}
    assert sys_roots == (set() if broker.quirk("dollar") == "no_sys" else {"$SYS"})


# ---- sessions across reconnects


def test_MQTT_3_1_3_2_a_persistent_session_keeps_messages_sent_while_away(device, broker, observer, tag):
    cid = "away-" + tag
    d = connect(device, broker, cid, clean=False)
    d.call("sub", topic="fw/%s/#" % tag, qos=2)
    d.call("disconnect")
    obs = observer()
    for qos in (1, 2):
        obs.publish("fw/%s/%d" % (tag, qos), b"while-away-%d" % qos, qos=qos)
    assert d.call("connect", clean=False)["present"] == 1
    msgs = sorted(d.call("recv", n=2)["msgs"])
    g = broker.grants(2)
    if broker.quirk("offline") == "retain_set":
        # amqtt sets RETAIN on what it queued; a message its queue handed over while the
        # client was still connecting has it clear (seen under load): the flag as sent
        msgs = [m[:3] for m in msgs]
        want = [["fw/%s/%d" % (tag, q), "while-away-%d" % q, broker.delivers_at(q, g)] for q in (1, 2)]
    else:
        want = [["fw/%s/%d" % (tag, q), "while-away-%d" % q, broker.delivers_at(q, g), False] for q in (1, 2)]
    assert msgs == want
    quiet(d)


def test_MQTT_4_4_0_1_unacknowledged_messages_are_sent_again_after_reconnecting(
    device, broker, observer, tag
):
    cid = "redo-" + tag
    d = connect(device, broker, cid, clean=False)
    d.call("sub", topic="fw/%s/#" % tag, qos=2)
    obs = observer()
    for qos in (1, 2):  # the device does not read: they wait in its socket, unacknowledged
        obs.publish("fw/%s/%d" % (tag, qos), b"redo-%d" % qos, qos=qos)
    time.sleep(0.3)
    d.kill()
    d2 = connect(device, broker, cid, clean=False)
    if broker.quirk("redelivery") == "lost":
        quiet(d2, 1500)
        return
    msgs = sorted(d2.call("recv", n=2)["msgs"])
    g = broker.grants(2)
    assert msgs == [["fw/%s/%d" % (tag, q), "redo-%d" % q, broker.delivers_at(q, g), False] for q in (1, 2)]
    quiet(d2)


@pytest.mark.parametrize("qos", [1, 2])
def test_a_backlog_of_40_messages_arrives_after_reconnecting(device, broker, observer, tag, qos, request):
    cid = "blog%d-%s" % (qos, tag)
    d = connect(device, broker, cid, clean=False)
    d.call("sub", topic="fw/%s/%d/#" % (tag, qos), qos=qos)
    d.call("disconnect")
    obs = observer()
    for i in range(40):
        obs.publish("fw/%s/%d/m" % (tag, qos), b"%02d" % i, qos=qos)
    assert d.call("connect", clean=False)["present"] == 1
    time.sleep(0.5)  # the device is busy: what the broker sends piles up in its socket
    got = [m[1] for m in d.call("recv", n=40, ms=10000)["msgs"]]
    got += [m[1] for m in d.call("recv", n=1, ms=300)["msgs"]]
    if qos == 1:  # at least once: a copy more is allowed (amqtt sends one now and then)
        assert set(got) == {"%02d" % i for i in range(40)}
    else:
        assert sorted(got) == ["%02d" % i for i in range(40)]
