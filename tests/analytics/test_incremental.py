"""--incremental: each run reads only the files it has not seen, every record counts exactly once,
and a run that dies is finished by the next."""
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
    assert any("incremental: %d new files, %d new usable records" % (len(files1), len(first)) in l for l in log1)
    assert len(table(out, "clean")) == len(first.drop_duplicates(["device_id", "seq"]))

    files2 = generator.write_landing(second, str(landing))
    r2, _ = run_job(landing, out, incremental=True)
    assert (r2.new_files, r2.new_records) == (len(files2), len(second))   # not the first hours again
    whole = pd.concat([first, second])
    assert r2.quality["valid_records"] == len(whole)
    assert r2.quality["clean_records"] == len(table(out, "clean")) == len(whole.drop_duplicates(["device_id", "seq"]))
    health2 = table(out, "device_health").sort_values("device_id").reset_index(drop=True)

    r3, _ = run_job(landing, out, incremental=True)                        # nothing new
    assert (r3.new_files, r3.new_records) == (0, 0)
    assert r3.quality["valid_records"] == len(whole)
    health3 = table(out, "device_health").sort_values("device_id").reset_index(drop=True)
    pd.testing.assert_frame_equal(health2, health3)

    # the same tables as one batch run over everything
    run_job(landing, tmp_path / "batch")
    for name, keys in (("device_health", ["device_id"]), ("device_window", ["device_id", "window_start"]),
                       ("firmware_cohort", ["fw_version"])):
        assert R.differences(table(out, name), table(tmp_path / "batch", name), keys) == [], name


def test_a_run_that_dies_before_it_commits_is_finished_by_the_next_without_counting_twice(
        run_job, fleet, tmp_path, monkeypatch):
    from fleetwire.host.analytics import incremental
    first, _ = fleet
    landing, out = tmp_path / "landing", tmp_path / "out"
    generator.write_landing(first, str(landing))

    def killed(self, snap):   # the tables are written; the process dies before the checkpoint says so
        raise KeyboardInterrupt
    with monkeypatch.context() as m:
        m.setattr(incremental.Checkpoint, "commit", killed)
        with pytest.raises(KeyboardInterrupt):
            run_job(landing, out, incremental=True)
    r, log = run_job(landing, out, incremental=True)
    assert any("finishing run 1, which stopped before it committed" in line for line in log)
    assert r.new_records == len(first)                  # the same files, staged again ...
    assert r.quality["valid_records"] == len(first)     # ... in place of the first attempt's
    assert r.quality["clean_records"] == len(table(out, "clean")) == len(first.drop_duplicates(["device_id", "seq"]))
    again, _ = run_job(landing, out, incremental=True)
    assert (again.new_files, again.new_records) == (0, 0)
