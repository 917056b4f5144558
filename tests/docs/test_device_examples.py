"""The documentation's device examples (docs/snippets/device/) run as they are written, on
the MicroPython unix port with the board tree as a board loads it (.mpy) and an ESP32's
heap, against a real mosquitto: each one with its broker pointed at the test's, nothing
else changed. An example that stops working fails here."""

import os

import pytest

from fleetwire.host.rig import micropython

from examples import STANDINS, pointed
from support import DEVICE_HEAP


def run(board_lib, script, cwd, heap=DEVICE_HEAP, timeout=180):  # deadlines, not speeds
    # the esp32 stand-in after the board tree: the unix port has no esp32 module
    r = micropython.run(
        [script], lib=board_lib + os.pathsep + STANDINS, heap=heap, cwd=str(cwd), timeout=timeout
    )
    assert r.returncode == 0, "the example failed:\n%s%s" % (r.stdout, r.stderr)
    return r.stdout


@pytest.fixture
def own_broker(fresh_mosquitto):
    """A broker of the example's own: examples share client ids and persistent sessions."""
    return fresh_mosquitto()


def example(board_lib, name, host, port, tmp_path, **kw):
    return run(board_lib, pointed(name, host, port, tmp_path / os.path.basename(name)), tmp_path, **kw)


def test_the_first_client_gets_back_what_it_published_at_qos_1_and_2(board_lib, own_broker, tmp_path):
    out = example(board_lib, "device/first_client.py", own_broker.host, own_broker.port, tmp_path)
    assert out.strip() == "[(b'fleet/sensor-17/cmd/led', b'on'), (b'fleet/sensor-17/cmd/led', b'off')]"


def test_the_pipelined_publisher_has_every_message_acknowledged(
    board_lib, own_broker, tmp_path, make_observer
):
    observer = make_observer(own_broker)
    observer.subscribe("fleet/sensor-17/log", 1)
    out = example(board_lib, "device/pipelined.py", own_broker.host, own_broker.port, tmp_path)
    assert out.strip() == "100 delivered"
    got = observer.wait_for(100, timeout=60)
    assert [m[1] for m in got] == [b"reading %d" % i for i in range(100)]


def test_the_asyncio_client_makes_a_qos_2_round_trip(board_lib, own_broker, tmp_path):
    assert (
        example(board_lib, "device/asyncio_client.py", own_broker.host, own_broker.port, tmp_path).strip()
        == "round trip done"
    )


def test_a_message_longer_than_max_packet_is_written_to_a_file_piece_by_piece(
    board_lib, own_broker, tmp_path
):
    out = example(board_lib, "device/long_messages.py", own_broker.host, own_broker.port, tmp_path)
    assert out.strip() == "3000 bytes in 12 pieces"  # 256 bytes at most each
    assert (tmp_path / "image.bin").read_bytes() == b"x" * 3000


def test_the_reconnecting_device_loses_nothing_when_its_link_is_cut(
    board_lib, own_broker, tmp_path, make_proxy, make_observer
):
    observer = make_observer(own_broker)
    observer.subscribe("fleet/sensor-17/temp", 1)
    proxy = make_proxy(own_broker)
    proxy.cut("down", after="PUBACK", nth=5)  # the link drops after the 5th acknowledgement
    out = example(board_lib, "device/reconnect.py", proxy.address[0], proxy.port, tmp_path)
    assert "lost:" in out and "retry 1 in" in out, out
    assert out.strip().endswith("sent, connected: True"), out
    got = observer.wait_until(lambda m: len({x[1] for x in m}) >= 20, 20)
    assert sorted({m[1] for m in got}) == [b"%d" % (200 + i) for i in range(20)]  # QoS 1: at least once


def test_the_tls_client_checks_the_brokers_certificate(board_lib, mosquitto_tls, tmp_path, make_observer):
    observer = make_observer(mosquitto_tls)
    observer.subscribe("fleet/sensor-17/status", 1)
    with open(mosquitto_tls.ca_der, "rb") as f:
        (tmp_path / "ca.der").write_bytes(f.read())
    # "localhost": the name on the test broker's certificate, which the client checks
    out = example(board_lib, "device/tls.py", "localhost", mosquitto_tls.tls_port, tmp_path, heap="128K")
    assert out.strip() == "published over TLS"
    assert observer.wait_for(1, timeout=60)[0][1] == b"online over TLS"


def test_the_ring_store_example_sends_everything_it_stored(board_lib, own_broker, tmp_path, make_observer):
    observer = make_observer(own_broker)
    observer.subscribe("fleet/sensor-17/log", 1)
    out = example(board_lib, "device/store.py", own_broker.host, own_broker.port, tmp_path)
    assert out.strip() == "stored and sent; backlog 0"
    assert [m[1] for m in observer.wait_for(10, timeout=60)] == [b"entry %d" % i for i in range(10)]
    assert os.path.getsize(tmp_path / "mqtt.flash") == 256 * 1024  # the partition it wrote


def test_the_vitals_agent_publishes_a_record_the_report_reads(board_lib, own_broker, tmp_path, make_observer):
    import json

    from fleetwire.host.fleet.record import REQUIRED

    observer = make_observer(own_broker)
    observer.subscribe("fleet/sensor-17/telemetry", 1)
    out = example(board_lib, "device/vitals.py", own_broker.host, own_broker.port, tmp_path)
    assert out.split() == ["boot", "1", "record", "acknowledged"]
    record = json.loads(observer.wait_for(1, timeout=60)[0][1])
    assert record["device_id"] == "sensor-17" and record["fw_version"] == "1.5.0" and record["seq"] == 1
    assert set(REQUIRED) - {"rx_ts"} <= set(record)


def test_the_updater_is_enabled_over_a_connected_client_and_waits_for_an_offer(
    board_lib, own_broker, tmp_path
):
    # the client with a file store, the vitals agent and the updater: on the 64-bit port it runs in
    # 96 KB at least (94 before signed releases: bench/README.md, "Signed releases")
    out = example(board_lib, "device/ota.py", own_broker.host, own_broker.port, tmp_path, heap="100K")
    assert out.strip() == "updater idle: True"


def test_a_crash_is_recorded_and_sent_once_after_the_reset(board_lib, own_broker, tmp_path, make_observer):
    observer = make_observer(own_broker)
    observer.subscribe("fleet/sensor-17/crash", 1)
    script = pointed("device/crash.py", own_broker.host, own_broker.port, tmp_path / "crash.py")
    for _ in range(2):  # it crashes each time; the second run sends the first crash
        r = micropython.run([script], lib=board_lib, heap=DEVICE_HEAP, cwd=str(tmp_path), timeout=60)
        assert (r.returncode, r.stderr) == (1, "reset\n")  # SystemExit: the unix port has no machine.reset()
    from fleetwire.host.fleet.crashrec import parse

    (m,) = observer.wait_for(1, timeout=10)
    r = parse(m[1], "sensor-17")  # the record's bytes, as the collector decodes them
    assert (r["device_id"], r["kind"], r["type"], r["fw_version"]) == (
        "sensor-17",
        "exception",
        "ZeroDivisionError",
        "1.0.0",
    )
    assert ", in average\n" in r["traceback"] and r["log"] == ["averaging 0 readings"]
    assert os.listdir(str(tmp_path / "crash")) == []  # sent: nothing waits
