# A link cut in the middle of a QoS 1 stream loses nothing: the fault proxy between the
# client and the session's mosquitto cuts the connection after the 5th PUBACK.
from fleetwire import MQTTClient


def test_a_cut_link_loses_nothing(make_proxy, observer):
    observer.subscribe("fleet/sensor-17/log", 1)
    proxy = make_proxy()  # in front of the `mosquitto` fixture's broker
    proxy.cut("down", after="PUBACK", nth=5)
    c = MQTTClient("sensor-17", "127.0.0.1", proxy.port, reconnect=True, backoff_min=0.1)
    c.connect(clean_session=False)
    for i in range(10):
        c.publish(b"fleet/sensor-17/log", b"%d" % i, qos=1, block=False)
    while c.pending:
        c.loop(50)
    got = observer.wait_until(lambda m: len({x[1] for x in m}) >= 10, 10)
    assert sorted({m[1] for m in got}, key=int) == [b"%d" % i for i in range(10)]
    c.disconnect()
