"""The synthetic fleet of `fleetwire gen-telemetry` and the analytics tests (no Spark)."""

from fleetwire.host.analytics import generator


def test_boards_that_sleep_report_only_in_their_waking_hours_and_boot_at_each_wake():
    df = generator.generate(devices=4, hours=3 * 24, seed=3, awake=(22, 23, 0, 1))
    hour = (df.ts // 3600_000) % 24  # the board's own clock: rx_ts may fall in the next hour
    assert set(hour) <= {21, 22, 23, 0, 1}  # 21: a clock running up to 2 s behind
    for _, d in df.drop_duplicates(["device_id", "seq"]).sort_values("seq").groupby("device_id"):
        gaps = d.ts.diff() > 12 * 3600_000  # asleep since the last record
        first = d[gaps]
        assert len(first) >= 2
        assert (first.reset_cause.notna()).all()  # a wake from deep sleep is a boot
        assert (first.boot_id.to_numpy() > d.boot_id.shift()[gaps].to_numpy()).all()
        assert (first.uptime_s < 3600).all()


def test_a_fleet_that_never_sleeps_reports_every_hour():
    df = generator.generate(devices=3, hours=24, seed=3)
    assert set((df.ts // 3600_000) % 24) == set(range(24))
