"""The real client (MicroPython unix port with a 80 KB heap, and CPython) against a
scripted broker that expects exact bytes and answers with exact bytes. Test names
carry the MQTT 3.1.1 statement id they prove, where there is one."""

import time

from fleetwire.codec.packets import (
    Connack,
    Connect,
    Disconnect,
    Pingreq,
    Pingresp,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
    Suback,
)


def open_session(device, broker, clean=True, present=False, keepalive=0, **kw):
    """A device connected to the scripted broker, CONNECT checked byte for byte."""
    d = device()
    d.call("init", id=d.client_id, host="127.0.0.1", port=broker.port, keepalive=keepalive, **kw)
    d.begin("connect", clean=clean)
    broker.accept(timeout=10)
    broker.expect(Connect(d.client_id, clean, keepalive))
    broker.send(Connack(present, 0))
    assert d.result()["ok"]
    return d


def reconnect(d, broker, present):
    broker.close_client()
    d.begin("connect", clean=False)
    broker.accept(timeout=10)
    broker.expect(Connect(d.client_id, False, 0))
    broker.send(Connack(present, 0))
    r = d.result()
    assert r["ok"], r


def test_MQTT_3_1_0_1_connect_is_the_first_packet(device, scripted_broker):
    open_session(device, scripted_broker, keepalive=30)


def test_MQTT_3_1_2_22_a_password_without_a_user_name_is_refused_before_connecting(device, scripted_broker):
    d = device()
    r = d.try_call("init", id="x", host="127.0.0.1", port=scripted_broker.port, password="secret")
    assert not r["ok"] and "MQTT-3.1.2-22" in r["error"]


def test_MQTT_4_3_2_1_qos1_publish_waits_for_puback(device, scripted_broker):
    b = scripted_broker
    d = open_session(device, b)
    d.begin("pub", topic="t", msg="m", qos=1)
    p = b.receive()
    assert p == Publish("t", b"m", 1, packet_id=p.packet_id) and p.packet_id
    b.send(Puback(p.packet_id))
    assert d.result() == {"ok": True, "pid": p.packet_id}


def test_MQTT_4_3_3_1_qos2_publish_flow(device, scripted_broker):
    b = scripted_broker
    d = open_session(device, b)
    d.begin("pub", topic="t", msg="m", qos=2)
    pid = b.receive().packet_id
    b.send(Pubrec(pid))
    b.expect(Pubrel(pid))
    b.send(Pubcomp(pid))
    assert d.result()["pid"] == pid


def test_MQTT_4_4_0_1_unacknowledged_publishes_are_resent_with_dup_and_original_ids(device, scripted_broker):
    b = scripted_broker
    d = open_session(device, b, clean=False)
    d.call("pub", topic="t", msg="a", qos=1, block=False)
    d.call("pub", topic="t", msg="b", qos=2, block=False)
    a, c = b.receive(), b.receive()
    reconnect(d, b, present=True)
    d.begin("loop", ms=200)
    b.expect(Publish("t", b"a", 1, dup=True, packet_id=a.packet_id))  # MQTT-4.6.0-1: in order
    b.expect(Publish("t", b"b", 2, dup=True, packet_id=c.packet_id))
    d.result()


def test_MQTT_4_3_3_1_after_pubrec_only_pubrel_is_resent(device, scripted_broker):
    b = scripted_broker
    d = open_session(device, b, clean=False)
    d.call("pub", topic="t", msg="x", qos=2, block=False)
    pid = b.receive().packet_id
    b.send(Pubrec(pid))
    d.call("loop", ms=100)
    b.expect(Pubrel(pid))
    reconnect(d, b, present=True)
    d.begin("loop", ms=300)
    b.expect(Pubrel(pid))
    b.expect_nothing(0.2)
    b.send(Pubcomp(pid))
    assert d.result()["pending"] in (0, 1)
    assert d.call("loop", ms=100)["pending"] == 0


def test_in_flight_window_full_holds_further_publishes(device, scripted_broker):
    b = scripted_broker
    d = open_session(device, b, max_inflight=2)
    for m in "abc":
        d.call("pub", topic="t", msg=m, qos=1, block=False)
    first, _ = b.receive(), b.receive()
    b.expect_nothing(0.3)
    b.send(Puback(first.packet_id))
    d.begin("loop", ms=200)
    assert b.receive().payload == b"c"
    d.result()


def test_a_qos0_message_waits_behind_qos1_messages_the_window_holds(device, scripted_broker):
    # a QoS 0 publish is written at once only when nothing is queued ahead of it
    b = scripted_broker
    d = open_session(device, b, max_inflight=1)
    d.call("pub", topic="t", msg="a", qos=1, block=False)
    first = b.receive()
    d.call("pub", topic="t", msg="b", qos=1, block=False)
    d.call("pub", topic="t", msg="c", qos=0, block=False)
    b.expect_nothing(0.3)
    b.send(Puback(first.packet_id))
    d.begin("loop", ms=200)
    assert b.receive().payload == b"b"
    assert b.receive() == Publish("t", b"c", 0)
    d.result()


def test_MQTT_3_1_2_23_qos0_publishes_count_as_traffic_for_keepalive(device, scripted_broker):
    # keepalive 1 s, traffic both ways every 200 ms for 2.4 s: no PINGREQ is needed
    b = scripted_broker
    d = open_session(device, b, keepalive=1)
    for i in range(12):
        b.send(Publish("in", b"%d" % i, 0))
        d.call("pub", topic="out", msg=str(i))
        d.call("loop", ms=0)
        assert b.receive() == Publish("out", b"%d" % i, 0)
        time.sleep(0.2)
    b.expect_nothing(0.3)


def test_MQTT_3_14_4_1_the_client_closes_the_connection_after_disconnect(device, scripted_broker):
    b = scripted_broker
    d = open_session(device, b)
    d.call("disconnect")
    b.expect(Disconnect())
    b.expect_closed(timeout=2)


def test_MQTT_4_6_0_2_pubacks_follow_the_order_of_arrival(device, scripted_broker):
    b = scripted_broker
    d = open_session(device, b)
    d.begin("sub", topic="in/#", qos=1)
    s = b.receive()
    b.send(Suback(s.packet_id, [1]))
    d.result()
    b.send(b"".join(Publish("in/x", b"%d" % i, 1, packet_id=pid).encode() for i, pid in enumerate((9, 4, 7))))
    msgs = d.call("recv", n=3)["msgs"]
    assert [m[1] for m in msgs] == ["0", "1", "2"]
    b.expect(Puback(9))
    b.expect(Puback(4))
    b.expect(Puback(7))


def test_MQTT_4_3_3_2_inbound_qos2_exactly_once(device, scripted_broker):
    b = scripted_broker
    d = open_session(device, b)
    d.begin("sub", topic="q", qos=2)
    b.send(Suback(b.receive().packet_id, [2]))
    d.result()
    b.send(Publish("q", b"once", 2, packet_id=3))
    b.send(Publish("q", b"once", 2, dup=True, packet_id=3))  # a repeat before PUBREL
    assert d.call("recv", n=2, ms=300)["msgs"] == [["q", "once", 2, False]]  # delivered once
    b.expect(Pubrec(3))
    b.expect(Pubrec(3))
    b.send(Pubrel(3))
    d.begin("loop", ms=200)
    b.expect(Pubcomp(3))
    d.result()
    b.send(Pubrel(3))  # PUBREL again: answered, not delivered again
    assert d.call("recv", n=1, ms=300)["msgs"] == []
    b.expect(Pubcomp(3))


def test_an_unexpected_pubrel_is_answered_with_pubcomp(device, scripted_broker):
    b = scripted_broker
    d = open_session(device, b)
    b.send(Pubrel(42))
    d.begin("loop", ms=200)
    b.expect(Pubcomp(42))
    d.result()


def test_MQTT_3_1_2_23_keepalive_pings_and_a_dead_link_is_closed(device, scripted_broker):
    b = scripted_broker
    d = open_session(device, b, keepalive=1)
    d.begin("loop", ms=5000)
    b.expect(Pingreq(), timeout=2)
    b.send(Pingresp())
    b.expect(Pingreq(), timeout=2)  # answered once: the next one is due a keepalive later
    b.expect_closed(timeout=2)  # unanswered: the client gives up on the link
    r = d.result()
    assert not r["ok"] and "keepalive" in r["error"]


# ---- a misbehaving broker: a clear error, the connection closed, nothing queued lost


def misbehave(device, b, bad, words):
    d = open_session(device, b, clean=False)
    d.call("pub", topic="keep", msg="me", qos=1, block=False)
    p = b.receive()
    b.send(bad)
    r = d.try_call("loop", ms=500)
    assert not r["ok"], r
    for w in words:
        assert w in r["error"], r["error"]
    b.expect_closed(timeout=2)
    reconnect(d, b, present=True)
    d.begin("loop", ms=300)
    b.expect(Publish("keep", b"me", 1, dup=True, packet_id=p.packet_id))
    d.result()


def test_MQTT_3_3_1_4_qos3_publish_closes_the_connection(device, scripted_broker):
    misbehave(device, scripted_broker, b"\x36\x05\x00\x01a\x00\x01", ["MQTT-3.3.1-4"])


def test_an_ack_claiming_268_mb_is_refused_without_allocating(device, scripted_broker):
    # (a PUBLISH that long is valid MQTT: it is taken in pieces, see test_mosquitto.py)
    misbehave(device, scripted_broker, b"\x90\xff\xff\xff\x7f", ["max_packet"])


def test_MQTT_4_8_0_1_a_puback_for_an_unknown_id_closes_the_connection(device, scripted_broker):
    misbehave(device, scripted_broker, Puback(999).encode(), ["PUBACK", "999"])


def test_MQTT_1_5_3_1_an_invalid_utf8_topic_closes_the_connection(device, scripted_broker):
    misbehave(device, scripted_broker, b"\x30\x05\x00\x02\xed\xa0x", ["MQTT-1.5.3-1"])


def test_MQTT_2_2_2_2_reserved_flags_close_the_connection(device, scripted_broker):
    misbehave(device, scripted_broker, b"\x42\x02\x00\x01", ["MQTT-2.2.2-2"])


def test_a_connack_refusal_is_named(device, scripted_broker):
    b = scripted_broker
    d = device()
    d.call("init", id=d.client_id, host="127.0.0.1", port=b.port)
    d.begin("connect")
    b.accept(timeout=10)
    b.receive()
    b.send(Connack(False, 5))
    r = d.result()
    assert not r["ok"] and "not authorized" in r["error"] and "5" in r["error"]


def test_a_broker_that_never_answers_connect_times_out(device, scripted_broker):
    b = scripted_broker
    d = device()
    d.call("init", id=d.client_id, host="127.0.0.1", port=b.port, io_timeout=1)
    d.begin("connect")
    b.accept(timeout=10)
    b.receive()
    r = d.result(timeout=10)
    assert not r["ok"] and "timed out" in r["error"]


# ---- faults found by interop scenarios and a hostile broker (issue 18)


def subscribed(device, b, topic="in/#", qos=1, **kw):
    d = open_session(device, b, **kw)
    d.begin("sub", topic=topic, qos=qos)
    b.send(Suback(b.receive().packet_id, [qos]))
    assert d.result()["rc"] == qos
    return d


def test_a_retained_qos2_message_is_delivered_with_its_retain_flag(device, scripted_broker):
    b = scripted_broker
    d = subscribed(device, b, qos=2)
    b.send(Publish("in/x", b"kept", 2, retain=True, packet_id=6))
    assert d.call("recv", n=1)["msgs"] == [["in/x", "kept", 2, True]]
    b.expect(Pubrec(6))
    b.send(Pubrel(6))
    d.begin("loop", ms=200)
    b.expect(Pubcomp(6))
    d.result()


def test_MQTT_3_1_2_6_a_clean_connect_starts_with_no_subscriptions(device, scripted_broker):
    # the program's own clean connect() forgets what it subscribed to before, as the
    # broker does: nothing is subscribed again behind its back
    b = scripted_broker
    d = subscribed(device, b, topic="old/#")
    b.close_client()
    d.begin("connect", clean=True)
    b.accept(timeout=10)
    b.expect(Connect(d.client_id, True, 0))
    b.send(Connack(False, 0))
    assert d.result()["ok"]
    d.begin("loop", ms=300)
    b.expect_nothing(0.3)
    d.result()


def test_the_clients_own_reconnect_subscribes_again(device, scripted_broker):
    # reconnect=True brings back what the program had, on a clean session too
    b = scripted_broker
    d = subscribed(device, b, topic="keep/#", reconnect=True, backoff_min=0.05, backoff_max=0.1)
    b.close_client()
    d.begin("loop", ms=3000)
    b.accept(timeout=10)
    b.expect(Connect(d.client_id, True, 0))
    b.send(Connack(False, 0))
    s = b.receive()
    assert s.topics == [("keep/#", 1)], s
    b.send(Suback(s.packet_id, [1]))
    d.result()


def test_MQTT_3_1_3_7_an_empty_client_id_without_clean_session_is_refused_before_connecting(
    device, scripted_broker
):
    b = scripted_broker
    d = device()
    d.call("init", id="", host="127.0.0.1", port=b.port)
    r = d.try_call("connect", clean=False)
    assert not r["ok"] and r["error"].startswith("CodecError") and "MQTT-3.1.3-7" in r["error"], r
    try:
        b.accept(timeout=0.5)
    except AssertionError:
        pass  # nothing was opened
    else:
        raise AssertionError("the client opened a connection for a CONNECT it could not send")
    assert d.call("state")["connected"] is False


def test_a_connect_that_times_out_leaves_nothing_open(device, scripted_broker):
    b = scripted_broker
    d = device()
    d.call("init", id=d.client_id, host="127.0.0.1", port=b.port, io_timeout=1)
    d.begin("connect")
    b.accept(timeout=10)
    b.receive()
    r = d.result(timeout=10)
    assert not r["ok"] and "timed out" in r["error"], r
    b.expect_closed(timeout=2)
    assert d.call("state")["connected"] is False


def test_wait_msg_closes_a_link_that_stops_answering_pings(device, scripted_broker):
    b = scripted_broker
    d = open_session(device, b, keepalive=1)
    d.begin("wait_msg")
    b.expect(Pingreq(), timeout=2)  # never answered
    r = d.result(timeout=10)
    assert not r["ok"] and "keepalive" in r["error"], r
    b.expect_closed(timeout=2)
    assert d.call("state")["connected"] is False


def test_wait_msg_reconnects_a_dead_link_with_reconnect_on(device, scripted_broker):
    b = scripted_broker
    d = open_session(device, b, keepalive=1, reconnect=True, backoff_min=0.05, backoff_max=0.1)
    d.begin("wait_msg")
    b.expect(Pingreq(), timeout=2)  # never answered: the client gives up on this link
    b.expect_closed(timeout=3)
    b.accept(timeout=10)
    b.expect(Connect(d.client_id, True, 1))
    b.send(Connack(False, 0))
    r = d.result(timeout=10)
    assert r["ok"] and r["op"] == 0x20 and r["connected"], r  # the CONNACK of the new link
    b.send(Publish("in", b"after", 0))
    r = d.call("wait_msg")
    assert r["msgs"] == [["in", "after", 0, False]], r


def test_MQTT_4_8_0_2_a_callback_that_fails_closes_the_link_unacknowledged(device, scripted_broker):
    # the application's error reaches it, the message is not acknowledged and the link is
    # closed, so the broker delivers it again on the next connection
    b = scripted_broker
    d = subscribed(device, b, clean=False)
    d.call("fail_next")
    b.send(Publish("in/x", b"m", 1, packet_id=5))
    r = d.try_call("loop", ms=300)
    assert not r["ok"] and "RuntimeError" in r["error"], r
    b.expect_closed(timeout=2)
    reconnect(d, b, present=True)
    b.send(Publish("in/x", b"m", 1, dup=True, packet_id=5))
    assert d.call("recv", n=1)["msgs"] == [["in/x", "m", 1, False]]
    b.expect(Puback(5))


def test_wait_msg_without_keepalive_waits_for_a_message_as_long_as_it_takes(device, scripted_broker):
    b = scripted_broker
    d = open_session(device, b, io_timeout=1)
    d.begin("wait_msg")
    b.expect_nothing(2.5)  # longer than the client's timeout: waiting has no deadline
    b.send(Publish("in", b"late", 0))
    r = d.result(timeout=10)
    assert r["ok"] and r["op"] == 0x30 and r["msgs"] == [["in", "late", 0, False]], r


def test_wait_msg_closes_a_link_that_stops_half_way_through_a_packet(device, scripted_broker):
    b = scripted_broker
    d = open_session(device, b, io_timeout=1)
    d.begin("wait_msg")
    b.send(Publish("in", b"never finished", 0).encode()[:5])
    r = d.result(timeout=10)
    assert not r["ok"] and "half-way" in r["error"], r
    b.expect_closed(timeout=2)


def test_MQTT_3_8_4_5_a_suback_with_more_return_codes_than_filters_is_refused(device, scripted_broker):
    b = scripted_broker
    d = open_session(device, b)
    d.begin("sub", topic="a", qos=1)
    b.send(Suback(b.receive().packet_id, [1, 1]))
    r = d.result()
    assert not r["ok"] and "MQTT-3.8.4-5" in r["error"], r
    b.expect_closed(timeout=2)


def test_a_burst_of_33_qos1_publishes_in_one_read_is_taken_and_acknowledged(device, scripted_broker):
    # 231 bytes, more PUBLISHes than the acks the client can queue: it stops reading until
    # the acks are written (backpressure) and refuses nothing
    b = scripted_broker
    d = subscribed(device, b, topic="a")
    burst = b"".join(Publish("a", b"", 1, packet_id=i + 1).encode() for i in range(33))
    assert len(burst) == 231
    b.send(burst)
    assert d.call("recv", n=33)["msgs"] == [["a", "", 1, False]] * 33
    b.expect([Puback(i + 1) for i in range(33)])


def test_wait_msg_hands_over_a_burst_held_back_for_its_acks_without_waiting_for_more(device, scripted_broker):
    # the packets read while the acks queue was full are handled by the next wait_msg(),
    # which returns them at once instead of first waiting for more input (none comes)
    b = scripted_broker
    d = subscribed(device, b, topic="a")
    b.send(b"".join(Publish("a", b"", 1, packet_id=i + 1).encode() for i in range(33)))
    assert d.call("wait", n=33, timeout=10)["msgs"] == [["a", "", 1, False]] * 33
    b.expect([Puback(i + 1) for i in range(33)])


def test_MQTT_4_3_3_2_pubrels_for_unknown_ids_are_each_answered(device, scripted_broker):
    b = scripted_broker
    d = open_session(device, b)
    b.send([Pubrel(i + 1) for i in range(40)])
    d.begin("loop", ms=300)
    b.expect([Pubcomp(i + 1) for i in range(40)])
    assert d.result()["ok"]


def test_more_unreleased_inbound_qos2_messages_than_max_inflight_are_taken(device, scripted_broker):
    # MQTT 3.1.1 sets no limit on how many QoS 2 messages a broker has in flight
    b = scripted_broker
    d = subscribed(device, b, qos=2, max_inflight=2, queue_size=4)
    b.send([Publish("in/x", b"%d" % i, 2, packet_id=i + 1) for i in range(40)])
    msgs = d.call("recv", n=40)["msgs"]
    assert [m[1] for m in msgs] == [str(i) for i in range(40)]
    b.expect([Pubrec(i + 1) for i in range(40)])
    b.send([Pubrel(i + 1) for i in range(40)])
    d.begin("loop", ms=300)
    b.expect([Pubcomp(i + 1) for i in range(40)])
    assert d.result()["ok"]
