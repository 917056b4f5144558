"""The fault-injecting proxy (fleetwire.host.testing.proxy): what it forwards, logs and
breaks, byte for byte. A raw TCP sink stands in for the broker where exact bytes
matter; mosquitto and paho where whole MQTT sessions do."""

import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from fleetwire.codec import packets as P
from fleetwire.host.testing.proxy import Proxy
from fleetwire.host.testing.proxyscript import parse_script


class Sink:
    """A one-connection TCP server that keeps what it receives and can answer."""

    def __init__(self):
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(8)
        self.got = bytearray()
        self.ended = threading.Event()
        self.error = None
        self.conn = None
        threading.Thread(target=self._run, daemon=True).start()

    @property
    def address(self):
        return self.srv.getsockname()

    def _run(self):
        self.conn, _ = self.srv.accept()
        try:
            while True:
                b = self.conn.recv(4096)
                if not b:
                    break
                self.got += b
        except OSError as e:
            self.error = e
        self.ended.set()


@pytest.fixture
def sink():
    s = Sink()
    yield s
    s.srv.close()


def until(cond, tries=500):
    """Poll cond (up to `tries` times, 10 ms apart) -> whether it came true."""
    for _ in range(tries):
        if cond():
            return True
        time.sleep(0.01)
    return cond()


def connect(proxy):
    n = proxy.accepted + 1
    c = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
    assert proxy.wait_connections(n)
    return c


CONNECT = P.encode(P.Connect("dev", True, 30))
PUBLISH = P.encode(P.Publish("a/b", b"payload", 1, packet_id=7))


def test_it_forwards_both_ways_and_logs_each_packet_by_name(sink):
    with Proxy(sink.address) as p:
        c = connect(p)
        c.sendall(CONNECT + PUBLISH)
        assert until(lambda: len(sink.got) >= len(CONNECT + PUBLISH))
        assert bytes(sink.got) == CONNECT + PUBLISH
        answer = P.encode(P.Connack(False, 0)) + P.encode(P.Puback(7))
        sink.conn.sendall(answer)
        got = b""
        while len(got) < len(answer):
            got += c.recv(100)
        assert got == answer
        assert until(lambda: len(p.packets()) == 4)  # logged just after it is passed on
        assert p.packets() == [("up", "CONNECT"), ("up", "PUBLISH"), ("down", "CONNACK"), ("down", "PUBACK")]
        sizes = [e.size for e in p.log if e.what == "PUBLISH"]
        assert sizes == [len(PUBLISH)]


@pytest.mark.parametrize("n", [0, 1, 5, len(CONNECT), len(CONNECT) + 3])
def test_a_cut_at_byte_n_passes_exactly_n_bytes_then_resets_both_ends(sink, n):
    with Proxy(sink.address) as p:
        c = connect(p)
        p.cut("up", at=n)
        c.sendall(CONNECT + PUBLISH)
        assert sink.ended.wait(5)
        assert bytes(sink.got) == (CONNECT + PUBLISH)[:n]
        with pytest.raises(OSError):  # the client's end is reset, not closed
            for _ in range(3):
                if not c.recv(10):
                    raise AssertionError("closed cleanly; a cut must reset")
        assert p.cuts == 1


def test_a_graceful_cut_closes_with_fin(sink):
    with Proxy(sink.address) as p:
        c = connect(p)
        p.cut("up", at=3, graceful=True)
        c.sendall(CONNECT)
        assert sink.ended.wait(5)
        assert c.recv(10) == b""
        assert sink.error is None


def test_a_cut_after_the_nth_packet_of_a_type(sink):
    with Proxy(sink.address) as p:
        c = connect(p)
        p.cut("up", after="PUBLISH", nth=2)
        c.sendall(CONNECT + PUBLISH + PUBLISH + PUBLISH)
        assert sink.ended.wait(5)
        assert bytes(sink.got) == CONNECT + PUBLISH + PUBLISH


def test_a_cut_armed_for_the_next_connection_spares_the_live_one(sink):
    with Proxy(sink.address) as p:
        c = connect(p)
        p.cut("up", at=0, on_next=True)
        c.sendall(CONNECT)
        assert until(lambda: len(sink.got) >= len(CONNECT))
        assert bytes(sink.got) == CONNECT
        assert p.cuts == 0


def test_corrupt_flips_one_byte(sink):
    with Proxy(sink.address) as p:
        c = connect(p)
        p.corrupt("up", at=2, xor=0x0F)
        c.sendall(CONNECT)
        assert until(lambda: len(sink.got) >= len(CONNECT))
        want = bytearray(CONNECT)
        want[2] ^= 0x0F
        assert bytes(sink.got) == bytes(want)


def test_a_blackhole_keeps_the_link_open_and_passes_nothing(sink):
    with Proxy(sink.address) as p:
        c = connect(p)
        p.blackhole()
        c.sendall(CONNECT)
        time.sleep(0.2)
        assert sink.got == b"" and not sink.ended.is_set()
        p.blackhole(False)
        c.sendall(PUBLISH)
        assert until(lambda: len(sink.got) >= len(PUBLISH))
        assert bytes(sink.got) == PUBLISH  # what came during the blackhole is gone


def test_refused_connections_are_reset_until_the_time_is_up(sink):
    with Proxy(sink.address) as p:
        p.refuse(count=1)
        try:
            c = socket.create_connection(("127.0.0.1", p.port), timeout=2)
            c.sendall(CONNECT)
            assert c.recv(10) == b""
        except OSError:
            pass  # reset: refused
        assert until(lambda: p.refused == 1)
        assert sink.conn is None  # it never reached the broker
        connect(p).sendall(CONNECT)
        assert until(lambda: len(sink.got) >= len(CONNECT))
        assert bytes(sink.got) == CONNECT


def test_delay_and_throttle_slow_the_stream(sink):
    with Proxy(sink.address) as p:
        c = connect(p)
        p.delay(200, "up")
        t0 = time.monotonic()
        c.sendall(CONNECT)
        while len(sink.got) < len(CONNECT):
            time.sleep(0.01)
        assert time.monotonic() - t0 >= 0.2
        p.delay(0)
        p.throttle(1000, "up")
        t0 = time.monotonic()
        c.sendall(b"\x30" + bytes([127]) + b"\x00\x03a/b" + b"x" * 122)  # 129 bytes
        while len(sink.got) < len(CONNECT) + 129:
            time.sleep(0.01)
        assert time.monotonic() - t0 >= 0.12


def test_it_refuses_to_proxy_beyond_loopback():
    with pytest.raises(ValueError, match="loopback"):
        Proxy(("192.0.2.1", 1883))


def test_script_errors_name_the_line():
    steps = parse_script("# chaos\nwait 1\ncut down after PUBREC 2\nblackhole on\nrepeat\n")
    assert [s[1] for s in steps] == ["wait", "cut", "blackhole", "repeat"]
    assert steps[1][2] == {"graceful": False, "direction": "down", "after": "PUBREC", "nth": 2}
    with pytest.raises(ValueError, match="line 2.*unknown MQTT packet type 'PUBWHAT'"):
        parse_script("wait 1\ncut up after PUBWHAT\n")
    with pytest.raises(ValueError, match="line 1.*unknown step 'explode'"):
        parse_script("explode now")


def test_the_command_line_proxy_runs_a_script_against_mosquitto(mosquitto, make_observer, tmp_path):
    from fleetwire.host.brokers.mosquitto import free_port

    script = tmp_path / "chaos.txt"
    script.write_text("cut up after PUBLISH 2\n")
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fleetwire.tools.cli",
            "proxy",
            "--listen",
            "127.0.0.1:%d" % port,
            "--upstream",
            "127.0.0.1:%d" % mosquitto.port,
            "--script",
            str(script),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    try:
        assert "fleetwire proxy: 127.0.0.1:%d" % port in proc.stdout.readline()
        watcher = make_observer()
        watcher.subscribe("proxycli/#", 1)
        from fleetwire.host.testing.observer import Observer

        o = Observer("127.0.0.1", port, client_id="through-proxy")
        try:
            for i in range(3):
                for _attempt in range(50):  # paho reconnects by itself after the cut
                    try:
                        o.publish("proxycli/t", b"m%d" % i, qos=1, timeout=15)
                        break
                    except AssertionError:
                        time.sleep(0.1)
        finally:
            o.close()
        watcher.wait_until(lambda m: {x[1] for x in m} >= {b"m0", b"m1", b"m2"}, 10)
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=10)
    assert "-> PUBLISH" in out and "cut up after" in out
    assert "2 connections, 1 cut" in out, out[-500:]
