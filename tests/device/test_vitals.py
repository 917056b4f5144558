"""The vitals agent (fleetwire.vitals) on the real client, MicroPython (80 KB heap)
and CPython, against mosquitto: the record the report job reads, counters that
survive reboots, deliberate resets told from crashes, offline records sent later
in order, and a record formatted without allocating."""

import json

from fleetwire.host.fleet import record as schema

FIELDS = [f for f in schema.FIELD_NAMES if f != "rx_ts"]


def boot(device, port, state, name, cause="power_on", **kw):
    d = device(name)
    opts = dict(id=name, host="127.0.0.1", port=port)
    opts.update(kw)
    d.call("init", **opts)
    d.call("connect", clean=False)
    r = d.call("vitals", device_id=name, fw="2.1.0", state=state, cause=cause, period=60)
    return d, r["boot_id"]


def records(observer, n, timeout=10):
    return [json.loads(m[1]) for m in observer.wait_for(n, timeout)]


def test_records_carry_every_field_of_the_report_schema(device, mosquitto, make_observer, interp, tmp_path):
    name = "vit-rec-" + interp[:2]
    o = make_observer()
    o.subscribe("fleet/%s/telemetry" % name, 1)
    d, boot_id = boot(device, mosquitto.port, str(tmp_path / "v.json"), name)
    for _ in range(3):
        d.call("vitals_pub", n=1)
        d.call("settle")  # acknowledged before the next is made
    recs = records(o, 3)
    assert [list(r) for r in recs] == [FIELDS] * 3  # every field, in the schema's order
    first = recs[0]
    assert (first["device_id"], first["fw_version"], first["boot_id"], first["period_s"]) == (
        name,
        "2.1.0",
        1,
        60,
    )
    assert [r["seq"] for r in recs] == [1, 2, 3]
    assert [r["reset_cause"] for r in recs] == ["power_on", None, None]  # only after a boot
    assert first["ts"] > 1.7e12 and first["heap_free"] >= 0 and first["heap_min"] <= first["heap_free"]
    assert all(
        isinstance(r[k], int)
        for r in recs
        for k in ("uptime_s", "reconnects", "publish_fail", "queue_drops", "queue_depth", "store_used")
    )
    assert recs[0]["publish_latency_ms"] is None  # nothing acknowledged yet
    assert recs[2]["publish_latency_ms"] >= 0  # the round trip of the record before


def test_boot_id_and_seq_survive_a_restart_and_a_deliberate_reset_is_told_from_a_crash(
    device, mosquitto, make_observer, interp, tmp_path
):
    name = "vit-boot-" + interp[:2]
    state = str(tmp_path / "v.json")
    o = make_observer()
    o.subscribe("fleet/%s/telemetry" % name, 1)
    d, b1 = boot(device, mosquitto.port, state, name)
    d.call("vitals_pub", n=2)
    d.call("settle")
    d.call("vitals_reset")  # marked in flash, then the board resets
    d.kill()
    d, b2 = boot(device, mosquitto.port, state, name, cause="panic")
    d.call("vitals_pub", n=1)
    d.call("settle")
    d.kill()  # no mark: the board says it crashed
    d, b3 = boot(device, mosquitto.port, state, name, cause="panic")
    d.call("vitals_pub", n=1)
    d.call("settle")
    recs = records(o, 4)
    assert (b1, b2, b3) == (1, 2, 3)
    assert [(r["boot_id"], r["seq"], r["reset_cause"]) for r in recs] == [
        (1, 1, "power_on"),
        (1, 2, None),
        (2, 3, "deliberate"),
        (3, 4, "panic"),
    ]


def test_records_made_offline_go_out_later_in_order(device, make_proxy, make_observer, interp, tmp_path):
    name = "vit-off-" + interp[:2]
    p = make_proxy()
    o = make_observer()
    o.subscribe("fleet/%s/telemetry" % name, 1)
    d, _ = boot(
        device,
        p.port,
        str(tmp_path / "v.json"),
        name,
        reconnect=True,
        backoff_min=0.05,
        backoff_max=0.2,
        queue_size=16,
    )
    d.call("vitals_pub", n=2)
    d.call("settle")
    p.refuse(seconds=3600)
    p.cut_now()
    d.call("loop", ms=200)
    d.call("vitals_pub", n=5)  # the link is down: they wait in the queue (RAM: 96 KB heap)
    assert d.call("state")["pending"] == 5
    p.refuse(seconds=0)
    assert d.call("settle", ms=10000)["pending"] == 0
    d.call("vitals_pub", n=1)  # made after the link came back
    d.call("settle")
    recs = records(o, 8)
    assert [r["seq"] for r in recs] == list(range(1, 9))
    assert recs[-2]["reconnects"] == 0 and recs[-1]["reconnects"] == 1
    assert max(r["queue_depth"] for r in recs) >= 4  # the backlog shows in the record


def test_formatting_a_record_allocates_nothing(device, mosquitto, interp, tmp_path):
    name = "vit-alloc-" + interp[:2]
    d, _ = boot(device, mosquitto.port, str(tmp_path / "v.json"), name)
    r = d.call("vitals_alloc")
    assert list(json.loads(r["record"])) == FIELDS
    if interp == "micropython":  # gc.mem_alloc is the measure (64-bit port: every number is a small int)
        assert r["alloc"] == 0, "%d bytes allocated by 100 records" % r["alloc"]
