"""Every metric of `fleetwire report` on a landing zone small enough to work out by hand.

T is 2026-01-05 00:00 UTC; all devices report every 60 s.
  dev-a (1.0.0) minutes 55..64: seq 100..109, seq 102 and 107 lost, seq 103 delivered twice
        (the second copy lands in the next hour's file), seq 108 three times; it panics at minute 61
        (boot 1 -> 2); heap falls 100 bytes a minute in each boot (6000 B/h), vbat 1 mV a minute.
  dev-b (1.1.0) minutes 0..4 and 60..64: seq 200..209 (offline in between, nothing lost), a
        watchdog reset at minute 62; mains powered (no vbat_mv); constant heap per boot.
  dev-c (1.0.0) minutes 0..4: seq 300..304, then silent.
"""

import pytest

from fleetwire.host.analytics import generator

from conftest import table
from analytics_reference import to_ms

T = generator.parse_time("2026-01-05T00:00:00Z")
MIN = 60_000


def rec(dev, fw, k, seq, boot, up, heap, rssi, lat, vbat, rec_, cause=None, offset=1000, rx_delay=500):
    ts = T + k * MIN + offset
    return {
        "device_id": dev,
        "fw_version": fw,
        "boot_id": boot,
        "ts": ts,
        "seq": seq,
        "uptime_s": up,
        "heap_free": heap,
        "heap_min": heap - 100,
        "rssi": rssi,
        "vbat_mv": vbat,
        "reconnects": rec_,
        "publish_fail": 0,
        "queue_drops": 0,
        "queue_depth": 0,
        "store_used": 0,
        "publish_latency_ms": lat,
        "reset_cause": cause,
        "period_s": 60,
        "rx_ts": ts + rx_delay,
    }


def device_a():
    a = lambda k, *r, **kw: rec("dev-a", "1.0.0", 55 + k, *r, **kw)  # noqa: E731
    return [
        a(0, 100, 1, 10, 50000, -60, 10, 4000, 5, "power_on"),
        a(1, 101, 1, 70, 49900, -62, 20, 3999, 5),
        a(3, 103, 1, 190, 49700, -64, 40, 3997, 6),
        a(4, 104, 1, 250, 49600, -66, 50, 3996, 6),
        a(5, 105, 1, 310, 49500, -70, 30, 3995, 6),
        a(6, 106, 2, 5, 52000, -70, 60, 3994, 7, "panic"),
        a(8, 108, 2, 125, 51800, -72, 70, 3992, 8),
        a(9, 109, 2, 185, 51700, -74, 80, 3991, 8),
    ]


def device_b():
    b = lambda k, *r, **kw: rec("dev-b", "1.1.0", k, *r, offset=2000, **kw)  # noqa: E731
    return [b(k, 200 + k, 7, 100 + 60 * k, 40000, -80, 100, None, 1) for k in range(5)] + [
        b(60, 205, 7, 3700, 40000, -80, 100, None, 2),
        b(61, 206, 7, 3760, 40000, -80, 100, None, 2),
        b(62, 207, 8, 5, 41000, -80, 100, None, 2, "watchdog"),
        b(63, 208, 8, 65, 41000, -80, 100, None, 2),
        b(64, 209, 8, 125, 41000, -80, 100, None, 2),
    ]


def device_c():
    return [
        rec("dev-c", "1.0.0", k, 300 + k, 3, 1000 + 60 * k, 30000, -50, 5, 3700, 0, offset=3000)
        for k in range(5)
    ]


def write_known(root):
    a, b, c = device_a(), device_b(), device_c()
    hour0 = [r for r in a + b + c if r["rx_ts"] < T + 60 * MIN]
    hour1 = [r for r in a + b + c if r["rx_ts"] >= T + 60 * MIN]
    dup103 = dict(a[2], rx_ts=T + 61 * MIN)  # the copy arrives an hour-file later
    dup108 = [dict(a[6], rx_ts=a[6]["rx_ts"] + 1000 * i) for i in (1, 2)]
    generator.write_records(hour0, str(root / "date=2026-01-05" / "hour=00" / "part-00000.ndjson"))
    generator.write_records(
        hour1 + [dup103] + dup108, str(root / "date=2026-01-05" / "hour=01" / "part-00000.ndjson")
    )
    return root


@pytest.fixture(scope="module")
def known(spark, tmp_path_factory):
    from fleetwire.host.analytics import job

    root = write_known(tmp_path_factory.mktemp("known-landing"))
    out = tmp_path_factory.mktemp("known-out")
    res = job.run(spark, job.Config(input=str(root), out=str(out), report=False, log=lambda m: None))
    return res, out


def rows(out, name, key):
    df = table(out, name)
    return {
        k: r
        for k, r in zip(
            df[key] if isinstance(key, str) else zip(*(df[x] for x in key)), df.to_dict("records")
        )
    }


def test_quality_counts_every_delivery_and_the_duplicates(known):
    res, _ = known
    q = res.quality
    assert q["records_read"] == 8 + 10 + 5 + 3
    assert q["valid_records"] == 26 and q["skipped_records"] == 0
    assert q["duplicates"] == 3 and q["clean_records"] == 23


def test_clean_keeps_one_record_per_seq_with_the_earliest_arrival(known):
    _, out = known
    clean = table(out, "clean")
    assert len(clean) == 23
    assert not clean.duplicated(["device_id", "seq"]).any()
    a = clean[clean.device_id == "dev-a"].set_index("seq")
    assert sorted(a.index) == [100, 101, 103, 104, 105, 106, 108, 109]
    assert a.loc[103, "copies"] == 2 and a.loc[108, "copies"] == 3 and a.loc[100, "copies"] == 1
    assert a.loc[103, "rx_ts"] == device_a()[2]["rx_ts"]  # not the copy an hour later
    assert set(clean["date"].astype(str)) == {"2026-01-05"}
    assert (out / "clean" / "date=2026-01-05").is_dir()  # partitioned by date


def test_device_window_for_a_window_with_a_gap_and_a_duplicate(known):
    w = rows(known[1], "device_window", ("device_id", "window_start"))
    import pandas as pd

    first = w[("dev-a", pd.Timestamp("2026-01-05 00:55:00"))]
    assert first["fw_version"] == "1.0.0"
    assert (first["records"], first["distinct_seq"], first["dup_records"]) == (5, 4, 1)
    assert first["coverage"] == pytest.approx(4 / 5)
    assert first["loss_rate"] == pytest.approx(1 - 4 / 5)
    assert (first["rssi_min"], first["rssi_max"]) == (-66, -60)
    assert first["rssi_avg"] == pytest.approx(-63.0)
    assert (first["latency_p50"], first["latency_p95"]) == (20, 50)  # ranks ceil(.5*4)=2, ceil(.95*4)=4
    assert first["heap_delta"] == 49600 - 50000
    assert first["reconnects"] == 6 - 5
    assert first["unexpected_resets"] == 0  # power_on is expected


def test_device_window_for_a_window_with_a_panic(known):
    import pandas as pd

    w = rows(known[1], "device_window", ("device_id", "window_start"))
    second = w[("dev-a", pd.Timestamp("2026-01-05 01:00:00"))]
    assert (second["records"], second["distinct_seq"], second["dup_records"]) == (6, 4, 2)
    assert second["coverage"] == pytest.approx(0.8) and second["loss_rate"] == pytest.approx(0.2)
    assert (second["rssi_min"], second["rssi_avg"], second["rssi_max"]) == (-74, -71.5, -70)
    assert (second["latency_p50"], second["latency_p95"]) == (60, 80)
    assert second["heap_delta"] == 51700 - 49500
    assert second["reconnects"] == 8 - 6  # against the previous window's last record
    assert second["unexpected_resets"] == 1
    b = w[("dev-b", pd.Timestamp("2026-01-05 01:00:00"))]
    assert b["reconnects"] == 2 - 1 and b["heap_delta"] == 1000 and b["coverage"] == 1.0
    assert len(w) == 2 + 2 + 1


def test_device_health(known):
    h = rows(known[1], "device_health", "device_id")
    a, b, c = h["dev-a"], h["dev-b"], h["dev-c"]
    assert a["fw_version"] == "1.0.0" and b["fw_version"] == "1.1.0"
    assert to_ms([a["first_seen"]])[0] == T + 55 * MIN + 1000
    assert to_ms([a["last_seen"]])[0] == T + 64 * MIN + 1000
    assert (a["silent"], b["silent"], c["silent"]) == (False, False, True)
    assert a["coverage"] == pytest.approx(8 / 10) and a["loss_rate"] == pytest.approx(0.2)
    assert b["coverage"] == pytest.approx(10 / 65) and b["loss_rate"] == 0  # offline, nothing lost
    assert c["coverage"] == 1.0 and c["loss_rate"] == 0
    assert (a["reboots"], b["reboots"], c["reboots"]) == (1, 1, 0)
    assert (a["unexpected_resets"], b["unexpected_resets"], c["unexpected_resets"]) == (1, 1, 0)
    assert (a["active_hours"], b["active_hours"], c["active_hours"]) == (2, 2, 1)
    assert a["crash_free_hours_pct"] == 50.0 and b["crash_free_hours_pct"] == 50.0
    assert c["crash_free_hours_pct"] == 100.0
    assert (a["reconnects"], b["reconnects"], c["reconnects"]) == (3, 1, 0)
    assert a["reconnects_per_hour"] == 1.5
    assert a["heap_leak_bytes_per_hour"] == pytest.approx(6000.0)
    assert b["heap_leak_bytes_per_hour"] == pytest.approx(0.0, abs=1e-9)
    assert a["vbat_min"] == 3991 and c["vbat_min"] == 3700
    assert a["vbat_drop_per_hour"] == pytest.approx(60.0)
    assert c["vbat_drop_per_hour"] == pytest.approx(0.0, abs=1e-9)
    import math

    assert math.isnan(b["vbat_min"]) and math.isnan(b["vbat_drop_per_hour"])  # mains powered


def test_firmware_cohort_compares_each_release_with_the_previous(known):
    f = rows(known[1], "firmware_cohort", "fw_version")
    old, new = f["1.0.0"], f["1.1.0"]
    assert (old["devices"], old["device_hours"], old["crash_free_hours"]) == (2, 3, 2)
    assert old["crash_free_hours_pct"] == pytest.approx(200 / 3)
    assert (old["rssi_p05"], old["rssi_p50"]) == (-74, -62)  # ranks 1 and 7 of 13
    assert (old["latency_p50"], old["latency_p95"]) == (20, 80)  # ranks 7 and 13 of 13
    assert old["mean_coverage"] == pytest.approx((0.8 + 0.8 + 1.0) / 3)
    assert old["mean_loss_rate"] == pytest.approx((0.2 + 0.2 + 0) / 3)
    assert old["reconnects"] == 3 and old["reconnects_per_device_hour"] == pytest.approx(1.0)
    assert old["unexpected_resets"] == 1 and old["prev_fw_version"] is None
    assert (new["devices"], new["device_hours"], new["crash_free_hours_pct"]) == (1, 2, 50.0)
    assert (new["rssi_p05"], new["rssi_p50"], new["latency_p50"], new["latency_p95"]) == (-80, -80, 100, 100)
    assert new["reconnects_per_device_hour"] == pytest.approx(0.5)
    assert new["prev_fw_version"] == "1.0.0"
    assert new["crash_free_hours_pct_delta"] == pytest.approx(50 - 200 / 3)
    assert new["mean_loss_rate_delta"] == pytest.approx(0 - 0.4 / 3)


def test_no_outliers_in_cohorts_below_the_minimum_size(known):
    assert len(table(known[1], "outliers")) == 0


def test_outliers_by_median_absolute_deviation(spark):
    from fleetwire.host.analytics import metrics

    devs = [
        ("d%d" % i, "2.0.0", loss, rc, 0.0, 1.0)
        for i, (loss, rc) in enumerate(
            [(0.01, 1.0), (0.02, 1.0), (0.02, 1.0), (0.03, 1.0), (0.02, 1.0), (0.5, 9.0)]
        )
    ]
    h = spark.createDataFrame(
        devs,
        "device_id string, fw_version string, loss_rate double, "
        "reconnects_per_hour double, heap_leak_bytes_per_hour double, "
        "vbat_drop_per_hour double",
    )
    got = {(r["device_id"], r["metric"]): r for r in metrics.outliers(h).collect()}
    assert set(got) == {("d5", "loss_rate"), ("d5", "reconnects_per_hour")}
    loss = got[("d5", "loss_rate")]
    assert loss["cohort_median"] == pytest.approx(0.02) and loss["cohort_mad"] == pytest.approx(0.005)
    assert loss["score"] == pytest.approx(0.48 / (1.4826 * 0.005))
    rc = got[("d5", "reconnects_per_hour")]  # MAD is 0: the mean absolute deviation stands in
    assert rc["cohort_mad"] == 0 and rc["score"] == pytest.approx(8 / (1.2533 * 8 / 6))
    assert metrics.outliers(h, min_cohort=7).count() == 0


def test_since_leaves_out_earlier_records(run_job, tmp_path):
    root = write_known(tmp_path / "landing")
    res, _ = run_job(root, tmp_path / "out", since_ms=T + 60 * MIN)
    h = rows(tmp_path / "out", "device_health", "device_id")
    assert set(h) == {"dev-a", "dev-b"}  # dev-c stopped at minute 4
    assert h["dev-a"]["distinct_seq"] == 4  # seq 105, 106, 108, 109
    assert res.quality["filtered_before_since"] == (4 + 1) + 5 + 5  # a: 4 and the copy of 103; b; c


def test_a_window_updated_midway_has_the_release_of_its_last_record(run_job, tmp_path):
    # dev-u reports 1.0.0 for seq 0..2, then runs 1.1.0 from seq 3, within one window; the newer
    # records arrive first, so the last delivered is not the last by seq
    recs = [
        rec("dev-u", "1.0.0" if seq < 3 else "1.1.0", seq, seq, 1, 60 * seq, 9000, -60, 10, None, 0)
        for seq in range(5)
    ]
    for r in recs:
        r["rx_ts"] = T + 10 * MIN - r["seq"] * 1000
    generator.write_records(recs, str(tmp_path / "landing" / "date=2026-01-05" / "hour=00" / "p.ndjson"))
    run_job(tmp_path / "landing", tmp_path / "out")
    w = table(tmp_path / "out", "device_window")
    assert list(w["fw_version"]) == ["1.1.0"]
    assert set(table(tmp_path / "out", "firmware_cohort")["fw_version"]) == {"1.0.0", "1.1.0"}
