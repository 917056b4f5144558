"""--incremental: each run reads only the files it has not seen, every record counts exactly once,
and a run that dies is finished by the next."""

from collections import Counter, namedtuple

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


def test_a_run_that_dies_before_it_commits_is_finished_by_the_next_without_counting_twice(
    run_job, fleet, tmp_path, monkeypatch
):
    from fleetwire.host.analytics import incremental

    first, _ = fleet
    landing, out = tmp_path / "landing", tmp_path / "out"
    generator.write_landing(first, str(landing))

    def killed(self, snap):  # the tables are written; the process dies before the checkpoint says so
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(incremental.Checkpoint, "commit", killed)
        with pytest.raises(KeyboardInterrupt):
            run_job(landing, out, incremental=True)
    r, log = run_job(landing, out, incremental=True)
    assert any("finishing run 1, which stopped before it committed" in line for line in log)
    assert r.new_records == len(first)  # the same files, staged again ...
    assert r.quality["valid_records"] == len(first)  # ... in place of the first attempt's
    assert (
        r.quality["clean_records"]
        == len(table(out, "clean"))
        == len(first.drop_duplicates(["device_id", "seq"]))
    )
    again, _ = run_job(landing, out, incremental=True)
    assert (again.new_files, again.new_records) == (0, 0)


def partitions(out):
    """{(table, 'date=.../hour=...'): file names} of the tables partitioned by hour."""
    found = {}
    for name in ("clean", "device_window"):
        for d in (out / name).glob("date=*/hour=*"):
            found[(name, "%s/%s" % (d.parent.name, d.name))] = sorted(f.name for f in d.iterdir())
    return found


def ts_hours(records):
    t = pd.to_datetime(records["ts"], unit="ms", utc=True)
    return {"date=%s/hour=%d" % (x.strftime("%Y-%m-%d"), x.hour) for x in t}


def same_tables(out, ref):
    keys = {
        "device_window": ["device_id", "window_start"],
        "device_health": ["device_id"],
        "firmware_cohort": ["fw_version"],
        "outliers": ["device_id", "metric"],
    }
    for name, k in keys.items():
        assert R.differences(table(out, name), table(ref, name), k) == [], name
    cols = [c for c in table(ref, "clean").columns if c not in ("date", "hour")]
    a, b = (
        table(o, "clean")[cols].sort_values(["device_id", "seq"]).reset_index(drop=True) for o in (out, ref)
    )
    assert a.equals(b), "clean"


# The long histories are of boards that sleep most of the day and boot at each wake: every day
# has its boots, and Spark's cost, which is per file written (a file an hour with records), is a
# sixth of a fleet's that never sleeps. They wake before midnight, so boots carry over it.
AWAKE = (22, 23, 0, 1)


@pytest.fixture(scope="module")
def month(spark, tmp_path_factory):
    """Thirty days of a small fleet run incrementally, then one hour more; and a batch run over all."""
    from fleetwire.host.analytics import job

    base = tmp_path_factory.mktemp("month")
    df = generator.generate(devices=3, hours=30 * 24 + 1, seed=13, awake=AWAKE)
    cut = generator.parse_time(generator.DEFAULT_START) + 30 * 24 * 3600_000
    old, new = df[df.rx_ts < cut], df[df.rx_ts >= cut]

    def run(out, **kw):
        return job.run(
            spark,
            job.Config(input=str(base / "landing"), out=str(out), report=False, log=lambda m: None, **kw),
        )

    generator.write_landing(old, str(base / "landing"))
    first = run(base / "out", incremental=True)
    before = partitions(base / "out")
    generator.write_landing(new, str(base / "landing"))
    since, since_stage = len(job_phases(spark)), len(stage_reads(spark))
    second = run(base / "out", incremental=True)
    phases = job_phases(spark)[since:]
    reads = Counter()
    for phase, n in stage_reads(spark)[since_stage:]:
        reads[phase] += n
    after = partitions(base / "out")
    run(base / "batch")
    return Month(base, old, new, first, second, before, after, phases, reads)


# the month fixture: its directory, the 30 days' and the hour's records, both runs' results, the
# partitions before and after the hour, and the phases of the hour's Spark jobs
Month = namedtuple("Month", "base old new first second before after phases reads")


def job_phases(spark):
    """What each Spark job this session ran was described as (the job names its phases), in order."""
    jobs = spark.sparkContext._jsc.sc().statusStore().jobsList(None)
    found = sorted((jobs.apply(i).jobId(), jobs.apply(i).description()) for i in range(jobs.size()))
    return [d.get().replace("fleetwire report: ", "") if d.isDefined() else None for _, d in found]


def stage_reads(spark):
    """Per stage this session ran, in order: (its job's phase, the records it read from files)."""
    sc = spark.sparkContext
    gw = sc._gateway
    stages = sc._jsc.sc().statusStore().stageList(None, False, False, gw.new_array(gw.jvm.double, 0), None)
    found = sorted(
        (s.stageId(), s.description().get() if s.description().isDefined() else "", s.inputRecords())
        for s in (stages.apply(i) for i in range(stages.size()))
    )
    return [(d.replace("fleetwire report: ", ""), n) for _, d, n in found]


def state_rows(out, date, kind):
    files = list(out.glob("_state/run=*/date=%s/kind=%s/*.parquet" % (date, kind)))
    return sum(len(pd.read_parquet(f)) for f in files)


def test_thirty_days_then_one_hour_more_equal_a_batch_run_over_everything(month):
    base, old, new, first, second = month[:5]
    landed = list((base / "landing").glob("date=*/hour=*/*.ndjson"))
    assert first.new_files == len(landed) - 1 and second.new_files == 1
    assert second.new_records == len(new)
    same_tables(base / "out", base / "batch")


def test_the_hour_more_rewrote_only_the_partitions_of_its_records(month):
    base, old, new, _, second, before, after = month[:7]
    changed = {k for k in after if before.get(k) != after[k]}
    assert changed == {(t, h) for t in ("clean", "device_window") for h in ts_hours(new)}
    assert len(before) == 2 * len(ts_hours(old))  # nothing else was added or dropped
    assert set(before) - set(after) == set()


def test_the_hour_more_found_it_needs_no_other_hour_in_the_job_that_deduplicates_it(month):
    # every device's new seqs come after its old ones: checked beside the deduplication's counts
    phases = month.phases
    assert "hours to recompute" not in phases
    assert phases.count("clean (recomputed hours)") == 2  # the counts with the check; the write


def test_the_hour_more_checked_its_order_against_one_row_per_device_and_day_not_every_rollup(month):
    # besides the hour's staged records (twice: for the check and for the deduplication), the check
    # reads the hour's day's hourly window partials and every day's window links: at most as many
    # rows as the state holds of them after the hour
    (day,) = {h[len("date=") : len("date=yyyy-mm-dd")] for h in ts_hours(month.new)}
    links, near = (state_rows(month.base / "out", d, k) for d, k in (("total", "links"), (day, "window")))
    assert month.reads["clean (recomputed hours)"] <= 2 * month.second.new_records + links + near
    assert links + near < state_rows(month.base / "out", "*", "rollup") / 4  # what it read before


def test_the_hour_more_read_the_per_boot_records_of_its_last_days_only(month):
    # the boots before the edge (the day before the last) are kept summed up per device: neither
    # the state of the touched days nor the tables read every day's per-boot records (kind=rday)
    out = month.base / "out"
    rday = out.glob("_state/run=*/date=*/kind=rday/*")
    dates = sorted({f.parent.parent.name[len("date=") :] for f in rday})
    every, recent = state_rows(out, "*", "rday"), sum(state_rows(out, d, "rday") for d in dates[-3:])
    total = state_rows(out, "total", "*")
    touched = {h[len("date=") : len("date=yyyy-mm-dd")] for h in ts_hours(month.new)}
    hourly = sum(state_rows(out, d, k) for d in touched for k in ("window", "record", "histogram"))
    assert month.reads["state of the touched days"] <= hourly + total + recent
    assert month.reads["device_health"] <= state_rows(out, "*", "rollup") + total + recent
    # and the bound tells them apart: reading every day's would have read half as much again
    assert hourly + total + every > 1.5 * (hourly + total + recent)


def test_a_boot_id_that_went_back_counts_as_a_batch_run_counts_it(run_job, tmp_path):
    """A board whose flash was wiped starts its boot counter again: its new boot_id is one it had
    before, and its boots are made anew from every day's per-boot records, as a batch run merges
    them (by device and boot_id)."""
    df = generator.generate(devices=3, hours=3 * 24 + 2, seed=29, awake=AWAKE)
    cut = generator.parse_time(generator.DEFAULT_START) + 3 * 24 * 3600_000
    old, new = df[df.rx_ts < cut], df[df.rx_ts >= cut].copy()
    dev = new.device_id.iloc[0]
    new.loc[new.device_id == dev, "boot_id"] = old[old.device_id == dev].boot_id.min()
    landing, out = tmp_path / "landing", tmp_path / "out"
    generator.write_landing(old, str(landing))
    run_job(landing, out, incremental=True)
    generator.write_landing(new, str(landing))
    run_job(landing, out, incremental=True)
    run_job(landing, tmp_path / "batch")
    same_tables(out, tmp_path / "batch")


def test_a_run_a_day_carries_the_boots_over_each_midnight_as_a_batch_run_counts_them(run_job, tmp_path):
    df = generator.generate(devices=4, hours=4 * 24, seed=31, awake=AWAKE)
    t0 = generator.parse_time(generator.DEFAULT_START)
    landing, out = tmp_path / "landing", tmp_path / "out"
    for day in range(4):
        one = df[(df.rx_ts >= t0 + day * 24 * 3600_000) & (df.rx_ts < t0 + (day + 1) * 24 * 3600_000)]
        generator.write_landing(one, str(landing))
        run_job(landing, out, incremental=True)
    run_job(landing, tmp_path / "batch")
    same_tables(out, tmp_path / "batch")


def test_a_run_with_nothing_new_starts_no_spark_job(month, spark):
    from fleetwire.host.analytics import job

    base = month.base
    tracker = spark.sparkContext.statusTracker()
    jobs = len(tracker.getJobIdsForGroup(None))
    r = job.run(
        spark,
        job.Config(
            input=str(base / "landing"),
            out=str(base / "out"),
            incremental=True,
            report=False,
            log=lambda m: None,
        ),
    )
    assert (r.new_files, r.new_records) == (0, 0)
    assert len(tracker.getJobIdsForGroup(None)) == jobs
    assert r.quality["clean_records"] == month.second.quality["clean_records"]


def test_a_late_file_recomputes_its_hours_and_the_windows_that_chain_to_them(run_job, spark, tmp_path):
    df = generator.generate(devices=12, hours=4, seed=17)
    t0 = generator.parse_time(generator.DEFAULT_START)
    late = df[(df.rx_ts >= t0 + 3600_000) & (df.rx_ts < t0 + 2 * 3600_000)]
    landing, out = tmp_path / "landing", tmp_path / "out"
    generator.write_landing(df.drop(late.index), str(landing))
    run_job(landing, out, incremental=True)
    before = partitions(out)
    generator.write_landing(late, str(landing))  # hour 01's file lands last
    since = len(job_phases(spark))
    r, _ = run_job(landing, out, incremental=True)
    # its seqs come before the later hours': which hours to recompute takes queries of their own
    assert "hours to recompute" in job_phases(spark)[since:]
    after = partitions(out)
    changed = {k for k in after if before.get(k) != after[k]}
    own = ts_hours(late)
    assert {h for t, h in changed if t == "clean"} == own
    following = {"date=2026-01-05/hour=%d" % (max(int(h.split("=")[-1]) for h in own) + 1)}
    assert {h for t, h in changed if t == "device_window"} == own | following
    run_job(landing, tmp_path / "batch")
    same_tables(out, tmp_path / "batch")


def test_a_landing_zone_moved_elsewhere_keeps_its_files_seen(month, spark, tmp_path):
    """The checkpoint knows a file by its name under the landing zone, not by its absolute URI: the
    zone copied to another directory, and named there by a file:// URI, has nothing new."""
    import shutil
    from fleetwire.host.analytics import job

    base = month.base
    moved = tmp_path / "moved"
    shutil.copytree(base / "landing", moved)
    r = job.run(
        spark,
        job.Config(
            input="file://%s" % moved,
            out=str(base / "out"),
            incremental=True,
            report=False,
            log=lambda m: None,
        ),
    )
    assert (r.new_files, r.new_records) == (0, 0)


def report_csv(out, name):
    return pd.read_csv(out / "csv" / (name + ".csv"))


@pytest.fixture(scope="module")
def split_hour():
    """Four hours of a small fleet; hour 01 (of rx_ts) split in two halves by record."""
    df = generator.generate(devices=6, hours=4, seed=19)
    t0 = generator.parse_time(generator.DEFAULT_START)
    h1 = df[(df.rx_ts >= t0 + 3600_000) & (df.rx_ts < t0 + 2 * 3600_000)]
    return df, h1.iloc[::2], h1.iloc[1::2]


def test_more_records_and_copies_for_counted_hours_count_as_a_batch_run_does(run_job, split_hour, tmp_path):
    """Hours already counted get more records and copies of records already counted (a late file,
    a redelivery): the recomputed hours' old counts leave the histograms' running total and their
    new ones enter it, once; the report's histogram and every table equal a batch run's."""
    df, counted, late = split_hour
    landing, out = tmp_path / "landing", tmp_path / "out"
    generator.write_landing(df.drop(late.index), str(landing))
    run_job(landing, out, incremental=True)
    copies = counted.iloc[::3].assign(rx_ts=counted.iloc[::3].rx_ts + 1)  # delivered again, later
    generator.write_landing(pd.concat([late, copies]), str(landing))
    r, _ = run_job(landing, out, incremental=True, report=True)
    assert r.new_records == len(late) + len(copies)
    assert r.quality["clean_records"] == len(df.drop_duplicates(["device_id", "seq"]))
    assert r.quality["duplicates"] == r.quality["valid_records"] - r.quality["clean_records"]
    again, _ = run_job(landing, out, incremental=True, report=True)  # nothing new: nothing moves
    assert (again.new_files, again.new_records) == (0, 0)

    run_job(landing, tmp_path / "batch", report=True)
    same_tables(out, tmp_path / "batch")
    for name, keys in (("rssi_histogram", ["fw_version", "rssi"]), ("fleet_hourly", ["hour", "fw_version"])):
        assert R.differences(report_csv(out, name), report_csv(tmp_path / "batch", name), keys) == [], name


def test_a_run_killed_after_writing_its_state_leaves_the_last_commit_usable(
    run_job, split_hour, tmp_path, monkeypatch
):
    """The run that recomputes a counted hour dies after writing its tables and state, before its
    commit: the next run starts again from the last commit's state (its histograms' total, not the
    dead run's), and the tables equal a batch run's."""
    from fleetwire.host.analytics import incremental

    df, _, late = split_hour
    landing, out = tmp_path / "landing", tmp_path / "out"
    generator.write_landing(df.drop(late.index), str(landing))
    run_job(landing, out, incremental=True)
    generator.write_landing(late, str(landing))

    def killed(self, snap):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(incremental.Checkpoint, "commit", killed)
        with pytest.raises(KeyboardInterrupt):
            run_job(landing, out, incremental=True)
    r, log = run_job(landing, out, incremental=True, report=True)
    assert any("finishing run 2, which stopped before it committed" in line for line in log)
    assert r.quality["clean_records"] == len(df.drop_duplicates(["device_id", "seq"]))
    run_job(landing, tmp_path / "batch", report=True)
    same_tables(out, tmp_path / "batch")
    keys = ["fw_version", "rssi"]
    assert (
        R.differences(
            report_csv(out, "rssi_histogram"), report_csv(tmp_path / "batch", "rssi_histogram"), keys
        )
        == []
    )


def test_a_checkpoint_from_an_older_state_layout_is_refused_with_what_to_do(run_job, tmp_path):
    import json

    from fleetwire.host.analytics import landing as L

    generator.write_landing(generator.generate(devices=2, hours=1, seed=3), str(tmp_path / "landing"))
    (tmp_path / "out" / "_checkpoint").mkdir(parents=True)
    (tmp_path / "out" / "_checkpoint" / "state-3.json").write_text(json.dumps({"version": 1, "run": 3}))
    refused = "older fleetwire .* --reset .* delete it, OUT/_staging and OUT/_state"
    with pytest.raises(L.InputError, match=refused):
        run_job(tmp_path / "landing", tmp_path / "out", incremental=True)
    (tmp_path / "out" / "_staging" / "run=3").mkdir(parents=True)
    (tmp_path / "out" / "_staging" / "run=3" / "stale.parquet").write_text("not ours any more")
    res, _ = run_job(tmp_path / "landing", tmp_path / "out", incremental=True, reset=True)
    assert res.new_files == len(list((tmp_path / "landing").rglob("*.ndjson"))), "it reads everything"
    assert not (tmp_path / "out" / "_staging" / "run=3").exists()
    run_job(tmp_path / "landing", tmp_path / "batch")
    same_tables(tmp_path / "out", tmp_path / "batch")


def test_a_late_file_for_an_hour_days_ago_recomputes_it_and_relinks_the_hour_after(run_job, tmp_path):
    """An hour of the first of three days lands last: later days' seqs reach past it, so every
    hour's window links are read to find what follows it; the tables equal a batch run's."""
    df = generator.generate(devices=4, hours=3 * 24, seed=23)
    t0 = generator.parse_time(generator.DEFAULT_START)
    late = df[(df.rx_ts >= t0 + 10 * 3600_000) & (df.rx_ts < t0 + 11 * 3600_000)]
    landing, out = tmp_path / "landing", tmp_path / "out"
    generator.write_landing(df.drop(late.index), str(landing))
    run_job(landing, out, incremental=True)
    before = partitions(out)
    generator.write_landing(late, str(landing))
    run_job(landing, out, incremental=True)
    after = partitions(out)
    changed = {k for k in after if before.get(k) != after[k]}
    own = ts_hours(late)
    assert {h for t, h in changed if t == "clean"} == own
    assert len({h for t, h in changed if t == "device_window"} - own) == 1  # the hour after
    run_job(landing, tmp_path / "batch")
    same_tables(out, tmp_path / "batch")
