# The MQTT 3.1.1 client statements that no flow in session_cases.py names, one case each,
# named for the statement ids it proves (tools/statements.py counts them). Portable:
# CPython and the MicroPython unix port.

from fleetwire.session import Session
from fleetwire.codec import packets as P
from run import raises
from session_kit import out, raw_out, recv, session, eq, events, reconnect

# On MicroPython (tests/portable/test_portable.py): the heap, and the modules it imports by
# their bare names (beside it, or fleetwire.host.portable's), compiled with it.
HEAP = "96K"
ALSO = ("session_kit",)


def connect_flags(s):
    c = s.tx  # the CONNECT start() packed
    return c[9] if c[1] < 128 else c[10]  # after the fixed header, "MQTT" and the level


def test_MQTT_3_3_2_1_and_4_7_3_2_topics_are_utf8_without_u0000():
    s = session()
    for topic, rule in ((b"\xff", "MQTT-1.5.3-1"), (b"a\x00b", "MQTT-1.5.3-2")):
        assert rule in str(raises(ValueError, s.publish, topic, b"x", 0))
        assert rule in str(raises(ValueError, s.subscribe, topic, 0))
    eq(out(s), [])


def test_MQTT_3_1_2_4_and_4_1_0_1_and_2_a_persistent_session_keeps_its_state_across_connections():
    # outbound QoS 1 and 2 in flight, and an inbound QoS 2 awaiting PUBREL, all survive
    # the lost connection (MQTT-3.1.3-2: the same client id finds them again)
    s = session(clean=False)
    log = events(s)
    a = s.publish(b"t", b"a", 1)
    b = s.publish(b"t", b"b", 2)
    out(s)
    recv(s, P.Pubrec(b), P.Publish("in", b"q2", 2, packet_id=44))
    eq(out(s), [P.Pubrel(b), P.Pubrec(44)])
    eq(log, [("msg", b"in", b"q2", 2)])
    reconnect(s, True)
    eq(out(s), [P.Publish("t", b"a", 1, dup=True, packet_id=a), P.Pubrel(b)])
    recv(s, P.Publish("in", b"q2", 2, dup=True, packet_id=44), P.Pubrel(44))
    eq(out(s), [P.Pubrec(44), P.Pubcomp(44)])
    eq(log, [("msg", b"in", b"q2", 2)])  # its id was kept: the repeat is not delivered


def test_MQTT_3_1_2_22_a_password_without_user_name_is_refused():
    s = Session(b"dev")
    s.password = b"pw"
    e = raises(ValueError, s.start, 0)
    assert "MQTT-3.1.2-22" in str(e)


def test_MQTT_3_1_2_13_and_15_without_a_will_its_qos_and_retain_bits_are_0():
    s = Session(b"dev")
    s.start(0)
    eq(connect_flags(s) & 0x3C, 0)  # will flag, will QoS, will retain


def test_MQTT_3_1_2_18_and_20_no_user_name_and_no_password_flags_without_them():
    s = Session(b"dev")
    s.start(0)
    eq(connect_flags(s) & 0xC0, 0)
    s = Session(b"dev", user="u")
    s.start(0)
    eq(connect_flags(s) & 0xC0, 0x80)
    s = Session(b"dev", user="u", password="pw")
    s.start(0)
    eq(connect_flags(s) & 0xC0, 0xC0)


def test_MQTT_3_1_3_4_and_10_and_11_client_id_will_topic_and_user_name_are_utf8():
    bad = b"d\xc0v"  # 0xC0 never starts a UTF-8 sequence
    for k in range(3):
        s = Session(bad if k == 0 else b"dev", max_packet=128)
        if k == 1:
            s.will = (bad, b"m", 0, False)
        elif k == 2:
            s.username = bad
        e = raises(ValueError, s.start, 0)
        assert "MQTT-1.5.3-1" in str(e), str(e)


def test_MQTT_2_2_2_1_every_packet_the_client_writes_has_table_2_2_flags():
    s = Session(b"dev", keepalive=10, clean_session=False)
    s.will = (b"w", b"x", 1, False)
    written = [bytes(s.tx[: s.start(0)])]
    recv(s, P.Connack(False, 0))
    s.subscribe(b"a/#", 1)
    s.unsubscribe(b"b")
    s.publish(b"t", b"1", 1)
    p2 = s.publish(b"t", b"2", 2)
    written += raw_out(s)
    recv(
        s,
        P.Publish("in", b"q1", 1, packet_id=5),
        P.Publish("in", b"q2", 2, packet_id=6),
        P.Pubrel(6),
        P.Pubrec(p2),
    )
    s.tick(9900)
    written += raw_out(s, 9900)
    s.disconnect()
    written += raw_out(s, 9900)
    types = {}
    for pkt in written:
        types[pkt[0] >> 4] = pkt[0] & 15
    flags = {1: 0, 3: 2, 4: 0, 5: 0, 6: 2, 7: 0, 8: 2, 10: 2, 12: 0, 14: 0}
    eq(sorted(types), sorted(flags))  # every type a client writes, QoS 1 PUBLISH included
    for t, f in flags.items():
        if t != 3:
            eq((t, types[t]), (t, f))


def test_MQTT_2_3_1_6_acks_carry_the_id_of_the_publish_they_answer():
    s = session()
    s.need_qos2()
    recv(s, P.Publish("in", b"1", 1, packet_id=301), P.Publish("in", b"2", 2, packet_id=302))
    eq(out(s), [P.Puback(301), P.Pubrec(302)])
    pid = s.publish(b"t", b"x", 2)
    out(s)
    recv(s, P.Pubrec(pid))
    eq(out(s), [P.Pubrel(pid)])


def test_MQTT_4_3_1_1_a_qos0_publish_never_carries_dup_even_after_a_reconnect():
    # the QoS 1 message before it is resent with DUP; the QoS 0 one is sent once, DUP 0
    s = session(clean=False, max_inflight=1)
    s.publish(b"t", b"held", 1)
    s.publish(b"t", b"zero", 0)
    pkts = raw_out(s)
    reconnect(s, True)
    pkts += raw_out(s)
    recv(s, P.Puback(1))
    pkts += raw_out(s)
    eq([(p[0] & 6, p[0] & 8) for p in pkts if p[0] >> 4 == 3], [(2, 0), (0, 0), (2, 8)])


def test_MQTT_4_3_2_2_after_puback_the_same_id_is_a_new_message():
    s = session()
    log = events(s)
    recv(s, P.Publish("in", b"a", 1, packet_id=5))
    eq(out(s), [P.Puback(5)])
    recv(s, P.Publish("in", b"b", 1, dup=True, packet_id=5))
    eq(out(s), [P.Puback(5)])
    eq([m[2] for m in log], [b"a", b"b"])


def test_MQTT_4_5_0_2_a_message_the_application_ignores_is_still_acknowledged():
    s = session()  # no callback set: the message is dropped
    s.need_qos2()
    recv(s, P.Publish("in", b"a", 1, packet_id=8), P.Publish("in", b"b", 2, packet_id=9))
    eq(out(s), [P.Puback(8), P.Pubrec(9)])


def test_MQTT_3_14_4_2_nothing_is_written_after_disconnect():
    for queued in (False, True):
        s = session()
        if queued:
            s.publish(b"t", b"queued", 1)
        s.disconnect()
        eq(out(s), [P.Disconnect()])
        eq(s.pack_qos0(b"t", b"later", False), 0)
        s.publish(b"t", b"later", 0)
        s.tick(10**6)
        eq(out(s, 10**6), [])
