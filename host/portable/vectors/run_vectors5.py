# Runs the MQTT 5 codec's test vectors (mqtt5.jsonl beside this file) on whichever Python
# runs it, MicroPython's unix port or CPython, unchanged: run_vectors.py's counterpart, which
# loads only the MQTT 5 modules. Prints "PASS name" or "FAIL name: why" per vector, then
# "N passed, M failed".
#   python run_vectors5.py mqtt5.jsonl
import sys
import gc
import json
from binascii import unhexlify

from fleetwire.codec import packets5, pack5, stream5, wire5
from fleetwire.codec.errors import rule
from fleetwire.codec.stream5 import PacketReader5

CLASSES = {
    "CONNECT": packets5.Connect,
    "CONNACK": packets5.Connack,
    "PUBLISH": packets5.Publish,
    "PUBACK": packets5.Puback,
    "PUBREC": packets5.Pubrec,
    "PUBREL": packets5.Pubrel,
    "PUBCOMP": packets5.Pubcomp,
    "SUBSCRIBE": packets5.Subscribe,
    "SUBACK": packets5.Suback,
    "UNSUBSCRIBE": packets5.Unsubscribe,
    "UNSUBACK": packets5.Unsuback,
    "PINGREQ": packets5.Pingreq,
    "PINGRESP": packets5.Pingresp,
    "DISCONNECT": packets5.Disconnect,
    "AUTH": packets5.Auth,
}

MICROPYTHON = sys.implementation.name == "micropython"


class Mismatch(Exception):
    pass


def hexbytes(s):
    # Hex digits with optional spaces; "<hh*N>" stands for byte hh repeated N times.
    out = bytearray()
    i = 0
    s = s.replace(" ", "")
    while i < len(s):
        if s[i] == "<":
            j = s.index(">", i)
            b, n = s[i + 1 : j].split("*")
            out.extend(unhexlify(b) * int(n))
            i = j + 1
        else:
            j = s.find("<", i)
            if j < 0:
                j = len(s)
            out.extend(unhexlify(s[i:j]))
            i = j
    return bytes(out)


def values(d):
    # a JSON object of fields or properties: "x_hex" keys are binary "x", lists of lists are
    # lists of tuples (user properties, subscriptions)
    kw = {}
    for k, v in d.items():
        if k == "type":
            continue
        if k.endswith("_hex"):
            kw[k[:-4]] = hexbytes(v)
        elif k.endswith("properties"):
            kw[k] = values(v)
        elif isinstance(v, list):
            kw[k] = [tuple(x) if isinstance(x, list) else x for x in v]
        else:
            kw[k] = v
    return kw


def build(fields):
    return CLASSES[fields["type"]](**values(fields))


def expect_error(v, f, *args):
    want = v["error"]
    try:
        f(*args)
    except wire5.ProtocolError as e:
        if rule(e) != want:
            raise Mismatch("raised %r, expected rule %s" % (str(e), want))
        if "code" in v and e.code != int(v["code"], 16):
            raise Mismatch("raised %r with code 0x%02x, expected %s" % (str(e), e.code, v["code"]))
        return
    raise Mismatch("no ProtocolError, expected " + want)


def check_packet(v):
    data = hexbytes(v["hex"])
    want = build(v["packet"])
    got = packets5.decode_all(data)
    if len(got) != 1 or got[0] != want:
        raise Mismatch("decoded %r, expected %r" % (got, want))
    if v.get("encode", True):
        enc = want.encode()
        if enc != data:
            raise Mismatch("encoded %s, expected %s" % (enc.hex(), data.hex()))


def client_reads(data):
    # what the client's readers (wire5) make of one packet from the server
    x = stream5.frame(data, 0, len(data), len(data))
    b = data[x & 7 :]
    n = x >> 3
    t = data[0] >> 4
    if t == 2:
        return wire5.connack(b, n)
    if t == 3:
        return packets5.publish(data[0], b, n)
    if 4 <= t <= 7:
        return wire5.ack(t, b, n)
    if t == 9 or t == 11:
        return wire5.suback(t, b, n)
    return wire5.reason(t, b, n)


def client_sends(p):
    # p packed as the client packs it (pack5/wire5: the client's rules), into a buffer of 512
    buf = bytearray(512)
    t = p.TYPE
    props = bytearray(256)
    props = props[: pack5.put_props(props, 0, t, packets5.property_pairs(p.properties))]
    if t == 3:
        return pack5.pack_publish(
            buf, p.topic.encode(), p.payload, p.qos, p.retain, p.dup, p.packet_id or 0, props
        )
    if 4 <= t <= 7:
        return pack5.pack_ack(buf, t, p.packet_id, p.reason_code, props)
    return pack5.pack_reason(buf, t, p.reason_code, props)


def check_stream(v):
    data = hexbytes(v["hex"])
    r = PacketReader5(v.get("max_packet", 256))
    got = []
    try:
        for k in range(len(data)):  # a byte at a time
            r.feed(data, k, k + 1)
            if r.ready:
                got.append(packets5.decode(r.first, r.buf, r.size))
                r.reset()
            if len(r.buf) != r.max_packet:
                raise Mismatch("reader buffer grew to %d" % len(r.buf))
    except wire5.ProtocolError as e:
        if rule(e) != v.get("error") or ("code" in v and e.code != int(v["code"], 16)):
            raise Mismatch("raised %r (0x%02x) after %d packets" % (str(e), e.code, len(got)))
    else:
        if v.get("error"):
            raise Mismatch("no error, expected " + v["error"])
    want = [build(p) for p in v["packets"]]
    if got != want:
        raise Mismatch("got %r, expected %r" % (got, want))


def check(v):
    kind = v["kind"]
    if kind == "packet":
        check_packet(v)
    elif kind == "decode_error":
        expect_error(v, packets5.decode_all, hexbytes(v["hex"]))
    elif kind == "encode_error":
        expect_error(v, lambda: build(v["packet"]).encode())
    elif kind == "client_decode_error":
        expect_error(v, client_reads, hexbytes(v["hex"]))
    elif kind == "client_encode_error":
        expect_error(v, client_sends, build(v["packet"]))
    elif kind == "stream":
        check_stream(v)
    else:
        raise Mismatch("unknown kind " + kind)


def main(path):
    passed = failed = 0
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line[0] == "#":
                continue
            v = json.loads(line)
            if MICROPYTHON:
                gc.collect()  # each vector starts from the same collected heap
            try:
                check(v)
            except Exception as e:  # any escape is a failure of that vector
                failed += 1
                print("FAIL %s: %s: %s" % (v["name"], type(e).__name__, e))
            else:
                passed += 1
                print("PASS " + v["name"])
    print("%d passed, %d failed" % (passed, failed))
    return failed


if __name__ == "__main__":
    sys.exit(1 if main(sys.argv[1]) else 0)
