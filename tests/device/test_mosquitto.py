"""The client end to end against a real mosquitto on loopback, as a device process on
the MicroPython unix port (80 KB heap) and on CPython, with paho-mqtt as the other
party: what needs mosquitto's own features (TLS, the proxy in front of it) or measures
the client. The interoperability scenarios run against every broker of the matrix, in
test_brokers.py."""


def connect(device, broker, keepalive=30, clean=True, **kw):
    d = device()
    d.call("init", id=d.client_id, host=broker.host, port=broker.port, keepalive=keepalive, **kw)
    d.call("connect", clean=clean)
    return d


def test_publishing_in_steady_state_allocates_nothing(device, mosquitto, observer, interp):
    # QoS 0 (written at once, past the queue) and QoS 1 (pipelined through the window)
    observer.subscribe("fw/alloc/#", 1)
    d = connect(device, mosquitto)
    got = {qos: d.call("pub_alloc", topic="fw/alloc/%d" % qos, qos=qos)["alloc"] for qos in (0, 1)}
    observer.wait_for(2 * 120, timeout=20)
    if interp == "micropython":  # gc.mem_alloc is the measure
        assert got == {0: 0, 1: 0}, "bytes allocated by 100 publishes: %r" % got


def test_messages_longer_than_the_clients_buffers_go_out_and_come_in_whole(device, mosquitto, observer):
    # The client's send and receive buffers are small whatever max_packet is: a longer
    # message is written from the program's bytes after its head, a longer packet is read
    # into a buffer of its own. Both ways, both QoS, then short ones again.
    observer.subscribe("fw/long/out", 1)
    d = connect(device, mosquitto, max_packet=2000)
    d.call("sub", topic="fw/long/in", qos=1)
    long0, long1 = "".join("%04d" % i for i in range(150)), "z" * 400  # the agent prints them as JSON
    for msg, qos in ((long0, 0), (long1, 1), ("short", 1)):
        d.call("pub", topic="fw/long/out", msg=msg, qos=qos)
    assert [m[1] for m in observer.wait_for(3)] == [long0.encode(), long1.encode(), b"short"]
    for msg, qos in ((long1, 1), ("short", 0), (long0, 0), ("short", 1)):
        observer.publish("fw/long/in", msg.encode(), qos=qos)
    got = d.call("recv", n=4)["msgs"]
    assert [(m[1], m[2]) for m in got] == [(long1, 1), ("short", 0), (long0, 0), ("short", 1)]


def test_messages_longer_than_max_packet_come_in_pieces_and_the_link_stays_up(device, mosquitto, observer):
    # MQTT 3.1.1 sets no limit on what a broker sends: a message longer than max_packet is
    # handed to the callback in pieces as it arrives (client.rest: the bytes still to come),
    # never refused (refusing would end the link, and a QoS 1 message would come back after
    # every reconnect). The agent joins the pieces and counts them. A topic longer than
    # max_packet (MQTT allows 65,535 bytes) is held whole, its payload in pieces.
    observer.subscribe("fw/huge/out", 1)
    d = connect(device, mosquitto, max_packet=200)
    d.call("sub", topic="fw/huge/in/#", qos=1)
    huge = "".join("%05d" % i for i in range(400))  # 2,000 bytes, ten times max_packet
    far = "fw/huge/in/" + "y" * 300
    for qos in (1, 0):
        observer.publish("fw/huge/in", huge.encode(), qos=qos)
    observer.publish(far, huge.encode(), qos=1)
    observer.publish("fw/huge/in", b"short", qos=1)
    got = d.call("recv", n=4)["msgs"]
    assert [m[:3] for m in got] == [
        ["fw/huge/in", huge, 1],
        ["fw/huge/in", huge, 0],
        [far, huge, 1],
        ["fw/huge/in", "short", 1],
    ]
    assert got[0][4] >= 10 and got[1][4] >= 10  # in pieces of at most max_packet
    d.call("pub", topic="fw/huge/out", msg="still up", qos=1)
    assert [m[1] for m in observer.wait_for(1)] == [b"still up"]


def test_tls_with_the_broker_ca(device, mosquitto_tls, make_observer):
    b = mosquitto_tls
    obs = make_observer(b)
    obs.subscribe("fw/tls", 1)
    d = device()
    d.call(
        "init",
        id=d.client_id,
        host="localhost",
        port=b.tls_port,
        keepalive=30,
        tls=True,
        ca_der=str(b.ca_der),
        ca_pem=str(b.ca_pem),
    )
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
    device, make_proxy, observer
):
    # umqtt.simple's publish blocks in its socket write; fleetwire's socket never blocks,
    # so a blocking QoS 0 publish waits until its packet is written instead of filling
    # the queue and raising QueueFull when the network is slower than the loop.
    observer.subscribe("fw/burst", 0)
    p = make_proxy()
    p.throttle(300000, "up")  # bytes/s: 400 KB take over a second; the buffers hold less
    d = device()
    d.call("init", id=d.client_id, host="127.0.0.1", port=p.port, keepalive=30)
    d.call("connect")
    r = d.call("burst", topic="fw/burst", n=400, size=1000, timeout=60)
    assert r["pending"] == 0
    msgs = observer.wait_for(400, timeout=30)
    assert [int(m[1][:5]) for m in msgs] == list(range(400))


def test_a_blocking_qos0_publish_on_a_stalled_link_gives_up_after_timeout_and_loses_nothing(
    device, make_proxy, observer
):
    # nothing blocks without a deadline: when the link stops taking data, the publish
    # that finds the socket full raises after the client's timeout; what it had
    # accepted goes out, in order, once the link moves again
    observer.subscribe("fw/stall", 0)
    p = make_proxy()
    d = device()
    d.call("init", id=d.client_id, host="127.0.0.1", port=p.port, keepalive=0, io_timeout=1)
    d.call("connect")
    p.delay(3000, "up")  # the proxy holds what it read for 3 s and reads nothing meanwhile
    r = d.call("burst", topic="fw/stall", n=5000, size=1000, timeout=60)
    assert r["error"] == "Timeout: timed out after 1000 ms", r
    p.clear()
    d.call("loop", ms=6000)
    msgs = observer.wait_for(r["sent"] + 1, timeout=30)
    assert [int(m[1][:5]) for m in msgs] == list(range(r["sent"] + 1))
