# The sans-IO session, specified flow by flow: scripted broker bytes in, the
# client's packets out, a fake clock. Portable: runs unchanged on CPython and on
# the MicroPython unix port (tests/portable/run.py). Names carry the MQTT 3.1.1
# statement id a case proves, where there is one.

from fleetwire.session import Session, CONNECTED, DISCONNECTED
from fleetwire.feed import feed
from fleetwire.errors import ProtocolError, ConnectRefused, QueueFull, MQTTException
from fleetwire.reconnect import backoff
from fleetwire.codec import packets as P
from run import raises
from session_kit import out, packet, recv, session, start, eq, events, reconnect, raw_publish

# On MicroPython (tests/portable/test_portable.py): the heap, and the modules it imports by
# their bare names (beside it, or fleetwire.host.portable's), compiled with it.
HEAP = "136K"  # the client, the codec whole and these cases; 128K left a long-topic case at its edge
ALSO = ("session_kit",)


# ---- CONNECT and CONNACK


def test_MQTT_3_1_0_1_connect_is_the_first_packet_and_nothing_follows_before_connack():
    s = Session(b"dev", keepalive=30)
    s.publish(b"t", b"early", 1)
    eq(start(s), [P.Connect("dev", True, 30)])
    eq(out(s), [])  # the PUBLISH waits for CONNACK
    recv(s, P.Connack(False, 0))
    eq(s.state, CONNECTED)
    eq(out(s), [P.Publish("t", b"early", 1, packet_id=1)])


def test_MQTT_3_1_3_1_connect_carries_will_and_credentials_in_order():
    s = Session(b"dev", keepalive=5, clean_session=False)
    s.will = (b"dev/status", b"gone", 1, True)
    s.username = b"u"
    s.password = b"pw"
    eq(start(s), [P.Connect("dev", False, 5, "dev/status", b"gone", 1, True, "u", b"pw")])


def test_MQTT_3_1_3_7_an_empty_client_id_needs_clean_session():
    s = Session(b"", clean_session=False)
    e = raises(ValueError, s.start, 0)
    assert "MQTT-3.1.3-7" in str(e)


def test_connack_refusal_is_named():
    for rc, reason in (
        (1, "unacceptable protocol version"),
        (2, "identifier rejected"),
        (3, "server unavailable"),
        (4, "bad user name or password"),
        (5, "not authorized"),
    ):
        s = Session(b"dev")
        s.start(0)
        out(s)
        e = raises(ConnectRefused, recv, s, P.Connack(False, rc))
        eq(e.args[0], rc)
        assert reason in str(e), str(e)
        eq(s.state, DISCONNECTED)


def test_reconnecting_by_itself_goes_on_after_server_unavailable_and_stops_at_any_other_refusal():
    for rc, again in ((3, True), (1, False), (2, False), (4, False), (5, False)):
        s = session(reconnect=True)
        s.lost(1000, OSError(104))  # the link that had its CONNACK went down: retried
        start(s, 2000)
        e = None
        try:
            recv(s, P.Connack(False, rc), now=2000)
        except ConnectRefused as err:
            e = err
        assert e is not None, rc
        if again:
            assert s.lost(2000, e) > 0  # ms to wait before the next attempt
        else:
            eq(raises(ConnectRefused, s.lost, 2000, e), e)  # the program is told
            eq(s.reconnect, False)


def test_connack_reports_session_present():
    seen = []
    s = Session(b"dev", clean_session=False)
    s.on_connect = seen.append
    s.start(0)
    out(s)
    recv(s, P.Connack(True, 0))
    eq(seen, [True])
    assert s.session_present


def test_no_connack_within_the_connect_timeout_is_an_error():
    s = Session(b"dev", timeout=5)
    s.start(0)
    out(s, 0)
    s.tick(4999)
    e = raises(MQTTException, s.tick, 5000)
    assert "CONNACK" in str(e)


def test_a_packet_before_connack_is_a_protocol_error():
    s = Session(b"dev")
    s.start(0)
    out(s)
    raises(ProtocolError, recv, s, P.Puback(1))


# ---- packet identifiers


def test_MQTT_2_3_1_1_packet_ids_are_never_zero_and_wrap_past_65535():
    s = session(max_inflight=4, queue_size=4)
    s._last_pid = 65534
    ids = [s.publish(b"t", b"x", 1) for _ in range(3)]
    eq(ids, [65535, 1, 2])


def test_MQTT_2_3_1_2_ids_still_in_use_are_skipped():
    s = session(max_inflight=4, queue_size=4)
    eq(s.publish(b"t", b"a", 1), 1)
    eq(s.publish(b"t", b"b", 2), 2)
    out(s)
    s._last_pid = 65535
    eq(s.publish(b"t", b"c", 1), 3)  # 1 and 2 are in flight


def test_MQTT_2_3_1_5_qos0_has_no_packet_id():
    s = session()
    eq(s.publish(b"t", b"x", 0), 0)
    eq(out(s), [P.Publish("t", b"x", 0)])


def test_MQTT_2_3_1_3_an_id_is_free_again_only_after_its_ack():
    s = session(max_inflight=2, queue_size=2)
    s._last_pid = 65534
    eq(s.publish(b"t", b"a", 1), 65535)
    out(s)
    recv(s, P.Puback(65535))
    s._last_pid = 65534
    eq(s.publish(b"t", b"b", 1), 65535)


# ---- outbound QoS 1 and 2


def test_qos1_completes_on_puback():
    s = session()
    log = events(s)
    pid = s.publish(b"a/b", b"hi", 1)
    eq(out(s), [P.Publish("a/b", b"hi", 1, packet_id=pid)])
    assert s.in_flight(pid)
    recv(s, P.Puback(pid))
    eq(log, [("delivered", pid)])
    assert not s.in_flight(pid)
    eq(s.inflight, 0)


def test_qos2_completes_on_pubcomp_after_pubrel():
    s = session()
    log = events(s)
    pid = s.publish(b"a", b"x", 2)
    eq(out(s), [P.Publish("a", b"x", 2, packet_id=pid)])
    recv(s, P.Pubrec(pid))
    eq(out(s), [P.Pubrel(pid)])
    eq(log, [])
    recv(s, P.Pubcomp(pid))
    eq(log, [("delivered", pid)])
    eq(s.inflight, 0)


def test_MQTT_4_6_0_4_pubrels_go_in_the_order_of_their_pubrecs():
    s = session()
    a = s.publish(b"t", b"1", 2)
    b = s.publish(b"t", b"2", 2)
    out(s)
    recv(s, P.Pubrec(b), P.Pubrec(a))
    eq(out(s), [P.Pubrel(b), P.Pubrel(a)])


def test_in_flight_window_holds_new_publishes_until_an_ack():
    s = session(max_inflight=2, queue_size=4)
    ids = [s.publish(b"t", bytes([48 + i]), 1) for i in range(4)]
    eq([p.packet_id for p in out(s)], ids[:2])
    eq(out(s), [])
    recv(s, P.Puback(ids[0]))
    eq([p.packet_id for p in out(s)], [ids[2]])


def test_queue_full_raises_and_keeps_what_was_accepted():
    s = session(max_inflight=1, queue_size=2)
    s.publish(b"t", b"1", 1)
    s.publish(b"t", b"2", 1)
    e = raises(QueueFull, s.publish, b"t", b"3", 1)
    assert "queue full" in str(e)
    eq([p.payload for p in out(s)], [b"1"])
    recv(s, P.Puback(1))
    eq([p.payload for p in out(s)], [b"2"])


def test_drop_oldest_policy_drops_the_oldest_queued_qos0_and_counts_it():
    s = Session(b"dev", max_inflight=1, queue_size=2, drop_oldest=True)
    log = events(s)
    s.publish(b"t", b"old", 0)
    s.publish(b"t", b"keep", 1)
    s.publish(b"t", b"new", 0)
    eq(s.dropped, 1)
    eq(log, [("discarded", b"t", b"old", 0)])
    s.start(0)
    out(s)
    recv(s, P.Connack(False, 0))
    eq([p.payload for p in out(s)], [b"keep", b"new"])


def test_a_publish_that_cannot_fit_max_packet_is_refused_up_front():
    s = session(max_packet=64)
    raises(ValueError, s.publish, b"t", b"x" * 100, 1)
    eq(s.pending, 0)


def test_a_publish_that_fills_max_packet_exactly_is_accepted_and_one_byte_more_is_not():
    # topic "t", QoS 1: the packet is 1 + varint(n) + n bytes for n = 5 + payload;
    # 131 bytes is n = 128, the first remaining length that takes a 2-byte varint
    for size, payload in ((64, 57), (131, 123)):
        s = session(max_packet=size)
        raises(ValueError, s.publish, b"t", b"x" * (payload + 1), 1)
        s.publish(b"t", b"x" * payload, 1)
        s.start(0)
        out(s)
        recv(s, P.Connack(False, 0))
        eq([len(p.payload) for p in out(s)], [payload])


def test_MQTT_4_7_1_1_wildcards_in_a_publish_topic_are_refused():
    s = session()
    raises(ValueError, s.publish, b"a/+", b"x", 0)
    raises(ValueError, s.publish, b"a/#", b"x", 0)


def test_MQTT_4_7_1_1_a_topic_is_checked_on_every_publish_unless_it_is_the_same_bytes():
    # the session remembers the last bytes topic that passed, to skip the check on a
    # device's repeated publishes; a mutable topic is copied, so changing the caller's
    # buffer later changes neither what is sent nor what was checked
    s = session()
    good = b"fleet/t"
    s.publish(good, b"1", 0)
    s.publish(good, b"2", 0)
    raises(ValueError, s.publish, b"fleet/+", b"x", 0)
    raises(ValueError, s.publish, b"fleet/+", b"x", 0)
    t = bytearray(b"fleet/a")
    s.publish(t, b"3", 0)
    t[6] = ord("#")
    raises(ValueError, s.publish, t, b"4", 0)
    s.publish(good, b"5", 0)
    eq(
        [(p.topic, p.payload) for p in out(s)],
        [("fleet/t", b"1"), ("fleet/t", b"2"), ("fleet/a", b"3"), ("fleet/t", b"5")],
    )


# ---- a QoS 0 message written at once (pack_qos0: the client's path past the queue)


def packed(s, n):
    return P.decode_all(packet(s, n))[0]


def test_a_qos0_message_with_nothing_ahead_of_it_is_packed_at_once():
    s = session()
    eq(packed(s, s.pack_qos0(b"fleet/t", b"now", False)), P.Publish("fleet/t", b"now", 0))
    eq(packed(s, s.pack_qos0(b"fleet/t", b"kept", True)), P.Publish("fleet/t", b"kept", 0, retain=True))
    eq(s.pending, 0)


def test_a_qos0_message_never_overtakes_what_is_queued_or_due():
    # each time pack_qos0 declines (0) and the message goes through publish()'s queue
    s = session(max_inflight=1)
    s.publish(b"t", b"1", 1)
    out(s)
    s.publish(b"t", b"2", 1)  # held: the window is full
    eq(s.pack_qos0(b"t", b"3", False), 0)
    s = session()
    s.subscribe(b"in/#", 1)  # a SUBSCRIBE waiting to be written
    eq(s.pack_qos0(b"t", b"x", False), 0)
    s = session(now=0, keepalive=10)
    s.tick(9900)  # a PINGREQ due
    eq(s.pack_qos0(b"t", b"x", False), 0)
    eq(out(s, 9900), [P.Pingreq()])
    s = Session(b"dev")
    s.start(0)  # CONNECT not yet answered
    eq(s.pack_qos0(b"t", b"x", False), 0)


def test_pack_qos0_leaves_copies_and_refusals_to_publish():
    s = session(max_packet=64)
    eq(s.pack_qos0(bytearray(b"t"), b"x", False), 0)  # a mutable topic: publish() copies it
    eq(s.pack_qos0(b"t", b"x" * 57, False), 0)  # might not fit: publish() says why
    raises(ValueError, s.publish, b"t", b"x" * 62, 0)
    eq(packed(s, s.pack_qos0(b"t", b"x" * 56, False)).payload, b"x" * 56)


# ---- messages and packets longer than the session's buffers (small, whatever max_packet)


def test_a_message_longer_than_tx_is_written_as_its_head_then_the_callers_bytes():
    s = session(clean=False, max_packet=1000)
    big = bytes(range(256)) * 2
    n = s.pack_qos0(b"t/0", big, True)  # past the queue
    assert s.tail is big  # written from the caller's bytes, not copied
    eq(P.decode_all(packet(s, n)), [P.Publish("t/0", big, 0, retain=True)])
    a = s.publish(b"t/1", big, 1)
    b = s.publish(b"t/short", b"s", 1)
    eq(out(s), [P.Publish("t/1", big, 1, packet_id=a), P.Publish("t/short", b"s", 1, packet_id=b)])
    eq(reconnect(s, True), [P.Connect("dev", False, 0)])  # resent after a reconnect, with DUP
    eq(
        out(s),
        [
            P.Publish("t/1", big, 1, dup=True, packet_id=a),
            P.Publish("t/short", b"s", 1, dup=True, packet_id=b),
        ],
    )


def test_long_topics_filters_and_connect_fields_grow_tx_in_the_call_that_brings_them():
    t = b"a/" + b"x" * 300
    s = Session(b"dev" * 50, clean_session=False, user=b"u" * 200, password=b"p" * 300)
    s.will = (t, b"w" * 200, 1, True)
    eq(start(s), [P.Connect("dev" * 50, False, 0, t.decode(), b"w" * 200, 1, True, "u" * 200, b"p" * 300)])
    recv(s, P.Connack(False, 0))
    pid = s.subscribe(t, 1)
    eq(out(s), [P.Subscribe(pid, [(t.decode(), 1)])])
    q = s.publish(t, b"m", 1)
    eq(out(s), [P.Publish(t.decode(), b"m", 1, packet_id=q)])


def test_a_packet_longer_than_rx_is_received_whole_in_any_pieces_and_short_ones_follow():
    s = session(max_packet=1000)
    got = events(s)
    big = bytes(range(256)) * 3
    data = P.Publish("t/big", big, 1, packet_id=7).encode() + P.Publish("t/s", b"s").encode()
    data += P.Publish("t/big", big, 0).encode()
    for step in (1, 100, 3000, len(data)):
        got.clear()
        for i in range(0, len(data), step):
            feed(s, data[i : i + step], 0)
        eq([(e[1], e[2]) for e in got if e[0] == "msg"], [(b"t/big", big), (b"t/s", b"s"), (b"t/big", big)])
        eq(out(s), [P.Puback(7)])


def pieces(s, size=0, most=0):
    """What the callback was given: the bytes of its pieces joined, and the set of (topic,
    qos) seen. Each piece is checked as it comes (no list of them: a board's heap): at most
    `most` bytes if given, and `rest` the bytes still to come of a message of `size`."""
    got = [bytearray(), set(), size]

    def cb(t, m):
        got[0].extend(m)
        got[1].add((t, s.qos))
        if size:
            got[2] -= len(m)
            eq(s.rest, got[2])
            assert 0 < len(m) <= most

    s.cb = cb
    return got


def test_a_message_longer_than_max_packet_comes_in_pieces_as_it_arrives_and_is_acked_after_the_last():
    big = bytes(range(200))
    data = P.Publish("t/big", big, 1, packet_id=7).encode()
    for step in (1, 37, 150, len(data)):
        s = session(max_packet=50)
        got = pieces(s, len(big), 50)  # no piece holds more than max_packet
        for i in range(0, len(data) - 1, step):
            feed(s, data[i : min(i + step, len(data) - 1)], 0)
        eq(out(s), [])  # not acknowledged before its last byte
        feed(s, data[-1:], 0)
        eq(bytes(got[0]), big)
        eq(got[1], {(b"t/big", 1)})
        eq(out(s), [P.Puback(7)])
        got[2] = 1  # the next message, of one byte, as before
        feed(s, P.Publish("t/s", b"s", 1, packet_id=8).encode(), 0)
        eq(bytes(got[0][-1:]), b"s")
        eq(out(s), [P.Puback(8)])


def test_a_publish_claiming_the_largest_length_is_taken_without_holding_more_than_max_packet():
    s = session(max_packet=128)
    got = pieces(s)
    feed(s, b"\x30\xff\xff\xff\x7f\x00\x01tabc", 0)  # 268 MB announced; a board holds pieces
    eq((bytes(got[0]), got[1], s.rest), (b"abc", {(b"t", 0)}, 268435455 - 6))
    assert len(s.rx()) <= 128


def test_a_topic_longer_than_max_packet_is_held_whole_and_its_payload_comes_in_pieces():
    # a topic may be 65,535 bytes whatever max_packet: refusing it would end the link on every
    # redelivery, so it is read whole into a buffer of its own, dropped once it is handled
    topic = "t/" + "x" * 298
    for qos in (0, 1):
        s = session(max_packet=64)
        got = pieces(s, 100, 64)
        feed(s, P.Publish(topic, b"p" * 100, qos, packet_id=5 if qos else None).encode(), 0)
        eq((bytes(got[0]), got[1], s.rest), (b"p" * 100, {(topic.encode(), qos)}, 0))
        eq(out(s), [P.Puback(5)] if qos else [])
        assert len(s.rx()) <= 64  # the topic's buffer is gone


def test_MQTT_4_3_3_2_a_long_qos2_message_is_delivered_once_and_its_repeat_only_answered():
    s = session(clean=False, max_packet=100)
    got = pieces(s)
    big = b"q" * 500
    feed(s, P.Publish("t", big, 2, packet_id=9).encode(), 0)
    eq(bytes(got[0]), big)
    eq(out(s), [P.Pubrec(9)])
    feed(s, P.Publish("t", big, 2, dup=True, packet_id=9).encode(), 0)  # PUBREC was lost
    eq(len(got[0]), len(big))
    eq(out(s), [P.Pubrec(9)])
    recv(s, P.Pubrel(9))
    eq(out(s), [P.Pubcomp(9)])


def test_a_long_message_cut_off_by_a_lost_link_is_delivered_again_whole_when_resent():
    for qos in (1, 2):
        s = session(clean=False, max_packet=100)
        got = pieces(s)
        data = P.Publish("t", b"z" * 500, qos, packet_id=5).encode()
        feed(s, data[:300], 0)
        eq(out(s), [])
        eq(reconnect(s, True), [P.Connect("dev", False, 0)])
        got[0] = bytearray()
        feed(s, P.Publish("t", b"z" * 500, qos, dup=True, packet_id=5).encode(), 0)
        eq(bytes(got[0]), b"z" * 500)  # not taken for a repeat
        eq(out(s), [P.Puback(5) if qos == 1 else P.Pubrec(5)])


def test_MQTT_4_8_0_2_a_callback_failing_on_a_piece_leaves_the_message_unacknowledged():
    s = session(max_packet=100)

    def cb(t, m):
        if s.rest == 0:
            raise KeyError("full")

    s.cb = cb
    raises(KeyError, feed, s, P.Publish("t", b"y" * 300, 1, packet_id=3).encode(), 0)
    eq(out(s), [])


def test_MQTT_4_7_1_1_pack_qos0_refuses_wildcards_in_a_topic():
    s = session()
    raises(ValueError, s.pack_qos0, b"a/+", b"x", False)
    raises(ValueError, s.pack_qos0, b"a/#", b"x", False)


# ---- resending after a reconnect


def test_MQTT_4_4_0_1_unacked_publishes_are_resent_with_original_ids_and_dup():
    s = session(clean=False)
    a = s.publish(b"t", b"1", 1)
    b = s.publish(b"t", b"2", 2)
    eq(out(s), [P.Publish("t", b"1", 1, packet_id=a), P.Publish("t", b"2", 2, packet_id=b)])
    eq(reconnect(s, True), [P.Connect("dev", False, 0)])
    eq(
        out(s),
        [P.Publish("t", b"1", 1, dup=True, packet_id=a), P.Publish("t", b"2", 2, dup=True, packet_id=b)],
    )


def test_MQTT_3_3_1_1_dup_is_set_only_on_redelivery():
    s = session(clean=False)
    pid = s.publish(b"t", b"x", 1)
    assert not out(s)[0].dup
    reconnect(s, True)
    assert out(s)[0].dup
    recv(s, P.Puback(pid))
    s.publish(b"t", b"y", 1)
    assert not out(s)[0].dup


def test_MQTT_4_3_3_1_after_pubrel_the_publish_is_never_resent():
    s = session(clean=False)
    pid = s.publish(b"t", b"x", 2)
    out(s)
    recv(s, P.Pubrec(pid))
    eq(out(s), [P.Pubrel(pid)])
    reconnect(s, True)
    eq(out(s), [P.Pubrel(pid)])
    recv(s, P.Pubcomp(pid))
    eq(s.inflight, 0)


def test_MQTT_4_6_0_1_resends_keep_the_original_order():
    s = session(clean=False)
    a = s.publish(b"t", b"a", 2)
    b = s.publish(b"t", b"b", 1)
    c = s.publish(b"t", b"c", 2)
    out(s)
    recv(s, P.Pubrec(a))
    out(s)
    reconnect(s, False)
    eq(
        out(s),
        [
            P.Pubrel(a),
            P.Publish("t", b"b", 1, dup=True, packet_id=b),
            P.Publish("t", b"c", 2, dup=True, packet_id=c),
        ],
    )


def test_resends_come_before_new_messages_and_respect_the_window():
    s = session(clean=False, max_inflight=2, queue_size=4)
    a = s.publish(b"t", b"a", 1)
    s.publish(b"t", b"b", 1)
    out(s)
    s.publish(b"t", b"c", 1)
    reconnect(s, True)
    eq([(p.payload, p.dup) for p in out(s)], [(b"a", True), (b"b", True)])
    recv(s, P.Puback(a))
    eq([(p.payload, p.dup) for p in out(s)], [(b"c", False)])


def test_MQTT_3_1_2_6_clean_session_discards_in_flight_but_keeps_the_queue():
    s = session(max_inflight=1, queue_size=3)
    log = events(s)
    s.publish(b"t", b"sent", 1)
    s.publish(b"t", b"queued", 1)
    out(s)
    reconnect(s, False)
    eq(log, [("discarded", b"t", b"sent", 1)])
    eq([(p.payload, p.dup) for p in out(s)], [(b"queued", False)])


def test_messages_published_while_disconnected_go_out_after_connack():
    s = session(clean=False)
    s.lost(0, None)
    s.publish(b"t", b"offline", 1)
    eq(out(s), [])
    reconnect(s, True)
    eq([p.payload for p in out(s)], [b"offline"])


# ---- inbound


def test_MQTT_3_3_4_1_qos1_is_delivered_then_acknowledged():
    s = session()
    log = events(s)
    recv(s, P.Publish("in/x", b"m", 1, packet_id=9))
    eq(log, [("msg", b"in/x", b"m", 1)])
    eq(out(s), [P.Puback(9)])


def test_qos0_is_delivered_without_ack():
    s = session()
    log = events(s)
    recv(s, P.Publish("in/x", b"m", 0, retain=True))
    eq(log, [("msg", b"in/x", b"m", 0)])
    eq(out(s), [])


def test_MQTT_4_6_0_2_pubacks_go_in_the_order_the_publishes_arrived():
    s = session()
    recv(
        s,
        P.Publish("a", b"1", 1, packet_id=7),
        P.Publish("a", b"2", 1, packet_id=3),
        P.Publish("a", b"3", 1, packet_id=5),
    )
    eq(out(s), [P.Puback(7), P.Puback(3), P.Puback(5)])


def test_MQTT_4_6_0_3_pubrecs_go_in_the_order_the_publishes_arrived():
    s = session()
    s.need_qos2()  # as a subscribe at QoS 2 does
    recv(s, P.Publish("a", b"1", 2, packet_id=4), P.Publish("a", b"2", 2, packet_id=2))
    eq(out(s), [P.Pubrec(4), P.Pubrec(2)])


def test_MQTT_4_3_3_2_inbound_qos2_is_delivered_once_and_its_id_kept_until_pubrel():
    # §4.3.3 method B: delivered on arrival, then only the packet id is kept until PUBREL
    s = session()
    s.need_qos2()
    log = events(s)
    recv(s, P.Publish("q", b"once", 2, packet_id=5))
    eq(log, [("msg", b"q", b"once", 2)])
    eq(out(s), [P.Pubrec(5)])
    recv(s, P.Publish("q", b"once", 2, dup=True, packet_id=5))  # a repeat before PUBREL
    eq(out(s), [P.Pubrec(5)])
    eq(len(log), 1)  # answered, never delivered twice
    recv(s, P.Pubrel(5))
    eq(out(s), [P.Pubcomp(5)])
    recv(s, P.Pubrel(5))  # PUBREL again: answer, deliver nothing
    eq(out(s), [P.Pubcomp(5)])
    eq(len(log), 1)
    recv(s, P.Publish("q", b"next", 2, packet_id=5))  # after PUBCOMP the id is new
    eq(log[-1], ("msg", b"q", b"next", 2))


def test_a_retained_qos2_message_is_delivered_with_its_retain_flag():
    s = session()
    s.need_qos2()
    flags = []
    s.cb = lambda t, m: flags.append((s.qos, s.retained))
    recv(s, P.Publish("q", b"kept", 2, retain=True, packet_id=8))
    recv(s, P.Pubrel(8))
    eq(flags, [(2, True)])


def test_qos2_to_a_session_that_never_asked_for_it_is_delivered_and_answered():
    # a broker that sends QoS 2 on a QoS 1 subscription (aedes) breaks MQTT-3.8.4-6; the
    # message is delivered and its flow answered all the same, and no code is loaded for it
    s = session()
    log = events(s)
    recv(s, P.Publish("q", b"x", 2, packet_id=8))
    eq(log, [("msg", b"q", b"x", 2)])
    eq(out(s), [P.Pubrec(8)])
    recv(s, P.Pubrel(8))
    eq(out(s), [P.Pubcomp(8)])
    assert s._q2 is None


def test_MQTT_3_3_2_2_a_received_topic_is_checked_even_after_a_good_one():
    # the session skips the byte-by-byte checks for a topic equal to the last one that
    # passed them; any other topic is checked in full
    for bad, rule in (
        (b"a/+", "MQTT-3.3.2-2"),
        (b"a/#", "MQTT-3.3.2-2"),
        (b"a/\xed\xa0\x80", "MQTT-1.5.3-1"),
        (b"a/\x00", "MQTT-1.5.3-2"),
    ):
        for qos in (0, 1, 2):
            s = session()
            s.need_qos2()
            log = events(s)
            feed(s, raw_publish(b"a/b", b"1"), 0)
            feed(s, raw_publish(b"a/b", b"2"), 0)
            e = raises(ProtocolError, feed, s, raw_publish(bad, b"3", qos, 7), 0)
            assert rule in str(e), (bad, str(e))
            eq(log, [("msg", b"a/b", b"1", 0), ("msg", b"a/b", b"2", 0)])
            eq(out(s), [])  # nothing acknowledged


def test_messages_on_alternating_topics_are_each_delivered():
    s = session()
    log = events(s)
    for t in (b"a/b", b"a/c", b"a/b", b"a/b"):
        feed(s, raw_publish(t, b"m"), 0)
    eq([m[1] for m in log], [b"a/b", b"a/c", b"a/b", b"a/b"])


def test_an_unexpected_pubrel_is_answered_with_pubcomp():
    s = session()
    log = events(s)
    recv(s, P.Pubrel(77))
    eq(out(s), [P.Pubcomp(77)])
    eq(log, [])


def test_any_number_of_unreleased_inbound_qos2_messages_is_taken():
    # MQTT 3.1.1 sets no limit on a broker's QoS 2 window: 40 unreleased messages (more
    # than max_inflight, more than the id table) are each delivered once and released
    s = session(max_inflight=1, queue_size=1)
    s.need_qos2()
    log = events(s)
    for pid in range(1, 41):
        recv(s, P.Publish("q", b"%d" % pid, 2, packet_id=pid))
        eq(out(s), [P.Pubrec(pid)])
    for pid in range(1, 41):  # the broker repeats them all (as after a lost PUBREC)
        recv(s, P.Publish("q", b"%d" % pid, 2, dup=True, packet_id=pid))
        eq(out(s), [P.Pubrec(pid)])
    eq(len(log), 40)
    for pid in range(40, 0, -1):
        recv(s, P.Pubrel(pid))
        eq(out(s), [P.Pubcomp(pid)])
    recv(s, P.Publish("q", b"again", 2, packet_id=33))  # released: a new message
    eq(len(log), 41)


def test_a_burst_of_qos1_publishes_is_taken_while_the_acks_wait():
    # 40 QoS 1 PUBLISHes in one read: room() turns false before the acks' ring is full,
    # and taking packets only while it is true (as the I/O loops do) refuses none
    s = session(max_inflight=2, queue_size=2, max_subscriptions=1)
    log = events(s)
    data = b"".join(P.Publish("a", b"%d" % i, 1, packet_id=i + 1).encode() for i in range(40))
    i = 0
    acks = []
    while i < len(data) or s.room() and out(s):
        v = s.rx()  # read while there is room, as the I/O loops do
        k = min(len(v), len(data) - i, 7)
        v[:k] = data[i : i + k]
        i += k
        s.received(k, 0)
        acks += out(s)
        s.received(0, 0)
        acks += out(s)
    eq(len(log), 40)
    eq(acks, [P.Puback(i + 1) for i in range(40)])


def test_bytes_fed_while_no_ack_is_written_stop_with_a_protocol_error_once_no_room_is_left():
    # feed() hands over bytes as if read; a driver that never writes the acks runs out of room
    # for them, and is told so (an I/O loop stops reading instead: the case above)
    s = session(max_inflight=2, queue_size=2, max_subscriptions=1)
    log = events(s)
    data = b"".join(P.Publish("a", b"%d" % i, 1, packet_id=i + 1).encode() for i in range(40))
    e = raises(ProtocolError, feed, s, data, 0)
    assert "acknowledgements waiting" in str(e), str(e)
    assert 0 < len(log) < 40, len(log)  # the ones taken while there was room were delivered


def test_MQTT_3_8_4_5_a_suback_with_more_return_codes_than_filters_is_refused():
    s = session()
    pid = s.subscribe(b"a", 1)
    out(s)
    e = raises(ProtocolError, recv, s, P.Suback(pid, [1, 1]))
    assert "MQTT-3.8.4-5" in str(e), str(e)


def test_a_packet_stopped_half_way_is_a_dead_link_even_without_keepalive():
    s = session(timeout=2)
    feed(s, b"\x30\x10\x00\x01a", 1000)  # 5 of a PUBLISH's 18 bytes
    eq(s.tick(2000), 1000)
    e = raises(MQTTException, s.tick, 3000)
    assert "half-way" in str(e), str(e)


def test_waiting_for_the_next_packet_has_no_deadline_without_keepalive():
    s = session()
    eq(s.tick(10**6), 60000)  # no keepalive, no packet begun: nothing is due


def test_a_failing_callback_withdraws_the_ack_so_the_broker_redelivers():
    s = session()

    def boom(t, m):
        raise RuntimeError("app failed")

    s.cb = boom
    raises(RuntimeError, recv, s, P.Publish("a", b"1", 1, packet_id=3))
    eq(out(s), [])


# ---- broker misbehaviour


def test_puback_for_an_unknown_id_is_a_protocol_error_and_loses_nothing():
    s = session()
    pid = s.publish(b"t", b"keep", 1)
    out(s)
    e = raises(ProtocolError, recv, s, P.Puback(pid + 1))
    assert "PUBACK" in str(e)
    assert s.in_flight(pid)


def test_pubcomp_before_pubrec_is_a_protocol_error():
    s = session()
    pid = s.publish(b"t", b"x", 2)
    out(s)
    raises(ProtocolError, recv, s, P.Pubcomp(pid))
    assert s.in_flight(pid)


def test_MQTT_3_3_1_4_qos3_from_the_broker_is_a_protocol_error():
    s = session()
    e = raises(ProtocolError, feed, s, b"\x36\x05\x00\x01a\x00\x01", 0)
    assert "MQTT-3.3.1-4" in str(e)


def test_a_second_connack_is_a_protocol_error():
    s = session()
    raises(ProtocolError, recv, s, P.Connack(False, 0))


def test_MQTT_2_2_2_2_bad_flags_from_the_broker_are_a_protocol_error():
    s = session()
    raises(ProtocolError, feed, s, b"\x41\x02\x00\x01", 0)


def test_a_packet_other_than_publish_longer_than_max_packet_is_refused_before_it_is_read():
    s = session(max_packet=128)
    e = raises(ProtocolError, feed, s, b"\x90\xff\xff\xff\x7f", 0)  # a SUBACK claiming 268 MB
    assert "max_packet" in str(e)


# ---- subscriptions


def test_subscribe_and_suback():
    s = session()
    events(s)
    pid = s.subscribe(b"a/+", 1)
    eq(out(s), [P.Subscribe(pid, [("a/+", 1)])])
    eq(s.sub_result(pid), -1)
    eq(s.sub_result(pid), -1)
    recv(s, P.Suback(pid, [1]))
    eq(s.sub_result(pid), 1)
    assert s.sub_result(pid) >= 0


def test_a_refused_subscription_is_reported_and_forgotten():
    s = session()
    events(s)
    pid = s.subscribe(b"x/#", 0)
    out(s)
    recv(s, P.Suback(pid, [0x80]))
    eq(s.sub_result(pid), 0x80)
    reconnect(s, False)
    eq(out(s), [])


def test_unsubscribe_and_unsuback():
    s = session()
    events(s)
    pid = s.subscribe(b"a", 0)
    out(s)
    recv(s, P.Suback(pid, [0]))
    u = s.unsubscribe(b"a")
    eq(out(s), [P.Unsubscribe(u, ["a"])])
    eq(s.sub_result(u), -1)
    recv(s, P.Unsuback(u))
    eq(s.sub_result(u), 0)


def test_subscriptions_are_made_again_when_the_broker_has_no_session():
    s = session(clean=False)
    a = s.subscribe(b"a/#", 1)
    b = s.subscribe(b"b", 2)
    out(s)
    recv(s, P.Suback(a, [1]), P.Suback(b, [2]))
    reconnect(s, False)
    subs = out(s)
    eq([p.topics for p in subs], [[("a/#", 1)], [("b", 2)]])
    for p in subs:
        recv(s, P.Suback(p.packet_id, [1]))
    reconnect(s, True)  # the broker kept them: nothing to send again
    eq(out(s), [])


def test_an_unacknowledged_subscribe_is_sent_again_even_if_the_session_was_kept():
    s = session(clean=False)
    s.subscribe(b"a", 1)
    out(s)
    reconnect(s, True)
    eq([p.topics for p in out(s)], [[("a", 1)]])


def test_subscription_table_is_fixed_size():
    s = session(max_subscriptions=2)
    s.subscribe(b"a", 0)
    s.subscribe(b"b", 0)
    s.subscribe(b"a", 1)  # the same filter again updates its entry
    e = raises(MQTTException, s.subscribe, b"c", 0)
    assert "max_subscriptions" in str(e)


def test_MQTT_4_7_1_2_invalid_filters_are_refused():
    s = session()
    raises(ValueError, s.subscribe, b"a/#/b", 0)
    raises(ValueError, s.subscribe, b"a+", 0)


# ---- keepalive (Paho's checkForActivity, delta 100 ms)


def test_MQTT_3_1_2_23_pingreq_when_nothing_was_sent_within_keepalive():
    s = session(now=0, keepalive=10)
    s.tick(9899)
    eq(out(s, 9899), [])
    s.tick(9900)
    eq(out(s, 9900), [P.Pingreq()])


def test_a_silent_broker_needs_a_ping_even_while_we_send():
    s = session(now=0, keepalive=10)
    for t in range(1000, 9900, 1000):
        s.publish(b"t", b"x", 0)
        out(s, t)
        s.tick(t)
    s.tick(9900)  # nothing received for keepalive - 100 ms
    eq(out(s, 9900), [P.Pingreq()])


def test_no_pingresp_within_keepalive_plus_100ms_is_a_dead_link():
    s = session(now=0, keepalive=10)
    s.tick(9900)
    out(s, 9900)
    s.tick(19999)
    e = raises(MQTTException, s.tick, 20000)
    assert "keepalive" in str(e)


def test_pingresp_keeps_the_link_alive():
    s = session(now=0, keepalive=10)
    s.tick(9900)
    out(s, 9900)
    recv(s, P.Pingresp(), now=10000)
    s.tick(20000)
    eq(out(s, 20000), [P.Pingreq()])  # next ping due, no timeout


def test_nothing_written_for_twice_keepalive_is_a_write_timeout():
    s = session(now=0, keepalive=10)
    recv(s, P.Pingresp(), now=19000)  # keeps inbound fresh; nothing goes out
    e = raises(MQTTException, s.tick, 20000)
    assert "written" in str(e)


def test_keepalive_zero_never_pings():
    s = session(now=0, keepalive=0)
    s.tick(10**6)
    eq(out(s, 10**6), [])


# ---- reconnect backoff (Paho: 1 s doubling to 128 s; fleetwire adds jitter)


def test_backoff_doubles_from_the_minimum_to_the_cap():
    d, seen = 0, []
    for _ in range(10):
        d, wait = backoff(d, 1000, 128000, 65535)
        seen.append(d)
    eq(seen, [1000, 2000, 4000, 8000, 16000, 32000, 64000, 128000, 128000, 128000])


def test_backoff_waits_between_half_and_all_of_the_delay():
    # so a fleet that lost its broker at one moment does not come back at one moment
    eq(backoff(4000, 1000, 128000, 0), (8000, 4000))
    eq(backoff(4000, 1000, 128000, 32768), (8000, 6000))
    d, w = backoff(4000, 1000, 128000, 65535)
    if not 7999 <= w <= 8000:
        raise AssertionError(w)
