"""Properties of the codec over generated input (CPython, hypothesis).

1. Every packet of every type the codec can build survives encode -> decode unchanged,
   whether the bytes arrive whole (decode_all) or in any chunking (PacketReader).
2. No input at all - random bytes, or valid streams with flipped bits, cut short or
   with bytes inserted - makes the decoder or the reader do anything but return
   packets or raise CodecError: no other exception, no hang, and the reader never
   holds more than max_packet bytes."""

import struct

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fleetwire.codec import packets as P
from fleetwire.codec import wire
from fleetwire.codec.errors import CodecError, rule
from fleetwire.codec.stream import PacketReader

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ---- strategies: only what MQTT 3.1.1 allows

# MQTT string characters: anything encodable but U+0000 (surrogates are not encodable).
mqtt_char = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
name_char = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00+#")
mqtt_string = st.text(mqtt_char, max_size=20)
level = st.text(name_char.filter(lambda c: c != "/"), max_size=6)

topic_names = st.lists(level, min_size=1, max_size=5).map("/".join).filter(lambda t: t != "")


@st.composite
def topic_filters(draw):
    levels = draw(st.lists(st.one_of(level, st.just("+")), min_size=1, max_size=5))
    if draw(st.booleans()):
        levels.append("#")
    f = "/".join(levels)
    return f if f else "#"


packet_ids = st.integers(1, 65535)
binary = st.binary(max_size=40)


@st.composite
def connects(draw):
    clean = draw(st.booleans())
    cid = draw(mqtt_string if clean else mqtt_string.filter(bool))
    kw = {}
    if draw(st.booleans()):
        kw.update(
            will_topic=draw(topic_names),
            will_message=draw(binary),
            will_qos=draw(st.integers(0, 2)),
            will_retain=draw(st.booleans()),
        )
    if draw(st.booleans()):
        kw["username"] = draw(mqtt_string)
        if draw(st.booleans()):
            kw["password"] = draw(binary)
    name, lvl = draw(st.sampled_from([("MQTT", 4), ("MQIsdp", 3)]))
    return P.Connect(cid, clean, draw(st.integers(0, 65535)), protocol_name=name, protocol_level=lvl, **kw)


@st.composite
def connacks(draw):
    rc = draw(st.integers(0, 5))
    return P.Connack(draw(st.booleans()) if rc == 0 else False, rc)


@st.composite
def publishes(draw, payload=binary):
    qos = draw(st.integers(0, 2))
    return P.Publish(
        draw(topic_names),
        draw(payload),
        qos,
        draw(st.booleans()),
        draw(st.booleans()) if qos else False,
        draw(packet_ids) if qos else None,
    )


acks = st.builds(
    lambda cls, pid: cls(pid),
    st.sampled_from([P.Puback, P.Pubrec, P.Pubrel, P.Pubcomp, P.Unsuback]),
    packet_ids,
)
subscribes = st.builds(
    P.Subscribe, packet_ids, st.lists(st.tuples(topic_filters(), st.integers(0, 2)), min_size=1, max_size=4)
)
subacks = st.builds(P.Suback, packet_ids, st.lists(st.sampled_from([0, 1, 2, 0x80]), min_size=1, max_size=6))
unsubscribes = st.builds(P.Unsubscribe, packet_ids, st.lists(topic_filters(), min_size=1, max_size=4))
empties = st.sampled_from([P.Pingreq, P.Pingresp, P.Disconnect]).map(lambda cls: cls())

any_packet = st.one_of(connects(), connacks(), publishes(), acks, subscribes, subacks, unsubscribes, empties)


def chunked(data, sizes):
    """data cut into pieces of the given sizes (cycled), the last piece taking the rest."""
    out, i, k = [], 0, 0
    while i < len(data):
        n = sizes[k % len(sizes)] if sizes else len(data)
        out.append(data[i : i + n])
        i += n
        k += 1
    return out


def read_all(chunks, max_packet, keep_going=False):
    """Feed chunks to one PacketReader; returns (packets, errors, reader). Checks the
    reader's invariants on every call: it always progresses and never holds over
    max_packet (its buffer is never replaced or grown)."""
    r = PacketReader(max_packet)
    buf = r.buf
    got, errors = [], []
    for piece in chunks:
        i = 0
        while i < len(piece):
            try:
                j = r.feed(piece, i)
                assert j > i or r.ready, "feed took nothing and has no packet: it would hang"
                assert i <= j <= len(piece)
                i = j
                assert r.buf is buf and len(r.buf) == max_packet
                if r.size >= 0:  # header done: the body stored so far fits max_packet
                    assert 0 <= r.got <= r.size
                    assert r.header_size() + r.size <= max_packet
                if r.ready:
                    got.append(P.decode(r.first, r.buf, r.size))
                    r.reset()
            except CodecError as e:
                errors.append(e)
                if not keep_going:
                    return got, errors, r
                r.reset()
                i += 1  # resynchronise one byte on, as a fuzzing reader would
    return got, errors, r


# ---- 1. round trips


@FAST
@given(any_packet)
def test_every_packet_round_trips_through_decode_all(p):
    data = p.encode()
    assert P.decode_all(data) == [p]
    assert P.decode_all(data)[0].encode() == data


@pytest.mark.parametrize(
    "strategy",
    [connects(), connacks(), publishes(), acks, subscribes, subacks, unsubscribes, empties],
    ids=["connect", "connack", "publish", "acks", "subscribe", "suback", "unsubscribe", "empty"],
)
def test_each_packet_type_round_trips(strategy):
    @FAST
    @given(strategy)
    def check(p):
        data = p.encode()
        assert data[0] >> 4 == p.TYPE
        assert P.decode_all(data) == [p]

    check()


@FAST
@given(st.lists(any_packet, min_size=1, max_size=6), st.lists(st.integers(1, 9), max_size=5))
def test_a_stream_of_packets_reads_back_in_any_chunking(ps, sizes):
    data = b"".join(p.encode() for p in ps)
    got, errors, _ = read_all(chunked(data, sizes), max(len(p.encode()) for p in ps))
    assert errors == []
    assert got == ps


@FAST
@given(publishes(payload=st.text(mqtt_char, max_size=60)))
def test_a_str_payload_is_sent_as_its_utf8(p):
    got = P.decode_all(p.encode())[0]
    assert got.payload == p.payload.encode("utf-8")
    assert got.topic == p.topic


def varint(n):
    # Independent of wire.py: §2.2.3's algorithm, written out.
    out = []
    while True:
        n, d = divmod(n, 128)
        out.append(d | (128 if n else 0))
        if not n:
            return bytes(out)


@pytest.mark.parametrize("remaining", [3, 127, 128, 16383, 16384, 2097151, 2097152])
def test_remaining_length_boundaries_encode_and_decode_in_full(remaining):
    p = P.Publish("t", b"\x5a" * (remaining - 3))
    data = p.encode()
    head = b"\x30" + varint(remaining)
    assert data[: len(head)] == head
    assert data[len(head) : len(head) + 3] == struct.pack(">H", 1) + b"t"
    assert len(data) == len(head) + remaining
    assert P.decode_all(data) == [p]
    got, errors, _ = read_all(chunked(data, [4096]), len(data))
    assert errors == [] and got == [p]


@FAST
@given(
    topic_names,
    st.integers(0, 300),
    st.sampled_from([0, 1, 2]),
    st.booleans(),
    st.booleans(),
    st.integers(1, 65535),
)
@example("t", 124, 0, False, False, 1)  # remaining length 127: the last one-byte length
@example("t", 125, 0, True, False, 1)  # 128: the first two-byte length
@example("t", 122, 1, False, True, 65535)  # 127 with a packet id
def test_the_publish_packer_writes_the_standard_bytes_and_never_overruns(topic, size, qos, retain, dup, pid):
    # wire.put_publish (the client's zero-allocation packer, with its own path for a
    # one-byte remaining length) and packets.pack_publish (the same, checked) against the
    # bytes §3.3 prescribes, built here. A buffer one byte short: the checked packer
    # refuses it untouched; the client's packs the head alone (what precedes the payload,
    # which the client then writes from the caller's buffer), and refuses a buffer one
    # byte short of the head. Neither ever writes past the buffer.
    t = topic.encode()
    dup = dup and qos > 0
    pid = pid if qos else 0
    body = struct.pack(">H", len(t)) + t + (struct.pack(">H", pid) if qos else b"") + b"\x5a" * size
    want = bytes([0x30 | dup << 3 | qos << 1 | retain]) + varint(len(body)) + body
    for pack in (wire.put_publish, P.pack_publish):
        buf = bytearray(len(want))
        n = pack(buf, t, b"\x5a" * size, qos, retain, dup, pid)
        assert bytes(buf[:n]) == want
    short = bytearray(len(want) - 1)
    with pytest.raises(CodecError):
        P.pack_publish(short, t, b"\x5a" * size, qos, retain, dup, pid)
    assert short == bytearray(len(want) - 1)
    if size:
        head = len(want) - size
        assert wire.put_publish(short, t, b"\x5a" * size, qos, retain, dup, pid) == len(want)
        assert bytes(short[:head]) == want[:head]
        assert short[head:] == bytearray(len(short) - head)
        shorter = bytearray(head - 1)
        with pytest.raises(CodecError):
            wire.put_publish(shorter, t, b"\x5a" * size, qos, retain, dup, pid)


# ---- 2. nothing but packets or CodecError


def decode_all_outcome(data):
    try:
        return P.decode_all(data)
    except CodecError:
        return None


@FUZZ
@given(
    st.binary(max_size=300), st.sampled_from([2, 5, 16, 64, 300]), st.lists(st.integers(1, 17), max_size=6)
)
def test_random_bytes_only_give_packets_or_codec_errors(data, max_packet, sizes):
    out = decode_all_outcome(data)
    assert out is None or all(isinstance(p, P.Packet) for p in out)
    got, _, _ = read_all(chunked(data, sizes), max_packet, keep_going=True)
    assert all(isinstance(p, P.Packet) for p in got)


@st.composite
def mutated_streams(draw):
    ps = draw(st.lists(any_packet, min_size=1, max_size=4))
    data = bytearray(b"".join(p.encode() for p in ps))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "truncate", "insert", "delete"]))
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        if op == "flip":
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "truncate":
            del data[at:]
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=4))
        else:
            del data[at]
    return bytes(data)


@FUZZ
@given(mutated_streams(), st.sampled_from([2, 16, 64, 4096]), st.lists(st.integers(1, 13), max_size=6))
def test_mutated_valid_streams_only_give_packets_or_codec_errors(data, max_packet, sizes):
    out = decode_all_outcome(data)
    assert out is None or all(isinstance(p, P.Packet) for p in out)
    got, errors, _ = read_all(chunked(data, sizes), max_packet, keep_going=True)
    assert all(isinstance(p, P.Packet) for p in got)
    assert all(isinstance(e, CodecError) and rule(e) for e in errors)


@FUZZ
@given(mutated_streams(), st.lists(st.integers(1, 13), max_size=6))
def test_reader_and_decode_all_agree_on_the_packets_before_the_first_error(data, sizes):
    # The two framers apply the same rules: whatever decode_all accepts whole, the
    # reader accepts in any chunking, and vice versa up to the first error.
    whole = decode_all_outcome(data)
    got, errors, r = read_all(chunked(data, sizes), len(data) + 5)
    if whole is not None:
        assert errors == [] and got == whole and r.header_size() == 0
    else:
        # decode_all refused: the reader raised too, or was left inside a packet cut short
        assert errors or r.header_size() > 0


@FAST
@given(st.integers(0, 255), st.binary(max_size=8))
def test_every_first_byte_is_checked_before_the_body(first, rest):
    data = bytes([first]) + rest
    r = PacketReader(64)
    try:
        wire.check_first_byte(first)
    except CodecError as e:
        with pytest.raises(CodecError) as raised:
            r.feed(data, 0, 1)
        assert rule(raised.value) == rule(e)
    else:
        assert r.feed(data, 0, 1) == 1 and r.first == first
