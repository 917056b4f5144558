# Runs the codec test vectors (codec.jsonl beside this file) on whichever Python
# runs it: MicroPython's unix port or CPython, unchanged. Prints one line per
# vector, "PASS name" or "FAIL name: why", then "N passed, M failed".
#   python run_vectors.py codec.jsonl [all|small|big]
# The file is read a line at a time so a 64 KB heap is enough; vectors marked
# "big" (65535-byte strings) need a larger heap and run as a separate set.
import sys
import gc
import json
from binascii import unhexlify

from fleetwire.codec import packets, topics, text
from fleetwire.codec.errors import CodecError, rule
from fleetwire.codec.stream import PacketReader

CLASSES = {
    "CONNECT": packets.Connect,
    "CONNACK": packets.Connack,
    "PUBLISH": packets.Publish,
    "PUBACK": packets.Puback,
    "PUBREC": packets.Pubrec,
    "PUBREL": packets.Pubrel,
    "PUBCOMP": packets.Pubcomp,
    "SUBSCRIBE": packets.Subscribe,
    "SUBACK": packets.Suback,
    "UNSUBSCRIBE": packets.Unsubscribe,
    "UNSUBACK": packets.Unsuback,
    "PINGREQ": packets.Pingreq,
    "PINGRESP": packets.Pingresp,
    "DISCONNECT": packets.Disconnect,
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


def value(v):
    if isinstance(v, dict):  # {"repeat": "a", "count": 65535}
        return v["repeat"] * v["count"]
    return v


def build(fields):
    kw = {}
    for k, v in fields.items():
        if k == "type":
            continue
        if k.endswith("_hex"):
            kw[k[:-4]] = hexbytes(v)
        elif k == "topics":
            kw[k] = [tuple(value(x) for x in t) if isinstance(t, list) else value(t) for t in v]
        else:
            kw[k] = value(v)
    return CLASSES[fields["type"]](**kw)


def expect_error(want, f, *args):
    try:
        f(*args)
    except CodecError as e:
        if rule(e) != want:
            raise Mismatch("raised %r, expected rule %s" % (str(e), want))
        return
    raise Mismatch("no error, expected " + want)


def check_packet(v):
    data = hexbytes(v["hex"])
    want = build(v["packet"])
    got = packets.decode_all(data)
    if len(got) != 1 or got[0] != want:
        raise Mismatch("decoded %r, expected %r" % (got, want))
    if v.get("encode", True):
        enc = want.encode()
        if enc != data:
            raise Mismatch("encoded %s, expected %s" % (enc.hex(), data.hex()))


def check_stream(v):
    data = hexbytes(v["hex"])
    chunks = v.get("chunks", "bytewise")
    r = PacketReader(v.get("max_packet", 4096))
    got = []
    pos = 0
    sizes = [1] * len(data) if chunks == "bytewise" else chunks
    try:
        for n in sizes:
            piece = data[pos : pos + n]
            pos += n
            i = 0
            while i < len(piece):
                i = r.feed(piece, i)
                if r.ready:
                    got.append(packets.decode(r.first, r.buf, r.size))
                    r.reset()
            if len(r.buf) != r.max_packet:
                raise Mismatch("reader buffer grew to %d" % len(r.buf))
    except CodecError as e:
        if rule(e) != v.get("error"):
            raise Mismatch("raised %r after %d packets" % (str(e), len(got)))
    else:
        if v.get("error"):
            raise Mismatch("no error, expected " + v["error"])
    want = [build(p) for p in v["packets"]]
    if got != want:
        raise Mismatch("got %r, expected %r" % (got, want))
    if pos != len(data):
        raise Mismatch("chunks cover %d of %d bytes" % (pos, len(data)))


def text_arg(v, key):
    return hexbytes(v[key + "_hex"]) if key + "_hex" in v else value(v[key])


def check(v):
    kind = v["kind"]
    if kind == "packet":
        check_packet(v)
    elif kind == "decode_error":
        expect_error(v["error"], packets.decode_all, hexbytes(v["hex"]))
    elif kind == "encode_error":
        expect_error(v["error"], lambda: build(v["packet"]).encode())
    elif kind == "stream":
        check_stream(v)
    elif kind in ("topic_name", "topic_filter"):
        f = topics.check_name if kind == "topic_name" else topics.check_filter
        t = text_arg(v, "topic")
        if v.get("error"):
            expect_error(v["error"], f, t)
        else:
            f(t)
    elif kind == "topic_match":
        got = topics.matches(value(v["filter"]), value(v["topic"]))
        if got != v["match"]:
            raise Mismatch("matches() gave %r" % got)
    elif kind == "utf8":
        b = hexbytes(v["hex"])
        if v.get("error"):
            expect_error(v["error"], text.check_utf8, b, 0, len(b))
        else:
            text.check_utf8(b, 0, len(b))
    else:
        raise Mismatch("unknown kind " + kind)


def main(path, which="all"):
    passed = failed = 0
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line[0] == "#":
                continue
            v = json.loads(line)
            big = v.get("big", False)
            if (which == "small" and big) or (which == "big" and not big):
                continue
            if MICROPYTHON:
                # Every vector starts from the same collected heap, so whether one fits
                # a small heap does not depend on the garbage the previous ones left.
                gc.collect()
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
    sys.exit(1 if main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "all") else 0)
