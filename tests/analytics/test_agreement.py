"""The Spark job and an independent DuckDB implementation of the same definitions
(analytics_reference.py) agree on a generated fleet of ~100k records."""

import pytest

from fleetwire.host.analytics import generator

import analytics_reference as R
from conftest import table

KEYS = {
    "device_window": ["device_id", "window_ms"],
    "device_health": ["device_id"],
    "firmware_cohort": ["fw_version"],
    "outliers": ["device_id", "metric"],
}


@pytest.fixture(scope="module")
def both(spark, tmp_path_factory):
    from fleetwire.host.analytics import job

    root = tmp_path_factory.mktemp("fleet-landing")
    df = generator.generate(devices=70, hours=24, seed=3)
    files = generator.write_landing(df, str(root))
    out = tmp_path_factory.mktemp("fleet-out")
    res = job.run(spark, job.Config(input=str(root), out=str(out), report=False, log=lambda m: None))
    return df, res, out, R.compute(files)


def test_the_generated_fleet_is_big_and_faulty_enough(both):
    df, res, _, _ = both
    assert 90_000 <= len(df) <= 110_000
    assert res.quality["duplicates"] > 500
    assert set(df["fw_version"]) == {"1.4.2", "1.5.0", "1.5.1"}
    assert {"panic", "watchdog", "brownout", "deliberate", "power_on"} <= set(df["reset_cause"].dropna())


@pytest.mark.parametrize("name", ["device_window", "device_health", "firmware_cohort", "outliers"])
def test_spark_agrees_with_duckdb(both, name):
    _, res, out, ref = both
    got = table(out, name)
    if name == "device_window":
        got["window_ms"] = R.to_ms(got["window_start"])
    if name == "device_health":
        got["first_ts"], got["last_ts"] = R.to_ms(got["first_seen"]), R.to_ms(got["last_seen"])
    assert len(ref[name]) > 0
    assert R.differences(got, ref[name], KEYS[name], rel=1e-6, abs_tol=1e-6) == []


def test_clean_row_count_agrees(both):
    _, res, out, ref = both
    assert res.quality["clean_records"] == ref["clean_count"] == len(table(out, "clean"))


def test_the_report_finds_the_faults_the_generator_planted(both):
    _, _, out, _ = both
    cohort = table(out, "firmware_cohort").set_index("fw_version")
    assert cohort.loc["1.5.0", "crash_free_hours_pct"] < cohort.loc["1.4.2", "crash_free_hours_pct"]
    assert cohort.loc["1.5.1", "prev_fw_version"] == "1.5.0"
    health = table(out, "device_health")
    assert health["silent"].sum() >= 1
    flagged = set(table(out, "outliers")["metric"])
    assert {"loss_rate", "heap_leak_bytes_per_hour"} <= flagged
