"""The mosquitto harness and the paho observer: round trips at every QoS, retained
messages, persistence across restart and crash, limits, passwords, cleanup."""

import os
import socket

import pytest

from fleetwire.codec.packets import Connack, Connect, decode_all

from fleetwire.host.brokers.mosquitto import Mosquitto, accepts


def recv_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "connection closed after %r" % data
        data += chunk
    return data


def test_round_trip_at_each_qos(mosquitto, make_observer):
    sub, pub = make_observer(mosquitto), make_observer(mosquitto)
    assert sub.subscribe("rig/rt/#", 2) == 2
    for qos in (0, 1, 2):
        pub.publish("rig/rt/%d" % qos, b"q%d" % qos, qos=qos)
    msgs = sub.wait_for(3)
    assert sorted(msgs) == [
        ("rig/rt/0", b"q0", 0, False),
        ("rig/rt/1", b"q1", 1, False),
        ("rig/rt/2", b"q2", 2, False),
    ]


def test_granted_qos_caps_delivery(observer, make_observer):
    assert observer.subscribe("rig/cap", 1) == 1
    make_observer().publish("rig/cap", b"x", qos=2)
    assert observer.wait_for(1) == [("rig/cap", b"x", 1, False)]


def test_retained_message_reaches_a_later_subscriber(mosquitto, make_observer):
    pub = make_observer(mosquitto)
    pub.publish("rig/retained", "state: on", qos=1, retain=True)
    later = make_observer(mosquitto)
    later.subscribe("rig/retained", 1)
    assert later.wait_for(1) == [("rig/retained", b"state: on", 1, True)]
    pub.publish("rig/retained", b"", qos=1, retain=True)  # clears it
    last = make_observer(mosquitto)
    last.subscribe("rig/retained", 1)
    last.subscribe("rig/retained/end", 1)
    pub.publish("rig/retained/end", b"marker", qos=1)  # arrives after any retained one
    assert [m[0] for m in last.wait_for(1)] == ["rig/retained/end"]


def test_wait_for_fails_with_what_did_arrive(observer):
    observer.subscribe("rig/few", 1)
    observer.publish("rig/few", b"only-one", qos=1)
    with pytest.raises(AssertionError) as e:
        observer.wait_for(2, timeout=0.3)
    assert "expected 2" in str(e.value) and "only-one" in str(e.value)
    assert observer.wait_until(lambda m: m and m[0][1] == b"only-one", timeout=1)
    observer.clear()
    assert observer.messages == []


def test_observers_get_unique_client_ids(mosquitto, make_observer):
    a, b = make_observer(mosquitto), make_observer(mosquitto)
    assert a.client_id != b.client_id
    a.subscribe("rig/both", 0)
    b.publish("rig/both", b"1", qos=1)
    a.wait_for(1)
    assert a.connected and b.connected  # neither took over the other's session


def test_unsubscribe_stops_delivery(observer, make_observer):
    observer.subscribe("rig/unsub/#", 1)
    observer.subscribe("rig/unsub/marker", 1)
    observer.unsubscribe("rig/unsub/#")
    pub = make_observer()
    pub.publish("rig/unsub/x", b"dropped", qos=1)
    pub.publish("rig/unsub/marker", b"kept", qos=1)  # ordered after the dropped one
    assert observer.wait_for(1) == [("rig/unsub/marker", b"kept", 1, False)]


def _offline_subscriber(broker, make_observer, cid, topic="rig/p/#"):
    sub = make_observer(broker, client_id=cid, clean_session=False)
    assert sub.session_present is False
    sub.subscribe(topic, 1)
    sub.close()


def test_restart_with_persistence_keeps_the_queued_qos1_message(fresh_mosquitto, make_observer):
    b = fresh_mosquitto(persistence=True)
    _offline_subscriber(b, make_observer, "rig-persist")
    make_observer(b).publish("rig/p/q", b"while away", qos=1)
    port = b.port
    b.restart()
    assert b.port == port
    back = make_observer(b, client_id="rig-persist", clean_session=False)
    assert back.session_present is True
    assert back.wait_for(1) == [("rig/p/q", b"while away", 1, False)]


def test_restart_without_persistence_forgets_sessions(fresh_mosquitto, make_observer):
    b = fresh_mosquitto()
    _offline_subscriber(b, make_observer, "rig-forget")
    b.restart()
    assert make_observer(b, client_id="rig-forget", clean_session=False).session_present is False


def test_kill_keeps_only_what_was_saved(fresh_mosquitto, make_observer):
    b = fresh_mosquitto(persistence=True)
    _offline_subscriber(b, make_observer, "rig-crash")
    pub = make_observer(b)
    pub.publish("rig/p/c", b"saved", qos=1)
    b.snapshot()
    pub.publish("rig/p/c", b"lost in the crash", qos=1)
    b.kill()
    assert not b.running and not accepts(b.host, b.port)
    b.start()
    back = make_observer(b, client_id="rig-crash", clean_session=False)
    assert back.session_present is True
    back.subscribe("rig/p/end", 1)
    pub.wait_connected()
    pub.publish("rig/p/end", b"end", qos=1)  # after any queued message
    assert back.wait_for(2) == [("rig/p/c", b"saved", 1, False), ("rig/p/end", b"end", 1, False)]


def test_observer_reconnects_and_resubscribes_after_a_restart(fresh_mosquitto, make_observer):
    b = fresh_mosquitto()
    o = make_observer(b)
    o.subscribe("rig/again", 1)
    b.restart()
    o.wait_connected(timeout=10)
    make_observer(b).publish("rig/again", b"x", qos=1)
    assert o.wait_for(1) == [("rig/again", b"x", 1, False)]


def test_max_queued_limits_an_offline_session(fresh_mosquitto, make_observer):
    b = fresh_mosquitto(max_queued=2, max_inflight=1)
    _offline_subscriber(b, make_observer, "rig-limit")
    pub = make_observer(b)
    for i in range(5):
        pub.publish("rig/p/l", b"%d" % i, qos=1)
    back = make_observer(b, client_id="rig-limit", clean_session=False)
    back.subscribe("rig/p/end", 1)
    pub.publish("rig/p/end", b"end", qos=1)
    msgs = back.wait_until(lambda m: any(t == "rig/p/end" for t, *_ in m))
    assert [p for t, p, q, r in msgs if t == "rig/p/l"] == [b"0", b"1"]
    assert "max_queued_messages 2" in open(b.config_path).read()


def test_password_file(fresh_mosquitto, make_observer):
    b = fresh_mosquitto(users={"alice": "s3cret"}, allow_anonymous=False)
    make_observer(b, username="alice", password="s3cret").publish("rig/auth", b"in", qos=1)
    for kw in ({"username": "alice", "password": "wrong"}, {}):
        with pytest.raises(AssertionError, match="refused"):
            make_observer(b, timeout=5, **kw)


def test_freeze_and_thaw(fresh_mosquitto):
    b = fresh_mosquitto()
    b.freeze()
    with socket.create_connection(b.address, timeout=2) as s:  # the kernel still accepts
        s.sendall(Connect("rig-frozen", True, 30).encode())
        s.settimeout(0.2)
        with pytest.raises(socket.timeout):
            s.recv(4)
        b.thaw()
        s.settimeout(5)
        assert decode_all(recv_exact(s, 4)) == [Connack(False, 0)]


def test_stop_start_kill_log_and_cleanup():
    with Mosquitto() as b:
        assert b.running and accepts(b.host, b.port) and b.host == "127.0.0.1"
        b.stop()
        assert not b.running and not accepts(b.host, b.port)
        b.start()
        assert accepts(b.host, b.port)
        assert b.log_text().count("running") == 2
        pid, d = b.pid, b.dir
    assert not os.path.exists(d)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_listens_on_loopback_only(mosquitto):
    with open(mosquitto.config_path) as f:
        listeners = [l for l in f if l.startswith("listener")]
    assert listeners and all(l.split()[2] == "127.0.0.1" for l in listeners)
