"""The MQTT 5 codec's hot paths allocate nothing on MicroPython, as test_codec_alloc.py holds
for 3.1.1: packing a PUBLISH with its property block into a preallocated buffer, framing and
checking a received PUBLISH with properties (every rule of the block) and finding its Topic
Alias, reading a PUBACK with a reason code, and packing one. One MicroPython process (the .mpy
board tree, 96 KB heap), the collector off: gc.mem_alloc() after the call minus before it,
each call run once first. A control case that does allocate proves the meter works."""

import pytest

pytestmark = pytest.mark.micropython

PROGRAM = r"""
import gc
from fleetwire.codec import pack5, packets5, stream5, wire5

buf = bytearray(1200)
topic = b"fleet/dev-1/telemetry"
p64 = b"x" * 64
p1k = b"y" * 1024
# Message Expiry 60, Content Type "json", a User Property: as a session keeps it per message
props = b"\x13\x02\x00\x00\x00\x3c\x03\x00\x04json\x26\x00\x01k\x00\x01v"
# a received QoS 1 PUBLISH: topic "a/b", id 7, Topic Alias 3 and a Subscription Identifier
rx = bytearray(b"\x32\x14\x00\x03a/b\x00\x07\x05\x23\x00\x03\x0b\x05" + b"payload")
puback = bytearray(b"\x40\x03\x00\x07\x10")  # PUBACK 7, "No matching subscribers"
# bodies as views made once, as a session keeps a view of its receive buffer
rx_body = memoryview(rx)[2:]
puback_body = memoryview(puback)[2:]


def control():
    return bytes(16)


def publish_qos0_64():
    return wire5.put_publish(buf, topic, p64, 0, False, False, 0, props)


def publish_qos1_1k():
    return wire5.put_publish(buf, topic, p1k, 1, False, True, 65535, props)


def receive_publish():
    x = stream5.frame(rx, 0, len(rx), 256)
    ps = packets5.publish(rx[0], rx_body, x >> 3)
    return (x & 7) * 10000 + ps * 100 + wire5.u16(rx_body, wire5.prop(rx_body, 7, 0x23))


def receive_puback():
    x = stream5.frame(puback, 0, 5, 256)
    v = wire5.ack(puback[0] >> 4, puback_body, x >> 3)
    return (v & 0xFFFF) * 1000 + (v >> 16)


def send_puback():
    return pack5.pack_ack(buf, 4, 7, 0x80) * 10 + pack5.pack_ack(buf, 4, 8)


def measure(name, f):
    f()
    gc.collect()
    gc.disable()
    before = gc.mem_alloc()
    r = f()
    after = gc.mem_alloc()
    gc.enable()
    if isinstance(r, bytes):
        r = len(r)
    print("RESULT", name, after - before, r)


measure("control", control)
measure("publish_qos0_64", publish_qos0_64)
measure("publish_qos1_1k", publish_qos1_1k)
measure("receive_publish", receive_publish)
measure("receive_puback", receive_puback)
measure("send_puback", send_puback)
print("DONE")
"""

TOPIC_LEN = len(b"fleet/dev-1/telemetry")
PROPS_LEN = 20
EXPECTED = {
    "publish_qos0_64": 1 + 1 + 2 + TOPIC_LEN + PROPS_LEN + 64,
    "publish_qos1_1k": 1 + 2 + 2 + TOPIC_LEN + 2 + PROPS_LEN + 1024,
    "receive_publish": 2 * 10000 + 13 * 100 + 3,  # a 2-byte header, the payload at 13, Topic Alias 3
    "receive_puback": 7 * 1000 + 0x10,
    "send_puback": 5 * 10 + 4,  # the long form, then the short one
}


@pytest.fixture(scope="module")
def allocations(mpy, tmp_path_factory):
    path = tmp_path_factory.mktemp("alloc5") / "alloc5.py"
    path.write_text(PROGRAM)
    r = mpy.run([str(path)], heap="96K")
    assert "DONE" in r.stdout, r.stdout + r.stderr
    out = {}
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            _, name, nbytes, ret = line.split()
            out[name] = (int(nbytes), int(ret))
    return out


def test_the_meter_sees_an_allocation(allocations):
    assert allocations["control"][0] >= 16


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_mqtt5_hot_path_allocates_nothing(case, allocations):
    nbytes, ret = allocations[case]
    assert ret == EXPECTED[case], "the call did not do its job"
    assert nbytes == 0, "%s allocated %d bytes" % (case, nbytes)
