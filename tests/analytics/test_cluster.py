"""`fleetwire report` on a real Spark standalone cluster (a master and two workers from pyspark's own
spark-class, each worker with its own work directory, on loopback): the same tables as on local[2],
batch and incremental, with every output where --out says and nothing anywhere else."""

import os

import pytest

from fleetwire.host.analytics import generator

import analytics_reference as R
from conftest import table

KEYS = {
    "device_window": ["device_id", "window_start"],
    "device_health": ["device_id"],
    "firmware_cohort": ["fw_version"],
    "outliers": ["device_id", "metric"],
}
CUT = generator.parse_time(generator.DEFAULT_START) + 2 * 3600_000


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, spark):
    """A 4-hour fleet landed whole (for the batch runs) and its first two hours (for the incremental
    ones), and the local[2] batch run over all of it."""
    from fleetwire.host.analytics import job

    base = tmp_path_factory.mktemp("cluster-fleet")
    df = generator.generate(devices=20, hours=4, seed=5)
    generator.write_landing(df, str(base / "landing"))
    generator.write_landing(df[df.rx_ts < CUT], str(base / "landing-inc"))
    job.run(
        spark,
        job.Config(input=str(base / "landing"), out=str(base / "local"), report=False, log=lambda m: None),
    )
    return base, df


def same_tables(out, ref):
    for name, keys in KEYS.items():
        assert R.differences(table(out, name), table(ref, name), keys) == [], name
    a, b = table(out, "clean"), table(ref, "clean")
    cols = [c for c in b.columns if c not in ("date", "hour")]
    a = a[cols].sort_values(["device_id", "seq"]).reset_index(drop=True)
    b = b[cols].sort_values(["device_id", "seq"]).reset_index(drop=True)
    assert a.equals(b)


@pytest.fixture(scope="module")
def on_cluster(spark_cluster, fleet, report_cli):
    """The batch report on the cluster, --input and --out given as file:// URIs, run from an empty
    directory that is neither."""
    base, _ = fleet
    cwd = base / "cwd"
    cwd.mkdir()
    r = report_cli(
        "--master",
        spark_cluster,
        "--input",
        "file://%s" % (base / "landing"),
        "--out",
        "file://%s" % (base / "results" / "cluster"),
        cwd=cwd,
    )
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    return base / "results" / "cluster", cwd, r


def test_the_report_on_a_standalone_cluster_matches_the_local_run_table_by_table(on_cluster, fleet):
    out, _, r = on_cluster
    same_tables(out, fleet[0] / "local")
    assert "report: %s" % (out / "report.html") in r.stdout


def test_file_uris_leave_nothing_outside_out(on_cluster):
    out, cwd, _ = on_cluster
    assert os.listdir(cwd) == []  # no stray ./file:/... tree
    assert os.listdir(out.parent) == ["cluster"]
    for name in ("quality.json", "report.html", "plots/rssi.png", "csv/device_health.csv"):
        assert (out / name).is_file(), name


def test_the_incremental_report_on_a_standalone_cluster_goes_on_from_a_local_run_and_matches_a_batch_run(
    spark_cluster, fleet, report_cli, spark
):
    # the first run local (in this process's session), the next on the cluster: the cluster's run
    # reads the state a run elsewhere left under --out and carries it on (a JVM's start-up is
    # the cost of a run at this size: a cluster run is a driver and two executors)
    from fleetwire.host.analytics import job

    base, df = fleet
    landing, out = base / "landing-inc", "file://%s" % (base / "results-inc" / "cluster")
    first = job.run(spark, job.Config(input=str(landing), out=out, incremental=True, report=False, log=print))
    assert first.new_records == (df.rx_ts < CUT).sum()
    generator.write_landing(df[df.rx_ts >= CUT], str(landing))
    second = report_cli(
        "--master", spark_cluster, "--input", landing, "--out", out, "--incremental", "--no-report"
    )
    assert second.returncode == 0, second.stdout + second.stderr[-3000:]
    assert "incremental: 2 new files, %d new usable records" % (df.rx_ts >= CUT).sum() in second.stdout
    same_tables(base / "results-inc" / "cluster", base / "local")
