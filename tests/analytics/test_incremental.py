"""--incremental: the streaming file source with a checkpoint and trigger(availableNow=True)
reads only files it has not seen, and every record counts exactly once."""

import pandas as pd
import pytest

from fleetwire.host.analytics import generator

import analytics_reference as R
from conftest import table


@pytest.fixture(scope="module")
def fleet():
    df = generator.generate(devices=12, hours=4, seed=11)
    cut = generator.parse_time(generator.DEFAULT_START) + 2 * 3600_000
    return df[df.rx_ts < cut], df[df.rx_ts >= cut]


def test_each_run_reads_only_new_files_and_counts_each_record_once(run_job, fleet, tmp_path):
    first, second = fleet
    landing, out = tmp_path / "landing", tmp_path / "out"
    files1 = generator.write_landing(first, str(landing))

    r1, log1 = run_job(landing, out, incremental=True)
    assert (r1.new_files, r1.new_records) == (len(files1), len(first))
    assert any(
        "incremental: %d new files, %d new usable records" % (len(files1), len(first)) in l for l in log1
    )
    assert len(table(out, "clean")) == len(first.drop_duplicates(["device_id", "seq"]))

    files2 = generator.write_landing(second, str(landing))
    r2, _ = run_job(landing, out, incremental=True)
    assert (r2.new_files, r2.new_records) == (len(files2), len(second))  # not the first hours again
    whole = pd.concat([first, second])
    assert r2.quality["valid_records"] == len(whole)
    assert (
        r2.quality["clean_records"]
        == len(table(out, "clean"))
        == len(whole.drop_duplicates(["device_id", "seq"]))
    )
    health2 = table(out, "device_health").sort_values("device_id").reset_index(drop=True)

    r3, _ = run_job(landing, out, incremental=True)  # nothing new
    assert (r3.new_files, r3.new_records) == (0, 0)
    assert r3.quality["valid_records"] == len(whole)
    health3 = table(out, "device_health").sort_values("device_id").reset_index(drop=True)
    pd.testing.assert_frame_equal(health2, health3)

    # the same tables as one batch run over everything
    run_job(landing, tmp_path / "batch")
    for name, keys in (
        ("device_health", ["device_id"]),
        ("device_window", ["device_id", "window_start"]),
        ("firmware_cohort", ["fw_version"]),
    ):
        assert R.differences(table(out, name), table(tmp_path / "batch", name), keys) == [], name


def test_a_crashed_run_that_replays_a_batch_does_not_count_it_twice(run_job, fleet, tmp_path):
    import shutil

    first, _ = fleet
    landing, out = tmp_path / "landing", tmp_path / "out"
    generator.write_landing(first, str(landing))
    run_job(landing, out, incremental=True)
    # as if the process died after staging batch 0 but before committing it to the checkpoint
    shutil.rmtree(out / "_checkpoint" / "commits")
    r, _ = run_job(landing, out, incremental=True)
    assert r.new_records == len(first)  # batch 0 ran again ...
    assert r.quality["valid_records"] == len(first)  # ... and replaced what it had staged
    assert len(table(out, "clean")) == len(first.drop_duplicates(["device_id", "seq"]))
