"""The scripted broker, driven against a raw socket standing in for the client:
exact-byte expectations with readable failures, framing of split and coalesced
writes, closes, silence and every timeout."""

import socket

import pytest

from fleetwire.codec.packets import Connack, Connect, Disconnect, Pingreq, Puback, Publish, Subscribe
from fleetwire.host.testing.scripted_broker import ScriptedBroker

CONNECT = Connect("rig-client", True, 30)


@pytest.fixture
def pair(scripted_broker):
    """(broker, client socket) connected."""
    c = socket.create_connection(scripted_broker.address, timeout=5)
    scripted_broker.accept(timeout=5)
    yield scripted_broker, c
    c.close()


def read_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "closed after %r" % data
        data += chunk
    return data


def test_expect_passes_on_the_exact_bytes(pair):
    b, c = pair
    c.sendall(CONNECT.encode())
    assert b.expect(CONNECT) == CONNECT
    c.sendall(b"\xc0\x00")
    assert b.expect(b"\xc0\x00") == Pingreq()  # raw bytes work too
    assert b.transcript == [("client", CONNECT.encode()), ("client", b"\xc0\x00")]


def test_expect_fails_readably_on_other_bytes(pair):
    b, c = pair
    c.sendall(CONNECT.encode())
    with pytest.raises(AssertionError) as e:
        b.expect(Connect("rig-client", True, 60))
    msg = str(e.value)
    assert "keepalive=30" in msg and "keepalive=60" in msg  # both sides, decoded
    assert "first difference at byte 11" in msg  # the keepalive's low byte
    assert "got:" in msg and "expected:" in msg


def test_expect_fails_at_once_on_a_different_packet(pair):
    b, c = pair
    c.sendall(Pingreq().encode())
    with pytest.raises(AssertionError) as e:
        b.expect([Publish("t", b"x", 1, packet_id=1), Pingreq()], timeout=30)
    assert "Pingreq()" in str(e.value) and "Publish(topic='t'" in str(e.value)


def test_expect_several_packets(pair):
    b, c = pair
    acks = [Puback(1), Puback(2)]
    c.sendall(b"".join(p.encode() for p in acks))
    assert b.expect(acks) == acks


def test_expect_reports_a_timeout_with_what_arrived(pair):
    b, c = pair
    c.sendall(Pingreq().encode())
    with pytest.raises(AssertionError) as e:
        b.expect([Pingreq(), Disconnect()], timeout=0.1)
    assert "within 0.1 s" in str(e.value) and "Pingreq()" in str(e.value)


def test_receive_decodes(pair):
    b, c = pair
    sub = Subscribe(7, [("a/#", 1), ("b", 2)])
    c.sendall(sub.encode())
    assert b.receive() == sub


@pytest.mark.parametrize("cut", [1, 2, 3, 5, -1])
def test_receive_frames_a_packet_split_across_writes(pair, cut):
    b, c = pair
    p = Publish("rig/split", b"x" * 200, 1, packet_id=9)  # two-byte remaining length
    data = p.encode()
    c.sendall(data[:cut])
    with pytest.raises(AssertionError, match="byte\\(s\\) of a packet arrived"):
        b.receive(timeout=0.05)  # nothing whole yet, and the part is kept
    c.sendall(data[cut:])
    assert b.receive() == p


def test_receive_frames_coalesced_packets(pair):
    b, c = pair
    ps = [Puback(1), Pingreq(), Publish("t", b"", 0), Puback(2)]
    c.sendall(b"".join(p.encode() for p in ps))
    assert [b.receive() for _ in ps] == ps


def test_receive_byte_by_byte(pair):
    b, c = pair
    data = CONNECT.encode()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for i in range(len(data)):
        c.sendall(data[i : i + 1])
    assert b.receive() == CONNECT


def test_receive_times_out(pair):
    b, c = pair
    with pytest.raises(AssertionError, match="no \\(whole\\) packet from the client within 0.05 s"):
        b.receive(timeout=0.05)


def test_receive_reports_bytes_that_cannot_be_framed(pair):
    b, c = pair
    c.sendall(b"\x30\xff\xff\xff\xff\x01")  # remaining length over 4 bytes
    with pytest.raises(AssertionError, match="cannot be framed.*30 ff ff ff ff"):
        b.receive()


@pytest.mark.parametrize("first", [0x00, 0xF0, 0x36, 0x42])
def test_a_bad_first_byte_is_framed_by_its_length(pair, first):
    b, c = pair
    bad = bytes([first]) + b"\x05\x00\x01a\x00\x01"
    c.sendall(bad[:3])
    with pytest.raises(AssertionError, match="3 byte\\(s\\) of a packet arrived"):
        b.receive(timeout=0.05)
    c.sendall(bad[3:] + Pingreq().encode())
    with pytest.raises(AssertionError, match="malformed packet.*%02x 05" % first):
        b.receive()
    assert b.receive() == Pingreq()  # framing stayed in step


def test_a_malformed_packet_fails_receive_but_can_be_expected(pair):
    b, c = pair
    qos3 = b"\x36\x05\x00\x01a\x00\x01"
    c.sendall(qos3 + qos3)
    with pytest.raises(AssertionError, match="malformed packet"):
        b.receive()
    assert b.expect(qos3) == qos3


def test_expect_closed(pair):
    b, c = pair
    c.close()
    b.expect_closed(timeout=5)
    assert b.conn is None


def test_expect_closed_fails_while_the_client_stays(pair):
    b, c = pair
    with pytest.raises(AssertionError, match="did not close the connection within 0.05 s"):
        b.expect_closed(timeout=0.05)


def test_expect_closed_fails_if_the_client_sends_first(pair):
    b, c = pair
    c.sendall(Disconnect().encode())
    c.close()
    with pytest.raises(AssertionError, match="Disconnect\\(\\)"):
        b.expect_closed(timeout=5)


def test_receive_fails_when_the_client_closes(pair):
    b, c = pair
    c.close()
    with pytest.raises(AssertionError, match="client closed the connection"):
        b.receive(timeout=5)


def test_expect_nothing(pair):
    b, c = pair
    b.expect_nothing(0.05)
    c.sendall(Pingreq().encode())
    with pytest.raises(AssertionError, match="sent Pingreq\\(\\)"):
        b.expect_nothing(5)


def test_expect_nothing_fails_on_a_close(pair):
    b, c = pair
    c.close()
    with pytest.raises(AssertionError, match="expected silence, but the client closed"):
        b.expect_nothing(5)


def test_send_and_close_client(pair):
    b, c = pair
    b.send(Connack(True, 0))
    b.send([Puback(3), Puback(4)])
    b.send(Publish("down", b"abc", 0), split=1)
    want = (
        Connack(True, 0).encode()
        + Puback(3).encode()
        + Puback(4).encode()
        + Publish("down", b"abc", 0).encode()
    )
    assert read_exact(c, len(want)) == want
    b.close_client()
    assert c.recv(1) == b""
    with pytest.raises(AssertionError, match="no client connection"):
        b.send(Pingreq())


def test_close_client_with_reset(pair):
    b, c = pair
    b.close_client(reset=True)
    with pytest.raises(ConnectionResetError):
        c.recv(1)


def test_accept_times_out(scripted_broker):
    with pytest.raises(
        AssertionError, match="no client connected to port %d within 0.05 s" % scripted_broker.port
    ):
        scripted_broker.accept(timeout=0.05)


def test_a_reconnect_replaces_the_connection(pair):
    b, first = pair
    second = socket.create_connection(b.address, timeout=5)
    b.accept()
    assert first.recv(1) == b""  # the old connection was dropped
    second.sendall(CONNECT.encode())
    b.expect(CONNECT)
    second.close()


def test_failures_show_the_conversation(pair):
    b, c = pair
    c.sendall(CONNECT.encode())
    b.expect(CONNECT)
    b.send(Connack(False, 0))
    with pytest.raises(AssertionError) as e:
        b.receive(timeout=0.05)
    story = str(e.value).split("conversation so far:")[1]
    assert "client" in story and "Connect(client_id='rig-client'" in story
    assert "broker" in story and "Connack(session_present=False, return_code=0)" in story


def test_binds_loopback_only():
    with ScriptedBroker() as b:
        assert b.listener.getsockname()[0] == "127.0.0.1"
