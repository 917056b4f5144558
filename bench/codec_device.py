# The inner side of bench/codec.py: times the codec on whichever interpreter runs it
# (MicroPython unix port against the .mpy board tree, or CPython), unchanged.
#   micropython codec_device.py [SECONDS_PER_ROW]
# Prints one line per measurement: "ROW <set> <op> <packets/s> <bytes allocated/op>"
# (bytes are -1 on CPython, which has no gc.mem_alloc), then "DONE".
# encode/decode = the device path: wire packers into one preallocated buffer (PUBLISH:
# wire.put_publish, as the session sends), and PacketReader.feed + the wire body readers.
# check = the receive-side checks of a topic (26 bytes: ASCII, or with 2-byte characters).
# obj-encode/obj-decode = packets.py objects.
import sys
import gc

from fleetwire.codec import wire, packets
from fleetwire.codec.stream import PacketReader

MP = sys.implementation.name == "micropython"
if MP:
    from time import ticks_us, ticks_diff

    def elapsed_s(t0):
        return ticks_diff(ticks_us(), t0) / 1e6

    def now():
        return ticks_us()
else:
    from time import perf_counter as now

    def elapsed_s(t0):
        return now() - t0


SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 0.3

buf = bytearray(1100)
reader = PacketReader(1100)
CID = b"fleet-dev-000123"
USER = b"device"
PASSWORD = b"s3cret-token"
TOPIC = b"fleet/dev-000123/telemetry"
P64 = b"x" * 64
P1K = b"y" * 1024
FILTERS = ((b"fleet/dev-000123/cmd/#", 1),)


def enc_connect():
    return wire.pack_connect(buf, CID, True, 60, None, None, 0, False, USER, PASSWORD)


def enc_pub(payload, qos):
    return lambda: wire.put_publish(buf, TOPIC, payload, qos, False, False, 4242 if qos else 0)


def enc_puback():
    return wire.pack_ack(buf, 4, 4242)


def enc_subscribe():
    return wire.pack_subscribe(buf, 17, FILTERS)


def wire_bytes(f):
    n = f()
    return bytes(buf[:n])


# The packets the decoders read, made once with the packers above.
PKT = {
    "CONNECT": wire_bytes(enc_connect),
    "PUBLISH 64B QoS0": wire_bytes(enc_pub(P64, 0)),
    "PUBLISH 64B QoS1": wire_bytes(enc_pub(P64, 1)),
    "PUBLISH 1KB QoS0": wire_bytes(enc_pub(P1K, 0)),
    "PUBLISH 1KB QoS1": wire_bytes(enc_pub(P1K, 1)),
    "PUBACK": wire_bytes(enc_puback),
    "SUBSCRIBE": wire_bytes(enc_subscribe),
}


def framed(data):
    # The device path's framing: one feed (the data is one whole packet), then reset.
    def f():
        reader.feed(data)
        n = reader.size
        reader.reset()
        return n

    return f


def dec_publish(data):
    def f():
        reader.feed(data)
        r = wire.publish_fields(reader.first, reader.buf, reader.size)
        reader.reset()
        return r

    return f


def dec_puback(data):
    def f():
        reader.feed(data)
        pid = wire.ack_id(reader.first >> 4, reader.buf, reader.size)
        reader.reset()
        return pid

    return f


def obj_decode(data):
    def f():
        reader.feed(data)
        p = packets.decode(reader.first, reader.buf, reader.size)
        reader.reset()
        return p

    return f


TOPIC_U8 = "fleet/gerät-1/températur".encode()  # 26 bytes, 2 of them 2-byte characters


def chk(f, t):
    n = len(t)
    return lambda: f(t, 0, n)


# The same packets as objects (strings as str, as decode gives them back).
T = TOPIC.decode()
OBJ = {
    "CONNECT": packets.Connect(CID.decode(), True, 60, username=USER.decode(), password=PASSWORD),
    "PUBLISH 64B QoS0": packets.Publish(T, P64),
    "PUBLISH 64B QoS1": packets.Publish(T, P64, 1, packet_id=4242),
    "PUBLISH 1KB QoS0": packets.Publish(T, P1K),
    "PUBLISH 1KB QoS1": packets.Publish(T, P1K, 1, packet_id=4242),
    "PUBACK": packets.Puback(4242),
    "SUBSCRIBE": packets.Subscribe(17, [(FILTERS[0][0].decode(), 1)]),
}

CASES = [
    ("encode", "CONNECT", enc_connect),
    ("encode", "PUBLISH 64B QoS0", enc_pub(P64, 0)),
    ("encode", "PUBLISH 64B QoS1", enc_pub(P64, 1)),
    ("encode", "PUBLISH 1KB QoS0", enc_pub(P1K, 0)),
    ("encode", "PUBLISH 1KB QoS1", enc_pub(P1K, 1)),
    ("encode", "PUBACK", enc_puback),
    ("encode", "SUBSCRIBE", enc_subscribe),
    ("decode", "CONNECT", framed(PKT["CONNECT"])),  # no wire reader: servers decode CONNECT
    ("decode", "PUBLISH 64B QoS0", dec_publish(PKT["PUBLISH 64B QoS0"])),
    ("decode", "PUBLISH 64B QoS1", dec_publish(PKT["PUBLISH 64B QoS1"])),
    ("decode", "PUBLISH 1KB QoS0", dec_publish(PKT["PUBLISH 1KB QoS0"])),
    ("decode", "PUBLISH 1KB QoS1", dec_publish(PKT["PUBLISH 1KB QoS1"])),
    ("decode", "PUBACK", dec_puback(PKT["PUBACK"])),
    ("decode", "SUBSCRIBE", framed(PKT["SUBSCRIBE"])),  # likewise SUBSCRIBE
]
CASES += [
    ("check", "pub_topic ascii", chk(wire.check_pub_topic, TOPIC)),
    ("check", "pub_topic utf8", chk(wire.check_pub_topic, TOPIC_U8)),
    ("check", "utf8 ascii", chk(wire.check_utf8, TOPIC)),
    ("check", "utf8 utf8", chk(wire.check_utf8, TOPIC_U8)),
    ("check", "name ascii", lambda: wire.check_name(TOPIC)),
    ("check", "filter ascii", lambda: wire.check_filter(FILTERS[0][0])),
]
for name in (
    "CONNECT",
    "PUBLISH 64B QoS0",
    "PUBLISH 64B QoS1",
    "PUBLISH 1KB QoS0",
    "PUBLISH 1KB QoS1",
    "PUBACK",
    "SUBSCRIBE",
):
    CASES.append(("obj-encode", name, OBJ[name].encode))
    CASES.append(("obj-decode", name, obj_decode(PKT[name])))


def check():
    # Every case does its job before it is timed: decoders get back what was encoded.
    for name, data in PKT.items():
        reader.feed(data)
        assert reader.ready and reader.size == len(data) - reader.header_size(), name
        assert packets.decode(reader.first, reader.buf, reader.size) == OBJ[name], name
        reader.reset()
        assert OBJ[name].encode() == data, name


def rate(f):
    n = 16
    while True:
        t0 = now()
        for _ in range(n):
            f()
        t = elapsed_s(t0)
        if t >= SECONDS or n >= 1 << 22:
            return n / t if t > 0 else 0.0
        n = n * 2 if t < SECONDS / 8 else int(n * SECONDS / t) + 1


def allocated(f, k=8):
    if not MP:
        return -1
    f()
    gc.collect()
    gc.disable()
    a = gc.mem_alloc()
    for _ in range(k):
        f()
    b = gc.mem_alloc()
    gc.enable()
    return (b - a) // k


check()
for kind, name, f in CASES:
    a = allocated(f)
    print("ROW %s %s %.0f %d" % (kind, name.replace(" ", "_"), rate(f), a))
print("DONE")
