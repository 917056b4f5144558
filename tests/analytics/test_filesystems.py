"""Where the report reads and writes: any Hadoop filesystem URI, a clear line when the classpath has
no filesystem for a scheme, and files that vanish between listing and reading counted, not lost
in silence."""

import json

import pytest

from fleetwire.host.analytics import generator, landing
from fleetwire.host.analytics.storage import SchemeError

from conftest import table


@pytest.fixture(scope="module")
def small_landing(tmp_path_factory):
    root = tmp_path_factory.mktemp("fs-landing")
    df = generator.generate(devices=6, hours=3, seed=2)
    files = generator.write_landing(df, str(root))
    return root, df, files


def test_a_scheme_without_a_filesystem_class_is_one_line_and_exit_2(tmp_path, small_landing, report_cli):
    uri = "s3a://fleet-bucket/landing"
    r = report_cli("--input", uri, "--out", str(tmp_path / "out"), "--no-report", cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = [line for line in r.stderr.splitlines() if line.startswith("fleetwire report")]
    assert lines == [lines[0]] and lines[0].startswith(
        'fleetwire report: error: no Hadoop filesystem for "s3a" (--input %s) on Spark\'s classpath: '
        "add the hadoop-aws package, e.g. --packages org.apache.hadoop:hadoop-aws:" % uri
    )
    assert "Py4J" not in r.stderr and "at org.apache" not in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "out").exists()


def test_an_output_scheme_nobody_knows_names_what_to_add_before_anything_is_read(
    run_job, small_landing, tmp_path
):
    # the same error as the one above, which the command prints in one line (one JVM less)
    with pytest.raises(
        SchemeError,
        match='no Hadoop filesystem for "nosuchfs" .*--out nosuchfs://somewhere/fleet.*'
        "add the JAR with a Hadoop FileSystem for it",
    ):
        run_job(small_landing[0], "nosuchfs://somewhere/fleet")


def test_the_checkpoint_scheme_is_checked_before_anything_is_read(run_job, small_landing, tmp_path):
    with pytest.raises(
        SchemeError, match='no Hadoop filesystem for "gs" .*--checkpoint gs://b/ck.*gcs-connector'
    ):
        run_job(small_landing[0], tmp_path / "out", incremental=True, checkpoint="gs://b/ck")
    assert not (tmp_path / "out").exists()


def vanishing(monkeypatch, victim):
    """Make the job's listing of the landing zone lose `victim` right after it is listed."""
    real = landing.scan

    def scan(*a, **kw):
        found = real(*a, **kw)
        victim.unlink()
        return found

    monkeypatch.setattr(landing, "scan", scan)


def test_a_file_removed_between_listing_and_reading_is_counted_and_named(
    run_job, small_landing, tmp_path, monkeypatch
):
    import shutil

    root = tmp_path / "landing"
    shutil.copytree(small_landing[0], root)
    df = small_landing[1]
    victim = sorted(root.rglob("*.ndjson"))[1]
    lost = len(victim.read_text().splitlines())
    vanishing(monkeypatch, victim)
    res, log = run_job(root, tmp_path / "out")
    q = json.loads((tmp_path / "out" / "quality.json").read_text())
    assert q["vanished_files"] == ["file://%s" % victim]
    assert q["files"] == len(small_landing[2]) - 1
    assert q["records_read"] == len(df) - lost  # the rest is all there
    assert any("vanished between listing and reading" in line and victim.name in line for line in log)
    assert len(table(tmp_path / "out", "clean")) == res.quality["clean_records"]


def test_an_incremental_run_reports_a_vanished_file_and_reads_it_if_it_comes_back(
    run_job, small_landing, tmp_path, monkeypatch
):
    import shutil

    root = tmp_path / "landing"
    shutil.copytree(small_landing[0], root)
    victim = sorted(root.rglob("*.ndjson"))[0]
    saved = victim.read_bytes()
    with monkeypatch.context() as m:
        vanishing(m, victim)
        first, _ = run_job(root, tmp_path / "out", incremental=True)
    assert first.quality["vanished_files"] == ["file://%s" % victim]
    assert first.new_files == len(small_landing[2]) - 1
    victim.write_bytes(saved)  # the collector lands it again
    second, _ = run_job(root, tmp_path / "out", incremental=True)
    assert second.new_files == 1 and second.quality["vanished_files"] == []
    assert second.quality["records_read"] == len(small_landing[1])
