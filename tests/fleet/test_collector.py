"""The collector (`fleetwire collect`, fleetwire.host.fleet.collector): every record the
fleet publishes lands in the report's layout, whole files only, malformed ones in
quarantine with a reason, and nothing is lost when the collector is killed -9."""

import glob
import json
import os
import signal
import subprocess
import sys
import time

import paho.mqtt.client as mqtt
import pytest

from fleetwire.host.fleet.collector import Collector, check_record
from fleet_helpers import landed, until


def record(device="d1", seq=1, **kw):
    r = {
        "device_id": device,
        "fw_version": "1.0.0",
        "boot_id": 1,
        "ts": 1767571200000,
        "seq": seq,
        "uptime_s": seq,
        "heap_free": 50000,
        "heap_min": 40000,
        "rssi": -60,
        "vbat_mv": None,
        "reconnects": 0,
        "publish_fail": 0,
        "queue_drops": 0,
        "queue_depth": 0,
        "store_used": 0,
        "publish_latency_ms": 12,
        "reset_cause": None,
        "period_s": 60,
    }
    r.update(kw)
    return r


class Publisher:
    def __init__(self, broker):
        self.c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="pub-%d" % os.getpid())
        self.c.max_inflight_messages_set(100)
        self.c.connect(broker.host, broker.port)
        self.c.loop_start()

    def send(self, payload, device="d1"):
        return self.c.publish("fleet/%s/telemetry" % device, payload, qos=1)

    def close(self):
        self.c.disconnect()
        self.c.loop_stop()


def test_records_land_in_hourly_files_with_the_receive_time(fresh_mosquitto, tmp_path):
    b = fresh_mosquitto()
    land = str(tmp_path / "landing")
    with Collector(b.host, b.port, land, "c-a") as c:
        p = Publisher(b)
        for i in range(1, 51):
            p.send(json.dumps(record(seq=i)))
        assert until(lambda: c.landed == 50)
        assert glob.glob(os.path.join(land, "date=*", "hour=*", "*.ndjson")) == []  # still being written
        p.close()
    files = glob.glob(os.path.join(land, "date=*", "hour=*", "*.ndjson"))
    assert len(files) == 1 and os.path.basename(files[0]).startswith("c-a-")
    assert not glob.glob(os.path.join(land, "**", ".*"), recursive=True)  # no part file left
    recs = landed(land)
    assert sorted(r["seq"] for r in recs) == list(range(1, 51))
    now = time.time() * 1000
    assert all(now - 60000 < r["rx_ts"] <= now for r in recs)
    d, h = files[0].split(os.sep)[-3:-1]
    assert time.strftime("date=%Y-%m-%d", time.gmtime(recs[0]["rx_ts"] / 1000)) == d
    assert time.strftime("hour=%H", time.gmtime(recs[0]["rx_ts"] / 1000)) == h


@pytest.mark.parametrize(
    "payload,reason",
    [
        (b"{not json", "not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (json.dumps({"device_id": "d1", "seq": 3}).encode(), "missing ts, boot_id, fw_version, period_s"),
        (json.dumps(record(seq="seven")).encode(), "seq is str, not long"),
        (json.dumps(record(device="other")).encode(), "does not match the topic"),
        (b"\xff\xfe", "not JSON"),
    ],
)
def test_each_kind_of_bad_record_has_its_reason(payload, reason):
    rec, why = check_record("fleet/d1/telemetry", payload)
    assert rec is None and reason in why


def test_bad_records_go_to_quarantine_and_the_good_ones_still_land(fresh_mosquitto, tmp_path):
    b = fresh_mosquitto()
    land = str(tmp_path / "landing")
    with Collector(b.host, b.port, land, "c-q") as c:
        p = Publisher(b)
        p.send(json.dumps(record(seq=1)))
        p.send(b"{broken")
        p.send(b"\x00\xff binary")
        p.send(json.dumps(record(seq=2)))
        assert until(lambda: c.received == 4)
        p.close()
    assert sorted(r["seq"] for r in landed(land)) == [1, 2]
    (qfile,) = glob.glob(os.path.join(land, "_quarantine", "date=*", "c-q.ndjson"))
    q = [json.loads(line) for line in open(qfile)]
    assert [x["reason"][:8] for x in q] == ["not JSON", "not JSON"]
    assert q[0]["payload"] == "{broken" and "payload_b64" in q[1]
    assert c.quarantined == 2 and c.landed == 2


def test_nothing_is_lost_when_the_collector_is_killed_mid_stream(fresh_mosquitto, tmp_path):
    b = fresh_mosquitto(max_queued=100000)
    land = str(tmp_path / "landing")
    cmd = [
        sys.executable,
        "-m",
        "fleetwire.tools.cli",
        "collect",
        "--broker",
        "127.0.0.1:%d" % b.port,
        "--landing",
        land,
        "--id",
        "c-kill",
    ]

    def start():
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert "fleetwire collect:" in proc.stdout.readline(), proc.stderr.read()
        return proc

    proc = start()
    p = Publisher(b)
    n = 3000
    try:
        for i in range(1, n + 1):
            p.send(json.dumps(record(seq=i)))
            if i == 1000:
                time.sleep(0.2)
                proc.kill()  # -9: no chance to close files or flush anything
                proc.wait()
            if i == 2000:
                assert glob.glob(os.path.join(land, "**", ".*.part"), recursive=True)  # left open
                proc = start()  # picks up what the broker kept, finishes the old file
        assert until(lambda: len({r["seq"] for r in landed(land) + partial(land)}) >= n, 600)
    finally:
        p.close()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    assert "landed" in out, err
    recs = landed(land)
    missing = set(range(1, n + 1)) - {r["seq"] for r in recs}
    assert not missing, "lost %d records, e.g. %s" % (len(missing), sorted(missing)[:10])
    assert len(recs) >= n  # duplicates allowed (QoS 1): the report removes them
    assert not glob.glob(os.path.join(land, "**", ".*"), recursive=True)


def partial(land):
    out = []
    for path in glob.glob(os.path.join(land, "date=*", "hour=*", ".*.part")):
        with open(path) as f:
            text = f.read()
        # The collector is still appending: this is a prefix of the file, and
        # its last piece may be half a line (a write is not atomic to a reader).
        out += [json.loads(line) for line in text.split("\n")[:-1]]
    return out


def test_shared_subscription_splits_the_stream_between_collectors(fresh_mosquitto, tmp_path):
    b = fresh_mosquitto()
    land = str(tmp_path / "landing")
    with (
        Collector(b.host, b.port, land, "c-s1", share="grp") as c1,
        Collector(b.host, b.port, land, "c-s2", share="grp") as c2,
    ):
        p = Publisher(b)
        for i in range(1, 201):
            p.send(json.dumps(record(seq=i)))
        assert until(lambda: c1.landed + c2.landed >= 200)
        p.close()
    assert c1.landed > 0 and c2.landed > 0  # both did part of the work
    assert sorted(r["seq"] for r in landed(land)) == list(range(1, 201))


def test_two_collectors_sharing_a_simulated_fleet_land_every_record_once_after_deduplication(
    fresh_mosquitto, tmp_path
):
    # MQTT 3.1.1 clients on mosquitto 2's $share/<group>/...; one collector killed -9 mid-stream and
    # started again; the other's id begins with the first's, and their files never mix
    import asyncio
    import threading

    from fleetwire.host.fleet.sim import Simulator

    b = fresh_mosquitto(max_queued=100000)
    land = str(tmp_path / "landing")
    cmd = [sys.executable, "-m", "fleetwire.tools.cli", "collect", "--broker", "127.0.0.1:%d" % b.port]
    cmd += ["--landing", land, "--id", "c1-b", "--share", "fleet"]

    def start():
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert "$share/fleet/fleet/+/telemetry" in proc.stdout.readline(), proc.stderr.read()
        return proc

    with Collector(b.host, b.port, land, "c1", share="fleet"):
        proc = start()
        sim = Simulator(
            b.host, b.port, devices=30, period_s=60, speed=120, duration=8, seed=6, silent_share=0
        )
        box = {}
        t = threading.Thread(target=lambda: box.update(res=asyncio.run(sim.run())))
        t.start()
        try:
            assert until(lambda: sim.acked >= 200, 400)
            proc.kill()  # -9
            proc.wait()
            assert until(lambda: sim.acked >= 400, 400)
            proc = start()  # the same id: its session, its files
            t.join()
            res = box["res"]
            assert until(
                lambda: (
                    len({(r["device_id"], r["seq"]) for r in landed(land) + partial(land)})
                    >= res["records_acked"]
                ),
                400,
            )
        finally:
            t.join()
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=20)
    recs = landed(land)
    names = [os.path.basename(f) for f in glob.glob(os.path.join(land, "date=*", "hour=*", "*.ndjson"))]
    assert any(n.startswith("c1-1") for n in names) and any(n.startswith("c1-b-") for n in names)  # both
    distinct = {(r["device_id"], r["seq"]) for r in recs}
    # every acknowledged record, once deduplicated ("acked" counts crash records' PUBACKs too: a
    # wait for that many telemetry records could never end)
    assert res["records_acked"] > 0 and len(distinct) >= res["records_acked"]
    by_dev = {}
    for d, seq in distinct:
        by_dev.setdefault(d, set()).add(seq)
    assert len(by_dev) == 30 and all(s == set(range(1, max(s) + 1)) for s in by_dev.values())
    assert not glob.glob(os.path.join(land, "**", ".*"), recursive=True)  # every file finished


def test_a_collector_recovers_only_its_own_files_even_when_another_id_begins_with_its_own(tmp_path):
    land = tmp_path / "landing"
    d = land / "date=2026-11-29" / "hour=13"
    d.mkdir(parents=True)
    (d / ".c1-1795959080000.ndjson.part").write_text('{"a":1}\n{"torn')
    (d / ".c1-b-1795959080001.ndjson.part").write_text('{"b":1}\n')  # c1-b's, still being written
    assert Collector("127.0.0.1", 1, str(land), "c1").recover() == 1
    assert sorted(os.listdir(d)) == [".c1-b-1795959080001.ndjson.part", "c1-1795959080000.ndjson"]
    assert (d / "c1-1795959080000.ndjson").read_text() == '{"a":1}\n'


def test_a_collector_logs_in_and_a_refused_one_says_why_at_once(fresh_mosquitto, tmp_path):
    b = fresh_mosquitto(users={"collector": "s3cret"}, allow_anonymous=False)
    land = str(tmp_path / "landing")
    # the refusal ends the wait (a timeout would say "no SUBACK within 30 s")
    with pytest.raises(
        RuntimeError,
        match=r"^broker 127\.0\.0\.1:\d+: refused the connection: "
        r"(Not authorized|Bad user name or password)",
    ):
        Collector(b.host, b.port, land, "c-bad", user="collector", password="wrong").start(timeout=30)
    with Collector(b.host, b.port, land, "c-ok", user="collector", password="s3cret") as c:
        p = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="pub-auth")
        p.username_pw_set("collector", "s3cret")
        p.connect(b.host, b.port)
        p.loop_start()
        p.publish("fleet/d1/telemetry", json.dumps(record(seq=1)), qos=1).wait_for_publish(10)
        assert until(lambda: c.landed == 1)
        assert c.connected and c.error is None
        p.disconnect()
        p.loop_stop()


def test_the_collect_command_reports_a_refusal_and_exits_2(fresh_mosquitto, tmp_path):
    b = fresh_mosquitto(users={"collector": "s3cret"}, allow_anonymous=False)
    env = dict(os.environ, FLEETWIRE_MQTT_PASSWORD="wrong")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "fleetwire.tools.cli",
            "collect",
            "--broker",
            "127.0.0.1:%d" % b.port,
            "--landing",
            str(tmp_path / "l"),
            "--user",
            "collector",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert r.returncode == 2
    assert "refused the connection" in r.stderr, r.stderr


def test_a_collector_reports_a_lost_broker_and_comes_back(fresh_mosquitto, tmp_path):
    b = fresh_mosquitto(persistence=True)
    land = str(tmp_path / "landing")
    with Collector(b.host, b.port, land, "c-lost") as c:
        b.stop()
        assert until(lambda: not c.connected and c.error and "connection lost" in c.error)
        b.start()
        assert until(lambda: c.connected and c.error is None, tries=1200)


def test_on_a_broker_that_enforces_identity_the_collector_logs_in_with_its_certificate(
    identity_mosquitto, host_credentials, make_observer, tmp_path
):
    b = identity_mosquitto
    board = make_observer(b, identity=("collected-1", "device"))
    cert, key = host_credentials("collector", "collector")
    land = str(tmp_path / "landing")
    with Collector(b.host, b.port, land, "c-identity", tls_ca=b.ca_pem, tls_cert=cert, tls_key=key) as c:
        board.publish("fleet/collected-1/telemetry", json.dumps(record(device="collected-1")), qos=1)
        assert until(lambda: c.landed == 1)
    assert [r["device_id"] for r in landed(land)] == ["collected-1"]
    assert "u'collector'" in b.log_text()  # the broker knows it by its certificate's CN
    with pytest.raises(RuntimeError) as e:
        Collector(b.host, b.port, land, "c-no-identity", tls_ca=b.ca_pem).start(timeout=2)
    assert "broker 127.0.0.1:%d" % b.port in str(e.value)


def crash(device="d1", boot=4, crash_id=77, **kw):
    r = {
        "device_id": device,
        "boot_id": boot,
        "crash_id": crash_id,
        "kind": "exception",
        "type": "ZeroDivisionError",
        "message": "divide by zero",
        "traceback": "Traceback (most recent call last):\n...",
        "log": ["step 3"],
        "fw_version": "1.5.0",
    }
    r.update(kw)
    return json.dumps(r)


def board_record(boot=7, crash_id=3):
    # a record's bytes as a board sends them (the layout in device/crash.py)
    import struct

    from fleetwire.host.fleet.crashrec import sum16

    release, msg = b"1.5.0", b"ZeroDivisionError: divide by zero"
    tb = b'Traceback (most recent call last):\n  File "app.py", line 1, in step\n' + msg + b"\n"
    b = bytearray(256)
    r, m = 32 + len(release), 32 + len(release) + len(msg)
    t = m + len(tb)
    b[0:2] = b"FC"
    struct.pack_into("<HH", b, 2, crash_id, t)
    struct.pack_into("<IIII", b, 8, boot, 60, 30000, 0)
    b[25], b[26] = 2, 16  # a log ring of 2 lines of 16 bytes, at the end
    struct.pack_into("<HH", b, 28, r, m)
    b[32:t] = release + msg + tb
    b[224:229] = b"hello"
    struct.pack_into("<H", b, 6, sum16(b))
    return bytes(b)


def test_crash_records_land_once_each_whatever_the_copies(fresh_mosquitto, tmp_path):
    b = fresh_mosquitto()
    land = str(tmp_path / "landing")
    with Collector(b.host, b.port, land, "c-crash") as c:
        p = Publisher(b)
        for payload, device in [
            (crash(), "d1"),
            (crash(), "d1"),  # sent again: its acknowledgement was lost
            (crash(boot=5), "d1"),
            (crash(device="d2"), "d2"),
            (crash(device="d2"), "d1"),  # under another board's topic: quarantined
            ('{"device_id": "d1"}', "d1"),
            (board_record(), "d3"),  # a board's: the record's bytes, its device the topic's
            (board_record()[:100] + b"?" + board_record()[101:], "d3"),  # one byte wrong: its sum
        ]:
            p.c.publish("fleet/%s/crash" % device, payload, qos=1)
        p.send(json.dumps(record(seq=1)))
        assert until(lambda: c.received == 9)
        p.close()
    files = sorted(os.listdir(os.path.join(land, "_crashes")))
    assert files == ["d1.4.77.json", "d1.5.77.json", "d2.4.77.json", "d3.7.3.json"]
    assert (c.crashes, c.crash_repeats, c.quarantined, c.landed) == (4, 1, 3, 1)
    with open(os.path.join(land, "_crashes", "d3.7.3.json")) as f:
        r = json.load(f)
    assert (r["device_id"], r["kind"], r["type"], r["message"], r["fw_version"]) == (
        "d3",
        "exception",
        "ZeroDivisionError",
        "divide by zero",
        "1.5.0",
    )
    assert r["traceback"].endswith(", in step\nZeroDivisionError: divide by zero\n") and r["log"] == ["hello"]
    with open(os.path.join(land, "_crashes", "d1.4.77.json")) as f:
        r = json.load(f)
    assert r["type"] == "ZeroDivisionError" and r["rx_ts"] > 0
    assert landed(land)[0]["seq"] == 1  # telemetry lands as before, apart


def test_command_answers_and_reported_states_land_beside_the_telemetry(mosquitto, tmp_path, make_observer):
    # the session broker keeps other tests' boards' retained reported states: they land too
    # (a collector that was away gets the last one that way), so this test reads its own board's
    me = "lz-%d" % os.getpid()
    landing = tmp_path / "landing"

    def mine():
        files = list((landing / "_commands").glob("date=*/coll-cmd.ndjson"))
        lines = [json.loads(x) for f in files for x in f.read_text().splitlines()]
        return [
            (x["device_id"], x["kind"], x["body"].get("id") or x["body"]["version"])
            for x in lines
            if x["device_id"] == me
        ]

    with Collector(mosquitto.host, mosquitto.port, str(landing), "coll-cmd", commands=True) as c:
        pub = make_observer()
        answer = b'{"id": "c1", "status": "ok", "result": 5, "error": null}'
        pub.publish("fleet/%s/answer" % me, answer, qos=1)
        pub.publish("fleet/%s/reported" % me, b'{"version": 3, "state": {}, "error": null}', qos=1)
        pub.publish("fleet/%s/answer" % me, b"not json", qos=1)
        deadline = time.time() + 20
        while (c.quarantined < 1 or len(mine()) < 2) and time.time() < deadline:
            time.sleep(0.05)
    assert mine() == [(me, "answer", "c1"), (me, "reported", 3)]
    assert c.quarantined == 1  # not JSON: kept with its reason, never dropped
