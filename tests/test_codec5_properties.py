"""Properties of the MQTT 5 codec over generated input (CPython, hypothesis), as
test_codec_properties.py holds them for 3.1.1.

1. Every packet of every type, with any properties its packet may carry, survives encode ->
   decode unchanged, whole (decode_all) or in any chunking (PacketReader5), and a property
   block written by pack5.put_props reads back through wire5's finder.
2. No input - random bytes, or valid streams with flipped bits, cut short or with bytes
   inserted - makes the decoder or the reader do anything but return packets or raise a
   ProtocolError that names a rule and a reason code for DISCONNECT; the reader never holds
   more than max_packet bytes."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetwire.codec import pack5, wire5
from fleetwire.codec import packets5 as P
from fleetwire.codec.errors import rule
from fleetwire.codec.stream5 import PacketReader5

FAST = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

mqtt_char = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
name_char = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00+#")
mqtt_string = st.text(mqtt_char, max_size=12)
level = st.text(name_char.filter(lambda c: c != "/"), max_size=5)
topic_names = st.lists(level, min_size=1, max_size=4).map("/".join).filter(bool)
binary = st.binary(max_size=20)
packet_ids = st.integers(1, 65535)


@st.composite
def topic_filters(draw):
    levels = draw(st.lists(st.one_of(level, st.just("+")), min_size=1, max_size=4))
    if draw(st.booleans()):
        levels.append("#")
    return "/".join(levels) or "#"


# a value of each property (Table 2-4), in its range
VALUES = {
    "payload_format_indicator": st.integers(0, 1),
    "message_expiry_interval": st.integers(0, 2**32 - 1),
    "content_type": mqtt_string,
    "response_topic": topic_names,
    "correlation_data": binary,
    "subscription_identifier": st.lists(st.integers(1, 268435455), min_size=1, max_size=3),
    "session_expiry_interval": st.integers(0, 2**32 - 1),
    "assigned_client_identifier": mqtt_string,
    "server_keep_alive": st.integers(0, 65535),
    "authentication_method": mqtt_string,
    "authentication_data": binary,
    "request_problem_information": st.integers(0, 1),
    "will_delay_interval": st.integers(0, 2**32 - 1),
    "request_response_information": st.integers(0, 1),
    "response_information": mqtt_string,
    "server_reference": mqtt_string,
    "reason_string": mqtt_string,
    "receive_maximum": st.integers(1, 65535),
    "topic_alias_maximum": st.integers(0, 65535),
    "topic_alias": st.integers(1, 65535),
    "maximum_qos": st.integers(0, 1),
    "retain_available": st.integers(0, 1),
    "user_property": st.lists(st.tuples(mqtt_string, mqtt_string), min_size=1, max_size=3),
    "maximum_packet_size": st.integers(1, 2**32 - 1),
    "wildcard_subscription_available": st.integers(0, 1),
    "subscription_identifier_available": st.integers(0, 1),
    "shared_subscription_available": st.integers(0, 1),
}
ACK = ["reason_string", "user_property"]
ALLOWED = {
    P.CONNECT: [
        "session_expiry_interval",
        "receive_maximum",
        "maximum_packet_size",
        "topic_alias_maximum",
        "request_response_information",
        "request_problem_information",
        "user_property",
        "authentication_method",
        "authentication_data",
    ],
    P.WILL: [
        "will_delay_interval",
        "payload_format_indicator",
        "message_expiry_interval",
        "content_type",
        "response_topic",
        "correlation_data",
        "user_property",
    ],
    P.CONNACK: [
        "session_expiry_interval",
        "receive_maximum",
        "maximum_qos",
        "retain_available",
        "maximum_packet_size",
        "assigned_client_identifier",
        "topic_alias_maximum",
        "reason_string",
        "user_property",
        "wildcard_subscription_available",
        "subscription_identifier_available",
        "shared_subscription_available",
        "server_keep_alive",
        "response_information",
        "server_reference",
        "authentication_method",
        "authentication_data",
    ],
    P.PUBLISH: [
        "payload_format_indicator",
        "message_expiry_interval",
        "content_type",
        "response_topic",
        "correlation_data",
        "subscription_identifier",
        "topic_alias",
        "user_property",
    ],
    P.SUBSCRIBE: ["subscription_identifier", "user_property"],
    P.UNSUBSCRIBE: ["user_property"],
    P.DISCONNECT: ["session_expiry_interval", "server_reference"] + ACK,
    P.AUTH: ["authentication_method", "authentication_data"] + ACK,
}
for _t in (P.PUBACK, P.PUBREC, P.PUBREL, P.PUBCOMP, P.SUBACK, P.UNSUBACK):
    ALLOWED[_t] = ACK


@st.composite
def properties(draw, t):
    names = draw(st.lists(st.sampled_from(ALLOWED[t]), unique=True, max_size=4))
    out = {n: draw(VALUES[n]) for n in names}
    if "subscription_identifier" in out and t == P.SUBSCRIBE:
        out["subscription_identifier"] = out["subscription_identifier"][:1]
    if "authentication_data" in out:  # needs its method (§3.1.2.11.10)
        out.setdefault("authentication_method", draw(mqtt_string))
    return out


def test_the_property_lists_are_those_of_table_2_4():
    # every property in at least one list; CONNACK's as the table gives them
    assert set().union(*map(set, ALLOWED.values())) == set(VALUES) == set(P.PROPERTY_IDS)
    assert len(ALLOWED[P.CONNACK]) == 17


@st.composite
def connects(draw):
    kw = {}
    if draw(st.booleans()):
        kw.update(
            will_topic=draw(topic_names),
            will_payload=draw(binary),
            will_qos=draw(st.integers(0, 2)),
            will_retain=draw(st.booleans()),
            will_properties=draw(properties(P.WILL)),
        )
    if draw(st.booleans()):
        kw["username"] = draw(mqtt_string)
    if draw(st.booleans()):
        kw["password"] = draw(binary)
    return P.Connect(
        draw(mqtt_string), draw(st.booleans()), draw(st.integers(0, 65535)), draw(properties(P.CONNECT)), **kw
    )


@st.composite
def connacks(draw):
    rc = draw(st.sampled_from([0, 0x80, 0x81, 0x82, 0x84, 0x86, 0x87, 0x8A, 0x9C, 0x9F]))
    return P.Connack(draw(st.booleans()) if rc == 0 else False, rc, draw(properties(P.CONNACK)))


@st.composite
def publishes(draw):
    qos = draw(st.integers(0, 2))
    props = draw(properties(P.PUBLISH))
    topic = draw(topic_names) if "topic_alias" not in props or draw(st.booleans()) else ""
    return P.Publish(
        topic,
        draw(binary),
        qos,
        draw(st.booleans()),
        draw(st.booleans()) if qos else False,
        draw(packet_ids) if qos else None,
        props,
    )


@st.composite
def acks(draw):
    cls = draw(st.sampled_from([P.Puback, P.Pubrec, P.Pubrel, P.Pubcomp]))
    codes = [0, 0x92] if cls in (P.Pubrel, P.Pubcomp) else [0, 0x10, 0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99]
    return cls(draw(packet_ids), draw(st.sampled_from(codes)), draw(properties(cls.TYPE)))


@st.composite
def subscribes(draw):
    opts = st.builds(P.options, st.integers(0, 2), st.booleans(), st.booleans(), st.integers(0, 2))
    return P.Subscribe(
        draw(packet_ids),
        draw(st.lists(st.tuples(topic_filters(), opts), min_size=1, max_size=3)),
        draw(properties(P.SUBSCRIBE)),
    )


@st.composite
def subacks(draw):
    codes = [0, 1, 2, 0x80, 0x83, 0x87, 0x8F, 0x91, 0x97, 0x9E, 0xA1, 0xA2]
    return P.Suback(
        draw(packet_ids),
        draw(st.lists(st.sampled_from(codes), min_size=1, max_size=4)),
        draw(properties(P.SUBACK)),
    )


@st.composite
def unsubscribes(draw):
    return P.Unsubscribe(
        draw(packet_ids),
        draw(st.lists(topic_filters(), min_size=1, max_size=3)),
        draw(properties(P.UNSUBSCRIBE)),
    )


@st.composite
def unsubacks(draw):
    codes = [0, 0x11, 0x80, 0x83, 0x87, 0x8F, 0x91]
    return P.Unsuback(
        draw(packet_ids),
        draw(st.lists(st.sampled_from(codes), min_size=1, max_size=4)),
        draw(properties(P.UNSUBACK)),
    )


@st.composite
def disconnects(draw):
    return P.Disconnect(
        draw(st.sampled_from([0, 4, 0x80, 0x81, 0x82, 0x8E, 0x93, 0x9C, 0xA2])),
        draw(properties(P.DISCONNECT)),
    )


@st.composite
def auths(draw):
    props = draw(properties(P.AUTH))
    rc = draw(st.sampled_from([0, 0x18, 0x19]))
    if rc:
        props.setdefault("authentication_method", draw(mqtt_string))
    return P.Auth(rc, props)


STRATEGIES = [
    connects(),
    connacks(),
    publishes(),
    acks(),
    subscribes(),
    subacks(),
    unsubscribes(),
    unsubacks(),
]
STRATEGIES += [st.sampled_from([P.Pingreq(), P.Pingresp()]), disconnects(), auths()]
any_packet = st.one_of(STRATEGIES)


# ---- 1. round trips


@pytest.mark.parametrize(
    "strategy",
    STRATEGIES,
    ids=["connect", "connack", "publish", "acks", "subscribe", "suback", "unsubscribe", "unsuback", "ping"]
    + ["disconnect", "auth"],
)
def test_each_packet_type_round_trips_with_any_of_its_properties(strategy):
    @FAST
    @given(strategy)
    def check(p):
        data = p.encode()
        assert data[0] >> 4 == p.TYPE
        assert P.decode_all(data) == [p]
        assert P.decode_all(data)[0].encode() == data

    check()


def read_all(data, sizes, max_packet, keep_going=False):
    """Feed data in pieces of the given sizes (cycled) to one PacketReader5 -> (packets,
    errors); its buffer is never replaced or grown."""
    r = PacketReader5(max_packet)
    buf = r.buf
    got, errors = [], []
    i = k = 0
    while i < len(data):
        end = min(len(data), i + (sizes[k % len(sizes)] if sizes else len(data)))
        k += 1
        while i < end:
            try:
                j = r.feed(data, i, end)
                assert j > i or r.ready
                i = j
                assert r.buf is buf and len(r.buf) == max_packet
                if r.ready:
                    got.append(P.decode(r.first, r.buf, r.size))
                    r.reset()
            except wire5.ProtocolError as e:
                errors.append(e)
                if not keep_going:
                    return got, errors
                r.reset()
                i += 1
    return got, errors


@FAST
@given(st.lists(any_packet, min_size=1, max_size=5), st.lists(st.integers(1, 9), max_size=4))
def test_a_stream_of_packets_reads_back_in_any_chunking(ps, sizes):
    data = b"".join(p.encode() for p in ps)
    got, errors = read_all(data, sizes, max(len(p.encode()) for p in ps))
    assert errors == [] and got == ps


@FAST
@given(st.sampled_from(sorted(ALLOWED)), st.data())
def test_a_written_block_is_found_where_it_lies(t, data):
    props = data.draw(properties(t))
    pairs = P.property_pairs(props)
    buf = bytearray(pack5.props_size(pairs) + 3)
    end = pack5.put_props(buf, 3, t | P.EITHER, pairs)
    assert end == len(buf) == wire5.check_props(t | P.EITHER, buf, 3, len(buf)) == wire5.props_end(buf, 3)
    for p, _ in pairs:
        k = wire5.prop(buf, 3, p)
        assert k > 3 and buf[k - 1] == p
    assert P.decode_props(t, buf, 3, len(buf))[0] == props


# ---- 2. nothing but packets or a ProtocolError with a rule and a reason code


def outcome(data):
    try:
        return P.decode_all(data)
    except wire5.ProtocolError as e:
        assert rule(e) and e.code >= 0x80, str(e)
        return None


@FUZZ
@given(st.binary(max_size=200), st.sampled_from([2, 16, 64, 256]), st.lists(st.integers(1, 17), max_size=5))
def test_random_bytes_only_give_packets_or_protocol_errors(data, max_packet, sizes):
    out = outcome(data)
    assert out is None or all(isinstance(p, P.Packet) for p in out)
    got, errors = read_all(data, sizes, max_packet, keep_going=True)
    assert all(isinstance(p, P.Packet) for p in got)
    assert all(rule(e) and e.code >= 0x80 for e in errors)


@st.composite
def mutated_streams(draw):
    data = bytearray(b"".join(p.encode() for p in draw(st.lists(any_packet, min_size=1, max_size=3))))
    for _ in range(draw(st.integers(1, 4))):
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        op = draw(st.sampled_from(["flip", "truncate", "insert", "delete"]))
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
@given(mutated_streams(), st.lists(st.integers(1, 13), max_size=5))
def test_mutated_valid_streams_only_give_packets_or_protocol_errors(data, sizes):
    out = outcome(data)
    assert out is None or all(isinstance(p, P.Packet) for p in out)
    got, errors = read_all(data, sizes, len(data) + 5, keep_going=True)
    assert all(isinstance(p, P.Packet) for p in got)
    assert all(rule(e) and e.code >= 0x80 for e in errors)


def test_MQTT5_4_7_3_3_a_topic_name_or_filter_over_65535_bytes_is_refused():
    long = "t" * 65536
    for p in (P.Publish(long), P.Subscribe(1, [(long, 0)]), P.Unsubscribe(1, [long])):
        with pytest.raises(wire5.ProtocolError) as e:
            p.encode()
        assert rule(e.value) == "MQTT-4.7.3-3"
    assert P.decode_all(P.Publish(long[1:]).encode())[0].topic == long[1:]  # 65535: the longest


@pytest.mark.parametrize("size", [126, 127, 128, 16383, 16384])
def test_a_property_block_round_trips_at_the_length_field_boundaries(size):
    # a block whose properties take 127 bytes has a 1-byte length, 128 a 2-byte one (§2.2.2.1)
    name = "n" * (size - 1 - 2 - 2 - 1)  # 0x26, name length, value length, value "v"
    p = P.Puback(1, 0, {"user_property": [(name, "v")]})
    data = p.encode()
    assert len(P.encode_props(P.PUBACK, p.properties)) == size + (
        1 if size < 128 else 2 if size < 16384 else 3
    )
    assert P.decode_all(data) == [p]
