"""Input the job cannot fully use: it says what is wrong, counts what it skipped, and carries
on with the rest; never a bare Java stack trace."""

import json
import os
import subprocess
import sys

import pytest

from fleetwire.host.analytics.landing import InputError

from conftest import table
from test_known_answers import device_c, write_known


def test_a_missing_landing_zone_is_named(run_job, tmp_path):
    with pytest.raises(InputError, match="landing zone .*nowhere does not exist"):
        run_job(tmp_path / "nowhere", tmp_path / "out")


def test_an_empty_landing_zone_says_what_layout_was_expected(run_job, tmp_path):
    (tmp_path / "landing" / "date=2026-01-05").mkdir(parents=True)
    with pytest.raises(InputError, match=r"no .ndjson/.json files under .*date=YYYY-MM-DD/hour=HH"):
        run_job(tmp_path / "landing", tmp_path / "out")


def test_only_empty_files_means_no_usable_records(run_job, tmp_path):
    d = tmp_path / "landing" / "date=2026-01-05" / "hour=00"
    d.mkdir(parents=True)
    (d / "part-00000.ndjson").write_text("")
    with pytest.raises(InputError, match="no usable records .*read 0 records from 1 files"):
        run_job(tmp_path / "landing", tmp_path / "out")


@pytest.fixture(scope="module")
def messy(spark, tmp_path_factory):
    """The known landing zone plus a file of bad lines, a binary file and a dangling link."""
    from fleetwire.host.analytics import job

    root = write_known(tmp_path_factory.mktemp("messy"))
    d = root / "date=2026-01-05" / "hour=02"
    d.mkdir(parents=True)
    good = device_c()[0]
    bad = [
        "this is not json",
        "[1, 2, 3]",
        json.dumps(dict(good, seq="forty-two")),  # mistyped
        json.dumps(dict(good, rssi="strong", seq=999)),  # mistyped
        json.dumps({k: v for k, v in good.items() if k != "device_id"}),
        json.dumps({k: v for k, v in good.items() if k != "seq"}),
        json.dumps({k: v for k, v in dict(good, seq=998).items() if k != "seq"}),
        json.dumps(dict(good, seq=997, period_s=0)),
        "{}",
    ]
    (d / "part-00000.ndjson").write_text("\n".join(bad) + "\n")
    (d / "part-00001.ndjson").write_bytes(b"\x80\x81\x82\x00\x01 binary junk\n")
    os.symlink(str(d / "gone.ndjson"), str(d / "part-00002.ndjson"))
    out = tmp_path_factory.mktemp("messy-out")
    lines = []
    res = job.run(spark, job.Config(input=str(root), out=str(out), report=False, log=lines.append))
    return res, lines, out, str(root)


def test_bad_records_are_counted_by_reason(messy):
    res, _, _, _ = messy
    q = res.quality
    assert q["skipped"] == {
        "malformed": 3,
        "mistyped": 2,
        "missing_device_id": 2,
        "missing_seq": 2,
        "bad_period": 1,
    }
    assert q["skipped_records"] == 10
    assert q["valid_records"] == 26 and q["clean_records"] == 23


def test_an_incremental_run_counts_bad_records_by_reason_as_a_batch_run_does(spark, messy, tmp_path):
    # its first run stages the new files and counts them in the same pass
    from fleetwire.host.analytics import job

    res, _, _, root = messy
    inc = job.run(spark, job.Config(input=root, out=str(tmp_path / "out"), report=False, incremental=True))
    for k in ("skipped", "skipped_records", "valid_records", "clean_records", "records_read"):
        assert inc.quality[k] == res.quality[k], k


def test_an_unreadable_file_is_skipped_and_named(messy):
    res, lines, _, _ = messy
    assert [u["path"].endswith("part-00002.ndjson") for u in res.quality["unreadable_files"]] == [True]
    assert any("unreadable file" in l and "part-00002.ndjson" in l for l in lines)


def test_the_log_says_what_was_skipped_with_counts(messy):
    _, lines, _, _ = messy
    text = "\n".join(lines)
    assert "read 36 records from 4 files: 26 valid, 10 skipped" in text
    assert "skipped 3 records: not a JSON object (malformed line)" in text
    assert "skipped 2 records: a field of the wrong type" in text
    assert "skipped 2 records: missing seq" in text
    assert "skipped 1 records: period_s not positive" in text


def test_the_tables_hold_only_the_good_records(messy):
    _, _, out, _ = messy
    assert sorted(table(out, "device_health")["device_id"]) == ["dev-a", "dev-b", "dev-c"]
    assert len(table(out, "clean")) == 23
    q = json.loads((out / "quality.json").read_text())
    assert q["skipped_records"] == 10


def test_the_cli_reports_a_missing_landing_zone_in_one_line(tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "fleetwire.tools.cli",
            "report",
            "--input",
            str(tmp_path / "nowhere"),
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "fleetwire report: error: landing zone %s does not exist (expected "
        "LANDING/date=YYYY-MM-DD/hour=HH/*.ndjson)" % (tmp_path / "nowhere")
    ]


def test_the_cli_explains_input_with_no_usable_record_without_a_java_trace(tmp_path, java):
    d = tmp_path / "landing" / "date=2026-01-05" / "hour=00"
    d.mkdir(parents=True)
    (d / "part-00000.ndjson").write_text('not json\n{"device_id": "x"}\n')
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "fleetwire.tools.cli",
            "report",
            "--input",
            str(tmp_path / "landing"),
            "--out",
            str(tmp_path / "out"),
            "--no-report",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert "fleetwire report: error: no usable records" in r.stderr
    assert "skipped 1 records: not a JSON object" in r.stderr and "skipped 1 records: missing seq" in r.stderr
    assert "at org.apache" not in r.stderr and "Traceback" not in r.stderr
