"""The device's hot paths allocate nothing on MicroPython: packing a PUBLISH into a
preallocated buffer (the client's wire.put_publish, and packets.pack_publish, which checks
first), checking a topic, reading a fixed header, and receiving a PUBACK.

One MicroPython process (the .mpy board tree, a 96 KB heap) measures every case with
the collector disabled: gc.mem_alloc() after the call minus before it. Each call runs
once first, so one-time costs (interned names, caches) are not counted. A control
case that does allocate proves the meter works."""

import pytest

pytestmark = pytest.mark.micropython

PROGRAM = r"""
import gc
from fleetwire.codec import wire
from fleetwire.codec.packets import pack_publish
from fleetwire.codec.stream import PacketReader

buf = bytearray(1200)
topic = b"fleet/dev-1/telemetry"
p64 = b"x" * 64
p1k = b"y" * 1024
reader = PacketReader(256)
publish_header = b"\x30\x82\x01"        # PUBLISH, remaining length 130 (2-byte varint)
puback = b"\x40\x02\x00\x07"            # PUBACK, packet id 7


def control():
    return bytes(16)


def publish_qos0_64():
    return wire.put_publish(buf, topic, p64, 0, False, False, 0)


def publish_qos1_64():
    return wire.put_publish(buf, topic, p64, 1, False, False, 4242)


def publish_qos0_1k():
    return wire.put_publish(buf, topic, p1k, 0, True, False, 0)


def publish_qos1_1k():
    return wire.put_publish(buf, topic, p1k, 1, False, True, 65535)


def checked_qos0_64():
    return pack_publish(buf, topic, p64, 0)


def checked_qos1_1k():
    return pack_publish(buf, topic, p1k, 1, False, False, 65535)


def check_topic():
    wire.check_name(topic)
    wire.check_filter(b"fleet/+/cmd/#")
    wire.check_pub_topic(topic, 0, len(topic))
    return len(topic)


def fixed_header():
    reader.reset()
    n = reader.feed(publish_header)
    return n * 1000 + reader.size


def receive_puback():
    reader.reset()
    reader.feed(puback)
    pid = wire.ack_id(reader.first >> 4, reader.buf, reader.size) if reader.ready else -1
    reader.reset()
    return pid


def measure(name, f):
    f()  # warm: first calls may intern names or fill caches
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
measure("publish_qos1_64", publish_qos1_64)
measure("publish_qos0_1k", publish_qos0_1k)
measure("publish_qos1_1k", publish_qos1_1k)
measure("checked_qos0_64", checked_qos0_64)
measure("checked_qos1_1k", checked_qos1_1k)
measure("check_topic", check_topic)
measure("fixed_header", fixed_header)
measure("receive_puback", receive_puback)
print("DONE")
"""

TOPIC_LEN = len(b"fleet/dev-1/telemetry")
# name -> what the call must return (a packet length, header bytes taken, an id)
EXPECTED = {
    "publish_qos0_64": 1 + 1 + 2 + TOPIC_LEN + 64,
    "publish_qos1_64": 1 + 1 + 2 + TOPIC_LEN + 2 + 64,
    "publish_qos0_1k": 1 + 2 + 2 + TOPIC_LEN + 1024,
    "publish_qos1_1k": 1 + 2 + 2 + TOPIC_LEN + 2 + 1024,
    "checked_qos0_64": 1 + 1 + 2 + TOPIC_LEN + 64,
    "checked_qos1_1k": 1 + 2 + 2 + TOPIC_LEN + 2 + 1024,
    "check_topic": TOPIC_LEN,
    "fixed_header": 3 * 1000 + 130,
    "receive_puback": 7,
}


@pytest.fixture(scope="module")
def allocations(mpy, tmp_path_factory):
    path = tmp_path_factory.mktemp("alloc") / "alloc.py"
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
def test_hot_path_allocates_nothing(case, allocations):
    nbytes, ret = allocations[case]
    assert ret == EXPECTED[case], "the call did not do its job"
    assert nbytes == 0, "%s allocated %d bytes" % (case, nbytes)
