"""`fleetwire gen-telemetry` and `fleetwire report` as a user runs them: a landing zone in,
report.html with its plots and CSVs out, openable from disk."""

import csv
import json
import os
import re
import subprocess
import sys


from support import ROOT

FW = [sys.executable, "-m", "fleetwire.tools.cli"]


def test_report_prints_what_it_read_and_wrote(report_dir):
    out, r = report_dir
    assert re.search(r"read \d+ records from \d+ files: \d+ valid, 0 skipped", r.stdout)
    assert "report: %s" % (out / "report.html") in r.stdout
    assert "Traceback" not in r.stderr and "Exception" not in r.stderr and " WARN " not in r.stderr


def test_every_table_is_written_as_parquet(report_dir):
    out, _ = report_dir
    for name in ("clean", "device_window", "device_health", "firmware_cohort", "outliers"):
        assert (out / name / "_SUCCESS").exists(), name


def encodings(table, column):
    """The encodings of `column` in every Parquet file of a written table."""
    import pyarrow.parquet as pq

    found = set()
    for path in table.rglob("*.parquet"):
        meta = pq.ParquetFile(path).metadata
        i = meta.schema.names.index(column)
        for g in range(meta.num_row_groups):
            found.update(meta.row_group(g).column(i).encodings)
    return found


def test_rising_columns_are_delta_encoded(report_dir):
    # Parquet format 2 pages: ts and seq without a dictionary take a third less space than plain
    out, _ = report_dir
    for column in ("ts", "seq"):
        assert "DELTA_BINARY_PACKED" in encodings(out / "clean", column), column
        assert "PLAIN" not in encodings(out / "clean", column), column
    assert "RLE_DICTIONARY" in encodings(out / "clean", "fw_version")  # few values: a dictionary


def test_report_html_references_only_files_that_exist(report_dir):
    out, _ = report_dir
    page = (out / "report.html").read_text()
    imgs = re.findall(r"<img src='([^']+)'", page)
    links = re.findall(r"<a href='([^']+)'", page)
    assert sorted(imgs) == [
        "plots/coverage_loss.png",
        "plots/crash_free.png",
        "plots/rssi.png",
        "plots/worst_devices.png",
    ]
    assert {"csv/firmware_cohort.csv", "csv/outliers.csv", "csv/device_health.csv"} <= set(links)
    for rel in imgs + links:
        assert not os.path.isabs(rel) and "://" not in rel  # opens from disk, no server
        assert (out / rel).is_file(), rel
    for rel in imgs:
        data = (out / rel).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, rel


def test_the_csv_copies_hold_the_tables(report_dir):
    out, _ = report_dir
    with open(out / "csv" / "firmware_cohort.csv") as f:
        rows = list(csv.DictReader(f))
    assert {r["fw_version"] for r in rows} == {"1.4.2", "1.5.0", "1.5.1"}
    assert {
        "devices",
        "crash_free_hours_pct",
        "rssi_p05",
        "latency_p95",
        "mean_coverage",
        "reconnects_per_device_hour",
        "prev_fw_version",
    } <= set(rows[0])
    with open(out / "csv" / "device_health.csv") as f:
        assert len(list(csv.DictReader(f))) == 20
    page = (out / "report.html").read_text()
    for r in rows:
        assert "<td>%s</td>" % r["fw_version"] in page


def test_every_table_has_the_columns_the_tables_page_documents(report_dir):
    from fleetwire.host.analytics.schema import TABLES
    from fleetwire.host.fleet.record import FIELD_NAMES

    import pyarrow.dataset as ds

    out, _ = report_dir
    with open(os.path.join(ROOT, "docs", "reference", "tables.md"), encoding="utf-8") as f:
        page = f.read()
    for table in TABLES:
        section = page.split("## `%s`" % table, 1)[1].split("\n## ", 1)[0]
        documented = set()
        for line in section.splitlines():
            if line.startswith("| `") or line.startswith("| every field"):
                documented |= set(re.findall(r"`(\w+)`", line.split("|")[1]))
                if "every field of the record" in line:
                    documented |= set(FIELD_NAMES)
        columns = set(ds.dataset(str(out / table), format="parquet", partitioning="hive").schema.names)
        assert sorted(columns - documented) == [] and sorted(documented - columns) == [], table
    quality = json.loads((out / "quality.json").read_text())
    assert set(quality) == set(
        re.findall(r"`(\w+)`", page.split("| `quality.json` |", 1)[1].split("\n", 1)[0])
    )


def test_report_runs_under_spark_submit(tmp_path, report_dir):
    import fleetwire.tools.report as mod

    submit = os.path.join(os.path.dirname(sys.executable), "spark-submit")
    env = dict(
        os.environ,
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
    )
    landing = report_dir[0].parent / "landing"
    r = subprocess.run(
        [
            submit,
            "--master",
            "local[2]",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",  # for a reader older than Spark 3.3: the user's Parquet settings are kept
            "spark.hadoop.parquet.writer.version=v1",
            mod.__file__,
            "--input",
            str(landing),
            "--out",
            str(tmp_path / "out"),
            "--no-report",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert (tmp_path / "out" / "device_health" / "_SUCCESS").exists()
    assert not (tmp_path / "out" / "report.html").exists()
    seq = encodings(tmp_path / "out" / "clean", "seq")
    assert "PLAIN" in seq and "DELTA_BINARY_PACKED" not in seq


def test_reset_without_incremental_is_refused_in_one_line(tmp_path):
    r = subprocess.run(
        FW + ["report", "--reset", "--input", str(tmp_path), "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2
    assert r.stderr.strip() == "fleetwire report: error: --reset goes with --incremental"
