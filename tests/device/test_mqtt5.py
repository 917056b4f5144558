"""MQTT 5 (fleetwire.v5.MQTTClient, or MQTTClient(..., version=5)) end to end against a real
mosquitto 2 started by the tests, as a device process on the MicroPython unix port (80 KB
heap) and on CPython, paho-mqtt (3.1.1) as the other party where one is needed."""


def v5(device, broker, keepalive=30, clean=True, client_id=None, **kw):
    d = device(client_id)
    d.call("init", v5=1, id=d.client_id, host=broker.host, port=broker.port, keepalive=keepalive, **kw)
    d.call("connect", clean=clean)
    return d


def test_a_version_5_client_publishes_and_receives_at_every_qos(device, mosquitto, observer):
    observer.subscribe("fw5/out/#", 2)
    d = v5(device, mosquitto)
    for q in (0, 1, 2):
        assert d.call("sub", topic="fw5/in/%d" % q, qos=q)["rc"] == q
    for q in (0, 1, 2):
        d.call("pub", topic="fw5/out/%d" % q, msg="out %d" % q, qos=q)
    got = observer.wait_for(3)
    want = [("fw5/out/%d" % q, b"out %d" % q, q) for q in (0, 1, 2)]
    assert sorted((m[0], m[1], m[2]) for m in got) == want
    for q in (0, 1, 2):
        observer.publish("fw5/in/%d" % q, b"in %d" % q, qos=q)
    msgs = d.call("recv", n=3)["msgs"]
    assert sorted(m[:3] for m in msgs) == [["fw5/in/%d" % q, "in %d" % q, q] for q in (0, 1, 2)]
    d.call("unsub", topic="fw5/in/0")
    observer.publish("fw5/in/0", b"gone", qos=0)
    observer.publish("fw5/in/1", b"still", qos=1)
    assert [m[1] for m in d.call("recv", n=1)["msgs"]] == ["still"]
    d.call("disconnect")


def test_a_long_message_goes_out_and_comes_in_whole_in_mqtt_5(device, mosquitto, observer):
    # longer than the client's buffers: written from the program's bytes after its head, read
    # into a buffer of its own, its properties moved past in that buffer
    observer.subscribe("fw5/long/out", 1)
    d = v5(device, mosquitto, max_packet=2000)
    d.call("sub", topic="fw5/long/in", qos=1)
    long = "".join("%04d" % i for i in range(300))
    d.call("pub", topic="fw5/long/out", msg=long, qos=1)
    assert [m[1] for m in observer.wait_for(1)] == [long.encode()]
    observer.publish("fw5/long/in", long.encode(), qos=1)
    assert [m[1] for m in d.call("recv", n=1)["msgs"]] == [long]


def test_a_broker_that_does_not_speak_mqtt_5_says_so(device, broker_pool):
    aedes = broker_pool("aedes")  # MQTT 3.1.1 only: it answers a level-5 CONNECT with 3.1.1's refusal
    d = device()
    d.call("init", v5=1, id=d.client_id, host=aedes.host, port=aedes.port)
    r = d.try_call("connect")
    assert not r["ok"]
    assert r["error"].startswith("ConnectRefused: ") and "does not speak MQTT 5" in r["error"], r
