"""The client end to end against a real mosquitto on loopback, as a device process on
the MicroPython unix port (96 KB heap) and on CPython, with paho-mqtt as the other
party."""
import time



def connect(device, broker, keepalive=30, clean=True, **kw):
    d = device()
    d.call("init", id=d.client_id, host=broker.host, port=broker.port, keepalive=keepalive, **kw)
    d.call("connect", clean=clean)
    return d


def test_publishes_arrive_as_each_qos_promises(device, mosquitto, observer):
    observer.subscribe("fw/out/#", 2)
    d = connect(device, mosquitto)
    for qos in (0, 1, 2):
        d.call("pub", topic="fw/out/%d" % qos, msg="q%d" % qos, qos=qos)
    msgs = observer.wait_for(3, timeout=10)
    assert sorted((t, p, q) for t, p, q, r in msgs) == [
        ("fw/out/0", b"q0", 0), ("fw/out/1", b"q1", 1), ("fw/out/2", b"q2", 2)]
    time.sleep(0.3)
    assert len(observer.messages) == 3  # QoS 2: exactly once


def test_many_pipelined_qos1_and_qos2_publishes_all_arrive_once(device, mosquitto, observer):
    observer.subscribe("fw/pipe/#", 2)
    d = connect(device, mosquitto)
    for i in range(60):
        d.call("pub", topic="fw/pipe/%d" % (i % 2 + 1), msg="m%d" % i, qos=i % 2 + 1, block=False)
        d.call("loop", ms=0)
    r = d.call("loop", ms=2000)
    assert r["pending"] == 0
    msgs = observer.wait_for(60, timeout=10)
    qos2 = [p for t, p, q, _ in msgs if t == "fw/pipe/2"]
    assert sorted(qos2) == sorted(b"m%d" % i for i in range(1, 60, 2))  # each once
    assert {p for t, p, q, _ in msgs} == {b"m%d" % i for i in range(60)}


def test_publishing_in_steady_state_allocates_nothing(device, mosquitto, observer, interp):
    # QoS 0 (written at once, past the queue) and QoS 1 (pipelined through the window)
    observer.subscribe("fw/alloc/#", 1)
    d = connect(device, mosquitto)
    got = {qos: d.call("pub_alloc", topic="fw/alloc/%d" % qos, qos=qos)["alloc"] for qos in (0, 1)}
    observer.wait_for(2 * 120, timeout=20)
    if interp == "micropython":  # gc.mem_alloc is the measure
        assert got == {0: 0, 1: 0}, "bytes allocated by 100 publishes: %r" % got


def test_messages_arrive_at_every_qos(device, mosquitto, observer):
    d = connect(device, mosquitto)
    assert d.call("sub", topic="fw/in/#", qos=2)["rc"] == 2
    for qos in (0, 1, 2):
        observer.publish("fw/in/%d" % qos, b"p%d" % qos, qos=qos)
    msgs = d.call("recv", n=3, ms=5000)["msgs"]
    assert sorted(msgs) == [["fw/in/0", "p0", 0, False], ["fw/in/1", "p1", 1, False],
                            ["fw/in/2", "p2", 2, False]]
    assert d.call("recv", n=1, ms=300)["msgs"] == []  # nothing twice


def test_granted_qos_is_the_lower_of_publish_and_subscription(device, mosquitto, observer):
    d = connect(device, mosquitto)
    d.call("sub", topic="fw/down", qos=1)
    observer.publish("fw/down", b"x", qos=2)
    assert d.call("recv", n=1)["msgs"] == [["fw/down", "x", 1, False]]


def test_a_retained_message_reaches_later_subscribers(device, mosquitto, observer, make_observer):
    d = connect(device, mosquitto)
    d.call("pub", topic="fw/retained/state", msg="on", qos=1, retain=True)
    later = make_observer(mosquitto)
    later.subscribe("fw/retained/#", 1)
    assert [(t, p, r) for t, p, q, r in later.wait_for(1)] == [("fw/retained/state", b"on", True)]
    d2 = connect(device, mosquitto)
    d2.call("sub", topic="fw/retained/#", qos=1)
    assert d2.call("recv", n=1)["msgs"] == [["fw/retained/state", "on", 1, True]]
    d.call("pub", topic="fw/retained/state", msg="", qos=1, retain=True)  # clears it


def test_the_will_is_published_when_the_device_dies(device, mosquitto, observer):
    observer.subscribe("fw/will/#", 1)
    d = device()
    d.call("init", id=d.client_id, host=mosquitto.host, port=mosquitto.port, keepalive=30)
    d.call("will", topic="fw/will/" + d.client_id, msg="gone", qos=1)
    d.call("connect")
    d.kill()
    msgs = observer.wait_for(1, timeout=10)
    assert msgs[0][:3] == ("fw/will/" + d.client_id, b"gone", 1)


def test_no_will_after_a_clean_disconnect(device, mosquitto, observer):
    observer.subscribe("fw/will2/#", 1)
    d = device()
    d.call("init", id=d.client_id, host=mosquitto.host, port=mosquitto.port, keepalive=30)
    d.call("will", topic="fw/will2/x", msg="gone", qos=1)
    d.call("connect")
    d.call("disconnect")
    d.close()
    time.sleep(0.5)
    assert observer.messages == []


def test_MQTT_3_1_3_2_a_persistent_session_keeps_messages_sent_while_away(device, mosquitto, observer):
    d = device()
    cid = d.client_id
    d.call("init", id=cid, host=mosquitto.host, port=mosquitto.port, keepalive=30)
    assert d.call("connect", clean=False)["present"] == 0
    d.call("sub", topic="fw/away/#", qos=1)
    d.call("disconnect")
    for i in range(3):
        observer.publish("fw/away/%d" % i, b"while-away-%d" % i, qos=1)
    assert d.call("connect", clean=False)["present"] == 1
    msgs = d.call("recv", n=3)["msgs"]
    assert sorted(m[1] for m in msgs) == ["while-away-0", "while-away-1", "while-away-2"]


def test_a_clean_session_starts_without_the_old_one(device, mosquitto):
    d = connect(device, mosquitto, clean=False)
    d.call("disconnect")
    assert d.call("connect", clean=True)["present"] == 0


def test_tls_with_the_broker_ca(device, mosquitto_tls, make_observer):
    b = mosquitto_tls
    obs = make_observer(b)
    obs.subscribe("fw/tls", 1)
    d = device()
    d.call("init", id=d.client_id, host="localhost", port=b.tls_port, keepalive=30, tls=True,
           ca_der=str(b.ca_der), ca_pem=str(b.ca_pem))
    d.call("connect")
    d.call("sub", topic="fw/tls/in", qos=1)
    d.call("pub", topic="fw/tls", msg="secret", qos=1)
    assert [m[1] for m in obs.wait_for(1)] == [b"secret"]
    obs.publish("fw/tls/in", b"back", qos=1)
    assert d.call("recv", n=1)["msgs"] == [["fw/tls/in", "back", 1, False]]


def test_a_refused_connection_names_the_reason(device, mosquitto):
    d = device()
    d.call("init", id="", host=mosquitto.host, port=mosquitto.port)
    r = d.try_call("connect", clean=False)
    assert not r["ok"] and "MQTT-3.1.3-7" in r["error"]


def test_blocking_qos0_publishes_wait_for_a_slow_link_as_umqtt_does_and_lose_nothing(
        device, make_proxy, observer):
    # umqtt.simple's publish blocks in its socket write; fleetwire's socket never blocks,
    # so a blocking QoS 0 publish waits until its packet is written instead of filling
    # the queue and raising QueueFull when the network is slower than the loop.
    observer.subscribe("fw/burst", 0)
    p = make_proxy()
    p.throttle(300000, "up")   # bytes/s: 400 KB take over a second; the buffers hold less
    d = device()
    d.call("init", id=d.client_id, host="127.0.0.1", port=p.port, keepalive=30)
    d.call("connect")
    r = d.call("burst", topic="fw/burst", n=400, size=1000, timeout=60)
    assert r["pending"] == 0
    msgs = observer.wait_for(400, timeout=30)
    assert [int(m[1][:5]) for m in msgs] == list(range(400))


def test_a_blocking_qos0_publish_on_a_stalled_link_gives_up_after_timeout_and_loses_nothing(
        device, make_proxy, observer):
    # nothing blocks without a deadline: when the link stops taking data, the publish
    # that finds the socket full raises after the client's timeout; what it had
    # accepted goes out, in order, once the link moves again
    observer.subscribe("fw/stall", 0)
    p = make_proxy()
    d = device()
    d.call("init", id=d.client_id, host="127.0.0.1", port=p.port, keepalive=0, io_timeout=1)
    d.call("connect")
    p.delay(3000, "up")   # the proxy holds what it read for 3 s and reads nothing meanwhile
    r = d.call("burst", topic="fw/stall", n=5000, size=1000, timeout=60)
    assert r["error"] == "MQTTException: timed out after 1000 ms", r
    p.clear()
    d.call("loop", ms=6000)
    msgs = observer.wait_for(r["sent"] + 1, timeout=30)
    assert [int(m[1][:5]) for m in msgs] == list(range(r["sent"] + 1))
